//! The executor: runs a [`Plan`](crate::plan::Plan) on one snapshot.

mod cursor;
mod sort;

pub use cursor::{decode_document, decode_raw, matching_keys, source_keys, Cursor, Decode, ExecStats};
pub use sort::{compare_keys, sort_key, Keyed, SortField, Sorter};
