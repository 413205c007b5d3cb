//! The app's own folders on phones, found without the platform's Java or Objective-C APIs:
//! Android's files directory (`Context.getFilesDir()`), iOS's Application Support folder
//! excluded from iCloud and device backups (local-llm-rn's choice: the system never purges it,
//! unlike `Library/Caches`, and gigabytes of model do not fill the user's backup).

use std::path::Path;
#[cfg(any(target_os = "android", test))]
use std::path::PathBuf;

/// Android: the files directory of the app running this process, `/data/user/<user>/<package>/files`
/// (`/data/data/<package>/files` on old releases), from the process name in `cmdline` (the
/// package, with `:name` for an app's extra processes) and the process's `uid` (user =
/// uid / 100000). `None` when the name is not a package name or no such app folder exists.
#[cfg(any(target_os = "android", test))]
pub(crate) fn android_files_dir(
    cmdline: &[u8],
    uid: u32,
    is_dir: impl Fn(&Path) -> bool,
) -> Option<PathBuf> {
    let name = cmdline.split(|&b| b == 0).next()?;
    let package = std::str::from_utf8(name).ok()?.split(':').next()?;
    let valid = package.contains('.')
        && package.split('.').all(|part| {
            !part.is_empty() && part.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        });
    if !valid {
        return None;
    }
    let user = uid / 100_000;
    [
        format!("/data/user/{user}/{package}"),
        format!("/data/data/{package}"),
    ]
    .into_iter()
    .map(PathBuf::from)
    .find(|dir| is_dir(dir))
    .map(|dir| dir.join("files"))
}

/// [`android_files_dir`] of this process.
#[cfg(target_os = "android")]
pub(crate) fn this_android_files_dir() -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let cmdline = std::fs::read("/proc/self/cmdline").ok()?;
    let uid = std::fs::metadata("/proc/self").ok()?.uid();
    android_files_dir(&cmdline, uid, Path::is_dir)
}

/// The value of the extended attribute behind `NSURLIsExcludedFromBackupKey`: a binary property
/// list holding the string `com.apple.backupd`.
#[cfg(any(target_os = "ios", test))]
pub(crate) const BACKUP_EXCLUDE_VALUE: &[u8] = b"bplist00\x5f\x10\x11com.apple.backupd\x08\
\x00\x00\x00\x00\x00\x00\x01\x01\
\x00\x00\x00\x00\x00\x00\x00\x01\
\x00\x00\x00\x00\x00\x00\x00\x00\
\x00\x00\x00\x00\x00\x00\x00\x1c";

/// Create `dir` and exclude it (with everything in it) from iCloud and device backups, as
/// `[NSURL setResourceValue:@YES forKey:NSURLIsExcludedFromBackupKey]` does.
#[cfg(target_os = "ios")]
pub(crate) fn create_excluded_from_backup(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    std::fs::create_dir_all(dir)?;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: both strings are NUL-terminated; the value pointer and length describe a static
    // byte string; position and options are 0 (a plain set).
    let rc = unsafe {
        libc::setxattr(
            path.as_ptr(),
            c"com.apple.metadata:com_apple_backup_excludeItem".as_ptr(),
            BACKUP_EXCLUDE_VALUE.as_ptr().cast(),
            BACKUP_EXCLUDE_VALUE.len(),
            0,
            0,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn android_files_dir_comes_from_the_package_and_user() {
        let exists =
            |dirs: &'static [&'static str]| move |p: &Path| dirs.iter().any(|d| Path::new(d) == p);
        let modern = exists(&["/data/user/10/com.example.app"]);
        assert_eq!(
            android_files_dir(b"com.example.app\0", 1_010_123, modern),
            Some(PathBuf::from("/data/user/10/com.example.app/files"))
        );
        // An extra process of the app (android:process=":worker") shares its folders.
        let main_user = exists(&["/data/user/0/com.example.app"]);
        assert_eq!(
            android_files_dir(b"com.example.app:worker\0", 10_123, main_user),
            Some(PathBuf::from("/data/user/0/com.example.app/files"))
        );
        let legacy = exists(&["/data/data/com.example.app"]);
        assert_eq!(
            android_files_dir(b"com.example.app\0", 10_123, legacy),
            Some(PathBuf::from("/data/data/com.example.app/files"))
        );
        // Not an app (a shell, a test binary), or a name that could escape the folder.
        let any = |_: &Path| true;
        assert_eq!(android_files_dir(b"/system/bin/sh\0", 2000, any), None);
        assert_eq!(android_files_dir(b"../../etc\0", 2000, any), None);
        assert_eq!(android_files_dir(b"app\0", 2000, any), None);
        assert_eq!(android_files_dir(b"com..app\0", 2000, any), None);
        assert_eq!(android_files_dir(b"", 2000, any), None);
        assert_eq!(
            android_files_dir(b"com.example.app\0", 10_123, |_| false),
            None
        );
    }

    /// Python's plistlib (an implementation nobody here wrote) reads the attribute value as the
    /// string Foundation writes.
    #[test]
    fn backup_exclusion_value_is_the_binary_plist_foundation_writes() {
        use std::io::Write;
        let mut child = std::process::Command::new("python3")
            .args([
                "-c",
                "import plistlib, sys; v = plistlib.loads(sys.stdin.buffer.read()); \
                 assert plistlib.dumps(v, fmt=plistlib.FMT_BINARY) == plistlib.dumps('com.apple.backupd', fmt=plistlib.FMT_BINARY); print(v)",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs (installed by scripts/test.sh)");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(BACKUP_EXCLUDE_VALUE)
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "plistlib rejected the value");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "com.apple.backupd"
        );
    }
}
