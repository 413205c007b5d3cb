//! The codebook ("i-quant") formats: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M.
//! Groups of 8 (IQ2, IQ1) or 4 (IQ3) values are an index into a grid of lattice points
//! (`iq_grids`), with sign bits and small odd scales per 16 or 32 values. Layouts: `blocks`.
//!
//! Every block is first decoded to a [`Decoded`] super-block: 256 signed integer values, one
//! odd scale per 16 values and (IQ1) the shifts. Dequantization multiplies out
//! `d · ls · K · v` (exact in f32: every factor has few significant bits), and the dot products
//! sum `Σ ls · Σ v·y` exactly in integers per super-block before one scaling, as ggml's
//! reference does.

use super::blocks::{
    BlockIQ1_M, BlockIQ1_S, BlockIQ2_S, BlockIQ2_XS, BlockIQ2_XXS, BlockIQ3_S, BlockIQ3_XXS,
    BlockQ8_K, QK_K,
};
use super::float::{f16_at, f16_le};
use super::iq_grids::{IQ1S_GRID, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID};
use super::kquants::{q8k_d, q8k_quants};
use super::types::GgmlType;

/// IQ1_S's and IQ1_M's shift of every grid value (`IQ1S_DELTA`).
const IQ1_DELTA: f32 = 0.125;

/// One decoded super-block.
struct Decoded {
    /// The block scale `d`.
    d: f32,
    /// Element values: grid value times sign (IQ2/IQ3), or the grid's −1..=1 (IQ1).
    v: [i8; QK_K],
    /// The odd scale `ls` of each 16 values.
    ls: [u8; 16],
    /// IQ1: bit `g` set when the shift of values `8g..8g+8` is −1/8 (else +1/8).
    neg_shift: u32,
}

impl Decoded {
    fn new(d: f32) -> Self {
        Decoded {
            d,
            v: [0; QK_K],
            ls: [0; 16],
            neg_shift: 0,
        }
    }

    /// Writes 8 grid bytes with sign bits `signs` (bit `j` negates value `j`) at element `at`.
    fn put8(&mut self, at: usize, grid: &[u8; 8], signs: u8) {
        for (j, (v, &g)) in self.v[at..at + 8].iter_mut().zip(grid).enumerate() {
            let g = g as i8;
            *v = if signs >> j & 1 == 1 { -g } else { g };
        }
    }

    /// Writes two 4-byte grid entries with the sign bits `signs` at element `at`.
    fn put4x2(&mut self, at: usize, g1: &[u8; 4], g2: &[u8; 4], signs: u8) {
        let mut grid = [0u8; 8];
        grid[..4].copy_from_slice(g1);
        grid[4..].copy_from_slice(g2);
        self.put8(at, &grid, signs);
    }

    /// Both 16-value scales of 32 values.
    fn scale32(&mut self, ib: usize, ls: u8) {
        self.ls[2 * ib] = ls;
        self.ls[2 * ib + 1] = ls;
    }
}

/// The sign byte of a 7-bit sign code: bit 7 makes the number of negative values even.
#[inline]
fn signs7(code: u32) -> u8 {
    let c = (code & 127) as u8;
    c | (((c.count_ones() & 1) as u8) << 7)
}

#[inline]
fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

#[inline]
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn decode_iq2_xxs(b: &[u8]) -> Decoded {
    type B = BlockIQ2_XXS;
    let mut out = Decoded::new(f16_at(b, B::D));
    for ib in 0..8 {
        let at = B::QS + 8 * ib;
        let aux = u32_at(b, at + 4);
        for l in 0..4 {
            let grid = &IQ2XXS_GRID[usize::from(b[at + l])];
            out.put8(32 * ib + 8 * l, grid, signs7(aux >> (7 * l)));
        }
        out.scale32(ib, 2 * (aux >> 28) as u8 + 1);
    }
    out
}

fn decode_iq2_xs(b: &[u8]) -> Decoded {
    type B = BlockIQ2_XS;
    let mut out = Decoded::new(f16_at(b, B::D));
    for g in 0..32 {
        let q = u16_at(b, B::QS + 2 * g);
        let grid = &IQ2XS_GRID[usize::from(q & 511)];
        out.put8(8 * g, grid, signs7(u32::from(q >> 9)));
    }
    for ib in 0..8 {
        let s = b[B::SCALES + ib];
        out.ls[2 * ib] = 2 * (s & 0x0f) + 1;
        out.ls[2 * ib + 1] = 2 * (s >> 4) + 1;
    }
    out
}

fn decode_iq2_s(b: &[u8]) -> Decoded {
    type B = BlockIQ2_S;
    let mut out = Decoded::new(f16_at(b, B::D));
    for ib in 0..8 {
        let qh = usize::from(b[B::QH + ib]);
        for l in 0..4 {
            let index = usize::from(b[B::QS + 4 * ib + l]) | ((qh << (8 - 2 * l)) & 0x300);
            let signs = b[B::QS + QK_K / 8 + 4 * ib + l];
            out.put8(32 * ib + 8 * l, &IQ2S_GRID[index], signs);
        }
        let s = b[B::SCALES + ib];
        out.ls[2 * ib] = 2 * (s & 0x0f) + 1;
        out.ls[2 * ib + 1] = 2 * (s >> 4) + 1;
    }
    out
}

fn decode_iq3_xxs(b: &[u8]) -> Decoded {
    type B = BlockIQ3_XXS;
    let mut out = Decoded::new(f16_at(b, B::D));
    for ib in 0..8 {
        let aux = u32_at(b, B::QS + QK_K / 4 + 4 * ib);
        let qs = &b[B::QS + 8 * ib..B::QS + 8 * ib + 8];
        for l in 0..4 {
            let g1 = &IQ3XXS_GRID[usize::from(qs[2 * l])];
            let g2 = &IQ3XXS_GRID[usize::from(qs[2 * l + 1])];
            out.put4x2(32 * ib + 8 * l, g1, g2, signs7(aux >> (7 * l)));
        }
        out.scale32(ib, 2 * (aux >> 28) as u8 + 1);
    }
    out
}

fn decode_iq3_s(b: &[u8]) -> Decoded {
    type B = BlockIQ3_S;
    let mut out = Decoded::new(f16_at(b, B::D));
    for ib in 0..8 {
        let qh = usize::from(b[B::QH + ib]);
        let qs = &b[B::QS + 8 * ib..B::QS + 8 * ib + 8];
        for l in 0..4 {
            let i1 = usize::from(qs[2 * l]) | ((qh << (8 - 2 * l)) & 256);
            let i2 = usize::from(qs[2 * l + 1]) | ((qh << (7 - 2 * l)) & 256);
            let signs = b[B::SIGNS + 4 * ib + l];
            out.put4x2(32 * ib + 8 * l, &IQ3S_GRID[i1], &IQ3S_GRID[i2], signs);
        }
        let s = b[B::SCALES + ib / 2] >> (4 * (ib % 2));
        out.scale32(ib, 2 * (s & 0x0f) + 1);
    }
    out
}

/// Writes the IQ1 grid entry `index` at element `at`.
fn put_iq1(out: &mut Decoded, at: usize, index: usize) {
    for (v, &g) in out.v[at..at + 8].iter_mut().zip(&IQ1S_GRID[index]) {
        *v = g as i8;
    }
}

fn decode_iq1_s(b: &[u8]) -> Decoded {
    type B = BlockIQ1_S;
    let mut out = Decoded::new(f16_at(b, B::D));
    for ib in 0..8 {
        let qh = usize::from(u16_at(b, B::QH + 2 * ib));
        for l in 0..4 {
            let index = usize::from(b[B::QS + 4 * ib + l]) | (((qh >> (3 * l)) & 7) << 8);
            put_iq1(&mut out, 32 * ib + 8 * l, index);
        }
        out.scale32(ib, 2 * ((qh >> 12) & 7) as u8 + 1);
        if qh & 0x8000 != 0 {
            out.neg_shift |= 0xf << (4 * ib);
        }
    }
    out
}

/// IQ1_M's super-block scale: an f16 whose four nibbles are the top nibbles of the four u16
/// scale words.
fn iq1m_d(b: &[u8]) -> f32 {
    let sc = |i: usize| u16_at(b, BlockIQ1_M::SCALES + 2 * i);
    let bits = (sc(0) >> 12) | ((sc(1) >> 8) & 0x00f0) | ((sc(2) >> 4) & 0x0f00) | (sc(3) & 0xf000);
    f16_le(bits.to_le_bytes())
}

fn decode_iq1_m(b: &[u8]) -> Decoded {
    type B = BlockIQ1_M;
    let mut out = Decoded::new(iq1m_d(b));
    for ib in 0..8 {
        let qh = [b[B::QH + 2 * ib], b[B::QH + 2 * ib + 1]];
        for l in 0..4 {
            let h = usize::from(qh[l / 2]);
            let high = if l % 2 == 0 {
                (h << 8) & 0x700
            } else {
                (h << 4) & 0x700
            };
            put_iq1(
                &mut out,
                32 * ib + 8 * l,
                usize::from(b[B::QS + 4 * ib + l]) | high,
            );
            if qh[l / 2] & (0x08 << (4 * (l % 2))) != 0 {
                out.neg_shift |= 1 << (4 * ib + l);
            }
        }
        let sc = u16_at(b, B::SCALES + 2 * (ib / 2));
        let shift = 6 * (ib % 2);
        out.ls[2 * ib] = 2 * ((sc >> shift) & 7) as u8 + 1;
        out.ls[2 * ib + 1] = 2 * ((sc >> (shift + 3)) & 7) as u8 + 1;
    }
    out
}

/// Decodes one block of a codebook format.
type Decoder = fn(&[u8]) -> Decoded;

/// The decoder, bytes per block and the factor `K` of each codebook format: a value is
/// `d · ls · K · v`, or `d · ls · (v ± 1/8)` for IQ1 (`K` = 1).
fn format(ty: GgmlType) -> (Decoder, usize, f32) {
    match ty {
        GgmlType::IQ2_XXS => (decode_iq2_xxs, BlockIQ2_XXS::SIZE, 0.125),
        GgmlType::IQ2_XS => (decode_iq2_xs, BlockIQ2_XS::SIZE, 0.125),
        GgmlType::IQ2_S => (decode_iq2_s, BlockIQ2_S::SIZE, 0.125),
        GgmlType::IQ3_XXS => (decode_iq3_xxs, BlockIQ3_XXS::SIZE, 0.25),
        GgmlType::IQ3_S => (decode_iq3_s, BlockIQ3_S::SIZE, 1.0),
        GgmlType::IQ1_S => (decode_iq1_s, BlockIQ1_S::SIZE, 1.0),
        GgmlType::IQ1_M => (decode_iq1_m, BlockIQ1_M::SIZE, 1.0),
        other => unreachable!("{other} is not a codebook format"),
    }
}

fn is_iq1(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::IQ1_S | GgmlType::IQ1_M)
}

/// Dequantizes blocks of the codebook format `ty`.
pub(crate) fn dequant(ty: GgmlType, src: &[u8], dst: &mut [f32]) {
    let (decode, size, k) = format(ty);
    for (b, y) in src.chunks_exact(size).zip(dst.chunks_exact_mut(QK_K)) {
        let blk = decode(b);
        for (g, y) in y.chunks_exact_mut(16).enumerate() {
            let dl = blk.d * f32::from(blk.ls[g]) * k;
            for (j, y) in y.iter_mut().enumerate() {
                let i = 16 * g + j;
                *y = if is_iq1(ty) {
                    let shift = if blk.neg_shift >> (i / 8) & 1 == 1 {
                        -IQ1_DELTA
                    } else {
                        IQ1_DELTA
                    };
                    dl * (f32::from(blk.v[i]) + shift)
                } else {
                    dl * f32::from(blk.v[i])
                };
            }
        }
    }
}

/// Σ x·y of i8 values and activation bytes.
#[inline]
fn isum(x: &[i8], y: &[u8]) -> i32 {
    x.iter()
        .zip(y)
        .map(|(&a, &b)| i32::from(a) * i32::from(b as i8))
        .sum()
}

/// Scalar codebook format × Q8_K: per super-block `(d_w · d_a) · Σ_g ls_g · Σ v·y` (IQ1: plus
/// 1/8 of `Σ_g ls_g · Σ ±y`), summed over blocks and scaled by `K` at the end.
pub(crate) fn dot(ty: GgmlType, nb: usize, w: &[u8], a: &[u8]) -> f32 {
    let (decode, size, k) = format(ty);
    let mut sum = 0f32;
    for (x, y) in w
        .chunks_exact(size)
        .zip(a.chunks_exact(BlockQ8_K::SIZE))
        .take(nb)
    {
        let blk = decode(x);
        let yq = q8k_quants(y);
        let main: i32 = (0..16)
            .map(|g| i32::from(blk.ls[g]) * isum(&blk.v[16 * g..16 * g + 16], &yq[16 * g..]))
            .sum();
        sum += if is_iq1(ty) {
            let shifted: i32 = (0..32)
                .map(|e| {
                    let ys: i32 = yq[8 * e..8 * e + 8]
                        .iter()
                        .map(|&q| i32::from(q as i8))
                        .sum();
                    let ls = i32::from(blk.ls[e / 2]);
                    if blk.neg_shift >> e & 1 == 1 {
                        -ls * ys
                    } else {
                        ls * ys
                    }
                })
                .sum();
            blk.d * q8k_d(y) * (main as f32 + IQ1_DELTA * shifted as f32)
        } else {
            blk.d * q8k_d(y) * main as f32
        };
    }
    k * sum
}

macro_rules! codebook_entry_points {
    ($($ty:ident: $dot:ident),* $(,)?) => {$(
        #[doc = concat!("Scalar ", stringify!($ty), " × Q8_K (see [`dot`]).")]
        pub(crate) fn $dot(nb: usize, w: &[u8], a: &[u8]) -> f32 {
            dot(GgmlType::$ty, nb, w, a)
        }
    )*};
}

codebook_entry_points! {
    IQ2_XXS: dot_iq2_xxs_q8_k,
    IQ2_XS: dot_iq2_xs_q8_k,
    IQ2_S: dot_iq2_s_q8_k,
    IQ3_XXS: dot_iq3_xxs_q8_k,
    IQ3_S: dot_iq3_s_q8_k,
    IQ1_S: dot_iq1_s_q8_k,
    IQ1_M: dot_iq1_m_q8_k,
}
