"""Gemma 3n synthetic models for make_model.py: the layer plan llama.cpp's gemma3n graph reads.

25 layers, 4 heads of 16, 2 KV heads. Layers repeat 4 local (sliding window 32, RoPE base
10^4) and 1 global (base 10^6): 4, 9, 14, 19 and 24 are global. llama.cpp hard-codes most of
Gemma 3n's plan instead of reading it:

- Only the first 20 layers have keys and values (`n_layer_kv_from_start` 20): layers 20-23
  (local) attend to layer 18's cache, layer 24 (global) to layer 19's. The loader still
  requires their `attn_k`/`attn_v` (unused), as the converter writes them.
- In the first 10 layers the feed-forward's gate values become max(0, g - (mean + 1.645
  std)) over each row before the GELU (activation sparsity 0.95); the file's
  `activation_sparsity_scale` is not read.
- 4 AltUp streams, the first active (`altup_proj` makes the other three from the scaled
  embedding, `altup_unembd_proj` folds them back before the final norm, each matched to the
  active stream's magnitude), LAuReL of rank 64 and per-layer inputs of 256 values per layer
  (`per_layer_token_embd`, scaled by 16, plus `per_layer_model_proj` of the embedding): these
  widths are llama.cpp's fixed hparams, the tensors must have them.
- Attention scale 1 (Q/K are RMS-normed; V is RMS-normed without weights), final logit
  soft-cap 30 (the default; the file's value is not read either).

Metadata as convert_hf_to_gguf.py's Gemma3NModel writes it: `feed_forward_length` per layer
(the config's intermediate_size is a list), head counts, `key_length`/`value_length`,
`rope.freq_base`/`rope.freq_base_swa`, `attention.sliding_window`, `final_logit_softcapping`,
`altup.active_idx`/`altup.num_inputs`, `embedding_length_per_layer_input`,
`attention.shared_kv_layers` (5), the per-layer `activation_sparsity_scale` (icdf(0.95) =
1.645 for layers 0-9, icdf(0) = -inf for the rest) and `attention.sliding_window_pattern` as
one bool per layer (from the config's layer_types). llama.cpp requires only the sliding window
and the RMS epsilon of these. The output head is tied to `token_embd` (no `output.weight`).

Scales: the embedding's rows have RMS 1 (× √d_model = 8 in the graph); `per_layer_token_embd`
has RMS 1/16, so its ×16 entry in the per-layer inputs weighs as much as the normalized
projection. The AltUp router's rows map its input (normalized, × 1/d_model) to ~0.75 before
the tanh (|router output| ~0.2); the prediction and correction coefficients have std 0.03, so
each layer mixes ~0.01 of the other streams into each stream and corrects by 1 ± ~0.01 times
the innovation. The streams stay at RMS ~3 (active) and ~8 to ~12 (the others, which
accumulate every layer's innovation). 25 layers amplify rounding (the AltUp mixing most:
with router gain 48 and coefficient std 0.1, llama.cpp's native and AVX2 builds differed by
a mean KLD of up to 0.015 on the mixed-type file), so the mixing and the branches are kept
small: the attention and feed-forward post-norm weights ~0.5 (`post_norm_gain`), LAuReL's
and the per-layer input's ~1, and the query norm's ~0.35 (scores of std ~1.4, attention
scale 1); `ffn_gate` is F16 (the sparsity threshold of layers 0-9 amplifies its rounding).
The native and AVX2 builds then differ by a mean KLD of ~2e-4 (seeds 0-3) and the Q and F32
files agree on ~91% of the top-1 tokens. The final norm's weights ~0.5 give logits of std
~4 (well below the cap); the top-1 token is the current token at ~1-11% of the evaluation
text's positions (seeds 0-3).
"""

from __future__ import annotations

import math

import numpy as np

from gguf import GGMLQuantizationType as Q

import make_model as mm

# llama.cpp's fixed gemma3n hparams (llama-hparams.h, models.h), not read from the file.
N_ALTUP = 4
ALTUP_ACTIVE = 0
LAUREL_RANK = 64
PER_LAYER = 256
KV_FROM_START = 20
SPARSE_LAYERS = 10
# torch's float32 normal icdf(0.95), as the converter computes it (llama.cpp's
# f_sparsity_std_mul).
STD_MUL = 1.6448533535003662
# Layers repeat 4 local, 1 global (llama.cpp's default pattern 5, as Gemma 3n's layer_types).
PATTERN = 5
WINDOW = 32
ROPE_BASE_SWA = 10000.0
SOFTCAP = 30.0
# Router rows: tanh inputs of RMS ~ROUTER_GAIN / d_model. Std of the AltUp prediction and
# correction coefficients. Both small: the AltUp mixing amplifies rounding most.
ROUTER_GAIN = 16.0
COEF_STD = 0.03
# Query norm weights ~0.35 (attention scale 1: scores of std ~1.4, no sharp softmax).
Q_NORM_GAIN = 0.35
# The per-layer input gate reads the corrected active stream (RMS ~5, not normalized):
# GELU inputs of RMS ~2.5.
INP_GATE_GAIN = 0.5
# Output norms of LAuReL and the per-layer input (attention's and the feed-forward's:
# spec.post_norm_gain).
SIDE_GAIN = 1.0
OUT_NORM_GAIN = 0.5


def is_local(il: int) -> bool:
    return il % PATTERN < PATTERN - 1


def sparsity_scale(il: int) -> float:
    """The converter's activation_sparsity_scale: the normal icdf of the layer's sparsity
    (0.95, then 0: -inf)."""
    return STD_MUL if il < SPARSE_LAYERS else -math.inf


def write(kind: str, spec: mm.Spec, voc, path: str, seed: int, chat_template: str) -> None:
    """Writes the model ``kind`` (``gemma3n``, without ``+f32``) of ``spec``."""
    L = spec.n_layer
    assert L > KV_FROM_START and spec.tied
    w, tmp, rng = mm.start(kind, spec, path, seed)
    w.add_feed_forward_length([spec.ffn] * L)
    w.add_head_count(spec.n_head)
    w.add_head_count_kv(spec.n_kv)
    w.add_rope_freq_base(spec.rope_base)
    w.add_rope_freq_base_swa(ROPE_BASE_SWA)
    w.add_layer_norm_rms_eps(spec.eps)
    w.add_key_length(spec.head_dim)
    w.add_value_length(spec.head_dim)
    w.add_final_logit_softcapping(SOFTCAP)
    w.add_sliding_window(WINDOW)
    w.add_altup_active_idx(ALTUP_ACTIVE)
    w.add_altup_num_inputs(N_ALTUP)
    w.add_embedding_length_per_layer_input(PER_LAYER)
    w.add_shared_kv_layers(L - KV_FROM_START)
    w.add_activation_sparsity_scale([sparsity_scale(il) for il in range(L)])
    w.add_sliding_window_pattern([is_local(il) for il in range(L)])
    mm.add_vocab(w, spec, voc, chat_template)
    mm.finish(w, tensors(spec, len(voc.tokens), rng), tmp, path)


def tensors(spec: mm.Spec, n_vocab: int, rng: np.random.Generator):
    """Yields (name, float32 array [rows, cols] or [n, rows, cols], type) for every tensor."""
    d, hd, ff, L = spec.d_model, spec.head_dim, spec.ffn, spec.n_layer
    q_dim, kv_dim = spec.n_head * hd, spec.n_kv * hd

    ty, mat, norm = mm.draws(spec, rng)

    def coef(rows: int, cols: int) -> np.ndarray:
        return (COEF_STD * rng.standard_normal((rows, cols))).astype(np.float32)

    def stack(n: int) -> np.ndarray:
        # ggml {n_embd, n_embd, n}: n matrices [d, d] (rows: outputs).
        return np.stack([mat(d, d, 1.0) for _ in range(n)])

    embd = rng.standard_normal((n_vocab, d)).astype(np.float32)
    yield "token_embd.weight", embd, ty("token_embd")
    per_layer_embd = rng.standard_normal((n_vocab, PER_LAYER * L)) / math.sqrt(PER_LAYER)
    yield ("per_layer_token_embd.weight", per_layer_embd.astype(np.float32),
           ty("per_layer_token_embd"))
    yield ("per_layer_model_proj.weight", mat(PER_LAYER * L, d, 1.0),
           ty("per_layer_model_proj"))
    yield "per_layer_proj_norm.weight", norm(PER_LAYER), Q.F32
    # Only magnitude-matched outputs are used: the gains don't matter.
    yield "altup_proj.weight", stack(N_ALTUP - 1), Q.F32
    yield "altup_unembd_proj.weight", stack(N_ALTUP - 1), Q.F32
    for il in range(L):
        p = f"blk.{il}."
        yield p + "attn_norm.weight", norm(d), Q.F32
        yield p + "attn_q.weight", mat(q_dim, d, 1.5), ty("attn_q")
        yield p + "attn_k.weight", mat(kv_dim, d, 1.5), ty("attn_k")
        yield p + "attn_v.weight", mat(kv_dim, d, 1.0), ty("attn_v")
        yield p + "attn_output.weight", mat(d, q_dim, spec.resid_gain), ty("attn_output")
        yield p + "attn_q_norm.weight", norm(hd, Q_NORM_GAIN), Q.F32
        yield p + "attn_k_norm.weight", norm(hd), Q.F32
        yield p + "post_attention_norm.weight", norm(d, spec.post_norm_gain), Q.F32
        yield p + "ffn_norm.weight", norm(d), Q.F32
        yield p + "ffn_gate.weight", mat(ff, d, 1.0), ty("ffn_gate")
        yield p + "ffn_up.weight", mat(ff, d, 1.0), ty("ffn_up")
        yield p + "ffn_down.weight", mat(d, ff, spec.resid_gain), ty("ffn_down")
        yield p + "post_ffw_norm.weight", norm(d, spec.post_norm_gain), Q.F32
        yield p + "inp_gate.weight", mat(PER_LAYER, d, INP_GATE_GAIN), ty("inp_gate")
        yield p + "proj.weight", mat(d, PER_LAYER, 1.0), ty("proj")
        yield p + "post_norm.weight", norm(d, SIDE_GAIN), Q.F32
        yield p + "altup_correct_coef.weight", coef(N_ALTUP, N_ALTUP), Q.F32
        yield p + "altup_correct_scale.weight", norm(d), Q.F32
        yield p + "altup_predict_coef.weight", coef(N_ALTUP * N_ALTUP, N_ALTUP), Q.F32
        yield p + "altup_router.weight", mat(N_ALTUP, d, ROUTER_GAIN), Q.F32
        yield p + "altup_router_norm.weight", norm(d), Q.F32
        yield p + "laurel_l.weight", mat(LAUREL_RANK, d, 1.0), ty("laurel_l")
        yield p + "laurel_r.weight", mat(d, LAUREL_RANK, 1.0), ty("laurel_r")
        yield p + "laurel_post_norm.weight", norm(d, SIDE_GAIN), Q.F32
    yield "output_norm.weight", norm(d, OUT_NORM_GAIN), Q.F32
