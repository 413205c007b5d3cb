//! GPT-2 style byte-level BPE as llama.cpp's `llm_tokenizer_bpe` does it: pre-split the text into
//! words, write each word's bytes in the GPT-2 byte alphabet, then repeatedly merge the adjacent
//! pair with the lowest merge rank (ties: leftmost).
//!
//! Gemma 4 has a SentencePiece-style BPE vocabulary instead ([`Alphabet::Escaped`]): spaces are
//! written `▁`, words stay raw UTF-8, and a piece that is not a token falls back to `<0xXX>` byte
//! tokens.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

use super::pretokenize::{self, Stage};
use super::unicode::ByteLevel;
use super::vocab::Vocab;

/// Small fast hasher for `(u32, u32)` merge keys.
#[derive(Default)]
pub(crate) struct PairHasher(u64);

impl Hasher for PairHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.0 = (self.0.rotate_left(5) ^ u64::from(v)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// Merge ranks keyed by the vocabulary entry ids of the two parts.
pub(crate) type Ranks = HashMap<(u32, u32), u32, BuildHasherDefault<PairHasher>>;

/// Parses `tokenizer.ggml.merges` ("left right" strings) into ranks; the first occurrence of a pair
/// keeps its rank. Parts that are not tokens are interned into `vocab` as extra strings.
pub(crate) fn parse_merges<'a>(
    vocab: &mut Vocab,
    merges: impl Iterator<Item = &'a str>,
) -> crate::Result<Ranks> {
    let mut ranks = Ranks::default();
    for (rank, m) in merges.enumerate() {
        let b = m.as_bytes();
        // Like llama.cpp: the separator is the first space at byte index >= 1.
        let Some(pos) = b.iter().skip(1).position(|&c| c == b' ').map(|p| p + 1) else {
            continue;
        };
        let (left, right) = (&b[..pos], &b[pos + 1..]);
        if left.is_empty() || right.is_empty() {
            continue;
        }
        let l = vocab.intern_extra(left)?;
        let r = vocab.intern_extra(right)?;
        let rank =
            u32::try_from(rank).map_err(|_| crate::Error::Tokenizer("too many merges".into()))?;
        ranks.entry((l, r)).or_insert(rank);
    }
    Ok(ranks)
}

/// How a BPE vocabulary writes text.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)] // one per tokenizer, inside the boxed `Bpe`
pub(crate) enum Alphabet {
    /// GPT-2 byte level: every byte of a word is written as one printable char.
    ByteLevel(ByteLevel),
    /// SentencePiece style (llama.cpp's `escape_whitespaces` without `byte_encode`): spaces become
    /// `▁` before splitting, words are merged as raw UTF-8, and a piece that is not a token
    /// becomes the `<0xXX>` token of each byte (bytes without one are dropped, as in llama.cpp).
    Escaped {
        byte_tokens: Box<[Option<u32>; 256]>,
    },
}

/// BPE configuration for one vocabulary.
#[derive(Debug, Clone)]
pub(crate) struct Bpe {
    pub(crate) ranks: Ranks,
    pub(crate) stages: Vec<Stage>,
    pub(crate) ignore_merges: bool,
    /// A word made only of newlines that is a token is taken whole, without merging (llama.cpp's
    /// Gemma 4 fix).
    pub(crate) whole_newlines: bool,
    pub(crate) alphabet: Alphabet,
}

#[derive(Debug, Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    /// Vocabulary entry id of the symbol's text (token or merge part), if any.
    entry: Option<u32>,
    prev: Option<usize>,
    next: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bigram {
    rank: u32,
    left: usize,
    right: usize,
    size: usize,
}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Bigram {
    /// Max-heap order: lowest rank first, then lowest left index.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .rank
            .cmp(&self.rank)
            .then_with(|| other.left.cmp(&self.left))
    }
}

impl Bpe {
    /// Appends the tokens of one plain-text fragment to `out`.
    pub(crate) fn tokenize(&self, vocab: &Vocab, text: &str, out: &mut Vec<u32>) {
        let mut word = String::new();
        let mut symbols = Vec::new();
        let mut queue = BinaryHeap::new();
        match &self.alphabet {
            Alphabet::ByteLevel(byte_level) => {
                for (s, e) in pretokenize::split(text, &self.stages) {
                    word.clear();
                    for &b in &text.as_bytes()[s..e] {
                        word.push(byte_level.char_of(b));
                    }
                    self.merge_word(vocab, &word, &mut symbols, &mut queue, out);
                }
            }
            Alphabet::Escaped { .. } => {
                let escaped = text.replace(' ', "\u{2581}");
                for (s, e) in pretokenize::split(&escaped, &self.stages) {
                    self.merge_word(vocab, &escaped[s..e], &mut symbols, &mut queue, out);
                }
            }
        }
    }

    fn merge_word(
        &self,
        vocab: &Vocab,
        word: &str,
        symbols: &mut Vec<Symbol>,
        queue: &mut BinaryHeap<Bigram>,
        out: &mut Vec<u32>,
    ) {
        let bytes = word.as_bytes();
        if self.ignore_merges || (self.whole_newlines && bytes.iter().all(|&b| b == b'\n')) {
            if let Some(id) = vocab.token_id(bytes) {
                out.push(id);
                return;
            }
        }
        symbols.clear();
        queue.clear();
        let n_chars = word.chars().count();
        for (i, (start, c)) in word.char_indices().enumerate() {
            let len = c.len_utf8();
            symbols.push(Symbol {
                start,
                len,
                entry: vocab.lookup(&bytes[start..start + len]),
                prev: i.checked_sub(1),
                next: if i + 1 < n_chars { Some(i + 1) } else { None },
            });
        }
        let add = |symbols: &[Symbol],
                   queue: &mut BinaryHeap<Bigram>,
                   left: Option<usize>,
                   right: Option<usize>| {
            let (Some(l), Some(r)) = (left, right) else {
                return;
            };
            let (ls, rs) = (symbols[l], symbols[r]);
            let (Some(le), Some(re)) = (ls.entry, rs.entry) else {
                return;
            };
            if let Some(&rank) = self.ranks.get(&(le, re)) {
                queue.push(Bigram {
                    rank,
                    left: l,
                    right: r,
                    size: ls.len + rs.len,
                });
            }
        };
        for i in 1..symbols.len() {
            add(symbols, queue, Some(i - 1), Some(i));
        }
        while let Some(b) = queue.pop() {
            let (l, r) = (symbols[b.left], symbols[b.right]);
            if l.len == 0 || r.len == 0 || l.len + r.len != b.size {
                continue;
            }
            let merged = &mut symbols[b.left];
            merged.len += r.len;
            merged.next = r.next;
            merged.entry = vocab.lookup(&bytes[merged.start..merged.start + merged.len]);
            symbols[b.right].len = 0;
            if let Some(n) = r.next {
                symbols[n].prev = Some(b.left);
            }
            let prev = symbols[b.left].prev;
            let next = symbols[b.left].next;
            add(symbols, queue, prev, Some(b.left));
            add(symbols, queue, Some(b.left), next);
        }
        for s in symbols.iter().filter(|s| s.len > 0) {
            let piece = &bytes[s.start..s.start + s.len];
            match (vocab.token_id(piece), &self.alphabet) {
                (Some(id), _) => out.push(id),
                (None, Alphabet::ByteLevel(_)) => {
                    out.extend(piece.iter().filter_map(|&b| vocab.token_id(&[b])))
                }
                (None, Alphabet::Escaped { byte_tokens }) => {
                    out.extend(piece.iter().filter_map(|&b| byte_tokens[b as usize]))
                }
            }
        }
    }
}
