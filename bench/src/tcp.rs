//! Seed 000's TCP table: the same records and queries embedded and through a
//! `slate::Server` on loopback (in this process, a `Client` over a real TCP
//! socket), per backend (MemoryStore; RocksStore closed and reopened so reads
//! come from its files), with TCP ÷ embedded per query; and 1,000 point
//! lookups as single round trips against one batched `get_many`, with the
//! embedded `get` loop and `get_many` beside them. The logic follows
//! `benches/server.rs`; the records, ids and query names are those of the
//! document workload (`docs.rs`).

use std::hint::black_box;

use serde::Serialize;
use slate::bson::{doc, Bson, Document};
use slate::{Client, Collection, Db, RemoteCollection, Server, ServerConfig};

use crate::docs::{self, BATCHES, LOOKUPS, MEMORY, ROCKS};
use crate::records::{lookup_ids, records, Rec};
use crate::timing::{once, Timing};
use crate::Res;

/// Seed 000's published round trip of one point lookup over TCP, µs
/// (1,000 lookups = 40 ms).
pub const SEED_ROUND_TRIP_US: f64 = 40.0;

/// Largest frame the bench's server accepts: a tenth of 100k records in one
/// `insert_many` is about 2.5 MiB, under the 4 MiB default, but with room.
const MAX_FRAME_BYTES: usize = 64 << 20;

/// One operation embedded and over TCP.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub query: String,
    /// Rows returned (equal both ways, checked).
    pub rows: usize,
    /// Median milliseconds, in process.
    pub embedded_ms: f64,
    /// Median milliseconds, through the server on loopback.
    pub tcp_ms: f64,
    /// TCP ÷ embedded.
    pub ratio: f64,
}

impl Row {
    fn new(query: &str, rows: usize, embedded_ms: f64, tcp_ms: f64) -> Self {
        Self {
            query: query.to_owned(),
            rows,
            embedded_ms,
            tcp_ms,
            ratio: tcp_ms / embedded_ms,
        }
    }
}

/// 1,000 point lookups four ways.
#[derive(Debug, Clone, Serialize)]
pub struct Lookups {
    /// Lookups per run (distinct ids, all present).
    pub count: usize,
    /// A `get` per id, in process.
    pub embedded_get_ms: f64,
    /// One `get_many` of every id, in process.
    pub embedded_get_many_ms: f64,
    /// A `get` per id over TCP: one round trip each.
    pub tcp_get_ms: f64,
    /// One `get_many` over TCP: one round trip.
    pub tcp_get_many_ms: f64,
    /// `tcp_get_ms` per lookup, µs: one round trip plus the lookup itself.
    pub tcp_round_trip_us: f64,
    /// Single round trips ÷ one batch, over TCP.
    pub single_over_batched: f64,
}

/// One backend's table.
#[derive(Debug, Clone, Serialize)]
pub struct Backend {
    /// `slate-memory` or `slate-rocks` (reopened).
    pub backend: String,
    /// Bulk insert of N records in 10 batches into a fresh collection, timed once.
    pub insert: Row,
    pub queries: Vec<Row>,
    pub lookups: Lookups,
}

/// Seed 000's TCP table at one size.
#[derive(Debug, Clone, Serialize)]
pub struct Table {
    /// Records in the collection queried.
    pub n: usize,
    pub backends: Vec<Backend>,
}

/// A find run the same way embedded and remotely.
#[derive(Debug)]
struct Query {
    name: &'static str,
    filter: Document,
    sort: Option<&'static str>,
    skip: usize,
    limit: Option<usize>,
    projection: Option<[&'static str; 2]>,
    /// Consume the answer as it comes (embedded `iter`, remote `for_each`).
    streamed: bool,
}

fn q(name: &'static str, filter: Document) -> Query {
    Query {
        name,
        filter,
        sort: None,
        skip: 0,
        limit: None,
        projection: None,
        streamed: false,
    }
}

/// Seed 000's TCP query list (its embedded names, as in `docs.rs`), plus the projection.
fn queries() -> Vec<Query> {
    let active = || doc! { "status": "active" };
    vec![
        q("full scan", doc! {}),
        q("status = active (indexed)", active()),
        q(
            "status + rec1 + rec2 (AND)",
            doc! {
                "status": "active",
                "product_recommendation1": "ProductA",
                "product_recommendation2": "ProductX",
            },
        ),
        Query {
            streamed: true,
            ..q("status = active, streamed (no sort)", active())
        },
        Query {
            sort: Some("contacts_count"),
            ..q("status, sort by contacts_count", active())
        },
        Query {
            limit: Some(200),
            ..q("status, limit 200 (no sort)", active())
        },
        Query {
            sort: Some("contacts_count"),
            limit: Some(200),
            ..q("status, sort, limit 200", active())
        },
        Query {
            sort: Some("contacts_count"),
            skip: 10,
            limit: Some(50),
            ..q("status, sort, skip 10, limit 50", active())
        },
        Query {
            projection: Some(["name", "status"]),
            ..q("projection name, status", doc! {})
        },
    ]
}

fn embedded(c: &Collection, q: &Query) -> Res<usize> {
    let mut f = c.find(q.filter.clone()).skip(q.skip);
    if let Some(s) = q.sort {
        f = f.sort(s);
    }
    if let Some(n) = q.limit {
        f = f.limit(n);
    }
    if let Some(p) = q.projection {
        f = f.project(p);
    }
    if q.streamed {
        let mut n = 0;
        for d in f.iter()? {
            black_box(d?);
            n += 1;
        }
        return Ok(n);
    }
    let docs = f.run()?;
    black_box(&docs);
    Ok(docs.len())
}

fn remote(c: &RemoteCollection, q: &Query) -> Res<usize> {
    let mut f = c.find(q.filter.clone()).skip(q.skip);
    if let Some(s) = q.sort {
        f = f.sort(s);
    }
    if let Some(n) = q.limit {
        f = f.limit(n);
    }
    if let Some(p) = q.projection {
        f = f.project(p);
    }
    if q.streamed {
        let mut n = 0;
        f.for_each(|d| {
            black_box(d);
            n += 1;
            Ok(())
        })?;
        return Ok(n);
    }
    let docs = f.run()?;
    black_box(&docs);
    Ok(docs.len())
}

/// Times `embedded` and `tcp`, checking that both return the same rows (and some).
fn pair(
    timing: &Timing,
    name: &str,
    embedded: impl FnMut() -> Res<usize>,
    tcp: impl FnMut() -> Res<usize>,
) -> Res<Row> {
    let e = timing.measure(embedded)?;
    let t = timing.measure(tcp)?;
    if e.rows != t.rows || e.rows == 0 {
        return Err(format!("tcp {name}: embedded returned {} rows, tcp {}", e.rows, t.rows).into());
    }
    Ok(Row::new(name, e.rows, e.ms, t.ms))
}

fn found(docs: Vec<Option<Document>>) -> usize {
    let n = docs.iter().filter(|d| d.is_some()).count();
    black_box(docs);
    n
}

/// The lookups four ways on one backend.
fn lookups(timing: &Timing, local: &Collection, tcp: &RemoteCollection, ids: &[Bson]) -> Res<Lookups> {
    let embedded_get = timing.measure(|| {
        let mut n = 0;
        for id in ids {
            n += usize::from(black_box(local.get(id.clone())?).is_some());
        }
        Ok(n)
    })?;
    let embedded_get_many = timing.measure(|| Ok(found(local.get_many(ids)?)))?;
    let tcp_get = timing.measure(|| {
        let mut n = 0;
        for id in ids {
            n += usize::from(black_box(tcp.get(id.clone())?).is_some());
        }
        Ok(n)
    })?;
    let tcp_get_many = timing.measure(|| Ok(found(tcp.get_many(ids)?)))?;
    let counts = [
        embedded_get.rows,
        embedded_get_many.rows,
        tcp_get.rows,
        tcp_get_many.rows,
    ];
    if counts.iter().any(|&c| c != ids.len()) {
        return Err(format!("tcp lookups: found {counts:?} of {} ids", ids.len()).into());
    }
    Ok(Lookups {
        count: ids.len(),
        embedded_get_ms: embedded_get.ms,
        embedded_get_many_ms: embedded_get_many.ms,
        tcp_get_ms: tcp_get.ms,
        tcp_get_many_ms: tcp_get_many.ms,
        tcp_round_trip_us: tcp_get.ms * 1e3 / ids.len() as f64,
        single_over_batched: tcp_get.ms / tcp_get_many.ms,
    })
}

/// Bulk insert of `recs` in 10 batches into fresh collections, embedded and
/// over TCP, each timed once; the collections are dropped afterwards.
fn insert(db: &Db, client: &Client, recs: &[Rec]) -> Res<Row> {
    let batches = || -> Vec<Vec<Document>> {
        recs.chunks(recs.len().div_ceil(BATCHES))
            .map(|c| c.iter().map(|r| r.to_doc(false)).collect())
            .collect()
    };
    let local = db.create_collection(docs::config("tcp_insert_embedded"))?;
    let docs = batches();
    let (n_local, embedded_ms) = once(|| {
        let mut n = 0;
        for batch in docs {
            n += local.insert_many(batch)?.len();
        }
        Ok(n)
    })?;
    let remote = client.create_collection(docs::config("tcp_insert_remote"))?;
    let docs = batches();
    let (n_remote, tcp_ms) = once(|| {
        let mut n = 0;
        for batch in docs {
            n += remote.insert_many(batch)?.len();
        }
        Ok(n)
    })?;
    if n_local != recs.len() || n_remote != recs.len() {
        return Err(format!(
            "tcp insert: {n_local} embedded, {n_remote} over tcp, of {}",
            recs.len()
        )
        .into());
    }
    db.drop_collection("tcp_insert_embedded")?;
    client.drop_collection("tcp_insert_remote")?;
    Ok(Row::new(
        &format!("bulk insert, {BATCHES} batches"),
        recs.len(),
        embedded_ms,
        tcp_ms,
    ))
}

/// Serves `db` on 127.0.0.1:0 and measures every row against it.
fn measure(backend: &str, db: &Db, recs: &[Rec], timing: &Timing, log: &dyn Fn(&str)) -> Res<Backend> {
    let n = recs.len();
    let server = Server::start(
        db.clone(),
        ServerConfig::new("127.0.0.1:0").max_frame_bytes(MAX_FRAME_BYTES),
    )?;
    let client = Client::connect(server.local_addr().to_string())?;
    let local = db.collection("u0")?;
    let tcp = client.collection("u0")?;
    let mut rows = Vec::new();
    for query in queries() {
        log(&format!("tcp {n} {backend}: {}", query.name));
        rows.push(pair(
            timing,
            query.name,
            || embedded(&local, &query),
            || remote(&tcp, &query),
        )?);
    }
    log(&format!("tcp {n} {backend}: {LOOKUPS} point lookups"));
    let ids: Vec<Bson> = lookup_ids(0, n, LOOKUPS).into_iter().map(Bson::Int64).collect();
    let lookups = lookups(timing, &local, &tcp, &ids)?;
    log(&format!("tcp {n} {backend}: bulk insert"));
    let insert = insert(db, &client, recs)?;
    drop(tcp);
    drop(client);
    server.shutdown();
    Ok(Backend {
        backend: backend.to_owned(),
        insert,
        queries: rows,
        lookups,
    })
}

/// Seed 000's TCP table at `n` records (user `u0` of the document workload).
pub fn run(n: usize, timing: &Timing, log: &dyn Fn(&str)) -> Res<Table> {
    let recs = records(0, 0, n);
    let users = [recs];
    log(&format!(
        "tcp: loading {n} records into MemoryStore and RocksStore"
    ));
    let memory = Db::memory();
    docs::slate_load(&memory, &users)?;
    let dir = tempfile::tempdir()?;
    {
        let db = Db::builder(dir.path()).sync(false).open()?;
        docs::slate_load(&db, &users)?;
    }
    // Reopened: reads come from the files, as in the document workload.
    let rocks = Db::builder(dir.path()).sync(false).open()?;
    let backends = vec![
        measure(MEMORY, &memory, &users[0], timing, log)?,
        measure(ROCKS, &rocks, &users[0], timing, log)?,
    ];
    drop(rocks);
    drop(dir);
    Ok(Table { n, backends })
}

/// The section's markdown: a table per backend, then the lookups side by side.
pub fn markdown(t: &Table, s: &mut String) {
    use std::fmt::Write as _;

    use crate::report::{ms, thousands};

    let _ = writeln!(
        s,
        "## Embedded against TCP (seed 000): {} records\n",
        thousands(t.n)
    );
    let _ = writeln!(
        s,
        "The same collection queried in process and through `slate::Server` on 127.0.0.1 (a \
         `slate::Client` over a real TCP socket, in this process). TCP ÷ embedded above 1 is the \
         cost of the wire: encoding, the socket, decoding on the client. Bulk insert is timed \
         once; every other figure is a median.\n"
    );
    let names: Vec<&str> = t.backends.iter().map(|b| label(&b.backend)).collect();
    let _ = write!(s, "| query | rows |");
    for name in &names {
        let _ = write!(s, " {name} embedded | {name} TCP | TCP ÷ embedded |");
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "|---|--:|{}", "--:|--:|--:|".repeat(names.len()));
    let rows = t.backends.first().map_or(0, |b| b.queries.len() + 1);
    for i in 0..rows {
        let mut line = String::new();
        for (j, b) in t.backends.iter().enumerate() {
            let row = if i == 0 { &b.insert } else { &b.queries[i - 1] };
            if j == 0 {
                let _ = write!(line, "| {} | {} |", row.query, thousands(row.rows));
            }
            let _ = write!(
                line,
                " {} | {} | {:.2} |",
                ms(row.embedded_ms),
                ms(row.tcp_ms),
                row.ratio
            );
        }
        let _ = writeln!(s, "{line}");
    }
    s.push('\n');
    let count = t.backends.first().map_or(LOOKUPS, |b| b.lookups.count);
    let _ = writeln!(
        s,
        "{} point lookups (distinct ids, all present), ms; a TCP `get` per id pays one round trip each, \
         one `get_many` pays one for all:\n",
        thousands(count)
    );
    let _ = writeln!(
        s,
        "| backend | embedded get × {c} | embedded get_many | TCP get × {c} | TCP get_many | \
         TCP per lookup, µs | TCP single ÷ batched |",
        c = thousands(count)
    );
    let _ = writeln!(s, "|---|--:|--:|--:|--:|--:|--:|");
    for b in &t.backends {
        let l = &b.lookups;
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {:.1} | {:.1} |",
            label(&b.backend),
            ms(l.embedded_get_ms),
            ms(l.embedded_get_many_ms),
            ms(l.tcp_get_ms),
            ms(l.tcp_get_many_ms),
            l.tcp_round_trip_us,
            l.single_over_batched
        );
    }
    s.push('\n');
    let _ = writeln!(
        s,
        "Seed 000 published about {SEED_ROUND_TRIP_US:.0} µs per round trip ({} lookups = {:.0} ms).\n",
        thousands(LOOKUPS),
        SEED_ROUND_TRIP_US * LOOKUPS as f64 / 1e3
    );
}

fn label(backend: &str) -> &str {
    match backend {
        MEMORY => "memory",
        ROCKS => "rocks",
        other => other,
    }
}

/// The figures of a `--only tcp` run.
#[derive(Debug, Clone, Serialize)]
pub struct Only {
    pub command: String,
    pub mode: String,
    pub cpu: String,
    pub cores: usize,
    pub tcp: Table,
    /// Wall time, seconds.
    pub seconds: f64,
}

/// `tcp.md` of a `--only tcp` run.
pub fn only_markdown(o: &Only) -> String {
    let mut s = format!(
        "# Slate benchmark report, TCP section only ({} mode)\n\n`{}` — {}, {} cores. Whole run: {:.0} s. \
         Times are medians in milliseconds.\n\n",
        o.mode, o.command, o.cpu, o.cores, o.seconds
    );
    markdown(&o.tcp, &mut s);
    s
}
