//! The token embedding table: one row per token, dequantized on lookup; also usable as the
//! output head when the model ties them.

use crate::backend::{MatmulShape, Registry, TensorBytes, Weight};
use crate::quant::{self, GgmlType};
use crate::{Error, Result};

/// The token embedding table, read row by row.
pub(crate) struct Embedding {
    ty: GgmlType,
    data: TensorBytes,
    n_embd: usize,
    n_vocab: usize,
    row_bytes: usize,
}

impl Embedding {
    /// A table of `n_vocab` rows of `n_embd` values of type `ty`, each `row_bytes` long in `data`.
    pub(crate) fn new(
        ty: GgmlType,
        data: TensorBytes,
        n_embd: usize,
        n_vocab: usize,
        row_bytes: usize,
    ) -> Self {
        Embedding {
            ty,
            data,
            n_embd,
            n_vocab,
            row_bytes,
        }
    }

    /// The number of rows (tokens, or positions of a position table).
    pub(crate) fn rows(&self) -> usize {
        self.n_vocab
    }

    /// Write the embedding of token `id` into `out` (`n_embd` values).
    pub(crate) fn row(&self, id: u32, out: &mut [f32]) -> Result<()> {
        let id = id as usize;
        if id >= self.n_vocab {
            return Err(Error::InvalidOption(format!(
                "token id {id} is outside the vocabulary of {} tokens",
                self.n_vocab
            )));
        }
        let bytes = &self.data.as_slice()[id * self.row_bytes..(id + 1) * self.row_bytes];
        quant::dequantize(self.ty, bytes, out)
    }

    /// The table as a matmul weight (tied output head).
    pub(crate) fn as_weight(&self, registry: &Registry) -> Weight {
        let shape = MatmulShape {
            ty: self.ty,
            rows: self.n_vocab,
            cols: self.n_embd,
        };
        registry.place(shape, self.data.clone())
    }
}
