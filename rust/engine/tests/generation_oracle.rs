//! Greedy generation on the real models, token for token against llama.cpp (node-llama-cpp),
//! for raw and chat-templated prompts. Where a token differs, llama.cpp's own logits at that
//! position decide whether it is a genuine near-tie; near-ties are then compared teacher-forced.
//!
//! What counts as a near-tie is set by the models' measured numerical noise floor. Both engines
//! quantize every activation vector to 8 bits before each matmul, so an ulp-level difference in
//! a float sum can flip one rounding and the flip propagates: our own AVX2 and portable kernels,
//! which differ by ~1e-7 relative per dot product, move SmolLM2's top-2 gap by 0.05 at the first
//! position and Gemma 3's by 1.44 logits at position 41 of the `fibonacci` prompt. A gap below
//! that noise floor cannot decide a token. (With llama.cpp's x86 activation quantizer, our
//! SmolLM2 logits equal llama.cpp's to four decimals at the first positions.)

mod common;

use std::sync::Arc;

use local_llm_engine::chat::ChatMessage;
use local_llm_engine::model::Output;
use local_llm_engine::session::{Context, ContextOptions, LoadOptions, LoadedModel};
use serde_json::json;

const N_PREDICT: usize = 64;
/// Top-2 logit gap in llama.cpp below which a divergence counts as a near-tie (below the noise
/// floor measured above).
const NEAR_TIE: f64 = 1.0;
/// Our own top-2 gap above which teacher-forced argmax must agree with llama.cpp.
const CLEAR_MARGIN: f32 = 1.5;

fn argmax_and_margin(logits: &[f32]) -> (u32, f32) {
    let mut best = (0usize, f32::NEG_INFINITY);
    let mut second = f32::NEG_INFINITY;
    for (i, &v) in logits.iter().enumerate() {
        if v > best.1 {
            second = best.1;
            best = (i, v);
        } else if v > second {
            second = v;
        }
    }
    (best.0 as u32, best.1 - second)
}

/// Greedy decoding with our engine, stopping after an end-of-generation token (included) like
/// the oracle does.
fn greedy(ctx: &mut Context, prompt: &[u32]) -> Vec<u32> {
    ctx.clear();
    let mut logits = ctx
        .eval(prompt, Output::LastLogits, &mut |_, _| {}, None)
        .expect("prompt eval");
    let mut out = Vec::new();
    while out.len() < N_PREDICT {
        let (tok, _) = argmax_and_margin(&logits);
        out.push(tok);
        if ctx.model().tokenizer().is_eog(tok) {
            break;
        }
        logits = ctx
            .eval(&[tok], Output::LastLogits, &mut |_, _| {}, None)
            .expect("decode");
    }
    out
}

fn raw_prompts() -> Vec<String> {
    [
        "The capital of France is",
        "Once upon a time, in a small village by the sea,",
        "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
        "Photosynthesis is the process by which",
        "1, 2, 3, 5, 8, 13,",
        "Les montagnes de la Suisse sont",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn chat_prompts() -> Vec<Vec<ChatMessage>> {
    let user = |s: &str| ChatMessage::new("user", s);
    let system = |s: &str| ChatMessage::new("system", s);
    vec![
        vec![user("What is the capital of France?")],
        vec![user("Write a haiku about the ocean.")],
        vec![
            system("You are a terse assistant. Answer in one sentence."),
            user("Why is the sky blue?"),
        ],
        vec![user("List three fruits.")],
        vec![user("Explain what a hash map is to a child.")],
    ]
}

fn check_model(name: &str, path: &std::path::Path, with_chat: bool) {
    let model: Arc<LoadedModel> =
        LoadedModel::load(path, &LoadOptions::default()).expect("load model");
    let mut ctx = Context::new(
        model.clone(),
        &ContextOptions {
            n_ctx: 512,
            n_batch: 512,
            threads: 2,
            ..ContextOptions::default()
        },
    )
    .expect("context");

    let mut prompts: Vec<(String, Vec<u32>)> = Vec::new();
    for p in raw_prompts() {
        prompts.push((p.clone(), model.tokenize(&p, true, true).expect("tokenize")));
    }
    if with_chat {
        for msgs in chat_prompts() {
            prompts.push((
                format!("chat: {}", msgs.last().map_or("", |m| m.content.as_str())),
                model.chat_tokens(&msgs).expect("chat tokens"),
            ));
        }
    }
    let request = json!({
        "cmd": "generate",
        "model": path.to_string_lossy(),
        "n_predict": N_PREDICT,
        "context_size": 512,
        "prompts": prompts.iter().map(|(_, t)| json!({"tokens": t})).collect::<Vec<_>>(),
    });
    let oracle = common::run_oracle(&request);
    let results = oracle["results"].as_array().expect("oracle results");

    let mut exact = 0;
    let mut failures = Vec::new();
    for ((label, prompt), res) in prompts.iter().zip(results) {
        let expected: Vec<u32> = serde_json::from_value(res["tokens"].clone()).expect("tokens");
        let ours = greedy(&mut ctx, prompt);
        if ours == expected {
            exact += 1;
            continue;
        }
        let i = ours
            .iter()
            .zip(&expected)
            .take_while(|(a, b)| a == b)
            .count();
        if i == ours.len().min(expected.len()) {
            failures.push(format!(
                "{label}: lengths differ ({} vs {})",
                ours.len(),
                expected.len()
            ));
            continue;
        }
        // llama.cpp's view of the diverging position.
        let mut seq = prompt.clone();
        seq.extend_from_slice(&expected[..i]);
        let pos = seq.len() - 1;
        let lg = common::run_oracle(&json!({
            "cmd": "logits", "model": path.to_string_lossy(), "tokens": seq,
            "positions": [pos], "top_k": 3, "context_size": 512,
        }));
        let top = &lg["positions"][0]["top"];
        let gap = -top[1]["logit_delta"].as_f64().unwrap_or(f64::NEG_INFINITY);
        eprintln!(
            "{name} [{label}] diverges at generated token {i}: ours {} llama.cpp {}; llama.cpp top-2 gap {gap:.4}",
            ours[i], expected[i]
        );
        if gap >= NEAR_TIE {
            failures.push(format!(
                "{label}: token {i} differs (ours {}, llama.cpp {}) and llama.cpp's top-2 gap {gap:.3} is not a near-tie",
                ours[i], expected[i]
            ));
            continue;
        }
        // Teacher-forced: feed llama.cpp's sequence, compare argmax where our margin is clear.
        let mut full = prompt.clone();
        full.extend_from_slice(&expected);
        ctx.clear();
        let logits = ctx
            .eval(
                &full[..full.len() - 1],
                Output::AllLogits,
                &mut |_, _| {},
                None,
            )
            .expect("teacher-forced eval");
        let n_vocab = model.model().config().n_vocab;
        let mut clear = 0;
        for (k, &want) in expected.iter().enumerate() {
            let row = &logits[(prompt.len() - 1 + k) * n_vocab..(prompt.len() + k) * n_vocab];
            let (got, margin) = argmax_and_margin(row);
            if margin > CLEAR_MARGIN {
                clear += 1;
                if got != want {
                    failures.push(format!(
                        "{label}: teacher-forced token {k}: ours {got} (margin {margin:.3}) vs llama.cpp {want}"
                    ));
                }
            }
        }
        eprintln!("{name} [{label}] near-tie (gap {gap:.4}); teacher-forced agreement checked at {clear}/{} clear positions", expected.len());
    }
    eprintln!(
        "{name}: {exact}/{} prompts identical to llama.cpp for {N_PREDICT} greedy tokens",
        prompts.len()
    );
    assert!(failures.is_empty(), "{name}: {failures:#?}");
}

fn check_real(name: &str) {
    if let Some(path) = common::real_model(name) {
        check_model(name, &path, true);
    }
}

#[test]
fn smollm2_greedy_matches_llama_cpp() {
    check_real("smollm2");
}

#[test]
fn gemma3_greedy_matches_llama_cpp() {
    check_real("gemma3");
}

/// Synthetic models with random weights written by tools/synth (llama with both tokenizer
/// kinds, qwen2 with QKV biases, qwen3 with QK-norm).
#[test]
fn synthetic_architectures_match_llama_cpp() {
    for kind in ["llama-spm", "llama-bpe", "qwen2", "qwen3"] {
        check_model(kind, &common::synth_model(kind), false);
    }
}
