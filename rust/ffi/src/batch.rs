//! Batched generation: several requests on one context's sequences (`max_sequences`), one
//! forward pass per step for all of them (local-llm-js-core's `generateBatch`).

use std::sync::Arc;

use crate::context::{cancellable, CancelToken, LlmContext};
use crate::error::{LlmError, Stage};
use crate::records::{GenerateParams, GenerationResult};
use crate::scheduled::scheduled_request;

#[uniffi::export]
impl LlmContext {
    /// Generate every request, up to the context's `max_sequences` at a time (the others
    /// wait for a free sequence), and return the results in request order; each equals what
    /// `generate` gives its request alone (greedy: token for token). Requests with tools are
    /// an error here. `cancel` (or abandoning the call) ends all of them with finish reason
    /// `Cancelled`.
    pub async fn generate_batch(
        &self,
        params: Vec<GenerateParams>,
        cancel: Option<Arc<CancelToken>>,
    ) -> Result<Vec<GenerationResult>, LlmError> {
        let shared = self.check()?;
        cancellable(cancel, |flag| {
            crate::run_blocking(Stage::Generate, move || {
                let requests = params
                    .iter()
                    .map(GenerateParams::to_request)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| LlmError::from_engine(e, Stage::Generate))?;
                shared.generate_batch(&requests, &flag)
            })
        })
        .await
    }

    /// Sequences this context can generate at once (its `max_sequences`).
    pub fn max_sequences(&self) -> u32 {
        self.max_sequences
    }

    /// Whether `generate` and `stream` with `params` share the context's sequences with
    /// concurrent requests (`max_sequences` above 1, no tools; see
    /// `scheduled.rs`) rather than run alone after the others.
    pub fn is_scheduled(&self, params: GenerateParams) -> bool {
        self.check()
            .is_ok_and(|shared| scheduled_request(&shared, &params).is_some())
    }
}
