//! What a model file says about itself, read from its GGUF header without loading any weight
//! (`local-llm info`, `Model.inspect` in TypeScript): the first thing an app runs on a file it
//! downloaded, to show a model picker or decide whether the file fits.

use std::path::Path;

use super::loaded::{weights_bytes, MemoryEstimate};
use crate::gguf::GgufFile;
use crate::model::{KvTypes, ModelConfig, SUPPORTED_ARCHITECTURES};
use crate::Result;

/// The tensors of one type in a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorTypeCount {
    /// The type's name as llama.cpp prints it (`Q4_K`, `F32`, ...).
    pub type_name: String,
    /// How many tensors have it.
    pub count: u64,
    /// Their data, in bytes.
    pub bytes: u64,
}

/// A GGUF model file's facts, from its header alone.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelFileInfo {
    /// `general.architecture`.
    pub architecture: String,
    /// `general.name`, if present.
    pub name: Option<String>,
    /// Whether this engine runs the architecture and finds the hyper-parameters it needs.
    pub supported: bool,
    /// File size in bytes.
    pub file_size: u64,
    /// GGUF format version.
    pub gguf_version: u32,
    /// Parameters (elements of every tensor).
    pub n_params: u64,
    /// Bytes of tensor data.
    pub weights_bytes: u64,
    /// The file type `general.file_type` names, as llama-quantize names it (`Q4_K_M`), when the
    /// key is present and known.
    pub file_type: Option<String>,
    /// Tensor counts and bytes per type, most bytes first.
    pub tensor_types: Vec<TensorTypeCount>,
    /// `{arch}.context_length`: the context the model was trained with.
    pub context_length: Option<u64>,
    /// `{arch}.embedding_length`.
    pub embedding_length: Option<u64>,
    /// `{arch}.block_count`.
    pub n_layer: Option<u64>,
    /// `{arch}.attention.head_count`.
    pub n_head: Option<u64>,
    /// `{arch}.attention.head_count_kv`.
    pub n_head_kv: Option<u64>,
    /// Tokens in `tokenizer.ggml.tokens`.
    pub n_vocab: Option<u64>,
    /// `tokenizer.ggml.model` (`gpt2`, `llama`, ...).
    pub tokenizer: Option<String>,
    /// `tokenizer.chat_template`, when the file has one.
    pub chat_template: Option<String>,
    /// Weights plus an f16 KV cache for the context asked for, when the hyper-parameters it
    /// needs are present (this engine's reading of them; for the architectures it supports).
    pub memory: Option<MemoryEstimate>,
    /// Every metadata pair but the tokenizer's arrays (`tokenizer.ggml.*`), values as text
    /// (arrays shortened: `[type; N] [first items, ...]`).
    pub metadata: Vec<(String, String)>,
}

/// Read `path`'s header: architecture, size, parameters, quantization, context length,
/// vocabulary, chat template and the memory a context of `n_ctx` tokens (0: the model's default)
/// would take. The file is memory-mapped; only the header is parsed (bounded as for every file
/// this engine opens: lengths checked before anything is allocated).
pub fn inspect(path: impl AsRef<Path>, n_ctx: u32) -> Result<ModelFileInfo> {
    let gguf = GgufFile::open(path)?;
    Ok(describe(&gguf, n_ctx))
}

/// [`inspect`] on an open file.
pub fn describe(gguf: &GgufFile, n_ctx: u32) -> ModelFileInfo {
    let architecture = gguf
        .get_str("general.architecture")
        .unwrap_or_default()
        .to_string();
    let key = |k: &str| gguf.get_u64(&format!("{architecture}.{k}"));
    let mut tensor_types: Vec<TensorTypeCount> = Vec::new();
    for t in gguf.tensors() {
        let name = t.ty.name();
        match tensor_types.iter_mut().find(|c| c.type_name == name) {
            Some(c) => {
                c.count += 1;
                c.bytes = c.bytes.saturating_add(t.n_bytes);
            }
            None => tensor_types.push(TensorTypeCount {
                type_name: name.to_string(),
                count: 1,
                bytes: t.n_bytes,
            }),
        }
    }
    tensor_types.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.type_name.cmp(&b.type_name)));
    let config = ModelConfig::from_gguf(gguf).ok();
    // Per-layer head counts (Gemma 4's arrays): the most any layer has.
    let (heads, heads_kv) = config
        .as_ref()
        .map(|c| (c.n_head as u64, c.n_head_kv as u64))
        .unzip();
    let metadata = metadata_strings(gguf);
    ModelFileInfo {
        supported: SUPPORTED_ARCHITECTURES.contains(&architecture.as_str()) && config.is_some(),
        name: gguf.get_str("general.name").map(str::to_string),
        file_size: gguf.file_size(),
        gguf_version: gguf.version(),
        n_params: gguf
            .tensors()
            .iter()
            .fold(0u64, |n, t| n.saturating_add(t.n_elements())),
        weights_bytes: weights_bytes(gguf),
        file_type: gguf
            .get_u64("general.file_type")
            .and_then(file_type_name)
            .map(str::to_string),
        tensor_types,
        context_length: key("context_length"),
        embedding_length: key("embedding_length"),
        n_layer: key("block_count"),
        n_head: key("attention.head_count").or(heads),
        n_head_kv: key("attention.head_count_kv")
            .or(heads_kv)
            .or_else(|| key("attention.head_count")),
        n_vocab: gguf
            .get_array("tokenizer.ggml.tokens")
            .map(|a| a.len() as u64),
        tokenizer: gguf.get_str("tokenizer.ggml.model").map(str::to_string),
        chat_template: gguf.get_str("tokenizer.chat_template").map(str::to_string),
        memory: config.map(|c| MemoryEstimate::new(&c, gguf, n_ctx, KvTypes::default())),
        metadata,
        architecture,
    }
}

/// Every metadata pair of `gguf` but the tokenizer's arrays (`tokenizer.ggml.*`), values as
/// text: strings whole, other values shortened ([`crate::gguf::Value::display_short`]).
pub fn metadata_strings(gguf: &GgufFile) -> Vec<(String, String)> {
    gguf.metadata()
        .filter(|(k, _)| !k.starts_with("tokenizer.ggml."))
        .map(|(k, v)| {
            let text = v.as_str().map_or_else(|| v.display_short(), str::to_string);
            (k.to_string(), text)
        })
        .collect()
}

/// llama.cpp's name of a `general.file_type` value (`enum llama_ftype` in llama.h, without its
/// `LLAMA_FTYPE_MOSTLY_` / `LLAMA_FTYPE_ALL_` prefix), as llama-quantize prints it.
pub fn file_type_name(code: u64) -> Option<&'static str> {
    Some(match code {
        0 => "F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        7 => "Q8_0",
        8 => "Q5_0",
        9 => "Q5_1",
        10 => "Q2_K",
        11 => "Q3_K_S",
        12 => "Q3_K_M",
        13 => "Q3_K_L",
        14 => "Q4_K_S",
        15 => "Q4_K_M",
        16 => "Q5_K_S",
        17 => "Q5_K_M",
        18 => "Q6_K",
        19 => "IQ2_XXS",
        20 => "IQ2_XS",
        21 => "Q2_K_S",
        22 => "IQ3_XS",
        23 => "IQ3_XXS",
        24 => "IQ1_S",
        25 => "IQ4_NL",
        26 => "IQ3_S",
        27 => "IQ3_M",
        28 => "IQ2_S",
        29 => "IQ2_M",
        30 => "IQ4_XS",
        31 => "IQ1_M",
        32 => "BF16",
        36 => "TQ1_0",
        37 => "TQ2_0",
        38 => "MXFP4_MOE",
        39 => "NVFP4",
        40 => "Q1_0",
        41 => "Q2_0",
        _ => return None,
    })
}
