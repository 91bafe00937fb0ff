//! The filter language: MongoDB-style query documents parsed into a typed tree, evaluated on
//! borrowed raw documents.
//!
//! ```
//! use bson::{doc, RawDocumentBuf};
//! use slate_query::Filter;
//!
//! let filter = Filter::parse(&doc! { "tags": "x", "n": { "$gte": 2, "$lt": 5 } })?;
//! let hit = RawDocumentBuf::from_document(&doc! { "tags": ["x", "y"], "n": 3.5 })?;
//! let miss = RawDocumentBuf::from_document(&doc! { "tags": ["y"], "n": 3 })?;
//! assert!(filter.matches(&hit));
//! assert!(!filter.matches(&miss));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Shape of the tree
//! Parsing normalises the query so that a planner can walk it:
//! - the keys of a query document, and the operators of one field's operator document, become
//!   the children of one [`Filter::And`] (nested `$and`s are flattened into it); a query with a
//!   single condition is that condition; `{}` is `And([])`, which matches everything;
//! - every field condition is a [`Filter::Field`]: one [`FieldPath`] and one [`Predicate`]
//!   (`{a: {$gt: 1, $lt: 5}}` is `And([Field(a, Gt 1), Field(a, Lt 5)])`);
//! - `$in` and `$nin` lists are sorted in [`compare`](slate_core::value::compare) order and
//!   deduplicated.
//!
//! [`Filter::conjuncts`], [`Predicate::index_intervals`] and [`Filter::index_bounds`] give the
//! indexable parts (equality, ranges, `$in`) as intervals of encoded values; see `bounds`.
//! Semantics and every difference from MongoDB are listed in `docs/query.md`.

mod bounds;
mod error;
mod eval;
mod parse;
pub(crate) use parse::is_operator_document;
#[cfg(test)]
mod tests;

pub(crate) use bounds::names_a_position;
pub use bounds::Interval;
use bson::RawBson;
pub use error::FilterError;
pub use slate_core::value::FieldPath;

/// A parsed query. Evaluate with [`Filter::matches`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Filter {
    /// Every child matches; `And([])` matches every document.
    And(Vec<Filter>),
    /// At least one child matches (`$or`, never empty).
    Or(Vec<Filter>),
    /// No child matches (`$nor`, never empty).
    Nor(Vec<Filter>),
    /// A condition on the values at one dot path.
    Field {
        /// Where the values are.
        path: FieldPath,
        /// What they must satisfy.
        pred: Predicate,
    },
}

/// A condition on the values at a path.
///
/// Unless noted, a predicate holds when *any* value at the path satisfies it, where the values
/// are found with array expansion (`LeafArrays::Expand`: a leaf array contributes each element
/// and itself) and a missing path counts as `null`. Comparison operands only match values of
/// their own type bracket (numbers across int/long/double), except `MinKey`/`MaxKey` operands.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Predicate {
    /// `$eq` (and a plain value): some value equals the operand (a document operand is exact
    /// document equality, field order included; `null` also matches a missing path).
    Eq(RawBson),
    /// `$ne`: no value equals the operand (the negation of `Eq`).
    Ne(RawBson),
    /// `$gt`.
    Gt(RawBson),
    /// `$gte`.
    Gte(RawBson),
    /// `$lt`.
    Lt(RawBson),
    /// `$lte`.
    Lte(RawBson),
    /// `$in`: some value equals some operand. Sorted, deduplicated.
    In(Vec<RawBson>),
    /// `$nin`: the negation of `In`. Sorted, deduplicated.
    Nin(Vec<RawBson>),
    /// `$all`: for every operand, some value equals it. `$all: []` matches nothing.
    All(Vec<RawBson>),
    /// `$size`: some value is an array of exactly this length (leaf arrays are not expanded).
    Size(u64),
    /// `$exists`: the path has (`true`) or has no (`false`) value.
    Exists(bool),
    /// `$elemMatch`: some value is an array with an element that matches (leaf arrays are not
    /// expanded).
    ElemMatch(ElemMatch),
    /// `$not: {ops}`: not all of `ops` hold at this path.
    Not(Vec<Predicate>),
}

/// The two forms of `$elemMatch`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ElemMatch {
    /// `{$elemMatch: {$gte: 1, $lt: 5}}`: one element satisfies every predicate, each applied
    /// to the element itself (no further array expansion).
    Value(Vec<Predicate>),
    /// `{$elemMatch: {b: 1, c: {$gt: 2}}}`: one element is a document (or array) that matches
    /// the query.
    Document(Box<Filter>),
}

impl Filter {
    /// The children of a top-level `And`, or this filter alone: the conjuncts a planner may
    /// serve from an index, all of which must hold.
    pub fn conjuncts(&self) -> &[Filter] {
        match self {
            Filter::And(children) => children,
            other => std::slice::from_ref(other),
        }
    }

    /// The field predicates among [`Filter::conjuncts`] on exactly `path`.
    pub fn predicates_on<'a>(&'a self, path: &'a str) -> impl Iterator<Item = &'a Predicate> + 'a {
        self.conjuncts().iter().filter_map(move |c| match c {
            Filter::Field { path: p, pred } if p.as_str() == path => Some(pred),
            _ => None,
        })
    }
}
