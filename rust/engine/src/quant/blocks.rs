//! The byte layout of every block format, in one table used by the portable, x86 and NEON
//! kernels and by [`super::GgmlType::type_size`].
//!
//! Each format is a `#[repr(C)]` struct of byte arrays (alignment 1, so no padding: the struct
//! is the GGUF block byte for byte). Kernels read blocks as bytes and use the associated
//! constants: `SIZE` (bytes per block, checked at compile time against the GGUF sizes) and one
//! byte offset per field, derived from the struct by `offset_of!`. All multi-byte values are
//! little-endian; `d`, `m`, `s`, `dmin` are IEEE halves except Q8_K's `d` (f32).

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
}
