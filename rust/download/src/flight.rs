//! In-flight downloads: the first caller of a URL (per cache file) starts a transfer thread;
//! later callers wait for the same transfer. Each caller sees the progress and the outcome; a
//! caller that cancels stops waiting, and the transfer stops once every caller has cancelled:
//! the last one closes the transfer's connection (a read waiting for a stalled server ends at
//! once) and returns when the partial file is settled.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::cache::not_gguf;
use crate::relay::Relay;
use crate::transfer::{discard_partial, partial_paths, transfer, Hooks, NetConfig};
use crate::{
    sha256_file, CacheEntry, CancelToken, DownloadError, DownloadOptions, Downloaded, ModelCache,
    Progress,
};

/// How often a waiting caller checks its cancel token.
const POLL: Duration = Duration::from_millis(50);

#[derive(Default)]
struct State {
    progress: Progress,
    /// Callers still waiting; the transfer stops when it drops to zero.
    attached: usize,
    /// Body bytes received from the network by this flight.
    received: u64,
    outcome: Option<Result<CacheEntry, DownloadError>>,
}

#[derive(Default)]
struct Flight {
    state: Mutex<State>,
    changed: Condvar,
    /// The transfer's connections, closed when every caller has cancelled.
    relay: Relay,
}

impl Flight {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

type Flights = Mutex<BTreeMap<PathBuf, Arc<Flight>>>;

fn flights() -> MutexGuard<'static, BTreeMap<PathBuf, Arc<Flight>>> {
    static FLIGHTS: Flights = Mutex::new(BTreeMap::new());
    FLIGHTS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Download `url` into `cache` (sharing a transfer already under way) and wait for it.
pub(crate) fn join(
    cache: &ModelCache,
    url: &str,
    options: &DownloadOptions,
    on_progress: &mut dyn FnMut(Progress),
    cancel: &CancelToken,
) -> Result<Downloaded, DownloadError> {
    let target = cache.target_path(url);
    let (flight, started) = {
        let mut map = flights();
        // A flight whose callers all cancelled is ending: a new caller starts another one
        // (which waits for the old one's lock on the cache file).
        match map.get(&target).filter(|f| !f.relay.is_closed()) {
            Some(f) => {
                f.lock().attached += 1;
                (f.clone(), false)
            }
            None => {
                let f = Arc::new(Flight::default());
                f.lock().attached = 1;
                let (c, u, o, t, fl) = (
                    cache.clone(),
                    url.to_string(),
                    options.clone(),
                    target.clone(),
                    f.clone(),
                );
                std::thread::Builder::new()
                    .name("local-llm-download".into())
                    .spawn(move || run(&fl, &c, &u, &o, &t))
                    .map_err(|e| DownloadError::Failed {
                        url: url.to_string(),
                        status: None,
                        message: format!("cannot start the download thread: {e}"),
                    })?;
                map.insert(target.clone(), f.clone());
                (f, true)
            }
        }
    };
    let mut state = flight.lock();
    // Nothing is reported before the transfer says where it starts (a resume starts at the
    // partial file's size, not at 0).
    let mut reported = Some(Progress::default());
    loop {
        if let Some(outcome) = state.outcome.clone() {
            let received = if started { state.received } else { 0 };
            let progress = state.progress;
            drop(state);
            if outcome.is_ok() && reported != Some(progress) {
                on_progress(progress);
            }
            let entry = outcome?;
            if !started {
                check_shared(url, &entry, options)?;
            }
            return Ok(Downloaded {
                entry,
                cached: false,
                bytes_received: received,
            });
        }
        if cancel.is_cancelled() {
            state.attached -= 1;
            if state.attached == 0 {
                // The last caller: close the connection and wait for the transfer to stop, so
                // the partial file is settled.
                flight.relay.close();
                while state.outcome.is_none() {
                    state = flight
                        .changed
                        .wait(state)
                        .unwrap_or_else(|p| p.into_inner());
                }
            }
            return Err(DownloadError::Cancelled {
                url: url.to_string(),
            });
        }
        if reported != Some(state.progress) {
            let progress = state.progress;
            reported = Some(progress);
            drop(state);
            on_progress(progress);
            state = flight.lock();
            continue;
        }
        state = flight
            .changed
            .wait_timeout(state, POLL)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
}

/// A caller that joined another's transfer checks its own expectations.
fn check_shared(
    url: &str,
    entry: &CacheEntry,
    options: &DownloadOptions,
) -> Result<(), DownloadError> {
    let size_ok = options.expected_size.is_none_or(|s| s == entry.size);
    let sha_ok = options
        .expected_sha256
        .as_deref()
        .is_none_or(|s| s == entry.sha256);
    if size_ok && sha_ok {
        Ok(())
    } else {
        Err(DownloadError::IntegrityMismatch {
            url: url.to_string(),
            message: format!(
                "the file has {} bytes and SHA-256 {}, expected {:?} bytes and SHA-256 {:?}",
                entry.size, entry.sha256, options.expected_size, options.expected_sha256
            ),
        })
    }
}

/// The transfer thread.
fn run(flight: &Flight, cache: &ModelCache, url: &str, options: &DownloadOptions, target: &Path) {
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        fetch(flight, cache, url, options, target)
    }))
    .unwrap_or_else(|_| {
        Err(DownloadError::Failed {
            url: url.to_string(),
            status: None,
            message: "internal error: the download thread panicked".into(),
        })
    });
    {
        let mut map = flights();
        if map.get(target).is_some_and(|f| std::ptr::eq(&**f, flight)) {
            map.remove(target);
        }
    }
    flight.lock().outcome = Some(outcome);
    flight.changed.notify_all();
}

fn fetch(
    flight: &Flight,
    cache: &ModelCache,
    url: &str,
    options: &DownloadOptions,
    target: &Path,
) -> Result<CacheEntry, DownloadError> {
    if let Some(dir) = target.parent() {
        std::fs::create_dir_all(dir).map_err(|e| DownloadError::io(dir, e))?;
    }
    let cancelled = || flight.lock().attached == 0;
    let cancel_error = || DownloadError::Cancelled {
        url: url.to_string(),
    };
    let _lock = crate::lock::lock(target, POLL, &cancelled)?.ok_or_else(cancel_error)?;
    // Another process may have downloaded the file while this one waited for the lock.
    if let Ok(Some(entry)) = cache.lookup(
        url,
        options.expected_size,
        options.expected_sha256.as_deref(),
    ) {
        return Ok(entry);
    }
    let net = NetConfig {
        connect_timeout: options.connect_timeout,
        read_timeout: options.read_timeout,
        max_redirects: options.max_redirects,
        proxy: options.proxy.clone(),
        relay: flight.relay.clone(),
        low_speed_limit: options.low_speed_limit,
        low_speed_time: options.low_speed_time,
        overall: options
            .total_timeout
            .and_then(|t| Some((Instant::now().checked_add(t)?, t))),
    };
    let past_deadline = || net.overall.is_some_and(|(d, _)| Instant::now() >= d);
    let mut attempt = 0;
    loop {
        let mut received = 0;
        let mut progress = |downloaded, total| {
            flight.lock().progress = Progress { downloaded, total };
            flight.changed.notify_all();
        };
        let result = transfer(
            url,
            target,
            &net,
            options.expected_size,
            &mut Hooks {
                progress: &mut progress,
                cancelled: &cancelled,
                received: &mut received,
            },
        );
        flight.lock().received += received;
        match result {
            Ok(_) => break,
            Err(_) if cancelled() => return Err(cancel_error()),
            Err(e) if e.is_transient() && attempt < options.retries && !past_deadline() => {
                let wait = options.retry_backoff.saturating_mul(1 << attempt.min(4));
                let until = Instant::now() + wait.min(Duration::from_secs(5));
                while Instant::now() < until {
                    if cancelled() {
                        return Err(cancel_error());
                    }
                    std::thread::sleep(POLL);
                }
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
    let (part, side) = partial_paths(target);
    commit(cache, url, &part, target, options).inspect(|_| {
        let _ = std::fs::remove_file(&side);
    })
}

/// Check `file` against the expected size, the GGUF magic and the expected SHA-256, move it to
/// `target` and enter it in the index. A file that fails a check is deleted (with its
/// partial-download sidecar).
pub(crate) fn commit(
    cache: &ModelCache,
    url: &str,
    file: &Path,
    target: &Path,
    options: &DownloadOptions,
) -> Result<CacheEntry, DownloadError> {
    let size = std::fs::metadata(file)
        .map_err(|e| DownloadError::io(file, e))?
        .len();
    let mismatch = |message: String| {
        let _ = std::fs::remove_file(file);
        discard_partial(target);
        Err(DownloadError::IntegrityMismatch {
            url: url.to_string(),
            message,
        })
    };
    if size == 0 {
        return mismatch("the file is empty".into());
    }
    if let Some(expected) = options.expected_size.filter(|&s| s != size) {
        return mismatch(format!("expected {expected} bytes, got {size}"));
    }
    if let Some(message) = not_gguf(file)? {
        return mismatch(message);
    }
    let sha256 = sha256_file(file)?;
    if let Some(expected) = options.expected_sha256.as_deref().filter(|&s| s != sha256) {
        return mismatch(format!("expected SHA-256 {expected}, got {sha256}"));
    }
    if file != target {
        std::fs::rename(file, target).map_err(|e| DownloadError::io(target, e))?;
    }
    cache.register_hashed(url, target, sha256)
}
