#!/usr/bin/env python3
"""Writes rust/engine/src/quant/iq_grids.rs: the i-quant codebooks (lattice grids) of llama.cpp's
ggml-common.h, packed a few bits per value (the grids use 3 or 8 distinct byte values; the packed
form is 4x smaller and is expanded at compile time).

    python3 scripts/dev/gen-iq-grids.py [path/to/ggml-common.h]

Default source: the llama.cpp sources scripts/setup/build-llama.sh unpacks from the PyPI sdist
llama-cpp-python==0.3.36. The tables are format data (the grids *are* the formats); the
dequantization test checks every entry against the PyPI `gguf` package's own copy.
"""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = Path.home() / ".cache/local-llm/llama.cpp/src/ggml/src/ggml-common.h"

# (table, bytes per entry, the byte values in index order, Rust name)
TABLES = [
    ("iq2xxs_grid", 8, [0x08, 0x19, 0x2B], "IQ2XXS"),
    ("iq2xs_grid", 8, [0x08, 0x19, 0x2B], "IQ2XS"),
    ("iq2s_grid", 8, [0x08, 0x19, 0x2B], "IQ2S"),
    ("iq3xxs_grid", 4, [0x04, 0x0C, 0x14, 0x1C, 0x24, 0x2C, 0x34, 0x3E], "IQ3XXS"),
    ("iq3s_grid", 4, [0x01, 0x03, 0x05, 0x07, 0x09, 0x0B, 0x0D, 0x0F], "IQ3S"),
    ("iq1s_grid", 8, [0xFF, 0x00, 0x01], "IQ1S"),
]


def table(src: str, name: str) -> list[int]:
    m = re.search(r"GGML_TABLE_BEGIN\(\w+, " + name + r", \w+\)(.*?)GGML_TABLE_END", src, re.S)
    if not m:
        sys.exit(f"gen-iq-grids: no table {name}")
    return [int(v, 16) for v in re.findall(r"0x[0-9a-fA-F]+", m.group(1))]


def main() -> None:
    src = Path(sys.argv[1] if len(sys.argv) > 1 else DEFAULT).read_text()
    out = [
        "//! The i-quant codebooks of llama.cpp's `ggml-common.h` (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,",
        "//! IQ3_S, IQ1_S/IQ1_M), packed: each grid entry's bytes take few distinct values, so an",
        "//! entry is stored as one index per byte (2 bits for the 8-byte grids, 3 bits for the 4-byte",
        "//! ones) and expanded to bytes at compile time. Written by `scripts/dev/gen-iq-grids.py`; the",
        "//! dequantization oracle test checks every entry against the PyPI `gguf` package's copy.",
        "",
        "/// Expands packed entries of `W` bytes, `bits` bits per byte, through `values`.",
        "const fn expand<const N: usize, const W: usize>(",
        "    packed: &[u16; N],",
        "    bits: u32,",
        "    values: &[u8],",
        ") -> [[u8; W]; N] {",
        "    let mut out = [[0u8; W]; N];",
        "    let mut i = 0;",
        "    while i < N {",
        "        let mut j = 0;",
        "        while j < W {",
        "            let k = (packed[i] >> (bits * j as u32)) & ((1 << bits) - 1);",
        "            out[i][j] = values[k as usize];",
        "            j += 1;",
        "        }",
        "        i += 1;",
        "    }",
        "    out",
        "}",
    ]
    for name, width, values, rust in TABLES:
        entries = table(src, name)
        bits = 2 if width == 8 else 3
        packed = []
        for e in entries:
            p = 0
            for j in range(width):
                p |= values.index((e >> (8 * j)) & 0xFF) << (bits * j)
            packed.append(p)
        vals = ", ".join(f"0x{v:02x}" for v in values)
        kind = "i8 (as bytes)" if rust == "IQ1S" else "u8"
        out += [
            "",
            f"const {rust}_PACKED: [u16; {len(packed)}] = [",
            *("    " + ", ".join(f"0x{p:04x}" for p in packed[i:i + 12]) + "," for i in range(0, len(packed), 12)),
            "];",
            "",
            f"/// `{name}`: {len(packed)} entries of {width} {kind} values.",
            f"pub(crate) static {rust}_GRID: [[u8; {width}]; {len(packed)}] =",
            f"    expand(&{rust}_PACKED, {bits}, &[{vals}]);",
        ]
    path = ROOT / "rust/engine/src/quant/iq_grids.rs"
    path.write_text("\n".join(out) + "\n")
    subprocess.run(["rustfmt", "--edition", "2021", str(path)], check=True)
    print(path)


if __name__ == "__main__":
    main()
