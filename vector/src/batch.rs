//! Batched search: many queries in one pass over the rows.
//!
//! The rows are cut into blocks of about 256 KiB (they stay in L2 while every
//! query of the batch is compared with them), blocks are spread over the
//! threads, and each worker keeps one top-k per query; the per-worker heaps
//! are merged at the end. Each (query, row) distance is computed by the same
//! kernel as [`CacheView::search`], so the results are identical to one
//! search per query.

use std::num::NonZeroUsize;
use std::ops::Range;

use crate::error::{Error, Result};
use crate::row::RowId;
use crate::search::Hit;
use crate::topk::TopK;
use crate::view::CacheView;

/// Target bytes of vectors per block.
const BLOCK_BYTES: usize = 256 << 10;

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
        let tops = crate::pool::fold(
            threads,
            &ranges,
            || vec![TopK::with_k(k); n],
            |mut tops, range| {
                self.scan_block(queries, range.clone(), &mut tops);
                tops
            },
            |mut a, b| {
                for (x, y) in a.iter_mut().zip(b) {
                    x.merge(y);
                }
                a
            },
        )?;
        Ok(tops
            .into_iter()
            .map(|top| top.into_sorted_vec().into_iter().map(Hit::from).collect())
            .collect())
    }

    fn scan_block<'v>(&'v self, queries: &[f32], range: Range<usize>, tops: &mut [TopK<'v>]) {
        let Some(seg) = self.snap.segment(range) else {
            return;
        };
        let visible: Vec<usize> = (0..seg.len()).filter(|&i| seg.visible(i, self.version)).collect();
        let kernel = self.metric().kernel();
        let base = seg.base();
        for (query, top) in queries.chunks_exact(self.dim()).zip(tops) {
            for &i in &visible {
                let distance = kernel(query, seg.vector(i));
                top.push(distance, seg.id(i), RowId((base + i) as u32));
            }
        }
    }
}
