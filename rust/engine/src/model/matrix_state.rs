//! The recurrent state of the layers that keep matrices: Qwen 3.5's gated delta nets (one
//! `head_dim × head_dim` matrix per value head) and Granite 4 hybrid's Mamba-2 layers (one
//! `d_state` vector per channel), which every token updates.
//!
//! Each layer keeps two copies. A forward pass reads the current one and writes its result
//! into the other, which then becomes current: so after a pass the previous copy is the state
//! before it, a checkpoint that costs no copying. A sequence can go back to that checkpoint
//! (the position where the last pass started) and evaluate again from there, e.g. after a
//! speculative draft whose last tokens were rejected; it cannot go back to any other position
//! but 0. (llama.cpp keeps a state per rolled-back token instead; at Qwen 3.5 2B's 18 MiB per
//! state, 64 of them would cost more than a long KV cache.)

use crate::{fallible, Result};

/// Every matrix-state layer's state of one sequence, current and checkpoint.
#[derive(Default)]
pub(crate) struct MatrixStates {
    /// Per layer (empty for layers without such a state): the two copies.
    layers: Vec<[Vec<f32>; 2]>,
    /// Which copy is current.
    current: usize,
    /// The position whose state the other copy holds, if it still does.
    checkpoint: Option<usize>,
}

impl MatrixStates {
    /// Zeroed states of `layers[i]` values for layer `i` (0: no such state).
    pub(crate) fn new(layers: &[usize]) -> Result<Self> {
        let mut all = Vec::with_capacity(layers.len());
        for &len in layers {
            let mut pair = [Vec::new(), Vec::new()];
            for copy in &mut pair {
                fallible::resize(copy, len, 0.0f32, "the recurrent layers' state")?;
            }
            all.push(pair);
        }
        Ok(MatrixStates {
            layers: all,
            current: 0,
            checkpoint: None,
        })
    }

    /// The bytes [`MatrixStates::new`] allocates for `layers` (saturating).
    pub(crate) fn bytes(layers: &[usize]) -> u64 {
        let values = layers
            .iter()
            .map(|&l| l as u64)
            .fold(0u64, u64::saturating_add);
        values.saturating_mul(2 * 4)
    }

    /// Whether any layer has such a state.
    pub(crate) fn is_some(&self) -> bool {
        self.layers.iter().any(|l| !l[0].is_empty())
    }

    /// Bytes held.
    pub(crate) fn size_bytes(&self) -> usize {
        self.layers
            .iter()
            .map(|l| l[0].len() + l[1].len())
            .sum::<usize>()
            * 4
    }

    /// The longest a sequence of `len` positions can be cut to, at most `to`: `to` when it
    /// keeps everything, the checkpoint when that is not after `to`, else 0.
    pub(crate) fn reach(&self, len: usize, to: usize) -> usize {
        if to >= len || !self.is_some() {
            return to.min(len);
        }
        match self.checkpoint {
            Some(at) if at <= to => at,
            _ => 0,
        }
    }

    /// Go back to position `to` of a sequence of `len` ([`MatrixStates::reach`] gave it): the
    /// checkpoint's state becomes current, or at 0 every state is cleared.
    pub(crate) fn go_back(&mut self, len: usize, to: usize) {
        if to >= len || !self.is_some() {
            return;
        }
        if to == 0 {
            for pair in &mut self.layers {
                pair[self.current].fill(0.0);
            }
        } else {
            debug_assert_eq!(self.checkpoint, Some(to), "only the checkpoint is held");
            self.current = 1 - self.current;
        }
        self.checkpoint = None;
    }

    /// Layer `layer`'s current state and the other copy to write the next one into. The
    /// other copy stops being a checkpoint.
    pub(crate) fn pair(&mut self, layer: usize) -> (&[f32], &mut [f32]) {
        self.checkpoint = None;
        let [a, b] = &mut self.layers[layer];
        match self.current {
            0 => (a, b),
            _ => (b, a),
        }
    }

    /// After a forward pass that started at position `start` wrote every layer's next
    /// state: those become current, and the states at `start` the checkpoint.
    pub(crate) fn advance(&mut self, start: usize) {
        if self.is_some() {
            self.current = 1 - self.current;
            self.checkpoint = Some(start);
        }
    }

    /// The layers with such a state, and their current states.
    pub(crate) fn states(&self) -> impl Iterator<Item = &[f32]> + '_ {
        let current = self.current;
        (self.layers.iter())
            .filter(|l| !l[0].is_empty())
            .map(move |l| &l[current][..])
    }

    /// The current states, writable (a restored session's), in the order of
    /// [`MatrixStates::states`]; the checkpoint is dropped.
    pub(crate) fn states_mut(&mut self) -> impl Iterator<Item = &mut [f32]> + '_ {
        self.checkpoint = None;
        let current = self.current;
        (self.layers.iter_mut())
            .filter(|l| !l[0].is_empty())
            .map(move |l| &mut l[current][..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checkpoint_is_the_state_before_the_last_pass() {
        let mut s = MatrixStates::new(&[0, 2]).unwrap();
        assert_eq!(s.reach(0, 0), 0);
        // A pass over positions 0..3 writes [3, 3].
        let (cur, next) = s.pair(1);
        assert_eq!(cur, &[0.0, 0.0]);
        next.fill(3.0);
        s.advance(0);
        // A pass over 3..5 writes [5, 5].
        s.pair(1).1.fill(5.0);
        s.advance(3);
        assert_eq!(s.reach(5, 5), 5);
        assert_eq!(s.reach(5, 4), 3);
        assert_eq!(s.reach(5, 2), 0);
        s.go_back(5, 3);
        assert_eq!(s.states().next().unwrap(), &[3.0, 3.0]);
        // Only one step back is held.
        assert_eq!(s.reach(3, 2), 0);
        s.go_back(3, 0);
        assert_eq!(s.states().next().unwrap(), &[0.0, 0.0]);
        assert_eq!(MatrixStates::bytes(&[0, 2]), 16);
        assert_eq!(s.size_bytes(), 16);
    }
}
