"""Granite 4 hybrid synthetic models for make_model.py: the layout llama.cpp's granitehybrid
graph reads.

Six layers: Mamba-2 mixers in all but layers 2 and 5, which are attention (`PLAN`). Every
layer has `attn_norm` before its mixer and a SwiGLU feed-forward behind `ffn_norm`; Granite's
multipliers (embedding 12, residual 0.22, attention 0.125, logits 1/8) as the `granite` kind.

- A Mamba-2 layer: `ssm_in` gives the gate z (INNER values), the channels x, B and C (INNER,
  then STATE per group for B and for C) and one time step per head; a causal convolution of
  CONV taps with a bias over x, B, C (`ssm_conv1d`, F32) and SiLU; per head `ssm_dt.bias`,
  `ssm_a` (-exp(A_log)) and `ssm_d`; the state update s <- s e^(dt A) + B x dt, y = s.C + D x;
  y silu(z) RMS-normed per group (`ssm_norm`, [GROUPS, INNER / GROUPS]) and `ssm_out`. HEADS 8
  of 16 channels in GROUPS 2, so that head h reading group h / 4 is exercised. The time steps
  are drawn so that e^(dt A) stays within ~0.5-0.99 (the state remembers several tokens).
- An attention layer: 4 heads of 16, 2 KV heads, no RoPE (`rope.scaling.finetuned` false, as
  Granite 4.0-H writes it), `attn_output`.

Metadata as convert_hf_to_gguf.py's GraniteHybridModel writes it: `attention.head_count_kv`
per layer with 0 for the Mamba-2 layers (llama.cpp's mark of a recurrent layer), the `ssm.*`
sizes (`ssm.time_step_rank` is the head count), the multipliers; the output head is untied.
"""

from __future__ import annotations

import numpy as np

from gguf import GGMLQuantizationType as Q

import make_model as mm

PLAN = ("mamba", "mamba", "attn", "mamba", "mamba", "attn")
CONV = 4
STATE = 16
GROUPS = 2
HEADS = 8
MULTIPLIERS = (("logit_scale", 8.0), ("residual_scale", 0.22), ("embedding_scale", 12.0),
               ("attention.scale", 0.125))


def is_mamba(il: int) -> bool:
    return PLAN[il] == "mamba"


def write(kind: str, spec: mm.Spec, voc, path: str, seed: int, chat_template: str) -> None:
    """Writes the model ``kind`` (``granitehybrid``, without ``+f32``) of ``spec``."""
    L = spec.n_layer
    assert L == len(PLAN)
    inner = 2 * spec.d_model
    w, tmp, rng = mm.start(kind, spec, path, seed)
    w.add_feed_forward_length(spec.ffn)
    w.add_head_count(spec.n_head)
    w.add_head_count_kv([0 if is_mamba(il) else spec.n_kv for il in range(L)])
    w.add_rope_freq_base(spec.rope_base)
    w.add_rope_scaling_finetuned(False)
    w.add_layer_norm_rms_eps(spec.eps)
    w.add_ssm_conv_kernel(CONV)
    w.add_ssm_state_size(STATE)
    w.add_ssm_group_count(GROUPS)
    w.add_ssm_inner_size(inner)
    w.add_ssm_time_step_rank(HEADS)
    for key, value in MULTIPLIERS:
        w.add_float32(f"{spec.arch}.{key}", value)
    mm.add_vocab(w, spec, voc, chat_template)
    mm.finish(w, tensors(spec, len(voc.tokens), rng), tmp, path)


def tensors(spec: mm.Spec, n_vocab: int, rng: np.random.Generator):
    """Yields (name, float32 array [rows, cols], type) for every tensor."""
    d = spec.d_model
    inner = 2 * d
    channels = inner + 2 * GROUPS * STATE

    ty, mat, norm = mm.draws(spec, rng)

    embd = rng.standard_normal((n_vocab, d)).astype(np.float32)
    yield "token_embd.weight", embd, ty("token_embd")
    for il in range(spec.n_layer):
        p = f"blk.{il}."
        yield p + "attn_norm.weight", norm(d), Q.F32
        if is_mamba(il):
            yield p + "ssm_in.weight", mat(inner + channels + HEADS, d, 1.0), ty("ssm_in")
            kernel = rng.standard_normal((channels, CONV)) / np.sqrt(CONV)
            yield p + "ssm_conv1d.weight", kernel.astype(np.float32), Q.F32
            bias = 0.1 * rng.standard_normal(channels)
            yield p + "ssm_conv1d.bias", bias.astype(np.float32), Q.F32
            dt_bias = -3.0 + 0.5 * rng.standard_normal(HEADS)
            yield p + "ssm_dt.bias", dt_bias.astype(np.float32), Q.F32
            a = -rng.uniform(1.0, 8.0, (HEADS, 1))
            yield p + "ssm_a", a.astype(np.float32), Q.F32
            skip = 1.0 + 0.2 * rng.standard_normal((HEADS, 1))
            yield p + "ssm_d", skip.astype(np.float32), Q.F32
            yield p + "ssm_norm.weight", norm(inner).reshape(GROUPS, inner // GROUPS), Q.F32
            yield p + "ssm_out.weight", mat(d, inner, spec.resid_gain), ty("ssm_out")
        else:
            yield from mm.attention_tensors(p, spec, ty, mat, norm, qk_norm=False)
        yield from mm.ffn_tensors(p, spec, ty, mat, norm)
    yield "output_norm.weight", norm(d), Q.F32
    yield "output.weight", mat(n_vocab, d, spec.out_gain), ty("output")
