//! Fuzz target: GBNF grammars and matching. Input: the grammar source, a NUL byte, then text
//! whose `|`-separated pieces also form a token table. Parsing must end in a grammar or a typed
//! error; a parsed grammar must match any text without panicking, `Matcher::accepts` must
//! predict what `accept_bytes` does, and a `Constraint` sampling over the pieces (token 0 ends
//! generation) may only pick tokens the grammar then accepts.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use local_llm_engine::grammar::{Constraint, Grammar, Matcher, Step, TokenTable};
use local_llm_engine::sampling::{Sampler, SamplingParams};

fuzz_target!(|data: &[u8]| {
    let (source, text) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let Ok(source) = std::str::from_utf8(source) else {
        return;
    };
    let Ok(grammar) = Grammar::parse(source, "root") else {
        return;
    };
    let grammar = Arc::new(grammar);

    // Byte by byte: `accepts` predicts `accept_bytes`; a dead matcher stays dead.
    let mut matcher = Matcher::new(grammar.clone());
    for chunk in text.chunks(3) {
        let predicted = matcher.accepts(chunk);
        let accepted = matcher.accept_bytes(chunk);
        assert_eq!(
            predicted, accepted,
            "accepts() and accept_bytes() disagree on {chunk:?}"
        );
        if !accepted {
            assert!(matcher.is_dead() || !matcher.can_continue());
            break;
        }
        assert!(!matcher.is_dead());
    }

    // Constrained sampling over the text's pieces (at most 64 tokens, token 0 = end).
    let pieces: Vec<&[u8]> = std::iter::once(&[][..])
        .chain(text.split(|&b| b == b'|').filter(|p| !p.is_empty()))
        .take(64)
        .collect();
    let table = Arc::new(TokenTable::from_pieces(&pieces));
    let mut constraint = Constraint::new((*grammar).clone(), table, None);
    let params = SamplingParams {
        temperature: 0.0,
        ..SamplingParams::default()
    };
    let mut sampler = Sampler::new(params).expect("greedy sampling options are valid");
    // Logits favouring later tokens, so that rejections (and the masked path) happen.
    let logits: Vec<f32> = (0..pieces.len()).map(|i| i as f32).collect();
    let mut history = Vec::new();
    for _ in 0..16 {
        match constraint.pick(&mut sampler, &logits, &history, &|t| t == 0) {
            Step::Token(0) | Step::Complete | Step::DeadEnd | Step::Cancelled => break,
            Step::Token(t) => {
                assert!((t as usize) < pieces.len(), "token {t} of {}", pieces.len());
                assert!(
                    constraint.accept(t),
                    "the constraint picked token {t}, which its grammar rejects"
                );
                history.push(t);
            }
        }
    }
});
