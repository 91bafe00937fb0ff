//! The key layout of a collection's column family (see `docs/format.md`).
//!
//! ```text
//! {P}d:{id}                      -> raw BSON of the document, vectors stripped
//! {P}i:{field}\0{value}{id}      -> {id}        one per indexed value
//! {P}v:{field}\0{id}             -> dim x f32 little-endian
//! {P}n:                          -> number of documents, u64 little-endian
//! ```
//! `{P}` is the encoded partition value in a partitioned collection and empty
//! otherwise, so one partition's documents, index entries and vectors are each
//! contiguous. `{id}` and `{value}` use the order-preserving, self-delimiting
//! value encoding, so a prefix scan on `{P}i:{field}\0{value}` finds exactly the
//! documents whose field equals `value`. Field names are BSON keys and cannot
//! contain `\0`.

use crate::store::KeyRange;

const DOC: &[u8] = b"d:";
const INDEX: &[u8] = b"i:";
const VECTOR: &[u8] = b"v:";

/// The key under which document `id` of partition `part` is stored.
pub fn doc_key(part: &[u8], id: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(part.len() + DOC.len() + id.len());
    k.extend_from_slice(part);
    k.extend_from_slice(DOC);
    k.extend_from_slice(id);
    k
}

/// The prefix of every document key of partition `part`.
pub fn doc_prefix(part: &[u8]) -> Vec<u8> {
    doc_key(part, &[])
}

/// [`doc_prefix`] with room for `extra` more bytes, so that an id encoded in
/// place makes the whole key in one allocation.
pub fn doc_prefix_with_capacity(part: &[u8], extra: usize) -> Vec<u8> {
    let mut k = Vec::with_capacity(part.len() + DOC.len() + extra);
    k.extend_from_slice(part);
    k.extend_from_slice(DOC);
    k
}

/// The encoded id (partition excluded) of a document key with prefix `doc_prefix(part)`.
pub fn id_of_doc_key<'k>(part: &[u8], key: &'k [u8]) -> &'k [u8] {
    &key[(part.len() + DOC.len()).min(key.len())..]
}

/// The key holding the number of documents of partition `part` (u64 little-endian).
pub fn count_key(part: &[u8]) -> Vec<u8> {
    let mut k = part.to_vec();
    k.extend_from_slice(b"n:");
    k
}

/// The key marking index `field` multikey: some document holds an array
/// there, several values, no value (the path runs into an array of scalars
/// or an empty one) or `undefined` (the last two since rule 2), or reaches
/// it through an array (since rule 3: [`multikey_rule_key`]).
pub fn multikey_key(field: &str) -> Vec<u8> {
    let mut k = b"m:".to_vec();
    k.extend_from_slice(field.as_bytes());
    k
}

/// The key marking a collection whose every document key decodes to its
/// exact `_id`: put when the collection is created, deleted by the first
/// write of an int32 `_id` (whose key decodes as an int64). A collection
/// created before this key existed never has it, so its ids are always read
/// from the documents. Field names hold no NUL, so no multikey marker is this
/// key.
pub fn exact_ids_key() -> Vec<u8> {
    b"m:\0exact _id".to_vec()
}

/// The key marking a collection whose multikey markers ([`multikey_key`])
/// have followed the current rule since it was created: an index without
/// one then holds exactly one entry per document, ordered as a sort on the
/// field orders the documents, and can be read in a sort's order. Put when
/// the collection is created, never deleted; a collection created before
/// this key existed never has it (its markers may miss documents with no
/// value or `undefined`), so its sorts always sort.
pub fn multikey_rule_key() -> Vec<u8> {
    b"m:\0multikey rule 3".to_vec()
}

/// The key of collections created under rule 2, before rule 3 also marked
/// a field reached through an array (`a.b` of `{a: [{b: 1}, 7]}`, whose one
/// entry is 1 but whose sort key is null, as MongoDB sorts it): their
/// markers may miss such documents, so their sorts always sort.
pub fn multikey_rule_2_key() -> Vec<u8> {
    b"m:\0multikey rule 2".to_vec()
}

/// The prefix of every entry of index `field` in partition `part`.
pub fn index_prefix(part: &[u8], field: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(part.len() + INDEX.len() + field.len() + 1);
    k.extend_from_slice(part);
    k.extend_from_slice(INDEX);
    k.extend_from_slice(field.as_bytes());
    k.push(0);
    k
}

/// The prefix of the entries of index `field` whose value encodes to `value`.
pub fn index_value_prefix(part: &[u8], field: &str, value: &[u8]) -> Vec<u8> {
    let mut k = index_prefix(part, field);
    k.extend_from_slice(value);
    k
}

/// The index entry of document `id` for encoded `value` of `field`.
pub fn index_key(part: &[u8], field: &str, value: &[u8], id: &[u8]) -> Vec<u8> {
    let mut k = index_value_prefix(part, field, value);
    k.extend_from_slice(id);
    k
}

/// The prefix of every vector of `field` in partition `part`.
pub fn vector_prefix(part: &[u8], field: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(part.len() + VECTOR.len() + field.len() + 1);
    k.extend_from_slice(part);
    k.extend_from_slice(VECTOR);
    k.extend_from_slice(field.as_bytes());
    k.push(0);
    k
}

/// The key of the vector of `field` of document `id`.
pub fn vector_key(part: &[u8], field: &str, id: &[u8]) -> Vec<u8> {
    let mut k = vector_prefix(part, field);
    k.extend_from_slice(id);
    k
}

/// Keys of index `field` in partition `part` for encoded values in `[lo, hi]`
/// (`None`: unbounded), with inclusive or exclusive ends.
pub fn index_value_range(
    part: &[u8],
    field: &str,
    lo: Option<(&[u8], bool)>,
    hi: Option<(&[u8], bool)>,
) -> KeyRange {
    let whole = KeyRange::prefix(&index_prefix(part, field));
    let start = match lo {
        None => whole.start,
        Some((v, true)) => Some(index_value_prefix(part, field, v)),
        Some((v, false)) => crate::store::prefix_end(&index_value_prefix(part, field, v)),
    };
    let end = match hi {
        None => whole.end,
        Some((v, true)) => crate::store::prefix_end(&index_value_prefix(part, field, v)),
        Some((v, false)) => Some(index_value_prefix(part, field, v)),
    };
    KeyRange { start, end }
}

/// Up to `n - 1` byte strings strictly between the encoded ids `first` and
/// `last` (`first < last`), ascending, that cut the ids between them into
/// `n` ranges for a parallel scan: bounds, each an encoded id only when
/// both ends are integers. Integer ids split their numeric range
/// evenly; other ids split the bytes after the two encodings' common
/// prefix, read as a 64-bit number (zero-padded), evenly, which suits
/// ObjectIds and random strings. Ranges hold similar numbers of documents
/// when ids spread evenly that way; whatever the ids, the ranges cover
/// every id between `first` and `last` exactly once.
pub fn split_ids(first: &[u8], last: &[u8], n: usize) -> Vec<Vec<u8>> {
    let int = |enc: &[u8]| match crate::value::decode_value(enc) {
        Ok((bson::Bson::Int32(i), _)) => Some(i64::from(i)),
        Ok((bson::Bson::Int64(i), _)) => Some(i),
        _ => None,
    };
    let steps = 1..n as i128;
    let points: Vec<Vec<u8>> = match (int(first), int(last)) {
        (Some(a), Some(b)) if a < b => steps
            .map(|i| (i128::from(a) + (i128::from(b) - i128::from(a)) * i / n as i128) as i64)
            .filter_map(|x| crate::value::encode_id(&bson::Bson::Int64(x)).ok())
            .collect(),
        _ => {
            let common = first.iter().zip(last).take_while(|(a, b)| a == b).count();
            let word = |key: &[u8]| {
                let tail = &key[common..];
                let mut w = [0u8; 8];
                let m = tail.len().min(8);
                w[..m].copy_from_slice(&tail[..m]);
                u64::from_be_bytes(w)
            };
            let (a, b) = (word(first), word(last));
            steps
                .filter(|_| a < b)
                .map(|i| (u128::from(a) + u128::from(b - a) * i as u128 / n as u128) as u64)
                .map(|x| [&first[..common], &x.to_be_bytes()[..]].concat())
                .collect()
        }
    };
    // Each point lies between the ends (a point at or before `first`, or
    // at or after `last`, is dropped) and after the one before it.
    let mut out: Vec<Vec<u8>> = Vec::with_capacity(points.len());
    for p in points {
        if p.as_slice() > out.last().map_or(first, Vec::as_slice) && p.as_slice() < last {
            out.push(p);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_partition_first() {
        assert_eq!(doc_key(b"", b"\x10id"), b"d:\x10id");
        assert_eq!(doc_key(b"P", b"x"), b"Pd:x");
        assert_eq!(index_key(b"P", "a.b", b"V", b"I"), b"Pi:a.b\0VI");
        assert_eq!(vector_key(b"", "emb", b"I"), b"v:emb\0I");
        assert_eq!(id_of_doc_key(b"P", b"Pd:xyz"), b"xyz");
    }

    fn enc(id: impl Into<bson::Bson>) -> Vec<u8> {
        crate::value::encode_id(&id.into()).expect("id")
    }

    fn check_split(first: &[u8], last: &[u8], n: usize) -> Vec<Vec<u8>> {
        let points = split_ids(first, last, n);
        assert!(points.len() < n.max(1), "{} points for {n} ranges", points.len());
        let mut before = first;
        for p in &points {
            assert!(before < p.as_slice(), "{before:?} !< {p:?}");
            before = p;
        }
        assert!(points.last().is_none_or(|p| p.as_slice() < last));
        points
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        #[test]
        fn split_ids_lie_strictly_between_and_ascend(
            a in proptest::prelude::any::<i64>(),
            b in proptest::prelude::any::<i64>(),
            s in "[a-c]{0,10}",
            t in "[a-c]{0,10}",
            n in 0usize..9,
        ) {
            for (x, y) in [(enc(a), enc(b)), (enc(s.as_str()), enc(t.as_str())), (enc(a), enc(t.as_str()))] {
                let (first, last) = if x < y { (x, y) } else { (y, x) };
                if first < last {
                    check_split(&first, &last, n);
                }
            }
        }
    }

    #[test]
    fn split_ids_cut_sequential_and_object_ids_evenly() {
        let balance = |ids: Vec<Vec<u8>>| {
            let points = check_split(&ids[0], &ids[ids.len() - 1], 8);
            assert_eq!(points.len(), 7);
            let mut sizes = [0usize; 8];
            for id in &ids {
                sizes[points.iter().take_while(|p| *p <= id).count()] += 1;
            }
            let even = ids.len() / 8;
            assert!(
                sizes.iter().all(|&n| n > even * 9 / 10 && n < even * 11 / 10),
                "{sizes:?}"
            );
        };
        balance((0..100_000).map(enc).collect());
        balance((-50_000i64..50_000).map(|i| enc(i * 3)).collect());
        let start = bson::oid::ObjectId::new().bytes();
        balance(
            (0u32..100_000)
                .map(|i| {
                    // One ObjectId a second from `start`: time leads.
                    let mut b = start;
                    let t = u32::from_be_bytes(b[..4].try_into().expect("4")) + i;
                    b[..4].copy_from_slice(&t.to_be_bytes());
                    enc(bson::oid::ObjectId::from_bytes(b))
                })
                .collect(),
        );
    }

    #[test]
    fn value_ranges_respect_inclusivity() {
        let r = index_value_range(b"", "f", Some((b"b", true)), Some((b"d", false)));
        assert!(r.contains(&index_key(b"", "f", b"b", b"1")));
        assert!(r.contains(&index_key(b"", "f", b"c", b"1")));
        assert!(!r.contains(&index_key(b"", "f", b"d", b"1")));
        let r = index_value_range(b"", "f", Some((b"b", false)), Some((b"d", true)));
        assert!(!r.contains(&index_key(b"", "f", b"b", b"1")));
        assert!(r.contains(&index_key(b"", "f", b"d", b"\xff")));
        assert!(!r.contains(&index_key(b"", "g", b"c", b"1")));
    }
}
