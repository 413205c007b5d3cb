//! Python-compatible JSON serialization of template values for the `tojson` filter.
//!
//! Hugging Face's chat-template environment replaces Jinja's HTML-escaping `tojson` with
//! `json.dumps(value, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys)`.
//! This module reproduces that output format: `", "` / `": "` separators without indent,
//! `","` / `": "` with indent, non-ASCII characters kept verbatim, Python float spelling.

use minijinja::value::{Value, ValueKind};
use std::fmt::Write;

/// Formatting options mirroring the keyword arguments of Python's `json.dumps`.
pub(crate) struct JsonStyle {
    /// Spaces per indentation level; `None` = single line.
    pub indent: Option<String>,
    /// Item separator (between elements).
    pub item_sep: String,
    /// Key separator (between key and value).
    pub key_sep: String,
    /// Sort map keys by their JSON text.
    pub sort_keys: bool,
    /// Escape every character outside printable ASCII as `\uXXXX` (`ensure_ascii=True`).
    pub ascii: bool,
}

impl JsonStyle {
    /// Python's defaults for the given indent.
    pub fn new(indent: Option<String>) -> Self {
        let item_sep = if indent.is_some() { "," } else { ", " };
        JsonStyle {
            indent,
            item_sep: item_sep.to_string(),
            key_sep: ": ".to_string(),
            sort_keys: false,
            ascii: false,
        }
    }
}

/// Maximum nesting depth accepted (Python raises RecursionError far beyond this; we refuse early).
const MAX_DEPTH: usize = 128;

/// Serialize `value` like Python's `json.dumps`. Errors on excessive nesting.
pub(crate) fn dumps(value: &Value, style: &JsonStyle) -> Result<String, minijinja::Error> {
    let mut out = String::new();
    write_value(&mut out, value, style, 0)?;
    Ok(out)
}

fn invalid(msg: &str) -> minijinja::Error {
    minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, msg.to_string())
}

fn newline(out: &mut String, style: &JsonStyle, depth: usize) {
    if let Some(ind) = &style.indent {
        out.push('\n');
        for _ in 0..depth {
            out.push_str(ind);
        }
    }
}

fn write_value(
    out: &mut String,
    value: &Value,
    style: &JsonStyle,
    depth: usize,
) -> Result<(), minijinja::Error> {
    if depth > MAX_DEPTH {
        return Err(invalid("tojson: value nested too deeply"));
    }
    match value.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if value.is_true() { "true" } else { "false" }),
        ValueKind::Number => write_number(out, value),
        ValueKind::String => write_string(out, value.as_str().unwrap_or_default(), style.ascii),
        ValueKind::Bytes => {
            let text = String::from_utf8_lossy(value.as_bytes().unwrap_or_default()).into_owned();
            write_string(out, &text, style.ascii);
        }
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = value.try_iter()?.collect();
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(&style.item_sep);
                }
                newline(out, style, depth + 1);
                write_value(out, item, style, depth + 1)?;
            }
            newline(out, style, depth);
            out.push(']');
        }
        ValueKind::Map => {
            let mut entries = Vec::new();
            for key in value.try_iter()? {
                let item = value.get_item(&key)?;
                let mut key_text = String::new();
                match key.as_str() {
                    Some(s) => write_string(&mut key_text, s, style.ascii),
                    None => write_string(&mut key_text, &key.to_string(), style.ascii),
                }
                entries.push((key_text, item));
            }
            if style.sort_keys {
                entries.sort_by(|a, b| a.0.cmp(&b.0));
            }
            if entries.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            out.push('{');
            for (i, (key, item)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push_str(&style.item_sep);
                }
                newline(out, style, depth + 1);
                out.push_str(key);
                out.push_str(&style.key_sep);
                write_value(out, item, style, depth + 1)?;
            }
            newline(out, style, depth);
            out.push('}');
        }
        _ => write_string(out, &value.to_string(), style.ascii),
    }
    Ok(())
}

fn write_number(out: &mut String, value: &Value) {
    if value.is_integer() {
        // Integers (including i128/u128) print exactly in minijinja's Display.
        let _ = write!(out, "{value}");
        return;
    }
    let f = f64::try_from(value.clone()).unwrap_or(f64::NAN);
    out.push_str(&python_float_repr(f));
}

/// Python's `repr(float)`: shortest round-trip digits, exponent form outside [1e-4, 1e16).
pub(crate) fn python_float_repr(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.to_string();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0" } else { "0.0" }.to_string();
    }
    // `{:e}` gives the shortest round-trip digits as d.ddde<exp>.
    let sci = format!("{f:e}");
    let (mantissa, exp) = match sci.split_once('e') {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => (sci.as_str(), 0),
    };
    if (-4..16).contains(&exp) {
        let plain = format!("{f}");
        if plain.contains('.') {
            plain
        } else {
            format!("{plain}.0")
        }
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.unsigned_abs())
    }
}

fn write_string(out: &mut String, s: &str, ascii: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (ascii && !(' '..='~').contains(&c)) => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::python_float_repr;

    #[test]
    fn float_repr_matches_python_spelling() {
        assert_eq!(python_float_repr(1.0), "1.0");
        assert_eq!(python_float_repr(0.5), "0.5");
        assert_eq!(python_float_repr(1e16), "1e+16");
        assert_eq!(python_float_repr(1.5e-5), "1.5e-05");
        assert_eq!(python_float_repr(123456.789), "123456.789");
    }
}
