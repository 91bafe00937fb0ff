//! Every query path equals a full-scan evaluation.
//!
//! Random small collections (cross-type numbers, NaN, nulls, missing fields, arrays, empty
//! arrays, nested documents and arrays of documents) with indexes created before or after the
//! inserts, random writes through the facade, then random queries. The reference loads every
//! document, keeps those `Filter::matches` accepts, and sorts, skips, limits and projects them
//! with code written here (MongoDB's sort rules on `compare`). The planner's choice (scan,
//! index scan, index intersection or union) must never change the answer.

use std::cmp::Ordering;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::{select, subsequence};
use slate::bson::{doc, Bson, Document, RawBson, RawDocumentBuf};
use slate::query::{Filter, MergeOp, Source};
use slate::{Collection, CollectionConfig, Find};

use crate::{assert_same_docs, backends, bytes, same_docs, show, TestDb};

const INDEXABLE: [&str; 4] = ["status", "n", "tags", "m.x"];
const FILTER_PATHS: [&str; 13] = [
    "status", "status", "n", "n", "n", "tags", "tags", "m.x", "m.x", "m", "zz", "tags.0", "_id",
];
const SORTABLE: [&str; 5] = ["status", "n", "tags", "m.x", "_id"];
const PROJECTABLE: [&str; 6] = ["status", "n", "tags", "m.x", "m", "zz"];

// ---- the reference ------------------------------------------------------------------------

/// `slate::core::value::compare` on owned values.
fn cmp(a: &Bson, b: &Bson) -> Ordering {
    let raw = |v: &Bson| RawBson::try_from(v.clone()).expect("raw value");
    slate::core::value::compare(raw(a).as_raw_bson_ref(), raw(b).as_raw_bson_ref())
}

/// The values a sort on `parts` considers (MongoDB's index keys): through documents; through
/// arrays element by element, where an element that is not a document, or an empty array, gives
/// `null`; a leaf array gives its elements; a missing field, or a scalar where the path goes on,
/// gives `null`. `None` stands for an empty
/// leaf array, which sorts below `null`, as MongoDB sorts it (as `undefined`), and for a stored
/// `undefined`.
fn sort_values(cur: &Bson, parts: &[&str], out: &mut Vec<Option<Bson>>) {
    let Some((first, rest)) = parts.split_first() else {
        match cur {
            Bson::Array(items) if items.is_empty() => out.push(None),
            Bson::Undefined => out.push(None),
            Bson::Array(items) => out.extend(items.iter().cloned().map(Some)),
            other => out.push(Some(other.clone())),
        }
        return;
    };
    match cur {
        Bson::Document(d) => match d.get(*first) {
            Some(v) => sort_values(v, rest, out),
            None => out.push(Some(Bson::Null)),
        },
        Bson::Array(items) if items.is_empty() => out.push(Some(Bson::Null)),
        Bson::Array(items) => {
            for e in items {
                match e {
                    Bson::Document(_) => sort_values(e, parts, out),
                    _ => out.push(Some(Bson::Null)),
                }
            }
        }
        _ => out.push(Some(Bson::Null)),
    }
}

/// Orders sort values: the empty-array marker below everything else.
fn cmp_key(a: &Option<Bson>, b: &Option<Bson>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(x), Some(y)) => cmp(x, y),
    }
}

/// A document's sort key on `field`: the smallest value ascending, the largest descending,
/// `null` when there is none.
fn sort_key(doc: &Document, field: &str, descending: bool) -> Option<Bson> {
    let parts: Vec<&str> = field.split('.').collect();
    let mut values = Vec::new();
    sort_values(&Bson::Document(doc.clone()), &parts, &mut values);
    let best = if descending {
        values.into_iter().max_by(cmp_key)
    } else {
        values.into_iter().min_by(cmp_key)
    };
    best.unwrap_or(Some(Bson::Null))
}

/// Sorts by the fields, then by `_id` ascending.
fn reference_sort(docs: &mut [Document], sort: &[(String, bool)]) {
    let keyed: Vec<(Vec<Option<Bson>>, Document)> = docs
        .iter()
        .map(|d| {
            (
                sort.iter().map(|(f, desc)| sort_key(d, f, *desc)).collect(),
                d.clone(),
            )
        })
        .collect();
    let mut keyed = keyed;
    keyed.sort_by(|(ka, a), (kb, b)| {
        for ((x, y), (_, desc)) in ka.iter().zip(kb).zip(sort) {
            let o = cmp_key(x, y);
            let o = if *desc { o.reverse() } else { o };
            if o != Ordering::Equal {
                return o;
            }
        }
        cmp(&a["_id"], &b["_id"])
    });
    for (slot, (_, d)) in docs.iter_mut().zip(keyed) {
        *slot = d;
    }
}

/// `_id` first, then each projected path that exists, in the order asked; a path under
/// another projected path projects that one.
pub(crate) fn project(doc: &Document, fields: &[String]) -> Document {
    let mut out = Document::new();
    if let Some(id) = doc.get("_id") {
        out.insert("_id", id.clone());
    }
    for f in fields.iter().filter(|f| *f != "_id") {
        let widest = fields
            .iter()
            .filter(|g| f.starts_with(&format!("{g}.")))
            .min_by_key(|g| g.len())
            .unwrap_or(f);
        project_into(&mut out, doc, widest);
    }
    out
}

/// One path (docs/query.md, Projection): documents without it are left out; in an array,
/// document elements are projected (`{}` when without it), nested arrays likewise, scalars
/// dropped.
fn project_into(out: &mut Document, doc: &Document, path: &str) {
    let (head, rest) = match path.split_once('.') {
        Some((h, r)) => (h, Some(r)),
        None => (path, None),
    };
    let (Some(value), Some(rest)) = (doc.get(head), rest) else {
        if let Some(v) = doc.get(head) {
            out.insert(head, v.clone());
        }
        return;
    };
    match value {
        Bson::Document(d) => {
            let mut inner = match out.get(head) {
                Some(Bson::Document(existing)) => existing.clone(),
                _ => Document::new(),
            };
            project_into(&mut inner, d, rest);
            if !inner.is_empty() || matches!(out.get(head), Some(Bson::Document(_))) {
                out.insert(head, inner);
            }
        }
        Bson::Array(a) => {
            let previous = match out.get(head) {
                Some(Bson::Array(p)) => p.clone(),
                _ => Vec::new(),
            };
            out.insert(head, project_array(&previous, a, rest));
        }
        _ => {}
    }
}

fn project_array(previous: &[Bson], a: &[Bson], rest: &str) -> Bson {
    let kept: Vec<&Bson> = a
        .iter()
        .filter(|e| matches!(e, Bson::Document(_) | Bson::Array(_)))
        .collect();
    let merge = previous.len() == kept.len();
    Bson::Array(
        kept.iter()
            .enumerate()
            .map(|(i, e)| match e {
                Bson::Document(d) => {
                    let mut inner = match previous.get(i) {
                        Some(Bson::Document(p)) if merge => p.clone(),
                        _ => Document::new(),
                    };
                    project_into(&mut inner, d, rest);
                    Bson::Document(inner)
                }
                Bson::Array(inner) => {
                    let prev = match previous.get(i) {
                        Some(Bson::Array(p)) if merge => p.as_slice(),
                        _ => &[],
                    };
                    project_array(prev, inner, rest)
                }
                _ => Bson::Null,
            })
            .collect(),
    )
}

fn matches(filter: &Filter, doc: &Document) -> bool {
    filter.matches(&RawDocumentBuf::from_document(doc).expect("raw document"))
}

// ---- queries ------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Query {
    filter: Document,
    sort: Vec<(String, bool)>,
    skip: usize,
    limit: Option<usize>,
    projection: Option<Vec<String>>,
}

impl Query {
    fn find<'c>(&self, coll: &'c Collection) -> Find<'c> {
        let mut f = coll.find(self.filter.clone());
        for (field, desc) in &self.sort {
            f = f.sort(if *desc {
                format!("{field}:desc")
            } else {
                field.clone()
            });
        }
        if self.skip > 0 {
            f = f.skip(self.skip);
        }
        if let Some(l) = self.limit {
            f = f.limit(l);
        }
        if let Some(p) = &self.projection {
            f = f.project(p.clone());
        }
        f
    }

    fn describe(&self) -> String {
        format!(
            "filter {} sort {:?} skip {} limit {:?} project {:?}",
            Bson::Document(self.filter.clone()).into_relaxed_extjson(),
            self.sort,
            self.skip,
            self.limit,
            self.projection
        )
    }
}

/// Runs `q` on `coll` and checks it against the reference over `all` (every document, in
/// `_id` order).
fn check_query(coll: &Collection, all: &[Document], q: &Query, backend: &str) {
    let what = format!("[{backend}] {}", q.describe());
    let filter = match Filter::parse(&q.filter) {
        Ok(f) => f,
        Err(e) => {
            assert!(
                q.find(coll).run().is_err(),
                "{what}: the reference rejects it ({e}), find accepts it"
            );
            return;
        }
    };
    let mut matched: Vec<Document> = all.iter().filter(|d| matches(&filter, d)).cloned().collect();
    assert_eq!(
        coll.count(q.filter.clone()).expect("count"),
        matched.len() as u64,
        "{what}: count"
    );
    let expected_len = matched
        .len()
        .saturating_sub(q.skip)
        .min(q.limit.unwrap_or(usize::MAX));
    assert_eq!(
        q.find(coll).count().expect("count"),
        expected_len as u64,
        "{what}: count with skip/limit"
    );

    let plan = q.find(coll).explain().expect("explain");
    let got = q.find(coll).run().expect("run");
    // Raw bytes and serde decoding return the same documents in the same order.
    let got_bytes: Vec<Vec<u8>> = got.iter().map(bytes).collect();
    let raw: Vec<Vec<u8>> = q
        .find(coll)
        .run_raw()
        .expect("run_raw")
        .into_iter()
        .map(RawDocumentBuf::into_bytes)
        .collect();
    assert_eq!(raw, got_bytes, "{what}: run_raw");
    let typed: Vec<Vec<u8>> = q
        .find(coll)
        .run_as::<Document>()
        .expect("run_as")
        .iter()
        .map(bytes)
        .collect();
    assert_eq!(typed, got_bytes, "{what}: run_as::<Document>");
    let fields = q.projection.clone();
    let project_all = |docs: Vec<Document>| -> Vec<Document> {
        match &fields {
            Some(f) => docs.iter().map(|d| project(d, f)).collect(),
            None => docs,
        }
    };
    if !q.sort.is_empty() || matches!(plan.source, Source::Scan { .. } | Source::IdScan { .. }) {
        // Sorted, or read in `_id` order by a scan or by `_id`: the order is determined.
        reference_sort(&mut matched, &q.sort);
        let want: Vec<Document> = matched
            .into_iter()
            .skip(q.skip)
            .take(q.limit.unwrap_or(usize::MAX))
            .collect();
        assert_same_docs(&got, &project_all(want), &format!("{what}\nplan:\n{plan}"));
    } else {
        // Unsorted through an index: index order. The same documents, each once.
        let want = project_all(matched);
        let want_bytes: std::collections::HashSet<Vec<u8>> = want.iter().map(bytes).collect();
        let got_bytes: std::collections::HashSet<Vec<u8>> = got.iter().map(bytes).collect();
        assert_eq!(
            got.len(),
            expected_len,
            "{what}: length\nplan:\n{plan}\ngot:{}",
            show(&got)
        );
        assert_eq!(
            got_bytes.len(),
            got.len(),
            "{what}: a document twice\ngot:{}",
            show(&got)
        );
        assert!(
            got_bytes.is_subset(&want_bytes),
            "{what}: not a matching document\nplan:\n{plan}\n got:{}\nwant:{}",
            show(&got),
            show(&want)
        );
    }
}

// ---- generators ---------------------------------------------------------------------------

fn scalar() -> impl Strategy<Value = Bson> + Clone {
    prop_oneof![
        4 => (-3i32..4).prop_map(Bson::Int32),
        2 => (-3i32..4).prop_map(|i| Bson::Double(f64::from(i))),
        2 => (-6i32..8).prop_map(|i| Bson::Double(f64::from(i) / 2.0)),
        1 => (-3i64..4).prop_map(Bson::Int64),
        2 => Just(Bson::Null),
        1 => Just(Bson::Double(f64::NAN)),
        3 => select(&["a", "b", "c", "d", "x", "y", "z", "1"][..]).prop_map(Bson::from),
        1 => any::<bool>().prop_map(Bson::Boolean),
    ]
}

fn tag() -> impl Strategy<Value = Bson> + Clone {
    prop_oneof![
        6 => select(&["x", "y", "z", "w", "v", "a"][..]).prop_map(Bson::from),
        1 => Just(Bson::Null),
        1 => Just(Bson::Int32(1)),
    ]
}

/// A value of `n` (or of `m.x`): a scalar or an array of them (possibly empty); `None`: missing.
fn number_field() -> impl Strategy<Value = Option<Bson>> + Clone {
    prop_oneof![
        6 => scalar().prop_map(Some),
        3 => vec(scalar(), 0..4).prop_map(|v| Some(Bson::Array(v))),
        2 => Just(None),
    ]
}

fn with_x(x: Option<Bson>) -> Bson {
    let mut d = Document::new();
    if let Some(x) = x {
        d.insert("x", x);
    }
    Bson::Document(d)
}

fn document_fields() -> impl Strategy<Value = Document> {
    let status = prop_oneof![
        8 => select(&["a", "b", "c", "d", "e", "f", "g"][..]).prop_map(|s| Some(Bson::from(s))),
        1 => Just(Some(Bson::Null)),
        // Indexed like null, sorted below it.
        1 => Just(Some(Bson::Undefined)),
        1 => Just(Some(Bson::Int32(1))),
        2 => Just(None),
    ];
    let tags = prop_oneof![
        5 => vec(tag(), 0..4).prop_map(|v| Some(Bson::Array(v))),
        1 => tag().prop_map(Some),
        2 => Just(None),
    ];
    let m = prop_oneof![
        4 => number_field().prop_map(|x| Some(with_x(x))),
        2 => vec(number_field(), 1..3).prop_map(|xs| Some(Bson::Array(xs.into_iter().map(with_x).collect()))),
        1 => Just(Some(Bson::Null)),
        1 => Just(Some(Bson::Int32(5))),
        // `m.x` has no value here: no index entry.
        1 => prop_oneof![Just(Vec::new()), vec(scalar(), 1..3)].prop_map(|v| Some(Bson::Array(v))),
        2 => Just(None),
    ];
    (status, number_field(), tags, m).prop_map(|(status, n, tags, m)| {
        let mut d = Document::new();
        for (k, v) in [("status", status), ("n", n), ("tags", tags), ("m", m)] {
            if let Some(v) = v {
                d.insert(k, v);
            }
        }
        d
    })
}

/// Documents with distinct `_id`s of three types (int32, int64, string).
fn documents(max: usize) -> impl Strategy<Value = Vec<Document>> {
    vec(document_fields(), 0..max).prop_map(|fields| {
        fields
            .into_iter()
            .enumerate()
            .map(|(i, f)| {
                let id = match i % 5 {
                    0 => Bson::Int64(i as i64),
                    4 => Bson::String(format!("k{i:03}")),
                    _ if i % 7 == 6 => Bson::ObjectId(oid(i as u8)),
                    _ => Bson::Int32(i as i32),
                };
                let mut d = doc! { "_id": id };
                d.extend(f);
                d
            })
            .collect()
    })
}

fn operand() -> impl Strategy<Value = Bson> + Clone {
    prop_oneof![
        8 => scalar(),
        1 => vec(prop_oneof![tag(), scalar()], 0..3).prop_map(Bson::Array),
        1 => scalar().prop_map(|x| Bson::Document(doc! { "x": x })),
    ]
}

fn condition() -> impl Strategy<Value = Bson> {
    let cmp_op = || select(&["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"][..]);
    prop_oneof![
        4 => operand(),
        6 => (cmp_op(), operand()).prop_map(|(op, v)| Bson::Document(doc! { op: v })),
        2 => (select(&["$gt", "$gte"][..]), scalar(), select(&["$lt", "$lte"][..]), scalar())
            .prop_map(|(a, x, b, y)| Bson::Document(doc! { a: x, b: y })),
        3 => (select(&["$in", "$nin"][..]), vec(operand(), 0..4))
            .prop_map(|(op, v)| Bson::Document(doc! { op: v })),
        1 => any::<bool>().prop_map(|b| Bson::Document(doc! { "$exists": b })),
        1 => vec(prop_oneof![tag(), scalar()], 0..3).prop_map(|v| Bson::Document(doc! { "$all": v })),
        1 => (0i32..4).prop_map(|n| Bson::Document(doc! { "$size": n })),
        1 => (cmp_op(), scalar(), cmp_op(), scalar())
            .prop_map(|(a, x, b, y)| Bson::Document(doc! { "$elemMatch": { a: x, b: y } })),
        1 => scalar().prop_map(|x| Bson::Document(doc! { "$elemMatch": { "x": x } })),
        1 => (cmp_op(), operand()).prop_map(|(op, v)| Bson::Document(doc! { "$not": { op: v } })),
    ]
}

/// Keys of later documents that an earlier one already has are dropped (implicit `$and`).
fn merge(parts: Vec<Document>) -> Document {
    let mut out = Document::new();
    for d in parts {
        for (k, v) in d {
            if !out.contains_key(&k) {
                out.insert(k, v);
            }
        }
    }
    out
}

/// A condition an index can serve (equality, `$in`, a range, `$all`) on an indexable path.
fn indexable_leaf() -> impl Strategy<Value = Document> + Clone {
    let condition = prop_oneof![
        4 => scalar(),
        1 => tag(),
        2 => vec(prop_oneof![scalar(), tag()], 1..4).prop_map(|v| Bson::Document(doc! { "$in": v })),
        2 => (select(&["$gt", "$gte"][..]), -6i32..8, select(&["$lt", "$lte"][..]), 0i32..4).prop_map(
            |(a, lo, b, width)| {
                // A narrow numeric range: selective enough for the planner to use an index.
                let (x, y) = (f64::from(lo) / 2.0, f64::from(lo + width) / 2.0);
                Bson::Document(doc! { a: x, b: Bson::Int32(y.ceil() as i32) })
            }
        ),
        1 => vec(tag(), 1..3).prop_map(|v| Bson::Document(doc! { "$all": v })),
    ];
    (select(&INDEXABLE[..]), condition).prop_map(|(p, c)| doc! { p: c })
}

/// ObjectId `n`: `n` in its next to last byte, most others and the last
/// `0xFF` (trailing `0xFF` bytes are what an exclusive bound's successor
/// must carry over).
fn oid(n: u8) -> slate::bson::oid::ObjectId {
    let mut b = [0xFF; 12];
    b[10] = n;
    b[5] = n % 3;
    slate::bson::oid::ObjectId::from_bytes(b)
}

/// An `_id` value: near the generated ids (ints of three types, strings
/// `kNNN`, ObjectIds), or of a type no id has, or MinKey/MaxKey.
fn id_value() -> impl Strategy<Value = Bson> + Clone {
    prop_oneof![
        2 => (0u8..130).prop_map(|n| Bson::ObjectId(oid(n))),
        1 => prop_oneof![Just(Bson::MinKey), Just(Bson::MaxKey)],
        4 => (0i32..60).prop_map(Bson::Int32),
        2 => (0i64..130).prop_map(Bson::Int64),
        1 => (0i32..260).prop_map(|i| Bson::Double(f64::from(i) / 2.0)),
        2 => (0i32..130).prop_map(|i| Bson::String(format!("k{i:03}"))),
        1 => select(&["k", "k1", "z"][..]).prop_map(Bson::from),
        1 => prop_oneof![Just(Bson::Null), any::<bool>().prop_map(Bson::Boolean)],
    ]
}

/// A condition on `_id`, which the document keys answer: equality, `$in`,
/// ranges (within a type or across), or what they cannot narrow.
fn id_leaf() -> impl Strategy<Value = Document> + Clone {
    let condition = prop_oneof![
        3 => id_value(),
        4 => vec(id_value(), 0..5).prop_map(|v| Bson::Document(doc! { "$in": v })),
        3 => (select(&["$gt", "$gte"][..]), id_value(), select(&["$lt", "$lte"][..]), id_value())
            .prop_map(|(a, x, b, y)| Bson::Document(doc! { a: x, b: y })),
        2 => (select(&["$gt", "$gte", "$lt", "$lte", "$ne"][..]), id_value())
            .prop_map(|(op, x)| Bson::Document(doc! { op: x })),
        1 => vec(id_value(), 0..3).prop_map(|v| Bson::Document(doc! { "$nin": v })),
        1 => any::<bool>().prop_map(|b| Bson::Document(doc! { "$exists": b })),
    ];
    condition.prop_map(|c| doc! { "_id": c })
}

fn leaf() -> impl Strategy<Value = Document> {
    (select(&FILTER_PATHS[..]), condition()).prop_map(|(p, c)| doc! { p: c })
}

fn filter() -> impl Strategy<Value = Document> {
    let tree = leaf().prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            3 => vec(inner.clone(), 1..4).prop_map(merge),
            1 => vec(inner.clone(), 1..4).prop_map(|v| doc! { "$and": v }),
            2 => vec(inner.clone(), 1..4).prop_map(|v| doc! { "$or": v }),
            1 => vec(inner, 1..3).prop_map(|v| doc! { "$nor": v }),
        ]
    });
    prop_oneof![
        1 => Just(Document::new()),
        3 => indexable_leaf(),
        3 => id_leaf(),
        3 => vec(prop_oneof![indexable_leaf(), leaf(), id_leaf()], 2..4).prop_map(merge),
        2 => vec(prop_oneof![3 => indexable_leaf(), 1 => id_leaf()], 2..4).prop_map(|v| doc! { "$or": v }),
        4 => tree,
    ]
}

fn query() -> impl Strategy<Value = Query> {
    (
        filter(),
        subsequence(&SORTABLE[..], 0..=2).prop_shuffle(),
        vec(any::<bool>(), 2),
        prop_oneof![3 => Just(0usize), 1 => 1usize..6],
        proptest::option::of(0usize..12),
        proptest::option::weighted(0.3, subsequence(&PROJECTABLE[..], 0..=3)),
    )
        .prop_map(|(filter, sort, desc, skip, limit, projection)| Query {
            filter,
            sort: sort
                .into_iter()
                .zip(desc)
                .map(|(f, d)| (f.to_owned(), d))
                .collect(),
            skip,
            limit,
            projection: projection.map(|p| p.into_iter().map(str::to_owned).collect()),
        })
}

#[derive(Debug, Clone)]
enum Write {
    Delete(Document),
    Update(Document, Document),
}

fn write() -> impl Strategy<Value = Write> {
    let update = prop_oneof![
        (
            select(&["status", "n", "m.x", "tags"][..]),
            prop_oneof![scalar(), vec(tag(), 0..3).prop_map(Bson::Array)]
        )
            .prop_map(|(p, v)| doc! { "$set": { p: v } }),
        select(&["status", "n", "m.x", "tags"][..]).prop_map(|p| doc! { "$unset": { p: "" } }),
    ];
    prop_oneof![
        filter().prop_map(Write::Delete),
        (filter(), update).prop_map(|(f, u)| Write::Update(f, u)),
    ]
}

#[derive(Debug, Clone)]
struct Case {
    docs: Vec<Document>,
    indexes: Vec<&'static str>,
    index_first: bool,
    writes: Vec<Write>,
    queries: Vec<Query>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        documents(120),
        subsequence(&INDEXABLE[..], 0..=4),
        any::<bool>(),
        vec(write(), 0..3),
        vec(query(), 1..12),
    )
        .prop_map(|(docs, indexes, index_first, writes, queries)| Case {
            docs,
            indexes,
            index_first,
            writes,
            queries,
        })
}

// ---- running a case ------------------------------------------------------------------------

fn sorted_by_id(mut docs: Vec<Document>) -> Vec<Document> {
    docs.sort_by(|a, b| cmp(&a["_id"], &b["_id"]));
    docs
}

/// Creates collection `c` holding `docs` with `indexes` (in the configuration, or created
/// after the inserts).
fn load(t: &TestDb, docs: &[Document], indexes: &[&str], index_first: bool) -> Collection {
    let mut config = CollectionConfig::new("c");
    if index_first {
        for f in indexes {
            config = config.index(*f);
        }
    }
    let coll = t.db.create_collection(config).expect("create collection");
    coll.insert_many(docs.to_vec()).expect("insert_many");
    if !index_first {
        for f in indexes {
            coll.create_index(f).expect("create_index");
        }
    }
    coll
}

fn assert_integrity(t: &TestDb, name: &str) {
    let read = t.db.database().read();
    let config = read.config(name).expect("config");
    let problems = slate::core::check_integrity(read.snapshot(), &config).expect("integrity check");
    assert!(
        problems.is_empty(),
        "[{}] index/count problems: {problems:#?}",
        t.backend
    );
}

/// Applies a random write and checks what it reports against the reference.
fn apply_write(t: &TestDb, coll: &Collection, w: &Write) {
    let before = coll.find(doc! {}).run().expect("read all");
    let count_matches =
        |f: &Document| Filter::parse(f).map(|f| before.iter().filter(|d| matches(&f, d)).count() as u64);
    match w {
        Write::Delete(f) => match (count_matches(f), coll.delete_many(f.clone())) {
            (Ok(want), Ok(n)) => assert_eq!(n, want, "[{}] delete_many {f}", t.backend),
            (Err(_), Err(_)) => {}
            (want, got) => panic!("[{}] delete_many {f}: reference {want:?}, got {got:?}", t.backend),
        },
        Write::Update(f, u) => match (count_matches(f), coll.update_many(f.clone(), u.clone(), false)) {
            (Ok(want), Ok(r)) => assert_eq!(r.matched, want, "[{}] update_many {f} {u}", t.backend),
            (Err(_), Err(_)) => {}
            // An update that cannot apply to some matching document ($set through an array
            // or a scalar) changes nothing at all.
            (Ok(_), Err(_)) => {
                let after = coll.find(doc! {}).run().expect("read all");
                assert_same_docs(
                    &after,
                    &before,
                    &format!("[{}] failed update_many {f} {u}", t.backend),
                );
            }
            (want, got) => panic!(
                "[{}] update_many {f} {u}: reference {want:?}, got {got:?}",
                t.backend
            ),
        },
    }
}

fn run_case(case: &Case) {
    for t in backends() {
        let coll = load(&t, &case.docs, &case.indexes, case.index_first);
        for w in &case.writes {
            apply_write(&t, &coll, w);
        }
        assert_integrity(&t, "c");
        let all = coll.find(doc! {}).run().expect("read all");
        assert!(
            all.windows(2)
                .all(|w| cmp(&w[0]["_id"], &w[1]["_id"]) == Ordering::Less),
            "[{}] a scan is not in _id order:{}",
            t.backend,
            show(&all)
        );
        if case.writes.is_empty() {
            assert_same_docs(
                &all,
                &sorted_by_id(case.docs.clone()),
                &format!("[{}] stored documents", t.backend),
            );
        }
        assert_eq!(coll.count(doc! {}).expect("count"), all.len() as u64);
        for q in &case.queries {
            check_query(&coll, &all, q, t.backend);
        }
    }
}

proptest! {
    // Each case runs on two backends; bound the shrinking so a failure reports in time.
    #![proptest_config(ProptestConfig { max_shrink_iters: 400, max_shrink_time: 60_000, ..ProptestConfig::with_cases(64) })]

    #[test]
    fn every_query_path_equals_a_full_scan(case in case()) {
        run_case(&case);
    }
}

// ---- fixed cases: the properties' sharpest corners, readable when they fail ----------------

fn check_fixed(docs: Vec<Document>, indexes: &[&str], queries: &[Query]) {
    for fresh in [crate::memory, crate::rocks] {
        for index_first in [true, false] {
            let t = fresh();
            let coll = load(&t, &docs, indexes, index_first);
            let all = coll.find(doc! {}).run().expect("read all");
            for q in queries {
                check_query(&coll, &all, q, t.backend);
            }
        }
    }
}

fn q(filter: Document) -> Query {
    Query {
        filter,
        sort: Vec::new(),
        skip: 0,
        limit: None,
        projection: None,
    }
}

fn sorted(filter: Document, field: &str, descending: bool) -> Query {
    Query {
        sort: vec![(field.to_owned(), descending)],
        ..q(filter)
    }
}

#[test]
fn a_typed_find_reads_structs_and_names_the_document_that_does_not_fit() {
    #[derive(Debug, PartialEq, serde::Deserialize)]
    struct Person {
        #[serde(rename = "_id")]
        id: i32,
        name: String,
        age: Option<i64>,
    }
    let t = crate::memory();
    let coll =
        t.db.create_collection(CollectionConfig::new("people").index("age"))
            .expect("create");
    coll.insert_many(vec![
        doc! { "_id": 1, "name": "ada", "age": 36_i64, "city": "london" },
        doc! { "_id": 2, "name": "alan", "age": Bson::Null },
        doc! { "_id": 3, "name": 7, "age": 41_i64 },
    ])
    .expect("insert");
    let people: Vec<Person> = coll
        .find(doc! { "_id": { "$lte": 2 } })
        .run_as()
        .expect("typed find");
    assert_eq!(
        people,
        [
            Person {
                id: 1,
                name: "ada".into(),
                age: Some(36)
            },
            Person {
                id: 2,
                name: "alan".into(),
                age: None
            },
        ]
    );
    // Through an index, with a projection: `T` reads the projected document.
    let ages: Vec<Document> = coll
        .find(doc! { "age": { "$gt": 30_i64 } })
        .project(["age"])
        .run_as()
        .expect("projected typed find");
    assert_eq!(
        ages,
        [doc! { "_id": 1, "age": 36_i64 }, doc! { "_id": 3, "age": 41_i64 }]
    );
    let raw = coll
        .find(doc! { "_id": 1 })
        .project(["city", "name"])
        .run_raw()
        .expect("raw");
    assert_eq!(
        raw[0].to_document().expect("bson"),
        doc! { "_id": 1, "city": "london", "name": "ada" }
    );

    let err = coll
        .find(doc! {})
        .run_as::<Person>()
        .expect_err("name 7 is not a string");
    match &err {
        slate::Error::Query(slate::query::Error::Decode { id, type_name, .. }) => {
            assert_eq!(id, "3");
            assert!(type_name.ends_with("Person"), "{type_name}");
        }
        other => panic!("not a decode error: {other:?}"),
    }
    assert!(err.to_string().contains("document 3"), "{err}");
    // The item fails; the documents before it (and after) still come.
    let items: Vec<Result<Person, slate::query::Error>> =
        coll.find(doc! {}).iter_as().expect("iter").collect();
    assert_eq!(items.len(), 3);
    assert!(
        items[0].is_ok() && items[1].is_ok() && items[2].is_err(),
        "{items:?}"
    );
    let items: Vec<Result<Person, slate::query::Error>> = coll
        .find(doc! {})
        .sort("_id:desc")
        .iter_as()
        .expect("iter")
        .collect();
    assert!(
        items[0].is_err() && items[1].is_ok() && items[2].is_ok(),
        "{items:?}"
    );

    // Point reads into the same type.
    let ada = Person {
        id: 1,
        name: "ada".into(),
        age: Some(36),
    };
    assert_eq!(coll.get_as::<Person>(1).expect("get_as"), Some(ada));
    assert_eq!(coll.get_as::<Person>(9).expect("get_as"), None);
    assert!(
        matches!(
            coll.get_as::<Person>(3),
            Err(slate::Error::Query(slate::query::Error::Decode { .. }))
        ),
        "name 7 is not a string"
    );
    let many: Vec<Option<Person>> = coll
        .get_many_as(&[Bson::Int32(2), Bson::Int32(9), Bson::Int64(1)])
        .expect("get_many_as");
    assert_eq!(
        many.iter().map(|p| p.as_ref().map(|p| p.id)).collect::<Vec<_>>(),
        [Some(2), None, Some(1)]
    );
    // With a vector field, get_as reads what get returns: the vector re-attached.
    let vecs =
        t.db.create_collection(CollectionConfig::new("vecs").vector("v", 2, slate::Metric::L2))
            .expect("create");
    vecs.insert_one(doc! { "_id": 1, "v": [1.0, 2.0], "x": "y" })
        .expect("insert");
    let whole = vecs.get(1).expect("get").expect("present");
    assert!(whole.contains_key("v"));
    assert_eq!(vecs.get_as::<Document>(1).expect("get_as"), Some(whole.clone()));
    assert_eq!(
        vecs.get_many_as::<Document>(&[Bson::Int32(1)])
            .expect("get_many_as"),
        [Some(whole)]
    );

    // A path listed twice is projected once, in every shape.
    let twice = || coll.find(doc! { "_id": 1 }).project(["name", "name"]);
    let want = doc! { "_id": 1, "name": "ada" };
    assert_eq!(twice().run().expect("run"), std::slice::from_ref(&want));
    assert_eq!(
        twice().run_raw().expect("raw")[0].to_document().expect("bson"),
        want
    );
    assert_eq!(twice().run_as::<Document>().expect("typed"), [want]);
}

#[test]
fn ranges_on_an_array_field_are_not_intersected() {
    // {n: [0, 9]} matches {$gt: 1, $lt: 5}: 9 > 1 and 0 < 5, though no element is in (1, 5).
    let docs = vec![
        doc! { "_id": 1, "n": [0, 9] },
        doc! { "_id": 2, "n": 3 },
        doc! { "_id": 3, "n": 7 },
        doc! { "_id": 4, "n": [] },
    ];
    let queries = [
        q(doc! { "n": { "$gt": 1, "$lt": 5 } }),
        q(doc! { "n": { "$gte": 0, "$lte": 0 } }),
        q(doc! { "n": { "$elemMatch": { "$gt": 1, "$lt": 5 } } }),
    ];
    check_fixed(docs, &["n"], &queries);
}

#[test]
fn numbers_compare_across_types_through_an_index() {
    let docs = vec![
        doc! { "_id": 1, "n": 1 },
        doc! { "_id": 2, "n": 1i64 },
        doc! { "_id": 3, "n": 1.0 },
        doc! { "_id": 4, "n": [2, 1.0] },
        doc! { "_id": 5, "n": 1.5 },
        doc! { "_id": 6, "n": "1" },
        doc! { "_id": 7, "n": f64::NAN },
        doc! { "_id": 8 },
    ];
    let queries = [
        q(doc! { "n": 1 }),
        q(doc! { "n": 1.0 }),
        q(doc! { "n": { "$in": [1i64, "1"] } }),
        q(doc! { "n": { "$lt": 1.5 } }),
        q(doc! { "n": { "$gte": f64::NAN } }),
        q(doc! { "n": null }),
        sorted(doc! {}, "n", false),
        sorted(doc! {}, "n", true),
    ];
    check_fixed(docs, &["n"], &queries);
}

#[test]
fn nested_paths_through_arrays_of_documents() {
    let docs = vec![
        doc! { "_id": 1, "m": { "x": 2 } },
        doc! { "_id": 2, "m": [ { "x": 1 }, { "x": 3 } ] },
        doc! { "_id": 3, "m": [ { "x": 4 }, {} ] },
        doc! { "_id": 4, "m": [1, 2] },
        doc! { "_id": 5, "m": 5 },
        doc! { "_id": 6 },
    ];
    let queries = [
        q(doc! { "m.x": { "$gt": 1, "$lt": 3 } }),
        q(doc! { "m.x": null }),
        q(doc! { "m.x": { "$exists": false } }),
        q(doc! { "m": { "$elemMatch": { "x": { "$gte": 3 } } } }),
        sorted(doc! {}, "m.x", false),
        sorted(doc! {}, "m.x", true),
    ];
    check_fixed(docs, &["m.x"], &queries);
}

#[test]
fn empty_arrays_sort_below_null_and_missing() {
    // MongoDB: "a comparison of an empty array considers the empty array as less than a null
    // value or a missing field value" — first ascending, last descending.
    let docs = vec![
        doc! { "_id": 1, "tags": ["b"] },
        doc! { "_id": 2, "tags": [] },
        doc! { "_id": 3 },
        doc! { "_id": 4, "tags": null },
        doc! { "_id": 5, "tags": "a" },
    ];
    for t in backends() {
        let coll = load(&t, &docs, &["tags"], true);
        let ids = |desc: bool| -> Vec<Bson> {
            let spec = if desc { "tags:desc" } else { "tags" };
            coll.find(doc! {})
                .sort(spec)
                .run()
                .expect("run")
                .into_iter()
                .map(|d| d["_id"].clone())
                .collect()
        };
        let asc: Vec<Bson> = [2, 3, 4, 5, 1].into_iter().map(Bson::Int32).collect();
        let desc: Vec<Bson> = [1, 5, 3, 4, 2].into_iter().map(Bson::Int32).collect();
        assert_eq!(ids(false), asc, "[{}] ascending", t.backend);
        assert_eq!(ids(true), desc, "[{}] descending", t.backend);
    }
}

/// Sorts on dot paths through arrays, empty arrays, `undefined`, nulls, nested arrays and
/// positions order documents as MongoDB does: the document sets and orders of its
/// `sort_dotted_paths.js` conformance test (`_id` breaking ties either way; sorts on several
/// fields, which under one array take their values from one element), on both backends, with
/// and without a limit (a bounded heap), with and without an index on `a` (multikey here, so
/// the sort is done in memory).
#[test]
fn dotted_sorts_through_arrays_order_as_mongodb_orders_them() {
    let u = Bson::Undefined;
    let scalars = vec![
        doc! { "_id": 1, "a": 1 },
        doc! { "_id": 2, "a": u.clone() },
        doc! { "_id": 3, "a": Bson::Null },
        doc! { "_id": 4, "a": {} },
        doc! { "_id": 5, "a": [] },
        doc! { "_id": 6, "a": [1] },
        doc! { "_id": 7, "a": [[1]] },
        doc! { "_id": 8 },
        doc! { "_id": 9, "a": [u.clone()] },
    ];
    let two = vec![
        doc! { "_id": 1, "a": { "b": 2 } },
        doc! { "_id": 2, "a": { "b": [] } },
        doc! { "_id": 3, "a": { "b": [2, 3] } },
        doc! { "_id": 4, "a": { "c": 1 } },
        doc! { "_id": 5, "a": [] },
        doc! { "_id": 6, "a": [{ "b": [5] }] },
        doc! { "_id": 7, "a": [{ "b": [4, 5] }, { "b": 7 }] },
        doc! { "_id": 8, "a": [{ "b": [1, 3] }, { "b": [2, 5] }] },
        doc! { "_id": 9, "a": [{ "b": [] }, { "b": [1, 3] }] },
    ];
    let positional = vec![
        doc! { "_id": 1, "a": [{ "b": [4, 1], "c": 1 }, { "b": [1, 5], "c": 2 }] },
        doc! { "_id": 2, "a": [{ "b": 2, "c": [1, 3] }, { "b": 4, "c": [2, 4] }] },
        doc! { "_id": 3, "a": [{ "b": [6, 4], "c": 1 }, { "b": [9, 7], "c": 2 }] },
        doc! { "_id": 4, "a": [{ "b": 4, "c": [1, 2] }, { "b": 5, "c": [3, 2] }] },
        doc! { "_id": 5, "a": [{ "b": [2, 3], "c": 1 }, { "b": [7, 6], "c": 3 }] },
        doc! { "_id": 6, "a": [{ "b": 5, "c": [] }, { "b": 3, "c": 3 }] },
        doc! { "_id": 7, "a": [{ "b": [], "c": 2 }, { "b": 2, "c": 3 }] },
        doc! { "_id": 8, "a": [{ "b": 3, "c": [2] }, { "b": 8, "c": [3] }] },
        doc! { "_id": 9, "a": [{ "b": [8], "c": 2 }, { "b": [6], "c": 3 }] },
    ];
    let three = vec![
        doc! { "_id": 1, "a": { "b": { "c": 2 } } },
        doc! { "_id": 2, "a": { "b": { "c": [] } } },
        doc! { "_id": 3, "a": [{ "b": [] }, { "b": { "c": [] } }] },
        doc! { "_id": 4, "a": [{ "b": { "c": 1 } }] },
        doc! { "_id": 5, "a": { "b": [{ "c": 3 }, { "d": 1 }] } },
        doc! { "_id": 6, "a": { "b": [{ "c": [5] }] } },
        doc! { "_id": 7, "a": [] },
        doc! { "_id": 8, "a": { "b": [{ "c": [1, 3] }, { "c": [2, 5] }] } },
        doc! { "_id": 9, "a": [{ "b": [{ "c": [] }, { "c": [1, 3] }] }] },
    ];
    let one_array = vec![
        doc! { "_id": 1, "a": 1, "b": [2] },
        doc! { "_id": 2, "a": 2, "b": [] },
        doc! { "_id": 3, "a": [], "b": 4 },
        doc! { "_id": 4, "a": [1], "b": 4 },
        doc! { "_id": 5, "a": [2, 3], "b": 2 },
        doc! { "_id": 6, "a": 2, "b": [3, 5] },
        doc! { "_id": 7, "a": 1, "b": [1, 3] },
        doc! { "_id": 8, "a": [1, 2], "b": 3 },
        doc! { "_id": 9, "a": 2, "b": 3 },
    ];
    let common = vec![
        doc! { "_id": 1, "a": [{ "b": 4, "c": 1 }, { "b": 1, "c": 2 }] },
        doc! { "_id": 2, "a": [{ "b": 2, "c": 1 }, { "b": 4, "c": 2 }] },
        doc! { "_id": 3, "a": [{ "b": 6, "c": 1 }, { "b": 9, "c": 2 }] },
        doc! { "_id": 4, "a": [{ "b": 4, "c": 1 }, { "b": 5, "c": 3 }] },
        doc! { "_id": 5, "a": [{ "b": 2, "c": 1 }, { "b": 7, "c": 3 }] },
        doc! { "_id": 6, "a": [{ "b": 5, "c": 1 }, { "b": 3, "c": 3 }] },
        doc! { "_id": 7, "a": [{ "b": 7, "c": 2 }, { "b": 2, "c": 3 }] },
        doc! { "_id": 8, "a": [{ "b": 3, "c": 2 }, { "b": 8, "c": 3 }] },
        doc! { "_id": 9, "a": [{ "b": 8, "c": 2 }, { "b": 6, "c": 3 }] },
    ];
    let apart = vec![
        doc! { "_id": 1, "a": { "b": 1 }, "c": [{ "d": [4, 1] }, { "d": [1, 5] }] },
        doc! { "_id": 2, "a": [{ "b": [1, 3] }, { "b": [2, 4] }], "c": { "d": 2 } },
        doc! { "_id": 3, "a": { "b": 1 }, "c": [{ "d": [6, 4] }, { "d": [9, 7] }] },
        doc! { "_id": 4, "a": [{ "b": [2] }, { "b": [3, 2] }], "c": { "d": 4 } },
        doc! { "_id": 5, "a": { "b": 1 }, "c": [{ "d": [2, 3] }, { "d": [7, 6] }] },
        doc! { "_id": 6, "a": [{ "b": [] }, { "b": 3 }], "c": { "d": 4 } },
        doc! { "_id": 7, "a": { "b": 2 }, "c": [{ "d": [] }, { "d": 2 }] },
        doc! { "_id": 8, "a": [{ "b": [2] }, { "b": [3] }], "c": { "d": 3 } },
        doc! { "_id": 9, "a": { "b": 3 }, "c": [{ "d": [8] }, { "d": [6] }] },
    ];
    // Each set with its sorts: (the sort's fields, the order).
    type Sorts = Vec<(&'static [&'static str], [i32; 9])>;
    let sets: Vec<(Vec<Document>, Sorts)> = vec![
        (
            scalars,
            vec![
                (&["a", "_id"], [2, 5, 9, 3, 8, 1, 6, 4, 7]),
                (&["a:desc", "_id"], [7, 4, 1, 6, 3, 8, 2, 5, 9]),
                (&["a.0", "_id"], [9, 1, 2, 3, 4, 5, 8, 6, 7]),
                (&["a.0:desc", "_id"], [7, 6, 1, 2, 3, 4, 5, 8, 9]),
            ],
        ),
        (
            two,
            vec![
                (&["a.b", "_id"], [2, 9, 4, 5, 8, 1, 3, 7, 6]),
                (&["a.b", "_id:desc"], [9, 2, 5, 4, 8, 3, 1, 7, 6]),
                (&["a.b:desc", "_id"], [7, 6, 8, 3, 9, 1, 4, 5, 2]),
                (&["a.b:desc", "_id:desc"], [7, 8, 6, 9, 3, 1, 5, 4, 2]),
            ],
        ),
        (
            positional,
            vec![
                (&["a.0.b", "_id"], [7, 1, 2, 5, 8, 3, 4, 6, 9]),
                (&["a.0.b", "_id:desc"], [7, 1, 5, 2, 8, 4, 3, 6, 9]),
                (&["a.0.b:desc", "_id"], [9, 3, 6, 1, 4, 5, 8, 2, 7]),
                (&["a.0.b:desc", "_id:desc"], [9, 3, 6, 4, 1, 8, 5, 2, 7]),
                (&["a.c", "a.b", "_id"], [6, 1, 2, 5, 3, 4, 7, 8, 9]),
                (&["a.c", "a.b:desc", "_id"], [6, 3, 1, 4, 5, 2, 9, 8, 7]),
                (&["a.c:desc", "a.b", "_id"], [2, 7, 6, 4, 5, 9, 8, 1, 3]),
                (&["a.c:desc", "a.b:desc", "_id"], [2, 8, 5, 9, 4, 6, 7, 3, 1]),
                (&["a.b", "a", "_id"], [7, 1, 2, 5, 6, 8, 4, 3, 9]),
                (&["a.b", "a:desc", "_id"], [7, 1, 5, 2, 8, 6, 3, 4, 9]),
                (&["a.b:desc", "a", "_id"], [3, 8, 9, 5, 6, 4, 1, 2, 7]),
                (&["a.b:desc", "a:desc", "_id"], [3, 9, 8, 5, 1, 4, 6, 2, 7]),
            ],
        ),
        (
            three,
            vec![
                (&["a.b.c", "_id"], [2, 3, 9, 5, 7, 4, 8, 1, 6]),
                (&["a.b.c", "_id:desc"], [9, 3, 2, 7, 5, 8, 4, 1, 6]),
                (&["a.b.c:desc", "_id"], [6, 8, 5, 9, 1, 4, 3, 7, 2]),
                (&["a.b.c:desc", "_id:desc"], [8, 6, 9, 5, 1, 4, 7, 3, 2]),
            ],
        ),
        (
            one_array,
            vec![
                (&["a", "b", "_id"], [3, 7, 1, 8, 4, 2, 5, 6, 9]),
                (&["a", "b:desc", "_id"], [3, 4, 7, 8, 1, 6, 9, 5, 2]),
                (&["a:desc", "b", "_id"], [5, 2, 6, 8, 9, 7, 1, 4, 3]),
                (&["a:desc", "b:desc", "_id"], [5, 6, 8, 9, 2, 4, 7, 1, 3]),
            ],
        ),
        (
            common,
            vec![
                (&["a.c", "a.b", "_id"], [2, 5, 1, 4, 6, 3, 8, 7, 9]),
                (&["a.c", "a.b:desc", "_id"], [3, 6, 1, 4, 2, 5, 9, 7, 8]),
                (&["a.c:desc", "a.b", "_id"], [7, 6, 4, 9, 5, 8, 1, 2, 3]),
                (&["a.c:desc", "a.b:desc", "_id"], [8, 5, 9, 4, 6, 7, 3, 2, 1]),
                (&["a.c", "a", "_id"], [2, 5, 1, 4, 6, 3, 8, 7, 9]),
                (&["a.c", "a:desc", "_id"], [3, 6, 1, 4, 2, 5, 9, 7, 8]),
                (&["a.c:desc", "a", "_id"], [7, 6, 4, 9, 5, 8, 1, 2, 3]),
                (&["a.c:desc", "a:desc", "_id"], [8, 5, 9, 4, 6, 7, 3, 2, 1]),
            ],
        ),
        (
            apart,
            vec![
                (&["a.b", "c.d", "_id"], [6, 1, 2, 5, 3, 7, 8, 4, 9]),
                (&["a.b", "c.d:desc", "_id"], [6, 3, 5, 1, 2, 4, 8, 7, 9]),
                (&["a.b:desc", "c.d", "_id"], [2, 8, 4, 6, 9, 7, 1, 5, 3]),
                (&["a.b:desc", "c.d:desc", "_id"], [2, 9, 4, 6, 8, 7, 3, 5, 1]),
            ],
        ),
    ];
    for t in backends() {
        for indexed in [false, true] {
            for (n, (docs, sorts)) in sets.iter().enumerate() {
                let mut config = CollectionConfig::new(format!("c{n}_{indexed}"));
                if indexed {
                    config = config.index("a");
                }
                let coll = t.db.create_collection(config).expect("create");
                coll.insert_many(docs.clone()).expect("insert");
                for (spec, want) in sorts {
                    for limit in [None, Some(500), Some(4)] {
                        let mut find = coll.find(doc! {});
                        for field in *spec {
                            find = find.sort(*field);
                        }
                        if let Some(n) = limit {
                            find = find.limit(n);
                        }
                        let got: Vec<i32> = find
                            .run()
                            .expect("run")
                            .iter()
                            .map(|d| d.get_i32("_id").expect("id"))
                            .collect();
                        let want = &want[..limit.unwrap_or(9).min(9)];
                        assert_eq!(
                            got, want,
                            "[{}] indexed {indexed}: sort {spec:?}, limit {limit:?}",
                            t.backend
                        );
                    }
                }
            }
        }
    }
}

/// A numeric component after an array is a position in it when sorting
/// (MongoDB's sort keys), ascending and descending, with or without a limit,
/// and whether or not the path is indexed.
#[test]
fn sorts_on_array_positions() {
    let docs = vec![
        doc! { "_id": 1, "items": [{ "p": 9 }, { "p": 0 }] },
        doc! { "_id": 2, "items": [{ "p": 1 }] },
        doc! { "_id": 3, "items": [{ "p": 5 }, { "p": 100 }] },
        doc! { "_id": 4, "items": [] },
    ];
    for t in backends() {
        for indexed in [false, true] {
            let indexes: &[&str] = if indexed { &["items.0.p"] } else { &[] };
            let coll = load(&t, &docs, indexes, true);
            let ids = |spec: &str, limit: Option<usize>| -> Vec<Bson> {
                let mut find = coll.find(doc! {}).sort(spec);
                if let Some(n) = limit {
                    find = find.limit(n);
                }
                find.run()
                    .expect("run")
                    .into_iter()
                    .map(|d| d["_id"].clone())
                    .collect()
            };
            let want = |ids: &[i32]| -> Vec<Bson> { ids.iter().copied().map(Bson::Int32).collect() };
            let b = t.backend;
            assert_eq!(
                ids("items.0.p", None),
                want(&[4, 2, 3, 1]),
                "[{b}] indexed {indexed}"
            );
            assert_eq!(
                ids("items.0.p", Some(2)),
                want(&[4, 2]),
                "[{b}] indexed {indexed}"
            );
            assert_eq!(
                ids("items.0.p:desc", None),
                want(&[1, 3, 2, 4]),
                "[{b}] indexed {indexed}"
            );
            assert_eq!(
                ids("items.1.p", None),
                want(&[2, 4, 1, 3]),
                "[{b}] indexed {indexed}"
            );
            t.db.drop_collection("c").expect("drop");
        }
    }
}

// ---- plan choice ---------------------------------------------------------------------------

fn big_collection(t: &TestDb) -> (Collection, Vec<Document>) {
    let docs: Vec<Document> = (0..2000)
        .map(|i| {
            doc! {
                "_id": i,
                "status": format!("s{}", i % 100),
                "flag": i % 2 == 0,
                "n": (i * 37) % 1000,
                "tags": [format!("t{}", i % 7), format!("t{}", i % 11)],
            }
        })
        .collect();
    let coll =
        t.db.create_collection(CollectionConfig::new("big").index("status").index("flag"))
            .expect("create");
    coll.insert_many(docs.clone()).expect("insert");
    coll.create_index("tags").expect("index tags");
    (coll, docs)
}

/// Collection `c` of a fresh in-memory database, holding `docs`.
fn scratch(docs: impl IntoIterator<Item = Document>) -> Collection {
    let db = slate::Db::memory();
    let coll = db.create_collection(CollectionConfig::new("c")).expect("create");
    coll.insert_many(docs).expect("insert");
    coll
}

#[test]
fn in_takes_dbrefs_as_values() {
    let coll = scratch(vec![
        doc! { "_id": 1, "r": { "$ref": "c", "$id": 1 } },
        doc! { "_id": 2, "r": { "$ref": "c", "$id": 2 } },
    ]);
    let found = coll
        .find(doc! { "r": { "$in": [{ "$ref": "c", "$id": 2 }] } })
        .run()
        .expect("a DBRef in $in is a value");
    assert_eq!(found, vec![doc! { "_id": 2, "r": { "$ref": "c", "$id": 2 } }]);
    let err = coll
        .find(doc! { "r": { "$in": [{ "$gt": 1 }] } })
        .run()
        .expect_err("an operator document is not");
    assert!(err.to_string().contains("$in"), "{err}");
}

/// A DBRef's fields are queried as fields: on their own, inside
/// `$elemMatch` (how arrays of references are searched) and on dot paths.
#[test]
fn dbref_fields_are_fields() {
    let coll = scratch(vec![
        doc! { "_id": 1, "refs": [{ "$ref": "users", "$id": 7 }, { "$ref": "teams", "$id": 1 }] },
        doc! { "_id": 2, "refs": [{ "$ref": "users", "$id": 8 }] },
        doc! { "_id": 3, "r": { "$ref": "users", "$id": 7 } },
    ]);
    let ids = |filter: Document| -> Vec<Bson> {
        coll.find(filter.clone())
            .run()
            .unwrap_or_else(|e| panic!("{filter}: {e}"))
            .into_iter()
            .map(|d| d["_id"].clone())
            .collect()
    };
    assert_eq!(
        ids(doc! { "refs": { "$elemMatch": { "$ref": "users", "$id": 7 } } }),
        [Bson::Int32(1)]
    );
    assert_eq!(
        ids(doc! { "refs": { "$elemMatch": { "$id": 8 } } }),
        [Bson::Int32(2)]
    );
    assert_eq!(ids(doc! { "refs.$id": 1 }), [Bson::Int32(1)]);
    assert_eq!(
        ids(doc! { "r.$ref": "users", "r.$id": { "$gte": 7 } }),
        [Bson::Int32(3)]
    );
}

#[test]
fn count_checks_what_a_run_checks_and_ignores_order() {
    let coll = scratch((0..10).map(|i| doc! { "_id": i, "n": 10 - i }));
    let count = |f: slate::Find<'_>| f.count();
    assert!(count(coll.find(doc! {}).sort("n:up")).is_err(), "a bad sort");
    assert!(
        count(coll.find(doc! {}).project(["$x"])).is_err(),
        "a bad projection"
    );
    let page = count(
        coll.find(doc! { "n": { "$gt": 2 } })
            .sort("n:desc")
            .skip(3)
            .limit(2),
    );
    assert_eq!(page.expect("count"), 2);
    assert_eq!(count(coll.find(doc! {}).sort("n").skip(8)).expect("count"), 2);
}

#[test]
fn explain_shows_the_largest_skip_without_overflowing() {
    let coll = scratch([doc! { "_id": 1, "a": 1 }]);
    let plan = coll
        .find(doc! {})
        .sort("a")
        .skip(usize::MAX)
        .limit(1)
        .explain()
        .expect("explain");
    let text = plan.to_string();
    assert!(text.contains(&i64::MAX.to_string()), "{text}");
    assert!(!text.contains("-1"), "{text}");
    assert!(coll
        .find(doc! {})
        .sort("a")
        .skip(usize::MAX)
        .limit(1)
        .run()
        .expect("run")
        .is_empty());
}

/// The `_id`s of `docs`, in order.
fn ids(docs: &[Document]) -> Vec<i64> {
    docs.iter()
        .map(|d| {
            d.get("_id")
                .and_then(Bson::as_i64)
                .or_else(|| d.get_i32("_id").ok().map(i64::from))
                .expect("int _id")
        })
        .collect()
}

#[test]
fn id_filters_read_documents_by_key() {
    for t in backends() {
        let b = t.backend;
        let (coll, _) = big_collection(&t);
        let explain = |f: Document| coll.find(f).explain().expect("explain").source;
        let found = |f: Document| ids(&coll.find(f).run().expect("find"));

        // Points are looked up: an upper bound of one document each (equal
        // numbers of three types are one point).
        let source = explain(doc! { "_id": { "$in": [5, 3i64, 3.0, 99_999] } });
        assert!(
            matches!(&source, Source::IdScan { estimate: 3, intervals, .. } if intervals.len() == 3),
            "[{b}] {source:?}"
        );
        assert_eq!(
            found(doc! { "_id": { "$in": [5, 3i64, 3.0, 99_999] } }),
            [3, 5],
            "[{b}]"
        );
        assert!(
            matches!(explain(doc! { "_id": 7 }), Source::IdScan { estimate: 1, .. }),
            "[{b}]"
        );
        assert_eq!(
            found(doc! { "_id": { "$in": [1999, 5, 3] } }),
            [3, 5, 1999],
            "[{b}]"
        );
        // Values and ranges of `_id` alone: the keys are the matches, not checked again.
        for exact in [
            doc! { "_id": { "$in": [3, 5] } },
            doc! { "_id": { "$gt": 10, "$lte": 20.5 } },
        ] {
            let plan = coll.find(exact).explain().expect("explain");
            assert!(plan.filter.is_none(), "[{b}] {plan}");
            assert!(plan.to_string().contains("checked=no"), "[{b}] {plan}");
        }
        assert_eq!(
            found(doc! { "_id": { "$gt": 10, "$lte": 20.5 } }),
            (11..=20).collect::<Vec<_>>(),
            "[{b}]"
        );
        for checked in [
            doc! { "_id": 3, "status": "s3" },
            doc! { "_id": { "$in": [3, [3]] } },
        ] {
            let plan = coll.find(checked).explain().expect("explain");
            assert!(plan.filter.is_some(), "[{b}] {plan}");
        }
        // A point on `_id` beats a selective index; the rest of the filter is checked.
        assert!(
            matches!(explain(doc! { "_id": 7, "status": "s7" }), Source::IdScan { .. }),
            "[{b}]"
        );
        assert_eq!(found(doc! { "_id": 7, "status": "s7" }), [7], "[{b}]");
        assert!(found(doc! { "_id": 7, "status": "s8" }).is_empty(), "[{b}]");

        // Ranges are read in key order, counted up to the cap.
        let source = explain(doc! { "_id": { "$gte": 1990 } });
        assert!(
            matches!(
                source,
                Source::IdScan {
                    estimate: 10,
                    capped: false,
                    ..
                }
            ),
            "[{b}] {source:?}"
        );
        assert_eq!(
            found(doc! { "_id": { "$gte": 1990 } }),
            (1990..2000).collect::<Vec<_>>(),
            "[{b}]"
        );
        let page = coll
            .find(doc! { "_id": { "$gt": 1000 } })
            .limit(3)
            .run()
            .expect("page");
        assert_eq!(ids(&page), [1001, 1002, 1003], "[{b}]");
        // However wide, a range reads no more than a scan.
        let source = explain(doc! { "_id": { "$gte": 10 } });
        assert!(
            matches!(source, Source::IdScan { capped: true, .. }),
            "[{b}] {source:?}"
        );
        assert_eq!(
            coll.count(doc! { "_id": { "$gte": 10 } }).expect("count"),
            1990,
            "[{b}]"
        );
        // A wide range beside a selective index: the index.
        let source = explain(doc! { "_id": { "$lt": 1500 }, "status": "s7" });
        assert!(
            matches!(&source, Source::IndexScan { field, .. } if field == "status"),
            "[{b}] {source:?}"
        );
        assert_eq!(
            found(doc! { "_id": { "$lt": 1500 }, "status": "s7" }),
            (0..15).map(|i| 7 + 100 * i).collect::<Vec<_>>(),
            "[{b}]"
        );
        // A limited find on points looks them up, however few it wants.
        let source = explain(doc! { "_id": { "$in": [1998, 1999] } });
        assert!(
            matches!(source, Source::IdScan { estimate: 2, .. }),
            "[{b}] {source:?}"
        );
        let limited = coll.find(doc! { "_id": { "$in": [1998, 1999] } }).limit(1);
        assert!(
            matches!(
                limited.clone().explain().expect("explain").source,
                Source::IdScan { .. }
            ),
            "[{b}]"
        );
        assert_eq!(ids(&limited.run().expect("run")), [1998], "[{b}]");
        // Unsorted and limited, beside a wide range: the most selective index streams.
        let plan = coll
            .find(doc! { "_id": { "$gte": 0 }, "flag": true })
            .limit(5)
            .explain()
            .expect("explain");
        assert!(
            matches!(&plan.source, Source::IndexScan { field, .. } if field == "flag"),
            "[{b}] {plan}"
        );
        // Ids of other types name no document; a union of id branches.
        assert!(
            found(doc! { "_id": { "$in": ["7", Bson::Null, true] } }).is_empty(),
            "[{b}]"
        );
        assert!(
            matches!(
                explain(doc! { "_id": { "$in": ["7", Bson::Null, true] } }),
                Source::IdScan { .. }
            ),
            "[{b}]"
        );
        let source = explain(doc! { "$or": [{ "_id": 3 }, { "_id": { "$gte": 1998 } }] });
        assert!(
            matches!(&source, Source::IndexMerge { op: MergeOp::Or, inputs, .. } if inputs.iter().all(|i| matches!(i, Source::IdScan { .. }))),
            "[{b}] {source:?}"
        );
        assert_eq!(
            found(doc! { "$or": [{ "_id": 3 }, { "_id": { "$gte": 1998 } }] }),
            [3, 1998, 1999],
            "[{b}]"
        );

        // Sorted by `_id` ascending first: the key order, streamed, no sort.
        let page = coll
            .find(doc! { "_id": { "$gt": 1000 } })
            .sort("_id")
            .sort("status:desc")
            .limit(3);
        let plan = page.clone().explain().expect("explain");
        assert!(plan.key_order && plan.sort.is_empty(), "[{b}] {plan}");
        assert!(plan.to_string().contains("order=_id"), "[{b}] {plan}");
        assert_eq!(ids(&page.run().expect("page")), [1001, 1002, 1003], "[{b}]");
        let all = coll
            .find(doc! {})
            .sort("_id")
            .skip(1995)
            .run()
            .expect("all sorted");
        assert_eq!(ids(&all), [1995, 1996, 1997, 1998, 1999], "[{b}]");
        // Descending: the keys in reverse, newest first.
        let newest = coll.find(doc! {}).sort("_id:desc").limit(3);
        let plan = newest.clone().explain().expect("explain");
        assert!(
            plan.key_order && plan.reverse && plan.sort.is_empty(),
            "[{b}] {plan}"
        );
        assert!(plan.to_string().contains("order=_id desc"), "[{b}] {plan}");
        assert_eq!(ids(&newest.run().expect("newest")), [1999, 1998, 1997], "[{b}]");
        let below = |f: Document, skip: usize, limit: usize| {
            ids(&coll
                .find(f)
                .sort("_id:desc")
                .skip(skip)
                .limit(limit)
                .run()
                .expect("desc"))
        };
        assert_eq!(below(doc! { "_id": { "$lt": 1000 } }, 0, 2), [999, 998], "[{b}]");
        assert_eq!(below(doc! { "_id": { "$lt": 1000 } }, 997, 5), [2, 1, 0], "[{b}]");
        assert_eq!(
            below(doc! { "_id": { "$in": [4, 900, 17] } }, 0, 5),
            [900, 17, 4],
            "[{b}]"
        );
        // A long read in reverse, batch after batch.
        let all = coll
            .find(doc! { "flag": true })
            .sort("_id:desc")
            .run()
            .expect("all");
        assert_eq!(
            ids(&all),
            (0..2000).filter(|i| i % 2 == 0).rev().collect::<Vec<_>>(),
            "[{b}]"
        );
        // Through another index: sorted.
        let plan = coll
            .find(doc! { "status": "s7" })
            .sort("_id")
            .explain()
            .expect("explain");
        assert!(!plan.key_order && plan.sort.len() == 1, "[{b}] {plan}");
        assert_eq!(
            ids(&coll
                .find(doc! { "status": "s7" })
                .sort("_id:desc")
                .limit(2)
                .run()
                .expect("desc")),
            [1907, 1807],
            "[{b}]"
        );

        // Writes by `_id` take the same path and touch only their documents.
        let r = coll
            .update_many(
                doc! { "_id": { "$in": [1, 2, 5000] } },
                doc! { "$set": { "status": "moved" } },
                false,
            )
            .expect("update");
        assert_eq!((r.matched, r.modified), (2, 2), "[{b}]");
        assert_eq!(found(doc! { "status": "moved" }), [1, 2], "[{b}]");
        assert_eq!(
            coll.delete_many(doc! { "_id": { "$gte": 1995 } })
                .expect("delete"),
            5,
            "[{b}]"
        );
        assert_eq!(
            coll.delete_one(doc! { "_id": 0 }).expect("delete one"),
            1,
            "[{b}]"
        );
        assert_eq!(coll.count(doc! {}).expect("count"), 1994, "[{b}]");
        assert!(
            found(doc! { "_id": { "$in": [0, 1995, 1999] } }).is_empty(),
            "[{b}]"
        );
        assert_eq!(found(doc! { "_id": { "$gte": 1993 } }), [1993, 1994], "[{b}]");
    }
}

/// Sorted by `_id` and limited, beside an index: a page of an `_id` range
/// read in key order, when the index's matches spread over the ids.
#[test]
fn an_id_sorted_page_reads_its_range_in_key_order() {
    for t in backends() {
        let b = t.backend;
        let coll =
            t.db.create_collection(CollectionConfig::new("c").index("s"))
                .expect("create");
        coll.insert_many((0..4000).map(|i| doc! { "_id": i, "s": if i % 20 == 0 { "a" } else { "b" } }))
            .expect("insert");
        let page = coll
            .find(doc! { "_id": { "$gt": 3000 }, "s": "a" })
            .sort("_id")
            .limit(10);
        let plan = page.clone().explain().expect("explain");
        assert!(
            plan.key_order && matches!(plan.source, Source::IdScan { .. }),
            "[{b}] {plan}"
        );
        let want: Vec<i64> = (3001..4000).filter(|i| i % 20 == 0).take(10).collect();
        assert_eq!(ids(&page.run().expect("page")), want, "[{b}]");
        let back = coll
            .find(doc! { "_id": { "$lt": 1000 }, "s": "a" })
            .sort("_id:desc")
            .limit(4);
        assert!(back.clone().explain().expect("explain").reverse, "[{b}]");
        assert_eq!(ids(&back.run().expect("back")), [980, 960, 940, 920], "[{b}]");
    }
}

/// A limited sort on one field with a single-valued index reads that index
/// in order (in reverse when descending), equal values in id order, the
/// null bracket (missing, null, undefined: one index value) ordered as the
/// sort orders it, and stops at the limit.
#[test]
fn a_limited_sort_on_a_single_valued_index_reads_it_in_order() {
    let docs: Vec<Document> = (0..3000)
        .map(|i| {
            let mut d =
                doc! { "_id": i, "group": i % 7, "third": i % 3, "seventh": i % 7, "tags": [i % 3, i % 5] };
            match i {
                _ if i % 97 == 0 => {}
                _ if i % 89 == 0 => {
                    d.insert("score", Bson::Null);
                }
                // A run of equal values longer than any batch.
                _ if i % 5 == 1 => {
                    d.insert("score", 250);
                }
                _ if i % 2 == 0 => {
                    d.insert("score", (i * 7) % 500);
                }
                _ => {
                    d.insert("score", f64::from((i * 7) % 500));
                }
            }
            d
        })
        .collect();
    let queries = |limit: usize, skip: usize| {
        let with = move |filter: Document, desc: bool| Query {
            skip,
            limit: Some(limit),
            ..sorted(filter, "score", desc)
        };
        [false, true].into_iter().flat_map(move |desc| {
            [
                with(doc! {}, desc),
                with(doc! { "group": 3 }, desc),
                with(doc! { "score": { "$gte": 100, "$lt": 200 } }, desc),
                with(doc! { "score": { "$in": [7, 14.0, 490, Bson::Null] } }, desc),
                with(doc! { "score": { "$lte": 3 }, "group": { "$ne": 1 } }, desc),
            ]
        })
    };
    for t in backends() {
        let b = t.backend;
        let coll =
            t.db.create_collection(
                CollectionConfig::new("c")
                    .index("score")
                    .index("tags")
                    .index("third")
                    .index("seventh"),
            )
            .expect("create");
        coll.insert_many(docs.clone()).expect("insert");
        for (limit, skip) in [(1, 0), (10, 0), (17, 3), (300, 0), (2500, 40)] {
            for query in queries(limit, skip) {
                check_query(&coll, &docs, &query, b);
            }
        }
        let explain = |filter: Document, sort: &str, limit: usize| {
            coll.find(filter)
                .sort(sort)
                .limit(limit)
                .explain()
                .expect("explain")
        };
        let plan = explain(doc! {}, "score", 10);
        assert!(
            plan.key_order && !plan.reverse && plan.sort.is_empty(),
            "[{b}] {plan}"
        );
        assert!(
            plan.to_string().contains("order=score (index order"),
            "[{b}] {plan}"
        );
        let plan = explain(doc! { "group": 3 }, "score:desc", 10);
        assert!(
            matches!(&plan.source, Source::IndexScan { field, .. } if field == "score") && plan.reverse,
            "[{b}] {plan}"
        );
        // Beside another index: the order when that index selects a third
        // (at worst the whole ordered index, 3 times its read), not when it
        // selects a seventh (at worst 7 times).
        let plan = explain(doc! { "third": 1 }, "score", 5);
        assert!(plan.key_order, "[{b}] {plan}");
        let plan = explain(doc! { "seventh": 3 }, "score", 5);
        assert!(
            !plan.key_order && matches!(&plan.source, Source::IndexScan { field, .. } if field == "seventh"),
            "[{b}] {plan}"
        );
        for (filter, limit) in [
            (doc! { "third": 1 }, 5),
            (doc! { "seventh": 3 }, 5),
            (doc! { "third": 2 }, 700),
        ] {
            check_query(
                &coll,
                &docs,
                &Query {
                    limit: Some(limit),
                    ..sorted(filter, "score", true)
                },
                b,
            );
        }
        // An undefined value (indexed like null, sorted below it) marks the
        // index multikey: sorted, undefined first.
        let mut more = docs.clone();
        more.push(doc! { "_id": 5000, "score": Bson::Undefined, "m": [] });
        coll.insert_one(more[more.len() - 1].clone()).expect("insert");
        let find = || coll.find(doc! {}).sort("score").limit(3);
        assert!(!find().explain().expect("explain").key_order, "[{b}]");
        assert_eq!(ids(&find().run().expect("run"))[0], 5000, "[{b}]");
        check_query(
            &coll,
            &more,
            &Query {
                limit: Some(40),
                ..sorted(doc! {}, "score", false)
            },
            b,
        );
        // A path that runs into an empty array: no entry, so multikey too.
        coll.create_index("m.x").expect("index");
        let plan = coll
            .find(doc! {})
            .sort("m.x")
            .limit(3)
            .explain()
            .expect("explain");
        assert!(!plan.key_order, "[{b}] {plan}");
        check_query(
            &coll,
            &more,
            &Query {
                limit: Some(3),
                ..sorted(doc! {}, "m.x", false)
            },
            b,
        );
        // A multikey index, or several sort fields: sorted.
        for find in [
            coll.find(doc! {}).sort("tags").limit(10),
            coll.find(doc! {}).sort("score").sort("group").limit(10),
            coll.find(doc! {}).sort("score"),
        ] {
            let plan = find.explain().expect("explain");
            assert!(!plan.key_order && !plan.sort.is_empty(), "[{b}] {plan}");
        }
    }
}

/// A collection created before its multikey markers followed the current
/// rule (no `m:\0multikey rule 2` key) may hold documents with no value or
/// `undefined` at an unmarked index: its sorts sort.
#[test]
fn a_collection_from_before_the_multikey_rule_sorts_its_sorts() {
    use slate::core::store::{Batch, Op};
    for t in backends() {
        let b = t.backend;
        let coll =
            t.db.create_collection(CollectionConfig::new("old").index("score"))
                .expect("create");
        coll.insert_many((0..100).map(|i| doc! { "_id": i, "score": 100 - i }))
            .expect("insert");
        let find = || coll.find(doc! {}).sort("score").limit(3);
        assert!(find().explain().expect("explain").key_order, "[{b}]");
        let batch = Batch {
            ops: vec![(
                "c.old".to_string(),
                vec![Op::Delete {
                    key: slate::core::keys::multikey_rule_key(),
                }],
            )],
        };
        t.db.database()
            .store()
            .apply(batch, &mut |_| {})
            .expect("age the collection");
        let plan = find().explain().expect("explain");
        assert!(!plan.key_order && plan.sort.len() == 1, "[{b}] {plan}");
        assert_eq!(ids(&find().run().expect("run")), [99, 98, 97], "[{b}]");

        // Such a collection's markers promise only the older rule: an
        // undefined value unmarked is sound there, and a problem where the
        // current rule holds.
        coll.insert_one(doc! { "_id": 500, "score": Bson::Undefined })
            .expect("insert");
        let unmark = |key: Vec<u8>| Batch {
            ops: vec![("c.old".to_string(), vec![Op::Delete { key }])],
        };
        t.db.database()
            .store()
            .apply(unmark(slate::core::keys::multikey_key("score")), &mut |_| {})
            .expect("unmark");
        let problems = |db: &slate::Db| {
            let read = db.database().read();
            let config = read.config("old").expect("config");
            slate::core::check_integrity(read.snapshot(), &config).expect("integrity check")
        };
        assert!(problems(&t.db).is_empty(), "[{b}] {:?}", problems(&t.db));
        let mark_rule = Batch {
            ops: vec![(
                "c.old".to_string(),
                vec![Op::Put {
                    key: slate::core::keys::multikey_rule_key(),
                    value: std::sync::Arc::from(&b""[..]),
                }],
            )],
        };
        t.db.database()
            .store()
            .apply(mark_rule, &mut |_| {})
            .expect("rule");
        assert_eq!(problems(&t.db).len(), 1, "[{b}] {:?}", problems(&t.db));
    }
}

#[test]
fn explain_uses_an_index_only_when_selective() {
    for t in backends() {
        let (coll, all) = big_collection(&t);
        let explain = |f: Document| coll.find(f).explain().expect("explain");

        let plan = explain(doc! { "status": "s7" });
        match &plan.source {
            Source::IndexScan {
                field,
                estimate,
                capped,
                ..
            } => {
                assert_eq!(
                    (field.as_str(), *estimate, *capped),
                    ("status", 20, false),
                    "[{}]",
                    t.backend
                );
            }
            other => panic!(
                "[{}] selective equality on an indexed field: {other:?}",
                t.backend
            ),
        }
        assert!(plan.to_string().contains("IndexScan"), "{plan}");

        let plan = explain(doc! { "flag": true });
        assert!(
            matches!(plan.source, Source::Scan { estimate: 2000 }),
            "[{}] unselective: {plan}",
            t.backend
        );
        let plan = explain(doc! { "n": 5 });
        assert!(
            matches!(plan.source, Source::Scan { .. }),
            "[{}] unindexed: {plan}",
            t.backend
        );

        // The selective conjunct wins over the unselective one.
        let plan = explain(doc! { "flag": true, "status": "s8" });
        assert!(
            matches!(&plan.source, Source::IndexScan { field, .. } if field == "status"),
            "[{}] {plan}",
            t.backend
        );
        // Two selective branches of an $or: a union of index scans.
        let plan = explain(doc! { "$or": [ { "status": "s1" }, { "status": "s2" } ] });
        assert!(
            matches!(&plan.source, Source::IndexMerge { op: MergeOp::Or, inputs, .. } if inputs.len() == 2),
            "[{}] {plan}",
            t.backend
        );
        // An unindexed branch forces a scan.
        let plan = explain(doc! { "$or": [ { "status": "s1" }, { "n": 2 } ] });
        assert!(
            matches!(plan.source, Source::Scan { .. }),
            "[{}] {plan}",
            t.backend
        );
        // An $or beside other conditions, unselective (`flag`) or not
        // indexed (`n`): the union of its branches still narrows the rest.
        for f in [
            doc! { "flag": true, "$or": [ { "status": "s1" }, { "status": "s2" } ] },
            doc! { "n": { "$lt": 900 }, "$or": [ { "status": "s1" }, { "tags": "t3", "n": 5 } ] },
        ] {
            let plan = explain(f.clone());
            assert!(
                matches!(&plan.source, Source::IndexMerge { op: MergeOp::Or, inputs, .. } if inputs.len() == 2),
                "[{}] {f}: {plan}",
                t.backend
            );
        }
        // Beside a more selective condition, that condition's index alone.
        let plan = explain(doc! { "status": "s3", "$or": [ { "tags": "t1" }, { "tags": "t2" } ] });
        assert!(
            matches!(&plan.source, Source::IndexScan { field, .. } if field == "status"),
            "[{}] {plan}",
            t.backend
        );

        // And each of them returns what a full scan finds.
        for f in [
            doc! { "status": "s7" },
            doc! { "flag": true, "status": "s8" },
            doc! { "$or": [ { "status": "s1" }, { "status": "s2" } ] },
            doc! { "flag": true, "$or": [ { "status": "s1" }, { "status": "s2" } ] },
            doc! { "n": { "$lt": 900 }, "$or": [ { "status": "s1" }, { "tags": "t3", "n": 5 } ] },
            doc! { "status": { "$in": ["s3", "s4", "nope"] }, "tags": "t3" },
            doc! { "tags": { "$all": ["t1", "t2"] }, "n": { "$lt": 500 } },
        ] {
            let query = sorted(f, "n", true);
            check_query(&coll, &all, &query, t.backend);
            check_query(
                &coll,
                &all,
                &Query {
                    sort: Vec::new(),
                    ..query
                },
                t.backend,
            );
        }

        // Results larger than the executor's batches (256), through a scan and an index,
        // unsorted, sorted, and with the bounded top-n of a sort with a limit.
        let statuses: Vec<Bson> = (0..20).map(|i| Bson::from(format!("s{i}"))).collect();
        let many = doc! { "status": { "$in": statuses } };
        let plan = coll.find(many.clone()).explain().expect("explain");
        assert!(
            matches!(&plan.source, Source::IndexScan { estimate: 400, .. }),
            "[{}] {plan}",
            t.backend
        );
        for (filter, skip, limit) in [
            (doc! { "flag": true }, 250, Some(300)),
            (doc! { "flag": true }, 0, None),
            (many.clone(), 0, None),
            (many.clone(), 290, Some(7)),
        ] {
            let base = Query {
                filter,
                sort: Vec::new(),
                skip,
                limit,
                projection: Some(vec!["n".into()]),
            };
            check_query(&coll, &all, &base, t.backend);
            let by_tags = Query {
                sort: vec![("tags".into(), true), ("n".into(), false)],
                ..base.clone()
            };
            check_query(&coll, &all, &by_tags, t.backend);
        }
        // A cursor is lazy: taking a few documents of a scan reads one batch, not 2,000.
        let mut cursor = coll.find(doc! { "flag": false }).iter().expect("iter");
        let ids: Vec<i32> = cursor
            .by_ref()
            .take(3)
            .map(|d| d.expect("doc").get_i32("_id").expect("id"))
            .collect();
        assert_eq!(ids, [1, 3, 5], "[{}]", t.backend);
        let read = cursor.stats().docs_read;
        assert!(
            (6..=256).contains(&read),
            "[{}] read {read} documents for 3",
            t.backend
        );
    }
}

#[test]
fn an_unsorted_limit_streams_the_most_selective_index() {
    for t in backends() {
        let (coll, all) = big_collection(&t);
        // 400 of 2,000 documents: an index scan without a limit (under total / 3).
        let statuses: Vec<Bson> = (0..20).map(|i| Bson::from(format!("s{i}"))).collect();
        let filter = doc! { "status": { "$in": statuses.clone() } };
        let plan = |filter: &Document, limit: Option<usize>, sort: &[&str]| {
            let mut f = coll.find(filter.clone());
            if let Some(l) = limit {
                f = f.limit(l);
            }
            for s in sort {
                f = f.sort(*s);
            }
            f.explain().expect("explain").source
        };
        assert!(
            matches!(plan(&filter, None, &[]), Source::IndexScan { estimate: 400, .. }),
            "[{}]",
            t.backend
        );
        // Limit 5 and one index: the index is streamed whatever its count,
        // so counting stops past the limit.
        assert!(
            matches!(
                plan(&filter, Some(5), &[]),
                Source::IndexScan {
                    estimate: 5,
                    capped: true,
                    ..
                }
            ),
            "[{}]",
            t.backend
        );
        // Two indexes: counted to 64 entries each, to choose between them.
        let both = doc! { "status": { "$in": statuses.clone() }, "flag": true };
        assert!(
            matches!(
                plan(&both, Some(5), &[]),
                Source::IndexScan {
                    estimate: 64,
                    capped: true,
                    ..
                }
            ),
            "[{}]",
            t.backend
        );
        // Without a limit, half the documents are not worth an index; with
        // one, the index read stops after the limit too.
        let half = doc! { "flag": true };
        assert!(
            matches!(plan(&half, None, &[]), Source::Scan { .. }),
            "[{}]",
            t.backend
        );
        assert!(
            matches!(plan(&half, Some(5), &[]), Source::IndexScan { field, .. } if field == "flag"),
            "[{}]",
            t.backend
        );
        // A sort reads every match: estimated in full.
        assert!(
            matches!(
                plan(&filter, Some(5), &["n"]),
                Source::IndexScan { estimate: 400, .. }
            ),
            "[{}]",
            t.backend
        );
        // The stream reads one small batch of entries and documents for 5 matches.
        let mut cursor = coll.find(filter.clone()).limit(5).iter().expect("iter");
        let got = cursor.by_ref().count();
        assert_eq!(got, 5, "[{}]", t.backend);
        let stats = cursor.stats();
        assert!(
            stats.keys <= 16 && stats.docs_read <= 16,
            "[{}] read {stats:?} for 5 matches",
            t.backend
        );
        for (skip, limit) in [(0, Some(5)), (3, Some(5)), (0, Some(300)), (250, Some(100))] {
            for filter in [&filter, &half] {
                let q = Query {
                    filter: filter.clone(),
                    sort: Vec::new(),
                    skip,
                    limit,
                    projection: None,
                };
                check_query(&coll, &all, &q, t.backend);
            }
        }
    }
}

#[test]
fn projections_go_through_arrays_of_documents() {
    for t in backends() {
        let coll =
            t.db.create_collection(CollectionConfig::new("p"))
                .expect("create");
        coll.insert_one(doc! {
            "_id": 1,
            "items": [ { "name": "a", "n": 1 }, { "n": 2 }, 7 ],
            "m": { "x": 1, "y": 2 },
        })
        .expect("insert");
        let got = coll
            .find(doc! {})
            .project(["items.name", "m.y", "items.n"])
            .run()
            .expect("find");
        let want = doc! {
            "_id": 1,
            "items": [ { "name": "a", "n": 1 }, { "n": 2 } ],
            "m": { "y": 2 },
        };
        assert_eq!(got, [want], "[{}]", t.backend);
    }
}

/// A vector field inside a projected document comes back with it, whatever
/// the order of the paths, in finds (documents, raw and typed) and searches.
#[test]
fn a_projected_parent_keeps_its_vector_field() {
    #[derive(Debug, PartialEq, serde::Deserialize)]
    struct M {
        x: i32,
        emb: Vec<f32>,
    }
    #[derive(Debug, PartialEq, serde::Deserialize)]
    struct Row {
        m: M,
    }
    for t in backends() {
        let b = t.backend;
        let coll =
            t.db.create_collection(
                CollectionConfig::new("c").vector_field_config(slate::VectorField::new(
                    "m.emb",
                    2,
                    slate::Metric::L2,
                )),
            )
            .expect("create");
        coll.insert_one(doc! { "_id": 1, "m": { "x": 1, "emb": [1.0, 2.0] }, "y": 3 })
            .expect("insert");
        let full = coll.get(1).expect("get").expect("doc");
        let want = doc! { "_id": 1, "m": full.get_document("m").expect("m").clone() };
        for paths in [vec!["m"], vec!["m.emb", "m"], vec!["m", "m.emb"], vec!["m", "y"]] {
            let mut want = want.clone();
            if paths.contains(&"y") {
                want.insert("y", 3);
            }
            let got = coll.find(doc! {}).project(paths.clone()).run().expect("find");
            assert_same_docs(&got, &[want.clone()], &format!("[{b}] find {paths:?}"));
            let typed: Vec<Row> = coll.find(doc! {}).project(paths.clone()).run_as().expect("typed");
            assert_eq!(
                typed[0].m,
                M {
                    x: 1,
                    emb: vec![1.0, 2.0]
                },
                "[{b}] typed {paths:?}"
            );
            let hits = coll
                .search("m.emb", &[1.0, 2.0])
                .k(1)
                .project(paths.clone())
                .run()
                .expect("search");
            assert_same_docs(
                &[hits[0].doc.clone()],
                &[want],
                &format!("[{b}] search {paths:?}"),
            );
        }
    }
}

#[test]
fn a_bad_projection_path_is_refused_by_name() {
    for t in backends() {
        let coll =
            t.db.create_collection(CollectionConfig::new("p").vector("v", 2, slate::Metric::L2))
                .expect("create");
        coll.insert_one(doc! { "_id": 1, "a": { "b": 1 }, "v": [0.0, 1.0] })
            .expect("insert");
        for bad in ["", "a.", ".a", "a..b", "$a", "a.$b"] {
            let check = |out: Result<(), slate::Error>, what: &str| match out {
                Err(slate::Error::Query(slate::query::Error::InvalidQuery { reason })) => {
                    assert!(
                        reason.contains(&format!("{bad:?}")),
                        "[{}] {what}: {reason}",
                        t.backend
                    )
                }
                other => panic!(
                    "[{}] {what} {bad:?}: expected InvalidQuery, got {other:?}",
                    t.backend
                ),
            };
            check(coll.find(doc! {}).project(["a", bad]).run().map(drop), "find");
            check(
                coll.search("v", &[0.0, 1.0]).k(1).project([bad]).run().map(drop),
                "search",
            );
        }
        let got = coll.find(doc! {}).project(["a.b"]).run().expect("a good path");
        assert_eq!(got, [doc! { "_id": 1, "a": { "b": 1 } }], "[{}]", t.backend);
    }
}

#[test]
fn the_reference_sort_is_not_vacuous() {
    // Guards the reference itself: min/max array elements, cross-type order, _id ties.
    let mut docs = vec![
        doc! { "_id": 3, "n": [5, -1] },
        doc! { "_id": 1, "n": 2 },
        doc! { "_id": 2, "n": "a" },
        doc! { "_id": 0, "n": 2.0 },
        doc! { "_id": 4 },
    ];
    reference_sort(&mut docs, &[("n".to_owned(), false)]);
    let ids: Vec<i32> = docs.iter().map(|d| d.get_i32("_id").expect("id")).collect();
    assert_eq!(ids, [4, 3, 0, 1, 2]);
    reference_sort(&mut docs, &[("n".to_owned(), true)]);
    let ids: Vec<i32> = docs.iter().map(|d| d.get_i32("_id").expect("id")).collect();
    assert_eq!(ids, [2, 3, 0, 1, 4]);
    assert!(!same_docs(&docs[..1], &docs[1..2]));
}

/// Finds whose results span the executor's growing batches (256 documents, doubling to
/// 8,192, filtered and decoded on the rayon pool from 512) and its parallel sort's windows
/// (8,192 documents): every document comes once, in order, skips and limits fall inside and
/// across batches, and a document that fails to decode fails its own item, at its own
/// place, with the others intact.
#[test]
fn large_results_decode_in_parallel_in_order() {
    #[derive(Debug, PartialEq, serde::Deserialize)]
    struct Row {
        #[serde(rename = "_id")]
        id: i32,
        n: i64,
    }
    for t in backends() {
        let docs: Vec<Document> = (0..9000)
            .map(|i| {
                // Every 1,000th document has an `n` that is not a number.
                let n = if i % 1000 == 999 {
                    Bson::from(format!("n{i}"))
                } else {
                    Bson::Int64(i64::from((i * 37) % 1000))
                };
                doc! { "_id": i, "status": format!("s{}", i % 10), "n": n, "odd": i % 2 == 1 }
            })
            .collect();
        let coll =
            t.db.create_collection(CollectionConfig::new("large").index("status"))
                .expect("create");
        coll.insert_many(docs.clone()).expect("insert");

        let sort_n = |f: Document| Query {
            sort: vec![("n".into(), false)],
            ..q(f)
        };
        let queries = [
            q(doc! {}),
            q(doc! { "odd": true }),
            q(doc! { "status": { "$in": ["s1", "s2", "s3", "s4", "s5", "s6"] } }),
            Query {
                skip: 700,
                limit: Some(2500),
                ..q(doc! { "odd": false })
            },
            Query {
                skip: 4100,
                limit: Some(3),
                ..q(doc! {})
            },
            Query {
                limit: Some(1500),
                ..sort_n(doc! { "odd": true })
            },
            Query {
                projection: Some(vec!["n".into()]),
                ..sort_n(doc! { "status": { "$ne": "s3" } })
            },
            // A bounded sort whose ties (each `n` comes nine times) and strings (after
            // every number) fall across the parallel sort's tasks and windows: through an
            // index, then a scan, then descending.
            Query {
                skip: 10,
                limit: Some(50),
                ..sort_n(doc! { "status": { "$in": ["s1", "s2", "s3", "s4", "s5", "s6"] } })
            },
            Query {
                skip: 3,
                limit: Some(200),
                ..sort_n(doc! { "odd": false })
            },
            Query {
                sort: vec![("n".into(), true)],
                limit: Some(40),
                ..q(doc! {})
            },
        ];
        for query in &queries {
            check_query(&coll, &docs, query, t.backend);
        }

        // The typed items of a scan: an error exactly at each bad document.
        let items: Vec<Result<Row, slate::query::Error>> =
            coll.find(doc! {}).iter_as().expect("iter").collect();
        assert_eq!(items.len(), docs.len(), "[{}]", t.backend);
        for (i, item) in items.iter().enumerate() {
            let i = i32::try_from(i).expect("id");
            match item {
                Ok(row) => assert_eq!(
                    (row.id, row.n),
                    (i, i64::from((i * 37) % 1000)),
                    "[{}]",
                    t.backend
                ),
                Err(slate::query::Error::Decode { id, .. }) => {
                    assert_eq!(
                        (i % 1000, id.as_str()),
                        (999, i.to_string().as_str()),
                        "[{}]",
                        t.backend
                    )
                }
                Err(other) => panic!("[{}] item {i}: {other}", t.backend),
            }
        }
        // `run_as` fails with the first of them.
        match coll.find(doc! { "_id": { "$gte": 1500 } }).run_as::<Row>() {
            Err(slate::Error::Query(slate::query::Error::Decode { id, .. })) => {
                assert_eq!(id, "1999", "[{}]", t.backend)
            }
            other => panic!("[{}] {other:?}", t.backend),
        }
    }
}

/// Scans of thousands of documents, which RocksStore splits into key ranges read by
/// parallel tasks (interpolated between the first and last ids: integers, strings and
/// ObjectIds, mixed in one partition, and several partitions at once), agree with the
/// reference on both backends. Sorts split from 4,096 documents: ties (each `n` comes twenty
/// times) fall across the ranges, bounded and unbounded, ascending and descending. Unsorted
/// scans split once their batches are full (after 7,936 documents) and return every document
/// once, in `_id` order, with a skip and a limit inside the split part.
#[test]
fn scans_split_across_threads_agree_with_the_reference() {
    let id = |i: i32| match i % 3 {
        0 => Bson::Int32(i * 7 - 9000),
        1 => Bson::String(format!("k{:05}", (i * 7919) % 10007)),
        _ => Bson::ObjectId(slate::bson::oid::ObjectId::from_bytes(
            [&[0x65, 0x4f][..], &(i as u16).to_be_bytes(), &[0; 8]]
                .concat()
                .try_into()
                .expect("12"),
        )),
    };
    let sorts = |filter: Document| {
        let by = |desc| vec![("n".to_owned(), desc)];
        [
            Query {
                sort: by(false),
                limit: Some(100),
                ..q(filter.clone())
            },
            Query {
                sort: by(true),
                skip: 5,
                limit: Some(30),
                ..q(filter.clone())
            },
            Query {
                sort: by(false),
                ..q(filter.clone())
            },
            q(filter.clone()),
            Query {
                skip: 9000,
                limit: Some(6000),
                ..q(filter)
            },
        ]
    };
    for t in backends() {
        // One id far above the others: the cuts, spaced evenly up to it,
        // leave nearly every document in the first range, read a share at
        // a time and cut again.
        let docs: Vec<Document> = (0..20_000)
            .map(|i| doc! { "_id": id(i), "n": (i * 37) % 1000, "odd": i % 2 == 1 })
            .chain([doc! { "_id": i64::MAX - 5, "n": 5, "odd": true }])
            .collect();
        let coll =
            t.db.create_collection(CollectionConfig::new("split"))
                .expect("create");
        coll.insert_many(docs.clone()).expect("insert");
        for query in sorts(doc! {})
            .iter()
            .chain(&sorts(doc! { "odd": true }))
            // Ranges of `_id`s (one type bracket each) read as key ranges,
            // split across threads when long.
            .chain(&sorts(doc! { "_id": { "$gte": -50_000 } }))
            .chain(&sorts(doc! { "_id": { "$gte": "k01000" }, "odd": true }))
        {
            check_query(&coll, &docs, query, t.backend);
        }

        // Integer ids, and one far above them: every document after the
        // first batches lies in the first range, read in shares, its rest
        // cut again each time.
        let docs: Vec<Document> = (0..30_000)
            .map(|i| doc! { "_id": i, "n": i % 7, "odd": i % 2 == 1 })
            .chain([doc! { "_id": i64::MAX - 5, "n": 5, "odd": true }])
            .collect();
        let coll =
            t.db.create_collection(CollectionConfig::new("skewed"))
                .expect("create");
        coll.insert_many(docs.clone()).expect("insert");
        for query in [
            q(doc! {}),
            q(doc! { "odd": true }),
            Query {
                skip: 12_000,
                limit: Some(9_000),
                ..q(doc! {})
            },
            q(doc! { "_id": { "$gte": 1_000 } }),
            Query {
                sort: vec![("_id".to_owned(), false)],
                skip: 100,
                limit: Some(20_000),
                ..q(doc! { "_id": { "$gt": 5, "$lte": 29_000 }, "odd": true })
            },
            Query {
                sort: vec![("n".to_owned(), true)],
                limit: Some(50),
                ..q(doc! { "_id": { "$lt": 25_000 } })
            },
            // In reverse key order, batch after batch.
            Query {
                sort: vec![("_id".to_owned(), true), ("n".to_owned(), false)],
                skip: 300,
                limit: Some(20_000),
                ..q(doc! { "odd": true })
            },
            Query {
                sort: vec![("_id".to_owned(), true)],
                ..q(doc! { "_id": { "$gt": 5, "$lte": 29_000 } })
            },
        ] {
            check_query(&coll, &docs, &query, t.backend);
        }

        // Three tenants; `n` unique, so that no tie spans partitions.
        let tenants = ["a", "b", "c"];
        let docs: Vec<Document> = (0..30_000)
            .map(|i| doc! { "_id": id(i), "tenant": tenants[(i % 7 % 3) as usize], "n": (i * 7919) % 30_011, "odd": i % 2 == 1 })
            .collect();
        let coll =
            t.db.create_collection(CollectionConfig::new("split_parts").partition_key("tenant"))
                .expect("create");
        coll.insert_many(docs.clone()).expect("insert");
        let some: Vec<Document> = docs
            .iter()
            .filter(|d| d.get_str("tenant") != Ok("b"))
            .cloned()
            .collect();
        // Across partitions only sorts have an order the reference knows.
        let scoped = coll.partitions(vec!["a".into(), "c".into()]);
        for query in sorts(doc! {}).iter().chain(&sorts(doc! { "odd": false })) {
            if !query.sort.is_empty() {
                check_query(&scoped, &some, query, t.backend);
            }
        }
        let a: Vec<Document> = docs
            .iter()
            .filter(|d| d.get_str("tenant") == Ok("a"))
            .cloned()
            .collect();
        for query in sorts(doc! {}).iter().chain(&sorts(doc! { "odd": false })) {
            check_query(&coll.partition("a"), &a, query, t.backend);
        }
        // Unsorted over two partitions: every document of both, once.
        let tenant_id = |d: &Document| {
            let tenant = d.get_str("tenant").expect("tenant");
            format!("{tenant}/{}", d.get("_id").expect("id"))
        };
        let got: std::collections::BTreeSet<String> = scoped
            .find(doc! {})
            .run()
            .expect("run")
            .iter()
            .map(tenant_id)
            .collect();
        let want: std::collections::BTreeSet<String> = some.iter().map(tenant_id).collect();
        assert_eq!(
            (got.len(), &got),
            (some.len(), &want),
            "[{}] two partitions",
            t.backend
        );
    }
}

/// A stored document the filter cannot read ends a find with an error, after every match
/// before it, on each of the executor's paths (a batch filtered and decoded in one pass, one
/// whose limit falls inside it, and ranges split across threads once batches are full), when
/// iterated and when collected; a find without a filter reports it as that item's decode
/// error and goes on.
#[test]
fn a_damaged_document_ends_a_find_after_the_matches_before_it() {
    use slate::core::store::{Batch, Op};
    // 1,500 falls in the first batches, 15,000 in the split part of a scan
    // (with the limit too: a limit of 36,000 leaves room for whole split groups).
    for (n, bad, limited) in [(3000, 1500, 1600), (40_000, 15_000, 36_000)] {
        let t = crate::memory();
        let docs: Vec<Document> = (0..n).map(|i| doc! { "_id": i, "n": i }).collect();
        let coll =
            t.db.create_collection(CollectionConfig::new("broken"))
                .expect("create");
        coll.insert_many(docs).expect("insert");
        // Overwrite document `bad`'s bytes, below the collection's writes: "c.{name}" is its
        // column family, an unpartitioned document's key is "d:" and the encoded id.
        let id = slate::core::value::encode_id(&Bson::Int32(bad)).expect("id");
        let batch = Batch {
            ops: vec![(
                "c.broken".to_string(),
                vec![Op::Put {
                    key: slate::core::keys::doc_key(&[], &id),
                    value: std::sync::Arc::from(&b"\xff\0\0\0\0"[..]),
                }],
            )],
        };
        t.db.database().store().apply(batch, &mut |_| {}).expect("damage");
        assert!(coll.get(bad).is_err(), "the damage is in place");

        for limit in [None, Some(limited)] {
            let find = || {
                let find = coll.find(doc! { "n": { "$gte": 0 } });
                match limit {
                    Some(l) => find.limit(l),
                    None => find,
                }
            };
            let items: Vec<Result<Document, slate::query::Error>> = find().iter().expect("iter").collect();
            let ok: Vec<i32> = items
                .iter()
                .map_while(|d| d.as_ref().ok())
                .map(|d| d.get_i32("_id").expect("id"))
                .collect();
            assert_eq!(ok, (0..bad).collect::<Vec<_>>(), "{n}, limit {limit:?}");
            assert_eq!(
                items.len(),
                bad as usize + 1,
                "{n}, limit {limit:?}: one error, then the end"
            );
            assert!(items[bad as usize].is_err(), "{n}, limit {limit:?}");
            assert!(find().run().is_err(), "{n}, limit {limit:?}: run");
            assert!(
                find().run_as::<Document>().is_err(),
                "{n}, limit {limit:?}: run_as"
            );
        }
        // A sort reads every document before its first result: the find fails, whether its
        // heap is small or large.
        for limit in [3, 2000] {
            let sorted = coll
                .find(doc! { "n": { "$gte": 0 } })
                .sort("n")
                .limit(limit)
                .run();
            assert!(sorted.is_err(), "{n}, limit {limit}: {sorted:?}");
        }
        // No filter: the document fails to decode as its own item; the others still come.
        let items: Vec<Result<Document, slate::query::Error>> =
            coll.find(doc! {}).iter().expect("iter").collect();
        assert_eq!(items.len(), n as usize);
        assert_eq!(
            items.iter().position(Result::is_err),
            Some(bad as usize),
            "{n}: the bad item in its place"
        );
        assert_eq!(items.iter().filter(|i| i.is_err()).count(), 1, "{n}");
    }
}

/// A limited, unsorted find on one indexed condition (or on `_id` alone)
/// reads that index or those keys without counting them first; `explain`
/// still counts them up to the limit, exactly when fewer match, and the
/// run returns what the count-first plan returned.
#[test]
fn a_lone_limited_condition_is_counted_for_explain_only() {
    for t in backends() {
        let b = t.backend;
        let coll =
            t.db.create_collection(CollectionConfig::new("lone").index("status"))
                .expect("create");
        let docs: Vec<Document> = (0..300)
            .map(|i| doc! { "_id": i, "status": if i % 60 == 0 { "rare" } else { "common" } })
            .collect();
        coll.insert_many(docs).expect("insert");
        for (filter, limit, estimate, capped, want) in [
            (
                doc! { "status": "rare" },
                10,
                5,
                false,
                vec![0, 60, 120, 180, 240],
            ),
            (doc! { "status": "common" }, 4, 4, true, vec![1, 2, 3, 4]),
            (doc! { "_id": { "$gte": 297 } }, 10, 3, false, vec![297, 298, 299]),
            (doc! { "_id": { "$gt": 100 } }, 2, 2, true, vec![101, 102]),
        ] {
            let find = coll.find(filter.clone()).limit(limit);
            let source = find.clone().explain().expect("explain").source;
            let (got_estimate, got_capped) = match &source {
                Source::IndexScan { estimate, capped, .. } | Source::IdScan { estimate, capped, .. } => {
                    (*estimate, *capped)
                }
                other => panic!("[{b}] {filter}: {other:?}"),
            };
            assert_eq!((got_estimate, got_capped), (estimate, capped), "[{b}] {filter}");
            // A run plans without counting: it expects the limit.
            let cursor = coll.find(filter.clone()).limit(limit).iter().expect("iter");
            assert_eq!(cursor.expected_len(), limit, "[{b}] {filter}");
            assert_eq!(ids(&find.run().expect("run")), want, "[{b}] {filter}");
            // Skipped: the whole read's matches after the first.
            let all = ids(&coll.find(filter.clone()).run().expect("all"));
            let skipped = coll
                .find(filter.clone())
                .skip(1)
                .limit(limit)
                .run()
                .expect("skip");
            let after_first: Vec<i64> = all.into_iter().skip(1).take(limit).collect();
            assert_eq!(ids(&skipped), after_first, "[{b}] {filter} skip 1");
        }
        // Past 1,000 documents wanted, or exact `_id` values: counted.
        let past = coll
            .find(doc! { "status": "rare" })
            .limit(1001)
            .iter()
            .expect("iter");
        assert_eq!(past.expected_len(), 5, "[{b}] limit 1001");
        let points = coll
            .find(doc! { "_id": { "$in": [3, 4] } })
            .limit(10)
            .iter()
            .expect("iter");
        assert_eq!(points.expected_len(), 2, "[{b}] _id values");
        // Sorted by `_id`, an `_id` range is not counted either.
        let sorted = coll
            .find(doc! { "_id": { "$gte": 290 } })
            .sort("_id:desc")
            .limit(4)
            .run()
            .expect("sorted");
        assert_eq!(ids(&sorted), [299, 298, 297, 296], "[{b}] _id desc");
    }
}

/// A field reached through an array (`a.b` of `{a: [{b: 50}, 7]}`: one index entry, 50,
/// but MongoDB's sort sees `null` too) marks its index multikey, so a limited sort does not
/// read the index in order and gives what the full sort gives.
#[test]
fn a_field_reached_through_an_array_is_not_sorted_by_its_index() {
    for t in backends() {
        let b = t.backend;
        let coll =
            t.db.create_collection(CollectionConfig::new("c").index("a.b"))
                .expect("create");
        let mut docs: Vec<Document> = (2..10).map(|i| doc! { "_id": i, "a": { "b": i } }).collect();
        docs.push(doc! { "_id": 1, "a": [{ "b": 50 }, 7] });
        coll.insert_many(docs).expect("insert");
        let limited = coll.find(doc! {}).sort("a.b").limit(1);
        assert!(!limited.explain().expect("explain").key_order, "[{b}]");
        let first = |find: slate::Find<'_>| find.run().expect("run")[0].get_i32("_id").expect("id");
        assert_eq!(first(coll.find(doc! {}).sort("a.b").limit(1)), 1, "[{b}]");
        assert_eq!(first(coll.find(doc! {}).sort("a.b")), 1, "[{b}]");
        let read = t.db.database().read();
        let config = read.config("c").expect("config");
        let problems = slate::core::check_integrity(read.snapshot(), &config).expect("integrity");
        assert!(problems.is_empty(), "[{b}] {problems:?}");
    }
}
