//! Parsing and validation of the GGUF header (metadata and tensor infos) from a byte slice.
//!
//! Every length and count is checked against the bytes that remain before anything is
//! allocated, so a corrupt header can never cause a huge allocation or a panic. Metadata
//! strings and arrays are validated in place and kept as byte ranges of the file (see
//! [`StoredValue`]): an array costs the same few bytes whatever its length. What the header
//! does allocate (keys, metadata and tensor lists, their indexes, tensor names and shapes) is
//! charged to a memory budget of the file's size plus [`HEADER_MEMORY_SLACK`].

use std::collections::HashMap;
use std::ops::Range;

use super::error::GgufError;
use super::value::{StoredValue, Value, ValueType};
use super::TensorInfo;
use crate::quant::GgmlType;

type Result<T> = std::result::Result<T, GgufError>;

/// Alignment of the data section when `general.alignment` is absent.
const DEFAULT_ALIGNMENT: u64 = 32;
/// Metadata key that overrides the data alignment.
const ALIGNMENT_KEY: &str = "general.alignment";
/// Longest accepted metadata key or tensor name, in bytes.
const MAX_NAME_LEN: u64 = 65_535;
/// Longest accepted string value, in bytes.
const MAX_STRING_LEN: u64 = 1 << 30;
/// Deepest accepted nesting of arrays inside arrays.
const MAX_ARRAY_DEPTH: u32 = 8;
/// Most dimensions a tensor may have.
const MAX_DIMS: u32 = 4;
/// Memory the decoded header may take beyond the file's size, in bytes (see the module doc).
const HEADER_MEMORY_SLACK: u64 = 1 << 20;
/// What the allocator may spend on one heap allocation beyond its size (charged per string).
const ALLOC_OVERHEAD: u64 = 32;
/// Memory for one entry of a name index (`HashMap<String, usize>`): the entry, its control
/// byte, and as much again for the table's spare capacity.
const INDEX_ENTRY_BYTES: u64 = 2 * (std::mem::size_of::<(String, usize)>() as u64 + 1);
/// Memory for one metadata pair besides its key's text: its list slot and index entry.
const PAIR_BYTES: u64 = std::mem::size_of::<(String, StoredValue)>() as u64 + INDEX_ENTRY_BYTES;
/// Memory for one tensor info besides its name's text and dimensions.
const TENSOR_BYTES: u64 = std::mem::size_of::<TensorInfo>() as u64 + INDEX_ENTRY_BYTES;
/// Smallest encoded size of one metadata pair: empty key, type, one-byte value.
const MIN_KV_SIZE: u64 = 8 + 4 + 1;
/// Smallest encoded size of one tensor info: empty name, n_dims, one dim, type, offset.
const MIN_TENSOR_INFO_SIZE: u64 = 8 + 4 + 8 + 4 + 8;

/// Metadata pairs in file order, and the index of each key.
type MetadataTable = (Vec<(String, StoredValue)>, HashMap<String, usize>);

/// The parsed and validated header of a GGUF file.
pub(crate) struct Header {
    pub version: u32,
    pub big_endian: bool,
    pub metadata: Vec<(String, StoredValue)>,
    pub meta_index: HashMap<String, usize>,
    pub tensors: Vec<TensorInfo>,
    pub tensor_index: HashMap<String, usize>,
    pub alignment: u64,
    pub data_offset: u64,
}

/// Reads fixed-size fields in the file's byte order, never past the end of the buffer.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    big_endian: bool,
    /// Bytes of memory the decoded header may still allocate.
    budget: u64,
}

macro_rules! read_num {
    ($name:ident, $t:ty) => {
        fn $name(&mut self, what: &str) -> Result<$t> {
            let bytes = self.array(what)?;
            Ok(if self.big_endian {
                <$t>::from_be_bytes(bytes)
            } else {
                <$t>::from_le_bytes(bytes)
            })
        }
    };
}

impl<'a> Cursor<'a> {
    fn offset(&self) -> u64 {
        self.pos as u64
    }

    fn remaining(&self) -> u64 {
        (self.buf.len() - self.pos) as u64
    }

    fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8]> {
        let truncated = || GgufError::Truncated {
            what: what.to_string(),
            offset: self.pos as u64,
        };
        let n = usize::try_from(n).map_err(|_| truncated())?;
        let end = self.pos.checked_add(n).ok_or_else(truncated)?;
        let bytes = self.buf.get(self.pos..end).ok_or_else(truncated)?;
        self.pos = end;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let bytes = self.take(N as u64, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    read_num!(u16, u16);
    read_num!(i16, i16);
    read_num!(u32, u32);
    read_num!(i32, i32);
    read_num!(u64, u64);
    read_num!(i64, i64);
    read_num!(f32, f32);
    read_num!(f64, f64);

    fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }

    /// Reads a count and checks that `count * min_size` bytes could still follow.
    fn count(&mut self, what: &str, min_size: u64) -> Result<u64> {
        let offset = self.offset();
        let count = self.u64(what)?;
        let limit = self.remaining() / min_size.max(1);
        if count > limit {
            return Err(GgufError::TooLarge {
                what: what.to_string(),
                value: count,
                limit,
                offset,
            });
        }
        Ok(count)
    }

    /// Charges `bytes` of memory about to be allocated for `what` to the budget.
    fn charge(&mut self, bytes: u64, what: &str) -> Result<()> {
        if bytes > self.budget {
            return Err(GgufError::OverMemoryBudget {
                what: what.to_string(),
                needed: bytes,
                budget: self.budget,
                offset: self.offset(),
            });
        }
        self.budget -= bytes;
        Ok(())
    }

    /// Reads a GGUF string (u64 length + UTF-8 bytes) of at most `cap` bytes, borrowed from
    /// the buffer.
    fn str_ref(&mut self, what: &str, cap: u64) -> Result<&'a str> {
        let offset = self.offset();
        let len = self.u64("").map_err(|_| GgufError::Truncated {
            what: format!("{what} length"),
            offset,
        })?;
        let limit = self.remaining().min(cap);
        if len > limit {
            return Err(GgufError::TooLarge {
                what: format!("{what} length"),
                value: len,
                limit,
                offset,
            });
        }
        let data_offset = self.offset();
        let bytes = self.take(len, what)?;
        std::str::from_utf8(bytes).map_err(|_| GgufError::InvalidUtf8 {
            what: what.to_string(),
            offset: data_offset,
        })
    }

    /// Reads a GGUF string into an owned `String`, charging `copies` allocations of it (the
    /// string and the copies a caller will make) to the budget.
    fn string(&mut self, what: &str, cap: u64, copies: u64) -> Result<String> {
        let s = self.str_ref(what, cap)?;
        self.charge(copies * (s.len() as u64 + ALLOC_OVERHEAD), what)?;
        Ok(s.to_owned())
    }
}

/// Smallest encoded size of one value of type `ty`.
fn min_value_size(ty: ValueType) -> u64 {
    match ty.fixed_size() {
        Some(w) => w as u64,
        None if ty == ValueType::String => 8,
        None => 4 + 8,
    }
}

fn read_value(c: &mut Cursor<'_>, code: u32, code_offset: u64) -> Result<StoredValue> {
    let scalar = StoredValue::Scalar;
    Ok(match ValueType::from_code(code) {
        Some(ValueType::U8) => scalar(Value::U8(c.u8("u8 value")?)),
        Some(ValueType::I8) => scalar(Value::I8(c.u8("i8 value")? as i8)),
        Some(ValueType::U16) => scalar(Value::U16(c.u16("u16 value")?)),
        Some(ValueType::I16) => scalar(Value::I16(c.i16("i16 value")?)),
        Some(ValueType::U32) => scalar(Value::U32(c.u32("u32 value")?)),
        Some(ValueType::I32) => scalar(Value::I32(c.i32("i32 value")?)),
        Some(ValueType::U64) => scalar(Value::U64(c.u64("u64 value")?)),
        Some(ValueType::I64) => scalar(Value::I64(c.i64("i64 value")?)),
        Some(ValueType::F32) => scalar(Value::F32(c.f32("f32 value")?)),
        Some(ValueType::F64) => scalar(Value::F64(c.f64("f64 value")?)),
        Some(ValueType::Bool) => {
            let offset = c.offset();
            let bytes = c.take(1, "bool value")?;
            check_bools(bytes, offset)?;
            scalar(Value::Bool(bytes == [1]))
        }
        Some(ValueType::String) => {
            let s = c.str_ref("string value", MAX_STRING_LEN)?;
            let end = c.pos;
            StoredValue::String(end - s.len()..end)
        }
        Some(ValueType::Array) => {
            let (elem, len, bytes) = check_array(c, 0)?;
            StoredValue::Array { elem, len, bytes }
        }
        None => {
            return Err(GgufError::UnknownValueType {
                code,
                offset: code_offset,
                context: String::new(),
            })
        }
    })
}

/// Fails unless every byte of `bytes` (bool values starting at file offset `offset`) is 0 or 1.
fn check_bools(bytes: &[u8], offset: u64) -> Result<()> {
    match bytes.iter().position(|&b| b > 1) {
        Some(at) => Err(GgufError::Invalid(format!(
            "bool value {} at offset {} is neither 0 nor 1",
            bytes[at],
            offset + at as u64
        ))),
        None => Ok(()),
    }
}

/// Validates an array (element type, count, elements) without decoding or copying it, and
/// returns its element type, count and the byte range of its encoded elements. Only bools,
/// strings and nested arrays need their bytes read; other elements are only bounds-checked.
fn check_array(c: &mut Cursor<'_>, depth: u32) -> Result<(ValueType, usize, Range<usize>)> {
    let elem_offset = c.offset();
    let code = c.u32("array element type")?;
    let unknown = || GgufError::UnknownValueType {
        code,
        offset: elem_offset,
        context: String::new(),
    };
    let elem = ValueType::from_code(code).ok_or_else(unknown)?;
    if elem == ValueType::Array && depth >= MAX_ARRAY_DEPTH {
        return Err(GgufError::Invalid(format!(
            "arrays nested deeper than {MAX_ARRAY_DEPTH} levels at offset {elem_offset}"
        )));
    }
    // `n` is bounded by the remaining bytes; nothing is allocated for the elements.
    let n = c.count("array length", min_value_size(elem))?;
    let start = c.pos;
    match elem.fixed_size() {
        Some(w) => {
            let offset = c.offset();
            let bytes = c.take(n * w as u64, "array elements")?;
            if elem == ValueType::Bool {
                check_bools(bytes, offset)?;
            }
        }
        None if elem == ValueType::String => {
            for _ in 0..n {
                c.str_ref("string value", MAX_STRING_LEN)?;
            }
        }
        None => {
            for _ in 0..n {
                check_array(c, depth + 1)?;
            }
        }
    }
    // `n` is at most the number of remaining bytes, so it fits in usize.
    Ok((elem, n as usize, start..c.pos))
}

/// Reads the magic and version; returns `(version, big_endian)`.
fn read_preamble(c: &mut Cursor<'_>) -> Result<(u32, bool)> {
    let magic = c.buf.get(..4).unwrap_or(c.buf);
    if magic != b"GGUF" {
        return Err(GgufError::BadMagic {
            found: magic.to_vec(),
        });
    }
    c.pos = 4;
    let raw: [u8; 4] = c.array("version")?;
    let le = u32::from_le_bytes(raw);
    // A file written in big-endian order has its (small) version in the high bytes when read
    // as little-endian; this is how llama.cpp and gguf-py detect the byte order.
    let (version, big_endian) = if le & 0xFFFF == 0 && le != 0 {
        (u32::from_be_bytes(raw), true)
    } else {
        (le, false)
    };
    if version != 2 && version != 3 {
        return Err(GgufError::UnsupportedVersion(version));
    }
    c.big_endian = big_endian;
    Ok((version, big_endian))
}

fn read_metadata(c: &mut Cursor<'_>, kv_count: u64) -> Result<MetadataTable> {
    // kv_count was checked against the remaining bytes, and what the lists take is charged.
    c.charge(kv_count * PAIR_BYTES, "metadata pairs")?;
    let mut metadata = Vec::with_capacity(kv_count as usize);
    let mut index = HashMap::with_capacity(kv_count as usize);
    for i in 0..kv_count {
        let key = c
            .string("key", MAX_NAME_LEN, 2)
            .map_err(|e| e.in_context(&format!("metadata pair #{i}")))?;
        let code_offset = c.offset();
        let value = c
            .u32("value type")
            .and_then(|code| read_value(c, code, code_offset))
            .map_err(|e| e.in_context(&format!("key '{key}'")))?;
        if index.insert(key.clone(), metadata.len()).is_some() {
            return Err(GgufError::DuplicateKey(key));
        }
        metadata.push((key, value));
    }
    Ok((metadata, index))
}

fn alignment_of(metadata: &[(String, StoredValue)], index: &HashMap<String, usize>) -> Result<u64> {
    let Some(value) = index.get(ALIGNMENT_KEY).and_then(|&i| metadata.get(i)) else {
        return Ok(DEFAULT_ALIGNMENT);
    };
    match value.1 {
        StoredValue::Scalar(Value::U32(a)) if a.is_power_of_two() => Ok(a.into()),
        StoredValue::Scalar(Value::U32(a)) => Err(GgufError::Invalid(format!(
            "{ALIGNMENT_KEY} is {a}, not a nonzero power of two"
        ))),
        ref other => Err(GgufError::Invalid(format!(
            "{ALIGNMENT_KEY} has type {}, expected u32",
            other.type_name()
        ))),
    }
}

/// Reads one tensor info and checks its shape and type (not yet its placement).
fn read_tensor_info(c: &mut Cursor<'_>, i: u64) -> Result<TensorInfo> {
    let name = c
        .string("tensor name", MAX_NAME_LEN, 2)
        .map_err(|e| e.in_context(&format!("tensor info #{i}")))?;
    let ctx = |e: GgufError| e.in_context(&format!("tensor '{name}'"));
    let bad = |reason: String| GgufError::InvalidTensor {
        tensor: name.clone(),
        reason,
    };
    let n_dims = c.u32("dimension count").map_err(ctx)?;
    if n_dims == 0 || n_dims > MAX_DIMS {
        return Err(bad(format!(
            "{n_dims} dimensions (expected 1 to {MAX_DIMS})"
        )));
    }
    c.charge(8 * u64::from(n_dims) + ALLOC_OVERHEAD, "tensor dimensions")
        .map_err(ctx)?;
    let mut dims = Vec::with_capacity(n_dims as usize);
    for _ in 0..n_dims {
        dims.push(c.u64("dimension").map_err(ctx)?);
    }
    let code = c.u32("tensor type").map_err(ctx)?;
    let offset = c.u64("tensor data offset").map_err(ctx)?;
    let ty = GgmlType::from_code(code).ok_or_else(|| GgufError::UnknownTensorType {
        tensor: name.clone(),
        code,
    })?;
    if dims.contains(&0) {
        return Err(bad(format!("zero dimension in shape {dims:?}")));
    }
    let n_elements = dims
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= i64::MAX as u64)
        .ok_or_else(|| bad(format!("element count of shape {dims:?} overflows")))?;
    let row_bytes = ty.row_bytes(dims[0]).ok_or_else(|| {
        bad(format!(
            "row length {} is not a multiple of the {ty} block size {}",
            dims[0],
            ty.block_size()
        ))
    })?;
    let n_bytes = row_bytes
        .checked_mul(n_elements / dims[0])
        .ok_or_else(|| bad(format!("byte size of shape {dims:?} overflows")))?;
    Ok(TensorInfo {
        name,
        dims,
        ty,
        offset,
        n_bytes,
    })
}

/// Checks that every tensor is aligned, inside the file and not overlapping another.
fn check_placement(
    tensors: &[TensorInfo],
    alignment: u64,
    data_offset: u64,
    file_size: u64,
) -> Result<()> {
    let data_len = file_size.saturating_sub(data_offset);
    let mut order: Vec<usize> = (0..tensors.len()).collect();
    for t in tensors {
        let bad = |reason: String| GgufError::InvalidTensor {
            tensor: t.name.clone(),
            reason,
        };
        // `alignment` is a nonzero power of two.
        if t.offset & (alignment - 1) != 0 {
            return Err(bad(format!(
                "data offset {} is not a multiple of the alignment {alignment}",
                t.offset
            )));
        }
        match t.offset.checked_add(t.n_bytes) {
            Some(end) if end <= data_len => {}
            _ => {
                return Err(bad(format!(
                    "data at offset {} ({} bytes) runs past the end of the data section \
                     ({data_len} bytes from file offset {data_offset})",
                    t.offset, t.n_bytes
                )))
            }
        }
    }
    order.sort_by_key(|&i| tensors[i].offset);
    for pair in order.windows(2) {
        let (a, b) = (&tensors[pair[0]], &tensors[pair[1]]);
        if a.offset + a.n_bytes > b.offset {
            return Err(GgufError::InvalidTensor {
                tensor: b.name.clone(),
                reason: format!(
                    "data at offset {} overlaps tensor '{}' at offset {} ({} bytes)",
                    b.offset, a.name, a.offset, a.n_bytes
                ),
            });
        }
    }
    Ok(())
}

/// Parses and validates the whole header of a GGUF file held in `buf`.
pub(crate) fn parse_header(buf: &[u8]) -> Result<Header> {
    let mut c = Cursor {
        buf,
        pos: 0,
        big_endian: false,
        budget: (buf.len() as u64).saturating_add(HEADER_MEMORY_SLACK),
    };
    let (version, big_endian) = read_preamble(&mut c)?;
    let tensor_count = c.count("tensor count", MIN_TENSOR_INFO_SIZE)?;
    let kv_count = c.count("metadata pair count", MIN_KV_SIZE)?;
    // Both lists must fit in the remaining bytes together.
    let needed = tensor_count * MIN_TENSOR_INFO_SIZE + kv_count * MIN_KV_SIZE;
    if needed > c.remaining() {
        return Err(GgufError::TooLarge {
            what: "tensor and metadata counts".to_string(),
            value: needed,
            limit: c.remaining(),
            offset: 8,
        });
    }
    let (metadata, meta_index) = read_metadata(&mut c, kv_count)?;
    let alignment = alignment_of(&metadata, &meta_index)?;

    c.charge(tensor_count * TENSOR_BYTES, "tensor infos")?;
    let mut tensors = Vec::with_capacity(tensor_count as usize);
    let mut tensor_index = HashMap::with_capacity(tensor_count as usize);
    for i in 0..tensor_count {
        let t = read_tensor_info(&mut c, i)?;
        if tensor_index.insert(t.name.clone(), tensors.len()).is_some() {
            return Err(GgufError::DuplicateTensor(t.name));
        }
        tensors.push(t);
    }

    let header_end = c.offset();
    let data_offset = header_end
        .div_ceil(alignment)
        .checked_mul(alignment)
        .ok_or_else(|| GgufError::Invalid("data section offset overflows".to_string()))?;
    check_placement(&tensors, alignment, data_offset, buf.len() as u64)?;

    Ok(Header {
        version,
        big_endian,
        metadata,
        meta_index,
        tensors,
        tensor_index,
        alignment,
        data_offset,
    })
}
