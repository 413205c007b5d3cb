//! A weight matrix placed on a device at load time, with CPU fallback.

use std::sync::atomic::{AtomicBool, Ordering};

use super::{cpu, DeviceWeight, MatmulShape, TensorBytes, Threads};
use crate::Result;

/// A 2-D weight (`rows` × `cols`) and where it runs. The CPU copy (often just the memory-mapped
/// bytes) is always kept so that a failing accelerator falls back to the CPU.
pub struct Weight {
    shape: MatmulShape,
    data: TensorBytes,
    placed: Option<Box<dyn DeviceWeight>>,
    fallback_logged: AtomicBool,
}

impl Weight {
    /// A weight that runs on the CPU.
    pub fn on_cpu(shape: MatmulShape, data: TensorBytes) -> Self {
        Weight {
            shape,
            data,
            placed: None,
            fallback_logged: AtomicBool::new(false),
        }
    }

    /// A weight placed on an accelerator, keeping `data` for CPU fallback.
    pub fn on_device(shape: MatmulShape, data: TensorBytes, placed: Box<dyn DeviceWeight>) -> Self {
        Weight {
            placed: Some(placed),
            ..Weight::on_cpu(shape, data)
        }
    }

    /// Shape and type.
    pub fn shape(&self) -> MatmulShape {
        self.shape
    }

    /// Name of the device the weight runs on.
    pub fn device_name(&self) -> &str {
        self.placed.as_ref().map_or("CPU", |p| p.device_name())
    }

    /// The weight's bytes in GGUF block layout.
    pub fn bytes(&self) -> &[u8] {
        self.data.as_slice()
    }

    /// `out[t*rows + r] = Σ_c w[r][c] · x[t*cols + c]` for `n_tokens` input rows.
    pub fn matmul(&self, x: &[f32], n_tokens: usize, out: &mut [f32], threads: &Threads) -> Result<()> {
        if let Some(placed) = &self.placed {
            match placed.matmul(x, n_tokens, out, threads) {
                Ok(()) => return Ok(()),
                Err(e) => {
                    if !self.fallback_logged.swap(true, Ordering::Relaxed) {
                        crate::log::warn(&format!(
                            "{} matmul failed ({e}); falling back to the CPU",
                            placed.device_name()
                        ));
                    }
                }
            }
        }
        cpu::matmul(self.shape, self.data.as_slice(), x, n_tokens, out, threads)
    }
}
