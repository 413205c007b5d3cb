//! The `download` command, and models given to `-m` as a URL or shorthand: fetched into the
//! model cache (crate `local-llm-download`) first, resuming what an earlier run left.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use local_llm_download::{download, CancelToken, DownloadOptions, ModelCache, Progress};
use local_llm_engine::{Error, Result};

/// Arguments of `local-llm download`.
#[derive(Args)]
pub struct DownloadArgs {
    /// An http(s) URL or a Hugging Face shorthand `user/repo[/branch]/file.gguf`.
    url: String,
    /// Expected SHA-256 of the file (hex); another hash is an error and the file is deleted.
    #[arg(long)]
    sha256: Option<String>,
    /// Expected size of the file in bytes.
    #[arg(long)]
    size: Option<u64>,
    /// The cache folder (default: $XDG_CACHE_HOME/local-llm/models or ~/.cache/local-llm/models).
    #[arg(long)]
    cache_dir: Option<PathBuf>,
}

/// `local-llm download`: print the cached file's path.
pub fn run(args: &DownloadArgs) -> Result<()> {
    let path = fetch(
        &args.url,
        args.cache_dir.as_deref(),
        args.size,
        args.sha256.clone(),
    )?;
    println!("{}", path.display());
    Ok(())
}

/// The cached file of `spec`, downloading it first (progress on stderr).
pub fn fetch(
    spec: &str,
    cache_dir: Option<&Path>,
    expected_size: Option<u64>,
    expected_sha256: Option<String>,
) -> Result<PathBuf> {
    let as_error = |e: local_llm_download::DownloadError| Error::Io {
        path: spec.into(),
        source: std::io::Error::other(e.to_string()),
    };
    let cache = ModelCache::new(match cache_dir {
        Some(d) => d.to_path_buf(),
        None => ModelCache::default_dir().map_err(as_error)?,
    });
    let options = DownloadOptions {
        expected_size,
        expected_sha256,
        ..DownloadOptions::default()
    };
    let mut last = Instant::now() - Duration::from_secs(1);
    let mut shown = false;
    let mut show = |p: Progress| {
        if last.elapsed() >= Duration::from_millis(500) || p.total == Some(p.downloaded) {
            last = Instant::now();
            shown = true;
            let total = p.total.map_or("?".into(), |t| t.to_string());
            eprint!(
                "\rdownloading: {} / {total} bytes ({:.1}%)",
                p.downloaded,
                p.percent()
            );
            let _ = std::io::stderr().flush();
        }
    };
    let result = download(&cache, spec, &options, &mut show, &CancelToken::new());
    if shown {
        eprintln!();
    }
    Ok(PathBuf::from(result.map_err(as_error)?.entry.path))
}
