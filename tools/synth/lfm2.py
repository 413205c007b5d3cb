"""LFM2 synthetic models for make_model.py: the hybrid layer plan llama.cpp's lfm2 graph reads.

Six layers, as LFM2's: conv, conv, attn, conv, attn, conv (`PLAN`); the phone-scale
`lfm2-1.2b` has LFM2-1.2B's 16 (`PLAN_1_2B`). Every layer has an
operator norm (`attn_norm`) before its mixer and a SwiGLU feed-forward behind `ffn_norm`.

- A conv layer (gated short convolution) projects its input to B, C, x (`shortconv.in_proj`,
  3*d_model rows in that order), convolves B*x causally over the last `l_cache` 3 positions
  with a kernel per channel (`shortconv.conv`, [d_model, 3], always F32 as the converter and
  ggml_ssm_conv want it; column 2 weighs the current position), multiplies by C and projects
  back (`shortconv.out_proj`). llama.cpp keeps the last 2 positions as recurrent state.
- An attention layer: 4 heads of 16, 2 KV heads, per-head Q/K RMS norms before NEOX RoPE
  (base 10^6), no biases; the output projection is d_model x d_model.

`lfm2-swa` adds `attention.sliding_window` 16 (as LFM2-VL's larger models have one): llama.cpp
then makes every attention layer local.

Metadata as convert_hf_to_gguf.py's LFM2Model writes it: `attention.head_count_kv` is a per-layer
array with 0 for the conv layers (llama.cpp's only mark of a recurrent layer),
`shortconv.l_cache`, the RMS epsilon; no rope.dimension_count or key/value_length. The
output norm is `token_embd_norm` (llama.cpp's name for LFM2's final norm), and the output head
is tied to `token_embd` (no `output.weight`, as in the released LFM2 files).

Scales: the branches' output projections have gain `resid_gain` 3, so that the tied logits
don't echo the input token (top-1 = the current token at ~4% of the evaluation text's positions
at seed 0, ~50% with gain 1); the final norm's weights ~0.5 give logits of std ~4.
"""

from __future__ import annotations


import numpy as np

import gguf
from gguf import GGMLQuantizationType as Q

import make_model as mm

PLAN = ("conv", "conv", "attn", "conv", "attn", "conv")
# LFM2-1.2B's 16 layers (its config's layer_types): attention at 2, 5, 8, 10, 12 and 14.
PLAN_1_2B = tuple("attn" if il in (2, 5, 8, 10, 12, 14) else "conv" for il in range(16))
L_CACHE = 3
# The final norm's weights: logits of std ~8 * 0.5 (token_embd's rows have RMS 1; tied head).
OUT_NORM_GAIN = 0.5


def plan(n_layer: int) -> tuple[str, ...]:
    return PLAN_1_2B if n_layer == len(PLAN_1_2B) else PLAN


def is_conv(il: int, n_layer: int = len(PLAN)) -> bool:
    return plan(n_layer)[il] == "conv"


def write(kind: str, spec: mm.Spec, voc, path: str, seed: int, chat_template: str) -> None:
    """Writes the model ``kind`` (``lfm2``, without ``+f32``) of ``spec``."""
    L = spec.n_layer
    assert L == len(plan(L)) and spec.n_head * spec.head_dim == spec.d_model
    w, tmp, rng = mm.start(kind, spec, path, seed)
    w.add_feed_forward_length(spec.ffn)
    w.add_head_count(spec.n_head)
    w.add_head_count_kv([0 if is_conv(il, L) else spec.n_kv for il in range(L)])
    w.add_rope_freq_base(spec.rope_base)
    w.add_shortconv_l_cache(L_CACHE)
    w.add_layer_norm_rms_eps(spec.eps)
    for key, value in spec.extra_kv:
        w.add_uint32(f"{spec.arch}.{key}", value)
    mm.add_vocab(w, spec, voc, chat_template)
    mm.finish(w, tensors(spec, len(voc.tokens), rng), tmp, path)


def tensors(spec: mm.Spec, n_vocab: int, rng: np.random.Generator):
    """Yields (name, float32 array [rows, cols], type) for every tensor."""
    d = spec.d_model

    ty, mat, norm = mm.draws(spec, rng)

    embd = rng.standard_normal((n_vocab, d)).astype(np.float32)
    yield "token_embd.weight", embd, ty("token_embd")
    for il in range(spec.n_layer):
        p = f"blk.{il}."
        yield p + "attn_norm.weight", norm(d), Q.F32
        if is_conv(il, spec.n_layer):
            yield p + "shortconv.in_proj.weight", mat(3 * d, d, 1.0), ty("shortconv.in_proj")
            # B*x has RMS ~1: each output of the 3-tap convolution RMS ~1 too.
            kernel = rng.standard_normal((d, L_CACHE)) / np.sqrt(L_CACHE)
            yield p + "shortconv.conv.weight", kernel.astype(np.float32), Q.F32
            out = mat(d, d, spec.resid_gain)
            yield p + "shortconv.out_proj.weight", out, ty("shortconv.out_proj")
        else:
            yield from mm.attention_tensors(p, spec, ty, mat, norm)
        yield from mm.ffn_tensors(p, spec, ty, mat, norm)
    # LFM2's final norm (there is no output_norm), ahead of the tied head.
    yield "token_embd_norm.weight", norm(d, OUT_NORM_GAIN), Q.F32

