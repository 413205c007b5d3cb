//! The `#[repr(C)]` types match zDNN's 64-bit ABI (sizes, alignment and field offsets from zdnn.h).

#![cfg(target_pointer_width = "64")]

use std::mem::{align_of, offset_of, size_of};

use zdnn_sys::{TensorDesc, ZTensor};

#[test]
fn tensor_desc_is_28_bytes() {
    assert_eq!(size_of::<TensorDesc>(), 28);
    assert_eq!(align_of::<TensorDesc>(), 4);
    assert_eq!(offset_of!(TensorDesc, layout), 0);
    assert_eq!(offset_of!(TensorDesc, format), 4);
    assert_eq!(offset_of!(TensorDesc, type_), 8);
    assert_eq!(offset_of!(TensorDesc, dim4), 12);
    assert_eq!(offset_of!(TensorDesc, dim3), 16);
    assert_eq!(offset_of!(TensorDesc, dim2), 20);
    assert_eq!(offset_of!(TensorDesc, dim1), 24);
}

#[test]
fn ztensor_is_64_bytes() {
    assert_eq!(size_of::<ZTensor>(), 64);
    assert_eq!(align_of::<ZTensor>(), 8);
    assert_eq!(offset_of!(ZTensor, pre_transformed_desc), 0);
    assert_eq!(offset_of!(ZTensor, transformed_desc), 8);
    assert_eq!(offset_of!(ZTensor, buffer_size), 16);
    assert_eq!(offset_of!(ZTensor, buffer), 24);
    assert_eq!(offset_of!(ZTensor, is_transformed), 32);
    assert_eq!(offset_of!(ZTensor, reserved), 33);
    assert_eq!(offset_of!(ZTensor, rec_scale), 36);
    assert_eq!(offset_of!(ZTensor, offset), 40);
    assert_eq!(offset_of!(ZTensor, reserved2), 44);
}

#[test]
fn default_ztensor_is_empty() {
    let z = ZTensor::default();
    assert!(z.buffer.is_null() && z.pre_transformed_desc.is_null() && !z.is_transformed);
}
