//! Dot paths (`a.b.c`, `tags.0`) and the values found at them, with MongoDB's array expansion.
//!
//! Traversal follows MongoDB's matcher (`BSONElementIterator`), given a path `p0.p1...pn`:
//! - through embedded documents, a component names a field; a missing field, or a scalar where
//!   the path continues, yields [`PathValue::Missing`] once;
//! - when a component reaches an array and the path continues, each element is visited:
//!   a document element is searched for the rest of the path (and may yield `Missing`); if the
//!   next component is an array index (`"0"`, `"12"`, no leading zeros) the element at that
//!   index is *also* visited with the path after the index — yielded as is when the index ends
//!   the path, descended into when it is an array. Other elements yield nothing, so
//!   `{a: [1, 2]}` has no value at all at `a.b` (not even `Missing`);
//! - when the path ends on an array, [`LeafArrays`] says what is yielded.

use std::cmp::Ordering;
use std::ops::ControlFlow;

use bson::{RawArray, RawBsonRef, RawDocument};

use super::{Result, ValueError};

/// A parsed dot path. Invariant: at least one component, no empty component, no NUL byte (so
/// a path can end an index key prefix `{path}\0`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FieldPath {
    dotted: String,
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Part {
    start: usize,
    end: usize,
    /// The array index this component names, when it is canonical decimal digits.
    index: Option<usize>,
}

/// Path component `part` read as an array position: digits without a
/// leading zero (MongoDB's numeric path components); `None` otherwise.
pub fn array_index(part: &str) -> Option<usize> {
    let canonical = !part.is_empty()
        && part.bytes().all(|b| b.is_ascii_digit())
        && (part == "0" || !part.starts_with('0'));
    canonical.then(|| part.parse().ok()).flatten()
}

/// Whether dot path `path` lies strictly under dot path `parent` (`m.emb`
/// under `m`, not `mx` under `m`).
pub fn is_under(path: &str, parent: &str) -> bool {
    path.len() > parent.len() && path.starts_with(parent) && path.as_bytes()[parent.len()] == b'.'
}

impl FieldPath {
    /// Parses `a.b.c`. Errors on an empty path, an empty component or a NUL byte.
    pub fn parse(dotted: &str) -> Result<FieldPath> {
        let bad = |reason| ValueError::InvalidPath {
            path: dotted.to_owned(),
            reason,
        };
        if dotted.is_empty() {
            return Err(bad("empty path"));
        }
        if dotted.contains('\0') {
            return Err(bad("contains a NUL byte"));
        }
        let mut parts = Vec::new();
        let mut start = 0;
        for piece in dotted.split('.') {
            if piece.is_empty() {
                return Err(bad("empty path component"));
            }
            parts.push(Part {
                start,
                end: start + piece.len(),
                index: array_index(piece),
            });
            start += piece.len() + 1;
        }
        Ok(FieldPath {
            dotted: dotted.to_owned(),
            parts,
        })
    }

    /// The path as written, `a.b.c`.
    pub fn as_str(&self) -> &str {
        &self.dotted
    }

    /// Number of components (at least 1).
    pub fn len(&self) -> usize {
        self.parts.len()
    }

    /// Always false: a path has at least one component.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// The `i`-th component.
    pub fn component(&self, i: usize) -> Option<&str> {
        self.parts.get(i).map(|p| &self.dotted[p.start..p.end])
    }

    /// The components in order.
    pub fn components(&self) -> impl Iterator<Item = &str> + '_ {
        self.parts.iter().map(|p| &self.dotted[p.start..p.end])
    }

    fn name(&self, i: usize) -> &str {
        self.parts.get(i).map_or("", |p| &self.dotted[p.start..p.end])
    }

    fn index(&self, i: usize) -> Option<usize> {
        self.parts.get(i).and_then(|p| p.index)
    }
}

impl std::fmt::Display for FieldPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.dotted)
    }
}

/// What a path that ends on an array yields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeafArrays {
    /// Each element, then the array itself: equality, comparisons, `$in`, `$exists`.
    Expand,
    /// The array itself only: `$size`, `$elemMatch`.
    Whole,
    /// Each element; an empty array yields itself. Index keys (see [`index_values`]).
    Elements,
}

/// One value found at a path.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PathValue<'a> {
    /// The path does not exist on this branch of the document.
    Missing,
    /// A value at the path.
    Value(RawBsonRef<'a>),
}

/// Calls `f` with each value at `path` in `doc`, in document order, until it breaks.
/// Allocation-free; the values borrow from `doc`.
pub fn visit_path<'a, B, F>(
    doc: &'a RawDocument,
    path: &FieldPath,
    leaf: LeafArrays,
    f: &mut F,
) -> ControlFlow<B>
where
    F: FnMut(PathValue<'a>) -> ControlFlow<B>,
{
    walk_document(doc, path, 0, leaf, f)
}

/// Calls `f` with each value a sort on `path` considers in `doc`, as
/// MongoDB's sort keys (an index's keys) are generated, which is not how a
/// filter walks a path:
/// - a leaf array gives each element, an element that is an array whole,
///   and an empty leaf array gives `undefined` (below `null`);
/// - `null` where the path is missing, runs into a scalar, into an empty
///   array, or into an array's element that is not a document (`a.b` of
///   `{a: [7, {b: 5}]}` is `null` and 5);
/// - a numeric component after an array is only a position in it, never
///   also a field of the array's documents (`items.0.p` is `items[0].p`,
///   where a filter also looks for a field `"0"` in each element), and a
///   position that ends the path gives its element whole, an array
///   included; one past the end is `null`.
///
/// At least one value for every document.
pub fn visit_sort_keys<'a>(doc: &'a RawDocument, path: &FieldPath, f: &mut impl FnMut(RawBsonRef<'a>)) {
    sort_keys_document(doc, path, 0, f)
}

fn sort_keys_document<'a>(
    doc: &'a RawDocument,
    path: &FieldPath,
    i: usize,
    f: &mut impl FnMut(RawBsonRef<'a>),
) {
    match reach(doc, path, i) {
        Reached::Value(v) => f(v),
        Reached::Array(a, rest) => sort_keys_array(a, path, rest, f),
    }
}

/// Where a sort path leads from `path[i..]` in `doc`, through documents.
enum Reached<'a> {
    /// The value at its end; `null` where it is missing or a scalar stands
    /// in the way.
    Value(RawBsonRef<'a>),
    /// An array, and the component the path goes on from inside it.
    Array(&'a RawArray, usize),
}

/// Follows `path[i..]` in `doc` through documents to a value or an array.
fn reach<'a>(mut doc: &'a RawDocument, path: &FieldPath, mut i: usize) -> Reached<'a> {
    let last = path.len() - 1;
    loop {
        match field(doc, path.name(i)) {
            Some(RawBsonRef::Document(d)) if i < last => {
                doc = d;
                i += 1;
            }
            Some(RawBsonRef::Array(a)) => return Reached::Array(a, i + 1),
            Some(v) if i == last => return Reached::Value(v),
            _ => return Reached::Value(RawBsonRef::Null),
        }
    }
}

/// Whether `path` runs through an array in `doc` before its last component
/// (by name or by a position: the latter needlessly, but safely).
pub(crate) fn crosses_array(doc: &RawDocument, path: &FieldPath) -> bool {
    let mut cur = doc;
    for i in 0..path.len().saturating_sub(1) {
        match field(cur, path.name(i)) {
            Some(RawBsonRef::Document(d)) => cur = d,
            Some(RawBsonRef::Array(_)) => return true,
            _ => return false,
        }
    }
    false
}

/// One field of a sort: its path and whether it is descending.
pub type SortPath<'p> = (&'p FieldPath, bool);

/// The sort keys of `doc` on several fields at once, as MongoDB takes them:
/// the best (first in sort order) of the tuples a compound index on the
/// fields would hold. Fields that reach one array together take their
/// values from one element of it (`a.c`, `a.b` of `{a: [{b: 4, c: 1}, {b:
/// 1, c: 2}]}` are (1, 4), not (1, 1)); a field that reaches an array on
/// its own, or by a position, takes its best value there as
/// [`visit_sort_keys`] finds them. Where two fields reach different arrays
/// (MongoDB refuses "parallel arrays") each takes its own best value.
/// `cmp` orders two values of one field ascending.
pub fn best_sort_keys<'a>(
    doc: &'a RawDocument,
    fields: &[SortPath<'_>],
    cmp: &dyn Fn(RawBsonRef<'_>, RawBsonRef<'_>) -> Ordering,
) -> Vec<RawBsonRef<'a>> {
    let mut out = vec![RawBsonRef::Null; fields.len()];
    let walks: Vec<(usize, usize)> = (0..fields.len()).map(|f| (f, 0)).collect();
    joint_document(doc, fields, &walks, cmp, &mut out);
    out
}

/// The better of `best` and `v` as one field's sort key: the smaller (the
/// larger when `descending`) by `cmp`, `best` on a tie.
pub fn better_sort_key<'a>(
    best: Option<RawBsonRef<'a>>,
    v: RawBsonRef<'a>,
    descending: bool,
    cmp: &dyn Fn(RawBsonRef<'_>, RawBsonRef<'_>) -> Ordering,
) -> RawBsonRef<'a> {
    match best {
        Some(b) => match cmp(v, b) {
            Ordering::Less if !descending => v,
            Ordering::Greater if descending => v,
            _ => b,
        },
        None => v,
    }
}

/// [`best_sort_keys`] for the `walks` (a field, and the component its path
/// goes on from) in `doc`, written to their fields' slots of `out`.
fn joint_document<'a>(
    doc: &'a RawDocument,
    fields: &[SortPath<'_>],
    walks: &[(usize, usize)],
    cmp: &dyn Fn(RawBsonRef<'_>, RawBsonRef<'_>) -> Ordering,
    out: &mut [RawBsonRef<'a>],
) {
    // Each walk down through documents, to a value or to an array.
    let mut arrays: Vec<(&'a RawArray, usize, usize)> = Vec::new();
    for &(f, from) in walks {
        out[f] = match reach(doc, fields[f].0, from) {
            Reached::Value(v) => v,
            Reached::Array(a, rest) => {
                arrays.push((a, f, rest));
                RawBsonRef::Null
            }
        };
    }
    let same = |x: &RawArray, y: &RawArray| std::ptr::eq(x.as_bytes(), y.as_bytes());
    let by_name = |&(_, f, rest): &(&RawArray, usize, usize)| {
        let path = fields[f].0;
        rest == path.len() || path.index(rest).is_none()
    };
    let together = arrays.len() > 1 && arrays.iter().all(|a| same(a.0, arrays[0].0) && by_name(a));
    if !together {
        for (a, f, rest) in arrays {
            let (path, descending) = fields[f];
            let mut best = None;
            sort_keys_array(a, path, rest, &mut |v| {
                best = Some(better_sort_key(best, v, descending, cmp))
            });
            out[f] = best.unwrap_or(RawBsonRef::Null);
        }
        return;
    }
    let array = arrays[0].0;
    let mut elements = array.into_iter().map_while(Result::ok).peekable();
    if elements.peek().is_none() {
        for (_, f, rest) in arrays {
            out[f] = if rest == fields[f].0.len() {
                RawBsonRef::Undefined
            } else {
                RawBsonRef::Null
            };
        }
        return;
    }
    // Each element's best tuple, the best of them kept (the fields in
    // sort order: `walks`, hence `arrays`, are in field order).
    let mut best: Option<Vec<RawBsonRef<'a>>> = None;
    let mut on = Vec::new();
    for e in elements {
        let mut cand = out.to_vec();
        on.clear();
        for &(_, f, rest) in &arrays {
            if rest == fields[f].0.len() {
                cand[f] = e;
            } else if matches!(e, RawBsonRef::Document(_)) {
                on.push((f, rest));
            } else {
                cand[f] = RawBsonRef::Null;
            }
        }
        if let (RawBsonRef::Document(d), false) = (e, on.is_empty()) {
            joint_document(d, fields, &on, cmp, &mut cand);
        }
        let wins = best.as_ref().is_none_or(|b| {
            for &(_, f, _) in &arrays {
                let ord = cmp(cand[f], b[f]);
                let ord = if fields[f].1 { ord.reverse() } else { ord };
                if ord != Ordering::Equal {
                    return ord == Ordering::Less;
                }
            }
            false
        });
        if wins {
            best = Some(cand);
        }
    }
    if let Some(best) = best {
        for (_, f, _) in arrays {
            out[f] = best[f];
        }
    }
}

/// [`visit_sort_keys`] from array `a`, reached by `path[..rest]`.
fn sort_keys_array<'a>(a: &'a RawArray, path: &FieldPath, rest: usize, f: &mut impl FnMut(RawBsonRef<'a>)) {
    let mut elements = a.into_iter().map_while(Result::ok).peekable();
    if rest == path.len() {
        if elements.peek().is_none() {
            return f(RawBsonRef::Undefined);
        }
        return elements.for_each(f);
    }
    match path.index(rest) {
        Some(k) => match elements.nth(k) {
            Some(e) if rest + 1 == path.len() => f(e),
            Some(RawBsonRef::Document(d)) => sort_keys_document(d, path, rest + 1, f),
            Some(RawBsonRef::Array(inner)) => sort_keys_array(inner, path, rest + 1, f),
            _ => f(RawBsonRef::Null),
        },
        None => {
            if elements.peek().is_none() {
                return f(RawBsonRef::Null);
            }
            for e in elements {
                match e {
                    RawBsonRef::Document(d) => sort_keys_document(d, path, rest, f),
                    _ => f(RawBsonRef::Null),
                }
            }
        }
    }
}

/// All values at `path` in `doc` (see [`visit_path`]).
pub fn lookup_path<'a>(doc: &'a RawDocument, path: &FieldPath, leaf: LeafArrays) -> Vec<PathValue<'a>> {
    let mut out = Vec::new();
    let _ = visit_path(doc, path, leaf, &mut |v| {
        out.push(v);
        ControlFlow::<()>::Continue(())
    });
    out
}

/// The values an index on `path` stores for `doc`: one per array element (an empty array is
/// stored as itself), `Null` where the path is missing. Not deduplicated. Never empty except
/// when the path runs into arrays of scalars only (`a.b` in `{a: [1, 2]}`), which no equality
/// or range predicate on `a.b` can match either.
pub fn index_values<'a>(doc: &'a RawDocument, path: &FieldPath) -> Vec<RawBsonRef<'a>> {
    let mut out = Vec::new();
    let _ = visit_path(doc, path, LeafArrays::Elements, &mut |v| {
        out.push(match v {
            PathValue::Missing => RawBsonRef::Null,
            PathValue::Value(v) => v,
        });
        ControlFlow::<()>::Continue(())
    });
    out
}

/// Looks up `path[i..]` in `doc` (MongoDB's `getFieldDottedOrArray`, then the array walk);
fn walk_document<'a, B, F>(
    mut doc: &'a RawDocument,
    path: &FieldPath,
    mut i: usize,
    leaf: LeafArrays,
    f: &mut F,
) -> ControlFlow<B>
where
    F: FnMut(PathValue<'a>) -> ControlFlow<B>,
{
    let last = path.len() - 1;
    loop {
        match field(doc, path.name(i)) {
            Some(RawBsonRef::Document(d)) if i < last => {
                doc = d;
                i += 1;
            }
            Some(RawBsonRef::Array(a)) => return walk_array(a, path, i + 1, leaf, f),
            Some(v) if i == last => return f(PathValue::Value(v)),
            // Missing, unreadable, or a scalar where the path goes on.
            _ => return f(PathValue::Missing),
        }
    }
}

/// `doc.get(name)`, with an unreadable document read as missing: `Some(v)`
/// exactly when `RawDocument::get` returns `Ok(Some(v))`.
///
/// Skips elements by their type and length without building bson's element
/// values, checking what bson's iterator checks on the way (key terminated and
/// UTF-8, known type, lengths in bounds and terminated). Types it does not
/// decode itself (arrays, binary, regex, code, ...) go to `RawDocument::get`.
pub(crate) fn field<'a>(doc: &'a RawDocument, name: &str) -> Option<RawBsonRef<'a>> {
    match scan(doc.as_bytes(), name.as_bytes()) {
        Scan::Found(v) => Some(v),
        Scan::Missing => None,
        Scan::Ask => doc.get(name).ok().flatten(),
    }
}

enum Scan<'a> {
    Found(RawBsonRef<'a>),
    /// Absent, or the bytes stop parsing before it (bson's `get` errs then).
    Missing,
    /// Bson's own `get` must answer.
    Ask,
}

fn le_i32(b: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn le_i64(b: &[u8], at: usize) -> Option<i64> {
    Some(i64::from_le_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

fn scan<'a>(b: &'a [u8], name: &[u8]) -> Scan<'a> {
    use bson::spec::ElementType as T;
    let mut at = 4;
    while at + 1 < b.len() {
        let Some((key, key_len)) = super::key_str(&b[at + 1..]) else {
            return Scan::Missing;
        };
        let Some(kind) = T::from(b[at]) else {
            return Scan::Missing;
        };
        let start = at + 1 + key_len + 1;
        let size = match kind {
            T::Boolean => Some(1),
            T::Int32 => Some(4),
            T::Int64 | T::Double | T::DateTime | T::Timestamp => Some(8),
            T::ObjectId => Some(12),
            T::Decimal128 => Some(16),
            T::Null | T::Undefined | T::MinKey | T::MaxKey => Some(0),
            // bson's read_len: at least 1, in bounds, NUL-terminated.
            T::String | T::Symbol | T::JavaScriptCode => le_i32(b, start)
                .and_then(|n| usize::try_from(n).ok())
                .and_then(|n| n.checked_add(4))
                .filter(|&end| end >= 5 && start + end <= b.len() && b[start + end - 1] == 0),
            // bson's next_document_len.
            T::EmbeddedDocument | T::Array => le_i32(b, start)
                .map(|n| n as usize)
                .filter(|&n| n >= 5 && start.checked_add(n).is_some_and(|end| end <= b.len()))
                .filter(|&n| b[start + n - 1] == 0),
            _ => return Scan::Ask,
        };
        let Some(size) = size.filter(|&n| start + n <= b.len()) else {
            return Scan::Missing;
        };
        let value = &b[start..start + size];
        if key.as_bytes() == name {
            return match kind {
                T::Double => le_i64(value, 0).map(|x| RawBsonRef::Double(f64::from_bits(x as u64))),
                T::Int32 => le_i32(value, 0).map(RawBsonRef::Int32),
                T::Int64 => le_i64(value, 0).map(RawBsonRef::Int64),
                T::DateTime => {
                    le_i64(value, 0).map(|ms| RawBsonRef::DateTime(bson::DateTime::from_millis(ms)))
                }
                T::Boolean => match value[0] {
                    0 => Some(RawBsonRef::Boolean(false)),
                    1 => Some(RawBsonRef::Boolean(true)),
                    _ => None,
                },
                T::Null => Some(RawBsonRef::Null),
                T::Undefined => Some(RawBsonRef::Undefined),
                T::MinKey => Some(RawBsonRef::MinKey),
                T::MaxKey => Some(RawBsonRef::MaxKey),
                T::ObjectId => <[u8; 12]>::try_from(value)
                    .ok()
                    .map(|id| RawBsonRef::ObjectId(bson::oid::ObjectId::from_bytes(id))),
                T::String => super::utf8(&value[4..size - 1]).map(RawBsonRef::String),
                T::EmbeddedDocument => RawDocument::from_bytes(value).ok().map(RawBsonRef::Document),
                _ => return Scan::Ask,
            }
            .map_or(Scan::Missing, Scan::Found);
        }
        at = start + size;
    }
    Scan::Missing
}

/// Visits array `a`, reached by `path[..rest]`, for the rest of the path.
fn walk_array<'a, B, F>(
    a: &'a RawArray,
    path: &FieldPath,
    rest: usize,
    leaf: LeafArrays,
    f: &mut F,
) -> ControlFlow<B>
where
    F: FnMut(PathValue<'a>) -> ControlFlow<B>,
{
    let elements = || a.into_iter().map_while(Result::ok);
    if rest == path.len() {
        let whole = PathValue::Value(RawBsonRef::Array(a));
        return match leaf {
            LeafArrays::Whole => f(whole),
            LeafArrays::Expand => {
                for e in elements() {
                    f(PathValue::Value(e))?;
                }
                f(whole)
            }
            LeafArrays::Elements => {
                let mut any = false;
                for e in elements() {
                    any = true;
                    f(PathValue::Value(e))?;
                }
                if any {
                    ControlFlow::Continue(())
                } else {
                    f(whole)
                }
            }
        };
    }
    let index = path.index(rest);
    let ends_at_index = rest + 1 == path.len();
    for (k, e) in elements().enumerate() {
        if let RawBsonRef::Document(d) = e {
            walk_document(d, path, rest, leaf, f)?;
        }
        if index == Some(k) {
            match e {
                _ if ends_at_index => f(PathValue::Value(e))?,
                RawBsonRef::Document(d) => walk_document(d, path, rest + 1, leaf, f)?,
                RawBsonRef::Array(inner) => walk_array(inner, path, rest + 1, leaf, f)?,
                _ => {}
            }
        }
    }
    ControlFlow::Continue(())
}

#[cfg(test)]
mod unit {
    use super::*;
    use bson::{doc, Bson, RawDocumentBuf};

    fn values(d: bson::Document, path: &str, leaf: LeafArrays) -> Vec<Option<Bson>> {
        let raw = RawDocumentBuf::from_document(&d).expect("valid document");
        let path = FieldPath::parse(path).expect("valid path");
        lookup_path(&raw, &path, leaf)
            .into_iter()
            .map(|v| match v {
                PathValue::Missing => None,
                PathValue::Value(v) => Some(Bson::try_from(v).expect("valid value")),
            })
            .collect()
    }

    #[test]
    fn parse_rejects_bad_paths() {
        for bad in ["", "a..b", ".a", "a.", "a\0b"] {
            assert!(FieldPath::parse(bad).is_err(), "{bad:?}");
        }
        let p = FieldPath::parse("a.01.2").expect("valid");
        assert_eq!(p.components().collect::<Vec<_>>(), ["a", "01", "2"]);
        assert_eq!((p.index(1), p.index(2)), (None, Some(2)));
    }

    #[test]
    fn nested_documents_and_missing() {
        let d = doc! { "a": { "b": { "c": 1 } }, "s": 5 };
        assert_eq!(
            values(d.clone(), "a.b.c", LeafArrays::Expand),
            [Some(Bson::Int32(1))]
        );
        assert_eq!(values(d.clone(), "a.x", LeafArrays::Expand), [None]);
        assert_eq!(values(d, "s.t", LeafArrays::Expand), [None]);
    }

    #[test]
    fn arrays_expand_like_mongodb() {
        let d = doc! { "a": [ { "b": 1 }, { "c": 2 }, 3, [ { "b": 4 } ] ] };
        // The nested array is not searched; the element without b yields Missing.
        assert_eq!(values(d, "a.b", LeafArrays::Expand), [Some(Bson::Int32(1)), None]);
        let d = doc! { "a": [1, 2] };
        assert_eq!(values(d.clone(), "a.b", LeafArrays::Expand), []);
        assert_eq!(
            values(d.clone(), "a", LeafArrays::Expand),
            [
                Some(1.into()),
                Some(2.into()),
                Some(Bson::Array(vec![1.into(), 2.into()]))
            ]
        );
        assert_eq!(
            values(d.clone(), "a", LeafArrays::Elements),
            [Some(1.into()), Some(2.into())]
        );
        assert_eq!(values(d.clone(), "a.1", LeafArrays::Expand), [Some(2.into())]);
        assert_eq!(values(d, "a.01", LeafArrays::Expand), []);
        let d = doc! { "a": [] };
        assert_eq!(values(d, "a", LeafArrays::Elements), [Some(Bson::Array(vec![]))]);
    }

    #[test]
    fn array_index_components() {
        let d = doc! { "a": [ { "b": 1 }, { "0": { "b": 2 } } ] };
        // Element 0 searched for a field "0" (missing: MongoDB yields it too), then element 0
        // by position, then the field named "0" of element 1.
        assert_eq!(
            values(d, "a.0.b", LeafArrays::Expand),
            [None, Some(1.into()), Some(2.into())]
        );
        // An indexed nested array is searched with the rest of the path.
        let d = doc! { "a": [ [ { "b": 7 } ] ] };
        assert_eq!(values(d, "a.0.b", LeafArrays::Expand), [Some(7.into())]);
        // The element at an index ending the path is not expanded.
        let d = doc! { "a": [ [1, 2] ] };
        assert_eq!(
            values(d, "a.0", LeafArrays::Expand),
            [Some(Bson::Array(vec![1.into(), 2.into()]))]
        );
    }

    #[test]
    fn index_values_map_missing_to_null() {
        let raw = RawDocumentBuf::from_document(&doc! { "a": [ { "b": 1 }, {} ] }).expect("valid");
        let path = FieldPath::parse("a.b").expect("valid");
        assert_eq!(
            index_values(&raw, &path),
            [RawBsonRef::Int32(1), RawBsonRef::Null]
        );
    }
}
