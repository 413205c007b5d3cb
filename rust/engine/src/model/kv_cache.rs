//! The key/value cache: per layer, keys and values of every cached position, stored as f16.

use half::f16;

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
    /// value values per position (all KV heads together).
    pub fn new(n_layer: usize, capacity: usize, k_width: usize, v_width: usize) -> Self {
        KvCache {
            capacity,
            len: 0,
            k_width,
            v_width,
            keys: (0..n_layer).map(|_| vec![f16::ZERO; capacity * k_width]).collect(),
            values: (0..n_layer).map(|_| vec![f16::ZERO; capacity * v_width]).collect(),
        }
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

    /// Store keys and values (`n` positions from `pos0`) for `layer`, rounding to f16.
    pub(crate) fn store(&mut self, layer: usize, pos0: usize, k: &[f32], v: &[f32]) {
        let kd = &mut self.keys[layer][pos0 * self.k_width..pos0 * self.k_width + k.len()];
        for (d, s) in kd.iter_mut().zip(k) {
            *d = f16::from_f32(*s);
        }
        let vd = &mut self.values[layer][pos0 * self.v_width..pos0 * self.v_width + v.len()];
        for (d, s) in vd.iter_mut().zip(v) {
            *d = f16::from_f32(*s);
        }
    }

    /// Cached keys of `layer` (`capacity × k_width`).
    pub(crate) fn keys(&self, layer: usize) -> &[f16] {
        &self.keys[layer]
    }

    /// Cached values of `layer` (`capacity × v_width`).
    pub(crate) fn values(&self, layer: usize) -> &[f16] {
        &self.values[layer]
    }
}
