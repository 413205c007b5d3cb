//! TQ2_0 and TQ1_0 × Q8_K (AVX2 + FMA + F16C): `R` weight rows × `T` tokens per call, each
//! weight super-block read once for all tokens. llama.cpp's arithmetic, with the value `q − 1`
//! of each digit `q` split as `Σ q·y − Σ y`: the digits (TQ2's 2-bit fields, TQ1's base-3
//! digits taken out of the bytes with byte multiplies and comparisons) multiply the quants
//! (`maddubs`, digits 0..=3 as unsigned bytes), and each token's `Σ y` over the super-block is
//! taken once for all rows. Both sums are exact integers, so the super-block's
//! `Σ (q − 1)·y` is the portable kernel's (`iquants::dot` over `ternary::TQ1`/`TQ2`), and the row's
//! f32 sum adds `(d_w · d_a) · Σ` per super-block in order, as it does: bit-identical.
//!
//! Safety: every `unsafe fn` here requires AVX2, FMA and F16C (checked by the dispatcher) and
//! `nb` whole blocks in every row.

use std::arch::x86_64::*;

use super::codebook::hsum_epi32;
use super::{dot_us, half, load, prefetch};
use crate::quant::blocks::{BlockQ8_K, BlockTQ1_0, BlockTQ2_0};
use crate::quant::kquants::q8k_d;
use crate::quant::types::GgmlType;

/// A ternary format: its block size and scale offset, and a block's digits.
pub(super) trait Ternary {
    /// The format.
    const TY: GgmlType;
    /// Bytes per block.
    const SIZE: usize;
    /// Where the block's f16 scale is.
    const D: usize;
    /// The 256 digits (0..=3, the values plus 1) of the block at `xb` as eight registers of
    /// 32, in element order.
    ///
    /// # Safety
    /// AVX2; `xb` points to a whole block.
    unsafe fn digits(xb: *const u8) -> [__m256i; 8];
}

/// TQ1_0.
pub(super) struct Tq1;
/// TQ2_0.
pub(super) struct Tq2;

impl Ternary for Tq1 {
    const TY: GgmlType = GgmlType::TQ1_0;
    const SIZE: usize = BlockTQ1_0::SIZE;
    const D: usize = BlockTQ1_0::D;
    #[inline(always)]
    unsafe fn digits(xb: *const u8) -> [__m256i; 8] {
        tq1_registers(xb).map(|q| base3_digits(q))
    }
}

impl Ternary for Tq2 {
    const TY: GgmlType = GgmlType::TQ2_0;
    const SIZE: usize = BlockTQ2_0::SIZE;
    const D: usize = BlockTQ2_0::D;
    /// Bits `2l..2l+2` of `qs[32j + m]` are element `128j + 32l + m`: register `4j + l`.
    #[inline(always)]
    unsafe fn digits(xb: *const u8) -> [__m256i; 8] {
        let threes = _mm256_set1_epi8(3);
        let q = [0, 1].map(|j| load(xb.add(BlockTQ2_0::QS + 32 * j)));
        std::array::from_fn(|g| {
            let shift = _mm_cvtsi32_si128(2 * (g % 4) as i32);
            _mm256_and_si256(_mm256_srl_epi16(q[g / 4], shift), threes)
        })
    }
}

/// `R` rows `x` of the ternary format `F` · `T` Q8_K rows `y`, `nb` super-blocks each.
///
/// # Safety
/// AVX2, FMA and F16C; every row holds `nb` whole blocks.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn rows<F: Ternary, const R: usize, const T: usize>(
    nb: usize,
    x: [*const u8; R],
    y: [*const u8; T],
) -> [[f32; T]; R] {
    type A = BlockQ8_K;
    let mut out = [[0f32; T]; R];
    let ones = _mm256_set1_epi8(1);
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
            let xb = x[r].add(F::SIZE * b);
            prefetch(xb, F::SIZE);
            let mut acc = [_mm256_setzero_si256(); T];
            for (g, digits) in F::digits(xb).into_iter().enumerate() {
                for t in 0..T {
                    let yq = load(ya[t].add(A::QS + 32 * g));
                    acc[t] = _mm256_add_epi32(acc[t], dot_us(digits, yq));
                }
            }
            let dx = half(xb.add(F::D));
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

/// One row of the ternary format `F` · one Q8_K row.
///
/// # Safety
/// As [`rows`].
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot<F: Ternary>(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    rows::<F, 1, 1>(nb, [x.as_ptr()], [y.as_ptr()])[0][0]
}

/// Bytes `x · 3` (mod 256 each).
///
/// # Safety
/// AVX2.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn mul3(x: __m256i) -> __m256i {
    _mm256_add_epi8(x, _mm256_add_epi8(x, x))
}

/// Bytes `x · 9` (mod 256 each): `x · 8` is a 16-bit shift with each byte's low bits cleared of
/// what its neighbour shifted in.
///
/// # Safety
/// AVX2.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn mul9(x: __m256i) -> __m256i {
    let x8 = _mm256_and_si256(_mm256_slli_epi16::<3>(x), _mm256_set1_epi8(0xf8u8 as i8));
    _mm256_add_epi8(x8, x)
}

/// TQ1_0's digit of each byte `q` (already multiplied by `3ⁿ`): `(3q) >> 8`, which is
/// `[q ≥ 86] + [q ≥ 171]` (0..=2), from two unsigned comparisons.
///
/// # Safety
/// AVX2.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn base3_digits(q: __m256i) -> __m256i {
    let at_least = |c: u8| _mm256_cmpeq_epi8(_mm256_max_epu8(q, _mm256_set1_epi8(c as i8)), q);
    _mm256_sub_epi8(
        _mm256_setzero_si256(),
        _mm256_add_epi8(at_least(86), at_least(171)),
    )
}

/// The eight registers of a TQ1_0 block's bytes, each multiplied so that its digits are the
/// block's values 32g..32g + 32 in order (see `quant::ternary::TQ1`): `qs[0..32]` times 1, 3,
/// 9, 27, 81; `qs[32..48]` times 1 | 3, 9 | 27, 81 | the `qh` bytes times 1, 3, 9, 27.
///
/// # Safety
/// AVX2; `xb` points to a whole TQ1_0 block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn tq1_registers(xb: *const u8) -> [__m256i; 8] {
    type B = BlockTQ1_0;
    let q = load(xb.add(B::QS));
    let (q3, q9) = (mul3(q), mul9(q));
    let h = _mm256_broadcastsi128_si256(_mm_loadu_si128(xb.add(B::QS + 32).cast()));
    let (h3, h9) = (mul3(h), mul9(h));
    let (h27, h81) = (mul3(h9), mul9(h9));
    let qh = _mm256_set1_epi32(i32::from_le_bytes(*xb.add(B::QH).cast::<[u8; 4]>()));
    let (qh3, qh9) = (mul3(qh), mul9(qh));
    let qh27 = mul3(qh9);
    // 32-bit lane n of the low half: the qh bytes times 3ⁿ.
    let qhs = _mm256_blend_epi32::<0b1000>(
        _mm256_blend_epi32::<0b0100>(_mm256_blend_epi32::<0b0010>(qh, qh3), qh9),
        qh27,
    );
    [
        q,
        q3,
        q9,
        mul3(q9),
        mul9(q9),
        _mm256_blend_epi32::<0xf0>(h, h3),
        _mm256_blend_epi32::<0xf0>(h9, h27),
        _mm256_inserti128_si256::<1>(h81, _mm256_castsi256_si128(qhs)),
    ]
}
