//! Document-query bench (seed 000's query table): the 8-field record schema,
//! `status` indexed, the same queries against Slate's MemoryStore, Slate's
//! RocksStore (reopened after loading, so reads come from files) and SQLite
//! in-process (a real table with columns and an index on `status`).
//!
//! N defaults to 10,000; set `SLATE_BENCH_DOCS_N` to one size or a comma list,
//! e.g. `SLATE_BENCH_DOCS_N=10000,100000`. Benchmarks are named
//! `documents/{N}/{query}/{slate-memory|slate-rocks|sqlite}`. At setup every query
//! is run once on each backend and the row counts asserted equal, so the three
//! backends always do the same work.
//!
//! The `slate-*` rows return `bson::Document`s. The `slate-*-typed` rows run
//! the same query with `run_as` (lookups: `get_as`, `get_many_as`) into a struct of the same fields SQLite's rows
//! are read into (`TypedRow`, or `NameStatus` for the projection), so that
//! pair compares like with like: each field decoded into an owned Rust value.

// Like every Slate binary: glibc malloc slows the per-document buffers (README, "Allocator").
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, BatchSize, Criterion, Throughput};
use rusqlite::{params, Connection};
use slate::bson::{doc, Bson, DateTime, Document};
use slate::{Collection, CollectionConfig, Db};

const COLL: &str = "docs";
const LOOKUPS: usize = 1_000;

fn sizes() -> Vec<usize> {
    let raw = std::env::var("SLATE_BENCH_DOCS_N").unwrap_or_default();
    let sizes: Vec<usize> = raw
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .filter(|&n| n > 0)
        .collect();
    if sizes.is_empty() {
        vec![10_000]
    } else {
        sizes
    }
}

/// xorshift64: deterministic, no `rand`.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

#[derive(Debug, Clone)]
struct Rec {
    id: i64,
    name: String,
    status: &'static str,
    contacts_count: i64,
    rec1: &'static str,
    rec2: &'static str,
    rec3: &'static str,
    last_contacted_at: Option<i64>,
    notes: Option<String>,
}

const SYLLABLES: &[&str] = &["ka", "lo", "mi", "ra", "to", "ne", "su", "vi", "da", "pe"];
const BASE_MS: i64 = 1_700_000_000_000;

fn records(n: usize) -> Vec<Rec> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    (0..n)
        .map(|i| {
            let name: String = (0..3).map(|_| rng.pick(SYLLABLES)).collect::<Vec<_>>().join("");
            let status = if rng.below(2) == 0 { "active" } else { "rejected" };
            let contacts_count = rng.below(101) as i64;
            let rec1 = ["ProductA", "ProductB", "ProductC"][rng.below(3) as usize];
            let rec2 = ["ProductX", "ProductY", "ProductZ"][rng.below(3) as usize];
            let rec3 = ["Widget1", "Widget2", "Widget3"][rng.below(3) as usize];
            let last_contacted_at = if rng.below(10) < 3 {
                None
            } else {
                Some(BASE_MS - rng.below(365 * 24 * 3600 * 1000) as i64)
            };
            let notes = if rng.below(2) == 0 {
                None
            } else {
                Some(format!("note {} for {name}", rng.below(1_000_000)))
            };
            Rec {
                id: i as i64,
                name: format!("{name} {i}"),
                status,
                contacts_count,
                rec1,
                rec2,
                rec3,
                last_contacted_at,
                notes,
            }
        })
        .collect()
}

fn to_doc(r: &Rec) -> Document {
    doc! {
        "_id": r.id,
        "name": r.name.as_str(),
        "status": r.status,
        "contacts_count": r.contacts_count,
        "product_recommendation1": r.rec1,
        "product_recommendation2": r.rec2,
        "product_recommendation3": r.rec3,
        "last_contacted_at": r.last_contacted_at.map_or(Bson::Null, |ms| Bson::DateTime(DateTime::from_millis(ms))),
        "notes": r.notes.as_deref().map_or(Bson::Null, |s| Bson::String(s.to_owned())),
    }
}

/// Inserts `docs` in `insert_many` calls of `per` documents (one call, the
/// `Vec` handed over as it is, when they all fit).
fn insert_batches(coll: &Collection, docs: Vec<Document>, per: usize) {
    if docs.len() <= per {
        coll.insert_many(docs).expect("insert");
        return;
    }
    let mut docs = docs.into_iter();
    loop {
        let batch: Vec<Document> = docs.by_ref().take(per).collect();
        if batch.is_empty() {
            return;
        }
        coll.insert_many(batch).expect("insert");
    }
}

fn config() -> CollectionConfig {
    CollectionConfig::new(COLL).index("status")
}

// ---------------------------------------------------------------- SQLite side

const SQL_COLS: &str = "id, name, status, contacts_count, product_recommendation1, \
     product_recommendation2, product_recommendation3, last_contacted_at, notes";

/// One SQLite row read into Rust values (every column).
#[derive(Debug)]
#[allow(dead_code)]
struct Row {
    id: i64,
    name: String,
    status: String,
    contacts_count: i64,
    rec1: String,
    rec2: String,
    rec3: String,
    last_contacted_at: Option<i64>,
    notes: Option<String>,
}

fn read_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok(Row {
        id: r.get(0)?,
        name: r.get(1)?,
        status: r.get(2)?,
        contacts_count: r.get(3)?,
        rec1: r.get(4)?,
        rec2: r.get(5)?,
        rec3: r.get(6)?,
        last_contacted_at: r.get(7)?,
        notes: r.get(8)?,
    })
}

fn sqlite_schema(conn: &Connection) {
    conn.execute_batch(
        "PRAGMA journal_mode = WAL;
         PRAGMA synchronous = OFF;
         CREATE TABLE docs (
             id INTEGER PRIMARY KEY,
             name TEXT NOT NULL,
             status TEXT NOT NULL,
             contacts_count INTEGER NOT NULL,
             product_recommendation1 TEXT NOT NULL,
             product_recommendation2 TEXT NOT NULL,
             product_recommendation3 TEXT NOT NULL,
             last_contacted_at INTEGER,
             notes TEXT
         );
         CREATE INDEX docs_status ON docs (status);",
    )
    .expect("sqlite schema");
}

fn sqlite_load(conn: &mut Connection, recs: &[Rec]) {
    let tx = conn.transaction().expect("sqlite tx");
    {
        let mut stmt = tx
            .prepare_cached(&format!(
                "INSERT INTO docs ({SQL_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
            ))
            .expect("prepare insert");
        for r in recs {
            stmt.execute(params![
                r.id,
                r.name,
                r.status,
                r.contacts_count,
                r.rec1,
                r.rec2,
                r.rec3,
                r.last_contacted_at,
                r.notes
            ])
            .expect("sqlite insert");
        }
    }
    tx.commit().expect("sqlite commit");
}

fn sql_rows(conn: &Connection, sql: &str) -> usize {
    let mut stmt = conn.prepare_cached(sql).expect("prepare");
    let rows: Vec<Row> = stmt
        .query_map([], read_row)
        .expect("query")
        .collect::<rusqlite::Result<_>>()
        .expect("rows");
    black_box(&rows);
    rows.len()
}

fn sql_projection(conn: &Connection) -> usize {
    let mut stmt = conn
        .prepare_cached("SELECT id, name, status FROM docs")
        .expect("prepare");
    let rows: Vec<(i64, String, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .expect("query")
        .collect::<rusqlite::Result<_>>()
        .expect("rows");
    black_box(&rows);
    rows.len()
}

fn sql_lookups_batch(conn: &Connection, ids: &[i64]) -> usize {
    let list: Vec<String> = ids.iter().map(i64::to_string).collect();
    sql_rows(
        conn,
        &format!("SELECT {SQL_COLS} FROM docs WHERE id IN ({})", list.join(",")),
    )
}

fn sql_lookups(conn: &Connection, ids: &[i64]) -> usize {
    let mut stmt = conn
        .prepare_cached(&format!("SELECT {SQL_COLS} FROM docs WHERE id = ?1"))
        .expect("prepare");
    let rows: Vec<Row> = ids
        .iter()
        .map(|id| stmt.query_row([id], read_row).expect("lookup"))
        .collect();
    black_box(&rows);
    rows.len()
}

// ------------------------------------------------------------------ Slate side

/// One Slate document read into Rust values: the fields of SQLite's [`Row`].
#[derive(Debug, serde::Deserialize)]
#[allow(dead_code)]
struct TypedRow {
    #[serde(rename = "_id")]
    id: i64,
    name: String,
    status: String,
    contacts_count: i64,
    #[serde(rename = "product_recommendation1")]
    rec1: String,
    #[serde(rename = "product_recommendation2")]
    rec2: String,
    #[serde(rename = "product_recommendation3")]
    rec3: String,
    /// A BSON date, read as SQLite's column is: milliseconds since the epoch.
    last_contacted_at: Option<i64>,
    notes: Option<String>,
}

/// The projection's row, as SQLite's `(id, name, status)`.
#[derive(Debug, serde::Deserialize)]
#[allow(dead_code)]
struct NameStatus {
    #[serde(rename = "_id")]
    id: i64,
    name: String,
    status: String,
}

fn slate_typed<T: serde::de::DeserializeOwned + Send>(find: slate::Find<'_>) -> usize {
    let rows: Vec<T> = find.run_as().expect("typed find");
    black_box(&rows);
    rows.len()
}

fn slate_rows(find: slate::Find<'_>) -> usize {
    let docs = find.run().expect("find");
    black_box(&docs);
    docs.len()
}

/// Seed 000's row: one `get` per id, each a full `Document`.
fn slate_lookups(coll: &Collection, ids: &[Bson]) -> usize {
    let mut found = 0;
    for id in ids {
        if let Some(d) = coll.get(id.clone()).expect("get") {
            black_box(d);
            found += 1;
        }
    }
    found
}

/// Seed 000's row with each document read into a [`TypedRow`].
fn slate_lookups_typed(coll: &Collection, ids: &[Bson]) -> usize {
    let mut found = 0;
    for id in ids {
        if let Some(d) = coll.get_as::<TypedRow>(id.clone()).expect("get_as") {
            black_box(d);
            found += 1;
        }
    }
    found
}

/// The same ids in one `get_many_as`.
fn slate_lookups_batch_typed(coll: &Collection, ids: &[Bson]) -> usize {
    let docs: Vec<Option<TypedRow>> = coll.get_many_as(ids).expect("get_many_as");
    let found = docs.iter().filter(|d| d.is_some()).count();
    black_box(&docs);
    found
}

/// The same ids in one `get_many`.
fn slate_lookups_batch(coll: &Collection, ids: &[Bson]) -> usize {
    let docs = coll.get_many(ids).expect("get_many");
    let found = docs.iter().filter(|d| d.is_some()).count();
    black_box(&docs);
    found
}

// --------------------------------------------------------------------- queries

type SlateFn = Box<dyn Fn(&Collection) -> usize>;
type SqlFn = Box<dyn Fn(&Connection) -> usize>;

struct Query {
    name: &'static str,
    slate: SlateFn,
    /// The same query decoded into a struct (finds only).
    typed: Option<SlateFn>,
    sql: SqlFn,
}

fn find_query(
    name: &'static str,
    build: fn(&Collection) -> slate::Find<'_>,
    where_sql: &'static str,
) -> Query {
    let sql = format!("SELECT {SQL_COLS} FROM docs {where_sql}");
    Query {
        name,
        slate: Box::new(move |c| slate_rows(build(c))),
        typed: Some(Box::new(move |c| slate_typed::<TypedRow>(build(c)))),
        sql: Box::new(move |conn| sql_rows(conn, &sql)),
    }
}

/// [`find_query`] whose find captures values (`build` is cloned into both
/// the document and the typed run) and whose SQL is built at run time.
fn find_query_owned(
    name: &'static str,
    build: impl Fn(&Collection) -> slate::Find<'_> + Clone + 'static,
    where_sql: String,
) -> Query {
    let sql = format!("SELECT {SQL_COLS} FROM docs {where_sql}");
    let typed = build.clone();
    Query {
        name,
        slate: Box::new(move |c| slate_rows(build(c))),
        typed: Some(Box::new(move |c| slate_typed::<TypedRow>(typed(c)))),
        sql: Box::new(move |conn| sql_rows(conn, &sql)),
    }
}

fn queries(lookup_ids: Vec<i64>) -> Vec<Query> {
    let bson_ids: Vec<Bson> = lookup_ids.iter().map(|&i| Bson::Int64(i)).collect();
    let batch_ids = bson_ids.clone();
    let typed_ids = bson_ids.clone();
    let typed_batch_ids = bson_ids.clone();
    let batch_sql_ids = lookup_ids.clone();
    let in_ids = bson_ids.clone();
    let in_sql_ids = lookup_ids.clone();
    vec![
        find_query("full_scan", |c| c.find(doc! {}), ""),
        find_query(
            "status_active",
            |c| c.find(doc! { "status": "active" }),
            "WHERE status = 'active'",
        ),
        find_query(
            "rec1_producta",
            |c| c.find(doc! { "product_recommendation1": "ProductA" }),
            "WHERE product_recommendation1 = 'ProductA'",
        ),
        find_query(
            "status_rec1_rec2_and",
            |c| {
                c.find(doc! {
                    "status": "active",
                    "product_recommendation1": "ProductA",
                    "product_recommendation2": "ProductX",
                })
            },
            "WHERE status = 'active' AND product_recommendation1 = 'ProductA' \
             AND product_recommendation2 = 'ProductX'",
        ),
        find_query(
            "status_sort_skip10_limit50",
            |c| {
                c.find(doc! { "status": "active" })
                    .sort("contacts_count")
                    .skip(10)
                    .limit(50)
            },
            "WHERE status = 'active' ORDER BY contacts_count LIMIT 50 OFFSET 10",
        ),
        find_query(
            "status_limit200",
            |c| c.find(doc! { "status": "active" }).limit(200),
            "WHERE status = 'active' LIMIT 200",
        ),
        find_query(
            "status_sort_limit200",
            |c| {
                c.find(doc! { "status": "active" })
                    .sort("contacts_count")
                    .limit(200)
            },
            "WHERE status = 'active' ORDER BY contacts_count LIMIT 200",
        ),
        // A sort the index answers: read in the index's order, stopped at
        // the limit (no filter, so nothing else narrows it).
        find_query(
            "sort_by_status_limit200",
            |c| c.find(doc! {}).sort("status").limit(200),
            "ORDER BY status LIMIT 200",
        ),
        find_query(
            "last_contacted_null",
            |c| c.find(doc! { "last_contacted_at": Bson::Null }),
            "WHERE last_contacted_at IS NULL",
        ),
        find_query(
            "notes_null",
            |c| c.find(doc! { "notes": Bson::Null }),
            "WHERE notes IS NULL",
        ),
        find_query(
            "last_contacted_not_null",
            |c| c.find(doc! { "last_contacted_at": { "$ne": Bson::Null } }),
            "WHERE last_contacted_at IS NOT NULL",
        ),
        find_query(
            "status_and_notes_null",
            |c| c.find(doc! { "status": "active", "notes": Bson::Null }),
            "WHERE status = 'active' AND notes IS NULL",
        ),
        Query {
            name: "point_lookups_1000",
            slate: Box::new(move |c| slate_lookups(c, &bson_ids)),
            typed: Some(Box::new(move |c| slate_lookups_typed(c, &typed_ids))),
            sql: Box::new(move |conn| sql_lookups(conn, &lookup_ids)),
        },
        Query {
            name: "point_lookups_1000_batch",
            slate: Box::new(move |c| slate_lookups_batch(c, &batch_ids)),
            typed: Some(Box::new(move |c| slate_lookups_batch_typed(c, &typed_batch_ids))),
            sql: Box::new(move |conn| sql_lookups_batch(conn, &batch_sql_ids)),
        },
        // Beyond seed 000's table: the same ids as one `_id $in` filter (the
        // planner looks them up by key), and a page of 100 after an `_id`.
        find_query_owned(
            "id_in_1000",
            move |c| c.find(doc! { "_id": { "$in": in_ids.clone() } }),
            format!(
                "WHERE id IN ({})",
                in_sql_ids
                    .iter()
                    .map(i64::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        ),
        find_query(
            "id_page_100",
            |c| c.find(doc! { "_id": { "$gt": 5000 } }).sort("_id").limit(100),
            "WHERE id > 5000 ORDER BY id LIMIT 100",
        ),
        find_query(
            "last_100_by_id",
            |c| c.find(doc! {}).sort("_id:desc").limit(100),
            "ORDER BY id DESC LIMIT 100",
        ),
        Query {
            name: "projection_name_status",
            slate: Box::new(|c| slate_rows(c.find(doc! {}).project(["name", "status"]))),
            typed: Some(Box::new(|c| {
                slate_typed::<NameStatus>(c.find(doc! {}).project(["name", "status"]))
            })),
            sql: Box::new(sql_projection),
        },
    ]
}

// -------------------------------------------------------------------- fixtures

struct Fixtures {
    memory: Collection,
    rocks: Collection,
    sqlite: Connection,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

fn build(recs: &[Rec]) -> Fixtures {
    let docs: Vec<Document> = recs.iter().map(to_doc).collect();

    let memory = Db::memory()
        .create_collection(config())
        .expect("memory collection");
    memory.insert_many(docs.clone()).expect("memory insert");

    let rocks_dir = tempfile::tempdir().expect("tempdir");
    {
        let db = Db::builder(rocks_dir.path())
            .sync(false)
            .open()
            .expect("open rocks");
        db.create_collection(config())
            .expect("rocks collection")
            .insert_many(docs)
            .expect("rocks insert");
    }
    let rocks = Db::builder(rocks_dir.path())
        .sync(false)
        .open()
        .expect("reopen rocks")
        .collection(COLL)
        .expect("rocks collection");

    let sql_dir = tempfile::tempdir().expect("tempdir");
    let mut sqlite = Connection::open(sql_dir.path().join("docs.sqlite")).expect("open sqlite");
    sqlite_schema(&sqlite);
    sqlite_load(&mut sqlite, recs);
    sqlite.execute_batch("ANALYZE;").expect("analyze");

    Fixtures {
        memory,
        rocks,
        sqlite,
        _dirs: (rocks_dir, sql_dir),
    }
}

/// `LOOKUPS` distinct ids in random order (as slate-bench draws them), so that
/// SQLite's `IN (...)` returns as many rows as there are ids.
fn lookup_ids(n: usize) -> Vec<i64> {
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    let mut all: Vec<i64> = (0..n as i64).collect();
    let count = LOOKUPS.min(n);
    for i in 0..count {
        let j = i + rng.below((n - i) as u64) as usize;
        all.swap(i, j);
    }
    all.truncate(count);
    all
}

fn bench_documents(c: &mut Criterion) {
    for n in sizes() {
        let recs = records(n);
        let fx = build(&recs);
        let qs = queries(lookup_ids(n));

        let mut group = c.benchmark_group(format!("documents/{n}"));
        group
            .sample_size(10)
            .measurement_time(Duration::from_secs(2))
            .warm_up_time(Duration::from_millis(500));

        for q in &qs {
            let expected = (q.sql)(&fx.sqlite);
            let mem = (q.slate)(&fx.memory);
            let rocks = (q.slate)(&fx.rocks);
            assert_eq!(
                mem, expected,
                "{}: slate-memory vs sqlite row count (n={n})",
                q.name
            );
            assert_eq!(
                rocks, expected,
                "{}: slate-rocks vs sqlite row count (n={n})",
                q.name
            );
            assert!(expected > 0, "{}: query returns no rows", q.name);
            if let Some(typed) = &q.typed {
                assert_eq!(
                    typed(&fx.memory),
                    expected,
                    "{}: slate-memory-typed (n={n})",
                    q.name
                );
                assert_eq!(
                    typed(&fx.rocks),
                    expected,
                    "{}: slate-rocks-typed (n={n})",
                    q.name
                );
            }

            group.bench_function(format!("{}/slate-memory", q.name), |b| {
                b.iter(|| (q.slate)(&fx.memory))
            });
            group.bench_function(format!("{}/slate-rocks", q.name), |b| {
                b.iter(|| (q.slate)(&fx.rocks))
            });
            if let Some(typed) = &q.typed {
                group.bench_function(format!("{}/slate-memory-typed", q.name), |b| {
                    b.iter(|| typed(&fx.memory))
                });
                group.bench_function(format!("{}/slate-rocks-typed", q.name), |b| {
                    b.iter(|| typed(&fx.rocks))
                });
            }
            group.bench_function(format!("{}/sqlite", q.name), |b| b.iter(|| (q.sql)(&fx.sqlite)));
        }

        // Bulk insert of N documents into a fresh collection with one index.
        let docs: Vec<Document> = recs.iter().map(to_doc).collect();
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function("bulk_insert/slate-rocks", |b| {
            b.iter_batched(
                || {
                    let dir = tempfile::tempdir().expect("tempdir");
                    let db = Db::builder(dir.path()).sync(false).open().expect("open");
                    let coll = db.create_collection(config()).expect("collection");
                    (coll, docs.clone(), dir)
                },
                |(coll, docs, dir)| {
                    coll.insert_many(docs).expect("insert");
                    (coll, dir)
                },
                BatchSize::PerIteration,
            )
        });
        // In one `insert_many` (one SQLite transaction), and in 10 (10
        // transactions) as slate-bench's row: from the second batch on the
        // collection has documents (the ids ascend, so each batch lands
        // after the stored ones).
        for (name, per) in [("bulk_insert", n.max(1)), ("bulk_insert_batches", n.div_ceil(10))] {
            group.bench_function(format!("{name}/slate-memory"), |b| {
                b.iter_batched(
                    || {
                        let coll = Db::memory().create_collection(config()).expect("collection");
                        (coll, docs.clone())
                    },
                    |(coll, docs)| {
                        insert_batches(&coll, docs, per);
                        coll
                    },
                    BatchSize::PerIteration,
                )
            });
            group.bench_function(format!("{name}/sqlite"), |b| {
                b.iter_batched(
                    || {
                        let dir = tempfile::tempdir().expect("tempdir");
                        let conn = Connection::open(dir.path().join("docs.sqlite")).expect("open");
                        sqlite_schema(&conn);
                        (conn, dir)
                    },
                    |(mut conn, dir)| {
                        for batch in recs.chunks(per) {
                            sqlite_load(&mut conn, batch);
                        }
                        (conn, dir)
                    },
                    BatchSize::PerIteration,
                )
            });
        }
        group.finish();
    }
}

criterion_group!(benches, bench_documents);
slate::tuned_criterion_main!(benches);
