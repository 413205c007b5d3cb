//! Loading a model: weights onto the devices, its tokenizer and chat template, facts about it
//! and the memory a context of it needs. Contexts (`super::Context`) share a [`LoadedModel`].

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use crate::backend::Registry;
use crate::chat::reasoning::{self, ReasoningSplitter, ReasoningTags};
use crate::chat::{
    offered_tools, validate_tools, ChatMessage, ChatTemplate, TemplateVars, Tool, ToolChoice,
};
use crate::gguf::GgufFile;
use crate::grammar::TokenTable;
use crate::model::{KvTypes, Model, ModelConfig};
use crate::tokenizer::Tokenizer;
use crate::Result;

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
    /// Whether the template writes reasoning blocks (decided once, at load).
    /// The tags of the template's reasoning blocks, if it writes any.
    reasoning: Option<ReasoningTags>,
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
pub(super) fn weights_bytes(gguf: &GgufFile) -> u64 {
    gguf.tensors().iter().map(|t| t.n_bytes).sum()
}

impl MemoryEstimate {
    /// The estimate for the model in `gguf` read from its metadata and tensor table (no
    /// weight is loaded), for a context of `n_ctx` tokens (0: the model's default) with an
    /// f16 KV cache.
    pub fn for_file(gguf: &GgufFile, n_ctx: u32) -> Result<Self> {
        Self::for_file_with(gguf, n_ctx, KvTypes::default())
    }

    /// [`MemoryEstimate::for_file`] with the KV cache stored as `types` (an
    /// [`crate::Error::InvalidOption`] when the model's heads cannot be cached as them).
    pub fn for_file_with(gguf: &GgufFile, n_ctx: u32, types: KvTypes) -> Result<Self> {
        let config = ModelConfig::from_gguf(gguf)?;
        config.check_kv_types(types)?;
        Ok(Self::new(&config, gguf, n_ctx, types))
    }

    pub(super) fn new(config: &ModelConfig, gguf: &GgufFile, n_ctx: u32, types: KvTypes) -> Self {
        let context_size = config.context_size(n_ctx);
        let weights_bytes = weights_bytes(gguf);
        let kv_cache_bytes = config.kv_cache_bytes(context_size, types);
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
            reasoning: reasoning::template_tags(template.source()),
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
    /// Whether the chat template writes reasoning blocks (`<think>` … `</think>`, or Gemma 4's
    /// `<|channel>thought` … `<channel|>`).
    pub fn thinks(&self) -> bool {
        self.reasoning.is_some()
    }

    /// Whether `prompt` ends inside a reasoning block (a template that forces thinking).
    pub fn prompt_opens_reasoning(&self, prompt: &[u32]) -> bool {
        self.reasoning.is_some_and(|tags| {
            tags.prompt_opens(&self.detokenize(&prompt[prompt.len().saturating_sub(8)..], true))
        })
    }

    /// A splitter for this model's reasoning blocks (`opened`: the prompt opened one).
    pub(crate) fn reasoning_splitter(&self, opened: bool) -> ReasoningSplitter {
        let tags = self.reasoning.unwrap_or(reasoning::THINK);
        ReasoningSplitter::new(tags.open, tags.close, opened)
    }

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

    /// Memory this model needs with a context of `n_ctx` tokens (0: the model's default) and
    /// its KV cache stored as `types` (an [`crate::Error::InvalidOption`] when its heads cannot
    /// be cached as them).
    pub fn estimate_memory(&self, n_ctx: u32, types: KvTypes) -> Result<MemoryEstimate> {
        let config = self.model.config();
        config.check_kv_types(types)?;
        Ok(MemoryEstimate::new(config, &self.gguf, n_ctx, types))
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
        self.chat_tokens_with_vars(messages, tools, choice, &TemplateVars::new())
    }

    /// [`LoadedModel::chat_tokens_with_tools`] with extra template variables (see
    /// [`TemplateVars`]).
    pub fn chat_tokens_with_vars(
        &self,
        messages: &[ChatMessage],
        tools: &[Tool],
        choice: &ToolChoice,
        vars: &TemplateVars,
    ) -> Result<Vec<u32>> {
        validate_tools(tools, choice)?;
        let offered = offered_tools(tools, choice);
        self.template
            .tokens_with_vars(&self.tokenizer, messages, offered, choice, true, vars)
    }
}
