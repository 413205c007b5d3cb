//! Gemma 4's tool calls: `<|tool_call>call:NAME{key:value,...}<tool_call|>`, where a value is a
//! string between `<|"|>` quotes (taken as it is, no escapes), a `{...}` dictionary of bare
//! keys, a `[...]` array, a JSON number, `true`, `false` or `null` (the syntax llama.cpp's
//! Gemma 4 parser reads, `common/parsers/gemma4.cpp`). The arguments become JSON.

use serde_json::{Map, Number, Value};

/// Where a call starts.
pub(super) const OPEN: &str = "<|tool_call>";
/// Its end.
const CLOSE: &str = "<tool_call|>";
/// The call's prefix after [`OPEN`].
const CALL: &str = "call:";
/// A string's quotes.
const QUOTE: &str = "<|\"|>";

/// The calls in `body` (which starts at the first [`OPEN`]), as (name, JSON arguments), if
/// every one is well formed; text between calls is ignored.
pub(super) fn parse(body: &str) -> Option<Vec<(String, String)>> {
    let mut calls = Vec::new();
    let mut rest = body;
    while let Some(at) = rest.find(OPEN) {
        let call = rest[at + OPEN.len()..].strip_prefix(CALL)?;
        let brace = call.find('{')?;
        let name = call[..brace].trim();
        if name.is_empty() {
            return None;
        }
        let mut p = Parser {
            s: &call[brace..],
            depth: 0,
        };
        let args = p.value()?;
        if !args.is_object() {
            return None;
        }
        rest = p.s.strip_prefix(CLOSE)?;
        calls.push((name.to_string(), args.to_string()));
    }
    (!calls.is_empty()).then_some(calls)
}

/// A recursive-descent reader of one value at the start of `s`.
struct Parser<'a> {
    s: &'a str,
    /// Nesting of dictionaries and arrays (bounded: hostile output cannot exhaust the stack).
    depth: usize,
}

/// Deepest nesting read.
const MAX_DEPTH: usize = 64;

impl Parser<'_> {
    fn skip_space(&mut self) {
        self.s = self.s.trim_start();
    }

    fn eat(&mut self, prefix: &str) -> bool {
        match self.s.strip_prefix(prefix) {
            Some(rest) => {
                self.s = rest;
                true
            }
            None => false,
        }
    }

    fn value(&mut self) -> Option<Value> {
        if let Some(rest) = self.s.strip_prefix(QUOTE) {
            let end = rest.find(QUOTE)?;
            self.s = &rest[end + QUOTE.len()..];
            return Some(Value::String(rest[..end].to_string()));
        }
        if self.s.starts_with('{') || self.s.starts_with('[') {
            self.depth += 1;
            if self.depth > MAX_DEPTH {
                return None;
            }
            let v = if self.s.starts_with('{') {
                self.dict()
            } else {
                self.array()
            };
            self.depth -= 1;
            return v;
        }
        for (word, v) in [
            ("true", Value::Bool(true)),
            ("false", Value::Bool(false)),
            ("null", Value::Null),
        ] {
            if self.eat(word) {
                return Some(v);
            }
        }
        let len = self
            .s
            .find(|c: char| !(c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | 'e' | 'E')))
            .unwrap_or(self.s.len());
        let n: Number = serde_json::from_str(&self.s[..len]).ok()?;
        self.s = &self.s[len..];
        Some(Value::Number(n))
    }

    fn dict(&mut self) -> Option<Value> {
        self.eat("{");
        self.skip_space();
        let mut map = Map::new();
        if self.eat("}") {
            return Some(Value::Object(map));
        }
        loop {
            let colon = self.s.find([':', '}'])?;
            if !self.s[colon..].starts_with(':') || colon == 0 {
                return None;
            }
            let key = self.s[..colon].to_string();
            self.s = &self.s[colon + 1..];
            self.skip_space();
            let v = self.value()?;
            map.insert(key, v);
            self.skip_space();
            if self.eat("}") {
                return Some(Value::Object(map));
            }
            if !self.eat(",") {
                return None;
            }
            self.skip_space();
        }
    }

    fn array(&mut self) -> Option<Value> {
        self.eat("[");
        self.skip_space();
        let mut items = Vec::new();
        if self.eat("]") {
            return Some(Value::Array(items));
        }
        loop {
            items.push(self.value()?);
            self.skip_space();
            if self.eat("]") {
                return Some(Value::Array(items));
            }
            if !self.eat(",") {
                return None;
            }
            self.skip_space();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_become_json() {
        let text = "<|tool_call>call:get_weather{city:<|\"|>Paris, \"FR\"<|\"|>,days:3,\
                    units:{metric:true,scale:-1.5e2},tags:[<|\"|>a<|\"|>, null, []]}<tool_call|>\
                    <|tool_call>call:noop{}<tool_call|>";
        let calls = parse(text).unwrap();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].0, "get_weather");
        let args: Value = serde_json::from_str(&calls[0].1).unwrap();
        assert_eq!(
            args,
            serde_json::json!({"city": "Paris, \"FR\"", "days": 3,
                "units": {"metric": true, "scale": -150.0}, "tags": ["a", null, []]})
        );
        assert_eq!(calls[1], ("noop".to_string(), "{}".to_string()));
    }

    #[test]
    fn malformed_calls_are_none() {
        for bad in [
            "<|tool_call>call:f{a:1<tool_call|>",
            "<|tool_call>call:f{a:<|\"|>x}<tool_call|>",
            "<|tool_call>call:{a:1}<tool_call|>",
            "<|tool_call>f{a:1}<tool_call|>",
            "<|tool_call>call:f[1]<tool_call|>",
            "<|tool_call>call:f{a:1}",
            "<|tool_call>call:f{:1}<tool_call|>",
            "<|tool_call>call:f{a:01x}<tool_call|>",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
        let deep = format!(
            "<|tool_call>call:f{{a:{}1{}}}<tool_call|>",
            "[".repeat(100),
            "]".repeat(100)
        );
        assert_eq!(parse(&deep), None);
    }
}
