//! The 256-element "K" super-block formats: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (weights) and Q8_K
//! (activations): unpacking, dequantization, Q8_K quantization and the portable dot products.
//!
//! Layouts: `blocks`.

use super::blocks::{BlockQ2_K, BlockQ3_K, BlockQ4_K, BlockQ5_K, BlockQ6_K, BlockQ8_K, QK_K};
use super::float::f16_at;

/// The 256 i8 quants of a Q8_K block.
#[inline]
pub(crate) fn q8k_quants(b: &[u8]) -> &[u8] {
    &b[BlockQ8_K::QS..BlockQ8_K::QS + QK_K]
}

/// The f32 scale of a Q8_K block.
#[inline]
pub(crate) fn q8k_d(b: &[u8]) -> f32 {
    let d = BlockQ8_K::D;
    f32::from_le_bytes([b[d], b[d + 1], b[d + 2], b[d + 3]])
}

/// The sum of the 16 quants of group `g` of a Q8_K block.
#[inline]
pub(crate) fn q8k_bsum(b: &[u8], g: usize) -> i32 {
    let at = BlockQ8_K::BSUMS + 2 * g;
    i32::from(i16::from_le_bytes([b[at], b[at + 1]]))
}

/// Unpacks the eight 6-bit scales and eight 6-bit mins of a Q4_K/Q5_K block (12 bytes).
#[inline]
pub(crate) fn q4k_scales_mins(s: &[u8]) -> ([u8; 8], [u8; 8]) {
    let mut sc = [0u8; 8];
    let mut m = [0u8; 8];
    for j in 0..4 {
        sc[j] = s[j] & 63;
        m[j] = s[j + 4] & 63;
        sc[j + 4] = (s[j + 8] & 0x0f) | ((s[j] >> 6) << 4);
        m[j + 4] = (s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4);
    }
    (sc, m)
}

/// Unpacks the sixteen 6-bit scales of a Q3_K block (12 bytes), already offset by −32.
#[inline]
pub(crate) fn q3k_scales(s: &[u8]) -> [i32; 16] {
    let mut out = [0i32; 16];
    for (i, o) in out.iter_mut().enumerate() {
        let low = if i < 8 { s[i] & 0x0f } else { s[i - 8] >> 4 };
        let high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
        *o = i32::from(low | (high << 4)) - 32;
    }
    out
}

/// The 256 two-bit quants of a 64-byte array, in element order: element `128n + 32j + l` is bits
/// `2j..2j+2` of byte `32n + l`.
#[inline]
fn two_bits(qs: &[u8]) -> [i8; QK_K] {
    let mut q = [0i8; QK_K];
    for (half, src) in q.chunks_exact_mut(128).zip(qs.chunks_exact(32)) {
        for (j, dst) in half.chunks_exact_mut(32).enumerate() {
            for (d, &b) in dst.iter_mut().zip(src) {
                *d = ((b >> (2 * j)) & 3) as i8;
            }
        }
    }
    q
}

/// The 256 signed values of a Q3_K block (−4..=3): element `128n + 32j + l` loses 4 when bit
/// `4n + j` of `hmask[l]` is clear.
#[inline]
fn q3k_values(b: &[u8]) -> [i8; QK_K] {
    type B = BlockQ3_K;
    let hmask = &b[B::HMASK..B::HMASK + QK_K / 8];
    let mut q = two_bits(&b[B::QS..B::QS + QK_K / 4]);
    for (k, dst) in q.chunks_exact_mut(32).enumerate() {
        for (d, &h) in dst.iter_mut().zip(hmask) {
            *d -= ((!h >> k) & 1) as i8 * 4;
        }
    }
    q
}

/// Offsets of the head Q4_K and Q5_K share (`d`, `dmin`, packed scales and mins).
pub(crate) const Q45K_D: usize = BlockQ4_K::D;
/// See [`Q45K_D`].
pub(crate) const Q45K_DMIN: usize = BlockQ4_K::DMIN;
/// See [`Q45K_D`].
pub(crate) const Q45K_SCALES: usize = BlockQ4_K::SCALES;
const _: () = assert!(
    BlockQ5_K::D == Q45K_D && BlockQ5_K::DMIN == Q45K_DMIN && BlockQ5_K::SCALES == Q45K_SCALES
);

/// The 256 values of a Q5_K (`five`) or Q4_K block `b`.
#[inline]
fn q45k_block_values(b: &[u8], five: bool) -> [i8; QK_K] {
    if five {
        type B = BlockQ5_K;
        q45k_values(
            Some(&b[B::QH..B::QH + QK_K / 8]),
            &b[B::QS..B::QS + QK_K / 2],
        )
    } else {
        type B = BlockQ4_K;
        q45k_values(None, &b[B::QS..B::QS + QK_K / 2])
    }
}

/// The 256 unsigned values (0..=31) of a Q4_K (`qh` empty) or Q5_K block's quants: element
/// `64j + l` is the low nibble of `qs[32j + l]`, element `64j + 32 + l` its high nibble; the fifth
/// bit of element `32k + l` is bit `k` of `qh[l]`.
#[inline]
fn q45k_values(qh: Option<&[u8]>, qs: &[u8]) -> [i8; QK_K] {
    let mut q = [0i8; QK_K];
    for (dst, src) in q.chunks_exact_mut(64).zip(qs.chunks_exact(32)) {
        let (lo, hi) = dst.split_at_mut(32);
        for ((l, h), &b) in lo.iter_mut().zip(hi.iter_mut()).zip(src) {
            *l = (b & 0x0f) as i8;
            *h = (b >> 4) as i8;
        }
    }
    if let Some(qh) = qh {
        for (k, dst) in q.chunks_exact_mut(32).enumerate() {
            for (d, &h) in dst.iter_mut().zip(qh) {
                *d |= (((h >> k) & 1) << 4) as i8;
            }
        }
    }
    q
}

/// The 256 signed values (−32..=31) of a Q6_K block: for each half `n`, element
/// `128n + 32k + l` takes a nibble of `ql[64n + 32(k % 2) + l]` (low for `k < 2`) and bits
/// `2k..2k+2` of `qh[32n + l]` as its top two bits.
#[inline]
fn q6k_values(b: &[u8]) -> [i8; QK_K] {
    type B = BlockQ6_K;
    let (ql, qh) = (&b[B::QL..B::QL + QK_K / 2], &b[B::QH..B::QH + QK_K / 4]);
    let mut q = [0i8; QK_K];
    for ((dst, ql), qh) in q
        .chunks_exact_mut(128)
        .zip(ql.chunks_exact(64))
        .zip(qh.chunks_exact(32))
    {
        for (k, dst) in dst.chunks_exact_mut(32).enumerate() {
            let low = &ql[32 * (k % 2)..32 * (k % 2) + 32];
            for ((d, &lb), &hb) in dst.iter_mut().zip(low).zip(qh) {
                let nib = if k < 2 { lb & 0x0f } else { lb >> 4 };
                *d = (nib | (((hb >> (2 * k)) & 3) << 4)) as i8 - 32;
            }
        }
    }
    q
}

/// Dequantizes Q2_K blocks.
pub(crate) fn dequant_q2_k(src: &[u8], dst: &mut [f32]) {
    type B = BlockQ2_K;
    for (b, y) in src.chunks_exact(B::SIZE).zip(dst.chunks_exact_mut(QK_K)) {
        let (d, dmin) = (f16_at(b, B::D), f16_at(b, B::DMIN));
        let q = two_bits(&b[B::QS..B::QS + QK_K / 4]);
        for (g, (y, q)) in y.chunks_exact_mut(16).zip(q.chunks_exact(16)).enumerate() {
            let dl = d * f32::from(b[B::SCALES + g] & 0x0f);
            let ml = dmin * f32::from(b[B::SCALES + g] >> 4);
            for (y, &q) in y.iter_mut().zip(q) {
                *y = dl * f32::from(q) - ml;
            }
        }
    }
}

/// Dequantizes Q3_K blocks.
pub(crate) fn dequant_q3_k(src: &[u8], dst: &mut [f32]) {
    type B = BlockQ3_K;
    for (b, y) in src.chunks_exact(B::SIZE).zip(dst.chunks_exact_mut(QK_K)) {
        let d = f16_at(b, B::D);
        let sc = q3k_scales(&b[B::SCALES..B::SCALES + 12]);
        let q = q3k_values(b);
        for ((y, q), &s) in y.chunks_exact_mut(16).zip(q.chunks_exact(16)).zip(&sc) {
            let dl = d * s as f32;
            for (y, &q) in y.iter_mut().zip(q) {
                *y = dl * f32::from(q);
            }
        }
    }
}

/// Dequantizes Q4_K (`five == false`) or Q5_K blocks.
fn dequant_q45_k(src: &[u8], dst: &mut [f32], five: bool) {
    let size = if five {
        BlockQ5_K::SIZE
    } else {
        BlockQ4_K::SIZE
    };
    for (b, y) in src.chunks_exact(size).zip(dst.chunks_exact_mut(QK_K)) {
        let (d, dmin) = (f16_at(b, Q45K_D), f16_at(b, Q45K_DMIN));
        let (sc, m) = q4k_scales_mins(&b[Q45K_SCALES..Q45K_SCALES + 12]);
        let q = q45k_block_values(b, five);
        for (j, (y, q)) in y.chunks_exact_mut(32).zip(q.chunks_exact(32)).enumerate() {
            let d1 = d * f32::from(sc[j]);
            let m1 = dmin * f32::from(m[j]);
            for (y, &q) in y.iter_mut().zip(q) {
                *y = d1 * f32::from(q) - m1;
            }
        }
    }
}

/// Dequantizes Q4_K blocks.
pub(crate) fn dequant_q4_k(src: &[u8], dst: &mut [f32]) {
    dequant_q45_k(src, dst, false);
}

/// Dequantizes Q5_K blocks.
pub(crate) fn dequant_q5_k(src: &[u8], dst: &mut [f32]) {
    dequant_q45_k(src, dst, true);
}

/// Dequantizes Q6_K blocks.
pub(crate) fn dequant_q6_k(src: &[u8], dst: &mut [f32]) {
    type B = BlockQ6_K;
    for (b, y) in src.chunks_exact(B::SIZE).zip(dst.chunks_exact_mut(QK_K)) {
        let d = f16_at(b, B::D);
        let q = q6k_values(b);
        for (g, (y, q)) in y.chunks_exact_mut(16).zip(q.chunks_exact(16)).enumerate() {
            let dl = d * f32::from(b[B::SCALES + g] as i8);
            for (y, &q) in y.iter_mut().zip(q) {
                *y = dl * f32::from(q);
            }
        }
    }
}

/// Dequantizes Q8_K blocks.
pub(crate) fn dequant_q8_k(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src
        .chunks_exact(BlockQ8_K::SIZE)
        .zip(dst.chunks_exact_mut(QK_K))
    {
        let d = q8k_d(b);
        for (y, &q) in y.iter_mut().zip(q8k_quants(b)) {
            *y = d * f32::from(q as i8);
        }
    }
}

/// Quantizes activations to Q8_K like ggml's reference: the element of largest magnitude maps to
/// −127, `q = min(127, round_half_even(x · −127 / max))`, `d = 1 / iscale` (f32), plus the
/// per-16 sums. An all-zero block stores `d = 0` and zero quants.
pub(crate) fn quantize_q8_k(src: &[f32], dst: &mut [u8]) {
    type B = BlockQ8_K;
    for (x, b) in src.chunks_exact(QK_K).zip(dst.chunks_exact_mut(B::SIZE)) {
        let (mut max, mut amax) = (0f32, 0f32);
        for &v in x {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        b.fill(0);
        if amax == 0.0 {
            continue;
        }
        let iscale = -127.0 / max;
        for (q, &v) in b[B::QS..B::QS + QK_K].iter_mut().zip(x) {
            *q = (super::legacy::round_even_small(iscale * v) as i32).min(127) as i8 as u8;
        }
        for g in 0..QK_K / 16 {
            let s: i32 = b[B::QS + 16 * g..B::QS + 16 * (g + 1)]
                .iter()
                .map(|&q| i32::from(q as i8))
                .sum();
            let at = B::BSUMS + 2 * g;
            b[at..at + 2].copy_from_slice(&(s as i16).to_le_bytes());
        }
        b[B::D..B::D + 4].copy_from_slice(&(1.0 / iscale).to_le_bytes());
    }
}

/// Σ over groups of `group` elements of `scale[g] · Σ q·y` (exact integer).
#[inline]
fn grouped_isum(q: &[i8; QK_K], y: &[u8], group: usize, scale: impl Fn(usize) -> i32) -> i32 {
    q.chunks_exact(group)
        .zip(y.chunks_exact(group))
        .enumerate()
        .map(|(g, (q, y))| {
            let s: i32 = q
                .iter()
                .zip(y)
                .map(|(&a, &b)| i32::from(a) * i32::from(b as i8))
                .sum();
            scale(g) * s
        })
        .sum()
}

/// Scalar Q2_K × Q8_K.
pub(crate) fn dot_q2_k(nb: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0f32;
    type W = BlockQ2_K;
    for (x, y) in w
        .chunks_exact(W::SIZE)
        .zip(a.chunks_exact(BlockQ8_K::SIZE))
        .take(nb)
    {
        let yd = q8k_d(y);
        let (dall, dmin) = (yd * f16_at(x, W::D), yd * f16_at(x, W::DMIN));
        let sc = &x[W::SCALES..W::SCALES + QK_K / 16];
        let summ: i32 = (0..16)
            .map(|g| i32::from(sc[g] >> 4) * q8k_bsum(y, g))
            .sum();
        let q = two_bits(&x[W::QS..W::QS + QK_K / 4]);
        let isum = grouped_isum(&q, q8k_quants(y), 16, |g| i32::from(sc[g] & 0x0f));
        sum += dall * isum as f32 - dmin * summ as f32;
    }
    sum
}

/// Scalar Q3_K × Q8_K.
pub(crate) fn dot_q3_k(nb: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0f32;
    type W = BlockQ3_K;
    for (x, y) in w
        .chunks_exact(W::SIZE)
        .zip(a.chunks_exact(BlockQ8_K::SIZE))
        .take(nb)
    {
        let sc = q3k_scales(&x[W::SCALES..W::SCALES + 12]);
        let isum = grouped_isum(&q3k_values(x), q8k_quants(y), 16, |g| sc[g]);
        sum += f16_at(x, W::D) * q8k_d(y) * isum as f32;
    }
    sum
}

/// The min correction of a Q4_K/Q5_K × Q8_K block: `Σ_j m_j · Σ y` over sub-block `j`, from the
/// Q8_K block sums.
#[inline]
pub(crate) fn q45k_min_sum(m: &[u8; 8], y: &[u8]) -> i32 {
    (0..8)
        .map(|j| i32::from(m[j]) * (q8k_bsum(y, 2 * j) + q8k_bsum(y, 2 * j + 1)))
        .sum()
}

/// The integer parts of a Q4_K/Q5_K × Q8_K block: `(Σ_j sc_j·Σ q·y, Σ_j m_j·Σ y)`.
#[inline]
fn q45k_isums(q: &[i8; QK_K], sc: &[u8; 8], m: &[u8; 8], y: &[u8]) -> (i32, i32) {
    let isum = grouped_isum(q, q8k_quants(y), 32, |j| i32::from(sc[j]));
    (isum, q45k_min_sum(m, y))
}

/// Combines the integer parts of a Q4_K/Q5_K block with its scales.
#[inline]
pub(crate) fn q45k_combine(x: &[u8], y: &[u8], isum: i32, summ: i32) -> f32 {
    let yd = q8k_d(y);
    yd * f16_at(x, Q45K_D) * isum as f32 - yd * f16_at(x, Q45K_DMIN) * summ as f32
}

/// Scalar Q4_K × Q8_K.
pub(crate) fn dot_q4_k(nb: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0f32;
    for (x, y) in w
        .chunks_exact(BlockQ4_K::SIZE)
        .zip(a.chunks_exact(BlockQ8_K::SIZE))
        .take(nb)
    {
        let (sc, m) = q4k_scales_mins(&x[Q45K_SCALES..Q45K_SCALES + 12]);
        let (isum, summ) = q45k_isums(&q45k_block_values(x, false), &sc, &m, y);
        sum += q45k_combine(x, y, isum, summ);
    }
    sum
}

/// Scalar Q5_K × Q8_K.
pub(crate) fn dot_q5_k(nb: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0f32;
    for (x, y) in w
        .chunks_exact(BlockQ5_K::SIZE)
        .zip(a.chunks_exact(BlockQ8_K::SIZE))
        .take(nb)
    {
        let (sc, m) = q4k_scales_mins(&x[Q45K_SCALES..Q45K_SCALES + 12]);
        let (isum, summ) = q45k_isums(&q45k_block_values(x, true), &sc, &m, y);
        sum += q45k_combine(x, y, isum, summ);
    }
    sum
}

/// Scalar Q6_K × Q8_K.
pub(crate) fn dot_q6_k(nb: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0f32;
    type W = BlockQ6_K;
    for (x, y) in w
        .chunks_exact(W::SIZE)
        .zip(a.chunks_exact(BlockQ8_K::SIZE))
        .take(nb)
    {
        let isum = grouped_isum(&q6k_values(x), q8k_quants(y), 16, |g| {
            i32::from(x[W::SCALES + g] as i8)
        });
        sum += f16_at(x, W::D) * q8k_d(y) * isum as f32;
    }
    sum
}

/// Scalar Q8_K × Q8_K (only for completeness: Q8_K is an activation format).
pub(crate) fn dot_q8_k(nb: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0f32;
    for (x, y) in w
        .chunks_exact(BlockQ8_K::SIZE)
        .zip(a.chunks_exact(BlockQ8_K::SIZE))
        .take(nb)
    {
        let isum = super::legacy::isum_i8(q8k_quants(x), q8k_quants(y));
        sum += q8k_d(x) * q8k_d(y) * isum as f32;
    }
    sum
}

/// Rows of 256 values: random magnitudes, exact ties after scaling, repeated extremes of
/// both signs, zeros, NaN and infinities, and tiny (subnormal) maxima.
#[cfg(test)]
pub(super) fn quantizer_test_rows() -> Vec<Vec<f32>> {
    let mut seed = 0x9e37_79b9u32;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        seed
    };
    let mut out = Vec::new();
    for case in 0..400 {
        let row: Vec<f32> = (0..256)
            .map(|i| match case % 8 {
                0 => (i as f32 - 128.0) * 0.5,
                1 => 1e-40 * ((next() % 7) as f32 - 3.0),
                2 if i == 77 => f32::NAN,
                3 if i % 50 == 3 => f32::INFINITY,
                4 if i % 64 == 1 => -2.0,
                4 if i % 64 == 9 => 2.0,
                5 => 0.0,
                _ => ((next() % 20001) as f32 - 10000.0) * 1e-3 * (case as f32 + 1.0),
            })
            .collect();
        out.push(row);
    }
    out
}
