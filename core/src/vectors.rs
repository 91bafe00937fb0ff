//! The vector caches of a collection and the conversions between stored
//! vector bytes, BSON values and f32 rows.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};

use bson::spec::BinarySubtype;
use bson::{Binary, Bson, Document};
use slate_vector::{CacheConfig, Metric, RowTags, VectorCache};

use crate::catalog::{collection_cf, CollectionConfig, VectorField};
use crate::keys;
use crate::store::{Direction, Snapshot};
use crate::{Database, Error, Result};

/// A snapshot's view of one vector field's cache.
pub type VectorView = slate_vector::CacheView;

/// A staged change to a vector cache, applied when its commit is published.
/// Rows are keyed by the document key (`{partition}d:{id}`).
#[derive(Debug, Clone)]
pub(crate) enum VectorOp {
    /// The document's key, its vector, and its index entries as row tags.
    Upsert(Vec<u8>, Vec<f32>, RowTags),
    /// An upsert of the vector the document already held (its tags new):
    /// checked only as a load checks it.
    UpsertStored(Vec<u8>, Vec<f32>, RowTags),
    Delete(Vec<u8>),
    /// An index dropped: its field's tags are no longer trusted.
    Uncover(String),
}

/// A cache is compacted after a commit once at least this fraction of its
/// rows are retired (old versions of updated vectors, deleted ones) ...
const COMPACT_RETIRED_FRACTION: f64 = 0.25;
/// ... and it holds at least this many rows (one default chunk).
const COMPACT_MIN_ROWS: usize = 1024;

/// What the last compaction of one cache left behind.
#[derive(Debug, Default)]
struct Compacted {
    /// The oldest version it kept (rows retired at or below it were dropped).
    floor: Option<u64>,
    /// Retired rows it had to keep for older readers.
    retired_kept: usize,
}

/// The caches of one collection's vector fields.
#[derive(Debug)]
pub(crate) struct VectorSet {
    /// The version of the commit that created the collection (0 for one
    /// loaded at open): older snapshots saw another collection of the name,
    /// or none, and must not read these caches.
    pub(crate) born: u64,
    caches: BTreeMap<String, Arc<VectorCache>>,
    /// Per field; locked only by committing threads, which take turns anyway.
    compacted: BTreeMap<String, Mutex<Compacted>>,
}

impl VectorSet {
    pub(crate) fn new(config: &CollectionConfig, born: u64) -> Self {
        let caches = config
            .vectors
            .iter()
            .filter_map(|vf| {
                VectorCache::with_config(CacheConfig::new(vf.dim, vf.metric).codes(vf.codes))
                    .ok()
                    .map(|c| (vf.field.clone(), Arc::new(c)))
            })
            .collect::<BTreeMap<_, _>>();
        let compacted = caches.keys().map(|f| (f.clone(), Mutex::default())).collect();
        Self {
            born,
            caches,
            compacted,
        }
    }

    /// Builds the caches from the `v:` keys in `snap`.
    pub(crate) fn load(config: &CollectionConfig, snap: &dyn Snapshot) -> Result<Self> {
        let set = Self::new(config, 0);
        let cf = collection_cf(&config.name);
        for vf in &config.vectors {
            let Some(cache) = set.caches.get(&vf.field) else {
                continue;
            };
            let mut items: Vec<(Vec<u8>, Vec<f32>)> = Vec::new();
            for part in partitions(config, snap)? {
                let prefix = keys::vector_prefix(&part, &vf.field);
                for entry in snap.prefix(&cf, &prefix, Direction::Forward)? {
                    let (key, bytes) = entry?;
                    let id = &key[prefix.len()..];
                    items.push((keys::doc_key(&part, id), f32s_from_le(&bytes)));
                }
            }
            cache.load(items, snap.version()).map_err(|e| Error::Corrupt {
                what: format!("vector field {:?} of collection {:?}: {e}", vf.field, config.name),
            })?;
        }
        Ok(set)
    }

    pub(crate) fn view(&self, field: &str, version: u64) -> Option<VectorView> {
        self.caches.get(field).and_then(|c| c.view(version).ok())
    }

    pub(crate) fn cache(&self, field: &str) -> Option<&Arc<VectorCache>> {
        self.caches.get(field)
    }

    /// Bytes held by the caches.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.caches.values().map(|c| c.memory_bytes()).sum()
    }
}

/// The partition prefixes of a collection present in `snap` (one empty prefix
/// when the collection is not partitioned).
pub(crate) fn partitions(config: &CollectionConfig, snap: &dyn Snapshot) -> Result<Vec<Vec<u8>>> {
    if config.partition_key.is_none() {
        return Ok(vec![Vec::new()]);
    }
    let cf = collection_cf(&config.name);
    let mut out = Vec::new();
    // Count keys `{P}n:` exist for every partition that ever held a document;
    // skip from one partition to the next by seeking past its prefix.
    let mut from: Option<Vec<u8>> = None;
    loop {
        let range = crate::store::KeyRange {
            start: from.clone(),
            end: None,
        };
        let mut iter = snap.range(&cf, &range, Direction::Forward)?;
        let Some(entry) = iter.next() else { break };
        let (key, _) = entry?;
        if key.starts_with(b"m:") {
            // Multikey markers carry no partition; partitions resume after them.
            match crate::store::prefix_end(b"m:") {
                Some(next) => from = Some(next),
                None => break,
            }
            continue;
        }
        let Ok((_, n)) = crate::value::decode_value(&key) else {
            break;
        };
        out.push(key[..n].to_vec());
        match crate::value::key_successor(&key[..n]) {
            Some(next) => from = Some(next),
            None => break,
        }
    }
    Ok(out)
}

#[cfg(test)]
thread_local! {
    /// Makes this thread's next commit with vector changes fail to apply them.
    pub(crate) static FAIL_VECTOR_OPS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl Database {
    /// Applies a commit's vector changes at `version`; runs before the commit
    /// is published, so no reader sees the documents without their vectors.
    /// Returns what failed, if anything (the caches then miss changes).
    pub(crate) fn apply_vector_ops(
        &self,
        ops: &[(String, String, VectorOp)],
        version: u64,
    ) -> Option<String> {
        let mut failed = None;
        #[cfg(test)]
        if FAIL_VECTOR_OPS.with(std::cell::Cell::take) {
            return Some("injected by a test".into());
        }
        let mut by_cache: BTreeMap<(&str, &str), Vec<&VectorOp>> = BTreeMap::new();
        for (collection, field, op) in ops {
            by_cache
                .entry((collection.as_str(), field.as_str()))
                .or_default()
                .push(op);
        }
        for ((collection, field), ops) in by_cache {
            let Some(set) = self.vector_set(collection) else {
                continue;
            };
            let Some(cache) = set.cache(field) else { continue };
            let mut writer = cache.writer();
            for op in ops {
                // Vectors were validated when staged; a failure here is a bug.
                let result = match op {
                    VectorOp::Upsert(key, v, tags) => writer.upsert_tagged(key, v, tags.clone()),
                    VectorOp::UpsertStored(key, v, tags) => writer.upsert_tagged_stored(key, v, tags.clone()),
                    VectorOp::Delete(key) => {
                        writer.delete(key);
                        Ok(())
                    }
                    VectorOp::Uncover(index) => {
                        writer.uncover(index);
                        Ok(())
                    }
                };
                if let Err(e) = result {
                    let cause = format!("vector cache {collection}.{field}: {e}");
                    log::error!("{cause}");
                    failed.get_or_insert(cause);
                }
            }
            if let Err(e) = writer.commit(version) {
                let cause = format!("vector cache {collection}.{field}: commit at {version}: {e}");
                log::error!("{cause}");
                failed.get_or_insert(cause);
            }
        }
        failed
    }
}

impl Database {
    /// Runs after a commit (its write lock released): compacts each cache
    /// that `ops` changed once its retired rows pass the threshold, keeping
    /// every row that a live snapshot may still read.
    ///
    /// Retired rows accumulate with every update and delete; without this
    /// the cache grows with the number of writes, not of vectors. The trigger
    /// needs [`COMPACT_RETIRED_FRACTION`] of the rows retired, at least
    /// [`COMPACT_MIN_ROWS`] rows, that many newly retired rows since the last
    /// compaction (so a reader pinning old rows does not make every commit
    /// copy the cache for nothing), and the oldest reader to have moved on.
    ///
    /// Compaction takes the store's write lock: no commit can be half-way
    /// (on RocksStore new snapshots wait for one), the next writer waits at
    /// `begin_write` instead, and no snapshot older than the floor can appear.
    /// Searches go on throughout: views already taken keep the old rows, new
    /// views read the old generation until the new one is swapped in.
    pub(crate) fn compact_vectors(&self, ops: &[(String, String, VectorOp)]) {
        let touched: BTreeSet<(&str, &str)> = ops.iter().map(|(c, f, _)| (c.as_str(), f.as_str())).collect();
        for (collection, field) in touched {
            let Some(set) = self.vector_set(collection) else {
                continue;
            };
            let (Some(cache), Some(compacted)) = (set.cache(field), set.compacted.get(field)) else {
                continue;
            };
            let fraction = cache.retired_fraction();
            if fraction < COMPACT_RETIRED_FRACTION {
                continue;
            }
            let Ok(rows) = cache.view(u64::MAX).map(|v| v.row_count()) else {
                continue;
            };
            let mut last = compacted.lock().unwrap_or_else(PoisonError::into_inner);
            let retired = (fraction * rows as f64).round() as usize;
            let needed = (COMPACT_RETIRED_FRACTION * rows as f64).ceil() as usize;
            if rows < COMPACT_MIN_ROWS || retired < last.retired_kept + needed {
                continue;
            }
            // Not on a thread inside a write transaction (it would wait on
            // itself): the next commit tries again.
            let Ok(_writer) = self.store.write_lock() else {
                continue;
            };
            let floor = self.shared.readers.floor(self.untracked.as_ref());
            if last.floor.is_some_and(|f| floor <= f) {
                continue;
            }
            match cache.compact(floor) {
                Ok(report) => {
                    log::debug!(
                        "vector cache {collection}.{field}: compacted at version {floor}, {} -> {} rows",
                        report.rows_before,
                        report.rows_after
                    );
                    let kept = cache.retired_fraction() * report.rows_after as f64;
                    *last = Compacted {
                        floor: Some(floor),
                        retired_kept: kept.round() as usize,
                    };
                }
                Err(e) => log::warn!("vector cache {collection}.{field}: compaction at {floor}: {e}"),
            }
        }
    }
}

/// Little-endian f32 bytes as stored under `v:` keys.
pub(crate) fn f32s_to_le(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The inverse of [`f32s_to_le`]; a trailing partial value is ignored.
pub fn f32s_from_le(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Removes the vector at `vf.field` from `doc` and checks it: an array of
/// numbers, a BSON vector (binary subtype 9) or a binary of little-endian
/// f32 (subtype 0 or user-defined), `dim` long, every value finite.
/// `Ok(None)` when the field is absent or null; refused when its path runs
/// through an array (the vector would stay in the document, out of reach of
/// every search).
///
/// `stored`: the vector the document held before (a replacement); one equal
/// to it bit for bit is kept unchecked.
pub(crate) fn extract_vector(
    doc: &mut Document,
    vf: &VectorField,
    stored: Option<&[f32]>,
) -> std::result::Result<Option<Vec<f32>>, String> {
    let Some(value) = take_path(doc, &vf.field)? else {
        return Ok(None);
    };
    let Some(v) = bson_to_vector(&value)? else {
        return Ok(None);
    };
    if !stored.is_some_and(|s| same_bits(s, &v)) {
        slate_vector::check_vector_for(&v, vf.dim, vf.metric).map_err(|e| e.to_string())?;
    }
    // Under cosine a zero vector is stored as such (at distance 1 from
    // everything); numbers too small for f32 must not become one, even where
    // a zero vector is stored already (the same bits as the one kept).
    if vf.metric == Metric::Cosine && v.iter().all(|&x| x == 0.0) && has_nonzero_number(&value) {
        return Err("its numbers are too small for f32: it would be stored as a zero vector".into());
    }
    Ok(Some(v))
}

/// Whether two vectors are equal bit for bit.
pub(crate) fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// Whether `value` is an array holding a number other than zero.
fn has_nonzero_number(value: &Bson) -> bool {
    let Bson::Array(items) = value else { return false };
    items.iter().any(|x| match x {
        Bson::Double(d) => *d != 0.0,
        Bson::Int32(n) => *n != 0,
        Bson::Int64(n) => *n != 0,
        _ => false,
    })
}

/// Converts a BSON value to a vector (`None` for null); the caller checks it.
pub fn bson_to_vector(value: &Bson) -> std::result::Result<Option<Vec<f32>>, String> {
    match value {
        Bson::Null => Ok(None),
        Bson::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, x)| match x {
                // A finite double past f32's range would read as infinite.
                Bson::Double(d) if d.is_finite() && (*d as f32).is_infinite() => {
                    Err(format!("element {i} is {d}: beyond the range of f32"))
                }
                Bson::Double(d) => Ok(*d as f32),
                Bson::Int32(n) => Ok(*n as f32),
                Bson::Int64(n) => Ok(*n as f32),
                other => Err(format!("element {i} is {:?}, not a number", other.element_type())),
            })
            .collect::<std::result::Result<Vec<f32>, String>>()
            .map(Some),
        Bson::Binary(b) => binary_to_vector(b).map(Some),
        other => Err(format!(
            "{:?} is neither an array of numbers nor a binary vector (subtype 9, or f32 under subtype 0)",
            other.element_type()
        )),
    }
}

/// A binary's vector: a BSON vector (subtype 9, the MongoDB drivers'
/// `Vector`) of float32 or int8 values, or the bytes of little-endian f32
/// under the generic subtype (0) or a user-defined one (0x80 and above).
/// Every other subtype (a UUID, an MD5, encrypted or deprecated binary) is
/// refused rather than read as floats, and so is a packed-bit vector.
fn binary_to_vector(b: &Binary) -> std::result::Result<Vec<f32>, String> {
    match b.subtype {
        BinarySubtype::Vector => match bson::binary::Vector::try_from(b) {
            Ok(bson::binary::Vector::Float32(v)) => Ok(v),
            // Every i8 is exactly an f32.
            Ok(bson::binary::Vector::Int8(v)) => Ok(v.into_iter().map(f32::from).collect()),
            Ok(bson::binary::Vector::PackedBit(_)) => {
                Err("a packed-bit BSON vector is not a vector of numbers (float32 or int8)".to_owned())
            }
            Err(e) => Err(format!("a malformed BSON vector: {e}")),
        },
        BinarySubtype::Generic | BinarySubtype::UserDefined(_) => {
            if !b.bytes.len().is_multiple_of(4) {
                return Err(format!(
                    "binary of {} bytes is not a whole number of f32",
                    b.bytes.len()
                ));
            }
            Ok(f32s_from_le(&b.bytes))
        }
        other => Err(format!(
            "a binary of subtype {:#04x} ({other:?}) is not a vector: use subtype 0 (little-endian f32) or 9 (a BSON vector)",
            u8::from(other)
        )),
    }
}

/// A vector as BSON: an array of doubles.
pub fn vector_to_bson(v: &[f32]) -> Bson {
    Bson::Array(v.iter().map(|x| Bson::Double(f64::from(*x))).collect())
}

/// Removes and returns the value at dot path `path` (through nested
/// documents): `None` where the path is missing or runs into a scalar or an
/// array without it, an error where it runs into an array whose documents
/// hold it.
fn take_path(doc: &mut Document, path: &str) -> std::result::Result<Option<Bson>, String> {
    match path.split_once('.') {
        None => Ok(doc.remove(path)),
        Some((head, rest)) => match doc.get_mut(head) {
            Some(Bson::Document(inner)) => take_path(inner, rest),
            // Refused only where a vector could be stranded: an element
            // holding the rest of the path.
            Some(Bson::Array(items)) => {
                let next = rest.split('.').next().unwrap_or(rest);
                if items
                    .iter()
                    .any(|e| matches!(e, Bson::Document(d) if d.contains_key(next)))
                {
                    Err(format!(
                        "the path runs through an array at {head:?}: a vector field's path goes through documents only"
                    ))
                } else {
                    Ok(None)
                }
            }
            _ => Ok(None),
        },
    }
}

/// Sets the value at dot path `path`, creating nested documents as needed.
pub fn set_path(doc: &mut Document, path: &str, value: Bson) {
    match path.split_once('.') {
        None => {
            doc.insert(path, value);
        }
        Some((head, rest)) => {
            if !matches!(doc.get(head), Some(Bson::Document(_))) {
                doc.insert(head, Document::new());
            }
            if let Some(Bson::Document(inner)) = doc.get_mut(head) {
                set_path(inner, rest, value);
            }
        }
    }
}
