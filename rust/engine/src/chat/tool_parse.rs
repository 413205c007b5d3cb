//! Finding tool calls in generated text.
//!
//! Formats recognised (each call must name one of the offered tools):
//! - Hermes / Qwen: one or more `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`
//!   blocks (the closing tag may be missing at the end of the output);
//! - Mistral: `[TOOL_CALLS]` followed by a JSON array (or object) of calls;
//! - Llama 3.x: `{"name": ..., "parameters": {...}}`, optionally after `<|python_tag|>`;
//! - Gemma 4: `<|tool_call>call:NAME{key:value,...}<tool_call|>` ([`super::gemma4_calls`]);
//! - plain JSON: the whole output is a call object `{"name": ..., "arguments": {...}}` or an
//!   array of them (optionally inside a Markdown code fence).
//!
//! `arguments` (or `parameters`) must be a JSON object, or a string holding one; a missing one
//! is `{}`. The content of a response with calls is the text before the first call, as it was
//! streamed (none when it is only whitespace); text after or between calls is dropped. Anything malformed (bad JSON, an
//! unknown tool name, a missing name) means no calls: the whole text is content.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::gemma4_calls;
use super::tools::{Tool, ToolCall, TOOL_CALL_CLOSE, TOOL_CALL_OPEN};

/// Text that starts a call in one of the marked formats.
const MARKERS: [&str; 4] = [
    TOOL_CALL_OPEN,
    "[TOOL_CALLS]",
    "<|python_tag|>",
    gemma4_calls::OPEN,
];

/// The calls found in a response and the text outside them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ParsedResponse {
    /// With calls: the text before the first one (none when it is only whitespace). Without
    /// calls: the whole text.
    pub content: Option<String>,
    /// The calls in order, each with an id no other call of this process has.
    pub calls: Vec<ToolCall>,
}

/// One call from a JSON value `{"name": ..., "arguments"|"parameters": ...}` naming a tool.
fn call_from_value(v: &Value, tools: &[Tool]) -> Option<(String, String)> {
    let o = v.as_object()?;
    let name = o.get("name")?.as_str()?;
    if !tools.iter().any(|t| t.name == name) {
        return None;
    }
    let args = o.get("arguments").or_else(|| o.get("parameters"));
    let arguments = match args {
        None | Some(Value::Null) => "{}".to_string(),
        Some(a @ Value::Object(_)) => a.to_string(),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(_)) => s.clone(),
            _ => return None,
        },
        Some(_) => return None,
    };
    Some((name.to_string(), arguments))
}

/// Calls from a JSON value that is one call object or a non-empty array of them.
fn calls_from_value(v: &Value, tools: &[Tool]) -> Option<Vec<(String, String)>> {
    match v {
        Value::Array(items) if !items.is_empty() => {
            items.iter().map(|i| call_from_value(i, tools)).collect()
        }
        Value::Object(_) => Some(vec![call_from_value(v, tools)?]),
        _ => None,
    }
}

/// Calls from JSON text (surrounding whitespace and a Markdown code fence allowed).
fn calls_from_json(text: &str, tools: &[Tool]) -> Option<Vec<(String, String)>> {
    let mut t = text.trim();
    if let Some(inner) = t.strip_prefix("```") {
        let inner = inner.strip_prefix("json").unwrap_or(inner);
        t = inner.strip_suffix("```")?.trim();
    }
    calls_from_value(&serde_json::from_str(t).ok()?, tools)
}

/// `<tool_call>` blocks from `body` (which starts at the first opening tag).
fn hermes_calls(body: &str, tools: &[Tool]) -> Option<Vec<(String, String)>> {
    let mut calls = Vec::new();
    let mut rest = body;
    while let Some(at) = rest.find(TOOL_CALL_OPEN) {
        let after = &rest[at + TOOL_CALL_OPEN.len()..];
        let (inner, next) = match after.find(TOOL_CALL_CLOSE) {
            Some(end) => (&after[..end], &after[end + TOOL_CALL_CLOSE.len()..]),
            None => (after, ""),
        };
        calls.extend(calls_from_json(inner, tools)?);
        rest = next;
    }
    (!calls.is_empty()).then_some(calls)
}

/// Find tool calls among `tools` in generated `text` (see the module docs for the formats).
pub fn parse_tool_calls(text: &str, tools: &[Tool]) -> ParsedResponse {
    let plain = || ParsedResponse {
        content: Some(text.to_string()),
        calls: Vec::new(),
    };
    if tools.is_empty() {
        return plain();
    }
    let first_marker = MARKERS
        .iter()
        .filter_map(|m| text.find(m).map(|at| (at, *m)))
        .min();
    let (before, found) = match first_marker {
        Some((at, marker)) => {
            let body = &text[at..];
            let calls = if marker == TOOL_CALL_OPEN {
                hermes_calls(body, tools)
            } else if marker == gemma4_calls::OPEN {
                gemma4_calls::parse(body).filter(|calls| {
                    calls
                        .iter()
                        .all(|(name, _)| tools.iter().any(|t| &t.name == name))
                })
            } else {
                calls_from_json(&body[marker.len()..], tools)
            };
            (&text[..at], calls)
        }
        None => ("", calls_from_json(text, tools)),
    };
    match found {
        Some(calls) => ParsedResponse {
            content: (!before.trim().is_empty()).then(|| before.to_string()),
            calls: calls
                .into_iter()
                .map(|(name, arguments)| ToolCall {
                    id: next_call_id(),
                    name,
                    arguments,
                })
                .collect(),
        },
        None => plain(),
    }
}

/// A tool-call id unique in this process, and across runs through a prefix taken from the
/// clock and the process id once: `call_` and 24 hex digits (OpenAI's ids are opaque strings;
/// apps key their UIs by them, so no two calls may share one, in a response or across turns).
fn next_call_id() -> String {
    static PREFIX: OnceLock<u64> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let prefix = *PREFIX.get_or_init(|| {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        nanos ^ (u64::from(std::process::id()) << 40)
    });
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("call_{prefix:016x}{n:08x}")
}

/// Streams content while holding back text that may be a tool call, so call markup never
/// reaches the stream as content: from a call marker on (and a possible marker's beginning at
/// the end of the text so far), and the whole output when it starts with `{`, `[` or a code
/// fence (plain-JSON calls).
#[derive(Debug, Default)]
pub struct ToolCallStream {
    /// Text received and not yet released.
    held: String,
    /// A marker or JSON start was seen: everything from here on is held.
    holding: bool,
    /// Some non-whitespace text was released (plain JSON can then no longer start a call).
    released_text: bool,
}

impl ToolCallStream {
    /// A filter with nothing held.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add generated text; returns the part that is certainly content.
    pub fn push(&mut self, piece: &str) -> String {
        self.held.push_str(piece);
        if self.holding {
            return String::new();
        }
        if !self.released_text {
            let t = self.held.trim_start();
            if t.is_empty() {
                return String::new();
            }
            if t.starts_with('{') || t.starts_with('[') || t.starts_with('`') {
                self.holding = true;
                return String::new();
            }
        }
        if let Some(at) = MARKERS.iter().filter_map(|m| self.held.find(m)).min() {
            self.holding = true;
            if !self.released_text && self.held[..at].trim().is_empty() {
                // Only whitespace before the call: not content (held with the call).
                return String::new();
            }
            return self.release(at);
        }
        // Keep back a tail that could be the beginning of a marker.
        let keep = MARKERS
            .iter()
            .flat_map(|m| (1..m.len()).filter(|&n| self.held.ends_with(&m[..n])))
            .max()
            .unwrap_or(0);
        self.release(self.held.len() - keep)
    }

    /// Release `held[..at]`.
    fn release(&mut self, at: usize) -> String {
        let out: String = self.held.drain(..at).collect();
        if !out.trim().is_empty() {
            self.released_text = true;
        }
        out
    }

    /// The held text, when the output turned out to hold no call.
    pub fn flush(&mut self) -> String {
        self.holding = false;
        std::mem::take(&mut self.held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools() -> Vec<Tool> {
        ["get_weather", "add"]
            .iter()
            .map(|n| Tool {
                name: n.to_string(),
                description: None,
                parameters: None,
            })
            .collect()
    }

    fn calls(text: &str) -> Vec<(String, String)> {
        parse_tool_calls(text, &tools())
            .calls
            .into_iter()
            .map(|c| (c.name, c.arguments))
            .collect()
    }

    fn call(name: &str, args: &str) -> (String, String) {
        (name.to_string(), args.to_string())
    }

    #[test]
    fn hermes_one_and_many() {
        let r = parse_tool_calls(
            "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>",
            &tools(),
        );
        assert_eq!(r.content.as_deref(), Some("Let me check.\n"));
        assert_eq!(r.calls.len(), 1);
        let again = parse_tool_calls(
            "<tool_call>{\"name\":\"add\",\"arguments\":{}}</tool_call>\n<tool_call>{\"name\":\"add\",\"arguments\":{}}</tool_call>",
            &tools(),
        );
        let ids: std::collections::HashSet<&str> = r
            .calls
            .iter()
            .chain(&again.calls)
            .map(|c| c.id.as_str())
            .collect();
        assert_eq!(ids.len(), 3, "ids repeat: {ids:?}");
        assert!(
            ids.iter()
                .all(|id| id.starts_with("call_") && id.len() == 29),
            "{ids:?}"
        );
        assert_eq!(r.calls[0].arguments, r#"{"city":"Paris","days":2}"#);
        let two = "<tool_call>{\"name\":\"add\",\"arguments\":{\"a\":1}}</tool_call>\n<tool_call>{\"name\":\"get_weather\",\"arguments\":{}}";
        assert_eq!(
            calls(two),
            vec![call("add", r#"{"a":1}"#), call("get_weather", "{}")]
        );
        assert_eq!(parse_tool_calls(two, &tools()).content, None);
    }

    #[test]
    fn llama_mistral_and_plain_json() {
        assert_eq!(
            calls("<|python_tag|>{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}"),
            vec![call("add", r#"{"a":1,"b":2}"#)]
        );
        assert_eq!(
            calls("{\"name\": \"add\", \"parameters\": {\"a\": 1}}"),
            vec![call("add", r#"{"a":1}"#)]
        );
        assert_eq!(
            calls("[TOOL_CALLS] [{\"name\": \"add\", \"arguments\": {\"a\": 1}}, {\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Oslo\\\"}\"}]"),
            vec![call("add", r#"{"a":1}"#), call("get_weather", r#"{"city": "Oslo"}"#)]
        );
        assert_eq!(
            calls("```json\n{\"name\": \"add\", \"arguments\": {}}\n```"),
            vec![call("add", "{}")]
        );
    }

    #[test]
    fn malformed_is_content() {
        for text in [
            "<tool_call>{\"name\": \"add\", \"arguments\": {\"a\": </tool_call>",
            "<tool_call>{\"name\": \"nope\", \"arguments\": {}}</tool_call>",
            "<tool_call></tool_call>",
            "<tool_call>",
            "{\"name\": \"add\", \"arguments\": 3}",
            "{\"name\": \"add\", \"arguments\": \"not json\"}",
            "{\"arguments\": {}}",
            "[TOOL_CALLS] []",
            "[TOOL_CALLS]",
            "[1, 2]",
            "{\"answer\": 42}",
            "The answer is 42.",
            "```",
            "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
        ] {
            let r = parse_tool_calls(text, &tools());
            assert!(r.calls.is_empty(), "{text}");
            assert_eq!(r.content.as_deref(), Some(text));
        }
        // Without tools nothing is parsed.
        let t = "<tool_call>{\"name\": \"add\", \"arguments\": {}}</tool_call>";
        assert!(parse_tool_calls(t, &[]).calls.is_empty());
    }

    fn stream(pieces: &[&str]) -> (String, String) {
        let mut s = ToolCallStream::new();
        let out: String = pieces.iter().map(|p| s.push(p)).collect();
        (out, s.flush())
    }

    #[test]
    fn stream_holds_markup() {
        let (out, held) = stream(&[
            "Sure. <to",
            "ol_c",
            "all>{\"name\"",
            ": \"add\"}</tool_call>",
        ]);
        assert_eq!(out, "Sure. ");
        assert_eq!(held, "<tool_call>{\"name\": \"add\"}</tool_call>");
        let (out, held) = stream(&["  {\"na", "me\": 1}"]);
        assert_eq!((out.as_str(), held.as_str()), ("", "  {\"name\": 1}"));
        let (out, held) = stream(&["a < b", " and c <", "d"]);
        assert_eq!(out + &held, "a < b and c <d");
        // A marker's beginning at the end is held until it turns out to be text.
        let mut s = ToolCallStream::new();
        assert_eq!(s.push("x <tool"), "x ");
        assert_eq!(s.push("s>"), "<tools>");
        // Whitespace before a call is not content.
        let (out, held) = stream(&["\n ", "<tool_call>{}"]);
        assert_eq!((out.as_str(), held.as_str()), ("", "\n <tool_call>{}"));
        // After text, a JSON object is content.
        let (out, held) = stream(&["Here: ", "{\"a\": 1}"]);
        assert_eq!((out.as_str(), held.as_str()), ("Here: {\"a\": 1}", ""));
    }
}
