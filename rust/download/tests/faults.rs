//! Downloads against a real HTTP server on 127.0.0.1 with injected faults. Each scenario ends
//! in a verified file (compared byte for byte with what the server holds) or a typed error, and
//! counts the body bytes that crossed the network to prove resumption. `fault_table` prints the
//! table of all scenarios (`cargo test -p local-llm-download --test faults -- --nocapture`).

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use local_llm_download::{
    download, CancelToken, DownloadError, DownloadOptions, Downloaded, ModelCache, Progress,
    ProxyConfig,
};
use support::server::{test_data, Fault, Route, Server};
use support::sha_hex;

const LEN: usize = 1 << 20;

fn options(retries: u32) -> DownloadOptions {
    DownloadOptions {
        retries,
        retry_backoff: Duration::from_millis(10),
        read_timeout: Duration::from_secs(5),
        connect_timeout: Duration::from_secs(5),
        proxy: ProxyConfig::default(),
        ..DownloadOptions::default()
    }
}

fn get(
    cache: &ModelCache,
    url: &str,
    opts: &DownloadOptions,
) -> (Result<Downloaded, DownloadError>, Vec<Progress>) {
    let mut seen = Vec::new();
    let r = download(cache, url, opts, &mut |p| seen.push(p), &CancelToken::new());
    (r, seen)
}

fn part_len(cache: &ModelCache, url: &str) -> u64 {
    let mut part = cache.target_path(url).into_os_string();
    part.push(".part");
    std::fs::metadata(part).map_or(0, |m| m.len())
}

fn assert_whole(d: &Downloaded, data: &[u8]) {
    assert_eq!(std::fs::read(&d.entry.path).unwrap(), data);
    assert_eq!(d.entry.sha256, sha_hex(data));
    assert_eq!(d.entry.size, data.len() as u64);
}

/// One row of the fault table.
struct Row {
    fault: &'static str,
    outcome: String,
    /// File body bytes the server sent in the whole scenario.
    sent: u64,
}

fn row(fault: &'static str, outcome: impl Into<String>, server: &Server) -> Row {
    Row {
        fault,
        outcome: outcome.into(),
        sent: server.body_bytes_sent(),
    }
}

fn setup(fault: Fault) -> (Server, tempfile::TempDir, ModelCache, Arc<Vec<u8>>, String) {
    let server = Server::start();
    let data = test_data(LEN, 7);
    server.file("/m/model.gguf", &data, "\"v1\"", fault);
    let dir = tempfile::tempdir().unwrap();
    let cache = ModelCache::new(dir.path());
    let url = server.url("/m/model.gguf");
    (server, dir, cache, data, url)
}

fn clean() -> Row {
    let (server, _dir, cache, data, url) = setup(Fault::None);
    let (r, progress) = get(&cache, &url, &options(0));
    let d = r.unwrap();
    assert_whole(&d, &data);
    assert_eq!(d.bytes_received, LEN as u64);
    assert!(progress
        .windows(2)
        .all(|w| w[0].downloaded <= w[1].downloaded));
    let last = progress.last().unwrap();
    assert_eq!(
        (last.downloaded, last.total),
        (LEN as u64, Some(LEN as u64))
    );
    assert_eq!(last.percent(), 100.0);
    // A second call is served from the cache without a request.
    let again = get(&cache, &url, &options(0)).0.unwrap();
    assert!(again.cached);
    assert_eq!(server.seen("/m/model.gguf").len(), 1);
    row(
        "none",
        "file verified; 2nd call from cache, no request",
        &server,
    )
}

fn dropped_then_manual_retry() -> Row {
    let (server, _dir, cache, data, url) = setup(Fault::DropAfter {
        bytes: 300_000,
        times: 1,
    });
    let e = get(&cache, &url, &options(0)).0.unwrap_err();
    assert!(
        matches!(e, DownloadError::Failed { status: None, .. }),
        "{e:?}"
    );
    let kept = part_len(&cache, &url);
    assert_eq!(kept, 300_000);
    let d = get(&cache, &url, &options(0)).0.unwrap();
    assert_whole(&d, &data);
    assert_eq!(d.bytes_received, LEN as u64 - kept);
    let seen = server.seen("/m/model.gguf");
    assert_eq!(seen[1].range.as_deref(), Some("bytes=300000-"));
    assert_eq!(seen[1].if_range.as_deref(), Some("\"v1\""));
    row(
        "connection dropped at 300000 B (no auto retry)",
        "DownloadFailed; next call resumes with Range, file verified",
        &server,
    )
}

fn dropped_auto_retry() -> Row {
    let (server, _dir, cache, data, url) = setup(Fault::DropAfter {
        bytes: 200_000,
        times: 2,
    });
    let d = get(&cache, &url, &options(3)).0.unwrap();
    assert_whole(&d, &data);
    assert_eq!(d.bytes_received, LEN as u64);
    assert_eq!(server.seen("/m/model.gguf").len(), 3);
    row(
        "connection dropped twice (auto retries)",
        "one call succeeds after 2 resumes",
        &server,
    )
}

fn range_ignored() -> Row {
    let (server, _dir, cache, data, url) = setup(Fault::DropThenIgnoreRange {
        bytes: 250_000,
        times: 1,
    });
    let d = get(&cache, &url, &options(2)).0.unwrap();
    assert_whole(&d, &data);
    assert_eq!(d.bytes_received, LEN as u64 + 250_000);
    row(
        "dropped at 250000 B, then Range ignored (200)",
        "restarts from zero (no append), file verified",
        &server,
    )
}

fn wrong_bytes() -> Row {
    let (server, _dir, cache, data, url) = setup(Fault::WrongByte { index: 12345 });
    let mut opts = options(0);
    opts.expected_sha256 = Some(sha_hex(&data).to_uppercase());
    let e = get(&cache, &url, &opts).0.unwrap_err();
    assert!(
        matches!(e, DownloadError::IntegrityMismatch { .. }),
        "{e:?}"
    );
    assert!(!cache.target_path(&url).exists());
    assert_eq!(part_len(&cache, &url), 0);
    assert!(cache.list().unwrap().is_empty());
    row(
        "one wrong byte, expectedSha256 set",
        "DownloadIntegrityMismatch; no file, no .part, no entry",
        &server,
    )
}

fn wrong_size() -> Row {
    let (server, _dir, cache, _data, url) = setup(Fault::None);
    let mut opts = options(0);
    opts.expected_size = Some(LEN as u64 + 1);
    let e = get(&cache, &url, &opts).0.unwrap_err();
    assert!(
        matches!(e, DownloadError::IntegrityMismatch { .. }),
        "{e:?}"
    );
    assert!(!cache.target_path(&url).exists());
    row(
        "expectedSize differs",
        "DownloadIntegrityMismatch before the body (announced size); no file",
        &server,
    )
}

/// The server announces a size (Content-Length, then a 206's Content-Range total) other than
/// `expected_size`: refused before the body, on a fresh download (nothing kept) and on a resume
/// (the confirmed partial file is kept, and a call with the right size resumes it). The file is
/// dribbled so that the body bytes the server manages to write before the client hangs up show.
fn announced_size_differs() -> Row {
    let slow = Fault::Slow {
        chunk: 16 * 1024,
        delay_ms: 20,
    };
    let (server, _dir, cache, data, url) = setup(slow.clone());
    let mut wrong = options(2);
    wrong.expected_size = Some(LEN as u64 - 1);
    let (r, progress) = get(&cache, &url, &wrong);
    let e = r.unwrap_err();
    assert!(
        matches!(&e, DownloadError::IntegrityMismatch { message, .. } if message.contains(&format!("announces {LEN} bytes"))),
        "{e:?}"
    );
    assert!(progress.is_empty(), "no body byte was read: {progress:?}");
    assert_eq!(server.seen("/m/model.gguf").len(), 1, "not retried");
    assert_eq!(part_len(&cache, &url), 0);
    assert!(!cache.target_path(&url).exists());
    let fresh = server.body_bytes_sent();
    assert!(fresh <= 64 * 1024, "server wrote {fresh} body bytes");

    // A resume: 300000 bytes arrive, then the size check refuses the 206 and keeps them.
    server.file(
        "/m/model.gguf",
        &data,
        "\"v1\"",
        Fault::DropAfter {
            bytes: 300_000,
            times: 1,
        },
    );
    assert!(get(&cache, &url, &options(0)).0.is_err());
    assert_eq!(part_len(&cache, &url), 300_000);
    server.file("/m/model.gguf", &data, "\"v1\"", slow);
    let before = server.body_bytes_sent();
    let (r, progress) = get(&cache, &url, &wrong);
    assert!(
        matches!(r, Err(DownloadError::IntegrityMismatch { .. })),
        "{r:?}"
    );
    assert!(progress.is_empty(), "{progress:?}");
    let resumed = server.body_bytes_sent() - before;
    assert!(resumed <= 64 * 1024, "server wrote {resumed} body bytes");
    let seen = server.seen("/m/model.gguf");
    assert_eq!(seen.last().unwrap().range.as_deref(), Some("bytes=300000-"));
    assert_eq!(
        part_len(&cache, &url),
        300_000,
        "the confirmed prefix stays"
    );
    let mut right = options(0);
    right.expected_size = Some(LEN as u64);
    let d = get(&cache, &url, &right).0.unwrap();
    assert_whole(&d, &data);
    assert_eq!(d.bytes_received, LEN as u64 - 300_000);
    row(
        "Content-Length / Content-Range total != expectedSize",
        format!(
            "DownloadIntegrityMismatch before the body (server wrote {fresh} B fresh, \
             {resumed} B on a resume, client read 0); the resume's .part is kept and completes"
        ),
        &server,
    )
}

fn statuses() -> Row {
    let (server, _dir, cache, _data, _url) = setup(Fault::None);
    server.route("/404", Route::Status(404));
    server.route("/500", Route::Status(500));
    let e = get(&cache, &server.url("/404"), &options(3)).0.unwrap_err();
    assert!(
        matches!(
            e,
            DownloadError::Failed {
                status: Some(404),
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(server.seen("/404").len(), 1, "a 404 is not retried");
    let e = get(&cache, &server.url("/500"), &options(2)).0.unwrap_err();
    assert!(
        matches!(
            e,
            DownloadError::Failed {
                status: Some(500),
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(server.seen("/500").len(), 3, "a 500 is retried");
    assert!(cache.list().unwrap().is_empty());
    row(
        "404 / 500",
        "DownloadFailed(404) at once / DownloadFailed(500) after 2 retries",
        &server,
    )
}

fn redirects() -> Row {
    let (server, _dir, cache, data, _url) = setup(Fault::None);
    server.route("/r1", Route::Redirect("/r2".into()));
    server.route("/r2", Route::Redirect(server.url("/r3")));
    server.route("/r3", Route::Redirect("m/model.gguf".into()));
    let d = get(&cache, &server.url("/r1"), &options(0)).0.unwrap();
    assert_whole(&d, &data);
    server.route("/loop-a", Route::Redirect("/loop-b".into()));
    server.route("/loop-b", Route::Redirect("/loop-a".into()));
    let mut opts = options(0);
    opts.max_redirects = 5;
    let e = get(&cache, &server.url("/loop-a"), &opts).0.unwrap_err();
    assert!(
        matches!(&e, DownloadError::Failed { message, .. } if message.contains("too many redirects")),
        "{e:?}"
    );
    let hops = server.seen("/loop-a").len() + server.seen("/loop-b").len();
    assert_eq!(hops, 6);
    row(
        "3-hop redirect chain / redirect loop",
        "file verified / DownloadFailed after 6 requests (limit 5)",
        &server,
    )
}

fn lying_length() -> Row {
    let (server, _dir, cache, _data, url) = setup(Fault::LyingLength { extra: 1000 });
    let e = get(&cache, &url, &options(1)).0.unwrap_err();
    assert!(
        matches!(&e, DownloadError::Failed { message, .. } if message.contains("closed after")),
        "{e:?}"
    );
    assert!(!cache.target_path(&url).exists());
    assert!(cache.list().unwrap().is_empty());
    row(
        "Content-Length claims 1000 B more than sent",
        "DownloadFailed (short body) after 1 retry; no file, no entry",
        &server,
    )
}

fn stalled() -> Row {
    let (server, _dir, cache, _data, url) = setup(Fault::StallAfter { bytes: 100_000 });
    let mut opts = options(1);
    opts.read_timeout = Duration::from_millis(300);
    let t = Instant::now();
    let e = get(&cache, &url, &opts).0.unwrap_err();
    let took = t.elapsed();
    assert!(
        matches!(&e, DownloadError::Failed { message, .. } if message.contains("read timeout")),
        "{e:?}"
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
    // The retry resumed (the stalled server then sends 100000 more bytes from the offset).
    assert_eq!(part_len(&cache, &url), 200_000);
    row(
        "server stalls after 100000 B (read timeout 300 ms)",
        format!(
            "DownloadFailed (timeout) in {} ms, .part kept",
            took.as_millis()
        ),
        &server,
    )
}

fn concurrent() -> Row {
    let (server, _dir, cache, data, url) = setup(Fault::Slow {
        chunk: 64 * 1024,
        delay_ms: 20,
    });
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let (cache, url) = (cache.clone(), url.clone());
            std::thread::spawn(move || get(&cache, &url, &options(0)).0)
        })
        .collect();
    let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    for r in &results {
        assert_whole(r.as_ref().unwrap(), &data);
    }
    assert_eq!(server.seen("/m/model.gguf").len(), 1);
    row(
        "3 concurrent calls for one URL",
        "one request, all three get the verified file",
        &server,
    )
}

fn cancelled() -> Row {
    let (server, _dir, cache, data, url) = setup(Fault::Slow {
        chunk: 32 * 1024,
        delay_ms: 10,
    });
    let token = CancelToken::new();
    let t2 = token.clone();
    let e = download(
        &cache,
        &url,
        &options(0),
        &mut |p| {
            if p.downloaded >= 300_000 {
                t2.cancel();
            }
        },
        &token,
    )
    .unwrap_err();
    assert!(matches!(e, DownloadError::Cancelled { .. }), "{e:?}");
    let kept = part_len(&cache, &url);
    assert!(kept >= 300_000 && kept < LEN as u64, "{kept}");
    assert!(cache.list().unwrap().is_empty());
    assert!(!cache.target_path(&url).exists());
    let d = get(&cache, &url, &options(0)).0.unwrap();
    assert_whole(&d, &data);
    assert_eq!(d.bytes_received, LEN as u64 - kept);
    row(
        "cancelled mid-transfer",
        format!("Cancelled, .part of {kept} B kept, no entry; next call resumes"),
        &server,
    )
}

/// Another process holds the cache file's lock (here: this test, through the lock file): the
/// download waits without a request, can be cancelled while waiting, and goes ahead once the
/// lock is released.
fn locked_by_another_process() -> Row {
    let (server, _dir, cache, data, url) = setup(Fault::None);
    let target = cache.target_path(&url);
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    let mut lock_path = target.into_os_string();
    lock_path.push(".lock");
    let holder = std::fs::File::create(&lock_path).unwrap();
    fs4::FileExt::try_lock(&holder).unwrap();
    let token = CancelToken::new();
    let waiting = {
        let (cache, url, token) = (cache.clone(), url.clone(), token.clone());
        std::thread::spawn(move || download(&cache, &url, &options(0), &mut |_| {}, &token))
    };
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        server.seen("/m/model.gguf").is_empty(),
        "no request while locked"
    );
    let t = Instant::now();
    token.cancel();
    let e = waiting.join().unwrap().unwrap_err();
    assert!(matches!(e, DownloadError::Cancelled { .. }), "{e:?}");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    let waiting = {
        let (cache, url) = (cache.clone(), url.clone());
        std::thread::spawn(move || get(&cache, &url, &options(0)).0)
    };
    std::thread::sleep(Duration::from_millis(200));
    assert!(server.seen("/m/model.gguf").is_empty());
    drop(holder);
    let d = waiting.join().unwrap().unwrap();
    assert_whole(&d, &data);
    assert_eq!(server.seen("/m/model.gguf").len(), 1);
    row(
        "cache file locked by another process",
        "waits without a request; cancel while waiting works; downloads once unlocked",
        &server,
    )
}

fn corrupt_cache() -> Row {
    let (server, _dir, cache, data, url) = setup(Fault::None);
    let d = get(&cache, &url, &options(0)).0.unwrap();
    // Truncate the cached file behind the cache's back.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&d.entry.path)
        .unwrap();
    f.set_len(1000).unwrap();
    let e = cache.lookup(&url, None, None).unwrap_err();
    assert!(matches!(e, DownloadError::CacheCorrupt { .. }), "{e:?}");
    assert!(cache.list().unwrap().is_empty(), "the entry was dropped");
    assert!(!Path::new(&d.entry.path).exists(), "the file was deleted");
    let d = get(&cache, &url, &options(0)).0.unwrap();
    assert_whole(&d, &data);
    assert!(!d.cached);
    row(
        "cached file truncated on disk",
        "CacheCorrupt on lookup (entry dropped); download fetches it again",
        &server,
    )
}

fn changed_on_server() -> Row {
    let (server, _dir, cache, _data, url) = setup(Fault::DropAfter {
        bytes: 400_000,
        times: 1,
    });
    assert!(get(&cache, &url, &options(0)).0.is_err());
    let v2 = test_data(LEN, 8);
    server.file("/m/model.gguf", &v2, "\"v2\"", Fault::None);
    let d = get(&cache, &url, &options(0)).0.unwrap();
    assert_whole(&d, &v2);
    assert_eq!(d.bytes_received, LEN as u64);
    row(
        "file changed on the server between attempts (ETag)",
        "If-Range fails, 200: restarts from zero, new file verified",
        &server,
    )
}

#[test]
fn clean_download_and_cache_hit() {
    clean();
}
#[test]
fn dropped_connection_resumes_on_the_next_call() {
    dropped_then_manual_retry();
}
#[test]
fn dropped_connection_resumes_by_itself() {
    dropped_auto_retry();
}
#[test]
fn server_ignoring_range_restarts_from_zero() {
    range_ignored();
}
#[test]
fn wrong_bytes_are_an_integrity_mismatch() {
    wrong_bytes();
}
#[test]
fn wrong_size_is_an_integrity_mismatch() {
    wrong_size();
}
#[test]
fn an_announced_size_other_than_expected_fails_before_the_body() {
    announced_size_differs();
}
#[test]
fn error_statuses_are_typed() {
    statuses();
}
#[test]
fn redirect_chains_and_loops() {
    redirects();
}
#[test]
fn a_lying_content_length_is_an_error() {
    lying_length();
}
#[test]
fn a_stalled_server_times_out() {
    stalled();
}
#[test]
fn concurrent_calls_share_one_transfer() {
    concurrent();
}
#[test]
fn cancel_keeps_a_resumable_part() {
    cancelled();
}
#[test]
fn a_lock_held_by_another_process_is_waited_for() {
    locked_by_another_process();
}
#[test]
fn a_corrupt_cache_entry_is_dropped_and_fetched_again() {
    corrupt_cache();
}
#[test]
fn a_changed_file_restarts() {
    changed_on_server();
}

/// Every scenario again, printed as the fault table of the closing note.
#[test]
fn fault_table() {
    let rows = [
        clean(),
        dropped_then_manual_retry(),
        dropped_auto_retry(),
        range_ignored(),
        changed_on_server(),
        wrong_bytes(),
        wrong_size(),
        announced_size_differs(),
        statuses(),
        redirects(),
        lying_length(),
        stalled(),
        concurrent(),
        cancelled(),
        locked_by_another_process(),
        corrupt_cache(),
    ];
    println!("file size {LEN} B; bytes sent = file body bytes the server sent in the scenario");
    println!("| fault | outcome | bytes sent | re-downloaded |");
    println!("| --- | --- | --- | --- |");
    for r in rows {
        let again = r.sent.saturating_sub(LEN as u64);
        println!("| {} | {} | {} | {} |", r.fault, r.outcome, r.sent, again);
    }
}
