//! Tensor element types as numbered by the GGUF format (`ggml_type`), with their block geometry.

use std::fmt;

use super::blocks::*;

/// A tensor element type (the GGUF `ggml_type` code). Quantized types store values in fixed-size
/// blocks; [`GgmlType::block_size`] elements occupy [`GgmlType::type_size`] bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)]
pub enum GgmlType {
    /// 32-bit IEEE float.
    F32,
    /// 16-bit IEEE float.
    F16,
    /// 4-bit blocks of 32 with an f16 scale.
    Q4_0,
    /// 4-bit blocks of 32 with an f16 scale and minimum.
    Q4_1,
    /// 5-bit blocks of 32 with an f16 scale.
    Q5_0,
    /// 5-bit blocks of 32 with an f16 scale and minimum.
    Q5_1,
    /// 8-bit blocks of 32 with an f16 scale.
    Q8_0,
    /// 8-bit blocks of 32 with an f16 scale and the scaled sum (activation format).
    Q8_1,
    /// 2-bit super-blocks of 256.
    Q2_K,
    /// 3-bit super-blocks of 256.
    Q3_K,
    /// 4-bit super-blocks of 256.
    Q4_K,
    /// 5-bit super-blocks of 256.
    Q5_K,
    /// 6-bit super-blocks of 256.
    Q6_K,
    /// 8-bit super-blocks of 256 with an f32 scale and block sums (activation format).
    Q8_K,
    /// bfloat16.
    BF16,
    /// 2-bit codebook quants (256-entry grid), super-blocks of 256.
    IQ2_XXS,
    /// 2-bit codebook quants (512-entry grid) with scales per 16.
    IQ2_XS,
    /// 3-bit codebook quants (256-entry grid), super-blocks of 256.
    IQ3_XXS,
    /// 1.56-bit codebook quants (2048-entry ternary grid).
    IQ1_S,
    /// 4-bit non-linear levels in blocks of 32 with an f16 scale.
    IQ4_NL,
    /// 3-bit codebook quants (512-entry grid) with separate sign bits.
    IQ3_S,
    /// 2-bit codebook quants (1024-entry grid) with separate sign bytes.
    IQ2_S,
    /// 4-bit non-linear levels in super-blocks of 256 with 6-bit scales.
    IQ4_XS,
    /// 1.75-bit codebook quants (2048-entry ternary grid), scales per 16.
    IQ1_M,
    /// Ternary values, base-3 packed (1.69 bits each), super-blocks of 256.
    TQ1_0,
    /// Ternary values, 2 bits each, super-blocks of 256.
    TQ2_0,
    /// 4-bit E2M1 floats in blocks of 32 with a shared E8M0 exponent.
    MXFP4,
}

impl GgmlType {
    /// Every type this engine knows.
    pub const ALL: [GgmlType; 27] = [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
        GgmlType::Q8_1,
        GgmlType::Q2_K,
        GgmlType::Q3_K,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
        GgmlType::Q8_K,
        GgmlType::BF16,
        GgmlType::IQ2_XXS,
        GgmlType::IQ2_XS,
        GgmlType::IQ3_XXS,
        GgmlType::IQ1_S,
        GgmlType::IQ4_NL,
        GgmlType::IQ3_S,
        GgmlType::IQ2_S,
        GgmlType::IQ4_XS,
        GgmlType::IQ1_M,
        GgmlType::TQ1_0,
        GgmlType::TQ2_0,
        GgmlType::MXFP4,
    ];

    /// The type for a GGUF type code, or `None` when the code is unknown or unsupported.
    pub fn from_code(code: u32) -> Option<Self> {
        Some(match code {
            0 => Self::F32,
            1 => Self::F16,
            2 => Self::Q4_0,
            3 => Self::Q4_1,
            6 => Self::Q5_0,
            7 => Self::Q5_1,
            8 => Self::Q8_0,
            9 => Self::Q8_1,
            10 => Self::Q2_K,
            11 => Self::Q3_K,
            12 => Self::Q4_K,
            13 => Self::Q5_K,
            14 => Self::Q6_K,
            15 => Self::Q8_K,
            30 => Self::BF16,
            16 => Self::IQ2_XXS,
            17 => Self::IQ2_XS,
            18 => Self::IQ3_XXS,
            19 => Self::IQ1_S,
            20 => Self::IQ4_NL,
            21 => Self::IQ3_S,
            22 => Self::IQ2_S,
            23 => Self::IQ4_XS,
            29 => Self::IQ1_M,
            34 => Self::TQ1_0,
            35 => Self::TQ2_0,
            39 => Self::MXFP4,
            _ => return None,
        })
    }

    /// The GGUF type code.
    pub fn code(self) -> u32 {
        match self {
            Self::F32 => 0,
            Self::F16 => 1,
            Self::Q4_0 => 2,
            Self::Q4_1 => 3,
            Self::Q5_0 => 6,
            Self::Q5_1 => 7,
            Self::Q8_0 => 8,
            Self::Q8_1 => 9,
            Self::Q2_K => 10,
            Self::Q3_K => 11,
            Self::Q4_K => 12,
            Self::Q5_K => 13,
            Self::Q6_K => 14,
            Self::Q8_K => 15,
            Self::BF16 => 30,
            Self::IQ2_XXS => 16,
            Self::IQ2_XS => 17,
            Self::IQ3_XXS => 18,
            Self::IQ1_S => 19,
            Self::IQ4_NL => 20,
            Self::IQ3_S => 21,
            Self::IQ2_S => 22,
            Self::IQ4_XS => 23,
            Self::IQ1_M => 29,
            Self::TQ1_0 => 34,
            Self::TQ2_0 => 35,
            Self::MXFP4 => 39,
        }
    }

    /// Elements per block (1 for plain float types).
    pub fn block_size(self) -> usize {
        match self {
            Self::F32 | Self::F16 | Self::BF16 => 1,
            Self::Q4_0
            | Self::Q4_1
            | Self::Q5_0
            | Self::Q5_1
            | Self::Q8_0
            | Self::Q8_1
            | Self::IQ4_NL
            | Self::MXFP4 => QK,
            _ => QK_K,
        }
    }

    /// Bytes per block (the layouts are in the `blocks` table).
    pub fn type_size(self) -> usize {
        match self {
            Self::F32 => 4,
            Self::F16 | Self::BF16 => 2,
            Self::Q4_0 => BlockQ4_0::SIZE,
            Self::Q4_1 => BlockQ4_1::SIZE,
            Self::Q5_0 => BlockQ5_0::SIZE,
            Self::Q5_1 => BlockQ5_1::SIZE,
            Self::Q8_0 => BlockQ8_0::SIZE,
            Self::Q8_1 => BlockQ8_1::SIZE,
            Self::Q2_K => BlockQ2_K::SIZE,
            Self::Q3_K => BlockQ3_K::SIZE,
            Self::Q4_K => BlockQ4_K::SIZE,
            Self::Q5_K => BlockQ5_K::SIZE,
            Self::Q6_K => BlockQ6_K::SIZE,
            Self::Q8_K => BlockQ8_K::SIZE,
            Self::IQ2_XXS => BlockIQ2_XXS::SIZE,
            Self::IQ2_XS => BlockIQ2_XS::SIZE,
            Self::IQ3_XXS => BlockIQ3_XXS::SIZE,
            Self::IQ1_S => BlockIQ1_S::SIZE,
            Self::IQ4_NL => BlockIQ4_NL::SIZE,
            Self::IQ3_S => BlockIQ3_S::SIZE,
            Self::IQ2_S => BlockIQ2_S::SIZE,
            Self::IQ4_XS => BlockIQ4_XS::SIZE,
            Self::IQ1_M => BlockIQ1_M::SIZE,
            Self::TQ1_0 => BlockTQ1_0::SIZE,
            Self::TQ2_0 => BlockTQ2_0::SIZE,
            Self::MXFP4 => BlockMXFP4::SIZE,
        }
    }

    /// Bytes needed for `n_elements` elements, or `None` when `n_elements` is not a whole number
    /// of blocks or the size overflows.
    pub fn row_bytes(self, n_elements: u64) -> Option<u64> {
        let bs = self.block_size() as u64;
        if !n_elements.is_multiple_of(bs) {
            return None;
        }
        (n_elements / bs).checked_mul(self.type_size() as u64)
    }

    /// The canonical name (as llama.cpp and the `gguf` Python package print it).
    pub fn name(self) -> &'static str {
        match self {
            Self::F32 => "F32",
            Self::F16 => "F16",
            Self::Q4_0 => "Q4_0",
            Self::Q4_1 => "Q4_1",
            Self::Q5_0 => "Q5_0",
            Self::Q5_1 => "Q5_1",
            Self::Q8_0 => "Q8_0",
            Self::Q8_1 => "Q8_1",
            Self::Q2_K => "Q2_K",
            Self::Q3_K => "Q3_K",
            Self::Q4_K => "Q4_K",
            Self::Q5_K => "Q5_K",
            Self::Q6_K => "Q6_K",
            Self::Q8_K => "Q8_K",
            Self::BF16 => "BF16",
            Self::IQ2_XXS => "IQ2_XXS",
            Self::IQ2_XS => "IQ2_XS",
            Self::IQ3_XXS => "IQ3_XXS",
            Self::IQ1_S => "IQ1_S",
            Self::IQ4_NL => "IQ4_NL",
            Self::IQ3_S => "IQ3_S",
            Self::IQ2_S => "IQ2_S",
            Self::IQ4_XS => "IQ4_XS",
            Self::IQ1_M => "IQ1_M",
            Self::TQ1_0 => "TQ1_0",
            Self::TQ2_0 => "TQ2_0",
            Self::MXFP4 => "MXFP4",
        }
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The activation format the dot product of a weight of type `w` consumes (ggml's
/// `vec_dot_type`): Q4_0/Q5_0/Q8_0/IQ4_NL/MXFP4 → Q8_0; Q4_1/Q5_1 → Q8_1; the 256-element
/// formats → Q8_K; the float types and the activation formats themselves map to themselves.
pub fn vec_dot_type(w: GgmlType) -> GgmlType {
    match w {
        GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 | GgmlType::IQ4_NL | GgmlType::MXFP4 => {
            GgmlType::Q8_0
        }
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q8_1 => GgmlType::Q8_1,
        GgmlType::Q2_K
        | GgmlType::Q3_K
        | GgmlType::Q4_K
        | GgmlType::Q5_K
        | GgmlType::Q6_K
        | GgmlType::Q8_K
        | GgmlType::IQ2_XXS
        | GgmlType::IQ2_XS
        | GgmlType::IQ2_S
        | GgmlType::IQ3_XXS
        | GgmlType::IQ3_S
        | GgmlType::IQ1_S
        | GgmlType::IQ1_M
        | GgmlType::IQ4_XS
        | GgmlType::TQ1_0
        | GgmlType::TQ2_0 => GgmlType::Q8_K,
        GgmlType::F32 => GgmlType::F32,
        GgmlType::F16 => GgmlType::F16,
        GgmlType::BF16 => GgmlType::BF16,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_unknown_codes_are_rejected() {
        for t in GgmlType::ALL {
            assert_eq!(GgmlType::from_code(t.code()), Some(t));
        }
        // Removed types (4, 5, 31..=33, 36..=38), integer and f64 tensors (24..=28), NVFP4 and
        // the 1- and 2-bit Q formats (40..=42) and codes beyond them.
        for code in [4, 5, 24, 28, 31, 33, 36, 38, 40, 41, 42, 43, 1000, u32::MAX] {
            assert_eq!(GgmlType::from_code(code), None);
        }
    }

    #[test]
    fn row_bytes_rejects_partial_blocks_and_overflow() {
        assert_eq!(GgmlType::Q4_K.row_bytes(512), Some(288));
        assert_eq!(GgmlType::Q4_K.row_bytes(100), None);
        assert_eq!(GgmlType::F32.row_bytes(u64::MAX), None);
    }
}
