//! The 4-bit formats whose nibbles index a table of levels instead of counting steps: IQ4_NL
//! and IQ4_XS (llama.cpp's non-linear levels) and MXFP4 (OCP microscaling E2M1 floats):
//! dequantization and the portable dot products. Layouts: `blocks`.
//!
//! Dot products sum each block exactly in integers (the levels are integers) and apply the
//! block's scale once: `Σ_blocks (d_w · d_a) · Σ L[q]·y` (IQ4_XS: `Σ (ls − 32) · Σ L[q]·y` per
//! super-block). The SIMD kernels give the same integers and combine them in the same order.

use super::blocks::{BlockIQ4_NL, BlockIQ4_XS, BlockMXFP4, BlockQ8_0, QK, QK_K};
use super::float::f16_at;
use super::kquants::{q8k_d, q8k_quants};

/// IQ4_NL's and IQ4_XS's 16 levels (llama.cpp's `kvalues_iq4nl`).
pub(crate) const IQ4NL_LEVELS: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// MXFP4's 16 levels: the E2M1 values doubled (so they are integers), sign in bit 3.
pub(crate) const MXFP4_LEVELS: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// The 32 levels of a nibble array (16 bytes) in element order: element `j < 16` is the low
/// nibble of byte `j`, element `j + 16` its high nibble.
#[inline]
pub(crate) fn levels(qs: &[u8], table: &[i8; 16]) -> [i8; QK] {
    let mut q = [0i8; QK];
    for j in 0..QK / 2 {
        q[j] = table[usize::from(qs[j] & 0x0f)];
        q[j + QK / 2] = table[usize::from(qs[j] >> 4)];
    }
    q
}

/// Half of the power of two an E8M0 byte encodes (`2^(e − 128)`; MXFP4's levels are doubled),
/// as ggml's `ggml_e8m0_to_fp32_half`: `e` 0 and 1 give the subnormals 2⁻¹²⁸ and 2⁻¹²⁷.
#[inline]
pub(crate) fn e8m0_half(e: u8) -> f32 {
    let bits = if e < 2 {
        0x0020_0000u32 << e
    } else {
        u32::from(e - 1) << 23
    };
    f32::from_bits(bits)
}

/// The eight 6-bit scales of an IQ4_XS block, offset by −32.
#[inline]
pub(crate) fn iq4xs_scales(b: &[u8]) -> [i32; 8] {
    type B = BlockIQ4_XS;
    let h = u16::from_le_bytes([b[B::SCALES_H], b[B::SCALES_H + 1]]);
    std::array::from_fn(|ib| {
        let low = (b[B::SCALES_L + ib / 2] >> (4 * (ib % 2))) & 0x0f;
        let high = ((h >> (2 * ib)) & 3) as u8;
        i32::from(low | (high << 4)) - 32
    })
}

/// Σ x·y of levels and i8 activation bytes.
#[inline]
fn isum(x: &[i8], y: &[u8]) -> i32 {
    x.iter()
        .zip(y)
        .map(|(&a, &b)| i32::from(a) * i32::from(b as i8))
        .sum()
}

/// Dequantizes IQ4_NL blocks.
pub(crate) fn dequant_iq4_nl(src: &[u8], dst: &mut [f32]) {
    type B = BlockIQ4_NL;
    for (b, y) in src.chunks_exact(B::SIZE).zip(dst.chunks_exact_mut(QK)) {
        let d = f16_at(b, B::D);
        for (y, q) in y
            .iter_mut()
            .zip(levels(&b[B::QS..B::QS + QK / 2], &IQ4NL_LEVELS))
        {
            *y = d * f32::from(q);
        }
    }
}

/// Dequantizes IQ4_XS blocks.
pub(crate) fn dequant_iq4_xs(src: &[u8], dst: &mut [f32]) {
    type B = BlockIQ4_XS;
    for (b, y) in src.chunks_exact(B::SIZE).zip(dst.chunks_exact_mut(QK_K)) {
        let d = f16_at(b, B::D);
        let scales = iq4xs_scales(b);
        for (ib, y) in y.chunks_exact_mut(QK).enumerate() {
            let dl = d * scales[ib] as f32;
            let qs = &b[B::QS + 16 * ib..B::QS + 16 * ib + 16];
            for (y, q) in y.iter_mut().zip(levels(qs, &IQ4NL_LEVELS)) {
                *y = dl * f32::from(q);
            }
        }
    }
}

/// Dequantizes MXFP4 blocks.
pub(crate) fn dequant_mxfp4(src: &[u8], dst: &mut [f32]) {
    type B = BlockMXFP4;
    for (b, y) in src.chunks_exact(B::SIZE).zip(dst.chunks_exact_mut(QK)) {
        let d = e8m0_half(b[B::E]);
        for (y, q) in y
            .iter_mut()
            .zip(levels(&b[B::QS..B::QS + QK / 2], &MXFP4_LEVELS))
        {
            *y = f32::from(q) * d;
        }
    }
}

/// Per block of 32 × Q8_0: `(d_a · scale(block)) · Σ table[q]·y`, blocks of `size` bytes with
/// their nibbles at `qs`.
fn dot_levels_q8_0(
    (nb, w, a): (usize, &[u8], &[u8]),
    (size, qs): (usize, usize),
    table: &[i8; 16],
    scale: impl Fn(&[u8]) -> f32,
) -> f32 {
    type A = BlockQ8_0;
    let mut sum = 0f32;
    for (x, y) in w.chunks_exact(size).zip(a.chunks_exact(A::SIZE)).take(nb) {
        let q = levels(&x[qs..qs + QK / 2], table);
        let d = f16_at(y, A::D) * scale(x);
        sum += d * isum(&q, &y[A::QS..A::QS + QK]) as f32;
    }
    sum
}

/// Scalar IQ4_NL × Q8_0: per block `(d_a · d_w) · Σ L[q]·y`.
pub(crate) fn dot_iq4_nl_q8_0(nb: usize, w: &[u8], a: &[u8]) -> f32 {
    type W = BlockIQ4_NL;
    dot_levels_q8_0((nb, w, a), (W::SIZE, W::QS), &IQ4NL_LEVELS, |x| {
        f16_at(x, W::D)
    })
}

/// Scalar MXFP4 × Q8_0: per block `(d_a · 2^(e−128)) · Σ F[q]·y`.
pub(crate) fn dot_mxfp4_q8_0(nb: usize, w: &[u8], a: &[u8]) -> f32 {
    type W = BlockMXFP4;
    dot_levels_q8_0((nb, w, a), (W::SIZE, W::QS), &MXFP4_LEVELS, |x| {
        e8m0_half(x[W::E])
    })
}

/// Scalar IQ4_XS × Q8_K: per super-block `(d_w · d_a) · Σ_ib (ls_ib − 32) · Σ L[q]·y`.
pub(crate) fn dot_iq4_xs_q8_k(nb: usize, w: &[u8], a: &[u8]) -> f32 {
    type W = BlockIQ4_XS;
    let mut sum = 0f32;
    for (x, y) in w
        .chunks_exact(W::SIZE)
        .zip(a.chunks_exact(super::blocks::BlockQ8_K::SIZE))
        .take(nb)
    {
        let scales = iq4xs_scales(x);
        let yq = q8k_quants(y);
        let total: i32 = (0..QK_K / QK)
            .map(|ib| {
                let q = levels(&x[W::QS + 16 * ib..W::QS + 16 * ib + 16], &IQ4NL_LEVELS);
                scales[ib] * isum(&q, &yq[QK * ib..QK * ib + QK])
            })
            .sum();
        sum += f16_at(x, W::D) * q8k_d(y) * total as f32;
    }
    sum
}
