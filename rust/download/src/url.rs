//! Model specifiers: http(s) URLs and the Hugging Face shorthand, with the same rules as
//! local-llm-js-core's `resolveModelUrl`, `hashModelUrl` and `extractModelFilename` (so a cache
//! folder is laid out the same way by both).

use crate::DownloadError;

/// Whether `input` names a model to download (an http(s) URL or a shorthand) rather than a
/// local file. Shorthands look like relative paths, so a caller with a path that exists on disk
/// should prefer the file.
pub fn is_remote_model(input: &str) -> bool {
    resolve_model_url(input).is_ok()
}

/// The URL of a model specifier: an `http://` or `https://` URL as it is; `user/repo/file` →
/// `https://huggingface.co/user/repo/resolve/main/file`; `user/repo/branch/file` →
/// `https://huggingface.co/user/repo/resolve/branch/file`. Anything else is an error.
pub fn resolve_model_url(input: &str) -> Result<String, DownloadError> {
    if input.starts_with("http://") || input.starts_with("https://") {
        return Ok(input.to_string());
    }
    let parts: Vec<&str> = input.split('/').collect();
    match parts.as_slice() {
        [user, repo, file] => Ok(format!(
            "https://huggingface.co/{user}/{repo}/resolve/main/{file}"
        )),
        [user, repo, branch, file] => Ok(format!(
            "https://huggingface.co/{user}/{repo}/resolve/{branch}/{file}"
        )),
        _ => Err(DownloadError::InvalidInput(format!(
            "invalid model specifier \"{input}\": use a full URL or the shorthand \"user/repo/file.gguf\""
        ))),
    }
}

/// The cache key of a URL: two 32-bit FNV-1a style hashes over its UTF-16 code units, as 16 hex
/// digits (local-llm-js-core's `hashModelUrl`).
pub fn hash_model_url(url: &str) -> String {
    let mut h1: u32 = 2_166_136_261;
    let mut h2: u32 = 2_166_136_261 ^ 2_654_435_769;
    for unit in url.encode_utf16() {
        let code = u32::from(unit);
        h1 = (h1 ^ code).wrapping_mul(16_777_619);
        h2 = (h2 ^ code).wrapping_mul(2_246_822_519);
    }
    format!("{h1:08x}{h2:08x}")
}

/// The file name a URL is stored under: the last segment of its path (`model.gguf` when that is
/// empty). Segments that are not safe as a file name (`.`, `..`, with a backslash or a NUL)
/// also give `model.gguf`.
pub fn extract_model_filename(url: &str) -> String {
    let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    let end = after_scheme.find(['?', '#']).unwrap_or(after_scheme.len());
    let without_query = &after_scheme[..end];
    let path = without_query.find('/').map_or("", |i| &without_query[i..]);
    let last = path.rsplit('/').next().unwrap_or("");
    if last.is_empty() || last == "." || last == ".." || last.contains(['\\', '\0']) {
        "model.gguf".to_string()
    } else {
        last.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shorthands_resolve_like_the_core() {
        assert_eq!(
            resolve_model_url("a/b/c.gguf").unwrap(),
            "https://huggingface.co/a/b/resolve/main/c.gguf"
        );
        assert_eq!(
            resolve_model_url("a/b/dev/c.gguf").unwrap(),
            "https://huggingface.co/a/b/resolve/dev/c.gguf"
        );
        assert_eq!(resolve_model_url("http://x/y").unwrap(), "http://x/y");
        assert!(resolve_model_url("c.gguf").is_err());
        assert!(resolve_model_url("/abs/path/x/y.gguf").is_err());
        assert!(!is_remote_model("a/b"));
    }

    #[test]
    fn file_names_are_the_last_path_segment_and_safe() {
        assert_eq!(extract_model_filename("https://h/a/b/m.gguf?x=1"), "m.gguf");
        assert_eq!(extract_model_filename("https://h/a/"), "model.gguf");
        assert_eq!(extract_model_filename("https://h"), "model.gguf");
        assert_eq!(extract_model_filename("https://h/a/.."), "model.gguf");
    }

    #[test]
    fn hashes_match_the_core() {
        // Computed with local-llm-js-core 0.3.0's `hashModelUrl` under Node.
        assert_eq!(hash_model_url(""), "811c9dc51f2be47c");
        assert_eq!(
            hash_model_url("https://huggingface.co/a/b/resolve/main/c.gguf"),
            "728d51334db9c7b6"
        );
        assert_eq!(hash_model_url("http://127.0.0.1:1/é😀"), "5d4f13ec9e3563e5");
    }
}
