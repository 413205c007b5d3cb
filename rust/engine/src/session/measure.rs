//! A context's speed benchmark (greedy decoding of a synthetic prompt). One implementation
//! for the CLI, the FFI and so TypeScript.

use super::request::{GenerateRequest, Prompt, Timings};
use super::Context;
use crate::sampling::SamplingParams;
use crate::{Error, Result};

/// The most iterations [`Context::benchmark`] runs.
pub const MAX_BENCHMARK_ITERATIONS: u32 = 100;

impl Context {
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
