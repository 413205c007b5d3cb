//! Grammar-constrained generation on a real model (SmolLM2 135M Instruct): outputs generated
//! under the JSON schemas of grammar_fixtures/schemas.json must parse and validate with Python's
//! `jsonschema` (grammar_fixtures/validate.py), and a GBNF grammar / `json_object` mode / a lazy
//! grammar shape the output as they say.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;

use local_llm_engine::chat::ChatMessage;
use local_llm_engine::grammar::{json_object_gbnf, GrammarRequest};
use local_llm_engine::sampling::SamplingParams;
use local_llm_engine::session::{
    Context, ContextOptions, FinishReason, GenerateRequest, LoadOptions, LoadedModel, Prompt,
};
use serde_json::Value;

fn context() -> Option<Context> {
    let path = common::real_model("smollm2")?;
    let model = LoadedModel::load(&path, &LoadOptions::default()).unwrap();
    let options = ContextOptions {
        n_ctx: 1024,
        threads: 2,
        ..ContextOptions::default()
    };
    Some(Context::new(Arc::clone(&model), &options).unwrap())
}

fn chat(text: &str) -> Prompt {
    Prompt::Chat(vec![ChatMessage::new("user", text)])
}

fn constrained(prompt: Prompt, grammar: GrammarRequest, max_tokens: usize) -> GenerateRequest {
    GenerateRequest {
        sampling: SamplingParams::greedy(),
        max_tokens,
        grammar: Some(grammar),
        ..GenerateRequest::new(prompt)
    }
}

/// `validate.py`'s verdict for each (schema, output): None when valid.
fn validate(items: &[Value]) -> Vec<Option<String>> {
    let script = common::repo_root().join("rust/engine/tests/grammar_fixtures/validate.py");
    let mut child = Command::new(common::python())
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 must be installed (scripts/setup/setup-test-deps.sh)");
    let input = serde_json::to_vec(items).unwrap();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "validate.py failed (is jsonschema installed? run scripts/setup/setup-test-deps.sh)"
    );
    let verdicts: Vec<Option<String>> = serde_json::from_slice(&out.stdout).unwrap();
    verdicts
}

#[test]
fn outputs_under_json_schemas_validate() {
    let Some(mut ctx) = context() else { return };
    let fixtures = common::repo_root().join("rust/engine/tests/grammar_fixtures/schemas.json");
    let cases: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(fixtures).unwrap()).unwrap();
    assert!(cases.len() >= 30);
    let mut items = Vec::new();
    let mut tokens = 0;
    for case in &cases {
        let schema = case["schema"].to_string();
        let prompt = format!("{} Answer in JSON.", case["prompt"].as_str().unwrap());
        let grammar = GrammarRequest::json_schema(&schema).unwrap();
        let g = ctx
            .generate(&constrained(chat(&prompt), grammar, 160), &mut |_| {}, None)
            .unwrap();
        tokens += g.tokens.len();
        assert_ne!(
            g.finish_reason,
            FinishReason::GrammarDeadEnd,
            "{schema}: {}",
            g.text
        );
        items.push(serde_json::json!({"schema": case["schema"], "output": g.text, "finish": g.finish_reason.name()}));
    }
    let verdicts = validate(&items);
    let failures: Vec<String> = items
        .iter()
        .zip(&verdicts)
        .filter_map(|(item, v)| {
            v.as_ref().map(|why| {
                format!(
                    "{} -> {:?} ({}): {why}",
                    item["schema"], item["output"], item["finish"]
                )
            })
        })
        .collect();
    eprintln!(
        "{}/{} outputs validate ({tokens} tokens generated)",
        cases.len() - failures.len(),
        cases.len()
    );
    assert!(
        failures.is_empty(),
        "{} invalid outputs:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn gbnf_and_json_object_shape_the_output() {
    let Some(mut ctx) = context() else { return };
    let grammar = GrammarRequest::new(r#"root ::= ("yes" | "no") "." "#);
    let g = ctx
        .generate(
            &constrained(chat("Is water wet?"), grammar, 20),
            &mut |_| {},
            None,
        )
        .unwrap();
    assert!(g.text == "yes." || g.text == "no.", "{:?}", g.text);
    assert_eq!(g.finish_reason, FinishReason::GrammarComplete);

    let object = GrammarRequest::new(json_object_gbnf());
    let g = ctx
        .generate(
            &constrained(chat("Describe a car in JSON."), object, 200),
            &mut |_| {},
            None,
        )
        .unwrap();
    if g.finish_reason != FinishReason::MaxTokens {
        let v: Value =
            serde_json::from_str(&g.text).unwrap_or_else(|e| panic!("{e}: {:?}", g.text));
        assert!(v.is_object(), "{:?}", g.text);
    }

    // An empty grammar is complete at once.
    let g = ctx
        .generate(
            &constrained(chat("Hi"), GrammarRequest::new("root ::= "), 20),
            &mut |_| {},
            None,
        )
        .unwrap();
    assert_eq!(
        (g.text.as_str(), g.finish_reason),
        ("", FinishReason::GrammarComplete)
    );
}

#[test]
fn lazy_grammar_applies_from_its_trigger() {
    let Some(mut ctx) = context() else { return };
    let prompt = Prompt::Text("Tag: <x>ab</x>\nTag: <x>cd</x>\nTag: <x>ef</x>\nTag:".into());
    let grammar = GrammarRequest {
        lazy_trigger: Some("<x>".into()),
        ..GrammarRequest::new(r#"root ::= "<x>" [0-9]{3} "</x>""#)
    };
    let g = ctx
        .generate(&constrained(prompt, grammar, 30), &mut |_| {}, None)
        .unwrap();
    let at = g
        .text
        .find("<x>")
        .unwrap_or_else(|| panic!("no trigger in {:?}", g.text));
    let tail = &g.text[at..];
    // The model continues the pattern with letters; the grammar forces three digits.
    assert_eq!(tail.len(), "<x>123</x>".len(), "{:?}", g.text);
    assert!(
        tail[3..6].bytes().all(|b| b.is_ascii_digit()) && tail.ends_with("</x>"),
        "{:?}",
        g.text
    );
    assert_eq!(g.finish_reason, FinishReason::GrammarComplete);
}

#[test]
fn invalid_grammars_are_typed_errors() {
    let Some(mut ctx) = context() else { return };
    for bad in [
        "root ::= (\"a\"",
        "root ::= foo",
        "root ::= root \"a\"",
        "root ::= \"a\"{9999}",
    ] {
        let err = ctx
            .generate(
                &constrained(chat("Hi"), GrammarRequest::new(bad), 5),
                &mut |_| {},
                None,
            )
            .unwrap_err();
        assert!(
            matches!(err, local_llm_engine::Error::Grammar(_)),
            "{bad}: {err}"
        );
    }
    let err = GrammarRequest::json_schema(r#"{"type": "kaboom"}"#).unwrap_err();
    assert!(err.to_string().contains("#/type"), "{err}");
}
