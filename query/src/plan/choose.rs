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
    /// Planned to be shown: every estimate is counted, even one that
    /// cannot change the plan (see [`UNCOUNTED_WANT`]).
    pub explain: bool,
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

    /// The source reading this predicate's keys (the document keys for
    /// `_id`, else its index), with `estimate` documents.
    fn into_source(self, estimate: u64, capped: bool) -> Source {
        if self.on_id() {
            Source::IdScan {
                intervals: self.intervals,
                estimate,
                capped,
            }
        } else {
            Source::IndexScan {
                field: self.field,
                intervals: self.intervals,
                estimate,
                capped,
                multikey: self.multikey,
            }
        }
    }
}

/// A plan that streams a sort's order (a scan in key order, an index in
/// order) instead of reading and sorting what an index selects is taken
/// only when its worst case (reading everything it could) costs at most
/// this many times the plan it replaces.
const WORST_CASE_FACTOR: u64 = 4;

/// The field every document key holds.
const ID: &str = "_id";
/// How far a find counts a range of `_id`s when it is the filter's only
/// indexable condition (and no limit says how far): enough for `explain`
/// to show the count of a short range, while a long one (chosen anyway) is
/// not read twice.
const ID_RANGE_COUNT: u64 = 1_000;
/// A filter with one indexable condition (and no `$or`), limited to at most
/// this many documents (skip included) and unsorted (or, on `_id`, sorted
/// any way), is read through that condition's index or keys whatever they
/// hold: a run does not count them first (the count would read the same
/// entries, or documents, the run then reads), and estimates the limit.
/// `explain` still counts them, to show. (Exact `_id` values are counted
/// without reading anything, so they are always counted.)
const UNCOUNTED_WANT: u64 = 1_000;

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
        let (estimate, capped) = estimate_ids(read, parts, &p.intervals, cap)?;
        return Ok(p.into_source(estimate, capped));
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
    Ok(p.into_source(estimate, capped))
}

/// The estimate of an `_id` scan of `intervals` in every partition, and
/// whether its count stopped at `cap`: points are counted as
/// one document each (one per partition: looking them up costs what
/// checking them would), never capped; ranges by reading their keys, up to
/// `cap` documents in all.
fn estimate_ids(
    read: &CollectionRead<'_>,
    parts: &[Part],
    intervals: &[Interval],
    cap: u64,
) -> Result<(u64, bool)> {
    let points = intervals.iter().filter(|iv| iv.is_point()).count() as u64;
    let mut ranged = 0u64;
    let mut capped = false;
    'parts: for part in parts {
        for iv in intervals.iter().filter(|iv| !iv.is_point()) {
            let (from, to) = super::id_key_range(part, iv);
            let left = cap - ranged;
            let mut n = 0u64;
            read.visit_between(part, Some(&from), to.as_deref(), &mut |_| {
                n += 1;
                if n > left {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            })?;
            if n > left {
                capped = true;
                ranged = cap;
                break 'parts;
            }
            ranged += n;
        }
    }
    Ok(((points * parts.len() as u64).saturating_add(ranged), capped))
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
    let Chosen {
        source,
        most_selective,
        ..
    } = choose_source(read, parts, filter, preds, total, cap, counter)?;
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
    // Sorted by `_id` first, one partition: a scan or an `_id` scan needs
    // no sort (`key_order` below) and stops at the limit too, so a limit
    // counts (`want`) as it does unsorted.
    let id_sort = id_sort(spec, parts);
    let id_sorted = id_sort.is_some();
    let want = match spec.limit {
        Some(limit) if spec.sort.is_empty() || id_sorted => {
            Some((limit as u64).saturating_add(spec.skip as u64))
        }
        _ => None,
    };
    let source = match &spec.filter {
        Some(filter) => {
            let mut preds = index_predicates(read, filter)?;
            let no_or = !filter.conjuncts().iter().any(|c| matches!(c, Filter::Or(_)));
            let lone = preds.len() == 1 && no_or;
            // Not `_id` values alone: counted for free (one each, nothing
            // read), and on a small collection a scan can cost less.
            let uncounted = want.filter(|&w| {
                !spec.explain
                    && lone
                    && w <= UNCOUNTED_WANT
                    && (preds[0].on_id() || spec.sort.is_empty())
                    && !(preds[0].on_id() && preds[0].intervals.iter().all(Interval::is_point))
            });
            if let Some(want) = uncounted {
                let source = preds.swap_remove(0).into_source(want.min(total), false);
                return finish_plan(read, parts, spec, total, source);
            }
            if lone && preds[0].on_id() {
                // A lone `_id` condition is the source whatever a range of it
                // holds (never more than the scan): its count is only shown.
                cap = cap.min(want.unwrap_or(ID_RANGE_COUNT).max(1));
            } else if let Some(want) = want.filter(|_| spec.sort.is_empty()) {
                // One index and no `$or`: that index is the source whatever
                // its count, so it is counted only as far as the limit (an
                // exact estimate when fewer match).
                cap = if lone {
                    cap.min(want.max(1))
                } else {
                    cap.min(want.saturating_mul(LOOKUP_COST).max(64))
                };
            }
            let Chosen {
                source,
                most_selective,
                id_range,
            } = choose_source(read, parts, filter, preds, total, cap, None)?;
            match (most_selective, id_range, want) {
                // Not when sorted by `_id`: the index would not stream in order.
                (Some(index), _, Some(_)) if spec.sort.is_empty() && !source.uses_index() => index,
                // A range of `_id`s, however many it holds, is never more
                // than the scan reads, in the same order. (A vector search
                // wants a source only where gathering its rows beats
                // scanning them.)
                (_, Some(range), _) if !source.uses_index() => range,
                // Sorted by `_id` with a limit, through an index of n keys
                // (m matching, about n), a scan in key order finds the
                // first `want` after about want * total / m documents,
                // where the index reads and sorts all n.
                // At worst (the matches all at the far end) it reads every
                // document: taken only when that is at most
                // WORST_CASE_FACTOR times the index's cost. In key order
                // means within the `_id` range when there is one.
                (_, range, Some(want))
                    if id_sorted
                        && matches!(source, Source::IndexScan { .. } | Source::IndexMerge { .. })
                        && want.saturating_mul(total) / source.estimate().max(1) < read_cost(&source)
                        && range.as_ref().filter(|r| !capped(r)).map_or(total, read_cost)
                            <= read_cost(&source).saturating_mul(WORST_CASE_FACTOR) =>
                {
                    range.unwrap_or(Source::Scan { estimate: total })
                }
                _ => source,
            }
        }
        None => Source::Scan { estimate: total },
    };
    finish_plan(read, parts, spec, total, source)
}

/// `spec`'s first sort field when it is `_id` and one partition is read:
/// then a scan or an `_id` scan reads in its order (or in reverse).
fn id_sort<'s>(spec: &'s FindSpec, parts: &[Part]) -> Option<&'s SortField> {
    spec.sort
        .first()
        .filter(|f| f.path.as_str() == ID && parts.len() == 1)
}

/// The plan of `spec` reading `source`: in key or index order when that
/// serves its sort, the filter dropped when the source answers it exactly.
fn finish_plan(
    read: &CollectionRead<'_>,
    parts: &[Part],
    spec: &FindSpec,
    total: u64,
    source: Source,
) -> Result<Plan> {
    let id_sort = id_sort(spec, parts);
    let id_sorted = id_sort.is_some();
    // A scan or an `_id` scan of one partition reads in `_id` order, or in
    // reverse: a sort whose first field is `_id` is one of them (the `_id`s
    // are distinct: later fields never decide), and the documents stream, a
    // limit stopping the read (`_id > last` pages read one page, the
    // newest ids come first from the end).
    // In reverse only with a limit: a whole read in reverse is serial, where
    // a sort of a scan reads its key ranges in parallel.
    let mut key_order = id_sorted
        && matches!(source, Source::Scan { .. } | Source::IdScan { .. })
        && (spec.limit.is_some() || id_sort.is_some_and(|f| !f.descending));
    let mut reverse = key_order && id_sort.is_some_and(|f| f.descending);
    let mut source = source;
    if !key_order {
        if let Some((ordered, descending)) = index_order(read, parts, spec, &source, total)? {
            source = ordered;
            key_order = true;
            reverse = descending;
        }
    }
    // An `_id` scan of a filter only on `_id`, of values and ranges that
    // its keys answer exactly: the documents read are the matches, and
    // are not checked again.
    let filter = match (&source, &spec.filter) {
        (Source::IdScan { .. }, Some(f)) if f.is_exact_on(ID) => None,
        _ => spec.filter.clone(),
    };
    Ok(Plan {
        collection: read.config().name.clone(),
        source,
        filter,
        sort: if key_order { Vec::new() } else { spec.sort.clone() },
        key_order,
        reverse,
        skip: spec.skip,
        limit: spec.limit,
        projection: spec.projection.clone(),
        filter_text: spec.filter_text.clone(),
        total,
    })
}

/// Sorted by one field with an index (single-valued: no document holds an
/// array or several values there) and limited, on one partition: that
/// index's scan in order (in reverse when descending), over the filter's
/// intervals on the field or its whole range, when it would find the first
/// `limit + skip` matches for less than `source` costs to read (and sort),
/// and at worst (every entry read) costs at most WORST_CASE_FACTOR times
/// that. A field not marked multikey has exactly one entry per document,
/// whose value orders it as the sort does (see `is_multikey_at` in core),
/// equal values in id order, as the sort breaks ties. Streamed, the index
/// finds the first `want` matches after about want * total / m entries (m
/// matching, spread independently of the field) where `source` narrows
/// the filter; on a scan's filter (selectivity unknown) or one on this
/// field, after about `want` (at worst the whole index, a few times a
/// scan's cost).
fn index_order(
    read: &CollectionRead<'_>,
    parts: &[Part],
    spec: &FindSpec,
    source: &Source,
    total: u64,
) -> Result<Option<(Source, bool)>> {
    let (Some(limit), [sort], [_]) = (spec.limit, spec.sort.as_slice(), parts) else {
        return Ok(None);
    };
    let field = sort.path.as_str();
    if crate::filter::names_a_position(field)
        || !read.config().indexes.iter().any(|f| f == field)
        || !read.is_sort_ordered(field)?
    {
        return Ok(None);
    }
    let want = (limit as u64).saturating_add(spec.skip as u64).max(1);
    let bounds = spec.filter.as_ref().and_then(|f| f.index_bounds(field, false));
    let current = match source {
        Source::Scan { .. } => total,
        other => read_cost(other),
    };
    // Every entry may match (a scan's filter, or one on this field): the
    // first `want` entries are about what is read, whatever the count, so
    // it is counted only that far. Otherwise it is counted as far as its
    // worst case (every entry read) could stay within bounds.
    let every = match source {
        Source::Scan { .. } => true,
        Source::IndexScan { field: f, .. } => f == field,
        _ => false,
    };
    let cap = if every {
        want
    } else {
        current.saturating_mul(WORST_CASE_FACTOR) / LOOKUP_COST
    };
    let ordered = match bounds {
        Some(intervals) => estimate_predicate(
            read,
            parts,
            IndexPredicate {
                field: field.to_owned(),
                intervals,
                multikey: false,
            },
            cap.max(1),
            None,
        )?,
        // The whole index: one entry per document (a missing field
        // indexes as null), so no count.
        None => Source::IndexScan {
            field: field.to_owned(),
            intervals: vec![Interval {
                start: std::ops::Bound::Unbounded,
                end: std::ops::Bound::Unbounded,
            }],
            estimate: total,
            capped: false,
            multikey: false,
        },
    };
    if every {
        // About `want` lookups, against the source's read and sort.
        let cost = want.saturating_mul(LOOKUP_COST);
        return Ok((cost < current).then_some((ordered, sort.descending)));
    }
    let n = ordered.estimate().max(1);
    if capped(&ordered) || n.saturating_mul(LOOKUP_COST) > current.saturating_mul(WORST_CASE_FACTOR) {
        // At worst (every entry read), more than WORST_CASE_FACTOR times
        // the source.
        return Ok(None);
    }
    // The source's m matches spread over all documents independently of
    // the sort field: one entry in total / m matches, so the first `want`
    // come after about want * total / m entries (all n at most).
    let m = source.estimate().max(1);
    let entries = (want.saturating_mul(total) / m).min(n);
    let cost = entries.saturating_mul(LOOKUP_COST);
    Ok((cost < current).then_some((ordered, sort.descending)))
}

/// What [`choose_source`] chose.
struct Chosen {
    /// The source (a scan when no index is selective enough).
    source: Source,
    /// When `source` reads no index: the most selective index scan
    /// (capped or not).
    most_selective: Option<Source>,
    /// A range of `_id`s (capped or not) that is not `source`: it never
    /// reads more than the scan, in the same order.
    id_range: Option<Source>,
}

/// Chooses among the index sources of `filter` (its index predicates
/// `preds`) by estimates counted up to `cap`, cheapest to read first: the
/// chosen source (a scan when no index is selective enough), and, when
/// that reads no index, the other candidates a find may prefer.
fn choose_source(
    read: &CollectionRead<'_>,
    parts: &[Part],
    filter: &Filter,
    preds: Vec<IndexPredicate>,
    total: u64,
    cap: u64,
    counter: Option<Counter<'_>>,
) -> Result<Chosen> {
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
    // Uncapped estimates first, cheapest to read first; a capped one means
    // "more than the cap": never selective enough.
    candidates.sort_by_key(|s| (capped(s), read_cost(s)));
    let uncapped = candidates.iter().take_while(|s| !capped(s)).count();
    if let Some(best_est) = candidates[..uncapped].first().map(Source::estimate) {
        if read_cost(&candidates[0]) < total.max(1) || best_est == 0 {
            // A range of `_id`s is read in key order, not intersected: its
            // documents would be read once for their keys, then again.
            let n = candidates[..uncapped]
                .iter()
                .take_while(|s| s.estimate() <= best_est.max(1) * INTERSECT_FACTOR && !is_id_range(s))
                .count()
                .max(1);
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
    let id_range = candidates
        .iter()
        .position(is_id_range)
        .map(|i| candidates.swap_remove(i));
    Ok(Chosen {
        source,
        most_selective,
        id_range,
    })
}

/// Whether `s` reads a range of `_id`s (not only points).
fn is_id_range(s: &Source) -> bool {
    matches!(s, Source::IdScan { .. }) && !s.is_id_points()
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
