//! Gemma 3 (`gemma3`): QK-norm, sliding-window attention on five of every six layers with a
//! separate RoPE base for local layers, GELU-tanh gated feed-forward, post-attention and
//! post-feed-forward norms, embeddings scaled by √n_embd, and a tied output head.

use std::sync::Arc;

use super::config::Meta;
use super::ops::{Rope, RopeStyle};
use super::transformer::{FfnActivation, Layer, Transformer};
use super::weights::Loader;
use super::ModelConfig;
use crate::backend::Registry;
use crate::gguf::GgufFile;
use crate::Result;

/// Every this-many-th layer uses global attention; the others use the sliding window.
const SLIDING_WINDOW_PATTERN: usize = 6;
/// RoPE base of the local (sliding-window) layers.
const LOCAL_ROPE_BASE: f32 = 10_000.0;

/// Build a Gemma 3 model from `gguf`.
pub(crate) fn load(gguf: &Arc<GgufFile>, registry: &Registry) -> Result<Transformer> {
    let config = ModelConfig::read(gguf, "gemma3")?;
    let meta = Meta::new(gguf, "gemma3");
    let window = meta.dim_or("attention.sliding_window", 4096)?;
    let ld = Loader::new(gguf, registry);
    let (d, hd) = (config.n_embd, config.head_dim);
    let embedding = ld.embedding("token_embd.weight", d, config.n_vocab)?;
    let mut layers = Vec::with_capacity(config.n_layer);
    for i in 0..config.n_layer {
        let p = |s: &str| format!("blk.{i}.{s}");
        let is_local = (i + 1) % SLIDING_WINDOW_PATTERN != 0;
        let rope = if is_local {
            Rope {
                style: RopeStyle::Neox,
                n_dims: config.rope_dims,
                base: LOCAL_ROPE_BASE,
                freq_scale: 1.0,
                freq_factors: None,
            }
        } else {
            Rope {
                style: RopeStyle::Neox,
                n_dims: config.rope_dims,
                base: config.rope_base,
                freq_scale: config.rope_freq_scale,
                freq_factors: None,
            }
        };
        layers.push(Layer {
            q_norm: Some(ld.vector(&p("attn_q_norm.weight"), hd)?),
            k_norm: Some(ld.vector(&p("attn_k_norm.weight"), hd)?),
            post_attn_norm: Some(ld.vector(&p("post_attention_norm.weight"), d)?),
            post_ffn_norm: Some(ld.vector(&p("post_ffw_norm.weight"), d)?),
            window: is_local.then_some(window),
            ..ld.common_layer(i, &config, rope)?
        });
    }
    let output = ld.output_head(&config, &embedding)?;
    Ok(Transformer {
        output_norm: ld.vector("output_norm.weight", d)?,
        output,
        embedding,
        embed_scale: Some((d as f32).sqrt()),
        query_scale: Some(1.0 / (hd as f32).sqrt()),
        activation: FfnActivation::GeluTanh,
        layers,
        config,
    })
}
