//! TQ2_0 × Q8_K (AVX2 + FMA + F16C): `R` weight rows × `T` tokens per call, each weight
//! super-block read once for all tokens. llama.cpp's arithmetic, with the value `q − 1` of
//! each 2-bit digit `q` split as `Σ q·y − Σ y`: the digits multiply the quants directly
//! (`maddubs`, digits 0..=3 as unsigned bytes), and each token's `Σ y` over the super-block is
//! taken once for all rows. Both sums are exact integers, so the super-block's
//! `Σ (q − 1)·y` is the portable kernel's (`iquants::dot` over `ternary::TQ2`), and the row's
//! f32 sum adds `(d_w · d_a) · Σ` per super-block in order, as it does: bit-identical.
//!
//! Safety: every `unsafe fn` here requires AVX2, FMA and F16C (checked by the dispatcher) and
//! `nb` whole blocks in every row.

use std::arch::x86_64::*;

use super::codebook::hsum_epi32;
use super::{dot_us, half, load, prefetch};
use crate::quant::blocks::{BlockQ8_K, BlockTQ2_0};
use crate::quant::kquants::q8k_d;

/// `R` TQ2_0 rows `x` · `T` Q8_K rows `y`, `nb` super-blocks each.
///
/// # Safety
/// AVX2, FMA and F16C; every row holds `nb` whole blocks.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn rows_tq2<const R: usize, const T: usize>(
    nb: usize,
    x: [*const u8; R],
    y: [*const u8; T],
) -> [[f32; T]; R] {
    type A = BlockQ8_K;
    type B = BlockTQ2_0;
    let mut out = [[0f32; T]; R];
    let (ones, threes) = (_mm256_set1_epi8(1), _mm256_set1_epi8(3));
    for b in 0..nb {
        let ya = y.map(|p| p.add(A::SIZE * b));
        // Σ y of each token's super-block.
        let sum_y = ya.map(|p| {
            let mut s = _mm256_setzero_si256();
            for k in 0..8 {
                s = _mm256_add_epi32(s, dot_us(ones, load(p.add(A::QS + 32 * k))));
            }
            hsum_epi32(s)
        });
        for r in 0..R {
            let xb = x[r].add(B::SIZE * b);
            prefetch(xb, B::SIZE);
            let mut acc = [_mm256_setzero_si256(); T];
            for j in 0..2 {
                let q = load(xb.add(B::QS + 32 * j));
                for l in 0..4 {
                    // Digits `2l..2l+2` of each byte: elements 128j + 32l + m.
                    let digits =
                        _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(2 * l)), threes);
                    for t in 0..T {
                        let yq = load(ya[t].add(A::QS + 128 * j + 32 * l as usize));
                        acc[t] = _mm256_add_epi32(acc[t], dot_us(digits, yq));
                    }
                }
            }
            let dx = half(xb.add(B::D));
            for t in 0..T {
                let dy = q8k_d(std::slice::from_raw_parts(ya[t], A::SIZE));
                let total = hsum_epi32(acc[t]) - sum_y[t];
                // The portable kernel multiplies by K = 1 here: the same bits.
                out[r][t] += dx * dy * total as f32;
            }
        }
    }
    out
}

/// One TQ2_0 row · one Q8_K row.
///
/// # Safety
/// As [`rows_tq2`].
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_tq2(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    rows_tq2::<1, 1>(nb, [x.as_ptr()], [y.as_ptr()])[0][0]
}
