//! Choosing the ID tier from cardinality estimates read off the indexes.
//!
//! Every indexable conjunct of the filter is estimated by counting its index
//! entries (up to a cap); the most selective becomes the source, others join
//! an intersection only when they are nearly as selective (reading a large
//! index range to intersect costs more than filtering the few documents the
//! best one yields). An `$or`, the whole filter or one of its conjuncts
//! (`{status: "a", $or: [...]}`), is a candidate too: a union of index scans
//! (each branch's most selective), when every branch is indexable, estimated
//! at the sum of its inputs. With no candidate selective enough, the
//! collection is scanned.

use std::ops::ControlFlow;

use slate_core::{CollectionRead, Part};

use super::{interval_range, Interval, MergeOp, Plan, Source};
use crate::exec::SortField;
use crate::filter::Filter;
use crate::Result;

/// Reading a document through an index costs about this many sequential
/// scan steps (a point lookup against one step of an iterator).
const LOOKUP_COST: u64 = 3;
/// An index input joins an intersection only if its estimate is within this
/// factor of the best one.
const INTERSECT_FACTOR: u64 = 4;

/// What a find asks for.
#[derive(Debug, Clone, Default)]
pub struct FindSpec {
    /// The filter (`None`: every document).
    pub filter: Option<Filter>,
    /// Sort fields.
    pub sort: Vec<SortField>,
    /// Documents to skip.
    pub skip: usize,
    /// At most this many documents.
    pub limit: Option<usize>,
    /// Fields to return.
    pub projection: Option<Vec<String>>,
    /// The filter as the user wrote it, for `explain` (e.g. its JSON).
    pub filter_text: Option<String>,
}

/// What an index on `field` can answer of (part of) the filter; on `_id`,
/// what the document keys answer themselves.
struct IndexPredicate {
    field: String,
    intervals: Vec<Interval>,
    multikey: bool,
}

impl IndexPredicate {
    fn on_id(&self) -> bool {
        self.field == ID
    }
}

/// The field every document key holds.
const ID: &str = "_id";

/// The indexable conjuncts of `filter`, one per indexed field, and its
/// conjuncts on `_id` (answered by the document keys: an index on `_id`
/// would only repeat them).
fn index_predicates(read: &CollectionRead<'_>, filter: &Filter) -> Result<Vec<IndexPredicate>> {
    let mut out = Vec::new();
    // `_id` is never an array.
    if let Some(intervals) = filter.index_bounds(ID, false) {
        out.push(IndexPredicate {
            field: ID.to_owned(),
            intervals,
            multikey: false,
        });
    }
    for field in read.config().indexes.iter().filter(|f| *f != ID) {
        let multikey = read.is_multikey(field)?;
        if let Some(intervals) = filter.index_bounds(field, multikey) {
            out.push(IndexPredicate {
                field: field.clone(),
                intervals,
                multikey,
            });
        }
    }
    Ok(out)
}

/// Counts what an index scan of `field` over `intervals` would read in
/// every partition, from something cheaper than the index (a vector
/// cache's row tags); `None` when it cannot, and the index is counted.
pub type Counter<'a> = &'a dyn Fn(&str, &[Interval]) -> Option<u64>;

fn estimate_predicate(
    read: &CollectionRead<'_>,
    parts: &[Part],
    p: IndexPredicate,
    cap: u64,
    counter: Option<Counter<'_>>,
) -> Result<Source> {
    if p.on_id() {
        return estimate_ids(read, parts, p.intervals, cap);
    }
    // Counted by the counter when it can (exactly: never capped), else
    // from the index, up to `cap`.
    let (estimate, capped) = match counter.and_then(|count| count(&p.field, &p.intervals)) {
        Some(n) => (n, false),
        None => {
            let mut estimate = 0u64;
            let mut capped = false;
            'parts: for part in parts {
                for iv in &p.intervals {
                    let (lo, hi) = interval_range(iv);
                    let left = cap.saturating_sub(estimate) as usize + 1;
                    estimate += read.index_count(part, &p.field, lo, hi, left)? as u64;
                    if estimate > cap {
                        capped = true;
                        estimate = cap;
                        break 'parts;
                    }
                }
            }
            (estimate, capped)
        }
    };
    Ok(Source::IndexScan {
        field: p.field,
        intervals: p.intervals,
        estimate,
        capped,
        multikey: p.multikey,
    })
}

/// An `_id` scan of `intervals` in every partition: points are counted as
/// one document each (one per partition: looking them up costs what
/// checking them would), ranges by reading their keys up to `cap`.
fn estimate_ids(
    read: &CollectionRead<'_>,
    parts: &[Part],
    intervals: Vec<Interval>,
    cap: u64,
) -> Result<Source> {
    let mut estimate = 0u64;
    let mut capped = false;
    'parts: for part in parts {
        for iv in &intervals {
            if iv.is_point() {
                estimate += 1;
            } else {
                let (from, to) = super::id_key_range(part, iv);
                let mut n = 0u64;
                let left = cap.saturating_sub(estimate);
                read.visit_between(part, Some(&from), to.as_deref(), &mut |_| {
                    n += 1;
                    if n > left {
                        ControlFlow::Break(())
                    } else {
                        ControlFlow::Continue(())
                    }
                })?;
                estimate += n;
            }
            if estimate > cap {
                capped = true;
                estimate = cap;
                break 'parts;
            }
        }
    }
    Ok(Source::IdScan {
        intervals,
        estimate,
        capped,
    })
}

/// What reading `s`'s documents costs, in steps of a scan: a range of
/// `_id`s is read in key order like a scan, everything else is looked up.
fn read_cost(s: &Source) -> u64 {
    match s {
        Source::IdScan { estimate, .. } if !s.is_id_points() => *estimate,
        _ => s.estimate().saturating_mul(LOOKUP_COST),
    }
}

/// The ID-tier source for a vector search: what a find would choose with
/// estimates counted up to `cap`, or, when that is no index, the most
/// selective index scan anyway (a bitmap search may want an index a find
/// would not), whose estimate may be capped ("more than `cap`").
/// `None` when no index can narrow `filter`. A `counter` that can count a
/// predicate spares reading its index; a `total` (about the documents in
/// `parts`) spares reading their counts.
pub fn search_source(
    read: &CollectionRead<'_>,
    parts: &[Part],
    filter: &Filter,
    cap: u64,
    counter: Option<Counter<'_>>,
    total: Option<u64>,
) -> Result<Option<Source>> {
    let total = match total {
        Some(n) => n,
        None => count_parts(read, parts)?,
    };
    let preds = index_predicates(read, filter)?;
    let (source, most_selective) =
        choose_source(read, parts, filter, preds, total, cap, Purpose::Search(counter))?;
    Ok(if source.uses_index() {
        Some(source)
    } else {
        most_selective
    })
}

fn count_parts(read: &CollectionRead<'_>, parts: &[Part]) -> Result<u64> {
    let mut total = 0u64;
    for part in parts {
        total += read.count(part)?;
    }
    Ok(total)
}

/// Plans a find over `parts` of the collection read by `read`.
pub fn plan_find(read: &CollectionRead<'_>, parts: &[Part], spec: &FindSpec) -> Result<Plan> {
    crate::check_projection(spec.projection.as_deref())?;
    crate::projection::check_sort(&spec.sort)?;
    let total = count_parts(read, parts)?;
    // Estimates stop counting where an index could no longer win.
    let mut cap = (total / LOOKUP_COST).max(64);
    // Unsorted with a limit, both sources stop after `want` matches: a scan
    // after about want * total / m documents (m matching), a streamed index
    // scan after about want * n / m entries (n in its range), each a lookup.
    // The index costs at most LOOKUP_COST times the scan (when n is about
    // the total) and the scan any multiple of the index (when n is small),
    // so the most selective index scan runs whatever its count, and counting
    // past LOOKUP_COST * want entries would only rank indexes that all
    // read a few lookups per match anyway.
    let want = match spec.limit {
        Some(limit) if spec.sort.is_empty() => Some((limit as u64).saturating_add(spec.skip as u64)),
        _ => None,
    };
    let source = match &spec.filter {
        Some(filter) => {
            let preds = index_predicates(read, filter)?;
            if let Some(want) = want {
                // One index and no `$or`: that index is the source whatever
                // its count, so it is counted only as far as the limit (an
                // exact estimate when fewer match).
                let only = preds.len() == 1 && !filter.conjuncts().iter().any(|c| matches!(c, Filter::Or(_)));
                cap = if only {
                    cap.min(want.max(1))
                } else {
                    cap.min(want.saturating_mul(LOOKUP_COST).max(64))
                };
            }
            let (source, most_selective) =
                choose_source(read, parts, filter, preds, total, cap, Purpose::Find)?;
            match most_selective {
                Some(index) if want.is_some() && !source.uses_index() => index,
                _ => source,
            }
        }
        None => Source::Scan { estimate: total },
    };
    Ok(Plan {
        collection: read.config().name.clone(),
        source,
        filter: spec.filter.clone(),
        sort: spec.sort.clone(),
        skip: spec.skip,
        limit: spec.limit,
        projection: spec.projection.clone(),
        filter_text: spec.filter_text.clone(),
        total,
    })
}

/// What a source is chosen for.
#[derive(Clone, Copy)]
enum Purpose<'a> {
    /// A find, count, update or delete: its documents are read in the
    /// source's order.
    Find,
    /// A vector search's candidates, counted by the counter where it can.
    Search(Option<Counter<'a>>),
}

/// Chooses among the index sources of `filter` (its index predicates
/// `preds`) by estimates counted up to `cap`: the chosen source (a scan when
/// no index is selective enough; for a find, a range of `_id`s instead of a
/// scan), and, when that reads no index, the most selective index candidate
/// (an index scan, capped or not, or a union).
fn choose_source(
    read: &CollectionRead<'_>,
    parts: &[Part],
    filter: &Filter,
    preds: Vec<IndexPredicate>,
    total: u64,
    cap: u64,
    purpose: Purpose<'_>,
) -> Result<(Source, Option<Source>)> {
    let counter = match purpose {
        Purpose::Find => None,
        Purpose::Search(counter) => counter,
    };
    let mut source = Source::Scan { estimate: total };
    let mut candidates = Vec::new();
    for p in preds {
        candidates.push(estimate_predicate(read, parts, p, cap, counter)?);
    }
    // A union is counted only as far as it could still be chosen: beside
    // an index scan it must come within the intersection's factor of it.
    let best_scan = candidates
        .iter()
        .filter(|s| !capped(s))
        .map(Source::estimate)
        .min();
    let union_cap = best_scan.map_or(cap, |e| cap.min(e.max(1).saturating_mul(INTERSECT_FACTOR)));
    for conjunct in filter.conjuncts() {
        if let Filter::Or(branches) = conjunct {
            candidates.extend(union_source(read, parts, branches, union_cap, counter)?);
        }
    }
    // Uncapped estimates first, most selective first; a capped one means
    // "more than the cap": never selective enough.
    candidates.sort_by_key(|s| (capped(s), s.estimate()));
    let uncapped = candidates.iter().take_while(|s| !capped(s)).count();
    if let Some(best_est) = candidates[..uncapped].first().map(Source::estimate) {
        if read_cost(&candidates[0]) < total.max(1) || best_est == 0 {
            let n = candidates[..uncapped]
                .iter()
                .take_while(|s| s.estimate() <= best_est.max(1) * INTERSECT_FACTOR)
                .count();
            source = if n == 1 {
                candidates.swap_remove(0)
            } else {
                Source::IndexMerge {
                    op: MergeOp::And,
                    inputs: candidates.drain(..n).collect(),
                    estimate: best_est,
                }
            };
        }
    }
    // A range of `_id`s, however many it holds, is never more than the
    // scan reads, in the same order. (A search wants a source only where
    // gathering its rows beats scanning them.)
    if matches!(purpose, Purpose::Find) && !source.uses_index() {
        if let Some(i) = candidates
            .iter()
            .position(|s| matches!(s, Source::IdScan { .. }) && !s.is_id_points())
        {
            source = candidates.swap_remove(i);
        }
    }
    // Moved, not cloned: only wanted when no index was chosen (the
    // candidates are then all still here). An index scan: a limited find
    // streams it, where a union reads every branch's keys first.
    let most_selective = if source.uses_index() {
        None
    } else {
        let best = candidates
            .iter()
            .enumerate()
            .filter(|(_, s)| matches!(s, Source::IndexScan { .. }))
            .min_by_key(|(_, s)| (s.estimate(), capped(s)))
            .map(|(i, _)| i);
        best.map(|i| candidates.swap_remove(i))
    };
    Ok((source, most_selective))
}

/// A union of index scans answering `$or` `branches`: each branch's most
/// selective indexable conjunct; `None` when a branch has none, or when
/// counting the index found the branches together over `cap` (each branch
/// is counted only up to what the ones before it left of `cap`; a
/// `counter` counts exactly, uncapped).
fn union_source(
    read: &CollectionRead<'_>,
    parts: &[Part],
    branches: &[Filter],
    cap: u64,
    counter: Option<Counter<'_>>,
) -> Result<Option<Source>> {
    let mut inputs = Vec::new();
    let mut sum = 0u64;
    for branch in branches {
        let left = cap.saturating_sub(sum);
        let mut best: Option<Source> = None;
        for p in index_predicates(read, branch)? {
            let s = estimate_predicate(read, parts, p, left, counter)?;
            if best
                .as_ref()
                .is_none_or(|b| (s.estimate(), capped(&s)) < (b.estimate(), capped(b)))
            {
                best = Some(s);
            }
        }
        match best {
            Some(s) if capped(&s) => return Ok(None),
            None => return Ok(None),
            Some(s) => {
                sum = sum.saturating_add(s.estimate());
                inputs.push(s);
            }
        }
    }
    Ok((!inputs.is_empty()).then_some(Source::IndexMerge {
        op: MergeOp::Or,
        inputs,
        estimate: sum,
    }))
}

/// Whether `s` is an index scan whose count stopped at its cap ("more than
/// the cap").
fn capped(s: &Source) -> bool {
    matches!(
        s,
        Source::IndexScan { capped: true, .. } | Source::IdScan { capped: true, .. }
    )
}
