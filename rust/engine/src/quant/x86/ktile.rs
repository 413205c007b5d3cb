//! The AVX-512 VNNI prompt tile for Q6_K (`R` rows × `T` tokens as they are, `T` a multiple of
//! 4, the backend's 2 × 8; Q4_K's is in `klanes`), and helpers the K kernels share.
//!
//! Each weight super-block is unpacked once for the tokens and each 64-byte activation chunk
//! is loaded once for the rows; 512-bit `pmaddubsw`/`vpdpwssd` take two 32-quant chunks at
//! once. Per (row, token) the integer sums are exact and, once the two 256-bit halves are
//! added, hold in each of the eight i32 lanes the value of the same lane of the one-row
//! kernels of `kquants` (integer additions may be regrouped freely), and the floating-point
//! operations are the one-row kernel's, in its order: `acc += (d_y · d_x) · float(sumi)` per
//! lane with one FMA per super-block, then `hsum(acc)`. So every result is bit-identical to
//! [`super::Kernels::dot`].
//!
//! Safety: requires AVX2, FMA, F16C and AVX-512 F/VL/BW/VNNI, and `nb` whole super-blocks in
//! every row.

use std::arch::x86_64::*;

use super::{hsum_ps, load};
use crate::quant::blocks::{BlockQ6_K, BlockQ8_K};

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
