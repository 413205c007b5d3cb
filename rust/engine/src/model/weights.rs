//! Loading tensors from a GGUF file into weights, vectors and embeddings with shape checks.

use std::sync::Arc;

use super::embedding::Embedding;
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

    /// The rows (outputs) of matrix `name` (GGUF dim 1), if the file has it and it is 2-D.
    pub(crate) fn rows(&self, name: &str) -> Option<usize> {
        match self.gguf.tensor(name)?.dims.as_slice() {
            &[_, rows] => usize::try_from(rows).ok(),
            _ => None,
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
        self.check_weight_type(info)?;
        let shape = MatmulShape {
            ty: info.ty,
            rows,
            cols,
        };
        Ok(self.registry.place(shape, self.bytes(info)))
    }

    /// A matrix of `cols` inputs stored as consecutive blocks of rows (`parts[0]` rows, then
    /// `parts[1]`, ...), as one weight per block: fused projections (Phi-3's `attn_qkv` and
    /// gate-and-up `ffn_up`). Each block is a byte range of the file, nothing is copied.
    pub(crate) fn matrix_split(
        &self,
        name: &str,
        cols: usize,
        parts: &[usize],
    ) -> Result<Vec<Weight>> {
        let info = self.info(name)?;
        let rows: usize = parts.iter().sum();
        Self::check_dims(info, &[cols, rows])?;
        self.split_rows(info, cols, parts)
    }

    /// The experts of a 3-D expert tensor (GGUF dims `[cols, rows, n_expert]`): one weight of
    /// `rows` outputs per expert, each a byte range of the file.
    pub(crate) fn experts(
        &self,
        name: &str,
        cols: usize,
        rows: usize,
        n_expert: usize,
    ) -> Result<Vec<Weight>> {
        let info = self.info(name)?;
        Self::check_dims(info, &[cols, rows, n_expert])?;
        self.split_rows(info, cols, &vec![rows; n_expert])
    }

    /// The experts of a 3-D tensor whose rows stack several matrices (GGUF dims
    /// `[cols, Σ parts, n_expert]`, e.g. `ffn_gate_up_exps`): per expert, one weight per part.
    pub(crate) fn experts_split(
        &self,
        name: &str,
        cols: usize,
        parts: &[usize],
        n_expert: usize,
    ) -> Result<Vec<Vec<Weight>>> {
        let info = self.info(name)?;
        Self::check_dims(info, &[cols, parts.iter().sum(), n_expert])?;
        let all: Vec<usize> = (0..n_expert).flat_map(|_| parts.iter().copied()).collect();
        let mut weights = self.split_rows(info, cols, &all)?.into_iter();
        Ok((0..n_expert)
            .map(|_| weights.by_ref().take(parts.len()).collect())
            .collect())
    }

    /// `info`'s rows (of `cols` inputs) in consecutive blocks of `parts` rows, one weight each.
    fn split_rows(&self, info: &TensorInfo, cols: usize, parts: &[usize]) -> Result<Vec<Weight>> {
        self.check_weight_type(info)?;
        let row_bytes = info.ty.row_bytes(cols as u64).ok_or_else(|| {
            Error::InvalidModel(format!(
                "tensor '{}' rows are not whole {} blocks",
                info.name, info.ty
            ))
        })? as usize;
        let mut start = 0;
        let mut out = Vec::with_capacity(parts.len());
        for &n in parts {
            let range = start * row_bytes..(start + n) * row_bytes;
            let bytes =
                TensorBytes::borrowed(self.gguf.clone(), move |g| &g.tensor_data(info)[range]);
            let shape = MatmulShape {
                ty: info.ty,
                rows: n,
                cols,
            };
            out.push(self.registry.place(shape, bytes));
            start += n;
        }
        Ok(out)
    }

    fn check_weight_type(&self, info: &TensorInfo) -> Result<()> {
        if matches!(info.ty, GgmlType::Q8_1 | GgmlType::Q8_K) {
            return Err(Error::InvalidModel(format!(
                "tensor '{}' has type {}, which is not a weight format",
                info.name, info.ty
            )));
        }
        Ok(())
    }

    /// A 1-D tensor of `len` values, dequantized to f32.
    pub(crate) fn vector(&self, name: &str, len: usize) -> Result<Vec<f32>> {
        let info = self.info(name)?;
        Self::check_dims(info, &[len])?;
        let mut out = vec![0.0; len];
        quant::dequantize(info.ty, self.gguf.tensor_data(info), &mut out)?;
        Ok(out)
    }

    /// A tensor of GGUF dims `dims` (a norm with one weight row per head), dequantized to f32
    /// in file order.
    pub(crate) fn values(&self, name: &str, dims: &[usize]) -> Result<Vec<f32>> {
        let info = self.info(name)?;
        Self::check_dims(info, dims)?;
        let mut out = vec![0.0; dims.iter().product()];
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
