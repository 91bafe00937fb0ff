//! Exact top-k search on a [`CacheView`]: full scan, scan with a lazy filter,
//! bitmap scan, and gather over given rows.
//!
//! Every form computes the same distances with the same kernel and selects
//! with the same total order `(distance, id)`, so they agree exactly with one
//! another, whatever the thread count.

use std::cell::Cell;
use std::num::NonZeroUsize;
use std::ops::{Add, Range};

use crate::code::{Cap, Pruner, QueryCode};
use crate::error::{Error, Result};
use crate::metric::check_vector_for;
use crate::row::{RowId, RowMask};
use crate::topk::{Candidate, SharedBound, TopK};
use crate::view::CacheView;

/// How many rows ahead gather and scan ask for a row's vector: 4 measured
/// best of 1, 2, 4 and 8 for gather at 1% and 0.1% of 100k × 384 rows.
const PREFETCH_AHEAD: usize = 4;

/// How many cache lines of a row a sequential scan asks for ahead: all.
const WHOLE_ROW: usize = usize::MAX;

/// How many cache lines of a scattered row (gather, a masked scan) are
/// asked for ahead: its first 768 bytes. Once the row's reads begin, the
/// hardware's prefetcher streams the rest; asking for every line of a
/// 1.5 KiB row (dim 384) four rows ahead keeps more lines in flight than
/// the core tracks, and the row being read waits behind them. Measured on
/// 100k × 384 rows, k = 10 (the sweep bench, one run each, same session):
/// Slate's gather handed 1% of rows took 89 µs prefetching whole rows and
/// 80–82 µs prefetching 8 or 12 lines, at 0.1% 10.5 µs and 9.2 µs (4, 6 and
/// 16 lines: 9.3–10.1 µs); the masked scan at 1% 115 µs and 104–108 µs,
/// and at 10% unchanged with 12 lines (1.26 ms) where 8 lines cost 1.38 ms.
const SCATTERED_LINES: usize = 12;

/// Fewest rows a gather bounds by their codes before reading vectors.
/// Few rows are often still in cache from the last query on them, where a
/// code's bound costs about what a distance does: on 100 rows of 100k × 384
/// (the sweep's 0.1% point) bounding them first took 13.6–13.7 µs against
/// 12.2–12.6 µs without, while on 1,000 rows (1%), read from memory, it
/// took 57 µs against 216 µs (one session, same runs).
pub const PRUNE_MIN_ROWS: usize = 256;

/// Rows per parallel task of a scan. A masked scan's look-ahead starts
/// afresh in each task, so the first rows of each are read cold (what the
/// planner's `mask_cold` prices).
pub const TASK_ROWS: usize = 512;

/// A search result.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// The row in the searched view.
    pub row: RowId,
    /// The row's id bytes.
    pub id: Box<[u8]>,
    /// Distance to the query (smaller is nearer).
    pub distance: f32,
}

impl From<Candidate<'_>> for Hit {
    fn from(c: Candidate<'_>) -> Self {
        Hit {
            row: c.row,
            id: c.id.into(),
            distance: c.distance,
        }
    }
}

/// Work counters of a scan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SearchStats {
    /// Visible rows considered: their distance computed, or bounded from
    /// their code and found too far (then counted in `rows_pruned` too).
    pub rows_scanned: u64,
    /// Rows of `rows_scanned` whose code's bound ruled them out, so their
    /// vector was never read (rows with codes: gather and every scan; a
    /// scan under a lazy filter once its heap is full).
    pub rows_pruned: u64,
    /// Calls of the filter predicate.
    pub predicate_calls: u64,
    /// Candidates that entered a top-k heap (per-thread heaps included).
    pub heap_pushes: u64,
}

impl Add for SearchStats {
    type Output = SearchStats;

    fn add(self, o: SearchStats) -> SearchStats {
        SearchStats {
            rows_scanned: self.rows_scanned + o.rows_scanned,
            rows_pruned: self.rows_pruned + o.rows_pruned,
            predicate_calls: self.predicate_calls + o.predicate_calls,
            heap_pushes: self.heap_pushes + o.heap_pushes,
        }
    }
}

/// A row filter checked after the distance: `(row, id) -> keep?`.
pub type RowPredicate<'p> = &'p (dyn Fn(RowId, &[u8]) -> bool + Sync);

/// Which rows a scan considers, beyond visibility.
#[derive(Clone, Copy)]
struct Filters<'p> {
    /// Rows outside the mask are skipped before any distance.
    mask: Option<&'p RowMask>,
    /// Checked only when a row's distance would enter the heap.
    lazy: Option<RowPredicate<'p>>,
}

impl CacheView {
    pub(crate) fn check_query(&self, query: &[f32], index: usize) -> Result<()> {
        check_vector_for(query, self.dim(), self.metric())
            .map_err(|source| Error::InvalidQuery { index, source })
    }

    /// The k nearest visible rows to `query`, nearest first (ties: smaller id
    /// first).
    ///
    /// `threads`: 0 runs on the current rayon pool, 1 on the calling thread,
    /// `n > 1` on a cached pool of `min(n, cores)` threads.
    pub fn search(&self, query: &[f32], k: usize, threads: usize) -> Result<Vec<Hit>> {
        let (hits, _) = self.scan(
            query,
            k,
            threads,
            Filters {
                mask: None,
                lazy: None,
            },
        )?;
        Ok(hits)
    }

    /// Scan with a lazy filter: the k nearest visible rows for which `pred`
    /// holds. `pred` is called for a row only if its distance would enter
    /// the current top-k, so for few rows when the filter is unselective.
    /// Exact: returns k hits whenever k visible rows match.
    pub fn search_lazy(
        &self,
        query: &[f32],
        k: usize,
        threads: usize,
        pred: RowPredicate<'_>,
    ) -> Result<(Vec<Hit>, SearchStats)> {
        self.scan(
            query,
            k,
            threads,
            Filters {
                mask: None,
                lazy: Some(pred),
            },
        )
    }

    /// Bitmap scan: the k nearest visible rows among those in `mask`; rows
    /// outside it cost no distance.
    pub fn search_mask(&self, query: &[f32], k: usize, threads: usize, mask: &RowMask) -> Result<Vec<Hit>> {
        Ok(self.search_mask_counted(query, k, threads, mask)?.0)
    }

    /// [`search_mask`](Self::search_mask), with what it did.
    pub fn search_mask_counted(
        &self,
        query: &[f32],
        k: usize,
        threads: usize,
        mask: &RowMask,
    ) -> Result<(Vec<Hit>, SearchStats)> {
        self.scan(
            query,
            k,
            threads,
            Filters {
                mask: Some(mask),
                lazy: None,
            },
        )
    }

    /// Bitmap scan with a lazy residual: the k nearest visible rows in
    /// `mask` for which `pred` holds; rows outside the mask cost no distance,
    /// and `pred` runs only for rows whose distance would enter the top-k.
    pub fn search_mask_lazy(
        &self,
        query: &[f32],
        k: usize,
        threads: usize,
        mask: &RowMask,
        pred: RowPredicate<'_>,
    ) -> Result<(Vec<Hit>, SearchStats)> {
        self.scan(
            query,
            k,
            threads,
            Filters {
                mask: Some(mask),
                lazy: Some(pred),
            },
        )
    }

    /// Gather: the k nearest among `rows` (duplicates, invisible and unknown
    /// rows are ignored); distances only for those rows. When the rows keep
    /// codes and there are more than [`PRUNE_MIN_ROWS`] of them, each row's
    /// code bounds its distance first, and only the rows whose bound could
    /// still place them among the k nearest have their vector read.
    pub fn search_rows(&self, query: &[f32], k: usize, rows: &[RowId]) -> Result<Vec<Hit>> {
        Ok(self.gather(query, k, rows, None)?.0)
    }

    /// [`search_rows`](Self::search_rows), with its work counters.
    pub fn search_rows_counted(
        &self,
        query: &[f32],
        k: usize,
        rows: &[RowId],
    ) -> Result<(Vec<Hit>, SearchStats)> {
        self.gather(query, k, rows, None)
    }

    /// Gather with a lazy filter: the k nearest among `rows` for which
    /// `pred` holds; `pred` runs only for rows whose distance would enter the
    /// current top-k.
    pub fn search_rows_lazy(
        &self,
        query: &[f32],
        k: usize,
        rows: &[RowId],
        pred: RowPredicate<'_>,
    ) -> Result<(Vec<Hit>, SearchStats)> {
        self.gather(query, k, rows, Some(pred))
    }

    fn gather(
        &self,
        query: &[f32],
        k: usize,
        rows: &[RowId],
        lazy: Option<RowPredicate<'_>>,
    ) -> Result<(Vec<Hit>, SearchStats)> {
        self.check_query(query, 0)?;
        let k = NonZeroUsize::new(k).ok_or(Error::ZeroK)?;
        // Ascending and distinct already (as the row tags give them), or made so.
        let rows: std::borrow::Cow<'_, [RowId]> = if rows.windows(2).all(|w| w[0] < w[1]) {
            rows.into()
        } else {
            let mut rows = rows.to_vec();
            rows.sort_unstable();
            rows.dedup();
            rows.into()
        };
        let kernel = self.metric().kernel();
        let mut top = TopK::with_k(k);
        let mut stats = SearchStats::default();
        let check = !self.all_visible();
        // With no filter to check, every visible row counts towards the k
        // nearest, so the codes can rule rows out before their vectors are
        // read; the survivors are visible and already counted.
        // Codes bound rows only when there are enough of them to pay.
        let bounded = rows.len() > k.get().max(PRUNE_MIN_ROWS) && self.snap.has_codes();
        let survivors: Vec<RowId>;
        let (rows, check, counted) = if bounded && lazy.is_none() {
            survivors = self.prune(query, k.get(), &rows, check, &mut stats);
            (&survivors[..], false, true)
        } else {
            (&rows[..], check, false)
        };
        // With a filter to check, a rejected row does not count towards the
        // k, so no cap comes from bounds alone; but once the heap is full,
        // its bound caps what can enter, and a row whose code puts it
        // beyond that is skipped unread and unchecked.
        let live = (bounded && lazy.is_some()).then(|| QueryCode::new(self.metric(), query));
        let mut cap = live.as_ref().map(Cap::new);
        let full = Cell::new(false);
        // Rows are scattered: each one's vector (or, once the heap is full
        // and codes can rule rows out, its code) is asked for a few rows
        // ahead, so its loads overlap the distances before it.
        with_lookahead(
            rows,
            |row| {
                if full.get() {
                    self.snap.prefetch_code(row.index(), check);
                } else {
                    self.snap.prefetch(row.index(), check, SCATTERED_LINES);
                }
            },
            |row| {
                let i = row.index();
                if check && !self.snap.visible(i, self.version) {
                    return;
                }
                if let (Some(code), Some(cap)) = (&live, &mut cap) {
                    let bound = f64::from(top.bound());
                    if bound.is_finite() {
                        if bound != cap.value() {
                            cap.set(bound);
                            full.set(true);
                        }
                        let seg = self.snap.segment(i..i + 1);
                        if let Some(b) =
                            seg.and_then(|s| s.code(0).and_then(|(codes, meta)| code.row(codes, meta)))
                        {
                            if cap.rules_out(&b) {
                                stats.rows_scanned += 1;
                                stats.rows_pruned += 1;
                                return;
                            }
                        }
                    }
                }
                // The vector straight from its chunk's base: the rows are
                // scattered, and each read waits on its address.
                let Some(vector) = self.snap.vector_at(i) else {
                    return;
                };
                let distance = kernel(query, vector);
                stats.rows_scanned += u64::from(!counted);
                // As in a scan: a row beyond the bound cannot enter, and its
                // id (on a cache line of its own) is never read.
                if distance > top.bound() {
                    return;
                }
                let Some(id) = self.snap.id(i) else {
                    return;
                };
                offer(&mut top, &mut stats, lazy, distance, id, row);
            },
        );
        Ok((top.into_sorted_vec().into_iter().map(Hit::from).collect(), stats))
    }

    /// The rows among `rows` (ascending, distinct) that may be among the
    /// `k` nearest visible ones, by their codes' bounds: the `k` smallest
    /// upper bounds cap the k-th distance, and a row whose lower bound
    /// exceeds that cap cannot enter. Invisible rows are dropped (looked
    /// up if `check`).
    fn prune(
        &self,
        query: &[f32],
        k: usize,
        rows: &[RowId],
        check: bool,
        stats: &mut SearchStats,
    ) -> Vec<RowId> {
        let code = QueryCode::new(self.metric(), query);
        let mut pruner = Pruner::new(&code, k, f64::INFINITY, rows.len().min(16 * k));
        with_lookahead(
            rows,
            |row| self.snap.prefetch_code(row.index(), check),
            |row| {
                let Some(seg) = self.snap.segment(row.index()..row.index() + 1) else {
                    return;
                };
                if check && !seg.visible(0, self.version) {
                    return;
                }
                pruner.offer(row, seg.code(0));
            },
        );
        let (kept, seen) = pruner.survivors();
        stats.rows_scanned += seen;
        stats.rows_pruned = stats.rows_scanned - kept.len() as u64;
        kept
    }

    fn scan(
        &self,
        query: &[f32],
        k: usize,
        threads: usize,
        filters: Filters<'_>,
    ) -> Result<(Vec<Hit>, SearchStats)> {
        self.check_query(query, 0)?;
        let k = NonZeroUsize::new(k).ok_or(Error::ZeroK)?;
        let ranges = self.snap.ranges(TASK_ROWS);
        // Row codes bound a range's rows before any vector is read (as
        // gather does): by a full heap's bound; before one is full, with
        // nothing to check, by the k smallest upper bounds.
        let coded = self
            .snap
            .has_codes()
            .then(|| QueryCode::new(self.metric(), query));
        // Each parallel fold keeps its own heap; the shared bound lets it
        // skip rows (and their filter checks) that another fold's full heap
        // already rules out. Under a lazy filter a heap checks every row
        // until it holds k matches, so each thread keeps one heap for its
        // whole share rather than one per split rayon would make.
        let shared = SharedBound::new();
        let (top, stats) = crate::pool::fold(
            threads,
            filters.lazy.is_some(),
            &ranges,
            || (TopK::with_k(k), SearchStats::default()),
            |(mut top, mut stats), range| {
                self.scan_range(
                    query,
                    range.clone(),
                    filters,
                    coded.as_ref(),
                    &shared,
                    &mut top,
                    &mut stats,
                );
                (top, stats)
            },
            |(mut a, sa), (b, sb)| {
                a.merge(b);
                (a, sa + sb)
            },
        )?;
        Ok((top.into_sorted_vec().into_iter().map(Hit::from).collect(), stats))
    }

    #[allow(clippy::too_many_arguments)]
    fn scan_range<'v>(
        &'v self,
        query: &[f32],
        range: Range<usize>,
        filters: Filters<'_>,
        coded: Option<&QueryCode>,
        shared: &SharedBound,
        top: &mut TopK<'v>,
        stats: &mut SearchStats,
    ) {
        let Some(seg) = self.snap.segment(range) else {
            return;
        };
        let kernel = self.metric().kernel();
        let base = seg.base();
        // `top.bound()` or a smaller one another task published, cached: a
        // distance above it cannot enter, so most rows cost one float compare
        // after their distance and no id, filter or heap access.
        let mut bound = top.bound().min(shared.get());
        let check = !self.all_visible();
        // With codes, a first pass bounds each row (of the segment, or under
        // the mask) from its code, and only the rows the cap cannot rule out
        // are visited below, as gather does. Exact, rounding included: a row
        // is ruled out only when its distance, as the kernel computes it,
        // must exceed the cap.
        // - Once a heap is full: its bound (or a smaller one another task
        //   published) is the cap; a row beyond it cannot enter, matching or
        //   not, and is neither read nor checked.
        // - Before, with nothing to check: every visible row counts towards
        //   the k nearest, so the k smallest upper bounds cap the k-th
        //   distance.
        // - Before, under a lazy filter: a row that fails it does not
        //   count, so no bound caps anything, and every row is read.
        let for_each_row = |bound_row: &mut dyn FnMut(usize)| match filters.mask {
            // In order: the hardware prefetcher follows.
            None => (0..seg.len()).for_each(bound_row),
            // Scattered: each masked row's code is asked for a few ahead.
            Some(mask) => for_each_masked(
                mask,
                base,
                seg.len(),
                |i| self.snap.prefetch_code(base + i, check),
                bound_row,
            ),
        };
        let survivors = match (coded, filters.lazy) {
            // Once a heap is full its bound caps the rows, filter or not: a
            // lower bound tested against it is all a row costs, where the
            // pass below also keeps the k smallest upper bounds (which
            // rarely beat a full heap's bound past the first tasks).
            (Some(code), _) if bound.is_finite() => {
                let mut cap = Cap::new(code);
                cap.set(f64::from(bound));
                let mut kept = Vec::new();
                let mut seen = 0u64;
                for_each_row(&mut |i| {
                    if check && !seg.visible(i, self.version) {
                        return;
                    }
                    seen += 1;
                    let b = seg.code(i).and_then(|(codes, meta)| code.row(codes, meta));
                    if !b.is_some_and(|b| cap.rules_out(&b)) {
                        kept.push(i as u32);
                    }
                });
                Some((kept, seen))
            }
            (Some(code), None) => {
                let mut pruner = Pruner::new(code, top.k(), f64::from(bound), 0);
                for_each_row(&mut |i| {
                    if !check || seg.visible(i, self.version) {
                        pruner.offer(i as u32, seg.code(i));
                    }
                });
                Some(pruner.survivors())
            }
            _ => None,
        }
        .map(|(kept, seen)| {
            // The survivors count as scanned when visited.
            let pruned = seen - kept.len() as u64;
            stats.rows_scanned += pruned;
            stats.rows_pruned += pruned;
            kept
        });
        let mut visit = |i: usize| {
            let row = RowId((base + i) as u32);
            if check && !seg.visible(i, self.version) {
                return;
            }
            let distance = kernel(query, seg.vector(i));
            stats.rows_scanned += 1;
            if distance > bound {
                return;
            }
            bound = bound.min(shared.get());
            if distance > bound {
                return;
            }
            if offer(top, stats, filters.lazy, distance, seg.id(i), row) {
                shared.offer(top);
                bound = top.bound().min(shared.get());
            }
        };
        if let Some(kept) = survivors {
            with_lookahead(
                &kept,
                |i| seg.prefetch(i as usize, check, SCATTERED_LINES),
                |i| visit(i as usize),
            );
            return;
        }
        // As in gather, the loads of a row a few ahead overlap this row's
        // distance.
        let Some(mask) = filters.mask else {
            for i in 0..seg.len() {
                seg.prefetch(i + PREFETCH_AHEAD, check, WHOLE_ROW);
                visit(i);
            }
            return;
        };
        // Under a mask, only its rows.
        for_each_masked(
            mask,
            base,
            seg.len(),
            |i| seg.prefetch(i, check, SCATTERED_LINES),
            visit,
        );
    }
}

/// Calls `visit` on the segment rows (`0..len`, row `base + i` of the view)
/// that `mask` holds, in order, found a word at a time in blocks, each
/// asked of `prefetch` a few rows ahead.
fn for_each_masked(
    mask: &RowMask,
    base: usize,
    len: usize,
    prefetch: impl Fn(usize),
    mut visit: impl FnMut(usize),
) {
    let mut picked = [0u32; TASK_ROWS];
    for start in (0..len).step_by(TASK_ROWS) {
        let end = (start + TASK_ROWS).min(len);
        let mut m = 0;
        mask.for_each_in(base + start..base + end, |row| {
            picked[m] = (row - base) as u32;
            m += 1;
        });
        with_lookahead(&picked[..m], |i| prefetch(i as usize), |i| visit(i as usize));
    }
}

/// Calls `visit` on each of `items` in order, having asked `prefetch` for
/// the item [`PREFETCH_AHEAD`] places on (and, first, for the leading ones).
fn with_lookahead<T: Copy>(items: &[T], prefetch: impl Fn(T), mut visit: impl FnMut(T)) {
    for &item in items.iter().take(PREFETCH_AHEAD) {
        prefetch(item);
    }
    for (j, &item) in items.iter().enumerate() {
        if let Some(&next) = items.get(j + PREFETCH_AHEAD) {
            prefetch(next);
        }
        visit(item);
    }
}

/// Offers a row to `top`, checking the lazy filter first only if the row
/// would enter; returns whether it was kept.
#[inline]
fn offer<'v>(
    top: &mut TopK<'v>,
    stats: &mut SearchStats,
    lazy: Option<RowPredicate<'_>>,
    distance: f32,
    id: &'v [u8],
    row: RowId,
) -> bool {
    if let Some(pred) = lazy {
        if !top.would_enter(distance, id) {
            return false;
        }
        stats.predicate_calls += 1;
        if !pred(row, id) {
            return false;
        }
    }
    let kept = top.push(distance, id, row);
    if kept {
        stats.heap_pushes += 1;
    }
    kept
}
