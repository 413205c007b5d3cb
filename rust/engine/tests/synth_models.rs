//! Smoke test of the synthetic models from `tools/synth/make_model.py`: the PyPI `gguf`
//! reader parses each file as the kind it claims to be, and llama.cpp (through the oracle)
//! loads it, tokenizes with its vocabulary and generates tokens from it.

mod common;

use serde_json::{json, Value};

/// Reads a synthetic model with gguf's own reader and returns (architecture, tensor names).
fn inspect_with_gguf(path: &std::path::Path) -> (String, Vec<String>) {
    let script = common::repo_root().join("tools/synth/inspect_gguf.py");
    let out: Value = serde_json::from_str(&common::run_python(&script, &[path])).unwrap();
    let tensors = out["tensors"].as_array().unwrap();
    (
        out["arch"].as_str().unwrap().to_string(),
        tensors
            .iter()
            .map(|t| t.as_str().unwrap().to_string())
            .collect(),
    )
}

#[test]
fn synthetic_models_parse_and_run_in_llama_cpp() {
    for kind in common::SYNTH_KINDS {
        let path = common::synth_model(kind);
        let (arch, tensors) = inspect_with_gguf(&path);
        let expected_arch = match *kind {
            "qwen2" | "qwen2-fim" => "qwen2",
            "qwen3" => "qwen3",
            _ => "llama",
        };
        assert_eq!(arch, expected_arch, "{kind}");
        assert!(
            tensors.iter().any(|t| t == "blk.1.ffn_down.weight"),
            "{kind}: {tensors:?}"
        );
        assert_eq!(
            tensors.iter().any(|t| t == "blk.0.attn_q.bias"),
            kind.starts_with("qwen2"),
            "{kind}"
        );
        assert_eq!(
            tensors.iter().any(|t| t == "blk.0.attn_q_norm.weight"),
            *kind == "qwen3",
            "{kind}"
        );

        let n_predict = 16;
        let response = common::run_oracle(&json!({
            "cmd": "generate",
            "model": path,
            "prompts": [
                {"text": "The sea was calm this morning", "special": false},
                {"text": "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n", "special": true},
                {"text": "<|im_start|>", "special": true},
            ],
            "n_predict": n_predict,
            "context_size": 256,
        }));
        let n_vocab = response["model"]["n_vocab"].as_u64().unwrap();
        assert!(n_vocab > 300, "{kind}: vocab of {n_vocab}");
        let results = response["results"].as_array().unwrap();
        assert_eq!(results.len(), 3, "{kind}");
        for result in &results[..2] {
            let prompt = result["prompt_tokens"].as_array().unwrap();
            let generated = result["tokens"].as_array().unwrap();
            assert!(prompt.len() > 3, "{kind}: prompt tokens {prompt:?}");
            assert!(!generated.is_empty(), "{kind}: generated nothing");
            assert!(generated.len() <= n_predict, "{kind}");
            for t in prompt.iter().chain(generated) {
                assert!(
                    t.as_u64().unwrap() < n_vocab,
                    "{kind}: token {t} out of range"
                );
            }
        }
        // Special-token parsing: the chat prompt starts with the single <|im_start|> token.
        let chat = results[1]["prompt_tokens"].as_array().unwrap();
        let add_bos = response["model"]["add_bos"].as_bool().unwrap();
        let first = &chat[usize::from(add_bos)];
        let alone = results[2]["prompt_tokens"].as_array().unwrap();
        assert_eq!(alone.len(), 1 + usize::from(add_bos), "{kind}: {alone:?}");
        assert_eq!(&alone[usize::from(add_bos)], first, "{kind}");
    }
}

#[test]
fn synthetic_models_are_deterministic() {
    let dir = std::env::temp_dir().join(format!("synth-det-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let copy = dir.join("again.gguf");
    let script = common::repo_root().join("tools/synth/make_model.py");
    common::run_python(&script, &[std::ffi::OsStr::new("qwen2"), copy.as_os_str()]);
    let a = std::fs::read(common::synth_model("qwen2")).unwrap();
    let b = std::fs::read(&copy).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        a == b,
        "make_model.py qwen2 wrote different bytes on a second run"
    );
}
