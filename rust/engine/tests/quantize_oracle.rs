//! The quantizer against llama.cpp's `llama-quantize` (built from the pinned llama.cpp sources
//! by `scripts/setup/build-llama.sh`). The real models are first written as F16 GGUFs by the
//! engine's `convert_file` (quantized tensors dequantized); llama-quantize and the engine
//! then quantize the same F16 file to each mix, and the two outputs must agree: the same type
//! for every tensor, the same metadata, and the tensor bytes identical block for block. Our
//! output must also load in the engine and generate.
//!
//! SmolLM2 is compared on every mix, Gemma 3 on a subset (its embedding table is large).
//! Set `LOCAL_LLM_SKIP_LLAMA_SOURCES=1` to skip (no llama.cpp sources, e.g. offline), or
//! `LOCAL_LLM_SKIP_REAL_MODELS=1`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Instant;

use local_llm_engine::convert::{convert_file, quantize_file, FileType, QuantizeOptions};
use local_llm_engine::gguf::GgufFile;
use local_llm_engine::quant::{dequantize, GgmlType};
use local_llm_engine::sampling::SamplingParams;
use local_llm_engine::session::{
    Context, ContextOptions, GenerateRequest, LoadOptions, LoadedModel, Prompt,
};

/// The llama-quantize binary, or `None` when the skip variable is set.
fn llama_quantize() -> Option<PathBuf> {
    if std::env::var("LOCAL_LLM_SKIP_LLAMA_SOURCES").is_ok_and(|v| v == "1") {
        eprintln!("LOCAL_LLM_SKIP_LLAMA_SOURCES=1: skipping the llama-quantize comparison");
        return None;
    }
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    Some(
        BIN.get_or_init(|| {
            let script = common::repo_root().join("scripts/setup/build-llama.sh");
            let out = Command::new(script)
                .args(["llama-quantize", "native"])
                .output()
                .expect("running scripts/setup/build-llama.sh");
            assert!(
                out.status.success(),
                "building llama-quantize failed (set LOCAL_LLM_SKIP_LLAMA_SOURCES=1 to skip):\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
        })
        .clone(),
    )
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("local-llm-quantize-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Writes the F16 copy of real model `model` (the caller removes it).
fn f16_source(model: &str) -> PathBuf {
    let src = common::real_model(model).expect("checked by the caller");
    let out = scratch(&format!("{model}-f16.gguf"));
    convert_file(&src, &out, GgmlType::F16, &QuantizeOptions::default()).unwrap();
    out
}

/// How two tensors of the same type compare.
#[derive(Default)]
struct Diff {
    blocks: u64,
    same_blocks: u64,
    max_abs: f32,
}

fn compare_tensor(ty: GgmlType, n: usize, a: &[u8], b: &[u8]) -> Diff {
    let (bs, ts) = (ty.block_size(), ty.type_size());
    let mut d = Diff::default();
    for (x, y) in a.chunks(ts).zip(b.chunks(ts)) {
        d.blocks += 1;
        if x == y {
            d.same_blocks += 1;
        } else {
            let (mut fx, mut fy) = (vec![0f32; bs], vec![0f32; bs]);
            dequantize(ty, x, &mut fx).unwrap();
            dequantize(ty, y, &mut fy).unwrap();
            for (p, q) in fx.iter().zip(&fy) {
                d.max_abs = d.max_abs.max((p - q).abs());
            }
        }
    }
    assert_eq!(d.blocks as usize * bs, n);
    d
}

/// Quantizes `model`'s F16 copy `src` to `ftype` with both tools and compares; returns a table
/// row.
fn compare(model: &str, src: &Path, ftype: FileType, llama: &Path) -> String {
    let theirs = scratch(&format!("{model}-{ftype}-llama.gguf"));
    let ours = scratch(&format!("{model}-{ftype}-ours.gguf"));
    let t0 = Instant::now();
    let out = Command::new(llama)
        .arg(src)
        .arg(&theirs)
        .arg(ftype.name())
        .arg("2")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "llama-quantize {ftype} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t_llama = t0.elapsed();
    let t0 = Instant::now();
    let options = QuantizeOptions {
        threads: 2,
        ..QuantizeOptions::default()
    };
    quantize_file(src, &ours, ftype, &options).unwrap();
    let t_ours = t0.elapsed();
    let (a, b) = (
        GgufFile::open(&ours).unwrap(),
        GgufFile::open(&theirs).unwrap(),
    );
    for (key, value) in b.metadata() {
        assert_eq!(a.get(key), Some(value), "{model} {ftype}: metadata {key}");
    }
    assert_eq!(
        a.metadata().len(),
        b.metadata().len(),
        "{model} {ftype}: metadata count"
    );
    assert_eq!(a.tensors().len(), b.tensors().len());
    let (mut same_type, mut total, mut same_blocks, mut blocks, mut max_abs) = (0, 0, 0, 0, 0f32);
    for tb in b.tensors() {
        let ta = a
            .tensor(&tb.name)
            .unwrap_or_else(|| panic!("{}: missing", tb.name));
        total += 1;
        assert_eq!(ta.dims, tb.dims, "{}", tb.name);
        if ta.ty != tb.ty {
            eprintln!(
                "{model} {ftype}: {} is {} (llama-quantize: {})",
                tb.name, ta.ty, tb.ty
            );
            continue;
        }
        same_type += 1;
        let n = tb.n_elements() as usize;
        let d = compare_tensor(tb.ty, n, a.tensor_data(ta), b.tensor_data(tb));
        if d.same_blocks != d.blocks {
            eprintln!(
                "{model} {ftype}: {} ({}) {} of {} blocks differ, max |diff| {}",
                tb.name,
                tb.ty,
                d.blocks - d.same_blocks,
                d.blocks,
                d.max_abs
            );
        }
        (same_blocks, blocks) = (same_blocks + d.same_blocks, blocks + d.blocks);
        max_abs = max_abs.max(d.max_abs);
    }
    let row = format!(
        "| {model} | {ftype} | {same_type}/{total} | {:.4}% | {max_abs:e} | {:.2} s | {:.2} s |",
        100.0 * same_blocks as f64 / blocks as f64,
        t_ours.as_secs_f64(),
        t_llama.as_secs_f64()
    );
    eprintln!("{row}");
    assert_eq!(same_type, total, "{model} {ftype}: tensor types differ");
    assert_eq!(same_blocks, blocks, "{model} {ftype}: tensor bytes differ");
    let text = greedy_answer(&ours);
    eprintln!("{model} {ftype}: {text:?}");
    let _ = std::fs::remove_file(&theirs);
    let _ = std::fs::remove_file(&ours);
    row
}

/// Loads the model at `path` and answers a short prompt greedily.
fn greedy_answer(path: &Path) -> String {
    let model = LoadedModel::load(path, &LoadOptions::default()).unwrap();
    let mut ctx = Context::new(model, &ContextOptions::default()).unwrap();
    let mut request = GenerateRequest::new(Prompt::Text("The capital of France is".into()));
    request.sampling = SamplingParams::greedy();
    request.max_tokens = 8;
    ctx.generate(&request, &mut |_| {}, None).unwrap().text
}

fn run(model: &str, types: &[FileType]) {
    let Some(llama) = llama_quantize() else {
        return;
    };
    if common::real_model(model).is_none() {
        return;
    }
    eprintln!("| model | type | same tensor types | identical blocks | max dequant diff | ours | llama-quantize |");
    let src = f16_source(model);
    for &t in types {
        compare(model, &src, t, &llama);
    }
    let _ = std::fs::remove_file(&src);
    let _ = std::fs::remove_dir(src.parent().unwrap());
}

#[test]
fn smollm2_every_mix_matches_llama_quantize() {
    run("smollm2", &FileType::ALL);
}

#[test]
fn gemma3_some_mixes_match_llama_quantize() {
    run(
        "gemma3",
        &[
            FileType::Q4_0,
            FileType::Q2_K,
            FileType::Q4_K_M,
            FileType::Q6_K,
            FileType::IQ4_XS,
        ],
    );
}

/// LFM2's convolution kernels stay F32, as llama-quantize keeps them (ggml's `ssm_conv` reads
/// F32 only); the other tensors get its types and bytes.
#[test]
fn lfm2_mixes_match_llama_quantize() {
    let Some(llama) = llama_quantize() else {
        return;
    };
    let src = common::synth_model("lfm2+f32");
    for t in [FileType::Q4_K_M, FileType::Q8_0] {
        compare("lfm2", &src, t, &llama);
    }
}

/// Gemma 3n's extra tensors (per-layer embeddings and projections, AltUp, LAuReL) get
/// llama-quantize's types and bytes.
#[test]
fn gemma3n_mixes_match_llama_quantize() {
    let Some(llama) = llama_quantize() else {
        return;
    };
    let src = common::synth_model("gemma3n+f32");
    for t in [FileType::Q4_K_M, FileType::Q8_0] {
        compare("gemma3n", &src, t, &llama);
    }
}

/// Qwen 3.5's delta-net tensors (`attn_qkv`, `attn_gate`, `ssm_beta`, `ssm_alpha`, `ssm_out`;
/// the F32 convolution kernels, `ssm_a` and `ssm_dt`) and its gated `attn_q` get
/// llama-quantize's types and bytes.
#[test]
fn qwen35_mixes_match_llama_quantize() {
    let Some(llama) = llama_quantize() else {
        return;
    };
    let src = common::synth_model("qwen35+f32");
    for t in [FileType::Q4_K_M, FileType::Q8_0] {
        compare("qwen35", &src, t, &llama);
    }
}

/// Granite 4 hybrid's Mamba-2 tensors (`ssm_in`, `ssm_out`; the F32 convolution kernels and
/// biases, `ssm_a`, `ssm_d`, `ssm_dt` and the group norms) get llama-quantize's types and
/// bytes.
#[test]
fn granitehybrid_mixes_match_llama_quantize() {
    let Some(llama) = llama_quantize() else {
        return;
    };
    let src = common::synth_model("granitehybrid+f32");
    for t in [FileType::Q4_K_M, FileType::Q8_0] {
        compare("granitehybrid", &src, t, &llama);
    }
}
