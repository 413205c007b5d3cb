//! Greedy tokens on other targets and byte orders, token for token against the x86-64 host.
//!
//! `scripts/checks/cross-test.sh` runs this file twice. First natively on the host, with
//! `LOCAL_LLM_CROSS_DIR` set: there each result is checked against llama.cpp (node-llama-cpp)
//! and the inputs and expected token ids are written to that directory (a big-endian copy of a
//! model made by the PyPI `gguf` package's `gguf_convert_endian`, and the host's greedy ids).
//! Then under qemu-user (s390x, aarch64) with `LOCAL_LLM_CROSS=1` and the same directory: no
//! oracle runs there, the tokens must equal the host's. Under a plain `cargo test` on the host
//! the same checks run against llama.cpp in a scratch directory.
//!
//! On big-endian s390x this proves that the engine reads the standard little-endian GGUF (every
//! tensor type's fields, scales included) and big-endian GGUF files correctly.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use local_llm_engine::gguf::GgufFile;
use local_llm_engine::model::Output;
use local_llm_engine::session::{Context, ContextOptions, LoadOptions, LoadedModel};
use serde_json::json;

/// "The capital of France is" in SmolLM2's vocabulary (no BOS: SmolLM2 adds none).
const SMOLLM2_PROMPT: [u32; 5] = [504, 3575, 282, 4649, 314];
/// Generated tokens per prompt: a handful, since a forward pass is slow under emulation.
const N_TOKENS: usize = 6;

/// True under qemu (set by `scripts/checks/cross-test.sh`): no oracles, compare with the host's files.
fn cross() -> bool {
    std::env::var("LOCAL_LLM_CROSS").is_ok_and(|v| v == "1")
}

/// The directory shared with the host run: `$LOCAL_LLM_CROSS_DIR` (required under qemu), else
/// a scratch directory that [`Fixtures`] removes when dropped.
struct Fixtures {
    dir: PathBuf,
    scratch: bool,
}

impl Drop for Fixtures {
    fn drop(&mut self) {
        if self.scratch {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn fixtures(name: &str) -> Fixtures {
    match std::env::var_os("LOCAL_LLM_CROSS_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            std::fs::create_dir_all(&dir).expect("create LOCAL_LLM_CROSS_DIR");
            Fixtures {
                dir,
                scratch: false,
            }
        }
        None => {
            assert!(
                !cross(),
                "LOCAL_LLM_CROSS=1 needs LOCAL_LLM_CROSS_DIR with the host's expected tokens: \
                 run scripts/checks/cross-test.sh"
            );
            let dir =
                std::env::temp_dir().join(format!("local-llm-cross-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("create scratch dir");
            Fixtures { dir, scratch: true }
        }
    }
}

/// Greedy decoding of up to `n` tokens, stopping after an end-of-generation token (included),
/// like the llama.cpp oracle.
fn greedy(path: &Path, prompt: &[u32], n: usize) -> Vec<u32> {
    let model = LoadedModel::load(path, &LoadOptions::default()).expect("load model");
    let mut ctx = Context::new(
        model.clone(),
        &ContextOptions {
            n_ctx: 64,
            n_batch: 64,
            threads: 2,
            ..ContextOptions::default()
        },
    )
    .expect("context");
    let mut logits = ctx
        .eval(prompt, Output::LastLogits, &mut |_, _| {}, None)
        .expect("prompt eval");
    let mut out = Vec::new();
    while out.len() < n {
        let tok = logits
            .iter()
            .enumerate()
            .fold((0, f32::NEG_INFINITY), |best, (i, &v)| {
                if v > best.1 {
                    (i, v)
                } else {
                    best
                }
            })
            .0 as u32;
        out.push(tok);
        if model.tokenizer().is_eog(tok) {
            break;
        }
        logits = ctx
            .eval(&[tok], Output::LastLogits, &mut |_, _| {}, None)
            .expect("decode");
    }
    out
}

/// llama.cpp's greedy tokens for a token prompt (host only).
fn llama_cpp_greedy(path: &Path, prompt: &[u32], n: usize) -> Vec<u32> {
    let response = common::run_oracle(&json!({
        "cmd": "generate",
        "model": path.to_string_lossy(),
        "n_predict": n,
        "context_size": 64,
        "prompts": [{"tokens": prompt}],
    }));
    serde_json::from_value(response["results"][0]["tokens"].clone()).expect("oracle tokens")
}

fn write_ids(path: &Path, ids: &[u32]) {
    let text: Vec<String> = ids.iter().map(u32::to_string).collect();
    std::fs::write(path, text.join(" ") + "\n").expect("write expected ids");
}

fn read_ids(path: &Path) -> Vec<u32> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; the host run of scripts/checks/cross-test.sh writes it first",
            path.display()
        )
    });
    text.split_whitespace()
        .map(|t| t.parse().expect("token id"))
        .collect()
}

/// Copies `src` to `dst` and converts the copy to big-endian with gguf-py's
/// `gguf_convert_endian` (host only: needs Python with the `gguf` package).
fn convert_to_big_endian(src: &Path, dst: &Path) {
    std::fs::copy(src, dst).expect("copy model");
    let mut child = Command::new(common::python())
        .args(["-m", "gguf.scripts.gguf_convert_endian"])
        .arg(dst)
        .arg("big")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python3 -m gguf.scripts.gguf_convert_endian");
    // The script converts in place after a confirmation prompt.
    std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), b"YES\n")
        .expect("confirm conversion");
    let out = child
        .wait_with_output()
        .expect("wait for gguf_convert_endian");
    assert!(
        out.status.success(),
        "gguf_convert_endian failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn smollm2_little_endian_gguf_greedy_tokens_match_the_host() {
    let Some(model) = common::real_model("smollm2") else {
        return;
    };
    let fx = fixtures("smollm2");
    let ids = fx.dir.join("smollm2.ids");
    let started = std::time::Instant::now();
    let ours = greedy(&model, &SMOLLM2_PROMPT, N_TOKENS);
    eprintln!(
        "{}: SmolLM2 greedy {ours:?} in {:.1} s",
        std::env::consts::ARCH,
        started.elapsed().as_secs_f64()
    );
    if cross() {
        assert_eq!(ours, read_ids(&ids), "greedy tokens differ from the host's");
    } else {
        let want = llama_cpp_greedy(&model, &SMOLLM2_PROMPT, N_TOKENS);
        assert_eq!(ours, want, "greedy tokens differ from llama.cpp's");
        write_ids(&ids, &ours);
    }
}

/// A synthetic all-F32 llama model (tools/synth) in both byte orders: the big-endian copy is
/// made by gguf-py, reads back to the same tensor bytes and generates the same tokens.
#[test]
fn big_endian_gguf_generates_like_little_endian() {
    let fx = fixtures("synth");
    let (le, be, ids) = (
        fx.dir.join("mistral-f32.le.gguf"),
        fx.dir.join("mistral-f32.be.gguf"),
        fx.dir.join("mistral-f32.ids"),
    );
    let prompt_text = "The sea was calm this morning";
    if !cross() {
        std::fs::copy(common::synth_model("mistral-f32"), &le).expect("copy synthetic model");
        convert_to_big_endian(&le, &be);
    }
    let (lf, bf) = (GgufFile::open(&le).unwrap(), GgufFile::open(&be).unwrap());
    assert!(!lf.is_big_endian_file() && bf.is_big_endian_file());
    assert_eq!(
        bf.metadata().collect::<Vec<_>>(),
        lf.metadata().collect::<Vec<_>>()
    );
    assert_eq!(bf.tensors(), lf.tensors());
    for t in lf.tensors() {
        assert!(
            bf.tensor_data(t) == lf.tensor_data(t),
            "tensor {} differs between the byte orders",
            t.name
        );
    }

    let model = LoadedModel::load(&le, &LoadOptions::default()).expect("load model");
    let prompt = model.tokenize(prompt_text, true, false).expect("tokenize");
    let from_le = greedy(&le, &prompt, 2 * N_TOKENS);
    let from_be = greedy(&be, &prompt, 2 * N_TOKENS);
    eprintln!(
        "{}: synthetic model, prompt {prompt:?}: greedy {from_le:?}",
        std::env::consts::ARCH
    );
    assert_eq!(from_be, from_le, "big-endian file generates differently");
    if cross() {
        assert_eq!(
            from_le,
            read_ids(&ids),
            "greedy tokens differ from the host's"
        );
    } else {
        let want = llama_cpp_greedy(&le, &prompt, 2 * N_TOKENS);
        assert_eq!(from_le, want, "greedy tokens differ from llama.cpp's");
        write_ids(&ids, &from_le);
    }
}
