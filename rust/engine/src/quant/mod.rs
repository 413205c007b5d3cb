//! Tensor element types, quantized block formats, dequantization and dot-product kernels.
//!
//! Numerics follow ggml (llama.cpp): activations are quantized like llama.cpp's x86 quantizers,
//! dot products accumulate integers per block and apply the block scales in ggml's order, so the
//! engine's logits track llama.cpp's closely. Kernels are chosen once at run time
//! ([`simd_level`]); `LOCAL_LLM_SIMD=scalar` forces the portable kernels.
//!
//! Structure: `blocks` is the table of block layouts; `float`, `legacy`, `kquants`,
//! `nonlinear` (IQ4_NL, IQ4_XS, MXFP4), `ternary` (TQ1_0, TQ2_0) and `iquants` (the codebook
//! formats, grids in `iq_grids`) are the portable code (they never call architecture code); `x86/` (AVX2 and AVX-512) and `arm/`
//! (NEON, dotprod, i8mm) hold the SIMD kernels, grouped by architecture. `kernels` is the
//! kernel table, one [`Kernels`] entry per format filled once for this CPU (by `x86::table`
//! and `arm::table`); it alone chooses between them.

#[cfg(target_arch = "aarch64")]
mod arm;
pub(crate) mod blocks;
pub(crate) mod float;
mod iq_grids;
mod iquants;
mod kernels;
mod kquants;
mod legacy;
pub(crate) mod nonlinear;
pub(crate) mod reference;
pub(crate) mod reference_iq4;
mod ternary;
mod types;
// Used by the x86-64 kernel table only, so far.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
mod unpacked;
#[cfg(target_arch = "x86_64")]
mod x86;

use std::sync::OnceLock;

use crate::{Error, Result};
pub(crate) use kernels::PackLine;
pub use kernels::{
    portable_dot, Kernels, TileOut, TileShape, MAX_ROWS_TOKENS, MAX_TILE_ROWS, MAX_TILE_TOKENS,
};
pub use types::{vec_dot_type, GgmlType};

/// The kernel family selected for this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Level {
    /// Portable Rust.
    Scalar,
    /// x86-64 with AVX2, FMA and F16C.
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// x86-64 with AVX2, FMA and F16C plus AVX-512 F/VL/VNNI (256-bit `vpdpbusd`/`vpdpwssd`,
    /// 32 registers); the AVX2 kernels serve the formats without a VNNI kernel.
    #[cfg(target_arch = "x86_64")]
    Avx512Vnni,
    /// aarch64 Advanced SIMD (integer sums by widening multiplies).
    #[cfg(target_arch = "aarch64")]
    Neon,
    /// aarch64 with the dot-product extension (`sdot`).
    #[cfg(target_arch = "aarch64")]
    Dotprod,
    /// aarch64 with `sdot` and the int8 matrix multiply extension (`smmla`, used by the tiles).
    #[cfg(target_arch = "aarch64")]
    I8mm,
}

fn detect() -> Level {
    let forced = std::env::var("LOCAL_LLM_SIMD").ok();
    let forced = |name: &str| {
        forced
            .as_deref()
            .is_some_and(|v| v.eq_ignore_ascii_case(name))
    };
    if forced("scalar") {
        return Level::Scalar;
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma")
        && std::arch::is_x86_feature_detected!("f16c")
    {
        let vnni = std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512vl")
            && std::arch::is_x86_feature_detected!("avx512vnni");
        return if vnni && !forced("avx2") {
            Level::Avx512Vnni
        } else {
            Level::Avx2
        };
    }
    // A forced level the CPU lacks falls back to the best one it has.
    #[cfg(target_arch = "aarch64")]
    if std::arch::is_aarch64_feature_detected!("neon") {
        let dot = std::arch::is_aarch64_feature_detected!("dotprod");
        let mm = dot && std::arch::is_aarch64_feature_detected!("i8mm");
        return if forced("neon") || !dot {
            Level::Neon
        } else if forced("dotprod") || !mm {
            Level::Dotprod
        } else {
            Level::I8mm
        };
    }
    Level::Scalar
}

fn level() -> Level {
    static LEVEL: OnceLock<Level> = OnceLock::new();
    *LEVEL.get_or_init(detect)
}

/// On x86-64, the instruction set of the SIMD kernels, `None` at the scalar level.
#[cfg(target_arch = "x86_64")]
fn x86_isa() -> Option<x86::table::Isa> {
    match level() {
        Level::Avx2 => Some(x86::table::Isa::Avx2),
        Level::Avx512Vnni if std::arch::is_x86_feature_detected!("avx512bw") => {
            Some(x86::table::Isa::Wide)
        }
        Level::Avx512Vnni => Some(x86::table::Isa::Vnni),
        Level::Scalar => None,
    }
}

/// On aarch64, the instruction set of the NEON kernels, `None` at the scalar level.
#[cfg(target_arch = "aarch64")]
fn arm_isa() -> Option<arm::Isa> {
    match level() {
        Level::Neon => Some(arm::Isa::Neon),
        Level::Dotprod => Some(arm::Isa::Dotprod),
        Level::I8mm => Some(arm::Isa::I8mm),
        Level::Scalar => None,
    }
}

/// The kernels this CPU runs for weight format `ty`: the kernel table's entry, filled once
/// per process (the portable kernels, overwritten where this CPU's SIMD kernels cover a format).
pub fn kernels(ty: GgmlType) -> &'static Kernels {
    static TABLE: OnceLock<Vec<Kernels>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        // Indexed by declaration order, which `GgmlType::ALL` follows.
        assert!(GgmlType::ALL
            .iter()
            .enumerate()
            .all(|(i, &t)| t as usize == i));
        let mut table: Vec<Kernels> = GgmlType::ALL.map(Kernels::portable).to_vec();
        let mut entry = |k: Kernels| {
            let i = k.ty() as usize;
            table[i] = k;
        };
        #[cfg(target_arch = "x86_64")]
        if let Some(isa) = x86_isa() {
            x86::table::entries(isa, &mut entry);
        }
        #[cfg(target_arch = "aarch64")]
        if let Some(isa) = arm_isa() {
            arm::table::entries(isa, &mut entry);
        }
        let _ = &mut entry;
        table
    });
    &table[ty as usize]
}

/// Name of the SIMD level selected at run time: `"avx512vnni"`, `"avx2"`, `"i8mm"`,
/// `"dotprod"`, `"neon"` or `"scalar"`.
///
/// `LOCAL_LLM_SIMD` forces a level: `scalar` everywhere; `avx2` on x86-64; `neon` or `dotprod`
/// on aarch64. A forced level the CPU lacks gives the best one it has.
pub fn simd_level() -> &'static str {
    match level() {
        Level::Scalar => "scalar",
        #[cfg(target_arch = "x86_64")]
        Level::Avx512Vnni => "avx512vnni",
        #[cfg(target_arch = "x86_64")]
        Level::Avx2 => "avx2",
        #[cfg(target_arch = "aarch64")]
        Level::Neon => "neon",
        #[cfg(target_arch = "aarch64")]
        Level::Dotprod => "dotprod",
        #[cfg(target_arch = "aarch64")]
        Level::I8mm => "i8mm",
    }
}

/// Dequantize `dst.len()` elements from `src`, which must be exactly
/// `ty.row_bytes(dst.len())` bytes in GGUF's little-endian block layout. Every [`GgmlType`] is
/// supported; a length that is not a whole number of blocks or does not match `src` is an
/// [`Error::InvalidOption`].
pub fn dequantize(ty: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<()> {
    let need = ty.row_bytes(dst.len() as u64).ok_or_else(|| {
        Error::InvalidOption(format!(
            "cannot dequantize {} elements of {ty}: not a multiple of its block size {}",
            dst.len(),
            ty.block_size()
        ))
    })?;
    if src.len() as u64 != need {
        return Err(Error::InvalidOption(format!(
            "cannot dequantize {} elements of {ty}: expected {need} bytes, got {}",
            dst.len(),
            src.len()
        )));
    }
    match ty {
        GgmlType::F32 => float::dequant_f32(src, dst),
        GgmlType::F16 => float::dequant_f16(src, dst),
        GgmlType::BF16 => float::dequant_bf16(src, dst),
        GgmlType::Q4_0 => legacy::dequant_q4_0(src, dst),
        GgmlType::Q4_1 => legacy::dequant_q4_1(src, dst),
        GgmlType::Q5_0 => legacy::dequant_q5_0(src, dst),
        GgmlType::Q5_1 => legacy::dequant_q5_1(src, dst),
        GgmlType::Q8_0 => legacy::dequant_q8_0(src, dst),
        GgmlType::Q8_1 => legacy::dequant_q8_1(src, dst),
        GgmlType::Q2_K => kquants::dequant_q2_k(src, dst),
        GgmlType::Q3_K => kquants::dequant_q3_k(src, dst),
        GgmlType::Q4_K => kquants::dequant_q4_k(src, dst),
        GgmlType::Q5_K => kquants::dequant_q5_k(src, dst),
        GgmlType::Q6_K => kquants::dequant_q6_k(src, dst),
        GgmlType::Q8_K => kquants::dequant_q8_k(src, dst),
        GgmlType::IQ4_NL => nonlinear::dequant_iq4_nl(src, dst),
        GgmlType::IQ4_XS => nonlinear::dequant_iq4_xs(src, dst),
        GgmlType::MXFP4 => nonlinear::dequant_mxfp4(src, dst),
        GgmlType::TQ1_0 => iquants::dequant::<ternary::TQ1>(src, dst),
        GgmlType::TQ2_0 => iquants::dequant::<ternary::TQ2>(src, dst),
        GgmlType::IQ2_XXS => iquants::dequant::<iquants::IQ2XXS>(src, dst),
        GgmlType::IQ2_XS => iquants::dequant::<iquants::IQ2XS>(src, dst),
        GgmlType::IQ2_S => iquants::dequant::<iquants::IQ2S>(src, dst),
        GgmlType::IQ3_XXS => iquants::dequant::<iquants::IQ3XXS>(src, dst),
        GgmlType::IQ3_S => iquants::dequant::<iquants::IQ3S>(src, dst),
        GgmlType::IQ1_S => iquants::dequant::<iquants::IQ1S>(src, dst),
        GgmlType::IQ1_M => iquants::dequant::<iquants::IQ1M>(src, dst),
    }
    Ok(())
}

/// Quantize a row into format `ty` as llama.cpp's CPU `from_float` does: the activation
/// formats (Q8_0 with its x86 rule, Q8_1, Q8_K), the float types, and Q4_0, Q4_1, Q5_0, Q5_1
/// with ggml's reference quantizers (what a quantized KV cache stores). `src.len()` must be a
/// multiple of the block size and `dst.len() == ty.row_bytes(src.len())`; otherwise, or for
/// another `ty`, the result is an [`Error::InvalidOption`].
pub fn quantize_row(ty: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<()> {
    let need = ty.row_bytes(src.len() as u64).ok_or_else(|| {
        Error::InvalidOption(format!(
            "cannot quantize {} values to {ty}: not a multiple of its block size {}",
            src.len(),
            ty.block_size()
        ))
    })?;
    if dst.len() as u64 != need {
        return Err(Error::InvalidOption(format!(
            "cannot quantize {} values to {ty}: expected a {need}-byte destination, got {}",
            src.len(),
            dst.len()
        )));
    }
    match ty {
        GgmlType::F32 => float::quantize_f32(src, dst),
        GgmlType::F16 => float::quantize_f16(src, dst),
        GgmlType::BF16 => float::quantize_bf16(src, dst),
        GgmlType::Q8_0 | GgmlType::Q8_1 => quantize_q8_row(ty == GgmlType::Q8_1, src, dst),
        GgmlType::Q8_K => quantize_q8_k_row(src, dst),
        GgmlType::Q4_0 => reference::quantize_q4_0(src, dst),
        GgmlType::Q4_1 => reference::quantize_q4_1(src, dst),
        GgmlType::Q5_0 => reference::quantize_q5_0(src, dst),
        GgmlType::Q5_1 => reference::quantize_q5_1(src, dst),
        GgmlType::IQ4_NL => reference_iq4::quantize_iq4_nl(src, dst),
        other => {
            return Err(Error::InvalidOption(format!(
                "quantizing a row to {other} is not supported (Q8_0, Q8_1, Q8_K, Q4_0, Q4_1, \
                 Q5_0, Q5_1, IQ4_NL, F16, BF16, F32)"
            )))
        }
    }
    Ok(())
}

/// Q8_0 (or Q8_1 when `q8_1`) activation rows with this CPU's block quantizer (all give the
/// portable quantizer's bytes).
fn quantize_q8_row(q8_1: bool, src: &[f32], dst: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    if x86_isa().is_some() {
        // SAFETY: the AVX2 levels are selected only after detecting avx2, fma and f16c.
        let block = |x: &[f32], q: &mut [u8]| unsafe { x86::quantize_q8_block(x, q) };
        return if q8_1 {
            legacy::quantize_q8_1(src, dst, block)
        } else {
            legacy::quantize_q8_0(src, dst, block)
        };
    }
    #[cfg(target_arch = "aarch64")]
    if arm_isa().is_some() {
        // SAFETY: the aarch64 levels are selected only after detecting NEON; the portable
        // drivers pass whole 32-element blocks.
        let block = |x: &[f32], q: &mut [u8]| unsafe { arm::quantize_q8_block(x, q) };
        return if q8_1 {
            legacy::quantize_q8_1(src, dst, block)
        } else {
            legacy::quantize_q8_0(src, dst, block)
        };
    }
    if q8_1 {
        legacy::quantize_q8_1(src, dst, legacy::quantize_q8_block)
    } else {
        legacy::quantize_q8_0(src, dst, legacy::quantize_q8_block)
    }
}

/// Q8_K activation rows with this CPU's quantizer (all give the portable quantizer's bytes).
fn quantize_q8_k_row(src: &[f32], dst: &mut [u8]) {
    #[cfg(target_arch = "aarch64")]
    if arm_isa().is_some() {
        // SAFETY: NEON was detected; the quantizer takes whole blocks of both slices.
        return unsafe { arm::kquants::quantize_q8_k(src, dst) };
    }
    #[cfg(target_arch = "x86_64")]
    if x86_isa().is_some() {
        // SAFETY: the x86 levels are selected only after detecting AVX2, FMA and F16C; the
        // quantizer takes whole blocks of both slices.
        return unsafe { x86::quantize_q8_k(src, dst) };
    }
    kquants::quantize_q8_k(src, dst)
}
