//! Batched search: many queries in one pass over the rows.
//!
//! The rows are cut into blocks of about 256 KiB, spread over the threads;
//! each worker keeps one top-k per query and the workers' heaps are merged
//! at the end. Within a block the visible rows are listed once, then taken
//! in tiles of about 24 KiB (they stay in L1 while every query of the batch
//! is compared with them; a query stays in L1 across its tile). A distance
//! above the query's current k-th best is dropped with one float compare,
//! before any heap work. Each (query, row) distance is computed by the same
//! kernel as [`CacheView::search`], so the results are identical to one
//! search per query.
//!
//! At high dimension the pass is bound by the distance kernel, not by
//! memory: simsimd's f32 kernels keep one accumulator, so one distance at
//! dim 384 is a chain of 24 dependent FMAs, and blocking cannot shorten it.

use std::num::NonZeroUsize;
use std::ops::Range;

use crate::error::{Error, Result};
use crate::row::RowId;
use crate::search::Hit;
use crate::topk::TopK;
use crate::view::CacheView;

/// Target bytes of vectors per block (one parallel task).
const BLOCK_BYTES: usize = 256 << 10;
/// Target bytes of vectors per tile (L1 is 32–48 KiB on current x86 cores).
const TILE_BYTES: usize = 24 << 10;

/// One worker's state: a top-k per query, their bounds, and scratch for the
/// visible rows of a block (reused, so no allocation per block).
struct Worker<'v> {
    tops: Vec<TopK<'v>>,
    /// `tops[q].bound()`, cached: distances above it cannot enter.
    bounds: Vec<f32>,
    visible: Vec<usize>,
}

impl<'v> Worker<'v> {
    fn new(k: NonZeroUsize, n: usize) -> Self {
        Worker {
            tops: vec![TopK::with_k(k); n],
            bounds: vec![f32::INFINITY; n],
            visible: Vec::new(),
        }
    }

    fn merge(mut self, other: Worker<'v>) -> Self {
        for (a, b) in self.tops.iter_mut().zip(other.tops) {
            a.merge(b);
        }
        for (bound, top) in self.bounds.iter_mut().zip(&self.tops) {
            *bound = top.bound();
        }
        self
    }
}

impl CacheView {
    /// The k nearest visible rows to each query of `queries` (`n × dim`
    /// floats, row-major), in query order. Same results as calling
    /// [`search`](Self::search) per query. `threads` as for `search`.
    pub fn search_batch(&self, queries: &[f32], k: usize, threads: usize) -> Result<Vec<Vec<Hit>>> {
        let dim = self.dim();
        if queries.len() % dim != 0 {
            return Err(Error::BatchShape {
                len: queries.len(),
                dim,
            });
        }
        for (index, query) in queries.chunks_exact(dim).enumerate() {
            self.check_query(query, index)?;
        }
        let k = NonZeroUsize::new(k).ok_or(Error::ZeroK)?;
        let n = queries.len() / dim;
        if n == 0 {
            return Ok(Vec::new());
        }
        let block_rows = (BLOCK_BYTES / (dim * std::mem::size_of::<f32>())).max(16);
        let ranges = self.snap.ranges(block_rows);
        let worker = crate::pool::fold(
            threads,
            &ranges,
            || Worker::new(k, n),
            |mut worker, range| {
                self.scan_block(queries, range.clone(), &mut worker);
                worker
            },
            Worker::merge,
        )?;
        Ok(worker
            .tops
            .into_iter()
            .map(|top| top.into_sorted_vec().into_iter().map(Hit::from).collect())
            .collect())
    }

    fn scan_block<'v>(&'v self, queries: &[f32], range: Range<usize>, worker: &mut Worker<'v>) {
        let Some(seg) = self.snap.segment(range) else {
            return;
        };
        let dim = self.dim();
        let Worker {
            tops,
            bounds,
            visible,
        } = worker;
        visible.clear();
        visible.extend((0..seg.len()).filter(|&i| seg.visible(i, self.version)));
        let kernel = self.metric().kernel();
        let base = seg.base();
        let tile_rows = (TILE_BYTES / (dim * std::mem::size_of::<f32>())).max(1);
        for tile in visible.chunks(tile_rows) {
            for ((query, top), bound) in queries
                .chunks_exact(dim)
                .zip(tops.iter_mut())
                .zip(bounds.iter_mut())
            {
                for &i in tile {
                    let distance = kernel(query, seg.vector(i));
                    // Equal distances may still enter on the id: only skip above.
                    if distance > *bound {
                        continue;
                    }
                    if top.push(distance, seg.id(i), RowId((base + i) as u32)) {
                        *bound = top.bound();
                    }
                }
            }
        }
    }
}
