#!/usr/bin/env python3
"""Bytes of weights one decoded token reads: every matrix of every layer and the output head
(the token embedding when the head is tied to it), from the GGUF's tensor table. The same set
as the engine's Model::weight_bytes_per_token; llama.cpp multiplies by the same tensors.

    weight-bytes.py MODEL.gguf   prints the byte count
"""
import re
import sys

from gguf import GGUFReader

MATRIX = re.compile(r"blk\.\d+\.(attn_(q|k|v|output)|ffn_(gate|up|down))\.weight")


def main() -> None:
    tensors = {t.name: int(t.n_bytes) for t in GGUFReader(sys.argv[1]).tensors}
    head = tensors.get("output.weight", tensors["token_embd.weight"])
    print(head + sum(n for name, n in tensors.items() if MATRIX.fullmatch(name)))


if __name__ == "__main__":
    main()
