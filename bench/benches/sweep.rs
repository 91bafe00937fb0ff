//! Criterion form of the hybrid selectivity sweep (issue 5): at each
//! selectivity from 100% to 0.01%, indexed and not, one group timing every
//! forced strategy, auto, and the references that are handed the matching
//! rows. Consecutive queries at a point use disjoint filters of the same
//! selectivity (`sweep::WINDOWS` at most), each handed to the reference with
//! its own rows, so that neither side finds the last query's rows in cache.
//! First prints the planner's cost constants measured on this machine
//! beside the ones `CostModel` uses. Without an index, auto also runs with
//! its filters repeated (`auto-repeated`) and, after every point, right
//! after a commit changing 10 documents (`auto-after-write`).
//!
//! `bash scripts/bench.sh sweep` (100k × 384, k = 10, one thread per query);
//! `SLATE_SWEEP_N` and `SLATE_SWEEP_DIM` change the size, and
//! `SLATE_SWEEP_ONLY=0.01` runs just that selectivity (indexed and not), for profiling;
//! `SLATE_SWEEP_CODES=0` runs without row codes; `SLATE_SWEEP_EXPLAIN=1`
//! prints each strategy's `explain()` of one query at every point.

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use bson::{doc, Bson};
use criterion::{criterion_group, BatchSize, Criterion, Throughput};
use slate_bench::sweep::{self, SweepConfig, SweepData, SELECTIVITIES, STRATEGIES};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn calibrate(data: &SweepData, config: &SweepConfig) {
    let cal = data.calibrate().expect("calibration");
    let model = slate::query::CostModel::for_dim(config.dim);
    eprintln!(
        "calibration at {} x {}: row {:.1} ns; in rows: doc_check {:.2} (model {:.2}), scan_check {:.2} (model {:.2}), tagged_mask_candidate {:.3} (model {:.3}), doc_scan {:.2} \
         (model {:.2}), gather_row {:.2} (model {:.2}), code_row {:.2} (model {:.2}; {:.0} rows of the 10% gather \
         survived, model {:.0}), mask_row {:.2} (model {:.2}), mask_cold {:.2} (model {:.2}), mask_skip {:.4} (model {:.4}), \
         with codes: mask_task {:.2} (model {:.2}), mask_code {:.2} (model {:.2}), mask_code_sparse {:.2} (model {:.2})",
        config.n,
        config.dim,
        cal.row_nanos,
        cal.doc_check,
        model.doc_check,
        cal.scan_check,
        model.scan_check,
        cal.tagged_mask_candidate,
        model.tagged_mask_candidate,
        cal.doc_scan,
        model.doc_scan,
        cal.gather_row,
        model.gather_row,
        cal.code_row,
        model.code_row,
        cal.survivors,
        slate::query::CostModel::survivors(config.n as f64 / 10.0, config.k as f64),
        cal.mask_row,
        model.mask_row,
        cal.mask_cold,
        model.mask_cold,
        cal.mask_skip,
        model.mask_skip,
        cal.mask_task,
        model.mask_task,
        cal.mask_code,
        model.mask_code,
        cal.mask_code_sparse,
        model.mask_code_sparse
    );
}

/// Whether selectivity `s` runs, under `SLATE_SWEEP_ONLY=only` (a percentage).
fn selected(only: Option<f64>, s: f64) -> bool {
    !only.is_some_and(|o| (o - s * 100.0).abs() > 1e-9)
}

fn bench(c: &mut Criterion) {
    let config = SweepConfig {
        n: env_usize("SLATE_SWEEP_N", 100_000),
        dim: env_usize("SLATE_SWEEP_DIM", 384),
        codes: env_usize("SLATE_SWEEP_CODES", 1) != 0,
        ..SweepConfig::default()
    };
    let only: Option<f64> = std::env::var("SLATE_SWEEP_ONLY")
        .ok()
        .and_then(|v| v.parse().ok());
    let explain = env_usize("SLATE_SWEEP_EXPLAIN", 0) != 0;
    let data = sweep::build(&config).expect("sweep data");
    if only.is_none() {
        calibrate(&data, &config);
    }
    for indexed in [true, false] {
        for s in SELECTIVITIES {
            if !selected(only, s) {
                continue;
            }
            // Checks every strategy against the reference once (and learns
            // which strategies can serve this filter) before timing.
            let point = data
                .measure_checked(s, indexed)
                .expect("strategies agree with the reference");
            let name = format!("sweep/{}{}", s * 100.0, if indexed { "%" } else { "%-unindexed" });
            if explain {
                for strategy in &point.usable {
                    let (_, ex) = data
                        .slate_explain(&data.queries[0], &point.window(0).filter, *strategy)
                        .expect("search");
                    eprintln!("{name} {strategy}:\n{ex}");
                }
            }
            let mut group = c.benchmark_group(name);
            group.throughput(Throughput::Elements(1));
            group.sample_size(20);
            for strategy in STRATEGIES {
                if !point.usable.contains(&strategy) {
                    continue;
                }
                let mut i = 0;
                group.bench_function(strategy.to_string(), |b| {
                    b.iter(|| {
                        i += 1;
                        data.slate(
                            &data.queries[i % data.queries.len()],
                            &point.window(i).filter,
                            strategy,
                        )
                        .expect("search")
                    })
                });
            }
            // Auto with its filters repeated (the check above searched
            // each window's filter twice: its matches are kept if that pays).
            if !indexed {
                let mut i = 0;
                group.bench_function("auto-repeated", |b| {
                    b.iter(|| {
                        i += 1;
                        data.slate_repeated(&data.queries[i % data.queries.len()], &point.window(i).filter)
                            .expect("search")
                    })
                });
            }
            let mut i = 0;
            group.bench_function("reference-gather", |b| {
                b.iter(|| {
                    i += 1;
                    data.reference_gather(&data.queries[i % data.queries.len()], &point.window(i).rows)
                        .expect("reference")
                })
            });
            let mut i = 0;
            group.bench_function("reference-mask", |b| {
                b.iter(|| {
                    i += 1;
                    data.reference_mask(&data.queries[i % data.queries.len()], &point.window(i).mask)
                        .expect("reference")
                })
            });
            let mut i = 0;
            group.bench_function("plain-gather", |b| {
                b.iter(|| {
                    i += 1;
                    data.plain_gather(&data.queries[i % data.queries.len()], point.window(i))
                })
            });
            let mut i = 0;
            group.bench_function("plain-mask", |b| {
                b.iter(|| {
                    i += 1;
                    data.plain_mask(&data.queries[i % data.queries.len()], point.window(i))
                })
            });
            group.finish();
        }
    }
    // Last, since its commits leave retired rows behind for every later
    // search: auto with its filters repeated, each search right after a
    // commit changing 10 documents (not timed), as under a stream of
    // writes. A filter no index narrows brings its kept matches forward by
    // reading the documents written.
    let mut written = 0u64;
    for s in SELECTIVITIES {
        if !selected(only, s) {
            continue;
        }
        let point = data
            .measure_checked(s, false)
            .expect("strategies agree with the reference");
        let mut group = c.benchmark_group(format!("sweep/{}%-unindexed", s * 100.0));
        group.throughput(Throughput::Elements(1));
        group.sample_size(20);
        let mut i = 0;
        group.bench_function("auto-after-write", |b| {
            b.iter_batched(
                || {
                    let ids: Vec<Bson> = (0..10)
                        .map(|_| {
                            written += 1;
                            Bson::Int64((written.wrapping_mul(0x9e37_79b9) % config.n as u64) as i64)
                        })
                        .collect();
                    data.docs
                        .update_many(doc! { "_id": { "$in": ids } }, doc! { "$inc": { "w": 1 } }, false)
                        .expect("write");
                    i += 1;
                    i
                },
                |i| {
                    data.slate_repeated(&data.queries[i % data.queries.len()], &point.window(i).filter)
                        .expect("search")
                },
                BatchSize::PerIteration,
            )
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
slate::tuned_criterion_main!(benches);
