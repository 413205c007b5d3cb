//! `local-llm-download`: model files from http(s) URLs (and the Hugging Face shorthand) into a
//! verified, indexed cache folder. Used by the CLI and the FFI; the engine stays network-free.
//!
//! A download is written to `<file>.part` (with a sidecar recording the server's validators),
//! resumed with `Range`/`If-Range` after an interruption, checked against the expected size and
//! SHA-256, and only then renamed to its final name and entered in the index. Two callers of
//! one URL in one process share one transfer; processes sharing a cache folder take turns through
//! a lock file per cache file, and the later ones reuse the verified file. TLS is rustls (with the Mozilla roots of
//! `webpki-roots`); proxies come from the usual environment variables ([`ProxyConfig`]).
//!
//! Only GGUF files are accepted (the magic `GGUF` at offset 0): a body that is something else,
//! such as an HTML error or login page answered with status 200, is an `IntegrityMismatch` and
//! is not cached, whether or not a SHA-256 was given.
//!
//! A transfer is bounded in time ([`DownloadOptions`]): connecting (30 s), waiting for data
//! (the idle or read timeout, 60 s), its pace (curl's `--speed-limit 1024 --speed-time 60`: less
//! than 1 KiB/s for a minute fails) and, when asked, the whole download. A cancel closes the
//! connection at once, even while a read waits for a stalled server.

#[cfg(any(target_os = "android", target_os = "ios", test))]
mod app_dir;
mod cache;
mod error;
mod flight;
mod lock;
mod proxy;
mod relay;
mod transfer;
mod url;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use cache::{normalize_sha256, sha256_file, CacheEntry, ModelCache};
pub use error::DownloadError;
pub use proxy::ProxyConfig;
pub use url::{extract_model_filename, hash_model_url, is_remote_model, resolve_model_url};

/// How a download is made and checked.
#[derive(Debug, Clone)]
pub struct DownloadOptions {
    /// The file's size in bytes; another size is `IntegrityMismatch`.
    pub expected_size: Option<u64>,
    /// The file's SHA-256 (hex); another hash is `IntegrityMismatch`.
    pub expected_sha256: Option<String>,
    /// Time allowed to open a connection (TCP; default 30 s).
    pub connect_timeout: Duration,
    /// The idle timeout: how long a read may wait for data before the transfer counts as
    /// stalled (default 60 s).
    pub read_timeout: Duration,
    /// The low-speed bound in bytes per second (curl's `--speed-limit`; 0 turns it off;
    /// default 1024): a transfer slower than this for [`DownloadOptions::low_speed_time`]
    /// fails (and is retried, resuming, like other network failures), so a server trickling
    /// a byte now and then, never idle for the read timeout, cannot hold a download forever.
    pub low_speed_limit: u64,
    /// How long a transfer may stay below [`DownloadOptions::low_speed_limit`] (curl's
    /// `--speed-time`; default 60 s). The rate is sampled every quarter of this (at most every
    /// second).
    pub low_speed_time: Duration,
    /// The overall limit of one download, all attempts included, counted from its first
    /// request (curl's `--max-time`; default none: a large model on a slow link legitimately
    /// takes hours). Reaching it fails at once, without a retry; the partial file stays.
    pub total_timeout: Option<Duration>,
    /// Redirects followed before giving up.
    pub max_redirects: u32,
    /// Further attempts after a transient failure (each resumes where the last stopped).
    pub retries: u32,
    /// First wait between attempts (doubling each time, at most 5 s).
    pub retry_backoff: Duration,
    /// The proxies.
    pub proxy: ProxyConfig,
}

impl Default for DownloadOptions {
    fn default() -> Self {
        DownloadOptions {
            expected_size: None,
            expected_sha256: None,
            connect_timeout: Duration::from_secs(30),
            read_timeout: Duration::from_secs(60),
            low_speed_limit: 1024,
            low_speed_time: Duration::from_secs(60),
            total_timeout: None,
            max_redirects: 10,
            retries: 3,
            retry_backoff: Duration::from_millis(500),
            proxy: ProxyConfig::from_env(),
        }
    }
}

/// How far a download is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Bytes of the file present (including those of an earlier, resumed attempt).
    pub downloaded: u64,
    /// The file's size, when the server said.
    pub total: Option<u64>,
}

impl Progress {
    /// `downloaded / total` in percent (0 while the total is unknown).
    pub fn percent(&self) -> f64 {
        match self.total {
            Some(t) if t > 0 => self.downloaded as f64 * 100.0 / t as f64,
            _ => 0.0,
        }
    }
}

/// Cancels a download when [`CancelToken::cancel`] is called (polled every 50 ms; the last
/// caller of a transfer closes its connection, which ends a read waiting for data at once).
/// The partial file stays for a later resume.
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    /// A token that is not cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancel.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether [`CancelToken::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// The outcome of [`download`].
#[derive(Debug, Clone)]
pub struct Downloaded {
    /// The cache entry (its `path` is the verified file).
    pub entry: CacheEntry,
    /// Whether it was already in the cache (no transfer).
    pub cached: bool,
    /// Body bytes this call's transfer received from the network (0 when shared with another
    /// caller's transfer or cached).
    pub bytes_received: u64,
}

/// The cached file of `spec` (a URL or shorthand), downloading it first when it is not cached
/// or its entry is corrupt (the entry is then dropped and the file fetched again).
pub fn download(
    cache: &ModelCache,
    spec: &str,
    options: &DownloadOptions,
    on_progress: &mut dyn FnMut(Progress),
    cancel: &CancelToken,
) -> Result<Downloaded, DownloadError> {
    let url = resolve_model_url(spec)?;
    let expected_sha = options
        .expected_sha256
        .as_deref()
        .map(normalize_sha256)
        .transpose()?;
    match cache.lookup(&url, options.expected_size, expected_sha.as_deref()) {
        Ok(Some(entry)) => {
            return Ok(Downloaded {
                entry,
                cached: true,
                bytes_received: 0,
            })
        }
        Ok(None) | Err(DownloadError::CacheCorrupt { .. }) => {}
        Err(e) => return Err(e),
    }
    let mut options = options.clone();
    options.expected_sha256 = expected_sha;
    flight::join(cache, &url, &options, on_progress, cancel)
}

/// Check a file that the app's own downloader wrote to [`ModelCache::target_path`] of `spec`
/// against the expected size and SHA-256 and enter it in the index (a file that fails is
/// deleted: `IntegrityMismatch`).
pub fn adopt(
    cache: &ModelCache,
    spec: &str,
    options: &DownloadOptions,
) -> Result<CacheEntry, DownloadError> {
    let url = resolve_model_url(spec)?;
    let mut options = options.clone();
    options.expected_sha256 = options
        .expected_sha256
        .as_deref()
        .map(normalize_sha256)
        .transpose()?;
    let target = cache.target_path(&url);
    flight::commit(cache, &url, &target, &target, &options)
}
