//! `local-llm download` and `-m URL` against a real HTTP server on 127.0.0.1 (the download
//! crate's fault-injecting test server): a run killed mid-transfer is resumed by the next run
//! (the server sees the Range request and sends only the rest), two runs at once share one
//! transfer (the cache's lock file), a wrong --sha256 fails cleanly, and `info -m URL`
//! downloads into the default cache first.

#[path = "../../engine/tests/common/mod.rs"]
mod common;
#[path = "../../download/tests/support/server.rs"]
mod server;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use server::{test_data, Fault, Server};
use sha2::{Digest, Sha256};

fn sha_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn local_llm() -> Command {
    Command::new(env!("CARGO_BIN_EXE_local-llm"))
}

#[test]
fn download_resumes_what_a_killed_run_left() {
    let server = Server::start();
    let data = test_data(2 << 20, 3);
    server.file(
        "/r/m.gguf",
        &data,
        "\"e1\"",
        Fault::Slow {
            chunk: 32 * 1024,
            delay_ms: 20,
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let url = server.url("/r/m.gguf");
    let dir_arg = dir.path().to_str().unwrap();
    let mut child = local_llm()
        .args(["download", &url, "--cache-dir", dir_arg])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kill it once a good part has arrived.
    let t = Instant::now();
    while server.body_bytes_sent() < 500_000 {
        assert!(t.elapsed() < Duration::from_secs(30), "no progress");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // Let the server notice the closed connection before counting.
    std::thread::sleep(Duration::from_millis(500));
    let first = server.body_bytes_sent();
    server.file("/r/m.gguf", &data, "\"e1\"", Fault::None);
    let out = local_llm()
        .args(["download", &url, "--cache-dir", dir_arg, "--sha256"])
        .arg(sha_hex(&data))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = String::from_utf8(out.stdout).unwrap();
    assert_eq!(std::fs::read(path.trim()).unwrap(), *data);
    let seen = server.seen("/r/m.gguf");
    let resumed_at: u64 = seen[1]
        .range
        .as_deref()
        .and_then(|r| r.strip_prefix("bytes=")?.strip_suffix('-')?.parse().ok())
        .expect("the second run asks for the rest");
    assert!(resumed_at > 0 && resumed_at <= first);
    assert_eq!(
        server.body_bytes_sent() - first,
        data.len() as u64 - resumed_at,
        "only the missing bytes were sent again"
    );
    // A third run finds it in the cache without a request.
    let out = local_llm()
        .args(["download", &url, "--cache-dir", dir_arg])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(server.seen("/r/m.gguf").len(), 2);
}

#[test]
fn two_processes_share_one_download() {
    let server = Server::start();
    let data = test_data(2 << 20, 5);
    server.file(
        "/p/m.gguf",
        &data,
        "\"p\"",
        Fault::Slow {
            chunk: 64 * 1024,
            delay_ms: 15,
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let url = server.url("/p/m.gguf");
    let spawn = || {
        local_llm()
            .args(["download", &url, "--sha256", &sha_hex(&data), "--cache-dir"])
            .arg(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let first = spawn();
    // The second starts while the first is transferring.
    let t = Instant::now();
    while server.body_bytes_sent() < 200_000 {
        assert!(t.elapsed() < Duration::from_secs(30), "no progress");
        std::thread::sleep(Duration::from_millis(10));
    }
    let second = spawn();
    let paths: Vec<String> = [first, second]
        .into_iter()
        .map(|child| {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        })
        .collect();
    assert_eq!(paths[0], paths[1]);
    assert_eq!(std::fs::read(&paths[0]).unwrap(), *data);
    assert_eq!(server.seen("/p/m.gguf").len(), 1, "one request");
    assert_eq!(
        server.body_bytes_sent(),
        data.len() as u64,
        "one file served"
    );
}

#[test]
fn a_wrong_sha256_fails_without_leaving_a_file() {
    let server = Server::start();
    let data = test_data(100_000, 4);
    server.file("/x.gguf", &data, "\"e\"", Fault::None);
    let dir = tempfile::tempdir().unwrap();
    let out = local_llm()
        .args(["download", &server.url("/x.gguf"), "--cache-dir"])
        .arg(dir.path())
        .args(["--sha256", &"0".repeat(64)])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("integrity check"), "{stderr}");
    let out = local_llm()
        .args(["download", &server.url("/missing"), "--cache-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("HTTP 404"));
}

#[test]
fn model_flag_accepts_a_url() {
    let Some(model) = common::real_model("smollm2") else {
        return;
    };
    let data = std::sync::Arc::new(std::fs::read(&model).unwrap());
    let server = Server::start();
    server.file("/u/repo/smol.gguf", &data, "\"s\"", Fault::None);
    let dir = tempfile::tempdir().unwrap();
    let out = local_llm()
        .args(["info", "-m", &server.url("/u/repo/smol.gguf")])
        .env("XDG_CACHE_HOME", dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let direct = local_llm()
        .args(["info", "-m", model.to_str().unwrap()])
        .output()
        .unwrap();
    // The same report but for the first line (the file's path, now in the cache).
    let rest = |o: &[u8]| {
        String::from_utf8_lossy(o)
            .lines()
            .skip(1)
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(rest(&out.stdout), rest(&direct.stdout));
    assert!(String::from_utf8_lossy(&out.stdout)
        .starts_with(&format!("file: {}", dir.path().display())));
    assert!(dir.path().join("local-llm/models/index.json").is_file());
}
