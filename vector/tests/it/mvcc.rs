//! Random operation sequences against a per-version model: every search form
//! of every view (current and old versions, before and after compaction)
//! equals brute force over exactly the rows committed at its version.

use std::collections::BTreeMap;

use proptest::prelude::*;
use slate_vector::{CacheConfig, CacheView, Error, Metric, VectorCache, Writer};

use crate::common::{check_view, Model, Rng};

#[derive(Debug, Clone)]
enum Op {
    Upsert(u8, Vec<i8>),
    Delete(u8),
    Commit(u8),
    Rollback,
    View,
    Compact(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => (0u8..40, prop::collection::vec(-4i8..=4, 17)).prop_map(|(i, v)| Op::Upsert(i, v)),
        4 => (0u8..40).prop_map(Op::Delete),
        4 => (1u8..3).prop_map(Op::Commit),
        1 => Just(Op::Rollback),
        2 => Just(Op::View),
        1 => (0u8..6).prop_map(Op::Compact),
    ]
}

fn id(i: u8) -> Vec<u8> {
    // Decimal strings: "10" sorts before "9", so byte order matters.
    i.to_string().into_bytes()
}

/// The model visible at `version`: the last commit at or below it.
fn model_at(history: &BTreeMap<u64, Model>, version: u64) -> Model {
    history
        .range(..=version)
        .next_back()
        .map(|(_, m)| m.clone())
        .unwrap_or_default()
}

fn run(dim: usize, metric: Metric, chunk_rows: usize, k: usize, ops: &[Op], seed: u64) {
    // Half the runs keep row codes, so that gather prunes under MVCC too.
    let config = CacheConfig::new(dim, metric)
        .chunk_rows(chunk_rows)
        .codes(seed % 2 == 1);
    let cache = VectorCache::with_config(config).unwrap();
    let mut history: BTreeMap<u64, Model> = BTreeMap::new();
    let mut current = Model::new();
    let mut version = 0u64;
    let mut txn: Option<(Writer<'_>, Model)> = None;
    let mut views: Vec<(CacheView, Model)> = Vec::new();
    let mut rng = Rng::new(seed);

    for op in ops {
        match op {
            Op::Upsert(i, v) => {
                let (w, m) = txn.get_or_insert_with(|| (cache.writer(), current.clone()));
                let v: Vec<f32> = v[..dim].iter().map(|&x| f32::from(x)).collect();
                w.upsert(&id(*i), &v).unwrap();
                m.insert(id(*i), v);
            }
            Op::Delete(i) => {
                let (w, m) = txn.get_or_insert_with(|| (cache.writer(), current.clone()));
                assert_eq!(w.delete(&id(*i)), m.remove(&id(*i)).is_some());
            }
            Op::Commit(gap) => {
                if let Some((w, m)) = txn.take() {
                    version += u64::from(*gap);
                    w.commit(version).unwrap();
                    current = m;
                    history.insert(version, current.clone());
                    assert_eq!(cache.raw_vector_bytes(), current.len() * dim * 4);
                }
            }
            Op::Rollback => txn = None,
            Op::View => {
                // Taken while a transaction may be staging: staged rows must
                // stay invisible.
                views.push((cache.view(version).unwrap(), current.clone()));
                let old = rng.below(version + 1);
                if old >= cache.oldest_version() {
                    views.push((cache.view(old).unwrap(), model_at(&history, old)));
                }
            }
            Op::Compact(lag) => {
                if txn.is_none() {
                    let min = version.saturating_sub(u64::from(*lag));
                    let report = cache.compact(min).unwrap();
                    assert!(report.rows_after <= report.rows_before);
                    if min > 0 && min > cache.oldest_version() - 1 {
                        assert!(matches!(cache.view(min - 1), Err(Error::VersionCompacted { .. })));
                    }
                }
            }
        }
    }
    drop(txn);

    let queries: Vec<Vec<f32>> = (0..3).map(|_| rng.int_vector(dim)).collect();
    let exact = metric != Metric::Cosine;
    for (view, model) in &views {
        check_view(view, model, &queries, k, exact);
    }
    for s in cache.oldest_version()..=version + 1 {
        check_view(
            &cache.view(s).unwrap(),
            &model_at(&history, s),
            &queries,
            k,
            exact,
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn every_search_form_matches_brute_force_at_every_version(
        dim in 3usize..=17,
        metric in prop::sample::select(Metric::ALL.to_vec()),
        chunk_rows in prop::sample::select(vec![1usize, 7, 16, 64, 1024]),
        k in prop::sample::select(vec![1usize, 3, 10, 50]),
        ops in prop::collection::vec(op(), 1..300),
        seed in any::<u64>(),
    ) {
        run(dim, metric, chunk_rows, k, &ops, seed);
    }
}

#[test]
fn a_few_hundred_rows_with_many_versions() {
    let mut rng = Rng::new(7);
    let ops: Vec<Op> = (0..1500)
        .map(|_| match rng.below(20) {
            0..=12 => Op::Upsert(
                rng.below(200) as u8,
                (0..17).map(|_| rng.below(9) as i8 - 4).collect(),
            ),
            13..=15 => Op::Delete(rng.below(200) as u8),
            16 | 17 => Op::Commit(1),
            18 => Op::View,
            _ => Op::Rollback,
        })
        .collect();
    for metric in Metric::ALL {
        run(11, metric, 64, 10, &ops, 3);
    }
}
