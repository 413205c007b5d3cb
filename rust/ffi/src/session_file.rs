//! Saving and restoring a context's state to a file (llama.rn's `saveSession` /
//! `loadSession`); the file format is the engine's (`Context::save_state`).

use std::path::PathBuf;

use crate::context::LlmContext;
use crate::error::{LlmError, Stage};

/// What `load_session` restored (llama.rn's `NativeSessionLoadResult`).
#[derive(Debug, Clone, uniffi::Record)]
pub struct SessionLoadResult {
    /// Tokens restored into the cache.
    pub tokens_loaded: u32,
    /// Their text (control tokens included).
    pub prompt: String,
}

#[uniffi::export]
impl LlmContext {
    /// Write the cached tokens and their keys and values to `path` (waits for a running
    /// generation); returns the number of tokens saved.
    pub async fn save_session(&self, path: String) -> Result<u32, LlmError> {
        let shared = self.check()?;
        crate::run_blocking(Stage::SaveSession, move || {
            shared.with_engine(|ctx| {
                ctx.save_state(&PathBuf::from(&path))
                    .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
                    .map_err(|e| LlmError::from_engine(e, Stage::SaveSession))
            })
        })
        .await
    }

    /// Restore a state saved by `save_session` with the same model; a later prompt that starts
    /// with the restored tokens does not evaluate them again. A file of another model, or a
    /// corrupt or truncated one, is a `CacheCorrupt` error and leaves the context as it was.
    pub async fn load_session(&self, path: String) -> Result<SessionLoadResult, LlmError> {
        let shared = self.check()?;
        crate::run_blocking(Stage::LoadSession, move || {
            shared.with_engine(|ctx| {
                let tokens = ctx
                    .load_state(&PathBuf::from(&path))
                    .map_err(|e| LlmError::from_engine(e, Stage::LoadSession))?;
                Ok(SessionLoadResult {
                    tokens_loaded: u32::try_from(tokens.len()).unwrap_or(u32::MAX),
                    prompt: ctx.model().detokenize(&tokens, true),
                })
            })
        })
        .await
    }
}
