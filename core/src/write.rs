//! The database write transaction: documents, their index entries, vectors
//! and counts, changed together and committed atomically.
//!
//! Every operation validates all its input before it changes anything, so an
//! operation that fails leaves the transaction as it was; dropping the
//! transaction discards all of it.

use std::collections::{BTreeMap, BTreeSet};
use std::mem;

use bson::oid::ObjectId;
use bson::{Bson, Document, RawDocument};
use rayon::prelude::*;

use crate::catalog::{collection_cf, CollectionConfig, CATALOG_CF};
use crate::index::{entries, entries_and_multikey_at, entries_at, index_path};
use crate::keys;
use crate::read::{
    decode_doc_key, read_collection, read_config, read_count, split_doc_key, CollectionRead, Part, SnapRef,
};
use crate::store::{self, Bytes, Direction, KeyRange};
use crate::value::{encode_id, FieldPath};
use crate::vectors::{extract_vector, f32s_to_le, VectorOp};
use crate::{Database, Error, Result};
use slate_vector::RowTags;

/// Fewest documents whose remains `insert_many` frees on another thread.
const BACKGROUND_DROP_DOCS: usize = 1024;

/// Largest stored document, as in MongoDB.
pub const MAX_DOCUMENT_BYTES: usize = 16 * 1024 * 1024;

/// The one write transaction of a [`Database`]. Commit with
/// [`WriteTxn::commit`]; drop to roll back.
pub struct WriteTxn<'db> {
    db: &'db Database,
    txn: store::WriteTxn<'db>,
    configs: BTreeMap<String, CollectionConfig>,
    counts: crate::read::CountDeltas,
    vector_ops: Vec<(String, String, VectorOp)>,
    /// Collections whose exact-ids marker this transaction has deleted or
    /// found absent (an int32 `_id` was written).
    int32_marked: BTreeSet<String>,
    /// Whether a configuration was saved to the catalog.
    catalog_changed: bool,
    /// Collections this transaction creates: their vector caches are set
    /// up when it commits.
    created: Vec<CollectionConfig>,
}

impl std::fmt::Debug for WriteTxn<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteTxn").field("txn", &self.txn).finish()
    }
}

/// A replacement checked and encoded by [`WriteTxn::stage_replace`], not yet
/// written: the new document and the stored one it replaces.
pub struct StagedReplace {
    collection: String,
    /// The collection's indexes when staged: the entries below are theirs.
    indexes: Vec<String>,
    new: Prepared,
    old: Prepared,
    /// The transaction and its write count when staged: `old` is what it
    /// held then, and only then.
    at: (u64, u64),
    /// What `new` and `old` count against the transaction's byte limit
    /// until written.
    held: u64,
}

impl std::fmt::Debug for StagedReplace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StagedReplace").field("id", &self.new.id).finish()
    }
}

/// The partition, encoded id and `_id` of a replacement of the document
/// under `doc_key` by `doc`: the `_id` as `doc` gives it when it is the same
/// id (1i32 and 1i64 are), keeping the caller's exact type.
fn replacement_id<'k>(
    config: &CollectionConfig,
    doc_key: &'k [u8],
    doc: &Document,
) -> Result<(&'k [u8], &'k [u8], Bson)> {
    let (part, id_enc, id) = decode_doc_key(config, doc_key)?;
    let id = match doc.get("_id") {
        Some(given) if encode_id(given).ok().as_deref() == Some(id_enc) => given.clone(),
        _ => id,
    };
    Ok((part, id_enc, id))
}

/// The paths of `config`'s indexes, in its order.
fn index_paths(config: &CollectionConfig) -> Result<Vec<FieldPath>> {
    config.indexes.iter().map(|field| index_path(field)).collect()
}

/// `doc`'s `_id`, found without hashing when it comes first (as it does in
/// every document Slate stores, and in most it is handed).
fn id_of(doc: &Document) -> Option<&Bson> {
    match doc.iter().next() {
        Some((key, id)) if key == "_id" => Some(id),
        _ => doc.get("_id"),
    }
}

/// `doc`'s `_id`, given one first (a new ObjectId) when it has none.
fn give_id(doc: &mut Document) -> Bson {
    if let Some(id) = id_of(doc) {
        return id.clone();
    }
    let id = Bson::ObjectId(ObjectId::new());
    let mut with_id = Document::new();
    with_id.insert("_id", id.clone());
    with_id.extend(mem::take(doc));
    *doc = with_id;
    id
}

/// The keys of `raw` (with key parts `part`, `id_enc`) in `config`'s
/// indexes, whose fields are parsed into `paths`: sorted, each once.
fn index_keys(
    config: &CollectionConfig,
    paths: &[FieldPath],
    part: &[u8],
    id_enc: &[u8],
    raw: &RawDocument,
) -> Vec<Vec<u8>> {
    let mut keys = Vec::new();
    for (field, path) in config.indexes.iter().zip(paths) {
        keys.extend(entries_at(part, field, path, id_enc, raw));
    }
    // Entries of different fields differ, but sort by field name.
    keys.sort_unstable();
    keys
}

/// [`index_keys`], and the indexed fields `raw` marks multikey
/// ([`is_multikey_at`]), in one walk per field for the usual document.
fn index_keys_and_multikey(
    config: &CollectionConfig,
    paths: &[FieldPath],
    part: &[u8],
    id_enc: &[u8],
    raw: &RawDocument,
) -> (Vec<Vec<u8>>, Vec<String>) {
    let mut keys = Vec::new();
    let mut multikey = Vec::new();
    for (field, path) in config.indexes.iter().zip(paths) {
        let (entries, marks) = entries_and_multikey_at(part, field, path, id_enc, raw);
        keys.extend(entries);
        if marks {
            multikey.push(field.clone());
        }
    }
    keys.sort_unstable();
    (keys, multikey)
}

/// `puts` reordered by the prefixes of their keys (`prefix_lens[i]` bytes
/// of put `i`: its key without the document id every written key ends
/// with), prefixes in byte order, each prefix's keys together and in order.
///
/// Prefixes are a partition, then `d:`, `i:{field}\0{value}` or
/// `v:{field}\0`, none a proper prefix of another, so this is the keys' byte
/// order; [`put_many`](store::WriteTxn::put_many) checks it all the same and
/// sorts what is not. A bulk insert's keys share few prefixes (one for the
/// documents, one per value of an indexed field, one per vector field), and
/// with ids ascending each prefix's keys already come in order: grouping
/// them is one hash lookup per key, where sorting them all is a dozen or
/// more comparisons each.
fn group_by_prefix(puts: Vec<(Vec<u8>, Bytes)>, prefix_lens: &[usize]) -> Vec<(Vec<u8>, Bytes)> {
    let order: Vec<usize> = {
        let mut slot_of: foldhash::HashMap<&[u8], usize> = foldhash::HashMapExt::new();
        let mut groups: Vec<(&[u8], Vec<usize>)> = Vec::new();
        for (i, (key, _)) in puts.iter().enumerate() {
            let prefix = &key[..prefix_lens[i]];
            let slot = *slot_of.entry(prefix).or_insert_with(|| {
                groups.push((prefix, Vec::new()));
                groups.len() - 1
            });
            groups[slot].1.push(i);
        }
        groups.sort_unstable_by(|a, b| a.0.cmp(b.0));
        for (_, members) in &mut groups {
            if !members.windows(2).all(|pair| puts[pair[0]].0 < puts[pair[1]].0) {
                members.sort_by(|&a, &b| puts[a].0.cmp(&puts[b].0));
            }
        }
        groups.into_iter().flat_map(|(_, members)| members).collect()
    };
    let mut slots: Vec<Option<(Vec<u8>, Bytes)>> = puts.into_iter().map(Some).collect();
    order
        .into_iter()
        .map(|i| slots[i].take().expect("each put once"))
        .collect()
}

/// The keys of sorted `keys` that sorted `others` lacks.
fn missing_from<'k>(keys: &'k [Vec<u8>], others: &'k [Vec<u8>]) -> impl Iterator<Item = &'k Vec<u8>> {
    keys.iter().filter(|k| others.binary_search(k).is_err())
}

/// The first 16 bytes of `key`, zero-padded, as a big-endian number. Keys
/// whose heads differ compare as their heads do: where the heads first
/// differ inside both keys, that byte decides either way; past the end of
/// one key, that key is a proper prefix of the other, and its padding byte
/// is 0 where the other's is not. Equal heads say nothing.
fn key_head(key: &[u8]) -> u128 {
    let mut head = [0u8; 16];
    let n = key.len().min(16);
    head[..n].copy_from_slice(&key[..n]);
    u128::from_be_bytes(head)
}

/// Orders two keys as their bytes do, given their [`key_head`]s: the keys
/// are read only when the heads are equal.
fn cmp_by_head(a: (u128, &[u8]), b: (u128, &[u8])) -> std::cmp::Ordering {
    a.0.cmp(&b.0).then_with(|| a.1.cmp(b.1))
}

/// The position of the first of `len` documents, each known by its
/// `key(i)`, whose key an earlier one has, if any: where a loop of single
/// inserts would meet `DuplicateId`.
fn first_repeat<'a>(len: usize, key: impl Fn(usize) -> &'a [u8] + Sync) -> Option<usize> {
    let mut order: Vec<usize> = (0..len).collect();
    // Stable: within a run of one id the positions ascend, so each pair's
    // second is a repeat.
    order.par_sort_by(|&a, &b| key(a).cmp(key(b)));
    order
        .windows(2)
        .filter(|pair| key(pair[0]) == key(pair[1]))
        .map(|pair| pair[1])
        .min()
}

/// What deleting a stored document needs of it (as
/// [`load_old`](WriteTxn::load_old) read it): its index entries and the
/// names of its vector fields, not its bytes or vectors.
struct Removal {
    index_keys: Vec<Vec<u8>>,
    vector_fields: Vec<String>,
}

impl Removal {
    fn of(old: Prepared) -> Self {
        Self {
            index_keys: old.index_keys,
            vector_fields: old.vectors.into_iter().map(|(field, _)| field).collect(),
        }
    }

    /// About the bytes its deletes buffer (with a document key of `key_len`).
    fn held_bytes(&self, key_len: usize) -> u64 {
        let index: usize = self.index_keys.iter().map(Vec::len).sum();
        let vectors: usize = self.vector_fields.iter().map(|f| key_len + f.len() + 1).sum();
        (index + vectors + key_len) as u64
    }
}

/// A document ready to be written: validated, encoded, its entries computed.
struct Prepared {
    id: Bson,
    part: Vec<u8>,
    id_enc: Vec<u8>,
    /// `part` and `id_enc` as the document's key.
    doc_key: Vec<u8>,
    /// [`key_head`] of `doc_key`: compared in its place, without reading it.
    head: u128,
    bytes: Bytes,
    /// Sorted, each once.
    index_keys: Vec<Vec<u8>>,
    vectors: Vec<(String, Vec<f32>)>,
    /// Indexed fields this document marks multikey (an array, several
    /// values, none, `undefined`: `index::is_multikey_at`).
    multikey: Vec<String>,
}

impl Prepared {
    /// The bytes it holds: what a staged replacement counts against its
    /// transaction's limit until written.
    fn held_bytes(&self) -> u64 {
        let keys: usize = self.index_keys.iter().map(Vec::len).sum();
        let vectors: usize = self.vectors.iter().map(|(_, v)| v.len() * 4).sum();
        (self.bytes.len() + self.doc_key.len() + keys + vectors) as u64
    }
}

impl<'db> WriteTxn<'db> {
    pub(crate) fn new(db: &'db Database) -> Result<Self> {
        let txn = db.begin_store_write()?;
        db.let_go_retired_vectors();
        Ok(Self {
            db,
            txn,
            configs: BTreeMap::new(),
            catalog_changed: false,
            counts: BTreeMap::new(),
            int32_marked: BTreeSet::new(),
            vector_ops: Vec::new(),
            created: Vec::new(),
        })
    }

    /// Creates a collection in this transaction, before any other write of
    /// it (refused after one): it exists, with everything written to it
    /// here, once the transaction commits, and not at all if it does not.
    /// Fails with `CollectionExists` if the name is taken.
    ///
    /// Its column family is made now, outside the transaction: a
    /// transaction dropped (or a process killed) before its commit leaves
    /// it empty and unnamed by the catalog, and the next creation of the
    /// name starts it afresh.
    pub fn create_collection(&mut self, config: CollectionConfig) -> Result<()> {
        config.validate()?;
        config.validate_vector_paths()?;
        if self.txn.get(CATALOG_CF, config.name.as_bytes())?.is_some()
            || self.configs.contains_key(&config.name)
        {
            return Err(Error::CollectionExists { name: config.name });
        }
        if !self.txn.is_empty() {
            return Err(Error::InvalidConfig {
                collection: config.name,
                reason: "a collection is created first in its transaction, before any other write".into(),
            });
        }
        let cf = collection_cf(&config.name);
        let store = self.db.store();
        // A column family left behind by a creation that did not commit
        // holds nothing reachable: start it afresh.
        if store.list_cfs().contains(&cf) {
            store.drop_cf(&cf)?;
        }
        store.create_cf(&cf)?;
        // The markers below go into the new column family.
        self.txn.rebase()?;
        self.txn.put(&cf, keys::exact_ids_key(), Vec::new())?;
        self.txn.put(&cf, keys::multikey_rule_key(), Vec::new())?;
        self.created.push(config.clone());
        self.save_config(config)
    }

    fn config(&mut self, name: &str) -> Result<CollectionConfig> {
        if let Some(c) = self.configs.get(name) {
            return Ok(c.clone());
        }
        let c = CollectionConfig::clone(&*read_config(&self.txn, name)?);
        self.configs.insert(name.to_owned(), c.clone());
        Ok(c)
    }

    /// Reads collection `name` as this transaction sees it (its own writes
    /// included; vector searches see the last commit).
    pub fn collection(&self, name: &str) -> Result<CollectionRead<'_>> {
        let (config, cf) = read_collection(&self.txn, name)?;
        Ok(
            CollectionRead::new(SnapRef::Borrowed(&self.txn), config, cf, self.db.vector_set(name))
                .with_pending_counts(&self.counts),
        )
    }

    fn prepare(config: &CollectionConfig, mut doc: Document) -> Result<Prepared> {
        Self::prepare_in(config, &index_paths(config)?, &mut doc, None)
    }

    /// [`prepare`](Self::prepare) with the config's index paths parsed, of
    /// `doc` borrowed: it gets an `_id` if it has none and loses its vector
    /// fields, and its caller drops it.
    /// `replaced`: the document it replaces, whose vectors one equal bit for
    /// bit keeps without being checked again, and whose `undefined`
    /// partition key it may keep (each was stored under the rules of its
    /// day: a check added later must not make the document's other fields
    /// unchangeable; the partition is compared with the stored one later).
    fn prepare_in(
        config: &CollectionConfig,
        paths: &[FieldPath],
        doc: &mut Document,
        replaced: Option<&Prepared>,
    ) -> Result<Prepared> {
        let id = give_id(doc);
        let collection = &config.name;
        let id_enc = encode_id(&id).map_err(|e| Error::InvalidId {
            collection: collection.clone(),
            reason: e.to_string(),
        })?;
        // The id as messages show it, built only for an error.
        let shown = || show(&id);
        let part = match &config.partition_key {
            None => Vec::new(),
            Some(key) => {
                let value = get_path(doc, key).ok_or_else(|| Error::InvalidDocument {
                    collection: collection.clone(),
                    id: shown(),
                    reason: format!("partition key {key:?} is missing"),
                })?;
                // `undefined` keys as null does: no null partition either.
                let undefined_kept = replaced.is_some() && matches!(value, Bson::Undefined);
                if !undefined_kept
                    && matches!(
                        value,
                        Bson::Array(_) | Bson::Document(_) | Bson::Null | Bson::Undefined
                    )
                {
                    return Err(Error::InvalidDocument {
                        collection: collection.clone(),
                        id: shown(),
                        reason: format!(
                            "partition key {key:?} must be a scalar other than null or undefined"
                        ),
                    });
                }
                Part::of(value)?.0
            }
        };
        let mut vectors = Vec::new();
        for vf in &config.vectors {
            let kept = replaced
                .map_or(&[][..], |r| r.vectors.as_slice())
                .iter()
                .find(|(f, _)| *f == vf.field)
                .map(|(_, v)| v.as_slice());
            if let Some(v) = extract_vector(doc, vf, kept).map_err(|reason| Error::InvalidVector {
                collection: collection.clone(),
                field: vf.field.clone(),
                id: shown(),
                reason,
            })? {
                vectors.push((vf.field.clone(), v));
            }
        }
        let bytes = crate::value::to_shared_bytes(doc).map_err(|e| Error::InvalidDocument {
            collection: collection.clone(),
            id: shown(),
            reason: e.to_string(),
        })?;
        if bytes.len() > MAX_DOCUMENT_BYTES {
            return Err(Error::InvalidDocument {
                collection: collection.clone(),
                id: shown(),
                reason: format!(
                    "{} bytes, more than the {MAX_DOCUMENT_BYTES} allowed",
                    bytes.len()
                ),
            });
        }
        // Only a document holding documents, arrays or scoped code can nest.
        let nests = doc.values().any(|v| {
            matches!(
                v,
                Bson::Document(_) | Bson::Array(_) | Bson::JavaScriptCodeWithScope(_)
            )
        });
        if nests && crate::value::nested_deeper_than(&bytes, crate::value::MAX_NESTING) {
            return Err(Error::InvalidDocument {
                collection: collection.clone(),
                id: shown(),
                reason: format!(
                    "documents and arrays nested more than {} levels deep",
                    crate::value::MAX_NESTING
                ),
            });
        }
        let raw = RawDocument::from_bytes(&bytes).map_err(|e| Error::Corrupt { what: e.to_string() })?;
        let (index_keys, multikey) = index_keys_and_multikey(config, paths, &part, &id_enc, raw);
        let doc_key = keys::doc_key(&part, &id_enc);
        Ok(Prepared {
            id,
            head: key_head(&doc_key),
            doc_key,
            part,
            id_enc,
            bytes,
            index_keys,
            vectors,
            multikey,
        })
    }

    /// Writes `p`'s document, entries and vectors over `old`'s (`None`: a
    /// new document); `p`'s bytes move into the transaction.
    fn write(&mut self, config: &CollectionConfig, p: Prepared, old: Option<&Prepared>) -> Result<()> {
        let cf = collection_cf(&config.name);
        self.mark(config, &cf, matches!(p.id, Bson::Int32(_)), &p.multikey)?;
        let mut puts = Vec::new();
        self.write_into(config, &cf, p, old, &mut puts)?;
        self.txn.put_many(&cf, puts)
    }

    /// Stages the collection markers that documents of `config` call for:
    /// an `int32` id deletes the exact-ids marker, an array (or what else
    /// `index::is_multikey_at` names) at an indexed field sets that field's
    /// `multikey` marker (each field named once).
    /// Every read comes before the first change, so a failed read (a disk
    /// error) stages nothing.
    fn mark<'f>(
        &mut self,
        config: &CollectionConfig,
        cf: &str,
        int32: bool,
        multikey: impl IntoIterator<Item = &'f String>,
    ) -> Result<()> {
        let exact_ids = match int32 && !self.int32_marked.contains(&config.name) {
            true => Some(self.txn.get(cf, &keys::exact_ids_key())?.is_some()),
            false => None,
        };
        let mut unmarked = Vec::new();
        for field in multikey {
            let mk = keys::multikey_key(field);
            if self.txn.get(cf, &mk)?.is_none() {
                unmarked.push(mk);
            }
        }
        if let Some(present) = exact_ids {
            if present {
                self.txn.delete(cf, keys::exact_ids_key())?;
            }
            self.int32_marked.insert(config.name.clone());
        }
        for mk in unmarked {
            self.txn.put(cf, mk, Vec::new())?;
        }
        Ok(())
    }

    /// [`write`](Self::write), except that the puts of the document, its
    /// new index entries and its vectors in the collection's column family
    /// are pushed to `puts` for the caller to hand to the transaction, many
    /// documents' at once. Nothing this writes reads them back. The caller
    /// stages the document's markers first ([`mark`](Self::mark)): what is
    /// left here reads nothing, so with no `old` it cannot fail halfway.
    fn write_into(
        &mut self,
        config: &CollectionConfig,
        cf: &str,
        mut p: Prepared,
        old: Option<&Prepared>,
        puts: &mut Vec<(Vec<u8>, Bytes)>,
    ) -> Result<()> {
        let dk = mem::take(&mut p.doc_key);
        // Each vector row is tagged with the document's index entries minus
        // the id (`{part}i:{field}\0{value}`), so a search finds a filter's
        // rows without the index; built once, for every vector field, and
        // before the entries move into the transaction.
        let tags = (!p.vectors.is_empty()).then(|| RowTags {
            fields: config.indexes.clone(),
            tags: p
                .index_keys
                .iter()
                .map(|k| k[..k.len() - p.id_enc.len()].to_vec())
                .collect(),
        });
        match old {
            // A new document: its entries move into the transaction.
            None => {
                let id = Bytes::from(p.id_enc.as_slice());
                for k in mem::take(&mut p.index_keys) {
                    puts.push((k, Bytes::clone(&id)));
                }
            }
            Some(old) => {
                for k in missing_from(&old.index_keys, &p.index_keys) {
                    self.txn.delete(cf, k.clone())?;
                }
                let id = Bytes::from(p.id_enc.as_slice());
                for k in missing_from(&p.index_keys, &old.index_keys) {
                    puts.push((k.clone(), Bytes::clone(&id)));
                }
            }
        }
        // A replacement that keeps a vector bit for bit and every index entry
        // (the row's tags) leaves its row as it is: no second copy of the
        // vector in the cache until a compaction, none rewritten on disk.
        let same_entries = old.is_some_and(|o| o.index_keys == p.index_keys);
        for vf in &config.vectors {
            let vk = keys::vector_key(&p.part, &vf.field, &p.id_enc);
            match (p.vectors.iter().find(|(f, _)| *f == vf.field), &tags) {
                (Some((_, v)), Some(tags)) => {
                    let stored = old.is_some_and(|o| {
                        o.vectors
                            .iter()
                            .any(|(f, w)| *f == vf.field && crate::vectors::same_bits(w, v))
                    });
                    if stored && same_entries {
                        continue;
                    }
                    puts.push((vk, f32s_to_le(v).into()));
                    self.vector_ops.push((
                        config.name.clone(),
                        vf.field.clone(),
                        // A stored vector (not checked again when prepared)
                        // moves to its new row as a load would take it.
                        if stored {
                            VectorOp::UpsertStored(dk.clone(), v.clone(), tags.clone())
                        } else {
                            VectorOp::Upsert(dk.clone(), v.clone(), tags.clone())
                        },
                    ));
                }
                _ => {
                    if old.is_some_and(|o| o.vectors.iter().any(|(f, _)| *f == vf.field)) {
                        self.txn.delete(cf, vk)?;
                        self.vector_ops.push((
                            config.name.clone(),
                            vf.field.clone(),
                            VectorOp::Delete(dk.clone()),
                        ));
                    }
                }
            }
        }
        puts.push((dk, mem::take(&mut p.bytes)));
        Ok(())
    }

    fn bump_count(&mut self, collection: &str, part: &[u8], delta: i64) {
        *self
            .counts
            .entry((collection.to_owned(), part.to_vec()))
            .or_default() += delta;
    }

    /// Inserts `doc` into `collection` and returns its `_id` (an ObjectId is
    /// generated when the document has none). Fails with `DuplicateId`,
    /// writing nothing, when the id is taken.
    pub fn insert(&mut self, collection: &str, doc: Document) -> Result<Bson> {
        self.insert_within(collection, None, doc)
    }

    /// [`insert`](Self::insert), refused with `InvalidPartition` (writing
    /// nothing) when `parts` is given and the document's partition is not
    /// among them: an upsert through a write that addressed some partitions
    /// must not land in another.
    pub fn insert_within(&mut self, collection: &str, parts: Option<&[Part]>, doc: Document) -> Result<Bson> {
        self.txn.check_room()?;
        let config = self.config(collection)?;
        let p = Self::prepare(&config, doc)?;
        self.check_insert(&config, parts, &p)?;
        self.write_new(&config, p)
    }

    /// [`insert_within`](Self::insert_within) of every document of `docs`,
    /// in order, returning their ids. All or nothing: every document is
    /// checked (its encoding, partition, and id against the collection and
    /// the documents before it) before any is written, and the error is the
    /// one a loop of single inserts would meet first.
    ///
    /// Encoding the documents and computing their index entries needs only
    /// the collection's config, so it runs in parallel (rayon) before the
    /// writes, which reach the transaction as one sorted run.
    pub fn insert_many_within(
        &mut self,
        collection: &str,
        parts: Option<&[Part]>,
        mut docs: Vec<Document>,
    ) -> Result<Vec<Bson>> {
        self.txn.check_room()?;
        let config = self.config(collection)?;
        // Ids are generated here, in order, so that generated ObjectIds
        // ascend as the documents do (but where bson's counter wraps, which
        // costs the sorts below their fast paths, nothing else); a document
        // that has one is not touched.
        let missing: Vec<usize> = docs
            .par_iter()
            .enumerate()
            .filter(|(_, doc)| id_of(doc).is_none())
            .map(|(i, _)| i)
            .collect();
        for i in missing {
            give_id(&mut docs[i]);
        }
        let paths = index_paths(&config)?;
        let mut prepared: Vec<Result<Prepared>> = docs
            .par_iter_mut()
            .map(|doc| Self::prepare_in(&config, &paths, doc, None))
            .collect();
        // What is left of the documents is freed beside the writes below,
        // on a core they leave idle.
        if docs.len() >= BACKGROUND_DROP_DOCS {
            rayon::spawn(move || drop(docs));
        } else {
            drop(docs);
        }
        // The documents before the first that failed to prepare are checked
        // first: a loop of single inserts would meet their errors before it.
        let good = prepared.iter().position(Result::is_err).unwrap_or(prepared.len());
        let cf = collection_cf(&config.name);
        let refused = {
            let ok = |i: usize| prepared[i].as_ref().expect("prepared before the first failure");
            let key = |i: usize| ok(i).doc_key.as_slice();
            // Ids usually come ascending (generated ObjectIds always do):
            // then none repeats, and one pass over the heads, in order,
            // shows it. On this thread: the pool is freeing the documents.
            let ascending = (1..good).all(|i| {
                let (a, b) = (ok(i - 1), ok(i));
                cmp_by_head((a.head, &a.doc_key), (b.head, &b.doc_key)).is_lt()
            });
            let repeat = if ascending { None } else { first_repeat(good, key) };
            let this = &*self;
            let checked = repeat.unwrap_or(good);
            // When no stored key lies between the smallest and the largest
            // of the new keys (a first load, or a batch appended after the
            // stored ids, as ascending ids and generated ObjectIds are), no
            // id is taken: one seek shows it, instead of a lookup per
            // document. A seek that gives up (many deleted entries there)
            // leaves it to the lookups.
            let bounds = match checked {
                0 => None,
                // Ascending: the first and the last.
                n if ascending => Some((key(0), key(n - 1))),
                n => (0..n).map(key).fold(None, |b, k| match b {
                    None => Some((k, k)),
                    Some((lo, hi)) => Some((k.min(lo), k.max(hi))),
                }),
            };
            let free = match bounds {
                None => true,
                Some((lo, hi)) => {
                    let mut end = hi.to_vec();
                    end.push(0);
                    this.txn.any_in(&cf, &KeyRange::new(lo, end))? == Some(false)
                }
            };
            // With every id free and no partitions addressed, nothing is
            // left to check.
            let refused = if free && parts.is_none() {
                None
            } else {
                (0..checked)
                    .into_par_iter()
                    .map(|i| {
                        this.check_partition(&config, parts, ok(i))?;
                        if free {
                            return Ok(());
                        }
                        this.check_id_free(&config, &cf, ok(i))
                    })
                    .find_first(Result::is_err)
            };
            match (refused, repeat) {
                (Some(refused), _) => refused,
                // Its partition is checked first, as a single insert would.
                (None, Some(i)) => self
                    .check_insert(&config, parts, ok(i))
                    .and(Err(Error::DuplicateId {
                        collection: collection.to_owned(),
                        id: show(&ok(i).id),
                    })),
                (None, None) => Ok(()),
            }
        };
        refused?;
        if good < prepared.len() {
            return Err(prepared.swap_remove(good).err().expect("failed to prepare"));
        }
        // Every document prepared: no copy of them into a Vec<Prepared>.
        let part = |i: usize| prepared[i].as_ref().map_or(&[][..], |p| p.part.as_slice());
        // Counts bumped once per run of one partition, not per document,
        // once the documents are staged.
        let mut runs: Vec<(Vec<u8>, i64)> = Vec::new();
        if config.partition_key.is_none() {
            runs.push((Vec::new(), good as i64));
        } else {
            let mut start = 0;
            while start < good {
                let run = (start..good).take_while(|&i| part(i) == part(start)).count();
                runs.push((part(start).to_vec(), run as i64));
                start += run;
            }
        }
        // The markers of every document before any document is staged:
        // reading them may fail, and must leave the transaction as it was.
        let int32 = prepared.iter().flatten().any(|p| matches!(p.id, Bson::Int32(_)));
        let multikey: BTreeSet<&String> = prepared.iter().flatten().flat_map(|p| &p.multikey).collect();
        self.mark(&config, &cf, int32, multikey)?;
        let mut ids = Vec::with_capacity(good);
        let mut puts = Vec::with_capacity(good * (1 + config.indexes.len() + config.vectors.len()));
        let mut prefix_lens = Vec::with_capacity(puts.capacity());
        self.vector_ops.reserve(good * config.vectors.len());
        for p in prepared {
            let p = p.expect("prepared");
            let id_len = p.id_enc.len();
            ids.push(p.id.clone());
            let from = puts.len();
            self.write_into(&config, &cf, p, None, &mut puts)?;
            prefix_lens.extend(
                puts[from..]
                    .iter()
                    .map(|(key, _)| key.len().saturating_sub(id_len)),
            );
        }
        self.txn.put_many(&cf, group_by_prefix(puts, &prefix_lens))?;
        for (part, n) in runs {
            self.bump_count(&config.name, &part, n);
        }
        Ok(ids)
    }

    /// Refuses `p` as a new document: outside `parts`, or its id taken.
    fn check_insert(&self, config: &CollectionConfig, parts: Option<&[Part]>, p: &Prepared) -> Result<()> {
        self.check_partition(config, parts, p)?;
        self.check_id_free(config, &collection_cf(&config.name), p)
    }

    /// Refuses `p` as a new document outside `parts`.
    fn check_partition(&self, config: &CollectionConfig, parts: Option<&[Part]>, p: &Prepared) -> Result<()> {
        let collection = config.name.as_str();
        if parts.is_some_and(<[Part]>::is_empty) {
            // `[]` addresses nothing, in a collection partitioned or not:
            // no new document lies inside it.
            return Err(Error::InvalidPartition {
                reason: format!(
                    "the document {} of {collection:?} is written through a handle that addresses no partition",
                    show(&p.id)
                ),
            });
        }
        if let (Some(parts), Some(key)) = (parts, &config.partition_key) {
            if !parts.iter().any(|part| part.0 == p.part) {
                return Err(Error::InvalidPartition {
                    reason: format!(
                        "the document {} of {collection:?} has {key:?} outside the partitions this write addresses",
                        show(&p.id)
                    ),
                });
            }
        }
        Ok(())
    }

    /// Refuses `p` as a new document of `config` (in column family `cf`)
    /// when its id is taken.
    fn check_id_free(&self, config: &CollectionConfig, cf: &str, p: &Prepared) -> Result<()> {
        if self.txn.get(cf, &p.doc_key)?.is_some() {
            return Err(Error::DuplicateId {
                collection: config.name.clone(),
                id: show(&p.id),
            });
        }
        Ok(())
    }

    /// Writes `p`, checked by [`check_insert`](Self::check_insert), as a new
    /// document; returns its id.
    fn write_new(&mut self, config: &CollectionConfig, p: Prepared) -> Result<Bson> {
        let (id, part) = (p.id.clone(), p.part.clone());
        self.write(config, p, None)?;
        // Counted once written: a failed write leaves the count as it was.
        self.bump_count(&config.name, &part, 1);
        Ok(id)
    }

    /// The stored document with `id` in `part`, vectors re-attached, as this
    /// transaction sees it.
    pub fn get(&self, collection: &str, part: &Part, id: &Bson) -> Result<Option<Document>> {
        let read = self.collection(collection)?;
        match read.get_by_id(part, id)? {
            None => Ok(None),
            Some(raw) => Ok(Some(read.materialize_full(&raw)?)),
        }
    }

    fn load_old(&self, config: &CollectionConfig, part: &[u8], id_enc: &[u8]) -> Result<Option<Prepared>> {
        let cf = collection_cf(&config.name);
        let doc_key = keys::doc_key(part, id_enc);
        let Some(bytes) = self.txn.get(&cf, &doc_key)? else {
            return Ok(None);
        };
        let raw = RawDocument::from_bytes(&bytes).map_err(|e| Error::Corrupt { what: e.to_string() })?;
        let index_keys = index_keys(config, &index_paths(config)?, part, id_enc, raw);
        let mut vectors = Vec::new();
        for vf in &config.vectors {
            if let Some(v) = self.txn.get(&cf, &keys::vector_key(part, &vf.field, id_enc))? {
                vectors.push((vf.field.clone(), crate::vectors::f32s_from_le(&v)));
            }
        }
        let id = raw
            .get("_id")
            .ok()
            .flatten()
            .and_then(|v| v.to_raw_bson().try_into().ok())
            .unwrap_or(Bson::Null);
        Ok(Some(Prepared {
            id,
            head: key_head(&doc_key),
            doc_key,
            part: part.to_vec(),
            id_enc: id_enc.to_vec(),
            bytes: Bytes::from(&*bytes),
            index_keys,
            vectors,
            multikey: Vec::new(),
        }))
    }

    /// Replaces the document with `_id` `id` in `part` by `doc` (whose `_id`,
    /// if present, must be `id`, and whose partition must be `part`). Returns
    /// whether a document was replaced; `false` changes nothing.
    pub fn replace(&mut self, collection: &str, part: &Part, id: &Bson, doc: Document) -> Result<bool> {
        let config = self.config(collection)?;
        let id_enc = encode_id(id).map_err(|e| Error::InvalidId {
            collection: collection.to_owned(),
            reason: e.to_string(),
        })?;
        self.replace_encoded(&config, &part.0, &id_enc, id, doc)
    }

    /// Replaces the document stored under `doc_key` (as found by a query).
    pub fn replace_key(&mut self, collection: &str, doc_key: &[u8], doc: Document) -> Result<bool> {
        let config = self.config(collection)?;
        let (part, id_enc, id) = replacement_id(&config, doc_key, &doc)?;
        self.replace_encoded(&config, part, id_enc, &id, doc)
    }

    /// Caps the bytes this transaction holds for its changes (documents,
    /// index entries and vectors buffered, replacements staged): once they
    /// pass `limit`, the next insert, replacement (staged or not) or delete
    /// fails with [`Error::TransactionTooLarge`](crate::Error::TransactionTooLarge)
    /// before changing anything; the operation that passed it is whole (so
    /// a transaction may end up to one operation past the limit). `None`
    /// (the default) lifts the cap.
    /// A server sets one, so that a small request (`update_many({}, ..)` on
    /// a large collection) cannot make it hold the collection in memory.
    pub fn limit_bytes(&mut self, limit: Option<u64>) {
        self.txn.limit_bytes(limit);
    }

    /// The bytes this transaction holds for its changes (see
    /// [`limit_bytes`](Self::limit_bytes)).
    pub fn held_bytes(&self) -> u64 {
        self.txn.held_bytes()
    }

    /// Drops replacements staged and not to be written (an update that
    /// failed part way): what they held stops counting against the limit.
    pub fn discard_staged(&mut self, staged: Vec<StagedReplace>) {
        self.release_staged(&staged);
    }

    /// Stops counting what `staged` held (only what this transaction
    /// counted: another's replacements never counted here).
    fn release_staged(&mut self, staged: &[StagedReplace]) {
        let serial = self.txn.writes().0;
        self.txn
            .release(staged.iter().filter(|s| s.at.0 == serial).map(|s| s.held).sum());
    }

    /// Checks and encodes the replacement of the document stored under
    /// `doc_key` by `doc`, writing nothing: `None` when no document is
    /// stored there. A multi-document update stages every document first and
    /// writes them with [`write_staged`](Self::write_staged) only once all
    /// are good, so that one bad document leaves the transaction as it was.
    /// Nothing may write a staged document between its staging and its
    /// writing (the staged replacement holds the document it replaces).
    pub fn stage_replace(
        &mut self,
        collection: &str,
        doc_key: &[u8],
        doc: Document,
    ) -> Result<Option<StagedReplace>> {
        let config = self.config(collection)?;
        let (part, id_enc, id) = replacement_id(&config, doc_key, &doc)?;
        self.prepare_replace(&config, part, id_enc, &id, doc)
    }

    /// Writes replacements staged by [`stage_replace`](Self::stage_replace);
    /// returns how many. A document staged twice, or any staged by another
    /// transaction or before this one last wrote (its stored copy may be
    /// stale: writing it would leave the indexes and counts out of step),
    /// fails the call, writing none of them.
    pub fn write_staged(&mut self, staged: Vec<StagedReplace>) -> Result<u64> {
        // Written or dropped here: their copies stop counting, and what the
        // writes buffer counts instead.
        self.release_staged(&staged);
        // Staged replacements mostly come from one collection: its
        // configuration is looked up once a run, not once a document.
        let mut config: Option<CollectionConfig> = None;
        let mut seen = std::collections::HashSet::with_capacity(staged.len());
        for s in &staged {
            if !seen.insert((s.collection.as_str(), s.new.doc_key.as_slice())) {
                return Err(Error::InvalidDocument {
                    collection: s.collection.clone(),
                    id: show(&s.new.id),
                    reason: "staged twice for one write".into(),
                });
            }
            if config.as_ref().is_none_or(|c| c.name != s.collection) {
                config = Some(self.config(&s.collection)?);
            }
            // Its index entries were worked out for the indexes then.
            if config.as_ref().is_some_and(|c| c.indexes != s.indexes) {
                return Err(Error::InvalidDocument {
                    collection: s.collection.clone(),
                    id: show(&s.new.id),
                    reason: "the collection's indexes changed since it was staged: stage it again".into(),
                });
            }
            if s.at != self.txn.writes() {
                return Err(Error::InvalidDocument {
                    collection: s.collection.clone(),
                    id: show(&s.new.id),
                    reason:
                        "staged by another transaction, or this one wrote since it was staged: stage it again"
                            .into(),
                });
            }
        }
        // Every collection's markers first, once: their reads (the only
        // ones a write makes) all come before the first document is
        // written, so a failed read (a disk error) writes no document. (With
        // several collections, the markers of those before it may stay: a
        // marker only makes the planner more careful.)
        let mut marks: Vec<(&str, bool, std::collections::BTreeSet<&String>)> = Vec::new();
        for s in &staged {
            let i = match marks.iter().position(|(c, ..)| *c == s.collection) {
                Some(i) => i,
                None => {
                    marks.push((&s.collection, false, Default::default()));
                    marks.len() - 1
                }
            };
            marks[i].1 |= matches!(s.new.id, Bson::Int32(_));
            marks[i].2.extend(&s.new.multikey);
        }
        for (collection, int32, fields) in marks {
            let current = match config.take() {
                Some(c) if c.name == collection => c,
                _ => self.config(collection)?,
            };
            self.mark(&current, &collection_cf(collection), int32, fields)?;
            config = Some(current);
        }
        let n = staged.len() as u64;
        for StagedReplace {
            collection, new, old, ..
        } in staged
        {
            let current = match config.take() {
                Some(c) if c.name == collection => c,
                _ => self.config(&collection)?,
            };
            let cf = collection_cf(&collection);
            let mut puts = Vec::new();
            self.write_into(&current, &cf, new, Some(&old), &mut puts)?;
            self.txn.put_many(&cf, puts)?;
            config = Some(current);
        }
        Ok(n)
    }

    fn replace_encoded(
        &mut self,
        config: &CollectionConfig,
        part: &[u8],
        id_enc: &[u8],
        id: &Bson,
        doc: Document,
    ) -> Result<bool> {
        match self.prepare_replace(config, part, id_enc, id, doc)? {
            Some(StagedReplace { new, old, held, .. }) => {
                self.txn.release(held);
                self.write(config, new, Some(&old))?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn prepare_replace(
        &mut self,
        config: &CollectionConfig,
        part: &[u8],
        id_enc: &[u8],
        id: &Bson,
        mut doc: Document,
    ) -> Result<Option<StagedReplace>> {
        self.txn.check_room()?;
        let collection = &config.name;
        if let Some(other) = doc.get("_id") {
            if encode_id(other).ok().as_deref() != Some(id_enc) {
                return Err(Error::InvalidDocument {
                    collection: collection.clone(),
                    id: show(id),
                    reason: format!("a replacement cannot change _id (to {})", show(other)),
                });
            }
        }
        let Some(old) = self.load_old(config, part, id_enc)? else {
            return Ok(None);
        };
        if !doc.contains_key("_id") {
            // The stored _id keeps its type (an int32 and an int64 id share one key).
            let kept = if old.id == Bson::Null {
                id.clone()
            } else {
                old.id.clone()
            };
            let mut with_id = Document::new();
            with_id.insert("_id", kept);
            with_id.extend(doc);
            doc = with_id;
        }
        let p = Self::prepare_in(config, &index_paths(config)?, &mut doc, Some(&old))?;
        if p.part != part {
            return Err(Error::InvalidDocument {
                collection: collection.clone(),
                id: show(id),
                reason: "a replacement cannot move a document to another partition".into(),
            });
        }
        let held = p.held_bytes() + old.held_bytes();
        self.txn.hold(held);
        Ok(Some(StagedReplace {
            collection: config.name.clone(),
            indexes: config.indexes.clone(),
            new: p,
            old,
            at: self.txn.writes(),
            held,
        }))
    }

    /// Deletes the document with `_id` `id` in `part`; returns whether there was one.
    pub fn delete(&mut self, collection: &str, part: &Part, id: &Bson) -> Result<bool> {
        self.txn.check_room()?;
        let config = self.config(collection)?;
        let id_enc = encode_id(id).map_err(|e| Error::InvalidId {
            collection: collection.to_owned(),
            reason: e.to_string(),
        })?;
        self.delete_encoded(&config, &part.0, &id_enc)
    }

    /// Deletes the document stored under `doc_key` (as found by a query).
    pub fn delete_key(&mut self, collection: &str, doc_key: &[u8]) -> Result<bool> {
        self.txn.check_room()?;
        let config = self.config(collection)?;
        let (part, id) = split_doc_key(&config, doc_key)?;
        self.delete_encoded(&config, part, id)
    }

    /// Deletes the documents stored under `doc_keys` (as found by a query;
    /// a key named twice counts once); returns how many there were. Every
    /// document is read before any is deleted, so a read that fails leaves
    /// the transaction as it was.
    pub fn delete_keys(&mut self, collection: &str, doc_keys: &[Vec<u8>]) -> Result<u64> {
        self.txn.check_room()?;
        let config = self.config(collection)?;
        let mut seen = std::collections::HashSet::with_capacity(doc_keys.len());
        let mut doomed = Vec::with_capacity(doc_keys.len());
        for key in doc_keys {
            if !seen.insert(key.as_slice()) {
                continue;
            }
            let (part, id) = split_doc_key(&config, key)?;
            if let Some(old) = self.load_old(&config, part, id)? {
                // What the removal needs, not the document and its vectors:
                // a delete of a million documents holds no million copies.
                doomed.push((part, id, Removal::of(old)));
            }
        }
        // All of it known before anything is deleted: past the limit, none is.
        self.txn.check_room_for(
            doomed
                .iter()
                .map(|(part, id, removal)| removal.held_bytes(part.len() + id.len() + 2))
                .sum(),
        )?;
        let n = doomed.len() as u64;
        for (part, id, removal) in doomed {
            self.remove_loaded(&config, part, id, &removal)?;
        }
        Ok(n)
    }

    fn delete_encoded(&mut self, config: &CollectionConfig, part: &[u8], id_enc: &[u8]) -> Result<bool> {
        let Some(old) = self.load_old(config, part, id_enc)? else {
            return Ok(false);
        };
        self.remove_loaded(config, part, id_enc, &Removal::of(old))?;
        Ok(true)
    }

    /// Deletes a document with what [`Removal::of`] kept of it.
    fn remove_loaded(
        &mut self,
        config: &CollectionConfig,
        part: &[u8],
        id_enc: &[u8],
        removal: &Removal,
    ) -> Result<()> {
        let cf = collection_cf(&config.name);
        let dk = keys::doc_key(part, id_enc);
        for k in &removal.index_keys {
            self.txn.delete(&cf, k.clone())?;
        }
        for field in &removal.vector_fields {
            self.txn.delete(&cf, keys::vector_key(part, field, id_enc))?;
            self.vector_ops
                .push((config.name.clone(), field.clone(), VectorOp::Delete(dk.clone())));
        }
        self.txn.delete(&cf, dk)?;
        self.bump_count(&config.name, part, -1);
        Ok(())
    }

    /// Creates an index on `field` over the documents already there, in this
    /// transaction. Fails with `IndexExists` if the field is indexed.
    pub fn create_index(&mut self, collection: &str, field: &str) -> Result<()> {
        let mut config = self.config(collection)?;
        if config.indexes.iter().any(|f| f == field) {
            return Err(Error::IndexExists {
                collection: collection.to_owned(),
                field: field.to_owned(),
            });
        }
        config.indexes.push(field.to_owned());
        config.validate()?;
        let cf = collection_cf(collection);
        let mut new_entries = Vec::new();
        let mut multikey = false;
        for item in self
            .txn
            .range(&cf, &crate::store::KeyRange::all(), Direction::Forward)?
        {
            let (key, bytes) = item?;
            let Ok((part, id)) = split_doc_key(&config, &key) else {
                continue;
            };
            let raw = RawDocument::from_bytes(&bytes).map_err(|e| Error::Corrupt { what: e.to_string() })?;
            for k in entries(part, field, id, raw)? {
                new_entries.push((k, Bytes::from(id)));
            }
            multikey |= crate::index::is_multikey(raw, field);
        }
        self.txn
            .check_room_for(new_entries.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum())?;
        if multikey {
            self.txn.put(&cf, keys::multikey_key(field), Vec::new())?;
        }
        self.txn.put_many(&cf, new_entries)?;
        self.save_config(config)
    }

    /// Drops the index on `field` and its entries.
    pub fn drop_index(&mut self, collection: &str, field: &str) -> Result<()> {
        let mut config = self.config(collection)?;
        let Some(pos) = config.indexes.iter().position(|f| f == field) else {
            return Err(Error::UnknownIndex {
                collection: collection.to_owned(),
                field: field.to_owned(),
            });
        };
        config.indexes.remove(pos);
        let cf = collection_cf(collection);
        let parts = crate::vectors::partitions(&config, &self.txn)?;
        for part in parts {
            self.txn.delete_range(
                &cf,
                crate::store::KeyRange::prefix(&keys::index_prefix(&part, field)),
            )?;
        }
        self.txn.delete(&cf, keys::multikey_key(field))?;
        // Rows kept by later writes (same vector, same entries) would keep
        // this field's tags as they are now: never trusted again.
        for vf in &config.vectors {
            self.vector_ops.push((
                collection.to_owned(),
                vf.field.clone(),
                VectorOp::Uncover(field.to_owned()),
            ));
        }
        self.save_config(config)
    }

    fn save_config(&mut self, config: CollectionConfig) -> Result<()> {
        let bytes =
            bson::to_vec(&config.to_document()).map_err(|e| Error::Corrupt { what: e.to_string() })?;
        self.txn.put(CATALOG_CF, config.name.as_bytes(), bytes)?;
        self.catalog_changed = true;
        self.configs.insert(config.name.clone(), config);
        Ok(())
    }

    /// Discards every change (the same as dropping the transaction).
    pub fn rollback(self) {}

    /// Commits everything atomically; returns the commit version.
    pub fn commit(mut self) -> Result<u64> {
        for ((collection, part), delta) in std::mem::take(&mut self.counts) {
            if delta == 0 {
                continue;
            }
            let cf = collection_cf(&collection);
            let key = keys::count_key(&part);
            let n = read_count(self.txn.get(&cf, &key)?.as_deref())?;
            // A negative count is a bookkeeping bug: caught by the tests
            // (debug builds), clamped rather than stored in release.
            debug_assert!(
                n as i64 + delta >= 0,
                "count of {collection:?} would go below 0 ({n} + {delta})"
            );
            let n = crate::read::with_delta(n, delta);
            self.txn.put(&cf, key, n.to_le_bytes().to_vec())?;
        }
        let db = self.db;
        let ops = std::mem::take(&mut self.vector_ops);
        let mut failed = None;
        let created = std::mem::take(&mut self.created);
        let version = db.shared.catalog.commit(self.catalog_changed, || {
            self.txn.commit_with(|version| {
                // The new collections' caches first: this commit's vectors
                // go into them.
                for config in &created {
                    db.add_vector_set(config, version);
                }
                // Recorded here, before this commit's turn ends, so that
                // the next writer already finds it.
                failed = db.apply_vector_ops(&ops, version).map(|cause| {
                    db.vectors_failed(format!(
                        "commit {version} was written, but its vectors did not all reach the caches \
                         ({cause}); reopen the database to rebuild them"
                    ))
                });
            })
        })?;
        if let Some(err) = failed {
            // The documents are committed; their vectors did not all reach
            // the caches. Said, and no further write, until a reopen.
            return Err(err);
        }
        if !ops.is_empty() {
            db.compact_vectors(&ops);
        }
        Ok(version)
    }
}

/// A value as it appears in messages: relaxed extended JSON.
pub(crate) fn show(v: &Bson) -> String {
    v.clone().into_relaxed_extjson().to_string()
}

/// The value at dot path `path` in `doc`, through nested documents only
/// (how a partition key is read).
pub fn get_path<'d>(doc: &'d Document, path: &str) -> Option<&'d Bson> {
    let mut parts = path.split('.');
    let mut cur = doc.get(parts.next()?)?;
    for p in parts {
        cur = cur.as_document()?.get(p)?;
    }
    Some(cur)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Keys compared by their heads order exactly as their bytes, up
        /// to the head's 16 bytes and past them.
        #[test]
        fn keys_compared_by_head_order_as_their_bytes((a, b) in crate::testing::key_pair(19)) {
            prop_assert_eq!(cmp_by_head((key_head(&a), &a), (key_head(&b), &b)), a.cmp(&b));
        }
    }
}
