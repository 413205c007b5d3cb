//! Qwen 3.5's gated delta net, the linear attention of three layers in four (llama.cpp's
//! `build_layer_attn_linear` in `src/models/qwen35.cpp` and its fused `ggml_gated_delta_net`).
//!
//! For the normalised input `h` of a token: `qkv = attn_qkv·h` goes through a causal
//! convolution (kernel `ssm_conv1d`, inputs of earlier positions from the sequence's
//! [`ConvHistory`](super::conv_state::ConvHistory)) and SiLU, then splits into queries, keys
//! (both L2-normalised per head) and values. Each value head `h` keeps a state matrix `S`
//! (its [`MatrixStates`](super::matrix_state::MatrixStates)) and reads query and key head
//! `h % k_heads`; per token, with `g = softplus(ssm_alpha·h + ssm_dt) · ssm_a` and `β =
//! sigmoid(ssm_beta·h)`:
//!
//! ```text
//! S ← S · e^g;   δ = (v − Sᵀk) · β;   S ← S + k δᵀ;   o = Sᵀq / √head_dim
//! ```
//!
//! The output is RMS-normed per head (`ssm_norm`), multiplied by `silu(attn_gate·h)` and
//! projected by `ssm_out`. The state is stored transposed (row `j` holds `S[·][j]`, as ggml
//! does), so each row's update depends on that row alone: one pass over it per token. Heads
//! are shared out among the threads, each computed by one thread in a fixed order, so the
//! result does not depend on the thread count.

use super::batch::SeqTokens;
use super::config::{DeltaShape, ModelConfig, MAX_STATE_DIM};
use super::mixer::{run_heads, token_order, MixerBuffers};
use super::norm::Norm;
use super::ops;
use super::short_conv::{convolve, load_kernel};
use super::weights::Loader;
use crate::backend::{Threads, Weight};
use crate::Result;

/// One delta-net layer's weights besides its input (`attn_qkv`) and output (`ssm_out`)
/// projections, which the layer holds as its `wq` and `wo`.
pub(crate) struct DeltaNet {
    shape: DeltaShape,
    /// `attn_gate`: the output gate `z` of every value channel.
    gate: Weight,
    /// `ssm_beta` and `ssm_alpha`: one row per value head.
    beta: Weight,
    alpha: Weight,
    /// The convolution kernel (see [`load_kernel`]).
    kernel: Vec<f32>,
    /// `ssm_dt.bias` and `ssm_a` (−e^{A_log}), per value head.
    dt_bias: Vec<f32>,
    a: Vec<f32>,
    /// `ssm_norm`: the per-head RMS norm of the output.
    norm: Norm,
    /// The model's RMS-norm epsilon (the L2 norms' too).
    eps: f32,
}

impl DeltaNet {
    /// Layer `i`'s delta net with its `attn_qkv` and `ssm_out`.
    pub(crate) fn load(
        ld: &Loader<'_>,
        i: usize,
        c: &ModelConfig,
        shape: DeltaShape,
    ) -> Result<(Self, Weight, Weight)> {
        let p = |s: &str| format!("blk.{i}.{s}");
        let (d, hv) = (c.n_embd, shape.v_heads);
        let values = hv * shape.head_dim;
        let channels = shape.conv_channels();
        let net = DeltaNet {
            gate: ld.matrix(&p("attn_gate.weight"), d, values)?,
            beta: ld.matrix(&p("ssm_beta.weight"), d, hv)?,
            alpha: ld.matrix(&p("ssm_alpha.weight"), d, hv)?,
            kernel: load_kernel(ld, &p("ssm_conv1d.weight"), shape.conv_len, channels)?,
            dt_bias: ld.vector(&p("ssm_dt.bias"), hv)?,
            a: ld.vector(&p("ssm_a"), hv)?,
            norm: Norm::rms(ld.vector(&p("ssm_norm.weight"), shape.head_dim)?, c.rms_eps),
            eps: c.rms_eps,
            shape,
        };
        Ok((
            net,
            ld.matrix(&p("attn_qkv.weight"), d, channels)?,
            ld.matrix(&p("ssm_out.weight"), values, d)?,
        ))
    }

    /// The layer `il` for the `n` normalised rows `h` of `seqs` (of `d` values): `proj` as
    /// described in the module's documentation; each sequence's convolution inputs go into
    /// its history and its states into the copies [`MatrixStates::pair`] gives
    /// (`KvCache::advance` makes them current after the pass).
    ///
    /// [`MatrixStates::pair`]: super::matrix_state::MatrixStates::pair
    pub(crate) fn forward(
        &self,
        (qkv_w, out_w): (&Weight, &Weight),
        (il, n, d): (usize, usize, usize),
        h: &[f32],
        seqs: &mut [SeqTokens<'_>],
        b: MixerBuffers<'_>,
        threads: &Threads,
    ) -> Result<()> {
        let sh = self.shape;
        let (channels, hv) = (sh.conv_channels(), sh.v_heads);
        let values = hv * sh.head_dim;
        let h = &h[..n * d];
        let (qkv, conv) = (&mut b.proj_in[..n * channels], &mut b.conv[..n * channels]);
        let (z, heads) = (&mut b.gated[..n * values], &mut b.heads[..n * values]);
        let beta_g = &mut b.per_head[..n * 2 * hv];
        let (beta, g) = beta_g.split_at_mut(n * hv);
        let outs: &mut [&mut [f32]] = &mut [&mut *qkv, &mut *z, &mut *beta, &mut *g];
        let weights = [qkv_w, &self.gate, &self.beta, &self.alpha];
        Weight::matmul_shared_input(&weights, h, n, outs, threads)?;
        convolve(
            (&self.kernel, sh.conv_len),
            (il, channels),
            (qkv, channels),
            seqs,
            conv,
        );
        let key_width = sh.k_heads * sh.head_dim;
        // Weights of 1 for the L2 norms (heads are at most MAX_STATE_DIM, checked at load).
        let ones = &[1.0f32; MAX_STATE_DIM][..sh.head_dim];
        threads.for_each_rows(conv, channels, |_, rows| {
            ops::widest(
                #[inline(always)]
                || {
                    for v in rows.iter_mut() {
                        *v /= 1.0 + ops::exp(-*v);
                    }
                },
            );
            // L2 norms of the query and key heads, as llama.cpp: an RMS norm with ε/n,
            // times 1/√n.
            let (eps, scale) = (
                self.eps / sh.head_dim as f32,
                1.0 / (sh.head_dim as f32).sqrt(),
            );
            for row in rows.chunks_exact_mut(channels) {
                for head in row[..2 * key_width].chunks_exact_mut(sh.head_dim) {
                    ops::rms_norm(head, ones, eps);
                    head.iter_mut().for_each(|v| *v *= scale);
                }
            }
        });
        for b in beta.iter_mut() {
            *b = 1.0 / (1.0 + (-*b).exp());
        }
        for row in g.chunks_exact_mut(hv) {
            for ((x, bias), a) in row.iter_mut().zip(&self.dt_bias).zip(&self.a) {
                let biased = *x + bias;
                let softplus = match biased > 20.0 {
                    true => biased,
                    false => (1.0 + biased.exp()).ln(),
                };
                *x = softplus * a;
            }
        }
        let (conv, beta, g) = (&*conv, &*beta, &*g);
        let size = sh.head_dim * sh.head_dim;
        run_heads(
            seqs,
            il,
            (size, sh.head_dim),
            heads,
            threads,
            |rows, head, state, next, out| {
                let tokens = Tokens {
                    conv: &conv[rows.start * channels..rows.end * channels],
                    channels,
                    q: (head % sh.k_heads) * sh.head_dim,
                    k: key_width + (head % sh.k_heads) * sh.head_dim,
                    v: 2 * key_width + head * sh.head_dim,
                    beta: &beta[rows.start * hv..rows.end * hv],
                    g: &g[rows.start * hv..rows.end * hv],
                    head,
                    heads: hv,
                    dim: sh.head_dim,
                };
                recur(state, next, &tokens, out);
            },
        );
        // y = norm(o) · silu(z), per head, back in token order.
        let mut normed = [0f32; MAX_STATE_DIM];
        let normed = &mut normed[..sh.head_dim];
        token_order(seqs, heads, (hv, sh.head_dim), |row, head, o| {
            let zh = &mut z[row * values + head * sh.head_dim..][..sh.head_dim];
            normed.copy_from_slice(o);
            self.norm.rows(normed);
            for (z, y) in zh.iter_mut().zip(normed.iter()) {
                *z = y * (*z / (1.0 + ops::exp(-*z)));
            }
        });
        Weight::matmul_shared_input(&[out_w], z, n, &mut [&mut b.proj[..n * d]], threads)
    }
}

/// One value head's inputs for the tokens of a sequence.
struct Tokens<'a> {
    /// The convolution's outputs, rows of `channels`.
    conv: &'a [f32],
    channels: usize,
    /// Where the head's query, key and value start in a row.
    q: usize,
    k: usize,
    v: usize,
    /// `β` and `g` of every value head, rows of `heads`.
    beta: &'a [f32],
    g: &'a [f32],
    head: usize,
    heads: usize,
    /// The head's dimension.
    dim: usize,
}

/// Run one value head over its tokens: from the state `state`, write each token's output
/// into `out` (rows of `head_dim`) and the final state into `next`.
fn recur(state: &[f32], next: &mut [f32], tk: &Tokens<'_>, out: &mut [f32]) {
    let dim = tk.dim;
    let scale = 1.0 / (dim as f32).sqrt();
    ops::widest(
        #[inline(always)]
        || {
            for (t, o) in out.chunks_exact_mut(dim).enumerate() {
                let row = &tk.conv[t * tk.channels..][..tk.channels];
                let (q, k, v) = (
                    &row[tk.q..tk.q + dim],
                    &row[tk.k..tk.k + dim],
                    &row[tk.v..tk.v + dim],
                );
                let decay = tk.g[t * tk.heads + tk.head].exp();
                let beta = tk.beta[t * tk.heads + tk.head];
                for (j, s) in next.chunks_exact_mut(dim).enumerate() {
                    if t == 0 {
                        s.copy_from_slice(&state[j * dim..][..dim]);
                    }
                    s.iter_mut().for_each(|x| *x *= decay);
                    let delta = (v[j] - ops::dot(s, k)) * beta;
                    s.iter_mut().zip(k).for_each(|(x, &k)| *x += k * delta);
                    o[j] = ops::dot(s, q) * scale;
                }
            }
        },
    );
}
