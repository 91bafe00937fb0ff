//! Vector search benches: exact top-10 over N rows × dim, one query at a time
//! and batched, on 1 and 2 threads; plus this machine's memory read bandwidth
//! measured in the same run (a plain sum over a buffer larger than the
//! caches), so that bytes scanned per second can be read as a fraction of the
//! roofline. Sizes: `SLATE_BENCH_VECTOR_SIZES` (default "10000x128,100000x384").

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use slate::vector::{Metric, VectorCache};

fn sizes() -> Vec<(usize, usize)> {
    let spec = std::env::var("SLATE_BENCH_VECTOR_SIZES").unwrap_or_else(|_| "10000x128,100000x384".into());
    spec.split(',')
        .filter_map(|s| {
            let (n, d) = s.split_once('x')?;
            Some((n.trim().parse().ok()?, d.trim().parse().ok()?))
        })
        .collect()
}

fn rows(n: usize, dim: usize, seed: u64) -> Vec<f32> {
    let mut state = seed | 1;
    (0..n * dim)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % 2000) as f32 / 1000.0 - 1.0
        })
        .collect()
}

fn bandwidth(c: &mut Criterion) {
    let buf = vec![1.0f32; 64 << 20 >> 2]; // 64 MiB, larger than any cache here
    let mut group = c.benchmark_group("memory");
    group.throughput(Throughput::Bytes((buf.len() * 4) as u64));
    group.sample_size(20).measurement_time(Duration::from_secs(3));
    group.bench_function("read_bandwidth/64MiB", |b| {
        b.iter(|| {
            let mut acc = [0f32; 16];
            for chunk in buf.chunks_exact(16) {
                for (a, x) in acc.iter_mut().zip(chunk) {
                    *a += x;
                }
            }
            black_box(acc.iter().sum::<f32>())
        })
    });
    group.finish();
}

fn search(c: &mut Criterion) {
    for (n, dim) in sizes() {
        let cache = VectorCache::new(dim, Metric::L2).expect("cache");
        let data = rows(n, dim, 7);
        let ids: Vec<Vec<u8>> = (0..n as u64).map(|i| i.to_be_bytes().to_vec()).collect();
        cache
            .load(ids.iter().zip(data.chunks_exact(dim)), 1)
            .expect("load");
        let view = cache.view(1).expect("view");
        let queries = rows(64, dim, 11);
        let mut group = c.benchmark_group("search");
        group
            .sample_size(10)
            .measurement_time(Duration::from_secs(3))
            .warm_up_time(Duration::from_secs(1));
        for threads in [1usize, 2] {
            group.throughput(Throughput::Bytes((n * dim * 4) as u64));
            group.bench_function(
                BenchmarkId::new(
                    format!("exact/{n}x{dim}/k=10/single"),
                    format!("threads={threads}"),
                ),
                |b| b.iter(|| black_box(view.search(&queries[..dim], 10, threads).expect("search"))),
            );
            group.throughput(Throughput::Bytes((n * dim * 4 * 64) as u64));
            group.bench_function(
                BenchmarkId::new(
                    format!("exact/{n}x{dim}/k=10/batch64"),
                    format!("threads={threads}"),
                ),
                |b| b.iter(|| black_box(view.search_batch(&queries, 10, threads).expect("batch"))),
            );
        }
        group.finish();
    }
}

criterion_group!(benches, bandwidth, search);
criterion_main!(benches);
