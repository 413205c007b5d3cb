//! Generating past the context: when the cache is full, keep its first tokens, drop half of
//! the rest and move what follows down (llama.cpp's context shift, see
//! [`Model::shift_cache`](crate::model::Model::shift_cache)).

use super::Context;
use crate::Result;

/// How a generation continues when the context fills up (none in a request: it ends with
/// [`FinishReason::ContextFull`](super::FinishReason::ContextFull)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContextShift {
    /// Tokens of the prompt that are never dropped, not counting a BOS token the prompt starts
    /// with (always kept, as llama.cpp does); none: the whole prompt (llama.cpp's
    /// `--keep -1`). Larger than the prompt: the prompt.
    pub n_keep: Option<u32>,
}

impl ContextShift {
    /// The positions a shift keeps and drops in a full cache of `n_past` tokens for a prompt
    /// of `n_prompt` tokens (`bos`: starting with a BOS token): the first `n_keep`, then half
    /// of the rest (llama.cpp's default); `None` when nothing can be dropped.
    pub fn plan(&self, n_prompt: usize, bos: bool, n_past: usize) -> Option<(usize, usize)> {
        let n_keep = self
            .n_keep
            .map_or(n_prompt, |n| {
                (n as usize).saturating_add(bos as usize).min(n_prompt)
            })
            .min(n_past);
        let n_discard = (n_past - n_keep) / 2;
        (n_discard > 0).then_some((n_keep, n_discard))
    }
}

impl Context {
    /// Shift the full cache as `shift` plans it for a prompt of `n_prompt` tokens; `false`
    /// when nothing can be dropped (the generation then ends as without a shift).
    pub(super) fn shift(&mut self, shift: &ContextShift, n_prompt: usize) -> Result<bool> {
        let bos = self
            .model
            .tokenizer
            .bos()
            .is_some_and(|b| self.cached.first() == Some(&b));
        let Some((n_keep, n_discard)) = shift.plan(n_prompt, bos, self.cache.len()) else {
            return Ok(false);
        };
        self.model
            .model
            .shift_cache(&mut self.cache, n_keep, n_discard)?;
        self.cached.drain(n_keep..n_keep + n_discard);
        // The moved positions were computed with the dropped tokens in view: a later prompt
        // may reuse only the kept start, not them.
        self.reusable = self.reusable.min(n_keep);
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_keeps_the_prompt_and_drops_half_of_the_rest() {
        let all = ContextShift { n_keep: None };
        assert_eq!(all.plan(10, false, 256), Some((10, 123)));
        assert_eq!(all.plan(10, true, 256), Some((10, 123)));
        let keep = |n| ContextShift { n_keep: Some(n) };
        assert_eq!(keep(4).plan(10, false, 256), Some((4, 126)));
        assert_eq!(keep(4).plan(10, true, 256), Some((5, 125)));
        assert_eq!(keep(99).plan(10, false, 256), Some((10, 123)));
        assert_eq!(keep(0).plan(10, false, 256), Some((0, 128)));
        assert_eq!(keep(0).plan(10, true, 256), Some((1, 127)));
        // A prompt filling the context leaves nothing to drop.
        assert_eq!(all.plan(256, false, 256), None);
        assert_eq!(all.plan(255, false, 256), None);
    }
}
