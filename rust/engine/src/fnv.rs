//! 64-bit FNV-1a, for fingerprints of files (session files check what they were saved with).

/// A running 64-bit FNV-1a hash; `.0` is the hash so far.
pub(crate) struct Fnv(pub(crate) u64);

impl Fnv {
    /// The hash of nothing (FNV's offset basis).
    pub(crate) fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    /// Hash `bytes` after what came before.
    pub(crate) fn update(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
}
