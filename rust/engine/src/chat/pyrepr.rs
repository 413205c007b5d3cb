//! Values printed as Python prints them, since Hugging Face templates run under Python's
//! jinja2: `str()` of a value (`{{ x }}`, `~`, `| string`) is the value itself for strings and
//! Python's `repr()` inside containers: `{'a': [1, None, True]}`, not minijinja's
//! `{"a": [1, none, true]}`. Floats follow Python's `repr` (`1e+16`, `1e-05`, `inf`).

use super::json::python_float_repr;
use minijinja::value::{Value, ValueKind};
use std::fmt::{self, Write};

/// Write `str(value)`: strings as they are, everything else as [`write_repr`] does;
/// undefined prints nothing.
pub(crate) fn write_str(out: &mut dyn Write, value: &Value) -> fmt::Result {
    match value.kind() {
        ValueKind::Undefined => Ok(()),
        ValueKind::String => out.write_str(value.as_str().unwrap_or_default()),
        _ => write_repr(out, value),
    }
}

/// Write `repr(value)`. Nesting is bounded by the allocation guard (`guard::MAX_DEPTH`).
pub(crate) fn write_repr(out: &mut dyn Write, value: &Value) -> fmt::Result {
    match value.kind() {
        ValueKind::Undefined | ValueKind::None => out.write_str("None"),
        ValueKind::Bool => out.write_str(if value.is_true() { "True" } else { "False" }),
        ValueKind::String => write_string_repr(out, value.as_str().unwrap_or_default()),
        ValueKind::Number => match f64::try_from(value.clone()) {
            Ok(f) if !value.is_integer() => write_float(out, f),
            _ => write!(out, "{value}"),
        },
        ValueKind::Seq => {
            out.write_char('[')?;
            let Ok(items) = value.try_iter() else {
                return write!(out, "{value}");
            };
            for (i, item) in items.enumerate() {
                if i > 0 {
                    out.write_str(", ")?;
                }
                write_repr(out, &item)?;
            }
            out.write_char(']')
        }
        ValueKind::Map => {
            out.write_char('{')?;
            let Ok(keys) = value.try_iter() else {
                return write!(out, "{value}");
            };
            for (i, key) in keys.enumerate() {
                if i > 0 {
                    out.write_str(", ")?;
                }
                write_repr(out, &key)?;
                out.write_str(": ")?;
                write_repr(out, &value.get_item(&key).unwrap_or_default())?;
            }
            out.write_char('}')
        }
        _ => write!(out, "{value}"),
    }
}

/// Python's `repr()` of a string: single quotes unless the text holds `'` and no `"`;
/// backslash escapes for the quote, backslash and non-printable characters.
fn write_string_repr(out: &mut dyn Write, s: &str) -> fmt::Result {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.write_char(quote)?;
    for c in s.chars() {
        match c {
            '\\' => out.write_str("\\\\")?,
            '\n' => out.write_str("\\n")?,
            '\r' => out.write_str("\\r")?,
            '\t' => out.write_str("\\t")?,
            c if c == quote => {
                out.write_char('\\')?;
                out.write_char(c)?;
            }
            c if !printable(c) => match u32::from(c) {
                n if n <= 0xff => write!(out, "\\x{n:02x}")?,
                n if n <= 0xffff => write!(out, "\\u{n:04x}")?,
                n => write!(out, "\\U{n:08x}")?,
            },
            c => out.write_char(c)?,
        }
    }
    out.write_char(quote)
}

/// Python's `str.isprintable()` for the characters templates meet: not a control character,
/// not a separator other than the space, not a format character.
fn printable(c: char) -> bool {
    !(c.is_control()
        || matches!(
            c,
            '\u{a0}' | '\u{ad}' | '\u{1680}' | '\u{2000}'..='\u{200f}' | '\u{2028}'..='\u{202f}'
                | '\u{205f}'..='\u{2064}' | '\u{3000}' | '\u{feff}'
        ))
}

/// Python's `repr()` of a float (`nan`, `inf`; otherwise as `json.dumps` spells it).
fn write_float(out: &mut dyn Write, f: f64) -> fmt::Result {
    if f.is_nan() {
        out.write_str("nan")
    } else if f.is_infinite() {
        out.write_str(if f < 0.0 { "-inf" } else { "inf" })
    } else {
        out.write_str(&python_float_repr(f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repr(v: Value) -> String {
        let mut s = String::new();
        write_repr(&mut s, &v).unwrap();
        s
    }

    #[test]
    fn floats_print_as_python_repr() {
        let cases = [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1e16, "1e+16"),
            (1.5e-5, "1.5e-05"),
            (123456.789, "123456.789"),
            (-2.5e20, "-2.5e+20"),
            (0.0001, "0.0001"),
            (f64::NAN, "nan"),
            (f64::NEG_INFINITY, "-inf"),
        ];
        for (f, want) in cases {
            assert_eq!(repr(Value::from(f)), want, "{f}");
        }
    }

    #[test]
    fn strings_pick_quotes_and_escape_as_python() {
        assert_eq!(repr(Value::from("a'b")), "\"a'b\"");
        assert_eq!(repr(Value::from("a'b\"c")), "'a\\'b\"c'");
        assert_eq!(repr(Value::from("x\n\u{1}\u{a0}é")), "'x\\n\\x01\\xa0é'");
    }
}
