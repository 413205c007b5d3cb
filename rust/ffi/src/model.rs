//! Loading models, model facts and memory estimates.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use local_llm_engine::gguf::GgufFile;
use local_llm_engine::model::KvTypes;
use local_llm_engine::session::{
    self as engine, ContextOptions, LoadOptions, LoadedModel, MemoryEstimate,
};

use crate::context::{CancelToken, LlmContext};
use crate::error::{LlmError, Stage};
use crate::records::{to_u32, ChatMessage};

/// Which messages `fit_chat` may drop (local-llm-js-core's overflow strategies).
#[derive(Debug, Clone, Copy, uniffi::Enum)]
pub enum ChatTrim {
    /// Keep the leading system messages, drop the oldest others until the prompt fits.
    TruncateOldest,
    /// Keep every system message and the longest run of newest others that fits.
    SlidingWindow,
}

/// What `fit_chat` kept.
#[derive(Debug, Clone, uniffi::Record)]
pub struct ChatFit {
    /// Indices of the kept messages, in order.
    pub kept: Vec<u32>,
    /// Prompt tokens of the kept messages (generation prompt included).
    pub prompt_tokens: u32,
}

/// The tensors of one type in a model file.
#[derive(Debug, Clone, uniffi::Record)]
pub struct TensorTypeCount {
    /// The type's name as llama.cpp prints it (`Q4_K`, `F32`, ...).
    pub type_name: String,
    /// How many tensors have it.
    pub count: u64,
    /// Their data, in bytes.
    pub bytes: u64,
}

/// A model file's facts from its header alone (no weight loaded).
#[derive(Debug, Clone, uniffi::Record)]
pub struct ModelFileInfo {
    /// `general.architecture`.
    pub architecture: String,
    /// `general.name`, if present.
    pub name: Option<String>,
    /// Whether this engine runs the architecture and finds the hyper-parameters it needs.
    pub supported: bool,
    /// File size in bytes.
    pub size_bytes: u64,
    /// GGUF format version.
    pub gguf_version: u32,
    /// Parameters (elements of every tensor).
    pub n_params: u64,
    /// Bytes of tensor data.
    pub weights_bytes: u64,
    /// llama-quantize's name of `general.file_type` (`Q4_K_M`), when present and known.
    pub file_type: Option<String>,
    /// Tensor counts and bytes per type, most bytes first.
    pub tensor_types: Vec<TensorTypeCount>,
    /// Training context length.
    pub context_length: Option<u64>,
    /// Embedding (hidden) size.
    pub embedding_length: Option<u64>,
    /// Transformer layers.
    pub n_layer: Option<u64>,
    /// Attention heads.
    pub n_head: Option<u64>,
    /// Key/value heads.
    pub n_head_kv: Option<u64>,
    /// Vocabulary size.
    pub n_vocab: Option<u64>,
    /// `tokenizer.ggml.model` (`gpt2`, `llama`, ...).
    pub tokenizer: Option<String>,
    /// The file's chat template, when it has one.
    pub chat_template: Option<String>,
    /// Weights plus f16 KV cache for the context asked for, when the hyper-parameters are there.
    pub memory: Option<MemoryEstimate>,
    /// GGUF metadata as short strings, without the tokenizer's arrays.
    pub metadata: HashMap<String, String>,
}

/// Describe a model file from its header (architecture, parameters, quantization, context,
/// vocabulary, chat template, memory for `context_size` tokens, 0: the model's default)
/// without loading its weights.
#[uniffi::export]
pub async fn inspect_model(path: String, context_size: u32) -> Result<ModelFileInfo, LlmError> {
    crate::run_blocking(Stage::Inspect, move || {
        crate::error::check_path(&path)?;
        let d = local_llm_engine::session::inspect(&path, context_size)
            .map_err(|e| LlmError::from_engine(e, Stage::Inspect))?;
        Ok(ModelFileInfo {
            architecture: d.architecture,
            name: d.name,
            supported: d.supported,
            size_bytes: d.file_size,
            gguf_version: d.gguf_version,
            n_params: d.n_params,
            weights_bytes: d.weights_bytes,
            file_type: d.file_type,
            tensor_types: d
                .tensor_types
                .into_iter()
                .map(|t| TensorTypeCount {
                    type_name: t.type_name,
                    count: t.count,
                    bytes: t.bytes,
                })
                .collect(),
            context_length: d.context_length,
            embedding_length: d.embedding_length,
            n_layer: d.n_layer,
            n_head: d.n_head,
            n_head_kv: d.n_head_kv,
            n_vocab: d.n_vocab,
            tokenizer: d.tokenizer,
            chat_template: d.chat_template,
            memory: d.memory,
            metadata: d.metadata.into_iter().collect(),
        })
    })
    .await
}

/// Facts about a loaded model.
#[derive(Debug, Clone, uniffi::Record)]
pub struct ModelInfo {
    /// Architecture, e.g. "llama" or "gemma3".
    pub architecture: String,
    /// The model's name from its metadata, when present.
    pub name: Option<String>,
    /// File size in bytes.
    pub size_bytes: u64,
    /// Bytes of tensor data (the weights).
    pub weights_bytes: u64,
    /// Number of parameters.
    pub n_params: u64,
    /// Training context length in tokens.
    pub context_length: u32,
    /// Embedding (hidden) size.
    pub embedding_length: u32,
    /// Number of transformer layers.
    pub n_layer: u32,
    /// Attention heads.
    pub n_head: u32,
    /// Key/value heads.
    pub n_head_kv: u32,
    /// Vocabulary size.
    pub n_vocab: u32,
    /// Whether the file carries its own chat template (otherwise a built-in one is used).
    pub has_chat_template: bool,
    /// The chat template source in use.
    pub chat_template: String,
    /// Whether the vocabulary has fill-in-the-middle tokens (prefix, suffix and middle).
    pub infill_supported: bool,
    /// Milliseconds the load took.
    pub load_ms: f64,
    /// GGUF metadata as short strings (long arrays abbreviated).
    pub metadata: HashMap<String, String>,
    /// Weight matrices per device name.
    pub placement: HashMap<String, u32>,
    /// How the model pools embeddings by default: "none", "mean", "cls", "last" or "rank".
    pub pooling_type: String,
    /// An encoder (BERT family): it embeds and ranks but cannot generate text.
    pub is_encoder: bool,
    /// A reranker: it has a classification head for `rerank`.
    pub can_rerank: bool,
}

/// A loaded model. Disposing it releases the weights once no context uses them.
#[derive(uniffi::Object)]
pub struct LlmModel {
    inner: Mutex<Option<Arc<LoadedModel>>>,
}

impl LlmModel {
    fn slot(&self) -> MutexGuard<'_, Option<Arc<LoadedModel>>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The engine model, or NOT_INITIALIZED after `dispose`.
    pub(crate) fn get(&self) -> Result<Arc<LoadedModel>, LlmError> {
        self.slot()
            .clone()
            .ok_or_else(|| LlmError::disposed("model"))
    }
}

/// Load a GGUF model (on a worker thread). A missing file gives INVALID_PATH, a file that is
/// not a usable model MODEL_LOAD_FAILED. A load cancelled with `cancel` before it starts or
/// before it returns fails with a "cancelled" MODEL_LOAD_FAILED (the weights are released).
#[uniffi::export]
pub async fn load_model(
    path: String,
    options: LoadOptions,
    cancel: Option<Arc<CancelToken>>,
) -> Result<Arc<LlmModel>, LlmError> {
    let cancelled = move || cancel.as_ref().is_some_and(|c| c.is_cancelled());
    crate::run_blocking(Stage::Load, move || {
        if cancelled() {
            return Err(LlmError::cancelled(Stage::Load));
        }
        crate::error::check_path(&path)?;
        let model = LoadedModel::load(&path, &options)
            .map_err(|e| LlmError::from_engine(e, Stage::Load))?;
        if cancelled() {
            return Err(LlmError::cancelled(Stage::Load));
        }
        Ok(Arc::new(LlmModel {
            inner: Mutex::new(Some(model)),
        }))
    })
    .await
}

/// The KV cache types named `k` and `v` (`None`: the context default, f16).
fn kv_types(k: Option<String>, v: Option<String>) -> Result<KvTypes, LlmError> {
    let defaults = ContextOptions::default();
    let k = k.unwrap_or(defaults.cache_type_k);
    let v = v.unwrap_or(defaults.cache_type_v);
    KvTypes::named(&k, &v).map_err(|e| LlmError::from_engine(e, Stage::EstimateMemory))
}

/// Estimate the memory a model file needs for `context_size` tokens (0: the model's default)
/// with its KV cache stored as `cache_type_k` / `cache_type_v` (`None`: f16), from its
/// metadata alone, without loading the weights.
#[uniffi::export]
pub async fn estimate_model_memory(
    path: String,
    context_size: u32,
    cache_type_k: Option<String>,
    cache_type_v: Option<String>,
) -> Result<MemoryEstimate, LlmError> {
    crate::run_blocking(Stage::EstimateMemory, move || {
        crate::error::check_path(&path)?;
        let types = kv_types(cache_type_k, cache_type_v)?;
        GgufFile::open_with(&path, true)
            .and_then(|gguf| MemoryEstimate::for_file_with(&gguf, context_size, types))
            .map_err(|e| LlmError::from_engine(e, Stage::EstimateMemory))
    })
    .await
}

#[uniffi::export]
impl LlmModel {
    /// Facts about the model.
    pub fn info(&self) -> Result<ModelInfo, LlmError> {
        let model = self.get()?;
        let info = model.info();
        let c = &info.config;
        let metadata = local_llm_engine::session::metadata_strings(model.gguf())
            .into_iter()
            .collect();
        Ok(ModelInfo {
            architecture: c.architecture.clone(),
            name: c.name.clone(),
            size_bytes: info.file_size,
            weights_bytes: info.weights_bytes,
            n_params: info.n_params,
            context_length: to_u32(c.n_ctx_train),
            embedding_length: to_u32(c.n_embd),
            n_layer: to_u32(c.n_layer),
            n_head: to_u32(c.n_head),
            n_head_kv: to_u32(c.n_head_kv),
            n_vocab: to_u32(c.n_vocab),
            has_chat_template: info.has_chat_template,
            chat_template: model.chat_template().source().to_string(),
            infill_supported: {
                let fim = model.tokenizer().fim();
                fim.prefix.is_some() && fim.suffix.is_some() && fim.middle.is_some()
            },
            load_ms: info.load_ms,
            metadata,
            placement: info
                .placement
                .into_iter()
                .map(|(k, v)| (k, to_u32(v)))
                .collect(),
            pooling_type: model.model().pooling().name().to_string(),
            is_encoder: model.model().is_encoder(),
            can_rerank: model.model().can_rank(),
        })
    }

    /// Memory needed for a context of `context_size` tokens (0: the model's default) with the
    /// KV cache stored as `cache_type_k` / `cache_type_v` (`None`: f16).
    pub fn estimate_memory(
        &self,
        context_size: u32,
        cache_type_k: Option<String>,
        cache_type_v: Option<String>,
    ) -> Result<MemoryEstimate, LlmError> {
        let types = kv_types(cache_type_k, cache_type_v)?;
        self.get()?
            .estimate_memory(context_size, types)
            .map_err(|e| LlmError::from_engine(e, Stage::EstimateMemory))
    }

    /// Token ids of `text`; `add_special` adds BOS/EOS as the model asks, `parse_special` turns
    /// special-token text into those tokens.
    pub fn tokenize(
        &self,
        text: String,
        add_special: bool,
        parse_special: bool,
    ) -> Result<Vec<u32>, LlmError> {
        self.get()?
            .tokenize(&text, add_special, parse_special)
            .map_err(|e| LlmError::from_engine(e, Stage::Tokenize))
    }

    /// Text of `tokens` (control tokens rendered only when `special`). Unknown ids are an error.
    pub fn detokenize(&self, tokens: Vec<u32>, special: bool) -> Result<String, LlmError> {
        let model = self.get()?;
        let n_vocab = model.model().config().n_vocab;
        if let Some(bad) = tokens.iter().find(|&&t| t as usize >= n_vocab) {
            return Err(Stage::Tokenize.error(&format!(
                "token id {bad} is outside the vocabulary ({n_vocab} tokens)"
            )));
        }
        Ok(model.detokenize(&tokens, special))
    }

    /// Render `messages` with the model's chat template.
    pub fn apply_chat_template(
        &self,
        messages: Vec<ChatMessage>,
        add_generation_prompt: bool,
    ) -> Result<String, LlmError> {
        let messages: Vec<_> = messages.into_iter().map(ChatMessage::into_engine).collect();
        self.get()?
            .apply_chat_template(&messages, add_generation_prompt)
            .map_err(|e| LlmError::from_engine(e, Stage::Template))
    }

    /// Fit a chat into `available` prompt tokens (local-llm-js-core's `contextOverflow`),
    /// off the caller's thread: all messages when they fit or `trim` is none, else the
    /// strategy's head of system messages and the longest run of newest messages that fits.
    /// O(n log n) in the messages (a binary search over the run's length).
    pub async fn fit_chat(
        &self,
        messages: Vec<ChatMessage>,
        trim: Option<ChatTrim>,
        available: u32,
    ) -> Result<ChatFit, LlmError> {
        let model = self.get()?;
        crate::run_blocking(Stage::Template, move || {
            let messages: Vec<_> = messages.into_iter().map(ChatMessage::into_engine).collect();
            let trim = trim.map(|t| match t {
                ChatTrim::TruncateOldest => engine::ChatTrim::TruncateOldest,
                ChatTrim::SlidingWindow => engine::ChatTrim::SlidingWindow,
            });
            let fit = model
                .fit_chat(&messages, trim, available as usize)
                .map_err(|e| LlmError::from_engine(e, Stage::Template))?;
            Ok(ChatFit {
                kept: fit.kept.into_iter().map(to_u32).collect(),
                prompt_tokens: to_u32(fit.prompt_tokens),
            })
        })
        .await
    }

    /// A new inference context (its own KV cache) for this model.
    pub fn create_context(&self, options: ContextOptions) -> Result<Arc<LlmContext>, LlmError> {
        LlmContext::new(self.get()?, &options)
    }

    /// Release the model (contexts made from it keep their own reference until disposed).
    pub fn dispose(&self) {
        self.slot().take();
    }

    /// Whether `dispose` was called.
    pub fn is_disposed(&self) -> bool {
        self.slot().is_none()
    }
}
