//! A real HTTP/1.1 server on 127.0.0.1 for download tests, with fault injection: it counts
//! requests and body bytes sent, honours `Range`/`If-Range` unless told not to, and can drop
//! the connection, stall, dribble, lie about the length, redirect, or answer an error status.
//! (Also used by the CLI's tests through `#[path]`.)

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What goes wrong when a file is served.
#[derive(Clone, Debug)]
pub enum Fault {
    /// Nothing.
    None,
    /// The first `times` responses close the connection after `bytes` body bytes.
    DropAfter { bytes: usize, times: usize },
    /// Like `DropAfter`, and `Range` is ignored (always 200 and the whole file).
    DropThenIgnoreRange { bytes: usize, times: usize },
    /// The body's byte at `index` is flipped.
    WrongByte { index: usize },
    /// `Content-Length` (and `Content-Range`) announce `extra` bytes more than are sent.
    LyingLength { extra: usize },
    /// Headers and `bytes` body bytes, then nothing (the connection stays open).
    StallAfter { bytes: usize },
    /// The body in `chunk`-byte pieces with `delay_ms` between them.
    Slow { chunk: usize, delay_ms: u64 },
    /// `bytes` body bytes at once, then one byte every `every_ms` (never idle for long, but
    /// far too slow to finish).
    Trickle { bytes: usize, every_ms: u64 },
}

/// What a path answers.
#[derive(Clone, Debug)]
pub enum Route {
    /// A file with an ETag.
    File {
        data: Arc<Vec<u8>>,
        etag: String,
        fault: Fault,
    },
    /// A 302 to this location.
    Redirect(String),
    /// This status with a short body.
    Status(u16),
}

/// One request as the server saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub path: String,
    pub range: Option<String>,
    pub if_range: Option<String>,
}

#[derive(Default)]
struct State {
    routes: HashMap<String, Route>,
    seen: Vec<Seen>,
    body_bytes_sent: u64,
    /// Connections stalled by `StallAfter` that the client has not closed yet.
    stalled_open: usize,
}

/// The server; it stops accepting when dropped.
pub struct Server {
    pub base: String,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
}

impl Server {
    /// Start on a free port.
    pub fn start() -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let base = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp) = (state.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if sp.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (st, sp) = (st.clone(), sp.clone());
                std::thread::spawn(move || handle(conn, &st, &sp));
            }
        });
        Server { base, state, stop }
    }

    /// Serve `route` at `path`.
    pub fn route(&self, path: &str, route: Route) {
        self.state
            .lock()
            .unwrap()
            .routes
            .insert(path.to_string(), route);
    }

    /// Serve `data` at `path` with `fault`.
    pub fn file(&self, path: &str, data: &Arc<Vec<u8>>, etag: &str, fault: Fault) {
        self.route(
            path,
            Route::File {
                data: data.clone(),
                etag: etag.to_string(),
                fault,
            },
        );
    }

    /// The URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// The requests seen for `path`.
    pub fn seen(&self, path: &str) -> Vec<Seen> {
        let st = self.state.lock().unwrap();
        st.seen.iter().filter(|s| s.path == path).cloned().collect()
    }

    /// All body bytes sent so far.
    pub fn body_bytes_sent(&self) -> u64 {
        self.state.lock().unwrap().body_bytes_sent
    }

    /// Connections stalled by `StallAfter` whose client has not closed them (the server sees
    /// the close within 20 ms).
    pub fn stalled_open(&self) -> usize {
        self.state.lock().unwrap().stalled_open
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the accept loop.
        let _ = TcpStream::connect(self.base.trim_start_matches("http://"));
    }
}

/// Deterministic pseudo-random bytes (so a wrong offset shows up as wrong bytes) after the
/// GGUF magic (downloads accept GGUF files only); `len` is at least 4.
pub fn test_data(len: usize, seed: u64) -> Arc<Vec<u8>> {
    let mut x = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    let mut data: Vec<u8> = (0..len)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 33) as u8
        })
        .collect();
    data[..4].copy_from_slice(b"GGUF");
    Arc::new(data)
}

fn handle(mut conn: TcpStream, state: &Mutex<State>, stop: &AtomicBool) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
    let mut headers = HashMap::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let route = {
        let mut st = state.lock().unwrap();
        st.seen.push(Seen {
            path: path.clone(),
            range: headers.get("range").cloned(),
            if_range: headers.get("if-range").cloned(),
        });
        st.routes.get(&path).cloned()
    };
    match route {
        None => respond_status(&mut conn, 404),
        Some(Route::Status(s)) => respond_status(&mut conn, s),
        Some(Route::Redirect(to)) => {
            let _ = write!(
                conn,
                "HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
        Some(Route::File { data, etag, fault }) => {
            let fault = take_fault(state, &path, fault);
            serve_file(&mut conn, state, stop, &data, &etag, &fault, &headers);
        }
    }
    let _ = conn.flush();
    let _ = conn.shutdown(Shutdown::Both);
}

/// The fault of this response: a `times` counter is counted down in the route.
fn take_fault(state: &Mutex<State>, path: &str, fault: Fault) -> Fault {
    let next = match &fault {
        Fault::DropAfter { bytes, times } if *times > 0 => Some(Fault::DropAfter {
            bytes: *bytes,
            times: times - 1,
        }),
        Fault::DropThenIgnoreRange { bytes, times } if *times > 0 => {
            Some(Fault::DropThenIgnoreRange {
                bytes: *bytes,
                times: times - 1,
            })
        }
        _ => None,
    };
    if let Some(next) = next {
        if let Some(Route::File { fault: f, .. }) = state.lock().unwrap().routes.get_mut(path) {
            *f = next;
        }
    }
    fault
}

fn respond_status(conn: &mut TcpStream, status: u16) {
    let body = format!("status {status}\n");
    let _ = write!(
        conn,
        "HTTP/1.1 {status} Test\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

fn serve_file(
    conn: &mut TcpStream,
    state: &Mutex<State>,
    stop: &AtomicBool,
    data: &[u8],
    etag: &str,
    fault: &Fault,
    headers: &HashMap<String, String>,
) {
    let ignore_range = matches!(fault, Fault::DropThenIgnoreRange { .. });
    let validator_ok = headers.get("if-range").is_none_or(|v| v == etag);
    let start = headers
        .get("range")
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.strip_suffix('-'))
        .and_then(|s| s.parse::<usize>().ok())
        .filter(|_| !ignore_range && validator_ok);
    let extra = match fault {
        Fault::LyingLength { extra } => *extra,
        _ => 0,
    };
    let total = data.len() + extra;
    let head = match start {
        Some(s) if s >= total => {
            let _ = write!(
                conn,
                "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */{total}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
            return;
        }
        Some(s) => format!(
            "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {s}-{}/{total}\r\nContent-Length: {}\r\n",
            total - 1,
            total - s
        ),
        None => format!("HTTP/1.1 200 OK\r\nContent-Length: {total}\r\n"),
    };
    let start = start.unwrap_or(0).min(data.len());
    if write!(
        conn,
        "{head}ETag: {etag}\r\nAccept-Ranges: bytes\r\nConnection: close\r\n\r\n"
    )
    .is_err()
    {
        return;
    }
    let mut body = data[start..].to_vec();
    let (limit, chunk, delay) = match fault {
        Fault::DropAfter { bytes, times } | Fault::DropThenIgnoreRange { bytes, times }
            if *times > 0 =>
        {
            (*bytes, 16 * 1024, 0)
        }
        Fault::StallAfter { bytes } => (*bytes, 16 * 1024, 0),
        Fault::Slow { chunk, delay_ms } => (usize::MAX, *chunk, *delay_ms),
        Fault::Trickle { bytes, .. } => (*bytes, 16 * 1024, 0),
        Fault::WrongByte { index } => {
            if let Some(b) = index.checked_sub(start).and_then(|i| body.get_mut(i)) {
                *b ^= 0xff;
            }
            (usize::MAX, 16 * 1024, 0)
        }
        _ => (usize::MAX, 16 * 1024, 0),
    };
    let end = limit.min(body.len());
    for piece in body[..end].chunks(chunk) {
        if conn.write_all(piece).is_err() {
            return;
        }
        state.lock().unwrap().body_bytes_sent += piece.len() as u64;
        if delay > 0 {
            std::thread::sleep(Duration::from_millis(delay));
        }
    }
    match fault {
        Fault::StallAfter { .. } => {
            let _ = conn.flush();
            state.lock().unwrap().stalled_open += 1;
            wait_for_close(conn, stop);
            state.lock().unwrap().stalled_open -= 1;
        }
        Fault::Trickle { every_ms, .. } => {
            for byte in &body[end..] {
                std::thread::sleep(Duration::from_millis(*every_ms));
                if stop.load(Ordering::Relaxed) || conn.write_all(&[*byte]).is_err() {
                    return;
                }
                state.lock().unwrap().body_bytes_sent += 1;
            }
        }
        _ => {}
    }
}

/// Send nothing more until the client closes the connection (or the server stops).
fn wait_for_close(conn: &mut TcpStream, stop: &AtomicBool) {
    let _ = conn.set_read_timeout(Some(Duration::from_millis(20)));
    let mut buf = [0u8; 256];
    while !stop.load(Ordering::Relaxed) {
        match conn.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return,
        }
    }
}
