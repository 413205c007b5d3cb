//! GGUF metadata values, borrowed from the file's bytes.
//!
//! A [`Value`] is a scalar, a string slice of the file, or an [`Array`]: a view of the array's
//! encoded elements (element type, count, byte range) that decodes elements only when they are
//! read, in the file's byte order. Reading a file with a 64-million-element array therefore
//! costs no memory for the array until someone iterates it. The reader validates every array
//! when the file is opened (lengths, UTF-8, bools, nesting), so decoding never fails later.

use std::fmt::Write as _;
use std::ops::Range;

/// A GGUF metadata value type (the codes of the format).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ValueType {
    U8,
    I8,
    U16,
    I16,
    U32,
    I32,
    F32,
    Bool,
    String,
    Array,
    U64,
    I64,
    F64,
}

impl ValueType {
    /// The type of GGUF code `code`, if it is one.
    pub(crate) fn from_code(code: u32) -> Option<ValueType> {
        use ValueType::*;
        Some(match code {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return None,
        })
    }

    /// The GGUF code of this type.
    pub(crate) fn code(self) -> u32 {
        self as u32
    }

    /// Encoded size of one value of a fixed-size type (`None` for strings and arrays).
    pub(crate) fn fixed_size(self) -> Option<usize> {
        use ValueType::*;
        match self {
            U8 | I8 | Bool => Some(1),
            U16 | I16 => Some(2),
            U32 | I32 | F32 => Some(4),
            U64 | I64 | F64 => Some(8),
            String | Array => None,
        }
    }

    /// Short name, as [`Value::type_name`].
    pub(crate) fn name(self) -> &'static str {
        use ValueType::*;
        match self {
            U8 => "u8",
            I8 => "i8",
            U16 => "u16",
            I16 => "i16",
            U32 => "u32",
            I32 => "i32",
            F32 => "f32",
            Bool => "bool",
            String => "string",
            Array => "array",
            U64 => "u64",
            I64 => "i64",
            F64 => "f64",
        }
    }
}

/// A metadata value. Strings and arrays borrow the file's bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value<'a> {
    /// GGUF type 0.
    U8(u8),
    /// GGUF type 1.
    I8(i8),
    /// GGUF type 2.
    U16(u16),
    /// GGUF type 3.
    I16(i16),
    /// GGUF type 4.
    U32(u32),
    /// GGUF type 5.
    I32(i32),
    /// GGUF type 10.
    U64(u64),
    /// GGUF type 11.
    I64(i64),
    /// GGUF type 6.
    F32(f32),
    /// GGUF type 12.
    F64(f64),
    /// GGUF type 7.
    Bool(bool),
    /// GGUF type 8 (UTF-8).
    String(&'a str),
    /// GGUF type 9: elements of one type, decoded on access (see [`Array`]).
    Array(Array<'a>),
}

impl<'a> Value<'a> {
    /// The value as `u64` if it is a non-negative integer of any width.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as `i64` if it is an integer of any width that fits.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => i64::try_from(v).ok(),
            Value::I8(v) => Some(v.into()),
            Value::I16(v) => Some(v.into()),
            Value::I32(v) => Some(v.into()),
            Value::I64(v) => Some(v),
            _ => None,
        }
    }

    /// The value as `f64` if it is numeric (integers are converted, possibly rounding).
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v.into()),
            Value::F64(v) => Some(v),
            Value::U64(v) => Some(v as f64),
            Value::I64(v) => Some(v as f64),
            _ => self.as_i64().map(|v| v as f64),
        }
    }

    /// The value as `f32` if it is numeric (converted, possibly rounding).
    pub fn as_f32(&self) -> Option<f32> {
        match *self {
            Value::F32(v) => Some(v),
            _ => self.as_f64().map(|v| v as f32),
        }
    }

    /// The value if it is a bool.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(v) => Some(v),
            _ => None,
        }
    }

    /// The value if it is a string (borrowed from the file).
    pub fn as_str(&self) -> Option<&'a str> {
        match *self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The array view if the value is an array.
    pub fn as_array(&self) -> Option<Array<'a>> {
        match *self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The GGUF type of the value.
    pub(crate) fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F32(_) => ValueType::F32,
            Value::F64(_) => ValueType::F64,
            Value::Bool(_) => ValueType::Bool,
            Value::String(_) => ValueType::String,
            Value::Array(_) => ValueType::Array,
        }
    }

    /// Short type name: `u8`, `i8`, `u16`, `i16`, `u32`, `i32`, `u64`, `i64`, `f32`, `f64`,
    /// `bool`, `string` or `array`.
    pub fn type_name(&self) -> &'static str {
        self.value_type().name()
    }

    /// A one-line rendering for listings: scalars in full, strings quoted and cut after 60
    /// characters, arrays as `[type; N] [first items, ...]` (only the first items are decoded).
    pub fn display_short(&self) -> String {
        let mut out = String::new();
        self.write_short(&mut out, 0);
        out
    }

    fn write_short(&self, out: &mut String, depth: usize) {
        const MAX_CHARS: usize = 60;
        const MAX_ITEMS: usize = 4;
        // Writing to a String cannot fail.
        let _ = match self {
            Value::U8(v) => write!(out, "{v}"),
            Value::I8(v) => write!(out, "{v}"),
            Value::U16(v) => write!(out, "{v}"),
            Value::I16(v) => write!(out, "{v}"),
            Value::U32(v) => write!(out, "{v}"),
            Value::I32(v) => write!(out, "{v}"),
            Value::U64(v) => write!(out, "{v}"),
            Value::I64(v) => write!(out, "{v}"),
            Value::F32(v) => write!(out, "{v}"),
            Value::F64(v) => write!(out, "{v}"),
            Value::Bool(v) => write!(out, "{v}"),
            Value::String(s) => {
                let n = s.chars().count();
                if n > MAX_CHARS {
                    let cut: String = s.chars().take(MAX_CHARS).collect();
                    write!(out, "{cut:?}... ({n} chars)")
                } else {
                    write!(out, "{s:?}")
                }
            }
            Value::Array(items) => {
                let _ = write!(out, "[{}; {}]", items.element_type_name(), items.len());
                if depth > 0 || items.is_empty() {
                    return;
                }
                out.push_str(" [");
                for (i, item) in items.iter().take(MAX_ITEMS).enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    item.write_short(out, depth + 1);
                }
                if items.len() > MAX_ITEMS {
                    out.push_str(", ...");
                }
                out.push(']');
                Ok(())
            }
        };
    }
}

/// A metadata array: a view of its encoded elements in the file. Nothing is decoded or
/// copied until elements are read: numbers in the file's byte order, strings as slices of the
/// file. Fixed-size elements are read at any index in O(1); strings and nested arrays, which
/// have variable sizes, are best read in order with [`Array::iter`] or [`Array::strings`].
#[derive(Clone, Copy)]
pub struct Array<'a> {
    elem: ValueType,
    len: usize,
    bytes: &'a [u8],
    big_endian: bool,
}

impl<'a> Array<'a> {
    /// A view of `len` elements of type `elem` encoded in `bytes` (validated by the reader).
    pub(crate) fn new(elem: ValueType, len: usize, bytes: &'a [u8], big_endian: bool) -> Self {
        Array {
            elem,
            len,
            bytes,
            big_endian,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Short name of the element type (as [`Value::type_name`]).
    pub fn element_type_name(&self) -> &'static str {
        self.elem.name()
    }

    /// The element type.
    pub(crate) fn element_type(&self) -> ValueType {
        self.elem
    }

    /// The encoded elements and whether they are big-endian (for writing them out again).
    pub(crate) fn encoded(&self) -> (&'a [u8], bool) {
        (self.bytes, self.big_endian)
    }

    /// The `i`-th element: O(1) for fixed-size elements, O(i) for strings and nested arrays.
    pub fn get(&self, i: usize) -> Option<Value<'a>> {
        if i >= self.len {
            return None;
        }
        match self.elem.fixed_size() {
            Some(w) => {
                let mut d = Decoder::new(self.bytes.get(i * w..)?, self.big_endian);
                d.value(self.elem)
            }
            None => self.iter().nth(i),
        }
    }

    /// The elements in order, decoded one at a time.
    pub fn iter(&self) -> ArrayIter<'a> {
        ArrayIter {
            elem: self.elem,
            left: self.len,
            decoder: Decoder::new(self.bytes, self.big_endian),
        }
    }

    /// The strings in order, if this is an array of strings.
    pub fn strings(&self) -> Option<Strings<'a>> {
        (self.elem == ValueType::String).then(|| Strings(self.iter()))
    }
}

impl PartialEq for Array<'_> {
    /// Arrays are equal when their elements are (whatever the files' byte orders).
    fn eq(&self, other: &Self) -> bool {
        self.elem == other.elem && self.len == other.len && self.iter().eq(other.iter())
    }
}

impl std::fmt::Debug for Array<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", Value::Array(*self).display_short())
    }
}

/// Iterator over the elements of an [`Array`].
#[derive(Clone)]
pub struct ArrayIter<'a> {
    elem: ValueType,
    left: usize,
    decoder: Decoder<'a>,
}

impl<'a> Iterator for ArrayIter<'a> {
    type Item = Value<'a>;

    fn next(&mut self) -> Option<Value<'a>> {
        self.left = self.left.checked_sub(1)?;
        let v = self.decoder.value(self.elem);
        if v.is_none() {
            // Unreachable for arrays the reader validated; end cleanly anyway.
            self.left = 0;
        }
        v
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for ArrayIter<'_> {}

/// Iterator over the strings of a string [`Array`], borrowed from the file.
#[derive(Clone)]
pub struct Strings<'a>(ArrayIter<'a>);

impl<'a> Iterator for Strings<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        self.0.next()?.as_str()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl ExactSizeIterator for Strings<'_> {}

/// Reads encoded values from a validated byte slice; `None` past its end.
#[derive(Clone)]
struct Decoder<'a> {
    bytes: &'a [u8],
    big_endian: bool,
}

macro_rules! decode_num {
    ($name:ident, $t:ty) => {
        fn $name(&mut self) -> Option<$t> {
            const W: usize = std::mem::size_of::<$t>();
            let b: [u8; W] = self.take(W)?.try_into().ok()?;
            Some(if self.big_endian {
                <$t>::from_be_bytes(b)
            } else {
                <$t>::from_le_bytes(b)
            })
        }
    };
}

impl<'a> Decoder<'a> {
    fn new(bytes: &'a [u8], big_endian: bool) -> Self {
        Decoder { bytes, big_endian }
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, tail) = self.bytes.split_at_checked(n)?;
        self.bytes = tail;
        Some(head)
    }

    decode_num!(u16, u16);
    decode_num!(i16, i16);
    decode_num!(u32, u32);
    decode_num!(i32, i32);
    decode_num!(u64, u64);
    decode_num!(i64, i64);
    decode_num!(f32, f32);
    decode_num!(f64, f64);

    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    /// Skips the encoding of `n` values of type `elem` (with `depth` levels of nesting left)
    /// and returns the bytes skipped.
    fn skip(&mut self, elem: ValueType, n: usize, depth: u32) -> Option<&'a [u8]> {
        let start = self.bytes;
        match elem.fixed_size() {
            Some(w) => {
                self.take(w.checked_mul(n)?)?;
            }
            None if elem == ValueType::String => {
                for _ in 0..n {
                    let len = usize::try_from(self.u64()?).ok()?;
                    self.take(len)?;
                }
            }
            None => {
                for _ in 0..n {
                    let inner = ValueType::from_code(self.u32()?)?;
                    let count = usize::try_from(self.u64()?).ok()?;
                    self.skip(inner, count, depth.checked_sub(1)?)?;
                }
            }
        }
        start.get(..start.len() - self.bytes.len())
    }

    /// Decodes one value of type `ty`.
    fn value(&mut self, ty: ValueType) -> Option<Value<'a>> {
        Some(match ty {
            ValueType::U8 => Value::U8(self.u8()?),
            ValueType::I8 => Value::I8(self.u8()? as i8),
            ValueType::U16 => Value::U16(self.u16()?),
            ValueType::I16 => Value::I16(self.i16()?),
            ValueType::U32 => Value::U32(self.u32()?),
            ValueType::I32 => Value::I32(self.i32()?),
            ValueType::U64 => Value::U64(self.u64()?),
            ValueType::I64 => Value::I64(self.i64()?),
            ValueType::F32 => Value::F32(self.f32()?),
            ValueType::F64 => Value::F64(self.f64()?),
            ValueType::Bool => Value::Bool(self.u8()? == 1),
            ValueType::String => {
                let len = usize::try_from(self.u64()?).ok()?;
                Value::String(std::str::from_utf8(self.take(len)?).ok()?)
            }
            ValueType::Array => {
                let elem = ValueType::from_code(self.u32()?)?;
                let len = usize::try_from(self.u64()?).ok()?;
                let bytes = self.skip(elem, len, MAX_NESTING)?;
                Value::Array(Array::new(elem, len, bytes, self.big_endian))
            }
        })
    }
}

/// Nesting the decoder follows (the reader accepts less).
const MAX_NESTING: u32 = 64;

/// How a metadata value is kept in a [`super::GgufFile`]: scalars by value, strings and arrays
/// as byte ranges of the file, turned into borrowed [`Value`]s on access.
#[derive(Clone, Debug)]
pub(crate) enum StoredValue {
    /// A scalar (never [`Value::String`] or [`Value::Array`]).
    Scalar(Value<'static>),
    /// A string: the range of its UTF-8 bytes.
    String(Range<usize>),
    /// An array: element type, count and the range of the encoded elements.
    Array {
        elem: ValueType,
        len: usize,
        bytes: Range<usize>,
    },
}

impl StoredValue {
    /// Short type name, as [`Value::type_name`].
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            StoredValue::Scalar(v) => v.type_name(),
            StoredValue::String(_) => ValueType::String.name(),
            StoredValue::Array { .. } => ValueType::Array.name(),
        }
    }

    /// The value as a view of `file` (the bytes the ranges refer to).
    pub(crate) fn view<'a>(&self, file: &'a [u8], big_endian: bool) -> Value<'a> {
        match self {
            StoredValue::Scalar(v) => *v,
            StoredValue::String(r) => Value::String(
                file.get(r.clone())
                    .and_then(|b| std::str::from_utf8(b).ok())
                    .unwrap_or(""),
            ),
            StoredValue::Array { elem, len, bytes } => Value::Array(Array::new(
                *elem,
                *len,
                file.get(bytes.clone()).unwrap_or(&[]),
                big_endian,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_conversions_check_range() {
        assert_eq!(Value::I32(-1).as_u64(), None);
        assert_eq!(Value::I32(7).as_u64(), Some(7));
        assert_eq!(Value::U64(u64::MAX).as_i64(), None);
        assert_eq!(Value::U8(3).as_f32(), Some(3.0));
        assert_eq!(Value::String("x").as_u64(), None);
        assert_eq!(Value::F32(1.0).as_u64(), None);
    }

    fn le_u32s(n: u32) -> Vec<u8> {
        (0..n).flat_map(u32::to_le_bytes).collect()
    }

    #[test]
    fn display_short_summarizes_arrays_and_long_strings() {
        let bytes = le_u32s(10);
        let a = Value::Array(Array::new(ValueType::U32, 10, &bytes, false));
        assert_eq!(a.display_short(), "[u32; 10] [0, 1, 2, 3, ...]");
        // One nested array holding one bool.
        let nested_bytes = [&7u32.to_le_bytes()[..], &1u64.to_le_bytes(), &[1]].concat();
        let nested = Value::Array(Array::new(ValueType::Array, 1, &nested_bytes, false));
        assert_eq!(nested.display_short(), "[array; 1] [[bool; 1]]");
        let long = "a".repeat(100);
        assert!(Value::String(&long)
            .display_short()
            .ends_with("... (100 chars)"));
        let empty = Value::Array(Array::new(ValueType::F32, 0, &[], false));
        assert_eq!(empty.display_short(), "[f32; 0]");
    }

    #[test]
    fn elements_decode_in_the_file_byte_order() {
        let be: Vec<u8> = [1u16, 2, 0x0102]
            .iter()
            .flat_map(|v| v.to_be_bytes())
            .collect();
        let le: Vec<u8> = [1u16, 2, 0x0102]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let (a, b) = (
            Array::new(ValueType::U16, 3, &be, true),
            Array::new(ValueType::U16, 3, &le, false),
        );
        assert_eq!(a.get(2), Some(Value::U16(0x0102)));
        assert_eq!(a.get(3), None);
        assert_eq!(a, b);
        assert_ne!(a, Array::new(ValueType::U16, 2, &le, false));
        assert_eq!(b.iter().len(), 3);
    }

    #[test]
    fn strings_and_nested_arrays_are_read_in_order() {
        let mut bytes = Vec::new();
        for s in ["ab", "", "cd"] {
            bytes.extend_from_slice(&(s.len() as u64).to_le_bytes());
            bytes.extend_from_slice(s.as_bytes());
        }
        let a = Array::new(ValueType::String, 3, &bytes, false);
        assert_eq!(a.strings().unwrap().collect::<Vec<_>>(), ["ab", "", "cd"]);
        assert_eq!(a.get(2), Some(Value::String("cd")));
        assert_eq!(a.get(3), None);
        assert!(Array::new(ValueType::U8, 0, &[], false).strings().is_none());

        // [[4i32], []]
        let mut nested = Vec::new();
        nested.extend_from_slice(&5u32.to_le_bytes());
        nested.extend_from_slice(&1u64.to_le_bytes());
        nested.extend_from_slice(&4i32.to_le_bytes());
        nested.extend_from_slice(&7u32.to_le_bytes());
        nested.extend_from_slice(&0u64.to_le_bytes());
        let n = Array::new(ValueType::Array, 2, &nested, false);
        let inner: Vec<_> = n.iter().collect();
        assert_eq!(inner.len(), 2);
        let first = inner[0].as_array().unwrap();
        assert_eq!(first.iter().collect::<Vec<_>>(), [Value::I32(4)]);
        assert_eq!(inner[1].type_name(), "array");
        assert_eq!(
            inner[1].as_array().map(|a| a.element_type_name()),
            Some("bool")
        );
    }
}
