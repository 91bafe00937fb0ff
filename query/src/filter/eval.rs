//! Evaluation on borrowed raw documents: no materialisation, no allocation.
//!
//! Values are found with [`visit_path`], which stops as soon as the answer is known. A
//! predicate is first defined on one value ([`Predicate::matches_value`], no array expansion:
//! what `$elemMatch` applies to elements) and then lifted to a path: "some value at the path
//! satisfies it", except for the negations (`$ne`, `$nin`, `$not`), which negate the lifted
//! positive form, and `$all`, which lifts each operand separately.

use std::cmp::Ordering;
use std::ops::ControlFlow;

use bson::{RawArray, RawBson, RawBsonRef, RawDocument};
use slate_core::value::{bracket, compare, visit_path, FieldPath, LeafArrays, PathValue, TypeBracket};

use super::{ElemMatch, Filter, Predicate};

impl Filter {
    /// Whether `doc` matches, with MongoDB's semantics (see [`Predicate`] and `docs/query.md`).
    pub fn matches(&self, doc: &RawDocument) -> bool {
        match self {
            Filter::And(children) => children.iter().all(|c| c.matches(doc)),
            Filter::Or(children) => children.iter().any(|c| c.matches(doc)),
            Filter::Nor(children) => !children.iter().any(|c| c.matches(doc)),
            Filter::Field { path, pred } => pred.matches_path(doc, path),
        }
    }
}

impl Predicate {
    /// Whether the predicate holds for the values at `path` in `doc`.
    pub fn matches_path(&self, doc: &RawDocument, path: &FieldPath) -> bool {
        let any = |leaf, test: &dyn Fn(PathValue<'_>) -> bool| {
            visit_path(doc, path, leaf, &mut |v| {
                if test(v) {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            })
            .is_break()
        };
        match self {
            Predicate::Ne(x) => !any(LeafArrays::Expand, &|v| equals(v, x)),
            Predicate::Nin(xs) => !any(LeafArrays::Expand, &|v| in_list(v, xs)),
            Predicate::All(xs) => {
                !xs.is_empty() && xs.iter().all(|x| any(LeafArrays::Expand, &|v| equals(v, x)))
            }
            Predicate::Not(preds) => !preds.iter().all(|p| p.matches_path(doc, path)),
            Predicate::Exists(want) => any(LeafArrays::Expand, &|v| v != PathValue::Missing) == *want,
            Predicate::Size(_) | Predicate::ElemMatch(_) => {
                any(LeafArrays::Whole, &|v| self.matches_value(v))
            }
            Predicate::Eq(_)
            | Predicate::Gt(_)
            | Predicate::Gte(_)
            | Predicate::Lt(_)
            | Predicate::Lte(_)
            | Predicate::In(_) => any(LeafArrays::Expand, &|v| self.matches_value(v)),
        }
    }

    /// Whether the predicate holds for this one value, taken as is (an array is not expanded).
    /// `$elemMatch`'s value form applies its predicates to each element this way.
    pub fn matches_value(&self, v: PathValue<'_>) -> bool {
        match self {
            Predicate::Eq(x) => equals(v, x),
            Predicate::Ne(x) => !equals(v, x),
            Predicate::Gt(x) => compares(v, x, |o| o.is_gt(), false),
            Predicate::Gte(x) => compares(v, x, |o| o.is_ge(), true),
            Predicate::Lt(x) => compares(v, x, |o| o.is_lt(), false),
            Predicate::Lte(x) => compares(v, x, |o| o.is_le(), true),
            Predicate::In(xs) => in_list(v, xs),
            Predicate::Nin(xs) => !in_list(v, xs),
            Predicate::All(xs) => !xs.is_empty() && xs.iter().all(|x| equals(v, x)),
            Predicate::Size(n) => match v {
                PathValue::Value(RawBsonRef::Array(a)) => elements(a).count() as u64 == *n,
                _ => false,
            },
            Predicate::Exists(want) => (v != PathValue::Missing) == *want,
            Predicate::ElemMatch(m) => match v {
                PathValue::Value(RawBsonRef::Array(a)) => elements(a).any(|e| m.matches_element(e)),
                _ => false,
            },
            Predicate::Not(preds) => !preds.iter().all(|p| p.matches_value(v)),
        }
    }
}

impl ElemMatch {
    fn matches_element(&self, e: RawBsonRef<'_>) -> bool {
        match self {
            ElemMatch::Value(preds) => preds.iter().all(|p| p.matches_value(PathValue::Value(e))),
            ElemMatch::Document(filter) => match e {
                RawBsonRef::Document(d) => filter.matches(d),
                // An array element is searched as the document {"0": .., "1": ..} it is on
                // the wire, as MongoDB does.
                RawBsonRef::Array(a) => {
                    RawDocument::from_bytes(a.as_bytes()).is_ok_and(|d| filter.matches(d))
                }
                _ => false,
            },
        }
    }
}

fn elements(a: &RawArray) -> impl Iterator<Item = RawBsonRef<'_>> {
    a.into_iter().map_while(Result::ok)
}

/// A missing path reads as null.
fn value_or_null(v: PathValue<'_>) -> RawBsonRef<'_> {
    match v {
        PathValue::Missing => RawBsonRef::Null,
        PathValue::Value(v) => v,
    }
}

fn equals(v: PathValue<'_>, x: &RawBson) -> bool {
    compare(value_or_null(v), x.as_raw_bson_ref()) == Ordering::Equal
}

/// `xs` is sorted by `compare`, which is a total order, so membership is a binary search.
fn in_list(v: PathValue<'_>, xs: &[RawBson]) -> bool {
    let v = value_or_null(v);
    xs.binary_search_by(|x| compare(x.as_raw_bson_ref(), v)).is_ok()
}

/// `$gt`-style comparison: only within the operand's type bracket, except that a MinKey or
/// MaxKey operand compares with everything. NaN is only `>=`/`<=` another NaN (`or_equal`).
fn compares(v: PathValue<'_>, x: &RawBson, holds: fn(Ordering) -> bool, or_equal: bool) -> bool {
    let (v, x) = (value_or_null(v), x.as_raw_bson_ref());
    let (bv, bx) = (bracket(v), bracket(x));
    if bv != bx {
        return matches!(bx, TypeBracket::MinKey | TypeBracket::MaxKey) && holds(compare(v, x));
    }
    if bx == TypeBracket::Number && (is_nan(v) || is_nan(x)) {
        return or_equal && is_nan(v) && is_nan(x);
    }
    holds(compare(v, x))
}

fn is_nan(v: RawBsonRef<'_>) -> bool {
    matches!(v, RawBsonRef::Double(f) if f.is_nan())
}
