"""Qwen 3.5 synthetic models for make_model.py: the hybrid layout llama.cpp's qwen35 graph reads.

Eight layers: gated delta nets ("linear attention") in all but every fourth, which is full
attention (`full_attention_interval` 4, as Qwen3_5TextModel writes it). Every layer has
`attn_norm` before its mixer and a SwiGLU feed-forward behind `post_attention_norm`.

- A delta-net layer: `attn_qkv` (queries and keys of `k_heads` heads, values of `v_heads`
  heads, all of `head`: ``NETS``), a causal convolution of CONV taps over those channels (`ssm_conv1d`, F32),
  per-value-head `ssm_beta`, `ssm_alpha`, `ssm_dt.bias` and `ssm_a` (-exp(A_log)), the output
  gate `attn_gate`, the per-head `ssm_norm` and `ssm_out`. In `qwen35` v_heads = 2 * k_heads,
  so that value head h reading key head h % k_heads is exercised. The decay's parameters are drawn so that
  e^g stays within ~0.6-0.99 (the state remembers several tokens) and β = sigmoid(N(0, 1)).
- An attention layer: n_head heads whose `attn_q` rows hold each head's query then its gate,
  n_kv KV heads, per-head Q/K norms, NeoX RoPE on a quarter of each head (interleaved M-RoPE
  sections [3, 3, 2, 0], which is plain RoPE for text), `attn_output`.

`qwen35-2b` has Qwen3.5-2B's shape (d_model 2048, 24 layers, attention 8 heads of 256 with 2
KV heads, delta nets of 16 + 16 heads of 128, FFN 6144, vocabulary 248320, tied), F16, for
speed measurements.

Metadata as convert_hf_to_gguf.py's Qwen3_5TextModel writes it: the `ssm.*` sizes,
`full_attention_interval`, `rope.dimension_count` and `rope.dimension_sections`, key and value
length. The output head is tied to `token_embd` (as in the small released models). `qwen35`
also stores one multi-token-prediction block after the 8 (`nextn_predict_layers` 1,
`block_count` 9, as the converter writes Qwen 3.5 files), which llama.cpp and we load past.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gguf import GGMLQuantizationType as Q

import make_model as mm

CONV = 4
INTERVAL = 4


@dataclass(frozen=True)
class Nets:
    """The delta nets' heads and the attention's RoPE sections of one kind."""

    k_heads: int
    v_heads: int
    head: int
    sections: tuple[int, int, int, int]


# Multi-token-prediction blocks stored after the decoder's.
MTP = {"qwen35": 1, "qwen35-2b": 0}

NETS = {
    "qwen35": Nets(k_heads=2, v_heads=4, head=32, sections=(3, 3, 2, 0)),
    # Qwen3.5-2B's config: 16 key and value heads of 128, partial rotary 0.25 of 256.
    "qwen35-2b": Nets(k_heads=16, v_heads=16, head=128, sections=(11, 11, 10, 0)),
}


def is_recurrent(il: int) -> bool:
    return (il + 1) % INTERVAL != 0


def write(kind: str, spec: mm.Spec, voc, path: str, seed: int, chat_template: str) -> None:
    """Writes the model ``kind`` (``qwen35`` or ``qwen35-2b``, without ``+f32``) of ``spec``."""
    nets = NETS[kind]
    assert spec.n_rot == 2 * sum(nets.sections)
    mtp = MTP[kind]
    w, tmp, rng = mm.start(kind, spec, path, seed, extra_blocks=mtp)
    w.add_feed_forward_length(spec.ffn)
    w.add_head_count(spec.n_head)
    w.add_head_count_kv(spec.n_kv)
    w.add_key_length(spec.head_dim)
    w.add_value_length(spec.head_dim)
    w.add_rope_freq_base(spec.rope_base)
    w.add_rope_dimension_count(spec.n_rot)
    w.add_rope_dimension_sections(list(nets.sections))
    w.add_layer_norm_rms_eps(spec.eps)
    w.add_ssm_conv_kernel(CONV)
    w.add_ssm_state_size(nets.head)
    w.add_ssm_group_count(nets.k_heads)
    w.add_ssm_time_step_rank(nets.v_heads)
    w.add_ssm_inner_size(nets.v_heads * nets.head)
    w.add_full_attention_interval(INTERVAL)
    if mtp:
        # Multi-token-prediction blocks after the decoder's, as the converter writes the
        # released models (block_count counts them).
        w.add_nextn_predict_layers(mtp)
    mm.add_vocab(w, spec, voc, chat_template)
    mm.finish(w, tensors(spec, nets, mtp, len(voc.tokens), rng), tmp, path)


def tensors(spec: mm.Spec, nets: Nets, mtp: int, n_vocab: int, rng: np.random.Generator):
    """Yields (name, float32 array [rows, cols], type) for every tensor."""
    d = spec.d_model
    channels = (2 * nets.k_heads + nets.v_heads) * nets.head
    values = nets.v_heads * nets.head
    n_v = nets.v_heads

    ty, mat, norm = mm.draws(spec, rng)

    embd = rng.standard_normal((n_vocab, d)).astype(np.float32)
    yield "token_embd.weight", embd, ty("token_embd")
    for il in range(spec.n_layer):
        p = f"blk.{il}."
        yield p + "attn_norm.weight", norm(d), Q.F32
        if is_recurrent(il):
            yield p + "attn_qkv.weight", mat(channels, d, 1.0), ty("attn_qkv")
            yield p + "attn_gate.weight", mat(values, d, 1.0), ty("attn_gate")
            kernel = rng.standard_normal((channels, CONV)) / np.sqrt(CONV)
            yield p + "ssm_conv1d.weight", kernel.astype(np.float32), Q.F32
            dt_bias = (-2.0 + 0.5 * rng.standard_normal(n_v)).astype(np.float32)
            yield p + "ssm_dt.bias", dt_bias, Q.F32
            a = -rng.uniform(0.05, 1.0, n_v).astype(np.float32)
            yield p + "ssm_a", a, Q.F32
            yield p + "ssm_beta.weight", mat(n_v, d, 1.0), ty("ssm_beta")
            yield p + "ssm_alpha.weight", mat(n_v, d, 1.0), ty("ssm_alpha")
            yield p + "ssm_norm.weight", norm(nets.head), Q.F32
            yield p + "ssm_out.weight", mat(d, values, spec.resid_gain), ty("ssm_out")
        else:
            # Each head's query, then its gate.
            q_rows = 2 * spec.n_head * spec.head_dim
            yield from mm.attention_tensors(p, spec, ty, mat, norm, q_rows=q_rows)
        yield from mm.ffn_tensors(p, spec, ty, mat, norm, norm_name="post_attention_norm")
    yield "output_norm.weight", norm(d, 0.5), Q.F32
    if mtp:
        # The MTP block (llama.cpp's load_block_mtp): a gated attention block with the
        # projection of [norm(embedding), norm(hidden)], which the decoder does not run.
        p = f"blk.{spec.n_layer}."
        yield p + "attn_norm.weight", norm(d), Q.F32
        q_rows = 2 * spec.n_head * spec.head_dim
        yield from mm.attention_tensors(p, spec, ty, mat, norm, q_rows=q_rows)
        yield from mm.ffn_tensors(p, spec, ty, mat, norm, norm_name="post_attention_norm")
        yield p + "nextn.eh_proj.weight", mat(d, 2 * d, 1.0), ty("nextn.eh_proj")
        yield p + "nextn.enorm.weight", norm(d), Q.F32
        yield p + "nextn.hnorm.weight", norm(d), Q.F32
