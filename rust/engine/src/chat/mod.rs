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

mod builtin;
mod env;
mod json;
mod segments;

use minijinja::{context, Environment};

use crate::tokenizer::Tokenizer;

/// The message roles a conversation may use. A role is written into the prompt by the template
/// (as template text, where special-token text is parsed), so any other string is rejected.
pub const ROLES: [&str; 4] = ["system", "user", "assistant", "tool"];

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ChatMessage {
    /// Speaker role: one of [`ROLES`].
    pub role: String,
    /// Message text.
    pub content: String,
}

impl ChatMessage {
    /// A message with the given role and content.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        ChatMessage {
            role: role.into(),
            content: content.into(),
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

/// Name under which the template is stored in its environment.
const TEMPLATE_NAME: &str = "chat_template";

/// A parsed chat template together with its bounded, HF-compatible Jinja environment.
pub struct ChatTemplate {
    source: String,
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
        let mut env = env::build_environment(MAX_STRING_BYTES);
        env.add_template_owned(TEMPLATE_NAME, source.to_string())
            .map_err(template_error)?;
        Ok(ChatTemplate {
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
        if let Some(m) = messages.iter().find(|m| !ROLES.contains(&m.role.as_str())) {
            return Err(crate::Error::InvalidOption(format!(
                "unknown message role {:?}: expected one of {}",
                m.role,
                ROLES.join(", ")
            )));
        }
        let input_bytes = messages
            .iter()
            .map(|m| m.content.len() + m.role.len())
            .sum::<usize>();
        self.render_capped(
            messages,
            add_generation_prompt,
            env::output_cap(input_bytes),
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
        segments::render_segments(self, messages, add_generation_prompt)
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
        let mut tokens = Vec::new();
        for seg in self.render_segments(messages, add_generation_prompt)? {
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
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        cap: usize,
    ) -> crate::Result<String> {
        let template = self
            .env
            .get_template(TEMPLATE_NAME)
            .map_err(template_error)?;
        let ctx = context! {
            messages => messages,
            add_generation_prompt => add_generation_prompt,
            bos_token => &self.bos_token,
            eos_token => &self.eos_token,
            tools => (),
        };
        let mut writer = env::CappedWriter::new(cap);
        // minijinja can panic on some edge cases (e.g. 2.24 indexes out of bounds when
        // reverse-slicing an empty sequence); a template must never take the process down.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            template.render_captured_to(ctx, &mut writer)
        }))
        .map_err(|_| {
            crate::Error::ChatTemplate("the template engine failed internally".to_string())
        })?;
        if let Err(err) = result {
            if writer.overflowed {
                return Err(crate::Error::ChatTemplate(format!(
                    "rendered prompt exceeds the limit of {cap} bytes"
                )));
            }
            return Err(template_error(err));
        }
        String::from_utf8(writer.buf)
            .map_err(|_| crate::Error::ChatTemplate("template produced invalid UTF-8".to_string()))
    }
}
