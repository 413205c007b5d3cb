//! Super-blocks unpacked for the prompt: the formats whose values are an integer `v` times a
//! small integer scale per 16 values and a block scale (the codebook formats; IQ4_XS has its
//! own tile with tokens in the lanes, `x86/klanes.rs`) become one layout, which a single SIMD tile per architecture multiplies with Q8_K
//! activations (llama.cpp's CPU backend unpacks K and i-quant tiles the same way). A prompt
//! matmul unpacks a few weight rows once and runs them against all of its tokens, so reading
//! a format's grids, signs and packed scales costs once per row instead of once per token.
//!
//! One unpacked super-block ([`UNPACKED_SIZE`] bytes):
//! - bytes `0..256`: `|v|` of the 256 values (at most 127);
//! - bytes `256..288`: the signs, bit `i % 64` of the little-endian u64 `i / 64` set where
//!   value `i` is negative;
//! - bytes `288..544`: per 16 values, their scale as 8 equal i16 (one 128-bit lane each);
//! - bytes `544..548`: the block scale `d` as f32.
//!
//! Arithmetic: `(d_w · d_a) · (Σ_h s_h · Σ v·y) · K` per super-block with the integer sums
//! exact, which is the formats' portable kernels' (`iquants::dot`), so every tile over unpacked
//! rows is bit-identical to them.

use super::blocks::QK_K;
use super::iquants::{values, Codebook};

/// Bytes of one unpacked super-block (a whole number of 64-byte lines).
pub(crate) const UNPACKED_SIZE: usize = 576;
const _: () = assert!(D + 4 <= UNPACKED_SIZE);
/// Where the signs start.
pub(crate) const SIGNS: usize = QK_K;
/// Where the scale lanes start.
pub(crate) const SCALES: usize = SIGNS + QK_K / 8;
/// Where `d` is.
pub(crate) const D: usize = SCALES + QK_K;

/// Unpacks the first `nb` super-blocks of a weight row into `out` ([`UNPACKED_SIZE`] bytes
/// each; both hold them).
pub(crate) type UnpackFn = fn(nb: usize, row: &[u8], out: &mut [u8]);

/// A format that unpacks: its factor `K` and its super-blocks as values, scales and `d`.
pub(crate) trait Unpack {
    /// The factor `K` of `value = d · s · K · v` (1 for IQ4_XS).
    const K: f32;
    /// Bytes per super-block.
    const SIZE: usize;
    /// The block scale, the 256 signed values and the 16 scales of `block`.
    fn parts(block: &[u8]) -> (f32, [i8; QK_K], [i16; 16]);

    /// Unpacks `block` into `out`.
    fn unpack(block: &[u8], out: &mut [u8]) {
        let (d, v, s) = Self::parts(block);
        for (o, v) in out[..QK_K].iter_mut().zip(v) {
            *o = v.unsigned_abs();
        }
        for (j, o) in out[SIGNS..SCALES].chunks_exact_mut(8).enumerate() {
            let bits = (0..64).fold(0u64, |m, i| m | (u64::from(v[64 * j + i] < 0) << i));
            o.copy_from_slice(&bits.to_le_bytes());
        }
        for (h, o) in out[SCALES..D].chunks_exact_mut(16).enumerate() {
            for w in o.chunks_exact_mut(2) {
                w.copy_from_slice(&s[h].to_le_bytes());
            }
        }
        out[D..D + 4].copy_from_slice(&d.to_le_bytes());
    }
}

/// Every codebook format.
impl<C: Codebook> Unpack for C {
    const K: f32 = C::K;
    const SIZE: usize = C::SIZE;
    fn parts(block: &[u8]) -> (f32, [i8; QK_K], [i16; 16]) {
        let mut v = [0i8; QK_K];
        let mut s = [0i16; 16];
        for (ib, v) in v.chunks_exact_mut(32).enumerate() {
            let g = C::group(block, ib);
            v.copy_from_slice(&values::<C>(&g));
            s[2 * ib] = i16::from(g.ls[0]);
            s[2 * ib + 1] = i16::from(g.ls[1]);
        }
        (C::d(block), v, s)
    }
}

/// Unpacks the `nb` super-blocks of a row of format `U` into `out`.
pub(crate) fn unpack_row<U: Unpack>(nb: usize, row: &[u8], out: &mut [u8]) {
    for (b, o) in row
        .chunks_exact(U::SIZE)
        .zip(out.chunks_exact_mut(UNPACKED_SIZE))
        .take(nb)
    {
        U::unpack(b, o);
    }
}
