//! Every supported architecture end to end against llama.cpp (0c1e570, the PyPI sdist
//! `llama-cpp-python==0.3.36`, built by `scripts/setup/build-llama.sh`).
//!
//! For each architecture, a random-weight model written by `tools/synth/make_model.py` with the
//! architecture's features switched on (GQA, sliding windows, soft-caps, fused projections,
//! LongRoPE, QK-norms, post-norms, LayerNorm, multipliers, tied and untied heads: see the kinds
//! there), in two variants: its mix of weight types, and every tensor F32 (`KIND+f32`, the same
//! weights), where no kernel's rounding is involved and the architecture's maths alone decides.
//! For each file:
//! - llama-perplexity's native build saves its distributions on the evaluation text
//!   (`--kl-divergence-base`) and its AVX2 build scores the same model against them: the floor,
//!   llama.cpp's disagreement with itself (both cached beside the model). Both run with `-fa
//!   off`: our attention rounds where llama.cpp's non-flash path does (queries and probabilities
//!   to f16); its flash path on the CPU accumulates the values in f16, and differs from its own
//!   non-flash path by 1e-4 to 7e-3 nats on these files (measured), more than from ours;
//! - `local-llm perplexity` scores the model against the native build's distributions. F32
//!   files: the same top token at ≥ [`MIN_SAME_TOP`]% of the positions and a mean KL divergence
//!   at most twice the floor (or [`F32_MIN_BOUND`] where that is smaller). Mixed types: at most
//!   twice the floor or [`MIXED_MIN_BOUND`] (these random models are chaotic, llama.cpp's own
//!   builds disagree on up to 1% of the top tokens; the kernels are checked against llama.cpp's
//!   by `quant_oracle.rs`, `weight_formats.rs` and `perplexity.rs`);
//! - `local-llm` generates from it.
//!
//! The list of architectures tested (here, and the encoders in `encoders.rs`) must be the
//! engine's `SUPPORTED_ARCHITECTURES`, and the README's list must be that list. CI-sized like `perplexity.rs` (chunks of 128 tokens, 4
//! chunks, 2 threads); a table goes to stderr (`--nocapture`).
//! `LOCAL_LLM_SKIP_LLAMA_SOURCES=1` skips the comparison.

#[path = "../../engine/tests/common/mod.rs"]
mod common;
mod llama_side;
mod support;

use std::process::Command;

use llama_side::llama_cpp_side;
use local_llm_engine::model::SUPPORTED_ARCHITECTURES;
use support::{number_after, run, script_path, skip, test_size};

/// Each architecture and the synthetic model kinds that test it (in `SUPPORTED_ARCHITECTURES`'
/// order).
const TESTED: [(&str, &str); 26] = [
    ("llama", "llama-bpe"),
    ("qwen2", "qwen2"),
    ("qwen3", "qwen3"),
    ("gemma", "gemma"),
    ("gemma2", "gemma2"),
    ("gemma3", "gemma3"),
    ("gemma4", "gemma4"),
    ("gemma4", "gemma4-moe"),
    ("gemma3n", "gemma3n"),
    ("lfm2", "lfm2"),
    ("lfm2", "lfm2-swa"),
    ("qwen35", "qwen35"),
    ("phi3", "phi3"),
    ("qwen3moe", "qwen3moe"),
    ("smollm3", "smollm3"),
    ("granite", "granite"),
    ("granitemoe", "granitemoe"),
    ("granitehybrid", "granitehybrid"),
    ("olmo2", "olmo2"),
    ("exaone4", "exaone4"),
    ("ernie4_5", "ernie4_5"),
    ("mistral3", "mistral3"),
    ("stablelm", "stablelm"),
    ("stablelm", "stablelm-parallel"),
    ("starcoder2", "starcoder2"),
    ("hunyuan-dense", "hunyuan-dense"),
];
/// The encoder architectures, compared with llama-embedding by `encoders.rs` (they compute no
/// logits), in `SUPPORTED_ARCHITECTURES`' order after the decoders.
const ENCODERS: [&str; 6] = [
    "bert",
    "nomic-bert",
    "modern-bert",
    "jina-bert-v2",
    "gemma-embedding",
    "llama-embed",
];
/// Least share of positions (%) where our top token is llama.cpp's (F32 files).
const MIN_SAME_TOP: f64 = 99.0;
/// The bound on our mean KLD (nats) where twice llama.cpp's floor is below it: F32 files (the
/// floors there are 0 to 1e-6: llama.cpp's two builds compute the same F32 products).
const F32_MIN_BOUND: f64 = 1e-5;
/// The same for the files with their mix of weight types.
const MIXED_MIN_BOUND: f64 = 2e-3;

#[test]
fn the_tested_architectures_are_the_supported_ones_and_the_readme_lists_them() {
    let mut tested: Vec<&str> = TESTED.iter().map(|(arch, _)| *arch).collect();
    tested.dedup();
    tested.extend(ENCODERS);
    assert_eq!(tested, SUPPORTED_ARCHITECTURES);
    let readme = std::fs::read_to_string(common::repo_root().join("README.md")).expect("README");
    // Lines are wrapped: compare with every run of white space as one space.
    let readme = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    let listed = SUPPORTED_ARCHITECTURES
        .iter()
        .map(|a| format!("`{a}`"))
        .collect::<Vec<_>>()
        .join(", ");
    assert!(
        readme.contains(&listed),
        "README.md must list the supported architectures as: {listed}"
    );
}

#[test]
fn every_architecture_matches_llama_perplexity_within_twice_its_floor() {
    if skip() {
        return;
    }
    let native = script_path("build-llama.sh", &["llama-perplexity", "native"]);
    let avx2 = script_path("build-llama.sh", &["llama-perplexity", "avx2"]);
    let text = script_path("fetch-eval-text.sh", &[]);
    let mut failures = Vec::new();
    for (arch, kind) in TESTED {
        for (variant, f32) in [(kind.to_string(), false), (format!("{kind}+f32"), true)] {
            let model = common::synth_model(&variant);
            let llama = [native.as_path(), &avx2, &text];
            let (base, theirs, floor_report) = llama_cpp_side(&model, llama, &["-fa", "off"]);
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_local-llm"));
            test_size(cmd.arg("perplexity"), &model);
            let ours = run(cmd
                .arg("--kl-divergence")
                .arg("--kl-divergence-base")
                .arg(&base));
            let kld = number_after(&ours, "Mean    KLD:");
            let floor = number_after(&floor_report, "Mean    KLD:");
            let same_top = number_after(&ours, "Same top p:");
            let floor_top = number_after(&floor_report, "Same top p:");
            let min = if f32 { F32_MIN_BOUND } else { MIXED_MIN_BOUND };
            let bound = (2.0 * floor).max(min);
            eprintln!(
                "{arch:<14} {variant:<22} PPL llama.cpp {:>14.4} ours {:>14.4}  mean KLD \
                 {kld:.6}  floor {floor:.6} (bound {bound:.6})  same top {same_top:.2}% \
                 (llama.cpp's builds {floor_top:.2}%)",
                number_after(&theirs, "Final estimate: PPL ="),
                number_after(&ours, "Mean PPL(Q)                   :"),
            );
            if kld.is_nan() || kld > bound || (f32 && same_top < MIN_SAME_TOP) {
                failures.push(format!(
                    "{variant}: KLD {kld} (bound {bound}), same top {same_top}%"
                ));
            }
        }
        // And it generates.
        let model = common::synth_model(kind);
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_local-llm"));
        let out = run(cmd.args(["run", "-m"]).arg(&model).args([
            "-p",
            "The sea was calm",
            "-n",
            "8",
            "--temp",
            "0",
        ]));
        assert!(!out.trim().is_empty(), "{arch}: generated nothing");
    }
    assert!(failures.is_empty(), "{failures:?}");
}
