//! `session::inspect` (a model file described from its header) against the PyPI `gguf`
//! package's reading of the same files (`tools/gguf-oracle/gguf_oracle.py summary`), its file
//! type names against llama.cpp's `enum llama_ftype`, and hostile or truncated headers.

mod common;
mod gguf_common;
mod tokenizer_support;

use std::path::Path;
use std::time::Instant;

use local_llm_engine::session::{file_type_name, inspect, ModelFileInfo};
use serde_json::Value;

fn oracle_summary(path: &Path) -> Value {
    let script = gguf_common::oracle_script();
    let out = gguf_common::python(&[
        "-X".as_ref(),
        "utf8".as_ref(),
        script.as_os_str(),
        "summary".as_ref(),
        path.as_os_str(),
    ]);
    serde_json::from_slice(&out).expect("oracle output is JSON")
}

fn same_as_oracle(path: &Path) -> ModelFileInfo {
    let ours = inspect(path, 0).unwrap_or_else(|e| panic!("inspect {}: {e}", path.display()));
    let theirs = oracle_summary(path);
    let s = |v: &Value| v.as_str().map(str::to_string);
    let u = |v: &Value| v.as_u64();
    let what = path.display();
    assert_eq!(
        ours.architecture,
        theirs["architecture"].as_str().unwrap_or(""),
        "{what}"
    );
    assert_eq!(ours.name, s(&theirs["name"]), "{what}");
    assert_eq!(Some(ours.n_params), u(&theirs["n_params"]), "{what}");
    assert_eq!(
        Some(ours.weights_bytes),
        u(&theirs["weights_bytes"]),
        "{what}"
    );
    assert_eq!(ours.file_type, s(&theirs["file_type"]), "{what}");
    assert_eq!(ours.context_length, u(&theirs["context_length"]), "{what}");
    assert_eq!(
        ours.embedding_length,
        u(&theirs["embedding_length"]),
        "{what}"
    );
    assert_eq!(ours.n_layer, u(&theirs["n_layer"]), "{what}");
    assert_eq!(ours.n_head, u(&theirs["n_head"]), "{what}");
    assert_eq!(ours.n_head_kv, u(&theirs["n_head_kv"]), "{what}");
    assert_eq!(ours.n_vocab, u(&theirs["n_vocab"]), "{what}");
    assert_eq!(ours.tokenizer, s(&theirs["tokenizer"]), "{what}");
    assert_eq!(ours.chat_template, s(&theirs["chat_template"]), "{what}");
    let types = theirs["tensor_types"].as_object().expect("tensor types");
    assert_eq!(ours.tensor_types.len(), types.len(), "{what}");
    for t in &ours.tensor_types {
        let o = &types[&t.type_name];
        assert_eq!(
            (Some(t.count), Some(t.bytes)),
            (o["count"].as_u64(), o["bytes"].as_u64()),
            "{what}: {}",
            t.type_name
        );
    }
    assert!(ours
        .tensor_types
        .windows(2)
        .all(|w| w[0].bytes >= w[1].bytes));
    ours
}

#[test]
fn real_models_read_as_the_gguf_package_reads_them() {
    for name in ["smollm2", "gemma3"] {
        let Some(path) = common::real_model(name) else {
            return;
        };
        let t0 = Instant::now();
        let info = same_as_oracle(&path);
        eprintln!(
            "{name}: {} {} params, {:?}, context {:?}, vocab {:?}, memory {:?} ({:?})",
            info.architecture,
            info.n_params,
            info.file_type,
            info.context_length,
            info.n_vocab,
            info.memory.as_ref().map(|m| m.total_bytes),
            t0.elapsed()
        );
        assert!(info.supported);
        let memory = info.memory.expect("a supported model has an estimate");
        assert_eq!(memory.weights_bytes, info.weights_bytes);
        assert_eq!(
            u64::from(memory.context_size),
            info.context_length.unwrap().min(4096)
        );
        let at_512 = inspect(&path, 512).unwrap().memory.unwrap();
        assert_eq!(at_512.context_size, 512);
        assert_eq!(at_512.kv_cache_bytes * 8, memory.kv_cache_bytes);
    }
}

#[test]
fn synthetic_and_unsupported_files_read_as_the_gguf_package_reads_them() {
    for kind in common::SYNTH_KINDS {
        let info = same_as_oracle(&common::synth_model(kind));
        assert!(info.supported, "{kind}");
    }
    let dir = gguf_common::scratch_dir("inspect-unsupported");
    let phi3 = dir.join("phi3.gguf");
    gguf_common::python(&[
        gguf_common::oracle_script().as_os_str(),
        "unsupported".as_ref(),
        phi3.as_os_str(),
    ]);
    let info = same_as_oracle(&phi3);
    assert!(!info.supported);
    assert_eq!(info.file_type.as_deref(), Some("IQ4_XS"));
    // The gguf package's own synthetic files: no architecture at all, every value type.
    let synth = gguf_common::synth_files("inspect-synth");
    for file in ["all_types.gguf", "aligned64.gguf"] {
        let info = same_as_oracle(&synth.join(file));
        assert!(!info.supported && info.memory.is_none(), "{file}");
    }
}

/// Every `LLAMA_FTYPE_*` value of llama.h (the node-llama-cpp bundle's sources) has our name.
#[test]
fn file_type_names_are_llama_cpps() {
    let header = String::from_utf8(tokenizer_support::llama_cpp_file("include/llama.h")).unwrap();
    let mut seen = 0;
    for line in header.lines().map(str::trim) {
        if line.starts_with("//") {
            continue;
        }
        let Some(rest) = line.strip_prefix("LLAMA_FTYPE_") else {
            continue;
        };
        let Some((name, value)) = rest.split_once('=') else {
            continue;
        };
        let Ok(code) = value
            .trim()
            .trim_end_matches(',')
            .split_whitespace()
            .next()
            .unwrap_or("")
            .trim_end_matches(',')
            .parse::<u64>()
        else {
            continue;
        };
        let name = name.trim();
        if name == "GUESSED" {
            continue;
        }
        let short = name
            .strip_prefix("MOSTLY_")
            .or_else(|| name.strip_prefix("ALL_"))
            .unwrap_or(name);
        assert_eq!(
            file_type_name(code),
            Some(short),
            "LLAMA_FTYPE_{name} = {code}"
        );
        seen += 1;
    }
    assert!(seen >= 30, "only {seen} file types found in llama.h");
}

/// Cut-off and lying headers are typed errors, quickly and without large allocations.
#[test]
fn broken_headers_are_errors() {
    let Some(path) = common::real_model("smollm2") else {
        return;
    };
    let bytes = std::fs::read(&path).unwrap();
    let dir = gguf_common::scratch_dir("inspect-broken");
    let t0 = Instant::now();
    for cut in [0usize, 3, 4, 8, 16, 24, 100, 1000, 100_000, 1_000_000] {
        let file = dir.join(format!("cut-{cut}.gguf"));
        std::fs::write(&file, &bytes[..cut]).unwrap();
        assert!(inspect(&file, 0).is_err(), "a file cut after {cut} bytes");
    }
    // A header claiming 2^60 metadata pairs and 2^40 tensors.
    let mut lying = bytes[..24].to_vec();
    lying[8..16].copy_from_slice(&(1u64 << 40).to_le_bytes());
    lying[16..24].copy_from_slice(&(1u64 << 60).to_le_bytes());
    let file = dir.join("lying.gguf");
    std::fs::write(&file, &lying).unwrap();
    assert!(inspect(&file, 0).is_err());
    assert!(inspect(dir.join("missing.gguf"), 0).is_err());
    assert!(t0.elapsed().as_secs() < 5, "{:?}", t0.elapsed());
}
