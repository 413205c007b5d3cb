//! Tool (function) calling: tool definitions, calls, `tool_choice`, the template values Hugging
//! Face templates expect, the fallback prompt for templates without tool support, and the JSON
//! schema of a valid call (for grammar-constrained decoding).
//!
//! Parsing calls out of generated text is in the `tool_parse` module.

use serde_json::{json, Map, Value};

use super::ChatMessage;
use crate::grammar::GrammarRequest;

/// A function the model may call (OpenAI's `tools[].function`).
#[derive(Clone, Debug, PartialEq)]
pub struct Tool {
    /// The function's name.
    pub name: String,
    /// What the function does.
    pub description: Option<String>,
    /// JSON Schema of the arguments object, as JSON text (none: any object).
    pub parameters: Option<String>,
}

/// One call of a tool (an entry of OpenAI's `message.tool_calls`).
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    /// The call's id (tool results refer to it with `tool_call_id`).
    pub id: String,
    /// The called function's name.
    pub name: String,
    /// The arguments as JSON text.
    pub arguments: String,
}

/// Which tools the model may or must call (OpenAI's `tool_choice`).
#[derive(Clone, Debug, Default, PartialEq)]
pub enum ToolChoice {
    /// Tools are not offered to the model and its output is not parsed for calls.
    None,
    /// The model may answer with text or call tools.
    #[default]
    Auto,
    /// The model must call at least one tool; output without a call is an error.
    Required,
    /// The model must call this function (only it is offered).
    Function {
        /// The function's name.
        name: String,
    },
}

/// The text that opens a call in the `<tool_call>` format (Hermes/Qwen and the fallback
/// prompt): the trigger for grammar-constrained decoding under `tool_choice` "auto".
pub const TOOL_CALL_OPEN: &str = "<tool_call>";
/// The text that closes a call in the `<tool_call>` format.
pub const TOOL_CALL_CLOSE: &str = "</tool_call>";

/// Maximum number of tools in one request.
const MAX_TOOLS: usize = 1024;

fn invalid(msg: String) -> crate::Error {
    crate::Error::InvalidOption(msg)
}

/// Parse JSON text supplied by the caller (`what` names it in errors).
fn parse_json(text: &str, what: &str) -> crate::Result<Value> {
    serde_json::from_str(text).map_err(|e| invalid(format!("{what} is not valid JSON: {e}")))
}

impl Tool {
    /// The parameters schema as a JSON value (an empty object schema when absent).
    fn parameters_value(&self) -> crate::Result<Value> {
        match &self.parameters {
            None => Ok(json!({"type": "object", "properties": {}})),
            Some(text) => {
                let v = parse_json(text, &format!("the parameters of tool {:?}", self.name))?;
                if !v.is_object() {
                    return Err(invalid(format!(
                        "the parameters of tool {:?} must be a JSON Schema object",
                        self.name
                    )));
                }
                Ok(v)
            }
        }
    }

    /// The tool as OpenAI writes it: `{type: "function", function: {name, description,
    /// parameters}}` (description omitted when absent).
    fn value(&self) -> crate::Result<Value> {
        let mut function = Map::new();
        function.insert("name".into(), Value::from(self.name.clone()));
        if let Some(d) = &self.description {
            function.insert("description".into(), Value::from(d.clone()));
        }
        function.insert("parameters".into(), self.parameters_value()?);
        Ok(json!({"type": "function", "function": function}))
    }
}

/// Check a request's tools and choice: names non-empty and unique, parameters a JSON object,
/// a named choice naming one of the tools, `required`/named only with tools.
pub fn validate_tools(tools: &[Tool], choice: &ToolChoice) -> crate::Result<()> {
    if tools.len() > MAX_TOOLS {
        return Err(invalid(format!("at most {MAX_TOOLS} tools are allowed")));
    }
    for (i, tool) in tools.iter().enumerate() {
        if tool.name.is_empty() {
            return Err(invalid("a tool's name must not be empty".into()));
        }
        if tools[..i].iter().any(|t| t.name == tool.name) {
            return Err(invalid(format!("tool {:?} is defined twice", tool.name)));
        }
        tool.parameters_value()?;
    }
    match choice {
        ToolChoice::Required if tools.is_empty() => Err(invalid(
            "tool_choice \"required\" needs at least one tool".into(),
        )),
        ToolChoice::Function { name } if !tools.iter().any(|t| &t.name == name) => Err(invalid(
            format!("tool_choice names {name:?}, which is not among the tools"),
        )),
        _ => Ok(()),
    }
}

/// The tools a choice offers to the model: none for `None`, the named one for `Function`,
/// all otherwise.
pub fn offered_tools<'a>(tools: &'a [Tool], choice: &ToolChoice) -> &'a [Tool] {
    match choice {
        ToolChoice::None => &[],
        ToolChoice::Function { name } => match tools.iter().position(|t| &t.name == name) {
            Some(i) => &tools[i..=i],
            None => &[],
        },
        ToolChoice::Auto | ToolChoice::Required => tools,
    }
}

/// The tool list as template values (`tools` in Hugging Face templates).
pub(crate) fn tools_value(tools: &[Tool]) -> crate::Result<Vec<Value>> {
    tools.iter().map(Tool::value).collect()
}

/// A call's arguments as a template value: the parsed object when the text is a JSON object
/// (templates write `arguments | tojson`), the text itself otherwise.
fn arguments_value(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => Value::from(arguments),
    }
}

/// A message as a template value in the shape Hugging Face templates expect: `role`,
/// `content` (none for an assistant message with tool calls and no text), and when present
/// `tool_calls` (`[{id, type: "function", function: {name, arguments}}]`), `tool_call_id`
/// and `name`.
pub(crate) fn message_value(m: &ChatMessage) -> Value {
    let mut o = Map::new();
    o.insert("role".into(), Value::from(m.role.clone()));
    let content = if m.content.is_empty() && !m.tool_calls.is_empty() {
        Value::Null
    } else {
        Value::from(m.content.clone())
    };
    o.insert("content".into(), content);
    if !m.tool_calls.is_empty() {
        let calls = m
            .tool_calls
            .iter()
            .map(|c| {
                json!({
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": arguments_value(&c.arguments)},
                })
            })
            .collect();
        o.insert("tool_calls".into(), Value::Array(calls));
    }
    if let Some(id) = &m.tool_call_id {
        o.insert("tool_call_id".into(), Value::from(id.clone()));
    }
    if let Some(name) = &m.name {
        o.insert("name".into(), Value::from(name.clone()));
    }
    Value::Object(o)
}

/// Every string of a request that a tool-aware template may write as template text: tool
/// names, descriptions and the keys and strings of parameter schemas; call ids, names and
/// arguments; `tool_call_id` and `name` of messages. [`super::ChatTemplate::tokens_with_tools`]
/// refuses them when they hold special-token text.
pub(crate) fn template_strings(messages: &[ChatMessage], tools: &[Tool]) -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) => out.push(s.clone()),
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            Value::Object(o) => o.iter().for_each(|(k, x)| {
                out.push(k.clone());
                walk(x, out);
            }),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for t in tools {
        if let Ok(v) = t.value() {
            walk(&v, &mut out);
        }
    }
    for m in messages {
        for c in &m.tool_calls {
            out.extend([c.id.clone(), c.name.clone(), c.arguments.clone()]);
        }
        out.extend(m.tool_call_id.iter().cloned());
        out.extend(m.name.iter().cloned());
    }
    out
}

/// Whether a template handles tools itself: its source mentions `tools`.
pub(crate) fn template_supports_tools(source: &str) -> bool {
    source.contains("tools")
}

/// A call as the fallback format writes it: `<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>`.
fn fallback_call_text(call: &ToolCall) -> String {
    let body = json!({"name": call.name, "arguments": arguments_value(&call.arguments)});
    format!("{TOOL_CALL_OPEN}\n{body}\n{TOOL_CALL_CLOSE}")
}

/// The system-prompt preamble of the fallback (see docs/react-native.md, "Tools").
fn fallback_preamble(tools: &[Tool], choice: &ToolChoice) -> crate::Result<String> {
    let mut text = String::from(
        "You can call the following tools. To call a tool, reply with\n\
         <tool_call>\n{\"name\": \"<tool name>\", \"arguments\": {<arguments as JSON>}}\n</tool_call>\n\
         (one block per call) and nothing else. Tool results come back in <tool_response> \
         blocks.\n\nTools:",
    );
    for v in tools_value(tools)? {
        text.push('\n');
        text.push_str(&v.to_string());
    }
    match choice {
        ToolChoice::Required => text.push_str("\n\nYou must call at least one tool."),
        ToolChoice::Function { name } => {
            text.push_str(&format!("\n\nYou must call the tool {name:?}."));
        }
        ToolChoice::None | ToolChoice::Auto => {}
    }
    Ok(text)
}

/// Rewrite a conversation for a template without tool support: the tool preamble is appended
/// to the system message (a system message is inserted when there is none); an assistant
/// message's calls are appended to its text in the `<tool_call>` format; tool results become
/// user messages `<tool_response>\n{content}\n</tool_response>` (consecutive results are
/// joined with a newline into one message). Everything rewritten is message content, so it is
/// tokenized as plain text.
pub(crate) fn fallback_messages(
    messages: &[ChatMessage],
    tools: &[Tool],
    choice: &ToolChoice,
) -> crate::Result<Vec<ChatMessage>> {
    let mut out: Vec<ChatMessage> = Vec::with_capacity(messages.len() + 1);
    let mut last_was_tool = false;
    for m in messages {
        if m.role == "tool" {
            let text = format!("<tool_response>\n{}\n</tool_response>", m.content);
            match out.last_mut() {
                Some(prev) if last_was_tool => {
                    prev.content.push('\n');
                    prev.content.push_str(&text);
                }
                _ => out.push(ChatMessage::new("user", text)),
            }
            last_was_tool = true;
            continue;
        }
        last_was_tool = false;
        let mut content = m.content.clone();
        for call in &m.tool_calls {
            if !content.is_empty() {
                content.push('\n');
            }
            content.push_str(&fallback_call_text(call));
        }
        let mut rewritten = ChatMessage::new(m.role.clone(), content);
        rewritten.name = m.name.clone();
        out.push(rewritten);
    }
    if !tools.is_empty() {
        let preamble = fallback_preamble(tools, choice)?;
        match out.first_mut() {
            Some(first) if first.role == "system" => {
                if !first.content.is_empty() {
                    first.content.push_str("\n\n");
                }
                first.content.push_str(&preamble);
            }
            _ => out.insert(0, ChatMessage::new("system", preamble)),
        }
    }
    Ok(out)
}

/// The JSON Schema (as JSON text) of one valid call under `choice`, for grammar-constrained
/// decoding: `{"anyOf": [{"type": "object", "properties": {"name": {"const": <name>},
/// "arguments": <the tool's parameters schema>}, "required": ["name", "arguments"],
/// "additionalProperties": false}, ...]}` over the offered tools. `None` for `none` and when no
/// tool is offered. See [`tool_call_grammar`] for how it constrains the output.
pub fn tool_call_schema(tools: &[Tool], choice: &ToolChoice) -> crate::Result<Option<String>> {
    if *choice == ToolChoice::None {
        return Ok(None);
    }
    let offered = offered_tools(tools, choice);
    if offered.is_empty() {
        return Ok(None);
    }
    let mut any_of = Vec::new();
    for t in offered {
        any_of.push(json!({
            "type": "object",
            "properties": {"name": {"const": t.name}, "arguments": t.parameters_value()?},
            "required": ["name", "arguments"],
            "additionalProperties": false,
        }));
    }
    Ok(Some(json!({ "anyOf": any_of }).to_string()))
}

/// The grammar that makes calls parse. With `blocks` (templates whose calls are `<tool_call>`
/// blocks: the Hermes/Qwen format and the fallback prompt): `<tool_call>`, a JSON call matching
/// [`tool_call_schema`], `</tool_call>`; under `required` or a named function the whole output is
/// one such call, under `auto` the grammar is lazy: the text is free until the model writes
/// [`TOOL_CALL_OPEN`], and from there the call must parse. Without `blocks` (templates with
/// another call format, e.g. Llama 3.x or Mistral), only `required` and a named function are
/// constrained, to the bare JSON call (which the parser accepts for every template). `None` when
/// nothing is constrained.
pub fn tool_call_grammar(
    tools: &[Tool],
    choice: &ToolChoice,
    blocks: bool,
) -> crate::Result<Option<GrammarRequest>> {
    let lazy = *choice == ToolChoice::Auto;
    if lazy && !blocks {
        return Ok(None);
    }
    let Some(schema) = tool_call_schema(tools, choice)? else {
        return Ok(None);
    };
    let call = GrammarRequest::json_schema(&schema)?;
    if !blocks {
        return Ok(Some(call));
    }
    let quote = |s: &str| serde_json::Value::from(s).to_string();
    let gbnf = format!(
        "{}\ntool-call ::= {} \"\\n\"? {} \"\\n\"? {}\n",
        call.gbnf,
        quote(TOOL_CALL_OPEN),
        call.root,
        quote(TOOL_CALL_CLOSE)
    );
    Ok(Some(GrammarRequest {
        gbnf,
        root: "tool-call".into(),
        lazy_trigger: lazy.then(|| TOOL_CALL_OPEN.to_string()),
    }))
}
