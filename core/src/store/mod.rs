//! The storage abstraction: named column families of ordered byte keys, read
//! snapshots and one write transaction at a time.
//!
//! Two backends implement [`Store`]: [`MemoryStore`] (persistent ordered maps
//! published through `arc-swap`) and [`RocksStore`] (RocksDB, one column family
//! per name). Everything above this module sees only the trait.
//!
//! Invariants every backend keeps (the conformance suite in `tests/it` checks
//! them against both):
//! - a [`Snapshot`] sees one committed state for its whole life, whatever is
//!   committed after it was taken, and taking or reading it never blocks a writer;
//! - a commit is atomic across column families: a reader sees all of it or none;
//! - one [`WriteTxn`] at a time: [`Store::begin_write`] waits for the previous one;
//! - commit versions increase by one per commit, and a snapshot reports the
//!   version of the last commit it sees.

mod gate;
mod memory;
mod overlay;
mod range;
mod rocks;
mod table;

use std::borrow::Cow;
use std::fmt::Debug;
use std::ops::ControlFlow;
use std::sync::Arc;

use rayon::slice::ParallelSliceMut;

pub use gate::{WriteGuard, WriterGate};
pub use memory::MemoryStore;
pub use overlay::WriteTxn;
pub use range::{prefix_end, Direction, KeyRange};
pub use rocks::{RocksStore, RocksStoreBuilder};

use crate::Result;

/// One key-value pair read from a store; borrowed where the backend can lend.
pub type Entry<'a> = (Cow<'a, [u8]>, Cow<'a, [u8]>);

/// An iterator over entries in key order (or reverse key order). It yields
/// `Err` once if the backend fails mid-way and then ends; it never panics.
pub type EntryIter<'a> = Box<dyn Iterator<Item = Result<Entry<'a>>> + Send + 'a>;

/// What [`Snapshot::visit`] hands each entry to: its key and value.
pub type Visitor<'a> = dyn FnMut(&[u8], &[u8]) -> ControlFlow<()> + 'a;

/// Hands each entry of `entries` to `f` until it breaks: what
/// [`Snapshot::visit`] does over a range's iterator.
pub(crate) fn visit_entries(entries: EntryIter<'_>, f: &mut Visitor<'_>) -> Result<()> {
    for e in entries {
        let (k, v) = e?;
        if f(&k, &v).is_break() {
            break;
        }
    }
    Ok(())
}

/// Counts the entries `visit` hands over, stopping at `cap`: what
/// [`Snapshot::count_range`] does through [`Snapshot::visit`].
pub(crate) fn count_visited(visit: impl FnOnce(&mut Visitor<'_>) -> Result<()>, cap: usize) -> Result<usize> {
    let mut n = 0;
    if cap > 0 {
        visit(&mut |_, _| {
            n += 1;
            match n < cap {
                true => ControlFlow::Continue(()),
                false => ControlFlow::Break(()),
            }
        })?;
    }
    Ok(n)
}

/// `entries` by ascending key, of entries with one key the last kept (as
/// given when already strictly ascending): a batch of writes in order, a
/// later write to a key winning.
pub(crate) fn last_of_each<K: Ord + Send, V: Send>(mut entries: Vec<(K, V)>) -> Vec<(K, V)> {
    if entries.windows(2).all(|pair| pair[0].0 < pair[1].0) {
        return entries;
    }
    // Stable: entries with one key stay in the order given.
    entries.par_sort_by(|a, b| a.0.cmp(&b.0));
    let mut out: Vec<(K, V)> = Vec::with_capacity(entries.len());
    for entry in entries {
        match out.last_mut() {
            Some(last) if last.0 == entry.0 => *last = entry,
            _ => out.push(entry),
        }
    }
    out
}

/// A consistent, read-only view of a store at one commit version.
///
/// A [`WriteTxn`] is one too: it reads its base snapshot with its own changes
/// applied, so queries run inside a transaction see its writes.
pub trait Snapshot: Send + Sync {
    /// The version of the last commit this snapshot sees (0 before any commit).
    fn version(&self) -> u64;

    /// The value under `key` in column family `cf`.
    fn get(&self, cf: &str, key: &[u8]) -> Result<Option<Cow<'_, [u8]>>>;

    /// The values under several keys of one column family, in the order given.
    fn multi_get(&self, cf: &str, keys: &[&[u8]]) -> Result<Vec<Option<Cow<'_, [u8]>>>> {
        keys.iter().map(|k| self.get(cf, k)).collect()
    }

    /// Entries whose keys fall in `range`, ascending or descending.
    fn range(&self, cf: &str, range: &KeyRange, dir: Direction) -> Result<EntryIter<'_>>;

    /// How many keys lie in `range`, counting at most `cap`: what
    /// `range(..).take(cap).count()` gives, through [`visit`](Self::visit)
    /// (without copying the entries where it lends them).
    fn count_range(&self, cf: &str, range: &KeyRange, cap: usize) -> Result<usize> {
        count_visited(|f| self.visit(cf, range, f), cap)
    }

    /// Hands each entry of `range` to `f`, in key order, until `f` breaks:
    /// what `range` yields, lent instead of copied where the backend copies
    /// entries out (RocksDB).
    fn visit(&self, cf: &str, range: &KeyRange, f: &mut Visitor<'_>) -> Result<()> {
        visit_entries(self.range(cf, range, Direction::Forward)?, f)
    }

    /// Whether any key of `cf` lies in `range`; `None` when the backend gave
    /// up finding out (RocksDB, after stepping over many deleted or older
    /// entries), for the caller to answer another way.
    fn any_in(&self, cf: &str, range: &KeyRange) -> Result<Option<bool>> {
        Ok(Some(
            self.range(cf, range, Direction::Forward)?
                .next()
                .transpose()?
                .is_some(),
        ))
    }

    /// Entries whose keys start with `prefix`.
    fn prefix(&self, cf: &str, prefix: &[u8], dir: Direction) -> Result<EntryIter<'_>> {
        self.range(cf, &KeyRange::prefix(prefix), dir)
    }

    /// Whether column family `cf` exists in this snapshot's store.
    fn has_cf(&self, cf: &str) -> bool;

    /// Whether reads go to disk-backed storage (RocksDB), where a point read
    /// costs several times a memory lookup: the vector planner prices
    /// document reads by it.
    fn on_disk(&self) -> bool {
        false
    }
}

/// A value as a transaction stages it and [`MemoryStore`] keeps it: shared,
/// so that it moves from the writer to the store without a copy.
pub type Bytes = std::sync::Arc<[u8]>;

/// One change in a [`Batch`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Op {
    /// Set `key` to `value`.
    Put { key: Vec<u8>, value: Bytes },
    /// Remove `key`.
    Delete { key: Vec<u8> },
    /// Remove every key in `[start, end)`; `end: None` is unbounded.
    DeleteRange { start: Vec<u8>, end: Option<Vec<u8>> },
}

/// The changes of one commit: per column family, operations applied in order.
#[derive(Debug, Default, Clone)]
pub struct Batch {
    /// `(column family, its ops)` in application order.
    pub ops: Vec<(String, Vec<Op>)>,
}

impl Batch {
    /// Whether the batch changes nothing.
    pub fn is_empty(&self) -> bool {
        self.ops.iter().all(|(_, ops)| ops.is_empty())
    }
}

/// A key-value store with named column families, snapshots and one writer at a time.
///
/// Backends implement the primitives (`snapshot`, `apply`, `write_lock`, the
/// column family calls); [`Store::begin_write`] builds the transaction on top.
pub trait Store: Send + Sync + Debug {
    /// A consistent view of the latest committed state, shared by the
    /// collection reads of one read transaction (one allocation each).
    fn snapshot(&self) -> Arc<dyn Snapshot + '_>;

    /// Creates column family `name`; fails with `ColumnFamilyExists` if it exists.
    fn create_cf(&self, name: &str) -> Result<()>;

    /// Drops column family `name` and all its keys; fails with `UnknownColumnFamily`.
    fn drop_cf(&self, name: &str) -> Result<()>;

    /// The column families, sorted by name.
    fn list_cfs(&self) -> Vec<String>;

    /// Whether the store holds keys outside its column families (RocksDB's
    /// default column family, which Slate never writes): another program's
    /// data, which [`Database::open`](crate::Database::open) refuses to
    /// adopt. None by default.
    fn holds_foreign_keys(&self) -> Result<bool> {
        Ok(false)
    }

    /// The lock that makes writers take turns. [`WriteTxn`] holds it for its
    /// life. [`Error::NestedWrite`](crate::Error::NestedWrite) on the thread
    /// that holds it.
    fn write_lock(&self) -> Result<WriteGuard<'_>>;

    /// Applies `batch` atomically as the next commit and returns its version.
    ///
    /// Low level: call it only while holding [`Store::write_lock`] (a
    /// [`WriteTxn`] does). `before_publish` runs with the new version after the
    /// batch is durable but before any snapshot can see it, so that state kept
    /// beside the store (the vector cache) becomes visible in the same instant.
    fn apply(&self, batch: Batch, before_publish: &mut dyn FnMut(u64)) -> Result<u64>;

    /// Starts the write transaction, waiting for the current one to finish.
    fn begin_write(&self) -> Result<WriteTxn<'_>>
    where
        Self: Sized,
    {
        WriteTxn::new(self)
    }
}

/// Starts a write transaction on a `dyn Store`.
pub fn begin_write(store: &dyn Store) -> Result<WriteTxn<'_>> {
    WriteTxn::new(store)
}

pub(crate) fn check_cf_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(crate::Error::InvalidColumnFamily {
            name: name.to_owned(),
            reason: "empty name",
        });
    }
    if name == rocksdb::DEFAULT_COLUMN_FAMILY_NAME {
        return Err(crate::Error::InvalidColumnFamily {
            name: name.to_owned(),
            reason: "reserved by RocksDB",
        });
    }
    Ok(())
}
