//! The IQ4_XS × Q8_K kernels (AVX2 + FMA + F16C): `R` weight rows × `T` tokens per call, each
//! weight super-block unpacked once for all tokens.
//!
//! Arithmetic: the portable kernel's (`nonlinear::dot_iq4_xs_q8_k`). The levels of a 32-value
//! group (one byte shuffle of its nibbles) times the token's quants, summed in pairs by
//! `maddubs` (sign trick; pairs of level·quant products stay below 2¹⁵) and scaled by the
//! group's `ls − 32` in the same `madd`, give exact i32 lanes; a super-block's lanes are summed
//! exactly to one integer, and the row's f32 sum adds `(d_w · d_a) · total` per super-block in
//! order, so every result is bit-identical to the portable kernel.
//!
//! Safety: every `unsafe fn` here requires AVX2, FMA and F16C (checked by the dispatcher) and
//! `nb` whole blocks in every row.

use std::arch::x86_64::*;

use super::codebook::hsum_epi32;
use super::{half, level_table, load, nibbles, prefetch};
use crate::quant::blocks::{BlockIQ4_XS, BlockQ8_K};
use crate::quant::kquants::q8k_d;
use crate::quant::nonlinear::{iq4xs_scales, IQ4NL_LEVELS};

/// `R` IQ4_XS rows `x` · `T` Q8_K rows `y`, `nb` super-blocks each.
///
/// # Safety
/// AVX2, FMA and F16C; every row holds `nb` whole blocks.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn rows<const R: usize, const T: usize>(
    nb: usize,
    x: [*const u8; R],
    y: [*const u8; T],
) -> [[f32; T]; R] {
    type W = BlockIQ4_XS;
    type A = BlockQ8_K;
    let table = level_table(&IQ4NL_LEVELS, false);
    let mut out = [[0f32; T]; R];
    for b in 0..nb {
        let ya = y.map(|p| p.add(A::SIZE * b));
        for r in 0..R {
            let xb = x[r].add(W::SIZE * b);
            prefetch(xb, W::SIZE);
            let scales = iq4xs_scales(std::slice::from_raw_parts(xb, W::SIZE));
            let mut acc = [_mm256_setzero_si256(); T];
            for (ib, &ls) in scales.iter().enumerate() {
                let q = _mm256_shuffle_epi8(table, nibbles(xb.add(W::QS + 16 * ib)));
                let uq = _mm256_sign_epi8(q, q);
                let scale = _mm256_set1_epi16(ls as i16);
                for t in 0..T {
                    let yq = load(ya[t].add(A::QS + 32 * ib));
                    let pairs = _mm256_maddubs_epi16(uq, _mm256_sign_epi8(yq, q));
                    acc[t] = _mm256_add_epi32(acc[t], _mm256_madd_epi16(pairs, scale));
                }
            }
            let dx = half(xb.add(W::D));
            for t in 0..T {
                let dy = q8k_d(std::slice::from_raw_parts(ya[t], A::SIZE));
                out[r][t] += dx * dy * hsum_epi32(acc[t]) as f32;
            }
        }
    }
    out
}

/// IQ4_XS × Q8_K, one row.
///
/// # Safety
/// As [`rows`].
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    rows::<1, 1>(nb, [x.as_ptr()], [y.as_ptr()])[0][0]
}
