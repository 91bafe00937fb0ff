//! `Collection`: the handle for one collection's documents.

use bson::{Bson, Document};
use serde::de::DeserializeOwned;
use slate_core::value::Materializer;
use slate_core::{CollectionConfig, CollectionRead, Part, RawDoc};

use crate::{Db, Find, Result, UpdateResult};

/// A handle on one collection. In a partitioned collection, reads and
/// filter-based writes address the partitions chosen with
/// [`Collection::partition`] / [`Collection::partitions`].
#[derive(Debug, Clone)]
pub struct Collection {
    pub(crate) db: Db,
    pub(crate) name: String,
    pub(crate) partitions: Option<Vec<Bson>>,
}

/// The partitions a handle reads: the one of a collection that is not
/// partitioned, without a `Vec` to allocate on every read, else those named.
pub(crate) enum Parts {
    One(Part),
    Many(Vec<Part>),
}

impl std::ops::Deref for Parts {
    type Target = [Part];

    fn deref(&self) -> &[Part] {
        match self {
            Parts::One(part) => std::slice::from_ref(part),
            Parts::Many(parts) => parts,
        }
    }
}

/// Ids a bounded `get_many` reads at a time.
const GET_MANY_CHUNK: usize = 64;

impl Collection {
    pub(crate) fn new(db: Db, name: String) -> Self {
        Self {
            db,
            name,
            partitions: None,
        }
    }

    /// How many partition values this handle names (1 when it names none).
    pub(crate) fn partition_count(&self) -> usize {
        self.partitions.as_ref().map_or(1, |p| p.len().max(1))
    }

    /// The collection's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The collection's configuration.
    pub fn config(&self) -> Result<CollectionConfig> {
        Ok(self.db.inner.collection_config(&self.name)?)
    }

    /// This collection scoped to one partition (tenant).
    pub fn partition(&self, value: impl Into<Bson>) -> Collection {
        self.partitions(vec![value.into()])
    }

    /// This collection scoped to several partitions.
    pub fn partitions(&self, values: Vec<Bson>) -> Collection {
        Collection {
            db: self.db.clone(),
            name: self.name.clone(),
            partitions: Some(values),
        }
    }

    /// The partitions this handle addresses, encoded, each once (in the
    /// order first named): a partition named twice, or as `7` and `7i64`,
    /// must not be read or written twice.
    pub(crate) fn parts(&self, read: &CollectionRead<'_>) -> Result<Parts> {
        match &self.partitions {
            None => Ok(Parts::One(read.part(None)?)),
            Some(values) => {
                // In the order named, each once (a set: a request may name
                // thousands).
                let mut parts: Vec<Part> = Vec::with_capacity(values.len());
                let mut seen = std::collections::HashSet::with_capacity(values.len());
                for v in values {
                    let part = read.part(Some(v))?;
                    if seen.insert(part.clone()) {
                        parts.push(part);
                    }
                }
                Ok(Parts::Many(parts))
            }
        }
    }

    fn write<T>(&self, f: impl FnOnce(&mut crate::Transaction<'_>, &[Part]) -> Result<T>) -> Result<T> {
        let mut txn = self.db.begin()?;
        let parts = {
            let read = txn.inner().collection(&self.name)?;
            self.parts(&read)?
        };
        let out = f(&mut txn, &parts)?;
        txn.commit()?;
        Ok(out)
    }

    /// The partition key, on a handle scoped to partitions (`None` on an
    /// unscoped handle, without reading the configuration).
    /// A handle scoped to partitions of an unpartitioned collection is
    /// refused, as its reads are (but `[]`, which reads nothing).
    fn scoped_key(&self) -> Result<Option<String>> {
        match &self.partitions {
            Some(_) => match self.config()?.partition_key {
                Some(key) => Ok(Some(key)),
                None => Err(slate_core::Error::InvalidPartition {
                    reason: format!("collection {:?} is not partitioned", self.name),
                }
                .into()),
            },
            None => Ok(None),
        }
    }

    /// On a handle scoped to partitions: a document without the partition key
    /// gets the handle's partition when it names one (a dotted key through
    /// subdocuments, created where missing), and is refused otherwise (or
    /// when a value other than a document lies on a dotted key's way). Whether a key the document has
    /// lies in the handle's partitions is checked where it is inserted
    /// (`WriteTxn::insert_within`, comparing partitions as keys compare).
    fn scoped(&self, mut doc: Document, key: Option<&str>) -> Result<Document> {
        let (Some(values), Some(key)) = (&self.partitions, key) else {
            return Ok(doc);
        };
        if slate_core::get_path(&doc, key).is_some() {
            return Ok(doc);
        }
        // Each proper prefix of a dotted key (`org` of `org.id`) must be a
        // subdocument or absent: filling in must not overwrite a value.
        let clear_way = key.match_indices('.').all(|(at, _)| {
            matches!(
                slate_core::get_path(&doc, &key[..at]),
                None | Some(Bson::Document(_))
            )
        });
        match values.as_slice() {
            [value] if clear_way => {
                slate_core::set_path(&mut doc, key, value.clone());
                Ok(doc)
            }
            _ => Err(slate_core::Error::InvalidPartition {
                reason: format!(
                    "this handle of {:?} addresses partitions {values:?}; the document has no {key:?}",
                    self.name
                ),
            }
            .into()),
        }
    }

    /// Inserts one document; returns its `_id` (generated when absent).
    pub fn insert_one(&self, doc: Document) -> Result<Bson> {
        self.insert_many([doc])
            .map(|mut ids| ids.pop().unwrap_or(Bson::Null))
    }

    /// Inserts documents in one commit; if any fails (a duplicate `_id`, a bad
    /// vector, a document outside the handle's partitions), none is written.
    pub fn insert_many(&self, docs: impl IntoIterator<Item = Document>) -> Result<Vec<Bson>> {
        let Some(key) = self.scoped_key()? else {
            return self.db.transaction(|t| t.insert_many(&self.name, docs));
        };
        self.write(|t, parts| {
            let docs = docs
                .into_iter()
                .map(|d| self.scoped(d, Some(&key)))
                .collect::<Result<Vec<_>>>()?;
            Ok(t.inner().insert_many_within(&self.name, Some(parts), docs)?)
        })
    }

    /// The document with `_id` `id` (vector fields included).
    pub fn get(&self, id: impl Into<Bson>) -> Result<Option<Document>> {
        self.get_with(id.into(), full_document)
    }

    /// [`get`](Self::get), deserialized into `T` (any serde type) with no
    /// `Document` in between, as [`Find::run_as`] does. A stored document
    /// that does not fit `T` is [`slate_query::Error::Decode`], naming its
    /// `_id`.
    pub fn get_as<T: DeserializeOwned>(&self, id: impl Into<Bson>) -> Result<Option<T>> {
        self.get_with(id.into(), decode_full::<T>)
    }

    /// [`get_many`](Self::get_many), each document deserialized into `T`
    /// as [`get_as`](Self::get_as) does.
    pub fn get_many_as<T: DeserializeOwned>(&self, ids: &[Bson]) -> Result<Vec<Option<T>>> {
        self.get_many_with(ids, decode_full::<T>)
    }

    /// The document with `_id` `id`, made by `decode`.
    fn get_with<T>(
        &self,
        id: Bson,
        decode: impl FnOnce(&CollectionRead<'_>, &mut Materializer, &RawDoc<'_>) -> Result<T>,
    ) -> Result<Option<T>> {
        let txn = self.db.inner.read_documents();
        let read = txn.collection(&self.name)?;
        for part in self.parts(&read)?.iter() {
            if let Some(raw) = read.get_by_id(part, &id)? {
                return Materializer::with_thread_local(|m| decode(&read, m, &raw)).map(Some);
            }
        }
        Ok(None)
    }

    /// The documents with the given ids, in order (`None` where absent), from
    /// one snapshot with one batched read.
    pub fn get_many(&self, ids: &[Bson]) -> Result<Vec<Option<Document>>> {
        self.get_many_with(ids, full_document)
    }

    /// [`get_many`](Self::get_many), or `None` once the documents read
    /// (their stored bytes and vectors, added up a chunk of ids at a time)
    /// pass `max_bytes`: the server's bound on an answer, kept before the
    /// documents are built rather than after.
    pub(crate) fn get_many_within(
        &self,
        ids: &[Bson],
        max_bytes: usize,
    ) -> Result<Option<Vec<Option<Document>>>> {
        self.get_many_bounded(ids, Some(max_bytes), full_document)
    }

    fn get_many_with<T>(
        &self,
        ids: &[Bson],
        decode: impl FnMut(&CollectionRead<'_>, &mut Materializer, &RawDoc<'_>) -> Result<T>,
    ) -> Result<Vec<Option<T>>> {
        Ok(self
            .get_many_bounded(ids, None, decode)?
            .expect("no bound, no refusal"))
    }

    fn get_many_bounded<T>(
        &self,
        ids: &[Bson],
        max_bytes: Option<usize>,
        mut decode: impl FnMut(&CollectionRead<'_>, &mut Materializer, &RawDoc<'_>) -> Result<T>,
    ) -> Result<Option<Vec<Option<T>>>> {
        let txn = self.db.inner.read_documents();
        let read = txn.collection(&self.name)?;
        let parts = self.parts(&read)?;
        // Every key in one buffer: (start, end) of each in `bytes`.
        let mut bytes = Vec::with_capacity(ids.len() * parts.len() * 16);
        let mut spans = Vec::with_capacity(ids.len() * parts.len());
        let prefixes: Vec<Vec<u8>> = parts
            .iter()
            .map(|p| slate_core::keys::doc_prefix(p.as_bytes()))
            .collect();
        let bad_id = |e: slate_core::value::ValueError| slate_core::Error::InvalidId {
            collection: self.name.clone(),
            reason: e.to_string(),
        };
        for id in ids {
            match prefixes.as_slice() {
                // Unpartitioned: the id encoded straight into the key buffer.
                [prefix] => {
                    let start = bytes.len();
                    bytes.extend_from_slice(prefix);
                    slate_core::value::encode_id_into(id, &mut bytes).map_err(&bad_id)?;
                    spans.push((start, bytes.len()));
                }
                _ => {
                    let enc = slate_core::value::encode_id(id).map_err(&bad_id)?;
                    for prefix in &prefixes {
                        let start = bytes.len();
                        bytes.extend_from_slice(prefix);
                        bytes.extend_from_slice(&enc);
                        spans.push((start, bytes.len()));
                    }
                }
            }
        }
        if parts.is_empty() {
            // No partition addressed: each (valid) id is absent.
            return Ok(Some(ids.iter().map(|_| None).collect()));
        }
        let refs: Vec<&[u8]> = spans.iter().map(|&(s, e)| &bytes[s..e]).collect();
        // Without a bound, one batched read; with one, a chunk at a time,
        // each chunk's documents added up before they are built.
        let chunk_ids = if max_bytes.is_some() {
            GET_MANY_CHUNK
        } else {
            ids.len().max(1)
        };
        let vector_bytes: usize = read.config().vectors.iter().map(|vf| vf.dim * 9).sum();
        let mut total = 0usize;
        Materializer::with_thread_local(|mat| -> Result<Option<Vec<Option<T>>>> {
            let mut out = Vec::with_capacity(ids.len());
            for keys in refs.chunks(chunk_ids * parts.len()) {
                let found = read.get_keys(keys)?;
                if let Some(max) = max_bytes {
                    // What is returned: each id's document in the first
                    // partition holding it, not the copies it shadows.
                    total += found
                        .chunks(parts.len())
                        .filter_map(|per_id| per_id.iter().flatten().next())
                        .map(|raw| raw.bytes.len() + vector_bytes)
                        .sum::<usize>();
                    if total > max {
                        return Ok(None);
                    }
                }
                for per_id in found.chunks(parts.len()) {
                    let doc = match per_id.iter().flatten().next() {
                        Some(raw) => Some(decode(&read, mat, raw)?),
                        None => None,
                    };
                    out.push(doc);
                }
            }
            Ok(Some(out))
        })
    }

    /// A query: chain `sort`, `skip`, `limit`, `project`, then iterate,
    /// `run`, `count` or `explain`.
    pub fn find(&self, filter: Document) -> Find<'_> {
        Find::new(self, filter)
    }

    /// The number of documents matching `filter`.
    pub fn count(&self, filter: Document) -> Result<u64> {
        self.find(filter).count()
    }

    /// The filter of an upsert on a handle scoped to one partition: the
    /// partition key's equality added when the filter lacks it, so that the
    /// upserted document is built inside the partition. Matches are
    /// unchanged (every document of the partition has that value).
    fn upsert_filter(&self, mut filter: Document, upsert: bool) -> Result<Document> {
        if let (true, Some([value])) = (upsert, self.partitions.as_deref()) {
            if let Some(key) = self.scoped_key()? {
                // Unless the filter sets the key by equality (`{tenant: ..}`,
                // `{org: {id: ..}}` for `org.id`), the partition's value
                // joins it: the inserted document takes it, and it matches
                // nothing more inside the partition.
                let seeded = slate_query::equality_seed(&filter)
                    .is_ok_and(|seed| slate_core::get_path(&seed, &key).is_some());
                if !seeded {
                    // `$eq`: a regex value is compared as a value, not run.
                    let is = bson::doc! { key: { "$eq": value.clone() } };
                    filter = if filter.is_empty() {
                        is
                    } else {
                        bson::doc! { "$and": [filter, is] }
                    };
                }
            }
        }
        Ok(filter)
    }

    /// Replaces the first document matching `filter`. An upserted
    /// replacement must lie in a partition the handle addresses.
    pub fn replace_one(&self, filter: Document, doc: Document, upsert: bool) -> Result<UpdateResult> {
        // Filled in whether or not it upserts: the replacement of a document
        // found in the handle's one partition stays there.
        let doc = self.scoped(doc, self.scoped_key()?.as_deref())?;
        self.write(|t, parts| t.replace_one(&self.name, parts, &filter, doc, upsert))
    }

    /// Updates the first document matching `filter`. On a handle scoped to
    /// partitions, an upsert inserts into the handle's partition (one named
    /// partition fills in the key) and is refused outside them.
    pub fn update_one(&self, filter: Document, update: Document, upsert: bool) -> Result<UpdateResult> {
        let filter = self.upsert_filter(filter, upsert)?;
        self.write(|t, parts| t.update(&self.name, parts, &filter, &update, false, upsert))
    }

    /// Updates every document matching `filter` (upserts as in
    /// [`update_one`](Self::update_one)).
    pub fn update_many(&self, filter: Document, update: Document, upsert: bool) -> Result<UpdateResult> {
        let filter = self.upsert_filter(filter, upsert)?;
        self.write(|t, parts| t.update(&self.name, parts, &filter, &update, true, upsert))
    }

    /// Deletes the first document matching `filter`; returns 0 or 1.
    pub fn delete_one(&self, filter: Document) -> Result<u64> {
        self.write(|t, parts| t.delete(&self.name, parts, &filter, false))
    }

    /// Deletes every document matching `filter`; returns how many.
    pub fn delete_many(&self, filter: Document) -> Result<u64> {
        self.write(|t, parts| t.delete(&self.name, parts, &filter, true))
    }

    /// Creates an index on `field` (a dot path) over the existing documents.
    pub fn create_index(&self, field: &str) -> Result<()> {
        self.db.transaction(|t| t.create_index(&self.name, field))
    }

    /// Drops the index on `field`.
    pub fn drop_index(&self, field: &str) -> Result<()> {
        self.db.transaction(|t| t.drop_index(&self.name, field))
    }
}

/// A document as `get` returns it.
fn full_document(read: &CollectionRead<'_>, mat: &mut Materializer, raw: &RawDoc<'_>) -> Result<Document> {
    Ok(read.materialize_full_with(mat, raw)?)
}

/// A document as `get` returns it, deserialized into `T`.
fn decode_full<T: DeserializeOwned>(
    read: &CollectionRead<'_>,
    mat: &mut Materializer,
    raw: &RawDoc<'_>,
) -> Result<T> {
    let decoded = read.deserialize_full_with::<T>(mat, raw)?;
    Ok(decoded.map_err(|e| crate::find::decode_error::<T>(raw, e))?)
}
