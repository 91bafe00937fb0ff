//! [`CacheView`]: the rows of a cache as of one version.

use std::sync::{Arc, PoisonError};

use crate::arena::ArenaSnapshot;
use crate::cache::Generation;
use crate::metric::Metric;
use crate::row::RowId;

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

    /// The version this view reads at.
    pub fn version(&self) -> u64 {
        self.version
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

    /// The visible rows, ascending.
    pub fn rows(&self) -> impl Iterator<Item = RowId> + '_ {
        (0..self.snap.rows())
            .filter(|&r| self.snap.visible(r, self.version))
            .map(|r| RowId(r as u32))
    }
}
