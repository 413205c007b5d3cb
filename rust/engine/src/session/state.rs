//! Saving and restoring a context's state (its tokens and the KV cache of the positions they
//! use) to a file of our own format, bound to the model that made it.
//!
//! Layout, little-endian:
//!
//! | field | bytes |
//! | --- | --- |
//! | magic `LLMKVST\0` | 8 |
//! | format version ([`STATE_VERSION`]) | 4 |
//! | model fingerprint ([`model_fingerprint`]) | 8 |
//! | context size, layers, key width, value width (2-byte units per position) | 4 × 4 |
//! | cached tokens `n`, of which reusable by a later prompt | 4 × 2 |
//! | key and value cache types (GGUF type codes, e.g. 1 = f16, 8 = q8_0) | 4 × 2 |
//! | tokens | 4 × n |
//! | per layer: keys (n × key width), values (n × value width) | 2 × n × (kw + vw) × layers |
//! | per short-convolution layer (LFM2): its inputs at the last `L − 1` positions, f32 | 4 × (L − 1) × n_embd × layers |
//!
//! An f16 cache is written as little-endian halves; the other types as their row bytes (f32
//! and bf16 little-endian, blocks in GGUF's layout).
//! | CRC-32 (IEEE) of everything before | 4 |
//!
//! A file is checked completely (header against this context, length against the header,
//! checksum, model) before anything in the context changes; sizes are checked against the
//! file's length before anything is allocated.

use std::io::Read;
use std::path::Path;

use half::f16;

use super::{Context, LoadedModel};
use crate::files::read_error;
use crate::fnv::Fnv;
use crate::model::{bytes_of, bytes_of_mut};
use crate::quant::GgmlType;
use crate::{Error, Result};

/// The state file's magic bytes.
const MAGIC: &[u8; 8] = b"LLMKVST\0";
/// The version of the state file format written by this engine (the only one it reads).
pub const STATE_VERSION: u32 = 2;
/// Bytes before the tokens.
const HEADER_LEN: usize = 8 + 4 + 8 + 4 * 4 + 4 * 2 + 4 * 2;
/// Bytes of every tensor's data start hashed into the fingerprint.
const FINGERPRINT_DATA_BYTES: usize = 4096;

/// CRC-32 (IEEE 802.3, reflected, as zlib's `crc32`), table-driven.
struct Crc32 {
    table: [u32; 256],
    crc: u32,
}

impl Crc32 {
    fn new() -> Self {
        let mut table = [0u32; 256];
        for (i, slot) in table.iter_mut().enumerate() {
            let mut c = i as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
            *slot = c;
        }
        Crc32 {
            table,
            crc: 0xFFFF_FFFF,
        }
    }

    fn update(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.crc = self.table[((self.crc ^ b as u32) & 0xFF) as usize] ^ (self.crc >> 8);
        }
    }

    fn finish(&self) -> u32 {
        !self.crc
    }
}

/// A fingerprint of `model`'s file: its size, every metadata key, the tensor table (names,
/// shapes, types, offsets) and the first bytes of every tensor's data. Two files with the
/// same weights and metadata keys agree; a different model, quantization or fine-tune does not.
pub fn model_fingerprint(model: &LoadedModel) -> u64 {
    let gguf = model.gguf();
    let mut h = Fnv::new();
    h.update(&gguf.file_size().to_le_bytes());
    for (key, _) in gguf.metadata() {
        h.update(key.as_bytes());
    }
    for t in gguf.tensors() {
        h.update(t.name.as_bytes());
        for d in &t.dims {
            h.update(&d.to_le_bytes());
        }
        h.update(format!("{:?}", t.ty).as_bytes());
        h.update(&t.offset.to_le_bytes());
        h.update(&t.n_bytes.to_le_bytes());
        let data = gguf.tensor_data(t);
        h.update(&data[..data.len().min(FINGERPRINT_DATA_BYTES)]);
    }
    h.0
}

fn bad(message: impl Into<String>) -> Error {
    Error::SessionFile(message.into())
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

fn u32_field(value: usize, what: &str) -> Result<[u8; 4]> {
    u32::try_from(value)
        .map(u32::to_le_bytes)
        .map_err(|_| bad(format!("{what} {value} does not fit the state format")))
}

impl Context {
    /// What a session file must have been saved with: the model's fingerprint, mixed with the
    /// fingerprints and scales of the LoRA adapters in use (the model's alone without them, so
    /// files saved before adapters existed still load).
    fn state_fingerprint(&self) -> u64 {
        let model = model_fingerprint(&self.model);
        if self.lora.is_empty() {
            return model;
        }
        let mut h = Fnv::new();
        h.update(&model.to_le_bytes());
        for a in &self.lora {
            h.update(&a.adapter.fingerprint().to_le_bytes());
            h.update(&a.scale.to_bits().to_le_bytes());
        }
        h.0
    }

    /// Write the state of this context's first sequence (its cached tokens and their keys
    /// and values; the one [`Context::eval`] uses and a single-sequence context generates on)
    /// to `path`; returns the number of tokens saved.
    pub fn save_state(&self, path: &Path) -> Result<usize> {
        let n = self.seqs[0].cached.len();
        let (n_layer, (kw, vw)) = header_layout(&self.seqs[0].cache);
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&STATE_VERSION.to_le_bytes());
        out.extend_from_slice(&self.state_fingerprint().to_le_bytes());
        for (value, what) in [
            (self.seqs[0].cache.capacity(), "context size"),
            (n_layer, "layer count"),
            (kw, "key width"),
            (vw, "value width"),
            (n, "token count"),
            (self.seqs[0].reusable.min(n), "reusable token count"),
        ] {
            out.extend_from_slice(&u32_field(value, what)?);
        }
        let types = self.seqs[0].cache.types();
        out.extend_from_slice(&types.k.code().to_le_bytes());
        out.extend_from_slice(&types.v.code().to_le_bytes());
        for t in &self.seqs[0].cached {
            out.extend_from_slice(&t.to_le_bytes());
        }
        let mut write = |ty: GgmlType, rows: &[f16]| {
            if ty == GgmlType::F16 {
                rows.iter()
                    .for_each(|x| out.extend_from_slice(&x.to_le_bytes()));
            } else {
                out.extend_from_slice(bytes_of(rows));
            }
        };
        for layer in 0..n_layer {
            let (kw, vw) = self.seqs[0].cache.layout(layer);
            write(types.k, &self.seqs[0].cache.keys(layer)[..n * kw]);
            write(types.v, &self.seqs[0].cache.values(layer)[..n * vw]);
        }
        let conv = self.seqs[0].cache.conv();
        for (layer, _) in conv.widths() {
            for pos in conv.saved(n) {
                conv.row(layer, pos)
                    .iter()
                    .for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
            }
        }
        for state in self.seqs[0].cache.matrix_states().states() {
            state
                .iter()
                .for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
        }
        let mut crc = Crc32::new();
        crc.update(&out);
        out.extend_from_slice(&crc.finish().to_le_bytes());
        // Through a temporary file: a failed save leaves the previous file as it was.
        crate::files::write_atomic(path, |f| f.write_all(&out))?;
        Ok(n)
    }

    /// Restore into the first sequence the state saved in `path` by [`Context::save_state`]
    /// (by a context of the same model with the same layout, whose tokens fit this context);
    /// returns the restored tokens. Not while generations run ([`Error::InvalidOption`]). A file of another model or format version, or a corrupt or truncated one, is
    /// an [`Error::SessionFile`] and leaves this context as it was.
    pub fn load_state(&mut self, path: &Path) -> Result<Vec<u32>> {
        self.check_idle()?;
        let mut file = crate::files::open_regular(path)?;
        let file_len = file.metadata().map_err(|e| read_error(path, e))?.len();
        let mut header = [0u8; HEADER_LEN];
        if file_len < (HEADER_LEN + 4) as u64 {
            return Err(bad(format!(
                "{} is not a session file: {file_len} bytes is shorter than its header",
                path.display()
            )));
        }
        file.read_exact(&mut header)
            .map_err(|e| read_error(path, e))?;
        if &header[..8] != MAGIC {
            return Err(bad(format!("{} is not a session file", path.display())));
        }
        let version = u32_at(&header, 8);
        if version != STATE_VERSION {
            return Err(bad(format!(
                "session file version {version} is not supported (this engine reads version \
                 {STATE_VERSION})"
            )));
        }
        let fingerprint = u64::from_le_bytes(header[12..20].try_into().expect("8 bytes"));
        let field = |i: usize| u32_at(&header, 20 + 4 * i) as usize;
        let (n_ctx, layout, n, reusable) =
            (field(0), (field(1), field(2), field(3)), field(4), field(5));
        let types = self.seqs[0].cache.types();
        let saved = (u32_at(&header, 44), u32_at(&header, 48));
        if saved != (types.k.code(), types.v.code()) {
            let name = |code| {
                GgmlType::from_code(code)
                    .map_or(format!("type {code}"), |t| t.name().to_lowercase())
            };
            return Err(bad(format!(
                "the session file caches keys as {} and values as {}, this context as {} and \
                 {} (cache_type_k / cache_type_v must match)",
                name(saved.0),
                name(saved.1),
                name(types.k.code()),
                name(types.v.code())
            )));
        }
        let (n_layer, (kw, vw)) = header_layout(&self.seqs[0].cache);
        if layout != (n_layer, kw, vw) {
            return Err(bad(format!(
                "the session file's cache layout {layout:?} (layers, key and value widths) is \
                 not this model's {:?}",
                (n_layer, kw, vw)
            )));
        }
        // In u128: a corrupt count cannot overflow, and nothing is allocated before it agrees
        // with the file's length.
        let units: usize = (0..n_layer)
            .map(|il| {
                let (k, v) = self.seqs[0].cache.layout(il);
                k + v
            })
            .sum();
        let per_token = 4 + 2 * units as u128;
        let conv = self.seqs[0].cache.conv();
        let conv_width: usize = conv.widths().map(|(_, w)| w).sum();
        let conv_rows = conv.saved(n);
        let conv_bytes = 4 * conv_width as u128 * conv_rows.len() as u128;
        let delta = self.seqs[0].cache.matrix_states();
        let delta_bytes = 4 * delta.states().map(|s| s.len() as u128).sum::<u128>();
        let expected = HEADER_LEN as u128 + per_token * n as u128 + conv_bytes + delta_bytes + 4;
        if u128::from(file_len) != expected {
            return Err(bad(format!(
                "the session file is {file_len} bytes but its header (context {n_ctx}, {n} \
                 tokens) says {expected}: it is truncated or corrupt"
            )));
        }
        if n > self.seqs[0].cache.capacity() {
            return Err(Error::ContextExhausted {
                needed: n,
                capacity: self.seqs[0].cache.capacity(),
            });
        }
        // The file's length, which fits in memory as the cache of `n` positions does.
        let expected = expected as usize;
        let mut body = crate::fallible::vec(expected - HEADER_LEN, 0u8, "the session file")?;
        file.read_exact(&mut body)
            .map_err(|e| read_error(path, e))?;
        let mut crc = Crc32::new();
        crc.update(&header);
        crc.update(&body[..body.len() - 4]);
        if crc.finish() != u32_at(&body, body.len() - 4) {
            return Err(bad(
                "the session file's checksum does not match: it is corrupt",
            ));
        }
        if fingerprint != self.state_fingerprint() {
            return Err(bad(format!(
                "the session file was saved with another model than {}, or with other LoRA \
                 adapters than this context applies",
                self.model.path().display()
            )));
        }
        let tokens: Vec<u32> = body[..4 * n]
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
            .collect();
        let n_vocab = self.model.model().config().n_vocab;
        if let Some(t) = tokens.iter().find(|&&t| t as usize >= n_vocab) {
            return Err(bad(format!(
                "the session file holds token {t} outside the vocabulary"
            )));
        }
        let mut at = 4 * n;
        let mut read = |ty: GgmlType, dst: &mut [f16]| {
            let src = &body[at..at + 2 * dst.len()];
            if ty == GgmlType::F16 {
                for (d, b) in dst.iter_mut().zip(src.chunks_exact(2)) {
                    *d = f16::from_le_bytes([b[0], b[1]]);
                }
            } else {
                bytes_of_mut(dst).copy_from_slice(src);
            }
            at += src.len();
        };
        for layer in 0..n_layer {
            let (kw, vw) = self.seqs[0].cache.layout(layer);
            let (keys, values) = self.seqs[0].cache.layer_mut(layer);
            read(types.k, &mut keys[..n * kw]);
            read(types.v, &mut values[..n * vw]);
        }
        let conv = self.seqs[0].cache.conv_mut();
        let layers: Vec<(usize, usize)> = conv.widths().collect();
        let mut row = Vec::new();
        for (layer, width) in layers {
            for pos in conv_rows.clone() {
                let src = &body[at..at + 4 * width];
                row.clear();
                row.extend(
                    src.chunks_exact(4)
                        .map(|b| f32::from_le_bytes(b.try_into().expect("4"))),
                );
                conv.store(layer, pos, &row);
                at += src.len();
            }
        }
        conv.restored(conv_rows);
        for state in self.seqs[0].cache.matrix_states_mut().states_mut() {
            let src = &body[at..at + 4 * state.len()];
            for (v, b) in state.iter_mut().zip(src.chunks_exact(4)) {
                *v = f32::from_le_bytes(b.try_into().expect("4"));
            }
            at += src.len();
        }
        self.seqs[0].cache.set_len(n);
        self.seqs[0].cached = tokens.clone();
        self.seqs[0].reusable = if reusable >= n { usize::MAX } else { reusable };
        Ok(tokens)
    }
}

/// The layout a session file's header states: the layer count and the first layer's key and
/// value units per position. (The layers after it follow from the model, which the file's
/// fingerprint pins.)
fn header_layout(cache: &crate::model::KvCache) -> (usize, (usize, usize)) {
    let n_layer = cache.n_layer();
    (
        n_layer,
        if n_layer == 0 {
            (0, 0)
        } else {
            cache.layout(0)
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The standard CRC-32 check value (of "123456789"), as zlib computes it.
    #[test]
    fn crc32_matches_the_standard_check_value() {
        let mut c = Crc32::new();
        c.update(b"123456789");
        assert_eq!(c.finish(), 0xCBF4_3926);
    }
}
