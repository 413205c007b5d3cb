//! Read-only tensor bytes that keep their owner (a memory map or an owned buffer) alive.

use std::sync::Arc;

/// Bytes of one tensor: a slice of a memory-mapped file (kept alive by `owner`) or an owned copy.
#[derive(Clone)]
pub struct TensorBytes {
    _owner: Arc<dyn Send + Sync>,
    ptr: *const u8,
    len: usize,
}

// SAFETY: the bytes are immutable and owned by `owner`, which is Send + Sync and kept alive as
// long as any clone of this value exists.
unsafe impl Send for TensorBytes {}
// SAFETY: see above; shared access is read-only.
unsafe impl Sync for TensorBytes {}

impl TensorBytes {
    /// Bytes borrowed from `owner`: `select` gets a shared reference to the owner and returns the
    /// bytes, e.g. `TensorBytes::borrowed(gguf, |g| g.tensor_data(info))`.
    ///
    /// The signature is the contract: the slice may only borrow from the owner (or be
    /// `'static`). The owner lives in an `Arc` that this value keeps, so it never moves or is
    /// dropped while the bytes are in use, and safe code cannot change memory that is borrowed
    /// through a shared reference.
    pub fn borrowed<O, F>(owner: Arc<O>, select: F) -> Self
    where
        O: Send + Sync + 'static,
        F: for<'a> FnOnce(&'a O) -> &'a [u8],
    {
        let bytes = select(&owner);
        let (ptr, len) = (bytes.as_ptr(), bytes.len());
        TensorBytes {
            _owner: owner,
            ptr,
            len,
        }
    }

    /// Bytes owned by this value.
    pub fn owned(bytes: Vec<u8>) -> Self {
        TensorBytes::borrowed(Arc::new(bytes), |b| b.as_slice())
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr..ptr+len` lies in memory owned by `self._owner`, alive and unchanged.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl std::fmt::Debug for TensorBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TensorBytes({} bytes)", self.len)
    }
}
