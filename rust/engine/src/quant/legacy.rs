//! The 32-element block formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (weights) and Q8_1 (activations):
//! dequantization, Q8_0/Q8_1 quantization and the portable dot products. Layouts: `blocks`.

use super::blocks::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1, QK};
use super::float::{f16_at, quantize_f16_bits};

/// The 32 unsigned 4-bit values of a nibble array (16 bytes) in element order.
#[inline]
fn nibbles(qs: &[u8]) -> [u8; QK] {
    let mut q = [0u8; QK];
    for j in 0..QK / 2 {
        q[j] = qs[j] & 0x0f;
        q[j + QK / 2] = qs[j] >> 4;
    }
    q
}

/// The 32 unsigned 5-bit values of a `qh` word (4 bytes) plus nibble array (16 bytes).
#[inline]
fn five_bits(qh: &[u8], qs: &[u8]) -> [u8; QK] {
    let h = u32::from_le_bytes([qh[0], qh[1], qh[2], qh[3]]);
    let mut q = nibbles(qs);
    for (i, v) in q.iter_mut().enumerate() {
        *v |= (((h >> i) & 1) as u8) << 4;
    }
    q
}

/// Dequantizes Q4_0 blocks.
pub(crate) fn dequant_q4_0(src: &[u8], dst: &mut [f32]) {
    type B = BlockQ4_0;
    for (b, y) in src.chunks_exact(B::SIZE).zip(dst.chunks_exact_mut(QK)) {
        let d = f16_at(b, B::D);
        for (y, q) in y.iter_mut().zip(nibbles(&b[B::QS..B::QS + QK / 2])) {
            *y = (i32::from(q) - 8) as f32 * d;
        }
    }
}

/// Dequantizes Q4_1 blocks.
pub(crate) fn dequant_q4_1(src: &[u8], dst: &mut [f32]) {
    type B = BlockQ4_1;
    for (b, y) in src.chunks_exact(B::SIZE).zip(dst.chunks_exact_mut(QK)) {
        let (d, m) = (f16_at(b, B::D), f16_at(b, B::M));
        for (y, q) in y.iter_mut().zip(nibbles(&b[B::QS..B::QS + QK / 2])) {
            *y = f32::from(q) * d + m;
        }
    }
}

/// Dequantizes Q5_0 blocks.
pub(crate) fn dequant_q5_0(src: &[u8], dst: &mut [f32]) {
    type B = BlockQ5_0;
    for (b, y) in src.chunks_exact(B::SIZE).zip(dst.chunks_exact_mut(QK)) {
        let d = f16_at(b, B::D);
        for (y, q) in y
            .iter_mut()
            .zip(five_bits(&b[B::QH..B::QH + 4], &b[B::QS..B::QS + QK / 2]))
        {
            *y = (i32::from(q) - 16) as f32 * d;
        }
    }
}

/// Dequantizes Q5_1 blocks.
pub(crate) fn dequant_q5_1(src: &[u8], dst: &mut [f32]) {
    type B = BlockQ5_1;
    for (b, y) in src.chunks_exact(B::SIZE).zip(dst.chunks_exact_mut(QK)) {
        let (d, m) = (f16_at(b, B::D), f16_at(b, B::M));
        for (y, q) in y
            .iter_mut()
            .zip(five_bits(&b[B::QH..B::QH + 4], &b[B::QS..B::QS + QK / 2]))
        {
            *y = f32::from(q) * d + m;
        }
    }
}

/// Dequantizes Q8_0 or Q8_1 blocks of `size` bytes, quants at `offset`, `d` first.
fn dequant_q8(src: &[u8], dst: &mut [f32], size: usize, offset: usize) {
    const _: () = assert!(BlockQ8_0::D == 0 && BlockQ8_1::D == 0);
    for (b, y) in src.chunks_exact(size).zip(dst.chunks_exact_mut(QK)) {
        let d = f16_at(b, 0);
        for (y, &q) in y.iter_mut().zip(&b[offset..]) {
            *y = f32::from(q as i8) * d;
        }
    }
}

/// Dequantizes Q8_0 blocks.
pub(crate) fn dequant_q8_0(src: &[u8], dst: &mut [f32]) {
    dequant_q8(src, dst, BlockQ8_0::SIZE, BlockQ8_0::QS);
}

/// Dequantizes Q8_1 blocks.
pub(crate) fn dequant_q8_1(src: &[u8], dst: &mut [f32]) {
    dequant_q8(src, dst, BlockQ8_1::SIZE, BlockQ8_1::QS);
}

/// `v.round_ties_even()` for `|v| < 2^22` (and NaN → NaN) without a libm call: x86-64's
/// baseline has no rounding instruction, and adding then subtracting 1.5·2^23 rounds to the
/// nearest even integer in the default rounding mode. Vectorizes.
#[inline]
pub(crate) fn round_even_small(v: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0;
    (v + MAGIC) - MAGIC
}

/// Quantizes one block of 32 values like llama.cpp's x86 quantizer (the one the llama.cpp we
/// compare against runs): `d = amax / 127`, `q = round_ties_even(x · (127 / amax))`. ggml's
/// reference instead rounds `x / d` half away from zero; the two differ by one step on rare
/// ties, and matching the x86 rule makes our logits equal llama.cpp's to four decimals.
/// Returns `(d, Σq)` and writes the quants to `qs`. The SIMD versions (chosen by the
/// dispatcher in `quant/mod.rs`) give the same bytes.
pub(crate) fn quantize_q8_block(x: &[f32], qs: &mut [u8]) -> (f32, i32) {
    let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
    let mut sum = 0i32;
    for (q, v) in qs.iter_mut().zip(x) {
        let r = round_even_small(v * id) as i8;
        sum += i32::from(r);
        *q = r as u8;
    }
    (d, sum)
}

/// Quantizes activations to Q8_0 (`src.len()` a multiple of 32, `dst` sized for it) with the
/// block quantizer `block` (see [`quantize_q8_block`]).
pub(crate) fn quantize_q8_0(
    src: &[f32],
    dst: &mut [u8],
    block: impl Fn(&[f32], &mut [u8]) -> (f32, i32),
) {
    type B = BlockQ8_0;
    for (x, b) in src.chunks_exact(QK).zip(dst.chunks_exact_mut(B::SIZE)) {
        let (d, _) = block(x, &mut b[B::QS..]);
        b[B::D..B::D + 2].copy_from_slice(&quantize_f16_bits(d).to_le_bytes());
    }
}

/// Quantizes activations to Q8_1: like Q8_0 plus `s = half(Σq · d)` with the unrounded `d`.
pub(crate) fn quantize_q8_1(
    src: &[f32],
    dst: &mut [u8],
    block: impl Fn(&[f32], &mut [u8]) -> (f32, i32),
) {
    type B = BlockQ8_1;
    for (x, b) in src.chunks_exact(QK).zip(dst.chunks_exact_mut(B::SIZE)) {
        let (d, sum) = block(x, &mut b[B::QS..]);
        b[B::D..B::D + 2].copy_from_slice(&quantize_f16_bits(d).to_le_bytes());
        b[B::S..B::S + 2].copy_from_slice(&quantize_f16_bits(sum as f32 * d).to_le_bytes());
    }
}

/// Σ x·y over one block with signed weights `x` and the i8 activation bytes `y`.
#[inline]
fn isum_signed(x: &[u8; QK], offset: i32, y: &[u8]) -> i32 {
    x.iter()
        .zip(y)
        .map(|(&q, &v)| (i32::from(q) - offset) * i32::from(v as i8))
        .sum()
}

/// Scalar Q4_0 × Q8_0: per block `(dx·dy) · Σ qx·qy` in f32.
pub(crate) fn dot_q4_0_q8_0(nb: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0f32;
    let (wb, ab) = (BlockQ4_0::SIZE, BlockQ8_0::SIZE);
    for (x, y) in w.chunks_exact(wb).zip(a.chunks_exact(ab)).take(nb) {
        let isum = isum_signed(
            &nibbles(&x[BlockQ4_0::QS..BlockQ4_0::QS + QK / 2]),
            8,
            &y[BlockQ8_0::QS..BlockQ8_0::QS + QK],
        );
        sum += isum as f32 * (f16_at(x, BlockQ4_0::D) * f16_at(y, BlockQ8_0::D));
    }
    sum
}

/// Scalar Q5_0 × Q8_0.
pub(crate) fn dot_q5_0_q8_0(nb: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0f32;
    type W = BlockQ5_0;
    for (x, y) in w
        .chunks_exact(W::SIZE)
        .zip(a.chunks_exact(BlockQ8_0::SIZE))
        .take(nb)
    {
        let q = five_bits(&x[W::QH..W::QH + 4], &x[W::QS..W::QS + QK / 2]);
        let isum = isum_signed(&q, 16, &y[BlockQ8_0::QS..BlockQ8_0::QS + QK]);
        sum += isum as f32 * (f16_at(x, W::D) * f16_at(y, BlockQ8_0::D));
    }
    sum
}

/// Scalar Q4_1 × Q8_1: per block `(dx·dy) · Σ qx·qy + mx·sy`.
pub(crate) fn dot_q4_1_q8_1(nb: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0f32;
    type W = BlockQ4_1;
    type A = BlockQ8_1;
    for (x, y) in w
        .chunks_exact(W::SIZE)
        .zip(a.chunks_exact(A::SIZE))
        .take(nb)
    {
        let isum = isum_signed(
            &nibbles(&x[W::QS..W::QS + QK / 2]),
            0,
            &y[A::QS..A::QS + QK],
        );
        sum +=
            isum as f32 * (f16_at(x, W::D) * f16_at(y, A::D)) + f16_at(x, W::M) * f16_at(y, A::S);
    }
    sum
}

/// Scalar Q5_1 × Q8_1.
pub(crate) fn dot_q5_1_q8_1(nb: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0f32;
    type W = BlockQ5_1;
    type A = BlockQ8_1;
    for (x, y) in w
        .chunks_exact(W::SIZE)
        .zip(a.chunks_exact(A::SIZE))
        .take(nb)
    {
        let isum = isum_signed(
            &five_bits(&x[W::QH..W::QH + 4], &x[W::QS..W::QS + QK / 2]),
            0,
            &y[A::QS..A::QS + QK],
        );
        sum +=
            isum as f32 * (f16_at(x, W::D) * f16_at(y, A::D)) + f16_at(x, W::M) * f16_at(y, A::S);
    }
    sum
}

/// Σ x·y of two i8 arrays.
#[inline]
pub(crate) fn isum_i8(x: &[u8], y: &[u8]) -> i32 {
    x.iter()
        .zip(y)
        .map(|(&p, &q)| i32::from(p as i8) * i32::from(q as i8))
        .sum()
}

/// Scalar Q8_0 × Q8_0.
pub(crate) fn dot_q8_0_q8_0(nb: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0f32;
    type B = BlockQ8_0;
    for (x, y) in w
        .chunks_exact(B::SIZE)
        .zip(a.chunks_exact(B::SIZE))
        .take(nb)
    {
        sum += isum_i8(&x[B::QS..B::QS + QK], &y[B::QS..B::QS + QK]) as f32
            * (f16_at(x, B::D) * f16_at(y, B::D));
    }
    sum
}

/// Scalar Q8_1 × Q8_1 (only for completeness: Q8_1 is an activation format).
pub(crate) fn dot_q8_1_q8_1(nb: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0f32;
    type B = BlockQ8_1;
    for (x, y) in w
        .chunks_exact(B::SIZE)
        .zip(a.chunks_exact(B::SIZE))
        .take(nb)
    {
        sum += isum_i8(&x[B::QS..B::QS + QK], &y[B::QS..B::QS + QK]) as f32
            * (f16_at(x, B::D) * f16_at(y, B::D));
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::round_even_small;

    #[test]
    fn round_even_small_equals_round_ties_even() {
        // Every f32 in [-160, 160] at a 1/1024 step hits all ties and their neighbours.
        for i in -163_840..=163_840 {
            let v = i as f32 / 1024.0;
            for v in [
                v,
                f32::from_bits(v.to_bits() + 1),
                f32::from_bits(v.to_bits().max(1) - 1),
            ] {
                assert_eq!(round_even_small(v), v.round_ties_even(), "{v}");
            }
        }
        assert!(round_even_small(f32::NAN).is_nan());
    }
}
