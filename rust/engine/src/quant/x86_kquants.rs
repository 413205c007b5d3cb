//! AVX2 kernels for the K formats (Q2_K..Q6_K × Q8_K). Each super-block's integer sum is exact.
//! Q4_K/Q5_K/Q6_K apply `d` with one FMA into 8 f32 lanes and accumulate the min correction
//! separately, like ggml's AVX2 kernels; Q2_K/Q3_K reduce the integer sum per super-block and
//! combine it exactly as the portable kernels do (same result bit for bit).
//!
//! Safety: requires AVX2, FMA and F16C, and `nb` whole super-blocks in both rows.

use std::arch::x86_64::*;

use super::float::f16_at;
use super::kquants::{
    q3k_scales, q45k_min_sum, q4k_scales_mins, q8k_bsum, q8k_d, Q2K_BYTES, Q3K_BYTES, Q4K_BYTES,
    Q5K_BYTES, Q6K_BYTES, Q8K_BYTES,
};
use super::x86::{half, hsum_ps, load};

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
        acc_m += yd * half(xb.as_ptr().add(2)) * q45k_min_sum(&m, yb) as f32;
        let qs = xb.as_ptr().add(if five { 48 } else { 16 });
        let hbits = if five {
            load(xb.as_ptr().add(16))
        } else {
            _mm256_setzero_si256()
        };
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
    for (xb, yb) in x
        .chunks_exact(Q6K_BYTES)
        .zip(y.chunks_exact(Q8K_BYTES))
        .take(nb)
    {
        let xp = xb.as_ptr();
        let q8 = yb.as_ptr().add(4);
        let mut sumi = _mm256_setzero_si256();
        for n in 0..2 {
            let l0 = load(xp.add(64 * n));
            let l1 = load(xp.add(64 * n + 32));
            let h = load(xp.add(128 + 32 * n));
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
                let yv = load(q8.add(128 * n + 32 * k));
                let p =
                    _mm256_sub_epi16(_mm256_maddubs_epi16(q, yv), _mm256_maddubs_epi16(k32, yv));
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

/// Horizontal sum of 8 i32 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn hsum_epi32(v: __m256i) -> i32 {
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
    for (xb, yb) in x
        .chunks_exact(Q2K_BYTES)
        .zip(y.chunks_exact(Q8K_BYTES))
        .take(nb)
    {
        let yd = q8k_d(yb);
        let (dall, dmin) = (yd * f16_at(xb, 80), yd * f16_at(xb, 82));
        let scale: [i32; 16] = std::array::from_fn(|g| i32::from(xb[g] & 0x0f));
        let summ: i32 = (0..16)
            .map(|g| i32::from(xb[g] >> 4) * q8k_bsum(yb, g))
            .sum();
        let isum = two_bit_isum(xb.as_ptr().add(16), None, yb.as_ptr().add(4), &scale);
        sum += dall * isum as f32 - dmin * summ as f32;
    }
    sum
}

/// Q3_K × Q8_K: quants are used unsigned (`q + 4`, 0..=7) and `4·Σ_g sc_g·bsum_g` is subtracted.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_q3_k(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let mut sum = 0f32;
    for (xb, yb) in x
        .chunks_exact(Q3K_BYTES)
        .zip(y.chunks_exact(Q8K_BYTES))
        .take(nb)
    {
        let scale = q3k_scales(&xb[96..108]);
        let offset: i32 = (0..16).map(|g| scale[g] * q8k_bsum(yb, g)).sum();
        let xp = xb.as_ptr();
        let isum = two_bit_isum(xp.add(32), Some(xp), yb.as_ptr().add(4), &scale) - 4 * offset;
        sum += f16_at(xb, 108) * q8k_d(yb) * isum as f32;
    }
    sum
}
