//! Fitting a chat into a token budget by dropping its oldest messages (local-llm-js-core's
//! `contextOverflow` strategies `truncate_oldest` and `sliding_window`).
//!
//! Both keep a fixed head of system messages and the longest run of newest other messages
//! whose prompt fits. A prompt's length grows with the messages it holds, so the run is found
//! by binary search: ⌈log₂(n + 1)⌉ + 1 renders of at most n messages, O(n log n) in all (the
//! earlier message-by-message loop rendered up to n times, O(n²)).

use super::LoadedModel;
use crate::chat::ChatMessage;
use crate::Result;

/// Which messages [`LoadedModel::fit_chat`] may drop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChatTrim {
    /// Keep the system messages the chat starts with; drop the oldest of the others (a later
    /// system message included) until the prompt fits.
    TruncateOldest,
    /// Keep every system message wherever it is; keep the longest run of newest other
    /// messages that fits.
    SlidingWindow,
}

/// The messages [`LoadedModel::fit_chat`] kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatFit {
    /// Indices into the given messages, in order.
    pub kept: Vec<usize>,
    /// Prompt tokens of the kept messages (generation prompt included).
    pub prompt_tokens: usize,
}

impl LoadedModel {
    /// Prompt tokens of a chat (generation prompt added, tokenized as a request would be).
    pub fn chat_token_count(&self, messages: &[ChatMessage]) -> Result<usize> {
        Ok(self.chat_tokens(messages)?.len())
    }

    /// The messages to keep so that the chat's prompt has at most `available` tokens: all of
    /// them when they fit (or when `trim` is none), otherwise as [`ChatTrim`] says. When even
    /// the head alone does not fit, only the head is kept (the caller reports the overflow).
    pub fn fit_chat(
        &self,
        messages: &[ChatMessage],
        trim: Option<ChatTrim>,
        available: usize,
    ) -> Result<ChatFit> {
        let all: Vec<usize> = (0..messages.len()).collect();
        let total = self.chat_token_count(messages)?;
        let Some(trim) = trim.filter(|_| total > available) else {
            return Ok(ChatFit {
                kept: all,
                prompt_tokens: total,
            });
        };
        let (head, rest): (Vec<usize>, Vec<usize>) = match trim {
            ChatTrim::TruncateOldest => {
                let n = messages.iter().take_while(|m| m.role == "system").count();
                (all[..n].to_vec(), all[n..].to_vec())
            }
            ChatTrim::SlidingWindow => all.iter().partition(|&&i| messages[i].role == "system"),
        };
        let pick = |k: usize| -> Vec<usize> {
            let mut kept: Vec<usize> = head
                .iter()
                .chain(&rest[rest.len() - k..])
                .copied()
                .collect();
            kept.sort_unstable();
            kept
        };
        let count = |k: usize| -> Result<usize> {
            let chosen: Vec<ChatMessage> = pick(k).iter().map(|&i| messages[i].clone()).collect();
            self.chat_token_count(&chosen)
        };
        // The longest k (newest messages of `rest`) whose prompt fits; all of `rest` does not.
        let (mut lo, mut hi) = (0, rest.len().saturating_sub(1));
        let mut lo_tokens = None;
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            let tokens = count(mid)?;
            if tokens <= available {
                lo = mid;
                lo_tokens = Some(tokens);
            } else {
                hi = mid - 1;
            }
        }
        let prompt_tokens = match lo_tokens {
            Some(tokens) => tokens,
            None => count(lo)?,
        };
        Ok(ChatFit {
            kept: pick(lo),
            prompt_tokens,
        })
    }
}
