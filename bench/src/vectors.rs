//! Seed 002's vector workload through Slate's API: vector insert, then exact
//! top-10 search (l2) one query at a time and in batches of 64, on 1 and 2
//! threads, with the bytes of vectors scanned per second set against this
//! machine's memory read bandwidth measured in the same run; and SIFT-small
//! recall@10 against its shipped ground truth.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rayon::prelude::*;
use serde::Serialize;
use slate::bson::{doc, spec::BinarySubtype, Binary, Bson, Document};
use slate::{Collection, CollectionConfig, Db, Metric};

use crate::records::Rng;
use crate::timing::once;
use crate::Res;

/// Hits per search.
pub const K: usize = 10;
/// Queries per batch.
pub const BATCH: usize = 64;
const FIELD: &str = "embedding";

/// Memory read bandwidth, GiB/s.
#[derive(Debug, Clone, Serialize)]
pub struct Bandwidth {
    /// Buffer summed, MiB (larger than the caches).
    pub buffer_mib: usize,
    /// Best of the runs, one thread.
    pub one_thread_gib_s: f64,
    /// Best of the runs, two threads (each summing half).
    pub two_threads_gib_s: f64,
}

/// Sums a buffer larger than the caches: the read roofline a scan can reach.
pub fn bandwidth(mib: usize, min_time: Duration) -> Bandwidth {
    let buf = vec![1.0f32; (mib << 20) / 4];
    let bytes = (buf.len() * 4) as f64;
    let sum = |xs: &[f32]| {
        let mut acc = [0f32; 16];
        for chunk in xs.chunks_exact(16) {
            for (a, x) in acc.iter_mut().zip(chunk) {
                *a += x;
            }
        }
        acc.iter().sum::<f32>()
    };
    let best = |f: &dyn Fn() -> f32| {
        let start = Instant::now();
        let mut best = f64::INFINITY;
        let mut runs = 0;
        while runs < 3 || start.elapsed() < min_time {
            let t = Instant::now();
            black_box(f());
            best = best.min(t.elapsed().as_secs_f64());
            runs += 1;
        }
        bytes / best / (1u64 << 30) as f64
    };
    let one = best(&|| sum(&buf));
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build();
    let two = match pool {
        Ok(pool) => best(&|| pool.install(|| buf.par_chunks(buf.len() / 2).map(sum).sum::<f32>())),
        Err(_) => 0.0,
    };
    Bandwidth {
        buffer_mib: mib,
        one_thread_gib_s: one,
        two_threads_gib_s: two,
    }
}

/// Search figures of one (size, mode, threads).
#[derive(Debug, Clone, Serialize)]
pub struct SearchRow {
    pub n: usize,
    pub dim: usize,
    /// `single` or `batch64`.
    pub mode: String,
    pub threads: usize,
    /// Milliseconds per query (a batch's time divided by its queries).
    pub ms_per_query: f64,
    pub qps: f64,
    /// Vector bytes scanned per second, GiB/s (a batch counts each query's
    /// pass; blocked batches reuse rows from cache, so this can pass the
    /// bandwidth).
    pub gib_s: f64,
    /// `gib_s` ÷ the measured bandwidth for the same thread count.
    pub of_bandwidth: f64,
}

/// Insert figures of one size.
#[derive(Debug, Clone, Serialize)]
pub struct InsertRow {
    pub n: usize,
    pub dim: usize,
    /// Documents with one vector each, in 10 batches, MemoryStore.
    pub ms: f64,
    pub vectors_per_s: f64,
}

fn vector_doc(id: i64, v: &[f32]) -> Document {
    let bytes = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    doc! { "_id": id, FIELD: Binary { subtype: BinarySubtype::Generic, bytes } }
}

fn random_vectors(n: usize, dim: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng(seed | 1);
    (0..n * dim).map(|_| rng.unit()).collect()
}

/// Loads `data` (`n × dim`) into a fresh memory collection, 10 batches.
fn load(dim: usize, data: &[f32]) -> Res<(Collection, f64)> {
    let coll = Db::memory().create_collection(CollectionConfig::new("v").vector(FIELD, dim, Metric::L2))?;
    let n = data.len() / dim;
    let per = n.div_ceil(10).max(1);
    let batches: Vec<Vec<Document>> = data
        .chunks(dim)
        .enumerate()
        .map(|(i, v)| vector_doc(i as i64, v))
        .collect::<Vec<_>>()
        .chunks(per)
        .map(<[Document]>::to_vec)
        .collect();
    let ((), ms) = once(|| {
        for b in batches {
            coll.insert_many(b)?;
        }
        Ok(())
    })?;
    Ok((coll, ms))
}

/// Queries per second of `f` (which runs `per_call` queries), over at least
/// `min_time` and 3 calls.
fn qps(min_time: Duration, per_call: usize, mut f: impl FnMut(usize) -> Res<()>) -> Res<f64> {
    f(0)?;
    let start = Instant::now();
    let mut calls = 0;
    while calls < 3 || start.elapsed() < min_time {
        f(calls)?;
        calls += 1;
    }
    Ok((calls * per_call) as f64 / start.elapsed().as_secs_f64())
}

/// Inserts and searches one size; returns the insert row and four search rows.
pub fn run_size(
    n: usize,
    dim: usize,
    bw: &Bandwidth,
    min_time: Duration,
    log: &dyn Fn(&str),
) -> Res<(InsertRow, Vec<SearchRow>)> {
    log(&format!("vectors: {n} × {dim}"));
    let data = random_vectors(n, dim, 7 + dim as u64);
    let (coll, ms) = load(dim, &data)?;
    drop(data);
    let insert = InsertRow {
        n,
        dim,
        ms,
        vectors_per_s: n as f64 / (ms / 1e3),
    };
    let queries = random_vectors(BATCH, dim, 11);
    let bytes = (n * dim * 4) as f64;
    let mut rows = Vec::new();
    for threads in [1usize, 2] {
        let roof = if threads == 1 {
            bw.one_thread_gib_s
        } else {
            bw.two_threads_gib_s
        };
        let single = qps(min_time, 1, |i| {
            let q = &queries[(i % BATCH) * dim..][..dim];
            let hits = coll.search(FIELD, q).k(K).threads(threads).run()?;
            if hits.len() != K.min(n) {
                return Err(format!("search returned {} hits", hits.len()).into());
            }
            black_box(hits);
            Ok(())
        })?;
        let batch = qps(min_time, BATCH, |_| {
            let hits = coll.search_batch(FIELD, &queries, K, threads, None)?;
            if hits.len() != BATCH {
                return Err(format!("batch returned {} lists", hits.len()).into());
            }
            black_box(hits);
            Ok(())
        })?;
        for (mode, q) in [("single", single), ("batch64", batch)] {
            let gib_s = bytes * q / (1u64 << 30) as f64;
            rows.push(SearchRow {
                n,
                dim,
                mode: mode.to_owned(),
                threads,
                ms_per_query: 1e3 / q,
                qps: q,
                gib_s,
                of_bandwidth: gib_s / roof,
            });
        }
    }
    Ok((insert, rows))
}

/// SIFT-small recall@10.
#[derive(Debug, Clone, Serialize)]
pub struct Recall {
    pub base: usize,
    pub queries: usize,
    pub dim: usize,
    /// Mean over the queries of |hits ∩ true top 10| / 10.
    pub recall_at_10: f64,
    pub qps_one_thread: f64,
}

/// The SIFT-small files shipped beside the repository.
pub fn siftsmall_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/siftsmall")
}

fn read_vecs(path: &Path, float: bool) -> Res<(usize, Vec<f32>, Vec<i32>)> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut dim = 0;
    let (mut floats, mut ints) = (Vec::new(), Vec::new());
    let mut at = 0;
    while at + 4 <= bytes.len() {
        let d = i32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]) as usize;
        at += 4;
        if d == 0 || at + 4 * d > bytes.len() || (dim != 0 && d != dim) {
            return Err(format!("{}: malformed vector at byte {at}", path.display()).into());
        }
        dim = d;
        for c in bytes[at..at + 4 * d].chunks_exact(4) {
            let b = [c[0], c[1], c[2], c[3]];
            if float {
                floats.push(f32::from_le_bytes(b));
            } else {
                ints.push(i32::from_le_bytes(b));
            }
        }
        at += 4 * d;
    }
    Ok((dim, floats, ints))
}

/// Loads SIFT-small and measures recall@10; `None` when the files are absent.
pub fn recall(dir: &Path, log: &dyn Fn(&str)) -> Res<Option<Recall>> {
    let base_path = dir.join("siftsmall_base.fvecs");
    if !base_path.exists() {
        return Ok(None);
    }
    log("vectors: SIFT-small recall@10");
    let (dim, base, _) = read_vecs(&base_path, true)?;
    let (qdim, queries, _) = read_vecs(&dir.join("siftsmall_query.fvecs"), true)?;
    let (gk, _, truth) = read_vecs(&dir.join("siftsmall_groundtruth.ivecs"), false)?;
    if qdim != dim || gk < K {
        return Err("siftsmall: query dimension or ground-truth depth does not fit".into());
    }
    let (coll, _) = load(dim, &base)?;
    let nq = queries.len() / dim;
    let mut found = 0usize;
    let start = Instant::now();
    for (i, q) in queries.chunks(dim).enumerate() {
        let hits = coll.search(FIELD, q).k(K).threads(1).run()?;
        let want = &truth[i * gk..i * gk + K];
        found += hits
            .iter()
            .filter(|h| matches!(h.id, Bson::Int64(id) if want.contains(&(id as i32))))
            .count();
    }
    let secs = start.elapsed().as_secs_f64();
    Ok(Some(Recall {
        base: base.len() / dim,
        queries: nq,
        dim,
        recall_at_10: found as f64 / (nq * K) as f64,
        qps_one_thread: nq as f64 / secs,
    }))
}
