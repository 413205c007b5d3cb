//! aarch64 Advanced SIMD kernels: the shared machinery (instruction levels, `sdot`/`smmla`),
//! the 32-element formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4) and the Q8_0/Q8_1
//! block quantizer. The K formats (and IQ4_XS) are in `kquants`, the float types in `float`, the kernel table's entries in
//! `table`.
//!
//! Every kernel computes each block's exact integer sum with vector instructions and applies the
//! block scales with the same f32 operations, in the same order, as the portable kernel, so the
//! results equal the portable ones bit for bit (integer sums can be reordered freely; float
//! operations are not).
//!
//! Each kernel body is written once, generic over `DOT` (use `sdot`) and `MM` (use `smmla` in
//! tiles), and compiled three times by [`run`] inside functions with the matching target
//! features. `sdot` and `smmla` are emitted with `asm!`: their intrinsics (`vdotq_s32`,
//! `vmmlaq_s32`) are still unstable (`stdarch_neon_dotprod`, `stdarch_neon_i8mm`) and the host
//! and phone builds use stable Rust.

mod float;
pub(super) mod kquants;
pub(super) mod table;

use std::arch::aarch64::*;
use std::arch::asm;
use std::marker::PhantomData;

use crate::quant::blocks::{
    BlockIQ4_NL, BlockMXFP4, BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1, QK,
};
use crate::quant::float::f16_le;
use crate::quant::nonlinear::{e8m0_half, IQ4NL_LEVELS, MXFP4_LEVELS};

/// The integer instructions the NEON kernels may use (the aarch64 levels of `quant/mod.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Isa {
    /// Base Advanced SIMD: widening multiplies (`smull`) and pairwise adds.
    Neon,
    /// The dot-product extension: `sdot`.
    Dotprod,
    /// Dot product plus the int8 matrix multiply extension: `smmla`.
    I8mm,
}

/// A kernel body, generic over the instructions it may use; [`run`] compiles it per level.
pub(super) trait Kernel {
    /// The kernel's result.
    type Out;
    /// Runs the kernel with `sdot` when `DOT` and `smmla` when `MM`.
    ///
    /// # Safety
    /// The CPU must have NEON, plus dotprod when `DOT` and i8mm when `MM`; the kernel's own
    /// pointer requirements must hold.
    unsafe fn run<const DOT: bool, const MM: bool>(self) -> Self::Out;
}

/// Runs `k` compiled for `isa`.
///
/// # Safety
/// The CPU must have the features of `isa` (NEON; plus dotprod; plus i8mm), and `k`'s pointer
/// requirements must hold.
pub(super) unsafe fn run<K: Kernel>(isa: Isa, k: K) -> K::Out {
    ///
    /// # Safety
    /// As [`run`] for `Isa::Neon`.
    #[target_feature(enable = "neon")]
    unsafe fn neon<K: Kernel>(k: K) -> K::Out {
        k.run::<false, false>()
    }
    ///
    /// # Safety
    /// As [`run`] for `Isa::Dotprod`.
    #[target_feature(enable = "neon,dotprod")]
    unsafe fn dotprod<K: Kernel>(k: K) -> K::Out {
        k.run::<true, false>()
    }
    ///
    /// # Safety
    /// As [`run`] for `Isa::I8mm`.
    #[target_feature(enable = "neon,dotprod,i8mm")]
    unsafe fn i8mm<K: Kernel>(k: K) -> K::Out {
        k.run::<true, true>()
    }
    match isa {
        Isa::Neon => neon(k),
        Isa::Dotprod => dotprod(k),
        Isa::I8mm => i8mm(k),
    }
}

/// `acc` plus, in each 32-bit lane, the sum of the four products of the matching bytes of `a`
/// and `b` (`sdot`).
///
/// # Safety
/// The CPU must have dotprod and the calling function must be compiled with it.
#[inline(always)]
unsafe fn sdot(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let mut acc = acc;
    asm!(
        "sdot {acc:v}.4s, {a:v}.16b, {b:v}.16b",
        acc = inout(vreg) acc,
        a = in(vreg) a,
        b = in(vreg) b,
        options(pure, nomem, nostack, preserves_flags)
    );
    acc
}

/// `acc` plus the 2×2 matrix of dot products of the two 8-byte halves of `a` (rows) with the
/// two 8-byte halves of `b` (columns), row-major: lanes `[a0·b0, a0·b1, a1·b0, a1·b1]`
/// (`smmla`).
///
/// # Safety
/// The CPU must have i8mm and the calling function must be compiled with it.
#[inline(always)]
pub(super) unsafe fn smmla(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let mut acc = acc;
    asm!(
        "smmla {acc:v}.4s, {a:v}.16b, {b:v}.16b",
        acc = inout(vreg) acc,
        a = in(vreg) a,
        b = in(vreg) b,
        options(pure, nomem, nostack, preserves_flags)
    );
    acc
}

/// `acc` plus the products of the 16 signed bytes of `a` and `b`, four per i32 lane (`sdot`
/// when `DOT`, else widening multiplies and pairwise adds; the lane split differs, the total
/// does not).
///
/// # Safety
/// NEON; dotprod when `DOT` (see [`sdot`]).
#[inline(always)]
pub(super) unsafe fn dot16<const DOT: bool>(
    acc: int32x4_t,
    a: int8x16_t,
    b: int8x16_t,
) -> int32x4_t {
    if DOT {
        sdot(acc, a, b)
    } else {
        let lo = vmull_s8(vget_low_s8(a), vget_low_s8(b));
        let hi = vmull_high_s8(a, b);
        vpadalq_s16(vpadalq_s16(acc, lo), hi)
    }
}

/// The IEEE half at `p` (2 bytes, little-endian) as f32, exactly: `ldr h` and `fcvt` (base
/// ARMv8 floating point), where the portable bit manipulation takes about a dozen
/// instructions. NaNs take the portable conversion: `fcvt` quiets a signalling NaN, and which
/// NaN an f32 operation returns depends on which operand signals.
///
/// # Safety
/// `p` must point to 2 readable bytes.
#[inline(always)]
pub(super) unsafe fn half(p: *const u8) -> f32 {
    let x: f32;
    asm!(
        "ldr {x:h}, [{p}]",
        "fcvt {x:s}, {x:h}",
        p = in(reg) p,
        x = out(vreg) x,
        options(pure, readonly, nostack, preserves_flags)
    );
    if x.is_nan() {
        f16_le([*p, *p.add(1)])
    } else {
        x
    }
}

/// Four IEEE halves (the bits in `h`'s lanes) widened to f32 exactly by one `fcvtl` (its
/// intrinsic takes the unstable `float16x4_t`); NaNs come out quieted.
///
/// # Safety
/// NEON.
#[inline(always)]
pub(super) unsafe fn fcvtl4(h: uint16x4_t) -> float32x4_t {
    let x: float32x4_t;
    asm!(
        "fcvtl {x:v}.4s, {h:v}.4h",
        h = in(vreg) h,
        x = out(vreg) x,
        options(pure, nomem, nostack, preserves_flags)
    );
    x
}

/// The IEEE halves at `p[0..4]` (2 bytes each, little-endian) as f32 lanes, exactly: four
/// lane loads and one `fcvtl`; when a lane is NaN, every lane takes [`half`] (see there).
///
/// # Safety
/// NEON; each pointer must point to 2 readable bytes.
#[inline(always)]
pub(super) unsafe fn halves4(p: [*const u8; 4]) -> float32x4_t {
    let mut h = vdup_n_u16(0);
    h = vld1_lane_u16::<0>(p[0].cast(), h);
    h = vld1_lane_u16::<1>(p[1].cast(), h);
    h = vld1_lane_u16::<2>(p[2].cast(), h);
    h = vld1_lane_u16::<3>(p[3].cast(), h);
    let x = fcvtl4(h);
    // A NaN lane is unequal to itself.
    if vminvq_u32(vceqq_f32(x, x)) == 0 {
        let v = p.map(|p| half(p));
        return vld1q_f32(v.as_ptr());
    }
    x
}

/// The 32 unsigned nibbles of the 16 bytes at `p`: low nibbles (elements 0..16), high nibbles
/// (elements 16..32).
///
/// # Safety
/// NEON; 16 readable bytes at `p`.
#[inline(always)]
unsafe fn nibbles(p: *const u8) -> [uint8x16_t; 2] {
    let v = vld1q_u8(p);
    [vandq_u8(v, vdupq_n_u8(0x0f)), vshrq_n_u8::<4>(v)]
}

/// 0x10 in byte `i` of the result pair (elements 0..16, 16..32) where bit `i` of the
/// little-endian u32 at `p` is set, else 0.
///
/// # Safety
/// NEON; 4 readable bytes at `p`.
#[inline(always)]
unsafe fn fifth_bits(p: *const u8) -> [uint8x16_t; 2] {
    const LO: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1];
    const HI: [u8; 16] = [2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3];
    const BITS: [u8; 16] = [1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128];
    let h = u32::from_le_bytes([*p, *p.add(1), *p.add(2), *p.add(3)]);
    let bytes = vreinterpretq_u8_u32(vdupq_n_u32(h.to_le()));
    let bits = vld1q_u8(BITS.as_ptr());
    let spread = |idx: &[u8; 16]| {
        let set = vtstq_u8(vqtbl1q_u8(bytes, vld1q_u8(idx.as_ptr())), bits);
        vandq_u8(set, vdupq_n_u8(0x10))
    };
    [spread(&LO), spread(&HI)]
}

/// A 32-element weight format and how its blocks unpack.
pub(super) trait Legacy {
    /// Bytes per weight block.
    const SIZE: usize;
    /// Whether the format has a minimum `m` at byte 2, paired with Q8_1 activations (the
    /// block's result adds `m · s`); otherwise the activations are Q8_0.
    const MIN: bool;
    /// The 32 values of the block at `b` as signed bytes: elements 0..16 and 16..32.
    ///
    /// # Safety
    /// NEON; a whole block at `b`.
    unsafe fn values(b: *const u8) -> [int8x16_t; 2];
    /// The block scale `d` of the block at `b` (an IEEE half at byte 0 unless overridden).
    ///
    /// # Safety
    /// NEON; a whole block at `b`.
    #[inline(always)]
    unsafe fn scale(b: *const u8) -> f32 {
        half(b)
    }
    /// The block scales of four blocks, one per lane.
    ///
    /// # Safety
    /// NEON; a whole block at each of `b`.
    #[inline(always)]
    unsafe fn scales4(b: [*const u8; 4]) -> float32x4_t {
        halves4(b)
    }
}

/// The 32 levels of the nibbles at `qs` (elements 0..16 and 16..32) through the 16-entry
/// table `levels`.
///
/// # Safety
/// NEON; 16 readable bytes at `qs`.
#[inline(always)]
unsafe fn levels(qs: *const u8, levels: &[i8; 16]) -> [int8x16_t; 2] {
    let table = vld1q_s8(levels.as_ptr());
    nibbles(qs).map(|q| vqtbl1q_s8(table, q))
}

impl Legacy for BlockIQ4_NL {
    const SIZE: usize = Self::SIZE;
    const MIN: bool = false;
    #[inline(always)]
    unsafe fn values(b: *const u8) -> [int8x16_t; 2] {
        levels(b.add(Self::QS), &IQ4NL_LEVELS)
    }
}

impl Legacy for BlockMXFP4 {
    const SIZE: usize = Self::SIZE;
    const MIN: bool = false;
    #[inline(always)]
    unsafe fn values(b: *const u8) -> [int8x16_t; 2] {
        levels(b.add(Self::QS), &MXFP4_LEVELS)
    }
    #[inline(always)]
    unsafe fn scale(b: *const u8) -> f32 {
        e8m0_half(*b.add(Self::E))
    }
    #[inline(always)]
    unsafe fn scales4(b: [*const u8; 4]) -> float32x4_t {
        let v = b.map(|b| Self::scale(b));
        vld1q_f32(v.as_ptr())
    }
}

impl Legacy for BlockQ8_0 {
    const SIZE: usize = Self::SIZE;
    const MIN: bool = false;
    #[inline(always)]
    unsafe fn values(b: *const u8) -> [int8x16_t; 2] {
        let q = b.add(Self::QS).cast::<i8>();
        [vld1q_s8(q), vld1q_s8(q.add(16))]
    }
}

impl Legacy for BlockQ4_0 {
    const SIZE: usize = Self::SIZE;
    const MIN: bool = false;
    #[inline(always)]
    unsafe fn values(b: *const u8) -> [int8x16_t; 2] {
        nibbles(b.add(Self::QS)).map(|q| vreinterpretq_s8_u8(vsubq_u8(q, vdupq_n_u8(8))))
    }
}

impl Legacy for BlockQ4_1 {
    const SIZE: usize = Self::SIZE;
    const MIN: bool = true;
    #[inline(always)]
    unsafe fn values(b: *const u8) -> [int8x16_t; 2] {
        nibbles(b.add(Self::QS)).map(|q| vreinterpretq_s8_u8(q))
    }
}

impl Legacy for BlockQ5_0 {
    const SIZE: usize = Self::SIZE;
    const MIN: bool = false;
    #[inline(always)]
    unsafe fn values(b: *const u8) -> [int8x16_t; 2] {
        let (q, h) = (nibbles(b.add(Self::QS)), fifth_bits(b.add(Self::QH)));
        [0, 1].map(|i| vreinterpretq_s8_u8(vsubq_u8(vorrq_u8(q[i], h[i]), vdupq_n_u8(16))))
    }
}

impl Legacy for BlockQ5_1 {
    const SIZE: usize = Self::SIZE;
    const MIN: bool = true;
    #[inline(always)]
    unsafe fn values(b: *const u8) -> [int8x16_t; 2] {
        let (q, h) = (nibbles(b.add(Self::QS)), fifth_bits(b.add(Self::QH)));
        [0, 1].map(|i| vreinterpretq_s8_u8(vorrq_u8(q[i], h[i])))
    }
}

const _: () = assert!(
    BlockQ4_0::D == 0
        && BlockQ4_1::D == 0
        && BlockQ4_1::M == 2
        && BlockQ5_0::D == 0
        && BlockQ5_1::D == 0
        && BlockQ5_1::M == 2
        && BlockQ8_0::D == 0
        && BlockQ8_1::D == 0
        && BlockIQ4_NL::D == 0
);

/// The 2×8-byte interleave `smmla` takes: the first (`hi == false`) or second 8 bytes of `a`
/// and of `b`, in one register.
///
/// # Safety
/// NEON.
#[inline(always)]
pub(super) unsafe fn pair(a: int8x16_t, b: int8x16_t, hi: bool) -> int8x16_t {
    let (a, b) = (vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b));
    vreinterpretq_s8_s64(if hi {
        vzip2q_s64(a, b)
    } else {
        vzip1q_s64(a, b)
    })
}

/// `R` weight rows of format `W` times `T` activation rows (Q8_0, or Q8_1 for formats with a
/// minimum), `nb` blocks each: `out[r][t]` equals the portable one-row kernel's result.
pub(super) struct LegacyTile<W, const R: usize, const T: usize> {
    nb: usize,
    w: [*const u8; R],
    a: [*const u8; T],
    format: PhantomData<W>,
}

impl<W, const R: usize, const T: usize> LegacyTile<W, R, T> {
    /// The kernel for `nb` blocks of the weight rows `w` and activation rows `a` (for
    /// [`super::neon::run`], which requires `nb` whole blocks in every row).
    pub(super) fn new(nb: usize, w: [*const u8; R], a: [*const u8; T]) -> Self {
        Self {
            nb,
            w,
            a,
            format: PhantomData,
        }
    }
}

impl<W: Legacy, const R: usize, const T: usize> Kernel for LegacyTile<W, R, T> {
    type Out = [[f32; T]; R];

    /// # Safety
    /// As [`Kernel::run`]; every row must hold `nb` whole blocks.
    #[inline(always)]
    unsafe fn run<const DOT: bool, const MM: bool>(self) -> Self::Out {
        if T == 1 && R.is_multiple_of(4) {
            return self.decode::<DOT>();
        }
        let (asize, aqs) = if W::MIN {
            (BlockQ8_1::SIZE, BlockQ8_1::QS)
        } else {
            (BlockQ8_0::SIZE, BlockQ8_0::QS)
        };
        let mut sum = [[0f32; T]; R];
        for b in 0..self.nb {
            let wb = self.w.map(|p| p.add(W::SIZE * b));
            let ab = self.a.map(|p| p.add(asize * b));
            let y = ab.map(|p| {
                let q = p.add(aqs).cast::<i8>();
                [vld1q_s8(q), vld1q_s8(q.add(16))]
            });
            let x = wb.map(|p| W::values(p));
            let mut isum = [[0i32; T]; R];
            if MM && R.is_multiple_of(2) && T.is_multiple_of(2) {
                // Tokens in pairs, interleaved once per block for `smmla`.
                let mut yp = [[vdupq_n_s8(0); 4]; T];
                for t in (0..T).step_by(2) {
                    for (k, v) in yp[t].iter_mut().enumerate() {
                        *v = pair(y[t][k / 2], y[t + 1][k / 2], k % 2 == 1);
                    }
                }
                for r in (0..R).step_by(2) {
                    let xp: [int8x16_t; 4] =
                        std::array::from_fn(|k| pair(x[r][k / 2], x[r + 1][k / 2], k % 2 == 1));
                    for t in (0..T).step_by(2) {
                        let mut acc = vdupq_n_s32(0);
                        for k in 0..4 {
                            acc = smmla(acc, xp[k], yp[t][k]);
                        }
                        isum[r][t] = vgetq_lane_s32::<0>(acc);
                        isum[r][t + 1] = vgetq_lane_s32::<1>(acc);
                        isum[r + 1][t] = vgetq_lane_s32::<2>(acc);
                        isum[r + 1][t + 1] = vgetq_lane_s32::<3>(acc);
                    }
                }
            } else {
                for r in 0..R {
                    for t in 0..T {
                        let acc = dot16::<DOT>(vdupq_n_s32(0), x[r][0], y[t][0]);
                        isum[r][t] = vaddvq_s32(dot16::<DOT>(acc, x[r][1], y[t][1]));
                    }
                }
            }
            // Token scales four at a time (`array::map` over `half` was compiled as an
            // out-of-line call per array: a quarter of a prompt's instructions).
            let (mut dy, mut sy) = ([0f32; T], [0f32; T]);
            let mut t = 0;
            while t + 4 <= T {
                let p = [ab[t], ab[t + 1], ab[t + 2], ab[t + 3]];
                vst1q_f32(dy.as_mut_ptr().add(t), halves4(p));
                if W::MIN {
                    let o = BlockQ8_1::S;
                    let s = [p[0].add(o), p[1].add(o), p[2].add(o), p[3].add(o)];
                    vst1q_f32(sy.as_mut_ptr().add(t), halves4(s));
                }
                t += 4;
            }
            for t in t..T {
                dy[t] = half(ab[t]);
                if W::MIN {
                    sy[t] = half(ab[t].add(BlockQ8_1::S));
                }
            }
            // The portable kernels' block combination, per output; four tokens per vector
            // while four remain (the same f32 operations, lane by lane).
            for r in 0..R {
                let dx = W::scale(wb[r]);
                let mx = if W::MIN { half(wb[r].add(2)) } else { 0.0 };
                let mut t = 0;
                while t + 4 <= T {
                    let i = vcvtq_f32_s32(vld1q_s32(isum[r].as_ptr().add(t)));
                    let mut v = vmulq_f32(i, vmulq_n_f32(vld1q_f32(dy.as_ptr().add(t)), dx));
                    if W::MIN {
                        v = vaddq_f32(v, vmulq_n_f32(vld1q_f32(sy.as_ptr().add(t)), mx));
                    }
                    let acc = sum[r].as_mut_ptr().add(t);
                    vst1q_f32(acc, vaddq_f32(vld1q_f32(acc), v));
                    t += 4;
                }
                for t in t..T {
                    let d = dx * dy[t];
                    sum[r][t] += if W::MIN {
                        isum[r][t] as f32 * d + mx * sy[t]
                    } else {
                        isum[r][t] as f32 * d
                    };
                }
            }
        }
        sum
    }
}

impl<W: Legacy, const R: usize, const T: usize> LegacyTile<W, R, T> {
    /// Decoding's case, one token (`T == 1`) and rows in fours: the four rows' block sums go
    /// to the lanes of one vector (pairwise adds instead of a reduction and an int-to-float
    /// move per row), and the block combination runs once per four rows, lane by lane, with
    /// the portable kernel's f32 operations in its order: `sum += isum · (dx · dy) + mx · sy`.
    ///
    /// # Safety
    /// As [`Kernel::run`]; `T == 1` and `R` a multiple of 4.
    #[inline(always)]
    unsafe fn decode<const DOT: bool>(self) -> [[f32; T]; R] {
        let (asize, aqs) = if W::MIN {
            (BlockQ8_1::SIZE, BlockQ8_1::QS)
        } else {
            (BlockQ8_0::SIZE, BlockQ8_0::QS)
        };
        let mut out = [[0f32; T]; R];
        for r0 in (0..R).step_by(4) {
            let w = [self.w[r0], self.w[r0 + 1], self.w[r0 + 2], self.w[r0 + 3]];
            let mut sum = vdupq_n_f32(0.0);
            for b in 0..self.nb {
                let o = W::SIZE * b;
                let wb = [w[0].add(o), w[1].add(o), w[2].add(o), w[3].add(o)];
                let ab = self.a[0].add(asize * b);
                let q = ab.add(aqs).cast::<i8>();
                let y = [vld1q_s8(q), vld1q_s8(q.add(16))];
                let mut acc = [vdupq_n_s32(0); 4];
                for k in 0..4 {
                    let x = W::values(wb[k]);
                    acc[k] = dot16::<DOT>(dot16::<DOT>(acc[k], x[0], y[0]), x[1], y[1]);
                }
                // Lane k: row k's exact integer sum.
                let isum = vpaddq_s32(vpaddq_s32(acc[0], acc[1]), vpaddq_s32(acc[2], acc[3]));
                let dx = W::scales4(wb);
                let mut v = vmulq_f32(vcvtq_f32_s32(isum), vmulq_n_f32(dx, half(ab)));
                if W::MIN {
                    let mx = halves4([wb[0].add(2), wb[1].add(2), wb[2].add(2), wb[3].add(2)]);
                    v = vaddq_f32(v, vmulq_n_f32(mx, half(ab.add(BlockQ8_1::S))));
                }
                sum = vaddq_f32(sum, v);
            }
            let mut lanes = [0f32; 4];
            vst1q_f32(lanes.as_mut_ptr(), sum);
            for (k, &v) in lanes.iter().enumerate() {
                out[r0 + k][0] = v;
            }
        }
        out
    }
}

/// Quantizes one block of 32 values like `legacy::quantize_q8_block` (same bytes, same
/// `(d, Σq)`).
///
/// # Safety
/// NEON; `x` and `qs` must hold at least 32 elements.
#[target_feature(enable = "neon")]
pub(super) unsafe fn quantize_q8_block(x: &[f32], qs: &mut [u8]) -> (f32, i32) {
    assert!(x.len() >= QK && qs.len() >= QK);
    let v: [float32x4_t; 8] = std::array::from_fn(|i| vld1q_f32(x.as_ptr().add(4 * i)));
    // max with 0 first and `fmaxnm` (NaN loses), as the portable fold from 0 with `f32::max`.
    let mut m = vdupq_n_f32(0.0);
    for &v in &v {
        m = vmaxnmq_f32(m, vabsq_f32(v));
    }
    let amax = vmaxnmvq_f32(m);
    let d = amax / 127.0;
    let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
    // Round to nearest even, then saturate to i8 like `as i8` (only ±inf and NaN, from an
    // infinite `id`, reach the saturation; NaN gives 0 in both).
    let q: [int32x4_t; 8] = v.map(|v| vcvtnq_s32_f32(vmulq_n_f32(v, id)));
    let narrow = |a: int32x4_t, b: int32x4_t, c: int32x4_t, e: int32x4_t| {
        let lo = vcombine_s16(vqmovn_s32(a), vqmovn_s32(b));
        let hi = vcombine_s16(vqmovn_s32(c), vqmovn_s32(e));
        vcombine_s8(vqmovn_s16(lo), vqmovn_s16(hi))
    };
    let q0 = narrow(q[0], q[1], q[2], q[3]);
    let q1 = narrow(q[4], q[5], q[6], q[7]);
    vst1q_s8(qs.as_mut_ptr().cast(), q0);
    vst1q_s8(qs.as_mut_ptr().add(16).cast(), q1);
    let sum = i32::from(vaddlvq_s8(q0)) + i32::from(vaddlvq_s8(q1));
    (d, sum)
}
