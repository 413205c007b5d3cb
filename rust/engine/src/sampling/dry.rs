//! DRY ("Don't Repeat Yourself", by p-e-w; llama.cpp's port of koboldcpp's implementation):
//! a token that would extend a sequence already repeated in the recent history is penalized by
//! `multiplier * base^(length - allowed_length)`. Sequence breakers (strings such as "\n" or
//! ":") end a repetition: a repeat never reaches back across one.

use std::collections::HashMap;

use crate::tokenizer::Tokenizer;

/// Longest breaker string, in bytes (longer ones are cut, as in llama.cpp).
const MAX_BREAKER_BYTES: usize = 40;
/// Most tokens of a breaker's tail that are matched (as in llama.cpp).
const MAX_TAIL_TOKENS: usize = 20;
/// Most breaker strings a request may give.
pub const MAX_BREAKERS: usize = 256;

/// Sequence breakers as token sequences: for a head token, the tails that complete a breaker
/// after it (an empty tail: the head alone is a breaker).
#[derive(Clone, Debug, Default)]
pub struct DryBreakers {
    by_head: HashMap<u32, Vec<Vec<u32>>>,
}

impl DryBreakers {
    /// Breakers given directly as token sequences (head first); empty sequences are skipped.
    pub fn from_token_sequences(seqs: &[Vec<u32>]) -> Self {
        let mut out = DryBreakers::default();
        for seq in seqs {
            if let Some((&head, tail)) = seq.split_first() {
                out.add(head, tail.to_vec());
            }
        }
        out
    }

    /// Breaker strings resolved against a vocabulary as llama.cpp does: every token whose text
    /// contains a breaker is a breaker by itself; a token whose text ends with the start of a
    /// breaker is a head whose tail is the rest of the breaker, tokenized (at most 20 tokens).
    /// Empty strings are skipped; strings longer than 40 bytes are cut.
    pub fn for_vocab(breakers: &[String], tokenizer: &Tokenizer) -> crate::Result<Self> {
        let mut out = DryBreakers::default();
        let cut: Vec<&[u8]> = breakers
            .iter()
            .map(|b| &b.as_bytes()[..b.len().min(MAX_BREAKER_BYTES)])
            .filter(|b| !b.is_empty())
            .collect();
        if cut.is_empty() {
            return Ok(out);
        }
        let mut tails: HashMap<&[u8], Vec<u32>> = HashMap::new();
        for id in 0..tokenizer.n_vocab() as u32 {
            let word = tokenizer.detokenize(&[id], true);
            for &b in &cut {
                if contains(&word, b) {
                    out.add(id, Vec::new());
                    continue;
                }
                // Every position where the word's end overlaps the breaker's start.
                for pos in (0..word.len()).filter(|&p| word[p] == b[0]) {
                    let overlap = (word.len() - pos).min(b.len());
                    if word[pos..pos + overlap] != b[..overlap] {
                        continue;
                    }
                    let rest = &b[overlap..];
                    let tail = match tails.get(rest) {
                        Some(t) => t.clone(),
                        None => {
                            let text = String::from_utf8_lossy(rest);
                            let mut t = tokenizer.encode(&text, false, false)?;
                            t.truncate(MAX_TAIL_TOKENS);
                            tails.insert(rest, t.clone());
                            t
                        }
                    };
                    out.add(id, tail);
                }
            }
        }
        Ok(out)
    }

    fn add(&mut self, head: u32, tail: Vec<u32>) {
        let tails = self.by_head.entry(head).or_default();
        if !tails.contains(&tail) {
            tails.push(tail);
        }
    }

    /// Whether `token` alone is a breaker.
    fn is_single(&self, token: u32) -> bool {
        self.by_head
            .get(&token)
            .is_some_and(|t| t.iter().any(Vec::is_empty))
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The DRY parameters of one request.
#[derive(Clone, Copy, Debug)]
pub struct DryParams {
    /// Penalty scale; 0 = off.
    pub multiplier: f32,
    /// Growth per token of repetition beyond `allowed_length`; below 1 = off.
    pub base: f32,
    /// Repetitions up to this length are free.
    pub allowed_length: usize,
}

/// The DRY penalty (to subtract from the logit) of every token that would extend a repetition
/// in `window` (the most recent history tokens, oldest first), sorted by id.
pub fn dry_penalties(window: &[u32], breakers: &DryBreakers, p: &DryParams) -> Vec<(u32, f32)> {
    let n = window.len();
    if p.multiplier == 0.0 || p.base < 1.0 || n <= p.allowed_length {
        return Vec::new();
    }
    // `rat(i)`: the i-th token from the end.
    let rat = |i: usize| window[n - 1 - i];

    // 1. The most recent breaker limits how far back a repetition may reach.
    let mut rep_limit = n;
    for i in 0..n {
        let Some(tails) = breakers.by_head.get(&rat(i)) else {
            continue;
        };
        let longest = tails
            .iter()
            .filter(|t| t.len() <= i)
            .filter(|t| t.iter().enumerate().all(|(o, &tok)| tok == rat(i - o - 1)))
            .map(Vec::len)
            .max();
        if let Some(len) = longest {
            rep_limit = i - len;
            break;
        }
    }
    if rep_limit < p.allowed_length {
        return Vec::new();
    }

    // 2. Z-algorithm over the reversed window: repeat[last - k] = how many tokens ending k
    // before the end equal the window's last tokens (capped at rep_limit).
    let last = n - 1;
    let mut repeat = vec![0usize; n];
    let (mut lt, mut rt) = (0usize, 0usize);
    for k in 1..n {
        if k > rt {
            let mut len = 0;
            while len + k < n && rat(len) == rat(len + k) {
                len += 1;
            }
            repeat[last - k] = len.min(rep_limit);
            if len > 0 {
                lt = k;
                rt = k + len - 1;
            }
        } else {
            let pair = k - lt;
            let right = rt - k + 1;
            if repeat[last - pair] < right {
                repeat[last - k] = repeat[last - pair].min(rep_limit);
            } else {
                let mut i = rt + 1;
                while i < n && rat(i) == rat(i - k) {
                    i += 1;
                }
                repeat[last - k] = (i - k).min(rep_limit);
                lt = k;
                rt = i - 1;
            }
        }
    }

    // 3. The token after each repeat would extend it: keep the longest repeat per token.
    let mut longest: HashMap<u32, usize> = HashMap::new();
    for (i, &len) in repeat.iter().enumerate().take(n - 1) {
        if len >= p.allowed_length {
            let token = rat(n - 2 - i);
            let e = longest.entry(token).or_insert(len);
            *e = (*e).max(len);
        }
    }

    // 4. Penalties; the exponent is capped so that base^exp stays a finite f32.
    let max_exponent = if p.base > 1.000001 {
        (88.722_84_f32 / p.base.ln()) as usize
    } else {
        0
    };
    let mut out: Vec<(u32, f32)> = longest
        .into_iter()
        .filter(|&(token, _)| !breakers.is_single(token))
        .map(|(token, len)| {
            let mut exp = len - p.allowed_length;
            if max_exponent > 0 {
                exp = exp.min(max_exponent);
            }
            (token, p.multiplier * p.base.powi(exp as i32))
        })
        .collect();
    out.sort_unstable_by_key(|&(t, _)| t);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> DryParams {
        DryParams {
            multiplier: 1.0,
            base: 2.0,
            allowed_length: 2,
        }
    }

    #[test]
    fn the_token_that_continues_a_repeat_is_penalized() {
        // "a b c x a b": c would extend the repeat "a b" (length 2, exponent 0).
        let none = DryBreakers::default();
        assert_eq!(
            dry_penalties(&[0, 1, 2, 9, 0, 1], &none, &params()),
            [(2, 1.0)]
        );
        // A longer repeat grows the penalty: "a b c d x a b c" -> d (length 3, exponent 1).
        assert_eq!(
            dry_penalties(&[0, 1, 2, 3, 9, 0, 1, 2], &none, &params()),
            [(3, 2.0)]
        );
    }

    #[test]
    fn a_breaker_stops_the_repeat() {
        // The breaker 9 right before the end leaves a repeat of length 1 (allowed).
        let br = DryBreakers::from_token_sequences(&[vec![9]]);
        assert!(dry_penalties(&[0, 1, 2, 0, 9, 1], &br, &params()).is_empty());
        // A single-token breaker is never penalized itself.
        assert!(dry_penalties(&[0, 1, 9, 4, 0, 1], &br, &params()).is_empty());
    }
}
