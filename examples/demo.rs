//! Slate's demo: documents with embeddings and metadata, filtered vector
//! searches across the selectivity range, each strategy timed and checked.
//!
//! `bash scripts/demo.sh [N] [DIM]` (default 100,000 × 384), on RocksDB in a
//! temporary directory (the embedded default store), sync off for the load.

use std::time::Instant;

// Slate's binaries use mimalloc (README, "Allocator").
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use slate::bson::{doc, spec::BinarySubtype, Binary, Bson, Document};
use slate::{CollectionConfig, Db, Metric, Strategy, VectorField};

/// Timed runs of each search; the table shows the fastest.
const RUNS: usize = 5;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn unit(&mut self) -> f32 {
        (self.next() % 20_000) as f32 / 10_000.0 - 1.0
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // SAFETY: first in main, before any other thread exists.
    #[allow(unsafe_code)]
    unsafe {
        slate::allocator::tune_mimalloc()
    };
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(100_000);
    let dim: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(384);
    let dir = tempfile_dir()?;
    let db = Db::builder(&dir).sync(false).open()?;
    let docs = db.create_collection(
        CollectionConfig::new("articles")
            .index("category")
            .index("lang")
            .index("published")
            .vector_field_config(VectorField::new("embedding", dim, Metric::Cosine).with_codes(true)),
    )?;

    println!("generating {n} articles with {dim}-d embeddings...");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let langs = ["en", "en", "en", "en", "en", "de", "fr", "es", "ja", "pt"];
    let batch: Vec<Document> = (0..n)
        .map(|i| {
            let v: Vec<u8> = (0..dim).flat_map(|_| rng.unit().to_le_bytes()).collect();
            let mut d = doc! {
                "_id": i as i64,
                "title": format!("article {i}"),
                "category": format!("c{:02}", rng.next() % 100),
                "lang": langs[(rng.next() % 10) as usize],
                "published": rng.next().is_multiple_of(2),
                "views": (rng.next() % 100_000) as i64,
                "embedding": Binary { subtype: BinarySubtype::Generic, bytes: v },
            };
            if rng.next().is_multiple_of(1000) {
                d.insert("editors_pick", true);
            }
            d
        })
        .collect();
    let t = Instant::now();
    docs.insert_many(batch)?;
    println!(
        "loaded in {:.2?}; vector cache {:.1} MiB",
        t.elapsed(),
        docs.vector_memory_bytes()? as f64 / (1 << 20) as f64
    );
    // One more commit moves the loaded documents from RocksDB's write buffer
    // to a file, where a reopened database finds them: every search below
    // reads documents from there.
    docs.update_one(doc! { "_id": 0 }, doc! { "$inc": { "views": 0 } }, false)?;

    let query: Vec<f32> = (0..dim).map(|_| rng.unit()).collect();
    let filters = [
        ("everything (100%)", doc! {}),
        ("published (50%, indexed)", doc! { "published": true }),
        ("lang = de (10%, indexed)", doc! { "lang": "de" }),
        ("category = c42 (1%, indexed)", doc! { "category": "c42" }),
        (
            "c42 and de (0.1%, indexed)",
            doc! { "category": "c42", "lang": "de" },
        ),
        ("editors_pick (0.1%, not indexed)", doc! { "editors_pick": true }),
        (
            "views < 5000 (5%, not indexed)",
            doc! { "views": { "$lt": 5000 } },
        ),
        ("category = none (0 matches)", doc! { "category": "none" }),
    ];
    println!(
        "\n{:<34} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8}  top hit",
        "filter", "auto", "auto ms", "repeated", "+10 docs", "gather", "scan", "bitmap", "checked"
    );
    let mut written = 0u64;
    for (name, filter) in filters {
        let mut row = Vec::new();
        let mut reference = None;
        let mut chosen = Strategy::Auto;
        let mut checked = 0;
        let mut top = String::from("-");
        // Every search runs as its filter's first (`fresh`) but for
        // `repeated`: auto as an application repeating the filter sees it,
        // the matches of a filter no index narrows kept from its second
        // search on.
        let runs = [
            (Strategy::Auto, true),
            (Strategy::Auto, false),
            (Strategy::Gather, true),
            (Strategy::Scan, true),
            (Strategy::Bitmap, true),
        ];
        for (i, (strategy, fresh)) in runs.into_iter().enumerate() {
            // Best of a few runs: this machine is shared, and the first run
            // also warms the caches.
            let mut best = f64::INFINITY;
            let mut result = None;
            for _ in 0..RUNS {
                let t = Instant::now();
                let mut search = docs
                    .search("embedding", &query)
                    .k(10)
                    .filter(&filter)
                    .strategy(strategy);
                if fresh {
                    search = search.fresh();
                }
                let r = search.explain();
                best = best.min(t.elapsed().as_secs_f64() * 1e3);
                let failed = r.is_err();
                result = Some(r);
                if failed {
                    break;
                }
            }
            match result.expect("RUNS > 0") {
                Ok((hits, explain)) => {
                    let ids: Vec<_> = hits.iter().map(|h| h.id.clone()).collect();
                    match &reference {
                        None => reference = Some(ids),
                        Some(r) => assert_eq!(r, &ids, "{name}: {strategy} disagrees with auto"),
                    }
                    if i == 0 {
                        chosen = explain.strategy;
                        checked = explain.docs_checked;
                        if let Some(h) = hits.first() {
                            top = format!("{} at {:.4} ({} hits)", h.id, h.distance, hits.len());
                        }
                    }
                    row.push(format!("{best:>9.2}"));
                }
                Err(_) => row.push(format!("{:>9}", "n/a")),
            }
        }
        // `+10 docs`: the filter repeated right after a commit that changed
        // 10 documents, as under a stream of writes: kept matches are
        // brought forward by reading those 10 again. The writes reach the
        // top hits and move documents in and out of the unindexed filters
        // (`editors_pick` set or unset, `views` across 5000); each search is
        // checked against a first search at the same version, and matches
        // brought forward against a count of the documents.
        let mut best = f64::INFINITY;
        for run in 0..RUNS {
            let mut ids: Vec<Bson> = docs
                .search("embedding", &query)
                .k(5)
                .filter(&filter)
                .fresh()
                .run()?
                .into_iter()
                .map(|h| h.id)
                .collect();
            while ids.len() < 10 {
                written += 1;
                ids.push(Bson::Int64((written.wrapping_mul(0x9e37_79b9) % n as u64) as i64));
            }
            let change = if run % 2 == 0 {
                doc! { "$set": { "views": 4_999i64, "editors_pick": true } }
            } else {
                doc! { "$set": { "views": 5_000i64 }, "$unset": { "editors_pick": "" } }
            };
            docs.update_many(doc! { "_id": { "$in": ids } }, change, false)?;
            let t = Instant::now();
            let (hits, explain) = docs.search("embedding", &query).k(10).filter(&filter).explain()?;
            best = best.min(t.elapsed().as_secs_f64() * 1e3);
            let fresh = docs
                .search("embedding", &query)
                .k(10)
                .filter(&filter)
                .fresh()
                .run()?;
            let ids = |h: &[slate::SearchHit]| h.iter().map(|h| h.id.clone()).collect::<Vec<_>>();
            assert_eq!(ids(&hits), ids(&fresh), "{name}: after a write");
            if explain.estimated_by.starts_with("kept matches") {
                assert_eq!(
                    explain.estimate,
                    docs.count(filter.clone())?,
                    "{name}: matches brought forward"
                );
            }
        }
        row.insert(2, format!("{best:>9.2}"));
        println!(
            "{name:<34} {:>7} {} {} {} {} {} {} {checked:>8}  {top}",
            chosen.to_string(),
            row[0],
            row[1],
            row[2],
            row[3],
            row[4],
            row[5]
        );
    }
    println!(
        "\nevery strategy returned the same hits as auto; ms: best of {RUNS} runs, each \
         run as its filter's first search but for `repeated` (auto with the filter \
         repeated: from its second search, a filter no index narrows keeps its \
         matches) and `+10 docs` (repeated right after a commit changing 10 \
         documents, 5 of them its top hits); documents are read from files (a \
         commit after the load flushed them); checked: documents auto read to \
         check the filter"
    );
    drop(docs);
    drop(db);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

fn tempfile_dir() -> std::io::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("slate-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
