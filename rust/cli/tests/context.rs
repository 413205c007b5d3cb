//! `--context-shift` / `--keep` (llama.cpp's names: generation goes on past `-c` by shifting
//! the context) and `--prompt-cache` (the context state saved to and restored from a file).

#[path = "../../engine/tests/common/mod.rs"]
mod common;

use std::process::{Command, Output};

fn local_llm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_local-llm"))
        .args(args)
        .output()
        .expect("run local-llm")
}

/// The generated token ids and the finish line (`--print-tokens` output on stderr).
fn tokens_and_finish(out: &Output) -> (Vec<u32>, String) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix("tokens: "))
        .expect("tokens line");
    let tokens = serde_json::from_str(line).expect("token ids");
    let finish = stderr
        .lines()
        .find_map(|l| l.split("finish: ").nth(1))
        .expect("finish reason")
        .to_string();
    (tokens, finish)
}

#[test]
fn context_shift_generates_past_the_context_size() {
    let Some(model) = common::real_model("smollm2") else {
        return;
    };
    let model = model.to_str().expect("utf-8 path");
    let base = [
        "run",
        "-m",
        model,
        "-p",
        "Once upon a time",
        "-c",
        "64",
        "-n",
        "150",
        "--temp",
        "0",
        "--ignore-eos",
        "--print-tokens",
        "-t",
        "2",
    ];
    let (plain, finish) = tokens_and_finish(&local_llm(&base));
    assert_eq!(finish, "ContextFull");
    assert!(
        plain.len() < 64,
        "{} tokens in a 64-token context",
        plain.len()
    );
    for keep in ["-1", "0", "2"] {
        let args = [&base[..], &["--context-shift", "--keep", keep]].concat();
        let (shifted, finish) = tokens_and_finish(&local_llm(&args));
        assert_eq!(finish, "MaxTokens", "--keep {keep}");
        assert_eq!(shifted.len(), 150, "--keep {keep}");
        // Until the context is full nothing differs.
        assert_eq!(shifted[..plain.len()], plain[..], "--keep {keep}");
    }
    let out = local_llm(&[&base[..], &["--context-shift", "--keep", "-2"]].concat());
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--keep -2"));
}

#[test]
fn prompt_cache_restores_the_state_and_binds_it_to_the_model() {
    let (Some(smol), Some(gemma)) = (common::real_model("smollm2"), common::real_model("gemma3"))
    else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("local-llm-cli-cache-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let cache = dir.join("prompt.cache");
    let cache = cache.to_str().expect("utf-8 path");
    let run = |model: &std::path::Path, prompt: &str| {
        local_llm(&[
            "run",
            "-m",
            model.to_str().expect("utf-8 path"),
            "-p",
            prompt,
            "-n",
            "16",
            "--temp",
            "0",
            "--print-tokens",
            "-t",
            "2",
            "--prompt-cache",
            cache,
        ])
    };
    let prompt = "The three primary colours are";
    let first = run(&smol, prompt);
    let (tokens, _) = tokens_and_finish(&first);
    assert!(!String::from_utf8_lossy(&first.stderr).contains("restored"));
    let second = run(&smol, prompt);
    let (again, _) = tokens_and_finish(&second);
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(stderr.contains("prompt cache: restored"), "{stderr}");
    assert_eq!(again, tokens);
    assert_eq!(first.stdout, second.stdout);
    // The cache of one model is refused by another, with a typed error, not garbage.
    let other = run(&gemma, prompt);
    assert_eq!(other.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&other.stderr);
    assert!(stderr.contains("invalid session file"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A save that fails part-way (here the file-size limit of `ulimit -f`, as a full disk would)
/// leaves the previous prompt cache byte for byte as it was and no partial file; a FIFO as the
/// cache path is refused at once instead of blocking.
#[test]
fn a_failed_prompt_cache_save_keeps_the_previous_file() {
    let Some(model) = common::real_model("smollm2") else {
        return;
    };
    let model = model.to_str().expect("utf-8 path");
    let dir = std::env::temp_dir().join(format!("local-llm-cli-fsize-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let cache = dir.join("prompt.cache");
    let cache = cache.to_str().expect("utf-8 path");
    let args = |prompt: &str| {
        [
            "run",
            "-m",
            model,
            "-p",
            prompt,
            "-n",
            "4",
            "--temp",
            "0",
            "-t",
            "2",
            "--prompt-cache",
            cache,
        ]
        .map(str::to_string)
    };
    let first = local_llm(&args("Hello").each_ref().map(String::as_str));
    assert!(first.status.success(), "{first:?}");
    let good = std::fs::read(cache).expect("the first cache");
    // A prompt whose state is several times larger, saved under a file-size limit just above
    // the first file's size (SIGXFSZ ignored, so the write fails with EFBIG).
    let long = "The quick brown fox jumps over the lazy dog. ".repeat(12);
    let limit_kib = good.len() / 1024 + 16;
    let script = format!("trap '' XFSZ; ulimit -f {limit_kib}; exec \"$0\" \"$@\"");
    let out = Command::new("bash")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_local-llm"))
        .args(args(&long))
        .output()
        .expect("run local-llm under ulimit -f");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot write"), "{stderr}");
    assert!(
        std::fs::read(cache).expect("the cache is still there") == good,
        "the previous cache was changed by a failed save"
    );
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        1,
        "a partial file was left"
    );

    // A FIFO: a typed error within seconds, not a hang.
    let fifo = dir.join("cache.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let mut child = Command::new(env!("CARGO_BIN_EXE_local-llm"))
        .args(args("Hello").map(|a| {
            if a == cache {
                fifo.display().to_string()
            } else {
                a
            }
        }))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn local-llm");
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if start.elapsed().as_secs() >= 30 {
            let _ = child.kill();
            panic!("local-llm blocked on a FIFO prompt cache for 30 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("not a regular file"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
