//! Sessions: contexts with a KV cache, prompt processing in batches, and token-by-token
//! generation with streaming, stop strings, cancellation and timings. Loading a model with its
//! tokenizer and chat template is `loaded`'s job.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::backend::Threads;
use crate::model::{ActiveLora, KvCache, KvTypes, Model, ModelConfig, Output, SeqTokens};
use crate::{Error, Result};

mod batch;
mod decode;
mod embed;
mod fit;
mod infill;
mod inspect;
mod loaded;
mod measure;
mod overflow;
mod request;
mod schedule;
mod speculative;
mod state;
mod step;

pub use batch::MAX_SEQUENCES;
pub use embed::{rerank_text, EmbedOptions};
pub use fit::{ChatFit, ChatTrim};
pub use infill::{Infill, InfillChunk};
pub use inspect::{
    describe, file_type_name, inspect, metadata_strings, ModelFileInfo, TensorTypeCount,
};
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

/// The values [`ContextOptions::flash_attn`] accepts: local-llm-rn's and llama.cpp's names.
pub const FLASH_ATTENTION_MODES: [&str; 5] = ["auto", "enabled", "disabled", "on", "off"];

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
                /// Element type of the cached keys, as llama.cpp's `--cache-type-k`: "f16",
                /// "f32", "bf16", "q8_0" (about half of f16's memory), "q4_0", "q4_1", "q5_0",
                /// "q5_1" or "iq4_nl".
                cache_type_k: String = "f16",
                /// Element type of the cached values, as llama.cpp's `--cache-type-v`.
                cache_type_v: String = "f16",
                /// Flash attention as llama.cpp's `--flash-attn` / local-llm-rn's
                /// `flashAttention`: "auto", "enabled" or "disabled" ("on" and "off" too).
                /// Accepted for compatibility: every mode runs the same attention, which is
                /// always fused (scores of a few queries at a time, never a context-sized
                /// matrix) and exact, and stores any cache type ([`FLASH_ATTENTION_MODES`]).
                flash_attn: String = "auto",
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

    /// Checks `flash_attn` against [`FLASH_ATTENTION_MODES`] (any case).
    pub fn check_flash_attn(&self) -> Result<()> {
        if FLASH_ATTENTION_MODES
            .iter()
            .any(|m| m.eq_ignore_ascii_case(&self.flash_attn))
        {
            return Ok(());
        }
        Err(Error::InvalidOption(format!(
            "unsupported flash attention mode '{}' (supported: {})",
            self.flash_attn,
            FLASH_ATTENTION_MODES.join(", ")
        )))
    }

    /// The KV cache types these options name ([`Error::InvalidOption`] for another name).
    pub fn kv_types(&self) -> Result<KvTypes> {
        KvTypes::named(&self.cache_type_k, &self.cache_type_v)
    }
}

/// [`Error::InsufficientMemory`] when the `kv_bytes` a KV cache of `n_ctx` positions needs
/// exceed the host's usable memory ([`HostMemory::usable_bytes`]: the available memory less
/// headroom; filling a cache without it would get the process killed).
///
/// [`HostMemory::usable_bytes`]: crate::backend::HostMemory::usable_bytes
fn check_available(kv_bytes: u64, n_ctx: usize) -> Result<()> {
    check_usable(crate::backend::HostMemory::read(), kv_bytes, n_ctx)
}

/// [`check_available`] against the given memory.
fn check_usable(memory: crate::backend::HostMemory, kv_bytes: u64, n_ctx: usize) -> Result<()> {
    match (memory.usable_bytes, memory.available_bytes) {
        (Some(usable), Some(available)) if kv_bytes > usable => {
            Err(Error::InsufficientMemory(format!(
                "the KV cache for {n_ctx} positions needs {kv_bytes} bytes but only {usable} of \
                 the {available} bytes of available memory may be used ({}%: the rest is \
                 headroom for the system and other apps)",
                crate::backend::USABLE_PERCENT
            )))
        }
        _ => Ok(()),
    }
}

/// An inference context: worker threads and one or more sequences, each a KV cache of `n_ctx`
/// positions with the tokens it holds and the generation running on it, if any (see `step.rs`:
/// a single generation is one sequence started and stepped to its end).
pub struct Context {
    model: Arc<LoadedModel>,
    threads: Threads,
    n_batch: usize,
    /// At least one; [`Context::eval`] and the session files use the first.
    seqs: Vec<Sequence>,
    /// The last step's logits, kept so that each step reuses their memory.
    step_logits: Vec<f32>,
    /// Speculative decoding (see [`Context::set_speculative`]); none: plain decoding.
    speculation: Option<speculative::Speculation>,
    /// LoRA adapters applied to every forward pass (see [`Context::set_lora`]).
    lora: Vec<ActiveLora>,
}

/// One sequence of a context.
struct Sequence {
    cache: KvCache,
    /// The tokens `cache` holds.
    cached: Vec<u32>,
    /// How many of the cached positions a prompt may reuse (fewer than cached after a
    /// context shift: the moved ones were computed with dropped tokens in view).
    reusable: usize,
    /// The draft model's cache for this sequence (speculative decoding with a draft model).
    draft: Option<speculative::DraftCache>,
    /// The generation running on it.
    running: Option<step::Running>,
}

impl Sequence {
    /// An empty sequence of `n_ctx` positions cached as `types`.
    fn new(model: &Model, n_ctx: usize, types: KvTypes) -> Result<Self> {
        Ok(Sequence {
            cache: model.new_cache(n_ctx, types)?,
            cached: Vec::new(),
            reusable: usize::MAX,
            draft: None,
            running: None,
        })
    }

    /// Forget the cached tokens (also the draft model's) and the running generation.
    fn clear(&mut self) {
        self.cache.truncate(0);
        self.cached.clear();
        self.reusable = usize::MAX;
        if let Some(draft) = &mut self.draft {
            draft.clear();
        }
        self.running = None;
    }
}

/// A cache and the tokens it holds.
struct SeqState<'a> {
    cache: &'a mut KvCache,
    cached: &'a mut Vec<u32>,
}

/// What evaluating tokens on a sequence needs from its context.
struct Runner<'a> {
    model: &'a Model,
    threads: &'a Threads,
    n_batch: usize,
    lora: &'a [ActiveLora],
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
            let mut out = Vec::new();
            let one = SeqTokens {
                tokens: batch,
                cache: &mut *seq.cache,
            };
            self.model
                .forward_batch_with(&mut [one], self.threads, output, &mut out, self.lora)?;
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
        let n_seq = batch::sequence_count(options)?;
        options.check_flash_attn()?;
        let types = options.kv_types()?;
        let kv_bytes = model.model().config().kv_cache_bytes(n_ctx, types);
        check_available(kv_bytes.saturating_mul(n_seq as u64), n_ctx * n_seq)?;
        let seqs = (0..n_seq)
            .map(|_| Sequence::new(model.model(), n_ctx, types))
            .collect::<Result<Vec<_>>>()?;
        Ok(Context {
            seqs,
            threads: Threads::new(threads)?,
            n_batch: options.n_batch as usize,
            step_logits: Vec::new(),
            speculation: None,
            lora: Vec::new(),
            model,
        })
    }

    /// The model this context runs.
    pub fn model(&self) -> &Arc<LoadedModel> {
        &self.model
    }

    /// Context size in tokens (of each sequence).
    pub fn n_ctx(&self) -> usize {
        self.seqs[0].cache.capacity()
    }

    /// Most tokens one forward pass of the prompt takes.
    pub fn n_batch(&self) -> usize {
        self.n_batch
    }

    /// Worker threads.
    pub fn threads(&self) -> usize {
        self.threads.count()
    }

    /// Apply these LoRA adapters (with their scales) to every forward pass from now on,
    /// replacing the set in use; an empty list removes them. The adapters must be loaded for
    /// this context's model. A different set empties the KV cache of every sequence (what it
    /// holds was computed with the old set); [`Error::InvalidOption`] while generations run.
    pub fn set_lora(&mut self, adapters: Vec<ActiveLora>) -> Result<()> {
        self.check_idle()?;
        if let Some(bad) = adapters.iter().find(|a| !a.scale.is_finite()) {
            return Err(Error::InvalidOption(format!(
                "LoRA scale must be finite, got {}",
                bad.scale
            )));
        }
        let same = adapters.len() == self.lora.len()
            && adapters
                .iter()
                .zip(&self.lora)
                .all(|(a, b)| Arc::ptr_eq(&a.adapter, &b.adapter) && a.scale == b.scale);
        if !same {
            self.clear();
            self.lora = adapters;
        }
        Ok(())
    }

    /// The LoRA adapters in use.
    pub fn lora(&self) -> &[ActiveLora] {
        &self.lora
    }

    /// Empty the KV cache of every sequence (generations still running are dropped).
    pub fn clear(&mut self) {
        self.seqs.iter_mut().for_each(Sequence::clear);
    }

    /// [`Error::InvalidOption`] while generations run (started with
    /// [`Context::start_sequence`] and not yet ended).
    fn check_idle(&self) -> Result<()> {
        match self.seqs.iter().filter(|s| s.running.is_some()).count() {
            0 => Ok(()),
            n => Err(Error::InvalidOption(format!(
                "{n} generations are running on this context; finish them first"
            ))),
        }
    }

    /// Tokens for a prompt (an infill fitted as for a request of no generated tokens).
    pub fn prompt_tokens(&self, prompt: &Prompt) -> Result<Vec<u32>> {
        match prompt {
            Prompt::Text(text) => self.model.tokenize(text, true, true),
            Prompt::Chat(messages) => self.model.chat_tokens(messages),
            Prompt::Tokens(t) => Ok(t.clone()),
            Prompt::Infill(infill) => {
                infill.tokens(self.model.tokenizer(), self.n_batch, 0, self.n_ctx())
            }
        }
    }

    /// Tokens for a request's prompt, offering its tools.
    fn request_tokens(&self, request: &GenerateRequest) -> Result<Vec<u32>> {
        match &request.prompt {
            Prompt::Chat(messages) => {
                // Without tools the choice means nothing (and is not checked).
                let choice = if request.tools.is_empty() {
                    &crate::chat::ToolChoice::Auto
                } else {
                    &request.tool_choice
                };
                let vars = &request.template_vars;
                self.model
                    .chat_tokens_with_vars(messages, &request.tools, choice, vars)
            }
            Prompt::Infill(infill) => infill.tokens(
                self.model.tokenizer(),
                self.n_batch,
                request.max_tokens,
                self.n_ctx(),
            ),
            prompt => self.prompt_tokens(prompt),
        }
    }

    /// Evaluate `tokens` after the tokens cached in the first sequence, in batches, calling
    /// `progress(done, total)` after each batch, and return what `output` asks for from the
    /// last batch (for [`Output::AllLogits`] / [`Output::Hidden`]: every token of every
    /// batch). Not while generations run ([`Error::InvalidOption`]).
    pub fn eval(
        &mut self,
        tokens: &[u32],
        output: Output,
        progress: &mut dyn FnMut(usize, usize),
        cancel: Option<&AtomicBool>,
    ) -> Result<Vec<f32>> {
        self.check_idle()?;
        let seq = &mut self.seqs[0];
        let run = Runner {
            model: self.model.model(),
            threads: &self.threads,
            n_batch: self.n_batch,
            lora: &self.lora,
        };
        let state = SeqState {
            cache: &mut seq.cache,
            cached: &mut seq.cached,
        };
        run.eval(state, tokens, output, progress, cancel)
    }

    /// Generate from `request`, calling `on_text` with each new piece of text (never a partial
    /// UTF-8 character, never text that may still turn out to be a stop string). Generation
    /// stops when `cancel` becomes true (checked between tokens and between prompt batches).
    ///
    /// With tools (and a choice other than none), text that may be a tool call is held back
    /// from `on_text`; calls found in the output are returned in [`Generation::tool_calls`]
    /// with finish reason [`FinishReason::ToolCalls`], and the held text is passed on when it
    /// holds none. Under [`ToolChoice`](crate::chat::ToolChoice) `Required` or a named choice,
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

    /// [`Context::generate`], also reporting prompt progress and log-probabilities as they
    /// are computed: one sequence started ([`Context::start_sequence`]) and stepped
    /// ([`Context::step_sequences`]) to its end. Not while other generations run
    /// ([`Error::InvalidOption`]).
    pub fn generate_events(
        &mut self,
        request: &GenerateRequest,
        on_event: &mut dyn FnMut(GenerateEvent),
        cancel: Option<&AtomicBool>,
    ) -> Result<Generation> {
        self.check_idle()?;
        let flag = Arc::new(AtomicBool::new(false));
        self.start(request, Some(flag.clone()), cancel, on_event)?;
        loop {
            if cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
                flag.store(true, Ordering::Relaxed);
            }
            let mut ended = self.step_sequences(&|_| true, &mut |_, event| on_event(event))?;
            if let Some((_, generation)) = ended.pop() {
                return generation;
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::HostMemory;

    const GB: u64 = 1_000_000_000;

    /// Issue 38: SmolLM2's 1,048,576-token cache (24.16 GB) was accepted with 24.18 GB
    /// available and no headroom. Now at most 80% of the available memory may be planned.
    #[test]
    fn a_kv_cache_must_leave_headroom() {
        let memory = HostMemory::new(Some(32 * GB), Some(24_180_000_000));
        assert_eq!(memory.usable_bytes, Some(19_344_000_000));
        match check_usable(memory, 24_160_000_000, 1 << 20) {
            Err(Error::InsufficientMemory(m)) => assert!(m.contains("80%"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert!(check_usable(memory, 19_344_000_001, 1 << 20).is_err());
        assert!(check_usable(memory, 19_344_000_000, 1 << 20).is_ok());
        // Unknown memory: nothing to judge by.
        assert!(check_usable(HostMemory::new(None, None), u64::MAX, 1 << 20).is_ok());
        // No overflow at the top of the range.
        assert_eq!(
            HostMemory::new(None, Some(u64::MAX)).usable_bytes,
            Some(u64::MAX / 100 * 80 + (u64::MAX % 100) * 80 / 100)
        );
    }
}
