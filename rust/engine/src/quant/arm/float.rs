//! aarch64 dot products of the float types (F32, F16, BF16). The portable kernels add each f32
//! product to an f64 sum in element order; f64 addition is not associative, so these kernels
//! keep that serial chain and vectorize only the loads, the (exact) widening of halves and
//! bfloat16s to f32, the f32 products and their widening to f64.

use std::arch::aarch64::*;

use super::fcvtl4;

/// Adds the four f32 products in `p` to `sum` in lane order, each widened to f64.
///
/// # Safety
/// NEON.
#[inline(always)]
unsafe fn add_in_order(sum: f64, p: float32x4_t) -> f64 {
    let (lo, hi) = (vcvt_f64_f32(vget_low_f32(p)), vcvt_high_f64_f32(p));
    let mut s = sum;
    s += vgetq_lane_f64::<0>(lo);
    s += vgetq_lane_f64::<1>(lo);
    s += vgetq_lane_f64::<0>(hi);
    s += vgetq_lane_f64::<1>(hi);
    s
}

/// The portable kernel's sum of `n` products `at(x, i) · at(y, i)`, four at a time with
/// `load4` (the f32 values of elements `i..i + 4` from a row pointer) and `at` for the tail.
///
/// # Safety
/// NEON; `load4` must read only 4 elements (`4 · size` bytes) at its pointer; it is given
/// elements `i..i + 4` with `i + 4 <= n`, `n` clamped to both rows' lengths.
#[inline(always)]
unsafe fn dot(
    n: usize,
    x: &[u8],
    y: &[u8],
    size: usize,
    load4: impl Fn(*const u8) -> float32x4_t,
    at: impl Fn(&[u8]) -> f32,
) -> f32 {
    let n = n.min(x.len() / size).min(y.len() / size);
    let (xp, yp) = (x.as_ptr(), y.as_ptr());
    let mut sum = 0f64;
    let whole = n / 4 * 4;
    for i in (0..whole).step_by(4) {
        let p = vmulq_f32(load4(xp.add(size * i)), load4(yp.add(size * i)));
        sum = add_in_order(sum, p);
    }
    for i in whole..n {
        let r = size * i..size * (i + 1);
        sum += f64::from(at(&x[r.clone()]) * at(&y[r]));
    }
    sum as f32
}

/// F32 × F32, bit-identical to `float::dot_f32`.
///
/// # Safety
/// NEON. Reads only whole elements inside both slices.
#[target_feature(enable = "neon")]
pub(super) unsafe fn dot_f32(n: usize, x: &[u8], y: &[u8]) -> f32 {
    dot(
        n,
        x,
        y,
        4,
        |p| vreinterpretq_f32_u8(vld1q_u8(p)),
        |b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
    )
}

/// Four IEEE halves at `p` widened to f32 exactly ([`fcvtl4`]).
///
/// # Safety
/// NEON; 8 readable bytes at `p`.
#[inline(always)]
unsafe fn halves4(p: *const u8) -> float32x4_t {
    fcvtl4(vld1_u16(p.cast()))
}

/// F16 × F16, bit-identical to `float::dot_f16` (for non-NaN inputs; NaN payloads may differ).
///
/// # Safety
/// NEON. Reads only whole elements inside both slices.
#[target_feature(enable = "neon")]
pub(super) unsafe fn dot_f16(n: usize, x: &[u8], y: &[u8]) -> f32 {
    dot(
        n,
        x,
        y,
        2,
        |p| halves4(p),
        |b| crate::quant::float::f16_le([b[0], b[1]]),
    )
}

/// BF16 × BF16, bit-identical to `float::dot_bf16`.
///
/// # Safety
/// NEON. Reads only whole elements inside both slices.
#[target_feature(enable = "neon")]
pub(super) unsafe fn dot_bf16(n: usize, x: &[u8], y: &[u8]) -> f32 {
    dot(
        n,
        x,
        y,
        2,
        |p| vreinterpretq_f32_u32(vshll_n_u16::<16>(vld1_u16(p.cast()))),
        |b| crate::quant::float::bf16_le([b[0], b[1]]),
    )
}
