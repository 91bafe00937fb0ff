//! Batched search: many queries in one pass over the rows.
//!
//! The rows are cut into blocks of about 256 KiB, spread over the threads;
//! each worker keeps one top-k per query and the workers' heaps are merged
//! at the end. Within a block the visible rows are taken [`RB`] at a time
//! (they stay in L1) and compared with the queries [`QB`] at a time by the
//! register-blocked kernel of [`crate::blocked`].
//!
//! The blocked sums only rule rows out: a row whose lower bound (see
//! [`Approx`]) lies above the query's current k-th best distance cannot
//! enter. Every other row is scored by the same simsimd kernel as
//! [`CacheView::search`] and offered to the heap, so the results are
//! identical to one search per query. Past the first k rows of each query,
//! few rows come near the k-th best, so most pairs cost only their share of
//! the blocked kernel.

use std::num::NonZeroUsize;
use std::ops::Range;

use crate::blocked::{Approx, Cut, Kernel, QB, RB};
use crate::error::{Error, Result};
use crate::metric::squared_norm;
use crate::row::RowId;
use crate::search::Hit;
use crate::topk::TopK;
use crate::view::CacheView;

/// Target bytes of vectors per block (one parallel task).
const BLOCK_BYTES: usize = 256 << 10;

/// The queries of a batch, with what every block needs about them.
struct Queries<'q> {
    vectors: Vec<&'q [f32]>,
    /// `‖q‖²`, for the cut.
    norms: Vec<f32>,
    kernel: Kernel,
    approx: Approx,
    /// The single-search kernel: scores every row the cut keeps.
    exact: fn(&[f32], &[f32]) -> f32,
}

/// One worker's state: a top-k per query, their bounds, and scratch for the
/// visible rows of a block (reused, so no allocation per block).
struct Worker<'v> {
    tops: Vec<TopK<'v>>,
    /// `tops[q].bound()`, cached: distances above it cannot enter.
    bounds: Vec<f32>,
    /// `approx.query_cut(norms[q], bounds[q])`, updated with the bound.
    cuts: Vec<f32>,
    visible: Vec<usize>,
}

impl<'v> Worker<'v> {
    fn new(k: NonZeroUsize, queries: &Queries<'_>) -> Self {
        let n = queries.vectors.len();
        let mut worker = Worker {
            tops: vec![TopK::with_k(k); n],
            bounds: vec![f32::INFINITY; n],
            cuts: vec![0.0; n],
            visible: Vec::new(),
        };
        worker.recut(queries);
        worker
    }

    fn recut(&mut self, queries: &Queries<'_>) {
        for ((cut, &bound), &norm) in self.cuts.iter_mut().zip(&self.bounds).zip(&queries.norms) {
            *cut = queries.approx.query_cut(norm, bound);
        }
    }

    fn merge(mut self, other: Worker<'v>, queries: &Queries<'_>) -> Self {
        for (a, b) in self.tops.iter_mut().zip(other.tops) {
            a.merge(b);
        }
        for (bound, top) in self.bounds.iter_mut().zip(&self.tops) {
            *bound = top.bound();
        }
        self.recut(queries);
        self
    }
}

/// Checks a batch of queries (`n × dim` floats, row-major) before any
/// runs: a length that is not whole queries is `BatchShape`, and a query of
/// the wrong dimension or not finite is `InvalidQuery` with its own index.
pub fn check_batch(queries: &[f32], dim: usize, metric: crate::Metric) -> Result<()> {
    if dim == 0 || !queries.len().is_multiple_of(dim) {
        return Err(Error::BatchShape {
            len: queries.len(),
            dim,
        });
    }
    for (index, query) in queries.chunks_exact(dim).enumerate() {
        crate::check_vector_for(query, dim, metric)
            .map_err(|source| Error::InvalidQuery { index, source })?;
    }
    Ok(())
}

impl CacheView {
    /// The k nearest visible rows to each query of `queries` (`n × dim`
    /// floats, row-major), in query order. Same results as calling
    /// [`search`](Self::search) per query. `threads` as for `search`.
    pub fn search_batch(&self, queries: &[f32], k: usize, threads: usize) -> Result<Vec<Vec<Hit>>> {
        self.search_batch_with(Kernel::detect(), queries, k, threads)
    }

    pub(crate) fn search_batch_with(
        &self,
        kernel: Kernel,
        queries: &[f32],
        k: usize,
        threads: usize,
    ) -> Result<Vec<Vec<Hit>>> {
        let dim = self.dim();
        check_batch(queries, dim, self.metric())?;
        let k = NonZeroUsize::new(k).ok_or(Error::ZeroK)?;
        let vectors: Vec<&[f32]> = queries.chunks_exact(dim).collect();
        if vectors.is_empty() {
            return Ok(Vec::new());
        }
        let queries = Queries {
            norms: vectors.iter().map(|q| squared_norm(q)).collect(),
            vectors,
            kernel,
            approx: Approx::new(self.metric(), dim),
            exact: self.metric().kernel(),
        };
        let block_rows = (BLOCK_BYTES / (dim * std::mem::size_of::<f32>())).max(16);
        let ranges = self.snap.ranges(block_rows);
        // One contiguous share of the blocks per thread: every worker starts
        // with empty heaps and scores rows exactly until its bounds tighten,
        // so the fewer, the better (rayon's own splitting cost ~15% on two
        // threads at 100k × 384).
        let worker = crate::pool::fold(
            threads,
            true,
            &ranges,
            || Worker::new(k, &queries),
            |mut worker, range| {
                self.scan_block(&queries, range.clone(), &mut worker);
                worker
            },
            |a, b| a.merge(b, &queries),
        )?;
        Ok(worker
            .tops
            .into_iter()
            .map(|top| top.into_sorted_vec().into_iter().map(Hit::from).collect())
            .collect())
    }

    fn scan_block<'v>(&'v self, queries: &Queries<'_>, range: Range<usize>, worker: &mut Worker<'v>) {
        let Some(seg) = self.snap.segment(range) else {
            return;
        };
        let dim = self.dim();
        let Worker {
            tops,
            bounds,
            cuts,
            visible,
        } = worker;
        visible.clear();
        if self.all_visible() {
            visible.extend(0..seg.len());
        } else {
            visible.extend((0..seg.len()).filter(|&i| seg.visible(i, self.version)));
        }
        let base = seg.base();
        let approx = &queries.approx;
        let n = queries.vectors.len();
        let mut dots = [[0f32; RB]; QB];
        let mut groups = visible.chunks(RB).peekable();
        while let Some(rows) = groups.next() {
            // A short group repeats its last row (or query); the bits of
            // the repeats are cleared from `kept`.
            let vectors = |rows: &[usize]| -> [&[f32]; RB] {
                let last = rows.len() - 1;
                std::array::from_fn(|j| seg.vector(rows[j.min(last)]))
            };
            let xs = vectors(rows);
            let next = groups.peek().map(|next| vectors(next));
            let calls = n.div_ceil(QB);
            let row_cuts = queries
                .kernel
                .squared_norms(&xs, dim)
                .map(|bb| approx.row_cut(bb));
            let row_bits = (1u16 << rows.len()) - 1;
            for (call, first) in (0..n).step_by(QB).enumerate() {
                if let Some(next) = &next {
                    queries.kernel.prefetch(next, call, calls);
                }
                let count = (n - first).min(QB);
                let pick = |i: usize| first + i.min(count - 1);
                let qs: [&[f32]; QB] = std::array::from_fn(|i| queries.vectors[pick(i)]);
                let cut = Cut {
                    approx,
                    queries: std::array::from_fn(|i| cuts[pick(i)]),
                    rows: row_cuts,
                };
                let mut kept = queries.kernel.dots(&qs, &xs, dim, &cut, &mut dots);
                // Only real (query, row) pairs.
                kept &= (0..count).fold(0u16, |m, i| m | row_bits << (RB * i));
                while kept != 0 {
                    let bit = kept.trailing_zeros() as usize;
                    kept &= kept - 1;
                    let (i, j) = (bit / RB, bit % RB);
                    let q = first + i;
                    let distance = (queries.exact)(qs[i], xs[j]);
                    // Equal distances may still enter on the id: only skip above.
                    if distance > bounds[q] {
                        continue;
                    }
                    let row = rows[j];
                    if tops[q].push(distance, seg.id(row), RowId((base + row) as u32)) {
                        bounds[q] = tops[q].bound();
                        cuts[q] = approx.query_cut(queries.norms[q], bounds[q]);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CacheConfig, Metric, VectorCache};

    /// The portable kernel serves CPUs without AVX-512; check it here too,
    /// on a dimension that leaves a tail and groups cut short.
    #[test]
    fn every_kernel_gives_the_hits_of_one_search_per_query() {
        let dim = 37;
        let mut state = 0x853c_49e6_748f_ea9b_u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % 41) as f32 - 20.0
        };
        for metric in Metric::ALL {
            let cache =
                VectorCache::with_config(CacheConfig::new(dim, metric).chunk_rows(100)).expect("config");
            let mut w = cache.writer();
            for i in 0..703u32 {
                let v: Vec<f32> = (0..dim).map(|_| next()).collect();
                w.upsert(&i.to_be_bytes(), &v).expect("upsert");
            }
            w.commit(1).expect("commit");
            let view = cache.view(1).expect("view");
            let queries: Vec<f32> = (0..9 * dim).map(|_| next()).collect();
            for kernel in [Kernel::Portable, Kernel::detect()] {
                for k in [1, 10] {
                    let batch = view.search_batch_with(kernel, &queries, k, 1).expect("batch");
                    for (query, hits) in queries.chunks_exact(dim).zip(&batch) {
                        assert_eq!(
                            hits,
                            &view.search(query, k, 1).expect("search"),
                            "{kernel:?} {metric} k {k}"
                        );
                    }
                }
            }
        }
    }
}
