//! GGUF metadata values.

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
    /// GGUF type 9.
    Array(Vec<Value>),
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
    pub fn as_array(&self) -> Option<&[Value]> {
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
                let elem = items.first().map_or("?", Value::type_name);
                let _ = write!(out, "[{elem}; {}]", items.len());
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
        let a = Value::Array((0..10).map(Value::U32).collect());
        assert_eq!(a.display_short(), "[u32; 10] [0, 1, 2, 3, ...]");
        let nested = Value::Array(vec![Value::Array(vec![Value::Bool(true)])]);
        assert_eq!(nested.display_short(), "[array; 1] [[bool; 1]]");
        let s = Value::String("a".repeat(100));
        assert!(s.display_short().ends_with("... (100 chars)"));
        assert_eq!(Value::Array(vec![]).display_short(), "[?; 0]");
    }
}
