//! Vector search, plain and hybrid: the k nearest documents to a query vector
//! among those matching a filter, exactly, by one of three strategies.
//!
//! - **Gather**: the ID tier (an index scan, or a raw-tier pass over the
//!   documents when no index applies) yields the candidate documents;
//!   distances are computed for their rows only, and candidates are verified
//!   against the whole filter nearest first until k pass.
//! - **Scan** (lazy filter): every visible row is scanned; a row is checked
//!   against the filter (on its document bytes) only when its distance would
//!   enter the heap. Each row is visited once, so each verdict is computed once.
//! - **Bitmap**: the index's candidates become a row bitmap checked inline
//!   during the scan; the residual filter is checked lazily as in Scan.
//!
//! All three return exactly what a brute-force scan over the matching
//! documents returns (ties broken by document key); `Auto` picks the cheapest
//! by the cost model in [`CostModel`].

use std::cell::RefCell;
use std::ops::{Bound, ControlFlow};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bson::{Bson, Document};
use rayon::prelude::*;
use slate_core::{CollectionRead, KeyRange, Part};
use slate_vector::{CacheView, Hit, RowId, RowMask, TagRange};

use crate::exec::source_keys;
use crate::filter::Filter;
use crate::plan::{search_source, MergeOp, Source};
use crate::{Error, Result};

/// How a filtered search runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
#[non_exhaustive]
pub enum Strategy {
    /// Chosen from estimated costs.
    #[default]
    Auto,
    /// Distances for the candidates only.
    Gather,
    /// Full scan, filter checked lazily.
    Scan,
    /// Full scan over a row bitmap of the index's candidates (without an
    /// index: of the matches, found from the documents or kept).
    Bitmap,
}

impl FromStr for Strategy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(Strategy::Auto),
            "gather" => Ok(Strategy::Gather),
            "scan" => Ok(Strategy::Scan),
            "bitmap" => Ok(Strategy::Bitmap),
            other => Err(Error::InvalidQuery {
                reason: format!("unknown strategy {other:?}: use gather, scan, bitmap or auto"),
            }),
        }
    }
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Strategy::Auto => "auto",
            Strategy::Gather => "gather",
            Strategy::Scan => "scan",
            Strategy::Bitmap => "bitmap",
        })
    }
}

/// What a search asks for.
#[derive(Debug, Clone, Default)]
pub struct SearchSpec {
    /// The vector field.
    pub field: String,
    /// The query vector.
    pub query: Vec<f32>,
    /// How many hits at most.
    pub k: usize,
    /// Only documents matching this filter.
    pub filter: Option<Filter>,
    /// Fields of each hit's document (`None`: `_id` only).
    pub projection: Option<Vec<String>>,
    /// Forced strategy, or `Auto`.
    pub strategy: Strategy,
    /// Threads for the scan: 0 the shared pool, 1 the caller, n a pool of n.
    pub threads: usize,
    /// Neither use nor keep the matching rows of a filter no index narrows
    /// (see [`search`]): the search runs as a filter's first one does.
    /// Benchmarks of first searches set it.
    pub fresh: bool,
    /// Most bytes the hits' documents may hold (see [`HitBytes`]); `None`:
    /// no bound.
    pub max_hit_bytes: Option<usize>,
}

/// A bound on the bytes of the documents a search's hits carry: each hit's
/// projected document, at its BSON size, added up as each is built, so a
/// search refused for it holds at most the bound and one document more (a
/// server's reply bound: `k` up to 100,000 hits of documents up to 16 MiB
/// each), and has read at most [`HIT_CHUNK`] stored documents past it.
/// Shared by the queries of a batch. Hits of `_id` only are not counted.
#[derive(Debug, Clone, Copy)]
pub struct HitBytes {
    max: usize,
    used: usize,
}

impl HitBytes {
    /// A bound of `max` bytes, none used.
    pub fn new(max: usize) -> Self {
        Self { max, used: 0 }
    }

    fn take(&mut self, bytes: usize) -> Result<()> {
        self.used = self.used.saturating_add(bytes);
        if self.used > self.max {
            return Err(Error::InvalidQuery {
                reason: format!(
                    "the hits' documents hold more than {} bytes: ask for fewer hits or fields",
                    self.max
                ),
            });
        }
        Ok(())
    }
}

/// What the hits of a [`search_batch`] carry.
#[derive(Debug, Clone, Copy, Default)]
pub struct BatchHits<'a> {
    /// Fields beside `_id` (`None`: `_id` only).
    pub projection: Option<&'a [String]>,
    /// Most bytes the documents of all the queries' hits may hold (see
    /// [`HitBytes`]); `None`: no bound.
    pub max_bytes: Option<usize>,
}

/// Hits whose stored documents are read together under a [`HitBytes`]
/// bound (a store that copies documents out holds these many at once).
pub const HIT_CHUNK: usize = 16;

/// The BSON size of `doc`, as serialized (old-style binaries aside).
fn doc_bytes(doc: &Document) -> usize {
    5 + doc
        .iter()
        .map(|(k, v)| 2 + k.len() + value_bytes(v))
        .sum::<usize>()
}

fn value_bytes(v: &Bson) -> usize {
    let text = |s: &str| 5 + s.len();
    match v {
        Bson::Double(_) | Bson::Int64(_) | Bson::DateTime(_) | Bson::Timestamp(_) => 8,
        Bson::Int32(_) => 4,
        Bson::Boolean(_) => 1,
        Bson::Null | Bson::Undefined | Bson::MaxKey | Bson::MinKey => 0,
        Bson::String(s) | Bson::JavaScriptCode(s) | Bson::Symbol(s) => text(s),
        Bson::Document(d) => doc_bytes(d),
        Bson::Array(a) => {
            5 + a
                .iter()
                .enumerate()
                .map(|(i, v)| 2 + i.checked_ilog10().unwrap_or(0) as usize + 1 + value_bytes(v))
                .sum::<usize>()
        }
        Bson::Binary(b) => 5 + b.bytes.len(),
        Bson::ObjectId(_) => 12,
        Bson::Decimal128(_) => 16,
        Bson::RegularExpression(r) => r.pattern.len() + r.options.len() + 2,
        Bson::JavaScriptCodeWithScope(c) => 4 + text(&c.code) + doc_bytes(&c.scope),
        Bson::DbPointer(_) => 64,
    }
}

/// One hit: the document (its `_id` and projected fields) and its distance.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    /// The document's `_id`.
    pub id: Bson,
    /// Distance to the query: l2 squared, 1 − cosine similarity, or −dot.
    pub distance: f32,
    /// `_id` plus the projected fields.
    pub doc: Document,
}

/// What a search did: the strategy, the estimate that chose it, the work.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct SearchExplain {
    /// The strategy that ran.
    pub strategy: Strategy,
    /// Whether it was forced by the caller.
    pub forced: bool,
    /// Visible rows of the field.
    pub rows: u64,
    /// Estimated documents matching the filter (all rows without one).
    pub estimate: u64,
    /// How the estimate was made: `index` (counted), `index, at least` (the
    /// count stopped where a scan became cheapest), `row tags`, `sample`,
    /// `kept matches` (an earlier search's matching rows, exact), `kept
    /// matches, updated` (those of an earlier version of the collection,
    /// brought forward by reading the documents written since),
    /// `documents, kept` (this search read every document to find them,
    /// and kept them for the next) or `none`.
    pub estimated_by: &'static str,
    /// Estimated cost of each strategy, in scan-row units (`None`: not possible).
    pub costs: Vec<(Strategy, Option<f64>)>,
    /// Rows considered: their distance computed, or bounded from their code.
    pub rows_scanned: u64,
    /// Rows of `rows_scanned` ruled out by their code's bound alone, their
    /// vectors never read (on a field with row codes: every strategy, a
    /// filtered scan once its heap holds k matches; an unfiltered scan
    /// prunes too but does not count here).
    pub rows_pruned: u64,
    /// Documents read and checked against the filter.
    pub docs_checked: u64,
    /// Candidates pushed into a top-k heap.
    pub heap_pushes: u64,
    /// Where the strategy took its candidates from: `row tags` (the cache's
    /// posting lists), `index`, `documents` (a pass over them), `kept
    /// matches` (see `estimated_by`) or `every row` (a bitmap without a
    /// filter); empty for a scan that checks documents.
    pub candidates_from: &'static str,
}

impl std::fmt::Display for SearchExplain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "VectorTopK strategy={}{} rows={} estimate={} ({})",
            self.strategy,
            if self.forced { " (forced)" } else { "" },
            self.rows,
            self.estimate,
            self.estimated_by
        )?;
        for (s, c) in &self.costs {
            match c {
                Some(c) => writeln!(f, "  cost {s}={c:.0}")?,
                None => writeln!(f, "  cost {s}=n/a")?,
            }
        }
        write!(
            f,
            "  ran: rows_scanned={} rows_pruned={} docs_checked={} heap_pushes={}",
            self.rows_scanned, self.rows_pruned, self.docs_checked, self.heap_pushes
        )?;
        if !self.candidates_from.is_empty() {
            write!(f, " candidates_from={}", self.candidates_from)?;
        }
        Ok(())
    }
}

/// Rows a coded scan under a lazy filter reads per filter check: those
/// whose distance enters the heap (each checked) and those whose code
/// could not rule them out but whose distance does not enter. Measured on
/// the sweep's unindexed points (100k × 384, k = 10, one thread): 7,498
/// rows read for 5,663 checks at 1%, 36,014 for 31,238 at 0.1%.
const LAZY_READS: f64 = 1.3;

/// [`CostModel::scan_check`] at dim 384: the median of six calibrations
/// (`SweepData::calibrate`: the lazy scan at the sweep's unindexed 1% point
/// against the same scan under a filter every row passes, 100k × 384, one
/// thread, a row 113–153 ns): 8.8, 9.6, 10.8, 11.3, 11.9 and 12.8 rows a
/// check, where `doc_check`'s calibration, reading documents in key order,
/// gives 1.9–2.7 in the same runs. It reads high by perhaps 0.5–2 rows: the
/// 1% filter's selectivity sample reads about 960 more documents than the
/// other's, which stops at 64 matches, and they are not counted as checks.
const SCAN_CHECK: f64 = 11.0;

/// [`CostModel::tagged_mask_candidate`] at dim 384: the median of three
/// calibrations (`SweepData::calibrate`: Slate's bitmap scan under the
/// sweep's 100% filter, 10,000 posting lists of 10 rows, against the
/// kernel's masked scan handed the same mask; 100k × 384, one thread, a row
/// 113–153 ns): 0.026, 0.097 and 0.103 rows a candidate. Priced at
/// `tagged_candidate`'s 0.01 (with `scan_check` at 11), auto chose the
/// bitmap at 100% where the lazy scan ran 1.2–1.3× faster. It reads high:
/// it includes the planner's count of the same posting lists, which every
/// strategy pays, and it is timed once, not in rounds (hence its spread).
const TAGGED_MASK_CANDIDATE: f64 = 0.097;

/// [`CostModel::candidate`] (and untagged `mask_candidate`) at dim 384.
const CANDIDATE: f64 = 1.93;

/// [`CostModel::doc_scan`] at dim 384.
const DOC_SCAN: f64 = 1.0;

/// [`CostModel::code_row`]: 0.41 of `gather_row` in the calibration (two
/// runs at commits 63c1f45 and af66e13, 1.20 and 1.13 against 3.04 and
/// 2.73 rows, with 37 of 10,000 rows surviving), scaled to the model's
/// `gather_row`.
const CODE_ROW: f64 = 0.64;

/// Relative costs, in units of one row scanned (a distance on `dim` floats
/// read sequentially). Measured by the calibration in `bench/src/sweep.rs`
/// (`SweepData::calibrate`, printed by `bash scripts/bench.sh sweep`) on the
/// 2-core development machine at 100k rows × 384 (MemoryStore, one thread,
/// mimalloc as in Slate's binaries), and scaled by dimension. Since gather
/// reads a row's id only when its distance can enter the heap (six runs:
/// row 94–102 ns, doc_check 2.52–2.78, doc_scan 0.95–1.05, gather_row
/// 1.50–1.62, mask_row 1.38–1.50, mask_skip 0.0008–0.0010, mask_cold
/// 0.60–0.78 in the last three); `candidate` and `tagged_candidate`
/// from before (three runs, row 121–126 ns: 1.91–1.97 and 0.00–0.01). Under glibc malloc the per-document steps
/// cost about twice as much. Recorded in BENCHMARKS.md.
#[derive(Debug, Clone, Copy)]
pub struct CostModel {
    /// One document fetched by key and checked against the filter (a lazy
    /// check or a verification: a point read).
    pub doc_check: f64,
    /// One lazy check during a scan (plain or masked): a point read whose
    /// document the scan's stream of rows has pushed out of cache since the
    /// last check. In memory dearer than `doc_check`, measured apart; on
    /// RocksStore the same (`doc_check` there was measured in a scan).
    pub scan_check: f64,
    /// One document checked during a sequential scan of the collection.
    pub doc_scan: f64,
    /// One index key read plus its row lookup.
    pub candidate: f64,
    /// One row skipped by a bitmap test.
    pub mask_skip: f64,
    /// One candidate row of a bitmap scan: its distance, on a row read a
    /// few rows past the last one rather than right after it.
    pub mask_row: f64,
    /// Extra for a bitmap scan's candidate row read cold: the scan's
    /// look-ahead starts afresh in each task of
    /// [`SCAN_TASK_ROWS`](slate_vector::SCAN_TASK_ROWS) rows, so a sparse
    /// mask's rows, alone in their tasks, are read with no prefetch ahead
    /// of them (see [`cold_mask_rows`](Self::cold_mask_rows)).
    pub mask_cold: f64,
    /// One candidate row taken from the cache's row tags instead of the
    /// index: a posting-list entry (measured with the rows in cache, where
    /// the gathered row cost no more than a scanned one).
    pub tagged_candidate: f64,
    /// One candidate of a bitmap scan set into its mask: `candidate` when
    /// read from the index; from the row tags, `tagged_mask_candidate`.
    pub mask_candidate: f64,
    /// One candidate row set into a bitmap scan's mask from the row tags:
    /// its posting-list entry and its bit, a posting list per indexed
    /// value (dearer than gather's `tagged_candidate`, which was measured
    /// on lists read for a 10% filter).
    pub tagged_mask_candidate: f64,
    /// One row gathered: its distance, on a row read from wherever it lies
    /// (rather than right after the last one), with its visibility check.
    pub gather_row: f64,
    /// One row bounded from its code instead (gather with nothing to
    /// check): a quarter of the row's bytes and an integer dot product,
    /// read from wherever it lies; see [`gathered`](Self::gathered).
    /// Infinite when the rows keep no codes.
    pub code_row: f64,
    /// One row bounded from its code in a scan (masked or not; with
    /// nothing to check, or under a lazy filter once a heap is full), when
    /// the mask is dense (its rows' codes read in order); see
    /// [`masked`](Self::masked) and [`lazy_scan`](Self::lazy_scan).
    /// Infinite when the rows keep no codes.
    pub mask_code: f64,
    /// What a masked row's code costs more when the mask is sparse (read
    /// from wherever it lies).
    pub mask_code_sparse: f64,
    /// One scan task of a coded scan: its code pass's set-up.
    pub mask_task: f64,
}

impl CostModel {
    /// The calibrated defaults, scaled for the field's dimension (a distance
    /// costs in proportion to `dim`; the other steps do not).
    pub fn for_dim(dim: usize) -> Self {
        let scale = 384.0 / dim.max(1) as f64;
        Self {
            doc_check: 2.7 * scale,
            scan_check: SCAN_CHECK * scale,
            doc_scan: DOC_SCAN * scale,
            candidate: CANDIDATE * scale,
            mask_skip: 0.00075 * scale,
            // Mostly a distance: not scaled.
            mask_row: 1.45,
            // A scattered read without a prefetch: not scaled.
            mask_cold: 0.7,
            tagged_candidate: 0.01 * scale,
            mask_candidate: CANDIDATE * scale,
            tagged_mask_candidate: TAGGED_MASK_CANDIDATE * scale,
            // Mostly a distance and a scattered read: not scaled.
            gather_row: 1.55,
            code_row: CODE_ROW,
            // Codes, like distances, cost in proportion to `dim`: not scaled.
            mask_code: 0.31,
            mask_code_sparse: 0.46,
            // A fixed time per task: scaled.
            mask_task: 0.68 * scale,
        }
    }

    /// The model on RocksStore, where documents are read from RocksDB:
    /// `doc_check` 11.8 and `doc_scan` 2.0 rows at dim 384, measured by the
    /// demo (`bash scripts/demo.sh`, 100k × 384, two threads) while the
    /// planner still priced them as in memory: a lazy scan checking 93,462
    /// documents on two threads took 66 ms beyond its 7 ms of distances
    /// (1.42 µs of a thread per check), a pass over the 100k documents
    /// 23.9 ms (239 ns each), against 120 ns a row.
    pub fn on_disk(self) -> Self {
        let scale = self.doc_scan / DOC_SCAN;
        Self {
            doc_check: 11.8 * scale,
            // Measured in a lazy scan already.
            scan_check: 11.8 * scale,
            doc_scan: 2.0 * scale,
            ..self
        }
    }

    /// How many of a bitmap scan's `cand` candidate rows over `n` rows are
    /// read cold: about the first 1.4 of each scan task, all of them when
    /// the mask is sparser than that. (The kernel's masked scan ran 29 µs
    /// slower than its gather of the same 1,000 rows at 1% of 100k rows,
    /// and 22 µs slower on 100 rows at 0.1%, of which the mask's walk is
    /// 8 µs: about 1.4 rows a task at 1% cost what every row costs at 0.1%.)
    pub fn cold_mask_rows(n: f64, cand: f64) -> f64 {
        cand.min(n * 1.4 / slate_vector::SCAN_TASK_ROWS as f64)
    }

    /// Gathering `c` rows for the `k` nearest with nothing to check: every
    /// row bounded from its code, then the [`survivors`](Self::survivors)
    /// gathered; `c` rows gathered outright when there are too few to
    /// bound ([`PRUNE_MIN_ROWS`](slate_vector::PRUNE_MIN_ROWS), or `k`).
    pub fn gathered(&self, c: f64, k: f64) -> f64 {
        if c <= k.max(slate_vector::PRUNE_MIN_ROWS as f64) || self.code_row.is_infinite() {
            c * self.gather_row
        } else {
            c * self.code_row + Self::survivors(c, k) * self.gather_row
        }
    }

    /// A masked scan of `c` of `n` rows for the `k` nearest with nothing to
    /// check, its rows bounded from their codes: a set-up per scan task, a
    /// code per masked row (dearer as the mask thins and its rows scatter),
    /// and the [`survivors`](Self::survivors) read. Without codes, every
    /// masked row is read (`mask_row`, and `mask_cold` for those read cold).
    /// The code constants are the medians of three calibrations
    /// (`SweepData::calibrate`, 100k × 384, one thread, a row 141–143 ns):
    /// `mask_task` 0.46–0.88, `mask_code` 0.29–0.35, `mask_code_sparse`
    /// 0.24–0.57 rows.
    pub fn masked(&self, n: f64, c: f64, k: f64) -> f64 {
        if self.mask_code.is_infinite() {
            return c * self.mask_row + Self::cold_mask_rows(n, c) * self.mask_cold;
        }
        self.coded(n, c, Self::survivors(c, k))
    }

    /// A masked scan of `c` of `n` rows under a lazy filter checked
    /// `checks` times, the first `fill` of them before a heap holds k
    /// matches (see [`lazy_work`](Self::lazy_work)): those rows are read
    /// outright, as every masked row is without codes; after them, each
    /// masked row is bounded from its code and about [`LAZY_READS`] rows
    /// are read per further check.
    pub fn lazy_masked(&self, n: f64, c: f64, fill: f64, checks: f64) -> f64 {
        let outright = c * self.mask_row + Self::cold_mask_rows(n, c) * self.mask_cold;
        if self.mask_code.is_infinite() || c <= 0.0 {
            return outright;
        }
        let fill = fill.clamp(0.0, c);
        let rest = c - fill;
        fill * self.mask_row
            + Self::cold_mask_rows(n, fill) * self.mask_cold
            + self.past_fill(n * rest / c, rest, fill, checks, rest * self.mask_row)
    }

    /// A scan of all `n` rows under a lazy filter: as
    /// [`lazy_masked`](Self::lazy_masked) with every row in the mask, the
    /// rows before the heap fills read in order (one row each); without
    /// codes, `n` rows read in order.
    pub fn lazy_scan(&self, n: f64, fill: f64, checks: f64) -> f64 {
        if self.mask_code.is_infinite() {
            return n;
        }
        let fill = fill.clamp(0.0, n);
        let rest = n - fill;
        fill + self.past_fill(rest, rest, fill, checks, rest)
    }

    /// The `rest` rows (of `n` for the scan tasks) a coded lazy scan
    /// visits after its first `fill`: each bounded from its code, and
    /// [`LAZY_READS`] read per check after the fill. No dearer than
    /// reading them `outright`: where the code pass cannot pay (just above
    /// k matching rows), the price stays monotone in the matches, as
    /// [`count_cap`](Self::count_cap) needs.
    fn past_fill(&self, n: f64, rest: f64, fill: f64, checks: f64, outright: f64) -> f64 {
        let reads = ((checks - fill).max(0.0) * LAZY_READS).min(rest);
        self.coded(n, rest, reads).min(outright)
    }

    /// A lazy scan of all `n` rows, when a fraction `s` of them match, on
    /// `par` threads: its rows ([`lazy_scan`](Self::lazy_scan)) and its
    /// filter checks, summed over the threads (the strategy's cost is this
    /// over `par`).
    pub fn filtered_scan(&self, n: f64, s: f64, k: f64, par: f64) -> f64 {
        let (checks, fill) = Self::lazy_work(n, s, k, par);
        self.lazy_scan(n, fill, checks) + checks * self.scan_check
    }

    /// A lazy scan of `base` rows on `par` threads, each over its share
    /// with a heap of its own, when a fraction `rel` of them match: its
    /// filter checks (see [`lazy_checks`](Self::lazy_checks)) and the rows
    /// read before the threads' heaps hold k matches each (when no code
    /// can rule a row out), summed over the threads.
    pub fn lazy_work(base: f64, rel: f64, k: f64, par: f64) -> (f64, f64) {
        let par = par.max(1.0);
        let share = base / par;
        let fill = if rel <= 0.0 { share } else { (k / rel).min(share) };
        (par * Self::lazy_checks(share, rel, k), par * fill)
    }

    /// A coded scan of `c` of `n` rows that reads `reads` of them: a set-up
    /// per scan task, a code per row (dearer as the mask thins and its rows
    /// scatter), and the rows read.
    fn coded(&self, n: f64, c: f64, reads: f64) -> f64 {
        let sparse = (1.0 - c / n.max(1.0)).clamp(0.0, 1.0).powi(4);
        Self::scan_tasks(n) * self.mask_task
            + c * (self.mask_code + sparse * self.mask_code_sparse)
            + reads * self.mask_row
    }

    /// The scan tasks ([`SCAN_TASK_ROWS`](slate_vector::SCAN_TASK_ROWS)
    /// rows each) `n` rows make.
    pub fn scan_tasks(n: f64) -> f64 {
        (n / slate_vector::SCAN_TASK_ROWS as f64).ceil()
    }

    /// The threads a masked scan of `c` of `n` rows gains from, of `par`:
    /// with codes, a task holding a few masked rows is too little work to
    /// share (in the README's demo on two threads, a 1% mask ran no faster
    /// than on one), so tasks under 64 masked rows count for less.
    pub fn masked_par(&self, n: f64, c: f64, par: f64) -> f64 {
        if self.mask_code.is_infinite() {
            return par;
        }
        let per_task = c / Self::scan_tasks(n).max(1.0);
        1.0 + (par - 1.0).max(0.0) * (per_task / 64.0).min(1.0)
    }

    /// Rows of `c` whose codes cannot rule them out of the `k` nearest:
    /// at most about as many as would enter a top-k heap fed in random
    /// order, `k·(1 + ln(c/k))` (79 for 10,000 rows at k = 10, where the
    /// sweep's calibration counted 37).
    pub fn survivors(c: f64, k: f64) -> f64 {
        // Up to k rows, no cap forms: all of them are read (and none of
        // the logarithm's values below 1, or its -inf at 0).
        if c <= k.max(1.0) {
            return c.max(0.0);
        }
        (k * (1.0 + (c / k.max(1.0)).ln())).min(c)
    }

    /// The model when the rows keep no codes: every gathered row is read.
    pub fn without_codes(self) -> Self {
        Self {
            code_row: f64::INFINITY,
            mask_code: f64::INFINITY,
            ..self
        }
    }

    /// The model when candidates come from row tags: `candidate` costs
    /// `tagged_candidate`, and `mask_candidate` `tagged_mask_candidate`.
    pub fn tagged(self) -> Self {
        Self {
            candidate: self.tagged_candidate,
            mask_candidate: self.tagged_mask_candidate,
            ..self
        }
    }

    /// Expected filter checks of a lazy scan keeping `k` of `n` rows when a
    /// fraction `s` match: the first `k / s` rows are all checked, then a row
    /// is checked only if it enters the heap (harmonic decay).
    pub fn lazy_checks(n: f64, s: f64, k: f64) -> f64 {
        if s <= 0.0 {
            return n;
        }
        let fill = (k / s).min(n);
        let rest = if n > fill { k / s * (n / fill).ln() } else { 0.0 };
        (fill + rest).min(n)
    }

    /// How many index entries are worth counting for a search over `n`
    /// rows keeping `k`: the smallest count `c` at which gathering (or
    /// bitmap-scanning) `c` candidates costs at least as much as a lazy scan
    /// whose filter matches `c` of the `n` rows. Gather and bitmap cost at
    /// least `c * (candidate + min(code_row, gather_row, mask_row, mask_code))` and a lazy scan's
    /// cost falls as more rows
    /// match, so once an index holds more than `c` entries a scan is the
    /// cheapest plan, and counting further only costs time.
    pub fn count_cap(&self, n: u64, k: usize) -> u64 {
        let (nf, kf) = (n as f64, k as f64);
        let index_wins = |c: u64| {
            let c = c as f64;
            c * (self.candidate
                + self
                    .code_row
                    .min(self.gather_row)
                    .min(self.mask_row)
                    .min(self.mask_code))
                < self.filtered_scan(nf, c / nf, kf, 1.0)
        };
        // `index_wins` is monotone (true, then false) in c: binary search.
        let (mut lo, mut hi) = (0u64, n.max(1));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if index_wins(mid) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo.max(64)
    }
}

/// What the planner knows of a search when it prices the strategies.
#[derive(Debug, Clone, Copy)]
struct Priced {
    /// Visible rows.
    n: f64,
    /// Hits wanted.
    k: f64,
    /// Estimated documents matching the filter.
    matches: f64,
    /// The index's candidates (every row without an index).
    candidates: f64,
    /// Estimated fraction of rows matching (at least one row's).
    selectivity: f64,
    /// Threads a scan runs on.
    par: f64,
    /// Whether there is a filter.
    filtered: bool,
    /// Whether the index's candidates are exactly the matches.
    exact: bool,
    /// Whether an index narrows the filter.
    indexed: bool,
    /// A matching document's row looked up by its id (gather without an index).
    id_lookup: f64,
}

impl CostModel {
    /// Each strategy's cost for `p`, in scan-row units, in the order gather,
    /// scan, bitmap (`None`: not possible).
    fn costs(&self, p: &Priced) -> [(Strategy, Option<f64>); 3] {
        let Priced {
            n,
            k,
            matches: m,
            candidates: cand,
            selectivity: s,
            par,
            ..
        } = *p;
        // A lazy scan's threads each fill a heap of their own over their
        // share (the bound they share only helps once one is full), so each
        // checks what a lazy scan of its share alone would.
        let scan = if p.filtered {
            self.filtered_scan(n, s, k, par) / par
        } else {
            n / par
        };
        let gather = if !p.filtered {
            None
        } else if p.exact {
            Some(cand * self.candidate + self.gathered(cand, k))
        } else if p.indexed {
            // Candidates, their distances, then verification nearest first.
            Some(
                cand * (self.candidate + self.gather_row)
                    + (k * cand / m.max(1.0)).min(cand) * self.doc_check,
            )
        } else {
            // No index: the raw tier reads every document to find the
            // matches (on `par` threads), then looks up their rows and
            // computes their distances.
            Some(n * self.doc_scan / par + m * p.id_lookup + self.gathered(m, k))
        };
        let bitmap = if p.exact {
            Some(
                cand * self.mask_candidate
                    + (n * self.mask_skip + self.masked(n, cand, k)) / self.masked_par(n, cand, par),
            )
        } else if p.indexed {
            let (checks, fill) = Self::lazy_work(cand, (m / cand.max(1.0)).min(1.0), k, par);
            Some(
                cand * self.mask_candidate
                    + (n * self.mask_skip
                        + self.lazy_masked(n, cand, fill, checks)
                        + checks * self.scan_check)
                        / par,
            )
        } else {
            None
        };
        [
            (Strategy::Gather, gather),
            (Strategy::Scan, Some(scan)),
            (Strategy::Bitmap, bitmap),
        ]
    }
}

/// Rows of the view that hold the documents with these keys.
fn rows_of(view: &CacheView, keys: &[Vec<u8>]) -> Vec<RowId> {
    keys.iter().filter_map(|k| view.row_of(k)).collect()
}

/// Index entries counted to choose among indexes when row tags give the
/// estimates.
const TAGGED_COUNT_CAP: u64 = 64;

/// An index predicate whose row tags list at most this many rows has its
/// rows collected while it is counted (a selective filter's, which gather
/// will want), so that they are not looked up a second time.
const COLLECT_WHILE_COUNTING: usize = 4096;

/// An index predicate's rows collected while counting it: its field, its
/// intervals, and the rows.
type CountedRows = (String, Vec<crate::Interval>, Vec<RowId>);

/// Runs `f` on the tag ranges that select what an index scan of `field`
/// over `intervals` reads, in every partition.
fn with_tag_ranges<R>(
    parts: &[Part],
    field: &str,
    intervals: &[crate::Interval],
    f: impl FnOnce(&[TagRange<'_>]) -> R,
) -> R {
    let ranges: Vec<KeyRange> = parts
        .iter()
        .flat_map(|part| {
            intervals.iter().map(move |iv| {
                let (lo, hi) = crate::plan::interval_range(iv);
                slate_core::keys::index_value_range(part.as_bytes(), field, lo, hi)
            })
        })
        .collect();
    let bounds: Vec<TagRange<'_>> = ranges
        .iter()
        .map(|r| {
            (
                r.start.as_deref().map_or(Bound::Unbounded, Bound::Included),
                r.end.as_deref().map_or(Bound::Unbounded, Bound::Excluded),
            )
        })
        .collect();
    f(&bounds)
}

/// How many rows an index source selects, from the row tags: the posting
/// lists' lengths for one index; for a merge, its rows themselves, which
/// are returned too, for the strategy to use rather than merge again.
fn tagged_estimate(view: &CacheView, parts: &[Part], source: &Source) -> Option<(usize, Option<Vec<RowId>>)> {
    match source {
        // The planner counted it from the tags already (never capped then).
        Source::IndexScan {
            field,
            estimate,
            capped: false,
            ..
        } if view.tags_cover(field) => Some((*estimate as usize, None)),
        // Otherwise the planner's count found the field uncovered (a write
        // without tags since the search began), and coverage never returns
        // within a generation: the tags cannot count it either.
        Source::IndexScan { .. } => None,
        _ => tagged_rows(view, parts, source).map(|rows| (rows.len(), Some(rows))),
    }
}

/// The rows an index source selects, ascending and distinct, from the
/// cache's row tags (each row is tagged with its document's index entries
/// minus the id, so the index's key ranges select tags too; a merge
/// intersects or unites its inputs' rows), possibly with rows not visible
/// at the view's version, which the strategies skip as they read each row;
/// `None` for a scan or when some row lacks its tags for a field (then the
/// index is read).
fn tagged_rows(view: &CacheView, parts: &[Part], source: &Source) -> Option<Vec<RowId>> {
    let (field, intervals) = match source {
        Source::IndexScan { field, intervals, .. } => (field, intervals),
        Source::IndexMerge { op, inputs, .. } => {
            let mut sets = inputs.iter().map(|s| tagged_rows(view, parts, s));
            let mut acc = sets.next()??;
            for rows in sets {
                let rows = rows?;
                acc = match op {
                    // Both lists are ascending and distinct.
                    MergeOp::And => {
                        acc.retain(|r| rows.binary_search(r).is_ok());
                        acc
                    }
                    MergeOp::Or => {
                        acc.extend(rows);
                        acc.sort_unstable();
                        acc.dedup();
                        acc
                    }
                };
            }
            return Some(acc);
        }
        // The tags hold no `_id`s: the keys are read instead.
        Source::Scan { .. } | Source::IdScan { .. } => return None,
    };
    // Gather and the masked scan check each row's visibility as they read it.
    with_tag_ranges(parts, field, intervals, |r| view.tagged_candidates(field, r))
}

/// [`tagged_rows`] as a mask of the view's rows, for the bitmap scan: an
/// index scan's posting lists set their rows straight into it, and a merge
/// intersects or unites its inputs' masks word by word.
fn tagged_mask(view: &CacheView, parts: &[Part], source: &Source) -> Option<RowMask> {
    match source {
        Source::IndexScan { field, intervals, .. } => {
            with_tag_ranges(parts, field, intervals, |r| view.tagged_candidate_mask(field, r))
        }
        Source::IndexMerge { op, inputs, .. } => {
            let mut masks = inputs.iter().map(|s| tagged_mask(view, parts, s));
            let mut acc = masks.next()??;
            for mask in masks {
                let mask = mask?;
                match op {
                    MergeOp::And => acc.intersect(&mask),
                    MergeOp::Or => acc.union(&mask),
                }
            }
            Some(acc)
        }
        Source::Scan { .. } | Source::IdScan { .. } => None,
    }
}

/// A mask of the view's rows holding `rows`.
fn mask_of(view: &CacheView, rows: impl IntoIterator<Item = RowId>) -> RowMask {
    let mut mask = RowMask::new(view.row_count());
    for row in rows {
        mask.set(row);
    }
    mask
}

/// The candidate rows of gather and bitmap, and where they came from: the
/// row tags (`tagged`, when the estimate already merged them, or read now),
/// else the index, else (no index) a pass over the documents.
fn candidate_rows(
    view: &CacheView,
    read: &CollectionRead<'_>,
    parts: &[Part],
    source: Option<&Source>,
    tagged: Option<Vec<RowId>>,
    checker: &Checker<'_, '_>,
    threads: usize,
) -> Result<(Vec<RowId>, &'static str)> {
    let index = source.filter(|s| s.uses_index());
    // A write transaction's candidates come from its own index, not from
    // the last commit's tags.
    let tags = index.filter(|_| !checker.in_txn);
    if let Some(rows) = tagged.or_else(|| tags.and_then(|s| tagged_rows(view, parts, s))) {
        return Ok((rows, "row tags"));
    }
    match index {
        Some(source) => Ok((rows_of(view, &source_keys(read, parts, source)?), "index")),
        None => Ok((matching_rows(view, read, parts, checker, threads)?, "documents")),
    }
}

/// The rows of the documents in `parts` matching `filter` at one version,
/// found by a search that read every document, and kept in the view's
/// [memo](slate_vector::Memo) at that version: later searches there use
/// them as an exact index's candidates, reading no document. The version
/// is the collection's ([`CollectionRead::changed_at`]): a commit to
/// another collection leaves them in use, one to this collection moves
/// readers to a version where they do not apply; a compaction starts a new
/// memo.
struct Matches {
    parts: Vec<Part>,
    filter: Filter,
    /// Ascending.
    rows: Vec<RowId>,
}

/// A filter no index narrows that a search has met (at any version): the
/// next search with it may keep its matches.
struct Sighting {
    parts: Vec<Part>,
    filter: Filter,
}

impl Sighting {
    /// Bytes counted against the memo's bound: the filter's size as its
    /// debug text (a long `$in` list is long there too) and the partitions'.
    fn bytes(&self) -> usize {
        Self::bytes_of(&self.filter, &self.parts)
    }

    fn bytes_of(filter: &Filter, parts: &[Part]) -> usize {
        std::mem::size_of::<Self>()
            + format!("{filter:?}").len()
            + parts.iter().map(|p| p.as_bytes().len() + 24).sum::<usize>()
    }
}

/// Matches are kept when searching them would cost less than this
/// fraction of what the filter costs without them.
const KEEP_GAIN: f64 = 0.5;

/// The cheapest of priced strategies.
fn cheapest(costs: &[(Strategy, Option<f64>)]) -> f64 {
    costs.iter().filter_map(|c| c.1).fold(f64::INFINITY, f64::min)
}

fn sorted(mut rows: Vec<RowId>) -> Vec<RowId> {
    rows.sort_unstable();
    rows
}

/// Whether `filter` equals itself (one comparing with NaN does not, and
/// could never be found again in the memo).
#[allow(clippy::eq_op)]
fn reflexive(filter: &Filter) -> bool {
    filter == filter
}

/// Keeps `rows`, the matches of `filter` in `parts` at `version`, in the
/// view's memo (in place of any kept before for them).
fn keep(view: &CacheView, parts: &[Part], filter: &Filter, rows: Vec<RowId>, version: u64) -> Arc<Matches> {
    let rows = sorted(rows);
    let bytes = rows.len() * std::mem::size_of::<RowId>() + Sighting::bytes_of(filter, parts);
    let matches = Arc::new(Matches {
        parts: parts.to_vec(),
        filter: filter.clone(),
        rows,
    });
    view.memo()
        .put(Some(version), bytes, Arc::clone(&matches), |m: &Matches| {
            m.parts == parts && m.filter == *filter
        });
    matches
}

/// Matches are brought forward from an earlier version of the collection
/// only while the documents written since number at most this fraction of
/// the rows (past it, a pass over the documents is the better way to find
/// them again).
const BRING_FORWARD_SHARE: f64 = 0.25;

/// A search's way to its filter's matches from those kept at an earlier
/// version of the collection and the commits since (see [`Forward::run`]).
struct Forward<'a, 'r> {
    view: &'a CacheView,
    read: &'a CollectionRead<'r>,
    parts: &'a [Part],
    filter: &'a Filter,
    version: u64,
}

impl Forward<'_, '_> {
    /// The matches of the filter in the partitions at the version: the rows
    /// kept at the latest earlier version still visible, less the rows of
    /// the documents written since, plus those of them that match now (a
    /// write of a document with a vector gives it a new row; a deleted
    /// document, or one without a vector, has none). Kept at the version in
    /// place of the earlier ones. `None` when none were kept, the commits'
    /// keys are not known (see [`CollectionRead::changes_since`]), more
    /// documents were written than [`BRING_FORWARD_SHARE`] of the rows, or
    /// `worth(earlier matches, documents written)` says no.
    fn run(&self, worth: impl FnOnce(usize, usize) -> bool) -> Result<Option<Arc<Matches>>> {
        let (view, parts, filter) = (self.view, self.parts, self.filter);
        let Some((from, earlier)) = view.memo().latest_before(self.version, |m: &Matches| {
            m.parts == parts && m.filter == *filter
        }) else {
            return Ok(None);
        };
        let Some(lists) = self.read.changes_since(from) else {
            return Ok(None);
        };
        // The document keys written, once each (a commit's index entries,
        // vectors and counts are not documents), counted no further than
        // the share.
        let limit = (BRING_FORWARD_SHARE * view.len() as f64) as usize;
        let prefixes: Vec<Vec<u8>> = parts
            .iter()
            .map(|p| slate_core::keys::doc_prefix(p.as_bytes()))
            .collect();
        let mut written: std::collections::HashSet<&[u8]> = std::collections::HashSet::new();
        for key in lists.iter().flat_map(|keys| keys.iter()) {
            if prefixes.iter().any(|p| key.starts_with(p)) {
                written.insert(key);
                if written.len() > limit {
                    return Ok(None);
                }
            }
        }
        if !worth(earlier.rows.len(), written.len()) {
            return Ok(None);
        }
        let mut written: Vec<&[u8]> = written.into_iter().collect();
        written.sort_unstable();
        let docs = self.read.get_keys(&written)?;
        let mut rewritten = Vec::new();
        let mut matching = Vec::new();
        for (key, doc) in written.iter().zip(docs) {
            let Some(row) = view.row_of(key) else { continue };
            rewritten.push(row);
            if let Some(doc) = doc {
                if filter.matches(doc.raw()?) {
                    matching.push(row);
                }
            }
        }
        rewritten.sort_unstable();
        // Rows retired since `from` (deleted documents, rewritten ones) are
        // no longer visible; a written document's current row is dropped
        // too, and added back if it matches.
        let mut now: Vec<RowId> = earlier
            .rows
            .iter()
            .copied()
            .filter(|&r| view.is_visible(r) && rewritten.binary_search(&r).is_err())
            .collect();
        now.extend(matching);
        Ok(Some(keep(view, parts, filter, now, self.version)))
    }
}

fn in_parts(key: &[u8], parts: &[Part]) -> bool {
    parts.iter().any(|p| key.starts_with(p.as_bytes()))
}

struct Checker<'a, 'r> {
    read: &'a CollectionRead<'r>,
    filter: Option<&'a Filter>,
    parts: &'a [Part],
    partitioned: bool,
    /// Inside a write transaction: the rows are the last commit's, so a
    /// row's document may since have been deleted, and is read even
    /// without a filter.
    in_txn: bool,
    checked: AtomicU64,
    /// The first read that failed (a store error, a corrupt document): the
    /// kernels take a plain verdict, so the search reports it when they
    /// return (see [`Checker::failure`]) instead of counting the document
    /// out.
    failed: std::sync::Mutex<Option<slate_core::Error>>,
}

impl Checker<'_, '_> {
    /// Whether the document with key `key` is in the partitions and matches;
    /// a document that cannot be read is kept out and its error recorded.
    fn accepts(&self, key: &[u8]) -> bool {
        if self.partitioned && !in_parts(key, self.parts) {
            return false;
        }
        if self.filter.is_none() && !self.in_txn {
            return true;
        }
        self.checked.fetch_add(1, Ordering::Relaxed);
        let verdict = self
            .read
            .get_key(key)
            .and_then(|doc| doc.map_or(Ok(false), |doc| self.matches(&doc)));
        verdict.unwrap_or_else(|e| {
            let mut failed = self.failed.lock().unwrap_or_else(|p| p.into_inner());
            failed.get_or_insert(e);
            false
        })
    }

    /// Whether `doc` matches the filter (any document, without one); an
    /// error for bytes that are no document.
    fn matches(&self, doc: &slate_core::RawDoc<'_>) -> slate_core::Result<bool> {
        match self.filter {
            Some(f) => Ok(f.matches(doc.raw()?)),
            None => Ok(true),
        }
    }

    /// The first error a check met: the search's answer is then not exact.
    fn failure(&self) -> Result<()> {
        match self.failed.lock().unwrap_or_else(|p| p.into_inner()).take() {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }
}

/// Runs a search; returns the hits nearest first and what it did.
pub fn search(
    read: &CollectionRead<'_>,
    parts: &[Part],
    spec: &SearchSpec,
) -> Result<(Vec<SearchHit>, SearchExplain)> {
    let mut bound = spec.max_hit_bytes.map(HitBytes::new);
    search_within(read, parts, spec, bound.as_mut())
}

/// [`search`], its hits' documents counted against `bound`.
fn search_within(
    read: &CollectionRead<'_>,
    parts: &[Part],
    spec: &SearchSpec,
    bound: Option<&mut HitBytes>,
) -> Result<(Vec<SearchHit>, SearchExplain)> {
    crate::check_projection(spec.projection.as_deref())?;
    let view = read.vectors(&spec.field)?;
    if spec.k == 0 {
        return Err(slate_vector::Error::ZeroK.into());
    }
    slate_vector::check_vector_for(&spec.query, view.dim(), view.metric())
        .map_err(|source| slate_vector::Error::InvalidQuery { index: 0, source })?;
    let partitioned = read.config().partition_key.is_some();
    let checker = Checker {
        read,
        filter: spec.filter.as_ref(),
        parts,
        partitioned,
        in_txn: read.in_write_txn(),
        checked: AtomicU64::new(0),
        failed: Default::default(),
    };
    let rows = view.len() as u64;
    let mut explain = SearchExplain {
        rows,
        estimate: rows,
        estimated_by: "none",
        ..Default::default()
    };
    if parts.is_empty() {
        // `partitions: []` addresses nothing, partitioned collection or not.
        return Ok((Vec::new(), explain));
    }

    // With every index's entries on the rows as tags, candidates come from
    // the tags (a fraction of an index read each), and so do the estimates:
    // the index is counted only far enough to choose among indexes.
    let indexes = &read.config().indexes;
    // Not inside a write transaction: the tags are the last commit's, and a
    // document the transaction changed into the filter's range would not be
    // a candidate (its index, read through the transaction, has it).
    let all_tagged = !checker.in_txn && !indexes.is_empty() && indexes.iter().all(|f| view.tags_cover(f));
    let mut model = CostModel::for_dim(view.dim());
    if !view.has_codes() {
        model = model.without_codes();
    }
    if read.on_disk() {
        model = model.on_disk();
    }
    // Gather without an index finds its rows by the matching documents'
    // ids, tags or not.
    let id_lookup = model.candidate;
    if all_tagged {
        model = model.tagged();
    }
    // The ID tier: index candidates, when an index can narrow the filter,
    // counted only as far as they could beat a scan.
    let cap = if all_tagged {
        TAGGED_COUNT_CAP
    } else {
        model.count_cap(rows, spec.k)
    };
    // With tags, an index predicate is counted from its posting lists, and
    // a short one's rows are collected on the way, for the strategy to use
    // rather than find the same lists again.
    let counted_rows: RefCell<Vec<CountedRows>> = RefCell::new(Vec::new());
    let count_tags = |field: &str, intervals: &[crate::Interval]| {
        with_tag_ranges(parts, field, intervals, |r| {
            let n = view.tagged_count(field, r)?;
            if n <= COLLECT_WHILE_COUNTING {
                if let Some(rows) = view.tagged_candidates(field, r) {
                    counted_rows
                        .borrow_mut()
                        .push((field.to_owned(), intervals.to_vec(), rows));
                }
            }
            Some(n as u64)
        })
    };
    let counter: Option<crate::plan::Counter<'_>> = if all_tagged { Some(&count_tags) } else { None };
    let source = match &spec.filter {
        // With tags, the rows stand in for the documents' count (the
        // choice only weighs an index against a scan of them).
        Some(filter) => search_source(
            read,
            parts,
            filter,
            cap,
            counter,
            (all_tagged && !partitioned).then_some(rows),
        )?,
        None => None,
    };
    let (tag_estimate, mut tagged_rows_read) = source
        .as_ref()
        .filter(|s| all_tagged && s.uses_index())
        .and_then(|s| tagged_estimate(&view, parts, s))
        .map_or((None, None), |(count, rows)| (Some(count), rows));
    // The chosen index scan's rows, if they were collected while counted.
    if let (Some(_), None, Some(Source::IndexScan { field, intervals, .. })) =
        (tag_estimate, &tagged_rows_read, &source)
    {
        let mut counted = counted_rows.borrow_mut();
        if let Some(i) = counted
            .iter()
            .position(|(f, iv, _)| f == field && iv == intervals)
        {
            tagged_rows_read = Some(counted.swap_remove(i).2);
        }
    }
    let capped = tag_estimate.is_none() && matches!(source, Some(Source::IndexScan { capped: true, .. }));
    let indexed = source.as_ref().is_some_and(Source::uses_index);
    // An index (or the document keys) that answers the filter exactly: its keys are the matches, and
    // gather and bitmap need not read any document to check them. Not inside
    // a write transaction: the rows and their tags are the last commit's, the
    // documents the transaction's, which may no longer match.
    let exact = match (&spec.filter, &source) {
        (
            Some(filter),
            Some(Source::IndexScan {
                field,
                multikey: false,
                ..
            }),
        ) if !checker.in_txn => filter.is_exact_on(field),
        // Values and ranges of `_id` alone: the keys are the matches.
        (Some(filter), Some(Source::IdScan { .. })) if !checker.in_txn => filter.is_exact_on("_id"),
        _ => false,
    };
    // A filter no index narrows: its matching rows, exactly, if a search at
    // this version of the collection kept them (see `Matches`). Not inside
    // a write transaction, whose documents are not the version's.
    let version = read.changed_at();
    let memo_filter = spec
        .filter
        .as_ref()
        .filter(|f| !indexed && !checker.in_txn && !spec.fresh && reflexive(f));
    let same = |p: &[Part], f: &Filter| p == parts && Some(f) == memo_filter;
    let mut brought_forward = false;
    let mut kept: Option<Arc<Matches>> = match memo_filter {
        None => None,
        Some(filter) => match view
            .memo()
            .get(Some(version), |m: &Matches| same(&m.parts, &m.filter))
        {
            Some(found) => Some(found),
            None => {
                let forward = Forward {
                    view: &view,
                    read,
                    parts,
                    filter,
                    version,
                };
                let found = forward.run(|earlier, written| {
                    // Worth it when reading the documents written and
                    // searching the matches costs less than this search
                    // without them: a sample, then the strategy (the
                    // cheapest, or the one forced) on the earlier count.
                    let n = rows as f64;
                    let m = earlier as f64;
                    let without = Priced {
                        n,
                        k: spec.k as f64,
                        matches: m,
                        candidates: n,
                        selectivity: (m / n.max(1.0)).max(1.0 / n.max(1.0)),
                        par: slate_vector::effective_threads(spec.threads).max(1) as f64,
                        filtered: true,
                        exact: false,
                        indexed: false,
                        id_lookup,
                    };
                    let with = Priced {
                        candidates: m,
                        exact: true,
                        indexed: true,
                        ..without
                    };
                    // Forced bitmap without an index makes a pass over the
                    // documents, as gather does: priced as gather's.
                    let priced = |costs: [(Strategy, Option<f64>); 3]| match spec.strategy {
                        Strategy::Auto => cheapest(&costs),
                        forced => {
                            let of = |s: Strategy| costs.iter().find(|c| c.0 == s).and_then(|c| c.1);
                            of(forced)
                                .or_else(|| of(Strategy::Gather))
                                .unwrap_or(f64::INFINITY)
                        }
                    };
                    // A sample reads up to 1,024 documents, stopping at 64
                    // matches.
                    let sampled = n
                        .min(SAMPLE_ROWS as f64)
                        .min(SAMPLE_HITS as f64 / without.selectivity);
                    let cost_with = written as f64 * model.doc_check + priced(model.tagged().costs(&with));
                    let cost_without = sampled * model.doc_check + priced(model.costs(&without));
                    cost_with < cost_without
                })?;
                brought_forward = found.is_some();
                found
            }
        },
    };
    let selectivity = match (&spec.filter, &source) {
        (None, _) => 1.0,
        (Some(_), _) if kept.is_some() => {
            explain.estimated_by = if brought_forward {
                "kept matches, updated"
            } else {
                "kept matches"
            };
            kept.as_ref()
                .map_or(0.0, |m| m.rows.len() as f64 / rows.max(1) as f64)
                .min(1.0)
        }
        (Some(_), Some(_)) if tag_estimate.is_some() => {
            explain.estimated_by = "row tags";
            (tag_estimate.unwrap_or_default() as f64 / rows.max(1) as f64).min(1.0)
        }
        (Some(_), Some(s)) if s.uses_index() => {
            explain.estimated_by = if capped { "index, at least" } else { "index" };
            (s.estimate() as f64 / rows.max(1) as f64).min(1.0)
        }
        (Some(_), _) => {
            explain.estimated_by = "sample";
            sample_selectivity(&view, &checker)
        }
    };
    checker.checked.store(0, Ordering::Relaxed);
    explain.estimate = (selectivity * rows as f64).round() as u64;

    let n = rows as f64;
    let k = spec.k as f64;
    let m = explain.estimate as f64;
    let cand = match (&kept, tag_estimate) {
        (Some(kept), _) => kept.rows.len() as f64,
        (None, Some(c)) => c as f64,
        (None, None) => source
            .as_ref()
            .filter(|s| s.uses_index())
            .map_or(n, |s| s.estimate() as f64),
    };
    // Scans (plain and masked) run on `par` threads, each over its share
    // of the rows, and so does a pass over the documents (gather without an
    // index); gather's rows, the index or tag reads and a mask's build run
    // on the calling thread.
    let priced = Priced {
        n,
        k,
        matches: m,
        candidates: cand,
        selectivity: selectivity.max(1.0 / n.max(1.0)),
        par: slate_vector::effective_threads(spec.threads).max(1) as f64,
        filtered: spec.filter.is_some(),
        exact: exact || kept.is_some(),
        indexed: indexed || kept.is_some(),
        id_lookup,
    };
    // Kept rows are in hand, as rows read from the tags are.
    let kept_model = model.tagged();
    explain.costs = if kept.is_some() { kept_model } else { model }
        .costs(&priced)
        .to_vec();
    // The second search at one version (of those `auto` plans) with a
    // filter no index narrows reads every document to find its matches and
    // keeps them, when searching them as an exact index's candidates would
    // cost less than half what the filter costs now: the pass costs about
    // what gather without an index pays on every search, and is paid once
    // per version. A filter met once at a version is only noted, so that a
    // stream of different filters, or of commits between searches, pays no
    // passes.
    if let (None, Some(filter), Strategy::Auto) = (&kept, memo_filter, spec.strategy) {
        let seen = view
            .memo()
            .get(Some(version), |s: &Sighting| same(&s.parts, &s.filter))
            .is_some();
        let as_kept = Priced {
            exact: true,
            indexed: true,
            candidates: m,
            ..priced
        };
        if !seen {
            let sighting = Sighting {
                parts: parts.to_vec(),
                filter: filter.clone(),
            };
            let bytes = sighting.bytes();
            view.memo()
                .put(Some(version), bytes, Arc::new(sighting), |s: &Sighting| {
                    same(&s.parts, &s.filter)
                });
        } else if cheapest(&kept_model.costs(&as_kept)) < KEEP_GAIN * cheapest(&explain.costs) {
            let matching = matching_rows(&view, read, parts, &checker, spec.threads)?;
            let found = keep(&view, parts, filter, matching, version);
            let count = found.rows.len() as f64;
            explain.estimated_by = "documents, kept";
            explain.estimate = found.rows.len() as u64;
            let priced = Priced {
                matches: count,
                candidates: count,
                selectivity: (count / n.max(1.0)).max(1.0 / n.max(1.0)),
                ..as_kept
            };
            explain.costs = kept_model.costs(&priced).to_vec();
            kept = Some(found);
        }
    }
    let exact = exact || kept.is_some();
    let scan_cost = explain.costs[1].1.unwrap_or(f64::INFINITY);
    let strategy = match spec.strategy {
        Strategy::Auto if spec.filter.is_none() => Strategy::Scan,
        Strategy::Auto => {
            let mut best = (Strategy::Scan, scan_cost);
            for (st, c) in &explain.costs {
                if let Some(c) = c {
                    if *c < best.1 {
                        best = (*st, *c);
                    }
                }
            }
            best.0
        }
        forced => {
            explain.forced = true;
            forced
        }
    };
    explain.strategy = strategy;

    let hits = match strategy {
        Strategy::Scan | Strategy::Auto => {
            if spec.filter.is_none() && !partitioned && !checker.in_txn {
                explain.rows_scanned = rows;
                view.search(&spec.query, spec.k, spec.threads)?
            } else {
                // Kept matches stand in for the documents' verdicts.
                if kept.is_some() {
                    explain.candidates_from = "kept matches";
                }
                let pred = |row: RowId, key: &[u8]| match &kept {
                    Some(kept) => kept.rows.binary_search(&row).is_ok(),
                    None => checker.accepts(key),
                };
                let (hits, stats) = view.search_lazy(&spec.query, spec.k, spec.threads, &pred)?;
                explain.rows_scanned = stats.rows_scanned;
                explain.rows_pruned = stats.rows_pruned;
                explain.heap_pushes = stats.heap_pushes;
                hits
            }
        }
        Strategy::Gather => {
            let mut gathered = Vec::new();
            if kept.is_some() {
                explain.candidates_from = "kept matches";
            } else {
                let (rows, from) = candidate_rows(
                    &view,
                    read,
                    parts,
                    source.as_ref(),
                    tagged_rows_read.take(),
                    &checker,
                    spec.threads,
                )?;
                explain.candidates_from = from;
                match memo_filter {
                    // A pass over the documents found exactly the matches:
                    // kept for the next search.
                    Some(filter) if from == "documents" => {
                        kept = Some(keep(&view, parts, filter, rows, version))
                    }
                    _ => gathered = rows,
                }
            }
            let cand_rows: &[RowId] = kept.as_ref().map_or(&gathered, |kept| &kept.rows);
            // Raw-tier candidates were checked while gathering, and an exact
            // index's are matches (so their codes may prune them); otherwise a
            // candidate is checked only when its distance would enter the top k.
            let check = |_: RowId, key: &[u8]| checker.accepts(key);
            let (hits, stats) = if exact || !indexed {
                view.search_rows_counted(&spec.query, spec.k, cand_rows)?
            } else {
                view.search_rows_lazy(&spec.query, spec.k, cand_rows, &check)?
            };
            explain.rows_scanned = stats.rows_scanned;
            explain.rows_pruned = stats.rows_pruned;
            explain.heap_pushes = stats.heap_pushes;
            hits
        }
        Strategy::Bitmap => {
            // Without an index, the matches are found from the documents as
            // gather finds them (and kept), unless a search kept them.
            let unindexed = source.as_ref().is_none_or(|s| !s.uses_index());
            let from_documents = kept.is_none() && unindexed && spec.filter.is_some();
            let mut found = Vec::new();
            if from_documents {
                let matching = matching_rows(&view, read, parts, &checker, spec.threads)?;
                match memo_filter {
                    Some(filter) => kept = Some(keep(&view, parts, filter, matching, version)),
                    None => found = matching,
                }
            }
            // The matches, exactly: kept, or found from the documents now.
            let matches: Option<&[RowId]> = match &kept {
                Some(kept) => Some(&kept.rows),
                None => from_documents.then_some(&found[..]),
            };
            // Without a filter, partitions or a transaction's writes, every
            // visible row is a match, as in a plain scan.
            let every_row_matches = spec.filter.is_none() && !partitioned && !checker.in_txn;
            let exact = exact || matches.is_some() || every_row_matches;
            let (mask, from) = if let Some(rows) = matches {
                let from = if from_documents {
                    "documents"
                } else {
                    "kept matches"
                };
                (mask_of(&view, rows.iter().copied()), from)
            } else {
                match source.as_ref().filter(|s| s.uses_index()) {
                    // No filter (a filter no index narrows found its matches
                    // above): every row, as a scan reads them, each checked
                    // as a scan checks it (its partition, a transaction's
                    // deletes) when it would enter the top k.
                    None => {
                        let rows = u32::try_from(view.row_count()).unwrap_or(u32::MAX);
                        (mask_of(&view, (0..rows).map(RowId)), "every row")
                    }
                    Some(source) => {
                        // A merge's rows (or a short index scan's) were read for its estimate already.
                        let tagged = match tagged_rows_read.take() {
                            Some(rows) => Some(mask_of(&view, rows)),
                            None if checker.in_txn => None,
                            None => tagged_mask(&view, parts, source),
                        };
                        match tagged {
                            Some(mask) => (mask, "row tags"),
                            // No tags for it: the index (tried once; coverage only shrinks).
                            None => {
                                let keys = source_keys(read, parts, source)?;
                                (mask_of(&view, rows_of(&view, &keys)), "index")
                            }
                        }
                    }
                }
            };
            explain.candidates_from = from;
            // An exact index's rows are the matches: no filter, and the
            // scan splits as an unfiltered one does (a lazy one keeps a
            // share of the rows per thread).
            let check = |_: RowId, key: &[u8]| checker.accepts(key);
            let (hits, stats) = if exact {
                view.search_mask_counted(&spec.query, spec.k, spec.threads, &mask)?
            } else {
                view.search_mask_lazy(&spec.query, spec.k, spec.threads, &mask, &check)?
            };
            explain.rows_scanned = stats.rows_scanned;
            explain.rows_pruned = stats.rows_pruned;
            explain.heap_pushes = stats.heap_pushes;
            hits
        }
    };
    checker.failure()?;
    explain.docs_checked += checker.checked.load(Ordering::Relaxed);
    let ids_only = ids_only(read, spec.projection.as_deref())?;
    let out = materialize_hits_as(read, &hits, spec.projection.as_deref(), ids_only, bound)?;
    Ok((out, explain))
}

/// A key range of one partition's documents: from (inclusive), to
/// (exclusive), either open when `None`.
type PartRange<'p> = (&'p Part, Option<Vec<u8>>, Option<Vec<u8>>);

/// Ranges a thread of [`matching_rows`]'s pass is cut into.
const PASS_SPLITS_PER_THREAD: usize = 4;

/// The rows of the documents in `parts` that match the checker's filter,
/// found by reading every document (lent by the store, not copied out): on
/// the calling thread when `threads` is 1, else in key ranges on the
/// threads a search's `threads` names
/// ([`install_threads`](slate_vector::install_threads)). In key order.
fn matching_rows(
    view: &CacheView,
    read: &CollectionRead<'_>,
    parts: &[Part],
    checker: &Checker<'_, '_>,
    threads: usize,
) -> Result<Vec<RowId>> {
    let par = if threads == 1 {
        1
    } else {
        slate_vector::effective_threads(threads)
    };
    let mut ranges: Vec<PartRange<'_>> = Vec::new();
    for part in parts {
        let mut lo = None;
        if par > 1 {
            // Several ranges a thread, as a parallel sort cuts them: ids
            // spread unevenly leave no thread with most of the work.
            for cut in read.scan_splits(part, None, None, par * PASS_SPLITS_PER_THREAD)? {
                ranges.push((part, lo, Some(cut.clone())));
                lo = Some(cut);
            }
        }
        ranges.push((part, lo, None));
    }
    let pass = |(part, from, to): &PartRange<'_>| -> Result<Vec<RowId>> {
        let mut out = Vec::new();
        // Counted here and added once: threads adding to the shared count
        // for every document would contend for its cache line.
        let mut checked = 0;
        let mut failed = None;
        read.visit_between(part, from.as_deref(), to.as_deref(), &mut |doc| {
            checked += 1;
            match checker.matches(doc) {
                Ok(true) => out.extend(view.row_of(&doc.key)),
                Ok(false) => {}
                Err(e) => {
                    failed = Some(e);
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        })?;
        if let Some(e) = failed {
            return Err(e.into());
        }
        checker.checked.fetch_add(checked, Ordering::Relaxed);
        Ok(out)
    };
    let found: Vec<Result<Vec<RowId>>> = if par > 1 && ranges.len() > 1 {
        slate_vector::install_threads(threads, || ranges.par_iter().map(pass).collect())?
    } else {
        ranges.iter().map(pass).collect()
    };
    let mut rows = Vec::new();
    for part in found {
        rows.extend(part?);
    }
    Ok(rows)
}

/// Most rows a selectivity sample reads.
const SAMPLE_ROWS: usize = 1024;

/// A sample stops once this many of its rows match: the estimate is then
/// within about 1/√64 = 12% of the fraction (and over 6%, far from where
/// gather could beat a scan), and an unselective filter costs its search
/// 64 to 128 document reads, not 1,024 (a millisecond at 100k rows).
const SAMPLE_HITS: usize = 64;

/// Most positions a sample visits (it stops at [`SAMPLE_ROWS`] visible).
const SAMPLE_SLOTS: usize = 1 << 16;

/// Positions among `rows` rows, of which `visible` are visible, for a
/// sample of about [`SAMPLE_ROWS`] visible ones: as many more positions as
/// the rows outnumber the visible (retired by writes, or newer than the
/// view), each row at most once. Position `j` is `j × step mod rows`, with
/// `step` the first integer from `rows / φ` (rounded) up that is prime to
/// `rows` (a permutation): every prefix is spread evenly over the rows (the three-gap
/// theorem), so a sample cut short still covers the whole cache, not just
/// its first rows (which may all match a filter on, say, an insertion
/// date). A power-of-two stride (a bit-reversed order) would visit only
/// even rows in its first half: a sample of 1,024 of 2,001 rows never saw
/// a document inserted at an odd position.
fn sample_positions(rows: usize, visible: usize) -> impl Iterator<Item = usize> {
    let want = SAMPLE_ROWS
        .saturating_mul(rows.div_ceil(visible.max(1)))
        .min(SAMPLE_SLOTS)
        .min(rows);
    let n = rows.max(1) as u64;
    let gcd = |mut a: u64, mut b: u64| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let mut step = ((n as f64) / GOLDEN).round().max(1.0) as u64;
    while gcd(step, n) != 1 {
        step += 1;
    }
    (0..want as u64).map(move |j| (j * step % n) as usize)
}

/// The golden ratio φ.
const GOLDEN: f64 = 1.618_033_988_749_895;

/// Estimates the filter's selectivity from up to [`SAMPLE_ROWS`] rows spread
/// evenly over the cache (their documents are read and checked), stopping
/// at [`SAMPLE_HITS`] matches.
fn sample_selectivity(view: &CacheView, checker: &Checker<'_, '_>) -> f64 {
    if view.is_empty() {
        return 0.0;
    }
    let (mut seen, mut hit) = (0usize, 0usize);
    for pos in sample_positions(view.row_count(), view.len()) {
        // Rows retired by updates and deletes, or newer than the view, are
        // not sampled.
        let Some(key) = view.id(RowId(pos as u32)) else {
            continue;
        };
        if seen == SAMPLE_ROWS {
            break;
        }
        seen += 1;
        if checker.accepts(key) {
            hit += 1;
            if hit == SAMPLE_HITS {
                break;
            }
        }
    }
    // Add-one smoothing: a sample with no match does not claim zero matches.
    (hit as f64 + 0.5) / (seen as f64 + 1.0)
}

/// Whether hits can be built from their keys alone: only `_id` wanted, and
/// every key decodes to its document's exact `_id`, so no document need be
/// read (a visible row's document exists at the same snapshot).
fn ids_only(read: &CollectionRead<'_>, projection: Option<&[String]>) -> Result<bool> {
    Ok(projection.is_none_or(<[String]>::is_empty) && read.ids_decode_exactly()?)
}

/// The hits' documents, projected: built from their keys when
/// [`ids_only`], else read (a batch, or a chunk at a time under `bound`).
fn materialize_hits_as(
    read: &CollectionRead<'_>,
    hits: &[Hit],
    projection: Option<&[String]>,
    ids_only: bool,
    mut bound: Option<&mut HitBytes>,
) -> Result<Vec<SearchHit>> {
    let empty: [String; 0] = [];
    let fields = projection.unwrap_or(&empty);
    // The hits come from one committed cache view, where an id has at most
    // one visible row (a commit retires an id's live row at the version its
    // new row is born), so no id repeats and none need be looked for.
    debug_assert!(
        {
            let mut ids: Vec<&[u8]> = hits.iter().map(|h| &*h.id).collect();
            ids.sort_unstable();
            ids.windows(2).all(|w| w[0] != w[1])
        },
        "a search returned one id twice"
    );
    let mut out = Vec::with_capacity(hits.len());
    if ids_only {
        // Each `{_id}` cloned from one layout: no hasher seeded, no key hashed.
        let layout = bson::doc! { "_id": Bson::Null };
        for hit in hits {
            let id = read.id_of_key(&hit.id)?;
            let mut doc = layout.clone();
            if let Some((_, slot)) = doc.iter_mut().next() {
                *slot = id.clone();
            }
            out.push(SearchHit {
                doc,
                id,
                distance: hit.distance,
            });
        }
        return Ok(out);
    }
    // Without a bound, one batched read; with one, a chunk at a time, each
    // document counted as it is built.
    let chunk = if bound.is_some() {
        HIT_CHUNK
    } else {
        hits.len().max(1)
    };
    for hits in hits.chunks(chunk) {
        let keys: Vec<&[u8]> = hits.iter().map(|h| &*h.id).collect();
        let docs = read.get_keys(&keys)?;
        for (hit, doc) in hits.iter().zip(docs) {
            let Some(doc) = doc else { continue };
            let projected = read.materialize(&doc, Some(fields))?;
            if let Some(bound) = bound.as_deref_mut() {
                bound.take(doc_bytes(&projected))?;
            }
            let id = projected.get("_id").cloned().unwrap_or(Bson::Null);
            out.push(SearchHit {
                id,
                distance: hit.distance,
                doc: projected,
            });
        }
    }
    Ok(out)
}

/// Many unfiltered queries (`n × dim` floats) in one blocked pass.
pub fn search_batch(
    read: &CollectionRead<'_>,
    parts: &[Part],
    field: &str,
    queries: &[f32],
    k: usize,
    threads: usize,
    hits: BatchHits<'_>,
) -> Result<Vec<Vec<SearchHit>>> {
    let BatchHits {
        projection,
        max_bytes,
    } = hits;
    crate::check_projection(projection)?;
    let mut bound = max_bytes.map(HitBytes::new);
    let view = read.vectors(field)?;
    // Every query checked (each error naming its own) and k refused at 0,
    // whichever way the batch then runs, even with no queries.
    let dim = view.dim();
    slate_vector::check_batch(queries, dim, view.metric())?;
    if k == 0 {
        return Err(slate_vector::Error::ZeroK.into());
    }
    if read.config().partition_key.is_some() || read.in_write_txn() {
        // Partition scoping, and a write transaction's deleted documents,
        // need a per-row check: run the queries one by one.
        return queries
            .chunks_exact(dim)
            .map(|q| {
                let spec = SearchSpec {
                    field: field.to_owned(),
                    query: q.to_vec(),
                    k,
                    projection: projection.map(<[String]>::to_vec),
                    threads,
                    ..Default::default()
                };
                search_within(read, parts, &spec, bound.as_mut()).map(|(h, _)| h)
            })
            .collect();
    }
    if parts.is_empty() {
        return Ok(vec![Vec::new(); queries.len() / dim.max(1)]);
    }
    let all = view.search_batch(queries, k, threads)?;
    // One marker read for the batch, not one a query.
    let ids_only = ids_only(read, projection)?;
    all.iter()
        .map(|hits| materialize_hits_as(read, hits, projection, ids_only, bound.as_mut()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doc_bytes_is_the_serialized_size() {
        use bson::spec::BinarySubtype;
        use bson::{
            doc, oid::ObjectId, Binary, DateTime, Decimal128, JavaScriptCodeWithScope, Regex, Timestamp,
        };
        let long: Vec<Bson> = (0..1234).map(Bson::Int32).collect();
        let docs = [
            doc! {},
            doc! { "_id": 1, "a": "text", "b": 2.5, "c": 7i64, "d": true, "e": Bson::Null },
            doc! { "_id": ObjectId::new(), "nested": { "x": [1, "two", { "y": [] }], "z": {} } },
            doc! { "long": long, "when": DateTime::from_millis(5), "ts": Timestamp { time: 1, increment: 2 } },
            doc! {
                "bin": Binary { subtype: BinarySubtype::Generic, bytes: vec![1, 2, 3] },
                "re": Regex { pattern: "a+".into(), options: "i".into() },
                "dec": Decimal128::from_bytes([0; 16]),
                "code": Bson::JavaScriptCode("f()".into()),
                "scoped": JavaScriptCodeWithScope { code: "g()".into(), scope: doc! { "k": 1 } },
                "sym": Bson::Symbol("s".into()),
                "max": Bson::MaxKey,
                "min": Bson::MinKey,
                "undefined": Bson::Undefined,
            },
        ];
        for d in docs {
            assert_eq!(doc_bytes(&d), bson::to_vec(&d).expect("serialize").len(), "{d}");
        }
    }

    /// Matches kept at one version of a collection serve readers at later
    /// versions while only other collections change, and never a reader of
    /// an older version of it (whose documents differ), nor one after the
    /// next commit to it.
    #[test]
    fn kept_matches_hold_while_only_other_collections_change() {
        use slate_core::{store::MemoryStore, CollectionConfig, Database, Metric, Part};
        let db = Database::open(std::sync::Arc::new(MemoryStore::new())).expect("open");
        db.create_collection(CollectionConfig::new("c").vector("v", 2, Metric::L2))
            .expect("create");
        db.create_collection(CollectionConfig::new("o")).expect("create");
        let write = |coll: &str, docs: Vec<Document>| {
            let mut txn = db.begin_write().expect("begin");
            for d in docs {
                let id = d.get("_id").cloned().expect("_id");
                txn.delete(coll, &Part::none(), &id).expect("delete");
                txn.insert(coll, d).expect("insert");
            }
            txn.commit().expect("commit");
        };
        let doc = |i: i64, u: i64| bson::doc! { "_id": i, "v": [i as f64, 0.0], "u": u };
        write("c", (0..300).map(|i| doc(i, i % 10)).collect());
        let spec = SearchSpec {
            field: "v".into(),
            query: vec![0.0, 0.0],
            k: 3,
            filter: Some(Filter::parse(&bson::doc! { "u": 3 }).expect("filter")),
            strategy: Strategy::Gather,
            threads: 1,
            ..Default::default()
        };
        // Ids of the hits, and where gather took its candidates from.
        let explained = |read: &CollectionRead<'_>| -> (Vec<i64>, SearchExplain) {
            let (hits, explain) = search(read, &[Part::none()], &spec).expect("search");
            (hits.iter().map(|h| h.id.as_i64().expect("id")).collect(), explain)
        };
        let gather = |read: &CollectionRead<'_>| -> (Vec<i64>, &'static str) {
            let (ids, explain) = explained(read);
            (ids, explain.candidates_from)
        };
        let before = db.read();
        // Document 0, the nearest, comes to match.
        write("c", vec![doc(0, 3)]);
        let first = db.read();
        assert_eq!(
            gather(&first.collection("c").expect("c")),
            (vec![0, 3, 13], "documents")
        );
        write("o", vec![bson::doc! { "_id": 1 }]);
        let after_other = db.read();
        let c = after_other.collection("c").expect("c");
        assert!(after_other.version() > first.version());
        assert_eq!(c.changed_at(), first.collection("c").expect("c").changed_at());
        assert_eq!(gather(&c), (vec![0, 3, 13], "kept matches"));
        // The reader from before the commit to `c` finds its own matches.
        let old = before.collection("c").expect("c");
        assert!(old.changed_at() < c.changed_at());
        assert_eq!(gather(&old), (vec![3, 13, 23], "documents"));
        assert_eq!(
            gather(&first.collection("c").expect("c")),
            (vec![0, 3, 13], "kept matches")
        );
        // After the next commit to `c`, they are brought forward: the one
        // document it wrote is read again.
        write("c", vec![doc(3, 4)]);
        let latest = db.read();
        let (ids, explain) = explained(&latest.collection("c").expect("c"));
        assert_eq!(ids, [0, 13, 23]);
        assert_eq!(
            (explain.estimated_by, explain.candidates_from),
            ("kept matches, updated", "kept matches")
        );
        // Exactly the 30 matches: 0 and 13, 23, ..., 293, not 3's old row.
        assert_eq!(explain.estimate, 30);
        assert_eq!(
            gather(&latest.collection("c").expect("c")),
            (vec![0, 13, 23], "kept matches")
        );
        // (Which replaced the older version's.)
        assert_eq!(
            gather(&after_other.collection("c").expect("c")),
            (vec![0, 3, 13], "documents")
        );
        // A commit writing more than a quarter of the rows: found again from
        // the documents.
        write("c", (100..200).map(|i| doc(i, (i + 1) % 10)).collect());
        let (ids, explain) = explained(&db.read().collection("c").expect("c"));
        assert_eq!(ids, [0, 13, 23]);
        assert_eq!(explain.candidates_from, "documents", "{explain:?}");
    }

    #[test]
    fn a_write_transactions_search_reads_hits_documents_not_keys() {
        // Its read sees its own delete while its vector view stays at the
        // last commit: the deleted document's row is still there, and only
        // reading the document shows it is gone.
        use slate_core::{store::MemoryStore, CollectionConfig, Database, Metric, Part};
        let db = Database::open(std::sync::Arc::new(MemoryStore::new())).expect("open");
        db.create_collection(CollectionConfig::new("c").vector("v", 2, Metric::L2))
            .expect("create");
        let mut txn = db.begin_write().expect("begin");
        for i in 0..3i64 {
            txn.insert("c", bson::doc! { "_id": i, "v": [i as f64, 0.0] })
                .expect("insert");
        }
        txn.commit().expect("commit");
        let spec = SearchSpec {
            field: "v".into(),
            query: vec![0.0, 0.0],
            k: 10,
            threads: 1,
            ..Default::default()
        };
        let ids = |read: &CollectionRead<'_>| -> Vec<Bson> {
            let (hits, _) = search(read, &[Part::none()], &spec).expect("search");
            hits.into_iter().map(|h| h.id).collect()
        };
        let committed = db.read();
        let read = committed.collection("c").expect("read");
        assert!(read.ids_decode_exactly().expect("marker"));
        assert_eq!(ids(&read), [Bson::Int64(0), Bson::Int64(1), Bson::Int64(2)]);
        let mut txn = db.begin_write().expect("begin");
        assert!(txn.delete("c", &Part::none(), &Bson::Int64(0)).expect("delete"));
        let own = txn.collection("c").expect("read");
        assert_eq!(ids(&own), [Bson::Int64(1), Bson::Int64(2)]);
        // With k = 2 the deleted document's row would take a slot of the
        // top two and leave one hit: the rows are checked against the
        // transaction's documents, unfiltered too, one query or a batch.
        for strategy in [Strategy::Scan, Strategy::Auto] {
            let spec = SearchSpec {
                k: 2,
                strategy,
                ..spec.clone()
            };
            let (hits, _) = search(&own, &[Part::none()], &spec).expect("search");
            let got: Vec<Bson> = hits.into_iter().map(|h| h.id).collect();
            assert_eq!(got, [Bson::Int64(1), Bson::Int64(2)], "{strategy}");
        }
        let batch = search_batch(
            &own,
            &[Part::none()],
            "v",
            &[0.0, 0.0, 0.5, 0.0],
            2,
            1,
            BatchHits::default(),
        )
        .expect("batch");
        for hits in batch {
            let got: Vec<Bson> = hits.into_iter().map(|h| h.id).collect();
            assert_eq!(got, [Bson::Int64(1), Bson::Int64(2)]);
        }
    }

    /// A write transaction on `db` that replaced document `id` of `c` by `doc`.
    fn replaced(db: &slate_core::Database, id: i32, doc: Document) -> slate_core::WriteTxn<'_> {
        let mut txn = db.begin_write().expect("begin");
        let read = txn.collection("c").expect("read");
        let key = read
            .get_by_id(&Part::none(), &Bson::Int32(id))
            .expect("get")
            .expect("there")
            .key
            .into_owned();
        drop(read);
        txn.replace_key("c", &key, doc).expect("replace");
        txn
    }

    /// The ids each strategy finds nearest `[0, 0]` in `v` under `{a: 1}`.
    fn ids_by_strategy(read: &CollectionRead<'_>) -> Vec<(Strategy, Vec<Bson>)> {
        [Strategy::Gather, Strategy::Bitmap, Strategy::Scan, Strategy::Auto]
            .into_iter()
            .map(|strategy| {
                let spec = SearchSpec {
                    field: "v".into(),
                    query: vec![0.0, 0.0],
                    k: 10,
                    threads: 1,
                    filter: Some(Filter::parse(&bson::doc! { "a": 1 }).expect("filter")),
                    strategy,
                    ..Default::default()
                };
                let (hits, _) = search(read, &[Part::none()], &spec).expect("search");
                (strategy, hits.into_iter().map(|h| h.id).collect())
            })
            .collect()
    }

    #[test]
    fn a_write_transactions_search_checks_documents_its_index_answered() {
        // The committed row is tagged a = 1; the transaction changed its
        // document to a = 2: an exact index answer from the last commit's
        // tags must still be checked against the transaction's document.
        use slate_core::{store::MemoryStore, CollectionConfig, Database, Metric};
        let db = Database::open(std::sync::Arc::new(MemoryStore::new())).expect("open");
        db.create_collection(CollectionConfig::new("c").index("a").vector("v", 2, Metric::L2))
            .expect("create");
        let mut txn = db.begin_write().expect("begin");
        txn.insert("c", bson::doc! { "_id": 1, "a": 1, "v": [1.0, 0.0] })
            .expect("insert");
        txn.commit().expect("commit");
        let mut txn = replaced(&db, 1, bson::doc! { "_id": 1, "a": 2, "v": [1.0, 0.0] });
        let own = txn.collection("c").expect("read");
        for (strategy, ids) in ids_by_strategy(&own) {
            assert!(ids.is_empty(), "{strategy}: {ids:?}");
        }
        // The other way: a document the transaction changed into the
        // filter's range is found by every strategy, though the last
        // commit's tags hold its old value.
        drop(own);
        txn.insert("c", bson::doc! { "_id": 2, "a": 2, "v": [2.0, 0.0] })
            .expect("insert");
        txn.commit().expect("commit");
        let txn = replaced(&db, 2, bson::doc! { "_id": 2, "a": 1, "v": [2.0, 0.0] });
        let own = txn.collection("c").expect("read");
        for (strategy, ids) in ids_by_strategy(&own) {
            assert_eq!(ids, [Bson::Int32(2)], "{strategy}");
        }
    }

    #[test]
    fn only_a_sparse_masks_rows_are_all_read_cold() {
        let n = 100_000.0;
        let tasks = n / slate_vector::SCAN_TASK_ROWS as f64;
        // One row in a thousand: under one row a task, each read cold.
        assert_eq!(CostModel::cold_mask_rows(n, 100.0), 100.0);
        // Denser masks: the first rows of each task only, so the cold share
        // falls as the mask fills.
        let at_1 = CostModel::cold_mask_rows(n, 1_000.0);
        let at_50 = CostModel::cold_mask_rows(n, 50_000.0);
        assert!(at_1 < 1_000.0 && at_1 >= tasks, "{at_1}");
        assert_eq!(at_1, at_50);
        // With tagged candidates at 100k × 384 and no codes, the priced
        // crossover between gather and bitmap lies between 1% and 50% (the
        // sweep without codes measured it between 1% and 10%, before the
        // bitmap's mask build was priced apart, at `tagged_mask_candidate`,
        // which moves it to about 10%).
        let m = CostModel::for_dim(384).tagged().without_codes();
        let gather_and_bitmap = |c: f64| {
            let [(_, gather), _, (_, bitmap)] = m.costs(&exact_index(n, 10.0, c));
            (gather.expect("gather"), bitmap.expect("bitmap"))
        };
        let (gather, bitmap) = gather_and_bitmap(1_000.0);
        assert!(gather < bitmap, "1%: gather {gather}, bitmap {bitmap}");
        let (gather, bitmap) = gather_and_bitmap(50_000.0);
        assert!(gather > bitmap, "50%: gather {gather}, bitmap {bitmap}");
    }

    /// A search of `n` rows for `k` under a filter an index answers
    /// exactly, matching `c` rows, on one thread.
    fn exact_index(n: f64, k: f64, c: f64) -> Priced {
        Priced {
            n,
            k,
            matches: c,
            candidates: c,
            selectivity: c / n,
            par: 1.0,
            filtered: true,
            exact: true,
            indexed: true,
            id_lookup: CANDIDATE,
        }
    }

    #[test]
    fn with_codes_the_cheapest_priced_strategy_is_the_sweeps_fastest() {
        // The sweep at 100k × 384, k = 10, one thread, with codes and an
        // exact, tagged index (BENCHMARKS.md): the lazy scan ran fastest
        // at 100% of rows (1.2 to 1.5 times the bitmap's speed in five runs,
        // gather about half the bitmap's), the bitmap or
        // gather from 50% to 10% (the scan 1.2 to 1.9 times their time at
        // 50%, 6 to 7 times at 10%, in two runs), and gather from 1% down.
        let (n, k) = (100_000.0, 10.0);
        let m = CostModel::for_dim(384).tagged();
        let cheapest = |c: f64| {
            let costs = m.costs(&exact_index(n, k, c));
            let best = costs
                .iter()
                .filter_map(|(st, c)| c.map(|c| (*st, c)))
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .expect("a cost");
            (best.0, costs)
        };
        for (c, want) in [
            (n, &[Strategy::Scan][..]),
            (50_000.0, &[Strategy::Bitmap, Strategy::Gather][..]),
            (10_000.0, &[Strategy::Bitmap, Strategy::Gather][..]),
            (1_000.0, &[Strategy::Gather][..]),
            (100.0, &[Strategy::Gather][..]),
            (10.0, &[Strategy::Gather][..]),
        ] {
            let (best, costs) = cheapest(c);
            assert!(want.contains(&best), "{c} rows: {best} is cheapest of {costs:?}");
        }
        // Few rows are gathered outright, codes or not.
        assert_eq!(m.gathered(200.0, k), m.without_codes().gathered(200.0, k));
        assert!(m.gathered(1_000.0, k) < m.without_codes().gathered(1_000.0, k));
    }

    #[test]
    fn a_masked_scan_of_few_rows_costs_at_least_its_set_up() {
        // No candidates, or fewer than k: every one read, none of the
        // logarithm's negative values (an empty match once priced -inf,
        // and auto ran a bitmap over every task for it).
        let model = CostModel::for_dim(384);
        for c in [0.0, 1.0, 5.0, 10.0] {
            assert_eq!(CostModel::survivors(c, 10.0), c);
            let cost = model.masked(100_000.0, c, 10.0);
            assert!(cost.is_finite() && cost >= 196.0 * model.mask_task, "{c}: {cost}");
            assert!(model.gathered(c, 10.0) < cost, "{c}: gather is cheaper");
        }
        assert!(CostModel::survivors(1_000.0, 10.0) < 1_000.0);
    }

    #[test]
    fn a_sample_is_spread_over_the_rows_in_every_prefix() {
        // Ten times the visible rows: ten times the positions.
        assert_eq!(sample_positions(100_000, 10_000).count(), 10 * SAMPLE_ROWS);
        assert_eq!(sample_positions(100_000, 1).count(), SAMPLE_SLOTS);
        for rows in [0usize, 1, 2, 5, 1000, 1024, 1025, 3000, 100_000] {
            let positions: Vec<usize> = sample_positions(rows, rows).collect();
            assert_eq!(positions.len(), rows.min(SAMPLE_ROWS), "rows {rows}");
            let mut sorted = positions.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), positions.len(), "rows {rows}: a position repeats");
            assert!(positions.iter().all(|&p| p < rows), "rows {rows}");
            // Its first 64 positions (where a sample of an unselective
            // filter may stop) leave no gap over a 24th of the rows.
            if rows >= SAMPLE_ROWS {
                let mut first: Vec<usize> = positions[..64].to_vec();
                first.sort_unstable();
                first.insert(0, 0);
                first.push(rows);
                let gap = first.windows(2).map(|w| w[1] - w[0]).max();
                assert!(gap <= Some(rows / 24), "rows {rows}: gap {gap:?}");
            }
        }
    }

    #[test]
    fn a_samples_first_positions_hold_each_residue_in_its_share() {
        // Documents written in turns (a question, then its answer; three
        // kinds in rotation): each kind is its share of every sample. A
        // bit-reversed order over 2,048 slots gave 2,001 rows' first 1,024
        // positions all even.
        // Row counts no period divides, so a uniform share is the order's
        // doing, not the arithmetic's; fewer visible rows than rows only
        // lengthen the sequence.
        let cases = [
            (2_001usize, 2_000usize),
            (2_047, 2_047),
            (3_001, 1_500),
            (4_999, 4_998),
            (99_999, 99_999),
        ];
        for (rows, visible) in cases {
            let positions: Vec<usize> = sample_positions(rows, visible).take(SAMPLE_ROWS).collect();
            for period in [2usize, 3, 4, 10] {
                for residue in 0..period {
                    let share = positions.iter().filter(|&&p| p % period == residue).count() as f64
                        / positions.len() as f64;
                    let want = 1.0 / period as f64;
                    assert!(
                        (share - want).abs() < want * 0.2,
                        "rows {rows}: residue {residue} of {period} is {share:.3} of the sample"
                    );
                }
            }
        }
    }

    #[test]
    fn count_cap_is_where_a_scan_becomes_cheapest() {
        for (n, k, dim) in [
            (100_000u64, 10usize, 384usize),
            (2_000, 10, 8),
            (1_000_000, 100, 128),
            (50, 10, 384),
        ] {
            let model = CostModel::for_dim(dim);
            let cap = model.count_cap(n, k);
            assert!(cap >= 64 && cap <= n.max(64), "n {n}: cap {cap}");
            // At the cap the index strategies' floor reaches a lazy scan's
            // cost; one entry below it they are still cheaper.
            let (nf, kf) = (n as f64, k as f64);
            let scan = |c: f64| model.filtered_scan(nf, c / nf, kf, 1.0);
            let floor = |c: f64| {
                c * (model.candidate
                    + model
                        .code_row
                        .min(model.gather_row)
                        .min(model.mask_row)
                        .min(model.mask_code))
            };
            if cap > 64 {
                assert!(floor(cap as f64) >= scan(cap as f64), "n {n}");
                assert!(floor((cap - 1) as f64) < scan((cap - 1) as f64), "n {n}");
            }
        }
        // At 100k × 384 with row codes (which a lazy scan uses too, once
        // its heap is full: it reads a third of a row's worth per row) a
        // scan wins past about 15% of the rows, so an index is counted that
        // far; without codes, past a third.
        let cap = CostModel::for_dim(384).count_cap(100_000, 10);
        assert!((12_000..19_000).contains(&cap), "{cap}");
        // Its binary search needs a lazy scan's price to fall as more rows
        // match, codes or not, on one thread or two.
        for model in [CostModel::for_dim(384), CostModel::for_dim(384).without_codes()] {
            for par in [1.0, 2.0] {
                let n = 100_000.0;
                let mut last = f64::INFINITY;
                let grid = (10..100).chain((1..=1_000).map(|i| i * 100));
                for c in grid.map(f64::from) {
                    let cost = model.filtered_scan(n, c / n, 10.0, par);
                    assert!(
                        cost <= last + 1e-6,
                        "{c} matching, {par} threads: {cost} after {last}"
                    );
                    last = cost;
                }
            }
        }
        let cap = CostModel::for_dim(384).without_codes().count_cap(100_000, 10);
        assert!((25_000..45_000).contains(&cap), "{cap}");
    }
}
