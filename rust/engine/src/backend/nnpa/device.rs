//! The real NNPA device over zDNN (s390x with `libzdnn.so.0` and an NNPA).
//!
//! Compiled for s390x only; a [`NnpaDevice`] can only be built from a loaded library.

use std::ffi::c_void;
use std::sync::{Arc, Mutex};

use zdnn_sys::{
    Status, TensorDesc, ZTensor, Zdnn, FP32, MATMUL_OP_ADDITION, NNPA_PARMBLKFORMAT_0,
    NNPA_PARMBLKFORMAT_1, ZDNN_1D, ZDNN_2D, ZDNN_OK,
};

use super::{transpose, weight_values, Limits, NnpaOptions, StatusError, DESCRIPTION, DEVICE_NAME};
use crate::backend::{
    Device, DeviceInfo, DeviceKind, DeviceWeight, MatmulShape, TensorBytes, Threads,
};
use crate::{Error, Result};

/// The NNPA of this machine, driven through zDNN.
pub struct NnpaDevice {
    zdnn: Arc<Zdnn>,
    limits: Limits,
    format_0: bool,
    format_1: bool,
    options: NnpaOptions,
}

impl NnpaDevice {
    /// Load zDNN and check for an NNPA; an error says why there is no device.
    pub fn probe(options: NnpaOptions) -> Result<Self> {
        let zdnn = Zdnn::load().map_err(|e| Error::Backend(format!("zDNN: {e}")))?;
        if !zdnn.nnpa_installed() {
            return Err(Error::Backend(
                "zDNN loaded but this machine has no NNPA".into(),
            ));
        }
        let limits = Limits {
            max_dim_idx_size: zdnn.max_dim_idx_size(),
            max_tensor_size: zdnn.max_tensor_size(),
        };
        Ok(NnpaDevice {
            format_0: zdnn.parmblk_fmt_installed(NNPA_PARMBLKFORMAT_0),
            format_1: zdnn.parmblk_fmt_installed(NNPA_PARMBLKFORMAT_1),
            zdnn: Arc::new(zdnn),
            limits,
            options,
        })
    }
}

impl Device for NnpaDevice {
    fn info(&self) -> DeviceInfo {
        let mut features = vec!["NNPA".to_string()];
        if self.format_0 {
            features.push("NNPA_PARMBLKFORMAT_0".to_string());
        }
        if self.format_1 {
            features.push("NNPA_PARMBLKFORMAT_1".to_string());
        }
        features.push(format!("max_dim_idx_size={}", self.limits.max_dim_idx_size));
        let v = self.zdnn.library_version();
        features.push(format!("zdnn={}.{}.{}", v >> 16, (v >> 8) & 0xFF, v & 0xFF));
        DeviceInfo {
            name: DEVICE_NAME.to_string(),
            description: DESCRIPTION.to_string(),
            kind: DeviceKind::Accelerator,
            memory_total: None,
            memory_free: None,
            features,
        }
    }

    fn supports_matmul(&self, shape: MatmulShape) -> bool {
        self.limits.supports(shape, self.options)
    }

    fn place_weight(
        &self,
        shape: MatmulShape,
        data: &TensorBytes,
    ) -> Result<Box<dyn DeviceWeight>> {
        let (rows, cols) = (shape.rows, shape.cols);
        let dim = |d: usize| {
            u32::try_from(d).map_err(|_| Error::Backend(format!("dimension {d} too large")))
        };
        let values = weight_values(shape, data)?;
        // Format 1: B is the weight as stored (rows × cols), transposed by the op.
        // Format 0: `matmul_op` needs B as cols × rows.
        let weight = if self.format_1 {
            let mut z = Ztensor::new(&self.zdnn, ZDNN_2D, &[dim(rows)?, dim(cols)?])?;
            z.transform(&values)?;
            z
        } else {
            let mut z = Ztensor::new(&self.zdnn, ZDNN_2D, &[dim(cols)?, dim(rows)?])?;
            z.transform(&transpose(&values, rows, cols))?;
            z
        };
        drop(values);
        let mut bias = Ztensor::new(&self.zdnn, ZDNN_1D, &[dim(rows)?])?;
        bias.transform(&vec![0.0f32; rows])?;
        Ok(Box::new(NnpaWeight {
            rows,
            cols,
            transpose_op: self.format_1,
            weight,
            bias,
            scratch: Mutex::new(None),
        }))
    }
}

/// A zDNN ztensor with FP32 pre-transformed data, its descriptors (boxed: the ztensor points at
/// them) and a buffer allocated by zDNN, freed on drop.
struct Ztensor {
    zdnn: Arc<Zdnn>,
    _pre: Box<TensorDesc>,
    _transformed: Box<TensorDesc>,
    tensor: Box<ZTensor>,
    len: usize,
}

// SAFETY: the raw pointers inside point to the boxed descriptors and zDNN's buffer, both owned by
// this value; shared use is read-only (weights), mutation goes through `&mut` (scratch tensors
// behind a mutex).
unsafe impl Send for Ztensor {}
// SAFETY: see above.
unsafe impl Sync for Ztensor {}

fn check(zdnn: &Zdnn, op: &'static str, status: Status) -> Result<()> {
    if status == ZDNN_OK {
        return Ok(());
    }
    Err(StatusError {
        op,
        status,
        message: zdnn.status_message(status),
    }
    .into())
}

impl Ztensor {
    /// An FP32 tensor of layout `layout` (1D or 2D) and `dims` (outermost first).
    fn new(zdnn: &Arc<Zdnn>, layout: u32, dims: &[u32]) -> Result<Self> {
        let mut pre = Box::new(TensorDesc::default());
        let mut transformed = Box::new(TensorDesc::default());
        // SAFETY: `pre` is a valid descriptor to fill; the variadic dims are `uint32_t`s, as many
        // as the layout has dimensions.
        unsafe {
            match *dims {
                [a] => (zdnn.init_pre_transformed_desc)(layout, FP32, &mut *pre, a),
                [a, b] => (zdnn.init_pre_transformed_desc)(layout, FP32, &mut *pre, a, b),
                _ => return Err(Error::Backend(format!("unsupported ztensor dims {dims:?}"))),
            }
        }
        // SAFETY: both descriptors are valid and distinct.
        let status = unsafe { (zdnn.generate_transformed_desc)(&*pre, &mut *transformed) };
        check(zdnn, "zdnn_generate_transformed_desc", status)?;
        let mut tensor = Box::new(ZTensor::default());
        // SAFETY: the descriptors outlive the ztensor (owned by the same value, boxed so they
        // do not move); zDNN allocates the buffer.
        let status =
            unsafe { (zdnn.init_ztensor_with_malloc)(&mut *pre, &mut *transformed, &mut *tensor) };
        check(zdnn, "zdnn_init_ztensor_with_malloc", status)?;
        Ok(Ztensor {
            zdnn: zdnn.clone(),
            _pre: pre,
            _transformed: transformed,
            tensor,
            len: dims.iter().map(|&d| d as usize).product(),
        })
    }

    /// Stickify `values` into the buffer, resetting the ztensor first (its data is rewritten;
    /// llama.cpp issue 15414).
    fn transform(&mut self, values: &[f32]) -> Result<()> {
        if values.len() != self.len {
            return Err(Error::Backend(format!(
                "ztensor of {} values given {}",
                self.len,
                values.len()
            )));
        }
        self.reset();
        // SAFETY: the ztensor is initialised; `values` holds `len` native f32s as its FP32
        // pre-transformed descriptor describes.
        let status = unsafe {
            (self.zdnn.transform_ztensor)(&mut *self.tensor, values.as_ptr() as *const c_void)
        };
        check(&self.zdnn, "zdnn_transform_ztensor", status)
    }

    /// Mark the ztensor as not transformed so that it can be written again.
    fn reset(&mut self) {
        // SAFETY: the ztensor is initialised.
        unsafe { (self.zdnn.reset_ztensor)(&mut *self.tensor) }
    }

    /// Transform the stickified data back to f32 into `out`.
    fn read(&self, out: &mut [f32]) -> Result<()> {
        if out.len() != self.len {
            return Err(Error::Backend(format!(
                "ztensor of {} values read into {}",
                self.len,
                out.len()
            )));
        }
        // SAFETY: `out` has room for `len` f32s, the ztensor's pre-transformed shape.
        let status = unsafe {
            (self.zdnn.transform_origtensor)(&*self.tensor, out.as_mut_ptr() as *mut c_void)
        };
        check(&self.zdnn, "zdnn_transform_origtensor", status)
    }
}

impl Drop for Ztensor {
    fn drop(&mut self) {
        if !self.tensor.buffer.is_null() {
            // SAFETY: the buffer was allocated by `zdnn_init_ztensor_with_malloc`.
            unsafe { (self.zdnn.free_ztensor_buffer)(&*self.tensor) };
        }
    }
}

/// Input and output ztensors reused while the token count stays the same.
struct Scratch {
    n_tokens: usize,
    input: Ztensor,
    output: Ztensor,
}

/// A weight stickified on the NNPA with its zero bias.
struct NnpaWeight {
    rows: usize,
    cols: usize,
    transpose_op: bool,
    weight: Ztensor,
    bias: Ztensor,
    scratch: Mutex<Option<Scratch>>,
}

impl DeviceWeight for NnpaWeight {
    fn device_name(&self) -> &str {
        DEVICE_NAME
    }

    fn matmul(
        &self,
        x: &[f32],
        n_tokens: usize,
        out: &mut [f32],
        _threads: &Threads,
    ) -> Result<()> {
        let zdnn = &self.weight.zdnn;
        let tokens =
            u32::try_from(n_tokens).map_err(|_| Error::Backend(format!("{n_tokens} tokens")))?;
        let mut guard = self
            .scratch
            .lock()
            .map_err(|_| Error::Backend("NNPA scratch lock poisoned".into()))?;
        if guard.as_ref().is_none_or(|s| s.n_tokens != n_tokens) {
            *guard = None;
            *guard = Some(Scratch {
                n_tokens,
                input: Ztensor::new(zdnn, ZDNN_2D, &[tokens, self.cols as u32])?,
                output: Ztensor::new(zdnn, ZDNN_2D, &[tokens, self.rows as u32])?,
            });
        }
        let Some(scratch) = guard.as_mut() else {
            return Err(Error::Backend("NNPA scratch missing".into()));
        };
        scratch.input.transform(x)?;
        // The output is rewritten by the op: reset it (llama.cpp issue 15414).
        scratch.output.reset();
        let (a, b, bias) = (
            &*scratch.input.tensor,
            &*self.weight.tensor,
            &*self.bias.tensor,
        );
        let out_z = &mut *scratch.output.tensor;
        // SAFETY: all four ztensors are initialised with shapes the op accepts: A (n_tokens ×
        // cols), B (rows × cols, transposed by the op) or (cols × rows), bias (rows), out
        // (n_tokens × rows).
        let (op, status) = unsafe {
            if self.transpose_op {
                let s =
                    (zdnn.matmul_transpose_op)(a, b, bias, false, true, MATMUL_OP_ADDITION, out_z);
                ("zdnn_matmul_transpose_op", s)
            } else {
                (
                    "zdnn_matmul_op",
                    (zdnn.matmul_op)(a, b, bias, MATMUL_OP_ADDITION, out_z),
                )
            }
        };
        check(zdnn, op, status)?;
        scratch.output.read(out)
    }
}
