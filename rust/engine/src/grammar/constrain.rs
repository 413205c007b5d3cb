//! Grammar-constrained sampling: sample first, check the pick against the grammar, and only
//! when it is rejected mask every token the grammar cannot accept and sample again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::matcher::Matcher;
use super::parse::Grammar;
use crate::sampling::Sampler;
use crate::tokenizer::Tokenizer;
use crate::Result;

/// A grammar to constrain generation with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrammarRequest {
    /// GBNF source.
    pub gbnf: String,
    /// The rule to start from (llama.cpp's default is "root").
    pub root: String,
    /// Lazy grammar: generation is unconstrained until the generated text contains this string,
    /// then the grammar applies to the text from the trigger on (the trigger itself included),
    /// as llama.cpp's lazy grammars for tool calls. `None`: the grammar applies from the start.
    pub lazy_trigger: Option<String>,
}

impl GrammarRequest {
    /// A grammar applied from the first generated token, starting at rule `root`.
    pub fn new(gbnf: impl Into<String>) -> Self {
        GrammarRequest {
            gbnf: gbnf.into(),
            root: "root".into(),
            lazy_trigger: None,
        }
    }

    /// A grammar for JSON documents matching `schema` (see [`super::schema_to_gbnf`]).
    pub fn json_schema(schema: &str) -> Result<Self> {
        Ok(Self::new(super::schema_to_gbnf(schema)?))
    }

    /// Parse and validate the grammar.
    pub fn compile(&self) -> Result<Grammar> {
        if self.lazy_trigger.as_deref() == Some("") {
            return Err(crate::Error::Grammar("the lazy trigger is empty".into()));
        }
        Grammar::parse(&self.gbnf, &self.root)
    }
}

/// Every token's output bytes, computed once per model, with its first code point for quick
/// screening.
#[derive(Debug)]
pub struct TokenTable {
    bytes: Vec<u8>,
    /// `offsets[i]..offsets[i + 1]` are token `i`'s bytes.
    offsets: Vec<usize>,
    /// First code point of each token (`u32::MAX`: empty or not starting with a whole one).
    first: Vec<u32>,
}

impl TokenTable {
    /// The table for `tokenizer` (control tokens have no bytes).
    pub fn new(tokenizer: &Tokenizer) -> Self {
        let n = tokenizer.n_vocab();
        let mut bytes = Vec::new();
        let mut offsets = Vec::with_capacity(n + 1);
        let mut first = Vec::with_capacity(n);
        offsets.push(0);
        for id in 0..n as u32 {
            let piece = tokenizer.token_bytes(id, false);
            let c = first_char(&piece);
            first.push(c);
            bytes.extend_from_slice(&piece);
            offsets.push(bytes.len());
        }
        TokenTable {
            bytes,
            offsets,
            first,
        }
    }

    /// A table from explicit token pieces (token `i` is `pieces[i]`), e.g. for a vocabulary
    /// that does not come from a GGUF tokenizer.
    pub fn from_pieces(pieces: &[&[u8]]) -> Self {
        let mut bytes = Vec::new();
        let mut offsets = vec![0];
        for piece in pieces {
            bytes.extend_from_slice(piece);
            offsets.push(bytes.len());
        }
        TokenTable {
            bytes,
            offsets,
            first: pieces.iter().map(|p| first_char(p)).collect(),
        }
    }

    /// Token `id`'s bytes (empty beyond the vocabulary).
    pub fn bytes(&self, id: u32) -> &[u8] {
        let i = id as usize;
        match (self.offsets.get(i), self.offsets.get(i + 1)) {
            (Some(&a), Some(&b)) => &self.bytes[a..b],
            _ => &[],
        }
    }

    fn len(&self) -> usize {
        self.first.len()
    }
}

fn first_char(piece: &[u8]) -> u32 {
    let n = piece.len().min(4);
    (1..=n)
        .find_map(|k| std::str::from_utf8(&piece[..k]).ok())
        .and_then(|s| s.chars().next())
        .map_or(u32::MAX, |c| c as u32)
}

/// What the constraint decided for the next step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Generate this token.
    Token(u32),
    /// The grammar has matched completely and nothing can follow: stop.
    Complete,
    /// No token can continue the grammar.
    DeadEnd,
    /// The generation was cancelled while the vocabulary was being masked.
    Cancelled,
}

/// Tokens checked between two looks at the cancellation flag while masking.
const CANCEL_CHECK_EVERY: usize = 1024;

/// A grammar applied to one generation.
pub struct Constraint {
    matcher: Matcher,
    table: Arc<TokenTable>,
    /// Lazy trigger not seen yet, with the tail of the text generated so far.
    waiting: Option<(Vec<u8>, Vec<u8>)>,
    masked: Vec<f32>,
    /// Set to cancel the generation: masking stops at the next [`CANCEL_CHECK_EVERY`] tokens.
    cancel: Option<Arc<AtomicBool>>,
}

impl Constraint {
    /// A constraint from a compiled grammar, the model's token table and the optional lazy
    /// trigger.
    pub fn new(grammar: Grammar, table: Arc<TokenTable>, lazy_trigger: Option<&str>) -> Self {
        Constraint {
            matcher: Matcher::new(Arc::new(grammar)),
            table,
            waiting: lazy_trigger.map(|t| (t.as_bytes().to_vec(), Vec::new())),
            masked: Vec::new(),
            cancel: None,
        }
    }

    /// Watch `cancel` while masking: a set flag ends [`Constraint::pick`] with
    /// [`Step::Cancelled`] within [`CANCEL_CHECK_EVERY`] token checks, so a grammar whose
    /// masking is slow cannot delay a cancellation by more than a fraction of one mask.
    pub fn set_cancel(&mut self, cancel: Option<Arc<AtomicBool>>) {
        self.cancel = cancel;
    }

    fn cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
    }

    /// Whether the grammar applies yet (false while a lazy trigger has not appeared).
    pub fn is_active(&self) -> bool {
        self.waiting.is_none()
    }

    /// Whether `token` keeps the grammar alive (`eog`: it ends generation, allowed only when
    /// the grammar is complete).
    fn allowed(&self, token: u32, eog: bool) -> bool {
        if eog {
            return self.matcher.is_complete();
        }
        let bytes = self.table.bytes(token);
        if bytes.is_empty() {
            return false;
        }
        if !self.matcher.has_pending() {
            match self.table.first.get(token as usize) {
                Some(&c) if c != u32::MAX && !self.matcher.allows_first(c) => return false,
                None => return false,
                _ => {}
            }
        }
        self.matcher.accepts(bytes)
    }

    /// Pick the next token: `sampler`'s choice when the grammar accepts it, else a choice among
    /// the tokens it accepts. `is_eog` tells end-of-generation tokens apart.
    pub fn pick(
        &mut self,
        sampler: &mut Sampler,
        logits: &[f32],
        history: &[u32],
        is_eog: &dyn Fn(u32) -> bool,
    ) -> Step {
        if self.waiting.is_some() {
            return Step::Token(sampler.sample(logits, history));
        }
        if !self.matcher.can_continue() {
            return if self.matcher.is_complete() {
                Step::Complete
            } else {
                Step::DeadEnd
            };
        }
        let first = sampler.sample(logits, history);
        if self.allowed(first, is_eog(first)) {
            return Step::Token(first);
        }
        // The first draw is not used: its feedback (Mirostat) must not count.
        sampler.rewind();
        let mut masked = std::mem::take(&mut self.masked);
        masked.clear();
        masked.extend_from_slice(logits);
        let mut any = false;
        for (id, logit) in masked.iter_mut().enumerate() {
            if id % CANCEL_CHECK_EVERY == 0 && self.cancelled() {
                self.masked = masked;
                return Step::Cancelled;
            }
            let id = id as u32;
            if (id as usize) < self.table.len() && self.allowed(id, is_eog(id)) {
                any |= *logit > f32::NEG_INFINITY;
            } else {
                *logit = f32::NEG_INFINITY;
            }
        }
        let step = if any {
            let token = sampler.sample(&masked, history);
            if masked
                .get(token as usize)
                .is_some_and(|l| *l > f32::NEG_INFINITY)
            {
                Step::Token(token)
            } else {
                // Rounding picked a masked token: fall back to the best allowed one.
                let best = masked
                    .iter()
                    .enumerate()
                    .max_by(|a, b| a.1.total_cmp(b.1))
                    .map_or(0, |(i, _)| i as u32);
                Step::Token(best)
            }
        } else {
            Step::DeadEnd
        };
        self.masked = masked;
        step
    }

    /// Advance past a generated `token` (not an end-of-generation token). Returns false when
    /// the grammar rejects it (only possible right after a lazy trigger appears).
    pub fn accept(&mut self, token: u32) -> bool {
        let bytes = self.table.bytes(token);
        if let Some((trigger, tail)) = &mut self.waiting {
            tail.extend_from_slice(bytes);
            let Some(at) = find(tail, trigger) else {
                let keep = trigger.len().saturating_sub(1);
                let cut = tail.len().saturating_sub(keep);
                tail.drain(..cut);
                return true;
            };
            let rest = tail[at..].to_vec();
            self.waiting = None;
            return self.matcher.accept_bytes(&rest);
        }
        self.matcher.accept_bytes(bytes)
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampling::SamplingParams;

    /// Pieces: 0 "a", 1 "b", 2 "{", 3 "}", 4 first byte of "é", 5 its second byte, 6 "é",
    /// 7 end-of-generation (no text).
    const PIECES: &[&[u8]] = &[
        b"a",
        b"b",
        b"{",
        b"}",
        &[0xC3],
        &[0xA9],
        "é".as_bytes(),
        b"",
    ];
    const EOG: u32 = 7;

    fn constraint(gbnf: &str, trigger: Option<&str>) -> Constraint {
        let grammar = Grammar::parse(gbnf, "root").unwrap();
        Constraint::new(grammar, Arc::new(TokenTable::from_pieces(PIECES)), trigger)
    }

    /// Logits where `favourite` is by far the most likely token.
    fn logits(favourite: u32) -> Vec<f32> {
        (0..PIECES.len() as u32)
            .map(|i| if i == favourite { 10.0 } else { 0.0 })
            .collect()
    }

    fn step(c: &mut Constraint, favourite: u32) -> Step {
        let mut sampler = Sampler::new(SamplingParams::greedy()).unwrap();
        c.pick(&mut sampler, &logits(favourite), &[], &|t| t == EOG)
    }

    #[test]
    fn rejected_picks_are_resampled_among_allowed_tokens() {
        let mut c = constraint(r#"root ::= "{" "b"+ "}""#, None);
        assert_eq!(step(&mut c, 0), Step::Token(2));
        assert!(c.accept(2));
        // End of generation is refused until the grammar can end.
        assert_eq!(step(&mut c, EOG), Step::Token(1));
        assert!(c.accept(1));
        assert_eq!(step(&mut c, EOG), Step::Token(1));
        assert!(c.accept(1));
        assert_eq!(step(&mut c, 3), Step::Token(3));
        assert!(c.accept(3));
        assert_eq!(step(&mut c, 0), Step::Complete);
    }

    #[test]
    fn end_of_generation_is_allowed_once_complete() {
        let mut c = constraint(r#"root ::= "a"+"#, None);
        assert_eq!(step(&mut c, EOG), Step::Token(0));
        assert!(c.accept(0));
        assert_eq!(step(&mut c, EOG), Step::Token(EOG));
    }

    #[test]
    fn split_utf8_sequences_match_across_tokens() {
        let mut c = constraint(r#"root ::= "é" "a""#, None);
        // The first byte alone is a valid prefix of "é".
        assert_eq!(step(&mut c, 4), Step::Token(4));
        assert!(c.accept(4));
        // Only its continuation byte can follow.
        assert_eq!(step(&mut c, 6), Step::Token(5));
        assert!(c.accept(5));
        assert_eq!(step(&mut c, 5), Step::Token(0));
        // A first byte whose code points cannot match is refused.
        let mut c = constraint(r#"root ::= "a""#, None);
        assert_eq!(step(&mut c, 4), Step::Token(0));
    }

    #[test]
    fn no_acceptable_token_is_a_dead_end() {
        let mut c = constraint(r#"root ::= "z""#, None);
        assert_eq!(step(&mut c, 0), Step::DeadEnd);
    }

    #[test]
    fn lazy_grammars_wait_for_their_trigger() {
        let mut c = constraint(r#"root ::= "{" "a"* "}""#, Some("{"));
        // Unconstrained before the trigger.
        assert_eq!(step(&mut c, 1), Step::Token(1));
        assert!(c.accept(1));
        assert!(!c.is_active());
        assert!(c.accept(2));
        assert!(c.is_active());
        // From the trigger on, the grammar applies.
        assert_eq!(step(&mut c, 1), Step::Token(0));
        // The grammar matches the text from the trigger on, the trigger included.
        let mut c = constraint(r#"root ::= "{" "a"* "}""#, Some("b{"));
        assert!(c.accept(1));
        assert!(!c.accept(2));
    }
}
