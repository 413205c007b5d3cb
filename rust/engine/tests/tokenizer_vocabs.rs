//! Pre-tokenizer and tokenizer variants we have no real model for, checked against llama.cpp on
//! the vocab-only GGUF files from llama.cpp's own test suite (extracted from the llama.cpp source
//! bundle shipped in the node-llama-cpp package), and against the ids llama.cpp's test suite
//! expects for its own test texts (`ggml-vocab-NAME.gguf.inp` / `.out`).

mod tokenizer_support;

use local_llm_engine::gguf::GgufFile;
use local_llm_engine::tokenizer::Tokenizer;
use serde_json::json;
use tokenizer_support::*;

/// Compares ids and detokenized text on the corpus, plus BOS/EOS/EOT and flags, and llama.cpp's
/// expected ids for its test texts.
fn check_vocab(name: &str) {
    let path = llama_cpp_vocab(name);
    let tok = load(&path);
    let texts = corpus();
    let answer = oracle(&json!({
        "model": path.to_string_lossy(),
        "texts": texts,
        "special": [false, true],
        "info": true,
    }));
    let info = &answer["info"];
    let opt = |v: &serde_json::Value| v.as_u64().map(|x| x as u32);
    assert_eq!(tok.bos(), opt(&info["bos"]), "bos");
    assert_eq!(tok.eos(), opt(&info["eos"]), "eos");
    check_eot(&tok, opt(&info["eot"]));
    assert_eq!(tok.add_bos(), info["add_bos"].as_bool().unwrap(), "add_bos");
    let eog: Vec<u32> = (0..tok.n_vocab() as u32)
        .filter(|&id| tok.is_eog(id))
        .collect();
    assert_eq!(eog, ids_of(&info["eog"]), "EOG set");
    let results = answer["tokenized"].as_array().unwrap();
    assert_eq!(results.len(), texts.len() * 2);
    let mut failures = Vec::new();
    for r in results {
        let text = &texts[r["text"].as_u64().unwrap() as usize];
        let special = r["special"].as_bool().unwrap();
        let want = ids_of(&r["ids"]);
        let got = tok.encode(text, false, special).expect("encode");
        if got != want {
            failures.push(format!(
                "encode({text:?}, special={special}):\n  ours   {got:?}\n  llama  {want:?}"
            ));
        } else if tok.decode(&got, special) != r["detok"].as_str().unwrap() {
            failures.push(format!(
                "decode of {text:?}: ours {:?} llama {:?}",
                tok.decode(&got, special),
                r["detok"]
            ));
        }
    }
    let (n_expected, expected_failures) = check_expected_files(name, &tok);
    failures.extend(expected_failures);
    assert!(
        failures.is_empty(),
        "{name}: {} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!(
        "{name}: {} corpus encodings and {n_expected} texts of the .inp/.out files match llama.cpp",
        results.len()
    );
}

/// Compares with llama.cpp's expected ids for its own test texts (`models/ggml-vocab-NAME.gguf.inp`
/// and `.out`, tokenized without BOS/EOS and without parsing special tokens as its
/// `test-tokenizer-0` does), when the bundle has them. Returns the number of texts and the
/// mismatches.
fn check_expected_files(name: &str, tok: &Tokenizer) -> (usize, Vec<String>) {
    const SEPARATOR: &str = "\n__ggml_vocab_test__\n";
    let inp = format!("models/ggml-vocab-{name}.gguf.inp");
    if !llama_cpp_list("models").contains(&inp) {
        return (0, Vec::new());
    }
    let text = |path: &str| String::from_utf8(llama_cpp_file(path)).expect("utf-8");
    let inputs = text(&inp);
    let outputs = text(&format!("models/ggml-vocab-{name}.gguf.out"));
    let texts: Vec<&str> = inputs
        .strip_suffix(SEPARATOR)
        .unwrap_or(&inputs)
        .split(SEPARATOR)
        .collect();
    let expected: Vec<&str> = outputs.lines().collect();
    assert_eq!(texts.len(), expected.len(), "{name}: .inp and .out differ");
    let mut failures = Vec::new();
    for (text, want) in texts.iter().zip(expected) {
        let want: Vec<u32> = want
            .split_whitespace()
            .map(|id| id.parse().unwrap())
            .collect();
        let got = tok.encode(text, false, false).expect("encode");
        if got != want {
            failures.push(format!(
                "{name}.gguf.out for {text:?}:\n  ours   {got:?}\n  llama  {want:?}"
            ));
        }
    }
    (texts.len(), failures)
}

#[test]
fn llama3_bpe() {
    check_vocab("llama-bpe");
}

#[test]
fn qwen2_bpe() {
    check_vocab("qwen2");
}

/// Qwen3.5: letters runs include combining marks.
#[test]
fn qwen35_bpe() {
    check_vocab("qwen35");
}

#[test]
fn gpt2_bpe() {
    check_vocab("gpt-2");
}

#[test]
fn mpt_bpe() {
    check_vocab("mpt");
}

/// No `tokenizer.ggml.pre`: llama.cpp's default pre-tokenizer.
#[test]
fn default_pre_gpt_neox() {
    check_vocab("gpt-neox");
}

#[test]
fn default_pre_aquila() {
    check_vocab("aquila");
}

/// Phi-3: SPM where llama.cpp strips whitespace after special tokens (rstrip).
#[test]
fn spm_phi3_rstrip() {
    check_vocab("phi-3");
}

#[test]
fn spm_baichuan() {
    check_vocab("baichuan");
}

#[test]
fn falcon_bpe() {
    check_vocab("falcon");
}

#[test]
fn starcoder_digits_bpe() {
    check_vocab("starcoder");
}

#[test]
fn command_r_bpe() {
    check_vocab("command-r");
}

#[test]
fn llama_spm_with_space_prefix() {
    check_vocab("llama-spm");
}

/// Tokenizer models and pre-tokenizers we don't implement are typed errors naming them.
#[test]
fn unsupported_tokenizers_are_errors() {
    for (name, needle) in [
        ("bert-bge", "bert"),
        ("deepseek-llm", "deepseek-llm"),
        ("gemma-4", "gemma4"),
    ] {
        let gguf = GgufFile::open(llama_cpp_vocab(name)).expect("open");
        match Tokenizer::from_gguf(&gguf) {
            Err(local_llm_engine::Error::Tokenizer(msg)) => {
                assert!(msg.contains(needle), "{name}: {msg}")
            }
            Err(e) => panic!("{name}: wrong error kind {e}"),
            Ok(_) => panic!("{name}: expected an error"),
        }
    }
}
