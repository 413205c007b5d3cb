//! Quantizers of the non-linear 4-bit formats IQ4_NL and IQ4_XS, following ggml's
//! `quantize_iq4_nl` and `quantize_iq4_xs` as llama-quantize runs them without an importance
//! matrix (`quantize_row_iq4_nl_impl` with weights `x²` and 7 tries either side): each block
//! of 32 gets the scale that maximises the weighted fit `(Σ w·q·x)² / Σ w·q²` over 16 candidate
//! scales, the elements are then re-rounded to the nearest level with the stored scale (IQ4_XS
//! first quantizes the eight block scales to 6 bits against the super-block's largest one).
//! Float operations follow ggml's scalar C order so the bytes agree with llama-quantize's.

use super::blocks::{BlockIQ4_NL, BlockIQ4_XS, QK, QK_K};
use super::nonlinear::IQ4NL_LEVELS as LEVELS;
use super::reference::{nearest_int, put_f16, GROUP_MAX_EPS};

/// Candidate scales either side of the first guess (llama-quantize passes `ntry` 7).
const NTRY: i32 = 7;

/// Level `i` as a float.
fn level(i: usize) -> f32 {
    f32::from(LEVELS[i])
}

/// The indices of the levels nearest to `id · x` for a block of 32, the upper one on ties:
/// ggml's `best_index_int8` without branches (it vectorizes: 2× faster). ggml's binary search
/// ends at `mu`, the first level above the value among 1..15 (15 if none, or NaN): 15 minus
/// the count of levels 1..14 above it; it picks `mu − 1` when the value is nearer to that
/// level, a comparison that also gives its early returns 0 and 15 for values out of range.
fn best_indices(x: &[f32], id: f32) -> [u8; QK] {
    let al: [f32; QK] = std::array::from_fn(|j| id * x[j]);
    let mut mu = [15u32; QK];
    for &v in &LEVELS[1..15] {
        let v = f32::from(v);
        for (m, &a) in mu.iter_mut().zip(&al) {
            *m -= u32::from(a < v);
        }
    }
    std::array::from_fn(|j| {
        let (a, up) = (al[j], mu[j] as usize);
        if a - level(up - 1) < level(up) - a {
            up as u8 - 1
        } else {
            up as u8
        }
    })
}

/// The scale of one block of 32: the best of the least-squares fits (weights `x²`) of the
/// levels picked with inverse scales `−127 / max` and `(t − 127) / max`, `t` in `−7..=7`
/// (`max` the value of largest magnitude). 0 for an all but zero block.
fn block_scale(x: &[f32]) -> f32 {
    let (mut amax, mut max) = (0f32, 0f32);
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        return 0.0;
    }
    let sums = |id: f32| {
        let (mut sumqx, mut sumq2) = (0f32, 0f32);
        for (&v, &l) in x.iter().zip(&best_indices(x, id)) {
            let q = level(usize::from(l));
            let w = v * v;
            sumqx += w * q * v;
            sumq2 += w * q * q;
        }
        (sumqx, sumq2)
    };
    let (sumqx, sumq2) = sums(1.0 / (-max / level(0)));
    let mut d = if sumq2 > 0.0 { sumqx / sumq2 } else { 0.0 };
    let mut best = d * sumqx;
    for itry in -NTRY..=NTRY {
        let (sumqx, sumq2) = sums((itry + i32::from(LEVELS[0])) as f32 / max);
        if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    d
}

/// 1 / d, or 0 when d is 0.
fn inverse(d: f32) -> f32 {
    if d != 0.0 {
        1.0 / d
    } else {
        0.0
    }
}

/// Stores the nearest levels of `x` (32 values) times `id` as 16 nibble pairs: element
/// `j < 16` in the low nibble of byte `j`, element `j + 16` in its high nibble.
fn put_nibbles(x: &[f32], id: f32, qs: &mut [u8]) {
    let l = best_indices(x, id);
    for j in 0..QK / 2 {
        qs[j] = l[j] | (l[j + QK / 2] << 4);
    }
}

/// IQ4_NL: a half scale per 32 elements ([`block_scale`]) and 32 level indices.
pub(crate) fn quantize_iq4_nl(src: &[f32], dst: &mut [u8]) {
    type B = BlockIQ4_NL;
    for (x, y) in src.chunks_exact(QK).zip(dst.chunks_exact_mut(B::SIZE)) {
        let d = block_scale(x);
        put_f16(y, B::D, d);
        put_nibbles(x, inverse(d), &mut y[B::QS..B::QS + QK / 2]);
    }
}

/// IQ4_XS: the eight block scales of a super-block of 256 as 6-bit multiples `l − 32` of
/// `d = −max_scale / 32` (`max_scale` the block scale of largest magnitude), each block's
/// levels picked with its quantized scale `d · (l − 32)`.
pub(crate) fn quantize_iq4_xs(src: &[f32], dst: &mut [u8]) {
    type B = BlockIQ4_XS;
    for (x, y) in src.chunks_exact(QK_K).zip(dst.chunks_exact_mut(B::SIZE)) {
        let scales: [f32; QK_K / QK] = std::array::from_fn(|ib| block_scale(&x[ib * QK..][..QK]));
        let (mut amax_scale, mut max_scale) = (0f32, 0f32);
        for &d in &scales {
            if d.abs() > amax_scale {
                amax_scale = d.abs();
                max_scale = d;
            }
        }
        let d = -max_scale / 32.0;
        put_f16(y, B::D, d);
        let id = inverse(d);
        let mut scales_h = 0u16;
        y[B::SCALES_L..B::SCALES_L + QK_K / 64].fill(0);
        for (ib, &scale) in scales.iter().enumerate() {
            let l = nearest_int(id * scale).clamp(-32, 31);
            let qs = &mut y[B::QS + ib * QK / 2..][..QK / 2];
            put_nibbles(&x[ib * QK..][..QK], inverse(d * l as f32), qs);
            let l = (l + 32) as u8;
            y[B::SCALES_L + ib / 2] |= (l & 0x0f) << (4 * (ib % 2));
            scales_h |= u16::from(l >> 4) << (2 * ib);
        }
        y[B::SCALES_H..B::SCALES_H + 2].copy_from_slice(&scales_h.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::{dequantize, GgmlType};

    /// ggml's `best_index_int8` as written: early returns, then a binary search.
    fn binary_search_index(x: f32) -> u8 {
        if x <= level(0) {
            return 0;
        }
        if x >= level(15) {
            return 15;
        }
        let (mut ml, mut mu) = (0, 15);
        while mu - ml > 1 {
            let mav = (ml + mu) / 2;
            if x < level(mav) {
                mu = mav;
            } else {
                ml = mav;
            }
        }
        if x - level(mu - 1) < level(mu) - x {
            mu as u8 - 1
        } else {
            mu as u8
        }
    }

    #[test]
    fn nearest_levels_match_the_binary_search() {
        let mut values: Vec<f32> = (-1200..=1200).map(|i| i as f32 * 0.125).collect();
        values.extend((1..16).map(|i| (level(i - 1) + level(i)) / 2.0));
        values.extend([f32::NAN, f32::INFINITY, -f32::INFINITY, f32::MAX, -f32::MAX]);
        for block in values.chunks(QK) {
            let mut x = [0f32; QK];
            x[..block.len()].copy_from_slice(block);
            for (&v, &l) in x.iter().zip(&best_indices(&x, 1.0)) {
                assert_eq!(l, binary_search_index(v), "{v}");
            }
        }
        let ties = [-4.5, -4.6, 0.0, 100.0];
        let mut x = [0f32; QK];
        x[..4].copy_from_slice(&ties);
        assert_eq!(best_indices(&x, 1.0)[..4], [8, 7, 8, 14]);
    }

    #[test]
    fn round_trip_error_is_small() {
        let x: Vec<f32> = (0..2 * QK_K)
            .map(|i| ((i * 7919 % 509) as f32 - 254.0) / 100.0)
            .collect();
        for (ty, quantize) in [
            (GgmlType::IQ4_NL, quantize_iq4_nl as fn(&[f32], &mut [u8])),
            (GgmlType::IQ4_XS, quantize_iq4_xs),
        ] {
            let mut q = vec![0u8; ty.row_bytes(x.len() as u64).unwrap() as usize];
            quantize(&x, &mut q);
            let mut y = vec![0f32; x.len()];
            dequantize(ty, &q, &mut y).unwrap();
            let rms = (x.iter().zip(&y).map(|(a, b)| (a - b).powi(2)).sum::<f32>()
                / x.len() as f32)
                .sqrt();
            assert!(rms < 0.12, "{ty}: rms {rms}");
        }
    }
}
