//! Corrupt and truncated GGUF files: every case must return an error (never panic), and
//! representative cases must return the expected error kind.

mod gguf_common;

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

use local_llm_engine::gguf::{GgufError, GgufFile, TensorInfo};
use local_llm_engine::quant::GgmlType;

/// Writes a small GGUF file by hand, remembering where each field starts.
#[derive(Default)]
struct Builder {
    buf: Vec<u8>,
    marks: HashMap<&'static str, usize>,
}

impl Builder {
    fn mark(&mut self, name: &'static str) -> &mut Self {
        self.marks.insert(name, self.buf.len());
        self
    }
    fn u8(&mut self, v: u8) -> &mut Self {
        self.buf.push(v);
        self
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn str(&mut self, s: &str) -> &mut Self {
        self.u64(s.len() as u64);
        self.buf.extend_from_slice(s.as_bytes());
        self
    }
    fn pad_to(&mut self, align: usize) -> &mut Self {
        self.buf.resize(self.buf.len().div_ceil(align) * align, 0);
        self
    }
}

/// A valid file: alignment, string, bool, u32 array and nested array metadata; a Q8_0 tensor
/// of 2 rows of 32 and an F32 tensor of 4, both aligned to 32.
fn valid_file() -> Builder {
    let mut b = Builder::default();
    b.mark("magic").buf.extend_from_slice(b"GGUF");
    b.mark("version").u32(3);
    b.mark("tensor_count").u64(2);
    b.mark("kv_count").u64(5);
    b.mark("key0").str("general.alignment");
    b.mark("align_type").u32(4).mark("align").u32(32);
    b.mark("key1").str("k.aa").mark("str_type").u32(8);
    b.mark("str_len").str("hello");
    b.mark("key2").str("k.bb").u32(7).mark("bool").u8(1);
    b.str("k.arr")
        .u32(9)
        .mark("arr_type")
        .u32(4)
        .mark("arr_count")
        .u64(3);
    b.u32(1).u32(2).u32(3);
    b.str("k.nested").u32(9).u32(9).u64(2);
    b.u32(1).mark("inner_count").u64(2).u8(7).u8(8);
    b.u32(1).u64(1).u8(9);
    b.mark("t0").str("t0").mark("t0_ndims").u32(2);
    b.mark("t0_dim0").u64(32).mark("t0_dim1").u64(2);
    b.mark("t0_type").u32(8).mark("t0_offset").u64(0);
    b.mark("t1")
        .str("t1")
        .u32(1)
        .u64(4)
        .u32(0)
        .mark("t1_offset")
        .u64(96);
    b.pad_to(32).mark("data");
    b.buf.extend((0..68).map(|i| i as u8));
    b.pad_to(32);
    for v in [1.0f32, -2.0, 3.5, 0.25] {
        b.buf.extend_from_slice(&v.to_le_bytes());
    }
    b
}

/// Parses `bytes`, asserting that the reader does not panic.
fn parse(bytes: Vec<u8>) -> Result<GgufFile, GgufError> {
    catch_unwind(AssertUnwindSafe(|| GgufFile::from_bytes(bytes)))
        .unwrap_or_else(|_| panic!("the reader panicked"))
}

/// The valid file with the bytes at `mark` (+ `delta`) overwritten by `patch`.
fn patched(mark: &str, delta: usize, patch: &[u8]) -> Vec<u8> {
    let b = valid_file();
    let mut bytes = b.buf.clone();
    let at = b.marks[mark] + delta;
    bytes[at..at + patch.len()].copy_from_slice(patch);
    bytes
}

#[test]
fn the_hand_built_file_is_valid() {
    let f = parse(valid_file().buf).expect("valid file parses");
    assert_eq!(f.get_str("k.aa"), Some("hello"));
    assert_eq!(f.get_bool("k.bb"), Some(true));
    let t0 = f.tensor("t0").unwrap();
    assert_eq!((t0.ty, t0.n_bytes, t0.n_rows()), (GgmlType::Q8_0, 68, 2));
    assert_eq!(
        f.tensor_data(t0),
        &(0..68).map(|i| i as u8).collect::<Vec<_>>()[..]
    );
    let t1 = f.tensor("t1").unwrap();
    assert_eq!(f.tensor_data(t1)[..4], 1.0f32.to_le_bytes());
}

#[test]
fn every_truncation_is_an_error() {
    let bytes = valid_file().buf;
    for len in 0..bytes.len() {
        assert!(
            parse(bytes[..len].to_vec()).is_err(),
            "truncated to {len} bytes"
        );
    }
    match parse(bytes[..14].to_vec()) {
        Err(GgufError::Truncated { offset, .. }) => assert_eq!(offset, 8),
        other => panic!("expected Truncated, got {other:?}"),
    }
    match parse(bytes[..bytes.len() - 1].to_vec()) {
        Err(GgufError::InvalidTensor { tensor, .. }) => assert_eq!(tensor, "t1"),
        other => panic!("expected InvalidTensor, got {other:?}"),
    }
}

#[test]
fn truncations_of_a_gguf_py_file_are_errors() {
    let dir = gguf_common::synth_files("truncate");
    let bytes = std::fs::read(dir.join("all_types.gguf")).unwrap();
    let f = parse(bytes.clone()).unwrap();
    // The end of the last tensor's data; padding after it may be cut without harm.
    let end = f
        .tensors()
        .iter()
        .map(|t| f.data_offset() + t.offset + t.n_bytes)
        .max()
        .unwrap() as usize;
    let header_end = f.data_offset() as usize;
    let lens = (0..header_end).chain((header_end..end).step_by(7));
    for len in lens {
        assert!(
            parse(bytes[..len].to_vec()).is_err(),
            "truncated to {len} bytes"
        );
    }
    assert!(parse(bytes[..end].to_vec()).is_ok());
    // Through the file API too.
    let path = dir.join("cut.gguf");
    std::fs::write(&path, &bytes[..header_end / 2]).unwrap();
    assert!(matches!(
        GgufFile::open(&path),
        Err(local_llm_engine::Error::Gguf(_))
    ));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn overwritten_header_bytes_never_panic() {
    let dir = gguf_common::synth_files("flip");
    let bytes = std::fs::read(dir.join("all_types.gguf")).unwrap();
    let header_end = parse(bytes.clone()).unwrap().data_offset() as usize;
    for at in 0..header_end {
        for v in [0x00, 0xFF, bytes[at] ^ 0x80, bytes[at].wrapping_add(1)] {
            let mut b = bytes.clone();
            b[at] = v;
            let _ = parse(b);
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// Asserts that the valid file patched at `mark`+`delta` fails, and returns the error.
fn err_of(mark: &str, delta: usize, patch: &[u8]) -> GgufError {
    match parse(patched(mark, delta, patch)) {
        Err(e) => {
            assert!(!e.to_string().is_empty());
            e
        }
        Ok(_) => panic!("patching {mark}+{delta} with {patch:?} was accepted"),
    }
}

#[test]
fn corrupt_fields_give_the_expected_errors() {
    let huge = u64::MAX.to_le_bytes();
    let e = |mark, patch: &[u8]| err_of(mark, 0, patch);
    assert!(matches!(e("magic", b"GGUG"), GgufError::BadMagic { .. }));
    assert!(matches!(
        e("version", &1u32.to_le_bytes()),
        GgufError::UnsupportedVersion(1)
    ));
    assert!(matches!(
        e("version", &0x0300u32.to_le_bytes()),
        GgufError::UnsupportedVersion(_)
    ));
    for mark in [
        "tensor_count",
        "kv_count",
        "str_len",
        "arr_count",
        "inner_count",
        "key1",
    ] {
        assert!(
            matches!(e(mark, &huge), GgufError::TooLarge { .. }),
            "{mark}"
        );
        let big = (1u64 << 20).to_le_bytes();
        assert!(
            matches!(e(mark, &big), GgufError::TooLarge { .. }),
            "{mark}"
        );
    }
    assert!(matches!(
        e("str_type", &99u32.to_le_bytes()),
        GgufError::UnknownValueType { code: 99, .. }
    ));
    assert!(matches!(
        e("arr_type", &13u32.to_le_bytes()),
        GgufError::UnknownValueType { code: 13, .. }
    ));
    assert!(matches!(e("bool", &[2]), GgufError::Invalid(_)));
    assert!(matches!(
        err_of("str_len", 8, &[0xFF]),
        GgufError::InvalidUtf8 { .. }
    ));
    assert!(matches!(err_of("key2", 8, b"k.aa"), GgufError::DuplicateKey(k) if k == "k.aa"));
    assert!(matches!(err_of("t1", 8, b"t0"), GgufError::DuplicateTensor(t) if t == "t0"));
    for align in [0u32, 3, 48] {
        assert!(
            matches!(e("align", &align.to_le_bytes()), GgufError::Invalid(_)),
            "{align}"
        );
    }
    assert!(matches!(
        e("align_type", &5u32.to_le_bytes()),
        GgufError::Invalid(_)
    ));
    match e("t0_type", &99u32.to_le_bytes()) {
        GgufError::UnknownTensorType { tensor, code } => {
            assert_eq!((tensor.as_str(), code), ("t0", 99))
        }
        other => panic!("expected UnknownTensorType, got {other:?}"),
    }
    let bad_tensor = |mark, patch: &[u8]| match e(mark, patch) {
        GgufError::InvalidTensor { tensor, reason } => (tensor, reason),
        other => panic!("{mark}: expected InvalidTensor, got {other:?}"),
    };
    assert_eq!(bad_tensor("t0_ndims", &0u32.to_le_bytes()).0, "t0");
    assert_eq!(bad_tensor("t0_ndims", &5u32.to_le_bytes()).0, "t0");
    bad_tensor("t0_dim0", &0u64.to_le_bytes());
    bad_tensor("t0_dim0", &16u64.to_le_bytes()); // not a whole Q8_0 block
    bad_tensor("t0_dim1", &huge); // element count overflows
    bad_tensor("t0_dim1", &(1u64 << 40).to_le_bytes()); // beyond the file
    assert_eq!(bad_tensor("t1_offset", &100u64.to_le_bytes()).0, "t1"); // misaligned
    bad_tensor("t1_offset", &(1u64 << 40).to_le_bytes()); // beyond the file
    bad_tensor("t1_offset", &(u64::MAX - 31).to_le_bytes()); // offset + size overflows
    let (_, reason) = bad_tensor("t1_offset", &64u64.to_le_bytes()); // overlaps t0
    assert!(reason.contains("overlaps"), "{reason}");
    // Errors say where: the key name for metadata problems.
    let msg = e("arr_count", &huge).to_string();
    assert!(msg.contains("k.arr"), "{msg}");
}

#[test]
fn deeply_nested_arrays_are_rejected_without_recursing_unboundedly() {
    let mut b = Builder::default();
    b.buf.extend_from_slice(b"GGUF");
    b.u32(3).u64(0).u64(1).str("deep").u32(9);
    for _ in 0..100_000 {
        b.u32(9).u64(1);
    }
    b.u32(0).u64(1).u8(0);
    assert!(matches!(parse(b.buf), Err(GgufError::Invalid(_))));
}

#[test]
fn io_errors_and_foreign_tensor_infos() {
    match GgufFile::open("/nonexistent/model.gguf") {
        Err(local_llm_engine::Error::Io { path, .. }) => assert!(path.contains("model.gguf")),
        other => panic!("expected Io error, got {other:?}"),
    }
    let f = parse(valid_file().buf).unwrap();
    let foreign = TensorInfo {
        name: "x".into(),
        dims: vec![1 << 20],
        ty: GgmlType::F32,
        offset: u64::MAX - 2,
        n_bytes: 1 << 22,
    };
    assert!(f.tensor_data(&foreign).is_empty());
    assert!(matches!(parse(Vec::new()), Err(GgufError::BadMagic { .. })));
}
