//! Reading collections on one snapshot: documents by id, scans, index scans.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, OnceLock, PoisonError, RwLock};

use bson::{Bson, Document, RawBsonRef, RawDocument, RawDocumentBuf};
use rayon::prelude::*;

use crate::catalog::{collection_cf, CollectionConfig, CATALOG_CF};
use crate::keys;
use crate::stamps::{Keys as ChangedKeys, Stamps};
use crate::store::{Direction, KeyRange, Snapshot};
use crate::value::{is_under, project_path, to_bson, Materializer};
use crate::vectors::{VectorSet, VectorView};
use crate::{Database, Error, Result};

/// The partition a read or write addresses: the encoded partition value, or
/// empty in a collection that is not partitioned.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Part(pub(crate) Vec<u8>);

impl Part {
    /// The only partition of a collection that is not partitioned.
    pub fn none() -> Self {
        Self(Vec::new())
    }

    /// The partition whose partition-key value is `value`.
    pub fn of(value: &Bson) -> Result<Self> {
        Ok(Self(crate::value::encode_key_value(value).map_err(|e| {
            Error::InvalidPartition {
                reason: e.to_string(),
            }
        })?))
    }

    /// The encoded bytes (a key prefix).
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

/// A read-only transaction: every read sees the same snapshot.
pub struct ReadTxn<'db> {
    db: &'db Database,
    snap: Arc<dyn Snapshot + 'db>,
    /// Whether its collections carry their vector caches (its snapshot is
    /// then registered with the compaction floor).
    vectors: bool,
    /// The catalog generation its snapshot reads at, when known (see
    /// `CatalogMemo`).
    catalog_gen: Option<u64>,
}

impl std::fmt::Debug for ReadTxn<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadTxn")
            .field("version", &self.snap.version())
            .finish()
    }
}

impl<'db> ReadTxn<'db> {
    pub(crate) fn new(db: &'db Database) -> Self {
        let (snap, catalog_gen) = db.shared.catalog.snapshot(|| db.store.snapshot());
        Self {
            db,
            snap,
            vectors: true,
            catalog_gen,
        }
    }

    /// A transaction for document reads only: its snapshot is not registered
    /// with the vector compaction floor and its collections carry no vector
    /// caches (stored vectors are still read from their keys).
    pub(crate) fn documents_only(db: &'db Database) -> Self {
        let (snap, catalog_gen) = db.shared.catalog.snapshot(|| db.untracked.snapshot());
        Self {
            db,
            snap,
            vectors: false,
            catalog_gen,
        }
    }

    /// The commit version this transaction reads at.
    pub fn version(&self) -> u64 {
        self.snap.version()
    }

    /// The snapshot underneath.
    pub fn snapshot(&self) -> &dyn Snapshot {
        self.snap.as_ref()
    }

    /// The configuration of collection `name` in this snapshot.
    pub fn config(&self, name: &str) -> Result<CollectionConfig> {
        let (config, _) = self
            .db
            .shared
            .catalog
            .collection(self.snap.as_ref(), name, self.catalog_gen)?;
        Ok(CollectionConfig::clone(&*config))
    }

    /// A handle for reading collection `name`. It shares this transaction's
    /// snapshot and may outlive the transaction value.
    pub fn collection(&self, name: &str) -> Result<CollectionRead<'db>> {
        let (config, cf) = self
            .db
            .shared
            .catalog
            .collection(self.snap.as_ref(), name, self.catalog_gen)?;
        // No lock or map lookup for a collection without vector fields. A
        // collection dropped since this snapshot is searched through its
        // retired caches; one created after it (re-created since) has caches
        // this snapshot must not read.
        let vectors = if self.vectors && !config.vectors.is_empty() {
            self.db.vector_set_at(name, self.snap.version())
        } else {
            None
        };
        let searchable = vectors.is_some();
        let mut read = CollectionRead::new(SnapRef::Shared(self.snap.clone()), config, cf, vectors);
        if searchable {
            // Vector searches key what they keep by the collection's version
            // (see `Stamps`), looked up when they ask.
            read.stamps = Some(&self.db.shared.stamps);
        }
        Ok(read)
    }
}

/// The configuration of collection `name` in `snap`. Decoded configurations
/// are memoised by their stored bytes (a pure function of them), so opening a
/// collection costs one catalog read and a byte comparison; a read
/// transaction usually skips even that (`CatalogMemo` in `db.rs`).
pub(crate) fn read_config(snap: &dyn Snapshot, name: &str) -> Result<Arc<CollectionConfig>> {
    read_collection(snap, name).map(|(config, _)| config)
}

/// [`read_config`] with the collection's column family name (memoised with
/// it, so that opening a collection for a read formats no string).
pub(crate) fn read_collection(snap: &dyn Snapshot, name: &str) -> Result<(Arc<CollectionConfig>, Arc<str>)> {
    type Memo = HashMap<String, (Vec<u8>, Arc<CollectionConfig>, Arc<str>)>;
    static DECODED: OnceLock<RwLock<Memo>> = OnceLock::new();
    let Some(bytes) = snap.get(CATALOG_CF, name.as_bytes())? else {
        return Err(Error::UnknownCollection {
            name: name.to_owned(),
        });
    };
    let memo = DECODED.get_or_init(Default::default);
    if let Some((stored, config, cf)) = memo.read().unwrap_or_else(PoisonError::into_inner).get(name) {
        if stored.as_slice() == &*bytes {
            return Ok((Arc::clone(config), Arc::clone(cf)));
        }
    }
    let config = Arc::new(CollectionConfig::from_bytes(name, &bytes)?);
    let cf: Arc<str> = collection_cf(name).into();
    memo.write().unwrap_or_else(PoisonError::into_inner).insert(
        name.to_owned(),
        (bytes.into_owned(), Arc::clone(&config), Arc::clone(&cf)),
    );
    Ok((config, cf))
}

/// An index entry's key and the key of its document.
type IndexEntry<'a> = (Cow<'a, [u8]>, Vec<u8>);

/// Index counts capped above this many entries, over one value, are
/// counted in parallel once this many are found.
const PAR_COUNT_MIN: usize = 4096;

/// The document keys of partition `part` from `from` (inclusive) to `to`
/// (exclusive), either end the partition's when `None`.
fn doc_range(part: &Part, from: Option<&[u8]>, to: Option<&[u8]>) -> KeyRange {
    let mut range = KeyRange::prefix(&keys::doc_prefix(&part.0));
    if let Some(from) = from {
        range.start = Some(from.to_vec());
    }
    if let Some(to) = to {
        range.end = Some(to.to_vec());
    }
    range
}

/// Most documents [`CollectionRead::scan_run`] makes room for up front.
const PAR_RUN_GUESS: usize = 8192;
/// Most bytes it reserves up front (a large first document guesses large).
const PAR_RUN_RESERVE: usize = 4 << 20;

/// Documents read by [`CollectionRead::scan_run`], key and bytes one after
/// the other in one buffer.
#[derive(Debug, Default)]
pub struct DocRun {
    buf: Vec<u8>,
    /// Where each document's key and bytes end in `buf`; its key starts
    /// where the document before it ends.
    ends: Vec<(usize, usize)>,
    /// Where the documents left unread start (`None`: none are).
    resume: Option<Vec<u8>>,
}

impl DocRun {
    /// The key from which the documents this run stopped before start:
    /// `None` when it read to the end of its range.
    pub fn resume(&self) -> Option<&[u8]> {
        self.resume.as_deref()
    }

    /// The documents, in key order.
    pub fn docs(&self) -> impl Iterator<Item = RawDoc<'_>> {
        let starts = std::iter::once(0).chain(self.ends.iter().map(|&(_, end)| end));
        starts.zip(&self.ends).map(|(start, &(key_end, end))| RawDoc {
            key: Cow::Borrowed(&self.buf[start..key_end]),
            bytes: Cow::Borrowed(&self.buf[key_end..end]),
        })
    }

    /// How many documents it holds.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
}

/// A document read from a collection: its key and raw BSON bytes (borrowed from
/// the snapshot where the backend lends them).
#[derive(Debug, Clone)]
pub struct RawDoc<'a> {
    /// The document's key: `{partition}d:{encoded id}`. Unique in the collection.
    pub key: Cow<'a, [u8]>,
    /// The stored BSON bytes (vector fields stripped).
    pub bytes: Cow<'a, [u8]>,
}

impl RawDoc<'_> {
    /// A borrowed view of the document.
    pub fn raw(&self) -> Result<&RawDocument> {
        RawDocument::from_bytes(&self.bytes).map_err(|e| Error::Corrupt {
            what: format!("document {}: {e}", crate::KeyDisplay(&self.key)),
        })
    }
}

/// A snapshot held by a [`CollectionRead`]: borrowed (inside a write
/// transaction) or shared (from a [`ReadTxn`]).
#[derive(Clone)]
pub(crate) enum SnapRef<'t> {
    Borrowed(&'t dyn Snapshot),
    Shared(Arc<dyn Snapshot + 't>),
}

impl<'t> std::ops::Deref for SnapRef<'t> {
    type Target = dyn Snapshot + 't;
    fn deref(&self) -> &Self::Target {
        match self {
            SnapRef::Borrowed(s) => *s,
            SnapRef::Shared(s) => s.as_ref(),
        }
    }
}

/// Reads of one collection on one snapshot.
#[derive(Clone)]
pub struct CollectionRead<'t> {
    snap: SnapRef<'t>,
    cf: Arc<str>,
    config: Arc<CollectionConfig>,
    vectors: Option<Arc<VectorSet>>,
    /// Inside a write transaction: its document count changes, by
    /// collection and partition, which it writes only at commit.
    pending_counts: Option<&'t CountDeltas>,
    /// The database's commit history, for [`changed_at`](Self::changed_at)
    /// (a searchable collection's read outside a write transaction).
    stamps: Option<&'t Stamps>,
}

/// A write transaction's document count changes, by collection and
/// partition, not yet written.
pub(crate) type CountDeltas = std::collections::BTreeMap<(String, Vec<u8>), i64>;

/// A stored count with a transaction's change to it: what a read inside the
/// transaction counts and what its commit writes (never below 0).
pub(crate) fn with_delta(n: u64, delta: i64) -> u64 {
    n.saturating_add_signed(delta)
}

impl std::fmt::Debug for CollectionRead<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CollectionRead")
            .field("collection", &self.config.name)
            .finish()
    }
}

impl<'t> CollectionRead<'t> {
    pub(crate) fn new(
        snap: SnapRef<'t>,
        config: Arc<CollectionConfig>,
        cf: Arc<str>,
        vectors: Option<Arc<VectorSet>>,
    ) -> Self {
        Self {
            snap,
            cf,
            config,
            vectors,
            pending_counts: None,
            stamps: None,
        }
    }

    /// This read inside a write transaction whose count changes so far are
    /// `pending`: [`count`](Self::count) includes them.
    pub(crate) fn with_pending_counts(self, pending: &'t CountDeltas) -> Self {
        Self {
            pending_counts: Some(pending),
            ..self
        }
    }

    /// The document as stored plus every vector it has: what `get` returns.
    /// Uses the thread's materializer, so consecutive single reads of one
    /// collection reuse its document layout.
    pub fn materialize_full(&self, doc: &RawDoc<'_>) -> Result<Document> {
        Materializer::with_thread_local(|m| self.materialize_full_with(m, doc))
    }

    /// [`CollectionRead::materialize_full`] reusing `m`'s document layout
    /// (faster over many documents with the same fields).
    pub fn materialize_full_with(&self, m: &mut Materializer, doc: &RawDoc<'_>) -> Result<Document> {
        let mut out = m.document(doc.raw()?).map_err(corrupt)?;
        for vf in &self.config.vectors {
            if let Some(v) = self.vector_of(&vf.field, &doc.key)? {
                crate::vectors::set_path(&mut out, &vf.field, crate::vectors::vector_to_bson(&v));
            }
        }
        Ok(out)
    }

    /// The document's stored fields (`None`), or only `_id` and the fields on
    /// the given dot paths; a vector field named there is attached from its
    /// vector key. The single point where raw bytes become a `Document`.
    pub fn materialize(&self, doc: &RawDoc<'_>, projection: Option<&[String]>) -> Result<Document> {
        Materializer::with_thread_local(|m| self.materialize_with(m, doc, projection))
    }

    /// [`CollectionRead::materialize`] reusing `m`'s document layout (faster
    /// over many documents with the same fields).
    pub fn materialize_with(
        &self,
        m: &mut Materializer,
        doc: &RawDoc<'_>,
        projection: Option<&[String]>,
    ) -> Result<Document> {
        let raw = doc.raw()?;
        let Some(fields) = projection else {
            return m.document(raw).map_err(corrupt);
        };
        if self.all_top_level(fields) {
            return project_top_level(m, raw, fields);
        }
        let mut out = Document::new();
        if let Some(id) = raw.get("_id").map_err(corrupt)? {
            out.insert("_id", to_bson(id).map_err(corrupt)?);
        }
        // A path under another projected path projects that one (the whole
        // value, at the first of their places).
        let widest = |f: &'_ str| {
            fields
                .iter()
                .filter(|g| is_under(f, g))
                .min_by_key(|g| g.len())
                .map_or(f.to_owned(), Clone::clone)
        };
        // A vector field under a projected path: attached after the paths,
        // since the stored copy of its parent does not hold it.
        let nested = |v: &str| fields.iter().any(|f| is_under(v, f));
        for field in fields {
            if field == "_id" {
                continue;
            }
            if self.config.vector_field(field).is_some() {
                if !nested(field) {
                    self.attach_vector(&mut out, field, &doc.key)?;
                }
                continue;
            }
            project_path(&mut out, raw, &widest(field)).map_err(corrupt)?;
        }
        for vf in &self.config.vectors {
            if nested(&vf.field) {
                self.attach_vector(&mut out, &vf.field, &doc.key)?;
            }
        }
        Ok(out)
    }

    /// Sets vector field `field` of the document with key `doc_key` in `out`,
    /// if the document has that vector.
    fn attach_vector(&self, out: &mut Document, field: &str, doc_key: &[u8]) -> Result<()> {
        if let Some(v) = self.vector_of(field, doc_key)? {
            crate::vectors::set_path(out, field, crate::vectors::vector_to_bson(&v));
        }
        Ok(())
    }

    /// Whether this read's store is on disk (RocksDB): see
    /// [`Snapshot::on_disk`](crate::store::Snapshot::on_disk).
    pub fn on_disk(&self) -> bool {
        self.snap.on_disk()
    }

    /// The collection's configuration in this snapshot.
    pub fn config(&self) -> &CollectionConfig {
        &self.config
    }

    /// The snapshot version.
    pub fn version(&self) -> u64 {
        self.snap.version()
    }

    /// A version at which this collection held the same keys (documents,
    /// index entries, vectors) as this snapshot reads: that of the last
    /// commit that wrote to its column family at or below the snapshot's
    /// version, so that readers at versions between which only other
    /// collections changed are told the same one. (A commit that changes
    /// only the catalog, such as an index created on an empty collection,
    /// does not count.) The snapshot's own version where that is not known:
    /// a snapshot older than the commits remembered, a write transaction's
    /// reads, and reads of a collection without vector fields or through a
    /// transaction that reads documents only.
    pub fn changed_at(&self) -> u64 {
        let version = self.version();
        self.stamps.map_or(version, |s| s.changed_at(&self.cf, version))
    }

    /// The keys written to this collection by the commits after version
    /// `from` up to [`changed_at`](Self::changed_at), one list a commit
    /// (documents, index entries and the rest; a key may be listed more than
    /// once). `None` when they are not known: a commit of more than
    /// [`MAX_CHANGED_KEYS`](crate::MAX_CHANGED_KEYS) keys or one that
    /// deleted a range, commits older than the history (its last 64 commits
    /// and last MiB of keys) or a dropped collection's, and reads that do
    /// not know their `changed_at`.
    pub fn changes_since(&self, from: u64) -> Option<Vec<ChangedKeys>> {
        self.stamps?.changes(&self.cf, from, self.changed_at())
    }

    /// The partition for `value`; an error in a collection that is not
    /// partitioned when a value is given, and in one that is when none is.
    pub fn part(&self, value: Option<&Bson>) -> Result<Part> {
        self.config.part(value)
    }

    /// The document with encoded id `id` in partition `part`.
    pub fn get(&self, part: &Part, id: &[u8]) -> Result<Option<RawDoc<'_>>> {
        self.get_doc_key(keys::doc_key(&part.0, id))
    }

    /// The document under document key `key`.
    fn get_doc_key(&self, key: Vec<u8>) -> Result<Option<RawDoc<'_>>> {
        Ok(self.snap.get(&self.cf, &key)?.map(|bytes| RawDoc {
            key: Cow::Owned(key),
            bytes,
        }))
    }

    /// The document with `_id` `id` in partition `part`.
    pub fn get_by_id(&self, part: &Part, id: &Bson) -> Result<Option<RawDoc<'_>>> {
        // The key in one buffer: `{part}d:` then the encoded id.
        let mut key = keys::doc_prefix_with_capacity(&part.0, 16);
        crate::value::encode_id_into(id, &mut key).map_err(|e| Error::InvalidId {
            collection: self.config.name.clone(),
            reason: e.to_string(),
        })?;
        self.get_doc_key(key)
    }

    /// The document under key `key` (as found in [`RawDoc::key`] or an index
    /// entry): [`get_keys`](Self::get_keys) of one key, without its lists.
    pub fn get_key<'a>(&'a self, key: &'a [u8]) -> Result<Option<RawDoc<'a>>> {
        Ok(self.snap.get(&self.cf, key)?.map(|bytes| RawDoc {
            key: Cow::Borrowed(key),
            bytes,
        }))
    }

    /// Documents by key (as found in [`RawDoc::key`] or an index entry), in the
    /// order given; `None` for a key with no document.
    /// The documents borrow their keys from `keys`.
    pub fn get_keys<'a>(&'a self, keys: &[&'a [u8]]) -> Result<Vec<Option<RawDoc<'a>>>> {
        let values = self.snap.multi_get(&self.cf, keys)?;
        Ok(keys
            .iter()
            .zip(values)
            .map(|(k, v)| {
                v.map(|bytes| RawDoc {
                    key: Cow::Borrowed(*k),
                    bytes,
                })
            })
            .collect())
    }

    /// Every document of partition `part`, in id order.
    pub fn scan(&self, part: &Part) -> Result<impl Iterator<Item = Result<RawDoc<'_>>> + '_> {
        self.scan_from(part, None)
    }

    /// Documents of partition `part` from document key `from` on (inclusive).
    pub fn scan_from(
        &self,
        part: &Part,
        from: Option<&[u8]>,
    ) -> Result<impl Iterator<Item = Result<RawDoc<'_>>> + '_> {
        self.scan_between(part, from, None)
    }

    /// Documents of partition `part` with keys from `from` (inclusive) to
    /// `to` (exclusive), either end open when `None`, in id order.
    pub fn scan_between(
        &self,
        part: &Part,
        from: Option<&[u8]>,
        to: Option<&[u8]>,
    ) -> Result<impl Iterator<Item = Result<RawDoc<'_>>> + '_> {
        self.scan_dir(part, from, to, Direction::Forward)
    }

    /// [`scan_between`](Self::scan_between)'s documents in direction `dir`:
    /// in reverse, from the last key before `to` down to `from`, in
    /// descending id order.
    pub fn scan_dir(
        &self,
        part: &Part,
        from: Option<&[u8]>,
        to: Option<&[u8]>,
        dir: Direction,
    ) -> Result<impl Iterator<Item = Result<RawDoc<'_>>> + '_> {
        let range = doc_range(part, from, to);
        let iter = self.snap.range(&self.cf, &range, dir)?;
        Ok(iter.map(|e| e.map(|(key, bytes)| RawDoc { key, bytes })))
    }

    /// [`scan_between`](Self::scan_between)'s documents handed to `f` in key
    /// order until it breaks, lent where the store would copy each one out
    /// (RocksDB: read from a raw iterator, nothing allocated per document).
    pub fn visit_between(
        &self,
        part: &Part,
        from: Option<&[u8]>,
        to: Option<&[u8]>,
        f: &mut dyn FnMut(&RawDoc<'_>) -> ControlFlow<()>,
    ) -> Result<()> {
        let range = doc_range(part, from, to);
        self.snap.visit(&self.cf, &range, &mut |key, bytes| {
            f(&RawDoc {
                key: Cow::Borrowed(key),
                bytes: Cow::Borrowed(bytes),
            })
        })
    }

    /// At most `max` of [`scan_between`](Self::scan_between)'s documents,
    /// read into one buffer: one allocation for many documents, freed at
    /// once, where a store that copies documents out (RocksDB) makes two per
    /// document. [`DocRun::resume`] tells where the rest starts.
    pub fn scan_run(
        &self,
        part: &Part,
        from: Option<&[u8]>,
        to: Option<&[u8]>,
        max: usize,
    ) -> Result<DocRun> {
        let range = doc_range(part, from, to);
        let mut run = DocRun::default();
        if max == 0 {
            run.resume = range.start;
            return Ok(run);
        }
        self.snap.visit(&self.cf, &range, &mut |key, bytes| {
            if run.ends.len() == max {
                run.resume = Some(key.to_vec());
                return ControlFlow::Break(());
            }
            if run.ends.is_empty() {
                // Room for half of `max` documents of the first one's size
                // (a split scan reads about half its `max`), rather than a
                // buffer that doubles, copied each time.
                let guess = max.div_ceil(2).min(PAR_RUN_GUESS);
                let room = guess.saturating_mul(key.len() + bytes.len()) / 4 * 5;
                run.buf.reserve(room.min(PAR_RUN_RESERVE));
                run.ends.reserve(guess);
            }
            run.buf.extend_from_slice(key);
            let key_end = run.buf.len();
            run.buf.extend_from_slice(bytes);
            run.ends.push((key_end, run.buf.len()));
            ControlFlow::Continue(())
        })?;
        Ok(run)
    }

    /// At most `n - 1` keys, ascending, that cut partition `part`'s
    /// documents from key `from` (inclusive) to `to` (exclusive), either end
    /// open when `None`, into ranges for a parallel scan
    /// ([`scan_between`](Self::scan_between)): document keys of ids spaced
    /// evenly between the first and last ids there ([`keys::split_ids`]).
    /// A cut is a bound, not always a stored id (or an id at all). Two reads.
    pub fn scan_splits(
        &self,
        part: &Part,
        from: Option<&[u8]>,
        to: Option<&[u8]>,
        n: usize,
    ) -> Result<Vec<Vec<u8>>> {
        let prefix = keys::doc_prefix(&part.0);
        let range = doc_range(part, from, to);
        let end = |dir| -> Result<Option<Vec<u8>>> {
            let first = self.snap.range(&self.cf, &range, dir)?.next().transpose()?;
            Ok(first.map(|(key, _)| key[prefix.len()..].to_vec()))
        };
        Ok(match (end(Direction::Forward)?, end(Direction::Reverse)?) {
            (Some(first), Some(last)) if first < last => keys::split_ids(&first, &last, n)
                .iter()
                .map(|id| keys::doc_key(&part.0, id))
                .collect(),
            _ => Vec::new(),
        })
    }

    /// Document keys from index `field` whose values lie in the encoded range
    /// `lo..hi` (see [`keys::index_value_range`]), in index order. Duplicates are
    /// possible when a document has several matching array elements.
    pub fn index_scan(
        &self,
        part: &Part,
        field: &str,
        lo: Option<(&[u8], bool)>,
        hi: Option<(&[u8], bool)>,
    ) -> Result<impl Iterator<Item = Result<Vec<u8>>> + '_> {
        let entries = self.index_entries(part, field, lo, hi, Direction::Forward, None)?;
        Ok(entries.map(|e| e.map(|(_, doc)| doc)))
    }

    /// At most `limit` entries of index `field` whose values lie in the
    /// encoded range `lo..hi`, in index order in direction `dir`, starting
    /// past the index key `past` (forward: just after it; in reverse: just
    /// below it; at the range's end that `dir` starts from when `None`):
    /// each as its index key (to resume past) and its document's key. What
    /// [`index_scan`](Self::index_scan) yields, a batch at a time.
    // The arguments of `index_scan`, and where a page starts and ends.
    #[allow(clippy::too_many_arguments)]
    pub fn index_entries_page(
        &self,
        part: &Part,
        field: &str,
        lo: Option<(&[u8], bool)>,
        hi: Option<(&[u8], bool)>,
        dir: Direction,
        past: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.index_entries(part, field, lo, hi, dir, past)?
            .take(limit)
            .map(|e| e.map(|(key, doc)| (key.into_owned(), doc)))
            .collect()
    }

    /// The entries of index `field` in the encoded range `lo..hi` in
    /// direction `dir`, past index key `past` (forward: after it; in
    /// reverse: below it), each as its index key and document key.
    fn index_entries(
        &self,
        part: &Part,
        field: &str,
        lo: Option<(&[u8], bool)>,
        hi: Option<(&[u8], bool)>,
        dir: Direction,
        past: Option<&[u8]>,
    ) -> Result<impl Iterator<Item = Result<IndexEntry<'_>>> + '_> {
        self.check_index(field)?;
        let mut range = keys::index_value_range(&part.0, field, lo, hi);
        match (past, dir) {
            (None, _) => {}
            (Some(after), Direction::Forward) => {
                // The least key above `after`.
                let mut next = Vec::with_capacity(after.len() + 1);
                next.extend_from_slice(after);
                next.push(0);
                if range.start.as_ref().is_none_or(|start| next > *start) {
                    range.start = Some(next);
                }
            }
            (Some(before), Direction::Reverse) => {
                if range.end.as_ref().is_none_or(|end| before < end.as_slice()) {
                    range.end = Some(before.to_vec());
                }
            }
        }
        let part = part.0.clone();
        let iter = self.snap.range(&self.cf, &range, dir)?;
        Ok(iter.map(move |e| e.map(|(key, id)| (key, keys::doc_key(&part, &id)))))
    }

    /// How many index entries of `field` lie in the range, counting at most
    /// `cap` (returns `cap` when there are more).
    pub fn index_count(
        &self,
        part: &Part,
        field: &str,
        lo: Option<(&[u8], bool)>,
        hi: Option<(&[u8], bool)>,
        cap: usize,
    ) -> Result<usize> {
        self.check_index(field)?;
        let range = keys::index_value_range(&part.0, field, lo, hi);
        let equal = matches!((lo, hi), (Some((a, true)), Some((b, true))) if a == b);
        if !equal || cap <= PAR_COUNT_MIN {
            return self.snap.count_range(&self.cf, &range, cap);
        }
        // A short range is counted here; a long one in parallel, from the
        // start again.
        let first = self.snap.count_range(&self.cf, &range, PAR_COUNT_MIN)?;
        if first < PAR_COUNT_MIN {
            return Ok(first);
        }
        // One value's entries ascend by id: cut where the documents' ids
        // are cut for a parallel scan.
        let value = keys::index_value_prefix(&part.0, field, lo.map_or(&[][..], |(v, _)| v));
        let id_at = keys::doc_prefix(&part.0).len();
        let n = rayon::current_num_threads() * 4;
        let mut bounds: Vec<Option<Vec<u8>>> = vec![range.start.clone()];
        for cut in self.scan_splits(part, None, None, n)? {
            bounds.push(Some([&value[..], &cut[id_at..]].concat()));
        }
        bounds.push(range.end.clone());
        let counted = std::sync::atomic::AtomicUsize::new(0);
        bounds
            .par_windows(2)
            .map(|w| {
                let sub = KeyRange {
                    start: w[0].clone(),
                    end: w[1].clone(),
                };
                let mut mine = 0;
                self.snap.visit(&self.cf, &sub, &mut |_, _| {
                    mine += 1;
                    // Every task stops once all of them together reach `cap`.
                    if mine % 512 == 0 && counted.fetch_add(512, Relaxed) + 512 >= cap {
                        mine = 0;
                        return ControlFlow::Break(());
                    }
                    ControlFlow::Continue(())
                })?;
                counted.fetch_add(mine % 512, Relaxed);
                Ok(())
            })
            .collect::<Result<()>>()?;
        Ok(counted.into_inner().min(cap))
    }

    fn check_index(&self, field: &str) -> Result<()> {
        if self.config.indexes.iter().any(|f| f == field) {
            Ok(())
        } else {
            Err(Error::UnknownIndex {
                collection: self.config.name.clone(),
                field: field.to_owned(),
            })
        }
    }

    /// Whether index `field` can be read in the order of a sort on the field:
    /// not multikey, in a collection whose multikey markers follow the current
    /// rule ([`keys::multikey_rule_key`]): then it holds exactly one entry per
    /// document, ordered as the sort orders the documents.
    pub fn is_sort_ordered(&self, field: &str) -> Result<bool> {
        Ok(!self.is_multikey(field)? && self.snap.get(&self.cf, &keys::multikey_rule_key())?.is_some())
    }

    /// Whether some document ever held an array at indexed `field` (so the
    /// index may hold several entries per document), or several values, or
    /// none, or `undefined` ([`keys::multikey_key`]).
    pub fn is_multikey(&self, field: &str) -> Result<bool> {
        Ok(self.snap.get(&self.cf, &keys::multikey_key(field))?.is_some())
    }

    /// The number of documents in partition `part` (inside a write
    /// transaction, its own inserts and deletes included).
    pub fn count(&self, part: &Part) -> Result<u64> {
        let stored = read_count(self.snap.get(&self.cf, &keys::count_key(&part.0))?.as_deref())?;
        let delta = self
            .pending_counts
            .and_then(|p| p.get(&(self.config.name.clone(), part.0.clone())))
            .copied()
            .unwrap_or(0);
        Ok(with_delta(stored, delta))
    }

    /// The cache of vector field `field` as of this snapshot.
    pub fn vectors(&self, field: &str) -> Result<VectorView> {
        let unknown = || Error::UnknownVectorField {
            collection: self.config.name.clone(),
            field: field.to_owned(),
        };
        self.config.vector_field(field).ok_or_else(unknown)?;
        let set = self.vectors.as_ref().ok_or_else(unknown)?;
        set.view(field, self.snap.version()).ok_or_else(unknown)
    }

    /// Bytes held by this collection's vector caches (all fields).
    pub fn vector_memory_bytes(&self) -> usize {
        self.vectors.as_ref().map_or(0, |v| v.memory_bytes())
    }

    /// Whether every projected path is a top-level stored field (no dot, not
    /// a vector field nor holding one), so one pass over the bytes finds them
    /// all.
    fn all_top_level(&self, fields: &[String]) -> bool {
        fields.iter().all(|f| {
            !f.contains('.')
                && self.config.vector_field(f).is_none()
                && !self.config.vectors.iter().any(|vf| is_under(&vf.field, f))
        })
    }

    /// What [`materialize_with`](Self::materialize_with) returns, as BSON
    /// bytes. Without a projection the stored bytes are copied as they are;
    /// a top-level projection copies the projected elements' bytes; any
    /// other projection is materialised and encoded.
    pub fn raw_with(
        &self,
        m: &mut Materializer,
        doc: &RawDoc<'_>,
        projection: Option<&[String]>,
    ) -> Result<RawDocumentBuf> {
        let raw = doc.raw()?;
        let Some(fields) = projection else {
            return Ok(raw.to_raw_document_buf());
        };
        let mut out = RawDocumentBuf::new();
        if self.all_top_level(fields) {
            for (key, value) in top_level_values(raw, fields)? {
                out.append_ref(key, value);
            }
            return Ok(out);
        }
        encode(&self.materialize_with(m, doc, projection)?, &doc.key)
    }

    /// What [`materialize_full_with`](Self::materialize_full_with) returns,
    /// deserialized as `T`: straight from the stored bytes when the
    /// collection has no vector field (none to re-attach), else through the
    /// full document. The errors as for
    /// [`deserialize_with`](Self::deserialize_with).
    pub fn deserialize_full_with<T: serde::de::DeserializeOwned>(
        &self,
        m: &mut Materializer,
        doc: &RawDoc<'_>,
    ) -> Result<std::result::Result<T, crate::value::DeError>> {
        if self.config.vectors.is_empty() {
            return Ok(crate::value::from_raw(&doc.bytes));
        }
        let bytes = encode(&self.materialize_full_with(m, doc)?, &doc.key)?;
        Ok(crate::value::from_raw(bytes.as_bytes()))
    }

    /// What [`materialize_with`](Self::materialize_with) returns,
    /// deserialized as `T` straight from the bytes. The outer error is the
    /// store's; the inner one says why the document does not fit `T`.
    pub fn deserialize_with<T: serde::de::DeserializeOwned>(
        &self,
        m: &mut Materializer,
        doc: &RawDoc<'_>,
        projection: Option<&[String]>,
    ) -> Result<std::result::Result<T, crate::value::DeError>> {
        Ok(match projection {
            None => crate::value::from_raw(&doc.bytes),
            Some(fields) if self.all_top_level(fields) => crate::value::from_raw_fields(&doc.bytes, fields),
            Some(_) => crate::value::from_raw(self.raw_with(m, doc, projection)?.as_bytes()),
        })
    }

    /// Whether every document's `_id` is what its key decodes to (the
    /// collection was created with the exact-ids marker and no int32 `_id`
    /// has been written since, which decodes as an int64), and every visible
    /// vector row's document exists in this read. Then
    /// [`id_of_key`](Self::id_of_key) gives a hit's exact id. A write
    /// transaction's read sees its own writes while its vector views stay
    /// at the last commit, so it always reads the documents.
    pub fn ids_decode_exactly(&self) -> Result<bool> {
        if self.in_write_txn() {
            return Ok(false);
        }
        Ok(self.snap.get(&self.cf, &keys::exact_ids_key())?.is_some())
    }

    /// Whether this reads inside a write transaction: its documents may hold
    /// uncommitted changes, while its vector caches and their row tags are
    /// those of the last commit.
    pub fn in_write_txn(&self) -> bool {
        matches!(self.snap, SnapRef::Borrowed(_))
    }

    /// The `_id` encoded in document key `doc_key`, as
    /// [`decode_value`](crate::value::decode_value) gives it (an int32 comes
    /// back as an int64).
    pub fn id_of_key(&self, doc_key: &[u8]) -> Result<Bson> {
        Ok(decode_doc_key(&self.config, doc_key)?.2)
    }

    /// The stored vector of `field` for the document with key `doc_key`.
    pub fn vector_of(&self, field: &str, doc_key: &[u8]) -> Result<Option<Vec<f32>>> {
        let (part, id) = split_doc_key(&self.config, doc_key)?;
        let bytes = self.snap.get(&self.cf, &keys::vector_key(part, field, id))?;
        Ok(bytes.map(|b| crate::vectors::f32s_from_le(&b)))
    }
}

/// `doc` (read from document key `key`) as BSON bytes.
fn encode(doc: &Document, key: &[u8]) -> Result<RawDocumentBuf> {
    RawDocumentBuf::from_document(doc).map_err(|e| Error::Corrupt {
        what: format!("document {}: {e}", crate::KeyDisplay(key)),
    })
}

fn corrupt(e: bson::raw::Error) -> Error {
    Error::Corrupt { what: e.to_string() }
}

/// `_id` and the top-level `fields` of `raw` (those present), in that order,
/// found in one pass over the document (the first of duplicate names wins, as
/// in `RawDocument::get`).
fn top_level_values<'r>(
    raw: &'r RawDocument,
    fields: &[String],
) -> Result<impl Iterator<Item = (&'r str, RawBsonRef<'r>)> + Clone> {
    let mut found = vec![None; fields.len()];
    // The quick walk, else (a type it leaves to bson, bad bytes) bson's
    // iterator, for the same values or the error.
    let id = match crate::value::pick_top_level_refs(raw.as_bytes(), fields, &mut found) {
        Some(id) => id,
        None => {
            found.fill(None);
            let elements = raw.into_iter().map(|e| e.map_err(corrupt));
            crate::value::pick_top_level(elements, fields, &mut found)?
        }
    };
    Ok(id
        .map(|v| ("_id", v))
        .into_iter()
        .chain(found.into_iter().flatten()))
}

fn project_top_level(m: &mut Materializer, raw: &RawDocument, fields: &[String]) -> Result<Document> {
    let values = top_level_values(raw, fields)?;
    m.fields(|| values.clone()).map_err(corrupt)
}

pub(crate) fn read_count(bytes: Option<&[u8]>) -> Result<u64> {
    match bytes {
        None => Ok(0),
        Some(b) => Ok(u64::from_le_bytes(b.try_into().map_err(|_| Error::Corrupt {
            what: "document count".into(),
        })?)),
    }
}

/// Splits a document key into its partition prefix and encoded id.
pub(crate) fn split_doc_key<'k>(config: &CollectionConfig, key: &'k [u8]) -> Result<(&'k [u8], &'k [u8])> {
    let plen = if config.partition_key.is_some() {
        crate::value::decode_value(key)
            .map_err(|e| Error::Corrupt {
                what: format!("document key {}: {e}", crate::KeyDisplay(key)),
            })?
            .1
    } else {
        0
    };
    if key.len() < plen + 2 || &key[plen..plen + 2] != b"d:" {
        return Err(Error::Corrupt {
            what: format!("document key {}", crate::KeyDisplay(key)),
        });
    }
    Ok((&key[..plen], &key[plen + 2..]))
}

/// [`split_doc_key`], plus the `_id` the encoded id decodes to (an int32
/// comes back as an int64).
pub(crate) fn decode_doc_key<'k>(
    config: &CollectionConfig,
    key: &'k [u8],
) -> Result<(&'k [u8], &'k [u8], Bson)> {
    let (part, id_enc) = split_doc_key(config, key)?;
    let (id, _) = crate::value::decode_value(id_enc).map_err(|e| Error::Corrupt {
        what: format!("document key {}: {e}", crate::KeyDisplay(key)),
    })?;
    Ok((part, id_enc, id))
}

/// A scan over every key range of one kind is handy for integrity checks.
pub(crate) fn all_keys(snap: &dyn Snapshot, cf: &str) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    snap.range(cf, &KeyRange::all(), Direction::Forward)?
        .map(|e| e.map(|(k, v)| (k.into_owned(), v.into_owned())))
        .collect()
}
