//! The rotary position embeddings of a model's layers, read from its metadata: base and
//! scaling (linear, YaRN, LongRoPE, NTK alpha), frequency factors, the sliding-window layers'
//! own rotation, and what M-RoPE means for text.

use super::archs::Arch;
use super::config::Meta;
use super::ops::{Rope, Yarn};
use super::weights::Loader;
use super::ModelConfig;
use crate::{Error, Result};

/// The rotations a model's layers use.
pub(crate) struct Ropes {
    /// Whether the model uses RoPE at all (Granite: `rope.scaling.finetuned` false turns it off).
    pub(crate) enabled: bool,
    pub(crate) global: Rope,
    /// Local (sliding-window) layers' rotation.
    pub(crate) local: Rope,
    /// LongRoPE's rotation for contexts longer than `long_from` (Phi-3).
    pub(crate) long: Option<Rope>,
    pub(crate) long_from: usize,
    /// Llama 4's attention temperature (Mistral 3): (scale, floor).
    pub(crate) temperature: Option<(f32, f32)>,
}

impl Ropes {
    /// Read the rotations of a model of `arch` with config `c` from its metadata and
    /// tensors (frequency factors).
    pub(crate) fn read(
        c: &ModelConfig,
        meta: &Meta<'_>,
        ld: &Loader<'_>,
        arch: &Arch,
    ) -> Result<Self> {
        let n_dims = c.rope_dims;
        if arch.qwen35 {
            text_mrope(meta, n_dims)?;
        }
        let mut base = c.rope_base;
        if arch.scalars.rope_alpha {
            let alpha = meta.f32_or("rope.scaling.alpha", 0.0)?;
            if alpha > 0.0 {
                let dim = c.head_dim as f32;
                base *= alpha.powf(dim / (dim - 2.0));
            }
        }
        let n_ctx_orig = meta.dim_or("rope.scaling.original_context_length", c.n_ctx_train)?;
        let mut global = Rope::plain(arch.rope, n_dims, base, c.rope_freq_scale);
        let mut long = None;
        global.freq_factors = ld.opt_vector("rope_freqs.weight", n_dims / 2)?;
        if global.freq_factors.is_none() {
            global.freq_factors = ld.opt_vector("rope_factors_short.weight", n_dims / 2)?;
            long = ld.opt_vector("rope_factors_long.weight", n_dims / 2)?;
        }
        let local_base = arch.sliding.and_then(|s| s.local_base).unwrap_or(base);
        let local_scaled = arch.sliding.is_some_and(|s| s.local_scaled);
        let mut local = Rope {
            base: meta.f32_or("rope.freq_base_swa", local_base)?,
            freq_scale: if local_scaled { c.rope_freq_scale } else { 1.0 },
            ..global.clone()
        };
        if arch.gemma4 {
            // Local layers rotate their own (smaller) heads, without the global factors.
            local.n_dims = meta.dim_or("rope.dimension_count_swa", n_dims)?;
            local.freq_factors = None;
        }
        let attn_factor = meta.f32_or("rope.scaling.attn_factor", 1.0)?;
        global.mscale = attn_factor;
        local.mscale = attn_factor;
        if meta.str("rope.scaling.type") == Some("yarn") {
            let m3 = arch.scalars.mistral3;
            let key = |k: &str, default| {
                if m3 {
                    meta.f32_or(k, default)
                } else {
                    Ok(default)
                }
            };
            let fast = key("rope.scaling.yarn_beta_fast", 32.0)?;
            let slow = key("rope.scaling.yarn_beta_slow", 1.0)?;
            let log_mul = key("rope.scaling.yarn_log_multiplier", 0.0)?;
            // llama.cpp's attention factor (its context parameters), then the one ggml's
            // rope_yarn applies itself for each rotation's frequency scale.
            let factor = 1.0 / c.rope_freq_scale;
            let get_mscale = |m: f32| {
                if factor <= 1.0 {
                    1.0
                } else {
                    0.1 * m * factor.ln() + 1.0
                }
            };
            let context = if log_mul != 0.0 {
                get_mscale(1.0) / get_mscale(log_mul) / (1.0 + 0.1 * factor.ln())
            } else {
                1.0
            };
            for rope in [&mut global, &mut local] {
                rope.mscale *= context * (1.0 + 0.1 * (1.0 / rope.freq_scale).ln());
                rope.yarn = Some(Yarn::new(n_dims, n_ctx_orig, rope.base, fast, slow));
            }
        }
        let temperature = if arch.scalars.mistral3 {
            let scale = meta.f32_or("attention.temperature_scale", 0.0)?;
            (scale != 0.0).then_some((scale, n_ctx_orig as f32))
        } else {
            None
        };
        let enabled = !arch.scalars.granite || meta.bool_or("rope.scaling.finetuned", true);
        Ok(Ropes {
            enabled,
            long: long.map(|f| Rope {
                freq_factors: Some(f),
                ..global.clone()
            }),
            long_from: n_ctx_orig,
            global,
            local,
            temperature,
        })
    }
}

/// Check that Qwen 3.5's interleaved M-RoPE (llama.cpp's `GGML_ROPE_TYPE_IMROPE`, sections
/// `rope.dimension_sections`) is plain NeoX RoPE over `n_rot` dimensions for text: a text
/// token's temporal, height and width positions are all its position, and only pairs in none
/// of those sections would take the fourth (0 for text), which no released model has.
fn text_mrope(meta: &Meta<'_>, n_rot: usize) -> Result<()> {
    let s = meta.counts("rope.dimension_sections").unwrap_or_default();
    let sum: u64 = s.iter().sum();
    let refuse = |why: &str| {
        Err(Error::InvalidModel(format!(
            "Qwen 3.5 RoPE sections {s:?} for {n_rot} rotated dimensions: {why}"
        )))
    };
    if s.len() < 3 || sum == 0 {
        return refuse("expected at least three sections");
    }
    for pair in 0..n_rot as u64 / 2 {
        let sector = pair % sum;
        let (kind, limit) = ((sector % 3) as usize, 3 * s[(sector % 3) as usize]);
        if !(kind < 3 && sector < limit) {
            return refuse("a rotated pair outside the text sections is not supported");
        }
    }
    Ok(())
}
