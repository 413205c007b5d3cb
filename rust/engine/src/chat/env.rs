//! The Hugging Face–compatible Jinja environment and the resource limits that keep a hostile
//! template from hanging or exhausting memory.
//!
//! Limits:
//! - fuel ([`FUEL`] instructions per render) bounds running time, including infinite-ish loops;
//! - a recursion limit ([`RECURSION_LIMIT`]) bounds macro / recursive-loop nesting;
//! - the rendered output may not exceed the cap computed by [`output_cap`];
//! - text-growing filters and Python-style methods (`replace`, `join`, `indent`, `format`,
//!   `tojson`, `.replace()`, `.format()`, ...) are checked before they run (worst-case size of
//!   `replace`, numeric `indent` widths, 8+-digit widths in format strings) and their results
//!   must stay under a cap;
//! - a panic inside the template engine is caught and reported as an error (see `mod.rs`).
//!
//! - everything a template builds or prints is measured by [`super::guard`] against a
//!   per-value cap (string and list growth, nesting), within a time and memory limit.

use super::json::{dumps, JsonStyle};
use super::{guard, pyrepr};
use minijinja::value::{Kwargs, Rest, Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind, State};

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

/// Build an environment with HF's settings (no autoescape, lenient undefined), the
/// `raise_exception` and `strftime_now` globals, HF's `tojson`, Python string methods, and the
/// limits described in the module docs. `cap` bounds text-growing filters. Templates are
/// compiled outside it (see `compile.rs`), with HF's whitespace settings.
pub(crate) fn build_environment(cap: usize) -> Environment<'static> {
    let mut env = Environment::new();
    env.set_fuel(Some(FUEL));
    env.set_recursion_limit(RECURSION_LIMIT);
    env.set_debug(false);
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
    env.set_formatter(python_formatter);
    env.set_unknown_method_callback(move |state, value, method, args| {
        precheck(method, value, args, cap)?;
        let out = minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)?;
        check_len(&out, cap)
    });
    guard::add_checks(&mut env);
    // Python's `str()`, and jinja2's `iterable` test (None is not iterable).
    env.add_filter("string", |value: &Value| guard::python_str(value));
    env.add_test("iterable", |value: &Value| {
        !value.is_none() && value.try_iter().is_ok()
    });
    env.add_function("raise_exception", raise_exception);
    env.add_function("strftime_now", strftime_now);
    env.add_filter(
        "tojson",
        move |value: &Value, indent: Option<Value>, kwargs: Kwargs| {
            tojson(value, indent, kwargs).and_then(|s| check_len(&Value::from(s), cap))
        },
    );
    // Text-growing builtin filters, re-registered with argument and result-size checks.
    let growing = [
        ("replace", Value::from_function(minijinja::filters::replace)),
        ("join", Value::from_function(minijinja::filters::join)),
        ("indent", Value::from_function(minijinja::filters::indent)),
        ("format", Value::from_function(minijinja::filters::format)),
    ];
    for (name, filter) in growing {
        env.add_filter(name, move |state: &State, args: Rest<Value>| {
            if let Some((value, rest)) = args.split_first() {
                precheck(name, value, rest, cap)?;
            }
            check_len(&filter.call(state, &args)?, cap)
        });
    }
    env
}

fn too_large(what: &str, cap: usize) -> Error {
    Error::new(
        ErrorKind::InvalidOperation,
        format!("{what} would exceed the template size limit of {cap} bytes"),
    )
}

/// Refuse calls whose result would be too large before they allocate it: `replace` (filter or
/// method) by its worst-case growth; `indent` by a numeric width over the cap; `format` by a
/// width/precision in the format string of 8 or more digits (10^7 bytes and up).
fn precheck(name: &str, value: &Value, args: &[Value], cap: usize) -> Result<(), Error> {
    let text_len = |v: &Value| v.as_str().map_or(0, str::len);
    match name {
        "replace" => {
            let len = text_len(value);
            let from = args.first().map_or(0, text_len);
            let to = args.get(1).map_or(0, text_len);
            let worst = (len / from.max(1) + 1)
                .saturating_mul(to)
                .saturating_add(len);
            if worst > cap {
                return Err(too_large("replace", cap));
            }
        }
        "indent" => {
            let huge = |v: &Value| v.as_i64().is_some_and(|n| n as u64 > cap as u64);
            let kw_huge = |v: &Value| {
                v.kind() == ValueKind::Map
                    && v.try_iter()
                        .into_iter()
                        .flatten()
                        .any(|k| v.get_item(&k).is_ok_and(|x| huge(&x)))
            };
            if args.iter().any(|a| huge(a) || kw_huge(a)) {
                return Err(too_large("indent", cap));
            }
        }
        "format" => {
            let spec = value.as_str().unwrap_or_default();
            let mut run = 0;
            for b in spec.bytes() {
                run = if b.is_ascii_digit() { run + 1 } else { 0 };
                if run >= 8 {
                    return Err(too_large("format width", cap));
                }
            }
        }
        _ => {}
    }
    Ok(())
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

/// Writes into a render's output (or capture), checking the render's limits on every piece.
struct Metered<'a, 'b>(&'a mut minijinja::Output<'b>);

impl std::fmt::Write for Metered<'_, '_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        guard::check().map_err(|_| std::fmt::Error)?;
        self.0.write_str(s)
    }
}

/// Print values the way Python's `str()` does (see [`pyrepr`]).
/// All output, raw template text included, passes through here (see [`super::guard`]).
fn python_formatter(
    out: &mut minijinja::Output,
    _state: &State,
    value: &Value,
) -> Result<(), Error> {
    pyrepr::write_str(&mut Metered(out), value)
        .map_err(|_| Error::new(ErrorKind::WriteFailure, "failed to write template output"))
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

/// HF's `tojson(value, indent=None, separators=None, sort_keys=False, ensure_ascii=False)`.
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
    if let Some(ascii) = kwargs.get::<Option<bool>>("ensure_ascii")? {
        style.ascii = ascii;
    }
    kwargs.assert_all_used()?;
    dumps(value, &style)
}
