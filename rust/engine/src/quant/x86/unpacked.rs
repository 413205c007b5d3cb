//! The AVX-512 prompt tile over unpacked super-blocks (`quant::unpacked`: IQ4_XS and the
//! codebook formats): 2 unpacked weight rows × 8 Q8_K rows. Per 64 values and token, three
//! instructions: the token's quants take the weights' signs (a masked subtraction; Q8_K quants
//! are never −128), `pmaddubsw` multiplies them with the magnitudes in pairs, `vpdpwssd`
//! scales the pairs by their 16 values' scale and adds them to exact i32 lanes.
//!
//! Bit identity: per (row, token) and super-block the lanes add up exactly to the portable
//! kernel's integer `Σ_h s_h · Σ v·y`, and the float operations are its own:
//! `sum += (d_w · d_a) · (total · K)`, super-block by super-block.
//!
//! Safety: every `unsafe fn` here requires AVX2, FMA, F16C and AVX-512 F/VL/BW/VNNI (checked by
//! the dispatcher) and `nb` whole blocks in every row.

use std::arch::x86_64::*;

use super::ktile::dpwssd;
use crate::quant::blocks::BlockQ8_K;
use crate::quant::kernels::{TileOut, MAX_TILE_TOKENS};
use crate::quant::kquants::q8k_d;
use crate::quant::unpacked::{Unpack, D, SCALES, SIGNS, UNPACKED_SIZE};

/// The 16 totals of `v` (lane `i` the exact sum of the lanes of `v[i]`), by a tree of
/// interleaving adds.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
unsafe fn totals(v: [__m512i; 16]) -> __m512i {
    // Per 128-bit lane, pairs of vectors, then fours: lane k of `q[g]` holds the lane-k sums
    // of vectors 4g..4g + 4.
    let pairs: [__m512i; 8] = std::array::from_fn(|i| {
        let (a, b) = (v[2 * i], v[2 * i + 1]);
        _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b))
    });
    let q: [__m512i; 4] = std::array::from_fn(|g| {
        let (a, b) = (pairs[2 * g], pairs[2 * g + 1]);
        _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b))
    });
    // Across 128-bit lanes: [l0 + l1, l2 + l3] of two groups, then of all four.
    let across = |a: __m512i, b: __m512i| {
        _mm512_add_epi32(
            _mm512_shuffle_i64x2::<0b10_00_10_00>(a, b),
            _mm512_shuffle_i64x2::<0b11_01_11_01>(a, b),
        )
    };
    across(across(q[0], q[1]), across(q[2], q[3]))
}

/// The 2 × 8 tile of `U` on unpacked rows.
///
/// # Safety
/// As `TileFn` on unpacked rows (AVX-512 F/VL/BW/VNNI): 2 rows, 8 tokens.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(super) unsafe fn tile<U: Unpack>(
    nb: usize,
    w: &[*const u8],
    a: &[*const u8],
    out: &mut TileOut,
) {
    type A = BlockQ8_K;
    const T: usize = MAX_TILE_TOKENS;
    let x: [*const u8; 2] = [w[0], w[1]];
    let y: [*const u8; T] = std::array::from_fn(|t| a[t]);
    let zero = _mm512_setzero_si512();
    let k = _mm512_set1_ps(U::K);
    // Lane 8r + t: row r, token t.
    let mut acc = _mm512_setzero_ps();
    for b in 0..nb {
        let xb = x.map(|p| p.add(UNPACKED_SIZE * b));
        let ya = y.map(|p| p.add(A::SIZE * b));
        let mut sums = [[zero; T]; 2];
        for j in 0..4 {
            let uq = xb.map(|p| _mm512_loadu_si512(p.add(64 * j).cast()));
            let neg = xb.map(|p| p.add(SIGNS + 8 * j).cast::<u64>().read_unaligned());
            let sc = xb.map(|p| _mm512_loadu_si512(p.add(SCALES + 64 * j).cast()));
            for t in 0..T {
                let yq = _mm512_loadu_si512(ya[t].add(A::QS + 64 * j).cast());
                for r in 0..2 {
                    let sy = _mm512_mask_sub_epi8(yq, u64::from_le(neg[r]), zero, yq);
                    sums[r][t] = dpwssd(sums[r][t], _mm512_maddubs_epi16(uq[r], sy), sc[r]);
                }
            }
        }
        let total = _mm512_cvtepi32_ps(totals(std::array::from_fn(|i| sums[i / T][i % T])));
        let dx = xb.map(|p| f32::from_le_bytes(p.add(D).cast::<[u8; 4]>().read()));
        let dy = ya.map(|p| q8k_d(std::slice::from_raw_parts(p, A::SIZE)));
        let dx: [f32; 16] = std::array::from_fn(|i| dx[i / T]);
        let dy: [f32; 16] = std::array::from_fn(|i| dy[i % T]);
        let dd = _mm512_mul_ps(_mm512_loadu_ps(dx.as_ptr()), _mm512_loadu_ps(dy.as_ptr()));
        // The portable kernel's `sum += (d_w · d_a) · (total · K)`, lane by lane.
        acc = _mm512_add_ps(acc, _mm512_mul_ps(dd, _mm512_mul_ps(total, k)));
    }
    let mut lanes = [0f32; 16];
    _mm512_storeu_ps(lanes.as_mut_ptr(), acc);
    for (r, o) in out.iter_mut().take(2).enumerate() {
        o.copy_from_slice(&lanes[T * r..T * (r + 1)]);
    }
}
