//! `-ctk/--cache-type-k`, `-ctv/--cache-type-v` and `-fa/--flash-attn` (llama.cpp's flags):
//! the KV cache types and the flash attention mode.

use clap::Args;
use local_llm_engine::session::ContextOptions;

/// The element types of the KV cache, and flash attention.
#[derive(Args, Clone)]
pub struct CacheArgs {
    /// KV cache data type for K: f16, f32, bf16, q8_0, q4_0, q4_1, q5_0, q5_1 or iq4_nl.
    #[arg(long = "cache-type-k", value_name = "TYPE", default_value_t = ContextOptions::default().cache_type_k)]
    cache_type_k: String,
    /// KV cache data type for V: f16, f32, bf16, q8_0, q4_0, q4_1, q5_0, q5_1 or iq4_nl.
    #[arg(long = "cache-type-v", value_name = "TYPE", default_value_t = ContextOptions::default().cache_type_v)]
    cache_type_v: String,
    /// Flash attention: on, off or auto (also enabled, disabled). Accepted for llama.cpp
    /// compatibility: attention here is always fused and exact, whatever the mode.
    #[arg(long = "flash-attn", value_name = "MODE", default_value_t = ContextOptions::default().flash_attn)]
    flash_attn: String,
}

impl CacheArgs {
    /// `options` with these cache types and mode (checked when the context is created).
    pub fn apply(&self, options: ContextOptions) -> ContextOptions {
        ContextOptions {
            cache_type_k: self.cache_type_k.clone(),
            cache_type_v: self.cache_type_v.clone(),
            flash_attn: self.flash_attn.clone(),
            ..options
        }
    }
}

/// llama.cpp's single-dash multi-letter spellings of these flags, rewritten to the long ones
/// clap parses (`-ctk q8_0` → `--cache-type-k q8_0`, `-fa on` → `--flash-attn on`).
pub fn llama_spelling(arg: std::ffi::OsString) -> std::ffi::OsString {
    match arg.to_str() {
        Some("-ctk") => "--cache-type-k".into(),
        Some("-ctv") => "--cache-type-v".into(),
        Some("-fa") => "--flash-attn".into(),
        _ => arg,
    }
}
