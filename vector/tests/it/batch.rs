//! Batched search over many tiles, blocks and chunks, against per-query
//! search and brute force: the blocked pass must not change a single hit.

use slate_vector::{CacheConfig, Metric, VectorCache};

use crate::common::{assert_top_k, reference, Model, Rng};

/// `n` rows of small integers (so l2 and dot distances are exact and ties
/// are frequent), a third of them updated and a tenth deleted afterwards.
fn build(dim: usize, n: usize, metric: Metric, chunk_rows: usize, rng: &mut Rng) -> (VectorCache, Model) {
    let cache = VectorCache::with_config(CacheConfig::new(dim, metric).chunk_rows(chunk_rows)).unwrap();
    let mut model = Model::new();
    let mut w = cache.writer();
    for i in 0..n as u32 {
        let v = rng.int_vector(dim);
        w.upsert(&i.to_be_bytes(), &v).unwrap();
        model.insert(i.to_be_bytes().to_vec(), v);
    }
    w.commit(1).unwrap();
    let mut w = cache.writer();
    for i in (0..n as u32).step_by(3) {
        let v = rng.int_vector(dim);
        w.upsert(&i.to_be_bytes(), &v).unwrap();
        model.insert(i.to_be_bytes().to_vec(), v);
    }
    for i in (1..n as u32).step_by(10) {
        assert!(w.delete(&i.to_be_bytes()));
        model.remove(&i.to_be_bytes()[..]);
    }
    w.commit(2).unwrap();
    (cache, model)
}

fn check(dim: usize, n: usize, metric: Metric, chunk_rows: usize, seed: u64) {
    let mut rng = Rng::new(seed);
    let (cache, model) = build(dim, n, metric, chunk_rows, &mut rng);
    let view = cache.view(2).unwrap();
    let queries: Vec<Vec<f32>> = (0..19).map(|_| rng.int_vector(dim)).collect();
    let flat = queries.concat();
    let exact = metric != Metric::Cosine;
    for k in [1, 10, 100] {
        for threads in [1, 2] {
            let batch = view.search_batch(&flat, k, threads).unwrap();
            assert_eq!(batch.len(), queries.len());
            for (query, hits) in queries.iter().zip(&batch) {
                assert_eq!(
                    hits,
                    &view.search(query, k, 1).unwrap(),
                    "dim {dim} k {k} threads {threads}"
                );
                assert_top_k(hits, &reference(metric, &model, query, |_| true), k, exact);
            }
        }
    }
}

#[test]
fn wide_rows_span_many_tiles_and_chunks() {
    // Dim 700: 8 rows a tile, 93 a block, 250 a chunk.
    for metric in Metric::ALL {
        check(700, 1_300, metric, 250, 5);
    }
}

#[test]
fn narrow_rows_span_many_blocks() {
    // Dim 3: a tile is 2,048 rows, a block is cut by the 1,024-row chunks.
    check(3, 5_000, Metric::L2, 1_024, 6);
    check(5, 3_000, Metric::Dot, 700, 7);
}
