//! Every rejected query says which operator or operand is wrong, and where.

use bson::{doc, Bson, Document, Regex};

use super::super::{ElemMatch, Filter, FilterError, Predicate};
use super::parse;

fn err(q: Document) -> FilterError {
    match Filter::parse(&q) {
        Ok(f) => panic!("{q} should not parse, got {f:?}"),
        Err(e) => e,
    }
}

fn regex() -> Bson {
    Bson::RegularExpression(Regex {
        pattern: "x".into(),
        options: String::new(),
    })
}

#[test]
fn unknown_operators_are_named() {
    let e = err(doc! { "a": { "$foo": 1 } });
    assert_eq!(
        e,
        FilterError::UnknownOperator {
            op: "$foo".into(),
            path: "a".into()
        }
    );
    assert_eq!(e.to_string(), "unknown operator $foo on field \"a\"");
    let e = err(doc! { "$foo": [] });
    assert_eq!(
        e,
        FilterError::UnknownOperator {
            op: "$foo".into(),
            path: String::new()
        }
    );
    assert!(e.to_string().contains("at the top level"), "{e}");
    // An operator document must hold operators only.
    let e = err(doc! { "a": { "$gt": 1, "b": 2 } });
    assert_eq!(
        e,
        FilterError::UnknownOperator {
            op: "b".into(),
            path: "a".into()
        }
    );
}

#[test]
fn unsupported_operators_say_so() {
    for q in [
        doc! { "a": { "$regex": "x" } },
        doc! { "a": regex() },
        doc! { "a": { "$in": [regex()] } },
        doc! { "a": { "$not": regex() } },
        doc! { "a": { "$type": "string" } },
        doc! { "$where": "true" },
        doc! { "a": { "$all": [{ "$elemMatch": { "b": 1 } }] } },
    ] {
        assert!(matches!(err(q.clone()), FilterError::Unsupported { .. }), "{q}");
    }
    let e = err(doc! { "tags": { "$regex": "^x" } });
    assert!(
        e.to_string().contains("$regex") && e.to_string().contains("tags"),
        "{e}"
    );
}

#[test]
fn bad_operands_name_operator_path_and_value() {
    let cases: Vec<(Document, &str, &str)> = vec![
        (doc! { "a": { "$in": 1 } }, "$in", "a"),
        (doc! { "a": { "$nin": "x" } }, "$nin", "a"),
        (doc! { "a": { "$in": [{ "$gt": 1 }] } }, "$in", "a"),
        (doc! { "a": { "$all": 1 } }, "$all", "a"),
        (doc! { "a": { "$size": -1 } }, "$size", "a"),
        (doc! { "a": { "$size": 1.5 } }, "$size", "a"),
        (doc! { "a": { "$size": "2" } }, "$size", "a"),
        (doc! { "a": { "$exists": "yes" } }, "$exists", "a"),
        (doc! { "a": { "$elemMatch": 1 } }, "$elemMatch", "a"),
        (doc! { "a": { "$not": 1 } }, "$not", "a"),
        (doc! { "a": { "$not": {} } }, "$not", "a"),
        (doc! { "a": { "$gt": regex() } }, "$gt", "a"),
        (doc! { "$and": [] }, "$and", ""),
        (doc! { "$or": { "a": 1 } }, "$or", ""),
        (doc! { "$nor": [1] }, "$nor", ""),
        (
            doc! { "x.y": { "$elemMatch": { "b": { "$size": true } } } },
            "$size",
            "x.y.b",
        ),
    ];
    for (q, op, path) in cases {
        match err(q.clone()) {
            FilterError::BadOperand {
                op: o, path: p, got, ..
            } => {
                assert_eq!((o.as_str(), p.as_str()), (op, path), "{q}");
                assert!(!got.is_empty());
            }
            other => panic!("{q}: expected BadOperand, got {other:?}"),
        }
    }
    let e = err(doc! { "a": { "$size": 1.5 } });
    assert_eq!(
        e.to_string(),
        "$size on field \"a\" needs a non-negative integer, got double 1.5"
    );
}

#[test]
fn bad_paths_and_not_operands() {
    for q in [doc! { "": 1 }, doc! { "a..b": 1 }, doc! { "a.": 1 }] {
        assert!(matches!(err(q.clone()), FilterError::InvalidPath { .. }), "{q}");
    }
    let e = err(doc! { "a": { "$not": { "b": 1 } } });
    assert!(
        matches!(e, FilterError::BadOperand { ref op, .. } if op == "$not"),
        "{e:?}"
    );
    let e = err(doc! { "a": { "$elemMatch": { "$gt": 1, "b": 1 } } });
    assert_eq!(
        e,
        FilterError::UnknownOperator {
            op: "b".into(),
            path: "a".into()
        }
    );
}

#[test]
fn accepted_shapes() {
    // Implicit AND across keys and operators, flattened.
    let f = parse(&doc! { "a": { "$gt": 1, "$lt": 5 }, "$and": [{ "b": 1 }, { "c": 2 }] });
    assert_eq!(f.conjuncts().len(), 4);
    assert_eq!(f.predicates_on("a").count(), 2);
    // A plain document is exact equality; `$ref`-style documents are literals too.
    assert!(matches!(
        parse(&doc! { "a": { "b": 1 } }),
        Filter::Field {
            pred: Predicate::Eq(_),
            ..
        }
    ));
    assert!(matches!(
        parse(&doc! { "a": { "$ref": "c", "$id": 1 } }),
        Filter::Field {
            pred: Predicate::Eq(_),
            ..
        }
    ));
    // Literal operator-looking documents through $eq.
    assert!(matches!(
        parse(&doc! { "a": { "$eq": { "$gt": 1 } } }),
        Filter::Field {
            pred: Predicate::Eq(_),
            ..
        }
    ));
    assert_eq!(parse(&doc! {}), Filter::And(vec![]));
    // $in lists are sorted and deduplicated by value.
    match parse(&doc! { "a": { "$in": [3, 1, 1.0, Bson::Int64(3), "x"] } }) {
        Filter::Field {
            pred: Predicate::In(xs),
            ..
        } => assert_eq!(xs.len(), 3),
        other => panic!("{other:?}"),
    }
    // The two $elemMatch forms.
    assert!(matches!(
        parse(&doc! { "a": { "$elemMatch": { "$gt": 1 } } }),
        Filter::Field {
            pred: Predicate::ElemMatch(ElemMatch::Value(_)),
            ..
        }
    ));
    assert!(matches!(
        parse(&doc! { "a": { "$elemMatch": { "$or": [{ "b": 1 }] } } }),
        Filter::Field {
            pred: Predicate::ElemMatch(ElemMatch::Document(_)),
            ..
        }
    ));
    assert!(matches!(
        parse(&doc! { "a": { "$size": 2.0 } }),
        Filter::Field {
            pred: Predicate::Size(2),
            ..
        }
    ));
    assert!(matches!(
        parse(&doc! { "a": { "$exists": 0 } }),
        Filter::Field {
            pred: Predicate::Exists(false),
            ..
        }
    ));
}
