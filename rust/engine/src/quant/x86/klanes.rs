//! The AVX-512 VNNI Q4_K prompt tile with tokens in its lanes (and the Q5_K, Q6_K and IQ4_XS
//! ones built the same way): 4 weight rows × 8 tokens per call, over activations packed once
//! per matmul ([`pack_q4k_lanes`]) and weight rows prepared once per task ([`prepare_q4k`]).
//!
//! A 512-bit vector holds one pair of rows × the 8 tokens: lane `2t + h` is token `t` and row
//! `h` of the pair. Each super-block's weight quants (unsigned, 0..=15) are first unpacked to
//! bytes, each group of 4 quants of the two rows side by side (8 bytes), once per matmul task
//! for all its groups of 8 tokens (`prepare_*`: the rows of a task, a few hundred KiB, stay in
//! the cache while every group of tokens reads them); then for each group one
//! `vpbroadcastq` load (no shuffle) spreads the pair's 8 bytes over the lanes and one
//! `vpdpbusd` adds their products with the tokens' 4 activation quants (packed once per matmul,
//! each token's 4 bytes twice): 64 products per instruction, against 32 per `pmaddubsw` +
//! `vpdpwssd` pair when the quants lie along the lanes. Each 32-quant sub-block's sum is
//! multiplied by its row's 6-bit scale (`vpmulld`), and the min correction
//! `Σ_j m_j·(Σ y over sub-block j)` is four `vpdpwssd` on the packed sub-block sums.
//!
//! Bit identity: per (row, token) and super-block both integer sums are exact (integer
//! additions may be regrouped freely), and the floating-point operations are the portable
//! kernel's (`kquants::dot_q4_k`), in its order, lane by lane:
//! `acc += (d_y · d) · float(isum) − (d_y · dmin) · float(min_sum)`. The x86 one-row and decoding
//! kernels of Q4_K compute the same (`kquants`, `kdecode`).
//!
//! Safety: requires AVX2, FMA, F16C and AVX-512 F/VL/BW/VNNI, and `nb` whole super-blocks in
//! every row.

use std::arch::x86_64::*;

use super::iq4xs::scales_wide;
use super::ktile::{dpbusd, dpwssd, half, halves, q4k_scales_mins_words, q8k_at, Q6kBits};
use super::level_table;
use crate::quant::blocks::{BlockIQ4_XS, BlockQ4_K, BlockQ5_K, BlockQ6_K, BlockQ8_K};
use crate::quant::kernels::{PackLine, TileOut, MAX_TILE_TOKENS};
use crate::quant::kquants::{q8k_bsum, q8k_d, Q45K_D, Q45K_SCALES};
use crate::quant::nonlinear::IQ4NL_LEVELS;

/// Packed lines per super-block of 8 tokens: line `G` (`G < 64`) holds quants `4G..4G + 4` of
/// the 8 tokens (token `t` at bytes `8t..8t + 4` and again at `8t + 4..8t + 8`); line 64 the
/// tokens' scales (f32 lanes `2t` and `2t + 1`: token `t`); lines `65 + k` (`k < 4`) the i16
/// pairs `(P_{2k}, P_{2k+1})` of each token (i32 lanes `2t` and `2t + 1`), `P_j` being the sum of
/// the quants of sub-block `j`.
pub(super) const Q4K_LANES_LINES: usize = 69;

/// Packs 8 Q8_K activation rows of `nb` super-blocks for [`q4k_lanes`] (`Q4K_LANES_LINES × nb`
/// lines).
///
/// # Safety
/// Every activation row holds `nb` whole Q8_K blocks; `out` holds `Q4K_LANES_LINES × nb` lines.
pub(super) unsafe fn pack_q4k_lanes(
    nb: usize,
    acts: [&[u8]; MAX_TILE_TOKENS],
    out: &mut [PackLine],
) {
    let sub_block = |y: &[u8], j: usize| q8k_bsum(y, 2 * j) + q8k_bsum(y, 2 * j + 1);
    pack(nb, acts, out, Q4K_LANES_LINES, sub_block);
}

/// `nb` super-blocks of 8 tokens (Q8_K rows `acts`) in `lines` lines each: lines `0..65` as
/// both tiles take them, then in lines `65 + k` the i16 pairs `(sum(y, 2k), sum(y, 2k + 1))` of
/// each token `y` (i32 lanes `2t` and `2t + 1`).
fn pack(
    nb: usize,
    acts: [&[u8]; MAX_TILE_TOKENS],
    out: &mut [PackLine],
    lines: usize,
    sum: impl Fn(&[u8], usize) -> i32,
) {
    for (b, lines) in out.chunks_exact_mut(lines).take(nb).enumerate() {
        let yb: [&[u8]; MAX_TILE_TOKENS] = acts.map(|a| &a[q8k_at(b)..q8k_at(b + 1)]);
        for (g, line) in lines[..64].iter_mut().enumerate() {
            for (pair, y) in line.0.chunks_exact_mut(8).zip(yb) {
                let quants = &y[BlockQ8_K::QS + 4 * g..][..4];
                pair[..4].copy_from_slice(quants);
                pair[4..].copy_from_slice(quants);
            }
        }
        for (l, c) in lines[64].0.chunks_exact_mut(4).enumerate() {
            c.copy_from_slice(&q8k_d(yb[l / 2]).to_le_bytes());
        }
        for (k, line) in lines[65..].iter_mut().enumerate() {
            for (l, c) in line.0.chunks_exact_mut(4).enumerate() {
                let y = yb[l / 2];
                c[..2].copy_from_slice(&(sum(y, 2 * k) as i16).to_le_bytes());
                c[2..].copy_from_slice(&(sum(y, 2 * k + 1) as i16).to_le_bytes());
            }
        }
    }
}

/// Packed lines per super-block of 8 tokens for the Q6_K tile: lines `0..65` as for Q4_K, then
/// lines `65 + k` (`k < 8`) the i16 pairs `(bsum_{2k}, bsum_{2k+1})` of each token (i32 lanes
/// `2t` and `2t + 1`), the sums of its 16-quant groups.
pub(super) const Q6K_LANES_LINES: usize = 73;

/// Packs 8 Q8_K activation rows of `nb` super-blocks for [`q6k_lanes`] (`Q6K_LANES_LINES × nb`
/// lines).
///
/// # Safety
/// Every activation row holds `nb` whole Q8_K blocks; `out` holds `Q6K_LANES_LINES × nb` lines.
pub(super) unsafe fn pack_q6k_lanes(
    nb: usize,
    acts: [&[u8]; MAX_TILE_TOKENS],
    out: &mut [PackLine],
) {
    pack(nb, acts, out, Q6K_LANES_LINES, q8k_bsum);
}

/// The 8 bytes at `p` in every 64-bit lane, as one `vpbroadcastq` load (written as assembly:
/// the compiler would otherwise rebuild the value from the registers just stored there, with
/// shuffles).
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn broadcast8(p: *const u8) -> __m512i {
    let out: __m512i;
    std::arch::asm!(
        "vpbroadcastq {out}, qword ptr [{p}]",
        out = out(zmm_reg) out,
        p = in(reg) p,
        options(pure, readonly, nostack, preserves_flags),
    );
    out
}

/// Two rows' values as one vector: `a` in the even f32 lanes, `b` in the odd ones.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn pair_ps([a, b]: [f32; 2]) -> __m512 {
    let bits = u64::from(a.to_bits()) | (u64::from(b.to_bits()) << 32);
    _mm512_castsi512_ps(_mm512_set1_epi64(bits as i64))
}

/// One pair of rows' super-block, unpacked: `codes[8G..8G + 8]` the 4 quants of group `G` of the
/// first row, then of the second; `scales[8s..8s + 8]` sub-block `s`'s scales as two i32;
/// `mins[8k..8k + 8]` the i16 pairs `(m_2k, m_2k+1)` of both rows.
#[repr(C, align(64))]
struct Unpacked {
    codes: [u8; 512],
    scales: [u8; 64],
    mins: [u8; 32],
}

/// Unpacks super-block `x0`, `x1` (two Q4_K blocks, or Q5_K ones when `FIVE`: quants
/// 0..=31 with their fifth bits from `qh`) into `u`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw")]
unsafe fn unpack<const FIVE: bool>(x0: *const u8, x1: *const u8, u: &mut Unpacked) {
    let m4 = _mm512_set1_epi8(0x0f);
    let one = _mm512_set1_epi8(1);
    // i32 elements 0..8 (first row) and 8..16 (second row) interleaved: 0, 8, 1, 9, ...
    let zip = _mm512_set_epi32(15, 7, 14, 6, 13, 5, 12, 4, 11, 3, 10, 2, 9, 1, 8, 0);
    let both = |at: usize| {
        let lo = _mm256_loadu_si256(x0.add(at).cast());
        let hi = _mm256_loadu_si256(x1.add(at).cast());
        _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1)
    };
    let qs = if FIVE { BlockQ5_K::QS } else { BlockQ4_K::QS };
    let qh = if FIVE {
        both(BlockQ5_K::QH)
    } else {
        _mm512_setzero_si512()
    };
    // Bit k of each `qh` byte, as 16 (the fifth bit of the quants of sub-block k).
    let fifth = |k: u32| {
        let bit = _mm512_and_si512(_mm512_srlv_epi16(qh, _mm512_set1_epi16(k as i16)), one);
        _mm512_slli_epi16::<4>(bit)
    };
    for j in 0..4 {
        let bits = both(qs + 32 * j);
        // Sub-blocks 2j (low nibbles) and 2j + 1 (high nibbles).
        let mut low = _mm512_and_si512(bits, m4);
        let mut high = _mm512_and_si512(_mm512_srli_epi16(bits, 4), m4);
        if FIVE {
            low = _mm512_or_si512(low, fifth(2 * j as u32));
            high = _mm512_or_si512(high, fifth(2 * j as u32 + 1));
        }
        let at = u.codes.as_mut_ptr().add(128 * j);
        _mm512_store_si512(at.cast(), _mm512_permutexvar_epi32(zip, low));
        _mm512_store_si512(at.add(64).cast(), _mm512_permutexvar_epi32(zip, high));
    }
    let (sc0, mn0) = q4k_scales_mins_words(x0.add(Q45K_SCALES));
    let (sc1, mn1) = q4k_scales_mins_words(x1.add(Q45K_SCALES));
    let sc = _mm512_cvtepu8_epi32(_mm_set_epi64x(sc1 as i64, sc0 as i64));
    _mm512_store_si512(
        u.scales.as_mut_ptr().cast(),
        _mm512_permutexvar_epi32(zip, sc),
    );
    // Mins as i16: elements 0..8 of the first row, 8..16 of the second; as i32 pairs,
    // elements 0..4 and 4..8, interleaved.
    let mins = _mm256_cvtepu8_epi16(_mm_set_epi64x(mn1 as i64, mn0 as i64));
    let zip4 = _mm256_set_epi32(7, 3, 6, 2, 5, 1, 4, 0);
    let mins = _mm256_permutevar8x32_epi32(mins, zip4);
    _mm256_store_si256(u.mins.as_mut_ptr().cast(), mins);
}

/// Four Q4_K or Q5_K rows' super-block prepared for [`q45k_prepared`]: both pairs unpacked,
/// and each pair's `(d, dmin)` as f32 pairs.
#[repr(C, align(64))]
struct Prepared45 {
    u: [Unpacked; 2],
    d: [[f32; 2]; 2],
    m: [[f32; 2]; 2],
}

/// Prepared lines per super-block of 4 Q4_K/Q5_K rows ([`prepare_q4k`], [`prepare_q5k`]).
pub(super) const Q45K_PREPARED_LINES: usize = std::mem::size_of::<Prepared45>() / 64;

/// Prepares 4 Q4_K rows of `nb` super-blocks for [`q45k_prepared`]: each super-block's pairs
/// unpacked once, however many groups of 8 tokens then read them.
///
/// # Safety
/// The module's; `out` holds `Q45K_PREPARED_LINES × nb` lines.
pub(super) unsafe fn prepare_q4k(nb: usize, w: [*const u8; 4], out: *mut PackLine) {
    prepare45::<false>(nb, w, out)
}

/// [`prepare_q4k`] for Q5_K rows (quants 0..=31: the portable `kquants::dot_q5_k` combines its
/// exact sums as `dot_q4_k` does, so the same tile runs on them).
///
/// # Safety
/// As [`prepare_q4k`]'s.
pub(super) unsafe fn prepare_q5k(nb: usize, w: [*const u8; 4], out: *mut PackLine) {
    prepare45::<true>(nb, w, out)
}

/// [`prepare_q4k`], or [`prepare_q5k`] when `FIVE`.
///
/// # Safety
/// As theirs.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw")]
unsafe fn prepare45<const FIVE: bool>(nb: usize, w: [*const u8; 4], out: *mut PackLine) {
    let size = if FIVE {
        BlockQ5_K::SIZE
    } else {
        BlockQ4_K::SIZE
    };
    prepare_pairs(nb, w, size, out, |x0, x1, p, prepared: &mut Prepared45| {
        unpack::<FIVE>(x0, x1, &mut prepared.u[p]);
        let ((d0, m0), (d1, m1)) = (halves(x0.add(Q45K_D)), halves(x1.add(Q45K_D)));
        (prepared.d[p], prepared.m[p]) = ([d0, d1], [m0, m1]);
    })
}

/// Prepares `nb` super-blocks (`size` bytes each) of 4 rows into `out` as `P`s: `pair(x0, x1,
/// p, prepared)` fills pair `p` of a prepared super-block from its two rows' blocks.
///
/// # Safety
/// Every row holds `nb` super-blocks; `out` holds `nb` of `P` (whole 64-byte lines, aligned
/// as lines are; every byte pattern a valid `P`).
#[inline(always)]
pub(super) unsafe fn prepare_pairs<P>(
    nb: usize,
    w: [*const u8; 4],
    size: usize,
    out: *mut PackLine,
    mut pair: impl FnMut(*const u8, *const u8, usize, &mut P),
) {
    for b in 0..nb {
        let prepared = &mut *out.cast::<P>().add(b);
        let xs: [*const u8; 4] = w.map(|x| x.add(size * b));
        for p in 0..2 {
            pair(xs[2 * p], xs[2 * p + 1], p, prepared);
        }
    }
}

/// Q4_K or Q5_K weights (4 rows prepared by [`prepare_q4k`] or [`prepare_q5k`]) × one or two
/// groups of 8 tokens packed by [`pack_q4k_lanes`] (`packed[0]`, and `packed[1]` when `two`;
/// the second result is zeros otherwise).
///
/// # Safety
/// The module's; `w` holds `Q45K_PREPARED_LINES × nb` prepared lines, each packed group used
/// `Q4K_LANES_LINES × nb` lines.
pub(super) unsafe fn q45k_prepared(
    nb: usize,
    w: *const PackLine,
    packed: [*const PackLine; 2],
    two: bool,
) -> [TileOut; 2] {
    one_or_two(
        two,
        packed,
        |p| q45k_groups(nb, w, p),
        |p| q45k_groups(nb, w, p),
    )
}

/// `run` on both groups when `two`, else `run1` on the first (the second result zeros).
#[inline(always)]
pub(super) fn one_or_two(
    two: bool,
    packed: [*const PackLine; 2],
    run2: impl FnOnce([*const PackLine; 2]) -> [TileOut; 2],
    run1: impl FnOnce([*const PackLine; 1]) -> [TileOut; 1],
) -> [TileOut; 2] {
    if two {
        run2(packed)
    } else {
        let [out] = run1([packed[0]]);
        [out, [[0.0; MAX_TILE_TOKENS]; 4]]
    }
}

/// [`q45k_prepared`] on `G` groups of 8 tokens: each broadcast weight load serves every group.
///
/// # Safety
/// As [`q45k_prepared`]'s.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
unsafe fn q45k_groups<const G: usize>(
    nb: usize,
    w: *const PackLine,
    packed: [*const PackLine; G],
) -> [TileOut; G] {
    let mut acc = [[_mm512_setzero_ps(); 2]; G];
    for b in 0..nb {
        let lines = packed.map(|p| p.add(Q4K_LANES_LINES * b));
        let u = &(*w.cast::<Prepared45>().add(b));
        let isum = scaled_sums(
            [u.u[0].codes.as_ptr(), u.u[1].codes.as_ptr()],
            [u.u[0].scales.as_ptr(), u.u[1].scales.as_ptr()],
            lines,
        );
        for (g, lines) in lines.into_iter().enumerate() {
            let line = |i: usize| _mm512_load_si512(lines.add(i).cast());
            let mut summ = [_mm512_setzero_si512(); 2];
            for (sum, pair) in summ.iter_mut().zip(&u.u) {
                for k in 0..4 {
                    let mk = broadcast8(pair.mins.as_ptr().add(8 * k));
                    *sum = dpwssd(*sum, mk, line(65 + k));
                }
            }
            let yd = _mm512_load_ps(lines.add(64).cast());
            for p in 0..2 {
                let (dd, dm) = (pair_ps(u.d[p]), pair_ps(u.m[p]));
                let a = _mm512_mul_ps(_mm512_mul_ps(yd, dd), _mm512_cvtepi32_ps(isum[g][p]));
                let m = _mm512_mul_ps(_mm512_mul_ps(yd, dm), _mm512_cvtepi32_ps(summ[p]));
                acc[g][p] = _mm512_add_ps(acc[g][p], _mm512_sub_ps(a, m));
            }
        }
    }
    acc.map(|acc| lanes_out(acc))
}

/// Both pairs' exact `Σ_s scale_s · Σ code · y` over the 8 sub-blocks of 32 quants, from
/// unpacked codes (512 bytes: [`Unpacked`]'s layout) and i32 scale pairs (64 bytes) against
/// the 64 packed quant lines of each of `G` groups of tokens at `lines`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
unsafe fn scaled_sums<const G: usize>(
    codes: [*const u8; 2],
    scales: [*const u8; 2],
    lines: [*const PackLine; G],
) -> [[__m512i; 2]; G] {
    // `n` chains per pair and group of tokens (groups of quants g mod n), so that the
    // dependent `vpdpbusd` overlap: 8 in all, fewer additions for two groups of tokens.
    let n = 4 / G;
    let mut isum = [[_mm512_setzero_si512(); 2]; G];
    for s in 0..8 {
        let mut sub = [[[_mm512_setzero_si512(); 4]; 2]; G];
        let mut group = |g: usize| {
            let q = codes.map(|c| broadcast8(c.add(8 * (8 * s + g))));
            for (sub, lines) in sub.iter_mut().zip(lines) {
                let y = _mm512_load_si512(lines.add(8 * s + g).cast());
                for (chains, &q) in sub.iter_mut().zip(&q) {
                    chains[g % n] = dpbusd(chains[g % n], q, y);
                }
            }
        };
        // Written out, not a loop: the chains' indices must be constants for the chains to
        // stay in registers (a loop over two groups of tokens is not unrolled).
        group(0);
        group(1);
        group(2);
        group(3);
        group(4);
        group(5);
        group(6);
        group(7);
        for p in 0..2 {
            let sc = broadcast8(scales[p].add(8 * s));
            for (isum, sub) in isum.iter_mut().zip(&sub) {
                let [a, b, c, d] = sub[p];
                let sum = if n == 2 {
                    _mm512_add_epi32(a, b)
                } else {
                    _mm512_add_epi32(_mm512_add_epi32(a, b), _mm512_add_epi32(c, d))
                };
                isum[p] = _mm512_add_epi32(isum[p], _mm512_mullo_epi32(sum, sc));
            }
        }
    }
    isum
}

/// Two pairs' accumulators (lane `2t + h`: token `t`, row `h` of the pair) as the tile's
/// results.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn lanes_out(acc: [__m512; 2]) -> [[f32; MAX_TILE_TOKENS]; 4] {
    let mut out = [[0f32; MAX_TILE_TOKENS]; 4];
    for p in 0..2 {
        let mut lanes = [0f32; 16];
        _mm512_storeu_ps(lanes.as_mut_ptr(), acc[p]);
        for t in 0..MAX_TILE_TOKENS {
            out[2 * p][t] = lanes[2 * t];
            out[2 * p + 1][t] = lanes[2 * t + 1];
        }
    }
    out
}

/// One pair of rows' super-block with a scale per 16 values (Q6_K, and the formats of
/// `super::ilanes`), unpacked: `codes` as [`Unpacked`]'s (unsigned: Q6_K's quants 0..=63);
/// `scales[8s..8s + 8]` the scales of 16-quant group `s` as two i32; `pairs[8k..8k + 8]` the
/// i16 pairs `(s_2k, s_2k+1)` of both rows.
#[repr(C, align(64))]
pub(super) struct Unpacked6 {
    pub(super) codes: [u8; 512],
    pub(super) scales: [u8; 128],
    pub(super) pairs: [u8; 64],
}

/// Unpacks super-block `x0`, `x1` (two Q6_K blocks) into `u`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw")]
unsafe fn unpack6(x0: *const u8, x1: *const u8, bits: &Q6kBits, u: &mut Unpacked6) {
    // Elements i of the first vector and i of the second side by side: 0, 16, 1, 17, ...
    let zip_lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    let zip_hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    for n in 0..2 {
        for p in 0..2 {
            let (q0, q1) = (bits.chunks(x0, n, p), bits.chunks(x1, n, p));
            // Quants 128n + 64p.. are groups 32n + 16p..
            let at = u.codes.as_mut_ptr().add(8 * (32 * n + 16 * p));
            _mm512_store_si512(at.cast(), _mm512_permutex2var_epi32(q0, zip_lo, q1));
            _mm512_store_si512(at.add(64).cast(), _mm512_permutex2var_epi32(q0, zip_hi, q1));
        }
    }
    let sc0 = _mm512_cvtepi8_epi32(_mm_loadu_si128(x0.add(BlockQ6_K::SCALES).cast()));
    let sc1 = _mm512_cvtepi8_epi32(_mm_loadu_si128(x1.add(BlockQ6_K::SCALES).cast()));
    let at = u.scales.as_mut_ptr();
    _mm512_store_si512(at.cast(), _mm512_permutex2var_epi32(sc0, zip_lo, sc1));
    _mm512_store_si512(
        at.add(64).cast(),
        _mm512_permutex2var_epi32(sc0, zip_hi, sc1),
    );
    // The scales as i16: element k of the first row's 8 pairs, then of the second's, zipped.
    let p0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(x0.add(BlockQ6_K::SCALES).cast()));
    let p1 = _mm256_cvtepi8_epi16(_mm_loadu_si128(x1.add(BlockQ6_K::SCALES).cast()));
    let both = _mm512_inserti64x4(_mm512_castsi256_si512(p0), p1, 1);
    let zip = _mm512_set_epi32(15, 7, 14, 6, 13, 5, 12, 4, 11, 3, 10, 2, 9, 1, 8, 0);
    _mm512_store_si512(
        u.pairs.as_mut_ptr().cast(),
        _mm512_permutexvar_epi32(zip, both),
    );
}

/// Four rows' super-block prepared for [`q6k_prepared`] (or `super::ilanes`' tile): both
/// pairs unpacked, and each pair's `d` as an f32 pair.
#[repr(C, align(64))]
pub(super) struct Prepared6 {
    pub(super) u: [Unpacked6; 2],
    pub(super) d: [[f32; 2]; 2],
}

/// Prepared lines per super-block of 4 Q6_K rows ([`prepare_q6k`]).
pub(super) const Q6K_PREPARED_LINES: usize = std::mem::size_of::<Prepared6>() / 64;

/// Prepares 4 Q6_K rows of `nb` super-blocks for [`q6k_prepared`].
///
/// # Safety
/// The module's; `out` holds `Q6K_PREPARED_LINES × nb` lines.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw")]
pub(super) unsafe fn prepare_q6k(nb: usize, w: [*const u8; 4], out: *mut PackLine) {
    let bits = Q6kBits::new();
    let size = BlockQ6_K::SIZE;
    prepare_pairs(nb, w, size, out, |x0, x1, p, prepared: &mut Prepared6| {
        unpack6(x0, x1, &bits, &mut prepared.u[p]);
        prepared.d[p] = [half(x0.add(BlockQ6_K::D)), half(x1.add(BlockQ6_K::D))];
    })
}

/// Q6_K weights (4 rows prepared by [`prepare_q6k`]) × one or two groups of 8 tokens packed
/// by [`pack_q6k_lanes`] (as [`q45k_prepared`]): per (row, token) the exact
/// `isum = Σ_s s_s·Σ q·y − 32·Σ_s s_s·bsum_s` (quants 0..=63; the portable kernel's
/// `Σ_s s_s·Σ (q − 32)·y`), then `acc += (d · d_y) · float(isum)`.
///
/// # Safety
/// The module's; `w` holds `Q6K_PREPARED_LINES × nb` prepared lines, each packed group used
/// `Q6K_LANES_LINES × nb` lines.
pub(super) unsafe fn q6k_prepared(
    nb: usize,
    w: *const PackLine,
    packed: [*const PackLine; 2],
    two: bool,
) -> [TileOut; 2] {
    one_or_two(
        two,
        packed,
        |p| groups16::<2, 5>(nb, w, p, 1.0),
        |p| groups16::<1, 5>(nb, w, p, 1.0),
    )
}

/// [`q6k_prepared`] on `G` groups of 8 tokens, for codes offset by `2^SHIFT` (Q6_K: 32):
/// per (row, token) the exact `total = Σ_s s_s·Σ code·y − 2^SHIFT·Σ_s s_s·bsum_s`, then
/// `acc += (d · d_y) · (float(total) · k)` (`k` = 1 for Q6_K, whose portable kernel computes
/// `(d · d_y) · float(total)`: the same bits).
///
/// # Safety
/// As [`q6k_prepared`]'s.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(super) unsafe fn groups16<const G: usize, const SHIFT: u32>(
    nb: usize,
    w: *const PackLine,
    packed: [*const PackLine; G],
    k: f32,
) -> [TileOut; G] {
    let k = _mm512_set1_ps(k);
    let mut acc = [[_mm512_setzero_ps(); 2]; G];
    for b in 0..nb {
        let lines = packed.map(|p| p.add(Q6K_LANES_LINES * b));
        let prepared = &*w.cast::<Prepared6>().add(b);
        let u = &prepared.u;
        let mut isum = [[_mm512_setzero_si512(); 2]; G];
        // `n` chains per pair and group of tokens (groups of quants q mod n), as in
        // `scaled_sums`.
        let n = 4 / G;
        for s in 0..16 {
            let mut sub = [[[_mm512_setzero_si512(); 4]; 2]; G];
            let mut group = |q: usize| {
                let codes = [0, 1].map(|p| broadcast8(u[p].codes.as_ptr().add(8 * (4 * s + q))));
                for (sub, lines) in sub.iter_mut().zip(lines) {
                    let y = _mm512_load_si512(lines.add(4 * s + q).cast());
                    for (chains, &c) in sub.iter_mut().zip(&codes) {
                        chains[q % n] = dpbusd(chains[q % n], c, y);
                    }
                }
            };
            // Written out, not a loop, as in `scaled_sums`.
            group(0);
            group(1);
            group(2);
            group(3);
            for p in 0..2 {
                let sc = broadcast8(u[p].scales.as_ptr().add(8 * s));
                for (isum, sub) in isum.iter_mut().zip(&sub) {
                    let [a, b, c, d] = sub[p];
                    let sum = if n == 2 {
                        _mm512_add_epi32(a, b)
                    } else {
                        _mm512_add_epi32(_mm512_add_epi32(a, b), _mm512_add_epi32(c, d))
                    };
                    isum[p] = _mm512_add_epi32(isum[p], _mm512_mullo_epi32(sum, sc));
                }
            }
        }
        for (g, lines) in lines.into_iter().enumerate() {
            let line = |i: usize| _mm512_load_si512(lines.add(i).cast());
            let yd = _mm512_load_ps(lines.add(64).cast());
            for p in 0..2 {
                let mut corr = _mm512_setzero_si512();
                for k in 0..8 {
                    let sk = broadcast8(u[p].pairs.as_ptr().add(8 * k));
                    corr = dpwssd(corr, sk, line(65 + k));
                }
                let total = _mm512_sub_epi32(isum[g][p], _mm512_slli_epi32::<SHIFT>(corr));
                let v = _mm512_mul_ps(
                    _mm512_mul_ps(pair_ps(prepared.d[p]), yd),
                    _mm512_mul_ps(_mm512_cvtepi32_ps(total), k),
                );
                acc[g][p] = _mm512_add_ps(acc[g][p], v);
            }
        }
    }
    acc.map(|acc| lanes_out(acc))
}

/// One pair of rows' IQ4_XS super-block, unpacked: `codes` as [`Unpacked`]'s, each level
/// `+ 128` (1..=241, unsigned for `vpdpbusd`); `scales[8s..8s + 8]` sub-block `s`'s `ls − 32`
/// as two i32; `pairs[8k..8k + 8]` the i16 pairs `(ls_2k − 32, ls_2k+1 − 32)` of both rows.
#[repr(C, align(64))]
struct UnpackedIq4 {
    codes: [u8; 512],
    scales: [u8; 64],
    pairs: [u8; 32],
}

/// Unpacks super-block `x0`, `x1` (two IQ4_XS blocks) into `u`; `table` is the flipped level
/// table ([`level_table`] with `flip`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw")]
unsafe fn unpack_iq4(x0: *const u8, x1: *const u8, table: __m256i, u: &mut UnpackedIq4) {
    // i32 elements 0..8 (first row) and 8..16 (second row) interleaved: 0, 8, 1, 9, ...
    let zip = _mm512_set_epi32(15, 7, 14, 6, 13, 5, 12, 4, 11, 3, 10, 2, 9, 1, 8, 0);
    let table = _mm512_broadcast_i32x4(_mm256_castsi256_si128(table));
    let m4 = _mm512_set1_epi8(0x0f);
    // Sub-block 2j's values 0..16 are the low nibbles of its 16 bytes (i32 elements 0..4 of
    // the first row, 8..12 of the second), values 16..32 the high nibbles; 2j + 1 likewise
    // from elements 4..8 and 12..16. Groups of 4 of the two rows side by side.
    let even = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 16, 24, 17, 25, 18, 26, 19, 27);
    let odd = _mm512_setr_epi32(4, 12, 5, 13, 6, 14, 7, 15, 20, 28, 21, 29, 22, 30, 23, 31);
    for j in 0..4 {
        let lo = _mm256_loadu_si256(x0.add(BlockIQ4_XS::QS + 32 * j).cast());
        let hi = _mm256_loadu_si256(x1.add(BlockIQ4_XS::QS + 32 * j).cast());
        let bits = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
        let low = _mm512_shuffle_epi8(table, _mm512_and_si512(bits, m4));
        let high = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(bits, 4), m4));
        let at = u.codes.as_mut_ptr().add(128 * j);
        _mm512_store_si512(at.cast(), _mm512_permutex2var_epi32(low, even, high));
        _mm512_store_si512(at.add(64).cast(), _mm512_permutex2var_epi32(low, odd, high));
    }
    let (s0, s1) = (scales_wide(x0), scales_wide(x1));
    let both = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_cvtepi16_epi32(s0)),
        _mm256_cvtepi16_epi32(s1),
        1,
    );
    _mm512_store_si512(
        u.scales.as_mut_ptr().cast(),
        _mm512_permutexvar_epi32(zip, both),
    );
    // i32 element k of each row's scales is its pair (ls_2k, ls_2k+1).
    let pairs = u.pairs.as_mut_ptr();
    _mm_store_si128(pairs.cast(), _mm_unpacklo_epi32(s0, s1));
    _mm_store_si128(pairs.add(16).cast(), _mm_unpackhi_epi32(s0, s1));
}

/// Four IQ4_XS rows' super-block prepared for [`iq4xs_prepared`]: both pairs unpacked, and
/// each pair's `d` as an f32 pair.
#[repr(C, align(64))]
struct PreparedIq4 {
    u: [UnpackedIq4; 2],
    d: [[f32; 2]; 2],
}

/// Prepared lines per super-block of 4 IQ4_XS rows ([`prepare_iq4xs`]).
pub(super) const IQ4XS_PREPARED_LINES: usize = std::mem::size_of::<PreparedIq4>() / 64;

/// Prepares 4 IQ4_XS rows of `nb` super-blocks for [`iq4xs_prepared`].
///
/// # Safety
/// The module's; `out` holds `IQ4XS_PREPARED_LINES × nb` lines.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw")]
pub(super) unsafe fn prepare_iq4xs(nb: usize, w: [*const u8; 4], out: *mut PackLine) {
    let table = level_table(&IQ4NL_LEVELS, true);
    let size = BlockIQ4_XS::SIZE;
    prepare_pairs(nb, w, size, out, |x0, x1, p, prepared: &mut PreparedIq4| {
        unpack_iq4(x0, x1, table, &mut prepared.u[p]);
        prepared.d[p] = [half(x0.add(BlockIQ4_XS::D)), half(x1.add(BlockIQ4_XS::D))];
    })
}

/// IQ4_XS weights (4 rows prepared by [`prepare_iq4xs`]) × one or two groups of 8 tokens
/// packed by [`pack_q4k_lanes`] (the same lines: quants, scales, 32-quant sub-block sums; as
/// [`q45k_prepared`]): per (row, token) the exact
/// `total = Σ_s ls_s·Σ (level + 128)·y − 128·Σ_s ls_s·P_s` (the portable kernel's
/// `Σ_s ls_s·Σ level·y`: `nonlinear::dot_iq4_xs_q8_k`), then `acc += (d · d_y) · float(total)`.
///
/// # Safety
/// The module's; `w` holds `IQ4XS_PREPARED_LINES × nb` prepared lines, each packed group used
/// `Q4K_LANES_LINES × nb` lines.
pub(super) unsafe fn iq4xs_prepared(
    nb: usize,
    w: *const PackLine,
    packed: [*const PackLine; 2],
    two: bool,
) -> [TileOut; 2] {
    one_or_two(
        two,
        packed,
        |p| iq4xs_groups(nb, w, p),
        |p| iq4xs_groups(nb, w, p),
    )
}

/// [`iq4xs_prepared`] on `G` groups of 8 tokens.
///
/// # Safety
/// As [`iq4xs_prepared`]'s.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
unsafe fn iq4xs_groups<const G: usize>(
    nb: usize,
    w: *const PackLine,
    packed: [*const PackLine; G],
) -> [TileOut; G] {
    let mut acc = [[_mm512_setzero_ps(); 2]; G];
    for b in 0..nb {
        let lines = packed.map(|p| p.add(Q4K_LANES_LINES * b));
        let prepared = &*w.cast::<PreparedIq4>().add(b);
        let u = &prepared.u;
        let isum = scaled_sums(
            [u[0].codes.as_ptr(), u[1].codes.as_ptr()],
            [u[0].scales.as_ptr(), u[1].scales.as_ptr()],
            lines,
        );
        for (g, lines) in lines.into_iter().enumerate() {
            let line = |i: usize| _mm512_load_si512(lines.add(i).cast());
            let yd = _mm512_load_ps(lines.add(64).cast());
            for p in 0..2 {
                let mut corr = _mm512_setzero_si512();
                for k in 0..4 {
                    let sk = broadcast8(u[p].pairs.as_ptr().add(8 * k));
                    corr = dpwssd(corr, sk, line(65 + k));
                }
                let total = _mm512_sub_epi32(isum[g][p], _mm512_slli_epi32::<7>(corr));
                let v = _mm512_mul_ps(
                    _mm512_mul_ps(pair_ps(prepared.d[p]), yd),
                    _mm512_cvtepi32_ps(total),
                );
                acc[g][p] = _mm512_add_ps(acc[g][p], v);
            }
        }
    }
    acc.map(|acc| lanes_out(acc))
}
