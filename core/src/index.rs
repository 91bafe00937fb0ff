//! Index entries of a document, and an integrity check over a whole collection.

use std::collections::BTreeSet;

use std::ops::ControlFlow;

use bson::{RawBsonRef, RawDocument};

use crate::catalog::{collection_cf, CollectionConfig};
use crate::keys;
use crate::read::{all_keys, split_doc_key};
use crate::store::Snapshot;
use crate::value::{
    crosses_array, encode_value, index_values, lookup_path, visit_path, FieldPath, LeafArrays, PathValue,
};
use crate::{Error, Result};

/// The index keys that document `doc` (with key parts `part`, `id`) has in the
/// index on `field`: one per distinct value at the path (each array element;
/// `null` where the field is missing), sorted.
pub(crate) fn entries(part: &[u8], field: &str, id: &[u8], doc: &RawDocument) -> Result<Vec<Vec<u8>>> {
    Ok(entries_at(part, field, &index_path(field)?, id, doc))
}

/// `field` parsed as the path its index reads.
pub(crate) fn index_path(field: &str) -> Result<FieldPath> {
    FieldPath::parse(field).map_err(|e| Error::InvalidConfig {
        collection: String::new(),
        reason: e.to_string(),
    })
}

/// [`entries`] with `field` already parsed into `path`.
pub(crate) fn entries_at(
    part: &[u8],
    field: &str,
    path: &FieldPath,
    id: &[u8],
    doc: &RawDocument,
) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut value = Vec::new();
    for v in index_values(doc, path) {
        value.clear();
        encode_value(v, &mut value);
        out.push(keys::index_key(part, field, &value, id));
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// [`entries_at`] and [`is_multikey_at`] at once. A document with one value
/// at `path`, neither an array nor `undefined`, not reached through an
/// array (the usual case), has the one entry for it (both walks would find
/// that value alone) and does not mark the field: one walk and one
/// allocation find both. Any other document takes both walks.
pub(crate) fn entries_and_multikey_at(
    part: &[u8],
    field: &str,
    path: &FieldPath,
    id: &[u8],
    doc: &RawDocument,
) -> (Vec<Vec<u8>>, bool) {
    let mut first = None;
    let mut seen = 0;
    let _ = visit_path(doc, path, LeafArrays::Whole, &mut |v| {
        seen += 1;
        first = Some(v);
        if seen > 1 {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    match first {
        Some(one)
            if seen == 1
                && !matches!(
                    one,
                    PathValue::Value(RawBsonRef::Array(_) | RawBsonRef::Undefined)
                )
                && !(path.len() > 1 && crosses_array(doc, path)) =>
        {
            let value = match one {
                PathValue::Missing => RawBsonRef::Null,
                PathValue::Value(v) => v,
            };
            let mut key = keys::index_prefix(part, field);
            encode_value(value, &mut key);
            key.extend_from_slice(id);
            (vec![key], false)
        }
        _ => (entries_at(part, field, path, id, doc), is_multikey_at(doc, path)),
    }
}

/// Whether `doc` holds an array on the way to, or at, `field`: then an index
/// on `field` may hold several entries for it, and range bounds on the field
/// must not be intersected into one scan.
pub(crate) fn is_multikey(doc: &RawDocument, field: &str) -> bool {
    FieldPath::parse(field).is_ok_and(|path| is_multikey_at(doc, &path))
}

/// [`is_multikey`] with the field already parsed into `path`.
///
/// Also marked: a document with no value there (the path runs into an
/// array of scalars or an empty one: no index entry), one holding
/// `undefined` (indexed like null, sorted below it), and one reaching the
/// field through an array (`a.b` of `{a: [{b: 1}, 7]}`: one entry, 1, but
/// a sort sees null too). So a field not marked has exactly one entry per
/// document, whose value orders the document as a sort on the field does:
/// the index can be read in a sort's order.
pub(crate) fn is_multikey_at(doc: &RawDocument, path: &FieldPath) -> bool {
    rule_2_multikey_at(doc, path) || crosses_array(doc, path)
}

/// The rule [`is_multikey_at`] followed under [`keys::multikey_rule_2_key`]:
/// an array, several values, none, or `undefined`.
fn rule_2_multikey_at(doc: &RawDocument, path: &FieldPath) -> bool {
    let values = lookup_path(doc, path, LeafArrays::Whole);
    values.len() != 1
        || values.iter().any(|v| {
            matches!(
                v,
                PathValue::Value(bson::RawBsonRef::Array(_) | bson::RawBsonRef::Undefined)
            )
        })
}

/// The rule [`is_multikey_at`] followed before rule 2
/// ([`keys::multikey_rule_2_key`]): an array, or several values. What a
/// collection without either rule's key promises.
fn was_multikey_at(doc: &RawDocument, path: &FieldPath) -> bool {
    let values = lookup_path(doc, path, LeafArrays::Whole);
    values.len() > 1
        || values
            .iter()
            .any(|v| matches!(v, PathValue::Value(bson::RawBsonRef::Array(_))))
}

/// Checks that the collection's index and count keys agree with its documents:
/// every document has exactly its index entries, every entry points at a
/// document that has it, each partition's count is its number of documents,
/// an indexed field any document holds several values of is marked multikey
/// (a marker may outlive the documents that needed it; it only costs the
/// planner an intersection), no field without an index is marked, and every
/// stored vector has its document. Returns the problems found (empty when
/// sound). For tests.
pub fn check_integrity(snap: &dyn Snapshot, config: &CollectionConfig) -> Result<Vec<String>> {
    let cf = collection_cf(&config.name);
    let all = all_keys(snap, &cf)?;
    let paths = config
        .indexes
        .iter()
        .map(|field| index_path(field))
        .collect::<Result<Vec<_>>>()?;
    // The markers a collection created before the current rule has promise
    // only what the older rule marked.
    let has = |key: Vec<u8>| all.binary_search_by(|(k, _)| k.as_slice().cmp(&key)).is_ok();
    let marks = if has(keys::multikey_rule_key()) {
        is_multikey_at
    } else if has(keys::multikey_rule_2_key()) {
        rule_2_multikey_at
    } else {
        was_multikey_at
    };
    let mut multikey = BTreeSet::new();
    let mut expected_index = BTreeSet::new();
    let mut counts: std::collections::BTreeMap<Vec<u8>, u64> = Default::default();
    let mut problems = Vec::new();
    let mut actual_index = BTreeSet::new();
    let mut stored_counts = std::collections::BTreeMap::new();
    for (key, value) in &all {
        if key.starts_with(b"m:") {
            let collection_marker = *key == keys::exact_ids_key()
                || *key == keys::multikey_rule_key()
                || *key == keys::multikey_rule_2_key();
            let marked = config.indexes.iter().any(|f| keys::multikey_key(f) == *key);
            if !collection_marker && !marked {
                problems.push(format!("marker of no index {}", crate::KeyDisplay(key)));
            }
            continue;
        }
        if let Ok((part, id)) = split_doc_key(config, key) {
            let doc = RawDocument::from_bytes(value).map_err(|e| Error::Corrupt { what: e.to_string() })?;
            for (field, path) in config.indexes.iter().zip(&paths) {
                expected_index.extend(entries(part, field, id, doc)?);
                if marks(doc, path) {
                    multikey.insert(field);
                }
            }
            *counts.entry(part.to_vec()).or_default() += 1;
            continue;
        }
        // Not a document key: an index entry, a vector or a count.
        let plen = if config.partition_key.is_some() {
            crate::value::decode_value(key).map(|(_, n)| n).unwrap_or(0)
        } else {
            0
        };
        match key.get(plen..plen + 2) {
            Some(b"i:") => {
                actual_index.insert(key.clone());
                let doc_key = keys::doc_key(&key[..plen], value);
                if !key.ends_with(value) {
                    problems.push(format!(
                        "index entry {} does not end with its id",
                        crate::KeyDisplay(key)
                    ));
                }
                if all.binary_search_by(|(k, _)| k.as_slice().cmp(&doc_key)).is_err() {
                    problems.push(format!("orphan index entry {}", crate::KeyDisplay(key)));
                }
            }
            Some(b"n:") => {
                stored_counts.insert(key[..plen].to_vec(), crate::read::read_count(Some(value))?);
            }
            Some(b"v:") => {
                // `{P}v:{field}\0{id}`: its document is `{P}d:{id}`.
                let rest = &key[plen + 2..];
                let has_doc = rest.iter().position(|&b| b == 0).is_some_and(|at| {
                    let doc_key = keys::doc_key(&key[..plen], &rest[at + 1..]);
                    all.binary_search_by(|(k, _)| k.as_slice().cmp(&doc_key)).is_ok()
                });
                if !has_doc {
                    problems.push(format!("vector without its document {}", crate::KeyDisplay(key)));
                }
            }
            _ => problems.push(format!("unexpected key {}", crate::KeyDisplay(key))),
        }
    }
    for field in multikey {
        let marker = keys::multikey_key(field);
        if all.binary_search_by(|(k, _)| k.as_slice().cmp(&marker)).is_err() {
            problems.push(format!(
                "index {field:?} holds arrays, several values, none or undefined but is not marked multikey"
            ));
        }
    }
    for missing in expected_index.difference(&actual_index) {
        problems.push(format!("missing index entry {}", crate::KeyDisplay(missing)));
    }
    for extra in actual_index.difference(&expected_index) {
        problems.push(format!(
            "index entry without a matching value {}",
            crate::KeyDisplay(extra)
        ));
    }
    for (part, n) in &counts {
        let stored = stored_counts.get(part).copied().unwrap_or(0);
        if stored != *n {
            problems.push(format!(
                "partition {} holds {n} documents, count says {stored}",
                crate::KeyDisplay(part)
            ));
        }
    }
    for (part, stored) in &stored_counts {
        if *stored != 0 && !counts.contains_key(part) {
            problems.push(format!(
                "partition {} is empty, count says {stored}",
                crate::KeyDisplay(part)
            ));
        }
    }
    Ok(problems)
}

#[cfg(test)]
mod tests {
    use bson::{doc, Bson, RawDocumentBuf};

    use super::*;

    /// The one-walk form gives what the two walks give, on documents with
    /// one value, none, several, arrays on the way and at the end,
    /// `undefined`, and nested documents.
    #[test]
    fn entries_and_multikey_in_one_walk_agree_with_both_walks() {
        let docs = [
            doc! { "a": 1 },
            doc! { "a": "x", "b": 2 },
            doc! {},
            doc! { "a": Bson::Null },
            doc! { "a": Bson::Undefined },
            doc! { "a": [1, 2, 2] },
            doc! { "a": [] },
            doc! { "a": [[1]] },
            doc! { "a": { "b": 1 } },
            doc! { "a": { "b": [1, 2] } },
            doc! { "a": [{ "b": 1 }] },
            doc! { "a": [{ "b": 1 }, {}] },
            doc! { "a": [{ "b": 1 }, { "b": 1 }] },
            doc! { "a": [1, 2] },
            doc! { "a": 5, "a.b": 3 },
        ];
        for field in ["a", "a.b", "a.0", "a.b.c"] {
            let path = index_path(field).expect("path");
            for d in &docs {
                let raw = RawDocumentBuf::from_document(d).expect("raw");
                let both = (
                    entries_at(b"p", field, &path, b"id", &raw),
                    is_multikey_at(&raw, &path),
                );
                assert_eq!(
                    entries_and_multikey_at(b"p", field, &path, b"id", &raw),
                    both,
                    "{field} in {d}"
                );
            }
        }
    }
}
