//! `zdnn_status` codes and our own short descriptions of them.

/// A `zdnn_status` value (0 is success; `0x0002xxxx` warnings; anything else an error).
pub type Status = u32;

macro_rules! statuses {
    ($($(#[$doc:meta])* $name:ident = $value:expr, $text:expr;)*) => {
        $($(#[$doc])* pub const $name: Status = $value;)*

        /// The C name of a status (e.g. `"ZDNN_INVALID_SHAPE"`), or `"ZDNN_UNKNOWN_STATUS"`.
        pub fn status_name(status: Status) -> &'static str {
            match status {
                $($value => stringify!($name),)*
                0x000C_F000..=0x000C_F009 => "ZDNN_FUNC_RC_F00x",
                _ => "ZDNN_UNKNOWN_STATUS",
            }
        }

        /// A short description of a status, usable without the library (the library's own text
        /// is [`crate::Zdnn::status_message`]).
        pub fn status_message(status: Status) -> &'static str {
            match status {
                $($value => $text,)*
                0x000C_F000..=0x000C_F009 => "function-specific response code from the NNPA",
                _ => "unknown zDNN status",
            }
        }
    };
}

statuses! {
    /// Success.
    ZDNN_OK = 0x0000_0000, "success";
    /// Warning: some elements were out of the representable range.
    ZDNN_ELEMENT_RANGE_VIOLATION = 0x0002_0001, "a value was outside the DLFLOAT16 range";
    /// Invalid dimensions for the operation.
    ZDNN_INVALID_SHAPE = 0x0004_0001, "invalid shape";
    /// Invalid layout for the operation.
    ZDNN_INVALID_LAYOUT = 0x0004_0002, "invalid layout";
    /// Invalid element type.
    ZDNN_INVALID_TYPE = 0x0004_0003, "invalid data type";
    /// Invalid format.
    ZDNN_INVALID_FORMAT = 0x0004_0004, "invalid format";
    /// Invalid RNN direction.
    ZDNN_INVALID_DIRECTION = 0x0004_0005, "invalid direction";
    /// Invalid concatenation info.
    ZDNN_INVALID_CONCAT_INFO = 0x0004_0006, "invalid concatenation info";
    /// Invalid padding type.
    ZDNN_INVALID_STRIDE_PADDING = 0x0004_0007, "invalid stride padding";
    /// Invalid strides.
    ZDNN_INVALID_STRIDES = 0x0004_0008, "invalid strides";
    /// The parameter block is not doubleword aligned.
    ZDNN_MISALIGNED_PARMBLOCK = 0x0004_0009, "misaligned parameter block";
    /// Invalid clipping value.
    ZDNN_INVALID_CLIPPING_VALUE = 0x0004_000A, "invalid clipping value";
    /// Invalid adjustment factor.
    ZDNN_INVALID_ADJUSTMENT_FACTOR = 0x0004_000B, "invalid adjustment factor";
    /// Invalid epsilon.
    ZDNN_INVALID_EPSILON = 0x0004_000C, "invalid epsilon";
    /// Invalid transform type.
    ZDNN_INVALID_TRANSFORM_TYPE = 0x0004_000D, "invalid transform type";
    /// Invalid beta.
    ZDNN_INVALID_BETA = 0x0004_000E, "invalid beta";
    /// Invalid gamma.
    ZDNN_INVALID_GAMMA = 0x0004_000F, "invalid gamma";
    /// Invalid Bessel correction.
    ZDNN_INVALID_BESSEL_CORRECTION = 0x0004_0010, "invalid Bessel correction";
    /// Invalid scale.
    ZDNN_INVALID_SCALE = 0x0004_0011, "invalid scale";
    /// Invalid offset.
    ZDNN_INVALID_OFFSET = 0x0004_0012, "invalid offset";
    /// Memory allocation failed.
    ZDNN_ALLOCATION_FAILURE = 0x0010_0001, "allocation failure";
    /// The buffer is missing, misaligned or too small.
    ZDNN_INVALID_BUFFER = 0x0010_0002, "invalid buffer";
    /// Data conversion failed.
    ZDNN_CONVERT_FAILURE = 0x0010_0003, "conversion failure";
    /// The ztensor is in the wrong state (e.g. already transformed).
    ZDNN_INVALID_STATE = 0x0010_0004, "invalid ztensor state";
    /// The NNPA raised an exception the library does not support.
    ZDNN_UNSUPPORTED_AIU_EXCEPTION = 0x0010_0005, "unsupported NNPA exception";
    /// The parameter-block format is not installed.
    ZDNN_UNSUPPORTED_PARMBLOCK = 0x000C_0001, "unsupported parameter block format";
    /// The NNPA function is not available on this machine.
    ZDNN_UNAVAILABLE_FUNCTION = 0x000C_0002, "NNPA function unavailable";
    /// The data format is not supported by the NNPA.
    ZDNN_UNSUPPORTED_FORMAT = 0x000C_0010, "unsupported data format";
    /// The data type is not supported by the NNPA.
    ZDNN_UNSUPPORTED_TYPE = 0x000C_0011, "unsupported data type";
    /// A dimension exceeds the maximum dimension index size.
    ZDNN_EXCEEDS_MDIS = 0x000C_0012, "dimension exceeds the maximum dimension index size";
    /// The tensor exceeds the maximum tensor size.
    ZDNN_EXCEEDS_MTS = 0x000C_0013, "tensor exceeds the maximum tensor size";
    /// The tensor buffer is not page aligned.
    ZDNN_MISALIGNED_TENSOR = 0x000C_0014, "misaligned tensor";
    /// The save area is not page aligned.
    ZDNN_MISALIGNED_SAVEAREA = 0x000C_0015, "misaligned save area";
}
