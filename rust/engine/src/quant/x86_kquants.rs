//! AVX2 kernels for the K formats (Q4_K, Q5_K, Q6_K × Q8_K). Each super-block's integer sum is
//! exact; `d` is applied with one FMA into 8 f32 lanes and the min correction (Q4_K/Q5_K) is
//! accumulated separately, like ggml's AVX2 kernels.
//!
//! Safety: requires AVX2, FMA and F16C, and `nb` whole super-blocks in both rows.

use std::arch::x86_64::*;

use super::kquants::{q4k_scales_mins, q8k_bsum, q8k_d, Q4K_BYTES, Q5K_BYTES, Q6K_BYTES, Q8K_BYTES};
use super::x86::{half, hsum_ps, load};

/// The weighted min correction `Σ_j m_j · (bsum_2j + bsum_2j+1)` of a Q4_K/Q5_K block.
#[inline]
fn min_sum(m: &[u8; 8], y: &[u8]) -> i32 {
    (0..8)
        .map(|j| i32::from(m[j]) * (q8k_bsum(y, 2 * j) + q8k_bsum(y, 2 * j + 1)))
        .sum()
}

/// Q4_K (`five == false`) or Q5_K × Q8_K.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_q45_k(nb: usize, x: &[u8], y: &[u8], five: bool) -> f32 {
    let size = if five { Q5K_BYTES } else { Q4K_BYTES };
    let m4 = _mm256_set1_epi8(0x0f);
    let one = _mm256_set1_epi8(1);
    let mut acc = _mm256_setzero_ps();
    let mut acc_m = 0f32;
    for (xb, yb) in x.chunks_exact(size).zip(y.chunks_exact(Q8K_BYTES)).take(nb) {
        let yd = q8k_d(yb);
        let (sc, m) = q4k_scales_mins(&xb[4..16]);
        acc_m += yd * half(xb.as_ptr().add(2)) * min_sum(&m, yb) as f32;
        let qs = xb.as_ptr().add(if five { 48 } else { 16 });
        let hbits = if five { load(xb.as_ptr().add(16)) } else { _mm256_setzero_si256() };
        let q8 = yb.as_ptr().add(4);
        let mut sumi = _mm256_setzero_si256();
        for j in 0..4 {
            let bits = load(qs.add(32 * j));
            let mut lo = _mm256_and_si256(bits, m4);
            let mut hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
            if five {
                let h = _mm256_srl_epi16(hbits, _mm_cvtsi32_si128(2 * j as i32));
                lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(h, one), 4));
                let h = _mm256_srli_epi16(h, 1);
                hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(h, one), 4));
            }
            let plo = _mm256_maddubs_epi16(lo, load(q8.add(64 * j)));
            let phi = _mm256_maddubs_epi16(hi, load(q8.add(64 * j + 32)));
            let plo = _mm256_madd_epi16(plo, _mm256_set1_epi16(i16::from(sc[2 * j])));
            let phi = _mm256_madd_epi16(phi, _mm256_set1_epi16(i16::from(sc[2 * j + 1])));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(plo, phi));
        }
        let d = _mm256_set1_ps(yd * half(xb.as_ptr()));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum_ps(acc) - acc_m
}

/// Q4_K × Q8_K.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_q4_k(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    dot_q45_k(nb, x, y, false)
}

/// Q5_K × Q8_K.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_q5_k(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    dot_q45_k(nb, x, y, true)
}

/// Q6_K × Q8_K: quants are used unsigned (0..=63) and the offset 32 is subtracted as `32·Σy`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_q6_k(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let m4 = _mm256_set1_epi8(0x0f);
    let m30 = _mm256_set1_epi8(0x30);
    let k32 = _mm256_set1_epi8(32);
    let mut acc = _mm256_setzero_ps();
    for (xb, yb) in x.chunks_exact(Q6K_BYTES).zip(y.chunks_exact(Q8K_BYTES)).take(nb) {
        let xp = xb.as_ptr();
        let q8 = yb.as_ptr().add(4);
        let mut sumi = _mm256_setzero_si256();
        for n in 0..2 {
            let l0 = load(xp.add(64 * n));
            let l1 = load(xp.add(64 * n + 32));
            let h = load(xp.add(128 + 32 * n));
            let q = [
                _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m30)),
                _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m30)),
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
                let yv = load(q8.add(128 * n + 32 * k));
                let p = _mm256_sub_epi16(_mm256_maddubs_epi16(q, yv), _mm256_maddubs_epi16(k32, yv));
                let g = 8 * n + 2 * k;
                let s0 = i16::from(xb[192 + g] as i8);
                let s1 = i16::from(xb[193 + g] as i8);
                let scales = _mm256_set_m128i(_mm_set1_epi16(s1), _mm_set1_epi16(s0));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, scales));
            }
        }
        let d = _mm256_set1_ps(half(xp.add(208)) * q8k_d(yb));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum_ps(acc)
}
