//! Speculative decoding: cheap guesses of the next tokens (drafts) are checked by one forward
//! pass of the model over all of them, so several tokens can be accepted for the price of
//! about one decoding step.
//!
//! Drafts come from prompt lookup (the last few tokens are searched earlier in the prompt and
//! output, and the tokens that followed that earlier occurrence are proposed: no second model,
//! good at rewriting and editing given text) and/or from a draft model (a smaller model with
//! the same vocabulary, decoding greedily on a KV cache of its own).
//!
//! Verification keeps the output exactly what plain decoding gives: the target model's logits
//! at every drafted position go through the generation's own sampler, grammar, stop strings
//! and log-probabilities one position after the other, in the order plain decoding would
//! (so penalties see the same history and a seeded sampler draws the same numbers); a draft
//! token is accepted while it equals the token the target chose, and the first difference
//! keeps the target's token, drops the rest of the draft and rolls the KV cache back to it
//! (positions past the cache's length are simply overwritten later, also in Gemma 3's
//! sliding-window layers, whose window is applied when attending). Greedy output is therefore
//! identical to plain decoding, and every other option combines with speculation. Every
//! sequence of a context drafts for itself (its own lookup history, its own draft-model
//! cache), in a batch as alone; its drafted tokens are fed with its chosen one in the step's
//! forward pass (see `step.rs`).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::{check_available, Context, LoadedModel, Runner, SeqState};
use crate::backend::Threads;
use crate::model::{KvCache, Output};
use crate::sampling::argmax;
use crate::{Error, Result};

/// The fields of [`SpeculativeOptions`] with their documentation and defaults, written once
/// (see [`crate::sampling_params_table`] for how the engine and the FFI use such a table).
#[macro_export]
macro_rules! speculative_options_table {
    ($emit:ident) => {
        $emit! {
            /// How a context drafts tokens for speculative decoding (see
            /// [`Context::set_speculative`]).
            struct SpeculativeOptions {
                /// Most tokens drafted per step (0: no speculative decoding); at most
                /// [`MAX_DRAFT`].
                draft_n_max: u32 = 8,
                /// Drafts shorter than this are not verified (llama.cpp's
                /// `--spec-draft-n-min`).
                draft_n_min: u32 = 0,
                /// Prompt-lookup drafting: the longest n-gram of at most this many tokens
                /// ending the text (prompt and output) that occurred earlier proposes the
                /// tokens that followed it (0: off; at most [`MAX_LOOKUP_NGRAM`]). With a
                /// draft model too, the draft model drafts when lookup finds nothing.
                lookup_ngram_max: u32 = 0,
            }
        }
    };
}

speculative_options_table!(options_struct);

/// Most tokens one step may draft (bounds the verification batch and its logits).
pub const MAX_DRAFT: u32 = 64;

// A rejected draft is rolled back in a recurrent state too (see `KvCache::truncate`).
const _: () = assert!((MAX_DRAFT as usize) < crate::model::RECURRENT_ROLLBACK);

/// Longest n-gram prompt lookup matches.
pub const MAX_LOOKUP_NGRAM: u32 = 16;

/// Fewest lookup drafts worth verifying: on the CPU a pass over 2 or 3 tokens costs as much as
/// that many single-token passes (the tiled matmul kernels start at 4 tokens), so shorter
/// lookup drafts could only lose time; they are compared with the chosen tokens instead.
const MIN_LOOKUP_VERIFIED: usize = 3;

impl SpeculativeOptions {
    /// [`Error::InvalidOption`] for values out of range.
    pub fn validate(&self) -> Result<()> {
        if self.draft_n_max > MAX_DRAFT {
            return Err(Error::InvalidOption(format!(
                "draft_n_max must be at most {MAX_DRAFT}"
            )));
        }
        if self.lookup_ngram_max > MAX_LOOKUP_NGRAM {
            return Err(Error::InvalidOption(format!(
                "lookup_ngram_max must be at most {MAX_LOOKUP_NGRAM}"
            )));
        }
        Ok(())
    }
}

/// A sequence's cache in the draft model, and the tokens it holds.
pub(super) struct DraftCache {
    cache: KvCache,
    cached: Vec<u32>,
}

/// A context's speculative decoding settings and draft model.
pub(super) struct Speculation {
    options: SpeculativeOptions,
    draft: Option<Arc<LoadedModel>>,
}

/// One generation's drafting: how many tokens the next step drafts, and how many were drafted
/// and accepted so far.
pub(super) struct Drafting {
    /// Adapted to how many were accepted (see [`Drafting::adapt`]).
    budget: usize,
    n_max: usize,
    /// The first token of a lookup draft too short to verify, compared with the token chosen
    /// instead (see [`Drafting::adapt`]).
    shadow: Option<u32>,
    /// The cached tokens and the chosen one, rebuilt each step in memory kept across steps.
    history: Vec<u32>,
    /// Tokens drafted and checked.
    pub(super) drafted: usize,
    /// Drafted tokens accepted.
    pub(super) accepted: usize,
}

/// [`Error::InvalidOption`] unless `draft` has `target`'s vocabulary: the same number of
/// tokens (and logits) and the same text for every token.
pub fn check_same_vocabulary(target: &LoadedModel, draft: &LoadedModel) -> Result<()> {
    let (t, d) = (target.tokenizer(), draft.tokenizer());
    let (nt, nd) = (
        target.model().config().n_vocab,
        draft.model().config().n_vocab,
    );
    if nt != nd || t.n_vocab() != d.n_vocab() {
        return Err(Error::InvalidOption(format!(
            "the draft model's vocabulary ({} tokens, {nd} logits) differs from the model's \
             ({} tokens, {nt} logits)",
            d.n_vocab(),
            t.n_vocab()
        )));
    }
    let n = u32::try_from(t.n_vocab()).unwrap_or(u32::MAX);
    if let Some(id) = (0..n).find(|&i| t.token_text(i) != d.token_text(i)) {
        return Err(Error::InvalidOption(format!(
            "the draft model's vocabulary differs from the model's: token {id} is {:?} in the \
             model and {:?} in the draft",
            t.token_text(id).unwrap_or(""),
            d.token_text(id).unwrap_or("")
        )));
    }
    Ok(())
}

/// Prompt lookup: the tokens that followed the most recent earlier occurrence of the longest
/// suffix of `history` (at most `ngram_max` tokens) that occurred before, at most `n_max`.
fn lookup(history: &[u32], ngram_max: usize, n_max: usize) -> Vec<u32> {
    let len = history.len();
    for n in (1..=ngram_max.min(len.saturating_sub(1))).rev() {
        let suffix = &history[len - n..];
        if let Some(j) = (0..len - n).rev().find(|&j| &history[j..j + n] == suffix) {
            let from = j + n;
            return history[from..(from + n_max).min(len)].to_vec();
        }
    }
    Vec::new()
}

impl DraftCache {
    /// Forget the cached tokens.
    pub(super) fn clear(&mut self) {
        self.cache.truncate(0);
        self.cached.clear();
    }

    /// Evaluate with `model` what of `history` the cache does not hold yet (reusing the
    /// common prefix) and return the logits after it.
    fn catch_up(
        &mut self,
        model: &LoadedModel,
        history: &[u32],
        threads: &Threads,
        n_batch: usize,
        cancel: Option<&AtomicBool>,
    ) -> Result<Vec<f32>> {
        let common = super::common_prefix(&self.cached, history);
        let common = self.cache.truncate(common);
        self.cached.truncate(common);
        // The draft model runs without adapters (they are for the target model).
        let run = Runner {
            model: model.model(),
            threads,
            n_batch,
            lora: &[],
        };
        let seq = SeqState {
            cache: &mut self.cache,
            cached: &mut self.cached,
        };
        run.eval(
            seq,
            &history[common..],
            Output::LastLogits,
            &mut |_, _| {},
            cancel,
        )
    }

    /// Up to `n_max` tokens `model` chooses greedily after `history`, stopping after an
    /// end-of-generation token.
    fn propose(
        &mut self,
        model: &LoadedModel,
        history: &[u32],
        n_max: usize,
        threads: &Threads,
        n_batch: usize,
    ) -> Result<Vec<u32>> {
        // The cache holds the history and every drafted token but the last.
        let room = (self.cache.capacity() + 1).saturating_sub(history.len());
        let n_max = n_max.min(room);
        if n_max == 0 {
            return Ok(Vec::new());
        }
        let mut logits = self.catch_up(model, history, threads, n_batch, None)?;
        let mut drafts = Vec::new();
        loop {
            let token = argmax(&logits);
            drafts.push(token);
            if drafts.len() >= n_max || model.tokenizer().is_eog(token) {
                return Ok(drafts);
            }
            logits =
                model
                    .model()
                    .forward(&[token], &mut self.cache, threads, Output::LastLogits)?;
            self.cached.push(token);
        }
    }
}

impl Speculation {
    /// The drafting state of a new generation.
    pub(super) fn drafting(&self) -> Drafting {
        let n_max = self.options.draft_n_max as usize;
        Drafting {
            budget: n_max,
            n_max,
            shadow: None,
            history: Vec::new(),
            drafted: 0,
            accepted: 0,
        }
    }

    /// Let the draft model (if any) read `prompt` into `draft` now, so that its prompt
    /// processing counts as prompt time and not as generation time (its first draft then
    /// evaluates only the new tokens). [`Error::Cancelled`] when `cancel` is set meanwhile.
    pub(super) fn prefill(
        &self,
        draft: &mut DraftCache,
        prompt: &[u32],
        threads: &Threads,
        n_batch: usize,
        cancel: Option<&AtomicBool>,
    ) -> Result<()> {
        match &self.draft {
            Some(model) => draft
                .catch_up(model, prompt, threads, n_batch, cancel)
                .map(drop),
            None => Ok(()),
        }
    }
}

impl Drafting {
    /// How many tokens to draft after the next one, with `room` positions left in the cache
    /// after it and `remaining` tokens left to generate (a small budget still looks up
    /// tokens, to compare; a draft model drafts them).
    pub(super) fn n_max(&self, room: usize, remaining: usize) -> usize {
        self.budget
            .max(MIN_LOOKUP_VERIFIED)
            .min(room)
            .min(remaining.saturating_sub(1))
    }

    /// Drafts following `cached` and `token` (at most `n_max`; none when shorter than
    /// `draft_n_min`, or when a lookup draft is too short to verify), by prompt lookup or
    /// else by `spec`'s draft model on the sequence's `draft` cache.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn propose(
        &mut self,
        spec: &Speculation,
        draft: Option<&mut DraftCache>,
        cached: &[u32],
        token: u32,
        n_max: usize,
        threads: &Threads,
        n_batch: usize,
    ) -> Result<Vec<u32>> {
        let mut history = std::mem::take(&mut self.history);
        history.clear();
        history.extend_from_slice(cached);
        history.push(token);
        let drafts = self.draft_after(spec, draft, &history, n_max, threads, n_batch);
        self.history = history;
        drafts
    }

    /// [`Drafting::propose`] after `history`.
    fn draft_after(
        &mut self,
        spec: &Speculation,
        draft: Option<&mut DraftCache>,
        history: &[u32],
        n_max: usize,
        threads: &Threads,
        n_batch: usize,
    ) -> Result<Vec<u32>> {
        let options = &spec.options;
        let mut drafts = lookup(history, options.lookup_ngram_max as usize, n_max);
        let looked_up = !drafts.is_empty();
        if !looked_up {
            if let (Some(model), Some(draft)) = (&spec.draft, draft) {
                drafts = draft.propose(model, history, n_max, threads, n_batch)?;
            }
        }
        if drafts.len() < options.draft_n_min as usize {
            drafts.clear();
        }
        if looked_up && drafts.len().min(self.budget) < MIN_LOOKUP_VERIFIED {
            self.shadow = drafts.first().copied();
            drafts.clear();
        }
        self.drafted += drafts.len();
        Ok(drafts)
    }

    /// A step that drafted nothing chose `token`.
    pub(super) fn chose(&mut self, token: u32) {
        let hit = self.shadow.take() == Some(token);
        self.adapt(0, 0, hit);
    }

    /// A step checked `drafted` tokens and accepted `accepted` of them.
    pub(super) fn checked(&mut self, drafted: usize, accepted: usize) {
        self.accepted += accepted;
        self.adapt(drafted, accepted, false);
    }

    /// Adapt the draft budget after a step that drafted `drafted` tokens and accepted
    /// `accepted` (verifying a token costs a good part of a decoding step, so wrong drafts
    /// slow generation down): all accepted doubles it (up to `draft_n_max`), otherwise it
    /// becomes the number accepted, 0 included. Below [`MIN_LOOKUP_VERIFIED`], lookup drafts
    /// are not verified but their first token is compared with the token chosen
    /// (`shadow_hit`), which restarts drafting at that minimum.
    fn adapt(&mut self, drafted: usize, accepted: usize, shadow_hit: bool) {
        self.budget = if drafted == 0 {
            if shadow_hit {
                MIN_LOOKUP_VERIFIED.min(self.n_max)
            } else {
                self.budget
            }
        } else if accepted == drafted {
            (self.budget.max(1) * 2).min(self.n_max)
        } else {
            accepted
        };
    }
}

impl Context {
    /// Decode later generations speculatively with `options`, drafting with prompt lookup
    /// and/or `draft` (a model with this model's vocabulary, else [`Error::InvalidOption`];
    /// it gets a KV cache of this context's size for each sequence,
    /// [`Error::InsufficientMemory`] when those do not fit). Speculation is off when
    /// `draft_n_max` is 0 or neither a draft model nor lookup is given. The output is what
    /// plain decoding gives (see the module documentation); the result's
    /// [`Timings`](super::Timings) count drafted and accepted tokens. Not while generations
    /// run ([`Error::InvalidOption`]).
    pub fn set_speculative(
        &mut self,
        options: &SpeculativeOptions,
        draft: Option<Arc<LoadedModel>>,
    ) -> Result<()> {
        options.validate()?;
        self.check_idle()?;
        let (n_ctx, n_seq) = (self.n_ctx(), self.seqs.len());
        // The draft model's caches take the context's cache types.
        let types = self.seqs[0].cache.types();
        if let Some(model) = &draft {
            check_same_vocabulary(&self.model, model)?;
            let bytes = model.model().config().kv_cache_bytes(n_ctx, types);
            check_available(bytes.saturating_mul(n_seq as u64), n_ctx * n_seq)?;
        }
        let on = options.draft_n_max > 0 && (draft.is_some() || options.lookup_ngram_max > 0);
        let draft = draft.filter(|_| on);
        let mut caches = Vec::with_capacity(n_seq);
        for _ in 0..n_seq {
            caches.push(match &draft {
                Some(model) => Some(DraftCache {
                    cache: model.model().new_cache(n_ctx, types)?,
                    cached: Vec::new(),
                }),
                None => None,
            });
        }
        for (seq, cache) in self.seqs.iter_mut().zip(caches) {
            seq.draft = cache;
        }
        self.speculation = on.then(|| Speculation {
            options: options.clone(),
            draft,
        });
        Ok(())
    }

    /// The draft model speculative decoding uses, if any.
    pub fn draft_model(&self) -> Option<&Arc<LoadedModel>> {
        self.speculation.as_ref().and_then(|s| s.draft.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_proposes_what_followed_the_longest_recent_match() {
        // "5 6 7" occurred before, followed by 8 9; the more recent "7" alone is followed by 1.
        let h = [1, 5, 6, 7, 8, 9, 2, 7, 1, 3, 5, 6, 7];
        assert_eq!(lookup(&h, 3, 4), vec![8, 9, 2, 7]);
        assert_eq!(lookup(&h, 3, 1), vec![8]);
        // With single tokens only, the most recent earlier 7 wins.
        assert_eq!(lookup(&h, 1, 2), vec![1, 3]);
        // Nothing to propose: no earlier occurrence, lookup off, or too short a history.
        assert_eq!(lookup(&[1, 2, 3], 3, 4), Vec::<u32>::new());
        assert_eq!(lookup(&h, 0, 4), Vec::<u32>::new());
        assert_eq!(lookup(&[7], 3, 4), Vec::<u32>::new());
        // A run repeats itself, up to the end of the history.
        assert_eq!(lookup(&[4, 4, 4], 2, 8), vec![4]);
    }

    #[test]
    fn the_budget_grows_with_full_acceptance_and_shrinks_to_what_was_accepted() {
        let spec = Speculation {
            options: SpeculativeOptions::default(),
            draft: None,
        };
        let mut spec = spec.drafting();
        assert_eq!(spec.budget, 8);
        spec.adapt(8, 3, false);
        assert_eq!(spec.budget, 3);
        spec.adapt(3, 3, false);
        assert_eq!(spec.budget, 6);
        spec.adapt(6, 6, false);
        assert_eq!(spec.budget, 8);
        spec.adapt(8, 0, false);
        assert_eq!(spec.budget, 0);
        spec.adapt(0, 0, false);
        assert_eq!(spec.budget, 0);
        spec.adapt(0, 0, true);
        assert_eq!(spec.budget, MIN_LOOKUP_VERIFIED);
    }

    #[test]
    fn options_out_of_range_are_invalid() {
        let too_many = SpeculativeOptions {
            draft_n_max: MAX_DRAFT + 1,
            ..SpeculativeOptions::default()
        };
        assert!(matches!(too_many.validate(), Err(Error::InvalidOption(_))));
        let too_long = SpeculativeOptions {
            lookup_ngram_max: MAX_LOOKUP_NGRAM + 1,
            ..SpeculativeOptions::default()
        };
        assert!(matches!(too_long.validate(), Err(Error::InvalidOption(_))));
        assert!(SpeculativeOptions::default().validate().is_ok());
    }
}
