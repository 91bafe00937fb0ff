//! Collections and documents on both backends: ids, duplicates, indexes kept
//! in step, partitions, vectors refused or stored, integrity after random writes.

use std::borrow::Cow;
use std::sync::Arc;

use bson::binary::{PackedBitVector, Vector};
use bson::spec::BinarySubtype;
use bson::{doc, Bson, Document};
use proptest::prelude::*;
use slate_core::store::WriteGuard;
use slate_core::{
    check_integrity, Batch, CollectionConfig, Database, Direction, EntryIter, Error, KeyRange, MemoryStore,
    Metric, Part, RocksStore, Snapshot, Store,
};

fn databases() -> Vec<(Database, Option<tempfile::TempDir>)> {
    let dir = tempfile::tempdir().expect("tempdir");
    let rocks = RocksStore::builder(dir.path()).sync(false).open().expect("rocks");
    vec![
        (
            Database::open(Arc::new(MemoryStore::new())).expect("memory db"),
            None,
        ),
        (Database::open(Arc::new(rocks)).expect("rocks db"), Some(dir)),
    ]
}

fn integrity(db: &Database, name: &str) {
    let config = db.collection_config(name).expect("config");
    let problems = check_integrity(db.read().snapshot(), &config).expect("check");
    assert!(problems.is_empty(), "integrity problems: {problems:#?}");
}

/// The committed document count of unpartitioned collection `name`.
fn committed_count(db: &Database, name: &str) -> u64 {
    db.read()
        .collection(name)
        .expect("collection")
        .count(&Part::none())
        .expect("count")
}

#[test]
fn insert_get_replace_delete_keep_indexes_in_step() {
    for (db, _dir) in databases() {
        db.create_collection(CollectionConfig::new("people").index("age").index("tags"))
            .expect("create");
        let mut txn = db.begin_write().expect("txn");
        let id = txn
            .insert("people", doc! { "name": "ann", "age": 31, "tags": ["a", "b"] })
            .expect("insert");
        assert!(
            matches!(id, Bson::ObjectId(_)),
            "an ObjectId is generated when _id is absent"
        );
        txn.insert("people", doc! { "_id": 7, "name": "bob" })
            .expect("insert");
        txn.insert("people", doc! { "_id": "x", "name": "cy", "age": 5.5 })
            .expect("insert");
        txn.commit().expect("commit");
        integrity(&db, "people");

        let read = db.read();
        let people = read.collection("people").expect("collection");
        let part = Part::none();
        assert_eq!(people.count(&part).expect("count"), 3);
        // 7, 7i64 and 7.0 are the same id.
        for id in [Bson::Int32(7), Bson::Int64(7)] {
            let d = people.get_by_id(&part, &id).expect("get").expect("found");
            assert_eq!(d.raw().expect("raw").get_str("name").expect("name"), "bob");
        }
        // Missing field indexes as null: bob is found under age = null.
        let mut null = Vec::new();
        slate_core::value::encode_value(bson::RawBsonRef::Null, &mut null);
        let hits: Vec<_> = people
            .index_scan(&part, "age", Some((&null, true)), Some((&null, true)))
            .expect("scan")
            .collect::<Result<_, _>>()
            .expect("keys");
        assert_eq!(hits.len(), 1);
        drop(people);
        drop(read);

        let mut txn = db.begin_write().expect("txn");
        assert!(txn
            .replace(
                "people",
                &part,
                &Bson::Int32(7),
                doc! { "name": "bob", "age": 40, "tags": ["z"] }
            )
            .expect("replace"));
        assert!(!txn
            .replace("people", &part, &Bson::Int32(99), doc! { "name": "nobody" })
            .expect("replace"));
        let err = txn
            .replace("people", &part, &Bson::Int32(7), doc! { "_id": 8, "name": "bob" })
            .unwrap_err();
        assert!(err.to_string().contains("cannot change _id"), "{err}");
        assert!(txn.delete("people", &part, &id).expect("delete"));
        assert!(!txn.delete("people", &part, &id).expect("delete twice"));
        txn.commit().expect("commit");
        integrity(&db, "people");
        let read = db.read();
        let people = read.collection("people").expect("collection");
        assert_eq!(people.count(&part).expect("count"), 2);
        assert!(people.is_multikey("tags").expect("multikey"));
        assert!(!people.is_multikey("age").expect("multikey"));
    }
}

#[test]
fn a_duplicate_id_fails_the_whole_transaction_and_writes_nothing() {
    for (db, _dir) in databases() {
        db.create_collection(CollectionConfig::new("c").index("k"))
            .expect("create");
        let before = db.read().version();
        let result = (|| -> Result<(), Error> {
            let mut txn = db.begin_write()?;
            txn.insert("c", doc! { "_id": 1, "k": 1 })?;
            txn.insert("c", doc! { "_id": 2, "k": 2 })?;
            txn.insert("c", doc! { "_id": 1i64, "k": 3 })?;
            txn.commit()?;
            Ok(())
        })();
        match result {
            Err(Error::DuplicateId { collection, id }) => {
                assert_eq!(collection, "c");
                assert_eq!(id, "1");
            }
            other => panic!("expected DuplicateId, got {other:?}"),
        }
        assert_eq!(db.read().version(), before, "nothing was committed");
        assert_eq!(committed_count(&db, "c"), 0);
        integrity(&db, "c");
    }
}

#[test]
fn bad_ids_documents_and_collections_are_refused_with_names() {
    let (db, _dir) = databases().remove(0);
    db.create_collection(CollectionConfig::new("c")).expect("create");
    assert!(matches!(
        db.create_collection(CollectionConfig::new("c")),
        Err(Error::CollectionExists { .. })
    ));
    let mut txn = db.begin_write().expect("txn");
    let err = txn.insert("c", doc! { "_id": 1.5 }).unwrap_err();
    assert!(matches!(err, Error::InvalidId { .. }), "{err}");
    assert!(err.to_string().contains("double"), "{err}");
    let err = txn.insert("nope", doc! { "_id": 1 }).unwrap_err();
    assert!(
        matches!(err, Error::UnknownCollection { ref name } if name == "nope"),
        "{err}"
    );
    drop(txn);
    assert!(matches!(
        db.drop_collection("nope"),
        Err(Error::UnknownCollection { .. })
    ));
    assert!(matches!(
        db.create_collection(CollectionConfig::new("__sys")),
        Err(Error::InvalidCollectionName { .. })
    ));
}

#[test]
fn vectors_are_validated_stored_apart_and_never_half_written() {
    for (db, _dir) in databases() {
        db.create_collection(CollectionConfig::new("v").vector("emb", 3, Metric::L2))
            .expect("create");
        let mut txn = db.begin_write().expect("txn");
        txn.insert("v", doc! { "_id": 1, "emb": [1.0, 2.0, 3.0] })
            .expect("array of numbers");
        txn.insert("v", doc! { "_id": 2, "emb": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: [1f32, 0.0, 0.0].iter().flat_map(|x| x.to_le_bytes()).collect() } }).expect("binary f32");
        txn.insert("v", doc! { "_id": 3, "other": 1 }).expect("no vector");
        // BSON vectors (subtype 9), as MongoDB's drivers write embeddings.
        txn.insert(
            "v",
            doc! { "_id": 8, "emb": Vector::Float32(vec![0.5, -1.0, 2.0]) },
        )
        .expect("float32 BSON vector");
        txn.insert("v", doc! { "_id": 9, "emb": Vector::Int8(vec![-128, 0, 127]) })
            .expect("int8 BSON vector");
        let binary = |subtype, bytes: Vec<u8>| bson::Binary { subtype, bytes };
        let f32_bytes: Vec<u8> = [1f32, 2.0, 3.0].iter().flat_map(|x| x.to_le_bytes()).collect();
        for (bad, why) in [
            (doc! { "_id": 4, "emb": [1.0, 2.0] }, "expected 3"),
            (doc! { "_id": 5, "emb": [1.0, f64::NAN, 3.0] }, "not a finite"),
            // Finite, but past f32: named as such, not as infinite.
            (
                doc! { "_id": 14, "emb": [1e39, 0.0, 0.0] },
                "beyond the range of f32",
            ),
            (doc! { "_id": 6, "emb": [1.0, "x", 3.0] }, "not a number"),
            (doc! { "_id": 7, "emb": "nope" }, "neither"),
            (
                doc! { "_id": 10, "emb": Vector::Float32(vec![1.0, 2.0]) },
                "expected 3",
            ),
            (
                doc! { "_id": 11, "emb": Vector::PackedBit(PackedBitVector::new(vec![0b1010_0000], 5).expect("bits")) },
                "packed-bit",
            ),
            // Twelve bytes would be three f32s: refused for the subtype.
            (
                doc! { "_id": 12, "emb": binary(BinarySubtype::Md5, f32_bytes.clone()) },
                "subtype 0x05",
            ),
            // A float32 BSON vector whose payload is not whole f32s.
            (
                doc! { "_id": 13, "emb": binary(BinarySubtype::Vector, vec![0x27, 0, 1, 2, 3, 4, 5]) },
                "malformed BSON vector",
            ),
        ] {
            let err = txn.insert("v", bad).unwrap_err();
            let msg = err.to_string();
            assert!(matches!(err, Error::InvalidVector { .. }), "{msg}");
            assert!(msg.contains("emb") && msg.contains(why), "{msg}");
        }
        txn.commit().expect("commit");
        let read = db.read();
        let v = read.collection("v").expect("v");
        assert_eq!(
            v.count(&Part::none()).expect("count"),
            5,
            "refused documents were not written"
        );
        for (id, want) in [(8, [0.5, -1.0, 2.0]), (9, [-128.0, 0.0, 127.0])] {
            let d = v
                .get_by_id(&Part::none(), &Bson::Int32(id))
                .expect("get")
                .expect("found");
            let full = v.materialize_full(&d).expect("materialize");
            let got: Vec<f64> = full
                .get_array("emb")
                .expect("emb")
                .iter()
                .filter_map(Bson::as_f64)
                .collect();
            assert_eq!(got, want, "BSON vector {id} read back as its values");
        }
        let d = v
            .get_by_id(&Part::none(), &Bson::Int32(1))
            .expect("get")
            .expect("found");
        assert!(
            d.raw().expect("raw").get("emb").expect("raw").is_none(),
            "the vector is not inside the stored document"
        );
        let full = v.materialize_full(&d).expect("materialize");
        assert_eq!(full.get_array("emb").expect("emb").len(), 3);
        let view = v.vectors("emb").expect("view");
        assert_eq!(view.len(), 4);
        assert!(matches!(v.vectors("nope"), Err(Error::UnknownVectorField { .. })));
    }
}

/// Under cosine a vector too short for f32 to normalise is refused (its
/// distances would not be exact); the zero vector is kept.
#[test]
fn cosine_fields_refuse_vectors_too_short_to_normalise() {
    for (db, _dir) in databases() {
        db.create_collection(CollectionConfig::new("v").vector("emb", 2, Metric::Cosine))
            .expect("create");
        let mut txn = db.begin_write().expect("txn");
        let err = txn
            .insert("v", doc! { "_id": 1, "emb": [-1e-23, 0.0] })
            .unwrap_err();
        assert!(matches!(err, Error::InvalidVector { .. }), "{err}");
        assert!(err.to_string().contains("norm"), "{err}");
        txn.insert("v", doc! { "_id": 2, "emb": [0.0, 0.0] })
            .expect("zero vector");
        txn.insert("v", doc! { "_id": 3, "emb": [1e-10, 0.0] })
            .expect("short but normal");
        txn.commit().expect("commit");
        let read = db.read();
        assert_eq!(
            read.collection("v")
                .expect("v")
                .vectors("emb")
                .expect("view")
                .len(),
            2
        );
    }
}

#[test]
fn partitions_keep_each_tenants_keys_apart() {
    for (db, _dir) in databases() {
        db.create_collection(CollectionConfig::new("t").index("status").partition_key("tenant"))
            .expect("create");
        let mut txn = db.begin_write().expect("txn");
        for tenant in ["acme", "bolt", "core"] {
            for i in 0..10 {
                txn.insert(
                    "t",
                    doc! { "_id": i, "tenant": tenant, "status": if i % 2 == 0 { "a" } else { "b" } },
                )
                .expect("insert");
            }
        }
        let err = txn.insert("t", doc! { "_id": 99 }).unwrap_err();
        assert!(err.to_string().contains("partition key"), "{err}");
        txn.commit().expect("commit");
        integrity(&db, "t");
        let read = db.read();
        let t = read.collection("t").expect("t");
        assert!(
            t.part(None).is_err(),
            "a partitioned collection needs a partition named"
        );
        let bolt = t.part(Some(&Bson::String("bolt".into()))).expect("part");
        assert_eq!(t.count(&bolt).expect("count"), 10);
        let docs: Vec<Document> = t
            .scan(&bolt)
            .expect("scan")
            .map(|d| Document::try_from(d.expect("doc").raw().expect("raw")).expect("doc"))
            .collect();
        assert_eq!(docs.len(), 10);
        assert!(docs.iter().all(|d| d.get_str("tenant") == Ok("bolt")));
        // The same _id lives in each partition separately.
        assert!(t.get_by_id(&bolt, &Bson::Int32(3)).expect("get").is_some());
        let nobody = t.part(Some(&Bson::String("zed".into()))).expect("part");
        assert_eq!(t.scan(&nobody).expect("scan").count(), 0);
    }
}

#[test]
fn create_index_over_existing_documents_and_drop_it() {
    for (db, _dir) in databases() {
        db.create_collection(CollectionConfig::new("c")).expect("create");
        let mut txn = db.begin_write().expect("txn");
        for i in 0..50 {
            txn.insert("c", doc! { "_id": i, "n": i % 7, "arr": [i, i + 1] })
                .expect("insert");
        }
        txn.commit().expect("commit");
        let mut txn = db.begin_write().expect("txn");
        txn.create_index("c", "n").expect("index n");
        txn.create_index("c", "arr").expect("index arr");
        assert!(matches!(
            txn.create_index("c", "n"),
            Err(Error::IndexExists { .. })
        ));
        txn.commit().expect("commit");
        integrity(&db, "c");
        let mut txn = db.begin_write().expect("txn");
        txn.drop_index("c", "arr").expect("drop");
        assert!(matches!(
            txn.drop_index("c", "arr"),
            Err(Error::UnknownIndex { .. })
        ));
        txn.commit().expect("commit");
        integrity(&db, "c");
        assert_eq!(
            db.collection_config("c").expect("config").indexes,
            vec!["n".to_owned()]
        );
    }
}

/// Readers skip the catalog read when no catalog change could lie between
/// their snapshot and one that read it already: each still sees the
/// configuration of its own snapshot across index changes, a drop and a
/// re-creation, on both backends.
#[test]
fn every_reader_sees_its_own_snapshots_configuration() {
    for (db, _dir) in databases() {
        db.create_collection(CollectionConfig::new("c")).expect("create");
        let indexes = |txn: &slate_core::ReadTxn<'_>| txn.collection("c").map(|c| c.config().indexes.clone());
        let before = db.read();
        assert_eq!(indexes(&before).expect("read"), Vec::<String>::new());
        assert_eq!(indexes(&db.read()).expect("read"), Vec::<String>::new());

        let mut txn = db.begin_write().expect("txn");
        txn.create_index("c", "a").expect("index");
        txn.commit().expect("commit");
        let with_a = db.read();
        assert_eq!(indexes(&with_a).expect("read"), ["a"]);
        assert_eq!(indexes(&db.read()).expect("read"), ["a"]);
        // Read after the newer readers, the older snapshot's own.
        assert_eq!(indexes(&before).expect("read"), Vec::<String>::new());
        assert_eq!(before.config("c").expect("config").indexes, Vec::<String>::new());

        // A transaction that fails changes nothing a reader sees.
        let mut txn = db.begin_write().expect("txn");
        txn.create_index("c", "b").expect("index");
        txn.rollback();
        assert_eq!(indexes(&db.read()).expect("read"), ["a"]);

        db.drop_collection("c").expect("drop");
        assert!(matches!(
            indexes(&db.read()),
            Err(Error::UnknownCollection { .. })
        ));
        assert_eq!(indexes(&with_a).expect("read"), ["a"]);

        db.create_collection(CollectionConfig::new("c").index("z"))
            .expect("recreate");
        assert_eq!(indexes(&db.read()).expect("read"), ["z"]);
        assert_eq!(indexes(&with_a).expect("read"), ["a"]);
        assert_eq!(indexes(&db.read_documents()).expect("read"), ["z"]);
    }

    // Two databases over one store: each reads the other's catalog changes.
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let (a, b) = (
        Database::open(Arc::clone(&store)).expect("a"),
        Database::open(store).expect("b"),
    );
    a.create_collection(CollectionConfig::new("c")).expect("create");
    let indexes = |db: &Database| db.read().collection("c").map(|c| c.config().indexes.clone());
    assert_eq!(indexes(&b).expect("read"), Vec::<String>::new());
    let mut txn = a.begin_write().expect("txn");
    txn.create_index("c", "a").expect("index");
    txn.commit().expect("commit");
    assert_eq!(indexes(&b).expect("read"), ["a"]);
    b.drop_collection("c").expect("drop");
    assert!(matches!(indexes(&a), Err(Error::UnknownCollection { .. })));
}

#[test]
fn collections_and_vectors_survive_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let db = Database::open(Arc::new(RocksStore::open(dir.path()).expect("open"))).expect("db");
        db.create_collection(CollectionConfig::new("v").index("k").vector("e", 2, Metric::Dot))
            .expect("create");
        let mut txn = db.begin_write().expect("txn");
        for i in 0..100 {
            txn.insert("v", doc! { "_id": i, "k": i % 3, "e": [i as f64, 1.0] })
                .expect("insert");
        }
        txn.commit().expect("commit");
        let mut txn = db.begin_write().expect("txn");
        txn.delete("v", &Part::none(), &Bson::Int32(5)).expect("delete");
        txn.commit().expect("commit");
    }
    let db = Database::open(Arc::new(RocksStore::open(dir.path()).expect("reopen"))).expect("db");
    assert_eq!(db.list_collections().expect("list"), vec!["v".to_owned()]);
    let read = db.read();
    let v = read.collection("v").expect("v");
    assert_eq!(v.count(&Part::none()).expect("count"), 99);
    assert_eq!(
        v.vectors("e").expect("view").len(),
        99,
        "the cache is rebuilt from the v: keys"
    );
    integrity(&db, "v");
}

/// A collection column family the catalog does not name (a drop whose
/// commit was made, then a crash before its column family went) is dropped
/// at the next open: its bytes are not kept forever. The catalog's
/// collections are untouched.
#[test]
fn a_column_family_no_collection_names_is_dropped_at_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let db = Database::open(Arc::new(RocksStore::open(dir.path()).expect("open"))).expect("db");
        db.create_collection(CollectionConfig::new("kept"))
            .expect("create");
        let mut txn = db.begin_write().expect("txn");
        txn.insert("kept", doc! { "_id": 1 }).expect("insert");
        txn.commit().expect("commit");
        // As a drop cut short would leave it: a collection's column family
        // with data in it, and no catalog entry.
        db.store().create_cf("c.ghost").expect("cf");
        let batch = slate_core::store::Batch {
            ops: vec![(
                "c.ghost".to_owned(),
                vec![slate_core::store::Op::Put {
                    key: b"d:x".to_vec(),
                    value: b"bytes".to_vec().into(),
                }],
            )],
        };
        db.store().apply(batch, &mut |_| {}).expect("write");
        assert!(db.store().list_cfs().contains(&"c.ghost".to_owned()));
    }
    let db = Database::open(Arc::new(RocksStore::open(dir.path()).expect("reopen"))).expect("db");
    assert!(!db.store().list_cfs().contains(&"c.ghost".to_owned()));
    assert_eq!(db.list_collections().expect("list"), vec!["kept".to_owned()]);
    assert_eq!(
        db.read()
            .collection("kept")
            .expect("kept")
            .count(&Part::none())
            .expect("count"),
        1
    );
}

#[derive(Debug, Clone)]
enum Op {
    Insert(i32, i32, Vec<i32>),
    Replace(i32, i32),
    Delete(i32),
    Commit,
    Rollback,
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        4 => (0..20i32, 0..5i32, proptest::collection::vec(0..4i32, 0..3)).prop_map(|(i, k, a)| Op::Insert(i, k, a)),
        2 => (0..20i32, 0..5i32).prop_map(|(i, k)| Op::Replace(i, k)),
        2 => (0..20i32).prop_map(Op::Delete),
        2 => Just(Op::Commit),
        1 => Just(Op::Rollback),
    ];
    proptest::collection::vec(op, 1..40)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    #[test]
    fn index_integrity_holds_after_random_write_sequences(ops in ops()) {
        for (db, _dir) in databases() {
            db.create_collection(CollectionConfig::new("r").index("k").index("a").index("m.x")).expect("create");
            let mut model = std::collections::BTreeMap::new();
            let mut committed = model.clone();
            let mut txn = Some(db.begin_write().expect("txn"));
            for op in &ops {
                let t = txn.as_mut().expect("txn");
                match op {
                    Op::Insert(i, k, a) => {
                        let r = t.insert("r", doc! { "_id": *i, "k": *k, "a": a.clone(), "m": { "x": *k % 2 } });
                        prop_assert_eq!(r.is_ok(), !model.contains_key(i));
                        model.entry(*i).or_insert(*k);
                    }
                    Op::Replace(i, k) => {
                        let r = t.replace("r", &Part::none(), &Bson::Int32(*i), doc! { "k": *k }).expect("replace");
                        prop_assert_eq!(r, model.contains_key(i));
                        if r { model.insert(*i, *k); }
                    }
                    Op::Delete(i) => {
                        let r = t.delete("r", &Part::none(), &Bson::Int32(*i)).expect("delete");
                        prop_assert_eq!(r, model.remove(i).is_some());
                    }
                    Op::Commit => {
                        txn.take().expect("txn").commit().expect("commit");
                        committed = model.clone();
                        txn = Some(db.begin_write().expect("txn"));
                    }
                    Op::Rollback => {
                        txn.take().expect("txn").rollback();
                        model = committed.clone();
                        txn = Some(db.begin_write().expect("txn"));
                    }
                }
            }
            drop(txn);
            integrity(&db, "r");
            let read = db.read();
            let r = read.collection("r").expect("r");
            prop_assert_eq!(r.count(&Part::none()).expect("count"), committed.len() as u64);
        }
    }
}

#[test]
fn insert_many_fails_with_the_error_a_loop_of_single_inserts_meets_first() {
    for (db, _dir) in databases() {
        db.create_collection(CollectionConfig::new("c").index("k"))
            .expect("create");
        let mut txn = db.begin_write().expect("txn");
        txn.insert("c", doc! { "_id": 100, "k": 0 }).expect("insert");
        let ids = |ids: &[Bson]| -> Vec<Document> {
            ids.iter().map(|id| doc! { "_id": id.clone(), "k": 1 }).collect()
        };
        let cases: Vec<(Vec<Document>, &str)> = vec![
            // Unsorted ids: 3 repeats at position 3, before 9 repeats at 5.
            (
                ids(&[5.into(), 3.into(), 9.into(), 3i64.into(), 7.into(), 9.into()]),
                "duplicate _id 3",
            ),
            // A bad id at position 2 comes before the repeat at position 3.
            (ids(&[1.into(), 2.into(), Bson::Array(vec![]), 1.into()]), "_id"),
            // The id taken by the transaction's own earlier write, at 1,
            // before a repeat inside the batch at 3.
            (
                ids(&[1.into(), 100.into(), 2.into(), 1.into()]),
                "duplicate _id 100",
            ),
        ];
        for (batch, expected) in cases {
            let err = txn.insert_many_within("c", None, batch).expect_err("refused");
            let message = err.to_string();
            assert!(message.contains(expected), "{message:?} lacks {expected:?}");
            if expected == "_id" {
                assert!(matches!(err, Error::InvalidId { .. }), "{err:?}");
            } else {
                assert!(matches!(err, Error::DuplicateId { .. }), "{err:?}");
            }
        }
        for id in [1, 2, 3, 5, 7, 9] {
            assert_eq!(
                txn.get("c", &Part::none(), &id.into()).expect("get"),
                None,
                "{id} written"
            );
        }
        txn.commit().expect("commit");
        assert_eq!(committed_count(&db, "c"), 1);
        integrity(&db, "c");
    }
}

#[test]
fn a_bulk_insert_merges_with_the_transactions_earlier_writes() {
    for (db, _dir) in databases() {
        db.create_collection(CollectionConfig::new("c").index("k"))
            .expect("create");
        let mut txn = db.begin_write().expect("txn");
        // Odd ids one at a time, then the even ids (a run long enough to be
        // sorted and merged as one) around them, in descending order.
        for id in (1..400).step_by(2) {
            txn.insert("c", doc! { "_id": id, "k": id % 7 }).expect("insert");
        }
        txn.delete("c", &Part::none(), &Bson::Int32(3)).expect("delete");
        let evens: Vec<Document> = (0..400)
            .step_by(2)
            .rev()
            .map(|id| doc! { "_id": id, "k": id % 7 })
            .collect();
        txn.insert_many_within("c", None, evens).expect("insert_many");
        // The deleted id comes back in a bulk insert, and a replaced
        // document keeps its new version.
        txn.insert_many_within(
            "c",
            None,
            (0..100)
                .map(|i| doc! { "_id": 1000 + i, "k": 0 })
                .chain([doc! { "_id": 3, "k": 100 }])
                .collect(),
        )
        .expect("insert_many");
        txn.replace("c", &Part::none(), &Bson::Int32(4), doc! { "_id": 4, "k": 200 })
            .expect("replace");
        for id in 0..400 {
            let got = txn
                .get("c", &Part::none(), &Bson::Int32(id))
                .expect("get")
                .expect("present");
            let k = match id {
                3 => 100,
                4 => 200,
                _ => id % 7,
            };
            assert_eq!(got.get_i32("k").expect("k"), k, "{id}");
        }
        txn.commit().expect("commit");
        assert_eq!(committed_count(&db, "c"), 500);
        integrity(&db, "c");
    }
}

/// A MemoryStore whose point reads of one key fail, as a disk read might
/// (the key can be changed, so that a test can write first).
#[derive(Debug)]
struct FailingKey {
    store: MemoryStore,
    key: std::sync::Mutex<Vec<u8>>,
}

impl FailingKey {
    fn new(key: Vec<u8>) -> Self {
        Self {
            store: MemoryStore::new(),
            key: std::sync::Mutex::new(key),
        }
    }
}

struct FailingSnapshot<'a> {
    snap: Arc<dyn Snapshot + 'a>,
    key: Vec<u8>,
}

impl Snapshot for FailingSnapshot<'_> {
    fn version(&self) -> u64 {
        self.snap.version()
    }
    fn get(&self, cf: &str, key: &[u8]) -> slate_core::Result<Option<Cow<'_, [u8]>>> {
        if key == self.key {
            return Err(Error::Corrupt {
                what: "injected read failure".into(),
            });
        }
        self.snap.get(cf, key)
    }
    fn range(&self, cf: &str, range: &KeyRange, dir: Direction) -> slate_core::Result<EntryIter<'_>> {
        self.snap.range(cf, range, dir)
    }
    fn has_cf(&self, cf: &str) -> bool {
        self.snap.has_cf(cf)
    }
}

impl Store for FailingKey {
    fn snapshot(&self) -> Arc<dyn Snapshot + '_> {
        Arc::new(FailingSnapshot {
            snap: self.store.snapshot(),
            key: self
                .key
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone(),
        })
    }
    fn create_cf(&self, name: &str) -> slate_core::Result<()> {
        self.store.create_cf(name)
    }
    fn drop_cf(&self, name: &str) -> slate_core::Result<()> {
        self.store.drop_cf(name)
    }
    fn list_cfs(&self) -> Vec<String> {
        self.store.list_cfs()
    }
    fn write_lock(&self) -> slate_core::Result<WriteGuard<'_>> {
        self.store.write_lock()
    }
    fn apply(&self, batch: Batch, before_publish: &mut dyn FnMut(u64)) -> slate_core::Result<u64> {
        self.store.apply(batch, before_publish)
    }
}

#[test]
fn a_bulk_insert_that_fails_reading_the_store_stages_nothing() {
    // The read of the multikey marker of `tags` fails: the second document
    // holds an array there, so the bulk insert reads the marker after the
    // first document is prepared.
    let store = FailingKey::new(slate_core::keys::multikey_key("tags"));
    let db = Database::open(Arc::new(store)).expect("db");
    db.create_collection(
        CollectionConfig::new("c")
            .index("tags")
            .vector("e", 2, Metric::L2),
    )
    .expect("create");
    let mut txn = db.begin_write().expect("txn");
    let err = txn
        .insert_many_within(
            "c",
            None,
            vec![
                doc! { "_id": 1, "tags": "a", "e": [1.0, 0.0] },
                doc! { "_id": 2, "tags": ["b", "c"], "e": [0.0, 1.0] },
            ],
        )
        .unwrap_err();
    assert!(err.to_string().contains("injected"), "{err}");
    // The transaction goes on after the error, as a caller may let it.
    txn.insert("c", doc! { "_id": 3, "tags": "d", "e": [1.0, 1.0] })
        .expect("insert");
    txn.commit().expect("commit");
    let read = db.read();
    let c = read.collection("c").expect("c");
    assert_eq!(c.count(&Part::none()).expect("count"), 1);
    assert_eq!(
        c.vectors("e").expect("view").len(),
        1,
        "no vector of a document the failed call did not write"
    );
    integrity(&db, "c");
}

/// The key of the document with int32 `_id` `id` in an unpartitioned
/// collection.
fn key(id: i32) -> Vec<u8> {
    let id = slate_core::value::encode_id(&Bson::Int32(id)).expect("id");
    slate_core::keys::doc_key(b"", &id)
}

/// A delete of many documents reads them all before it deletes any: one
/// that cannot be read leaves the transaction as it was. (Deleting one key
/// at a time, as the facade's `delete_many` did, left the documents before
/// it deleted in a transaction the caller could still commit.)
#[test]
fn a_delete_of_many_that_fails_reading_a_document_deletes_none() {
    let store = Arc::new(FailingKey::new(Vec::new()));
    let db = Database::open(Arc::clone(&store) as Arc<dyn Store>).expect("db");
    db.create_collection(CollectionConfig::new("c").index("k").vector("e", 2, Metric::L2))
        .expect("create");
    let mut txn = db.begin_write().expect("txn");
    for id in 1..=4 {
        txn.insert("c", doc! { "_id": id, "k": id % 2, "e": [f64::from(id), 0.0] })
            .expect("insert");
    }
    txn.commit().expect("commit");
    *store.key.lock().expect("lock") = key(3);

    let mut txn = db.begin_write().expect("txn");
    let err = txn
        .delete_keys("c", &[key(1), key(2), key(3), key(4)])
        .expect_err("document 3 cannot be read");
    assert!(err.to_string().contains("injected"), "{err}");
    // The transaction goes on after the error, as a caller may let it; a
    // key named twice is one document.
    assert_eq!(txn.delete_keys("c", &[key(4), key(4)]).expect("delete"), 1);
    txn.commit().expect("commit");
    let read = db.read();
    let c = read.collection("c").expect("c");
    assert_eq!(c.count(&Part::none()).expect("count"), 3);
    assert_eq!(c.vectors("e").expect("view").len(), 3);
    for id in 1..=2 {
        assert!(
            c.get_by_id(&Part::none(), &Bson::Int32(id))
                .expect("get")
                .is_some(),
            "{id} kept"
        );
    }
    *store.key.lock().expect("lock") = Vec::new();
    integrity(&db, "c");
}

/// Replacements staged together are written together or not at all: the
/// only reads a write makes (the collection's markers) all come first. A
/// second document's array at an indexed field needs that field's
/// multikey marker read; when it fails, the first document, which needed
/// none, is not written either.
#[test]
fn staged_replacements_that_fail_reading_a_marker_write_none() {
    let store = Arc::new(FailingKey::new(Vec::new()));
    let db = Database::open(Arc::clone(&store) as Arc<dyn Store>).expect("db");
    db.create_collection(CollectionConfig::new("c").index("tags"))
        .expect("create");
    let mut txn = db.begin_write().expect("txn");
    for id in 1..=2 {
        txn.insert("c", doc! { "_id": id, "tags": "a" }).expect("insert");
    }
    txn.commit().expect("commit");
    *store.key.lock().expect("lock") = slate_core::keys::multikey_key("tags");

    let mut txn = db.begin_write().expect("txn");
    let staged: Vec<_> = [
        (1, Bson::from("b")),
        (2, Bson::Array(vec!["c".into(), "d".into()])),
    ]
    .into_iter()
    .filter_map(|(id, tags)| {
        txn.stage_replace("c", &key(id), doc! { "_id": id, "tags": tags })
            .expect("stage")
    })
    .collect();
    assert_eq!(staged.len(), 2);
    let err = txn.write_staged(staged).expect_err("the marker cannot be read");
    assert!(err.to_string().contains("injected"), "{err}");
    txn.commit().expect("commit");
    *store.key.lock().expect("lock") = Vec::new();
    let read = db.read();
    let c = read.collection("c").expect("c");
    for id in 1..=2 {
        let raw = c
            .get_by_id(&Part::none(), &Bson::Int32(id))
            .expect("get")
            .expect("there");
        assert_eq!(
            raw.raw().expect("raw").get_str("tags").expect("tags"),
            "a",
            "{id} unchanged"
        );
    }
    integrity(&db, "c");
}

#[test]
fn index_counts_agree_with_the_documents_up_to_their_cap() {
    for (db, _dir) in databases() {
        db.create_collection(CollectionConfig::new("c").index("k"))
            .expect("create");
        // 20,000 documents, ids of three types; k = 0, 1, 2 for 50%, 30%, 20%.
        let docs: Vec<Document> = (0..20_000)
            .map(|i| {
                let id = match i % 3 {
                    0 => Bson::Int32(i * 5 - 30_000),
                    1 => Bson::String(format!("s{i:06}")),
                    _ => Bson::ObjectId(bson::oid::ObjectId::from_bytes(
                        [&[0x65, 0x4f][..], &(i as u16).to_be_bytes(), &[0; 8]]
                            .concat()
                            .try_into()
                            .expect("12"),
                    )),
                };
                let k = [0, 0, 0, 0, 0, 1, 1, 1, 2, 2][(i * 7 % 10) as usize];
                doc! { "_id": id, "k": k }
            })
            .collect();
        let mut txn = db.begin_write().expect("txn");
        txn.insert_many_within("c", None, docs).expect("insert");
        let check = |read: &slate_core::CollectionRead<'_>, counts: [usize; 3], what: &str| {
            for (k, &n) in counts.iter().enumerate() {
                let v = slate_core::value::encode_key_value(&Bson::Int32(k as i32)).expect("value");
                for cap in [10, 4095, 4096, 4097, 5000, 9000, 10_000, 20_000, usize::MAX] {
                    let got = read
                        .index_count(&Part::none(), "k", Some((&v, true)), Some((&v, true)), cap)
                        .expect("count");
                    assert_eq!(got, n.min(cap), "{what}: k = {k}, cap {cap}");
                }
            }
        };
        // Inside the transaction (its own writes), then committed.
        check(
            &txn.collection("c").expect("c"),
            [10_000, 6_000, 4_000],
            "transaction",
        );
        txn.commit().expect("commit");
        check(
            &db.read().collection("c").expect("c"),
            [10_000, 6_000, 4_000],
            "committed",
        );

        // In a partition: its keys start with the partition's value.
        db.create_collection(CollectionConfig::new("p").index("k").partition_key("t"))
            .expect("create");
        let mut txn = db.begin_write().expect("txn");
        let docs = (0..12_000).map(|i| {
            let t = if i % 2 == 0 { "x" } else { "y" };
            doc! { "_id": i, "t": t, "k": i % 3 }
        });
        txn.insert_many_within("p", None, docs.collect()).expect("insert");
        txn.commit().expect("commit");
        let read = db.read();
        let p = read.collection("p").expect("p");
        let v = slate_core::value::encode_key_value(&Bson::Int32(1)).expect("value");
        let y = Part::of(&Bson::from("y")).expect("part");
        for cap in [4096, 5000, usize::MAX] {
            let got = p
                .index_count(&y, "k", Some((&v, true)), Some((&v, true)), cap)
                .expect("count");
            assert_eq!(got, 2000.min(cap), "partition y, k = 1, cap {cap}");
        }
    }
}

/// A MemoryStore that runs `before` ahead of each column family drop, which
/// may fail it: a slow disk (a pause widens the moment between a
/// collection's removal from the catalog and the drop of its storage), or
/// one that refuses.
#[derive(Debug)]
struct OnDrop {
    store: MemoryStore,
    before: fn(&str) -> slate_core::Result<()>,
}

impl OnDrop {
    fn new(before: fn(&str) -> slate_core::Result<()>) -> Self {
        OnDrop {
            store: MemoryStore::new(),
            before,
        }
    }
}

impl Store for OnDrop {
    fn snapshot(&self) -> Arc<dyn Snapshot + '_> {
        self.store.snapshot()
    }
    fn create_cf(&self, name: &str) -> slate_core::Result<()> {
        self.store.create_cf(name)
    }
    fn drop_cf(&self, name: &str) -> slate_core::Result<()> {
        (self.before)(name)?;
        self.store.drop_cf(name)
    }
    fn list_cfs(&self) -> Vec<String> {
        self.store.list_cfs()
    }
    fn write_lock(&self) -> slate_core::Result<WriteGuard<'_>> {
        self.store.write_lock()
    }
    fn apply(&self, batch: Batch, before_publish: &mut dyn FnMut(u64)) -> slate_core::Result<u64> {
        self.store.apply(batch, before_publish)
    }
}

/// Dropping a collection while another thread creates one of the same name:
/// the new collection keeps its storage (the drop's column family goes
/// before the creator can make its own), and the drop succeeds.
#[test]
fn a_drop_racing_a_create_of_the_same_name_leaves_the_new_collection_whole() {
    let slow = |_: &str| {
        std::thread::sleep(std::time::Duration::from_millis(20));
        Ok(())
    };
    let db = Database::open(Arc::new(OnDrop::new(slow))).expect("db");
    db.create_collection(CollectionConfig::new("x")).expect("create");
    std::thread::scope(|s| {
        let dropper = s.spawn(|| db.drop_collection("x"));
        // Let the drop commit and reach the column family.
        std::thread::sleep(std::time::Duration::from_millis(5));
        loop {
            match db.create_collection(CollectionConfig::new("x")) {
                Ok(()) => break,
                Err(Error::CollectionExists { .. }) => std::thread::yield_now(),
                Err(e) => panic!("create: {e}"),
            }
        }
        dropper.join().expect("no panic").expect("the drop succeeds");
    });
    let mut txn = db.begin_write().expect("begin");
    txn.insert("x", doc! { "_id": 1 })
        .expect("the new collection takes writes");
    txn.commit().expect("commit");
    let read = db.read();
    assert!(read
        .collection("x")
        .expect("x")
        .get_by_id(&Part::none(), &Bson::Int32(1))
        .expect("get")
        .is_some());
}

/// Databases opened over one store share their vector caches: a vector
/// written through one is searched through the other, and a collection
/// dropped and created again through one is empty through the other.
#[test]
fn databases_over_one_store_share_their_vector_caches() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let a = Database::open(Arc::clone(&store)).expect("a");
    let b = Database::open(Arc::clone(&store)).expect("b");
    let config = || CollectionConfig::new("c").vector("v", 2, Metric::L2);
    a.create_collection(config()).expect("create through a");
    let mut txn = b.begin_write().expect("begin");
    txn.insert("c", doc! { "_id": 1, "v": [1.0, 0.0] })
        .expect("insert");
    txn.commit().expect("commit");
    let hits = |db: &Database| {
        let read = db.read();
        let view = read.collection("c").expect("c").vectors("v").expect("a cache");
        view.search(&[1.0, 0.0], 10, 1).expect("search").len()
    };
    assert_eq!((hits(&a), hits(&b)), (1, 1));
    b.drop_collection("c").expect("drop through b");
    b.create_collection(config()).expect("create again through b");
    assert_eq!((hits(&a), hits(&b)), (0, 0));
    // One opened while the others live takes their caches, loaded once.
    let mut txn = a.begin_write().expect("begin");
    txn.insert("c", doc! { "_id": 2, "v": [0.0, 1.0] })
        .expect("insert");
    txn.commit().expect("commit");
    let late = Database::open(Arc::clone(&store)).expect("late");
    assert_eq!((hits(&a), hits(&b), hits(&late)), (1, 1, 1));
}

/// `write_staged` refuses a document staged twice, writing none of the
/// batch; and a scope nesting past the limit is refused like a document.
#[test]
fn staged_replacements_are_written_once_each() {
    let db = Database::open(Arc::new(MemoryStore::new())).expect("db");
    db.create_collection(CollectionConfig::new("c").index("k"))
        .expect("create");
    let mut txn = db.begin_write().expect("begin");
    txn.insert("c", doc! { "_id": 1, "k": 1 }).expect("insert");
    txn.insert("c", doc! { "_id": 2, "k": 2 }).expect("insert");
    txn.commit().expect("commit");
    let mut txn = db.begin_write().expect("begin");
    let key = |txn: &slate_core::WriteTxn<'_>, id: i32| {
        let read = txn.collection("c").expect("c");
        let raw = read
            .get_by_id(&Part::none(), &Bson::Int32(id))
            .expect("get")
            .expect("there");
        raw.key.into_owned()
    };
    let (k1, k2) = (key(&txn, 1), key(&txn, 2));
    let a = txn
        .stage_replace("c", &k1, doc! { "_id": 1, "k": 10 })
        .expect("stage")
        .expect("there");
    let b = txn
        .stage_replace("c", &k2, doc! { "_id": 2, "k": 20 })
        .expect("stage")
        .expect("there");
    let again = txn
        .stage_replace("c", &k1, doc! { "_id": 1, "k": 11 })
        .expect("stage")
        .expect("there");
    let err = txn.write_staged(vec![a, b, again]).expect_err("staged twice");
    assert!(err.to_string().contains("staged twice"), "{err}");
    // An index created between staging and writing: the staged entries are
    // not that index's, so the write is refused.
    let c = txn
        .stage_replace("c", &k1, doc! { "_id": 1, "k": 10, "j": 1 })
        .expect("stage")
        .expect("there");
    txn.create_index("c", "j").expect("index");
    let err = txn.write_staged(vec![c]).expect_err("indexes changed");
    assert!(err.to_string().contains("indexes changed"), "{err}");
    let mut deep = Bson::Int32(1);
    for _ in 0..101 {
        deep = Bson::Document(doc! { "n": deep });
    }
    let scoped = bson::JavaScriptCodeWithScope {
        code: "f()".into(),
        scope: doc! { "d": deep },
    };
    let err = txn
        .insert("c", doc! { "_id": 3, "code": scoped })
        .expect_err("nested past the limit in a scope");
    assert!(err.to_string().contains("nested more than 100"), "{err}");
    txn.commit().expect("commit");
    let read = db.read();
    let c = read.collection("c").expect("c");
    for (id, k) in [(1, 1), (2, 2)] {
        let raw = c
            .get_by_id(&Part::none(), &Bson::Int32(id))
            .expect("get")
            .expect("there");
        assert_eq!(raw.raw().expect("raw").get_i32("k").expect("k"), k, "unchanged");
    }
    assert!(c
        .get_by_id(&Part::none(), &Bson::Int32(3))
        .expect("get")
        .is_none());
    drop(c);
    drop(read);
    // A write between staging and writing: the staged copy of the stored
    // document may be stale (here it was deleted, and writing the copy
    // would bring it back without its count or index entry), so the write
    // is refused.
    let mut txn = db.begin_write().expect("begin");
    let d = txn
        .stage_replace("c", &k2, doc! { "_id": 2, "k": 2, "x": 1 })
        .expect("stage")
        .expect("there");
    assert!(txn.delete("c", &Part::none(), &Bson::Int32(2)).expect("delete"));
    let err = txn.write_staged(vec![d]).expect_err("wrote since");
    assert!(err.to_string().contains("wrote since it was staged"), "{err}");
    let e = txn
        .stage_replace("c", &k1, doc! { "_id": 1, "k": 1, "x": 1 })
        .expect("stage")
        .expect("there");
    assert_eq!(txn.write_staged(vec![e]).expect("nothing written since"), 1);
    txn.commit().expect("commit");
    integrity(&db, "c");
    // Staged in one transaction, handed to another: refused (the second's
    // write count proves nothing about the first's reads).
    let mut first = db.begin_write().expect("begin");
    let f = first
        .stage_replace("c", &k1, doc! { "_id": 1, "k": 7 })
        .expect("stage")
        .expect("there");
    drop(first);
    let mut second = db.begin_write().expect("begin");
    let err = second.write_staged(vec![f]).expect_err("another transaction's");
    assert!(err.to_string().contains("another transaction"), "{err}");
}

/// Refuses the first drop of each collection's column family (a disk
/// refusing to delete files); the cleanup at the next create succeeds.
fn refuse_once(name: &str) -> slate_core::Result<()> {
    static REFUSED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut refused = REFUSED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if name.starts_with("__") || refused.iter().any(|n| n == name) {
        return Ok(());
    }
    refused.push(name.to_owned());
    Err(Error::Corrupt {
        what: "injected: the column family cannot be dropped".into(),
    })
}

/// Once its catalog entry is gone the drop has happened: it succeeds even
/// when the storage cannot be freed, and a create of the same name starts
/// empty (it used to fail, and a retry said the collection was unknown).
#[test]
fn a_committed_drop_succeeds_when_its_storage_cannot_be_freed() {
    let db = Database::open(Arc::new(OnDrop::new(refuse_once))).expect("db");
    db.create_collection(CollectionConfig::new("stuck_drop"))
        .expect("create");
    let mut txn = db.begin_write().expect("begin");
    txn.insert("stuck_drop", doc! { "_id": 1 }).expect("insert");
    txn.commit().expect("commit");
    db.drop_collection("stuck_drop").expect("the drop is committed");
    assert!(!db
        .list_collections()
        .expect("list")
        .contains(&"stuck_drop".to_owned()));
    assert!(matches!(
        db.read().collection("stuck_drop"),
        Err(Error::UnknownCollection { .. })
    ));
    db.create_collection(CollectionConfig::new("stuck_drop"))
        .expect("re-create");
    let read = db.read();
    let c = read.collection("stuck_drop").expect("collection");
    assert_eq!(c.scan(&Part::none()).expect("scan").count(), 0, "starts empty");
}

#[test]
fn counts_read_inside_a_write_transaction_include_its_own_writes() {
    // A write transaction writes its count changes at commit; its reads
    // count them all along, per partition, and a rollback leaves the
    // committed counts as they were.
    for (db, _dir) in databases() {
        db.create_collection(CollectionConfig::new("c")).expect("create");
        db.create_collection(CollectionConfig::new("p").partition_key("t"))
            .expect("create");
        let mut txn = db.begin_write().expect("txn");
        for i in 0..5 {
            txn.insert("c", doc! { "_id": i }).expect("insert");
        }
        txn.commit().expect("commit");

        let mut txn = db.begin_write().expect("txn");
        let count = |txn: &slate_core::WriteTxn<'_>, name: &str, part: &Part| {
            txn.collection(name)
                .expect("collection")
                .count(part)
                .expect("count")
        };
        assert_eq!(count(&txn, "c", &Part::none()), 5);
        txn.insert("c", doc! { "_id": 10 }).expect("insert");
        txn.insert("c", doc! { "_id": 11 }).expect("insert");
        assert!(txn.delete("c", &Part::none(), &Bson::Int32(0)).expect("delete"));
        assert_eq!(count(&txn, "c", &Part::none()), 6);
        let (a, b) = (
            Part::of(&Bson::from("a")).expect("part"),
            Part::of(&Bson::from("b")).expect("part"),
        );
        txn.insert("p", doc! { "_id": 1, "t": "a" }).expect("insert");
        txn.insert("p", doc! { "_id": 2, "t": "a" }).expect("insert");
        txn.insert("p", doc! { "_id": 1, "t": "b" }).expect("insert");
        assert_eq!((count(&txn, "p", &a), count(&txn, "p", &b)), (2, 1));
        // Another collection's changes are not this one's.
        assert_eq!(count(&txn, "c", &Part::none()), 6);
        txn.rollback();
        assert_eq!(committed_count(&db, "c"), 5);
        assert_eq!(db.read().collection("p").expect("p").count(&a).expect("count"), 0);
    }
}

/// A replacement that keeps a document's vector and index entries keeps its
/// cache row: updating other fields adds no row (a second copy of the
/// vector until a compaction). A changed vector or indexed value (the row's
/// tags) still gets a new row, and searches see every change.
#[test]
fn replacing_other_fields_keeps_the_vector_row() {
    for (db, _dir) in databases() {
        db.create_collection(CollectionConfig::new("c").index("k").vector("e", 2, Metric::L2))
            .expect("create");
        let doc = |i: i32, k: i32, n: i32, x: f64| doc! { "_id": i, "k": k, "n": n, "e": [x, 0.0] };
        let mut txn = db.begin_write().expect("txn");
        for i in 0..20 {
            txn.insert("c", doc(i, i % 3, 0, f64::from(i))).expect("insert");
        }
        txn.commit().expect("commit");
        let rows = |db: &Database| {
            let read = db.read();
            let view = read.collection("c").expect("c").vectors("e").expect("cache");
            (view.row_count(), view.len())
        };
        let replace_all = |f: &dyn Fn(i32) -> Document| {
            let mut txn = db.begin_write().expect("txn");
            for i in 0..20 {
                assert!(txn
                    .replace("c", &Part::none(), &Bson::Int32(i), f(i))
                    .expect("replace"));
            }
            txn.commit().expect("commit");
        };
        assert_eq!(rows(&db), (20, 20));
        replace_all(&|i| doc(i, i % 3, 1, f64::from(i)));
        assert_eq!(rows(&db), (20, 20), "an unindexed field changed");
        replace_all(&|i| doc(i, (i + 1) % 3, 1, f64::from(i)));
        assert_eq!(rows(&db), (40, 20), "an indexed field changed: new tags");
        replace_all(&|i| doc(i, (i + 1) % 3, 1, f64::from(i) + 0.5));
        assert_eq!(rows(&db), (60, 20), "the vector changed");
        let read = db.read();
        let view = read.collection("c").expect("c").vectors("e").expect("cache");
        let hits = view.search(&[0.0, 0.0], 1, 1).expect("search");
        assert_eq!(hits[0].distance, 0.25, "the latest vector is searched");
        integrity(&db, "c");
    }
}

/// A transaction's byte limit: once its changes pass it, the next insert,
/// replacement or delete fails with `TransactionTooLarge` before changing
/// anything (the transaction can still commit what it holds); staged
/// replacements count until written.
#[test]
fn a_transaction_past_its_byte_limit_refuses_its_next_operation() {
    let db = Database::open(Arc::new(MemoryStore::new())).expect("db");
    let count = |db: &Database| {
        db.read()
            .collection("c")
            .expect("c")
            .count(&Part::none())
            .expect("count")
    };
    db.create_collection(CollectionConfig::new("c").index("k"))
        .expect("create");
    let pad = "x".repeat(1_000);
    let mut txn = db.begin_write().expect("begin");
    txn.limit_bytes(Some(10_000));
    let mut inserted = 0;
    let err = loop {
        match txn.insert("c", doc! { "_id": inserted, "k": 1, "pad": pad.clone() }) {
            Ok(_) => inserted += 1,
            Err(e) => break e,
        }
    };
    assert!(
        matches!(err, Error::TransactionTooLarge { limit: 10_000, .. }),
        "{err}"
    );
    assert!(
        (9..=11).contains(&inserted),
        "about 10 documents of 1 KB: {inserted}"
    );
    assert!(txn.held_bytes() > 10_000);
    let held = txn.held_bytes();
    assert!(matches!(
        txn.delete("c", &Part::none(), &Bson::Int32(0)),
        Err(Error::TransactionTooLarge { .. })
    ));
    assert_eq!(txn.held_bytes(), held, "the refused operations changed nothing");
    txn.commit().expect("what it holds commits");
    assert_eq!(count(&db), inserted as u64);
    integrity(&db, "c");

    // Staged replacements count: staging every document passes a limit
    // their writes alone would not.
    let mut txn = db.begin_write().expect("begin");
    txn.limit_bytes(Some(5_000));
    let keys: Vec<Vec<u8>> = {
        let read = txn.collection("c").expect("c");
        (0..inserted)
            .map(|i| {
                read.get_by_id(&Part::none(), &Bson::Int32(i))
                    .expect("get")
                    .expect("there")
                    .key
                    .into_owned()
            })
            .collect()
    };
    let mut staged = Vec::new();
    let err = keys
        .iter()
        .enumerate()
        .try_for_each(|(i, key)| {
            let doc = doc! { "_id": i as i32, "k": 2, "pad": pad.clone() };
            staged.extend(txn.stage_replace("c", key, doc)?);
            Ok::<_, Error>(())
        })
        .expect_err("staging passes the limit");
    assert!(matches!(err, Error::TransactionTooLarge { .. }), "{err}");
    assert!(staged.len() < keys.len());
    // Given back, the staged replacements stop counting: the transaction
    // goes on as if the update had not been tried.
    assert!(txn.held_bytes() > 5_000);
    txn.discard_staged(staged);
    assert_eq!(txn.held_bytes(), 0);
    assert!(txn
        .delete("c", &Part::none(), &Bson::Int32(0))
        .expect("room again"));
    drop(txn);
    assert_eq!(count(&db), inserted as u64);
}

/// A vector stored under older rules (here past today's component limit,
/// written straight to the store) loads at open, and its document's other
/// fields can still be replaced: a vector kept bit for bit is not checked
/// again. A new vector past the limit is still refused.
#[test]
fn a_vector_stored_under_older_rules_does_not_block_its_document() {
    let dir = tempfile::tempdir().expect("tempdir");
    // With an index, so that a change of the indexed field gives the
    // kept vector a new row (new tags) at commit.
    let config = || CollectionConfig::new("c").index("n").vector("e", 2, Metric::L2);
    {
        let store = RocksStore::builder(dir.path()).sync(false).open().expect("rocks");
        let db = Database::open(Arc::new(store)).expect("db");
        db.create_collection(config()).expect("create");
        let mut txn = db.begin_write().expect("begin");
        txn.insert("c", doc! { "_id": 1, "e": [1.0, 0.0], "n": 0 })
            .expect("insert");
        txn.commit().expect("commit");
    }
    {
        let store = RocksStore::builder(dir.path()).sync(false).open().expect("rocks");
        let id = slate_core::value::encode_id(&Bson::Int32(1)).expect("id");
        let key = slate_core::keys::vector_key(b"", "e", &id);
        let old: Vec<u8> = [1e20f32, 0.0].iter().flat_map(|x| x.to_le_bytes()).collect();
        let mut txn = slate_core::begin_write(&store).expect("raw write");
        txn.put("c.c", key, old).expect("put");
        txn.commit().expect("commit");
    }
    let store = RocksStore::builder(dir.path()).sync(false).open().expect("rocks");
    let db = Database::open(Arc::new(store)).expect("reopen loads it");
    let mut txn = db.begin_write().expect("begin");
    let stored = txn
        .get("c", &Part::none(), &Bson::Int32(1))
        .expect("get")
        .expect("there");
    let mut changed = stored.clone();
    changed.insert("n", 1);
    assert!(txn
        .replace("c", &Part::none(), &Bson::Int32(1), changed)
        .expect("replace other fields"));
    let mut moved = stored;
    moved.insert("e", vec![Bson::Double(2e20), Bson::Double(0.0)]);
    let err = txn
        .replace("c", &Part::none(), &Bson::Int32(1), moved)
        .expect_err("a new vector past the limit");
    assert!(matches!(err, Error::InvalidVector { .. }), "{err}");
    txn.commit()
        .expect("commit, the cache taking the kept vector's new row");
    let read = db.read();
    let c = read.collection("c").expect("c");
    let doc = c
        .get_by_id(&Part::none(), &Bson::Int32(1))
        .expect("get")
        .expect("there");
    assert_eq!(doc.raw().expect("raw").get_i32("n").expect("n"), 1);
    drop(c);
    drop(read);
    // Not poisoned: later writes go on.
    let mut txn = db.begin_write().expect("begin");
    txn.insert("c", doc! { "_id": 2, "e": [0.0, 1.0], "n": 2 })
        .expect("insert");
    txn.commit().expect("commit");
    integrity(&db, "c");
}

/// A document stored with an `undefined` partition key before such keys
/// were refused (it lies in the partition `null` would name) can still have
/// its other fields replaced; new documents with one are refused.
#[test]
fn a_document_stored_with_an_undefined_partition_key_stays_changeable() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let db = Database::open(Arc::clone(&store)).expect("db");
    db.create_collection(CollectionConfig::new("c").partition_key("tenant"))
        .expect("create");
    let part = Part::of(&Bson::Undefined).expect("part");
    let id = slate_core::value::encode_id(&Bson::Int32(1)).expect("id");
    let bytes = bson::to_vec(&doc! { "_id": 1, "tenant": Bson::Undefined, "n": 0 }).expect("bytes");
    {
        let mut raw = slate_core::begin_write(store.as_ref()).expect("raw write");
        raw.put("c.c", slate_core::keys::doc_key(part.as_bytes(), &id), bytes)
            .expect("put");
        raw.commit().expect("commit");
    }
    let mut txn = db.begin_write().expect("begin");
    assert!(txn
        .insert("c", doc! { "_id": 2, "tenant": Bson::Undefined })
        .is_err());
    assert!(txn
        .replace(
            "c",
            &part,
            &Bson::Int32(1),
            doc! { "tenant": Bson::Undefined, "n": 1 }
        )
        .expect("its other fields change"));
    txn.commit().expect("commit");
    let read = db.read();
    let c = read.collection("c").expect("c");
    let doc = c.get_by_id(&part, &Bson::Int32(1)).expect("get").expect("there");
    assert_eq!(doc.raw().expect("raw").get_i32("n").expect("n"), 1);
}
