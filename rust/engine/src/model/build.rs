//! Builds a [`Transformer`] from a GGUF file and its architecture's description
//! ([`Arch`], `archs.rs`): the metadata it reads, the tensors every block has, and the
//! optional parts the description or the file switches on.

use std::sync::Arc;

use super::archs::{Arch, Biases, QkNorm, SlidingWhen};
use super::config::Meta;
use super::delta_net::DeltaNet;
use super::gemma3n::{self, AltUp, AltUpBlock};
use super::mamba2::Mamba2;
use super::moe::{Expert, Moe};
use super::norm::Norm;
use super::pooling::{Classifier, DenseOut, Pooling};
use super::ropes::Ropes;
use super::short_conv::ShortConv;
use super::transformer::{
    Dense, DenseAndExperts, EncoderInput, Ffn, FfnActivation, Layer, PerLayerBlock, PerLayerInputs,
    Transformer,
};
use super::weights::Loader;
use super::ModelConfig;
use crate::backend::Registry;
use crate::gguf::GgufFile;
use crate::{Error, Result};

/// Build a model of architecture `arch` from `gguf`.
pub(crate) fn load(gguf: &Arc<GgufFile>, registry: &Registry, arch: &Arch) -> Result<Transformer> {
    let mut config = ModelConfig::read(gguf, arch.name)?;
    let meta = Meta::new(gguf, arch.name);
    if arch.layer_norm {
        config.rms_eps = meta.f32_or("attention.layer_norm_epsilon", 1e-5)?;
    }
    let ld = Loader::new(gguf, registry);
    let (d, hd) = (config.n_embd, config.head_dim);
    let mut ropes = Ropes::read(&config, &meta, &ld, arch)?;
    if arch.encoder.is_some_and(|e| e.learned_positions || e.alibi) {
        ropes.enabled = false;
    }
    let local = local_layers(&config, &meta, arch)?;
    let window = local.as_ref().map(|(_, w)| *w);
    let embedding = ld.embedding("token_embd.weight", d, config.n_vocab)?;
    let mut layers = Vec::with_capacity(config.n_layer);
    for i in 0..config.n_layer {
        let is_local = local.as_ref().is_some_and(|(l, _)| l[i]);
        let has_rope = match (arch.no_rope_every, arch.sliding) {
            (Some(step), _) if (i + 1) % step == 0 => false,
            (_, Some(s)) if s.rope_local_only && local.is_some() => is_local,
            _ => ropes.enabled,
        };
        let (rope, rope_long) = match (has_rope, is_local) {
            (false, _) => (None, None),
            (true, true) => (Some(ropes.local.clone()), None),
            (true, false) => (Some(ropes.global.clone()), ropes.long.clone()),
        };
        layers.push(Layer {
            rope,
            rope_long,
            window: if is_local { window } else { None },
            ..layer(&ld, i, (&config, &meta), arch)?
        });
    }
    let encoder = match arch.encoder {
        Some(e) => Some(EncoderInput {
            type_row: match ld.has("token_types.weight") {
                true => {
                    let key = "tokenizer.ggml.token_type_count";
                    let n_types = gguf.get_u64(key).unwrap_or(0);
                    if n_types == 0 || n_types > 1 << 16 {
                        return Err(Error::InvalidModel(format!(
                            "an encoder with token types needs '{key}' from 1 to 65536"
                        )));
                    }
                    let types = ld.embedding("token_types.weight", d, n_types as usize)?;
                    let mut row = vec![0f32; d];
                    types.row(0, &mut row)?;
                    Some(row)
                }
                false => None,
            },
            positions: match e.learned_positions {
                true => Some(ld.embedding("position_embd.weight", d, config.n_ctx_train)?),
                false => None,
            },
            norm: norm(&ld, "token_embd_norm", d, &config, arch)?,
        }),
        None => None,
    };
    let output = match arch.embeddings_only {
        true => None,
        false => Some(ld.output_head(&config, &embedding)?),
    };
    let post_ln = arch.encoder.is_some_and(|e| e.post_ln);
    let activation = match meta
        .str("hidden_activation")
        .filter(|_| arch.activation_key)
    {
        None => arch.activation,
        Some("gelu" | "geglu") => FfnActivation::GeluTanh,
        Some("silu" | "swish" | "swiglu") => FfnActivation::Silu,
        Some(other) => {
            return Err(Error::InvalidModel(format!(
                "'{}.hidden_activation' {other:?} is not supported (gelu or silu)",
                arch.name
            )))
        }
    };
    let pooling_type = meta.count_or("pooling_type", 1)?;
    let pooling = Pooling::from_gguf(pooling_type as u64).ok_or_else(|| {
        Error::InvalidModel(format!(
            "unknown '{}.pooling_type' {pooling_type}",
            arch.name
        ))
    })?;
    let granite = arch.scalars.granite;
    let positive = |key: &str| -> Result<Option<f32>> {
        Ok(Some(meta.f32_or(key, 0.0)?).filter(|v| *v != 0.0))
    };
    let logit_scale = if granite {
        let s = meta.f32_or("logit_scale", f32::NAN)?;
        if s.is_nan() || s == 0.0 {
            return Err(Error::InvalidModel(format!(
                "missing or zero metadata '{}.logit_scale'",
                arch.name
            )));
        }
        Some(1.0 / s)
    } else {
        None
    };
    let (query_scale, kq_scale) = if arch.gemma4 {
        (None, 1.0)
    } else if arch.gemma_scales {
        let wide = arch.wide_query_scale_at == Some(config.n_layer);
        let per = if wide { d / config.n_head } else { hd };
        (Some(1.0 / (per as f32).sqrt()), 1.0)
    } else if arch.query_scaled {
        (Some(1.0 / (hd as f32).sqrt()), 1.0)
    } else {
        let given = if granite {
            positive("attention.scale")?
        } else {
            None
        };
        (None, given.unwrap_or(1.0 / (hd as f32).sqrt()))
    };
    let embed_scale = if arch.gemma_scales || arch.gemma4 {
        Some((d as f32).sqrt())
    } else if granite {
        positive("embedding_scale")?
    } else {
        None
    };
    let softcap = |on: bool, key: &str, default: f32| -> Result<Option<f32>> {
        Ok(if on {
            Some(meta.f32_or(key, default)?).filter(|v| *v != 0.0)
        } else {
            None
        })
    };
    // Gemma 2 caps with llama.cpp's defaults; Gemma 3 only when its file says so.
    let gemma2 = arch.scalars.attn_softcap;
    let final_default = if gemma2 { 30.0 } else { 0.0 };
    let output_norm = if arch.lfm2 {
        "token_embd_norm"
    } else {
        "output_norm"
    };
    Ok(Transformer {
        output_norm: match post_ln {
            true => None,
            false => Some(norm(&ld, output_norm, d, &config, arch)?),
        },
        causal: meta.bool_or("attention.causal", !arch.bidirectional),
        classifier: classifier(&ld, &config, &meta, arch)?,
        alibi: arch.encoder.filter(|e| e.alibi).map(|_| 8.0),
        dense_out: dense_out(&ld, &config, &meta)?,
        encoder,
        pooling,
        output_bias: ld.opt_vector("output.bias", config.n_vocab)?,
        output,
        embedding,
        embed_scale,
        query_scale,
        kq_scale,
        attn_softcap: softcap(gemma2, "attn_logit_softcapping", 50.0)?,
        final_softcap: softcap(
            arch.scalars.final_softcap,
            "final_logit_softcapping",
            final_default,
        )?,
        qk_norm_after_rope: arch.qk_norm == QkNorm::HeadsAfterRope,
        residual_scale: if granite {
            positive("residual_scale")?
        } else {
            None
        },
        logit_scale,
        attn_temperature: ropes.temperature,
        long_from: ropes.long_from,
        activation,
        layers,
        per_layer_inputs: per_layer_inputs(&ld, &config, &meta, arch)?,
        altup: match arch.gemma3n {
            true => Some(AltUp::load(&ld, &config, &meta)?),
            false => None,
        },
        config,
    })
}

/// Gemma 4's per-layer inputs, when the file has them (`embedding_length_per_layer_input`
/// above 0).
fn per_layer_inputs(
    ld: &Loader<'_>,
    c: &ModelConfig,
    meta: &Meta<'_>,
    arch: &Arch,
) -> Result<Option<PerLayerInputs>> {
    let width = meta.count_or("embedding_length_per_layer_input", 0)?;
    if !arch.gemma4 || width == 0 {
        return Ok(None);
    }
    let all = width.checked_mul(c.n_layer).ok_or_else(|| {
        Error::InvalidModel(format!("{width} per-layer inputs for {} layers", c.n_layer))
    })?;
    Ok(Some(PerLayerInputs {
        token_embd: ld.embedding("per_layer_token_embd.weight", all, c.n_vocab)?,
        model_proj: ld.matrix("per_layer_model_proj.weight", c.n_embd, all)?,
        norm: norm(ld, "per_layer_proj_norm", width, c, arch)?,
        width,
    }))
}

/// Block `i`'s tensors, without its RoPE and window (the caller sets those).
fn layer(
    ld: &Loader<'_>,
    i: usize,
    (c, meta): (&ModelConfig, &Meta<'_>),
    arch: &Arch,
) -> Result<Layer> {
    let p = |s: &str| format!("blk.{i}.{s}");
    let d = c.n_embd;
    let ls = &c.layers[i];
    if ls.short_conv.is_some() {
        let norms = (
            norm(ld, &p("attn_norm"), d, c, arch)?,
            norm(ld, &p("ffn_norm"), d, c, arch)?,
        );
        let conv = ShortConv::load(ld, i, c)?;
        return Ok(Layer::short_conv(norms, conv, dense(ld, i, c, arch)?));
    }
    if let Some(shape) = ls.mamba2 {
        let norms = (
            norm(ld, &p("attn_norm"), d, c, arch)?,
            norm(ld, &p("ffn_norm"), d, c, arch)?,
        );
        let mamba = Mamba2::load(ld, i, c, shape)?;
        let ffn = match ld.has(&p("ffn_gate_inp.weight")) && arch.scalars.moe {
            true => Ffn::Moe(moe(ld, i, (c, meta), arch)?),
            false => Ffn::Dense(dense(ld, i, c, arch)?),
        };
        return Ok(Layer::mamba2(norms, mamba, ffn));
    }
    if let Some(shape) = ls.delta_net {
        let norms = (
            norm(ld, &p("attn_norm"), d, c, arch)?,
            norm(ld, &p("post_attention_norm"), d, c, arch)?,
        );
        let net = DeltaNet::load(ld, i, c, shape)?;
        return Ok(Layer::delta_net(norms, net, dense(ld, i, c, arch)?));
    }
    let (qw, kw, vw) = (
        ls.n_head * ls.head_dim,
        ls.n_head_kv * ls.head_dim,
        ls.n_head_kv * ls.head_dim_v,
    );
    // Query, key and value: three matrices, or one fused `attn_qkv` (Phi-3).
    // Gemma 4: a layer reading another's cache has no keys or values of its own, and one
    // without `attn_v` takes its values from the keys' projection.
    let own_kv = ls.has_kv(i);
    let (wq, wk, wv, fused_bias) = if ld.has(&p("attn_qkv.weight")) {
        let mut w = ld.matrix_split(&p("attn_qkv.weight"), d, &[qw, kw, vw])?;
        let (wv, wk, wq) = (w.remove(2), w.remove(1), w.remove(0));
        let bias = ld.opt_vector(&p("attn_qkv.bias"), qw + kw + vw)?;
        (wq, Some(wk), Some(wv), bias)
    } else {
        let wv = match !own_kv || (arch.gemma4 && !ld.has(&p("attn_v.weight"))) {
            true => None,
            false => Some(ld.matrix(&p("attn_v.weight"), d, vw)?),
        };
        let wk = match own_kv {
            true => Some(ld.matrix(&p("attn_k.weight"), d, kw)?),
            false => None,
        };
        // Qwen 3.5: each head's query is followed by its gate, which multiplies the head's
        // output (so values as wide as keys, as llama.cpp asserts).
        if arch.qwen35 && ls.head_dim_v != ls.head_dim {
            return Err(Error::InvalidModel(format!(
                "Qwen 3.5 attention with keys of {} and values of {}: they must be equal",
                ls.head_dim, ls.head_dim_v
            )));
        }
        let q_rows = if arch.qwen35 { 2 * qw } else { qw };
        (ld.matrix(&p("attn_q.weight"), d, q_rows)?, wk, wv, None)
    };
    let (wk, wv) = match own_kv {
        true => (wk, wv),
        false => (None, None),
    };
    if own_kv && wv.is_none() && kw != vw {
        return Err(Error::InvalidModel(format!(
            "layer {i} has no attn_v, and its keys ({kw} values) cannot be its values ({vw})"
        )));
    }
    let bias = |s: &str, len| match arch.biases {
        Biases::Required => ld.vector(&p(s), len).map(Some),
        Biases::Optional => ld.opt_vector(&p(s), len),
    };
    let (bq, bk, bv) = match fused_bias {
        Some(b) => (
            Some(b[..qw].to_vec()),
            Some(b[qw..qw + kw].to_vec()),
            Some(b[qw + kw..].to_vec()),
        ),
        None => (
            bias("attn_q.bias", qw)?,
            bias("attn_k.bias", kw)?,
            bias("attn_v.bias", vw)?,
        ),
    };
    let hd = ls.head_dim;
    let qk_norm = |s: &str, n_heads: usize| -> Result<Option<Norm>> {
        let rms = |len| ld.vector(&p(s), len).map(|w| Some(Norm::rms(w, c.rms_eps)));
        match arch.qk_norm {
            QkNorm::None => Ok(None),
            QkNorm::Heads | QkNorm::HeadsAfterRope => rms(hd),
            QkNorm::Rows => rms(n_heads * hd),
            QkNorm::OptionalHeadWeights if !ld.has(&p(s)) => Ok(None),
            QkNorm::OptionalHeadWeights => Ok(Some(Norm {
                weight: ld.values(&p(s), &[hd, n_heads])?,
                bias: None,
                group: hd,
                eps: c.rms_eps,
                layer: arch.layer_norm,
            })),
            QkNorm::OptionalRowsLayer if !ld.has(&p(s)) => Ok(None),
            QkNorm::OptionalRowsLayer => {
                let name = p(s.trim_end_matches(".weight"));
                norm(ld, &name, n_heads * hd, c, arch).map(Some)
            }
        }
    };
    let block_norm = |on: bool, s: &str| {
        if on {
            norm(ld, &p(s), d, c, arch).map(Some)
        } else {
            Ok(None)
        }
    };
    // StableLM 2 without an FFN norm is a parallel block.
    let parallel = arch.name == "stablelm" && !ld.has(&p("ffn_norm.weight"));
    let post_ln = arch.encoder.is_some_and(|e| e.post_ln);
    // ModernBERT's first block has no attention norm (its input is the normalised embedding).
    let pre_ln_first = arch.encoder.is_some() && !post_ln && i == 0;
    let has_attn_norm = !pre_ln_first || ld.has(&p("attn_norm.weight"));
    Ok(Layer {
        attn_norm: block_norm(arch.pre_norms && has_attn_norm, "attn_norm")?,
        wq,
        wk,
        wv,
        wo: ld.matrix(&p("attn_output.weight"), ls.n_head * ls.head_dim_v, d)?,
        bq,
        bk,
        bv,
        // llama.cpp loads ERNIE 4.5's output bias but its graph does not add it.
        bo: if arch.name == "ernie4_5" {
            None
        } else {
            ld.opt_vector(&p("attn_output.bias"), d)?
        },
        q_norm: qk_norm("attn_q_norm.weight", ls.n_head)?,
        k_norm: match own_kv {
            true => qk_norm("attn_k_norm.weight", ls.n_head_kv)?,
            false => None,
        },
        post_attn_norm: match post_ln {
            true => Some(norm(ld, &p("attn_output_norm"), d, c, arch)?),
            false => block_norm(arch.post_norms, "post_attention_norm")?,
        },
        // Qwen 3.5 calls its feed-forward's norm `post_attention_norm`.
        ffn_norm: match arch.qwen35 {
            true => Some(norm(ld, &p("post_attention_norm"), d, c, arch)?),
            false => block_norm(arch.pre_norms && !parallel, "ffn_norm")?,
        },
        ffn: if arch.gemma4 && ld.has(&p("ffn_gate_inp.weight")) {
            Ffn::DenseAndExperts(Box::new(DenseAndExperts {
                dense: dense(ld, i, c, arch)?,
                dense_norm: norm(ld, &p("post_ffw_norm_1"), d, c, arch)?,
                moe: gemma4_experts(ld, i, (c, meta))?,
                moe_in_norm: norm(ld, &p("pre_ffw_norm_2"), d, c, arch)?,
                moe_out_norm: norm(ld, &p("post_ffw_norm_2"), d, c, arch)?,
                router_norm: Norm::rms(vec![1.0; d], c.rms_eps),
                router_scale: ld.vector(&p("ffn_gate_inp.scale"), d)?,
            }))
        } else if ld.has(&p("ffn_gate_inp.weight")) && arch.scalars.moe {
            Ffn::Moe(moe(ld, i, (c, meta), arch)?)
        } else {
            Ffn::Dense(dense(ld, i, c, arch)?)
        },
        post_ffn_norm: match post_ln {
            true => Some(norm(ld, &p("layer_output_norm"), d, c, arch)?),
            false => block_norm(arch.post_norms, "post_ffw_norm")?,
        },
        rope: None,
        rope_long: None,
        window: None,
        norm_sums: post_ln,
        attn_norm_2: block_norm(
            post_ln && !arch.pre_norms && ld.has(&p("attn_norm_2.weight")),
            "attn_norm_2",
        )?,
        v_norm: (arch.gemma4 && own_kv).then(|| Norm::rms(vec![1.0; ls.head_dim_v], c.rms_eps)),
        per_layer: match arch.gemma4 && (arch.gemma3n || ld.has(&p("inp_gate.weight"))) {
            true => {
                let width = meta.count_or("embedding_length_per_layer_input", 0)?;
                Some(PerLayerBlock {
                    gate: ld.matrix(&p("inp_gate.weight"), d, width)?,
                    proj: ld.matrix(&p("proj.weight"), width, d)?,
                    post_norm: norm(ld, &p("post_norm"), d, c, arch)?,
                })
            }
            false => None,
        },
        out_scale: match arch.gemma4 {
            true => ld
                .opt_vector(&p("layer_output_scale.weight"), 1)?
                .map(|v| v[0]),
            false => None,
        },
        conv: None,
        altup: match arch.gemma3n {
            true => Some(AltUpBlock::load(ld, i, c)?),
            false => None,
        },
        mixer: None,
        attn_gate: arch.qwen35,
    })
}

/// The dense projections after pooling, if the file has them (EmbeddingGemma converted with
/// its sentence-transformers modules: `dense_2` from `n_embd` to `dense_2_feat_out` values with
/// an optional bias, then `dense_3` from `dense_3_feat_in` back to `n_embd`).
fn dense_out(ld: &Loader<'_>, c: &ModelConfig, meta: &Meta<'_>) -> Result<Option<DenseOut>> {
    if !ld.has("dense_2.weight") && !ld.has("dense_3.weight") {
        return Ok(None);
    }
    let d = c.n_embd;
    let mid = meta.dim_or("dense_2_feat_out", d)?;
    let first = match ld.has("dense_2.weight") {
        true => Some((
            ld.matrix("dense_2.weight", d, mid)?,
            ld.opt_vector("dense_2.bias", mid)?,
        )),
        false => None,
    };
    let width = if first.is_some() { mid } else { d };
    let second = match ld.has("dense_3.weight") {
        true => Some(ld.matrix("dense_3.weight", meta.dim_or("dense_3_feat_in", width)?, d)?),
        false => None,
    };
    if let (Some(_), Some(w)) = (&first, &second) {
        if w.shape().cols != mid {
            return Err(Error::InvalidModel(format!(
                "dense_3 takes {} values but dense_2 gives {mid}",
                w.shape().cols
            )));
        }
    }
    Ok(Some(DenseOut { first, second }))
}

/// A reranker's classification head, if the file has one: `cls` (a dense layer of `n_embd`
/// outputs, or of the scores themselves without `cls.output`, jina-reranker) with an optional
/// bias and `cls.norm`, and `cls.output` with an optional bias
/// (`{arch}.classifier.output_labels` scores, by default 1).
fn classifier(
    ld: &Loader<'_>,
    c: &ModelConfig,
    meta: &Meta<'_>,
    arch: &Arch,
) -> Result<Option<Classifier>> {
    let (has_dense, has_out) = (ld.has("cls.weight"), ld.has("cls.output.weight"));
    if !has_dense && !has_out {
        return Ok(None);
    }
    let d = c.n_embd;
    let labels = meta.array_len("classifier.output_labels").unwrap_or(1);
    let n_out = labels.max(1);
    let dense_rows = match has_out {
        true => d,
        false => ld.rows("cls.weight").unwrap_or(n_out),
    };
    let dense = match has_dense {
        true => Some((
            ld.matrix("cls.weight", d, dense_rows)?,
            ld.opt_vector("cls.bias", dense_rows)?,
        )),
        false => None,
    };
    let out = match has_out {
        true => Some((
            ld.matrix("cls.output.weight", d, n_out)?,
            ld.opt_vector("cls.output.bias", n_out)?,
        )),
        false => None,
    };
    let norm = match ld.has("cls.norm.weight") {
        true => Some(norm(ld, "cls.norm", dense_rows, c, arch)?),
        false => None,
    };
    // llama.cpp: ModernBERT's head reads the mean unless the file says otherwise.
    let default_pooling = if arch.name == "modern-bert" { 1 } else { 0 };
    Ok(Some(Classifier {
        dense,
        gelu: arch.name == "modern-bert",
        norm,
        out,
        softmax: arch.name == "qwen3",
        mean: meta.count_or("classifier.pooling_type", default_pooling)? == 1,
    }))
}

/// Block `i`'s dense feed-forward.
fn dense(ld: &Loader<'_>, i: usize, c: &ModelConfig, arch: &Arch) -> Result<Dense> {
    let p = |s: &str| format!("blk.{i}.{s}");
    let (d, n_ff) = (c.n_embd, c.layers[i].n_ff);
    // Gate and up: two matrices, or one `ffn_up` of twice the rows, gate first (Phi-3); or up
    // alone (not gated).
    // An `ffn_up` of `n_ff` rows without a gate is not gated (jina-bert-v2 allows it).
    let fused = arch.gated_ffn
        && !ld.has(&p("ffn_gate.weight"))
        && ld.rows(&p("ffn_up.weight")) != Some(n_ff);
    let (gate, up) = if fused {
        let mut w = ld.matrix_split(&p("ffn_up.weight"), d, &[n_ff, n_ff])?;
        let up = w.remove(1);
        (Some(w.remove(0)), up)
    } else if arch.gated_ffn && ld.has(&p("ffn_gate.weight")) {
        (
            Some(ld.matrix(&p("ffn_gate.weight"), d, n_ff)?),
            ld.matrix(&p("ffn_up.weight"), d, n_ff)?,
        )
    } else {
        (None, ld.matrix(&p("ffn_up.weight"), d, n_ff)?)
    };
    // A fused `ffn_up`'s bias covers both halves (gate first).
    let (b_gate, b_up) = match fused {
        true => match ld.opt_vector(&p("ffn_up.bias"), 2 * n_ff)? {
            Some(mut b) => {
                let up = b.split_off(n_ff);
                (Some(b), Some(up))
            }
            None => (None, None),
        },
        false => (
            ld.opt_vector(&p("ffn_gate.bias"), n_ff)?,
            ld.opt_vector(&p("ffn_up.bias"), n_ff)?,
        ),
    };
    Ok(Dense {
        gate,
        up,
        down: ld.matrix(&p("ffn_down.weight"), n_ff, d)?,
        b_gate,
        b_up,
        b_down: ld.opt_vector(&p("ffn_down.bias"), d)?,
        sparse: arch.gemma3n && i < gemma3n::SPARSE_LAYERS,
    })
}

/// Block `i`'s mixture of experts (`{arch}.expert_count` experts, `expert_used_count` per
/// token, each of `expert_feed_forward_length`, by default Granite's `feed_forward_length`
/// and Qwen's that divided by the experts used; Granite's shared expert of
/// `expert_shared_feed_forward_length`).
fn moe(
    ld: &Loader<'_>,
    i: usize,
    (c, meta): (&ModelConfig, &Meta<'_>),
    arch: &Arch,
) -> Result<Moe> {
    let p = |s: &str| format!("blk.{i}.{s}");
    let d = c.n_embd;
    let (n_expert, n_used) = expert_counts(meta)?;
    let default_ff = if arch.scalars.granite {
        c.n_ff
    } else {
        c.n_ff / n_used
    };
    let n_ff = meta.dim_or("expert_feed_forward_length", default_ff)?;
    let mut gate = ld.experts(&p("ffn_gate_exps.weight"), d, n_ff, n_expert)?;
    let mut up = ld.experts(&p("ffn_up_exps.weight"), d, n_ff, n_expert)?;
    let mut down = ld.experts(&p("ffn_down_exps.weight"), n_ff, d, n_expert)?;
    let experts = (0..n_expert)
        .map(|_| Expert {
            gate: gate.remove(0),
            up: up.remove(0),
            down: down.remove(0),
        })
        .collect();
    let shared = match meta.count_or("expert_shared_feed_forward_length", 0)? {
        0 => None,
        n => Some((
            Expert {
                gate: ld.matrix(&p("ffn_gate_shexp.weight"), d, n)?,
                up: ld.matrix(&p("ffn_up_shexp.weight"), d, n)?,
                down: ld.matrix(&p("ffn_down_shexp.weight"), n, d)?,
            },
            n,
        )),
    };
    let scale = meta.f32_or("expert_weights_scale", 0.0)?;
    Ok(Moe {
        router: ld.matrix(&p("ffn_gate_inp.weight"), d, n_expert)?,
        experts,
        n_used,
        n_ff,
        norm_weights: true,
        scale: (scale != 0.0 && scale != 1.0).then_some(scale),
        shared,
        activation: FfnActivation::Silu,
        down_scale: None,
    })
}

/// Block `i`'s experts in Gemma 4 26B A4B: `expert_count` GeGLU experts of
/// `expert_feed_forward_length` (one value, or one per layer), `expert_used_count` per token,
/// gate and up as two tensors or one `ffn_gate_up_exps` (gate rows first), and each expert's
/// output scale `ffn_down_exps.scale`.
fn gemma4_experts(ld: &Loader<'_>, i: usize, (c, meta): (&ModelConfig, &Meta<'_>)) -> Result<Moe> {
    let p = |s: &str| format!("blk.{i}.{s}");
    let d = c.n_embd;
    let (n_expert, n_used) = expert_counts(meta)?;
    let n_ff = meta.dims_per_layer("expert_feed_forward_length", c.n_layer, None)?[i];
    let (gate, up) = if ld.has(&p("ffn_gate_up_exps.weight")) {
        let name = p("ffn_gate_up_exps.weight");
        let both = ld.experts_split(&name, d, &[n_ff, n_ff], n_expert)?;
        let (mut gate, mut up) = (Vec::new(), Vec::new());
        for mut w in both {
            up.push(w.remove(1));
            gate.push(w.remove(0));
        }
        (gate, up)
    } else {
        (
            ld.experts(&p("ffn_gate_exps.weight"), d, n_ff, n_expert)?,
            ld.experts(&p("ffn_up_exps.weight"), d, n_ff, n_expert)?,
        )
    };
    let down = ld.experts(&p("ffn_down_exps.weight"), n_ff, d, n_expert)?;
    let experts = gate
        .into_iter()
        .zip(up)
        .zip(down)
        .map(|((gate, up), down)| Expert { gate, up, down })
        .collect();
    Ok(Moe {
        router: ld.matrix(&p("ffn_gate_inp.weight"), d, n_expert)?,
        experts,
        n_used,
        n_ff,
        norm_weights: true,
        scale: None,
        shared: None,
        activation: FfnActivation::GeluTanh,
        down_scale: ld.opt_vector(&p("ffn_down_exps.scale"), n_expert)?,
    })
}

/// `{arch}.expert_count` and `expert_used_count` (at most the count).
fn expert_counts(meta: &Meta<'_>) -> Result<(usize, usize)> {
    let n_expert = meta.dim("expert_count")?;
    let n_used = meta.dim("expert_used_count")?;
    if n_used > n_expert {
        return Err(Error::InvalidModel(format!(
            "{n_used} experts used per token of {n_expert}"
        )));
    }
    Ok((n_expert, n_used))
}

/// The norm `{name}.weight` over rows of `width` (with `{name}.bias` for LayerNorm models).
fn norm(ld: &Loader<'_>, name: &str, width: usize, c: &ModelConfig, arch: &Arch) -> Result<Norm> {
    let weight = ld.vector(&format!("{name}.weight"), width)?;
    if !arch.layer_norm {
        return Ok(Norm::rms(weight, c.rms_eps));
    }
    Ok(Norm {
        bias: ld.opt_vector(&format!("{name}.bias"), width)?,
        layer: true,
        ..Norm::rms(weight, c.rms_eps)
    })
}

/// Which layers are local (sliding-window) and their window, if the model has any.
fn local_layers(
    c: &ModelConfig,
    meta: &Meta<'_>,
    arch: &Arch,
) -> Result<Option<(Vec<bool>, usize)>> {
    let Some(s) = arch.sliding else {
        return Ok(None);
    };
    let window = match s.when {
        SlidingWhen::Always { window } => meta.dim_or("attention.sliding_window", window)?,
        SlidingWhen::IfWindowKey => match meta.count_or("attention.sliding_window", 0)? {
            0 => return Ok(None),
            w => w,
        },
        SlidingWhen::IfLayers { n_layer, window } if c.n_layer == n_layer => {
            meta.dim_or("attention.sliding_window", window)?
        }
        SlidingWhen::IfLayers { .. } => return Ok(None),
    };
    let local = match meta.bools("attention.sliding_window_pattern") {
        Some(flags) => {
            if flags.len() < c.n_layer {
                return Err(Error::InvalidModel(format!(
                    "'{}.attention.sliding_window_pattern' has {} entries for {} layers",
                    arch.name,
                    flags.len(),
                    c.n_layer
                )));
            }
            flags[..c.n_layer].to_vec()
        }
        None => {
            // llama.cpp: a pattern of 0 makes every layer local.
            let pattern = meta.count_or("attention.sliding_window_pattern", s.pattern)?;
            (0..c.n_layer)
                .map(|i| match (pattern, s.dense_first) {
                    (0, _) => true,
                    (_, true) => i % pattern != 0,
                    (_, false) => i % pattern < pattern - 1,
                })
                .collect()
        }
    };
    Ok(Some((local, window)))
}
