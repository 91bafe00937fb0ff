//! `Cursor`: a lazy iterator over a find's documents.
//!
//! Unsorted plans stream: a scan resumes from the last key it read, an index
//! scan from the last index entry it read (so a limit ends the index read
//! too), a merge walks the key list its ID tier produced, and each call to
//! `next` reads, filters and projects one batch (smaller when a limit wants
//! fewer documents). Sorted plans read and filter every
//! candidate once, keeping owned bytes only for documents that can still
//! enter the result (a bounded heap when a limit follows), then project
//! lazily. Records failing the filter are never copied or materialised.
//!
//! A [parallel](Cursor::with_decode_parallel) cursor (the facade's finds)
//! filters and decodes a large batch on the rayon pool, in order; its
//! batches double from 256 documents to 8,192 while it keeps being read.
//! Once its batches are full, a scan reads the rest of a partition in key
//! ranges, one per pool thread at a time (`State::Split`). Its sort
//! of a scan of 4,096 documents or more cuts the key range into ranges read,
//! filtered and keyed by parallel tasks, each keeping its own top n (every
//! match when unbounded), merged at the end; through an index, on
//! MemoryStore (which lends documents), it reads 8,192 documents at a time
//! and filters and keys them on the pool while the next window is read.
//!
//! What a result is depends on the cursor's [`Decode`]: a `bson::Document`
//! (the default), the stored bytes as a `RawDocumentBuf` ([`decode_raw`]), or
//! anything the caller decodes them into (the facade's typed finds).

use std::collections::{BTreeSet, HashSet, VecDeque};
use std::ops::ControlFlow;

use bson::{Document, RawDocumentBuf};
use slate_core::store::Direction;
use slate_core::value::Materializer;
use slate_core::{keys, CollectionRead, DocRun, Part, RawDoc};

use rayon::prelude::*;

use super::sort::{joint_sort_keys, sort_key_ref, Keyed, Sorter};
use crate::plan::{MergeOp, Plan, Source};
use crate::Result;

/// Documents read per batch.
const BATCH: usize = 256;
/// Fewest documents read per batch when a limit needs fewer than
/// [`BATCH`]: a small limit with a filter that rejects some still takes few
/// batches.
const MIN_BATCH: usize = 16;
/// Most documents read per batch by a [parallel](Cursor::with_decode_parallel) cursor,
/// which doubles its batch from [`BATCH`] while it keeps being read: a
/// consumer that stops early reads little, a long scan splits its work into
/// few fork-joins.
const PAR_BATCH: usize = 8192;
/// Fewest documents a batch's filter or decoding splits across threads.
const PAR_MIN: usize = 512;
/// Documents a parallel cursor's sort reads before filtering and keying
/// them on the rayon pool: one fork-join per window costs little against
/// its documents (borrowed from the snapshot: the sort runs in parallel
/// only on a store that lends them).
const SORT_WINDOW: usize = 8_192;
/// Documents one task of a parallel sort filters and keys.
const SORT_CHUNK: usize = 1_024;

/// Fewest documents (in the partitions read) for which a sorted scan
/// splits its key ranges across threads.
const SPLIT_MIN_DOCS: u64 = 4_096;

/// Ranges per pool thread of a split scan: uneven ranges even out.
const SPLITS_PER_THREAD: usize = 4;

/// Most ranges an unsorted split scan cuts a partition into.
const MAX_SPLITS: usize = 1_024;

/// A range of document keys `(from, to)`: from inclusive, to exclusive,
/// `None` ends being the partition's.
type KeySpan = (Option<Vec<u8>>, Option<Vec<u8>>);

enum State {
    /// Streaming an index scan's entries a batch at a time: partition
    /// `part`, interval `iv`, from just after index key `after`. `seen`
    /// holds the document keys produced so far when one document may come
    /// up twice (a multikey field, several intervals).
    Index {
        part: usize,
        iv: usize,
        after: Option<Vec<u8>>,
        seen: Option<HashSet<Vec<u8>>>,
    },
    /// Scanning partition `part` a few key ranges at a time, in parallel
    /// (once batches are full): each range `(from, to)`, `None` ends being
    /// the partition's; then the spans `rest` (see `Spans`).
    Split {
        part: usize,
        ranges: VecDeque<KeySpan>,
        rest: VecDeque<(usize, KeySpan)>,
    },
    /// Reading a single-valued index in reverse for a descending sort on
    /// its field (one partition; ascending, the index streams as `Index`):
    /// the `iv`th interval from the last, below index key `bound`, a run of
    /// equal values at a time, each run in id order (the sort's ties).
    /// `value`: a run longer than a batch, read forward after index key
    /// `after` (the entries of that value only), before going on below it.
    Ordered {
        iv: usize,
        bound: Option<Vec<u8>>,
        value: Option<(Vec<u8>, Option<Vec<u8>>)>,
    },
    /// Reading ranges of document keys in order (a scan: every partition
    /// whole; an `_id` scan: its ranges), each `(partition, (from, to))`,
    /// the first from where it resumes.
    Spans {
        spans: VecDeque<(usize, KeySpan)>,
    },
    /// Reading the keys the ID tier produced.
    Keys {
        keys: Vec<Vec<u8>>,
        pos: usize,
    },
    /// Projecting sorted documents `(key, bytes)`.
    Sorted {
        docs: std::vec::IntoIter<(Vec<u8>, Vec<u8>)>,
    },
    Done,
}

/// Counters of one execution, for `explain` after a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExecStats {
    /// Keys produced by the ID tier.
    pub keys: u64,
    /// Documents read and examined (checked against the filter). A batch
    /// read past the limit counts only the documents before it.
    pub docs_read: u64,
    /// Documents that passed the filter.
    pub matched: u64,
}

/// Turns one matching document into one result: the read it came from, a
/// reusable materialiser, the document, and the plan's projection.
pub type Decode<T> = fn(&CollectionRead<'_>, &mut Materializer, &RawDoc<'_>, Option<&[String]>) -> Result<T>;

/// The default [`Decode`]: the projected fields as a `bson::Document`.
pub fn decode_document(
    read: &CollectionRead<'_>,
    mat: &mut Materializer,
    doc: &RawDoc<'_>,
    projection: Option<&[String]>,
) -> Result<Document> {
    Ok(read.materialize_with(mat, doc, projection)?)
}

/// A [`Decode`] to owned BSON bytes: the bytes of what [`decode_document`]
/// returns (see [`CollectionRead::raw_with`]).
pub fn decode_raw(
    read: &CollectionRead<'_>,
    mat: &mut Materializer,
    doc: &RawDoc<'_>,
    projection: Option<&[String]>,
) -> Result<RawDocumentBuf> {
    Ok(read.raw_with(mat, doc, projection)?)
}

/// Filters (when given a filter) and decodes a batch of documents on the
/// rayon pool, one item per document in order: `Err` for a document the
/// filter could not read, `None` for one it rejects, else the decoded result
/// (see [`Cursor::with_decode_parallel`]).
type DecodeBatch<T> = fn(
    &CollectionRead<'_>,
    Decode<T>,
    Option<&crate::filter::Filter>,
    &[&RawDoc<'_>],
    Option<&[String]>,
) -> Vec<Result<Option<Result<T>>>>;

/// The [`DecodeBatch`] of a parallel cursor: each rayon thread decodes with
/// its own materialiser.
fn decode_parallel<T: Send>(
    read: &CollectionRead<'_>,
    decode: Decode<T>,
    filter: Option<&crate::filter::Filter>,
    docs: &[&RawDoc<'_>],
    projection: Option<&[String]>,
) -> Vec<Result<Option<Result<T>>>> {
    docs.par_iter()
        .map(|doc| {
            Materializer::with_thread_local(|mat| filter_decode(read, mat, decode, filter, doc, projection))
        })
        .collect()
}

/// One document of a parallel batch: `Err` when the filter cannot read it,
/// `None` when it rejects it, else the decoded result.
fn filter_decode<T>(
    read: &CollectionRead<'_>,
    mat: &mut Materializer,
    decode: Decode<T>,
    filter: Option<&crate::filter::Filter>,
    doc: &RawDoc<'_>,
    projection: Option<&[String]>,
) -> Result<Option<Result<T>>> {
    if let Some(f) = filter {
        if !f.matches(doc.raw()?) {
            return Ok(None);
        }
    }
    Ok(Some(decode(read, mat, doc, projection)))
}

/// One range of a split scan read, filtered and decoded by one rayon task:
/// the results of its matches in key order, up to the first document the
/// filter could not read (`error`, which ends the cursor after them), how
/// many documents it read, and where the rest of the range starts (`None`:
/// it was read to its end).
struct RangeOut<T> {
    items: Vec<Result<T>>,
    error: Option<crate::Error>,
    read: usize,
    resume: Option<Vec<u8>>,
}

/// Reads up to `per` documents of each range of `part` in `group`, and
/// filters and decodes them, one rayon task per range; the ranges' outputs
/// in order (see [`Cursor::with_decode_parallel`]).
type SplitBatch<T> = fn(
    &CollectionRead<'_>,
    &Part,
    &[KeySpan],
    usize,
    Decode<T>,
    Option<&crate::filter::Filter>,
    Option<&[String]>,
) -> slate_core::Result<Vec<RangeOut<T>>>;

/// The [`SplitBatch`] of a parallel cursor: each task reads its range, then
/// filters and decodes what it read with its thread's materialiser, and
/// frees what it read itself.
fn split_parallel<T: Send>(
    read: &CollectionRead<'_>,
    part: &Part,
    group: &[KeySpan],
    per: usize,
    decode: Decode<T>,
    filter: Option<&crate::filter::Filter>,
    projection: Option<&[String]>,
) -> slate_core::Result<Vec<RangeOut<T>>> {
    group
        .par_iter()
        .map(|(from, to)| {
            let piece = Piece::read(read, part, (from.as_deref(), to.as_deref()), per)?;
            // Room for every document read: growing by doubling copied the
            // items and touched fresh pages at each step (about 8% of a
            // typed find matching half its documents); pages past the
            // matches are never touched.
            let mut items = Vec::with_capacity(piece.len());
            let mut n = 0;
            let mut error = None;
            Materializer::with_thread_local(|mat| {
                for doc in piece.docs() {
                    n += 1;
                    match filter_decode(read, mat, decode, filter, &doc, projection) {
                        Ok(Some(item)) => items.push(item),
                        Ok(None) => {}
                        Err(e) => {
                            error = Some(e);
                            break;
                        }
                    }
                }
            });
            Ok(RangeOut {
                items,
                error,
                read: n,
                resume: piece.resume().map(<[u8]>::to_vec),
            })
        })
        .collect()
}

/// A lazy iterator over the results of a plan.
pub struct Cursor<'t, T = Document> {
    read: CollectionRead<'t>,
    plan: Plan,
    parts: Vec<Part>,
    state: State,
    /// Results ready to yield: a document that fails to decode is an `Err`
    /// item among them, and the ones after it still come.
    out: VecDeque<Result<T>>,
    decode: Decode<T>,
    to_skip: usize,
    remaining: usize,
    stats: ExecStats,
    failed: bool,
    /// Reuses the field layout of the previous document.
    mat: Materializer,
    /// Count-only mode: matches are counted in `counted`, never materialised.
    counting: bool,
    counted: u64,
    /// Documents the next batch reads at most.
    batch: usize,
    /// Documents the next batch reads at least, whatever the limit wants:
    /// [`MIN_BATCH`], doubling up to `batch` while the cursor keeps being
    /// read, so that a small limit under a filter that rejects most documents
    /// does not read them 16 at a time.
    floor: usize,
    /// An error that ends the cursor once the results before it are taken.
    pending: Option<crate::Error>,
    /// How a [parallel](Cursor::with_decode_parallel) cursor decodes a large batch on
    /// the rayon pool (`None`: serial, one document at a time).
    decode_batch: Option<DecodeBatch<T>>,
    /// How a parallel cursor's split scan reads, filters and decodes its
    /// ranges in one task each (`None`: serial).
    split_batch: Option<SplitBatch<T>>,
}

impl<T> std::fmt::Debug for Cursor<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cursor")
            .field("collection", &self.plan.collection)
            .field("stats", &self.stats)
            .finish()
    }
}

/// The document keys a source yields, deduplicated, in key order for
/// intersections and unions and in index order otherwise.
pub fn source_keys(read: &CollectionRead<'_>, parts: &[Part], source: &Source) -> Result<Vec<Vec<u8>>> {
    match source {
        Source::Scan { .. } => {
            let mut out = Vec::new();
            for part in parts {
                for d in read.scan(part)? {
                    out.push(d?.key.into_owned());
                }
            }
            Ok(out)
        }
        Source::IndexScan {
            field,
            intervals,
            multikey,
            ..
        } => {
            let mut out = Vec::new();
            let mut seen = HashSet::new();
            let dedupe = *multikey || intervals.len() > 1;
            for part in parts {
                for iv in intervals {
                    let (lo, hi) = crate::plan::interval_range(iv);
                    for key in read.index_scan(part, field, lo, hi)? {
                        let key = key?;
                        if !dedupe || seen.insert(key.clone()) {
                            out.push(key);
                        }
                    }
                }
            }
            Ok(out)
        }
        // Points: their keys, built (one per partition, in key order);
        // a key naming no document reads as none.
        Source::IdScan { intervals, .. } if source.is_id_points() => {
            // Sorted and distinct, as `Filter::index_bounds` gives them.
            let ids: Vec<&[u8]> = intervals
                .iter()
                .filter_map(|iv| match &iv.start {
                    std::ops::Bound::Included(v) => Some(v.as_slice()),
                    _ => None,
                })
                .collect();
            Ok(parts
                .iter()
                .flat_map(|part| {
                    ids.iter()
                        .map(|id| slate_core::keys::doc_key(part.as_bytes(), id))
                })
                .collect())
        }
        // Ranges: the keys read from them.
        Source::IdScan { .. } => {
            let mut out = Vec::new();
            for (p, (from, to)) in scan_spans(parts, source) {
                read.visit_between(&parts[p], from.as_deref(), to.as_deref(), &mut |doc| {
                    out.push(doc.key.to_vec());
                    ControlFlow::Continue(())
                })?;
            }
            Ok(out)
        }
        Source::IndexMerge { op, inputs, .. } => {
            let mut sets = inputs
                .iter()
                .map(|s| source_keys(read, parts, s).map(BTreeSet::from_iter));
            let first = sets.next().transpose()?.unwrap_or_default();
            let merged = match op {
                MergeOp::And => {
                    let mut acc = first;
                    for s in sets {
                        let s = s?;
                        acc.retain(|k| s.contains(k));
                    }
                    acc
                }
                MergeOp::Or => {
                    let mut acc = first;
                    for s in sets {
                        acc.extend(s?);
                    }
                    acc
                }
            };
            Ok(merged.into_iter().collect())
        }
    }
}

/// The key ranges a source reads in key order, each `(partition index,
/// (from, to))`: every partition whole for a scan; for an `_id` scan, its
/// intervals' key ranges in each partition, in key order; none for any
/// other source.
fn scan_spans(parts: &[Part], source: &Source) -> Vec<(usize, KeySpan)> {
    match source {
        Source::Scan { .. } => (0..parts.len()).map(|p| (p, (None, None))).collect(),
        // The intervals come sorted and disjoint (`Filter::index_bounds`),
        // and so do their key ranges.
        Source::IdScan { intervals, .. } => parts
            .iter()
            .enumerate()
            .flat_map(|(p, part)| {
                intervals
                    .iter()
                    .map(move |iv| crate::plan::id_key_range(part, iv))
                    .filter(|(from, to)| to.as_ref().is_none_or(|t| from < t))
                    .map(move |(from, to)| (p, (Some(from), to)))
            })
            .collect(),
        Source::IndexScan { .. } | Source::IndexMerge { .. } => Vec::new(),
    }
}

/// Whether `source` is read as key ranges ([`scan_spans`]) rather than as
/// the keys it yields: a scan, or an `_id` scan that is not all points.
fn reads_spans(source: &Source) -> bool {
    match source {
        Source::Scan { .. } => true,
        Source::IdScan { .. } => !source.is_id_points(),
        _ => false,
    }
}

/// The candidate documents of a source, read a window at a time: a batched
/// multi_get of the next keys an index source produced, or the next
/// documents of key ranges (a scan: every partition), range after range.
enum Windows<'a> {
    Keys {
        read: &'a CollectionRead<'a>,
        chunks: std::slice::Chunks<'a, Vec<u8>>,
    },
    Scan {
        read: &'a CollectionRead<'a>,
        parts: &'a [Part],
        spans: std::slice::Iter<'a, (usize, KeySpan)>,
        docs: Option<DocIter<'a>>,
        window: usize,
        /// A read error, reported after the documents before it.
        pending: Option<crate::Error>,
    },
}

/// A scan of one partition.
type DocIter<'a> = Box<dyn Iterator<Item = slate_core::Result<RawDoc<'a>>> + Send + 'a>;

impl<'a> Windows<'a> {
    /// Windows of at most `window` documents of `parts`: those with `keys`
    /// (what an index source produced) when given, else those of `spans`
    /// ([`scan_spans`]).
    fn new(
        read: &'a CollectionRead<'a>,
        parts: &'a [Part],
        keys: Option<&'a [Vec<u8>]>,
        spans: &'a [(usize, KeySpan)],
        window: usize,
    ) -> Self {
        match keys {
            Some(keys) => Windows::Keys {
                read,
                chunks: keys.chunks(window),
            },
            None => Windows::Scan {
                read,
                parts,
                spans: spans.iter(),
                docs: None,
                window,
                pending: None,
            },
        }
    }

    /// The next window (`None` when every document was read). A window
    /// may be empty when an index's keys name no documents.
    fn next_window(&mut self) -> Result<Option<Vec<RawDoc<'a>>>> {
        match self {
            Windows::Keys { read, chunks } => {
                let Some(chunk) = chunks.next() else {
                    return Ok(None);
                };
                let refs: Vec<&[u8]> = chunk.iter().map(Vec::as_slice).collect();
                Ok(Some(read.get_keys(&refs)?.into_iter().flatten().collect()))
            }
            Windows::Scan {
                read,
                parts,
                spans,
                docs,
                window,
                pending,
            } => {
                if let Some(e) = pending.take() {
                    return Err(e);
                }
                let mut out = Vec::with_capacity(*window);
                let mut failed = None;
                while out.len() < *window {
                    let iter = match docs {
                        Some(iter) => iter,
                        None => match spans.next().map(|(p, (from, to))| {
                            read.scan_between(&parts[*p], from.as_deref(), to.as_deref())
                        }) {
                            Some(Ok(iter)) => docs.insert(Box::new(iter)),
                            Some(Err(e)) => {
                                failed = Some(e);
                                break;
                            }
                            None => break,
                        },
                    };
                    match iter.next() {
                        Some(Ok(doc)) => out.push(doc),
                        Some(Err(e)) => {
                            failed = Some(e);
                            break;
                        }
                        None => *docs = None,
                    }
                }
                if let Some(e) = failed {
                    if out.is_empty() {
                        return Err(e.into());
                    }
                    *pending = Some(e.into());
                }
                Ok((!out.is_empty()).then_some(out))
            }
        }
    }
}

/// The document keys an index source yields (counted into `stats`), or
/// `None` for a source read as key ranges ([`reads_spans`]): what
/// [`Windows`] and a streaming merge read.
fn index_keys(
    read: &CollectionRead<'_>,
    parts: &[Part],
    source: &Source,
    stats: &mut ExecStats,
) -> Result<Option<Vec<Vec<u8>>>> {
    if reads_spans(source) {
        return Ok(None);
    }
    let keys = source_keys(read, parts, source)?;
    stats.keys = keys.len() as u64;
    Ok(Some(keys))
}

/// Reads every candidate document of `source` in `parts`, `window` at a
/// time, checks `filter` on its borrowed bytes, and hands each match to `f`
/// until `f` breaks. Counts into `stats`.
fn visit_matches(
    read: &CollectionRead<'_>,
    parts: &[Part],
    source: &Source,
    filter: Option<&crate::filter::Filter>,
    window: usize,
    stats: &mut ExecStats,
    mut f: impl FnMut(&RawDoc<'_>) -> Result<ControlFlow<()>>,
) -> Result<()> {
    let keys = index_keys(read, parts, source, stats)?;
    let spans = scan_spans(parts, source);
    let mut windows = Windows::new(read, parts, keys.as_deref(), &spans, window);
    while let Some(docs) = windows.next_window()? {
        for doc in &docs {
            stats.docs_read += 1;
            if let Some(flt) = filter {
                if !flt.matches(doc.raw()?) {
                    continue;
                }
            }
            stats.matched += 1;
            if f(doc)?.is_break() {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// At most a given number of a range's documents, read for a split scan,
/// and where the rest of the range starts (`None`: it was read to its end).
enum Piece<'r> {
    /// Copied into one buffer (a store that copies documents out).
    Run(DocRun),
    /// Lent by the store.
    Lent(Vec<RawDoc<'r>>, Option<Vec<u8>>),
}

impl<'r> Piece<'r> {
    fn read(
        read: &'r CollectionRead<'r>,
        part: &Part,
        (from, to): (Option<&[u8]>, Option<&[u8]>),
        max: usize,
    ) -> slate_core::Result<Self> {
        if read.on_disk() {
            return read.scan_run(part, from, to, max).map(Piece::Run);
        }
        let mut docs = Vec::with_capacity(max.min(PAR_BATCH));
        for doc in read.scan_between(part, from, to)? {
            let doc = doc?;
            if docs.len() == max {
                return Ok(Piece::Lent(docs, Some(doc.key.into_owned())));
            }
            docs.push(doc);
        }
        Ok(Piece::Lent(docs, None))
    }

    fn docs(&self) -> Box<dyn Iterator<Item = RawDoc<'_>> + '_> {
        match self {
            Piece::Run(run) => Box::new(run.docs()),
            Piece::Lent(docs, _) => Box::new(docs.iter().cloned()),
        }
    }

    fn len(&self) -> usize {
        match self {
            Piece::Run(run) => run.len(),
            Piece::Lent(docs, _) => docs.len(),
        }
    }

    fn resume(&self) -> Option<&[u8]> {
        match self {
            Piece::Run(run) => run.resume(),
            Piece::Lent(_, resume) => resume.as_deref(),
        }
    }
}

/// The sort of a scan: each partition's key range is cut into ranges
/// ([`CollectionRead::scan_splits`]), read, filtered and keyed by rayon
/// tasks, each with its own iterator and heap, merged into `sorter` at the
/// end. Nothing is serial but the merge: on RocksDB, handing a single
/// iterator's windows to the pool measured 5-15% slower than one thread
/// (the copies moved between threads, the read stayed serial), and in
/// memory the windowed sort took 15.0-18.0 ms where this takes 11.4-14.4
/// on the documents bench's sorted finds.
fn split_sort(
    read: &CollectionRead<'_>,
    parts: &[Part],
    spans: Vec<(usize, KeySpan)>,
    filter: Option<&crate::filter::Filter>,
    sorter: &mut Sorter<'_, Vec<u8>>,
    stats: &mut ExecStats,
) -> Result<()> {
    let bound = sorter.bound();
    let fields = sorter.fields();
    let n = rayon::current_num_threads() * SPLITS_PER_THREAD;
    let mut ranges = Vec::new();
    for (p, span) in spans {
        let part = &parts[p];
        let cut = key_spans(read, part, span, n)?;
        ranges.extend(cut.into_iter().map(|(from, to)| (part, from, to)));
    }
    let tasks: Vec<Result<_>> = ranges
        .into_par_iter()
        .map(|(part, from, to)| {
            let mut own = Sorter::new(fields, bound);
            let (mut docs_read, mut matched) = (0u64, 0u64);
            // Lent documents: only those the heap keeps are copied.
            let mut failed = None;
            read.visit_between(part, from.as_deref(), to.as_deref(), &mut |doc| {
                docs_read += 1;
                match offer(&mut own, None, filter, doc) {
                    Ok(m) => {
                        matched += u64::from(m);
                        ControlFlow::Continue(())
                    }
                    Err(e) => {
                        failed = Some(e);
                        ControlFlow::Break(())
                    }
                }
            })?;
            if let Some(e) = failed {
                return Err(e);
            }
            Ok((own.into_kept(), docs_read, matched))
        })
        .collect();
    for task in tasks {
        let (kept, docs_read, matched) = task?;
        stats.docs_read += docs_read;
        stats.matched += matched;
        for keyed in kept {
            sorter.push(keyed);
        }
    }
    Ok(())
}

/// Walks a group of a split scan's ranges in key order beside what was read
/// of each, handing each read to `keep`, up to the first range read only in
/// part (`resume` tells where its rest starts; its ids were denser than the
/// cut assumed). Returns what is left to read: that range's rest, then the
/// ranges after it, read again later.
fn walk_group<R>(
    group: Vec<KeySpan>,
    reads: impl IntoIterator<Item = R>,
    resume: impl Fn(&R) -> Option<Vec<u8>>,
    mut keep: impl FnMut(R) -> Result<()>,
) -> Result<Vec<KeySpan>> {
    let mut again = Vec::new();
    for ((from, to), read) in group.into_iter().zip(reads) {
        if !again.is_empty() {
            again.push((from, to));
            continue;
        }
        let rest = resume(&read);
        keep(read)?;
        if let Some(rest) = rest {
            again.push((Some(rest), to));
        }
    }
    Ok(again)
}

/// `span` of partition `part` cut into at most `n` ranges, in key order
/// ([`CollectionRead::scan_splits`]).
fn key_spans(read: &CollectionRead<'_>, part: &Part, span: KeySpan, n: usize) -> Result<VecDeque<KeySpan>> {
    let (mut lo, to) = span;
    let mut spans = VecDeque::new();
    for cut in read.scan_splits(part, lo.as_deref(), to.as_deref(), n)? {
        spans.push_back((lo, Some(cut.clone())));
        lo = Some(cut);
    }
    spans.push_back((lo, to));
    Ok(spans)
}

/// The cursor's state once `sorter` holds the sorted documents.
fn sorted_state(sorter: Sorter<'_, Vec<u8>>) -> State {
    let docs: Vec<(Vec<u8>, Vec<u8>)> = sorter.finish().into_iter().map(|k| (k.doc_key, k.item)).collect();
    State::Sorted {
        docs: docs.into_iter(),
    }
}

/// Checks `doc` against `filter` and, when it matches, offers it to
/// `sorter`, unless `shared` (the sort's heap, seen by every task of a
/// parallel sort) would drop it: a task keeps no copy the merge would throw
/// away. Returns whether the document matched.
fn offer(
    sorter: &mut Sorter<'_, Vec<u8>>,
    shared: Option<&Sorter<'_, Vec<u8>>>,
    filter: Option<&crate::filter::Filter>,
    doc: &RawDoc<'_>,
) -> Result<bool> {
    let raw = doc.raw()?;
    if let Some(f) = filter {
        if !f.matches(raw) {
            return Ok(false);
        }
    }
    let fields = sorter.fields();
    // Borrowed keys first: most documents fall out of a bounded heap.
    let joint = sorter.joint().then(|| joint_sort_keys(raw, fields));
    let keys = || {
        fields.iter().enumerate().map(|(i, f)| {
            joint
                .as_ref()
                .map_or_else(|| sort_key_ref(raw, f), |keys| keys[i])
        })
    };
    let kept = shared.is_none_or(|s| s.would_keep_refs(keys(), &doc.key))
        && sorter.would_keep_refs(keys(), &doc.key);
    if kept {
        sorter.push(Keyed {
            keys: keys().map(|k| k.to_raw_bson()).collect(),
            doc_key: doc.key.to_vec(),
            item: doc.bytes.to_vec(),
        });
    }
    Ok(true)
}

impl<'t> Cursor<'t> {
    /// Starts executing `plan` over `parts`, yielding `bson::Document`s.
    pub fn new(read: CollectionRead<'t>, plan: Plan, parts: Vec<Part>) -> Result<Self> {
        Cursor::with_decode(read, plan, parts, decode_document)
    }
}

impl<'t, T> Cursor<'t, T> {
    /// Starts executing `plan` over `parts`, each result made by `decode`.
    pub fn with_decode(
        read: CollectionRead<'t>,
        plan: Plan,
        parts: Vec<Part>,
        decode: Decode<T>,
    ) -> Result<Self> {
        Self::start(read, plan, parts, decode, None, None)
    }

    /// [`with_decode`](Self::with_decode), filtering, sorting and decoding
    /// large batches on the rayon pool (the results keep their order, and
    /// errors come where they would have come): a long read then uses every
    /// core, where a serial cursor spends one core's time per document.
    /// Batches grow from 256 documents to 8,192 while the cursor keeps being
    /// read, so a consumer that stops early still reads little. A sort of a
    /// scan splits its key range across the pool; a sort through an index on
    /// a store that lends its documents (MemoryStore) reads 8,192 at a time
    /// and filters and keys them in parallel.
    pub fn with_decode_parallel(
        read: CollectionRead<'t>,
        plan: Plan,
        parts: Vec<Part>,
        decode: Decode<T>,
    ) -> Result<Self>
    where
        T: Send,
    {
        Self::start(
            read,
            plan,
            parts,
            decode,
            Some(decode_parallel::<T>),
            Some(split_parallel::<T>),
        )
    }

    fn start(
        read: CollectionRead<'t>,
        plan: Plan,
        parts: Vec<Part>,
        decode: Decode<T>,
        decode_batch: Option<DecodeBatch<T>>,
        split_batch: Option<SplitBatch<T>>,
    ) -> Result<Self> {
        let to_skip = plan.skip;
        let remaining = plan.limit.unwrap_or(usize::MAX);
        let mut cursor = Self {
            read,
            plan,
            parts,
            state: State::Done,
            out: VecDeque::new(),
            decode,
            to_skip,
            remaining,
            stats: ExecStats::default(),
            failed: false,
            mat: Materializer::new(),
            counting: false,
            counted: 0,
            batch: BATCH,
            floor: MIN_BATCH,
            pending: None,
            decode_batch,
            split_batch,
        };
        cursor.state = if remaining == 0 {
            State::Done
        } else if !cursor.plan.sort.is_empty() {
            cursor.sorted()?
        } else if cursor.plan.key_order
            && cursor.plan.reverse
            && matches!(cursor.plan.source, Source::IndexScan { .. })
        {
            State::Ordered {
                iv: 0,
                bound: None,
                value: None,
            }
        } else if let Source::IndexScan {
            intervals, multikey, ..
        } = &cursor.plan.source
        {
            // Streamed: a limit stops the index read too.
            let dedupe = *multikey || intervals.len() > 1;
            State::Index {
                part: 0,
                iv: 0,
                after: None,
                seen: dedupe.then(HashSet::new),
            }
        } else if let Some(keys) = index_keys(
            &cursor.read,
            &cursor.parts,
            &cursor.plan.source,
            &mut cursor.stats,
        )? {
            let mut keys = keys;
            if cursor.plan.reverse {
                // One partition's keys, ascending: read from the last.
                keys.reverse();
            }
            State::Keys { keys, pos: 0 }
        } else {
            let mut spans: VecDeque<_> = scan_spans(&cursor.parts, &cursor.plan.source).into();
            if cursor.plan.reverse {
                spans = spans.into_iter().rev().collect();
            }
            State::Spans { spans }
        };
        Ok(cursor)
    }

    /// For a caller that takes every result (collecting them): a
    /// [parallel](Self::with_decode_parallel) cursor reads its largest
    /// batches from the first, rather than growing them from 256 documents
    /// for a consumer that may stop early. A limit still bounds each batch.
    #[must_use]
    pub fn collecting(mut self) -> Self {
        if self.decode_batch.is_some() {
            self.batch = PAR_BATCH;
        }
        self
    }

    /// Counters so far.
    pub fn stats(&self) -> ExecStats {
        self.stats
    }

    /// How many results the plan expects to yield: its source's estimate
    /// after the skip, within the limit. The true number may be smaller (the
    /// filter rejects some) or larger (an index estimate that hit its cap).
    pub fn expected_len(&self) -> usize {
        let estimate = usize::try_from(self.plan.source.estimate()).unwrap_or(usize::MAX);
        estimate
            .saturating_sub(self.to_skip)
            .min(self.remaining)
            .saturating_add(self.out.len())
    }

    /// Reads, filters and sorts every candidate; keeps owned bytes only for
    /// documents that can still make the result. A parallel cursor splits a
    /// scan of 4,096 documents or more into key ranges read by parallel
    /// tasks ([`split_sort`]). Through an index, on a store that lends its
    /// documents, it reads a window of them at a time and
    /// filters and keys it on the rayon pool, each task into a heap of its
    /// own, merged into the sort's heap after the window; the next window is
    /// read meanwhile. (A serial scan that fed the threads batch by batch
    /// lost to the serial sort: the read was not overlapped and the handoffs
    /// cost more than the threads won.)
    fn sorted(&mut self) -> Result<State> {
        let bound = self.plan.limit.map(|l| l.saturating_add(self.plan.skip));
        let fields = self.plan.sort.clone();
        let filter = self.plan.filter.as_ref();
        // A scan's key range is split across threads (`split_sort`). An
        // index's documents are read in windows, handed to the pool where
        // the store lends them; a store that copies documents out (RocksDB)
        // reads them serially: its copies, made and freed on one thread a
        // small batch at a time, cost less than windows of them handed
        // between threads (measured 5-15% slower on the documents bench's
        // sorted finds).
        let parallel = self.decode_batch.is_some() && !self.read.on_disk();
        let mut sorter: Sorter<'_, Vec<u8>> = Sorter::new(&fields, bound);
        let mut stats = ExecStats::default();
        let keys = index_keys(&self.read, &self.parts, &self.plan.source, &mut stats)?;
        // Key ranges (a scan, an `_id` scan's ranges) of enough documents
        // are cut across the pool.
        let spans = scan_spans(&self.parts, &self.plan.source);
        let to_read = match self.plan.source {
            Source::IdScan {
                estimate,
                capped: false,
                ..
            } => estimate,
            _ => self.plan.total,
        };
        if keys.is_none() && self.decode_batch.is_some() && to_read >= SPLIT_MIN_DOCS {
            split_sort(&self.read, &self.parts, spans, filter, &mut sorter, &mut stats)?;
            self.stats = stats;
            return Ok(sorted_state(sorter));
        }
        let window = if parallel { SORT_WINDOW } else { BATCH };
        let mut windows = Windows::new(&self.read, &self.parts, keys.as_deref(), &spans, window);
        let mut current = windows.next_window()?;
        while let Some(docs) = current {
            stats.docs_read += docs.len() as u64;
            if !parallel || docs.len() < PAR_MIN {
                for doc in &docs {
                    stats.matched += u64::from(offer(&mut sorter, None, filter, doc)?);
                }
                current = windows.next_window()?;
                continue;
            }
            // The next window is read while this one is filtered and keyed;
            // the thread reading it then joins in.
            let shared = &sorter;
            let (next, tasks) = rayon::join(
                || windows.next_window(),
                || {
                    docs.par_chunks(SORT_CHUNK)
                        .map(|chunk| {
                            let mut own = Sorter::new(&fields, bound);
                            let mut matched = 0;
                            for doc in chunk {
                                matched += u64::from(offer(&mut own, Some(shared), filter, doc)?);
                            }
                            Ok((own.into_kept(), matched))
                        })
                        .collect::<Vec<Result<_>>>()
                },
            );
            for task in tasks {
                let (kept, matched) = task?;
                stats.matched += matched;
                for keyed in kept {
                    sorter.push(keyed);
                }
            }
            current = next?;
        }
        self.stats = stats;
        Ok(sorted_state(sorter))
    }

    /// Ranges that cut `span` of partition `part` into about a batch's
    /// share per pool thread each, for the documents the plan has left to
    /// read (across partitions: more, smaller ranges when there are several).
    fn cut(&self, part: &Part, span: KeySpan) -> Result<VecDeque<KeySpan>> {
        let threads = rayon::current_num_threads();
        // An `_id` scan reads about its estimate. A capped one reads more:
        // its ranges then come out too long, are read in part and cut again
        // (`walk_group`), which costs less than ranges of a few documents.
        let total = match self.plan.source {
            Source::IdScan { estimate, .. } => estimate.min(self.plan.total),
            _ => self.plan.total,
        };
        let left = total.saturating_sub(self.stats.docs_read) as usize;
        let n = (left / PAR_BATCH.div_ceil(threads)).min(MAX_SPLITS).max(threads);
        key_spans(&self.read, part, span, n)
    }

    /// The state after a group of a split scan of partition `part` (`p`):
    /// `again` (from [`walk_group`]: the rest of a range read only in part,
    /// cut again here, then the ranges after it) goes before the rest of
    /// `ranges`; done at the limit, else on to the spans `rest` once no
    /// range is left.
    fn after_split(
        &self,
        p: &Part,
        part: usize,
        mut ranges: VecDeque<KeySpan>,
        again: Vec<KeySpan>,
        rest: VecDeque<(usize, KeySpan)>,
    ) -> Result<State> {
        if self.remaining == 0 {
            return Ok(State::Done);
        }
        let mut again = again.into_iter();
        let mut front = match again.next() {
            Some(rest) => self.cut(p, rest)?,
            None => VecDeque::new(),
        };
        front.extend(again);
        for span in front.into_iter().rev() {
            ranges.push_front(span);
        }
        Ok(if ranges.is_empty() {
            State::Spans { spans: rest }
        } else {
            State::Split { part, ranges, rest }
        })
    }

    /// How many documents the next batch reads: the cursor's batch size, or
    /// fewer (down to its floor) when the limit (with the skip before it)
    /// wants fewer matches, so that a small limit reads few documents.
    fn batch_len(&self) -> usize {
        if self.counting {
            return self.batch;
        }
        self.remaining
            .saturating_add(self.to_skip)
            .clamp(self.floor, self.batch)
    }

    /// After a batch of `read` documents (none: nothing changes): a cursor
    /// that keeps being read reads more at a time, its floor up to its batch
    /// size, its batch size up to [`PAR_BATCH`] when it decodes in parallel.
    fn grow_batch(&mut self, read: usize) {
        if read == 0 {
            return;
        }
        if self.decode_batch.is_some() {
            self.batch = (self.batch * 2).min(PAR_BATCH);
        }
        self.floor = (self.floor * 2).min(self.batch);
    }

    /// Reads the documents with `keys` and takes them.
    fn read_keys(&mut self, keys: &[Vec<u8>]) -> Result<()> {
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let read = self.read.clone();
        let docs: Vec<RawDoc<'_>> = read.get_keys(&refs)?.into_iter().flatten().collect();
        self.take(&docs, true)?;
        Ok(())
    }

    /// Takes a batch of documents read, in order: checks the filter (unless
    /// `check` is false: they passed it already), skips, counts the limit and
    /// decodes the rest, stopping at the limit. With [`with_decode_parallel`](Self::with_decode_parallel),
    /// a large batch runs on the rayon pool, the results in order: filter and
    /// decoding in one pass when every match becomes a result, else the
    /// filter, then the decoding of what the skip and limit let through.
    fn take(&mut self, docs: &[RawDoc<'_>], check: bool) -> Result<()> {
        let filter = self.plan.filter.as_ref().filter(|_| check);
        let projection = self.plan.projection.as_deref();
        let parallel = self.decode_batch.filter(|_| docs.len() >= PAR_MIN);
        // Every match of the batch becomes a result (no skip, no limit inside
        // it): filter and decode in one pass on the pool.
        let fused = !self.counting && self.to_skip == 0 && self.remaining >= docs.len();
        if let Some(batch) = parallel.filter(|_| fused) {
            let refs: Vec<&RawDoc<'_>> = docs.iter().collect();
            for item in batch(&self.read, self.decode, filter, &refs, projection) {
                if check {
                    self.stats.docs_read += 1;
                }
                let Some(result) = item? else { continue };
                if check {
                    self.stats.matched += 1;
                }
                self.remaining -= 1;
                self.out.push_back(result);
            }
            self.grow_batch(docs.len());
            return Ok(());
        }
        let verdicts: Option<Vec<Result<bool>>> = filter.map(|f| {
            let verdict = |doc: &RawDoc<'_>| Ok(f.matches(doc.raw()?));
            if parallel.is_some() {
                docs.par_iter().map(verdict).collect()
            } else {
                docs.iter().map(verdict).collect()
            }
        });
        let mut verdicts = verdicts.map(Vec::into_iter);
        let mut chosen: Vec<&RawDoc<'_>> = Vec::new();
        // A document the filter cannot read ends the cursor, after the
        // matches before it.
        let mut failed = None;
        for doc in docs {
            if self.remaining == 0 {
                break;
            }
            if check {
                self.stats.docs_read += 1;
            }
            if let Some(v) = verdicts.as_mut() {
                match v.next().unwrap_or(Ok(false)) {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
            if check {
                self.stats.matched += 1;
            }
            if self.to_skip > 0 {
                self.to_skip -= 1;
                continue;
            }
            self.remaining -= 1;
            if self.counting {
                self.counted += 1;
            } else {
                chosen.push(doc);
            }
        }
        if let Some(batch) = self.decode_batch.filter(|_| chosen.len() >= PAR_MIN) {
            // No filter: every item is `Ok(Some(result))`.
            for item in batch(&self.read, self.decode, None, &chosen, projection) {
                match item {
                    Ok(Some(result)) => self.out.push_back(result),
                    _ => unreachable!("a batch decoded without a filter rejects nothing"),
                }
            }
        } else {
            for doc in chosen {
                let result = (self.decode)(&self.read, &mut self.mat, doc, projection);
                self.out.push_back(result);
            }
        }
        self.grow_batch(docs.len());
        failed.map_or(Ok(()), Err)
    }

    fn fill(&mut self) -> Result<()> {
        // Counting never fills `out`, so it runs until the plan is exhausted.
        while self.out.is_empty() && self.remaining > 0 {
            match std::mem::replace(&mut self.state, State::Done) {
                State::Done => return Ok(()),
                State::Sorted { mut docs } => {
                    let batch: Vec<RawDoc<'_>> = docs
                        .by_ref()
                        .take(self.batch)
                        .map(|(key, bytes)| RawDoc {
                            key: key.into(),
                            bytes: bytes.into(),
                        })
                        .collect();
                    self.take(&batch, false)?;
                    if docs.len() > 0 {
                        self.state = State::Sorted { docs };
                    }
                }
                State::Index {
                    part,
                    iv,
                    after,
                    mut seen,
                } => {
                    let want = self.batch_len();
                    let Source::IndexScan { field, intervals, .. } = &self.plan.source else {
                        return Ok(());
                    };
                    let (Some(p), Some(interval)) = (self.parts.get(part), intervals.get(iv)) else {
                        return Ok(());
                    };
                    let (lo, hi) = crate::plan::interval_range(interval);
                    let entries = self.read.index_entries_page(
                        p,
                        field,
                        lo,
                        hi,
                        Direction::Forward,
                        after.as_deref(),
                        want,
                    )?;
                    // A full batch resumes after its last entry; a short one
                    // ends this interval's range.
                    let resume = match entries.last() {
                        Some((key, _)) if entries.len() == want => Some(key.clone()),
                        _ => None,
                    };
                    let (part, iv) = match resume {
                        Some(_) => (part, iv),
                        None if iv + 1 == intervals.len() => (part + 1, 0),
                        None => (part, iv + 1),
                    };
                    let keys: Vec<Vec<u8>> = entries
                        .into_iter()
                        .map(|(_, doc)| doc)
                        .filter(|doc| seen.as_mut().is_none_or(|s| s.insert(doc.clone())))
                        .collect();
                    self.stats.keys += keys.len() as u64;
                    self.read_keys(&keys)?;
                    self.state = State::Index {
                        part,
                        iv,
                        after: resume,
                        seen,
                    };
                }
                State::Split {
                    part,
                    mut ranges,
                    rest,
                } => {
                    let Some(p) = self.parts.get(part).cloned() else {
                        return Ok(());
                    };
                    let threads = rayon::current_num_threads();
                    let group: Vec<KeySpan> = ranges.drain(..threads.min(ranges.len())).collect();
                    // Each range read up to twice the share of a batch it
                    // was cut for (ranges come out a little uneven): lent
                    // by a store that lends documents, else into one buffer,
                    // freed at once rather than copy by copy on this thread
                    // after other threads made them.
                    let per = 2 * PAR_BATCH.div_ceil(threads);
                    // Every match a result (no skip, no limit inside the
                    // group): each task filters and decodes its own range.
                    let fused = !self.counting && self.to_skip == 0 && self.remaining >= per * group.len();
                    if let Some(split) = self.split_batch.filter(|_| fused) {
                        let outs = split(
                            &self.read,
                            &p,
                            &group,
                            per,
                            self.decode,
                            self.plan.filter.as_ref(),
                            self.plan.projection.as_deref(),
                        )?;
                        let mut read = 0;
                        self.out.reserve(outs.iter().map(|o| o.items.len()).sum());
                        let again = walk_group(
                            group,
                            outs,
                            |o| o.resume.clone(),
                            |out| {
                                read += out.read;
                                self.stats.docs_read += out.read as u64;
                                self.stats.matched += out.items.len() as u64;
                                self.remaining -= out.items.len();
                                // Moved in one copy rather than one push each.
                                self.out.extend(out.items);
                                // A document the filter cannot read ends the
                                // cursor, after the matches before it.
                                out.error.map_or(Ok(()), Err)
                            },
                        )?;
                        self.grow_batch(read);
                        self.state = self.after_split(&p, part, ranges, again, rest)?;
                        continue;
                    }
                    let read = self.read.clone();
                    let runs: Vec<slate_core::Result<Piece<'_>>> = group
                        .par_iter()
                        .map(|(from, to)| Piece::read(&read, &p, (from.as_deref(), to.as_deref()), per))
                        .collect();
                    let runs = runs.into_iter().collect::<slate_core::Result<Vec<_>>>()?;
                    let mut docs: Vec<RawDoc<'_>> = Vec::new();
                    let again = walk_group(
                        group,
                        &runs,
                        |run| run.resume().map(<[u8]>::to_vec),
                        |run| {
                            docs.extend(run.docs());
                            Ok(())
                        },
                    )?;
                    self.take(&docs, true)?;
                    self.state = self.after_split(&p, part, ranges, again, rest)?;
                }
                State::Spans { mut spans } => {
                    let Some((p, (from, to))) = spans.pop_front() else {
                        return Ok(());
                    };
                    let part = self.parts[p].clone();
                    let want = self.batch_len();
                    let reverse = self.plan.reverse;
                    if want == PAR_BATCH && self.decode_batch.is_some() && !reverse {
                        // Full batches: the rest of this range in parallel.
                        let ranges = self.cut(&part, (from, to))?;
                        self.state = State::Split {
                            part: p,
                            ranges,
                            rest: spans,
                        };
                        continue;
                    }
                    let read = self.read.clone();
                    let dir = if reverse {
                        Direction::Reverse
                    } else {
                        Direction::Forward
                    };
                    let docs = read
                        .scan_dir(&part, from.as_deref(), to.as_deref(), dir)?
                        .take(want)
                        .collect::<std::result::Result<Vec<_>, _>>()?;
                    self.take(&docs, true)?;
                    // A full batch resumes just after its last key (key + [0]
                    // is its successor), or in reverse just before it (the
                    // range's end, exclusive); a short one ended its range.
                    if let Some(last) = docs.last().filter(|_| docs.len() == want) {
                        let resume = if reverse {
                            (from, Some(last.key.to_vec()))
                        } else {
                            let mut k = last.key.to_vec();
                            k.push(0);
                            (Some(k), to)
                        };
                        spans.push_front((p, resume));
                    }
                    if self.remaining > 0 && !spans.is_empty() {
                        self.state = State::Spans { spans };
                    }
                }
                State::Ordered { iv, bound, value } => {
                    self.state = self.ordered(iv, bound, value)?;
                }
                State::Keys { keys, pos } => {
                    let end = (pos + self.batch_len()).min(keys.len());
                    self.read_keys(&keys[pos..end])?;
                    if end < keys.len() {
                        self.state = State::Keys { keys, pos: end };
                    }
                }
            }
        }
        Ok(())
    }

    /// One step of [`State::Ordered`]: reads a batch of the interval's
    /// entries below `bound`, descending, and takes the documents of its
    /// runs of equal values, each run in id order. A full batch's last run
    /// may go on past it: it is read next time, from its start; when it is
    /// the whole batch, that value's entries are read forward a batch at a
    /// time (`value`). Returns the next state.
    fn ordered(
        &mut self,
        iv: usize,
        bound: Option<Vec<u8>>,
        value: Option<(Vec<u8>, Option<Vec<u8>>)>,
    ) -> Result<State> {
        let Source::IndexScan { field, intervals, .. } = &self.plan.source else {
            return Ok(State::Done);
        };
        let (Some(part), Some(interval)) = (
            self.parts.first().cloned(),
            intervals.len().checked_sub(iv + 1).and_then(|i| intervals.get(i)),
        ) else {
            return Ok(State::Done);
        };
        let field = field.clone();
        let want = self.batch_len().max(2);
        let read = self.read.clone();
        if let Some((v, after)) = value {
            // One value's entries, forward: ids ascending.
            let run = read.index_entries_page(
                &part,
                &field,
                Some((&v, true)),
                Some((&v, true)),
                Direction::Forward,
                after.as_deref(),
                want,
            )?;
            let docs: Vec<Vec<u8>> = run.iter().map(|e| e.1.clone()).collect();
            self.stats.keys += docs.len() as u64;
            self.read_keys(&docs)?;
            return Ok(match run.last() {
                Some(last) if run.len() == want => State::Ordered {
                    iv,
                    bound,
                    value: Some((v, Some(last.0.clone()))),
                },
                // Done with the value: on below its least key.
                _ => State::Ordered {
                    iv,
                    bound: Some(keys::index_value_prefix(part.as_bytes(), &field, &v)),
                    value: None,
                },
            });
        }
        let (lo, hi) = crate::plan::interval_range(interval);
        let entries =
            read.index_entries_page(&part, &field, lo, hi, Direction::Reverse, bound.as_deref(), want)?;
        let full = entries.len() == want;
        let value_at = keys::index_prefix(part.as_bytes(), &field).len();
        let id_at = keys::doc_prefix(part.as_bytes()).len();
        // An entry's encoded value: its index key without the prefix and the id.
        fn value_of(entry: &(Vec<u8>, Vec<u8>), value_at: usize, id_at: usize) -> &[u8] {
            let (key, doc) = entry;
            &key[value_at..key.len() - (doc.len() - id_at)]
        }
        let mut docs: Vec<Vec<u8>> = Vec::new();
        let mut next = State::Ordered {
            iv: iv + 1,
            bound: None,
            value: None,
        };
        let mut i = 0;
        while i < entries.len() {
            let v = value_of(&entries[i], value_at, id_at);
            let j = i + entries[i..]
                .iter()
                .take_while(|e| value_of(e, value_at, id_at) == v)
                .count();
            if j == entries.len() && full {
                next = if i == 0 {
                    State::Ordered {
                        iv,
                        bound,
                        value: Some((v.to_vec(), None)),
                    }
                } else {
                    State::Ordered {
                        iv,
                        bound: Some(entries[i - 1].0.clone()),
                        value: None,
                    }
                };
                break;
            }
            docs.extend(entries[i..j].iter().rev().map(|e| e.1.clone()));
            i = j;
        }
        self.stats.keys += docs.len() as u64;
        self.read_keys(&docs)?;
        Ok(next)
    }

    /// Appends every result to `sink`, stopping at the first error as
    /// collecting the iterator into a `Result<Vec<T>>` does: the same
    /// results, moved a batch at a time instead of one `next` call each.
    pub fn collect_into(mut self, sink: &mut Vec<T>) -> Result<()> {
        loop {
            if self.failed {
                return Ok(());
            }
            if self.out.is_empty() {
                if let Some(e) = self.pending.take() {
                    return Err(e);
                }
                if let Err(e) = self.fill() {
                    // The results read before it come first.
                    self.pending = Some(e);
                }
                if self.out.is_empty() && self.pending.is_none() {
                    return Ok(());
                }
            }
            sink.reserve(self.out.len());
            for item in self.out.drain(..) {
                sink.push(item?);
            }
        }
    }

    /// Counts the matching documents without materialising any (skip and
    /// limit applied).
    pub fn count(mut self) -> Result<u64> {
        // An error met while filling, waiting behind the queued results,
        // fails the count (iterating would have reached it).
        if let Some(e) = self.pending.take() {
            return Err(e);
        }
        self.counted = self.out.len() as u64;
        self.out.clear();
        self.counting = true;
        self.fill()?;
        Ok(self.counted)
    }
}

impl<T> Iterator for Cursor<'_, T> {
    type Item = Result<T>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        if self.out.is_empty() {
            if let Some(e) = self.pending.take() {
                self.failed = true;
                return Some(Err(e));
            }
            if let Err(e) = self.fill() {
                if self.out.is_empty() {
                    self.failed = true;
                    return Some(Err(e));
                }
                // The results read before it come first.
                self.pending = Some(e);
            }
        }
        self.out.pop_front()
    }
}

/// The keys of the documents matching `filter` in `parts`, at most `limit`,
/// planned like a find (used by updates and deletes).
pub fn matching_keys(
    read: &CollectionRead<'_>,
    parts: &[Part],
    filter: Option<&crate::filter::Filter>,
    limit: Option<usize>,
) -> Result<Vec<Vec<u8>>> {
    let spec = crate::plan::FindSpec {
        filter: filter.cloned(),
        ..Default::default()
    };
    let plan = crate::plan::plan_find(read, parts, &spec)?;
    let limit = limit.unwrap_or(usize::MAX);
    let mut out = Vec::new();
    if limit > 0 {
        // A small limit (`update_one`, `delete_one`) reads few documents
        // past the ones it takes.
        visit_matches(
            read,
            parts,
            &plan.source,
            filter,
            limit.min(BATCH),
            &mut ExecStats::default(),
            |doc| {
                out.push(doc.key.to_vec());
                Ok(if out.len() == limit {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                })
            },
        )?;
    }
    Ok(out)
}
