//! Hyper-parameters read from GGUF metadata.

use super::kv_cache::KvTypes;
use crate::gguf::GgufFile;
use crate::{Error, Result};

/// Largest dimension accepted from metadata, so that a hostile file cannot make us allocate
/// absurd buffers before tensor shapes are checked.
const MAX_DIM: u64 = 1 << 20;

/// The shape of a transformer, from its GGUF metadata.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    /// `general.architecture`.
    pub architecture: String,
    /// `general.name`, if present.
    pub name: Option<String>,
    /// Vocabulary size (rows of the token embedding).
    pub n_vocab: usize,
    /// Hidden size.
    pub n_embd: usize,
    /// Number of transformer blocks.
    pub n_layer: usize,
    /// Attention (query) heads.
    pub n_head: usize,
    /// Key/value heads (GQA when fewer than `n_head`).
    pub n_head_kv: usize,
    /// Dimension of one key (and query) head.
    pub head_dim: usize,
    /// Dimension of one value head.
    pub head_dim_v: usize,
    /// Feed-forward hidden size.
    pub n_ff: usize,
    /// Context length the model was trained with.
    pub n_ctx_train: usize,
    /// RMS-norm epsilon.
    pub rms_eps: f32,
    /// RoPE base frequency (global layers).
    pub rope_base: f32,
    /// RoPE linear frequency scale (1 / scaling factor).
    pub rope_freq_scale: f32,
    /// Rotated dimensions per head.
    pub rope_dims: usize,
}

/// Reads `{arch}.*` keys with typed errors.
pub(crate) struct Meta<'a> {
    gguf: &'a GgufFile,
    arch: &'a str,
}

impl<'a> Meta<'a> {
    pub(crate) fn new(gguf: &'a GgufFile, arch: &'a str) -> Self {
        Meta { gguf, arch }
    }

    fn key(&self, suffix: &str) -> String {
        format!("{}.{suffix}", self.arch)
    }

    /// A required dimension `{arch}.{suffix}`, 1..=MAX_DIM.
    pub(crate) fn dim(&self, suffix: &str) -> Result<usize> {
        let key = self.key(suffix);
        let v = self.gguf.get_u64(&key).ok_or_else(|| {
            Error::InvalidModel(format!("missing or non-integer metadata '{key}'"))
        })?;
        if v == 0 || v > MAX_DIM {
            return Err(Error::InvalidModel(format!(
                "metadata '{key}' = {v} is out of range"
            )));
        }
        Ok(v as usize)
    }

    /// An optional dimension, `default` when absent.
    pub(crate) fn dim_or(&self, suffix: &str, default: usize) -> Result<usize> {
        if self.gguf.get(&self.key(suffix)).is_some() {
            self.dim(suffix)
        } else {
            Ok(default)
        }
    }

    /// An optional count, `default` when absent: like [`Meta::dim_or`] but 0 is allowed.
    pub(crate) fn count_or(&self, suffix: &str, default: usize) -> Result<usize> {
        match self.gguf.get(&self.key(suffix)) {
            None => Ok(default),
            Some(_) if self.gguf.get_u64(&self.key(suffix)) == Some(0) => Ok(0),
            Some(_) => self.dim(suffix),
        }
    }

    /// An optional bool, `default` when absent or not a bool.
    pub(crate) fn bool_or(&self, suffix: &str, default: bool) -> bool {
        self.gguf.get_bool(&self.key(suffix)).unwrap_or(default)
    }

    /// An array of bools (e.g. one per layer), if the key holds one.
    pub(crate) fn bools(&self, suffix: &str) -> Option<Vec<bool>> {
        let array = self.gguf.get_array(&self.key(suffix))?;
        (0..array.len())
            .map(|i| array.get(i).and_then(|v| v.as_bool()))
            .collect()
    }

    /// An optional float, `default` when absent; must be finite.
    pub(crate) fn f32_or(&self, suffix: &str, default: f32) -> Result<f32> {
        let key = self.key(suffix);
        match self.gguf.get(&key) {
            None => Ok(default),
            Some(_) => match self.gguf.get_f32(&key) {
                Some(v) if v.is_finite() => Ok(v),
                _ => Err(Error::InvalidModel(format!(
                    "metadata '{key}' is not a finite number"
                ))),
            },
        }
    }

    /// An optional string.
    pub(crate) fn str(&self, suffix: &str) -> Option<&'a str> {
        let key = self.key(suffix);
        self.gguf.get_str(&key)
    }

    /// The length of an array, if the key holds one.
    pub(crate) fn array_len(&self, suffix: &str) -> Option<usize> {
        self.gguf.get_array(&self.key(suffix)).map(|a| a.len())
    }
}

impl ModelConfig {
    /// Largest context a context gets by default (when its size is left at 0).
    pub const MAX_DEFAULT_CONTEXT: usize = 4096;

    /// The hyper-parameters of the model in `gguf` (its `general.architecture`), without
    /// loading any weight.
    pub fn from_gguf(gguf: &GgufFile) -> Result<Self> {
        let arch = gguf
            .get_str("general.architecture")
            .ok_or_else(|| Error::InvalidModel("missing metadata 'general.architecture'".into()))?;
        Self::read(gguf, arch)
    }

    /// The context size used when none is asked for: the training context, at most
    /// [`Self::MAX_DEFAULT_CONTEXT`].
    pub fn default_context_size(&self) -> usize {
        self.n_ctx_train.min(Self::MAX_DEFAULT_CONTEXT)
    }

    /// The context size a request for `n_ctx` positions gives: `n_ctx`, or the default
    /// ([`ModelConfig::default_context_size`]) when it is 0.
    pub fn context_size(&self, n_ctx: u32) -> usize {
        match n_ctx {
            0 => self.default_context_size(),
            n => n as usize,
        }
    }

    /// Bytes a KV cache of `n_ctx` positions stored as `types` takes (saturating; types
    /// whose blocks do not fit the heads count as f16, [`KvTypes::check`] refuses them).
    pub fn kv_cache_bytes(&self, n_ctx: usize, types: KvTypes) -> u64 {
        let (kw, vw) = (
            self.n_head_kv * self.head_dim,
            self.n_head_kv * self.head_dim_v,
        );
        let per_position = types
            .bytes_per_position(self.n_layer, kw, vw)
            .or_else(|| KvTypes::default().bytes_per_position(self.n_layer, kw, vw))
            .unwrap_or(u64::MAX);
        per_position.saturating_mul(n_ctx as u64)
    }

    /// Read the common hyper-parameters for architecture `arch`.
    pub(crate) fn read(gguf: &GgufFile, arch: &str) -> Result<Self> {
        let m = Meta::new(gguf, arch);
        let n_embd = m.dim("embedding_length")?;
        let n_head = m.dim("attention.head_count")?;
        let n_head_kv = m.dim_or("attention.head_count_kv", n_head)?;
        if n_head % n_head_kv != 0 {
            return Err(Error::InvalidModel(format!(
                "{n_head} attention heads is not a multiple of {n_head_kv} KV heads"
            )));
        }
        let head_dim = m.dim_or("attention.key_length", n_embd / n_head)?;
        let head_dim_v = m.dim_or("attention.value_length", head_dim)?;
        let rope_dims = m.dim_or("rope.dimension_count", head_dim)?;
        if rope_dims > head_dim || rope_dims % 2 != 0 {
            return Err(Error::InvalidModel(format!(
                "RoPE dimension count {rope_dims} does not fit head size {head_dim}"
            )));
        }
        let scaling_type = m.str("rope.scaling.type").unwrap_or("none");
        let factor = m.f32_or("rope.scaling.factor", 0.0)?;
        // As llama.cpp: the factor scales positions for every type but "none" (YaRN and
        // LongRoPE add their own parts, see `build.rs`).
        let rope_freq_scale = match scaling_type {
            "none" => 1.0,
            "linear" | "yarn" | "longrope" if factor > 0.0 => 1.0 / factor,
            "linear" | "yarn" | "longrope" => 1.0,
            other => {
                return Err(Error::InvalidModel(format!(
                    "RoPE scaling type '{other}' is not supported"
                )))
            }
        };
        let token_embd = gguf
            .tensor("token_embd.weight")
            .ok_or_else(|| Error::InvalidModel("missing tensor 'token_embd.weight'".into()))?;
        let n_vocab = token_embd.dims.get(1).copied().unwrap_or(0) as usize;
        Ok(ModelConfig {
            architecture: arch.to_string(),
            name: gguf.get_str("general.name").map(str::to_string),
            n_vocab,
            n_embd,
            n_layer: m.dim("block_count")?,
            n_head,
            n_head_kv,
            head_dim,
            head_dim_v,
            n_ff: m.dim("feed_forward_length")?,
            n_ctx_train: m.dim_or("context_length", 2048)?,
            rms_eps: m.f32_or("attention.layer_norm_rms_epsilon", 1e-5)?,
            rope_base: m.f32_or("rope.freq_base", 10000.0)?,
            rope_freq_scale,
            rope_dims,
        })
    }
}
