//! A weight matrix placed on a device at load time, with CPU fallback.

use std::sync::atomic::{AtomicBool, Ordering};

use super::{cpu, DeviceWeight, MatmulShape, TensorBytes, Threads};
use crate::{Error, Result};

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
    pub fn matmul(
        &self,
        x: &[f32],
        n_tokens: usize,
        out: &mut [f32],
        threads: &Threads,
    ) -> Result<()> {
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

    /// `outs[i] = weights[i] · x` (see [`Weight::matmul`]) for weights applied to the same
    /// input. The CPU weights of one type and width among them share one quantization of `x`
    /// and one dispatch to the threads; weights on a device run one by one.
    pub fn matmul_shared_input(
        weights: &[&Weight],
        x: &[f32],
        n_tokens: usize,
        outs: &mut [&mut [f32]],
        threads: &Threads,
    ) -> Result<()> {
        if weights.len() != outs.len() {
            return Err(Error::Backend(format!(
                "{} weights for {} outputs",
                weights.len(),
                outs.len()
            )));
        }
        let mut done = vec![false; weights.len()];
        for i in 0..weights.len() {
            if done[i] {
                continue;
            }
            let lead = weights[i];
            if lead.placed.is_some() {
                lead.matmul(x, n_tokens, outs[i], threads)?;
                done[i] = true;
                continue;
            }
            let MatmulShape { ty, cols, .. } = lead.shape;
            let joins = |j: usize| {
                let w = weights[j];
                !done[j] && w.placed.is_none() && w.shape.ty == ty && w.shape.cols == cols
            };
            let members: Vec<usize> = (i..weights.len()).filter(|&j| joins(j)).collect();
            let mut parts: Vec<cpu::Part> = outs
                .iter_mut()
                .enumerate()
                .filter(|(j, _)| members.contains(j))
                .map(|(j, out)| cpu::Part {
                    w: weights[j].bytes(),
                    rows: weights[j].shape.rows,
                    out,
                })
                .collect();
            cpu::matmul_shared_input(ty, cols, &mut parts, x, n_tokens, threads)?;
            for j in members {
                done[j] = true;
            }
        }
        Ok(())
    }
}
