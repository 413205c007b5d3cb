#!/usr/bin/env python3
"""Writes tiny GGUF models with random weights that llama.cpp loads and runs.

    python3 tools/synth/make_model.py KIND OUT.gguf [--seed N]
    python3 tools/synth/make_model.py --list

Kinds (all: 2 layers, d_model 64, 4 heads of 16, 2 KV heads, FFN 128, ctx 256, a vocab
of a few hundred tokens learned from a small corpus, a ChatML chat template):

  llama-spm      llama arch, SentencePiece "llama" vocab with byte fallback;
                 F16/Q8_0/F32/Q4_0/Q4_1 weights.
  llama-bpe      llama arch, byte-level BPE ("gpt2", pre "llama-bpe");
                 Q8_0/Q5_0/Q5_1/Q4_1/F16 weights.
  qwen2          qwen2 arch (Q/K/V biases, NEOX rope), BPE pre "qwen2";
                 Q4_1/BF16/Q8_0/F16 weights.
  qwen3          qwen3 arch (Q/K RMS norms, head_dim 32 != d_model/heads,
                 tied output embedding, larger residual branches so the
                 tied logits don't just echo the input token), BPE pre "qwen2"; Q8_0/F16/Q5_0 weights.
  qwen3-rerank   qwen3 as llama.cpp's converter writes Qwen3-Reranker: rank pooling, labels
                 ["yes", "no"], cls.output = the tied head's rows of "y" and "n" (no "yes"/"no"
                 tokens here) times 1/10 (unsaturated), the "rerank" template; context 1024.
  mistral-f32    llama arch with linear rope scaling (factor 2, freq base 1e6),
                 SentencePiece vocab, every tensor F32 (an exact reference).

More architectures (kind = llama.cpp's `general.architecture`; byte-level BPE, pre
"llama-bpe" unless noted; the same shape unless noted):

  phi3           Phi-4-mini's layout: fused attn_qkv (rows q, k, v), fused ffn_up
                 (2*ffn rows: gate, then up; no ffn_gate), 2 heads of 32, 1 KV head,
                 partial rotary (24 of 32 dims, NEOX), LongRoPE: rope_factors_long/short
                 (12 values each) with original_context_length 64 < context 256 (so a
                 128-token context uses the long factors) and rope.scaling.attn_factor
                 sqrt(1 + ln 4 / ln 64), as convert_hf_to_gguf.py writes them; untied;
                 Q8_0/Q5_0/BF16/Q4_0/F16 weights.
  gemma2         4 layers, heads of 32 (explicit key/value_length), input scaled by
                 sqrt(d_model), GeGLU, post_attention_norm/post_ffw_norm, attention and
                 final logit softcapping 50/30, sliding window 32 on even layers; tied;
                 F16/Q8_0/Q5_0/Q4_0/BF16 weights.
  gemma          first-generation Gemma: heads of 32 (explicit), scaled input, GeGLU;
                 tied; F16/Q8_0/Q5_0/Q5_1/BF16 weights.
  smollm3        llama-like, 4 layers (llama.cpp skips RoPE in layer 3); tied;
                 Q8_0/Q4_0/F16/Q5_0/Q4_1 weights.
  granite        llama-like with logit_scale 8, residual_scale 0.22, embedding_scale 12,
                 attention.scale 0.125; untied; F16/Q8_0/Q5_0/BF16/Q4_0 weights.
  olmo2          no attn_norm/ffn_norm; post_attention_norm/post_ffw_norm; Q/K RMS norms
                 over whole rows (n_head*head_dim, n_kv*head_dim values); NEOX rope;
                 untied; Q8_0/F16/Q4_0/Q5_0 weights.
  exaone4        like olmo2 but per-head Q/K norms; tied; Q8_0/BF16/F16/Q5_0 weights.
  ernie4_5       plain llama block (normal rope); tied; Q8_0/Q4_0/F16/Q5_1 weights.
  mistral3       llama block with YaRN (factor 4 from 64 positions, beta 32/1, log
                 multiplier 1) and attention temperature 0.1; untied.
  gemma3         4 layers, heads of 32, per-head Q/K norms, post norms, sliding window
                 32 with the file's sliding_window_pattern 2 and rope.freq_base_swa; tied.
  gemma3n        25 layers (4 local, 1 global; llama.cpp has layers 20-23 read layer 18's
                 cache, layer 24 layer 19's, and sparsifies layers 0-9's feed-forwards),
                 4 AltUp streams, LAuReL of rank 64, per-layer inputs of 256 per layer,
                 see gemma3n.py; tied;
                 Q8_0/Q5_0/Q4_0/F16/BF16 weights, the AltUp tensors F32.
  gemma4         6 layers: local (heads of 16, 2 KV) and global (32, 1 KV, keys as values,
                 partial RoPE); the last two read earlier layers' caches; per-layer inputs
  gemma4-moe     gemma4's layers with 4 experts (2 used) beside each dense feed-forward
  stablelm       StableLM 2 1.6B's layout: LayerNorm with biases, Q/K/V biases, 4 of 16
                 dims rotated (NEOX); untied.
  stablelm-parallel  StableLM 2 12B's layout: parallel block (no ffn_norm), per-head Q/K
                 LayerNorms with each head's weights ([n_head, head_dim] tensors).
  qwen3moe       per-head Q/K norms, 8 experts of 32 (2 used per token); untied.
  granitemoe     Granite's multipliers, 4 experts of 32 (2 used) and a shared expert of 64.
  starcoder2     LayerNorm with biases, biases on every projection, plain GELU
                 feed-forward (ffn_up, ffn_down); tied.
  llama-embed    llama-bpe as llama.cpp's llama-embed (Llama's block as an embedding
                 model: mean pooling, causal; no output head used).
  hunyuan-dense  per-head Q/K norms (applied after RoPE by llama.cpp), heads of 32,
                 rope.scaling.alpha 1000 (llama.cpp raises the base to
                 1e4 * 1000^(32/30)), pre "qwen2"; untied; Q8_0/F16/BF16/Q5_0 weights.
  granitehybrid  6 layers: Mamba-2 mixers and attention (layers 2 and 5, no RoPE), Granite's
                 multipliers, see granitehybrid.py; untied; Q8_0/Q5_0/F16/BF16/Q4_0 weights.
  qwen35         8 layers: gated delta nets and gated attention (every fourth), see
                 qwen35.py; pre "qwen2"; tied; Q8_0/Q5_0/Q5_1/Q4_0/F16/BF16 weights.
  lfm2           6 layers: gated short convolutions and attention (per-head Q/K norms),
                 see lfm2.py; pre "lfm2"; tied; Q8_0/F16/Q5_0/Q4_0/BF16 weights.
  lfm2-swa       lfm2 with attention.sliding_window 16 (every attention layer local).

Phone-scale kinds for speed measurements (F16 matrices, to be quantized by
llama.cpp's llama-quantize; the vocabulary is padded with unused tokens to the
real model's size, so the output head costs what it costs there):

  llama-1b       Llama 3.2 1B's shape: d_model 2048, 16 layers, 32 heads, 8 KV
                 heads, FFN 8192, 128256 tokens, tied embeddings (~1.24 B).
  lfm2-1.2b      LFM2 1.2B's shape: d_model 2048, 16 layers (10 short convolutions, 6
                 attention: 32 heads, 8 KV heads), FFN 8192, 65536 tokens, tied.
  qwen3-1.7b     Qwen3 1.7B's shape: d_model 2048, 28 layers, 16 heads of 128,
                 8 KV heads, FFN 6144, QK norms, 151936 tokens, tied (~2.0 B).
  qwen35-2b      Qwen3.5-2B's shape: d_model 2048, 24 layers (18 delta nets of 16 + 16
                 heads of 128, 6 attention: 8 heads of 256, 2 KV heads), FFN 6144,
                 248320 tokens, tied (~1.9 B).

Weights are deterministic for a given (kind, seed). Requires the PyPI `gguf`
package (0.19.0) and numpy. K-quants are not used: gguf's numpy quantizer has
none.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
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
    rope_scaling_type: str = "linear"
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
    # Rotary dimensions per head (0: all of head_dim).
    n_rot: int = 0
    # One attn_qkv matrix (rows q, k, v) instead of attn_q/attn_k/attn_v.
    fused_qkv: bool = False
    # ffn_up with 2*ffn rows (gate half, then up half) and no ffn_gate (phi3).
    fused_up: bool = False
    # attn_norm/ffn_norm before the branches (olmo2/exaone4 have none).
    pre_norms: bool = True
    # post_attention_norm/post_ffw_norm on the branch outputs, their weights ~post_norm_gain.
    post_norms: bool = False
    post_norm_gain: float = 1.0
    # Q/K norms over the whole q/k row (olmo2) instead of per head.
    qk_norm_row: bool = False
    # Std of the untied output head's logits.
    out_gain: float = 4.0
    # LongRoPE (phi3): rope_factors_long/short tensors, used when the context exceeds orig_ctx.
    longrope: bool = False
    orig_ctx: int = 0
    # general.name (default "synthetic-KIND").
    name: str = ""
    # Extra "{arch}.KEY" metadata: floats as float32, ints as uint32.
    extra_kv: tuple[tuple[str, float | int], ...] = ()
    # LayerNorm with biases (attention.layer_norm_epsilon) instead of RMS norm.
    layer_norm: bool = False
    # Biases on attn_output, ffn_up and ffn_down too (StarCoder 2).
    all_biases: bool = False
    # A gated feed-forward (ffn_gate); False: ffn_up, activation, ffn_down.
    gated: bool = True
    # Q/K norms with each head's own weights (StableLM 2 12B: [n_head, head_dim] tensors).
    qk_norm_head_weights: bool = False
    # No ffn_norm: StableLM's parallel block.
    parallel: bool = False
    # Mixture of experts (qwen3moe, granitemoe): experts, used per token, expert FFN size,
    # and a shared expert's FFN size (0: none).
    n_expert: int = 0
    n_expert_used: int = 0
    expert_ff: int = 0
    shared_ff: int = 0
    # Qwen3-Reranker as llama.cpp's converter writes it: rank pooling, labels "yes"/"no", a
    # cls.output head of those tokens' output rows, the "rerank" chat template.
    rerank: bool = False


# Every matrix F16 (phone-scale kinds: llama-quantize picks the real types).
ALL_F16 = {name: Q.F16 for name in ("token_embd", "attn_q", "attn_k", "attn_v", "attn_output",
                                    "ffn_gate", "ffn_up", "ffn_down", "output")}


# Gemma 4's layer plan and per-layer inputs: see gemma4.py.
GEMMA4 = Spec(
    arch="gemma4",
    tokenizer="bpe",
    pre="llama-bpe",
    n_layer=6,
    eps=1e-6,
    rope_base=1000000.0,
    qk_norm=True,
    tied=True,
    resid_gain=1.0,
    post_norms=True,
    types=dict(token_embd=Q.F16, attn_q=Q.Q8_0, attn_k=Q.Q8_0, attn_v=Q.Q5_0,
               attn_output=Q.F16, ffn_gate=Q.Q4_0, ffn_up=Q.Q8_0, ffn_down=Q.BF16,
               per_layer_token_embd=Q.F16, per_layer_model_proj=Q.BF16, inp_gate=Q.F16,
               proj=Q.F16),
)

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


# Architectures beyond llama/qwen (llama.cpp's `general.architecture` names), all with
# byte-level BPE vocabularies; resid_gain/post_norm_gain/out_gain keep the top token clear.
KINDS.update({
    "phi3": Spec(
        arch="phi3",
        # Phi-4-mini's layout (BPE vocab, partial rotary 3/4, LongRoPE). A name with "phi3" or
        # "phi-3" would make llama.cpp look up Phi-3's SentencePiece tokens <s>, </s>, <unk>.
        name="synthetic-phi4-mini",
        tokenizer="bpe",
        pre="llama-bpe",
        n_head=2,
        n_kv=1,
        head_dim=32,
        n_rot=24,
        fused_qkv=True,
        fused_up=True,
        longrope=True,
        orig_ctx=64,
        # What convert_hf_to_gguf.py's Phi3MiniModel writes for LongRoPE (no rope.scaling.type):
        # attn_factor sqrt(1 + ln(ctx/orig) / ln(orig)), and sliding_window 0 (no SWA).
        extra_kv=(("rope.scaling.attn_factor", math.sqrt(1.0 + math.log(256 / 64) / math.log(64))),
                  ("attention.sliding_window", 0)),
        types=dict(token_embd=Q.Q8_0, attn_qkv=Q.Q5_0, attn_output=Q.BF16, ffn_up=Q.Q8_0,
                   ffn_down=Q.Q4_0, output=Q.F16),
    ),
    "gemma2": Spec(
        arch="gemma2",
        tokenizer="bpe",
        pre="llama-bpe",
        n_layer=4,
        head_dim=32,
        explicit_head_dim=True,
        eps=1e-6,
        tied=True,
        resid_gain=1.0,
        post_norms=True,
        # The input embedding is scaled by sqrt(d_model) = 8: larger post-norm weights so
        # the tied logits don't just echo the input token.
        post_norm_gain=16.0,
        extra_kv=(("attn_logit_softcapping", 50.0), ("final_logit_softcapping", 30.0),
                  ("attention.sliding_window", 32)),
        # 4 tied layers amplify rounding: with this mix llama.cpp's AVX2 and AVX-512 builds
        # agree on every top-1 token at seed 0 (other mixes and seeds differ in 1-6 of 252).
        types=dict(token_embd=Q.F16, attn_q=Q.Q8_0, attn_k=Q.Q8_0, attn_v=Q.Q5_0,
                   attn_output=Q.F16, ffn_gate=Q.Q4_0, ffn_up=Q.Q8_0, ffn_down=Q.BF16),
    ),
    "gemma": Spec(
        arch="gemma",
        tokenizer="bpe",
        pre="llama-bpe",
        head_dim=32,
        explicit_head_dim=True,
        eps=1e-6,
        tied=True,
        resid_gain=32.0,  # the embedding is scaled by sqrt(d_model) = 8
        types=dict(token_embd=Q.F16, attn_q=Q.Q8_0, attn_k=Q.Q5_0, attn_v=Q.F16,
                   attn_output=Q.Q8_0, ffn_gate=Q.Q5_1, ffn_up=Q.Q8_0, ffn_down=Q.BF16),
    ),
    "smollm3": Spec(
        arch="smollm3",
        tokenizer="bpe",
        pre="llama-bpe",
        n_layer=4,  # llama.cpp skips RoPE in every 4th layer (layer 3)
        rope_base=5000000.0,
        eps=1e-6,
        tied=True,
        resid_gain=6.0,
        types=dict(token_embd=Q.Q8_0, attn_q=Q.Q4_0, attn_k=Q.Q8_0, attn_v=Q.F16,
                   attn_output=Q.Q5_0, ffn_gate=Q.Q8_0, ffn_up=Q.Q4_1, ffn_down=Q.F16),
    ),
    "granite": Spec(
        arch="granite",
        tokenizer="bpe",
        pre="llama-bpe",
        resid_gain=24.0,  # branches x0.22 against a x12 embedding
        out_gain=32.0,  # logits are divided by logit_scale 8
        extra_kv=(("logit_scale", 8.0), ("residual_scale", 0.22), ("embedding_scale", 12.0),
                  ("attention.scale", 0.125)),
        types=dict(token_embd=Q.F16, attn_q=Q.Q8_0, attn_k=Q.F16, attn_v=Q.Q5_0,
                   attn_output=Q.Q8_0, ffn_gate=Q.BF16, ffn_up=Q.Q8_0, ffn_down=Q.Q4_0,
                   output=Q.Q8_0),
    ),
    "olmo2": Spec(
        arch="olmo2",
        tokenizer="bpe",
        pre="llama-bpe",
        eps=1e-6,
        rope_base=500000.0,
        pre_norms=False,
        post_norms=True,
        qk_norm=True,
        qk_norm_row=True,
        types=dict(token_embd=Q.Q8_0, attn_q=Q.F16, attn_k=Q.Q8_0, attn_v=Q.Q4_0,
                   attn_output=Q.Q8_0, ffn_gate=Q.Q5_0, ffn_up=Q.F16, ffn_down=Q.Q8_0,
                   output=Q.F16),
    ),
    "exaone4": Spec(
        arch="exaone4",
        tokenizer="bpe",
        pre="llama-bpe",
        rope_base=1000000.0,
        pre_norms=False,
        post_norms=True,
        post_norm_gain=6.0,  # tied: the branches outweigh the input embedding
        qk_norm=True,
        tied=True,
        types=dict(token_embd=Q.Q8_0, attn_q=Q.BF16, attn_k=Q.Q8_0, attn_v=Q.Q8_0,
                   attn_output=Q.F16, ffn_gate=Q.Q8_0, ffn_up=Q.Q5_0, ffn_down=Q.F16),
    ),
    "ernie4_5": Spec(
        arch="ernie4_5",
        tokenizer="bpe",
        pre="llama-bpe",
        rope_base=500000.0,
        tied=True,
        resid_gain=6.0,
        types=dict(token_embd=Q.Q8_0, attn_q=Q.Q8_0, attn_k=Q.Q4_0, attn_v=Q.F16,
                   attn_output=Q.Q8_0, ffn_gate=Q.F16, ffn_up=Q.Q5_1, ffn_down=Q.Q8_0),
    ),
    "mistral3": Spec(
        arch="mistral3",
        tokenizer="bpe",
        pre="llama-bpe",
        rope_base=1000000.0,
        # Ministral 3's YaRN (factor 16 from 16k there; 4 from 64 here) and Llama 4 attention
        # temperature (queries scaled up past each multiple of the original context).
        rope_scaling=4.0,
        rope_scaling_type="yarn",
        orig_ctx=64,
        extra_kv=(("rope.scaling.yarn_beta_fast", 32.0), ("rope.scaling.yarn_beta_slow", 1.0),
                  ("rope.scaling.yarn_log_multiplier", 1.0),
                  ("attention.temperature_scale", 0.1)),
        types=dict(token_embd=Q.F16, attn_q=Q.Q4_0, attn_k=Q.Q4_0, attn_v=Q.Q8_0,
                   attn_output=Q.Q5_0, ffn_gate=Q.Q4_0, ffn_up=Q.Q4_0, ffn_down=Q.Q8_0,
                   output=Q.Q8_0),
    ),
    "gemma3": Spec(
        arch="gemma3",
        tokenizer="bpe",
        pre="llama-bpe",
        n_layer=4,
        head_dim=32,
        explicit_head_dim=True,
        eps=1e-6,
        rope_base=1000000.0,
        qk_norm=True,
        tied=True,
        resid_gain=1.0,
        post_norms=True,
        post_norm_gain=16.0,
        # Window 32 on layers 0 and 2 (pattern 2 from the file, not Gemma 3's default 6),
        # local RoPE base 10000 from the file.
        extra_kv=(("attention.sliding_window", 32), ("attention.sliding_window_pattern", 2),
                  ("rope.freq_base_swa", 10000.0)),
        types=dict(token_embd=Q.F16, attn_q=Q.Q8_0, attn_k=Q.Q8_0, attn_v=Q.Q5_0,
                   attn_output=Q.F16, ffn_gate=Q.Q4_0, ffn_up=Q.Q8_0, ffn_down=Q.BF16),
    ),
    # Gemma 3n's AltUp streams, LAuReL, per-layer inputs and shared caches: see gemma3n.py.
    "gemma3n": Spec(
        arch="gemma3n",
        tokenizer="bpe",
        pre="llama-bpe",
        n_layer=25,  # llama.cpp: layers 20-23 read layer 18's cache, layer 24 layer 19's
        eps=1e-6,
        rope_base=1000000.0,
        qk_norm=True,
        tied=True,
        resid_gain=1.0,
        post_norms=True,
        post_norm_gain=0.5,  # small branches: 25 layers amplify rounding less
        # The Q and F32 files agree on ~91% of the top-1 tokens (seeds 0-3). ffn_gate F16: its
        # top 5% pass in layers 0-9, and its rounding there decides which (with Q8_0, llama.cpp's
        # native and AVX2 builds differ by a mean KLD of ~4e-4, with F16 ~2e-4).
        types=dict(token_embd=Q.F16, attn_q=Q.Q8_0, attn_k=Q.Q5_0, attn_v=Q.Q8_0,
                   attn_output=Q.F16, ffn_gate=Q.F16, ffn_up=Q.Q5_0, ffn_down=Q.BF16,
                   per_layer_token_embd=Q.F16, per_layer_model_proj=Q.BF16, inp_gate=Q.Q4_0,
                   proj=Q.F16, laurel_l=Q.F16, laurel_r=Q.BF16),
    ),
    "gemma4": GEMMA4,
    # The 26B A4B's feed-forward: 4 experts (2 used) beside each dense one, 4 layers.
    "gemma4-moe": dataclasses.replace(
        GEMMA4, n_layer=4, n_expert=4, n_expert_used=2, expert_ff=32,
        types=dict(GEMMA4.types, ffn_gate_inp=Q.F32, ffn_gate_up_exps=Q.Q8_0,
                   ffn_gate_exps=Q.Q8_0, ffn_up_exps=Q.Q4_0, ffn_down_exps=Q.F16)),
    "qwen3moe": Spec(
        arch="qwen3moe",
        # Qwen3-30B-A3B's block: per-head Q/K norms and 8 experts, 2 used per token.
        tokenizer="bpe",
        pre="qwen2",
        head_dim=32,
        explicit_head_dim=True,
        eps=1e-6,
        rope_base=1000000.0,
        qk_norm=True,
        resid_gain=3.0,
        add_bos=False,
        n_expert=8,
        n_expert_used=2,
        expert_ff=32,
        extra_kv=(("expert_count", 8), ("expert_used_count", 2),
                  ("expert_feed_forward_length", 32)),
        types=dict(token_embd=Q.Q8_0, attn_q=Q.F16, attn_k=Q.Q8_0, attn_v=Q.Q5_0,
                   attn_output=Q.F16, ffn_gate_inp=Q.F32, ffn_gate_exps=Q.Q8_0,
                   ffn_up_exps=Q.Q4_0, ffn_down_exps=Q.F16, output=Q.Q8_0),
    ),
    "granitemoe": Spec(
        arch="granitemoe",
        # Granite 3 MoE's block with Granite's multipliers, 4 experts (2 used) and a shared
        # expert.
        tokenizer="bpe",
        pre="llama-bpe",
        resid_gain=24.0,
        out_gain=32.0,
        ffn=32,  # Granite's experts are feed_forward_length wide
        n_expert=4,
        n_expert_used=2,
        expert_ff=32,
        shared_ff=64,
        extra_kv=(("logit_scale", 8.0), ("residual_scale", 0.22), ("embedding_scale", 12.0),
                  ("attention.scale", 0.125), ("expert_count", 4), ("expert_used_count", 2),
                  ("expert_shared_feed_forward_length", 64)),
        types=dict(token_embd=Q.F16, attn_q=Q.Q8_0, attn_k=Q.F16, attn_v=Q.Q5_0,
                   attn_output=Q.Q8_0, ffn_gate_inp=Q.F16, ffn_gate_exps=Q.Q8_0,
                   ffn_up_exps=Q.Q5_0, ffn_down_exps=Q.Q8_0, ffn_gate_shexp=Q.Q8_0,
                   ffn_up_shexp=Q.F16, ffn_down_shexp=Q.Q8_0, output=Q.Q8_0),
    ),
    "stablelm": Spec(
        arch="stablelm",
        # StableLM 2 1.6B's layout: LayerNorm with biases, Q/K/V biases, a quarter of each
        # head rotated (NEOX), untied.
        tokenizer="bpe",
        pre="llama-bpe",
        head_dim=16,
        n_rot=4,
        layer_norm=True,
        qkv_bias=True,
        types=dict(token_embd=Q.Q8_0, attn_q=Q.F16, attn_k=Q.Q8_0, attn_v=Q.Q5_0,
                   attn_output=Q.Q8_0, ffn_gate=Q.Q4_0, ffn_up=Q.F16, ffn_down=Q.Q8_0,
                   output=Q.Q8_0),
    ),
    "stablelm-parallel": Spec(
        arch="stablelm",
        # StableLM 2 12B's layout: a parallel block (no ffn_norm) and per-head Q/K
        # LayerNorms with each head's own weights.
        tokenizer="bpe",
        pre="llama-bpe",
        head_dim=16,
        n_rot=4,
        layer_norm=True,
        qk_norm=True,
        qk_norm_head_weights=True,
        parallel=True,
        types=dict(token_embd=Q.F16, attn_q=Q.Q8_0, attn_k=Q.F16, attn_v=Q.Q8_0,
                   attn_output=Q.Q5_0, ffn_gate=Q.Q8_0, ffn_up=Q.Q4_1, ffn_down=Q.F16,
                   output=Q.F16),
    ),
    "starcoder2": Spec(
        arch="starcoder2",
        # LayerNorm with biases, biases on every projection, a plain GELU feed-forward.
        tokenizer="bpe",
        pre="llama-bpe",
        rope_base=100000.0,
        layer_norm=True,
        qkv_bias=True,
        all_biases=True,
        gated=False,
        tied=True,
        resid_gain=6.0,
        types=dict(token_embd=Q.Q8_0, attn_q=Q.Q8_0, attn_k=Q.F16, attn_v=Q.Q8_0,
                   attn_output=Q.F16, ffn_up=Q.Q5_0, ffn_down=Q.Q8_0),
    ),
    "hunyuan-dense": Spec(
        arch="hunyuan-dense",
        tokenizer="bpe",
        pre="qwen2",
        head_dim=32,
        explicit_head_dim=True,
        qk_norm=True,  # per head, after RoPE in llama.cpp
        add_bos=False,
        # llama.cpp raises the base to 10000 * alpha^(head_dim / (head_dim - 2)).
        extra_kv=(("rope.scaling.alpha", 1000.0),),
        types=dict(token_embd=Q.Q8_0, attn_q=Q.F16, attn_k=Q.Q8_0, attn_v=Q.BF16,
                   attn_output=Q.Q8_0, ffn_gate=Q.Q5_0, ffn_up=Q.Q8_0, ffn_down=Q.F16,
                   output=Q.Q8_0),
    ),
    # LFM2's conv/attention layer plan: see lfm2.py.
    "lfm2-1.2b": Spec(
        arch="lfm2", tokenizer="bpe", pre="lfm2", n_layer=16, d_model=2048, n_head=32,
        n_kv=8, head_dim=64, ffn=8192, ctx=4096, rope_base=1000000.0, qk_norm=True,
        tied=True, n_vocab=65536,
        types={**ALL_F16, "shortconv.in_proj": Q.F16, "shortconv.out_proj": Q.F16},
    ),
    # Granite 4 hybrid's Mamba-2/attention layer plan: see granitehybrid.py.
    "granitehybrid": Spec(
        arch="granitehybrid",
        tokenizer="bpe",
        pre="llama-bpe",
        n_layer=6,
        resid_gain=24.0,  # branches x0.22 against a x12 embedding
        out_gain=32.0,  # logits are divided by logit_scale 8
        types={"token_embd": Q.F16, "ssm_in": Q.Q8_0, "ssm_out": Q.Q5_0, "attn_q": Q.Q8_0,
               "attn_k": Q.F16, "attn_v": Q.Q5_0, "attn_output": Q.Q8_0, "ffn_gate": Q.BF16,
               "ffn_up": Q.Q8_0, "ffn_down": Q.Q4_0, "output": Q.Q8_0},
    ),
    # Qwen 3.5's delta-net/attention layer plan: see qwen35.py.
    "qwen35-2b": Spec(
        arch="qwen35", tokenizer="bpe", pre="qwen2", n_layer=24, d_model=2048, n_head=8,
        n_kv=2, head_dim=256, explicit_head_dim=True, n_rot=64, ffn=6144, ctx=4096,
        eps=1e-6, rope_base=10000000.0, qk_norm=True, tied=True, add_bos=False,
        n_vocab=248320,
        types={**ALL_F16, **{n: Q.F16 for n in ("attn_qkv", "attn_gate", "ssm_beta",
                                                "ssm_alpha", "ssm_out")}},
    ),
    "qwen35": Spec(
        arch="qwen35",
        tokenizer="bpe",
        pre="qwen2",
        n_layer=8,
        d_model=128,
        head_dim=64,
        n_rot=16,
        ffn=256,
        eps=1e-6,
        rope_base=10000000.0,
        qk_norm=True,
        tied=True,
        add_bos=False,
        resid_gain=2.0,  # the branches outweigh the tied input embedding
        types={"token_embd": Q.Q8_0, "attn_qkv": Q.Q8_0, "attn_gate": Q.Q5_0,
               "ssm_beta": Q.F16, "ssm_alpha": Q.F32, "ssm_out": Q.Q4_0, "attn_q": Q.Q8_0,
               "attn_k": Q.Q5_1, "attn_v": Q.F16, "attn_output": Q.Q8_0, "ffn_gate": Q.Q4_0,
               "ffn_up": Q.Q8_0, "ffn_down": Q.BF16},
    ),
    "lfm2": Spec(
        arch="lfm2",
        tokenizer="bpe",
        pre="lfm2",
        n_layer=6,
        rope_base=1000000.0,
        qk_norm=True,
        tied=True,
        resid_gain=3.0,  # the branches outweigh the tied input embedding
        types={"token_embd": Q.Q8_0, "shortconv.in_proj": Q.Q8_0, "shortconv.out_proj": Q.F16,
               "attn_q": Q.Q8_0, "attn_k": Q.Q5_0, "attn_v": Q.F16, "attn_output": Q.Q8_0,
               "ffn_gate": Q.Q4_0, "ffn_up": Q.Q8_0, "ffn_down": Q.BF16},
    ),
})

# lfm2 with sliding-window attention layers (window 16).
KINDS["lfm2-swa"] = dataclasses.replace(KINDS["lfm2"], extra_kv=(("attention.sliding_window", 16),))

# qwen2 with Qwen2.5-Coder's fill-in-the-middle tokens.
KINDS["qwen2-fim"] = dataclasses.replace(KINDS["qwen2"], fim=True)
# The qwen3 model as a Qwen3-Reranker (write_model gives it qwen3's weights). Context 1024:
# the rerank template makes a query-document pair ~230 tokens with this small vocabulary, and
# llama-embedding's default context (the model's) must hold every pair of a run.
KINDS["qwen3-rerank"] = dataclasses.replace(KINDS["qwen3"], rerank=True, ctx=1024)
# llama-bpe as llama.cpp's llama-embed: the llama block as an embedding model (causal, mean
# pooling, no output head used).
KINDS["llama-embed"] = dataclasses.replace(
    KINDS["llama-bpe"], arch="llama-embed", extra_kv=(("pooling_type", 1),)
)

FIM_SPECIALS = ["<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>"]

# The "rerank" chat template of llama.cpp's converter for Qwen3-Reranker (conversion/qwen.py,
# Qwen3Model.set_gguf_parameters); llama-embedding fills in {query} and {document}.
RERANK_TEMPLATE = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query "
    "and the Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n"
    "<|im_start|>user\n<Instruct>: Given a web search query, retrieve relevant passages that "
    "answer the query\n<Query>: {query}\n<Document>: {document}<|im_end|>\n"
    "<|im_start|>assistant\n<think>\n\n</think>\n\n"
)


def rerank_token_ids(voc: vocab_mod.Vocab) -> list[int]:
    """The tokens whose output rows make Qwen3-Reranker's cls.output (true, then false):
    "yes" and "no", or, when the vocabulary lacks them, the single letters "y" and "n"."""
    if "yes" in voc.tokens and "no" in voc.tokens:
        return [voc.id("yes"), voc.id("no")]
    return [voc.id("y"), voc.id("n")]


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


def make_tensors(spec: Spec, n_vocab: int, rng: np.random.Generator,
                 cls_rows: list[int] | None = None):
    """Yields (name, float32 array, type) for every tensor; arrays are [rows, cols]. With
    ``cls_rows``, also cls.output.weight: those rows of the output head (Qwen3-Reranker)."""
    d, hd, ff = spec.d_model, spec.head_dim, spec.ffn
    q_dim, kv_dim = spec.n_head * hd, spec.n_kv * hd

    def mat(rows: int, cols: int, gain: float) -> np.ndarray:
        # std gain/sqrt(cols): each output has std ~gain for unit-variance inputs.
        return (rng.standard_normal((rows, cols)) * (gain / np.sqrt(cols))).astype(np.float32)

    def norm(n: int) -> np.ndarray:
        return (1.0 + 0.2 * rng.uniform(-1.0, 1.0, n)).astype(np.float32)

    def post_norm() -> np.ndarray:
        return (spec.post_norm_gain * norm(d)).astype(np.float32)

    def bias(n: int) -> np.ndarray:
        return (0.1 * rng.standard_normal(n)).astype(np.float32)

    def with_bias(name: str, n: int):
        # A pre-norm, with its LayerNorm bias.
        yield name + ".weight", norm(n), Q.F32
        if spec.layer_norm:
            yield name + ".bias", bias(n), Q.F32

    def ty(name: str) -> Q:
        return spec.types.get(name, Q.F32)

    embd = rng.standard_normal((n_vocab, d)).astype(np.float32)
    yield "token_embd.weight", embd, ty("token_embd")
    for i in range(spec.n_layer):
        p = f"blk.{i}."
        if spec.pre_norms:
            yield from with_bias(p + "attn_norm", d)
        if spec.fused_qkv:
            qkv = [mat(q_dim, d, 1.5), mat(kv_dim, d, 1.5), mat(kv_dim, d, 1.0)]
            yield p + "attn_qkv.weight", np.concatenate(qkv), ty("attn_qkv")
        else:
            yield p + "attn_q.weight", mat(q_dim, d, 1.5), ty("attn_q")
            yield p + "attn_k.weight", mat(kv_dim, d, 1.5), ty("attn_k")
            yield p + "attn_v.weight", mat(kv_dim, d, 1.0), ty("attn_v")
        if spec.qkv_bias:
            yield p + "attn_q.bias", (0.1 * rng.standard_normal(q_dim)).astype(np.float32), Q.F32
            yield p + "attn_k.bias", (0.1 * rng.standard_normal(kv_dim)).astype(np.float32), Q.F32
            yield p + "attn_v.bias", (0.1 * rng.standard_normal(kv_dim)).astype(np.float32), Q.F32
        if spec.qk_norm_head_weights:
            yield p + "attn_q_norm.weight", norm(q_dim).reshape(spec.n_head, hd), Q.F32
            yield p + "attn_k_norm.weight", norm(kv_dim).reshape(spec.n_kv, hd), Q.F32
        elif spec.qk_norm:
            yield p + "attn_q_norm.weight", norm(q_dim if spec.qk_norm_row else hd), Q.F32
            yield p + "attn_k_norm.weight", norm(kv_dim if spec.qk_norm_row else hd), Q.F32
        yield p + "attn_output.weight", mat(d, q_dim, spec.resid_gain), ty("attn_output")
        if spec.all_biases:
            yield p + "attn_output.bias", bias(d), Q.F32
        if spec.post_norms:
            yield p + "post_attention_norm.weight", post_norm(), Q.F32
        if spec.pre_norms and not spec.parallel:
            yield from with_bias(p + "ffn_norm", d)
        if spec.n_expert:
            e, eff = spec.n_expert, spec.expert_ff
            yield p + "ffn_gate_inp.weight", mat(e, d, 3.0), ty("ffn_gate_inp")

            def experts(rows: int, cols: int, gain: float) -> np.ndarray:
                return np.stack([mat(rows, cols, gain) for _ in range(e)])
            yield p + "ffn_gate_exps.weight", experts(eff, d, 1.0), ty("ffn_gate_exps")
            yield p + "ffn_up_exps.weight", experts(eff, d, 1.0), ty("ffn_up_exps")
            yield p + "ffn_down_exps.weight", experts(d, eff, spec.resid_gain), ty("ffn_down_exps")
            if spec.shared_ff:
                sff = spec.shared_ff
                yield p + "ffn_gate_shexp.weight", mat(sff, d, 1.0), ty("ffn_gate_shexp")
                yield p + "ffn_up_shexp.weight", mat(sff, d, 1.0), ty("ffn_up_shexp")
                yield p + "ffn_down_shexp.weight", mat(d, sff, spec.resid_gain), ty("ffn_down_shexp")
            continue
        if spec.fused_up:
            yield p + "ffn_up.weight", mat(2 * ff, d, 1.0), ty("ffn_up")
        else:
            if spec.gated:
                yield p + "ffn_gate.weight", mat(ff, d, 1.0), ty("ffn_gate")
            yield p + "ffn_up.weight", mat(ff, d, 1.0), ty("ffn_up")
            if spec.all_biases:
                yield p + "ffn_up.bias", bias(ff), Q.F32
        yield p + "ffn_down.weight", mat(d, ff, spec.resid_gain), ty("ffn_down")
        if spec.all_biases:
            yield p + "ffn_down.bias", bias(d), Q.F32
        if spec.post_norms:
            yield p + "post_ffw_norm.weight", post_norm(), Q.F32
    yield from with_bias("output_norm", d)
    head, head_type = embd, ty("token_embd")
    if not spec.tied:
        # Logits with std ~4: clear winners, so greedy decoding is robust to rounding.
        head, head_type = mat(n_vocab, d, spec.out_gain), ty("output")
        yield "output.weight", head, head_type
    if spec.longrope:
        # Per-frequency divisors of the rotary angles (n_rot/2 each), shared by all layers.
        half = (spec.n_rot or hd) // 2
        yield "rope_factors_long.weight", np.linspace(1.0, 8.0, half, dtype=np.float32), Q.F32
        yield "rope_factors_short.weight", np.linspace(1.0, 1.5, half, dtype=np.float32), Q.F32
    if cls_rows is not None:
        # The head's rows scaled by 1/10: this random model's yes/no log-odds are -10 to -15
        # (saturated probabilities that would hide differences); scaled, they are about -1.
        yield "cls.output.weight", head[cls_rows] * 0.1, head_type


def add_vocab(w: gguf.GGUFWriter, spec: Spec, voc: vocab_mod.Vocab, chat_template: str) -> None:
    """Writes the tokenizer metadata of ``voc`` and the chat template."""
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


def write_model(kind: str, path: str, seed: int, chat_template: str = CHATML) -> None:
    """Writes the synthetic model ``kind`` to ``path`` (with ``chat_template``); ``KIND+f32``
    is ``KIND`` with every tensor F32 (an exact reference: no kernel's rounding involved)."""
    base = kind.removesuffix("+f32")
    spec = KINDS[base]
    if base != kind:
        spec = dataclasses.replace(spec, types={})
    voc = build_vocab(spec)
    if spec.arch == "gemma4":
        import gemma4  # noqa: E402 (its own tensors and per-layer metadata)
        return gemma4.write(base, spec, voc, path, seed, chat_template)
    if spec.arch == "gemma3n":
        import gemma3n  # noqa: E402 (AltUp, LAuReL, per-layer inputs, shared KV)
        return gemma3n.write(base, spec, voc, path, seed, chat_template)
    if spec.arch == "lfm2":
        import lfm2  # noqa: E402 (conv layers, per-layer KV head counts)
        return lfm2.write(base, spec, voc, path, seed, chat_template)
    if spec.arch == "granitehybrid":
        import granitehybrid  # noqa: E402 (Mamba-2 layers, per-layer KV head counts)
        return granitehybrid.write(base, spec, voc, path, seed, chat_template)
    if spec.arch == "qwen35":
        import qwen35  # noqa: E402 (delta-net layers, gated attention)
        return qwen35.write(base, spec, voc, path, seed, chat_template)
    # A reranker is its base model's weights with a head taken from them.
    rng = np.random.default_rng([seed, sum(base.removesuffix("-rerank").encode())])
    arch = spec.arch
    tmp = path + ".tmp"
    w = gguf.GGUFWriter(tmp, arch)
    w.add_name(spec.name or f"synthetic-{kind}")
    w.add_context_length(spec.ctx)
    w.add_embedding_length(spec.d_model)
    w.add_block_count(spec.n_layer)
    w.add_feed_forward_length(spec.ffn)
    w.add_head_count(spec.n_head)
    w.add_head_count_kv(spec.n_kv)
    if spec.layer_norm:
        w.add_layer_norm_eps(spec.eps)
    else:
        w.add_layer_norm_rms_eps(spec.eps)
    w.add_rope_freq_base(spec.rope_base)
    w.add_rope_dimension_count(spec.n_rot or spec.head_dim)
    if spec.explicit_head_dim:
        w.add_key_length(spec.head_dim)
        w.add_value_length(spec.head_dim)
    if spec.rope_scaling is not None:
        w.add_rope_scaling_type(gguf.RopeScalingType(spec.rope_scaling_type))
        w.add_rope_scaling_factor(spec.rope_scaling)
    if spec.orig_ctx:
        w.add_rope_scaling_orig_ctx_len(spec.orig_ctx)
    for key, value in spec.extra_kv:
        if isinstance(value, float):
            w.add_float32(f"{arch}.{key}", value)
        else:
            w.add_uint32(f"{arch}.{key}", value)
    add_vocab(w, spec, voc, chat_template)

    cls_rows = None
    if spec.rerank:
        # As conversion/qwen.py writes Qwen3-Reranker (llama.cpp: n_cls_out 2, and a softmax
        # over the two scores of the last token).
        w.add_pooling_type(gguf.PoolingType.RANK)
        w.add_classifier_output_labels(["yes", "no"])
        w.add_chat_template([{"name": "rerank", "template": RERANK_TEMPLATE}])
        cls_rows = rerank_token_ids(voc)

    finish(w, make_tensors(spec, len(voc.tokens), rng, cls_rows), tmp, path)


def start(kind: str, spec: Spec, path: str, seed: int, extra_blocks: int = 0):
    """The writer of an architecture module's file (gemma3n.py, gemma4.py, lfm2.py), its
    temporary path and its random generator (seeded by the kind, as the other kinds), with the
    name, context, embedding and block count (``extra_blocks`` more than ``spec.n_layer``)
    written."""
    rng = np.random.default_rng([seed, sum(kind.encode())])
    tmp = path + ".tmp"
    w = gguf.GGUFWriter(tmp, spec.arch)
    w.add_name(spec.name or f"synthetic-{kind}")
    w.add_context_length(spec.ctx)
    w.add_embedding_length(spec.d_model)
    w.add_block_count(spec.n_layer + extra_blocks)
    return w, tmp, rng


def draws(spec: Spec, rng: np.random.Generator):
    """The tensor helpers of the architecture modules (gemma3n.py, gemma4.py, lfm2.py): a
    tensor's type (F32 unless ``spec.types`` says otherwise), a random matrix whose rows map
    unit-RMS inputs to outputs of RMS ``gain``, and norm weights within 20% of ``gain``."""
    def ty(name: str) -> Q:
        return spec.types.get(name, Q.F32)

    def mat(rows: int, cols: int, gain: float) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) * (gain / np.sqrt(cols))).astype(np.float32)

    def norm(n: int, gain: float = 1.0) -> np.ndarray:
        return (gain * (1.0 + 0.2 * rng.uniform(-1.0, 1.0, n))).astype(np.float32)

    return ty, mat, norm


def attention_tensors(p: str, spec: Spec, ty, mat, norm, q_rows: int = 0, qk_norm: bool = True):
    """The attention tensors of an architecture module's attention layer ``p`` (``blk.N.``):
    ``attn_q`` (``q_rows`` rows, default n_head heads), ``attn_k``, ``attn_v``, per-head Q/K
    norms if ``qk_norm``, ``attn_output`` (gain ``spec.resid_gain``); helpers from ``draws``."""
    d, hd = spec.d_model, spec.head_dim
    yield p + "attn_q.weight", mat(q_rows or spec.n_head * hd, d, 1.5), ty("attn_q")
    yield p + "attn_k.weight", mat(spec.n_kv * hd, d, 1.5), ty("attn_k")
    yield p + "attn_v.weight", mat(spec.n_kv * hd, d, 1.0), ty("attn_v")
    if qk_norm:
        yield p + "attn_q_norm.weight", norm(hd), Q.F32
        yield p + "attn_k_norm.weight", norm(hd), Q.F32
    out = mat(d, spec.n_head * hd, spec.resid_gain)
    yield p + "attn_output.weight", out, ty("attn_output")


def ffn_tensors(p: str, spec: Spec, ty, mat, norm, norm_name: str = "ffn_norm"):
    """The SwiGLU feed-forward of an architecture module's layer ``p`` behind its norm
    ``norm_name``; helpers from ``draws``."""
    d, ff = spec.d_model, spec.ffn
    yield p + norm_name + ".weight", norm(d), Q.F32
    yield p + "ffn_gate.weight", mat(ff, d, 1.0), ty("ffn_gate")
    yield p + "ffn_up.weight", mat(ff, d, 1.0), ty("ffn_up")
    yield p + "ffn_down.weight", mat(d, ff, spec.resid_gain), ty("ffn_down")


def finish(w: gguf.GGUFWriter, tensors, tmp: str, path: str) -> None:
    """Adds ``tensors`` ((name, float32 array, type) triples) to ``w``, writes the file to
    ``tmp`` and moves it to ``path``."""
    for name, data, qtype in tensors:
        w.add_tensor(name, encode(data, qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", nargs="?",
                        help="a kind below, or KIND+f32: the same model with every tensor F32")
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
    if args.kind.removesuffix("+f32") not in KINDS:
        parser.error(f"unknown kind {args.kind!r} (see --list)")
    template = CHATML
    if args.chat_template:
        with open(args.chat_template, encoding="utf-8") as f:
            template = f.read()
    write_model(args.kind, args.out, args.seed, template)
    print(args.out)


if __name__ == "__main__":
    main()
