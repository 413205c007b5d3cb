//! Hyper-parameters read from GGUF metadata.

use super::conv_state::ConvHistory;
use super::kv_cache::KvTypes;
use super::matrix_state::MatrixStates;
use crate::gguf::GgufFile;
use crate::{Error, Result};

/// Longest short convolution accepted (LFM2's is 3).
const MAX_CONV: usize = 64;

/// Largest head size of a delta net and state size of a Mamba-2 layer accepted (128 and 128
/// in the released models): their states grow with its square or with the channels.
pub(crate) const MAX_STATE_DIM: usize = 1024;

/// The product of `parts`, if it fits in `usize`.
fn checked(parts: &[usize]) -> Option<usize> {
    parts.iter().try_fold(1usize, |p, &x| p.checked_mul(x))
}

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
    /// Number of transformer blocks the decoder runs (`block_count` less the
    /// multi-token-prediction blocks stored after them).
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
    /// Each block's attention and feed-forward sizes. The fields above are the global layers'
    /// (the largest KV head count and feed-forward); Gemma 4's sliding-window layers have
    /// their own head size and KV heads, and its last layers reuse earlier layers' caches.
    pub layers: Vec<LayerShape>,
}

/// One block's attention and feed-forward sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayerShape {
    /// Attention (query) heads.
    pub n_head: usize,
    /// Key/value heads.
    pub n_head_kv: usize,
    /// Dimension of one key (and query) head.
    pub head_dim: usize,
    /// Dimension of one value head.
    pub head_dim_v: usize,
    /// Feed-forward hidden size.
    pub n_ff: usize,
    /// Rotated dimensions per head.
    pub rope_dims: usize,
    /// The layer whose cached keys and values this one attends to: itself, or (Gemma 4's
    /// last layers) an earlier layer of the same kind, whose cache it reads without writing.
    pub kv_layer: usize,
    /// The kernel length of the layer's short convolution, which replaces its attention
    /// (LFM2: a layer of 0 KV heads); `None` for attention layers.
    pub short_conv: Option<usize>,
    /// The layer's gated delta net, which replaces its attention (Qwen 3.5's linear
    /// attention layers); `None` for the others.
    pub delta_net: Option<DeltaShape>,
    /// The layer's Mamba-2 mixer, which replaces its attention (Granite 4 hybrid's layers of
    /// 0 KV heads); `None` for the others.
    pub mamba2: Option<Mamba2Shape>,
}

/// The sizes of a Mamba-2 layer (Granite 4 hybrid), from the file's `ssm.*` keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mamba2Shape {
    /// Length of the causal convolution over `x`, `B` and `C` (`ssm.conv_kernel`).
    pub conv_len: usize,
    /// Channels of `x` (`ssm.inner_size`): `heads` heads of `inner / heads`.
    pub inner: usize,
    /// State size per channel, and the length of `B` and `C` (`ssm.state_size`).
    pub state: usize,
    /// Heads (`ssm.time_step_rank`), each with one time step and decay.
    pub heads: usize,
    /// Groups of heads sharing `B` and `C`, and of channels normalised together
    /// (`ssm.group_count`).
    pub groups: usize,
}

impl Mamba2Shape {
    /// Channels the convolution mixes: `x`, then `B` and `C` of every group.
    pub fn conv_channels(&self) -> usize {
        self.inner + 2 * self.groups * self.state
    }

    /// Rows of the input projection `ssm_in`: the gate `z`, the convolution's channels and
    /// one time step per head.
    pub fn in_proj(&self) -> usize {
        self.inner + self.conv_channels() + self.heads
    }

    /// Values of the recurrent state: `state` per channel.
    pub fn state_len(&self) -> usize {
        self.inner * self.state
    }

    /// Read the Mamba-2 sizes of a Granite 4 hybrid file (`None` for other architectures).
    fn read(m: &Meta<'_>, arch: &str) -> Result<Option<Self>> {
        if arch != "granitehybrid" {
            return Ok(None);
        }
        let shape = Mamba2Shape {
            conv_len: m.dim("ssm.conv_kernel")?,
            inner: m.dim("ssm.inner_size")?,
            state: m.dim("ssm.state_size")?,
            heads: m.dim("ssm.time_step_rank")?,
            groups: m.dim("ssm.group_count")?,
        };
        if shape.conv_len < 2 || shape.conv_len > MAX_CONV {
            return Err(Error::InvalidModel(format!(
                "Mamba-2 convolution length {} is not in 2..={MAX_CONV}",
                shape.conv_len
            )));
        }
        let sizes = [
            checked(&[2, shape.groups, shape.state]),
            checked(&[shape.inner, shape.state]),
        ];
        let channels = sizes[0].and_then(|bc| bc.checked_add(2 * shape.inner + shape.heads));
        if shape.state > MAX_STATE_DIM || channels.is_none() || sizes[1].is_none() {
            return Err(Error::InvalidModel(format!(
                "Mamba-2 states of {} (at most {MAX_STATE_DIM}) for {} channels are too large",
                shape.state, shape.inner
            )));
        }
        let whole = |a: usize, b: usize| a.is_multiple_of(b);
        if !whole(shape.inner, shape.heads)
            || !whole(shape.heads, shape.groups)
            || !whole(shape.inner, shape.groups)
        {
            return Err(Error::InvalidModel(format!(
                "Mamba-2 of inner size {}, {} heads and {} groups: the heads must divide the \
                 inner size and the groups the heads",
                shape.inner, shape.heads, shape.groups
            )));
        }
        Ok(Some(shape))
    }
}

/// The sizes of a gated delta-net layer (Qwen 3.5), from the file's `ssm.*` keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeltaShape {
    /// Length of the causal convolution over the query, key and value channels.
    pub conv_len: usize,
    /// Query and key heads (`ssm.group_count`).
    pub k_heads: usize,
    /// Value heads (`ssm.time_step_rank`), a multiple of `k_heads`; value head `h` reads
    /// key head `h % k_heads`.
    pub v_heads: usize,
    /// Dimension of every head (`ssm.state_size`; keys and values alike).
    pub head_dim: usize,
}

impl DeltaShape {
    /// Channels the convolution mixes: queries, keys and values of all heads.
    pub fn conv_channels(&self) -> usize {
        (2 * self.k_heads + self.v_heads) * self.head_dim
    }

    /// Values of the recurrent state: one `head_dim × head_dim` matrix per value head.
    pub fn state_len(&self) -> usize {
        self.v_heads * self.head_dim * self.head_dim
    }

    /// Read the delta-net sizes of a Qwen 3.5 file (`None` for other architectures).
    fn read(m: &Meta<'_>, arch: &str) -> Result<Option<Self>> {
        if arch != "qwen35" {
            return Ok(None);
        }
        let shape = DeltaShape {
            conv_len: m.dim("ssm.conv_kernel")?,
            k_heads: m.dim("ssm.group_count")?,
            v_heads: m.dim("ssm.time_step_rank")?,
            head_dim: m.dim("ssm.state_size")?,
        };
        let inner = m.dim("ssm.inner_size")?;
        if shape.conv_len < 2 || shape.conv_len > MAX_CONV {
            return Err(Error::InvalidModel(format!(
                "delta-net convolution length {} is not in 2..={MAX_CONV}",
                shape.conv_len
            )));
        }
        let sizes = [
            checked(&[2 * shape.k_heads + shape.v_heads, shape.head_dim]),
            checked(&[shape.v_heads, shape.head_dim, shape.head_dim]),
        ];
        if shape.head_dim > MAX_STATE_DIM || sizes.iter().any(Option::is_none) {
            return Err(Error::InvalidModel(format!(
                "delta-net heads of {} (at most {MAX_STATE_DIM}) for {} value heads are too large",
                shape.head_dim, shape.v_heads
            )));
        }
        if !shape.v_heads.is_multiple_of(shape.k_heads) || inner != shape.v_heads * shape.head_dim {
            return Err(Error::InvalidModel(format!(
                "delta net of {} key heads, {} value heads of {} and inner size {inner}: the \
                 value heads must be a multiple of the key heads and fill the inner size",
                shape.k_heads, shape.v_heads, shape.head_dim
            )));
        }
        Ok(Some(shape))
    }
}

impl LayerShape {
    /// Whether the layer keeps keys and values of its own.
    pub fn has_kv(&self, layer: usize) -> bool {
        self.kv_layer == layer
    }

    /// Elements of one position's keys and of its values (all KV heads).
    pub fn kv_widths(&self) -> (usize, usize) {
        (
            self.n_head_kv * self.head_dim,
            self.n_head_kv * self.head_dim_v,
        )
    }
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

    /// One dimension per layer: the key's array (of `n_layer` entries, each 1..=MAX_DIM),
    /// or its single value for every layer (`default` when absent; required without one).
    pub(crate) fn dims_per_layer(
        &self,
        suffix: &str,
        n_layer: usize,
        default: Option<usize>,
    ) -> Result<Vec<usize>> {
        self.per_layer(suffix, n_layer, default, 1)
    }

    /// [`Meta::dims_per_layer`] with entries from `min` (0 or 1) on.
    fn per_layer(
        &self,
        suffix: &str,
        n_layer: usize,
        default: Option<usize>,
        min: u64,
    ) -> Result<Vec<usize>> {
        let key = self.key(suffix);
        let Some(array) = self.gguf.get_array(&key) else {
            let one = match default {
                Some(d) => self.dim_or(suffix, d)?,
                None => self.dim(suffix)?,
            };
            return Ok(vec![one; n_layer]);
        };
        if array.len() != n_layer {
            return Err(Error::InvalidModel(format!(
                "metadata '{key}' has {} entries for {n_layer} layers",
                array.len()
            )));
        }
        (0..n_layer)
            .map(|i| match array.get(i).and_then(|v| v.as_u64()) {
                Some(v) if (min..=MAX_DIM).contains(&v) => Ok(v as usize),
                _ => Err(Error::InvalidModel(format!(
                    "metadata '{key}' entry {i} is not a dimension"
                ))),
            })
            .collect()
    }

    /// An array of unsigned integers, if the key holds one.
    pub(crate) fn counts(&self, suffix: &str) -> Option<Vec<u64>> {
        let array = self.gguf.get_array(&self.key(suffix))?;
        (0..array.len())
            .map(|i| array.get(i).and_then(|v| v.as_u64()))
            .collect()
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
        let per_position = self
            .layers
            .iter()
            .enumerate()
            .filter(|(il, l)| l.has_kv(*il))
            .map(|(_, l)| {
                let (kw, vw) = l.kv_widths();
                types
                    .bytes_per_position(1, kw, vw)
                    .or_else(|| KvTypes::default().bytes_per_position(1, kw, vw))
                    .unwrap_or(u64::MAX)
            })
            .fold(0u64, u64::saturating_add);
        per_position
            .saturating_mul(n_ctx as u64)
            .saturating_add(self.conv_state_bytes())
            .saturating_add(self.matrix_state_bytes())
    }

    /// Bytes of a sequence's delta-net and Mamba-2 states (0 without any): two f32 copies of
    /// each such layer's state, the current one and the one before the last forward pass
    /// ([`MatrixStates`]).
    pub fn matrix_state_bytes(&self) -> u64 {
        MatrixStates::bytes(&self.matrix_state_layers())
    }

    /// Each layer's matrix state length (delta nets, Mamba-2), 0 for the others.
    pub(crate) fn matrix_state_layers(&self) -> Vec<usize> {
        let len = |l: &LayerShape| match (l.delta_net, l.mamba2) {
            (Some(dn), _) => dn.state_len(),
            (None, Some(m)) => m.state_len(),
            (None, None) => 0,
        };
        self.layers.iter().map(len).collect()
    }

    /// Bytes of a sequence's short-convolution state ([`ConvHistory`]; 0 without one): the
    /// inputs of the kernel's reach and `ROLLBACK` more positions, in f32, per such layer.
    pub fn conv_state_bytes(&self) -> u64 {
        ConvHistory::bytes(&self.conv_layers())
    }

    /// Each layer's short convolution as `(channels, reach)`, `(0, 0)` for the others.
    pub(crate) fn conv_layers(&self) -> Vec<(usize, usize)> {
        let conv = |l: &LayerShape| match (l.short_conv, l.delta_net, l.mamba2) {
            (Some(len), _, _) => (self.n_embd, len - 1),
            (None, Some(dn), _) => (dn.conv_channels(), dn.conv_len - 1),
            (None, None, Some(m)) => (m.conv_channels(), m.conv_len - 1),
            (None, None, None) => (0, 0),
        };
        self.layers.iter().map(conv).collect()
    }

    /// Checks that every layer's heads can be cached as `types` ([`KvTypes::check`]).
    pub fn check_kv_types(&self, types: KvTypes) -> Result<()> {
        self.layers
            .iter()
            .try_for_each(|l| types.check(l.head_dim, l.head_dim_v))
    }

    /// Read the common hyper-parameters for architecture `arch`.
    pub(crate) fn read(gguf: &GgufFile, arch: &str) -> Result<Self> {
        let m = Meta::new(gguf, arch);
        let n_embd = m.dim("embedding_length")?;
        let n_stored = m.dim("block_count")?;
        // The blocks after the decoder's are multi-token-prediction heads (Qwen 3.5's
        // `nextn_predict_layers`), which llama.cpp runs only to draft tokens: not run here.
        let nextn = m.count_or("nextn_predict_layers", 0)?;
        if nextn >= n_stored {
            return Err(Error::InvalidModel(format!(
                "{nextn} prediction layers of {n_stored} leave no decoder layer"
            )));
        }
        let n_layer = n_stored - nextn;
        // Per-layer arrays cover every stored block.
        let decoder = |mut v: Vec<usize>| {
            v.truncate(n_layer);
            v
        };
        let heads = decoder(m.dims_per_layer("attention.head_count", n_stored, None)?);
        let n_head = heads.iter().copied().max().unwrap_or(1);
        // LFM2: layers of 0 KV heads have a short convolution of this length instead.
        let conv_len = m.count_or("shortconv.l_cache", 0)?;
        if conv_len == 1 || conv_len > MAX_CONV {
            return Err(Error::InvalidModel(format!(
                "short convolution length {conv_len} is not in 2..={MAX_CONV}"
            )));
        }
        // Granite 4 hybrid: layers of 0 KV heads are Mamba-2 layers.
        let mamba = Mamba2Shape::read(&m, arch)?;
        let min_kv = u64::from(conv_len == 0 && mamba.is_none());
        let heads_kv = m.per_layer("attention.head_count_kv", n_stored, Some(n_head), min_kv)?;
        let heads_kv = decoder(heads_kv);
        // Qwen 3.5: gated delta nets instead of attention, in the layers the file marks
        // recurrent, or else in all but every `full_attention_interval`-th.
        let delta = DeltaShape::read(&m, arch)?;
        let recurrent = match delta {
            None => vec![false; n_layer],
            Some(_) => match m.bools("attention.recurrent_layers") {
                Some(flags) if flags.len() >= n_layer => flags[..n_layer].to_vec(),
                Some(flags) => {
                    return Err(Error::InvalidModel(format!(
                        "{} recurrent-layer flags for {n_layer} layers",
                        flags.len()
                    )))
                }
                None => {
                    let every = m.dim_or("full_attention_interval", 4)?;
                    (0..n_layer).map(|il| (il + 1) % every != 0).collect()
                }
            },
        };
        let head_dim = m.dim_or("attention.key_length", n_embd / n_head)?;
        let head_dim_v = m.dim_or("attention.value_length", head_dim)?;
        let rope_dims = m.dim_or("rope.dimension_count", head_dim)?;
        // Gemma 4: sliding-window layers (`attention.sliding_window_pattern`, one bool per
        // layer) have heads of `key_length_swa` and rotate `rope.dimension_count_swa`.
        let swa = m.bools("attention.sliding_window_pattern");
        let head_dim_swa = m.dim_or("attention.key_length_swa", head_dim)?;
        let head_dim_v_swa = m.dim_or("attention.value_length_swa", head_dim_swa)?;
        let rope_dims_swa = m.dim_or("rope.dimension_count_swa", rope_dims)?;
        let n_ffs = decoder(m.dims_per_layer("feed_forward_length", n_stored, None)?);
        // Gemma 4: the last `attention.shared_kv_layers` layers attend to the cache of the
        // last layer of their kind before them (llama.cpp: n_layer_kv_from_start − 2 for
        // sliding-window layers, − 1 for global ones).
        let shared = m.count_or("attention.shared_kv_layers", 0)?;
        let kv_from = n_layer.saturating_sub(shared);
        if shared > 0 && (kv_from < 2 || swa.is_none()) {
            return Err(Error::InvalidModel(format!(
                "{shared} of {n_layer} layers share KV caches: needs at least two layers with \
                 their own and a sliding-window pattern"
            )));
        }
        let mut layers = Vec::with_capacity(n_layer);
        for il in 0..n_layer {
            let is_swa = swa.as_ref().is_some_and(|f| f.get(il) == Some(&true));
            let (hd, hdv, rd) = match is_swa {
                true => (head_dim_swa, head_dim_v_swa, rope_dims_swa),
                false => (head_dim, head_dim_v, rope_dims),
            };
            let delta_net = delta.filter(|_| recurrent[il]);
            let mamba2 = mamba.filter(|_| heads_kv[il] == 0);
            let mixer = delta_net.is_some() || mamba2.is_some();
            let (nh, nkv) = match mixer {
                true => (0, 0),
                false => (heads[il], heads_kv[il]),
            };
            let short_conv = (nkv == 0 && !mixer).then_some(conv_len);
            if nkv != 0 && nh % nkv != 0 {
                return Err(Error::InvalidModel(format!(
                    "{nh} attention heads is not a multiple of {nkv} KV heads"
                )));
            }
            if rd > hd || rd % 2 != 0 {
                return Err(Error::InvalidModel(format!(
                    "RoPE dimension count {rd} does not fit head size {hd}"
                )));
            }
            let kv_layer = match il >= kv_from {
                true => kv_from - if is_swa { 2 } else { 1 },
                false => il,
            };
            layers.push(LayerShape {
                n_head: nh,
                n_head_kv: nkv,
                head_dim: hd,
                head_dim_v: hdv,
                n_ff: n_ffs[il],
                rope_dims: rd,
                kv_layer,
                short_conv,
                delta_net,
                mamba2,
            });
        }
        for (il, l) in layers.iter().enumerate() {
            let source = &layers[l.kv_layer];
            if !l.has_kv(il) && (source.kv_widths() != l.kv_widths() || !source.has_kv(l.kv_layer))
            {
                return Err(Error::InvalidModel(format!(
                    "layer {il} shares the KV cache of layer {}, whose heads differ",
                    l.kv_layer
                )));
            }
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
            n_layer,
            n_head,
            n_head_kv: heads_kv.iter().copied().max().unwrap_or(1).max(1),
            head_dim,
            head_dim_v,
            n_ff: n_ffs.iter().copied().max().unwrap_or(1),
            n_ctx_train: m.dim_or("context_length", 2048)?,
            rms_eps: m.f32_or("attention.layer_norm_rms_epsilon", 1e-5)?,
            rope_base: m.f32_or("rope.freq_base", 10000.0)?,
            rope_freq_scale,
            rope_dims,
            layers,
        })
    }
}
