#!/usr/bin/env python3
"""Writes tiny GGUF models with random weights that llama.cpp loads and runs.

    python3 tools/synth/make_model.py KIND OUT.gguf [--seed N]
    python3 tools/synth/make_model.py --list

Kinds (all: 2 layers, d_model 64, 4 heads, 2 KV heads, ctx 256, a vocab of a few
hundred tokens learned from a small corpus, a ChatML chat template):

  llama-spm      llama arch, SentencePiece "llama" vocab with byte fallback;
                 F16/Q8_0/F32/Q4_0/Q4_1 weights.
  llama-bpe      llama arch, byte-level BPE ("gpt2", pre "llama-bpe");
                 Q8_0/Q5_0/Q5_1/Q4_1/F16 weights.
  qwen2          qwen2 arch (Q/K/V biases, NEOX rope), BPE pre "qwen2";
                 Q4_1/BF16/Q8_0/F16 weights.
  qwen3          qwen3 arch (Q/K RMS norms, head_dim 32 != d_model/heads,
                 tied output embedding, larger residual branches so the
                 tied logits don't just echo the input token), BPE pre "qwen2"; Q8_0/F16/Q5_0 weights.
  mistral-f32    llama arch with linear rope scaling (factor 2, freq base 1e6),
                 SentencePiece vocab, every tensor F32 (an exact reference).

Phone-scale kinds for speed measurements (F16 matrices, to be quantized by
llama.cpp's llama-quantize; the vocabulary is padded with unused tokens to the
real model's size, so the output head costs what it costs there):

  llama-1b       Llama 3.2 1B's shape: d_model 2048, 16 layers, 32 heads, 8 KV
                 heads, FFN 8192, 128256 tokens, tied embeddings (~1.24 B).
  qwen3-1.7b     Qwen3 1.7B's shape: d_model 2048, 28 layers, 16 heads of 128,
                 8 KV heads, FFN 6144, QK norms, 151936 tokens, tied (~2.0 B).

Weights are deterministic for a given (kind, seed). Requires the PyPI `gguf`
package (0.19.0) and numpy. K-quants are not used: gguf's numpy quantizer has
none.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from dataclasses import dataclass, field

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gguf  # noqa: E402
from gguf import GGMLQuantizationType as Q  # noqa: E402

import vocab as vocab_mod  # noqa: E402

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


@dataclass
class Spec:
    """Shape, tokenizer and tensor types of one kind of synthetic model."""

    arch: str
    tokenizer: str  # "spm" or "bpe"
    pre: str | None = None
    n_layer: int = 2
    d_model: int = 64
    n_head: int = 4
    n_kv: int = 2
    head_dim: int = 16
    explicit_head_dim: bool = False
    ffn: int = 128
    ctx: int = 256
    eps: float = 1e-5
    rope_base: float = 10000.0
    rope_scaling: float | None = None
    qkv_bias: bool = False
    qk_norm: bool = False
    tied: bool = False
    resid_gain: float = 0.5
    add_bos: bool = True
    types: dict[str, Q] = field(default_factory=dict)
    # Pad the vocabulary with unused tokens to this size (0: no padding).
    n_vocab: int = 0
    # Add Qwen2.5-Coder's fill-in-the-middle tokens (found by their text, as llama.cpp does).
    fim: bool = False


# Every matrix F16 (phone-scale kinds: llama-quantize picks the real types).
ALL_F16 = {name: Q.F16 for name in ("token_embd", "attn_q", "attn_k", "attn_v", "attn_output",
                                    "ffn_gate", "ffn_up", "ffn_down", "output")}


KINDS: dict[str, Spec] = {
    "llama-spm": Spec(
        arch="llama",
        tokenizer="spm",
        types=dict(token_embd=Q.F16, attn_q=Q.Q8_0, attn_k=Q.Q8_0, attn_v=Q.F32,
                   attn_output=Q.F16, ffn_gate=Q.Q4_0, ffn_up=Q.Q4_1, ffn_down=Q.Q8_0,
                   output=Q.Q8_0),
    ),
    "llama-bpe": Spec(
        arch="llama",
        tokenizer="bpe",
        pre="llama-bpe",
        eps=1e-6,
        rope_base=500000.0,
        types=dict(token_embd=Q.Q8_0, attn_q=Q.Q5_0, attn_k=Q.Q5_1, attn_v=Q.Q8_0,
                   attn_output=Q.Q4_1, ffn_gate=Q.Q5_0, ffn_up=Q.Q5_1, ffn_down=Q.Q4_1,
                   output=Q.F16),
    ),
    "qwen2": Spec(
        arch="qwen2",
        tokenizer="bpe",
        pre="qwen2",
        eps=1e-6,
        rope_base=1000000.0,
        qkv_bias=True,
        add_bos=False,
        types=dict(token_embd=Q.Q4_1, attn_q=Q.BF16, attn_k=Q.Q8_0, attn_v=Q.F16,
                   attn_output=Q.Q8_0, ffn_gate=Q.BF16, ffn_up=Q.Q8_0, ffn_down=Q.F16,
                   output=Q.Q8_0),
    ),
    "qwen3": Spec(
        arch="qwen3",
        tokenizer="bpe",
        pre="qwen2",
        head_dim=32,
        explicit_head_dim=True,
        eps=1e-6,
        rope_base=1000000.0,
        qk_norm=True,
        tied=True,
        resid_gain=6.0,
        add_bos=False,
        types=dict(token_embd=Q.Q8_0, attn_q=Q.F16, attn_k=Q.Q8_0, attn_v=Q.Q5_0,
                   attn_output=Q.F16, ffn_gate=Q.Q8_0, ffn_up=Q.F16, ffn_down=Q.Q5_0),
    ),
    "mistral-f32": Spec(
        arch="llama",
        tokenizer="spm",
        rope_base=1000000.0,
        rope_scaling=2.0,
    ),
    "llama-1b": Spec(
        arch="llama",
        tokenizer="bpe",
        pre="llama-bpe",
        n_layer=16,
        d_model=2048,
        n_head=32,
        n_kv=8,
        head_dim=64,
        ffn=8192,
        ctx=4096,
        rope_base=500000.0,
        tied=True,
        n_vocab=128256,
        types=ALL_F16,
    ),
    "qwen3-1.7b": Spec(
        arch="qwen3",
        tokenizer="bpe",
        pre="qwen2",
        n_layer=28,
        d_model=2048,
        n_head=16,
        n_kv=8,
        head_dim=128,
        explicit_head_dim=True,
        ffn=6144,
        ctx=4096,
        eps=1e-6,
        rope_base=1000000.0,
        qk_norm=True,
        tied=True,
        add_bos=False,
        n_vocab=151936,
        types=ALL_F16,
    ),
}


# qwen2 with Qwen2.5-Coder's fill-in-the-middle tokens.
KINDS["qwen2-fim"] = dataclasses.replace(KINDS["qwen2"], fim=True)

FIM_SPECIALS = ["<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>"]


def build_vocab(spec: Spec) -> vocab_mod.Vocab:
    """The tokenizer vocabulary of a kind (padded with unused tokens to ``spec.n_vocab``)."""
    specials = SPECIALS + (FIM_SPECIALS if spec.fim else [])
    if spec.tokenizer == "spm":
        voc = vocab_mod.sentencepiece(specials)
    else:
        voc = vocab_mod.byte_level_bpe(specials)
    for i in range(spec.n_vocab - len(voc.tokens)):
        voc.add(f"[unused{i}]", vocab_mod.UNUSED)
    return voc


def encode(data: np.ndarray, qtype: Q) -> np.ndarray:
    """Converts float32 data to the on-disk representation of ``qtype``."""
    if qtype == Q.F32:
        return data.astype(np.float32)
    if qtype == Q.F16:
        return data.astype(np.float16)
    return gguf.quants.quantize(data.astype(np.float32), qtype)


def make_tensors(spec: Spec, n_vocab: int, rng: np.random.Generator):
    """Yields (name, float32 array, type) for every tensor; arrays are [rows, cols]."""
    d, hd, ff = spec.d_model, spec.head_dim, spec.ffn
    q_dim, kv_dim = spec.n_head * hd, spec.n_kv * hd

    def mat(rows: int, cols: int, gain: float) -> np.ndarray:
        # std gain/sqrt(cols): each output has std ~gain for unit-variance inputs.
        return (rng.standard_normal((rows, cols)) * (gain / np.sqrt(cols))).astype(np.float32)

    def norm(n: int) -> np.ndarray:
        return (1.0 + 0.2 * rng.uniform(-1.0, 1.0, n)).astype(np.float32)

    def ty(name: str) -> Q:
        return spec.types.get(name, Q.F32)

    yield "token_embd.weight", rng.standard_normal((n_vocab, d)).astype(np.float32), ty("token_embd")
    for i in range(spec.n_layer):
        p = f"blk.{i}."
        yield p + "attn_norm.weight", norm(d), Q.F32
        yield p + "attn_q.weight", mat(q_dim, d, 1.5), ty("attn_q")
        yield p + "attn_k.weight", mat(kv_dim, d, 1.5), ty("attn_k")
        yield p + "attn_v.weight", mat(kv_dim, d, 1.0), ty("attn_v")
        if spec.qkv_bias:
            yield p + "attn_q.bias", (0.1 * rng.standard_normal(q_dim)).astype(np.float32), Q.F32
            yield p + "attn_k.bias", (0.1 * rng.standard_normal(kv_dim)).astype(np.float32), Q.F32
            yield p + "attn_v.bias", (0.1 * rng.standard_normal(kv_dim)).astype(np.float32), Q.F32
        if spec.qk_norm:
            yield p + "attn_q_norm.weight", norm(hd), Q.F32
            yield p + "attn_k_norm.weight", norm(hd), Q.F32
        yield p + "attn_output.weight", mat(d, q_dim, spec.resid_gain), ty("attn_output")
        yield p + "ffn_norm.weight", norm(d), Q.F32
        yield p + "ffn_gate.weight", mat(ff, d, 1.0), ty("ffn_gate")
        yield p + "ffn_up.weight", mat(ff, d, 1.0), ty("ffn_up")
        yield p + "ffn_down.weight", mat(d, ff, spec.resid_gain), ty("ffn_down")
    yield "output_norm.weight", norm(d), Q.F32
    if not spec.tied:
        # Logits with std ~4: clear winners, so greedy decoding is robust to rounding.
        yield "output.weight", mat(n_vocab, d, 4.0), ty("output")


def write_model(kind: str, path: str, seed: int, chat_template: str = CHATML) -> None:
    """Writes the synthetic model ``kind`` to ``path`` (with ``chat_template``)."""
    spec = KINDS[kind]
    voc = build_vocab(spec)
    rng = np.random.default_rng([seed, sum(kind.encode())])
    arch = spec.arch
    tmp = path + ".tmp"
    w = gguf.GGUFWriter(tmp, arch)
    w.add_name(f"synthetic-{kind}")
    w.add_context_length(spec.ctx)
    w.add_embedding_length(spec.d_model)
    w.add_block_count(spec.n_layer)
    w.add_feed_forward_length(spec.ffn)
    w.add_head_count(spec.n_head)
    w.add_head_count_kv(spec.n_kv)
    w.add_layer_norm_rms_eps(spec.eps)
    w.add_rope_freq_base(spec.rope_base)
    w.add_rope_dimension_count(spec.head_dim)
    if spec.explicit_head_dim:
        w.add_key_length(spec.head_dim)
        w.add_value_length(spec.head_dim)
    if spec.rope_scaling is not None:
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(spec.rope_scaling)
    w.add_vocab_size(len(voc.tokens))

    w.add_tokenizer_model(voc.model)
    if spec.pre is not None:
        w.add_tokenizer_pre(spec.pre)
    w.add_token_list(voc.tokens)
    w.add_token_types(voc.types)
    if voc.model == "llama":
        w.add_token_scores(voc.scores)
        w.add_bos_token_id(voc.id("<s>"))
        w.add_eos_token_id(voc.id("</s>"))
        w.add_unk_token_id(voc.id("<unk>"))
        w.add_add_space_prefix(True)
    else:
        w.add_token_merges(voc.merges)
        w.add_bos_token_id(voc.id("<|endoftext|>"))
        w.add_eos_token_id(voc.id("<|im_end|>"))
        w.add_pad_token_id(voc.id("<|endoftext|>"))
    w.add_add_bos_token(spec.add_bos)
    w.add_add_eos_token(False)
    w.add_chat_template(chat_template)

    for name, data, qtype in make_tensors(spec, len(voc.tokens), rng):
        w.add_tensor(name, encode(data, qtype), raw_dtype=qtype)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", nargs="?", choices=sorted(KINDS))
    parser.add_argument("out", nargs="?", help="output .gguf path")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--list", action="store_true", help="print the kinds and exit")
    parser.add_argument("--chat-template", metavar="FILE",
                        help="store this Jinja file as the chat template (default: ChatML)")
    args = parser.parse_args()
    if args.list:
        print("\n".join(sorted(KINDS)))
        return
    if args.kind is None or args.out is None:
        parser.error("KIND and OUT are required")
    template = CHATML
    if args.chat_template:
        with open(args.chat_template, encoding="utf-8") as f:
            template = f.read()
    write_model(args.kind, args.out, args.seed, template)
    print(args.out)


if __name__ == "__main__":
    main()
