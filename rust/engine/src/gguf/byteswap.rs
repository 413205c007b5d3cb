//! Conversion of big-endian tensor data to the little-endian layout the kernels expect.
//!
//! Files written on big-endian hosts store every multi-byte field of the tensor data in
//! big-endian order. The supported types and the swapped fields follow gguf-py's
//! `gguf_convert_endian.py`: plain floats swap every element; quantized blocks swap only their
//! f16 scale fields (the quantized values are bytes).

use super::error::GgufError;
use super::TensorInfo;
use crate::quant::GgmlType;

/// Where the 2-byte fields of one block are, for each convertible type.
enum Layout {
    /// Every element is `n` bytes wide (plain float types).
    Elements(usize),
    /// Blocks of `size` bytes; each listed offset starts an f16 field.
    Blocks {
        size: usize,
        f16_at: &'static [usize],
    },
}

fn layout(ty: GgmlType) -> Option<Layout> {
    Some(match ty {
        GgmlType::F32 => Layout::Elements(4),
        GgmlType::F16 | GgmlType::BF16 => Layout::Elements(2),
        // d (f16) then the quants.
        GgmlType::Q4_0 | GgmlType::Q8_0 => Layout::Blocks {
            size: ty.type_size(),
            f16_at: &[0],
        },
        // d and dmin (f16) then scales and quants.
        GgmlType::Q4_K => Layout::Blocks {
            size: ty.type_size(),
            f16_at: &[0, 2],
        },
        // ql, qh, scales (bytes) then d (f16) at the end.
        GgmlType::Q6_K => Layout::Blocks {
            size: ty.type_size(),
            f16_at: &[208],
        },
        _ => return None,
    })
}

/// Fails with a typed error if any tensor's type cannot be converted from big-endian.
pub(crate) fn check_convertible(tensors: &[TensorInfo]) -> Result<(), GgufError> {
    match tensors.iter().find(|t| layout(t.ty).is_none()) {
        Some(t) => Err(GgufError::UnsupportedBigEndianType {
            tensor: t.name.clone(),
            ty: t.ty,
        }),
        None => Ok(()),
    }
}

/// Rewrites `data` (one tensor's bytes, in big-endian layout) into little-endian layout.
/// Types without a known layout are left unchanged (callers check with [`check_convertible`]).
pub(crate) fn to_little_endian(ty: GgmlType, data: &mut [u8]) {
    match layout(ty) {
        Some(Layout::Elements(n)) => data.chunks_exact_mut(n).for_each(<[u8]>::reverse),
        Some(Layout::Blocks { size, f16_at }) => {
            for block in data.chunks_exact_mut(size) {
                for &at in f16_at {
                    block.swap(at, at + 1);
                }
            }
        }
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swaps_only_scale_fields_of_blocks() {
        let mut q6 = vec![0u8; 210 * 2];
        q6[208] = 1;
        q6[210 + 209] = 2;
        q6[5] = 9;
        to_little_endian(GgmlType::Q6_K, &mut q6);
        assert_eq!((q6[208], q6[209], q6[5]), (0, 1, 9));
        assert_eq!((q6[210 + 208], q6[210 + 209]), (2, 0));

        let mut f = 1.5f32.to_be_bytes().to_vec();
        to_little_endian(GgmlType::F32, &mut f);
        assert_eq!(f, 1.5f32.to_le_bytes());
    }
}
