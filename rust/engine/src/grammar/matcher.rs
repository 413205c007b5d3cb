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
            expand(&grammar, stack, &mut stacks);
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
        &self.grammar.rules[p.rule as usize][p.alt as usize][p.idx as usize]
    }

    /// Feed one code point; false (and the matcher left dead) when the grammar rejects it.
    pub fn accept_char(&mut self, c: u32) -> bool {
        let mut next = Vec::new();
        for stack in &self.stacks {
            let Some(&top) = stack.last() else { continue };
            if !self.elem(top).matches(c) {
                continue;
            }
            let mut s = stack.clone();
            s.pop();
            push_next(&self.grammar, &mut s, top);
            expand(&self.grammar, s, &mut next);
            if next.len() > MAX_STACKS * 4 {
                break;
            }
        }
        next.sort_unstable();
        next.dedup();
        next.truncate(MAX_STACKS);
        self.stacks = next;
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
                    let mut next = Vec::new();
                    for stack in &self.stacks {
                        let Some(&top) = stack.last() else { continue };
                        if self.elem(top).matches(c) {
                            let mut s = stack.clone();
                            s.pop();
                            push_next(&self.grammar, &mut s, top);
                            expand(&self.grammar, s, &mut next);
                        }
                    }
                    if next.is_empty() {
                        return false;
                    }
                    next.sort_unstable();
                    next.dedup();
                    next.truncate(MAX_STACKS);
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
fn expand(grammar: &Grammar, stack: Stack, out: &mut Vec<Stack>) {
    // Grammars whose rules can come back to themselves in last position revisit states.
    let mut seen = grammar.loops().then(std::collections::HashSet::new);
    let mut work = vec![stack];
    while let Some(mut stack) = work.pop() {
        if let Some(seen) = &mut seen {
            if !seen.insert(stack.clone()) {
                continue;
            }
        }
        let Some(&top) = stack.last() else {
            out.push(stack);
            continue;
        };
        match &grammar.rules[top.rule as usize][top.alt as usize][top.idx as usize] {
            Elem::Char { .. } => out.push(stack),
            Elem::Rule(r) => {
                stack.pop();
                push_next(grammar, &mut stack, top);
                for (alt, seq) in grammar.rules[*r as usize].iter().enumerate() {
                    let mut s = stack.clone();
                    if !seq.is_empty() {
                        s.push(Pos {
                            rule: *r,
                            alt: alt as u32,
                            idx: 0,
                        });
                    }
                    work.push(s);
                }
            }
        }
        if out.len() + work.len() > MAX_STACKS * 4 {
            return;
        }
    }
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
