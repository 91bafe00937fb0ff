//! Writes through the facade: inserts, gets, replaces, updates, upserts, deletes, transactions,
//! and the typed errors of bad updates and filters (which change nothing).

use slate::bson::{doc, Bson, Document};
use slate::core::{Error as CoreError, Part};
use slate::query::{Error as QueryError, FilterError, UpdateError};
use slate::{Collection, CollectionConfig, Error, UpdateResult};

use crate::{assert_same_docs, backends, TestDb};

fn collection(t: &TestDb, name: &str, docs: Vec<Document>) -> Collection {
    let coll =
        t.db.create_collection(CollectionConfig::new(name).index("status").index("tags"))
            .expect("create");
    if !docs.is_empty() {
        coll.insert_many(docs).expect("insert_many");
    }
    coll
}

fn all(coll: &Collection) -> Vec<Document> {
    coll.find(doc! {}).run().expect("find all")
}

fn updated(matched: u64, modified: u64, upserted_id: Option<Bson>) -> UpdateResult {
    let mut r = UpdateResult::default();
    r.matched = matched;
    r.modified = modified;
    r.upserted_id = upserted_id;
    r
}

fn three() -> Vec<Document> {
    vec![
        doc! { "_id": 1, "status": "a", "n": 1, "tags": ["x", "y"] },
        doc! { "_id": 2, "status": "b", "n": 2.5, "tags": [] },
        doc! { "_id": 3, "status": "a", "n": 3i64 },
    ]
}

#[test]
fn insert_one_and_get() {
    for t in backends() {
        let coll = collection(&t, "c", Vec::new());
        assert_eq!(
            coll.insert_one(doc! { "_id": "k", "v": 1 }).expect("insert"),
            Bson::from("k")
        );
        let id = coll
            .insert_one(doc! { "v": 2, "w": { "z": null } })
            .expect("insert");
        let Bson::ObjectId(oid) = id else {
            panic!("[{}] generated id {id:?}", t.backend)
        };
        // The generated _id comes first, the fields follow in their order.
        let got = coll.get(oid).expect("get").expect("present");
        assert_same_docs(
            &[got],
            &[doc! { "_id": oid, "v": 2, "w": { "z": null } }],
            t.backend,
        );
        assert_eq!(coll.get("nope").expect("get"), None);
        assert_eq!(coll.count(doc! {}).expect("count"), 2);
        // A second insert of an existing id fails and changes nothing.
        match coll.insert_one(doc! { "_id": "k", "v": 9 }) {
            Err(Error::Core(CoreError::DuplicateId { collection, id })) => {
                assert_eq!(
                    (collection.as_str(), id.as_str()),
                    ("c", "\"k\""),
                    "[{}]",
                    t.backend
                )
            }
            other => panic!("[{}] duplicate insert_one: {other:?}", t.backend),
        }
        assert_eq!(coll.get("k").expect("get"), Some(doc! { "_id": "k", "v": 1 }));
        // An _id type that cannot be a key is refused.
        assert!(
            matches!(
                coll.insert_one(doc! { "_id": 1.5 }),
                Err(Error::Core(CoreError::InvalidId { .. }))
            ),
            "[{}] a double _id",
            t.backend
        );
        assert_eq!(coll.count(doc! {}).expect("count"), 2);
    }
}

#[test]
fn insert_many_with_a_duplicate_writes_nothing() {
    for t in backends() {
        let coll = collection(&t, "c", three());
        let before = all(&coll);
        let batch = vec![
            doc! { "_id": 10, "status": "a" },
            doc! { "_id": 11 },
            doc! { "_id": 2 },
            doc! { "_id": 12 },
        ];
        match coll.insert_many(batch) {
            Err(Error::Core(CoreError::DuplicateId { collection, id })) => {
                assert_eq!((collection.as_str(), id.as_str()), ("c", "2"), "[{}]", t.backend);
            }
            other => panic!("[{}] insert_many with a taken id: {other:?}", t.backend),
        }
        // A duplicate inside the batch itself: the same.
        let err = coll
            .insert_many(vec![doc! { "_id": 20 }, doc! { "_id": 20i64 }])
            .expect_err("duplicate in batch");
        assert!(
            err.to_string().contains("duplicate _id 20"),
            "[{}] {err}",
            t.backend
        );
        assert_eq!(coll.count(doc! {}).expect("count"), 3, "[{}]", t.backend);
        assert_eq!(
            coll.count(doc! { "status": "a" }).expect("count"),
            2,
            "[{}] index untouched",
            t.backend
        );
        assert_eq!(coll.get(10).expect("get"), None);
        assert_eq!(coll.get(20).expect("get"), None);
        assert_same_docs(&all(&coll), &before, t.backend);

        let ids = coll
            .insert_many(vec![doc! { "_id": 10 }, doc! { "x": 1 }])
            .expect("insert_many");
        assert_eq!(ids[0], Bson::Int32(10));
        assert!(matches!(ids[1], Bson::ObjectId(_)), "{ids:?}");
        assert_eq!(coll.count(doc! {}).expect("count"), 5);
    }
}

/// A batch is checked for taken ids with one seek when no stored key lies
/// between its smallest and largest id: a taken id at either end of that
/// range, or one written earlier in the same transaction, is still found, and
/// batches before or after the stored ids go in.
#[test]
fn insert_many_finds_a_taken_id_at_either_end_of_its_ids() {
    for t in backends() {
        let coll = collection(&t, "c", three());
        for (batch, taken) in [
            (vec![3, 7, 5], "3"),
            (vec![7, 3, 5], "3"),
            (vec![0, -4, 1], "1"),
            (vec![0, 1, -4], "1"),
            (vec![2], "2"),
        ] {
            let docs: Vec<Document> = batch
                .iter()
                .map(|&id| doc! { "_id": id, "status": "z" })
                .collect();
            match coll.insert_many(docs) {
                Err(Error::Core(CoreError::DuplicateId { id, .. })) => {
                    assert_eq!(id, taken, "[{}] {batch:?}", t.backend)
                }
                other => panic!("[{}] {batch:?} over taken id {taken}: {other:?}", t.backend),
            }
        }
        assert_eq!(
            coll.count(doc! { "status": "z" }).expect("count"),
            0,
            "[{}]",
            t.backend
        );

        // Written earlier in the same transaction, not yet committed.
        let mut txn = t.db.begin().expect("begin");
        txn.insert("c", doc! { "_id": 9 }).expect("insert 9");
        let err = txn
            .insert_many("c", vec![doc! { "_id": 8 }, doc! { "_id": 9 }])
            .expect_err("9 taken in the transaction");
        assert!(
            err.to_string().contains("duplicate _id 9"),
            "[{}] {err}",
            t.backend
        );
        txn.rollback();

        // After the stored ids, before them, and between two of them.
        coll.insert_many(vec![doc! { "_id": 4 }, doc! { "_id": 6 }])
            .expect("after");
        coll.insert_many(vec![doc! { "_id": -2 }, doc! { "_id": 0 }])
            .expect("before");
        coll.insert_many(vec![doc! { "_id": 5 }]).expect("between");
        // Around stored ids without taking one: each id looked up.
        coll.insert_many(vec![doc! { "_id": 9 }, doc! { "_id": -1 }])
            .expect("around");
        let ids: Vec<Bson> = all(&coll)
            .iter()
            .map(|d| d.get("_id").cloned().expect("_id"))
            .collect();
        let want: Vec<Bson> = [-2, -1, 0, 1, 2, 3, 4, 5, 6, 9]
            .into_iter()
            .map(Bson::Int32)
            .collect();
        assert_eq!(ids, want, "[{}]", t.backend);

        // After a delete of many ids the one seek gives up (on RocksDB),
        // and each id is looked up: a freed id goes in, a kept one is taken.
        coll.insert_many((100..400).map(|i| doc! { "_id": i }).collect::<Vec<_>>())
            .expect("300 more");
        coll.delete_many(doc! { "_id": { "$gte": 100, "$lt": 399 } })
            .expect("delete");
        coll.insert_many(vec![doc! { "_id": 100 }, doc! { "_id": 398 }])
            .expect("freed ids");
        let err = coll
            .insert_many(vec![doc! { "_id": 150 }, doc! { "_id": 399 }])
            .expect_err("399 kept");
        assert!(
            err.to_string().contains("duplicate _id 399"),
            "[{}] {err}",
            t.backend
        );
        for id in [100, 398, 399] {
            assert!(coll.get(id).expect("get").is_some(), "[{}] {id}", t.backend);
        }
        assert_eq!(coll.get(150).expect("get"), None, "[{}]", t.backend);

        // Partitioned: other partitions' documents and index entries lie
        // between a batch's keys; a taken id is found in its partition.
        let parted =
            t.db.create_collection(CollectionConfig::new("p").partition_key("tenant").index("status"))
                .expect("create");
        let tenant = |tenant: &str, ids: &[i32]| -> Vec<Document> {
            ids.iter()
                .map(|&id| doc! { "_id": id, "tenant": tenant, "status": "s" })
                .collect()
        };
        parted.insert_many(tenant("a", &[1, 2])).expect("a");
        parted.insert_many(tenant("c", &[1, 2])).expect("c");
        parted
            .insert_many(tenant("b", &[1, 2]))
            .expect("b, between a and c");
        let mut batch = tenant("a", &[3]);
        batch.extend(tenant("c", &[2]));
        let err = parted.insert_many(batch).expect_err("c's 2 taken");
        assert!(
            err.to_string().contains("duplicate _id 2"),
            "[{}] {err}",
            t.backend
        );
        for name in ["a", "b", "c"] {
            let n = parted.partition(name).count(doc! {}).expect("count");
            assert_eq!(n, 2, "[{}] partition {name}", t.backend);
        }
    }
}

/// `{"n": {"n": ... 1 ...}}` with `levels` documents below the top one.
fn nested(levels: usize) -> Bson {
    (0..levels).fold(Bson::Int32(1), |inner, _| Bson::Document(doc! { "n": inner }))
}

#[test]
fn documents_nested_past_the_limit_are_refused_and_change_nothing() {
    for t in backends() {
        let coll = collection(&t, "c", three());
        let before = all(&coll);
        // `nested(n)` under "d": n levels below the top-level document.
        coll.insert_one(doc! { "_id": 100, "d": nested(100) })
            .expect("100 levels are allowed");
        let err = coll
            .insert_many(vec![doc! { "_id": 101 }, doc! { "_id": 102, "d": nested(101) }])
            .expect_err("101 levels");
        assert!(
            matches!(&err, Error::Core(CoreError::InvalidDocument { id, reason, .. })
                if id == "102" && reason.contains("nested more than 100")),
            "[{}] {err}",
            t.backend
        );
        let err = coll
            .update_one(doc! { "_id": 1 }, doc! { "$set": { "d": nested(101) } }, false)
            .expect_err("an update nesting past the limit");
        assert!(
            err.to_string().contains("nested more than 100"),
            "[{}] {err}",
            t.backend
        );
        assert_eq!(coll.get(101).expect("get"), None, "[{}]", t.backend);
        coll.delete_one(doc! { "_id": 100 }).expect("delete");
        assert_same_docs(&all(&coll), &before, t.backend);
    }
}

#[test]
fn get_many_keeps_the_order_asked() {
    for t in backends() {
        let coll = collection(&t, "c", three());
        let got = coll
            .get_many(&[Bson::Int32(3), Bson::Int32(99), Bson::Int64(1), Bson::from("x")])
            .expect("get_many");
        let docs = three();
        assert_eq!(
            got,
            vec![Some(docs[2].clone()), None, Some(docs[0].clone()), None],
            "[{}]",
            t.backend
        );
        assert_eq!(
            coll.get_many(&[]).expect("get_many"),
            Vec::<Option<Document>>::new()
        );
    }
}

#[test]
fn replace_one_with_and_without_upsert() {
    for t in backends() {
        let coll = collection(&t, "c", three());
        // The first match in _id order is replaced; the _id is kept and put first.
        let r = coll
            .replace_one(doc! { "status": "a" }, doc! { "status": "c", "k": [1] }, false)
            .expect("replace");
        assert_eq!(r, updated(1, 1, None), "[{}]", t.backend);
        assert_eq!(
            coll.get(1).expect("get"),
            Some(doc! { "_id": 1, "status": "c", "k": [1] })
        );
        assert_eq!(
            coll.count(doc! { "status": "a" }).expect("count"),
            1,
            "[{}] index follows",
            t.backend
        );
        assert_eq!(
            coll.count(doc! { "tags": "x" }).expect("count"),
            0,
            "[{}] old index entries gone",
            t.backend
        );

        // No match, no upsert: nothing.
        let r = coll
            .replace_one(doc! { "status": "zz" }, doc! { "v": 1 }, false)
            .expect("replace");
        assert_eq!(r, updated(0, 0, None));
        assert_eq!(coll.count(doc! {}).expect("count"), 3);

        // No match, upsert: the replacement is inserted.
        let r = coll
            .replace_one(doc! { "status": "zz" }, doc! { "_id": 7, "status": "zz" }, true)
            .expect("upsert");
        assert_eq!(r, updated(0, 0, Some(Bson::Int32(7))), "[{}]", t.backend);
        assert_eq!(
            coll.find(doc! { "status": "zz" }).run().expect("find"),
            vec![doc! { "_id": 7, "status": "zz" }]
        );

        // A replacement may not change the _id; nothing changes.
        let before = all(&coll);
        let err = coll
            .replace_one(doc! { "_id": 2 }, doc! { "_id": 5, "v": 1 }, false)
            .expect_err("changes _id");
        assert!(
            matches!(err, Error::Core(CoreError::InvalidDocument { .. })),
            "[{}] {err:?}",
            t.backend
        );
        assert_same_docs(&all(&coll), &before, t.backend);
    }
}

#[test]
fn replace_one_upsert_takes_the_id_from_the_filter() {
    // MongoDB: with no _id in the replacement, an upsert uses the filter's _id equality.
    for t in backends() {
        let coll = collection(&t, "c", three());
        let r = coll
            .replace_one(doc! { "_id": 77 }, doc! { "status": "new" }, true)
            .expect("upsert");
        assert_eq!(r.upserted_id, Some(Bson::Int32(77)), "[{}]", t.backend);
        assert_eq!(
            coll.get(77).expect("get"),
            Some(doc! { "_id": 77, "status": "new" }),
            "[{}]",
            t.backend
        );
    }
}

#[test]
fn update_operators_on_dot_paths() {
    for t in backends() {
        let coll = collection(
            &t,
            "c",
            vec![doc! { "_id": 1, "a": { "b": 1, "c": [1, 2, 3, 2] }, "n": 5, "tags": ["x", "y", "x"] }],
        );
        let one = |u: Document| coll.update_one(doc! { "_id": 1 }, u, false).expect("update");

        let r = one(doc! { "$set": { "a.b": 2, "a.d.e": "new", "s": null }, "$inc": { "n": 2, "a.k": 1.5 } });
        assert_eq!(r, updated(1, 1, None), "[{}]", t.backend);
        let want = doc! {
            "_id": 1,
            "a": { "b": 2, "c": [1, 2, 3, 2], "d": { "e": "new" }, "k": 1.5 },
            "n": 7,
            "tags": ["x", "y", "x"],
            "s": null,
        };
        assert_same_docs(
            &[coll.get(1).expect("get").expect("doc")],
            &[want],
            &format!("[{}] $set/$inc", t.backend),
        );

        one(doc! { "$push": { "tags": "z", "a.c": { "$each": [4, 5] }, "new.list": 1 } });
        one(
            doc! { "$pull": { "tags": "x", "a.c": { "$gte": 3 } }, "$unset": { "a.b": "", "missing.path": "" } },
        );
        one(doc! { "$inc": { "n": 0.5 } });
        let want = doc! {
            "_id": 1,
            "a": { "c": [1, 2, 2], "d": { "e": "new" }, "k": 1.5 },
            "n": 7.5,
            "tags": ["y", "z"],
            "s": null,
            "new": { "list": [1] },
        };
        assert_same_docs(
            &[coll.get(1).expect("get").expect("doc")],
            &[want],
            &format!("[{}] $push/$pull/$unset", t.backend),
        );

        // The index follows the update.
        assert_eq!(
            coll.find(doc! { "tags": "x" }).run().expect("find"),
            Vec::<Document>::new()
        );
        assert_eq!(coll.count(doc! { "tags": "z" }).expect("count"), 1);

        // Setting a value to what it is matches without modifying.
        assert_eq!(
            one(doc! { "$set": { "n": 7.5 } }),
            updated(1, 0, None),
            "[{}]",
            t.backend
        );
    }
}

/// Numeric path components step into arrays, as in MongoDB: `$set` pads
/// with nulls, `$unset` leaves a null, `$pull`/`$push`/`$inc` reach nested
/// elements; a name that is not a position in an array is refused.
#[test]
fn update_paths_through_array_positions() {
    for t in backends() {
        let coll = collection(
            &t,
            "c",
            vec![
                doc! { "_id": 1, "tags": ["x", "y"], "items": [{ "tags": ["x", "w"], "n": 1 }], "m": { "0": 1 } },
            ],
        );
        let one = |u: Document| coll.update_one(doc! { "_id": 1 }, u, false);
        let r = one(doc! {
            "$set": { "tags.1": "z", "items.2.name": "c" },
            "$unset": { "tags.0": "" },
            "$pull": { "items.0.tags": "x" },
            "$inc": { "items.0.n": 2, "m.0": 1 },
        })
        .expect("update");
        assert_eq!(r, updated(1, 1, None), "[{}]", t.backend);
        one(doc! { "$push": { "items.0.tags": "v" }, "$set": { "tags.4": "far" } }).expect("update");
        let want = doc! {
            "_id": 1,
            "tags": [null, "z", null, null, "far"],
            "items": [{ "tags": ["w", "v"], "n": 3 }, null, { "name": "c" }],
            "m": { "0": 2 },
        };
        assert_same_docs(
            &[coll.get(1).expect("get").expect("doc")],
            std::slice::from_ref(&want),
            &format!("[{}] positions", t.backend),
        );
        // The index follows: "z" is indexed, "x" is gone.
        assert_eq!(coll.count(doc! { "tags": "z" }).expect("count"), 1);
        assert_eq!(coll.count(doc! { "tags": "x" }).expect("count"), 0);
        // A field name inside an array, or a position past what an array
        // may be padded to: refused, nothing changed.
        for bad in [
            doc! { "$set": { "tags.name": 1 } },
            doc! { "$set": { "tags.99999999": 1 } },
        ] {
            let err = one(bad.clone()).expect_err("refused");
            assert!(
                matches!(
                    err,
                    Error::Query(QueryError::Update(UpdateError::PathConflict { .. }))
                ),
                "[{}] {bad}: {err:?}",
                t.backend
            );
        }
        assert_same_docs(
            &[coll.get(1).expect("get").expect("doc")],
            &[want],
            &format!("[{}] after refusals", t.backend),
        );
    }
}

/// `$pull` with `$or`/`$and`/`$nor` is a query on document elements.
#[test]
fn pull_by_a_query_of_alternatives() {
    for t in backends() {
        let coll = collection(
            &t,
            "c",
            vec![doc! { "_id": 1, "items": [{ "a": 1 }, { "b": 2 }, { "a": 3, "b": 2 }, { "c": 4 }, 5] }],
        );
        coll.update_one(
            doc! { "_id": 1 },
            doc! { "$pull": { "items": { "$or": [{ "a": 1 }, { "b": 2, "a": { "$exists": false } }] } } },
            false,
        )
        .expect("$pull $or");
        coll.update_one(
            doc! { "_id": 1 },
            doc! { "$pull": { "items": { "$and": [{ "a": 3 }, { "b": 2 }] } } },
            false,
        )
        .expect("$pull $and");
        assert_same_docs(
            &all(&coll),
            &[doc! { "_id": 1, "items": [{ "c": 4 }, 5] }],
            &format!("[{}] pulled", t.backend),
        );
    }
}

#[test]
fn update_many_and_its_counts() {
    for t in backends() {
        let coll = collection(&t, "c", three());
        let r = coll
            .update_many(doc! { "status": "a" }, doc! { "$set": { "seen": true } }, false)
            .expect("update");
        assert_eq!(r, updated(2, 2, None), "[{}]", t.backend);
        let r = coll
            .update_many(
                doc! { "n": { "$gte": 2 } },
                doc! { "$set": { "seen": true } },
                false,
            )
            .expect("update");
        assert_eq!(r, updated(2, 1, None), "[{}] doc 3 already had it", t.backend);
        let r = coll
            .update_many(
                doc! { "status": "none" },
                doc! { "$set": { "seen": true } },
                false,
            )
            .expect("update");
        assert_eq!(r, updated(0, 0, None));
        let want = vec![
            doc! { "_id": 1, "status": "a", "n": 1, "tags": ["x", "y"], "seen": true },
            doc! { "_id": 2, "status": "b", "n": 2.5, "tags": [], "seen": true },
            doc! { "_id": 3, "status": "a", "n": 3i64, "seen": true },
        ];
        assert_same_docs(&all(&coll), &want, t.backend);

        // Changing the indexed field moves documents between index entries.
        let r = coll
            .update_many(doc! { "status": "a" }, doc! { "$set": { "status": "b" } }, false)
            .expect("update");
        assert_eq!(r.modified, 2);
        assert_eq!(
            coll.count(doc! { "status": "a" }).expect("count"),
            0,
            "[{}]",
            t.backend
        );
        assert_eq!(
            coll.count(doc! { "status": "b" }).expect("count"),
            3,
            "[{}]",
            t.backend
        );

        // $inc on a string in one of the matches: none of them changes.
        coll.update_one(doc! { "_id": 2 }, doc! { "$set": { "n": "text" } }, false)
            .expect("update");
        let before = all(&coll);
        match coll.update_many(doc! {}, doc! { "$inc": { "n": 1 } }, false) {
            Err(Error::Query(QueryError::Update(UpdateError::PathConflict { op, path, .. }))) => {
                assert_eq!((op.as_str(), path.as_str()), ("$inc", "n"), "[{}]", t.backend);
            }
            other => panic!("[{}] $inc on a string: {other:?}", t.backend),
        }
        assert_same_docs(
            &all(&coll),
            &before,
            &format!("[{}] failed update_many", t.backend),
        );
    }
}

#[test]
fn upsert_builds_the_document_from_the_filter() {
    for t in backends() {
        let coll = collection(&t, "c", three());
        let filter = doc! { "status": "new", "m.x": 5, "n": { "$gt": 1 }, "e": { "$eq": [1, 2] }, "$or": [ { "z": 1 } ] };
        let r = coll
            .update_one(
                filter.clone(),
                doc! { "$set": { "k": 1 }, "$inc": { "c": 2 } },
                true,
            )
            .expect("upsert");
        let Some(Bson::ObjectId(oid)) = r.upserted_id else {
            panic!("[{}] upsert result {r:?}", t.backend)
        };
        assert_eq!((r.matched, r.modified), (0, 0));
        // The update's fields after the seed's, in path order (as MongoDB 5.0+);
        // the `$or` of one clause seeds its equality, as MongoDB's rewrite does.
        let want = doc! { "_id": oid, "status": "new", "m": { "x": 5 }, "e": [1, 2], "z": 1, "c": 2, "k": 1 };
        assert_same_docs(
            &[coll.get(oid).expect("get").expect("doc")],
            &[want],
            &format!("[{}] upserted", t.backend),
        );
        assert_eq!(coll.count(doc! { "status": "new" }).expect("count"), 1);

        // The filter's _id is the new document's.
        let r = coll
            .update_many(doc! { "_id": 42, "s": "x" }, doc! { "$push": { "l": 1 } }, true)
            .expect("upsert");
        assert_eq!(r.upserted_id, Some(Bson::Int32(42)), "[{}]", t.backend);
        assert_same_docs(
            &[coll.get(42).expect("get").expect("doc")],
            &[doc! { "_id": 42, "s": "x", "l": [1] }],
            t.backend,
        );

        // A match: an ordinary update, no insert.
        let r = coll
            .update_one(doc! { "_id": 42, "s": "x" }, doc! { "$push": { "l": 2 } }, true)
            .expect("update");
        assert_eq!(r, updated(1, 1, None));
        assert_eq!(coll.count(doc! {}).expect("count"), 5);
    }
}

/// One request may not make the server hold unbounded copies: more than
/// 32 sort fields, a sort field named twice, more than 100 projection
/// paths, and an update padding arrays with more than 1,500,000 nulls in
/// all are refused, naming the limit, and change nothing.
#[test]
fn requests_past_the_per_query_limits_are_refused() {
    for t in backends() {
        let coll = collection(&t, "c", vec![doc! { "_id": 1, "a": [], "b": [] }]);
        let fields: Vec<String> = (0..33).map(|i| format!("f{i}")).collect();
        let mut find = coll.find(doc! {});
        for f in &fields {
            find = find.sort(f.clone());
        }
        let err = find.run().unwrap_err();
        assert!(err.to_string().contains("at most 32"), "[{}] {err}", t.backend);
        let err = coll.find(doc! {}).sort("a").sort("a:desc").run().unwrap_err();
        assert!(err.to_string().contains("named twice"), "[{}] {err}", t.backend);
        // A count refuses what a run refuses.
        let err = coll.find(doc! {}).sort("a").sort("a").count().unwrap_err();
        assert!(err.to_string().contains("named twice"), "[{}] {err}", t.backend);
        assert_eq!(
            coll.find(doc! {}).sort("a").sort("b:desc").run().unwrap().len(),
            1
        );
        let paths: Vec<String> = (0..101).map(|i| format!("p{i}")).collect();
        let err = coll.find(doc! {}).project(paths.clone()).run().unwrap_err();
        assert!(err.to_string().contains("at most 100"), "[{}] {err}", t.backend);
        assert_eq!(
            coll.find(doc! {})
                .project(paths[..100].to_vec())
                .run()
                .unwrap()
                .len(),
            1
        );
        // Each path within the limit, the two together past it.
        let err = coll
            .update_one(
                doc! { "_id": 1 },
                doc! { "$set": { "a.800000": 1, "b.800000": 1 } },
                false,
            )
            .unwrap_err();
        assert!(err.to_string().contains("in all"), "[{}] {err}", t.backend);
        assert_eq!(
            coll.get(1).unwrap(),
            Some(doc! { "_id": 1, "a": [], "b": [] }),
            "[{}] refused updates change nothing",
            t.backend
        );
    }
}

/// An update that changes only a double's sign is a modification, and is
/// written; one that changes nothing in a document holding a NaN is not.
#[test]
fn an_update_is_a_modification_when_the_stored_bytes_change() {
    for t in backends() {
        let coll = collection(
            &t,
            "c",
            vec![
                doc! { "_id": 1, "a": 0.0 },
                doc! { "_id": 2, "a": f64::NAN, "x": 1 },
            ],
        );
        let r = coll
            .update_one(doc! { "_id": 1 }, doc! { "$set": { "a": -0.0 } }, false)
            .expect("update");
        assert_eq!(r, updated(1, 1, None), "[{}]", t.backend);
        let a = coll.get(1).expect("get").expect("doc").get_f64("a").expect("a");
        assert!(a == 0.0 && a.is_sign_negative(), "[{}] stored {a:?}", t.backend);
        let r = coll
            .update_one(doc! { "_id": 2 }, doc! { "$set": { "x": 1 } }, false)
            .expect("update");
        assert_eq!(r, updated(1, 0, None), "[{}]", t.backend);
    }
}

/// An upsert takes the equalities inside `$and` too, so a retried upsert
/// finds the document the first one inserted; equalities that disagree
/// are refused, and so are an upsert's paths no document could hold.
#[test]
fn upsert_takes_equalities_inside_and() {
    for t in backends() {
        let coll = collection(&t, "c", vec![]);
        for _ in 0..2 {
            coll.update_one(
                doc! { "$and": [{ "user": "u1" }, { "$and": [{ "_id": 7 }] }, { "n": { "$gte": 0 } }] },
                doc! { "$inc": { "n": 1 } },
                true,
            )
            .expect("upsert");
        }
        assert_same_docs(
            &all(&coll),
            &[doc! { "_id": 7, "user": "u1", "n": 2 }],
            &format!("[{}] two upserts", t.backend),
        );
        // An `$eq` beside other operators, and a DBRef compared as a value,
        // are equalities too: the second upsert of each finds the first's
        // document instead of inserting another.
        let dbref = doc! { "$ref": "users", "$id": 7 };
        for filter in [
            doc! { "_id": 8, "m": { "$eq": 5, "$exists": true } },
            doc! { "_id": 9, "owner": dbref.clone() },
        ] {
            for _ in 0..2 {
                coll.update_one(filter.clone(), doc! { "$inc": { "hits": 1 } }, true)
                    .expect("upsert");
            }
            assert_eq!(coll.count(filter.clone()).expect("count"), 1, "{filter}");
        }
        assert_eq!(
            coll.get(8).expect("get"),
            Some(doc! { "_id": 8, "m": 5, "hits": 2 })
        );
        assert_eq!(
            coll.get(9).expect("get"),
            Some(doc! { "_id": 9, "owner": dbref, "hits": 2 })
        );
        coll.delete_many(doc! { "_id": { "$in": [8, 9] } })
            .expect("delete");
        let deep = vec!["a"; 200_000].join(".");
        for filter in [
            doc! { "$and": [{ "user": "u1" }, { "user": "u2" }] },
            doc! { "a": 1, "$and": [{ "a.b": 1 }] },
            doc! { deep.as_str(): 1 },
        ] {
            let err = coll
                .update_one(filter.clone(), doc! { "$set": { "k": 1 } }, true)
                .expect_err("refused");
            assert!(
                matches!(err, Error::Query(QueryError::Update(_))),
                "[{}] {:.80}: {err:?}",
                t.backend,
                filter.to_string()
            );
        }
        assert_eq!(coll.count(doc! {}).expect("count"), 1, "[{}]", t.backend);

        // Equalities that agree, or on sibling paths, still build a
        // document; a filter the seed refuses still updates what it
        // matches, and a replacement takes only the filter's _id.
        for (filter, want) in [
            (
                doc! { "_id": 8, "a.b": 1, "a.c": 2 },
                doc! { "_id": 8, "a": { "b": 1, "c": 2 }, "k": 1 },
            ),
            (
                doc! { "_id": 9, "n": 1, "$and": [{ "n": 1.0 }, { "n": 1 }] },
                doc! { "_id": 9, "n": 1, "k": 1 },
            ),
        ] {
            coll.update_one(filter.clone(), doc! { "$set": { "k": 1 } }, true)
                .unwrap_or_else(|e| panic!("[{}] {filter}: {e}", t.backend));
            let id = want.get("_id").cloned().expect("_id");
            assert_same_docs(
                &[coll.get(id).expect("get").expect("inserted")],
                &[want],
                &format!("[{}] {filter}", t.backend),
            );
        }
        let r = coll.update_one(
            doc! { "$and": [{ "user": "u1" }, { "user": "u2" }], "n": { "$gte": 0 } },
            doc! { "$set": { "k": 2 } },
            true,
        );
        assert!(r.is_err(), "[{}] nothing matches: the seed is refused", t.backend);
        coll.insert_one(doc! { "_id": 11, "tags": ["x", "y"] })
            .expect("insert");
        let r = coll
            .update_one(
                doc! { "$and": [{ "tags": "x" }, { "tags": "y" }] },
                doc! { "$set": { "k": 4 } },
                true,
            )
            .expect("a match is updated, whatever the seed would be");
        assert_eq!(r, updated(1, 1, None), "[{}]", t.backend);
        let r = coll
            .replace_one(
                doc! { "_id": 10, "$and": [{ "x": 1 }, { "x": 2 }] },
                doc! { "y": 1 },
                true,
            )
            .expect("a replacement takes only the _id");
        assert_eq!(r.upserted_id, Some(Bson::Int32(10)), "[{}]", t.backend);
    }
}

/// A read that began before a collection was dropped, and re-created under
/// its name, keeps reading what it saw: its documents, index and count (the
/// column family stays readable on RocksStore while the read holds it). Its
/// vector searches are refused rather than shown the new collection's rows.
#[test]
fn a_read_begun_before_a_drop_keeps_its_collection() {
    use slate::core::Part;
    for t in backends() {
        let b = t.backend;
        let config = |dim: usize| {
            CollectionConfig::new("c")
                .index("status")
                .vector_field_config(slate::VectorField::new("v", dim, slate::Metric::L2))
        };
        let coll = t.db.create_collection(config(2)).expect("create");
        coll.insert_many((0..10i64).map(|i| doc! { "_id": i, "status": i % 2, "v": [i as f64, 0.0] }))
            .expect("insert");
        let old = t.db.database().read();
        let sees_its_collection = |when: &str| {
            let r = old.collection("c").expect("the old read has c");
            let part = Part::none();
            assert_eq!(r.count(&part).expect("count"), 10, "[{b}] {when}");
            assert_eq!(r.scan(&part).expect("scan").count(), 10, "[{b}] {when}");
            let doc = r.get_by_id(&part, &Bson::Int64(3)).expect("get").expect("doc 3");
            assert_eq!(
                doc.raw().expect("raw").get_i64("_id").ok(),
                Some(3),
                "[{b}] {when}"
            );
            assert_eq!(
                r.index_count(&part, "status", None, None, 100).expect("index"),
                10,
                "[{b}] {when}"
            );
        };
        sees_its_collection("before the drop");
        t.db.drop_collection("c").expect("drop");
        sees_its_collection("after the drop");
        let again = t.db.create_collection(config(3)).expect("re-create");
        again
            .insert_one(doc! { "_id": 100, "status": 5, "v": [1.0, 2.0, 3.0] })
            .expect("insert");
        sees_its_collection("after the re-create");
        // Its vectors too: the dropped collection's (dim 2, ten rows), not
        // the new one's.
        let r = old.collection("c").expect("the old read has c");
        let view = r.vectors("v").expect("the old read searches its own vectors");
        assert_eq!(view.dim(), 2, "[{b}]");
        let hits = view.search(&[0.0, 0.0], 3, 1).expect("search");
        let ids: Vec<Bson> = hits.iter().map(|h| r.id_of_key(&h.id).expect("id")).collect();
        assert_eq!(ids, [0i64, 1, 2].map(Bson::Int64).to_vec(), "[{b}]");
        assert_eq!(again.count(doc! {}).expect("count"), 1, "[{b}]");
        assert_eq!(
            again
                .search("v", &[1.0, 2.0, 3.0])
                .k(5)
                .run()
                .expect("search")
                .len(),
            1
        );
    }
}

#[test]
fn delete_one_and_delete_many() {
    for t in backends() {
        let coll = collection(&t, "c", three());
        assert_eq!(
            coll.delete_one(doc! { "status": "a" }).expect("delete"),
            1,
            "[{}]",
            t.backend
        );
        assert_eq!(
            coll.get(1).expect("get"),
            None,
            "[{}] the first in _id order",
            t.backend
        );
        assert_eq!(coll.delete_one(doc! { "status": "none" }).expect("delete"), 0);
        coll.insert_many(vec![
            doc! { "_id": 4, "status": "b" },
            doc! { "_id": 5, "status": "b", "tags": "x" },
        ])
        .expect("insert");
        assert_eq!(
            coll.delete_many(doc! { "status": "b", "tags": { "$exists": true } })
                .expect("delete"),
            2
        );
        assert_same_docs(
            &all(&coll),
            &[
                doc! { "_id": 3, "status": "a", "n": 3i64 },
                doc! { "_id": 4, "status": "b" },
            ],
            t.backend,
        );
        assert_eq!(
            coll.count(doc! { "tags": "x" }).expect("count"),
            0,
            "[{}] index entries gone",
            t.backend
        );
        assert_eq!(coll.delete_many(doc! {}).expect("delete"), 2);
        assert_eq!(coll.count(doc! {}).expect("count"), 0);
        assert_eq!(all(&coll), Vec::<Document>::new());
    }
}

#[test]
fn transactions_commit_atomically_and_roll_back_on_err() {
    for t in backends() {
        let a = collection(&t, "a", three());
        let b = collection(&t, "b", Vec::new());
        let db = &t.db;

        let n = db
            .transaction(|txn| {
                txn.insert("a", doc! { "_id": 4, "status": "a" })?;
                txn.insert("b", doc! { "_id": 1, "from": "txn" })?;
                let r = txn.update(
                    "a",
                    &[Part::none()],
                    &doc! { "status": "a" },
                    &doc! { "$set": { "k": 1 } },
                    true,
                    false,
                )?;
                // The transaction reads its own writes; readers outside it do not.
                assert_eq!(
                    txn.get("b", &Part::none(), &Bson::Int32(1))?,
                    Some(doc! { "_id": 1, "from": "txn" })
                );
                assert_eq!(b.count(doc! {})?, 0, "an uncommitted write is visible outside");
                assert_eq!(
                    a.count(doc! { "k": 1 })?,
                    0,
                    "an uncommitted write is visible outside"
                );
                Ok(r.matched)
            })
            .expect("commit");
        assert_eq!(n, 3, "[{}] the update saw the insert before it", t.backend);
        assert_eq!(a.count(doc! { "k": 1 }).expect("count"), 3);
        assert_eq!(b.get(1).expect("get"), Some(doc! { "_id": 1, "from": "txn" }));

        let before_a = all(&a);
        let before_b = all(&b);
        let out: slate::Result<()> = db.transaction(|txn| {
            txn.insert("b", doc! { "_id": 2 })?;
            txn.delete("a", &[Part::none()], &doc! {}, true)?;
            txn.create_index("b", "x")?;
            Err(Error::Core(CoreError::InvalidPartition {
                reason: "abort".into(),
            }))
        });
        assert!(
            matches!(out, Err(Error::Core(CoreError::InvalidPartition { .. }))),
            "{out:?}"
        );
        assert_same_docs(&all(&a), &before_a, &format!("[{}] rolled back", t.backend));
        assert_same_docs(&all(&b), &before_b, &format!("[{}] rolled back", t.backend));
        assert!(
            b.config().expect("config").indexes.iter().all(|f| f != "x"),
            "[{}] index rolled back",
            t.backend
        );

        // A failing write inside the closure, propagated with `?`: the same.
        let out = db.transaction(|txn| {
            txn.insert("b", doc! { "_id": 3 })?;
            txn.insert("a", doc! { "_id": 1 })
        });
        assert!(
            matches!(out, Err(Error::Core(CoreError::DuplicateId { .. }))),
            "{out:?}"
        );
        assert_eq!(b.get(3).expect("get"), None, "[{}]", t.backend);

        // A failed insert_many inside a transaction leaves it as it was:
        // the writes before it commit, none of the batch's.
        db.transaction(|txn| {
            txn.insert("b", doc! { "_id": 7 })?;
            let err = txn
                .insert_many(
                    "b",
                    vec![doc! { "_id": 8 }, doc! { "_id": 9 }, doc! { "_id": 8i64 }],
                )
                .expect_err("a repeated id");
            assert!(err.to_string().contains("duplicate _id 8"), "{err}");
            assert_eq!(txn.get("b", &Part::none(), &Bson::Int32(8))?, None);
            Ok(())
        })
        .expect("commit");
        assert_eq!(b.get(7).expect("get"), Some(doc! { "_id": 7 }), "[{}]", t.backend);
        assert_eq!(b.get(8).expect("get"), None, "[{}]", t.backend);
        assert_eq!(b.get(9).expect("get"), None, "[{}]", t.backend);

        // A failed update_many inside a transaction leaves it as it was too,
        // whether a document fails the update itself ($inc on a string) or
        // the checks of what it becomes (over 16 MiB), after one before it
        // was already updated.
        let u = db
            .create_collection(CollectionConfig::new("u").index("n"))
            .expect("create");
        let big = "x".repeat(9 << 20);
        u.insert_many(vec![
            doc! { "_id": 1, "n": 1 },
            doc! { "_id": 2, "n": "text", "big": big.as_str() },
            doc! { "_id": 3, "n": 3 },
        ])
        .expect("insert");
        let before = all(&u);
        db.transaction(|txn| {
            let err = txn
                .update(
                    "u",
                    &[Part::none()],
                    &doc! {},
                    &doc! { "$inc": { "n": 1 } },
                    true,
                    false,
                )
                .expect_err("$inc on a string");
            assert!(err.to_string().contains("n"), "{err}");
            let err = txn
                .update(
                    "u",
                    &[Part::none()],
                    &doc! {},
                    &doc! { "$set": { "blob": &big[..8 << 20] } },
                    true,
                    false,
                )
                .expect_err("a document over 16 MiB");
            assert!(err.to_string().contains("bytes"), "{err}");
            Ok(())
        })
        .expect("commit");
        assert_same_docs(&all(&u), &before, t.backend);
        assert_eq!(
            u.count(doc! { "n": 2 }).expect("count"),
            0,
            "[{}] index untouched",
            t.backend
        );
        assert_eq!(
            u.count(doc! { "n": 1 }).expect("count"),
            1,
            "[{}] index untouched",
            t.backend
        );

        // begin/commit and begin/drop.
        let mut txn = db.begin().expect("begin");
        txn.insert("b", doc! { "_id": 5 }).expect("insert");
        drop(txn);
        assert_eq!(b.get(5).expect("get"), None);
        let mut txn = db.begin().expect("begin");
        txn.insert("b", doc! { "_id": 6 }).expect("insert");
        txn.commit().expect("commit");
        assert_eq!(b.get(6).expect("get"), Some(doc! { "_id": 6 }));
        assert_eq!(b.count(doc! {}).expect("count"), 3);
    }
}

fn assert_unknown_update_op(out: slate::Result<UpdateResult>, want: &str, backend: &str) {
    match out {
        Err(e @ Error::Query(QueryError::Update(UpdateError::UnknownOperator { .. }))) => {
            let Error::Query(QueryError::Update(UpdateError::UnknownOperator { op })) = &e else {
                unreachable!()
            };
            assert_eq!(op, want, "[{backend}]");
            assert!(e.to_string().contains(want), "[{backend}] message {e}");
        }
        other => panic!("[{backend}] update with {want}: {other:?}"),
    }
}

fn assert_unknown_filter_op<T: std::fmt::Debug>(
    out: slate::Result<T>,
    want_op: &str,
    want_path: &str,
    backend: &str,
) {
    match out {
        Err(e @ Error::Query(QueryError::Filter(FilterError::UnknownOperator { .. }))) => {
            let Error::Query(QueryError::Filter(FilterError::UnknownOperator { op, path })) = &e else {
                unreachable!()
            };
            assert_eq!((op.as_str(), path.as_str()), (want_op, want_path), "[{backend}]");
            assert!(e.to_string().contains(want_op), "[{backend}] message {e}");
        }
        other => panic!("[{backend}] filter with {want_op}: {other:?}"),
    }
}

#[test]
fn bad_updates_and_filters_are_typed_errors_and_change_nothing() {
    for t in backends() {
        let coll = collection(&t, "c", three());
        let before = all(&coll);
        let b = t.backend;

        assert_unknown_update_op(
            coll.update_one(doc! { "_id": 1 }, doc! { "$foo": { "n": 1 } }, false),
            "$foo",
            b,
        );
        assert_unknown_update_op(
            coll.update_many(doc! {}, doc! { "$set": { "n": 1 }, "$foo": { "n": 1 } }, true),
            "$foo",
            b,
        );
        assert_unknown_update_op(
            coll.update_one(doc! { "_id": 99 }, doc! { "$foo": { "n": 1 } }, true),
            "$foo",
            b,
        );
        assert!(
            matches!(
                coll.update_one(doc! {}, doc! { "n": 1 }, false),
                Err(Error::Query(QueryError::Update(
                    UpdateError::NotAnOperator { .. }
                )))
            ),
            "[{b}] a replacement given to update"
        );
        assert!(
            matches!(
                coll.update_one(doc! {}, doc! { "$set": { "_id": 5 } }, false),
                Err(Error::Query(QueryError::Update(UpdateError::ImmutableId { .. })))
            ),
            "[{b}] $set of _id"
        );
        // Positional operators, $-prefixed names and paths deeper than a
        // document may nest: refused before any document is built.
        let deep = vec!["a"; 200_000].join(".");
        for u in [
            doc! { "$set": { "items.$.qty": 5 } },
            doc! { "$set": { "$x": 1 } },
            doc! { "$set": { deep.as_str(): 1 } },
            doc! { "$unset": { deep.as_str(): "" } },
        ] {
            let err = coll.update_many(doc! {}, u.clone(), true).expect_err("refused");
            assert!(
                matches!(
                    err,
                    Error::Query(QueryError::Update(UpdateError::BadValue { .. }))
                ),
                "[{b}] {:.60}: {err:?}",
                u.to_string()
            );
        }

        let bad = doc! { "n": { "$foo": 1 } };
        assert_unknown_filter_op(coll.find(bad.clone()).run(), "$foo", "n", b);
        assert_unknown_filter_op(coll.find(bad.clone()).explain(), "$foo", "n", b);
        assert_unknown_filter_op(coll.count(bad.clone()), "$foo", "n", b);
        assert_unknown_filter_op(
            coll.update_many(bad.clone(), doc! { "$set": { "k": 1 } }, true),
            "$foo",
            "n",
            b,
        );
        assert_unknown_filter_op(
            coll.replace_one(bad.clone(), doc! { "k": 1 }, true),
            "$foo",
            "n",
            b,
        );
        assert_unknown_filter_op(coll.delete_many(bad), "$foo", "n", b);
        assert_unknown_filter_op(coll.delete_one(doc! { "$foo": [ { "n": 1 } ] }), "$foo", "", b);
        assert_unknown_filter_op(
            coll.find(doc! { "$or": [ { "m": { "$elemMatch": { "x": { "$bar": 1 } } } } ] })
                .run(),
            "$bar",
            "m.x",
            b,
        );
        match coll.find(doc! { "s": { "$regex": "a" } }).run() {
            Err(Error::Query(QueryError::Filter(FilterError::Unsupported { op, path, .. }))) => {
                assert_eq!((op.as_str(), path.as_str()), ("$regex", "s"))
            }
            other => panic!("[{b}] $regex: {other:?}"),
        }
        match coll.delete_many(doc! { "n": { "$in": 1 } }) {
            Err(Error::Query(QueryError::Filter(FilterError::BadOperand { op, path, .. }))) => {
                assert_eq!((op.as_str(), path.as_str()), ("$in", "n"))
            }
            other => panic!("[{b}] $in: 1: {other:?}"),
        }
        match coll.find(doc! {}).sort("n:sideways").run() {
            Err(Error::Query(QueryError::InvalidQuery { reason })) => {
                assert!(reason.contains("sideways"), "{reason}")
            }
            other => panic!("[{b}] bad sort: {other:?}"),
        }

        assert_same_docs(&all(&coll), &before, &format!("[{b}] after the refused writes"));
        assert_eq!(coll.count(doc! {}).expect("count"), 3);
        let unknown = t.db.collection("nope").expect_err("unknown collection");
        assert!(
            matches!(&unknown, Error::Core(CoreError::UnknownCollection { name }) if name == "nope"),
            "{unknown:?}"
        );
    }
}

#[test]
fn a_collection_write_inside_a_transaction_is_refused_not_hung() {
    for t in backends() {
        let b = t.backend;
        let coll = collection(&t, "c", three());
        let before = all(&coll);
        let db = t.db.clone();
        let (done, out) = std::sync::mpsc::channel();
        // On a thread of its own: before the fix this waited forever.
        std::thread::spawn(move || {
            let c = db.collection("c").expect("collection");
            let result: slate::Result<()> = db.transaction(|txn| {
                txn.insert("c", doc! { "_id": 100 })?;
                // Through the handle, not the transaction: a second writer
                // on the thread that holds the first.
                c.insert_one(doc! { "_id": 101 })?;
                Ok(())
            });
            let created = db.transaction(|_| db.create_collection(CollectionConfig::new("d")).map(|_| ()));
            let _ = done.send((result, created));
        });
        let (result, created) = out
            .recv_timeout(std::time::Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("[{b}] a write inside a transaction hung"));
        for r in [result, created] {
            match r {
                Err(e @ Error::Core(CoreError::NestedWrite)) => {
                    assert!(e.to_string().contains("write through it"), "{e}");
                }
                other => panic!("[{b}] expected NestedWrite, got {other:?}"),
            }
        }
        // The closure's error rolled the transaction back.
        assert_same_docs(&all(&coll), &before, &format!("[{b}] after the refusal"));
        assert!(t.db.collection("d").is_err(), "[{b}]");
        // And the gate was given back: writes go on.
        coll.insert_one(doc! { "_id": 102 }).expect("insert after");
    }
}

/// An upsert seeds the equality of a one-clause `$or`, a one-value `$in`
/// and a one-value `$all` (MongoDB rewrites each as that equality first),
/// so repeating it finds the document it inserted; a replacement upsert
/// takes an `_id` given that way. Two values seed nothing.
#[test]
fn upserts_seed_one_clause_or_and_one_value_in_and_all() {
    for t in backends() {
        let b = t.backend;
        let c =
            t.db.create_collection(CollectionConfig::new("up"))
                .expect("create");
        for _ in 0..2 {
            c.update_one(
                doc! { "$or": [{ "sku": "A" }] },
                doc! { "$inc": { "n": 1 } },
                true,
            )
            .expect("upsert");
            c.update_one(doc! { "k": { "$in": [5] } }, doc! { "$inc": { "n": 1 } }, true)
                .expect("upsert");
            c.update_one(
                doc! { "tag": { "$all": ["x"] }, "$and": [{ "$or": [{ "u": 2 }] }] },
                doc! { "$inc": { "n": 1 } },
                true,
            )
            .expect("upsert");
        }
        assert_eq!(c.count(doc! {}).expect("count"), 3, "[{b}]");
        for filter in [doc! { "sku": "A" }, doc! { "k": 5 }, doc! { "tag": "x", "u": 2 }] {
            let got = c.find(filter.clone()).run().expect("find");
            assert_eq!(got.len(), 1, "[{b}] {filter}: {got:?}");
            assert_eq!(got[0].get_i32("n").ok(), Some(2), "[{b}] {filter}: {got:?}");
        }
        let r = c
            .replace_one(doc! { "_id": { "$in": [40] } }, doc! { "r": 1 }, true)
            .expect("replace upsert");
        assert_eq!(r.upserted_id, Some(Bson::Int32(40)), "[{b}]");
        // A list of one value repeated is that value; two different
        // equalities on one path are refused, as MongoDB refuses them.
        let r = c
            .update_one(doc! { "d": { "$in": [6, 6] } }, doc! { "$set": { "s": 1 } }, true)
            .expect("upsert");
        let got = c
            .get(r.upserted_id.expect("inserted"))
            .expect("get")
            .expect("doc");
        assert_eq!(got.get_i32("d").ok(), Some(6), "[{b}] {got}");
        let err = c
            .update_one(
                doc! { "d": { "$in": [1], "$all": [2] } },
                doc! { "$set": { "s": 1 } },
                true,
            )
            .expect_err("ambiguous");
        assert!(err.to_string().contains("ambiguous"), "[{b}] {err}");
        let r = c
            .update_one(
                doc! { "e": { "$eq": 3, "$in": [3] } },
                doc! { "$set": { "s": 1 } },
                true,
            )
            .expect("agreeing equalities");
        assert!(r.upserted_id.is_some(), "[{b}]");
        for filter in [
            doc! { "m": { "$in": [1, 2] } },
            doc! { "$or": [{ "m": 1 }, { "m": 2 }] },
        ] {
            let r = c
                .update_one(filter.clone(), doc! { "$set": { "s": 1 } }, true)
                .expect("upsert");
            let id = r.upserted_id.expect("inserted");
            let got = c.get(id).expect("get").expect("doc");
            assert!(!got.contains_key("m"), "[{b}] {filter}: {got}");
        }
    }
}

/// `$pull` by a plain regular expression is refused (matched as an
/// equality, it removed nothing and reported success), and by a DBRef's
/// fields it is a query on the elements: references with more fields, in
/// another order, are pulled too.
#[test]
fn pull_refuses_a_pattern_and_queries_dbref_fields() {
    for t in backends() {
        let b = t.backend;
        let c =
            t.db.create_collection(CollectionConfig::new("pl"))
                .expect("create");
        c.insert_one(doc! {
            "_id": 1,
            "tags": ["temp1", "keep"],
            "refs": [
                { "$ref": "users", "$id": 7, "$db": "app" },
                { "$id": 7, "$ref": "users" },
                { "$ref": "users", "$id": 8, "$db": "app" },
            ],
        })
        .expect("insert");
        let re = Bson::RegularExpression(slate::bson::Regex {
            pattern: "^temp".into(),
            options: String::new(),
        });
        let err = c
            .update_one(doc! { "_id": 1 }, doc! { "$pull": { "tags": re } }, false)
            .expect_err("a pattern is refused");
        assert!(err.to_string().contains("regular expression"), "[{b}] {err}");
        c.update_one(
            doc! { "_id": 1 },
            doc! { "$pull": { "refs": { "$ref": "users", "$id": 7 } } },
            false,
        )
        .expect("pull");
        let got = c.get(1).expect("get").expect("doc");
        assert_eq!(
            got.get_array("refs").expect("refs"),
            &vec![Bson::Document(doc! { "$ref": "users", "$id": 8, "$db": "app" })],
            "[{b}] {got}"
        );
        assert_eq!(
            got.get_array("tags").expect("tags").len(),
            2,
            "[{b}] nothing pulled: {got}"
        );
    }
}

/// A collection created inside a transaction exists, with its documents
/// and their vectors, only once the transaction commits: dropped before,
/// it leaves nothing, not even after a reopen, and the name is free to
/// create again. Created after another write, or twice, it is refused.
#[test]
fn a_collection_created_in_a_transaction_exists_only_once_it_commits() {
    use slate::{Metric, VectorField};
    let dir = tempfile::tempdir().expect("tempdir");
    let open = || slate::Db::builder(dir.path()).sync(false).open().expect("open");
    let config = || {
        CollectionConfig::new("t")
            .index("g")
            .vector_field_config(VectorField::new("v", 2, Metric::L2))
    };
    let docs = || (0..50).map(|i| doc! { "_id": i, "g": i % 5, "v": [f64::from(i), 0.0] });
    for (b, db) in [("memory", slate::Db::memory()), ("rocks", open())] {
        {
            let mut txn = db.begin().expect("begin");
            txn.create_collection(config()).expect("create");
            for d in docs() {
                txn.insert("t", d).expect("insert");
            }
            // Dropped: rolled back.
        }
        assert!(db.collection("t").is_err(), "[{b}] no collection before a commit");
        assert!(
            !db.list_collections().expect("list").contains(&"t".to_owned()),
            "[{b}]"
        );
        let mut txn = db.begin().expect("begin");
        txn.insert("x", doc! { "_id": 1 }).expect_err("no collection x");
        txn.create_collection(config())
            .expect("create after a failed write (nothing written)");
        let err = txn.create_collection(config()).expect_err("twice");
        assert!(err.to_string().contains("exists"), "[{b}] {err}");
        for d in docs() {
            txn.insert("t", d).expect("insert");
        }
        let err = txn
            .create_collection(CollectionConfig::new("u"))
            .expect_err("after a write");
        assert!(err.to_string().contains("first"), "[{b}] {err}");
        txn.commit().expect("commit");
        let coll = db.collection("t").expect("committed");
        assert_eq!(coll.count(doc! { "g": 3 }).expect("count"), 10, "[{b}]");
        let hits = coll.search("v", &[7.2, 0.0]).k(2).run().expect("search");
        let ids: Vec<&Bson> = hits.iter().map(|h| &h.id).collect();
        assert_eq!(ids, [&Bson::Int32(7), &Bson::Int32(8)], "[{b}]");
        assert!(
            !db.list_collections().expect("list").contains(&"u".to_owned()),
            "[{b}]"
        );
    }
    // RocksDB: a creation left uncommitted, then a reopen: nothing there,
    // and the name is created afresh.
    {
        let db = open();
        let mut txn = db.begin().expect("begin");
        txn.create_collection(CollectionConfig::new("w")).expect("create");
        txn.insert("w", doc! { "_id": 1 }).expect("insert");
    }
    let db = open();
    assert!(
        db.collection("w").is_err(),
        "an uncommitted creation survived a reopen"
    );
    let w = db
        .create_collection(CollectionConfig::new("w"))
        .expect("create again");
    assert_eq!(w.count(doc! {}).expect("count"), 0);
    assert_eq!(db.collection("t").expect("t").count(doc! {}).expect("count"), 50);
}

/// In a transaction with a byte limit, an update that passes it fails and
/// gives back what it staged: the transaction goes on with room for smaller
/// writes, and commits them.
#[test]
fn a_limited_transaction_goes_on_after_an_update_too_large_for_it() {
    let db = slate::Db::memory();
    let pad = "x".repeat(1_000);
    db.create_collection(CollectionConfig::new("c"))
        .unwrap()
        .insert_many((0..20).map(|i| doc! { "_id": i, "k": 0, "pad": pad.clone() }))
        .unwrap();
    let limited = db.with_transaction_limit(Some(10_000));
    let mut t = limited.begin().unwrap();
    let parts = [Part::none()];
    let err = t
        .update("c", &parts, &doc! {}, &doc! { "$set": { "k": 1 } }, true, false)
        .unwrap_err();
    assert!(err.to_string().contains("transaction too large"), "{err}");
    assert_eq!(
        t.inner().held_bytes(),
        0,
        "the staged replacements were given back"
    );
    let one = t
        .update(
            "c",
            &parts,
            &doc! { "_id": 0 },
            &doc! { "$set": { "k": 1 } },
            false,
            false,
        )
        .unwrap();
    assert_eq!(one.modified, 1);
    t.commit().unwrap();
    let c = db.collection("c").unwrap();
    assert_eq!(c.count(doc! { "k": 1 }).unwrap(), 1);
    assert_eq!(c.count(doc! { "k": 0 }).unwrap(), 19);
}
