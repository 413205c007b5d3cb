//! Memory a GGUF header may take. Metadata strings and arrays are views of the mapped file,
//! validated in place and never copied; what the header does allocate (keys, lists, indexes,
//! tensor infos) is charged to a budget of the file's size plus 1 MiB. So a file made of one
//! huge metadata array costs nothing beyond the pages the reader touches (before: a 64 MiB
//! array of u8 took 2.1 GB; then, with compact copies, twice the file), and a great many tiny
//! values are refused.
//!
//! Measured in-process from `/proc/self/status` (VmHWM, the peak resident set, reset before
//! each file through `/proc/self/clear_refs`): one test function, so that no other test of
//! this binary runs meanwhile. Bounds: the peak grows by at most the file's size (mapped pages
//! the validation reads; nothing is copied) plus 16 MiB, and by at most 16 MiB for an array of
//! u8, whose elements validation never reads.

mod common;

use local_llm_engine::gguf::{GgufError, GgufFile, Value};
use local_llm_engine::Error;

const MIB: u64 = 1 << 20;

fn gguf_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// A GGUF v3 file with no tensors and the given encoded metadata pairs.
fn gguf_file(n_pairs: u64, pairs: &[u8]) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(&n_pairs.to_le_bytes());
    b.extend_from_slice(pairs);
    b
}

/// An array header: key, type ARRAY, element type, count.
fn array_pair(key: &str, elem: u32, n: u64) -> Vec<u8> {
    let mut b = Vec::new();
    gguf_string(&mut b, key);
    b.extend_from_slice(&9u32.to_le_bytes());
    b.extend_from_slice(&elem.to_le_bytes());
    b.extend_from_slice(&n.to_le_bytes());
    b
}

/// Opens `bytes` (written to a file, memory-mapped) and checks that the peak RSS grew by at
/// most `bound(file size)`.
fn open_bounded(name: &str, bytes: Vec<u8>, bound: impl Fn(u64) -> u64) -> Result<GgufFile, Error> {
    let path = std::env::temp_dir().join(format!("local-llm-{}-{name}.gguf", std::process::id()));
    let size = bytes.len() as u64;
    std::fs::write(&path, bytes).unwrap();
    // Writing 5 to clear_refs resets VmHWM to the current RSS (Linux 4.0+).
    std::fs::write("/proc/self/clear_refs", "5").expect("resetting the peak RSS");
    let before = common::status_bytes("VmRSS");
    let result = GgufFile::open(&path);
    let peak = common::status_bytes("VmHWM");
    std::fs::remove_file(&path).ok();
    let grew = peak.saturating_sub(before);
    eprintln!(
        "{name}: file {} MiB, peak RSS grew by {} MiB ({})",
        size / MIB,
        grew / MIB,
        result
            .as_ref()
            .map_or_else(|e| e.to_string(), |_| "loaded".into())
    );
    assert!(
        grew <= bound(size),
        "{name}: peak RSS grew by {grew} bytes for a {size}-byte file"
    );
    result
}

#[test]
fn metadata_never_costs_more_memory_than_the_file() {
    let mapped = |size: u64| size + 16 * MIB;
    // 1. One array of 64 Mi u8 values: loads as a view; its pages are never read.
    let n = 64 << 20;
    let mut bytes = gguf_file(1, &array_pair("big.array", 0, n));
    bytes.resize(bytes.len() + n as usize, 7);
    let f = open_bounded("u8-array", bytes, |_| 16 * MIB).expect("a big u8 array is valid");
    let a = f.get_array("big.array").unwrap();
    assert_eq!((a.len(), a.element_type_name()), (n as usize, "u8"));
    assert_eq!(a.get(n as usize - 1), Some(Value::U8(7)));
    drop(f);

    // 2. 4 Mi empty strings: loads (validation reads every length, nothing is copied).
    let n = 4 << 20;
    let mut bytes = gguf_file(1, &array_pair("strings", 8, n));
    bytes.resize(bytes.len() + 8 * n as usize, 0);
    let f = open_bounded("empty-strings", bytes, mapped).expect("empty strings are valid");
    let strings = f.get_array("strings").unwrap().strings().unwrap();
    assert_eq!(strings.len(), n as usize);
    assert!(strings.clone().all(str::is_empty));
    drop(f);

    // 3. 2 Mi empty nested arrays (12 bytes each in the file): loads, nothing per element.
    let n = 2 << 20;
    let mut bytes = gguf_file(1, &array_pair("nested", 9, n));
    for _ in 0..n {
        bytes.extend_from_slice(&0u32.to_le_bytes());
        bytes.extend_from_slice(&0u64.to_le_bytes());
    }
    let f = open_bounded("nested-arrays", bytes, mapped).expect("nested arrays are valid");
    assert_eq!(f.get_array("nested").unwrap().len(), n as usize);
    drop(f);

    // 4. 1 Mi tiny metadata pairs (u8 values under distinct keys): too large.
    let n = 1u64 << 20;
    let mut pairs = Vec::new();
    for i in 0..n {
        gguf_string(&mut pairs, &format!("{i:x}"));
        pairs.extend_from_slice(&0u32.to_le_bytes());
        pairs.push(1);
    }
    match open_bounded("tiny-pairs", gguf_file(n, &pairs), mapped) {
        Err(Error::Gguf(GgufError::OverMemoryBudget { .. })) => {}
        Err(e) => panic!("tiny pairs: unexpected error {e}"),
        Ok(_) => panic!("1 Mi tiny pairs fit in the budget"),
    }
}
