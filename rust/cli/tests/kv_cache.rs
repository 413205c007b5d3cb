//! KV cache types (`-ctk/--cache-type-k`, `-ctv/--cache-type-v`) against llama-perplexity run
//! with the same cache types (and `-fa on`, which llama.cpp needs for a quantized V cache), on
//! both real models. The reference is llama.cpp's f16 cache: a cache type may cost us no more
//! than it costs llama.cpp, i.e. our mean KL divergence from llama.cpp's f16 distributions stays
//! within [`RATIO`] × llama.cpp's own with that type, plus [`SLACK`] (the f16 engines' own
//! disagreement at this size, see `perplexity.rs`). A quantized cache's errors are not the same
//! rounding in both engines (llama.cpp also quantizes the queries to q8_0 for a quantized key
//! dot product), so the two q4_0 runs differ from each other more than each from f16 (Gemma 3:
//! 0.137 between them, 0.099 ours and 0.108 llama.cpp's from f16): comparing each with the
//! common f16 reference is the fair test. Also printed: that direct divergence and our own f16
//! cache's. Set `LOCAL_LLM_SKIP_LLAMA_SOURCES=1` to skip.

#[path = "../../engine/tests/common/mod.rs"]
mod common;
mod support;

use std::path::Path;
use std::process::Command;

use support::{number_after, run, run_llama, script_path, skip, test_size};

/// How much more a cache type may cost us than llama.cpp (mean KLD from llama.cpp's f16).
const RATIO: f64 = 1.25;
/// Added to the bound: the two engines' disagreement with f16 caches at this test size
/// (`perplexity.rs`'s bound). Without llama.cpp's Hadamard rotation of quantized caches our
/// q4_0 keys were at 0.19 on SmolLM2, against a bound of 0.098.
const SLACK: f64 = 0.01;

fn compare(model_name: &str) {
    if skip() {
        return;
    }
    let Some(model) = common::real_model(model_name) else {
        return;
    };
    let llama = script_path("build-llama.sh", &["llama-perplexity", "native"]);
    let text = script_path("fetch-eval-text.sh", &[]);
    let dir =
        std::env::temp_dir().join(format!("local-llm-kv-{model_name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    // llama-perplexity (with flash attention) when `theirs`, else ours, at the test size with
    // `cache` keys and values.
    let command = |theirs: bool, cache: &str| {
        let mut c = if theirs {
            Command::new(&llama)
        } else {
            let mut c = Command::new(env!("CARGO_BIN_EXE_local-llm"));
            c.arg("perplexity");
            c
        };
        test_size(&mut c, &model);
        if theirs {
            c.args(["-fa", "on"]);
        }
        c.args(["-ctk", cache, "-ctv", cache]);
        c
    };
    // Scores the logits file `base`.
    let score = |theirs: bool, cache: &str, base: &Path| {
        let mut cmd = command(theirs, cache);
        cmd.arg("--kl-divergence")
            .arg("--kl-divergence-base")
            .arg(base);
        run_llama(&mut cmd, "Same top p:")
    };
    // Writes a logits file of the evaluation text.
    let base = |theirs: bool, cache: &str| {
        let file = dir.join(format!(
            "{}-{cache}.bin",
            if theirs { "theirs" } else { "ours" }
        ));
        run(command(theirs, cache)
            .arg("-f")
            .arg(&text)
            .arg("--kl-divergence-base")
            .arg(&file));
        file
    };
    let (llama_f16, our_f16) = (base(true, "f16"), base(false, "f16"));
    let types: &[&str] = if model_name == "smollm2" {
        &["q8_0", "q4_0", "q5_1", "iq4_nl", "bf16", "f32"]
    } else {
        &["q8_0", "q4_0", "iq4_nl"]
    };
    for &cache in types {
        let kld = |report: &str| number_after(report, "Mean    KLD:");
        let theirs = kld(&score(true, cache, &llama_f16));
        let ours_report = score(false, cache, &llama_f16);
        let ours = kld(&ours_report);
        let between = kld(&score(false, cache, &base(true, cache)));
        let own = kld(&score(false, cache, &our_f16));
        let bound = RATIO * theirs + SLACK;
        eprintln!(
            "{model_name} cache {cache}: mean KLD from llama.cpp's f16: ours {ours:.5}, \
             llama.cpp's {theirs:.5} (bound {bound:.5}); ours from llama.cpp's {cache} \
             {between:.5}, from our f16 {own:.5}; PPL ours {:.4}",
            number_after(&ours_report, "Mean PPL(Q)                   :"),
        );
        assert!(
            ours <= bound,
            "{model_name} {cache}: mean KLD {ours} > {bound}\n{ours_report}"
        );
    }
    std::fs::remove_dir_all(&dir).expect("remove temp dir");
}

#[test]
fn smollm2_cache_types_match_llama_perplexity() {
    compare("smollm2");
}

#[test]
fn gemma3_cache_types_match_llama_perplexity() {
    compare("gemma3");
}

/// A cache type we do not store, or a name that is none, is a clean error naming the ones we do.
#[test]
fn unsupported_cache_types_are_clean_errors() {
    let Some(model) = common::real_model("smollm2") else {
        return;
    };
    for (flag, value) in [("-ctk", "q2_k"), ("--cache-type-v", "fp8")] {
        let out = Command::new(env!("CARGO_BIN_EXE_local-llm"))
            .args(["run", "-n", "1", "-p", "x", "-m"])
            .arg(&model)
            .args([flag, value])
            .output()
            .expect("run local-llm");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(&format!("unsupported KV cache type '{value}'"))
                && stderr.contains("f16, f32, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl"),
            "{stderr}"
        );
    }
}
