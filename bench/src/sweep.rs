//! The hybrid-search selectivity sweep: the k nearest of the documents
//! matching a filter, from 100% of rows matching down to 0.01%, with every
//! forced strategy, with auto, and with a reference that is handed the
//! matching rows for free.
//!
//! The data: `n` documents with a random `dim`-d embedding (l2) and a
//! `bucket` in `0..10_000` spread evenly and independently of the vector,
//! stored twice: `bucket` (indexed) and `ubucket` (not indexed). A filter
//! `{bucket: {$gte: lo, $lt: lo + s × 10,000}}` matches a fraction `s` of
//! the rows exactly.
//!
//! Consecutive queries at one point use different windows `lo` (up to
//! [`WINDOWS`] of them, disjoint), as a query stream rarely repeats its
//! filter. With one filter repeated, the same matching rows are read by
//! every query: at 1% that is 1,000 rows of 1.5 KiB, which stay in a 2 MiB
//! L2 cache between queries, and whichever side touches the least other
//! memory keeps the most of them there (the reference's gather ran 1.44×
//! faster at 1% and 1.86× at 0.1% with one filter than with rotating ones,
//! on the same rows).
//!
//! Two references know the answer set in advance and pay nothing to find
//! it; Slate's strategies pay for the estimate, the index reads and the
//! filter checks. Each searches either just the matching rows (gather) or
//! every row under a precomputed mask, whichever is faster at that point:
//!
//! - the *kernel* reference runs Slate's own vector layer (the same vectors
//!   in their own [`VectorCache`], with its prefetching gather and masked
//!   scan), so the gap to it is what the filter costs Slate;
//! - the *plain* reference is what an application would write by hand: the
//!   vectors in one `Vec<f32>`, simsimd's distance on each matching row in
//!   order, and a bounded `BinaryHeap` for the top k ([`plain_gather`],
//!   [`plain_mask`]).

use std::collections::{BTreeMap, BinaryHeap};
use std::time::{Duration, Instant};

use bson::{doc, spec::BinarySubtype, Binary, Bson, Document};
use ordered_float::OrderedFloat;
use simsimd::SpatialSimilarity;
use slate::query::CostModel;
use slate::{CollectionConfig, Db, Metric, SearchExplain, Strategy, VectorField};
use slate_vector::{CacheConfig, CacheView, RowId, RowMask, VectorCache};

/// Distinct bucket values; selectivities are multiples of `1 / BUCKETS`.
pub const BUCKETS: u64 = 10_000;

/// The selectivities of the sweep, from every row down to one in 10,000.
pub const SELECTIVITIES: [f64; 6] = [1.0, 0.5, 0.1, 0.01, 0.001, 0.0001];

/// The `qps` key of auto with its filters repeated (at the points without
/// an index, where the second search with a filter may keep its matches):
/// the forced strategies and `auto` run every search as a filter's first.
pub const REPEATED: &str = "auto, repeated filter";

/// Most disjoint filter windows a point rotates through.
pub const WINDOWS: usize = 16;

/// The strategies timed at every point, in table order.
pub const STRATEGIES: [Strategy; 4] = [Strategy::Gather, Strategy::Scan, Strategy::Bitmap, Strategy::Auto];

/// The size of a sweep run.
#[derive(Debug, Clone)]
pub struct SweepConfig {
    /// Documents (each with a vector).
    pub n: usize,
    /// Vector dimension.
    pub dim: usize,
    /// Hits per query.
    pub k: usize,
    /// Distinct query vectors, cycled through while timing.
    pub queries: usize,
    /// Minimum time spent timing each (point, strategy) pair.
    pub min_time: Duration,
    /// Whether Slate's field (and the kernel reference's cache) keep row
    /// codes ([`VectorField::with_codes`]); the plain reference has none.
    pub codes: bool,
}

impl Default for SweepConfig {
    fn default() -> Self {
        Self {
            n: 100_000,
            dim: 384,
            k: 10,
            queries: 16,
            min_time: Duration::from_millis(500),
            codes: true,
        }
    }
}

/// One filter of the sweep and what each strategy achieved on it (a row of
/// the report's table and of its JSON).
#[derive(Debug, Clone, serde::Serialize)]
pub struct SweepPoint {
    /// The filters, for tables (`bucket in 10 of 1000 values (10%, indexed)`).
    pub label: String,
    /// Fraction of rows matching.
    pub selectivity: f64,
    /// Rows matching.
    pub matching: usize,
    /// Whether the filter's field is indexed.
    pub indexed: bool,
    /// The strategy auto chose.
    pub auto_choice: String,
    /// Queries per second: `gather`, `scan`, `bitmap`, `auto` (each search
    /// run as its filter's first), [`REPEATED`] (auto reusing the matches
    /// an earlier search with the same filter kept; without an index only),
    /// `reference` (the faster of the kernel reference's two searches) and
    /// `plain` (the faster of the plain reference's).
    pub qps: BTreeMap<String, f64>,
}

/// The sweep's data set: one collection plus the reference's own copy of the
/// vectors, and the query vectors.
#[derive(Debug)]
pub struct SweepData {
    /// The database holding collection `docs` (memory store).
    pub db: Db,
    /// A handle on `docs`, held as an application holds one.
    pub docs: slate::Collection,
    /// Reference copy of the vectors; row `i` is document `i`.
    pub reference: VectorCache,
    /// The plain reference's copy: document `i`'s vector at `i × dim`.
    pub plain: Vec<f32>,
    /// Each document's bucket, by row.
    pub buckets: Vec<u64>,
    /// Query vectors.
    pub queries: Vec<Vec<f32>>,
    /// The configuration it was built with.
    pub config: SweepConfig,
}

/// A xorshift generator: deterministic data without a dependency.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn unit(&mut self) -> f32 {
        (self.next() % 20_000) as f32 / 10_000.0 - 1.0
    }
}

/// The bucket of document `i`: a fixed permutation of `i mod BUCKETS`, so
/// each bucket holds `n / BUCKETS` documents scattered over the rows.
fn bucket_of(i: usize) -> u64 {
    (i as u64 % BUCKETS) * 7_919 % BUCKETS
}

/// The bucket values one filter at `selectivity` spans (at least one).
fn span(selectivity: f64) -> u64 {
    ((selectivity * BUCKETS as f64).round() as u64).clamp(1, BUCKETS)
}

/// How many disjoint windows a point at `selectivity` rotates through.
/// Each matches the same number of rows when `n` is a multiple of
/// [`BUCKETS`] (the default 100,000 and the quick run's 20,000); otherwise
/// their counts differ, down to none at 0.01% when `n` < 10,000, and the
/// point's `matching` reports the first window's.
pub fn windows(selectivity: f64) -> usize {
    (BUCKETS / span(selectivity)).clamp(1, WINDOWS as u64) as usize
}

/// The bucket values of window `w` at `selectivity`: `lo..hi`.
fn window_range(selectivity: f64, w: usize) -> (u64, u64) {
    let span = span(selectivity);
    let lo = (w % windows(selectivity)) as u64 * span;
    (lo, lo + span)
}

/// The filter of window `w` (taken modulo [`windows`]): it matches a
/// fraction `selectivity` of the rows, disjoint from the other windows'.
pub fn filter_for(selectivity: f64, indexed: bool, w: usize) -> Document {
    let field = if indexed { "bucket" } else { "ubucket" };
    let (lo, hi) = window_range(selectivity, w);
    doc! { field: { "$gte": lo as i64, "$lt": hi as i64 } }
}

/// Builds the data set (in memory; a 100k × 384 build takes a few seconds).
pub fn build(config: &SweepConfig) -> Result<SweepData, Box<dyn std::error::Error>> {
    let db = Db::memory();
    let field = VectorField::new("embedding", config.dim, Metric::L2).with_codes(config.codes);
    let docs = db.create_collection(
        CollectionConfig::new("docs")
            .index("bucket")
            .vector_field_config(field),
    )?;
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut buckets = Vec::with_capacity(config.n);
    let mut plain = Vec::with_capacity(config.n * config.dim);
    const BATCH: usize = 10_000;
    let mut batch = Vec::with_capacity(BATCH);
    for i in 0..config.n {
        let v: Vec<f32> = (0..config.dim).map(|_| rng.unit()).collect();
        let bucket = bucket_of(i);
        buckets.push(bucket);
        let bytes = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        plain.extend_from_slice(&v);
        batch.push(doc! {
            "_id": i as i64,
            "bucket": bucket as i64,
            "ubucket": bucket as i64,
            "embedding": Binary { subtype: BinarySubtype::Generic, bytes },
        });
        if batch.len() == BATCH {
            docs.insert_many(std::mem::take(&mut batch))?;
        }
    }
    if !batch.is_empty() {
        docs.insert_many(batch)?;
    }
    let reference = reference_cache(&plain, config.dim, config.codes)?;
    let queries = (0..config.queries.max(1))
        .map(|_| (0..config.dim).map(|_| rng.unit()).collect())
        .collect();
    Ok(SweepData {
        db,
        docs,
        reference,
        plain,
        buckets,
        queries,
        config: config.clone(),
    })
}

/// Document `doc`'s id key (the sweep's ids are the document numbers).
fn doc_key(doc: usize) -> Vec<u8> {
    slate_core::value::encode_id(&Bson::Int64(doc as i64)).expect("an int64 id encodes")
}

/// A cache of the plain vectors (`dim` floats each), document `i` under its
/// id at row `i`, committed at version 1, with or without row codes.
fn reference_cache(plain: &[f32], dim: usize, codes: bool) -> Result<VectorCache, slate_vector::Error> {
    let cache = VectorCache::with_config(CacheConfig::new(dim, Metric::L2).codes(codes))?;
    cache.load(
        plain.chunks_exact(dim).enumerate().map(|(i, v)| (doc_key(i), v)),
        1,
    )?;
    Ok(cache)
}

/// The rows of `view` holding documents `docs` (found through their ids).
fn rows_of_docs(view: &CacheView, docs: &[u32]) -> Vec<RowId> {
    docs.iter()
        .filter_map(|&doc| view.row_of(&doc_key(doc as usize)))
        .collect()
}

/// Rounds each contender of a sweep point is timed in, in turn
/// ([`SweepData::measure`]); each round lasts a share of `min_time`, and at
/// least one pass over the queries.
pub const ROUNDS: usize = 5;

/// Runs `f` on the queries in turn (with each call's number) until
/// `min_time` has passed (and at least once per query); returns queries per
/// second.
fn time_qps(
    queries: &[Vec<f32>],
    min_time: Duration,
    mut f: impl FnMut(usize, &[f32]) -> Result<(), Box<dyn std::error::Error>>,
) -> Result<f64, Box<dyn std::error::Error>> {
    let start = Instant::now();
    let mut done = 0usize;
    while done < queries.len() || start.elapsed() < min_time {
        f(done, &queries[done % queries.len()])?;
        done += 1;
    }
    Ok(done as f64 / start.elapsed().as_secs_f64())
}

/// The plain reference's top k: a max-heap of the k nearest so far, each
/// new distance compared with its worst.
#[derive(Debug)]
struct PlainTopK {
    k: usize,
    heap: BinaryHeap<(OrderedFloat<f32>, u32)>,
}

impl PlainTopK {
    fn new(k: usize) -> Self {
        Self {
            k,
            heap: BinaryHeap::with_capacity(k + 1),
        }
    }

    fn push(&mut self, distance: f32, doc: u32) {
        let entry = (OrderedFloat(distance), doc);
        if self.heap.len() < self.k {
            self.heap.push(entry);
        } else if let Some(mut worst) = self.heap.peek_mut() {
            if entry < *worst {
                *worst = entry;
            }
        }
    }

    /// Distances, nearest first.
    fn into_distances(self) -> Vec<f32> {
        self.heap
            .into_sorted_vec()
            .into_iter()
            .map(|(d, _)| d.0)
            .collect()
    }
}

/// simsimd's squared l2 distance, as Slate's l2 metric computes it.
fn plain_l2sq(a: &[f32], b: &[f32]) -> f32 {
    <f32 as SpatialSimilarity>::l2sq(a, b).map_or(f32::NAN, |d| d as f32)
}

/// The plain reference's gather: the k nearest of documents `docs`, whose
/// vectors lie at `doc × dim` in `vectors`. Distances, nearest first.
pub fn plain_gather(vectors: &[f32], dim: usize, query: &[f32], k: usize, docs: &[u32]) -> Vec<f32> {
    let mut top = PlainTopK::new(k);
    for &doc in docs {
        let at = doc as usize * dim;
        top.push(plain_l2sq(&vectors[at..at + dim], query), doc);
    }
    top.into_distances()
}

/// The plain reference's masked scan: every document in order, a distance
/// for those whose bit is set in `bits` (bit `doc % 64` of word `doc / 64`).
pub fn plain_mask(vectors: &[f32], dim: usize, query: &[f32], k: usize, bits: &[u64]) -> Vec<f32> {
    let mut top = PlainTopK::new(k);
    for (doc, vector) in vectors.chunks_exact(dim).enumerate() {
        if bits[doc / 64] >> (doc % 64) & 1 == 1 {
            top.push(plain_l2sq(vector, query), doc as u32);
        }
    }
    top.into_distances()
}

impl SweepData {
    /// The plain reference's hits for one query, gathering `window`'s
    /// documents.
    pub fn plain_gather(&self, query: &[f32], window: &Window) -> Vec<f32> {
        plain_gather(&self.plain, self.config.dim, query, self.config.k, &window.docs)
    }

    /// The plain reference's hits for one query, scanning every document
    /// under `window`'s bits.
    pub fn plain_mask(&self, query: &[f32], window: &Window) -> Vec<f32> {
        plain_mask(&self.plain, self.config.dim, query, self.config.k, &window.bits)
    }

    /// Window `w` at `selectivity`: its filter, and its matching documents
    /// in the forms each reference is handed. The kernel reference's rows
    /// are found through the documents' ids (its rows are assigned in load
    /// order, but the ids keep this exact).
    fn window(&self, selectivity: f64, indexed: bool, w: usize) -> Window {
        let (lo, hi) = window_range(selectivity, w);
        let docs: Vec<u32> = (0..self.buckets.len())
            .filter(|&i| (lo..hi).contains(&self.buckets[i]))
            .map(|i| i as u32)
            .collect();
        let view = self
            .reference
            .view(1)
            .expect("reference cache committed at version 1");
        let rows = rows_of_docs(&view, &docs);
        let mut mask = RowMask::new(view.row_count());
        for &row in &rows {
            mask.set(row);
        }
        let mut bits = vec![0u64; self.buckets.len().div_ceil(64)];
        for &doc in &docs {
            bits[doc as usize / 64] |= 1 << (doc % 64);
        }
        Window {
            filter: filter_for(selectivity, indexed, w),
            rows,
            mask,
            docs,
            bits,
        }
    }

    /// The reference's hits for one query: distances, nearest first, by
    /// gathering just the matching rows.
    pub fn reference_gather(&self, query: &[f32], rows: &[RowId]) -> Result<Vec<f32>, slate_vector::Error> {
        let view = self.reference.view(1)?;
        Ok(view
            .search_rows(query, self.config.k, rows)?
            .iter()
            .map(|h| h.distance)
            .collect())
    }

    /// The reference's hits for one query by scanning every row under a mask.
    pub fn reference_mask(&self, query: &[f32], mask: &RowMask) -> Result<Vec<f32>, slate_vector::Error> {
        let view = self.reference.view(1)?;
        Ok(view
            .search_mask(query, self.config.k, 1, mask)?
            .iter()
            .map(|h| h.distance)
            .collect())
    }

    /// One search through Slate: the distances of the hits and the strategy
    /// that ran.
    pub fn slate(
        &self,
        query: &[f32],
        filter: &Document,
        strategy: Strategy,
    ) -> Result<(Vec<f32>, Strategy), slate::Error> {
        let (distances, explain) = self.slate_explain(query, filter, strategy)?;
        Ok((distances, explain.strategy))
    }

    /// One search through Slate, run as a filter's first search
    /// ([`Search::fresh`](slate::Search::fresh): no matches kept by an
    /// earlier search are used, none are kept): the distances of the hits
    /// and what it did.
    pub fn slate_explain(
        &self,
        query: &[f32],
        filter: &Document,
        strategy: Strategy,
    ) -> Result<(Vec<f32>, SearchExplain), slate::Error> {
        self.search(query, filter, strategy, true)
    }

    /// One search by auto as an application repeating its filters runs it:
    /// an earlier search's kept matches used (of a filter no index narrows,
    /// the second search keeps them). The distances of the hits and what it
    /// did.
    pub fn slate_repeated(
        &self,
        query: &[f32],
        filter: &Document,
    ) -> Result<(Vec<f32>, SearchExplain), slate::Error> {
        self.search(query, filter, Strategy::Auto, false)
    }

    fn search(
        &self,
        query: &[f32],
        filter: &Document,
        strategy: Strategy,
        fresh: bool,
    ) -> Result<(Vec<f32>, SearchExplain), slate::Error> {
        let mut search = self
            .docs
            .search("embedding", query)
            .k(self.config.k)
            .filter(filter)
            .strategy(strategy)
            .threads(1);
        if fresh {
            search = search.fresh();
        }
        let (hits, explain) = search.explain()?;
        Ok((hits.iter().map(|h| h.distance).collect(), explain))
    }

    /// Measures the planner's cost constants on this machine, in units of one
    /// row scanned (see [`Calibration`]).
    pub fn calibrate(&self) -> Result<Calibration, Box<dyn std::error::Error>> {
        let n = self.buckets.len() as f64;
        let q = &self.queries;
        let t = self.config.min_time;
        let secs = |qps: f64| 1.0 / qps;
        // One row: an unfiltered scan of the vectors without codes (with
        // them, Slate's unfiltered scan reads few vectors).
        let dim = self.config.dim;
        let uncoded = reference_cache(&self.plain, dim, false)?;
        let uncoded_view = uncoded.view(1)?;
        let all = secs(time_qps(q, t, |_, query| {
            uncoded_view.search(query, self.config.k, 1)?;
            Ok(())
        })?);
        let row = all / n;
        // A skipped row: a masked scan over an empty mask (of the copy
        // without codes, as the masked rows below: with codes each task
        // also sets up its code pass, measured apart).
        let empty = RowMask::new(uncoded_view.row_count());
        let skipped = secs(time_qps(q, t, |_, query| {
            uncoded_view.search_mask(query, self.config.k, 1, &empty)?;
            Ok(())
        })?);
        // A candidate: gather over an exact 10% filter pays a posting-list
        // entry and a visibility check per candidate, plus its distance; the
        // masked scan of the same rows pays its skips and the distances. Both
        // rotate through the sweep's windows, so that neither finds the last
        // query's rows in cache.
        let tens: Vec<Document> = (0..windows(0.1)).map(|w| filter_for(0.1, true, w)).collect();
        let ten = |i: usize| &tens[i % tens.len()];
        let (_, ex) = self.slate_explain(&q[0], ten(0), Strategy::Gather)?;
        let cands = ex.rows_scanned.max(1) as f64;
        let survivors = ex.rows_scanned.saturating_sub(ex.rows_pruned) as f64;
        let gather = secs(time_qps(q, t, |i, query| {
            self.slate(query, ten(i), Strategy::Gather)?;
            Ok(())
        })?);
        // A row gathered outright: the kernel's gather of the same rows
        // from the copy without codes (so nothing is pruned).
        let ten_rows: Vec<Vec<RowId>> = (0..windows(0.1))
            .map(|w| rows_of_docs(&uncoded_view, &self.window(0.1, true, w).docs))
            .collect();
        let outright = secs(time_qps(q, t, |i, query| {
            uncoded_view.search_rows(query, self.config.k, &ten_rows[i % ten_rows.len()])?;
            Ok(())
        })?);
        // A masked row read: the copy without codes scanned under the same
        // windows' masks (its rows lie where the sweep's cache has them).
        let ten_masks: Vec<RowMask> = (0..windows(0.1))
            .map(|w| self.window(0.1, true, w).mask)
            .collect();
        let masked = secs(time_qps(q, t, |i, query| {
            uncoded_view.search_mask(query, self.config.k, 1, &ten_masks[i % ten_masks.len()])?;
            Ok(())
        })?);
        // (One-sided filters below, as when the document constants were first
        // measured: a second bound costs each check a second comparison.)
        // A point check: a lazy scan under a filter (unindexed) that almost no
        // row passes checks nearly every row's document by key.
        let rare = doc! { "ubucket": { "$lt": 1 } };
        let (_, lazy) = self.slate_explain(&q[0], &rare, Strategy::Scan)?;
        let scan = secs(time_qps(q, t, |_, query| {
            self.slate(query, &rare, Strategy::Scan)?;
            Ok(())
        })?);
        // A check inside a scan: the lazy scan under the unindexed 1% point's
        // filters against the same scan under a filter every row passes,
        // both on the same queries. Beyond the further rows it reads (each
        // priced as a masked row: scattered, after the first fill), each
        // further check's cost: its document is read by key between rows,
        // cold, where the point check above reads them in key order.
        let ones: Vec<Document> = (0..windows(0.01)).map(|w| filter_for(0.01, false, w)).collect();
        let every = doc! { "ubucket": { "$gte": 0 } };
        let work = |filter: &dyn Fn(usize) -> Document| -> Result<(f64, f64), slate::Error> {
            let (mut reads, mut checks) = (0.0, 0.0);
            for (i, query) in q.iter().enumerate() {
                let (_, ex) = self.slate_explain(query, &filter(i), Strategy::Scan)?;
                reads += ex.rows_scanned.saturating_sub(ex.rows_pruned) as f64;
                checks += ex.docs_checked as f64;
            }
            Ok((reads / q.len() as f64, checks / q.len() as f64))
        };
        let (one_reads, one_checks) = work(&|i| ones[i % ones.len()].clone())?;
        let (all_reads, all_checks) = work(&|_| every.clone())?;
        let scan_one = secs(time_qps(q, t, |i, query| {
            self.slate(query, &ones[i % ones.len()], Strategy::Scan)?;
            Ok(())
        })?);
        let scan_all = secs(time_qps(q, t, |_, query| {
            self.slate(query, &every, Strategy::Scan)?;
            Ok(())
        })?);
        // A candidate set into a bitmap's mask from the row tags: Slate's
        // bitmap scan under the 100% filter (every row, a posting list per
        // bucket) against the kernel's masked scan over the same mask, handed
        // to it (the planning between is a few microseconds here).
        let whole = self.window(1.0, true, 0);
        let tagged_bitmap = secs(time_qps(q, t, |_, query| {
            self.slate(query, &whole.filter, Strategy::Bitmap)?;
            Ok(())
        })?);
        let handed_mask = secs(time_qps(q, t, |_, query| {
            self.reference_mask(query, &whole.mask)?;
            Ok(())
        })?);
        // A sequential check: gather without an index reads every document in
        // key order and keeps the matches.
        let raw = secs(time_qps(q, t, |_, query| {
            self.slate(query, &rare, Strategy::Gather)?;
            Ok(())
        })?);
        // A cold masked row: the kernel's masked scan at 0.1%, where each
        // scan task holds about half a row, so no row is prefetched ahead;
        // beyond the skips and a masked row's cost.
        let sparse: Vec<Window> = (0..windows(0.001)).map(|w| self.window(0.001, true, w)).collect();
        let sparse_rows =
            sparse.iter().map(|w| w.rows.len()).sum::<usize>().max(1) as f64 / sparse.len() as f64;
        let sparse_masked = secs(time_qps(q, t, |i, query| {
            uncoded_view.search_mask(query, self.config.k, 1, &sparse[i % sparse.len()].mask)?;
            Ok(())
        })?);
        let mask_row = ((masked - skipped) / cands / row).max(0.0);
        // Slate's exact bitmap with codes (when the sweep keeps them): at
        // 0.01% (ten rows) it is mostly the tasks' set-up, at 100% mostly a
        // code per row read in order, at 1% codes read scattered; each
        // beyond the skips and the survivors' reads (`CostModel`'s form).
        let bitmap_at = |s: f64| -> Result<(f64, f64), Box<dyn std::error::Error>> {
            let filters: Vec<Document> = (0..windows(s)).map(|w| filter_for(s, true, w)).collect();
            let (_, ex) = self.slate_explain(&q[0], &filters[0], Strategy::Bitmap)?;
            let time = secs(time_qps(q, t, |i, query| {
                self.slate(query, &filters[i % filters.len()], Strategy::Bitmap)?;
                Ok(())
            })?);
            Ok((time, ex.rows_scanned as f64))
        };
        let k = self.config.k as f64;
        let tasks = CostModel::scan_tasks(n);
        let beyond = |time: f64, c: f64| (time - skipped) / row - CostModel::survivors(c, k) * mask_row;
        let (mask_task, mask_code, mask_code_sparse) = if self.config.codes {
            let (few, c_few) = bitmap_at(0.0001)?;
            let (all_rows, c_all) = bitmap_at(1.0)?;
            let (one, c_one) = bitmap_at(0.01)?;
            let task = (beyond(few, c_few) / tasks).max(0.0);
            let dense = ((beyond(all_rows, c_all) - tasks * task) / c_all.max(1.0)).max(0.0);
            let sparse_factor = (1.0 - c_one / n).clamp(0.0, 1.0).powi(4).max(1e-9);
            let sparse =
                (((beyond(one, c_one) - tasks * task) / c_one.max(1.0) - dense) / sparse_factor).max(0.0);
            (task, dense, sparse)
        } else {
            (f64::NAN, f64::NAN, f64::NAN)
        };
        Ok(Calibration {
            mask_cold: ((sparse_masked - skipped) / sparse_rows / row - mask_row).max(0.0),
            row_nanos: row * 1e9,
            mask_skip: skipped / n / row,
            gather_row: outright / cands / row,
            code_row: ((gather - outright / cands * survivors) / cands / row).max(0.0),
            survivors,
            mask_row,
            mask_task,
            mask_code,
            mask_code_sparse,
            doc_check: ((scan - all) / (lazy.docs_checked.max(1) as f64) / row).max(0.0),
            tagged_mask_candidate: ((tagged_bitmap - handed_mask) / n / row).max(0.0),
            scan_check: (((scan_one - scan_all) / row - (one_reads - all_reads) * mask_row)
                / (one_checks - all_checks).max(1.0))
            .max(0.0),
            doc_scan: raw / n / row,
        })
    }

    /// Prepares one point of the sweep: each window's filter and matching
    /// rows (handed to the reference), and a check on the first queries, each
    /// with its window, that every strategy returns the reference's hits. A
    /// strategy that cannot serve the filter (gather or bitmap without an
    /// index) refuses with an error and is left out of `usable`.
    pub fn measure_checked(
        &self,
        selectivity: f64,
        indexed: bool,
    ) -> Result<Checked, Box<dyn std::error::Error>> {
        let windows: Vec<Window> = (0..windows(selectivity))
            .map(|w| self.window(selectivity, indexed, w))
            .collect();
        let mut auto_choice = Strategy::Auto;
        let mut usable: Vec<Strategy> = STRATEGIES.to_vec();
        for (i, query) in self.queries.iter().enumerate().take(2) {
            let window = &windows[i % windows.len()];
            let expected = self.reference_gather(query, &window.rows)?;
            if self.reference_mask(query, &window.mask)? != expected {
                return Err("reference: gather and mask disagree".into());
            }
            if self.plain_gather(query, window) != expected || self.plain_mask(query, window) != expected {
                return Err("the plain reference disagrees with the kernel reference".into());
            }
            for strategy in STRATEGIES {
                let (got, ran) = match self.slate(query, &window.filter, strategy) {
                    Ok(r) => r,
                    Err(_) if !indexed && matches!(strategy, Strategy::Gather | Strategy::Bitmap) => {
                        usable.retain(|s| *s != strategy);
                        continue;
                    }
                    Err(e) => return Err(e.into()),
                };
                if got != expected {
                    return Err(format!(
                        "{strategy} at selectivity {selectivity} (indexed: {indexed}) differs from the reference"
                    )
                    .into());
                }
                if strategy == Strategy::Auto {
                    auto_choice = ran;
                }
            }
            // Auto with its filters repeated: each window searched twice
            // first (the second keeps its matches when that pays), then
            // checked.
            if !indexed {
                for w in &windows {
                    for _ in 0..2 {
                        self.slate_repeated(query, &w.filter)?;
                    }
                }
                if self.slate_repeated(query, &window.filter)?.0 != expected {
                    return Err(format!(
                        "auto with its filter repeated at selectivity {selectivity} differs from the reference"
                    )
                    .into());
                }
            }
        }
        Ok(Checked {
            selectivity,
            indexed,
            windows,
            usable,
            auto_choice,
        })
    }

    /// Times every usable strategy and the reference at one point of the
    /// sweep, after checking them against the reference.
    pub fn measure(&self, selectivity: f64, indexed: bool) -> Result<SweepPoint, Box<dyn std::error::Error>> {
        let point = self.measure_checked(selectivity, indexed)?;
        let q = &self.queries;
        // Every contender is timed in each of ROUNDS rounds, in turn, and
        // keeps its median round: a burst of load from elsewhere on this
        // shared machine slows one round of every contender rather than
        // all the rounds of one (which made auto read 0.80 of the strategy
        // it ran, in one run, timed apart).
        let t = self.config.min_time / ROUNDS as u32;
        type Contender<'a> = (
            String,
            Box<dyn FnMut(usize, &[f32]) -> Result<(), Box<dyn std::error::Error>> + 'a>,
        );
        let mut contenders: Vec<Contender<'_>> = Vec::new();
        for &strategy in &point.usable {
            let point = &point;
            contenders.push((
                strategy.to_string(),
                Box::new(move |i, query| {
                    self.slate(query, &point.window(i).filter, strategy)?;
                    Ok(())
                }),
            ));
        }
        let point_ref = &point;
        if !indexed {
            contenders.push((
                REPEATED.into(),
                Box::new(move |i, query| {
                    self.slate_repeated(query, &point_ref.window(i).filter)?;
                    Ok(())
                }),
            ));
        }
        contenders.push((
            "reference gather".into(),
            Box::new(move |i, query| {
                self.reference_gather(query, &point_ref.window(i).rows)?;
                Ok(())
            }),
        ));
        contenders.push((
            "reference mask".into(),
            Box::new(move |i, query| {
                self.reference_mask(query, &point_ref.window(i).mask)?;
                Ok(())
            }),
        ));
        contenders.push((
            "plain gather".into(),
            Box::new(move |i, query| {
                self.plain_gather(query, point_ref.window(i));
                Ok(())
            }),
        ));
        contenders.push((
            "plain mask".into(),
            Box::new(move |i, query| {
                self.plain_mask(query, point_ref.window(i));
                Ok(())
            }),
        ));
        let mut rounds: Vec<Vec<f64>> = vec![Vec::with_capacity(ROUNDS); contenders.len()];
        for _ in 0..ROUNDS {
            for (c, (_, f)) in contenders.iter_mut().enumerate() {
                rounds[c].push(time_qps(q, t, f)?);
            }
        }
        let mut timed: BTreeMap<String, f64> = contenders
            .into_iter()
            .zip(rounds)
            .map(|((name, _), mut r)| {
                r.sort_by(f64::total_cmp);
                (name, r[r.len() / 2])
            })
            .collect();
        let mut qps = BTreeMap::new();
        for &strategy in &point.usable {
            let name = strategy.to_string();
            let v = timed.remove(&name).unwrap_or(0.0);
            qps.insert(name, v);
        }
        if let Some(v) = timed.remove(REPEATED) {
            qps.insert(REPEATED.into(), v);
        }
        let best = |timed: &BTreeMap<String, f64>, a: &str, b: &str| timed[a].max(timed[b]);
        qps.insert(
            "reference".into(),
            best(&timed, "reference gather", "reference mask"),
        );
        qps.insert("plain".into(), best(&timed, "plain gather", "plain mask"));
        let percent = selectivity * 100.0;
        let field = if indexed { "bucket" } else { "ubucket" };
        let label = format!(
            "{field} in {} of {} values ({percent}%, {})",
            point.windows.len(),
            span(selectivity),
            if indexed { "indexed" } else { "not indexed" }
        );
        Ok(SweepPoint {
            label,
            selectivity,
            matching: point.windows[0].rows.len(),
            indexed,
            auto_choice: point.auto_choice.to_string(),
            qps,
        })
    }
}

/// The planner's cost constants measured on this machine, each in units of one
/// row scanned (the cost of one distance), as `slate_query::CostModel` uses
/// them.
#[derive(Debug, Clone, Copy)]
pub struct Calibration {
    /// Nanoseconds per row of an unfiltered single-threaded scan.
    pub row_nanos: f64,
    /// A row skipped by a bitmap test.
    pub mask_skip: f64,
    /// A candidate row of a masked scan (its distance, read a few rows
    /// apart from the last), beyond the skips.
    pub mask_row: f64,
    /// A masked row read cold, beyond `mask_row` (a mask at 0.1%).
    pub mask_cold: f64,
    /// An exact bitmap scan's set-up per scan task with row codes (NaN when
    /// the sweep keeps no codes).
    pub mask_task: f64,
    /// A masked row bounded from its code, the mask dense (100%).
    pub mask_code: f64,
    /// What a masked row's code costs more at a sparse mask (1%).
    pub mask_code_sparse: f64,
    /// A row gathered from the row tags under an exact filter: its tag
    /// entry, its visibility check and its distance, on a row read from
    /// wherever it lies (the sweep's rows are written in-process, so they
    /// carry their tags). The index path's `candidate` constant was
    /// calibrated before the tags (commit 561b458) and is not measured here.
    pub gather_row: f64,
    /// A row of Slate's gather under that filter bounded from its code,
    /// beyond the survivors' distances.
    pub code_row: f64,
    /// Rows of that gather whose codes did not rule them out.
    pub survivors: f64,
    /// A document read by key and checked against the filter.
    pub doc_check: f64,
    /// A candidate set into a bitmap scan's mask from the row tags.
    pub tagged_mask_candidate: f64,
    /// A document read by key and checked inside a lazy scan, between its
    /// rows (the unindexed 1% point against a filter every row passes).
    pub scan_check: f64,
    /// A document read and checked during a sequential scan.
    pub doc_scan: f64,
}

/// One point of the sweep, checked and ready to time.
#[derive(Debug)]
pub struct Checked {
    /// Fraction of rows matching.
    pub selectivity: f64,
    /// Whether the filter's field is indexed.
    pub indexed: bool,
    /// The disjoint filters queries rotate through, with their rows.
    pub windows: Vec<Window>,
    /// Strategies that can serve the filter.
    pub usable: Vec<Strategy>,
    /// The strategy auto chose.
    pub auto_choice: Strategy,
}

impl Checked {
    /// The window of query number `i`.
    pub fn window(&self, i: usize) -> &Window {
        &self.windows[i % self.windows.len()]
    }
}

/// One filter of a point and what the reference is handed for it.
#[derive(Debug)]
pub struct Window {
    /// The filter.
    pub filter: Document,
    /// The matching rows of the reference cache.
    pub rows: Vec<RowId>,
    /// The same rows as a mask.
    pub mask: RowMask,
    /// The matching document numbers, for the plain reference.
    pub docs: Vec<u32>,
    /// The same documents as bits (`doc % 64` of word `doc / 64`).
    pub bits: Vec<u64>,
}

/// Builds the data set and measures every selectivity, indexed and not.
pub fn run_sweep(config: &SweepConfig) -> Result<Vec<SweepPoint>, Box<dyn std::error::Error>> {
    let data = build(config)?;
    let mut points = Vec::new();
    for indexed in [true, false] {
        for s in SELECTIVITIES {
            points.push(data.measure(s, indexed)?);
        }
    }
    Ok(points)
}
