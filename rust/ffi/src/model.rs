//! Loading models, model facts and memory estimates.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use local_llm_engine::backend::Registry;
use local_llm_engine::gguf::GgufFile;
use local_llm_engine::session::{ContextOptions, LoadOptions, LoadedModel};

use crate::context::{ChatMessage, LlmContext};
use crate::error::{LlmError, Stage};

/// How to load a model.
#[derive(Debug, Clone, uniffi::Record)]
pub struct ModelParams {
    /// Memory-map the file instead of reading it into memory.
    pub use_mmap: bool,
    /// Use only the CPU (local-llm-rn's `compute: 'cpu'`); otherwise every detected device.
    pub cpu_only: bool,
}

/// How to create an inference context.
#[derive(Debug, Clone, uniffi::Record)]
pub struct ContextParams {
    /// Context size in tokens (0: the model's training context, capped at 4096).
    pub context_size: u32,
    /// Prompt tokens processed per forward pass (at least 1).
    pub batch_size: u32,
    /// Worker threads (0: all available cores).
    pub threads: u32,
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
    /// Milliseconds the load took.
    pub load_ms: f64,
    /// GGUF metadata as short strings (long arrays abbreviated).
    pub metadata: HashMap<String, String>,
    /// Weight matrices per device name.
    pub placement: HashMap<String, u32>,
}

/// Memory a model needs for a context size: its weights plus the KV cache.
#[derive(Debug, Clone, uniffi::Record)]
pub struct MemoryEstimate {
    /// Bytes of weights.
    pub weights_bytes: u64,
    /// Bytes of the KV cache for the context size.
    pub kv_cache_bytes: u64,
    /// The context size used for the estimate.
    pub context_size: u32,
    /// `weights_bytes + kv_cache_bytes`.
    pub total_bytes: u64,
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn weights_bytes(gguf: &GgufFile) -> u64 {
    gguf.tensors().iter().map(|t| t.n_bytes).sum()
}

/// The context size a request of `context_size` gets (0: training context capped at 4096).
fn effective_n_ctx(context_size: u32, n_ctx_train: usize) -> usize {
    if context_size == 0 {
        n_ctx_train.min(4096)
    } else {
        context_size as usize
    }
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
/// not a usable model MODEL_LOAD_FAILED.
#[uniffi::export]
pub async fn load_model(path: String, params: ModelParams) -> Result<Arc<LlmModel>, LlmError> {
    crate::run_blocking(Stage::Load, move || {
        check_path(&path)?;
        let registry = if params.cpu_only {
            Registry::with_accelerators(Vec::new())
        } else {
            Registry::detect()
        };
        let options = LoadOptions {
            use_mmap: params.use_mmap,
            registry: Some(Arc::new(registry)),
        };
        let model = LoadedModel::load(&path, &options)
            .map_err(|e| LlmError::from_engine(e, Stage::Load))?;
        Ok(Arc::new(LlmModel {
            inner: Mutex::new(Some(model)),
        }))
    })
    .await
}

fn check_path(path: &str) -> Result<(), LlmError> {
    let p = Path::new(path);
    if path.is_empty() || !p.exists() {
        return Err(LlmError::InvalidPath {
            message: format!("model file '{path}' does not exist"),
        });
    }
    if !p.is_file() {
        return Err(LlmError::InvalidPath {
            message: format!("'{path}' is not a file"),
        });
    }
    Ok(())
}

/// Estimate the memory a model file needs for `context_size` tokens from its metadata alone
/// (weights plus f16 KV cache), without loading the weights.
#[uniffi::export]
pub async fn estimate_model_memory(
    path: String,
    context_size: u32,
) -> Result<MemoryEstimate, LlmError> {
    crate::run_blocking(Stage::Load, move || {
        check_path(&path)?;
        let gguf =
            GgufFile::open_with(&path, true).map_err(|e| LlmError::from_engine(e, Stage::Load))?;
        let meta_error = |key: &str| LlmError::ModelLoadFailed {
            message: format!("invalid model: missing or invalid metadata '{key}'"),
        };
        let arch = gguf
            .get_str("general.architecture")
            .ok_or_else(|| meta_error("general.architecture"))?;
        let dim = |suffix: &str| -> Result<Option<u64>, LlmError> {
            let key = format!("{arch}.{suffix}");
            match gguf.get(&key) {
                None => Ok(None),
                Some(v) => v.as_u64().map(Some).ok_or_else(|| meta_error(&key)),
            }
        };
        let required = |suffix: &str| -> Result<u64, LlmError> {
            dim(suffix)?.ok_or_else(|| meta_error(&format!("{arch}.{suffix}")))
        };
        let n_layer = required("block_count")?;
        let n_embd = required("embedding_length")?;
        let n_head = required("attention.head_count")?.max(1);
        let n_head_kv = dim("attention.head_count_kv")?.unwrap_or(n_head);
        let k_dim = dim("attention.key_length")?.unwrap_or(n_embd / n_head);
        let v_dim = dim("attention.value_length")?.unwrap_or(k_dim);
        let n_ctx_train = dim("context_length")?.unwrap_or(4096);
        let n_ctx = effective_n_ctx(context_size, usize::try_from(n_ctx_train).unwrap_or(4096));
        let kv = u128::from(n_layer)
            * n_ctx as u128
            * u128::from(n_head_kv)
            * (u128::from(k_dim) + u128::from(v_dim))
            * 2;
        let weights = weights_bytes(&gguf);
        let kv = u64::try_from(kv).unwrap_or(u64::MAX);
        Ok(MemoryEstimate {
            weights_bytes: weights,
            kv_cache_bytes: kv,
            context_size: to_u32(n_ctx),
            total_bytes: weights.saturating_add(kv),
        })
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
        let gguf = model.gguf();
        let metadata = gguf
            .metadata()
            .iter()
            .filter(|(k, _)| !k.starts_with("tokenizer.ggml."))
            .map(|(k, v)| {
                (
                    k.clone(),
                    v.as_str().map_or_else(|| v.display_short(), str::to_string),
                )
            })
            .collect();
        Ok(ModelInfo {
            architecture: c.architecture.clone(),
            name: c.name.clone(),
            size_bytes: info.file_size,
            weights_bytes: weights_bytes(gguf),
            n_params: info.n_params,
            context_length: to_u32(c.n_ctx_train),
            embedding_length: to_u32(c.n_embd),
            n_layer: to_u32(c.n_layer),
            n_head: to_u32(c.n_head),
            n_head_kv: to_u32(c.n_head_kv),
            n_vocab: to_u32(c.n_vocab),
            has_chat_template: info.has_chat_template,
            chat_template: model.chat_template().source().to_string(),
            load_ms: info.load_ms,
            metadata,
            placement: info
                .placement
                .into_iter()
                .map(|(k, v)| (k, to_u32(v)))
                .collect(),
        })
    }

    /// Memory needed for a context of `context_size` tokens (0: the default size).
    pub fn estimate_memory(&self, context_size: u32) -> Result<MemoryEstimate, LlmError> {
        let model = self.get()?;
        let n_ctx = effective_n_ctx(context_size, model.model().config().n_ctx_train);
        let weights = weights_bytes(model.gguf());
        let kv = model.model().cache_bytes(n_ctx);
        Ok(MemoryEstimate {
            weights_bytes: weights,
            kv_cache_bytes: kv,
            context_size: to_u32(n_ctx),
            total_bytes: weights.saturating_add(kv),
        })
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
            .map_err(|e| LlmError::from_engine(e, Stage::Generate))
    }

    /// Text of `tokens` (control tokens rendered only when `special`). Unknown ids are an error.
    pub fn detokenize(&self, tokens: Vec<u32>, special: bool) -> Result<String, LlmError> {
        let model = self.get()?;
        let n_vocab = model.model().config().n_vocab;
        if let Some(bad) = tokens.iter().find(|&&t| t as usize >= n_vocab) {
            return Err(LlmError::InferenceFailed {
                message: format!("token id {bad} is outside the vocabulary ({n_vocab} tokens)"),
            });
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
            .map_err(|e| LlmError::from_engine(e, Stage::Generate))
    }

    /// A new inference context (its own KV cache) for this model.
    pub fn create_context(&self, params: ContextParams) -> Result<Arc<LlmContext>, LlmError> {
        let model = self.get()?;
        let options = ContextOptions {
            n_ctx: params.context_size as usize,
            n_batch: params.batch_size as usize,
            threads: params.threads as usize,
        };
        LlmContext::new(model, &options)
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
