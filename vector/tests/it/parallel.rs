//! Parallel scans share a k-th-distance bound between their tasks; rows at
//! that bound must still be considered (they can win on their id), so heavy
//! ties across many tasks are the hard case.

use slate_vector::{CacheConfig, Metric, RowMask, VectorCache};

use crate::common::{assert_top_k, reference, Model};

#[test]
fn tied_distances_across_many_tasks_match_brute_force_on_every_thread_count() {
    // 4,000 rows in chunks of 64 (many parallel tasks), but only three
    // distinct vectors, so nearly every distance is a tie with the bound.
    let dim = 8;
    let cache = VectorCache::with_config(CacheConfig::new(dim, Metric::Dot).chunk_rows(64)).unwrap();
    let mut model = Model::new();
    let mut writer = cache.writer();
    for i in 0u32..4_000 {
        // Ids descend as rows ascend, so the id tie-break favours late rows,
        // which a single-threaded scan meets last.
        let id = (u32::MAX - i).to_be_bytes().to_vec();
        let v: Vec<f32> = (0..dim).map(|c| ((i % 3) as f32) - (c % 2) as f32).collect();
        writer.upsert(&id, &v).unwrap();
        model.insert(id, v);
    }
    writer.commit(1).unwrap();
    let view = cache.view(1).unwrap();
    let keep = |id: &[u8]| !id[3].is_multiple_of(5);
    let mask: RowMask = view.rows().filter(|&r| keep(view.id(r).unwrap())).collect();
    for query in [vec![1.0f32; dim], vec![-1.0f32; dim], vec![0.5; dim]] {
        let all = reference(Metric::Dot, &model, &query, |_| true);
        let filtered = reference(Metric::Dot, &model, &query, keep);
        for k in [1, 10, 700] {
            for threads in [0, 1, 2, 3] {
                let full = view.search(&query, k, threads).unwrap();
                assert_top_k(&full, &all, k, true);
                let (lazy, _) = view.search_lazy(&query, k, threads, &|_, id| keep(id)).unwrap();
                assert_top_k(&lazy, &filtered, k, true);
                assert_eq!(
                    view.search_mask(&query, k, threads, &mask).unwrap(),
                    lazy,
                    "k {k} threads {threads}"
                );
            }
        }
    }
}
