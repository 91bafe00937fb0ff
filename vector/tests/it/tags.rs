//! Row tags against a model: after random tagged upserts, deletes, rolled
//! back transactions and compactions, `tagged_rows` at every kept version
//! returns exactly the rows whose document carried a tag in the range then.

use std::collections::BTreeMap;
use std::ops::Bound;

use slate_vector::{CacheConfig, Metric, RowTags, VectorCache};

use crate::common::Rng;

/// id → tag values of the id's live row at one version.
type TagModel = BTreeMap<Vec<u8>, Vec<u8>>;

fn tags(values: &[u8]) -> RowTags {
    RowTags {
        fields: vec!["f".to_owned()],
        tags: values.iter().map(|&v| vec![b'f', v]).collect(),
    }
}

fn ids_in(view: &slate_vector::CacheView, lo: u8, hi: u8) -> Option<Vec<Vec<u8>>> {
    let (lo, hi) = ([b'f', lo], [b'f', hi]);
    let rows = view.tagged_rows("f", &[(Bound::Included(&lo[..]), Bound::Excluded(&hi[..]))])?;
    assert!(
        rows.windows(2).all(|w| w[0] < w[1]),
        "rows ascending and distinct: {rows:?}"
    );
    let mut ids: Vec<Vec<u8>> = rows
        .iter()
        .map(|&r| view.id(r).expect("visible").to_vec())
        .collect();
    ids.sort();
    Some(ids)
}

#[test]
fn tagged_rows_follow_writes_versions_and_compaction() {
    let cache = VectorCache::with_config(CacheConfig::new(2, Metric::L2).chunk_rows(16)).unwrap();
    let mut rng = Rng::new(41);
    let mut model = TagModel::new();
    let mut history: Vec<(u64, TagModel)> = Vec::new();
    for version in 1..=120u64 {
        let before = model.clone();
        let mut w = cache.writer();
        for _ in 0..1 + rng.below(6) {
            let id = format!("d{}", rng.below(40)).into_bytes();
            if rng.below(5) == 0 {
                w.delete(&id);
                model.remove(&id);
            } else {
                // One to three tag values (an array field), from 0..8.
                let values: Vec<u8> = (0..1 + rng.below(3)).map(|_| rng.below(8) as u8).collect();
                w.upsert_tagged(&id, &[rng.unit(), rng.unit()], tags(&values))
                    .unwrap();
                model.insert(id, values);
            }
        }
        if rng.below(8) == 0 {
            drop(w);
            model = before;
            w = cache.writer();
        }
        w.commit(version).unwrap();
        history.push((version, model.clone()));
        if version % 25 == 0 {
            cache.compact(version - 10).unwrap();
            history.retain(|&(v, _)| v >= cache.oldest_version());
        }
        for (v, m) in &history {
            let view = cache.view(*v).unwrap();
            for (lo, hi) in [(0, 8), (3, 4), (2, 6), (7, 8), (5, 5)] {
                let want: Vec<Vec<u8>> = m
                    .iter()
                    .filter(|(_, vals)| vals.iter().any(|&x| x >= lo && x < hi))
                    .map(|(id, _)| id.clone())
                    .collect();
                assert_eq!(
                    ids_in(&view, lo, hi),
                    Some(want),
                    "version {v}, tags [{lo}, {hi})"
                );
            }
        }
    }
}

#[test]
fn an_untagged_row_or_field_leaves_the_tags_unanswered() {
    let cache = VectorCache::new(2, Metric::L2).unwrap();
    let mut w = cache.writer();
    w.upsert_tagged(b"a", &[0.0, 0.0], tags(&[1])).unwrap();
    w.commit(1).unwrap();
    let view = cache.view(1).unwrap();
    assert_eq!(ids_in(&view, 0, 8), Some(vec![b"a".to_vec()]));
    assert!(
        view.tagged_rows("g", &[(Bound::Unbounded, Bound::Unbounded)])
            .is_none(),
        "field g was never tagged"
    );
    let mut w = cache.writer();
    w.upsert(b"b", &[1.0, 1.0]).unwrap();
    w.commit(2).unwrap();
    assert_eq!(ids_in(&cache.view(2).unwrap(), 0, 8), None, "b has no tags");
    // Loaded rows carry no tags either.
    let loaded = VectorCache::new(2, Metric::L2).unwrap();
    loaded.load([(b"x".to_vec(), vec![0.0f32, 1.0])], 1).unwrap();
    assert_eq!(ids_in(&loaded.view(1).unwrap(), 0, 8), None);
}

#[test]
fn a_row_under_two_tags_is_listed_once_among_few_or_many() {
    // 1,000 rows tagged 0 plus one tagged 1 and 2: a range over 1..3 finds
    // two entries of one row among many rows (the sorted path), a range over
    // 0..3 most of the rows (the bitset path).
    let cache = VectorCache::new(2, Metric::L2).unwrap();
    let mut w = cache.writer();
    for i in 0..1_000u32 {
        w.upsert_tagged(&i.to_be_bytes(), &[0.0, 1.0], tags(&[0]))
            .unwrap();
    }
    w.upsert_tagged(b"both", &[1.0, 0.0], tags(&[1, 2])).unwrap();
    w.commit(1).unwrap();
    let view = cache.view(1).unwrap();
    assert_eq!(ids_in(&view, 1, 3), Some(vec![b"both".to_vec()]));
    assert_eq!(ids_in(&view, 0, 3).map(|ids| ids.len()), Some(1_001));
}
