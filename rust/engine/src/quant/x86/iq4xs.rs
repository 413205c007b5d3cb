//! The IQ4_XS × Q8_K kernels: `R` weight rows × `T` tokens per call, each weight super-block
//! unpacked once for all tokens; [`rows`] on 256-bit AVX2 registers, [`rows_wide`] on 512-bit
//! AVX-512 BW/VNNI ones (two groups per register, `vpdpwssd` fusing the scale multiply and
//! the add: three instructions per 64 quants and token instead of ten).
//!
//! Arithmetic: the portable kernel's (`nonlinear::dot_iq4_xs_q8_k`). The levels of a 32-value
//! group (one byte shuffle of its nibbles) times the token's quants, summed in pairs by
//! `maddubs` (sign trick; pairs of level·quant products stay below 2¹⁵) and scaled by the
//! group's `ls − 32` in the same `madd`, give exact i32 lanes; a super-block's lanes are summed
//! exactly to one integer, and the row's f32 sum adds `(d_w · d_a) · total` per super-block in
//! order, so every result is bit-identical to the portable kernel.
//!
//! The 512-bit kernel computes the same exact integers (the sign trick with a byte mask and a
//! masked subtraction; Q8_K quants are never −128) and the same float operations.
//!
//! Safety: every `unsafe fn` here requires AVX2, FMA and F16C (`rows_wide` also AVX-512
//! F/VL/BW/VNNI; checked by the dispatcher) and `nb` whole blocks in every row.

use std::arch::x86_64::*;

use super::codebook::hsum_epi32;
use super::ktile::{dpwssd, word_mask4};
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

/// The eight `ls − 32` of the IQ4_XS block at `p` as i16 lanes ([`iq4xs_scales`] in a few
/// vector instructions: the block starts with `d`, the high bit pairs and the low nibbles).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw")]
pub(super) unsafe fn scales_wide(p: *const u8) -> __m128i {
    type W = BlockIQ4_XS;
    const _: () = assert!(W::SCALES_H == 2 && W::SCALES_L == 4);
    let head = _mm_loadl_epi64(p.cast());
    // Scale ib: nibble ib % 2 of byte 4 + ib / 2, and bits 2ib, 2ib + 1 of the u16 at byte 2.
    let low = _mm_shuffle_epi8(
        head,
        _mm_setr_epi8(4, -1, 4, -1, 5, -1, 5, -1, 6, -1, 6, -1, 7, -1, 7, -1),
    );
    let low = _mm_srlv_epi16(low, _mm_setr_epi16(0, 4, 0, 4, 0, 4, 0, 4));
    let high = _mm_shuffle_epi8(head, _mm_set1_epi16(0x0302));
    let high = _mm_srlv_epi16(high, _mm_setr_epi16(0, 2, 4, 6, 8, 10, 12, 14));
    let ls = _mm_or_si128(
        _mm_and_si128(low, _mm_set1_epi16(0x0f)),
        _mm_slli_epi16(_mm_and_si128(high, _mm_set1_epi16(3)), 4),
    );
    _mm_sub_epi16(ls, _mm_set1_epi16(32))
}

/// [`rows`] on 512-bit registers: per super-block, groups `2j` and `2j + 1` as one register
/// of levels (their nibbles in value order: a 128-bit lane each of `2j`'s low and high
/// nibbles, then `2j + 1`'s), made unsigned with their signs moved onto the token's quants,
/// multiplied in pairs and scaled by the groups' `ls − 32` into exact i32 lanes.
///
/// # Safety
/// AVX2, FMA, F16C and AVX-512 F/VL/BW/VNNI; every row holds `nb` whole blocks.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(super) unsafe fn rows_wide<const R: usize, const T: usize>(
    nb: usize,
    x: [*const u8; R],
    y: [*const u8; T],
) -> [[f32; T]; R] {
    type W = BlockIQ4_XS;
    type A = BlockQ8_K;
    let table = _mm512_broadcast_i32x4(_mm_loadu_si128(IQ4NL_LEVELS.as_ptr().cast()));
    let m4 = _mm512_set1_epi8(0x0f);
    // 16-bit shift counts: 4 in 128-bit lanes 1 and 3 (the high nibbles), else 0.
    let shift = _mm512_maskz_mov_epi16(0xff00_ff00, _mm512_set1_epi16(4));
    let zero = _mm512_setzero_si512();
    let mut out = [[0f32; T]; R];
    for b in 0..nb {
        let ya = y.map(|p| p.add(A::SIZE * b));
        let xb = x.map(|p| p.add(W::SIZE * b));
        let scales = xb.map(|p| {
            prefetch(p, W::SIZE);
            _mm512_broadcast_i32x4(scales_wide(p))
        });
        let mut sums = [[zero; T]; R];
        for j in 0..4 {
            // Group 2j's scale in 128-bit lanes 0 and 1, group 2j + 1's in lanes 2 and 3.
            let w = 2 * j as i32;
            let pick = word_mask4([w, w, w + 1, w + 1]);
            let mut uq = [zero; R];
            let mut neg = [0u64; R];
            let mut sc = [zero; R];
            for r in 0..R {
                let bytes = _mm512_castsi256_si512(load(xb[r].add(W::QS + 32 * j)));
                // 128-bit lanes: bytes 0..16, bytes 0..16, bytes 16..32, bytes 16..32.
                let bytes = _mm512_shuffle_i64x2::<0x50>(bytes, bytes);
                let codes = _mm512_and_si512(_mm512_srlv_epi16(bytes, shift), m4);
                let q = _mm512_shuffle_epi8(table, codes);
                neg[r] = _mm512_movepi8_mask(q);
                uq[r] = _mm512_abs_epi8(q);
                sc[r] = _mm512_shuffle_epi8(scales[r], pick);
            }
            for t in 0..T {
                let yq = _mm512_loadu_si512(ya[t].add(A::QS + 64 * j).cast());
                for r in 0..R {
                    let sy = _mm512_mask_sub_epi8(yq, neg[r], zero, yq);
                    sums[r][t] = dpwssd(sums[r][t], _mm512_maddubs_epi16(uq[r], sy), sc[r]);
                }
            }
        }
        for r in 0..R {
            let dx = half(xb[r].add(W::D));
            for t in 0..T {
                let dy = q8k_d(std::slice::from_raw_parts(ya[t], A::SIZE));
                out[r][t] += dx * dy * _mm512_reduce_add_epi32(sums[r][t]) as f32;
            }
        }
    }
    out
}
