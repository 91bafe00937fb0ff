//! Index bounds from filters.

use std::ops::Bound;

use bson::{doc, Bson, RawBsonRef};
use slate_core::value::{encode_id, encode_value, TypeBracket};

use super::super::{Filter, Interval};
use super::parse;

fn enc(v: RawBsonRef<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    encode_value(v, &mut out);
    out
}

fn contains_key(set: &[Interval], value: RawBsonRef<'_>) -> bool {
    let mut key = enc(value);
    key.extend(encode_id(&Bson::Int32(7)).expect("id"));
    set.iter().any(|i| {
        let (from, to) = i.key_range();
        key >= from && to.is_none_or(|to| key < to)
    })
}

#[test]
fn equality_and_in_are_points() {
    let f = parse(&doc! { "a": 5 });
    let set = f.index_bounds("a", true).expect("indexable");
    assert_eq!(set, vec![Interval::point(enc(RawBsonRef::Int32(5)))]);
    assert!(contains_key(&set, RawBsonRef::Double(5.0)));
    assert!(!contains_key(&set, RawBsonRef::Double(5.5)));
    assert!(!contains_key(&set, RawBsonRef::Int32(4)));

    let f = parse(&doc! { "a": { "$in": [3, 1, "x"] } });
    let set = f.index_bounds("a", true).expect("indexable");
    assert_eq!(set.len(), 3);
    assert!(set.windows(2).all(|w| w[0].key_range().0 < w[1].key_range().0));

    // An array operand also finds documents through its first element.
    let f = parse(&doc! { "a": [2, 1] });
    let set = f.index_bounds("a", true).expect("indexable");
    assert_eq!(set.len(), 2);
    assert!(contains_key(&set, RawBsonRef::Int32(2)));

    assert_eq!(
        parse(&doc! { "a": Bson::Null }).index_bounds("a", false),
        Some(vec![Interval::point(vec![TypeBracket::Null.tag()])])
    );
}

#[test]
fn ranges_stay_in_their_bracket_and_intersect_when_allowed() {
    let f = parse(&doc! { "a": { "$gt": 1, "$lte": 5 } });
    let single = f.index_bounds("a", false).expect("indexable");
    assert_eq!(
        single,
        vec![Interval {
            start: Bound::Excluded(enc(RawBsonRef::Int32(1))),
            end: Bound::Included(enc(RawBsonRef::Int32(5))),
        }]
    );
    assert!(contains_key(&single, RawBsonRef::Double(1.5)));
    assert!(contains_key(&single, RawBsonRef::Int64(5)));
    assert!(!contains_key(&single, RawBsonRef::Int32(1)));
    assert!(!contains_key(&single, RawBsonRef::Int32(6)));
    // Multikey: one predicate only, to the end of the numbers.
    let multi = f.index_bounds("a", true).expect("indexable");
    assert!(contains_key(&multi, RawBsonRef::Double(1e300)));
    assert!(!contains_key(&multi, RawBsonRef::String("x")));
    assert!(!contains_key(&multi, RawBsonRef::Double(f64::NAN)));

    assert_eq!(
        parse(&doc! { "a": { "$gt": Bson::Null } }).index_bounds("a", false),
        Some(vec![])
    );
    assert_eq!(
        parse(&doc! { "a": { "$gt": 1, "$lt": 0 } }).index_bounds("a", false),
        Some(vec![])
    );
    let strings = parse(&doc! { "a": { "$gte": "b" } })
        .index_bounds("a", false)
        .expect("indexable");
    assert!(contains_key(&strings, RawBsonRef::String("b")));
    assert!(contains_key(&strings, RawBsonRef::String("zzz")));
    assert!(!contains_key(&strings, RawBsonRef::Document(&bson::rawdoc! {})));
}

#[test]
fn not_indexable() {
    for q in [
        doc! { "a": { "$ne": 1 } },
        doc! { "a": { "$nin": [1] } },
        doc! { "a": { "$exists": true } },
        doc! { "a": { "$size": 1 } },
        doc! { "a": { "$not": { "$gt": 1 } } },
        doc! { "a": { "$gt": Bson::MinKey } },
        doc! { "b": 1 },
        doc! { "$or": [{ "a": 1 }, { "b": 1 }] },
    ] {
        assert_eq!(parse(&q).index_bounds("a", false), None, "{q}");
    }
}

/// Conditions inside nested `$and`s are seen by the planner as the top
/// level's are: `{$and: [{a: 1, c: 2}], b: 3}` offers `a` an index.
#[test]
fn nested_ands_are_flattened_for_the_planner() {
    for q in [
        doc! { "$and": [{ "a": 1, "c": 2 }], "b": 3 },
        doc! { "$and": [{ "$and": [{ "a": 1 }] }, { "b": 3 }] },
    ] {
        let f = parse(&q);
        assert_eq!(f.predicates_on("a").count(), 1, "{q}");
        assert!(
            matches!(&f, Filter::And(children) if children.iter().all(|c| !matches!(c, Filter::And(_)))),
            "{q}: {f:?}"
        );
    }
}
