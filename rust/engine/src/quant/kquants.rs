//! The 256-element "K" super-block formats: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (weights) and Q8_K
//! (activations): unpacking, dequantization, Q8_K quantization and the portable dot products.
//!
//! Layouts (little-endian; `d`/`dmin` are IEEE halves unless noted):
//! - Q2_K (84 B): 16 scale bytes (low nibble scale, high nibble min, per 16 elements), 64 bytes of
//!   2-bit quants, `d`, `dmin`; value `d·sc·q − dmin·m`.
//! - Q3_K (110 B): 32 bytes high-bit mask, 64 bytes of 2-bit quants, 12 bytes of 16 packed 6-bit
//!   scales, `d`; value `d·(sc − 32)·(q − 4·!h)`.
//! - Q4_K (144 B): `d`, `dmin`, 12 bytes of 8 packed 6-bit scales and mins (per 32 elements),
//!   128 bytes of nibbles; value `d·sc·q − dmin·m`.
//! - Q5_K (176 B): as Q4_K with 32 bytes of fifth bits before the nibbles.
//! - Q6_K (210 B): 128 bytes low nibbles, 64 bytes of 2-bit highs, 16 i8 scales, `d`;
//!   value `d·sc·(q − 32)`.
//! - Q8_K (292 B): f32 `d`, 256 × i8, 16 × i16 sums of each 16 quants; value `d·q`.

use super::float::f16_at;

/// Elements per super-block.
pub(crate) const QK_K: usize = 256;

/// Byte sizes of the K blocks.
pub(crate) const Q2K_BYTES: usize = 84;
/// Byte size of a Q3_K block.
pub(crate) const Q3K_BYTES: usize = 110;
/// Byte size of a Q4_K block.
pub(crate) const Q4K_BYTES: usize = 144;
/// Byte size of a Q5_K block.
pub(crate) const Q5K_BYTES: usize = 176;
/// Byte size of a Q6_K block.
pub(crate) const Q6K_BYTES: usize = 210;
/// Byte size of a Q8_K block.
pub(crate) const Q8K_BYTES: usize = 292;

/// The f32 scale of a Q8_K block.
#[inline]
pub(crate) fn q8k_d(b: &[u8]) -> f32 {
    f32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// The sum of the 16 quants of group `g` of a Q8_K block.
#[inline]
pub(crate) fn q8k_bsum(b: &[u8], g: usize) -> i32 {
    let at = 4 + QK_K + 2 * g;
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
    let hmask = &b[0..32];
    let mut q = two_bits(&b[32..96]);
    for (k, dst) in q.chunks_exact_mut(32).enumerate() {
        for (d, &h) in dst.iter_mut().zip(hmask) {
            *d -= ((!h >> k) & 1) as i8 * 4;
        }
    }
    q
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
    let (ql, qh) = (&b[0..128], &b[128..192]);
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
    for (b, y) in src.chunks_exact(Q2K_BYTES).zip(dst.chunks_exact_mut(QK_K)) {
        let (d, dmin) = (f16_at(b, 80), f16_at(b, 82));
        let q = two_bits(&b[16..80]);
        for (g, (y, q)) in y.chunks_exact_mut(16).zip(q.chunks_exact(16)).enumerate() {
            let dl = d * f32::from(b[g] & 0x0f);
            let ml = dmin * f32::from(b[g] >> 4);
            for (y, &q) in y.iter_mut().zip(q) {
                *y = dl * f32::from(q) - ml;
            }
        }
    }
}

/// Dequantizes Q3_K blocks.
pub(crate) fn dequant_q3_k(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(Q3K_BYTES).zip(dst.chunks_exact_mut(QK_K)) {
        let d = f16_at(b, 108);
        let sc = q3k_scales(&b[96..108]);
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
    let size = if five { Q5K_BYTES } else { Q4K_BYTES };
    for (b, y) in src.chunks_exact(size).zip(dst.chunks_exact_mut(QK_K)) {
        let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
        let (sc, m) = q4k_scales_mins(&b[4..16]);
        let q = if five {
            q45k_values(Some(&b[16..48]), &b[48..176])
        } else {
            q45k_values(None, &b[16..144])
        };
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
    for (b, y) in src.chunks_exact(Q6K_BYTES).zip(dst.chunks_exact_mut(QK_K)) {
        let d = f16_at(b, 208);
        let q = q6k_values(b);
        for (g, (y, q)) in y.chunks_exact_mut(16).zip(q.chunks_exact(16)).enumerate() {
            let dl = d * f32::from(b[192 + g] as i8);
            for (y, &q) in y.iter_mut().zip(q) {
                *y = dl * f32::from(q);
            }
        }
    }
}

/// Dequantizes Q8_K blocks.
pub(crate) fn dequant_q8_k(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(Q8K_BYTES).zip(dst.chunks_exact_mut(QK_K)) {
        let d = q8k_d(b);
        for (y, &q) in y.iter_mut().zip(&b[4..4 + QK_K]) {
            *y = d * f32::from(q as i8);
        }
    }
}

/// Quantizes activations to Q8_K like ggml's reference: the element of largest magnitude maps to
/// −127, `q = min(127, round_half_even(x · −127 / max))`, `d = 1 / iscale` (f32), plus the
/// per-16 sums. An all-zero block stores `d = 0` and zero quants.
pub(crate) fn quantize_q8_k(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src.chunks_exact(QK_K).zip(dst.chunks_exact_mut(Q8K_BYTES)) {
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
        for (q, &v) in b[4..4 + QK_K].iter_mut().zip(x) {
            *q = (super::legacy::round_even_small(iscale * v) as i32).min(127) as i8 as u8;
        }
        for g in 0..QK_K / 16 {
            let s: i32 = b[4 + 16 * g..4 + 16 * (g + 1)]
                .iter()
                .map(|&q| i32::from(q as i8))
                .sum();
            let at = 4 + QK_K + 2 * g;
            b[at..at + 2].copy_from_slice(&(s as i16).to_le_bytes());
        }
        b[0..4].copy_from_slice(&(1.0 / iscale).to_le_bytes());
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
    for (x, y) in w
        .chunks_exact(Q2K_BYTES)
        .zip(a.chunks_exact(Q8K_BYTES))
        .take(nb)
    {
        let yd = q8k_d(y);
        let (dall, dmin) = (yd * f16_at(x, 80), yd * f16_at(x, 82));
        let summ: i32 = (0..16).map(|g| i32::from(x[g] >> 4) * q8k_bsum(y, g)).sum();
        let isum = grouped_isum(&two_bits(&x[16..80]), &y[4..260], 16, |g| {
            i32::from(x[g] & 0x0f)
        });
        sum += dall * isum as f32 - dmin * summ as f32;
    }
    sum
}

/// Scalar Q3_K × Q8_K.
pub(crate) fn dot_q3_k(nb: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0f32;
    for (x, y) in w
        .chunks_exact(Q3K_BYTES)
        .zip(a.chunks_exact(Q8K_BYTES))
        .take(nb)
    {
        let sc = q3k_scales(&x[96..108]);
        let isum = grouped_isum(&q3k_values(x), &y[4..260], 16, |g| sc[g]);
        sum += f16_at(x, 108) * q8k_d(y) * isum as f32;
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
    let isum = grouped_isum(q, &y[4..260], 32, |j| i32::from(sc[j]));
    (isum, q45k_min_sum(m, y))
}

/// Combines the integer parts of a Q4_K/Q5_K block with its scales.
#[inline]
pub(crate) fn q45k_combine(x: &[u8], y: &[u8], isum: i32, summ: i32) -> f32 {
    let yd = q8k_d(y);
    yd * f16_at(x, 0) * isum as f32 - yd * f16_at(x, 2) * summ as f32
}

/// Scalar Q4_K × Q8_K.
pub(crate) fn dot_q4_k(nb: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0f32;
    for (x, y) in w
        .chunks_exact(Q4K_BYTES)
        .zip(a.chunks_exact(Q8K_BYTES))
        .take(nb)
    {
        let (sc, m) = q4k_scales_mins(&x[4..16]);
        let (isum, summ) = q45k_isums(&q45k_values(None, &x[16..144]), &sc, &m, y);
        sum += q45k_combine(x, y, isum, summ);
    }
    sum
}

/// Scalar Q5_K × Q8_K.
pub(crate) fn dot_q5_k(nb: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0f32;
    for (x, y) in w
        .chunks_exact(Q5K_BYTES)
        .zip(a.chunks_exact(Q8K_BYTES))
        .take(nb)
    {
        let (sc, m) = q4k_scales_mins(&x[4..16]);
        let q = q45k_values(Some(&x[16..48]), &x[48..176]);
        let (isum, summ) = q45k_isums(&q, &sc, &m, y);
        sum += q45k_combine(x, y, isum, summ);
    }
    sum
}

/// Scalar Q6_K × Q8_K.
pub(crate) fn dot_q6_k(nb: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0f32;
    for (x, y) in w
        .chunks_exact(Q6K_BYTES)
        .zip(a.chunks_exact(Q8K_BYTES))
        .take(nb)
    {
        let isum = grouped_isum(&q6k_values(x), &y[4..260], 16, |g| {
            i32::from(x[192 + g] as i8)
        });
        sum += f16_at(x, 208) * q8k_d(y) * isum as f32;
    }
    sum
}

/// Scalar Q8_K × Q8_K (only for completeness: Q8_K is an activation format).
pub(crate) fn dot_q8_k(nb: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0f32;
    for (x, y) in w
        .chunks_exact(Q8K_BYTES)
        .zip(a.chunks_exact(Q8K_BYTES))
        .take(nb)
    {
        let isum = super::legacy::isum_i8(&x[4..260], &y[4..260]);
        sum += q8k_d(x) * q8k_d(y) * isum as f32;
    }
    sum
}
