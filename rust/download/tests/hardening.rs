//! Issue 38, item 6: downloads under attack, each with its bound. A stalled transfer is
//! aborted (socket closed, call settled) well within 2 s; a server trickling bytes fails the
//! low-speed bound and the overall time limit; a poisoned `index.json` entry (a path outside
//! the cache, a symlink out of it, a hash other than the expected one) is dropped, never
//! returned; a body that is not a GGUF file (an HTML error page) is refused and nothing is
//! cached.

mod support;

use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use local_llm_download::{
    download, CancelToken, DownloadError, DownloadOptions, Downloaded, ModelCache, ProxyConfig,
};
use support::server::{test_data, Fault, Route, Server};
use support::sha_hex;

const LEN: usize = 1 << 20;

fn options() -> DownloadOptions {
    DownloadOptions {
        retries: 0,
        proxy: ProxyConfig::default(),
        ..DownloadOptions::default()
    }
}

fn fetch(
    cache: &ModelCache,
    url: &str,
    opts: &DownloadOptions,
) -> Result<Downloaded, DownloadError> {
    download(cache, url, opts, &mut |_| {}, &CancelToken::new())
}

/// Run `f` on a thread and give up after `bound` (so a hang fails the test instead of
/// blocking it).
fn within<T: Send + 'static>(bound: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(bound)
        .unwrap_or_else(|_| panic!("no result within {bound:?}"))
}

/// The cache's index file as JSON, changed by `edit`, written back.
fn edit_index(cache: &ModelCache, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = cache.dir().join("index.json");
    let mut index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(&mut index);
    std::fs::write(&path, serde_json::to_vec(&index).unwrap()).unwrap();
}

fn first_entry(index: &mut serde_json::Value) -> &mut serde_json::Value {
    index["models"]
        .as_object_mut()
        .unwrap()
        .values_mut()
        .next()
        .unwrap()
}

/// Bound: cancel → error returned in < 2 s and the server sees the socket closed in < 2 s,
/// with the default 60 s read timeout (before the fix: about 60 s for both).
#[test]
fn aborting_a_stalled_transfer_closes_the_socket_promptly() {
    let server = Server::start();
    let data = test_data(LEN, 1);
    server.file(
        "/s.gguf",
        &data,
        "\"v1\"",
        Fault::StallAfter { bytes: 100_000 },
    );
    let dir = tempfile::tempdir().unwrap();
    let cache = ModelCache::new(dir.path());
    let url = server.url("/s.gguf");
    let token = CancelToken::new();
    let (t2, c2, u2) = (token.clone(), cache.clone(), url.clone());
    let call = std::thread::spawn(move || {
        let r = download(&c2, &u2, &options(), &mut |_| {}, &t2);
        (r, Instant::now())
    });
    let t = Instant::now();
    while server.stalled_open() == 0 || server.body_bytes_sent() < 100_000 {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the server never stalled"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // Let the client block in its read.
    std::thread::sleep(Duration::from_millis(300));
    let cancelled_at = Instant::now();
    token.cancel();
    while server.stalled_open() > 0 {
        assert!(
            cancelled_at.elapsed() < Duration::from_secs(2),
            "the socket is still open {:?} after the abort",
            cancelled_at.elapsed()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let closed = cancelled_at.elapsed();
    let (r, returned_at) = within(Duration::from_secs(2), move || call.join().unwrap());
    let settled = returned_at - cancelled_at;
    assert!(matches!(r, Err(DownloadError::Cancelled { .. })), "{r:?}");
    assert!(settled < Duration::from_secs(2), "{settled:?}");
    println!("stalled abort: socket closed in {closed:?}, call settled in {settled:?}");
    // The partial file stays for a resume.
    let mut part = cache.target_path(&url).into_os_string();
    part.push(".part");
    assert_eq!(std::fs::metadata(part).unwrap().len(), 100_000);
}

/// Bound: 1 byte every 100 ms (never idle for the 5 s read timeout) fails the low-speed bound
/// of 1000 B/s over 1 s within 3 s (before the fix: it never ends while bytes keep coming).
#[test]
fn a_trickling_server_fails_the_low_speed_bound() {
    let server = Server::start();
    let data = test_data(LEN, 2);
    server.file(
        "/t.gguf",
        &data,
        "\"v1\"",
        Fault::Trickle {
            bytes: 10_000,
            every_ms: 100,
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let cache = ModelCache::new(dir.path());
    let url = server.url("/t.gguf");
    let opts = DownloadOptions {
        read_timeout: Duration::from_secs(5),
        low_speed_limit: 1000,
        low_speed_time: Duration::from_secs(1),
        ..options()
    };
    let t = Instant::now();
    let r = within(Duration::from_secs(10), move || fetch(&cache, &url, &opts));
    let took = t.elapsed();
    assert!(
        matches!(&r, Err(DownloadError::Failed { message, .. }) if message.contains("slower than")),
        "{r:?}"
    );
    assert!(took < Duration::from_secs(3), "{took:?}");
    println!(
        "trickle: low-speed failure after {took:?}: {}",
        r.unwrap_err()
    );
}

/// Bound: a steady but slow body (64 KiB every 100 ms, ~16 s for 1 MiB) fails the overall
/// limit of 1 s within 2 s.
#[test]
fn a_transfer_longer_than_its_overall_limit_fails() {
    let server = Server::start();
    let data = test_data(LEN, 3);
    let slow = Fault::Slow {
        chunk: 64 * 1024,
        delay_ms: 100,
    };
    server.file("/o.gguf", &data, "\"v1\"", slow);
    let dir = tempfile::tempdir().unwrap();
    let cache = ModelCache::new(dir.path());
    let url = server.url("/o.gguf");
    let opts = DownloadOptions {
        total_timeout: Some(Duration::from_secs(1)),
        ..options()
    };
    let t = Instant::now();
    let r = within(Duration::from_secs(10), move || fetch(&cache, &url, &opts));
    let took = t.elapsed();
    assert!(
        matches!(&r, Err(DownloadError::Failed { message, .. }) if message.contains("overall")),
        "{r:?}"
    );
    assert!(took < Duration::from_secs(2), "{took:?}");
    println!("overall limit: failed after {took:?}");
}

/// An index entry whose path points outside the cache is never returned (with or without an
/// expected SHA-256, and not by `list`): it is dropped and the file downloaded again.
#[test]
fn a_poisoned_index_path_is_dropped_not_returned() {
    let server = Server::start();
    let data = test_data(LEN, 4);
    server.file("/p.gguf", &data, "\"v1\"", Fault::None);
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.gguf");
    std::fs::write(&secret, &*data).unwrap();
    let cache = ModelCache::new(dir.path().join("cache"));
    let url = server.url("/p.gguf");
    let poison = |cache: &ModelCache| {
        edit_index(cache, |index| {
            first_entry(index)["path"] = secret.to_str().unwrap().into();
        })
    };
    for expected in [Some(sha_hex(&data)), None] {
        let mut opts = options();
        opts.expected_sha256 = expected.clone();
        fetch(&cache, &url, &opts).unwrap();
        poison(&cache);
        assert!(
            cache.list().unwrap().is_empty(),
            "list returned a poisoned entry"
        );
        fetch(&cache, &url, &opts).unwrap();
        poison(&cache);
        let e = cache.lookup(&url, None, expected.as_deref()).unwrap_err();
        assert!(matches!(e, DownloadError::CacheCorrupt { .. }), "{e:?}");
        assert_eq!(
            cache.lookup(&url, None, None).unwrap(),
            None,
            "the entry was dropped"
        );
        fetch(&cache, &url, &opts).unwrap();
        poison(&cache);
        let d = fetch(&cache, &url, &opts).unwrap();
        assert!(!d.cached, "a poisoned entry was served from the cache");
        assert_eq!(
            Path::new(&d.entry.path).canonicalize().unwrap(),
            cache.target_path(&url).canonicalize().unwrap()
        );
        cache.remove(&url).unwrap();
    }
    assert_eq!(
        std::fs::read(&secret).unwrap(),
        *data,
        "the outside file is untouched"
    );
}

/// The cache file replaced by a symlink to a file outside the cache is not returned.
#[cfg(unix)]
#[test]
fn a_symlink_out_of_the_cache_is_dropped() {
    let server = Server::start();
    let data = test_data(LEN, 5);
    server.file("/l.gguf", &data, "\"v1\"", Fault::None);
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.gguf");
    std::fs::write(&secret, &*data).unwrap();
    let cache = ModelCache::new(dir.path());
    let url = server.url("/l.gguf");
    let d = fetch(&cache, &url, &options()).unwrap();
    std::fs::remove_file(&d.entry.path).unwrap();
    std::os::unix::fs::symlink(&secret, &d.entry.path).unwrap();
    let e = cache.lookup(&url, None, None).unwrap_err();
    assert!(matches!(e, DownloadError::CacheCorrupt { .. }), "{e:?}");
    assert!(secret.exists(), "the symlink's target is not deleted");
}

/// An entry whose recorded SHA-256 differs from the expected one is dropped (the file's own
/// hash is checked too: an entry edited to claim the expected hash is caught as well).
#[test]
fn an_index_hash_other_than_the_expected_one_is_dropped() {
    let server = Server::start();
    let data = test_data(LEN, 6);
    server.file("/h.gguf", &data, "\"v1\"", Fault::None);
    let dir = tempfile::tempdir().unwrap();
    let cache = ModelCache::new(dir.path());
    let url = server.url("/h.gguf");
    fetch(&cache, &url, &options()).unwrap();
    let other = sha_hex(b"another file");
    let e = cache.lookup(&url, None, Some(&other)).unwrap_err();
    assert!(matches!(e, DownloadError::CacheCorrupt { .. }), "{e:?}");
    let d = fetch(&cache, &url, &options()).unwrap();
    let mut bytes = std::fs::read(&d.entry.path).unwrap();
    bytes[100] ^= 0xff;
    std::fs::write(&d.entry.path, &bytes).unwrap();
    let e = cache.lookup(&url, None, Some(&sha_hex(&data))).unwrap_err();
    assert!(matches!(e, DownloadError::CacheCorrupt { .. }), "{e:?}");
}

/// An HTML error page (200, no SHA-256 given) is refused as not a GGUF file: a typed
/// `IntegrityMismatch` naming what arrived, and no file, partial file or entry is left.
#[test]
fn an_html_page_is_not_cached_as_a_model() {
    let server = Server::start();
    let page = b"<!DOCTYPE html><html><body>Please log in</body></html>\n".repeat(100);
    server.route(
        "/m/model.gguf",
        Route::File {
            data: std::sync::Arc::new(page),
            etag: "\"h\"".into(),
            fault: Fault::None,
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let cache = ModelCache::new(dir.path());
    let url = server.url("/m/model.gguf");
    let e = fetch(&cache, &url, &options()).unwrap_err();
    assert!(
        matches!(&e, DownloadError::IntegrityMismatch { message, .. }
            if message.contains("not a GGUF") && message.contains("<!DOCTYPE")),
        "{e:?}"
    );
    assert!(!cache.target_path(&url).exists());
    let mut part = cache.target_path(&url).into_os_string();
    part.push(".part");
    assert!(!Path::new(&part).exists());
    assert!(cache.list().unwrap().is_empty());
    assert_eq!(cache.lookup(&url, None, None).unwrap(), None);
}

/// A non-GGUF file already in the cache (entered before this check existed) is dropped on
/// lookup.
#[test]
fn a_cached_file_that_is_not_gguf_is_dropped() {
    let server = Server::start();
    let data = test_data(LEN, 7);
    server.file("/g.gguf", &data, "\"v1\"", Fault::None);
    let dir = tempfile::tempdir().unwrap();
    let cache = ModelCache::new(dir.path());
    let url = server.url("/g.gguf");
    let d = fetch(&cache, &url, &options()).unwrap();
    let mut bytes = std::fs::read(&d.entry.path).unwrap();
    bytes[..4].copy_from_slice(b"<htm");
    std::fs::write(&d.entry.path, &bytes).unwrap();
    let e = cache.lookup(&url, None, None).unwrap_err();
    assert!(
        matches!(&e, DownloadError::CacheCorrupt { message, .. } if message.contains("not a GGUF")),
        "{e:?}"
    );
}

/// A host that refuses the connection is a typed `Failed` naming the connection, quickly
/// (connections go through the cancel-able relay, which reports why it could not connect).
#[test]
fn a_refused_connection_is_reported_as_such() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let cache = ModelCache::new(dir.path());
    let url = format!("http://127.0.0.1:{port}/x.gguf");
    let t = Instant::now();
    let e = fetch(&cache, &url, &options()).unwrap_err();
    assert!(
        matches!(&e, DownloadError::Failed { status: None, message, .. } if message.contains("cannot connect")),
        "{e:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
}
