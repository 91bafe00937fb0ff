//! `Filter::matches` against a small, independent evaluator written on materialised
//! `bson::Document`s straight from the query document (no shared parser or comparator), on
//! random small documents and queries. Also checks that index bounds never lose a match.

use std::cmp::Ordering;

use bson::{Bson, Document};
use proptest::prelude::*;
use slate_core::value::{encode_value, index_values, lookup_path, FieldPath, LeafArrays, PathValue};

use super::super::{Filter, Interval};
use super::raw;

// ---- reference evaluator ---------------------------------------------------------------

fn rank(v: &Bson) -> u8 {
    match v {
        Bson::Null | Bson::Undefined => 1,
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) => 2,
        Bson::String(_) => 3,
        Bson::Document(_) => 4,
        Bson::Array(_) => 5,
        Bson::Boolean(_) => 6,
        other => panic!("the generators do not produce {other:?}"),
    }
}

fn num(v: &Bson) -> f64 {
    match v {
        Bson::Int32(i) => f64::from(*i),
        Bson::Int64(i) => *i as f64, // generated integers are small: exact
        Bson::Double(f) => *f,
        _ => 0.0,
    }
}

fn ref_cmp(a: &Bson, b: &Bson) -> Ordering {
    rank(a).cmp(&rank(b)).then_with(|| match (a, b) {
        (Bson::String(x), Bson::String(y)) => x.cmp(y),
        (Bson::Boolean(x), Bson::Boolean(y)) => x.cmp(y),
        (Bson::Array(x), Bson::Array(y)) => x
            .iter()
            .zip(y)
            .map(|(p, q)| ref_cmp(p, q))
            .find(|o| o.is_ne())
            .unwrap_or(x.len().cmp(&y.len())),
        (Bson::Document(x), Bson::Document(y)) => x
            .iter()
            .zip(y)
            .map(|((ka, va), (kb, vb))| rank(va).cmp(&rank(vb)).then(ka.cmp(kb)).then(ref_cmp(va, vb)))
            .find(|o| o.is_ne())
            .unwrap_or(x.len().cmp(&y.len())),
        _ if rank(a) == 2 => {
            let (x, y) = (num(a), num(b));
            match (x.is_nan(), y.is_nan()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Less,
                (false, true) => Ordering::Greater,
                _ => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
            }
        }
        _ => Ordering::Equal,
    })
}

/// Values at `parts` below `cur`; `None` is a missing path.
fn values(cur: &Bson, parts: &[&str], expand_leaf: bool, out: &mut Vec<Option<Bson>>) {
    let Some((first, rest)) = parts.split_first() else {
        out.push(Some(cur.clone()));
        if let (true, Bson::Array(items)) = (expand_leaf, cur) {
            out.extend(items.iter().cloned().map(Some));
        }
        return;
    };
    match cur {
        Bson::Document(d) => match d.get(*first) {
            Some(v) => values(v, rest, expand_leaf, out),
            None => out.push(None),
        },
        Bson::Array(items) => {
            for (i, e) in items.iter().enumerate() {
                if let Bson::Document(_) = e {
                    values(e, parts, expand_leaf, out);
                }
                if *first == i.to_string() {
                    match e {
                        _ if rest.is_empty() => out.push(Some(e.clone())),
                        Bson::Document(_) | Bson::Array(_) => values(e, rest, expand_leaf, out),
                        _ => {}
                    }
                }
            }
        }
        _ => out.push(None),
    }
}

fn at(doc: &Document, path: &str, expand_leaf: bool) -> Vec<Option<Bson>> {
    let parts: Vec<&str> = path.split('.').collect();
    let mut out = Vec::new();
    values(&Bson::Document(doc.clone()), &parts, expand_leaf, &mut out);
    out
}

fn eq(v: &Option<Bson>, x: &Bson) -> bool {
    ref_cmp(v.as_ref().unwrap_or(&Bson::Null), x) == Ordering::Equal
}

fn is_nan(v: &Bson) -> bool {
    matches!(v, Bson::Double(f) if f.is_nan())
}

/// One operator on one value, without array expansion.
fn single(op: &str, x: &Bson, v: &Option<Bson>) -> bool {
    let val = v.clone().unwrap_or(Bson::Null);
    let ordered = |want: fn(Ordering) -> bool, or_equal: bool| {
        if rank(&val) != rank(x) {
            false
        } else if is_nan(&val) || is_nan(x) {
            or_equal && is_nan(&val) && is_nan(x)
        } else {
            want(ref_cmp(&val, x))
        }
    };
    let list = || match x {
        Bson::Array(xs) => xs.clone(),
        _ => panic!("list operand"),
    };
    match op {
        "$eq" => eq(v, x),
        "$ne" => !eq(v, x),
        "$gt" => ordered(Ordering::is_gt, false),
        "$gte" => ordered(Ordering::is_ge, true),
        "$lt" => ordered(Ordering::is_lt, false),
        "$lte" => ordered(Ordering::is_le, true),
        "$in" => list().iter().any(|x| eq(v, x)),
        "$nin" => !list().iter().any(|x| eq(v, x)),
        "$all" => !list().is_empty() && list().iter().all(|x| eq(v, x)),
        "$size" => matches!(v, Some(Bson::Array(a)) if a.len() as f64 == num(x)),
        "$exists" => v.is_some() == matches!(x, Bson::Boolean(true)),
        "$elemMatch" => match (v, x) {
            (Some(Bson::Array(items)), Bson::Document(q)) => items.iter().any(|e| elem_matches(q, e)),
            _ => false,
        },
        "$not" => match x {
            Bson::Document(ops) => !ops.iter().all(|(op, x)| single(op, x, v)),
            _ => panic!("$not operand"),
        },
        other => panic!("the generators do not produce {other}"),
    }
}

fn is_value_form(q: &Document) -> bool {
    q.keys()
        .next()
        .is_some_and(|k| k.starts_with('$') && !["$and", "$or", "$nor"].contains(&k.as_str()))
}

fn elem_matches(q: &Document, e: &Bson) -> bool {
    if is_value_form(q) {
        return q.iter().all(|(op, x)| single(op, x, &Some(e.clone())));
    }
    match e {
        Bson::Document(d) => reference(q, d),
        Bson::Array(items) => {
            let d: Document = items
                .iter()
                .enumerate()
                .map(|(i, v)| (i.to_string(), v.clone()))
                .collect();
            reference(q, &d)
        }
        _ => false,
    }
}

/// One operator on the values at `path` in `doc`.
fn on_path(op: &str, x: &Bson, doc: &Document, path: &str) -> bool {
    let any = |expand: bool, test: &dyn Fn(&Option<Bson>) -> bool| at(doc, path, expand).iter().any(test);
    match op {
        "$ne" => !any(true, &|v| eq(v, x)),
        "$nin" => !on_path("$in", x, doc, path),
        "$all" => match x {
            Bson::Array(xs) => !xs.is_empty() && xs.iter().all(|x| any(true, &|v| eq(v, x))),
            _ => panic!("$all operand"),
        },
        "$exists" => any(true, &|v| v.is_some()) == matches!(x, Bson::Boolean(true)),
        "$not" => match x {
            Bson::Document(ops) => !ops.iter().all(|(op, x)| on_path(op, x, doc, path)),
            _ => panic!("$not operand"),
        },
        "$size" | "$elemMatch" => any(false, &|v| single(op, x, v)),
        _ => any(true, &|v| single(op, x, v)),
    }
}

fn reference(query: &Document, doc: &Document) -> bool {
    let subs = |v: &Bson| match v {
        Bson::Array(items) => items
            .iter()
            .map(|q| match q {
                Bson::Document(q) => reference(q, doc),
                _ => panic!("logical operand"),
            })
            .collect::<Vec<_>>(),
        _ => panic!("logical operand"),
    };
    query.iter().all(|(k, v)| match k.as_str() {
        "$and" => subs(v).iter().all(|b| *b),
        "$or" => subs(v).iter().any(|b| *b),
        "$nor" => !subs(v).iter().any(|b| *b),
        path => match v {
            Bson::Document(ops) if ops.keys().next().is_some_and(|k| k.starts_with('$')) => {
                ops.iter().all(|(op, x)| on_path(op, x, doc, path))
            }
            _ => on_path("$eq", v, doc, path),
        },
    })
}

// ---- generators ------------------------------------------------------------------------

/// Few distinct values, so that queries and documents often meet.
fn scalar() -> impl Strategy<Value = Bson> {
    prop_oneof![
        1 => Just(Bson::Null),
        3 => (0i32..3).prop_map(Bson::Int32),
        1 => (1i64..3).prop_map(Bson::Int64),
        2 => prop::sample::select(vec![-0.0, 1.0, 1.5, f64::NAN]).prop_map(Bson::Double),
        2 => prop::sample::select(vec!["x", "y"]).prop_map(|s| Bson::String(s.into())),
        1 => any::<bool>().prop_map(Bson::Boolean),
    ]
}

/// Query operands: mostly scalars.
fn operand() -> impl Strategy<Value = Bson> {
    prop_oneof![3 => scalar(), 1 => value()]
}

fn value() -> impl Strategy<Value = Bson> {
    scalar().prop_recursive(3, 16, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Bson::Array),
            prop::collection::vec((prop::sample::select(vec!["a", "b", "c", "0"]), inner), 0..3)
                .prop_map(|kv| Bson::Document(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
        ]
    })
}

fn document() -> impl Strategy<Value = Document> {
    prop::collection::vec((prop::sample::select(vec!["a", "b", "c"]), value()), 0..3)
        .prop_map(|kv| kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

fn path() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "a", "a", "a", "b", "b", "a.b", "a.b", "a.0", "a.b.c", "a.0.b", "b.a", "c.1", "a.c",
    ])
}

/// An operator with its operand, without `$not`/`$elemMatch`.
fn simple_operator() -> impl Strategy<Value = (String, Bson)> {
    let cmp = prop::sample::select(vec!["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"]);
    let list = prop::sample::select(vec!["$in", "$nin", "$all"]);
    prop_oneof![
        4 => (cmp, operand()).prop_map(|(op, v)| (op.to_owned(), v)),
        2 => (list, prop::collection::vec(operand(), 0..3))
            .prop_map(|(op, vs)| (op.to_owned(), Bson::Array(vs))),
        1 => (0i32..3).prop_map(|n| ("$size".to_owned(), Bson::Int32(n))),
        1 => any::<bool>().prop_map(|b| ("$exists".to_owned(), Bson::Boolean(b))),
    ]
}

/// Any operator usable on a field, under `$not` or in `$elemMatch`'s operator form.
fn operator() -> impl Strategy<Value = (String, Bson)> {
    simple_operator().prop_recursive(2, 6, 2, |inner| {
        let ops =
            prop::collection::vec(inner, 1..3).prop_map(|ops| Bson::Document(ops.into_iter().collect()));
        prop_oneof![
            4 => simple_operator(),
            1 => ops.clone().prop_map(|d| ("$not".to_owned(), d)),
            1 => ops.prop_map(|d| ("$elemMatch".to_owned(), d)),
            1 => (prop::sample::select(vec!["a", "b"]), operand()).prop_map(|(p, v)| {
                ("$elemMatch".to_owned(), Bson::Document(bson::doc! { p: v }))
            }),
        ]
    })
}

fn field_condition() -> impl Strategy<Value = (String, Bson)> {
    prop_oneof![
        // A plain value (documents included: the generators never produce `$` keys in values).
        (path(), operand()).prop_map(|(p, v)| (p.to_owned(), v)),
        (path(), prop::collection::vec(operator(), 1..3))
            .prop_map(|(p, ops)| (p.to_owned(), Bson::Document(ops.into_iter().collect()))),
    ]
}

fn query() -> impl Strategy<Value = Document> {
    let flat =
        prop::collection::vec(field_condition(), 1..3).prop_map(|kv| kv.into_iter().collect::<Document>());
    flat.prop_recursive(2, 8, 3, |inner| {
        let logical = (
            prop::sample::select(vec!["$and", "$or", "$nor"]),
            prop::collection::vec(inner, 1..3),
        )
            .prop_map(|(op, qs)| {
                (
                    op.to_owned(),
                    Bson::Array(qs.into_iter().map(Bson::Document).collect()),
                )
            });
        prop::collection::vec(prop_oneof![3 => field_condition(), 1 => logical], 1..3)
            .prop_map(|kv| kv.into_iter().collect::<Document>())
    })
}

// ---- the properties --------------------------------------------------------------------

/// Where `Filter::is_exact_on(p)` holds and the document is single-valued on `p` (what an
/// index without its multikey marker holds), the document matches exactly when one of its
/// index keys lies in the bounds: the search planner then skips reading documents.
fn bounds_are_exact_when_claimed(
    filter: &Filter,
    doc: &bson::RawDocument,
    matches: bool,
) -> Result<(), TestCaseError> {
    for c in filter.conjuncts() {
        let Filter::Field { path, .. } = c else { continue };
        if !filter.is_exact_on(path.as_str()) {
            continue;
        }
        let whole = lookup_path(doc, path, LeafArrays::Whole);
        let multikey = whole.len() > 1
            || whole
                .iter()
                .any(|v| matches!(v, PathValue::Value(bson::RawBsonRef::Array(_))));
        if multikey {
            continue;
        }
        let Some(set) = filter.index_bounds(path.as_str(), false) else {
            return Err(TestCaseError::fail(format!(
                "{filter:?} exact on {path} without bounds"
            )));
        };
        let keys = index_values(doc, path);
        let in_bounds = keys.iter().any(|k| in_set(&set, *k));
        prop_assert_eq!(
            in_bounds,
            matches,
            "exact filter {:?}: keys {:?}, bounds {:?}",
            filter,
            keys,
            set
        );
    }
    Ok(())
}

fn in_set(set: &[Interval], v: bson::RawBsonRef<'_>) -> bool {
    let mut key = Vec::new();
    encode_value(v, &mut key);
    set.iter().any(|i| {
        let (from, to) = i.key_range();
        key >= from && to.is_none_or(|to| key < to)
    })
}

/// Every conjunct's intervals (and, for a document with one non-array value on the path, the
/// intersection of all of them) hold an index key of every matching document.
fn bounds_are_sound(filter: &Filter, doc: &bson::RawDocument) -> Result<(), TestCaseError> {
    for c in filter.conjuncts() {
        let Filter::Field { path, pred } = c else { continue };
        let keys = index_values(doc, path);
        if let Some(set) = pred.index_intervals() {
            prop_assert!(
                keys.iter().any(|k| in_set(&set, *k)),
                "{:?}: keys {:?} not in {:?}",
                c,
                keys,
                set
            );
        }
        let found = lookup_path(doc, path, LeafArrays::Expand);
        let single_value = match found.as_slice() {
            [PathValue::Missing] => true,
            [PathValue::Value(v)] => !matches!(v, bson::RawBsonRef::Array(_)),
            _ => false,
        };
        if single_value {
            if let Some(set) = filter.index_bounds(path.as_str(), false) {
                prop_assert!(
                    keys.iter().any(|k| in_set(&set, *k)),
                    "intersection on {}: {:?} not in {:?}",
                    path,
                    keys,
                    set
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn matches_agrees_with_the_reference(q in query(), docs in prop::collection::vec(document(), 12)) {
        // About one document in seven matches a generated query.
        let filter = Filter::parse(&q).map_err(|e| TestCaseError::fail(format!("{q}: {e}")))?;
        for d in &docs {
            let bytes = raw(d);
            let got = filter.matches(&bytes);
            prop_assert_eq!(got, reference(&q, d), "query {} on {}", q, d);
            if got {
                bounds_are_sound(&filter, &bytes)?;
            }
            bounds_are_exact_when_claimed(&filter, &bytes, got)?;
        }
    }
}

#[test]
fn reference_paths_agree_with_core_paths() {
    // The reference walk and `lookup_path` must see the same values (as a multiset).
    let d = bson::doc! { "a": [{ "b": [1, { "c": 2 }] }, [{ "b": 3 }], { "0": { "b": 4 } }, 5] };
    for path in ["a", "a.b", "a.0", "a.0.b", "a.b.c", "a.1.0.b", "x"] {
        let bytes = raw(&d);
        let fp = FieldPath::parse(path).expect("path");
        let mut core: Vec<String> = lookup_path(&bytes, &fp, LeafArrays::Expand)
            .into_iter()
            .map(|v| match v {
                PathValue::Missing => "missing".to_owned(),
                PathValue::Value(v) => Bson::try_from(v).expect("value").to_string(),
            })
            .collect();
        let mut reference: Vec<String> = at(&d, path, true)
            .into_iter()
            .map(|v| v.map_or("missing".to_owned(), |v| v.to_string()))
            .collect();
        core.sort();
        reference.sort();
        assert_eq!(core, reference, "{path}");
    }
}
