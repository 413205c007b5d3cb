//! Token ids back to text, matching llama.cpp's `token_to_piece` and `detokenize`.

use super::bpe::Alphabet;
use super::vocab::attr;
use super::{Tokenizer, TokenizerKind};

impl Tokenizer {
    /// Bytes of one token as llama.cpp's `token_to_piece` (no leading-space stripping) gives them.
    pub(crate) fn piece(&self, id: u32, special: bool) -> Vec<u8> {
        let Some(text) = self.vocab.text(id) else {
            return Vec::new();
        };
        let a = self.vocab.attr(id);
        if !special && a & (attr::UNKNOWN | attr::CONTROL) != 0 {
            return Vec::new();
        }
        if a & (attr::UNKNOWN | attr::CONTROL | attr::USER_DEFINED) != 0 {
            return text.to_vec();
        }
        if a & attr::NORMAL != 0 {
            return match &self.kind_data {
                KindData::Spm | KindData::Wpm(_) | KindData::Ugm(_) => unescape_whitespace(text),
                KindData::Bpe(bpe) => {
                    let byte_level = match &bpe.alphabet {
                        Alphabet::ByteLevel(byte_level) => byte_level,
                        Alphabet::Escaped { .. } => return unescape_whitespace(text),
                    };
                    let mut out = Vec::with_capacity(text.len());
                    let s = String::from_utf8_lossy(text);
                    for c in s.chars() {
                        match byte_level.byte_of(c) {
                            Some(b) => out.push(b),
                            None => {
                                // llama.cpp's llama_decode_text marks chars outside the byte alphabet.
                                out.extend_from_slice(b"[UNK_BYTE_0x");
                                let mut buf = [0u8; 4];
                                for b in c.encode_utf8(&mut buf).bytes() {
                                    out.extend_from_slice(format!("{b:02x}").as_bytes());
                                }
                                out.extend_from_slice(text);
                                out.push(b']');
                            }
                        }
                    }
                    out
                }
            };
        }
        if a & attr::BYTE != 0 {
            return vec![byte_token_value(text)];
        }
        Vec::new()
    }

    /// Full detokenization (llama.cpp `detokenize` with remove_special = false).
    pub(crate) fn detokenize(&self, ids: &[u32], special: bool) -> Vec<u8> {
        let mut out = Vec::new();
        let mut remove_space = self.add_space_prefix;
        for &id in ids {
            let piece = self.piece(id, special);
            let skip = usize::from(remove_space && piece.first() == Some(&b' '));
            out.extend_from_slice(&piece[skip..]);
            remove_space = false;
        }
        if self.clean_spaces {
            out = clean_spaces(out);
        }
        out
    }
}

/// How the model's tokenizer kind affects decoding.
#[derive(Debug, Clone)]
pub(crate) enum KindData {
    /// SentencePiece: `▁` stands for a space.
    Spm,
    /// BPE (byte-level, or SentencePiece-style with `▁` for spaces).
    Bpe(Box<super::bpe::Bpe>),
    /// WordPiece: `▁` starts a word.
    Wpm(Box<super::wpm::Wpm>),
    /// SentencePiece Unigram: `▁` stands for a space.
    Ugm(Box<super::ugm::Ugm>),
}

impl KindData {
    /// The public kind.
    pub(crate) fn kind(&self) -> TokenizerKind {
        match self {
            KindData::Spm => TokenizerKind::SentencePiece,
            KindData::Bpe(_) => TokenizerKind::Bpe,
            KindData::Wpm(_) => TokenizerKind::WordPiece,
            KindData::Ugm(_) => TokenizerKind::Unigram,
        }
    }
}

/// Value of a byte-fallback token `<0xAB>`: hex digits at byte offsets 3..5 (0 if malformed).
fn byte_token_value(text: &[u8]) -> u8 {
    let digits = text.get(3..5).unwrap_or_default();
    let mut v: u32 = 0;
    for &d in digits {
        match (d as char).to_digit(16) {
            Some(x) => v = v * 16 + x,
            None => break,
        }
    }
    v as u8
}

/// Replaces every `▁` (U+2581) with a space.
fn unescape_whitespace(text: &[u8]) -> Vec<u8> {
    const ESC: &[u8] = "\u{2581}".as_bytes();
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if text[i..].starts_with(ESC) {
            out.push(b' ');
            i += ESC.len();
        } else {
            out.push(text[i]);
            i += 1;
        }
    }
    out
}

/// llama.cpp's `clean_up_tokenization_spaces` passes over the detokenized bytes.
fn clean_spaces(mut src: Vec<u8>) -> Vec<u8> {
    // Pass 1: " ?", " !", " .", " ," lose the space.
    let mut dst = Vec::with_capacity(src.len());
    for i in 0..src.len() {
        let x = src[i];
        if i > 0 && src[i - 1] == b' ' && matches!(x, b'?' | b'!' | b'.' | b',') {
            dst.pop();
        }
        dst.push(x);
    }
    // Pass 2: a single apostrophe between spaces loses both spaces.
    src = dst;
    let mut dst = Vec::with_capacity(src.len());
    let n = src.len();
    let mut i = 0;
    while i < n {
        let x = src[i];
        if i > 0 && x == b'\'' && i + 1 < n && src[i - 1] == b' ' && src[i + 1] == b' ' {
            dst.pop();
            i += 1;
            src[i] = 0;
        }
        dst.push(x);
        i += 1;
    }
    // Pass 3: " 's", " 'm", " 're", " 've" lose the space.
    src = dst;
    let mut dst = Vec::with_capacity(src.len());
    let n = src.len();
    for i in 0..n {
        let x = src[i];
        if i > 0 && src[i - 1] == b' ' && x == b'\'' && i + 1 < n {
            let x1 = src[i + 1];
            if matches!(x1, b's' | b'm') {
                dst.pop();
            } else if !matches!(x1, b't' | b'd') && i + 2 < n {
                let x2 = src[i + 2];
                if matches!((x1, x2), (b'r', b'e') | (b'v', b'e')) {
                    dst.pop();
                }
            }
        }
        dst.push(x);
    }
    dst
}

/// Turns a stream of token ids into text without ever splitting a UTF-8 character across pieces.
#[derive(Debug, Clone, Default)]
pub struct StreamDecoder {
    pending: Vec<u8>,
}

impl StreamDecoder {
    /// A decoder with nothing buffered.
    pub fn new() -> Self {
        StreamDecoder {
            pending: Vec::new(),
        }
    }

    /// Adds token `id` (control tokens contribute nothing) and returns the text that is now
    /// complete. Bytes of a character that is still incomplete are kept for the next call; invalid
    /// byte sequences come out as U+FFFD.
    pub fn push(&mut self, tok: &Tokenizer, id: u32) -> String {
        self.pending.extend_from_slice(&tok.token_bytes(id, false));
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    out.push_str(&String::from_utf8_lossy(&self.pending[..valid]));
                    match e.error_len() {
                        // Incomplete character at the end: keep it for later.
                        None => {
                            self.pending.drain(..valid);
                            return out;
                        }
                        Some(bad) => {
                            out.push('\u{FFFD}');
                            self.pending.drain(..valid + bad);
                        }
                    }
                }
            }
        }
    }

    /// Flushes whatever is buffered (an incomplete character becomes U+FFFD).
    pub fn finish(&mut self) -> String {
        let s = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        s
    }
}
