//! The AVX-512 prompt-processing tile for the 32-element block formats ([`Block32`]):
//! 4 weight rows × 8 tokens per call, on 512-bit registers that each hold four tokens' 4 lanes.
//!
//! A matmul first packs its quantized activations ([`pack`]), 8 tokens at a time: per block,
//! the first 16 quants of each group of four tokens side by side in one 64-byte line and the
//! last 16 in another (so two `vpdpbusd`s serve four tokens against the weight block's halves
//! broadcast to all four 128-bit lanes), each group's offset corrections (`−offset · Σ` of each
//! pair of 4-byte groups `4j..4j+4` and `16+4j..16+4j+4`: the weight codes are used unsigned,
//! so every product carries `offset · a` too much; computed once per matmul instead of once per
//! group of rows) and the 8 tokens' scales (and Q8_1 sums). The inner (row, group) step is then
//! two `vpdpbusd`s starting from the loaded corrections, one conversion, one multiply for the
//! scale products and one FMA.
//!
//! Each (row, token) keeps the arithmetic of the one-row kernel ([`super::Kernels::dot`], see
//! `super::x86`): 4 f32 lanes, one FMA per block with `f32(d_w)·f32(d_a)`, lane `j` the exact
//! integer sum of the products of bytes `4j..4j+4` and `16+4j..16+4j+4`, one horizontal sum in
//! the same order, plus `Σ m·s` for the formats with a minimum — so every result is
//! bit-identical.

use std::arch::x86_64::*;

use super::tile::{vnni_shift, weight_halves, Block32, Codes};
use super::{fold, level_table, load};
use crate::quant::kernels::PackLine;

/// Tokens per wide tile.
pub(super) const TOKENS: usize = 8;

/// Packed lines per block of 8 tokens: 2 groups' quants (2 lines each), 2 groups'
/// corrections, the scales.
pub(super) const LINES: usize = 7;

/// The 4 correction lanes of the 32 activation quants at `q` for weights `B`: lane `j` is
/// `−offset · Σ` of bytes `4j..4j+4` and `16+4j..16+4j+4` (zero without an offset).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni,avx512bw")]
pub(super) unsafe fn corrections<B: Block32>(q: *const u8) -> __m128i {
    let Some(s) = vnni_shift::<B>() else {
        return _mm_setzero_si128();
    };
    let sums = fold(_mm256_dpbusd_epi32(
        _mm256_setzero_si256(),
        _mm256_set1_epi8(1),
        load(q),
    ));
    _mm_sub_epi32(
        _mm_setzero_si128(),
        _mm_sll_epi32(sums, _mm_cvtsi32_si128(s as i32)),
    )
}

/// Pack 8 quantized activation rows of `nb` blocks (in the activation type of weights `B`)
/// into `out` (`LINES × nb` lines): per block, line `2g` the first 16 quants of tokens
/// `4g..4g + 4` (one 16-byte lane each), line `2g + 1` their last 16, line `4 + g` their
/// [`corrections`] as i32 lanes, line 6 the tokens' `d` (f32 lanes 0..8) and Q8_1 `s` (lanes
/// 8..16).
///
/// # Safety
/// AVX2, FMA, F16C and AVX-512 F/VL/VNNI/BW must be present.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni,avx512bw")]
pub(super) unsafe fn pack<B: Block32>(nb: usize, acts: [&[u8]; TOKENS], out: &mut [PackLine]) {
    let (asize, aq) = (B::ACT_SIZE, B::ACT_QS);
    for (b, lines) in out.chunks_exact_mut(LINES).take(nb).enumerate() {
        let mut scales = [0f32; 16];
        for (t, act) in acts.iter().enumerate() {
            let block = &act[asize * b..asize * (b + 1)];
            let q = &block[aq..aq + 32];
            let (group, lane) = (t / 4, 16 * (t % 4));
            lines[2 * group].0[lane..lane + 16].copy_from_slice(&q[..16]);
            lines[2 * group + 1].0[lane..lane + 16].copy_from_slice(&q[16..]);
            let corr = lines[4 + group].0[lane..lane + 16].as_mut_ptr();
            _mm_storeu_si128(corr.cast(), corrections::<B>(q.as_ptr()));
            let half_at = |i: usize| half::f16::from_le_bytes([block[i], block[i + 1]]).to_f32();
            scales[t] = half_at(0);
            if B::MIN {
                scales[8 + t] = half_at(2);
            }
        }
        for (dst, v) in lines[6].0.chunks_exact_mut(4).zip(scales) {
            dst.copy_from_slice(&v.to_le_bytes());
        }
    }
}

/// The 16 bytes at `p` in all four 128-bit lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni,avx512bw")]
pub(super) unsafe fn broadcast16(p: *const u8) -> __m512i {
    _mm512_broadcast_i32x4(_mm_loadu_si128(p.cast()))
}

/// The low and the high nibbles of the bytes of `x` (the first and the last 16 quants of the
/// 4-bit formats' blocks in each 128-bit lane).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni,avx512bw")]
pub(super) unsafe fn nibbles(x: __m512i) -> [__m512i; 2] {
    let low = _mm512_set1_epi8(0x0f);
    [
        _mm512_and_si512(x, low),
        _mm512_and_si512(_mm512_srli_epi16::<4>(x), low),
    ]
}

/// The fifth bits of the 5-bit formats: 16 added to the bytes of `halves[0]` whose bit is set in `first` and to
/// those of `halves[1]` set in `last`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni,avx512bw")]
pub(super) unsafe fn fifth_bits(halves: [__m512i; 2], first: u64, last: u64) -> [__m512i; 2] {
    let sixteen = _mm512_set1_epi8(16);
    let [lo, hi] = halves;
    [
        _mm512_mask_add_epi8(lo, _cvtu64_mask64(first), lo, sixteen),
        _mm512_mask_add_epi8(hi, _cvtu64_mask64(last), hi, sixteen),
    ]
}

/// The `B` block at `p`'s first and last 16 quants as unsigned bytes (signed bytes flipped by
/// 128), each in all four 128-bit lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni,avx512bw")]
unsafe fn quants<B: Block32>(p: *const u8) -> [__m512i; 2] {
    match B::CODES {
        Codes::Bytes => {
            let flip = _mm512_set1_epi8(-128);
            let qs = p.add(B::QS);
            [qs, qs.add(16)].map(|q| _mm512_xor_si512(broadcast16(q), flip))
        }
        Codes::Nibbles => nibbles(broadcast16(p.add(B::QS))),
        Codes::Levels(levels) => {
            let table = _mm512_broadcast_i32x4(_mm256_castsi256_si128(level_table(levels, true)));
            nibbles(broadcast16(p.add(B::QS))).map(|q| _mm512_shuffle_epi8(table, q))
        }
        Codes::Nibbles5 { qh } => {
            let h = u64::from(u32::from_le(p.add(qh).cast::<u32>().read_unaligned()));
            // Each row's 16 bits in all four lanes.
            let every = 0x0001_0001_0001_0001u64;
            let halves = nibbles(broadcast16(p.add(B::QS)));
            fifth_bits(halves, (h & 0xffff) * every, (h >> 16) * every)
        }
    }
}

/// Each 128-bit lane's [`super::hsum4`] (`(v0 + v2) + (v1 + v3)`) in its first lane.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni,avx512bw")]
pub(super) unsafe fn hsum4x4(v: __m512) -> __m512 {
    let u = _mm512_add_ps(v, _mm512_permute_ps::<0b01_00_11_10>(v));
    _mm512_add_ps(u, _mm512_permute_ps::<0b10_11_00_01>(u))
}

/// 4 weight rows × 8 packed tokens for weights `B`.
///
/// # Safety
/// AVX2, FMA, F16C and AVX-512 F/VL/VNNI/BW must be present; every row pointer must have `nb`
/// whole blocks behind it and `packed` `LINES × nb` lines written by [`pack`] for the same `B`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni,avx512bw")]
pub(super) unsafe fn tile<B: Block32>(
    nb: usize,
    w: [*const u8; 4],
    packed: *const PackLine,
) -> [[f32; TOKENS]; 4] {
    let wsize = B::SIZE;
    // Lane group i (4 lanes) takes token 4g + i's scale.
    let index: [__m512i; 2] = std::array::from_fn(|g| {
        let t = |i: i32| 4 * g as i32 + i;
        let (a, b, c, d) = (t(0), t(1), t(2), t(3));
        _mm512_setr_epi32(a, a, a, a, b, b, b, b, c, c, c, c, d, d, d, d)
    });
    let mut acc = [[_mm512_setzero_ps(); 2]; 4];
    let mut summs = [_mm256_setzero_ps(); 4];
    for b in 0..nb {
        let lines = packed.add(LINES * b);
        let scales = lines.add(6).cast::<f32>();
        let ad8 = _mm512_castps256_ps512(_mm256_load_ps(scales));
        let asum = _mm256_load_ps(scales.add(8));
        let ad: [__m512; 2] = index.map(|i| _mm512_permutexvar_ps(i, ad8));
        for r in 0..4 {
            let p = w[r].add(wsize * b);
            let [lo, hi] = quants::<B>(p);
            let dm = weight_halves::<B>(p);
            let dw = _mm512_broadcastss_ps(dm);
            if B::MIN {
                let m = _mm256_broadcastss_ps(_mm_movehdup_ps(dm));
                summs[r] = _mm256_add_ps(summs[r], _mm256_mul_ps(m, asum));
            }
            for (g, adg) in ad.iter().enumerate() {
                let start = if B::MIN {
                    _mm512_setzero_si512()
                } else {
                    _mm512_load_si512(lines.add(4 + g).cast())
                };
                let first =
                    _mm512_dpbusd_epi32(start, lo, _mm512_load_si512(lines.add(2 * g).cast()));
                let lanes =
                    _mm512_dpbusd_epi32(first, hi, _mm512_load_si512(lines.add(2 * g + 1).cast()));
                let d = _mm512_mul_ps(dw, *adg);
                acc[r][g] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(lanes), acc[r][g]);
            }
        }
    }
    let mut out = [[0f32; TOKENS]; 4];
    for (r, groups) in acc.iter().enumerate() {
        let mut mins = [0f32; 8];
        _mm256_storeu_ps(mins.as_mut_ptr(), summs[r]);
        for (g, &v) in groups.iter().enumerate() {
            let mut lanes = [0f32; 16];
            _mm512_storeu_ps(lanes.as_mut_ptr(), hsum4x4(v));
            for i in 0..4 {
                let t = 4 * g + i;
                out[r][t] = lanes[4 * i];
                if B::MIN {
                    out[r][t] += mins[t];
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::tile::tests::{check_kernel, wide_features, Kernel};
    use super::*;

    struct Wide;

    impl Kernel<4, TOKENS> for Wide {
        unsafe fn run<B: Block32>(
            &self,
            nb: usize,
            w: [*const u8; 4],
            a: [*const u8; TOKENS],
        ) -> [[f32; TOKENS]; 4] {
            let acts = a.map(|p| std::slice::from_raw_parts(p, B::ACT_SIZE * nb));
            let mut packed = vec![PackLine([0; 64]); LINES * nb];
            pack::<B>(nb, acts, &mut packed);
            tile::<B>(nb, w, packed.as_ptr())
        }
    }

    #[test]
    fn the_wide_tile_is_bit_identical_to_the_single_row_kernels() {
        if wide_features() {
            check_kernel::<4, TOKENS>("wide", 0x1234_5678_9abc_def1, &Wide);
        }
    }
}
