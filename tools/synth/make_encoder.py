#!/usr/bin/env python3
"""Writes tiny encoder (BERT-family) GGUF models with random weights that llama.cpp loads.

    python3 tools/synth/make_encoder.py KIND OUT.gguf [--seed N] [--f32]
    python3 tools/synth/make_encoder.py --list

Kinds (all, unless noted: 2 layers, d_model 64, 4 heads of 16, FFN 128, 128 positions,
bidirectional attention, a WordPiece vocabulary, tokenizer.ggml.model "bert", built from
vocab.py's corpus: [PAD] [UNK] [CLS] [SEP] [MASK], every character alone and after the
word-start mark "▁", and the corpus's words):

  bert           BERT / all-MiniLM / BGE layout: token, token-type and learned position
                 embeddings, token_embd_norm, Q/K/V/output biases, LayerNorms of the
                 residual sums (attn_output_norm, layer_output_norm), GELU feed-forward
                 with biases; mean pooling. F16/Q8_0/F32 matrices.
  bert-rank      bert with a cross-encoder classification head (cls: dense + tanh,
                 cls.output: one score) and rank pooling, as bge-reranker.
  nomic-bert     nomic-embed-text's layout: fused attn_qkv, NEOX RoPE (base 1000) instead
                 of position embeddings, SwiGLU feed-forward without biases; mean pooling.
  gemma-embedding  EmbeddingGemma's layout (Gemma 3's block: RMS norms, per-head Q/K norms,
                 post norms, GeGLU, input scaled by sqrt(d_model)), 6 layers (the last one
                 global), 2 KV heads, a symmetric sliding window of 8 positions (RoPE base
                 1e4 local, 1e6 global), and the dense projections after pooling (dense_2:
                 64 -> 96, dense_3: 96 -> 64); mean pooling.
  modern-bert    ModernBERT's layout: 4 layers, fused attn_qkv, NEOX RoPE, pre-LayerNorms
                 without biases (none before layer 0's attention), GeGLU feed-forward (one
                 ffn_up of 2*FFN rows, the activated half first), no biases anywhere; a
                 symmetric sliding window of 8 positions on layers 1 and 2 (llama.cpp's
                 default pattern 3, dense first; RoPE base 1e4 there, 160000 on the global
                 layers 0 and 3); layer_norm_eps 1e-5; mean pooling.
  modern-bert-rank  modern-bert with hidden_activation "silu" (SwiGLU) and a classification
                 head as gte-reranker-modernbert: mean pooling, cls (dense, no bias) + GELU,
                 cls.norm (LayerNorm without bias), cls.output (one score); rank pooling.
  jina-bert-v2   jina-embeddings-v2's layout: d_model 96, 6 heads of 16 (ALiBi's second
                 slope series), no position embeddings (ALiBi), token-type embeddings,
                 LayerNorms with biases on Q and K (over whole rows), post-LayerNorms,
                 attn_norm_2 (a second residual LayerNorm) on layer 1 only, GeGLU
                 feed-forward with separate ffn_gate (no bias) and ffn_up/ffn_down (biases);
                 layer_norm_eps 1e-12; mean pooling.
  jina-bert-v2-rank  jina-bert-v2 as jina-reranker-v1: ffn_up of 2*FFN rows (the activated
                 half first, no ffn_gate), and a one-score head cls (1 x d_model, bias)
                 + tanh on the first token ([CLS]); rank pooling.

--f32 writes every tensor as F32 (an exact reference). Weights are deterministic for a given
(kind, seed). Requires the PyPI `gguf` package and numpy.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gguf  # noqa: E402
from gguf import GGMLQuantizationType as Q  # noqa: E402

import vocab as vocab_mod  # noqa: E402

KINDS = [
    "bert", "bert-rank", "nomic-bert", "gemma-embedding", "modern-bert", "modern-bert-rank",
    "jina-bert-v2", "jina-bert-v2-rank",
]
N_LAYER, D, N_HEAD, FFN, CTX = 2, 64, 4, 128, 128


def wordpiece_vocab() -> tuple[list[str], list[int]]:
    """Tokens and their llama.cpp types: specials, then characters (alone and word-initial),
    then the corpus's lower-cased words."""
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    types = [vocab_mod.CONTROL, vocab_mod.UNKNOWN] + [vocab_mod.CONTROL] * 3
    text = vocab_mod.CORPUS.lower()
    chars = sorted({c for c in text if not c.isspace()})
    words = sorted({w for w in re.findall(r"[a-z]+", text) if len(w) > 1})
    tokens = specials + chars + ["\u2581" + c for c in chars] + ["\u2581" + w for w in words]
    types += [vocab_mod.NORMAL] * (len(tokens) - len(specials))
    return tokens, types


def tensors(kind: str, n_vocab: int, rng: np.random.Generator):
    """(name, array, quantized type) of every tensor of `kind`."""

    def mat(rows: int, cols: int, gain: float = 1.0) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) * gain / np.sqrt(cols)).astype(np.float32)

    def vec(n: int, scale: float = 0.1, base: float = 0.0) -> np.ndarray:
        return (base + rng.standard_normal(n) * scale).astype(np.float32)

    yield "token_embd.weight", rng.standard_normal((n_vocab, D)).astype(np.float32), Q.F16
    yield "token_types.weight", vec(2 * D, 0.5).reshape(2, D), Q.F32
    if kind != "nomic-bert":
        yield "position_embd.weight", (rng.standard_normal((CTX, D)) * 0.5).astype(np.float32), Q.F16
    yield "token_embd_norm.weight", vec(D, 0.1, 1.0), Q.F32
    yield "token_embd_norm.bias", vec(D), Q.F32
    for i in range(N_LAYER):
        p = f"blk.{i}."
        if kind == "nomic-bert":
            yield p + "attn_qkv.weight", mat(3 * D, D), Q.Q8_0
        else:
            for name, ty in (("attn_q", Q.Q8_0), ("attn_k", Q.F16), ("attn_v", Q.Q8_0)):
                yield p + name + ".weight", mat(D, D), ty
                yield p + name + ".bias", vec(D), Q.F32
        yield p + "attn_output.weight", mat(D, D), Q.F16
        yield p + "attn_output.bias", vec(D), Q.F32
        yield p + "attn_output_norm.weight", vec(D, 0.1, 1.0), Q.F32
        yield p + "attn_output_norm.bias", vec(D), Q.F32
        if kind == "nomic-bert":
            yield p + "ffn_gate.weight", mat(FFN, D), Q.Q8_0
            yield p + "ffn_up.weight", mat(FFN, D), Q.F16
            yield p + "ffn_down.weight", mat(D, FFN), Q.Q8_0
        else:
            yield p + "ffn_up.weight", mat(FFN, D), Q.Q8_0
            yield p + "ffn_up.bias", vec(FFN), Q.F32
            yield p + "ffn_down.weight", mat(D, FFN), Q.F16
            yield p + "ffn_down.bias", vec(D), Q.F32
        yield p + "layer_output_norm.weight", vec(D, 0.1, 1.0), Q.F32
        yield p + "layer_output_norm.bias", vec(D), Q.F32
    if kind == "bert-rank":
        yield "cls.weight", mat(D, D), Q.F16
        yield "cls.bias", vec(D), Q.F32
        yield "cls.output.weight", mat(1, D, 4.0), Q.F32
        yield "cls.output.bias", vec(1), Q.F32


def gemma_tensors(n_vocab: int, rng: np.random.Generator):
    """(name, array, quantized type) of every tensor of the gemma-embedding kind."""

    def mat(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)

    def norm(n: int) -> np.ndarray:
        return (1.0 + rng.standard_normal(n) * 0.1).astype(np.float32)

    hd, kv = D // N_HEAD, 2
    yield "token_embd.weight", (rng.standard_normal((n_vocab, D)) * 0.1).astype(np.float32), Q.F16
    for i in range(GEMMA_LAYERS):
        p = f"blk.{i}."
        yield p + "attn_norm.weight", norm(D), Q.F32
        yield p + "attn_q.weight", mat(N_HEAD * hd, D), Q.Q8_0
        yield p + "attn_k.weight", mat(kv * hd, D), Q.F16
        yield p + "attn_v.weight", mat(kv * hd, D), Q.Q8_0
        yield p + "attn_q_norm.weight", norm(hd), Q.F32
        yield p + "attn_k_norm.weight", norm(hd), Q.F32
        yield p + "attn_output.weight", mat(D, N_HEAD * hd), Q.F16
        yield p + "post_attention_norm.weight", norm(D), Q.F32
        yield p + "ffn_norm.weight", norm(D), Q.F32
        yield p + "ffn_gate.weight", mat(FFN, D), Q.Q8_0
        yield p + "ffn_up.weight", mat(FFN, D), Q.F16
        yield p + "ffn_down.weight", mat(D, FFN), Q.Q8_0
        yield p + "post_ffw_norm.weight", norm(D), Q.F32
    yield "output_norm.weight", norm(D), Q.F32
    yield "dense_2.weight", mat(DENSE_MID, D), Q.F16
    yield "dense_3.weight", mat(D, DENSE_MID), Q.F16


GEMMA_LAYERS, DENSE_MID = 6, 96
MODERN_LAYERS = 4
JINA_LAYERS, JINA_D, JINA_HEADS = 2, 96, 6


def modern_bert_tensors(kind: str, n_vocab: int, rng: np.random.Generator):
    """(name, array, quantized type) of every tensor of the modern-bert kinds."""

    def mat(rows: int, cols: int, gain: float = 1.0) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) * gain / np.sqrt(cols)).astype(np.float32)

    def norm(n: int) -> np.ndarray:
        return (1.0 + rng.standard_normal(n) * 0.1).astype(np.float32)

    yield "token_embd.weight", rng.standard_normal((n_vocab, D)).astype(np.float32), Q.F16
    yield "token_embd_norm.weight", norm(D), Q.F32
    for i in range(MODERN_LAYERS):
        p = f"blk.{i}."
        if i != 0:  # layer 0's attention input is not normed
            yield p + "attn_norm.weight", norm(D), Q.F32
        # Larger Q/K rows: peaked attention, so the sliding window's mask matters.
        yield p + "attn_qkv.weight", np.concatenate([mat(2 * D, D, 1.5), mat(D, D)]), Q.Q8_0
        yield p + "attn_output.weight", mat(D, D), Q.F16
        yield p + "ffn_norm.weight", norm(D), Q.F32
        yield p + "ffn_up.weight", mat(2 * FFN, D), Q.Q8_0  # activated half, then the other
        yield p + "ffn_down.weight", mat(D, FFN), Q.F16
    yield "output_norm.weight", norm(D), Q.F32
    if kind == "modern-bert-rank":
        yield "cls.weight", mat(D, D), Q.F16
        yield "cls.norm.weight", norm(D), Q.F32
        yield "cls.output.weight", mat(1, D, 4.0), Q.F32
        yield "cls.output.bias", (rng.standard_normal(1) * 0.1).astype(np.float32), Q.F32


def jina_tensors(kind: str, n_vocab: int, rng: np.random.Generator):
    """(name, array, quantized type) of every tensor of the jina-bert-v2 kinds."""
    d = JINA_D

    def mat(rows: int, cols: int, gain: float = 1.0) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) * gain / np.sqrt(cols)).astype(np.float32)

    def vec(n: int, scale: float = 0.1, base: float = 0.0) -> np.ndarray:
        return (base + rng.standard_normal(n) * scale).astype(np.float32)

    def layer_norm(name: str):
        yield name + ".weight", vec(d, 0.1, 1.0), Q.F32
        yield name + ".bias", vec(d), Q.F32

    yield "token_embd.weight", rng.standard_normal((n_vocab, d)).astype(np.float32), Q.F16
    yield "token_types.weight", vec(2 * d, 0.5).reshape(2, d), Q.F32
    yield from layer_norm("token_embd_norm")
    for i in range(JINA_LAYERS):
        p = f"blk.{i}."
        for name, ty in (("attn_q", Q.Q8_0), ("attn_k", Q.F16), ("attn_v", Q.Q8_0)):
            yield p + name + ".weight", mat(d, d), ty
            yield p + name + ".bias", vec(d), Q.F32
        yield from layer_norm(p + "attn_q_norm")  # over the whole row (all heads)
        yield from layer_norm(p + "attn_k_norm")
        yield p + "attn_output.weight", mat(d, d), Q.F16
        yield p + "attn_output.bias", vec(d), Q.F32
        yield from layer_norm(p + "attn_output_norm")
        if i == 1:  # optional: re-adds the layer input and norms again
            yield from layer_norm(p + "attn_norm_2")
        if kind == "jina-bert-v2-rank":
            yield p + "ffn_up.weight", mat(2 * FFN, d), Q.Q8_0  # activated half, then the other
            yield p + "ffn_up.bias", vec(2 * FFN), Q.F32
        else:
            yield p + "ffn_gate.weight", mat(FFN, d), Q.Q8_0
            yield p + "ffn_up.weight", mat(FFN, d), Q.F16
            yield p + "ffn_up.bias", vec(FFN), Q.F32
        yield p + "ffn_down.weight", mat(d, FFN), Q.Q8_0
        yield p + "ffn_down.bias", vec(d), Q.F32
        yield from layer_norm(p + "layer_output_norm")
    if kind == "jina-bert-v2-rank":
        # score = tanh(cls . x + b): gain 1 keeps tanh away from +-1.
        yield "cls.weight", mat(1, d, 1.0), Q.F16
        yield "cls.bias", vec(1), Q.F32


def write(kind: str, path: str, seed: int, f32: bool) -> None:
    if kind == "gemma-embedding":
        write_gemma(path, seed, f32)
        return
    if kind.startswith("modern-bert"):
        write_modern_bert(kind, path, seed, f32)
        return
    if kind.startswith("jina-bert-v2"):
        write_jina(kind, path, seed, f32)
        return
    arch = "nomic-bert" if kind == "nomic-bert" else "bert"
    rng = np.random.default_rng(seed)
    w = encoder_writer(path, arch, kind, (D, N_LAYER, N_HEAD), 1e-12)
    if arch == "nomic-bert":
        w.add_rope_freq_base(1000.0)
    n_vocab = add_vocab(w)
    add_tensors(w, tensors(kind, n_vocab, rng), f32)
    finish(w)


def encoder_writer(path: str, arch: str, kind: str, shape: tuple[int, int, int],
                   eps: float) -> gguf.GGUFWriter:
    """A writer with an encoder's common metadata: context CTX, (d_model, layers, heads) from
    `shape`, FFN, LayerNorm `eps`, bidirectional attention, rank pooling for "-rank" kinds and
    mean pooling for the others."""
    d, n_layer, n_head = shape
    w = gguf.GGUFWriter(path, arch)
    w.add_name(f"synthetic {kind}")
    w.add_context_length(CTX)
    w.add_embedding_length(d)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(FFN)
    w.add_head_count(n_head)
    w.add_layer_norm_eps(eps)
    w.add_causal_attention(False)
    rank = kind.endswith("-rank")
    w.add_pooling_type(gguf.PoolingType.RANK if rank else gguf.PoolingType.MEAN)
    return w


def add_vocab(w: gguf.GGUFWriter) -> int:
    """The WordPiece vocabulary and its special tokens; returns the vocabulary size."""
    tokens, types = wordpiece_vocab()
    w.add_tokenizer_model("bert")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_type_count(2)
    w.add_bos_token_id(tokens.index("[CLS]"))
    w.add_sep_token_id(tokens.index("[SEP]"))
    w.add_unk_token_id(tokens.index("[UNK]"))
    w.add_pad_token_id(tokens.index("[PAD]"))
    w.add_mask_token_id(tokens.index("[MASK]"))
    w.add_add_bos_token(True)
    w.add_add_sep_token(True)
    return len(tokens)


def finish(w: gguf.GGUFWriter) -> None:
    """Write the header, metadata and tensors, and close the file."""
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def add_tensors(w: gguf.GGUFWriter, items, f32: bool) -> None:
    """Write (name, array, type) items: F32 when asked (or 1-D), else F16 or quantized."""
    for name, data, qtype in items:
        if f32 or qtype == Q.F32 or data.ndim == 1:
            w.add_tensor(name, data)
        elif qtype == Q.F16:
            w.add_tensor(name, data.astype(np.float16))
        else:
            q = gguf.quants.quantize(data, qtype)
            w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=qtype)


def write_gemma(path: str, seed: int, f32: bool) -> None:
    arch = "gemma-embedding"
    rng = np.random.default_rng([seed, 7])
    w = gguf.GGUFWriter(path, arch)
    w.add_name("synthetic gemma-embedding")
    w.add_context_length(CTX)
    w.add_embedding_length(D)
    w.add_block_count(GEMMA_LAYERS)
    w.add_feed_forward_length(FFN)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(2)
    w.add_key_length(D // N_HEAD)
    w.add_value_length(D // N_HEAD)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(1e6)
    w.add_float32(f"{arch}.rope.freq_base_swa", 1e4)
    w.add_sliding_window(8)
    w.add_causal_attention(False)
    w.add_pooling_type(gguf.PoolingType.MEAN)
    w.add_dense_features_dims("dense_2", D, DENSE_MID)
    w.add_dense_features_dims("dense_3", DENSE_MID, D)
    n_vocab = add_vocab(w)
    add_tensors(w, gemma_tensors(n_vocab, rng), f32)
    finish(w)


def write_modern_bert(kind: str, path: str, seed: int, f32: bool) -> None:
    arch = "modern-bert"
    rng = np.random.default_rng([seed, 11])
    w = encoder_writer(path, arch, kind, (D, MODERN_LAYERS, N_HEAD), 1e-5)
    w.add_rope_freq_base(160000.0)
    w.add_float32(f"{arch}.rope.freq_base_swa", 10000.0)
    # No sliding_window_pattern key: llama.cpp's default (3, dense first) makes layers 1
    # and 2 local, 0 and 3 global.
    w.add_sliding_window(8)
    if kind.endswith("-rank"):
        # llama.cpp: SwiGLU instead of GeGLU. No classifier.pooling_type: mean by default.
        w.add_string(f"{arch}.hidden_activation", "silu")
    n_vocab = add_vocab(w)
    add_tensors(w, modern_bert_tensors(kind, n_vocab, rng), f32)
    finish(w)


def write_jina(kind: str, path: str, seed: int, f32: bool) -> None:
    arch = "jina-bert-v2"
    rng = np.random.default_rng([seed, 13])
    w = encoder_writer(path, arch, kind, (JINA_D, JINA_LAYERS, JINA_HEADS), 1e-12)
    n_vocab = add_vocab(w)
    add_tensors(w, jina_tensors(kind, n_vocab, rng), f32)
    finish(w)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", nargs="?", choices=KINDS)
    ap.add_argument("out", nargs="?")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--f32", action="store_true", help="every tensor F32")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    if args.list:
        print("\n".join(KINDS))
        return
    if not args.kind or not args.out:
        ap.error("KIND and OUT are required")
    write(args.kind, args.out, args.seed, args.f32)


if __name__ == "__main__":
    main()
