//! Several sequences in one forward pass: each sequence brings its tokens and its own KV
//! cache; the tokens of all of them go through every matrix product together (so each weight
//! is read once per pass, by the same kernels as a prompt batch), while RoPE positions and
//! attention (including Gemma 3's sliding window) stay per sequence.

use super::kv_cache::KvCache;

/// One sequence's part of a forward pass: `tokens` run at the positions after `cache`'s
/// contents, and their keys and values are appended to `cache`.
pub struct SeqTokens<'a> {
    /// The new tokens (at least one).
    pub tokens: &'a [u32],
    /// The sequence's KV cache.
    pub cache: &'a mut KvCache,
}
