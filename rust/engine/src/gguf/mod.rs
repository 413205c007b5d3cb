//! GGUF file reader (to be implemented).

/// Errors found while reading a GGUF file.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    /// The file is corrupt or truncated.
    #[error("invalid GGUF: {0}")]
    Invalid(String),
}
