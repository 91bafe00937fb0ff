//! `slate serve`: the embedded API over TCP, one thread per connection.
//!
//! Every connection reads a frame, runs it, writes the reply, in order; a
//! client may pipeline. A frame that cannot be read (oversized, truncated,
//! not MessagePack) gets an error reply where the socket still takes one,
//! then that connection alone is closed. [`Server::shutdown`] stops accepting,
//! ends every connection's reading, lets the request each one is running
//! finish (its commit and reply included), then returns.

mod handler;
mod kind;
pub mod protocol;

use std::collections::HashMap;
use std::io::{self, BufReader, BufWriter, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use protocol::{decode, decode_frame, read_frame, ArgsOf, AuthArgs, Envelope, FrameError, WireError};

use crate::Db;

pub(crate) use handler::{
    config_from_wire as handler_config_from_wire, config_to_wire as handler_config_to_wire,
};
pub use protocol::{ErrorKind, DEFAULT_MAX_FRAME_BYTES};

/// How a server listens and whom it serves; each setter states its default.
#[derive(Debug, Clone)]
#[non_exhaustive]
#[must_use]
pub struct ServerConfig {
    /// Address to bind. Default `127.0.0.1:7878` (loopback only).
    pub addr: String,
    /// Token every connection must present first. Default none (no auth).
    pub auth_token: Option<Vec<u8>>,
    /// Largest request frame payload accepted. Default 4 MiB.
    pub max_frame_bytes: usize,
    /// Connections served at once; more are refused with `busy`. Default 128.
    pub max_connections: usize,
    /// How long a connection may send nothing before it is closed. Default
    /// none: clients may hold idle connections (`slate::Client` sees one
    /// closed before its next call and opens a new one for it).
    pub idle_timeout: Option<Duration>,
    /// With a token required, how long a connection has to send its whole
    /// `auth` request, so that connections that never authenticate cannot
    /// hold the connection slots (zero refuses every such connection).
    /// Default 10 s.
    pub auth_timeout: Duration,
    /// How long a shutdown waits for the requests under way to be answered
    /// before it cuts their connections (a client reading a long `find`
    /// slowly would otherwise hold it). Default 30 s.
    pub shutdown_grace: Duration,
    /// The bytes of changes one request's write transaction may hold
    /// (documents, index entries and vectors, staged replacements); past
    /// it the request fails with `transaction_too_large` and changes
    /// nothing (see [`Db::with_transaction_limit`]). A request of a few
    /// bytes (`update_many({}, ..)`) could otherwise make the server hold a
    /// large collection in memory, twice. Default 256 MiB; `None` lifts it.
    pub max_transaction_bytes: Option<u64>,
}

/// [`ServerConfig::max_transaction_bytes`]'s default: 256 MiB.
pub const DEFAULT_MAX_TRANSACTION_BYTES: u64 = 256 << 20;

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            addr: "127.0.0.1:7878".into(),
            auth_token: None,
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            max_connections: 128,
            idle_timeout: None,
            auth_timeout: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(30),
            max_transaction_bytes: Some(DEFAULT_MAX_TRANSACTION_BYTES),
        }
    }
}

impl ServerConfig {
    /// The defaults, listening on `addr` (`127.0.0.1:0` picks a free port).
    pub fn new(addr: impl Into<String>) -> Self {
        Self {
            addr: addr.into(),
            ..Self::default()
        }
    }

    /// Requires `token` as each connection's first request. Default: no auth.
    pub fn auth_token(mut self, token: impl Into<Vec<u8>>) -> Self {
        self.auth_token = Some(token.into());
        self
    }

    /// Bounds request frames to `bytes` of payload. Default 4 MiB.
    pub fn max_frame_bytes(mut self, bytes: usize) -> Self {
        self.max_frame_bytes = bytes;
        self
    }

    /// Bounds the changes one request's write may hold to `bytes` (`None`:
    /// no bound). Default 256 MiB.
    pub fn max_transaction_bytes(mut self, bytes: Option<u64>) -> Self {
        self.max_transaction_bytes = bytes;
        self
    }

    /// Serves at most `n` connections at once. Default 128.
    pub fn max_connections(mut self, n: usize) -> Self {
        self.max_connections = n;
        self
    }

    /// Closes a connection that sends nothing for `timeout` (mid-frame
    /// included; zero: never). Default: never.
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = Some(timeout);
        self
    }

    /// Gives a connection `timeout` to send its whole `auth` request when a
    /// token is required. Default 10 s.
    pub fn auth_timeout(mut self, timeout: Duration) -> Self {
        self.auth_timeout = timeout;
        self
    }

    /// Lets a shutdown wait `grace` for the requests under way before it
    /// cuts their connections. Default 30 s.
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }
}

/// How long a write to a peer may make no progress before its connection is dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug)]
struct Shared {
    db: Db,
    config: ServerConfig,
    stopping: AtomicBool,
    next_conn: AtomicU64,
    /// A handle on each open connection's socket, to end its reading at shutdown.
    conns: Mutex<HashMap<u64, TcpStream>>,
    /// Signalled when a connection ends.
    ended: Condvar,
    /// Refusals being sent, each from a thread of its own (bounded: a flood
    /// of connections past the limit must not become a flood of threads).
    refusing: Arc<AtomicUsize>,
}

/// Refusals sent at once from threads that wait for the peer; past this,
/// a refusal is written without waiting and the socket closed.
const MAX_REFUSING: usize = 16;

/// A running server. [`Server::shutdown`] (or dropping it) stops it.
#[derive(Debug)]
pub struct Server {
    shared: Arc<Shared>,
    local_addr: SocketAddr,
    accept: Option<JoinHandle<()>>,
}

impl Server {
    /// Binds `config.addr` and serves `db` from a background thread.
    pub fn start(db: Db, config: ServerConfig) -> io::Result<Server> {
        let listener = TcpListener::bind(&config.addr)?;
        let local_addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            db: db.with_transaction_limit(config.max_transaction_bytes),
            config,
            stopping: AtomicBool::new(false),
            next_conn: AtomicU64::new(0),
            conns: Mutex::new(HashMap::new()),
            ended: Condvar::new(),
            refusing: Arc::new(AtomicUsize::new(0)),
        });
        let accept = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("slate-accept".into())
                .spawn(move || accept_loop(listener, shared))?
        };
        Ok(Server {
            shared,
            local_addr,
            accept: Some(accept),
        })
    }

    /// The address the server listens on (the real port when bound to port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Connections open now.
    pub fn connections(&self) -> usize {
        lock(&self.shared.conns).len()
    }

    /// Stops accepting, ends every connection after the request it is running
    /// (a commit under way completes and is answered), and waits for them;
    /// after [`ServerConfig::shutdown_grace`] it cuts the answers still
    /// being written, then waits for their threads to end.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let Some(accept) = self.accept.take() else {
            return;
        };
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wake the accept loop with a connection of our own.
        let mut wake = self.local_addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(if wake.is_ipv4() {
                std::net::Ipv4Addr::LOCALHOST.into()
            } else {
                std::net::Ipv6Addr::LOCALHOST.into()
            });
        }
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
        let _ = accept.join();
        let mut conns = lock(&self.shared.conns);
        for stream in conns.values() {
            let _ = stream.shutdown(Shutdown::Read);
        }
        let deadline = std::time::Instant::now().checked_add(self.shared.config.shutdown_grace);
        let mut cut = false;
        while !conns.is_empty() {
            let left = deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()));
            if left.is_some_and(|l| l.is_zero()) && !cut {
                // Past the grace: the answers still being written are cut
                // (a commit under way has finished: only its reply is lost).
                log::warn!("shutdown: cutting {} connections still answering", conns.len());
                for stream in conns.values() {
                    let _ = stream.shutdown(Shutdown::Both);
                }
                cut = true;
            }
            conns = match left {
                Some(l) if !cut => {
                    self.shared
                        .ended
                        .wait_timeout(conns, l)
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .0
                }
                _ => self
                    .shared
                    .ended
                    .wait(conns)
                    .unwrap_or_else(|poisoned| poisoned.into_inner()),
            };
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            break;
        }
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                log::warn!("accept failed: {e}");
                // Out of descriptors, say: give connections time to end.
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        // A peer that stops reading its answers cannot hold a thread (and
        // shutdown) forever.
        let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
        let id = shared.next_conn.fetch_add(1, Ordering::Relaxed);
        {
            let mut conns = lock(&shared.conns);
            if conns.len() >= shared.config.max_connections {
                drop(conns);
                let limit = shared.config.max_connections;
                refuse(
                    &shared.refusing,
                    stream,
                    WireError::new(
                        ErrorKind::Busy,
                        format!("server busy: {limit} connections open, the limit"),
                    ),
                );
                continue;
            }
            match stream.try_clone() {
                Ok(handle) => conns.insert(id, handle),
                Err(e) => {
                    log::warn!("connection {id}: {e}");
                    continue;
                }
            };
        }
        let conn_shared = Arc::clone(&shared);
        let spawned = std::thread::Builder::new()
            .name(format!("slate-conn-{id}"))
            .spawn(move || {
                let _ended = Ended {
                    shared: &conn_shared,
                    id,
                };
                if let Err(e) = serve_connection(stream, &conn_shared) {
                    log::debug!("connection {id}: {e}");
                }
            });
        if let Err(e) = spawned {
            log::warn!("connection {id}: cannot start its thread: {e}");
            lock(&shared.conns).remove(&id);
        }
    }
}

/// Removes a connection from the registry when its thread ends, panic or not.
struct Ended<'a> {
    shared: &'a Shared,
    id: u64,
}

impl Drop for Ended<'_> {
    fn drop(&mut self) {
        lock(&self.shared.conns).remove(&self.id);
        self.shared.ended.notify_all();
    }
}

/// Sends a connection-level error (request id 0) and closes the socket, from
/// a short-lived thread of its own so that the accept loop never waits.
/// With [`MAX_REFUSING`] such threads busy, the refusal is written without
/// waiting (it fits the socket's buffer) and the socket closed at once.
fn refuse(refusing: &Arc<AtomicUsize>, stream: TcpStream, err: WireError) {
    if refusing.fetch_add(1, Ordering::SeqCst) >= MAX_REFUSING {
        refusing.fetch_sub(1, Ordering::SeqCst);
        let nonblocking = stream.set_nonblocking(true).is_ok();
        let mut writer = BufWriter::new(&stream);
        let _ = handler::reply::<protocol::Done>(&mut writer, 0, Err(err)).and_then(|()| writer.flush());
        drop(writer);
        // What the peer already sent is read (without waiting): closing on
        // unread bytes would reset the connection and could destroy the
        // refusal before the peer reads it.
        let mut sink = [0u8; 4096];
        for _ in 0..if nonblocking { 16 } else { 0 } {
            if !matches!(io::Read::read(&mut &stream, &mut sink), Ok(n) if n > 0) {
                break;
            }
        }
        let _ = stream.shutdown(Shutdown::Both);
        return;
    }
    let count = Arc::clone(refusing);
    let refusal = move || -> io::Result<()> {
        let reader = BufReader::new(stream.try_clone()?);
        close(BufWriter::new(stream), reader, err)
    };
    let spawned = std::thread::Builder::new()
        .name("slate-refuse".into())
        .spawn(move || {
            let _ = refusal();
            count.fetch_sub(1, Ordering::SeqCst);
        });
    if spawned.is_err() {
        refusing.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Compares secrets in time independent of where they differ.
fn same_token(given: &[u8], want: &[u8]) -> bool {
    let mut diff = given.len() ^ want.len();
    for (i, w) in want.iter().enumerate() {
        diff |= usize::from(given.get(i).copied().unwrap_or(0) ^ w);
    }
    diff == 0
}

/// A connection's reads, each allowed only what is left before `deadline`
/// (when there is one), so that a request sent a byte at a time cannot
/// outlast it.
struct Deadline<'a> {
    reader: &'a mut BufReader<TcpStream>,
    deadline: Option<std::time::Instant>,
}

impl io::Read for Deadline<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(deadline) = self.deadline {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "auth deadline passed"));
            }
            self.reader.get_ref().set_read_timeout(Some(left))?;
        }
        self.reader.read(buf)
    }
}

fn serve_connection(stream: TcpStream, shared: &Shared) -> io::Result<()> {
    let mut authed = shared.config.auth_token.is_none();
    // Before auth: one deadline for the whole request; after: the idle timeout per read.
    // A zero timeout is no timeout (the socket refuses one); a deadline past
    // what `Instant` can hold is none either.
    let idle = shared.config.idle_timeout.filter(|t| !t.is_zero());
    let mut deadline = if authed {
        None
    } else {
        std::time::Instant::now().checked_add(shared.config.auth_timeout)
    };
    stream.set_read_timeout(idle)?;
    let mut reader = BufReader::with_capacity(64 << 10, stream.try_clone()?);
    let mut writer = BufWriter::with_capacity(64 << 10, stream);
    let max = shared.config.max_frame_bytes;
    loop {
        if shared.stopping.load(Ordering::SeqCst) {
            // Requests already sent but not begun are not run: shutdown
            // waits only for those under way. Closed as after a refusal,
            // so that the unread requests do not reset the last answers.
            return finish(writer, reader);
        }
        let read = read_frame(
            &mut Deadline {
                reader: &mut reader,
                deadline,
            },
            max,
        );
        let frame = match read {
            Ok(Some(frame)) => frame,
            Ok(None) => return Ok(()),
            Err(FrameError::Io(e)) => return Err(e),
            Err(e @ FrameError::TooLarge { len, .. }) => {
                // The payload is read and dropped (within bounds) so that
                // the client finishes sending and reads this refusal: closing
                // on unread bytes resets the connection, and the client
                // would see only a broken pipe.
                let err = WireError::new(ErrorKind::FrameTooLarge, e.to_string());
                log::debug!("closing a connection: {}", err.message);
                handler::reply::<protocol::Done>(&mut writer, 0, Err(err))?;
                return finish_draining(
                    writer,
                    reader,
                    usize::try_from(len).unwrap_or(usize::MAX).min(MAX_DRAIN_BYTES),
                );
            }
            Err(e @ FrameError::Truncated { .. }) => {
                return close(
                    writer,
                    reader,
                    WireError::new(ErrorKind::TruncatedFrame, e.to_string()),
                );
            }
        };
        let env: Envelope = match decode_frame(&frame) {
            Ok(env) => env,
            Err(e) => {
                let msg = format!(
                    "frame of {} bytes is not a request (a MessagePack map with id and op): {e}",
                    frame.len()
                );
                return close(writer, reader, WireError::new(ErrorKind::BadFrame, msg));
            }
        };
        if !authed {
            let token = match env.op.as_str() {
                "auth" => decode::<ArgsOf<AuthArgs>>(&frame).ok().map(|a| a.args.token.0),
                _ => None,
            };
            let want = shared.config.auth_token.as_deref().unwrap_or_default();
            if !token.is_some_and(|t| same_token(&t, want)) {
                let msg = match env.op.as_str() {
                    "auth" => "wrong auth token".to_owned(),
                    op => format!("op {op:?} before auth: this server needs a token first"),
                };
                let err = WireError::new(ErrorKind::Unauthorized, msg);
                handler::reply::<protocol::Done>(&mut writer, env.id, Err(err))?;
                return finish(writer, reader);
            }
            authed = true;
            deadline = None;
            reader.get_ref().set_read_timeout(idle)?;
        }
        // A panic in one request (a bug) answers `internal` and ends this
        // connection only. Frames are written whole, so the error frame
        // follows complete frames (for a find: it ends the answer).
        let handled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            handler::handle(&shared.db, &env, &frame, &mut writer)
        }));
        match handled {
            Ok(result) => result?,
            Err(_) => {
                let msg = format!(
                    "the server failed while running op {:?} (request id {})",
                    env.op, env.id
                );
                let err = WireError::new(ErrorKind::Internal, msg);
                handler::reply::<protocol::Done>(&mut writer, env.id, Err(err))?;
                return finish(writer, reader);
            }
        }
        // Pipelined requests already buffered are answered before one flush.
        if reader.buffer().is_empty() {
            writer.flush()?;
        }
    }
}

/// Answers a frame that could not be read with `err` (request id 0) and ends the connection.
fn close(mut writer: BufWriter<TcpStream>, reader: BufReader<TcpStream>, err: WireError) -> io::Result<()> {
    log::debug!("closing a connection: {}", err.message);
    handler::reply::<protocol::Done>(&mut writer, 0, Err(err))?;
    finish(writer, reader)
}

/// Flushes the last reply, sends FIN, and reads (briefly, boundedly) what the
/// peer still sends: closing with unread input would reset the connection and
/// could destroy the reply before the peer reads it.
fn finish(writer: BufWriter<TcpStream>, reader: BufReader<TcpStream>) -> io::Result<()> {
    finish_draining(writer, reader, 1 << 20)
}

/// The most a refused oversized frame is read for: its sender is then
/// told why, rather than reset.
const MAX_DRAIN_BYTES: usize = 64 << 20;

/// [`finish`], reading up to `limit` bytes (at least 1 MiB), for at most a
/// second plus a second per 16 MiB.
fn finish_draining(
    mut writer: BufWriter<TcpStream>,
    mut reader: BufReader<TcpStream>,
    limit: usize,
) -> io::Result<()> {
    writer.flush()?;
    let stream = writer.get_ref();
    stream.shutdown(Shutdown::Write)?;
    stream.set_read_timeout(Some(Duration::from_millis(200)))?;
    let mut sink = [0u8; 8192];
    let mut drained = 0usize;
    let limit = limit.max(1 << 20);
    let deadline = std::time::Instant::now() + Duration::from_secs(1 + (limit >> 24) as u64);
    while drained < limit && std::time::Instant::now() < deadline {
        match io::Read::read(&mut reader, &mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => drained += n,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::same_token;

    #[test]
    fn tokens_compare_whole() {
        assert!(same_token(b"secret", b"secret"));
        assert!(!same_token(b"secreT", b"secret"));
        assert!(!same_token(b"secret!", b"secret"));
        assert!(!same_token(b"secre", b"secret"));
        assert!(!same_token(b"", b"secret"));
    }
}
