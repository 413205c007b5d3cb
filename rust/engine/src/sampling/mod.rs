//! Logit processing, sampling and stop-string matching.
//!
//! [`Sampler`] applies llama.cpp's default chain: repetition/frequency/presence penalties,
//! top-k, locally typical sampling, top-p, min-p, temperature, then draws from the softmax with
//! a seeded PRNG. [`StopMatcher`] finds stop strings in streamed text. [`token_logprob`] gives
//! a generated token's log-probability and the most likely alternatives.

mod logprobs;
mod rng;
mod sampler;
mod stop;

pub use logprobs::{token_logprob, TokenLogprob, TopLogprob, MAX_TOP_LOGPROBS};
pub use sampler::Sampler;
pub use stop::StopMatcher;

/// The fields of [`SamplingParams`] with their documentation and defaults, written once.
///
/// Calls `$emit!` with `struct SamplingParams { /// docs  name: type = default, ... }`. The
/// engine emits the struct and its `Default` impl from it (see `options_struct!`); the FFI crate
/// emits its UniFFI record declaration (with `#[uniffi(default = …)]`) from the same table, so the
/// generated TypeScript carries the same defaults. Defaults are single tokens (literals, `None`).
#[macro_export]
macro_rules! sampling_params_table {
    ($emit:ident) => {
        $emit! {
            /// Sampling parameters; the defaults are llama.cpp's. Neutral values switch a stage
            /// off: `top_k` 0, `typical_p` 1, `top_p` 1, `min_p` 0, `repeat_penalty` 1,
            /// `frequency_penalty` / `presence_penalty` 0, `penalty_last_n` 0.
            struct SamplingParams {
                /// Softmax temperature; 0 means greedy (argmax) decoding.
                temperature: f32 = 0.8,
                /// Keep only the `top_k` most likely tokens; 0 = off.
                top_k: u32 = 40,
                /// Locally typical sampling: keep the tokens whose surprise is closest to the
                /// distribution's entropy until their probabilities sum past `typical_p`; 1 = off.
                typical_p: f32 = 1.0,
                /// Keep the smallest set of most likely tokens whose probability sum reaches
                /// `top_p`; 1 = off.
                top_p: f32 = 0.95,
                /// Drop tokens whose probability is below `min_p` times the best token's; 0 = off.
                min_p: f32 = 0.05,
                /// Repetition penalty: positive logits of recent tokens are divided by it,
                /// negative ones multiplied; 1 = off.
                repeat_penalty: f32 = 1.0,
                /// Subtracted from a recent token's logit once per occurrence.
                frequency_penalty: f32 = 0.0,
                /// Subtracted once from the logit of every token that occurred recently.
                presence_penalty: f32 = 0.0,
                /// How many of the most recent history tokens the penalties look at; 0 = off.
                penalty_last_n: u32 = 64,
                /// PRNG seed; none seeds from the clock and process entropy.
                seed: Option<u64> = None,
            }
        }
    };
}

sampling_params_table!(options_struct);

impl SamplingParams {
    /// Deterministic argmax decoding (temperature 0, every other stage off).
    pub fn greedy() -> Self {
        SamplingParams {
            temperature: 0.0,
            top_k: 0,
            typical_p: 1.0,
            top_p: 1.0,
            min_p: 0.0,
            repeat_penalty: 1.0,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            penalty_last_n: 0,
            seed: Some(0),
        }
    }

    /// Check ranges: temperature finite and `>= 0`; `typical_p` and `top_p` in (0, 1]; `min_p`
    /// in [0, 1]; `repeat_penalty` finite and `> 0`; frequency/presence penalties finite.
    pub fn validate(&self) -> crate::Result<()> {
        let bad = |what: String| Err(crate::Error::InvalidOption(what));
        if !self.temperature.is_finite() || self.temperature < 0.0 {
            return bad(format!(
                "temperature must be a finite number >= 0, got {}",
                self.temperature
            ));
        }
        if !(self.typical_p > 0.0 && self.typical_p <= 1.0) {
            return bad(format!(
                "typical_p must be in (0, 1], got {}",
                self.typical_p
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

/// Index of the largest logit, the first one on ties (0 for an empty slice; a NaN never wins
/// against an earlier number).
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[best] {
            best = i;
        }
    }
    best as u32
}

#[cfg(test)]
mod tests {
    use super::argmax;

    #[test]
    fn argmax_takes_the_first_largest() {
        assert_eq!(argmax(&[0.0, 2.0, -1.0, 2.0]), 1);
        assert_eq!(argmax(&[3.0]), 0);
    }
}
