//! Helpers shared by the GGUF reader tests: running the Python `gguf` oracle and comparing its
//! JSON dump with what our reader parsed.

#![allow(dead_code)] // each test binary uses a subset

use std::path::{Path, PathBuf};
use std::process::Command;

use local_llm_engine::gguf::{GgufFile, Value};
use serde_json::Value as Json;

/// Path of the oracle script `tools/gguf-oracle/gguf_oracle.py`.
pub fn oracle_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/gguf-oracle/gguf_oracle.py")
}

/// Runs `python3 <args>` and returns stdout; panics with stderr on failure.
pub fn python(args: &[&std::ffi::OsStr]) -> Vec<u8> {
    let out = Command::new("python3")
        .args(args)
        .output()
        .expect("cannot run python3 (the gguf tests need python3 with the `gguf` package)");
    assert!(
        out.status.success(),
        "python3 {:?} failed: {}",
        args,
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Dumps `path` with gguf.GGUFReader.
pub fn oracle_dump(path: &Path) -> Json {
    let script = oracle_script();
    let out = python(&[
        "-X".as_ref(),
        "utf8".as_ref(),
        script.as_os_str(),
        "dump".as_ref(),
        path.as_os_str(),
    ]);
    serde_json::from_slice(&out).expect("oracle output is JSON")
}

/// A fresh scratch directory for one test.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("local-llm-gguf-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// Writes the synthetic files (see the oracle script) into a scratch directory.
pub fn synth_files(name: &str) -> PathBuf {
    let dir = scratch_dir(name);
    let script = oracle_script();
    python(&[script.as_os_str(), "synth".as_ref(), dir.as_os_str()]);
    dir
}

/// CRC-32 (IEEE, as Python's zlib.crc32).
pub fn crc32(data: &[u8]) -> u32 {
    let mut table = [0u32; 256];
    for (i, slot) in table.iter_mut().enumerate() {
        let mut c = i as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
        *slot = c;
    }
    let mut crc = !0u32;
    for &b in data {
        crc = table[((crc ^ b as u32) & 0xFF) as usize] ^ (crc >> 8);
    }
    !crc
}

/// gguf-py's name for a value's type.
fn py_type(v: &Value) -> &'static str {
    match v {
        Value::U8(_) => "UINT8",
        Value::I8(_) => "INT8",
        Value::U16(_) => "UINT16",
        Value::I16(_) => "INT16",
        Value::U32(_) => "UINT32",
        Value::I32(_) => "INT32",
        Value::U64(_) => "UINT64",
        Value::I64(_) => "INT64",
        Value::F32(_) => "FLOAT32",
        Value::F64(_) => "FLOAT64",
        Value::Bool(_) => "BOOL",
        Value::String(_) => "STRING",
        Value::Array(_) => "ARRAY",
    }
}

/// The type chain gguf-py records: the type, then for arrays the chain of the first element.
fn type_chain(v: &Value, out: &mut Vec<String>) {
    out.push(py_type(v).to_string());
    if let Value::Array(items) = v {
        if let Some(first) = items.get(0) {
            type_chain(&first, out);
        }
    }
}

/// JSON form of a scalar, as the oracle writes it (floats as bit patterns).
fn leaf_json(v: &Value) -> Json {
    match v {
        Value::U8(x) => (*x).into(),
        Value::I8(x) => (*x).into(),
        Value::U16(x) => (*x).into(),
        Value::I16(x) => (*x).into(),
        Value::U32(x) => (*x).into(),
        Value::I32(x) => (*x).into(),
        Value::U64(x) => (*x).into(),
        Value::I64(x) => (*x).into(),
        Value::F32(x) => x.to_bits().into(),
        Value::F64(x) => x.to_bits().into(),
        Value::Bool(x) => (*x).into(),
        Value::String(s) => (*s).into(),
        Value::Array(_) => unreachable!("leaf_json on an array"),
    }
}

/// Leaf values of a (possibly nested) array, flattened as gguf-py's `contents()` does.
fn flatten(v: &Value, out: &mut Vec<Json>) {
    match v {
        Value::Array(items) => items.iter().for_each(|i| flatten(&i, out)),
        other => out.push(leaf_json(other)),
    }
}

/// Asserts that our reading of a file equals the oracle's dump of it, field by field.
pub fn assert_matches_oracle(f: &GgufFile, dump: &Json, label: &str) {
    assert_eq!(
        f.version() as u64,
        dump["version"].as_u64().unwrap(),
        "{label}: version"
    );
    assert_eq!(
        f.alignment(),
        dump["alignment"].as_u64().unwrap(),
        "{label}: alignment"
    );
    assert_eq!(
        f.data_offset(),
        dump["data_offset"].as_u64().unwrap(),
        "{label}: data offset"
    );
    assert_eq!(
        f.is_big_endian_file(),
        dump["big_endian"].as_bool().unwrap(),
        "{label}: byte order"
    );

    let meta = dump["metadata"].as_array().unwrap();
    assert_eq!(f.metadata().len(), meta.len(), "{label}: metadata count");
    for ((key, value), want) in f.metadata().zip(meta) {
        assert_eq!(key, want["key"].as_str().unwrap(), "{label}: key order");
        let mut chain = Vec::new();
        type_chain(&value, &mut chain);
        let want_chain: Vec<String> = want["types"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap().to_string())
            .collect();
        assert_eq!(chain, want_chain, "{label}: types of '{key}'");
        assert_eq!(f.get(key), Some(value), "{label}: lookup of '{key}'");
        match value {
            Value::Array(items) => {
                assert_eq!(
                    items.len() as u64,
                    want["count"].as_u64().unwrap(),
                    "{label}: length of '{key}'"
                );
                let mut leaves = Vec::new();
                flatten(&value, &mut leaves);
                let want_leaves = want["value"].as_array().unwrap();
                // gguf-py cannot flatten arrays of arrays of ... when the leaf type is ARRAY
                // (empty inner arrays); it reports no leaves then.
                if want_chain.last().map(String::as_str) != Some("ARRAY") {
                    assert_eq!(&leaves, want_leaves, "{label}: values of '{key}'");
                }
            }
            scalar => assert_eq!(
                leaf_json(&scalar),
                want["value"],
                "{label}: value of '{key}'"
            ),
        }
    }

    let tensors = dump["tensors"].as_array().unwrap();
    assert_eq!(f.tensors().len(), tensors.len(), "{label}: tensor count");
    for (t, want) in f.tensors().iter().zip(tensors) {
        let name = want["name"].as_str().unwrap();
        assert_eq!(t.name, name, "{label}: tensor order");
        let dims: Vec<u64> = want["dims"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap())
            .collect();
        assert_eq!(t.dims, dims, "{label}: dims of '{name}'");
        assert_eq!(
            t.ty.code() as u64,
            want["type"].as_u64().unwrap(),
            "{label}: type of '{name}'"
        );
        assert_eq!(
            f.data_offset() + t.offset,
            want["offset"].as_u64().unwrap(),
            "{label}: offset of '{name}'"
        );
        assert_eq!(
            t.n_bytes,
            want["n_bytes"].as_u64().unwrap(),
            "{label}: size of '{name}'"
        );
        let data = f.tensor_data(t);
        assert_eq!(
            data.len() as u64,
            t.n_bytes,
            "{label}: data length of '{name}'"
        );
        assert_eq!(
            crc32(data) as u64,
            want["crc32"].as_u64().unwrap(),
            "{label}: data CRC of '{name}'"
        );
        assert_eq!(
            f.tensor(name),
            Some(t),
            "{label}: lookup of tensor '{name}'"
        );
        assert_eq!(t.n_elements(), dims.iter().product::<u64>());
    }
}
