//! Fuzz target: JSON schema → GBNF. Input: schema text, a NUL byte, then text. Conversion must
//! end in GBNF or a typed error (depth and size limits included); the GBNF it produces must
//! parse as a grammar (the converter's output is never a syntax error), and matching any text
//! against it must not panic.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use local_llm_engine::grammar::{schema_to_gbnf, Grammar, Matcher};

fuzz_target!(|data: &[u8]| {
    let (schema, text) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let Ok(schema) = std::str::from_utf8(schema) else {
        return;
    };
    let Ok(gbnf) = schema_to_gbnf(schema) else {
        return;
    };
    let grammar = match Grammar::parse(&gbnf, "root") {
        Ok(g) => g,
        Err(e) => panic!("schema_to_gbnf made GBNF that does not parse ({e}):\n{gbnf}"),
    };
    let mut matcher = Matcher::new(Arc::new(grammar));
    assert!(
        !matcher.is_dead(),
        "a fresh matcher of a converted schema is dead:\n{gbnf}"
    );
    matcher.accept_bytes(text);
});
