//! Tensor element types, quantized block formats, dequantization and dot-product kernels.

mod types;

pub use types::GgmlType;
