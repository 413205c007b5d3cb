//! Encoder (BERT-family) embeddings and rerank scores end to end against llama.cpp's
//! llama-embedding (0c1e570, the PyPI sdist `llama-cpp-python==0.3.36`, built by
//! `scripts/setup/build-llama.sh`), on random-weight models written by
//! `tools/synth/make_encoder.py` (WordPiece vocabulary, so llama.cpp tokenizes the texts itself
//! and we ours): each kind with its mix of weight types and with every tensor F32.
//!
//! For every text, our embedding (`local-llm embedding --embd-output-format json`) and
//! llama.cpp's have a cosine similarity of at least [`MIN_COSINE_F32`] on F32 files and
//! [`MIN_COSINE`] with their mix of weight types, for the model's own pooling
//! and for cls, last and none (one vector per token), and for a decoder (the synthetic qwen3)
//! with last-token pooling as Qwen3-Embedding; rerank scores (`--pooling rank`) of the
//! cross-encoders (bert, modern-bert, jina-bert-v2) and of Qwen3-Reranker (its template,
//! yes/no probabilities) are within [`F32_SCORE_TOLERANCE`] / [`MIXED_SCORE_TOLERANCE`]
//! (ModernBERT's head: [`MODERN_F32_SCORE_TOLERANCE`] / [`MODERN_MIXED_SCORE_TOLERANCE`]).
//! `LOCAL_LLM_SKIP_LLAMA_SOURCES=1` skips the comparison.

#[path = "../../engine/tests/common/mod.rs"]
mod common;
// Its perplexity-size helpers serve the llama-perplexity tests.
#[allow(dead_code)]
mod support;

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use support::{run, run_llama_until, script_path, skip};

/// Least cosine similarity between our vector and llama.cpp's.
const MIN_COSINE: f64 = 0.9999;
/// The same on F32 files (no kernel's rounding involved: the architecture's maths alone).
const MIN_COSINE_F32: f64 = 0.99999;
/// The same for per-token vectors of the 6-layer gemma-embedding file with its mix of types
/// (Q8_0 rounding grows through its layers: measured 0.99972; 0.9999999 in F32), and for
/// the 4-layer modern-bert file's first-token and per-token vectors (its sharper attention,
/// Q/K gain 1.5, magnifies the rounding: measured 0.99983 and 0.99974; 0.9999993 in F32).
const MIN_COSINE_DEEP_TOKENS: f64 = 0.9995;
/// Largest difference of rerank scores, relative to max(1, |llama.cpp's score|): F32 files
/// (llama.cpp prints scores with 3 decimals, and jina-bert-v2's head on the first token's
/// state differs by up to 1.1e-3) and files with their mix of weight types (the
/// classification head magnifies the hidden state's rounding differences: measured 2.5e-3).
const F32_SCORE_TOLERANCE: f64 = 2e-3;
const MIXED_SCORE_TOLERANCE: f64 = 1e-2;
/// The same for ModernBERT's head (dense, GELU through llama.cpp's f16 table, LayerNorm, a
/// gain-4 output), which magnifies more: measured 2.0e-3 (F32) and 1.6e-2 (mixed types).
const MODERN_F32_SCORE_TOLERANCE: f64 = 5e-3;
const MODERN_MIXED_SCORE_TOLERANCE: f64 = 3e-2;

/// Texts with words, punctuation, digits, accents, CJK and an unknown character.
const TEXTS: &str = "The sea was calm this morning, and the boats went out.\n\
                     A fisherman counted his nets: one, two, three (12 in all)!\n\
                     Café naïve CRÈME brûlée, 日本語 and ✓\n\
                     the the the sea sea water";

/// Rerank pairs: a query and a document per line, tab-separated.
const PAIRS: &str = "what is the sea?\tThe sea was calm this morning.\n\
                     what is the sea?\tA fisherman counted his nets.\n\
                     who sings?\tTell me a story about a boat that learned to sing.";

/// The vectors of an `--embd-output-format json` report (the JSON object at the start of
/// stdout; the log follows it).
fn vectors(report: &str) -> Vec<Vec<f64>> {
    parse_vectors(report).unwrap_or_else(|e| panic!("{e} in:\n{report}"))
}

/// [`vectors`], or what is wrong with the report.
fn parse_vectors(report: &str) -> Result<Vec<Vec<f64>>, String> {
    let start = report
        .find("{\n  \"object\": \"list\"")
        .ok_or("no JSON list")?;
    let doc: Value = serde_json::Deserializer::from_str(&report[start..])
        .into_iter()
        .next()
        .ok_or("no JSON value")?
        .map_err(|e| format!("bad JSON ({e})"))?;
    let data = doc["data"].as_array().ok_or("no data")?;
    let vectors: Vec<Vec<f64>> = data
        .iter()
        .map(|d| {
            let values = d["embedding"].as_array().ok_or("no embedding")?;
            values
                .iter()
                .map(|v| v.as_f64().ok_or_else(|| format!("not a number: {v}")))
                .collect::<Result<_, String>>()
        })
        .collect::<Result<_, String>>()?;
    // A garbled report can still be JSON: one vector then has a number more or less.
    match vectors.first() {
        Some(first) if vectors.iter().any(|v| v.len() != first.len()) => {
            Err("vectors of unequal lengths".into())
        }
        _ => Ok(vectors),
    }
}

/// Runs llama-embedding until its JSON report is whole (see [`support::run_llama_until`]).
fn run_llama_json(cmd: &mut Command) -> String {
    run_llama_until(cmd, "whole JSON list", |r| parse_vectors(r).is_ok())
}

fn cosine(a: &[f64], b: &[f64]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
    dot / (norm(a) * norm(b))
}

/// llama-embedding's and our reports for `model` with `args` (JSON output, 2 threads).
fn both(llama: &Path, model: &Path, args: &[&str]) -> (String, String) {
    let common = ["--embd-output-format", "json", "-t", "2"];
    let mut cmd = Command::new(llama);
    cmd.arg("-m").arg(model).args(common).args(args);
    let theirs = run_llama_json(&mut cmd);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_local-llm"));
    cmd.arg("embedding")
        .arg("-m")
        .arg(model)
        .args(common)
        .args(args);
    (theirs, run(&mut cmd))
}

#[test]
fn encoder_embeddings_match_llama_embedding() {
    if skip() {
        return;
    }
    let llama = script_path("build-llama.sh", &["llama-embedding", "native"]);
    let mut failures = Vec::new();
    // The encoders, and a decoder embedding with last-token pooling (Qwen3-Embedding's).
    let cases: [(&str, &[&str]); 13] = [
        ("bert", &["", "cls", "last", "none"]),
        ("bert+f32", &["", "cls", "last", "none"]),
        ("nomic-bert", &["", "cls", "last", "none"]),
        ("nomic-bert+f32", &["", "cls", "last", "none"]),
        ("modern-bert", &["", "cls", "none"]),
        ("modern-bert+f32", &["", "cls", "none"]),
        ("jina-bert-v2", &["", "cls", "none"]),
        ("jina-bert-v2+f32", &["", "cls", "none"]),
        ("gemma-embedding", &["", "none"]),
        ("gemma-embedding+f32", &["", "none"]),
        ("llama-embed", &[""]),
        ("llama-embed+f32", &["", "last"]),
        ("qwen3+f32", &["last", "mean"]),
    ];
    for (kind, poolings) in cases {
        let model = common::synth_model(kind);
        for &pooling in poolings {
            let mut args = vec!["-p", TEXTS];
            if !pooling.is_empty() {
                args.extend(["--pooling", pooling]);
            }
            let (theirs, ours) = both(&llama, &model, &args);
            let (theirs, ours) = (vectors(&theirs), vectors(&ours));
            assert_eq!(ours.len(), theirs.len(), "{kind} {pooling}: vector count");
            let worst = ours
                .iter()
                .zip(&theirs)
                .map(|(a, b)| cosine(a, b))
                .fold(f64::INFINITY, f64::min);
            eprintln!(
                "{kind:<16} pooling {:<5} {:>3} vectors, least cosine {worst:.7}",
                if pooling.is_empty() { "model" } else { pooling },
                ours.len()
            );
            let bound = match (kind.ends_with("+f32"), kind, pooling) {
                (true, ..) => MIN_COSINE_F32,
                (false, "gemma-embedding", "none") => MIN_COSINE_DEEP_TOKENS,
                (false, "modern-bert", "cls" | "none") => MIN_COSINE_DEEP_TOKENS,
                _ => MIN_COSINE,
            };
            if worst.is_nan() || worst < bound {
                failures.push(format!("{kind} {pooling}: least cosine {worst}"));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:?}");
}

/// The scores of llama-embedding's summary lines ("rerank score J: S", or "rerank score J: S
/// [label]" once per label), per pair; `None` until all `n_pairs` pairs have `n_scores` each.
fn llama_scores(report: &str, n_pairs: usize, n_scores: usize) -> Option<Vec<Vec<f64>>> {
    let mut scores = vec![Vec::new(); n_pairs];
    for line in report.lines() {
        let Some(rest) = line.trim_start().strip_prefix("rerank score ") else {
            continue;
        };
        let (j, rest) = rest.split_once(':')?;
        let value = rest.split_whitespace().next()?.parse().ok()?;
        scores.get_mut(j.parse::<usize>().ok()?)?.push(value);
    }
    scores.iter().all(|s| s.len() == n_scores).then_some(scores)
}

#[test]
fn rerank_scores_match_llama_embedding() {
    if skip() {
        return;
    }
    let llama = script_path("build-llama.sh", &["llama-embedding", "native"]);
    // Cross-encoders (a head on the first token, on the mean for ModernBERT; jina's head is
    // a dense layer alone) and Qwen3-Reranker (its rerank template, yes/no softmax of the
    // last token).
    let cases = [
        ("bert-rank", 1),
        ("bert-rank+f32", 1),
        ("modern-bert-rank", 1),
        ("modern-bert-rank+f32", 1),
        ("jina-bert-v2-rank", 1),
        ("jina-bert-v2-rank+f32", 1),
        ("qwen3-rerank", 2),
        ("qwen3-rerank+f32", 2),
    ];
    for (kind, n_scores) in cases {
        let model = common::synth_model(kind);
        let args = [
            "-p",
            PAIRS,
            "--pooling",
            "rank",
            "--embd-normalize",
            "-1",
            "-t",
            "2",
        ];
        // llama-embedding's JSON holds more values than the scores (past their end); its
        // summary lines are read instead (3 decimals).
        let mut cmd = Command::new(&llama);
        cmd.arg("-m").arg(&model).args(args);
        let what = "all rerank score lines";
        let report = run_llama_until(&mut cmd, what, |r| llama_scores(r, 3, n_scores).is_some());
        let theirs = llama_scores(&report, 3, n_scores).expect("checked");
        let json = ["--embd-output-format", "json"];
        let ours = vectors(&run(cmd_of(&model, &args).args(json)));
        let summary = run(&mut cmd_of(&model, &args));
        assert_eq!(
            llama_scores(&summary, 3, n_scores).as_ref(),
            Some(
                &ours
                    .iter()
                    .map(|v| v.iter().map(|x| round3(*x)).collect())
                    .collect()
            ),
            "{kind}: our summary lines are our JSON scores"
        );
        assert_eq!(ours.len(), 3, "{kind}: one result per pair");
        for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            assert_eq!(a.len(), n_scores, "{kind}: {n_scores} scores per pair");
            for (&a, &b) in a.iter().zip(b) {
                eprintln!("{kind:<22} pair {i}: score ours {a:.6} llama.cpp {b:.3}");
                let tolerance = match (kind.starts_with("modern"), kind.ends_with("+f32")) {
                    (false, true) => F32_SCORE_TOLERANCE,
                    (false, false) => MIXED_SCORE_TOLERANCE,
                    (true, true) => MODERN_F32_SCORE_TOLERANCE,
                    (true, false) => MODERN_MIXED_SCORE_TOLERANCE,
                };
                assert!(
                    (a - b).abs() <= tolerance * b.abs().max(1.0),
                    "{kind} pair {i}: ours {a} llama.cpp {b}"
                );
            }
        }
        // The scores tell the pairs apart (the head is not constant; Qwen3-Reranker reads the
        // template's last token, which a random 2-layer model hardly relates to the pair).
        let spread = ours.iter().map(|s| s[0]).fold(f64::NAN, f64::max)
            - ours.iter().map(|s| s[0]).fold(f64::NAN, f64::min);
        let least = if kind.starts_with("qwen3") {
            1e-3
        } else {
            1e-2
        };
        assert!(spread > least, "{kind}: {ours:?}");
    }
}

/// `local-llm embedding` on `model` with `args` (its default summary output).
fn cmd_of(model: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_local-llm"));
    cmd.arg("embedding").arg("-m").arg(model).args(args);
    cmd
}

/// `x` as printed with 3 decimals.
fn round3(x: f64) -> f64 {
    format!("{x:.3}").parse().expect("a number")
}

/// all-MiniLM-L6-v2 (sentence-transformers' safetensors from PyPI, converted by
/// `tools/convert/bert_to_gguf.py`): our embeddings equal llama.cpp's on the same file, and
/// behave as the model is published to: each sentence is closer to its paraphrase than to an
/// unrelated sentence.
#[test]
fn all_minilm_embeddings_match_llama_and_rank_paraphrases_closer() {
    let Some(model) = common::real_model("minilm") else {
        return;
    };
    // Pairs of paraphrases, each pair unrelated to the others.
    let texts = [
        "A man is playing a guitar.",
        "Someone plays an acoustic guitar on stage.",
        "The stock market fell sharply today.",
        "Share prices dropped a lot this afternoon.",
        "How do I bake bread at home?",
        "What is a simple recipe for homemade bread?",
    ];
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_local-llm"));
    cmd.arg("embedding")
        .arg("-m")
        .arg(&model)
        .args(["--embd-output-format", "json", "-t", "2", "-p"])
        .arg(texts.join("\n"));
    let ours = vectors(&run(&mut cmd));
    assert_eq!(ours.len(), texts.len());
    for (i, v) in ours.iter().enumerate() {
        assert_eq!(v.len(), 384, "all-MiniLM-L6-v2 embeds in 384 dimensions");
        let pair = i ^ 1;
        let near = cosine(v, &ours[pair]);
        for (j, w) in ours.iter().enumerate() {
            if j / 2 != i / 2 {
                let far = cosine(v, w);
                assert!(
                    near > far + 0.1,
                    "{:?}: paraphrase {near:.3}, unrelated {:?} {far:.3}",
                    texts[i],
                    texts[j]
                );
            }
        }
        eprintln!("{:<45} paraphrase cosine {near:.3}", texts[i]);
    }
    if skip() {
        return;
    }
    let llama = script_path("build-llama.sh", &["llama-embedding", "native"]);
    let mut cmd = Command::new(llama);
    cmd.arg("-m")
        .arg(&model)
        .args(["--embd-output-format", "json", "-t", "2", "-p"])
        .arg(texts.join("\n"));
    let theirs = vectors(&run_llama_json(&mut cmd));
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        let c = cosine(a, b);
        assert!(c >= MIN_COSINE, "{:?}: cosine with llama.cpp {c}", texts[i]);
    }
}
