//! Shared helpers for the engine's integration tests.
//!
//! Use from a test file with `mod common;`. The helpers panic with a message that says
//! what to run when something the tests need is missing (models: `scripts/setup/fetch-models.sh`,
//! oracles: `scripts/setup/setup-test-deps.sh`).
//!
//! Oracles (see docs/testing.md): llama.cpp through `tools/oracle/oracle.mjs` (node-llama-cpp),
//! and Python with the PyPI `gguf`, `numpy` and `jinja2` packages.

// Each test binary uses only some of these helpers.
#![allow(dead_code)]

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};

use local_llm_engine::backend::Threads;
use local_llm_engine::chat::ChatMessage;
use local_llm_engine::model::{KvCache, KvTypes, Output};
use local_llm_engine::sampling::SamplingParams;
use local_llm_engine::session::{
    Context, ContextOptions, ContextShift, FinishReason, GenerateRequest, Generation, LoadOptions,
    LoadedModel, Prompt, SpeculativeOptions,
};
use serde_json::Value;

/// The repository root (two levels above this crate's manifest).
pub fn repo_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .nth(2)
        .expect("the engine crate lives at rust/engine")
        .to_path_buf()
}

/// The local-llm cache directory: `$LOCAL_LLM_CACHE`, else `$HOME/.cache/local-llm`.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("LOCAL_LLM_CACHE").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").expect("HOME is not set (or set LOCAL_LLM_CACHE)");
    PathBuf::from(home).join(".cache").join("local-llm")
}

/// The path of a real model fetched by `scripts/setup/fetch-models.sh`: `"smollm2"`, `"gemma3"`
/// or `"minilm"` (all-MiniLM-L6-v2 converted to GGUF), or `None` when `LOCAL_LLM_SKIP_REAL_MODELS=1` (the test then returns early: it is skipped,
/// and says so on stderr). The one helper every test uses to find a real model.
///
/// Panics when the name is unknown or the file is missing (and the skip variable is not set).
pub fn real_model(name: &str) -> Option<PathBuf> {
    if std::env::var("LOCAL_LLM_SKIP_REAL_MODELS").is_ok_and(|v| v == "1") {
        eprintln!("LOCAL_LLM_SKIP_REAL_MODELS=1: skipping what needs the {name} model");
        return None;
    }
    Some(model_path(name))
}

/// The path of real model `name`; panics when the name is unknown or the file is missing.
fn model_path(name: &str) -> PathBuf {
    let file = match name {
        "smollm2" => "SmolLM2-135M-Instruct.Q4_1.gguf",
        "gemma3" => "gemma-3-270m-q4_k_m.gguf",
        "minilm" => "all-MiniLM-L6-v2.f16.gguf",
        other => panic!("unknown model {other:?}: expected \"smollm2\", \"gemma3\" or \"minilm\""),
    };
    let path = cache_dir().join("models").join(file);
    assert!(
        path.is_file(),
        "model {name} not found at {}: run scripts/setup/fetch-models.sh {name} \
         (or set LOCAL_LLM_SKIP_REAL_MODELS=1 to skip real-model tests)",
        path.display()
    );
    path
}

/// The Python interpreter for test scripts: `.cache/venv/bin/python3` in the repo when
/// `scripts/setup/setup-test-deps.sh` made that venv, else `python3` from PATH.
pub fn python() -> PathBuf {
    let venv = repo_root().join(".cache/venv/bin/python3");
    if venv.is_file() {
        venv
    } else {
        PathBuf::from("python3")
    }
}

/// Runs a Python script with arguments and returns its stdout.
///
/// Panics (showing stderr) when Python can't start or the script exits non-zero.
pub fn run_python<S: AsRef<std::ffi::OsStr>>(script: &Path, args: &[S]) -> String {
    let output = Command::new(python())
        .arg(script)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run python3 ({e}): run scripts/setup/setup-test-deps.sh")
        });
    assert!(
        output.status.success(),
        "python3 {} failed ({}):\n{}",
        script.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("python printed non-UTF-8 output")
}

/// Sends one request to the llama.cpp oracle (`node tools/oracle/oracle.mjs`) and returns
/// its JSON response. See `tools/oracle/oracle.mjs` for the commands (`generate`,
/// `logits`, `info`, `check`).
///
/// Panics when node-llama-cpp isn't installed, or the oracle reports an error.
pub fn run_oracle(request: &Value) -> Value {
    let dir = repo_root().join("tools/oracle");
    assert!(
        dir.join("node_modules/node-llama-cpp").is_dir(),
        "tools/oracle/node_modules is missing: run scripts/setup/setup-test-deps.sh"
    );
    let mut child = Command::new("node")
        .arg(dir.join("oracle.mjs"))
        .current_dir(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run node ({e}): Node.js 20 is required"));
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(request.to_string().as_bytes())
        .expect("writing the oracle request");
    let output = child.wait_with_output().expect("waiting for the oracle");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let response: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "oracle printed no JSON ({e}); status {}\nstdout: {stdout}\nstderr: {stderr}",
            output.status
        )
    });
    if let Some(error) = response.get("error") {
        panic!(
            "oracle error: {}\nstderr: {stderr}",
            error.as_str().unwrap_or_default()
        );
    }
    assert!(
        output.status.success(),
        "oracle exited with {}\nstderr: {stderr}",
        output.status
    );
    response
}

/// The kinds of synthetic model `tools/synth/make_model.py` writes.
pub const SYNTH_KINDS: &[&str] = &[
    "llama-spm",
    "llama-bpe",
    "qwen2",
    "qwen2-fim",
    "qwen3",
    "mistral-f32",
];

/// The synthetic models of the architectures beyond the llama family, one per architecture
/// (`rust/cli/tests/architectures.rs` runs them against llama.cpp), and the embedding and
/// rerank variants of make_model.py's models (`llama-embed`, `qwen3-rerank`: not in
/// [`SYNTH_KINDS`], whose tests generate text from every kind).
pub const ARCH_KINDS: &[&str] = &[
    "gemma",
    "gemma2",
    "gemma3",
    "gemma4",
    "gemma4-moe",
    "gemma3n",
    "lfm2",
    "lfm2-swa",
    "qwen35",
    "phi3",
    "qwen3moe",
    "smollm3",
    "granite",
    "granitemoe",
    "granitehybrid",
    "olmo2",
    "exaone4",
    "ernie4_5",
    "mistral3",
    "stablelm",
    "stablelm-parallel",
    "starcoder2",
    "hunyuan-dense",
    "llama-embed",
    "qwen3-rerank",
];

/// The synthetic encoder (BERT-family) models `tools/synth/make_encoder.py` writes
/// (`rust/cli/tests/encoders.rs` runs them against llama.cpp's llama-embedding).
pub const ENCODER_KINDS: &[&str] = &[
    "bert",
    "bert-rank",
    "nomic-bert",
    "gemma-embedding",
    "modern-bert",
    "modern-bert-rank",
    "jina-bert-v2",
    "jina-bert-v2-rank",
];

/// The path of a synthetic GGUF model of `kind` (one of [`SYNTH_KINDS`], [`ARCH_KINDS`] or
/// [`ENCODER_KINDS`], or one of those with `+f32`: the same model with every tensor F32), seed
/// 0.
///
/// Models are written by `tools/synth/make_model.py` (`make_encoder.py` for encoders) on first
/// use into
/// `.cache/synth/<hash of the generator's sources>/` in the repo, so a change to the
/// generator makes new files; within one test process each kind is made at most once.
pub fn synth_model(kind: &str) -> PathBuf {
    let base = kind.strip_suffix("+f32").unwrap_or(kind);
    assert!(
        SYNTH_KINDS.contains(&base) || ARCH_KINDS.contains(&base) || ENCODER_KINDS.contains(&base),
        "unknown synthetic model kind {kind:?}"
    );
    static MADE: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let mut made = MADE
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(path) = made.get(kind) {
        return path.clone();
    }
    let synth = repo_root().join("tools/synth");
    let mut hasher = DefaultHasher::new();
    for file in [
        "make_model.py",
        "gemma4.py",
        "gemma3n.py",
        "lfm2.py",
        "qwen35.py",
        "granitehybrid.py",
        "make_encoder.py",
        "vocab.py",
    ] {
        std::fs::read(synth.join(file))
            .unwrap_or_else(|e| panic!("reading tools/synth/{file}: {e}"))
            .hash(&mut hasher);
    }
    let dir = repo_root()
        .join(".cache/synth")
        .join(format!("{:016x}", hasher.finish()));
    let path = dir.join(format!("{kind}.gguf"));
    if !path.is_file() {
        std::fs::create_dir_all(&dir).expect("creating .cache/synth");
        // Write under a unique name, then rename: other test processes may race us.
        let tmp = dir.join(format!("{kind}.{}.tmp", std::process::id()));
        if ENCODER_KINDS.contains(&base) {
            let mut args = vec![std::ffi::OsStr::new(base), tmp.as_os_str()];
            if base != kind {
                args.push(std::ffi::OsStr::new("--f32"));
            }
            run_python(&synth.join("make_encoder.py"), &args);
        } else {
            run_python(
                &synth.join("make_model.py"),
                &[std::ffi::OsStr::new(kind), tmp.as_os_str()],
            );
        }
        std::fs::rename(&tmp, &path).expect("renaming the synthetic model");
    }
    made.insert(kind.to_string(), path.clone());
    path
}

/// The real model `name` ([`real_model`]) loaded with default options; `None` when skipped.
pub fn load_real_model(name: &str) -> Option<Arc<LoadedModel>> {
    let path = real_model(name)?;
    Some(LoadedModel::load(&path, &LoadOptions::default()).expect("model loads"))
}

/// A context of `model` with `n_ctx` positions, `threads` threads and `max_sequences` sequences.
pub fn context(model: &Arc<LoadedModel>, n_ctx: u32, threads: u32, max_sequences: u32) -> Context {
    let options = ContextOptions {
        n_ctx,
        threads,
        max_sequences,
        ..ContextOptions::default()
    };
    Context::new(model.clone(), &options).expect("context")
}

/// A greedy request of exactly `max_tokens` tokens (a random model would end early).
pub fn greedy(prompt: Prompt, max_tokens: usize) -> GenerateRequest {
    let mut r = GenerateRequest::new(prompt);
    r.sampling = SamplingParams::greedy();
    r.max_tokens = max_tokens;
    r.stop_at_eog = false;
    r
}

/// [`greedy`] with a text prompt.
pub fn greedy_text(prompt: &str, max_tokens: usize) -> GenerateRequest {
    greedy(Prompt::Text(prompt.into()), max_tokens)
}

/// Four different greedy requests (two prompts longer than a 32-position window) generate in
/// one batch of four sequences exactly what each generates alone.
pub fn assert_batch_of_four_equals_alone(model: &Arc<LoadedModel>, label: &str) {
    let long = "the quick brown fox jumps over the lazy dog ".repeat(6);
    let requests = [
        greedy_text("The sea was calm", 24),
        greedy_text(&format!("{long} and then"), 20),
        greedy_text("List three colours", 16),
        greedy_text(&format!("Once upon a time {long}"), 28),
    ];
    let alone: Vec<Vec<u32>> = requests
        .iter()
        .map(|r| {
            let mut ctx = context(model, 256, 2, 1);
            ctx.generate(r, &mut |_| {}, None).unwrap().tokens
        })
        .collect();
    for i in 0..alone.len() {
        for j in i + 1..alone.len() {
            assert_ne!(
                alone[i], alone[j],
                "{label}: requests {i} and {j} give the same tokens"
            );
        }
    }
    let mut ctx = context(model, 256, 2, 4);
    let batch = ctx.generate_batch(&requests, None).unwrap();
    for (i, (b, a)) in batch.iter().zip(&alone).enumerate() {
        assert_eq!(&b.as_ref().unwrap().tokens, a, "{label}: request {i}");
    }
}

/// A context that generated from a prompt and saved its state: a context restored from that
/// file continues exactly as the first one does, without evaluating the prompt again, and as
/// a fresh context evaluating everything does.
pub fn assert_restored_state_continues(model: &Arc<LoadedModel>, label: &str) {
    let dir = std::env::temp_dir().join(format!("local-llm-{label}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{label}.state"));
    let prompt = "A short story about a robot who learns to paint";
    let generate =
        |ctx: &mut Context, r: &GenerateRequest| ctx.generate(r, &mut |_| {}, None).unwrap();
    let mut direct = context(model, 256, 2, 1);
    let g1 = generate(&mut direct, &greedy_text(prompt, 40));
    direct.save_state(&file).unwrap();
    let mut tokens = model.tokenize(prompt, true, false).unwrap();
    tokens.extend(&g1.tokens);
    let next = greedy(Prompt::Tokens(tokens), 24);
    let want = generate(&mut direct, &next);
    let mut restored = context(model, 256, 2, 1);
    restored.load_state(&file).unwrap();
    let got = generate(&mut restored, &next);
    // The prompt was restored, not evaluated again.
    let evaluated = got.timings.prompt_tokens;
    assert!(
        evaluated < 4,
        "{label}: {evaluated} prompt tokens evaluated"
    );
    assert_eq!(got.tokens, want.tokens, "{label}: restored");
    let fresh = generate(&mut context(model, 256, 2, 1), &next);
    assert_eq!(fresh.tokens, want.tokens, "{label}: fresh");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Feeding `tokens` one at a time gives, bit for bit, the last logits of one forward pass over
/// all of them (a cache of `n_ctx` positions, 2 threads).
pub fn assert_token_by_token_equals_one_batch(
    model: &Arc<LoadedModel>,
    tokens: &[u32],
    n_ctx: usize,
) {
    let threads = Threads::new(2).unwrap();
    let forward = |tokens: &[u32], cache: &mut KvCache| {
        model
            .model()
            .forward(tokens, cache, &threads, Output::LastLogits)
            .unwrap()
    };
    let mut cache = model.model().new_cache(n_ctx, KvTypes::default()).unwrap();
    let whole = forward(tokens, &mut cache);
    let mut cache = model.model().new_cache(n_ctx, KvTypes::default()).unwrap();
    let mut last = Vec::new();
    for t in tokens {
        last = forward(&[*t], &mut cache);
    }
    assert_eq!(last, whole);
}

/// A greedy chat request: one user message, at most `max_tokens` generated tokens.
pub fn greedy_chat(text: &str, max_tokens: usize) -> GenerateRequest {
    let mut r = GenerateRequest::new(Prompt::Chat(vec![ChatMessage::new("user", text)]));
    r.sampling = SamplingParams::greedy();
    r.max_tokens = max_tokens;
    r
}

/// `VmRSS` or `VmHWM` (peak) of this process in bytes, from `/proc/self/status`.
pub fn status_bytes(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"));
    let kb: u64 = line.trim().trim_end_matches("kB").trim().parse().unwrap();
    kb * 1024
}

fn run(ctx: &mut Context, r: &GenerateRequest) -> Generation {
    ctx.generate(r, &mut |_| {}, None).expect("generation")
}

/// Speculative decoding on `model` (the synthetic `kind`, recurrent) with a draft model of
/// other weights (seed 1, same vocabulary) equals plain decoding, with drafts rejected (so a
/// recurrent state goes back, and the chosen token and any accepted drafts may be fed
/// again); the context then continues as a fresh one.
pub fn assert_other_draft_equals_plain(model: &Arc<LoadedModel>, kind: &str) {
    // A draft model of other weights (seed 1, same vocabulary): the target rejects its drafts
    // (all or some), which leaves the step's chosen token and any accepted drafts to feed
    // again where the state goes back only to the step's start.
    let dir = std::env::temp_dir().join(format!("{kind}-draft-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("seed1.gguf");
    let script = repo_root().join("tools/synth/make_model.py");
    run_python(&script, &[kind, path.to_str().unwrap(), "--seed", "1"]);
    let draft = LoadedModel::load(&path, &LoadOptions::default()).expect("the draft loads");
    std::fs::remove_dir_all(&dir).unwrap();
    let r = greedy_text("The history of the harbour", 48);
    let plain = run(&mut context(model, 256, 2, 1), &r);
    let spec = SpeculativeOptions {
        draft_n_max: 8,
        ..SpeculativeOptions::default()
    };
    let mut ctx = context(model, 256, 2, 1);
    ctx.set_speculative(&spec, Some(draft))
        .expect("speculation");
    let fast = run(&mut ctx, &r);
    assert_eq!(fast.tokens, plain.tokens);
    let t = &fast.timings;
    assert!(
        t.draft_accepted < t.draft_tokens,
        "{} of {} drafts accepted: no rejection",
        t.draft_accepted,
        t.draft_tokens
    );
    // After the generation the context continues as a fresh one (no pending token left).
    let mut next = r.clone();
    next.prompt = Prompt::Tokens(
        [
            model
                .tokenize("The history of the harbour", true, false)
                .unwrap(),
            fast.tokens.clone(),
        ]
        .concat(),
    );
    let continued = run(&mut ctx, &next);
    let fresh = run(&mut context(model, 256, 2, 1), &next);
    assert_eq!(continued.tokens, fresh.tokens);
}

/// A recurrent `model`'s context shift: the generation goes on past the context (its kept
/// tokens evaluated again), while shifting the cache itself is refused with a reason.
pub fn assert_recurrent_context_shift(model: &Arc<LoadedModel>) {
    let mut ctx = context(model, 64, 2, 1);
    let mut r = greedy_text("The sea was calm and the sky was grey", 100);
    r.context_shift = Some(ContextShift { n_keep: Some(4) });
    let g = run(&mut ctx, &r);
    assert_eq!(g.tokens.len(), 100);
    assert_eq!(g.finish_reason, FinishReason::MaxTokens);
    // Shifting the cache itself is refused with a reason.
    let mut cache = model.model().new_cache(64, KvTypes::default()).unwrap();
    let tokens = model
        .tokenize("The sea was calm and the sky", true, false)
        .unwrap();
    let threads = Threads::new(2).unwrap();
    model
        .model()
        .forward(&tokens, &mut cache, &threads, Output::LastLogits)
        .unwrap();
    let err = model.model().shift_cache(&mut cache, 2, 2).unwrap_err();
    assert!(err.to_string().contains("recurrent"), "{err}");
}

/// [`assert_token_by_token_equals_one_batch`] on a sentence of a dozen tokens (a 64-position
/// context), the recurrent models' check that a state carried token by token equals one
/// pass over the batch.
pub fn assert_sentence_token_by_token_equals_one_batch(model: &Arc<LoadedModel>) {
    let tokens = model.tokenize(SENTENCE, true, false).unwrap();
    assert_token_by_token_equals_one_batch(model, &tokens, 64);
}

/// The sentence of [`assert_sentence_token_by_token_equals_one_batch`].
const SENTENCE: &str = "The sea was calm and the sky was grey over the harbour";

/// The logits of every token of a sentence are the same bits at 1 and 2 threads (the
/// products split by rows; recurrent heads each on one thread).
pub fn assert_sentence_logits_do_not_depend_on_threads(model: &Arc<LoadedModel>) {
    let tokens = model.tokenize(SENTENCE, true, false).unwrap();
    let logits = |n: usize| {
        let threads = Threads::new(n).unwrap();
        let mut cache = model.model().new_cache(64, KvTypes::default()).unwrap();
        let forward = model
            .model()
            .forward(&tokens, &mut cache, &threads, Output::AllLogits);
        forward.unwrap()
    };
    assert_eq!(logits(1), logits(2));
}

/// The memory of a recurrent `model` (synthetic `kind`) for 100 positions: `total` bytes in
/// the estimate (`kv_cache_bytes`), in a new cache and in `inspect`'s, whose cache is
/// recurrent.
pub fn assert_recurrent_memory(model: &Arc<LoadedModel>, kind: &str, total: usize) {
    let config = model.model().config();
    assert_eq!(config.kv_cache_bytes(100, KvTypes::default()), total as u64);
    let cache = model.model().new_cache(100, KvTypes::default()).unwrap();
    assert_eq!(cache.size_bytes(), total);
    assert!(cache.is_recurrent());
    let info = local_llm_engine::session::inspect(synth_model(kind), 100).unwrap();
    assert_eq!(info.memory.unwrap().kv_cache_bytes, total as u64);
}

/// On `ctx` (a recurrent `model`'s, holding `near` and what it generated), a prompt of
/// `near` but its last `back` tokens and another ending, further back than the state can go:
/// all of it is evaluated again, and it generates as a fresh context.
pub fn assert_cut_prompt_is_evaluated_again(
    model: &Arc<LoadedModel>,
    ctx: &mut Context,
    near: &[u32],
    back: usize,
) {
    let mut far = near[..near.len() - back].to_vec();
    far.extend(model.tokenize(" a different ending", false, false).unwrap());
    let again = run(ctx, &greedy(Prompt::Tokens(far.clone()), 12));
    assert_eq!(again.timings.prompt_tokens, far.len());
    let fresh = run(
        &mut context(model, 512, 2, 1),
        &greedy(Prompt::Tokens(far), 12),
    );
    assert_eq!(again.tokens, fresh.tokens);
}
