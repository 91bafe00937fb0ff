//! The plan tree of a find and how it is chosen.
//!
//! ```text
//! Projection( Limit( Sort( Filter( ReadRecord( Scan | IdScan | IndexScan | IndexMerge )))))
//! ```
//! The ID tier (`Scan`, `IdScan`, `IndexScan`, `IndexMerge`) yields document keys
//! without touching document bytes; it may yield a superset of the matches
//! (array fields, type brackets), never a subset, because the raw tier
//! re-checks the whole filter on every document it reads.

mod choose;
mod explain;

pub use crate::filter::Interval;
pub use choose::{plan_find, search_source, Counter, FindSpec};

/// One end of a range of encoded values: the value and whether it is included.
pub type EncodedBound<'a> = (&'a [u8], bool);

/// An interval's ends as the core index scans take them: `(encoded value, inclusive)`.
pub fn interval_range(iv: &Interval) -> (Option<EncodedBound<'_>>, Option<EncodedBound<'_>>) {
    (bound_end(&iv.start), bound_end(&iv.end))
}

/// The document keys of partition `part` whose `_id` lies in `iv`: a
/// half-open range `[from, to)` as [`CollectionRead::scan_between`] takes it
/// (`to == None`: to the partition's last document).
///
/// [`CollectionRead::scan_between`]: slate_core::CollectionRead::scan_between
pub fn id_key_range(part: &slate_core::Part, iv: &Interval) -> (Vec<u8>, Option<Vec<u8>>) {
    let (from, to) = iv.key_range();
    let p = part.as_bytes();
    (
        slate_core::keys::doc_key(p, &from),
        to.map(|t| slate_core::keys::doc_key(p, &t)),
    )
}

fn bound_end(b: &std::ops::Bound<Vec<u8>>) -> Option<EncodedBound<'_>> {
    match b {
        std::ops::Bound::Included(v) => Some((v.as_slice(), true)),
        std::ops::Bound::Excluded(v) => Some((v.as_slice(), false)),
        std::ops::Bound::Unbounded => None,
    }
}

use crate::exec::SortField;
use crate::filter::Filter;

/// How two or more key sets combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeOp {
    /// Keys in every input.
    And,
    /// Keys in any input.
    Or,
}

/// The ID tier: where document keys come from.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Source {
    /// Every document of the partitions, in key order.
    Scan {
        /// Documents in the partitions (from the count keys).
        estimate: u64,
    },
    /// Documents by `_id`: the document keys themselves over one or more
    /// intervals of encoded ids (a point is one key, looked up; a range is
    /// read in key order, like a scan of just that range).
    IdScan {
        /// Intervals of encoded `_id` values.
        intervals: Vec<Interval>,
        /// Documents in the intervals: counted (up to a cap) for ranges, an
        /// upper bound (one per point and partition) for points.
        estimate: u64,
        /// Whether counting a range hit its cap (the true count is larger).
        capped: bool,
    },
    /// Keys from one index over one or more value intervals.
    IndexScan {
        /// The indexed dot path.
        field: String,
        /// Disjoint or overlapping intervals of encoded values.
        intervals: Vec<Interval>,
        /// Index entries in the intervals (counted from the index, capped).
        estimate: u64,
        /// Whether the estimate hit its cap (the true count is larger).
        capped: bool,
        /// Whether a document may have several entries (then keys are deduplicated).
        multikey: bool,
    },
    /// Keys combined from several index scans.
    IndexMerge {
        /// Intersection or union.
        op: MergeOp,
        /// The inputs, most selective first.
        inputs: Vec<Source>,
        /// Estimated keys out.
        estimate: u64,
    },
}

impl Source {
    /// The estimated number of keys this source yields.
    pub fn estimate(&self) -> u64 {
        match self {
            Source::Scan { estimate }
            | Source::IdScan { estimate, .. }
            | Source::IndexScan { estimate, .. }
            | Source::IndexMerge { estimate, .. } => *estimate,
        }
    }

    /// Whether the source narrows the documents (reads an index, or looks
    /// documents up by `_id`), rather than scanning every one.
    pub fn uses_index(&self) -> bool {
        !matches!(self, Source::Scan { .. })
    }

    /// Whether the source is an `_id` scan whose every interval is one
    /// value: its documents are looked up by key, never ranged over.
    pub fn is_id_points(&self) -> bool {
        matches!(self, Source::IdScan { intervals, .. } if intervals.iter().all(Interval::is_point))
    }
}

/// A chosen plan for a find or count.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The collection.
    pub collection: String,
    /// The ID tier.
    pub source: Source,
    /// Re-checked on every document read (`None`: matches all, or the
    /// source's keys are exactly the matches).
    pub filter: Option<Filter>,
    /// Sort fields (empty: key order of the source).
    pub sort: Vec<SortField>,
    /// Whether the find asked for a sort that the source's order already
    /// gives: `_id` first, read by a scan or an `_id` scan of one partition,
    /// or one field, read in order by its single-valued index (an
    /// `IndexScan` of it, read a run of equal values at a time, each run in
    /// id order). `sort` is then empty and the documents stream.
    pub key_order: bool,
    /// With `key_order`: the sort is descending, and the source's keys (or
    /// index entries) are read from last to first.
    pub reverse: bool,
    /// Documents to skip after sorting.
    pub skip: usize,
    /// Documents to return at most.
    pub limit: Option<usize>,
    /// Fields to return (`None`: all stored fields).
    pub projection: Option<Vec<String>>,
    /// Documents in the partitions read.
    pub total: u64,
    /// The filter as the user wrote it, shown by `explain`.
    pub filter_text: Option<String>,
}
