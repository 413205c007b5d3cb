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
    let Some(model) = common::real_model("smollm2") else {
        return;
    };
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

/// `--seed` follows llama.cpp's rule, which the JS API's `seed` follows too: an integer from -1
/// to 2^32-1, where -1 and 2^32-1 ask for a random seed (before: `--seed -1` was a usage error).
/// Out-of-range seeds are reported before any model loads; a fixed seed reproduces its text.
#[test]
fn seed_minus_one_is_random_as_in_llama_cpp() {
    let run = |model: &str, seed: &str| {
        local_llm(&[
            "run",
            "-m",
            model,
            "-p",
            "Once upon a time",
            "-n",
            "12",
            "--temp",
            "1",
            "-t",
            "1",
            "--seed",
            seed,
        ])
    };
    for seed in ["-2", "4294967296", "-9223372036854775808"] {
        let out = run("/nonexistent/model.gguf", seed);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "--seed {seed}: {stderr}");
        assert!(
            stderr.contains(&format!("--seed {seed}: expected -1 or 0..=4294967295")),
            "--seed {seed}: {stderr}"
        );
    }
    for seed in ["-1", "0", "4294967295"] {
        let out = run("/nonexistent/model.gguf", seed);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("cannot read"), "--seed {seed}: {stderr}");
    }
    let Some(model) = common::real_model("smollm2") else {
        return;
    };
    let model = model.to_str().expect("utf-8 path");
    let text = |seed: &str| {
        let out = run(model, seed);
        assert!(
            out.status.success(),
            "--seed {seed}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8 output")
    };
    for seed in ["-1", "4294967295"] {
        assert!(!text(seed).trim().is_empty(), "--seed {seed}");
    }
    assert_eq!(text("7"), text("7"));
    let short = local_llm(&[
        "run", "-m", model, "-p", "Hi", "-n", "1", "-t", "1", "-s", "-1",
    ]);
    assert!(
        short.status.success(),
        "{}",
        String::from_utf8_lossy(&short.stderr)
    );
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

/// `bench --json --bandwidth -d 0,3 --parallel 1,2,4`: one line per test, depth, sequence count
/// and thread count (two sequences decode at most a few times faster than one: with room for
/// four, two once stopped before the first step and reported 10^9 t/s), and a bandwidth line whose
/// weight bytes per token are the sizes (from the GGUF header) of every matrix a token meets:
/// the seven per layer and the output head (SmolLM2 ties it to the token embedding).
#[test]
fn bench_reports_speed_and_the_bandwidth_ceiling() {
    let Some(model) = common::real_model("smollm2") else {
        return;
    };
    let gguf = local_llm_engine::gguf::GgufFile::open(&model).expect("open");
    let matrices = [
        "attn_q",
        "attn_k",
        "attn_v",
        "attn_output",
        "ffn_gate",
        "ffn_up",
        "ffn_down",
    ];
    let has_output = gguf.tensors().iter().any(|t| t.name == "output.weight");
    let expected: u64 = gguf
        .tensors()
        .iter()
        .filter(|t| {
            let layer = t.name.starts_with("blk.")
                && matrices
                    .iter()
                    .any(|m| t.name.ends_with(&format!(".{m}.weight")));
            let head = t.name
                == if has_output {
                    "output.weight"
                } else {
                    "token_embd.weight"
                };
            layer || head
        })
        .map(|t| t.n_bytes)
        .sum();
    let model = model.to_str().expect("utf-8 path");
    let out = local_llm(&[
        "bench",
        "-m",
        model,
        "-p",
        "8",
        "-n",
        "4",
        "-t",
        "1,2",
        "-d",
        "0,3",
        "--parallel",
        "1,2,4",
        "-r",
        "1",
        "--bandwidth",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 18, "{lines:?}");
    for threads in [1, 2] {
        // Counts above the cores are capped, and bench reports the count that ran.
        let threads = threads.min(local_llm_engine::backend::max_threads());
        let of = |test: &str| {
            lines
                .iter()
                .find(|l| l["threads"] == threads && l["test"] == test)
                .unwrap_or_else(|| panic!("no {test} line for {threads} threads: {lines:?}"))
        };
        let rate = |test: &str, depth: u32, seqs: u32| {
            lines
                .iter()
                .find(|l| {
                    l["threads"] == threads
                        && l["test"] == test
                        && l["depth"] == depth
                        && l["sequences"] == seqs
                })
                .unwrap_or_else(|| panic!("no {test}×{seqs} at depth {depth}: {lines:?}"))
                ["median_tps"]
                .as_f64()
                .unwrap()
        };
        for depth in [0, 3] {
            assert!(rate("pp8", depth, 1) > 0.0);
            let (one, two) = (rate("tg4", depth, 1), rate("tg4", depth, 2));
            assert!(one > 0.0 && two > 0.0 && two < 10.0 * one, "{one} vs {two}");
        }
        let bw = of("bandwidth");
        assert_eq!(bw["weight_bytes_per_token"].as_u64(), Some(expected));
        let gbs = bw["read_gbs"].as_f64().unwrap();
        let ceiling = bw["ceiling_tps"].as_f64().unwrap();
        assert!(gbs > 0.1, "{bw}");
        assert!(
            (ceiling - gbs * 1e9 / expected as f64).abs() < 0.1 + ceiling * 1e-3,
            "{bw}"
        );
    }
}

#[test]
fn n_probs_prints_each_token_with_its_alternatives() {
    let Some(model) = common::real_model("smollm2") else {
        return;
    };
    let model = model.to_str().expect("utf-8 path");
    let args = [
        "run",
        "-m",
        model,
        "-p",
        "The capital of France is",
        "-n",
        "4",
        "--temp",
        "0",
        "-t",
        "1",
    ];
    let plain = local_llm(&args);
    let with = local_llm(&[&args[..], &["--n-probs", "3"]].concat());
    assert!(with.status.success());
    assert_eq!(plain.stdout, with.stdout, "the text does not change");
    let stderr = String::from_utf8_lossy(&with.stderr);
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with('"') && l.contains(" | "))
        .collect();
    assert_eq!(lines.len(), 4, "{stderr}");
    for line in lines {
        // `"token" logprob | "alt" logprob, "alt" logprob, "alt" logprob`; greedy: the first
        // alternative is the token itself.
        let (token, alts) = line.split_once(" | ").expect("separator");
        assert_eq!(alts.matches(", \"").count(), 2, "{line}");
        assert!(alts.starts_with(token), "{line}");
        let lp: f64 = token.rsplit(' ').next().unwrap().parse().expect("logprob");
        assert!(lp <= 0.0, "{line}");
    }
    let bad = local_llm(&[&args[..], &["--n-probs", "21"]].concat());
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("top_logprobs"));
}

#[test]
fn grammar_and_json_schema_flags() {
    let dir = std::env::temp_dir().join(format!("local-llm-cli-grammar-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    // Bad grammars and schemas are reported before any model loads.
    let bad: &[(&[&str], &str)] = &[
        (&["--grammar", "root ::= (\"a\""], "invalid grammar: 1:"),
        (&["-j", r#"{"type": "kaboom"}"#], "#/type"),
        (&["--grammar-file", "/nonexistent/g.gbnf"], "cannot read"),
    ];
    for (flags, needle) in bad {
        let mut args = vec!["run", "-m", "/nonexistent/model.gguf", "-p", "x"];
        args.extend_from_slice(flags);
        let out = local_llm(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
    // At most one constraint.
    let out = local_llm(&["run", "-p", "x", "--grammar", "root ::= \"a\"", "-j", "{}"]);
    assert_eq!(out.status.code(), Some(2));

    let Some(model) = common::real_model("smollm2") else {
        return;
    };
    let model = model.to_str().expect("utf-8 path");
    let schema = dir.join("schema.json");
    std::fs::write(
        &schema,
        r#"{"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
            "required": ["city"], "additionalProperties": false}"#,
    )
    .expect("write");
    let grammar = dir.join("answer.gbnf");
    std::fs::write(&grammar, "# yes or no\nroot ::= (\"yes\" | \"no\") \"!\"\n").expect("write");
    let common_args = [
        "run", "-m", model, "--chat", "--temp", "0", "-t", "1", "-n", "60",
    ];
    let run = |extra: &[&str]| {
        let mut args = common_args.to_vec();
        args.extend_from_slice(extra);
        let out = local_llm(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8 output")
    };
    let text = run(&[
        "-p",
        "Name a city, in JSON.",
        "--json-schema-file",
        schema.to_str().unwrap(),
    ]);
    let value: serde_json::Value = serde_json::from_str(text.trim()).expect("JSON output");
    let object = value.as_object().expect("an object");
    assert!(object.len() == 1 && object["city"].is_string(), "{text}");
    let text = run(&[
        "-p",
        "Is water wet?",
        "--grammar-file",
        grammar.to_str().unwrap(),
    ]);
    assert!(["yes!", "no!"].contains(&text.trim_end()), "{text:?}");
    std::fs::remove_dir_all(&dir).ok();
}

#[path = "../../engine/tests/tokenizer_support/mod.rs"]
mod tokenizer_support;

/// `local-llm tokenize` on llama.cpp's vocab-only test files (no weights: it failed with
/// "missing tensor 'token_embd.weight'") gives the ids of llama.cpp's own expected output
/// (`models/ggml-vocab-*.gguf.out` for the texts of `.inp`, without BOS/EOS as
/// test-tokenizer-0 runs them).
#[test]
fn tokenize_reads_vocab_only_files_as_llama_cpp_does() {
    let mut checked = 0;
    for name in [
        "llama-bpe",
        "llama-spm",
        "qwen2",
        "phi-3",
        "gpt-2",
        "falcon",
        "starcoder",
        "command-r",
        "mpt",
        "refact",
        "qwen35",
        "deepseek-llm",
        "deepseek-coder",
        "gemma-4",
        "bert-bge",
    ] {
        let vocab = tokenizer_support::llama_cpp_vocab(name);
        let cases = tokenizer_support::llama_cpp_expected(name).expect("the .inp/.out files");
        for (text, want) in &cases {
            if text.is_empty() || text.starts_with('-') {
                continue; // not passable as `-p TEXT`
            }
            let out = local_llm(&[
                "tokenize",
                "-m",
                vocab.to_str().unwrap(),
                "-p",
                text,
                "--no-special",
            ]);
            assert!(
                out.status.success(),
                "{name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let got: Vec<u32> = serde_json::from_slice(&out.stdout).expect("ids as JSON");
            assert_eq!(&got, want, "{name}: {text:?}");
            checked += 1;
        }
    }
    eprintln!("{checked} texts tokenized as llama.cpp expects");
    assert!(checked >= 200, "only {checked} texts checked");
}

/// `info --json` on vocab-only files of llama.cpp's `models/` (no tensors; architectures this
/// engine does not run; the five the `gguf` package reads in about a second each, of the 19:
/// WordPiece, SentencePiece and byte-level BPE) and on a real model agrees with the PyPI `gguf`
/// package's reading (tools/gguf-oracle `summary`).
#[test]
fn info_json_reads_headers_as_the_gguf_package_does() {
    let script = common::repo_root().join("tools/gguf-oracle/gguf_oracle.py");
    let mut files: Vec<std::path::PathBuf> = ["bert-bge", "llama-spm", "gpt-2", "phi-3", "falcon"]
        .into_iter()
        .map(tokenizer_support::llama_cpp_vocab)
        .collect();
    let n_vocab_files = files.len();
    if let Some(model) = common::real_model("smollm2") {
        files.push(model);
    }
    for file in &files {
        let path = file.to_str().expect("utf-8 path");
        let out = local_llm(&["info", "--json", "-c", "512", "-m", path]);
        assert!(
            out.status.success(),
            "{path}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let ours: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let theirs: serde_json::Value =
            serde_json::from_str(&common::run_python(&script, &["summary", path])).expect("JSON");
        for (our_key, their_key) in [
            ("architecture", "architecture"),
            ("name", "name"),
            ("nParams", "n_params"),
            ("weightsBytes", "weights_bytes"),
            ("fileType", "file_type"),
            ("contextLength", "context_length"),
            ("nLayer", "n_layer"),
            ("nVocab", "n_vocab"),
            ("tokenizer", "tokenizer"),
            ("chatTemplate", "chat_template"),
        ] {
            assert_eq!(ours[our_key], theirs[their_key], "{path}: {our_key}");
        }
        let is_vocab_only = ours["nParams"] == 0;
        assert_eq!(ours["supported"], !is_vocab_only, "{path}");
        if !is_vocab_only {
            assert_eq!(ours["memory"]["contextSize"], 512, "{path}");
        }
    }
    eprintln!(
        "info --json agrees with the gguf package on {n_vocab_files} vocab-only files and SmolLM2"
    );
}

/// `run --in-prefix/--in-suffix` fills in the middle with llama.cpp's tokens (node-llama-cpp's
/// `generateInfillCompletion`) on a synthetic coder model with FIM tokens; `--spm-infill`
/// changes the layout; a model without FIM tokens is an error exit.
#[test]
fn run_infills_as_llama_cpp_does() {
    let model = common::synth_model("qwen2-fim");
    let path = model.to_str().expect("utf-8 path");
    let (prefix, suffix) = ("def add(a, b):\n    ", "\n    return c\n");
    let oracle = common::run_oracle(&json!({
        "cmd": "infill", "model": path, "n_predict": 16, "context_size": 512,
        "infills": [{"prefix": prefix, "suffix": suffix}],
    }));
    let theirs: Vec<u64> = oracle["results"][0]["tokens"]
        .as_array()
        .expect("tokens")
        .iter()
        .map(|t| t.as_u64().expect("id"))
        .collect();
    let tokens = |extra: &[&str]| -> Vec<u64> {
        let mut args = vec![
            "run",
            "-m",
            path,
            "--in-prefix",
            prefix,
            "--in-suffix",
            suffix,
            "-n",
            "16",
            "--temp",
            "0",
            "-t",
            "1",
            "-c",
            "512",
            "--print-tokens",
        ];
        args.extend_from_slice(extra);
        let out = local_llm(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        let line = stderr
            .lines()
            .find_map(|l| l.strip_prefix("tokens: "))
            .expect("--print-tokens line");
        serde_json::from_str(line).expect("token list")
    };
    let ours = tokens(&[]);
    let n = ours.len().min(theirs.len());
    assert!(n >= 4, "{ours:?} vs {theirs:?}");
    assert_eq!(ours[..n], theirs[..n]);
    assert_ne!(tokens(&["--spm-infill"]), ours);
    if let Some(smol) = common::real_model("smollm2") {
        let out = local_llm(&[
            "run",
            "-m",
            smol.to_str().unwrap(),
            "--in-prefix",
            "a",
            "--in-suffix",
            "b",
        ]);
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("fill-in-the-middle"));
    }
}

/// `--reasoning-format deepseek`: a `<think>` block (written under a grammar by a synthetic
/// qwen3 with Qwen 3's real template from llama.cpp's `models/templates`) goes to stderr and the
/// answer alone to stdout; `none` prints both on stdout; bad `--chat-template-kwargs` and
/// `--reasoning-budget` are clean errors.
#[test]
fn reasoning_format_splits_the_think_block_to_stderr() {
    let dir = std::env::temp_dir().join(format!("local-llm-cli-think-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let template = dir.join("qwen3.jinja");
    let source = tokenizer_support::llama_cpp_file("models/templates/Qwen-Qwen3-0.6B.jinja");
    std::fs::write(&template, source).unwrap();
    let model = dir.join("qwen3.gguf");
    let script = common::repo_root().join("tools/synth/make_model.py");
    common::run_python(
        &script,
        &[
            "qwen3".as_ref(),
            model.as_os_str(),
            "--chat-template".as_ref(),
            template.as_os_str(),
        ],
    );
    let grammar = r#"root ::= "<think>\n" [a-z] [a-z ]{3,29} "\n</think>\n\n" [a-z] [a-z ]{0,19}"#;
    let run = |format: &str| {
        let out = local_llm(&[
            "run",
            "-m",
            model.to_str().unwrap(),
            "--chat",
            "-p",
            "What is 2+2?",
            "-n",
            "48",
            "--temp",
            "0",
            "--grammar",
            grammar,
            "--reasoning-format",
            format,
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let (whole, _) = run("none");
    let whole = whole.trim_end_matches('\n');
    let (thought, answer) = whole
        .strip_prefix("<think>\n")
        .and_then(|rest| rest.split_once("\n</think>\n\n"))
        .unwrap_or_else(|| panic!("no block in {whole:?}"));
    let (stdout, stderr) = run("deepseek");
    assert_eq!(stdout.trim_end_matches('\n'), answer);
    assert!(stderr.contains(thought.trim()), "{stderr}");
    for bad in [
        ["--chat-template-kwargs", "[1]"],
        ["--reasoning-budget", "-2"],
    ] {
        let out = local_llm(&[
            "run",
            "-m",
            model.to_str().unwrap(),
            "-p",
            "hi",
            bad[0],
            bad[1],
        ]);
        assert_eq!(out.status.code(), Some(1), "{bad:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&bad[0][2..].replace('-', "_")) || err.contains(bad[0]),
            "{err}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
