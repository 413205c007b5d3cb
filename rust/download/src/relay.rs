//! Connections that a cancel can close. ureq 2 owns its sockets and cannot close one from
//! another thread, so a read blocked on a stalled server would end only at its read timeout.
//! Each connection of a transfer therefore goes through a relay on 127.0.0.1 that this crate
//! owns: ureq's resolver ([`Relay::resolver`]) answers every host with the address of a fresh
//! one-connection listener, whose thread connects to the real host (within the connect
//! timeout) and copies the bytes both ways. [`Relay::close`] shuts down every socket of the
//! transfer, which ends ureq's blocked read at once. TLS, the `Host` header and proxies are
//! unaffected: the relay copies TCP bytes, and ureq still speaks to the host by its name.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How often a listener checks for ureq's connection (which comes right after resolving).
const ACCEPT_POLL: Duration = Duration::from_millis(2);

#[derive(Debug, Default)]
struct State {
    closed: bool,
    next_id: u64,
    /// The sockets of the live connections, tagged by connection.
    sockets: Vec<(u64, TcpStream)>,
    /// Why the last connection to a host failed (reported rather than ureq's "closed").
    failure: Option<String>,
}

/// The connections of one download (shared by its attempts and redirects).
#[derive(Debug, Clone, Default)]
pub(crate) struct Relay(Arc<Mutex<State>>);

impl Relay {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Shut down every connection, now and later (ureq's reads then end at once).
    pub(crate) fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        for (_, socket) in state.sockets.drain(..) {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }

    /// Whether [`Relay::close`] was called.
    pub(crate) fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Why the last connection to a host failed, once.
    pub(crate) fn take_failure(&self) -> Option<String> {
        self.lock().failure.take()
    }

    /// Track `socket` of connection `id`; false (and the socket shut down) when closed.
    fn register(&self, id: u64, socket: &TcpStream) -> bool {
        let mut state = self.lock();
        match socket.try_clone() {
            Ok(clone) if !state.closed => {
                state.sockets.push((id, clone));
                true
            }
            _ => {
                let _ = socket.shutdown(Shutdown::Both);
                false
            }
        }
    }

    fn unregister(&self, id: u64) {
        self.lock().sockets.retain(|(i, _)| *i != id);
    }

    /// The resolver to give ureq: every `host:port` becomes a new relay to it; the connection
    /// to the host must open within `connect_timeout`.
    pub(crate) fn resolver(
        &self,
        connect_timeout: Duration,
    ) -> impl Fn(&str) -> io::Result<Vec<SocketAddr>> + Send + Sync + 'static {
        let relay = self.clone();
        move |netloc: &str| {
            let id = {
                let mut state = relay.lock();
                if state.closed {
                    return Err(io::Error::other("the download was cancelled"));
                }
                state.next_id += 1;
                state.next_id
            };
            let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
            listener.set_nonblocking(true)?;
            let local = listener.local_addr()?;
            let (relay, netloc) = (relay.clone(), netloc.to_string());
            std::thread::Builder::new()
                .name("local-llm-relay".into())
                .spawn(move || relay.serve(id, listener, &netloc, connect_timeout))?;
            Ok(vec![local])
        }
    }

    /// One connection: accept ureq's, connect to `netloc`, copy until either side ends.
    fn serve(&self, id: u64, listener: TcpListener, netloc: &str, connect_timeout: Duration) {
        let deadline = Instant::now() + connect_timeout;
        let Some(client) = self.accept(&listener, deadline) else {
            return;
        };
        drop(listener);
        if client.set_nonblocking(false).is_err() || !self.register(id, &client) {
            return;
        }
        match connect(netloc, deadline) {
            Ok(server) if self.register(id, &server) => pump(client, server),
            Ok(_) => {}
            Err(message) => {
                self.lock().failure = Some(message);
                let _ = client.shutdown(Shutdown::Both);
            }
        }
        self.unregister(id);
    }

    fn accept(&self, listener: &TcpListener, deadline: Instant) -> Option<TcpStream> {
        loop {
            match listener.accept() {
                Ok((stream, _)) => return Some(stream),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return None,
            }
            if self.is_closed() || Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(ACCEPT_POLL);
        }
    }
}

/// A connection to `netloc` (`host:port`), trying each of its addresses until `deadline`.
fn connect(netloc: &str, deadline: Instant) -> Result<TcpStream, String> {
    let addrs = netloc
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {netloc}: {e}"))?;
    let mut last = format!("no address for {netloc}");
    for addr in addrs {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("cannot connect to {netloc}: timed out"));
        }
        match TcpStream::connect_timeout(&addr, left) {
            Ok(stream) => return Ok(stream),
            Err(e) => last = format!("cannot connect to {netloc} ({addr}): {e}"),
        }
    }
    Err(last)
}

/// Copy both ways until the server's side ends (its bytes reach ureq, then end of stream) and
/// ureq's side ends too.
fn pump(client: TcpStream, server: TcpStream) {
    let (Ok(client_in), Ok(server_out)) = (client.try_clone(), server.try_clone()) else {
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    let upstream = std::thread::Builder::new()
        .name("local-llm-relay".into())
        .spawn(move || {
            copy(client_in, &server_out);
            let _ = server_out.shutdown(Shutdown::Both);
        });
    copy(&server, &client);
    let _ = client.shutdown(Shutdown::Write);
    let _ = server.shutdown(Shutdown::Both);
    if let Ok(upstream) = upstream {
        let _ = upstream.join();
    }
}

fn copy(mut from: impl Read, mut to: impl Write) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
        }
    }
}
