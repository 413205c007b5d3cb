//! What the recurrent mixers with matrix states (Qwen 3.5's delta nets, `delta_net.rs`;
//! Granite 4 hybrid's Mamba-2 layers, `mamba2.rs`) share: their working buffers, running
//! every head of every sequence over its tokens on the threads, and reading the heads'
//! outputs back in token order.

use std::ops::Range;

use super::batch::SeqTokens;
use crate::backend::Threads;

/// Working buffers of a recurrent mixer for the `n` rows of a batch.
pub(crate) struct MixerBuffers<'a> {
    /// The input projection's rows (delta net: `attn_qkv·h`).
    pub(crate) proj_in: &'a mut [f32],
    /// The convolution's output: `n` rows of its channels.
    pub(crate) conv: &'a mut [f32],
    /// The gated output (delta net: the gate `z` first), `n` rows of the mixer's width.
    pub(crate) gated: &'a mut [f32],
    /// The heads' outputs, head after head within each sequence ([`run_heads`]): `n` rows
    /// of that width.
    pub(crate) heads: &'a mut [f32],
    /// Per-head values of each token (delta net: `β` and `g`; Mamba-2: the time steps).
    pub(crate) per_head: &'a mut [f32],
    /// The layer's output: `n` rows of `n_embd`.
    pub(crate) proj: &'a mut [f32],
}

/// Run every head of every sequence of `seqs` over the sequence's tokens in layer `il`, the
/// heads shared out among the threads: `f(rows, head, state, next, out)` gets the
/// sequence's rows in the batch, the head's current state (`size` values, from
/// [`MatrixStates::pair`](super::matrix_state::MatrixStates::pair)), where its next state
/// goes, and where its outputs go: `dim` values per token, in `outs` (rows of the batch,
/// each sequence's part head after head).
pub(crate) fn run_heads(
    seqs: &mut [SeqTokens<'_>],
    il: usize,
    (size, dim): (usize, usize),
    outs: &mut [f32],
    threads: &Threads,
    f: impl Fn(Range<usize>, usize, &[f32], &mut [f32], &mut [f32]) + Sync,
) {
    let mut first = 0;
    for seq in seqs.iter_mut() {
        let ns = seq.tokens.len();
        let rows = first..first + ns;
        let (state, next) = seq.cache.matrix_states_mut().pair(il);
        let heads = next.len() / size.max(1);
        let out = &mut outs[first * heads * dim..(first + ns) * heads * dim];
        threads.for_each_rows2(next, size, out, ns * dim, |h0, next, out| {
            let per_head = next
                .chunks_exact_mut(size)
                .zip(out.chunks_exact_mut(ns * dim));
            for (i, (next, out)) in per_head.enumerate() {
                let head = h0 + i;
                f(rows.clone(), head, &state[head * size..][..size], next, out);
            }
        });
        first += ns;
    }
}

/// Visit the outputs [`run_heads`] wrote into `outs` (`heads` heads of `dim` values per
/// row) back in token order: `f(row, head, values)` with `row` the batch row.
pub(crate) fn token_order(
    seqs: &[SeqTokens<'_>],
    outs: &[f32],
    (heads, dim): (usize, usize),
    mut f: impl FnMut(usize, usize, &[f32]),
) {
    let mut first = 0;
    for seq in seqs {
        let ns = seq.tokens.len();
        let part = &outs[first * heads * dim..(first + ns) * heads * dim];
        for t in 0..ns {
            for head in 0..heads {
                f(first + t, head, &part[(head * ns + t) * dim..][..dim]);
            }
        }
        first += ns;
    }
}
