//! slate-query: Slate's query layer.
//!
//! - `filter`: the filter language ([`Filter::parse`], [`Filter::matches`]) and the index
//!   bounds a planner reads from it ([`Filter::index_bounds`], [`Interval`]).
//! - `plan`: the plan tree and its choice from cardinality estimates ([`plan_find`]).
//! - `exec`: the executor ([`Cursor`]), sort keys and the bounded top-n.
//! - `search`: vector top-k, plain and under filters ([`search`], [`Strategy`]).
//! - `update`: update documents (`$set`, `$unset`, `$inc`, `$push`, `$pull`).
#![deny(unsafe_code)]

mod error;
pub mod exec;
mod filter;
pub mod plan;
mod projection;
mod search;
mod update;

pub use error::{Error, Result};
pub use exec::{decode_document, decode_raw, matching_keys, Cursor, Decode, ExecStats, SortField};
pub use filter::{ElemMatch, FieldPath, Filter, FilterError, Interval, Predicate};
pub use plan::{plan_find, FindSpec, MergeOp, Plan, Source};
pub use projection::{check_projection, check_sort, MAX_PROJECTION_PATHS, MAX_SORT_FIELDS};
pub use search::{
    search, search_batch, BatchHits, CostModel, HitBytes, SearchExplain, SearchHit, SearchSpec, Strategy,
};
pub use update::{equality_on, equality_seed, Update, UpdateError};
