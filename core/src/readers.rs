//! The versions that snapshots still read at, so that vector compaction keeps
//! every row some reader may ask for.
//!
//! [`Database`](crate::Database) wraps its store in a [`TrackedStore`]:
//! every snapshot it hands out (a `ReadTxn`'s, a write transaction's base)
//! registers its version until dropped. A `ReadTxn` takes its vector views
//! lazily, at its snapshot's version, possibly long after it began; the
//! registry is what tells compaction that the version is still needed.
//!
//! Every [`Store`] and [`Snapshot`] method is forwarded, provided ones
//! included, so a backend's specialised version (`multi_get`, `prefix`)
//! still runs: a method added to either trait must be forwarded here too.
//!
//! Invariant: [`Readers::floor`] never exceeds the version of a snapshot
//! that is alive or that will be taken later. Registration takes the inner
//! snapshot under the registry lock, so a snapshot not yet registered when
//! the floor is read will see a version at least the store's version then.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::stamps::Stamps;
use crate::store::{Batch, Direction, EntryIter, KeyRange, Snapshot, Store, Visitor, WriteGuard};
use crate::Result;

/// Live snapshot versions, with how many snapshots read at each.
#[derive(Debug, Default)]
pub(crate) struct Readers {
    live: Mutex<BTreeMap<u64, usize>>,
}

impl Readers {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<u64, usize>> {
        // The map is updated in single statements: a panic cannot leave it torn.
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The oldest version any snapshot of `store` reads at, now or later:
    /// the oldest live one, or the store's current version if none is live.
    pub(crate) fn floor(&self, store: &dyn Store) -> u64 {
        let live = self.lock();
        match live.keys().next() {
            Some(&oldest) => oldest,
            // Taken under the lock: a snapshot registering after this reads
            // at this version or a later one.
            None => store.snapshot().version(),
        }
    }

    /// Number of live snapshots (for tests and debugging).
    #[cfg(test)]
    pub(crate) fn count(&self) -> usize {
        self.lock().values().sum()
    }

    fn release(&self, version: u64) {
        let mut live = self.lock();
        if let Some(n) = live.get_mut(&version) {
            *n -= 1;
            if *n == 0 {
                live.remove(&version);
            }
        }
    }
}

/// A store whose snapshots register their version in [`Readers`].
#[derive(Debug)]
pub(crate) struct TrackedStore {
    inner: Arc<dyn Store>,
    readers: Arc<Readers>,
    /// Where each commit's column families are recorded with its version.
    stamps: Arc<Stamps>,
}

impl TrackedStore {
    pub(crate) fn new(inner: Arc<dyn Store>, readers: Arc<Readers>, stamps: Arc<Stamps>) -> Self {
        Self {
            inner,
            readers,
            stamps,
        }
    }
}

impl Store for TrackedStore {
    fn snapshot(&self) -> Arc<dyn Snapshot + '_> {
        let mut live = self.readers.lock();
        let inner = self.inner.snapshot();
        let version = inner.version();
        *live.entry(version).or_insert(0) += 1;
        drop(live);
        Arc::new(TrackedSnapshot {
            inner,
            readers: &self.readers,
            version,
        })
    }

    fn create_cf(&self, name: &str) -> Result<()> {
        self.inner.create_cf(name)
    }

    fn drop_cf(&self, name: &str) -> Result<()> {
        self.stamps.forget_keys(name);
        self.inner.drop_cf(name)
    }

    fn list_cfs(&self) -> Vec<String> {
        self.inner.list_cfs()
    }

    fn holds_foreign_keys(&self) -> Result<bool> {
        self.inner.holds_foreign_keys()
    }

    fn write_lock(&self) -> Result<WriteGuard<'_>> {
        self.inner.write_lock()
    }

    /// Records the batch's column families (and keys) at its version before
    /// the version is published (see [`Stamps`]).
    fn apply(&self, batch: Batch, before_publish: &mut dyn FnMut(u64)) -> Result<u64> {
        let keys = Stamps::keys_of(&batch);
        self.inner.apply(batch, &mut |version| {
            self.stamps.record(&keys, version);
            before_publish(version);
        })
    }
}

#[cfg(test)]
impl TrackedStore {
    /// The wrapped store, whose snapshots are not registered: what
    /// [`Readers::floor`] takes (it holds the registry lock, so a tracked
    /// snapshot there would wait for itself).
    pub(crate) fn inner(&self) -> &dyn Store {
        self.inner.as_ref()
    }
}

/// A snapshot that unregisters its version when dropped.
struct TrackedSnapshot<'a> {
    inner: Arc<dyn Snapshot + 'a>,
    readers: &'a Readers,
    version: u64,
}

impl Drop for TrackedSnapshot<'_> {
    fn drop(&mut self) {
        self.readers.release(self.version);
    }
}

impl Snapshot for TrackedSnapshot<'_> {
    fn version(&self) -> u64 {
        self.version
    }

    fn get(&self, cf: &str, key: &[u8]) -> Result<Option<Cow<'_, [u8]>>> {
        self.inner.get(cf, key)
    }

    fn multi_get(&self, cf: &str, keys: &[&[u8]]) -> Result<Vec<Option<Cow<'_, [u8]>>>> {
        self.inner.multi_get(cf, keys)
    }

    fn range(&self, cf: &str, range: &KeyRange, dir: Direction) -> Result<EntryIter<'_>> {
        self.inner.range(cf, range, dir)
    }

    fn prefix(&self, cf: &str, prefix: &[u8], dir: Direction) -> Result<EntryIter<'_>> {
        self.inner.prefix(cf, prefix, dir)
    }

    fn count_range(&self, cf: &str, range: &KeyRange, cap: usize) -> Result<usize> {
        self.inner.count_range(cf, range, cap)
    }

    fn visit(&self, cf: &str, range: &KeyRange, f: &mut Visitor<'_>) -> Result<()> {
        self.inner.visit(cf, range, f)
    }

    fn any_in(&self, cf: &str, range: &KeyRange) -> Result<Option<bool>> {
        self.inner.any_in(cf, range)
    }

    fn has_cf(&self, cf: &str) -> bool {
        self.inner.has_cf(cf)
    }

    fn on_disk(&self) -> bool {
        self.inner.on_disk()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{begin_write, MemoryStore};

    #[test]
    fn snapshots_register_until_dropped_and_floor_follows_the_oldest() {
        let readers = Arc::new(Readers::default());
        let store = TrackedStore::new(Arc::new(MemoryStore::new()), Arc::clone(&readers), Arc::default());
        store.create_cf("c").expect("cf");
        let commit = |v: u8| {
            let mut txn = begin_write(&store).expect("txn");
            txn.put("c", vec![v], vec![v]).expect("put");
            txn.commit().expect("commit")
        };
        assert_eq!(commit(1), 1);
        assert_eq!(readers.floor(store.inner()), 1);
        let old = store.snapshot();
        let also_old = store.snapshot();
        commit(2);
        commit(3);
        let new = store.snapshot();
        assert_eq!(readers.count(), 3);
        assert_eq!(readers.floor(store.inner()), 1);
        drop(old);
        assert_eq!(readers.floor(store.inner()), 1);
        drop(also_old);
        assert_eq!(readers.floor(store.inner()), 3);
        drop(new);
        assert_eq!(readers.count(), 0);
        commit(4);
        assert_eq!(readers.floor(store.inner()), 4);
    }
}
