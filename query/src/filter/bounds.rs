//! Index bounds: the parts of a filter an index can serve, as intervals of encoded values.
//!
//! An index on path `p` stores, per document, the keys `slate_core::value::index_values`
//! gives: each array element (an empty array as itself), `null` for a missing path. Every
//! interval set returned here is a *superset*: it contains a key of every document the
//! predicate matches, but documents found through it must still be checked with the full
//! filter (`$in: [[1, 2]]` also finds `{a: [1, 5]}` through the key `1`, for instance).
//!
//! A predicate's intervals are exact for a single value; combining several predicates on one
//! path by intersection is only valid when no indexed document holds an array on that path
//! (`{a: {$gt: 1, $lt: 5}}` matches `{a: [0, 9]}`, whose keys are all outside `(1, 5)`), so
//! [`Filter::index_bounds`] takes that fact from the caller.

use std::cmp::Ordering;
use std::ops::Bound;

use bson::{RawBson, RawBsonRef};
use slate_core::value::{bracket, encode_value, key_successor, TypeBracket};

use super::{Filter, Predicate};

/// A range of encoded values (`slate_core::value::encode_value`), compared as bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interval {
    /// Lower bound on the encoded value.
    pub start: Bound<Vec<u8>>,
    /// Upper bound on the encoded value.
    pub end: Bound<Vec<u8>>,
}

impl Interval {
    /// Exactly the value whose encoding is `encoded`.
    pub fn point(encoded: Vec<u8>) -> Interval {
        Interval {
            start: Bound::Included(encoded.clone()),
            end: Bound::Included(encoded),
        }
    }

    /// Whether the interval holds exactly one encoded value.
    pub fn is_point(&self) -> bool {
        matches!((&self.start, &self.end), (Bound::Included(a), Bound::Included(b)) if a == b)
    }

    /// The half-open byte range `[from, to)` of index-key suffixes (encoded value followed by
    /// anything, e.g. the encoded id) whose value lies in the interval; `to == None` is
    /// unbounded. Prepend the index's `{field}\0` prefix to both ends to scan.
    pub fn key_range(&self) -> (Vec<u8>, Option<Vec<u8>>) {
        let from = match &self.start {
            Bound::Included(v) => v.clone(),
            // Encodings are self-delimiting: keys holding exactly `v` all start with `v`.
            Bound::Excluded(v) => match key_successor(v) {
                Some(s) => s,
                None => return (v.clone(), Some(v.clone())),
            },
            Bound::Unbounded => Vec::new(),
        };
        let to = match &self.end {
            Bound::Included(v) => key_successor(v),
            Bound::Excluded(v) => Some(v.clone()),
            Bound::Unbounded => None,
        };
        (from, to)
    }

    /// Whether no byte string lies in the interval.
    pub fn is_empty(&self) -> bool {
        match (&self.start, &self.end) {
            (Bound::Included(s), Bound::Included(e)) => s > e,
            (Bound::Included(s) | Bound::Excluded(s), Bound::Excluded(e))
            | (Bound::Excluded(s), Bound::Included(e)) => s >= e,
            _ => false,
        }
    }

    fn intersect(&self, other: &Interval) -> Option<Interval> {
        let start = if cmp_start(&self.start, &other.start).is_ge() {
            &self.start
        } else {
            &other.start
        };
        let end = if cmp_end(&self.end, &other.end).is_le() {
            &self.end
        } else {
            &other.end
        };
        let out = Interval {
            start: start.clone(),
            end: end.clone(),
        };
        (!out.is_empty()).then_some(out)
    }
}

/// Orders lower bounds: Unbounded first; at equal bytes Included before Excluded.
fn cmp_start(a: &Bound<Vec<u8>>, b: &Bound<Vec<u8>>) -> Ordering {
    let rank = |x: &Bound<Vec<u8>>| match x {
        Bound::Included(_) => 0,
        Bound::Excluded(_) => 1,
        Bound::Unbounded => 0,
    };
    match (a, b) {
        (Bound::Unbounded, Bound::Unbounded) => Ordering::Equal,
        (Bound::Unbounded, _) => Ordering::Less,
        (_, Bound::Unbounded) => Ordering::Greater,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            x.cmp(y).then(rank(a).cmp(&rank(b)))
        }
    }
}

/// Orders upper bounds: Unbounded last; at equal bytes Excluded before Included.
fn cmp_end(a: &Bound<Vec<u8>>, b: &Bound<Vec<u8>>) -> Ordering {
    let rank = |x: &Bound<Vec<u8>>| match x {
        Bound::Excluded(_) => 0,
        Bound::Included(_) => 1,
        Bound::Unbounded => 1,
    };
    match (a, b) {
        (Bound::Unbounded, Bound::Unbounded) => Ordering::Equal,
        (Bound::Unbounded, _) => Ordering::Greater,
        (_, Bound::Unbounded) => Ordering::Less,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            x.cmp(y).then(rank(a).cmp(&rank(b)))
        }
    }
}

/// Sorts, drops empty intervals and merges overlapping ones.
fn normalize(mut set: Vec<Interval>) -> Vec<Interval> {
    set.retain(|i| !i.is_empty());
    set.sort_by(|a, b| cmp_start(&a.start, &b.start));
    let mut out: Vec<Interval> = Vec::with_capacity(set.len());
    for next in set {
        if let Some(last) = out.last_mut() {
            let overlaps = match (&last.end, &next.start) {
                (Bound::Unbounded, _) | (_, Bound::Unbounded) => true,
                (Bound::Included(e), Bound::Included(s)) => s <= e,
                (Bound::Included(e) | Bound::Excluded(e), Bound::Included(s) | Bound::Excluded(s)) => s < e,
            };
            if overlaps {
                if cmp_end(&next.end, &last.end).is_gt() {
                    last.end = next.end;
                }
                continue;
            }
        }
        out.push(next);
    }
    out
}

fn encoded(v: RawBsonRef<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    encode_value(v, &mut out);
    out
}

/// Intervals holding every index key equal to `x` could be stored under, for `$eq: x`.
fn equality(x: &RawBson, out: &mut Vec<Interval>) {
    let v = x.as_raw_bson_ref();
    out.push(Interval::point(encoded(v)));
    // A document whose value *is* the array `x` is indexed by x's elements, so its first
    // element finds it. (An empty array is indexed as itself.)
    if let RawBsonRef::Array(a) = v {
        if let Some(Ok(first)) = a.into_iter().next() {
            out.push(Interval::point(encoded(first)));
        }
    }
}

/// `$gt`/`$gte`/`$lt`/`$lte`: the operand's bracket on one side of it.
fn range(x: &RawBson, lower: bool, inclusive: bool) -> Option<Vec<Interval>> {
    let v = x.as_raw_bson_ref();
    let b = bracket(v);
    match b {
        // Cross-bracket comparisons, and arrays, whose elements are what the index holds.
        TypeBracket::MinKey | TypeBracket::MaxKey | TypeBracket::Array => return None,
        // null only equals null.
        TypeBracket::Null => {
            return Some(if inclusive {
                vec![Interval::point(encoded(v))]
            } else {
                vec![]
            })
        }
        _ => {}
    }
    if matches!(v, RawBsonRef::Double(f) if f.is_nan()) {
        return Some(if inclusive {
            vec![Interval::point(encoded(v))]
        } else {
            vec![]
        });
    }
    let here = encoded(v);
    let bound = if inclusive {
        Bound::Included(here)
    } else {
        Bound::Excluded(here)
    };
    let bracket_start = if b == TypeBracket::Number {
        // Above NaN, which no range matches.
        Bound::Excluded(encoded(RawBsonRef::Double(f64::NAN)))
    } else {
        Bound::Included(vec![b.tag()])
    };
    let bracket_end = Bound::Excluded(vec![b.tag() + 1]);
    let interval = if lower {
        Interval {
            start: bound,
            end: bracket_end,
        }
    } else {
        Interval {
            start: bracket_start,
            end: bound,
        }
    };
    Some(normalize(vec![interval]))
}

impl Predicate {
    /// Intervals of encoded values that contain an index key of every document satisfying
    /// this predicate, or `None` when an index cannot narrow it (`$ne`, `$nin`, `$exists`,
    /// `$size`, `$elemMatch`, `$not`, comparisons with arrays or MinKey/MaxKey). Sorted,
    /// non-overlapping; empty when nothing can match (`$in: []`, `$gt: null`).
    pub fn index_intervals(&self) -> Option<Vec<Interval>> {
        let mut out = Vec::new();
        match self {
            Predicate::Eq(x) => equality(x, &mut out),
            Predicate::In(xs) => xs.iter().for_each(|x| equality(x, &mut out)),
            // Every document matching $all matches $eq of its first operand.
            Predicate::All(xs) => equality(xs.first()?, &mut out),
            Predicate::Gt(x) => return range(x, true, false),
            Predicate::Gte(x) => return range(x, true, true),
            Predicate::Lt(x) => return range(x, false, false),
            Predicate::Lte(x) => return range(x, false, true),
            _ => return None,
        }
        Some(normalize(out))
    }
}

impl Filter {
    /// Index bounds on `path` from this filter's conjuncts ([`Filter::conjuncts`]): a superset
    /// of the keys of every matching document, or `None` when no conjunct on `path` is
    /// indexable. When `multikey` is false (no indexed document has an array on `path`) the
    /// conjuncts' intervals are intersected (`{$gte: 1, $lt: 5}` gives `[1, 5)`); when it is
    /// true intersection would be wrong, and the first equality or `$in` conjunct is used,
    /// else the first indexable one. For an `Or`, call this on each branch.
    pub fn index_bounds(&self, path: &str, multikey: bool) -> Option<Vec<Interval>> {
        let mut sets = self
            .predicates_on(path)
            .filter_map(|p| Some((p, p.index_intervals()?)));
        if multikey {
            let all: Vec<_> = sets.collect();
            let pick = all
                .iter()
                .position(|(p, _)| matches!(p, Predicate::Eq(_) | Predicate::In(_)))
                .unwrap_or(0);
            return all.into_iter().nth(pick).map(|(_, set)| set);
        }
        let (_, mut acc) = sets.next()?;
        for (_, set) in sets {
            let mut next = Vec::new();
            for a in &acc {
                next.extend(set.iter().filter_map(|b| a.intersect(b)));
            }
            acc = normalize(next);
        }
        Some(acc)
    }

    /// Whether a single-valued index on `path` answers this filter exactly: every conjunct is a
    /// predicate on `path` whose intervals hold the keys of the matching documents and of no
    /// others (`$eq`/`$in` of scalars, ranges on scalars), so that, when no indexed document
    /// holds an array on `path`, the index's keys in [`Filter::index_bounds`] are exactly the
    /// matches and need no check against the documents. Conservative: `false` whenever unsure.
    pub fn is_exact_on(&self, path: &str) -> bool {
        let conjuncts = self.conjuncts();
        !conjuncts.is_empty()
            && !names_a_position(path)
            && conjuncts.iter().all(|c| match c {
                Filter::Field { path: p, pred } if p.as_str() == path => pred.is_exact(),
                _ => false,
            })
    }
}

/// Whether dot path `path` has a component of digits (`a.0`): an array
/// position, which reads differently from how an index on the path stores
/// its values. Conservative: any all-digit component counts.
pub(crate) fn names_a_position(path: &str) -> bool {
    path.split('.').any(|c| c.bytes().all(|b| b.is_ascii_digit()))
}

/// Operands whose index encoding is matched exactly by `$eq` and by ranges within their type
/// bracket (no arrays, documents, regexes, NaN, MinKey/MaxKey).
fn exact_operand(x: &RawBson, allow_null: bool) -> bool {
    match x {
        RawBson::Double(f) => !f.is_nan(),
        RawBson::Int32(_)
        | RawBson::Int64(_)
        | RawBson::String(_)
        | RawBson::Boolean(_)
        | RawBson::ObjectId(_)
        | RawBson::DateTime(_) => true,
        RawBson::Null => allow_null,
        _ => false,
    }
}

impl Predicate {
    /// Whether [`Predicate::index_intervals`] holds exactly the keys of the values this
    /// predicate matches (a single-valued path assumed).
    fn is_exact(&self) -> bool {
        match self {
            // A missing path is indexed as null and matches `null`.
            Predicate::Eq(x) => exact_operand(x, true),
            Predicate::In(xs) => xs.iter().all(|x| exact_operand(x, true)),
            Predicate::Gt(x) | Predicate::Gte(x) | Predicate::Lt(x) | Predicate::Lte(x) => {
                exact_operand(x, false)
            }
            _ => false,
        }
    }
}
