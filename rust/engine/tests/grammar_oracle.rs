//! llama.cpp's own grammar tests run against our GBNF parser, matcher and JSON-schema converter.
//!
//! The cases are extracted at test time by `scripts/checks/llama_grammar_cases.py` from llama.cpp's
//! test sources (test-grammar-integration.cpp: grammars and schemas with strings that must match
//! and must not; test-grammar-parser.cpp: grammars that must parse or fail;
//! test-json-schema-to-grammar.cpp: schemas that must convert or fail), taken from the PyPI sdist
//! llama-cpp-python==0.3.36 (llama.cpp 0c1e570), downloaded once into ~/.cache/local-llm.
//! Set `LOCAL_LLM_SKIP_LLAMA_SOURCES=1` to skip when that download is impossible (offline).

use std::process::Command;
use std::sync::Arc;

use local_llm_engine::grammar::{schema_to_gbnf, Grammar, Matcher};
use local_llm_engine::Error;
use serde_json::Value;

/// Cases we do not run, with the reason (matched by description / name / source prefix).
const OUT_OF_SCOPE: &[(&str, &str)] = &[
    // Token references (<[id]>, !<[id]>) constrain token ids, not text: not supported.
    ("simple grammar with tokens", "token-level grammar"),
    ("complex grammar with tokens", "token-level grammar"),
    ("root  ::= <[1000]>", "token-level grammar"),
    // These two verify_parsing cases expect "a"{0,5000} / "a"{3,5000} to parse, while the same
    // file's verify_failure cases reject "a"{5000,} and "a"{5000,6000}: llama.cpp's parser
    // rejects counts above 2000 (MAX_REPETITION_THRESHOLD), and so do we.
    (
        "root ::= \"a\"{0,5000}",
        "repetition above llama.cpp's own limit",
    ),
    (
        "root ::= \"a\"{3,5000}",
        "repetition above llama.cpp's own limit",
    ),
];

fn out_of_scope(key: &str) -> bool {
    OUT_OF_SCOPE.iter().any(|(k, _)| key.trim().starts_with(k))
}

fn cases() -> Option<Value> {
    if std::env::var("LOCAL_LLM_SKIP_LLAMA_SOURCES").is_ok_and(|v| v == "1") {
        eprintln!("LOCAL_LLM_SKIP_LLAMA_SOURCES=1: skipping the llama.cpp grammar oracle");
        return None;
    }
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/checks/llama_grammar_cases.py"
    );
    let out = Command::new("python3")
        .arg(script)
        .output()
        .expect("python3 must be installed to extract llama.cpp's grammar tests");
    assert!(
        out.status.success(),
        "extracting llama.cpp's grammar tests failed (set LOCAL_LLM_SKIP_LLAMA_SOURCES=1 to skip \
         when offline): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).expect("the extractor prints JSON"))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn full_match(grammar: &Arc<Grammar>, text: &str) -> bool {
    let mut m = Matcher::new(grammar.clone());
    m.accept_str(text) && m.is_complete()
}

/// The first rule a grammar defines (parser cases need not have a `root`).
fn first_rule(source: &str) -> String {
    source
        .lines()
        .map(str::trim)
        .find_map(|l| l.split_once("::=").map(|(n, _)| n.trim().to_string()))
        .unwrap_or_else(|| "root".into())
}

#[test]
fn llama_cpp_grammar_cases() {
    let Some(all) = cases() else { return };
    let mut failures = Vec::new();
    let (mut ran, mut strings_checked, mut skipped) = (0, 0, Vec::new());

    for case in all["integration"].as_array().expect("integration cases") {
        let desc = case["desc"].as_str().unwrap_or("?");
        if out_of_scope(desc) {
            skipped.push(desc.to_string());
            continue;
        }
        let source = case["source"].as_str().unwrap_or_default();
        let gbnf = if case["kind"] == "schema" {
            match schema_to_gbnf(source) {
                Ok(g) => g,
                Err(e) => {
                    failures.push(format!("{desc}: schema conversion failed: {e}"));
                    continue;
                }
            }
        } else {
            source.to_string()
        };
        let grammar = match Grammar::parse(&gbnf, "root") {
            Ok(g) => Arc::new(g),
            Err(e) => {
                failures.push(format!("{desc}: grammar rejected: {e}\n{gbnf}"));
                continue;
            }
        };
        ran += 1;
        for (list, want) in [("passing", true), ("failing", false)] {
            for s in strings(&case[list]) {
                strings_checked += 1;
                if full_match(&grammar, &s) != want {
                    failures.push(format!("{desc}: {list} string {s:?} gave {}", !want));
                }
            }
        }
    }

    for case in all["build"].as_array().expect("build cases") {
        let (source, root) = (
            case["source"].as_str().unwrap_or_default(),
            case["root"].as_str().unwrap_or("root"),
        );
        let want = case["ok"].as_bool().unwrap_or(false);
        ran += 1;
        match (Grammar::parse(source, root), want) {
            (Ok(_), true) | (Err(Error::Grammar(_)), false) => {}
            (got, _) => failures.push(format!(
                "build {source:?} root {root}: expected ok={want}, got {got:?}"
            )),
        }
    }

    for case in all["parser"].as_array().expect("parser cases") {
        let source = case["source"].as_str().unwrap_or_default();
        if out_of_scope(source) {
            skipped.push(source.trim().to_string());
            continue;
        }
        let want = case["ok"].as_bool().unwrap_or(false);
        ran += 1;
        match (Grammar::parse(source, &first_rule(source)), want) {
            (Ok(_), true) | (Err(Error::Grammar(_)), false) => {}
            (got, _) => failures.push(format!("parse {source:?}: expected ok={want}, got {got:?}")),
        }
    }

    for case in all["schemas"].as_array().expect("schema cases") {
        let name = case["name"].as_str().unwrap_or("?");
        let want = case["ok"].as_bool().unwrap_or(false);
        ran += 1;
        let got = schema_to_gbnf(case["schema"].as_str().unwrap_or_default())
            .and_then(|g| Grammar::parse(&g, "root").map(|_| g));
        match (got, want) {
            (Ok(_), true) | (Err(Error::Grammar(_)), false) => {}
            (got, _) => failures.push(format!("schema '{name}': expected ok={want}, got {got:?}")),
        }
    }

    eprintln!(
        "llama.cpp grammar oracle: {ran} cases run ({strings_checked} strings matched), {} out of \
         scope: {skipped:?}, {} failures",
        skipped.len(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Fuzz regression (json_schema target): a pattern quantifier `{m,n}` with n < m made GBNF that
/// did not parse; it is an invalid pattern, a typed error naming it.
#[test]
fn pattern_quantifier_out_of_order_is_a_typed_error() {
    let schema = r#"{"type": "string", "pattern": "^[a]c-{4,3}(x|x)|$"}"#;
    let err = schema_to_gbnf(schema).expect_err("an invalid pattern");
    assert!(
        err.to_string()
            .contains("min repeat 4 greater than max repeat 3"),
        "{err}"
    );
    // In order, the same pattern converts to GBNF that parses.
    let ok = schema_to_gbnf(r#"{"type": "string", "pattern": "^[a]c-{3,4}(x|x)|$"}"#).unwrap();
    Grammar::parse(&ok, "root").unwrap();
}

/// Fuzz regression (json_schema target): a valid pattern with a repetition count above GBNF's
/// limit of 2000 (`[a-c]{2186}`) made GBNF that did not parse. It is a valid regex the grammar
/// cannot hold, so it falls back to any string (as other unsupported patterns do) and the GBNF
/// parses; a count within the limit is still enforced.
#[test]
fn pattern_repetition_beyond_the_grammar_limit_falls_back_to_any_string() {
    let gbnf = schema_to_gbnf(r#"{"type": "string", "pattern": "^[a-c]{2186}(x|y)?$"}"#).unwrap();
    let g = Arc::new(Grammar::parse(&gbnf, "root").unwrap());
    assert!(full_match(&g, "\"bx\""), "{gbnf}");
    let within = schema_to_gbnf(r#"{"type": "string", "pattern": "^[a-c]{3}(x|y)?$"}"#).unwrap();
    let g = Arc::new(Grammar::parse(&within, "root").unwrap());
    assert!(full_match(&g, "\"abcx\""));
    assert!(!full_match(&g, "\"bx\""));
}

/// Fuzz regression (json_schema target): a declared property name with a `^` and
/// additionalProperties put `\^` in the class of characters that leave the declared keys, an
/// escape GBNF (ours and llama.cpp's) does not have, so the GBNF did not parse. A `^` in a
/// pattern's class took the same path. Both now parse and constrain as asked.
#[test]
fn a_caret_in_a_key_or_a_pattern_class_makes_gbnf_that_parses() {
    let schema = r#"{"type": "object", "properties": {"a^b": {"type": "integer"}},
        "additionalProperties": {"type": "boolean"}}"#;
    let gbnf = schema_to_gbnf(schema).unwrap();
    let g = Arc::new(Grammar::parse(&gbnf, "root").unwrap_or_else(|e| panic!("{e}\n{gbnf}")));
    for ok in [
        r#"{"a^b": 1}"#,
        r#"{"a^c": true}"#,
        r#"{"a^": false}"#,
        r#"{"a^b": 2, "^": true}"#,
    ] {
        assert!(full_match(&g, ok), "{ok}");
    }
    // The declared key takes its own type, not the additional properties'.
    assert!(!full_match(&g, r#"{"a^b": true}"#));
    let gbnf = schema_to_gbnf(r#"{"type": "string", "pattern": "^[a\\^]+$"}"#).unwrap();
    let g = Arc::new(Grammar::parse(&gbnf, "root").unwrap_or_else(|e| panic!("{e}\n{gbnf}")));
    assert!(full_match(&g, r#""a^a^""#));
    assert!(!full_match(&g, r#""ab""#));
}

#[test]
fn integer_bounds_beyond_the_supported_range_are_a_typed_error() {
    // Found by the json_schema fuzz target: a minimum of 5.5e82 overflowed the range arithmetic.
    let huge = format!(r#"{{"type": "integer", "minimum": 5{}0}}"#, "5".repeat(81));
    let err = schema_to_gbnf(&huge).expect_err("a bound beyond ±10^18");
    assert!(err.to_string().contains("/minimum"), "{err}");
    for key in ["maximum", "exclusiveMinimum", "exclusiveMaximum"] {
        let schema = format!(r#"{{"type": "integer", "{key}": -1e30}}"#);
        assert!(schema_to_gbnf(&schema).is_err(), "{key}");
    }
    let edge =
        r#"{"type": "integer", "minimum": -1000000000000000000, "maximum": 1000000000000000000}"#;
    let gbnf = schema_to_gbnf(edge).unwrap();
    let grammar = Arc::new(Grammar::parse(&gbnf, "root").unwrap());
    for text in ["-1000000000000000000", "0", "1000000000000000000", "999"] {
        assert!(full_match(&grammar, text), "{text}");
    }
    assert!(!full_match(&grammar, "1000000000000000001"));
}
