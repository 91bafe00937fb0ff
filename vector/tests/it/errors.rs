//! Bad input is refused with typed errors and nothing is written.

use slate_vector::{CacheConfig, Error, Metric, RowMask, VectorCache, VectorError};

fn cache_with_one_row() -> VectorCache {
    let cache = VectorCache::new(3, Metric::Cosine).unwrap();
    let mut w = cache.writer();
    w.upsert(b"good", &[1.0, 2.0, 3.0]).unwrap();
    w.commit(1).unwrap();
    cache
}

#[test]
fn bad_vectors_are_refused_at_write_time() {
    let cache = cache_with_one_row();
    let mut w = cache.writer();
    let err = w.upsert(b"short", &[1.0, 2.0]).unwrap_err();
    assert!(matches!(
        &err,
        Error::InvalidVector { id, source: VectorError::WrongDimension { expected: 3, got: 2 } }
            if &**id == b"short"
    ));
    assert!(err.to_string().contains("short"), "{err}");
    assert!(matches!(
        w.upsert(b"nan", &[1.0, f32::NAN, 0.0]),
        Err(Error::InvalidVector {
            source: VectorError::NonFinite { index: 1, .. },
            ..
        })
    ));
    assert!(matches!(
        w.upsert(b"inf", &[f32::INFINITY, 0.0, 0.0]),
        Err(Error::InvalidVector {
            source: VectorError::NonFinite { index: 0, .. },
            ..
        })
    ));
    // A refused upsert of an existing id leaves its vector alone.
    assert!(w.upsert(b"good", &[f32::NEG_INFINITY, 0.0, 0.0]).is_err());
    assert!(w.is_empty());
    w.commit(2).unwrap();
    let view = cache.view(2).unwrap();
    assert_eq!(view.row_count(), 1);
    let row = view.row_of(b"good").unwrap();
    assert_eq!(view.vector(row), Some(&[1.0, 2.0, 3.0][..]));
}

#[test]
fn a_bad_vector_fails_the_whole_load() {
    let cache = VectorCache::with_config(CacheConfig::new(2, Metric::L2).chunk_rows(8)).unwrap();
    let items: Vec<(Vec<u8>, Vec<f32>)> = (0..100u32)
        .map(|i| {
            (
                i.to_be_bytes().to_vec(),
                vec![i as f32, if i == 57 { f32::NAN } else { 0.0 }],
            )
        })
        .collect();
    let err = cache.load(items, 1).unwrap_err();
    assert!(matches!(
        &err,
        Error::InvalidVector { id, source: VectorError::NonFinite { index: 1, .. } }
            if **id == 57u32.to_be_bytes()
    ));
    assert_eq!(cache.last_committed_version(), None);
    assert!(cache.view(u64::MAX).unwrap().is_empty());
    assert_eq!(cache.view(u64::MAX).unwrap().row_count(), 0);
}

#[test]
fn bad_queries_are_refused() {
    let cache = cache_with_one_row();
    let view = cache.view(1).unwrap();
    let q = [1.0, 1.0, 1.0];
    let mask = RowMask::new(1);
    assert!(matches!(view.search(&q, 0, 1), Err(Error::ZeroK)));
    assert!(matches!(
        view.search_lazy(&q, 0, 1, &|_, _| true),
        Err(Error::ZeroK)
    ));
    assert!(matches!(view.search_mask(&q, 0, 1, &mask), Err(Error::ZeroK)));
    assert!(matches!(view.search_rows(&q, 0, &[]), Err(Error::ZeroK)));
    assert!(matches!(view.search_batch(&q, 0, 1), Err(Error::ZeroK)));
    assert!(matches!(
        view.search(&[1.0, 1.0], 1, 1),
        Err(Error::InvalidQuery {
            index: 0,
            source: VectorError::WrongDimension { expected: 3, got: 2 }
        })
    ));
    assert!(matches!(
        view.search(&[1.0, f32::NAN, 1.0], 1, 1),
        Err(Error::InvalidQuery {
            source: VectorError::NonFinite { index: 1, .. },
            ..
        })
    ));
    assert!(matches!(
        view.search_rows(&[f32::INFINITY, 0.0, 0.0], 1, &[]),
        Err(Error::InvalidQuery { .. })
    ));
    assert!(matches!(
        view.search_mask(&[0.0, 0.0, f32::NEG_INFINITY], 1, 1, &mask),
        Err(Error::InvalidQuery { .. })
    ));
    assert!(matches!(
        view.search_batch(&[1.0; 5], 1, 1),
        Err(Error::BatchShape { len: 5, dim: 3 })
    ));
    assert!(matches!(
        view.search_batch(&[1.0, 1.0, 1.0, 0.0, f32::NAN, 0.0], 1, 1),
        Err(Error::InvalidQuery { index: 1, .. })
    ));
    assert_eq!(view.search_batch(&[], 3, 1).unwrap(), Vec::<Vec<_>>::new());
    // k larger than the data is fine, with row codes too (whose bounds
    // keep the k smallest: never sized by k).
    assert_eq!(view.search(&q, usize::MAX, 2).unwrap().len(), 1);
    let coded = VectorCache::with_config(CacheConfig::new(3, Metric::L2).codes(true)).unwrap();
    let mut w = coded.writer();
    w.upsert(b"a", &[1.0, 0.0, 0.0]).unwrap();
    w.commit(1).unwrap();
    let view = coded.view(1).unwrap();
    let mut all = RowMask::new(view.row_count());
    all.set(slate_vector::RowId(0));
    assert_eq!(view.search(&q, usize::MAX, 2).unwrap().len(), 1);
    assert_eq!(view.search_mask(&q, usize::MAX, 1, &all).unwrap().len(), 1);
}

#[test]
fn unknown_metric_names_the_input() {
    let err = "euclid".parse::<Metric>().unwrap_err();
    assert!(matches!(&err, Error::UnknownMetric { name } if name == "euclid"));
    assert!(err.to_string().contains("euclid"));
}
