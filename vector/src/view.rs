//! [`CacheView`]: the rows of a cache as of one version.

use std::sync::{Arc, PoisonError, RwLockReadGuard};

use crate::arena::ArenaSnapshot;
use crate::cache::Generation;
use crate::memo::Memo;
use crate::metric::Metric;
use crate::row::{RowId, RowMask};
use crate::tags::{TagIndex, TagRange};

/// The rows of a [`VectorCache`](crate::VectorCache) visible at one version.
///
/// Cheap to take, holds no lock, keeps the rows it sees alive (also across
/// compaction), and never changes: later commits have higher versions, so
/// they are invisible to it. Search methods live in the `search` module.
pub struct CacheView {
    pub(crate) generation: Arc<Generation>,
    pub(crate) snap: ArenaSnapshot,
    pub(crate) version: u64,
    visible: usize,
}

impl std::fmt::Debug for CacheView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheView")
            .field("version", &self.version)
            .field("dim", &self.dim())
            .field("metric", &self.metric())
            .field("row_count", &self.snap.rows())
            .finish_non_exhaustive()
    }
}

impl CacheView {
    pub(crate) fn new(
        generation: Arc<Generation>,
        snap: ArenaSnapshot,
        version: u64,
        visible: usize,
    ) -> Self {
        CacheView {
            generation,
            snap,
            version,
            visible,
        }
    }

    /// Whether the rows keep codes ([`CacheConfig::codes`](crate::CacheConfig::codes)).
    pub fn has_codes(&self) -> bool {
        self.snap.has_codes()
    }

    /// Whether every row the snapshot spans is visible at this view's
    /// version, so searches may skip the per-row version check (and its two
    /// cache lines). The visible rows are some of the snapshot's (a commit
    /// publishes its rows before its version can be read), so as many means
    /// all of them.
    pub(crate) fn all_visible(&self) -> bool {
        self.visible == self.snap.rows()
    }

    /// The version this view reads at.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// What searches derived from this view's generation of rows: values a
    /// later view of the same generation may reuse (see [`Memo`]). A
    /// compaction starts a new generation, with an empty memo.
    pub fn memo(&self) -> &Memo {
        &self.generation.memo
    }

    /// Components per vector.
    pub fn dim(&self) -> usize {
        self.generation.config.dim
    }

    /// The distance metric.
    pub fn metric(&self) -> Metric {
        self.generation.config.metric
    }

    /// Rows visible at this view's version (recorded at each commit, so no
    /// pass over the rows).
    pub fn len(&self) -> usize {
        self.visible
    }

    /// Whether no row is visible.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Rows the view spans, visible or not: every [`RowId`] it returns is
    /// below this. Size a [`RowMask`](crate::RowMask) with it.
    pub fn row_count(&self) -> usize {
        self.snap.rows()
    }

    /// Whether `row` is visible at this view's version.
    pub fn is_visible(&self, row: RowId) -> bool {
        self.snap.visible(row.index(), self.version)
    }

    /// The id of a visible row.
    pub fn id(&self, row: RowId) -> Option<&[u8]> {
        self.is_visible(row).then(|| self.snap.id(row.index())).flatten()
    }

    /// The vector of a visible row.
    pub fn vector(&self, row: RowId) -> Option<&[f32]> {
        self.is_visible(row)
            .then(|| self.snap.vector(row.index()))
            .flatten()
    }

    /// The row holding `id`'s vector at this view's version.
    ///
    /// Takes the generation's index read lock for the lookup (a hash probe
    /// and a walk over the id's rows); commits take its write lock only to
    /// link new rows.
    pub fn row_of(&self, id: &[u8]) -> Option<RowId> {
        let index = self
            .generation
            .index
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        let rows = self.snap.rows();
        let found = index
            .chain(index.hash(id))
            .filter(|&row| (row as usize) < rows)
            .find(|&row| {
                self.snap.visible(row as usize, self.version) && self.snap.id(row as usize) == Some(id)
            })
            .map(RowId);
        found
    }

    /// Whether every row carries its tags for `field`, so that
    /// [`tagged_rows`](Self::tagged_rows) answers for it.
    pub fn tags_cover(&self, field: &str) -> bool {
        self.tags_for(field).is_some()
    }

    /// The generation's posting lists, read-locked, if every row carries its
    /// tags for `field`.
    fn tags_for(&self, field: &str) -> Option<RwLockReadGuard<'_, TagIndex>> {
        let tags = self
            .generation
            .tags
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        tags.covers(field).then_some(tags)
    }

    /// About how many rows [`tagged_rows`](Self::tagged_rows) would return
    /// (it counts retired rows and repeats too), without collecting them:
    /// one step per tag in the ranges. `None` as for `tagged_rows`.
    pub fn tagged_count(&self, field: &str, ranges: &[TagRange<'_>]) -> Option<usize> {
        Some(self.tags_for(field)?.count_in(ranges))
    }

    /// The visible rows carrying a tag in one of `ranges` (start and end
    /// bounds on the tag bytes), ascending and distinct; `None` when some
    /// row may lack its tags for `field` (written untagged, or before the
    /// field was tagged), so that only the caller's index can answer.
    pub fn tagged_rows(&self, field: &str, ranges: &[TagRange<'_>]) -> Option<Vec<RowId>> {
        self.tagged(field, ranges, true)
    }

    /// [`tagged_rows`](Self::tagged_rows) plus, possibly, rows of the view
    /// that are not visible at its version (retired, or not yet born): for
    /// a caller that checks each row's visibility as it reads the row
    /// anyway, which spares a second random read of every row's versions.
    pub fn tagged_candidates(&self, field: &str, ranges: &[TagRange<'_>]) -> Option<Vec<RowId>> {
        self.tagged(field, ranges, false)
    }

    /// [`tagged_candidates`](Self::tagged_candidates) as a mask of the
    /// view's rows, set straight from the posting lists: for a bitmap scan,
    /// which checks each row's visibility as it reads the row.
    pub fn tagged_candidate_mask(&self, field: &str, ranges: &[TagRange<'_>]) -> Option<RowMask> {
        let tags = self.tags_for(field)?;
        // Rows linked after this view's snapshot lie past its rows.
        let n = self.snap.rows();
        let mut mask = RowMask::new(n);
        tags.lists_in(ranges, |rows| {
            for &r in rows.iter().take_while(|&&r| (r as usize) < n) {
                mask.set(RowId(r));
            }
        });
        Some(mask)
    }

    fn tagged(&self, field: &str, ranges: &[TagRange<'_>], visible_only: bool) -> Option<Vec<RowId>> {
        /// Rows collected before the first regrowth.
        const TAGGED_ROWS_ROOM: usize = 256;
        // Room for a selective filter's rows without regrowing.
        let mut rows = Vec::with_capacity(TAGGED_ROWS_ROOM);
        self.tags_for(field)?.rows_in(ranges, &mut rows);
        // Rows linked after this view's snapshot lie past its rows.
        let n = self.snap.rows();
        if visible_only {
            rows.retain(|&r| self.snap.visible(r as usize, self.version));
        } else {
            rows.retain(|&r| (r as usize) < n);
        }
        // Distinct and ascending (a row under several tags, an array's
        // values, is kept once; ascending rows make the gather's reads
        // sequential): a sort when the rows are few, else a bitset, which
        // costs a pass over a bit per row of the view.
        let m = rows.len();
        if rows.windows(2).all(|w| w[0] < w[1]) {
            // One posting list, or lists that follow each other.
            return Some(rows.into_iter().map(RowId).collect());
        }
        if m.saturating_mul(m.max(2).ilog2() as usize).saturating_mul(64) < n {
            rows.sort_unstable();
            rows.dedup();
            return Some(rows.into_iter().map(RowId).collect());
        }
        let mut seen = RowMask::new(n);
        for &r in &rows {
            seen.set(RowId(r));
        }
        let mut out = Vec::with_capacity(m);
        seen.extend_rows(&mut out);
        Some(out)
    }

    /// The visible rows, ascending.
    pub fn rows(&self) -> impl Iterator<Item = RowId> + '_ {
        (0..self.snap.rows())
            .filter(|&r| self.snap.visible(r, self.version))
            .map(|r| RowId(r as u32))
    }
}
