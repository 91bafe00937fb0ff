//! (filter, document, expected) cases from MongoDB's documented semantics and matcher tests.

use bson::{doc, Bson, Document};

use super::{parse, raw};

fn check(cases: &[(Document, Document, bool)]) {
    let mut failures = Vec::new();
    for (q, d, want) in cases {
        let got = parse(q).matches(&raw(d));
        if got != *want {
            failures.push(format!("{q} on {d}: expected {want}, got {got}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn equality_and_arrays() {
    check(&[
        (doc! { "a": 1 }, doc! { "a": 1 }, true),
        (doc! { "a": 1 }, doc! { "a": 1.0 }, true),
        (doc! { "a": 1 }, doc! { "a": Bson::Int64(1) }, true),
        (doc! { "a": 0 }, doc! { "a": -0.0 }, true),
        (doc! { "a": 1 }, doc! { "a": "1" }, false),
        (doc! { "a": 1 }, doc! {}, false),
        (doc! { "a": 1 }, doc! { "a": [1, 2] }, true),
        (doc! { "a": 1 }, doc! { "a": [[1]] }, false),
        (doc! { "a": [1, 2] }, doc! { "a": [1, 2] }, true),
        (doc! { "a": [1, 2] }, doc! { "a": [2, 1] }, false),
        (doc! { "a": [1, 2] }, doc! { "a": [[1, 2], 3] }, true),
        (doc! { "a": [1, 2] }, doc! { "a": 1 }, false),
        (doc! { "a": { "$eq": [1, 2] } }, doc! { "a": [1, 2] }, true),
        (
            doc! { "a": { "b": 1, "c": 2 } },
            doc! { "a": { "b": 1, "c": 2 } },
            true,
        ),
        (
            doc! { "a": { "b": 1, "c": 2 } },
            doc! { "a": { "c": 2, "b": 1 } },
            false,
        ),
        (
            doc! { "a": { "b": 1, "c": 2 } },
            doc! { "a": { "b": 1.0, "c": 2 } },
            true,
        ),
        (
            doc! { "a": { "b": 1, "c": 2 } },
            doc! { "a": [{ "b": 1, "c": 2 }] },
            true,
        ),
        (doc! { "a": { "b": 1 } }, doc! { "a": { "b": 1, "c": 2 } }, false),
        (
            doc! { "a": 9_007_199_254_740_993_i64 },
            doc! { "a": 9_007_199_254_740_992.0 },
            false,
        ),
        (doc! { "a": f64::NAN }, doc! { "a": f64::NAN }, true),
        (doc! { "tags": "x" }, doc! { "tags": ["y", "x"] }, true),
        (doc! { "tags": ["x"] }, doc! { "tags": ["x"] }, true),
    ]);
}

#[test]
fn dot_paths() {
    check(&[
        (doc! { "a.b": 1 }, doc! { "a": { "b": 1 } }, true),
        (doc! { "a.b": 1 }, doc! { "a": [{ "b": 1 }] }, true),
        (doc! { "a.b": 1 }, doc! { "a": [{ "b": [1] }] }, true),
        (doc! { "a.b": 1 }, doc! { "a": [[{ "b": 1 }]] }, false),
        (doc! { "a.b": 1 }, doc! { "a": { "b": { "c": 1 } } }, false),
        (doc! { "a.b.c": 1 }, doc! { "a": [{ "b": [{ "c": 1 }] }] }, true),
        (doc! { "a.0": 1 }, doc! { "a": [1, 2] }, true),
        (doc! { "a.0": 1 }, doc! { "a": [2, 1] }, false),
        (doc! { "a.0": 1 }, doc! { "a": { "0": 1 } }, true),
        (doc! { "a.0": 1 }, doc! { "a": [[1]] }, false),
        (doc! { "a.0": [1] }, doc! { "a": [[1]] }, true),
        (doc! { "a.1": 2 }, doc! { "a": [[1, 2]] }, false),
        (doc! { "a.0.b": 1 }, doc! { "a": [{ "b": 1 }] }, true),
        (doc! { "a.0.b": 1 }, doc! { "a": [[{ "b": 1 }]] }, true),
        (doc! { "a.0.1": 2 }, doc! { "a": [[1, 2]] }, true),
        (
            doc! { "a.b": 1, "a.c": 2 },
            doc! { "a": [{ "b": 1 }, { "c": 2 }] },
            true,
        ),
    ]);
}

#[test]
fn null_and_missing() {
    check(&[
        (doc! { "a": Bson::Null }, doc! {}, true),
        (doc! { "a": Bson::Null }, doc! { "a": Bson::Null }, true),
        (doc! { "a": Bson::Null }, doc! { "a": Bson::Undefined }, true),
        (doc! { "a": Bson::Null }, doc! { "a": 1 }, false),
        (doc! { "a": Bson::Null }, doc! { "a": [1, Bson::Null] }, true),
        (doc! { "a": Bson::Null }, doc! { "a": [] }, false),
        (doc! { "a": Bson::Null }, doc! { "b": 4 }, true),
        // MongoDB's EqOp.MatchesNestedNull.
        (doc! { "a.b": Bson::Null }, doc! {}, true),
        (doc! { "a.b": Bson::Null }, doc! { "a": {} }, true),
        (doc! { "a.b": Bson::Null }, doc! { "a": [{}] }, true),
        (
            doc! { "a.b": Bson::Null },
            doc! { "a": { "b": Bson::Null } },
            true,
        ),
        (doc! { "a.b": Bson::Null }, doc! { "a": [] }, false),
        (doc! { "a.b": Bson::Null }, doc! { "a": [Bson::Null] }, false),
        (doc! { "a.b": Bson::Null }, doc! { "a": [1, 2] }, false),
        (doc! { "a.b": Bson::Null }, doc! { "a": { "b": 4 } }, false),
        (doc! { "a.b": Bson::Null }, doc! { "a": { "b": {} } }, false),
        (doc! { "a.b": Bson::Null }, doc! { "a": 5 }, true),
        (doc! { "a": { "$ne": Bson::Null } }, doc! {}, false),
        (doc! { "a": { "$ne": Bson::Null } }, doc! { "a": 1 }, true),
        (
            doc! { "a": { "$ne": Bson::Null } },
            doc! { "a": [1, Bson::Null] },
            false,
        ),
        (doc! { "a": { "$gte": Bson::Null } }, doc! {}, true),
        (
            doc! { "a": { "$lte": Bson::Null } },
            doc! { "a": Bson::Null },
            true,
        ),
        (
            doc! { "a": { "$gt": Bson::Null } },
            doc! { "a": Bson::Null },
            false,
        ),
        (doc! { "a": { "$gte": Bson::Null } }, doc! { "a": 0 }, false),
        (doc! { "a": { "$in": [Bson::Null] } }, doc! {}, true),
        (doc! { "a": { "$nin": [Bson::Null] } }, doc! {}, false),
        (doc! { "a": { "$exists": true } }, doc! { "a": Bson::Null }, true),
        (doc! { "a": { "$exists": true } }, doc! {}, false),
        (doc! { "a": { "$exists": true } }, doc! { "a": [] }, true),
        (doc! { "a": { "$exists": false } }, doc! {}, true),
        (doc! { "a.b": { "$exists": true } }, doc! { "a": [1] }, false),
        (
            doc! { "a.b": { "$exists": true } },
            doc! { "a": [{ "b": Bson::Null }] },
            true,
        ),
        (
            doc! { "a.b": { "$exists": false } },
            doc! { "a": [{ "b": 1 }, {}] },
            false,
        ),
    ]);
}

#[test]
fn comparisons_stay_in_their_bracket() {
    check(&[
        (doc! { "a": { "$gt": 5 } }, doc! { "a": "x" }, false),
        (doc! { "a": { "$gt": 5 } }, doc! { "a": 6 }, true),
        (doc! { "a": { "$gt": 5 } }, doc! { "a": 5.5 }, true),
        (doc! { "a": { "$gt": 5 } }, doc! { "a": Bson::Int64(5) }, false),
        (doc! { "a": { "$gte": 5 } }, doc! { "a": 5.0 }, true),
        (doc! { "a": { "$gt": 5 } }, doc! { "a": [1, 10] }, true),
        (doc! { "a": { "$gt": 5 } }, doc! { "a": [1, 2] }, false),
        (doc! { "a": { "$gt": 5 } }, doc! { "a": true }, false),
        (doc! { "a": { "$gt": "a" } }, doc! { "a": 5 }, false),
        (doc! { "a": { "$gt": "ab" } }, doc! { "a": "ab\0" }, true),
        (doc! { "a": { "$lt": "b" } }, doc! { "a": "a\u{ff}" }, true),
        (doc! { "a": { "$lt": 5 } }, doc! { "a": Bson::Null }, false),
        (doc! { "a": { "$lt": 5 } }, doc! {}, false),
        (doc! { "a": { "$gt": 1, "$lt": 5 } }, doc! { "a": [0, 9] }, true),
        (doc! { "a": { "$gt": 1, "$lt": 5 } }, doc! { "a": 9 }, false),
        (doc! { "a": { "$gt": Bson::MinKey } }, doc! { "a": "x" }, true),
        (
            doc! { "a": { "$gt": Bson::MinKey } },
            doc! { "a": Bson::Null },
            true,
        ),
        (doc! { "a": { "$lt": Bson::MaxKey } }, doc! { "a": {} }, true),
        (doc! { "a": { "$gt": f64::NAN } }, doc! { "a": 1 }, false),
        (doc! { "a": { "$lt": 1 } }, doc! { "a": f64::NAN }, false),
        (doc! { "a": { "$lte": 1 } }, doc! { "a": f64::NAN }, false),
        (doc! { "a": { "$gte": f64::NAN } }, doc! { "a": f64::NAN }, true),
        (doc! { "a": { "$gt": f64::NAN } }, doc! { "a": f64::NAN }, false),
        (doc! { "a": { "$lt": f64::NAN } }, doc! { "a": f64::NAN }, false),
        (
            doc! { "a": { "$gt": f64::NEG_INFINITY } },
            doc! { "a": i64::MIN },
            true,
        ),
        (
            doc! { "a": { "$gt": 9_007_199_254_740_992.0 } },
            doc! { "a": 9_007_199_254_740_993_i64 },
            true,
        ),
        (
            doc! { "a": { "$lt": 9_223_372_036_854_775_808.0 } },
            doc! { "a": i64::MAX },
            true,
        ),
        (doc! { "a": { "$gt": [1] } }, doc! { "a": [2] }, true),
        (
            doc! { "a": { "$gt": { "b": 1 } } },
            doc! { "a": { "b": 2 } },
            true,
        ),
    ]);
}

#[test]
fn in_nin_ne_all() {
    check(&[
        (doc! { "a": { "$in": [1, "x"] } }, doc! { "a": "x" }, true),
        (doc! { "a": { "$in": [1, "x"] } }, doc! { "a": [5, 1] }, true),
        (doc! { "a": { "$in": [1, "x"] } }, doc! { "a": 2 }, false),
        (doc! { "a": { "$in": [] } }, doc! { "a": 1 }, false),
        (doc! { "a": { "$in": [[1, 2]] } }, doc! { "a": [1, 2] }, true),
        (doc! { "a": { "$nin": [1, 2] } }, doc! { "a": 3 }, true),
        (doc! { "a": { "$nin": [1, 2] } }, doc! { "a": [3, 1] }, false),
        (doc! { "a": { "$nin": [1, 2] } }, doc! {}, true),
        (doc! { "a": { "$ne": 1 } }, doc! { "a": [1, 2] }, false),
        (doc! { "a": { "$ne": 1 } }, doc! { "a": [2] }, true),
        (doc! { "a": { "$ne": 1 } }, doc! {}, true),
        (doc! { "a": { "$all": [1, 2] } }, doc! { "a": [2, 3, 1] }, true),
        (doc! { "a": { "$all": [1, 2] } }, doc! { "a": [1] }, false),
        (doc! { "a": { "$all": [1] } }, doc! { "a": 1 }, true),
        (doc! { "a": { "$all": [] } }, doc! { "a": [1] }, false),
        (doc! { "a": { "$all": [[1, 2]] } }, doc! { "a": [1, 2] }, true),
        (
            doc! { "a.b": { "$all": [1, 2] } },
            doc! { "a": [{ "b": 1 }, { "b": [2] }] },
            true,
        ),
    ]);
}

#[test]
fn size_elem_match_not_logic() {
    check(&[
        (doc! { "a": { "$size": 2 } }, doc! { "a": [1, 2] }, true),
        (doc! { "a": { "$size": 2 } }, doc! { "a": [1] }, false),
        (doc! { "a": { "$size": 2 } }, doc! { "a": 2 }, false),
        (doc! { "a": { "$size": 2 } }, doc! { "a": [[1, 2]] }, false),
        (doc! { "a": { "$size": 0 } }, doc! { "a": [] }, true),
        (doc! { "a.b": { "$size": 1 } }, doc! { "a": [{ "b": [5] }] }, true),
        (
            doc! { "a": { "$elemMatch": { "$gt": 1, "$lt": 3 } } },
            doc! { "a": [0, 5] },
            false,
        ),
        (
            doc! { "a": { "$elemMatch": { "$gt": 1, "$lt": 3 } } },
            doc! { "a": [0, 2] },
            true,
        ),
        (
            doc! { "a": { "$elemMatch": { "$gt": 1 } } },
            doc! { "a": 2 },
            false,
        ),
        (
            doc! { "a": { "$elemMatch": { "$eq": 1 } } },
            doc! { "a": [[1]] },
            false,
        ),
        (
            doc! { "a": { "$elemMatch": { "$elemMatch": { "$eq": 1 } } } },
            doc! { "a": [[1]] },
            true,
        ),
        (
            doc! { "a": { "$elemMatch": { "$size": 1 } } },
            doc! { "a": [[1]] },
            true,
        ),
        (
            doc! { "a": { "$elemMatch": { "$not": { "$gt": 5 } } } },
            doc! { "a": [9, 3] },
            true,
        ),
        (
            doc! { "a": { "$elemMatch": { "b": 1, "c": 2 } } },
            doc! { "a": [{ "b": 1 }, { "c": 2 }] },
            false,
        ),
        (
            doc! { "a": { "$elemMatch": { "b": 1, "c": 2 } } },
            doc! { "a": [{ "b": 1, "c": 2 }] },
            true,
        ),
        (
            doc! { "a": { "$elemMatch": { "b": { "$gt": 1 } } } },
            doc! { "a": [{ "b": [0, 5] }] },
            true,
        ),
        (
            doc! { "a": { "$elemMatch": { "0": 1 } } },
            doc! { "a": [[1, 2]] },
            true,
        ),
        (doc! { "a": { "$elemMatch": {} } }, doc! { "a": [1, {}] }, true),
        (doc! { "a": { "$elemMatch": {} } }, doc! { "a": [1] }, false),
        (
            doc! { "a.b": { "$elemMatch": { "c": 1 } } },
            doc! { "a": [{ "b": [{ "c": 1 }] }] },
            true,
        ),
        (doc! { "a": { "$not": { "$gt": 5 } } }, doc! { "a": 3 }, true),
        (doc! { "a": { "$not": { "$gt": 5 } } }, doc! { "a": 6 }, false),
        (doc! { "a": { "$not": { "$gt": 5 } } }, doc! {}, true),
        (doc! { "a": { "$not": { "$gt": 5 } } }, doc! { "a": "x" }, true),
        (
            doc! { "a": { "$not": { "$gt": 5 } } },
            doc! { "a": [1, 9] },
            false,
        ),
        (
            doc! { "a": { "$not": { "$gt": 1, "$lt": 5 } } },
            doc! { "a": 3 },
            false,
        ),
        (
            doc! { "a": { "$not": { "$gt": 1, "$lt": 5 } } },
            doc! { "a": 7 },
            true,
        ),
        (doc! { "$nor": [{ "a": 1 }, { "b": 2 }] }, doc! { "a": 1 }, false),
        (
            doc! { "$nor": [{ "a": 1 }, { "b": 2 }] },
            doc! { "a": 2, "b": 3 },
            true,
        ),
        (doc! { "$nor": [{ "a": 1 }, { "b": 2 }] }, doc! {}, true),
        (doc! { "$or": [{ "a": 1 }, { "b": 2 }] }, doc! { "b": 2 }, true),
        (doc! { "$or": [{ "a": 1 }, { "b": 2 }] }, doc! {}, false),
        (
            doc! { "$and": [{ "a": { "$gt": 1 } }, { "a": { "$lt": 5 } }] },
            doc! { "a": [0, 9] },
            true,
        ),
        (doc! {}, doc! { "a": 1 }, true),
        // MongoDB quirk kept: element 0 has no field "0", which reads as a missing a.0.b.
        (doc! { "a.0.b": Bson::Null }, doc! { "a": [{ "b": 1 }] }, true),
    ]);
}
