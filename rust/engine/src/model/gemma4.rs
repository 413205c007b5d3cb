//! Gemma 4's parts beyond the shared block (llama.cpp's `src/models/gemma4.cpp`): per-layer
//! inputs (E2B, E4B) and the feed-forward of its mixture-of-experts model (26B A4B), where a
//! dense feed-forward and the experts run side by side.

use super::embedding::Embedding;
use super::ffn::Dense;
use super::moe::Moe;
use super::norm::Norm;
use super::ops;
use crate::backend::{Threads, Weight};
use crate::{fallible, Result};

/// Per-layer inputs: for each token, `width` values per layer from the token's row of
/// `token_embd` (× √width) and a projection of its scaled embedding (× 1/√n_embd, each
/// layer's part RMS-normed by `norm`), added and × 1/√2.
pub(crate) struct PerLayerInputs {
    pub(crate) token_embd: Embedding,
    pub(crate) model_proj: Weight,
    pub(crate) norm: Norm,
    pub(crate) width: usize,
}

/// The per-layer inputs of a batch: `n` rows of `width` values per layer.
pub(crate) struct PerLayerRows {
    rows: Vec<f32>,
    width: usize,
    n_layer: usize,
}

impl PerLayerInputs {
    /// The inputs of the `n` tokens `tokens` (of a model of `n_layer` layers) whose scaled
    /// embeddings are `x`.
    pub(crate) fn rows(
        &self,
        tokens: impl Iterator<Item = u32>,
        x: &[f32],
        (n, n_layer): (usize, usize),
        threads: &Threads,
    ) -> Result<PerLayerRows> {
        let all = self.width * n_layer;
        let mut rows = Vec::new();
        fallible::resize(&mut rows, n * all, 0.0, "the per-layer inputs")?;
        Weight::matmul_shared_input(&[&self.model_proj], x, n, &mut [&mut rows], threads)?;
        let n_embd = x.len() / n.max(1);
        let proj_scale = 1.0 / (n_embd as f32).sqrt();
        let embd_scale = (self.width as f32).sqrt();
        let sum_scale = 1.0 / 2f32.sqrt();
        let mut embd = vec![0f32; all];
        for (row, id) in rows.chunks_exact_mut(all).zip(tokens) {
            row.iter_mut().for_each(|v| *v *= proj_scale);
            self.norm.rows(row);
            self.token_embd.row(id, &mut embd)?;
            for (a, b) in row.iter_mut().zip(&embd) {
                *a = (*a + b * embd_scale) * sum_scale;
            }
        }
        Ok(PerLayerRows {
            rows,
            width: self.width,
            n_layer,
        })
    }
}

/// A block's use of its per-layer input: `x += norm(proj · (gelu(gate · x) ⊙ input))`.
pub(crate) struct PerLayerBlock {
    pub(crate) gate: Weight,
    pub(crate) proj: Weight,
    pub(crate) post_norm: Norm,
}

impl PerLayerBlock {
    /// Add layer `il`'s per-layer input to the `n` rows of `x` (`d` values each); `g` (at least
    /// `n × width`) and `proj` (`n × d`) are working buffers.
    pub(crate) fn add(
        &self,
        x: &mut [f32],
        inputs: &PerLayerRows,
        (il, n, d): (usize, usize, usize),
        (g, proj): (&mut [f32], &mut [f32]),
        threads: &Threads,
    ) -> Result<()> {
        let proj = &mut proj[..n * d];
        self.delta(x, inputs, (il, n), (g, proj), threads)?;
        threads.for_each_rows2(x, d, proj, d, |_, x, p| {
            x.iter_mut().zip(p.iter()).for_each(|(a, b)| *a += b);
        });
        Ok(())
    }

    /// `proj = norm(proj · (gelu(gate · x) ⊙ input))` for the `n` rows of `x` and layer
    /// `il`'s per-layer inputs; `g` (at least `n × width`) is a working buffer, `proj` holds
    /// `n` rows of the model's width.
    pub(crate) fn delta(
        &self,
        x: &[f32],
        inputs: &PerLayerRows,
        (il, n): (usize, usize),
        (g, proj): (&mut [f32], &mut [f32]),
        threads: &Threads,
    ) -> Result<()> {
        let width = inputs.width;
        let all = width * inputs.n_layer;
        let g = &mut g[..n * width];
        Weight::matmul_shared_input(&[&self.gate], x, n, &mut [&mut *g], threads)?;
        for (t, g) in g.chunks_exact_mut(width).enumerate() {
            ops::gelu(g);
            let input = &inputs.rows[t * all + il * width..][..width];
            g.iter_mut().zip(input).for_each(|(a, b)| *a *= b);
        }
        Weight::matmul_shared_input(&[&self.proj], g, n, &mut [&mut *proj], threads)?;
        self.post_norm.rows_par(proj, threads);
        Ok(())
    }
}

/// Gemma 4's mixture-of-experts feed-forward: the dense feed-forward (input: the layer's
/// `ffn_norm`; output normed by `post_ffw_norm_1`) plus the experts (input normed by
/// `pre_ffw_norm_2`, output by `post_ffw_norm_2`), routed by the block's input RMS-normed,
/// × 1/√n_embd and × `router_scale` (`ffn_gate_inp.scale`).
pub(crate) struct DenseAndExperts {
    pub(crate) dense: Dense,
    pub(crate) dense_norm: Norm,
    pub(crate) moe: Moe,
    pub(crate) moe_in_norm: Norm,
    pub(crate) moe_out_norm: Norm,
    /// An RMS norm with weights of 1 (the router's input norm).
    pub(crate) router_norm: Norm,
    pub(crate) router_scale: Vec<f32>,
}

impl DenseAndExperts {
    /// `proj` holds the dense feed-forward's output for the `n` rows of `x` (the block's
    /// input, `d` values each); normalise it and add the experts'.
    pub(crate) fn add_experts(
        &self,
        x: &[f32],
        proj: &mut [f32],
        (n, d): (usize, usize),
        threads: &Threads,
    ) -> Result<()> {
        let len = n * d;
        let (mut h, mut route, mut experts) = (Vec::new(), Vec::new(), Vec::new());
        for buf in [&mut h, &mut route, &mut experts] {
            fallible::resize(buf, len, 0.0, "the experts' inputs")?;
        }
        let scale = 1.0 / (d as f32).sqrt();
        for ((x, h), r) in x
            .chunks_exact(d)
            .zip(h.chunks_exact_mut(d))
            .zip(route.chunks_exact_mut(d))
        {
            h.copy_from_slice(x);
            self.moe_in_norm.rows(h);
            r.copy_from_slice(x);
            self.router_norm.rows(r);
            for (v, s) in r.iter_mut().zip(&self.router_scale) {
                *v = *v * scale * s;
            }
        }
        self.moe
            .forward((&h, &route), n, d, &mut experts, threads)?;
        threads.for_each_rows2(&mut proj[..len], d, &mut experts, d, |_, p, e| {
            self.dense_norm.rows(p);
            self.moe_out_norm.rows(e);
            p.iter_mut().zip(e.iter()).for_each(|(a, b)| *a += b);
        });
        Ok(())
    }
}
