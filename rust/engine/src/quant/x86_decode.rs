//! The AVX-512 decoding kernel for the 32-element block formats (Q8_0, Q4_0, Q5_0, Q4_1): four
//! weight rows × one to four tokens (decoding one token, or one token for each of a few
//! sequences), on 512-bit registers that each hold two rows' 8 lanes.
//!
//! Per block the four rows' quants are unpacked once for all tokens; each token's quants are
//! broadcast to both halves of a register, so one `vpdpbusd`, one conversion and one FMA serve
//! two rows. What depends on the token alone — the offset correction (`−offset · Σ a` per
//! 4-byte group) and its scale (and Q8_1 sum) as f32 — is prepared once per call for every
//! group of rows ([`prepare`]); the four rows' f16 scales (and Q4_1 minima) are widened
//! together and multiplied by each token's scale (and sum) in one step.
//!
//! Each row keeps the arithmetic of the one-row kernel ([`super::vec_dot`]): 8 f32 lanes, one
//! FMA per block with `f32(d_w)·f32(d_a)`, exact integer lane sums of bytes `4j..4j+4`, one
//! horizontal sum in the same order, plus `Σ m·s` (summed block by block) for Q4_1, so every
//! result is bit-identical.

use std::arch::x86_64::*;

use super::blocks::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ8_0};
use super::x86::load;
use super::x86_tile::{layout, Q4_0, Q4_1, Q5_0, Q8_0};

/// How far ahead of the block being read each row is prefetched, in bytes. Measured on a Zen 4
/// AVX-512 machine (SmolLM2 and Gemma 3 decoding, 1 and 2 threads): 192 and 384 bytes gain
/// 0-25%, 1024 loses 5%, and 512 loses 15% (a cliff: do not raise it without measuring).
const PREFETCH: usize = 384;

/// The first four bytes at `p` as a little-endian u32 (a block's scale, or scale and minimum).
#[inline]
unsafe fn word(p: *const u8) -> i32 {
    i32::from_le(p.cast::<i32>().read_unaligned())
}

/// The low and high nibbles of the 16 bytes at `p0` (low half) and at `p1` (high half): each
/// half holds one row's 32 quants in block order.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni,avx512bw")]
unsafe fn nibbles2(p0: *const u8, p1: *const u8) -> __m512i {
    // [row 0's 16 bytes | row 1's 16 bytes] and the same shifted: 128-bit lanes
    // [r0 low, r1 low, r0 high, r1 high], reordered to [r0 low, r0 high, r1 low, r1 high].
    let both = _mm256_inserti128_si256::<1>(
        _mm256_castsi128_si256(_mm_loadu_si128(p0.cast())),
        _mm_loadu_si128(p1.cast()),
    );
    let wide = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(both), _mm256_srli_epi16(both, 4));
    let ordered = _mm512_shuffle_i64x2::<0b11_01_10_00>(wide, wide);
    _mm512_and_si512(ordered, _mm512_set1_epi8(0x0f))
}

/// The 32 quants of two rows' blocks at `p0` (low half) and `p1` (high half) for weight code
/// `KIND`, as unsigned bytes (Q8_0 flipped by 128).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni,avx512bw")]
unsafe fn quants<const KIND: u8>(p0: *const u8, p1: *const u8) -> __m512i {
    match KIND {
        Q8_0 => {
            let q = _mm512_inserti64x4::<1>(
                _mm512_castsi256_si512(load(p0.add(BlockQ8_0::QS))),
                load(p1.add(BlockQ8_0::QS)),
            );
            _mm512_xor_si512(q, _mm512_set1_epi8(-128))
        }
        Q4_0 => nibbles2(p0.add(BlockQ4_0::QS), p1.add(BlockQ4_0::QS)),
        Q5_0 => {
            let h0 = p0.add(BlockQ5_0::QH).cast::<u32>().read_unaligned();
            let h1 = p1.add(BlockQ5_0::QH).cast::<u32>().read_unaligned();
            let k = _cvtu64_mask64(u64::from(u32::from_le(h0)) | u64::from(u32::from_le(h1)) << 32);
            let low = nibbles2(p0.add(BlockQ5_0::QS), p1.add(BlockQ5_0::QS));
            _mm512_mask_add_epi8(low, k, low, _mm512_set1_epi8(16))
        }
        _ => nibbles2(p0.add(BlockQ4_1::QS), p1.add(BlockQ4_1::QS)),
    }
}

/// What the kernel needs of one activation block besides its quants: the offset correction
/// of each 4-byte group (zero for Q4_1) and `[d, s, d, s]` (`s`, Q8_1's sum, zero for the
/// others), as f32.
#[repr(C, align(64))]
#[derive(Clone, Copy, Default)]
pub(super) struct Prepared {
    corr: [i32; 8],
    ds: [f32; 4],
}

/// [`Prepared`] blocks for the `nb` blocks of the activation row `a` (weight code `kind`),
/// written to `out`.
pub(super) fn prepare(kind: u8, nb: usize, a: &[u8], out: &mut [Prepared]) {
    let (_, asize, aq) = layout(kind);
    let shift = match kind {
        Q8_0 => Some(7),
        Q4_0 => Some(3),
        Q5_0 => Some(4),
        _ => None,
    };
    for (block, p) in a.chunks_exact(asize).zip(out).take(nb) {
        for (c, four) in p.corr.iter_mut().zip(block[aq..aq + 32].chunks_exact(4)) {
            let sum: i32 = four.iter().map(|&v| i32::from(v as i8)).sum();
            *c = shift.map_or(0, |s| -(sum << s));
        }
        let half_at = |i: usize| half::f16::from_le_bytes([block[i], block[i + 1]]).to_f32();
        let (d, s) = (half_at(0), if shift.is_none() { half_at(2) } else { 0.0 });
        p.ds = [d, s, d, s];
    }
}

thread_local! {
    static PREPARED: std::cell::RefCell<Vec<Prepared>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Run `f` with the `nb` blocks of each of the activation rows `acts` [`prepare`]d (weight
/// code `kind`), in a buffer kept per thread.
pub(super) fn with_prepared<const T: usize>(
    kind: u8,
    nb: usize,
    acts: [&[u8]; T],
    f: impl FnOnce([*const Prepared; T]),
) {
    let mut buf = PREPARED.with_borrow_mut(std::mem::take);
    // Every block used is written by `prepare`: the buffer only grows, never cleared.
    if buf.len() < nb * T {
        buf.resize(nb * T, Prepared::default());
    }
    for (a, out) in acts.iter().zip(buf.chunks_exact_mut(nb.max(1))) {
        prepare(kind, nb, a, out);
    }
    f(std::array::from_fn(|t| buf[nb * t..].as_ptr()));
    PREPARED.set(buf);
}

/// Rows `w` (four, `nb` blocks each) · the `T` activation rows `a` (their blocks prepared in
/// `prep`) for weight code `KIND`: `out[r][t] = w[r] · a[t]`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni,avx512bw")]
unsafe fn rows4<const KIND: u8, const T: usize>(
    nb: usize,
    w: [*const u8; 4],
    a: [*const u8; T],
    prep: [*const Prepared; T],
) -> [[f32; T]; 4] {
    let (wsize, asize, aq) = layout(KIND);
    // Lanes 0..8 take product lane 2i (row 2i's `d_w·d_a`), lanes 8..16 lane 2i + 2.
    let index = |i: i32| {
        let (x, y) = (4 * i, 4 * i + 2);
        _mm512_setr_epi32(x, x, x, x, x, x, x, x, y, y, y, y, y, y, y, y)
    };
    let (index01, index23) = (index(0), index(1));
    let mut acc = [[_mm512_setzero_ps(); 2]; T];
    // Per token, lane 2r: unused; lane 2r + 1: row r's Σ m·s (Q4_1).
    let mut summs = [_mm256_setzero_ps(); T];
    // Without a minimum the upper half is quants: cleared (no stray subnormals or NaNs).
    let keep = if KIND == Q4_1 { -1 } else { 0xffff };
    for b in 0..nb {
        // [d_w, m_w] of the four rows (f16 → f32).
        let p: [*const u8; 4] = std::array::from_fn(|r| w[r].add(wsize * b));
        let halves = _mm_and_si128(
            _mm_setr_epi32(word(p[0]), word(p[1]), word(p[2]), word(p[3])),
            _mm_set1_epi32(keep),
        );
        let dm = _mm256_cvtph_ps(halves);
        // Without a minimum, [d_w of rows 0, 1 (8 lanes each)] and of rows 2, 3 for every token.
        let dw = if KIND == Q4_1 {
            [_mm512_setzero_ps(); 2]
        } else {
            [index01, index23].map(|i| _mm512_permutexvar_ps(i, _mm512_castps256_ps512(dm)))
        };
        for &p in &p {
            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH).cast());
        }
        let q = [quants::<KIND>(p[0], p[1]), quants::<KIND>(p[2], p[3])];
        for t in 0..T {
            let az = _mm512_broadcast_i64x4(load(a[t].add(asize * b + aq)));
            let pb = &*prep[t].add(b);
            let start = if KIND == Q4_1 {
                _mm512_setzero_si512()
            } else {
                _mm512_broadcast_i64x4(_mm256_load_si256(pb.corr.as_ptr().cast()))
            };
            // Each pair's [d_w·d_a of its first row (8 lanes), of its second]: with a minimum,
            // the rows' [d_w, m_w] times the token's [d_a, s_a] spread out (the products with
            // s_a are summed too), without one the shared [d_w] times d_a (the same products).
            let d: [__m512; 2] = if KIND == Q4_1 {
                let ds = _mm256_broadcast_ps(&*pb.ds.as_ptr().cast::<__m128>());
                let prod = _mm256_mul_ps(dm, ds);
                summs[t] = _mm256_add_ps(summs[t], prod);
                [index01, index23].map(|i| _mm512_permutexvar_ps(i, _mm512_castps256_ps512(prod)))
            } else {
                dw.map(|dw| _mm512_mul_ps(dw, _mm512_set1_ps(pb.ds[0])))
            };
            for (pair, d) in d.into_iter().enumerate() {
                let lanes = _mm512_dpbusd_epi32(start, q[pair], az);
                acc[t][pair] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(lanes), acc[t][pair]);
            }
        }
    }
    let mut out = [[0f32; T]; 4];
    for t in 0..T {
        let sums = lane_sums(acc[t]);
        let sums = if KIND == Q4_1 {
            // Row r's Σ m·s (lane 2r + 1 of `summs`) added to its sum (lane 4r).
            let at = _mm512_setr_epi32(1, 0, 0, 0, 3, 0, 0, 0, 5, 0, 0, 0, 7, 0, 0, 0);
            _mm512_add_ps(
                sums,
                _mm512_permutexvar_ps(at, _mm512_castps256_ps512(summs[t])),
            )
        } else {
            sums
        };
        let mut lanes = [0f32; 16];
        _mm512_storeu_ps(lanes.as_mut_ptr(), sums);
        for (r, row) in out.iter_mut().enumerate() {
            row[t] = lanes[4 * r];
        }
    }
    out
}

/// The four rows' sums of one token's accumulators `acc` (rows 0, 1 in `acc[0]`'s low and
/// high 8 lanes, rows 2, 3 in `acc[1]`'s), row r's in lane 4r: each is
/// [`super::x86::hsum_ps`] of its 8 lanes, `(s0 + s2) + (s1 + s3)` with `s_i = v_i + v_{i+4}`,
/// all four rows at once.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni,avx512bw")]
unsafe fn lane_sums(acc: [__m512; 2]) -> __m512 {
    // s_i in the 128-bit block of each row's first four lanes (blocks 0 and 2).
    let s = acc.map(|v| _mm512_add_ps(v, _mm512_shuffle_f32x4::<0b10_11_00_01>(v, v)));
    // [row 0's s, row 1's, row 2's, row 3's].
    let s = _mm512_shuffle_f32x4::<0b10_00_10_00>(s[0], s[1]);
    // Per block: [s0 + s2, s1 + s3, ..], then lane 0 = (s0 + s2) + (s1 + s3).
    let u = _mm512_add_ps(s, _mm512_permute_ps::<0b01_00_11_10>(s));
    _mm512_add_ps(u, _mm512_permute_ps::<0b10_11_00_01>(u))
}

/// [`rows4`] for weight code `kind`.
///
/// # Safety
/// AVX2, FMA, F16C and AVX-512 F/VL/VNNI/BW must be present; every row pointer and every
/// activation pointer must have `nb` whole blocks of their formats behind them, and every
/// `prep[t]` `nb` blocks [`prepare`]d from `a[t]`.
#[inline]
pub(super) unsafe fn rows4_for<const T: usize>(
    kind: u8,
    nb: usize,
    w: [*const u8; 4],
    a: [*const u8; T],
    prep: [*const Prepared; T],
) -> [[f32; T]; 4] {
    match kind {
        Q8_0 => rows4::<Q8_0, T>(nb, w, a, prep),
        Q4_0 => rows4::<Q4_0, T>(nb, w, a, prep),
        Q5_0 => rows4::<Q5_0, T>(nb, w, a, prep),
        _ => rows4::<Q4_1, T>(nb, w, a, prep),
    }
}

#[cfg(test)]
mod tests {
    use super::super::x86_tile::tests::{check_kernel, wide_features};
    use super::*;

    #[test]
    fn the_decoding_kernel_is_bit_identical_to_the_single_row_kernels() {
        if !wide_features() {
            return;
        }
        check_kernel::<4, 1>("decode", 0x0bad_cafe_1234_5678, run::<1>);
        check_kernel::<4, 3>("decode", 0x0bad_cafe_8765_4321, run::<3>);
        check_kernel::<4, 4>("decode", 0x0bad_cafe_1357_2468, run::<4>);
    }

    fn run<const T: usize>(
        kind: u8,
        nb: usize,
        w: [*const u8; 4],
        a: [*const u8; T],
    ) -> [[f32; T]; 4] {
        let asize = layout(kind).1;
        let prep: Vec<Vec<Prepared>> = a
            .iter()
            .map(|&a| {
                let mut p = vec![Prepared::default(); nb];
                // SAFETY: the test's activation rows hold nb blocks.
                prepare(
                    kind,
                    nb,
                    unsafe { std::slice::from_raw_parts(a, nb * asize) },
                    &mut p,
                );
                p
            })
            .collect();
        // SAFETY: the features were detected; the rows hold nb blocks, prepared above.
        unsafe { rows4_for(kind, nb, w, a, std::array::from_fn(|t| prep[t].as_ptr())) }
    }
}
