//! The byte layout of every block format, in one table used by the portable, x86 and NEON
//! kernels and by [`super::GgmlType::type_size`].
//!
//! Each format is a `#[repr(C)]` struct of byte arrays (alignment 1, so no padding: the struct
//! is the GGUF block byte for byte). Kernels read blocks as bytes and use the associated
//! constants: `SIZE` (bytes per block, checked at compile time against the GGUF sizes) and one
//! byte offset per field, derived from the struct by `offset_of!`. All multi-byte values are
//! little-endian; `d`, `m`, `s`, `dmin` are IEEE halves except Q8_K's `d` (f32) and MXFP4's
//! `e` (an E8M0 power of two).

/// Elements per block of the 32-element formats (Q4_0 .. Q8_1).
pub(crate) const QK: usize = 32;

/// Elements per super-block of the K formats (Q2_K .. Q8_K).
pub(crate) const QK_K: usize = 256;

/// Declares block structs with their size check, `SIZE` and field-offset constants.
macro_rules! block_formats {
    ($(
        $(#[$doc:meta])*
        $name:ident = $size:literal { $($(#[$fdoc:meta])* $field:ident @ $off:ident : $len:expr),* $(,)? }
    )*) => {$(
        $(#[$doc])*
        #[allow(non_camel_case_types)]
        #[repr(C)]
        pub(crate) struct $name {
            $($(#[$fdoc])* $field: [u8; $len],)*
        }

        const _: () = assert!(std::mem::size_of::<$name>() == $size);

        impl $name {
            /// Bytes per block.
            pub(crate) const SIZE: usize = std::mem::size_of::<$name>();
            $(
                #[doc = concat!("Byte offset of `", stringify!($field), "`.")]
                pub(crate) const $off: usize = std::mem::offset_of!($name, $field);
            )*
        }
    )*};
}

block_formats! {
    /// Q4_0: value `d · (q − 8)`; element `j < 16` is the low nibble of `qs[j]`, element `j + 16`
    /// its high nibble.
    BlockQ4_0 = 18 {
        /// Scale.
        d @ D: 2,
        /// Nibbles.
        qs @ QS: QK / 2,
    }
    /// Q4_1: value `d · q + m`; nibbles as Q4_0.
    BlockQ4_1 = 20 {
        /// Scale.
        d @ D: 2,
        /// Minimum.
        m @ M: 2,
        /// Nibbles.
        qs @ QS: QK / 2,
    }
    /// Q5_0: value `d · (q − 16)`; bit `i` of the u32 `qh` is the fifth bit of element `i`.
    BlockQ5_0 = 22 {
        /// Scale.
        d @ D: 2,
        /// Fifth bits.
        qh @ QH: 4,
        /// Nibbles.
        qs @ QS: QK / 2,
    }
    /// Q5_1: value `d · q + m`; bits as Q5_0.
    BlockQ5_1 = 24 {
        /// Scale.
        d @ D: 2,
        /// Minimum.
        m @ M: 2,
        /// Fifth bits.
        qh @ QH: 4,
        /// Nibbles.
        qs @ QS: QK / 2,
    }
    /// Q8_0: value `d · q`, 32 × i8.
    BlockQ8_0 = 34 {
        /// Scale.
        d @ D: 2,
        /// Quants.
        qs @ QS: QK,
    }
    /// Q8_1 (activations): as Q8_0 plus `s = d · Σq`.
    BlockQ8_1 = 36 {
        /// Scale.
        d @ D: 2,
        /// Scaled sum.
        s @ S: 2,
        /// Quants.
        qs @ QS: QK,
    }
    /// Q2_K: value `d · sc · q − dmin · m` per 16 elements (`scales`: low nibble `sc`, high
    /// nibble `m`).
    BlockQ2_K = 84 {
        /// Scales and mins.
        scales @ SCALES: QK_K / 16,
        /// 2-bit quants.
        qs @ QS: QK_K / 4,
        /// Scale of the scales.
        d @ D: 2,
        /// Scale of the mins.
        dmin @ DMIN: 2,
    }
    /// Q3_K: value `d · (sc − 32) · (q − 4 · !h)` with 16 packed 6-bit scales.
    BlockQ3_K = 110 {
        /// High bits.
        hmask @ HMASK: QK_K / 8,
        /// 2-bit quants.
        qs @ QS: QK_K / 4,
        /// Packed scales.
        scales @ SCALES: 12,
        /// Scale of the scales.
        d @ D: 2,
    }
    /// Q4_K: value `d · sc · q − dmin · m` per 32 elements, 8 packed 6-bit scales and mins.
    BlockQ4_K = 144 {
        /// Scale of the scales.
        d @ D: 2,
        /// Scale of the mins.
        dmin @ DMIN: 2,
        /// Packed scales and mins.
        scales @ SCALES: 12,
        /// Nibbles.
        qs @ QS: QK_K / 2,
    }
    /// Q5_K: as Q4_K with the fifth bits before the nibbles.
    BlockQ5_K = 176 {
        /// Scale of the scales.
        d @ D: 2,
        /// Scale of the mins.
        dmin @ DMIN: 2,
        /// Packed scales and mins.
        scales @ SCALES: 12,
        /// Fifth bits.
        qh @ QH: QK_K / 8,
        /// Nibbles.
        qs @ QS: QK_K / 2,
    }
    /// Q6_K: value `d · sc · (q − 32)` per 16 elements.
    BlockQ6_K = 210 {
        /// Low nibbles.
        ql @ QL: QK_K / 2,
        /// High 2-bit parts.
        qh @ QH: QK_K / 4,
        /// i8 scales.
        scales @ SCALES: QK_K / 16,
        /// Scale of the scales.
        d @ D: 2,
    }
    /// Q8_K (activations): f32 `d`, 256 × i8, and the i16 sum of each 16 quants.
    BlockQ8_K = 292 {
        /// Scale (f32).
        d @ D: 4,
        /// Quants.
        qs @ QS: QK_K,
        /// Sums of 16 quants (i16).
        bsums @ BSUMS: QK_K / 8,
    }

    /// IQ4_NL: value `d · K[q]` with the 16 non-linear levels `K` of `nonlinear`; nibbles as
    /// Q4_0.
    BlockIQ4_NL = 18 {
        /// Scale.
        d @ D: 2,
        /// Nibbles (level indices).
        qs @ QS: QK / 2,
    }
    /// IQ4_XS: IQ4_NL's levels in super-blocks of 256 with a 6-bit scale per 32 (`ls − 32`:
    /// low nibbles in `scales_l`, high 2 bits in the u16 `scales_h`).
    BlockIQ4_XS = 136 {
        /// Scale of the scales.
        d @ D: 2,
        /// High 2 bits of the 8 scales (u16).
        scales_h @ SCALES_H: 2,
        /// Low 4 bits of the 8 scales.
        scales_l @ SCALES_L: QK_K / 64,
        /// Nibbles, 16 per 32 elements as IQ4_NL.
        qs @ QS: QK_K / 2,
    }
    /// MXFP4: value `2^(e−128) · F[q]` with the doubled E2M1 levels `F`; nibbles as Q4_0.
    BlockMXFP4 = 17 {
        /// E8M0 exponent.
        e @ E: 1,
        /// Nibbles (level indices).
        qs @ QS: QK / 2,
    }
    /// TQ1_0: ternary values `d · (t − 1)`, five base-3 digits per `qs` byte and four per `qh`
    /// byte (digit `n` of byte `b` is `((b · 3ⁿ mod 256) · 3) >> 8`).
    BlockTQ1_0 = 54 {
        /// Five digits per byte.
        qs @ QS: (QK_K - 4 * QK_K / 64) / 5,
        /// Four digits per byte.
        qh @ QH: QK_K / 64,
        /// Scale.
        d @ D: 2,
    }
    /// TQ2_0: ternary values `d · (t − 1)`, 2 bits each.
    BlockTQ2_0 = 66 {
        /// 2-bit digits.
        qs @ QS: QK_K / 4,
        /// Scale.
        d @ D: 2,
    }
    /// IQ2_XXS: per 32 elements two u32: four 8-bit indices into the 256-entry grid, then four
    /// 7-bit sign codes and a 4-bit scale.
    BlockIQ2_XXS = 66 {
        /// Scale.
        d @ D: 2,
        /// Indices, signs and scales.
        qs @ QS: QK_K / 4,
    }
    /// IQ2_XS: per 8 elements a u16 (9-bit index into the 512-entry grid, 7-bit sign code); a
    /// 4-bit scale per 16 elements.
    BlockIQ2_XS = 74 {
        /// Scale.
        d @ D: 2,
        /// Indices and signs (u16).
        qs @ QS: QK_K / 4,
        /// Two 4-bit scales per 32 elements.
        scales @ SCALES: QK_K / 32,
    }
    /// IQ2_S: per 8 elements an index into the 1024-entry grid (8 bits in `qs`, 2 in `qh`) and
    /// a sign byte; a 4-bit scale per 16 elements.
    BlockIQ2_S = 82 {
        /// Scale.
        d @ D: 2,
        /// Low index bits (32 bytes), then the sign bytes (32).
        qs @ QS: QK_K / 4,
        /// High index bits.
        qh @ QH: QK_K / 32,
        /// Two 4-bit scales per 32 elements.
        scales @ SCALES: QK_K / 32,
    }
    /// IQ3_XXS: per 4 elements an 8-bit index into the 256-entry grid; per 32 elements a u32 of
    /// four 7-bit sign codes and a 4-bit scale.
    BlockIQ3_XXS = 98 {
        /// Scale.
        d @ D: 2,
        /// Indices (64 bytes), then the sign-and-scale words (32).
        qs @ QS: 3 * QK_K / 8,
    }
    /// IQ3_S: per 4 elements an index into the 512-entry grid (8 bits in `qs`, 1 in `qh`); a
    /// sign bit per element; a 4-bit scale per 32 elements.
    BlockIQ3_S = 110 {
        /// Scale.
        d @ D: 2,
        /// Low index bits.
        qs @ QS: QK_K / 4,
        /// High index bits.
        qh @ QH: QK_K / 32,
        /// Sign bits.
        signs @ SIGNS: QK_K / 8,
        /// Two 4-bit scales per 64 elements.
        scales @ SCALES: QK_K / 64,
    }
    /// IQ1_S: values `d · ls · (g ± 1/8)` with `g` in −1..=1 from the 2048-entry grid; per 32
    /// elements a u16 of four 3-bit index highs, a 3-bit scale and the sign of the shift.
    BlockIQ1_S = 50 {
        /// Scale.
        d @ D: 2,
        /// Low index bits.
        qs @ QS: QK_K / 8,
        /// Index highs, scale and shift sign (u16).
        qh @ QH: QK_K / 16,
    }
    /// IQ1_M: as IQ1_S with a shift sign per 8 elements and a 3-bit scale per 16; the f16
    /// super-block scale is spread over the top nibbles of the four u16 `scales`.
    BlockIQ1_M = 56 {
        /// Low index bits.
        qs @ QS: QK_K / 8,
        /// Index highs and shift signs (4 bits per 8 elements).
        qh @ QH: QK_K / 16,
        /// Scales and the super-block scale's nibbles (u16).
        scales @ SCALES: QK_K / 32,
    }
}
