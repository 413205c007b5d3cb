//! AVX2 + FMA + F16C kernels (x86-64) for the float types and the 32-element block formats; the
//! K formats live in `kquants` (AVX-512 prompt tiles in `ktile`, decoding kernels in
//! `kdecode`), IQ4_XS in `iq4xs` (IQ4_NL and MXFP4 are 32-element formats), the codebook formats in
//! `codebook`, the 32-element formats' tiles and decoding kernels in `tile`, `wide`, `decode`
//! and `decode_avx2`, F16's prompt tiles and AVX-512 kernels in `half`, the kernel table's
//! entries in `table`. Every block's integer products are
//! exact. For the 32-element block formats, lane `j` of a block sums the products of bytes
//! `4j..4j+4` and `16+4j..16+4j+4` (exact, as integers) and the block scale is applied with one
//! FMA per block into 4 f32 lanes; [`hsum4`] then sums them. Every x86 kernel of these formats
//! (tiles, decoding) keeps exactly this arithmetic, so each gives the same bits.
//!
//! Safety: every `unsafe fn` here requires AVX2, FMA and F16C (checked by the dispatcher) and
//! `nb` whole blocks (or elements, for float types) in both rows (guaranteed by `Kernels::dot`).

mod codebook;
mod decode;
mod decode_avx2;
mod half;
mod ilanes;
mod iq4xs;
mod kdecode;
mod klanes;
mod kquants;
mod ktile;
pub(super) mod table;
mod ternary;
mod tile;
mod wide;

use std::arch::x86_64::*;

use crate::quant::blocks::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1};

/// The IEEE half at `p` (2 bytes, little-endian) as f32.
#[inline]
pub(super) unsafe fn half(p: *const u8) -> f32 {
    crate::quant::float::f16_le([*p, *p.add(1)])
}

/// The first four bytes at `p` as a little-endian i32 (a block's scale, or scale and minimum).
#[inline]
pub(super) unsafe fn word(p: *const u8) -> i32 {
    i32::from_le(p.cast::<i32>().read_unaligned())
}

/// The product of the IEEE halves at `px` and `py` (f32 multiply of the exact widenings). Both
/// are converted with one `vcvtph2ps` from a zero-extended register, which avoids the false
/// dependency a single-lane insert would create on the accumulator.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn half_product(px: *const u8, py: *const u8) -> f32 {
    let hx = u32::from(u16::from_le_bytes([*px, *px.add(1)]));
    let hy = u32::from(u16::from_le_bytes([*py, *py.add(1)]));
    let v = _mm_cvtph_ps(_mm_cvtsi32_si128((hx | (hy << 16)) as i32));
    _mm_cvtss_f32(_mm_mul_ss(v, _mm_movehdup_ps(v)))
}

/// Horizontal sum of 8 f32 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn hsum_ps(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// Horizontal sum of 4 f32 lanes: `(v0 + v2) + (v1 + v3)`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn hsum4(v: __m128) -> f32 {
    let s = _mm_add_ps(v, _mm_movehl_ps(v, v));
    _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
}

/// The 8 i32 lanes of `v` folded to 4: lane `j` + lane `j + 4` (exact integer sums).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn fold(v: __m256i) -> __m128i {
    _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v))
}

/// How far ahead of the block being read each decoding kernel prefetches its row streams, in
/// bytes. Measured on a Zen 4 AVX-512 machine (SmolLM2 and Gemma 3 decoding, 1 and 2 threads):
/// 192 and 384 bytes gain 0-25%, 1024 loses 5%, and 512 loses 15% (a cliff: do not raise it
/// without measuring); on a Xeon the K formats gain 12-15% at 384.
pub(super) const PREFETCH: usize = 384;

/// Prefetches the cache lines of the `size`-byte block `PREFETCH` bytes after `p`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn prefetch(p: *const u8, size: usize) {
    for line in (0..size).step_by(64) {
        _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH + line).cast());
    }
}

/// 32 unaligned bytes at `p`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn load(p: *const u8) -> __m256i {
    _mm256_loadu_si256(p.cast())
}

/// Σ of products of unsigned bytes `ux` and signed bytes `sy`, as 8 i32 lanes (each lane sums
/// 4 adjacent products; pairs must not overflow i16).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_us(ux: __m256i, sy: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(ux, sy), _mm256_set1_epi16(1))
}

/// Σ of products of two signed byte vectors (operands in −127..=127) as 8 i32 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_ss(x: __m256i, y: __m256i) -> __m256i {
    dot_us(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x))
}

/// The 32 nibbles of 16 bytes at `p` in element order (low nibbles, then high nibbles).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn nibbles(p: *const u8) -> __m256i {
    let t = _mm_loadu_si128(p.cast());
    let hi = _mm_srli_epi16(t, 4);
    _mm256_and_si256(_mm256_set_m128i(hi, t), _mm256_set1_epi8(0x0f))
}

/// The 16 levels of a [`tile::Codes::Levels`] format in both 128-bit lanes, as the byte
/// shuffle's table: signed, or flipped to unsigned (`+ 128`) for the VNNI kernels when `flip`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn level_table(levels: &[i8; 16], flip: bool) -> __m256i {
    let t = _mm_loadu_si128(levels.as_ptr().cast());
    let t = if flip {
        _mm_xor_si128(t, _mm_set1_epi8(-128))
    } else {
        t
    };
    _mm256_broadcastsi128_si256(t)
}

/// 0x10 in byte `i` where bit `i` of the little-endian u32 at `p` is set, else 0.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn fifth_bits(p: *const u8) -> __m256i {
    let h = u32::from_le_bytes([*p, *p.add(1), *p.add(2), *p.add(3)]);
    let spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(h as i32),
        _mm256_set_epi64x(
            0x0303_0303_0303_0303,
            0x0202_0202_0202_0202,
            0x0101_0101_0101_0101,
            0,
        ),
    );
    let sel = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    let set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, sel), sel);
    _mm256_and_si256(set, _mm256_set1_epi8(0x10))
}

/// Q8_0 × Q8_0.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_q8_0(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let (xp, yp) = (x.as_ptr(), y.as_ptr());
    let mut acc = _mm_setzero_ps();
    for b in 0..nb {
        type B = BlockQ8_0;
        let (xb, yb) = (xp.add(B::SIZE * b), yp.add(B::SIZE * b));
        let d = _mm_set1_ps(half_product(xb.add(B::D), yb.add(B::D)));
        let p = dot_ss(load(xb.add(B::QS)), load(yb.add(B::QS)));
        acc = _mm_fmadd_ps(d, _mm_cvtepi32_ps(fold(p)), acc);
    }
    hsum4(acc)
}

/// Q4_0 × Q8_0.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_q4_0(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let (xp, yp) = (x.as_ptr(), y.as_ptr());
    let mut acc = _mm_setzero_ps();
    for b in 0..nb {
        type W = BlockQ4_0;
        type A = BlockQ8_0;
        let (xb, yb) = (xp.add(W::SIZE * b), yp.add(A::SIZE * b));
        let d = _mm_set1_ps(half_product(xb.add(W::D), yb.add(A::D)));
        let q = _mm256_sub_epi8(nibbles(xb.add(W::QS)), _mm256_set1_epi8(8));
        let p = dot_ss(q, load(yb.add(A::QS)));
        acc = _mm_fmadd_ps(d, _mm_cvtepi32_ps(fold(p)), acc);
    }
    hsum4(acc)
}

/// Q5_0 × Q8_0.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_q5_0(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let (xp, yp) = (x.as_ptr(), y.as_ptr());
    let mut acc = _mm_setzero_ps();
    for b in 0..nb {
        type W = BlockQ5_0;
        type A = BlockQ8_0;
        let (xb, yb) = (xp.add(W::SIZE * b), yp.add(A::SIZE * b));
        let d = _mm_set1_ps(half_product(xb.add(W::D), yb.add(A::D)));
        let q = _mm256_or_si256(nibbles(xb.add(W::QS)), fifth_bits(xb.add(W::QH)));
        let q = _mm256_sub_epi8(q, _mm256_set1_epi8(16));
        let p = dot_ss(q, load(yb.add(A::QS)));
        acc = _mm_fmadd_ps(d, _mm_cvtepi32_ps(fold(p)), acc);
    }
    hsum4(acc)
}

/// Q4_1 × Q8_1: `Σ (dx·dy)·Σqx·qy` in 4 lanes plus the scalar `Σ mx·sy`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_q4_1(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let (xp, yp) = (x.as_ptr(), y.as_ptr());
    let mut acc = _mm_setzero_ps();
    let mut summs = 0f32;
    for b in 0..nb {
        type W = BlockQ4_1;
        type A = BlockQ8_1;
        let (xb, yb) = (xp.add(W::SIZE * b), yp.add(A::SIZE * b));
        summs += half_product(xb.add(W::M), yb.add(A::S));
        let d = _mm_set1_ps(half_product(xb.add(W::D), yb.add(A::D)));
        let p = dot_us(nibbles(xb.add(W::QS)), load(yb.add(A::QS)));
        acc = _mm_fmadd_ps(d, _mm_cvtepi32_ps(fold(p)), acc);
    }
    hsum4(acc) + summs
}

/// Q5_1 × Q8_1.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_q5_1(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let (xp, yp) = (x.as_ptr(), y.as_ptr());
    let mut acc = _mm_setzero_ps();
    let mut summs = 0f32;
    for b in 0..nb {
        type W = BlockQ5_1;
        type A = BlockQ8_1;
        let (xb, yb) = (xp.add(W::SIZE * b), yp.add(A::SIZE * b));
        summs += half_product(xb.add(W::M), yb.add(A::S));
        let d = _mm_set1_ps(half_product(xb.add(W::D), yb.add(A::D)));
        let q = _mm256_or_si256(nibbles(xb.add(W::QS)), fifth_bits(xb.add(W::QH)));
        let p = dot_us(q, load(yb.add(A::QS)));
        acc = _mm_fmadd_ps(d, _mm_cvtepi32_ps(fold(p)), acc);
    }
    hsum4(acc) + summs
}

/// Float dot product body: 4 × 8 f32 FMA lanes over steps of 32 elements (ggml's layout), the
/// tail summed in f64. `$load8(i)` yields the (x, y) f32 lanes of elements `i..i + 8` and
/// `$one(i)` the product of element `i`.
macro_rules! float_dot {
    ($n:expr, |$i:ident| $load8:expr, |$j:ident| $one:expr) => {{
        let n: usize = $n;
        let mut acc = [_mm256_setzero_ps(); 4];
        let main = n - n % 32;
        for base in (0..main).step_by(32) {
            for (k, a) in acc.iter_mut().enumerate() {
                let $i = base + 8 * k;
                let (xv, yv) = $load8;
                *a = _mm256_fmadd_ps(xv, yv, *a);
            }
        }
        let total = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
        let mut sum = f64::from(hsum_ps(total));
        for $j in main..n {
            sum += f64::from($one);
        }
        sum as f32
    }};
}

/// F32 × F32.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_f32(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let (xp, yp) = (x.as_ptr().cast::<f32>(), y.as_ptr().cast::<f32>());
    float_dot!(
        n,
        |i| (_mm256_loadu_ps(xp.add(i)), _mm256_loadu_ps(yp.add(i))),
        |i| xp.add(i).read_unaligned() * yp.add(i).read_unaligned()
    )
}

/// F16 × F16 (both converted to f32 lanes).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_f16(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let (xp, yp) = (x.as_ptr(), y.as_ptr());
    float_dot!(
        n,
        |i| (
            _mm256_cvtph_ps(_mm_loadu_si128(xp.add(2 * i).cast())),
            _mm256_cvtph_ps(_mm_loadu_si128(yp.add(2 * i).cast()))
        ),
        |i| half_product(xp.add(2 * i), yp.add(2 * i))
    )
}

/// 8 bfloat16 values at `p` widened to f32 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn bf16x8(p: *const u8) -> __m256 {
    let wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(p.cast()));
    _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16))
}

/// The bfloat16 at `p` as f32.
#[inline]
unsafe fn bf16(p: *const u8) -> f32 {
    f32::from_bits(u32::from(u16::from_le_bytes([*p, *p.add(1)])) << 16)
}

/// BF16 × BF16.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_bf16(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let (xp, yp) = (x.as_ptr(), y.as_ptr());
    float_dot!(
        n,
        |i| (bf16x8(xp.add(2 * i)), bf16x8(yp.add(2 * i))),
        |i| bf16(xp.add(2 * i)) * bf16(yp.add(2 * i))
    )
}

/// Quantizes 32 values to i8 with multiplier `id` (round to nearest even, the default MXCSR
/// mode, as `legacy::round_even_small`) into `qs`; returns Σq. Finite inputs only give the
/// portable quantizer's bytes (a NaN becomes −128 here, 0 there).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn quantize_32(x: *const f32, id: f32, qs: *mut u8) -> i32 {
    let m = _mm256_set1_ps(id);
    let q: [__m256i; 4] = std::array::from_fn(|k| {
        _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x.add(8 * k)), m))
    });
    let sum = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    // Pack 32 i32 to 32 i8 (saturating; values are within −127..=127), then undo the lane
    // interleaving of the two packs.
    let w = _mm256_packs_epi16(
        _mm256_packs_epi32(q[0], q[1]),
        _mm256_packs_epi32(q[2], q[3]),
    );
    let w = _mm256_permutevar8x32_epi32(w, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(qs.cast(), w);
    let s = _mm_add_epi32(
        _mm256_castsi256_si128(sum),
        _mm256_extracti128_si256(sum, 1),
    );
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01_00_11_10));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b10_11_00_01));
    _mm_cvtsi128_si32(s)
}

/// The largest |x| of 32 values.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn amax_32(x: *const f32) -> f32 {
    let abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fff_ffff));
    let v: [__m256; 4] = std::array::from_fn(|k| _mm256_and_ps(_mm256_loadu_ps(x.add(8 * k)), abs));
    let m = _mm256_max_ps(_mm256_max_ps(v[0], v[1]), _mm256_max_ps(v[2], v[3]));
    let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)))
}

/// One Q8_0/Q8_1 activation block like `legacy::quantize_q8_block` (same bytes): writes the 32
/// quants to `qs` and returns `(d, Σq)`.
///
/// # Safety
/// AVX2, FMA and F16C must be present.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn quantize_q8_block(x: &[f32], qs: &mut [u8]) -> (f32, i32) {
    assert!(x.len() == 32 && qs.len() == 32);
    // Both slices hold 32 elements (asserted); the caller guarantees the features.
    let amax = amax_32(x.as_ptr());
    let d = amax / 127.0;
    let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
    (d, quantize_32(x.as_ptr(), id, qs.as_mut_ptr()))
}

/// Quantizes activations to Q8_K like `kquants::quantize_q8_k` (same bytes): the largest
/// magnitude (NaN loses, the first such element gives the sign), `q = round_ties_even(x · iscale)`
/// as the portable code's saturating `as i32`, `min(127)` and truncating `as i8` (so `+∞` → 127,
/// `−∞` and NaN → 0), 16-element sums and `d = 1 / iscale`.
///
/// # Safety
/// AVX2, FMA and F16C. Whole blocks of `src` and `dst` are used (as in the portable quantizer).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn quantize_q8_k(src: &[f32], dst: &mut [u8]) {
    type B = crate::quant::blocks::BlockQ8_K;
    const QK_K: usize = 256;
    let abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fff_ffff));
    let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (x, b) in src.chunks_exact(QK_K).zip(dst.chunks_exact_mut(B::SIZE)) {
        let xp = x.as_ptr();
        // `max_ps(a, m)` returns `m` when `a` is NaN: NaN loses, as in the strict `>` scan.
        let mut m = _mm256_setzero_ps();
        for i in 0..QK_K / 8 {
            m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(xp.add(8 * i)), abs_mask), m);
        }
        let mut lanes = [0f32; 8];
        _mm256_storeu_ps(lanes.as_mut_ptr(), m);
        let amax = lanes.iter().copied().fold(0f32, f32::max);
        if amax == 0.0 {
            b.fill(0);
            continue;
        }
        let max = x.iter().copied().find(|v| v.abs() == amax).unwrap_or(amax);
        let iscale = -127.0 / max;
        let scale = _mm256_set1_ps(iscale);
        let qs = b.as_mut_ptr().add(B::QS);
        for c in 0..QK_K / 32 {
            let q: [__m256i; 4] = std::array::from_fn(|k| {
                let v = _mm256_mul_ps(_mm256_loadu_ps(xp.add(32 * c + 8 * k)), scale);
                let r = _mm256_min_epi32(_mm256_cvtps_epi32(v), _mm256_set1_epi32(127));
                // Non-finite products convert to i32::MIN: +∞ gives 127, the rest 0.
                let bad = _mm256_cmpeq_epi32(r, _mm256_set1_epi32(i32::MIN));
                let pinf = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_EQ_OQ>(
                    v,
                    _mm256_set1_ps(f32::INFINITY),
                ));
                let fixed = _mm256_and_si256(pinf, _mm256_set1_epi32(127));
                _mm256_blendv_epi8(r, fixed, bad)
            });
            // In range now, so the saturating packs are the truncating `as i8`.
            let bytes = _mm256_packs_epi16(
                _mm256_packs_epi32(q[0], q[1]),
                _mm256_packs_epi32(q[2], q[3]),
            );
            let bytes = _mm256_permutevar8x32_epi32(bytes, order);
            _mm256_storeu_si256(qs.add(32 * c).cast(), bytes);
            for h in 0..2 {
                let sum = _mm256_add_epi32(q[2 * h], q[2 * h + 1]);
                let s = _mm_add_epi32(
                    _mm256_castsi256_si128(sum),
                    _mm256_extracti128_si256::<1>(sum),
                );
                let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
                let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
                let at = B::BSUMS + 2 * (2 * c + h);
                b[at..at + 2].copy_from_slice(&(_mm_cvtsi128_si32(s) as i16).to_le_bytes());
            }
        }
        b[B::D..B::D + 4].copy_from_slice(&(1.0 / iscale).to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::quantize_q8_block;
    use crate::quant::legacy;

    #[test]
    fn simd_block_quantizer_equals_the_portable_one() {
        if !(std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c"))
        {
            eprintln!("no AVX2/FMA/F16C: nothing to compare");
            return;
        }
        // SAFETY: the features were detected above.
        let simd = |x: &[f32], q: &mut [u8]| unsafe { quantize_q8_block(x, q) };
        let mut seed = 0x2545_f491u32;
        for case in 0..2000 {
            let x: Vec<f32> = (0..32)
                .map(|i| {
                    seed ^= seed << 13;
                    seed ^= seed >> 17;
                    seed ^= seed << 5;
                    let v = (seed % 2001) as f32 - 1000.0;
                    // Every 4th case: exact ties after scaling (multiples of amax/254).
                    if case % 4 == 0 {
                        (i as f32 - 16.0) * 0.5
                    } else {
                        v * 0.001 * (case as f32 + 1.0)
                    }
                })
                .collect();
            let (mut a, mut b) = ([0u8; 32], [0u8; 32]);
            let ra = simd(&x, &mut a);
            let rb = legacy::quantize_q8_block(&x, &mut b);
            assert_eq!(
                (ra.0.to_bits(), ra.1, a),
                (rb.0.to_bits(), rb.1, b),
                "{x:?}"
            );
        }
        let zeros = [0f32; 32];
        let (mut a, mut b) = ([1u8; 32], [1u8; 32]);
        assert_eq!(
            simd(&zeros, &mut a),
            legacy::quantize_q8_block(&zeros, &mut b)
        );
        assert_eq!(a, b);
    }

    #[test]
    fn simd_q8_k_quantizer_equals_the_portable_one() {
        if !(std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c"))
        {
            eprintln!("no AVX2/FMA/F16C: nothing to compare");
            return;
        }
        // The shared awkward rows, then rows with −∞ and with random bit patterns.
        let mut rows = crate::quant::kquants::quantizer_test_rows();
        let mut seed = 0x2545_f491u32;
        for case in 0..200 {
            rows.push(
                (0..256)
                    .map(|i| {
                        seed ^= seed << 13;
                        seed ^= seed >> 17;
                        seed ^= seed << 5;
                        if case % 2 == 0 && i % 90 == 5 {
                            f32::NEG_INFINITY
                        } else if case % 2 == 0 {
                            (seed % 2001) as f32 - 1000.0
                        } else {
                            f32::from_bits(seed)
                        }
                    })
                    .collect(),
            );
        }
        for (case, x) in rows.iter().enumerate() {
            let (mut a, mut b) = (vec![1u8; 292], vec![2u8; 292]);
            // SAFETY: the features were detected above; whole blocks.
            unsafe { super::quantize_q8_k(x, &mut a) };
            crate::quant::kquants::quantize_q8_k(x, &mut b);
            assert_eq!(a, b, "case {case}");
        }
    }
}
