//! The attention loop's AVX2/F16C kernels: the arithmetic and order of [`ops::dot`] and
//! [`ops::weighted_sum`] with 8-lane registers, and hardware f16 rounding.

use std::arch::x86_64::*;
use std::ops::Range;

use super::{joint_weighted_sums, ops, Kernels, TILE};

/// F16C rounding (round to nearest even, like `half`) and AVX score tiles with the lane layout
/// of [`ops::dot`] (8 partial sums, multiply then add, summed in lane order).
pub(super) struct Avx2;

impl Kernels for Avx2 {
    type Scratch = ();

    #[inline(always)]
    fn weighted_sums(p: &[f32], rows: &[f32], ranges: &[Range<usize>], outs: &mut [&mut [f32]]) {
        let width = outs.first().map_or(0, |o| o.len());
        joint_weighted_sums::<Self>(p, rows, ranges, outs, |outs| {
            // SAFETY: only reached from `run_avx2`/`run_avx512` (AVX2 present); `outs` holds 2
            // to `TILE` slices of `width` elements, one per row of `p` (`joint_weighted_sums`).
            unsafe {
                match outs.len() {
                    4 => joint_blocks_avx2::<4>(p, rows, width, outs),
                    3 => joint_blocks_avx2::<3>(p, rows, width, outs),
                    _ => joint_blocks_avx2::<2>(p, rows, width, outs),
                }
            }
        })
    }

    /// Two queries × four keys per register tile (each key load serves both queries), the
    /// 8 scores' lanes summed together after an 8×8 transpose, in lane order.
    #[inline(always)]
    fn scores(q: &[f32], keys: &[f32], hd: usize, out: &mut [f32], _: &mut ()) {
        let (nq, nk) = (q.len() / hd, keys.len() / hd);
        assert!((1..=TILE).contains(&nq) && out.len() == nq * nk && keys.len() == nk * hd);
        let main = hd - hd % 8;
        // What `Iterator::sum` starts from.
        let zero: f32 = std::iter::empty::<f32>().sum();
        for pair in (0..nq).step_by(2) {
            // A lone last query is paired with itself (its twin's scores are dropped).
            let qs = [pair, (pair + 1).min(nq - 1)].map(|i| &q[i * hd..(i + 1) * hd]);
            let mut j = 0;
            while j + 4 <= nk {
                let key = |k: usize| &keys[(j + k) * hd..(j + k + 1) * hd];
                let mut tails = [zero; 8];
                for (e, t) in tails.iter_mut().enumerate() {
                    let (a, b) = (&qs[e / 4][main..], &key(e % 4)[main..]);
                    *t = a.iter().zip(b).map(|(x, y)| x * y).sum();
                }
                let mut sums = [0f32; 8];
                // SAFETY: only reached from `run_avx2`/`run_avx512` (AVX2 present); every load
                // reads 8 elements below `main <= hd` of a query or of key row `j + k < nk`.
                unsafe {
                    // r[q * 4 + k]: query q of the pair with key j + k.
                    let mut r = [_mm256_setzero_ps(); 8];
                    for c in (0..main).step_by(8) {
                        let x = qs.map(|q| _mm256_loadu_ps(q.as_ptr().add(c)));
                        for k in 0..4 {
                            let y = _mm256_loadu_ps(keys.as_ptr().add((j + k) * hd + c));
                            r[k] = _mm256_add_ps(r[k], _mm256_mul_ps(x[0], y));
                            r[4 + k] = _mm256_add_ps(r[4 + k], _mm256_mul_ps(x[1], y));
                        }
                    }
                    // 8×8 transpose: col[l][e] = lane l of r[e].
                    let t = [
                        _mm256_unpacklo_ps(r[0], r[1]),
                        _mm256_unpackhi_ps(r[0], r[1]),
                        _mm256_unpacklo_ps(r[2], r[3]),
                        _mm256_unpackhi_ps(r[2], r[3]),
                        _mm256_unpacklo_ps(r[4], r[5]),
                        _mm256_unpackhi_ps(r[4], r[5]),
                        _mm256_unpacklo_ps(r[6], r[7]),
                        _mm256_unpackhi_ps(r[6], r[7]),
                    ];
                    let u = [
                        _mm256_shuffle_ps::<0x44>(t[0], t[2]),
                        _mm256_shuffle_ps::<0xEE>(t[0], t[2]),
                        _mm256_shuffle_ps::<0x44>(t[1], t[3]),
                        _mm256_shuffle_ps::<0xEE>(t[1], t[3]),
                        _mm256_shuffle_ps::<0x44>(t[4], t[6]),
                        _mm256_shuffle_ps::<0xEE>(t[4], t[6]),
                        _mm256_shuffle_ps::<0x44>(t[5], t[7]),
                        _mm256_shuffle_ps::<0xEE>(t[5], t[7]),
                    ];
                    let mut sum = _mm256_set1_ps(zero);
                    for l in 0..4 {
                        sum = _mm256_add_ps(sum, _mm256_permute2f128_ps::<0x20>(u[l], u[l + 4]));
                    }
                    for l in 0..4 {
                        sum = _mm256_add_ps(sum, _mm256_permute2f128_ps::<0x31>(u[l], u[l + 4]));
                    }
                    sum = _mm256_add_ps(sum, _mm256_loadu_ps(tails.as_ptr()));
                    _mm256_storeu_ps(sums.as_mut_ptr(), sum);
                }
                for (h, i) in [pair, pair + 1].into_iter().enumerate().take(nq - pair) {
                    out[i * nk + j..i * nk + j + 4].copy_from_slice(&sums[4 * h..4 * h + 4]);
                }
                j += 4;
            }
            for j in j..nk {
                for i in pair..(pair + 2).min(nq) {
                    out[i * nk + j] =
                        ops::dot(&q[i * hd..(i + 1) * hd], &keys[j * hd..(j + 1) * hd]);
                }
            }
        }
    }

    #[inline(always)]
    fn round(x: &mut [f32]) {
        let mut chunks = x.chunks_exact_mut(8);
        for c in &mut chunks {
            // SAFETY: only reached from `run_avx2`, which requires F16C; `c` has 8 elements.
            unsafe {
                let v = _mm256_loadu_ps(c.as_ptr());
                let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v);
                _mm256_storeu_ps(c.as_mut_ptr(), _mm256_cvtph_ps(h));
            }
        }
        chunks
            .into_remainder()
            .iter_mut()
            .for_each(|v| *v = ops::round_f16(*v));
    }
}

/// The blocks of [`joint_weighted_sums`] for `Q` queries: `outs[i][..at]` in 16- and 8-lane
/// blocks (see [`joint_block_avx2`]); returns `at`.
///
/// Compiled with AVX2 itself rather than inlined: it is called from a closure, which does not
/// take on its caller's target features when the compiler keeps it out of line (the intrinsics
/// then became calls).
///
/// # Safety
/// As [`joint_block_avx2`], with `outs` of `width` elements.
#[target_feature(enable = "avx2,f16c")]
unsafe fn joint_blocks_avx2<const Q: usize>(
    p: &[f32],
    rows: &[f32],
    width: usize,
    outs: &mut [&mut [f32]],
) -> usize {
    let mut at = 0;
    while width - at >= 16 {
        joint_block_avx2::<Q, 2>(p, rows, at, outs);
        at += 16;
    }
    if width - at >= 8 {
        joint_block_avx2::<Q, 1>(p, rows, at, outs);
        at += 8;
    }
    at
}

/// `outs[i][at..at + 8 N]` of the weighted sums of `Q` queries: row `i` of `p` (zero outside
/// its range) times all `rows`, in `Q × N` 8-lane accumulators (each value row loaded once).
///
/// # Safety
/// AVX2 must be present; `outs` has `Q` slices of `width` elements, `at + 8 N <= width`,
/// `rows.len() == n_keys * width` and `p.len() == Q * n_keys`.
#[inline(always)]
unsafe fn joint_block_avx2<const Q: usize, const N: usize>(
    p: &[f32],
    rows: &[f32],
    at: usize,
    outs: &mut [&mut [f32]],
) {
    let nk = p.len() / Q;
    let width = rows.len() / nk;
    debug_assert!(outs.len() == Q && at + 8 * N <= width && outs[0].len() == width);
    let mut acc = [[_mm256_setzero_ps(); N]; Q];
    for j in 0..nk {
        let v = rows.as_ptr().add(j * width + at);
        let vs: [__m256; N] = std::array::from_fn(|k| _mm256_loadu_ps(v.add(8 * k)));
        for (i, acc) in acc.iter_mut().enumerate() {
            let pv = _mm256_set1_ps(*p.get_unchecked(i * nk + j));
            for (a, v) in acc.iter_mut().zip(&vs) {
                *a = _mm256_add_ps(*a, _mm256_mul_ps(pv, *v));
            }
        }
    }
    for (out, acc) in outs.iter_mut().zip(&acc) {
        for (k, a) in acc.iter().enumerate() {
            _mm256_storeu_ps(out.as_mut_ptr().add(at + 8 * k), *a);
        }
    }
}
