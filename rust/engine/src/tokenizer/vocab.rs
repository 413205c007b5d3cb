//! Token storage: all token texts in one byte arena, a string-to-id hash index over it, scores and
//! llama.cpp-style token attributes.

/// Token attribute bits (llama.cpp's `llama_token_attr`).
pub(crate) mod attr {
    pub const UNKNOWN: u16 = 1 << 0;
    pub const UNUSED: u16 = 1 << 1;
    pub const NORMAL: u16 = 1 << 2;
    pub const CONTROL: u16 = 1 << 3;
    pub const USER_DEFINED: u16 = 1 << 4;
    pub const BYTE: u16 = 1 << 5;
    pub const LSTRIP: u16 = 1 << 7;
    pub const RSTRIP: u16 = 1 << 8;
}

/// Attribute for a GGUF `tokenizer.ggml.token_type` value.
pub(crate) fn attr_from_type(t: i64) -> u16 {
    match t {
        1 => attr::NORMAL,
        2 => attr::UNKNOWN,
        3 => attr::CONTROL,
        4 => attr::USER_DEFINED,
        5 => attr::UNUSED,
        6 => attr::BYTE,
        _ => 0,
    }
}

const EMPTY: u32 = u32::MAX;

/// Token texts plus extra strings (BPE merge parts that are not tokens), with a byte-string index.
#[derive(Debug, Clone)]
pub(crate) struct Vocab {
    arena: Vec<u8>,
    /// `(start, len)` into `arena` for every entry: tokens first, then extra strings.
    spans: Vec<(u32, u32)>,
    n_tokens: usize,
    pub(crate) scores: Vec<f32>,
    pub(crate) attrs: Vec<u16>,
    /// Open-addressing table of entry ids; `EMPTY` marks a free slot.
    table: Vec<u32>,
}

fn hash(bytes: &[u8]) -> u64 {
    // Multiply-rotate over 8-byte little-endian chunks, then a final avalanche.
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = bytes.len() as u64;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = (h.rotate_left(23) ^ u64::from_le_bytes(w)).wrapping_mul(K);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        h = (h.rotate_left(23) ^ u64::from_le_bytes(w)).wrapping_mul(K);
    }
    h ^= h >> 32;
    h = h.wrapping_mul(0xD6E8_FEB8_6659_FD93);
    h ^ (h >> 29)
}

impl Vocab {
    /// Builds the vocabulary. Later duplicates of a text win the index, like llama.cpp's map.
    pub(crate) fn new<T: AsRef<str>>(
        texts: &[T],
        scores: Vec<f32>,
        attrs: Vec<u16>,
    ) -> crate::Result<Vocab> {
        let total: usize = texts.iter().map(|t| t.as_ref().len()).sum();
        let mut arena = Vec::with_capacity(total);
        let mut spans = Vec::with_capacity(attrs.len());
        for t in texts {
            let t = t.as_ref().as_bytes();
            if arena.len() + t.len() > u32::MAX as usize || spans.len() >= u32::MAX as usize / 4 {
                return Err(crate::Error::Tokenizer("vocabulary too large".into()));
            }
            spans.push((arena.len() as u32, t.len() as u32));
            arena.extend_from_slice(t);
        }
        let n_tokens = spans.len();
        if scores.len() != n_tokens || attrs.len() != n_tokens {
            return Err(crate::Error::Tokenizer(
                "token, score and type counts differ".into(),
            ));
        }
        let mut v = Vocab {
            arena,
            spans,
            n_tokens,
            scores,
            attrs,
            table: Vec::new(),
        };
        v.rebuild_index(n_tokens * 2);
        Ok(v)
    }

    fn rebuild_index(&mut self, capacity_hint: usize) {
        let size = capacity_hint.max(16).next_power_of_two();
        self.table = vec![EMPTY; size];
        for id in 0..self.spans.len() {
            self.insert_index(id as u32);
        }
    }

    fn insert_index(&mut self, id: u32) {
        let mask = self.table.len() - 1;
        let key = self.bytes_of(id);
        let mut slot = (hash(key) as usize) & mask;
        loop {
            let cur = self.table[slot];
            if cur == EMPTY {
                self.table[slot] = id;
                return;
            }
            if self.bytes_of(cur) == key {
                self.table[slot] = id;
                return;
            }
            slot = (slot + 1) & mask;
        }
    }

    /// Adds a non-token string (if not present) and returns its entry id (>= `n_tokens` if new).
    pub(crate) fn intern_extra(&mut self, s: &[u8]) -> crate::Result<u32> {
        if let Some(id) = self.lookup(s) {
            return Ok(id);
        }
        if self.arena.len() + s.len() > u32::MAX as usize
            || self.spans.len() >= u32::MAX as usize / 2
        {
            return Err(crate::Error::Tokenizer("vocabulary too large".into()));
        }
        let id = self.spans.len() as u32;
        self.spans.push((self.arena.len() as u32, s.len() as u32));
        self.arena.extend_from_slice(s);
        if self.spans.len() * 2 > self.table.len() {
            self.rebuild_index(self.spans.len() * 2);
        } else {
            self.insert_index(id);
        }
        Ok(id)
    }

    fn bytes_of(&self, id: u32) -> &[u8] {
        let (s, l) = self.spans[id as usize];
        &self.arena[s as usize..s as usize + l as usize]
    }

    /// Entry id of `s` (a token id if `< n_tokens`, else an extra string).
    pub(crate) fn lookup(&self, s: &[u8]) -> Option<u32> {
        let mask = self.table.len() - 1;
        let mut slot = (hash(s) as usize) & mask;
        loop {
            let cur = self.table[slot];
            if cur == EMPTY {
                return None;
            }
            if self.bytes_of(cur) == s {
                return Some(cur);
            }
            slot = (slot + 1) & mask;
        }
    }

    /// Token id of text `s`, if it is a token.
    pub(crate) fn token_id(&self, s: &[u8]) -> Option<u32> {
        self.lookup(s).filter(|&id| (id as usize) < self.n_tokens)
    }

    /// Number of tokens.
    pub(crate) fn len(&self) -> usize {
        self.n_tokens
    }

    /// Text of token `id` as bytes.
    pub(crate) fn text(&self, id: u32) -> Option<&[u8]> {
        if (id as usize) < self.n_tokens {
            Some(self.bytes_of(id))
        } else {
            None
        }
    }

    /// Attribute bits of token `id` (0 if out of range).
    pub(crate) fn attr(&self, id: u32) -> u16 {
        self.attrs.get(id as usize).copied().unwrap_or(0)
    }
}
