//! The recurrent part of a sequence's memory: what LFM2's short convolutions remember.
//!
//! A short convolution of kernel length `L` mixes each channel of a position's input with the
//! same channel of the `L − 1` inputs before it, so its state after position `p` is those
//! inputs (llama.cpp's `conv_state`). We keep more of them: the inputs of the last
//! [`ConvHistory::rows`] positions, in a ring per layer. That lets a sequence go back a few
//! positions exactly (a speculative draft's rejected tokens, a prompt that differs from the
//! cached one in its last tokens), which a state of `L − 1` inputs could not. Going back
//! further than the ring holds is not possible: [`ConvHistory::truncate`] then empties the
//! sequence (its tokens are evaluated again).

use crate::{fallible, Error, Result};

/// How many positions beyond the kernel's reach the rings hold: enough for the longest
/// speculative draft (64 tokens, whose rejected ones are dropped again) plus the token before
/// it.
pub(crate) const ROLLBACK: usize = 65;

/// One layer's ring of inputs.
struct Ring {
    /// Channels per position.
    width: usize,
    /// Position `p`'s inputs are row `p % rows`.
    values: Vec<f32>,
}

/// The short convolutions' inputs of the last positions of a sequence, per layer.
#[derive(Default)]
pub(crate) struct ConvHistory {
    /// Per layer; `None` for layers without a short convolution.
    layers: Vec<Option<Ring>>,
    /// Positions each ring holds.
    rows: usize,
    /// Earlier inputs a position's convolution reads (`L − 1`, the longest kernel's).
    reach: usize,
    /// The first position whose inputs are still held (the earlier ones were overwritten).
    oldest: usize,
}

impl ConvHistory {
    /// Rings for layers of `(channels, reach)` (`(0, 0)`: no short convolution).
    pub(crate) fn new(layers: &[(usize, usize)]) -> Result<Self> {
        let reach = layers.iter().map(|&(_, r)| r).max().unwrap_or(0);
        let rows = reach + ROLLBACK;
        let mut rings = Vec::with_capacity(layers.len());
        for &(width, _) in layers {
            if width == 0 {
                rings.push(None);
                continue;
            }
            let len = width
                .checked_mul(rows)
                .ok_or_else(|| Error::InsufficientMemory("the short convolutions' state".into()))?;
            let mut values = Vec::new();
            fallible::resize(&mut values, len, 0.0f32, "the short convolutions' state")?;
            rings.push(Some(Ring { width, values }));
        }
        Ok(ConvHistory {
            layers: rings,
            rows,
            reach,
            oldest: 0,
        })
    }

    /// The bytes [`ConvHistory::new`] allocates for `layers` (saturating).
    pub(crate) fn bytes(layers: &[(usize, usize)]) -> u64 {
        let reach = layers.iter().map(|&(_, r)| r).max().unwrap_or(0);
        let widths = layers.iter().map(|&(w, _)| w as u64).sum::<u64>();
        widths.saturating_mul((reach + ROLLBACK) as u64 * 4)
    }

    /// Whether any layer has a short convolution.
    pub(crate) fn is_some(&self) -> bool {
        self.layers.iter().any(Option::is_some)
    }

    /// Bytes held.
    pub(crate) fn size_bytes(&self) -> usize {
        let values = self.layers.iter().flatten().map(|r| r.values.len());
        values.sum::<usize>() * 4
    }

    /// The longest a sequence of `len` positions can be cut to, at most `to`: `to` when the
    /// rings still hold the inputs the positions after it read, else 0 (start again).
    pub(crate) fn truncate(&self, len: usize, to: usize) -> usize {
        if to >= len || !self.is_some() {
            return to.min(len);
        }
        match to.saturating_sub(self.reach) >= self.oldest {
            true => to,
            false => 0,
        }
    }

    /// Positions each ring holds.
    pub(crate) fn held(&self) -> usize {
        self.rows
    }

    /// Forget everything (the sequence starts again at position 0).
    pub(crate) fn clear(&mut self) {
        self.oldest = 0;
    }

    /// Layer `layer`'s input at position `pos` (its channels), if the ring holds it; zeros
    /// before position 0 are the caller's.
    pub(crate) fn row(&self, layer: usize, pos: usize) -> &[f32] {
        let ring = self.layers[layer]
            .as_ref()
            .expect("a short-convolution layer");
        debug_assert!(pos >= self.oldest, "position {pos} left the ring");
        let at = (pos % self.rows) * ring.width;
        &ring.values[at..at + ring.width]
    }

    /// Store layer `layer`'s input of position `pos` (`row`: its channels). Every layer stores
    /// the same positions, in order.
    pub(crate) fn store(&mut self, layer: usize, pos: usize, row: &[f32]) {
        let rows = self.rows;
        let ring = self.layers[layer]
            .as_mut()
            .expect("a short-convolution layer");
        let at = (pos % rows) * ring.width;
        ring.values[at..at + ring.width].copy_from_slice(row);
        self.oldest = self.oldest.max((pos + 1).saturating_sub(rows));
    }

    /// The positions whose inputs a state file keeps for a sequence of `len` positions: the
    /// kernel's reach before `len`.
    pub(crate) fn saved(&self, len: usize) -> std::ops::Range<usize> {
        len.saturating_sub(self.reach)..len
    }

    /// The layers with a short convolution and their channels.
    pub(crate) fn widths(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        (self.layers.iter().enumerate()).filter_map(|(il, r)| Some((il, r.as_ref()?.width)))
    }

    /// After a state file restored positions `range` (and nothing before them).
    pub(crate) fn restored(&mut self, range: std::ops::Range<usize>) {
        self.oldest = range.start;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_goes_back_as_far_as_it_holds() {
        let mut h = ConvHistory::new(&[(0, 0), (2, 2)]).unwrap();
        let rows = h.rows;
        for pos in 0..rows + 10 {
            h.store(1, pos, &[pos as f32, -(pos as f32)]);
        }
        let len = rows + 10;
        // Oldest held: 10; cutting to 12 needs positions 10 and 11.
        assert_eq!(h.truncate(len, 12), 12);
        assert_eq!(h.truncate(len, 11), 0);
        assert_eq!(h.truncate(len, len + 3), len);
        assert_eq!(h.row(1, 12), &[12.0, -12.0]);
        // A short sequence goes back to its start.
        let mut short = ConvHistory::new(&[(1, 2)]).unwrap();
        for pos in 0..5 {
            short.store(0, pos, &[pos as f32]);
        }
        assert_eq!(short.truncate(5, 1), 1);
        assert_eq!(short.truncate(5, 0), 0);
    }
}
