//! AVX-512 VNNI prompt tiles for Q4_K and Q6_K: `R` weight rows × `T` Q8_K activation rows
//! (`T` a multiple of 4) per call, the backend's 2 rows × 8 tokens fitting the 32 registers.
//!
//! Each weight super-block is unpacked once for the `T` tokens and each 64-byte activation
//! chunk is loaded once for the `R` rows; 512-bit `pmaddubsw`/`vpdpwssd` take two 32-quant
//! chunks at once. Per (row, token) the integer sums are exact and, once the two 256-bit halves
//! are added, hold in each of the eight i32 lanes the value of the same lane of the one-row
//! kernels of `kquants` (integer additions may be regrouped freely), and the floating-point operations are the one-row kernel's, in its order:
//! `acc += (d_y · d_x) · float(sumi)` per lane with one FMA per super-block, the Q4_K min
//! correction `m += (d_y · dmin) · float(min_sum)` (here four tokens per SSE vector, the same
//! operations lane by lane), then `hsum(acc) − m`. So every result is bit-identical to
//! [`super::Kernels::dot`].
//!
//! Safety: requires AVX2, FMA, F16C and AVX-512 F/VL/BW/VNNI, and `nb` whole super-blocks in
//! every row.

use std::arch::x86_64::*;

use super::{hsum_ps, load};
use crate::quant::blocks::{BlockQ4_K, BlockQ6_K, BlockQ8_K};
use crate::quant::kquants::{Q45K_D, Q45K_SCALES};

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
/// `a`, folded to eight lanes, and scale `d0`), lanes 8..16 to the next (`b`, `d1`); lane by lane
/// the one-row kernel's conversion and FMA.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f")]
unsafe fn fma_pair(acc: __m512, d0: f32, d1: f32, a: __m512i, b: __m512i) -> __m512 {
    let lo = _mm512_shuffle_i64x2(a, b, 0b01_00_01_00);
    let hi = _mm512_shuffle_i64x2(a, b, 0b11_10_11_10);
    let sums = _mm512_cvtepi32_ps(_mm512_add_epi32(lo, hi));
    let d = _mm512_insertf64x4(
        _mm512_castps_pd(_mm512_set1_ps(d0)),
        _mm256_castps_pd(_mm256_set1_ps(d1)),
        1,
    );
    _mm512_fmadd_ps(_mm512_castpd_ps(d), sums, acc)
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

/// The four i32 horizontal sums of `v[0..4]`, in that order, as one SSE vector (exact).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn hsum4_epi32(v: &[__m256i]) -> __m128i {
    let h = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1))
}

/// The Q8_K scales of super-block `b` of four activation rows starting at `y[t0]`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8k_scales4<const T: usize>(y: &[*const u8; T], t0: usize, b: usize) -> __m128 {
    let s = |t: usize| q8k_scale(y[t0 + t].add(q8k_at(b)));
    _mm_set_ps(s(3), s(2), s(1), s(0))
}

/// Q4_K weights (`R` rows) × `T` Q8_K activation rows, `T` a multiple of 4 up to 16 (see the module
/// documentation for why each result equals the one-row kernel's bit for bit).
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(super) unsafe fn q4k<const R: usize, const T: usize>(
    nb: usize,
    x: [*const u8; R],
    y: [*const u8; T],
) -> [[f32; T]; R] {
    debug_assert!(T.is_multiple_of(4) && T <= 16, "4, 8, 12 or 16 tokens");
    let m4 = _mm512_set1_epi8(0x0f);
    // Low nibbles in the low 256 bits, high nibbles in the high 256 bits.
    let nibble_shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    // Float accumulators, two tokens per vector (at most 16 tokens).
    let mut acc = [[_mm512_setzero_ps(); 8]; R];
    // Min corrections, four tokens per vector (at most 16 tokens).
    let mut acc_m = [[_mm_setzero_ps(); 4]; R];
    for b in 0..nb {
        let mut sumi = [[_mm512_setzero_si512(); T]; R];
        let mut dx = [0f32; R];
        let mut scales = [_mm512_setzero_si512(); R];
        for r in 0..R {
            let xp = x[r].add(BlockQ4_K::SIZE * b);
            let (d, dmin) = halves(xp.add(Q45K_D));
            dx[r] = d;
            let (sc, m) = q4k_scales_mins_words(xp.add(Q45K_SCALES));
            let sc = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(sc as i64));
            scales[r] = _mm512_broadcast_i32x4(sc);
            // Each min twice (i16 pairs), for `pmaddwd` with the pairwise group sums.
            let m = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(m as i64));
            let m2 = _mm256_or_si256(m, _mm256_slli_epi32(m, 16));
            for g in 0..T / 4 {
                let mut v = [_mm256_setzero_si256(); 4];
                for (k, v) in v.iter_mut().enumerate() {
                    let bs = load(y[4 * g + k].add(q8k_at(b) + BlockQ8_K::BSUMS));
                    *v = _mm256_madd_epi16(bs, m2);
                }
                let isum = _mm_cvtepi32_ps(hsum4_epi32(&v));
                let yd = q8k_scales4(&y, 4 * g, b);
                let f = _mm_mul_ps(_mm_mul_ps(yd, _mm_set1_ps(dmin)), isum);
                acc_m[r][g] = _mm_add_ps(acc_m[r][g], f);
            }
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
            for t in 0..T {
                let yv = _mm512_loadu_si512(y[t].add(q8k_at(b) + BlockQ8_K::QS + 64 * j).cast());
                for r in 0..R {
                    let p = _mm512_maddubs_epi16(q[r], yv);
                    sumi[r][t] = dpwssd(sumi[r][t], p, sc[r]);
                }
            }
        }
        for t in (0..T).step_by(2) {
            let yd = [t, t + 1].map(|t| q8k_scale(y[t].add(q8k_at(b))));
            for r in 0..R {
                let (d0, d1) = (yd[0] * dx[r], yd[1] * dx[r]);
                acc[r][t / 2] = fma_pair(acc[r][t / 2], d0, d1, sumi[r][t], sumi[r][t + 1]);
            }
        }
    }
    let mut out = [[0f32; T]; R];
    for r in 0..R {
        for t in 0..T {
            let mut m = [0f32; 4];
            _mm_storeu_ps(m.as_mut_ptr(), acc_m[r][t / 4]);
            out[r][t] = hsum_ps(pair_half(acc[r][t / 2], t)) - m[t % 4];
        }
    }
    out
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
    let m4 = _mm512_set1_epi8(0x0f);
    let m30 = _mm512_set1_epi8(0x30);
    let k32 = _mm512_set1_epi8(32);
    let sign = _mm512_set1_epi8(-128);
    let ones = _mm512_set1_epi8(1);
    // The high 2-bit parts of chunks 4n..4n+4: `h << 4`, `h << 2`, `h`, `h >> 2`.
    let high_shift = [
        _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1),
        _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1),
    ];
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
                    let l = _mm512_loadu_si512(xp.add(W::QL + 64 * n).cast());
                    let h = _mm512_broadcast_i64x4(load(xp.add(W::QH + 32 * n)));
                    let (l, h) = if p == 0 {
                        (l, _mm512_sllv_epi16(h, high_shift[0]))
                    } else {
                        (_mm512_srli_epi16(l, 4), _mm512_srlv_epi16(h, high_shift[1]))
                    };
                    let u = _mm512_or_si512(_mm512_and_si512(l, m4), _mm512_and_si512(h, m30));
                    q[r] = _mm512_sub_epi8(u, k32);
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
                acc[r][t / 2] = fma_pair(acc[r][t / 2], d0, d1, sumi[r][t], sumi[r][t + 1]);
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
