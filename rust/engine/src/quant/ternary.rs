//! The ternary formats TQ1_0 and TQ2_0 (values −1, 0, 1 times a super-block scale):
//! unpacking, dequantization and the portable dot products. Layouts: `blocks`.

use super::blocks::{BlockQ8_K, BlockTQ1_0, BlockTQ2_0, QK_K};
use super::float::f16_at;
use super::kquants::{q8k_d, q8k_quants};

/// Base-3 digit `n` (0 = most significant) of a TQ1_0 byte, in 0..=2: the byte holds the digits
/// as a fixed-point fraction of 243, so multiplying by 3ⁿ (mod 256) brings digit `n` to the
/// top, and `(· 3) >> 8` reads it.
#[inline]
fn trit(byte: u8, n: u32) -> i8 {
    let q = byte.wrapping_mul(3u8.pow(n));
    ((u16::from(q) * 3) >> 8) as i8
}

/// The 256 values (−1..=1) of a TQ1_0 block in element order: digit `n` of `qs[32k + m]` is
/// element `160k + 32n + m` for the first 32 bytes, of `qs[32 + m]` element `160 + 16n + m`
/// for the next 16, and digit `n` of `qh[j]` element `240 + 4n + j`.
fn tq1_values(b: &[u8]) -> [i8; QK_K] {
    type B = BlockTQ1_0;
    let (qs, qh) = (&b[B::QS..B::QS + 48], &b[B::QH..B::QH + 4]);
    let mut out = [0i8; QK_K];
    let mut i = 0;
    for (bytes, width) in [(&qs[..32], 32), (&qs[32..], 16)] {
        for n in 0..5 {
            for &byte in bytes.iter().take(width) {
                out[i] = trit(byte, n) - 1;
                i += 1;
            }
        }
    }
    for n in 0..4 {
        for &byte in qh {
            out[i] = trit(byte, n) - 1;
            i += 1;
        }
    }
    out
}

/// The 256 values (−1..=1) of a TQ2_0 block: bits `2l..2l+2` of `qs[32j + m]` are element
/// `128j + 32l + m`.
fn tq2_values(b: &[u8]) -> [i8; QK_K] {
    let qs = &b[BlockTQ2_0::QS..BlockTQ2_0::QS + QK_K / 4];
    let mut out = [0i8; QK_K];
    for (half, src) in out.chunks_exact_mut(128).zip(qs.chunks_exact(32)) {
        for (l, group) in half.chunks_exact_mut(32).enumerate() {
            for (v, &byte) in group.iter_mut().zip(src) {
                *v = ((byte >> (2 * l)) & 3) as i8 - 1;
            }
        }
    }
    out
}

fn dequant(src: &[u8], dst: &mut [f32], size: usize, d_at: usize, values: fn(&[u8]) -> [i8; QK_K]) {
    for (b, y) in src.chunks_exact(size).zip(dst.chunks_exact_mut(QK_K)) {
        let d = f16_at(b, d_at);
        for (y, v) in y.iter_mut().zip(values(b)) {
            *y = f32::from(v) * d;
        }
    }
}

/// Dequantizes TQ1_0 blocks.
pub(crate) fn dequant_tq1_0(src: &[u8], dst: &mut [f32]) {
    dequant(src, dst, BlockTQ1_0::SIZE, BlockTQ1_0::D, tq1_values);
}

/// Dequantizes TQ2_0 blocks.
pub(crate) fn dequant_tq2_0(src: &[u8], dst: &mut [f32]) {
    dequant(src, dst, BlockTQ2_0::SIZE, BlockTQ2_0::D, tq2_values);
}

/// Per super-block `Σ t·y · (d_w · d_a)`.
fn dot(
    nb: usize,
    w: &[u8],
    a: &[u8],
    size: usize,
    d_at: usize,
    values: fn(&[u8]) -> [i8; QK_K],
) -> f32 {
    let mut sum = 0f32;
    for (x, y) in w
        .chunks_exact(size)
        .zip(a.chunks_exact(BlockQ8_K::SIZE))
        .take(nb)
    {
        let isum: i32 = values(x)
            .iter()
            .zip(q8k_quants(y))
            .map(|(&t, &q)| i32::from(t) * i32::from(q as i8))
            .sum();
        sum += isum as f32 * (f16_at(x, d_at) * q8k_d(y));
    }
    sum
}

/// Scalar TQ1_0 × Q8_K.
pub(crate) fn dot_tq1_0_q8_k(nb: usize, w: &[u8], a: &[u8]) -> f32 {
    dot(nb, w, a, BlockTQ1_0::SIZE, BlockTQ1_0::D, tq1_values)
}

/// Scalar TQ2_0 × Q8_K.
pub(crate) fn dot_tq2_0_q8_k(nb: usize, w: &[u8], a: &[u8]) -> f32 {
    dot(nb, w, a, BlockTQ2_0::SIZE, BlockTQ2_0::D, tq2_values)
}
