//! The error type of the storage layer.

use std::fmt;

/// Everything that can go wrong in slate-core.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// RocksDB reported an error (I/O, corruption, options).
    #[error("rocksdb: {0}")]
    Rocks(#[from] rocksdb::Error),
    /// A column family that does not exist was named.
    #[error("unknown column family {name:?}")]
    UnknownColumnFamily { name: String },
    /// `create_cf` named a column family that already exists.
    #[error("column family {name:?} already exists")]
    ColumnFamilyExists { name: String },
    /// A column family name that the backend cannot hold (empty or reserved).
    #[error("invalid column family name {name:?}: {reason}")]
    InvalidColumnFamily { name: String, reason: &'static str },
    /// An earlier commit failed with an I/O error, or its vectors did not
    /// all reach the in-memory caches; the handle refuses further writes
    /// rather than guess what reached the disk or serve caches that miss
    /// documents. Reopen a RocksStore (which rebuilds the caches); a
    /// MemoryStore's data stays readable, and writes need a new store.
    #[error(
        "store is poisoned by an earlier failed commit ({cause}): its data is readable; \
         to write, reopen it (on disk) or start a new one (in memory)"
    )]
    Poisoned { cause: String },
    /// A write began on the thread that holds the open write transaction
    /// (a `Collection` write inside `Db::transaction`'s closure): it would
    /// wait for that transaction, which waits for it.
    #[error(
        "this thread holds the open write transaction: write through it, or commit it first \
         (a second write transaction here would wait on the first forever)"
    )]
    NestedWrite,
    /// A write transaction holds more bytes than its limit (see
    /// `WriteTxn::limit_bytes`): an update or delete matching a large part
    /// of a big collection, say. The operation refused changed nothing
    /// (the one before it passed the limit).
    #[error(
        "transaction too large: it holds {bytes} bytes of changes, more than its limit of {limit} \
         (write in smaller transactions, or raise the limit)"
    )]
    TransactionTooLarge { bytes: u64, limit: u64 },
    /// Stored bytes that do not decode (a damaged or foreign database).
    #[error("corrupt data: {what}")]
    Corrupt { what: String },
    /// A collection that does not exist was named.
    #[error("unknown collection {name:?}")]
    UnknownCollection { name: String },
    /// `create_collection` named a collection that exists.
    #[error("collection {name:?} already exists")]
    CollectionExists { name: String },
    /// A collection name that cannot be used.
    #[error("invalid collection name {name:?}: {reason}")]
    InvalidCollectionName { name: String, reason: &'static str },
    /// A collection configuration that cannot be used.
    #[error("invalid configuration of collection {collection:?}: {reason}")]
    InvalidConfig { collection: String, reason: String },
    /// A partition value that cannot be used, or a partition named where none
    /// is expected (or missing where one is).
    #[error("invalid partition: {reason}")]
    InvalidPartition { reason: String },
    /// An `_id` that cannot be used.
    #[error("invalid _id in collection {collection:?}: {reason}")]
    InvalidId { collection: String, reason: String },
    /// An index that does not exist was named.
    #[error("collection {collection:?} has no index on {field:?}")]
    UnknownIndex { collection: String, field: String },
    /// `create_index` named a field that is already indexed.
    #[error("collection {collection:?} already has an index on {field:?}")]
    IndexExists { collection: String, field: String },
    /// A vector field that the collection does not declare.
    #[error("collection {collection:?} has no vector field {field:?}")]
    UnknownVectorField { collection: String, field: String },
    /// An insert whose `_id` is already taken; nothing was written.
    #[error("duplicate _id {id} in collection {collection:?}")]
    DuplicateId { collection: String, id: String },
    /// A database written by a newer Slate, in a format this build cannot
    /// read; nothing was written to it.
    #[error("database format {found} is newer than this build reads (up to {supported}): open it with a newer Slate")]
    UnsupportedFormat { found: u32, supported: u32 },
    /// A store that is not a Slate database (another program's RocksDB, say):
    /// no Slate data was written to it.
    #[error("not a Slate database: {reason}")]
    NotSlate { reason: String },
    /// A document that cannot be stored (not a document, bad field, too large).
    #[error("invalid document {id} in collection {collection:?}: {reason}")]
    InvalidDocument {
        collection: String,
        id: String,
        reason: String,
    },
    /// A vector value that cannot be stored: wrong dimension, not finite, not numbers.
    #[error("invalid vector in field {field:?} of document {id} in collection {collection:?}: {reason}")]
    InvalidVector {
        collection: String,
        field: String,
        id: String,
        reason: String,
    },
    /// An I/O error outside RocksDB (creating the data directory, say).
    #[error("i/o error at {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// `Result` with slate-core's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Display helper for byte keys in messages: printable ASCII as is, other bytes as `\xNN`.
#[derive(Clone, Copy)]
pub struct KeyDisplay<'a>(pub &'a [u8]);

impl fmt::Display for KeyDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for &b in self.0 {
            if b.is_ascii_graphic() || b == b' ' {
                write!(f, "{}", b as char)?;
            } else {
                write!(f, "\\x{b:02x}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for KeyDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{self}\"")
    }
}
