//! Sessions: contexts with a KV cache, prompt processing in batches, and token-by-token
//! generation with streaming, stop strings, cancellation and timings. Loading a model with its
//! tokenizer and chat template is `loaded`'s job.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::backend::Threads;
use crate::chat::{offered_tools, parse_tool_calls, tool_call_grammar, ToolCallStream, ToolChoice};
use crate::model::{KvCache, Model, ModelConfig, Output};
use crate::{Error, Result};

mod batch;
mod decode;
mod loaded;
mod measure;
mod overflow;
mod request;
mod schedule;
mod speculative;
mod state;

pub use batch::MAX_SEQUENCES;
use decode::{Decoding, Next};
pub use loaded::{LoadOptions, LoadedModel, MemoryEstimate, ModelInfo};
pub use measure::MAX_BENCHMARK_ITERATIONS;
pub use overflow::ContextShift;
pub use schedule::{ExclusiveTurn, Job, JobSink, Scheduler};
pub use speculative::{check_same_vocabulary, SpeculativeOptions, MAX_DRAFT, MAX_LOOKUP_NGRAM};

pub use request::{FinishReason, GenerateEvent, GenerateRequest, Generation, Prompt, Timings};

/// The number of threads to use when the caller says 0: the machine's available parallelism
/// (also the most a context gets, see [`crate::backend::max_threads`]).
pub fn default_threads() -> usize {
    crate::backend::max_threads()
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
        config.context_size(self.n_ctx)
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
        let n_ctx = options.context_size(model.model().config());
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
        let kv_bytes = model.model().config().kv_cache_bytes(n_ctx);
        check_available(kv_bytes.saturating_mul(n_seq as u64), n_ctx * n_seq)?;
        Ok(Context {
            cache: model.model().new_cache(n_ctx)?,
            sequences: batch::Sequences::new(model.model(), n_ctx, n_seq)?,
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
            model: self.model.model(),
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
            logits = self.model.model().forward(
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
