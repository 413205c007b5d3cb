//! The AVX-512 decoding kernel for the 32-element block formats ([`Block32`]): four
//! weight rows × one to four tokens (decoding one token, or one token for each of a few
//! sequences), on 512-bit registers that hold the four rows' 4 lanes.
//!
//! Per block the four rows' first 16 quants are gathered into one register (one row per 128-bit
//! lane) and their last 16 into another, once for all tokens; each token's two halves are
//! broadcast to all four lanes, so two `vpdpbusd`s, one conversion and one FMA serve the four
//! rows. What depends on the token alone — the offset correction and its scale (and Q8_1 sum)
//! as f32 — is prepared once per call for every group of rows ([`prepare`]); the four rows'
//! f16 scales (and minima) are widened together once per block.
//!
//! Each row keeps the arithmetic of the one-row kernel ([`super::Kernels::dot`], see `super::x86`):
//! 4 f32 lanes, one FMA per block with `f32(d_w)·f32(d_a)`, exact integer lane sums of bytes
//! `4j..4j+4` and `16+4j..16+4j+4`, one horizontal sum in the same order, plus `Σ m·s` (summed
//! block by block) for the formats with a minimum, so every result is bit-identical.

use std::arch::x86_64::*;

use super::tile::{prepared_scales, weight_scales, Block32, Codes, Prepared};
use super::wide::{broadcast16, corrections, fifth_bits, hsum4x4, nibbles};
use super::{level_table, load, word, PREFETCH};

/// The 16 bytes at each of `p`, row r's in 128-bit lane r.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni,avx512bw")]
unsafe fn gather16(p: [*const u8; 4]) -> __m512i {
    let two = |a: *const u8, b: *const u8| {
        _mm256_inserti128_si256::<1>(
            _mm256_castsi128_si256(_mm_loadu_si128(a.cast())),
            _mm_loadu_si128(b.cast()),
        )
    };
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(two(p[0], p[1])), two(p[2], p[3]))
}

/// The first and the last 16 quants of the four rows' `B` blocks at `p`, as unsigned bytes
/// (signed bytes flipped by 128), row r's in 128-bit lane r.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni,avx512bw")]
unsafe fn quants<B: Block32>(p: [*const u8; 4]) -> [__m512i; 2] {
    match B::CODES {
        Codes::Bytes => {
            // [row 0's 32 | row 1's 32] and [row 2's | row 3's], their 16-byte halves sorted.
            let two = |a: *const u8, b: *const u8| {
                _mm512_inserti64x4::<1>(
                    _mm512_castsi256_si512(load(a.add(B::QS))),
                    load(b.add(B::QS)),
                )
            };
            let (x, y) = (two(p[0], p[1]), two(p[2], p[3]));
            let flip = _mm512_set1_epi8(-128);
            [
                _mm512_xor_si512(_mm512_shuffle_i32x4::<0b10_00_10_00>(x, y), flip),
                _mm512_xor_si512(_mm512_shuffle_i32x4::<0b11_01_11_01>(x, y), flip),
            ]
        }
        Codes::Nibbles => nibbles(gather16(p.map(|p| p.add(B::QS)))),
        Codes::Levels(levels) => {
            let table = _mm512_broadcast_i32x4(_mm256_castsi256_si128(level_table(levels, true)));
            nibbles(gather16(p.map(|p| p.add(B::QS)))).map(|q| _mm512_shuffle_epi8(table, q))
        }
        Codes::Nibbles5 { qh } => {
            // Bit j of a row's high bits belongs to quant j: the low 16 to the first half.
            let h = p.map(|p| u64::from(u32::from_le(p.add(qh).cast::<u32>().read_unaligned())));
            let spread = |f: fn(u64) -> u64| (0..4).fold(0, |k, r| k | f(h[r]) << (16 * r));
            let halves = nibbles(gather16(p.map(|p| p.add(B::QS))));
            fifth_bits(halves, spread(|h| h & 0xffff), spread(|h| h >> 16))
        }
    }
}

/// [`Prepared`] blocks for the `nb` blocks of the activation row `a` (weights `B`), written
/// to `out`.
///
/// # Safety
/// AVX2, FMA, F16C and AVX-512 F/VL/VNNI/BW must be present.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni,avx512bw")]
pub(super) unsafe fn prepare<B: Block32>(nb: usize, a: &[u8], out: &mut [Prepared]) {
    for (block, p) in a.chunks_exact(B::ACT_SIZE).zip(out).take(nb) {
        let corr = corrections::<B>(block.as_ptr().add(B::ACT_QS));
        _mm_store_si128(p.corr.as_mut_ptr().cast(), corr);
        _mm_store_ps(p.ds.as_mut_ptr(), prepared_scales::<B>(block.as_ptr()));
    }
}

/// Rows `w` (four, `nb` blocks each) · the `T` activation rows `a` (their blocks prepared in
/// `prep`) for weights `B`: `out[r][t] = w[r] · a[t]`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni,avx512bw")]
unsafe fn rows4<B: Block32, const T: usize>(
    nb: usize,
    w: [*const u8; 4],
    a: [*const u8; T],
    prep: [*const Prepared; T],
) -> [[f32; T]; 4] {
    let (wsize, asize, aq) = (B::SIZE, B::ACT_SIZE, B::ACT_QS);
    // Lane group r (4 lanes) takes lane 2r of the widened [d_w, m_w] (row r's d_w).
    let spread = _mm512_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6);
    let mut acc = [_mm512_setzero_ps(); T];
    // Per token, lane 2r: unused; lane 2r + 1: row r's Σ m·s (formats with a minimum).
    let mut summs = [_mm256_setzero_ps(); T];
    // Without a minimum the upper half is quants: cleared (no stray subnormals or NaNs).
    let keep = if B::MIN { -1 } else { 0xffff };
    for b in 0..nb {
        // [d_w, m_w] of the four rows (f16 → f32), and each row's d_w in its 4 lanes.
        let p: [*const u8; 4] = std::array::from_fn(|r| w[r].add(wsize * b));
        let halves = _mm_and_si128(
            _mm_setr_epi32(word(p[0]), word(p[1]), word(p[2]), word(p[3])),
            _mm_set1_epi32(keep),
        );
        let dm = weight_scales::<B>(halves);
        let dw = _mm512_permutexvar_ps(spread, _mm512_castps256_ps512(dm));
        for &p in &p {
            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH).cast());
        }
        let [lo, hi] = quants::<B>(p);
        for t in 0..T {
            let q = a[t].add(asize * b + aq);
            let pb = &*prep[t].add(b);
            let start = if B::MIN {
                _mm512_setzero_si512()
            } else {
                _mm512_broadcast_i32x4(_mm_load_si128(pb.corr.as_ptr().cast()))
            };
            let first = _mm512_dpbusd_epi32(start, lo, broadcast16(q));
            let lanes = _mm512_dpbusd_epi32(first, hi, broadcast16(q.add(16)));
            let d = _mm512_mul_ps(dw, _mm512_set1_ps(pb.ds[0]));
            acc[t] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(lanes), acc[t]);
            if B::MIN {
                // Lane 2r + 1: row r's m_w · s_a.
                let ds = _mm256_broadcast_ps(&*pb.ds.as_ptr().cast::<__m128>());
                summs[t] = _mm256_add_ps(summs[t], _mm256_mul_ps(dm, ds));
            }
        }
    }
    let mut out = [[0f32; T]; 4];
    // Lanes 0, 4, 8, 12 (the four rows' sums) to lanes 0..4.
    let gather = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    for t in 0..T {
        let sums = hsum4x4(acc[t]);
        let sums = if B::MIN {
            // Row r's Σ m·s (lane 2r + 1 of `summs`) added to its sum (lane 4r).
            let at = _mm512_setr_epi32(1, 0, 0, 0, 3, 0, 0, 0, 5, 0, 0, 0, 7, 0, 0, 0);
            _mm512_add_ps(
                sums,
                _mm512_permutexvar_ps(at, _mm512_castps256_ps512(summs[t])),
            )
        } else {
            sums
        };
        let four = _mm512_castps512_ps128(_mm512_permutexvar_ps(gather, sums));
        out[0][t] = _mm_cvtss_f32(four);
        out[1][t] = _mm_cvtss_f32(_mm_movehdup_ps(four));
        out[2][t] = _mm_cvtss_f32(_mm_movehl_ps(four, four));
        out[3][t] = _mm_cvtss_f32(_mm_permute_ps::<0b11_11_11_11>(four));
    }
    out
}

/// The decoding kernel for weights `B`: [`rows4`] over a matrix whose rows (`row_len` bytes
/// each) start at `base`, rows `i`, `i + quarter`, `i + 2·quarter`, `i + 3·quarter` together
/// for every `i < quarter`, each result written to `out[t][row]`.
///
/// # Safety
/// AVX2, FMA, F16C and AVX-512 F/VL/VNNI/BW must be present; every row and every activation
/// row must have `nb` whole blocks of their formats behind them, every `prep[t]` `nb` blocks
/// [`prepare`]d from `a[t]`, and every `out[t]` room for `4 · quarter` results.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni,avx512bw")]
pub(super) unsafe fn quarters<B: Block32, const T: usize>(
    nb: usize,
    (base, row_len, quarter): (*const u8, usize, usize),
    a: [*const u8; T],
    prep: [*const Prepared; T],
    out: [*mut f32; T],
) {
    for i in 0..quarter {
        let rows = [i, i + quarter, i + 2 * quarter, i + 3 * quarter];
        let v = rows4::<B, T>(nb, rows.map(|r| base.add(r * row_len)), a, prep);
        for (row, v) in rows.iter().zip(v) {
            for (out, v) in out.iter().zip(v) {
                *out.add(*row) = v;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tile::tests::{check_kernel, wide_features, Kernel};
    use super::*;

    #[test]
    fn the_decoding_kernel_is_bit_identical_to_the_single_row_kernels() {
        if !wide_features() {
            return;
        }
        check_kernel::<4, 1>("decode", 0x0bad_cafe_1234_5678, &Decode);
        check_kernel::<4, 3>("decode", 0x0bad_cafe_8765_4321, &Decode);
        check_kernel::<4, 4>("decode", 0x0bad_cafe_1357_2468, &Decode);
    }

    struct Decode;

    impl<const T: usize> Kernel<4, T> for Decode {
        unsafe fn run<B: Block32>(
            &self,
            nb: usize,
            w: [*const u8; 4],
            a: [*const u8; T],
        ) -> [[f32; T]; 4] {
            let prep: Vec<Vec<Prepared>> = a
                .iter()
                .map(|&a| {
                    let mut p = vec![Prepared::default(); nb];
                    prepare::<B>(nb, std::slice::from_raw_parts(a, nb * B::ACT_SIZE), &mut p);
                    p
                })
                .collect();
            rows4::<B, T>(nb, w, a, std::array::from_fn(|t| prep[t].as_ptr()))
        }
    }
}
