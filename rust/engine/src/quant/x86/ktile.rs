//! Helpers the AVX-512 K kernels share (`kdecode`, `klanes`): reading Q4_K/Q6_K blocks and
//! Q8_K activations, `vpdpwssd`, and the Q6_K quants unpacked 64 at a time.
//!
//! Safety: requires AVX2, FMA, F16C and AVX-512 F/VL/BW/VNNI, and `nb` whole super-blocks in
//! every row.

use std::arch::x86_64::*;

use super::load;
use crate::quant::blocks::{BlockQ6_K, BlockQ8_K};

/// Byte offset of super-block `b`'s Q8_K block in an activation row.
#[inline]
pub(super) fn q8k_at(b: usize) -> usize {
    BlockQ8_K::SIZE * b
}

/// The f32 scale of the Q8_K block at `p`.
#[inline]
pub(super) unsafe fn q8k_scale(p: *const u8) -> f32 {
    p.add(BlockQ8_K::D).cast::<f32>().read_unaligned()
}

/// The little-endian u32 at `p`.
#[inline]
unsafe fn u32_at(p: *const u8) -> u32 {
    u32::from_le(p.cast::<u32>().read_unaligned())
}

/// The IEEE halves at `p` and `p + 2` (Q4_K's `d` and `dmin`) widened exactly to f32.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn halves(p: *const u8) -> (f32, f32) {
    let v = _mm_cvtph_ps(_mm_cvtsi32_si128(u32_at(p) as i32));
    (_mm_cvtss_f32(v), _mm_cvtss_f32(_mm_movehdup_ps(v)))
}

/// The IEEE half at `p` widened exactly to f32.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn half(p: *const u8) -> f32 {
    let h = u16::from_le(p.cast::<u16>().read_unaligned());
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(h))))
}

/// The eight 6-bit scales and eight 6-bit mins of a Q4_K block's 12 packed bytes at `s`, as
/// bytes of two u64 (scale/min `j` in byte `j`); the word-wise form of `q4k_scales_mins`.
#[inline]
pub(super) unsafe fn q4k_scales_mins_words(s: *const u8) -> (u64, u64) {
    let (a, b, c) = (u32_at(s), u32_at(s.add(4)), u32_at(s.add(8)));
    const LOW6: u32 = 0x3f3f_3f3f;
    const LOW4: u32 = 0x0f0f_0f0f;
    const TOP2: u32 = 0x0303_0303;
    let sc_hi = (c & LOW4) | (((a >> 6) & TOP2) << 4);
    let m_hi = ((c >> 4) & LOW4) | (((b >> 6) & TOP2) << 4);
    (
        u64::from(a & LOW6) | (u64::from(sc_hi) << 32),
        u64::from(b & LOW6) | (u64::from(m_hi) << 32),
    )
}

/// A `pshufb` mask that broadcasts i16 word `lo` (of a 128-bit lane) to the low lane and word
/// `hi` to the high lane.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn word_mask(lo: i32, hi: i32) -> __m256i {
    let w = |i: i32| _mm_set1_epi16(((2 * i) | ((2 * i + 1) << 8)) as i16);
    _mm256_set_m128i(w(hi), w(lo))
}

/// A `pshufb` mask that broadcasts i16 word `w[i]` (of a 128-bit lane) to 128-bit lane `i`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw")]
pub(super) unsafe fn word_mask4(w: [i32; 4]) -> __m512i {
    let lo = _mm512_castsi256_si512(word_mask(w[0], w[1]));
    _mm512_inserti64x4(lo, word_mask(w[2], w[3]), 1)
}

/// A VNNI instruction `$insn acc, a, b` as a function, written as assembly because LLVM's
/// generic tuning splits the intrinsics (`vpdpwssd` into `vpmaddwd` + `vpaddd`: twice the
/// instructions and more live registers in these register-bound loops).
macro_rules! vnni {
    ($(#[$doc:meta])* $name:ident, $insn:literal) => {
        $(#[$doc])*
        #[inline]
        #[target_feature(enable = "avx512f,avx512vnni")]
        pub(super) unsafe fn $name(acc: __m512i, a: __m512i, b: __m512i) -> __m512i {
            let mut acc = acc;
            std::arch::asm!(
                concat!($insn, " {acc}, {a}, {b}"),
                acc = inout(zmm_reg) acc,
                a = in(zmm_reg) a,
                b = in(zmm_reg) b,
                options(pure, nomem, nostack, preserves_flags),
            );
            acc
        }
    };
}

vnni!(
    /// `acc + Σ pairs a·b` (i16 pairs into i32 lanes) as one `vpdpwssd`.
    dpwssd,
    "vpdpwssd"
);
vnni!(
    /// `acc + Σ` of the products of unsigned bytes `a` and signed bytes `b`, four per i32
    /// lane, as one `vpdpbusd`.
    dpbusd,
    "vpdpbusd"
);

/// Unpacks Q6_K quants two 32-quant chunks at a time.
#[derive(Clone, Copy)]
pub(super) struct Q6kBits {
    m4: __m512i,
    m30: __m512i,
    /// The shifts of the high 2-bit parts of chunks 4n..4n+4: `h << 4`, `h << 2`, `h`, `h >> 2`.
    high_shift: [__m512i; 2],
}

impl Q6kBits {
    /// The constants.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw")]
    pub(super) unsafe fn new() -> Self {
        Q6kBits {
            m4: _mm512_set1_epi8(0x0f),
            m30: _mm512_set1_epi8(0x30),
            high_shift: [
                _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1),
                _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1),
            ],
        }
    }

    /// The unsigned quants (0..=63) of chunks `4n + 2p` (low 256 bits) and `4n + 2p + 1` (high
    /// 256 bits) of the Q6_K block at `xp`.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw")]
    pub(super) unsafe fn chunks(&self, xp: *const u8, n: usize, p: usize) -> __m512i {
        let l = _mm512_loadu_si512(xp.add(BlockQ6_K::QL + 64 * n).cast());
        let h = _mm512_broadcast_i64x4(load(xp.add(BlockQ6_K::QH + 32 * n)));
        let (l, h) = if p == 0 {
            (l, _mm512_sllv_epi16(h, self.high_shift[0]))
        } else {
            (
                _mm512_srli_epi16(l, 4),
                _mm512_srlv_epi16(h, self.high_shift[1]),
            )
        };
        _mm512_or_si512(_mm512_and_si512(l, self.m4), _mm512_and_si512(h, self.m30))
    }
}
