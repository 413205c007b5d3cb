//! A lock file next to each cache file (`<file>.lock`), so that processes sharing a cache folder
//! download a file once: the process holding the lock transfers; another waits for it (polling,
//! so that it can be cancelled) and then finds the verified file in the index. The lock is an
//! advisory whole-file lock (`flock` / `LockFileEx`, crate `fs4`); the OS releases it when its
//! holder exits, so a killed download never leaves the file locked. In-process callers are
//! already shared by `flight`; this covers other processes.

use std::fs::{File, OpenOptions};
use std::path::Path;
use std::time::Duration;

use crate::DownloadError;

/// Holds the lock of a cache file until dropped.
pub(crate) struct FileLock {
    _file: File,
}

/// Lock `target`'s lock file, waiting while another process holds it. `cancelled` is polled
/// every `poll`; `Ok(None)` when it turned true before the lock was acquired.
pub(crate) fn lock(
    target: &Path,
    poll: Duration,
    cancelled: &dyn Fn() -> bool,
) -> Result<Option<FileLock>, DownloadError> {
    let mut path = target.as_os_str().to_owned();
    path.push(".lock");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| DownloadError::io(&path, e))?;
    loop {
        // Called through the trait: std's inherent `File::try_lock` is newer than our MSRV.
        match fs4::FileExt::try_lock(&file) {
            Ok(()) => return Ok(Some(FileLock { _file: file })),
            Err(fs4::TryLockError::WouldBlock) => {}
            Err(fs4::TryLockError::Error(e)) => return Err(DownloadError::io(&path, e)),
        }
        if cancelled() {
            return Ok(None);
        }
        std::thread::sleep(poll);
    }
}
