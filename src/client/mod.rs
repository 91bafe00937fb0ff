//! `Client`: the embedded API's shape over a `slate serve` connection.
//!
//! One TCP connection per `Client` (clones share it; calls from several
//! threads take turns). Requests are answered in order; a call sends one
//! request and reads its reply (several frames for `find`). A call that
//! breaks the connection fails, and is not retried (a write may have been
//! applied); the next call opens a new connection.

mod collection;

use std::io::{BufReader, BufWriter, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::server::protocol::{
    self, encode, read_frame, write_frame, AuthArgs, Bin, CollectionArgs, ConfigWire, CreateCollectionArgs,
    Done, ErrorKind, FrameError, ListReply, NoArgs, RequestOut, Response,
};
use crate::{CollectionConfig, Error, Result};

pub use collection::{RemoteCollection, RemoteFind, RemoteSearch, RemoteSearchBatch};

/// Largest reply frame a client accepts by default: 256 MiB.
pub const DEFAULT_CLIENT_MAX_FRAME_BYTES: usize = 256 << 20;

/// How long a connection must have been idle before a call first checks
/// that the server has not closed it (three system calls, which back-to-back
/// calls skip).
const LOOK_AFTER_IDLE: Duration = Duration::from_millis(100);

/// How long a client waits to connect, by default: 10 s.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a client waits on one read or write of a call, by default:
/// 120 s.
pub const DEFAULT_IO_TIMEOUT: Duration = Duration::from_secs(120);

/// Options for connecting; each setter states its default.
#[derive(Clone)]
#[must_use]
pub struct ClientBuilder {
    addr: String,
    token: Option<Vec<u8>>,
    max_frame_bytes: usize,
    connect_timeout: Duration,
    io_timeout: Option<Duration>,
}

/// Without the token's bytes: a `Client` (which keeps its builder to
/// reconnect) may be logged.
impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("addr", &self.addr)
            .field("token", &self.token.as_ref().map(|_| "<hidden>"))
            .field("max_frame_bytes", &self.max_frame_bytes)
            .field("connect_timeout", &self.connect_timeout)
            .field("io_timeout", &self.io_timeout)
            .finish()
    }
}

impl ClientBuilder {
    /// How long to wait for the connection to open, for each address `addr`
    /// resolves to. Default 10 s.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long a call waits on one read or write (a silent or stalled
    /// server, a partitioned network): past it the call fails with
    /// `Error::Connection` and the connection is dropped (its replies could
    /// no longer be told apart); the next call opens a new one. `None`
    /// waits forever; a zero duration is read as `None`. Default 120 s.
    pub fn io_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.io_timeout = timeout.filter(|t| !t.is_zero());
        self
    }

    /// Presents `token` first (servers started with one require it). Default: none.
    pub fn auth_token(mut self, token: impl Into<Vec<u8>>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Largest reply frame accepted. Default 256 MiB.
    pub fn max_frame_bytes(mut self, bytes: usize) -> Self {
        self.max_frame_bytes = bytes;
        self
    }

    /// Connects (and authenticates, with a token).
    pub fn connect(self) -> Result<Client> {
        let conn = self.open()?;
        let client = Client {
            inner: Arc::new(Inner {
                conn: Mutex::new(conn),
                holder: Mutex::new(None),
                opts: self,
            }),
        };
        client.authenticate(&mut client.inner.conn.lock().unwrap_or_else(|p| p.into_inner()))?;
        Ok(client)
    }

    /// A new connection, not yet authenticated.
    fn open(&self) -> Result<Conn> {
        let conn_err = |reason: String| Error::Connection {
            addr: self.addr.clone(),
            reason,
        };
        let addrs = self
            .addr
            .to_socket_addrs()
            .map_err(|e| conn_err(format!("cannot resolve: {e}")))?;
        let mut last = None;
        let mut stream = None;
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, self.connect_timeout.max(Duration::from_millis(1))) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        let stream = stream.ok_or_else(|| {
            conn_err(match last {
                Some(e) => format!("cannot connect: {e}"),
                None => "cannot connect: the address resolves to nothing".into(),
            })
        })?;
        let _ = stream.set_nodelay(true);
        // Socket options: the reading clone below shares them.
        stream
            .set_read_timeout(self.io_timeout)
            .and_then(|()| stream.set_write_timeout(self.io_timeout))
            .map_err(|e| conn_err(format!("setting timeouts: {e}")))?;
        let reader = stream.try_clone().map_err(|e| conn_err(e.to_string()))?;
        Ok(Conn {
            reader: BufReader::with_capacity(64 << 10, reader),
            writer: BufWriter::with_capacity(64 << 10, stream),
            next_id: 1,
            broken: None,
            last_used: Instant::now(),
        })
    }
}

/// The most a broken connection's queued answer is read for, to be
/// dropped (see [`Conn::mark_broken`]).
const DRAIN_ON_BREAK: usize = 64 << 20;

#[derive(Debug)]
struct Conn {
    reader: BufReader<TcpStream>,
    writer: BufWriter<TcpStream>,
    next_id: u64,
    /// Set once the stream failed: the next call opens a new connection.
    broken: Option<String>,
    /// When the last call on it ended.
    last_used: Instant,
}

/// What a call wants after a frame of its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    /// The next frame.
    More,
    /// Nothing: that was the last.
    Last,
    /// Nothing, though more is coming: drop the connection.
    Abandon,
}

impl Conn {
    /// Marks the connection unusable and closes its socket now, so that a
    /// server still writing an abandoned answer stops, and its slot frees
    /// before the next call asks for a new one.
    fn mark_broken(&mut self, reason: String) {
        let stream = self.writer.get_ref();
        let _ = stream.shutdown(std::net::Shutdown::Both);
        // A receive buffer left full holds the server's window at zero: the
        // server then waits out its write timeout with the slot taken, as
        // no new byte reaches this socket to draw the reset that data after
        // a shutdown draws. What is queued is read and dropped, without
        // waiting, so that the server's next bytes draw it.
        if stream.set_nonblocking(true).is_ok() {
            let mut sink = [0u8; 64 * 1024];
            let mut drained = 0usize;
            while drained < DRAIN_ON_BREAK {
                match (&mut &*stream).read(&mut sink) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => drained += n,
                }
            }
        }
        self.broken.get_or_insert(reason);
    }

    /// Whether the server closed this connection (or sent something
    /// unasked, which only a refusal before closing does) since the last
    /// call: a look at the socket without waiting, between calls, when
    /// nothing is owed.
    fn closed_by_peer(&self) -> bool {
        if !self.reader.buffer().is_empty() {
            return true;
        }
        let stream = self.reader.get_ref();
        if stream.set_nonblocking(true).is_err() {
            return false;
        }
        let seen = stream.peek(&mut [0u8; 1]);
        let restored = stream.set_nonblocking(false).is_ok();
        !restored || !matches!(seen, Err(ref e) if e.kind() == std::io::ErrorKind::WouldBlock)
    }
}

/// Marks the thread inside a call until dropped (also by a panic).
struct Holding<'a>(&'a Mutex<Option<ThreadId>>);

impl<'a> Holding<'a> {
    fn new(holder: &'a Mutex<Option<ThreadId>>, me: ThreadId) -> Self {
        *holder.lock().unwrap_or_else(|p| p.into_inner()) = Some(me);
        Holding(holder)
    }
}

impl Drop for Holding<'_> {
    fn drop(&mut self) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

#[derive(Debug)]
struct Inner {
    /// What the connection was opened with, to open another.
    opts: ClientBuilder,
    conn: Mutex<Conn>,
    /// The thread inside a call, which must not start another on this
    /// connection (from a `for_each` callback): it would wait on itself.
    holder: Mutex<Option<ThreadId>>,
}

/// A connection to a Slate server. Cheap to clone; clones share the connection.
#[derive(Debug, Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl Client {
    /// Connects to the server at `addr` (`host:port`), without a token.
    pub fn connect(addr: impl Into<String>) -> Result<Client> {
        Self::builder(addr).connect()
    }

    /// Options for connecting to `addr`.
    pub fn builder(addr: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            addr: addr.into(),
            token: None,
            max_frame_bytes: DEFAULT_CLIENT_MAX_FRAME_BYTES,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            io_timeout: Some(DEFAULT_IO_TIMEOUT),
        }
    }

    /// The server's address as given.
    pub fn addr(&self) -> &str {
        &self.inner.opts.addr
    }

    fn conn_err(&self, reason: impl Into<String>) -> Error {
        Error::Connection {
            addr: self.inner.opts.addr.clone(),
            reason: reason.into(),
        }
    }

    /// Replaces a connection that broke with a new one, authenticated as
    /// the first was. A refusal of the new one (busy, unauthorized) keeps
    /// its kind; a failure to connect says why the old one broke too.
    fn reconnect(&self, conn: &mut Conn, reason: &str) -> Result<()> {
        let broke = |e: Error| match e {
            Error::Connection { reason: why, .. } => self.conn_err(format!(
                "the connection broke ({reason}), and opening a new one failed: {why}"
            )),
            other => other,
        };
        let mut fresh = self.inner.opts.open().map_err(broke)?;
        self.authenticate(&mut fresh).map_err(broke)?;
        *conn = fresh;
        Ok(())
    }

    /// Presents the client's token, if it has one, as the first request on
    /// a new connection `conn` (when connecting, and reconnecting).
    fn authenticate(&self, conn: &mut Conn) -> Result<()> {
        let Some(token) = &self.inner.opts.token else {
            return Ok(());
        };
        let args = AuthArgs {
            token: Bin(token.clone()),
        };
        let id = conn.next_id;
        conn.next_id += 1;
        let mut answered = false;
        self.exchange_on(conn, id, "auth", &args, &mut |frame| {
            self.ok_of::<Done>("auth", frame)?;
            answered = true;
            Ok(Flow::Last)
        })?;
        if !answered {
            return Err(self.conn_err("no answer to \"auth\""));
        }
        Ok(())
    }

    /// Sends `op` with `args`; then `on_frame` gets each reply frame's payload
    /// until it returns [`Flow::Last`] (the last frame of the answer) or
    /// [`Flow::Abandon`] (the rest is not wanted: the connection is dropped
    /// rather than the rest read, and the next call opens a new one).
    fn exchange<A: Serialize>(
        &self,
        op: &str,
        args: &A,
        mut on_frame: impl FnMut(&[u8]) -> Result<Flow>,
    ) -> Result<()> {
        let me = std::thread::current().id();
        if *self.inner.holder.lock().unwrap_or_else(|p| p.into_inner()) == Some(me) {
            return Err(Error::Server {
                kind: ErrorKind::BadRequest,
                message: format!(
                    "{op:?} called from inside a call on the same client (a for_each callback): \
                     it would wait on itself; use another client, or collect first"
                ),
            });
        }
        let mut conn = self.inner.conn.lock().unwrap_or_else(|p| {
            // A call panicked (in a for_each callback) with its answer half
            // read: what comes next on the stream belongs to it. Marked
            // broken once (the new connection is sound).
            self.inner.conn.clear_poison();
            let mut conn = p.into_inner();
            conn.mark_broken("an earlier call panicked while reading its answer".into());
            conn
        });
        if conn.broken.is_none() && conn.last_used.elapsed() >= LOOK_AFTER_IDLE && conn.closed_by_peer() {
            // Closed while idle (the server's idle timeout, a restart):
            // nothing was sent on it, so a new one takes this call.
            conn.mark_broken("closed by the server while idle".into());
        }
        if let Some(reason) = conn.broken.clone() {
            self.reconnect(&mut conn, &reason)?;
        }
        let id = conn.next_id;
        conn.next_id += 1;
        let _holding = Holding::new(&self.inner.holder, me);
        let result = self.exchange_on(&mut conn, id, op, args, &mut on_frame);
        conn.last_used = Instant::now();
        match &result {
            Ok(Flow::Abandon) => conn.mark_broken(format!("the rest of the answer to {op:?} was not read")),
            Err(Error::Connection { reason, .. }) => conn.mark_broken(reason.clone()),
            // The server closes the connection after these.
            Err(Error::Server { kind, message })
                if matches!(
                    kind,
                    ErrorKind::Unauthorized
                        | ErrorKind::Internal
                        | ErrorKind::Busy
                        | ErrorKind::FrameTooLarge
                        | ErrorKind::BadFrame
                        | ErrorKind::TruncatedFrame
                ) =>
            {
                conn.mark_broken(format!("{message} ({kind})"));
            }
            _ => {}
        }
        result.map(|_| ())
    }

    fn exchange_on<A: Serialize>(
        &self,
        conn: &mut Conn,
        id: u64,
        op: &str,
        args: &A,
        on_frame: &mut impl FnMut(&[u8]) -> Result<Flow>,
    ) -> Result<Flow> {
        let request = encode(&RequestOut { id, op, args }).map_err(|e| self.conn_err(e.to_string()))?;
        if let Err(e) = write_frame(&mut conn.writer, &request).and_then(|()| conn.writer.flush()) {
            // The server may have refused the request (frame_too_large) and
            // closed before it was all sent: its reason, already sent, says
            // more than the broken pipe. (Not after a timeout: the server
            // sent nothing, and reading would wait as long again.)
            let closed = matches!(
                e.kind(),
                std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
            );
            if closed {
                if let Ok(Some(frame)) = read_frame(&mut conn.reader, self.inner.opts.max_frame_bytes) {
                    if let Ok(IdAndErr {
                        id: 0,
                        err: Some(err),
                    }) = protocol::decode_frame::<IdAndErr>(&frame)
                    {
                        return Err(self.refusal(err));
                    }
                }
            }
            return Err(self.conn_err(format!("sending {op:?}: {e}")));
        }
        loop {
            let frame = match read_frame(&mut conn.reader, self.inner.opts.max_frame_bytes) {
                Ok(Some(f)) => f,
                Ok(None) => return Err(self.conn_err(format!("closed before answering {op:?}"))),
                Err(FrameError::Io(e)) => {
                    return Err(self.conn_err(format!("reading the answer to {op:?}: {e}")))
                }
                Err(e) => return Err(self.conn_err(format!("answer to {op:?}: {e}"))),
            };
            let head: IdAndErr = protocol::decode_frame(&frame)
                .map_err(|e| self.conn_err(format!("answer to {op:?} is not a response: {e}")))?;
            if let Some(err) = head.err {
                let kind = ErrorKind::from_name(&err.kind);
                if head.id == id {
                    return Err(Error::Server {
                        kind,
                        message: err.message,
                    });
                }
                // Id 0: the server refused the connection or a frame and
                // closed it.
                return Err(self.refusal(err));
            }
            if head.id != id {
                return Err(self.conn_err(format!("answer for request {} while waiting for {id}", head.id)));
            }
            match on_frame(&frame)? {
                Flow::More => {}
                done => return Ok(done),
            }
        }
    }

    /// The error for a refusal of the connection or of a frame (request id
    /// 0; the server then closes the connection). One the caller can act on
    /// keeps its kind (busy: retry later; frame_too_large: a smaller
    /// request); a garbled or cut stream is a connection error.
    fn refusal(&self, err: protocol::WireError) -> Error {
        let kind = ErrorKind::from_name(&err.kind);
        if matches!(kind, ErrorKind::BadFrame | ErrorKind::TruncatedFrame) {
            return self.conn_err(format!("{} ({})", err.message, err.kind));
        }
        Error::Server {
            kind,
            message: err.message,
        }
    }

    /// One request, one reply frame of type `R`.
    pub(crate) fn call<A: Serialize, R: DeserializeOwned>(&self, op: &str, args: &A) -> Result<R> {
        let mut out = None;
        self.exchange(op, args, |frame| {
            out = Some(self.ok_of::<R>(op, frame)?);
            Ok(Flow::Last)
        })?;
        out.ok_or_else(|| self.conn_err(format!("no answer to {op:?}")))
    }

    /// The `ok` of a reply frame.
    pub(crate) fn ok_of<R: DeserializeOwned>(&self, op: &str, frame: &[u8]) -> Result<R> {
        protocol::decode::<Response<R>>(frame)
            .map_err(|e| self.conn_err(format!("answer to {op:?} does not decode: {e}")))?
            .ok
            .ok_or_else(|| self.conn_err(format!("answer to {op:?} has neither ok nor err")))
    }

    /// Checks the connection with a round trip.
    pub fn ping(&self) -> Result<()> {
        self.call::<_, Done>("ping", &NoArgs {}).map(|_| ())
    }

    /// Creates a collection and returns its handle.
    pub fn create_collection(&self, config: CollectionConfig) -> Result<RemoteCollection> {
        let wire = crate::server::handler_config_to_wire(&config);
        self.call::<_, Done>("create_collection", &CreateCollectionArgs { config: wire })?;
        Ok(RemoteCollection::new(self.clone(), config.name))
    }

    /// The handle of an existing collection; `UnknownCollection` otherwise.
    pub fn collection(&self, name: &str) -> Result<RemoteCollection> {
        let coll = RemoteCollection::new(self.clone(), name.to_owned());
        coll.config()?;
        Ok(coll)
    }

    /// Drops a collection and everything in it.
    pub fn drop_collection(&self, name: &str) -> Result<()> {
        self.call::<_, Done>(
            "drop_collection",
            &CollectionArgs {
                collection: name.to_owned(),
            },
        )
        .map(|_| ())
    }

    /// The collection names, sorted.
    pub fn list_collections(&self) -> Result<Vec<String>> {
        Ok(self
            .call::<_, ListReply>("list_collections", &NoArgs {})?
            .collections)
    }

    pub(crate) fn config_of(&self, name: &str) -> Result<CollectionConfig> {
        let wire: ConfigWire = self.call(
            "collection_config",
            &CollectionArgs {
                collection: name.to_owned(),
            },
        )?;
        crate::server::handler_config_from_wire(&wire).map_err(|e| Error::Server {
            kind: ErrorKind::from_name(&e.kind),
            message: e.message,
        })
    }

    pub(crate) fn bad_reply(&self, reason: String) -> Error {
        self.conn_err(reason)
    }
}

/// The part of a response read before its `ok` is decoded.
#[derive(Debug, serde::Deserialize)]
struct IdAndErr {
    id: u64,
    #[serde(default)]
    err: Option<protocol::WireError>,
}
