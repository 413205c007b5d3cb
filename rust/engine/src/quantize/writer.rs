//! GGUF (version 3, little-endian) writer: the header (metadata, tensor infos) is built in
//! memory, tensor data is streamed after it one tensor at a time, each padded to the alignment.

use std::io::{self, Read, Write};

use crate::gguf::{Array, Value};
use crate::quant::GgmlType;

/// One tensor of the output: name, GGUF-order dimensions, type.
pub(super) struct OutTensor {
    pub name: String,
    pub dims: Vec<u64>,
    pub ty: GgmlType,
}

impl OutTensor {
    /// Bytes of data (`None` when the row is not a whole number of blocks or overflows).
    pub fn n_bytes(&self) -> Option<u64> {
        let row = self.ty.row_bytes(*self.dims.first()?)?;
        self.dims[1..]
            .iter()
            .try_fold(row, |acc, &d| acc.checked_mul(d))
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// The GGUF value type code of a value.
fn value_code(v: &Value) -> u32 {
    match v {
        Value::U8(_) => 0,
        Value::I8(_) => 1,
        Value::U16(_) => 2,
        Value::I16(_) => 3,
        Value::U32(_) => 4,
        Value::I32(_) => 5,
        Value::F32(_) => 6,
        Value::Bool(_) => 7,
        Value::String(_) => 8,
        Value::Array(_) => 9,
        Value::U64(_) => 10,
        Value::I64(_) => 11,
        Value::F64(_) => 12,
    }
}

fn array_code(a: &Array) -> u32 {
    match a {
        Array::U8(_) => 0,
        Array::I8(_) => 1,
        Array::U16(_) => 2,
        Array::I16(_) => 3,
        Array::U32(_) => 4,
        Array::I32(_) => 5,
        Array::F32(_) => 6,
        Array::Bool(_) => 7,
        Array::String(_) => 8,
        Array::Array(_) => 9,
        Array::U64(_) => 10,
        Array::I64(_) => 11,
        Array::F64(_) => 12,
    }
}

/// Appends the body of an array: element type, count, elements.
fn put_array(out: &mut Vec<u8>, a: &Array) {
    out.extend_from_slice(&array_code(a).to_le_bytes());
    out.extend_from_slice(&(a.len() as u64).to_le_bytes());
    macro_rules! each {
        ($v:expr) => {
            for x in $v {
                out.extend_from_slice(&x.to_le_bytes());
            }
        };
    }
    match a {
        Array::U8(v) => out.extend_from_slice(v),
        Array::I8(v) => each!(v),
        Array::U16(v) => each!(v),
        Array::I16(v) => each!(v),
        Array::U32(v) => each!(v),
        Array::I32(v) => each!(v),
        Array::U64(v) => each!(v),
        Array::I64(v) => each!(v),
        Array::F32(v) => each!(v),
        Array::F64(v) => each!(v),
        Array::Bool(v) => out.extend(v.iter().map(|&b| u8::from(b))),
        Array::String(s) => s.iter().for_each(|s| put_str(out, s)),
        Array::Array(v) => v.iter().for_each(|a| put_array(out, a)),
    }
}

fn put_value(out: &mut Vec<u8>, v: &Value) {
    out.extend_from_slice(&value_code(v).to_le_bytes());
    match v {
        Value::U8(x) => out.push(*x),
        Value::I8(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::Bool(x) => out.push(u8::from(*x)),
        Value::String(s) => put_str(out, s),
        Value::Array(a) => put_array(out, a),
    }
}

/// Rounds `n` up to a multiple of `align` (a power of two or any positive value).
pub(super) fn pad(n: u64, align: u64) -> u64 {
    n.div_ceil(align) * align
}

/// The complete header of a GGUF v3 file, padded to `alignment`: magic, version, counts,
/// metadata, tensor infos with offsets laid out in order. Fails only when a tensor's size
/// cannot be computed.
pub(super) fn header(
    metadata: &[(String, Value)],
    tensors: &[OutTensor],
    alignment: u64,
) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    out.extend_from_slice(b"GGUF");
    out.extend_from_slice(&3u32.to_le_bytes());
    out.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    out.extend_from_slice(&(metadata.len() as u64).to_le_bytes());
    for (k, v) in metadata {
        put_str(&mut out, k);
        put_value(&mut out, v);
    }
    let mut offset = 0u64;
    for t in tensors {
        put_str(&mut out, &t.name);
        out.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
        for d in &t.dims {
            out.extend_from_slice(&d.to_le_bytes());
        }
        out.extend_from_slice(&t.ty.code().to_le_bytes());
        out.extend_from_slice(&offset.to_le_bytes());
        offset = pad(offset.checked_add(t.n_bytes()?)?, alignment);
    }
    out.resize(pad(out.len() as u64, alignment) as usize, 0);
    Some(out)
}

/// Writes zero bytes after `written` bytes of data up to the next multiple of `alignment`.
pub(super) fn write_padding(w: &mut impl Write, written: u64, alignment: u64) -> io::Result<()> {
    let zeros = pad(written, alignment) - written;
    io::copy(&mut io::repeat(0).take(zeros), w).map(|_| ())
}
