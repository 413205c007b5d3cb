//! Context shift: drop a block of cached positions and move the positions after it down,
//! re-rotating the moved keys' RoPE in place (as llama.cpp's context shift does) so that
//! nothing is evaluated again.
//!
//! A cached key is `R(p) · k` for a rotation `R(p)` whose angles are linear in the position `p`
//! (`freq_scale · p · base^(-2i/n_dims) / freq_factor_i`), so `R(p - d) · k = R(-d) · R(p) · k`:
//! moving a key down by `d` positions is one more rotation by `-d`, with each layer's own RoPE
//! (style, base, scale, factors). Gemma 3's local and global layers thus each get their own
//! base. Sliding windows are measured on positions, so after the move they cover the moved
//! keys as they would have had the tokens been evaluated at their new positions.

use super::kv_cache::{hadamard, load, store};
use super::{KvCache, Model};
use crate::{Error, Result};

impl Model {
    /// Drop cached positions `n_keep..n_keep + n_discard` and move the ones after them down by
    /// `n_discard`, re-rotating their keys. The cache then holds `len - n_discard` positions.
    /// A block that does not lie within the cached positions is an [`Error::InvalidOption`].
    pub fn shift_cache(&self, cache: &mut KvCache, n_keep: usize, n_discard: usize) -> Result<()> {
        let len = cache.len();
        if n_discard == 0 || n_keep.checked_add(n_discard).is_none_or(|end| end > len) {
            return Err(Error::InvalidOption(format!(
                "cannot discard {n_discard} positions after {n_keep} of {len} cached"
            )));
        }
        if cache.is_recurrent() {
            return Err(Error::InvalidOption(
                "this model's memory is partly a recurrent state (short convolutions), which \
                 cannot be shifted: evaluate the kept tokens again instead"
                    .into(),
            ));
        }
        let c = &self.net.config;
        // Quantized keys are widened, rotated and stored again, as llama.cpp does (undoing and
        // redoing their Hadamard rotation around the RoPE one).
        let ty = cache.types().k;
        let moved = n_keep..len - n_discard;
        let n_ctx = cache.capacity();
        let mut table = Vec::new();
        let n_layer = cache.n_layer();
        for (il, layer) in self.net.layers.iter().enumerate().take(n_layer) {
            // A layer reading another's cache has none to move.
            let (kw, vw) = cache.layout(il);
            let head_dim = c.layers[il].head_dim;
            let hadamard_n = cache.types().key_rotation(head_dim);
            let mut row = vec![0f32; cache.widths(il).0];
            let (keys, values) = cache.layer_mut(il);
            values.copy_within((n_keep + n_discard) * vw..len * vw, n_keep * vw);
            let Some(rope) = self.net.rope_of(layer, n_ctx) else {
                // No positions in this layer's keys: they move as they are.
                keys.copy_within((n_keep + n_discard) * kw..len * kw, n_keep * kw);
                continue;
            };
            rope.rotation(n_discard, &mut table);
            // R(-d): the same cosines, negated sines.
            table.iter_mut().for_each(|(_, s)| *s = -*s);
            for p in moved.clone() {
                let (src, dst) = ((p + n_discard) * kw, p * kw);
                load(ty, &keys[src..src + kw], &mut row);
                if let Some(n) = hadamard_n {
                    hadamard(&mut row, n);
                }
                for head in row.chunks_exact_mut(head_dim) {
                    rope.apply(head, &table);
                }
                if let Some(n) = hadamard_n {
                    hadamard(&mut row, n);
                }
                store(ty, &row, &mut keys[dst..dst + kw]);
            }
        }
        cache.set_len(len - n_discard);
        Ok(())
    }
}

impl KvCache {
    /// The cached key of `layer` at position `pos` (every KV head, widened to f32), `None`
    /// outside the cached positions. For inspecting the cache, e.g. after a shift.
    pub fn key_at(&self, layer: usize, pos: usize) -> Option<Vec<f32>> {
        if layer >= self.n_layer() || pos >= self.len() {
            return None;
        }
        let (kw, _) = self.layout(layer);
        let mut out = vec![0f32; self.widths(layer).0];
        load(
            self.types().k,
            &self.keys(layer)[pos * kw..(pos + 1) * kw],
            &mut out,
        );
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use crate::model::ops::{Rope, RopeStyle, Yarn};

    /// Rotating a vector at position `p` and then by `-d` equals rotating it at `p - d`, for
    /// both pairing styles, Gemma 3's global base, Llama 3 frequency factors, and YaRN with a
    /// magnitude scale (which the shift's pure rotation must not apply a second time).
    #[test]
    fn rotation_by_minus_d_equals_rotation_at_the_new_position() {
        let plain = |style, base, freq_scale| Rope::plain(style, 8, base, freq_scale);
        let ropes = [
            plain(RopeStyle::Normal, 10_000.0, 1.0),
            plain(RopeStyle::Neox, 1_000_000.0, 1.0),
            Rope {
                freq_factors: Some(vec![1.0, 2.0, 8.0, 32.0]),
                ..plain(RopeStyle::Neox, 10_000.0, 0.25)
            },
            Rope {
                mscale: 1.2,
                yarn: Some(Yarn::new(8, 64, 10_000.0, 32.0, 1.0)),
                ..plain(RopeStyle::Normal, 10_000.0, 0.25)
            },
        ];
        for rope in ropes {
            let (style, base) = (rope.style, rope.base);
            let x: Vec<f32> = (0..8).map(|i| (i as f32 * 0.7).sin()).collect();
            let (p, d) = (3000usize, 1234usize);
            let mut t = Vec::new();
            let mut shifted = x.clone();
            rope.angles(p, &mut t);
            rope.apply(&mut shifted, &t);
            rope.rotation(d, &mut t);
            t.iter_mut().for_each(|(_, s)| *s = -*s);
            rope.apply(&mut shifted, &t);
            let mut direct = x.clone();
            rope.angles(p - d, &mut t);
            rope.apply(&mut direct, &t);
            let err = shifted
                .iter()
                .zip(&direct)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            assert!(err < 2e-3, "{style:?} base {base}: error {err}");
            // Not the identity: a wrong sign would fail.
            assert!(shifted.iter().zip(&x).any(|(a, b)| (a - b).abs() > 0.1));
        }
    }
}
