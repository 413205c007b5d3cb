//! `#[repr(C)]` structs and function-pointer types of zDNN's C API.

use std::ffi::{c_char, c_int, c_void};

/// `zdnn_tensor_desc`: a tensor's layout, format, element type and dimensions (28 bytes).
/// `dim4` is the outermost dimension, `dim1` the innermost.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TensorDesc {
    /// Data layout (`ZDNN_2D`, `ZDNN_NHWC`, ...).
    pub layout: u32,
    /// Data format (`ZDNN_FORMAT_4DFEATURE`, ...); set for transformed descriptors.
    pub format: u32,
    /// Element type (`FP32`, `ZDNN_DLFLOAT16`, ...).
    pub type_: u32,
    /// Outermost dimension.
    pub dim4: u32,
    /// Third dimension.
    pub dim3: u32,
    /// Second dimension.
    pub dim2: u32,
    /// Innermost dimension.
    pub dim1: u32,
}

/// `zdnn_ztensor`: a tensor in the NNPA's stickified format (64 bytes on 64-bit targets).
#[repr(C)]
#[derive(Debug)]
pub struct ZTensor {
    /// Descriptor of the original (pre-transformed) data.
    pub pre_transformed_desc: *mut TensorDesc,
    /// Descriptor of the stickified data.
    pub transformed_desc: *mut TensorDesc,
    /// Size of `buffer` in bytes.
    pub buffer_size: u64,
    /// Stickified data (4 KiB aligned).
    pub buffer: *mut c_void,
    /// Whether `buffer` holds transformed data.
    pub is_transformed: bool,
    /// Reserved.
    pub reserved: [c_char; 3],
    /// Reciprocal scale (quantized tensors).
    pub rec_scale: f32,
    /// Offset (quantized tensors).
    pub offset: f32,
    /// Reserved.
    pub reserved2: [c_char; 20],
}

impl Default for ZTensor {
    fn default() -> Self {
        ZTensor {
            pre_transformed_desc: std::ptr::null_mut(),
            transformed_desc: std::ptr::null_mut(),
            buffer_size: 0,
            buffer: std::ptr::null_mut(),
            is_transformed: false,
            reserved: [0; 3],
            rec_scale: 0.0,
            offset: 0.0,
            reserved2: [0; 20],
        }
    }
}

/// `bool zdnn_is_nnpa_installed(void)`.
pub type IsNnpaInstalledFn = unsafe extern "C" fn() -> bool;
/// `uint32_t zdnn_get_nnpa_max_dim_idx_size(void)`.
pub type GetNnpaMaxDimIdxSizeFn = unsafe extern "C" fn() -> u32;
/// `uint64_t zdnn_get_nnpa_max_tensor_size(void)`.
pub type GetNnpaMaxTensorSizeFn = unsafe extern "C" fn() -> u64;
/// `bool zdnn_is_nnpa_parmblk_fmt_installed(int count, ...)` (formats as `int`).
pub type IsNnpaParmblkFmtInstalledFn = unsafe extern "C" fn(c_int, ...) -> bool;
/// `void zdnn_init_pre_transformed_desc(layout, type, desc*, dims...)` (outermost dim first).
pub type InitPreTransformedDescFn = unsafe extern "C" fn(u32, u32, *mut TensorDesc, ...);
/// `zdnn_status zdnn_generate_transformed_desc(const desc* pre, desc* out)`.
pub type GenerateTransformedDescFn =
    unsafe extern "C" fn(*const TensorDesc, *mut TensorDesc) -> u32;
/// `zdnn_status zdnn_init_ztensor_with_malloc(desc* pre, desc* transformed, ztensor* out)`.
pub type InitZtensorWithMallocFn =
    unsafe extern "C" fn(*mut TensorDesc, *mut TensorDesc, *mut ZTensor) -> u32;
/// `uint64_t zdnn_getsize_ztensor(const desc* transformed)`.
pub type GetsizeZtensorFn = unsafe extern "C" fn(*const TensorDesc) -> u64;
/// `zdnn_status zdnn_transform_ztensor(ztensor*, data...)` (one buffer for our layouts).
pub type TransformZtensorFn = unsafe extern "C" fn(*mut ZTensor, ...) -> u32;
/// `zdnn_status zdnn_transform_origtensor(const ztensor*, void* out)`.
pub type TransformOrigtensorFn = unsafe extern "C" fn(*const ZTensor, *mut c_void) -> u32;
/// `void zdnn_reset_ztensor(ztensor*)` (clears `is_transformed`).
pub type ResetZtensorFn = unsafe extern "C" fn(*mut ZTensor);
/// `zdnn_status zdnn_free_ztensor_buffer(const ztensor*)`.
pub type FreeZtensorBufferFn = unsafe extern "C" fn(*const ZTensor) -> u32;
/// `zdnn_status zdnn_matmul_op(a, b, bias, op, out)`.
pub type MatmulOpFn =
    unsafe extern "C" fn(*const ZTensor, *const ZTensor, *const ZTensor, u32, *mut ZTensor) -> u32;
/// `zdnn_status zdnn_matmul_transpose_op(a, b, bias, transpose_a, transpose_b, op, out)`.
pub type MatmulTransposeOpFn = unsafe extern "C" fn(
    *const ZTensor,
    *const ZTensor,
    *const ZTensor,
    bool,
    bool,
    u32,
    *mut ZTensor,
) -> u32;
/// `const char* zdnn_get_status_message(zdnn_status)`.
pub type GetStatusMessageFn = unsafe extern "C" fn(u32) -> *const c_char;
/// `uint32_t zdnn_get_library_version(void)`.
pub type GetLibraryVersionFn = unsafe extern "C" fn() -> u32;
