//! Generating past the context: when the cache is full, keep its first tokens, drop half of
//! the rest and move what follows down (llama.cpp's context shift, see
//! [`Model::shift_cache`](crate::model::Model::shift_cache)).

use super::{Runner, SeqState};
use crate::model::{KvCache, Output};
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

/// Shift the full `cache` (holding `cached`) of one sequence as `shift` plans it for a prompt of
/// `n_prompt` tokens: the number of positions kept at the start (later prompts may reuse only
/// those), or `None` when nothing can be dropped (the generation then ends as without a
/// shift). Single generations and batched sequences shift alike.
///
/// A recurrent state (LFM2, Qwen 3.5, Granite 4 hybrid) cannot be shifted: there the same tokens are
/// dropped, and what remains is evaluated again from an empty cache with `run` (exact, and
/// all of it reusable; it costs a prompt of that length).
pub(super) fn shift_sequence(
    run: &Runner<'_>,
    bos: Option<u32>,
    cache: &mut KvCache,
    cached: &mut Vec<u32>,
    shift: &ContextShift,
    n_prompt: usize,
) -> Result<Option<usize>> {
    let bos = bos.is_some_and(|b| cached.first() == Some(&b));
    let Some((n_keep, n_discard)) = shift.plan(n_prompt, bos, cached.len()) else {
        return Ok(None);
    };
    if cache.is_recurrent() {
        cached.drain(n_keep..n_keep + n_discard);
        let tokens = std::mem::take(cached);
        cache.truncate(0);
        let seq = SeqState { cache, cached };
        run.eval(seq, &tokens, Output::LastLogits, &mut |_, _| {}, None)?;
        return Ok(Some(tokens.len()));
    }
    run.model.shift_cache(cache, n_keep, n_discard)?;
    cached.drain(n_keep..n_keep + n_discard);
    Ok(Some(n_keep))
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
