//! The one error type of downloads and of the model cache.

use std::path::PathBuf;

/// What can go wrong while resolving, downloading, verifying or looking up a model file.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DownloadError {
    /// The transfer failed: an HTTP error status, a network error, a timeout, too many
    /// redirects, or a body shorter than announced. A partial file is kept for a retry to resume.
    #[error("download of {url} failed{}: {message}", status.map(|s| format!(" (HTTP {s})")).unwrap_or_default())]
    Failed {
        /// The URL asked for (before redirects).
        url: String,
        /// The HTTP status of the failing response, when there was one.
        status: Option<u16>,
        /// What went wrong.
        message: String,
    },
    /// The downloaded file's size or SHA-256 is not the expected one; the file was deleted. A
    /// size the server announces that differs from the expected one fails before the body is
    /// transferred.
    #[error("integrity check of {url} failed: {message}")]
    IntegrityMismatch {
        /// The URL asked for.
        url: String,
        /// Which check failed, with the expected and actual values.
        message: String,
    },
    /// A cache index entry does not match its file (missing, other size, other hash); the entry
    /// has been dropped (and the file deleted) when this is returned.
    #[error("model cache entry for {url} is corrupt: {message}")]
    CacheCorrupt {
        /// The URL of the entry.
        url: String,
        /// What did not match.
        message: String,
    },
    /// The caller cancelled the download; the partial file is kept for a later resume.
    #[error("download of {url} was cancelled")]
    Cancelled {
        /// The URL asked for.
        url: String,
    },
    /// The model specifier is neither an http(s) URL nor a `user/repo[/branch]/file` shorthand,
    /// or an option is invalid (e.g. a SHA-256 that is not 64 hex digits).
    #[error("{0}")]
    InvalidInput(String),
    /// Reading or writing the cache folder failed.
    #[error("model cache I/O error at {}: {message}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The underlying error's message.
        message: String,
    },
}

impl DownloadError {
    /// An I/O error at `path`.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        DownloadError::Io {
            path: path.into(),
            message: source.to_string(),
        }
    }

    /// Whether another attempt may succeed where this one failed (network errors, timeouts,
    /// short bodies, 5xx statuses other than 501, 408 and 429).
    pub fn is_transient(&self) -> bool {
        match self {
            DownloadError::Failed { status: None, .. } => true,
            DownloadError::Failed {
                status: Some(s), ..
            } => *s == 408 || *s == 429 || (*s >= 500 && *s != 501),
            _ => false,
        }
    }
}
