//! The TypeScript API's defaults: local-llm-rn 1.0.3's, so that an app moving from it gets the
//! same answers for the same calls. They are defined here once and read by the TypeScript layer
//! (`appDefaults()`); the engine and the CLI keep llama.cpp's defaults (the engine's option
//! tables). What local-llm-rn does, traced through its JavaScript, its bridge and its native
//! engine (local-llm-js-core 0.3.0 `index.js`, `cpp/hilum/hilum_llm.cpp`):
//! - sampling: temperature 0.7, top-p 0.9, top-k 40, min-p off, repeat penalty 1.1 over the
//!   last 64 tokens, no frequency or presence penalty;
//! - a context of 512 tokens (llama.cpp's `n_ctx` default, which its engine passes on);
//! - chat completions without `max_tokens` may fill the room the prompt leaves, less a margin
//!   of 64 tokens, at most 3/4 of the context; a raw generation stops after 512 tokens;
//! - a chat that does not fit slides its window (`contextOverflow: 'sliding_window'`);
//! - threads: the performance cores (`local_llm_engine::backend::performance_cores`);
//! - speculative decoding drafts up to 16 tokens.

/// The defaults of the TypeScript API (see the module documentation for their origin).
#[derive(Clone, Debug, PartialEq, uniffi::Record)]
pub struct AppDefaults {
    /// Softmax temperature.
    pub temperature: f32,
    /// Nucleus sampling mass.
    pub top_p: f32,
    /// Most likely tokens kept.
    pub top_k: u32,
    /// Min-p (0: off).
    pub min_p: f32,
    /// Repetition penalty.
    pub repeat_penalty: f32,
    /// Tokens the penalties look back over.
    pub penalty_last_n: i32,
    /// Context size in tokens.
    pub context_size: u32,
    /// Worker threads: the performance cores.
    pub threads: u32,
    /// Most tokens drafted per speculative step.
    pub draft_n_max: u32,
    /// Most tokens of a raw generation (`generate`, `stream`).
    pub generate_max_tokens: u32,
    /// A chat answer may take at most this share of the context...
    pub chat_max_share: f64,
    /// ...and the room the prompt leaves less this many tokens (at least 1 token).
    pub chat_margin_tokens: u32,
    /// What a chat that does not fit does (`contextOverflow`).
    pub context_overflow: String,
}

/// The TypeScript API's defaults on this device.
#[uniffi::export]
pub fn app_defaults() -> AppDefaults {
    AppDefaults {
        temperature: 0.7,
        top_p: 0.9,
        top_k: 40,
        min_p: 0.0,
        repeat_penalty: 1.1,
        penalty_last_n: 64,
        context_size: 512,
        threads: u32::try_from(local_llm_engine::backend::performance_cores()).unwrap_or(u32::MAX),
        draft_n_max: 16,
        generate_max_tokens: 512,
        chat_max_share: 0.75,
        chat_margin_tokens: 64,
        context_overflow: "sliding_window".to_string(),
    }
}
