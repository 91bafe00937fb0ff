//! Seed 001's key-partitioned layout: the three users' records in ONE
//! collection partitioned by `user` (keys carry the partition first, so a
//! query on one user touches only that user's key range), queried on one
//! partition and across two and three. The SQLite peer clusters its rows the
//! same way: `PRIMARY KEY (user, id) WITHOUT ROWID`, index on `(user, status)`.

use std::collections::BTreeMap;
use std::hint::black_box;

use rusqlite::Connection;
use serde::Serialize;
use slate::bson::{doc, Bson, Document};
use slate::{Collection, CollectionConfig, Db};

use crate::docs::{slate_rows, Query, Row, BATCHES, LOOKUPS, MEMORY, ROCKS, SQLITE, USERS};
use crate::records::{lookup_ids, records, Rec};
use crate::sqlite::{self, Variant};
use crate::timing::{once, Timing};
use crate::Res;

const TABLE: &str = "people";

/// The partitioned workload's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Table {
    /// Records per user (partition).
    pub n: usize,
    pub users: usize,
    pub insert: Row,
    pub queries: Vec<Row>,
}

fn users_in(k: usize) -> Vec<Bson> {
    (0..k).map(|u| Bson::String(format!("u{u}"))).collect()
}

fn user_list(k: usize) -> String {
    (0..k).map(|u| format!("'u{u}'")).collect::<Vec<_>>().join(", ")
}

fn scoped(
    name: String,
    prefixes: usize,
    build: impl Fn(&Collection) -> slate::Find<'_> + 'static,
    cond: &'static str,
    order: &'static str,
) -> Query {
    let users = users_in(prefixes);
    let list = user_list(prefixes);
    Query {
        name,
        slate: Box::new(move |c| slate_rows(build(&c.partitions(users.clone())))),
        sql: Box::new(move |conn, v| {
            let cond = if cond.is_empty() {
                String::new()
            } else {
                format!(" AND {cond}")
            };
            v.rows(
                conn,
                &format!("{} WHERE user IN ({list}){cond} {order}", v.select_all(TABLE)),
            )
        }),
    }
}

fn queries(ids: Vec<i64>) -> Vec<Query> {
    let bson_ids: Vec<Bson> = ids.iter().map(|&i| Bson::Int64(i)).collect();
    let active = || doc! { "status": "active" };
    let mut qs = vec![
        scoped("1 prefix: full scan".into(), 1, |c| c.find(doc! {}), "", ""),
        scoped(
            "1 prefix: status = active".into(),
            1,
            move |c| c.find(active()),
            "status = 'active'",
            "",
        ),
        scoped(
            "1 prefix: status + rec1 + rec2".into(),
            1,
            |c| {
                c.find(doc! {
                    "status": "active",
                    "product_recommendation1": "ProductA",
                    "product_recommendation2": "ProductX",
                })
            },
            "status = 'active' AND product_recommendation1 = 'ProductA' AND product_recommendation2 = 'ProductX'",
            "",
        ),
        scoped(
            "1 prefix: status, sort, limit 200".into(),
            1,
            move |c| c.find(active()).sort("contacts_count").limit(200),
            "status = 'active'",
            "ORDER BY contacts_count LIMIT 200",
        ),
    ];
    qs.push(Query {
        name: format!("1 prefix: {LOOKUPS} point lookups"),
        slate: Box::new(move |c| {
            let c = c.partition("u0");
            let mut found = 0;
            for id in &bson_ids {
                if let Some(d) = c.get(id.clone())? {
                    black_box(d);
                    found += 1;
                }
            }
            Ok(found)
        }),
        sql: Box::new(move |conn, v| v.lookups(conn, TABLE, &ids, Some("u0"))),
    });
    for k in [2, 3] {
        qs.push(scoped(
            format!("{k} prefixes: no filter"),
            k,
            |c| c.find(doc! {}),
            "",
            "",
        ));
    }
    qs.push(scoped(
        "3 prefixes: status = active".into(),
        3,
        move |c| c.find(active()),
        "status = 'active'",
        "",
    ));
    qs.push(scoped(
        "3 prefixes: status, sort, limit 200".into(),
        3,
        move |c| c.find(active()).sort("contacts_count").limit(200),
        "status = 'active'",
        "ORDER BY contacts_count LIMIT 200",
    ));
    qs
}

/// Loads every user into the partitioned collection (10 batches per user,
/// through the user's partition handle); mean ms per user.
fn slate_load(db: &Db, users: &[Vec<Rec>]) -> Res<f64> {
    let coll = db.create_collection(CollectionConfig::new(TABLE).partition_key("user").index("status"))?;
    let mut total = 0.0;
    for (u, recs) in users.iter().enumerate() {
        let part = coll.partition(format!("u{u}"));
        let batches: Vec<Vec<Document>> = recs
            .chunks(recs.len().div_ceil(BATCHES))
            .map(|c| c.iter().map(|r| r.to_doc(true)).collect())
            .collect();
        let ((), ms) = once(|| {
            for b in batches {
                part.insert_many(b)?;
            }
            Ok(())
        })?;
        total += ms;
    }
    Ok(total / users.len() as f64)
}

fn sqlite_load(conn: &mut Connection, users: &[Vec<Rec>]) -> Res<f64> {
    Variant::Columns.create(conn, TABLE, true)?;
    let mut total = 0.0;
    for recs in users {
        let ((), ms) = once(|| {
            for b in recs.chunks(recs.len().div_ceil(BATCHES)) {
                Variant::Columns.insert(conn, TABLE, b, true)?;
            }
            Ok(())
        })?;
        total += ms;
    }
    sqlite::analyze(conn)?;
    Ok(total / users.len() as f64)
}

fn ratios(ms: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for (key, slate) in [("memory/sqlite", MEMORY), ("rocks/sqlite", ROCKS)] {
        if let (Some(a), Some(b)) = (ms.get(slate), ms.get(SQLITE)) {
            out.insert(key.to_owned(), a / b);
        }
    }
    out
}

/// Runs the partitioned workload at `n` records per user.
pub fn run(n: usize, timing: &Timing, log: &dyn Fn(&str)) -> Res<Table> {
    let users: Vec<Vec<Rec>> = (0..USERS).map(|u| records(u, (u * n) as i64, n)).collect();
    log(&format!("partitioned: loading {USERS} × {n} records"));
    let mut insert_ms = BTreeMap::new();
    let memory = Db::memory();
    insert_ms.insert(MEMORY.to_owned(), slate_load(&memory, &users)?);
    let dir = tempfile::tempdir()?;
    {
        let db = Db::builder(dir.path()).sync(false).open()?;
        insert_ms.insert(ROCKS.to_owned(), slate_load(&db, &users)?);
    }
    let rocks = Db::builder(dir.path()).sync(false).open()?;
    let sql_dir = tempfile::tempdir()?;
    let path = sql_dir.path().join("people.sqlite");
    {
        let mut conn = sqlite::open(&path)?;
        insert_ms.insert(SQLITE.to_owned(), sqlite_load(&mut conn, &users)?);
    }
    let conn = sqlite::open(&path)?;
    drop(users);

    let slate = [
        (MEMORY, memory.collection(TABLE)?),
        (ROCKS, rocks.collection(TABLE)?),
    ];
    let mut rows = Vec::new();
    for q in queries(lookup_ids(0, n, LOOKUPS)) {
        log(&format!("partitioned {n}: {}", q.name));
        let mut ms = BTreeMap::new();
        let mut counts = Vec::new();
        for (name, coll) in &slate {
            let m = timing.measure(|| (q.slate)(coll))?;
            ms.insert(name.to_string(), m.ms);
            counts.push((name.to_string(), m.rows));
        }
        let m = timing.measure(|| (q.sql)(&conn, Variant::Columns))?;
        ms.insert(SQLITE.to_owned(), m.ms);
        counts.push((SQLITE.to_owned(), m.rows));
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
        insert: Row {
            query: format!("bulk insert, {BATCHES} batches per partition"),
            rows: n,
            ratio: ratios(&insert_ms),
            ms: insert_ms,
        },
        queries: rows,
    })
}
