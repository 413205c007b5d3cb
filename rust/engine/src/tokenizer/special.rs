//! Special-token partitioning (llama.cpp's `tokenizer_st_partition`): before the model tokenizer
//! runs, occurrences of control / user-defined / unknown token texts are cut out of the text.
//!
//! llama.cpp walks the special tokens longest first and splits every remaining text fragment on
//! each one in turn. We do the same, but first find (with a byte trie, in one pass over the text)
//! which special tokens occur at all, so texts cost O(length) instead of O(length x specials).

use super::vocab::{attr, Vocab};

/// A piece of the input after partitioning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fragment {
    /// Plain text: a byte range of the input.
    Text(usize, usize),
    /// A special token found in the input.
    Token(u32),
}

#[derive(Debug, Clone, Default)]
struct Node {
    /// `(byte, child node)` sorted by byte.
    children: Vec<(u8, u32)>,
    /// Index into `SpecialTokens::order` of the token ending here.
    terminal: Option<u32>,
}

/// The special tokens of a vocabulary in matching order, with a trie for finding them.
#[derive(Debug, Clone)]
pub(crate) struct SpecialTokens {
    /// Token ids, longest text first (ties: lower id first).
    order: Vec<u32>,
    nodes: Vec<Node>,
}

impl SpecialTokens {
    /// Collects tokens whose attributes include control, user-defined or unknown.
    pub(crate) fn new(vocab: &Vocab) -> SpecialTokens {
        let special = attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN;
        let mut order: Vec<u32> = (0..vocab.len() as u32)
            .filter(|&id| {
                vocab.attr(id) & special != 0 && vocab.text(id).is_some_and(|t| !t.is_empty())
            })
            .collect();
        order.sort_by_key(|&id| (std::cmp::Reverse(vocab.text(id).map_or(0, <[u8]>::len)), id));

        let mut nodes = vec![Node::default()];
        for (rank, &id) in order.iter().enumerate() {
            let mut cur = 0usize;
            for &b in vocab.text(id).unwrap_or_default() {
                cur = match nodes[cur].children.binary_search_by_key(&b, |&(c, _)| c) {
                    Ok(i) => nodes[cur].children[i].1 as usize,
                    Err(i) => {
                        let next = nodes.len();
                        nodes.push(Node::default());
                        nodes[cur].children.insert(i, (b, next as u32));
                        next
                    }
                };
            }
            nodes[cur].terminal.get_or_insert(rank as u32);
        }
        SpecialTokens { order, nodes }
    }

    /// Ids of all special tokens.
    pub(crate) fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.order.iter().copied()
    }

    /// Ranks (indices into `order`) of special tokens that occur somewhere in `text`, ascending.
    fn occurring(&self, text: &[u8]) -> Vec<u32> {
        let mut found = Vec::new();
        for start in 0..text.len() {
            let mut cur = 0usize;
            for &b in &text[start..] {
                match self.nodes[cur]
                    .children
                    .binary_search_by_key(&b, |&(c, _)| c)
                {
                    Ok(i) => cur = self.nodes[cur].children[i].1 as usize,
                    Err(_) => break,
                }
                if let Some(rank) = self.nodes[cur].terminal {
                    found.push(rank);
                }
            }
        }
        found.sort_unstable();
        found.dedup();
        found
    }

    /// Splits `text` into plain-text fragments and special tokens. Control and unknown tokens are
    /// recognised only with `parse_special`; user-defined tokens always.
    pub(crate) fn partition(
        &self,
        vocab: &Vocab,
        text: &str,
        parse_special: bool,
    ) -> Vec<Fragment> {
        let mut frags = Vec::new();
        if text.is_empty() {
            return frags;
        }
        frags.push(Fragment::Text(0, text.len()));
        for rank in self.occurring(text.as_bytes()) {
            let id = self.order[rank as usize];
            if !parse_special && vocab.attr(id) & (attr::CONTROL | attr::UNKNOWN) != 0 {
                continue;
            }
            let Some(pat) = vocab.text(id).and_then(|t| std::str::from_utf8(t).ok()) else {
                continue;
            };
            let mut next = Vec::with_capacity(frags.len() + 2);
            for frag in frags {
                let Fragment::Text(mut s, e) = frag else {
                    next.push(frag);
                    continue;
                };
                let a = vocab.attr(id);
                let space = |i: usize| {
                    matches!(
                        text.as_bytes()[i],
                        b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r'
                    )
                };
                while let Some(off) = text[s..e].find(pat) {
                    // Tokens marked lstrip/rstrip swallow ASCII whitespace on that side.
                    let mut left_end = s + off;
                    while a & attr::LSTRIP != 0 && left_end > s && space(left_end - 1) {
                        left_end -= 1;
                    }
                    if left_end > s {
                        next.push(Fragment::Text(s, left_end));
                    }
                    next.push(Fragment::Token(id));
                    s += off + pat.len();
                    while a & attr::RSTRIP != 0 && s < e && space(s) {
                        s += 1;
                    }
                }
                if s < e {
                    next.push(Fragment::Text(s, e));
                }
            }
            frags = next;
        }
        frags
    }
}
