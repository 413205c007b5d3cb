//! The codebook formats × Q8_K (AVX2 + FMA + F16C): `R` weight rows × `T` tokens per call,
//! each weight super-block read once for all tokens.
//!
//! A block's groups come from the format's [`Codebook`] impl (the portable code's reading):
//! the 32 grid bytes and the ±1 sign bytes ([`SIGN_BYTES`]) go into one register each. For
//! IQ2/IQ3 the magnitudes multiply the token's quants with the signs moved onto them
//! (`maddubs(|g|, ±y)`); for IQ1 the values `8·g ± 1` are formed in the register and
//! multiplied with the sign trick. `madd` by the halves' scales gives exact i32 lanes, summed
//! exactly per super-block; the row's f32 sum adds `(d_w · d_a) · (Σ · K)` per super-block in
//! order, as the portable kernel (`iquants::dot`), so the results are bit-identical.
//!
//! Safety: every `unsafe fn` here requires AVX2, FMA and F16C (checked by the dispatcher) and
//! `nb` whole blocks in every row.

use std::arch::x86_64::*;

use super::{load, prefetch};
use crate::quant::blocks::BlockQ8_K;
use crate::quant::iquants::{Codebook, SIGN_BYTES};
use crate::quant::kquants::q8k_d;

/// Exact sum of 8 i32 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn hsum_epi32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01>(s));
    _mm_cvtsi128_si32(s)
}

/// Four u64 as one register, the first in the lowest bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn quad(v: [u64; 4]) -> __m256i {
    _mm256_set_epi64x(v[3] as i64, v[2] as i64, v[1] as i64, v[0] as i64)
}

/// `R` rows `x` of the codebook format `C` · `T` Q8_K rows `y`, `nb` super-blocks each.
///
/// # Safety
/// AVX2, FMA and F16C; every row holds `nb` whole blocks.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn rows<C: Codebook, const R: usize, const T: usize>(
    nb: usize,
    x: [*const u8; R],
    y: [*const u8; T],
) -> [[f32; T]; R] {
    type A = BlockQ8_K;
    let mut out = [[0f32; T]; R];
    for b in 0..nb {
        let ya = y.map(|p| p.add(A::SIZE * b));
        for r in 0..R {
            let xb = x[r].add(C::SIZE * b);
            prefetch(xb, C::SIZE);
            let block = std::slice::from_raw_parts(xb, C::SIZE);
            let mut acc = [_mm256_setzero_si256(); T];
            for ib in 0..8 {
                let g = C::group(block, ib);
                let grid = quad(g.grid);
                let signs = quad(g.signs.map(|s| SIGN_BYTES[usize::from(s)]));
                let scale = _mm256_set_m128i(
                    _mm_set1_epi16(i16::from(g.ls[1])),
                    _mm_set1_epi16(i16::from(g.ls[0])),
                );
                // Unsigned magnitudes and the signs to put on the quants.
                let (ux, s) = if C::SHIFTED {
                    let x2 = _mm256_add_epi8(grid, grid);
                    let x4 = _mm256_add_epi8(x2, x2);
                    let v = _mm256_add_epi8(_mm256_add_epi8(x4, x4), signs);
                    (_mm256_sign_epi8(v, v), v)
                } else {
                    (grid, signs)
                };
                for t in 0..T {
                    let yq = load(ya[t].add(A::QS + 32 * ib));
                    let pairs = _mm256_maddubs_epi16(ux, _mm256_sign_epi8(yq, s));
                    acc[t] = _mm256_add_epi32(acc[t], _mm256_madd_epi16(pairs, scale));
                }
            }
            let dx = C::d(block);
            for t in 0..T {
                let dy = q8k_d(std::slice::from_raw_parts(ya[t], A::SIZE));
                out[r][t] += dx * dy * (hsum_epi32(acc[t]) as f32 * C::K);
            }
        }
    }
    out
}

/// One row of the codebook format `C` · one Q8_K row.
///
/// # Safety
/// As [`rows`].
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot<C: Codebook>(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    rows::<C, 1, 1>(nb, [x.as_ptr()], [y.as_ptr()])[0][0]
}
