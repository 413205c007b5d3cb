//! Element-wise and row-wise operations of the transformer forward pass, with llama.cpp's
//! numerics (accumulation precision, RoPE angle recurrence, f16 rounding points).

use std::sync::OnceLock;

use half::f16;

/// RMS-normalise `x` in place and multiply by `weight`: `x * weight / sqrt(mean(x²) + eps)`.
/// The sum of squares is accumulated in f64 like ggml's, in eight interleaved partial sums
/// (element `i` in sum `i % 8`, then the eight in order) so that it vectorizes.
pub fn rms_norm(x: &mut [f32], weight: &[f32], eps: f32) {
    widest(
        #[inline(always)]
        || {
            let mut parts = [0f64; 8];
            let chunks = x.chunks_exact(8);
            let tail = chunks.remainder();
            for c in chunks {
                for (p, &v) in parts.iter_mut().zip(c) {
                    *p += f64::from(v * v);
                }
            }
            for (p, &v) in parts.iter_mut().zip(tail) {
                *p += f64::from(v * v);
            }
            let sum: f64 = parts.iter().sum();
            let mean = (sum / x.len() as f64) as f32;
            let scale = 1.0 / (mean + eps).sqrt();
            for (v, w) in x.iter_mut().zip(weight) {
                *v = (*v * scale) * w;
            }
        },
    )
}

/// LayerNorm in place (ggml_norm, then the weight): `x = (x - mean) / √(variance + eps) *
/// weight`, the sums in f64.
pub fn layer_norm(x: &mut [f32], weight: &[f32], eps: f32) {
    let n = x.len() as f64;
    let mean = (x.iter().map(|&v| f64::from(v)).sum::<f64>() / n) as f32;
    x.iter_mut().for_each(|v| *v -= mean);
    let variance = (x.iter().map(|&v| f64::from(v * v)).sum::<f64>() / n) as f32;
    let scale = 1.0 / (variance + eps).sqrt();
    for (v, w) in x.iter_mut().zip(weight) {
        *v = (*v * scale) * w;
    }
}

/// GELU (tanh approximation, through the same f16 table as [`gelu_mul`]) in place: the
/// activation of non-gated feed-forwards (StarCoder 2).
pub fn gelu(x: &mut [f32]) {
    let table = gelu_table();
    for v in x.iter_mut() {
        let a = *v;
        if a <= -10.0 {
            *v = 0.0;
        } else if a < 10.0 {
            *v = f16::from_bits(table[usize::from(f16::from_f32(a).to_bits())]).to_f32();
        }
    }
}

/// `e^x` in f32 to within 2 ulp (below `-87.3`, where `e^x` is subnormal or less, 0), written
/// so that the compiler vectorizes loops over it: no branches, no calls, and only adds and
/// multiplies rounded one at a time, so every build and architecture computes the same bits
/// (ggml computes SiLU and softmax with a vector exponential of its own, too).
///
/// `x = n·ln 2 + r` with `n` the nearest integer to `x·log2 e` (`|r| ≤ ln 2 / 2`, ln 2 split in
/// two so that `n·ln 2` is exact), `e^r` by its Taylor series to `r^7/7!` (the next term is
/// under 2^-27), times `2^n` as two powers of two (either alone may leave the f32 range).
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    /// Adding and then subtracting 1.5·2^23 rounds an f32 below 2^22 to an integer.
    const ROUND: f32 = 12_582_912.0;
    /// ln 2 = `LN2_HI + LN2_LO`; `LN2_HI` has 16 significant bits, so `n·LN2_HI` is exact.
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    const LOW: f32 = -87.3;
    const HIGH: f32 = 88.75;
    let xc = x.clamp(LOW, HIGH);
    let shifted = xc * std::f32::consts::LOG2_E + ROUND;
    let n = shifted - ROUND;
    let r = (xc - n * LN2_HI) - n * LN2_LO;
    let mut p = 1.0 / 5040.0;
    for c in [
        1.0 / 720.0,
        1.0 / 120.0,
        1.0 / 24.0,
        1.0 / 6.0,
        0.5,
        1.0,
        1.0,
    ] {
        p = p * r + c;
    }
    // `n` is an integer in [-126, 128] (the low bits of `shifted`): two halves, each a normal
    // power of two.
    let k = shifted.to_bits() as i32 - ROUND.to_bits() as i32;
    let half = k >> 1;
    let pow2 = |e: i32| f32::from_bits(((e + 127) as u32) << 23);
    let y = p * pow2(half) * pow2(k - half);
    if x < LOW {
        0.0
    } else if x > HIGH {
        f32::INFINITY
    } else {
        y
    }
}

/// Run `f` compiled for the widest vector registers this x86 CPU has (AVX-512F, AVX2, or the
/// baseline): for loops of plain f32 arithmetic that the compiler vectorizes, which compute the
/// same bits at every width.
#[inline(always)]
pub(crate) fn widest(f: impl FnOnce()) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f")]
        unsafe fn avx512(f: impl FnOnce()) {
            f()
        }
        #[target_feature(enable = "avx2")]
        unsafe fn avx2(f: impl FnOnce()) {
            f()
        }
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: AVX-512F was detected.
            return unsafe { avx512(f) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 was detected.
            return unsafe { avx2(f) };
        }
    }
    f()
}

/// Ask for the cache lines of `data` ahead of use (a hint: nothing is read). For short
/// streams of data that comes from memory or the last-level cache, too short for the
/// hardware's prefetchers to catch on (the attention's cache rows, a LoRA adapter's values).
#[inline(always)]
pub(crate) fn prefetch<T>(data: &[T]) {
    let len = std::mem::size_of_val(data);
    let last = len.saturating_sub(1);
    for at in (0..len).step_by(64).chain(std::iter::once(last)) {
        let p = data.as_ptr().cast::<u8>().wrapping_add(at);
        // SAFETY: a prefetch is a hint that never faults; `p` is inside `data` (or its end
        // when empty).
        #[cfg(target_arch = "x86_64")]
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
        }
        // SAFETY: as above; `prfm` only reads the address.
        #[cfg(target_arch = "aarch64")]
        unsafe {
            std::arch::asm!(
                "prfm pldl1keep, [{p}]",
                p = in(reg) p,
                options(nostack, readonly, preserves_flags)
            );
        }
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        let _ = p;
    }
}

/// `x = x * sigmoid(x) * up` (SwiGLU).
pub fn silu_mul(gate: &mut [f32], up: &[f32]) {
    widest(
        #[inline(always)]
        || {
            for (g, u) in gate.iter_mut().zip(up) {
                *g = *g / (1.0 + exp(-*g)) * u;
            }
        },
    )
}

/// GELU with the tanh approximation, in f32.
fn gelu_tanh(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    const COEF: f32 = 0.044_715;
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + COEF * x * x)).tanh())
}

/// `gelu_tanh` of every f16 value, as f16 bits (128 KiB, built once).
fn gelu_table() -> &'static [u16] {
    static TABLE: OnceLock<Vec<u16>> = OnceLock::new();
    TABLE.get_or_init(|| {
        (0..=u16::MAX)
            .map(|bits| f16::from_f32(gelu_tanh(f16::from_bits(bits).to_f32())).to_bits())
            .collect()
    })
}

/// `x = gelu_tanh(x) * up` (GeGLU) with llama.cpp's CPU numerics: the input is rounded to f16
/// and looked up in a table of f16 results; beyond ±10 GELU is taken as 0 or the identity.
pub fn gelu_mul(gate: &mut [f32], up: &[f32]) {
    let table = gelu_table();
    for (g, u) in gate.iter_mut().zip(up) {
        let x = *g;
        *g = if x <= -10.0 {
            0.0
        } else if x >= 10.0 {
            x * u
        } else {
            f16::from_bits(table[usize::from(f16::from_f32(x).to_bits())]).to_f32() * u
        };
    }
}

/// Dot product with eight independent partial sums (vectorizes well; always inlined, so that
/// it takes the caller's vector width, e.g. inside [`widest`]).
#[inline(always)]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    let tail: f32 = ra.iter().zip(rb).map(|(x, y)| x * y).sum();
    acc.iter().sum::<f32>() + tail
}

/// `out[i] = Σ_j p[j] · rows[j][i]`, accumulated over `j` in order from 0.0 for every
/// element (the same arithmetic as adding `p[j] · rows[j]` into a zeroed `out` one row after
/// another), with blocks of `out` held in registers across all rows.
#[inline(always)]
pub fn weighted_sum(p: &[f32], rows: &[f32], out: &mut [f32]) {
    const BLOCK: usize = 64;
    let width = out.len();
    let mut start = 0;
    while start < width {
        let len = BLOCK.min(width - start);
        if len == BLOCK {
            let mut acc = [0.0f32; BLOCK];
            for (j, &pj) in p.iter().enumerate() {
                let v = &rows[j * width + start..j * width + start + BLOCK];
                for i in 0..BLOCK {
                    acc[i] += pj * v[i];
                }
            }
            out[start..start + BLOCK].copy_from_slice(&acc);
        } else {
            let dst = &mut out[start..start + len];
            dst.fill(0.0);
            for (j, &pj) in p.iter().enumerate() {
                let v = &rows[j * width + start..j * width + start + len];
                for (a, b) in dst.iter_mut().zip(v) {
                    *a += pj * b;
                }
            }
        }
        start += len;
    }
}

/// Softmax in place, with the exponential sum accumulated in f64.
pub fn softmax(x: &mut [f32]) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    widest(
        #[inline(always)]
        || {
            for v in x.iter_mut() {
                *v = exp(*v - max);
            }
        },
    );
    let sum: f64 = x.iter().map(|&v| f64::from(v)).sum();
    let inv = (1.0 / sum) as f32;
    for v in x.iter_mut() {
        *v *= inv;
    }
}

/// Round an f32 to f16 precision and back (the value ggml sees after an f16 conversion).
#[inline]
pub fn round_f16(v: f32) -> f32 {
    f16::from_f32(v).to_f32()
}

/// How RoPE pairs up dimensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeStyle {
    /// Adjacent pairs `(x[2i], x[2i+1])` (llama, mistral).
    Normal,
    /// Halves `(x[i], x[i + d/2])` (gemma, qwen, gpt-neox).
    Neox,
}

/// Rotary position embedding parameters for one layer.
#[derive(Clone, Debug, PartialEq)]
pub struct Rope {
    /// Pairing style.
    pub style: RopeStyle,
    /// Number of rotated dimensions per head.
    pub n_dims: usize,
    /// Base frequency.
    pub base: f32,
    /// Linear position scale (1 / scaling factor).
    pub freq_scale: f32,
    /// Optional per-pair frequency divisors (`rope_freqs.weight`, Llama 3; LongRoPE's long or
    /// short factors, Phi-3).
    pub freq_factors: Option<Vec<f32>>,
    /// Multiplier of the rotated values (ggml's `attn_factor`, YaRN's magnitude scale
    /// included; 1 for plain RoPE).
    pub mscale: f32,
    /// YaRN's blend of interpolated and extrapolated frequencies, if the model uses it.
    pub yarn: Option<Yarn>,
}

/// YaRN (ggml's `rope_yarn`): pair `i`'s angle blends the interpolated angle (`freq_scale ·
/// θ`) with the extrapolated one (`θ`) by `ext_factor · ramp(i)`, where the ramp falls from 1
/// at pair `low` to 0 at pair `high`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Yarn {
    /// Weight of the extrapolated angle at the ramp's top (1 for YaRN).
    pub ext_factor: f32,
    /// The correction range in pairs (ggml's `corr_dims`).
    pub low: f32,
    /// See `low`.
    pub high: f32,
}

impl Yarn {
    /// The correction range for `n_dims` rotated dimensions trained on `n_ctx_orig`
    /// positions (ggml's `ggml_rope_yarn_corr_dims`).
    pub fn new(
        n_dims: usize,
        n_ctx_orig: usize,
        base: f32,
        beta_fast: f32,
        beta_slow: f32,
    ) -> Self {
        let corr = |n_rot: f32| {
            n_dims as f32 * (n_ctx_orig as f32 / (n_rot * 2.0 * std::f32::consts::PI)).ln()
                / (2.0 * base.ln())
        };
        Yarn {
            ext_factor: 1.0,
            low: corr(beta_fast).floor().max(0.0),
            high: corr(beta_slow).ceil().min(n_dims as f32 - 1.0),
        }
    }

    fn mix(&self, pair: usize) -> f32 {
        let y = (pair as f32 - self.low) / (self.high - self.low).max(0.001);
        (1.0 - y.clamp(0.0, 1.0)) * self.ext_factor
    }
}

impl Rope {
    /// Plain RoPE: no frequency factors, no magnitude scale, no YaRN.
    pub fn plain(style: RopeStyle, n_dims: usize, base: f32, freq_scale: f32) -> Self {
        Rope {
            style,
            n_dims,
            base,
            freq_scale,
            freq_factors: None,
            mscale: 1.0,
            yarn: None,
        }
    }

    /// The (cos, sin) table for position `pos`, `n_dims / 2` entries.
    pub fn angles(&self, pos: usize, out: &mut Vec<(f32, f32)>) {
        self.table(pos, self.mscale, out);
    }

    /// The table of a pure rotation by `pos` positions (no magnitude scale): what moves an
    /// already rotated key by `pos` positions.
    pub fn rotation(&self, pos: usize, out: &mut Vec<(f32, f32)>) {
        self.table(pos, 1.0, out);
    }

    fn table(&self, pos: usize, mscale: f32, out: &mut Vec<(f32, f32)>) {
        out.clear();
        let theta_scale = self.base.powf(-2.0 / self.n_dims as f32);
        let mut theta = pos as f32;
        for i in 0..self.n_dims / 2 {
            let ff = self.freq_factors.as_ref().map_or(1.0, |f| f[i]);
            let extrapolated = theta / ff;
            let mut angle = self.freq_scale * extrapolated;
            if let Some(y) = &self.yarn {
                let mix = y.mix(i);
                angle = angle * (1.0 - mix) + extrapolated * mix;
            }
            out.push((angle.cos() * mscale, angle.sin() * mscale));
            theta *= theta_scale;
        }
    }

    /// Rotate one head vector in place using a table from [`Rope::angles`].
    pub fn apply(&self, head: &mut [f32], table: &[(f32, f32)]) {
        widest(
            #[inline(always)]
            || match self.style {
                RopeStyle::Normal => {
                    for (i, &(c, s)) in table.iter().enumerate() {
                        let (a, b) = (head[2 * i], head[2 * i + 1]);
                        head[2 * i] = a * c - b * s;
                        head[2 * i + 1] = a * s + b * c;
                    }
                }
                RopeStyle::Neox => {
                    let half = self.n_dims / 2;
                    for (i, &(c, s)) in table.iter().enumerate() {
                        let (a, b) = (head[i], head[i + half]);
                        head[i] = a * c - b * s;
                        head[i + half] = a * s + b * c;
                    }
                }
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_within_two_ulp_and_keeps_the_special_values() {
        let ulp = |v: f32| f32::from_bits(v.to_bits() + 1) - v;
        let mut x = -87.29f32;
        while x < 88.72 {
            let (got, want) = (exp(x), f64::from(x).exp());
            let err = (f64::from(got) - want).abs() / f64::from(ulp(want as f32));
            assert!(err <= 2.0, "exp({x}) = {got}, want {want} ({err} ulp)");
            x += 0.000_37 + x.abs() * 1e-4;
        }
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-0.0), 1.0);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(-100.0), 0.0);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp(88.8), f32::INFINITY);
        assert!(exp(88.72).is_finite() && exp(88.72) > 3.3e38);
        assert!(exp(f32::NAN).is_nan());
        // Silu of large magnitudes: the identity on one side, zero on the other.
        let mut g = [100.0f32, -100.0, f32::MAX, -f32::MAX];
        silu_mul(&mut g, &[1.0; 4]);
        assert_eq!(g[..2], [100.0, -0.0]);
        assert_eq!(g[2], f32::MAX);
        assert_eq!(g[3], -0.0);
    }

    #[test]
    fn rms_norm_gives_unit_rms() {
        let mut x = vec![1.0, -2.0, 3.0, 4.0];
        rms_norm(&mut x, &[1.0; 4], 0.0);
        let rms = (x.iter().map(|v| v * v).sum::<f32>() / 4.0).sqrt();
        assert!((rms - 1.0).abs() < 1e-6);
    }

    #[test]
    fn blocked_weighted_sum_equals_the_plain_loop() {
        let v = |n: usize, k: f32| {
            (0..n)
                .map(|i| (i as f32 * k).sin() * 3.0)
                .collect::<Vec<f32>>()
        };
        for width in [1usize, 8, 37, 64, 100, 256] {
            let p = v(5, 0.31);
            let flat: Vec<f32> = (0..5).flat_map(|j| v(width, 0.2 + j as f32)).collect();
            let mut want = vec![0.0f32; width];
            for j in 0..5 {
                for i in 0..width {
                    want[i] += p[j] * flat[j * width + i];
                }
            }
            let mut got = vec![1.0f32; width];
            weighted_sum(&p, &flat, &mut got);
            assert!(got
                .iter()
                .zip(&want)
                .all(|(a, b)| a.to_bits() == b.to_bits()));
        }
    }

    #[test]
    fn softmax_sums_to_one_and_keeps_order() {
        let mut x = vec![1.0, 3.0, 2.0, f32::NEG_INFINITY];
        softmax(&mut x);
        assert!((x.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!(x[1] > x[2] && x[2] > x[0] && x[3] == 0.0);
    }

    #[test]
    fn rope_preserves_norm_and_position_zero_is_identity() {
        for style in [RopeStyle::Normal, RopeStyle::Neox] {
            let rope = Rope::plain(style, 8, 10000.0, 1.0);
            let orig: Vec<f32> = (0..8).map(|i| i as f32 - 3.5).collect();
            let mut table = Vec::new();
            rope.angles(0, &mut table);
            let mut h = orig.clone();
            rope.apply(&mut h, &table);
            assert_eq!(h, orig);
            rope.angles(17, &mut table);
            rope.apply(&mut h, &table);
            let n0: f32 = orig.iter().map(|v| v * v).sum();
            let n1: f32 = h.iter().map(|v| v * v).sum();
            assert!((n0 - n1).abs() < 1e-3 && h != orig);
        }
    }
}
