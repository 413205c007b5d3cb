//! `local-llm-engine`: on-device LLM inference in pure Rust.
//!
//! Module map (mirrors the architecture):
//! - [`gguf`]: memory-mapped GGUF reader with full validation.
//! - [`quant`]: tensor element types, block formats, dequantization and dot-product kernels.
//! - [`convert`]: writing a model file in another format: F32/F16/BF16 GGUF → quantized GGUF
//!   like llama-quantize (`quantize_file`), or a float copy (`convert_file`).
//! - [`backend`]: device registry (the CPU always; accelerators such as the IBM Z NNPA
//!   when present), weight placement and the matmul engine.
//! - [`model`]: transformer architectures (llama family, qwen2/qwen3, gemma3).
//! - [`tokenizer`]: SentencePiece-style and GPT-2 BPE tokenizers built from GGUF metadata.
//! - [`chat`]: chat-template rendering (Jinja via minijinja), built-in templates, tool calling.
//! - [`sampling`]: logit processing, sampling, stop-string matching and token logprobs.
//! - [`session`]: loading models, contexts with a KV cache, generation and streaming.

#[macro_use]
mod macros;

mod alloc_meter;
pub mod backend;
pub mod chat;
pub mod convert;
pub mod error;
mod fallible;
pub mod files;
mod fnv;
pub mod gguf;
pub mod grammar;
pub mod log;
pub mod model;
pub mod quant;
pub mod sampling;
pub mod session;
pub mod tokenizer;

pub use error::{Error, Result};

/// The system allocator, counting what metered threads hold: chat-template renders are
/// limited by it (see `alloc_meter`).
#[global_allocator]
static ALLOCATOR: alloc_meter::CountingAllocator = alloc_meter::CountingAllocator;
