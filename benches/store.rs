//! Store-level bench (seed 000's store table): write N values of 10 KB in one
//! commit, read them all back by key, scan the whole prefix; MemoryStore beside
//! RocksStore in one group. N defaults to 5,000 (50 MB); set
//! `SLATE_BENCH_STORE_N` for the seed's 500,000.

// Like every Slate binary: glibc malloc slows the per-document buffers (README, "Allocator").
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, BatchSize, Criterion, Throughput};
use slate::core::{begin_write, Direction, MemoryStore, RocksStore, Store};

const VALUE_BYTES: usize = 10 * 1024;

fn n() -> usize {
    std::env::var("SLATE_BENCH_STORE_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5_000)
}

fn key(i: usize) -> Vec<u8> {
    format!("d:{i:010}").into_bytes()
}

fn value(i: usize) -> Vec<u8> {
    let mut v = vec![(i % 251) as u8; VALUE_BYTES];
    v[..8].copy_from_slice(&(i as u64).to_le_bytes());
    v
}

struct Fixture {
    store: Box<dyn Store>,
    _dir: Option<tempfile::TempDir>,
}

fn fresh(backend: &str) -> Fixture {
    let (store, dir): (Box<dyn Store>, _) = if backend == "memory" {
        (Box::new(MemoryStore::new()), None)
    } else {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = RocksStore::builder(dir.path()).sync(false).open().expect("open");
        (Box::new(store), Some(dir))
    };
    store.create_cf("bench").expect("create cf");
    Fixture { store, _dir: dir }
}

fn write_all(store: &dyn Store, n: usize) {
    let mut txn = begin_write(store).expect("txn");
    for i in 0..n {
        txn.put("bench", key(i), value(i)).expect("put");
    }
    txn.commit().expect("commit");
}

fn bench_store(c: &mut Criterion) {
    let n = n();
    let mut group = c.benchmark_group("store");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5))
        .warm_up_time(Duration::from_secs(1));
    group.throughput(Throughput::Elements(n as u64));
    for backend in ["memory", "rocks"] {
        group.bench_function(format!("write/{backend}/{n} x 10KB"), |b| {
            b.iter_batched(
                || fresh(backend),
                |f| {
                    write_all(f.store.as_ref(), n);
                    f
                },
                BatchSize::PerIteration,
            )
        });
        let f = fresh(backend);
        write_all(f.store.as_ref(), n);
        let keys: Vec<Vec<u8>> = (0..n).map(key).collect();
        group.bench_function(format!("read_all/{backend}/{n} x 10KB"), |b| {
            b.iter(|| {
                let snap = f.store.snapshot();
                let mut bytes = 0usize;
                for k in &keys {
                    bytes += snap.get("bench", k).expect("get").map_or(0, |v| v.len());
                }
                assert_eq!(bytes, n * VALUE_BYTES);
                black_box(bytes)
            })
        });
        group.bench_function(format!("scan_prefix/{backend}/{n} x 10KB"), |b| {
            b.iter(|| {
                let snap = f.store.snapshot();
                let mut count = 0usize;
                for e in snap.prefix("bench", b"d:", Direction::Forward).expect("scan") {
                    black_box(e.expect("entry").1.len());
                    count += 1;
                }
                assert_eq!(count, n);
                count
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_store);
slate::tuned_criterion_main!(benches);
