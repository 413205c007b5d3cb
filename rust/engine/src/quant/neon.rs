//! aarch64 Advanced SIMD kernels for Q8_0 × Q8_0 and Q4_K × Q8_K. Only the exact integer sums
//! of each block are vectorized; scales are applied exactly as in the portable kernels, so the
//! results equal the scalar path bit for bit.
//!
//! Safety: requires NEON (always present on aarch64 Linux/Android, checked by the dispatcher) and
//! `nb` whole blocks in both rows.

use std::arch::aarch64::*;

use super::float::f16_at;
use super::kquants::{q45k_combine, q4k_scales_mins, q8k_bsum, Q4K_BYTES, Q8K_BYTES};
use super::GgmlType;

/// Runs the NEON kernel for weight type `w` over `nb` blocks, or `None` when there is none.
pub(super) fn vec_dot(w: GgmlType, nb: usize, x: &[u8], y: &[u8]) -> Option<f32> {
    // SAFETY: the dispatcher selects this module only when NEON is available; the kernels read
    // only through slices of whole blocks.
    unsafe {
        match w {
            GgmlType::Q8_0 => Some(dot_q8_0(nb, x, y)),
            GgmlType::Q4_K => Some(dot_q4_k(nb, x, y)),
            _ => None,
        }
    }
}

/// Σ a·b over 16 signed bytes each, widened to i32 lanes and added to `acc`.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn mla16(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let lo = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    let hi = vmull_high_s8(a, b);
    vpadalq_s16(vpadalq_s16(acc, lo), hi)
}

/// Q8_0 × Q8_0.
#[target_feature(enable = "neon")]
unsafe fn dot_q8_0(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let mut sum = 0f32;
    for (xb, yb) in x.chunks_exact(34).zip(y.chunks_exact(34)).take(nb) {
        let (xp, yp) = (xb.as_ptr().add(2).cast::<i8>(), yb.as_ptr().add(2).cast::<i8>());
        let mut acc = vdupq_n_s32(0);
        acc = mla16(acc, vld1q_s8(xp), vld1q_s8(yp));
        acc = mla16(acc, vld1q_s8(xp.add(16)), vld1q_s8(yp.add(16)));
        let isum = vaddvq_s32(acc);
        sum += isum as f32 * (f16_at(xb, 0) * f16_at(yb, 0));
    }
    sum
}

/// Q4_K × Q8_K.
#[target_feature(enable = "neon")]
unsafe fn dot_q4_k(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let m4 = vdupq_n_u8(0x0f);
    let mut sum = 0f32;
    for (xb, yb) in x.chunks_exact(Q4K_BYTES).zip(y.chunks_exact(Q8K_BYTES)).take(nb) {
        let (sc, m) = q4k_scales_mins(&xb[4..16]);
        let qs = xb.as_ptr().add(16);
        let q8 = yb.as_ptr().add(4).cast::<i8>();
        let mut isum = 0i32;
        for j in 0..4 {
            let mut lo = vdupq_n_s32(0);
            let mut hi = vdupq_n_s32(0);
            for h in 0..2 {
                let bits = vld1q_u8(qs.add(32 * j + 16 * h));
                let ql = vreinterpretq_s8_u8(vandq_u8(bits, m4));
                let qh = vreinterpretq_s8_u8(vshrq_n_u8::<4>(bits));
                lo = mla16(lo, ql, vld1q_s8(q8.add(64 * j + 16 * h)));
                hi = mla16(hi, qh, vld1q_s8(q8.add(64 * j + 32 + 16 * h)));
            }
            isum += i32::from(sc[2 * j]) * vaddvq_s32(lo) + i32::from(sc[2 * j + 1]) * vaddvq_s32(hi);
        }
        let summ: i32 = (0..8)
            .map(|j| i32::from(m[j]) * (q8k_bsum(yb, 2 * j) + q8k_bsum(yb, 2 * j + 1)))
            .sum();
        sum += q45k_combine(xb, yb, isum, summ);
    }
    sum
}
