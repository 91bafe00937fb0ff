//! Partitioned collections: reads and filter-based writes address the partitions named on the
//! handle; the same `_id` may live in several partitions.

use slate::bson::{doc, Bson, Document};
use slate::core::Error as CoreError;
use slate::query::Source;
use slate::{Collection, CollectionConfig, Error};

use crate::{assert_same_docs, backends, TestDb};

const TENANTS: [&str; 3] = ["acme", "globex", "initech"];

/// 300 documents per tenant, `_id`s 0..300 in each, `status` with 30 values.
fn tenant_docs(tenant: &str) -> Vec<Document> {
    (0..300)
        .map(|i| doc! { "_id": i, "tenant": tenant, "status": format!("s{}", i % 30), "n": i })
        .collect()
}

fn partitioned(t: &TestDb) -> Collection {
    let coll =
        t.db.create_collection(CollectionConfig::new("p").partition_key("tenant").index("status"))
            .expect("create");
    // Interleaved, so that no partition is stored in one run of inserts.
    let per_tenant = TENANTS.map(tenant_docs);
    let docs: Vec<Document> = (0..300)
        .flat_map(|i| per_tenant.iter().map(move |d| d[i].clone()))
        .collect();
    coll.insert_many(docs).expect("insert");
    coll
}

/// Each document's tenant and `_id`, in order.
fn tenant_ids(docs: &[Document]) -> Vec<(&str, i32)> {
    docs.iter()
        .map(|d| {
            (
                d.get_str("tenant").expect("tenant"),
                d.get_i32("_id").expect("id"),
            )
        })
        .collect()
}

fn assert_invalid_partition<T: std::fmt::Debug>(out: slate::Result<T>, mentions: &str, backend: &str) {
    match out {
        Err(e @ Error::Core(CoreError::InvalidPartition { .. })) => {
            assert!(e.to_string().contains(mentions), "[{backend}] message {e}");
        }
        other => panic!("[{backend}] expected InvalidPartition, got {other:?}"),
    }
}

#[test]
fn a_partition_sees_only_its_documents() {
    for t in backends() {
        let coll = partitioned(&t);
        let b = t.backend;
        let acme = coll.partition("acme");
        assert_same_docs(&acme.find(doc! {}).run().expect("find"), &tenant_docs("acme"), b);
        assert_eq!(acme.count(doc! {}).expect("count"), 300);

        // A selective equality on the index stays inside the partition.
        let plan = acme.find(doc! { "status": "s7" }).explain().expect("explain");
        assert!(
            matches!(&plan.source, Source::IndexScan { estimate: 10, .. }),
            "[{b}] {plan}"
        );
        let want: Vec<Document> = tenant_docs("acme")
            .into_iter()
            .filter(|d| d.get_str("status") == Ok("s7"))
            .collect();
        assert_same_docs(&acme.find(doc! { "status": "s7" }).run().expect("find"), &want, b);
        let want: Vec<Document> = tenant_docs("globex")
            .into_iter()
            .filter(|d| d.get_str("status") == Ok("s7"))
            .collect();
        assert_same_docs(
            &coll
                .partition("globex")
                .find(doc! { "status": "s7" })
                .run()
                .expect("find"),
            &want,
            b,
        );

        // An `_id` filter looks up its keys in each partition named, and no other.
        let plan = acme
            .find(doc! { "_id": { "$in": [5, 6] } })
            .explain()
            .expect("explain");
        assert!(
            matches!(&plan.source, Source::IdScan { estimate: 2, .. }),
            "[{b}] {plan}"
        );
        let two = coll.partitions(vec![Bson::from("acme"), Bson::from("initech")]);
        let got = two.find(doc! { "_id": { "$in": [5, 6] } }).run().expect("find");
        assert_eq!(
            tenant_ids(&got),
            [("acme", 5), ("acme", 6), ("initech", 5), ("initech", 6)],
            "[{b}]"
        );
        let got = two.find(doc! { "_id": { "$gte": 298 } }).run().expect("range");
        // Partition by partition, each in `_id` order.
        assert_eq!(
            tenant_ids(&got),
            [("acme", 298), ("acme", 299), ("initech", 298), ("initech", 299)],
            "[{b}]"
        );
        let plan = two.find(doc! { "_id": 5 }).limit(1).explain().expect("explain");
        assert!(
            matches!(&plan.source, Source::IdScan { estimate: 2, .. }),
            "[{b}] {plan}"
        );
        // Two partitions are read one after the other: a sort by `_id` sorts.
        let plan = two.find(doc! {}).sort("_id").limit(4).explain().expect("explain");
        assert!(!plan.key_order && plan.sort.len() == 1, "[{b}] {plan}");
        let got = two.find(doc! {}).sort("_id").limit(4).run().expect("sorted");
        let got: Vec<i32> = got.iter().map(|d| d.get_i32("_id").expect("id")).collect();
        assert_eq!(got, [0, 0, 1, 1], "[{b}]");
        assert!(
            acme.find(doc! {})
                .sort("_id")
                .explain()
                .expect("explain")
                .key_order,
            "[{b}]"
        );
        // In reverse, a partition's last keys, not the next partition's.
        for (tenant, partition) in [("acme", &acme), ("initech", &coll.partition("initech"))] {
            let last = partition.find(doc! {}).sort("_id:desc").limit(3);
            assert!(last.clone().explain().expect("explain").reverse, "[{b}]");
            let got = last.run().expect("last");
            let want: Vec<(&str, i32)> = (297..300).rev().map(|i| (tenant, i)).collect();
            assert_eq!(tenant_ids(&got), want, "[{b}]");
        }
        assert_eq!(
            two.delete_many(doc! { "_id": { "$gte": 299 } }).expect("delete"),
            2,
            "[{b}]"
        );
        assert_eq!(
            coll.partition("globex")
                .count(doc! { "_id": 299 })
                .expect("count"),
            1,
            "[{b}]"
        );
        assert_eq!(acme.count(doc! { "_id": 299 }).expect("count"), 0, "[{b}]");

        // The same _id in every tenant, each its own document.
        for tenant in TENANTS {
            let got = coll.partition(tenant).get(5).expect("get").expect("present");
            assert_eq!(got.get_str("tenant"), Ok(tenant), "[{b}]");
        }
        assert_eq!(coll.partition("nobody").get(5).expect("get"), None);
        assert_eq!(
            coll.partition("nobody").find(doc! {}).run().expect("find"),
            Vec::<Document>::new()
        );
        assert_eq!(coll.partition("nobody").count(doc! {}).expect("count"), 0);
    }
}

#[test]
fn several_partitions_at_once() {
    for t in backends() {
        let coll = partitioned(&t);
        let b = t.backend;
        let two = coll.partitions(vec![Bson::from("globex"), Bson::from("acme")]);
        assert_eq!(two.count(doc! {}).expect("count"), 600, "[{b}]");
        assert_eq!(two.count(doc! { "status": "s1" }).expect("count"), 20, "[{b}]");
        let got = two
            .find(doc! { "n": { "$lt": 2 } })
            .sort("tenant")
            .sort("_id:desc")
            .run()
            .expect("find");
        let want = vec![
            doc! { "_id": 1, "tenant": "acme", "status": "s1", "n": 1 },
            doc! { "_id": 0, "tenant": "acme", "status": "s0", "n": 0 },
            doc! { "_id": 1, "tenant": "globex", "status": "s1", "n": 1 },
            doc! { "_id": 0, "tenant": "globex", "status": "s0", "n": 0 },
        ];
        assert_same_docs(&got, &want, b);
        // A sort over 512 candidates or more runs on the pool, its window spanning both
        // partitions.
        let got = two
            .find(doc! { "n": { "$gte": 40 } })
            .sort("n:desc")
            .sort("tenant")
            .limit(5)
            .run()
            .expect("find");
        let want: Vec<Document> = [
            (299, "acme"),
            (299, "globex"),
            (298, "acme"),
            (298, "globex"),
            (297, "acme"),
        ]
        .into_iter()
        .map(|(i, tenant)| doc! { "_id": i, "tenant": tenant, "status": format!("s{}", i % 30), "n": i })
        .collect();
        assert_same_docs(&got, &want, b);
        let got = two.find(doc! { "status": "s3" }).run().expect("find");
        assert_eq!(got.len(), 20, "[{b}]");
        assert!(got.iter().all(|d| d.get_str("tenant") != Ok("initech")), "[{b}]");
        // get_many: one answer per id, from the first partition named that has it.
        let got = two
            .get_many(&[Bson::Int32(4), Bson::Int32(999)])
            .expect("get_many");
        assert_eq!(
            got[0].as_ref().and_then(|d| d.get_str("tenant").ok()),
            Some("globex"),
            "[{b}]"
        );
        assert_eq!(got[1], None);

        // A partition named twice is read and written once.
        let twice = coll.partitions(vec![Bson::from("acme"), Bson::from("acme")]);
        assert_eq!(twice.count(doc! {}).expect("count"), 300, "[{b}]");
        assert_eq!(twice.find(doc! { "n": 7 }).run().expect("find").len(), 1, "[{b}]");
        let res = twice
            .update_many(doc! { "n": 7 }, doc! { "$inc": { "n": 100 } }, false)
            .expect("update");
        assert_eq!(res.modified, 1, "[{b}]");
        let acme = coll.partition("acme");
        assert_eq!(
            acme.get(7).expect("get").expect("doc").get_i32("n"),
            Ok(107),
            "[{b}]"
        );
    }
}

#[test]
fn reading_without_a_partition_is_an_error() {
    for t in backends() {
        let coll = partitioned(&t);
        let b = t.backend;
        assert_invalid_partition(coll.find(doc! {}).run(), "tenant", b);
        assert_invalid_partition(coll.find(doc! { "status": "s1" }).explain(), "tenant", b);
        assert_invalid_partition(coll.count(doc! {}), "tenant", b);
        assert_invalid_partition(coll.get(1), "tenant", b);
        assert_invalid_partition(coll.delete_many(doc! {}), "tenant", b);
        assert_invalid_partition(
            coll.update_many(doc! {}, doc! { "$set": { "k": 1 } }, false),
            "tenant",
            b,
        );
        assert_eq!(
            coll.partitions(TENANTS.map(Bson::from).to_vec())
                .count(doc! {})
                .expect("count"),
            900
        );

        // And naming a partition of a collection that has none is one too.
        let plain =
            t.db.create_collection(CollectionConfig::new("plain"))
                .expect("create");
        plain.insert_one(doc! { "_id": 1 }).expect("insert");
        assert_invalid_partition(plain.partition("acme").find(doc! {}).run(), "not partitioned", b);
    }
}

#[test]
fn ids_are_unique_per_partition_and_writes_stay_inside() {
    for t in backends() {
        let coll = partitioned(&t);
        let b = t.backend;
        // A taken id in the same tenant is refused; in a new tenant it is not.
        assert!(
            matches!(
                coll.insert_one(doc! { "_id": 1, "tenant": "acme" }),
                Err(Error::Core(CoreError::DuplicateId { .. }))
            ),
            "[{b}]"
        );
        coll.insert_one(doc! { "_id": 1, "tenant": "hooli" })
            .expect("insert");
        assert_eq!(coll.partition("hooli").count(doc! {}).expect("count"), 1);
        for bad in [
            doc! { "_id": 2 },
            doc! { "_id": 2, "tenant": ["a"] },
            doc! { "_id": 2, "tenant": null },
        ] {
            let out = coll.insert_one(bad.clone());
            assert!(
                matches!(out, Err(Error::Core(CoreError::InvalidDocument { .. }))),
                "[{b}] {bad}: {out:?}"
            );
        }

        // Writes through a partition handle touch only that partition.
        let acme = coll.partition("acme");
        let r = acme
            .update_many(doc! { "status": "s1" }, doc! { "$set": { "hit": true } }, false)
            .expect("update");
        assert_eq!((r.matched, r.modified), (10, 10), "[{b}]");
        let all_tenants = coll.partitions(TENANTS.map(Bson::from).to_vec());
        assert_eq!(
            all_tenants.count(doc! { "hit": true }).expect("count"),
            10,
            "[{b}]"
        );
        assert_eq!(
            coll.partition("globex")
                .delete_many(doc! { "n": { "$gte": 100 } })
                .expect("delete"),
            200,
            "[{b}]"
        );
        assert_eq!(coll.partition("globex").count(doc! {}).expect("count"), 100);
        assert_eq!(acme.count(doc! {}).expect("count"), 300, "[{b}]");
        assert_eq!(acme.delete_one(doc! { "_id": 7 }).expect("delete"), 1);
        assert_eq!(acme.get(7).expect("get"), None);
        assert!(coll.partition("initech").get(7).expect("get").is_some(), "[{b}]");

        // A replacement may not move a document to another partition.
        let err = acme
            .replace_one(doc! { "_id": 8 }, doc! { "tenant": "globex" }, false)
            .expect_err("moves");
        assert!(
            matches!(err, Error::Core(CoreError::InvalidDocument { .. })),
            "[{b}] {err:?}"
        );
        assert_eq!(
            acme.get(8)
                .expect("get")
                .and_then(|d| d.get_str("tenant").ok().map(str::to_owned)),
            Some("acme".into())
        );

        let read = t.db.database().read();
        let problems =
            slate::core::check_integrity(read.snapshot(), &read.config("p").expect("config")).expect("check");
        assert!(problems.is_empty(), "[{b}] {problems:#?}");
    }
}

#[test]
fn a_scoped_handle_fills_in_or_refuses_the_partition_on_insert() {
    let db = slate::Db::memory();
    let coll = db
        .create_collection(slate::CollectionConfig::new("scoped").partition_key("tenant"))
        .expect("create");
    let acme = coll.partition("acme");
    acme.insert_one(slate::bson::doc! { "_id": 1, "x": 1 })
        .expect("filled in");
    assert_eq!(acme.count(slate::bson::doc! {}).expect("count"), 1);
    assert_eq!(
        acme.get(1)
            .expect("get")
            .expect("found")
            .get_str("tenant")
            .expect("tenant"),
        "acme"
    );
    let err = acme
        .insert_one(slate::bson::doc! { "_id": 2, "tenant": "bolt" })
        .expect_err("another tenant's document through acme's handle");
    assert!(err.to_string().contains("partition"), "{err}");
    assert_eq!(
        coll.partition("bolt").count(slate::bson::doc! {}).expect("count"),
        0
    );
}

#[test]
fn an_upsert_lands_inside_the_partitions_its_handle_addresses() {
    for t in backends() {
        let b = t.backend;
        let coll = partitioned(&t);
        let acme = coll.partition("acme");
        // No partition key in the filter: the handle's partition is filled in.
        let r = acme
            .update_one(doc! { "_id": 1000 }, doc! { "$set": { "n": 1 } }, true)
            .expect("upsert");
        assert_eq!(r.upserted_id, Some(Bson::Int32(1000)), "[{b}]");
        assert_eq!(
            acme.get(1000)
                .expect("get")
                .and_then(|d| d.get_str("tenant").ok().map(str::to_owned)),
            Some("acme".into()),
            "[{b}]"
        );
        let r = acme
            .replace_one(doc! { "_id": 1001 }, doc! { "n": 2 }, true)
            .expect("replacement upsert");
        assert_eq!(r.upserted_id, Some(Bson::Int32(1001)), "[{b}]");
        assert!(acme.get(1001).expect("get").is_some(), "[{b}]");
        // The key under an operator: the handle's value still fills it in.
        let r = acme
            .update_one(
                doc! { "_id": 1003, "tenant": { "$in": ["acme", "globex"] } },
                doc! { "$set": { "n": 4 } },
                true,
            )
            .expect("upsert with the key under $in");
        assert_eq!(r.upserted_id, Some(Bson::Int32(1003)), "[{b}]");
        assert_eq!(
            acme.get(1003)
                .expect("get")
                .and_then(|d| d.get_str("tenant").ok().map(str::to_owned)),
            Some("acme".into()),
            "[{b}]"
        );

        // A filter whose equalities could not seed a document still updates
        // the document it matches.
        acme.update_one(
            doc! { "_id": 1003 },
            doc! { "$set": { "r": { "$ref": "c", "$id": 7 }, "tags": ["x", "y"] } },
            false,
        )
        .expect("set");
        let r = acme
            .update_one(
                doc! { "tenant": "acme", "r.$id": 7, "$and": [{ "tags": "x" }, { "tags": "y" }] },
                doc! { "$set": { "seen": true } },
                true,
            )
            .expect("a match is updated");
        assert_eq!((r.matched, r.modified, r.upserted_id), (1, 1, None), "[{b}]");

        // A filter naming another partition: nothing matches inside acme, and
        // the upsert may not write into globex.
        let before = coll.partition("globex").count(doc! {}).expect("count");
        for out in [
            acme.update_one(
                doc! { "_id": 1002, "tenant": "globex" },
                doc! { "$set": { "n": 3 } },
                true,
            ),
            acme.update_many(
                doc! { "_id": 1002, "tenant": "globex" },
                doc! { "$set": { "n": 3 } },
                true,
            ),
            acme.replace_one(doc! { "_id": 1002 }, doc! { "tenant": "globex" }, true),
        ] {
            assert_invalid_partition(out, "partition", b);
        }
        assert_eq!(
            coll.partition("globex").count(doc! {}).expect("count"),
            before,
            "[{b}]"
        );
        assert_eq!(coll.partition("globex").get(1002).expect("get"), None, "[{b}]");

        // Several partitions: the upsert must name one of them itself.
        let two = coll.partitions(vec![Bson::from("acme"), Bson::from("initech")]);
        two.update_one(
            doc! { "_id": 1003, "tenant": "initech" },
            doc! { "$set": { "n": 4 } },
            true,
        )
        .expect("upsert into a named partition");
        assert!(
            coll.partition("initech").get(1003).expect("get").is_some(),
            "[{b}]"
        );
        assert_invalid_partition(
            two.update_one(
                doc! { "_id": 1004, "tenant": "globex" },
                doc! { "$set": { "n": 5 } },
                true,
            ),
            "partition",
            b,
        );
    }
}

#[test]
fn a_partition_handle_on_an_unpartitioned_collection_writes_nothing() {
    for t in backends() {
        let b = t.backend;
        let coll =
            t.db.create_collection(CollectionConfig::new("plain"))
                .expect("create");
        let scoped = coll.partition("acme");
        assert_invalid_partition(scoped.insert_one(doc! { "_id": 1 }), "not partitioned", b);
        assert_invalid_partition(
            scoped.insert_many([doc! { "_id": 2 }, doc! { "_id": 3 }]),
            "not partitioned",
            b,
        );
        assert_invalid_partition(
            scoped.replace_one(doc! { "_id": 4 }, doc! { "x": 1 }, true),
            "not partitioned",
            b,
        );
        assert_eq!(coll.count(doc! {}).expect("count"), 0, "[{b}]");
    }
}

#[test]
fn no_partitions_address_nothing_in_an_unpartitioned_collection() {
    use slate::query::Strategy;
    use slate::{Metric, VectorField};
    for t in backends() {
        let b = t.backend;
        let coll =
            t.db.create_collection(
                CollectionConfig::new("plain")
                    .index("name")
                    .vector_field_config(VectorField::new("v", 2, Metric::L2)),
            )
            .expect("create");
        let docs = (0..20).map(|i| doc! { "_id": i, "name": "a", "v": [f64::from(i), 0.0] });
        coll.insert_many(docs).expect("insert");
        let none = coll.partitions(Vec::new());

        // Upserts write nothing (they used to insert a second "a").
        assert_invalid_partition(
            none.update_one(doc! { "name": "a" }, doc! { "$set": { "x": 1 } }, true),
            "no partition",
            b,
        );
        assert_invalid_partition(
            none.replace_one(doc! { "name": "a" }, doc! { "name": "a" }, true),
            "not partitioned",
            b,
        );
        assert_eq!(coll.count(doc! {}).expect("count"), 20, "[{b}]");

        // Reads find nothing; get_many keeps one answer per id.
        let got = none
            .get_many(&[Bson::Int32(1), Bson::Int32(2), Bson::Int32(99)])
            .expect("get_many");
        assert_eq!(got, vec![None, None, None], "[{b}]");
        assert_eq!(none.get(1).expect("get"), None, "[{b}]");
        assert_eq!(none.count(doc! {}).expect("count"), 0, "[{b}]");
        for strategy in [Strategy::Auto, Strategy::Scan, Strategy::Gather, Strategy::Bitmap] {
            let hits = none
                .search("v", &[0.0, 0.0])
                .k(5)
                .filter(doc! { "name": "a" })
                .strategy(strategy)
                .run()
                .expect("search");
            assert!(hits.is_empty(), "[{b}] {strategy:?}: {hits:?}");
        }
        let unfiltered = none.search("v", &[0.0, 0.0]).k(5).run().expect("search");
        assert!(unfiltered.is_empty(), "[{b}] unfiltered: {unfiltered:?}");
        let batch = none
            .search_batch("v", &[0.0, 0.0, 1.0, 0.0], 5, 0, None)
            .expect("batch");
        assert_eq!(batch, vec![Vec::new(), Vec::new()], "[{b}]");
        // The whole collection, for contrast, has hits.
        assert_eq!(
            coll.search("v", &[0.0, 0.0]).k(5).run().expect("search").len(),
            5,
            "[{b}]"
        );
    }
}

#[test]
fn a_scoped_insert_compares_partitions_as_keys_and_follows_dotted_keys() {
    for t in backends() {
        let b = t.backend;
        // Numbers of any type name one partition, as they do in the keys.
        let coll =
            t.db.create_collection(CollectionConfig::new("byint").partition_key("shard"))
                .expect("create");
        let one = coll.partition(1i32);
        one.insert_one(doc! { "_id": 1, "shard": 1i64 })
            .expect("1i64 is partition 1");
        one.insert_one(doc! { "_id": 2, "shard": 1.0 })
            .expect("1.0 is partition 1");
        assert_invalid_partition(one.insert_one(doc! { "_id": 3, "shard": 2 }), "partition", b);
        assert_eq!(one.count(doc! {}).expect("count"), 2, "[{b}]");

        // A dotted partition key is read through the subdocument.
        let coll =
            t.db.create_collection(CollectionConfig::new("nested").partition_key("org.id"))
                .expect("create");
        let acme = coll.partition("acme");
        acme.insert_one(doc! { "_id": 1, "org": { "id": "acme" } })
            .expect("the handle's partition, nested");
        assert_invalid_partition(
            acme.insert_one(doc! { "_id": 2, "org": { "id": "globex" } }),
            "partition",
            b,
        );
        assert_eq!(acme.count(doc! {}).expect("count"), 1, "[{b}]");
        assert_eq!(
            coll.partition("globex").count(doc! {}).expect("count"),
            0,
            "[{b}]"
        );
    }
}

/// An index created over a partitioned collection's documents (arrays among
/// them), dropped and created again: each step leaves exactly the entries
/// and markers the documents call for, in every partition, and queries
/// through it agree with a scan.
#[test]
fn indexes_come_and_go_across_partitions() {
    for t in backends() {
        let b = t.backend;
        let coll = partitioned(&t);
        // Arrays in one partition only, in a field not yet indexed.
        let globex = coll.partitions(vec![Bson::from("globex")]);
        for i in 0..10 {
            globex
                .update_one(
                    doc! { "_id": i },
                    doc! { "$set": { "tags": ["a", format!("t{i}")] } },
                    false,
                )
                .expect("update");
        }
        let check = |when: &str| {
            let read = t.db.database().read();
            let problems = slate::core::check_integrity(read.snapshot(), &read.config("p").expect("config"))
                .expect("check");
            assert!(problems.is_empty(), "[{b}] {when}: {problems:#?}");
        };
        let all = coll.partitions(TENANTS.iter().map(|&t| Bson::from(t)).collect());
        let tagged = |when: &str| {
            let n = all.find(doc! { "tags": "a" }).count().expect("count");
            assert_eq!(n, 10, "[{b}] {when}");
        };
        coll.create_index("tags").expect("create");
        check("created");
        tagged("created");
        coll.drop_index("tags").expect("drop");
        check("dropped");
        tagged("dropped");
        coll.create_index("tags").expect("create again");
        check("created again");
        tagged("created again");
        coll.drop_index("status").expect("drop status");
        check("status dropped");
    }
}

/// A dotted partition key: a scoped upsert whose filter sets it as a
/// nested document, or not at all, lands in the handle's partition; one
/// that sets another partition's value is refused.
#[test]
fn a_dotted_partition_key_seeds_upserts() {
    for t in backends() {
        let b = t.backend;
        let coll =
            t.db.create_collection(CollectionConfig::new("d").partition_key("org.id"))
                .expect("create");
        let seven = coll.partition(7);
        let r = seven
            .update_one(
                doc! { "_id": 1, "org": { "id": 7 } },
                doc! { "$set": { "n": 1 } },
                true,
            )
            .expect("upsert with the key as a nested document");
        assert_eq!(r.upserted_id, Some(Bson::Int32(1)), "[{b}]");
        let r = seven
            .update_one(doc! { "_id": 2 }, doc! { "$set": { "n": 2 } }, true)
            .expect("upsert without the key");
        assert_eq!(r.upserted_id, Some(Bson::Int32(2)), "[{b}]");
        assert_eq!(seven.count(doc! {}).expect("count"), 2, "[{b}]");
        assert_same_docs(
            &[seven.get(2).expect("get").expect("doc")],
            &[doc! { "_id": 2, "org": { "id": 7 }, "n": 2 }],
            b,
        );
        assert_invalid_partition(
            seven.update_one(doc! { "_id": 3, "org.id": 8 }, doc! { "$set": { "n": 3 } }, true),
            "partition",
            b,
        );
    }
}

/// `search_batch` with k = 0 is refused on a partitioned collection as on
/// an unpartitioned one, even with no queries to run (the partitioned path
/// answered an empty batch `Ok`).
#[test]
fn search_batch_refuses_k_zero_whatever_the_layout() {
    for t in backends() {
        let b = t.backend;
        for (name, config) in [
            ("plain", CollectionConfig::new("plain")),
            ("split", CollectionConfig::new("split").partition_key("tenant")),
        ] {
            let coll =
                t.db.create_collection(config.vector_field_config(slate::VectorField::new(
                    "v",
                    2,
                    slate::Metric::L2,
                )))
                .expect("create");
            let coll = if name == "split" {
                coll.partition("acme")
            } else {
                coll
            };
            coll.insert_one(doc! { "_id": 1, "tenant": "acme", "v": [1.0, 0.0] })
                .expect("insert");
            for queries in [&[][..], &[1.0, 0.0][..]] {
                let err = coll.search_batch("v", queries, 0, 0, None).expect_err("k = 0");
                assert!(err.to_string().contains("k must be"), "[{b}] {name}: {err}");
            }
        }
    }
}

/// `undefined` as a partition key is refused as `null` is (it would land in
/// a null partition: both encode alike), and a handle on a regex partition
/// upserts as any other (its value compared as a value, not run as a
/// pattern).
#[test]
fn null_like_keys_are_refused_and_a_regex_partition_upserts() {
    for t in backends() {
        let b = t.backend;
        let coll =
            t.db.create_collection(CollectionConfig::new("u").partition_key("tenant"))
                .expect("create");
        for v in [Bson::Null, Bson::Undefined] {
            let err = coll
                .insert_one(doc! { "_id": 1, "tenant": v.clone() })
                .expect_err("not a partition");
            assert!(
                matches!(err, Error::Core(CoreError::InvalidDocument { .. })),
                "[{b}] {v:?}: {err}"
            );
        }
        assert_eq!(
            coll.partition(Bson::Null).count(doc! {}).expect("count"),
            0,
            "[{b}]"
        );
        let r = Bson::RegularExpression(slate::bson::Regex {
            pattern: "a".into(),
            options: String::new(),
        });
        coll.insert_one(doc! { "_id": 1, "tenant": r.clone() })
            .expect("a regex is a scalar");
        let scoped = coll.partition(r.clone());
        let res = scoped
            .update_one(doc! { "_id": 1 }, doc! { "$set": { "n": 1 } }, true)
            .expect("upsert on a regex partition");
        assert_eq!((res.matched, res.modified), (1, 1), "[{b}]");
        let res = scoped
            .update_one(doc! { "_id": 2 }, doc! { "$set": { "n": 2 } }, true)
            .expect("upsert inserting");
        assert!(res.upserted_id.is_some(), "[{b}]");
        assert_eq!(
            scoped.get(2).expect("get"),
            Some(doc! { "_id": 2, "tenant": r.clone(), "n": 2 }),
            "[{b}]"
        );
    }
}

/// A replacement through a handle on one partition gets the partition key
/// filled in whether or not it upserts, a dotted key (`org.id`) included;
/// a value on a dotted key's way is not overwritten: refused.
#[test]
fn a_scoped_replacement_fills_in_its_partition_key_dotted_or_not() {
    for t in backends() {
        let b = t.backend;
        let flat =
            t.db.create_collection(CollectionConfig::new("f").partition_key("tenant"))
                .expect("create");
        flat.insert_one(doc! { "_id": 5, "tenant": "acme", "n": 0 })
            .expect("insert");
        let acme = flat.partition("acme");
        let r = acme
            .replace_one(doc! { "_id": 5 }, doc! { "n": 1 }, false)
            .expect("no upsert: filled in too");
        assert_eq!((r.matched, r.modified), (1, 1), "[{b}]");
        assert_eq!(
            acme.get(5).expect("get"),
            Some(doc! { "_id": 5, "n": 1, "tenant": "acme" }),
            "[{b}]"
        );
        let dotted =
            t.db.create_collection(CollectionConfig::new("d").partition_key("org.id"))
                .expect("create");
        let seven = dotted.partition(7);
        seven
            .replace_one(doc! { "_id": 3 }, doc! { "n": 3 }, true)
            .expect("an upsert fills a dotted key");
        assert_eq!(
            seven.get(3).expect("get"),
            Some(doc! { "_id": 3, "n": 3, "org": { "id": 7 } }),
            "[{b}]"
        );
        seven
            .replace_one(doc! { "_id": 3 }, doc! { "n": 4, "org": { "name": "x" } }, false)
            .expect("filled into the subdocument there");
        assert_eq!(
            seven.get(3).expect("get"),
            Some(doc! { "_id": 3, "n": 4, "org": { "name": "x", "id": 7 } }),
            "[{b}]"
        );
        let err = seven
            .replace_one(doc! { "_id": 3 }, doc! { "n": 5, "org": 9 }, false)
            .expect_err("a value on the way");
        assert!(
            matches!(err, Error::Core(CoreError::InvalidPartition { .. })),
            "[{b}] {err}"
        );
        assert_eq!(
            seven
                .get(3)
                .expect("get")
                .expect("there")
                .get_i32("n")
                .expect("n"),
            4,
            "[{b}]"
        );
    }
}
