//! slate-core: Slate's storage layer.
//!
//! - [`store`]: the [`Store`] trait with its two backends, [`MemoryStore`] and
//!   [`RocksStore`], snapshots and the write transaction.
//! - [`value`]: BSON ordering, the order-preserving key encoding, dot paths.
//! - [`Database`]: collections of BSON documents with secondary indexes, vector
//!   fields and partitions, read through [`ReadTxn`] and written through
//!   [`WriteTxn`]. The byte layout is in `docs/format.md`.
#![deny(unsafe_code)]

mod catalog;
mod db;
mod error;
mod index;
pub mod keys;
mod read;
mod readers;
mod stamps;
pub mod store;
pub mod value;
mod vectors;
mod write;

pub use catalog::{validate_collection_name, CollectionConfig, VectorField};
pub use db::Database;
pub use error::{Error, KeyDisplay, Result};
pub use index::check_integrity;
pub use read::{CollectionRead, DocRun, Part, RawDoc, ReadTxn};
pub use slate_vector::Metric;
pub use stamps::{KeyList, Keys as ChangedKeys, MAX_KEYS as MAX_CHANGED_KEYS};
pub use store::{
    begin_write, Batch, Bytes, Direction, Entry, EntryIter, KeyRange, MemoryStore, Op, RocksStore,
    RocksStoreBuilder, Snapshot, Store, Visitor,
};
pub use vectors::{bson_to_vector, f32s_from_le, set_path, vector_to_bson, VectorView};
pub use write::{get_path, StagedReplace, WriteTxn, MAX_DOCUMENT_BYTES};

/// The low-level store transaction (the database one is [`WriteTxn`]).
pub type StoreTxn<'a> = store::WriteTxn<'a>;

/// Strategies shared by the unit tests of several modules.
#[cfg(test)]
pub(crate) mod testing {
    use proptest::prelude::*;

    /// Two keys of at most `max_len` bytes, the second sharing a prefix of
    /// the first as often as not, both mostly zeros and ones, so that they
    /// often agree for long stretches.
    pub(crate) fn key_pair(max_len: usize) -> impl Strategy<Value = (Vec<u8>, Vec<u8>)> {
        let bytes = || prop::collection::vec(prop_oneof![Just(0u8), Just(1u8), any::<u8>()], 0..=max_len);
        (bytes(), bytes(), 0..=max_len).prop_map(move |(a, tail, cut)| {
            let b = a.iter().take(cut).chain(&tail).copied().take(max_len).collect();
            (a, b)
        })
    }
}
