//! The codebook ("i-quant") formats: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M.
//! Groups of 8 (IQ2, IQ1) or 4 (IQ3) values are an index into a grid of lattice points
//! (`iq_grids`), with sign bits and small odd scales per 16 or 32 values. Layouts: `blocks`.
//!
//! Each format is one [`Codebook`] impl that reads a block as 8 [`Group`]s of 32 values (grid
//! bytes, signs, two scales); the portable kernels here and the SIMD kernels (`x86::codebook`,
//! the NEON K tiles) all start from it. A value is `d · ls · K · v` with `v` the signed grid
//! value, or for IQ1 `v = 8·g ± 1` (its grid values `g` are −1, 0, 1, shifted by ±1/8). The
//! dot products sum `Σ ls · Σ v·y` exactly in integers per super-block and add
//! `(d_w · d_a) · (Σ · K)` per super-block (ggml scales the row's sum by `K` at the end
//! instead: the same values, `K` being a power of two). Dequantization is exact in f32 (every
//! factor has few significant bits), so it equals ggml's bit for bit.

use super::blocks::{
    BlockIQ1_M, BlockIQ1_S, BlockIQ2_S, BlockIQ2_XS, BlockIQ2_XXS, BlockIQ3_S, BlockIQ3_XXS,
    BlockQ8_K, QK_K,
};
use super::float::{f16_at, f16_le};
use super::iq_grids::{IQ1S_GRID, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID};
use super::kquants::{q8k_d, q8k_quants};
use super::types::GgmlType;

/// One group of 32 values of a codebook block.
#[derive(Clone, Copy)]
pub(crate) struct Group {
    /// The 32 grid bytes, 8 per u64 in element order: magnitudes (IQ2, IQ3) or IQ1's signed
    /// −1/0/1 as bytes.
    pub(crate) grid: [u64; 4],
    /// Per 8 values: bit `j` negates value `j` (IQ2, IQ3); IQ1: 0xff where the 8 values'
    /// shift is −1/8, 0 where it is +1/8. [`SIGN_BYTES`] turns either into ±1 bytes.
    pub(crate) signs: [u8; 4],
    /// The odd scales of the two 16-value halves.
    pub(crate) ls: [u8; 2],
}

/// For each sign byte, 8 bytes of ±1 (−1 where the bit is set), as a little-endian u64.
pub(crate) static SIGN_BYTES: [u64; 256] = sign_bytes();

const fn sign_bytes() -> [u64; 256] {
    let mut out = [0u64; 256];
    let mut s = 0;
    while s < 256 {
        let mut j = 0;
        while j < 8 {
            let byte: u64 = if (s >> j) & 1 == 1 { 0xff } else { 0x01 };
            out[s] |= byte << (8 * j);
            j += 1;
        }
        s += 1;
    }
    out
}

/// A codebook format: its block size, value factor and how its blocks read.
pub(crate) trait Codebook {
    /// The format (the x86-64 table's entries read it).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    const TY: GgmlType;
    /// Bytes per block.
    const SIZE: usize;
    /// The factor `K` of `value = d · ls · K · v`.
    const K: f32;
    /// IQ1: grid bytes are signed and `signs` select the shift (`v = 8·g ± 1`).
    const SHIFTED: bool;
    /// The block scale `d`.
    fn d(b: &[u8]) -> f32;
    /// Group `ib` (0..8) of the block `b`.
    fn group(b: &[u8], ib: usize) -> Group;
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

/// Two 4-byte grid entries as 8 bytes.
#[inline]
fn pair(lo: &[u8; 4], hi: &[u8; 4]) -> u64 {
    u64::from(u32::from_le_bytes(*lo)) | (u64::from(u32::from_le_bytes(*hi)) << 32)
}

/// Both halves' scale from a 4-bit field `s`.
#[inline]
fn odd(s: u32) -> u8 {
    2 * (s & 0x0f) as u8 + 1
}

/// IQ2_XXS.
pub(crate) struct IQ2XXS;
/// IQ2_XS.
pub(crate) struct IQ2XS;
/// IQ2_S.
pub(crate) struct IQ2S;
/// IQ3_XXS.
pub(crate) struct IQ3XXS;
/// IQ3_S.
pub(crate) struct IQ3S;
/// IQ1_S.
pub(crate) struct IQ1S;
/// IQ1_M.
pub(crate) struct IQ1M;

impl Codebook for IQ2XXS {
    const TY: GgmlType = GgmlType::IQ2_XXS;
    const SIZE: usize = BlockIQ2_XXS::SIZE;
    const K: f32 = 0.125;
    const SHIFTED: bool = false;
    #[inline(always)]
    fn d(b: &[u8]) -> f32 {
        f16_at(b, BlockIQ2_XXS::D)
    }
    #[inline(always)]
    fn group(b: &[u8], ib: usize) -> Group {
        // Two u32: four 8-bit indices; four 7-bit sign codes and the scale.
        let at = BlockIQ2_XXS::QS + 8 * ib;
        let aux = u32_at(b, at + 4);
        Group {
            grid: std::array::from_fn(|l| u64::from_le_bytes(IQ2XXS_GRID[usize::from(b[at + l])])),
            signs: std::array::from_fn(|l| signs7(aux >> (7 * l))),
            ls: [odd(aux >> 28); 2],
        }
    }
}

impl Codebook for IQ2XS {
    const TY: GgmlType = GgmlType::IQ2_XS;
    const SIZE: usize = BlockIQ2_XS::SIZE;
    const K: f32 = 0.125;
    const SHIFTED: bool = false;
    #[inline(always)]
    fn d(b: &[u8]) -> f32 {
        f16_at(b, BlockIQ2_XS::D)
    }
    #[inline(always)]
    fn group(b: &[u8], ib: usize) -> Group {
        let q = |l: usize| u16_at(b, BlockIQ2_XS::QS + 2 * (4 * ib + l));
        let s = u32::from(b[BlockIQ2_XS::SCALES + ib]);
        Group {
            grid: std::array::from_fn(|l| u64::from_le_bytes(IQ2XS_GRID[usize::from(q(l) & 511)])),
            signs: std::array::from_fn(|l| signs7(u32::from(q(l) >> 9))),
            ls: [odd(s), odd(s >> 4)],
        }
    }
}

impl Codebook for IQ2S {
    const TY: GgmlType = GgmlType::IQ2_S;
    const SIZE: usize = BlockIQ2_S::SIZE;
    const K: f32 = 0.125;
    const SHIFTED: bool = false;
    #[inline(always)]
    fn d(b: &[u8]) -> f32 {
        f16_at(b, BlockIQ2_S::D)
    }
    #[inline(always)]
    fn group(b: &[u8], ib: usize) -> Group {
        type B = BlockIQ2_S;
        let qh = usize::from(b[B::QH + ib]);
        let index = |l: usize| usize::from(b[B::QS + 4 * ib + l]) | ((qh << (8 - 2 * l)) & 0x300);
        let s = u32::from(b[B::SCALES + ib]);
        Group {
            grid: std::array::from_fn(|l| u64::from_le_bytes(IQ2S_GRID[index(l)])),
            signs: std::array::from_fn(|l| b[B::QS + QK_K / 8 + 4 * ib + l]),
            ls: [odd(s), odd(s >> 4)],
        }
    }
}

impl Codebook for IQ3XXS {
    const TY: GgmlType = GgmlType::IQ3_XXS;
    const SIZE: usize = BlockIQ3_XXS::SIZE;
    const K: f32 = 0.25;
    const SHIFTED: bool = false;
    #[inline(always)]
    fn d(b: &[u8]) -> f32 {
        f16_at(b, BlockIQ3_XXS::D)
    }
    #[inline(always)]
    fn group(b: &[u8], ib: usize) -> Group {
        // Eight 8-bit indices (4 values each); then, after all groups' indices, a u32 of four
        // 7-bit sign codes and the scale.
        type B = BlockIQ3_XXS;
        let aux = u32_at(b, B::QS + QK_K / 4 + 4 * ib);
        let q = |i: usize| &IQ3XXS_GRID[usize::from(b[B::QS + 8 * ib + i])];
        Group {
            grid: std::array::from_fn(|l| pair(q(2 * l), q(2 * l + 1))),
            signs: std::array::from_fn(|l| signs7(aux >> (7 * l))),
            ls: [odd(aux >> 28); 2],
        }
    }
}

impl Codebook for IQ3S {
    const TY: GgmlType = GgmlType::IQ3_S;
    const SIZE: usize = BlockIQ3_S::SIZE;
    const K: f32 = 1.0;
    const SHIFTED: bool = false;
    #[inline(always)]
    fn d(b: &[u8]) -> f32 {
        f16_at(b, BlockIQ3_S::D)
    }
    #[inline(always)]
    fn group(b: &[u8], ib: usize) -> Group {
        type B = BlockIQ3_S;
        let qh = usize::from(b[B::QH + ib]);
        let qs = |i: usize| usize::from(b[B::QS + 8 * ib + i]);
        let grid = |l: usize| {
            let i1 = qs(2 * l) | ((qh << (8 - 2 * l)) & 256);
            let i2 = qs(2 * l + 1) | ((qh << (7 - 2 * l)) & 256);
            pair(&IQ3S_GRID[i1], &IQ3S_GRID[i2])
        };
        let s = u32::from(b[B::SCALES + ib / 2] >> (4 * (ib % 2)));
        Group {
            grid: std::array::from_fn(grid),
            signs: std::array::from_fn(|l| b[B::SIGNS + 4 * ib + l]),
            ls: [odd(s); 2],
        }
    }
}

impl Codebook for IQ1S {
    const TY: GgmlType = GgmlType::IQ1_S;
    const SIZE: usize = BlockIQ1_S::SIZE;
    const K: f32 = 0.125;
    const SHIFTED: bool = true;
    #[inline(always)]
    fn d(b: &[u8]) -> f32 {
        f16_at(b, BlockIQ1_S::D)
    }
    #[inline(always)]
    fn group(b: &[u8], ib: usize) -> Group {
        // A u16 per group: four 3-bit index highs, a 3-bit scale, the shift's sign.
        type B = BlockIQ1_S;
        let qh = usize::from(u16_at(b, B::QH + 2 * ib));
        let index = |l: usize| usize::from(b[B::QS + 4 * ib + l]) | (((qh >> (3 * l)) & 7) << 8);
        let neg = if qh & 0x8000 != 0 { 0xff } else { 0 };
        Group {
            grid: std::array::from_fn(|l| u64::from_le_bytes(IQ1S_GRID[index(l)])),
            signs: [neg; 4],
            ls: [2 * ((qh >> 12) & 7) as u8 + 1; 2],
        }
    }
}

impl Codebook for IQ1M {
    const TY: GgmlType = GgmlType::IQ1_M;
    const SIZE: usize = BlockIQ1_M::SIZE;
    const K: f32 = 0.125;
    const SHIFTED: bool = true;
    /// An f16 whose four nibbles are the top nibbles of the four u16 scale words.
    #[inline(always)]
    fn d(b: &[u8]) -> f32 {
        let sc = |i: usize| u16_at(b, BlockIQ1_M::SCALES + 2 * i);
        let bits =
            (sc(0) >> 12) | ((sc(1) >> 8) & 0x00f0) | ((sc(2) >> 4) & 0x0f00) | (sc(3) & 0xf000);
        f16_le(bits.to_le_bytes())
    }
    #[inline(always)]
    fn group(b: &[u8], ib: usize) -> Group {
        // Per 8 values a nibble of `qh`: 3 index highs and the shift's sign.
        type B = BlockIQ1_M;
        let h = |l: usize| u16::from(b[B::QH + 2 * ib + l / 2]) >> (4 * (l % 2));
        let index = |l: usize| usize::from(b[B::QS + 4 * ib + l]) | (usize::from(h(l) & 7) << 8);
        let sc = u16_at(b, B::SCALES + 2 * (ib / 2)) >> (6 * (ib % 2));
        Group {
            grid: std::array::from_fn(|l| u64::from_le_bytes(IQ1S_GRID[index(l)])),
            signs: std::array::from_fn(|l| if h(l) & 8 != 0 { 0xff } else { 0 }),
            ls: [2 * (sc & 7) as u8 + 1, 2 * ((sc >> 3) & 7) as u8 + 1],
        }
    }
}

/// The 32 signed values `v` of a group (see the module doc).
#[inline]
pub(crate) fn values<C: Codebook>(g: &Group) -> [i8; 32] {
    std::array::from_fn(|i| {
        let (l, j) = (i / 8, i % 8);
        let grid = (g.grid[l] >> (8 * j)) as u8;
        let sign = (SIGN_BYTES[usize::from(g.signs[l])] >> (8 * j)) as u8 as i8;
        if C::SHIFTED {
            8 * (grid as i8) + sign
        } else {
            // Magnitudes are at most 62.
            (grid as i8) * sign
        }
    })
}

/// Dequantizes blocks of the codebook format `C`.
pub(crate) fn dequant<C: Codebook>(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(C::SIZE).zip(dst.chunks_exact_mut(QK_K)) {
        let d = C::d(b);
        for (ib, y) in y.chunks_exact_mut(32).enumerate() {
            let g = C::group(b, ib);
            let v = values::<C>(&g);
            for (h, y) in y.chunks_exact_mut(16).enumerate() {
                let dl = d * f32::from(g.ls[h]) * C::K;
                for (y, &v) in y.iter_mut().zip(&v[16 * h..]) {
                    *y = dl * f32::from(v);
                }
            }
        }
    }
}

/// Scalar codebook format × Q8_K: per super-block `(d_w · d_a) · (Σ_h ls_h · Σ v·y) · K`.
pub(crate) fn dot<C: Codebook>(nb: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0f32;
    for (x, y) in w
        .chunks_exact(C::SIZE)
        .zip(a.chunks_exact(BlockQ8_K::SIZE))
        .take(nb)
    {
        let yq = q8k_quants(y);
        let mut total = 0i32;
        for ib in 0..8 {
            let g = C::group(x, ib);
            let v = values::<C>(&g);
            for h in 0..2 {
                let at = 32 * ib + 16 * h;
                let s: i32 = v[16 * h..16 * h + 16]
                    .iter()
                    .zip(&yq[at..at + 16])
                    .map(|(&v, &q)| i32::from(v) * i32::from(q as i8))
                    .sum();
                total += i32::from(g.ls[h]) * s;
            }
        }
        sum += C::d(x) * q8k_d(y) * (total as f32 * C::K);
    }
    sum
}
