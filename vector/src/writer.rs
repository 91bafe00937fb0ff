//! [`Writer`]: the cache's write transaction.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::PoisonError;

use rayon::prelude::*;

use crate::arena::UNSET;
use crate::cache::{VectorCache, WritePermit, WriteState};
use crate::error::{Error, Result};
use crate::metric::{check_finite, check_vector_for};
use crate::tags::RowTags;
use crate::VectorError;

/// What a transaction does to one id.
#[derive(Debug, Clone, Copy)]
enum Staged {
    /// Upsert: the new vector is in this staged row.
    Row(u32),
    /// Delete the id's live row.
    Delete,
}

/// A write transaction on a [`VectorCache`]: stage upserts and deletes, then
/// [`commit`](Self::commit) them at a version, atomically for readers.
/// Dropping it without commit rolls back: staged rows were never visible and
/// their slots are reused.
///
/// Holds the cache's write permit for its lifetime (one writer at a time);
/// it is `Send`, so a transaction may move between threads.
pub struct Writer<'c> {
    cache: &'c VectorCache,
    /// Per id staged in this transaction, the last operation on it.
    staged: HashMap<Box<[u8]>, Staged>,
    /// Staged rows superseded by a later delete of the same id.
    cancelled: Vec<u32>,
    /// Tags of staged rows written with [`upsert_tagged`](Self::upsert_tagged).
    tags: HashMap<u32, RowTags>,
    /// Fields no longer covered once this commits (see [`Writer::uncover`]).
    uncovered: Vec<String>,
    // Dropped after `Drop::drop` has rolled back.
    _permit: WritePermit<'c>,
}

impl std::fmt::Debug for Writer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("staged_ids", &self.staged.len())
            .field("cancelled_rows", &self.cancelled.len())
            .finish_non_exhaustive()
    }
}

fn refuse(id: &[u8]) -> impl FnOnce(VectorError) -> Error + '_ {
    move |source| Error::InvalidVector {
        id: id.into(),
        source,
    }
}

/// The committed row of `id` that is live at the latest version.
fn live_row(state: &WriteState, id: &[u8]) -> Option<u32> {
    let index = state
        .generation
        .index
        .read()
        .unwrap_or_else(PoisonError::into_inner);
    let found = index
        .chain(index.hash(id))
        .find(|&row| state.cursor.died(row) == UNSET && state.cursor.id(row) == Some(id));
    found
}

impl<'c> Writer<'c> {
    pub(crate) fn new(cache: &'c VectorCache, permit: WritePermit<'c>) -> Self {
        Writer {
            cache,
            staged: HashMap::new(),
            cancelled: Vec::new(),
            tags: HashMap::new(),
            uncovered: Vec::new(),
            _permit: permit,
        }
    }

    /// Stages `vector` as `id`'s vector; at commit it replaces the id's live
    /// row, if any. A bad vector is refused and nothing is staged for it.
    ///
    /// The row carries no tags, so after its commit no field is covered by
    /// this generation's tags (see [`upsert_tagged`](Self::upsert_tagged)).
    pub fn upsert(&mut self, id: &[u8], vector: &[f32]) -> Result<()> {
        check_vector_for(vector, self.cache.dim(), self.cache.metric()).map_err(refuse(id))?;
        self.stage(id, vector, None)
    }

    /// [`upsert`](Self::upsert) with the row's tags, which
    /// [`CacheView::tagged_rows`](crate::CacheView::tagged_rows) finds it by.
    pub fn upsert_tagged(&mut self, id: &[u8], vector: &[f32], tags: RowTags) -> Result<()> {
        check_vector_for(vector, self.cache.dim(), self.cache.metric()).map_err(refuse(id))?;
        self.stage(id, vector, Some(tags))
    }

    /// [`upsert_tagged`](Self::upsert_tagged) of a vector already stored
    /// (a document rewritten with its vector unchanged, its tags new): held
    /// to [`check_finite`] only, as a load holds it, so that one stored
    /// before the component limit is moved to its new row rather than
    /// refused at commit.
    pub fn upsert_tagged_stored(&mut self, id: &[u8], vector: &[f32], tags: RowTags) -> Result<()> {
        check_finite(vector, self.cache.dim()).map_err(refuse(id))?;
        self.stage(id, vector, Some(tags))
    }

    /// Stops tag field `field` being covered from this commit on, for the
    /// rest of the generation: its index is dropped, and rows that outlive
    /// later writes may keep its tags as they were.
    pub fn uncover(&mut self, field: &str) {
        self.uncovered.push(field.to_owned());
    }

    /// Stages `vector` for `id`, checked by the caller.
    fn stage(&mut self, id: &[u8], vector: &[f32], tags: Option<RowTags>) -> Result<()> {
        let mut state = self.cache.lock_write();
        let row = match self.staged.get(id) {
            Some(&Staged::Row(row)) => {
                let written = state.cursor.overwrite(row, vector);
                debug_assert!(written, "a staged row lies beyond the published rows");
                row
            }
            _ => {
                let row = state.cursor.append(id, vector)?;
                self.staged.insert(id.into(), Staged::Row(row));
                row
            }
        };
        match tags {
            Some(tags) => self.tags.insert(row, tags),
            None => self.tags.remove(&row),
        };
        Ok(())
    }

    /// Stages a batch of upserts: validated and copied in parallel. Used by
    /// [`VectorCache::load`]; on error the batch may be partly staged, so
    /// the caller must roll back. Stored vectors are held to
    /// [`check_finite`] only: ones written before the component limit still
    /// load.
    pub(crate) fn upsert_batch<K, V>(&mut self, batch: &[(K, V)]) -> Result<()>
    where
        K: AsRef<[u8]> + Sync,
        V: AsRef<[f32]> + Sync,
    {
        let dim = self.cache.dim();
        if let Some(bad) = batch
            .par_iter()
            .position_first(|(_, v)| check_finite(v.as_ref(), dim).is_err())
        {
            let (id, v) = &batch[bad];
            check_finite(v.as_ref(), dim).map_err(refuse(id.as_ref()))?;
        }
        let mut state = self.cache.lock_write();
        // New ids get fresh rows, filled in parallel; repeated ids overwrite
        // their staged row afterwards, in batch order.
        let mut fresh = Vec::with_capacity(batch.len());
        let mut repeats = Vec::new();
        let first = state.cursor.next();
        for (j, (id, v)) in batch.iter().enumerate() {
            match self.staged.get(id.as_ref()) {
                Some(&Staged::Row(row)) => repeats.push((row, j)),
                _ => {
                    let row = (first + fresh.len()) as u32;
                    self.staged.insert(id.as_ref().into(), Staged::Row(row));
                    fresh.push((id.as_ref(), v.as_ref()));
                }
            }
        }
        let start = state.cursor.append_many(&fresh)?;
        debug_assert_eq!(start, first);
        for (row, j) in repeats {
            let written = state.cursor.overwrite(row, batch[j].1.as_ref());
            debug_assert!(written, "a staged row lies beyond the published rows");
        }
        Ok(())
    }

    /// Stages the removal of `id`'s vector. Returns whether there was one
    /// (live, or staged in this transaction).
    pub fn delete(&mut self, id: &[u8]) -> bool {
        match self.staged.get(id).copied() {
            Some(Staged::Row(row)) => {
                self.cancelled.push(row);
                self.tags.remove(&row);
                self.staged.insert(id.into(), Staged::Delete);
                true
            }
            Some(Staged::Delete) => false,
            None => {
                let live = live_row(&self.cache.lock_write(), id).is_some();
                if live {
                    self.staged.insert(id.into(), Staged::Delete);
                }
                live
            }
        }
    }

    /// Number of ids this transaction touches.
    pub fn len(&self) -> usize {
        self.staged.len()
    }

    /// Whether nothing is staged.
    pub fn is_empty(&self) -> bool {
        self.staged.is_empty()
    }

    /// Makes every staged operation visible at `version` (to views at
    /// versions `>= version`), or fails without effect if `version` is not
    /// above the last commit's (or is `u64::MAX`).
    pub fn commit(self, version: u64) -> Result<()> {
        if version == UNSET {
            return Err(Error::ReservedVersion);
        }
        let mut guard = self.cache.lock_write();
        let state = &mut *guard;
        if let Some(last) = state.last_version.filter(|&last| version <= last) {
            return Err(Error::VersionNotIncreasing { version, last });
        }
        // Retire the live rows of every touched id (views below `version`
        // still see them), then stamp the new rows and link them.
        let mut retired = 0;
        for id in self.staged.keys() {
            if let Some(row) = live_row(state, id) {
                state.cursor.set_died(row, version);
                retired += 1;
            }
        }
        let live_retired = retired;
        for &row in &self.cancelled {
            // born == died: never visible; reclaimed by compaction.
            state.cursor.set_born(row, version);
            state.cursor.set_died(row, version);
            retired += 1;
        }
        let mut rows: Vec<u32> = self
            .staged
            .values()
            .filter_map(|s| match s {
                Staged::Row(row) => Some(*row),
                Staged::Delete => None,
            })
            .collect();
        rows.sort_unstable();
        {
            let mut index = state
                .generation
                .index
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            let mut tags = state
                .generation
                .tags
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            for &row in &rows {
                state.cursor.set_born(row, version);
                if let Some(id) = state.cursor.id(row) {
                    let hash = index.hash(id);
                    index.link(hash, row);
                }
                tags.link(row, self.tags.get(&row));
            }
            for field in &self.uncovered {
                tags.uncover(field);
            }
        }
        state.generation.retired.fetch_add(retired, Ordering::Relaxed);
        let live = state.generation.live.latest() - live_retired + rows.len();
        state.generation.live.record(version, live);
        state.cursor.publish();
        state.last_version = Some(version);
        self.cache.set_committed(version);
        Ok(())
    }

    /// Discards every staged operation (same as dropping the writer).
    pub fn rollback(self) {}
}

impl Drop for Writer<'_> {
    fn drop(&mut self) {
        // After a commit nothing is staged and this is a no-op.
        self.cache.lock_write().cursor.rollback();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::{CacheView, Error, Metric, RowId, VectorCache, Writer};

    fn ids(cache: &VectorCache, version: u64) -> Vec<Vec<u8>> {
        let view = cache.view(version).expect("view");
        let mut ids: Vec<Vec<u8>> = view
            .rows()
            .filter_map(|r| view.id(r).map(<[u8]>::to_vec))
            .collect();
        ids.sort();
        ids
    }

    #[test]
    fn commit_makes_rows_visible_at_its_version_only() {
        let cache = VectorCache::new(2, Metric::L2).expect("cache");
        let mut w = cache.writer();
        w.upsert(b"a", &[1.0, 2.0]).expect("upsert");
        w.upsert(b"b", &[3.0, 4.0]).expect("upsert");
        assert_eq!(w.len(), 2);
        // Staged rows are invisible even at the latest version.
        assert!(cache.view(u64::MAX).expect("view").is_empty());
        w.commit(5).expect("commit");
        assert!(ids(&cache, 4).is_empty());
        assert_eq!(ids(&cache, 5), vec![b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(cache.last_committed_version(), Some(5));

        let mut w = cache.writer();
        w.upsert(b"a", &[9.0, 9.0]).expect("upsert");
        assert!(w.delete(b"b"));
        assert!(!w.delete(b"zz"));
        w.commit(7).expect("commit");
        let old = cache.view(6).expect("view");
        let new = cache.view(7).expect("view");
        let a_old = old.row_of(b"a").expect("a at 6");
        let a_new = new.row_of(b"a").expect("a at 7");
        assert_ne!(a_old, a_new);
        assert_eq!(old.vector(a_old), Some(&[1.0, 2.0][..]));
        assert_eq!(new.vector(a_new), Some(&[9.0, 9.0][..]));
        assert!(new.row_of(b"b").is_none() && old.row_of(b"b").is_some());
        assert_eq!((old.len(), new.len()), (2, 1));
    }

    #[test]
    fn rollback_leaves_nothing_and_reuses_slots() {
        let cache = VectorCache::new(1, Metric::Dot).expect("cache");
        let mut w = cache.writer();
        w.upsert(b"x", &[1.0]).expect("upsert");
        drop(w);
        let mut w = cache.writer();
        w.upsert(b"y", &[2.0]).expect("upsert");
        w.commit(1).expect("commit");
        let view = cache.view(1).expect("view");
        assert_eq!(view.row_count(), 1);
        assert_eq!(view.row_of(b"y"), Some(RowId(0)));
        assert_eq!(view.row_of(b"x"), None);
        assert_eq!(cache.retired_fraction(), 0.0);
    }

    #[test]
    fn repeated_ops_in_one_transaction() {
        let cache = VectorCache::new(1, Metric::L2).expect("cache");
        let mut w = cache.writer();
        w.upsert(b"a", &[1.0]).expect("upsert");
        w.upsert(b"a", &[2.0]).expect("upsert");
        w.upsert(b"b", &[3.0]).expect("upsert");
        assert!(w.delete(b"b"));
        assert!(!w.delete(b"b"));
        w.upsert(b"c", &[4.0]).expect("upsert");
        assert!(w.delete(b"c"));
        w.upsert(b"c", &[5.0]).expect("upsert");
        w.commit(1).expect("commit");
        let view = cache.view(1).expect("view");
        let a = view.row_of(b"a").expect("a");
        assert_eq!(view.vector(a), Some(&[2.0][..]));
        assert!(view.row_of(b"b").is_none());
        let c = view.row_of(b"c").expect("c");
        assert_eq!(view.vector(c), Some(&[5.0][..]));
        assert_eq!(view.len(), 2);
        // Rows: a, b (cancelled), c (cancelled), c.
        assert_eq!(view.row_count(), 4);
        assert_eq!(cache.retired_fraction(), 0.5);
    }

    #[test]
    fn versions_must_increase() {
        let cache = VectorCache::new(1, Metric::L2).expect("cache");
        cache.writer().commit(3).expect("empty commit");
        let mut w = cache.writer();
        w.upsert(b"a", &[1.0]).expect("upsert");
        assert!(matches!(
            w.commit(3),
            Err(Error::VersionNotIncreasing { version: 3, last: 3 })
        ));
        assert!(matches!(
            cache.writer().commit(u64::MAX),
            Err(Error::ReservedVersion)
        ));
        assert!(cache.view(u64::MAX).expect("view").is_empty());
        cache.writer().commit(4).expect("commit");
    }

    #[test]
    fn handles_are_thread_safe() {
        fn send<T: Send>() {}
        fn sync<T: Sync>() {}
        send::<Writer<'static>>();
        send::<CacheView>();
        sync::<CacheView>();
        send::<VectorCache>();
        sync::<VectorCache>();
    }

    #[test]
    fn one_writer_at_a_time() {
        let cache = VectorCache::new(1, Metric::L2).expect("cache");
        let mut first = cache.writer();
        std::thread::scope(|scope| {
            let second = scope.spawn(|| cache.writer().commit(2));
            std::thread::sleep(Duration::from_millis(50));
            // If the second writer had not waited, it would have committed
            // version 2 and this commit would be refused.
            let moved = scope.spawn(move || {
                first.upsert(b"a", &[1.0]).expect("upsert");
                first.commit(1)
            });
            moved.join().expect("join").expect("first commit");
            second.join().expect("join").expect("second commit");
        });
        assert_eq!(cache.last_committed_version(), Some(2));
        assert_eq!(cache.view(1).expect("view").len(), 1);
    }
}
