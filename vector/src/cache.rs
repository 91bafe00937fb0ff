//! [`VectorCache`]: one per vector field; MVCC rows in an append-only arena.
//!
//! # Design
//!
//! Rows live in an arena (`arena.rs`) of fixed-size chunks that never
//! move. Each row carries `born` (the commit version that made it visible)
//! and `died` (the version that retired it); a view at version `s` sees a row
//! iff `born <= s < died`. An upsert appends a row and retires the id's live
//! row at the same version; a delete only retires. Staged rows sit beyond the
//! published row count, so readers never see them; commit stamps versions,
//! links the new rows into the id index and publishes them; rollback just
//! forgets them and their slots are reused.
//!
//! Compaction builds a new *generation* (arena + index) holding only the rows
//! still visible at some version `>= min_version_in_use`, and swaps it in.
//! Views already taken keep the old generation alive through their `Arc`s;
//! new views use the new one. A generation can serve views at versions
//! `>= oldest_version` only.
//!
//! Caller contract: commit versions strictly increase, and a view at version
//! `s` is taken only after every commit at a version `<= s` has returned
//! (otherwise the view may see part of that commit; memory safety does not
//! depend on it).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock};

use crate::arena::{Arena, ArenaCursor, UNSET};
use crate::error::{Error, Result};
use crate::index::IdIndex;
use crate::memo::Memo;
use crate::metric::Metric;
use crate::tags::TagIndex;
use crate::view::CacheView;
use crate::writer::Writer;

/// Largest accepted dimension.
pub const MAX_DIM: usize = 65_536;
/// Most floats in one chunk (1 GiB).
const MAX_CHUNK_FLOATS: usize = 1 << 28;
/// Default chunk rows: 1024, fewer for wide vectors (at most 16 MiB a chunk,
/// and a power of two).
const DEFAULT_CHUNK_ROWS: usize = 1024;
const DEFAULT_CHUNK_BYTES: usize = 16 << 20;

/// The largest power of two at most `n` (`n` ≥ 1).
fn prev_power_of_two(n: usize) -> usize {
    1 << n.ilog2()
}

/// Configuration of a [`VectorCache`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CacheConfig {
    /// Components per vector, `1..=MAX_DIM`.
    pub dim: usize,
    /// Distance metric.
    pub metric: Metric,
    /// Rows per chunk; every chunk is allocated whole, once.
    pub chunk_rows: usize,
    /// Whether each row also keeps an 8-bit code (`dim + 24` more bytes a
    /// row), which lets a gather skip most rows' vectors. Default: off.
    pub codes: bool,
}

impl CacheConfig {
    /// A config with the default chunk size: 1024 rows, or fewer so that a
    /// chunk holds at most 16 MiB of vectors (a power of two either way).
    pub fn new(dim: usize, metric: Metric) -> Self {
        let per_row = dim.max(1) * std::mem::size_of::<f32>();
        CacheConfig {
            dim,
            metric,
            // A power of two, so that a row's chunk is a shift away.
            chunk_rows: prev_power_of_two((DEFAULT_CHUNK_BYTES / per_row).clamp(1, DEFAULT_CHUNK_ROWS)),
            codes: false,
        }
    }

    /// Keeps an 8-bit code of every row beside its vector (default: off).
    /// A gather with no filter left to check then bounds each candidate's
    /// distance from its code, exactly (rounding included), and reads the
    /// vectors of only the rows the bounds cannot rule out: at 1% of 100k ×
    /// 384 rows and k = 10, a few dozen of the 1,000. An unfiltered search
    /// bounds each scan task's rows the same way. Costs `dim + 24`
    /// bytes of memory a row (a quarter more at dim 384); nothing on disk.
    pub fn codes(mut self, on: bool) -> Self {
        self.codes = on;
        self
    }

    /// Sets the rows per chunk (default: see [`new`](Self::new)).
    pub fn chunk_rows(mut self, rows: usize) -> Self {
        self.chunk_rows = rows;
        self
    }

    fn validate(&self) -> Result<()> {
        if self.dim == 0 || self.dim > MAX_DIM {
            return Err(Error::InvalidDimension {
                dim: self.dim,
                max: MAX_DIM,
            });
        }
        let max = MAX_CHUNK_FLOATS / self.dim;
        if self.chunk_rows == 0 || self.chunk_rows > max {
            return Err(Error::InvalidChunkRows {
                chunk_rows: self.chunk_rows,
                max,
            });
        }
        Ok(())
    }
}

/// One generation: an arena and its id index.
pub(crate) struct Generation {
    pub(crate) config: CacheConfig,
    pub(crate) arena: Arc<Arena>,
    pub(crate) index: RwLock<IdIndex>,
    /// Row tags' posting lists.
    pub(crate) tags: RwLock<TagIndex>,
    /// Views below this version cannot be served (compacted away).
    pub(crate) oldest_version: u64,
    /// Published rows with `died != UNSET`.
    pub(crate) retired: AtomicUsize,
    /// Visible rows after each commit, shared by every generation (versions
    /// outlive compaction).
    pub(crate) live: Arc<LiveCounts>,
    /// What searches derived from this generation's rows.
    pub(crate) memo: Memo,
}

/// The number of visible rows after each commit, ascending by version, so a
/// view counts its rows with one binary search instead of a pass over them.
#[derive(Debug, Default)]
pub(crate) struct LiveCounts(RwLock<Vec<(u64, usize)>>);

impl LiveCounts {
    /// Visible rows at `version`: those after the last commit at or below it.
    pub(crate) fn at(&self, version: u64) -> usize {
        let counts = self.0.read().unwrap_or_else(PoisonError::into_inner);
        let i = counts.partition_point(|&(v, _)| v <= version);
        i.checked_sub(1).map_or(0, |i| counts[i].1)
    }

    /// Visible rows at the last commit.
    pub(crate) fn latest(&self) -> usize {
        let counts = self.0.read().unwrap_or_else(PoisonError::into_inner);
        counts.last().map_or(0, |&(_, n)| n)
    }

    /// Records a commit (versions increase).
    pub(crate) fn record(&self, version: u64, live: usize) {
        self.0
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .push((version, live));
    }

    /// Forgets counts no view can ask for: those superseded below `oldest`.
    fn trim(&self, oldest: u64) {
        let mut counts = self.0.write().unwrap_or_else(PoisonError::into_inner);
        let keep_from = counts.partition_point(|&(v, _)| v <= oldest).saturating_sub(1);
        counts.drain(..keep_from);
    }
}

/// Write-side state, behind the cache's writer mutex.
pub(crate) struct WriteState {
    pub(crate) generation: Arc<Generation>,
    pub(crate) cursor: ArenaCursor,
    pub(crate) last_version: Option<u64>,
}

/// One writer at a time: a busy flag that writers and compaction wait on.
/// (A flag rather than holding the state mutex, so that a [`Writer`] is
/// `Send`; the state mutex is then only ever locked briefly, by the permit
/// holder.)
#[derive(Default)]
struct WriteGate {
    busy: Mutex<bool>,
    freed: Condvar,
}

/// Proof of being the cache's only writer; released on drop.
pub(crate) struct WritePermit<'c> {
    gate: &'c WriteGate,
}

impl WriteGate {
    fn acquire(&self) -> WritePermit<'_> {
        let mut busy = self.busy.lock().unwrap_or_else(PoisonError::into_inner);
        while *busy {
            busy = self.freed.wait(busy).unwrap_or_else(PoisonError::into_inner);
        }
        *busy = true;
        WritePermit { gate: self }
    }
}

impl Drop for WritePermit<'_> {
    fn drop(&mut self) {
        *self.gate.busy.lock().unwrap_or_else(PoisonError::into_inner) = false;
        self.gate.freed.notify_one();
    }
}

/// What [`VectorCache::compact`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompactionReport {
    /// Rows in the old generation.
    pub rows_before: usize,
    /// Rows copied into the new one.
    pub rows_after: usize,
    /// The new generation's oldest readable version.
    pub oldest_version: u64,
}

/// The rows of one vector field, searchable at any committed version.
///
/// One writer at a time ([`writer`](Self::writer) blocks while another is
/// alive); any number of readers, which never wait for the writer except
/// for brief lookups (see [`CacheView::row_of`]).
pub struct VectorCache {
    config: CacheConfig,
    current: RwLock<Arc<Generation>>,
    gate: WriteGate,
    /// Locked only by the permit holder, briefly.
    write: Mutex<WriteState>,
    /// Last committed version, `UNSET` if none.
    committed: AtomicU64,
}

impl std::fmt::Debug for VectorCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VectorCache")
            .field("config", &self.config)
            .field("rows", &self.generation().arena.published())
            .field("last_committed_version", &self.last_committed_version())
            .finish_non_exhaustive()
    }
}

impl VectorCache {
    /// An empty cache with the default chunk size.
    pub fn new(dim: usize, metric: Metric) -> Result<Self> {
        Self::with_config(CacheConfig::new(dim, metric))
    }

    /// An empty cache.
    pub fn with_config(config: CacheConfig) -> Result<Self> {
        config.validate()?;
        let (generation, cursor) = new_generation(&config, 0, Arc::default());
        Ok(VectorCache {
            current: RwLock::new(Arc::clone(&generation)),
            gate: WriteGate::default(),
            write: Mutex::new(WriteState {
                generation,
                cursor,
                last_version: None,
            }),
            committed: AtomicU64::new(UNSET),
            config,
        })
    }

    /// The cache's configuration.
    pub fn config(&self) -> &CacheConfig {
        &self.config
    }

    /// Components per vector.
    pub fn dim(&self) -> usize {
        self.config.dim
    }

    /// The distance metric.
    pub fn metric(&self) -> Metric {
        self.config.metric
    }

    pub(crate) fn generation(&self) -> Arc<Generation> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// The rows as of `version` (`u64::MAX` reads the latest state). Holds no
    /// lock afterwards; keeps the rows it sees alive.
    ///
    /// Fails with [`Error::VersionCompacted`] below
    /// [`oldest_version`](Self::oldest_version).
    pub fn view(&self, version: u64) -> Result<CacheView> {
        // `committed` first: a compaction swaps its generation in before any
        // commit to it stores `committed`, so the generation read after is
        // the one that commit wrote to (or newer), never an older one whose
        // rows lack that commit's changes.
        let committed = self.committed.load(Ordering::Acquire);
        let generation = self.generation();
        if version < generation.oldest_version {
            return Err(Error::VersionCompacted {
                requested: version,
                oldest: generation.oldest_version,
            });
        }
        // Rows of commits after this one may be published by the time the
        // snapshot is taken; reading at most this version keeps them out, so
        // the view's rows and its count (recorded per commit) agree.
        let version = if committed == UNSET {
            version.min(UNSET - 1)
        } else {
            version.min(committed)
        };
        let snapshot = generation.arena.snapshot();
        let visible = generation.live.at(version);
        // A compaction finishing meanwhile may have forgotten this version's
        // count; it can no longer be served.
        let oldest = self.generation().oldest_version;
        if version < oldest {
            return Err(Error::VersionCompacted {
                requested: version,
                oldest,
            });
        }
        Ok(CacheView::new(generation, snapshot, version, visible))
    }

    /// The write transaction; blocks while another one (or a compaction) is
    /// under way, so a thread holding a writer must not ask for a second.
    /// Commit with [`Writer::commit`]; dropping it rolls back.
    pub fn writer(&self) -> Writer<'_> {
        Writer::new(self, self.gate.acquire())
    }

    /// The write-side state; callers hold the write permit, so this never
    /// waits long.
    pub(crate) fn lock_write(&self) -> MutexGuard<'_, WriteState> {
        // A panic while writing leaves only staged rows behind, which the
        // writer's drop discards: the state stays consistent.
        self.write.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn set_committed(&self, version: u64) {
        self.committed.store(version, Ordering::Release);
    }

    /// The last committed version, if any.
    pub fn last_committed_version(&self) -> Option<u64> {
        Some(self.committed.load(Ordering::Acquire)).filter(|&v| v != UNSET)
    }

    /// The oldest version a new view can be taken at.
    pub fn oldest_version(&self) -> u64 {
        self.generation().oldest_version
    }

    /// Bulk load (at open): upserts every item and commits at `version`, as
    /// one transaction; vectors are validated and copied in parallel. On any
    /// bad vector nothing is written. Returns the number of items loaded.
    pub fn load<I, K, V>(&self, items: I, version: u64) -> Result<usize>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<[u8]> + Send + Sync,
        V: AsRef<[f32]> + Send + Sync,
    {
        const BATCH: usize = 8192;
        let mut writer = self.writer();
        let mut batch = Vec::with_capacity(BATCH);
        let mut total = 0;
        for item in items {
            batch.push(item);
            if batch.len() == BATCH {
                writer.upsert_batch(&batch)?;
                total += batch.len();
                batch.clear();
            }
        }
        writer.upsert_batch(&batch)?;
        total += batch.len();
        writer.commit(version)?;
        Ok(total)
    }

    /// Fraction of the current generation's rows that are retired (or were
    /// cancelled within their transaction): the compaction trigger.
    pub fn retired_fraction(&self) -> f64 {
        let generation = self.generation();
        let rows = generation.arena.published();
        if rows == 0 {
            return 0.0;
        }
        generation.retired.load(Ordering::Relaxed) as f64 / rows as f64
    }

    /// Bytes allocated by the current generation: chunks (vectors, id
    /// pointers, versions), id bytes, the id index, the row tags and what
    /// its [`Memo`] holds (as its values report). Older generations
    /// kept alive by views are not counted.
    pub fn memory_bytes(&self) -> usize {
        let generation = self.generation();
        let index = generation
            .index
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .memory_bytes();
        let tags = generation
            .tags
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .memory_bytes();
        generation.arena.memory_bytes() + index + tags + generation.memo.usage().1
    }

    /// Live rows (as of the last commit) × dim × 4: the payload.
    pub fn raw_vector_bytes(&self) -> usize {
        let generation = self.generation();
        let live = generation.arena.published() - generation.retired.load(Ordering::Relaxed);
        live * self.config.dim * std::mem::size_of::<f32>()
    }

    /// Rewrites the cache keeping only rows visible at some version
    /// `>= min_version_in_use` and swaps the new generation in.
    ///
    /// Waits for (and blocks) writers meanwhile. Views already taken keep
    /// working on the old generation; new views below the new
    /// [`oldest_version`](Self::oldest_version) are refused. Row ids change.
    /// Must not be called by a thread holding a [`Writer`] (it would wait for
    /// itself).
    pub fn compact(&self, min_version_in_use: u64) -> Result<CompactionReport> {
        let _permit = self.gate.acquire();
        let mut state = self.lock_write();
        let old = Arc::clone(&state.generation);
        let snap = old.arena.snapshot();
        // No commit of this cache's after its last: its state at any later
        // version is its state at the last, which must stay readable (a
        // floor taken from a store that moved on through other commits can
        // lie above it).
        let oldest = min_version_in_use
            .min(state.last_version.unwrap_or(0))
            .max(old.oldest_version);
        let keep: Vec<usize> = (0..snap.rows())
            .filter(|&r| {
                let (born, died) = (snap.born(r), snap.died(r));
                born < died && died > oldest
            })
            .collect();
        let items: Vec<(&[u8], &[f32])> = keep
            .iter()
            .filter_map(|&r| Some((snap.id(r)?, snap.vector(r)?)))
            .collect();

        let (generation, mut cursor) = new_generation(&self.config, oldest, Arc::clone(&old.live));
        let start = cursor.append_many(&items)?;
        let mut retired = 0;
        {
            let mut index = generation.index.write().unwrap_or_else(PoisonError::into_inner);
            for (j, (&r, (id, _))) in keep.iter().zip(&items).enumerate() {
                let row = (start + j) as u32;
                cursor.set_born(row, snap.born(r));
                let died = snap.died(r);
                cursor.set_died(row, died);
                retired += usize::from(died != UNSET);
                let hash = index.hash(id);
                index.link(hash, row);
            }
        }
        generation.retired.store(retired, Ordering::Relaxed);
        // Tags follow their rows to their new numbers.
        let mut new_row = vec![u32::MAX; snap.rows()];
        for (j, &r) in keep.iter().enumerate() {
            new_row[r] = (start + j) as u32;
        }
        *generation.tags.write().unwrap_or_else(PoisonError::into_inner) = old
            .tags
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .remap(&new_row);
        cursor.publish();

        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::clone(&generation);
        // Only now, with the new generation current: a view that reads the
        // trimmed counts then reads the new oldest version and is refused
        // (see `view`). Trimmed before the swap, a view of a version below
        // `oldest` could count 0 rows while the old generation still served
        // it, and a failed compaction would leave those counts lost.
        generation.live.trim(oldest);
        state.generation = generation;
        state.cursor = cursor;
        Ok(CompactionReport {
            rows_before: snap.rows(),
            rows_after: items.len(),
            oldest_version: oldest,
        })
    }
}

fn new_generation(
    config: &CacheConfig,
    oldest_version: u64,
    live: Arc<LiveCounts>,
) -> (Arc<Generation>, ArenaCursor) {
    let (arena, cursor) = Arena::new(config.dim, config.chunk_rows, config.codes);
    let generation = Arc::new(Generation {
        config: config.clone(),
        arena,
        index: RwLock::new(IdIndex::new()),
        tags: RwLock::new(TagIndex::default()),
        oldest_version,
        retired: AtomicUsize::new(0),
        live,
        memo: Memo::default(),
    });
    (generation, cursor)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache() -> VectorCache {
        VectorCache::with_config(CacheConfig::new(2, Metric::L2).chunk_rows(4)).expect("cache")
    }

    #[test]
    fn memory_bytes_count_what_the_memo_holds_until_a_compaction() {
        let cache = cache();
        let mut w = cache.writer();
        w.upsert(b"a", &[1.0, 2.0]).expect("upsert");
        w.commit(1).expect("commit");
        let before = cache.memory_bytes();
        cache
            .view(1)
            .expect("view")
            .memo()
            .put(Some(1), 1000, Arc::new(7u32), |_| false);
        assert_eq!(cache.memory_bytes(), before + 1000);
        let mut w = cache.writer();
        w.delete(b"a");
        w.commit(2).expect("commit");
        cache.compact(2).expect("compact");
        assert_eq!(cache.view(2).expect("view").memo().usage(), (0, 0));
    }

    #[test]
    fn config_is_validated() {
        assert!(matches!(
            VectorCache::new(0, Metric::L2),
            Err(Error::InvalidDimension { dim: 0, .. })
        ));
        assert!(matches!(
            VectorCache::new(MAX_DIM + 1, Metric::L2),
            Err(Error::InvalidDimension { .. })
        ));
        assert!(matches!(
            VectorCache::with_config(CacheConfig::new(3, Metric::L2).chunk_rows(0)),
            Err(Error::InvalidChunkRows { chunk_rows: 0, .. })
        ));
        assert_eq!(CacheConfig::new(384, Metric::L2).chunk_rows, 1024);
        assert_eq!(CacheConfig::new(MAX_DIM, Metric::L2).chunk_rows, 64);
        // 16 MiB holds 838 rows of 5,000 floats: 512, a power of two.
        assert_eq!(CacheConfig::new(5_000, Metric::L2).chunk_rows, 512);
    }

    #[test]
    fn compaction_keeps_what_versions_in_use_see() {
        let cache = cache();
        for v in 1..=10u64 {
            let mut w = cache.writer();
            for id in 0..3u8 {
                w.upsert(&[id], &[v as f32, f32::from(id)]).expect("upsert");
            }
            w.commit(v).expect("commit");
        }
        assert!((cache.retired_fraction() - 27.0 / 30.0).abs() < 1e-12);
        let held = cache.view(2).expect("view");
        let report = cache.compact(8).expect("compact");
        assert_eq!(report.rows_before, 30);
        // Rows live at 8, 9 and 10 (three versions of three ids).
        assert_eq!(report.rows_after, 9);
        assert_eq!(cache.oldest_version(), 8);
        assert!(matches!(
            cache.view(7),
            Err(Error::VersionCompacted {
                requested: 7,
                oldest: 8
            })
        ));
        for v in 8..=10u64 {
            let view = cache.view(v).expect("view");
            assert_eq!(view.len(), 3);
            let row = view.row_of(&[1]).expect("id 1");
            assert_eq!(view.vector(row), Some(&[v as f32, 1.0][..]));
        }
        // The held view still reads the old generation.
        let row = held.row_of(&[2]).expect("id 2");
        assert_eq!(held.vector(row), Some(&[2.0, 2.0][..]));
        // Writes continue on the new generation.
        let mut w = cache.writer();
        assert!(w.delete(&[0]));
        w.commit(11).expect("commit");
        assert_eq!(cache.view(11).expect("view").len(), 2);
        cache.compact(11).expect("compact");
        assert_eq!(cache.retired_fraction(), 0.0);
        assert_eq!(cache.raw_vector_bytes(), 2 * 2 * 4);
        assert_eq!(cache.view(11).expect("view").row_count(), 2);
    }

    #[test]
    fn compaction_above_the_last_commit_keeps_it_readable() {
        // The store moved on (other collections committed) since this
        // cache's last commit at 3: a floor of 7 must not hide version 3.
        let cache = cache();
        for v in 1..=3u64 {
            let mut w = cache.writer();
            w.upsert(&[0], &[v as f32, 0.0]).expect("upsert");
            w.upsert(&[v as u8], &[0.0, v as f32]).expect("upsert");
            w.commit(v).expect("commit");
        }
        cache.compact(7).expect("compact");
        assert_eq!(cache.oldest_version(), 3);
        for v in [3, 7, u64::MAX] {
            let view = cache.view(v).expect("readable");
            assert_eq!(view.len(), 4, "at {v}");
            let row = view.row_of(&[0]).expect("id 0");
            assert_eq!(view.vector(row), Some(&[3.0, 0.0][..]));
        }
    }

    #[test]
    fn load_takes_vectors_stored_before_the_component_limit() {
        // A database written before the limit must still open; new writes
        // of such a vector are refused.
        let cache = cache();
        let huge = vec![1e20, 0.0];
        assert_eq!(cache.load([(b"a".to_vec(), huge.clone())], 1).expect("load"), 1);
        let mut writer = cache.writer();
        assert!(writer.upsert(b"b", &huge).is_err());
    }

    #[test]
    fn load_commits_everything_at_once() {
        let cache = cache();
        let items: Vec<(Vec<u8>, Vec<f32>)> = (0..10_000u32)
            .map(|i| (i.to_be_bytes().to_vec(), vec![i as f32, 0.0]))
            .chain([(7u32.to_be_bytes().to_vec(), vec![-1.0, -1.0])])
            .collect();
        assert_eq!(cache.load(items, 3).expect("load"), 10_001);
        let view = cache.view(3).expect("view");
        assert_eq!(view.len(), 10_000);
        let row = view.row_of(&7u32.to_be_bytes()).expect("id 7");
        assert_eq!(view.vector(row), Some(&[-1.0, -1.0][..]));
        let row = view.row_of(&9_999u32.to_be_bytes()).expect("id 9999");
        assert_eq!(view.vector(row), Some(&[9_999.0, 0.0][..]));
    }
}
