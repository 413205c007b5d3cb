//! Reference quantizers of the K weight formats (Q2_K .. Q6_K), following ggml's deterministic
//! `quantize_row_q*_K_ref` algorithms (no importance matrix): every sub-block gets a scale (and
//! minimum) by a small least-squares search (`make_qx_quants`, `make_q3_quants`,
//! `make_qkx2_quants` in ggml), the scales are quantized against the super-block's largest
//! one, and the elements are re-rounded with the quantized scales. Float operations follow
//! ggml's scalar C order so the bytes agree with llama-quantize's.

use crate::quant::blocks::{BlockQ2_K, BlockQ3_K, BlockQ4_K, BlockQ5_K, BlockQ6_K, QK_K};
use crate::quant::float::f16_at;
use crate::quant::reference::{nearest_int, put_f16, GROUP_MAX_EPS};

/// The value of largest magnitude (the first on ties) and that magnitude.
fn signed_absmax(x: &[f32]) -> (f32, f32) {
    let (mut amax, mut max) = (0f32, 0f32);
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    (max, amax)
}

/// Symmetric quants in `−nmax..nmax` (stored `+ nmax` in `l`) with a scale fitted by weighted
/// least squares (`x²` weights) over 19 candidate inverse scales; returns the scale.
fn make_qx_quants(nmax: i32, x: &[f32], l: &mut [u8]) -> f32 {
    let (max, amax) = signed_absmax(x);
    if amax < GROUP_MAX_EPS {
        l.fill(0);
        return 0.0;
    }
    let nmaxf = nmax as f32;
    let quant = |iscale: f32, v: f32| nearest_int(iscale * v).clamp(-nmax, nmax - 1);
    let sums = |iscale: f32| {
        let (mut sumlx, mut suml2) = (0f32, 0f32);
        for &v in x {
            let q = quant(iscale, v) as f32;
            let w = v * v;
            sumlx += w * v * q;
            suml2 += w * q * q;
        }
        (sumlx, suml2)
    };
    let mut iscale = -nmaxf / max;
    for (q, &v) in l.iter_mut().zip(x) {
        *q = (quant(iscale, v) + nmax) as u8;
    }
    let (sumlx, suml2) = sums(iscale);
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in -9..=9 {
        if is == 0 {
            continue;
        }
        iscale = -(nmaxf + 0.1 * is as f32) / max;
        let (sumlx, suml2) = sums(iscale);
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for (q, &v) in l.iter_mut().zip(x) {
                *q = (quant(iscale, v) + nmax) as u8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// Q3_K's sub-block quants in `−nmax..nmax` (stored `+ nmax`), refined element by element
/// for the weighted (`x²`) squared error; returns the scale.
fn make_q3_quants(nmax: i32, x: &[f32], out: &mut [u8]) -> f32 {
    let (max, amax) = signed_absmax(x);
    if amax < GROUP_MAX_EPS {
        out.fill(0);
        return 0.0;
    }
    let iscale = -(nmax as f32) / max;
    let mut l = [0i32; 16];
    let (mut sumlx, mut suml2) = (0f32, 0f32);
    for (q, &v) in l.iter_mut().zip(x) {
        *q = nearest_int(iscale * v).clamp(-nmax, nmax - 1);
        let w = v * v;
        sumlx += w * v * *q as f32;
        suml2 += w * *q as f32 * *q as f32;
    }
    for _ in 0..5 {
        let mut changed = false;
        for (q, &v) in l.iter_mut().zip(x) {
            let w = v * v;
            let mut slx = sumlx - w * v * *q as f32;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * *q as f32 * *q as f32;
                let new = nearest_int(v * sl2 / slx).clamp(-nmax, nmax - 1);
                if new != *q {
                    slx += w * v * new as f32;
                    sl2 += w * new as f32 * new as f32;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        *q = new;
                        sumlx = slx;
                        suml2 = sl2;
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    for (o, &q) in out.iter_mut().zip(&l) {
        *o = (q + nmax) as u8;
    }
    if suml2 > 0.0 {
        sumlx / suml2
    } else {
        0.0
    }
}

/// Parameters of the scale-and-minimum search of [`make_qkx2_quants`].
struct Search {
    nmax: i32,
    rmin: f32,
    rdelta: f32,
    nstep: i32,
    /// Minimise absolute rather than squared error.
    mad: bool,
}

/// Asymmetric quants `0..=nmax` with scale and minimum fitted by weighted least squares over
/// `nstep + 1` candidate inverse scales. Returns `(scale, −min)`.
fn make_qkx2_quants(s: &Search, x: &[f32], weights: &[f32], l: &mut [u8]) -> (f32, f32) {
    let n = x.len();
    let (mut min, mut max) = (x[0], x[0]);
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        let w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        l.fill(0);
        return (0.0, -min);
    }
    let nmaxf = s.nmax as f32;
    let error = |scale: f32, min: f32, q: u8, v: f32, w: f32| {
        let diff = scale * f32::from(q) + min - v;
        w * if s.mad { diff.abs() } else { diff * diff }
    };
    let mut iscale = nmaxf / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0f32;
    for i in 0..n {
        l[i] = nearest_int(iscale * (x[i] - min)).clamp(0, s.nmax) as u8;
        best_error += error(scale, min, l[i], x[i], weights[i]);
    }
    if s.nstep < 1 {
        return (scale, -min);
    }
    let mut aux = [0u8; 32];
    for is in 0..=s.nstep {
        iscale = (s.rmin + s.rdelta * is as f32 + nmaxf) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0f32, 0f32, 0f32);
        for i in 0..n {
            let q = nearest_int(iscale * (x[i] - min)).clamp(0, s.nmax);
            aux[i] = q as u8;
            let (w, q) = (weights[i], q as f32);
            sum_l += w * q;
            sum_l2 += w * q * q;
            sum_xl += w * q * x[i];
        }
        let d = sum_w * sum_l2 - sum_l * sum_l;
        if d > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / d;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / d;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0f32;
            for i in 0..n {
                cur_error += error(this_scale, this_min, aux[i], x[i], weights[i]);
            }
            if cur_error < best_error {
                l[..n].copy_from_slice(&aux[..n]);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// Packs 2-bit quants `l` (256) into 64 bytes: byte `j/4 + i` of each 128-element half holds
/// elements `i`, `i + 32`, `i + 64`, `i + 96` in bit pairs 0, 2, 4, 6.
fn pack_2bit(l: &[u8; QK_K], qs: &mut [u8]) {
    for j in (0..QK_K).step_by(128) {
        for i in 0..32 {
            qs[j / 4 + i] =
                l[j + i] | (l[j + i + 32] << 2) | (l[j + i + 64] << 4) | (l[j + i + 96] << 6);
        }
    }
}

/// Q2_K: 16 sub-blocks of 16 with 4-bit scales and 4-bit mins.
pub(super) fn quantize_q2_k(src: &[f32], dst: &mut [u8]) {
    let search = Search {
        nmax: 3,
        rmin: -0.5,
        rdelta: 0.1,
        nstep: 15,
        mad: true,
    };
    for (x, y) in src
        .chunks_exact(QK_K)
        .zip(dst.chunks_exact_mut(BlockQ2_K::SIZE))
    {
        let mut l = [0u8; QK_K];
        let (mut scales, mut mins) = ([0f32; 16], [0f32; 16]);
        let (mut max_scale, mut max_min) = (0f32, 0f32);
        for j in 0..16 {
            let xs = &x[16 * j..16 * j + 16];
            let mut weights = [0f32; 16];
            for (w, v) in weights.iter_mut().zip(xs) {
                *w = v.abs();
            }
            (scales[j], mins[j]) = make_qkx2_quants(&search, xs, &weights, &mut l[16 * j..]);
            if scales[j] > max_scale {
                max_scale = scales[j];
            }
            if mins[j] > max_min {
                max_min = mins[j];
            }
        }
        let sc = &mut y[BlockQ2_K::SCALES..BlockQ2_K::SCALES + 16];
        if max_scale > 0.0 {
            let iscale = 15.0 / max_scale;
            for (s, &v) in sc.iter_mut().zip(&scales) {
                *s = nearest_int(iscale * v) as u8;
            }
            put_f16(y, BlockQ2_K::D, max_scale / 15.0);
        } else {
            sc.fill(0);
            put_f16(y, BlockQ2_K::D, 0.0);
        }
        if max_min > 0.0 {
            let iscale = 15.0 / max_min;
            for (j, &v) in mins.iter().enumerate() {
                y[BlockQ2_K::SCALES + j] |= (nearest_int(iscale * v) << 4) as u8;
            }
            put_f16(y, BlockQ2_K::DMIN, max_min / 15.0);
        } else {
            put_f16(y, BlockQ2_K::DMIN, 0.0);
        }
        let (d_all, dmin_all) = (f16_at(y, BlockQ2_K::D), f16_at(y, BlockQ2_K::DMIN));
        for j in 0..16 {
            let s = y[BlockQ2_K::SCALES + j];
            let d = d_all * f32::from(s & 0xf);
            if d == 0.0 {
                continue;
            }
            let dm = dmin_all * f32::from(s >> 4);
            for ii in 0..16 {
                l[16 * j + ii] = nearest_int((x[16 * j + ii] + dm) / d).clamp(0, 3) as u8;
            }
        }
        pack_2bit(&l, &mut y[BlockQ2_K::QS..BlockQ2_K::QS + QK_K / 4]);
    }
}

/// Q3_K: 16 sub-blocks of 16 with signed 6-bit scales, 3-bit quants (2 low bits + a high bit).
pub(super) fn quantize_q3_k(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src
        .chunks_exact(QK_K)
        .zip(dst.chunks_exact_mut(BlockQ3_K::SIZE))
    {
        let mut l = [0u8; QK_K];
        let mut scales = [0f32; 16];
        let (mut max_scale, mut amax) = (0f32, 0f32);
        for j in 0..16 {
            scales[j] = make_q3_quants(4, &x[16 * j..16 * j + 16], &mut l[16 * j..16 * j + 16]);
            if scales[j].abs() > amax {
                amax = scales[j].abs();
                max_scale = scales[j];
            }
        }
        let s = BlockQ3_K::SCALES;
        y[s..s + 12].fill(0);
        if max_scale != 0.0 {
            let iscale = -32.0 / max_scale;
            for (j, &v) in scales.iter().enumerate() {
                // ggml stores the rounded value in an int8_t before clamping.
                let q = (i32::from(nearest_int(iscale * v) as i8)).clamp(-32, 31) + 32;
                let q = q as u8;
                if j < 8 {
                    y[s + j] = q & 0xf;
                } else {
                    y[s + j - 8] |= (q & 0xf) << 4;
                }
                y[s + 8 + j % 4] |= (q >> 4) << (2 * (j / 4));
            }
            put_f16(y, BlockQ3_K::D, 1.0 / iscale);
        } else {
            put_f16(y, BlockQ3_K::D, 0.0);
        }
        let d_all = f16_at(y, BlockQ3_K::D);
        for j in 0..16 {
            let low = if j < 8 {
                y[s + j] & 0xf
            } else {
                y[s + j - 8] >> 4
            };
            let high = (y[s + 8 + j % 4] >> (2 * (j / 4))) & 3;
            let sc = i32::from(low | (high << 4)) - 32;
            let d = d_all * sc as f32;
            if d == 0.0 {
                continue;
            }
            for ii in 0..16 {
                l[16 * j + ii] = (nearest_int(x[16 * j + ii] / d).clamp(-4, 3) + 4) as u8;
            }
        }
        let hmask = &mut y[BlockQ3_K::HMASK..BlockQ3_K::HMASK + QK_K / 8];
        hmask.fill(0);
        for (j, q) in l.iter_mut().enumerate() {
            if *q > 3 {
                hmask[j % (QK_K / 8)] |= 1 << (j / (QK_K / 8));
                *q -= 4;
            }
        }
        pack_2bit(&l, &mut y[BlockQ3_K::QS..BlockQ3_K::QS + QK_K / 4]);
    }
}

/// Q4_K and Q5_K share everything but the quant width and the search parameters: 8
/// sub-blocks of 32 with 6-bit scales and mins packed in 12 bytes at `scales_at`. Returns
/// the 256 quants `0..=nmax`.
fn q45_k_block(x: &[f32], y: &mut [u8], search: &Search, at: (usize, usize, usize)) -> [u8; QK_K] {
    let (d_at, dmin_at, s) = at;
    let mut l = [0u8; QK_K];
    let (mut scales, mut mins) = ([0f32; 8], [0f32; 8]);
    let (mut max_scale, mut max_min) = (0f32, 0f32);
    for j in 0..8 {
        let xs = &x[32 * j..32 * j + 32];
        let mut sum_x2 = 0f32;
        for &v in xs {
            sum_x2 += v * v;
        }
        let av_x = (sum_x2 / 32.0).sqrt();
        let mut weights = [0f32; 32];
        for (w, v) in weights.iter_mut().zip(xs) {
            *w = av_x + v.abs();
        }
        (scales[j], mins[j]) = make_qkx2_quants(search, xs, &weights, &mut l[32 * j..]);
        if scales[j] > max_scale {
            max_scale = scales[j];
        }
        if mins[j] > max_min {
            max_min = mins[j];
        }
    }
    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    for j in 0..8 {
        let ls = (nearest_int(inv_scale * scales[j]) as u8).min(63);
        let lm = (nearest_int(inv_min * mins[j]) as u8).min(63);
        if j < 4 {
            y[s + j] = ls;
            y[s + j + 4] = lm;
        } else {
            y[s + j + 4] = (ls & 0xf) | ((lm & 0xf) << 4);
            y[s + j - 4] |= (ls >> 4) << 6;
            y[s + j] |= (lm >> 4) << 6;
        }
    }
    put_f16(y, d_at, max_scale / 63.0);
    put_f16(y, dmin_at, max_min / 63.0);
    let (d_all, dmin_all) = (f16_at(y, d_at), f16_at(y, dmin_at));
    let packed = &y[s..s + 12];
    for j in 0..8 {
        let (sc, m) = if j < 4 {
            (packed[j] & 63, packed[j + 4] & 63)
        } else {
            (
                (packed[j + 4] & 0xf) | ((packed[j - 4] >> 6) << 4),
                (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4),
            )
        };
        let d = d_all * f32::from(sc);
        if d == 0.0 {
            continue;
        }
        let dm = dmin_all * f32::from(m);
        for ii in 0..32 {
            l[32 * j + ii] = nearest_int((x[32 * j + ii] + dm) / d).clamp(0, search.nmax) as u8;
        }
    }
    l
}

/// Q4_K: 8 sub-blocks of 32, 4-bit quants.
pub(super) fn quantize_q4_k(src: &[f32], dst: &mut [u8]) {
    let search = Search {
        nmax: 15,
        rmin: -1.0,
        rdelta: 0.1,
        nstep: 20,
        mad: false,
    };
    let at = (BlockQ4_K::D, BlockQ4_K::DMIN, BlockQ4_K::SCALES);
    for (x, y) in src
        .chunks_exact(QK_K)
        .zip(dst.chunks_exact_mut(BlockQ4_K::SIZE))
    {
        let l = q45_k_block(x, y, &search, at);
        let qs = &mut y[BlockQ4_K::QS..];
        for (n, j) in (0..QK_K).step_by(64).enumerate() {
            for i in 0..32 {
                qs[32 * n + i] = l[j + i] | (l[j + i + 32] << 4);
            }
        }
    }
}

/// Q5_K: 8 sub-blocks of 32, 5-bit quants (nibbles plus one high-bit plane per 32).
pub(super) fn quantize_q5_k(src: &[f32], dst: &mut [u8]) {
    let search = Search {
        nmax: 31,
        rmin: -0.5,
        rdelta: 0.1,
        nstep: 15,
        mad: false,
    };
    let at = (BlockQ5_K::D, BlockQ5_K::DMIN, BlockQ5_K::SCALES);
    for (x, y) in src
        .chunks_exact(QK_K)
        .zip(dst.chunks_exact_mut(BlockQ5_K::SIZE))
    {
        let l = q45_k_block(x, y, &search, at);
        let mut qh = [0u8; QK_K / 8];
        let (mut m1, mut m2) = (1u8, 2u8);
        for (k, n) in (0..QK_K).step_by(64).enumerate() {
            for j in 0..32 {
                let (mut l1, mut l2) = (l[n + j], l[n + j + 32]);
                if l1 > 15 {
                    l1 -= 16;
                    qh[j] |= m1;
                }
                if l2 > 15 {
                    l2 -= 16;
                    qh[j] |= m2;
                }
                y[BlockQ5_K::QS + 32 * k + j] = l1 | (l2 << 4);
            }
            m1 <<= 2;
            m2 <<= 2;
        }
        y[BlockQ5_K::QH..BlockQ5_K::QH + QK_K / 8].copy_from_slice(&qh);
    }
}

/// Q6_K: 16 sub-blocks of 16 with i8 scales, 6-bit quants (nibbles plus 2-bit high parts).
pub(super) fn quantize_q6_k(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src
        .chunks_exact(QK_K)
        .zip(dst.chunks_exact_mut(BlockQ6_K::SIZE))
    {
        let mut l = [0u8; QK_K];
        let mut scales = [0f32; 16];
        let (mut max_scale, mut max_abs) = (0f32, 0f32);
        for ib in 0..16 {
            scales[ib] =
                make_qx_quants(32, &x[16 * ib..16 * ib + 16], &mut l[16 * ib..16 * ib + 16]);
            if scales[ib].abs() > max_abs {
                max_abs = scales[ib].abs();
                max_scale = scales[ib];
            }
        }
        if max_abs < GROUP_MAX_EPS {
            y.fill(0);
            continue;
        }
        let iscale = -128.0 / max_scale;
        put_f16(y, BlockQ6_K::D, 1.0 / iscale);
        for (ib, &v) in scales.iter().enumerate() {
            y[BlockQ6_K::SCALES + ib] = nearest_int(iscale * v).min(127) as i8 as u8;
        }
        let d_all = f16_at(y, BlockQ6_K::D);
        for j in 0..16 {
            let d = d_all * f32::from(y[BlockQ6_K::SCALES + j] as i8);
            if d == 0.0 {
                continue;
            }
            for ii in 0..16 {
                l[16 * j + ii] = (nearest_int(x[16 * j + ii] / d).clamp(-32, 31) + 32) as u8;
            }
        }
        for (h, j) in (0..QK_K).step_by(128).enumerate() {
            let ql = BlockQ6_K::QL + 64 * h;
            let qh = BlockQ6_K::QH + 32 * h;
            for i in 0..32 {
                let q = [l[j + i], l[j + i + 32], l[j + i + 64], l[j + i + 96]];
                y[ql + i] = (q[0] & 0xf) | ((q[2] & 0xf) << 4);
                y[ql + i + 32] = (q[1] & 0xf) | ((q[3] & 0xf) << 4);
                y[qh + i] =
                    (q[0] >> 4) | ((q[1] >> 4) << 2) | ((q[2] >> 4) << 4) | ((q[3] >> 4) << 6);
            }
        }
    }
}
