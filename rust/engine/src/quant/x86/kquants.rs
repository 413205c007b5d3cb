//! AVX2 kernels for the K formats (Q2_K..Q6_K × Q8_K). Each super-block's integer sum is exact
//! and is combined with the scales exactly as the portable kernels do (same result bit for
//! bit), which lets the AVX-512 Q4_K and Q6_K prompt tiles (`klanes`) hold tokens in their
//! lanes.
//!
//! Safety: requires AVX2, FMA and F16C, and `nb` whole super-blocks in both rows.

use std::arch::x86_64::*;

use super::{half, load, prefetch};
use crate::quant::blocks::{BlockQ2_K, BlockQ3_K, BlockQ4_K, BlockQ5_K, BlockQ6_K, BlockQ8_K};
use crate::quant::float::f16_at;
use crate::quant::kquants::{
    q3k_scales, q4k_scales_mins, q8k_bsum, q8k_d, Q45K_D, Q45K_DMIN, Q45K_SCALES,
};

/// The Q8_K block `b` of the activation row at `y`.
#[inline]
unsafe fn q8k_block<'a>(y: *const u8, b: usize) -> &'a [u8] {
    std::slice::from_raw_parts(y.add(BlockQ8_K::SIZE * b), BlockQ8_K::SIZE)
}

/// `Σ_j m_j · (bsum_{2j} + bsum_{2j+1})` of a Q8_K block at `y` (exact; as `q45k_min_sum`),
/// with the eight mins widened to i32 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn min_sum(mins: __m256i, y: *const u8) -> i32 {
    let bsums = _mm256_loadu_si256(y.add(BlockQ8_K::BSUMS).cast());
    let pairs = _mm256_madd_epi16(bsums, _mm256_set1_epi16(1));
    hsum_epi32(_mm256_mullo_epi32(pairs, mins))
}

/// Generates the Q4_K/Q5_K multi-activation kernel for an instruction set (`$vnni`: the i16
/// products are summed into i32 lanes with `vpdpwssd` instead of `pmaddwd` + add; the integer
/// sums are the same).
macro_rules! q45k_rows_kernel {
    ($name:ident, $features:literal, $vnni:expr) => {
        /// `R` Q4_K (`FIVE == false`) or Q5_K weight rows × `T` Q8_K activation rows: each
        /// super-block is unpacked once and used for every token; per (row, token) the
        /// operations are those of the one-row kernel (`R == T == 1`), so results are identical.
        #[inline]
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $name<const FIVE: bool, const R: usize, const T: usize>(
            nb: usize,
            x: [*const u8; R],
            y: [*const u8; T],
        ) -> [[f32; T]; R] {
            let size = if FIVE {
                BlockQ5_K::SIZE
            } else {
                BlockQ4_K::SIZE
            };
            let m4 = _mm256_set1_epi8(0x0f);
            let one = _mm256_set1_epi8(1);
            let mut acc = [[0f32; T]; R];
            for b in 0..nb {
                for r in 0..R {
                    let xp = x[r].add(size * b);
                    prefetch(xp, size);
                    let xb = std::slice::from_raw_parts(xp, size);
                    let (sc, m) = q4k_scales_mins(&xb[Q45K_SCALES..Q45K_SCALES + 12]);
                    let dmin = half(xp.add(Q45K_DMIN));
                    let mins = _mm256_cvtepu8_epi32(_mm_loadl_epi64(m.as_ptr().cast()));
                    let qs = xp.add(if FIVE { BlockQ5_K::QS } else { BlockQ4_K::QS });
                    let hbits = if FIVE {
                        load(xp.add(BlockQ5_K::QH))
                    } else {
                        _mm256_setzero_si256()
                    };
                    let mut sumi = [_mm256_setzero_si256(); T];
                    let mut sumh = [_mm256_setzero_si256(); T];
                    for j in 0..4 {
                        let bits = load(qs.add(32 * j));
                        let mut lo = _mm256_and_si256(bits, m4);
                        let mut hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
                        if FIVE {
                            let h = _mm256_srl_epi16(hbits, _mm_cvtsi32_si128(2 * j as i32));
                            let h0 = _mm256_slli_epi16(_mm256_and_si256(h, one), 4);
                            lo = _mm256_or_si256(lo, h0);
                            let h = _mm256_srli_epi16(h, 1);
                            let h1 = _mm256_slli_epi16(_mm256_and_si256(h, one), 4);
                            hi = _mm256_or_si256(hi, h1);
                        }
                        let slo = _mm256_set1_epi16(i16::from(sc[2 * j]));
                        let shi = _mm256_set1_epi16(i16::from(sc[2 * j + 1]));
                        for t in 0..T {
                            let q8 = y[t].add(BlockQ8_K::SIZE * b + BlockQ8_K::QS);
                            let plo = _mm256_maddubs_epi16(lo, load(q8.add(64 * j)));
                            let phi = _mm256_maddubs_epi16(hi, load(q8.add(64 * j + 32)));
                            sumi[t] = if $vnni {
                                // Two chains (lo, hi) so that the dependent vpdpwssd overlap.
                                sumh[t] = _mm256_dpwssd_epi32(sumh[t], phi, shi);
                                _mm256_dpwssd_epi32(sumi[t], plo, slo)
                            } else {
                                let plo = _mm256_madd_epi16(plo, slo);
                                let phi = _mm256_madd_epi16(phi, shi);
                                _mm256_add_epi32(sumi[t], _mm256_add_epi32(plo, phi))
                            };
                        }
                    }
                    let dx = half(xp.add(Q45K_D));
                    for t in 0..T {
                        let yb = q8k_block(y[t], b);
                        let isum = hsum_epi32(_mm256_add_epi32(sumi[t], sumh[t]));
                        let summ = min_sum(mins, yb.as_ptr());
                        let yd = q8k_d(yb);
                        acc[r][t] += yd * dx * isum as f32 - yd * dmin * summ as f32;
                    }
                }
            }
            acc
        }
    };
}

q45k_rows_kernel!(dot_q45_k_rows, "avx2,fma,f16c", false);
q45k_rows_kernel!(
    dot_q45_k_rows_vnni,
    "avx2,fma,f16c,avx512f,avx512vl,avx512vnni",
    true
);

/// Q4_K × Q8_K.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_q4_k(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    dot_q45_k_rows::<false, 1, 1>(nb, [x.as_ptr()], [y.as_ptr()])[0][0]
}

/// Q5_K × Q8_K.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_q5_k(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    dot_q45_k_rows::<true, 1, 1>(nb, [x.as_ptr()], [y.as_ptr()])[0][0]
}

/// Generates the Q6_K multi-activation kernel for an instruction set (see
/// `q45k_rows_kernel`).
macro_rules! q6k_rows_kernel {
    ($name:ident, $features:literal, $vnni:expr) => {
        /// `R` Q6_K weight rows × `T` Q8_K activation rows (quants used unsigned, 0..=63, with
        /// the offset 32 subtracted as `32·Σy`); per (row, token) the same operations as with
        /// `R == T == 1`.
        #[inline]
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $name<const R: usize, const T: usize>(
            nb: usize,
            x: [*const u8; R],
            y: [*const u8; T],
        ) -> [[f32; T]; R] {
            let m4 = _mm256_set1_epi8(0x0f);
            let m30 = _mm256_set1_epi8(0x30);
            let k32 = _mm256_set1_epi8(32);
            let mut acc = [[0f32; T]; R];
            for b in 0..nb {
                for r in 0..R {
                    type W = BlockQ6_K;
                    let xp = x[r].add(W::SIZE * b);
                    prefetch(xp, W::SIZE);
                    let mut sumi = [_mm256_setzero_si256(); T];
                    let mut sumh = [_mm256_setzero_si256(); T];
                    for n in 0..2 {
                        let l0 = load(xp.add(W::QL + 64 * n));
                        let l1 = load(xp.add(W::QL + 64 * n + 32));
                        let h = load(xp.add(W::QH + 32 * n));
                        let q = [
                            _mm256_or_si256(
                                _mm256_and_si256(l0, m4),
                                _mm256_and_si256(_mm256_slli_epi16(h, 4), m30),
                            ),
                            _mm256_or_si256(
                                _mm256_and_si256(l1, m4),
                                _mm256_and_si256(_mm256_slli_epi16(h, 2), m30),
                            ),
                            _mm256_or_si256(
                                _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                _mm256_and_si256(h, m30),
                            ),
                            _mm256_or_si256(
                                _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                _mm256_and_si256(_mm256_srli_epi16(h, 2), m30),
                            ),
                        ];
                        for (k, q) in q.into_iter().enumerate() {
                            let g = 8 * n + 2 * k;
                            let s0 = i16::from(*xp.add(W::SCALES + g) as i8);
                            let s1 = i16::from(*xp.add(W::SCALES + g + 1) as i8);
                            let scales = _mm256_set_m128i(_mm_set1_epi16(s1), _mm_set1_epi16(s0));
                            for t in 0..T {
                                let at = BlockQ8_K::SIZE * b + BlockQ8_K::QS + 128 * n + 32 * k;
                                let yv = load(y[t].add(at));
                                let p = _mm256_sub_epi16(
                                    _mm256_maddubs_epi16(q, yv),
                                    _mm256_maddubs_epi16(k32, yv),
                                );
                                sumi[t] = if $vnni {
                                    if k % 2 == 1 {
                                        sumh[t] = _mm256_dpwssd_epi32(sumh[t], p, scales);
                                        sumi[t]
                                    } else {
                                        _mm256_dpwssd_epi32(sumi[t], p, scales)
                                    }
                                } else {
                                    _mm256_add_epi32(sumi[t], _mm256_madd_epi16(p, scales))
                                };
                            }
                        }
                    }
                    let dx = half(xp.add(W::D));
                    for t in 0..T {
                        let isum = hsum_epi32(_mm256_add_epi32(sumi[t], sumh[t]));
                        acc[r][t] += dx * q8k_d(q8k_block(y[t], b)) * isum as f32;
                    }
                }
            }
            acc
        }
    };
}

q6k_rows_kernel!(dot_q6_k_rows, "avx2,fma,f16c", false);
q6k_rows_kernel!(
    dot_q6_k_rows_vnni,
    "avx2,fma,f16c,avx512f,avx512vl,avx512vnni",
    true
);

/// Q6_K × Q8_K.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_q6_k(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    dot_q6_k_rows::<1, 1>(nb, [x.as_ptr()], [y.as_ptr()])[0][0]
}

/// Horizontal sum of 8 i32 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn hsum_epi32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01_00_11_10));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b10_11_00_01));
    _mm_cvtsi128_si32(s)
}

/// `Σ_g scale(g) · Σ u·y` over the 16 groups of 16 of one Q2_K/Q3_K super-block, where `u` are
/// the unsigned 2-bit quants (plus `4·h` for Q3_K's high-bit mask when `hmask` is given).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn two_bit_isum(
    qs: *const u8,
    hmask: Option<*const u8>,
    q8: *const u8,
    scale: &[i32; 16],
) -> i32 {
    let m3 = _mm256_set1_epi8(3);
    let one = _mm256_set1_epi8(1);
    let hbits = match hmask {
        Some(p) => load(p),
        None => _mm256_setzero_si256(),
    };
    let mut sumi = _mm256_setzero_si256();
    for n in 0..2 {
        let bits = load(qs.add(32 * n));
        for j in 0..4 {
            let shift = _mm_cvtsi32_si128(2 * j as i32);
            let mut u = _mm256_and_si256(_mm256_srl_epi16(bits, shift), m3);
            if hmask.is_some() {
                let hshift = _mm_cvtsi32_si128((4 * n + j) as i32);
                let h = _mm256_and_si256(_mm256_srl_epi16(hbits, hshift), one);
                u = _mm256_or_si256(u, _mm256_slli_epi16(h, 2));
            }
            let p = _mm256_maddubs_epi16(u, load(q8.add(128 * n + 32 * j)));
            let g = 8 * n + 2 * j;
            let scales = _mm256_set_m128i(
                _mm_set1_epi16(scale[g + 1] as i16),
                _mm_set1_epi16(scale[g] as i16),
            );
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, scales));
        }
    }
    hsum_epi32(sumi)
}

/// Q2_K × Q8_K.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_q2_k(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let mut sum = 0f32;
    type W = BlockQ2_K;
    for (xb, yb) in x
        .chunks_exact(W::SIZE)
        .zip(y.chunks_exact(BlockQ8_K::SIZE))
        .take(nb)
    {
        let yd = q8k_d(yb);
        let (dall, dmin) = (yd * f16_at(xb, W::D), yd * f16_at(xb, W::DMIN));
        let sc = &xb[W::SCALES..W::SCALES + 16];
        let scale: [i32; 16] = std::array::from_fn(|g| i32::from(sc[g] & 0x0f));
        let summ: i32 = (0..16)
            .map(|g| i32::from(sc[g] >> 4) * q8k_bsum(yb, g))
            .sum();
        let (qs, q8) = (xb.as_ptr().add(W::QS), yb.as_ptr().add(BlockQ8_K::QS));
        let isum = two_bit_isum(qs, None, q8, &scale);
        sum += dall * isum as f32 - dmin * summ as f32;
    }
    sum
}

/// Q3_K × Q8_K: quants are used unsigned (`q + 4`, 0..=7) and `4·Σ_g sc_g·bsum_g` is subtracted.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_q3_k(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let mut sum = 0f32;
    type W = BlockQ3_K;
    for (xb, yb) in x
        .chunks_exact(W::SIZE)
        .zip(y.chunks_exact(BlockQ8_K::SIZE))
        .take(nb)
    {
        let scale = q3k_scales(&xb[W::SCALES..W::SCALES + 12]);
        let offset: i32 = (0..16).map(|g| scale[g] * q8k_bsum(yb, g)).sum();
        let (xp, q8) = (xb.as_ptr(), yb.as_ptr().add(BlockQ8_K::QS));
        let isum = two_bit_isum(xp.add(W::QS), Some(xp.add(W::HMASK)), q8, &scale) - 4 * offset;
        sum += f16_at(xb, W::D) * q8k_d(yb) * isum as f32;
    }
    sum
}
