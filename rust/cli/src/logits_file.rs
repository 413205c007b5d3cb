//! llama-perplexity's saved-logits file (`--kl-divergence-base`), read and written byte for
//! byte as llama.cpp does, so that either engine's file can be scored by the other.
//!
//! Layout (all little-endian): the 8 bytes `_logits_`; `n_ctx`, `n_vocab` and `n_chunk` as
//! 32-bit integers; the `n_chunk × n_ctx` evaluated tokens as 32-bit integers (the text's
//! tokens, before BOS replaces the first of each chunk); then for each chunk one row for each
//! scored position (`n_ctx - 1 - n_ctx/2` rows: the second half of the chunk but its last
//! token). A row is `nv = 2·⌈n_vocab/2⌉ + 4` 16-bit words: two f32 (`scale`, `min_log_prob`),
//! then each token's log-probability quantized as `round((logit - min_logit) / scale)`, where
//! `min_logit` is the row's smallest logit but at most 16 below its largest, `scale` spreads
//! that range over 0..=65535 and `min_log_prob` is the log-probability of `min_logit`; logits
//! below `min_logit` are stored as 0, and the padding words are 0. Decoding a word `q` gives the
//! log-probability `scale·q + min_log_prob`.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use local_llm_engine::files::{open_regular, AtomicFile};
use local_llm_engine::{Error, Result};

/// The file's first 8 bytes.
const MAGIC: &[u8; 8] = b"_logits_";
/// Bytes before the tokens: the magic and three 32-bit integers.
const HEADER_BYTES: u64 = 8 + 3 * 4;
/// How far below the largest logit a row's quantization range reaches.
const RANGE: f32 = 16.0;

/// 16-bit words in a row of `n_vocab` log-probabilities (with the two f32 in front).
pub fn row_words(n_vocab: usize) -> usize {
    2 * n_vocab.div_ceil(2) + 4
}

/// Rows a chunk of `n_ctx` tokens contributes: its scored positions.
pub fn rows_per_chunk(n_ctx: usize) -> usize {
    n_ctx - 1 - n_ctx / 2
}

/// Quantizes one position's `logits` into `row` (of [`row_words`] words) and returns the
/// negative log-likelihood of `token`, in f32 arithmetic as llama-perplexity computes it
/// when it saves logits.
pub fn encode_row(logits: &[f32], token: usize, row: &mut [u16]) -> f64 {
    let mut max_logit = logits[0];
    let mut min_logit = logits[0];
    for &l in &logits[1..] {
        max_logit = max_logit.max(l);
        min_logit = min_logit.min(l);
    }
    let min_logit = min_logit.max(max_logit - RANGE);
    let sum_exp: f64 = logits
        .iter()
        .map(|&l| f64::from((l - max_logit).exp()))
        .sum();
    let log_sum_exp = sum_exp.ln() as f32;
    let min_log_prob = min_logit - max_logit - log_sum_exp;
    let scale = (max_logit - min_logit) / 65535.0;
    let s = scale.to_le_bytes();
    let m = min_log_prob.to_le_bytes();
    row[0] = u16::from_le_bytes([s[0], s[1]]);
    row[1] = u16::from_le_bytes([s[2], s[3]]);
    row[2] = u16::from_le_bytes([m[0], m[1]]);
    row[3] = u16::from_le_bytes([m[2], m[3]]);
    let words = &mut row[4..];
    words.fill(0);
    if scale != 0.0 {
        let inv_scale = 1.0 / scale;
        for (w, &l) in words.iter_mut().zip(logits) {
            if l > min_logit {
                // Round half to even, then keep the low 16 bits as llama.cpp's conversion to
                // uint16_t does (the top of the range can round to 65536, stored as 0).
                *w = (inv_scale * (l - min_logit)).round_ties_even() as i32 as u16;
            }
        }
    }
    f64::from(max_logit + log_sum_exp - logits[token])
}

/// One decoded row of a base file: the log-probability of token `i` is
/// `scale · words[i] + min_log_prob`.
pub struct BaseRow<'a> {
    /// Step between quantized values.
    pub scale: f32,
    /// Log-probability of a stored 0.
    pub min_log_prob: f32,
    /// The quantized log-probabilities (`n_vocab` of them; padding excluded).
    pub words: &'a [u16],
}

impl<'a> BaseRow<'a> {
    /// The row in `row` (of [`row_words`] words) for a vocabulary of `n_vocab` tokens.
    pub fn new(row: &'a [u16], n_vocab: usize) -> Self {
        let f = |a: u16, b: u16| {
            let (a, b) = (a.to_le_bytes(), b.to_le_bytes());
            f32::from_le_bytes([a[0], a[1], b[0], b[1]])
        };
        BaseRow {
            scale: f(row[0], row[1]),
            min_log_prob: f(row[2], row[3]),
            words: &row[4..4 + n_vocab],
        }
    }

    /// Log-probability of token `i`.
    pub fn log_prob(&self, i: usize) -> f32 {
        self.scale * f32::from(self.words[i]) + self.min_log_prob
    }
}

fn io_error(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Writes a logits file: the header and tokens at creation, then one chunk's rows at a time.
/// The file appears at its path only when [`LogitsWriter::finish`] succeeds (written through a
/// temporary file, so a failed run leaves no partial file and an older file intact).
pub struct LogitsWriter {
    out: AtomicFile,
}

impl LogitsWriter {
    /// Creates `path` and writes the header and the `n_chunk × n_ctx` evaluated `tokens`.
    pub fn create(path: &Path, n_ctx: usize, n_vocab: usize, tokens: &[u32]) -> Result<Self> {
        let int = |what: &str, v: usize| {
            i32::try_from(v).map_err(|_| {
                Error::InvalidOption(format!("{what} {v} does not fit the logits file format"))
            })
        };
        let n_chunk = tokens.len() / n_ctx.max(1);
        let mut bytes = Vec::with_capacity(HEADER_BYTES as usize + 4 * tokens.len());
        bytes.extend_from_slice(MAGIC);
        for (what, v) in [("n_ctx", n_ctx), ("n_vocab", n_vocab), ("n_chunk", n_chunk)] {
            bytes.extend_from_slice(&int(what, v)?.to_le_bytes());
        }
        for &t in tokens {
            bytes.extend_from_slice(&int("token", t as usize)?.to_le_bytes());
        }
        let mut out = AtomicFile::create(path)?;
        out.write_all(&bytes)?;
        Ok(LogitsWriter { out })
    }

    /// Appends rows (each of [`row_words`] words).
    pub fn write_rows(&mut self, words: &[u16]) -> Result<()> {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        self.out.write_all(&bytes)
    }

    /// Flushes the file to disk and puts it in place.
    pub fn finish(self) -> Result<()> {
        self.out.commit()
    }
}

/// A logits file opened for reading: its header and tokens, then one chunk's rows at a time.
pub struct LogitsReader {
    input: BufReader<File>,
    path: PathBuf,
    /// Tokens per chunk.
    pub n_ctx: usize,
    /// Vocabulary size of the model that wrote the file.
    pub n_vocab: usize,
    /// Chunks in the file.
    pub n_chunk: usize,
    /// The `n_chunk × n_ctx` evaluated tokens.
    pub tokens: Vec<u32>,
}

impl LogitsReader {
    /// Opens `path`, checking that its header is sane and that the file is long enough for
    /// every token and row it announces (so nothing is allocated from an unchecked size).
    pub fn open(path: &Path) -> Result<Self> {
        let bad = |why: String| {
            Error::InvalidOption(format!(
                "{} is not a usable llama-perplexity logits file: {why}",
                path.display()
            ))
        };
        let file = open_regular(path)?;
        let len = file.metadata().map_err(|e| io_error(path, e))?.len();
        let mut input = BufReader::new(file);
        let mut header = [0u8; HEADER_BYTES as usize];
        input
            .read_exact(&mut header)
            .map_err(|_| bad(format!("it has only {len} bytes")))?;
        if &header[..8] != MAGIC {
            return Err(bad("it does not start with '_logits_'".into()));
        }
        let int = |i: usize| i32::from_le_bytes(header[8 + 4 * i..12 + 4 * i].try_into().unwrap());
        let (n_ctx, n_vocab, n_chunk) = (int(0), int(1), int(2));
        if n_ctx < 4 || n_vocab < 1 || n_chunk < 1 {
            return Err(bad(format!(
                "n_ctx {n_ctx} (at least 4), n_vocab {n_vocab} and n_chunk {n_chunk} (at least 1)"
            )));
        }
        let (n_ctx, n_vocab, n_chunk) = (n_ctx as u64, n_vocab as u64, n_chunk as u64);
        let rows = (n_ctx - 1 - n_ctx / 2) * n_chunk;
        let needed =
            HEADER_BYTES + 4 * n_ctx * n_chunk + 2 * rows * row_words(n_vocab as usize) as u64;
        if len < needed {
            return Err(bad(format!(
                "its header announces {n_chunk} chunks of {n_ctx} tokens over {n_vocab} tokens \
                 ({needed} bytes) but it has {len} bytes"
            )));
        }
        let mut raw = vec![0u8; 4 * (n_ctx * n_chunk) as usize];
        input.read_exact(&mut raw).map_err(|e| io_error(path, e))?;
        let mut tokens = Vec::with_capacity(raw.len() / 4);
        for b in raw.chunks_exact(4) {
            let t = i32::from_le_bytes(b.try_into().unwrap());
            if t < 0 || t as u64 >= n_vocab {
                return Err(bad(format!(
                    "token {t} is outside the vocabulary of {n_vocab}"
                )));
            }
            tokens.push(t as u32);
        }
        Ok(LogitsReader {
            input,
            path: path.to_path_buf(),
            n_ctx: n_ctx as usize,
            n_vocab: n_vocab as usize,
            n_chunk: n_chunk as usize,
            tokens,
        })
    }

    /// Reads the next chunk's rows into `words` ([`rows_per_chunk`] × [`row_words`] words).
    pub fn read_chunk(&mut self, words: &mut Vec<u16>) -> Result<()> {
        let n = rows_per_chunk(self.n_ctx) * row_words(self.n_vocab);
        let mut bytes = vec![0u8; 2 * n];
        self.input
            .read_exact(&mut bytes)
            .map_err(|e| io_error(&self.path, e))?;
        words.clear();
        words.extend(
            bytes
                .chunks_exact(2)
                .map(|b| u16::from_le_bytes([b[0], b[1]])),
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_sizes_follow_the_format() {
        // 2·⌈n/2⌉ + 4: odd vocabularies get one padding word.
        assert_eq!(row_words(49152), 49156);
        assert_eq!(row_words(5), 10);
        assert_eq!(rows_per_chunk(512), 255);
        assert_eq!(rows_per_chunk(5), 2);
    }

    #[test]
    fn an_encoded_row_decodes_to_log_probabilities() {
        // Three logits with probabilities 1/2, 1/4, 1/4 (log2 apart) and two over 30 below the
        // top (probability < 1e-13), under the 16-wide range and stored as 0.
        let ln2 = std::f32::consts::LN_2;
        let logits = [ln2, 0.0, 0.0, -30.0, -40.0];
        let mut row = vec![7u16; row_words(logits.len())];
        let nll = encode_row(&logits, 1, &mut row);
        assert!((nll - 4f64.ln()).abs() < 1e-6, "{nll}");
        let base = BaseRow::new(&row, logits.len());
        assert!((base.log_prob(0) - 0.5f32.ln()).abs() < 2e-3);
        assert!((base.log_prob(1) - 0.25f32.ln()).abs() < 2e-3);
        assert_eq!((base.words[3], base.words[4]), (0, 0));
        assert_eq!(row[row.len() - 1], 0, "padding is zero");
    }

    #[test]
    fn truncated_or_foreign_files_are_typed_errors() {
        let dir = std::env::temp_dir().join(format!("local-llm-logits-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f.bin");
        let mut header = b"_logits_".to_vec();
        for v in [512i32, 49152, 1_000_000] {
            header.extend_from_slice(&v.to_le_bytes());
        }
        for (bytes, want) in [
            (b"GGUF".to_vec(), "only 4 bytes"),
            (vec![0u8; 40], "does not start"),
            (header, "announces 1000000 chunks"),
        ] {
            std::fs::write(&path, bytes).unwrap();
            match LogitsReader::open(&path) {
                Err(e) => assert!(e.to_string().contains(want), "{e}"),
                Ok(_) => panic!("opened a bad file"),
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
