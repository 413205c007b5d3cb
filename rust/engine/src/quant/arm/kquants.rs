//! aarch64 kernels for the K formats (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, and IQ4_XS, which has their
//! shape, against Q8_K activations) and the Q8_K quantizer. A weight block is unpacked once into 256 signed bytes (16 registers)
//! and multiplied with each token's block; the per-group integer sums are exact and scaled in
//! integers, and the block's f32 combination is the portable kernel's expression.

use std::arch::aarch64::*;
use std::marker::PhantomData;

use super::{dot16, half, pair, smmla, Kernel};
use crate::quant::blocks::{
    BlockIQ4_XS, BlockQ2_K, BlockQ3_K, BlockQ4_K, BlockQ5_K, BlockQ6_K, BlockQ8_K, QK_K,
};
use crate::quant::iquants::{Codebook, SIGN_BYTES};
use crate::quant::kquants::{q3k_scales, q4k_scales_mins, Q45K_D, Q45K_DMIN, Q45K_SCALES};
use crate::quant::nonlinear::{iq4xs_scales, IQ4NL_LEVELS};

/// A K weight format: how a block unpacks and how its integer sums become f32.
pub(super) trait KFormat {
    /// Bytes per block.
    const SIZE: usize;
    /// Whether the scales are per 32 elements (groups `2j` and `2j + 1` share a scale) rather
    /// than per 16.
    const SCALE32: bool;
    /// Whether the block has mins (its result subtracts `Σ_g min_g · bsum_g`).
    const MINS: bool;
    /// The 256 values of the block at `b` as signed bytes, 16 per register in element order.
    ///
    /// # Safety
    /// NEON; a whole block at `b`.
    unsafe fn values(b: *const u8) -> [int8x16_t; 16];
    /// The integer scale and min of each 16-element group (mins are 0 without [`Self::MINS`]).
    ///
    /// # Safety
    /// A whole block at `b`.
    unsafe fn scales(b: *const u8) -> ([i32; 16], [i32; 16]);
    /// The block's f32 result from its integer sums (the portable kernel's expression).
    ///
    /// # Safety
    /// A whole weight block at `x` and Q8_K block at `y`.
    unsafe fn combine(x: *const u8, y: *const u8, isum: i32, summ: i32) -> f32;
}

/// The f32 scale of the Q8_K block at `y`.
///
/// # Safety
/// A whole Q8_K block at `y`.
#[inline(always)]
unsafe fn q8k_d(y: *const u8) -> f32 {
    let d = y.add(BlockQ8_K::D);
    f32::from_le_bytes([*d, *d.add(1), *d.add(2), *d.add(3)])
}

/// The weight block `x` (scales at byte offsets `d`, `dmin`) and Q8_K block `y` combined as
/// Q2_K, Q4_K and Q5_K do: `yd·d·isum − yd·dmin·summ`.
///
/// # Safety
/// A whole weight block at `x` and Q8_K block at `y`.
#[inline(always)]
unsafe fn combine_with_mins(
    x: *const u8,
    d: usize,
    dmin: usize,
    y: *const u8,
    isum: i32,
    summ: i32,
) -> f32 {
    let yd = q8k_d(y);
    yd * half(x.add(d)) * isum as f32 - yd * half(x.add(dmin)) * summ as f32
}

/// Bits `shift..shift + 2` of each byte of `v`.
///
/// # Safety
/// NEON.
#[inline(always)]
unsafe fn two_bits(v: uint8x16_t, shift: i8) -> uint8x16_t {
    vandq_u8(vshlq_u8(v, vdupq_n_s8(-shift)), vdupq_n_u8(3))
}

/// Q2_K.
pub(super) struct Q2K;
impl KFormat for Q2K {
    const SIZE: usize = BlockQ2_K::SIZE;
    const SCALE32: bool = false;
    const MINS: bool = true;
    #[inline(always)]
    unsafe fn values(b: *const u8) -> [int8x16_t; 16] {
        // Element 128n + 32j + 16h + i is bits 2j..2j+2 of qs[32n + 16h + i].
        let qs = b.add(BlockQ2_K::QS);
        std::array::from_fn(|g| {
            let (n, j, h) = (g / 8, (g / 2) % 4, g % 2);
            vreinterpretq_s8_u8(two_bits(vld1q_u8(qs.add(32 * n + 16 * h)), 2 * j as i8))
        })
    }
    #[inline(always)]
    unsafe fn scales(b: *const u8) -> ([i32; 16], [i32; 16]) {
        let s = b.add(BlockQ2_K::SCALES);
        (
            std::array::from_fn(|g| i32::from(*s.add(g) & 0x0f)),
            std::array::from_fn(|g| i32::from(*s.add(g) >> 4)),
        )
    }
    #[inline(always)]
    unsafe fn combine(x: *const u8, y: *const u8, isum: i32, summ: i32) -> f32 {
        // kquants::dot_q2_k: dall = yd·d, dmin = yd·dmin.
        combine_with_mins(x, BlockQ2_K::D, BlockQ2_K::DMIN, y, isum, summ)
    }
}

/// Q3_K.
pub(super) struct Q3K;
impl KFormat for Q3K {
    const SIZE: usize = BlockQ3_K::SIZE;
    const SCALE32: bool = false;
    const MINS: bool = false;
    #[inline(always)]
    unsafe fn values(b: *const u8) -> [int8x16_t; 16] {
        // As Q2_K, minus 4 where bit 4n + j of hmask[16h + i] is clear.
        let (qs, hm) = (b.add(BlockQ3_K::QS), b.add(BlockQ3_K::HMASK));
        let hmask = [vld1q_u8(hm), vld1q_u8(hm.add(16))];
        std::array::from_fn(|g| {
            let (n, j, h) = (g / 8, (g / 2) % 4, g % 2);
            let q = two_bits(vld1q_u8(qs.add(32 * n + 16 * h)), 2 * j as i8);
            let set = vtstq_u8(hmask[h], vdupq_n_u8(1 << (4 * n + j)));
            vreinterpretq_s8_u8(vsubq_u8(q, vbicq_u8(vdupq_n_u8(4), set)))
        })
    }
    #[inline(always)]
    unsafe fn scales(b: *const u8) -> ([i32; 16], [i32; 16]) {
        let s = std::slice::from_raw_parts(b.add(BlockQ3_K::SCALES), 12);
        (q3k_scales(s), [0; 16])
    }
    #[inline(always)]
    unsafe fn combine(x: *const u8, y: *const u8, isum: i32, _summ: i32) -> f32 {
        half(x.add(BlockQ3_K::D)) * q8k_d(y) * isum as f32
    }
}

/// The unsigned nibbles of Q4_K/Q5_K quants at `qs` (128 bytes): element `64j + 16h + i` is the
/// low nibble of `qs[32j + 16h + i]`, element `64j + 32 + 16h + i` its high nibble.
///
/// # Safety
/// NEON; 128 readable bytes at `qs`.
#[inline(always)]
unsafe fn q45k_nibbles(qs: *const u8) -> [uint8x16_t; 16] {
    std::array::from_fn(|g| {
        let (j, high, h) = (g / 4, (g / 2) % 2 == 1, g % 2);
        let v = vld1q_u8(qs.add(32 * j + 16 * h));
        if high {
            vshrq_n_u8::<4>(v)
        } else {
            vandq_u8(v, vdupq_n_u8(0x0f))
        }
    })
}

/// The scales and mins of a Q4_K/Q5_K block, per 16-element group.
///
/// # Safety
/// A whole Q4_K or Q5_K block at `b`.
#[inline(always)]
unsafe fn q45k_scales(b: *const u8) -> ([i32; 16], [i32; 16]) {
    let (sc, m) = q4k_scales_mins(std::slice::from_raw_parts(b.add(Q45K_SCALES), 12));
    (
        std::array::from_fn(|g| i32::from(sc[g / 2])),
        std::array::from_fn(|g| i32::from(m[g / 2])),
    )
}

/// Q4_K.
pub(super) struct Q4K;
impl KFormat for Q4K {
    const SIZE: usize = BlockQ4_K::SIZE;
    const SCALE32: bool = true;
    const MINS: bool = true;
    #[inline(always)]
    unsafe fn values(b: *const u8) -> [int8x16_t; 16] {
        q45k_nibbles(b.add(BlockQ4_K::QS)).map(|v| vreinterpretq_s8_u8(v))
    }
    #[inline(always)]
    unsafe fn scales(b: *const u8) -> ([i32; 16], [i32; 16]) {
        q45k_scales(b)
    }
    #[inline(always)]
    unsafe fn combine(x: *const u8, y: *const u8, isum: i32, summ: i32) -> f32 {
        // kquants::q45k_combine.
        combine_with_mins(x, Q45K_D, Q45K_DMIN, y, isum, summ)
    }
}

/// Q5_K.
pub(super) struct Q5K;
impl KFormat for Q5K {
    const SIZE: usize = BlockQ5_K::SIZE;
    const SCALE32: bool = true;
    const MINS: bool = true;
    #[inline(always)]
    unsafe fn values(b: *const u8) -> [int8x16_t; 16] {
        // The fifth bit of element 32k + 16h + i is bit k of qh[16h + i].
        let qh = b.add(BlockQ5_K::QH);
        let qh = [vld1q_u8(qh), vld1q_u8(qh.add(16))];
        let lo = q45k_nibbles(b.add(BlockQ5_K::QS));
        std::array::from_fn(|g| {
            let (k, h) = (g / 2, g % 2);
            let bit = vandq_u8(vshlq_u8(qh[h], vdupq_n_s8(4 - k as i8)), vdupq_n_u8(0x10));
            vreinterpretq_s8_u8(vorrq_u8(lo[g], bit))
        })
    }
    #[inline(always)]
    unsafe fn scales(b: *const u8) -> ([i32; 16], [i32; 16]) {
        q45k_scales(b)
    }
    #[inline(always)]
    unsafe fn combine(x: *const u8, y: *const u8, isum: i32, summ: i32) -> f32 {
        combine_with_mins(x, Q45K_D, Q45K_DMIN, y, isum, summ)
    }
}

/// Q6_K.
pub(super) struct Q6K;
impl KFormat for Q6K {
    const SIZE: usize = BlockQ6_K::SIZE;
    const SCALE32: bool = false;
    const MINS: bool = false;
    #[inline(always)]
    unsafe fn values(b: *const u8) -> [int8x16_t; 16] {
        // Element 128n + 32k + 16h + i: a nibble of ql[64n + 32(k % 2) + 16h + i] (low for
        // k < 2) with bits 2k..2k+2 of qh[32n + 16h + i] on top, minus 32.
        let (ql, qh) = (b.add(BlockQ6_K::QL), b.add(BlockQ6_K::QH));
        std::array::from_fn(|g| {
            let (n, k, h) = (g / 8, (g / 2) % 4, g % 2);
            let l = vld1q_u8(ql.add(64 * n + 32 * (k % 2) + 16 * h));
            let nib = if k < 2 {
                vandq_u8(l, vdupq_n_u8(0x0f))
            } else {
                vshrq_n_u8::<4>(l)
            };
            let top = two_bits(vld1q_u8(qh.add(32 * n + 16 * h)), 2 * k as i8);
            let v = vorrq_u8(nib, vshlq_n_u8::<4>(top));
            vreinterpretq_s8_u8(vsubq_u8(v, vdupq_n_u8(32)))
        })
    }
    #[inline(always)]
    unsafe fn scales(b: *const u8) -> ([i32; 16], [i32; 16]) {
        let s = b.add(BlockQ6_K::SCALES);
        (std::array::from_fn(|g| i32::from(*s.add(g) as i8)), [0; 16])
    }
    #[inline(always)]
    unsafe fn combine(x: *const u8, y: *const u8, isum: i32, _summ: i32) -> f32 {
        half(x.add(BlockQ6_K::D)) * q8k_d(y) * isum as f32
    }
}

/// IQ4_XS: IQ4_NL's levels with a 6-bit scale per 32 elements.
pub(super) struct IQ4XS;

impl KFormat for IQ4XS {
    const SIZE: usize = BlockIQ4_XS::SIZE;
    const SCALE32: bool = true;
    const MINS: bool = false;
    #[inline(always)]
    unsafe fn values(b: *const u8) -> [int8x16_t; 16] {
        let table = vld1q_s8(IQ4NL_LEVELS.as_ptr());
        std::array::from_fn(|g| {
            let v = vld1q_u8(b.add(BlockIQ4_XS::QS + 16 * (g / 2)));
            let q = if g % 2 == 0 {
                vandq_u8(v, vdupq_n_u8(0x0f))
            } else {
                vshrq_n_u8::<4>(v)
            };
            vqtbl1q_s8(table, q)
        })
    }
    #[inline(always)]
    unsafe fn scales(b: *const u8) -> ([i32; 16], [i32; 16]) {
        let s = iq4xs_scales(std::slice::from_raw_parts(b, BlockIQ4_XS::SIZE));
        (std::array::from_fn(|g| s[g / 2]), [0; 16])
    }
    #[inline(always)]
    unsafe fn combine(x: *const u8, y: *const u8, isum: i32, _summ: i32) -> f32 {
        half(x.add(BlockIQ4_XS::D)) * q8k_d(y) * isum as f32
    }
}

/// A codebook format: its groups' values formed in registers from the grid and sign bytes of
/// the format's [`Codebook`] reading (`v = ±g`, or IQ1's `8·g ± 1`).
pub(super) struct Cb<C>(PhantomData<C>);

impl<C: Codebook> KFormat for Cb<C> {
    const SIZE: usize = C::SIZE;
    const SCALE32: bool = false;
    const MINS: bool = false;
    #[inline(always)]
    unsafe fn values(b: *const u8) -> [int8x16_t; 16] {
        let block = std::slice::from_raw_parts(b, C::SIZE);
        let mut out = [vdupq_n_s8(0); 16];
        for ib in 0..8 {
            let g = C::group(block, ib);
            for h in 0..2 {
                let grid = vreinterpretq_s8_u64(vcombine_u64(
                    vcreate_u64(g.grid[2 * h]),
                    vcreate_u64(g.grid[2 * h + 1]),
                ));
                let signs = vreinterpretq_s8_u64(vcombine_u64(
                    vcreate_u64(SIGN_BYTES[usize::from(g.signs[2 * h])]),
                    vcreate_u64(SIGN_BYTES[usize::from(g.signs[2 * h + 1])]),
                ));
                out[2 * ib + h] = if C::SHIFTED {
                    vaddq_s8(vshlq_n_s8::<3>(grid), signs)
                } else {
                    vmulq_s8(grid, signs)
                };
            }
        }
        out
    }
    #[inline(always)]
    unsafe fn scales(b: *const u8) -> ([i32; 16], [i32; 16]) {
        let block = std::slice::from_raw_parts(b, C::SIZE);
        let mut ls = [0i32; 16];
        for ib in 0..8 {
            let g = C::group(block, ib);
            ls[2 * ib] = i32::from(g.ls[0]);
            ls[2 * ib + 1] = i32::from(g.ls[1]);
        }
        (ls, [0; 16])
    }
    #[inline(always)]
    unsafe fn combine(x: *const u8, y: *const u8, isum: i32, _summ: i32) -> f32 {
        C::d(std::slice::from_raw_parts(x, C::SIZE)) * q8k_d(y) * (isum as f32 * C::K)
    }
}

/// `R` weight rows of format `K` times `T` Q8_K activation rows, `nb` blocks each: `out[r][t]`
/// equals the portable one-row kernel's result.
pub(super) struct KTile<K, const R: usize, const T: usize> {
    nb: usize,
    w: [*const u8; R],
    a: [*const u8; T],
    format: PhantomData<K>,
}

impl<K, const R: usize, const T: usize> KTile<K, R, T> {
    /// The kernel for `nb` blocks of the weight rows `w` and activation rows `a` (for
    /// [`super::run`], which requires `nb` whole blocks in every row).
    pub(super) fn new(nb: usize, w: [*const u8; R], a: [*const u8; T]) -> Self {
        Self {
            nb,
            w,
            a,
            format: PhantomData,
        }
    }
}

impl<K: KFormat, const R: usize, const T: usize> Kernel for KTile<K, R, T> {
    type Out = [[f32; T]; R];

    /// # Safety
    /// As [`Kernel::run`]; every row must hold `nb` whole blocks.
    #[inline(always)]
    unsafe fn run<const DOT: bool, const MM: bool>(self) -> Self::Out {
        let mut sum = [[0f32; T]; R];
        for b in 0..self.nb {
            let ab = self.a.map(|p| p.add(BlockQ8_K::SIZE * b));
            let xs = self.w.map(|p| p.add(K::SIZE * b));
            if MM && R.is_multiple_of(2) && T.is_multiple_of(2) {
                let isum = isums_smmla::<K, R, T>(xs, ab);
                for ((row, &x), isum) in sum.iter_mut().zip(&xs).zip(&isum) {
                    let mins = K::scales(x).1;
                    for ((s, &y), &i) in row.iter_mut().zip(&ab).zip(isum) {
                        let summ = if K::MINS { min_sum(&mins, y) } else { 0 };
                        *s += K::combine(x, y, i, summ);
                    }
                }
                continue;
            }
            for (row, x) in sum.iter_mut().zip(xs) {
                let q = K::values(x);
                let (sc, mins) = K::scales(x);
                for t in 0..T {
                    let y = ab[t].add(BlockQ8_K::QS).cast::<i8>();
                    let yv = |g: usize| vld1q_s8(y.add(16 * g));
                    let mut acc = vdupq_n_s32(0);
                    if K::SCALE32 {
                        for j in 0..8 {
                            let p = dot16::<DOT>(vdupq_n_s32(0), q[2 * j], yv(2 * j));
                            let p = dot16::<DOT>(p, q[2 * j + 1], yv(2 * j + 1));
                            acc = vmlaq_n_s32(acc, p, sc[2 * j]);
                        }
                    } else {
                        for g in 0..16 {
                            let p = dot16::<DOT>(vdupq_n_s32(0), q[g], yv(g));
                            acc = vmlaq_n_s32(acc, p, sc[g]);
                        }
                    }
                    let isum = vaddvq_s32(acc);
                    let summ = if K::MINS { min_sum(&mins, ab[t]) } else { 0 };
                    row[t] += K::combine(x, ab[t], isum, summ);
                }
            }
        }
        sum
    }
}

/// The integer sums `Σ_g sc_g · Σ q·y` of the weight blocks `xs` (in row pairs) with the Q8_K
/// blocks `ab` (in token pairs): per 16-element group, two `smmla` give the 2×2 dot products of
/// a row pair and a token pair, scaled by each row's group scale.
///
/// # Safety
/// NEON and i8mm, compiled with them; whole blocks at every pointer; `R` and `T` even.
#[inline(always)]
unsafe fn isums_smmla<K: KFormat, const R: usize, const T: usize>(
    xs: [*const u8; R],
    ab: [*const u8; T],
) -> [[i32; T]; R] {
    let mut isum = [[0i32; T]; R];
    for r in (0..R).step_by(2) {
        let (q0, q1) = (K::values(xs[r]), K::values(xs[r + 1]));
        let (s0, s1) = (K::scales(xs[r]).0, K::scales(xs[r + 1]).0);
        for t in (0..T).step_by(2) {
            let y0 = ab[t].add(BlockQ8_K::QS).cast::<i8>();
            let y1 = ab[t + 1].add(BlockQ8_K::QS).cast::<i8>();
            let mut acc = vdupq_n_s32(0);
            for g in 0..16 {
                let (u0, u1) = (vld1q_s8(y0.add(16 * g)), vld1q_s8(y1.add(16 * g)));
                let lo = pair(q0[g], q1[g], false);
                let p = smmla(vdupq_n_s32(0), lo, pair(u0, u1, false));
                let p = smmla(p, pair(q0[g], q1[g], true), pair(u0, u1, true));
                // Lanes: (r, t), (r, t + 1), (r + 1, t), (r + 1, t + 1).
                let scale = [s0[g], s0[g], s1[g], s1[g]];
                acc = vmlaq_s32(acc, p, vld1q_s32(scale.as_ptr()));
            }
            isum[r][t] = vgetq_lane_s32::<0>(acc);
            isum[r][t + 1] = vgetq_lane_s32::<1>(acc);
            isum[r + 1][t] = vgetq_lane_s32::<2>(acc);
            isum[r + 1][t + 1] = vgetq_lane_s32::<3>(acc);
        }
    }
    isum
}

/// `Σ_g mins[g] · bsum[g]` over the 16 group sums of the Q8_K block at `y`.
///
/// # Safety
/// NEON; a whole Q8_K block at `y`.
#[inline(always)]
unsafe fn min_sum(mins: &[i32; 16], y: *const u8) -> i32 {
    let bs = y.add(BlockQ8_K::BSUMS);
    let mut acc = vdupq_n_s32(0);
    for h in 0..2 {
        let s = vreinterpretq_s16_u8(vld1q_u8(bs.add(16 * h)));
        let m = mins.as_ptr().add(8 * h);
        acc = vmlaq_s32(acc, vmovl_s16(vget_low_s16(s)), vld1q_s32(m));
        acc = vmlaq_s32(acc, vmovl_high_s16(s), vld1q_s32(m.add(4)));
    }
    vaddvq_s32(acc)
}

/// Quantizes activations to Q8_K like `kquants::quantize_q8_k` (same bytes).
///
/// # Safety
/// NEON. Whole blocks of `src` and `dst` are used (as in the portable quantizer).
#[target_feature(enable = "neon")]
pub(in crate::quant) unsafe fn quantize_q8_k(src: &[f32], dst: &mut [u8]) {
    type B = BlockQ8_K;
    for (x, b) in src.chunks_exact(QK_K).zip(dst.chunks_exact_mut(B::SIZE)) {
        let xp = x.as_ptr();
        // max with 0 and `fmaxnm` (NaN loses), as the portable strict `>` scan from 0.
        let mut m = vdupq_n_f32(0.0);
        for i in 0..QK_K / 4 {
            m = vmaxnmq_f32(m, vabsq_f32(vld1q_f32(xp.add(4 * i))));
        }
        let amax = vmaxnmvq_f32(m);
        if amax == 0.0 {
            b.fill(0);
            continue;
        }
        // The portable scan keeps the first element of largest magnitude, with its sign.
        let max = x.iter().copied().find(|v| v.abs() == amax).unwrap_or(amax);
        let iscale = -127.0 / max;
        let qs = b.as_mut_ptr().add(B::QS).cast::<i8>();
        for g in 0..QK_K / 16 {
            // round to nearest even, `as i32` (saturating; NaN → 0), min 127, `as i8`
            // (truncating).
            let q: [int32x4_t; 4] = std::array::from_fn(|k| {
                let v = vmulq_n_f32(vld1q_f32(xp.add(16 * g + 4 * k)), iscale);
                vminq_s32(vcvtnq_s32_f32(v), vdupq_n_s32(127))
            });
            let lo = vcombine_s16(vmovn_s32(q[0]), vmovn_s32(q[1]));
            let hi = vcombine_s16(vmovn_s32(q[2]), vmovn_s32(q[3]));
            let q8 = vcombine_s8(vmovn_s16(lo), vmovn_s16(hi));
            vst1q_s8(qs.add(16 * g), q8);
            let s = vaddlvq_s8(q8);
            let at = B::BSUMS + 2 * g;
            b[at..at + 2].copy_from_slice(&s.to_le_bytes());
        }
        b[B::D..B::D + 4].copy_from_slice(&(1.0 / iscale).to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use crate::quant::{arm as neon, blocks::QK, float::f16_le, kquants, legacy};

    /// `neon::half` (`fcvt`, NaNs through the portable path) equals the portable conversion
    /// bit for bit on every one of the 65,536 halves (subnormals, infinities, both zeros, NaNs).
    #[test]
    fn half_conversion_is_exact_for_every_half() {
        for bits in 0..=u16::MAX {
            let b = bits.to_le_bytes();
            // SAFETY: `b` holds 2 readable bytes.
            let ours = unsafe { neon::half(b.as_ptr()) };
            assert_eq!(ours.to_bits(), f16_le(b).to_bits(), "half {bits:#06x}");
        }
    }

    /// `neon::halves4` equals the portable conversion lane by lane on every half in every lane,
    /// with NaNs next to ordinary values (a NaN sends its group through the portable path).
    #[test]
    fn four_half_conversion_is_exact_for_every_half() {
        for bits in 0..=u16::MAX {
            let lanes = [bits, bits.rotate_left(4), bits ^ 0x7e00, !bits];
            for shift in 0..4 {
                let h: [[u8; 2]; 4] = std::array::from_fn(|k| lanes[(k + shift) % 4].to_le_bytes());
                let mut ours = [0f32; 4];
                // SAFETY: NEON is part of aarch64; each pointer has 2 readable bytes.
                unsafe {
                    let v = neon::halves4(std::array::from_fn(|k| h[k].as_ptr()));
                    std::arch::aarch64::vst1q_f32(ours.as_mut_ptr(), v);
                }
                for k in 0..4 {
                    assert_eq!(ours[k].to_bits(), f16_le(h[k]).to_bits(), "{h:?} lane {k}");
                }
            }
        }
    }

    #[test]
    fn neon_quantizers_equal_the_portable_ones() {
        if !std::arch::is_aarch64_feature_detected!("neon") {
            eprintln!("no NEON: nothing to compare");
            return;
        }
        for x in kquants::quantizer_test_rows() {
            let (mut a, mut b) = (vec![1u8; 292], vec![2u8; 292]);
            // SAFETY: NEON was detected; whole blocks.
            unsafe { super::quantize_q8_k(&x, &mut a) };
            kquants::quantize_q8_k(&x, &mut b);
            assert_eq!(a, b, "Q8_K of {x:?}");
            for x in x.chunks_exact(QK) {
                let (mut a, mut b) = ([1u8; QK], [2u8; QK]);
                // SAFETY: as above.
                let ra = unsafe { neon::quantize_q8_block(x, &mut a) };
                let rb = legacy::quantize_q8_block(x, &mut b);
                assert_eq!(
                    (ra.0.to_bits(), ra.1, a),
                    (rb.0.to_bits(), rb.1, b),
                    "{x:?}"
                );
            }
        }
    }
}
