//! F16 weights (× F16 activations): the prompt tiles, and the AVX-512 dot product with its own
//! tile.
//!
//! Each tile sums every (row, token) dot exactly as its entry's one-row kernel does, so the
//! results are bit-identical: [`tile_f16`] as [`super::dot_f16`] (four 8-lane FMA
//! accumulators, element `i` of each 32 in accumulator `(i / 8) % 4`, combined as
//! `(acc0 + acc1) + (acc2 + acc3)`, one horizontal sum, the tail in f64), [`tile_f16_512`] as
//! [`dot_f16_512`] (the same with 16 lanes and 64 elements, the two 256-bit halves added before
//! the horizontal sum). The tiles load each weight vector once for all their tokens and each
//! activation vector once for all their rows: fewer half-to-float conversions per FMA.

use std::arch::x86_64::*;

use super::{half_product, hsum_ps};
use crate::quant::kernels::TileOut;

/// 8 halves at element `i` of the row at `p`, as f32 lanes.
#[inline(always)]
unsafe fn load8(p: *const u8, i: usize) -> __m256 {
    _mm256_cvtph_ps(_mm_loadu_si128(p.add(2 * i).cast()))
}

/// 16 halves at element `i` of the row at `p`, as f32 lanes.
#[inline(always)]
unsafe fn load16(p: *const u8, i: usize) -> __m512 {
    _mm512_cvtph_ps(_mm256_loadu_si256(p.add(2 * i).cast()))
}

/// The F16 prompt tile of the AVX2 entry: 2 weight rows × 4 tokens, bit-identical to
/// [`super::dot_f16`].
///
/// # Safety
/// The CPU has AVX2, FMA and F16C; every row holds `n` halves; `w.len() == 2`, `a.len() == 4`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn tile_f16(n: usize, w: &[*const u8], a: &[*const u8], out: &mut TileOut) {
    let main = n - n % 32;
    // Accumulator k of dot (r, t), built without zero-filling a buffer first.
    let pass = |k: usize| {
        let mut acc = [[_mm256_setzero_ps(); 4]; 2];
        for base in (0..main).step_by(32) {
            let i = base + 8 * k;
            let wv = [load8(w[0], i), load8(w[1], i)];
            for t in 0..4 {
                let av = load8(a[t], i);
                acc[0][t] = _mm256_fmadd_ps(wv[0], av, acc[0][t]);
                acc[1][t] = _mm256_fmadd_ps(wv[1], av, acc[1][t]);
            }
        }
        acc
    };
    let (acc0, acc1) = (pass(0), pass(1));
    let s01: [[__m256; 4]; 2] =
        std::array::from_fn(|r| std::array::from_fn(|t| _mm256_add_ps(acc0[r][t], acc1[r][t])));
    let (acc2, acc3) = (pass(2), pass(3));
    for r in 0..2 {
        for t in 0..4 {
            let total = _mm256_add_ps(s01[r][t], _mm256_add_ps(acc2[r][t], acc3[r][t]));
            out[r][t] = with_tail(hsum_ps(total), main, n, w[r], a[t]);
        }
    }
}

/// `head` plus the tail's products from element `main` to `n`, summed in f64.
#[inline(always)]
unsafe fn with_tail(head: f32, main: usize, n: usize, w: *const u8, a: *const u8) -> f32 {
    let mut sum = f64::from(head);
    for j in main..n {
        sum += f64::from(half_product(w.add(2 * j), a.add(2 * j)));
    }
    sum as f32
}

/// The horizontal sum of 16 lanes: the two 256-bit halves added, then [`hsum_ps`].
#[inline(always)]
unsafe fn hsum16(v: __m512) -> f32 {
    let lo = _mm512_castps512_ps256(v);
    let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    hsum_ps(_mm256_add_ps(lo, hi))
}

/// F16 × F16 on 512-bit registers (the AVX-512 entry's one-row kernel).
///
/// # Safety
/// The CPU has AVX-512 F and BW, AVX2, FMA and F16C; both rows hold `n` halves.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw")]
pub(super) unsafe fn dot_f16_512(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let (xp, yp) = (x.as_ptr(), y.as_ptr());
    let main = n - n % 64;
    let mut acc = [_mm512_setzero_ps(); 4];
    for base in (0..main).step_by(64) {
        for (k, a) in acc.iter_mut().enumerate() {
            let i = base + 16 * k;
            *a = _mm512_fmadd_ps(load16(xp, i), load16(yp, i), *a);
        }
    }
    let total = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
    with_tail(hsum16(total), main, n, xp, yp)
}

/// The F16 prompt tile of the AVX-512 entry: 4 weight rows × 6 tokens (24 accumulators, and
/// 10 conversions per 24 FMAs), bit-identical to [`dot_f16_512`].
///
/// # Safety
/// As [`dot_f16_512`] for every row; `w.len() == 4`, `a.len() == 6`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw")]
pub(super) unsafe fn tile_f16_512(n: usize, w: &[*const u8], a: &[*const u8], out: &mut TileOut) {
    let main = n - n % 64;
    let mut s01 = [[_mm512_setzero_ps(); 6]; 4];
    let mut s23 = [[_mm512_setzero_ps(); 6]; 4];
    for k in 0..4 {
        let mut acc = [[_mm512_setzero_ps(); 6]; 4];
        for base in (0..main).step_by(64) {
            let i = base + 16 * k;
            let wv = [
                load16(w[0], i),
                load16(w[1], i),
                load16(w[2], i),
                load16(w[3], i),
            ];
            for t in 0..6 {
                let av = load16(a[t], i);
                for r in 0..4 {
                    acc[r][t] = _mm512_fmadd_ps(wv[r], av, acc[r][t]);
                }
            }
        }
        // (acc0 + acc1) and (acc2 + acc3), as the one-row kernel pairs them.
        let pair = if k < 2 { &mut s01 } else { &mut s23 };
        for r in 0..4 {
            for t in 0..6 {
                pair[r][t] = if k % 2 == 0 {
                    acc[r][t]
                } else {
                    _mm512_add_ps(pair[r][t], acc[r][t])
                };
            }
        }
    }
    for r in 0..4 {
        for t in 0..6 {
            let total = _mm512_add_ps(s01[r][t], s23[r][t]);
            out[r][t] = with_tail(hsum16(total), main, n, w[r], a[t]);
        }
    }
}
