//! Gather's pruning by row codes: it skips most rows' vectors and never
//! changes a hit, whatever the metric, the scale of the vectors or their
//! ties.

use slate_vector::{CacheConfig, Metric, RowId, VectorCache};

use crate::common::Rng;

/// `n` rows of `dim`: random vectors at scales from 1e-3 to 1e3, with exact
/// duplicates (ties in distance), a tight cluster, zero vectors and one-hot
/// vectors mixed in.
fn awkward_rows(rng: &mut Rng, n: usize, dim: usize) -> Vec<Vec<f32>> {
    let mut rows: Vec<Vec<f32>> = Vec::with_capacity(n);
    for i in 0..n {
        let v = match i % 10 {
            // A copy of an earlier row: the same distance, told apart by id.
            7 if i > 10 => rows[i - 7].clone(),
            // A tight cluster around one vector: distances from a query
            // near it differ by less than the codes' error, so a bound off
            // by that error would drop a true hit.
            6 if i > 10 => rows[4].iter().map(|&x| x + rng.unit() * 1e-3).collect(),
            8 => vec![0.0; dim],
            9 => {
                let mut v = vec![0.0; dim];
                v[i % dim] = 1.0;
                v
            }
            _ => {
                let scale = [1e-3f32, 1.0, 1e3][i % 3];
                (0..dim).map(|_| rng.unit() * scale).collect()
            }
        };
        rows.push(v);
    }
    rows
}

/// A cache with codes holding `n` random rows of `dim` in [-1, 1), ids
/// `0..n` big-endian, committed at version 1.
fn random_coded(rng: &mut Rng, metric: Metric, n: u32, dim: usize) -> VectorCache {
    let cache = VectorCache::with_config(CacheConfig::new(dim, metric).codes(true)).unwrap();
    let mut w = cache.writer();
    for i in 0..n {
        let v: Vec<f32> = (0..dim).map(|_| rng.unit()).collect();
        w.upsert(&i.to_be_bytes(), &v).unwrap();
    }
    w.commit(1).unwrap();
    cache
}

#[test]
fn gather_with_codes_returns_the_full_scan_for_every_metric() {
    let mut rng = Rng::new(41);
    let (n, dim) = (2_000, 48);
    let rows = awkward_rows(&mut rng, n, dim);
    for metric in Metric::ALL {
        let cache = VectorCache::with_config(CacheConfig::new(dim, metric).codes(true)).unwrap();
        let mut w = cache.writer();
        for (i, v) in rows.iter().enumerate() {
            let id = (i as u32).to_be_bytes().to_vec();
            w.upsert(&id, v).unwrap();
        }
        w.commit(1).unwrap();
        let view = cache.view(1).unwrap();
        let every: Vec<RowId> = (0..view.row_count() as u32).map(RowId).collect();
        for q in 0..12 {
            // Queries like the rows, and some exactly equal to a row.
            let query = match q % 4 {
                3 => rows[q * 37].clone(),
                2 => rows[4].iter().map(|&x| x + rng.unit() * 1e-2).collect(),
                _ => awkward_rows(&mut rng, 1, dim).remove(0),
            };
            if metric == Metric::Cosine && query.iter().all(|&x| x == 0.0) {
                continue;
            }
            for k in [1, 10, 100] {
                let full = view.search(&query, k, 1).unwrap();
                let (gathered, stats) = view.search_rows_counted(&query, k, &every).unwrap();
                assert_eq!(gathered, full, "{metric} query {q} k {k}");
                assert_eq!(gathered.len(), k);
                assert_eq!(stats.rows_scanned, n as u64);
            }
        }
    }
}

#[test]
fn codes_spare_most_vectors_of_a_selective_gather() {
    // 1,000 random candidates of 384-d, k = 10 (the sweep's 1% point): the
    // codes' bounds rule out all but a few dozen rows before their vectors
    // are read.
    let mut rng = Rng::new(7);
    let dim = 384;
    for metric in Metric::ALL {
        let cache = random_coded(&mut rng, metric, 1_000, dim);
        let view = cache.view(1).unwrap();
        let every: Vec<RowId> = (0..1_000).map(RowId).collect();
        let query: Vec<f32> = (0..dim).map(|_| rng.unit()).collect();
        let (hits, stats) = view.search_rows_counted(&query, 10, &every).unwrap();
        assert_eq!(hits, view.search(&query, 10, 1).unwrap());
        assert!(stats.rows_pruned >= 800, "{metric}: {stats:?}");
    }
}

#[test]
fn pruning_sees_exactly_its_snapshot() {
    // 3,000 rows, then a commit that moves a third of them and deletes
    // another third: a view at either version, gathering over every row
    // the arena holds (visible or not), returns its own full scan.
    let mut rng = Rng::new(11);
    let dim = 32;
    let cache = random_coded(&mut rng, Metric::L2, 3_000, dim);
    let mut w = cache.writer();
    for i in 0u32..3_000 {
        match i % 3 {
            0 => w
                .upsert(
                    &i.to_be_bytes(),
                    &(0..dim).map(|_| rng.unit() * 0.5).collect::<Vec<f32>>(),
                )
                .unwrap(),
            1 => assert!(w.delete(&i.to_be_bytes())),
            _ => {}
        }
    }
    w.commit(2).unwrap();
    for version in [1, 2] {
        let view = cache.view(version).unwrap();
        let every: Vec<RowId> = (0..view.row_count() as u32).map(RowId).collect();
        for _ in 0..5 {
            let query: Vec<f32> = (0..dim).map(|_| rng.unit()).collect();
            for k in [1, 10, 200] {
                let (hits, stats) = view.search_rows_counted(&query, k, &every).unwrap();
                assert_eq!(
                    hits,
                    view.search(&query, k, 1).unwrap(),
                    "version {version} k {k}"
                );
                assert_eq!(stats.rows_scanned, view.len() as u64);
                assert!(stats.rows_pruned > 0, "version {version} k {k}: {stats:?}");
            }
        }
    }
}

#[test]
fn a_filtered_gather_skips_rows_its_full_heap_rules_out() {
    // A gather whose rows still need a filter check: once its heap holds k
    // matches, the codes rule rows out before their vectors are read or
    // their filter checked; the hits are the filtered scan's.
    let mut rng = Rng::new(13);
    let dim = 64;
    for metric in Metric::ALL {
        let cache = random_coded(&mut rng, metric, 2_000, dim);
        let view = cache.view(1).unwrap();
        let every: Vec<RowId> = (0..2_000).map(RowId).collect();
        let keep = |_: RowId, id: &[u8]| !id[3].is_multiple_of(3);
        for _ in 0..5 {
            let query: Vec<f32> = (0..dim).map(|_| rng.unit()).collect();
            for k in [1, 10, 100] {
                let (hits, stats) = view.search_rows_lazy(&query, k, &every, &keep).unwrap();
                let (want, _) = view.search_lazy(&query, k, 1, &keep).unwrap();
                assert_eq!(hits, want, "{metric} k {k}");
                assert_eq!(stats.rows_scanned, 2_000);
                assert!(stats.rows_pruned > 0, "{metric} k {k}: {stats:?}");
                assert!(stats.predicate_calls + stats.rows_pruned <= 2_000);
            }
        }
    }
}

/// `rows` in a cache with or without codes, ids `0..n` big-endian,
/// committed at version 1; then every third row deleted and every third
/// moved, at version 2.
fn both_caches(rows: &[Vec<f32>], metric: Metric) -> [VectorCache; 2] {
    let dim = rows[0].len();
    [true, false].map(|codes| {
        let cache = VectorCache::with_config(CacheConfig::new(dim, metric).codes(codes)).unwrap();
        let mut w = cache.writer();
        for (i, v) in rows.iter().enumerate() {
            w.upsert(&(i as u32).to_be_bytes(), v).unwrap();
        }
        w.commit(1).unwrap();
        let mut w = cache.writer();
        for (i, v) in rows.iter().enumerate() {
            match i % 3 {
                0 => assert!(w.delete(&(i as u32).to_be_bytes())),
                1 => w
                    .upsert(
                        &(i as u32).to_be_bytes(),
                        &v.iter().map(|x| x * 0.5).collect::<Vec<f32>>(),
                    )
                    .unwrap(),
                _ => {}
            }
        }
        w.commit(2).unwrap();
        cache
    })
}

#[test]
fn a_coded_scan_returns_the_uncoded_scan() {
    // Unfiltered and masked scans bound rows by their codes first: the hits
    // (distances, ids, order of ties) are those of the same rows without
    // codes, for every metric, at both versions, on one thread or two.
    let mut rng = Rng::new(23);
    let (n, dim) = (3_000, 40);
    let rows = awkward_rows(&mut rng, n, dim);
    for metric in Metric::ALL {
        // One commit only: every row visible, no version checks.
        let once = [true, false].map(|codes| {
            let cache = VectorCache::with_config(CacheConfig::new(dim, metric).codes(codes)).unwrap();
            let mut w = cache.writer();
            for (i, v) in rows.iter().enumerate() {
                w.upsert(&(i as u32).to_be_bytes(), v).unwrap();
            }
            w.commit(1).unwrap();
            cache
        });
        let (cv, pv) = (once[0].view(1).unwrap(), once[1].view(1).unwrap());
        let query = awkward_rows(&mut rng, 1, dim).remove(0);
        if !(metric == Metric::Cosine && query.iter().all(|&x| x == 0.0)) {
            for k in [1, 10, 100] {
                assert_eq!(
                    cv.search(&query, k, 1).unwrap(),
                    pv.search(&query, k, 1).unwrap(),
                    "{metric} k{k} all visible"
                );
            }
        }
        let [coded, plain] = both_caches(&rows, metric);
        for version in [1, 2] {
            let (cv, pv) = (coded.view(version).unwrap(), plain.view(version).unwrap());
            let mut mask = slate_vector::RowMask::new(cv.row_count());
            for r in (0..cv.row_count()).filter(|r| r % 5 != 2) {
                mask.set(RowId(r as u32));
            }
            let mut plain_mask = slate_vector::RowMask::new(pv.row_count());
            for r in (0..pv.row_count()).filter(|r| r % 5 != 2) {
                plain_mask.set(RowId(r as u32));
            }
            for q in 0..6 {
                let query = match q % 3 {
                    2 => rows[q * 41].clone(),
                    _ => awkward_rows(&mut rng, 1, dim).remove(0),
                };
                if metric == Metric::Cosine && query.iter().all(|&x| x == 0.0) {
                    continue;
                }
                for k in [1, 10, 100] {
                    for threads in [1, 2] {
                        let want = pv.search(&query, k, threads).unwrap();
                        assert_eq!(want.len(), k);
                        let got = cv.search(&query, k, threads).unwrap();
                        assert_eq!(got, want, "{metric} v{version} q{q} k{k} t{threads}");
                        let want = pv.search_mask(&query, k, threads, &plain_mask).unwrap();
                        let (got, stats) = cv.search_mask_counted(&query, k, threads, &mask).unwrap();
                        assert_eq!(got, want, "{metric} v{version} q{q} k{k} t{threads} masked");
                        if k == 10 {
                            assert!(stats.rows_pruned > 0, "{metric} v{version} q{q}: {stats:?}");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn a_filtered_scan_prunes_by_codes_and_returns_the_uncoded_scans_hits() {
    // Scans under a lazy filter (alone, or with a mask) bound rows by their
    // codes once their heap holds k matches: on awkward rows (ties, a tight
    // cluster, zero vectors), before and after a third of them are deleted
    // and a third moved, filters from unselective to 1 in 50, on one
    // thread and two, the hits are those of the same rows without codes.
    let mut rng = Rng::new(29);
    let (n, dim) = (3_000, 32);
    let rows = awkward_rows(&mut rng, n, dim);
    for metric in Metric::ALL {
        let [coded, plain] = both_caches(&rows, metric);
        let (mut pruned, mut pruned_masked) = (0, 0);
        for version in [1, 2] {
            let (coded, plain) = (coded.view(version).unwrap(), plain.view(version).unwrap());
            let mut mask = slate_vector::RowMask::new(coded.row_count());
            for r in (0..coded.row_count() as u32).filter(|r| r % 4 != 1) {
                mask.set(RowId(r));
            }
            for q in 0..6 {
                let query = match q % 3 {
                    2 => rows[4].iter().map(|&x| x + rng.unit() * 1e-2).collect(),
                    1 => rows[q * 41].clone(),
                    _ => awkward_rows(&mut rng, 1, dim).remove(0),
                };
                if metric == Metric::Cosine && query.iter().all(|&x| x == 0.0) {
                    continue;
                }
                for every in [1u32, 3, 50] {
                    let keep =
                        move |_: RowId, id: &[u8]| u32::from_be_bytes(id.try_into().unwrap()) % every == 0;
                    for (k, threads) in [(1, 1), (10, 1), (10, 2), (100, 2)] {
                        let at = format!("{metric} v{version} query {q} 1/{every} k {k} threads {threads}");
                        let (want, _) = plain.search_lazy(&query, k, threads, &keep).unwrap();
                        let (got, stats) = coded.search_lazy(&query, k, threads, &keep).unwrap();
                        assert_eq!(got, want, "{at}");
                        assert_eq!(stats.rows_scanned, coded.len() as u64, "{at}");
                        assert!(
                            stats.predicate_calls + stats.rows_pruned <= coded.len() as u64,
                            "{at}"
                        );
                        pruned += stats.rows_pruned;
                        let (want, _) = plain.search_mask_lazy(&query, k, threads, &mask, &keep).unwrap();
                        let (got, stats) = coded.search_mask_lazy(&query, k, threads, &mask, &keep).unwrap();
                        assert_eq!(got, want, "{at}, masked");
                        pruned_masked += stats.rows_pruned;
                    }
                }
            }
        }
        assert!(
            pruned > 0 && pruned_masked > 0,
            "{metric}: {pruned} and {pruned_masked} rows pruned"
        );
    }
}
