//! The ternary formats TQ1_0 and TQ2_0 (values −1, 0, 1 times a super-block scale), read as
//! codebook formats ([`Codebook`]): each group of 32 values is 32 magnitudes (0 or 1) with
//! their signs and the scale 1 for both halves, so dequantization, the portable dot product and
//! every SIMD kernel of the codebook formats serve them too. Their arithmetic is llama.cpp's:
//! per super-block the exact integer `Σ (t − 1)·y` times `d_w · d_a`. Layouts: `blocks`.

use super::blocks::{BlockTQ1_0, BlockTQ2_0};
use super::float::f16_at;
use super::iquants::{Codebook, Group};
use super::types::GgmlType;

/// Base-3 digit `n` (0 = most significant) of a TQ1_0 byte, in 0..=2: the byte holds the digits
/// as a fixed-point fraction of 243, so multiplying by 3ⁿ (mod 256) brings digit `n` to the
/// top, and `(· 3) >> 8` reads it.
#[inline(always)]
fn trit(byte: u8, n: usize) -> u8 {
    let q = byte.wrapping_mul(POW3[n]);
    ((u16::from(q) * 3) >> 8) as u8
}

/// `3ⁿ` for the digits `n` of a byte.
const POW3: [u8; 5] = [1, 3, 9, 27, 81];

/// Eight bytes that are each 0 or 1 as the bits of one byte (byte `k` → bit `k`): the
/// multiplication moves byte `k`'s bit to bit `56 + k` and no two partial products meet.
#[inline(always)]
fn gather_bits(bytes01: u64) -> u8 {
    (bytes01.wrapping_mul(0x0102_0408_1020_4080) >> 56) as u8
}

const ONES: u64 = 0x0101_0101_0101_0101;

/// The group of eight-byte words of digits `q` (each byte 0..=3, the value being `q − 1`):
/// magnitudes `|q − 1|` and the sign bits of `q == 0`.
#[inline(always)]
fn group_of(digits: [u64; 4]) -> Group {
    let mut signs = [0u8; 4];
    let grid = std::array::from_fn(|k| {
        let q = digits[k];
        let (b0, b1) = (q & ONES, (q >> 1) & ONES);
        signs[k] = gather_bits(!(b0 | b1) & ONES);
        // |q − 1| for q = 0, 1, 2, 3: 1, 0, 1, 2.
        (b0 ^ ONES) + ((b0 & b1) << 1)
    });
    Group {
        grid,
        signs,
        ls: [1, 1],
    }
}

/// TQ1_0.
pub(crate) struct TQ1;
/// TQ2_0.
pub(crate) struct TQ2;

impl Codebook for TQ1 {
    const TY: GgmlType = GgmlType::TQ1_0;
    const SIZE: usize = BlockTQ1_0::SIZE;
    const K: f32 = 1.0;
    const SHIFTED: bool = false;
    #[inline(always)]
    fn d(b: &[u8]) -> f32 {
        f16_at(b, BlockTQ1_0::D)
    }
    /// Digit `n` of `qs[m]` is element `32n + m` for the first 32 bytes (groups 0-4), of
    /// `qs[32 + m]` element `160 + 16n + m` for the next 16 (groups 5-7), and digit `n` of
    /// `qh[j]` element `240 + 4n + j` (the second half of group 7).
    #[inline(always)]
    fn group(b: &[u8], ib: usize) -> Group {
        type B = BlockTQ1_0;
        let (qs, qh) = (&b[B::QS..B::QS + 48], &b[B::QH..B::QH + 4]);
        let mut t = [0u8; 32];
        match ib {
            0..=4 => {
                for (t, &byte) in t.iter_mut().zip(&qs[..32]) {
                    *t = trit(byte, ib);
                }
            }
            5 | 6 => {
                for (h, t) in t.chunks_exact_mut(16).enumerate() {
                    for (t, &byte) in t.iter_mut().zip(&qs[32..]) {
                        *t = trit(byte, 2 * (ib - 5) + h);
                    }
                }
            }
            _ => {
                for (t, &byte) in t[..16].iter_mut().zip(&qs[32..]) {
                    *t = trit(byte, 4);
                }
                for (n, t) in t[16..].chunks_exact_mut(4).enumerate() {
                    for (t, &byte) in t.iter_mut().zip(qh) {
                        *t = trit(byte, n);
                    }
                }
            }
        }
        group_of(std::array::from_fn(|k| {
            u64::from_le_bytes(t[8 * k..8 * k + 8].try_into().expect("8 bytes"))
        }))
    }
}

impl Codebook for TQ2 {
    const TY: GgmlType = GgmlType::TQ2_0;
    const SIZE: usize = BlockTQ2_0::SIZE;
    const K: f32 = 1.0;
    const SHIFTED: bool = false;
    #[inline(always)]
    fn d(b: &[u8]) -> f32 {
        f16_at(b, BlockTQ2_0::D)
    }
    /// Bits `2l..2l+2` of `qs[32j + m]` are element `128j + 32l + m`: group `4j + l`.
    #[inline(always)]
    fn group(b: &[u8], ib: usize) -> Group {
        let (j, l) = (ib / 4, ib % 4);
        let qs = &b[BlockTQ2_0::QS + 32 * j..][..32];
        group_of(std::array::from_fn(|k| {
            let w = u64::from_le_bytes(qs[8 * k..8 * k + 8].try_into().expect("8 bytes"));
            (w >> (2 * l)) & (3 * ONES)
        }))
    }
}
