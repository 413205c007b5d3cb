//! Compute backends: a registry of devices (CPU always; accelerators such as IBM Z NNPA when
//! present), weight placement at load time, and the matmul engine.
//!
//! The design follows the registry → device → buffer split: the [`Registry`] lists devices, each
//! [`Device`] says which matmuls it supports and places weights into its own memory
//! ([`DeviceWeight`]); a [`Weight`] remembers where it lives and falls back to the CPU for
//! anything its device cannot run.

mod buffer;
mod cpu;
mod host;
#[cfg(any(feature = "nnpa-emulator", target_arch = "s390x"))]
pub mod nnpa;
mod registry;
mod threads;
mod weight;

pub use buffer::TensorBytes;
pub(crate) use cpu::Epilogue;
pub use host::{performance_cores, HostMemory, USABLE_PERCENT};
pub use registry::Registry;
pub(crate) use threads::split_range;
pub use threads::{max_threads, SharedMut, Threads};
pub use weight::Weight;

use crate::quant::GgmlType;
use crate::Result;

/// What kind of hardware a device is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceKind {
    /// The host CPU.
    Cpu,
    /// A matrix accelerator (e.g. IBM Z NNPA).
    Accelerator,
}

impl DeviceKind {
    /// Lower-case name ("cpu", "accelerator").
    pub fn name(self) -> &'static str {
        match self {
            DeviceKind::Cpu => "cpu",
            DeviceKind::Accelerator => "accelerator",
        }
    }
}

/// A device's description as shown to users (`local-llm devices`, the JS `getBackends()`).
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceInfo {
    /// Short unique name, e.g. "CPU" or "NNPA".
    pub name: String,
    /// Human-readable description.
    pub description: String,
    /// Device kind.
    pub kind: DeviceKind,
    /// Total memory in bytes, when known.
    pub memory_total: Option<u64>,
    /// Free memory in bytes, when known.
    pub memory_free: Option<u64>,
    /// Capabilities, e.g. SIMD level or accelerator features.
    pub features: Vec<String>,
}

/// The shape and type of a weight matrix (`rows` output features × `cols` input features).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatmulShape {
    /// Element type of the weight.
    pub ty: GgmlType,
    /// Number of rows (output features).
    pub rows: usize,
    /// Number of columns (input features, the dot-product length).
    pub cols: usize,
}

/// A compute device.
pub trait Device: Send + Sync {
    /// The device's description.
    fn info(&self) -> DeviceInfo;
    /// Whether this device can run a matmul with a weight of this shape and type.
    fn supports_matmul(&self, shape: MatmulShape) -> bool;
    /// Place a weight on the device (called once at load time).
    fn place_weight(&self, shape: MatmulShape, data: &TensorBytes)
        -> Result<Box<dyn DeviceWeight>>;
}

/// A weight living in a device's memory.
pub trait DeviceWeight: Send + Sync {
    /// Name of the device holding the weight.
    fn device_name(&self) -> &str;
    /// `out[t][r] = Σ_c w[r][c] · x[t][c]` for `n_tokens` rows of `x`.
    fn matmul(&self, x: &[f32], n_tokens: usize, out: &mut [f32], threads: &Threads) -> Result<()>;
}
