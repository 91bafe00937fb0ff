//! slate-query: Slate's query layer.
//!
//! - `filter`: the filter language ([`Filter::parse`], [`Filter::matches`]) and the index
//!   bounds a planner reads from it ([`Filter::index_bounds`], [`Interval`]).
#![deny(unsafe_code)]

mod filter;

pub use filter::{ElemMatch, FieldPath, Filter, FilterError, Interval, Predicate};
