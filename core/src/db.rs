//! `Database`: collections over a [`Store`], their catalog and vector caches.
//!
//! Collection configurations live in the store's catalog column family, so a
//! reader always sees the configuration of its own snapshot (an index created
//! after the snapshot was taken is invisible to it, as are its entries). The
//! vector caches live beside the store and are updated in the instant a commit
//! is published (see [`Store::apply`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock, Weak};

use crate::catalog::{collection_cf, CollectionConfig, CATALOG_CF};
use crate::readers::{Readers, TrackedStore};
use crate::stamps::Stamps;
use crate::store::{begin_write, Direction, KeyRange, Store};
use crate::vectors::VectorSet;
use crate::{Error, ReadTxn, Result, WriteTxn};

/// A Slate database: named collections of BSON documents over one [`Store`].
pub struct Database {
    /// The store, wrapped so that its snapshots register in `readers`.
    pub(crate) store: Arc<dyn Store>,
    /// The store as given (its snapshots are not registered).
    pub(crate) untracked: Arc<dyn Store>,
    /// What every `Database` over the same store shares.
    pub(crate) shared: Arc<Shared>,
}

/// The vector caches of a database's collections, by collection name.
pub(crate) type VectorSets = RwLock<BTreeMap<String, Arc<VectorSet>>>;

/// The state every `Database` opened over one store shares, so that each
/// sees the others' writes: the catalog memo, the live readers (the vector
/// compaction floor), the recent commits per column family and the vector
/// caches, loaded once.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// Collection configurations known to be current at a catalog
    /// generation.
    pub(crate) catalog: CatalogMemo,
    /// Versions that live snapshots read at: vector compaction keeps them.
    pub(crate) readers: Arc<Readers>,
    /// Recent commit versions per column family: the version at which a
    /// collection last changed, as of a snapshot.
    pub(crate) stamps: Arc<Stamps>,
    /// Vector caches per collection. Changed only under the store's write lock.
    pub(crate) vectors: VectorSets,
    /// Caches of dropped collections, each with the version of its drop,
    /// kept while a snapshot older than the drop may read them.
    retired_vectors: Mutex<Vec<(String, Arc<VectorSet>, u64)>>,
    /// Whether `vectors` has been loaded from the store.
    loaded: Mutex<bool>,
    /// Why a commit's vector changes could not all be applied to the caches
    /// (a bug, or a cache past its row limit): the caches no longer match
    /// the documents, so writes are refused until the store is reopened
    /// (which rebuilds the caches from the stored vectors).
    vectors_failed: Mutex<Option<String>>,
}

impl Shared {
    /// The state of the store `store` points to: the one another `Database`
    /// over it holds, else a new one. A store outlives every `Database`
    /// holding it, so a live entry's address is that store's.
    fn of(store: &Arc<dyn Store>) -> Arc<Self> {
        type Registry = HashMap<usize, Weak<Shared>>;
        static SHARED: OnceLock<Mutex<Registry>> = OnceLock::new();
        let mut all = SHARED
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        all.retain(|_, shared| shared.strong_count() > 0);
        let at = Arc::as_ptr(store).cast::<()>() as usize;
        if let Some(shared) = all.get(&at).and_then(Weak::upgrade) {
            return shared;
        }
        let shared = Arc::new(Self::default());
        all.insert(at, Arc::downgrade(&shared));
        shared
    }
}

/// Spares a read transaction its catalog read. `done` counts the commits
/// that changed the catalog, `active` those under way: a catalog commit adds
/// to `active` before it commits, then (published, or failed) to `done`,
/// then takes itself off `active`. A snapshot taken between two reads that
/// each find no commit under way and the same `done` sees exactly the
/// catalog commits `done` counts: one counted was published before the first
/// read, and one it sees was counted before the second. So every snapshot
/// taken so at one `done` sees the same catalog, and a configuration read
/// from one of them serves the others without a catalog read. The counts
/// are the store's, not a `Database`'s: every `Database` opened over one
/// store shares them (see `Shared`).
#[derive(Debug, Default)]
pub(crate) struct CatalogMemo {
    done: AtomicU64,
    active: AtomicU64,
    /// Collection name → the generation it was read at, its configuration
    /// and its column family's name.
    known: RwLock<HashMap<String, Known>>,
}

/// A configuration read at a catalog generation, and its column family's name.
type Known = (u64, Arc<CollectionConfig>, Arc<str>);

/// Held across a commit that changes the catalog (see [`CatalogMemo`]).
struct CatalogWrite<'a>(&'a CatalogMemo);

impl Drop for CatalogWrite<'_> {
    fn drop(&mut self) {
        self.0.done.fetch_add(1, Ordering::SeqCst);
        self.0.active.fetch_sub(1, Ordering::SeqCst);
    }
}

impl CatalogMemo {
    /// Runs `commit`, counted as a catalog change under way while it runs
    /// (and done after it, published or failed) when it `changes` the
    /// catalog.
    pub(crate) fn commit<R>(&self, changes: bool, commit: impl FnOnce() -> R) -> R {
        let _under_way = changes.then(|| {
            self.active.fetch_add(1, Ordering::SeqCst);
            CatalogWrite(self)
        });
        commit()
    }

    /// Takes a snapshot with `take`, and the catalog generation it is known
    /// to read at (`None` when a catalog change was under way).
    pub(crate) fn snapshot<S>(&self, take: impl FnOnce() -> S) -> (S, Option<u64>) {
        let idle_before = self.active.load(Ordering::SeqCst) == 0;
        let before = self.done.load(Ordering::SeqCst);
        let snap = take();
        let idle_after = self.active.load(Ordering::SeqCst) == 0;
        let after = self.done.load(Ordering::SeqCst);
        (
            snap,
            (idle_before && idle_after && before == after).then_some(before),
        )
    }

    /// Collection `name`'s configuration and column family in `snap`, taken
    /// at catalog generation `gen`: remembered from another snapshot of the
    /// same generation, else read from `snap`'s catalog.
    pub(crate) fn collection(
        &self,
        snap: &dyn crate::store::Snapshot,
        name: &str,
        gen: Option<u64>,
    ) -> Result<(Arc<CollectionConfig>, Arc<str>)> {
        if let Some(gen) = gen {
            let known = self.known.read().unwrap_or_else(PoisonError::into_inner);
            if let Some((at, config, cf)) = known.get(name) {
                if *at == gen {
                    return Ok((Arc::clone(config), Arc::clone(cf)));
                }
            }
        }
        let (config, cf) = crate::read::read_collection(snap, name)?;
        if let Some(gen) = gen {
            self.known
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(name.to_owned(), (gen, Arc::clone(&config), Arc::clone(&cf)));
        }
        Ok((config, cf))
    }
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("store", &self.untracked)
            .finish()
    }
}

/// Refuses a store written in a newer format; records this build's format
/// in one that has none yet.
fn check_format(store: &dyn Store) -> Result<()> {
    use crate::catalog::{FORMAT, FORMAT_KEY, META_CF};
    if !store.list_cfs().iter().any(|c| c == META_CF) {
        store.create_cf(META_CF)?;
    }
    let found = store.snapshot().get(META_CF, FORMAT_KEY)?.map(|b| b.into_owned());
    match found {
        Some(bytes) => {
            let found = <[u8; 4]>::try_from(bytes.as_slice())
                .map(u32::from_le_bytes)
                .map_err(|_| Error::Corrupt {
                    what: format!("format version of {} bytes", bytes.len()),
                })?;
            if found > FORMAT {
                return Err(Error::UnsupportedFormat {
                    found,
                    supported: FORMAT,
                });
            }
            Ok(())
        }
        None => {
            let mut txn = begin_write(store)?;
            txn.put(META_CF, FORMAT_KEY.to_vec(), FORMAT.to_le_bytes().to_vec())?;
            txn.commit()?;
            Ok(())
        }
    }
}

impl Database {
    /// Opens the database kept in `store`: reads the catalog and loads every
    /// vector field's cache from its `v:` keys. Databases opened over the
    /// same `Arc` share what their readers know of the catalog, their live
    /// readers and their vector caches (loaded by the first), so each sees
    /// the others' writes; the catalog and the collections' column families
    /// are written through a `Database` only (its commits are recorded for
    /// what searches keep, see `Stamps`). The first open of a store takes its writer lock
    /// briefly (to finish a drop a crash cut short): not from a thread that
    /// holds it.
    pub fn open(store: Arc<dyn Store>) -> Result<Self> {
        let cfs = store.list_cfs();
        if !cfs.iter().any(|c| c == CATALOG_CF) {
            // Column families but no catalog: some other program's database,
            // which a catalog written into it would only damage.
            if let Some(other) = cfs.first() {
                return Err(Error::NotSlate {
                    reason: format!("it holds column family {other:?} and no Slate catalog"),
                });
            }
            // Keys in RocksDB's default column family (where a plain
            // `DB::open` keeps them): the same.
            if store.holds_foreign_keys()? {
                return Err(Error::NotSlate {
                    reason: "its default column family holds keys and there is no Slate catalog".into(),
                });
            }
            store.create_cf(CATALOG_CF)?;
        }
        check_format(store.as_ref())?;
        let shared = Shared::of(&store);
        // Before any commit through this database (the first one's start
        // holds for every later one over the store).
        shared.stamps.begin(store.snapshot().version());
        let db = Self {
            store: Arc::new(TrackedStore::new(
                Arc::clone(&store),
                Arc::clone(&shared.readers),
                Arc::clone(&shared.stamps),
            )),
            untracked: store,
            shared: Arc::clone(&shared),
        };
        // Loaded once per store: another `Database` over it has them already
        // (and keeps them current).
        let mut loaded = shared.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        if *loaded {
            return Ok(db);
        }
        db.finish_drops()?;
        let snap = db.store.snapshot();
        let mut vectors = BTreeMap::new();
        for entry in snap.range(CATALOG_CF, &KeyRange::all(), Direction::Forward)? {
            let (name, bytes) = entry?;
            let name = String::from_utf8_lossy(&name).into_owned();
            let config = CollectionConfig::from_bytes(&name, &bytes)?;
            let set = VectorSet::load(&config, snap.as_ref())?;
            vectors.insert(name, Arc::new(set));
        }
        drop(snap);
        *db.shared.vectors.write().unwrap_or_else(|e| e.into_inner()) = vectors;
        *loaded = true;
        drop(loaded);
        Ok(db)
    }

    /// Removes from the catalog each collection whose column family is gone:
    /// a drop the store finished while the catalog's commit was lost (a crash
    /// of a store that does not sync its log). The drop is completed rather
    /// than leaving a collection no read or write can use. And drops each
    /// collection column family the catalog does not name: a drop whose
    /// commit was made but whose column family a crash kept (or a create cut
    /// short before its commit), holding nothing reachable but its bytes.
    fn finish_drops(&self) -> Result<()> {
        let cfs = self.store.list_cfs();
        let mut txn = begin_write(self.store.as_ref())?;
        let names: Vec<Vec<u8>> = txn
            .range(CATALOG_CF, &KeyRange::all(), Direction::Forward)?
            .map(|e| e.map(|(k, _)| k.into_owned()))
            .collect::<Result<_>>()?;
        let named: std::collections::HashSet<String> = names
            .iter()
            .map(|n| collection_cf(&String::from_utf8_lossy(n)))
            .collect();
        let mut gone = false;
        for name in names {
            let shown = String::from_utf8_lossy(&name).into_owned();
            if !cfs.contains(&collection_cf(&shown)) {
                log::warn!("collection {shown:?} has no column family (a drop cut short): dropping it");
                txn.delete(CATALOG_CF, name)?;
                gone = true;
            }
        }
        if gone {
            self.shared.catalog.commit(true, || txn.commit())?;
        } else {
            drop(txn);
        }
        let prefix = collection_cf("");
        for cf in cfs
            .iter()
            .filter(|cf| cf.starts_with(&prefix) && !named.contains(*cf))
        {
            log::warn!("column family {cf:?} belongs to no collection (a drop cut short): dropping it");
            // Nothing reachable is lost if it stays: the database opens
            // either way, and the next create of the name drops it.
            if let Err(e) = self.store.drop_cf(cf) {
                log::warn!("dropping column family {cf:?} failed: {e}");
            }
        }
        Ok(())
    }

    /// The store underneath.
    pub fn store(&self) -> &dyn Store {
        self.store.as_ref()
    }

    /// Creates a collection; fails with `CollectionExists` if the name is taken.
    pub fn create_collection(&self, config: CollectionConfig) -> Result<()> {
        let mut txn = self.begin_write()?;
        txn.create_collection(config)?;
        txn.commit()?;
        Ok(())
    }

    /// Sets up the vector caches of collection `config`, created by the
    /// commit at `version` (inside its publication, before its vectors
    /// are applied).
    pub(crate) fn add_vector_set(&self, config: &CollectionConfig, version: u64) {
        let set = Arc::new(VectorSet::new(config, version));
        self.shared
            .vectors
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(config.name.clone(), set);
    }

    /// Drops a collection with all its documents, indexes and vectors.
    pub fn drop_collection(&self, name: &str) -> Result<()> {
        let mut txn = self.begin_store_write()?;
        if txn.get(CATALOG_CF, name.as_bytes())?.is_none() {
            return Err(Error::UnknownCollection {
                name: name.to_owned(),
            });
        }
        txn.delete(CATALOG_CF, name.as_bytes())?;
        let (_, _writer) = self.shared.catalog.commit(true, || {
            txn.commit_holding(|version| {
                let mut live = self.shared.vectors.write().unwrap_or_else(|e| e.into_inner());
                // Retired before it leaves the live map (under its lock), so
                // that a snapshot from before the drop always finds it in
                // one or the other.
                if let Some(set) = live.get(name) {
                    self.retired_vectors()
                        .push((name.to_owned(), Arc::clone(set), version));
                }
                live.remove(name);
            })
        })?;
        self.let_go_retired_vectors();
        // Still the only writer: a create_collection of the same name waits
        // for the drop instead of having its new column family dropped.
        // The drop is committed: a column family that will not go now holds
        // nothing reachable, and the next create of the name removes it, so
        // the drop reports success.
        if let Err(e) = self.store.drop_cf(&collection_cf(name)) {
            log::warn!(
                "collection {name:?} dropped; freeing its storage failed ({e}), retried at its next create"
            );
        }
        Ok(())
    }

    /// The names of the collections, sorted.
    pub fn list_collections(&self) -> Result<Vec<String>> {
        let snap = self.store.snapshot();
        let names = snap
            .range(CATALOG_CF, &KeyRange::all(), Direction::Forward)?
            .map(|e| e.map(|(k, _)| String::from_utf8_lossy(&k).into_owned()))
            .collect();
        names
    }

    /// The configuration of collection `name` as of now.
    pub fn collection_config(&self, name: &str) -> Result<CollectionConfig> {
        self.read().config(name)
    }

    /// A read transaction on a snapshot of the current state.
    pub fn read(&self) -> ReadTxn<'_> {
        ReadTxn::new(self)
    }

    /// A read transaction for reading documents by id or key, nothing else:
    /// cheaper to take than [`Database::read`] (its snapshot is not
    /// registered with the vector compaction floor, two lock round trips per
    /// read saved), so its collection handles carry no vector caches:
    /// [`CollectionRead::vectors`](crate::CollectionRead::vectors) fails on
    /// them. Documents still come back with their stored vectors attached.
    pub fn read_documents(&self) -> ReadTxn<'_> {
        ReadTxn::documents_only(self)
    }

    /// The write transaction, waiting for the previous one to finish.
    pub fn begin_write(&self) -> Result<WriteTxn<'_>> {
        WriteTxn::new(self)
    }

    /// The store's write transaction for a write of this database: taken,
    /// then refused ([`Error::Poisoned`]) if a commit failed to update the
    /// vector caches, checked holding the writers' turn so that a failure
    /// is recorded before the next writer looks.
    pub(crate) fn begin_store_write(&self) -> Result<crate::store::WriteTxn<'_>> {
        let txn = begin_write(self.store.as_ref())?;
        self.check_vectors()?;
        Ok(txn)
    }

    /// [`Error::Poisoned`] once a commit failed to update the vector caches.
    fn check_vectors(&self) -> Result<()> {
        match &*self
            .shared
            .vectors_failed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
        {
            Some(cause) => Err(Error::Poisoned { cause: cause.clone() }),
            None => Ok(()),
        }
    }

    /// Records that the caches no longer match the documents; returns the
    /// error the failed commit reports.
    pub(crate) fn vectors_failed(&self, cause: String) -> Error {
        *self
            .shared
            .vectors_failed
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(cause.clone());
        Error::Poisoned { cause }
    }

    /// Drops the retired caches that no live snapshot predates. Runs at
    /// each drop and each write transaction's start (not on reads, which
    /// are hot), so a dropped collection's vectors are freed by the next
    /// write after its last older read ends.
    pub(crate) fn let_go_retired_vectors(&self) {
        let mut retired = self.retired_vectors();
        if retired.is_empty() {
            return;
        }
        let floor = self.shared.readers.floor(self.untracked.as_ref());
        retired.retain(|&(_, _, died)| died > floor);
    }

    fn retired_vectors(&self) -> std::sync::MutexGuard<'_, Vec<(String, Arc<VectorSet>, u64)>> {
        self.shared
            .retired_vectors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The vector caches of collection `name` as a snapshot at `version`
    /// sees them: the live ones if born by then, else those of the
    /// collection of that name dropped after `version`.
    pub(crate) fn vector_set_at(&self, name: &str, version: u64) -> Option<Arc<VectorSet>> {
        if let Some(set) = self.vector_set(name).filter(|set| set.born <= version) {
            return Some(set);
        }
        self.retired_vectors()
            .iter()
            .find(|(n, set, died)| n == name && set.born <= version && version < *died)
            .map(|(_, set, _)| Arc::clone(set))
    }

    pub(crate) fn vector_set(&self, name: &str) -> Option<Arc<VectorSet>> {
        self.shared
            .vectors
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use super::*;
    use crate::store::MemoryStore;

    /// Readers racing two writers that change two collections' indexes
    /// (catalog commits overlapping): every configuration a reader gets, from
    /// the memo or not, is the one its own snapshot's catalog holds.
    #[test]
    fn racing_readers_get_their_snapshots_catalog() {
        let db = Database::open(Arc::new(MemoryStore::new())).expect("open");
        for name in ["c0", "c1"] {
            db.create_collection(CollectionConfig::new(name)).expect("create");
        }
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            for name in ["c0", "c1"] {
                let (db, stop) = (&db, &stop);
                s.spawn(move || {
                    for i in 0..1000 {
                        let mut txn = db.begin_write().expect("txn");
                        if i % 2 == 0 {
                            txn.create_index(name, "f").expect("index");
                        } else {
                            txn.drop_index(name, "f").expect("drop");
                        }
                        txn.commit().expect("commit");
                    }
                    stop.store(true, Ordering::SeqCst);
                });
            }
            let mut reads = 0;
            while !stop.load(Ordering::SeqCst) || reads < 100 {
                let txn = db.read();
                for name in ["c0", "c1"] {
                    let got = txn.collection(name).expect("collection").config().indexes.clone();
                    let bytes = txn
                        .snapshot()
                        .get(CATALOG_CF, name.as_bytes())
                        .expect("get")
                        .expect("entry");
                    let own = CollectionConfig::from_bytes(name, &bytes).expect("config");
                    assert_eq!(got, own.indexes, "{name} at version {}", txn.version());
                }
                reads += 1;
            }
        });
    }

    /// A read begun before a drop searches the dropped collection's vectors
    /// (it reads its documents too); one begun after a re-create does not
    /// see them, and they are let go by the first write after the last
    /// older read ends.
    #[test]
    fn a_read_from_before_a_drop_still_searches_its_vectors() {
        let db = Database::open(Arc::new(MemoryStore::new())).expect("open");
        let config = CollectionConfig::new("c").vector("v", 2, crate::Metric::L2);
        db.create_collection(config.clone()).expect("create");
        let mut txn = db.begin_write().expect("txn");
        for i in 0..5 {
            txn.insert("c", bson::doc! { "_id": i, "v": [f64::from(i), 0.0] })
                .expect("insert");
        }
        txn.commit().expect("commit");
        let before = db.read();
        db.drop_collection("c").expect("drop");
        db.create_collection(config).expect("re-create");
        let hits = |read: &crate::read::ReadTxn<'_>| -> Result<usize> {
            Ok(read
                .collection("c")?
                .vectors("v")?
                .search(&[0.0, 0.0], 3, 1)
                .expect("search")
                .len())
        };
        assert_eq!(hits(&before).expect("the old read searches"), 3);
        let after = db.read();
        assert_eq!(hits(&after).expect("the new collection"), 0);
        assert_eq!(db.retired_vectors().len(), 1);
        drop(after);
        // Kept while the older read lives, let go by the next write after.
        drop(db.begin_write().expect("txn"));
        assert_eq!(db.retired_vectors().len(), 1);
        drop(before);
        drop(db.begin_write().expect("txn"));
        assert_eq!(db.retired_vectors().len(), 0, "no live read predates the drop");
    }

    /// A commit whose vectors did not reach the caches says so, and the
    /// database takes no further write (its caches no longer match).
    #[test]
    fn a_commit_whose_vectors_miss_the_caches_fails_and_refuses_writes() {
        let db = Database::open(Arc::new(MemoryStore::new())).expect("open");
        db.create_collection(CollectionConfig::new("c").vector("v", 2, crate::Metric::L2))
            .expect("create");
        let mut txn = db.begin_write().expect("txn");
        txn.insert("c", bson::doc! { "_id": 1, "v": [1.0, 2.0] })
            .expect("insert");
        crate::vectors::FAIL_VECTOR_OPS.with(|f| f.set(true));
        let err = txn.commit().expect_err("the commit reports the failure");
        assert!(
            matches!(&err, Error::Poisoned { cause } if cause.contains("reopen")),
            "{err}"
        );
        for refused in [
            db.begin_write().map(|_| ()),
            db.create_collection(CollectionConfig::new("d")),
            db.drop_collection("c"),
        ] {
            assert!(matches!(refused, Err(Error::Poisoned { .. })), "{refused:?}");
        }
        // Reads go on.
        assert!(db.read().collection("c").is_ok());
    }
}
