//! `Find`: the query builder.

use bson::{Document, RawDocumentBuf};
use serde::de::DeserializeOwned;
use slate_core::value::Materializer;
use slate_core::{CollectionRead, RawDoc};
use slate_query::{plan_find, Cursor, Decode, FindSpec, Plan, SortField};

use crate::{Collection, Result};

/// A find being built. Nothing runs until `iter`, `run`, `count` or `explain`.
#[derive(Debug, Clone)]
#[must_use]
pub struct Find<'c> {
    coll: &'c Collection,
    filter: Document,
    sort: Vec<String>,
    skip: usize,
    limit: Option<usize>,
    projection: Option<Vec<String>>,
}

impl<'c> Find<'c> {
    pub(crate) fn new(coll: &'c Collection, filter: Document) -> Self {
        Self {
            coll,
            filter,
            sort: Vec::new(),
            skip: 0,
            limit: None,
            projection: None,
        }
    }

    /// Adds a sort field: `"field"` ascending or `"field:desc"`. Without one,
    /// the order is the plan's (key order of a scan, or of the index it reads,
    /// partition by partition in the order named): sort for a stable page.
    pub fn sort(mut self, spec: impl Into<String>) -> Self {
        self.sort.push(spec.into());
        self
    }

    /// Skips the first `n` results. Default 0.
    pub fn skip(mut self, n: usize) -> Self {
        self.skip = n;
        self
    }

    /// Returns at most `n` results. Default: all.
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }

    /// Returns only `_id` and these dot paths. Default: every stored field.
    pub fn project<S: Into<String>>(mut self, fields: impl IntoIterator<Item = S>) -> Self {
        self.projection = Some(fields.into_iter().map(Into::into).collect());
        self
    }

    /// The parsed query; `explain` also wants the filter as written (JSON),
    /// which running it does not.
    fn spec(&self, explain: bool) -> Result<FindSpec> {
        let filter = if self.filter.is_empty() {
            None
        } else {
            Some(slate_query::Filter::parse(&self.filter)?)
        };
        let sort = self
            .sort
            .iter()
            .map(|s| SortField::parse(s).map_err(|reason| slate_query::Error::InvalidQuery { reason }))
            .collect::<Result<Vec<_>, _>>()?;
        let filter_text = filter.as_ref().filter(|_| explain).map(|_| {
            bson::Bson::Document(self.filter.clone())
                .into_relaxed_extjson()
                .to_string()
        });
        Ok(FindSpec {
            filter,
            sort,
            skip: self.skip,
            limit: self.limit,
            projection: self.projection.clone(),
            filter_text,
            explain,
        })
    }

    /// Runs the query lazily: documents are read, filtered and materialised
    /// batch by batch as the iterator advances, all from one snapshot. A
    /// batch of 512 documents or more is filtered and materialised on the
    /// rayon pool (in order); batches grow from 256 documents to 8,192 while
    /// the iterator keeps being read.
    pub fn iter(self) -> Result<Cursor<'c>> {
        self.cursor(slate_query::decode_document)
    }

    /// Runs the query and collects the documents, reserving room for the
    /// plan's estimate of their number.
    pub fn run(self) -> Result<Vec<Document>> {
        collect(self.iter()?)
    }

    /// Like [`iter`](Self::iter), but each result is the document's BSON
    /// bytes: without a projection, a copy of the stored bytes (no field is
    /// parsed or allocated), the cheapest way to hand documents on.
    pub fn iter_raw(self) -> Result<Cursor<'c, RawDocumentBuf>> {
        self.cursor(slate_query::decode_raw)
    }

    /// Runs the query and collects the documents' bytes.
    pub fn run_raw(self) -> Result<Vec<RawDocumentBuf>> {
        collect(self.iter_raw()?)
    }

    /// Like [`iter`](Self::iter), but each document is deserialized into `T`
    /// straight from its stored bytes, with no `bson::Document` in between.
    /// Fields `T` does not name are skipped, so a struct of three fields reads
    /// like a projection of them. With [`project`](Self::project), `T` is read
    /// from the projected document.
    ///
    /// `T` is `Send` because large batches are decoded on the rayon pool.
    /// A document that does not fit `T` fails that item with
    /// [`slate_query::Error::Decode`], naming its `_id`.
    pub fn iter_as<T: DeserializeOwned + Send>(self) -> Result<Cursor<'c, T>> {
        self.cursor(decode_typed::<T>)
    }

    /// Runs the query and collects the documents as `T`s.
    pub fn run_as<T: DeserializeOwned + Send>(self) -> Result<Vec<T>> {
        collect(self.iter_as()?)
    }

    fn cursor<T: Send>(self, decode: Decode<T>) -> Result<Cursor<'c, T>> {
        let spec = self.spec(false)?;
        let txn = self.coll.db.inner.read();
        let read = txn.collection(&self.coll.name)?;
        let parts = self.coll.parts(&read)?;
        let plan = plan_find(&read, &parts, &spec)?;
        Ok(Cursor::with_decode_parallel(read, plan, parts.to_vec(), decode)?)
    }

    /// Counts the matches (after skip and limit) without materialising them.
    /// A bad filter, sort or projection fails as it would fail a run.
    pub fn count(mut self) -> Result<u64> {
        let spec = self.spec(false)?;
        slate_query::check_projection(spec.projection.as_deref())?;
        slate_query::check_sort(&spec.sort)?;
        // Neither order nor projection changes a count: dropped, so that a
        // sorted count does not hold every match to sort it.
        self.sort.clear();
        self.projection = None;
        let unfiltered = self.filter.is_empty() && self.skip == 0 && self.limit.is_none();
        if unfiltered {
            let txn = self.coll.db.inner.read();
            let read = txn.collection(&self.coll.name)?;
            let mut n = 0;
            for part in self.coll.parts(&read)?.iter() {
                n += read.count(part)?;
            }
            return Ok(n);
        }
        Ok(self.iter()?.count()?)
    }

    /// The plan the query would run, with its estimates.
    pub fn explain(self) -> Result<Plan> {
        let spec = self.spec(true)?;
        let txn = self.coll.db.inner.read();
        let read = txn.collection(&self.coll.name)?;
        let parts = self.coll.parts(&read)?;
        Ok(plan_find(&read, &parts, &spec)?)
    }
}

/// Most bytes [`collect`] reserves up front for its results.
const RESERVE_BYTES: usize = 64 << 20;

/// The cursor's results in one `Vec`, reserved from the plan's estimate: a
/// `Vec` grown by doubling copies its elements and touches fresh pages at
/// every step (about 9% of a 100,000-document typed scan's profile; reserving
/// measured 2% faster). Room reserved for far more results than came is given
/// back.
fn collect<T>(cursor: Cursor<'_, T>) -> Result<Vec<T>> {
    let cursor = cursor.collecting();
    let room = RESERVE_BYTES / std::mem::size_of::<T>().max(1);
    let mut out = Vec::with_capacity(cursor.expected_len().min(room));
    cursor.collect_into(&mut out)?;
    if out.len() < out.capacity() / 2 {
        out.shrink_to_fit();
    }
    Ok(out)
}

/// The [`Decode`] of [`Find::iter_as`].
fn decode_typed<T: DeserializeOwned>(
    read: &CollectionRead<'_>,
    mat: &mut Materializer,
    doc: &RawDoc<'_>,
    projection: Option<&[String]>,
) -> slate_query::Result<T> {
    let decoded = read.deserialize_with::<T>(mat, doc, projection)?;
    decoded.map_err(|e| decode_error::<T>(doc, e))
}

/// Why `doc` is not a `T`, naming its `_id`.
pub(crate) fn decode_error<T>(doc: &RawDoc<'_>, e: slate_core::value::DeError) -> slate_query::Error {
    decode_error_of::<T>(&doc.bytes, || slate_core::KeyDisplay(&doc.key).to_string(), e)
}

/// Why the document `bytes` is not a `T`, naming its `_id` (`fallback()`
/// when it has none that reads).
pub(crate) fn decode_error_of<T>(
    bytes: &[u8],
    fallback: impl FnOnce() -> String,
    e: slate_core::value::DeError,
) -> slate_query::Error {
    let id = bson::RawDocument::from_bytes(bytes)
        .ok()
        .and_then(|raw| raw.get("_id").ok().flatten())
        .and_then(|id| bson::Bson::try_from(id).ok())
        .map_or_else(fallback, |id| id.into_relaxed_extjson().to_string());
    slate_query::Error::Decode {
        id,
        type_name: std::any::type_name::<T>(),
        reason: e.to_string(),
    }
}
