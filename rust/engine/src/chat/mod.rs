//! Chat-template rendering: Hugging Face–compatible Jinja templates (via minijinja) and the
//! built-in templates used when a model file has none.
//!
//! [`ChatTemplate::render`] produces the prompt text. [`ChatTemplate::render_segments`] produces
//! the same text split into pieces the template wrote (where special-token text may be parsed)
//! and pieces that came from message contents (which must be tokenized as plain text), so that
//! a user cannot inject control tokens through message content; [`ChatTemplate::tokens`]
//! tokenizes them that way. Roles are template input too, so only [`ROLES`] are accepted.
//!
//! Rendering is bounded: see the `env` module for the fuel, recursion and output limits.
//!
//! Tool calling: [`ChatTemplate::render_with_tools`] (and the `_with_tools` variants) offer
//! [`Tool`]s to the model, natively or through a fallback prompt (the `tools` module);
//! [`parse_tool_calls`] and [`ToolCallStream`] find calls in the output (the `tool_parse`
//! module); [`tool_call_schema`] is the JSON Schema of a valid call for constrained decoding.

mod builtin;
mod compile;
mod env;
mod gemma4_calls;
mod guard;
mod json;
mod pyrepr;
pub mod reasoning;
mod segments;
mod tool_parse;
mod tools;

use compile::{compile, unfold_constants};
use minijinja::{context, machinery, AutoEscape, Environment, Value};

pub use reasoning::{ReasoningOptions, ReasoningSplitter};
pub use tool_parse::{parse_tool_calls, ParsedResponse, ToolCallStream};
pub use tools::{
    offered_tools, tool_call_grammar, tool_call_schema, validate_tools, Tool, ToolCall, ToolChoice,
    TOOL_CALL_CLOSE, TOOL_CALL_OPEN,
};

use crate::tokenizer::Tokenizer;

/// Extra variables a template sees beside the conversation (`chat_template_kwargs`, e.g.
/// Qwen 3's `enable_thinking`). They cannot replace `messages`, `tools`,
/// `add_generation_prompt`, `bos_token` or `eos_token`. Their strings are template text
/// (special-token text in them is parsed): they come from the app, not from a user.
pub type TemplateVars = serde_json::Map<String, serde_json::Value>;

/// Template variables from JSON text (an object; anything else is an
/// [`crate::Error::InvalidOption`]).
pub fn template_vars(json: &str) -> crate::Result<TemplateVars> {
    match serde_json::from_str(json) {
        Ok(serde_json::Value::Object(map)) => Ok(map),
        _ => Err(crate::Error::InvalidOption(format!(
            "chat_template_kwargs must be a JSON object, got {:?}",
            json.chars().take(80).collect::<String>()
        ))),
    }
}

/// The message roles a conversation may use. A role is written into the prompt by the template
/// (as template text, where special-token text is parsed), so any other string is rejected.
pub const ROLES: [&str; 4] = ["system", "user", "assistant", "tool"];

/// One message of a conversation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChatMessage {
    /// Speaker role: one of [`ROLES`].
    pub role: String,
    /// Message text. Empty for an assistant message that only calls tools: templates then see
    /// `content` as none, like OpenAI's `content: null`.
    pub content: String,
    /// Tools an assistant message calls.
    pub tool_calls: Vec<ToolCall>,
    /// For a `tool` message: the id of the call whose result it holds.
    pub tool_call_id: Option<String>,
    /// An optional name of the speaker (for a `tool` message, the tool's name).
    pub name: Option<String>,
}

impl ChatMessage {
    /// A message with the given role and content.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        ChatMessage {
            role: role.into(),
            content: content.into(),
            ..ChatMessage::default()
        }
    }
}

/// A piece of a rendered prompt: text the template produced (special tokens may be parsed) or
/// text that came from a message's content (must be tokenized as plain text, never as control
/// tokens).
#[derive(Clone, Debug, PartialEq)]
pub struct PromptSegment {
    /// The text of this piece.
    pub text: String,
    /// `true` if the template wrote this text, `false` if it came from a message's content.
    pub from_template: bool,
}

/// A parsed chat template together with its bounded, HF-compatible Jinja environment.
pub struct ChatTemplate {
    source: String,
    /// `source` as compiled: number literals wrapped (see `compile::unfold_constants`).
    unfolded: String,
    bos_token: String,
    eos_token: String,
    env: Environment<'static>,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("source_len", &self.source.len())
            .field("bos_token", &self.bos_token)
            .field("eos_token", &self.eos_token)
            .finish()
    }
}

/// Cap for strings produced by text-growing filters and methods.
const MAX_STRING_BYTES: usize = 64 << 20;

fn template_error(err: minijinja::Error) -> crate::Error {
    crate::Error::ChatTemplate(err.to_string())
}

impl ChatTemplate {
    /// Parse a Jinja template (HF-compatible environment). bos/eos token texts are exposed as
    /// `bos_token` / `eos_token`. Syntax errors yield [`crate::Error::ChatTemplate`].
    pub fn new(source: &str, bos_token: &str, eos_token: &str) -> crate::Result<Self> {
        let env = env::build_environment(MAX_STRING_BYTES);
        let unfolded = unfold_constants(source).map_err(template_error)?;
        compile(&unfolded).map_err(template_error)?;
        Ok(ChatTemplate {
            unfolded,
            source: source.to_string(),
            bos_token: bos_token.to_string(),
            eos_token: eos_token.to_string(),
            env,
        })
    }

    /// The built-in template for an architecture when the model file has none: `gemma3`
    /// (and `gemma`, `gemma2`) → Gemma turn format; everything else (llama family, qwen2,
    /// qwen3, unknown) → ChatML. Returns the Jinja source.
    pub fn builtin_source(architecture: &str) -> &'static str {
        builtin::source_for(architecture)
    }

    /// The Jinja source of this template.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Render the conversation to prompt text. `add_generation_prompt` asks the template to
    /// open an assistant turn at the end. `tools` is exposed to the template as none. A role
    /// outside [`ROLES`] is an [`crate::Error::InvalidOption`].
    pub fn render(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> crate::Result<String> {
        self.render_with_tools(messages, &[], &ToolChoice::Auto, add_generation_prompt)
    }

    /// Whether the template handles tools itself (its source mentions `tools`). Otherwise
    /// tools are offered through the fallback prompt (see [`ChatTemplate::render_with_tools`]).
    pub fn supports_tools(&self) -> bool {
        tools::template_supports_tools(&self.source)
    }

    /// Whether calls are written as `<tool_call>` blocks: by the fallback prompt, or by a
    /// tool-aware template that uses them (the Hermes/Qwen format). Only then can decoding be
    /// constrained to a valid call ([`tool_call_grammar`]).
    pub fn writes_tool_call_blocks(&self) -> bool {
        !self.supports_tools() || self.source.contains(TOOL_CALL_OPEN)
    }

    /// Whether a request goes through the tool fallback: the template lacks tool support and
    /// the request offers tools or holds tool calls. (Without either, messages, `tool` ones
    /// included, reach the template as they are.)
    fn uses_fallback(&self, messages: &[ChatMessage], tools: &[Tool]) -> bool {
        !self.supports_tools()
            && (!tools.is_empty() || messages.iter().any(|m| !m.tool_calls.is_empty()))
    }

    /// Render like [`ChatTemplate::render`] with tools offered to the model. A tool-aware
    /// template receives `tools` (`[{type: "function", function: {name, description,
    /// parameters}}]`) and messages with `tool_calls` / `tool_call_id` / `name` as Hugging
    /// Face templates expect. For another template, when tools are offered or messages hold
    /// calls, the conversation is rewritten first: a
    /// system preamble lists the tools and asks for `<tool_call>` blocks, calls become
    /// `<tool_call>` text and tool results become user messages (see docs/react-native.md, "Tools"
    /// section). `choice` words the fallback preamble ("required", named); pass the tools it
    /// offers (see [`offered_tools`]).
    pub fn render_with_tools(
        &self,
        messages: &[ChatMessage],
        tools: &[Tool],
        choice: &ToolChoice,
        add_generation_prompt: bool,
    ) -> crate::Result<String> {
        let vars = TemplateVars::new();
        self.render_with_vars(messages, tools, choice, add_generation_prompt, &vars)
    }

    /// [`ChatTemplate::render_with_tools`] with extra template variables.
    pub fn render_with_vars(
        &self,
        messages: &[ChatMessage],
        tools: &[Tool],
        choice: &ToolChoice,
        add_generation_prompt: bool,
        vars: &TemplateVars,
    ) -> crate::Result<String> {
        if self.uses_fallback(messages, tools) {
            let rewritten = tools::fallback_messages(messages, tools, choice)?;
            return self.render_native(&rewritten, &[], add_generation_prompt, vars);
        }
        self.render_native(messages, tools, add_generation_prompt, vars)
    }

    /// Render `messages` with `tools` passed to the template as they are.
    fn render_native(
        &self,
        messages: &[ChatMessage],
        tools: &[Tool],
        add_generation_prompt: bool,
        vars: &TemplateVars,
    ) -> crate::Result<String> {
        if let Some(m) = messages.iter().find(|m| !ROLES.contains(&m.role.as_str())) {
            return Err(crate::Error::InvalidOption(format!(
                "unknown message role {:?}: expected one of {}",
                m.role,
                ROLES.join(", ")
            )));
        }
        let tools_value = if tools.is_empty() {
            Value::from(())
        } else {
            Value::from_serialize(tools::tools_value(tools)?)
        };
        let input_bytes = messages
            .iter()
            .map(|m| {
                let calls: usize = m.tool_calls.iter().map(|c| c.arguments.len() + 64).sum();
                m.content.len() + m.role.len() + calls
            })
            .chain(tools.iter().map(|t| {
                t.parameters.as_ref().map_or(0, String::len)
                    + t.description.as_ref().map_or(0, String::len)
            }))
            .sum::<usize>()
            + serde_json::to_string(vars).map_or(0, |s| s.len());
        let values: Vec<_> = messages.iter().map(tools::message_value).collect();
        self.render_capped(
            Value::from_serialize(values),
            tools_value,
            add_generation_prompt,
            input_bytes,
            Value::from_serialize(vars),
        )
    }

    /// Render like [`ChatTemplate::render`], split into template text and message content.
    /// The concatenated segment texts equal `render()`'s output, except for templates that
    /// rewrite content (e.g. replace characters in it): there the contents are inserted as
    /// written. Adjacent segments of the same kind are merged and empty segments omitted. See
    /// the `segments` module for the method and for when this returns an error although
    /// `render()` succeeds.
    pub fn render_segments(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> crate::Result<Vec<PromptSegment>> {
        self.segments_with_tools(messages, &[], &ToolChoice::Auto, add_generation_prompt)
    }

    /// [`ChatTemplate::render_segments`] with tools (see [`ChatTemplate::render_with_tools`]).
    pub fn segments_with_tools(
        &self,
        messages: &[ChatMessage],
        tools: &[Tool],
        choice: &ToolChoice,
        add_generation_prompt: bool,
    ) -> crate::Result<Vec<PromptSegment>> {
        let vars = TemplateVars::new();
        self.segments_with_vars(messages, tools, choice, add_generation_prompt, &vars)
    }

    /// [`ChatTemplate::segments_with_tools`] with extra template variables.
    pub fn segments_with_vars(
        &self,
        messages: &[ChatMessage],
        tools: &[Tool],
        choice: &ToolChoice,
        add_generation_prompt: bool,
        vars: &TemplateVars,
    ) -> crate::Result<Vec<PromptSegment>> {
        if self.uses_fallback(messages, tools) {
            let rewritten = tools::fallback_messages(messages, tools, choice)?;
            return segments::render_segments(self, &rewritten, &[], add_generation_prompt, vars);
        }
        segments::render_segments(self, messages, tools, add_generation_prompt, vars)
    }

    /// Token ids of the conversation for `tokenizer`: template text is tokenized with special
    /// tokens parsed, message contents as plain text (they never become control tokens). BOS is
    /// prepended when the tokenizer asks for it and the template did not write it.
    pub fn tokens(
        &self,
        tokenizer: &Tokenizer,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> crate::Result<Vec<u32>> {
        self.tokens_with_tools(
            tokenizer,
            messages,
            &[],
            &ToolChoice::Auto,
            add_generation_prompt,
        )
    }

    /// [`ChatTemplate::tokens`] with tools (see [`ChatTemplate::render_with_tools`]). A
    /// tool-aware template writes tool definitions, call names, ids and arguments as template
    /// text, so any of those strings holding special-token text is refused
    /// ([`crate::Error::InvalidOption`]); with the fallback they are message content.
    pub fn tokens_with_tools(
        &self,
        tokenizer: &Tokenizer,
        messages: &[ChatMessage],
        tools: &[Tool],
        choice: &ToolChoice,
        add_generation_prompt: bool,
    ) -> crate::Result<Vec<u32>> {
        let vars = TemplateVars::new();
        self.tokens_with_vars(
            tokenizer,
            messages,
            tools,
            choice,
            add_generation_prompt,
            &vars,
        )
    }

    /// [`ChatTemplate::tokens_with_tools`] with extra template variables.
    pub fn tokens_with_vars(
        &self,
        tokenizer: &Tokenizer,
        messages: &[ChatMessage],
        tools: &[Tool],
        choice: &ToolChoice,
        add_generation_prompt: bool,
        vars: &TemplateVars,
    ) -> crate::Result<Vec<u32>> {
        if !self.uses_fallback(messages, tools) {
            for s in tools::template_strings(messages, tools) {
                if tokenizer.encode(&s, false, true)? != tokenizer.encode(&s, false, false)? {
                    return Err(crate::Error::InvalidOption(format!(
                        "tool definitions and calls must not contain special-token text: {s:?}"
                    )));
                }
            }
        }
        let mut tokens = Vec::new();
        for seg in self.segments_with_vars(messages, tools, choice, add_generation_prompt, vars)? {
            tokens.extend(tokenizer.encode(&seg.text, false, seg.from_template)?);
        }
        if let Some(bos) = tokenizer.bos() {
            if tokenizer.add_bos() && tokens.first() != Some(&bos) {
                tokens.insert(0, bos);
            }
        }
        Ok(tokens)
    }

    fn render_capped(
        &self,
        messages: Value,
        tools: Value,
        add_generation_prompt: bool,
        input_bytes: usize,
        vars: Value,
    ) -> crate::Result<String> {
        let ctx = context! {
            messages => messages,
            add_generation_prompt => add_generation_prompt,
            bos_token => &self.bos_token,
            eos_token => &self.eos_token,
            tools => tools,
            ..vars
        };
        let limits = guard::limits_for(input_bytes);
        let cap = env::output_cap(input_bytes);
        let mut text = String::new();
        // minijinja can panic on some edge cases (e.g. 2.24 indexes out of bounds when
        // reverse-slicing an empty sequence); a template must never take the process down.
        let (result, exceeded) = guard::metered(limits, MAX_STRING_BYTES, || {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let (instructions, blocks) = compile(&self.unfolded)?;
                let mut out = machinery::make_string_output(&mut text);
                machinery::Vm::new(&self.env)
                    .eval(&instructions, ctx, &blocks, &mut out, AutoEscape::None)
                    .map(drop)
            }))
        });
        let result = result.map_err(|_| {
            crate::Error::ChatTemplate("the template engine failed internally".to_string())
        })?;
        if let Some(why) = exceeded {
            return Err(crate::Error::ChatTemplate(why));
        }
        result.map_err(template_error)?;
        if text.len() > cap {
            return Err(crate::Error::ChatTemplate(format!(
                "rendered prompt exceeds the limit of {cap} bytes"
            )));
        }
        Ok(text)
    }
}
