//! Gemma 3n's parts beyond Gemma 4's (llama.cpp's `src/models/gemma3n.cpp`):
//! - **AltUp**: the hidden state is [`N_ALTUP`] streams per token. Stream 0 (the active one)
//!   starts as the scaled embedding, the others as its projections (`altup_proj`) rescaled to
//!   its magnitude. Each layer first *predicts* every stream as itself plus a token-dependent
//!   mix of all streams (coefficients `altup_predict_coef · router(stream 0)`); the block runs
//!   on the predicted stream 0, and its output *corrects* every stream by the innovation
//!   (output − predicted stream 0) times `1 + altup_correct_coef · router(output)`. At the end
//!   the inactive streams are projected back (`altup_unembd_proj`), rescaled to stream 0's
//!   magnitude, and the four are averaged.
//! - **LAuReL**: beside the attention, `h + norm(laurel_r · laurel_l · h)` of the block's
//!   normalised input; added to the attention's residual sum, the two × 1/√2.
//! - **Activation sparsity** in the first [`SPARSE_LAYERS`] feed-forwards: the gate's values
//!   below mean + [`SPARSITY_STD`] standard deviations of their row are cut to 0 (ReLU of the
//!   difference) before GELU.
//! - **Per-layer inputs** (computed as Gemma 4's) enter through the corrected stream 0 ×
//!   `altup_correct_scale` and are added to the inactive streams.
//!
//! llama.cpp fixes the stream count, the active stream and the sparsity (not read from the
//! file); so does this module, and it refuses files whose metadata says otherwise.

use super::config::Meta;
use super::gemma4::{PerLayerBlock, PerLayerRows};
use super::norm::Norm;
use super::ops;
use super::weights::Loader;
use super::ModelConfig;
use crate::backend::{Threads, Weight};
use crate::{fallible, Error, Result};

/// AltUp streams per token (llama.cpp's `n_altup`).
pub(crate) const N_ALTUP: usize = 4;
/// Layers whose feed-forward gate is sparsified (llama.cpp's `n_layer_sparsity`).
pub(crate) const SPARSE_LAYERS: usize = 10;
/// The cut-off in standard deviations above the mean (the 95th percentile of a normal law).
pub(crate) const SPARSITY_STD: f32 = 1.644_853_4;

/// The model-wide AltUp projections: `N_ALTUP − 1` square matrices each way.
pub(crate) struct AltUp {
    pub(crate) proj: Vec<Weight>,
    pub(crate) unembd: Vec<Weight>,
}

impl AltUp {
    /// The model-wide projections and the LAuReL rank (`laurel_l`'s rows), after checking the
    /// file's AltUp metadata ([`check_metadata`]).
    pub(crate) fn load(
        ld: &Loader<'_>,
        c: &ModelConfig,
        meta: &Meta<'_>,
    ) -> Result<(AltUp, usize)> {
        check_metadata(
            meta.count_or("altup.num_inputs", N_ALTUP)?,
            meta.count_or("altup.active_idx", 0)?,
        )?;
        if ld.rows("per_layer_token_embd.weight").is_none() {
            return Err(Error::InvalidModel(
                "Gemma 3n without per-layer inputs (per_layer_token_embd)".into(),
            ));
        }
        let d = c.n_embd;
        let rank = laurel_rank(ld);
        if rank == 0 || rank > d {
            return Err(Error::InvalidModel(format!(
                "LAuReL rank {rank} for width {d}"
            )));
        }
        let altup = AltUp {
            proj: ld.experts("altup_proj.weight", d, d, N_ALTUP - 1)?,
            unembd: ld.experts("altup_unembd_proj.weight", d, d, N_ALTUP - 1)?,
        };
        Ok((altup, rank))
    }
}

/// The LAuReL rank: `blk.0.laurel_l`'s rows (0 without it).
fn laurel_rank(ld: &Loader<'_>) -> usize {
    ld.rows("blk.0.laurel_l.weight").unwrap_or(0)
}

/// A layer's AltUp and LAuReL weights.
pub(crate) struct AltUpBlock {
    /// `N_ALTUP` rows of `n_embd`: the router's modalities (tanh of these products).
    pub(crate) router: Weight,
    pub(crate) router_norm: Norm,
    /// `N_ALTUP²` rows of `N_ALTUP`: row `j·N_ALTUP + k` weighs stream k in stream j's
    /// prediction.
    pub(crate) predict_coef: Vec<f32>,
    /// `N_ALTUP` rows of `N_ALTUP`.
    pub(crate) correct_coef: Vec<f32>,
    pub(crate) correct_scale: Vec<f32>,
    pub(crate) laurel_l: Weight,
    pub(crate) laurel_r: Weight,
    pub(crate) laurel_norm: Norm,
}

impl AltUpBlock {
    /// Block `i`'s weights (RMS norms of the model's epsilon).
    pub(crate) fn load(ld: &Loader<'_>, i: usize, c: &ModelConfig) -> Result<AltUpBlock> {
        let p = |s: &str| format!("blk.{i}.{s}");
        let (d, k, rank) = (c.n_embd, N_ALTUP, laurel_rank(ld));
        let norm =
            |name: &str| -> Result<Norm> { Ok(Norm::rms(ld.vector(&p(name), d)?, c.rms_eps)) };
        Ok(AltUpBlock {
            router: ld.matrix(&p("altup_router.weight"), d, k)?,
            router_norm: norm("altup_router_norm.weight")?,
            predict_coef: ld.values(&p("altup_predict_coef.weight"), &[k, k * k])?,
            correct_coef: ld.values(&p("altup_correct_coef.weight"), &[k, k])?,
            correct_scale: ld.vector(&p("altup_correct_scale.weight"), d)?,
            laurel_l: ld.matrix(&p("laurel_l.weight"), d, rank)?,
            laurel_r: ld.matrix(&p("laurel_r.weight"), rank, d)?,
            laurel_norm: norm("laurel_post_norm.weight")?,
        })
    }
}

/// The streams of a batch of `n` tokens: `N_ALTUP` blocks of `n` rows of `d` values, and
/// working buffers.
pub(crate) struct Streams {
    x: Vec<f32>,
    /// The next streams while [`Streams::predict`] computes them.
    next: Vec<f32>,
    /// Per token, the `N_ALTUP` predicted streams' mixing or correction coefficients.
    coefs: Vec<f32>,
    /// `n × d` working rows (normalised router inputs, LAuReL's output, projections).
    work: Vec<f32>,
    laurel: Vec<f32>,
    /// `n × rank` working rows (LAuReL's low-rank products).
    low: Vec<f32>,
    /// `n × N_ALTUP` router outputs.
    router: Vec<f32>,
    /// `n × d` per-layer input rows ([`Streams::correct`]).
    delta: Vec<f32>,
    n: usize,
    d: usize,
}

/// `sqrt(Σ v²)` of a row (ggml's `sqrt(sum_rows(sqr(x)))`).
fn magnitude(row: &[f32]) -> f32 {
    row.iter().map(|v| v * v).sum::<f32>().sqrt()
}

impl Streams {
    /// The streams of the `n` rows of `x` (`d` values each, the scaled embeddings): stream 0
    /// is `x`, stream j ≥ 1 is `proj[j−1] · x` rescaled to the magnitude of `x`.
    pub(crate) fn new(
        altup: &AltUp,
        x: &[f32],
        (n, d, rank): (usize, usize, usize),
        threads: &Threads,
    ) -> Result<Streams> {
        let zeros = |len: usize, what: &str| -> Result<Vec<f32>> {
            let mut v = Vec::new();
            fallible::resize(&mut v, len, 0.0, what)?;
            Ok(v)
        };
        let mut s = Streams {
            x: zeros(N_ALTUP * n * d, "the AltUp streams")?,
            next: Vec::new(),
            coefs: zeros(n * N_ALTUP * N_ALTUP, "the AltUp coefficients")?,
            work: zeros(n * d, "the AltUp working rows")?,
            laurel: zeros(n * d, "the LAuReL rows")?,
            low: zeros(n * rank, "the LAuReL low-rank rows")?,
            router: zeros(n * N_ALTUP, "the AltUp router outputs")?,
            delta: zeros(n * d, "the per-layer input rows")?,
            n,
            d,
        };
        s.x[..n * d].copy_from_slice(x);
        let (first, rest) = s.x.split_at_mut(n * d);
        for (w, stream) in altup.proj.iter().zip(rest.chunks_exact_mut(n * d)) {
            Weight::matmul_shared_input(&[w], first, n, &mut [&mut *stream], threads)?;
            rescale(stream, first, d);
        }
        Ok(s)
    }

    /// Stream `j` (`n` rows of `d`).
    fn stream(&self, j: usize) -> &[f32] {
        &self.x[j * self.n * self.d..][..self.n * self.d]
    }

    /// `coefs` (`per` values per token) = `table · modalities`, where the modalities are
    /// `tanh(router · (router_norm(rows) / d))`; `table` has `per` rows of `N_ALTUP`.
    fn coefficients(
        &mut self,
        block: &AltUpBlock,
        rows: Option<&[f32]>,
        (table, per): (&[f32], usize),
        threads: &Threads,
    ) -> Result<()> {
        let (n, d) = (self.n, self.d);
        let rows = rows.unwrap_or(&self.x[..n * d]);
        self.work.copy_from_slice(rows);
        let inv_d = 1.0 / d as f32;
        threads.for_each_rows(&mut self.work, d, |_, r| {
            block.router_norm.rows(r);
            r.iter_mut().for_each(|v| *v *= inv_d);
        });
        let mut modalities = [0.0f32; N_ALTUP];
        let m = &mut self.router[..];
        Weight::matmul_shared_input(&[&block.router], &self.work, n, &mut [&mut *m], threads)?;
        for (t, row) in m.chunks_exact(N_ALTUP).enumerate() {
            for (o, v) in modalities.iter_mut().zip(row) {
                *o = v.tanh();
            }
            let out = &mut self.coefs[t * per..][..per];
            for (o, w) in out.iter_mut().zip(table.chunks_exact(N_ALTUP)) {
                *o = ops::dot(w, &modalities);
            }
        }
        Ok(())
    }

    /// AltUp's prediction before layer `block`: every stream j becomes
    /// `x_j + Σ_k c[j·N_ALTUP + k]·x_k`; `active` receives the predicted stream 0.
    pub(crate) fn predict(
        &mut self,
        block: &AltUpBlock,
        active: &mut [f32],
        threads: &Threads,
    ) -> Result<()> {
        let per = N_ALTUP * N_ALTUP;
        self.coefficients(block, None, (&block.predict_coef, per), threads)?;
        let (n, d) = (self.n, self.d);
        let mut next = std::mem::take(&mut self.next);
        fallible::resize(&mut next, self.x.len(), 0.0, "the AltUp predictions")?;
        for t in 0..n {
            let c = &self.coefs[t * per..][..per];
            for j in 0..N_ALTUP {
                let out = &mut next[(j * n + t) * d..][..d];
                out.copy_from_slice(&self.x[(j * n + t) * d..][..d]);
                for k in 0..N_ALTUP {
                    let ck = c[j * N_ALTUP + k];
                    let xk = &self.x[(k * n + t) * d..][..d];
                    out.iter_mut().zip(xk).for_each(|(o, x)| *o += ck * x);
                }
            }
        }
        self.next = std::mem::replace(&mut self.x, next);
        active.copy_from_slice(self.stream(0));
        Ok(())
    }

    /// LAuReL of the block's normalised input `h`: `h + norm(laurel_r · laurel_l · h)`, kept
    /// for [`Streams::add_laurel`].
    pub(crate) fn laurel(
        &mut self,
        block: &AltUpBlock,
        h: &[f32],
        threads: &Threads,
    ) -> Result<()> {
        let n = self.n;
        let low = &mut self.low[..];
        Weight::matmul_shared_input(&[&block.laurel_l], h, n, &mut [&mut *low], threads)?;
        let out = &mut self.laurel[..];
        Weight::matmul_shared_input(&[&block.laurel_r], low, n, &mut [&mut *out], threads)?;
        block.laurel_norm.rows_par(out, threads);
        for (o, v) in self.laurel.iter_mut().zip(h) {
            *o += v;
        }
        Ok(())
    }

    /// `x = (x + laurel) / √2`: the attention's residual sum with LAuReL's output.
    pub(crate) fn add_laurel(&self, x: &mut [f32]) {
        let s = std::f32::consts::FRAC_1_SQRT_2;
        x.iter_mut()
            .zip(&self.laurel)
            .for_each(|(a, b)| *a = (*a + b) * s);
    }

    /// AltUp's correction after layer `il` (block output `y`): stream j becomes
    /// `x_j + (y − x_0)·(1 + c_j)`, then the per-layer input (from stream 0 ×
    /// `correct_scale`) is added to streams 1 and up.
    pub(crate) fn correct(
        &mut self,
        block: &AltUpBlock,
        y: &[f32],
        per_layer: (&PerLayerBlock, &PerLayerRows, usize),
        gate: &mut [f32],
        threads: &Threads,
    ) -> Result<()> {
        self.coefficients(block, Some(y), (&block.correct_coef, N_ALTUP), threads)?;
        let (n, d) = (self.n, self.d);
        let (first, rest) = self.x.split_at_mut(n * d);
        for t in 0..n {
            let (yt, x0) = (&y[t * d..][..d], &mut first[t * d..][..d]);
            for j in 1..N_ALTUP {
                let c = self.coefs[t * N_ALTUP + j] + 1.0;
                let out = &mut rest[((j - 1) * n + t) * d..][..d];
                for ((o, &a), &p) in out.iter_mut().zip(yt).zip(x0.iter()) {
                    *o += (a - p) * c;
                }
            }
            // Stream 0 last: the others read its prediction.
            let c = self.coefs[t * N_ALTUP] + 1.0;
            for (o, &a) in x0.iter_mut().zip(yt) {
                *o += (a - *o) * c;
            }
        }
        let (inputs_block, inputs, il) = per_layer;
        let scaled = &mut self.work;
        scaled.copy_from_slice(&self.x[..n * d]);
        for row in scaled.chunks_exact_mut(d) {
            row.iter_mut()
                .zip(&block.correct_scale)
                .for_each(|(v, s)| *v *= s);
        }
        let delta = &mut self.delta[..];
        inputs_block.delta(scaled, inputs, (il, n), (gate, &mut *delta), threads)?;
        for stream in self.x[n * d..].chunks_exact_mut(n * d) {
            stream
                .iter_mut()
                .zip(delta.iter())
                .for_each(|(a, b)| *a += b);
        }
        Ok(())
    }

    /// The streams merged back into `x` (`n` rows of `d`): streams 1 and up projected by
    /// `unembd` and rescaled to stream 0's magnitude, then the four averaged.
    pub(crate) fn merge(&mut self, altup: &AltUp, x: &mut [f32], threads: &Threads) -> Result<()> {
        let (n, d) = (self.n, self.d);
        let (first, rest) = self.x.split_at(n * d);
        x.copy_from_slice(first);
        for (w, stream) in altup.unembd.iter().zip(rest.chunks_exact(n * d)) {
            let out = &mut self.work[..];
            Weight::matmul_shared_input(&[w], stream, n, &mut [&mut *out], threads)?;
            rescale(out, first, d);
            x.iter_mut().zip(out.iter()).for_each(|(a, b)| *a += b);
        }
        let s = 1.0 / N_ALTUP as f32;
        x.iter_mut().for_each(|v| *v *= s);
        Ok(())
    }
}

/// Each row of `rows` × `‖target row‖ / ‖row‖` (ggml: `x · target_magnitude / magnitude`).
fn rescale(rows: &mut [f32], target: &[f32], d: usize) {
    for (row, t) in rows.chunks_exact_mut(d).zip(target.chunks_exact(d)) {
        let (want, have) = (magnitude(t), magnitude(row));
        row.iter_mut().for_each(|v| *v = *v * want / have);
    }
}

/// Gemma 3n's activation sparsity of one row of gate values: `relu(g − (mean + k·std))`,
/// with the sample standard deviation (n − 1).
pub(crate) fn sparsify(g: &mut [f32]) {
    let n = g.len();
    if n < 2 {
        return;
    }
    let mean = g.iter().sum::<f32>() / n as f32;
    let var = g.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / (n - 1) as f32;
    let cutoff = mean + var.sqrt() * SPARSITY_STD;
    g.iter_mut().for_each(|v| *v = (*v - cutoff).max(0.0));
}

/// Checks the file's AltUp metadata against what llama.cpp (and this module) fix.
fn check_metadata(num_inputs: usize, active: usize) -> Result<()> {
    if num_inputs != N_ALTUP || active != 0 {
        return Err(Error::InvalidModel(format!(
            "Gemma 3n with {num_inputs} AltUp inputs, active {active}: only {N_ALTUP} with the \
             first active are supported (as llama.cpp)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_altup_layouts_are_refused() {
        assert!(check_metadata(4, 0).is_ok());
        assert!(matches!(check_metadata(3, 0), Err(Error::InvalidModel(_))));
        assert!(matches!(check_metadata(4, 1), Err(Error::InvalidModel(_))));
    }

    #[test]
    fn sparsity_keeps_what_lies_beyond_the_cut_off() {
        // Mean 10/7, sample variance 100/7 (n − 1 = 6): the cut-off is ≈ 7.65.
        let x = [0.0f32, 0.0, 0.0, 0.0, 0.0, 0.0, 10.0];
        let mean = 10.0f32 / 7.0;
        let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / 6.0;
        let cut = mean + var.sqrt() * SPARSITY_STD;
        assert!((cut - 7.65).abs() < 0.01, "{cut}");
        let mut g = x;
        sparsify(&mut g);
        assert_eq!(g[..6], [0.0; 6]);
        assert_eq!(g[6], 10.0 - cut);
    }
}
