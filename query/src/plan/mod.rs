//! The plan tree of a find and how it is chosen.
//!
//! ```text
//! Projection( Limit( Sort( Filter( ReadRecord( Scan | IndexScan | IndexMerge )))))
//! ```
//! The ID tier (`Scan`, `IndexScan`, `IndexMerge`) yields document keys
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
            | Source::IndexScan { estimate, .. }
            | Source::IndexMerge { estimate, .. } => *estimate,
        }
    }

    /// Whether the source reads an index.
    pub fn uses_index(&self) -> bool {
        !matches!(self, Source::Scan { .. })
    }
}

/// A chosen plan for a find or count.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The collection.
    pub collection: String,
    /// The ID tier.
    pub source: Source,
    /// Re-checked on every document read (`None`: matches all).
    pub filter: Option<Filter>,
    /// Sort fields (empty: key order of the source).
    pub sort: Vec<SortField>,
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
