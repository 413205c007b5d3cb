//! Compares our GGUF reader with gguf-py's GGUFReader on the real models and synthetic files.

mod gguf_common;

use std::path::PathBuf;

use gguf_common::{assert_matches_oracle, oracle_dump, synth_files};
use local_llm_engine::gguf::{GgufFile, Value};

/// Path of a real model, or `None` when it is missing and LOCAL_LLM_SKIP_REAL_MODELS=1.
fn real_model(file: &str) -> Option<PathBuf> {
    let home = std::env::var_os("HOME").expect("HOME is set");
    let path = PathBuf::from(home)
        .join(".cache/local-llm/models")
        .join(file);
    if path.exists() {
        return Some(path);
    }
    if std::env::var("LOCAL_LLM_SKIP_REAL_MODELS").as_deref() == Ok("1") {
        eprintln!(
            "skipping: {} is missing (LOCAL_LLM_SKIP_REAL_MODELS=1)",
            path.display()
        );
        return None;
    }
    panic!(
        "real model {} is missing: fetch it, or set LOCAL_LLM_SKIP_REAL_MODELS=1 to skip",
        path.display()
    );
}

fn check_real_model(file: &str) {
    let Some(path) = real_model(file) else { return };
    let dump = oracle_dump(&path);
    let f = GgufFile::open(&path).expect("real model opens");
    assert_matches_oracle(&f, &dump, file);
    let owned = GgufFile::open_with(&path, false).expect("real model reads into memory");
    assert_eq!(owned.metadata(), f.metadata());
    assert_eq!(owned.tensors(), f.tensors());
    assert!(!f.tensors().is_empty());
}

#[test]
fn smollm2_matches_gguf_py() {
    check_real_model("SmolLM2-135M-Instruct.Q4_1.gguf");
}

#[test]
fn gemma3_matches_gguf_py() {
    check_real_model("gemma-3-270m-q4_k_m.gguf");
}

#[test]
fn synthetic_files_with_every_value_type_match_gguf_py() {
    let dir = synth_files("oracle");
    for name in ["all_types.gguf", "aligned64.gguf"] {
        let path = dir.join(name);
        let f = GgufFile::open(&path).expect("synthetic file opens");
        assert_matches_oracle(&f, &oracle_dump(&path), name);
    }
    let f = GgufFile::open(dir.join("aligned64.gguf")).unwrap();
    assert_eq!(f.alignment(), 64);
    // Typed accessors on the values the script wrote.
    let f = GgufFile::open(dir.join("all_types.gguf")).unwrap();
    assert_eq!(f.get_u64("t.u8"), Some(200));
    assert_eq!(f.get_i64("t.i8"), Some(-100));
    assert_eq!(f.get_u64("t.i8"), None);
    assert_eq!(f.get_u64("t.u64"), Some(u64::MAX - 4));
    assert_eq!(f.get_f32("t.f32"), Some(3.25));
    assert_eq!(f.get_f32("t.u16"), Some(60000.0));
    assert_eq!(f.get_bool("t.bool.true"), Some(true));
    assert_eq!(f.get_str("t.str"), Some("héllo ✓ wörld"));
    assert_eq!(f.get_str("t.str.empty"), Some(""));
    assert_eq!(f.get_array("t.arr.u32").map(<[Value]>::len), Some(1000));
    let nested = f.get_array("t.arr.nested").unwrap();
    assert_eq!(nested[1], Value::Array(vec![Value::I32(4)]));
    assert_eq!(f.get("missing"), None);
    let _ = std::fs::remove_dir_all(dir);
}
