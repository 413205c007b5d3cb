//! End-to-end checks of the `local-llm` binary: greedy text from `run` equals llama.cpp's
//! (node-llama-cpp) detokenized greedy continuation; bad input gives an error exit, not a crash.

#[path = "../../engine/tests/common/mod.rs"]
mod common;

use std::process::Command;

use serde_json::json;

fn local_llm(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_local-llm"))
        .args(args)
        .output()
        .expect("run local-llm")
}

#[test]
fn run_streams_the_same_text_as_llama_cpp() {
    if common::skip_real_models() {
        return;
    }
    let model = common::model_path("smollm2");
    let model = model.to_str().expect("utf-8 path");
    let prompt = "The capital of France is";
    let oracle = common::run_oracle(&json!({
        "cmd": "generate", "model": model, "n_predict": 24,
        "prompts": [{"text": prompt, "special": true}],
    }));
    let expected = oracle["results"][0]["text"].as_str().expect("oracle text");
    let out = local_llm(&[
        "run", "-m", model, "-p", prompt, "-n", "24", "--temp", "0", "-t", "1",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8 output");
    assert_eq!(text.trim_end_matches('\n'), expected);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("tok/s"), "timings go to stderr: {stderr}");
}

#[test]
fn bad_inputs_fail_cleanly() {
    let dir = std::env::temp_dir().join(format!("local-llm-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let garbage = dir.join("garbage.gguf");
    std::fs::write(&garbage, b"GGUF\x03\x00\x00\x00 not really a model").expect("write");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "run".into(),
                "-m".into(),
                "/nonexistent/model.gguf".into(),
                "-p".into(),
                "x".into(),
            ],
            "cannot read",
        ),
        (
            vec![
                "run".into(),
                "-m".into(),
                garbage.display().to_string(),
                "-p".into(),
                "x".into(),
            ],
            "GGUF",
        ),
        (
            vec!["info".into(), "-m".into(), garbage.display().to_string()],
            "GGUF",
        ),
    ];
    for (args, needle) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = local_llm(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn devices_lists_the_cpu() {
    let out = local_llm(&["devices"]);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.lines().any(|l| l.starts_with("CPU [cpu]")),
        "{stdout}"
    );
}
