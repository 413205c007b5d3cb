//! The Hugging Face–compatible Jinja environment and the resource limits that keep a hostile
//! template from hanging or exhausting memory.
//!
//! Limits:
//! - fuel ([`FUEL`] instructions per render) bounds running time, including infinite-ish loops;
//! - a recursion limit ([`RECURSION_LIMIT`]) bounds macro / recursive-loop nesting;
//! - the rendered output is written through [`CappedWriter`], which fails once the output exceeds
//!   the cap computed by [`output_cap`];
//! - string-producing filters and Python-style methods that can grow text (`replace`, `join`,
//!   `indent`, `format`, `tojson`, ...) fail when their result exceeds the cap.
//!
//! Residual risk (documented, not handled): minijinja's `~` / `+` string concatenation has no
//! hook, so a template that doubles a string in a loop (`{% set s = s ~ s %}`) can still
//! allocate up to 2^fuel bytes before the output cap is reached.

use super::json::{dumps, JsonStyle};
use minijinja::value::{Kwargs, Rest, Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind, State};
use std::io;

/// Instruction budget for one render.
pub(crate) const FUEL: u64 = 5_000_000;
/// Maximum nesting of macro calls / recursive loops.
pub(crate) const RECURSION_LIMIT: usize = 64;
/// Output allowance independent of the input size.
const BASE_OUTPUT_CAP: usize = 4 << 20;

/// The output cap for a render whose messages hold `input_bytes` bytes of content:
/// room for every message rendered a few times plus a fixed allowance for template text.
pub(crate) fn output_cap(input_bytes: usize) -> usize {
    BASE_OUTPUT_CAP.saturating_add(input_bytes.saturating_mul(4))
}

/// Build an environment with HF's settings (trim_blocks, lstrip_blocks, no autoescape, lenient
/// undefined), the `raise_exception`, `strftime_now` globals, HF's `tojson`, Python string
/// methods, and the limits described in the module docs. `cap` bounds text-growing filters.
pub(crate) fn build_environment(cap: usize) -> Environment<'static> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_keep_trailing_newline(false);
    env.set_fuel(Some(FUEL));
    env.set_recursion_limit(RECURSION_LIMIT);
    env.set_debug(false);
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
    env.set_formatter(python_formatter);
    env.set_unknown_method_callback(move |state, value, method, args| {
        let out = minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)?;
        check_len(&out, cap)
    });
    env.add_function("raise_exception", raise_exception);
    env.add_function("strftime_now", strftime_now);
    env.add_filter(
        "tojson",
        move |value: &Value, indent: Option<Value>, kwargs: Kwargs| {
            tojson(value, indent, kwargs).and_then(|s| check_len(&Value::from(s), cap))
        },
    );
    // Text-growing builtin filters, re-registered with a result-size check.
    let growing = [
        ("replace", Value::from_function(minijinja::filters::replace)),
        ("join", Value::from_function(minijinja::filters::join)),
        ("indent", Value::from_function(minijinja::filters::indent)),
        ("format", Value::from_function(minijinja::filters::format)),
    ];
    for (name, filter) in growing {
        env.add_filter(name, move |state: &State, args: Rest<Value>| {
            check_len(&filter.call(state, &args)?, cap)
        });
    }
    env
}

fn check_len(value: &Value, cap: usize) -> Result<Value, Error> {
    let len = match value.kind() {
        ValueKind::String => value.as_str().map_or(0, str::len),
        _ => 0,
    };
    if len > cap {
        Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("string of {len} bytes exceeds the template size limit of {cap} bytes"),
        ))
    } else {
        Ok(value.clone())
    }
}

/// Print values the way Python's `str()` would for the scalars where minijinja differs.
fn python_formatter(
    out: &mut minijinja::Output,
    _state: &State,
    value: &Value,
) -> Result<(), Error> {
    let res = match value.kind() {
        ValueKind::Undefined => Ok(()),
        ValueKind::None => out.write_str("None"),
        ValueKind::Bool => out.write_str(if value.is_true() { "True" } else { "False" }),
        _ => write!(out, "{value}"),
    };
    res.map_err(|_| Error::new(ErrorKind::WriteFailure, "failed to write template output"))
}

/// `raise_exception(message)`: abort rendering with the template's message.
fn raise_exception(message: String) -> Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message))
}

/// `strftime_now(format)`: the local time formatted with strftime-style directives.
fn strftime_now(format: &str) -> Result<Value, Error> {
    use std::fmt::Write;
    let mut out = String::new();
    write!(out, "{}", chrono::Local::now().format(format)).map_err(|_| {
        Error::new(
            ErrorKind::InvalidOperation,
            format!("strftime_now: invalid format string {format:?}"),
        )
    })?;
    Ok(Value::from(out))
}

/// HF's `tojson(value, indent=None, separators=None, sort_keys=False)` (ensure_ascii=False).
fn tojson(value: &Value, indent: Option<Value>, kwargs: Kwargs) -> Result<String, Error> {
    let indent = match indent {
        Some(v) => Some(v),
        None => kwargs.get::<Option<Value>>("indent")?,
    };
    let indent = match indent {
        None => None,
        Some(v) if v.is_none() => None,
        Some(v) => match v.as_str() {
            Some(s) => Some(s.to_string()),
            None => {
                let n = usize::try_from(v)?;
                if n > 64 {
                    return Err(Error::new(
                        ErrorKind::InvalidOperation,
                        "tojson: indent too large",
                    ));
                }
                Some(" ".repeat(n))
            }
        },
    };
    let mut style = JsonStyle::new(indent);
    if let Some(seps) = kwargs.get::<Option<Value>>("separators")? {
        if !seps.is_none() {
            let parts: Vec<Value> = seps.try_iter()?.collect();
            match parts.as_slice() {
                [a, b] => {
                    style.item_sep = a.as_str().unwrap_or_default().to_string();
                    style.key_sep = b.as_str().unwrap_or_default().to_string();
                }
                _ => {
                    return Err(Error::new(
                        ErrorKind::InvalidOperation,
                        "tojson: separators must be a pair of strings",
                    ))
                }
            }
        }
    }
    if let Some(sort) = kwargs.get::<Option<bool>>("sort_keys")? {
        style.sort_keys = sort;
    }
    // `ensure_ascii` is accepted for compatibility; only the HF default (False) is implemented.
    if kwargs.get::<Option<bool>>("ensure_ascii")? == Some(true) {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "tojson: ensure_ascii=True is not supported",
        ));
    }
    kwargs.assert_all_used()?;
    dumps(value, &style)
}

/// An `io::Write` sink that refuses to grow beyond a byte cap.
pub(crate) struct CappedWriter {
    /// Bytes written so far.
    pub buf: Vec<u8>,
    cap: usize,
    /// Set when a write was refused because of the cap.
    pub overflowed: bool,
}

impl CappedWriter {
    /// A writer accepting at most `cap` bytes.
    pub fn new(cap: usize) -> Self {
        CappedWriter {
            buf: Vec::new(),
            cap,
            overflowed: false,
        }
    }
}

impl io::Write for CappedWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.buf.len().saturating_add(data.len()) > self.cap {
            self.overflowed = true;
            return Err(io::Error::other("template output limit exceeded"));
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
