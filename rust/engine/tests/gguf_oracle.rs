//! Compares our GGUF reader with gguf-py's GGUFReader on the real models and synthetic files.

mod common;
mod gguf_common;

use gguf_common::{assert_matches_oracle, oracle_dump, synth_files};
use local_llm_engine::gguf::{GgufFile, Value};

fn check_real_model(name: &str) {
    let Some(path) = common::real_model(name) else {
        return;
    };
    let dump = oracle_dump(&path);
    let f = GgufFile::open(&path).expect("real model opens");
    assert_matches_oracle(&f, &dump, name);
    let owned = GgufFile::open_with(&path, false).expect("real model reads into memory");
    assert_eq!(
        owned.metadata().collect::<Vec<_>>(),
        f.metadata().collect::<Vec<_>>()
    );
    assert_eq!(owned.tensors(), f.tensors());
    assert!(!f.tensors().is_empty());
}

#[test]
fn smollm2_matches_gguf_py() {
    check_real_model("smollm2");
}

#[test]
fn gemma3_matches_gguf_py() {
    check_real_model("gemma3");
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
    assert_eq!(f.get_array("t.arr.u32").map(|a| a.len()), Some(1000));
    let nested = f.get_array("t.arr.nested").unwrap();
    let second = nested.get(1).and_then(|v| v.as_array()).unwrap();
    assert_eq!(second.element_type_name(), "i32");
    assert_eq!(second.iter().collect::<Vec<_>>(), [Value::I32(4)]);
    assert_eq!(f.get("missing"), None);
    let _ = std::fs::remove_dir_all(dir);
}
