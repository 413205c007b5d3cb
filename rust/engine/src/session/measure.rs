//! What a context measures about its model besides generating: sentence embeddings (mean of
//! the last hidden states, L2-normalized) and a speed benchmark (greedy decoding of a synthetic
//! prompt). One implementation for the CLI, the FFI and so TypeScript.

use std::sync::atomic::AtomicBool;

use super::request::{GenerateRequest, Prompt, Timings};
use super::Context;
use crate::model::Output;
use crate::sampling::SamplingParams;
use crate::{Error, Result};

/// The most iterations [`Context::benchmark`] runs.
pub const MAX_BENCHMARK_ITERATIONS: u32 = 100;

impl Context {
    /// A sentence embedding of `text`: the mean of its tokens' last hidden states,
    /// L2-normalized (all zeros stay zeros). Clears the KV cache before and after; `cancel`
    /// stops it between prompt batches with [`Error::Cancelled`].
    pub fn embed(&mut self, text: &str, cancel: Option<&AtomicBool>) -> Result<Vec<f32>> {
        let model = self.model().clone();
        let tokens = model.tokenize(text, true, false)?;
        self.clear();
        let hidden = self.eval(&tokens, Output::Hidden, &mut |_, _| {}, cancel);
        self.clear();
        let hidden = hidden?;
        let n_embd = model.model().config().n_embd;
        if n_embd == 0 || hidden.len() != tokens.len() * n_embd {
            return Err(Error::Backend(format!(
                "unexpected hidden state size {} for {} tokens",
                hidden.len(),
                tokens.len()
            )));
        }
        let mut mean = vec![0f32; n_embd];
        for row in hidden.chunks_exact(n_embd) {
            for (m, v) in mean.iter_mut().zip(row) {
                *m += v;
            }
        }
        let norm = mean.iter().map(|v| v * v).sum::<f32>().sqrt();
        if norm > 0.0 {
            mean.iter_mut().for_each(|v| *v /= norm);
        }
        Ok(mean)
    }

    /// Measure prompt and generation speed: `iterations` (1 to [`MAX_BENCHMARK_ITERATIONS`],
    /// clamped) greedy generations of `n_gen` tokens (at least 1) after a synthetic prompt of
    /// `n_prompt` tokens (at least 1), the cache cleared before and after each; the timings
    /// of each. [`Error::ContextExhausted`] when prompt and generation do not fit the context.
    pub fn benchmark(
        &mut self,
        n_prompt: usize,
        n_gen: usize,
        iterations: u32,
    ) -> Result<Vec<Timings>> {
        let (n_prompt, n_gen) = (n_prompt.max(1), n_gen.max(1));
        let iterations = iterations.clamp(1, MAX_BENCHMARK_ITERATIONS);
        if n_prompt + n_gen > self.n_ctx() {
            return Err(Error::ContextExhausted {
                needed: n_prompt + n_gen,
                capacity: self.n_ctx(),
            });
        }
        let model = self.model().clone();
        let filler = model.tokenize(
            "The quick brown fox jumps over the lazy dog. ",
            false,
            false,
        )?;
        let mut prompt: Vec<u32> = model.tokenizer().bos().into_iter().collect();
        while prompt.len() < n_prompt && !filler.is_empty() {
            prompt.extend(filler.iter().take(n_prompt - prompt.len()));
        }
        let mut request = GenerateRequest::new(Prompt::Tokens(prompt));
        request.sampling = SamplingParams::greedy();
        request.max_tokens = n_gen;
        request.stop_at_eog = false;
        let mut runs = Vec::new();
        for _ in 0..iterations {
            self.clear();
            let run = self.generate(&request, &mut |_| {}, None);
            runs.push(run.map(|g| g.timings));
        }
        self.clear();
        runs.into_iter().collect()
    }
}
