//! Slate: an embedded vector-plus-document store.
//!
//! Put BSON documents with their embeddings in; ask for documents matching a
//! filter, or for the k nearest documents to a vector among those matching a
//! filter, exactly.
//!
//! ```
//! use slate::{bson::doc, CollectionConfig, Db};
//!
//! # fn main() -> Result<(), slate::Error> {
//! let db = Db::memory();
//! let notes = db.create_collection(CollectionConfig::new("notes").index("status"))?;
//! notes.insert_many([
//!     doc! { "_id": 1, "status": "open", "n": 3 },
//!     doc! { "_id": 2, "status": "done", "n": 5 },
//!     doc! { "_id": 3, "status": "open", "n": 8 },
//! ])?;
//! let open = notes.find(doc! { "status": "open", "n": { "$gt": 4 } }).run()?;
//! assert_eq!(open, vec![doc! { "_id": 3, "status": "open", "n": 8 }]);
//! assert_eq!(notes.count(doc! { "status": "open" })?, 2);
//! # Ok(())
//! # }
//! ```
//!
//! The layers are re-exported: [`core`] (storage, collections), [`vector`]
//! (SIMD distances, the vector cache) and [`query`] (filters, planning).
#![deny(unsafe_code)]

pub mod allocator;
mod client;
mod collection;
mod db;
mod error;
mod find;
mod search;
pub mod server;
mod txn;

pub use bson;
pub use client::{Client, ClientBuilder, RemoteCollection, RemoteFind, RemoteSearch, RemoteSearchBatch};
pub use collection::Collection;
pub use db::{Db, DbBuilder};
pub use error::{Error, Result};
pub use find::Find;
pub use search::Search;
pub use server::{ErrorKind, Server, ServerConfig};
pub use slate_core as core;
pub use slate_core::{CollectionConfig, Metric, VectorField};
pub use slate_query as query;
pub use slate_query::{SearchExplain, SearchHit, Strategy};
pub use slate_vector as vector;
pub use txn::{Transaction, UpdateResult};

/// The README's examples, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
