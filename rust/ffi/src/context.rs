//! Inference contexts: generation (whole or streamed), cancellation, KV-cache control,
//! performance numbers, benchmarks and embeddings.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use local_llm_engine::model::{ActiveLora, LoraAdapter, Output, Pooling};
use local_llm_engine::session::{Context, ContextOptions, EmbedOptions, LoadedModel};

use crate::error::{LlmError, Stage};
use crate::records::{to_u32, GenerateParams, GenerationResult, Perf};
use crate::shared::Shared;
use crate::stream::TokenStream;

/// Benchmark settings (local-llm-rn's `BenchmarkOptions`).
#[derive(Debug, Clone, uniffi::Record)]
pub struct BenchmarkParams {
    /// Prompt tokens per iteration.
    pub prompt_tokens: u32,
    /// Generated tokens per iteration.
    pub generate_tokens: u32,
    /// Iterations.
    pub iterations: u32,
}

/// How `embed_many` pools and normalises.
#[derive(Debug, Clone, uniffi::Record)]
pub struct EmbedParams {
    /// "none" (one vector per token, concatenated), "mean", "cls", "last" or "rank" (a
    /// reranker's scores); `None`: the model's own.
    pub pooling: Option<String>,
    /// llama.cpp's `--embd-normalize`: -1 none, 0 max absolute (int16 range), 1 taxicab, 2
    /// Euclidean (the default), larger: that p-norm.
    pub normalize: i32,
}

/// Benchmark results (local-llm-rn's `BenchmarkResult`).
#[derive(Debug, Clone, uniffi::Record)]
pub struct BenchmarkResult {
    /// Mean prompt tokens per second.
    pub prompt_tokens_per_sec: f64,
    /// Mean generated tokens per second.
    pub generated_tokens_per_sec: f64,
    /// Mean time to first token in milliseconds (prompt plus one generated token).
    pub ttft_ms: f64,
    /// Total milliseconds.
    pub total_ms: f64,
    /// Iterations run.
    pub iterations: u32,
    /// Each iteration's numbers.
    pub individual: Vec<Perf>,
}

/// A cancellation flag JavaScript can set while an async call runs (the TypeScript layer
/// connects it to an `AbortSignal`).
#[derive(Debug, Default, uniffi::Object)]
pub struct CancelToken {
    pub(crate) flag: Arc<AtomicBool>,
}

#[uniffi::export]
impl CancelToken {
    /// A token that is not cancelled.
    #[uniffi::constructor]
    pub fn new() -> Arc<Self> {
        Arc::new(CancelToken::default())
    }

    /// Ask the running operation to stop (checked between tokens and prompt batches).
    pub fn cancel(&self) {
        self.flag.store(true, Ordering::Relaxed);
    }

    /// Whether `cancel` was called.
    pub fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::Relaxed)
    }
}

/// Sets a flag when dropped: an async call whose future JavaScript abandons stops its worker.
struct CancelOnDrop(Option<Arc<AtomicBool>>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(flag) = self.0.take() {
            flag.store(true, Ordering::Relaxed);
        }
    }
}

/// The one way an async call takes its cancellation: `work` gets the flag of `cancel` (a fresh
/// one without a token), and the flag is also set when the call's future is dropped before it
/// completes (JavaScript abandoned it), so the worker stops either way.
pub(crate) async fn cancellable<T, Fut>(
    cancel: Option<Arc<CancelToken>>,
    work: impl FnOnce(Arc<AtomicBool>) -> Fut,
) -> T
where
    Fut: std::future::Future<Output = T>,
{
    let flag = cancel.map_or_else(Default::default, |c| c.flag.clone());
    let mut guard = CancelOnDrop(Some(flag.clone()));
    let result = work(flag).await;
    guard.0 = None;
    result
}

/// A LoRA adapter file applied to a context with a scale (llama.rn's `{ path, scaled }`).
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct LoraAdapterSpec {
    /// Path of the adapter (GGUF, llama.cpp's LoRA format).
    pub path: String,
    /// Its scale (1: as trained).
    #[uniffi(default = 1.0)]
    pub scale: f32,
}

/// An inference context: a KV cache and worker threads for one model.
#[derive(uniffi::Object)]
pub struct LlmContext {
    shared: Arc<Shared>,
    n_ctx: u32,
    pub(crate) max_sequences: u32,
    /// The adapters in use, as given.
    lora: std::sync::Mutex<Vec<LoraAdapterSpec>>,
}

impl LlmContext {
    pub(crate) fn new(
        model: Arc<LoadedModel>,
        options: &ContextOptions,
    ) -> Result<Arc<Self>, LlmError> {
        Self::new_with(model, options, |_| Ok(()))
    }

    /// [`LlmContext::new`], with `setup` applied to the engine context before it is shared.
    pub(crate) fn new_with(
        model: Arc<LoadedModel>,
        options: &ContextOptions,
        setup: impl FnOnce(&mut Context) -> local_llm_engine::Result<()>,
    ) -> Result<Arc<Self>, LlmError> {
        let ctx = Context::new(model, options)
            .and_then(|mut ctx| setup(&mut ctx).map(|()| ctx))
            .map_err(|e| LlmError::from_engine(e, Stage::CreateContext))?;
        Ok(Arc::new(LlmContext {
            n_ctx: to_u32(ctx.n_ctx()),
            max_sequences: to_u32(ctx.max_sequences()),
            shared: Shared::new(ctx),
            lora: std::sync::Mutex::new(Vec::new()),
        }))
    }

    pub(crate) fn check(&self) -> Result<Arc<Shared>, LlmError> {
        if self.shared.is_disposed() {
            return Err(LlmError::disposed("context"));
        }
        Ok(self.shared.clone())
    }

    /// Run `work` on the engine's context on a worker thread, stopped by `cancel` as
    /// [`cancellable`] says; its errors are embedding failures (or their own kind).
    async fn embedding<T: Send + 'static>(
        &self,
        cancel: Option<Arc<CancelToken>>,
        work: impl FnOnce(&mut Context, &AtomicBool) -> local_llm_engine::Result<T> + Send + 'static,
    ) -> Result<T, LlmError> {
        let shared = self.check()?;
        cancellable(cancel, |flag| {
            crate::run_blocking(Stage::Embed, move || {
                shared.with_engine(|ctx| {
                    work(ctx, &flag).map_err(|e| LlmError::from_engine(e, Stage::Embed))
                })
            })
        })
        .await
    }
}

#[uniffi::export]
impl LlmContext {
    /// Context size in tokens.
    pub fn context_size(&self) -> u32 {
        self.n_ctx
    }

    /// Generate the whole answer on a worker thread. `cancel` (or abandoning the call) stops
    /// decoding between tokens; the result then has finish reason `Cancelled`. On a context
    /// with several sequences it runs alongside concurrent requests (see `max_sequences`).
    pub async fn generate(
        &self,
        params: GenerateParams,
        cancel: Option<Arc<CancelToken>>,
    ) -> Result<GenerationResult, LlmError> {
        let shared = self.check()?;
        cancellable(cancel, |flag| async move {
            crate::scheduled::generate(&shared, &params, &flag).await
        })
        .await
    }

    /// Start a streamed generation; read it with [`TokenStream::next`]. Decoding advances only
    /// as the stream is read, so stopping to read and cancelling wastes no tokens.
    pub fn stream(&self, params: GenerateParams) -> Result<Arc<TokenStream>, LlmError> {
        let shared = self.check()?;
        TokenStream::start(shared, params)
    }

    /// Empty the KV cache (waits for a running generation).
    pub async fn clear(&self) -> Result<(), LlmError> {
        let shared = self.check()?;
        crate::run_blocking(Stage::Clear, move || {
            shared.with_engine(|ctx| {
                ctx.clear();
                Ok(())
            })
        })
        .await
    }

    /// Apply these LoRA adapters from now on, replacing the set in use (an empty list removes
    /// them); waits for running generations. A different set empties the KV cache. Missing
    /// files are INVALID_PATH, files that are not LoRA adapters for this model
    /// MODEL_LOAD_FAILED; on error the set in use is kept.
    pub async fn set_lora_adapters(&self, adapters: Vec<LoraAdapterSpec>) -> Result<(), LlmError> {
        let shared = self.check()?;
        let applied = adapters.clone();
        crate::run_blocking(Stage::Lora, move || {
            for a in &adapters {
                crate::error::check_path(&a.path)?;
            }
            shared.with_engine(|ctx| {
                let config = ctx.model().model().config().clone();
                let active = adapters
                    .iter()
                    .map(|a| {
                        LoraAdapter::load(&a.path, &config).map(|adapter| ActiveLora {
                            adapter: Arc::new(adapter),
                            scale: a.scale,
                        })
                    })
                    .collect::<local_llm_engine::Result<Vec<_>>>()
                    .and_then(|active| ctx.set_lora(active));
                active.map_err(|e| LlmError::from_engine(e, Stage::Lora))
            })
        })
        .await?;
        *self.lora.lock().unwrap_or_else(|e| e.into_inner()) = applied;
        Ok(())
    }

    /// The LoRA adapters in use, as given to [`LlmContext::set_lora_adapters`].
    pub fn lora_adapters(&self) -> Vec<LoraAdapterSpec> {
        self.lora.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Numbers of the last generation, if any.
    pub fn get_perf(&self) -> Option<Perf> {
        self.shared.last_perf()
    }

    /// Evaluate one token and clear the cache, so the first real request runs at full speed.
    pub async fn warmup(&self) -> Result<(), LlmError> {
        let shared = self.check()?;
        crate::run_blocking(Stage::Warmup, move || {
            shared.with_engine(|ctx| {
                let token = ctx.model().tokenizer().bos().unwrap_or(0);
                // Encoders compute hidden states only.
                let output = match ctx.model().model().is_encoder() {
                    true => Output::Hidden,
                    false => Output::LastLogits,
                };
                let result = ctx.eval(&[token], output, &mut |_, _| {}, None);
                ctx.clear();
                result
                    .map(|_| ())
                    .map_err(|e| LlmError::from_engine(e, Stage::Warmup))
            })
        })
        .await
    }

    /// Measure prompt and generation speed (greedy decoding of a synthetic prompt, cache
    /// cleared before and after each iteration).
    pub async fn benchmark(&self, params: BenchmarkParams) -> Result<BenchmarkResult, LlmError> {
        let shared = self.check()?;
        crate::run_blocking(Stage::Benchmark, move || {
            shared.with_engine(|ctx| run_benchmark(ctx, &params))
        })
        .await
    }

    /// A sentence embedding as the model pools it (mean unless its file says otherwise),
    /// L2-normalized. The KV cache is not touched. `cancel` (or abandoning the call) stops it
    /// with an error.
    pub async fn embed(
        &self,
        text: String,
        cancel: Option<Arc<CancelToken>>,
    ) -> Result<Vec<f32>, LlmError> {
        self.embedding(cancel, move |ctx, flag| ctx.embed(&text, Some(flag)))
            .await
    }

    /// The embeddings of `texts` (several per forward pass; special-token text is plain text),
    /// pooled and normalised as `params` say. `cancel` (or abandoning the call) stops it between passes with an error.
    pub async fn embed_many(
        &self,
        texts: Vec<String>,
        params: EmbedParams,
        cancel: Option<Arc<CancelToken>>,
    ) -> Result<Vec<Vec<f32>>, LlmError> {
        let pooling = params
            .pooling
            .as_deref()
            .map(Pooling::parse)
            .transpose()
            .map_err(|e| LlmError::from_engine(e, Stage::Embed))?;
        let options = EmbedOptions {
            pooling,
            normalize: params.normalize,
            ..EmbedOptions::default()
        };
        self.embedding(cancel, move |ctx, flag| {
            ctx.embed_many(&texts, &options, Some(flag))
        })
        .await
    }

    /// Relevance scores of `documents` for `query` (a reranker: a model with a classification
    /// head), unnormalised, in the documents' order.
    pub async fn rerank(
        &self,
        query: String,
        documents: Vec<String>,
        cancel: Option<Arc<CancelToken>>,
    ) -> Result<Vec<f32>, LlmError> {
        self.embedding(cancel, move |ctx, flag| {
            ctx.rerank(&query, &documents, Some(flag))
        })
        .await
    }

    /// Release the KV cache and worker threads; a running generation is cancelled first.
    pub fn dispose(&self) {
        self.shared.dispose();
    }

    /// Whether `dispose` was called.
    pub fn is_disposed(&self) -> bool {
        self.shared.is_disposed()
    }
}

fn run_benchmark(ctx: &mut Context, params: &BenchmarkParams) -> Result<BenchmarkResult, LlmError> {
    let start = std::time::Instant::now();
    let runs = ctx
        .benchmark(
            params.prompt_tokens as usize,
            params.generate_tokens as usize,
            params.iterations,
        )
        .map_err(|e| LlmError::from_engine(e, Stage::Benchmark))?;
    let individual: Vec<Perf> = runs.into_iter().map(Perf::from).collect();
    let n = individual.len().max(1) as f64;
    let mean = |f: fn(&Perf) -> f64| individual.iter().map(f).sum::<f64>() / n;
    Ok(BenchmarkResult {
        prompt_tokens_per_sec: mean(|p| p.prompt_tokens_per_sec),
        generated_tokens_per_sec: mean(|p| p.generated_tokens_per_sec),
        ttft_ms: mean(|p| {
            p.prompt_eval_ms + p.generation_ms / f64::from(p.generated_tokens.max(1))
        }),
        total_ms: start.elapsed().as_secs_f64() * 1e3,
        iterations: to_u32(individual.len()),
        individual,
    })
}
