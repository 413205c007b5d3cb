//! What a generation is asked for and what it gives back: the prompt, the request (sampling,
//! limits, stop strings, tools, log-probabilities, grammar), the events reported while it runs,
//! why it ended, its timings and its result.

use crate::chat::{
    validate_tools, ChatMessage, ReasoningOptions, TemplateVars, Tool, ToolCall, ToolChoice,
};
use crate::grammar::GrammarRequest;
use crate::sampling::{SamplingParams, TokenLogprob, MAX_TOP_LOGPROBS};
use crate::{Error, Result};

use super::{ContextShift, Infill};

/// What to generate from.
#[derive(Clone, Debug)]
pub enum Prompt {
    /// Raw text, tokenized with the model's BOS/EOS flags; special-token text is parsed.
    Text(String),
    /// Chat messages rendered with the chat template (generation prompt added).
    Chat(Vec<ChatMessage>),
    /// Token ids as they are.
    Tokens(Vec<u32>),
    /// Fill in the middle between a prefix and a suffix (coder models with FIM tokens), laid
    /// out as llama-server's `/infill` (see [`Infill`]).
    Infill(Infill),
}

/// A generation request.
#[derive(Clone, Debug)]
pub struct GenerateRequest {
    /// The prompt.
    pub prompt: Prompt,
    /// Sampling settings.
    pub sampling: SamplingParams,
    /// Most tokens to generate.
    pub max_tokens: usize,
    /// Stop strings (not included in the output).
    pub stop: Vec<String>,
    /// Stop at end-of-generation tokens (default true).
    pub stop_at_eog: bool,
    /// Tools the model may call (chat prompts only); the output is parsed for calls unless
    /// `tool_choice` is [`ToolChoice::None`].
    pub tools: Vec<Tool>,
    /// Which tools the model may or must call.
    pub tool_choice: ToolChoice,
    /// Report each generated token's log-probability with this many most likely alternatives
    /// (0..=[`MAX_TOP_LOGPROBS`]); `None`: no log-probabilities (and no cost).
    pub logprobs: Option<usize>,
    /// Constrain the output to a grammar (none: unconstrained).
    pub grammar: Option<GrammarRequest>,
    /// Continue past a full context by shifting it (none: stop with
    /// [`FinishReason::ContextFull`]).
    pub context_shift: Option<ContextShift>,
    /// Reasoning blocks: split them from the answer and/or cap them (none: the output as it
    /// is). Applies to models whose chat template writes `<think>` blocks.
    pub reasoning: Option<ReasoningOptions>,
    /// Extra variables for the chat template (`chat_template_kwargs`, e.g. `enable_thinking`).
    pub template_vars: TemplateVars,
}

impl GenerateRequest {
    /// Tokens generated at most unless a request says otherwise.
    pub const DEFAULT_MAX_TOKENS: usize = 256;

    /// A request with default sampling, [`Self::DEFAULT_MAX_TOKENS`], no stop strings, stopping
    /// at end-of-generation tokens.
    pub fn new(prompt: Prompt) -> Self {
        GenerateRequest {
            prompt,
            sampling: SamplingParams::default(),
            max_tokens: Self::DEFAULT_MAX_TOKENS,
            stop: Vec::new(),
            stop_at_eog: true,
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            logprobs: None,
            grammar: None,
            context_shift: None,
            reasoning: None,
            template_vars: TemplateVars::new(),
        }
    }

    /// Whether the output is parsed for tool calls.
    pub(super) fn parses_tools(&self) -> bool {
        !self.tools.is_empty() && self.tool_choice != ToolChoice::None
    }

    pub(super) fn validate(&self) -> Result<()> {
        self.sampling.validate()?;
        if self.logprobs.is_some_and(|n| n > MAX_TOP_LOGPROBS) {
            return Err(Error::InvalidOption(format!(
                "top_logprobs must be between 0 and {MAX_TOP_LOGPROBS}"
            )));
        }
        if !self.tools.is_empty() && !matches!(self.prompt, Prompt::Chat(_)) {
            return Err(Error::InvalidOption(
                "tools need a chat prompt (messages)".into(),
            ));
        }
        validate_tools(&self.tools, &self.tool_choice)
    }
}

/// What [`Context::generate_events`](super::Context::generate_events) reports while generating.
#[derive(Debug)]
pub enum GenerateEvent<'a> {
    /// Prompt processing: `evaluated` of the `total` prompt tokens not reused from the cache
    /// were evaluated (reported after each batch).
    PromptProgress {
        /// Tokens evaluated so far.
        evaluated: usize,
        /// Tokens to evaluate.
        total: usize,
    },
    /// A new piece of the reasoning block, when the request splits it from the answer.
    Reasoning(&'a str),
    /// A new piece of text (see [`Context::generate`](super::Context::generate)).
    Text(&'a str),
    /// A generated token's log-probabilities (only when the request asks for them), reported
    /// before the text it adds.
    Logprob(&'a TokenLogprob),
}

/// Why generation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// An end-of-generation token.
    EndOfGeneration,
    /// A stop string matched.
    StopString,
    /// `max_tokens` reached.
    MaxTokens,
    /// The context window is full.
    ContextFull,
    /// The caller cancelled (during the prompt or while decoding): the result holds what was
    /// generated until then.
    Cancelled,
    /// The output calls tools (see [`Generation::tool_calls`]).
    ToolCalls,
    /// The grammar matched completely and allows nothing more.
    GrammarComplete,
    /// The grammar allows a continuation but no token of the vocabulary provides one (or the
    /// text after a lazy grammar's trigger does not match it): the output is cut short.
    GrammarDeadEnd,
}

impl FinishReason {
    /// Short name: "eog", "stop_string", "max_tokens", "context_full", "cancelled",
    /// "tool_calls", "grammar_complete" or "grammar_dead_end".
    pub fn name(self) -> &'static str {
        match self {
            FinishReason::EndOfGeneration => "eog",
            FinishReason::StopString => "stop_string",
            FinishReason::MaxTokens => "max_tokens",
            FinishReason::ContextFull => "context_full",
            FinishReason::Cancelled => "cancelled",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::GrammarComplete => "grammar_complete",
            FinishReason::GrammarDeadEnd => "grammar_dead_end",
        }
    }

    /// OpenAI's `finish_reason`: "length" when a limit cut the answer, "tool_calls" when the
    /// output calls tools, "stop" otherwise (OpenAI has no value for a cancelled request or a
    /// grammar dead end; they stopped early).
    pub fn openai_name(self) -> &'static str {
        match self {
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::MaxTokens | FinishReason::ContextFull => "length",
            FinishReason::EndOfGeneration
            | FinishReason::StopString
            | FinishReason::Cancelled
            | FinishReason::GrammarComplete
            | FinishReason::GrammarDeadEnd => "stop",
        }
    }
}

/// Timings of one generation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Timings {
    /// Prompt tokens evaluated (excluding tokens reused from the cache).
    pub prompt_tokens: usize,
    /// Milliseconds spent on the prompt (with a draft model, its reading of the prompt too).
    pub prompt_ms: f64,
    /// Tokens generated.
    pub generated_tokens: usize,
    /// Milliseconds spent generating.
    pub generation_ms: f64,
    /// Tokens speculative decoding drafted (0 without it, see
    /// [`Context::set_speculative`](super::Context::set_speculative)).
    pub draft_tokens: usize,
    /// Drafted tokens that were accepted (each saved a decoding step).
    pub draft_accepted: usize,
}

impl Timings {
    /// Prompt tokens per second.
    pub fn prompt_tokens_per_second(&self) -> f64 {
        per_second(self.prompt_tokens, self.prompt_ms)
    }

    /// Generated tokens per second.
    pub fn generation_tokens_per_second(&self) -> f64 {
        per_second(self.generated_tokens, self.generation_ms)
    }

    /// The share of drafted tokens that were accepted (0 when nothing was drafted).
    pub fn draft_acceptance_rate(&self) -> f64 {
        if self.draft_tokens > 0 {
            self.draft_accepted as f64 / self.draft_tokens as f64
        } else {
            0.0
        }
    }
}

fn per_second(n: usize, ms: f64) -> f64 {
    if ms > 0.0 {
        n as f64 * 1e3 / ms
    } else {
        0.0
    }
}

/// The result of a generation.
#[derive(Clone, Debug)]
pub struct Generation {
    /// Generated text (stop string excluded). When the output calls tools: the content before
    /// the first call (see [`crate::chat::parse_tool_calls`]). Without the reasoning block when
    /// the request splits it off.
    pub text: String,
    /// The reasoning block's text, when the request splits it from the answer (else empty).
    pub reasoning: String,
    /// Tools the output calls (finish reason [`FinishReason::ToolCalls`]).
    pub tool_calls: Vec<ToolCall>,
    /// Generated token ids.
    pub tokens: Vec<u32>,
    /// Each generated token's log-probabilities, when the request asked for them.
    pub logprobs: Vec<TokenLogprob>,
    /// Number of prompt tokens.
    pub prompt_tokens: usize,
    /// Why it ended.
    pub finish_reason: FinishReason,
    /// Timings.
    pub timings: Timings,
}
