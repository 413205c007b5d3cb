//! Opening and writing the files the engine owns (models, session states, quantized models)
//! safely.
//!
//! - [`open_regular`] opens a file for reading only if it is a regular file: a FIFO, a device
//!   or a directory is refused with an error instead of blocking forever in `open` or `read`.
//!   On Unix the file is opened non-blocking and checked with `fstat` on the opened handle, so
//!   a path swapped between a check and the open cannot slip through.
//! - [`write_atomic`] writes a file through a temporary sibling that is flushed to disk
//!   (`fsync`) and then renamed over the target: a write that fails part-way (full disk, quota,
//!   I/O error) leaves the previous file as it was and no partial file behind.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::{Error, Result};

/// The error of reading `path`.
pub(crate) fn read_error(path: &Path, source: io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        source,
    }
}

/// The error of writing `path`.
pub(crate) fn write_error(path: &Path, source: io::Error) -> Error {
    Error::Write {
        path: path.display().to_string(),
        source,
    }
}

fn not_regular(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("not a regular file ({what})"),
    )
}

/// What kind of non-regular file `meta` describes, if it is not a regular file.
fn irregular_kind(meta: &std::fs::Metadata) -> Option<&'static str> {
    let ty = meta.file_type();
    if ty.is_file() {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ty.is_fifo() {
            return Some("a FIFO");
        }
        if ty.is_socket() {
            return Some("a socket");
        }
        if ty.is_char_device() || ty.is_block_device() {
            return Some("a device");
        }
    }
    Some(if ty.is_dir() {
        "a directory"
    } else {
        "not a file"
    })
}

/// Open `path` for reading if it is a regular file (following symbolic links); anything else
/// is an [`Error::Io`] of kind `InvalidInput`, returned without blocking.
pub fn open_regular(path: &Path) -> Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Opening a FIFO for reading blocks until a writer appears; non-blocking, it returns at
        // once and the `fstat` below refuses it. Regular files ignore the flag.
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(|e| read_error(path, e))?;
    let meta = file.metadata().map_err(|e| read_error(path, e))?;
    match irregular_kind(&meta) {
        None => Ok(file),
        Some(kind) => Err(read_error(path, not_regular(kind))),
    }
}

/// A fresh name for a temporary sibling of `path` (same directory, so the rename is atomic).
fn temp_sibling(path: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut name = std::ffi::OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    name.push(format!(
        ".{}-{}.partial",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    path.with_file_name(name)
}

/// A file being written atomically (see the module docs): bytes go to a temporary sibling of
/// the target, which [`AtomicFile::commit`] flushes to disk and renames over the target.
/// Dropped without a commit (an error, a cancellation), the temporary file is removed and the
/// target is untouched.
pub struct AtomicFile {
    out: BufWriter<File>,
    tmp: PathBuf,
    path: PathBuf,
}

impl AtomicFile {
    /// Start writing `path`. An existing `path` that is not a regular file (a FIFO, a
    /// directory, a device) is refused before anything is created. Errors are [`Error::Write`].
    pub fn create(path: &Path) -> Result<Self> {
        if path.file_name().is_none() {
            return Err(write_error(path, not_regular("no file name")));
        }
        match std::fs::metadata(path) {
            Ok(meta) => {
                if let Some(kind) = irregular_kind(&meta) {
                    return Err(write_error(path, not_regular(kind)));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(write_error(path, e)),
        }
        let tmp = temp_sibling(path);
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| write_error(path, e))?;
        Ok(AtomicFile {
            out: BufWriter::new(file),
            tmp,
            path: path.to_path_buf(),
        })
    }

    /// The writer of the file's contents.
    pub fn writer(&mut self) -> &mut BufWriter<File> {
        &mut self.out
    }

    /// The target path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Write `bytes` (an I/O error is an [`Error::Write`] naming the target).
    pub fn write_all(&mut self, bytes: &[u8]) -> Result<()> {
        self.out
            .write_all(bytes)
            .map_err(|e| write_error(&self.path, e))
    }

    /// Flush the contents to disk and rename the temporary file over the target (then sync
    /// the directory entry).
    pub fn commit(mut self) -> Result<()> {
        let path = std::mem::take(&mut self.path);
        let result = (|| {
            self.out.flush().map_err(|e| write_error(&path, e))?;
            self.out
                .get_ref()
                .sync_all()
                .map_err(|e| write_error(&path, e))?;
            std::fs::rename(&self.tmp, &path).map_err(|e| write_error(&path, e))
        })();
        if result.is_ok() {
            // Renamed: nothing for `drop` to remove.
            self.tmp = PathBuf::new();
            sync_parent(&path);
        }
        result
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if !self.tmp.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Write `path` atomically: `write` fills an [`AtomicFile`], committed only if it succeeds.
/// On any error `path` is untouched and no temporary file is left. I/O errors are
/// [`Error::Write`]; errors returned by `write` itself are passed through.
pub fn write_atomic<F>(path: &Path, write: F) -> Result<()>
where
    F: FnOnce(&mut AtomicFile) -> Result<()>,
{
    let mut file = AtomicFile::create(path)?;
    write(&mut file)?;
    file.commit()
}

/// Flush the directory entry of a renamed file (best effort: not every platform or file
/// system can open a directory for syncing, and the data itself is already on disk).
fn sync_parent(path: &Path) {
    #[cfg(unix)]
    if let Some(dir) = path.parent() {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
}
