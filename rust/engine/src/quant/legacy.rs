//! The 32-element block formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (weights) and Q8_1 (activations).
//!
//! Layouts (all little-endian; `d`, `m`, `s` are IEEE halves):
//! - Q4_0 (18 B): `d`, 16 bytes of nibbles; element `j < 16` is the low nibble of byte `j`, element
//!   `j + 16` the high nibble; value `d * (q - 8)`.
//! - Q4_1 (20 B): `d`, `m`, nibbles as Q4_0; value `d * q + m`.
//! - Q5_0 (22 B): `d`, `qh` (u32, bit `i` is the fifth bit of element `i`), nibbles; value `d * (q - 16)`.
//! - Q5_1 (24 B): `d`, `m`, `qh`, nibbles; value `d * q + m`.
//! - Q8_0 (34 B): `d`, 32 × i8; value `d * q`.
//! - Q8_1 (36 B): `d`, `s = d * Σq`, 32 × i8; value `d * q`.

use super::float::{f16_at, quantize_f16_bits};

/// Elements per block.
pub(crate) const QK: usize = 32;

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
    for (b, y) in src.chunks_exact(18).zip(dst.chunks_exact_mut(QK)) {
        let d = f16_at(b, 0);
        for (y, q) in y.iter_mut().zip(nibbles(&b[2..18])) {
            *y = (i32::from(q) - 8) as f32 * d;
        }
    }
}

/// Dequantizes Q4_1 blocks.
pub(crate) fn dequant_q4_1(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(20).zip(dst.chunks_exact_mut(QK)) {
        let (d, m) = (f16_at(b, 0), f16_at(b, 2));
        for (y, q) in y.iter_mut().zip(nibbles(&b[4..20])) {
            *y = f32::from(q) * d + m;
        }
    }
}

/// Dequantizes Q5_0 blocks.
pub(crate) fn dequant_q5_0(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(22).zip(dst.chunks_exact_mut(QK)) {
        let d = f16_at(b, 0);
        for (y, q) in y.iter_mut().zip(five_bits(&b[2..6], &b[6..22])) {
            *y = (i32::from(q) - 16) as f32 * d;
        }
    }
}

/// Dequantizes Q5_1 blocks.
pub(crate) fn dequant_q5_1(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(24).zip(dst.chunks_exact_mut(QK)) {
        let (d, m) = (f16_at(b, 0), f16_at(b, 2));
        for (y, q) in y.iter_mut().zip(five_bits(&b[4..8], &b[8..24])) {
            *y = f32::from(q) * d + m;
        }
    }
}

/// Dequantizes Q8_0 (`offset` 2) or Q8_1 (`offset` 4) blocks of `size` bytes.
fn dequant_q8(src: &[u8], dst: &mut [f32], size: usize, offset: usize) {
    for (b, y) in src.chunks_exact(size).zip(dst.chunks_exact_mut(QK)) {
        let d = f16_at(b, 0);
        for (y, &q) in y.iter_mut().zip(&b[offset..]) {
            *y = f32::from(q as i8) * d;
        }
    }
}

/// Dequantizes Q8_0 blocks.
pub(crate) fn dequant_q8_0(src: &[u8], dst: &mut [f32]) {
    dequant_q8(src, dst, 34, 2);
}

/// Dequantizes Q8_1 blocks.
pub(crate) fn dequant_q8_1(src: &[u8], dst: &mut [f32]) {
    dequant_q8(src, dst, 36, 4);
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
/// Returns `(d, Σq)` and writes the quants to `qs`.
fn quantize_q8_block(x: &[f32], qs: &mut [u8]) -> (f32, i32) {
    #[cfg(target_arch = "x86_64")]
    if super::level() == super::Level::Avx2 {
        return super::x86::quantize_q8_block(x, qs);
    }
    quantize_q8_block_portable(x, qs)
}

/// The portable body of [`quantize_q8_block`].
fn quantize_q8_block_portable(x: &[f32], qs: &mut [u8]) -> (f32, i32) {
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

/// Quantizes activations to Q8_0 (`src.len()` a multiple of 32, `dst` sized for it).
pub(crate) fn quantize_q8_0(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src.chunks_exact(QK).zip(dst.chunks_exact_mut(34)) {
        let (d, _) = quantize_q8_block(x, &mut b[2..]);
        b[0..2].copy_from_slice(&quantize_f16_bits(d).to_le_bytes());
    }
}

/// Quantizes activations to Q8_1: like Q8_0 plus `s = half(Σq · d)` with the unrounded `d`.
pub(crate) fn quantize_q8_1(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src.chunks_exact(QK).zip(dst.chunks_exact_mut(36)) {
        let (d, sum) = quantize_q8_block(x, &mut b[4..]);
        b[0..2].copy_from_slice(&quantize_f16_bits(d).to_le_bytes());
        b[2..4].copy_from_slice(&quantize_f16_bits(sum as f32 * d).to_le_bytes());
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
    for (x, y) in w.chunks_exact(18).zip(a.chunks_exact(34)).take(nb) {
        let isum = isum_signed(&nibbles(&x[2..18]), 8, &y[2..34]);
        sum += isum as f32 * (f16_at(x, 0) * f16_at(y, 0));
    }
    sum
}

/// Scalar Q5_0 × Q8_0.
pub(crate) fn dot_q5_0_q8_0(nb: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0f32;
    for (x, y) in w.chunks_exact(22).zip(a.chunks_exact(34)).take(nb) {
        let isum = isum_signed(&five_bits(&x[2..6], &x[6..22]), 16, &y[2..34]);
        sum += isum as f32 * (f16_at(x, 0) * f16_at(y, 0));
    }
    sum
}

/// Scalar Q4_1 × Q8_1: per block `(dx·dy) · Σ qx·qy + mx·sy`.
pub(crate) fn dot_q4_1_q8_1(nb: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0f32;
    for (x, y) in w.chunks_exact(20).zip(a.chunks_exact(36)).take(nb) {
        let isum = isum_signed(&nibbles(&x[4..20]), 0, &y[4..36]);
        sum += isum as f32 * (f16_at(x, 0) * f16_at(y, 0)) + f16_at(x, 2) * f16_at(y, 2);
    }
    sum
}

/// Scalar Q5_1 × Q8_1.
pub(crate) fn dot_q5_1_q8_1(nb: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0f32;
    for (x, y) in w.chunks_exact(24).zip(a.chunks_exact(36)).take(nb) {
        let isum = isum_signed(&five_bits(&x[4..8], &x[8..24]), 0, &y[4..36]);
        sum += isum as f32 * (f16_at(x, 0) * f16_at(y, 0)) + f16_at(x, 2) * f16_at(y, 2);
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
    for (x, y) in w.chunks_exact(34).zip(a.chunks_exact(34)).take(nb) {
        sum += isum_i8(&x[2..34], &y[2..34]) as f32 * (f16_at(x, 0) * f16_at(y, 0));
    }
    sum
}

/// Scalar Q8_1 × Q8_1 (only for completeness: Q8_1 is an activation format).
pub(crate) fn dot_q8_1_q8_1(nb: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0f32;
    for (x, y) in w.chunks_exact(36).zip(a.chunks_exact(36)).take(nb) {
        sum += isum_i8(&x[4..36], &y[4..36]) as f32 * (f16_at(x, 0) * f16_at(y, 0));
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::{quantize_q8_block, quantize_q8_block_portable, round_even_small};

    #[test]
    fn simd_block_quantizer_equals_the_portable_one() {
        let mut seed = 0x2545_f491u32;
        for case in 0..2000 {
            let x: Vec<f32> = (0..32)
                .map(|i| {
                    seed ^= seed << 13;
                    seed ^= seed >> 17;
                    seed ^= seed << 5;
                    let v = (seed % 2001) as f32 - 1000.0;
                    // Every 4th case: exact ties after scaling (multiples of amax/254).
                    if case % 4 == 0 {
                        (i as f32 - 16.0) * 0.5
                    } else {
                        v * 0.001 * (case as f32 + 1.0)
                    }
                })
                .collect();
            let (mut a, mut b) = ([0u8; 32], [0u8; 32]);
            let ra = quantize_q8_block(&x, &mut a);
            let rb = quantize_q8_block_portable(&x, &mut b);
            assert_eq!(
                (ra.0.to_bits(), ra.1, a),
                (rb.0.to_bits(), rb.1, b),
                "{x:?}"
            );
        }
        let zeros = [0f32; 32];
        let (mut a, mut b) = ([1u8; 32], [1u8; 32]);
        assert_eq!(
            quantize_q8_block(&zeros, &mut a),
            quantize_q8_block_portable(&zeros, &mut b)
        );
        assert_eq!(a, b);
    }

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
