//! The llama family: Llama 2/3, Mistral, SmolLM, TinyLlama (`llama`), and the Qwen variants that
//! share its block (`qwen2`: QKV biases; `qwen3`: QK-norm), all with SwiGLU feed-forward.

use std::sync::Arc;

use super::ops::{Rope, RopeStyle};
use super::transformer::{FfnActivation, Layer, Transformer};
use super::weights::Loader;
use super::ModelConfig;
use crate::backend::Registry;
use crate::gguf::GgufFile;
use crate::Result;

/// Which member of the family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Variant {
    Llama,
    Qwen2,
    Qwen3,
}

/// Build a llama-family model from `gguf`.
pub(crate) fn load(
    gguf: &Arc<GgufFile>,
    registry: &Registry,
    variant: Variant,
) -> Result<Transformer> {
    let arch = match variant {
        Variant::Llama => "llama",
        Variant::Qwen2 => "qwen2",
        Variant::Qwen3 => "qwen3",
    };
    let config = ModelConfig::read(gguf, arch)?;
    let ld = Loader::new(gguf, registry);
    let (d, hd, hdv) = (config.n_embd, config.head_dim, config.head_dim_v);
    let (qw, kw, vw) = (
        config.n_head * hd,
        config.n_head_kv * hd,
        config.n_head_kv * hdv,
    );
    let style = match variant {
        Variant::Llama => RopeStyle::Normal,
        Variant::Qwen2 | Variant::Qwen3 => RopeStyle::Neox,
    };
    let freq_factors = ld.opt_vector("rope_freqs.weight", config.rope_dims / 2)?;
    let rope = Rope {
        style,
        n_dims: config.rope_dims,
        base: config.rope_base,
        freq_scale: config.rope_freq_scale,
        freq_factors,
    };
    let embedding = ld.embedding("token_embd.weight", d, config.n_vocab)?;
    let mut layers = Vec::with_capacity(config.n_layer);
    for i in 0..config.n_layer {
        let p = |s: &str| format!("blk.{i}.{s}");
        let bias = |s: &str, len| {
            if variant == Variant::Qwen2 {
                ld.vector(&p(s), len).map(Some)
            } else {
                ld.opt_vector(&p(s), len)
            }
        };
        let qk_norm = |s: &str| {
            if variant == Variant::Qwen3 {
                ld.vector(&p(s), hd).map(Some)
            } else {
                Ok(None)
            }
        };
        layers.push(Layer {
            bq: bias("attn_q.bias", qw)?,
            bk: bias("attn_k.bias", kw)?,
            bv: bias("attn_v.bias", vw)?,
            q_norm: qk_norm("attn_q_norm.weight")?,
            k_norm: qk_norm("attn_k_norm.weight")?,
            ..ld.common_layer(i, &config, rope.clone())?
        });
    }
    let output = ld.output_head(&config, &embedding)?;
    Ok(Transformer {
        output_norm: ld.vector("output_norm.weight", d)?,
        output,
        embedding,
        embed_scale: None,
        query_scale: None,
        activation: FfnActivation::Silu,
        layers,
        config,
    })
}
