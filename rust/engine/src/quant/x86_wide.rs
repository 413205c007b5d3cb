//! The AVX-512 prompt-processing tile for the 32-element block formats (Q8_0, Q4_0, Q5_0, Q4_1):
//! 4 weight rows × 8 tokens per call, on 512-bit registers that each hold two tokens' 8 lanes.
//!
//! A matmul first packs its quantized activations ([`pack`]), 8 tokens at a time: per block,
//! the quants of each token pair side by side (one 64-byte line, so one `vpdpbusd` serves two
//! tokens against the weight block broadcast to both halves), each pair's offset corrections
//! (`−offset · Σ` of each 4-byte group: the weight codes are used unsigned, so every product
//! carries `offset · a` too much; computed once per matmul instead of once per group of rows)
//! and the 8 tokens' scales (and Q8_1 sums). The inner (row, pair) step is then one `vpdpbusd`
//! starting from the loaded corrections, one conversion, one multiply for the scale products
//! and one FMA.
//!
//! Each (row, token) keeps the arithmetic of the one-row kernel ([`super::vec_dot`]): 8 f32
//! lanes, one FMA per block with `f32(d_w)·f32(d_a)`, the integer lane sums of bytes
//! `4j..4j+4` (exact), one horizontal sum in the same order, plus `Σ m·s` for Q4_1 — so every
//! result is bit-identical.

use std::arch::x86_64::*;

use super::blocks::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ8_0};
use super::x86::{hsum_ps, load, nibbles, upper};
use super::x86_tile::{halves, layout, Q4_0, Q4_1, Q5_0, Q8_0};
use super::PackLine;

/// Tokens per wide tile.
pub(super) const TOKENS: usize = 8;

/// Packed lines per block of 8 tokens: 4 pairs' quants, 4 pairs' corrections, the scales.
pub(super) const LINES: usize = 9;

/// The weight offset of weight code `kind` as a shift (`offset = 1 << shift`), or `None` for
/// Q4_1 (no offset: its minimum is applied through `Σ m·s`). Q8_0's codes are flipped to
/// unsigned (`+128`).
const fn shift(kind: u8) -> Option<u32> {
    match kind {
        Q8_0 => Some(7),
        Q4_0 => Some(3),
        Q5_0 => Some(4),
        _ => None,
    }
}

/// Pack 8 quantized activation rows of `nb` blocks (in the activation type of weight code
/// `kind`) into `out` (`LINES × nb` lines): per block, lines `0..4` the quants of tokens
/// `2p` (low half) and `2p + 1` (high half), lines `4..8` their corrections as i32 lanes (zero
/// for Q4_1), line 8 the tokens' `d` (f32 lanes 0..8) and Q8_1 `s` (lanes 8..16).
pub(super) fn pack(kind: u8, nb: usize, acts: [&[u8]; TOKENS], out: &mut [PackLine]) {
    let (_, asize, aq) = layout(kind);
    for (b, lines) in out.chunks_exact_mut(LINES).take(nb).enumerate() {
        let mut scales = [0f32; 16];
        for (t, act) in acts.iter().enumerate() {
            let block = &act[asize * b..asize * (b + 1)];
            let q = &block[aq..aq + 32];
            let (pair, half) = (t / 2, 32 * (t % 2));
            lines[pair].0[half..half + 32].copy_from_slice(q);
            let corr = &mut lines[4 + pair].0[half..half + 32];
            for (lane, four) in corr.chunks_exact_mut(4).zip(q.chunks_exact(4)) {
                let sum: i32 = four.iter().map(|&v| i32::from(v as i8)).sum();
                let c = shift(kind).map_or(0, |s| -(sum << s));
                lane.copy_from_slice(&c.to_le_bytes());
            }
            let half_at = |i: usize| half::f16::from_le_bytes([block[i], block[i + 1]]).to_f32();
            scales[t] = half_at(0);
            if kind == Q4_1 {
                scales[8 + t] = half_at(2);
            }
        }
        for (dst, v) in lines[8].0.chunks_exact_mut(4).zip(scales) {
            dst.copy_from_slice(&v.to_le_bytes());
        }
    }
}

/// 4 weight rows × 8 packed tokens for weight code `KIND`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni,avx512bw")]
unsafe fn tile<const KIND: u8>(
    nb: usize,
    w: [*const u8; 4],
    packed: *const PackLine,
) -> [[f32; TOKENS]; 4] {
    let (wsize, _, _) = layout(KIND);
    // Lanes 0..8 take token 2p's scale, lanes 8..16 token 2p + 1's.
    let index: [__m512i; 4] = std::array::from_fn(|p| {
        let (a, b) = (2 * p as i32, 2 * p as i32 + 1);
        _mm512_setr_epi32(a, a, a, a, a, a, a, a, b, b, b, b, b, b, b, b)
    });
    let mut acc = [[_mm512_setzero_ps(); 4]; 4];
    let mut summs = [_mm256_setzero_ps(); 4];
    for b in 0..nb {
        let lines = packed.add(LINES * b);
        let scales = lines.add(8).cast::<f32>();
        let ad8 = _mm512_castps256_ps512(_mm256_load_ps(scales));
        let asum = _mm256_load_ps(scales.add(8));
        let ad: [__m512; 4] = std::array::from_fn(|p| _mm512_permutexvar_ps(index[p], ad8));
        for r in 0..4 {
            let p = w[r].add(wsize * b);
            let q = match KIND {
                Q8_0 => _mm256_xor_si256(load(p.add(BlockQ8_0::QS)), _mm256_set1_epi8(-128)),
                Q4_0 => nibbles(p.add(BlockQ4_0::QS)),
                Q5_0 => {
                    let high = p.add(BlockQ5_0::QH).cast::<u32>().read_unaligned();
                    let k = _cvtu32_mask32(u32::from_le(high));
                    let low = nibbles(p.add(BlockQ5_0::QS));
                    _mm256_mask_add_epi8(low, k, low, _mm256_set1_epi8(16))
                }
                _ => nibbles(p.add(BlockQ4_1::QS)),
            };
            let q = _mm512_broadcast_i64x4(q);
            let dm = halves(p);
            let dw = _mm512_broadcastss_ps(dm);
            if KIND == Q4_1 {
                let m = _mm256_broadcastss_ps(_mm_movehdup_ps(dm));
                summs[r] = _mm256_add_ps(summs[r], _mm256_mul_ps(m, asum));
            }
            for (pair, adp) in ad.iter().enumerate() {
                let start = if KIND == Q4_1 {
                    _mm512_setzero_si512()
                } else {
                    _mm512_load_si512(lines.add(4 + pair).cast())
                };
                let lanes =
                    _mm512_dpbusd_epi32(start, q, _mm512_load_si512(lines.add(pair).cast()));
                let d = _mm512_mul_ps(dw, *adp);
                acc[r][pair] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(lanes), acc[r][pair]);
            }
        }
    }
    let mut out = [[0f32; TOKENS]; 4];
    for (r, pairs) in acc.iter().enumerate() {
        let mut mins = [0f32; 8];
        _mm256_storeu_ps(mins.as_mut_ptr(), summs[r]);
        for (pair, &v) in pairs.iter().enumerate() {
            let (t0, t1) = (2 * pair, 2 * pair + 1);
            out[r][t0] = hsum_ps(_mm512_castps512_ps256(v));
            out[r][t1] = hsum_ps(upper(v));
            if KIND == Q4_1 {
                out[r][t0] += mins[t0];
                out[r][t1] += mins[t1];
            }
        }
    }
    out
}

/// [`tile`] for weight code `kind`.
///
/// # Safety
/// AVX2, FMA, F16C and AVX-512 F/VL/VNNI/BW must be present; every row pointer must have `nb`
/// whole blocks of its format behind it and `packed` `LINES × nb` lines written by [`pack`]
/// for the same `kind`.
#[inline]
pub(super) unsafe fn tile_for(
    kind: u8,
    nb: usize,
    w: [*const u8; 4],
    packed: *const PackLine,
) -> [[f32; TOKENS]; 4] {
    match kind {
        Q8_0 => tile::<Q8_0>(nb, w, packed),
        Q4_0 => tile::<Q4_0>(nb, w, packed),
        Q5_0 => tile::<Q5_0>(nb, w, packed),
        _ => tile::<Q4_1>(nb, w, packed),
    }
}

#[cfg(test)]
mod tests {
    use super::super::x86_tile::tests::{check_kernel, wide_features};
    use super::*;

    #[test]
    fn the_wide_tile_is_bit_identical_to_the_single_row_kernels() {
        if !wide_features() {
            return;
        }
        check_kernel::<4, TOKENS>("wide", 0x1234_5678_9abc_def1, |kind, nb, w, a| {
            let (_, asize, _) = layout(kind);
            // SAFETY: the activation rows hold nb blocks.
            let acts = a.map(|p| unsafe { std::slice::from_raw_parts(p, asize * nb) });
            let mut packed = vec![PackLine([0; 64]); LINES * nb];
            pack(kind, nb, acts, &mut packed);
            // SAFETY: the features were detected; the rows hold nb blocks, `packed` their pack.
            unsafe { tile_for(kind, nb, w, packed.as_ptr()) }
        });
    }
}
