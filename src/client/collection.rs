//! `RemoteCollection` and its builders: [`crate::Collection`]'s methods over a
//! connection, with the same arguments, results and errors.

use std::borrow::Borrow;

use bson::{Bson, Document};
use serde::de::DeserializeOwned;

use super::{Client, Flow};
use crate::server::protocol::{
    Bin, CountReply, DeleteArgs, DeleteReply, Done, ExplainReply, FindArgs, FindReply, GetArgs, GetManyArgs,
    GetManyReply, GetReply, HitWire, IndexArgs, InsertManyArgs, InsertManyReply, InsertOneArgs,
    InsertOneReply, ReplaceArgs, SearchArgs, SearchBatchArgs, SearchBatchReply, SearchReply, UpdateArgs,
    UpdateReply,
};
use crate::{CollectionConfig, Error, ErrorKind, Result, SearchHit, Strategy, UpdateResult};

/// A collection on a server; see [`crate::Collection`] for what each method does.
#[derive(Debug, Clone)]
pub struct RemoteCollection {
    client: Client,
    name: String,
    partitions: Option<Vec<Bson>>,
}

impl RemoteCollection {
    pub(crate) fn new(client: Client, name: String) -> Self {
        Self {
            client,
            name,
            partitions: None,
        }
    }

    /// The collection's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The collection's configuration.
    pub fn config(&self) -> Result<CollectionConfig> {
        self.client.config_of(&self.name)
    }

    /// This collection scoped to one partition (tenant).
    pub fn partition(&self, value: impl Into<Bson>) -> RemoteCollection {
        self.partitions(vec![value.into()])
    }

    /// This collection scoped to several partitions.
    pub fn partitions(&self, values: Vec<Bson>) -> RemoteCollection {
        RemoteCollection {
            client: self.client.clone(),
            name: self.name.clone(),
            partitions: Some(values),
        }
    }

    fn parts(&self) -> Option<Bin> {
        self.partitions
            .as_ref()
            .map(|p| Bin::value(&Bson::Array(p.clone())))
    }

    fn doc(&self, bin: &Bin, what: &str) -> Result<Document> {
        bin.to_doc(what).map_err(|e| self.client.bad_reply(e))
    }

    /// A document of the answer deserialized into `T`, as the embedded
    /// typed reads do: bytes that are no BSON document are a bad reply; a
    /// document that does not fit `T` is [`slate_query::Error::Decode`],
    /// naming its `_id`.
    fn typed<T: DeserializeOwned>(&self, bin: &Bin, what: &str) -> Result<T> {
        bin.to_raw_doc(what).map_err(|e| self.client.bad_reply(e))?;
        slate_core::value::from_raw::<T>(&bin.0)
            .map_err(|e| crate::find::decode_error_of::<T>(&bin.0, || "(no _id)".to_owned(), e).into())
    }

    fn value(&self, bin: &Bin, what: &str) -> Result<Bson> {
        bin.to_value(what).map_err(|e| self.client.bad_reply(e))
    }

    fn hits(&self, hits: Vec<HitWire>) -> Result<Vec<SearchHit>> {
        hits.into_iter()
            .map(|h| {
                let doc = self.doc(&h.doc, "hit")?;
                Ok(SearchHit {
                    id: doc.get("_id").cloned().unwrap_or(Bson::Null),
                    distance: h.distance,
                    doc,
                })
            })
            .collect()
    }

    fn update_result(&self, r: UpdateReply) -> Result<UpdateResult> {
        Ok(UpdateResult {
            matched: r.matched,
            modified: r.modified,
            upserted_id: r
                .upserted_id
                .as_ref()
                .map(|b| self.value(b, "upserted_id"))
                .transpose()?,
        })
    }

    /// Inserts one document; returns its `_id` (generated when absent).
    pub fn insert_one(&self, doc: Document) -> Result<Bson> {
        let args = InsertOneArgs {
            collection: self.name.clone(),
            partitions: self.parts(),
            doc: doc_arg(&doc, "doc")?,
        };
        let r: InsertOneReply = self.client.call("insert_one", &args)?;
        self.value(&r.id, "id")
    }

    /// Inserts documents in one commit; if any fails, none is written.
    pub fn insert_many(&self, docs: impl IntoIterator<Item = Document>) -> Result<Vec<Bson>> {
        let args = InsertManyArgs {
            collection: self.name.clone(),
            partitions: self.parts(),
            docs: docs
                .into_iter()
                .enumerate()
                .map(|(i, d)| doc_arg(&d, &format!("docs[{i}]")))
                .collect::<Result<_>>()?,
        };
        let r: InsertManyReply = self.client.call("insert_many", &args)?;
        match self.value(&r.ids, "ids")? {
            Bson::Array(ids) => Ok(ids),
            other => Err(self
                .client
                .bad_reply(format!("insert_many: ids is {other:?}, not an array"))),
        }
    }

    /// The document with `_id` `id`, in one round trip.
    pub fn get(&self, id: impl Into<Bson>) -> Result<Option<Document>> {
        let r = self.get_reply(id.into())?;
        r.doc.as_ref().map(|d| self.doc(d, "doc")).transpose()
    }

    /// [`get`](Self::get), deserialized into `T` (any serde type) with no
    /// `Document` in between, as [`crate::Collection::get_as`] does.
    pub fn get_as<T: DeserializeOwned>(&self, id: impl Into<Bson>) -> Result<Option<T>> {
        let r = self.get_reply(id.into())?;
        r.doc.as_ref().map(|d| self.typed(d, "doc")).transpose()
    }

    fn get_reply(&self, id: Bson) -> Result<GetReply> {
        let args = GetArgs {
            collection: self.name.clone(),
            partitions: self.parts(),
            id: Bin::value(&id),
        };
        self.client.call("get", &args)
    }

    /// The documents with the given ids, in order (`None` where absent), from
    /// one snapshot in one round trip.
    pub fn get_many(&self, ids: &[Bson]) -> Result<Vec<Option<Document>>> {
        self.get_many_reply(ids)?
            .docs
            .iter()
            .map(|d| d.as_ref().map(|d| self.doc(d, "docs")).transpose())
            .collect()
    }

    /// [`get_many`](Self::get_many), each document deserialized into `T`
    /// as [`get_as`](Self::get_as) does.
    pub fn get_many_as<T: DeserializeOwned>(&self, ids: &[Bson]) -> Result<Vec<Option<T>>> {
        self.get_many_reply(ids)?
            .docs
            .iter()
            .map(|d| d.as_ref().map(|d| self.typed(d, "docs")).transpose())
            .collect()
    }

    fn get_many_reply(&self, ids: &[Bson]) -> Result<GetManyReply> {
        let args = GetManyArgs {
            collection: self.name.clone(),
            partitions: self.parts(),
            ids: Bin::value(&Bson::Array(ids.to_vec())),
        };
        self.client.call("get_many", &args)
    }

    /// A query: chain `sort`, `skip`, `limit`, `project`, then `run`, `count`
    /// or `explain`.
    pub fn find(&self, filter: Document) -> RemoteFind<'_> {
        let mut bad = None;
        let filter = filter_arg(&filter, &mut bad);
        RemoteFind {
            coll: self,
            args: FindArgs {
                collection: self.name.clone(),
                partitions: self.parts(),
                filter,
                ..FindArgs::default()
            },
            bad,
        }
    }

    /// The number of documents matching `filter`.
    pub fn count(&self, filter: Document) -> Result<u64> {
        self.find(filter).count()
    }

    /// Replaces the first document matching `filter`.
    pub fn replace_one(&self, filter: Document, doc: Document, upsert: bool) -> Result<UpdateResult> {
        let args = ReplaceArgs {
            collection: self.name.clone(),
            partitions: self.parts(),
            filter: doc_arg(&filter, "filter")?,
            doc: doc_arg(&doc, "doc")?,
            upsert,
        };
        self.update_result(self.client.call("replace_one", &args)?)
    }

    fn update(&self, op: &str, filter: Document, update: Document, upsert: bool) -> Result<UpdateResult> {
        let args = UpdateArgs {
            collection: self.name.clone(),
            partitions: self.parts(),
            filter: doc_arg(&filter, "filter")?,
            update: doc_arg(&update, "update")?,
            upsert,
        };
        self.update_result(self.client.call(op, &args)?)
    }

    /// Updates the first document matching `filter`.
    pub fn update_one(&self, filter: Document, update: Document, upsert: bool) -> Result<UpdateResult> {
        self.update("update_one", filter, update, upsert)
    }

    /// Updates every document matching `filter`.
    pub fn update_many(&self, filter: Document, update: Document, upsert: bool) -> Result<UpdateResult> {
        self.update("update_many", filter, update, upsert)
    }

    fn delete(&self, op: &str, filter: Document) -> Result<u64> {
        let args = DeleteArgs {
            collection: self.name.clone(),
            partitions: self.parts(),
            filter: doc_arg(&filter, "filter")?,
        };
        Ok(self.client.call::<_, DeleteReply>(op, &args)?.deleted)
    }

    /// Deletes the first document matching `filter`; returns 0 or 1.
    pub fn delete_one(&self, filter: Document) -> Result<u64> {
        self.delete("delete_one", filter)
    }

    /// Deletes every document matching `filter`; returns how many.
    pub fn delete_many(&self, filter: Document) -> Result<u64> {
        self.delete("delete_many", filter)
    }

    fn index(&self, op: &str, field: &str) -> Result<()> {
        let args = IndexArgs {
            collection: self.name.clone(),
            field: field.to_owned(),
        };
        self.client.call::<_, Done>(op, &args).map(|_| ())
    }

    /// Creates an index on `field` (a dot path) over the existing documents.
    pub fn create_index(&self, field: &str) -> Result<()> {
        self.index("create_index", field)
    }

    /// Drops the index on `field`.
    pub fn drop_index(&self, field: &str) -> Result<()> {
        self.index("drop_index", field)
    }

    /// The nearest documents to `query` by vector field `field`.
    pub fn search(&self, field: &str, query: &[f32]) -> RemoteSearch<'_> {
        RemoteSearch {
            coll: self,
            args: SearchArgs {
                collection: self.name.clone(),
                partitions: self.parts(),
                field: field.to_owned(),
                vector: Bin::f32s(query),
                k: 10,
                filter: None,
                projection: None,
                strategy: None,
                threads: 0,
                explain: false,
            },
            bad: None,
        }
    }

    /// Many searches in one round trip: `queries` holds `n × dim` floats,
    /// row-major. Unfiltered, they run in one blocked pass (as
    /// [`crate::Collection::search_batch`]).
    pub fn search_many(&self, field: &str, queries: &[f32]) -> RemoteSearchBatch<'_> {
        RemoteSearchBatch {
            coll: self,
            args: SearchBatchArgs {
                collection: self.name.clone(),
                partitions: self.parts(),
                field: field.to_owned(),
                vectors: Bin::f32s(queries),
                k: 10,
                filter: None,
                projection: None,
                strategy: None,
                threads: 0,
            },
            bad: None,
        }
    }

    /// [`crate::Collection::search_batch`] over the connection.
    pub fn search_batch(
        &self,
        field: &str,
        queries: &[f32],
        k: usize,
        threads: usize,
        projection: Option<&[String]>,
    ) -> Result<Vec<Vec<SearchHit>>> {
        let mut batch = self.search_many(field, queries).k(k).threads(threads);
        if let Some(p) = projection {
            batch = batch.project(p.iter().cloned());
        }
        batch.run()
    }
}

/// A find being built; runs on `run`, `count` or `explain` (one request each).
#[derive(Debug, Clone)]
#[must_use]
pub struct RemoteFind<'c> {
    coll: &'c RemoteCollection,
    args: FindArgs,
    /// An argument that could not be encoded, reported on sending.
    bad: Option<String>,
}

impl RemoteFind<'_> {
    /// Adds a sort field: `"field"` ascending or `"field:desc"`. Default: key order.
    pub fn sort(mut self, spec: impl Into<String>) -> Self {
        self.args.sort.push(spec.into());
        self
    }

    /// Skips the first `n` results. Default 0.
    pub fn skip(mut self, n: usize) -> Self {
        self.args.skip = n as u64;
        self
    }

    /// Returns at most `n` results. Default: all.
    pub fn limit(mut self, n: usize) -> Self {
        self.args.limit = Some(n as u64);
        self
    }

    /// Returns only `_id` and these dot paths. Default: every stored field.
    pub fn project<S: Into<String>>(mut self, fields: impl IntoIterator<Item = S>) -> Self {
        self.args.projection = Some(fields.into_iter().map(Into::into).collect());
        self
    }

    /// Runs the query; the documents come from one snapshot, in as many
    /// frames as the server sends.
    pub fn run(self) -> Result<Vec<Document>> {
        let mut docs = Vec::new();
        self.for_each(|d| {
            docs.push(d);
            Ok(())
        })?;
        Ok(docs)
    }

    /// Runs the query and collects the documents as `T`s (any serde type),
    /// as [`crate::Find::run_as`] does: a document that does not fit `T`
    /// fails the call with [`slate_query::Error::Decode`], naming its `_id`.
    pub fn run_as<T: DeserializeOwned>(self) -> Result<Vec<T>> {
        let mut out = Vec::new();
        self.for_each_as(|d| {
            out.push(d);
            Ok(())
        })?;
        Ok(out)
    }

    /// Runs the query, handing each document to `f` as its frame arrives.
    /// An error from `f` stops the calls to `f` and the download: the rest
    /// of the answer is not read (its connection is dropped; the client's
    /// next call opens a new one).
    pub fn for_each(self, f: impl FnMut(Document) -> Result<()>) -> Result<()> {
        let coll = self.coll;
        self.for_each_with(|bin| coll.doc(bin, "docs"), f)
    }

    /// [`for_each`](Self::for_each) with each document deserialized into
    /// `T`; one that does not fit stops the calls as an error from `f` does.
    pub fn for_each_as<T: DeserializeOwned>(self, f: impl FnMut(T) -> Result<()>) -> Result<()> {
        let coll = self.coll;
        self.for_each_with(|bin| coll.typed(bin, "docs"), f)
    }

    fn for_each_with<T>(
        self,
        decode: impl Fn(&Bin) -> Result<T>,
        mut f: impl FnMut(T) -> Result<()>,
    ) -> Result<()> {
        refused(&self.bad)?;
        let client = &self.coll.client;
        let mut failed = None;
        client.exchange("find", &self.args, |frame| {
            let reply: FindReply = client.ok_of("find", frame)?;
            for bin in &reply.docs {
                if let Err(e) = decode(bin).and_then(&mut f) {
                    failed = Some(e);
                    break;
                }
            }
            Ok(match (reply.more, &failed) {
                (false, _) => Flow::Last,
                (true, None) => Flow::More,
                (true, Some(_)) => Flow::Abandon,
            })
        })?;
        failed.map_or(Ok(()), Err)
    }

    /// Counts the matches (after skip and limit) on the server.
    pub fn count(self) -> Result<u64> {
        refused(&self.bad)?;
        Ok(self.coll.client.call::<_, CountReply>("count", &self.args)?.count)
    }

    /// The plan the query would run, as `slate find --explain` prints it.
    pub fn explain(self) -> Result<String> {
        refused(&self.bad)?;
        Ok(self
            .coll
            .client
            .call::<_, ExplainReply>("explain", &self.args)?
            .plan)
    }
}

/// A vector search being built; runs on `run` or `explain`.
#[derive(Debug, Clone)]
#[must_use]
pub struct RemoteSearch<'c> {
    coll: &'c RemoteCollection,
    args: SearchArgs,
    /// An argument that could not be encoded, reported on sending.
    bad: Option<String>,
}

impl RemoteSearch<'_> {
    /// How many hits at most. Default 10.
    pub fn k(mut self, k: usize) -> Self {
        self.args.k = k as u64;
        self
    }

    /// Only documents matching `filter`, owned or borrowed (a borrowed one is
    /// not cloned). Default: every document with a vector.
    pub fn filter(mut self, filter: impl Borrow<Document>) -> Self {
        let filter = filter.borrow();
        self.args.filter = filter_arg(filter, &mut self.bad);
        self
    }

    /// Fields returned with each hit besides `_id`. Default: none.
    pub fn project<S: Into<String>>(mut self, fields: impl IntoIterator<Item = S>) -> Self {
        self.args.projection = Some(fields.into_iter().map(Into::into).collect());
        self
    }

    /// Forces a strategy. Default `Strategy::Auto`.
    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.args.strategy = Some(strategy.to_string());
        self
    }

    /// Scan threads on the server (capped at its cores). Default 0: its shared pool.
    pub fn threads(mut self, threads: usize) -> Self {
        self.args.threads = threads as u64;
        self
    }

    /// Runs the search; returns the hits and what the server did, as text.
    pub fn explain(mut self) -> Result<(Vec<SearchHit>, String)> {
        refused(&self.bad)?;
        self.args.explain = true;
        let r: SearchReply = self.coll.client.call("search", &self.args)?;
        Ok((self.coll.hits(r.hits)?, r.explain.unwrap_or_default()))
    }

    /// The hits, nearest first (ties: smaller `_id` key first).
    pub fn run(self) -> Result<Vec<SearchHit>> {
        refused(&self.bad)?;
        let r: SearchReply = self.coll.client.call("search", &self.args)?;
        self.coll.hits(r.hits)
    }
}

/// Several vector searches sent as one request; runs on `run`.
#[derive(Debug, Clone)]
#[must_use]
pub struct RemoteSearchBatch<'c> {
    coll: &'c RemoteCollection,
    args: SearchBatchArgs,
    /// An argument that could not be encoded, reported on sending.
    bad: Option<String>,
}

impl RemoteSearchBatch<'_> {
    /// Hits per query at most. Default 10.
    pub fn k(mut self, k: usize) -> Self {
        self.args.k = k as u64;
        self
    }

    /// Only documents matching `filter`, owned or borrowed (then each query
    /// runs on its own).
    pub fn filter(mut self, filter: impl Borrow<Document>) -> Self {
        let filter = filter.borrow();
        self.args.filter = filter_arg(filter, &mut self.bad);
        self
    }

    /// Fields returned with each hit besides `_id`. Default: none.
    pub fn project<S: Into<String>>(mut self, fields: impl IntoIterator<Item = S>) -> Self {
        self.args.projection = Some(fields.into_iter().map(Into::into).collect());
        self
    }

    /// Forces a strategy (then each query runs on its own). Default `Strategy::Auto`.
    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.args.strategy = Some(strategy.to_string());
        self
    }

    /// Scan threads on the server (capped at its cores). Default 0.
    pub fn threads(mut self, threads: usize) -> Self {
        self.args.threads = threads as u64;
        self
    }

    /// One hit list per query, in query order.
    pub fn run(self) -> Result<Vec<Vec<SearchHit>>> {
        refused(&self.bad)?;
        let r: SearchBatchReply = self.coll.client.call("search_batch", &self.args)?;
        r.results.into_iter().map(|h| self.coll.hits(h)).collect()
    }
}

/// The BSON bytes of `doc`, sent as argument `what`: one bson cannot write
/// (a key holding a NUL byte) is refused here, as the server refuses an
/// argument that is no document (`bad_request`, naming it), rather than
/// sent cut short.
fn doc_arg(doc: &Document, what: &str) -> Result<Bin> {
    let mut out = Vec::new();
    doc.to_writer(&mut out).map_err(|e| Error::Server {
        kind: ErrorKind::BadRequest,
        message: format!("{what}: not a document BSON can hold: {e}"),
    })?;
    Ok(Bin(out))
}

/// A builder's filter argument (none when empty), with [`doc_arg`]'s error
/// kept in `bad` for the builder to report when it sends.
fn filter_arg(filter: &Document, bad: &mut Option<String>) -> Option<Bin> {
    if filter.is_empty() {
        return None;
    }
    match doc_arg(filter, "filter") {
        Ok(b) => Some(b),
        Err(e) => {
            bad.get_or_insert(e.to_string());
            None
        }
    }
}

/// The error a builder kept for its send, if any.
fn refused(bad: &Option<String>) -> Result<()> {
    match bad {
        Some(message) => Err(Error::Server {
            kind: ErrorKind::BadRequest,
            message: message.clone(),
        }),
        None => Ok(()),
    }
}
