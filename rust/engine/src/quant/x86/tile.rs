//! Tiled x86 kernels for the 32-element block formats: `R` weight rows × `T` activation rows per
//! call, so each weight block is unpacked once for `T` tokens and each activation block loaded
//! once for `R` rows. Prompt processing uses `R × 4` tiles (with AVX-512 BW the wide tile of
//! `wide` takes over; with AVX2 alone the 4-row kernel of `decode_avx2`). Decoding
//! (`Kernels::dot_rows`) uses `4 × 1` tiles whose rows lie a quarter of the matrix apart: four
//! far-apart sequential streams keep full bandwidth, while adjacent rows read together
//! interleave streams a few hundred bytes apart, which measured 2-3× slower from DRAM on our
//! test machine (23 GB/s for one sequential stream, 8 GB/s for two streams 612 B apart).
//!
//! Each (row, token) pair keeps the accumulation of the one-row kernels (`super::x86`): 4 f32
//! lanes, one FMA per block with the scale product `f32(d_w)·f32(d_a)`, lane `j` summing the
//! products of bytes `4j..4j+4` and `16+4j..16+4j+4`, then [`hsum4`] (plus `Σ m·s` for Q4_1).
//! The integer lane sums are exact whichever instruction computes them, so every result is
//! bit-identical to [`super::Kernels::dot`]. With more than one token, two tokens share a register
//! (4 lanes each), so one conversion and one FMA serve both.
//!
//! Two instruction sets: AVX2 (`maddubs` + `madd`) and AVX-512 VNNI (`vpdpbusd` on 256-bit
//! registers, with the 16 extra registers AVX-512VL brings). Unsigned weight codes multiply the
//! signed activations directly; the weight offset (8 for Q4_0, 16 for Q5_0, and 128 for Q8_0
//! under VNNI, whose codes are flipped to unsigned) is subtracted as `offset · Σ a` per lane.
//!
//! Safety: the dispatcher checks the CPU features; `nb` whole blocks are present in every row.

use std::arch::x86_64::*;

use super::{fifth_bits, fold, hsum4, level_table, load, nibbles, word};
use crate::quant::blocks::{
    BlockIQ4_NL, BlockMXFP4, BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1,
};
use crate::quant::nonlinear::{IQ4NL_LEVELS, MXFP4_LEVELS};

/// How a 32-element format stores its 32 codes.
#[derive(Clone, Copy)]
pub(super) enum Codes {
    /// 32 signed bytes at `QS` (Q8_0): AVX2 multiplies them with the sign trick, VNNI flips
    /// them to unsigned (`+128`, subtracted again as an offset correction).
    Bytes,
    /// 32 nibbles in the 16 bytes at `QS`, the low nibbles the first 16 elements.
    Nibbles,
    /// Nibbles, plus the fifth bit of element `i` in bit `i` of the u32 at `qh`.
    Nibbles5 {
        /// Byte offset of the fifth bits.
        qh: usize,
    },
    /// 32 nibbles as `Nibbles`, each the index of one of 16 signed levels (IQ4_NL): after one
    /// byte shuffle through the levels the codes are signed bytes, used as `Bytes`' are.
    Levels(&'static [i8; 16]),
}

/// How a 32-element format stores its block scale `d`, in its first bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Scale {
    /// An IEEE half (then the f16 minimum `m` when the format has one).
    F16,
    /// An E8M0 byte, MXFP4's `2^(e − 128)` ([`crate::quant::nonlinear::e8m0_half`]).
    E8M0,
}

/// A 32-element weight block format as the x86 kernels read it: the tiles here, the wide
/// prompt tile (`wide`) and the decoding kernels (`decode`, `decode_avx2`) are
/// written once over this trait, and each format is one impl (ggml's per-type row). Every
/// format starts with its scale `d` ([`Block32::SCALE`]; then the f16 minimum `m` when it has
/// one).
pub(super) trait Block32 {
    /// Bytes per block.
    const SIZE: usize;
    /// Byte offset of the quants.
    const QS: usize;
    /// How the codes are stored.
    const CODES: Codes;
    /// The offset subtracted from the unsigned codes (Q4_0 8, Q5_0 16; 0 for the formats with
    /// a minimum and for `Codes::Bytes`): a power of two, applied as `−offset · Σ a` per lane.
    const OFFSET: u32;
    /// Whether the block holds a minimum `m` after `d`, applied as `Σ m·s` with Q8_1
    /// activations (Q4_1, Q5_1); the others take Q8_0 activations.
    const MIN: bool;
    /// Bytes per activation block (Q8_1 with a minimum, else Q8_0).
    const ACT_SIZE: usize = if Self::MIN {
        BlockQ8_1::SIZE
    } else {
        BlockQ8_0::SIZE
    };
    /// Byte offset of an activation block's quants.
    const ACT_QS: usize = if Self::MIN {
        BlockQ8_1::QS
    } else {
        BlockQ8_0::QS
    };
    /// How the block scale is stored.
    const SCALE: Scale = Scale::F16;
    /// Whether the codes are signed bytes (see [`Codes::Bytes`]).
    const SIGNED: bool = matches!(Self::CODES, Codes::Bytes | Codes::Levels(_));
}

impl Block32 for BlockQ8_0 {
    const SIZE: usize = Self::SIZE;
    const QS: usize = Self::QS;
    const CODES: Codes = Codes::Bytes;
    const OFFSET: u32 = 0;
    const MIN: bool = false;
}

impl Block32 for BlockQ4_0 {
    const SIZE: usize = Self::SIZE;
    const QS: usize = Self::QS;
    const CODES: Codes = Codes::Nibbles;
    const OFFSET: u32 = 8;
    const MIN: bool = false;
}

impl Block32 for BlockQ5_0 {
    const SIZE: usize = Self::SIZE;
    const QS: usize = Self::QS;
    const CODES: Codes = Codes::Nibbles5 { qh: Self::QH };
    const OFFSET: u32 = 16;
    const MIN: bool = false;
}

impl Block32 for BlockQ4_1 {
    const SIZE: usize = Self::SIZE;
    const QS: usize = Self::QS;
    const CODES: Codes = Codes::Nibbles;
    const OFFSET: u32 = 0;
    const MIN: bool = true;
}

impl Block32 for BlockQ5_1 {
    const SIZE: usize = Self::SIZE;
    const QS: usize = Self::QS;
    const CODES: Codes = Codes::Nibbles5 { qh: Self::QH };
    const OFFSET: u32 = 0;
    const MIN: bool = true;
}

impl Block32 for BlockIQ4_NL {
    const SIZE: usize = Self::SIZE;
    const QS: usize = Self::QS;
    const CODES: Codes = Codes::Levels(&IQ4NL_LEVELS);
    const OFFSET: u32 = 0;
    const MIN: bool = false;
}

impl Block32 for BlockMXFP4 {
    const SIZE: usize = Self::SIZE;
    const QS: usize = Self::QS;
    const CODES: Codes = Codes::Levels(&MXFP4_LEVELS);
    const OFFSET: u32 = 0;
    const MIN: bool = false;
    const SCALE: Scale = Scale::E8M0;
}

/// The f32 bits of [`crate::quant::nonlinear::e8m0_half`] of each i32 lane of `e` (0..=255).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn e8m0_bits(e: __m128i) -> __m128i {
    let normal = _mm_slli_epi32::<23>(_mm_sub_epi32(e, _mm_set1_epi32(1)));
    let subnormal = _mm_sllv_epi32(_mm_set1_epi32(0x0020_0000), e);
    let is_normal = _mm_cmpgt_epi32(e, _mm_set1_epi32(1));
    _mm_blendv_epi8(subnormal, normal, is_normal)
}

/// A weight block's scale (and minimum) as f32 lanes 0 (and 1), the others zero or junk as
/// [`halves`] leaves them.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn weight_halves<B: Block32>(p: *const u8) -> __m128 {
    match B::SCALE {
        Scale::F16 => halves(p),
        Scale::E8M0 => _mm_castsi128_ps(e8m0_bits(_mm_cvtsi32_si128(i32::from(*p)))),
    }
}

/// The scales (and minimums) of four weight blocks from their first 4 bytes (`words`, one
/// block per i32 lane; for the f16 formats without a minimum the upper halves may be masked
/// off): `[d0, m0, d1, m1, d2, m2, d3, m3]` as `_mm256_cvtph_ps(words)` gives them, `m` zero
/// for MXFP4.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn weight_scales<B: Block32>(words: __m128i) -> __m256 {
    match B::SCALE {
        Scale::F16 => _mm256_cvtph_ps(words),
        Scale::E8M0 => {
            let e = _mm_and_si128(words, _mm_set1_epi32(0xff));
            _mm256_castsi256_ps(_mm256_cvtepu32_epi64(e8m0_bits(e)))
        }
    }
}

/// The offset of `B`'s codes as the VNNI kernels use them (unsigned; Q8_0 flipped by 128), as a
/// shift (`offset = 1 << shift`), or `None` where there is none.
pub(super) const fn vnni_shift<B: Block32>() -> Option<u32> {
    match B::CODES {
        Codes::Bytes | Codes::Levels(_) => Some(7),
        Codes::Nibbles | Codes::Nibbles5 { .. } if B::OFFSET != 0 => {
            Some(B::OFFSET.trailing_zeros())
        }
        Codes::Nibbles | Codes::Nibbles5 { .. } => None,
    }
}

// `halves(block)` reads a block's scale and its second half (a minimum `m`, Q8_1's `s`)
// together.
const _: () = assert!(
    BlockQ8_0::D == 0
        && BlockQ4_0::D == 0
        && BlockQ5_0::D == 0
        && BlockQ4_1::D == 0
        && BlockQ4_1::M == 2
        && BlockQ5_1::D == 0
        && BlockQ5_1::M == 2
        && BlockQ8_1::D == 0
        && BlockQ8_1::S == 2
        && BlockIQ4_NL::D == 0
        && BlockMXFP4::E == 0
);

/// The results of a tile: the horizontal sum of each (row, token) accumulator, plus lane `t`
/// of row `r`'s `Σ m·s` when `with_mins` (Q4_1). `acc[r][k]` holds tokens `2k` (low 4 lanes)
/// and `2k + 1` (high 4 lanes, unused for the last of an odd number).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn finish<const R: usize, const T: usize>(
    acc: &[[__m256; T]; R],
    mins: &[[f32; 8]; R],
    with_mins: bool,
) -> [[f32; T]; R] {
    let mut out = [[0f32; T]; R];
    for r in 0..R {
        for t in 0..T {
            let v = acc[r][t / 2];
            out[r][t] = hsum4(if t % 2 == 0 {
                _mm256_castps256_ps128(v)
            } else {
                _mm256_extractf128_ps::<1>(v)
            });
            if with_mins {
                out[r][t] += mins[r][t];
            }
        }
    }
    out
}

/// The IEEE halves at `p` and `p + 2` as f32 lanes 0 and 1 (a 4-byte load into a zeroed
/// register: no false dependency on an older register value).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn halves(p: *const u8) -> __m128 {
    let bits = p.cast::<u32>().read_unaligned();
    _mm_cvtph_ps(_mm_cvtsi32_si128(u32::from_le(bits) as i32))
}

/// Lane `2k` of `v` in lanes 0..4 and lane `2k + 1` in lanes 4..8.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn splat_pair(v: __m128, k: usize) -> __m256 {
    let (x, y) = (2 * k as i32, 2 * k as i32 + 1);
    _mm256_permutevar8x32_ps(
        _mm256_castps128_ps256(v),
        _mm256_setr_epi32(x, x, x, x, y, y, y, y),
    )
}

/// Σ of 4 adjacent products of unsigned `u` and signed `s` bytes per i32 lane, plus `acc`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_avx2(acc: __m256i, u: __m256i, s: __m256i) -> __m256i {
    let p = _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
    _mm256_add_epi32(acc, p)
}

/// As [`dot_avx2`] with one `vpdpbusd`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
unsafe fn dot_vnni(acc: __m256i, u: __m256i, s: __m256i) -> __m256i {
    _mm256_dpbusd_epi32(acc, u, s)
}

/// `acc` plus lane `i`'s Σ of the 4 adjacent products of bytes `4i..4i+4` in both `u0 · s0`
/// and `u1 · s1` (unsigned `u`, signed `s`). The two `maddubs` results are added as i16,
/// which is exact while every byte of `u` is at most 31 (and for `u` = 1).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot2_avx2(
    acc: __m256i,
    u0: __m256i,
    s0: __m256i,
    u1: __m256i,
    s1: __m256i,
) -> __m256i {
    let pairs = _mm256_add_epi16(_mm256_maddubs_epi16(u0, s0), _mm256_maddubs_epi16(u1, s1));
    _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)))
}

/// As [`dot2_avx2`] with two `vpdpbusd` (any unsigned bytes).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
unsafe fn dot2_vnni(acc: __m256i, u0: __m256i, s0: __m256i, u1: __m256i, s1: __m256i) -> __m256i {
    _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(acc, u0, s0), u1, s1)
}

/// The 32 codes of the `B` block at `p` as unsigned bytes (signed bytes stay signed without
/// `VNNI`), in element order.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn codes<B: Block32, const VNNI: bool>(p: *const u8) -> __m256i {
    match B::CODES {
        Codes::Bytes if VNNI => _mm256_xor_si256(load(p.add(B::QS)), _mm256_set1_epi8(-128)),
        Codes::Bytes => load(p.add(B::QS)),
        Codes::Nibbles => nibbles(p.add(B::QS)),
        Codes::Nibbles5 { qh } => _mm256_or_si256(nibbles(p.add(B::QS)), fifth_bits(p.add(qh))),
        Codes::Levels(levels) => {
            _mm256_shuffle_epi8(level_table(levels, VNNI), nibbles(p.add(B::QS)))
        }
    }
}

/// What the decoding kernels need of one activation block besides its quants, worked out once
/// per call for every group of rows: its 4 offset-correction lanes (`−offset · Σ` of bytes
/// `4j..4j+4` and `16+4j..16+4j+4`; the AVX-512 kernel writes zero where there is no offset,
/// the AVX2 one leaves them unwritten and unread for Q8_0 and Q4_1) and `[d, s, d, s]` (`s`,
/// Q8_1's sum, zero for the others), as f32.
#[repr(C, align(32))]
#[derive(Clone, Copy, Default)]
pub(super) struct Prepared {
    pub(super) corr: [i32; 4],
    pub(super) ds: [f32; 4],
}

thread_local! {
    static PREPARED: std::cell::RefCell<Vec<Prepared>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Run `f` with the `nb` blocks of each of the activation rows `acts` prepared by `prepare`
/// (which writes a row's first `nb` blocks), in a buffer kept per thread.
pub(super) fn with_prepared<const T: usize, R>(
    nb: usize,
    acts: [&[u8]; T],
    prepare: impl Fn(&[u8], &mut [Prepared]),
    f: impl FnOnce([*const Prepared; T]) -> R,
) -> R {
    let mut buf = PREPARED.with_borrow_mut(std::mem::take);
    // Every block used is written by `prepare`: the buffer only grows, never cleared.
    if buf.len() < nb * T {
        buf.resize(nb * T, Prepared::default());
    }
    for (a, out) in acts.iter().zip(buf.chunks_exact_mut(nb.max(1))) {
        prepare(a, out);
    }
    let result = f(std::array::from_fn(|t| buf[nb * t..].as_ptr()));
    PREPARED.set(buf);
    result
}

/// [`Prepared::ds`] of the activation block at `p` for weights `B`: `[d, s, d, s]` as f32, `s`
/// being Q8_1's sum (formats with a minimum) and zero for the others (Q8_0 has quants there).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn prepared_scales<B: Block32>(p: *const u8) -> __m128 {
    let keep = if B::MIN { -1 } else { 0xffff };
    _mm_cvtph_ps(_mm_set1_epi32(word(p) & keep))
}

/// The 16 bytes at `p` in both 128-bit lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn load_both(p: *const u8) -> __m256i {
    _mm256_broadcastsi128_si256(_mm_loadu_si128(p.cast()))
}

/// Generates one tile kernel for an instruction set: `$dot` computes the lane sums of one
/// register, `$dot2` of two (see [`dot2_avx2`]); `$vnni` says whether Q8_0 codes are flipped
/// to unsigned (otherwise the sign trick is used).
///
/// Tokens go in pairs: a pair's activations are rearranged once per block into [token 2k's
/// first 16 | token 2k + 1's first 16] and the same for the last 16, and a weight block's
/// first and last 16 codes are each loaded into both 128-bit lanes. The two products then
/// leave lane `j` of each token's half holding the sum over bytes `4j..4j+4` and
/// `16+4j..16+4j+4`, the same exact integer the one-row kernel folds to. The last of an odd
/// number of tokens is multiplied alone and folded.
macro_rules! tile_kernel {
    ($name:ident, $features:literal, $dot:ident, $dot2:ident, $vnni:expr) => {
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $name<B: Block32, const R: usize, const T: usize>(
            nb: usize,
            w: [*const u8; R],
            a: [*const u8; T],
        ) -> [[f32; T]; R] {
            let (wsize, asize, aq) = (B::SIZE, B::ACT_SIZE, B::ACT_QS);
            let offset = if $vnni {
                vnni_shift::<B>().map_or(0, |s| 1u32 << s)
            } else {
                B::OFFSET
            };
            let shift = _mm_cvtsi32_si128(offset.trailing_zeros() as i32);
            let zero = _mm256_setzero_si256();
            let ones = _mm256_set1_epi8(1);
            let signed = B::SIGNED && !$vnni;
            let mut acc = [[_mm256_setzero_ps(); T]; R];
            let mut summs = [_mm_setzero_ps(); R];
            for b in 0..nb {
                let mut av = [zero; T];
                // Pair k's [first halves] and [last halves], and its offset correction.
                let mut pair = [[zero; 2]; T];
                let mut corr = [zero; T];
                // [d_t, s_t, ..] of each activation block (s: Q8_1 only).
                let mut h = [_mm_setzero_ps(); 4];
                for t in 0..T {
                    let p = a[t].add(asize * b);
                    av[t] = load(p.add(aq));
                    h[t] = halves(p);
                }
                for k in 0..T / 2 {
                    let (x, y) = (av[2 * k], av[2 * k + 1]);
                    pair[k] = [
                        _mm256_permute2x128_si256::<0x20>(x, y),
                        _mm256_permute2x128_si256::<0x31>(x, y),
                    ];
                    if offset != 0 {
                        let lanes = $dot2(zero, ones, pair[k][0], ones, pair[k][1]);
                        corr[k] = _mm256_sub_epi32(zero, _mm256_sll_epi32(lanes, shift));
                    }
                }
                if T % 2 == 1 && offset != 0 {
                    let lanes = $dot(zero, ones, av[T - 1]);
                    corr[T / 2] = _mm256_sub_epi32(zero, _mm256_sll_epi32(lanes, shift));
                }
                let lo = _mm_unpacklo_ps(h[0], h[1]);
                let hi = _mm_unpacklo_ps(h[2], h[3]);
                let ad = _mm_movelh_ps(lo, hi);
                let asum = _mm_movehl_ps(hi, lo);
                for r in 0..R {
                    let p = w[r].add(wsize * b);
                    // The first and the last 16 codes, each in both 128-bit lanes.
                    let both = match B::CODES {
                        _ if T == 1 => [zero; 2],
                        Codes::Bytes => {
                            let q = [load_both(p.add(B::QS)), load_both(p.add(B::QS + 16))];
                            if $vnni {
                                q.map(|q| _mm256_xor_si256(q, _mm256_set1_epi8(-128)))
                            } else {
                                q
                            }
                        }
                        Codes::Nibbles => {
                            let x = load_both(p.add(B::QS));
                            let low = _mm256_set1_epi8(0x0f);
                            [
                                _mm256_and_si256(x, low),
                                _mm256_and_si256(_mm256_srli_epi16::<4>(x), low),
                            ]
                        }
                        Codes::Levels(levels) => {
                            let x = load_both(p.add(B::QS));
                            let low = _mm256_set1_epi8(0x0f);
                            let table = level_table(levels, $vnni);
                            [
                                _mm256_shuffle_epi8(table, _mm256_and_si256(x, low)),
                                _mm256_shuffle_epi8(
                                    table,
                                    _mm256_and_si256(_mm256_srli_epi16::<4>(x), low),
                                ),
                            ]
                        }
                        Codes::Nibbles5 { qh } => {
                            let x = load_both(p.add(B::QS));
                            let low = _mm256_set1_epi8(0x0f);
                            let fifth = fifth_bits(p.add(qh));
                            [
                                _mm256_or_si256(
                                    _mm256_and_si256(x, low),
                                    _mm256_permute2x128_si256::<0x00>(fifth, fifth),
                                ),
                                _mm256_or_si256(
                                    _mm256_and_si256(_mm256_srli_epi16::<4>(x), low),
                                    _mm256_permute2x128_si256::<0x11>(fifth, fifth),
                                ),
                            ]
                        }
                    };
                    let dm = weight_halves::<B>(p);
                    let d = _mm_mul_ps(_mm_permute_ps::<0>(dm), ad);
                    if B::MIN {
                        let m = _mm_mul_ps(_mm_permute_ps::<0b01_01_01_01>(dm), asum);
                        summs[r] = _mm_add_ps(summs[r], m);
                    }
                    for k in 0..T / 2 {
                        let [s0, s1] = pair[k];
                        // [token 2k's 4 lanes, token 2k + 1's].
                        let sum = if signed {
                            let [u0, u1] = both.map(|q| _mm256_sign_epi8(q, q));
                            let first = $dot(zero, u0, _mm256_sign_epi8(s0, both[0]));
                            $dot(first, u1, _mm256_sign_epi8(s1, both[1]))
                        } else {
                            $dot2(corr[k], both[0], s0, both[1], s1)
                        };
                        acc[r][k] =
                            _mm256_fmadd_ps(splat_pair(d, k), _mm256_cvtepi32_ps(sum), acc[r][k]);
                    }
                    if T % 2 == 1 {
                        // The last of an odd number of tokens alone, in the low 4 lanes.
                        let (t, k) = (T - 1, T / 2);
                        let q = if T == 1 {
                            codes::<B, $vnni>(p)
                        } else {
                            _mm256_blend_epi32::<0xf0>(both[0], both[1])
                        };
                        let lanes = if signed {
                            let ux = _mm256_sign_epi8(q, q);
                            $dot(zero, ux, _mm256_sign_epi8(av[t], q))
                        } else {
                            $dot(corr[k], q, av[t])
                        };
                        let sum = _mm_fmadd_ps(
                            _mm_permutevar_ps(d, _mm_set1_epi32(t as i32)),
                            _mm_cvtepi32_ps(fold(lanes)),
                            _mm256_castps256_ps128(acc[r][k]),
                        );
                        acc[r][k] = _mm256_zextps128_ps256(sum);
                    }
                }
            }
            let mut mins = [[0f32; 8]; R];
            for (m, s) in mins.iter_mut().zip(&summs) {
                _mm_storeu_ps(m.as_mut_ptr(), *s);
            }
            finish(&acc, &mins, B::MIN)
        }
    };
}

tile_kernel!(tile_avx2, "avx2,fma,f16c", dot_avx2, dot2_avx2, false);
tile_kernel!(
    tile_vnni,
    "avx2,fma,f16c,avx512f,avx512vl,avx512vnni",
    dot_vnni,
    dot2_vnni,
    true
);

/// Runs the `R × T` tile for weights `B` with VNNI (`vnni`) or AVX2.
///
/// # Safety
/// AVX2, FMA and F16C (and AVX-512 F/VL/VNNI when `vnni`) must be present; every row pointer
/// must have `nb` whole blocks of its format behind it.
#[inline]
pub(super) unsafe fn tile<B: Block32, const R: usize, const T: usize>(
    vnni: bool,
    nb: usize,
    w: [*const u8; R],
    a: [*const u8; T],
) -> [[f32; T]; R] {
    if vnni {
        tile_vnni::<B, R, T>(nb, w, a)
    } else {
        tile_avx2::<B, R, T>(nb, w, a)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::quant::kernels::DotFn;
    use crate::quant::{quantize_row, vec_dot_type, x86, GgmlType};

    #[test]
    fn e8m0_bits_equal_the_portable_e8m0_half_for_every_exponent() {
        if !(std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c"))
        {
            return;
        }
        for e in 0..=255u8 {
            // SAFETY: AVX2, FMA and F16C were detected.
            let (lanes, one) = unsafe {
                let words = _mm_setr_epi32(i32::from(e), 0x1234_5600 | i32::from(e), 0, 0);
                let wide = weight_scales::<BlockMXFP4>(words);
                let one = weight_halves::<BlockMXFP4>([e].as_ptr());
                let mut lanes = [0f32; 8];
                _mm256_storeu_ps(lanes.as_mut_ptr(), wide);
                (lanes, _mm_cvtss_f32(one))
            };
            let want = crate::quant::nonlinear::e8m0_half(e).to_bits();
            assert_eq!(lanes[0].to_bits(), want, "e = {e}");
            assert_eq!(lanes[2].to_bits(), want, "e = {e} (upper bytes ignored)");
            assert_eq!((lanes[1], lanes[3]), (0.0, 0.0), "e = {e}: no minimum");
            assert_eq!(one.to_bits(), want, "e = {e}");
        }
    }

    /// Random bytes from a xorshift generator; f16 scales are set to small normal values.
    fn random_blocks(ty: GgmlType, n: usize, seed: &mut u64) -> Vec<u8> {
        let mut bytes = vec![0u8; ty.row_bytes(n as u64).unwrap() as usize];
        for b in bytes.iter_mut() {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            *b = *seed as u8;
        }
        for block in bytes.chunks_exact_mut(ty.type_size()) {
            let scales = if matches!(ty, GgmlType::Q4_1 | GgmlType::Q5_1) {
                2
            } else {
                1
            };
            for s in 0..scales {
                let h = half::f16::from_f32(0.001 + f32::from(block[2 * s + 1] & 0x7f) / 4096.0);
                block[2 * s..2 * s + 2].copy_from_slice(&h.to_bits().to_le_bytes());
            }
            if ty == GgmlType::Q8_0 {
                // ggml never writes -128 (and the AVX2 sign trick assumes it).
                for q in &mut block[2..] {
                    if *q == 0x80 {
                        *q = 0x81;
                    }
                }
            }
        }
        bytes
    }

    fn activations(ty: GgmlType, n: usize, seed: &mut u64) -> Vec<u8> {
        let x: Vec<f32> = (0..n)
            .map(|_| {
                *seed ^= *seed << 13;
                *seed ^= *seed >> 7;
                *seed ^= *seed << 17;
                (*seed % 2001) as f32 / 1000.0 - 1.0
            })
            .collect();
        let mut out = vec![0u8; ty.row_bytes(n as u64).unwrap() as usize];
        quantize_row(ty, &x, &mut out).unwrap();
        out
    }

    /// Whether this CPU runs the AVX-512 wide kernels (VNNI and BW with AVX2/FMA/F16C).
    pub(in crate::quant) fn wide_features() -> bool {
        is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c")
            && is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512vl")
            && is_x86_feature_detected!("avx512vnni")
            && is_x86_feature_detected!("avx512bw")
    }

    /// A kernel under test: `R` weight rows × `T` activation rows of `nb` blocks of `B`.
    pub(in crate::quant) trait Kernel<const R: usize, const T: usize> {
        /// # Safety
        /// The kernel's features are present; every row holds `nb` blocks.
        unsafe fn run<B: Block32>(
            &self,
            nb: usize,
            w: [*const u8; R],
            a: [*const u8; T],
        ) -> [[f32; T]; R];
    }

    /// `kernel` against the one-row AVX2 kernel, bit for bit, for every 32-element format and
    /// several row lengths.
    pub(in crate::quant) fn check_kernel<const R: usize, const T: usize>(
        label: &str,
        mut seed: u64,
        kernel: &impl Kernel<R, T>,
    ) {
        fn one<B: Block32, const R: usize, const T: usize>(
            (ty, avx2_dot): (GgmlType, DotFn),
            label: &str,
            seed: &mut u64,
            kernel: &impl Kernel<R, T>,
        ) {
            for nb in [1usize, 3, 20] {
                let n = 32 * nb;
                let w: Vec<Vec<u8>> = (0..R).map(|_| random_blocks(ty, n, seed)).collect();
                let a: Vec<Vec<u8>> = (0..T)
                    .map(|_| activations(vec_dot_type(ty), n, seed))
                    .collect();
                // SAFETY: the caller checked the kernel's features; the rows hold nb blocks.
                let got = unsafe {
                    kernel.run::<B>(
                        nb,
                        std::array::from_fn(|i| w[i].as_ptr()),
                        std::array::from_fn(|i| a[i].as_ptr()),
                    )
                };
                for r in 0..R {
                    for t in 0..T {
                        // SAFETY: the test runs only where the features were detected.
                        let want = unsafe { avx2_dot(nb, &w[r], &a[t]) };
                        assert_eq!(
                            got[r][t].to_bits(),
                            want.to_bits(),
                            "{label} {ty} {R}x{T} nb={nb}"
                        );
                    }
                }
            }
        }
        let q8_0 = (GgmlType::Q8_0, x86::dot_q8_0 as DotFn);
        one::<BlockQ8_0, R, T>(q8_0, label, &mut seed, kernel);
        let q4_0 = (GgmlType::Q4_0, x86::dot_q4_0 as DotFn);
        one::<BlockQ4_0, R, T>(q4_0, label, &mut seed, kernel);
        let q5_0 = (GgmlType::Q5_0, x86::dot_q5_0 as DotFn);
        one::<BlockQ5_0, R, T>(q5_0, label, &mut seed, kernel);
        let q4_1 = (GgmlType::Q4_1, x86::dot_q4_1 as DotFn);
        one::<BlockQ4_1, R, T>(q4_1, label, &mut seed, kernel);
        let q5_1 = (GgmlType::Q5_1, x86::dot_q5_1 as DotFn);
        one::<BlockQ5_1, R, T>(q5_1, label, &mut seed, kernel);
    }

    struct Tile(bool);

    impl<const R: usize, const T: usize> Kernel<R, T> for Tile {
        unsafe fn run<B: Block32>(
            &self,
            nb: usize,
            w: [*const u8; R],
            a: [*const u8; T],
        ) -> [[f32; T]; R] {
            tile::<B, R, T>(self.0, nb, w, a)
        }
    }

    fn check<const R: usize, const T: usize>(vnni: bool) {
        let label = if vnni { "vnni" } else { "avx2" };
        check_kernel::<R, T>(label, 0x9e37_79b9_7f4a_7c15, &Tile(vnni));
    }

    #[test]
    fn tiles_are_bit_identical_to_the_single_row_kernels() {
        if !(is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c"))
        {
            return;
        }
        let mut isas = vec![false];
        if is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512vl")
            && is_x86_feature_detected!("avx512vnni")
        {
            isas.push(true);
        }
        for vnni in isas {
            check::<1, 1>(vnni);
            check::<2, 1>(vnni);
            check::<4, 1>(vnni);
            check::<1, 2>(vnni);
            check::<4, 3>(vnni);
            check::<1, 4>(vnni);
            check::<2, 4>(vnni);
            check::<4, 4>(vnni);
        }
    }
}
