//! SentencePiece's Unigram model (llama.cpp's UGM, `tokenizer.ggml.model = "t5"`): T5, mT5 and
//! XLM-RoBERTa vocabularies (multilingual-e5, bge-m3, bge-reranker-v2-m3).
//!
//! Text is first normalised: user-defined tokens pass through unchanged, then the longest input
//! prefix found in the file's precompiled character map (`tokenizer.ggml.precompiled_charsmap`,
//! sentencepiece's XOR-compressed compact double array of rules, followed by NUL-terminated
//! replacement strings) is replaced, anything else passes one code point at a time; spaces become
//! `▁`, with one prepended (`add_space_prefix`) and runs merged (`remove_extra_whitespaces`) as
//! the file says. The normalised bytes are then cut by Viterbi over the vocabulary: each step of
//! one code point extends the best tokenization ending there with every normal, user-defined
//! (score 0) or unused token that starts there; a code point no token covers costs the lowest
//! normal score minus 10 as the unknown token, and consecutive unknown tokens merge into one.
//! Scores add in f64, as llama.cpp (and so HF's sentencepiece) does.

use std::collections::HashSet;

use super::vocab::{attr, Vocab};
use crate::{Error, Result};

/// The escaped space `▁` (U+2581).
const SPACE: &[u8] = "\u{2581}".as_bytes();

/// What an unknown code point costs below the lowest normal token score.
const UNKNOWN_PENALTY: f32 = 10.0;

/// A precompiled character map: the double array's 32-bit entries and the replacement strings.
#[derive(Debug, Clone)]
struct CharsMap {
    xcda: Vec<u32>,
    replacements: Vec<u8>,
}

impl CharsMap {
    /// Parse the GGUF bytes: a little-endian u32 byte length of the array, the array, then the
    /// replacement strings.
    fn parse(bytes: &[u8]) -> Result<CharsMap> {
        let bad = |why: &str| Error::Tokenizer(format!("precompiled_charsmap: {why}"));
        let head: [u8; 4] = bytes
            .get(..4)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| bad("shorter than its 4-byte header"))?;
        let size = u32::from_le_bytes(head) as usize;
        // As llama.cpp: the replacements must not be empty (a size not a multiple of 4 leaves
        // its last bytes out of the array).
        if size.saturating_add(4) >= bytes.len() {
            return Err(bad("array size out of bounds"));
        }
        let xcda = bytes[4..4 + size]
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        Ok(CharsMap {
            xcda,
            replacements: bytes[4 + size..].to_vec(),
        })
    }

    fn node(&self, i: usize) -> Result<u32> {
        self.xcda
            .get(i)
            .copied()
            .ok_or_else(|| Error::Tokenizer("precompiled_charsmap: index out of its array".into()))
    }

    /// The longest prefix of `input` with a rule: its length and replacement (`None`: no rule).
    fn longest(&self, input: &[u8]) -> Result<Option<(usize, &[u8])>> {
        let base = |n: u32| (n >> 10) << ((n & (1 << 9)) >> 6);
        let mut found = None;
        let mut node = base(self.node(0)?) as usize;
        for (i, &c) in input.iter().enumerate() {
            if c == 0 {
                break;
            }
            node ^= usize::from(c);
            let packed = self.node(node)?;
            // LCHECK (bits 0-7, and bit 31 for value nodes) must be this byte.
            if packed & ((1 << 31) | 0xff) != u32::from(c) {
                break;
            }
            let leaf = (packed >> 8) & 1 == 1;
            node ^= base(packed) as usize;
            if leaf {
                let value = self.node(node)? & ((1 << 31) - 1);
                found = Some((i + 1, value as usize));
            }
        }
        let Some((len, at)) = found else {
            return Ok(None);
        };
        let rest = self.replacements.get(at..).ok_or_else(|| {
            Error::Tokenizer("precompiled_charsmap: replacement out of bounds".into())
        })?;
        let end = rest.iter().position(|&b| b == 0).ok_or_else(|| {
            Error::Tokenizer("precompiled_charsmap: unterminated replacement".into())
        })?;
        Ok(Some((len, &rest[..end])))
    }
}

/// A Unigram tokenizer's tables (the vocabulary itself is the tokenizer's).
#[derive(Debug, Clone)]
pub(crate) struct Ugm {
    charsmap: Option<CharsMap>,
    /// Every prefix of every user-defined token (llama.cpp passes the deepest match of its
    /// trie of them through normalisation unchanged).
    user_prefixes: HashSet<Vec<u8>>,
    /// The longest text of a token Viterbi may use, in bytes.
    max_len: usize,
    unk: u32,
    unknown_score: f64,
    add_space_prefix: bool,
    remove_extra_whitespaces: bool,
}

/// The best tokenization found so far of the normalised text up to some offset.
#[derive(Clone, Copy)]
struct Best {
    token: u32,
    /// Where its last token starts.
    from: usize,
    score: f64,
}

/// Whether Viterbi may use a token with these attributes.
fn usable(a: u16) -> bool {
    a & (attr::NORMAL | attr::USER_DEFINED | attr::UNUSED) != 0
}

impl Ugm {
    /// The tables of `vocab` with the file's character map (`charsmap`: its raw bytes, if any).
    pub(crate) fn new(
        vocab: &Vocab,
        charsmap: Option<&[u8]>,
        unk: Option<u32>,
        add_space_prefix: bool,
        remove_extra_whitespaces: bool,
    ) -> Result<Ugm> {
        let unk =
            unk.ok_or_else(|| Error::Tokenizer("a Unigram model needs an UNK token".into()))?;
        let mut min_score = f32::MAX;
        let mut max_len = 0;
        let mut user_prefixes = HashSet::new();
        for id in 0..vocab.len() as u32 {
            let a = vocab.attr(id);
            let text = vocab.text(id).unwrap_or_default();
            if a & attr::NORMAL != 0 {
                min_score = min_score.min(vocab.scores[id as usize]);
            }
            if usable(a) {
                max_len = max_len.max(text.len());
            }
            if a & attr::USER_DEFINED != 0 {
                for end in 1..=text.len() {
                    user_prefixes.insert(text[..end].to_vec());
                }
            }
        }
        Ok(Ugm {
            charsmap: charsmap
                .filter(|b| !b.is_empty())
                .map(CharsMap::parse)
                .transpose()?,
            user_prefixes,
            max_len,
            unk,
            unknown_score: f64::from(min_score - UNKNOWN_PENALTY),
            add_space_prefix,
            remove_extra_whitespaces,
        })
    }

    /// The normalised form of the start of `input` and how many bytes of it that consumes.
    fn normalize_prefix<'a>(&'a self, input: &'a [u8]) -> Result<(&'a [u8], usize)> {
        let user = (1..=input.len())
            .take_while(|&end| self.user_prefixes.contains(&input[..end]))
            .last();
        if let Some(len) = user {
            return Ok((&input[..len], len));
        }
        if let Some(map) = &self.charsmap {
            if let Some((len, replacement)) = map.longest(input)? {
                return Ok((replacement, len));
            }
        }
        let len = utf8_len(input[0]).min(input.len());
        match std::str::from_utf8(&input[..len]) {
            Ok(_) => Ok((&input[..len], len)),
            Err(_) => Ok(("\u{FFFD}".as_bytes(), 1)),
        }
    }

    /// `text` normalised: character map rules, spaces as `▁`, a space prefix, merged spaces.
    fn normalize(&self, text: &[u8]) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(text.len() * 3);
        let (mut prepended, mut in_word) = (false, false);
        let mut at = 0;
        while at < text.len() {
            let (piece, used) = self.normalize_prefix(&text[at..])?;
            for &c in piece {
                if c != b' ' {
                    if !in_word {
                        in_word = true;
                        if (self.add_space_prefix && !prepended) || self.remove_extra_whitespaces {
                            out.extend_from_slice(SPACE);
                            prepended = true;
                        }
                    }
                    out.push(c);
                } else {
                    in_word = false;
                    if !self.remove_extra_whitespaces {
                        out.extend_from_slice(SPACE);
                    }
                }
            }
            at += used;
        }
        Ok(out)
    }

    /// Append the tokens of one plain-text fragment to `out`.
    pub(crate) fn tokenize(&self, vocab: &Vocab, text: &str, out: &mut Vec<u32>) -> Result<()> {
        let s = self.normalize(text.as_bytes())?;
        if s.is_empty() {
            return Ok(());
        }
        let unreached = Best {
            token: self.unk,
            from: 0,
            score: -f64::MAX,
        };
        let mut best = vec![unreached; s.len() + 1];
        best[0].score = 0.0;
        let mut at = 0;
        while at < s.len() {
            let n = utf8_len(s[at]).min(s.len() - at);
            let here = best[at];
            let mut whole = false;
            for len in 1..=self.max_len.min(s.len() - at) {
                let Some(id) = vocab.token_id(&s[at..at + len]) else {
                    continue;
                };
                let a = vocab.attr(id);
                if !usable(a) {
                    continue;
                }
                whole |= len == n;
                let score = match a & attr::USER_DEFINED != 0 {
                    true => 0.0,
                    false => f64::from(vocab.scores[id as usize]),
                };
                let challenger = here.score + score;
                if challenger > best[at + len].score {
                    best[at + len] = Best {
                        token: id,
                        from: at,
                        score: challenger,
                    };
                }
            }
            if !whole {
                let challenger = here.score + self.unknown_score;
                if challenger > best[at + n].score {
                    best[at + n] = Best {
                        token: self.unk,
                        from: at,
                        score: challenger,
                    };
                }
            }
            at += n;
        }
        // Back from the end, one unknown token for each run of them.
        let start = out.len();
        let (mut end, mut prev_unknown) = (s.len(), false);
        loop {
            let b = best[end];
            let unknown = b.token == self.unk;
            if !(prev_unknown && unknown) {
                out.push(b.token);
            }
            if b.from == 0 {
                break;
            }
            prev_unknown = unknown;
            end = b.from;
        }
        out[start..].reverse();
        Ok(())
    }
}

/// The length of the UTF-8 sequence a byte starts, as llama.cpp's `unicode_len_utf8` (by its
/// top four bits; continuation bytes count 1).
fn utf8_len(b: u8) -> usize {
    const LEN: [usize; 16] = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4];
    LEN[usize::from(b >> 4)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab(tokens: &[(&str, f32, u16)]) -> Vocab {
        let texts: Vec<&str> = tokens.iter().map(|t| t.0).collect();
        let scores = tokens.iter().map(|t| t.1).collect();
        let attrs = tokens.iter().map(|t| t.2).collect();
        Vocab::new(&texts, scores, attrs).unwrap()
    }

    /// Viterbi picks the highest total score, unknown code points merge into one UNK, and a
    /// user-defined token scores 0.
    #[test]
    fn viterbi_takes_the_best_sum_and_merges_unknowns() {
        let n = attr::NORMAL;
        let v = vocab(&[
            ("<unk>", 0.0, attr::UNKNOWN),
            ("▁ab", -1.0, n),
            ("▁", -2.0, n),
            ("a", -2.0, n),
            ("b", -2.0, n),
            ("▁a", -0.5, n),
            ("bc", -0.4, n),
            ("<x>", -9.0, attr::USER_DEFINED),
        ]);
        let ugm = Ugm::new(&v, None, Some(0), true, true).unwrap();
        let run = |text: &str| {
            let mut out = Vec::new();
            ugm.tokenize(&v, text, &mut out).unwrap();
            out
        };
        // "▁a" + "bc" (-0.9) beats "▁ab" + an unknown "c" (-1 - 12) and "▁" + "a" + "bc".
        assert_eq!(run("abc"), [5, 6]);
        assert_eq!(run("ab"), [1]);
        // Two unknown code points after "▁a" become one UNK; spaces merge.
        assert_eq!(run("  ažž"), [5, 0]);
        assert_eq!(run("a<x>"), [5, 7]);
    }
}
