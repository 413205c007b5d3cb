//! The model cache: a folder with one sub-folder per URL (named by [`hash_model_url`]) holding
//! the file under its URL's file name, and `index.json` mapping each URL's hash to a
//! [`CacheEntry`] (local-llm-js-core's `CacheIndex` layout, with the file's SHA-256 added).
//! The index is changed under a process-wide lock and replaced atomically (write + rename).
//!
//! The index is not trusted: an entry is returned only when its path is, canonicalized, the
//! cache file of its URL inside the cache folder (a path or symlink leading elsewhere is
//! dropped), its file is a GGUF file of the recorded size, and — when an expected SHA-256 is
//! given — both the recorded hash and the file's own hash are the expected one.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::url::{extract_model_filename, hash_model_url};
use crate::DownloadError;

/// One cached model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CacheEntry {
    /// The URL it was downloaded from (after shorthand resolution, before redirects).
    pub url: String,
    /// The file's absolute path.
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its SHA-256, 64 lower-case hex digits.
    #[serde(default)]
    pub sha256: String,
    /// When it was downloaded (ISO 8601, UTC).
    pub downloaded_at: String,
    /// When it was last looked up (ISO 8601, UTC).
    pub last_used_at: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct CacheIndex {
    models: BTreeMap<String, CacheEntry>,
}

/// Serializes the index updates of this process.
static INDEX_LOCK: Mutex<()> = Mutex::new(());

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The SHA-256 of a file, as lower-case hex.
pub fn sha256_file(path: &Path) -> Result<String, DownloadError> {
    let mut file = File::open(path).map_err(|e| DownloadError::io(path, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file
            .read(&mut buf)
            .map_err(|e| DownloadError::io(path, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// The magic at the start of every GGUF file.
const GGUF_MAGIC: &[u8; 4] = b"GGUF";

/// What is wrong with `path` as a model file: `None` when it starts with the GGUF magic,
/// else a message quoting its first bytes (an HTML page shows up as such).
pub(crate) fn not_gguf(path: &Path) -> Result<Option<String>, DownloadError> {
    let mut head = Vec::with_capacity(48);
    File::open(path)
        .and_then(|f| f.take(48).read_to_end(&mut head))
        .map_err(|e| DownloadError::io(path, e))?;
    if head.starts_with(GGUF_MAGIC) {
        return Ok(None);
    }
    let text = String::from_utf8_lossy(&head);
    Ok(Some(format!(
        "not a GGUF model file (no \"GGUF\" magic at offset 0): it starts with {text:?}; the \
         server may have answered an error or login page"
    )))
}

/// A normalized expected SHA-256 (lower-case), or an error if it is not 64 hex digits.
pub fn normalize_sha256(hex: &str) -> Result<String, DownloadError> {
    let hex = hex.trim().to_ascii_lowercase();
    if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(hex)
    } else {
        Err(DownloadError::InvalidInput(format!(
            "expectedSha256 must be 64 hex digits, got \"{hex}\""
        )))
    }
}

/// An environment variable that is set and not empty.
#[cfg(not(target_os = "android"))]
fn non_empty_var(name: &str) -> Option<std::ffi::OsString> {
    std::env::var_os(name).filter(|v| !v.is_empty())
}

/// A cache folder.
#[derive(Debug, Clone)]
pub struct ModelCache {
    dir: PathBuf,
}

impl ModelCache {
    /// The cache in `dir` (created when something is stored).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        ModelCache { dir: dir.into() }
    }

    /// The default folder of this platform: on Android `local-llm/models` in the app's files
    /// directory; on iOS `Library/Application Support/local-llm/models` in the app's container,
    /// created and excluded from backups (the system never purges it, unlike `Library/Caches`);
    /// elsewhere `$XDG_CACHE_HOME/local-llm/models`, else `~/.cache/local-llm/models`
    /// (`%LOCALAPPDATA%\local-llm\models` on Windows).
    pub fn default_dir() -> Result<PathBuf, DownloadError> {
        #[cfg(target_os = "android")]
        {
            return crate::app_dir::this_android_files_dir()
                .map(|files| files.join("local-llm").join("models"))
                .ok_or_else(|| {
                    DownloadError::InvalidInput(
                        "this process is not an Android app with a files directory: pass cacheDir"
                            .into(),
                    )
                });
        }
        #[cfg(target_os = "ios")]
        {
            let home = non_empty_var("HOME").ok_or_else(|| {
                DownloadError::InvalidInput("HOME is not set: pass cacheDir".into())
            })?;
            let dir = PathBuf::from(home).join("Library/Application Support/local-llm/models");
            crate::app_dir::create_excluded_from_backup(&dir)
                .map_err(|e| DownloadError::io(&dir, e))?;
            return Ok(dir);
        }
        #[cfg(not(any(target_os = "android", target_os = "ios")))]
        {
            let base = non_empty_var("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| non_empty_var("HOME").map(|h| PathBuf::from(h).join(".cache")))
                .or_else(|| non_empty_var("LOCALAPPDATA").map(PathBuf::from))
                .ok_or_else(|| {
                    DownloadError::InvalidInput(
                        "no default model cache folder (no XDG_CACHE_HOME or HOME): pass cacheDir"
                            .into(),
                    )
                })?;
            Ok(base.join("local-llm").join("models"))
        }
    }

    /// The cache folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the file of `url` is stored.
    pub fn target_path(&self, url: &str) -> PathBuf {
        self.dir
            .join(hash_model_url(url))
            .join(extract_model_filename(url))
    }

    fn index_path(&self) -> PathBuf {
        self.dir.join("index.json")
    }

    fn read_index(&self) -> Result<CacheIndex, DownloadError> {
        let path = self.index_path();
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(CacheIndex::default()),
            Err(e) => return Err(DownloadError::io(&path, e)),
        };
        match serde_json::from_slice(&bytes) {
            Ok(index) => Ok(index),
            Err(_) => {
                // An unreadable index is kept aside and the cache starts over (its files are
                // downloaded again on use).
                let millis = chrono::Utc::now().timestamp_millis();
                let backup = self.dir.join(format!("index.json.corrupt.{millis}"));
                let _ = std::fs::rename(&path, backup);
                Ok(CacheIndex::default())
            }
        }
    }

    fn write_index(&self, index: &CacheIndex) -> Result<(), DownloadError> {
        std::fs::create_dir_all(&self.dir).map_err(|e| DownloadError::io(&self.dir, e))?;
        let path = self.index_path();
        let tmp = self.dir.join("index.json.tmp");
        let json = serde_json::to_vec_pretty(index).unwrap_or_default();
        std::fs::write(&tmp, json).map_err(|e| DownloadError::io(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| DownloadError::io(&path, e))
    }

    fn update<T>(&self, f: impl FnOnce(&mut CacheIndex) -> (bool, T)) -> Result<T, DownloadError> {
        let _guard = INDEX_LOCK.lock().unwrap_or_else(|p| p.into_inner());
        let mut index = self.read_index()?;
        let (changed, value) = f(&mut index);
        if changed {
            self.write_index(&index)?;
        }
        Ok(value)
    }

    /// The cache file of `entry`, canonicalized, if the entry is for `url` and its path leads
    /// (through any symlinks) to exactly that file inside the cache folder; else what is wrong.
    fn located(&self, url: &str, entry: &CacheEntry) -> Result<PathBuf, String> {
        if entry.url != url {
            return Err(format!("the entry is for {}", entry.url));
        }
        self.cache_file(url, Path::new(&entry.path))
    }

    /// `path` canonicalized, if it leads (through any symlinks) to exactly the cache file of
    /// `url`, a file inside the cache folder; else what is wrong.
    fn cache_file(&self, url: &str, path: &Path) -> Result<PathBuf, String> {
        let target = self.target_path(url);
        let canonical = |p: &Path| {
            p.canonicalize()
                .map_err(|e| format!("{} is missing ({e})", p.display()))
        };
        let (dir, file) = (canonical(&self.dir)?, canonical(&target)?);
        if !file.starts_with(&dir) || canonical(path)? != file {
            return Err(format!(
                "{} is not the cache file {}",
                path.display(),
                target.display()
            ));
        }
        if !file.is_file() {
            return Err(format!("{} is not a file", file.display()));
        }
        Ok(file)
    }

    /// What is wrong with `entry` as the entry of `url`, checked against its file: the
    /// location, the size (recorded and expected), the GGUF magic and, when `expected_sha256`
    /// is given, the recorded and the actual SHA-256. `None` when nothing is.
    fn problem(
        &self,
        url: &str,
        entry: &CacheEntry,
        expected_size: Option<u64>,
        expected_sha256: Option<&str>,
    ) -> Result<Option<String>, DownloadError> {
        let path = match self.located(url, entry) {
            Ok(path) => path,
            Err(message) => return Ok(Some(message)),
        };
        let size = std::fs::metadata(&path)
            .map_err(|e| DownloadError::io(&path, e))?
            .len();
        if size != entry.size {
            return Ok(Some(format!(
                "{} has {size} bytes, the index says {}",
                path.display(),
                entry.size
            )));
        }
        if let Some(expected) = expected_size.filter(|&s| s != size) {
            return Ok(Some(format!(
                "the cached file has {size} bytes, expected {expected}"
            )));
        }
        if let Some(message) = not_gguf(&path)? {
            return Ok(Some(message));
        }
        let Some(expected) = expected_sha256 else {
            return Ok(None);
        };
        if entry.sha256 != expected {
            return Ok(Some(format!(
                "the index records SHA-256 {}, expected {expected}",
                entry.sha256
            )));
        }
        let actual = sha256_file(&path)?;
        Ok((actual != expected)
            .then(|| format!("SHA-256 of the cached file is {actual}, expected {expected}")))
    }

    /// The entry of `url` after checking it against its file: `Ok(None)` when there is none;
    /// `CacheCorrupt` when its path does not lead to the cache file of `url` inside the cache
    /// folder, the file is missing, is not a GGUF file, has another size than recorded or
    /// expected, or (when `expected_sha256` is given) another SHA-256 recorded or computed —
    /// the entry and its folder are then removed, so a download that follows starts clean.
    pub fn lookup(
        &self,
        url: &str,
        expected_size: Option<u64>,
        expected_sha256: Option<&str>,
    ) -> Result<Option<CacheEntry>, DownloadError> {
        let key = hash_model_url(url);
        let Some(entry) = self.update(|index| (false, index.models.get(&key).cloned()))? else {
            return Ok(None);
        };
        if let Some(message) = self.problem(url, &entry, expected_size, expected_sha256)? {
            self.remove(url)?;
            return Err(DownloadError::CacheCorrupt {
                url: url.to_string(),
                message,
            });
        }
        let stamp = now();
        self.update(|index| {
            let found = index.models.get_mut(&key).map(|e| {
                e.last_used_at = stamp;
                e.clone()
            });
            (found.is_some(), found)
        })
    }

    /// Record `path` (a complete file inside this cache) as the file of `url`, hashing it.
    pub fn register(&self, url: &str, path: &Path) -> Result<CacheEntry, DownloadError> {
        let sha256 = sha256_file(path)?;
        self.register_hashed(url, path, sha256)
    }

    /// [`ModelCache::register`] with the file's SHA-256 already known.
    pub(crate) fn register_hashed(
        &self,
        url: &str,
        path: &Path,
        sha256: String,
    ) -> Result<CacheEntry, DownloadError> {
        let size = std::fs::metadata(path)
            .map_err(|e| DownloadError::io(path, e))?
            .len();
        if let Err(message) = self.cache_file(url, path) {
            return Err(DownloadError::InvalidInput(format!("{url}: {message}")));
        }
        let stamp = now();
        let entry = CacheEntry {
            url: url.to_string(),
            path: path.to_string_lossy().into_owned(),
            size,
            sha256,
            downloaded_at: stamp.clone(),
            last_used_at: stamp,
        };
        let key = hash_model_url(url);
        let stored = entry.clone();
        self.update(move |index| {
            index.models.insert(key, stored);
            (true, ())
        })?;
        Ok(entry)
    }

    /// The entries whose files exist. Entries whose path does not lead to their cache file
    /// inside the cache folder (a missing file, a path or symlink elsewhere) are dropped from
    /// the index; files outside the cache are left alone.
    pub fn list(&self) -> Result<Vec<CacheEntry>, DownloadError> {
        self.update(|index| {
            let before = index.models.len();
            index.models.retain(|_, e| self.located(&e.url, e).is_ok());
            let changed = index.models.len() != before;
            (changed, index.models.values().cloned().collect())
        })
    }

    /// Remove the entry of `url`, its folder (file and any partial download); returns whether
    /// there was an entry.
    pub fn remove(&self, url: &str) -> Result<bool, DownloadError> {
        let key = hash_model_url(url);
        let folder = self.dir.join(&key);
        let found = self.update(|index| {
            let found = index.models.remove(&key).is_some();
            (found, found)
        })?;
        match std::fs::remove_dir_all(&folder) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(DownloadError::io(&folder, e)),
        }
        Ok(found)
    }
}
