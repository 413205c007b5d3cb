//! The Mamba-2 layer of Granite 4 hybrid models, in its layers of 0 KV heads (llama.cpp's
//! `build_mamba2_layer` in `src/models/mamba-base.cpp` and `ggml_ssm_scan`).
//!
//! For the normalised input `h` of a token, `ssm_in·h` gives the gate `z` (`inner` values),
//! the channels `x`, `B` and `C` (`inner`, then `state` per group twice) and one time step per
//! head. `x`, `B` and `C` go through a causal convolution (kernel `ssm_conv1d`, its optional
//! bias, inputs of earlier positions from the sequence's
//! [`ConvHistory`](super::conv_state::ConvHistory)) and SiLU. Each channel `i` of head `h`
//! (group `g = h / (heads / groups)`) keeps a state `s` of `state` values (the sequence's
//! [`MatrixStates`](super::matrix_state::MatrixStates)); per token, with `Δ = softplus(dt +
//! ssm_dt.bias)`:
//!
//! ```text
//! s ← s · e^{Δ·A} + B_g · x_i · Δ;   y_i = s · C_g + D · x_i
//! ```
//!
//! (`A = ssm_a`, −e^{A_log}, and `D = ssm_d` per head). The output `y · silu(z)` is RMS-normed
//! per group of `inner / groups` channels (`ssm_norm`) and projected by `ssm_out`. Heads are
//! shared out among the threads, each computed by one thread in a fixed order, so the result
//! does not depend on the thread count.

use super::batch::SeqTokens;
use super::config::{Mamba2Shape, ModelConfig};
use super::mixer::{run_heads, token_order, MixerBuffers};
use super::norm::Norm;
use super::ops;
use super::short_conv::{convolve, load_kernel};
use super::weights::Loader;
use crate::backend::{Threads, Weight};
use crate::Result;

/// One Mamba-2 layer's weights besides its input (`ssm_in`) and output (`ssm_out`)
/// projections, which the layer holds as its `wq` and `wo`.
pub(crate) struct Mamba2 {
    shape: Mamba2Shape,
    /// The convolution kernel (see [`load_kernel`]) and its bias.
    kernel: Vec<f32>,
    conv_bias: Option<Vec<f32>>,
    /// `ssm_dt.bias`, `ssm_a` and `ssm_d`, per head.
    dt_bias: Vec<f32>,
    a: Vec<f32>,
    d: Vec<f32>,
    /// `ssm_norm`: RMS norms of each group of channels.
    norm: Norm,
}

impl Mamba2 {
    /// Layer `i`'s Mamba-2 mixer with its `ssm_in` and `ssm_out`.
    pub(crate) fn load(
        ld: &Loader<'_>,
        i: usize,
        c: &ModelConfig,
        shape: Mamba2Shape,
    ) -> Result<(Self, Weight, Weight)> {
        let p = |s: &str| format!("blk.{i}.{s}");
        let (d, heads, inner) = (c.n_embd, shape.heads, shape.inner);
        let channels = shape.conv_channels();
        let group = inner / shape.groups;
        let mamba = Mamba2 {
            kernel: load_kernel(ld, &p("ssm_conv1d.weight"), shape.conv_len, channels)?,
            conv_bias: ld.opt_vector(&p("ssm_conv1d.bias"), channels)?,
            dt_bias: ld.vector(&p("ssm_dt.bias"), heads)?,
            a: ld.values(&p("ssm_a"), &[1, heads])?,
            d: ld.values(&p("ssm_d"), &[1, heads])?,
            norm: Norm {
                group,
                ..Norm::rms(
                    ld.values(&p("ssm_norm.weight"), &[group, shape.groups])?,
                    c.rms_eps,
                )
            },
            shape,
        };
        Ok((
            mamba,
            ld.matrix(&p("ssm_in.weight"), d, shape.in_proj())?,
            ld.matrix(&p("ssm_out.weight"), inner, d)?,
        ))
    }

    /// The layer `il` for the `n` normalised rows `h` of `seqs` (of `d` values): `proj` as
    /// described in the module's documentation; each sequence's convolution inputs go into
    /// its history and its states into the copies
    /// [`MatrixStates::pair`](super::matrix_state::MatrixStates::pair) gives.
    pub(crate) fn forward(
        &self,
        (in_w, out_w): (&Weight, &Weight),
        (il, n, d): (usize, usize, usize),
        h: &[f32],
        seqs: &mut [SeqTokens<'_>],
        b: MixerBuffers<'_>,
        threads: &Threads,
    ) -> Result<()> {
        let sh = self.shape;
        let (width, channels, inner) = (sh.in_proj(), sh.conv_channels(), sh.inner);
        let zxbc = &mut b.proj_in[..n * width];
        let conv = &mut b.conv[..n * channels];
        let (heads, y) = (&mut b.heads[..n * inner], &mut b.gated[..n * inner]);
        let dt = &mut b.per_head[..n * sh.heads];
        Weight::matmul_shared_input(&[in_w], &h[..n * d], n, &mut [&mut *zxbc], threads)?;
        // x, B and C start after z in each row.
        let input = &zxbc[inner..];
        convolve(
            (&self.kernel, sh.conv_len),
            (il, channels),
            (input, width),
            seqs,
            conv,
        );
        threads.for_each_rows(conv, channels, |_, rows| {
            ops::widest(
                #[inline(always)]
                || {
                    for row in rows.chunks_exact_mut(channels) {
                        if let Some(bias) = &self.conv_bias {
                            row.iter_mut().zip(bias).for_each(|(v, b)| *v += b);
                        }
                        for v in row.iter_mut() {
                            *v /= 1.0 + ops::exp(-*v);
                        }
                    }
                },
            );
        });
        for (t, steps) in dt.chunks_exact_mut(sh.heads).enumerate() {
            let raw = &zxbc[t * width + inner + channels..][..sh.heads];
            for ((step, &r), bias) in steps.iter_mut().zip(raw).zip(&self.dt_bias) {
                let v = r + bias;
                *step = if v > 20.0 { v } else { (1.0 + v.exp()).ln() };
            }
        }
        let head_dim = inner / sh.heads;
        let per_group = sh.heads / sh.groups;
        let (conv, dt) = (&*conv, &*dt);
        let size = head_dim * sh.state;
        run_heads(
            seqs,
            il,
            (size, head_dim),
            heads,
            threads,
            |rows, head, state, next, out| {
                let group = head / per_group;
                let scan = Scan {
                    conv: &conv[rows.start * channels..rows.end * channels],
                    channels,
                    x: head * head_dim,
                    b: inner + group * sh.state,
                    c: inner + (sh.groups + group) * sh.state,
                    dt: &dt[rows.start * sh.heads..rows.end * sh.heads],
                    head,
                    heads: sh.heads,
                    a: self.a[head],
                    d: self.d[head],
                    head_dim,
                    state: sh.state,
                };
                scan.run(state, next, out);
            },
        );
        // y · silu(z), back in token order, then the group norms.
        token_order(seqs, heads, (sh.heads, head_dim), |row, head, o| {
            let at = row * inner + head * head_dim;
            let z = &zxbc[row * width + head * head_dim..][..head_dim];
            for ((y, &o), &z) in y[at..at + head_dim].iter_mut().zip(o).zip(z) {
                *y = z / (1.0 + ops::exp(-z)) * o;
            }
        });
        self.norm.rows_par(y, threads);
        Weight::matmul_shared_input(&[out_w], y, n, &mut [&mut b.proj[..n * d]], threads)
    }
}

/// One head's inputs for the tokens of a sequence.
struct Scan<'a> {
    /// The convolution's outputs, rows of `channels`.
    conv: &'a [f32],
    channels: usize,
    /// Where the head's `x` and its group's `B` and `C` start in a row.
    x: usize,
    b: usize,
    c: usize,
    /// The time steps `Δ` of every head, rows of `heads`.
    dt: &'a [f32],
    head: usize,
    heads: usize,
    /// The head's `A` and `D`.
    a: f32,
    d: f32,
    head_dim: usize,
    state: usize,
}

impl Scan<'_> {
    /// Run the head over its tokens: from the states `state` (a row of `state` values per
    /// channel), write each token's `y` into `out` (rows of `head_dim`) and the final states
    /// into `next`.
    fn run(&self, state: &[f32], next: &mut [f32], out: &mut [f32]) {
        ops::widest(
            #[inline(always)]
            || {
                for (t, y) in out.chunks_exact_mut(self.head_dim).enumerate() {
                    let row = &self.conv[t * self.channels..][..self.channels];
                    let x = &row[self.x..self.x + self.head_dim];
                    let (b, c) = (
                        &row[self.b..self.b + self.state],
                        &row[self.c..self.c + self.state],
                    );
                    let dt = self.dt[t * self.heads + self.head];
                    let decay = (dt * self.a).exp();
                    for (i, s) in next.chunks_exact_mut(self.state).enumerate() {
                        if t == 0 {
                            s.copy_from_slice(&state[i * self.state..][..self.state]);
                        }
                        let x_dt = x[i] * dt;
                        s.iter_mut()
                            .zip(b)
                            .for_each(|(s, &b)| *s = *s * decay + b * x_dt);
                        y[i] = ops::dot(s, c) + x[i] * self.d;
                    }
                }
            },
        );
    }
}
