//! `Db`: the handle a program opens.

use std::path::Path;
use std::sync::Arc;

use slate_core::{CollectionConfig, Database, MemoryStore, RocksStore};

use crate::{Collection, Result, Transaction};

/// An open Slate database. Cheap to clone; every clone is the same database.
#[derive(Debug, Clone)]
pub struct Db {
    pub(crate) inner: Arc<Database>,
    /// See [`Db::with_transaction_limit`].
    txn_limit: Option<u64>,
}

/// Options for opening a database on disk; each setter states its default.
#[derive(Debug, Clone)]
#[must_use]
pub struct DbBuilder {
    store: slate_core::RocksStoreBuilder,
}

impl DbBuilder {
    /// Whether each commit is fsynced before it returns. Default `true`: an
    /// acknowledged write survives power loss. `false` keeps it across a
    /// process crash only.
    pub fn sync(self, sync: bool) -> Self {
        Self {
            store: self.store.sync(sync),
        }
    }

    /// RocksDB block cache size. Default 64 MiB; 0 turns the block cache off.
    pub fn block_cache_bytes(self, bytes: usize) -> Self {
        Self {
            store: self.store.block_cache_bytes(bytes),
        }
    }

    /// Whether to create the database when the directory has none. Default `true`.
    pub fn create_if_missing(self, create: bool) -> Self {
        Self {
            store: self.store.create_if_missing(create),
        }
    }

    /// Opens the database, rebuilding vector caches from disk.
    pub fn open(self) -> Result<Db> {
        let store = self.store.open()?;
        let dir = store.path().display().to_string();
        let inner = Database::open(Arc::new(store)).map_err(|e| match e {
            // Named by its directory, which the store layer does not know.
            slate_core::Error::NotSlate { reason } => slate_core::Error::NotSlate {
                reason: format!("{dir}: {reason}"),
            },
            e => e,
        })?;
        Ok(Db {
            inner: Arc::new(inner),
            txn_limit: None,
        })
    }
}

impl Db {
    /// Opens (or creates) the database in directory `path` on RocksDB, with
    /// synced commits. A directory holding another program's RocksDB (column
    /// families but no Slate catalog) is refused with `NotSlate`, no Slate
    /// data written to it; a collection whose drop a crash cut short is
    /// dropped.
    pub fn open(path: impl AsRef<Path>) -> Result<Db> {
        Self::builder(path).open()
    }

    /// Options for opening the database in `path`.
    pub fn builder(path: impl AsRef<Path>) -> DbBuilder {
        DbBuilder {
            store: RocksStore::builder(path),
        }
    }

    /// A database held in memory only.
    pub fn memory() -> Db {
        let db = Database::open(Arc::new(MemoryStore::new()))
            .expect("opening an empty in-memory database cannot fail");
        Db {
            inner: Arc::new(db),
            txn_limit: None,
        }
    }

    /// The layer underneath (storage, collections, raw reads).
    pub fn database(&self) -> &Database {
        &self.inner
    }

    /// Creates a collection and returns its handle.
    pub fn create_collection(&self, config: CollectionConfig) -> Result<Collection> {
        let name = config.name.clone();
        self.inner.create_collection(config)?;
        Ok(Collection::new(self.clone(), name))
    }

    /// The handle of an existing collection; `UnknownCollection` otherwise.
    pub fn collection(&self, name: &str) -> Result<Collection> {
        self.inner.collection_config(name)?;
        Ok(Collection::new(self.clone(), name.to_owned()))
    }

    /// Drops a collection and everything in it.
    pub fn drop_collection(&self, name: &str) -> Result<()> {
        Ok(self.inner.drop_collection(name)?)
    }

    /// The collection names, sorted.
    pub fn list_collections(&self) -> Result<Vec<String>> {
        Ok(self.inner.list_collections()?)
    }

    /// Starts a multi-document write transaction (waiting for the current one).
    /// Commit with [`Transaction::commit`]; dropping it rolls back.
    ///
    /// On the thread that began the open transaction, a second write (this,
    /// a [`Collection`] write, creating or dropping a collection) fails at
    /// once with [`slate_core::Error::NestedWrite`] rather than wait on
    /// itself; so does one on that thread after the transaction was handed
    /// to another thread, until it ends.
    pub fn begin(&self) -> Result<Transaction<'_>> {
        let mut txn = Transaction::new(&self.inner)?;
        txn.inner().limit_bytes(self.txn_limit);
        Ok(txn)
    }

    /// This database, through a handle whose write transactions (and
    /// collection handles' writes) hold at most `bytes` of changes: once a
    /// transaction's documents, index entries, vectors and staged
    /// replacements pass it, its next insert, replacement or delete fails
    /// with [`slate_core::Error::TransactionTooLarge`] and the write is
    /// rolled back (see [`slate_core::WriteTxn::limit_bytes`]). `None` lifts
    /// the limit (the default). A server sets one
    /// ([`ServerConfig::max_transaction_bytes`](crate::ServerConfig)), so that
    /// a small request such as `update_many({}, ..)` on a large collection
    /// cannot make it hold the collection in memory.
    pub fn with_transaction_limit(&self, bytes: Option<u64>) -> Db {
        Db {
            inner: Arc::clone(&self.inner),
            txn_limit: bytes,
        }
    }

    /// Runs `f` in a transaction and commits it if `f` returns `Ok`.
    ///
    /// Inside `f`, write through the transaction: a write through a
    /// [`Collection`] handle (or creating or dropping a collection) on the
    /// same thread would wait for this transaction, which waits for `f`; it
    /// fails at once with [`slate_core::Error::NestedWrite`] instead.
    pub fn transaction<T>(&self, f: impl FnOnce(&mut Transaction<'_>) -> Result<T>) -> Result<T> {
        let mut txn = self.begin()?;
        let out = f(&mut txn)?;
        txn.commit()?;
        Ok(out)
    }
}
