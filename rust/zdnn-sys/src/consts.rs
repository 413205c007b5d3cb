//! zDNN enum values (C enums are 4 bytes on s390x) and NNPA geometry.

/// `zdnn_data_layouts`: 1-D tensor.
pub const ZDNN_1D: u32 = 0;
/// 2-D tensor.
pub const ZDNN_2D: u32 = 1;
/// Stack of 1-D tensors.
pub const ZDNN_2DS: u32 = 2;
/// 3-D tensor.
pub const ZDNN_3D: u32 = 3;
/// Stack of 2-D tensors.
pub const ZDNN_3DS: u32 = 4;
/// LSTM/GRU hidden weights (z, r, h gates).
pub const ZDNN_ZRH: u32 = 5;
/// 4-D tensor.
pub const ZDNN_4D: u32 = 6;
/// Stack of 3-D tensors.
pub const ZDNN_4DS: u32 = 7;
/// NHWC image tensor.
pub const ZDNN_NHWC: u32 = 8;
/// NCHW image tensor.
pub const ZDNN_NCHW: u32 = 9;
/// LSTM weights (f, i, c, o gates).
pub const ZDNN_FICO: u32 = 10;
/// Convolution kernel.
pub const ZDNN_HWCK: u32 = 11;
/// Bidirectional ZRH.
pub const ZDNN_BIDIR_ZRH: u32 = 12;
/// Bidirectional FICO.
pub const ZDNN_BIDIR_FICO: u32 = 13;

/// `zdnn_data_types`: the NNPA's 16-bit deep-learning float (transformed tensors).
pub const ZDNN_DLFLOAT16: u32 = 0;
/// IEEE binary32 (transformed).
pub const ZDNN_BINARY_FP32: u32 = 6;
/// 8-bit integer (transformed).
pub const ZDNN_BINARY_INT8: u32 = 8;
/// 32-bit integer (transformed).
pub const ZDNN_BINARY_INT32: u32 = 10;
/// 8-bit integer (pre-transformed).
pub const INT8: u32 = 251;
/// 32-bit integer (pre-transformed).
pub const INT32: u32 = 252;
/// bfloat16 (pre-transformed).
pub const BFLOAT: u32 = 253;
/// IEEE binary16 (pre-transformed).
pub const FP16: u32 = 254;
/// IEEE binary32 (pre-transformed).
pub const FP32: u32 = 255;

/// `zdnn_data_formats`: feature tensors (activations, weights of matmul).
pub const ZDNN_FORMAT_4DFEATURE: u32 = 0;
/// Convolution kernels.
pub const ZDNN_FORMAT_4DKERNEL: u32 = 1;
/// Quantized weights.
pub const ZDNN_FORMAT_4DWEIGHTS: u32 = 2;
/// Generic 4-D data.
pub const ZDNN_FORMAT_4DGENERIC: u32 = 31;

/// NNPA parameter-block format 0 (z16).
pub const NNPA_PARMBLKFORMAT_0: u32 = 0;
/// NNPA parameter-block format 1 (z17; needed by `zdnn_matmul_transpose_op`).
pub const NNPA_PARMBLKFORMAT_1: u32 = 1;

/// `zdnn_matmul_ops`: `a·b + bias`.
pub const MATMUL_OP_ADDITION: u32 = 0;
/// Compare `a·b > bias`.
pub const MATMUL_OP_GREATER: u32 = 1;
/// Compare `a·b >= bias`.
pub const MATMUL_OP_GREATER_EQUAL: u32 = 2;
/// Compare `a·b == bias`.
pub const MATMUL_OP_EQUAL: u32 = 3;
/// Compare `a·b != bias`.
pub const MATMUL_OP_NOT_EQUAL: u32 = 4;
/// Compare `a·b <= bias`.
pub const MATMUL_OP_LESSER_EQUAL: u32 = 5;
/// Compare `a·b < bias`.
pub const MATMUL_OP_LESSER: u32 = 6;

/// Bytes in a stick (64 DLFLOAT16 cells).
pub const STICK_BYTES: usize = 128;
/// Cells in a stick.
pub const CELLS_PER_STICK: usize = 64;
/// Bytes in a page (32 sticks); ztensor buffers are page aligned.
pub const PAGE_BYTES: usize = 4096;
/// Sticks in a page.
pub const STICKS_PER_PAGE: usize = 32;
