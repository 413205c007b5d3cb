//! `-ctk/--cache-type-k` and `-ctv/--cache-type-v` (llama.cpp's flags): the KV cache types.

use clap::Args;
use local_llm_engine::session::ContextOptions;

/// The element types of the KV cache.
#[derive(Args, Clone)]
pub struct CacheArgs {
    /// KV cache data type for K: f16, f32, bf16, q8_0, q4_0, q4_1, q5_0 or q5_1.
    #[arg(long = "cache-type-k", value_name = "TYPE", default_value_t = ContextOptions::default().cache_type_k)]
    cache_type_k: String,
    /// KV cache data type for V: f16, f32, bf16, q8_0, q4_0, q4_1, q5_0 or q5_1.
    #[arg(long = "cache-type-v", value_name = "TYPE", default_value_t = ContextOptions::default().cache_type_v)]
    cache_type_v: String,
}

impl CacheArgs {
    /// `options` with these cache types (checked when the context is created).
    pub fn apply(&self, options: ContextOptions) -> ContextOptions {
        ContextOptions {
            cache_type_k: self.cache_type_k.clone(),
            cache_type_v: self.cache_type_v.clone(),
            ..options
        }
    }
}

/// llama.cpp's single-dash multi-letter spellings of these flags, rewritten to the long ones
/// clap parses (`-ctk q8_0` → `--cache-type-k q8_0`).
pub fn llama_spelling(arg: std::ffi::OsString) -> std::ffi::OsString {
    match arg.to_str() {
        Some("-ctk") => "--cache-type-k".into(),
        Some("-ctv") => "--cache-type-v".into(),
        _ => arg,
    }
}
