//! Server bench (seed 000's TCP table): the same queries on the same
//! RocksDB database, embedded and through `slate serve` on loopback (a
//! `Server` in this process, a `Client` over a real TCP socket); 1,000 point
//! lookups as single round trips and as one `get_many`; and the wire format
//! choice, BSON bytes in a MessagePack bin against documents as native
//! MessagePack maps (encode + decode of 1,000 records).
//!
//! N defaults to 10,000 (`SLATE_BENCH_SERVER_N` to change). Names:
//! `server/{N}/{query}/{embedded|tcp}`, `server/{N}/lookups_1000/...`,
//! `wire/1000_docs/{bson_bytes|msgpack_map}`.

// Like every Slate binary: glibc malloc slows the per-document buffers (README, "Allocator").
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, Criterion};
use slate::bson::{doc, Bson, DateTime, Document};
use slate::server::protocol::Bin;
use slate::{Client, Collection, CollectionConfig, Db, RemoteCollection, Server, ServerConfig};

const COLL: &str = "docs";
const LOOKUPS: usize = 1_000;

fn size() -> usize {
    std::env::var("SLATE_BENCH_SERVER_N")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(10_000)
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
}

const SYLLABLES: &[&str] = &["ka", "lo", "mi", "ra", "to", "ne", "su", "vi", "da", "pe"];

/// Seed 000's record: 8 fields, `status` ~50/50, 30% null dates, 50% null notes.
fn records(n: usize) -> Vec<Document> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    (0..n)
        .map(|i| {
            let name: String = (0..3)
                .map(|_| SYLLABLES[rng.below(SYLLABLES.len() as u64) as usize])
                .collect();
            let status = if rng.below(2) == 0 { "active" } else { "rejected" };
            let contacts = rng.below(101) as i64;
            let rec1 = ["ProductA", "ProductB", "ProductC"][rng.below(3) as usize];
            let rec2 = ["ProductX", "ProductY", "ProductZ"][rng.below(3) as usize];
            let rec3 = ["Widget1", "Widget2", "Widget3"][rng.below(3) as usize];
            let last = if rng.below(10) < 3 {
                Bson::Null
            } else {
                Bson::DateTime(DateTime::from_millis(
                    1_700_000_000_000 - rng.below(365 * 24 * 3600 * 1000) as i64,
                ))
            };
            let notes = if rng.below(2) == 0 {
                Bson::Null
            } else {
                Bson::String(format!("note {} for {name}", rng.below(1_000_000)))
            };
            doc! {
                "_id": i as i64,
                "name": format!("{name} {i}"),
                "status": status,
                "contacts_count": contacts,
                "product_recommendation1": rec1,
                "product_recommendation2": rec2,
                "product_recommendation3": rec3,
                "last_contacted_at": last,
                "notes": notes,
            }
        })
        .collect()
}

/// A query run the same way on both sides; returns the rows it got.
struct Query {
    name: &'static str,
    filter: Document,
    sort: Option<&'static str>,
    skip: usize,
    limit: Option<usize>,
    projection: Option<[&'static str; 2]>,
}

fn q(name: &'static str, filter: Document) -> Query {
    Query {
        name,
        filter,
        sort: None,
        skip: 0,
        limit: None,
        projection: None,
    }
}

fn queries() -> Vec<Query> {
    vec![
        q("full_scan", doc! {}),
        q("status_active", doc! { "status": "active" }),
        q(
            "status_rec1_rec2_and",
            doc! { "status": "active", "product_recommendation1": "ProductA", "product_recommendation2": "ProductX" },
        ),
        Query {
            sort: Some("contacts_count"),
            ..q("status_sort_contacts", doc! { "status": "active" })
        },
        Query {
            limit: Some(200),
            ..q("status_limit200", doc! { "status": "active" })
        },
        Query {
            sort: Some("contacts_count"),
            limit: Some(200),
            ..q("status_sort_limit200", doc! { "status": "active" })
        },
        Query {
            sort: Some("contacts_count"),
            skip: 10,
            limit: Some(50),
            ..q("status_sort_skip10_limit50", doc! { "status": "active" })
        },
        Query {
            projection: Some(["name", "status"]),
            ..q("projection_name_status", doc! {})
        },
    ]
}

fn embedded(c: &Collection, q: &Query) -> usize {
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
    let docs = f.run().expect("embedded find");
    black_box(&docs);
    docs.len()
}

fn remote(c: &RemoteCollection, q: &Query) -> usize {
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
    let docs = f.run().expect("remote find");
    black_box(&docs);
    docs.len()
}

fn bench_server(c: &mut Criterion) {
    let n = size();
    let docs = records(n);
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let db = Db::builder(dir.path()).sync(false).open().expect("open");
        db.create_collection(CollectionConfig::new(COLL).index("status"))
            .expect("collection")
            .insert_many(docs.clone())
            .expect("insert");
    }
    // Reopened: reads come from files, as in the documents bench.
    let db = Db::builder(dir.path()).sync(false).open().expect("reopen");
    let local = db.collection(COLL).expect("collection");
    let server = Server::start(db.clone(), ServerConfig::new("127.0.0.1:0")).expect("server");
    let client = Client::connect(server.local_addr().to_string()).expect("connect");
    let tcp = client.collection(COLL).expect("remote collection");

    let mut group = c.benchmark_group(format!("server/{n}"));
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500));
    for query in queries() {
        let rows = embedded(&local, &query);
        assert_eq!(remote(&tcp, &query), rows, "{}: same rows both ways", query.name);
        assert!(rows > 0, "{}: no rows", query.name);
        group.bench_function(format!("{}/embedded", query.name), |b| {
            b.iter(|| embedded(&local, &query))
        });
        group.bench_function(format!("{}/tcp", query.name), |b| b.iter(|| remote(&tcp, &query)));
    }

    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    let ids: Vec<Bson> = (0..LOOKUPS)
        .map(|_| Bson::Int64(rng.below(n as u64) as i64))
        .collect();
    group.bench_function("lookups_1000/embedded_get", |b| {
        b.iter(|| {
            for id in &ids {
                black_box(local.get(id.clone()).expect("get"));
            }
        })
    });
    group.bench_function("lookups_1000/embedded_get_many", |b| {
        b.iter(|| black_box(local.get_many(&ids).expect("get_many")))
    });
    group.bench_function("lookups_1000/tcp_get", |b| {
        b.iter(|| {
            for id in &ids {
                black_box(tcp.get(id.clone()).expect("get"));
            }
        })
    });
    group.bench_function("lookups_1000/tcp_get_many", |b| {
        b.iter(|| black_box(tcp.get_many(&ids).expect("get_many")))
    });
    group.finish();
    drop(client);
    server.shutdown();
}

/// Documents as BSON bytes in a bin (what the protocol does) against
/// documents as native MessagePack maps through serde.
fn bench_wire(c: &mut Criterion) {
    let docs = records(1_000);
    let bson_round = |docs: &[Document]| -> Vec<Document> {
        let bins: Vec<Bin> = docs.iter().map(Bin::doc).collect();
        let frame = rmp_serde::to_vec(&bins).expect("msgpack");
        let back: Vec<Bin> = rmp_serde::from_slice(&frame).expect("msgpack");
        back.iter().map(|b| b.to_doc("doc").expect("bson")).collect()
    };
    let msgpack_round = |docs: &[Document]| -> Vec<Document> {
        let frame = rmp_serde::to_vec_named(docs).expect("msgpack");
        rmp_serde::from_slice(&frame).expect("msgpack")
    };
    let bytes_of = |d: &Document| {
        let mut out = Vec::new();
        d.to_writer(&mut out).expect("bson");
        out
    };
    let faithful = |back: &[Document]| {
        docs.iter()
            .zip(back)
            .filter(|(a, b)| bytes_of(a) == bytes_of(b))
            .count()
    };
    eprintln!(
        "wire: 1,000 records round-tripped byte-for-byte: bson_bytes {}, msgpack_map {} \
         (frame bytes: bson_bytes {}, msgpack_map {})",
        faithful(&bson_round(&docs)),
        faithful(&msgpack_round(&docs)),
        docs.iter().map(|d| bytes_of(d).len() + 5).sum::<usize>(),
        rmp_serde::to_vec_named(&docs).expect("msgpack").len(),
    );
    let mut group = c.benchmark_group("wire/1000_docs");
    group.sample_size(20).measurement_time(Duration::from_secs(2));
    group.bench_function("bson_bytes", |b| b.iter(|| black_box(bson_round(&docs))));
    group.bench_function("msgpack_map", |b| b.iter(|| black_box(msgpack_round(&docs))));
    group.finish();
}

criterion_group!(benches, bench_wire, bench_server);
slate::tuned_criterion_main!(benches);
