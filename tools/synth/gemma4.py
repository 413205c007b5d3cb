"""Gemma 4 synthetic models for make_model.py: the layer plan llama.cpp's gemma4 graph reads.

Six layers alternate local (sliding-window, heads of 16, 2 KV heads, RoPE base 10^4 on all 16
dimensions) and global (heads of 32, 1 KV head, no attn_v: the keys' projection gives the
values; "proportional" RoPE, base 10^6, through rope_freqs factors that leave 24 of the 32
dimensions unrotated). The last two layers (`attention.shared_kv_layers` 2) have no keys or
values of their own: llama.cpp has them attend to layers 2 (local) and 3 (global). Their
feed-forward is twice as wide (a per-layer `feed_forward_length`, as the converter writes for
`use_double_wide_mlp`). Per-layer inputs of 8 values per layer, a `layer_output_scale` per
layer, and a final logit soft-cap.

With experts (`gemma4-moe`, the 26B A4B's feed-forward): every layer adds 4 experts (2 used)
to its dense feed-forward, routed by its own input scale; even layers store gate and up as one
`ffn_gate_up_exps`, odd layers as two tensors; each expert has an output scale. No per-layer
inputs (as the 26B A4B).
"""

from __future__ import annotations

import numpy as np

import gguf
from gguf import GGMLQuantizationType as Q

import make_model as mm


def is_local(il: int) -> bool:
    return il % 2 == 0
SHARED = 2
HEAD_LOCAL, KV_LOCAL = 16, 2
HEAD_GLOBAL, KV_GLOBAL = 32, 1
ROTATED_GLOBAL = 8  # of 32 dimensions: partial_rotary_factor 0.25
PER_LAYER = 8
WINDOW = 32


def n_ff(spec: mm.Spec, il: int) -> int:
    return spec.ffn * (2 if il >= spec.n_layer - SHARED else 1)


def per_layer(spec: mm.Spec) -> int:
    return 0 if spec.n_expert else PER_LAYER


def write(kind: str, spec: mm.Spec, voc, path: str, seed: int, chat_template: str) -> None:
    """Writes the model ``kind`` (``gemma4`` or ``gemma4-moe``, without ``+f32``) of ``spec``."""
    arch, L = spec.arch, spec.n_layer
    w, tmp, rng = mm.start(kind, spec, path, seed)
    w.add_array(f"{arch}.feed_forward_length", [n_ff(spec, il) for il in range(L)])
    w.add_head_count(spec.n_head)
    w.add_array(f"{arch}.attention.head_count_kv",
                [KV_LOCAL if is_local(il) else KV_GLOBAL for il in range(L)])
    w.add_layer_norm_rms_eps(spec.eps)
    w.add_rope_freq_base(spec.rope_base)
    w.add_float32(f"{arch}.rope.freq_base_swa", 10000.0)
    w.add_rope_dimension_count(HEAD_GLOBAL)
    w.add_uint32(f"{arch}.rope.dimension_count_swa", HEAD_LOCAL)
    w.add_key_length(HEAD_GLOBAL)
    w.add_value_length(HEAD_GLOBAL)
    w.add_uint32(f"{arch}.attention.key_length_swa", HEAD_LOCAL)
    w.add_uint32(f"{arch}.attention.value_length_swa", HEAD_LOCAL)
    w.add_uint32(f"{arch}.attention.sliding_window", WINDOW)
    w.add_array(f"{arch}.attention.sliding_window_pattern", [is_local(il) for il in range(L)])
    w.add_uint32(f"{arch}.attention.shared_kv_layers", SHARED)
    w.add_uint32(f"{arch}.embedding_length_per_layer_input", per_layer(spec))
    if spec.n_expert:
        w.add_uint32(f"{arch}.expert_count", spec.n_expert)
        w.add_uint32(f"{arch}.expert_used_count", spec.n_expert_used)
        w.add_uint32(f"{arch}.expert_feed_forward_length", spec.expert_ff)
    w.add_float32(f"{arch}.final_logit_softcapping", 30.0)
    mm.add_vocab(w, spec, voc, chat_template)
    mm.finish(w, tensors(spec, len(voc.tokens), rng), tmp, path)


def tensors(spec: mm.Spec, n_vocab: int, rng: np.random.Generator):
    """Yields (name, float32 array [rows, cols], type) for every tensor."""
    d, L = spec.d_model, spec.n_layer

    ty, mat, norm = mm.draws(spec, rng)

    # Rows of RMS 1 (× √d = 8 in the residual stream); the MoE kind's 4 layers would not get
    # past that (every prediction would repeat the token), so its rows have RMS 1/2.
    embd = ((0.5 if spec.n_expert else 1.0) * rng.standard_normal((n_vocab, d))).astype(np.float32)
    yield "token_embd.weight", embd, ty("token_embd")
    width = per_layer(spec)
    if width:
        yield ("per_layer_token_embd.weight", rng.standard_normal((n_vocab, width * L))
               .astype(np.float32), ty("per_layer_token_embd"))
        yield "per_layer_model_proj.weight", mat(width * L, d, 8.0), ty("per_layer_model_proj")
        yield "per_layer_proj_norm.weight", norm(width), Q.F32
    half = HEAD_GLOBAL // 2
    factors = [1.0] * (ROTATED_GLOBAL // 2) + [1e30] * (half - ROTATED_GLOBAL // 2)
    yield "rope_freqs.weight", np.array(factors, dtype=np.float32), Q.F32
    for il in range(L):
        p = f"blk.{il}."
        local = is_local(il)
        hd, kv = (HEAD_LOCAL, KV_LOCAL) if local else (HEAD_GLOBAL, KV_GLOBAL)
        own_kv = il < L - SHARED
        ff = n_ff(spec, il)
        yield p + "attn_norm.weight", norm(d), Q.F32
        yield p + "attn_q.weight", mat(spec.n_head * hd, d, 1.5), ty("attn_q")
        yield p + "attn_q_norm.weight", norm(hd), Q.F32
        if own_kv:
            yield p + "attn_k.weight", mat(kv * hd, d, 1.5), ty("attn_k")
            yield p + "attn_k_norm.weight", norm(hd), Q.F32
            if local:
                yield p + "attn_v.weight", mat(kv * hd, d, 1.0), ty("attn_v")
        yield p + "attn_output.weight", mat(d, spec.n_head * hd, spec.resid_gain), ty("attn_output")
        yield p + "post_attention_norm.weight", norm(d, spec.post_norm_gain), Q.F32
        yield p + "ffn_norm.weight", norm(d), Q.F32
        yield p + "ffn_gate.weight", mat(ff, d, 1.0), ty("ffn_gate")
        yield p + "ffn_up.weight", mat(ff, d, 1.0), ty("ffn_up")
        yield p + "ffn_down.weight", mat(d, ff, spec.resid_gain), ty("ffn_down")
        yield p + "post_ffw_norm.weight", norm(d, spec.post_norm_gain), Q.F32
        if spec.n_expert:
            yield from experts(spec, p, il, mat, norm, ty)
        if width:
            yield p + "inp_gate.weight", mat(width, d, 1.0), ty("inp_gate")
            yield p + "proj.weight", mat(d, width, 1.0), ty("proj")
            yield p + "post_norm.weight", norm(d, spec.post_norm_gain), Q.F32
        yield p + "layer_output_scale.weight", np.array([0.5 + 0.1 * il], dtype=np.float32), Q.F32
    # Logits well below the soft-cap of 30, with clear winners.
    yield "output_norm.weight", norm(d, 0.5), Q.F32


def experts(spec: mm.Spec, p: str, il: int, mat, norm, ty):
    """A layer's experts beside its dense feed-forward, with their norms and router scale."""
    d, e, eff = spec.d_model, spec.n_expert, spec.expert_ff

    def stack(rows: int, cols: int, gain: float) -> np.ndarray:
        return np.stack([mat(rows, cols, gain) for _ in range(e)])
    yield p + "post_ffw_norm_1.weight", norm(d), Q.F32
    yield p + "pre_ffw_norm_2.weight", norm(d), Q.F32
    yield p + "post_ffw_norm_2.weight", norm(d), Q.F32
    yield p + "ffn_gate_inp.weight", mat(e, d, 3.0), ty("ffn_gate_inp")
    # Router logits of std ~6 (its input is RMS-normed and × 1/√d): few near-ties between
    # the second and third expert, where any rounding difference flips the choice.
    yield p + "ffn_gate_inp.scale", norm(d, 16.0), Q.F32
    if il % 2 == 0:
        both = np.concatenate([stack(eff, d, 1.0), stack(eff, d, 1.0)], axis=1)
        yield p + "ffn_gate_up_exps.weight", both, ty("ffn_gate_up_exps")
    else:
        yield p + "ffn_gate_exps.weight", stack(eff, d, 1.0), ty("ffn_gate_exps")
        yield p + "ffn_up_exps.weight", stack(eff, d, 1.0), ty("ffn_up_exps")
    yield p + "ffn_down_exps.weight", stack(d, eff, spec.resid_gain), ty("ffn_down_exps")
    yield p + "ffn_down_exps.scale", norm(e), Q.F32
