//! The wire format of `slate serve` (specified in `docs/protocol.md`): frames,
//! the request envelope, each operation's arguments and reply, error kinds.
//!
//! A frame is a u32 big-endian length then that many bytes of MessagePack.
//! Documents, filters, updates and BSON values travel as BSON bytes inside
//! MessagePack `bin`; structs travel as MessagePack maps keyed by field name.

use std::io::{self, Read, Write};

use bson::{Bson, Document};
use serde::de::{self, DeserializeOwned, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Default bound on a request frame's payload: 4 MiB.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 4 << 20;

/// A find's documents are sent in frames of about this many BSON bytes.
pub const FIND_BATCH_BYTES: usize = 1 << 20;

/// Largest `k` a search request may ask for.
pub const MAX_K: u64 = 100_000;

/// Most hits one `search_batch` may ask for (queries × `k`): each query's
/// heap holds up to `k` of them while the batch runs.
pub const MAX_BATCH_HITS: u64 = 1_000_000;

/// Most partitions one request may name.
pub const MAX_PARTITIONS: usize = 10_000;

/// Most document lookups one `get_many` may ask for (ids × partitions).
pub const MAX_LOOKUPS: u64 = 1_000_000;

/// Bytes carried as a MessagePack `bin` (BSON documents, f32 vectors, tokens).
/// Decoding also accepts a `str` (its UTF-8 bytes) and an array of small ints.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bin(pub Vec<u8>);

impl Serialize for Bin {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

struct BinVisitor;

impl<'de> Visitor<'de> for BinVisitor {
    type Value = Bin;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MessagePack bin")
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Bin, E> {
        Ok(Bin(v.to_vec()))
    }

    fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<Bin, E> {
        Ok(Bin(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Bin, E> {
        Ok(Bin(v.as_bytes().to_vec()))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Bin, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(b) = seq.next_element::<u8>()? {
            out.push(b);
        }
        Ok(Bin(out))
    }
}

impl<'de> Deserialize<'de> for Bin {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Bin, D::Error> {
        d.deserialize_byte_buf(BinVisitor)
    }
}

impl Bin {
    /// The BSON bytes of `doc`.
    pub fn doc(doc: &Document) -> Bin {
        let mut out = Vec::new();
        // Writing a Document into a Vec fails only on a key with a NUL byte,
        // which a Document read from BSON cannot hold; send what was written.
        let _ = doc.to_writer(&mut out);
        Bin(out)
    }

    /// A BSON value, sent as the document `{"v": value}`.
    pub fn value(v: &Bson) -> Bin {
        let mut d = Document::new();
        d.insert("v", v.clone());
        Bin::doc(&d)
    }

    /// Little-endian f32 bytes of `v`.
    pub fn f32s(v: &[f32]) -> Bin {
        Bin(v.iter().flat_map(|x| x.to_le_bytes()).collect())
    }

    /// These bytes as a BSON document; `what` names the field in the error.
    pub fn to_doc(&self, what: &str) -> Result<Document, String> {
        // Direct iteration of the raw elements: no serde visitor, no copy of the bytes.
        Document::try_from(self.to_raw_doc(what)?).map_err(|e| format!("{what}: not a BSON document: {e}"))
    }

    /// These bytes as a raw BSON document, checked for nesting first:
    /// converting or deserializing it recurses once per level, and the
    /// depth is checked without recursion, so that no frame can overflow
    /// the stack.
    pub fn to_raw_doc(&self, what: &str) -> Result<&bson::RawDocument, String> {
        let limit = slate_core::value::MAX_NESTING;
        if slate_core::value::nested_deeper_than(&self.0, limit) {
            return Err(format!(
                "{what}: documents and arrays nested more than {limit} levels deep"
            ));
        }
        bson::RawDocument::from_bytes(&self.0).map_err(|e| format!("{what}: not a BSON document: {e}"))
    }

    /// These bytes as a BSON value sent as `{"v": value}`.
    pub fn to_value(&self, what: &str) -> Result<Bson, String> {
        let mut d = self.to_doc(what)?;
        d.remove("v").ok_or_else(|| {
            format!("{what}: a BSON value travels as the document {{\"v\": value}}; no field v")
        })
    }

    /// These bytes as a BSON array sent as `{"v": [..]}`.
    pub fn to_values(&self, what: &str) -> Result<Vec<Bson>, String> {
        match self.to_value(what)? {
            Bson::Array(a) => Ok(a),
            other => Err(format!(
                "{what}: expected {{\"v\": [..]}}, v is {:?}",
                other.element_type()
            )),
        }
    }

    /// These bytes as little-endian f32 values.
    pub fn to_f32s(&self, what: &str) -> Result<Vec<f32>, String> {
        if !self.0.len().is_multiple_of(4) {
            return Err(format!(
                "{what}: {} bytes is not a whole number of little-endian f32",
                self.0.len()
            ));
        }
        Ok(self
            .0
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }
}

// ------------------------------------------------------------------- frames

/// Why a frame could not be read.
#[derive(Debug)]
pub enum FrameError {
    /// The length prefix is above the bound; the body was not read.
    TooLarge { len: u64, max: usize },
    /// The stream ended inside a frame.
    Truncated { got: usize, want: usize },
    /// The socket failed.
    Io(io::Error),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::TooLarge { len, max } => {
                write!(f, "frame of {len} bytes exceeds the limit of {max} bytes")
            }
            FrameError::Truncated { got, want } => {
                write!(
                    f,
                    "connection closed inside a frame: {got} of {want} bytes received"
                )
            }
            FrameError::Io(e) => write!(f, "{e}"),
        }
    }
}

/// Reads until `buf` is full or the stream ends; returns the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Reads one frame's payload: `Ok(None)` on a clean end of stream between
/// frames. A length above `max` is refused before any allocation.
pub fn read_frame(r: &mut impl Read, max: usize) -> Result<Option<Vec<u8>>, FrameError> {
    let mut head = [0u8; 4];
    let got = read_full(r, &mut head).map_err(FrameError::Io)?;
    if got == 0 {
        return Ok(None);
    }
    if got < 4 {
        return Err(FrameError::Truncated { got, want: 4 });
    }
    let len = u32::from_be_bytes(head);
    if len as u64 > max as u64 {
        return Err(FrameError::TooLarge { len: len as u64, max });
    }
    let mut body = vec![0u8; len as usize];
    let got = read_full(r, &mut body).map_err(FrameError::Io)?;
    if got < body.len() {
        return Err(FrameError::Truncated {
            got: 4 + got,
            want: 4 + body.len(),
        });
    }
    Ok(Some(body))
}

/// Writes one frame (length prefix and payload); does not flush.
pub fn write_frame(w: &mut impl Write, payload: &[u8]) -> io::Result<()> {
    let len = u32::try_from(payload.len()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a frame of {} bytes does not fit a u32 length", payload.len()),
        )
    })?;
    w.write_all(&len.to_be_bytes())?;
    w.write_all(payload)
}

/// MessagePack of `v`, structs as maps keyed by field name.
pub fn encode<T: Serialize + ?Sized>(v: &T) -> io::Result<Vec<u8>> {
    rmp_serde::to_vec_named(v).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
}

/// Decodes MessagePack (the first value of `bytes`; a frame is checked to
/// hold no more once, by [`decode_frame`]).
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    rmp_serde::from_slice(bytes).map_err(|e| e.to_string())
}

/// [`decode`] for the first reading of a frame's payload (a request's
/// envelope, an answer's head): one value, which must take every byte (a
/// payload with more after its value, such as two requests in one frame,
/// is refused rather than read in part). Later readings of the same
/// payload use [`decode`].
pub fn decode_frame<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    let value = decode(bytes)?;
    match value_len(bytes) {
        Some(n) if n == bytes.len() => Ok(value),
        Some(n) => Err(format!("{} bytes follow the value", bytes.len() - n)),
        None => Err("not one MessagePack value".into()),
    }
}

/// The length of the MessagePack value at the start of `b`, read without
/// copying or decoding it (markers and lengths only, no recursion); `None`
/// when `b` ends inside it or holds a reserved marker.
fn value_len(b: &[u8]) -> Option<usize> {
    let mut at = 0usize;
    // Values still to read: one, plus each container's items as it opens.
    let mut pending: u64 = 1;
    let be = |at: usize, n: usize| -> Option<usize> {
        let bytes = b.get(at..at.checked_add(n)?)?;
        Some(bytes.iter().fold(0usize, |acc, &x| (acc << 8) | usize::from(x)))
    };
    while pending > 0 {
        pending -= 1;
        let marker = *b.get(at)?;
        at += 1;
        // (payload bytes to skip, items to read)
        let (skip, items): (usize, u64) = match marker {
            0x00..=0x7f | 0xe0..=0xff | 0xc0 | 0xc2 | 0xc3 => (0, 0),
            0x80..=0x8f => (0, 2 * u64::from(marker & 0x0f)),
            0x90..=0x9f => (0, u64::from(marker & 0x0f)),
            0xa0..=0xbf => (usize::from(marker & 0x1f), 0),
            0xc4 | 0xd9 => (1 + be(at, 1)?, 0),
            0xc5 | 0xda => (2 + be(at, 2)?, 0),
            0xc6 | 0xdb => (4 + be(at, 4)?, 0),
            0xc7 => (1 + 1 + be(at, 1)?, 0),
            0xc8 => (2 + 1 + be(at, 2)?, 0),
            0xc9 => (4 + 1 + be(at, 4)?, 0),
            0xca | 0xce | 0xd2 => (4, 0),
            0xcb | 0xcf | 0xd3 => (8, 0),
            0xcc | 0xd0 => (1, 0),
            0xcd | 0xd1 => (2, 0),
            0xd4 => (2, 0),
            0xd5 => (3, 0),
            0xd6 => (5, 0),
            0xd7 => (9, 0),
            0xd8 => (17, 0),
            0xdc => (2, be(at, 2)? as u64),
            0xdd => (4, be(at, 4)? as u64),
            0xde => (2, 2 * be(at, 2)? as u64),
            0xdf => (4, 2 * be(at, 4)? as u64),
            0xc1 => return None,
        };
        at = at.checked_add(skip)?;
        pending = pending.checked_add(items)?;
        // Every item takes at least one byte: a claim of more than are left
        // ends here rather than counting down through them.
        if pending > (b.len().saturating_sub(at)) as u64 {
            return None;
        }
    }
    (at <= b.len()).then_some(at)
}

// ---------------------------------------------------------------- envelopes

/// What every request carries. Unknown fields are ignored.
#[derive(Debug, Deserialize)]
pub struct Envelope {
    pub id: u64,
    pub op: String,
}

/// A request as a client writes it: `{"id": .., "op": .., "args": {..}}`.
#[derive(Debug, Serialize)]
pub struct RequestOut<'a, A> {
    pub id: u64,
    pub op: &'a str,
    pub args: &'a A,
}

/// The `args` of a request, decoded from the same frame as its [`Envelope`].
#[derive(Debug, Deserialize)]
pub struct ArgsOf<A> {
    pub args: A,
}

/// A reply: `{"id": .., "ok": result}` or `{"id": .., "err": {"kind", "message"}}`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Response<T> {
    pub id: u64,
    #[serde(default = "none", skip_serializing_if = "Option::is_none")]
    pub ok: Option<T>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub err: Option<WireError>,
}

fn none<T>() -> Option<T> {
    None
}

/// A typed error on the wire.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WireError {
    pub kind: String,
    pub message: String,
}

impl WireError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind: kind.as_str().to_owned(),
            message: message.into(),
        }
    }
}

/// The kind of an error, as named on the wire (`docs/protocol.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A frame whose payload is not a MessagePack request envelope.
    BadFrame,
    /// A frame longer than the server's bound.
    FrameTooLarge,
    /// A stream that ended inside a frame.
    TruncatedFrame,
    /// A request whose `args` do not decode, or a value of the wrong type.
    BadRequest,
    /// An `op` the server does not know.
    UnknownOp,
    /// A missing or wrong auth token.
    Unauthorized,
    /// The server is at its connection limit.
    Busy,
    /// The server failed while answering (a bug): the request may not have run.
    Internal,
    UnknownCollection,
    CollectionExists,
    InvalidCollectionName,
    InvalidConfig,
    InvalidPartition,
    InvalidId,
    UnknownIndex,
    IndexExists,
    UnknownVectorField,
    DuplicateId,
    InvalidDocument,
    InvalidVector,
    BadFilter,
    BadUpdate,
    InvalidQuery,
    /// Stored bytes that do not decode.
    Corrupt,
    /// The database refuses writes after a failed commit.
    Poisoned,
    /// A write would hold more changes than the server's bound.
    TransactionTooLarge,
    /// Any other storage failure (RocksDB, I/O).
    Storage,
    /// Client side: the connection failed (never sent by a server).
    Connection,
    /// A kind this client does not know (a newer server).
    Other,
}

const KINDS: &[(ErrorKind, &str)] = &[
    (ErrorKind::BadFrame, "bad_frame"),
    (ErrorKind::FrameTooLarge, "frame_too_large"),
    (ErrorKind::TruncatedFrame, "truncated_frame"),
    (ErrorKind::BadRequest, "bad_request"),
    (ErrorKind::UnknownOp, "unknown_op"),
    (ErrorKind::Unauthorized, "unauthorized"),
    (ErrorKind::Busy, "busy"),
    (ErrorKind::Internal, "internal"),
    (ErrorKind::UnknownCollection, "unknown_collection"),
    (ErrorKind::CollectionExists, "collection_exists"),
    (ErrorKind::InvalidCollectionName, "invalid_collection_name"),
    (ErrorKind::InvalidConfig, "invalid_config"),
    (ErrorKind::InvalidPartition, "invalid_partition"),
    (ErrorKind::InvalidId, "invalid_id"),
    (ErrorKind::UnknownIndex, "unknown_index"),
    (ErrorKind::IndexExists, "index_exists"),
    (ErrorKind::UnknownVectorField, "unknown_vector_field"),
    (ErrorKind::DuplicateId, "duplicate_id"),
    (ErrorKind::InvalidDocument, "invalid_document"),
    (ErrorKind::InvalidVector, "invalid_vector"),
    (ErrorKind::BadFilter, "bad_filter"),
    (ErrorKind::BadUpdate, "bad_update"),
    (ErrorKind::InvalidQuery, "invalid_query"),
    (ErrorKind::Corrupt, "corrupt"),
    (ErrorKind::Poisoned, "poisoned"),
    (ErrorKind::TransactionTooLarge, "transaction_too_large"),
    (ErrorKind::Storage, "storage"),
    (ErrorKind::Connection, "connection"),
    (ErrorKind::Other, "other"),
];

impl ErrorKind {
    /// The kind's name on the wire (`unknown_collection`, ...).
    pub fn as_str(self) -> &'static str {
        KINDS
            .iter()
            .find(|(k, _)| *k == self)
            .map_or("other", |(_, name)| name)
    }

    /// The kind named `name`; [`ErrorKind::Other`] for a name this version does not know.
    pub fn from_name(name: &str) -> ErrorKind {
        KINDS
            .iter()
            .find(|(_, n)| *n == name)
            .map_or(ErrorKind::Other, |(k, _)| *k)
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

// -------------------------------------------------------- operation arguments

/// Arguments of operations that take none.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

/// `auth`: the token, as bin or str.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthArgs {
    pub token: Bin,
}

/// A vector field of a collection configuration.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct VectorFieldWire {
    pub field: String,
    pub dim: u64,
    pub metric: String,
    /// Row codes kept in the cache (optional on input, default off).
    #[serde(default)]
    pub codes: bool,
}

/// A collection configuration (`create_collection` args, `collection_config` reply).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ConfigWire {
    pub name: String,
    #[serde(default)]
    pub indexes: Vec<String>,
    #[serde(default)]
    pub vectors: Vec<VectorFieldWire>,
    #[serde(default)]
    pub partition_key: Option<String>,
}

/// `create_collection`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateCollectionArgs {
    pub config: ConfigWire,
}

/// Operations naming only a collection (`drop_collection`, `collection_config`).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollectionArgs {
    pub collection: String,
}

/// `create_index`, `drop_index`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexArgs {
    pub collection: String,
    pub field: String,
}

/// Every operation on documents names its collection and, optionally, the
/// partitions it addresses (`{"v": [..]}`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    pub collection: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<Bin>,
}

/// `insert_one`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InsertOneArgs {
    pub collection: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<Bin>,
    pub doc: Bin,
}

/// `insert_many`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InsertManyArgs {
    pub collection: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<Bin>,
    pub docs: Vec<Bin>,
}

/// `get`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetArgs {
    pub collection: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<Bin>,
    pub id: Bin,
}

/// `get_many`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetManyArgs {
    pub collection: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<Bin>,
    pub ids: Bin,
}

/// `replace_one`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplaceArgs {
    pub collection: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<Bin>,
    pub filter: Bin,
    pub doc: Bin,
    #[serde(default)]
    pub upsert: bool,
}

/// `update_one`, `update_many`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateArgs {
    pub collection: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<Bin>,
    pub filter: Bin,
    pub update: Bin,
    #[serde(default)]
    pub upsert: bool,
}

/// `delete_one`, `delete_many`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeleteArgs {
    pub collection: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<Bin>,
    pub filter: Bin,
}

/// `find`, `count`, `explain`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FindArgs {
    pub collection: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<Bin>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<Bin>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sort: Vec<String>,
    #[serde(default)]
    pub skip: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub projection: Option<Vec<String>>,
}

fn default_k() -> u64 {
    10
}

/// `search`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    pub collection: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<Bin>,
    pub field: String,
    pub vector: Bin,
    #[serde(default = "default_k")]
    pub k: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<Bin>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub projection: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
    #[serde(default)]
    pub threads: u64,
    #[serde(default)]
    pub explain: bool,
}

/// `search_batch`: `vectors` holds n × dim little-endian f32, row-major.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchBatchArgs {
    pub collection: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<Bin>,
    pub field: String,
    pub vectors: Bin,
    #[serde(default = "default_k")]
    pub k: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<Bin>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub projection: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
    #[serde(default)]
    pub threads: u64,
}

// ------------------------------------------------------------------ replies

/// Replies carrying nothing (`{}`).
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Done {}

/// `list_collections`.
#[derive(Debug, Serialize, Deserialize)]
pub struct ListReply {
    pub collections: Vec<String>,
}

/// `insert_one`: the `_id` as `{"v": id}`.
#[derive(Debug, Serialize, Deserialize)]
pub struct InsertOneReply {
    pub id: Bin,
}

/// `insert_many`: the `_id`s as `{"v": [ids]}`.
#[derive(Debug, Serialize, Deserialize)]
pub struct InsertManyReply {
    pub ids: Bin,
}

/// `get`.
#[derive(Debug, Serialize, Deserialize)]
pub struct GetReply {
    pub doc: Option<Bin>,
}

/// `get_many`: one entry per id, nil where absent.
#[derive(Debug, Serialize, Deserialize)]
pub struct GetManyReply {
    pub docs: Vec<Option<Bin>>,
}

/// `replace_one`, `update_one`, `update_many`.
#[derive(Debug, Serialize, Deserialize)]
pub struct UpdateReply {
    pub matched: u64,
    pub modified: u64,
    #[serde(default)]
    pub upserted_id: Option<Bin>,
}

/// `delete_one`, `delete_many`.
#[derive(Debug, Serialize, Deserialize)]
pub struct DeleteReply {
    pub deleted: u64,
}

/// One frame of a `find` answer; `more` is true on every frame but the last.
#[derive(Debug, Serialize, Deserialize)]
pub struct FindReply {
    pub docs: Vec<Bin>,
    pub more: bool,
}

/// `count`.
#[derive(Debug, Serialize, Deserialize)]
pub struct CountReply {
    pub count: u64,
}

/// `explain`: the plan as `slate find --explain` prints it.
#[derive(Debug, Serialize, Deserialize)]
pub struct ExplainReply {
    pub plan: String,
}

/// One search hit: distance and the document (`_id` and projected fields).
#[derive(Debug, Serialize, Deserialize)]
pub struct HitWire {
    pub distance: f32,
    pub doc: Bin,
}

/// `search`.
#[derive(Debug, Serialize, Deserialize)]
pub struct SearchReply {
    pub hits: Vec<HitWire>,
    #[serde(default)]
    pub explain: Option<String>,
}

/// `search_batch`: one hit list per query, in query order.
#[derive(Debug, Serialize, Deserialize)]
pub struct SearchBatchReply {
    pub results: Vec<Vec<HitWire>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `value_len` measures every marker family at its size boundaries,
    /// nested, with or without bytes after the value, and gives up on a
    /// value cut short.
    #[test]
    fn value_len_measures_each_marker_and_finds_trailing_bytes() {
        use std::collections::BTreeMap;
        let text = |n: usize| "x".repeat(n);
        let mut values: Vec<Vec<u8>> = Vec::new();
        for i in [
            0i64,
            1,
            127,
            128,
            255,
            256,
            65_535,
            65_536,
            i64::from(u32::MAX) + 1,
            -1,
            -32,
            -33,
            -129,
            -32_769,
            i64::MIN,
        ] {
            values.push(encode(&i).unwrap());
        }
        values.push(encode(&u64::MAX).unwrap());
        values.push(encode(&1.5f32).unwrap());
        values.push(encode(&1.5f64).unwrap());
        values.push(encode(&()).unwrap());
        values.push(encode(&true).unwrap());
        for n in [0, 31, 32, 255, 256, 65_535, 65_536] {
            values.push(encode(&text(n)).unwrap());
            values.push(encode(&Bin(vec![7; n])).unwrap());
        }
        let items: Vec<u32> = (0..20).collect();
        values.push(encode(&items).unwrap());
        values.push(encode(&vec![1u8; 70_000]).unwrap());
        let map: BTreeMap<String, Vec<String>> = (0..17).map(|i| (text(i), vec![text(i); i])).collect();
        values.push(encode(&map).unwrap());
        values.push(encode(&vec![map.clone(); 3]).unwrap());
        for v in &values {
            assert_eq!(value_len(v), Some(v.len()), "{:x?}", &v[..v.len().min(8)]);
            let mut longer = v.clone();
            longer.extend_from_slice(&encode(&1u8).unwrap());
            assert_eq!(value_len(&longer), Some(v.len()));
            assert_eq!(value_len(&v[..v.len() - 1]), None, "cut short");
        }
        // A reserved marker, and an array claiming more items than bytes.
        assert_eq!(value_len(&[0xc1]), None);
        assert_eq!(value_len(&[0xdd, 0xff, 0xff, 0xff, 0xff, 0x01]), None);
    }

    #[test]
    fn frame_bounds_are_checked_before_allocating() {
        let mut claim = Vec::new();
        claim.extend_from_slice(&u32::MAX.to_be_bytes());
        let err = read_frame(&mut claim.as_slice(), 1024).unwrap_err();
        assert!(matches!(err, FrameError::TooLarge { len, max: 1024 } if len == u32::MAX as u64));
    }

    #[test]
    fn truncated_frames_and_clean_ends_differ() {
        let mut buf = Vec::new();
        write_frame(&mut buf, b"hello").unwrap();
        assert_eq!(read_frame(&mut &buf[..], 64).unwrap(), Some(b"hello".to_vec()));
        assert!(read_frame(&mut &buf[..0], 64).unwrap().is_none());
        let err = read_frame(&mut &buf[..6], 64).unwrap_err();
        assert!(matches!(err, FrameError::Truncated { got: 6, want: 9 }), "{err}");
        let err = read_frame(&mut &buf[..2], 64).unwrap_err();
        assert!(matches!(err, FrameError::Truncated { got: 2, want: 4 }), "{err}");
    }

    #[test]
    fn error_kinds_round_trip_by_name() {
        for (kind, name) in KINDS {
            assert_eq!(kind.as_str(), *name);
            assert_eq!(ErrorKind::from_name(name), *kind);
        }
        assert_eq!(ErrorKind::from_name("from_the_future"), ErrorKind::Other);
    }

    #[test]
    fn requests_decode_in_two_passes_with_fields_in_any_order() {
        // args before op and id: a client in a language with unordered maps.
        #[derive(Serialize)]
        struct Shuffled<'a> {
            args: CollectionArgs,
            op: &'a str,
            id: u64,
        }
        let bytes = encode(&Shuffled {
            args: CollectionArgs {
                collection: "c".into(),
            },
            op: "drop_collection",
            id: 7,
        })
        .unwrap();
        let env: Envelope = decode(&bytes).unwrap();
        assert_eq!((env.id, env.op.as_str()), (7, "drop_collection"));
        let args: ArgsOf<CollectionArgs> = decode(&bytes).unwrap();
        assert_eq!(args.args.collection, "c");
    }

    #[test]
    fn bson_values_travel_wrapped() {
        let v = Bson::Array(vec![Bson::Int32(1), Bson::String("x".into())]);
        assert_eq!(
            Bin::value(&v).to_values("ids").unwrap(),
            vec![Bson::Int32(1), Bson::String("x".into())]
        );
        let err = Bin(vec![1, 2, 3]).to_doc("filter").unwrap_err();
        assert!(err.starts_with("filter: not a BSON document"), "{err}");
        assert!(Bin(vec![0; 5]).to_f32s("vector").is_err());
    }
}
