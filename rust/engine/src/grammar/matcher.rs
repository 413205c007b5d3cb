//! Matching text against a [`Grammar`]: a set of pushdown stacks over Unicode code points, as
//! llama.cpp does. Each stack lists grammar positions still to match, innermost last; its top is
//! always a character element, and an empty stack means the grammar has matched completely.
//! Text arrives as bytes (token pieces): a UTF-8 sequence split across tokens is kept pending
//! and checked for a possible match when a piece ends inside it.

use std::sync::Arc;

use super::parse::{Elem, Grammar};

/// A position in the grammar: element `idx` of alternative `alt` of rule `rule`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Pos {
    rule: u32,
    alt: u32,
    idx: u32,
}

type Stack = Vec<Pos>;

/// Most stacks a matcher keeps (ambiguous grammars can multiply them); beyond it the text is
/// rejected rather than spending unbounded memory.
const MAX_STACKS: usize = 4096;

/// Most stack positions (summed over the stacks visited) one code point may cost. Grammars
/// that nest ever deeper while staying ambiguous (`root ::= [a-z]+ root`) would otherwise cost
/// more per character the longer the text; past this budget the remaining continuations are
/// dropped, as past [`MAX_STACKS`]. Any-JSON nested 100 levels deep costs about 2,500.
const MAX_CELLS: usize = 1 << 13;

/// The state of matching a grammar: which continuations are possible after the text so far.
#[derive(Clone, Debug)]
pub struct Matcher {
    grammar: Arc<Grammar>,
    stacks: Vec<Stack>,
    /// Bytes of an incomplete UTF-8 sequence at the end of the text.
    pending: Vec<u8>,
}

impl Matcher {
    /// A matcher at the start of `grammar`'s root rule.
    pub fn new(grammar: Arc<Grammar>) -> Matcher {
        let mut stacks = Vec::new();
        let root = grammar.root;
        let mut cells = MAX_CELLS;
        for (alt, seq) in grammar.rules[root as usize].iter().enumerate() {
            let stack = if seq.is_empty() {
                Vec::new()
            } else {
                vec![Pos {
                    rule: root,
                    alt: alt as u32,
                    idx: 0,
                }]
            };
            expand(&grammar, stack, &mut stacks, &mut cells);
        }
        stacks.sort_unstable();
        stacks.dedup();
        Matcher {
            grammar,
            stacks,
            pending: Vec::new(),
        }
    }

    /// Whether the text so far is a complete match (generation may end here).
    pub fn is_complete(&self) -> bool {
        self.pending.is_empty() && self.stacks.iter().any(Vec::is_empty)
    }

    /// Whether more text can extend the match (false: it must end here, or it is dead).
    pub fn can_continue(&self) -> bool {
        self.stacks.iter().any(|s| !s.is_empty())
    }

    /// Whether no text at all can follow (not even the end).
    pub fn is_dead(&self) -> bool {
        self.stacks.is_empty()
    }

    /// Whether `c` may come next (ignores pending bytes; used for quick screening).
    pub(crate) fn allows_first(&self, c: u32) -> bool {
        self.stacks
            .iter()
            .any(|s| s.last().is_some_and(|p| self.elem(*p).matches(c)))
    }

    /// Whether the matcher is in the middle of a UTF-8 sequence.
    pub(crate) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    fn elem(&self, p: Pos) -> &Elem {
        elem(&self.grammar, p)
    }

    /// Feed one code point; false (and the matcher left dead) when the grammar rejects it.
    pub fn accept_char(&mut self, c: u32) -> bool {
        self.stacks = advance(&self.grammar, &self.stacks, c);
        !self.stacks.is_empty()
    }

    /// Whether feeding `bytes` would keep the grammar alive, without changing the matcher (only
    /// the stacks that accept the first code point are copied).
    pub fn accepts(&self, bytes: &[u8]) -> bool {
        let mut buf = self.pending.clone();
        let mut i = 0;
        while i < bytes.len() {
            buf.push(bytes[i]);
            i += 1;
            match decode(&buf) {
                Utf8::Incomplete => {}
                Utf8::Invalid => return false,
                Utf8::Char(c) => {
                    let next = advance(&self.grammar, &self.stacks, c);
                    if next.is_empty() {
                        return false;
                    }
                    let mut rest = Matcher {
                        grammar: self.grammar.clone(),
                        stacks: next,
                        pending: Vec::new(),
                    };
                    return rest.accept_bytes(&bytes[i..]);
                }
            }
        }
        // Only part of a UTF-8 sequence.
        let (lo, hi) = prefix_range(&buf);
        self.stacks.iter().any(|s| {
            s.last()
                .is_some_and(|p| self.elem(*p).matches_any_in(lo, hi))
        })
    }

    /// Feed `text`; false when the grammar rejects it (the matcher is then dead).
    pub fn accept_str(&mut self, text: &str) -> bool {
        self.accept_bytes(text.as_bytes())
    }

    /// Feed raw bytes (a token's piece). A UTF-8 sequence left incomplete at the end is kept
    /// pending and must be able to match. False when the grammar rejects the bytes or they are
    /// not UTF-8; the matcher is then dead.
    pub fn accept_bytes(&mut self, bytes: &[u8]) -> bool {
        let mut buf = std::mem::take(&mut self.pending);
        for &b in bytes {
            buf.push(b);
            match decode(&buf) {
                Utf8::Char(c) => {
                    buf.clear();
                    if !self.accept_char(c) {
                        return false;
                    }
                }
                Utf8::Incomplete => {}
                Utf8::Invalid => {
                    self.stacks.clear();
                    return false;
                }
            }
        }
        if !buf.is_empty() {
            let (lo, hi) = prefix_range(&buf);
            let possible = self.stacks.iter().any(|s| {
                s.last()
                    .is_some_and(|p| self.elem(*p).matches_any_in(lo, hi))
            });
            if !possible {
                self.stacks.clear();
                return false;
            }
            self.pending = buf;
        }
        true
    }
}

/// The stacks that follow `stacks` once `c` is matched (sorted, without duplicates, within
/// [`MAX_STACKS`] and one code point's [`MAX_CELLS`]).
fn advance(grammar: &Grammar, stacks: &[Stack], c: u32) -> Vec<Stack> {
    let mut next = Vec::new();
    let mut cells = MAX_CELLS;
    for stack in stacks {
        let Some(&top) = stack.last() else { continue };
        if !elem(grammar, top).matches(c) {
            continue;
        }
        let mut s = stack.clone();
        s.pop();
        push_next(grammar, &mut s, top);
        if !expand(grammar, s, &mut next, &mut cells) {
            break;
        }
    }
    // Shorter stacks first: stacks of different depths then compare in constant time.
    next.sort_unstable_by(|a, b| a.len().cmp(&b.len()).then_with(|| a.cmp(b)));
    next.dedup();
    next.truncate(MAX_STACKS);
    next
}

/// The grammar element at `p`.
fn elem(grammar: &Grammar, p: Pos) -> &Elem {
    &grammar.rules[p.rule as usize][p.alt as usize][p.idx as usize]
}

/// Push the position after `p` when its alternative continues.
fn push_next(grammar: &Grammar, stack: &mut Stack, p: Pos) {
    let len = grammar.rules[p.rule as usize][p.alt as usize].len() as u32;
    if p.idx + 1 < len {
        stack.push(Pos {
            idx: p.idx + 1,
            ..p
        });
    }
}

/// Expand rule references at the top of `stack` until every resulting stack has a character
/// element on top (or is empty: complete), adding them to `out`. Terminates because left
/// recursion that grows the stack is rejected at parse time and repeated states are skipped.
/// False when the stack count or the `cells` budget ran out (the rest is dropped).
fn expand(grammar: &Grammar, stack: Stack, out: &mut Vec<Stack>, cells: &mut usize) -> bool {
    // Every state on the way is a prefix of `stack` (its length) plus what was pushed on it,
    // so remembering states costs only the pushed part, however deep `stack` is.
    let mut seen = grammar.loops().then(std::collections::HashSet::new);
    let mut work = vec![(stack.len(), Vec::new())];
    while let Some((base, mut pushed)) = work.pop() {
        let Some(left) = cells.checked_sub(pushed.len() + 1) else {
            return false;
        };
        *cells = left;
        if let Some(seen) = &mut seen {
            if !seen.insert((base, pushed.clone())) {
                continue;
            }
        }
        let top = match (pushed.last(), base.checked_sub(1)) {
            (Some(&p), _) => p,
            (None, Some(below)) => stack[below],
            (None, None) => {
                out.push(Vec::new());
                continue;
            }
        };
        match elem(grammar, top) {
            Elem::Char { .. } => {
                let Some(left) = cells.checked_sub(base + pushed.len()) else {
                    return false;
                };
                *cells = left;
                let mut full = Vec::with_capacity(base + pushed.len());
                full.extend_from_slice(&stack[..base]);
                full.extend_from_slice(&pushed);
                out.push(full);
            }
            Elem::Rule(r) => {
                let base = if pushed.pop().is_some() {
                    base
                } else {
                    base - 1
                };
                push_next(grammar, &mut pushed, top);
                for (alt, seq) in grammar.rules[*r as usize].iter().enumerate() {
                    let mut s = pushed.clone();
                    if !seq.is_empty() {
                        s.push(Pos {
                            rule: *r,
                            alt: alt as u32,
                            idx: 0,
                        });
                    }
                    work.push((base, s));
                }
            }
        }
        if out.len() + work.len() > MAX_STACKS * 4 {
            return false;
        }
    }
    true
}

enum Utf8 {
    Char(u32),
    Incomplete,
    Invalid,
}

/// Decode `buf` as one UTF-8 sequence.
fn decode(buf: &[u8]) -> Utf8 {
    let need = match buf[0] {
        0x00..=0x7f => 1,
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => return Utf8::Invalid,
    };
    if buf.len() < need {
        // Check the continuation bytes so far.
        if buf[1..].iter().all(|b| b & 0xc0 == 0x80) {
            return Utf8::Incomplete;
        }
        return Utf8::Invalid;
    }
    match std::str::from_utf8(buf) {
        Ok(s) => s
            .chars()
            .next()
            .map_or(Utf8::Invalid, |c| Utf8::Char(c as u32)),
        Err(_) => Utf8::Invalid,
    }
}

/// The code points an incomplete UTF-8 sequence `prefix` can still become.
fn prefix_range(prefix: &[u8]) -> (u32, u32) {
    let (need, lead_bits) = match prefix[0] {
        0xc2..=0xdf => (2, (prefix[0] & 0x1f) as u32),
        0xe0..=0xef => (3, (prefix[0] & 0x0f) as u32),
        _ => (4, (prefix[0] & 0x07) as u32),
    };
    let mut value = lead_bits;
    for b in &prefix[1..] {
        value = (value << 6) | (b & 0x3f) as u32;
    }
    let missing = 6 * (need - prefix.len()) as u32;
    // The smallest code point each length encodes (shorter forms are overlong, invalid).
    let min = [0, 0, 0x80, 0x800, 0x1_0000][need];
    let lo = (value << missing).max(min);
    let hi = ((value << missing) | ((1u32 << missing) - 1)).min(0x10_FFFF);
    (lo, hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cells(m: &Matcher) -> usize {
        m.stacks.iter().map(Vec::len).sum()
    }

    #[test]
    fn ever_deeper_ambiguous_grammars_cost_bounded_work_per_character() {
        // Each letter may start another `root`, so the n-th letter leaves n stacks up to n deep:
        // without a budget the text's cost grows with its length cubed (a fuzzing timeout).
        let grammar = Grammar::parse("root ::= [a-z]+ root ()*", "root").unwrap();
        let mut m = Matcher::new(Arc::new(grammar));
        for i in 0..600 {
            assert!(m.accepts(b"mm"), "letter {i}");
            assert!(m.accept_char('m' as u32), "letter {i}");
            assert!(
                cells(&m) <= MAX_CELLS,
                "letter {i}: {} positions",
                cells(&m)
            );
        }
        assert!(!m.accepts(b"1"));
        assert!(!m.is_complete(), "root never ends");
    }

    #[test]
    fn the_budget_leaves_deep_json_alone() {
        // Any JSON value, 100 objects and arrays deep (serde_json refuses beyond 128).
        let grammar = Grammar::parse(&crate::grammar::json_object_gbnf(), "root").unwrap();
        let mut m = Matcher::new(Arc::new(grammar));
        let text = format!(
            "{}{{}}{}",
            r#"{"k": [1, 2.5e3, "x y", "#.repeat(50),
            "]}".repeat(50)
        );
        assert!(m.accept_str(&text));
        assert!(m.is_complete());
        assert!(!m.accepts(b"]"));
    }
}
