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
    /// Bytes borrowed from `owner`; `bytes` must point into memory owned by `owner` that does not
    /// move or change while `owner` lives (a memory map or a heap buffer).
    pub fn borrowed<O: Send + Sync + 'static>(owner: Arc<O>, bytes: &[u8]) -> Self {
        TensorBytes {
            ptr: bytes.as_ptr(),
            len: bytes.len(),
            _owner: owner,
        }
    }

    /// Bytes owned by this value.
    pub fn owned(bytes: Vec<u8>) -> Self {
        let owner = Arc::new(bytes);
        let (ptr, len) = (owner.as_ptr(), owner.len());
        TensorBytes {
            _owner: owner,
            ptr,
            len,
        }
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
