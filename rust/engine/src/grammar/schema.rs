//! JSON schema → GBNF. Supported: `type` (one or a list), `properties` / `required` /
//! `additionalProperties`, `enum` / `const`, `items` / `prefixItems` with `minItems` /
//! `maxItems`, `anyOf` / `oneOf` (as alternatives), `allOf` (merged), local `$ref`s (`#`, `#/...`
//! JSON pointers, recursion allowed), string `minLength` / `maxLength` / `pattern` (see
//! [`super::pattern`]) / `format` (date, time, date-time, uuid), integer `minimum` / `maximum` /
//! `exclusiveMinimum` / `exclusiveMaximum`. Objects list their properties in schema order,
//! required ones first; whitespace between tokens is bounded so generation cannot loop on it.
//! Number bounds and unknown formats are not enforced (as llama.cpp); an invalid or
//! unsupported schema is an [`Error::Grammar`] naming the schema path.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::pattern::{pattern_to_gbnf, Pattern};
use crate::{Error, Result};

/// The shared building blocks, defined once in every generated grammar that uses them.
const PRIMITIVES: &[(&str, &str)] = &[
    ("space", "| \" \" | \"\\n\"{1,2} [ \\t]{0,20}"),
    ("boolean", "(\"true\" | \"false\") space"),
    ("null", "\"null\" space"),
    ("integral-part", "[0] | [1-9] [0-9]{0,15}"),
    ("decimal-part", "[0-9]{1,16}"),
    ("integer", "(\"-\"? integral-part) space"),
    (
        "number",
        "(\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? integral-part)? space",
    ),
    (
        "char",
        "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})",
    ),
    ("string", "\"\\\"\" char* \"\\\"\" space"),
    (
        "value",
        "object | array | string | number | boolean | null",
    ),
    (
        "object",
        "\"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? \"}\" space",
    ),
    ("array", "\"[\" space ( value (\",\" space value)* )? \"]\" space"),
    ("date", "[0-9]{4} \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | [1-2] [0-9] | \"3\" [0-1] )"),
    ("time", "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{3} )? ( \"Z\" | ( \"+\" | \"-\" ) ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )"),
    ("uuid", "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12}"),
];

/// Which primitives each primitive uses.
fn primitive_deps(name: &str) -> &'static [&'static str] {
    match name {
        "boolean" | "null" | "string" => &["space", "char"],
        "integer" => &["integral-part", "space"],
        "number" => &["integral-part", "decimal-part", "space"],
        "value" => &["object", "array", "string", "number", "boolean", "null"],
        "object" => &["space", "string", "value"],
        "array" => &["space", "value"],
        _ => &[],
    }
}

/// Largest `minItems` / `maxItems` / `minLength` / `maxLength` honoured exactly.
const MAX_COUNT: u64 = 1000;
/// Most optional properties one object may declare: the matcher follows each of them as a
/// separate continuation after every comma, and beyond this many it would have to drop some
/// (its per-character budget), so larger schemas are refused up front.
const MAX_OPTIONAL_PROPERTIES: usize = 256;
/// Deepest schema nesting.
const MAX_DEPTH: usize = 64;

/// A grammar for any JSON object (OpenAI's `json_object` response format).
pub fn json_object_gbnf() -> String {
    let mut c = Converter::new(Value::Null);
    c.use_primitive("object");
    c.rules.push(("root".into(), "object".into()));
    c.render()
}

/// Convert the JSON schema `schema` (JSON text) into a GBNF grammar with a `root` rule.
pub fn schema_to_gbnf(schema: &str) -> Result<String> {
    let doc: Value = serde_json::from_str(schema)
        .map_err(|e| Error::Grammar(format!("the JSON schema is not valid JSON: {e}")))?;
    let mut c = Converter::new(doc.clone());
    let root = c.visit(&doc, "root", "#", 0)?;
    c.rules.push(("root".into(), root));
    Ok(c.render())
}

/// Largest magnitude of an integer `minimum` / `maximum` (larger ones would overflow the range
/// arithmetic, and the `integer` rule has at most 16 digits anyway).
const MAX_INTEGER_BOUND: f64 = 1e18;

fn err(path: &str, what: &str) -> Error {
    Error::Grammar(format!("JSON schema at {path}: {what}"))
}

/// A GBNF string literal for `text`.
fn literal(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\x{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `{m,n}` text for a repetition (`n` None: unbounded).
fn reps(min: u64, max: Option<u64>) -> String {
    match max {
        Some(n) if n == min => format!("{{{min}}}"),
        Some(n) => format!("{{{min},{n}}}"),
        None => format!("{{{min},}}"),
    }
}

struct Converter {
    doc: Value,
    rules: Vec<(String, String)>,
    names: HashMap<String, usize>,
    primitives: Vec<&'static str>,
    /// Rule names of `$ref` targets already converted (or being converted).
    refs: HashMap<String, String>,
}

impl Converter {
    fn new(doc: Value) -> Self {
        Converter {
            doc,
            rules: Vec::new(),
            names: HashMap::new(),
            primitives: Vec::new(),
            refs: HashMap::new(),
        }
    }

    fn use_primitive(&mut self, name: &'static str) -> String {
        if !self.primitives.contains(&name) {
            self.primitives.push(name);
            for dep in primitive_deps(name) {
                self.use_primitive(dep);
            }
        }
        name.to_string()
    }

    /// A fresh rule name from `hint` (made of GBNF name characters).
    fn fresh(&mut self, hint: &str) -> String {
        let mut base: String = hint
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        if base.is_empty() || PRIMITIVES.iter().any(|(n, _)| *n == base) || base == "root" {
            base = format!("{base}-r");
        }
        let n = self.names.entry(base.clone()).or_insert(0);
        *n += 1;
        if *n == 1 {
            base
        } else {
            format!("{base}-{n}")
        }
    }

    fn add_rule(&mut self, hint: &str, body: String) -> String {
        let name = self.fresh(hint);
        self.rules.push((name.clone(), body));
        name
    }

    fn render(&self) -> String {
        let mut out = String::new();
        for (name, body) in &self.rules {
            out.push_str(&format!("{name} ::= {body}\n"));
        }
        for (name, body) in PRIMITIVES {
            if self.primitives.contains(name) {
                out.push_str(&format!("{name} ::= {body}\n"));
            }
        }
        out
    }

    /// The GBNF expression for values matching `schema` (found at `path`).
    fn visit(&mut self, schema: &Value, hint: &str, path: &str, depth: usize) -> Result<String> {
        if depth > MAX_DEPTH {
            return Err(err(path, "nested too deeply"));
        }
        let obj = match schema {
            Value::Bool(true) => return Ok(self.use_primitive("value")),
            Value::Bool(false) => return Err(err(path, "the schema 'false' matches nothing")),
            Value::Object(o) => o,
            _ => return Err(err(path, "a schema must be an object or a boolean")),
        };
        if let Some(r) = obj.get("$ref") {
            return self.reference(r, path, depth);
        }
        for key in ["oneOf", "anyOf"] {
            if let Some(list) = obj.get(key) {
                let list = list
                    .as_array()
                    .filter(|l| !l.is_empty())
                    .ok_or_else(|| err(path, &format!("'{key}' must be a non-empty array")))?;
                let mut alts = Vec::new();
                for (i, s) in list.iter().enumerate() {
                    let merged = merge_siblings(obj, s, key);
                    alts.push(self.visit(
                        &merged,
                        &format!("{hint}-{i}"),
                        &format!("{path}/{key}/{i}"),
                        depth + 1,
                    )?);
                }
                return Ok(self.add_rule(hint, alts.join(" | ")));
            }
        }
        if let Some(list) = obj.get("allOf") {
            let merged = self.merge_all_of(obj, list, path)?;
            return self.visit(
                &Value::Object(merged),
                hint,
                &format!("{path}/allOf"),
                depth + 1,
            );
        }
        if let Some(c) = obj.get("const") {
            self.use_primitive("space");
            return Ok(self.add_rule(hint, format!("{} space", literal(&c.to_string()))));
        }
        if let Some(e) = obj.get("enum") {
            let list = e
                .as_array()
                .filter(|l| !l.is_empty())
                .ok_or_else(|| err(path, "'enum' must be a non-empty array"))?;
            self.use_primitive("space");
            let alts: Vec<String> = list.iter().map(|v| literal(&v.to_string())).collect();
            return Ok(self.add_rule(hint, format!("({}) space", alts.join(" | "))));
        }
        match obj.get("type") {
            Some(Value::String(t)) => self.typed(obj, t, hint, path, depth),
            Some(Value::Array(types)) => {
                let mut alts = Vec::new();
                for (i, t) in types.iter().enumerate() {
                    let t = t.as_str().ok_or_else(|| {
                        err(&format!("{path}/type/{i}"), "a type must be a string")
                    })?;
                    alts.push(self.typed(obj, t, &format!("{hint}-{t}"), path, depth)?);
                }
                if alts.is_empty() {
                    return Err(err(path, "'type' is an empty list"));
                }
                Ok(self.add_rule(hint, alts.join(" | ")))
            }
            Some(_) => Err(err(
                &format!("{path}/type"),
                "'type' must be a string or a list of strings",
            )),
            None if obj.contains_key("properties") || obj.contains_key("additionalProperties") => {
                self.typed(obj, "object", hint, path, depth)
            }
            None if obj.contains_key("items") || obj.contains_key("prefixItems") => {
                self.typed(obj, "array", hint, path, depth)
            }
            None if ["minLength", "maxLength", "pattern", "format"]
                .iter()
                .any(|k| obj.contains_key(*k)) =>
            {
                self.typed(obj, "string", hint, path, depth)
            }
            None => Ok(self.use_primitive("value")),
        }
    }

    fn reference(&mut self, r: &Value, path: &str, depth: usize) -> Result<String> {
        let r = r
            .as_str()
            .ok_or_else(|| err(&format!("{path}/$ref"), "'$ref' must be a string"))?;
        if let Some(name) = self.refs.get(r) {
            return Ok(name.clone());
        }
        let Some(pointer) = r.strip_prefix('#') else {
            return Err(err(
                path,
                &format!("unresolved $ref '{r}' (only local '#/...' references are supported)"),
            ));
        };
        let target = self
            .doc
            .pointer(pointer)
            .cloned()
            .ok_or_else(|| err(path, &format!("unresolved $ref '{r}'")))?;
        let hint = r.rsplit('/').next().unwrap_or("ref").to_string();
        let name = self.fresh(&format!("ref-{hint}"));
        self.refs.insert(r.to_string(), name.clone());
        // Reserve the rule's place, then fill it (the target may refer back to it).
        let index = self.rules.len();
        self.rules.push((name.clone(), String::new()));
        let body = self.visit(&target, &format!("{name}-body"), r, depth + 1)?;
        self.rules[index].1 = body;
        Ok(name)
    }

    fn merge_all_of(
        &mut self,
        obj: &Map<String, Value>,
        list: &Value,
        path: &str,
    ) -> Result<Map<String, Value>> {
        let list = list
            .as_array()
            .ok_or_else(|| err(path, "'allOf' must be an array"))?;
        let mut merged: Map<String, Value> = obj.clone();
        merged.remove("allOf");
        for (i, part) in list.iter().enumerate() {
            let mut part = part.clone();
            // Follow references so their properties merge too.
            let mut hops = 0;
            while let Some(r) = part.get("$ref").and_then(Value::as_str) {
                let pointer = r.strip_prefix('#').ok_or_else(|| {
                    err(
                        &format!("{path}/allOf/{i}"),
                        &format!("unresolved $ref '{r}'"),
                    )
                })?;
                part = self.doc.pointer(pointer).cloned().ok_or_else(|| {
                    err(
                        &format!("{path}/allOf/{i}"),
                        &format!("unresolved $ref '{r}'"),
                    )
                })?;
                hops += 1;
                if hops > MAX_DEPTH {
                    return Err(err(path, "$ref cycle in allOf"));
                }
            }
            let Value::Object(p) = part else {
                return Err(err(
                    &format!("{path}/allOf/{i}"),
                    "an allOf member must be an object",
                ));
            };
            for (k, v) in p {
                match (k.as_str(), merged.get_mut(&k)) {
                    ("properties", Some(Value::Object(existing))) => {
                        if let Value::Object(v) = v {
                            existing.extend(v);
                        }
                    }
                    ("required", Some(Value::Array(existing))) => {
                        if let Value::Array(v) = v {
                            existing.extend(v);
                        }
                    }
                    _ => {
                        merged.insert(k, v);
                    }
                }
            }
        }
        Ok(merged)
    }

    fn typed(
        &mut self,
        obj: &Map<String, Value>,
        t: &str,
        hint: &str,
        path: &str,
        depth: usize,
    ) -> Result<String> {
        match t {
            "object" => self.object(obj, hint, path, depth),
            "array" => self.array(obj, hint, path, depth),
            "string" => self.string(obj, hint, path),
            "integer" => self.integer(obj, hint, path),
            "number" => Ok(self.use_primitive("number")),
            "boolean" => Ok(self.use_primitive("boolean")),
            "null" => Ok(self.use_primitive("null")),
            other => Err(err(
                &format!("{path}/type"),
                &format!("unknown type '{other}'"),
            )),
        }
    }

    fn count(obj: &Map<String, Value>, key: &str, path: &str) -> Result<Option<u64>> {
        match obj.get(key) {
            None => Ok(None),
            Some(v) => match v.as_u64().or_else(|| {
                v.as_f64()
                    .filter(|f| *f >= 0.0 && f.fract() == 0.0)
                    .map(|f| f as u64)
            }) {
                Some(n) if n <= MAX_COUNT => Ok(Some(n)),
                Some(n) => Err(err(
                    &format!("{path}/{key}"),
                    &format!("{n} is above the supported limit of {MAX_COUNT}"),
                )),
                None => Err(err(
                    &format!("{path}/{key}"),
                    "must be a non-negative integer",
                )),
            },
        }
    }

    fn bounds(
        obj: &Map<String, Value>,
        min_key: &str,
        max_key: &str,
        path: &str,
    ) -> Result<(u64, Option<u64>)> {
        let min = Self::count(obj, min_key, path)?.unwrap_or(0);
        let max = Self::count(obj, max_key, path)?;
        if let Some(max) = max.filter(|&m| m < min) {
            return Err(err(
                path,
                &format!("{max_key} {max} is below {min_key} {min}"),
            ));
        }
        Ok((min, max))
    }

    fn string(&mut self, obj: &Map<String, Value>, hint: &str, path: &str) -> Result<String> {
        self.use_primitive("space");
        if let Some(p) = obj.get("pattern") {
            let p = p
                .as_str()
                .ok_or_else(|| err(&format!("{path}/pattern"), "'pattern' must be a string"))?;
            match pattern_to_gbnf(p) {
                Ok(Pattern::Gbnf(expr)) => {
                    return Ok(self.add_rule(hint, format!("\"\\\"\" {expr} \"\\\"\" space")));
                }
                Ok(Pattern::Unsupported(why)) => crate::log::warn(&format!(
                    "JSON schema at {path}/pattern: '{p}' is not supported ({why}); any string is accepted"
                )),
                Err(why) => {
                    return Err(err(&format!("{path}/pattern"), &format!("invalid pattern '{p}': {why}")))
                }
            }
        }
        if let Some(format) = obj.get("format").and_then(Value::as_str) {
            let inner = match format {
                "date" => Some(self.use_primitive("date")),
                "time" => Some(self.use_primitive("time")),
                "date-time" => {
                    self.use_primitive("date");
                    self.use_primitive("time");
                    Some("date \"T\" time".to_string())
                }
                "uuid" => Some(self.use_primitive("uuid")),
                _ => None,
            };
            if let Some(inner) = inner {
                return Ok(self.add_rule(hint, format!("\"\\\"\" {inner} \"\\\"\" space")));
            }
        }
        let (min, max) = Self::bounds(obj, "minLength", "maxLength", path)?;
        if min == 0 && max.is_none() {
            return Ok(self.use_primitive("string"));
        }
        self.use_primitive("string");
        Ok(self.add_rule(
            hint,
            format!("\"\\\"\" char{} \"\\\"\" space", reps(min, max)),
        ))
    }

    fn integer(&mut self, obj: &Map<String, Value>, hint: &str, path: &str) -> Result<String> {
        let bound = |key: &str| -> Result<Option<f64>> {
            match obj.get(key) {
                None => Ok(None),
                Some(v) => match v.as_f64() {
                    None => Err(err(&format!("{path}/{key}"), "must be a number")),
                    Some(f) if f.abs() > MAX_INTEGER_BOUND => Err(err(
                        &format!("{path}/{key}"),
                        "integer bounds beyond ±10^18 are not supported",
                    )),
                    Some(f) => Ok(Some(f)),
                },
            }
        };
        let mut lo: Option<i128> = bound("minimum")?.map(|f| f.ceil() as i128);
        let mut hi: Option<i128> = bound("maximum")?.map(|f| f.floor() as i128);
        if let Some(x) = bound("exclusiveMinimum")? {
            let v = x.floor() as i128 + 1;
            lo = Some(lo.map_or(v, |l| l.max(v)));
        }
        if let Some(x) = bound("exclusiveMaximum")? {
            let v = x.ceil() as i128 - 1;
            hi = Some(hi.map_or(v, |h| h.min(v)));
        }
        if lo.is_none() && hi.is_none() {
            return Ok(self.use_primitive("integer"));
        }
        if let (Some(l), Some(h)) = (lo, hi) {
            if l > h {
                return Err(err(path, &format!("no integer lies between {l} and {h}")));
            }
        }
        self.use_primitive("space");
        let expr = super::range::int_range(lo, hi);
        Ok(self.add_rule(hint, format!("({expr}) space")))
    }

    fn array(
        &mut self,
        obj: &Map<String, Value>,
        hint: &str,
        path: &str,
        depth: usize,
    ) -> Result<String> {
        self.use_primitive("space");
        if let Some(prefix) = obj
            .get("prefixItems")
            .or_else(|| obj.get("items").filter(|i| i.is_array()))
        {
            let list = prefix.as_array().cloned().unwrap_or_default();
            let mut parts = Vec::new();
            for (i, s) in list.iter().enumerate() {
                parts.push(self.visit(
                    s,
                    &format!("{hint}-{i}"),
                    &format!("{path}/prefixItems/{i}"),
                    depth + 1,
                )?);
            }
            let body = if parts.is_empty() {
                "\"[\" space \"]\" space".to_string()
            } else {
                format!("\"[\" space {} \"]\" space", parts.join(" \",\" space "))
            };
            return Ok(self.add_rule(hint, body));
        }
        let item = match obj.get("items") {
            Some(s) => self.visit(
                s,
                &format!("{hint}-item"),
                &format!("{path}/items"),
                depth + 1,
            )?,
            None => self.use_primitive("value"),
        };
        let (min, max) = Self::bounds(obj, "minItems", "maxItems", path)?;
        let more = |min: u64, max: Option<u64>| -> String {
            let rest_min = min.saturating_sub(1);
            let rest_max = max.map(|m| m.saturating_sub(1));
            if rest_max == Some(0) {
                item.clone()
            } else {
                format!("{item} (\",\" space {item}){}", reps(rest_min, rest_max))
            }
        };
        let body = match (min, max) {
            (_, Some(0)) => "\"[\" space \"]\" space".to_string(),
            (0, _) => format!("\"[\" space ({})? \"]\" space", more(1, max)),
            _ => format!("\"[\" space {} \"]\" space", more(min, max)),
        };
        Ok(self.add_rule(hint, body))
    }

    fn object(
        &mut self,
        obj: &Map<String, Value>,
        hint: &str,
        path: &str,
        depth: usize,
    ) -> Result<String> {
        self.use_primitive("space");
        let empty = Map::new();
        let props = match obj.get("properties") {
            None => &empty,
            Some(Value::Object(p)) => p,
            Some(_) => {
                return Err(err(
                    &format!("{path}/properties"),
                    "'properties' must be an object",
                ))
            }
        };
        let required: Vec<&str> = match obj.get("required") {
            None => Vec::new(),
            Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
            Some(_) => {
                return Err(err(
                    &format!("{path}/required"),
                    "'required' must be an array",
                ))
            }
        };
        let additional = match obj.get("additionalProperties") {
            None | Some(Value::Bool(false)) => None,
            Some(Value::Bool(true)) => Some(self.use_primitive("value")),
            Some(s) => Some(self.visit(
                s,
                &format!("{hint}-additional"),
                &format!("{path}/additionalProperties"),
                depth + 1,
            )?),
        };
        // A bare `{"type": "object"}` is any object.
        if props.is_empty() && obj.get("additionalProperties").is_none() {
            return Ok(self.use_primitive("object"));
        }
        let mut req = Vec::new();
        let mut opt = Vec::new();
        for (key, sub) in props {
            let value = self.visit(
                sub,
                &format!("{hint}-{key}"),
                &format!("{path}/properties/{key}"),
                depth + 1,
            )?;
            let kv = self.add_rule(
                &format!("{hint}-{key}-kv"),
                format!(
                    "{} space \":\" space {value}",
                    literal(&format!("\"{}\"", json_escape(key)))
                ),
            );
            if required.contains(&key.as_str()) {
                req.push(kv);
            } else {
                opt.push(kv);
            }
        }
        if let Some(value) = &additional {
            let keys: Vec<String> = props.keys().cloned().collect();
            let key = self.key_except(&format!("{hint}-additional-key"), &keys);
            let kv = self.add_rule(
                &format!("{hint}-additional-kv"),
                format!("{key} \":\" space {value}"),
            );
            opt.push(format!("{kv} (\",\" space {kv})*"));
        }
        if opt.len() > MAX_OPTIONAL_PROPERTIES {
            return Err(err(
                path,
                &format!(
                    "{} optional properties are above the supported limit of \
                     {MAX_OPTIONAL_PROPERTIES} per object",
                    opt.len()
                ),
            ));
        }
        let mut body = String::from("\"{\" space ");
        body.push_str(&req.join(" \",\" space "));
        if !opt.is_empty() {
            // `rest[i]`: the optional properties from the i-th on, each optional, in order,
            // as a chain of rules (llama.cpp's `-rest` rules), so the grammar grows linearly
            // with the number of properties (spelled out, it grew quadratically: 10,000
            // optional properties took 5.4 GB).
            let mut rest: Vec<String> = vec![String::new(); opt.len() + 1];
            for i in (0..opt.len()).rev() {
                let mut chain = format!("(\",\" space {})?", opt[i]);
                if !rest[i + 1].is_empty() {
                    chain.push(' ');
                    chain.push_str(&rest[i + 1]);
                }
                rest[i] = if i == 0 {
                    chain
                } else {
                    self.add_rule(&format!("{hint}-rest"), chain)
                };
            }
            if req.is_empty() {
                // Any optional property may come first; the ones after it follow in order.
                let alts: Vec<String> = (0..opt.len())
                    .map(|i| format!("{} {}", opt[i], rest[i + 1]).trim_end().to_string())
                    .collect();
                body.push_str(&format!("({})?", alts.join(" | ")));
            } else {
                body.push(' ');
                body.push_str(&rest[0]);
            }
        }
        body.push_str(" \"}\" space");
        Ok(self.add_rule(hint, body))
    }
}

impl Converter {
    /// A rule for JSON strings other than `keys` (the declared properties, which an additional
    /// property may not repeat): a trie over the keys' characters where leaving the trie frees
    /// the rest of the string, and the closing quote is refused exactly at the end of a key.
    /// (A key spelled with escapes is not recognised as declared.)
    fn key_except(&mut self, hint: &str, keys: &[String]) -> String {
        self.use_primitive("string");
        let words: Vec<Vec<char>> = keys.iter().map(|k| k.chars().collect()).collect();
        let body = self.trie_node(hint, &words, 0);
        self.add_rule(hint, format!("\"\\\"\" {body} space"))
    }

    /// The rest of a key string after a common prefix of length `depth` of `words`.
    fn trie_node(&mut self, hint: &str, words: &[Vec<char>], depth: usize) -> String {
        let mut children: Vec<char> = words.iter().filter_map(|w| w.get(depth).copied()).collect();
        children.sort_unstable();
        children.dedup();
        let terminal = words.iter().any(|w| w.len() == depth);
        let mut excluded = String::from("\"\\\\\\x7F\\x00-\\x1F");
        for c in &children {
            excluded.push_str(&super::pattern::class_char(*c));
        }
        let mut alts = vec![
            format!("[^{excluded}] char* \"\\\"\""),
            "[\\\\] ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) char* \"\\\"\"".to_string(),
        ];
        for c in children {
            let next: Vec<Vec<char>> = words
                .iter()
                .filter(|w| w.get(depth) == Some(&c))
                .cloned()
                .collect();
            let rest = self.trie_node(hint, &next, depth + 1);
            alts.push(format!("{} {rest}", literal(&c.to_string())));
        }
        if !terminal {
            alts.push("\"\\\"\"".to_string());
        }
        self.add_rule(hint, alts.join(" | "))
    }
}

/// `key` escaped as the inside of a JSON string.
fn json_escape(key: &str) -> String {
    let quoted = Value::String(key.to_string()).to_string();
    quoted[1..quoted.len() - 1].to_string()
}

/// A oneOf/anyOf member with the keywords of its parent schema (other than the combinator)
/// that it does not set itself, so `{"type": "object", "anyOf": [...]}` keeps its type.
fn merge_siblings(parent: &Map<String, Value>, member: &Value, key: &str) -> Value {
    let Value::Object(m) = member else {
        return member.clone();
    };
    let mut out = m.clone();
    for (k, v) in parent {
        if k != key && !out.contains_key(k) && k != "$defs" && k != "definitions" {
            out.insert(k.clone(), v.clone());
        }
    }
    Value::Object(out)
}
