//! Run-time bindings to IBM zDNN, the library that drives the IBM Z Neural Network Processing
//! Assist (NNPA) on z16/z17 and LinuxONE 4/5.
//!
//! Nothing here links against zDNN: [`Zdnn::load`] opens `libzdnn.so.0` with `dlopen` at run time
//! (only on s390x; elsewhere it reports [`LoadError::NotAvailable`]) and resolves the functions the
//! engine needs. The `#[repr(C)]` types mirror zDNN 1.x's 64-bit ABI: a 28-byte tensor descriptor
//! ([`TensorDesc`]) and a 64-byte [`ZTensor`]. Enum values are plain `u32` constants as in C.

#![warn(missing_docs)]

mod consts;
mod loader;
mod status;
mod types;

pub use consts::*;
pub use loader::{LoadError, Zdnn};
pub use status::*;
pub use types::*;
