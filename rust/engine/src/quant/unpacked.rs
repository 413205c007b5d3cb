//! The formats whose values are an integer `v` (|v| ≤ 127) times a small integer scale per 16
//! values and a block scale (the codebook formats, and the ternary ones read as such): their
//! super-blocks as values, scales and `d` ([`Unpack::parts`]), from which each architecture's
//! prompt tile prepares its weight rows once per matmul (on x86-64 `x86/ilanes.rs`: Q6_K's
//! tile with tokens in its lanes), so reading a format's grids, signs and packed scales costs
//! once per row instead of once per token (llama.cpp's CPU backend unpacks K and i-quant tiles
//! the same way).
//!
//! Arithmetic: `(d_w · d_a) · (Σ_h s_h · Σ v·y) · K` per super-block with the integer sums
//! exact, which is the formats' portable kernels' (`iquants::dot`), so every tile over these
//! values is bit-identical to them.

use super::blocks::QK_K;
use super::iquants::{values, Codebook};

/// A format that unpacks: its factor `K` and its super-blocks as values, scales and `d`.
pub(crate) trait Unpack {
    /// The factor `K` of `value = d · s · K · v`.
    const K: f32;
    /// Bytes per super-block.
    const SIZE: usize;
    /// The block scale, the 256 signed values and the 16 scales of `block`.
    fn parts(block: &[u8]) -> (f32, [i8; QK_K], [i16; 16]);
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
