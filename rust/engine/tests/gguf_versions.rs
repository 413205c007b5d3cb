//! Format versions and byte order: v2 files, v1 rejection, and big-endian files converted with
//! gguf-py's `gguf_convert_endian.py` reading back to the original little-endian tensor bytes.

mod gguf_common;

use gguf_common::{assert_matches_oracle, oracle_dump, synth_files};
use local_llm_engine::gguf::{GgufError, GgufFile};
use local_llm_engine::quant::GgmlType;

#[test]
fn version_2_reads_like_version_3_and_version_1_is_rejected() {
    let dir = synth_files("versions");
    let v3 = std::fs::read(dir.join("all_types.gguf")).unwrap();
    let mut v2 = v3.clone();
    v2[4..8].copy_from_slice(&2u32.to_le_bytes());
    let v2_path = dir.join("v2.gguf");
    std::fs::write(&v2_path, &v2).unwrap();

    let a = GgufFile::from_bytes(v3.clone()).unwrap();
    let b = GgufFile::open(&v2_path).unwrap();
    assert_eq!((a.version(), b.version()), (3, 2));
    assert_eq!(
        a.metadata().collect::<Vec<_>>(),
        b.metadata().collect::<Vec<_>>()
    );
    assert_eq!(a.tensors(), b.tensors());
    assert_matches_oracle(&b, &oracle_dump(&v2_path), "v2.gguf");

    for bad in [0u32, 1, 4, 0x0100] {
        let mut bytes = v3.clone();
        bytes[4..8].copy_from_slice(&bad.to_le_bytes());
        match GgufFile::from_bytes(bytes) {
            Err(GgufError::UnsupportedVersion(v)) => assert_eq!(v, bad),
            other => panic!("version {bad}: expected UnsupportedVersion, got {other:?}"),
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn big_endian_file_converted_by_gguf_py_reads_as_the_original() {
    let dir = synth_files("bigendian");
    let le_path = dir.join("all_types.gguf");
    let be_path = dir.join("be.gguf");
    std::fs::copy(&le_path, &be_path).unwrap();
    // The script converts in place after a confirmation prompt.
    let status = std::process::Command::new("python3")
        .args(["-m", "gguf.scripts.gguf_convert_endian"])
        .arg(&be_path)
        .arg("big")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(b"YES\n")?;
            child.wait()
        })
        .expect("run gguf_convert_endian");
    assert!(status.success(), "gguf_convert_endian failed");
    assert_ne!(
        std::fs::read(&le_path).unwrap(),
        std::fs::read(&be_path).unwrap()
    );

    let le = GgufFile::open(&le_path).unwrap();
    assert!(!le.is_big_endian_file());
    for mmap in [true, false] {
        let be = GgufFile::open_with(&be_path, mmap).unwrap();
        assert!(be.is_big_endian_file());
        assert_eq!(be.version(), 3);
        assert_eq!(
            be.metadata().collect::<Vec<_>>(),
            le.metadata().collect::<Vec<_>>()
        );
        assert_eq!(be.tensors(), le.tensors());
        assert_eq!(be.data_offset(), le.data_offset());
        let mut types = Vec::new();
        for t in le.tensors() {
            assert_eq!(be.tensor_data(t), le.tensor_data(t), "tensor '{}'", t.name);
            types.push(t.ty);
        }
        for ty in [
            GgmlType::F32,
            GgmlType::F16,
            GgmlType::BF16,
            GgmlType::Q4_0,
            GgmlType::Q8_0,
            GgmlType::Q4_K,
            GgmlType::Q6_K,
        ] {
            assert!(types.contains(&ty), "synthetic file lacks a {ty} tensor");
        }
    }
    // gguf-py agrees that the converted file is big-endian with the same header.
    let dump = oracle_dump(&be_path);
    assert_eq!(dump["big_endian"], true);
    assert_eq!(dump["metadata"], oracle_dump(&le_path)["metadata"]);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn big_endian_tensor_of_unconvertible_type_is_a_typed_error() {
    let dir = synth_files("bigendian-q41");
    match GgufFile::open(dir.join("big_q4_1.gguf")) {
        Err(local_llm_engine::Error::Gguf(GgufError::UnsupportedBigEndianType { tensor, ty })) => {
            assert_eq!((tensor.as_str(), ty), ("q4_1.b", GgmlType::Q4_1));
        }
        other => panic!("expected UnsupportedBigEndianType, got {other:?}"),
    }
    let _ = std::fs::remove_dir_all(dir);
}
