//! The records and enums that cross the FFI. Options, finish reasons, memory estimates and host
//! memory are the engine's own types, declared to UniFFI with `#[uniffi::remote]`: the compiler
//! checks each declaration against the engine's definition, and option records are emitted from
//! the engine's option tables, so their defaults reach the generated TypeScript unchanged.

use local_llm_engine::backend::{DeviceInfo, DeviceKind, HostMemory};
use local_llm_engine::chat::{template_vars, ReasoningOptions, Tool, ToolCall, ToolChoice};
use local_llm_engine::grammar::GrammarRequest;
use local_llm_engine::sampling::{LogitBias, SamplingParams, TokenLogprob, TopLogprob};
use local_llm_engine::session::{
    ContextOptions, ContextShift, FinishReason, GenerateRequest, Generation, Infill, InfillChunk,
    LoadOptions, MemoryEstimate, Prompt, SpeculativeOptions, Timings,
};
use local_llm_engine::Error as EngineError;

/// Declare an engine option struct to UniFFI from its table (see the engine's
/// `sampling_params_table!`), each field with its default.
macro_rules! remote_options_record {
    (
        $(#[doc = $struct_doc:tt])*
        struct $name:ident {
            $( $(#[doc = $doc:tt])* $field:ident : $ty:ty = $default:tt ),* $(,)?
        }
    ) => {
        $(#[doc = $struct_doc])*
        #[uniffi::remote(Record)]
        pub struct $name {
            $( $(#[doc = $doc])* #[uniffi(default = $default)] pub $field: $ty, )*
        }
    };
}

local_llm_engine::sampling_params_table!(remote_options_record);

/// A bias added to one token's logit before any other sampling stage; -inf bans the token.
#[uniffi::remote(Record)]
pub struct LogitBias {
    /// Token id.
    pub token: u32,
    /// Added to the token's logit; not NaN.
    pub bias: f32,
}
local_llm_engine::context_options_table!(remote_options_record);
local_llm_engine::load_options_table!(remote_options_record);
local_llm_engine::speculative_options_table!(remote_options_record);

/// A compute device of the engine's backend registry.
#[uniffi::remote(Record)]
pub struct DeviceInfo {
    /// Short unique name, e.g. "CPU" or "NNPA".
    pub name: String,
    /// Human-readable description.
    pub description: String,
    /// Device kind.
    pub kind: DeviceKind,
    /// Total memory in bytes, when known.
    pub memory_total: Option<u64>,
    /// Free memory in bytes, when known.
    pub memory_free: Option<u64>,
    /// Capabilities, e.g. SIMD level or accelerator features.
    pub features: Vec<String>,
}

/// What kind of device a backend device is.
#[uniffi::remote(Enum)]
pub enum DeviceKind {
    /// The host CPU.
    Cpu,
    /// A matrix accelerator (e.g. IBM Z NNPA).
    Accelerator,
}

/// The engine's name of a device kind ("cpu", "accelerator").
#[uniffi::export]
pub fn device_kind_name(kind: DeviceKind) -> String {
    kind.name().to_string()
}

/// Why a generation ended.
#[uniffi::remote(Enum)]
pub enum FinishReason {
    /// An end-of-generation token.
    EndOfGeneration,
    /// A stop string matched.
    StopString,
    /// `max_tokens` reached.
    MaxTokens,
    /// The context window is full.
    ContextFull,
    /// Cancelled by the caller (abort, `break`, dispose), during the prompt or while decoding.
    Cancelled,
    /// The output calls tools.
    ToolCalls,
    /// The grammar matched completely and allows nothing more.
    GrammarComplete,
    /// No token can continue the grammar: the output is cut short.
    GrammarDeadEnd,
}

/// The engine's short name of a finish reason ("eog", "stop_string", "max_tokens",
/// "context_full", "cancelled", "tool_calls", "grammar_complete", "grammar_dead_end").
#[uniffi::export]
pub fn finish_reason_name(reason: FinishReason) -> String {
    reason.name().to_string()
}

/// OpenAI's `finish_reason` for a finish reason ("stop", "length" or "tool_calls").
#[uniffi::export]
pub fn finish_reason_openai_name(reason: FinishReason) -> String {
    reason.openai_name().to_string()
}

/// Memory a model needs for one context: its weights plus the f16 KV cache.
#[uniffi::remote(Record)]
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

/// The host's memory as the operating system reports it; `None` where it cannot be read.
#[uniffi::remote(Record)]
pub struct HostMemory {
    /// Total physical memory in bytes.
    pub total_bytes: Option<u64>,
    /// Memory available to new allocations without swapping, in bytes.
    pub available_bytes: Option<u64>,
    /// The most a model or context may plan to take (the available memory less headroom).
    pub usable_bytes: Option<u64>,
}

/// A function the model may call (OpenAI's `tools[].function`).
#[uniffi::remote(Record)]
pub struct Tool {
    /// The function's name.
    pub name: String,
    /// What the function does.
    #[uniffi(default = None)]
    pub description: Option<String>,
    /// JSON Schema of the arguments object, as JSON text (none: any object).
    #[uniffi(default = None)]
    pub parameters: Option<String>,
}

/// One call of a tool (an entry of OpenAI's `message.tool_calls`).
#[uniffi::remote(Record)]
pub struct ToolCall {
    /// The call's id (tool results refer to it with `tool_call_id`).
    pub id: String,
    /// The called function's name.
    pub name: String,
    /// The arguments as JSON text.
    pub arguments: String,
}

/// Which tools the model may or must call (OpenAI's `tool_choice`).
#[uniffi::remote(Enum)]
pub enum ToolChoice {
    /// Tools are not offered and the output is not parsed for calls.
    None,
    /// The model may answer with text or call tools.
    Auto,
    /// The model must call at least one tool.
    Required,
    /// The model must call this function.
    Function {
        /// The function's name.
        name: String,
    },
}

/// A token with its log-probability.
#[uniffi::remote(Record)]
pub struct TopLogprob {
    /// The token id.
    pub token: u32,
    /// Its log-probability.
    pub logprob: f32,
    /// The token's bytes (control tokens as their text).
    pub bytes: Vec<u8>,
}

/// A generated token's log-probability (log-softmax of the raw logits) and the most likely
/// alternatives at its step.
#[uniffi::remote(Record)]
pub struct TokenLogprob {
    /// The generated token.
    pub token: u32,
    /// Its log-probability.
    pub logprob: f32,
    /// The token's bytes (control tokens as their text).
    pub bytes: Vec<u8>,
    /// The most likely tokens at this step, most likely first.
    pub top: Vec<TopLogprob>,
}

/// One chat message.
#[derive(Debug, Clone, uniffi::Record)]
pub struct ChatMessage {
    /// "system", "user", "assistant" or "tool".
    pub role: String,
    /// The message text (none: an assistant message that only calls tools).
    pub content: Option<String>,
    /// Tools an assistant message calls.
    #[uniffi(default = [])]
    pub tool_calls: Vec<ToolCall>,
    /// For a "tool" message: the id of the call whose result it holds.
    #[uniffi(default = None)]
    pub tool_call_id: Option<String>,
    /// The speaker's name (for a "tool" message, the tool's name).
    #[uniffi(default = None)]
    pub name: Option<String>,
}

impl ChatMessage {
    pub(crate) fn into_engine(self) -> local_llm_engine::chat::ChatMessage {
        local_llm_engine::chat::ChatMessage {
            role: self.role,
            content: self.content.unwrap_or_default(),
            tool_calls: self.tool_calls,
            tool_call_id: self.tool_call_id,
            name: self.name,
        }
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
    /// Fill in the middle (coder models with FIM tokens), laid out as llama-server's `/infill`.
    Infill {
        /// The text before the hole.
        prefix: String,
        /// The text after the hole.
        suffix: String,
        /// Text the middle starts with.
        prompt: String,
        /// Other files as context, placed before the prefix.
        extra: Vec<InfillChunk>,
        /// Suffix before prefix (SPM order).
        spm: bool,
    },
}

/// A file given as context of a fill-in-the-middle prompt.
#[uniffi::remote(Record)]
pub struct InfillChunk {
    /// The file's name.
    pub filename: String,
    /// Its text.
    pub text: String,
}

/// A generation request: the engine's `GenerateRequest` with an FFI prompt. Limits left unset
/// take the engine's defaults.
#[derive(Debug, Clone, uniffi::Record)]
pub struct GenerateParams {
    /// The prompt.
    pub prompt: PromptInput,
    /// Sampling settings (`SamplingParams.create({...})` fills the defaults).
    pub sampling: SamplingParams,
    /// Most tokens to generate (none: the engine's default).
    #[uniffi(default = None)]
    pub max_tokens: Option<u32>,
    /// Stop strings (excluded from the text).
    #[uniffi(default = [])]
    pub stop: Vec<String>,
    /// Keep generating after end-of-generation tokens.
    #[uniffi(default = false)]
    pub ignore_eog: bool,
    /// Tools the model may call (chat prompts only).
    #[uniffi(default = [])]
    pub tools: Vec<Tool>,
    /// Which tools the model may or must call (none: auto).
    #[uniffi(default = None)]
    pub tool_choice: Option<ToolChoice>,
    /// Report each generated token's log-probability with this many alternatives (0..=20);
    /// none: no log-probabilities.
    #[uniffi(default = None)]
    pub logprobs: Option<u32>,
    /// A GBNF grammar (llama.cpp syntax) the output must match.
    #[uniffi(default = None)]
    pub grammar: Option<String>,
    /// The grammar's start rule (none: "root").
    #[uniffi(default = None)]
    pub grammar_root: Option<String>,
    /// A JSON schema (JSON text) the output must match, converted to a grammar by the engine;
    /// used when `grammar` is none. `{"type": "object"}` is OpenAI's `json_object` mode.
    #[uniffi(default = None)]
    pub json_schema: Option<String>,
    /// Continue past a full context by shifting it (none: stop with `ContextFull`).
    #[uniffi(default = None)]
    pub context_shift: Option<ContextShift>,
    /// Streams only: hand the reader the prompt's progress after each batch and evaluate the
    /// next batch only once it asks again (or cancels), so that a progress callback can stop
    /// the prompt exactly there. The context's other sequences wait meanwhile.
    #[uniffi(default = false)]
    pub prompt_progress: bool,
    /// Reasoning blocks (`<think>` … `</think>`, for models whose template writes them):
    /// "none" keeps them in the text (the default), "auto" and "deepseek" return them apart
    /// (llama.cpp's `--reasoning-format`).
    #[uniffi(default = None)]
    pub reasoning_format: Option<String>,
    /// Most tokens inside a reasoning block before its close tag is forced (llama.rn's
    /// `thinking_budget_tokens`); none: no limit.
    #[uniffi(default = None)]
    pub reasoning_budget: Option<u32>,
    /// Text inserted before the forced close tag (llama.rn's `thinking_budget_message`).
    #[uniffi(default = None)]
    pub reasoning_budget_message: Option<String>,
    /// Extra chat template variables, a JSON object (`chat_template_kwargs`, e.g.
    /// `{"enable_thinking": false}`).
    #[uniffi(default = None)]
    pub chat_template_kwargs: Option<String>,
}

impl GenerateParams {
    /// The engine request; fails when the JSON schema cannot be converted.
    pub(crate) fn to_request(&self) -> Result<GenerateRequest, EngineError> {
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
            PromptInput::Infill {
                prefix,
                suffix,
                prompt,
                extra,
                spm,
            } => Prompt::Infill(Infill {
                prefix: prefix.clone(),
                suffix: suffix.clone(),
                prompt: prompt.clone(),
                extra: extra.clone(),
                spm: *spm,
            }),
        };
        let mut request = GenerateRequest::new(prompt);
        request.sampling = self.sampling.clone();
        if let Some(n) = self.max_tokens {
            request.max_tokens = n as usize;
        }
        request.stop = self.stop.clone();
        request.stop_at_eog = !self.ignore_eog;
        request.tools = self.tools.clone();
        request.tool_choice = self.tool_choice.clone().unwrap_or_default();
        request.logprobs = self.logprobs.map(|n| n as usize);
        request.context_shift = self.context_shift;
        let split = match self.reasoning_format.as_deref() {
            None | Some("none") => false,
            Some("auto" | "deepseek") => true,
            Some(other) => {
                return Err(EngineError::InvalidOption(format!(
                    "reasoning_format {other:?}: expected \"none\", \"auto\" or \"deepseek\""
                )))
            }
        };
        if split || self.reasoning_budget.is_some() {
            request.reasoning = Some(ReasoningOptions {
                split,
                budget: self.reasoning_budget.map(|n| n as usize),
                budget_message: self.reasoning_budget_message.clone().unwrap_or_default(),
            });
        }
        if let Some(json) = &self.chat_template_kwargs {
            request.template_vars = template_vars(json)?;
        }
        request.grammar = match (&self.grammar, &self.json_schema) {
            (Some(gbnf), _) => Some(GrammarRequest {
                root: self.grammar_root.clone().unwrap_or_else(|| "root".into()),
                ..GrammarRequest::new(gbnf.clone())
            }),
            (None, Some(schema)) => Some(GrammarRequest::json_schema(schema)?),
            (None, None) => None,
        };
        Ok(request)
    }
}

/// How a generation continues when the context fills up: keep the first `n_keep` prompt
/// tokens, drop half of the rest (llama.cpp's context shift).
#[uniffi::remote(Record)]
pub struct ContextShift {
    /// Prompt tokens never dropped (besides a leading BOS); none: the whole prompt.
    #[uniffi(default = None)]
    pub n_keep: Option<u32>,
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
    /// Tokens speculative decoding drafted (0 without it).
    pub draft_tokens: u32,
    /// Drafted tokens that were accepted.
    pub draft_accepted: u32,
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
            draft_tokens: to_u32(t.draft_tokens),
            draft_accepted: to_u32(t.draft_accepted),
        }
    }
}

/// The result of a generation (also of a cancelled one: the text generated until then).
#[derive(Debug, Clone, uniffi::Record)]
pub struct GenerationResult {
    /// Generated text (stop string excluded); with tool calls, the content before them;
    /// without the reasoning block when the request splits it off.
    pub text: String,
    /// The reasoning block, when the request splits it off (else empty).
    pub reasoning: String,
    /// Tools the output calls.
    pub tool_calls: Vec<ToolCall>,
    /// Generated token ids.
    pub tokens: Vec<u32>,
    /// Each generated token's log-probabilities, when asked for.
    pub logprobs: Vec<TokenLogprob>,
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
            reasoning: g.reasoning,
            tool_calls: g.tool_calls,
            tokens: g.tokens,
            logprobs: g.logprobs,
            prompt_tokens: to_u32(g.prompt_tokens),
            finish_reason: g.finish_reason,
            perf: g.timings.into(),
        }
    }
}

/// A count as a `u32`, saturating.
pub(crate) fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}
