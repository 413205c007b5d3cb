//! The engine's error type: every failure a caller can see is one of these variants.

use crate::gguf::GgufError;

/// Result alias used throughout the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Every error the engine reports. Variants are coarse categories that front ends (CLI, FFI)
/// map to their own codes; the message always says what went wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be opened or read.
    #[error("cannot read '{path}': {source}")]
    Io {
        /// Path that failed.
        path: String,
        /// Underlying I/O error.
        source: std::io::Error,
    },
    /// The file could not be written (the previous file at that path, if any, is unchanged).
    #[error("cannot write '{path}': {source}")]
    Write {
        /// Path that failed.
        path: String,
        /// Underlying I/O error.
        source: std::io::Error,
    },
    /// The GGUF file is corrupt, truncated or unsupported.
    #[error(transparent)]
    Gguf(#[from] GgufError),
    /// The model's architecture is not implemented.
    #[error("unsupported model architecture '{0}'")]
    UnsupportedArchitecture(String),
    /// The model file lacks or has inconsistent metadata or tensors for its architecture.
    #[error("invalid model: {0}")]
    InvalidModel(String),
    /// The tokenizer metadata is missing or invalid, or tokenization failed.
    #[error("tokenizer error: {0}")]
    Tokenizer(String),
    /// The chat template could not be parsed or rendered.
    #[error("chat template error: {0}")]
    ChatTemplate(String),
    /// The request does not fit in the context window.
    #[error("context exhausted: {needed} tokens needed but the context holds {capacity}")]
    ContextExhausted {
        /// Tokens that would be in the context.
        needed: usize,
        /// Context capacity in tokens.
        capacity: usize,
    },
    /// Memory for what the options ask for (e.g. the KV cache of a large context) is not
    /// available, or allocating it failed.
    #[error("insufficient memory: {0}")]
    InsufficientMemory(String),
    /// An option or argument is out of range or inconsistent.
    #[error("invalid option: {0}")]
    InvalidOption(String),
    /// A GBNF grammar or JSON schema is invalid or unsupported: the message names the line and
    /// column (grammars) or the schema path (JSON schemas) and what is wrong.
    #[error("invalid grammar: {0}")]
    Grammar(String),
    /// A backend device failed to run an operation.
    #[error("backend error: {0}")]
    Backend(String),
    /// The output does not call a tool although `tool_choice` requires one.
    #[error("tool call error: {0}")]
    ToolCall(String),
    /// A saved context state (session file) is corrupt, truncated, of another format version
    /// or of another model.
    #[error("invalid session file: {0}")]
    SessionFile(String),
    /// A model could not be quantized (e.g. its tensors are already quantized).
    #[error("quantize failed: {0}")]
    Quantize(String),
    /// The operation was cancelled by the caller.
    #[error("cancelled")]
    Cancelled,
}
