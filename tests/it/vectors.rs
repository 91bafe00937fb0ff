//! Vector search through the facade: SIFT-small ground truth, every hybrid
//! strategy against a brute-force oracle across the selectivity range, on
//! both backends, and bad input refused.

use std::path::Path;

use slate::bson::{doc, Bson, Document};
use slate::{CollectionConfig, Db, Metric, Strategy, VectorField};

fn read_fvecs(path: &Path) -> (usize, Vec<f32>) {
    let bytes = std::fs::read(path).expect("read fvecs");
    let dim = i32::from_le_bytes(bytes[..4].try_into().expect("header")) as usize;
    let mut out = Vec::new();
    for row in bytes.chunks_exact(4 + 4 * dim) {
        out.extend(
            row[4..]
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().expect("f32"))),
        );
    }
    (dim, out)
}

fn read_ivecs(path: &Path) -> Vec<Vec<i32>> {
    let bytes = std::fs::read(path).expect("read ivecs");
    let dim = i32::from_le_bytes(bytes[..4].try_into().expect("header")) as usize;
    bytes
        .chunks_exact(4 + 4 * dim)
        .map(|row| {
            row[4..]
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes(c.try_into().expect("i32")))
                .collect()
        })
        .collect()
}

fn sift_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/siftsmall")
}

#[test]
fn siftsmall_top10_equals_the_shipped_ground_truth() {
    let dir = sift_dir();
    let (dim, base) = read_fvecs(&dir.join("siftsmall_base.fvecs"));
    let (_, queries) = read_fvecs(&dir.join("siftsmall_query.fvecs"));
    let truth = read_ivecs(&dir.join("siftsmall_groundtruth.ivecs"));
    let db = Db::memory();
    let coll = db
        .create_collection(CollectionConfig::new("sift").vector("v", dim, Metric::L2))
        .expect("create");
    let docs: Vec<Document> = base
        .chunks_exact(dim)
        .enumerate()
        .map(|(i, v)| doc! { "_id": i as i64, "v": v.iter().map(|x| Bson::Double(f64::from(*x))).collect::<Vec<_>>() })
        .collect();
    coll.insert_many(docs).expect("insert");
    let batch = coll.search_batch("v", &queries, 10, 0, None).expect("batch");
    assert_eq!(batch.len(), 100);
    for (q, (hits, want)) in batch.iter().zip(&truth).enumerate() {
        let single = coll
            .search("v", &queries[q * dim..(q + 1) * dim])
            .k(10)
            .run()
            .expect("search");
        assert_eq!(&single, hits, "query {q}: batched and single searches differ");
        let got: Vec<i64> = hits.iter().map(|h| h.id.as_i64().expect("int id")).collect();
        let want: Vec<i64> = want[..10].iter().map(|&i| i64::from(i)).collect();
        if got != want {
            // Ties aside: the same distances in the same order.
            let dist = |id: i64| {
                let v = &base[id as usize * dim..(id as usize + 1) * dim];
                slate::vector::scalar::distance(Metric::L2, &queries[q * dim..(q + 1) * dim], v)
            };
            let a: Vec<f32> = got.iter().map(|&i| dist(i)).collect();
            let b: Vec<f32> = want.iter().map(|&i| dist(i)).collect();
            assert_eq!(a, b, "query {q}: {got:?} vs ground truth {want:?}");
        }
    }
}

/// 2,000 documents: `cat` has 100 values (1% each), `tier` 10, `flag` 2,
/// `rare` marks 3 documents; vectors of dim 8 with small integer components
/// so distances are exact.
fn hybrid_docs() -> Vec<Document> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    (0..2000i64)
        .map(|i| {
            let v: Vec<Bson> = (0..8)
                .map(|_| Bson::Double((next() % 21) as f64 - 10.0))
                .collect();
            let mut d = doc! {
                "_id": i,
                "cat": (next() % 100) as i64,
                "tier": (next() % 10) as i64,
                "flag": next().is_multiple_of(2),
                "meta": { "score": (next() % 1000) as i64 },
                "tags": [format!("t{}", next() % 5), format!("t{}", next() % 5)],
                "atags": [format!("t{}", next() % 5), format!("t{}", next() % 5)],
                "v": v,
            };
            if i % 700 == 3 {
                d.insert("rare", true);
            }
            if i % 13 == 0 {
                d.remove("v"); // some documents have no vector
            }
            d
        })
        .collect()
}

fn brute_force(docs: &[Document], filter: &Document, query: &[f32], k: usize) -> Vec<(i64, f32)> {
    let f = slate::query::Filter::parse(filter).expect("filter");
    let mut all: Vec<(f32, i64)> = docs
        .iter()
        .filter(|d| d.contains_key("v"))
        .filter(|d| {
            let mut stored = (*d).clone();
            stored.remove("v");
            f.matches(&slate::bson::RawDocumentBuf::from_document(&stored).expect("raw"))
        })
        .map(|d| {
            let v: Vec<f32> = d
                .get_array("v")
                .expect("v")
                .iter()
                .map(|x| x.as_f64().expect("f64") as f32)
                .collect();
            (
                slate::vector::scalar::distance(Metric::L2, query, &v),
                d.get_i64("_id").expect("id"),
            )
        })
        .collect();
    // Ties break on the id key, which orders like the id.
    all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    all.truncate(k);
    all.into_iter().map(|(d, i)| (i, d)).collect()
}

/// The search planner collects a tagged index range's rows while counting
/// it only when they are few (at most 4,096); a longer range's rows are read
/// from the posting lists again by gather and bitmap. Both must give brute
/// force's hits.
#[test]
fn a_long_tagged_range_is_gathered_and_masked_as_brute_force_says() {
    let n = 10_000i64;
    let vector =
        |i: i64| -> Vec<f32> { vec![(i * 7 % 13) as f32, (i * 11 % 17) as f32, (i % 5) as f32, 1.0] };
    let dir = tempfile::tempdir().expect("tempdir");
    let dbs = [
        Db::memory(),
        Db::builder(dir.path()).sync(false).open().expect("rocks"),
    ];
    for db in &dbs {
        let coll = db
            .create_collection(
                CollectionConfig::new("long")
                    .index("g")
                    .vector("v", 4, Metric::L2),
            )
            .expect("create");
        coll.insert_many((0..n).map(|i| {
            let v: Vec<f64> = vector(i).into_iter().map(f64::from).collect();
            doc! { "_id": i, "g": i % 2, "v": v }
        }))
        .expect("insert");
        let query = [3.0f32, 8.0, 2.0, 1.0];
        // 5,000 rows under one tag, and every row under two.
        for (filter, matches) in [
            (
                doc! { "g": 0 },
                Box::new(|i: i64| i % 2 == 0) as Box<dyn Fn(i64) -> bool>,
            ),
            (doc! { "g": { "$gte": 0, "$lte": 1 } }, Box::new(|_| true)),
        ] {
            let mut want: Vec<(f32, i64)> = (0..n)
                .filter(|&i| matches(i))
                .map(|i| (slate::vector::scalar::distance(Metric::L2, &query, &vector(i)), i))
                .collect();
            want.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            want.truncate(10);
            for strategy in [Strategy::Gather, Strategy::Bitmap, Strategy::Auto] {
                let (hits, explain) = coll
                    .search("v", &query)
                    .k(10)
                    .filter(&filter)
                    .strategy(strategy)
                    .explain()
                    .expect("search");
                let got: Vec<(f32, i64)> = hits
                    .iter()
                    .map(|h| (h.distance, h.id.as_i64().expect("int id")))
                    .collect();
                assert_eq!(got, want, "{filter} by {strategy} ({explain})");
            }
        }
    }
}

#[test]
fn every_strategy_equals_brute_force_at_every_selectivity_on_both_backends() {
    let docs = hybrid_docs();
    let filters = [
        ("100%", doc! {}),
        ("50% indexed", doc! { "flag": true }),
        ("10% indexed", doc! { "tier": 3 }),
        ("1% indexed", doc! { "cat": 42 }),
        ("0.15% indexed", doc! { "cat": 42, "tier": 3 }),
        ("rare unindexed", doc! { "rare": true }),
        ("zero matches", doc! { "cat": 1000 }),
        ("10% unindexed range", doc! { "meta.score": { "$lt": 100 } }),
        ("or of indexed", doc! { "$or": [{ "cat": 1 }, { "cat": 2 }] }),
        // An $or beside an unindexed condition: a union of index scans.
        (
            "or of indexed beside a range",
            doc! { "meta.score": { "$lt": 500 }, "$or": [{ "cat": 1 }, { "cat": 2 }] },
        ),
        // One key range over several values of a field without arrays: its
        // rows come unsorted from several posting lists.
        ("5% indexed range", doc! { "cat": { "$gte": 40, "$lt": 45 } }),
        // One key range over an array field: a document holding two of its
        // values is listed twice and must be one hit.
        (
            "indexed array range",
            doc! { "atags": { "$gte": "t1", "$lte": "t3" } },
        ),
        ("array field", doc! { "tags": "t1", "tier": { "$in": [1, 2] } }),
        // An indexed array: a document holding both values is one row.
        (
            "indexed array, two values",
            doc! { "atags": { "$in": ["t1", "t3"] } },
        ),
        // By `_id`, from the document keys (13 has no vector, 5000 no document).
        (
            "ids, points",
            doc! { "_id": { "$in": [3, 13, 17, 1500, 1999, 5000] } },
        ),
        ("ids, 1% range", doc! { "_id": { "$gte": 100, "$lt": 120 } }),
        // Points beside another condition: the keys are not the matches.
        (
            "ids beside a condition",
            doc! { "_id": { "$in": (0..60).collect::<Vec<i64>>() }, "meta.score": { "$lt": 300 } },
        ),
        (
            "ids, range beside an index",
            doc! { "_id": { "$lt": 1000 }, "tier": 3 },
        ),
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    let dbs = [
        Db::memory(),
        Db::builder(dir.path()).sync(false).open().expect("rocks"),
    ];
    // With row codes, gather prunes rows by their bounds: the same hits.
    for (db, codes) in dbs.iter().flat_map(|db| [(db, false), (db, true)]) {
        let mut pruned = 0;
        let mut bitmap_pruned = 0;
        let coll = db
            .create_collection(
                CollectionConfig::new(if codes { "coded" } else { "h" })
                    .index("cat")
                    .index("tier")
                    .index("flag")
                    .index("atags")
                    .vector_field_config(VectorField::new("v", 8, Metric::L2).with_codes(codes)),
            )
            .expect("create");
        coll.insert_many(docs.clone()).expect("insert");
        for q in 0..4 {
            let query: Vec<f32> = (0..8).map(|j| ((q * 7 + j * 3) % 11) as f32 - 5.0).collect();
            for (name, filter) in &filters {
                for k in [1usize, 10, 50] {
                    let want = brute_force(&docs, filter, &query, k);
                    for strategy in [Strategy::Auto, Strategy::Gather, Strategy::Scan, Strategy::Bitmap] {
                        let search = coll
                            .search("v", &query)
                            .k(k)
                            .filter(filter.clone())
                            .strategy(strategy);
                        let result = search.explain();
                        let (hits, explain) =
                            result.unwrap_or_else(|e| panic!("{name} k={k} {strategy}: {e}"));
                        let got: Vec<(i64, f32)> = hits
                            .iter()
                            .map(|h| (h.id.as_i64().expect("id"), h.distance))
                            .collect();
                        assert_eq!(
                            got, want,
                            "{name} k={k} strategy {strategy} (ran {}, codes {codes})",
                            explain.strategy
                        );
                        assert!(explain.rows_pruned <= explain.rows_scanned);
                        pruned += explain.rows_pruned;
                        if explain.strategy == Strategy::Bitmap {
                            bitmap_pruned += explain.rows_pruned;
                        }
                        // Written in this process, every row carries its
                        // tags: a single-index filter's candidates come
                        // from them, not from the index.
                        if strategy == Strategy::Gather
                            && (name.ends_with(" indexed") || name.contains("array"))
                        {
                            assert_eq!(explain.candidates_from, "row tags", "{name}");
                        }
                    }
                }
            }
        }
        assert_eq!(pruned > 0, codes, "rows pruned: {pruned}");
        // An exact index's bitmap bounds its rows by their codes too.
        assert_eq!(
            bitmap_pruned > 0,
            codes,
            "rows pruned by bitmaps: {bitmap_pruned}"
        );
    }
}

/// After a reopen the cache is loaded from the vector keys, without tags:
/// gather and bitmap read the index instead and return the same hits;
/// rows written after the reopen do not make the tags whole again.
#[test]
fn a_reopened_store_searches_through_the_index_with_the_same_hits() {
    let docs = hybrid_docs();
    let dir = tempfile::tempdir().expect("tempdir");
    let filter = doc! { "tier": 3 };
    let query = [1.0f32, -2.0, 3.0, 0.0, 4.0, -1.0, 2.0, 5.0];
    let run = |db: &Db, strategy: Strategy| {
        let (hits, explain) = db
            .collection("h")
            .expect("collection")
            .search("v", &query)
            .k(10)
            .filter(filter.clone())
            .strategy(strategy)
            .explain()
            .expect("search");
        let got: Vec<(i64, f32)> = hits
            .iter()
            .map(|h| (h.id.as_i64().expect("id"), h.distance))
            .collect();
        (got, explain.candidates_from)
    };
    let want = brute_force(&docs, &filter, &query, 10);
    {
        let db = Db::builder(dir.path()).sync(false).open().expect("rocks");
        // With codes, which a reopen rebuilds as it loads the rows.
        db.create_collection(
            CollectionConfig::new("h")
                .index("tier")
                .vector_field_config(VectorField::new("v", 8, Metric::L2).with_codes(true)),
        )
        .expect("create")
        .insert_many(docs.clone())
        .expect("insert");
        for strategy in [Strategy::Gather, Strategy::Bitmap] {
            assert_eq!(
                run(&db, strategy),
                (want.clone(), "row tags"),
                "{strategy} before reopening"
            );
        }
    }
    let db = Db::builder(dir.path()).sync(false).open().expect("reopen");
    for strategy in [Strategy::Gather, Strategy::Bitmap] {
        assert_eq!(
            run(&db, strategy),
            (want.clone(), "index"),
            "{strategy} after reopening"
        );
    }
    let mut more = docs.clone();
    more[0].insert("tier", 3i64);
    db.collection("h")
        .expect("collection")
        .replace_one(doc! { "_id": 0 }, more[0].clone(), false)
        .expect("replace");
    let want = brute_force(&more, &filter, &query, 10);
    assert_eq!(run(&db, Strategy::Gather), (want, "index"), "after a write");
}

/// An index created after the documents were written leaves its field
/// untagged, so the planner reads estimates from the indexes; gather and
/// bitmap still take a merge of tagged fields from the row tags, and the
/// bitmap intersects (`$and`) or unites (`$or`) its inputs' masks.
#[test]
fn merges_of_tagged_fields_come_from_the_tags_beside_an_untagged_index() {
    let docs = hybrid_docs();
    let db = Db::memory();
    let coll =
        db.create_collection(CollectionConfig::new("h").index("cat").index("tier").vector(
            "v",
            8,
            Metric::L2,
        ))
        .expect("create");
    coll.insert_many(docs.clone()).expect("insert");
    coll.create_index("flag").expect("index over existing documents");
    let filters = [
        doc! { "cat": { "$lt": 30 }, "tier": 3 },
        // Small enough for the planner to merge the indexes at every k.
        doc! { "$or": [{ "cat": 1 }, { "tier": 7, "cat": { "$lt": 5 } }] },
        doc! { "$or": [{ "cat": { "$gte": 98 } }, { "cat": 2 }, { "tier": 0, "cat": 50 }] },
    ];
    let query = [2.0f32, -1.0, 0.0, 3.0, -4.0, 1.0, 5.0, -2.0];
    for filter in &filters {
        for k in [1usize, 10, 50] {
            let want = brute_force(&docs, filter, &query, k);
            let mut scanned = Vec::new();
            for strategy in [Strategy::Gather, Strategy::Bitmap] {
                let (hits, explain) = coll
                    .search("v", &query)
                    .k(k)
                    .filter(filter.clone())
                    .strategy(strategy)
                    .explain()
                    .unwrap_or_else(|e| panic!("{filter} {strategy}: {e}"));
                let got: Vec<(i64, f32)> = hits
                    .iter()
                    .map(|h| (h.id.as_i64().expect("id"), h.distance))
                    .collect();
                assert_eq!(got, want, "{filter} k={k} {strategy}");
                assert_eq!(explain.candidates_from, "row tags", "{filter} {strategy}");
                assert_ne!(explain.estimated_by, "row tags", "{filter}: flag is untagged");
                scanned.push(explain.rows_scanned);
            }
            // Both take the same candidates: the bitmap's masks merge as
            // gather's row lists do (at k = 50 the first filter is an
            // intersection of two indexes: 51 rows, not the 542 or 183 of
            // either index alone).
            assert_eq!(
                scanned[0], scanned[1],
                "{filter} k={k}: rows scanned by gather, bitmap"
            );
        }
    }
}

/// Gather under a filter no index narrows reads every document and finds
/// the matches' rows by id: its estimated cost is the same whether or not
/// the collection's indexes are on the rows as tags (the tags make index
/// candidates cheap, not these).
#[test]
fn an_unindexed_gather_costs_the_same_with_or_without_tags() {
    let docs = hybrid_docs();
    let filter = doc! { "meta.score": { "$lt": 100 } };
    let query = [1.0f32, 0.0, -1.0, 2.0, 0.5, -3.0, 4.0, 1.0];
    let gather_cost = |index_first: bool| {
        let db = Db::memory();
        let config = CollectionConfig::new("h").vector("v", 8, Metric::L2);
        let coll = db
            .create_collection(if index_first { config.index("tier") } else { config })
            .expect("create");
        coll.insert_many(docs.clone()).expect("insert");
        if !index_first {
            coll.create_index("tier").expect("index");
        }
        let (_, explain) = coll
            .search("v", &query)
            .k(10)
            .filter(filter.clone())
            .explain()
            .expect("search");
        assert_eq!(explain.estimated_by, "sample");
        explain
            .costs
            .iter()
            .find(|(s, _)| *s == Strategy::Gather)
            .and_then(|(_, c)| *c)
            .expect("a gather cost")
    };
    let (tagged, untagged) = (gather_cost(true), gather_cost(false));
    assert!(
        (tagged - untagged).abs() <= 1e-9 * untagged,
        "gather cost {tagged} with tags, {untagged} without"
    );
}

#[test]
fn bad_vectors_and_queries_are_refused_and_change_nothing() {
    let db = Db::memory();
    let coll = db
        .create_collection(CollectionConfig::new("v").vector("e", 3, Metric::Cosine))
        .expect("create");
    coll.insert_one(doc! { "_id": 1, "e": [1.0, 0.0, 0.0] })
        .expect("insert");
    for bad in [
        doc! { "_id": 2, "e": [1.0, 2.0] },
        doc! { "_id": 3, "e": [1.0, f64::INFINITY, 0.0] },
        // Not zero, but zero in f32: not stored as a zero vector.
        doc! { "_id": 4, "e": [1e-50, 0.0, -1e-60] },
    ] {
        let err = coll.insert_one(bad).expect_err("refused");
        let msg = err.to_string();
        assert!(msg.contains("\"e\"") && msg.contains("collection \"v\""), "{msg}");
    }
    let err = coll
        .insert_many([
            doc! { "_id": 4, "e": [1.0, 1.0, 1.0] },
            doc! { "_id": 5, "e": [f64::NAN, 0.0, 0.0] },
        ])
        .expect_err("refused");
    assert!(err.to_string().contains("finite"), "{err}");
    assert_eq!(
        coll.count(doc! {}).expect("count"),
        1,
        "nothing of a refused batch was written"
    );
    // A stored zero vector replaced by numbers that are zero only in f32:
    // refused like an insert, though the bits equal the stored vector's.
    coll.insert_one(doc! { "_id": 6, "e": [0.0, 0.0, 0.0] })
        .expect("a zero vector");
    let err = coll
        .replace_one(
            doc! { "_id": 6 },
            doc! { "_id": 6, "e": [1e-50, 0.0, 0.0], "t": 1 },
            false,
        )
        .expect_err("refused");
    assert!(err.to_string().contains("too small"), "{err}");
    let kept = coll.get(6).expect("get").expect("still there");
    assert!(
        kept.get("t").is_none(),
        "the refused replacement changed nothing: {kept}"
    );
    coll.delete_one(doc! { "_id": 6 }).expect("delete");
    assert!(
        coll.search("e", &[1.0, 0.0]).run().is_err(),
        "a query of the wrong dimension"
    );
    assert!(
        coll.search("e", &[f32::NAN, 0.0, 0.0]).run().is_err(),
        "a NaN query"
    );
    assert!(coll.search("e", &[1.0, 0.0, 0.0]).k(0).run().is_err(), "k = 0");
    let err = coll
        .search("nope", &[1.0, 0.0, 0.0])
        .run()
        .expect_err("unknown field");
    assert!(err.to_string().contains("nope"), "{err}");
    // A filter is parsed when it is set and its error reported when the
    // search runs; a later filter replaces it.
    let bad = doc! { "_id": { "$near": 1 } };
    let err = coll
        .search("e", &[1.0, 0.0, 0.0])
        .filter(&bad)
        .run()
        .expect_err("unknown operator");
    assert!(err.to_string().contains("$near"), "{err}");
    let good = doc! { "_id": { "$gte": 1 } };
    let borrowed = coll
        .search("e", &[1.0, 0.0, 0.0])
        .filter(&bad)
        .filter(&good)
        .run()
        .expect("the later filter replaces the bad one");
    let owned = coll
        .search("e", &[1.0, 0.0, 0.0])
        .filter(good.clone())
        .run()
        .expect("owned filter");
    assert_eq!(borrowed, owned);
    assert_eq!(borrowed.len(), 1);
    let none = coll
        .search("e", &[1.0, 0.0, 0.0])
        .filter(doc! { "_id": { "$gt": 1 } })
        .run()
        .expect("search");
    assert!(none.is_empty(), "no document matches");
    let hits = coll.search("e", &[0.0, 1.0, 0.0]).k(5).run().expect("search");
    assert_eq!(
        hits.len(),
        1,
        "fewer hits than k when fewer documents have vectors"
    );
    assert!(
        (hits[0].distance - 1.0).abs() < 1e-6,
        "cosine distance of orthogonal vectors is 1"
    );
}

#[test]
fn updates_and_deletes_keep_search_in_step_and_snapshots_stay_put() {
    let db = Db::memory();
    let coll = db
        .create_collection(CollectionConfig::new("u").index("g").vector("e", 2, Metric::L2))
        .expect("create");
    coll.insert_many((0..50i64).map(|i| doc! { "_id": i, "g": i % 5, "e": [i as f64, 0.0] }))
        .expect("insert");
    let near = |q: f32| -> Vec<i64> {
        coll.search("e", &[q, 0.0])
            .k(3)
            .run()
            .expect("search")
            .iter()
            .map(|h| h.id.as_i64().expect("id"))
            .collect()
    };
    assert_eq!(near(10.2), vec![10, 11, 9]);
    coll.update_one(doc! { "_id": 10 }, doc! { "$set": { "e": [100.0, 0.0] } }, false)
        .expect("update");
    assert_eq!(near(10.2), vec![11, 9, 12]);
    coll.delete_one(doc! { "_id": 11 }).expect("delete");
    assert_eq!(near(10.2), vec![9, 12, 8]);
    coll.update_many(doc! { "g": 2 }, doc! { "$set": { "x": 1 } }, false)
        .expect("update others");
    assert_eq!(
        near(100.0),
        vec![10, 49, 48],
        "an update of other fields keeps the vector"
    );
    coll.replace_one(doc! { "_id": 49 }, doc! { "g": 4 }, false)
        .expect("replace without vector");
    assert_eq!(
        near(100.0),
        vec![10, 48, 47],
        "a replacement without the field drops the vector"
    );
}

#[derive(Debug, Clone)]
enum VecOp {
    Insert(i64, [i8; 3], i64),
    SetVector(i64, [i8; 3]),
    SetGroup(i64, i64),
    Delete(i64),
}

/// A search among given ids (`{_id: {$in: [...]}}`: the keys are exactly
/// the matches, no document is read to check them) follows deletes and
/// vector changes, on both backends and with every strategy.
#[test]
fn a_search_among_given_ids_follows_writes() {
    for t in crate::backends() {
        let coll =
            t.db.create_collection(CollectionConfig::new("ids").vector("v", 2, Metric::L2))
                .expect("create");
        coll.insert_many((0..500i64).map(|i| doc! { "_id": i, "v": [i as f64, 0.0] }))
            .expect("insert");
        let among = doc! { "_id": { "$in": [10, 20, 30, 40, 9_999] } };
        let search = |strategy| -> Vec<(i64, f32)> {
            coll.search("v", &[0.0, 0.0])
                .k(3)
                .filter(among.clone())
                .strategy(strategy)
                .run()
                .expect("search")
                .iter()
                .map(|h| (h.id.as_i64().expect("id"), h.distance))
                .collect()
        };
        for strategy in [Strategy::Auto, Strategy::Gather, Strategy::Scan, Strategy::Bitmap] {
            assert_eq!(
                search(strategy),
                [(10, 100.0), (20, 400.0), (30, 900.0)],
                "{strategy}"
            );
        }
        coll.delete_one(doc! { "_id": 10 }).expect("delete");
        coll.update_one(doc! { "_id": 40 }, doc! { "$set": { "v": [1.0, 0.0] } }, false)
            .expect("update");
        for strategy in [Strategy::Auto, Strategy::Gather, Strategy::Scan, Strategy::Bitmap] {
            assert_eq!(
                search(strategy),
                [(40, 1.0), (20, 400.0), (30, 900.0)],
                "{strategy}"
            );
        }
    }
}

fn vec_ops() -> impl proptest::strategy::Strategy<Value = Vec<VecOp>> {
    use proptest::prelude::*;
    let v = || proptest::array::uniform3(-5i8..6);
    let op = prop_oneof![
        4 => (0..40i64, v(), 0..4i64).prop_map(|(i, v, g)| VecOp::Insert(i, v, g)),
        2 => (0..40i64, v()).prop_map(|(i, v)| VecOp::SetVector(i, v)),
        1 => (0..40i64, 0..4i64).prop_map(|(i, g)| VecOp::SetGroup(i, g)),
        2 => (0..40i64).prop_map(VecOp::Delete),
    ];
    proptest::collection::vec(op, 1..80)
}

fn as_bson(v: &[i8; 3]) -> Bson {
    Bson::Array(v.iter().map(|x| Bson::Double(f64::from(*x))).collect())
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(16))]
    #[test]
    fn search_equals_brute_force_after_random_writes_on_both_backends(ops in vec_ops(), q in proptest::array::uniform3(-5i8..6)) {
        let dir = tempfile::tempdir().expect("tempdir");
        let dbs = [Db::memory(), Db::builder(dir.path()).sync(false).open().expect("rocks")];
        for db in &dbs {
            let coll = db
                .create_collection(
                    CollectionConfig::new("r")
                        .index("g")
                        .vector_field_config(VectorField::new("v", 3, Metric::L2).with_codes(true)),
                )
                .expect("create");
            let mut model: std::collections::BTreeMap<i64, ([i8; 3], i64)> = Default::default();
            for op in &ops {
                match op {
                    VecOp::Insert(i, v, g) => {
                        let r = coll.insert_one(doc! { "_id": *i, "v": as_bson(v), "g": *g });
                        proptest::prop_assert_eq!(r.is_ok(), !model.contains_key(i));
                        model.entry(*i).or_insert((*v, *g));
                    }
                    VecOp::SetVector(i, v) => {
                        coll.update_one(doc! { "_id": *i }, doc! { "$set": { "v": as_bson(v) } }, false).expect("update");
                        if let Some(e) = model.get_mut(i) { e.0 = *v; }
                    }
                    VecOp::SetGroup(i, g) => {
                        coll.update_one(doc! { "_id": *i }, doc! { "$set": { "g": *g } }, false).expect("update");
                        if let Some(e) = model.get_mut(i) { e.1 = *g; }
                    }
                    VecOp::Delete(i) => {
                        coll.delete_one(doc! { "_id": *i }).expect("delete");
                        model.remove(i);
                    }
                }
            }
            let query: Vec<f32> = q.iter().map(|x| f32::from(*x)).collect();
            for filter in [doc! {}, doc! { "g": 1 }, doc! { "g": { "$in": [0, 3] } }] {
                let want_group = |g: i64| match filter.get("g") {
                    None => true,
                    Some(Bson::Int32(x)) => i64::from(*x) == g,
                    Some(_) => g == 0 || g == 3,
                };
                let mut want: Vec<(f32, i64)> = model
                    .iter()
                    .filter(|(_, (_, g))| want_group(*g))
                    .map(|(i, (v, _))| {
                        let v: Vec<f32> = v.iter().map(|x| f32::from(*x)).collect();
                        (slate::vector::scalar::distance(Metric::L2, &query, &v), *i)
                    })
                    .collect();
                want.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                want.truncate(5);
                for strategy in [Strategy::Auto, Strategy::Gather, Strategy::Scan] {
                    let hits = coll.search("v", &query).k(5).filter(filter.clone()).strategy(strategy).run().expect("search");
                    let got: Vec<(f32, i64)> = hits.iter().map(|h| (h.distance, h.id.as_i64().expect("id"))).collect();
                    proptest::prop_assert_eq!(&got, &want, "filter {} strategy {}", filter, strategy);
                }
            }
        }
    }
}

#[test]
fn search_hits_carry_each_documents_exact_id() {
    for t in crate::backends() {
        let coll =
            t.db.create_collection(CollectionConfig::new("ids").vector("v", 2, Metric::L2))
                .expect("create");
        let oid = bson::oid::ObjectId::from_bytes([7; 12]);
        coll.insert_many(vec![
            doc! { "_id": 1_i64, "v": [0.0, 0.0] },
            doc! { "_id": "s", "v": [1.0, 0.0] },
            doc! { "_id": oid, "v": [2.0, 0.0] },
        ])
        .expect("insert");
        let ids = |coll: &slate::Collection| -> Vec<Bson> {
            let hits = coll.search("v", &[0.0, 0.0]).k(10).run().expect("search");
            for h in &hits {
                assert_eq!(
                    h.doc,
                    doc! { "_id": h.id.clone() },
                    "[{}] the hit's document",
                    t.backend
                );
            }
            hits.into_iter().map(|h| h.id).collect()
        };
        // Bson's == tells an int32 from an int64.
        let want = vec![Bson::Int64(1), Bson::String("s".into()), Bson::ObjectId(oid)];
        assert_eq!(ids(&coll), want, "[{}]", t.backend);
        // The same id rewritten as an int32 (1 and 1i64 are one id): the hit
        // says int32, as the stored document does.
        coll.replace_one(
            doc! { "_id": 1_i64 },
            doc! { "_id": 1_i32, "v": [0.0, 0.0] },
            false,
        )
        .expect("replace");
        let want = vec![Bson::Int32(1), Bson::String("s".into()), Bson::ObjectId(oid)];
        assert_eq!(ids(&coll), want, "[{}] after an int32 rewrite", t.backend);
        let fresh =
            t.db.create_collection(CollectionConfig::new("ints").vector("v", 2, Metric::L2))
                .expect("create");
        fresh
            .insert_one(doc! { "_id": 7_i32, "v": [0.0, 1.0] })
            .expect("insert");
        assert_eq!(ids(&fresh), vec![Bson::Int32(7)], "[{}] an int32 id", t.backend);
    }
}

/// An unindexed filter's estimate comes from a sample spread over the
/// whole cache even when it stops early: matches bunched at the start (as
/// a filter on insertion time bunches them) are not taken for the rest.
#[test]
fn a_sampled_estimate_covers_the_whole_collection() {
    let db = Db::memory();
    let coll = db
        .create_collection(CollectionConfig::new("s").vector("v", 4, Metric::L2))
        .expect("create");
    let n = 5_000i64;
    let docs: Vec<Document> = (0..n)
        .map(|i| {
            let x = i as f64;
            doc! { "_id": i, "seq": i, "odd": i % 2, "v": [x.sin(), x.cos(), (x * 0.5).sin(), 1.0] }
        })
        .collect();
    coll.insert_many(docs).expect("insert");
    let filters = [
        (doc! { "seq": { "$lt": 500 } }, 500),
        (doc! { "seq": { "$gte": n - 500 } }, 500),
        (doc! { "seq": { "$lt": n - 500 } }, n - 500),
        (doc! { "odd": 1 }, n / 2),
        (doc! { "seq": { "$lt": 20 } }, 20),
    ];
    for (filter, matching) in filters {
        let (hits, explain) = coll
            .search("v", &[0.0, 1.0, 0.0, 1.0])
            .k(5)
            .filter(filter.clone())
            .explain()
            .expect("search");
        assert_eq!(hits.len(), 5, "{filter}");
        assert_eq!(explain.estimated_by, "sample", "{filter}");
        let (est, want) = (explain.estimate as f64, matching as f64);
        assert!(
            est >= want / 2.0 && est <= want * 2.0 + 50.0,
            "{filter}: estimated {est} of {want}"
        );
    }
}

type Model = std::collections::BTreeMap<i64, (Vec<f32>, i64, i64)>;

fn kept_vector(i: i64) -> Vec<f32> {
    (0..4).map(|j| ((i * 31 + j * 17) % 23) as f32 - 11.0).collect()
}

fn kept_doc(i: i64, v: &[f32], u: i64, tenant: i64) -> Document {
    let v: Vec<Bson> = v.iter().map(|x| Bson::Double(f64::from(*x))).collect();
    doc! { "_id": i, "v": v, "u": u, "g": i % 7, "tenant": tenant }
}

/// The 10 nearest of the model's documents with `u` = 7 in `tenants`.
fn kept_want(model: &Model, query: &[f32], tenants: &[i64]) -> Vec<(i64, f32)> {
    let mut all: Vec<(f32, i64, i64)> = model
        .iter()
        .filter(|(_, (_, u, t))| *u == 7 && tenants.contains(t))
        .map(|(i, (v, _, t))| (slate::vector::scalar::distance(Metric::L2, query, v), *t, *i))
        .collect();
    // Ties break on the document key: partition, then id.
    all.sort_by(|a, b| a.0.total_cmp(&b.0).then((a.1, a.2).cmp(&(b.1, b.2))));
    all.truncate(10);
    all.into_iter().map(|(d, _, i)| (i, d)).collect()
}

/// Every strategy's hits for `{u: 7}` (auto's first), each checked against
/// `want`; returns how auto estimated and where each strategy took its
/// candidates from.
fn kept_search(
    coll: &slate::Collection,
    query: &[f32],
    want: &[(i64, f32)],
    fresh: bool,
) -> Vec<&'static str> {
    let mut how = Vec::new();
    for strategy in [Strategy::Auto, Strategy::Gather, Strategy::Bitmap, Strategy::Scan] {
        let mut search = coll
            .search("v", query)
            .k(10)
            .filter(doc! { "u": 7 })
            .strategy(strategy);
        if fresh {
            search = search.fresh();
        }
        let (hits, explain) = search.explain().unwrap_or_else(|e| panic!("{strategy}: {e}"));
        let got: Vec<(i64, f32)> = hits
            .iter()
            .map(|h| (h.id.as_i64().expect("id"), h.distance))
            .collect();
        assert_eq!(got, want, "{strategy}: {explain}");
        how.push(if strategy == Strategy::Auto {
            explain.estimated_by
        } else {
            explain.candidates_from
        });
    }
    how
}

/// How auto estimated `{u: 7}` and where it took its candidates from, its
/// hits checked against `want`.
fn kept_auto(coll: &slate::Collection, query: &[f32], want: &[(i64, f32)]) -> (&'static str, &'static str) {
    let (hits, explain) = coll
        .search("v", query)
        .k(10)
        .filter(doc! { "u": 7 })
        .explain()
        .expect("search");
    let got: Vec<(i64, f32)> = hits
        .iter()
        .map(|h| (h.id.as_i64().expect("id"), h.distance))
        .collect();
    assert_eq!(got, want, "{explain}");
    (explain.estimated_by, explain.candidates_from)
}

/// A filter no index narrows keeps its matching rows at its second search
/// at one version planned by auto (or at the first gather or bitmap);
/// later searches at that version take them as an exact index's, and every
/// commit to the collection (a change to a field of the filter that leaves
/// the vector alone included) moves searches to a version where they are
/// found again from the documents, from the second search there; a commit
/// to another collection does not. Each search is checked
/// against brute force.
#[test]
fn kept_matches_of_an_unindexed_filter_follow_every_write() {
    for t in crate::backends() {
        let coll =
            t.db.create_collection(
                CollectionConfig::new("k")
                    .index("g")
                    .vector_field_config(VectorField::new("v", 4, Metric::L2).with_codes(true)),
            )
            .expect("create");
        let other =
            t.db.create_collection(CollectionConfig::new("other"))
                .expect("create");
        // 10% match, spread without a period (a sample of evenly spaced
        // rows could alias with one): auto scans, checking documents
        // lazily, at first sight.
        let u = |i: i64| (i * 2_654_435_761 % (1 << 32)) % 10;
        let mut model: Model = (0..2000).map(|i| (i, (kept_vector(i), u(i), 0))).collect();
        coll.insert_many(model.iter().map(|(i, (v, u, t))| kept_doc(*i, v, *u, *t)))
            .expect("insert");
        // Document 4's vector: it will be the nearest once it matches.
        assert_ne!(u(4), 7);
        let query = kept_vector(4);
        let want = |model: &Model| kept_want(model, &query, &[0]);
        let b = t.backend;

        // Under `fresh`, nothing is kept: gather and bitmap find the
        // matches from the documents every time.
        for _ in 0..2 {
            assert_eq!(
                kept_search(&coll, &query, &want(&model), true),
                ["sample", "documents", "documents", ""],
                "{b}"
            );
        }
        // Auto notes the filter, forced gather keeps its pass's matches,
        // and the rest use them.
        assert_eq!(
            kept_search(&coll, &query, &want(&model), false)[0],
            "sample",
            "{b}"
        );
        assert_eq!(
            kept_search(&coll, &query, &want(&model), false),
            ["kept matches"; 4],
            "{b}"
        );

        // After every commit to the collection, the first search brings
        // them forward to the new version, reading the documents written.
        // A field of the filter changed, the vector not:
        coll.update_one(doc! { "_id": 4 }, doc! { "$set": { "u": 7 } }, false)
            .expect("update");
        model.get_mut(&4).expect("4").1 = 7;
        assert_eq!(want(&model)[0], (4, 0.0));
        let again = |model: &Model| {
            assert_eq!(
                kept_auto(&coll, &query, &want(model)),
                ("kept matches, updated", "kept matches"),
                "{b}"
            );
            // Exactly the matches: none of a row retired, none missing.
            let (_, explain) = coll
                .search("v", &query)
                .k(10)
                .filter(doc! { "u": 7 })
                .explain()
                .expect("search");
            assert_eq!(explain.estimated_by, "kept matches", "{b}");
            let matching = model.values().filter(|(_, u, _)| *u == 7).count();
            assert_eq!(explain.estimate as usize, matching, "{b}");
            assert_eq!(kept_auto(&coll, &query, &want(model)).0, "kept matches", "{b}");
            assert_eq!(
                kept_search(&coll, &query, &want(model), false),
                ["kept matches"; 4],
                "{b}"
            );
        };
        again(&model);
        // A commit to another collection leaves this one as it was: what
        // was kept stays in use.
        other.insert_one(doc! { "x": 1 }).expect("insert");
        assert_eq!(
            kept_search(&coll, &query, &want(&model), false),
            ["kept matches"; 4],
            "{b}"
        );
        // A delete, an insert, and a change of vector.
        coll.delete_one(doc! { "_id": 7 }).expect("delete");
        model.remove(&7);
        again(&model);
        coll.insert_one(kept_doc(5000, &query, 7, 0)).expect("insert");
        model.insert(5000, (query.to_vec(), 7, 0));
        assert!(want(&model).contains(&(5000, 0.0)));
        again(&model);
        let moved: Vec<Bson> = query.iter().map(|x| Bson::Double(f64::from(*x) + 0.5)).collect();
        coll.update_one(doc! { "_id": 4 }, doc! { "$set": { "v": moved } }, false)
            .expect("update");
        model.get_mut(&4).expect("4").0 = query.iter().map(|x| x + 0.5).collect();
        assert!(!want(&model).contains(&(4, 0.0)));
        again(&model);
        // A commit writing more documents than a quarter of the rows: found
        // again from the documents (at 10% of 2,000 rows of dim 4, auto
        // gathers, and gather keeps what its pass found).
        coll.update_many(doc! { "_id": { "$lt": 600 } }, doc! { "$inc": { "t": 0 } }, false)
            .expect("update");
        assert_eq!(
            kept_auto(&coll, &query, &want(&model)),
            ("sample", "documents"),
            "{b}"
        );
        assert_eq!(
            kept_search(&coll, &query, &want(&model), false),
            ["kept matches"; 4],
            "{b}"
        );
        // `fresh` ignores what is kept.
        assert_eq!(
            kept_search(&coll, &query, &want(&model), true),
            ["sample", "documents", "documents", ""],
            "{b}"
        );
    }
}

/// Auto keeps a filter's matches at its second search at one version when
/// searching them costs under half what the filter costs (50% of the
/// rows), and not otherwise (every row).
#[test]
fn auto_keeps_matches_at_its_second_search_when_they_pay() {
    for t in crate::backends() {
        let coll =
            t.db.create_collection(CollectionConfig::new("a").vector("v", 64, Metric::L2))
                .expect("create");
        let vector =
            |i: i64| -> Vec<f32> { (0..64).map(|j| ((i * 37 + j * 11) % 29) as f32 - 14.0).collect() };
        coll.insert_many((0..2000i64).map(|i| {
            let v: Vec<Bson> = vector(i).iter().map(|x| Bson::Double(f64::from(*x))).collect();
            doc! { "_id": i, "v": v, "half": i % 2, "all": true }
        }))
        .expect("insert");
        let query = vector(5);
        let b = t.backend;
        for (filter, keeps) in [(doc! { "half": 1 }, true), (doc! { "all": true }, false)] {
            let mut want: Vec<(f32, i64)> = (0..2000i64)
                .filter(|i| !keeps || i % 2 == 1)
                .map(|i| (slate::vector::scalar::distance(Metric::L2, &query, &vector(i)), i))
                .collect();
            want.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            want.truncate(10);
            let mut how = Vec::new();
            for _ in 0..3 {
                let (hits, explain) = coll
                    .search("v", &query)
                    .k(10)
                    .filter(filter.clone())
                    .explain()
                    .expect("search");
                let got: Vec<(f32, i64)> = hits
                    .iter()
                    .map(|h| (h.distance, h.id.as_i64().expect("id")))
                    .collect();
                assert_eq!(got, want, "{b} {filter}: {explain}");
                assert_eq!(
                    explain.strategy == Strategy::Scan,
                    how.is_empty() || !keeps,
                    "{b} {filter}: {explain}"
                );
                how.push(explain.estimated_by);
            }
            let want_how = if keeps {
                ["sample", "documents, kept", "kept matches"]
            } else {
                ["sample"; 3]
            };
            assert_eq!(how, want_how, "{b} {filter}");
        }
    }
}

/// A collection partitioned by `tenant` with a 4-d vector field, holding
/// documents `0..n` as [`kept_doc`] writes them (`u = i % 50`, tenant
/// `i % 3`), and their model.
fn tenants_collection(db: &slate::Db, name: &str, n: i64) -> (slate::Collection, Model) {
    let coll = db
        .create_collection(
            CollectionConfig::new(name)
                .partition_key("tenant")
                .vector_field_config(VectorField::new("v", 4, Metric::L2)),
        )
        .expect("create");
    let model: Model = (0..n).map(|i| (i, (kept_vector(i), i % 50, i % 3))).collect();
    coll.partitions(vec![Bson::Int64(0), Bson::Int64(1), Bson::Int64(2)])
        .insert_many(model.iter().map(|(i, (v, u, t))| kept_doc(*i, v, *u, *t)))
        .expect("insert");
    (coll, model)
}

/// Matches kept for one partition are not another's, nor a pair's.
#[test]
fn kept_matches_belong_to_their_partitions() {
    for t in crate::backends() {
        let (coll, mut model) = tenants_collection(&t.db, "kp", 3000);
        let query = [3.0f32, 1.0, -2.0, 0.5];
        let b = t.backend;
        let scopes = [vec![0], vec![1], vec![0, 1], vec![2]];
        let scoped = |tenants: &[i64]| coll.partitions(tenants.iter().map(|t| Bson::Int64(*t)).collect());
        for tenants in &scopes {
            let scoped = scoped(tenants);
            let want = kept_want(&model, &query, tenants);
            assert_eq!(
                kept_search(&scoped, &query, &want, false)[0],
                "sample",
                "{b} {tenants:?}"
            );
            assert_eq!(
                kept_search(&scoped, &query, &want, false),
                ["kept matches"; 4],
                "{b} {tenants:?}"
            );
        }
        // A matching document written to partition 1, nearest of all: each
        // scope's matches are brought forward, with it where partition 1
        // is searched.
        coll.partitions(vec![Bson::Int64(1)])
            .insert_one(kept_doc(9000, &query, 7, 1))
            .expect("insert");
        model.insert(9000, (query.to_vec(), 7, 1));
        for tenants in &scopes {
            let scoped = scoped(tenants);
            let want = kept_want(&model, &query, tenants);
            assert_eq!(want[0] == (9000, 0.0), tenants.contains(&1), "{tenants:?}");
            assert_eq!(
                kept_search(&scoped, &query, &want, false),
                [
                    "kept matches, updated",
                    "kept matches",
                    "kept matches",
                    "kept matches"
                ],
                "{b} {tenants:?}"
            );
        }
    }
}

/// A forced bitmap search without a filter reads every row, as a scan
/// does, and returns the scan's hits: in the whole collection and in a
/// scope of partitions, whose other partitions' rows it leaves out.
#[test]
fn a_bitmap_without_a_filter_returns_the_scans_hits() {
    for t in crate::backends() {
        let (coll, model) = tenants_collection(&t.db, "bf", 600);
        let query = [3.0f32, 1.0, -2.0, 0.5];
        let b = t.backend;
        for tenants in [vec![0, 1, 2], vec![1], vec![0, 2]] {
            let scoped = coll.partitions(tenants.iter().map(|t| Bson::Int64(*t)).collect());
            let mut all: Vec<(f32, i64, i64)> = model
                .iter()
                .filter(|(_, (_, _, t))| tenants.contains(t))
                .map(|(i, (v, _, t))| (slate::vector::scalar::distance(Metric::L2, &query, v), *t, *i))
                .collect();
            // Ties break on the document key: partition, then id.
            all.sort_by(|a, b| a.0.total_cmp(&b.0).then((a.1, a.2).cmp(&(b.1, b.2))));
            let want: Vec<(i64, f32)> = all.into_iter().take(10).map(|(d, _, i)| (i, d)).collect();
            for strategy in [Strategy::Scan, Strategy::Bitmap] {
                let (hits, explain) = scoped
                    .search("v", &query)
                    .k(10)
                    .strategy(strategy)
                    .explain()
                    .unwrap_or_else(|e| panic!("{b} {tenants:?} {strategy}: {e}"));
                let got: Vec<(i64, f32)> = hits
                    .iter()
                    .map(|h| (h.id.as_i64().expect("id"), h.distance))
                    .collect();
                assert_eq!(got, want, "{b} {tenants:?} {strategy}");
                assert_eq!(explain.strategy, strategy, "{b} {tenants:?}");
            }
        }
    }
}

/// A search bounded by `max_bytes` is refused, naming the bound, once its
/// hits' documents pass it (counted as they are read, before they are
/// built), and answers in full under it; a batch counts all its queries'
/// hits together. Hits of `_id`s only are not counted. (A server passes
/// its reply bound: 100,000 hits of large documents used to be built in
/// full, then refused as a frame.)
#[test]
fn a_search_past_its_byte_bound_is_refused_before_building_its_hits() {
    for t in crate::backends() {
        let coll =
            t.db.create_collection(CollectionConfig::new("big").vector("v", 2, Metric::L2))
                .expect("create");
        let blob = "x".repeat(100_000);
        coll.insert_many((0..200i64).map(|i| doc! { "_id": i, "v": [i as f64, 0.0], "blob": &blob, "n": i }))
            .expect("insert");
        let b = t.backend;
        let search = |k: usize, field: &str, bytes: usize| {
            coll.search("v", &[0.0, 0.0])
                .k(k)
                .project([field])
                .max_bytes(bytes)
                .run()
        };
        // 10 documents projected to their 100 KB blob each.
        let hits = search(10, "blob", 2_000_000).expect("under the bound");
        assert_eq!(hits.len(), 10, "{b}");
        assert_eq!(hits[3].id, Bson::Int64(3), "{b}");
        let err = search(10, "blob", 500_000)
            .expect_err("past the bound")
            .to_string();
        assert!(err.contains("500000 bytes"), "{b}: {err}");
        // What is counted is what the hits carry: 200 hits of a small
        // field pass a bound one stored document would exceed.
        let hits = search(200, "n", 50_000).expect("small projections");
        assert_eq!(hits.len(), 200, "{b}");
        assert_eq!(hits[199].doc.get_i64("n").expect("n"), 199, "{b}");
        // Ids only: nothing counted.
        let ids = coll
            .search("v", &[0.0, 0.0])
            .k(200)
            .max_bytes(1)
            .run()
            .expect("ids");
        assert_eq!(ids.len(), 200, "{b}");
        // A batch of two queries of 10 hits: 20 documents together.
        let queries = [0.0f32, 0.0, 100.0, 0.0];
        let proj = ["blob".to_owned()];
        let within = |bytes| coll.search_batch_within("v", &queries, 10, 1, Some(&proj[..]), Some(bytes));
        assert_eq!(within(4_000_000).expect("under").len(), 2, "{b}");
        let err = within(1_500_000).expect_err("two queries pass it").to_string();
        assert!(err.contains("1500000 bytes"), "{b}: {err}");

        // A partitioned collection's batch runs its queries one by one,
        // under the same bound.
        let parted =
            t.db.create_collection(CollectionConfig::new("parted").partition_key("t").vector(
                "v",
                2,
                Metric::L2,
            ))
            .expect("create");
        let tenant = parted.partition(1i64);
        tenant
            .insert_many(
                (0..50i64).map(|i| doc! { "_id": i, "t": 1i64, "v": [i as f64, 0.0], "blob": &blob }),
            )
            .expect("insert");
        let within = |bytes| tenant.search_batch_within("v", &queries, 10, 1, Some(&proj[..]), Some(bytes));
        assert_eq!(within(4_000_000).expect("under").len(), 2, "{b}");
        let err = within(1_500_000).expect_err("two queries pass it").to_string();
        assert!(err.contains("1500000 bytes"), "{b}: {err}");
    }
}

/// A filtered search that meets a document it cannot read (damaged bytes on
/// disk) fails, naming it, under every strategy: counting the document out
/// would return hits that are not the filter's nearest.
#[test]
fn a_search_meeting_a_damaged_document_fails_instead_of_skipping_it() {
    use slate::core::store::{Batch, Direction, Op, Store};
    use slate::core::{KeyRange, RocksStore};
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let db = Db::builder(dir.path()).sync(false).open().expect("rocks");
        let docs: Vec<Document> = (0..50)
            .map(|i| doc! { "_id": i, "n": i, "v": [i as f64, 0.0] })
            .collect();
        db.create_collection(CollectionConfig::new("c").vector("v", 2, Metric::L2))
            .expect("create")
            .insert_many(docs)
            .expect("insert");
    }
    {
        // The document nearest the query, `_id` 0, damaged in place.
        let store = RocksStore::open(dir.path()).expect("store");
        let cf = store
            .list_cfs()
            .into_iter()
            .find(|cf| !cf.starts_with("__") && cf != "default")
            .expect("the collection's column family");
        let key = {
            let snap = store.snapshot();
            let mut docs = snap
                .range(&cf, &KeyRange::prefix(b"d:"), Direction::Forward)
                .expect("range");
            let (key, _) = docs.next().expect("a document").expect("entry");
            key.into_owned()
        };
        let value: slate::core::store::Bytes = vec![9u8, 0, 0, 0, 1].into();
        let batch = Batch {
            ops: vec![(cf, vec![Op::Put { key, value }])],
        };
        store.apply(batch, &mut |_| {}).expect("damage");
    }
    let db = Db::builder(dir.path()).sync(false).open().expect("reopen");
    let coll = db.collection("c").expect("collection");
    for strategy in [Strategy::Scan, Strategy::Gather, Strategy::Bitmap, Strategy::Auto] {
        let err = coll
            .search("v", &[0.0, 0.0])
            .k(3)
            .filter(doc! { "n": { "$gte": 0 } })
            .strategy(strategy)
            .fresh()
            .run()
            .expect_err(&format!("{strategy}: a damaged document is an error"));
        assert!(err.to_string().contains("corrupt"), "{strategy}: {err}");
    }
}

/// A write that keeps a document's vector and index entries keeps its row,
/// tags and all; an index dropped and created again after such a write
/// must not serve the row's old tag for it: searches under every strategy
/// still return what brute force returns.
#[test]
fn a_dropped_index_is_never_answered_from_rows_kept_since() {
    for t in crate::backends() {
        let coll =
            t.db.create_collection(CollectionConfig::new("c").index("a").vector("v", 2, Metric::L2))
                .expect("create");
        coll.insert_many((0..8).map(|i| doc! { "_id": i, "a": i, "v": [f64::from(i), 0.0] }))
            .expect("insert");
        coll.drop_index("a").expect("drop");
        coll.update_one(doc! { "_id": 3 }, doc! { "$set": { "a": 100 } }, false)
            .expect("update");
        coll.create_index("a").expect("create again");
        for strategy in [Strategy::Gather, Strategy::Bitmap, Strategy::Scan, Strategy::Auto] {
            let ids = |filter: Document| -> Vec<i32> {
                coll.search("v", &[3.0, 0.0])
                    .k(1)
                    .filter(filter)
                    .strategy(strategy)
                    .run()
                    .expect("search")
                    .iter()
                    .map(|h| h.id.as_i32().expect("id"))
                    .collect()
            };
            assert_eq!(
                ids(doc! { "a": 3 }),
                Vec::<i32>::new(),
                "{strategy}: a is 100 now"
            );
            assert_eq!(ids(doc! { "a": 100 }), vec![3], "{strategy}");
        }
    }
}

/// A vector field's path runs through documents only: a document whose path
/// to it crosses an array is refused (the vector would stay in the document,
/// where no search finds it), and two vector fields one inside the other
/// are refused when the collection is created.
#[test]
fn vector_paths_through_arrays_and_nested_vector_fields_are_refused() {
    for t in crate::backends() {
        let b = t.backend;
        let coll =
            t.db.create_collection(CollectionConfig::new("p").vector("emb.v", 3, Metric::L2))
                .expect("create");
        let err = coll
            .insert_one(doc! { "_id": 1, "emb": [{ "v": [1.0, 2.0, 3.0] }] })
            .expect_err("through an array");
        assert!(err.to_string().contains("through an array"), "[{b}] {err}");
        assert_eq!(coll.count(doc! {}).expect("count"), 0, "[{b}] nothing written");
        coll.insert_one(doc! { "_id": 2, "emb": { "v": [1.0, 2.0, 3.0] } })
            .expect("through a document");
        coll.insert_one(doc! { "_id": 3, "emb": 7 })
            .expect("a scalar on the way: no vector");
        // Arrays where no element holds the path strand nothing: no vector.
        coll.insert_one(doc! { "_id": 4, "emb": [] })
            .expect("an empty array");
        coll.insert_one(doc! { "_id": 5, "emb": [1, { "w": 1 }] })
            .expect("no element holds v");
        coll.update_many(doc! {}, doc! { "$set": { "flag": true } }, false)
            .expect("they update");
        let hits = coll.search("emb.v", &[1.0, 2.0, 3.0]).run().expect("search");
        assert_eq!(hits.len(), 1, "[{b}]");
        for (a, c) in [("emb", "emb.v"), ("emb.v", "emb")] {
            let err =
                t.db.create_collection(CollectionConfig::new("o").vector(a, 2, Metric::L2).vector(
                    c,
                    2,
                    Metric::L2,
                ))
                .expect_err("nested vector fields");
            assert!(err.to_string().contains("inside the other"), "[{b}] {err}");
        }
    }
}
