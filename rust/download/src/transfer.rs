//! One HTTP transfer into a partial file `<file>.part`, resuming what an earlier transfer left
//! there. A sidecar `<file>.part.json` records the URL and the validators (ETag,
//! Last-Modified) and size the server announced, so a resume asks for the rest only of the same
//! file (`Range` + `If-Range`); a server that answers the whole file instead (200 rather than
//! 206, a Range it ignored or a file that changed) restarts the partial file from zero.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::proxy::ProxyConfig;
use crate::relay::Relay;
use crate::DownloadError;

/// Network settings of a transfer (see [`crate::DownloadOptions`]).
#[derive(Debug, Clone)]
pub(crate) struct NetConfig {
    pub connect_timeout: Duration,
    /// The idle timeout: how long a read may wait for data.
    pub read_timeout: Duration,
    pub max_redirects: u32,
    pub proxy: ProxyConfig,
    /// The connections, which a cancel closes.
    pub relay: Relay,
    /// The transfer fails when slower than `low_speed_limit` B/s for `low_speed_time`.
    pub low_speed_limit: u64,
    pub low_speed_time: Duration,
    /// When the whole download must have ended, and the limit it was computed from.
    pub overall: Option<(Instant, Duration)>,
}

impl NetConfig {
    /// The error of a download past its overall limit, if it is.
    fn past_deadline(&self, url: &str, have: u64) -> Option<DownloadError> {
        let (deadline, limit) = self.overall?;
        (Instant::now() >= deadline).then(|| {
            failed(
                url,
                None,
                format!("the download took longer than its overall limit of {limit:?} ({have} bytes present)"),
            )
        })
    }
}

/// What the partial file is a prefix of.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
struct Sidecar {
    url: String,
    etag: Option<String>,
    last_modified: Option<String>,
    total: Option<u64>,
}

/// The partial file of `dest` and its sidecar.
pub(crate) fn partial_paths(dest: &Path) -> (PathBuf, PathBuf) {
    let mut part = dest.as_os_str().to_owned();
    part.push(".part");
    let mut side = part.clone();
    side.push(".json");
    (PathBuf::from(part), PathBuf::from(side))
}

/// Delete the partial file of `dest` and its sidecar (missing files are fine).
pub(crate) fn discard_partial(dest: &Path) {
    let (part, side) = partial_paths(dest);
    let _ = std::fs::remove_file(part);
    let _ = std::fs::remove_file(side);
}

/// Where a transfer reports to and what stops it.
pub(crate) struct Hooks<'a> {
    /// Called with (bytes in the partial file, total size when known) after each chunk.
    pub progress: &'a mut dyn FnMut(u64, Option<u64>),
    /// Polled between chunks: true stops the transfer with `Cancelled`.
    pub cancelled: &'a dyn Fn() -> bool,
    /// Adds the body bytes received from the network (to prove resumption).
    pub received: &'a mut u64,
}

fn failed(url: &str, status: Option<u16>, message: impl Into<String>) -> DownloadError {
    DownloadError::Failed {
        url: url.to_string(),
        status,
        message: message.into(),
    }
}

/// The response to a GET of `url` (following up to `max_redirects` redirects), asking for bytes
/// from `offset` on when it is not zero.
fn get(
    url: &str,
    net: &NetConfig,
    offset: u64,
    validator: Option<&str>,
) -> Result<ureq::Response, DownloadError> {
    let mut current = url.to_string();
    for _ in 0..=net.max_redirects {
        if let Some(e) = net.past_deadline(url, offset) {
            return Err(e);
        }
        // A read never waits past the overall deadline.
        let read_timeout = match net.overall {
            Some((deadline, _)) => net
                .read_timeout
                .min(deadline.saturating_duration_since(Instant::now()))
                .max(Duration::from_millis(1)),
            None => net.read_timeout,
        };
        let mut builder = ureq::AgentBuilder::new()
            .timeout_connect(net.connect_timeout)
            .timeout_read(read_timeout)
            .resolver(net.relay.resolver(net.connect_timeout))
            .redirects(0)
            .user_agent(concat!("local-llm/", env!("CARGO_PKG_VERSION")));
        if let Some(proxy) = net.proxy.for_url(&current) {
            let proxy = ureq::Proxy::new(proxy)
                .map_err(|e| failed(url, None, format!("invalid proxy {proxy}: {e}")))?;
            builder = builder.proxy(proxy);
        }
        let mut request = builder
            .build()
            .get(&current)
            .set("Accept-Encoding", "identity");
        if offset > 0 {
            request = request.set("Range", &format!("bytes={offset}-"));
            if let Some(v) = validator {
                request = request.set("If-Range", v);
            }
        }
        let response = match request.call() {
            Ok(r) => r,
            // Error statuses are answered like the others, by status.
            Err(ureq::Error::Status(_, r)) => return Ok(r),
            Err(ureq::Error::Transport(t)) => {
                let message = net.relay.take_failure().unwrap_or_else(|| t.to_string());
                return Err(net
                    .past_deadline(url, offset)
                    .unwrap_or(failed(url, None, message)));
            }
        };
        if !(300..400).contains(&response.status()) {
            return Ok(response);
        }
        let location = response.header("Location").ok_or_else(|| {
            failed(
                url,
                Some(response.status()),
                "redirect without a Location header",
            )
        })?;
        let next = url::Url::parse(&current)
            .and_then(|base| base.join(location))
            .map_err(|e| failed(url, None, format!("bad redirect to \"{location}\": {e}")))?;
        if !matches!(next.scheme(), "http" | "https") {
            return Err(failed(
                url,
                None,
                format!("redirect to unsupported URL {next}"),
            ));
        }
        current = next.into();
    }
    Err(failed(
        url,
        None,
        format!("too many redirects (more than {})", net.max_redirects),
    ))
}

/// `(first byte, total)` of a `Content-Range: bytes a-b/total` header.
fn content_range(value: &str) -> Option<(u64, Option<u64>)> {
    let rest = value.trim().strip_prefix("bytes ")?;
    let (range, total) = rest.split_once('/')?;
    let start = range.split_once('-')?.0.trim().parse().ok()?;
    let total = total.trim().parse().ok();
    Some((start, total))
}

fn read_sidecar(path: &Path) -> Option<Sidecar> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

fn write_sidecar(path: &Path, sidecar: &Sidecar) -> Result<(), DownloadError> {
    let json = serde_json::to_vec(sidecar).unwrap_or_default();
    std::fs::write(path, json).map_err(|e| DownloadError::io(path, e))
}

/// Bring the partial file of `dest` to the whole body of `url`; returns its size. A failure
/// leaves what arrived in the partial file for the next call to resume. When the server
/// announces a size (`Content-Length` of a 200, the total of a 206's `Content-Range`) other than
/// `expected_size`, the transfer stops before reading the body: `IntegrityMismatch`. The partial
/// file is kept then only if the 206 just confirmed it as a prefix of the server's file.
pub(crate) fn transfer(
    url: &str,
    dest: &Path,
    net: &NetConfig,
    expected_size: Option<u64>,
    hooks: &mut Hooks<'_>,
) -> Result<u64, DownloadError> {
    let (part, side) = partial_paths(dest);
    let resumable = read_sidecar(&side).filter(|s| s.url == url);
    let mut offset = match (&resumable, std::fs::metadata(&part)) {
        (Some(_), Ok(meta)) if meta.is_file() => meta.len(),
        _ => 0,
    };
    let mut sidecar = resumable.unwrap_or_default();
    if offset > 0 && sidecar.total == Some(offset) {
        return Ok(offset);
    }
    // Without a validator a resumed prefix could belong to another version of the file.
    let validator = sidecar.etag.clone().or(sidecar.last_modified.clone());
    if validator.is_none() {
        offset = 0;
    }
    // A 416 (the partial file is longer than the file now is) restarts once from zero.
    let mut response = get(url, net, offset, validator.as_deref())?;
    if response.status() == 416 && offset > 0 {
        offset = 0;
        response = get(url, net, 0, None)?;
    }
    let status = response.status();
    let header = |name: &str| response.header(name).map(str::to_string);
    let total = match status {
        206 => {
            let range = header("Content-Range").and_then(|v| content_range(&v));
            match range {
                Some((start, total)) if start == offset => total,
                _ => {
                    // Not the bytes asked for: start over with the whole file.
                    offset = 0;
                    response = get(url, net, 0, None)?;
                    if response.status() != 200 {
                        return Err(failed(
                            url,
                            Some(response.status()),
                            "unexpected status for a whole-file request",
                        ));
                    }
                    response
                        .header("Content-Length")
                        .and_then(|v| v.trim().parse().ok())
                }
            }
        }
        200 => {
            offset = 0;
            header("Content-Length").and_then(|v| v.trim().parse().ok())
        }
        _ => {
            let reason = response.status_text().to_string();
            return Err(failed(url, Some(status), reason));
        }
    };
    if let Some((expected, announced)) = expected_size.zip(total).filter(|(e, a)| e != a) {
        if offset == 0 {
            discard_partial(dest);
        }
        return Err(DownloadError::IntegrityMismatch {
            url: url.to_string(),
            message: format!(
                "the server announces {announced} bytes, expected {expected} (nothing transferred)"
            ),
        });
    }
    let etag = response.header("ETag").map(str::to_string);
    let last_modified = response.header("Last-Modified").map(str::to_string);
    if offset == 0 {
        sidecar = Sidecar {
            url: url.to_string(),
            etag,
            last_modified,
            total,
        };
    } else {
        sidecar.total = total.or(sidecar.total);
    }
    write_sidecar(&side, &sidecar)?;
    let mut file = OpenOptions::new()
        .create(true)
        .write(true)
        .append(offset > 0)
        .truncate(offset == 0)
        .open(&part)
        .map_err(|e| DownloadError::io(&part, e))?;
    (hooks.progress)(offset, total);
    let have = copy_body(
        url,
        response.into_reader(),
        (&mut file, &part),
        (offset, total),
        net,
        hooks,
    )?;
    match total {
        Some(total) if have != total => Err(failed(
            url,
            None,
            format!("the connection closed after {have} of {total} bytes"),
        )),
        _ => Ok(have),
    }
}

/// curl's `--speed-limit`/`--speed-time`: the rate is sampled every quarter of `time` (at most
/// every second), and the transfer is too slow once all samples over `time` were below `limit`
/// bytes per second. A limit of 0 turns the check off.
struct Pace {
    limit: u64,
    time: Duration,
    sample: Duration,
    start: Instant,
    bytes: u64,
    slow_since: Option<Instant>,
}

impl Pace {
    fn new(limit: u64, time: Duration, now: Instant) -> Self {
        Pace {
            limit,
            time,
            sample: (time / 4).min(Duration::from_secs(1)),
            start: now,
            bytes: 0,
            slow_since: None,
        }
    }

    /// Count `n` bytes that arrived by `now`; the last sample's rate when too slow.
    fn add(&mut self, n: u64, now: Instant) -> Option<f64> {
        if self.limit == 0 || self.time.is_zero() {
            return None;
        }
        self.bytes += n;
        let elapsed = now.saturating_duration_since(self.start);
        if elapsed < self.sample {
            return None;
        }
        let rate = self.bytes as f64 / elapsed.as_secs_f64();
        let (start, limit) = (self.start, self.limit as f64);
        self.start = now;
        self.bytes = 0;
        if rate >= limit {
            self.slow_since = None;
            return None;
        }
        let since = *self.slow_since.get_or_insert(start);
        (now.saturating_duration_since(since) >= self.time).then_some(rate)
    }
}

/// Append the body to the partial file; returns the partial file's size. `have` is the size
/// it starts at, `total` the file's size when known.
fn copy_body(
    url: &str,
    mut body: impl Read,
    (file, part): (&mut File, &Path),
    (mut have, total): (u64, Option<u64>),
    net: &NetConfig,
    hooks: &mut Hooks<'_>,
) -> Result<u64, DownloadError> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut pace = Pace::new(net.low_speed_limit, net.low_speed_time, Instant::now());
    loop {
        if (hooks.cancelled)() {
            file.flush().map_err(|e| DownloadError::io(part, e))?;
            return Err(DownloadError::Cancelled {
                url: url.to_string(),
            });
        }
        if let Some(e) = net.past_deadline(url, have) {
            return Err(e);
        }
        let n = match body.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) if (hooks.cancelled)() => continue,
            Err(e) => {
                if let Some(e) = net.past_deadline(url, have) {
                    return Err(e);
                }
                let message = match e.kind() {
                    std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => format!(
                        "no data for the read timeout of {:?} after {have} bytes ({e})",
                        net.read_timeout
                    ),
                    std::io::ErrorKind::UnexpectedEof => match total {
                        Some(t) => format!("the connection closed after {have} of {t} bytes"),
                        None => format!("the connection closed after {have} bytes"),
                    },
                    _ => format!("the connection failed after {have} bytes: {e}"),
                };
                return Err(failed(url, None, message));
            }
        };
        file.write_all(&buf[..n])
            .map_err(|e| DownloadError::io(part, e))?;
        have += n as u64;
        *hooks.received += n as u64;
        (hooks.progress)(have, total);
        if let Some(rate) = pace.add(n as u64, Instant::now()) {
            file.flush().map_err(|e| DownloadError::io(part, e))?;
            return Err(failed(
                url,
                None,
                format!(
                    "the transfer was slower than {} B/s for {:?} ({rate:.0} B/s at the end, {have} bytes present)",
                    net.low_speed_limit, net.low_speed_time
                ),
            ));
        }
    }
    file.flush().map_err(|e| DownloadError::io(part, e))?;
    Ok(have)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_ranges_parse() {
        assert_eq!(content_range("bytes 5-9/10"), Some((5, Some(10))));
        assert_eq!(content_range("bytes 5-9/*"), Some((5, None)));
        assert_eq!(content_range("items 5-9/10"), None);
    }

    #[test]
    fn pace_fails_only_after_a_whole_slow_period() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut pace = Pace::new(1000, Duration::from_secs(1), t0);
        // Fast at first, then 10 B per 250 ms sample (40 B/s).
        assert_eq!(pace.add(10_000, at(250)), None);
        for ms in [500, 750, 1000] {
            assert_eq!(pace.add(10, at(ms)), None, "{ms} ms");
        }
        assert_eq!(pace.add(10, at(1250)), Some(40.0));
        // One fast sample starts the period again.
        let mut pace = Pace::new(1000, Duration::from_secs(1), t0);
        assert_eq!(pace.add(10, at(750)), None);
        assert_eq!(pace.add(1000, at(1000)), None);
        assert_eq!(pace.add(10, at(1250)), None);
        // A limit of 0 is off.
        let mut pace = Pace::new(0, Duration::from_secs(1), t0);
        assert_eq!(pace.add(0, at(10_000)), None);
    }
}
