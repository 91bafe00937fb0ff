//! Sort keys and the bounded top-n used by `Sort` when a limit follows.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use bson::{RawBson, RawBsonRef, RawDocument};
use slate_core::value::{best_sort_keys, better_sort_key, compare, visit_sort_keys, FieldPath, SortPath};

/// One sort field: a dot path and a direction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortField {
    /// The dot path.
    pub path: FieldPath,
    /// `true` for descending.
    pub descending: bool,
}

impl SortField {
    /// Parses `field` or `field:desc` / `field:asc` (the CLI's form).
    pub fn parse(spec: &str) -> Result<Self, String> {
        let (field, descending) = match spec.rsplit_once(':') {
            Some((f, "desc")) => (f, true),
            Some((f, "asc")) => (f, false),
            Some((_, other)) => return Err(format!("sort direction {other:?} in {spec:?}: use asc or desc")),
            None => (spec, false),
        };
        let path = FieldPath::parse(field).map_err(|e| e.to_string())?;
        Ok(Self { path, descending })
    }
}

/// The sort key of a document for one field (MongoDB's rule): the smallest
/// of the values [`visit_sort_keys`] finds when ascending, the largest when
/// descending.
pub fn sort_key(doc: &RawDocument, field: &SortField) -> RawBson {
    sort_key_ref(doc, field).to_raw_bson()
}

/// [`sort_key`], borrowed from `doc` (no allocation).
pub fn sort_key_ref<'a>(doc: &'a RawDocument, field: &SortField) -> RawBsonRef<'a> {
    let mut best: Option<RawBsonRef<'a>> = None;
    visit_sort_keys(doc, &field.path, &mut |v| {
        best = Some(better_sort_key(best, v, field.descending, &compare_values));
    });
    best.unwrap_or(RawBsonRef::Null)
}

/// The sort keys of `doc` on all of `fields` together (MongoDB's rule for
/// fields under one array: see [`best_sort_keys`]); equal to
/// [`sort_key_ref`] field by field when no two fields begin with the same
/// component ([`Sorter::joint`]).
pub fn joint_sort_keys<'a>(doc: &'a RawDocument, fields: &[SortField]) -> Vec<RawBsonRef<'a>> {
    let paths: Vec<SortPath<'_>> = fields.iter().map(|f| (&f.path, f.descending)).collect();
    best_sort_keys(doc, &paths, &compare_values)
}

/// Whether two of `fields` begin with the same component, so that they may
/// reach one array together.
fn share_a_first_component(fields: &[SortField]) -> bool {
    fn first(f: &SortField) -> Option<&str> {
        f.path.components().next()
    }
    fields
        .iter()
        .enumerate()
        .any(|(i, a)| fields[..i].iter().any(|b| first(a) == first(b)))
}

/// `compare`, except that `undefined` (the key of an empty array) sorts
/// between MinKey and `null`, as in MongoDB.
fn compare_values(x: RawBsonRef<'_>, y: RawBsonRef<'_>) -> Ordering {
    let rank = |v: RawBsonRef<'_>| match v {
        RawBsonRef::MinKey => 0,
        RawBsonRef::Undefined => 1,
        _ => 2,
    };
    rank(x).cmp(&rank(y)).then_with(|| compare(x, y))
}

/// Compares two documents' sort keys field by field.
pub fn compare_keys(a: &[RawBson], b: &[RawBson], fields: &[SortField]) -> Ordering {
    let a = a.iter().map(RawBson::as_raw_bson_ref);
    compare_key_refs(a, b, fields)
}

/// [`compare_keys`] with the left keys borrowed.
fn compare_key_refs<'a>(
    a: impl Iterator<Item = RawBsonRef<'a>>,
    b: &[RawBson],
    fields: &[SortField],
) -> Ordering {
    for ((x, y), f) in a.zip(b).zip(fields) {
        let ord = compare_values(x, y.as_raw_bson_ref());
        let ord = if f.descending { ord.reverse() } else { ord };
        if ord != Ordering::Equal {
            return ord;
        }
    }
    Ordering::Equal
}

/// A document with its sort keys; ties break by document key so that the
/// order is total and deterministic.
#[derive(Debug)]
pub struct Keyed<T> {
    pub keys: Vec<RawBson>,
    pub doc_key: Vec<u8>,
    pub item: T,
}

struct HeapEntry<'f, T> {
    keyed: Keyed<T>,
    fields: &'f [SortField],
}

impl<T> HeapEntry<'_, T> {
    fn cmp_entry(&self, other: &Self) -> Ordering {
        compare_keys(&self.keyed.keys, &other.keyed.keys, self.fields)
            .then_with(|| self.keyed.doc_key.cmp(&other.keyed.doc_key))
    }
}

impl<T> PartialEq for HeapEntry<'_, T> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp_entry(other) == Ordering::Equal
    }
}
impl<T> Eq for HeapEntry<'_, T> {}
impl<T> PartialOrd for HeapEntry<'_, T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for HeapEntry<'_, T> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.cmp_entry(other)
    }
}

/// Sorts items by their keys, keeping only the first `bound` when given: a
/// max-heap of size `bound` (O(n log bound)), otherwise a full sort.
#[derive(Debug)]
pub struct Sorter<'f, T> {
    fields: &'f [SortField],
    /// See [`Sorter::joint`].
    joint: bool,
    bound: Option<usize>,
    heap: BinaryHeap<HeapEntryBox<'f, T>>,
    all: Vec<Keyed<T>>,
}

/// Wrapper so that `Sorter` can derive `Debug` without `T: Debug` noise.
struct HeapEntryBox<'f, T>(HeapEntry<'f, T>);

impl<T> std::fmt::Debug for HeapEntryBox<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HeapEntry")
    }
}
impl<T> PartialEq for HeapEntryBox<'_, T> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}
impl<T> Eq for HeapEntryBox<'_, T> {}
impl<T> PartialOrd for HeapEntryBox<'_, T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for HeapEntryBox<'_, T> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.cmp(&other.0)
    }
}

impl<'f, T> Sorter<'f, T> {
    /// A sorter on `fields`, keeping the first `bound` items if given.
    pub fn new(fields: &'f [SortField], bound: Option<usize>) -> Self {
        Self {
            fields,
            joint: share_a_first_component(fields),
            bound,
            heap: BinaryHeap::new(),
            all: Vec::new(),
        }
    }

    /// Whether an item with these keys would be kept (checked before paying
    /// for an owned copy of the document).
    pub fn would_keep(&self, keys: &[RawBson], doc_key: &[u8]) -> bool {
        self.would_keep_refs(keys.iter().map(RawBson::as_raw_bson_ref), doc_key)
    }

    /// [`Sorter::would_keep`] on borrowed keys (see [`sort_key_ref`]).
    pub fn would_keep_refs<'a>(&self, keys: impl Iterator<Item = RawBsonRef<'a>>, doc_key: &[u8]) -> bool {
        match self.bound {
            None => true,
            Some(0) => false,
            Some(b) if self.heap.len() < b => true,
            Some(_) => self.heap.peek().is_some_and(|worst| {
                compare_key_refs(keys, &worst.0.keyed.keys, self.fields)
                    .then_with(|| doc_key.cmp(&worst.0.keyed.doc_key))
                    == Ordering::Less
            }),
        }
    }

    /// Offers an item.
    pub fn push(&mut self, keyed: Keyed<T>) {
        match self.bound {
            None => self.all.push(keyed),
            Some(b) => {
                if !self.would_keep(&keyed.keys, &keyed.doc_key) {
                    return;
                }
                self.heap.push(HeapEntryBox(HeapEntry {
                    keyed,
                    fields: self.fields,
                }));
                if self.heap.len() > b {
                    self.heap.pop();
                }
            }
        }
    }

    /// The fields sorted on.
    pub fn fields(&self) -> &'f [SortField] {
        self.fields
    }

    /// Whether a document's keys must be found for all fields together
    /// ([`joint_sort_keys`]) rather than field by field ([`sort_key_ref`]).
    pub fn joint(&self) -> bool {
        self.joint
    }

    /// How many items it keeps at most (`None`: all).
    pub fn bound(&self) -> Option<usize> {
        self.bound
    }

    /// The kept items in no particular order (to offer to another sorter).
    pub fn into_kept(self) -> Vec<Keyed<T>> {
        match self.bound {
            None => self.all,
            Some(_) => self.heap.into_iter().map(|e| e.0.keyed).collect(),
        }
    }

    /// The kept items in sort order.
    pub fn finish(self) -> Vec<Keyed<T>> {
        let fields = self.fields;
        let mut out = self.into_kept();
        out.sort_by(|a, b| compare_keys(&a.keys, &b.keys, fields).then_with(|| a.doc_key.cmp(&b.doc_key)));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;
    use proptest::prelude::*;

    fn field(spec: &str) -> SortField {
        SortField::parse(spec).expect("spec")
    }

    #[test]
    fn array_sort_keys_follow_mongodb() {
        let d = rawdoc! { "a": [3, 1, 2] };
        assert_eq!(sort_key(&d, &field("a")), RawBson::Int32(1));
        assert_eq!(sort_key(&d, &field("a:desc")), RawBson::Int32(3));
        let d = rawdoc! { "b": 1 };
        assert_eq!(sort_key(&d, &field("a")), RawBson::Null);
        assert!(SortField::parse("a:sideways").is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn bounded_sort_equals_full_sort_then_truncate(values in proptest::collection::vec((0i32..20, 0i32..5), 0..200), bound in 0usize..30) {
            let fields = vec![field("x"), field("y:desc")];
            let items: Vec<Keyed<usize>> = values.iter().enumerate().map(|(i, (x, y))| Keyed {
                keys: vec![RawBson::Int32(*x), RawBson::Int32(*y)],
                doc_key: (i as u32).to_be_bytes().to_vec(),
                item: i,
            }).collect();
            let mut full = Sorter::new(&fields, None);
            let mut bounded = Sorter::new(&fields, Some(bound));
            for it in items {
                bounded.push(Keyed { keys: it.keys.clone(), doc_key: it.doc_key.clone(), item: it.item });
                full.push(it);
            }
            let mut want: Vec<usize> = full.finish().into_iter().map(|k| k.item).collect();
            want.truncate(bound);
            let got: Vec<usize> = bounded.finish().into_iter().map(|k| k.item).collect();
            prop_assert_eq!(got, want);
        }
    }
}
