//! AVX-512 VNNI prompt tiles for Q4_K and Q6_K. Q4_K: 4 weight rows × 8 tokens per call (two
//! pairs of rows) over activations packed once per matmul ([`pack_q4k`]: the quants, the
//! tokens' scales laid out as the FMA takes them, and each sub-block's quant sum transposed so
//! that the min correction of all 8 tokens is two `vpdpwssd`); Q6_K: `R` rows × `T` tokens as
//! they are (`T` a multiple of 4), the backend's 2 × 8.
//!
//! Each weight super-block is unpacked once for the tokens and each 64-byte activation chunk
//! is loaded once for the rows; 512-bit `pmaddubsw`/`vpdpwssd` take two 32-quant chunks at
//! once. Per (row, token) the integer sums are exact and, once the two 256-bit halves are
//! added, hold in each of the eight i32 lanes the value of the same lane of the one-row
//! kernels of `kquants` (integer additions may be regrouped freely), and the floating-point
//! operations are the one-row kernel's, in its order: `acc += (d_y · d_x) · float(sumi)` per
//! lane with one FMA per super-block, the Q4_K min correction
//! `m += (d_y · dmin) · float(min_sum)` (here one lane per token, the same operations lane by
//! lane), then `hsum(acc) − m`. So every result is bit-identical to [`super::Kernels::dot`].
//!
//! Safety: requires AVX2, FMA, F16C and AVX-512 F/VL/BW/VNNI, and `nb` whole super-blocks in
//! every row.

use std::arch::x86_64::*;

use super::{hsum_ps, load};
use crate::quant::blocks::{BlockQ4_K, BlockQ6_K, BlockQ8_K};
use crate::quant::kernels::{PackLine, MAX_TILE_TOKENS};
use crate::quant::kquants::{q8k_bsum, q8k_d, Q45K_D, Q45K_SCALES};

/// Byte offset of super-block `b`'s Q8_K block in an activation row.
#[inline]
pub(super) fn q8k_at(b: usize) -> usize {
    BlockQ8_K::SIZE * b
}

/// The f32 scale of the Q8_K block at `p`.
#[inline]
pub(super) unsafe fn q8k_scale(p: *const u8) -> f32 {
    p.add(BlockQ8_K::D).cast::<f32>().read_unaligned()
}

/// The little-endian u32 at `p`.
#[inline]
unsafe fn u32_at(p: *const u8) -> u32 {
    u32::from_le(p.cast::<u32>().read_unaligned())
}

/// The IEEE halves at `p` and `p + 2` (Q4_K's `d` and `dmin`) widened exactly to f32.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn halves(p: *const u8) -> (f32, f32) {
    let v = _mm_cvtph_ps(_mm_cvtsi32_si128(u32_at(p) as i32));
    (_mm_cvtss_f32(v), _mm_cvtss_f32(_mm_movehdup_ps(v)))
}

/// The IEEE half at `p` widened exactly to f32.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn half(p: *const u8) -> f32 {
    let h = u16::from_le(p.cast::<u16>().read_unaligned());
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(h))))
}

/// The eight 6-bit scales and eight 6-bit mins of a Q4_K block's 12 packed bytes at `s`, as
/// bytes of two u64 (scale/min `j` in byte `j`); the word-wise form of `q4k_scales_mins`.
#[inline]
pub(super) unsafe fn q4k_scales_mins_words(s: *const u8) -> (u64, u64) {
    let (a, b, c) = (u32_at(s), u32_at(s.add(4)), u32_at(s.add(8)));
    const LOW6: u32 = 0x3f3f_3f3f;
    const LOW4: u32 = 0x0f0f_0f0f;
    const TOP2: u32 = 0x0303_0303;
    let sc_hi = (c & LOW4) | (((a >> 6) & TOP2) << 4);
    let m_hi = ((c >> 4) & LOW4) | (((b >> 6) & TOP2) << 4);
    (
        u64::from(a & LOW6) | (u64::from(sc_hi) << 32),
        u64::from(b & LOW6) | (u64::from(m_hi) << 32),
    )
}

/// A `pshufb` mask that broadcasts i16 word `lo` (of a 128-bit lane) to the low lane and word
/// `hi` to the high lane.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn word_mask(lo: i32, hi: i32) -> __m256i {
    let w = |i: i32| _mm_set1_epi16(((2 * i) | ((2 * i + 1) << 8)) as i16);
    _mm256_set_m128i(w(hi), w(lo))
}

/// A `pshufb` mask that broadcasts i16 word `w[i]` (of a 128-bit lane) to 128-bit lane `i`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw")]
pub(super) unsafe fn word_mask4(w: [i32; 4]) -> __m512i {
    let lo = _mm512_castsi256_si512(word_mask(w[0], w[1]));
    _mm512_inserti64x4(lo, word_mask(w[2], w[3]), 1)
}

/// `acc + d · float(sums)` for two tokens at once: lanes 0..8 belong to one token (its sums
/// `a`, folded to eight lanes, and its scale product in lanes 0..8 of `d`), lanes 8..16 to the
/// next (`b`, lanes 8..16 of `d`); lane by lane the one-row kernel's conversion and FMA.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f")]
unsafe fn fma_pair(acc: __m512, d: __m512, a: __m512i, b: __m512i) -> __m512 {
    let lo = _mm512_shuffle_i64x2(a, b, 0b01_00_01_00);
    let hi = _mm512_shuffle_i64x2(a, b, 0b11_10_11_10);
    let sums = _mm512_cvtepi32_ps(_mm512_add_epi32(lo, hi));
    _mm512_fmadd_ps(d, sums, acc)
}

/// Two scales as a [`fma_pair`] vector: `d0` in lanes 0..8, `d1` in lanes 8..16.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f")]
unsafe fn pair_scales(d0: f32, d1: f32) -> __m512 {
    let d = _mm512_insertf64x4(
        _mm512_castps_pd(_mm512_set1_ps(d0)),
        _mm256_castps_pd(_mm256_set1_ps(d1)),
        1,
    );
    _mm512_castpd_ps(d)
}

/// The eight accumulator lanes of token `t` in a pair vector of [`fma_pair`] (`t` even: the
/// low lanes).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f")]
unsafe fn pair_half(acc: __m512, t: usize) -> __m256 {
    let acc = _mm512_castps_pd(acc);
    _mm256_castpd_ps(if t.is_multiple_of(2) {
        _mm512_castpd512_pd256(acc)
    } else {
        _mm512_extractf64x4_pd(acc, 1)
    })
}

/// `acc + Σ pairs a·b` (i16 pairs into i32 lanes) as one `vpdpwssd`. Written as assembly because
/// LLVM's generic tuning splits the intrinsic into `vpmaddwd` + `vpaddd` (twice the
/// instructions and more live registers in these register-bound loops).
#[inline]
#[target_feature(enable = "avx512f,avx512vnni")]
pub(super) unsafe fn dpwssd(acc: __m512i, a: __m512i, b: __m512i) -> __m512i {
    let mut acc = acc;
    std::arch::asm!(
        "vpdpwssd {acc}, {a}, {b}",
        acc = inout(zmm_reg) acc,
        a = in(zmm_reg) a,
        b = in(zmm_reg) b,
        options(pure, nomem, nostack, preserves_flags),
    );
    acc
}

/// Packed lines per super-block of 8 tokens for the Q4_K tile: each token's 256 quants
/// (4 lines each, lines `0..32`), the scale pairs of [`fma_pair`] (lines `32..36`: line `32 + p`
/// is token `2p`'s scale in lanes 0..8 and token `2p + 1`'s in lanes 8..16), the 8 scales (line
/// 36) and the pairwise group sums for the min correction (lines 37 and 38, see [`pack_q4k`]).
pub(super) const Q4K_LINES: usize = 39;

/// Packs 8 Q8_K activation rows of `nb` super-blocks for [`q4k_packed`] (`Q4K_LINES × nb`
/// lines). Lines 37 and 38 hold, per i32 lane `L` (token `t = L mod 8`, half `h = L / 8`), the
/// i16 pair `(P_{2h}, P_{2h+1})` (line 37) and `(P_{4+2h}, P_{5+2h})` (line 38) of that token,
/// where `P_j = bsum_{2j} + bsum_{2j+1}` is the sum of the quants of sub-block `j`.
///
/// # Safety
/// Every activation row holds `nb` whole Q8_K blocks; `out` holds `Q4K_LINES × nb` lines.
pub(super) unsafe fn pack_q4k(nb: usize, acts: [&[u8]; MAX_TILE_TOKENS], out: &mut [PackLine]) {
    for (b, lines) in out.chunks_exact_mut(Q4K_LINES).take(nb).enumerate() {
        let yb: [&[u8]; MAX_TILE_TOKENS] = acts.map(|a| &a[q8k_at(b)..q8k_at(b + 1)]);
        let yd = yb.map(q8k_d);
        for (t, y) in yb.iter().enumerate() {
            for j in 0..4 {
                let at = BlockQ8_K::QS + 64 * j;
                lines[4 * t + j].0.copy_from_slice(&y[at..at + 64]);
            }
        }
        let put = |line: &mut PackLine, v: [f32; 16]| {
            for (c, v) in line.0.chunks_exact_mut(4).zip(v) {
                c.copy_from_slice(&v.to_le_bytes());
            }
        };
        for p in 0..4 {
            put(
                &mut lines[32 + p],
                std::array::from_fn(|l| yd[2 * p + l / 8]),
            );
        }
        put(
            &mut lines[36],
            std::array::from_fn(|l| yd.get(l).copied().unwrap_or(0.0)),
        );
        let pairs: [[i16; 8]; MAX_TILE_TOKENS] = yb
            .map(|y| std::array::from_fn(|j| (q8k_bsum(y, 2 * j) + q8k_bsum(y, 2 * j + 1)) as i16));
        for (k, line) in lines[37..39].iter_mut().enumerate() {
            for (l, c) in line.0.chunks_exact_mut(4).enumerate() {
                let j = 4 * k + 2 * (l / 8);
                let pair = pairs[l % 8];
                c[..2].copy_from_slice(&pair[j].to_le_bytes());
                c[2..].copy_from_slice(&pair[j + 1].to_le_bytes());
            }
        }
    }
}

/// The packed Q4_K tile: 4 weight rows × the 8 tokens packed by [`pack_q4k`], as two pairs of
/// rows.
///
/// # Safety
/// As [`q4k`].
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(super) unsafe fn q4k_packed(
    nb: usize,
    w: [*const u8; 4],
    packed: *const PackLine,
) -> [[f32; MAX_TILE_TOKENS]; 4] {
    let a = q4k::<2>(nb, [w[0], w[1]], packed);
    let b = q4k::<2>(nb, [w[2], w[3]], packed);
    [a[0], a[1], b[0], b[1]]
}

/// Q4_K weights (`R` rows) × the 8 tokens packed by [`pack_q4k`] (see the module
/// documentation for why each result equals the one-row kernel's bit for bit; the min
/// correction `Σ_j m_j·P_j` of all 8 tokens is two `vpdpwssd` and a fold per row).
///
/// # Safety
/// AVX2, FMA, F16C and AVX-512 F/VL/BW/VNNI; `nb` whole super-blocks behind every row pointer
/// and `Q4K_LINES × nb` lines written by [`pack_q4k`] behind `packed`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
unsafe fn q4k<const R: usize>(
    nb: usize,
    x: [*const u8; R],
    packed: *const PackLine,
) -> [[f32; MAX_TILE_TOKENS]; R] {
    const T: usize = MAX_TILE_TOKENS;
    let m4 = _mm512_set1_epi8(0x0f);
    // Low nibbles in the low 256 bits, high nibbles in the high 256 bits.
    let nibble_shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    // The i16 pairs of mins (m0, m1) | (m2, m3), and (m4, m5) | (m6, m7), per lane half.
    let min_index = [
        _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi32(1), 1),
        _mm512_inserti64x4(_mm512_set1_epi32(2), _mm256_set1_epi32(3), 1),
    ];
    // Float accumulators, two tokens per vector.
    let mut acc = [[_mm512_setzero_ps(); T / 2]; R];
    // Min corrections, one lane per token.
    let mut acc_m = [_mm256_setzero_ps(); R];
    for b in 0..nb {
        let lines = packed.add(Q4K_LINES * b);
        let line = |i: usize| lines.add(i).cast::<u8>();
        let mut sumi = [[_mm512_setzero_si512(); R]; T];
        let mut dx = [_mm512_setzero_ps(); R];
        let mut scales = [_mm512_setzero_si512(); R];
        let yd8 = _mm256_load_ps(line(36).cast());
        for r in 0..R {
            let xp = x[r].add(BlockQ4_K::SIZE * b);
            let (d, dmin) = halves(xp.add(Q45K_D));
            dx[r] = _mm512_set1_ps(d);
            let (sc, m) = q4k_scales_mins_words(xp.add(Q45K_SCALES));
            let sc = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(sc as i64));
            scales[r] = _mm512_broadcast_i32x4(sc);
            let m = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(m as i64)));
            let p0 = _mm512_load_si512(line(37).cast());
            let p1 = _mm512_load_si512(line(38).cast());
            let ms = _mm512_permutexvar_epi32(min_index[0], m);
            let ms = dpwssd(_mm512_setzero_si512(), p0, ms);
            let ms = dpwssd(ms, p1, _mm512_permutexvar_epi32(min_index[1], m));
            let ms = _mm256_add_epi32(
                _mm512_castsi512_si256(ms),
                _mm512_extracti64x4_epi64::<1>(ms),
            );
            let f = _mm256_mul_ps(
                _mm256_mul_ps(yd8, _mm256_set1_ps(dmin)),
                _mm256_cvtepi32_ps(ms),
            );
            acc_m[r] = _mm256_add_ps(acc_m[r], f);
        }
        for j in 0..4 {
            // Sub-blocks 2j (low nibbles, low half) and 2j + 1 (high nibbles, high half).
            let mut q = [_mm512_setzero_si512(); R];
            let mut sc = [_mm512_setzero_si512(); R];
            for r in 0..R {
                let bits = x[r].add(BlockQ4_K::SIZE * b + BlockQ4_K::QS + 32 * j);
                let bits = _mm512_broadcast_i64x4(load(bits));
                q[r] = _mm512_and_si512(_mm512_srlv_epi16(bits, nibble_shift), m4);
                let w = 2 * j as i32;
                sc[r] = _mm512_shuffle_epi8(scales[r], word_mask4([w, w, w + 1, w + 1]));
            }
            for (t, sumi) in sumi.iter_mut().enumerate() {
                let yv = _mm512_load_si512(line(4 * t + j).cast());
                for r in 0..R {
                    let p = _mm512_maddubs_epi16(q[r], yv);
                    sumi[r] = dpwssd(sumi[r], p, sc[r]);
                }
            }
        }
        for p in 0..T / 2 {
            let yd = _mm512_load_ps(line(32 + p).cast());
            for r in 0..R {
                let d = _mm512_mul_ps(yd, dx[r]);
                acc[r][p] = fma_pair(acc[r][p], d, sumi[2 * p][r], sumi[2 * p + 1][r]);
            }
        }
    }
    let mut out = [[0f32; T]; R];
    for r in 0..R {
        let mut m = [0f32; T];
        _mm256_storeu_ps(m.as_mut_ptr(), acc_m[r]);
        for t in 0..T {
            out[r][t] = hsum_ps(pair_half(acc[r][t / 2], t)) - m[t];
        }
    }
    out
}

/// Unpacks Q6_K quants two 32-quant chunks at a time.
#[derive(Clone, Copy)]
pub(super) struct Q6kBits {
    m4: __m512i,
    m30: __m512i,
    /// The shifts of the high 2-bit parts of chunks 4n..4n+4: `h << 4`, `h << 2`, `h`, `h >> 2`.
    high_shift: [__m512i; 2],
}

impl Q6kBits {
    /// The constants.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw")]
    pub(super) unsafe fn new() -> Self {
        Q6kBits {
            m4: _mm512_set1_epi8(0x0f),
            m30: _mm512_set1_epi8(0x30),
            high_shift: [
                _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1),
                _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1),
            ],
        }
    }

    /// The unsigned quants (0..=63) of chunks `4n + 2p` (low 256 bits) and `4n + 2p + 1` (high
    /// 256 bits) of the Q6_K block at `xp`.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw")]
    pub(super) unsafe fn chunks(&self, xp: *const u8, n: usize, p: usize) -> __m512i {
        let l = _mm512_loadu_si512(xp.add(BlockQ6_K::QL + 64 * n).cast());
        let h = _mm512_broadcast_i64x4(load(xp.add(BlockQ6_K::QH + 32 * n)));
        let (l, h) = if p == 0 {
            (l, _mm512_sllv_epi16(h, self.high_shift[0]))
        } else {
            (
                _mm512_srli_epi16(l, 4),
                _mm512_srlv_epi16(h, self.high_shift[1]),
            )
        };
        _mm512_or_si512(_mm512_and_si512(l, self.m4), _mm512_and_si512(h, self.m30))
    }
}

/// Q6_K weights (`R` rows) × `T` Q8_K activation rows, `T` a multiple of 4 up to 16. The one-row kernel
/// sums `s·(q·y − 32·y)` over the i16 pairs of each lane, with `q` in 0..=63; here the weights
/// are the signed `q − 32` and the activations the unsigned `y + 128` (a sign flip), so per
/// (row, token) one `pmaddubsw` and one `vpdpwssd` remain, and the weight-only excess
/// `128·Σ s·(q − 32)` is summed once per row and super-block and subtracted per token. No i16
/// pair saturates (|pair| ≤ 2·255·32), so every lane holds the one-row kernel's exact value.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(super) unsafe fn q6k<const R: usize, const T: usize>(
    nb: usize,
    x: [*const u8; R],
    y: [*const u8; T],
) -> [[f32; T]; R] {
    type W = BlockQ6_K;
    debug_assert!(T.is_multiple_of(4) && T <= 16, "4, 8, 12 or 16 tokens");
    let bits = Q6kBits::new();
    let k32 = _mm512_set1_epi8(32);
    let sign = _mm512_set1_epi8(-128);
    let ones = _mm512_set1_epi8(1);
    // Float accumulators, two tokens per vector (at most 16 tokens).
    let mut acc = [[_mm512_setzero_ps(); 8]; R];
    for b in 0..nb {
        let mut sumi = [[_mm512_setzero_si512(); T]; R];
        // Σ s·(pair sums of q − 32) per lane, per row.
        let mut excess = [_mm512_setzero_si512(); R];
        for n in 0..2 {
            // Scales 8n..8n+8 as i16 in every 128-bit lane.
            let sc: [__m512i; R] = std::array::from_fn(|r| {
                let p = x[r].add(W::SIZE * b + W::SCALES + 8 * n);
                _mm512_broadcast_i32x4(_mm_cvtepi8_epi16(_mm_loadl_epi64(p.cast())))
            });
            // Chunks 2p and 2p + 1 (32 quants each) per vector.
            for p in 0..2 {
                let mut q = [_mm512_setzero_si512(); R];
                let mut scales = [_mm512_setzero_si512(); R];
                for r in 0..R {
                    let xp = x[r].add(W::SIZE * b);
                    q[r] = _mm512_sub_epi8(bits.chunks(xp, n, p), k32);
                    let g = 4 * p as i32;
                    scales[r] = _mm512_shuffle_epi8(sc[r], word_mask4([g, g + 1, g + 2, g + 3]));
                    let pairs = _mm512_maddubs_epi16(ones, q[r]);
                    excess[r] = dpwssd(excess[r], pairs, scales[r]);
                }
                for t in 0..T {
                    let at = q8k_at(b) + BlockQ8_K::QS + 128 * n + 64 * p;
                    let yu = _mm512_xor_si512(_mm512_loadu_si512(y[t].add(at).cast()), sign);
                    for r in 0..R {
                        let prod = _mm512_maddubs_epi16(yu, q[r]);
                        sumi[r][t] = dpwssd(sumi[r][t], prod, scales[r]);
                    }
                }
            }
        }
        for r in 0..R {
            let excess = _mm512_slli_epi32(excess[r], 7);
            for s in &mut sumi[r] {
                *s = _mm512_sub_epi32(*s, excess);
            }
        }
        let dx: [f32; R] = std::array::from_fn(|r| half(x[r].add(W::SIZE * b + W::D)));
        for t in (0..T).step_by(2) {
            let yd = [t, t + 1].map(|t| q8k_scale(y[t].add(q8k_at(b))));
            for r in 0..R {
                let (d0, d1) = (dx[r] * yd[0], dx[r] * yd[1]);
                acc[r][t / 2] = fma_pair(
                    acc[r][t / 2],
                    pair_scales(d0, d1),
                    sumi[r][t],
                    sumi[r][t + 1],
                );
            }
        }
    }
    let mut out = [[0f32; T]; R];
    for r in 0..R {
        for t in 0..T {
            out[r][t] = hsum_ps(pair_half(acc[r][t / 2], t));
        }
    }
    out
}
