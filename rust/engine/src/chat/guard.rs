//! The allocation guard of a template render: every value a template builds is measured
//! before it is built, against a per-value cap, within a per-render time and memory limit.
//!
//! minijinja bounds instructions (fuel) and recursion, but not the size of what its operators
//! build: `ns.l + ns.l` and `ns.s ~ ns.s` double a value per instruction, `[x] * n` and
//! `l | batch(n, 0)` allocate `n` items in one step, and printing a list nested inside itself
//! many times over (`[l, l]` forty levels deep) writes 2^40 items. So the compiled template is
//! rewritten ([`guard_instructions`]) so that every operation that can grow a value passes
//! through a check first:
//! - `+` and `*` check the result's length (string bytes, sequence items) before the operator
//!   runs; `~` is done here, written through a capped buffer;
//! - comparisons, `in` and filters measure container operands (bytes as printed, items visited,
//!   nesting depth) before they run, and raw template text is emitted through the formatter;
//! - list, map and keyword-argument literals check their nesting depth; a namespace can hold no
//!   namespace (so no value can contain itself).
//!
//! A render also has a time limit and a memory limit ([`limits_for`]): the bytes it holds,
//! counted exactly by the engine's allocator ([`crate::alloc_meter`]), looked at in every check
//! and every printed piece. Both end the render with a typed error. The size measure of a value
//! is conservative: its strings' bytes plus 4 per item.

use super::pyrepr;
use crate::alloc_meter;
use minijinja::machinery::{Instruction, Instructions};
use minijinja::value::{Value, ValueKind};
use minijinja::{Error, ErrorKind};
use std::cell::RefCell;
use std::time::{Duration, Instant};

/// Most items one sequence may have (after `+`, `*`, `batch`, `slice`).
const MAX_ITEMS: usize = 1 << 20;
/// Deepest nesting of lists, maps and namespaces a template may build.
const MAX_DEPTH: usize = 48;
/// Longest a render of an empty input may run; see [`limits_for`]. Real templates take
/// milliseconds, even for long chats.
const BASE_TIME: Duration = Duration::from_secs(2);
/// Time a render may take per byte of input beyond [`BASE_TIME`] (100 KB/s: a template that
/// rebuilds the whole prompt per message copies it once per message).
const TIME_PER_INPUT_BYTE: Duration = Duration::from_micros(10);
/// Memory a render may hold when its input is empty; see [`limits_for`].
const BASE_MEMORY: usize = 256 << 20;
/// Items measured between two looks at the clock.
const VISITS_PER_CHECK: usize = 1024;

/// Name of the global the rewritten `+` calls first; not an identifier, so a template cannot
/// shadow it. Likewise for the other checks.
const ADD: &str = "local-llm:add";
const MUL: &str = "local-llm:mul";
const COMPARE: &str = "local-llm:compare";
const CONCAT: &str = "local-llm:concat";
const NESTED: &str = "local-llm:nested";
const SET_ATTR: &str = "local-llm:set-attr";
const FILTER: &str = "local-llm:filter";

/// Filters that neither print, compare nor deep-copy their arguments: no measuring needed.
const SHALLOW_FILTERS: [&str; 12] = [
    "length", "count", "first", "last", "default", "d", "list", "items", "reverse", "attr", "bool",
    "safe",
];

/// The limits of a render whose messages and tools hold `input_bytes` bytes: the memory it
/// may hold and the time it may take.
pub(crate) fn limits_for(input_bytes: usize) -> (usize, Duration) {
    let bytes = u32::try_from(input_bytes).unwrap_or(u32::MAX);
    (
        BASE_MEMORY.saturating_add(input_bytes.saturating_mul(16)),
        BASE_TIME.saturating_add(TIME_PER_INPUT_BYTE.saturating_mul(bytes)),
    )
}

/// The state of the render running on this thread.
struct Meter {
    start: Instant,
    time_limit: Duration,
    /// This thread's net allocated bytes when the render began.
    memory_base: isize,
    memory_limit: usize,
    /// Cap on one string's bytes.
    value_cap: usize,
    /// Namespaces created by this render (see [`track_namespace`]).
    namespaces: Vec<Value>,
    /// Why the render was stopped, when a limit was hit.
    exceeded: Option<String>,
}

thread_local! {
    static METER: RefCell<Option<Meter>> = const { RefCell::new(None) };
}

/// Restores the thread's previous meter when a render ends, even by unwinding.
struct Installed(Option<Meter>);

impl Drop for Installed {
    fn drop(&mut self) {
        let previous = self.0.take();
        METER.with(|m| *m.borrow_mut() = previous);
    }
}

/// Run `render` with its memory (net bytes allocated on this thread) limited to
/// `memory_limit`, its time to `time_limit` and strings capped at `value_cap` bytes.
/// Returns its result and, when a limit stopped it, which one.
pub(crate) fn metered<R>(
    (memory_limit, time_limit): (usize, Duration),
    value_cap: usize,
    render: impl FnOnce() -> R,
) -> (R, Option<String>) {
    alloc_meter::metered(|| {
        let meter = Meter {
            start: Instant::now(),
            time_limit,
            memory_base: alloc_meter::net_bytes(),
            memory_limit,
            value_cap,
            namespaces: Vec::new(),
            exceeded: None,
        };
        let installed = Installed(METER.with(|m| m.borrow_mut().replace(meter)));
        let out = render();
        let exceeded = METER.with(|m| m.borrow_mut().as_mut().and_then(|m| m.exceeded.take()));
        drop(installed);
        (out, exceeded)
    })
}

fn with_meter<R>(f: impl FnOnce(&mut Meter) -> Result<R, Error>) -> Result<R, Error> {
    METER.with(|m| match m.borrow_mut().as_mut() {
        Some(meter) => f(meter),
        None => Err(Error::new(
            ErrorKind::InvalidOperation,
            "template functions run only inside a render",
        )),
    })
}

/// Fail once the render has run longer or holds more memory than its limits.
pub(crate) fn check() -> Result<(), Error> {
    with_meter(|m| {
        let held = alloc_meter::net_bytes().saturating_sub(m.memory_base);
        let why = if m.start.elapsed() > m.time_limit {
            format!(
                "the template ran longer than {:.1} s",
                m.time_limit.as_secs_f64()
            )
        } else if usize::try_from(held).is_ok_and(|held| held > m.memory_limit) {
            format!(
                "the template held more than {} MiB of memory",
                m.memory_limit >> 20
            )
        } else {
            return Ok(());
        };
        m.exceeded = Some(why.clone());
        Err(Error::new(ErrorKind::InvalidOperation, why))
    })
}

fn value_cap() -> Result<usize, Error> {
    with_meter(|m| Ok(m.value_cap))
}

fn invalid(message: String) -> Error {
    Error::new(ErrorKind::InvalidOperation, message)
}

/// Remember a namespace created by this render (the `namespace()` global calls this).
pub(crate) fn track_namespace(value: &Value) -> Result<(), Error> {
    with_meter(|m| {
        m.namespaces.push(value.clone());
        Ok(())
    })
}

fn is_namespace(value: &Value) -> Result<bool, Error> {
    if value.as_object().is_none() {
        return Ok(false);
    }
    with_meter(|m| {
        Ok(m.namespaces
            .iter()
            .any(|ns| minijinja::tests::is_sameas(ns, value)))
    })
}

/// Whether `value` holds items [`measure`] walks: sequences, maps and sized iterables.
fn is_container(value: &Value) -> bool {
    matches!(value.kind(), ValueKind::Seq | ValueKind::Map)
        || (value.kind() == ValueKind::Iterable && value.len().is_some())
}

/// Measure `value` (an iterative walk, looking at the clock as it goes) and check it against
/// the per-value cap (its strings' bytes plus 4 per item, an upper bound of what it prints
/// as) and [`MAX_DEPTH`]. With `no_namespaces`, a namespace inside is an error.
fn measure(value: &Value, no_namespaces: bool) -> Result<(), Error> {
    let cap = value_cap()?;
    if !is_container(value) {
        // Scalars and strings (most comparisons): nothing to walk.
        if value.as_str().map_or(4, |s| s.len() + 4) > cap {
            return Err(invalid(format!(
                "a template value would exceed the size limit of {cap} bytes"
            )));
        }
        return check();
    }
    let mut bytes = 0usize;
    let mut todo = vec![(value.clone(), 0usize)];
    let mut until_check = VISITS_PER_CHECK;
    while let Some((v, depth)) = todo.pop() {
        until_check -= 1;
        if until_check == 0 {
            check()?;
            until_check = VISITS_PER_CHECK;
        }
        if depth > MAX_DEPTH {
            return Err(invalid(format!(
                "template values nest deeper than {MAX_DEPTH} levels"
            )));
        }
        bytes = bytes.saturating_add(v.as_str().map_or(4, |s| s.len() + 4));
        if bytes > cap {
            return Err(invalid(format!(
                "a template value would exceed the size limit of {cap} bytes"
            )));
        }
        if !is_container(&v) {
            continue;
        }
        if no_namespaces && depth > 0 && is_namespace(&v)? {
            return Err(invalid(
                "a namespace cannot be stored inside a namespace".to_string(),
            ));
        }
        let is_map = v.kind() == ValueKind::Map;
        for item in v.try_iter()? {
            if is_map {
                let inner = v.get_item(&item).unwrap_or_default();
                todo.push((inner, depth + 1));
            }
            todo.push((item, depth + 1));
        }
    }
    check()
}

/// The operands of a checked binary operator, put back in the order `UnpackList` restores.
fn operands(a: &Value, b: &Value) -> Value {
    Value::from(vec![b.clone(), a.clone()])
}

fn seq_len(v: &Value) -> Option<usize> {
    matches!(v.kind(), ValueKind::Seq | ValueKind::Iterable)
        .then(|| v.len())
        .flatten()
}

fn check_items(n: usize) -> Result<(), Error> {
    if n > MAX_ITEMS {
        return Err(invalid(format!(
            "a template sequence would exceed {MAX_ITEMS} items"
        )));
    }
    check()
}

fn check_bytes(n: usize) -> Result<(), Error> {
    let cap = value_cap()?;
    if n > cap {
        return Err(invalid(format!(
            "a template string would exceed the size limit of {cap} bytes"
        )));
    }
    check()
}

/// Before `a + b`: the concatenated sequence's items or string's bytes.
fn add(a: Value, b: Value) -> Result<Value, Error> {
    if let (Some(x), Some(y)) = (seq_len(&a), seq_len(&b)) {
        check_items(x.saturating_add(y))?;
    } else if let (Some(x), Some(y)) = (a.as_str(), b.as_str()) {
        check_bytes(x.len().saturating_add(y.len()))?;
    }
    Ok(operands(&a, &b))
}

/// Before `a * b`: a repeated string's bytes or sequence's items.
fn mul(a: Value, b: Value) -> Result<Value, Error> {
    for (x, n) in [(&a, &b), (&b, &a)] {
        let Some(times) = n.as_usize() else {
            continue;
        };
        if let Some(s) = x.as_str() {
            check_bytes(s.len().saturating_mul(times))?;
        } else if let Some(len) = seq_len(x) {
            check_items(len.saturating_mul(times))?;
        }
    }
    Ok(operands(&a, &b))
}

/// Before a comparison or `in`: both operands measured.
fn compare(a: Value, b: Value) -> Result<Value, Error> {
    measure(&a, false)?;
    measure(&b, false)?;
    Ok(operands(&a, &b))
}

/// A `fmt::Write` into a string that refuses to grow past `cap` bytes.
struct Capped {
    text: String,
    cap: usize,
}

impl std::fmt::Write for Capped {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if self.text.len().saturating_add(s.len()) > self.cap {
            return Err(std::fmt::Error);
        }
        self.text.push_str(s);
        Ok(())
    }
}

/// Python's `str()` of each value, concatenated into a buffer capped at the per-value cap.
fn python_strs(values: &[&Value]) -> Result<Value, Error> {
    check()?;
    let cap = value_cap()?;
    let mut out = Capped {
        text: String::new(),
        cap,
    };
    for value in values {
        pyrepr::write_str(&mut out, value).map_err(|_| {
            invalid(format!(
                "a template string would exceed the size limit of {cap} bytes"
            ))
        })?;
    }
    check()?;
    Ok(Value::from(out.text))
}

/// The `string` filter: Python's `str(value)`, bounded.
pub(crate) fn python_str(value: &Value) -> Result<Value, Error> {
    if value.is_safe() || value.kind() == ValueKind::String {
        return Ok(value.clone());
    }
    python_strs(&[value])
}

/// `a ~ b`: Python's `str()` of both, bounded.
fn concat(a: Value, b: Value) -> Result<Value, Error> {
    python_strs(&[&a, &b])
}

/// After a list, map or keyword-argument literal: its nesting depth.
fn nested(value: Value) -> Result<Value, Error> {
    measure(&value, false)?;
    Ok(value)
}

/// Before `{% set ns.attr = value %}`: the value measured; it must hold no namespace.
fn set_attr(value: Value, target: Value) -> Result<Value, Error> {
    if is_namespace(&value)? {
        return Err(invalid(
            "a namespace cannot be stored inside a namespace".to_string(),
        ));
    }
    measure(&value, true)?;
    Ok(operands(&value, &target))
}

/// Before a filter: its container arguments measured, and counts that allocate items
/// (`batch`, `slice`) bounded. `call` lists the filter's arguments, then its name.
fn filter(call: Value) -> Result<Value, Error> {
    let call: Vec<Value> = call.try_iter()?.collect();
    let Some((name, args)) = call.split_last() else {
        return Ok(Value::from(Vec::<Value>::new()));
    };
    let name = name.as_str().unwrap_or_default();
    if matches!(name, "batch" | "slice") {
        if let Some(n) = args.get(1).and_then(Value::as_usize) {
            check_items(n)?;
        }
    }
    let shallow = SHALLOW_FILTERS.contains(&name);
    for arg in args {
        if seq_len(arg).is_some_and(|n| n > MAX_ITEMS) {
            check_items(seq_len(arg).unwrap_or(0))?;
        }
        if !shallow && arg.as_str().is_none() {
            measure(arg, false)?;
        }
    }
    Ok(Value::from(args.iter().rev().cloned().collect::<Vec<_>>()))
}

/// Register the checks the rewritten instructions call.
pub(crate) fn add_checks(env: &mut minijinja::Environment<'static>) {
    env.add_function(ADD, add);
    env.add_function(MUL, mul);
    env.add_function(COMPARE, compare);
    env.add_function(CONCAT, concat);
    env.add_function(NESTED, nested);
    env.add_function(SET_ATTR, set_attr);
    env.add_function(FILTER, filter);
    env.add_function("namespace", |defaults: Option<Value>| {
        let ns = minijinja::functions::namespace(defaults)?;
        track_namespace(&ns)?;
        Ok(ns)
    });
    // `debug()` prints the whole render state unbounded (and is not part of Jinja).
    env.remove_global("debug");
}

/// The instructions that replace `instr`: a check before (or after) it where it can grow a
/// value, raw text emitted through the formatter; `instr` itself otherwise.
fn expand<'s>(instr: &Instruction<'s>) -> Vec<Instruction<'s>> {
    use Instruction as I;
    let before = |check: &'static str, op: Instruction<'s>| {
        vec![I::CallFunction(check, Some(2)), I::UnpackList(2), op]
    };
    match instr {
        I::EmitRaw(text) => vec![I::LoadConst(Value::from(*text)), I::Emit],
        I::Add => before(ADD, I::Add),
        I::Mul => before(MUL, I::Mul),
        I::Eq | I::Ne | I::Gt | I::Gte | I::Lt | I::Lte | I::In | I::CompareAndPreserve(_) => {
            before(COMPARE, instr.clone())
        }
        I::SetAttr(_) => before(SET_ATTR, instr.clone()),
        I::StringConcat => vec![I::CallFunction(CONCAT, Some(2))],
        I::BuildList(_) | I::BuildMap(_) | I::BuildKwargs(_) => {
            vec![instr.clone(), I::CallFunction(NESTED, Some(1))]
        }
        I::ApplyFilter(name, Some(n), _) => {
            let n = usize::from(*n);
            // The name goes last: the check gets [value, args..., name].
            vec![
                I::LoadConst(Value::from(*name)),
                I::BuildList(Some(n + 1)),
                I::CallFunction(FILTER, Some(1)),
                I::UnpackList(n),
                instr.clone(),
            ]
        }
        _ => vec![instr.clone()],
    }
}

/// Point a jump at the new position of its old target.
fn retarget(instr: &mut Instruction<'_>, start: &[u32]) {
    use Instruction as I;
    let target = match instr {
        I::Jump(t)
        | I::JumpIfFalse(t)
        | I::JumpIfFalseOrPop(t)
        | I::JumpIfTrueOrPop(t)
        | I::Iterate(t)
        | I::BuildMacro(_, t, _) => t,
        _ => return,
    };
    *target = start[*target as usize];
}

/// `instructions` with every value-growing operation checked (see the module docs). Jump
/// targets and macro offsets move with the instructions; source locations are kept.
pub(crate) fn guard_instructions<'s>(instructions: &Instructions<'s>) -> Instructions<'s> {
    let len = instructions.len() as u32;
    let expanded: Vec<Vec<Instruction<'s>>> = (0..len)
        .filter_map(|i| instructions.get(i).map(expand))
        .collect();
    let mut start = Vec::with_capacity(expanded.len() + 1);
    let mut position = 0u32;
    for group in &expanded {
        start.push(position);
        position += group.len() as u32;
    }
    start.push(position);
    let mut guarded = Instructions::new(instructions.name(), instructions.source());
    for (i, group) in expanded.into_iter().enumerate() {
        for mut instr in group {
            // Inserted checks are never jumps; an original jump moves with its target.
            retarget(&mut instr, &start);
            match instructions.get_span(i as u32) {
                Some(span) => guarded.add_with_span(instr, span),
                None => match instructions.get_line(i as u32) {
                    Some(line) => {
                        guarded.add_with_line(instr, u16::try_from(line).unwrap_or(u16::MAX))
                    }
                    None => guarded.add(instr),
                },
            };
        }
    }
    guarded
}
