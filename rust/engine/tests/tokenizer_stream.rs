//! StreamDecoder: multibyte characters split across byte-fallback / byte-level tokens come out
//! whole, and the streamed text equals llama.cpp's detokenization. Also a speed check on long text.

mod common;
mod tokenizer_support;

use std::time::Instant;

use local_llm_engine::tokenizer::{StreamDecoder, Tokenizer};
use serde_json::json;
use tokenizer_support::*;

/// Streams `ids` one at a time; every chunk must be free of replacement characters.
fn stream(tok: &Tokenizer, ids: &[u32]) -> String {
    let mut dec = StreamDecoder::new();
    let mut out = String::new();
    for &id in ids {
        let chunk = dec.push(tok, id);
        assert!(
            !chunk.contains('\u{FFFD}'),
            "chunk {chunk:?} split a character"
        );
        out.push_str(&chunk);
    }
    out.push_str(&dec.finish());
    out
}

fn check_streaming(name: &str) {
    let Some(path) = common::real_model(name) else {
        return;
    };
    let tok = load(&path);
    // Rare characters that these vocabularies spell with several byte tokens.
    let texts: Vec<String> = [
        "𓀀𓀁 hieroglyphs",
        "🫠🧌 new emoji 👨‍👩‍👧‍👦",
        "ꙮ multiocular",
        "mixed 漢字 and 🦀 crab",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let answer =
        oracle(&json!({"model": path.to_string_lossy(), "texts": texts, "special": [false]}));
    let mut saw_split = false;
    for r in answer["tokenized"].as_array().unwrap() {
        let text = &texts[r["text"].as_u64().unwrap() as usize];
        let ids = ids_of(&r["ids"]);
        assert_eq!(
            tok.encode(text, false, false).unwrap(),
            ids,
            "encode {text:?}"
        );
        // Some token on its own is not valid UTF-8: the stream decoder has work to do.
        saw_split |= ids
            .iter()
            .any(|&id| std::str::from_utf8(&tok.token_bytes(id, false)).is_err());
        let streamed = stream(&tok, &ids);
        assert_eq!(
            streamed,
            r["detok"].as_str().unwrap(),
            "streamed text of {text:?}"
        );
    }
    assert!(
        saw_split,
        "{name}: corpus should contain characters split across tokens"
    );
}

#[test]
fn smollm_stream_decoder_joins_byte_tokens() {
    check_streaming(SMOLLM);
}

#[test]
fn gemma3_stream_decoder_joins_byte_fallback() {
    check_streaming(GEMMA);
}

/// Invalid byte sequences come out as U+FFFD; an unfinished character is flushed by `finish`.
#[test]
fn stream_decoder_invalid_and_unfinished_bytes() {
    let Some(path) = common::real_model(GEMMA) else {
        return;
    };
    let tok = load(&path);
    let byte = |b: u8| {
        (0..tok.n_vocab() as u32)
            .find(|&id| tok.token_text(id) == Some(&format!("<0x{b:02X}>")))
            .expect("byte token")
    };
    let mut dec = StreamDecoder::new();
    // "é" = C3 A9: nothing until the second byte arrives.
    assert_eq!(dec.push(&tok, byte(0xC3)), "");
    assert_eq!(dec.push(&tok, byte(0xA9)), "é");
    // A lone continuation byte is invalid.
    assert_eq!(dec.push(&tok, byte(0x80)), "\u{FFFD}");
    // First two bytes of a 4-byte emoji, then the stream ends.
    assert_eq!(dec.push(&tok, byte(0xF0)), "");
    assert_eq!(dec.push(&tok, byte(0x9F)), "");
    assert_eq!(dec.finish(), "\u{FFFD}");
    assert_eq!(dec.finish(), "");
    // A lead byte followed by ASCII: the bad byte becomes U+FFFD and the ASCII passes through.
    assert_eq!(dec.push(&tok, byte(0xE2)), "");
    assert_eq!(dec.push(&tok, byte(0x41)), "\u{FFFD}A");
    // Control tokens contribute nothing.
    assert_eq!(dec.push(&tok, tok.eos().unwrap()), "");
}

/// Long inputs encode in roughly linear time (no quadratic merging or special-token scans).
#[test]
fn long_text_encodes_quickly() {
    for name in [SMOLLM, GEMMA] {
        let Some(path) = common::real_model(name) else {
            return;
        };
        let tok = load(&path);
        let unit = "Lorem ipsum dolor sit amet, 12345 <b>bold</b> 漢字 😀 it's\n\n  ";
        let small = unit.repeat(200);
        let big = unit.repeat(4000);
        let time = |s: &str| {
            let t0 = Instant::now();
            let n = tok.encode(s, true, true).unwrap().len();
            (t0.elapsed(), n)
        };
        let (_, n_small) = time(&small);
        let (t_big, n_big) = time(&big);
        assert!(
            n_big > n_small * 15,
            "{name}: token count should scale with the text"
        );
        // ~250 KB of text; generous bound for a loaded 2-core machine.
        assert!(
            t_big.as_secs_f64() < 5.0,
            "{name}: encoding {} bytes took {t_big:?}",
            big.len()
        );
        // A single word with no spaces (one BPE word / one SPM fragment) must not be quadratic either.
        let word = "abcdefghij".repeat(5000);
        let t0 = Instant::now();
        tok.encode(&word, false, false).unwrap();
        assert!(
            t0.elapsed().as_secs_f64() < 5.0,
            "{name}: 50 KB word took {:?}",
            t0.elapsed()
        );
        eprintln!("{name}: {} bytes -> {n_big} tokens in {t_big:?}", big.len());
    }
}
