//! WordPiece (BERT) tokenization, as llama.cpp's `llm_tokenizer_wpm_session` does it.
//!
//! Text is normalized one codepoint at a time (llama.cpp's simplified BertNormalizer: each
//! codepoint becomes the first codepoint of its NFD, accent marks and control characters are
//! dropped, letters are lowercased), split into words at whitespace, and punctuation, ASCII
//! symbols and CJK ideographs become words of their own. Each word, with a `▁` (U+2581) put in
//! front, is cut greedily into the longest vocabulary tokens from the left; a word that cannot be
//! cut completely becomes one UNK token.

use super::unicode::{category, is_whitespace, nfd_first, to_lower, Category};
use super::vocab::Vocab;

/// The WordPiece model: an index for longest-prefix matching and the normalizer options.
#[derive(Debug, Clone)]
pub(crate) struct Wpm {
    /// Token ids sorted by text, one per distinct text (the id the vocabulary index gives it).
    sorted: Vec<u32>,
    /// Lowercase letters (`tokenizer.ggml.normalizer.lowercase`).
    lowercase: bool,
    /// Map codepoints to the first codepoint of their NFD and drop accent marks
    /// (`tokenizer.ggml.normalizer.strip_accents`).
    strip_accents: bool,
    /// The token of a word that cannot be cut into tokens.
    unk: Option<u32>,
}

/// The CJK ideograph blocks llama.cpp's WPM splits into single-character words (including its
/// 0x2B920 start of Extension E, copied from Hugging Face's tokenizers).
fn is_chinese_char(cp: u32) -> bool {
    matches!(
        cp,
        0x4E00..=0x9FFF
            | 0x3400..=0x4DBF
            | 0x20000..=0x2A6DF
            | 0x2A700..=0x2B73F
            | 0x2B740..=0x2B81F
            | 0x2B920..=0x2CEAF
            | 0xF900..=0xFAFF
            | 0x2F800..=0x2FA1F
    )
}

impl Wpm {
    /// Builds the prefix index over `vocab`.
    pub(crate) fn new(
        vocab: &Vocab,
        lowercase: bool,
        strip_accents: bool,
        unk: Option<u32>,
    ) -> Wpm {
        let text = |id: u32| vocab.text(id).unwrap_or_default();
        // Later duplicates of a text win, as in the vocabulary index (and llama.cpp's map).
        let mut sorted: Vec<u32> = (0..vocab.len() as u32)
            .filter(|&id| vocab.token_id(text(id)) == Some(id))
            .collect();
        sorted.sort_unstable_by(|&a, &b| text(a).cmp(text(b)));
        Wpm {
            sorted,
            lowercase,
            strip_accents,
            unk,
        }
    }

    /// The longest token that `s` starts with: its id and length in bytes.
    fn longest_prefix(&self, vocab: &Vocab, s: &[u8]) -> Option<(u32, usize)> {
        let text = |id: u32| vocab.text(id).unwrap_or_default();
        // Invariant: the tokens of `sorted[lo..hi]` are exactly those that start with `s[..k]`.
        // A token equal to `s[..k]` sorts first among them.
        let (mut lo, mut hi) = (0, self.sorted.len());
        let mut best = None;
        for (k, &b) in s.iter().enumerate() {
            // Byte `k` of a token, -1 past its end (so shorter tokens sort first).
            let key = |id: &u32| text(*id).get(k).map_or(-1, |&c| i32::from(c));
            let range = &self.sorted[lo..hi];
            let first = range.partition_point(|id| key(id) < i32::from(b));
            let end = range.partition_point(|id| key(id) <= i32::from(b));
            (lo, hi) = (lo + first, lo + end);
            if lo == hi {
                break;
            }
            if text(self.sorted[lo]).len() == k + 1 {
                best = Some((self.sorted[lo], k + 1));
            }
        }
        best
    }

    /// Appends the tokens of one word (already normalized, without the `▁`) to `out`.
    fn tokenize_word(&self, vocab: &Vocab, word: &[u8], out: &mut Vec<u32>) -> crate::Result<()> {
        let start = out.len();
        let mut i = 0;
        while i < word.len() {
            match self.longest_prefix(vocab, &word[i..]) {
                Some((id, len)) => {
                    out.push(id);
                    i += len;
                }
                None => {
                    out.truncate(start);
                    break;
                }
            }
        }
        if out.len() == start {
            out.push(self.unk.ok_or_else(|| {
                crate::Error::Tokenizer("WordPiece model has no UNK token".into())
            })?);
        }
        Ok(())
    }

    /// Tokenizes a plain-text fragment into `out`.
    pub(crate) fn tokenize(
        &self,
        vocab: &Vocab,
        text: &str,
        out: &mut Vec<u32>,
    ) -> crate::Result<()> {
        const MARK: &str = "\u{2581}";
        let mut word = String::from(MARK);
        let flush = |word: &mut String, out: &mut Vec<u32>| -> crate::Result<()> {
            if word.len() > MARK.len() {
                self.tokenize_word(vocab, word.as_bytes(), out)?;
                word.truncate(MARK.len());
            }
            Ok(())
        };
        for c in text.chars() {
            let cp = if self.strip_accents {
                nfd_first(c as u32)
            } else {
                c as u32
            };
            if is_whitespace(cp) {
                flush(&mut word, out)?;
                continue;
            }
            let cat = category(cp);
            if cp == 0 || cp == 0xFFFD || cat == Category::Control {
                continue;
            }
            if self.strip_accents && cat == Category::Mark {
                continue;
            }
            let shown = if self.lowercase { to_lower(cp) } else { cp };
            let shown = char::from_u32(shown).unwrap_or(char::REPLACEMENT_CHARACTER);
            if cat == Category::Punctuation
                || (cp < 0x7F && cat == Category::Symbol)
                || is_chinese_char(cp)
            {
                flush(&mut word, out)?;
                word.push(shown);
                flush(&mut word, out)?;
            } else {
                word.push(shown);
            }
        }
        flush(&mut word, out)
    }
}

#[cfg(test)]
mod tests {
    use super::super::vocab::{attr, Vocab};
    use super::Wpm;

    fn vocab(texts: &[&str]) -> Vocab {
        let n = texts.len();
        Vocab::new(texts, vec![0.0; n], vec![attr::NORMAL; n]).expect("vocab")
    }

    fn encode(wpm: &Wpm, v: &Vocab, text: &str) -> crate::Result<Vec<u32>> {
        let mut out = Vec::new();
        wpm.tokenize(v, text, &mut out)?;
        Ok(out)
    }

    #[test]
    fn greedy_longest_match_and_unk() {
        let v = vocab(&[
            "[UNK]", "▁un", "▁unaff", "able", "aff", "▁a", "▁", "x", "▁,", "▁é", "▁e", "▁unaff",
        ]);
        let wpm = Wpm::new(&v, true, true, Some(0));
        // The later "▁unaff" (11) wins, as in llama.cpp's map.
        assert_eq!(encode(&wpm, &v, "UnAffable").unwrap(), [11, 3]);
        // "▁unaffx" has no full cut: one UNK for the word; "," is a word of its own.
        assert_eq!(encode(&wpm, &v, "unaffy, a").unwrap(), [0, 8, 5]);
        // Accents are stripped; without strip_accents "é" stays.
        assert_eq!(encode(&wpm, &v, "É").unwrap(), [10]);
        let keep = Wpm::new(&v, true, false, Some(0));
        assert_eq!(encode(&keep, &v, "É").unwrap(), [9]);
        // Whitespace and dropped characters only: no tokens.
        assert!(encode(&wpm, &v, " \t\u{0}\u{FFFD}\u{300} ")
            .unwrap()
            .is_empty());
        // A long word cut into many tokens, and one with no cut.
        let long = format!("a{}", "x".repeat(10_000));
        assert_eq!(encode(&wpm, &v, &long).unwrap().len(), 10_001);
        assert_eq!(encode(&wpm, &v, &format!("{long}q")).unwrap(), [0]);
    }

    #[test]
    fn no_unk_is_an_error() {
        let v = vocab(&["▁a"]);
        let wpm = Wpm::new(&v, true, true, None);
        assert_eq!(encode(&wpm, &v, "a a").unwrap(), [0, 0]);
        assert!(encode(&wpm, &v, "b").is_err());
    }
}
