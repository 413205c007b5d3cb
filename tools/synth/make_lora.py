#!/usr/bin/env python3
"""Write a random LoRA adapter (llama.cpp's GGUF adapter format) for a base model file.

    make_lora.py BASE.gguf OUT.gguf [--rank R] [--alpha A] [--seed S] [--type f32|f16]
                 [--output] [--embedding] [--targets attn_q,attn_v,...]

For every block of BASE and every target matrix (default: the four attention and three FFN
matrices), `blk.N.<target>.weight.lora_a` (rank x inputs) and `.lora_b` (outputs x rank) hold
random values, sized so that the adapted model differs clearly from the base; `--output` adds
`output.weight` (untied heads only), `--embedding` adds `token_embd.weight` (llama.cpp's layout:
`lora_a` one row of rank values per token, `lora_b` embedding width x rank). Metadata: general.type = adapter, adapter.type = lora,
adapter.lora.alpha, general.architecture of BASE. Speed and correctness checks do not depend
on what the adapter has learned, only on its shapes.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gguf  # noqa: E402

TARGETS = ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("base")
    p.add_argument("out")
    p.add_argument("--rank", type=int, default=8)
    p.add_argument("--alpha", type=float, default=16.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--type", choices=["f32", "f16"], default="f32")
    p.add_argument("--output", action="store_true")
    p.add_argument("--embedding", action="store_true")
    p.add_argument("--targets", default=",".join(TARGETS))
    a = p.parse_args()

    base = gguf.GGUFReader(a.base)
    arch = base.fields["general.architecture"].contents()
    shapes = {t.name: [int(d) for d in t.shape] for t in base.tensors}  # ggml order: [in, out]
    rng = np.random.default_rng(a.seed)
    dtype = np.float32 if a.type == "f32" else np.float16
    w = gguf.GGUFWriter(a.out, arch)
    w.add_string("general.type", "adapter")
    w.add_string("adapter.type", "lora")
    w.add_float32("adapter.lora.alpha", a.alpha)
    names = [f"blk.{i}.{t}.weight" for i in range(10_000) for t in a.targets.split(",")]
    names = [n for n in names if n in shapes]
    if a.output:
        if "output.weight" not in shapes:
            sys.exit("the base has no separate output.weight")
        names.append("output.weight")
    if a.embedding:
        names.append("token_embd.weight")
    for name in names:
        n_in, n_out = shapes[name]
        if name == "token_embd.weight":
            # llama.cpp's layout for the embedding: A flipped (one row of `rank` per token,
            # gathered), B not transposed: the delta of token t is B @ A[t].
            lora_a = rng.standard_normal((n_out, a.rank))
            lora_b = rng.standard_normal((n_in, a.rank)) * (0.6 / a.rank)
        else:
            lora_a = rng.standard_normal((a.rank, n_in)) / np.sqrt(n_in)
            lora_b = rng.standard_normal((n_out, a.rank)) * (0.6 / a.rank)
        w.add_tensor(f"{name}.lora_a", lora_a.astype(dtype))
        w.add_tensor(f"{name}.lora_b", lora_b.astype(dtype))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(a.out)


if __name__ == "__main__":
    main()
