#!/usr/bin/env python3
"""Independent GGUF oracle for the engine's GGUF reader tests, built on the PyPI `gguf` package.

Subcommands:
  dump FILE        Print FILE's header as JSON, as read by gguf.GGUFReader: version, alignment,
                   data offset, byte order, every metadata pair (value type chain and full value,
                   arrays flattened to their leaf values as GGUFReader does, floats as IEEE bit
                   patterns so the comparison is exact) and every tensor (name, dims, type code,
                   absolute data offset, byte size, CRC-32 of its data).
  summary FILE     Print what a model picker shows of FILE, as JSON, computed with GGUFReader:
                   architecture, name, parameters (product of each tensor's dims, summed), bytes
                   of tensor data, llama_ftype name of general.file_type (gguf.LlamaFileType,
                   prefix MOSTLY_/ALL_ dropped), tensor count and bytes per type name
                   (gguf.GGMLQuantizationType), {arch}.context_length / embedding_length /
                   block_count / attention.head_count / head_count_kv (head_count when absent),
                   vocabulary size, tokenizer model and chat template.
  unsupported OUT  Write a small model file of an architecture the engine does not run ("phi3",
                   general.file_type 30 = IQ4_XS) with F16/F32 tensors.
  synth OUT_DIR    Write synthetic files with gguf.GGUFWriter:
                     all_types.gguf  every metadata value type, nested arrays, tensors of several
                                     types (random bytes), little-endian v3;
                     aligned64.gguf  same metadata with general.alignment = 64;
                     big_q4_1.gguf   big-endian (GGUFWriter endianess=BIG) with a Q4_1 tensor,
                                     a type gguf_convert_endian.py cannot convert.
"""

import json
import struct
import sys
import zlib
from pathlib import Path

import numpy as np

import gguf
from gguf import GGUFValueType as VT

FLOAT_BITS = {VT.FLOAT32: ("<f", "<I"), VT.FLOAT64: ("<d", "<Q")}


def leaf(value, vtype):
    """JSON form of one scalar value of type vtype."""
    if vtype in FLOAT_BITS:
        f, i = FLOAT_BITS[vtype]
        return struct.unpack(i, struct.pack(f, value))[0]
    if vtype == VT.BOOL:
        return bool(value)
    return value


def dump(path):
    r = gguf.GGUFReader(path)
    metadata = []
    for name, field in r.fields.items():
        if name.startswith("GGUF."):
            continue  # header pseudo-fields
        types = [t.name for t in field.types]
        main = field.types[0]
        if main == VT.ARRAY:
            leaf_type = field.types[-1]
            values = field.contents()
            value = [leaf(v, leaf_type) for v in values] if leaf_type != VT.ARRAY else []
            # Outermost array length: parts are key length, key, type, element type, length, ...
            count = int(field.parts[4][0])
        else:
            value = leaf(field.contents(), main)
            count = None
        metadata.append({"key": name, "types": types, "value": value, "count": count})
    tensors = []
    for t in r.tensors:
        data = np.asarray(t.data).view(np.uint8).reshape(-1)
        tensors.append({
            "name": t.name,
            "dims": [int(d) for d in t.field.parts[3]],
            "type": int(t.tensor_type),
            "offset": int(t.data_offset),
            "n_bytes": int(t.n_bytes),
            "crc32": zlib.crc32(data.tobytes()) & 0xFFFFFFFF,
        })
    out = {
        "version": int(r.fields["GGUF.version"].parts[0][0]),
        "alignment": int(r.alignment),
        "data_offset": int(r.data_offset),
        "big_endian": r.endianess == gguf.GGUFEndian.BIG,
        "metadata": metadata,
        "tensors": tensors,
    }
    json.dump(out, sys.stdout)


def add_metadata(w):
    w.add_key_value("t.u8", 200, VT.UINT8)
    w.add_key_value("t.i8", -100, VT.INT8)
    w.add_key_value("t.u16", 60000, VT.UINT16)
    w.add_key_value("t.i16", -30000, VT.INT16)
    w.add_key_value("t.u32", 4_000_000_000, VT.UINT32)
    w.add_key_value("t.i32", -2_000_000_000, VT.INT32)
    w.add_key_value("t.u64", 2**64 - 5, VT.UINT64)
    w.add_key_value("t.i64", -(2**62), VT.INT64)
    w.add_key_value("t.f32", 3.25, VT.FLOAT32)
    w.add_key_value("t.f32.neg", -1.0e-30, VT.FLOAT32)
    w.add_key_value("t.f64", 2.0 ** -1000, VT.FLOAT64)
    w.add_key_value("t.bool.true", True, VT.BOOL)
    w.add_key_value("t.bool.false", False, VT.BOOL)
    w.add_key_value("t.str", "héllo ✓ wörld", VT.STRING)
    w.add_key_value("t.str.empty", "", VT.STRING)
    w.add_key_value("t.arr.u8", [0, 1, 255], VT.ARRAY, VT.UINT8)
    w.add_key_value("t.arr.i8", [-128, 0, 127], VT.ARRAY, VT.INT8)
    w.add_key_value("t.arr.u16", [1, 65535], VT.ARRAY, VT.UINT16)
    w.add_key_value("t.arr.i16", [-32768, 32767], VT.ARRAY, VT.INT16)
    w.add_key_value("t.arr.u32", list(range(1000)), VT.ARRAY, VT.UINT32)
    w.add_key_value("t.arr.i32", [-5, 5], VT.ARRAY, VT.INT32)
    w.add_key_value("t.arr.u64", [2**64 - 1, 0], VT.ARRAY, VT.UINT64)
    w.add_key_value("t.arr.i64", [-(2**63), 2**63 - 1], VT.ARRAY, VT.INT64)
    w.add_key_value("t.arr.f32", [0.5, -2.0, 1e30], VT.ARRAY, VT.FLOAT32)
    w.add_key_value("t.arr.f64", [0.1, -1e300], VT.ARRAY, VT.FLOAT64)
    w.add_key_value("t.arr.bool", [True, False, True], VT.ARRAY, VT.BOOL)
    w.add_key_value("t.arr.str", ["a", "", "ü✓", "<0x0A>"], VT.ARRAY, VT.STRING)
    w.add_key_value("t.arr.nested", [[1, 2, 3], [4], [5, 6]], VT.ARRAY)
    w.add_key_value("t.arr.nested.str", [["x", "y"], ["z"]], VT.ARRAY)
    w.add_key_value("t.arr.nested3", [[[1.5], [2.5, 3.5]], [[4.5]]], VT.ARRAY)


# (name, type, dims in GGUF order). Row lengths are whole blocks.
SYNTH_TENSORS = [
    ("f32.a", gguf.GGMLQuantizationType.F32, [7, 3]),
    ("f16.b", gguf.GGMLQuantizationType.F16, [5]),
    ("bf16.c", gguf.GGMLQuantizationType.BF16, [4, 2, 3]),
    ("q4_0.d", gguf.GGMLQuantizationType.Q4_0, [64, 3]),
    ("q8_0.e", gguf.GGMLQuantizationType.Q8_0, [32, 2, 1, 2]),
    ("q4_k.f", gguf.GGMLQuantizationType.Q4_K, [256, 2]),
    ("q6_k.g", gguf.GGMLQuantizationType.Q6_K, [512, 1]),
]


def add_tensors(w, rng):
    for name, qtype, dims in SYNTH_TENSORS:
        block, type_size = gguf.constants.GGML_QUANT_SIZES[qtype]
        rows = int(np.prod(dims[1:])) if len(dims) > 1 else 1
        row_bytes = dims[0] // block * type_size
        # numpy shape is reversed GGUF order; the byte shape's last axis is the row in bytes.
        byte_shape = list(reversed(dims[1:])) + [row_bytes]
        data = rng.integers(0, 256, size=rows * row_bytes, dtype=np.uint8).reshape(byte_shape)
        w.add_tensor(name, data, raw_dtype=qtype)


def write(path, alignment=None):
    rng = np.random.default_rng(1234)
    w = gguf.GGUFWriter(str(path), "synthetic")
    if alignment is not None:
        w.add_custom_alignment(alignment)
    add_metadata(w)
    add_tensors(w, rng)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_big_q4_1(path):
    w = gguf.GGUFWriter(str(path), "synthetic", endianess=gguf.GGUFEndian.BIG)
    w.add_key_value("t.u32", 7, VT.UINT32)
    w.add_tensor("f32.a", np.arange(8, dtype=np.float32))
    w.add_tensor("q4_1.b", np.zeros((2, 20), dtype=np.uint8), raw_dtype=gguf.GGMLQuantizationType.Q4_1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def synth(out_dir):
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write(out / "all_types.gguf")
    write(out / "aligned64.gguf", alignment=64)
    write_big_q4_1(out / "big_q4_1.gguf")


def summary(path):
    r = gguf.GGUFReader(path)

    def field(key):
        f = r.fields.get(key)
        if f is None:
            return None
        return f.contents()

    arch = field("general.architecture") or ""
    types = {}
    for t in r.tensors:
        name = gguf.GGMLQuantizationType(int(t.tensor_type)).name
        count, size = types.get(name, (0, 0))
        types[name] = (count + 1, size + int(t.n_bytes))
    ftype = field("general.file_type")
    ftype_name = None
    if ftype is not None:
        try:
            ftype_name = gguf.LlamaFileType(int(ftype)).name
            for prefix in ("MOSTLY_", "ALL_"):
                ftype_name = ftype_name.removeprefix(prefix)
        except ValueError:
            pass
    tokens = r.fields.get("tokenizer.ggml.tokens")
    head_count = field(f"{arch}.attention.head_count")
    out = {
        "architecture": arch,
        "name": field("general.name"),
        "n_params": sum(int(np.prod([int(d) for d in t.shape])) for t in r.tensors),
        "weights_bytes": sum(int(t.n_bytes) for t in r.tensors),
        "file_type": ftype_name,
        "tensor_types": {k: {"count": c, "bytes": b} for k, (c, b) in types.items()},
        "context_length": field(f"{arch}.context_length"),
        "embedding_length": field(f"{arch}.embedding_length"),
        "n_layer": field(f"{arch}.block_count"),
        "n_head": head_count,
        "n_head_kv": field(f"{arch}.attention.head_count_kv") or head_count,
        "n_vocab": len(tokens.data) if tokens is not None else None,
        "tokenizer": field("tokenizer.ggml.model"),
        "chat_template": field("tokenizer.chat_template"),
    }
    json.dump(out, sys.stdout)


def write_unsupported(path):
    w = gguf.GGUFWriter(path, "phi3")
    w.add_name("Synthetic Phi-3 shape")
    w.add_context_length(4096)
    w.add_embedding_length(64)
    w.add_block_count(2)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_file_type(30)
    w.add_tokenizer_model("llama")
    w.add_token_list([f"t{i}" for i in range(100)])
    w.add_chat_template("{% for m in messages %}{{ m.content }}{% endfor %}")
    rng = np.random.default_rng(0)
    w.add_tensor("token_embd.weight", rng.standard_normal((100, 64)).astype(np.float16))
    w.add_tensor("output_norm.weight", np.ones(64, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "dump":
        dump(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "summary":
        summary(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "unsupported":
        write_unsupported(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "synth":
        synth(sys.argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
