//! One writer commits continuously while readers take views and search:
//! each view's results equal brute force over exactly the rows committed at
//! its version.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use slate_vector::{CacheConfig, Error, Metric, VectorCache};

use crate::common::{assert_top_k, filter, reference, Model, Rng};

const DIM: usize = 8;
const COMMITS: u64 = 400;

#[test]
fn readers_see_exactly_their_version_while_a_writer_commits() {
    let cache = VectorCache::with_config(CacheConfig::new(DIM, Metric::L2).chunk_rows(64)).unwrap();
    let models: RwLock<BTreeMap<u64, Arc<Model>>> = RwLock::new(BTreeMap::from([(0, Arc::default())]));
    let latest = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let checked = AtomicUsize::new(0);

    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut rng = Rng::new(11);
            let mut model = Model::new();
            for version in 1..=COMMITS {
                let before = model.clone();
                let mut w = cache.writer();
                for _ in 0..1 + rng.below(8) {
                    let id = format!("doc{}", rng.below(300)).into_bytes();
                    if rng.below(4) == 0 {
                        assert_eq!(w.delete(&id), model.remove(&id).is_some());
                    } else {
                        let v = rng.int_vector(DIM);
                        w.upsert(&id, &v).unwrap();
                        model.insert(id, v);
                    }
                }
                if rng.below(10) == 0 {
                    // Roll this transaction back and commit an empty one.
                    drop(w);
                    model = before;
                    w = cache.writer();
                }
                w.commit(version).unwrap();
                models.write().unwrap().insert(version, Arc::new(model.clone()));
                latest.store(version, Ordering::Release);
                if version % 100 == 0 {
                    cache.compact(version - 5).unwrap();
                }
                // Keep the readers in step (one check per 20 commits), so
                // that a busy machine cannot let the writer finish alone.
                // (A deadline, so that a panicked reader fails the test
                // instead of hanging it.)
                let deadline = Instant::now() + Duration::from_secs(30);
                while checked.load(Ordering::Relaxed) < (version / 20) as usize && Instant::now() < deadline {
                    std::thread::yield_now();
                }
            }
            done.store(true, Ordering::Release);
        });
        for reader in 0..2u64 {
            let (cache, models, latest, done, checked) = (&cache, &models, &latest, &done, &checked);
            scope.spawn(move || {
                let mut rng = Rng::new(100 + reader);
                while !done.load(Ordering::Acquire) {
                    let newest = latest.load(Ordering::Acquire);
                    let version = newest.saturating_sub(rng.below(4));
                    let view = match cache.view(version) {
                        Ok(view) => view,
                        Err(Error::VersionCompacted { oldest, .. }) => {
                            assert!(version < oldest);
                            continue;
                        }
                        Err(e) => panic!("{e}"),
                    };
                    let model = Arc::clone(&models.read().unwrap()[&version]);
                    let query = rng.int_vector(DIM);
                    let threads = 1 + (rng.below(2) as usize);
                    let hits = view.search(&query, 5, threads).unwrap();
                    assert_top_k(&hits, &reference(Metric::L2, &model, &query, |_| true), 5, true);
                    let (hits, _) = view.search_lazy(&query, 5, threads, &|_, id| filter(id)).unwrap();
                    assert_top_k(&hits, &reference(Metric::L2, &model, &query, filter), 5, true);
                    assert_eq!(view.len(), model.len());
                    checked.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    assert!(
        checked.load(Ordering::Relaxed) >= 20,
        "readers checked too few views"
    );
}
