//! GGUF metadata values. Arrays are stored compactly: one typed vector per array (a `u8`
//! array costs one byte per element, a string array its text plus one offset per element),
//! never one [`Value`] per element.

use std::fmt::Write as _;

/// A metadata value. Arrays hold elements of one type (possibly nested arrays).
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
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
    String(String),
    /// GGUF type 9: elements of one type, stored compactly (see [`Array`]).
    Array(Array),
}

impl Value {
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

    /// The value if it is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The elements if the value is an array.
    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// Short type name: `u8`, `i8`, `u16`, `i16`, `u32`, `i32`, `u64`, `i64`, `f32`, `f64`,
    /// `bool`, `string` or `array`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::U8(_) => "u8",
            Value::I8(_) => "i8",
            Value::U16(_) => "u16",
            Value::I16(_) => "i16",
            Value::U32(_) => "u32",
            Value::I32(_) => "i32",
            Value::U64(_) => "u64",
            Value::I64(_) => "i64",
            Value::F32(_) => "f32",
            Value::F64(_) => "f64",
            Value::Bool(_) => "bool",
            Value::String(_) => "string",
            Value::Array(_) => "array",
        }
    }

    /// A one-line rendering for listings: scalars in full, strings quoted and cut after 60
    /// characters, arrays as `[type; N] [first items, ...]`.
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
                for i in 0..items.len().min(MAX_ITEMS) {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    if let Some(item) = items.get(i) {
                        item.write_short(out, depth + 1);
                    }
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

/// The strings of a string array: their concatenated text and where each one ends.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Strings {
    text: String,
    ends: Vec<usize>,
}

impl Strings {
    /// An empty array with room for `n` strings of `bytes` bytes in total.
    pub(crate) fn with_capacity(n: usize, bytes: usize) -> Self {
        Strings {
            text: String::with_capacity(bytes),
            ends: Vec::with_capacity(n),
        }
    }

    /// Append a string.
    pub(crate) fn push(&mut self, s: &str) {
        self.text.push_str(s);
        self.ends.push(self.text.len());
    }

    /// Number of strings.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are no strings.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The `i`-th string.
    pub fn get(&self, i: usize) -> Option<&str> {
        let end = *self.ends.get(i)?;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        self.text.get(start..end)
    }

    /// The strings in order.
    pub fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }
}

/// A metadata array: elements of one type (possibly arrays themselves).
#[derive(Clone, Debug, PartialEq)]
pub enum Array {
    /// Elements of GGUF type 0.
    U8(Vec<u8>),
    /// Elements of GGUF type 1.
    I8(Vec<i8>),
    /// Elements of GGUF type 2.
    U16(Vec<u16>),
    /// Elements of GGUF type 3.
    I16(Vec<i16>),
    /// Elements of GGUF type 4.
    U32(Vec<u32>),
    /// Elements of GGUF type 5.
    I32(Vec<i32>),
    /// Elements of GGUF type 10.
    U64(Vec<u64>),
    /// Elements of GGUF type 11.
    I64(Vec<i64>),
    /// Elements of GGUF type 6.
    F32(Vec<f32>),
    /// Elements of GGUF type 12.
    F64(Vec<f64>),
    /// Elements of GGUF type 7.
    Bool(Vec<bool>),
    /// Elements of GGUF type 8.
    String(Strings),
    /// Elements of GGUF type 9 (nested arrays).
    Array(Vec<Array>),
}

/// Applies `$body` to the vector of a numeric or bool array, or evaluates `$other` for
/// string and nested arrays.
macro_rules! scalar_vec {
    ($array:expr, $v:ident => $body:expr, $other:pat => $else:expr) => {
        match $array {
            Array::U8($v) => $body,
            Array::I8($v) => $body,
            Array::U16($v) => $body,
            Array::I16($v) => $body,
            Array::U32($v) => $body,
            Array::I32($v) => $body,
            Array::U64($v) => $body,
            Array::I64($v) => $body,
            Array::F32($v) => $body,
            Array::F64($v) => $body,
            Array::Bool($v) => $body,
            $other => $else,
        }
    };
}

impl Array {
    /// Number of elements.
    pub fn len(&self) -> usize {
        scalar_vec!(self, v => v.len(), other => match other {
            Array::String(s) => s.len(),
            Array::Array(a) => a.len(),
            _ => 0,
        })
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `i`-th element as a value (strings and nested arrays are copied).
    pub fn get(&self, i: usize) -> Option<Value> {
        Some(match self {
            Array::U8(v) => Value::U8(*v.get(i)?),
            Array::I8(v) => Value::I8(*v.get(i)?),
            Array::U16(v) => Value::U16(*v.get(i)?),
            Array::I16(v) => Value::I16(*v.get(i)?),
            Array::U32(v) => Value::U32(*v.get(i)?),
            Array::I32(v) => Value::I32(*v.get(i)?),
            Array::U64(v) => Value::U64(*v.get(i)?),
            Array::I64(v) => Value::I64(*v.get(i)?),
            Array::F32(v) => Value::F32(*v.get(i)?),
            Array::F64(v) => Value::F64(*v.get(i)?),
            Array::Bool(v) => Value::Bool(*v.get(i)?),
            Array::String(s) => Value::String(s.get(i)?.to_string()),
            Array::Array(a) => Value::Array(a.get(i)?.clone()),
        })
    }

    /// The strings, if this is an array of strings.
    pub fn strings(&self) -> Option<&Strings> {
        match self {
            Array::String(s) => Some(s),
            _ => None,
        }
    }

    /// Short name of the element type (as [`Value::type_name`]).
    pub fn element_type_name(&self) -> &'static str {
        match self {
            Array::U8(_) => "u8",
            Array::I8(_) => "i8",
            Array::U16(_) => "u16",
            Array::I16(_) => "i16",
            Array::U32(_) => "u32",
            Array::I32(_) => "i32",
            Array::U64(_) => "u64",
            Array::I64(_) => "i64",
            Array::F32(_) => "f32",
            Array::F64(_) => "f64",
            Array::Bool(_) => "bool",
            Array::String(_) => "string",
            Array::Array(_) => "array",
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
        assert_eq!(Value::String("x".into()).as_u64(), None);
        assert_eq!(Value::F32(1.0).as_u64(), None);
    }

    #[test]
    fn display_short_summarizes_arrays_and_long_strings() {
        let a = Value::Array(Array::U32((0..10).collect()));
        assert_eq!(a.display_short(), "[u32; 10] [0, 1, 2, 3, ...]");
        let nested = Value::Array(Array::Array(vec![Array::Bool(vec![true])]));
        assert_eq!(nested.display_short(), "[array; 1] [[bool; 1]]");
        let s = Value::String("a".repeat(100));
        assert!(s.display_short().ends_with("... (100 chars)"));
        assert_eq!(Value::Array(Array::F32(vec![])).display_short(), "[f32; 0]");
    }

    #[test]
    fn strings_index_by_their_ends() {
        let mut s = Strings::with_capacity(3, 4);
        for t in ["ab", "", "cd"] {
            s.push(t);
        }
        assert_eq!(s.iter().collect::<Vec<_>>(), ["ab", "", "cd"]);
        assert_eq!(s.get(3), None);
        let a = Array::String(s);
        assert_eq!(a.len(), 3);
        assert_eq!(a.get(2), Some(Value::String("cd".into())));
    }

    #[test]
    fn elements_come_back_as_values() {
        let a = Array::Array(vec![Array::I32(vec![4]), Array::Bool(vec![])]);
        assert_eq!(a.get(0), Some(Value::Array(Array::I32(vec![4]))));
        assert_eq!(a.get(1).map(|v| v.type_name()), Some("array"));
        assert_eq!(Array::U8(vec![7]).get(0), Some(Value::U8(7)));
        assert_eq!(Array::U8(vec![7]).get(1), None);
    }
}
