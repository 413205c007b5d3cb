//! A block's normalisations: RMS norm or LayerNorm, times a weight, plus an optional bias,
//! over whole rows or over groups of a row (heads) with their own weights.

use super::ops;
use crate::backend::Threads;

/// One normalisation and its parameters.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Norm {
    /// Multiplies the normalised values; its length is the width of the rows normalised.
    pub(crate) weight: Vec<f32>,
    /// Added after the weight (LayerNorm models).
    pub(crate) bias: Option<Vec<f32>>,
    /// Values normalised together: the weight's length, or one head of it (StableLM's per-head
    /// QK-norms).
    pub(crate) group: usize,
    pub(crate) eps: f32,
    /// LayerNorm (mean removed) instead of RMS norm.
    pub(crate) layer: bool,
}

impl Norm {
    /// An RMS norm over whole rows.
    pub(crate) fn rms(weight: Vec<f32>, eps: f32) -> Self {
        Norm {
            group: weight.len(),
            weight,
            bias: None,
            eps,
            layer: false,
        }
    }

    /// The width of the rows it normalises.
    pub(crate) fn width(&self) -> usize {
        self.weight.len()
    }

    /// Normalise every row of [`Norm::width`] values of `x`.
    pub(crate) fn rows(&self, x: &mut [f32]) {
        for row in x.chunks_exact_mut(self.weight.len()) {
            let groups = row.chunks_exact_mut(self.group);
            for (part, w) in groups.zip(self.weight.chunks_exact(self.group)) {
                if self.layer {
                    ops::layer_norm(part, w, self.eps);
                } else {
                    ops::rms_norm(part, w, self.eps);
                }
            }
            if let Some(b) = &self.bias {
                row.iter_mut().zip(b).for_each(|(v, b)| *v += b);
            }
        }
    }

    /// [`Norm::rows`] with the rows shared out among the threads.
    pub(crate) fn rows_par(&self, x: &mut [f32], threads: &Threads) {
        threads.for_each_rows(x, self.width(), |_, rows| self.rows(rows));
    }
}
