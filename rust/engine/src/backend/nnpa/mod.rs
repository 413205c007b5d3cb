//! IBM Z NNPA (Neural Network Processing Assist) devices: the real one through zDNN
//! ([`zdnn_sys`], compiled only for s390x, registered when `libzdnn.so.0` loads and reports an
//! NNPA) and a pure-Rust emulator of the same contract for any host (cargo feature
//! `nnpa-emulator`, on for the CLI and the tests, off in the phone libraries). Without either,
//! this module is not compiled.
//!
//! Both follow llama.cpp's ggml-zdnn seed: matmuls whose weight is 2-D F32/F16/BF16 with every
//! dimension within the NNPA's maximum dimension index size run on the device; the weight is
//! converted to DLFLOAT16 and stickified once at load, a zero bias is kept per weight,
//! activations are transformed per call and the DLFLOAT16 result is transformed back to f32.
//! Quantized weights are dequantized to DLFLOAT16 at load only when
//! [`NnpaOptions::offload_quantized`] is set: off by default, because a DLFLOAT16 weight takes
//! 2 bytes per value against 0.56 (Q4_K) to 1.06 (Q8_0) on the CPU — 2-3.6× the memory — and
//! token generation is bound by reading the weights, so the CPU's quantized kernels are the
//! better default for phones and small hosts; enable it for prompt-heavy work on an NNPA.

#[cfg(target_arch = "s390x")]
mod device;
pub mod dlfloat;
#[cfg(feature = "nnpa-emulator")]
mod emulator;
pub mod stickify;

use std::sync::Arc;

#[cfg(target_arch = "s390x")]
pub use device::NnpaDevice;
#[cfg(feature = "nnpa-emulator")]
pub use emulator::{EmulatedDevice, EmulatorOptions, InjectedFailure};
use zdnn_sys::Status;

use super::{Device, MatmulShape, TensorBytes};
use crate::quant::{self, GgmlType};
use crate::{Error, Result};

/// Name of the real device.
#[cfg(target_arch = "s390x")]
pub const DEVICE_NAME: &str = "NNPA";
/// Name of the emulated device.
#[cfg(feature = "nnpa-emulator")]
pub const EMULATED_DEVICE_NAME: &str = "NNPA (emulated)";
/// Description of the real device.
pub const DESCRIPTION: &str = "IBM Z Neural Network Processing Assist (NNPA)";
/// Environment variable that enables the emulated device in [`super::Registry::detect`] (`1`).
#[cfg(feature = "nnpa-emulator")]
pub const EMULATE_ENV: &str = "LOCAL_LLM_NNPA_EMULATE";
/// Environment variable that sets [`NnpaOptions::offload_quantized`] for detected devices (`1`).
pub const QUANTIZED_ENV: &str = "LOCAL_LLM_NNPA_QUANTIZED";

/// Options of the NNPA devices.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NnpaOptions {
    /// Also place quantized weights, dequantized to DLFLOAT16 at load (default off: see the
    /// module documentation).
    pub offload_quantized: bool,
}

impl NnpaOptions {
    /// Options from the environment ([`QUANTIZED_ENV`]).
    pub fn from_env() -> Self {
        NnpaOptions {
            offload_quantized: env_flag(QUANTIZED_ENV),
        }
    }
}

/// A failed zDNN call (or its emulation): the operation, zDNN's status code and its message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{op} failed with {} (0x{status:08X}): {message}", zdnn_sys::status_name(*status))]
pub struct StatusError {
    /// The zDNN function.
    pub op: &'static str,
    /// zDNN's status code.
    pub status: Status,
    /// zDNN's message for the status.
    pub message: String,
}

impl StatusError {
    /// An error for `status` with our own message (the emulator's, or without the library).
    pub fn new(op: &'static str, status: Status) -> Self {
        StatusError {
            op,
            status,
            message: zdnn_sys::status_message(status).to_string(),
        }
    }
}

impl From<StatusError> for Error {
    fn from(e: StatusError) -> Self {
        Error::Backend(e.to_string())
    }
}

/// The NNPA's size limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Limits {
    max_dim_idx_size: u32,
    max_tensor_size: u64,
}

impl Limits {
    /// Whether a dimension fits.
    fn dim_ok(&self, d: usize) -> bool {
        d >= 1 && d as u64 <= u64::from(self.max_dim_idx_size)
    }

    /// The placement rule shared by the real and emulated devices.
    fn supports(&self, shape: MatmulShape, options: NnpaOptions) -> bool {
        let type_ok = match shape.ty {
            GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => true,
            GgmlType::Q8_1 | GgmlType::Q8_K => false,
            _ => options.offload_quantized,
        };
        let size = stickify::StickShape::d2(shape.rows, shape.cols).size_bytes();
        type_ok
            && self.dim_ok(shape.rows)
            && self.dim_ok(shape.cols)
            && shape.ty.row_bytes(shape.cols as u64).is_some()
            && size.is_some_and(|s| s as u64 <= self.max_tensor_size)
    }
}

/// The weight's values as row-major f32 (`rows × cols`), dequantized from GGUF blocks.
fn weight_values(shape: MatmulShape, data: &TensorBytes) -> Result<Vec<f32>> {
    let expected = shape
        .ty
        .row_bytes(shape.cols as u64)
        .and_then(|r| r.checked_mul(shape.rows as u64));
    if expected != Some(data.len() as u64) {
        return Err(Error::Backend(format!(
            "a {}x{} {} weight cannot be {} bytes",
            shape.rows,
            shape.cols,
            shape.ty,
            data.len()
        )));
    }
    let mut values = vec![0.0f32; shape.rows * shape.cols];
    quant::dequantize(shape.ty, data.as_slice(), &mut values)?;
    Ok(values)
}

/// `rows × cols` row-major → `cols × rows` row-major.
fn transpose(values: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0f32; values.len()];
    for (r, row) in values.chunks_exact(cols).enumerate() {
        for (c, &v) in row.iter().enumerate() {
            out[c * rows + r] = v;
        }
    }
    out
}

/// The real NNPA when this host has one (libzdnn loads, NNPA installed), else `None`.
#[cfg(target_arch = "s390x")]
pub fn device(options: NnpaOptions) -> Option<Arc<dyn Device>> {
    match NnpaDevice::probe(options) {
        Ok(d) => Some(Arc::new(d)),
        Err(e) => {
            crate::log::log(crate::log::Level::Debug, &format!("no NNPA: {e}"));
            None
        }
    }
}

/// The emulated NNPA (any host).
#[cfg(feature = "nnpa-emulator")]
pub fn emulated_device(options: EmulatorOptions) -> Arc<dyn Device> {
    Arc::new(EmulatedDevice::new(options))
}

/// The NNPA devices for [`super::Registry::detect`]: the real one if present, else the emulated
/// one when [`EMULATE_ENV`] is `1`, else none.
pub(crate) fn detect() -> Vec<Arc<dyn Device>> {
    let options = NnpaOptions::from_env();
    #[cfg(target_arch = "s390x")]
    if let Some(d) = device(options) {
        return vec![d];
    }
    #[cfg(feature = "nnpa-emulator")]
    if env_flag(EMULATE_ENV) {
        return vec![emulated_device(EmulatorOptions {
            offload_quantized: options.offload_quantized,
            ..EmulatorOptions::default()
        })];
    }
    Vec::new()
}

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == "1")
}
