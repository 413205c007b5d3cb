//! From a sequence's last hidden states to its embedding: pooling (none, mean, CLS, last,
//! rank as llama.cpp's `--pooling`), a reranker's classification head, and normalisation
//! (llama.cpp's `--embd-normalize`). One implementation for the CLI, the FFI and TypeScript.

use super::norm::Norm;
use super::ops;
use crate::backend::{Threads, Weight};
use crate::{Error, Result};

/// How a sequence's hidden states become its embedding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pooling {
    /// One embedding per token.
    None,
    /// The mean of the tokens' states.
    Mean,
    /// The first token's state (BERT's `[CLS]`).
    Cls,
    /// The last token's state (decoder embedders such as Qwen3-Embedding).
    Last,
    /// A relevance score: the first token's state (the last one's of a causal model, the
    /// mean for some heads) through the classification head (cross-encoder rerankers such as
    /// bge-reranker; Qwen3-Reranker).
    Rank,
}

impl Pooling {
    /// The names [`Pooling::parse`] accepts, as llama.cpp's `--pooling`.
    pub const NAMES: [&'static str; 5] = ["none", "mean", "cls", "last", "rank"];

    /// llama.cpp's name.
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// The pooling named `name` ([`Pooling::NAMES`]).
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "none" => Ok(Pooling::None),
            "mean" => Ok(Pooling::Mean),
            "cls" => Ok(Pooling::Cls),
            "last" => Ok(Pooling::Last),
            "rank" => Ok(Pooling::Rank),
            other => Err(Error::InvalidOption(format!(
                "unknown pooling '{other}' (expected one of {})",
                Self::NAMES.join(", ")
            ))),
        }
    }

    /// The pooling of GGUF metadata `{arch}.pooling_type` (llama.cpp's numbering: 0 none,
    /// 1 mean, 2 CLS, 3 last, 4 rank); `None` for a value outside it.
    pub fn from_gguf(value: u64) -> Option<Self> {
        [
            Pooling::None,
            Pooling::Mean,
            Pooling::Cls,
            Pooling::Last,
            Pooling::Rank,
        ]
        .get(usize::try_from(value).ok()?)
        .copied()
    }
}

/// A reranker's classification head (llama.cpp's `cls`, `cls.norm` and `cls.output` tensors):
/// `out(norm(act(dense · x + b)))`, each part optional (the dense layer alone gives the
/// scores of jina-reranker; `out` alone those of Qwen3-Reranker), then a softmax for
/// Qwen3-Reranker's yes/no labels.
pub(crate) struct Classifier {
    pub(crate) dense: Option<(Weight, Option<Vec<f32>>)>,
    /// The dense layer's activation: GELU (ModernBERT) instead of tanh.
    pub(crate) gelu: bool,
    /// ModernBERT's head norm after the activation.
    pub(crate) norm: Option<Norm>,
    pub(crate) out: Option<(Weight, Option<Vec<f32>>)>,
    /// Softmax over the scores (Qwen 3's yes/no rerankers).
    pub(crate) softmax: bool,
    /// Which hidden state the head reads: mean-pooled (`{arch}.classifier.pooling_type` 1,
    /// ModernBERT's default), else the first token's, or the last one's for causal models.
    pub(crate) mean: bool,
}

impl Classifier {
    /// The scores of pooled state `x`.
    pub(crate) fn scores(&self, x: &[f32], threads: &Threads) -> Result<Vec<f32>> {
        let mut v = x.to_vec();
        if let Some((w, b)) = &self.dense {
            v = affine(w, b.as_deref(), &v, threads)?;
            match self.gelu {
                true => ops::gelu(&mut v),
                false => v.iter_mut().for_each(|x| *x = x.tanh()),
            }
            if let Some(norm) = &self.norm {
                norm.rows(&mut v);
            }
        }
        if let Some((w, b)) = &self.out {
            v = affine(w, b.as_deref(), &v, threads)?;
        }
        if self.softmax {
            ops::softmax(&mut v);
        }
        Ok(v)
    }
}

/// `w · x + b` for one vector.
fn affine(w: &Weight, b: Option<&[f32]>, x: &[f32], threads: &Threads) -> Result<Vec<f32>> {
    let mut out = vec![0f32; w.shape().rows];
    w.matmul(x, 1, &mut out, threads)?;
    if let Some(b) = b {
        out.iter_mut().zip(b).for_each(|(o, b)| *o += b);
    }
    Ok(out)
}

/// Dense projections of a pooled embedding (EmbeddingGemma's sentence-transformers modules):
/// `second(first(x) + b)`, either part optional.
pub(crate) struct DenseOut {
    pub(crate) first: Option<(Weight, Option<Vec<f32>>)>,
    pub(crate) second: Option<Weight>,
}

impl DenseOut {
    /// The length of the projected vectors (`None`: no projection).
    pub(crate) fn width(&self) -> Option<usize> {
        match (&self.second, &self.first) {
            (Some(w), _) | (None, Some((w, _))) => Some(w.shape().rows),
            (None, None) => None,
        }
    }

    /// Project `x` (the model's `n_embd` values).
    pub(crate) fn project(&self, x: &[f32], threads: &Threads) -> Result<Vec<f32>> {
        let mut v = x.to_vec();
        if let Some((w, b)) = &self.first {
            v = affine(w, b.as_deref(), &v, threads)?;
        }
        if let Some(w) = &self.second {
            v = affine(w, None, &v, threads)?;
        }
        Ok(v)
    }
}

/// Pool the hidden states of one sequence (`n × d` values, `n ≥ 1`) as `pooling` says
/// ([`Pooling::Rank`] pools like [`Pooling::Cls`]; the caller applies the head). `None`
/// returns the states as they are.
pub fn pool(hidden: &[f32], d: usize, pooling: Pooling) -> Vec<f32> {
    let n = hidden.len() / d.max(1);
    if n == 0 {
        return Vec::new();
    }
    match pooling {
        Pooling::None => hidden.to_vec(),
        Pooling::Cls | Pooling::Rank => hidden[..d].to_vec(),
        Pooling::Last => hidden[(n - 1) * d..n * d].to_vec(),
        Pooling::Mean => {
            let mut mean = vec![0f32; d];
            for row in hidden.chunks_exact(d) {
                mean.iter_mut().zip(row).for_each(|(m, v)| *m += v);
            }
            let inv = 1.0 / n as f32;
            mean.iter_mut().for_each(|m| *m *= inv);
            mean
        }
    }
}

/// Normalise `v` in place as llama.cpp's `--embd-normalize` does: -1 none, 0 max absolute
/// value scaled to the int16 range (32760), 1 taxicab, 2 Euclidean (L2), `p > 2` the p-norm.
/// An all-zero vector stays zero. Other values are an [`Error::InvalidOption`].
pub fn normalize(v: &mut [f32], norm: i32) -> Result<()> {
    let sum: f64 = match norm {
        -1 => return Ok(()),
        0 => v.iter().fold(0f64, |m, x| m.max(f64::from(x.abs()))) / 32760.0,
        2 => v.iter().map(|x| f64::from(x * x)).sum::<f64>().sqrt(),
        p if p > 0 => {
            let p = f64::from(p);
            let s: f64 = v.iter().map(|x| f64::from(x.abs()).powf(p)).sum();
            s.powf(1.0 / p)
        }
        other => {
            return Err(Error::InvalidOption(format!(
                "embedding normalisation {other} is not -1 (none), 0 (max absolute), 1 \
                 (taxicab), 2 (Euclidean) or a larger p-norm"
            )))
        }
    };
    let scale = if sum > 0.0 { (1.0 / sum) as f32 } else { 0.0 };
    v.iter_mut().for_each(|x| *x *= scale);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooling_picks_rows_and_means() {
        let h = [1.0, 2.0, 3.0, 4.0, 5.0, 9.0];
        assert_eq!(pool(&h, 2, Pooling::Cls), [1.0, 2.0]);
        assert_eq!(pool(&h, 2, Pooling::Last), [5.0, 9.0]);
        assert_eq!(pool(&h, 2, Pooling::Mean), [3.0, 5.0]);
        assert_eq!(pool(&h, 2, Pooling::None), h);
        for name in Pooling::NAMES {
            assert_eq!(Pooling::parse(name).unwrap().name(), name);
        }
        assert!(Pooling::parse("max").is_err());
        assert_eq!(Pooling::from_gguf(4), Some(Pooling::Rank));
        assert_eq!(Pooling::from_gguf(5), None);
    }

    #[test]
    fn normalisations_follow_llama_cpp() {
        let mut v = [3.0, -4.0];
        normalize(&mut v, 2).unwrap();
        assert_eq!(v, [0.6, -0.8]);
        let mut v = [1.0, -3.0];
        normalize(&mut v, 1).unwrap();
        assert_eq!(v, [0.25, -0.75]);
        let mut v = [1.0, -2.0];
        normalize(&mut v, 0).unwrap();
        assert_eq!(v, [16380.0, -32760.0]);
        let mut v = [0.0, 0.0];
        normalize(&mut v, 2).unwrap();
        assert_eq!(v, [0.0, 0.0]);
        assert!(normalize(&mut v, -2).is_err());
        let mut v = [1.0, 1.0];
        normalize(&mut v, 3).unwrap();
        assert!((v[0] - 0.5f32.powf(1.0 / 3.0)).abs() < 1e-6);
    }
}
