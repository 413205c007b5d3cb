//! Model downloads and the model cache (crate `local-llm-download`) for JavaScript. A download
//! is pull-style like token streams: [`start_download`] returns a [`DownloadTask`] whose
//! `next()` JavaScript awaits for each progress update until the one marked `done`; Rust never
//! calls into JavaScript.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use local_llm_download::{CacheEntry, CancelToken, DownloadOptions, ModelCache, Progress};

use crate::error::{LlmError, Stage};

#[uniffi::remote(Record)]
pub struct CacheEntry {
    pub url: String,
    pub path: String,
    pub size: u64,
    pub sha256: String,
    pub downloaded_at: String,
    pub last_used_at: String,
}

/// Options of [`start_download`] and the cache functions.
#[derive(Debug, Clone, Default, uniffi::Record)]
pub struct DownloadParams {
    /// The cache folder (default: [`default_model_cache_dir`]).
    #[uniffi(default = None)]
    pub cache_dir: Option<String>,
    /// The file's size in bytes (another size: `DownloadIntegrityMismatch`).
    #[uniffi(default = None)]
    pub expected_size: Option<u64>,
    /// The file's SHA-256 in hex (another hash: `DownloadIntegrityMismatch`).
    #[uniffi(default = None)]
    pub expected_sha256: Option<String>,
    /// Connect timeout in milliseconds (default 30000).
    #[uniffi(default = None)]
    pub connect_timeout_ms: Option<u32>,
    /// How long a read may wait for data, in milliseconds (default 60000).
    #[uniffi(default = None)]
    pub read_timeout_ms: Option<u32>,
    /// Further attempts after a network failure, each resuming (default 3).
    #[uniffi(default = None)]
    pub retries: Option<u32>,
}

impl DownloadParams {
    fn cache(&self) -> Result<ModelCache, LlmError> {
        cache_of(self.cache_dir.clone())
    }

    fn options(&self) -> DownloadOptions {
        let mut o = DownloadOptions {
            expected_size: self.expected_size,
            expected_sha256: self.expected_sha256.clone(),
            ..DownloadOptions::default()
        };
        if let Some(ms) = self.connect_timeout_ms {
            o.connect_timeout = Duration::from_millis(ms.into());
        }
        if let Some(ms) = self.read_timeout_ms {
            o.read_timeout = Duration::from_millis(ms.into());
        }
        if let Some(r) = self.retries {
            o.retries = r;
        }
        o
    }
}

fn cache_of(dir: Option<String>) -> Result<ModelCache, LlmError> {
    match dir {
        Some(d) if !d.is_empty() => Ok(ModelCache::new(d)),
        _ => ModelCache::default_dir()
            .map(ModelCache::new)
            .map_err(LlmError::from_download),
    }
}

/// One progress report of a download.
#[derive(Debug, Clone, uniffi::Record)]
pub struct DownloadProgress {
    /// Bytes of the file present.
    pub downloaded: u64,
    /// The file's size (0 while unknown).
    pub total: u64,
    /// `downloaded / total` in percent (0 while the total is unknown).
    pub percent: f64,
    /// Whether the download has ended; `entry` is then set.
    pub done: bool,
    /// The verified cache entry, on the last report.
    pub entry: Option<CacheEntry>,
    /// Whether the file was already cached (no transfer).
    pub cached: bool,
}

fn report(p: Progress) -> DownloadProgress {
    DownloadProgress {
        downloaded: p.downloaded,
        total: p.total.unwrap_or(0),
        percent: p.percent(),
        done: false,
        entry: None,
        cached: false,
    }
}

#[derive(Default)]
struct TaskState {
    latest: Option<Progress>,
    outcome: Option<Result<DownloadProgress, LlmError>>,
}

/// What the worker and the task share.
#[derive(Default)]
struct Shared {
    state: Mutex<TaskState>,
    changed: tokio::sync::Notify,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, TaskState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A download started by [`start_download`]; dropping it cancels the transfer.
#[derive(uniffi::Object)]
pub struct DownloadTask {
    shared: Arc<Shared>,
    cancel: CancelToken,
}

/// Start downloading `model` (an http(s) URL or a `user/repo[/branch]/file` shorthand) into the
/// cache, or find it there. Errors in the arguments are raised here; the others by `next()`.
#[uniffi::export]
pub fn start_download(
    model: String,
    params: DownloadParams,
) -> Result<Arc<DownloadTask>, LlmError> {
    local_llm_download::resolve_model_url(&model).map_err(LlmError::from_download)?;
    let cache = params.cache()?;
    let options = params.options();
    let rt = crate::runtime().ok_or_else(|| LlmError::worker_failed(Stage::Download))?;
    let shared = Arc::new(Shared::default());
    let cancel = CancelToken::new();
    let (worker, token) = (shared.clone(), cancel.clone());
    rt.spawn_blocking(move || {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            local_llm_download::download(
                &cache,
                &model,
                &options,
                &mut |p| {
                    worker.lock().latest = Some(p);
                    worker.changed.notify_one();
                },
                &token,
            )
        }));
        let outcome = match result {
            Ok(Ok(d)) => Ok(DownloadProgress {
                downloaded: d.entry.size,
                total: d.entry.size,
                percent: 100.0,
                done: true,
                entry: Some(d.entry),
                cached: d.cached,
            }),
            Ok(Err(e)) => Err(LlmError::from_download(e)),
            Err(_) => Err(LlmError::worker_failed(Stage::Download)),
        };
        worker.lock().outcome = Some(outcome);
        worker.changed.notify_one();
    });
    let task = Arc::new(DownloadTask { shared, cancel });
    Ok(task)
}

#[uniffi::export]
impl DownloadTask {
    /// Wait for the next progress report (reports in between are skipped); the last one has
    /// `done` set and is returned again by later calls. A failed download raises its error.
    pub async fn next(&self) -> Result<DownloadProgress, LlmError> {
        loop {
            let notified = self.shared.changed.notified();
            {
                let mut state = self.shared.lock();
                if let Some(outcome) = &state.outcome {
                    return outcome.clone();
                }
                if let Some(p) = state.latest.take() {
                    return Ok(report(p));
                }
            }
            notified.await;
        }
    }

    /// Stop the transfer (the partial file stays for a later resume); `next()` then raises a
    /// `DownloadFailed` error saying it was cancelled.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }
}

impl Drop for DownloadTask {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// The URL of a model specifier (local-llm-js-core's `resolveModelUrl` rules).
#[uniffi::export]
pub fn resolve_model_url(model: String) -> Result<String, LlmError> {
    local_llm_download::resolve_model_url(&model).map_err(LlmError::from_download)
}

/// Whether `model` is an http(s) URL or a download shorthand (rather than a file path).
#[uniffi::export]
pub fn is_remote_model(model: String) -> bool {
    local_llm_download::is_remote_model(&model)
}

/// The default cache folder of this platform (see `ModelCache::default_dir`), if it has one.
#[uniffi::export]
pub fn default_model_cache_dir() -> Option<String> {
    ModelCache::default_dir()
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

/// Where the cache stores the file of `model` (for a `DownloadAdapter` to write to); its
/// folder is created.
#[uniffi::export]
pub fn model_cache_path(model: String, cache_dir: Option<String>) -> Result<String, LlmError> {
    let url = resolve_model_url(model)?;
    let path = cache_of(cache_dir)?.target_path(&url);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| LlmError::DownloadFailed {
            message: format!("cannot create {}: {e}", dir.display()),
            status: 0,
        })?;
    }
    Ok(path.to_string_lossy().into_owned())
}

/// The cache entries whose files exist.
#[uniffi::export]
pub fn list_cached_models(cache_dir: Option<String>) -> Result<Vec<CacheEntry>, LlmError> {
    cache_of(cache_dir)?.list().map_err(LlmError::from_download)
}

/// Remove a model (entry, file and any partial download); returns whether it was cached.
#[uniffi::export]
pub fn remove_cached_model(model: String, cache_dir: Option<String>) -> Result<bool, LlmError> {
    let url = resolve_model_url(model)?;
    cache_of(cache_dir)?
        .remove(&url)
        .map_err(LlmError::from_download)
}

/// The cache entry of `model` after checking it against its file (size; the SHA-256 when
/// `expected_sha256` is given), or none. A corrupt entry is dropped and raises `CacheCorrupt`.
#[uniffi::export]
pub async fn lookup_cached_model(
    model: String,
    params: DownloadParams,
) -> Result<Option<CacheEntry>, LlmError> {
    crate::run_blocking(Stage::Download, move || {
        let url = resolve_model_url(model)?;
        let sha = params
            .expected_sha256
            .as_deref()
            .map(local_llm_download::normalize_sha256)
            .transpose()
            .map_err(LlmError::from_download)?;
        params
            .cache()?
            .lookup(&url, params.expected_size, sha.as_deref())
            .map_err(LlmError::from_download)
    })
    .await
}

/// Check the file an app's own downloader wrote to [`model_cache_path`] against the expected
/// size and SHA-256 and enter it in the cache index (a file that fails is deleted).
#[uniffi::export]
pub async fn adopt_downloaded_model(
    model: String,
    params: DownloadParams,
) -> Result<CacheEntry, LlmError> {
    crate::run_blocking(Stage::Download, move || {
        local_llm_download::adopt(&params.cache()?, &model, &params.options())
            .map_err(LlmError::from_download)
    })
    .await
}
