//! Resource limits through the `local-llm` binary: peak memory for hostile GGUF metadata
//! (measured with `/usr/bin/time -v`, installed by scripts/setup/setup-test-deps.sh) and a typed
//! "insufficient memory" error, not an abort, for a context the process cannot hold (under
//! `ulimit -v`).

#[path = "../../engine/tests/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const MIB: u64 = 1 << 20;
/// Elements of the appended u8 array (64 Mi, as in issue 16).
const ARRAY_LEN: u64 = 64 << 20;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_local-llm")
}

fn temp_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("local-llm-limits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A metadata pair `key` = u8 array of `ARRAY_LEN` zeros, 32 + ARRAY_LEN bytes long for an
/// 8-byte key (a multiple of the default alignment, so tensor data stays aligned when it is
/// inserted into a model's header).
fn u8_array_pair(key: &str) -> Vec<u8> {
    assert_eq!(key.len(), 8);
    let mut b = Vec::with_capacity(32 + ARRAY_LEN as usize);
    b.extend_from_slice(&(key.len() as u64).to_le_bytes());
    b.extend_from_slice(key.as_bytes());
    b.extend_from_slice(&9u32.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&ARRAY_LEN.to_le_bytes());
    b.resize(b.len() + ARRAY_LEN as usize, 0);
    b
}

/// Peak RSS in bytes and the output of `local-llm args...` run under `/usr/bin/time -v`.
fn peak_rss(args: &[&str]) -> (u64, Output) {
    let time = Path::new("/usr/bin/time");
    assert!(
        time.exists(),
        "/usr/bin/time is missing: run scripts/setup/setup-test-deps.sh (apt package `time`)"
    );
    let out = Command::new(time)
        .arg("-v")
        .arg(bin())
        .args(args)
        .output()
        .expect("run local-llm under /usr/bin/time");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let kb: u64 = stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("Maximum resident set size (kbytes):"))
        .unwrap_or_else(|| panic!("no peak RSS in: {stderr}"))
        .trim()
        .parse()
        .unwrap();
    (kb * 1024, out)
}

#[test]
fn a_huge_metadata_array_costs_less_than_half_its_size() {
    // Before: 2.1 GB for this 64 MiB file (then 2x the file, with compact copies). Metadata
    // arrays are now views of the mapped file and `info` decodes only the first elements, so
    // the array's pages are never read. Measured: 6 MiB. Bound: half the file (32 MiB), for
    // the whole process.
    let path = temp_dir().join("u8-array.gguf");
    let mut file = b"GGUF".to_vec();
    file.extend_from_slice(&3u32.to_le_bytes());
    file.extend_from_slice(&0u64.to_le_bytes());
    file.extend_from_slice(&1u64.to_le_bytes());
    file.extend_from_slice(&u8_array_pair("big.data"));
    std::fs::write(&path, &file).unwrap();
    let size = file.len() as u64;
    drop(file);
    let (peak, out) = peak_rss(&["info", "-m", path.to_str().unwrap()]);
    std::fs::remove_file(&path).ok();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("[u8; 67108864]"),
        "the array is listed"
    );
    eprintln!("64 MiB array: peak RSS {} MiB", peak / MIB);
    assert!(peak <= size / 2, "peak RSS {peak} for a {size}-byte file");
}

#[test]
fn a_real_model_with_a_huge_array_costs_at_most_16_mib_more() {
    // Before: 2.3 GB (the model alone: about 110 MB). The array is a view of the mapped file
    // that nothing reads. Measured: 2 MiB more. Bound: the model alone plus 16 MiB (a quarter
    // of the array).
    let Some(model) = common::real_model("smollm2") else {
        return;
    };
    let original = std::fs::read(&model).unwrap();
    // Insert the pair first in the metadata and count it: the header grows by a multiple of
    // the alignment, so the tensor offsets (relative to the data section) stay valid.
    let mut file = original[..16].to_vec();
    let n_kv = u64::from_le_bytes(original[16..24].try_into().unwrap());
    file.extend_from_slice(&(n_kv + 1).to_le_bytes());
    file.extend_from_slice(&u8_array_pair("zz.array"));
    file.extend_from_slice(&original[24..]);
    drop(original);
    let path = temp_dir().join("smollm2-array.gguf");
    std::fs::write(&path, &file).unwrap();
    drop(file);
    let args = |m: &Path| -> Vec<String> {
        [
            "run",
            "-m",
            m.to_str().unwrap(),
            "-p",
            "Hello",
            "-n",
            "4",
            "-t",
            "1",
            "-c",
            "256",
        ]
        .map(String::from)
        .to_vec()
    };
    let run = |m: &Path| {
        let a = args(m);
        peak_rss(&a.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let (alone, out) = run(&model);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (with_array, out) = run(&path);
    std::fs::remove_file(&path).ok();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!(
        "smollm2: peak RSS {} MiB alone, {} MiB with a 64 MiB array",
        alone / MIB,
        with_array / MIB
    );
    assert!(
        with_array <= alone + 16 * MIB,
        "peak RSS {with_array} with the array, {alone} without"
    );
}

#[test]
fn a_context_larger_than_the_address_space_is_insufficient_memory() {
    // Before: an allocation failure aborted the process (signal 6). 1 Mi positions need a
    // 24 GB KV cache (caught by the available-memory check or by the fallible allocation);
    // 64 Ki positions need 1.5 GB, which fits in RAM but not under a 1.5 GB address-space
    // limit (caught by the fallible allocation).
    let Some(model) = common::real_model("smollm2") else {
        return;
    };
    for (limit_kb, ctx) in [(6_000_000, 1_048_576), (1_500_000, 65_536)] {
        let out = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "ulimit -v {limit_kb} && exec \"$0\" run -m \"$1\" -c {ctx} -p Hello -n 4 -t 1"
            ))
            .arg(bin())
            .arg(&model)
            .output()
            .expect("run bash");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(1),
            "-c {ctx} under ulimit -v {limit_kb}: {:?}, stderr: {stderr}",
            out.status
        );
        assert!(
            stderr.contains("error: insufficient memory:") && stderr.contains("KV cache"),
            "{stderr}"
        );
    }
}

#[test]
fn option_sized_buffers_that_do_not_fit_are_insufficient_memory() {
    // A 30,000-token prompt in one batch (`-b` as large as `-c`): its activation, attention and
    // logits buffers come on top of a 0.75 GB KV cache. Under a 1.6 GB address-space limit
    // the process aborted with signal 6 ("memory allocation of 5795635 bytes failed");
    // every buffer sized by an option is now allocated fallibly.
    let Some(model) = common::real_model("smollm2") else {
        return;
    };
    let prompt = " the".repeat(30_000);
    // (address-space limit in KiB, arguments)
    let cases: [(u32, &[&str]); 2] = [
        (
            1_600_000,
            &[
                "run", "-c", "32768", "-b", "32768", "-n", "1", "-t", "1", "-p", &prompt,
            ],
        ),
        // `bench -r` used to size a vector up front: 10^12 repetitions aborted before any
        // test ran. Now the first prompt pass reports that its buffers (or its 0.7 GB KV
        // cache) do not fit.
        (
            1_200_000,
            &[
                "bench",
                "-p",
                "30000",
                "-b",
                "30000",
                "-n",
                "0",
                "-r",
                "1000000000000",
            ],
        ),
    ];
    for (limit_kb, args) in cases {
        // `timeout`: a case that unexpectedly fits must not run for hours.
        let out = Command::new("bash")
            .arg("-c")
            .arg(format!("ulimit -v {limit_kb} && exec timeout 300 \"$@\""))
            .arg("bash")
            .arg(bin())
            .args(&args[..1])
            .arg("-m")
            .arg(&model)
            .args(&args[1..])
            .output()
            .expect("run bash");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let shown: Vec<&str> = args.iter().map(|a| &a[..a.len().min(12)]).collect();
        assert_eq!(
            out.status.code(),
            Some(1),
            "{shown:?}: {:?}, stderr: {stderr}",
            out.status
        );
        assert!(stderr.contains("error: insufficient memory:"), "{stderr}");
    }
}

/// A model file whose chat template doubles a list 40 times through `namespace()` (which
/// asked for a 206 GB allocation and aborted the process, exit 134) or a string 40 times:
/// `run --chat` now fails with a chat-template error (exit 1) within 10 s, at a peak RSS
/// of at most 512 MiB.
#[test]
fn a_hostile_chat_template_in_a_model_file_is_an_error() {
    let dir = temp_dir();
    let bombs = [
        ("list", "{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l | length }}"),
        ("string", "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}"),
    ];
    for (name, template) in bombs {
        let source = dir.join(format!("{name}.jinja"));
        std::fs::write(&source, template).unwrap();
        let model = dir.join(format!("{name}.gguf"));
        common::run_python(
            &common::repo_root().join("tools/synth/make_model.py"),
            &[
                std::ffi::OsStr::new("llama-bpe"),
                model.as_os_str(),
                std::ffi::OsStr::new("--chat-template"),
                source.as_os_str(),
            ],
        );
        let start = std::time::Instant::now();
        let (peak, out) = peak_rss(&[
            "run",
            "-m",
            model.to_str().unwrap(),
            "--chat",
            "-p",
            "Hello",
            "-n",
            "2",
            "-c",
            "64",
        ]);
        let took = start.elapsed();
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprintln!(
            "{name}: exit {:?} in {took:?}, peak RSS {} MiB",
            out.status.code(),
            peak / MIB
        );
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert!(stderr.contains("chat template"), "{name}: {stderr}");
        assert!(took.as_secs() < 10, "{name}: {took:?}");
        assert!(peak <= 512 * MIB, "{name}: peak RSS {} MiB", peak / MIB);
        std::fs::remove_file(&model).ok();
    }
}
