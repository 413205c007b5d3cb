//! Transformer architectures: `archs.rs` describes each one over the shared [`transformer`]
//! block, `build.rs` loads a file into it.

mod archs;
mod attention;
mod batch;
mod build;
mod config;
mod conv_state;
mod delta_net;
mod embedding;
mod ffn;
mod gemma3n;
mod gemma4;
mod kv_cache;
mod layer;
mod lora;
mod lora_kernels;
mod mamba2;
mod matrix_state;
mod mixer;
mod moe;
mod norm;
pub mod ops;
mod pooling;
mod ropes;
mod shift;
mod short_conv;
mod transformer;
mod weights;

use std::collections::BTreeMap;
use std::sync::Arc;

pub use batch::SeqTokens;
pub use config::{DeltaShape, LayerShape, Mamba2Shape, ModelConfig};
pub(crate) use conv_state::ROLLBACK as RECURRENT_ROLLBACK;
pub(crate) use kv_cache::{bytes_of, bytes_of_mut};
pub use kv_cache::{KvCache, KvTypes, KV_CACHE_TYPES};
pub use lora::{ActiveLora, LoraAdapter};
pub use pooling::{normalize, pool, Pooling};
pub use transformer::Output;

use crate::backend::{Registry, Threads};
use crate::gguf::GgufFile;
use crate::{Error, Result};

/// Architectures this engine runs (`general.architecture` values): the names of
/// `archs.rs`'s descriptions, in their order.
pub const SUPPORTED_ARCHITECTURES: [&str; archs::ARCHS.len()] = archs::names();

/// A loaded model: its weights (placed on devices) and configuration.
pub struct Model {
    net: transformer::Transformer,
}

impl Model {
    /// Build the model described by `gguf`, placing weights with `registry`.
    pub fn from_gguf(gguf: &Arc<GgufFile>, registry: &Registry) -> Result<Self> {
        let arch = gguf
            .get_str("general.architecture")
            .ok_or_else(|| Error::InvalidModel("missing metadata 'general.architecture'".into()))?;
        let Some(description) = archs::find(arch) else {
            return Err(Error::UnsupportedArchitecture(arch.to_string()));
        };
        let net = build::load(gguf, registry, description)?;
        Ok(Model { net })
    }

    /// Hyper-parameters.
    pub fn config(&self) -> &ModelConfig {
        &self.net.config
    }

    /// Whether this is an embedding model (the BERT-family encoders, EmbeddingGemma,
    /// llama-embed): hidden states to pool, no output head (so no text generation).
    pub fn is_encoder(&self) -> bool {
        self.net.output.is_none()
    }

    /// Whether tokens attend only to earlier ones (false: bidirectional, as BERT).
    pub fn is_causal(&self) -> bool {
        self.net.causal
    }

    /// The pooling the file asks for (`{arch}.pooling_type`; mean when it does not say).
    pub fn pooling(&self) -> Pooling {
        self.net.pooling
    }

    /// An embedding after the model's dense projections (EmbeddingGemma's; `pooled` as it is
    /// for other models). [`Error::InvalidOption`] for a vector of the wrong length.
    pub fn project(&self, pooled: Vec<f32>, threads: &Threads) -> Result<Vec<f32>> {
        let Some(dense) = &self.net.dense_out else {
            return Ok(pooled);
        };
        if pooled.len() != self.net.config.n_embd {
            return Err(Error::InvalidOption(format!(
                "an embedding of {} values for a model of {}",
                pooled.len(),
                self.net.config.n_embd
            )));
        }
        dense.project(&pooled, threads)
    }

    /// The length of the model's embeddings: `n_embd`, or what its dense projections give
    /// (llama.cpp's `llama_model_n_embd_out`).
    pub fn n_embd_out(&self) -> usize {
        match &self.net.dense_out {
            Some(d) => d.width().unwrap_or(self.net.config.n_embd),
            None => self.net.config.n_embd,
        }
    }

    /// Whether the model has a classification head for [`Pooling::Rank`].
    pub fn can_rank(&self) -> bool {
        self.net.classifier.is_some()
    }

    /// The state a reranker's head reads ([`Pooling::Rank`]), as llama.cpp chooses it: the
    /// mean when the file says so (`{arch}.classifier.pooling_type`, ModernBERT's default), the
    /// last token's for causal models, else the first token's.
    pub fn rank_pooling(&self) -> Pooling {
        match (&self.net.classifier, self.net.causal) {
            (Some(head), _) if head.mean => Pooling::Mean,
            (_, true) => Pooling::Last,
            _ => Pooling::Cls,
        }
    }

    /// The classification head's scores of a pooled state (`n_embd` values);
    /// [`Error::InvalidOption`] without a head.
    pub fn classify(&self, pooled: &[f32], threads: &Threads) -> Result<Vec<f32>> {
        let Some(head) = &self.net.classifier else {
            return Err(Error::InvalidOption(
                "this model has no classification head: rank pooling needs a reranker".into(),
            ));
        };
        if pooled.len() != self.net.config.n_embd {
            return Err(Error::InvalidOption(format!(
                "a pooled state of {} values for a model of {}",
                pooled.len(),
                self.net.config.n_embd
            )));
        }
        head.scores(pooled, threads)
    }

    /// An empty KV cache for `n_ctx` positions stored as `types` ([`Error::InsufficientMemory`]
    /// when it cannot be allocated; [`Error::InvalidOption`] for a type this model's heads
    /// cannot be cached in).
    pub fn new_cache(&self, n_ctx: usize, types: KvTypes) -> Result<KvCache> {
        let c = &self.net.config;
        c.check_kv_types(types)?;
        let widths: Vec<(usize, usize)> = (c.layers.iter().enumerate())
            .map(|(il, layer)| match layer.has_kv(il) {
                true => layer.kv_widths(),
                false => (0, 0),
            })
            .collect();
        KvCache::new(n_ctx, &widths, types)?
            .with_conv(&c.conv_layers())?
            .with_matrix_states(&c.matrix_state_layers())
    }

    /// Run `tokens` after the cache's contents (see [`Output`]).
    ///
    /// A NaN or infinite value in the output is an [`Error::InvalidModel`]: it comes from
    /// corrupt tensor data (no sampler can choose a token from it), and checking the output
    /// costs one pass over it, far less than the matrix products that made it.
    pub fn forward(
        &self,
        tokens: &[u32],
        cache: &mut KvCache,
        threads: &Threads,
        output: Output,
    ) -> Result<Vec<f32>> {
        let mut out = Vec::new();
        let seq = SeqTokens { tokens, cache };
        self.forward_batch(&mut [seq], threads, output, &mut out)?;
        Ok(out)
    }

    /// Run several sequences in one pass, each after its own cache's contents; the result
    /// holds what `output` asks for, sequence after sequence ([`Output::LastLogits`]: one row
    /// of `n_vocab` logits per sequence). Every sequence's result equals what
    /// [`Model::forward`] gives it alone, bit for bit. Checked like [`Model::forward`]. The
    /// result replaces the contents of `out`, whose memory is reused (a decoding loop passes
    /// the same buffer every step).
    pub fn forward_batch(
        &self,
        seqs: &mut [SeqTokens<'_>],
        threads: &Threads,
        output: Output,
        out: &mut Vec<f32>,
    ) -> Result<()> {
        self.forward_batch_with(seqs, threads, output, out, &[])
    }

    /// [`Model::forward_batch`] with LoRA adapters applied to every matrix product they adapt.
    pub fn forward_batch_with(
        &self,
        seqs: &mut [SeqTokens<'_>],
        threads: &Threads,
        output: Output,
        out: &mut Vec<f32>,
        lora: &[ActiveLora],
    ) -> Result<()> {
        self.net.forward(seqs, threads, output, out, lora)?;
        // Scanned on every thread: a batch's logits are large, and this runs every step.
        let bad = std::sync::Mutex::new(None);
        threads.for_each_rows(out, 1, |_, rows| {
            if let Some(&x) = rows.iter().find(|x| !x.is_finite()) {
                *bad.lock().unwrap_or_else(|e| e.into_inner()) = Some(x);
            }
        });
        match bad.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Some(x) => Err(Error::InvalidModel(format!(
                "the model computed a non-finite value ({x}): its tensor data is corrupt"
            ))),
            None => Ok(()),
        }
    }

    /// Every matrix a token is multiplied with (layers and output head).
    fn matmul_weights<'a>(&'a self) -> impl Iterator<Item = &'a crate::backend::Weight> {
        self.net
            .layers
            .iter()
            .flat_map(|l| {
                let dense =
                    |f: &'a transformer::Dense| [&f.up, &f.down].into_iter().chain(f.gate.as_ref());
                let ffn: Box<dyn Iterator<Item = &crate::backend::Weight>> = match &l.ffn {
                    transformer::Ffn::Dense(f) => Box::new(dense(f)),
                    transformer::Ffn::Moe(m) => Box::new(m.weights()),
                    transformer::Ffn::DenseAndExperts(b) => {
                        Box::new(dense(&b.dense).chain(b.moe.weights()))
                    }
                };
                let ple = l.per_layer.as_ref().map(|p| [&p.gate, &p.proj]);
                let altup = l
                    .altup
                    .as_ref()
                    .map(|a| [&a.router, &a.laurel_l, &a.laurel_r]);
                [&l.wq, &l.wo]
                    .into_iter()
                    .chain(l.wk.as_ref())
                    .chain(l.wv.as_ref())
                    .chain(ffn)
                    .chain(ple.into_iter().flatten())
                    .chain(altup.into_iter().flatten())
            })
            .chain(self.net.output.as_ref())
            .chain(self.net.per_layer_inputs.as_ref().map(|p| &p.model_proj))
            .chain(
                self.net
                    .altup
                    .iter()
                    .flat_map(|(a, _)| a.proj.iter().chain(&a.unembd)),
            )
    }

    /// Bytes of weights a decoding step reads: every matrix once, of a mixture of experts the
    /// router, the shared expert and `n_used` experts' worth (the embedding lookup of one row
    /// is negligible). Divided into the memory read bandwidth, this bounds tokens/s.
    pub fn weight_bytes_per_token(&self) -> u64 {
        let all: u64 = self.matmul_weights().map(|w| w.bytes().len() as u64).sum();
        let moe = self.net.layers.iter().filter_map(|l| match &l.ffn {
            transformer::Ffn::Moe(m) => Some(m),
            transformer::Ffn::DenseAndExperts(b) => Some(&b.moe),
            transformer::Ffn::Dense(_) => None,
        });
        let unused: u64 = moe
            .map(|m| m.weights().map(|w| w.bytes().len() as u64).sum::<u64>() - m.bytes_per_token())
            .sum();
        all - unused
    }

    /// How many weight matrices each device holds.
    pub fn placement(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for w in self.matmul_weights() {
            *counts.entry(w.device_name().to_string()).or_insert(0) += 1;
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A GGUF v3 file with only `general.architecture` set.
    fn gguf_with_architecture(arch: &str) -> GgufFile {
        gguf_with(arch, &[])
    }

    /// A GGUF v3 file with `general.architecture` and the u32 values `{arch}.{key}` of `keys`.
    fn gguf_with(arch: &str, keys: &[(&str, u32)]) -> GgufFile {
        let mut b = Vec::new();
        b.extend_from_slice(b"GGUF");
        b.extend_from_slice(&3u32.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes()); // tensors
        b.extend_from_slice(&(1 + keys.len() as u64).to_le_bytes()); // metadata pairs
        let key = "general.architecture";
        b.extend_from_slice(&(key.len() as u64).to_le_bytes());
        b.extend_from_slice(key.as_bytes());
        b.extend_from_slice(&8u32.to_le_bytes()); // string
        b.extend_from_slice(&(arch.len() as u64).to_le_bytes());
        b.extend_from_slice(arch.as_bytes());
        for (key, value) in keys {
            let key = format!("{arch}.{key}");
            b.extend_from_slice(&(key.len() as u64).to_le_bytes());
            b.extend_from_slice(key.as_bytes());
            b.extend_from_slice(&4u32.to_le_bytes()); // u32
            b.extend_from_slice(&value.to_le_bytes());
        }
        GgufFile::from_bytes(b).expect("valid GGUF")
    }

    #[test]
    fn recurrent_states_too_large_to_hold_are_refused_before_allocating() {
        let common = [
            ("embedding_length", 64),
            ("block_count", 4),
            ("attention.head_count", 4),
            ("ssm.conv_kernel", 4),
            ("ssm.group_count", 1),
        ];
        let qwen35 = [
            ("ssm.time_step_rank", 1 << 20),
            ("ssm.state_size", 1 << 20),
            ("ssm.inner_size", 1 << 20),
        ];
        let mamba = [
            ("ssm.time_step_rank", 8),
            ("ssm.state_size", 1 << 20),
            ("ssm.inner_size", 1 << 20),
        ];
        for (arch, extra) in [("qwen35", &qwen35[..]), ("granitehybrid", &mamba[..])] {
            let mut keys = common.to_vec();
            keys.extend_from_slice(extra);
            let gguf = gguf_with(arch, &keys);
            match ModelConfig::from_gguf(&gguf) {
                Err(Error::InvalidModel(m)) => assert!(m.contains("too large"), "{arch}: {m}"),
                other => panic!("{arch}: {other:?}"),
            }
        }
    }

    #[test]
    fn unknown_architecture_is_a_typed_error_naming_it() {
        let gguf = Arc::new(gguf_with_architecture("mamba"));
        match Model::from_gguf(&gguf, &Registry::detect()) {
            Err(Error::UnsupportedArchitecture(name)) => assert_eq!(name, "mamba"),
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => panic!("loaded a model of an unknown architecture"),
        }
    }

    #[test]
    fn known_architecture_without_tensors_is_an_invalid_model() {
        for arch in SUPPORTED_ARCHITECTURES {
            let gguf = Arc::new(gguf_with_architecture(arch));
            assert!(matches!(
                Model::from_gguf(&gguf, &Registry::detect()),
                Err(Error::InvalidModel(_))
            ));
        }
    }
}
