//! `Transaction`: several writes committed atomically.

use bson::{Bson, Document};
use slate_core::{Part, WriteTxn};
use slate_query::{matching_keys, Filter, Update};

use crate::Result;

/// What an update or replace did.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct UpdateResult {
    /// Documents the filter matched (at most one for the `_one` forms).
    pub matched: u64,
    /// Documents whose bytes changed.
    pub modified: u64,
    /// The `_id` of the document an upsert inserted.
    pub upserted_id: Option<Bson>,
}

/// A write transaction over the whole database. Reads inside it see its own
/// writes (vector searches see the last commit). Commit with
/// [`Transaction::commit`]; dropping it rolls everything back.
#[derive(Debug)]
pub struct Transaction<'db> {
    inner: WriteTxn<'db>,
}

fn parse_filter(filter: &Document) -> Result<Option<Filter>> {
    if filter.is_empty() {
        Ok(None)
    } else {
        Ok(Some(Filter::parse(filter)?))
    }
}

/// The document a replacement upsert inserts: without an `_id` of its own it
/// takes the filter's `_id` equality, if any (as in MongoDB).
fn with_filter_id(filter: &Document, doc: Document) -> Document {
    if doc.contains_key("_id") {
        return doc;
    }
    match slate_query::equality_on(filter, "_id") {
        Some(id) => {
            let mut out = Document::new();
            out.insert("_id", id.clone());
            out.extend(doc);
            out
        }
        None => doc,
    }
}

impl<'db> Transaction<'db> {
    pub(crate) fn new(db: &'db slate_core::Database) -> Result<Self> {
        Ok(Self {
            inner: db.begin_write()?,
        })
    }

    /// The core transaction underneath.
    pub fn inner(&mut self) -> &mut WriteTxn<'db> {
        &mut self.inner
    }

    /// Creates a collection as this transaction's first write: it exists,
    /// with what the transaction writes to it, once the transaction
    /// commits, and not at all otherwise. Fails with `CollectionExists` if
    /// the name is taken.
    pub fn create_collection(&mut self, config: slate_core::CollectionConfig) -> Result<()> {
        Ok(self.inner.create_collection(config)?)
    }

    /// Inserts a document; returns its `_id`.
    pub fn insert(&mut self, collection: &str, doc: Document) -> Result<Bson> {
        Ok(self.inner.insert(collection, doc)?)
    }

    /// Inserts several documents, in order; returns their `_id`s. All or
    /// nothing: a bad document or a taken (or repeated) `_id` fails the call
    /// having written none of them.
    pub fn insert_many(
        &mut self,
        collection: &str,
        docs: impl IntoIterator<Item = Document>,
    ) -> Result<Vec<Bson>> {
        Ok(self
            .inner
            .insert_many_within(collection, None, docs.into_iter().collect())?)
    }

    /// The document with `_id` `id` in partition `part`.
    pub fn get(&self, collection: &str, part: &Part, id: &Bson) -> Result<Option<Document>> {
        Ok(self.inner.get(collection, part, id)?)
    }

    /// Keys of the documents matching `filter` in `parts`, at most `limit`.
    fn matches(
        &self,
        collection: &str,
        parts: &[Part],
        filter: &Document,
        limit: Option<usize>,
    ) -> Result<Vec<Vec<u8>>> {
        let filter = parse_filter(filter)?;
        let read = self.inner.collection(collection)?;
        Ok(matching_keys(&read, parts, filter.as_ref(), limit)?)
    }

    /// Applies `update` to the documents matching `filter` (one when
    /// `many` is false); with `upsert`, inserts a document built from the
    /// filter's equality fields and the update when nothing matches.
    pub fn update(
        &mut self,
        collection: &str,
        parts: &[Part],
        filter: &Document,
        update: &Document,
        many: bool,
        upsert: bool,
    ) -> Result<UpdateResult> {
        let update = Update::parse(update)?;
        let keys = self.matches(collection, parts, filter, if many { None } else { Some(1) })?;
        let mut result = UpdateResult {
            matched: keys.len() as u64,
            ..Default::default()
        };
        // Every document updated and checked before any is written: one that
        // fails (a path conflict, an overflow, a bad vector) leaves the
        // transaction as it was.
        let mut staged = Vec::new();
        let mut stage_all = || -> Result<()> {
            for key in &keys {
                let read = self.inner.collection(collection)?;
                let Some(raw) = read.get_keys(&[key.as_slice()])?.into_iter().flatten().next() else {
                    continue;
                };
                let old = read.materialize_full(&raw)?;
                drop(raw);
                drop(read);
                let new = update.apply(&old)?;
                if !same_bits(&new, &old) {
                    staged.extend(self.inner.stage_replace(collection, key, new)?);
                }
            }
            Ok(())
        };
        if let Err(e) = stage_all() {
            // The transaction goes on without them (and their bytes).
            self.inner.discard_staged(staged);
            return Err(e);
        }
        result.modified = self.inner.write_staged(staged)?;
        if keys.is_empty() && upsert {
            let seed = slate_query::equality_seed(filter)?;
            let doc = update.apply(&seed)?;
            result.upserted_id = Some(self.inner.insert_within(collection, Some(parts), doc)?);
        }
        Ok(result)
    }

    /// Replaces the first document matching `filter` by `doc`; with `upsert`,
    /// inserts `doc` when nothing matches (with the filter's `_id` equality, if
    /// any, when `doc` has no `_id`).
    pub fn replace_one(
        &mut self,
        collection: &str,
        parts: &[Part],
        filter: &Document,
        doc: Document,
        upsert: bool,
    ) -> Result<UpdateResult> {
        let keys = self.matches(collection, parts, filter, Some(1))?;
        let mut result = UpdateResult {
            matched: keys.len() as u64,
            ..Default::default()
        };
        let Some(key) = keys.first() else {
            if upsert {
                let doc = with_filter_id(filter, doc);
                result.upserted_id = Some(self.inner.insert_within(collection, Some(parts), doc)?);
            }
            return Ok(result);
        };
        if self.inner.replace_key(collection, key, doc)? {
            result.modified = 1;
        }
        Ok(result)
    }

    /// Deletes the documents matching `filter` (the first one unless `many`);
    /// returns how many were deleted.
    pub fn delete(&mut self, collection: &str, parts: &[Part], filter: &Document, many: bool) -> Result<u64> {
        let keys = self.matches(collection, parts, filter, if many { None } else { Some(1) })?;
        // Every match read before any is deleted: a failed read deletes none.
        Ok(self.inner.delete_keys(collection, &keys)?)
    }

    /// Creates an index over the existing documents.
    pub fn create_index(&mut self, collection: &str, field: &str) -> Result<()> {
        Ok(self.inner.create_index(collection, field)?)
    }

    /// Drops an index.
    pub fn drop_index(&mut self, collection: &str, field: &str) -> Result<()> {
        Ok(self.inner.drop_index(collection, field)?)
    }

    /// Commits every write atomically; returns the commit version.
    pub fn commit(self) -> Result<u64> {
        Ok(self.inner.commit()?)
    }

    /// Discards every write (the same as dropping the transaction).
    pub fn rollback(self) {}
}

/// Whether two documents are the same bytes once stored: their fields in
/// the same order, doubles compared bit for bit. (`Document`'s `==` takes
/// -0.0 for 0.0, so setting one over the other wrote nothing and lost the
/// sign, and a NaN anywhere made every update a modification.)
fn same_bits(a: &Document, b: &Document) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|((ka, va), (kb, vb))| ka == kb && same_value(va, vb))
}

fn same_value(a: &Bson, b: &Bson) -> bool {
    match (a, b) {
        (Bson::Double(x), Bson::Double(y)) => x.to_bits() == y.to_bits(),
        (Bson::Document(x), Bson::Document(y)) => same_bits(x, y),
        (Bson::Array(x), Bson::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_value(x, y))
        }
        (Bson::JavaScriptCodeWithScope(x), Bson::JavaScriptCodeWithScope(y)) => {
            x.code == y.code && same_bits(&x.scope, &y.scope)
        }
        _ => a == b,
    }
}
