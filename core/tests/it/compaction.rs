//! Vector compaction triggered by commits: many updates of the same ids keep
//! the cache's memory bounded, searches match brute force before, during and
//! after compactions, and a reader that began before them still reads its
//! rows. Both backends.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bson::{doc, Bson};
use slate_core::{vector_to_bson, CollectionConfig, Database, MemoryStore, Metric, Part, RocksStore};

const DIM: usize = 8;
const IDS: u64 = 2_000;
const K: usize = 10;

/// id → vector at one version.
type Model = BTreeMap<i32, Vec<f32>>;

/// SplitMix64.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n
    }

    /// Small integers: l2 distances are exact in f32 and ties are common.
    fn vector(&mut self) -> Vec<f32> {
        (0..DIM).map(|_| self.below(9) as f32 - 4.0).collect()
    }
}

/// Brute force: the k nearest `(distance, id)`, ties by id (integer ids'
/// keys sort as the integers do).
fn brute_force(model: &Model, q: &[f32]) -> Vec<(f32, i32)> {
    let mut all: Vec<(f32, i32)> = model
        .iter()
        .map(|(&id, v)| (v.iter().zip(q).map(|(a, b)| (a - b) * (a - b)).sum(), id))
        .collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    all.truncate(K);
    all
}

/// Searches `read`'s snapshot; the hits as `(distance, _id)`.
fn search(read: &slate_core::ReadTxn<'_>, q: &[f32]) -> Vec<(f32, i32)> {
    let v = read.collection("v").expect("collection");
    let view = v.vectors("e").expect("the snapshot's vectors are still readable");
    let hits = view.search(q, K, 1).expect("search");
    let keys: Vec<&[u8]> = hits.iter().map(|h| &*h.id).collect();
    let docs = v.get_keys(&keys).expect("docs");
    hits.iter()
        .zip(docs)
        .map(|(h, d)| {
            let d = d.expect("hit's document exists");
            (h.distance, d.raw().expect("raw").get_i32("_id").expect("_id"))
        })
        .collect()
}

fn memory(db: &Database) -> usize {
    db.read()
        .collection("v")
        .expect("collection")
        .vector_memory_bytes()
}

/// One commit: upserts `n` random ids (inserting those absent) and deletes
/// a few; returns the commit version.
fn churn(db: &Database, model: &mut Model, rng: &mut Rng, n: usize) -> u64 {
    let mut txn = db.begin_write().expect("txn");
    for _ in 0..n {
        let id = rng.below(IDS) as i32;
        let v = rng.vector();
        let doc = doc! { "_id": id, "e": vector_to_bson(&v) };
        if model.contains_key(&id) {
            assert!(txn
                .replace("v", &Part::none(), &Bson::Int32(id), doc)
                .expect("replace"));
        } else {
            txn.insert("v", doc).expect("insert");
        }
        model.insert(id, v);
    }
    for _ in 0..5 {
        let id = rng.below(IDS) as i32;
        if model.remove(&id).is_some() {
            assert!(txn.delete("v", &Part::none(), &Bson::Int32(id)).expect("delete"));
        }
    }
    txn.commit().expect("commit")
}

fn run(db: &Database) {
    db.create_collection(CollectionConfig::new("v").vector("e", DIM, Metric::L2))
        .expect("create");
    let mut rng = Rng(11);
    let mut model = Model::new();
    let mut txn = db.begin_write().expect("txn");
    for id in 0..IDS as i32 {
        let v = rng.vector();
        txn.insert("v", doc! { "_id": id, "e": vector_to_bson(&v) })
            .expect("insert");
        model.insert(id, v);
    }
    let v0 = txn.commit().expect("commit");
    let initial = memory(db);

    // A reader that began before the updates pins their old rows: whatever
    // compactions run meanwhile, it reads exactly its snapshot.
    let pinned = db.read();
    assert_eq!(pinned.version(), v0);
    let pinned_model = model.clone();
    for _ in 0..8 {
        churn(db, &mut model, &mut rng, 500);
    }
    for _ in 0..5 {
        let q = rng.vector();
        assert_eq!(search(&pinned, &q), brute_force(&pinned_model, &q));
        assert_eq!(search(&db.read(), &q), brute_force(&model, &q));
    }
    drop(pinned);

    // Many updates of the same ids, with searches running beside them, each
    // checked against the model at its snapshot's version.
    let models: Mutex<BTreeMap<u64, Model>> = Mutex::new(BTreeMap::new());
    let latest = db.read().version();
    models.lock().expect("models").insert(latest, model.clone());
    let stop = AtomicBool::new(false);
    let checked = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let searcher = s.spawn(|| {
            let mut rng = Rng(99);
            while !stop.load(Ordering::Relaxed) {
                let q = rng.vector();
                let read = db.read();
                let got = search(&read, &q);
                // The writer records a version's model right after its commit.
                let want = loop {
                    if let Some(m) = models.lock().expect("models").get(&read.version()) {
                        break brute_force(m, &q);
                    }
                    std::thread::yield_now();
                };
                assert_eq!(got, want, "search at version {}", read.version());
                checked.fetch_add(1, Ordering::Relaxed);
            }
        });
        let mut peak = 0;
        for _ in 0..40 {
            let version = churn(db, &mut model, &mut rng, 500);
            models.lock().expect("models").insert(version, model.clone());
            peak = peak.max(memory(db));
        }
        // Let the searcher see the last version before stopping it.
        while checked.load(Ordering::Relaxed) < 20 && !searcher.is_finished() {
            std::thread::yield_now();
        }
        stop.store(true, Ordering::Relaxed);
        // 20,000 row versions were written over 2,000 ids: without compaction
        // the cache would hold over ten times its initial size.
        assert!(
            peak <= 3 * initial,
            "vector memory peaked at {peak} bytes, {:.1}x the initial {initial}",
            peak as f64 / initial as f64
        );
    });
    for _ in 0..5 {
        let q = rng.vector();
        assert_eq!(search(&db.read(), &q), brute_force(&model, &q));
    }
}

#[test]
fn many_updates_keep_vector_memory_bounded_and_searches_exact() {
    run(&Database::open(Arc::new(MemoryStore::new())).expect("memory db"));
    let dir = tempfile::tempdir().expect("tempdir");
    let rocks = RocksStore::builder(dir.path()).sync(false).open().expect("rocks");
    run(&Database::open(Arc::new(rocks)).expect("rocks db"));
}
