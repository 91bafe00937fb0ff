//! `Search`: the vector search builder, plain, filtered and batched.

use std::borrow::Borrow;

use bson::Document;
use slate_query::{Filter, SearchExplain, SearchHit, SearchSpec, Strategy};

use crate::{Collection, Result};

/// A vector search being built; runs on `run` or `explain`.
#[derive(Debug, Clone)]
#[must_use]
pub struct Search<'c> {
    coll: &'c Collection,
    spec: SearchSpec,
    /// A filter that does not parse, kept to report its error when the
    /// search runs (a parsed one is in `spec`).
    bad_filter: Option<Document>,
}

impl<'c> Search<'c> {
    pub(crate) fn new(coll: &'c Collection, field: &str, query: &[f32]) -> Self {
        let spec = SearchSpec {
            field: field.to_owned(),
            query: query.to_vec(),
            k: 10,
            ..Default::default()
        };
        Self {
            coll,
            spec,
            bad_filter: None,
        }
    }

    /// How many hits at most. Default 10.
    pub fn k(mut self, k: usize) -> Self {
        self.spec.k = k;
        self
    }

    /// Only documents matching `filter` (the filter language of `find`),
    /// owned or borrowed: it is parsed here, and a borrowed one that parses
    /// is not cloned. Default: every document with a vector. A filter that
    /// does not parse fails the search when it runs, with the error that
    /// names the bad operator or operand.
    pub fn filter(mut self, filter: impl Borrow<Document>) -> Self {
        let filter = filter.borrow();
        self.spec.filter = None;
        self.bad_filter = None;
        if !filter.is_empty() {
            match Filter::parse(filter) {
                Ok(parsed) => self.spec.filter = Some(parsed),
                Err(_) => self.bad_filter = Some(filter.clone()),
            }
        }
        self
    }

    /// Fields returned with each hit besides `_id`. Default: none.
    pub fn project<S: Into<String>>(mut self, fields: impl IntoIterator<Item = S>) -> Self {
        self.spec.projection = Some(fields.into_iter().map(Into::into).collect());
        self
    }

    /// Forces a strategy (tests and benchmarks). Default `Strategy::Auto`.
    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.spec.strategy = strategy;
        self
    }

    /// Threads for the scan: 0 (default) the shared pool, 1 the calling
    /// thread, n a pool of n.
    pub fn threads(mut self, threads: usize) -> Self {
        self.spec.threads = threads;
        self
    }

    /// Runs as a filter's first search does: neither uses nor keeps the
    /// matching rows earlier searches kept. By default, the second search
    /// with a filter no index narrows reads every document to find its
    /// matches and keeps them while no commit follows, for the searches
    /// after it to use as an index's (see `docs/query.md`). Benchmarks of
    /// first searches set it.
    pub fn fresh(mut self) -> Self {
        self.spec.fresh = true;
        self
    }

    /// Refuses the search (an `InvalidQuery` error) when its hits'
    /// documents, as projected, would hold more than `bytes` (their BSON
    /// size, counted as each is built: a refused search holds at most the
    /// bound and one document more). Hits of `_id` only are not counted.
    /// Default: no bound.
    pub fn max_bytes(mut self, bytes: usize) -> Self {
        self.spec.max_hit_bytes = Some(bytes);
        self
    }

    /// Runs the search and returns what it did too.
    pub fn explain(mut self) -> Result<(Vec<SearchHit>, SearchExplain)> {
        // Parsed again for its error (parsing is deterministic; were it to
        // succeed, the search would run with it, never without it).
        if let Some(bad) = self.bad_filter.take() {
            self.spec.filter = Some(Filter::parse(&bad)?);
        }
        let txn = self.coll.db.inner.read();
        let read = txn.collection(&self.coll.name)?;
        let parts = self.coll.parts(&read)?;
        Ok(slate_query::search(&read, &parts, &self.spec)?)
    }

    /// The hits, nearest first (ties: smaller `_id` key first).
    pub fn run(self) -> Result<Vec<SearchHit>> {
        Ok(self.explain()?.0)
    }
}

impl Collection {
    /// The nearest documents to `query` by vector field `field`.
    pub fn search<'c>(&'c self, field: &str, query: &[f32]) -> Search<'c> {
        Search::new(self, field, query)
    }

    /// Many unfiltered searches in one blocked pass over the vectors:
    /// `queries` holds `n × dim` floats, row-major.
    pub fn search_batch(
        &self,
        field: &str,
        queries: &[f32],
        k: usize,
        threads: usize,
        projection: Option<&[String]>,
    ) -> Result<Vec<Vec<SearchHit>>> {
        self.search_batch_within(field, queries, k, threads, projection, None)
    }

    /// [`search_batch`](Self::search_batch), refused (an `InvalidQuery`
    /// error) when the hits' documents of all its queries together would
    /// hold more than `max_bytes` (see [`Search::max_bytes`]).
    pub fn search_batch_within(
        &self,
        field: &str,
        queries: &[f32],
        k: usize,
        threads: usize,
        projection: Option<&[String]>,
        max_bytes: Option<usize>,
    ) -> Result<Vec<Vec<SearchHit>>> {
        let txn = self.db.inner.read();
        let read = txn.collection(&self.name)?;
        let parts = self.parts(&read)?;
        let hits = slate_query::BatchHits {
            projection,
            max_bytes,
        };
        Ok(slate_query::search_batch(
            &read, &parts, field, queries, k, threads, hits,
        )?)
    }

    /// Bytes held by this collection's vector caches.
    pub fn vector_memory_bytes(&self) -> Result<usize> {
        let txn = self.db.inner.read();
        Ok(txn.collection(&self.name)?.vector_memory_bytes())
    }
}
