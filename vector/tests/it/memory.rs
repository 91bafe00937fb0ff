//! Memory overhead of the cache.

use slate_vector::{Metric, VectorCache};

use crate::common::Rng;

#[test]
fn memory_is_within_ten_percent_of_raw_vectors() {
    const ROWS: usize = 10_000;
    const DIM: usize = 384;
    let cache = VectorCache::new(DIM, Metric::Cosine).unwrap();
    let mut rng = Rng::new(5);
    let items: Vec<(Vec<u8>, Vec<f32>)> = (0..ROWS)
        .map(|i| {
            let id = format!("doc{i:07}").into_bytes(); // 10 bytes
            (id, (0..DIM).map(|_| rng.unit()).collect())
        })
        .collect();
    cache.load(items, 1).unwrap();
    let raw = cache.raw_vector_bytes();
    let total = cache.memory_bytes();
    assert_eq!(raw, ROWS * DIM * 4);
    eprintln!("memory_bytes / raw = {:.4}", total as f64 / raw as f64);
    assert!(total >= raw, "memory_bytes {total} below the payload {raw}");
    assert!(
        total as f64 <= 1.10 * raw as f64,
        "memory_bytes {total} > 1.10 × raw {raw} (ratio {:.4})",
        total as f64 / raw as f64
    );
}

#[test]
fn updates_grow_memory_until_compaction() {
    let cache = VectorCache::new(16, Metric::L2).unwrap();
    cache
        .load((0..2_000u32).map(|i| (i.to_be_bytes(), [i as f32; 16])), 1)
        .unwrap();
    let before = cache.memory_bytes();
    let mut w = cache.writer();
    for i in 0..1_000u32 {
        w.upsert(&i.to_be_bytes(), &[0.5; 16]).unwrap();
    }
    w.commit(2).unwrap();
    assert!((cache.retired_fraction() - 1_000.0 / 3_000.0).abs() < 1e-9);
    assert!(cache.memory_bytes() > before);
    cache.compact(2).unwrap();
    assert_eq!(cache.retired_fraction(), 0.0);
    assert!(cache.memory_bytes() <= before);
    assert_eq!(cache.view(2).unwrap().len(), 2_000);
}
