//! Seed 000's concurrency test: on a collection (table) holding N records,
//! 2 writers each insert N/10 new records in 10 commits while 4 readers each
//! run 10 rounds of (status = active, limit 200) and 100 point lookups. The
//! figure is the wall time until all six threads finish; afterwards the count
//! must be exactly N + 2·N/10.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use serde::Serialize;
use slate::bson::{doc, Bson};
use slate::{Collection, Db};

use crate::docs::{config, MEMORY, ROCKS, SQLITE};
use crate::records::{lookup_ids, records, Rec};
use crate::sqlite::{self, Variant};
use crate::Res;

const WRITERS: usize = 2;
const READERS: usize = 4;
const ROUNDS: usize = 10;
const LOOKUPS_PER_ROUND: usize = 100;

/// The concurrency test at one size.
#[derive(Debug, Clone, Serialize)]
pub struct Concurrency {
    pub n: usize,
    pub writers: usize,
    pub readers: usize,
    /// Records each writer inserts.
    pub inserted_per_writer: usize,
    /// Wall milliseconds per backend.
    pub ms: BTreeMap<String, f64>,
    /// Slate ÷ SQLite wall time.
    pub ratio: BTreeMap<String, f64>,
}

type ThreadRes = Result<(), String>;

fn slate_case(coll: &Collection, n: usize, extra: &[Vec<Rec>]) -> Res<f64> {
    let ids: Vec<Bson> = lookup_ids(0, n, LOOKUPS_PER_ROUND)
        .into_iter()
        .map(Bson::Int64)
        .collect();
    let start = Instant::now();
    let results: Vec<ThreadRes> = std::thread::scope(|s| {
        let mut handles = Vec::new();
        for recs in extra {
            handles.push(s.spawn(move || -> ThreadRes {
                for batch in recs.chunks(recs.len().div_ceil(10).max(1)) {
                    coll.insert_many(batch.iter().map(|r| r.to_doc(false)))
                        .map_err(|e| e.to_string())?;
                }
                Ok(())
            }));
        }
        for _ in 0..READERS {
            let ids = &ids;
            handles.push(s.spawn(move || -> ThreadRes {
                for _ in 0..ROUNDS {
                    let found = coll
                        .find(doc! { "status": "active" })
                        .limit(200)
                        .run()
                        .map_err(|e| e.to_string())?;
                    if found.len() != 200 {
                        return Err(format!("reader saw {} documents, not 200", found.len()));
                    }
                    let docs = coll.get_many(ids).map_err(|e| e.to_string())?;
                    if docs.iter().any(Option::is_none) {
                        return Err("reader missed a preloaded document".into());
                    }
                    black_box(docs);
                }
                Ok(())
            }));
        }
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("thread panicked".into())))
            .collect()
    });
    let ms = start.elapsed().as_secs_f64() * 1e3;
    for r in results {
        r?;
    }
    let expected = (n + extra.iter().map(Vec::len).sum::<usize>()) as u64;
    let got = coll.count(doc! {})?;
    if got != expected {
        return Err(format!("after the concurrency test: {got} documents, expected {expected}").into());
    }
    Ok(ms)
}

fn sqlite_case(path: &Path, n: usize, extra: &[Vec<Rec>]) -> Res<f64> {
    let ids = lookup_ids(0, n, LOOKUPS_PER_ROUND);
    let table = "docs_u0";
    let start = Instant::now();
    let results: Vec<ThreadRes> = std::thread::scope(|s| {
        let mut handles = Vec::new();
        for recs in extra {
            handles.push(s.spawn(move || -> ThreadRes {
                let mut conn = sqlite::open(path).map_err(|e| e.to_string())?;
                for batch in recs.chunks(recs.len().div_ceil(10).max(1)) {
                    Variant::Columns
                        .insert(&mut conn, table, batch, false)
                        .map_err(|e| e.to_string())?;
                }
                Ok(())
            }));
        }
        for _ in 0..READERS {
            let ids = &ids;
            handles.push(s.spawn(move || -> ThreadRes {
                let conn = sqlite::open(path).map_err(|e| e.to_string())?;
                let v = Variant::Columns;
                let sql = format!("{} WHERE status = 'active' LIMIT 200", v.select_all(table));
                for _ in 0..ROUNDS {
                    let found = v.rows(&conn, &sql).map_err(|e| e.to_string())?;
                    if found != 200 {
                        return Err(format!("reader saw {found} rows, not 200"));
                    }
                    v.lookups_batch(&conn, table, ids).map_err(|e| e.to_string())?;
                }
                Ok(())
            }));
        }
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("thread panicked".into())))
            .collect()
    });
    let ms = start.elapsed().as_secs_f64() * 1e3;
    for r in results {
        r?;
    }
    let conn = sqlite::open(path)?;
    let got: i64 = conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))?;
    let expected = (n + extra.iter().map(Vec::len).sum::<usize>()) as i64;
    if got != expected {
        return Err(format!("SQLite after the concurrency test: {got} rows, expected {expected}").into());
    }
    Ok(ms)
}

/// Runs the test on MemoryStore, RocksStore and SQLite at `n` records.
pub fn run(n: usize, log: &dyn Fn(&str)) -> Res<Concurrency> {
    log(&format!(
        "concurrency: {WRITERS} writers + {READERS} readers on {n} records"
    ));
    let base = records(0, 0, n);
    let per_writer = (n / 10).max(10);
    let extra: Vec<Vec<Rec>> = (0..WRITERS)
        .map(|w| records(10 + w, (n + w * per_writer) as i64, per_writer))
        .collect();
    let mut ms = BTreeMap::new();

    let memory = Db::memory().create_collection(config("u0"))?;
    memory.insert_many(base.iter().map(|r| r.to_doc(false)))?;
    ms.insert(MEMORY.to_owned(), slate_case(&memory, n, &extra)?);

    let dir = tempfile::tempdir()?;
    {
        let db = Db::builder(dir.path()).sync(false).open()?;
        db.create_collection(config("u0"))?
            .insert_many(base.iter().map(|r| r.to_doc(false)))?;
    }
    let rocks = Db::builder(dir.path()).sync(false).open()?.collection("u0")?;
    ms.insert(ROCKS.to_owned(), slate_case(&rocks, n, &extra)?);

    let sql_dir = tempfile::tempdir()?;
    let path = sql_dir.path().join("concurrency.sqlite");
    {
        let mut conn = sqlite::open(&path)?;
        Variant::Columns.create(&conn, "docs_u0", false)?;
        Variant::Columns.insert(&mut conn, "docs_u0", &base, false)?;
        sqlite::analyze(&conn)?;
    }
    ms.insert(SQLITE.to_owned(), sqlite_case(&path, n, &extra)?);

    let mut ratio = BTreeMap::new();
    for (key, slate) in [("memory/sqlite", MEMORY), ("rocks/sqlite", ROCKS)] {
        ratio.insert(key.to_owned(), ms[slate] / ms[SQLITE]);
    }
    Ok(Concurrency {
        n,
        writers: WRITERS,
        readers: READERS,
        inserted_per_writer: per_writer,
        ms,
        ratio,
    })
}
