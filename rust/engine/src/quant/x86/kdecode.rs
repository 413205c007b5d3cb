//! AVX-512 decoding kernels for Q4_K and Q6_K: `R` weight rows against 1 to 4 Q8_K activation
//! rows, two 32-quant chunks per 512-bit `pmaddubsw`/`vpdpwssd` (half the instructions of the
//! 256-bit kernels in `kquants`). The table passes four rows a quarter of the matrix apart:
//! four sequential streams read memory faster than one.
//!
//! Bit identity with the one-row kernels of `kquants`: per (row, token) and super-block the
//! integer sums are exact (integer additions may be regrouped freely) and the floating-point
//! operations are that kernel's, in its order (the portable kernel's) per super-block: Q4_K
//! `acc += (d_y · d_x) · float(isum) − (d_y · dmin) · float(min_sum)`, Q6_K
//! `acc += (d_x · d_y) · float(isum)`.
//!
//! Safety: requires AVX2, FMA, F16C and AVX-512 F/VL/BW/VNNI, and `nb` whole super-blocks in
//! every row.

use std::arch::x86_64::*;

use super::kquants::hsum_epi32;
use super::ktile::{
    dpwssd, half, halves, q4k_scales_mins_words, q8k_at, q8k_scale, word_mask4, Q6kBits,
};
use super::{load, prefetch};
use crate::quant::blocks::{BlockQ4_K, BlockQ6_K, BlockQ8_K};
use crate::quant::kquants::{Q45K_D, Q45K_SCALES};

/// The eight i32 lanes of `v`'s two 256-bit halves added (exact).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f")]
unsafe fn fold(v: __m512i) -> __m256i {
    _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64::<1>(v))
}

/// `R` Q4_K rows `x` × `T` Q8_K rows `y`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(super) unsafe fn q4k<const R: usize, const T: usize>(
    nb: usize,
    x: [*const u8; R],
    y: [*const u8; T],
) -> [[f32; T]; R] {
    let m4 = _mm512_set1_epi8(0x0f);
    // Low nibbles in the low 256 bits, high nibbles in the high 256 bits.
    let nibble_shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    let mut acc = [[0f32; T]; R];
    for b in 0..nb {
        for r in 0..R {
            let xp = x[r].add(BlockQ4_K::SIZE * b);
            prefetch(xp, BlockQ4_K::SIZE);
            let (d, dmin) = halves(xp.add(Q45K_D));
            let (sc, m) = q4k_scales_mins_words(xp.add(Q45K_SCALES));
            let scales = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(sc as i64)));
            // Each min twice (i16 pairs), for `pmaddwd` with the pairwise group sums.
            let m = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(m as i64));
            let m2 = _mm256_or_si256(m, _mm256_slli_epi32(m, 16));
            let mut sumi = [_mm512_setzero_si512(); T];
            for j in 0..4 {
                // Sub-blocks 2j (low nibbles, low half) and 2j + 1 (high nibbles, high half).
                let bits = _mm512_broadcast_i64x4(load(xp.add(BlockQ4_K::QS + 32 * j)));
                let q = _mm512_and_si512(_mm512_srlv_epi16(bits, nibble_shift), m4);
                let w = 2 * j as i32;
                let sc = _mm512_shuffle_epi8(scales, word_mask4([w, w, w + 1, w + 1]));
                for t in 0..T {
                    let at = q8k_at(b) + BlockQ8_K::QS + 64 * j;
                    let yv = _mm512_loadu_si512(y[t].add(at).cast());
                    sumi[t] = dpwssd(sumi[t], _mm512_maddubs_epi16(q, yv), sc);
                }
            }
            for t in 0..T {
                let yb = y[t].add(q8k_at(b));
                let bsums = load(yb.add(BlockQ8_K::BSUMS));
                let summ = hsum_epi32(_mm256_madd_epi16(bsums, m2));
                let isum = hsum_epi32(fold(sumi[t]));
                let yd = q8k_scale(yb);
                acc[r][t] += yd * d * isum as f32 - yd * dmin * summ as f32;
            }
        }
    }
    acc
}

/// `R` Q6_K rows `x` × `T` Q8_K rows `y`: quants used unsigned (0..=63) with the offset 32
/// subtracted as `32·y`, as the 256-bit kernel does.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(super) unsafe fn q6k<const R: usize, const T: usize>(
    nb: usize,
    x: [*const u8; R],
    y: [*const u8; T],
) -> [[f32; T]; R] {
    type W = BlockQ6_K;
    let bits = Q6kBits::new();
    let k32 = _mm512_set1_epi8(32);
    let mut acc = [[0f32; T]; R];
    for b in 0..nb {
        for r in 0..R {
            let xp = x[r].add(W::SIZE * b);
            prefetch(xp, W::SIZE);
            let mut sumi = [_mm512_setzero_si512(); T];
            for n in 0..2 {
                // Scales 8n..8n+8 as i16 in every 128-bit lane.
                let sc = _mm_cvtepi8_epi16(_mm_loadl_epi64(xp.add(W::SCALES + 8 * n).cast()));
                let sc = _mm512_broadcast_i32x4(sc);
                // Chunks 2p and 2p + 1 (32 quants each) per vector.
                for p in 0..2 {
                    let q = bits.chunks(xp, n, p);
                    let g = 4 * p as i32;
                    let scales = _mm512_shuffle_epi8(sc, word_mask4([g, g + 1, g + 2, g + 3]));
                    for t in 0..T {
                        let at = q8k_at(b) + BlockQ8_K::QS + 128 * n + 64 * p;
                        let yv = _mm512_loadu_si512(y[t].add(at).cast());
                        let prod = _mm512_sub_epi16(
                            _mm512_maddubs_epi16(q, yv),
                            _mm512_maddubs_epi16(k32, yv),
                        );
                        sumi[t] = dpwssd(sumi[t], prod, scales);
                    }
                }
            }
            let dx = half(xp.add(W::D));
            for t in 0..T {
                let isum = hsum_epi32(fold(sumi[t]));
                acc[r][t] += dx * q8k_scale(y[t].add(q8k_at(b))) * isum as f32;
            }
        }
    }
    acc
}
