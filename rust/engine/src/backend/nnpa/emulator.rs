//! A pure-Rust NNPA: the device contract of the real device (`device.rs`) with zDNN's DLFLOAT16
//! conversion, the stickified 4DFEATURE layout and a matmul on DLFLOAT16 inputs, for testing the
//! NNPA path (placement, stickify, bias, transform back, fallback) on any host.
//!
//! Arithmetic: weights and activations are rounded to DLFLOAT16; each output is the sum of the
//! products of those exact DLFLOAT16 values accumulated in f32 (eight interleaved partial sums,
//! then added), plus the DLFLOAT16 bias, rounded to DLFLOAT16 as the NNPA's output tensor is;
//! the NNPA's internal accumulation precision is not public, so f32 is our stated model.

use zdnn_sys::{Status, ZDNN_ELEMENT_RANGE_VIOLATION, ZDNN_INVALID_SHAPE};

use super::stickify::{StickShape, Stickified};
use super::{
    dlfloat, transpose, weight_values, Limits, NnpaOptions, StatusError, DESCRIPTION,
    EMULATED_DEVICE_NAME,
};
use crate::backend::{
    Device, DeviceInfo, DeviceKind, DeviceWeight, MatmulShape, SharedMut, TensorBytes, Threads,
};
use crate::{Error, Result};

/// A zDNN failure the emulator injects (for tests of the CPU fallback).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InjectedFailure {
    /// Every weight placement fails with this status (`zdnn_transform_ztensor`).
    Place(Status),
    /// Every matmul fails with this status (`zdnn_matmul_transpose_op` / `zdnn_matmul_op`).
    Matmul(Status),
}

/// Options of the emulated NNPA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmulatorOptions {
    /// Also place quantized weights (dequantized to DLFLOAT16 at load).
    pub offload_quantized: bool,
    /// Maximum dimension index size (default 32768, the value z16 reports).
    pub max_dim_idx_size: u32,
    /// Maximum tensor size in bytes (default 4 GiB).
    pub max_tensor_size: u64,
    /// Emulate parameter-block format 1 (`matmul_transpose_op`, weight kept as rows × cols);
    /// otherwise format 0 (`matmul_op`, weight stored transposed).
    pub parmblk_format_1: bool,
    /// A failure to inject, if any.
    pub failure: Option<InjectedFailure>,
}

impl Default for EmulatorOptions {
    fn default() -> Self {
        EmulatorOptions {
            offload_quantized: false,
            max_dim_idx_size: 32768,
            max_tensor_size: 4 << 30,
            parmblk_format_1: true,
            failure: None,
        }
    }
}

/// The emulated NNPA device ("NNPA (emulated)").
pub struct EmulatedDevice {
    options: EmulatorOptions,
}

impl EmulatedDevice {
    /// An emulated NNPA with `options`.
    pub fn new(options: EmulatorOptions) -> Self {
        EmulatedDevice { options }
    }

    fn limits(&self) -> Limits {
        Limits {
            max_dim_idx_size: self.options.max_dim_idx_size,
            max_tensor_size: self.options.max_tensor_size,
        }
    }
}

impl Device for EmulatedDevice {
    fn info(&self) -> DeviceInfo {
        let mut features = vec!["NNPA".to_string(), "NNPA_PARMBLKFORMAT_0".to_string()];
        if self.options.parmblk_format_1 {
            features.push("NNPA_PARMBLKFORMAT_1".to_string());
        }
        features.push(format!(
            "max_dim_idx_size={}",
            self.options.max_dim_idx_size
        ));
        features.push(format!(
            "quantized={}",
            if self.options.offload_quantized {
                "dequantized to DLFLOAT16"
            } else {
                "CPU"
            }
        ));
        DeviceInfo {
            name: EMULATED_DEVICE_NAME.to_string(),
            description: format!("{DESCRIPTION}, emulated in software"),
            kind: DeviceKind::Accelerator,
            memory_total: None,
            memory_free: None,
            features,
        }
    }

    fn supports_matmul(&self, shape: MatmulShape) -> bool {
        self.limits().supports(
            shape,
            NnpaOptions {
                offload_quantized: self.options.offload_quantized,
            },
        )
    }

    fn place_weight(
        &self,
        shape: MatmulShape,
        data: &TensorBytes,
    ) -> Result<Box<dyn DeviceWeight>> {
        if let Some(InjectedFailure::Place(status)) = self.options.failure {
            return Err(StatusError::new("zdnn_transform_ztensor", status).into());
        }
        if !self.supports_matmul(shape) {
            return Err(
                StatusError::new("zdnn_init_ztensor_with_malloc", ZDNN_INVALID_SHAPE).into(),
            );
        }
        let values = weight_values(shape, data)?;
        let transposed = !self.options.parmblk_format_1;
        let weight = if transposed {
            let t = transpose(&values, shape.rows, shape.cols);
            Stickified::from_f32(StickShape::d2(shape.cols, shape.rows), &t)?
        } else {
            Stickified::from_f32(StickShape::d2(shape.rows, shape.cols), &values)?
        };
        let bias = Stickified::zeroed(StickShape::d1(shape.rows))?.to_f32();
        let matmul_failure = match self.options.failure {
            Some(InjectedFailure::Matmul(status)) => Some(status),
            _ => None,
        };
        Ok(Box::new(EmulatedWeight {
            rows: shape.rows,
            cols: shape.cols,
            transposed,
            weight,
            bias,
            max_dim: self.options.max_dim_idx_size as usize,
            matmul_failure,
        }))
    }
}

/// A weight stickified in DLFLOAT16 with its zero bias.
struct EmulatedWeight {
    rows: usize,
    cols: usize,
    /// Format 0: stored as cols × rows for `matmul_op`.
    transposed: bool,
    weight: Stickified,
    /// The bias, decoded from its (zero) DLFLOAT16 ztensor.
    bias: Vec<f32>,
    max_dim: usize,
    matmul_failure: Option<Status>,
}

impl EmulatedWeight {
    fn op_name(&self) -> &'static str {
        if self.transposed {
            "zdnn_matmul_op"
        } else {
            "zdnn_matmul_transpose_op"
        }
    }

    /// Weight row `r` (output feature) as f32.
    fn read_weight_row(&self, r: usize, out: &mut [f32]) {
        if self.transposed {
            for (c, o) in out.iter_mut().enumerate() {
                *o = dlfloat::to_f32(self.weight.cell(0, 0, c, r));
            }
        } else {
            self.weight.read_row(0, 0, r, out);
        }
    }
}

impl DeviceWeight for EmulatedWeight {
    fn device_name(&self) -> &str {
        EMULATED_DEVICE_NAME
    }

    fn matmul(&self, x: &[f32], n_tokens: usize, out: &mut [f32], threads: &Threads) -> Result<()> {
        let (rows, cols) = (self.rows, self.cols);
        if let Some(status) = self.matmul_failure {
            return Err(StatusError::new(self.op_name(), status).into());
        }
        if n_tokens == 0 || n_tokens > self.max_dim {
            return Err(
                StatusError::new("zdnn_generate_transformed_desc", ZDNN_INVALID_SHAPE).into(),
            );
        }
        if x.len() != n_tokens * cols || out.len() != n_tokens * rows {
            return Err(Error::Backend(format!(
                "NNPA matmul size mismatch: {rows}x{cols} weight, {} inputs, {} outputs, {n_tokens} tokens",
                x.len(),
                out.len()
            )));
        }
        // Transform the activations (per call), then read them back as exact DLFLOAT16 values.
        let input = Stickified::from_f32(StickShape::d2(n_tokens, cols), x)?.to_f32();
        let out_shape = StickShape::d2(n_tokens, rows);
        let mut output = Stickified::zeroed(out_shape)?;
        let cells = SharedMut(output.cells_mut().as_mut_ptr());
        threads.for_each_chunk(rows, 32, |range| {
            let mut w = vec![0.0f32; cols];
            for r in range {
                self.read_weight_row(r, &mut w);
                for (t, a) in input.chunks_exact(cols).enumerate() {
                    let v = dot(a, &w) + self.bias[r];
                    let at = out_shape.byte_offset(0, 0, t, r) / 2;
                    // SAFETY: cell (t, r) belongs to this task's row range only and lies inside
                    // the output buffer (offset computed from its own shape).
                    unsafe { *cells.get().add(at) = dlfloat::from_f32(v) };
                }
            }
        });
        // Transform the DLFLOAT16 output back to f32.
        for (t, o) in out.chunks_exact_mut(rows).enumerate() {
            output.read_row(0, 0, t, o);
        }
        if out.iter().any(|v| v.is_nan()) {
            return Err(StatusError::new(self.op_name(), ZDNN_ELEMENT_RANGE_VIOLATION).into());
        }
        Ok(())
    }
}

/// f32 dot product in eight interleaved partial sums.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (a8, b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (a8.remainder(), b8.remainder());
    for (x, y) in a8.zip(b8) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    for (i, (x, y)) in ra.iter().zip(rb).enumerate() {
        acc[i] += x * y;
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))
}
