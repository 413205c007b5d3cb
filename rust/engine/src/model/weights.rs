//! Loading tensors from a GGUF file into weights, vectors and embeddings with shape checks.

use std::sync::Arc;

use super::embedding::Embedding;
use super::ops::Rope;
use super::transformer::Layer;
use super::ModelConfig;
use crate::backend::{MatmulShape, Registry, TensorBytes, Weight};
use crate::gguf::{GgufFile, TensorInfo};
use crate::quant::{self, GgmlType};
use crate::{Error, Result};

/// Looks tensors up by name and checks their shapes against the configuration.
pub(crate) struct Loader<'a> {
    gguf: &'a Arc<GgufFile>,
    registry: &'a Registry,
}

impl<'a> Loader<'a> {
    pub(crate) fn new(gguf: &'a Arc<GgufFile>, registry: &'a Registry) -> Self {
        Loader { gguf, registry }
    }

    fn info(&self, name: &str) -> Result<&'a TensorInfo> {
        self.gguf
            .tensor(name)
            .ok_or_else(|| Error::InvalidModel(format!("missing tensor '{name}'")))
    }

    /// Block `i`'s tensors every architecture has (norms before attention and FFN, the four
    /// attention and three FFN matrices), with `rope` and no optional parts: callers fill in
    /// biases, QK-norms, post-norms and windows with struct update syntax.
    pub(crate) fn common_layer(&self, i: usize, config: &ModelConfig, rope: Rope) -> Result<Layer> {
        let p = |s: &str| format!("blk.{i}.{s}");
        let (d, hd, hdv) = (config.n_embd, config.head_dim, config.head_dim_v);
        Ok(Layer {
            attn_norm: self.vector(&p("attn_norm.weight"), d)?,
            wq: self.matrix(&p("attn_q.weight"), d, config.n_head * hd)?,
            wk: self.matrix(&p("attn_k.weight"), d, config.n_head_kv * hd)?,
            wv: self.matrix(&p("attn_v.weight"), d, config.n_head_kv * hdv)?,
            wo: self.matrix(&p("attn_output.weight"), config.n_head * hdv, d)?,
            bq: None,
            bk: None,
            bv: None,
            q_norm: None,
            k_norm: None,
            post_attn_norm: None,
            ffn_norm: self.vector(&p("ffn_norm.weight"), d)?,
            w_gate: self.matrix(&p("ffn_gate.weight"), d, config.n_ff)?,
            w_up: self.matrix(&p("ffn_up.weight"), d, config.n_ff)?,
            w_down: self.matrix(&p("ffn_down.weight"), config.n_ff, d)?,
            post_ffn_norm: None,
            rope,
            window: None,
        })
    }

    /// `output.weight`, or the token embedding when the file ties them.
    pub(crate) fn output_head(
        &self,
        config: &ModelConfig,
        embedding: &Embedding,
    ) -> Result<Weight> {
        if self.has("output.weight") {
            self.matrix("output.weight", config.n_embd, config.n_vocab)
        } else {
            Ok(embedding.as_weight(self.registry))
        }
    }

    /// Whether the file has a tensor called `name`.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.gguf.tensor(name).is_some()
    }

    fn bytes(&self, info: &TensorInfo) -> TensorBytes {
        TensorBytes::borrowed(self.gguf.clone(), |g| g.tensor_data(info))
    }

    fn check_dims(info: &TensorInfo, expected: &[usize]) -> Result<()> {
        let dims: Vec<usize> = info.dims.iter().map(|&d| d as usize).collect();
        if dims != expected {
            return Err(Error::InvalidModel(format!(
                "tensor '{}' has shape {dims:?}, expected {expected:?}",
                info.name
            )));
        }
        Ok(())
    }

    /// A weight matrix with `rows` outputs of `cols` inputs (GGUF dims `[cols, rows]`), placed by
    /// the registry.
    pub(crate) fn matrix(&self, name: &str, cols: usize, rows: usize) -> Result<Weight> {
        let info = self.info(name)?;
        Self::check_dims(info, &[cols, rows])?;
        if matches!(info.ty, GgmlType::Q8_1 | GgmlType::Q8_K) {
            return Err(Error::InvalidModel(format!(
                "tensor '{name}' has type {}, which is not a weight format",
                info.ty
            )));
        }
        let shape = MatmulShape {
            ty: info.ty,
            rows,
            cols,
        };
        Ok(self.registry.place(shape, self.bytes(info)))
    }

    /// A 1-D tensor of `len` values, dequantized to f32.
    pub(crate) fn vector(&self, name: &str, len: usize) -> Result<Vec<f32>> {
        let info = self.info(name)?;
        Self::check_dims(info, &[len])?;
        let mut out = vec![0.0; len];
        quant::dequantize(info.ty, self.gguf.tensor_data(info), &mut out)?;
        Ok(out)
    }

    /// A 1-D tensor if present.
    pub(crate) fn opt_vector(&self, name: &str, len: usize) -> Result<Option<Vec<f32>>> {
        if self.has(name) {
            self.vector(name, len).map(Some)
        } else {
            Ok(None)
        }
    }

    /// The token embedding table (`n_vocab` rows of `n_embd`).
    pub(crate) fn embedding(&self, name: &str, n_embd: usize, n_vocab: usize) -> Result<Embedding> {
        let info = self.info(name)?;
        Self::check_dims(info, &[n_embd, n_vocab])?;
        let row_bytes = info.ty.row_bytes(n_embd as u64).ok_or_else(|| {
            Error::InvalidModel(format!(
                "tensor '{name}' rows are not whole {} blocks",
                info.ty
            ))
        })? as usize;
        Ok(Embedding::new(
            info.ty,
            self.bytes(info),
            n_embd,
            n_vocab,
            row_bytes,
        ))
    }
}
