//! SentencePiece-style tokenization as llama.cpp's `llm_tokenizer_spm` does it: start from single
//! UTF-8 characters, repeatedly merge the adjacent pair whose concatenation is the vocabulary token
//! with the highest score (ties: leftmost), and emit byte-fallback tokens for leftover characters
//! that are not tokens.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::vocab::Vocab;

#[derive(Debug, Clone, Copy)]
struct Symbol {
    /// Byte offset into the text.
    start: usize,
    /// Byte length; 0 once merged into its left neighbour.
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

#[derive(Debug, Clone, Copy)]
struct Bigram {
    left: usize,
    right: usize,
    score: f32,
    size: usize,
}

impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Bigram {}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Bigram {
    /// Max-heap order: higher score first, then lower left index first.
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.left.cmp(&self.left))
    }
}

/// Appends the tokens of `text` (already whitespace-escaped) to `out`.
pub(crate) fn tokenize(
    vocab: &Vocab,
    byte_tokens: &[Option<u32>; 256],
    text: &str,
    out: &mut Vec<u32>,
) -> crate::Result<()> {
    let bytes = text.as_bytes();
    let mut symbols: Vec<Symbol> = Vec::with_capacity(text.len());
    let n_chars = text.chars().count();
    for (i, (start, c)) in text.char_indices().enumerate() {
        symbols.push(Symbol {
            start,
            len: c.len_utf8(),
            prev: i.checked_sub(1),
            next: if i + 1 < n_chars { Some(i + 1) } else { None },
        });
    }

    let mut queue = BinaryHeap::new();
    let try_add = |symbols: &[Symbol],
                   queue: &mut BinaryHeap<Bigram>,
                   left: Option<usize>,
                   right: Option<usize>| {
        let (Some(l), Some(r)) = (left, right) else {
            return;
        };
        let (ls, rs) = (symbols[l], symbols[r]);
        let piece = &bytes[ls.start..rs.start + rs.len];
        if let Some(id) = vocab.token_id(piece) {
            let score = vocab.scores.get(id as usize).copied().unwrap_or(0.0);
            queue.push(Bigram {
                left: l,
                right: r,
                score,
                size: piece.len(),
            });
        }
    };

    for i in 1..symbols.len() {
        try_add(&symbols, &mut queue, Some(i - 1), Some(i));
    }

    while let Some(b) = queue.pop() {
        let (l, r) = (symbols[b.left], symbols[b.right]);
        if l.len == 0 || r.len == 0 || l.len + r.len != b.size {
            continue;
        }
        symbols[b.left].len += r.len;
        symbols[b.right].len = 0;
        symbols[b.left].next = r.next;
        if let Some(n) = r.next {
            symbols[n].prev = Some(b.left);
        }
        try_add(&symbols, &mut queue, symbols[b.left].prev, Some(b.left));
        try_add(&symbols, &mut queue, Some(b.left), symbols[b.left].next);
    }

    let mut cur = if symbols.is_empty() { None } else { Some(0) };
    while let Some(i) = cur {
        let s = symbols[i];
        let piece = &bytes[s.start..s.start + s.len];
        match vocab.token_id(piece) {
            Some(id) => out.push(id),
            None => {
                for &b in piece {
                    match byte_tokens[b as usize] {
                        Some(id) => out.push(id),
                        None => {
                            return Err(crate::Error::Tokenizer(format!(
                                "no byte-fallback token for byte 0x{b:02X}"
                            )))
                        }
                    }
                }
            }
        }
        cur = s.next;
    }
    Ok(())
}
