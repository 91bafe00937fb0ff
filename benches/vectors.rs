//! Vector search benches: exact top-10 (l2) over N rows × dim, one query at a
//! time and a batch of 64, on 1 and 2 threads; and this machine's memory
//! read bandwidth on 1 and 2 threads, measured in the same run (a sum over a
//! 1 GiB buffer, four times the 260 MiB L3 here) before and after the
//! searches, so that bytes scanned per second read as a fraction of the
//! roofline. The run ends with a markdown table of every search measured:
//! ms per query, QPS, GiB/s, the fraction of the bandwidth at the same thread
//! count, and batch QPS ÷ single QPS. A third mode, `single-codes`, runs
//! the single query on the same rows kept with 8-bit codes
//! (`CacheConfig::codes`), which bound most rows before their vectors are
//! read; its last column is its speed-up over `single`, and its GiB/s count
//! the f32 rows it answers for, most of which it never reads.
//!
//! Sizes: 10k and 100k rows at dim 128, 384 and 768; `SLATE_BENCH_FULL=1`
//! adds 1M rows at each dim (1M × 768 is 3 GiB). `SLATE_BENCH_VECTOR_SIZES`
//! ("100000x384,1000000x128") replaces the list. A criterion filter picks
//! benches as usual (`bash scripts/bench.sh vectors -- 100000x384`).

// Like every Slate binary: glibc malloc slows the per-document buffers (README, "Allocator").
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use slate::vector::{CacheConfig, Metric, VectorCache};

const K: usize = 10;
const BATCH: usize = 64;
const GIB: f64 = (1u64 << 30) as f64;

fn sizes() -> Vec<(usize, usize)> {
    if let Ok(spec) = std::env::var("SLATE_BENCH_VECTOR_SIZES") {
        return spec
            .split(',')
            .filter_map(|s| {
                let (n, d) = s.split_once('x')?;
                Some((n.trim().parse().ok()?, d.trim().parse().ok()?))
            })
            .collect();
    }
    let mut rows = vec![10_000, 100_000];
    if std::env::var("SLATE_BENCH_FULL").is_ok_and(|v| v == "1") {
        rows.push(1_000_000);
    }
    rows.iter()
        .flat_map(|&n| [128, 384, 768].map(|d| (n, d)))
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

/// Read bandwidth in GiB/s on `threads` threads: the median of 5 sums over
/// `buf`, split evenly between the threads.
fn bandwidth(buf: &[f32], threads: usize) -> f64 {
    fn sum(part: &[f32]) -> f32 {
        let mut acc = [0f32; 16];
        for chunk in part.chunks_exact(16) {
            for (a, x) in acc.iter_mut().zip(chunk) {
                *a += x;
            }
        }
        acc.iter().sum()
    }
    let mut rates: Vec<f64> = (0..5)
        .map(|_| {
            let start = Instant::now();
            std::thread::scope(|s| {
                let parts: Vec<_> = buf
                    .chunks(buf.len().div_ceil(threads))
                    .map(|part| s.spawn(move || sum(part)))
                    .collect();
                for p in parts {
                    black_box(p.join().expect("sum thread"));
                }
            });
            std::mem::size_of_val(buf) as f64 / GIB / start.elapsed().as_secs_f64()
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    rates[rates.len() / 2]
}

/// Bandwidth on 1 and 2 threads over a fresh 1 GiB buffer.
fn measure_bandwidth() -> [f64; 2] {
    let buf = vec![1.0f32; 1 << 28];
    [bandwidth(&buf, 1), bandwidth(&buf, 2)]
}

/// Per-iteration times of each search bench: (rows, dim, mode, threads) →
/// the mean of each criterion sample.
type Samples = BTreeMap<(usize, usize, &'static str, usize), Vec<f64>>;
static SAMPLES: Mutex<Samples> = Mutex::new(BTreeMap::new());

/// Times `f` for criterion and records the sample's mean per iteration.
fn timed(key: (usize, usize, &'static str, usize), iters: u64, mut f: impl FnMut()) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        f();
    }
    let elapsed = start.elapsed();
    SAMPLES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(key)
        .or_default()
        .push(elapsed.as_secs_f64() / iters as f64);
    elapsed
}

/// The rows of one size, loaded into a cache (with row codes or not), and
/// its view.
fn build(n: usize, dim: usize, codes: bool) -> slate::vector::CacheView {
    let cache = VectorCache::with_config(CacheConfig::new(dim, Metric::L2).codes(codes)).expect("cache");
    let data = rows(n, dim, 7);
    let ids: Vec<Vec<u8>> = (0..n as u64).map(|i| i.to_be_bytes().to_vec()).collect();
    cache
        .load(ids.iter().zip(data.chunks_exact(dim)), 1)
        .expect("load");
    // The view keeps the rows alive without the cache.
    cache.view(1).expect("view")
}

fn search(c: &mut Criterion) {
    for (n, dim) in sizes() {
        // Built on first use, so sizes the filter skips cost nothing.
        let view = OnceCell::new();
        let view = || view.get_or_init(|| build(n, dim, false));
        let coded = OnceCell::new();
        let coded = || coded.get_or_init(|| build(n, dim, true));
        let queries = rows(BATCH, dim, 11);
        let name = |mode: &str, threads: usize| {
            BenchmarkId::new(
                format!("exact/{n}x{dim}/k={K}/{mode}"),
                format!("threads={threads}"),
            )
        };
        let mut group = c.benchmark_group("search");
        group
            .sample_size(10)
            .measurement_time(Duration::from_secs(3))
            .warm_up_time(Duration::from_secs(1));
        for threads in [1usize, 2] {
            group.throughput(Throughput::Bytes((n * dim * 4) as u64));
            group.bench_function(name("single", threads), |b| {
                let view = view();
                b.iter_custom(|iters| {
                    timed((n, dim, "single", threads), iters, || {
                        black_box(view.search(&queries[..dim], K, threads).expect("search"));
                    })
                })
            });
            group.bench_function(name("single-codes", threads), |b| {
                let view = coded();
                b.iter_custom(|iters| {
                    timed((n, dim, "single-codes", threads), iters, || {
                        black_box(view.search(&queries[..dim], K, threads).expect("search"));
                    })
                })
            });
            group.throughput(Throughput::Bytes((n * dim * 4 * BATCH) as u64));
            group.bench_function(name("batch64", threads), |b| {
                let view = view();
                b.iter_custom(|iters| {
                    timed((n, dim, "batch64", threads), iters, || {
                        black_box(view.search_batch(&queries, K, threads).expect("batch"));
                    })
                })
            });
        }
        group.finish();
    }
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn report(before: [f64; 2], after: [f64; 2]) {
    let bw = [(before[0] + after[0]) / 2.0, (before[1] + after[1]) / 2.0];
    let samples = SAMPLES.lock().unwrap_or_else(|e| e.into_inner());
    if samples.is_empty() {
        return;
    }
    println!();
    println!(
        "Read bandwidth, 1 GiB: 1 thread {:.1} GiB/s ({:.1} before, {:.1} after), 2 threads {:.1} GiB/s ({:.1} before, {:.1} after)",
        bw[0], before[0], after[0], bw[1], before[1], after[1]
    );
    println!();
    println!("| rows × dim | MiB | mode | threads | ms/query | QPS | GiB/s | of bandwidth | ÷ single QPS |");
    println!("|---|--:|---|--:|--:|--:|--:|--:|--:|");
    let mut sizes: Vec<(usize, usize)> = samples.keys().map(|&(n, d, _, _)| (n, d)).collect();
    sizes.dedup();
    let lines = sizes.into_iter().flat_map(|(n, dim)| {
        ["single", "single-codes", "batch64"]
            .into_iter()
            .flat_map(move |mode| [1, 2].map(|threads| (n, dim, mode, threads)))
    });
    for (n, dim, mode, threads) in lines {
        let Some(times) = samples.get(&(n, dim, mode, threads)) else {
            continue;
        };
        let per_iter = median(times);
        let queries = if mode == "batch64" { BATCH } else { 1 };
        let per_query = per_iter / queries as f64;
        let bytes = (n * dim * 4) as f64;
        let gibs = bytes / GIB / per_query;
        let ratio = match mode {
            "batch64" | "single-codes" => samples
                .get(&(n, dim, "single", threads))
                .map_or("–".to_owned(), |s| format!("{:.1}", median(s) / per_query)),
            _ => String::new(),
        };
        println!(
            "| {n} × {dim} | {:.0} | {mode} | {threads} | {:.3} | {:.0} | {:.1} | {:.0}% | {ratio} |",
            bytes / (1 << 20) as f64,
            per_query * 1e3,
            1.0 / per_query,
            gibs,
            100.0 * gibs / bw[threads - 1],
        );
    }
}

fn main() {
    // SAFETY: first in main, before any other thread exists.
    #[allow(unsafe_code)]
    unsafe {
        slate::allocator::tune_mimalloc()
    };
    let mut c = Criterion::default().configure_from_args();
    let listing = std::env::args().any(|a| a == "--list" || a == "--test");
    let before = if listing { [0.0; 2] } else { measure_bandwidth() };
    search(&mut c);
    c.final_summary();
    if !listing {
        report(before, measure_bandwidth());
    }
}
