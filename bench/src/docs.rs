//! Seed 000's document workload: three users' collections of N records each,
//! bulk-inserted in 10 batches, then the seed's 15 queries (plus a batched
//! variant of the point lookups) on user `u0`, on every backend: Slate's
//! MemoryStore, Slate's RocksStore right after the inserts (the write buffer
//! still holds everything) and after closing and reopening it (reads come from
//! its files), SQLite with real columns, and SQLite with JSON text.

use std::collections::BTreeMap;
use std::hint::black_box;

use rusqlite::Connection;
use serde::Serialize;
use slate::bson::{doc, Bson, Document};
use slate::{Collection, CollectionConfig, Db};
use tempfile::TempDir;

use crate::records::{lookup_ids, records, Rec};
use crate::sqlite::{self, Variant};
use crate::timing::{once, Timing};
use crate::Res;

/// Users (collections, or tables) per size.
pub const USERS: usize = 3;
/// Batches per bulk insert.
pub const BATCHES: usize = 10;
/// Point lookups per lookup row.
pub const LOOKUPS: usize = 1_000;

/// Backend names, in table order.
pub const MEMORY: &str = "slate-memory";
pub const ROCKS_FRESH: &str = "slate-rocks-fresh";
pub const ROCKS: &str = "slate-rocks";
pub const SQLITE: &str = "sqlite";
pub const SQLITE_JSON: &str = "sqlite-json";

/// The ratios reported per row: (key, Slate backend, SQLite variant).
pub const RATIOS: [(&str, &str, &str); 4] = [
    ("memory/sqlite", MEMORY, SQLITE),
    ("rocks/sqlite", ROCKS, SQLITE),
    ("memory/sqlite-json", MEMORY, SQLITE_JSON),
    ("rocks/sqlite-json", ROCKS, SQLITE_JSON),
];

/// One query's figures on every backend.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub query: String,
    /// Rows returned (equal on every backend, checked).
    pub rows: usize,
    /// Median milliseconds per backend.
    pub ms: BTreeMap<String, f64>,
    /// Slate ÷ SQLite time (above 1: Slate is slower).
    pub ratio: BTreeMap<String, f64>,
}

/// The document workload at one size.
#[derive(Debug, Clone, Serialize)]
pub struct Table {
    /// Records per user.
    pub n: usize,
    pub users: usize,
    /// Bulk insert: N records in 10 batches, mean over the users, ms.
    pub insert: Row,
    pub queries: Vec<Row>,
}

/// Runs a query on a Slate collection; returns the rows it produced.
pub type SlateFn = Box<dyn Fn(&Collection) -> Res<usize>>;
/// Runs a query on an SQLite connection, in one storage variant.
pub type SqlFn = Box<dyn Fn(&Connection, Variant) -> Res<usize>>;

/// A query run the same way on every backend.
pub struct Query {
    pub name: String,
    pub slate: SlateFn,
    pub sql: SqlFn,
}

impl std::fmt::Debug for Query {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Query").field("name", &self.name).finish()
    }
}

/// Collects a Slate find into documents.
pub fn slate_rows(find: slate::Find<'_>) -> Res<usize> {
    let docs = find.run()?;
    black_box(&docs);
    Ok(docs.len())
}

/// A find query: `build` makes the Slate side; `tail` the SQL after
/// `SELECT .. FROM table` for a variant.
pub fn find(
    name: &str,
    table: &str,
    build: impl Fn(&Collection) -> slate::Find<'_> + 'static,
    tail: impl Fn(Variant) -> String + 'static,
) -> Query {
    let table = table.to_owned();
    Query {
        name: name.to_owned(),
        slate: Box::new(move |c| slate_rows(build(c))),
        sql: Box::new(move |conn, v| v.rows(conn, &format!("{} {}", v.select_all(&table), tail(v)))),
    }
}

fn eq(v: Variant, field: &str, value: &str) -> String {
    format!("{} = '{value}'", v.field(field))
}

/// Seed 000's query table (plus batched lookups) against SQLite table `table`.
pub fn queries(table: &str, ids: Vec<i64>) -> Vec<Query> {
    let bson_ids: Vec<Bson> = ids.iter().map(|&i| Bson::Int64(i)).collect();
    let batch_ids = bson_ids.clone();
    let sql_ids = ids.clone();
    let t = table.to_owned();
    let t2 = table.to_owned();
    let t3 = table.to_owned();
    let t4 = table.to_owned();
    vec![
        find("full scan", table, |c| c.find(doc! {}), |_| String::new()),
        find(
            "status = active (indexed)",
            table,
            |c| c.find(doc! { "status": "active" }),
            |v| format!("WHERE {}", eq(v, "status", "active")),
        ),
        find(
            "rec1 = ProductA (not indexed)",
            table,
            |c| c.find(doc! { "product_recommendation1": "ProductA" }),
            |v| format!("WHERE {}", eq(v, "product_recommendation1", "ProductA")),
        ),
        find(
            "status + rec1 + rec2 (AND)",
            table,
            |c| {
                c.find(doc! {
                    "status": "active",
                    "product_recommendation1": "ProductA",
                    "product_recommendation2": "ProductX",
                })
            },
            |v| {
                format!(
                    "WHERE {} AND {} AND {}",
                    eq(v, "status", "active"),
                    eq(v, "product_recommendation1", "ProductA"),
                    eq(v, "product_recommendation2", "ProductX")
                )
            },
        ),
        find(
            "status, sort, skip 10, limit 50",
            table,
            |c| {
                c.find(doc! { "status": "active" })
                    .sort("contacts_count")
                    .skip(10)
                    .limit(50)
            },
            |v| {
                format!(
                    "WHERE {} ORDER BY {} LIMIT 50 OFFSET 10",
                    eq(v, "status", "active"),
                    v.field("contacts_count")
                )
            },
        ),
        Query {
            name: "status = active, streamed (no sort)".into(),
            slate: Box::new(|c| {
                let mut n = 0;
                for d in c.find(doc! { "status": "active" }).iter()? {
                    black_box(d?);
                    n += 1;
                }
                Ok(n)
            }),
            sql: Box::new(move |conn, v| {
                v.stream(
                    conn,
                    &format!("{} WHERE {}", v.select_all(&t), eq(v, "status", "active")),
                )
            }),
        },
        find(
            "status, sort by contacts_count",
            table,
            |c| c.find(doc! { "status": "active" }).sort("contacts_count"),
            |v| {
                format!(
                    "WHERE {} ORDER BY {}",
                    eq(v, "status", "active"),
                    v.field("contacts_count")
                )
            },
        ),
        find(
            "status, limit 200 (no sort)",
            table,
            |c| c.find(doc! { "status": "active" }).limit(200),
            |v| format!("WHERE {} LIMIT 200", eq(v, "status", "active")),
        ),
        find(
            "status, sort, limit 200",
            table,
            |c| {
                c.find(doc! { "status": "active" })
                    .sort("contacts_count")
                    .limit(200)
            },
            |v| {
                format!(
                    "WHERE {} ORDER BY {} LIMIT 200",
                    eq(v, "status", "active"),
                    v.field("contacts_count")
                )
            },
        ),
        find(
            "last_contacted_at is null",
            table,
            |c| c.find(doc! { "last_contacted_at": Bson::Null }),
            |v| format!("WHERE {} IS NULL", v.field("last_contacted_at")),
        ),
        find(
            "notes is null",
            table,
            |c| c.find(doc! { "notes": Bson::Null }),
            |v| format!("WHERE {} IS NULL", v.field("notes")),
        ),
        find(
            "last_contacted_at not null",
            table,
            |c| c.find(doc! { "last_contacted_at": { "$ne": Bson::Null } }),
            |v| format!("WHERE {} IS NOT NULL", v.field("last_contacted_at")),
        ),
        find(
            "status and notes null",
            table,
            |c| c.find(doc! { "status": "active", "notes": Bson::Null }),
            |v| {
                format!(
                    "WHERE {} AND {} IS NULL",
                    eq(v, "status", "active"),
                    v.field("notes")
                )
            },
        ),
        Query {
            name: format!("{LOOKUPS} point lookups"),
            slate: Box::new(move |c| {
                let mut found = 0;
                for id in &bson_ids {
                    if let Some(d) = c.get(id.clone())? {
                        black_box(d);
                        found += 1;
                    }
                }
                Ok(found)
            }),
            sql: Box::new(move |conn, v| v.lookups(conn, &t2, &sql_ids, None)),
        },
        Query {
            name: "projection name, status".into(),
            slate: Box::new(|c| slate_rows(c.find(doc! {}).project(["name", "status"]))),
            sql: Box::new(move |conn, v| v.projection(conn, &t3)),
        },
        Query {
            name: format!("{LOOKUPS} point lookups, one batch"),
            slate: Box::new(move |c| {
                let docs = c.get_many(&batch_ids)?;
                let found = docs.iter().filter(|d| d.is_some()).count();
                black_box(docs);
                Ok(found)
            }),
            sql: Box::new(move |conn, v| v.lookups_batch(conn, &t4, &ids)),
        },
    ]
}

/// The collection config of the unpartitioned layout.
pub fn config(name: &str) -> CollectionConfig {
    CollectionConfig::new(name).index("status")
}

/// Inserts every user's records into `db` (10 batches each); returns the
/// mean milliseconds per user.
pub fn slate_load(db: &Db, users: &[Vec<Rec>]) -> Res<f64> {
    let mut total = 0.0;
    for (u, recs) in users.iter().enumerate() {
        let coll = db.create_collection(config(&format!("u{u}")))?;
        let docs: Vec<Vec<Document>> = recs
            .chunks(recs.len().div_ceil(BATCHES))
            .map(|c| c.iter().map(|r| r.to_doc(false)).collect())
            .collect();
        let ((), ms) = once(|| {
            for batch in docs {
                coll.insert_many(batch)?;
            }
            Ok(())
        })?;
        total += ms;
    }
    Ok(total / users.len() as f64)
}

/// Creates and fills one SQLite table per user (10 transactions each);
/// returns the mean milliseconds per user.
pub fn sqlite_load(conn: &mut Connection, v: Variant, users: &[Vec<Rec>]) -> Res<f64> {
    let mut total = 0.0;
    for (u, recs) in users.iter().enumerate() {
        let table = format!("docs_u{u}");
        v.create(conn, &table, false)?;
        let ((), ms) = once(|| {
            for batch in recs.chunks(recs.len().div_ceil(BATCHES)) {
                v.insert(conn, &table, batch, false)?;
            }
            Ok(())
        })?;
        total += ms;
    }
    sqlite::analyze(conn)?;
    Ok(total / users.len() as f64)
}

/// Every backend, loaded with the same records.
#[derive(Debug)]
pub struct Fixtures {
    pub memory: Db,
    pub rocks_fresh: Db,
    pub rocks: Db,
    pub sqlite: Connection,
    pub json: Connection,
    pub insert_ms: BTreeMap<String, f64>,
    _dirs: Vec<TempDir>,
}

impl Fixtures {
    /// Loads `users` into every backend, timing the inserts.
    pub fn build(users: &[Vec<Rec>]) -> Res<Self> {
        let mut insert_ms = BTreeMap::new();
        let memory = Db::memory();
        insert_ms.insert(MEMORY.to_owned(), slate_load(&memory, users)?);

        let fresh_dir = tempfile::tempdir()?;
        let rocks_fresh = Db::builder(fresh_dir.path()).sync(false).open()?;
        insert_ms.insert(ROCKS_FRESH.to_owned(), slate_load(&rocks_fresh, users)?);

        let dir = tempfile::tempdir()?;
        {
            let db = Db::builder(dir.path()).sync(false).open()?;
            insert_ms.insert(ROCKS.to_owned(), slate_load(&db, users)?);
        }
        let rocks = Db::builder(dir.path()).sync(false).open()?;

        let sql_dir = tempfile::tempdir()?;
        let mut connections = Vec::new();
        for v in [Variant::Columns, Variant::Json] {
            let path = sql_dir.path().join(format!("{}.sqlite", v.name()));
            let mut conn = sqlite::open(&path)?;
            insert_ms.insert(v.name().to_owned(), sqlite_load(&mut conn, v, users)?);
            drop(conn);
            connections.push(sqlite::open(&path)?);
        }
        let json = connections.pop().ok_or("no json connection")?;
        let sqlite = connections.pop().ok_or("no sqlite connection")?;
        Ok(Self {
            memory,
            rocks_fresh,
            rocks,
            sqlite,
            json,
            insert_ms,
            _dirs: vec![fresh_dir, dir, sql_dir],
        })
    }
}

/// Ratios of a row's times.
pub fn ratios(ms: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    RATIOS
        .iter()
        .filter_map(|(key, slate, sql)| Some((key.to_string(), ms.get(*slate)? / ms.get(*sql)?)))
        .collect()
}

/// Runs the document workload at `n` records per user.
pub fn run(n: usize, timing: &Timing, log: &dyn Fn(&str)) -> Res<Table> {
    let users: Vec<Vec<Rec>> = (0..USERS).map(|u| records(u, (u * n) as i64, n)).collect();
    log(&format!(
        "documents: loading {USERS} × {n} records into every backend"
    ));
    let fx = Fixtures::build(&users)?;
    let insert = Row {
        query: format!("bulk insert, {BATCHES} batches"),
        rows: n,
        ratio: ratios(&fx.insert_ms),
        ms: fx.insert_ms.clone(),
    };
    let slate: [(&str, Collection); 3] = [
        (MEMORY, fx.memory.collection("u0")?),
        (ROCKS_FRESH, fx.rocks_fresh.collection("u0")?),
        (ROCKS, fx.rocks.collection("u0")?),
    ];
    let sql: [(Variant, &Connection); 2] = [(Variant::Columns, &fx.sqlite), (Variant::Json, &fx.json)];
    let mut rows = Vec::new();
    for q in queries("docs_u0", lookup_ids(0, n, LOOKUPS)) {
        log(&format!("documents {n}: {}", q.name));
        let mut ms = BTreeMap::new();
        let mut counts = Vec::new();
        for (name, coll) in &slate {
            let m = timing.measure(|| (q.slate)(coll))?;
            ms.insert(name.to_string(), m.ms);
            counts.push((name.to_string(), m.rows));
        }
        for (v, conn) in &sql {
            let m = timing.measure(|| (q.sql)(conn, *v))?;
            ms.insert(v.name().to_owned(), m.ms);
            counts.push((v.name().to_owned(), m.rows));
        }
        let rows_returned = counts[0].1;
        if counts.iter().any(|(_, c)| *c != rows_returned) || rows_returned == 0 {
            return Err(format!("{}: backends disagree on the row count: {counts:?}", q.name).into());
        }
        rows.push(Row {
            query: q.name.clone(),
            rows: rows_returned,
            ratio: ratios(&ms),
            ms,
        });
    }
    Ok(Table {
        n,
        users: USERS,
        insert,
        queries: rows,
    })
}
