//! Logit processing, sampling and stop-string matching.
//!
//! [`Sampler`] applies llama.cpp's default chain: repetition/frequency/presence penalties,
//! top-k, top-p, min-p, temperature, then draws from the softmax with a seeded PRNG.
//! [`StopMatcher`] finds stop strings in streamed text.

mod rng;
mod sampler;
mod stop;

pub use sampler::Sampler;
pub use stop::StopMatcher;

/// Sampling parameters. Neutral values switch a stage off: `top_k` 0, `top_p` 1, `min_p` 0,
/// `repeat_penalty` 1, `frequency_penalty` / `presence_penalty` 0, `penalty_last_n` 0.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplingParams {
    /// Softmax temperature; `<= 0` (only 0 passes [`SamplingParams::validate`]) means greedy.
    pub temperature: f32,
    /// Keep only the `top_k` most likely tokens; 0 = off.
    pub top_k: usize,
    /// Keep the smallest set of most likely tokens whose probability sum reaches `top_p`; 1 = off.
    pub top_p: f32,
    /// Drop tokens whose probability is below `min_p` times the best token's; 0 = off.
    pub min_p: f32,
    /// Repetition penalty: positive logits of recent tokens are divided by it, negative ones
    /// multiplied; 1 = off.
    pub repeat_penalty: f32,
    /// Subtracted from a recent token's logit once per occurrence.
    pub frequency_penalty: f32,
    /// Subtracted once from the logit of every token that occurred recently.
    pub presence_penalty: f32,
    /// How many of the most recent history tokens the penalties look at; 0 = penalties off.
    pub penalty_last_n: usize,
    /// PRNG seed; `None` seeds from the clock and process entropy.
    pub seed: Option<u64>,
}

impl Default for SamplingParams {
    /// llama.cpp's defaults: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05, no penalties
    /// (repeat 1.0 over the last 64 tokens), random seed.
    fn default() -> Self {
        SamplingParams {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            penalty_last_n: 64,
            seed: None,
        }
    }
}

impl SamplingParams {
    /// Deterministic argmax decoding (temperature 0, every other stage off).
    pub fn greedy() -> Self {
        SamplingParams {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            repeat_penalty: 1.0,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            penalty_last_n: 0,
            seed: Some(0),
        }
    }

    /// Check ranges: temperature finite and `>= 0`; `top_p` in (0, 1]; `min_p` in [0, 1];
    /// `repeat_penalty` finite and `> 0`; frequency/presence penalties finite.
    pub fn validate(&self) -> crate::Result<()> {
        let bad = |what: String| Err(crate::Error::InvalidOption(what));
        if !self.temperature.is_finite() || self.temperature < 0.0 {
            return bad(format!(
                "temperature must be a finite number >= 0, got {}",
                self.temperature
            ));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad(format!("top_p must be in (0, 1], got {}", self.top_p));
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            return bad(format!("min_p must be in [0, 1], got {}", self.min_p));
        }
        if !self.repeat_penalty.is_finite() || self.repeat_penalty <= 0.0 {
            return bad(format!(
                "repeat_penalty must be a finite number > 0, got {}",
                self.repeat_penalty
            ));
        }
        if !self.frequency_penalty.is_finite() {
            return bad(format!(
                "frequency_penalty must be finite, got {}",
                self.frequency_penalty
            ));
        }
        if !self.presence_penalty.is_finite() {
            return bad(format!(
                "presence_penalty must be finite, got {}",
                self.presence_penalty
            ));
        }
        Ok(())
    }
}
