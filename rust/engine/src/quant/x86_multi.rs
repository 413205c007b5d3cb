//! AVX2 kernels that multiply one weight row with four activation rows at once (prompt
//! processing): each weight block is unpacked once and used four times. Every result is
//! computed with exactly the operations of the single-row kernel in `x86`, so it is
//! bit-identical to [`super::vec_dot`] for that row.
//!
//! Safety: as in `x86` (AVX2, FMA and F16C detected; `nb` whole blocks in every row).

use std::arch::x86_64::*;

use super::x86::{dot_ss, dot_us, fifth_bits, half_product, hsum_ps, load, nibbles};
use super::GgmlType;

/// Runs the four-row kernel for weight type `w`, or `None` when there is none.
pub(super) fn vec_dot_x4(w: GgmlType, nb: usize, x: &[u8], ys: [&[u8]; 4]) -> Option<[f32; 4]> {
    let yp = ys.map(|y| y.as_ptr());
    // SAFETY: the dispatcher selects this module only after detecting avx2, fma and f16c, and
    // `nb` is clamped to the whole blocks present in every slice.
    unsafe {
        Some(match w {
            GgmlType::Q8_0 => q8_0_like::<0>(nb, x.as_ptr(), yp),
            GgmlType::Q4_0 => q8_0_like::<1>(nb, x.as_ptr(), yp),
            GgmlType::Q5_0 => q8_0_like::<2>(nb, x.as_ptr(), yp),
            GgmlType::Q4_1 => q4_1(nb, x.as_ptr(), yp),
            _ => return None,
        })
    }
}

/// Q8_0 (`KIND` 0), Q4_0 (1) and Q5_0 (2) weights against four Q8_0 rows.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8_0_like<const KIND: u8>(nb: usize, xp: *const u8, yp: [*const u8; 4]) -> [f32; 4] {
    let block = match KIND {
        0 => 34,
        1 => 18,
        _ => 22,
    };
    let mut acc = [_mm256_setzero_ps(); 4];
    for b in 0..nb {
        let xb = xp.add(block * b);
        let q = match KIND {
            0 => load(xb.add(2)),
            1 => _mm256_sub_epi8(nibbles(xb.add(2)), _mm256_set1_epi8(8)),
            _ => _mm256_sub_epi8(
                _mm256_or_si256(nibbles(xb.add(6)), fifth_bits(xb.add(2))),
                _mm256_set1_epi8(16),
            ),
        };
        for k in 0..4 {
            let yb = yp[k].add(34 * b);
            let d = _mm256_set1_ps(half_product(xb, yb));
            let p = dot_ss(q, load(yb.add(2)));
            acc[k] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc[k]);
        }
    }
    [
        hsum_ps(acc[0]),
        hsum_ps(acc[1]),
        hsum_ps(acc[2]),
        hsum_ps(acc[3]),
    ]
}

/// Q4_1 weights against four Q8_1 rows.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_1(nb: usize, xp: *const u8, yp: [*const u8; 4]) -> [f32; 4] {
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut summs = [0f32; 4];
    for b in 0..nb {
        let xb = xp.add(20 * b);
        let q = nibbles(xb.add(4));
        for k in 0..4 {
            let yb = yp[k].add(36 * b);
            summs[k] += half_product(xb.add(2), yb.add(2));
            let d = _mm256_set1_ps(half_product(xb, yb));
            let p = dot_us(q, load(yb.add(4)));
            acc[k] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc[k]);
        }
    }
    [
        hsum_ps(acc[0]) + summs[0],
        hsum_ps(acc[1]) + summs[1],
        hsum_ps(acc[2]) + summs[2],
        hsum_ps(acc[3]) + summs[3],
    ]
}
