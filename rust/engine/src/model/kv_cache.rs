//! The key/value cache: per layer, keys and values of every cached position, stored as f16.

use half::f16;

use crate::{Error, Result};

/// Keys and values for `capacity` positions of every layer, in f16.
pub struct KvCache {
    capacity: usize,
    len: usize,
    k_width: usize,
    v_width: usize,
    keys: Vec<Vec<f16>>,
    values: Vec<Vec<f16>>,
}

impl KvCache {
    /// A cache for `n_layer` layers, `capacity` positions, `k_width` key values and `v_width`
    /// value values per position (all KV heads together). Allocation is fallible: a cache the
    /// process cannot hold (e.g. under an address-space limit) is an
    /// [`Error::InsufficientMemory`], not an abort.
    pub fn new(n_layer: usize, capacity: usize, k_width: usize, v_width: usize) -> Result<Self> {
        let total = (k_width + v_width)
            .checked_mul(capacity)
            .and_then(|n| n.checked_mul(n_layer))
            .and_then(|n| n.checked_mul(std::mem::size_of::<f16>()));
        let fail = || {
            Error::InsufficientMemory(format!(
                "cannot allocate the KV cache for {capacity} positions ({} bytes)",
                total.map_or_else(|| "more than usize::MAX".to_string(), |t| t.to_string())
            ))
        };
        // The total fits in usize, so every per-layer size below does too.
        total.ok_or_else(fail)?;
        let buffer = |width: usize| -> Result<Vec<f16>> {
            let mut v = Vec::new();
            v.try_reserve_exact(capacity * width).map_err(|_| fail())?;
            v.resize(capacity * width, f16::ZERO);
            Ok(v)
        };
        let mut keys = Vec::with_capacity(n_layer);
        let mut values = Vec::with_capacity(n_layer);
        for _ in 0..n_layer {
            keys.push(buffer(k_width)?);
            values.push(buffer(v_width)?);
        }
        Ok(KvCache {
            capacity,
            len: 0,
            k_width,
            v_width,
            keys,
            values,
        })
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

    /// Forget cached positions from `len` on (`0` clears the cache).
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Bytes held by the cache.
    pub fn size_bytes(&self) -> usize {
        self.keys.len() * self.capacity * (self.k_width + self.v_width) * 2
    }

    pub(crate) fn set_len(&mut self, len: usize) {
        self.len = len.min(self.capacity);
    }

    /// Cached keys of `layer` (`capacity × k_width`).
    pub(crate) fn keys(&self, layer: usize) -> &[f16] {
        &self.keys[layer]
    }

    /// Cached values of `layer` (`capacity × v_width`).
    pub(crate) fn values(&self, layer: usize) -> &[f16] {
        &self.values[layer]
    }

    /// Layers, key width and value width (f16 values per position).
    pub(crate) fn layout(&self) -> (usize, usize, usize) {
        (self.keys.len(), self.k_width, self.v_width)
    }

    /// Cached keys and values of `layer`, writable (context shift, state restore).
    pub(crate) fn layer_mut(&mut self, layer: usize) -> (&mut [f16], &mut [f16]) {
        (&mut self.keys[layer], &mut self.values[layer])
    }
}
