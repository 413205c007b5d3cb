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

/// Appends the body of an array: element type, count, elements. Elements of a little-endian
/// file are copied as encoded; those of a big-endian file are re-encoded one at a time.
fn put_array(out: &mut Vec<u8>, a: &Array<'_>) {
    out.extend_from_slice(&a.element_type().code().to_le_bytes());
    out.extend_from_slice(&(a.len() as u64).to_le_bytes());
    match a.encoded() {
        (bytes, false) => out.extend_from_slice(bytes),
        (_, true) => a.iter().for_each(|v| put_payload(out, &v)),
    }
}

/// Appends a value without its type code.
fn put_payload(out: &mut Vec<u8>, v: &Value<'_>) {
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

fn put_value(out: &mut Vec<u8>, v: &Value<'_>) {
    out.extend_from_slice(&v.value_type().code().to_le_bytes());
    put_payload(out, v);
}

/// Rounds `n` up to a multiple of `align` (a power of two or any positive value).
pub(super) fn pad(n: u64, align: u64) -> u64 {
    n.div_ceil(align) * align
}

/// The complete header of a GGUF v3 file, padded to `alignment`: magic, version, counts,
/// metadata, tensor infos with offsets laid out in order. Fails only when a tensor's size
/// cannot be computed.
pub(super) fn header(
    metadata: &[(&str, Value<'_>)],
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
