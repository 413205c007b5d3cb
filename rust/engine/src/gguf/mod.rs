//! Memory-mapped GGUF reader with full validation.
//!
//! [`GgufFile::open`] maps the file, parses the header (metadata and tensor infos) and
//! validates every length, count, shape, offset and size against the file before anything is
//! allocated. Tensor data is then available as byte slices in little-endian layout: zero-copy
//! from the map for little-endian files, converted once at load for big-endian files.
//! Metadata strings and arrays are views of the file ([`Value`], [`Array`]): validated when
//! the file is opened, decoded (in the file's byte order) only when read, never copied.
//!
//! Supported: format versions 2 and 3, either byte order (big-endian files as written on
//! s390x hosts are detected from the byte-swapped version field), every metadata value type
//! including nested arrays (up to 8 levels), tensors of 1 to 4 dimensions of the types in
//! [`GgmlType`]. Big-endian files may hold only the tensor types gguf-py's
//! `gguf_convert_endian.py` converts (F32, F16, BF16, Q4_0, Q8_0, Q4_K, Q6_K).

mod byteswap;
mod error;
mod reader;
mod value;

use std::collections::HashMap;
use std::path::Path;

pub use error::GgufError;
pub use value::{Array, ArrayIter, Strings, Value};

use value::StoredValue;

use crate::quant::GgmlType;

/// Description of one tensor: name, shape, type and where its data lies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// Tensor name, e.g. `blk.0.attn_q.weight`.
    pub name: String,
    /// Shape in GGUF order: `dims[0]` is the innermost dimension (the row length).
    pub dims: Vec<u64>,
    /// Element type.
    pub ty: GgmlType,
    /// Offset of the data relative to the start of the data section.
    pub offset: u64,
    /// Size of the data in bytes.
    pub n_bytes: u64,
}

impl TensorInfo {
    /// Total number of elements (product of the dimensions).
    /// (Validated not to overflow for tensors read from a file; saturates otherwise.)
    pub fn n_elements(&self) -> u64 {
        self.dims.iter().fold(1, |acc, &d| acc.saturating_mul(d))
    }

    /// Number of rows: the product of every dimension but the first.
    pub fn n_rows(&self) -> u64 {
        self.dims
            .iter()
            .skip(1)
            .fold(1, |acc, &d| acc.saturating_mul(d))
    }
}

/// The bytes of a GGUF file: a read-only memory map or an owned buffer.
enum Storage {
    Mmap(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Storage {
    fn bytes(&self) -> &[u8] {
        match self {
            Storage::Mmap(m) => m,
            Storage::Owned(v) => v,
        }
    }
}

/// An open, validated GGUF file.
pub struct GgufFile {
    storage: Storage,
    version: u32,
    big_endian: bool,
    metadata: Vec<(String, StoredValue)>,
    meta_index: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
    alignment: u64,
    data_offset: u64,
}

impl GgufFile {
    /// Opens and validates a GGUF file, memory-mapping it.
    pub fn open(path: impl AsRef<Path>) -> crate::Result<GgufFile> {
        Self::open_with(path, true)
    }

    /// Opens and validates a GGUF file; with `mmap == false` the whole file is read into memory.
    pub fn open_with(path: impl AsRef<Path>, mmap: bool) -> crate::Result<GgufFile> {
        let path = path.as_ref();
        let io_err = |source| crate::Error::Io {
            path: path.display().to_string(),
            source,
        };
        // A FIFO or a device is refused, not waited on (`files::open_regular`).
        let mut file = crate::files::open_regular(path)?;
        let len = file.metadata().map_err(io_err)?.len();
        let storage = if len == 0 {
            Storage::Owned(Vec::new())
        } else if mmap {
            // SAFETY: the map is read-only. As with any memory map, the file must not be
            // truncated or modified by another process while it is open; that is a
            // documented requirement of using this engine on a model file.
            Storage::Mmap(unsafe { memmap2::Mmap::map(&file) }.map_err(io_err)?)
        } else {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut file, &mut bytes).map_err(io_err)?;
            Storage::Owned(bytes)
        };
        Ok(Self::from_storage(storage)?)
    }

    /// Parses and validates a GGUF file held in memory.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<GgufFile, GgufError> {
        Self::from_storage(Storage::Owned(bytes))
    }

    fn from_storage(storage: Storage) -> Result<GgufFile, GgufError> {
        let h = reader::parse_header(storage.bytes())?;
        let storage = if h.big_endian {
            byteswap::check_convertible(&h.tensors)?;
            let mut bytes = match storage {
                Storage::Owned(v) => v,
                Storage::Mmap(m) => m.to_vec(),
            };
            for t in &h.tensors {
                // Placement was validated, so the range is inside the buffer.
                let start = (h.data_offset + t.offset) as usize;
                let end = start + t.n_bytes as usize;
                if let Some(data) = bytes.get_mut(start..end) {
                    byteswap::to_little_endian(t.ty, data);
                }
            }
            Storage::Owned(bytes)
        } else {
            storage
        };
        Ok(GgufFile {
            storage,
            version: h.version,
            big_endian: h.big_endian,
            metadata: h.metadata,
            meta_index: h.meta_index,
            tensors: h.tensors,
            tensor_index: h.tensor_index,
            alignment: h.alignment,
            data_offset: h.data_offset,
        })
    }

    /// The format version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// All metadata pairs in file order. Values borrow the file: strings and arrays are
    /// views, decoded only when read.
    pub fn metadata(&self) -> impl ExactSizeIterator<Item = (&str, Value<'_>)> + '_ {
        let bytes = self.storage.bytes();
        self.metadata
            .iter()
            .map(move |(k, v)| (k.as_str(), v.view(bytes, self.big_endian)))
    }

    /// The metadata value for `key`.
    pub fn get(&self, key: &str) -> Option<Value<'_>> {
        let (_, v) = self
            .meta_index
            .get(key)
            .and_then(|&i| self.metadata.get(i))?;
        Some(v.view(self.storage.bytes(), self.big_endian))
    }

    /// The metadata value for `key` if it is a string.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key)?.as_str()
    }

    /// The metadata value for `key` if it is a non-negative integer of any width.
    pub fn get_u64(&self, key: &str) -> Option<u64> {
        self.get(key)?.as_u64()
    }

    /// The metadata value for `key` if it is an integer of any width that fits in `i64`.
    pub fn get_i64(&self, key: &str) -> Option<i64> {
        self.get(key)?.as_i64()
    }

    /// The metadata value for `key` if it is numeric, converted to `f32`.
    pub fn get_f32(&self, key: &str) -> Option<f32> {
        self.get(key)?.as_f32()
    }

    /// The metadata value for `key` if it is a bool.
    pub fn get_bool(&self, key: &str) -> Option<bool> {
        self.get(key)?.as_bool()
    }

    /// The metadata value for `key` if it is an array (a view of the file, see [`Array`]).
    pub fn get_array(&self, key: &str) -> Option<Array<'_>> {
        self.get(key)?.as_array()
    }

    /// All tensor infos in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The tensor info for `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_index
            .get(name)
            .and_then(|&i| self.tensors.get(i))
    }

    /// The data of a tensor of this file: exactly `t.n_bytes` bytes in little-endian layout.
    /// Returns an empty slice if `t` does not lie inside this file (a `TensorInfo` from
    /// another file).
    pub fn tensor_data(&self, t: &TensorInfo) -> &[u8] {
        let range = self
            .data_offset
            .checked_add(t.offset)
            .and_then(|start| Some((start, start.checked_add(t.n_bytes)?)))
            .and_then(|(s, e)| Some(usize::try_from(s).ok()?..usize::try_from(e).ok()?));
        range
            .and_then(|r| self.storage.bytes().get(r))
            .unwrap_or(&[])
    }

    /// Alignment of the data section and of every tensor offset, in bytes.
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// File offset where the data section starts.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// Size of the file in bytes.
    pub fn file_size(&self) -> u64 {
        self.storage.bytes().len() as u64
    }

    /// Whether the file was written in big-endian byte order (its tensor data was converted).
    pub fn is_big_endian_file(&self) -> bool {
        self.big_endian
    }
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("version", &self.version)
            .field("big_endian", &self.big_endian)
            .field("metadata", &self.metadata.len())
            .field("tensors", &self.tensors.len())
            .field("file_size", &self.file_size())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gguf_file_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<GgufFile>();
    }

    #[test]
    fn tensor_info_counts() {
        let t = TensorInfo {
            name: "w".into(),
            dims: vec![64, 3, 2],
            ty: GgmlType::Q8_0,
            offset: 0,
            n_bytes: 6 * 68,
        };
        assert_eq!((t.n_elements(), t.n_rows()), (384, 6));
    }
}
