//! The AVX2 4-row kernels for the 32-element block formats ([`Block32`]): four
//! weight rows, two per 256-bit register (one row per 128-bit lane), against one to four
//! tokens. [`rows4`] decodes (one sequence, or one token of each of a few); [`tile4`] serves a
//! prompt's 4 × 4 tiles.
//!
//! Per block, a row pair's first 16 codes go into one register and their last 16 into
//! another, once for all tokens, and each token's first and last 16 quants are each loaded
//! into both lanes; two `maddubs` (added as i16, exact for 4- and 5-bit codes) and one `madd`
//! then leave each row's 4 lanes holding the exact integers the one-row kernel folds to (lane
//! `j`: bytes `4j..4j+4` and `16+4j..16+4j+4`). The four rows' f16 scales (and minima)
//! are widened with one conversion, and one FMA applies two rows' `f32(d_w)·f32(d_a)`. Each
//! row keeps the one-row kernel's arithmetic (see `super::x86`), so every result is
//! bit-identical to [`super::Kernels::dot`].
//!
//! The two differ in what they do per call. Decoding reads each weight once per step, so
//! [`rows4`] takes the tokens' scales (and Q4_0/Q5_0 corrections) [`prepare`]d once per call
//! for every group of rows, loads each token's quants where a row pair uses them (held for
//! both pairs, they pushed the eight accumulators out of the 16 registers) and prefetches its
//! four row streams. A prompt tile is called for every 4 rows × 4 tokens with the rows in
//! cache: preparing per call cost more there (SmolLM2 prompt −9% on Zen 2), so [`tile4`]
//! works out each token's scale and correction itself and holds its quants for both pairs.
//!
//! Safety: the dispatcher checks AVX2, FMA and F16C; `nb` whole blocks are present in every
//! row.

use std::arch::x86_64::*;

use super::tile::{
    dot2_avx2, dot_avx2, halves, load_both, prepared_scales, weight_scales, Block32, Codes,
    Prepared,
};
use super::{fifth_bits, hsum4, level_table, word, PREFETCH};

/// The 16 bytes at `lo` in the low 128-bit lane and the 16 at `hi` in the high one.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn load_two(lo: *const u8, hi: *const u8) -> __m256i {
    _mm256_inserti128_si256::<1>(
        _mm256_castsi128_si256(_mm_loadu_si128(lo.cast())),
        _mm_loadu_si128(hi.cast()),
    )
}

/// The first and the last 16 codes of the `B` blocks at `p0` (low lane) and `p1` (high lane),
/// as unsigned bytes (signed bytes stay signed).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn codes<B: Block32>(p0: *const u8, p1: *const u8) -> [__m256i; 2] {
    let low = _mm256_set1_epi8(0x0f);
    let nibbles = |qs: usize| {
        let x = load_two(p0.add(qs), p1.add(qs));
        [
            _mm256_and_si256(x, low),
            _mm256_and_si256(_mm256_srli_epi16::<4>(x), low),
        ]
    };
    let qs = B::QS;
    match B::CODES {
        Codes::Bytes => [
            load_two(p0.add(qs), p1.add(qs)),
            load_two(p0.add(qs + 16), p1.add(qs + 16)),
        ],
        Codes::Nibbles => nibbles(qs),
        Codes::Levels(levels) => {
            let table = level_table(levels, false);
            nibbles(qs).map(|q| _mm256_shuffle_epi8(table, q))
        }
        Codes::Nibbles5 { qh } => {
            let [lo, hi] = nibbles(qs);
            let (f0, f1) = (fifth_bits(p0.add(qh)), fifth_bits(p1.add(qh)));
            [
                _mm256_or_si256(lo, _mm256_permute2x128_si256::<0x20>(f0, f1)),
                _mm256_or_si256(hi, _mm256_permute2x128_si256::<0x31>(f0, f1)),
            ]
        }
    }
}

/// A row pair's 4 lanes per row for one token: `corr` plus the exact lane sums of the codes
/// `[lo, hi]` ([`codes`]) times the token's halves `[alo, ahi]` (each in both lanes); Q8_0
/// with the sign trick.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn lane_sums<B: Block32>(
    [lo, hi]: [__m256i; 2],
    [alo, ahi]: [__m256i; 2],
    corr: __m256i,
) -> __m256i {
    if B::SIGNED {
        let (ulo, uhi) = (_mm256_sign_epi8(lo, lo), _mm256_sign_epi8(hi, hi));
        let first = dot_avx2(corr, ulo, _mm256_sign_epi8(alo, lo));
        dot_avx2(first, uhi, _mm256_sign_epi8(ahi, hi))
    } else {
        dot2_avx2(corr, lo, alo, hi, ahi)
    }
}

/// The offset correction of an activation block whose halves are `alo` and `ahi` (each in
/// both lanes) for weights `B`: `−offset · Σ` of bytes `4j..4j+4` and `16+4j..16+4j+4` in
/// lane `j` of each half (the codes of Q4_0 and Q5_0 are used unsigned, 8 and 16 too large);
/// zero without an offset (signed codes take the sign trick; a minimum goes through `Σ m·s`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn correction<B: Block32>(alo: __m256i, ahi: __m256i) -> __m256i {
    let zero = _mm256_setzero_si256();
    if B::OFFSET == 0 {
        return zero;
    }
    let shift = B::OFFSET.trailing_zeros() as i32;
    let ones = _mm256_set1_epi8(1);
    let lanes = dot2_avx2(zero, ones, alo, ones, ahi);
    _mm256_sub_epi32(zero, _mm256_sll_epi32(lanes, _mm_cvtsi32_si128(shift)))
}

/// [`Prepared`] blocks for the `nb` blocks of the activation row `a` (weights `B`), written to
/// `out`: the offset corrections where `B` has an offset (Q4_0, Q5_0) and the scales.
///
/// # Safety
/// AVX2, FMA and F16C must be present.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn prepare<B: Block32>(nb: usize, a: &[u8], out: &mut [Prepared]) {
    for (block, p) in a.chunks_exact(B::ACT_SIZE).zip(out).take(nb) {
        if B::OFFSET != 0 {
            let q = block.as_ptr().add(B::ACT_QS);
            let corr = correction::<B>(load_both(q), load_both(q.add(16)));
            _mm_store_si128(p.corr.as_mut_ptr().cast(), _mm256_castsi256_si128(corr));
        }
        _mm_store_ps(p.ds.as_mut_ptr(), prepared_scales::<B>(block.as_ptr()));
    }
}

/// Lane `i` of the `Σ m·s` sums of [`rows4`] (formats with a minimum) holds row `MIN_ROWS[i]` and token
/// `2j + MIN_TOKENS[i]` of token pair `j`.
const MIN_ROWS: [usize; 8] = [0, 2, 0, 2, 1, 3, 1, 3];
const MIN_TOKENS: [usize; 8] = [0, 0, 1, 1, 0, 0, 1, 1];

/// `out[r][t] = rows[r] · a[t]` for four weight rows and `T` activation rows (weights `B`),
/// the activation blocks' corrections and scales taken from `prep`.
///
/// # Safety
/// AVX2, FMA and F16C must be present; each row pointer and each of `a` and `prep` must have
/// `nb` whole blocks of their formats behind them.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn rows4<B: Block32, const T: usize>(
    nb: usize,
    w: [*const u8; 4],
    a: [*const u8; T],
    prep: [*const Prepared; T],
) -> [[f32; T]; 4] {
    let (wsize, asize, aq) = (B::SIZE, B::ACT_SIZE, B::ACT_QS);
    let zero = _mm256_setzero_si256();
    // acc[k][t]: row pair k (rows 2k and 2k + 1) and token t.
    let mut acc = [[_mm256_setzero_ps(); T]; 2];
    // Σ m·s of token pair j ([`MIN_ROWS`]; formats with a minimum).
    let mut summs = [_mm256_setzero_ps(); 2];
    for b in 0..nb {
        let p = w.map(|w| w.add(wsize * b));
        let pb = prep.map(|q| &*q.add(b));
        for p in p {
            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH).cast());
        }
        // [d0, m0, d2, m2 | d1, m1, d3, m3]: row pair k's scales in-lane at element 2k.
        let words = _mm_setr_epi32(word(p[0]), word(p[2]), word(p[1]), word(p[3]));
        let dm = weight_scales::<B>(words);
        for (k, acc) in acc.iter_mut().enumerate() {
            let [lo, hi] = codes::<B>(p[2 * k], p[2 * k + 1]);
            let dw = if k == 0 {
                _mm256_permute_ps::<0b00_00_00_00>(dm)
            } else {
                _mm256_permute_ps::<0b10_10_10_10>(dm)
            };
            // Each token's halves are loaded where they are used: held for both row pairs,
            // they would push the accumulators out of the 16 registers.
            for (t, acc) in acc.iter_mut().enumerate() {
                let pa = a[t].add(asize * b + aq);
                let (alo, ahi) = (load_both(pa), load_both(pa.add(16)));
                let corr = if B::OFFSET != 0 {
                    load_both(pb[t].corr.as_ptr().cast())
                } else {
                    zero
                };
                let sum = lane_sums::<B>([lo, hi], [alo, ahi], corr);
                let d = _mm256_mul_ps(dw, _mm256_broadcast_ss(&pb[t].ds[0]));
                *acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sum), *acc);
            }
        }
        if B::MIN {
            let m = _mm256_permute_ps::<0b11_01_11_01>(dm);
            for (j, summs) in summs.iter_mut().enumerate().take(T.div_ceil(2)) {
                let ds = |t: usize| _mm256_broadcast_ps(&*pb[t.min(T - 1)].ds.as_ptr().cast());
                // [s_2j, s_2j, s_2j+1, s_2j+1] in both lanes.
                let s = _mm256_shuffle_ps::<0b01_01_01_01>(ds(2 * j), ds(2 * j + 1));
                *summs = _mm256_add_ps(*summs, _mm256_mul_ps(m, s));
            }
        }
    }
    let mut out = [[0f32; T]; 4];
    for (k, acc) in acc.iter().enumerate() {
        for (t, v) in acc.iter().enumerate() {
            out[2 * k][t] = hsum4(_mm256_castps256_ps128(*v));
            out[2 * k + 1][t] = hsum4(_mm256_extractf128_ps::<1>(*v));
        }
    }
    if B::MIN {
        for (j, s) in summs.iter().enumerate() {
            let mut mins = [0f32; 8];
            _mm256_storeu_ps(mins.as_mut_ptr(), *s);
            for (i, m) in mins.into_iter().enumerate() {
                if let Some(o) = out[MIN_ROWS[i]].get_mut(2 * j + MIN_TOKENS[i]) {
                    *o += m;
                }
            }
        }
    }
    out
}

/// `out[r][t] = rows[r] · a[t]` for four weight rows and `T` activation rows (weights `B`),
/// each token's scale and correction worked out here: the prompt tile, called for
/// every 4 rows × 4 tokens, where preparing them per call costs more than it saves and each
/// token's halves stay in registers for both row pairs.
///
/// # Safety
/// AVX2, FMA and F16C must be present; each row pointer and each of `a` must have `nb` whole
/// blocks of their formats behind them.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn tile4<B: Block32, const T: usize>(
    nb: usize,
    w: [*const u8; 4],
    a: [*const u8; T],
) -> [[f32; T]; 4] {
    let (wsize, asize, aq) = (B::SIZE, B::ACT_SIZE, B::ACT_QS);
    let zero = _mm256_setzero_si256();
    // The scale lanes of row pair k in `dm` ([d0, m0, d1, m1, d2, m2, d3, m3]).
    let d_lanes = [
        _mm256_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2),
        _mm256_setr_epi32(4, 4, 4, 4, 6, 6, 6, 6),
    ];
    let m_lanes = _mm256_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7);
    // acc[k][t]: row pair k (rows 2k and 2k + 1) and token t.
    let mut acc = [[_mm256_setzero_ps(); T]; 2];
    // summs[t]: the four rows' Σ m·s for token t.
    let mut summs = [_mm_setzero_ps(); T];
    for b in 0..nb {
        // Each token's halves (in both lanes), [d_a, s_a (Q8_1 only), 0, 0] and correction.
        let mut act = [[zero; 3]; T];
        let mut ha = [_mm_setzero_ps(); T];
        for t in 0..T {
            let pa = a[t].add(asize * b);
            let (alo, ahi) = (load_both(pa.add(aq)), load_both(pa.add(aq + 16)));
            ha[t] = halves(pa);
            act[t] = [alo, ahi, correction::<B>(alo, ahi)];
        }
        let p = w.map(|w| w.add(wsize * b));
        let words = _mm_setr_epi32(word(p[0]), word(p[1]), word(p[2]), word(p[3]));
        let dm = weight_scales::<B>(words);
        for (k, acc) in acc.iter_mut().enumerate() {
            let [lo, hi] = codes::<B>(p[2 * k], p[2 * k + 1]);
            let dw = _mm256_permutevar8x32_ps(dm, d_lanes[k]);
            for (t, acc) in acc.iter_mut().enumerate() {
                let [alo, ahi, corr] = act[t];
                let sum = lane_sums::<B>([lo, hi], [alo, ahi], corr);
                let d = _mm256_mul_ps(dw, _mm256_broadcastss_ps(ha[t]));
                *acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sum), *acc);
            }
        }
        if B::MIN {
            let m = _mm256_castps256_ps128(_mm256_permutevar8x32_ps(dm, m_lanes));
            for (summs, ha) in summs.iter_mut().zip(ha) {
                let s = _mm_permute_ps::<0b01_01_01_01>(ha);
                *summs = _mm_add_ps(*summs, _mm_mul_ps(m, s));
            }
        }
    }
    let mut out = [[0f32; T]; 4];
    for (k, acc) in acc.iter().enumerate() {
        for (t, v) in acc.iter().enumerate() {
            out[2 * k][t] = hsum4(_mm256_castps256_ps128(*v));
            out[2 * k + 1][t] = hsum4(_mm256_extractf128_ps::<1>(*v));
        }
    }
    if B::MIN {
        for (t, s) in summs.iter().enumerate() {
            let mut mins = [0f32; 4];
            _mm_storeu_ps(mins.as_mut_ptr(), *s);
            for (row, m) in out.iter_mut().zip(mins) {
                row[t] += m;
            }
        }
    }
    out
}
