//! `local-llm-ffi`: the engine's API for React Native, exported with UniFFI and turned into
//! TypeScript + JSI C++ by uniffi-bindgen-react-native.
//!
//! Threading rules (see docs/engine.md): every heavy call is `async` and runs on a worker thread of
//! a private tokio runtime; Rust never calls into JavaScript from a worker (streaming and logs are
//! pull-style: JavaScript awaits `next()`); a context's engine state is behind a mutex that only
//! workers take, so concurrent generations on one context run one after the other, except on a
//! context with several sequences, where they share them (`scheduled.rs`).

mod batch;
mod context;
mod download;
mod error;
mod logging;
mod model;
mod profile;
mod quantize;
mod records;
mod scheduled;
mod session_file;
mod shared;
mod speculative;
mod stream;

use std::sync::OnceLock;

pub use context::{BenchmarkParams, BenchmarkResult, CancelToken, LlmContext, LoraAdapterSpec};
pub use download::{
    adopt_downloaded_model, default_model_cache_dir, is_remote_model, list_cached_models,
    lookup_cached_model, model_cache_path, remove_cached_model, resolve_model_url, start_download,
    DownloadParams, DownloadProgress, DownloadTask,
};
pub use error::LlmError;
pub use logging::{next_log_records, set_log_capture, set_log_level, LogLevel, LogRecord};
pub use model::{
    estimate_model_memory, inspect_model, load_model, LlmModel, ModelFileInfo, ModelInfo,
    TensorTypeCount,
};
pub use profile::{app_defaults, AppDefaults};
pub use quantize::{quantize_model, QuantizeParams};
pub use records::{
    finish_reason_name, finish_reason_openai_name, ChatMessage, GenerateParams, GenerationResult,
    Perf, PromptInput,
};
pub use session_file::SessionLoadResult;
pub use stream::{PromptProgress, StreamChunk, TokenStream};

uniffi::setup_scaffolding!();

/// The runtime whose blocking pool runs engine work (loading, generation, embeddings).
fn runtime() -> Option<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<Option<tokio::runtime::Runtime>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("local-llm-worker")
                // Idle blocking threads (one per call that ran at once) end after half a
                // second instead of tokio's 10 s.
                .thread_keep_alive(std::time::Duration::from_millis(500))
                .build()
                .ok()
        })
        .as_ref()
}

/// Run `work` on a worker thread and await its result. A panic inside `work` becomes the
/// worker-failed error of `stage` instead of crossing the FFI.
async fn run_blocking<T, F>(stage: error::Stage, work: F) -> Result<T, LlmError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, LlmError> + Send + 'static,
{
    let rt = runtime().ok_or_else(|| LlmError::worker_failed(stage))?;
    rt.spawn_blocking(work)
        .await
        .unwrap_or_else(|_| Err(LlmError::worker_failed(stage)))
}

/// The devices the engine can use on this host (accelerators first, the CPU last).
#[uniffi::export]
pub fn get_backends() -> Vec<local_llm_engine::backend::DeviceInfo> {
    local_llm_engine::backend::Registry::detect().devices()
}

/// The number of threads the engine uses by default (the host's available parallelism).
#[uniffi::export]
pub fn optimal_thread_count() -> u32 {
    u32::try_from(local_llm_engine::session::default_threads()).unwrap_or(u32::MAX)
}

/// The bounds the engine puts on options, for the TypeScript layer to check options against
/// before a call (each is defined once, in the engine).
#[derive(Clone, Debug, PartialEq, Eq, uniffi::Record)]
pub struct EngineLimits {
    /// Most sequences a context holds (`max_sequences`).
    pub max_sequences: u32,
    /// Most tokens speculative decoding drafts per step (`draft_n_max`).
    pub max_draft: u32,
    /// Longest n-gram prompt lookup matches (`lookup_ngram_max`).
    pub max_lookup_ngram: u32,
    /// Most alternatives reported per generated token (`n_probs`).
    pub max_top_logprobs: u32,
    /// Most iterations of a benchmark.
    pub max_benchmark_iterations: u32,
}

/// The engine's option bounds.
#[uniffi::export]
pub fn engine_limits() -> EngineLimits {
    use local_llm_engine::session;
    EngineLimits {
        max_sequences: session::MAX_SEQUENCES,
        max_draft: session::MAX_DRAFT,
        max_lookup_ngram: session::MAX_LOOKUP_NGRAM,
        max_top_logprobs: u32::try_from(local_llm_engine::sampling::MAX_TOP_LOGPROBS)
            .unwrap_or(u32::MAX),
        max_benchmark_iterations: session::MAX_BENCHMARK_ITERATIONS,
    }
}

/// The version of this library.
#[uniffi::export]
pub fn library_version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}

/// Read the host's total and available memory.
#[uniffi::export]
pub fn device_memory() -> local_llm_engine::backend::HostMemory {
    local_llm_engine::backend::HostMemory::read()
}
