//! Plain float element types (F32, F16, BF16): conversion, row conversion and portable dot products.

use half::f16;

/// Decodes a little-endian IEEE half from its two bytes.
#[inline]
pub(crate) fn f16_le(b: [u8; 2]) -> f32 {
    f16::from_bits(u16::from_le_bytes(b)).to_f32()
}

/// Reads the little-endian half at byte offset `at` of `block` (the caller guarantees the range).
#[inline]
pub(crate) fn f16_at(block: &[u8], at: usize) -> f32 {
    f16_le([block[at], block[at + 1]])
}

/// Decodes a little-endian bfloat16 from its two bytes (exact: bf16 is the top half of an f32).
#[inline]
pub(crate) fn bf16_le(b: [u8; 2]) -> f32 {
    f32::from_bits(u32::from(u16::from_le_bytes(b)) << 16)
}

/// Rounds an f32 to the bfloat16 bit pattern like ggml (`ggml_compute_fp32_to_bf16`): NaNs become
/// quiet NaNs, everything else rounds to nearest, ties to even.
#[inline]
fn f32_to_bf16_bits(x: f32) -> u16 {
    let u = x.to_bits();
    if u & 0x7fff_ffff > 0x7f80_0000 {
        return ((u >> 16) | 64) as u16;
    }
    ((u64::from(u) + 0x7fff + u64::from((u >> 16) & 1)) >> 16) as u16
}

/// Dequantizes little-endian F32 bytes (`src.len() == 4 * dst.len()`).
pub(crate) fn dequant_f32(src: &[u8], dst: &mut [f32]) {
    for (y, b) in dst.iter_mut().zip(src.chunks_exact(4)) {
        *y = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    }
}

/// Dequantizes little-endian F16 bytes (`src.len() == 2 * dst.len()`).
pub(crate) fn dequant_f16(src: &[u8], dst: &mut [f32]) {
    for (y, b) in dst.iter_mut().zip(src.chunks_exact(2)) {
        *y = f16_le([b[0], b[1]]);
    }
}

/// Dequantizes little-endian BF16 bytes (`src.len() == 2 * dst.len()`).
pub(crate) fn dequant_bf16(src: &[u8], dst: &mut [f32]) {
    for (y, b) in dst.iter_mut().zip(src.chunks_exact(2)) {
        *y = bf16_le([b[0], b[1]]);
    }
}

/// The IEEE half bit pattern nearest to `x` (ties to even), as ggml's `GGML_FP32_TO_FP16`.
#[inline]
pub(crate) fn quantize_f16_bits(x: f32) -> u16 {
    f16::from_f32(x).to_bits()
}

/// Writes `src` as little-endian F32 bytes.
pub(crate) fn quantize_f32(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src.iter().zip(dst.chunks_exact_mut(4)) {
        b.copy_from_slice(&x.to_le_bytes());
    }
}

/// Writes `src` as little-endian F16 bytes (round to nearest, ties to even, as ggml does).
pub(crate) fn quantize_f16(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src.iter().zip(dst.chunks_exact_mut(2)) {
        b.copy_from_slice(&quantize_f16_bits(*x).to_le_bytes());
    }
}

/// Writes `src` as little-endian BF16 bytes (ggml's rounding).
pub(crate) fn quantize_bf16(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src.iter().zip(dst.chunks_exact_mut(2)) {
        b.copy_from_slice(&f32_to_bf16_bits(*x).to_le_bytes());
    }
}

/// Portable F32 dot product of `n` elements: f32 products summed in f64 (ggml's generic path).
pub(crate) fn dot_f32(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0f64;
    for (x, y) in w.chunks_exact(4).zip(a.chunks_exact(4)).take(n) {
        let x = f32::from_le_bytes([x[0], x[1], x[2], x[3]]);
        let y = f32::from_le_bytes([y[0], y[1], y[2], y[3]]);
        sum += f64::from(x * y);
    }
    sum as f32
}

/// Portable F16 × F16 dot product: f32 products summed in f64 (ggml's generic path).
pub(crate) fn dot_f16(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0f64;
    for (x, y) in w.chunks_exact(2).zip(a.chunks_exact(2)).take(n) {
        sum += f64::from(f16_le([x[0], x[1]]) * f16_le([y[0], y[1]]));
    }
    sum as f32
}

/// Portable BF16 × BF16 dot product: f32 products summed in f64 (ggml's generic path).
pub(crate) fn dot_bf16(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0f64;
    for (x, y) in w.chunks_exact(2).zip(a.chunks_exact(2)).take(n) {
        sum += f64::from(bf16_le([x[0], x[1]]) * bf16_le([y[0], y[1]]));
    }
    sum as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_rounding_matches_ggml_rules() {
        assert_eq!(f32_to_bf16_bits(1.0), 0x3f80);
        // 1 + 2^-8 is exactly halfway between two bf16 values: ties to even (down).
        assert_eq!(f32_to_bf16_bits(f32::from_bits(0x3f80_8000)), 0x3f80);
        assert_eq!(f32_to_bf16_bits(f32::from_bits(0x3f81_8000)), 0x3f82);
        assert_eq!(f32_to_bf16_bits(f32::from_bits(0x7f80_0001)), 0x7fc0);
        assert_eq!(bf16_le(0x3f80u16.to_le_bytes()), 1.0);
    }
}
