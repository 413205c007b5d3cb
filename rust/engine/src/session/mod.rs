//! Sessions: loading a model with its tokenizer and chat template, contexts with a KV cache,
//! prompt processing in batches, and token-by-token generation with streaming, stop strings,
//! cancellation and timings.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use crate::backend::{Registry, Threads};
use crate::chat::{
    offered_tools, parse_tool_calls, tool_call_grammar, validate_tools, ChatMessage, ChatTemplate,
    Tool, ToolCallStream, ToolChoice,
};
use crate::gguf::GgufFile;
use crate::grammar::TokenTable;
use crate::model::{KvCache, Model, ModelConfig, Output};
use crate::tokenizer::Tokenizer;
use crate::{Error, Result};

mod batch;
mod decode;
mod overflow;
mod request;
mod schedule;
mod speculative;
mod state;

use decode::{Decoding, Next};
pub use overflow::ContextShift;
pub use schedule::{ExclusiveTurn, Job, JobSink, Scheduler};
pub use speculative::{check_same_vocabulary, SpeculativeOptions, MAX_DRAFT, MAX_LOOKUP_NGRAM};

pub use request::{FinishReason, GenerateEvent, GenerateRequest, Generation, Prompt, Timings};

/// The number of threads to use when the caller says 0: the machine's available parallelism
/// (also the most a context gets, see [`crate::backend::max_threads`]).
pub fn default_threads() -> usize {
    crate::backend::max_threads()
}

/// The fields of [`LoadOptions`] with their documentation and defaults, written once (see
/// [`crate::sampling_params_table`] for how the engine and the FFI use such a table).
#[macro_export]
macro_rules! load_options_table {
    ($emit:ident) => {
        $emit! {
            /// How to load a model.
            struct LoadOptions {
                /// Memory-map the file instead of reading it into memory.
                use_mmap: bool = true,
                /// Place every weight on the CPU, even where an accelerator is detected.
                cpu_only: bool = false,
            }
        }
    };
}

load_options_table!(options_struct);

impl LoadOptions {
    /// The devices these options load onto: the CPU alone, or every detected device.
    pub fn registry(&self) -> Registry {
        if self.cpu_only {
            Registry::with_accelerators(Vec::new())
        } else {
            Registry::detect()
        }
    }
}

/// A model ready for inference: weights, tokenizer and chat template. Shared by contexts.
pub struct LoadedModel {
    path: PathBuf,
    gguf: Arc<GgufFile>,
    model: Model,
    tokenizer: Tokenizer,
    template: ChatTemplate,
    template_is_builtin: bool,
    load_ms: f64,
    /// Every token's bytes for grammar-constrained sampling, built on first use.
    token_table: OnceLock<Arc<TokenTable>>,
}

/// Facts about a loaded model.
#[derive(Clone, Debug)]
pub struct ModelInfo {
    /// Hyper-parameters.
    pub config: ModelConfig,
    /// File size in bytes.
    pub file_size: u64,
    /// Number of parameters (elements of all tensors).
    pub n_params: u64,
    /// Bytes of tensor data (the weights).
    pub weights_bytes: u64,
    /// Whether the file has its own chat template (otherwise a built-in one is used).
    pub has_chat_template: bool,
    /// Time taken to load, in milliseconds.
    pub load_ms: f64,
    /// Weight matrices per device.
    pub placement: Vec<(String, usize)>,
}

/// Memory a model needs for one context: its weights plus the f16 KV cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryEstimate {
    /// Bytes of weights (tensor data).
    pub weights_bytes: u64,
    /// Bytes of the KV cache for `context_size` tokens.
    pub kv_cache_bytes: u64,
    /// The context size of the estimate.
    pub context_size: u32,
    /// `weights_bytes + kv_cache_bytes`.
    pub total_bytes: u64,
}

/// Bytes of tensor data in `gguf`.
fn weights_bytes(gguf: &GgufFile) -> u64 {
    gguf.tensors().iter().map(|t| t.n_bytes).sum()
}

impl MemoryEstimate {
    /// The estimate for the model in `gguf` read from its metadata and tensor table (no
    /// weight is loaded), for a context of `n_ctx` tokens (0: the model's default).
    pub fn for_file(gguf: &GgufFile, n_ctx: u32) -> Result<Self> {
        Ok(Self::new(&ModelConfig::from_gguf(gguf)?, gguf, n_ctx))
    }

    fn new(config: &ModelConfig, gguf: &GgufFile, n_ctx: u32) -> Self {
        let options = ContextOptions {
            n_ctx,
            ..ContextOptions::default()
        };
        let context_size = options.context_size(config);
        let weights_bytes = weights_bytes(gguf);
        let kv_cache_bytes = config.kv_cache_bytes(context_size);
        MemoryEstimate {
            weights_bytes,
            kv_cache_bytes,
            context_size: u32::try_from(context_size).unwrap_or(u32::MAX),
            total_bytes: weights_bytes.saturating_add(kv_cache_bytes),
        }
    }
}

impl LoadedModel {
    /// Load a GGUF model from `path` onto the devices `options` select.
    pub fn load(path: impl AsRef<Path>, options: &LoadOptions) -> Result<Arc<Self>> {
        Self::load_on(path, options, &options.registry())
    }

    /// Load a GGUF model from `path` onto the devices of `registry` (`options.cpu_only` is
    /// not consulted: the registry decides).
    pub fn load_on(
        path: impl AsRef<Path>,
        options: &LoadOptions,
        registry: &Registry,
    ) -> Result<Arc<Self>> {
        let start = Instant::now();
        let path = path.as_ref();
        let gguf = Arc::new(GgufFile::open_with(path, options.use_mmap)?);
        let model = Model::from_gguf(&gguf, registry)?;
        let tokenizer = Tokenizer::from_gguf(&gguf)?;
        let text = |id: Option<u32>| {
            id.and_then(|i| tokenizer.token_text(i))
                .unwrap_or("")
                .to_string()
        };
        let (bos, eos) = (text(tokenizer.bos()), text(tokenizer.eos()));
        let (source, builtin) = match gguf.get_str("tokenizer.chat_template") {
            Some(s) => (s.to_string(), false),
            None => (
                ChatTemplate::builtin_source(&model.config().architecture).to_string(),
                true,
            ),
        };
        let template = ChatTemplate::new(&source, &bos, &eos)?;
        Ok(Arc::new(LoadedModel {
            path: path.to_path_buf(),
            gguf,
            model,
            tokenizer,
            template,
            template_is_builtin: builtin,
            load_ms: start.elapsed().as_secs_f64() * 1e3,
            token_table: OnceLock::new(),
        }))
    }

    /// The file this model came from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The parsed GGUF file (metadata and tensor table).
    pub fn gguf(&self) -> &GgufFile {
        &self.gguf
    }

    /// The network.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// Every token's output bytes (built once, on the first grammar-constrained generation).
    pub fn token_table(&self) -> Arc<TokenTable> {
        self.token_table
            .get_or_init(|| Arc::new(TokenTable::new(&self.tokenizer)))
            .clone()
    }

    /// The chat template in use (the file's, or a built-in one for its architecture).
    pub fn chat_template(&self) -> &ChatTemplate {
        &self.template
    }

    /// Facts about the model.
    pub fn info(&self) -> ModelInfo {
        ModelInfo {
            config: self.model.config().clone(),
            file_size: self.gguf.file_size(),
            n_params: self.gguf.tensors().iter().map(|t| t.n_elements()).sum(),
            weights_bytes: weights_bytes(&self.gguf),
            has_chat_template: !self.template_is_builtin,
            load_ms: self.load_ms,
            placement: self.model.placement().into_iter().collect(),
        }
    }

    /// Memory this model needs with a context of `n_ctx` tokens (0: the model's default).
    pub fn estimate_memory(&self, n_ctx: u32) -> MemoryEstimate {
        MemoryEstimate::new(self.model.config(), &self.gguf, n_ctx)
    }

    /// Tokenize `text`; `add_special` adds BOS/EOS as the model asks, `parse_special` turns
    /// special-token text into those tokens.
    pub fn tokenize(&self, text: &str, add_special: bool, parse_special: bool) -> Result<Vec<u32>> {
        self.tokenizer.encode(text, add_special, parse_special)
    }

    /// Text of `tokens` (control tokens rendered only when `special`).
    pub fn detokenize(&self, tokens: &[u32], special: bool) -> String {
        self.tokenizer.decode(tokens, special)
    }

    /// Render `messages` with the chat template.
    pub fn apply_chat_template(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String> {
        self.template.render(messages, add_generation_prompt)
    }

    /// Tokens of a chat prompt (generation prompt added): template text may contain special
    /// tokens, message contents never become control tokens; see [`ChatTemplate::tokens`].
    pub fn chat_tokens(&self, messages: &[ChatMessage]) -> Result<Vec<u32>> {
        self.template.tokens(&self.tokenizer, messages, true)
    }

    /// Tokens of a chat prompt offering the tools `choice` selects from `tools` (see
    /// [`ChatTemplate::tokens_with_tools`]).
    pub fn chat_tokens_with_tools(
        &self,
        messages: &[ChatMessage],
        tools: &[Tool],
        choice: &ToolChoice,
    ) -> Result<Vec<u32>> {
        validate_tools(tools, choice)?;
        let offered = offered_tools(tools, choice);
        self.template
            .tokens_with_tools(&self.tokenizer, messages, offered, choice, true)
    }
}

/// The fields of [`ContextOptions`] with their documentation and defaults, written once (see
/// [`crate::sampling_params_table`] for how the engine and the FFI use such a table).
#[macro_export]
macro_rules! context_options_table {
    ($emit:ident) => {
        $emit! {
            /// How to create a context.
            struct ContextOptions {
                /// Context size in tokens; 0 = the model's default
                /// ([`ModelConfig::default_context_size`]).
                n_ctx: u32 = 0,
                /// Prompt tokens processed per forward pass (at least 1).
                n_batch: u32 = 512,
                /// Worker threads; 0 = all available cores.
                threads: u32 = 0,
                /// Sequences the context can generate at once (at least 1), each with its own
                /// KV cache of `n_ctx` positions (memory grows with it); see
                /// [`Context::generate_batch`].
                max_sequences: u32 = 1,
            }
        }
    };
}

context_options_table!(options_struct);

impl ContextOptions {
    /// The context size these options give for `config`: `n_ctx`, or the model's default
    /// when it is 0.
    pub fn context_size(&self, config: &ModelConfig) -> usize {
        match self.n_ctx {
            0 => config.default_context_size(),
            n => n as usize,
        }
    }
}

/// [`Error::InsufficientMemory`] when the host reports less available memory than the
/// `kv_bytes` a KV cache of `n_ctx` positions needs (filling it would get the process killed).
fn check_available(kv_bytes: u64, n_ctx: usize) -> Result<()> {
    match crate::backend::HostMemory::read().available_bytes {
        Some(available) if kv_bytes > available => Err(Error::InsufficientMemory(format!(
            "the KV cache for {n_ctx} positions needs {kv_bytes} bytes but only {available} \
             bytes of memory are available"
        ))),
        _ => Ok(()),
    }
}

/// An inference context: a KV cache, worker threads and the tokens the cache holds, plus
/// the other sequences of a context created with `max_sequences` above 1 (see
/// [`Context::generate_batch`]).
pub struct Context {
    model: Arc<LoadedModel>,
    cache: KvCache,
    threads: Threads,
    n_batch: usize,
    cached: Vec<u32>,
    /// How many of the cached positions a prompt may reuse (fewer than cached after a
    /// context shift: the moved ones were computed with dropped tokens in view).
    reusable: usize,
    sequences: batch::Sequences,
    /// Speculative decoding (see [`Context::set_speculative`]); none: plain decoding.
    speculation: Option<speculative::Speculation>,
}

/// One sequence's cache and the tokens it holds.
struct SeqState<'a> {
    cache: &'a mut KvCache,
    cached: &'a mut Vec<u32>,
}

/// What evaluating tokens on a sequence needs from its context.
struct Runner<'a> {
    model: &'a Model,
    threads: &'a Threads,
    n_batch: usize,
}

impl Runner<'_> {
    /// [`Context::eval`] on sequence `seq`.
    fn eval(
        &self,
        seq: SeqState<'_>,
        tokens: &[u32],
        output: Output,
        progress: &mut dyn FnMut(usize, usize),
        cancel: Option<&AtomicBool>,
    ) -> Result<Vec<f32>> {
        if tokens.is_empty() {
            return Err(Error::InvalidOption("nothing to evaluate".into()));
        }
        let needed = seq.cache.len() + tokens.len();
        if needed > seq.cache.capacity() {
            return Err(Error::ContextExhausted {
                needed,
                capacity: seq.cache.capacity(),
            });
        }
        let mut result = Vec::new();
        let mut done = 0;
        for batch in tokens.chunks(self.n_batch) {
            if cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
                return Err(Error::Cancelled);
            }
            let out = self.model.forward(batch, seq.cache, self.threads, output)?;
            seq.cached.extend_from_slice(batch);
            match output {
                Output::LastLogits => result = out,
                Output::AllLogits | Output::Hidden => {
                    crate::fallible::reserve(&mut result, out.len(), "the output rows")?;
                    result.extend(out);
                }
            }
            done += batch.len();
            progress(done, tokens.len());
        }
        Ok(result)
    }
}

impl Context {
    /// A context for `model`.
    pub fn new(model: Arc<LoadedModel>, options: &ContextOptions) -> Result<Self> {
        let n_ctx = options.context_size(model.model.config());
        if n_ctx > 1 << 20 {
            return Err(Error::InvalidOption(format!(
                "context size {n_ctx} is too large"
            )));
        }
        if options.n_batch == 0 {
            return Err(Error::InvalidOption("batch size must be at least 1".into()));
        }
        let threads = match options.threads {
            0 => default_threads(),
            n => n as usize,
        };
        if threads > 1024 {
            return Err(Error::InvalidOption(format!(
                "{threads} threads is too many"
            )));
        }
        let n_seq = batch::Sequences::count(options)?;
        let kv_bytes = model.model.config().kv_cache_bytes(n_ctx);
        check_available(kv_bytes.saturating_mul(n_seq as u64), n_ctx * n_seq)?;
        Ok(Context {
            cache: model.model.new_cache(n_ctx)?,
            sequences: batch::Sequences::new(&model.model, n_ctx, n_seq)?,
            threads: Threads::new(threads)?,
            n_batch: options.n_batch as usize,
            cached: Vec::new(),
            reusable: usize::MAX,
            speculation: None,
            model,
        })
    }

    /// The model this context runs.
    pub fn model(&self) -> &Arc<LoadedModel> {
        &self.model
    }

    /// Context size in tokens.
    pub fn n_ctx(&self) -> usize {
        self.cache.capacity()
    }

    /// Worker threads.
    pub fn threads(&self) -> usize {
        self.threads.count()
    }

    /// Empty the KV cache (of every sequence; batched generations still running are
    /// dropped).
    pub fn clear(&mut self) {
        self.cache.truncate(0);
        self.cached.clear();
        self.reusable = usize::MAX;
        self.sequences.clear();
    }

    /// Tokens for a prompt.
    pub fn prompt_tokens(&self, prompt: &Prompt) -> Result<Vec<u32>> {
        match prompt {
            Prompt::Text(text) => self.model.tokenize(text, true, true),
            Prompt::Chat(messages) => self.model.chat_tokens(messages),
            Prompt::Tokens(t) => Ok(t.clone()),
        }
    }

    /// Tokens for a request's prompt, offering its tools.
    fn request_tokens(&self, request: &GenerateRequest) -> Result<Vec<u32>> {
        match &request.prompt {
            Prompt::Chat(messages) if !request.tools.is_empty() => self
                .model
                .chat_tokens_with_tools(messages, &request.tools, &request.tool_choice),
            prompt => self.prompt_tokens(prompt),
        }
    }

    /// Evaluate `tokens` after the cached ones in batches, calling `progress(done, total)`
    /// after each batch, and return what `output` asks for from the last batch (for
    /// [`Output::AllLogits`] / [`Output::Hidden`]: every token of every batch). Not while
    /// batched sequences run ([`Error::InvalidOption`]).
    pub fn eval(
        &mut self,
        tokens: &[u32],
        output: Output,
        progress: &mut dyn FnMut(usize, usize),
        cancel: Option<&AtomicBool>,
    ) -> Result<Vec<f32>> {
        self.sequences.check_idle()?;
        let seq = SeqState {
            cache: &mut self.cache,
            cached: &mut self.cached,
        };
        let run = Runner {
            model: &self.model.model,
            threads: &self.threads,
            n_batch: self.n_batch,
        };
        run.eval(seq, tokens, output, progress, cancel)
    }

    /// Generate from `request`, calling `on_text` with each new piece of text (never a partial
    /// UTF-8 character, never text that may still turn out to be a stop string). Generation
    /// stops when `cancel` becomes true (checked between tokens).
    ///
    /// With tools (and a choice other than none), text that may be a tool call is held back
    /// from `on_text` (see [`ToolCallStream`]); calls found in the output are returned in
    /// [`Generation::tool_calls`] with finish reason [`FinishReason::ToolCalls`], and the held
    /// text is passed on when it holds none. Under [`ToolChoice::Required`] or a named choice,
    /// output without a call is an [`Error::ToolCall`].
    pub fn generate(
        &mut self,
        request: &GenerateRequest,
        on_text: &mut dyn FnMut(&str),
        cancel: Option<&AtomicBool>,
    ) -> Result<Generation> {
        let mut on_event = |event: GenerateEvent| {
            if let GenerateEvent::Text(t) = event {
                on_text(t);
            }
        };
        self.generate_events(request, &mut on_event, cancel)
    }

    /// [`Context::generate`], also reporting log-probabilities as they are computed.
    pub fn generate_events(
        &mut self,
        request: &GenerateRequest,
        on_event: &mut dyn FnMut(GenerateEvent),
        cancel: Option<&AtomicBool>,
    ) -> Result<Generation> {
        request.validate()?;
        if !request.parses_tools() {
            return self.generate_raw(request, on_event, cancel);
        }
        // Constrain the call (all of the output under `required`/named, from `<tool_call>` on
        // under `auto` where calls are such blocks) unless the caller brought a grammar.
        let constrained;
        let blocks = self.model.chat_template().writes_tool_call_blocks();
        let request = match &request.grammar {
            None => match tool_call_grammar(&request.tools, &request.tool_choice, blocks)? {
                Some(grammar) => {
                    constrained = GenerateRequest {
                        grammar: Some(grammar),
                        ..request.clone()
                    };
                    &constrained
                }
                None => request,
            },
            Some(_) => request,
        };
        let mut filter = ToolCallStream::new();
        let mut filtered = |event: GenerateEvent| match event {
            GenerateEvent::Text(t) => {
                let safe = filter.push(t);
                if !safe.is_empty() {
                    on_event(GenerateEvent::Text(&safe));
                }
            }
            other => on_event(other),
        };
        let mut generation = self.generate_raw(request, &mut filtered, cancel)?;
        let offered = offered_tools(&request.tools, &request.tool_choice);
        let parsed = parse_tool_calls(&generation.text, offered);
        if parsed.calls.is_empty() {
            let rest = filter.flush();
            if !rest.is_empty() {
                on_event(GenerateEvent::Text(&rest));
            }
            let forced = matches!(
                request.tool_choice,
                ToolChoice::Required | ToolChoice::Function { .. }
            );
            if forced && generation.finish_reason != FinishReason::Cancelled {
                return Err(Error::ToolCall(format!(
                    "tool_choice requires a tool call but the model answered with text: {:?}",
                    generation.text.chars().take(200).collect::<String>()
                )));
            }
            return Ok(generation);
        }
        generation.text = parsed.content.unwrap_or_default();
        generation.tool_calls = parsed.calls;
        if generation.finish_reason != FinishReason::Cancelled {
            generation.finish_reason = FinishReason::ToolCalls;
        }
        Ok(generation)
    }

    fn generate_raw(
        &mut self,
        request: &GenerateRequest,
        on_event: &mut dyn FnMut(GenerateEvent),
        cancel: Option<&AtomicBool>,
    ) -> Result<Generation> {
        self.sequences.check_idle()?;
        let prompt = self.request_tokens(request)?;
        check_prompt(&prompt, self.cache.capacity())?;
        // A handle of its own: a context shift borrows the context mutably while decoding.
        let model = self.model.clone();
        let mut decoding = Decoding::new(&model, request)?;
        // Reuse the longest cached prefix, keeping at least one token to evaluate.
        let common = common_prefix(&self.cached, &prompt).min(self.reusable);
        self.cache.truncate(common);
        self.cached.truncate(common);
        self.reusable = usize::MAX;

        let start = Instant::now();
        let evaluated = self.eval(
            &prompt[common..],
            Output::LastLogits,
            &mut |_, _| {},
            cancel,
        );
        let evaluated = evaluated.and_then(|l| self.prefill_draft(&prompt, cancel).map(|()| l));
        let mut timings = Timings {
            prompt_tokens: prompt.len() - common,
            prompt_ms: start.elapsed().as_secs_f64() * 1e3,
            ..Timings::default()
        };
        let mut logits = match evaluated {
            Ok(logits) => logits,
            // Cancelled during the prompt: the same shape as a cancel while decoding, with the
            // prompt tokens that were evaluated (each finished batch extends `cached`).
            Err(Error::Cancelled) => {
                timings.prompt_tokens = self.cached.len().saturating_sub(common);
                return Ok(decoding.finish(
                    FinishReason::Cancelled,
                    prompt.len(),
                    timings,
                    on_event,
                ));
            }
            Err(e) => return Err(e),
        };
        decoding.start_clock();
        if let Some(mut spec) = self.speculation.take() {
            let mut stats = speculative::DraftStats::default();
            let result = self.decode_speculative(
                &mut spec,
                &mut decoding,
                &logits,
                request,
                prompt.len(),
                on_event,
                cancel,
                &mut stats,
            );
            self.speculation = Some(spec);
            timings.draft_tokens = stats.drafted;
            timings.draft_accepted = stats.accepted;
            return Ok(decoding.finish(result?, prompt.len(), timings, on_event));
        }
        let finish_reason = loop {
            let cancelled = cancel.is_some_and(|c| c.load(Ordering::Relaxed));
            let token = match decoding.step(&logits, &self.cached, cancelled, on_event) {
                Next::Token(t) => t,
                Next::Done(reason) => break reason,
            };
            if self.cache.len() >= self.cache.capacity() {
                let shifted = match &request.context_shift {
                    Some(shift) => self.shift(shift, prompt.len())?,
                    None => false,
                };
                if !shifted {
                    break FinishReason::ContextFull;
                }
            }
            logits = self.model.model.forward(
                &[token],
                &mut self.cache,
                &self.threads,
                Output::LastLogits,
            )?;
            self.cached.push(token);
        };
        Ok(decoding.finish(finish_reason, prompt.len(), timings, on_event))
    }
}

/// [`Error::InvalidOption`] for an empty prompt, [`Error::ContextExhausted`] for one longer
/// than a sequence holds.
fn check_prompt(prompt: &[u32], capacity: usize) -> Result<()> {
    if prompt.is_empty() {
        return Err(Error::InvalidOption("the prompt is empty".into()));
    }
    if prompt.len() > capacity {
        return Err(Error::ContextExhausted {
            needed: prompt.len(),
            capacity,
        });
    }
    Ok(())
}

/// How many leading tokens of `prompt` a cache holding `cached` can keep: the common prefix,
/// leaving at least one prompt token to evaluate (its logits start the generation).
fn common_prefix(cached: &[u32], prompt: &[u32]) -> usize {
    cached
        .iter()
        .zip(prompt)
        .take_while(|(a, b)| a == b)
        .count()
        .min(prompt.len().saturating_sub(1))
}
