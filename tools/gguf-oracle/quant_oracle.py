#!/usr/bin/env python3
"""Oracle for the engine's quant tests, built on the PyPI `gguf` package's numpy (de)quantizers.

Subcommands (all files little-endian):
  dequant <dir>   For every line "<TYPE> <n_elements> <name>" in <dir>/manifest.txt, read the raw
                  blocks <dir>/<name>.bin, dequantize with gguf.quants.dequantize and write f32s to
                  <dir>/<name>.f32. Types gguf cannot dequantize are skipped with a line in
                  <dir>/skipped.txt.
  quantize <dir>  For every line "<TYPE> <n_elements> <name>" in <dir>/quant_manifest.txt, read f32s
                  from <dir>/<name>.f32in, quantize with gguf.quants.quantize and write the blocks
                  to <dir>/<name>.q.
  model <gguf> <out.json> [full]
                  For every tensor of the model, dequantize a sample of rows (every k-th row with k
                  chosen so about SAMPLE elements are compared, plus the last row; all rows with
                  "full") and write name, type code, absolute data offset, row length, the compared
                  row indices and a position-weighted checksum of the f32 bit patterns:
                  sum_k bits[k] * (k * 0x9E3779B97F4A7C15 + 1) mod 2^64 over compared elements k.
"""

import json
import sys
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader
from gguf.quants import dequantize, quantize

SAMPLE = 64 * 1024
MULT = np.uint64(0x9E3779B97F4A7C15)


def read_manifest(path):
    for line in Path(path).read_text().splitlines():
        if line.strip():
            ty, n, name = line.split()
            yield T[ty], int(n), name


def cmd_dequant(d):
    d = Path(d)
    skipped = []
    for ty, n, name in read_manifest(d / "manifest.txt"):
        raw = np.fromfile(d / f"{name}.bin", dtype=np.uint8)
        try:
            out = dequantize(raw, ty)
        except NotImplementedError:
            skipped.append(ty.name)
            continue
        out = np.asarray(out, dtype=np.float32).reshape(-1)
        assert out.size == n, (name, out.size, n)
        out.astype("<f4").tofile(d / f"{name}.f32")
    (d / "skipped.txt").write_text("\n".join(skipped))


def cmd_quantize(d):
    d = Path(d)
    for ty, n, name in read_manifest(d / "quant_manifest.txt"):
        x = np.fromfile(d / f"{name}.f32in", dtype="<f4").astype(np.float32)
        assert x.size == n
        q = quantize(x.reshape(1, n), ty)
        np.ascontiguousarray(q).view(np.uint8).tofile(d / f"{name}.q")


def checksum(values, start):
    bits = np.ascontiguousarray(values, dtype="<f4").reshape(-1).view("<u4").astype(np.uint64)
    k = np.arange(start, start + bits.size, dtype=np.uint64)
    with np.errstate(over="ignore"):
        return np.uint64(np.sum(bits * (k * MULT + np.uint64(1)), dtype=np.uint64))


def cmd_model(path, out, full):
    reader = GGUFReader(path)
    records = []
    for t in reader.tensors:
        ne0 = int(t.shape[0])
        rows = int(t.n_elements) // ne0
        stride = 1 if full else max(1, int(t.n_elements) // SAMPLE)
        picked = list(range(0, rows, stride))
        if picked[-1] != rows - 1:
            picked.append(rows - 1)
        data = t.data.reshape(rows, -1)
        total = np.uint64(0)
        k = 0
        chunk = max(1, (4 * 1024 * 1024) // ne0)
        for lo in range(0, len(picked), chunk):
            sel = picked[lo:lo + chunk]
            block = data[sel[0]:sel[-1] + 1] if stride == 1 else data[np.asarray(sel)]
            vals = np.asarray(dequantize(block, t.tensor_type), dtype=np.float32).reshape(-1)
            with np.errstate(over="ignore"):
                total = total + checksum(vals, k)
            k += vals.size
        records.append({
            "name": t.name,
            "type": int(t.tensor_type),
            "offset": int(t.data_offset),
            "n_bytes": int(t.n_bytes),
            "ne0": ne0,
            "rows": rows,
            "picked": picked,
            "checksum": int(total),
        })
    Path(out).write_text(json.dumps(records))


def main():
    cmd = sys.argv[1]
    if cmd == "dequant":
        cmd_dequant(sys.argv[2])
    elif cmd == "quantize":
        cmd_quantize(sys.argv[2])
    elif cmd == "model":
        cmd_model(sys.argv[2], sys.argv[3], len(sys.argv) > 4 and sys.argv[4] == "full")
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
