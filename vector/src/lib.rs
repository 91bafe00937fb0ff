//! slate-vector: Slate's vector layer — SIMD distances, the MVCC f32 row
//! cache, bounded top-k selection and exact parallel scans.
//!
//! A [`VectorCache`] holds one vector field's rows. Writers stage upserts
//! and deletes in a [`Writer`] and commit them at a version; readers take a
//! [`CacheView`] at a version and search it without holding locks:
//!
//! - [`CacheView::search`]: full scan;
//! - [`CacheView::search_lazy`]: scan, checking a filter only for rows whose
//!   distance would enter the top-k;
//! - [`CacheView::search_mask`]: scan restricted to a [`RowMask`];
//! - [`CacheView::search_rows`]: distances for given rows only;
//! - [`CacheView::search_batch`]: many queries in one blocked pass.
//!
//! All are exact and deterministic: ties in distance break on the id bytes.
//!
//! ```
//! use slate_vector::{Metric, VectorCache};
//!
//! let cache = VectorCache::new(2, Metric::L2)?;
//! let mut w = cache.writer();
//! w.upsert(b"a", &[0.0, 0.0])?;
//! w.upsert(b"b", &[1.0, 1.0])?;
//! w.commit(1)?;
//!
//! let mut w = cache.writer();
//! w.delete(b"a");
//! w.commit(2)?;
//!
//! let old = cache.view(1)?;
//! let hits = old.search(&[0.1, 0.1], 1, 1)?;
//! assert_eq!(&*hits[0].id, b"a");
//! let new = cache.view(2)?;
//! assert_eq!(&*new.search(&[0.1, 0.1], 1, 1)?[0].id, b"b");
//! # Ok::<(), slate_vector::Error>(())
//! ```

mod arena;
mod batch;
mod blocked;
mod cache;
mod code;
mod error;
mod index;
mod memo;
mod metric;
mod pool;
mod row;
pub mod scalar;
mod search;
mod tags;
mod topk;
mod view;
mod writer;

pub use batch::check_batch;
pub use cache::{CacheConfig, CompactionReport, VectorCache, MAX_DIM};
pub use error::{Error, Result, VectorError};
pub use memo::{Memo, MEMO_BYTES, MEMO_ENTRIES};
pub use metric::{
    check_vector, check_vector_for, component_limit, distance, Metric, MIN_COSINE_SQUARED_NORM,
};
pub use pool::{effective as effective_threads, install as install_threads};
pub use row::{RowId, RowMask};
pub use search::{Hit, RowPredicate, SearchStats, PRUNE_MIN_ROWS, TASK_ROWS as SCAN_TASK_ROWS};
pub use tags::{RowTags, TagRange};
pub use topk::{Candidate, TopK};
pub use view::CacheView;
pub use writer::Writer;
