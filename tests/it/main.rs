//! slate (facade) integration tests: one binary, a module per topic.
//!
//! - `queries`: every query path (scan, index scan, index merge; sort, skip, limit,
//!   projection, count) against a full-scan reference, on both backends.
//! - `writes`: inserts, updates, replaces, deletes, upserts and transactions.
//! - `partitions`: partitioned collections addressed by partition.
//! - `cli`: the `slate` binary on a generated JSONL file.
//! - `server`: `slate serve` and `Client` over loopback against the embedded API.

mod cli;
mod partitions;
mod queries;
mod server;
mod vectors;
mod writes;

use slate::bson::{Bson, Document};
use slate::Db;

/// A database with the temporary directory it lives in (if any) kept alive.
#[derive(Debug)]
pub struct TestDb {
    pub db: Db,
    pub backend: &'static str,
    _dir: Option<tempfile::TempDir>,
}

/// A fresh in-memory database.
pub fn memory() -> TestDb {
    TestDb {
        db: Db::memory(),
        backend: "memory",
        _dir: None,
    }
}

/// A fresh RocksDB database in a temporary directory, commits not fsynced.
pub fn rocks() -> TestDb {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::builder(dir.path()).sync(false).open().expect("open rocksdb");
    TestDb {
        db,
        backend: "rocksdb",
        _dir: Some(dir),
    }
}

/// One fresh database per backend.
pub fn backends() -> [TestDb; 2] {
    [memory(), rocks()]
}

/// The BSON bytes of a document: equality of these is equality of field order, types and
/// values (NaN included, which `Document`'s `==` never equates).
pub fn bytes(doc: &Document) -> Vec<u8> {
    slate::bson::to_vec(doc).expect("serialisable document")
}

/// Whether two document lists are identical, documents and order (by their bytes).
pub fn same_docs(got: &[Document], want: &[Document]) -> bool {
    got.len() == want.len() && got.iter().zip(want).all(|(g, w)| bytes(g) == bytes(w))
}

/// Panics with both lists when they differ (see [`same_docs`]).
#[track_caller]
pub fn assert_same_docs(got: &[Document], want: &[Document], context: &str) {
    assert!(
        same_docs(got, want),
        "{context}\n got ({}): {}\nwant ({}): {}",
        got.len(),
        show(got),
        want.len(),
        show(want)
    );
}

/// Documents as one line of relaxed extended JSON each.
pub fn show(docs: &[Document]) -> String {
    docs.iter()
        .map(|d| format!("\n  {}", Bson::Document(d.clone()).into_relaxed_extjson()))
        .collect()
}
