//! LFM2's short-convolution block, which replaces attention in most of its layers (llama.cpp's
//! `build_shortconv_block` in `src/models/lfm2.cpp`): `in_proj` maps each normalised input to
//! three rows `b`, `c`, `x`; the products `b·x` of each channel are convolved causally over the
//! last `L` positions (a kernel of `L` weights per channel, `shortconv.conv`), multiplied by
//! `c`, and projected back by `out_proj`. The inputs of earlier positions come from the batch or,
//! before it, from the sequence's [`ConvHistory`](super::conv_state::ConvHistory) (zeros before
//! position 0).
//!
//! Each output is llama.cpp's `ggml_ssm_conv` sum: from 0, `+= input·weight` for the kernel's
//! positions oldest first, in f32.

use super::batch::SeqTokens;
use super::config::ModelConfig;
use super::weights::Loader;
use crate::backend::{Threads, Weight};
use crate::Result;

/// A layer's convolution kernel.
pub(crate) struct ShortConv {
    /// `L` rows of the channels' weights, oldest position first (the file's kernel
    /// transposed).
    kernel: Vec<f32>,
    /// Kernel length `L`.
    len: usize,
}

impl ShortConv {
    /// Layer `i`'s short convolution: its kernel, `in_proj` and `out_proj`.
    pub(crate) fn load(
        ld: &Loader<'_>,
        i: usize,
        c: &ModelConfig,
    ) -> Result<(Self, Weight, Weight)> {
        let p = |s: &str| format!("blk.{i}.shortconv.{s}");
        let d = c.n_embd;
        let len = c.layers[i].short_conv.unwrap_or(2);
        Ok((
            ShortConv {
                kernel: load_kernel(ld, &p("conv.weight"), len, d)?,
                len,
            },
            ld.matrix(&p("in_proj.weight"), d, 3 * d)?,
            ld.matrix(&p("out_proj.weight"), d, d)?,
        ))
    }

    /// The block for the `n` normalised rows `h` of `seqs` in layer `il`: `proj =
    /// out_proj·(c ⊙ conv(b ⊙ x))` with `(b, c, x) = in_proj·h`; each sequence's inputs are
    /// added to its history. Buffers: `bcx` of `n` rows of `3·d`, `y` and `proj` of `n` rows
    /// of `d`.
    pub(crate) fn forward(
        &self,
        (in_proj, out_proj): (&Weight, &Weight),
        (il, n, d): (usize, usize, usize),
        h: &[f32],
        seqs: &mut [SeqTokens<'_>],
        (bcx, y, proj): (&mut [f32], &mut [f32], &mut [f32]),
        threads: &Threads,
    ) -> Result<()> {
        let (h, bcx, y) = (&h[..n * d], &mut bcx[..n * 3 * d], &mut y[..n * d]);
        Weight::matmul_shared_input(&[in_proj], h, n, &mut [&mut *bcx], threads)?;
        // b ← b·x (llama.cpp's `ggml_mul(b, x)`).
        threads.for_each_rows(bcx, 3 * d, |_, rows| {
            for row in rows.chunks_exact_mut(3 * d) {
                let (b, rest) = row.split_at_mut(d);
                b.iter_mut().zip(&rest[d..]).for_each(|(b, x)| *b *= x);
            }
        });
        convolve((&self.kernel, self.len), (il, d), (bcx, 3 * d), seqs, y);
        // y ← c·conv(b·x)
        for (out, row) in y.chunks_exact_mut(d).zip(bcx.chunks_exact(3 * d)) {
            out.iter_mut()
                .zip(&row[d..2 * d])
                .for_each(|(o, c)| *o *= c);
        }
        Weight::matmul_shared_input(&[out_proj], y, n, &mut [proj], threads)
    }
}

/// A convolution kernel of `len` weights for each of `width` channels, tensor `name` of shape
/// `[len, width]`, transposed to `len` rows of the channels' weights (oldest position first).
pub(crate) fn load_kernel(
    ld: &Loader<'_>,
    name: &str,
    len: usize,
    width: usize,
) -> Result<Vec<f32>> {
    let file = ld.values(name, &[len, width])?;
    let mut kernel = vec![0f32; len * width];
    for (ch, weights) in file.chunks_exact(len).enumerate() {
        for (k, &w) in weights.iter().enumerate() {
            kernel[k * width + ch] = w;
        }
    }
    Ok(kernel)
}

/// The causal convolution of layer `il`'s `width` channels with `kernel` (`len` rows of the
/// channels' weights, oldest position first): `out`'s row `t` (of `width` values) is the sum
/// over the kernel's positions of the inputs `len − 1` positions before `t` up to `t` times
/// their weights, from 0, in f32 (llama.cpp's `ggml_ssm_conv`). `input`'s row `t` holds the
/// channels of the batch's row `t` at its start, rows `stride` apart; inputs before the
/// batch come from each sequence's history (zeros before position 0), and the batch's are
/// added to it.
pub(crate) fn convolve(
    (kernel, len): (&[f32], usize),
    (il, width): (usize, usize),
    (input, stride): (&[f32], usize),
    seqs: &mut [SeqTokens<'_>],
    out: &mut [f32],
) {
    let mut first = 0;
    for seq in seqs.iter_mut() {
        let (ns, pos0) = (seq.tokens.len(), seq.cache.len());
        let history = seq.cache.conv();
        for t in 0..ns {
            let out = &mut out[(first + t) * width..][..width];
            out.fill(0.0);
            for k in 0..len {
                let weights = &kernel[k * width..][..width];
                // The input at position pos0 + t + k − (L − 1); zeros before position 0.
                let row = match (pos0 + t + k).checked_sub(len - 1) {
                    None => {
                        out.iter_mut()
                            .zip(weights)
                            .for_each(|(o, &w)| *o += 0.0 * w);
                        continue;
                    }
                    Some(p) if p >= pos0 => &input[(first + p - pos0) * stride..][..width],
                    Some(p) => history.row(il, p),
                };
                for ((o, &v), &w) in out.iter_mut().zip(row).zip(weights) {
                    *o += v * w;
                }
            }
        }
        let history = seq.cache.conv_mut();
        for t in ns.saturating_sub(history.held())..ns {
            history.store(il, pos0 + t, &input[(first + t) * stride..][..width]);
        }
        first += ns;
    }
}
