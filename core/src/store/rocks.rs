//! `RocksStore`: the [`Store`] on RocksDB, one column family per name.
//!
//! A commit is one `WriteBatch` across column families (atomic in RocksDB).
//! Snapshots are RocksDB snapshots; the commit version beside them is kept in
//! a sequence lock so that a snapshot and its version always agree.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use rocksdb::{
    BlockBasedOptions, BoundColumnFamily, Cache, ColumnFamilyDescriptor, DBCompressionType,
    DBRawIteratorWithThreadMode, IteratorMode, MultiThreaded, Options, ReadOptions, WriteBatch, WriteOptions,
};

use super::{
    check_cf_name, Batch, Direction, EntryIter, KeyRange, Op, Snapshot, Store, Visitor, WriteGuard,
    WriterGate,
};
use crate::{Error, Result};

type Db = rocksdb::DBWithThreadMode<MultiThreaded>;

/// A column family handle. RocksDB keeps a dropped column family readable
/// while any handle to it lives, so a snapshot that holds the handles of its
/// moment reads a collection dropped (or dropped and re-created) since.
/// `'static` stands for the store's lifetime: see [`RocksStore::handles`].
type Handle = Arc<BoundColumnFamily<'static>>;

/// The handle of every column family, by name (in name order, as
/// `list_cfs` gives them).
type Handles = BTreeMap<String, Handle>;

/// Options for opening a [`RocksStore`]; each setter states its default.
#[derive(Debug, Clone)]
#[must_use]
pub struct RocksStoreBuilder {
    path: PathBuf,
    sync: bool,
    block_cache_bytes: usize,
    create_if_missing: bool,
}

impl RocksStoreBuilder {
    /// Whether every commit waits for its write-ahead-log record to reach the
    /// disk (`fsync`) before it returns. Default `true`: an acknowledged commit
    /// survives a power loss. With `false`, a commit survives a crash of the
    /// process but the last commits may be lost if the machine itself fails.
    pub fn sync(mut self, sync: bool) -> Self {
        self.sync = sync;
        self
    }

    /// Size of the cache of uncompressed blocks shared by every column
    /// family (RocksDB's HyperClockCache). Default 64 MiB; 0 turns the
    /// block cache off (every read decompresses its blocks again).
    pub fn block_cache_bytes(mut self, bytes: usize) -> Self {
        self.block_cache_bytes = bytes;
        self
    }

    /// Whether to create the database when the directory holds none. Default `true`.
    pub fn create_if_missing(mut self, create: bool) -> Self {
        self.create_if_missing = create;
        self
    }

    /// Opens the store, with every column family it already has.
    pub fn open(self) -> Result<RocksStore> {
        // HyperClockCache, which RocksDB now recommends over its LRU cache:
        // a lookup takes no lock. With the LRU cache (four shards, each
        // under a mutex) two threads scanning one collection spent about a
        // fifth of their time in its lookups, much of it waiting on each
        // other in futex calls; with it, the documents bench's RocksStore
        // scans take 0.67-0.92x their time (BENCHMARKS.md, "RocksDB's block
        // cache without a lock"; single gets are unchanged, which is all an
        // earlier trial of it found).
        //
        // Its shards are at least 32 MiB (two at the default size; one shard
        // of the whole cache below 64 MiB), not the LRU cache's default of 64
        // shards of 1 MiB: a file flushed from one large commit (100,000
        // documents with 384-d vectors make one of about 200 MB) has an index
        // block of megabytes, which fit no 1 MiB shard, so every get read and
        // decompressed it again (about 130 µs a document, where a get from
        // the write buffer takes 0.5 µs). A partitioned index fixes that too,
        // and for larger files, but made single gets from small files 20%
        // slower; an index block larger than a shard (a file of about 4 GB at
        // the default size) is still read on each get. (A cache of 0 bytes
        // would abort the process: RocksDB cannot map its empty table.)
        let cache =
            (self.block_cache_bytes > 0).then(|| Cache::new_hyper_clock_cache(self.block_cache_bytes, 0));
        let mut table = BlockBasedOptions::default();
        table.set_bloom_filter(10.0, false);
        match &cache {
            Some(cache) => {
                table.set_block_cache(cache);
                table.set_cache_index_and_filter_blocks(true);
                // Level 0's index and filter blocks (every file a point read
                // may consult) stay pinned in the cache: no cache lookup for
                // them on each get.
                table.set_pin_l0_filter_and_index_blocks_in_cache(true);
            }
            // Each open file then holds its own index and filter blocks.
            None => table.disable_cache(),
        }
        let mut cf_opts = Options::default();
        cf_opts.set_block_based_table_factory(&table);
        cf_opts.set_compression_type(DBCompressionType::Lz4);

        let mut db_opts = cf_opts.clone();
        db_opts.create_if_missing(self.create_if_missing);
        db_opts.create_missing_column_families(true);
        db_opts.set_max_background_jobs(2);

        // RocksDB makes the directory and its LOCK file before it finds
        // no database there: without `create_if_missing`, nothing is written.
        let exists = self.path.join("CURRENT").exists();
        if !self.create_if_missing && !exists {
            return Err(Error::Io {
                path: self.path.display().to_string(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "no database here"),
            });
        }
        let existing = if exists {
            Db::list_cf(&db_opts, &self.path)?
        } else {
            Vec::new()
        };
        let names: BTreeSet<String> = existing
            .into_iter()
            .filter(|n| n != rocksdb::DEFAULT_COLUMN_FAMILY_NAME)
            .collect();
        let descriptors = names
            .iter()
            .map(|n| ColumnFamilyDescriptor::new(n, cf_opts.clone()));
        let db = Db::open_cf_descriptors(&db_opts, &self.path, descriptors)?;
        let mut write_opts = WriteOptions::default();
        write_opts.set_sync(self.sync);
        let handles: Handles = names
            .iter()
            .filter_map(|n| Some((n.clone(), unbind(db.cf_handle(n)?))))
            .collect();
        Ok(RocksStore {
            handles: ArcSwap::from_pointee(handles),
            db,
            path: self.path,
            cf_opts,
            write_opts,
            sync: self.sync,
            changing: Mutex::new(()),
            seq: AtomicU64::new(0),
            writer: WriterGate::new(),
            poisoned: Mutex::new(None),
            _cache: cache,
        })
    }
}

/// A [`Store`] on RocksDB. See [`RocksStore::builder`].
pub struct RocksStore {
    /// Every column family's handle (the store's list of them), swapped
    /// whole when one is created or dropped, and held by each snapshot taken
    /// meanwhile. Declared before
    /// `db`, so the store drops its handles before it closes the database;
    /// a snapshot borrows the store, so it drops its own earlier still:
    /// no handle outlives the database, which is what `'static` in
    /// [`Handle`] stands for.
    handles: ArcSwap<Handles>,
    db: Db,
    path: PathBuf,
    cf_opts: Options,
    write_opts: WriteOptions,
    sync: bool,
    /// Held while a column family is created or dropped: one at a time.
    changing: Mutex<()>,
    /// Sequence lock over the commit version: `2 * version`, plus one while a
    /// commit is being written. Versions count commits since this handle opened.
    seq: AtomicU64,
    writer: WriterGate,
    poisoned: Mutex<Option<String>>,
    _cache: Option<Cache>,
}

impl std::fmt::Debug for RocksStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RocksStore")
            .field("path", &self.path)
            .field("sync", &self.sync)
            .field("version", &(self.seq.load(Ordering::SeqCst) / 2))
            .finish()
    }
}

impl RocksStore {
    /// A builder for the store in directory `path`.
    pub fn builder(path: impl AsRef<Path>) -> RocksStoreBuilder {
        RocksStoreBuilder {
            path: path.as_ref().to_path_buf(),
            sync: true,
            block_cache_bytes: 64 << 20,
            create_if_missing: true,
        }
    }

    /// Opens (or creates) the store in `path` with the default options.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::builder(path).open()
    }

    /// The directory of the store.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether commits are synced to disk before they return.
    pub fn is_sync(&self) -> bool {
        self.sync
    }

    /// Writes every column family's memtable to SST files.
    pub fn flush(&self) -> Result<()> {
        for cf in self.handles.load().values() {
            self.db.flush_cf(cf)?;
        }
        Ok(())
    }

    fn cf(&self, name: &str) -> Result<Arc<BoundColumnFamily<'_>>> {
        self.db.cf_handle(name).ok_or_else(|| Error::UnknownColumnFamily {
            name: name.to_owned(),
        })
    }

    fn check_poisoned(&self) -> Result<()> {
        match &*self.poisoned.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(cause) => Err(Error::Poisoned { cause: cause.clone() }),
            None => Ok(()),
        }
    }

    /// Replaces the handle map by a changed copy (snapshots keep the old
    /// one); under `changing`.
    fn change_handles(&self, change: impl FnOnce(&mut Handles)) {
        let mut handles = Handles::clone(&self.handles.load());
        change(&mut handles);
        self.handles.store(Arc::new(handles));
    }

    /// `batch` as RocksDB's write batch; reads (the end of an open range)
    /// but writes nothing.
    fn build_batch(&self, batch: &Batch) -> Result<WriteBatch> {
        let mut wb = WriteBatch::default();
        for (cf_name, ops) in &batch.ops {
            let cf = self.cf(cf_name)?;
            for op in ops {
                match op {
                    Op::Put { key, value } => wb.put_cf(&cf, key, value),
                    Op::Delete { key } => wb.delete_cf(&cf, key),
                    Op::DeleteRange { start, end } => {
                        let end = match end {
                            Some(end) => end.clone(),
                            None => match last_key(&self.db, &cf)? {
                                // One past the last key: the smallest key above it.
                                Some(mut last) => {
                                    last.push(0);
                                    last
                                }
                                None => continue,
                            },
                        };
                        if start.as_slice() < end.as_slice() {
                            wb.delete_range_cf(&cf, start, &end);
                        }
                    }
                }
            }
        }
        Ok(wb)
    }

    /// Writes `wb`, then frees `batch`: RocksDB has copied every key and
    /// value, so a large batch's are freed on a rayon thread and the commit
    /// goes on without waiting for it.
    fn write_built(&self, wb: WriteBatch, batch: Batch) -> Result<()> {
        self.db.write_opt(wb, &self.write_opts)?;
        if batch.ops.iter().map(|(_, ops)| ops.len()).sum::<usize>() >= BACKGROUND_DROP_OPS {
            rayon::spawn(move || drop(batch));
        }
        Ok(())
    }
}

/// `handle` with its lifetime extended to `'static`.
fn unbind(handle: Arc<BoundColumnFamily<'_>>) -> Handle {
    // SAFETY: only the lifetime changes. Every `Handle` lives in
    // `RocksStore::handles` or in a snapshot that borrows the store, and the
    // store drops `handles` before `db` (field order), so none is used or
    // dropped after the database closes.
    #[allow(unsafe_code)]
    unsafe {
        std::mem::transmute::<Arc<BoundColumnFamily<'_>>, Handle>(handle)
    }
}

/// Fewest ops in a batch that [`RocksStore`] frees on another thread.
const BACKGROUND_DROP_OPS: usize = 4096;

fn last_key(db: &Db, cf: &Arc<BoundColumnFamily<'_>>) -> Result<Option<Vec<u8>>> {
    match db.iterator_cf(cf, IteratorMode::End).next() {
        Some(item) => Ok(Some(item?.0.into_vec())),
        None => Ok(None),
    }
}

impl Store for RocksStore {
    fn snapshot(&self) -> Arc<dyn Snapshot + '_> {
        loop {
            let before = self.seq.load(Ordering::SeqCst);
            if before % 2 == 1 {
                std::thread::yield_now();
                continue;
            }
            // After `before`: a column family dropped since is unlinked by
            // a commit first, which the check below would see.
            let handles = self.handles.load_full();
            let snap = self.db.snapshot();
            if self.seq.load(Ordering::SeqCst) == before {
                return Arc::new(RocksSnapshot {
                    store: self,
                    handles,
                    snap,
                    version: before / 2,
                });
            }
        }
    }

    fn create_cf(&self, name: &str) -> Result<()> {
        check_cf_name(name)?;
        // A poisoned handle changes nothing on disk, column families included.
        self.check_poisoned()?;
        let _changing = self.changing.lock().unwrap_or_else(|e| e.into_inner());
        if self.handles.load().contains_key(name) {
            return Err(Error::ColumnFamilyExists {
                name: name.to_owned(),
            });
        }
        self.db.create_cf(name, &self.cf_opts)?;
        let handle = unbind(self.cf(name)?);
        self.change_handles(|handles| {
            handles.insert(name.to_owned(), handle);
        });
        Ok(())
    }

    fn drop_cf(&self, name: &str) -> Result<()> {
        self.check_poisoned()?;
        let _changing = self.changing.lock().unwrap_or_else(|e| e.into_inner());
        if !self.handles.load().contains_key(name) {
            return Err(Error::UnknownColumnFamily {
                name: name.to_owned(),
            });
        }
        // Dropping a column family is written to the manifest at once, and
        // the commit that unlinked it (say, from the catalog) may still sit
        // in an unsynced log: sync the log first, so that a crash cannot keep
        // the drop and lose that commit.
        if !self.sync {
            self.db.flush_wal(true)?;
        }
        self.db.drop_cf(name)?;
        self.change_handles(|handles| {
            handles.remove(name);
        });
        Ok(())
    }

    fn list_cfs(&self) -> Vec<String> {
        self.handles.load().keys().cloned().collect()
    }

    fn holds_foreign_keys(&self) -> Result<bool> {
        let mut iter = self.db.raw_iterator();
        iter.seek_to_first();
        let any = iter.valid();
        iter.status()?;
        Ok(any)
    }

    fn write_lock(&self) -> Result<WriteGuard<'_>> {
        self.writer.acquire()
    }

    fn apply(&self, batch: Batch, before_publish: &mut dyn FnMut(u64)) -> Result<u64> {
        self.check_poisoned()?;
        let seq = self.seq.load(Ordering::SeqCst);
        debug_assert!(seq.is_multiple_of(2), "apply without the write lock");
        let version = seq / 2 + 1;
        // Building the batch reads but writes nothing: its errors (an
        // unknown column family, a failed read) leave the store as it was.
        let wb = self.build_batch(&batch)?;
        self.seq.store(seq + 1, Ordering::SeqCst);
        match self.write_built(wb, batch) {
            Ok(()) => {
                // Published even if `before_publish` panics (the batch is
                // written), so that no snapshot waits on an odd sequence
                // forever; the store is then poisoned, as what the caller
                // keeps beside it (vector caches) may lag the batch.
                let _publish = Publish { store: self, version };
                before_publish(version);
                Ok(version)
            }
            Err(e) => {
                // RocksDB's write may have reached the disk in part.
                *self.poisoned.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                self.seq.store(seq, Ordering::SeqCst);
                Err(e)
            }
        }
    }
}

/// Publishes a written batch's version when dropped (see `apply`).
struct Publish<'a> {
    store: &'a RocksStore,
    version: u64,
}

impl Drop for Publish<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            *self.store.poisoned.lock().unwrap_or_else(|p| p.into_inner()) = Some(format!(
                "a commit's publication panicked at version {}",
                self.version
            ));
        }
        self.store.seq.store(self.version * 2, Ordering::SeqCst);
    }
}

struct RocksSnapshot<'a> {
    store: &'a RocksStore,
    /// The column families of this snapshot's moment, kept readable.
    handles: Arc<Handles>,
    snap: rocksdb::SnapshotWithThreadMode<'a, Db>,
    version: u64,
}

impl RocksSnapshot<'_> {
    fn cf(&self, name: &str) -> Result<&Handle> {
        self.handles.get(name).ok_or_else(|| Error::UnknownColumnFamily {
            name: name.to_owned(),
        })
    }

    fn read_opts(&self) -> ReadOptions {
        let mut opts = ReadOptions::default();
        opts.set_snapshot(&self.snap);
        opts
    }

    /// A raw iterator bounded above by `range`'s end, at its first entry;
    /// with `max_hidden`, one that stops (status `Incomplete`) after stepping
    /// over that many deleted or older entries at once.
    fn seek(
        &self,
        handle: &Handle,
        range: &KeyRange,
        max_hidden: Option<u64>,
    ) -> DBRawIteratorWithThreadMode<'_, Db> {
        let mut opts = self.read_opts();
        if let Some(end) = &range.end {
            opts.set_iterate_upper_bound(end.clone());
        }
        if let Some(n) = max_hidden {
            opts.set_max_skippable_internal_keys(n);
        }
        let mut iter = self.store.db.raw_iterator_cf_opt(handle, opts);
        match &range.start {
            Some(start) => iter.seek(start),
            None => iter.seek_to_first(),
        }
        iter
    }

    /// Reads the values of ascending `keys` with one iterator, stepping from
    /// each key to the next, into `out`; stops early, leaving the rest to
    /// lookups, once it has stepped over more than [`WALK_STEPS_PER_KEY`]
    /// entries per key read. The documents an index gives for a common value
    /// lie close together in key order: a step within a block costs a small
    /// part of a lookup, which searches the file's index, its filter and a
    /// block for each key.
    fn walk(&self, handle: &Handle, keys: &[&[u8]], out: &mut Vec<Option<Cow<'_, [u8]>>>) -> Result<()> {
        let (Some(first), Some(last)) = (keys.first(), keys.last()) else {
            return Ok(());
        };
        let mut end = last.to_vec();
        end.push(0);
        // Entries a lookup never sees (deleted, or older versions) are
        // stepped over too: more than this many in one step ends the walk.
        let mut iter = self.seek(handle, &KeyRange::new(*first, end), Some(WALK_MAX_HIDDEN));
        let mut steps = 0;
        for (i, key) in keys.iter().enumerate() {
            while iter.key().is_some_and(|k| k < *key) {
                if steps >= WALK_STEPS_PER_KEY * (i + 1) {
                    return Ok(iter.status()?);
                }
                iter.next();
                steps += 1;
            }
            if !iter.valid() {
                match iter.status() {
                    // Past the last key: this one and the rest are absent.
                    Ok(()) => {}
                    // Too many hidden entries: the rest are looked up.
                    Err(e) if e.kind() == rocksdb::ErrorKind::Incomplete => return Ok(()),
                    Err(e) => return Err(e.into()),
                }
            }
            out.push(match iter.item() {
                Some((k, v)) if k == *key => Some(Cow::Owned(v.to_vec())),
                _ => None,
            });
        }
        Ok(iter.status()?)
    }
}

/// Fewest ascending keys [`RocksSnapshot::walk`] reads with an iterator
/// rather than one lookup each: below it, the iterator's set-up costs more
/// than it saves.
const WALK_MIN_KEYS: usize = 16;

/// Hidden entries (deleted, or older versions) one step of a walk may pass
/// before the walk leaves the rest to lookups, which skip them through the
/// files' filters.
const WALK_MAX_HIDDEN: u64 = 64;

/// Entries a walk may step over per key it has read before it leaves the
/// rest to lookups: eight steps within a block cost less than one lookup,
/// so a walk costs at most about what the lookups would have.
const WALK_STEPS_PER_KEY: usize = 8;

impl Snapshot for RocksSnapshot<'_> {
    fn version(&self) -> u64 {
        self.version
    }

    fn get(&self, cf: &str, key: &[u8]) -> Result<Option<Cow<'_, [u8]>>> {
        let handle = self.cf(cf)?;
        Ok(self.snap.get_cf(handle, key)?.map(Cow::Owned))
    }

    fn multi_get(&self, cf: &str, keys: &[&[u8]]) -> Result<Vec<Option<Cow<'_, [u8]>>>> {
        let handle = self.cf(cf)?;
        // Keys an index scan produced usually ascend: RocksDB then skips
        // sorting them, and close ones are walked to rather than looked up.
        let sorted = keys.windows(2).all(|w| w[0] < w[1]);
        let mut out = Vec::with_capacity(keys.len());
        if sorted && keys.len() >= WALK_MIN_KEYS {
            self.walk(handle, keys, &mut out)?;
        }
        let rest = &keys[out.len()..];
        if !rest.is_empty() {
            let opts = self.read_opts();
            for r in self
                .store
                .db
                .batched_multi_get_cf_opt(handle, rest.iter().copied(), sorted, &opts)
            {
                out.push(r?.map(|v| Cow::Owned(v.to_vec())));
            }
        }
        Ok(out)
    }

    fn range(&self, cf: &str, range: &KeyRange, dir: Direction) -> Result<EntryIter<'_>> {
        let handle = self.cf(cf)?;
        if range.is_empty() {
            return Ok(Box::new(std::iter::empty()));
        }
        let mut opts = self.read_opts();
        if let Some(start) = &range.start {
            opts.set_iterate_lower_bound(start.clone());
        }
        if let Some(end) = &range.end {
            opts.set_iterate_upper_bound(end.clone());
        }
        let mode = match dir {
            Direction::Forward => IteratorMode::Start,
            Direction::Reverse => IteratorMode::End,
        };
        let iter = self.store.db.iterator_cf_opt(handle, opts, mode);
        Ok(Box::new(iter.map(|item| {
            let (k, v) = item?;
            Ok((Cow::Owned(k.into_vec()), Cow::Owned(v.into_vec())))
        })))
    }

    fn visit(&self, cf: &str, range: &KeyRange, f: &mut Visitor<'_>) -> Result<()> {
        let handle = self.cf(cf)?;
        if range.is_empty() {
            return Ok(());
        }
        // The raw iterator lends each entry in place: none is copied out.
        let mut iter = self.seek(handle, range, None);
        while let Some((k, v)) = iter.item() {
            if f(k, v).is_break() {
                return Ok(());
            }
            iter.next();
        }
        Ok(iter.status()?)
    }

    /// One seek, giving up (`None`) past [`WALK_MAX_HIDDEN`] deleted or
    /// older entries: a range emptied by a large delete is not stepped
    /// through tombstone by tombstone.
    fn any_in(&self, cf: &str, range: &KeyRange) -> Result<Option<bool>> {
        let handle = self.cf(cf)?;
        if range.is_empty() {
            return Ok(Some(false));
        }
        let iter = self.seek(handle, range, Some(WALK_MAX_HIDDEN));
        if iter.valid() {
            return Ok(Some(true));
        }
        match iter.status() {
            Ok(()) => Ok(Some(false)),
            Err(e) if e.kind() == rocksdb::ErrorKind::Incomplete => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    fn has_cf(&self, cf: &str) -> bool {
        self.handles.contains_key(cf)
    }

    fn on_disk(&self) -> bool {
        true
    }
}
