//! The attention loop's AVX-512 kernels: the same arithmetic, in the same order, as
//! [`ops::dot`] and [`ops::weighted_sum`], with wider registers.
//!
//! Scores: a register tile of four queries × four keys. A 16-lane register holds the 8 partial
//! sums of two queries against one key (the key's 8 elements broadcast to both halves), so
//! every key load serves four queries. The 16 scores' lanes are then transposed and summed
//! together, lane 0 to lane 7 in order, as [`ops::dot`] sums them one score at a time.
//! Weighted sums: every output element is its own ordered sum, so 16-lane registers compute
//! exactly what 8-lane ones (or scalars) do.

use std::arch::x86_64::*;
use std::ops::Range;

use half::f16;
use half::slice::HalfFloatSliceExt;

use super::{joint_weighted_sums, ops, Avx2, Job, Kernels, TILE};

/// AVX-512F kernels (F16C rounding as in [`Avx2`]).
pub(super) struct Avx512;

/// Partial-sum lanes of [`ops::dot`].
const LANES: usize = 8;

impl Kernels for Avx512 {
    /// The tile's queries, interleaved: per pair of queries and per 8-element chunk, the two
    /// queries' chunks side by side (one 16-lane load).
    type Scratch = Vec<f32>;

    #[inline(always)]
    fn round(x: &mut [f32]) {
        Avx2::round(x)
    }

    #[inline(always)]
    fn widen(src: &[f16], dst: &mut [f32]) {
        assert_eq!(src.len(), dst.len());
        let main = src.len() - src.len() % 16;
        for (s, d) in src[..main].chunks_exact(16).zip(dst.chunks_exact_mut(16)) {
            // SAFETY: 16 f16 (32 bytes) are read and 16 f32 written, inside the chunks;
            // this build runs only where AVX-512F was detected (`Job::dispatch`).
            unsafe {
                let h = _mm256_loadu_si256(s.as_ptr().cast());
                _mm512_storeu_ps(d.as_mut_ptr(), _mm512_cvtph_ps(h));
            }
        }
        if main < src.len() {
            src[main..].convert_to_f32_slice(&mut dst[main..]);
        }
    }

    #[inline(always)]
    fn scores(q: &[f32], keys: &[f32], hd: usize, out: &mut [f32], qi: &mut Vec<f32>) {
        let (nq, nk) = (q.len() / hd, keys.len() / hd);
        assert!((1..=TILE).contains(&nq) && out.len() == nq * nk && keys.len() == nk * hd);
        let main = hd - hd % LANES;
        let chunks = main / LANES;
        // Missing queries of a partial tile repeat the last one (their scores are dropped).
        let query = |i: usize| &q[i.min(nq - 1) * hd..][..hd];
        qi.clear();
        for pair in 0..TILE / 2 {
            for c in 0..chunks {
                for i in [2 * pair, 2 * pair + 1] {
                    qi.extend_from_slice(&query(i)[c * LANES..(c + 1) * LANES]);
                }
            }
        }
        // What `Iterator::sum` starts from.
        let zero: f32 = std::iter::empty::<f32>().sum();
        // sums[4 * QUARTER[i] + k]: query i with key j + k (accumulator e % 8, half e / 8).
        const QUARTER: [usize; TILE] = [0, 2, 1, 3];
        // The tails (`hd % 8` elements) of `ops::dot`, summed as it sums them.
        let mut tails = [zero; 16];
        let mut j = 0;
        while j + 4 <= nk {
            if main < hd {
                for (i, &quarter) in QUARTER.iter().enumerate() {
                    for k in 0..4 {
                        let key = &keys[(j + k) * hd..(j + k + 1) * hd];
                        let qt = &query(i)[main..];
                        tails[4 * quarter + k] =
                            qt.iter().zip(&key[main..]).map(|(x, y)| x * y).sum();
                    }
                }
            }
            let mut sums = [0f32; 16];
            // SAFETY: only reached from `run_avx512` (AVX-512F present). Query loads read 16
            // elements at `(pair * chunks + c) * 16 < qi.len()`; key loads read 8 elements of
            // row `j + k < nk` at `c * 8 < main <= hd`.
            unsafe {
                // acc[pair * 4 + k]: queries 2·pair (low half) and 2·pair + 1 with key j + k.
                let mut acc = [_mm512_setzero_ps(); 8];
                for c in 0..chunks {
                    let qa = _mm512_loadu_ps(qi.as_ptr().add(c * 16));
                    let qb = _mm512_loadu_ps(qi.as_ptr().add((chunks + c) * 16));
                    for k in 0..4 {
                        let kp = keys.as_ptr().add((j + k) * hd + c * LANES);
                        let kv = _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_loadu_pd(
                            kp.cast::<f64>(),
                        )));
                        acc[k] = _mm512_add_ps(acc[k], _mm512_mul_ps(qa, kv));
                        acc[4 + k] = _mm512_add_ps(acc[4 + k], _mm512_mul_ps(qb, kv));
                    }
                }
                let with_tails =
                    _mm512_add_ps(lane_sums(acc, zero), _mm512_loadu_ps(tails.as_ptr()));
                _mm512_storeu_ps(sums.as_mut_ptr(), with_tails);
            }
            for (i, &quarter) in QUARTER.iter().enumerate().take(nq) {
                out[i * nk + j..i * nk + j + 4]
                    .copy_from_slice(&sums[4 * quarter..4 * quarter + 4]);
            }
            j += 4;
        }
        for j in j..nk {
            for i in 0..nq {
                out[i * nk + j] = ops::dot(query(i), &keys[j * hd..(j + 1) * hd]);
            }
        }
    }

    #[inline(always)]
    fn weighted_sum(p: &[f32], rows: &[f32], out: &mut [f32]) {
        let width = out.len();
        assert_eq!(rows.len(), p.len() * width);
        let mut start = 0;
        // SAFETY: only reached from `run_avx512` (AVX-512F present); every block ends at
        // most at `width` (see `weighted_block`).
        unsafe {
            while width - start >= 128 {
                weighted_block::<8>(p, rows, start, out);
                start += 128;
            }
            let blocks = (width - start) / 16;
            for n in [4, 2, 1] {
                if blocks & n != 0 {
                    match n {
                        4 => weighted_block::<4>(p, rows, start, out),
                        2 => weighted_block::<2>(p, rows, start, out),
                        _ => weighted_block::<1>(p, rows, start, out),
                    }
                    start += 16 * n;
                }
            }
        }
        let dst = &mut out[start..];
        dst.fill(0.0);
        for (j, &pj) in p.iter().enumerate() {
            for (a, b) in dst
                .iter_mut()
                .zip(&rows[j * width + start..(j + 1) * width])
            {
                *a += pj * b;
            }
        }
    }

    #[inline(always)]
    fn weighted_sums(p: &[f32], rows: &[f32], ranges: &[Range<usize>], outs: &mut [&mut [f32]]) {
        let width = outs.first().map_or(0, |o| o.len());
        joint_weighted_sums::<Self>(p, rows, ranges, outs, |outs| {
            // SAFETY: only reached from `run_avx512` (AVX-512F present); `outs` holds 2 to
            // `TILE` slices of `width` elements, one per row of `p` (`joint_weighted_sums`).
            unsafe {
                match outs.len() {
                    4 => joint_blocks::<4>(p, rows, width, outs),
                    3 => joint_blocks::<3>(p, rows, width, outs),
                    _ => joint_blocks::<2>(p, rows, width, outs),
                }
            }
        })
    }
}

/// The blocks of [`joint_weighted_sums`] for `Q` queries: `outs[i][..at]` in 64- and 16-lane
/// blocks (see [`joint_block`]); returns `at`.
///
/// Compiled with AVX-512F itself rather than inlined, as `joint_blocks_avx2` (called from a
/// closure).
///
/// # Safety
/// As [`joint_block`], with `outs` of `width` elements.
#[target_feature(enable = "avx2,f16c,avx512f")]
unsafe fn joint_blocks<const Q: usize>(
    p: &[f32],
    rows: &[f32],
    width: usize,
    outs: &mut [&mut [f32]],
) -> usize {
    let mut at = 0;
    while width - at >= 64 {
        joint_block::<Q, 4>(p, rows, at, outs);
        at += 64;
    }
    while width - at >= 16 {
        joint_block::<Q, 1>(p, rows, at, outs);
        at += 16;
    }
    at
}

/// `outs[i][at..at + 16 N]` of the weighted sums of `Q` queries: row `i` of `p` (zero outside
/// its range) times all `rows`, in `Q × N` 16-lane accumulators (each value row loaded once).
///
/// # Safety
/// AVX-512F must be present; `outs` has `Q` slices of `width` elements, `at + 16 N <= width`,
/// `rows.len() == n_keys * width` and `p.len() == Q * n_keys`.
#[inline(always)]
unsafe fn joint_block<const Q: usize, const N: usize>(
    p: &[f32],
    rows: &[f32],
    at: usize,
    outs: &mut [&mut [f32]],
) {
    let nk = p.len() / Q;
    let width = rows.len() / nk;
    debug_assert!(outs.len() == Q && at + 16 * N <= width && outs[0].len() == width);
    let mut acc = [[_mm512_setzero_ps(); N]; Q];
    for j in 0..nk {
        let v = rows.as_ptr().add(j * width + at);
        let vs: [__m512; N] = std::array::from_fn(|k| _mm512_loadu_ps(v.add(16 * k)));
        for (i, acc) in acc.iter_mut().enumerate() {
            let pv = _mm512_set1_ps(*p.get_unchecked(i * nk + j));
            for (a, v) in acc.iter_mut().zip(&vs) {
                *a = _mm512_add_ps(*a, _mm512_mul_ps(pv, *v));
            }
        }
    }
    for (out, acc) in outs.iter_mut().zip(&acc) {
        for (k, a) in acc.iter().enumerate() {
            _mm512_storeu_ps(out.as_mut_ptr().add(at + 16 * k), *a);
        }
    }
}

/// The 16 scores of a tile's accumulators (`acc[m]`: two rows of 8 lanes), each its lanes
/// summed in order starting from `zero`: element `e` is accumulator `e % 8`'s low (`e < 8`)
/// or high half. An 8×8 transpose within each half, then one vector add per lane.
#[inline(always)]
unsafe fn lane_sums(z: [__m512; 8], zero: f32) -> __m512 {
    let t = [
        _mm512_unpacklo_ps(z[0], z[1]),
        _mm512_unpackhi_ps(z[0], z[1]),
        _mm512_unpacklo_ps(z[2], z[3]),
        _mm512_unpackhi_ps(z[2], z[3]),
        _mm512_unpacklo_ps(z[4], z[5]),
        _mm512_unpackhi_ps(z[4], z[5]),
        _mm512_unpacklo_ps(z[6], z[7]),
        _mm512_unpackhi_ps(z[6], z[7]),
    ];
    // u[l] (l < 4), per 128-bit lane: rows 0-3 (u[l]) or 4-7 (u[l + 4]) of lane l (low
    // 128 bits of each half) and of lane l + 4 (high 128 bits).
    let u = [
        _mm512_shuffle_ps::<0x44>(t[0], t[2]),
        _mm512_shuffle_ps::<0xEE>(t[0], t[2]),
        _mm512_shuffle_ps::<0x44>(t[1], t[3]),
        _mm512_shuffle_ps::<0xEE>(t[1], t[3]),
        _mm512_shuffle_ps::<0x44>(t[4], t[6]),
        _mm512_shuffle_ps::<0xEE>(t[4], t[6]),
        _mm512_shuffle_ps::<0x44>(t[5], t[7]),
        _mm512_shuffle_ps::<0xEE>(t[5], t[7]),
    ];
    let lo = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
    let hi = _mm512_setr_epi32(4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
    let mut sum = _mm512_set1_ps(zero);
    for l in 0..LANES {
        let idx = if l < 4 { lo } else { hi };
        let col = _mm512_permutex2var_ps(u[l % 4], idx, u[l % 4 + 4]);
        sum = _mm512_add_ps(sum, col);
    }
    sum
}

/// `out[start..start + 16 N]` of [`ops::weighted_sum`], in `N` 16-lane accumulators.
///
/// # Safety
/// AVX-512F must be present; `start + 16 N <= out.len()` and `rows.len() == p.len() *
/// out.len()`.
#[inline(always)]
unsafe fn weighted_block<const N: usize>(p: &[f32], rows: &[f32], start: usize, out: &mut [f32]) {
    let width = out.len();
    debug_assert!(start + 16 * N <= width && rows.len() == p.len() * width);
    let mut acc = [_mm512_setzero_ps(); N];
    for (j, &pj) in p.iter().enumerate() {
        let pv = _mm512_set1_ps(pj);
        let v = rows.as_ptr().add(j * width + start);
        for (k, a) in acc.iter_mut().enumerate() {
            *a = _mm512_add_ps(*a, _mm512_mul_ps(pv, _mm512_loadu_ps(v.add(16 * k))));
        }
    }
    for (k, a) in acc.iter().enumerate() {
        _mm512_storeu_ps(out.as_mut_ptr().add(start + 16 * k), *a);
    }
}

impl Job<'_> {
    /// [`Job::run`] compiled for AVX-512F (with AVX2 and F16C).
    ///
    /// # Safety
    /// The CPU must have AVX-512F, AVX2 and F16C.
    #[target_feature(enable = "avx2,f16c,avx512f")]
    pub(super) unsafe fn run_avx512(&self, range: Range<usize>) {
        self.run::<Avx512>(range)
    }
}
