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
        let file = ld.values(&p("conv.weight"), &[len, d])?;
        let mut kernel = vec![0f32; len * d];
        for (ch, weights) in file.chunks_exact(len).enumerate() {
            for (k, &w) in weights.iter().enumerate() {
                kernel[k * d + ch] = w;
            }
        }
        Ok((
            ShortConv { kernel, len },
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
        let mut first = 0;
        for seq in seqs.iter_mut() {
            let (ns, pos0) = (seq.tokens.len(), seq.cache.len());
            let history = seq.cache.conv();
            for t in 0..ns {
                let out = &mut y[(first + t) * d..][..d];
                out.fill(0.0);
                for k in 0..self.len {
                    let weights = &self.kernel[k * d..][..d];
                    // The input at position pos0 + t + k − (L − 1); zeros before position 0.
                    let input = match (pos0 + t + k).checked_sub(self.len - 1) {
                        None => {
                            out.iter_mut()
                                .zip(weights)
                                .for_each(|(o, &w)| *o += 0.0 * w);
                            continue;
                        }
                        Some(p) if p >= pos0 => &bcx[(first + p - pos0) * 3 * d..][..d],
                        Some(p) => history.row(il, p),
                    };
                    for ((o, &v), &w) in out.iter_mut().zip(input).zip(weights) {
                        *o += v * w;
                    }
                }
                let c = &bcx[(first + t) * 3 * d + d..][..d];
                out.iter_mut().zip(c).for_each(|(o, c)| *o *= c);
            }
            let history = seq.cache.conv_mut();
            for t in ns.saturating_sub(history.held())..ns {
                history.store(il, pos0 + t, &bcx[(first + t) * 3 * d..][..d]);
            }
            first += ns;
        }
        Weight::matmul_shared_input(&[out_proj], y, n, &mut [proj], threads)
    }
}
