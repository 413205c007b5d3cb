//! Reference quantizers of the 32-element weight formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0),
//! following ggml's deterministic `quantize_row_*_ref` algorithms (used to write weight files,
//! and for Q4_0..Q5_1 by a quantized KV cache, as llama.cpp's `from_float` of those types): one scale (and minimum) per
//! block from the block's extreme values, then round every element. The float operations are
//! done in the same order as ggml's scalar C so the bytes agree with llama-quantize's.

use super::blocks::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, QK};
use super::float::quantize_f16_bits;

/// Stores `x` as a little-endian IEEE half at `at` (ggml's `GGML_FP32_TO_FP16`).
pub(crate) fn put_f16(block: &mut [u8], at: usize, x: f32) {
    block[at..at + 2].copy_from_slice(&quantize_f16_bits(x).to_le_bytes());
}

/// The value of largest magnitude (the first one on ties), as ggml's symmetric formats pick it.
fn signed_absmax(x: &[f32]) -> f32 {
    let (mut amax, mut max) = (0f32, 0f32);
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    max
}

/// Minimum and maximum of a block (ggml starts from ±FLT_MAX).
fn min_max(x: &[f32]) -> (f32, f32) {
    let (mut min, mut max) = (f32::MAX, -f32::MAX);
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    (min, max)
}

/// C's float → `int8_t` conversion as compiled by ggml's builds (truncation toward zero, then
/// the low byte); saturating instead of undefined for out-of-range values.
fn trunc_i8(v: f32) -> i32 {
    i32::from(v as i32 as i8)
}

/// 1 / d, or 0 when d is 0.
fn inverse(d: f32) -> f32 {
    if d != 0.0 {
        1.0 / d
    } else {
        0.0
    }
}

/// Q4_0: `d = max / −8`, quants `min(15, trunc(x / d + 8.5))`.
pub(crate) fn quantize_q4_0(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src
        .chunks_exact(QK)
        .zip(dst.chunks_exact_mut(BlockQ4_0::SIZE))
    {
        let d = signed_absmax(x) / -8.0;
        let id = inverse(d);
        put_f16(y, BlockQ4_0::D, d);
        for j in 0..QK / 2 {
            let q0 = trunc_i8(x[j] * id + 8.5).min(15) as u8;
            let q1 = trunc_i8(x[j + QK / 2] * id + 8.5).min(15) as u8;
            y[BlockQ4_0::QS + j] = q0 | (q1 << 4);
        }
    }
}

/// Q4_1: `d = (max − min) / 15`, `m = min`, quants `min(15, trunc((x − min) / d + 0.5))`.
pub(crate) fn quantize_q4_1(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src
        .chunks_exact(QK)
        .zip(dst.chunks_exact_mut(BlockQ4_1::SIZE))
    {
        let (min, max) = min_max(x);
        let d = (max - min) / 15.0;
        let id = inverse(d);
        put_f16(y, BlockQ4_1::D, d);
        put_f16(y, BlockQ4_1::M, min);
        for j in 0..QK / 2 {
            let q0 = trunc_i8((x[j] - min) * id + 0.5).min(15) as u8;
            let q1 = trunc_i8((x[j + QK / 2] - min) * id + 0.5).min(15) as u8;
            y[BlockQ4_1::QS + j] = q0 | (q1 << 4);
        }
    }
}

/// Writes the 5-bit quants `q` of one block: low nibbles at `qs`, fifth bits as the u32 at `qh`.
fn put_5bit(y: &mut [u8], qs: usize, qh_at: usize, q: impl Fn(usize) -> u8) {
    let mut qh = 0u32;
    for j in 0..QK / 2 {
        let (q0, q1) = (q(j), q(j + QK / 2));
        y[qs + j] = (q0 & 0x0f) | ((q1 & 0x0f) << 4);
        qh |= u32::from((q0 & 0x10) >> 4) << j;
        qh |= u32::from((q1 & 0x10) >> 4) << (j + QK / 2);
    }
    y[qh_at..qh_at + 4].copy_from_slice(&qh.to_le_bytes());
}

/// Q5_0: `d = max / −16`, quants `min(31, trunc(x / d + 16.5))`.
pub(crate) fn quantize_q5_0(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src
        .chunks_exact(QK)
        .zip(dst.chunks_exact_mut(BlockQ5_0::SIZE))
    {
        let d = signed_absmax(x) / -16.0;
        let id = inverse(d);
        put_f16(y, BlockQ5_0::D, d);
        let q = |j: usize| trunc_i8(x[j] * id + 16.5).min(31) as u8;
        put_5bit(y, BlockQ5_0::QS, BlockQ5_0::QH, q);
    }
}

/// Q5_1: `d = (max − min) / 31`, `m = min`, quants `trunc((x − min) / d + 0.5)`.
pub(crate) fn quantize_q5_1(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src
        .chunks_exact(QK)
        .zip(dst.chunks_exact_mut(BlockQ5_1::SIZE))
    {
        let (min, max) = min_max(x);
        let d = (max - min) / 31.0;
        let id = inverse(d);
        put_f16(y, BlockQ5_1::D, d);
        put_f16(y, BlockQ5_1::M, min);
        // ggml converts to uint8_t directly: keep the low byte of the truncated value.
        let q = |j: usize| ((x[j] - min) * id + 0.5) as i32 as u8;
        put_5bit(y, BlockQ5_1::QS, BlockQ5_1::QH, q);
    }
}

/// Q8_0: `d = amax / 127`, quants `round(x / d)` (half away from zero).
pub(crate) fn quantize_q8_0(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src
        .chunks_exact(QK)
        .zip(dst.chunks_exact_mut(BlockQ8_0::SIZE))
    {
        let amax = x.iter().fold(0f32, |a, v| a.max(v.abs()));
        let d = amax / 127.0;
        let id = inverse(d);
        put_f16(y, BlockQ8_0::D, d);
        for (q, &v) in y[BlockQ8_0::QS..].iter_mut().zip(x) {
            *q = (v * id).round() as i32 as i8 as u8;
        }
    }
}

/// Groups whose largest magnitude is below this are all zero (ggml's `GROUP_MAX_EPS`).
pub(crate) const GROUP_MAX_EPS: f32 = 1e-15;

/// Rounds to the nearest integer, ties to even, as ggml's `nearest_int` (valid for |v| < 2²²).
pub(crate) fn nearest_int(v: f32) -> i32 {
    let bits = (v + 12_582_912.0).to_bits() as i32;
    (bits & 0x007f_ffff) - 0x0040_0000
}
