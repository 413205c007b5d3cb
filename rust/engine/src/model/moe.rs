//! Mixture-of-experts feed-forwards (Qwen 3 MoE, Granite MoE, Gemma 4 26B A4B), as llama.cpp's
//! `build_moe_ffn` with softmax gating: a router scores every expert per token, the `n_used`
//! most probable run (gated feed-forwards: SwiGLU, or GeGLU for Gemma 4), and their outputs are
//! summed weighted by their probabilities (renormalised over the chosen ones, optionally
//! scaled), in the order of the choice.
//!
//! Experts are byte ranges of the file's 3-D expert tensors (one weight per expert, nothing
//! copied); each expert runs once per forward pass on the tokens routed to it.

use super::ffn::FfnActivation;
use super::ops;
use crate::backend::{Threads, Weight};
use crate::{fallible, Result};

/// One expert (or the shared expert): a SwiGLU feed-forward.
pub(crate) struct Expert {
    pub(crate) gate: Weight,
    pub(crate) up: Weight,
    pub(crate) down: Weight,
}

/// A mixture-of-experts feed-forward.
pub(crate) struct Moe {
    /// Scores every expert: `n_expert` rows of `n_embd`.
    pub(crate) router: Weight,
    pub(crate) experts: Vec<Expert>,
    /// Experts each token uses.
    pub(crate) n_used: usize,
    /// Hidden size of one expert.
    pub(crate) n_ff: usize,
    /// Renormalise the chosen experts' probabilities to sum to 1.
    pub(crate) norm_weights: bool,
    /// Multiply the weights by this (`expert_weights_scale`).
    pub(crate) scale: Option<f32>,
    /// An expert every token uses besides the routed ones (Granite MoE shared), unweighted.
    pub(crate) shared: Option<(Expert, usize)>,
    /// The experts' activation.
    pub(crate) activation: FfnActivation,
    /// Each expert's output multiplier (Gemma 4's `ffn_down_exps.scale`), before its weight.
    pub(crate) down_scale: Option<Vec<f32>>,
}

/// Smallest sum the renormalisation divides by (the smallest normal f16, as llama.cpp).
const MIN_WEIGHT_SUM: f32 = 6.103_515_6e-5;

impl Expert {
    fn weights(&self) -> [&Weight; 3] {
        [&self.gate, &self.up, &self.down]
    }

    /// `out = down(act(gate(x)) * up(x))` for `n` rows of `x`; `hidden` of `n × n_ff` twice.
    fn run(
        &self,
        x: &[f32],
        n: usize,
        (g, u): (&mut [f32], &mut [f32]),
        out: &mut [f32],
        (activation, threads): (FfnActivation, &Threads),
    ) -> Result<()> {
        Weight::matmul_shared_input(&[&self.gate, &self.up], x, n, &mut [g, u], threads)?;
        match activation {
            FfnActivation::Silu => ops::silu_mul(g, u),
            FfnActivation::GeluTanh => ops::gelu_mul(g, u),
        }
        self.down.matmul(g, n, out, threads)
    }
}

impl Moe {
    /// Each token's chosen experts and their weights, `n_used` per token, most probable first,
    /// from the router's input `h`.
    fn route(&self, h: &[f32], n: usize, threads: &Threads) -> Result<Vec<(usize, f32)>> {
        let n_expert = self.experts.len();
        let mut logits = Vec::new();
        fallible::resize(&mut logits, n * n_expert, 0.0, "the router's scores")?;
        self.router.matmul(h, n, &mut logits, threads)?;
        let mut chosen = Vec::with_capacity(n * self.n_used);
        let mut order: Vec<usize> = Vec::with_capacity(n_expert);
        for probs in logits.chunks_exact_mut(n_expert) {
            ops::softmax(probs);
            order.clear();
            order.extend(0..n_expert);
            // Descending probability; ties by index.
            order.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]).then(a.cmp(&b)));
            let top = &order[..self.n_used];
            let sum: f32 = top.iter().map(|&e| probs[e]).sum();
            for &e in top {
                let mut w = probs[e];
                if self.norm_weights {
                    w /= sum.max(MIN_WEIGHT_SUM);
                }
                if let Some(s) = self.scale {
                    w *= s;
                }
                chosen.push((e, w));
            }
        }
        Ok(chosen)
    }

    /// The feed-forward of `n` rows of `h` (`d` values each) into `out`, routed by `route_by`
    /// (the rows the router scores: `h`, or Gemma 4's own input).
    pub(crate) fn forward(
        &self,
        (h, route_by): (&[f32], &[f32]),
        n: usize,
        d: usize,
        out: &mut [f32],
        threads: &Threads,
    ) -> Result<()> {
        let chosen = self.route(route_by, n, threads)?;
        let run = (self.activation, threads);
        let k = self.n_used;
        // Each (token, slot)'s expert output, summed in slot order at the end.
        let mut parts = Vec::new();
        fallible::resize(&mut parts, n * k * d, 0.0f32, "the experts' outputs")?;
        let (mut x, mut y) = (Vec::new(), Vec::new());
        let (mut g, mut u) = (Vec::new(), Vec::new());
        let mut rows = Vec::new();
        for (e, expert) in self.experts.iter().enumerate() {
            // The (token, slot) pairs routed to expert `e`.
            rows.clear();
            rows.extend(
                chosen
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| c.0 == e)
                    .map(|(i, _)| i),
            );
            if rows.is_empty() {
                continue;
            }
            let m = rows.len();
            fallible::resize(&mut x, m * d, 0.0, "an expert's input")?;
            for (dst, &i) in x.chunks_exact_mut(d).zip(&rows) {
                let t = i / k;
                dst.copy_from_slice(&h[t * d..(t + 1) * d]);
            }
            fallible::resize(&mut g, m * self.n_ff, 0.0, "an expert's activations")?;
            fallible::resize(&mut u, m * self.n_ff, 0.0, "an expert's activations")?;
            fallible::resize(&mut y, m * d, 0.0, "an expert's output")?;
            expert.run(&x, m, (&mut g, &mut u), &mut y, run)?;
            if let Some(scale) = &self.down_scale {
                y.iter_mut().for_each(|v| *v *= scale[e]);
            }
            for (src, &i) in y.chunks_exact(d).zip(&rows) {
                let w = chosen[i].1;
                for (p, v) in parts[i * d..(i + 1) * d].iter_mut().zip(src) {
                    *p = v * w;
                }
            }
        }
        for (row, slots) in out.chunks_exact_mut(d).zip(parts.chunks_exact(k * d)) {
            row.copy_from_slice(&slots[..d]);
            for slot in slots[d..].chunks_exact(d) {
                row.iter_mut().zip(slot).for_each(|(o, v)| *o += v);
            }
        }
        if let Some((shared, n_ff)) = &self.shared {
            fallible::resize(&mut g, n * n_ff, 0.0, "the shared expert's activations")?;
            fallible::resize(&mut u, n * n_ff, 0.0, "the shared expert's activations")?;
            fallible::resize(&mut y, n * d, 0.0, "the shared expert's output")?;
            shared.run(h, n, (&mut g, &mut u), &mut y, run)?;
            out.iter_mut().zip(&y).for_each(|(o, v)| *o += v);
        }
        Ok(())
    }

    /// Bytes of weights one token reads: the router, `n_used` of the experts (their average),
    /// the shared expert.
    pub(crate) fn bytes_per_token(&self) -> u64 {
        let expert = |e: &Expert| {
            e.weights()
                .iter()
                .map(|w| w.bytes().len() as u64)
                .sum::<u64>()
        };
        let all: u64 = self.experts.iter().map(expert).sum();
        let routed = all * self.n_used as u64 / self.experts.len().max(1) as u64;
        self.router.bytes().len() as u64
            + routed
            + self.shared.as_ref().map_or(0, |(e, _)| expert(e))
    }

    /// Every weight (router, experts, shared expert).
    pub(crate) fn weights(&self) -> impl Iterator<Item = &Weight> {
        std::iter::once(&self.router)
            .chain(self.experts.iter().flat_map(Expert::weights))
            .chain(self.shared.iter().flat_map(|(e, _)| e.weights()))
    }
}
