//! The one error type that crosses the FFI. Each variant is one of local-llm-rn's
//! `LocalLLMErrorCode` values (the TypeScript layer maps the variant name to the code).

use std::path::Path;

use local_llm_download::DownloadError;
use local_llm_engine::Error as EngineError;

/// Errors returned to JavaScript; every variant carries a human-readable message.
#[derive(Debug, Clone, thiserror::Error, uniffi::Error)]
pub enum LlmError {
    /// `MODEL_LOAD_FAILED`: the file is not a usable GGUF model.
    #[error("{message}")]
    ModelLoadFailed {
        /// What went wrong.
        message: String,
    },
    /// `CONTEXT_CREATE_FAILED`: the context options are invalid or the cache cannot be made.
    #[error("{message}")]
    ContextCreateFailed {
        /// What went wrong.
        message: String,
    },
    /// `CONTEXT_EXHAUSTED`: the prompt does not fit in the context window.
    #[error("{message}")]
    ContextExhausted {
        /// What went wrong.
        message: String,
    },
    /// `INFERENCE_FAILED`: generation (or tokenization / templating) failed.
    #[error("{message}")]
    InferenceFailed {
        /// What went wrong.
        message: String,
    },
    /// `STREAM_FAILED`: a streamed generation failed.
    #[error("{message}")]
    StreamFailed {
        /// What went wrong.
        message: String,
    },
    /// `EMBEDDING_FAILED`: computing an embedding failed.
    #[error("{message}")]
    EmbeddingFailed {
        /// What went wrong.
        message: String,
    },
    /// `NOT_INITIALIZED`: the model or context was disposed.
    #[error("{message}")]
    NotInitialized {
        /// What went wrong.
        message: String,
    },
    /// `INVALID_OPTION`: an option or argument is out of range (the message names it).
    #[error("{message}")]
    InvalidOption {
        /// What went wrong.
        message: String,
    },
    /// `INSUFFICIENT_MEMORY`: what the options ask for (e.g. the KV cache of a large context)
    /// does not fit in the memory available to the process.
    #[error("{message}")]
    InsufficientMemory {
        /// What went wrong.
        message: String,
    },
    /// `CACHE_CORRUPT`: a saved session file is corrupt, truncated, of another format version
    /// or of another model, or a model cache index entry did not match its file (the entry
    /// was dropped).
    #[error("{message}")]
    CacheCorrupt {
        /// What went wrong.
        message: String,
    },
    /// `QUANTIZE_FAILED`: quantizing a model failed (e.g. its weights are already quantized).
    #[error("{message}")]
    QuantizeFailed {
        /// What went wrong.
        message: String,
    },
    /// `INVALID_PATH`: the model file does not exist or cannot be opened.
    #[error("{message}")]
    InvalidPath {
        /// What went wrong.
        message: String,
    },
    /// `DOWNLOAD_FAILED`: a model download failed (HTTP error, network error, timeout,
    /// redirects, a short body) or was cancelled; a retry resumes it.
    #[error("{message}")]
    DownloadFailed {
        /// What went wrong.
        message: String,
        /// The HTTP status of the failing response (0 when there was none).
        status: u16,
    },
    /// `DOWNLOAD_INTEGRITY_MISMATCH`: the downloaded file's size or SHA-256 is not the
    /// expected one (the file was deleted).
    #[error("{message}")]
    DownloadIntegrityMismatch {
        /// What went wrong.
        message: String,
    },
}

/// The operation an error came from: it decides the code of errors that are not specific to
/// one operation, and the message names it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Stage {
    Load,
    Inspect,
    Lora,
    EstimateMemory,
    CreateContext,
    Tokenize,
    Template,
    Generate,
    Stream,
    Clear,
    Warmup,
    Benchmark,
    Embed,
    SaveSession,
    LoadSession,
    Quantize,
    Download,
}

impl Stage {
    /// The error of this stage with `message`, prefixed with what failed. This is the one
    /// place where a stage's error code is chosen.
    pub(crate) fn error(self, message: &str) -> LlmError {
        let (what, make): (&str, fn(String) -> LlmError) = match self {
            Stage::Load => ("loading the model", |message| LlmError::ModelLoadFailed {
                message,
            }),
            Stage::Inspect => ("reading the model file", |message| {
                LlmError::ModelLoadFailed { message }
            }),
            Stage::Lora => ("applying LoRA adapters", |message| {
                LlmError::ModelLoadFailed { message }
            }),
            Stage::EstimateMemory => ("estimating memory", |message| LlmError::ModelLoadFailed {
                message,
            }),
            Stage::CreateContext => ("creating the context", |message| {
                LlmError::ContextCreateFailed { message }
            }),
            Stage::Tokenize => ("tokenizing", |message| LlmError::InferenceFailed {
                message,
            }),
            Stage::Template => ("applying the chat template", |message| {
                LlmError::InferenceFailed { message }
            }),
            Stage::Generate => ("generating", |message| LlmError::InferenceFailed {
                message,
            }),
            Stage::Stream => ("streaming", |message| LlmError::StreamFailed { message }),
            Stage::Clear => ("clearing the context", |message| {
                LlmError::InferenceFailed { message }
            }),
            Stage::Warmup => ("warming up", |message| LlmError::InferenceFailed {
                message,
            }),
            Stage::Benchmark => ("benchmarking", |message| LlmError::InferenceFailed {
                message,
            }),
            Stage::Embed => ("embedding", |message| LlmError::EmbeddingFailed { message }),
            Stage::SaveSession => ("saving the session", |message| LlmError::InferenceFailed {
                message,
            }),
            Stage::LoadSession => ("loading the session", |message| LlmError::InferenceFailed {
                message,
            }),
            Stage::Quantize => ("quantizing", |message| LlmError::QuantizeFailed { message }),
            Stage::Download => ("downloading", |message| LlmError::DownloadFailed {
                message,
                status: 0,
            }),
        };
        make(format!("{what}: {message}"))
    }
}

impl LlmError {
    /// Translate an engine error raised during `stage`.
    pub(crate) fn from_engine(error: EngineError, stage: Stage) -> Self {
        let message = error.to_string();
        match (&error, stage) {
            (EngineError::ContextExhausted { .. }, _) => LlmError::ContextExhausted { message },
            (EngineError::InvalidOption(_) | EngineError::Grammar(_), _) => {
                LlmError::InvalidOption { message }
            }
            (EngineError::InsufficientMemory(_), _) => LlmError::InsufficientMemory { message },
            (EngineError::SessionFile(_), _) => LlmError::CacheCorrupt { message },
            (
                EngineError::Io { source, .. },
                Stage::Load | Stage::EstimateMemory | Stage::LoadSession | Stage::Quantize,
            ) if matches!(
                source.kind(),
                std::io::ErrorKind::NotFound
                    | std::io::ErrorKind::PermissionDenied
                    | std::io::ErrorKind::InvalidInput
            ) =>
            {
                LlmError::InvalidPath { message }
            }
            _ => stage.error(&message),
        }
    }

    /// The error for using a disposed object.
    pub(crate) fn disposed(what: &str) -> Self {
        LlmError::NotInitialized {
            message: format!("the {what} has been disposed"),
        }
    }

    /// The error of an operation cancelled before it produced anything.
    pub(crate) fn cancelled(stage: Stage) -> Self {
        stage.error("cancelled")
    }

    /// The error for a worker that died (a panic in the engine, caught at the thread boundary).
    pub(crate) fn worker_failed(stage: Stage) -> Self {
        stage.error("internal error: the inference worker stopped unexpectedly")
    }
}

impl LlmError {
    /// Translate a download or cache error.
    pub(crate) fn from_download(error: DownloadError) -> Self {
        let message = error.to_string();
        match error {
            DownloadError::IntegrityMismatch { .. } => {
                LlmError::DownloadIntegrityMismatch { message }
            }
            DownloadError::CacheCorrupt { .. } => LlmError::CacheCorrupt { message },
            DownloadError::InvalidInput(_) => LlmError::InvalidOption { message },
            DownloadError::Failed { status, .. } => LlmError::DownloadFailed {
                message,
                status: status.unwrap_or(0),
            },
            DownloadError::Cancelled { .. } | DownloadError::Io { .. } => {
                LlmError::DownloadFailed { message, status: 0 }
            }
        }
    }
}

/// INVALID_PATH unless `path` names an existing regular file (a model, adapter or projector).
pub(crate) fn check_path(path: &str) -> Result<(), LlmError> {
    let p = Path::new(path);
    if path.is_empty() || !p.exists() {
        return Err(LlmError::InvalidPath {
            message: format!("model file '{path}' does not exist"),
        });
    }
    if !p.is_file() {
        return Err(LlmError::InvalidPath {
            message: format!("'{path}' is not a file"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_errors_with_their_own_code_keep_it_in_every_stage() {
        for stage in [Stage::CreateContext, Stage::Generate, Stage::Load] {
            let e = LlmError::from_engine(EngineError::InsufficientMemory("kv".into()), stage);
            assert!(matches!(e, LlmError::InsufficientMemory { .. }), "{e:?}");
            assert_eq!(e.to_string(), "insufficient memory: kv");
            let e = LlmError::from_engine(
                EngineError::ContextExhausted {
                    needed: 2,
                    capacity: 1,
                },
                stage,
            );
            assert!(matches!(e, LlmError::ContextExhausted { .. }), "{e:?}");
        }
        let e = LlmError::from_engine(EngineError::SessionFile("crc".into()), Stage::LoadSession);
        assert!(matches!(e, LlmError::CacheCorrupt { .. }), "{e:?}");
        let e = LlmError::from_engine(EngineError::Cancelled, Stage::CreateContext);
        assert!(matches!(e, LlmError::ContextCreateFailed { .. }), "{e:?}");
    }
}
