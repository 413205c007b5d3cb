//! Speculative decoding across the FFI: a context that drafts with prompt lookup and/or a
//! draft model (local-llm-js-core's `draftModel` / `draftNMax`); the drafted and accepted
//! counts of each generation are in its `Perf`.

use std::sync::Arc;

use local_llm_engine::session::{ContextOptions, SpeculativeOptions};

use crate::context::LlmContext;
use crate::error::LlmError;
use crate::model::LlmModel;

#[uniffi::export]
impl LlmModel {
    /// A new inference context (like `create_context`) that decodes speculatively with
    /// `speculative`, drafting with prompt lookup and/or `draft` (a model with this model's
    /// vocabulary, else INVALID_OPTION). The output is what plain decoding gives.
    pub fn create_speculative_context(
        &self,
        options: ContextOptions,
        speculative: SpeculativeOptions,
        draft: Option<Arc<LlmModel>>,
    ) -> Result<Arc<LlmContext>, LlmError> {
        let draft = draft.map(|d| d.get()).transpose()?;
        LlmContext::new_with(self.get()?, &options, |ctx| {
            ctx.set_speculative(&speculative, draft)
        })
    }
}
