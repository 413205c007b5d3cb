//! Inference contexts: generation (whole or streamed), cancellation, KV-cache control,
//! performance numbers, benchmarks and embeddings.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use local_llm_engine::model::Output;
use local_llm_engine::sampling::SamplingParams;
use local_llm_engine::session::{
    Context, ContextOptions, FinishReason as EngineFinish, GenerateRequest, Generation,
    LoadedModel, Prompt, Timings,
};
use local_llm_engine::Error as EngineError;

use crate::error::{LlmError, Stage};
use crate::stream::TokenStream;

/// One chat message.
#[derive(Debug, Clone, uniffi::Record)]
pub struct ChatMessage {
    /// "system", "user" or "assistant".
    pub role: String,
    /// The message text.
    pub content: String,
}

impl ChatMessage {
    pub(crate) fn into_engine(self) -> local_llm_engine::chat::ChatMessage {
        local_llm_engine::chat::ChatMessage::new(self.role, self.content)
    }
}

/// What to generate from.
#[derive(Debug, Clone, uniffi::Enum)]
pub enum PromptInput {
    /// Raw text (BOS added as the model asks; special-token text is parsed).
    Text {
        /// The prompt.
        text: String,
    },
    /// Chat messages rendered with the model's chat template.
    Chat {
        /// The conversation.
        messages: Vec<ChatMessage>,
    },
    /// Token ids as they are.
    Tokens {
        /// The prompt's token ids.
        tokens: Vec<u32>,
    },
}

/// A generation request. Neutral values switch a sampling stage off (`top_k` 0, `top_p` 1,
/// `min_p` 0, penalties 0 / 1); `temperature` 0 is greedy decoding.
#[derive(Debug, Clone, uniffi::Record)]
pub struct GenerateParams {
    /// The prompt.
    pub prompt: PromptInput,
    /// Most tokens to generate.
    pub max_tokens: u32,
    /// Softmax temperature (0: greedy).
    pub temperature: f32,
    /// Top-k (0: off).
    pub top_k: u32,
    /// Top-p (1: off).
    pub top_p: f32,
    /// Min-p (0: off).
    pub min_p: f32,
    /// Repetition penalty (1: off).
    pub repeat_penalty: f32,
    /// Frequency penalty (0: off).
    pub frequency_penalty: f32,
    /// Presence penalty (0: off).
    pub presence_penalty: f32,
    /// Recent tokens the penalties look at.
    pub penalty_last_n: u32,
    /// Random seed (none: from the clock).
    pub seed: Option<u64>,
    /// Stop strings (excluded from the text).
    pub stop: Vec<String>,
    /// Stop at end-of-generation tokens.
    pub stop_at_eog: bool,
}

impl GenerateParams {
    fn to_request(&self) -> GenerateRequest {
        let prompt = match &self.prompt {
            PromptInput::Text { text } => Prompt::Text(text.clone()),
            PromptInput::Chat { messages } => Prompt::Chat(
                messages
                    .iter()
                    .cloned()
                    .map(ChatMessage::into_engine)
                    .collect(),
            ),
            PromptInput::Tokens { tokens } => Prompt::Tokens(tokens.clone()),
        };
        GenerateRequest {
            prompt,
            sampling: SamplingParams {
                temperature: self.temperature,
                top_k: self.top_k as usize,
                top_p: self.top_p,
                min_p: self.min_p,
                repeat_penalty: self.repeat_penalty,
                frequency_penalty: self.frequency_penalty,
                presence_penalty: self.presence_penalty,
                penalty_last_n: self.penalty_last_n as usize,
                seed: self.seed,
            },
            max_tokens: self.max_tokens as usize,
            stop: self.stop.clone(),
            stop_at_eog: self.stop_at_eog,
        }
    }
}

/// Why a generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum FinishReason {
    /// An end-of-generation token.
    EndOfGeneration,
    /// A stop string matched.
    StopString,
    /// `max_tokens` reached.
    MaxTokens,
    /// The context window is full.
    ContextFull,
    /// Cancelled by the caller (abort, `break`, dispose).
    Cancelled,
}

impl From<EngineFinish> for FinishReason {
    fn from(f: EngineFinish) -> Self {
        match f {
            EngineFinish::EndOfGeneration => FinishReason::EndOfGeneration,
            EngineFinish::StopString => FinishReason::StopString,
            EngineFinish::MaxTokens => FinishReason::MaxTokens,
            EngineFinish::ContextFull => FinishReason::ContextFull,
            EngineFinish::Cancelled => FinishReason::Cancelled,
        }
    }
}

/// Performance of one generation (local-llm-rn's `InferenceMetrics`).
#[derive(Debug, Clone, Copy, uniffi::Record)]
pub struct Perf {
    /// Milliseconds spent on the prompt.
    pub prompt_eval_ms: f64,
    /// Milliseconds spent generating.
    pub generation_ms: f64,
    /// Prompt tokens evaluated (tokens reused from the KV cache excluded).
    pub prompt_tokens: u32,
    /// Tokens generated.
    pub generated_tokens: u32,
    /// Prompt tokens per second.
    pub prompt_tokens_per_sec: f64,
    /// Generated tokens per second.
    pub generated_tokens_per_sec: f64,
}

impl From<Timings> for Perf {
    fn from(t: Timings) -> Self {
        Perf {
            prompt_eval_ms: t.prompt_ms,
            generation_ms: t.generation_ms,
            prompt_tokens: to_u32(t.prompt_tokens),
            generated_tokens: to_u32(t.generated_tokens),
            prompt_tokens_per_sec: t.prompt_tokens_per_second(),
            generated_tokens_per_sec: t.generation_tokens_per_second(),
        }
    }
}

/// The result of a generation.
#[derive(Debug, Clone, uniffi::Record)]
pub struct GenerationResult {
    /// Generated text (stop string excluded).
    pub text: String,
    /// Generated token ids.
    pub tokens: Vec<u32>,
    /// Tokens in the prompt.
    pub prompt_tokens: u32,
    /// Tokens generated.
    pub completion_tokens: u32,
    /// Why generation ended.
    pub finish_reason: FinishReason,
    /// Timings.
    pub perf: Perf,
}

impl From<Generation> for GenerationResult {
    fn from(g: Generation) -> Self {
        GenerationResult {
            completion_tokens: to_u32(g.tokens.len()),
            text: g.text,
            tokens: g.tokens,
            prompt_tokens: to_u32(g.prompt_tokens),
            finish_reason: g.finish_reason.into(),
            perf: g.timings.into(),
        }
    }
}

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

pub(crate) fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// A cancellation flag JavaScript can set while an async call runs (the TypeScript layer
/// connects it to an `AbortSignal`).
#[derive(Debug, Default, uniffi::Object)]
pub struct CancelToken {
    flag: Arc<AtomicBool>,
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

/// State shared by a context object and its workers.
pub(crate) struct Shared {
    /// The engine context; locked only by workers, so generations run one at a time.
    engine: Mutex<Option<Context>>,
    disposed: AtomicBool,
    perf: Mutex<Option<Perf>>,
    active: Mutex<Vec<Weak<AtomicBool>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    /// Register a cancellation flag so that `dispose` can stop the generation.
    fn track(&self, flag: &Arc<AtomicBool>) {
        let mut active = lock(&self.active);
        active.retain(|w| w.strong_count() > 0);
        active.push(Arc::downgrade(flag));
    }

    /// Run `work` with the engine context (waiting for other generations to finish).
    fn with_engine<T>(
        &self,
        work: impl FnOnce(&mut Context) -> Result<T, LlmError>,
    ) -> Result<T, LlmError> {
        if self.disposed.load(Ordering::Relaxed) {
            return Err(LlmError::disposed("context"));
        }
        let mut slot = lock(&self.engine);
        let result = match slot.as_mut() {
            Some(ctx) => work(ctx),
            None => Err(LlmError::disposed("context")),
        };
        if self.disposed.load(Ordering::Relaxed) {
            slot.take();
        }
        result
    }

    /// Generate with `params`, passing text pieces to `on_text`; a cancelled generation is a
    /// result with finish reason `Cancelled`.
    pub(crate) fn generate(
        &self,
        params: &GenerateParams,
        cancel: &Arc<AtomicBool>,
        on_text: &mut dyn FnMut(&str),
        stage: Stage,
    ) -> Result<GenerationResult, LlmError> {
        self.track(cancel);
        let request = params.to_request();
        let result =
            self.with_engine(
                |ctx| match ctx.generate(&request, on_text, Some(cancel.as_ref())) {
                    Ok(g) => Ok(GenerationResult::from(g)),
                    Err(EngineError::Cancelled) => Ok(GenerationResult {
                        text: String::new(),
                        tokens: Vec::new(),
                        prompt_tokens: 0,
                        completion_tokens: 0,
                        finish_reason: FinishReason::Cancelled,
                        perf: Timings::default().into(),
                    }),
                    Err(e) => Err(LlmError::from_engine(e, stage)),
                },
            )?;
        *lock(&self.perf) = Some(result.perf);
        Ok(result)
    }
}

/// An inference context: a KV cache and worker threads for one model.
#[derive(uniffi::Object)]
pub struct LlmContext {
    shared: Arc<Shared>,
    n_ctx: u32,
}

impl LlmContext {
    pub(crate) fn new(
        model: Arc<LoadedModel>,
        options: &ContextOptions,
    ) -> Result<Arc<Self>, LlmError> {
        let ctx = Context::new(model, options)
            .map_err(|e| LlmError::from_engine(e, Stage::CreateContext))?;
        Ok(Arc::new(LlmContext {
            n_ctx: to_u32(ctx.n_ctx()),
            shared: Arc::new(Shared {
                engine: Mutex::new(Some(ctx)),
                disposed: AtomicBool::new(false),
                perf: Mutex::new(None),
                active: Mutex::new(Vec::new()),
            }),
        }))
    }

    fn check(&self) -> Result<Arc<Shared>, LlmError> {
        if self.shared.disposed.load(Ordering::Relaxed) {
            return Err(LlmError::disposed("context"));
        }
        Ok(self.shared.clone())
    }
}

#[uniffi::export]
impl LlmContext {
    /// Context size in tokens.
    pub fn context_size(&self) -> u32 {
        self.n_ctx
    }

    /// Generate the whole answer on a worker thread. `cancel` (or abandoning the call) stops
    /// decoding between tokens; the result then has finish reason `Cancelled`.
    pub async fn generate(
        &self,
        params: GenerateParams,
        cancel: Option<Arc<CancelToken>>,
    ) -> Result<GenerationResult, LlmError> {
        let shared = self.check()?;
        let flag = cancel.map_or_else(Default::default, |c| c.flag.clone());
        let mut guard = CancelOnDrop(Some(flag.clone()));
        let result = crate::run_blocking(Stage::Generate, move || {
            shared.generate(&params, &flag, &mut |_| {}, Stage::Generate)
        })
        .await;
        guard.0 = None;
        result
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
        crate::run_blocking(Stage::Generate, move || {
            shared.with_engine(|ctx| {
                ctx.clear();
                Ok(())
            })
        })
        .await
    }

    /// Numbers of the last generation, if any.
    pub fn get_perf(&self) -> Option<Perf> {
        *lock(&self.shared.perf)
    }

    /// Evaluate one token and clear the cache, so the first real request runs at full speed.
    pub async fn warmup(&self) -> Result<(), LlmError> {
        let shared = self.check()?;
        crate::run_blocking(Stage::Generate, move || {
            shared.with_engine(|ctx| {
                let token = ctx.model().tokenizer().bos().unwrap_or(0);
                let result = ctx.eval(&[token], Output::LastLogits, &mut |_, _| {}, None);
                ctx.clear();
                result
                    .map(|_| ())
                    .map_err(|e| LlmError::from_engine(e, Stage::Generate))
            })
        })
        .await
    }

    /// Measure prompt and generation speed (greedy decoding of a synthetic prompt, cache
    /// cleared before and after each iteration).
    pub async fn benchmark(&self, params: BenchmarkParams) -> Result<BenchmarkResult, LlmError> {
        let shared = self.check()?;
        crate::run_blocking(Stage::Generate, move || {
            shared.with_engine(|ctx| run_benchmark(ctx, &params))
        })
        .await
    }

    /// A sentence embedding: the mean of the last hidden states of `text`'s tokens,
    /// L2-normalized. Clears the KV cache.
    pub async fn embed(&self, text: String) -> Result<Vec<f32>, LlmError> {
        let shared = self.check()?;
        crate::run_blocking(Stage::Embed, move || {
            shared.with_engine(|ctx| embed(ctx, &text))
        })
        .await
    }

    /// Release the KV cache and worker threads; a running generation is cancelled first.
    pub fn dispose(&self) {
        self.shared.disposed.store(true, Ordering::Relaxed);
        for flag in lock(&self.shared.active).drain(..) {
            if let Some(flag) = flag.upgrade() {
                flag.store(true, Ordering::Relaxed);
            }
        }
        // If a worker holds the engine it drops the context itself when it finishes.
        if let Ok(mut slot) = self.shared.engine.try_lock() {
            slot.take();
        }
    }

    /// Whether `dispose` was called.
    pub fn is_disposed(&self) -> bool {
        self.shared.disposed.load(Ordering::Relaxed)
    }
}

fn run_benchmark(ctx: &mut Context, params: &BenchmarkParams) -> Result<BenchmarkResult, LlmError> {
    let n_prompt = params.prompt_tokens.max(1) as usize;
    let n_gen = params.generate_tokens.max(1) as usize;
    let iterations = params.iterations.clamp(1, 100);
    if n_prompt + n_gen > ctx.n_ctx() {
        return Err(LlmError::ContextExhausted {
            message: format!(
                "benchmark needs {} tokens but the context holds {}",
                n_prompt + n_gen,
                ctx.n_ctx()
            ),
        });
    }
    let model = ctx.model().clone();
    let filler = model
        .tokenize(
            "The quick brown fox jumps over the lazy dog. ",
            false,
            false,
        )
        .map_err(|e| LlmError::from_engine(e, Stage::Generate))?;
    let mut prompt: Vec<u32> = model.tokenizer().bos().into_iter().collect();
    while prompt.len() < n_prompt && !filler.is_empty() {
        prompt.extend(filler.iter().take(n_prompt - prompt.len()));
    }
    let mut request = GenerateRequest::new(Prompt::Tokens(prompt));
    request.sampling = SamplingParams::greedy();
    request.max_tokens = n_gen;
    request.stop_at_eog = false;
    let mut individual = Vec::new();
    let start = std::time::Instant::now();
    for _ in 0..iterations {
        ctx.clear();
        let g = ctx
            .generate(&request, &mut |_| {}, None)
            .map_err(|e| LlmError::from_engine(e, Stage::Generate))?;
        individual.push(Perf::from(g.timings));
    }
    ctx.clear();
    let n = individual.len().max(1) as f64;
    let mean = |f: fn(&Perf) -> f64| individual.iter().map(f).sum::<f64>() / n;
    Ok(BenchmarkResult {
        prompt_tokens_per_sec: mean(|p| p.prompt_tokens_per_sec),
        generated_tokens_per_sec: mean(|p| p.generated_tokens_per_sec),
        ttft_ms: mean(|p| {
            p.prompt_eval_ms + p.generation_ms / f64::from(p.generated_tokens.max(1))
        }),
        total_ms: start.elapsed().as_secs_f64() * 1e3,
        iterations,
        individual,
    })
}

fn embed(ctx: &mut Context, text: &str) -> Result<Vec<f32>, LlmError> {
    let model = ctx.model().clone();
    let tokens = model
        .tokenize(text, true, false)
        .map_err(|e| LlmError::from_engine(e, Stage::Embed))?;
    ctx.clear();
    let hidden = ctx.eval(&tokens, Output::Hidden, &mut |_, _| {}, None);
    ctx.clear();
    let hidden = hidden.map_err(|e| LlmError::from_engine(e, Stage::Embed))?;
    let n_embd = model.model().config().n_embd;
    if n_embd == 0 || hidden.len() != tokens.len() * n_embd {
        return Err(LlmError::EmbeddingFailed {
            message: format!(
                "unexpected hidden state size {} for {} tokens",
                hidden.len(),
                tokens.len()
            ),
        });
    }
    let mut mean = vec![0f32; n_embd];
    for row in hidden.chunks_exact(n_embd) {
        for (m, v) in mean.iter_mut().zip(row) {
            *m += v;
        }
    }
    let norm = mean.iter().map(|v| v * v).sum::<f32>().sqrt();
    if norm > 0.0 {
        mean.iter_mut().for_each(|v| *v /= norm);
    }
    Ok(mean)
}
