//! Model file conversion (named apart from `quant`, the block formats and kernels):
//! quantization, an F32/F16/BF16 GGUF in and a quantized GGUF out, like llama.cpp's
//! `llama-quantize` without an importance matrix, and float copies.
//!
//! [`quantize_file`] picks each tensor's type as llama-quantize does for the chosen
//! [`FileType`] mix (`policy`), quantizes with reimplementations of ggml's deterministic
//! quantizers (`legacy`, `kquants`; ggml's reference ones in `quant::reference` and
//! `quant::reference_iq4`) and writes a GGUF v3 file (`writer`) with every
//! metadata pair of the input plus `general.file_type` and `general.quantization_version`.
//! Memory stays bounded: tensors are processed a slab of rows at a time, rows in parallel on
//! the shared thread pool. The output is written to a temporary file renamed into place on
//! success, so a failed or cancelled run leaves no partial model behind.
//!
//! [`convert_file`] writes a float copy of any model this engine reads (quantized tensors
//! dequantized): the F16 sources the quantizer and llama-quantize are compared on.

mod kquants;
mod policy;
mod writer;

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

pub use policy::FileType;

use crate::backend::Threads;
use crate::gguf::{GgufFile, TensorInfo, Value};
use crate::quant::{self, reference, reference_iq4, GgmlType};
use crate::{Error, Result};
use writer::OutTensor;

/// Elements converted per slab: bounds the float buffer to 16 MiB whatever the tensor size.
const SLAB_ELEMENTS: u64 = 1 << 22;

/// Options of [`quantize_file`] and [`convert_file`] (llama-quantize's flags).
#[derive(Debug)]
pub struct QuantizeOptions {
    /// Threads to use (the caller included); 0 means all available cores.
    pub threads: usize,
    /// Set to true (from any thread) to stop: the call then returns [`Error::Cancelled`].
    pub cancel: Option<std::sync::Arc<AtomicBool>>,
    /// Accept already quantized tensors (dequantized, then quantized again: lossy twice).
    pub allow_requantize: bool,
    /// Quantize `output.weight` (default true); false copies it unchanged.
    pub quantize_output_tensor: bool,
    /// Every quantized tensor gets the mix's default type (no per-tensor choices).
    pub pure: bool,
}

impl Default for QuantizeOptions {
    fn default() -> Self {
        QuantizeOptions {
            threads: 0,
            cancel: None,
            allow_requantize: false,
            quantize_output_tensor: true,
            pure: false,
        }
    }
}

/// What a quantization target name asks for: one of llama-quantize's mixes, or a float copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// A quantization mix ([`quantize_file`]).
    Mix(FileType),
    /// A float copy in F32, F16 or BF16 ([`convert_file`]).
    Float(GgmlType),
}

impl Target {
    /// The target named `name` (case-insensitive; llama-quantize's type names and aliases,
    /// or F16, BF16, F32); [`Error::InvalidOption`] naming the supported ones otherwise. The
    /// one parser of the CLI and the FFI.
    pub fn from_name(name: &str) -> Result<Target> {
        let float = match name.to_ascii_uppercase().as_str() {
            "F16" => Some(GgmlType::F16),
            "BF16" => Some(GgmlType::BF16),
            "F32" => Some(GgmlType::F32),
            _ => None,
        };
        if let Some(ty) = float {
            return Ok(Target::Float(ty));
        }
        FileType::from_name(name).map(Target::Mix).ok_or_else(|| {
            Error::InvalidOption(format!(
                "unknown quantization type '{name}' (expected one of {}, F16, BF16, F32)",
                FileType::ALL.map(|t| t.name()).join(", ")
            ))
        })
    }

    /// Writes `input` as this target to `output` ([`quantize_file`] or [`convert_file`]).
    pub fn write(
        self,
        input: impl AsRef<Path>,
        output: impl AsRef<Path>,
        options: &QuantizeOptions,
    ) -> Result<QuantizeReport> {
        match self {
            Target::Mix(ftype) => quantize_file(input, output, ftype, options),
            Target::Float(ty) => convert_file(input, output, ty, options),
        }
    }
}

/// What a run wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuantizeReport {
    /// Every tensor of the output with its type, in file order.
    pub tensors: Vec<(String, GgmlType)>,
    /// Size of the input file in bytes.
    pub input_bytes: u64,
    /// Size of the output file in bytes.
    pub output_bytes: u64,
}

/// Quantizes the GGUF model at `input` (tensors to quantize must be F32, F16 or BF16) to
/// `output` with llama-quantize's `ftype` mix. Errors: [`Error::Io`], [`Error::Gguf`] for a
/// corrupt input, [`Error::UnsupportedArchitecture`], [`Error::InvalidModel`] for missing
/// metadata, [`Error::Quantize`] for an input that cannot be quantized (already quantized
/// tensors), [`Error::Cancelled`].
pub fn quantize_file(
    input: impl AsRef<Path>,
    output: impl AsRef<Path>,
    ftype: FileType,
    options: &QuantizeOptions,
) -> Result<QuantizeReport> {
    let file = GgufFile::open(input.as_ref())?;
    let arch = file
        .get_str("general.architecture")
        .ok_or_else(|| Error::InvalidModel("general.architecture is missing".into()))?
        .to_string();
    if !crate::model::SUPPORTED_ARCHITECTURES.contains(&arch.as_str()) {
        return Err(Error::UnsupportedArchitecture(arch));
    }
    // A per-layer array (Gemma 4's KV heads) counts by its first layer, as llama.cpp's
    // n_gqa() does.
    let key = |k: &str| {
        let k = format!("{arch}.{k}");
        file.get_u64(&k)
            .or_else(|| file.get_array(&k)?.get(0)?.as_u64())
    };
    let n_layer = key("block_count")
        .ok_or_else(|| Error::InvalidModel(format!("{arch}.block_count is missing")))?;
    let n_head = key("attention.head_count").unwrap_or(0);
    let n_head_kv = key("attention.head_count_kv").unwrap_or(n_head);
    let facts = policy::ModelFacts {
        n_layer: n_layer as usize,
        n_gqa: n_head.checked_div(n_head_kv).unwrap_or(0) as usize,
    };
    let mut order: Vec<&TensorInfo> = file.tensors().iter().collect();
    order.sort_by(|a, b| policy::tensor_order(a, b));
    let types = policy::choose_types(&order, ftype, &facts, options);
    let plan = order
        .iter()
        .zip(types)
        .map(|(t, ty)| {
            let ty = ty.unwrap_or(t.ty);
            let float_source = matches!(t.ty, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16);
            if ty != t.ty && !float_source && !options.allow_requantize {
                return Err(Error::Quantize(format!(
                    "tensor '{}' is already {}: quantize from an F32, F16 or BF16 model \
                     (or allow requantizing)",
                    t.name, t.ty
                )));
            }
            Ok((*t, ty))
        })
        .collect::<Result<Vec<_>>>()?;
    write_model(&file, output.as_ref(), &plan, ftype.code(), options)
}

/// Writes a float copy of the GGUF model at `input` to `output`: weights (tensors of two or
/// more dimensions) as `ty` (F32, F16 or BF16), other tensors as F32, quantized tensors
/// dequantized; `general.file_type` set accordingly. Errors as [`quantize_file`], and
/// [`Error::InvalidOption`] for a `ty` that is not a float type.
pub fn convert_file(
    input: impl AsRef<Path>,
    output: impl AsRef<Path>,
    ty: GgmlType,
    options: &QuantizeOptions,
) -> Result<QuantizeReport> {
    let ftype = match ty {
        GgmlType::F32 => 0,
        GgmlType::F16 => 1,
        GgmlType::BF16 => 32,
        other => {
            return Err(Error::InvalidOption(format!(
                "convert_file writes F32, F16 or BF16, not {other}"
            )))
        }
    };
    let file = GgufFile::open(input.as_ref())?;
    let plan: Vec<(&TensorInfo, GgmlType)> = file
        .tensors()
        .iter()
        .map(|t| (t, if t.n_rows() > 1 { ty } else { GgmlType::F32 }))
        .collect();
    write_model(&file, output.as_ref(), &plan, ftype, options)
}

/// Quantizes `src` (whole rows of `row_len` elements) into `dst` as `ty`.
fn quantize_rows(ty: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<()> {
    match ty {
        GgmlType::Q4_0 => reference::quantize_q4_0(src, dst),
        GgmlType::Q4_1 => reference::quantize_q4_1(src, dst),
        GgmlType::Q5_0 => reference::quantize_q5_0(src, dst),
        GgmlType::Q5_1 => reference::quantize_q5_1(src, dst),
        GgmlType::Q8_0 => reference::quantize_q8_0(src, dst),
        GgmlType::Q2_K => kquants::quantize_q2_k(src, dst),
        GgmlType::Q3_K => kquants::quantize_q3_k(src, dst),
        GgmlType::Q4_K => kquants::quantize_q4_k(src, dst),
        GgmlType::Q5_K => kquants::quantize_q5_k(src, dst),
        GgmlType::Q6_K => kquants::quantize_q6_k(src, dst),
        GgmlType::IQ4_NL => reference_iq4::quantize_iq4_nl(src, dst),
        GgmlType::IQ4_XS => reference_iq4::quantize_iq4_xs(src, dst),
        other => return quant::quantize_row(other, src, dst),
    }
    Ok(())
}

/// Writes `file`'s metadata (with `general.file_type = ftype`) and the planned tensors.
fn write_model(
    file: &GgufFile,
    output: &Path,
    plan: &[(&TensorInfo, GgmlType)],
    ftype: u32,
    options: &QuantizeOptions,
) -> Result<QuantizeReport> {
    let mut metadata: Vec<(&str, Value<'_>)> = file
        .metadata()
        .filter(|(k, _)| !k.starts_with("split."))
        .filter(|&(k, _)| k != "general.file_type" && k != "general.quantization_version")
        .collect();
    metadata.push(("general.quantization_version", Value::U32(2)));
    metadata.push(("general.file_type", Value::U32(ftype)));
    let out_tensors: Vec<OutTensor> = plan
        .iter()
        .map(|(t, ty)| OutTensor {
            name: t.name.clone(),
            dims: t.dims.clone(),
            ty: *ty,
        })
        .collect();
    for t in &out_tensors {
        let row = t.dims.first().copied().unwrap_or(0);
        if t.n_bytes().is_none() {
            return Err(Error::Quantize(format!(
                "tensor '{}': rows of {row} elements are not whole {} blocks",
                t.name, t.ty
            )));
        }
    }
    let alignment = file.alignment();
    let header = writer::header(&metadata, &out_tensors, alignment)
        .ok_or_else(|| Error::Quantize("tensor sizes overflow".into()))?;
    let threads = Threads::new(if options.threads == 0 {
        crate::backend::max_threads()
    } else {
        options.threads
    })?;
    crate::files::write_atomic(output, |f| {
        f.write_all(&header)?;
        let w = f.writer();
        for ((t, ty), out) in plan.iter().zip(&out_tensors) {
            let written = write_tensor(file, t, *ty, w, &threads, options, output)?;
            debug_assert_eq!(Some(written), out.n_bytes());
            writer::write_padding(w, written, alignment)
                .map_err(|e| crate::files::write_error(output, e))?;
        }
        Ok(())
    })?;
    let output_bytes = std::fs::metadata(output)
        .map_err(|e| crate::files::read_error(output, e))?
        .len();
    Ok(QuantizeReport {
        tensors: plan.iter().map(|(t, ty)| (t.name.clone(), *ty)).collect(),
        input_bytes: file.file_size(),
        output_bytes,
    })
}

/// Writes one tensor as `ty`, a slab of rows at a time; returns the bytes written.
fn write_tensor(
    file: &GgufFile,
    t: &TensorInfo,
    ty: GgmlType,
    w: &mut impl Write,
    threads: &Threads,
    options: &QuantizeOptions,
    output: &Path,
) -> Result<u64> {
    let data = file.tensor_data(t);
    let io_err = |source| crate::files::write_error(output, source);
    if ty == t.ty {
        w.write_all(data).map_err(io_err)?;
        return Ok(data.len() as u64);
    }
    let row_len = t.dims.first().copied().unwrap_or(0);
    let n_rows = t.n_rows();
    let (in_row, out_row) = match (t.ty.row_bytes(row_len), ty.row_bytes(row_len)) {
        (Some(i), Some(o)) => (i as usize, o as usize),
        _ => {
            return Err(Error::Quantize(format!(
                "tensor '{}': rows of {row_len} elements do not fit {} / {ty} blocks",
                t.name, t.ty
            )))
        }
    };
    let row_len = row_len as usize;
    let slab_rows = (SLAB_ELEMENTS / (row_len as u64).max(1)).clamp(1, n_rows.max(1)) as usize;
    let mut floats = vec![0f32; slab_rows * row_len];
    let mut bytes = vec![0u8; slab_rows * out_row];
    let mut written = 0u64;
    let mut row = 0usize;
    while (row as u64) < n_rows {
        if options
            .cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
        {
            return Err(Error::Cancelled);
        }
        let rows = slab_rows.min(n_rows as usize - row);
        let src = data
            .get(row * in_row..(row + rows) * in_row)
            .ok_or_else(|| Error::Quantize(format!("tensor '{}' is truncated", t.name)))?;
        let (xs, ys) = (&mut floats[..rows * row_len], &mut bytes[..rows * out_row]);
        let failed = AtomicBool::new(false);
        threads.for_each_rows2(xs, row_len, ys, out_row, |r0, x, y| {
            let n = x.len() / row_len;
            let s = &src[r0 * in_row..(r0 + n) * in_row];
            if quant::dequantize(t.ty, s, x).is_err() || quantize_rows(ty, x, y).is_err() {
                failed.store(true, Ordering::Relaxed);
            }
        });
        if failed.load(Ordering::Relaxed) {
            return Err(Error::Quantize(format!(
                "tensor '{}': cannot convert {} to {ty}",
                t.name, t.ty
            )));
        }
        w.write_all(ys).map_err(io_err)?;
        written += ys.len() as u64;
        row += rows;
    }
    Ok(written)
}
