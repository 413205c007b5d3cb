//! KV cache types (`-ctk/--cache-type-k`, `-ctv/--cache-type-v`) against llama-perplexity run
//! with the same cache types (and `-fa on`, which llama.cpp needs for a quantized V cache), on
//! both real models: our mean KL divergence from llama.cpp's distributions stays under
//! [`MAX_MEAN_KLD`], as for the f16 cache in `perplexity.rs`. Also printed: our perplexity and
//! mean KLD against our own f16 cache (what a cache type costs), and the cache's bytes per
//! token. Set `LOCAL_LLM_SKIP_LLAMA_SOURCES=1` to skip.

#[path = "../../engine/tests/common/mod.rs"]
mod common;
mod support;

use std::process::Command;

use support::{number_after, run, script_path, skip, test_size};

/// Largest mean KL divergence (nats) of ours from llama.cpp's with the same cache types (as
/// `perplexity.rs`'s bound for the f16 cache).
const MAX_MEAN_KLD: f64 = 0.01;

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
    let ours = |cache: &str, base: &std::path::Path| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_local-llm"));
        test_size(cmd.arg("perplexity"), &model);
        cmd.args(["-ctk", cache, "-ctv", cache])
            .arg("--kl-divergence")
            .arg("--kl-divergence-base")
            .arg(base);
        run(&mut cmd)
    };
    // Our own f16 logits, the reference for what each type costs.
    let own = dir.join("ours-f16.bin");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_local-llm"));
    test_size(cmd.arg("perplexity"), &model);
    run(cmd
        .arg("-f")
        .arg(&text)
        .arg("--kl-divergence-base")
        .arg(&own));
    for cache in ["q8_0", "bf16", "f32"] {
        let theirs = dir.join(format!("theirs-{cache}.bin"));
        let mut cmd = Command::new(&llama);
        test_size(&mut cmd, &model);
        let report = run(cmd
            .args(["-ctk", cache, "-ctv", cache, "-fa", "on", "-f"])
            .arg(&text)
            .arg("--kl-divergence-base")
            .arg(&theirs));
        let their_ppl = number_after(&report, "Final estimate: PPL =");
        let vs_llama = ours(cache, &theirs);
        let vs_f16 = ours(cache, &own);
        let kld = number_after(&vs_llama, "Mean    KLD:");
        eprintln!(
            "{model_name} cache {cache}: PPL ours {:.4}, llama.cpp {their_ppl:.4}; mean KLD from \
             llama.cpp {kld:.5} (same top {}%), from our f16 cache {:.5}",
            number_after(&vs_f16, "Mean PPL(Q)                   :"),
            number_after(&vs_llama, "Same top p:"),
            number_after(&vs_f16, "Mean    KLD:"),
        );
        assert!(
            kld < MAX_MEAN_KLD,
            "{model_name} {cache}: mean KLD {kld}\n{vs_llama}"
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
    for (flag, value) in [("-ctk", "q4_0"), ("--cache-type-v", "fp8")] {
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
                && stderr.contains("f16, f32, bf16, q8_0"),
            "{stderr}"
        );
    }
}
