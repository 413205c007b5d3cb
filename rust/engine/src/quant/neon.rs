//! aarch64 Advanced SIMD kernels for Q8_0 × Q8_0 and Q4_K × Q8_K. Only the exact integer sums
//! of each block are vectorized; scales are applied exactly as in the portable kernels, so the
//! results equal the scalar path bit for bit.
//!
//! Safety: requires NEON (always present on aarch64 Linux/Android, checked by the dispatcher in
//! `quant/mod.rs`) and `nb` whole blocks in both rows.

use std::arch::aarch64::*;

use super::blocks::{BlockQ4_K, BlockQ8_0, BlockQ8_K};
use super::float::f16_at;
use super::kquants::{q45k_combine, q45k_min_sum, q4k_scales_mins};

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
pub(super) unsafe fn dot_q8_0(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let mut sum = 0f32;
    type B = BlockQ8_0;
    for (xb, yb) in x
        .chunks_exact(B::SIZE)
        .zip(y.chunks_exact(B::SIZE))
        .take(nb)
    {
        let (xp, yp) = (
            xb.as_ptr().add(B::QS).cast::<i8>(),
            yb.as_ptr().add(B::QS).cast::<i8>(),
        );
        let mut acc = vdupq_n_s32(0);
        acc = mla16(acc, vld1q_s8(xp), vld1q_s8(yp));
        acc = mla16(acc, vld1q_s8(xp.add(16)), vld1q_s8(yp.add(16)));
        let isum = vaddvq_s32(acc);
        sum += isum as f32 * (f16_at(xb, B::D) * f16_at(yb, B::D));
    }
    sum
}

/// Q4_K × Q8_K.
#[target_feature(enable = "neon")]
pub(super) unsafe fn dot_q4_k(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let m4 = vdupq_n_u8(0x0f);
    let mut sum = 0f32;
    for (xb, yb) in x
        .chunks_exact(BlockQ4_K::SIZE)
        .zip(y.chunks_exact(BlockQ8_K::SIZE))
        .take(nb)
    {
        type W = BlockQ4_K;
        let (sc, m) = q4k_scales_mins(&xb[W::SCALES..W::SCALES + 12]);
        let qs = xb.as_ptr().add(W::QS);
        let q8 = yb.as_ptr().add(BlockQ8_K::QS).cast::<i8>();
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
            isum +=
                i32::from(sc[2 * j]) * vaddvq_s32(lo) + i32::from(sc[2 * j + 1]) * vaddvq_s32(hi);
        }
        sum += q45k_combine(xb, yb, isum, q45k_min_sum(&m, yb));
    }
    sum
}
