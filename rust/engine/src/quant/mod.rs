//! Tensor element types, quantized block formats, dequantization and dot-product kernels.
//!
//! Numerics follow ggml (llama.cpp): activations are quantized like llama.cpp's x86 quantizers,
//! dot products accumulate integers per block and apply the block scales in ggml's order, so the
//! engine's logits track llama.cpp's closely. Kernels are chosen once at run time
//! ([`simd_level`]); `LOCAL_LLM_SIMD=scalar` forces the portable kernels.
//!
//! Structure: `blocks` is the table of block layouts; `float`, `legacy` and `kquants` are the
//! portable code (they never call architecture code); `x86`, `x86_kquants`, `x86_ktile`,
//! `x86_tile`, `x86_wide`, `x86_decode` (AVX-512), `x86_decode_avx2` and `neon`,
//! `neon_kquants`, `neon_float` are the SIMD kernels; this file alone chooses between them.

pub(crate) mod blocks;
pub(crate) mod float;
mod kquants;
mod legacy;
#[cfg(target_arch = "aarch64")]
mod neon;
#[cfg(target_arch = "aarch64")]
mod neon_float;
#[cfg(target_arch = "aarch64")]
mod neon_kquants;
mod types;
#[cfg(target_arch = "x86_64")]
mod x86;
#[cfg(target_arch = "x86_64")]
mod x86_decode;
#[cfg(target_arch = "x86_64")]
mod x86_decode_avx2;
#[cfg(target_arch = "x86_64")]
mod x86_kquants;
#[cfg(target_arch = "x86_64")]
mod x86_ktile;
#[cfg(target_arch = "x86_64")]
mod x86_tile;
#[cfg(target_arch = "x86_64")]
mod x86_wide;

use std::sync::OnceLock;

use crate::{Error, Result};
pub use types::GgmlType;

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

/// On x86-64, whether the AVX2 kernels (or better) run: `Some(vnni)`, with `vnni` telling
/// whether the AVX-512 VNNI kernels may be used too; `None` at the scalar level.
#[cfg(target_arch = "x86_64")]
fn x86_level() -> Option<bool> {
    match level() {
        Level::Avx2 => Some(false),
        Level::Avx512Vnni => Some(true),
        Level::Scalar => None,
    }
}

/// Whether the wide prompt-processing tile (AVX-512 VNNI + BW) can run.
#[cfg(target_arch = "x86_64")]
fn wide() -> bool {
    static WIDE: OnceLock<bool> = OnceLock::new();
    *WIDE.get_or_init(|| {
        level() == Level::Avx512Vnni && std::arch::is_x86_feature_detected!("avx512bw")
    })
}

/// On aarch64, the instruction set of the NEON kernels, `None` at the scalar level.
#[cfg(target_arch = "aarch64")]
fn arm_isa() -> Option<neon::Isa> {
    match level() {
        Level::Neon => Some(neon::Isa::Neon),
        Level::Dotprod => Some(neon::Isa::Dotprod),
        Level::I8mm => Some(neon::Isa::I8mm),
        Level::Scalar => None,
    }
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
    }
    Ok(())
}

/// The activation format the dot product of a weight of type `w` consumes (ggml's
/// `vec_dot_type`): Q4_0/Q5_0/Q8_0 → Q8_0; Q4_1/Q5_1 → Q8_1; Q2_K..Q6_K → Q8_K; the float
/// types and the activation formats themselves map to themselves.
pub fn vec_dot_type(w: GgmlType) -> GgmlType {
    match w {
        GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 => GgmlType::Q8_0,
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q8_1 => GgmlType::Q8_1,
        GgmlType::Q2_K
        | GgmlType::Q3_K
        | GgmlType::Q4_K
        | GgmlType::Q5_K
        | GgmlType::Q6_K
        | GgmlType::Q8_K => GgmlType::Q8_K,
        GgmlType::F32 => GgmlType::F32,
        GgmlType::F16 => GgmlType::F16,
        GgmlType::BF16 => GgmlType::BF16,
    }
}

/// Quantize a row of activations into format `ty` (one of Q8_0, Q8_1, Q8_K, F16, BF16, F32),
/// like ggml's reference quantizers. `src.len()` must be a multiple of the block size and
/// `dst.len() == ty.row_bytes(src.len())`; otherwise, or for another `ty`, the result is an
/// [`Error::InvalidOption`].
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
        other => {
            return Err(Error::InvalidOption(format!(
                "quantizing to {other} is not supported (activation formats: Q8_0, Q8_1, Q8_K, \
                 F16, BF16, F32)"
            )))
        }
    }
    Ok(())
}

/// Q8_0 (or Q8_1 when `q8_1`) activation rows with this CPU's block quantizer (all give the
/// portable quantizer's bytes).
fn quantize_q8_row(q8_1: bool, src: &[f32], dst: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    if x86_level().is_some() {
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
        let block = |x: &[f32], q: &mut [u8]| unsafe { neon::quantize_q8_block(x, q) };
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
        return unsafe { neon_kquants::quantize_q8_k(src, dst) };
    }
    #[cfg(target_arch = "x86_64")]
    if x86_level().is_some() {
        // SAFETY: the x86 levels are selected only after detecting AVX2, FMA and F16C; the
        // quantizer takes whole blocks of both slices.
        return unsafe { x86::quantize_q8_k(src, dst) };
    }
    kquants::quantize_q8_k(src, dst)
}

/// The number of whole blocks of `n` elements that both rows really hold. Equal to
/// `n / block_size` for well-formed input (checked in debug builds); clamping keeps the SIMD
/// kernels in bounds even when a caller passes short rows.
fn blocks_in_rows(w: GgmlType, n: usize, w_row: &[u8], act_row: &[u8]) -> usize {
    let a = vec_dot_type(w);
    debug_assert_eq!(
        n % w.block_size(),
        0,
        "vec_dot: {n} is not a whole number of {w} blocks"
    );
    debug_assert_eq!(
        w_row.len(),
        n / w.block_size() * w.type_size(),
        "vec_dot: {w} row length"
    );
    debug_assert_eq!(
        act_row.len(),
        n / a.block_size() * a.type_size(),
        "vec_dot: {a} row length"
    );
    (n / w.block_size())
        .min(w_row.len() / w.type_size())
        .min(act_row.len() / a.type_size())
}

/// Dot product of one weight row (type `w`, `n` elements) with one activation row already in
/// [`vec_dot_type`]`(w)`, using the kernels selected at run time. Lengths are the caller's
/// responsibility (checked with `debug_assert`; in release builds short rows are truncated to
/// whole blocks, never read out of bounds).
///
/// The SIMD kernels assume weights as ggml writes them: Q8_0 quants in −127..=127 (a −128 in
/// both operands of a product is mis-signed, exactly as in ggml's AVX2 kernel).
pub fn vec_dot(w: GgmlType, n: usize, w_row: &[u8], act_row: &[u8]) -> f32 {
    match level() {
        #[cfg(target_arch = "x86_64")]
        Level::Avx2 | Level::Avx512Vnni => {
            let nb = blocks_in_rows(w, n, w_row, act_row);
            if let (Level::Avx512Vnni, Some(kind)) = (level(), x86_tile::kind(w)) {
                // SAFETY: the level was selected after detecting the features; nb blocks are
                // present in both rows.
                let v = unsafe {
                    x86_tile::tile::<1, 1>(true, kind, nb, [w_row.as_ptr()], [act_row.as_ptr()])
                };
                return v[0][0];
            }
            // SAFETY: as above.
            if let Some(v) = unsafe { avx2_vec_dot(w, nb, w_row, act_row) } {
                return v;
            }
        }
        #[cfg(target_arch = "aarch64")]
        Level::Neon | Level::Dotprod | Level::I8mm => {
            let nb = blocks_in_rows(w, n, w_row, act_row);
            // SAFETY: the level was selected after detecting its features; nb blocks (elements,
            // for the float types) are present in both rows.
            if let Some(v) = unsafe { neon_vec_dot(w, nb, w_row, act_row) } {
                return v;
            }
        }
        Level::Scalar => {}
    }
    vec_dot_scalar(w, n, w_row, act_row)
}

/// The one-row AVX2 kernel for weight type `w` over `nb` blocks, or `None` when there is none.
///
/// # Safety
/// AVX2, FMA and F16C must be present, and both rows must hold `nb` whole blocks (elements, for
/// the float types).
#[cfg(target_arch = "x86_64")]
unsafe fn avx2_vec_dot(w: GgmlType, nb: usize, x: &[u8], y: &[u8]) -> Option<f32> {
    Some(match w {
        GgmlType::F32 => x86::dot_f32(nb, x, y),
        GgmlType::F16 => x86::dot_f16(nb, x, y),
        GgmlType::BF16 => x86::dot_bf16(nb, x, y),
        GgmlType::Q4_0 => x86::dot_q4_0(nb, x, y),
        GgmlType::Q4_1 => x86::dot_q4_1(nb, x, y),
        GgmlType::Q5_0 => x86::dot_q5_0(nb, x, y),
        GgmlType::Q5_1 => x86::dot_q5_1(nb, x, y),
        GgmlType::Q8_0 => x86::dot_q8_0(nb, x, y),
        GgmlType::Q2_K => x86_kquants::dot_q2_k(nb, x, y),
        GgmlType::Q3_K => x86_kquants::dot_q3_k(nb, x, y),
        GgmlType::Q4_K => x86_kquants::dot_q4_k(nb, x, y),
        GgmlType::Q5_K => x86_kquants::dot_q5_k(nb, x, y),
        GgmlType::Q6_K => x86_kquants::dot_q6_k(nb, x, y),
        GgmlType::Q8_1 | GgmlType::Q8_K => return None,
    })
}

/// The one-row NEON kernel for weight type `w` over `nb` blocks (elements, for the float
/// types), or `None` when there is none.
///
/// # Safety
/// An aarch64 SIMD level must be selected, and both rows must hold `nb` whole blocks.
#[cfg(target_arch = "aarch64")]
unsafe fn neon_vec_dot(w: GgmlType, nb: usize, x: &[u8], y: &[u8]) -> Option<f32> {
    let isa = arm_isa()?;
    match w {
        GgmlType::F32 => Some(neon_float::dot_f32(nb, x, y)),
        GgmlType::F16 => Some(neon_float::dot_f16(nb, x, y)),
        GgmlType::BF16 => Some(neon_float::dot_bf16(nb, x, y)),
        _ => Some(neon_tile::<1, 1>(isa, w, nb, [x.as_ptr()], [y.as_ptr()])?[0][0]),
    }
}

/// The NEON tile kernel for weight type `w`: `R` weight rows by `T` activation rows of `nb`
/// blocks each, or `None` for the types without one (the float and activation formats).
///
/// # Safety
/// `isa`'s features must be present, and every row must hold `nb` whole blocks.
#[cfg(target_arch = "aarch64")]
unsafe fn neon_tile<const R: usize, const T: usize>(
    isa: neon::Isa,
    w: GgmlType,
    nb: usize,
    wp: [*const u8; R],
    ap: [*const u8; T],
) -> Option<[[f32; T]; R]> {
    use blocks::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0};
    use neon::{run, LegacyTile as L};
    use neon_kquants::{KTile as K, Q2K, Q3K, Q4K, Q5K, Q6K};
    Some(match w {
        GgmlType::Q4_0 => run(isa, L::<BlockQ4_0, R, T>::new(nb, wp, ap)),
        GgmlType::Q4_1 => run(isa, L::<BlockQ4_1, R, T>::new(nb, wp, ap)),
        GgmlType::Q5_0 => run(isa, L::<BlockQ5_0, R, T>::new(nb, wp, ap)),
        GgmlType::Q5_1 => run(isa, L::<BlockQ5_1, R, T>::new(nb, wp, ap)),
        GgmlType::Q8_0 => run(isa, L::<BlockQ8_0, R, T>::new(nb, wp, ap)),
        GgmlType::Q2_K => run(isa, K::<Q2K, R, T>::new(nb, wp, ap)),
        GgmlType::Q3_K => run(isa, K::<Q3K, R, T>::new(nb, wp, ap)),
        GgmlType::Q4_K => run(isa, K::<Q4K, R, T>::new(nb, wp, ap)),
        GgmlType::Q5_K => run(isa, K::<Q5K, R, T>::new(nb, wp, ap)),
        GgmlType::Q6_K => run(isa, K::<Q6K, R, T>::new(nb, wp, ap)),
        _ => return None,
    })
}

/// `out[i] = rows[i] · act` for consecutive weight rows of `n` elements stored back to back in
/// `rows` (as many as `out` holds), with the kernel chosen once for all rows (decoding's
/// matrix-vector product). Each result is bit-identical to [`vec_dot`]. Panics when `rows` is
/// shorter than `out.len()` rows.
pub fn vec_dot_rows(w: GgmlType, n: usize, rows: &[u8], act: &[u8], out: &mut [f32]) {
    vec_dot_rows_tokens(w, n, rows, [act], [out]);
}

/// Whether [`vec_dot_rows_tokens`] has a kernel for weight type `w` that reads each weight
/// block once for all (up to 4) tokens, which beats the tile kernels for few tokens.
pub fn rows_tokens_kernel(w: GgmlType) -> bool {
    #[cfg(target_arch = "x86_64")]
    if x86_level().is_some() && x86_tile::kind(w).is_some() {
        return true;
    }
    let _ = w;
    false
}

/// `out[t][i] = rows[i] · acts[t]` for `T` (1 to 4) activation rows: [`vec_dot_rows`] for a
/// few tokens at once (one token of each of a few sequences), each weight block read once
/// for all of them. Each result is bit-identical to [`vec_dot`]. Panics when `rows` is
/// shorter than `out[0].len()` rows or the `out` slices differ in length.
pub fn vec_dot_rows_tokens<const T: usize>(
    w: GgmlType,
    n: usize,
    rows: &[u8],
    acts: [&[u8]; T],
    mut out: [&mut [f32]; T],
) {
    let count = out.first().map_or(0, |o| o.len());
    let row_len = w.row_bytes(n as u64).unwrap_or(0) as usize;
    assert!(
        rows.len() >= row_len * count && out.iter().all(|o| o.len() == count),
        "vec_dot_rows: too few weight rows"
    );
    assert!(T <= 4, "vec_dot_rows: at most 4 tokens at once");
    #[cfg(target_arch = "x86_64")]
    if let (Some(vnni), Some(kind), Some(first), Some(a0)) = (
        x86_level(),
        x86_tile::kind(w),
        rows.get(..row_len),
        acts.first(),
    ) {
        assert!(
            acts.iter().all(|a| a.len() == a0.len()),
            "vec_dot_rows: activation rows of different lengths"
        );
        let nb = blocks_in_rows(w, n, first, a0);
        let (base, a) = (rows.as_ptr(), acts.map(|a| a.as_ptr()));
        // Four rows at a time for instruction-level parallelism, taken a quarter of the
        // range apart: four far-apart sequential streams read at full bandwidth, while
        // adjacent rows read together do not (see x86_tile).
        let quarter = count / 4;
        let rows4 = |i: usize| [i, i + quarter, i + 2 * quarter, i + 3 * quarter];
        let mut store = |r: [usize; 4], v: [[f32; T]; 4]| {
            for (k, &r) in r.iter().enumerate() {
                for (t, o) in out.iter_mut().enumerate() {
                    o[r] = v[k][t];
                }
            }
        };
        // SAFETY (every branch): every row index is < count, so each row's nb whole blocks
        // are inside `rows` (checked above), as are every activation row's (equal lengths),
        // prepared in `prep`; the features were detected (`wide()`: AVX-512 BW too). One
        // token without VNNI takes the AVX2 kernel that holds two rows per register.
        if wide() {
            let out = out.each_mut().map(|o| o.as_mut_ptr());
            let rows = |prep| unsafe {
                x86_decode::rows_for(kind, nb, (base, row_len, quarter), a, prep, out)
            };
            let prepare =
                |a: &[u8], out: &mut [_]| unsafe { x86_decode::prepare(kind, nb, a, out) };
            x86_tile::with_prepared(nb, acts, prepare, rows);
        } else if !vnni {
            let prepare =
                |a: &[u8], out: &mut [_]| unsafe { x86_decode_avx2::prepare(kind, nb, a, out) };
            x86_tile::with_prepared(nb, acts, prepare, |prep| {
                for r in (0..quarter).map(rows4) {
                    let w = r.map(|r| base.wrapping_add(r * row_len));
                    store(r, unsafe {
                        x86_decode_avx2::rows4_for(kind, nb, w, a, prep)
                    });
                }
            });
        } else {
            for r in (0..quarter).map(rows4) {
                let w = r.map(|r| base.wrapping_add(r * row_len));
                store(r, unsafe { x86_tile::tile::<4, T>(vnni, kind, nb, w, a) });
            }
        }
        for r in 4 * quarter..count {
            // SAFETY: as above.
            let v = unsafe { x86_tile::tile::<1, T>(vnni, kind, nb, [base.add(r * row_len)], a) };
            for (t, o) in out.iter_mut().enumerate() {
                o[r] = v[0][t];
            }
        }
        return;
    }
    #[cfg(target_arch = "aarch64")]
    if let (Some(isa), Some(first), Some(a0), 1..) =
        (arm_isa(), rows.get(..row_len), acts.first(), tile_rows(w))
    {
        assert!(
            acts.iter().all(|a| a.len() == a0.len()),
            "vec_dot_rows: activation rows of different lengths"
        );
        let nb = blocks_in_rows(w, n, first, a0);
        let (base, a) = (rows.as_ptr(), acts.map(|a| a.as_ptr()));
        // Four rows a quarter of the range apart, as on x86-64: four far-apart sequential
        // streams.
        let quarter = count / 4;
        for i in 0..quarter {
            let r = [i, i + quarter, i + 2 * quarter, i + 3 * quarter];
            // SAFETY: the features were detected; every row index is < count, so each row's
            // nb whole blocks are inside `rows` (checked above), as are the activations'.
            let v = unsafe { neon_tile::<4, T>(isa, w, nb, r.map(|r| base.add(r * row_len)), a) }
                .expect("every type with tile_rows > 0 has a NEON tile");
            for (k, &r) in r.iter().enumerate() {
                for (t, o) in out.iter_mut().enumerate() {
                    o[r] = v[k][t];
                }
            }
        }
        for (r, row) in rows
            .chunks_exact(row_len.max(1))
            .enumerate()
            .take(count)
            .skip(4 * quarter)
        {
            for (t, o) in out.iter_mut().enumerate() {
                o[r] = vec_dot(w, n, row, acts[t]);
            }
        }
        return;
    }
    for (r, row) in rows.chunks_exact(row_len.max(1)).enumerate().take(count) {
        for (t, o) in out.iter_mut().enumerate() {
            o[r] = vec_dot(w, n, row, acts[t]);
        }
    }
}

/// How many weight rows [`vec_dot_tile`] should take at once for weight type `w` on this CPU
/// (x86-64: 4 for the 32-element formats (with AVX2 alone, two rows per register), 1 for the K formats except Q4_K
/// and Q6_K with AVX-512 VNNI + BW, 2 (× 8 tokens, see `x86_ktile`); aarch64: 2
/// for the 32-element formats, the row pair of `smmla`, and for the K formats 2 with `smmla`,
/// else 1), or 0 when `w` has no tile kernel.
pub fn tile_rows(w: GgmlType) -> usize {
    #[cfg(target_arch = "x86_64")]
    if x86_level().is_some() {
        if x86_tile::kind(w).is_some() {
            return 4;
        }
        if matches!(w, GgmlType::Q4_K | GgmlType::Q6_K) && wide() {
            return 2;
        }
        if matches!(w, GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K) {
            return 1;
        }
    }
    #[cfg(target_arch = "aarch64")]
    if arm_isa().is_some() {
        match w {
            GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q5_1 | GgmlType::Q8_0 => {
                return 2
            }
            // With `smmla` the K tiles take row pairs too.
            GgmlType::Q2_K | GgmlType::Q3_K | GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K => {
                return if level() == Level::I8mm { 2 } else { 1 };
            }
            _ => {}
        }
    }
    let _ = w;
    0
}

/// How many tokens [`vec_dot_tile`] should take at once for weight type `w` when it takes
/// [`tile_rows`] rows: 8 with the wide AVX-512 tile (4 rows × 8 tokens, [`vec_dot_tile_wide`])
/// and with the AVX-512 K tile (Q4_K, Q6_K: 2 rows × 8 tokens), else 4.
pub fn tile_tokens(w: GgmlType) -> usize {
    #[cfg(target_arch = "x86_64")]
    if wide() && x86_tile::kind(w).is_some() {
        return x86_wide::TOKENS;
    }
    #[cfg(target_arch = "x86_64")]
    if wide() && matches!(w, GgmlType::Q4_K | GgmlType::Q6_K) {
        return 8;
    }
    let _ = w;
    4
}

/// Dot products of `R` weight rows with `T` activation rows (in [`vec_dot_type`]`(w)`):
/// `out[r][t] = w_rows[r] · acts[t]`, each bit-identical to [`vec_dot`]. `None` when `w` has no
/// tile kernel here ([`tile_rows`] is 0). All weight rows (and all activation rows) must have
/// the same length; rows are truncated to whole blocks like `vec_dot`.
pub fn vec_dot_tile<const R: usize, const T: usize>(
    w: GgmlType,
    n: usize,
    w_rows: [&[u8]; R],
    acts: [&[u8]; T],
) -> Option<[[f32; T]; R]> {
    #[cfg(target_arch = "x86_64")]
    if let (Some(vnni), true) = (x86_level(), R > 0 && T > 0) {
        let (w0, a0) = (w_rows[0], acts[0]);
        assert!(
            w_rows.iter().all(|r| r.len() == w0.len()) && acts.iter().all(|a| a.len() == a0.len()),
            "vec_dot_tile: rows of different lengths"
        );
        let nb = blocks_in_rows(w, n, w0, a0);
        let (wp, ap) = (w_rows.map(|r| r.as_ptr()), acts.map(|a| a.as_ptr()));
        // SAFETY: the x86 levels are selected only after detecting avx2/fma/f16c (and the
        // AVX-512 features for `vnni`); `nb` whole blocks are present in every row (all rows
        // have equal lengths).
        return unsafe {
            match x86_tile::kind(w) {
                // Without VNNI, four rows take the kernel that holds two rows per register.
                Some(kind) if !vnni && R == 4 && T <= 4 => {
                    let v =
                        x86_decode_avx2::tile4_for(kind, nb, std::array::from_fn(|i| wp[i]), ap);
                    Some(std::array::from_fn(|r| v[r]))
                }
                Some(kind) => Some(x86_tile::tile::<R, T>(vnni, kind, nb, wp, ap)),
                None => x86_kquants::tile::<R, T>(vnni, w, nb, wp, ap),
            }
        };
    }
    #[cfg(target_arch = "aarch64")]
    if let (Some(isa), true) = (arm_isa(), R > 0 && T > 0) {
        let (w0, a0) = (w_rows[0], acts[0]);
        assert!(
            w_rows.iter().all(|r| r.len() == w0.len()) && acts.iter().all(|a| a.len() == a0.len()),
            "vec_dot_tile: rows of different lengths"
        );
        let nb = blocks_in_rows(w, n, w0, a0);
        // SAFETY: the level was selected after detecting its features; `nb` whole blocks are
        // present in every row (all rows have equal lengths).
        return unsafe {
            neon_tile::<R, T>(
                isa,
                w,
                nb,
                w_rows.map(|r| r.as_ptr()),
                acts.map(|a| a.as_ptr()),
            )
        };
    }
    let _ = (w, n, w_rows, acts);
    None
}

/// One 64-byte line of quantized activations packed for the wide prompt tile
/// ([`wide_pack`]).
#[repr(C, align(64))]
#[derive(Clone, Copy)]
pub(crate) struct PackLine(pub [u8; 64]);

/// How many [`PackLine`]s [`wide_pack`] writes per group of [`tile_tokens`] activation rows of
/// `n` elements for weight type `w`; 0 where the wide AVX-512 prompt tile does not run for `w`.
pub(crate) fn wide_pack_lines(w: GgmlType, n: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    if let (true, Some(_)) = (wide(), x86_tile::kind(w)) {
        return x86_wide::LINES * (n / 32);
    }
    let _ = (w, n);
    0
}

/// Packs a group of [`tile_tokens`] (8) quantized activation rows (in
/// [`vec_dot_type`]`(w)`, `n` elements each) for [`vec_dot_tile_wide`]; `out` holds
/// [`wide_pack_lines`] lines. Done once per matmul, so every group of weight rows reads the
/// same pack.
pub(crate) fn wide_pack(w: GgmlType, n: usize, acts: [&[u8]; 8], out: &mut [PackLine]) {
    #[cfg(target_arch = "x86_64")]
    if let (true, Some(kind)) = (wide(), x86_tile::kind(w)) {
        let a = vec_dot_type(w);
        let nb = acts
            .iter()
            .map(|r| r.len() / a.type_size())
            .fold(n / 32, usize::min)
            .min(out.len() / x86_wide::LINES);
        // SAFETY: `wide()` detected AVX-512 F/VL/VNNI/BW (and AVX2/FMA/F16C).
        return unsafe { x86_wide::pack(kind, nb, acts, out) };
    }
    let _ = (w, n, acts, out);
}

/// The wide AVX-512 prompt tile: 4 weight rows × 8 tokens packed by [`wide_pack`],
/// bit-identical to [`vec_dot`]; `None` where it does not run ([`wide_pack_lines`] is 0).
pub(crate) fn vec_dot_tile_wide(
    w: GgmlType,
    n: usize,
    w_rows: [&[u8]; 4],
    packed: &[PackLine],
) -> Option<[[f32; 8]; 4]> {
    #[cfg(target_arch = "x86_64")]
    if let (true, Some(kind)) = (wide(), x86_tile::kind(w)) {
        assert!(
            w_rows.iter().all(|r| r.len() == w_rows[0].len()),
            "vec_dot_tile_wide: rows of different lengths"
        );
        let nb = (n / 32)
            .min(w_rows[0].len() / w.type_size())
            .min(packed.len() / x86_wide::LINES);
        // SAFETY: `wide()` detected AVX-512 F/VL/VNNI/BW (and AVX2/FMA/F16C); every row holds
        // `nb` whole blocks (equal lengths) and `packed` `LINES × nb` lines.
        return Some(unsafe {
            x86_wide::tile_for(kind, nb, w_rows.map(|r| r.as_ptr()), packed.as_ptr())
        });
    }
    let _ = (w, n, w_rows, packed);
    None
}

/// The portable kernel [`vec_dot`] uses when `LOCAL_LLM_SIMD=scalar` is set or no SIMD kernel
/// exists; exposed so tests and benchmarks can compare the SIMD kernels against it.
pub fn vec_dot_scalar(w: GgmlType, n: usize, w_row: &[u8], act_row: &[u8]) -> f32 {
    let nb = blocks_in_rows(w, n, w_row, act_row);
    match w {
        GgmlType::F32 => float::dot_f32(nb, w_row, act_row),
        GgmlType::F16 => float::dot_f16(nb, w_row, act_row),
        GgmlType::BF16 => float::dot_bf16(nb, w_row, act_row),
        GgmlType::Q4_0 => legacy::dot_q4_0_q8_0(nb, w_row, act_row),
        GgmlType::Q4_1 => legacy::dot_q4_1_q8_1(nb, w_row, act_row),
        GgmlType::Q5_0 => legacy::dot_q5_0_q8_0(nb, w_row, act_row),
        GgmlType::Q5_1 => legacy::dot_q5_1_q8_1(nb, w_row, act_row),
        GgmlType::Q8_0 => legacy::dot_q8_0_q8_0(nb, w_row, act_row),
        GgmlType::Q8_1 => legacy::dot_q8_1_q8_1(nb, w_row, act_row),
        GgmlType::Q2_K => kquants::dot_q2_k(nb, w_row, act_row),
        GgmlType::Q3_K => kquants::dot_q3_k(nb, w_row, act_row),
        GgmlType::Q4_K => kquants::dot_q4_k(nb, w_row, act_row),
        GgmlType::Q5_K => kquants::dot_q5_k(nb, w_row, act_row),
        GgmlType::Q6_K => kquants::dot_q6_k(nb, w_row, act_row),
        GgmlType::Q8_K => kquants::dot_q8_k(nb, w_row, act_row),
    }
}
