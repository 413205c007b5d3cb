//! Typed errors for malformed, truncated or unsupported GGUF files.

use crate::quant::GgmlType;

/// Errors found while reading a GGUF file. Each variant says what was wrong and, where it
/// applies, the byte offset in the file where the problem was found.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    /// The file does not start with the `GGUF` magic bytes.
    #[error("not a GGUF file: it starts with \"{}\", expected \"GGUF\"", .found.escape_ascii())]
    BadMagic {
        /// The first four bytes of the file (fewer when the file is shorter).
        found: Vec<u8>,
    },
    /// The format version is not 2 or 3.
    #[error("unsupported GGUF version {0} (supported: 2 and 3)")]
    UnsupportedVersion(u32),
    /// The file ends before a field that the header says is there.
    #[error("GGUF file truncated: {what} at offset {offset} runs past the end of the file")]
    Truncated {
        /// The field being read.
        what: String,
        /// Byte offset of the field.
        offset: u64,
    },
    /// A length or count is larger than the rest of the file could hold, or exceeds a sanity cap.
    #[error(
        "GGUF {what} at offset {offset} is {value}, but at most {limit} is possible there \
         (the file is truncated or corrupt)"
    )]
    TooLarge {
        /// The length or count being read.
        what: String,
        /// The declared value.
        value: u64,
        /// The largest value that could be valid here.
        limit: u64,
        /// Byte offset of the length or count field.
        offset: u64,
    },
    /// Decoding the header would take more memory than its budget: the file's size plus
    /// 1 MiB (see the `reader` module).
    #[error(
        "GGUF {what} at offset {offset} would take {needed} bytes of memory, but only {budget} \
         bytes are left of the header's memory budget (the file's size plus 1 MiB): the file is \
         corrupt or hostile"
    )]
    OverMemoryBudget {
        /// What was being decoded.
        what: String,
        /// Bytes of memory it would take.
        needed: u64,
        /// Bytes left in the budget.
        budget: u64,
        /// Byte offset where it was being read.
        offset: u64,
    },
    /// A metadata value has a type code outside the GGUF value types.
    #[error("unknown GGUF metadata value type {code} at offset {offset}{context}")]
    UnknownValueType {
        /// The type code found.
        code: u32,
        /// Byte offset of the type code.
        offset: u64,
        /// Where the value is (e.g. ` in key 'general.name'`), or empty.
        context: String,
    },
    /// A string is not valid UTF-8.
    #[error("GGUF {what} at offset {offset} is not valid UTF-8")]
    InvalidUtf8 {
        /// The string being read.
        what: String,
        /// Byte offset of the string bytes.
        offset: u64,
    },
    /// A metadata key appears more than once.
    #[error("duplicate GGUF metadata key '{0}'")]
    DuplicateKey(String),
    /// A tensor name appears more than once.
    #[error("duplicate GGUF tensor name '{0}'")]
    DuplicateTensor(String),
    /// A tensor has a type code this engine does not know.
    #[error("tensor '{tensor}' has unknown or unsupported type code {code}")]
    UnknownTensorType {
        /// Tensor name.
        tensor: String,
        /// The type code found.
        code: u32,
    },
    /// A tensor's shape, offset or size is inconsistent.
    #[error("invalid tensor '{tensor}': {reason}")]
    InvalidTensor {
        /// Tensor name.
        tensor: String,
        /// What is wrong.
        reason: String,
    },
    /// A big-endian file holds a tensor type whose byte order cannot be converted.
    #[error("big-endian GGUF: cannot convert tensor '{tensor}' of type {ty} to little-endian")]
    UnsupportedBigEndianType {
        /// Tensor name.
        tensor: String,
        /// The tensor's type.
        ty: GgmlType,
    },
    /// Any other structural problem (bad alignment, malformed header, ...).
    #[error("invalid GGUF: {0}")]
    Invalid(String),
}

impl GgufError {
    /// Adds where the error happened (e.g. `key 'general.name'`) to errors that describe a field.
    pub(crate) fn in_context(self, ctx: &str) -> Self {
        match self {
            Self::Truncated { what, offset } => Self::Truncated {
                what: format!("{what} of {ctx}"),
                offset,
            },
            Self::TooLarge {
                what,
                value,
                limit,
                offset,
            } => Self::TooLarge {
                what: format!("{what} of {ctx}"),
                value,
                limit,
                offset,
            },
            Self::OverMemoryBudget {
                what,
                needed,
                budget,
                offset,
            } => Self::OverMemoryBudget {
                what: format!("{what} of {ctx}"),
                needed,
                budget,
                offset,
            },
            Self::InvalidUtf8 { what, offset } => Self::InvalidUtf8 {
                what: format!("{what} of {ctx}"),
                offset,
            },
            Self::UnknownValueType { code, offset, .. } => Self::UnknownValueType {
                code,
                offset,
                context: format!(" in {ctx}"),
            },
            Self::Invalid(msg) => Self::Invalid(format!("{msg} (in {ctx})")),
            other => other,
        }
    }
}
