//! Batched generation: several requests on one context's sequences (`max_sequences`), one
//! forward pass per step for all of them (local-llm-js-core's `generateBatch`).

use std::sync::Arc;

use crate::context::{cancellable, CancelToken, LlmContext};
use crate::error::LlmError;
use crate::records::{GenerateParams, GenerationResult};

#[uniffi::export]
impl LlmContext {
    /// Generate every request, up to the context's `max_sequences` at a time (the others
    /// wait for a free sequence), and return the results in request order; each equals what
    /// `generate` gives its request alone (greedy: token for token), tools, grammars,
    /// log-probabilities and speculative decoding included. The first request that fails
    /// fails the call. `cancel` (or abandoning the call) ends all of them with finish reason
    /// `Cancelled`.
    pub async fn generate_batch(
        &self,
        params: Vec<GenerateParams>,
        cancel: Option<Arc<CancelToken>>,
    ) -> Result<Vec<GenerationResult>, LlmError> {
        let shared = self.check()?;
        cancellable(cancel, |flag| async move {
            crate::scheduled::generate_batch(&shared, &params, &flag).await
        })
        .await
    }

    /// Sequences this context can generate at once (its `max_sequences`).
    pub fn max_sequences(&self) -> u32 {
        self.max_sequences
    }
}
