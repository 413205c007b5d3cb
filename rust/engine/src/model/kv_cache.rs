//! The key/value cache: per layer, keys and values of every cached position, each stored in
//! its cache type ([`KvTypes`]: f16 by default, or f32, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl as
//! llama.cpp's `--cache-type-k/-v`). Storage is in 2-byte units whatever the type (every supported type's
//! head rows are a whole number of them); a quantized head row is its blocks' bytes.

use half::f16;
use half::slice::HalfFloatSliceExt;

use super::conv_state::ConvHistory;
use super::matrix_state::MatrixStates;
use crate::quant::{self, GgmlType};
use crate::{Error, Result};

/// The cache types llama.cpp accepts for `--cache-type-k/-v`, all stored here.
pub const KV_CACHE_TYPES: [GgmlType; 9] = [
    GgmlType::F16,
    GgmlType::F32,
    GgmlType::BF16,
    GgmlType::Q8_0,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::IQ4_NL,
];

/// The element types of the cached keys and values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvTypes {
    /// Keys.
    pub k: GgmlType,
    /// Values.
    pub v: GgmlType,
}

impl Default for KvTypes {
    /// f16 keys and values (llama.cpp's default).
    fn default() -> Self {
        KvTypes {
            k: GgmlType::F16,
            v: GgmlType::F16,
        }
    }
}

impl KvTypes {
    /// The cache type named `name` (llama.cpp's names: `f16`, `f32`, `bf16`, `q8_0`, `q4_0`,
    /// `q4_1`, `q5_0`, `q5_1`, `iq4_nl`, any case), or an [`Error::InvalidOption`] listing the accepted ones.
    pub fn parse(name: &str) -> Result<GgmlType> {
        KV_CACHE_TYPES
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                let names: Vec<String> = KV_CACHE_TYPES
                    .iter()
                    .map(|t| t.name().to_lowercase())
                    .collect();
                Error::InvalidOption(format!(
                    "unsupported KV cache type '{name}' (supported: {})",
                    names.join(", ")
                ))
            })
    }

    /// The key and value types named `k` and `v` (see [`KvTypes::parse`]).
    pub fn named(k: &str, v: &str) -> Result<KvTypes> {
        Ok(KvTypes {
            k: Self::parse(k)?,
            v: Self::parse(v)?,
        })
    }

    /// Checks that both types can be cached for heads of `head_dim` keys and `head_dim_v`
    /// values (a quantized type's blocks must not straddle heads).
    pub fn check(&self, head_dim: usize, head_dim_v: usize) -> Result<()> {
        for (ty, width, what) in [(self.k, head_dim, "key"), (self.v, head_dim_v, "value")] {
            if !KV_CACHE_TYPES.contains(&ty) {
                return Err(Error::InvalidOption(format!("{ty} is not a KV cache type")));
            }
            if !width.is_multiple_of(ty.block_size()) {
                return Err(Error::InvalidOption(format!(
                    "cannot cache {what}s as {}: the {what} head size {width} is not a \
                     multiple of its block size {}",
                    ty.name().to_lowercase(),
                    ty.block_size()
                )));
            }
        }
        Ok(())
    }

    /// The size of the Walsh-Hadamard rotation applied to queries and keys of `head_dim`
    /// before a quantized key cache stores them (llama.cpp's `attn_rot_k`: spreading outliers
    /// over the head makes the blocks quantize better; scores are unchanged, the rotation being
    /// orthonormal): the largest power of two ≥ 64 dividing the head; `None` for f16, bf16 and
    /// f32 keys or heads not a multiple of 64.
    pub fn key_rotation(&self, head_dim: usize) -> Option<usize> {
        if !is_quantized(self.k) || !head_dim.is_multiple_of(64) {
            return None;
        }
        let mut n = 64;
        while head_dim.is_multiple_of(2 * n) {
            n *= 2;
        }
        Some(n)
    }

    /// The rotation of values (and back of the attention output) for a quantized value cache
    /// (llama.cpp's `attn_rot_v`): 64 where the value head is a multiple of 64, else `None`.
    pub fn value_rotation(&self, head_dim_v: usize) -> Option<usize> {
        (is_quantized(self.v) && head_dim_v.is_multiple_of(64)).then_some(64)
    }

    /// Bytes one position takes in `n_layer` layers of `k_width` key and `v_width` value
    /// elements (`None` on overflow or partial blocks).
    pub fn bytes_per_position(
        &self,
        n_layer: usize,
        k_width: usize,
        v_width: usize,
    ) -> Option<u64> {
        let k = self.k.row_bytes(k_width as u64)?;
        let v = self.v.row_bytes(v_width as u64)?;
        k.checked_add(v)?.checked_mul(n_layer as u64)
    }
}

/// Whether `ty` is a block format (not f16, bf16 or f32).
fn is_quantized(ty: GgmlType) -> bool {
    ty.block_size() > 1
}

/// The orthonormal Walsh-Hadamard transform of each `n` consecutive values of `x` (`n` a power
/// of two), in place, as ggml's `fwht`: every value scaled by `1/√n` first, then the butterflies
/// `(u + v, u − v)` at distances 1, 2, 4, … (the same operations in the same order, so the
/// same bits). It is its own inverse.
pub(crate) fn hadamard(x: &mut [f32], n: usize) {
    let scale = 1.0 / (n as f32).sqrt();
    for row in x.chunks_exact_mut(n) {
        row.iter_mut().for_each(|v| *v *= scale);
        let mut len = 1;
        while len < n {
            for block in row.chunks_exact_mut(2 * len) {
                let (lo, hi) = block.split_at_mut(len);
                for (u, v) in lo.iter_mut().zip(hi) {
                    (*u, *v) = (*u + *v, *u - *v);
                }
            }
            len *= 2;
        }
    }
}

/// The 2-byte units of `width` elements of `ty` (whole blocks, checked by [`KvTypes::check`]).
pub(crate) fn units(ty: GgmlType, width: usize) -> usize {
    ty.row_bytes(width as u64).unwrap_or(0) as usize / 2
}

/// The bytes of a row of 2-byte units.
pub(crate) fn bytes_of(row: &[f16]) -> &[u8] {
    // SAFETY: any initialized memory can be read as bytes; the length is the same memory.
    unsafe { std::slice::from_raw_parts(row.as_ptr().cast::<u8>(), std::mem::size_of_val(row)) }
}

/// The bytes of a row of 2-byte units, writable.
pub(crate) fn bytes_of_mut(row: &mut [f16]) -> &mut [u8] {
    let len = std::mem::size_of_val(row);
    // SAFETY: as `bytes_of`; every byte pattern is a valid f16, so writes keep the slice valid.
    unsafe { std::slice::from_raw_parts_mut(row.as_mut_ptr().cast::<u8>(), len) }
}

/// Stores the f32 values `src` as `ty` into the units `dst` (exactly [`units`] of them), as
/// llama.cpp's `from_float` for the type does (f16 rounds to nearest; q8_0 its x86 rule).
pub(crate) fn store(ty: GgmlType, src: &[f32], dst: &mut [f16]) {
    if ty == GgmlType::F16 {
        dst.convert_from_f32_slice(src);
    } else {
        // The lengths match by construction (`units`); the types are checked at creation.
        quant::quantize_row(ty, src, bytes_of_mut(dst)).expect("a checked KV cache type");
    }
}

/// Widens the stored row `src` of `ty` into `dst` (f16, f32 and bf16 exactly).
pub(crate) fn load(ty: GgmlType, src: &[f16], dst: &mut [f32]) {
    if ty == GgmlType::F16 {
        src.convert_to_f32_slice(dst);
    } else {
        quant::dequantize(ty, bytes_of(src), dst).expect("a checked KV cache type");
    }
}

/// Keys and values for `capacity` positions of every layer.
pub struct KvCache {
    capacity: usize,
    len: usize,
    types: KvTypes,
    /// Each layer's key and value elements per position (all KV heads; 0 for a layer that
    /// reads another layer's cache).
    widths: Vec<(usize, usize)>,
    keys: Vec<Vec<f16>>,
    values: Vec<Vec<f16>>,
    /// The short convolutions' recent inputs (LFM2's, and those of Qwen 3.5's delta nets
    /// and Granite 4 hybrid's Mamba-2 layers), if the model has any.
    conv: ConvHistory,
    /// The delta nets' and Mamba-2 layers' states, if the model has any.
    states: MatrixStates,
}

impl KvCache {
    /// A cache of `capacity` positions for layers of `widths` key and value elements per
    /// position (all KV heads together; `(0, 0)` for a layer without a cache of its own),
    /// stored as `types` (checked by the caller with [`KvTypes::check`]). Allocation is
    /// fallible: a cache the process cannot hold (e.g. under an address-space limit) is an
    /// [`Error::InsufficientMemory`], not an abort.
    pub fn new(capacity: usize, widths: &[(usize, usize)], types: KvTypes) -> Result<Self> {
        let units_per_position = widths.iter().try_fold(0usize, |sum, &(kw, vw)| {
            sum.checked_add(units(types.k, kw))?
                .checked_add(units(types.v, vw))
        });
        let total = units_per_position
            .and_then(|n| n.checked_mul(capacity))
            .and_then(|n| n.checked_mul(2));
        let fail = || {
            Error::InsufficientMemory(format!(
                "cannot allocate the KV cache for {capacity} positions ({} bytes)",
                total.map_or_else(|| "more than usize::MAX".to_string(), |t| t.to_string())
            ))
        };
        // The total fits in usize, so every per-layer size below does too.
        total.ok_or_else(fail)?;
        let buffer = |units: usize| -> Result<Vec<f16>> {
            let mut v = Vec::new();
            v.try_reserve_exact(capacity * units).map_err(|_| fail())?;
            v.resize(capacity * units, f16::ZERO);
            Ok(v)
        };
        let mut keys = Vec::with_capacity(widths.len());
        let mut values = Vec::with_capacity(widths.len());
        for &(kw, vw) in widths {
            keys.push(buffer(units(types.k, kw))?);
            values.push(buffer(units(types.v, vw))?);
        }
        Ok(KvCache {
            capacity,
            len: 0,
            types,
            widths: widths.to_vec(),
            keys,
            values,
            conv: ConvHistory::default(),
            states: MatrixStates::default(),
        })
    }

    /// The cache with the recurrent state of short convolutions of `(channels, reach)` per
    /// layer (`(0, 0)`: none), see [`ConvHistory`].
    pub(crate) fn with_conv(mut self, layers: &[(usize, usize)]) -> Result<Self> {
        self.conv = ConvHistory::new(layers)?;
        Ok(self)
    }

    /// The cache with matrix states of `layers[i]` values for layer `i` (0: none), see
    /// [`MatrixStates`].
    pub(crate) fn with_matrix_states(mut self, layers: &[usize]) -> Result<Self> {
        self.states = MatrixStates::new(layers)?;
        Ok(self)
    }

    /// Positions the cache can hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Positions currently cached (the next token goes at this position).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Forget cached positions from `len` on (`0` clears the cache) and return how many are
    /// kept: `len` (or fewer if fewer were cached), except where a recurrent state cannot go
    /// back that far: then fewer (at worst none), and the tokens after them must be evaluated
    /// again. LFM2's short convolutions go back [`ROLLBACK`](super::conv_state::ROLLBACK)
    /// positions; delta nets and Mamba-2 layers only to where the last forward pass started.
    pub fn truncate(&mut self, len: usize) -> usize {
        let to = self.states.reach(self.len, len);
        let to = self.conv.truncate(self.len, to);
        self.states.go_back(self.len, to);
        self.len = to;
        if self.len == 0 {
            self.conv.clear();
        }
        self.len
    }

    /// Whether part of the memory is a recurrent state (it cannot be shifted, and goes back
    /// only a few positions).
    pub fn is_recurrent(&self) -> bool {
        self.conv.is_some() || self.states.is_some()
    }

    /// Bytes held by the cache.
    pub fn size_bytes(&self) -> usize {
        let units: usize = self.keys.iter().chain(&self.values).map(Vec::len).sum();
        units * 2 + self.conv.size_bytes() + self.states.size_bytes()
    }

    /// The short convolutions' recent inputs.
    pub(crate) fn conv(&self) -> &ConvHistory {
        &self.conv
    }

    /// The short convolutions' recent inputs, writable.
    pub(crate) fn conv_mut(&mut self) -> &mut ConvHistory {
        &mut self.conv
    }

    /// The element types of the keys and values.
    pub fn types(&self) -> KvTypes {
        self.types
    }

    pub(crate) fn set_len(&mut self, len: usize) {
        self.len = len.min(self.capacity);
    }

    /// After a forward pass appended positions `self.len()..len`: the new length, and the
    /// matrix states it wrote become current.
    pub(crate) fn advance(&mut self, len: usize) {
        self.states.advance(self.len);
        self.set_len(len);
    }

    /// The delta nets' and Mamba-2 layers' states.
    pub(crate) fn matrix_states(&self) -> &MatrixStates {
        &self.states
    }

    /// The delta nets' and Mamba-2 layers' states, writable.
    pub(crate) fn matrix_states_mut(&mut self) -> &mut MatrixStates {
        &mut self.states
    }

    /// The number of layers.
    pub(crate) fn n_layer(&self) -> usize {
        self.widths.len()
    }

    /// Cached keys of `layer` (`capacity` rows of [`KvCache::layout`]'s key units).
    pub(crate) fn keys(&self, layer: usize) -> &[f16] {
        &self.keys[layer]
    }

    /// Cached values of `layer` (`capacity` rows of [`KvCache::layout`]'s value units).
    pub(crate) fn values(&self, layer: usize) -> &[f16] {
        &self.values[layer]
    }

    /// The 2-byte units of one position's keys and of its values in `layer`.
    pub(crate) fn layout(&self, layer: usize) -> (usize, usize) {
        let (kw, vw) = self.widths[layer];
        (units(self.types.k, kw), units(self.types.v, vw))
    }

    /// Elements of one position's keys and of its values in `layer` (all KV heads).
    pub(crate) fn widths(&self, layer: usize) -> (usize, usize) {
        self.widths[layer]
    }

    /// Cached keys and values of `layer`, writable (context shift, state restore).
    pub(crate) fn layer_mut(&mut self, layer: usize) -> (&mut [f16], &mut [f16]) {
        (&mut self.keys[layer], &mut self.values[layer])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Walsh-Hadamard matrix as ggml builds it (`ggml_gen_hadamard`): `H[0][0] = 1/√n`,
    /// then each doubling `[[H, H], [H, −H]]`.
    fn matrix(n: usize) -> Vec<f32> {
        let mut h = vec![0f32; n * n];
        h[0] = 1.0 / (n as f32).sqrt();
        let mut s = 1;
        while s < n {
            for i in 0..s {
                for j in 0..s {
                    let v = h[i * n + j];
                    h[(i + s) * n + j] = v;
                    h[i * n + j + s] = v;
                    h[(i + s) * n + j + s] = -v;
                }
            }
            s *= 2;
        }
        h
    }

    #[test]
    fn hadamard_is_the_orthonormal_matrix_and_its_own_inverse() {
        for n in [64, 128, 256] {
            let x: Vec<f32> = (0..2 * n)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
                .collect();
            let mut y = x.clone();
            hadamard(&mut y, n);
            let h = matrix(n);
            for (row, out) in x.chunks_exact(n).zip(y.chunks_exact(n)) {
                for (i, &got) in out.iter().enumerate() {
                    let want: f64 = (0..n)
                        .map(|j| f64::from(h[i * n + j]) * f64::from(row[j]))
                        .sum();
                    assert!(
                        (f64::from(got) - want).abs() < 1e-4,
                        "n={n} {i}: {got} vs {want}"
                    );
                }
            }
            hadamard(&mut y, n);
            for (a, b) in x.iter().zip(&y) {
                assert!((a - b).abs() < 1e-4, "n={n}: {a} vs {b}");
            }
        }
    }

    #[test]
    fn rotations_follow_llama_cpp() {
        let q4 = KvTypes {
            k: GgmlType::Q4_0,
            v: GgmlType::Q8_0,
        };
        assert_eq!(q4.key_rotation(64), Some(64));
        assert_eq!(q4.key_rotation(128), Some(128));
        assert_eq!(q4.key_rotation(192), Some(64));
        assert_eq!(q4.key_rotation(256), Some(256));
        assert_eq!(q4.key_rotation(96), None);
        assert_eq!(q4.value_rotation(256), Some(64));
        assert_eq!(KvTypes::default().key_rotation(128), None);
        assert_eq!(KvTypes::default().value_rotation(128), None);
    }
}
