//! Logit processing, sampling and stop-string matching.
//!
//! [`Sampler`] applies llama.cpp's chain: logit bias, repetition/frequency/presence penalties,
//! DRY, top-n-σ, top-k, locally typical sampling, top-p, min-p, XTC, temperature, then draws from
//! the softmax with a seeded PRNG; or, with Mirostat, logit bias, temperature and Mirostat's own
//! truncation. The stages are functions of [`stages`] and [`dry`]. [`StopMatcher`] finds stop
//! strings in streamed text. [`token_logprob`] gives a generated token's log-probability and the
//! most likely alternatives.

pub mod dry;
mod logprobs;
mod rng;
mod sampler;
pub mod stages;
mod stop;

pub use logprobs::{token_logprob, TokenLogprob, TopLogprob, MAX_TOP_LOGPROBS};
pub use sampler::Sampler;
pub use stop::StopMatcher;

/// A bias added to one token's logit before any other stage (llama.cpp's and OpenAI's
/// `logit_bias`); -inf bans the token.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LogitBias {
    /// Token id.
    pub token: u32,
    /// Added to the token's logit; not NaN.
    pub bias: f32,
}

/// llama.cpp's default DRY sequence breakers (used when `dry_sequence_breakers` is `None`).
pub const DEFAULT_DRY_SEQUENCE_BREAKERS: [&str; 4] = ["\n", ":", "\"", "*"];

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
            /// Sampling parameters; the defaults are llama.cpp's (`common_params_sampling`).
            /// Neutral values switch a stage off: `top_k` 0, `typical_p` 1, `top_p` 1, `min_p`
            /// 0, `repeat_penalty` 1, `frequency_penalty` / `presence_penalty` 0,
            /// `penalty_last_n` 0, `dry_multiplier` 0, `xtc_probability` 0, `top_n_sigma` <= 0,
            /// `mirostat` 0.
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
                /// How many of the most recent history tokens the penalties look at; 0 = off,
                /// -1 = the whole context.
                penalty_last_n: i32 = 64,
                /// DRY ("don't repeat yourself") strength: a token that would extend a
                /// sequence repeated in the recent history loses `dry_multiplier *
                /// dry_base^(length - dry_allowed_length)` from its logit; 0 = off.
                dry_multiplier: f32 = 0.0,
                /// DRY's growth per repeated token; below 1 = off.
                dry_base: f32 = 1.75,
                /// Repeats up to this many tokens are not penalized by DRY.
                dry_allowed_length: u32 = 2,
                /// How many of the most recent history tokens DRY scans; 0 = off, -1 = the
                /// whole context.
                dry_penalty_last_n: i32 = 64,
                /// Strings that end a repetition for DRY (at most 256, each cut to 40 bytes);
                /// none = llama.cpp's `["\\n", ":", "\"", "*"]`, an empty list = no breakers.
                dry_sequence_breakers: Option<Vec<String>> = None,
                /// Top-n-σ: drop tokens whose logit is more than `top_n_sigma` standard
                /// deviations below the best; <= 0 = off.
                top_n_sigma: f32 = 0.0,
                /// XTC ("exclude top choices"): the chance, per token, of removing every token
                /// above `xtc_threshold` probability but the least likely of them; 0 = off.
                xtc_probability: f32 = 0.0,
                /// XTC's probability threshold; above 0.5 = off.
                xtc_threshold: f32 = 0.1,
                /// Mirostat: 0 = off, 1 = Mirostat, 2 = Mirostat 2.0. When on, it replaces the
                /// chain after the logit bias (no penalties, DRY, top-k, top-p, min-p, typical,
                /// top-n-σ or XTC), as in llama.cpp.
                mirostat: u32 = 0,
                /// Mirostat's target surprise (cross-entropy), in bits.
                mirostat_tau: f32 = 5.0,
                /// Mirostat's learning rate.
                mirostat_eta: f32 = 0.1,
                /// Biases added to the logits of given tokens before anything else; -inf bans
                /// a token. Token ids must be in the vocabulary; repeated ids add up.
                logit_bias: Vec<LogitBias> = [],
                /// Never produce an end-of-generation token (their logits become -inf).
                ignore_eos: bool = false,
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
            dry_multiplier: 0.0,
            top_n_sigma: 0.0,
            xtc_probability: 0.0,
            mirostat: 0,
            seed: Some(0),
            ..SamplingParams::default()
        }
    }

    /// Check ranges: temperature finite and `>= 0`; `typical_p` and `top_p` in (0, 1]; `min_p`
    /// in [0, 1]; `repeat_penalty` finite and `> 0`; frequency/presence penalties, DRY's
    /// multiplier (`>= 0`) and base, top-n-σ, XTC's threshold and Mirostat's tau and eta
    /// finite; `xtc_probability` in [0, 1]; `mirostat` 0, 1 or 2; the `*_last_n` counts `>= -1`;
    /// at most 256 DRY breakers; no NaN logit bias.
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
        if !(0.0..=1.0).contains(&self.xtc_probability) {
            return bad(format!(
                "xtc_probability must be in [0, 1], got {}",
                self.xtc_probability
            ));
        }
        if !self.dry_multiplier.is_finite() || self.dry_multiplier < 0.0 {
            return bad(format!(
                "dry_multiplier must be a finite number >= 0, got {}",
                self.dry_multiplier
            ));
        }
        for (name, value) in [
            ("frequency_penalty", self.frequency_penalty),
            ("presence_penalty", self.presence_penalty),
            ("dry_base", self.dry_base),
            ("top_n_sigma", self.top_n_sigma),
            ("xtc_threshold", self.xtc_threshold),
            ("mirostat_tau", self.mirostat_tau),
            ("mirostat_eta", self.mirostat_eta),
        ] {
            if !value.is_finite() {
                return bad(format!("{name} must be finite, got {value}"));
            }
        }
        if self.mirostat > 2 {
            return bad(format!(
                "mirostat must be 0 (off), 1 or 2, got {}",
                self.mirostat
            ));
        }
        for (name, value) in [
            ("penalty_last_n", self.penalty_last_n),
            ("dry_penalty_last_n", self.dry_penalty_last_n),
        ] {
            if value < -1 {
                return bad(format!(
                    "{name} must be >= -1 (-1: the whole context), got {value}"
                ));
            }
        }
        if let Some(b) = &self.dry_sequence_breakers {
            if b.len() > dry::MAX_BREAKERS {
                return bad(format!(
                    "dry_sequence_breakers has {} entries (at most {})",
                    b.len(),
                    dry::MAX_BREAKERS
                ));
            }
        }
        if let Some(b) = self.logit_bias.iter().find(|b| b.bias.is_nan()) {
            return bad(format!("logit_bias of token {} is NaN", b.token));
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
