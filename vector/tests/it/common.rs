//! Shared test helpers: a seeded RNG, the brute-force oracle, and the check
//! that runs every search form of a view against it.

use std::collections::{BTreeMap, HashMap};

use ordered_float::OrderedFloat;
use slate_vector::{scalar, CacheView, Hit, Metric, RowId, RowMask};

/// id → vector: the rows visible at one version.
pub type Model = BTreeMap<Vec<u8>, Vec<f32>>;

/// SplitMix64: small, seeded, good enough for test data.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Uniform in [-1, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    /// Small integers in [-4, 4]: distances of these are exact in f32.
    pub fn int_vector(&mut self, dim: usize) -> Vec<f32> {
        (0..dim).map(|_| self.below(9) as f32 - 4.0).collect()
    }
}

/// The filter used by the filtered strategies.
pub fn filter(id: &[u8]) -> bool {
    id.iter().map(|&b| u32::from(b)).sum::<u32>() % 3 != 0
}

/// All rows of `model` passing `keep`, by (distance, id), with reference
/// distances.
pub fn reference(
    metric: Metric,
    model: &Model,
    query: &[f32],
    keep: impl Fn(&[u8]) -> bool,
) -> Vec<(Vec<u8>, f32)> {
    let mut all: Vec<(Vec<u8>, f32)> = model
        .iter()
        .filter(|(id, _)| keep(id))
        .map(|(id, v)| (id.clone(), scalar::distance(metric, query, v)))
        .collect();
    all.sort_by(|a, b| (OrderedFloat(a.1), &a.0).cmp(&(OrderedFloat(b.1), &b.0)));
    all
}

/// `got` must be the top k of `all` (sorted reference). With `exact`, ids and
/// distances must be equal; otherwise distances may differ by a tolerance
/// and near-ties may come in either order.
pub fn assert_top_k(got: &[Hit], all: &[(Vec<u8>, f32)], k: usize, exact: bool) {
    let want = &all[..k.min(all.len())];
    if exact {
        let got: Vec<(Vec<u8>, f32)> = got.iter().map(|h| (h.id.to_vec(), h.distance)).collect();
        assert_eq!(got, want);
        return;
    }
    const TOL: f32 = 1e-5;
    assert_eq!(got.len(), want.len(), "hit count");
    for pair in got.windows(2) {
        assert!(
            (OrderedFloat(pair[0].distance), &pair[0].id) < (OrderedFloat(pair[1].distance), &pair[1].id),
            "hits not strictly ascending: {pair:?}"
        );
    }
    let ref_dist: HashMap<&[u8], f32> = all.iter().map(|(id, d)| (&id[..], *d)).collect();
    for hit in got {
        let d = ref_dist.get(&*hit.id).copied();
        assert!(
            d.is_some_and(|d| (d - hit.distance).abs() <= TOL),
            "hit {hit:?} vs reference {d:?}"
        );
    }
    if let Some(last) = want.last() {
        let bound = last.1;
        for (id, d) in all {
            if *d < bound - 2.0 * TOL {
                assert!(got.iter().any(|h| &*h.id == id), "missing {id:?} at {d}");
            }
        }
        for hit in got {
            assert!(ref_dist[&*hit.id] <= bound + 2.0 * TOL, "{hit:?} beyond the k-th");
        }
    }
}

/// Runs every search form on `view` and checks each against the oracle over
/// `model` (the rows that must be visible), and all forms against each other.
pub fn check_view(view: &CacheView, model: &Model, queries: &[Vec<f32>], k: usize, exact: bool) {
    let metric = view.metric();
    assert_eq!(view.len(), model.len(), "visible rows at {}", view.version());
    let mut visible_ids: Vec<Vec<u8>> = view.rows().map(|r| view.id(r).unwrap().to_vec()).collect();
    visible_ids.sort();
    assert_eq!(visible_ids, model.keys().cloned().collect::<Vec<_>>());
    for (id, v) in model {
        let row = view.row_of(id).unwrap_or_else(|| panic!("row_of({id:?})"));
        assert_eq!(view.id(row), Some(&id[..]));
        assert_eq!(view.vector(row), Some(&v[..]));
    }
    assert_eq!(view.row_of(b"\xffabsent"), None);

    // The mask holds the filter's rows plus some invisible rows, which must
    // be skipped anyway.
    let mut mask: RowMask = model
        .keys()
        .filter(|id| filter(id))
        .map(|id| view.row_of(id).unwrap())
        .collect();
    let invisible: Vec<RowId> = (0..view.row_count() as u32)
        .map(RowId)
        .filter(|&r| !view.is_visible(r))
        .collect();
    for &r in invisible.iter().step_by(2) {
        mask.set(r);
    }
    let mut gather: Vec<RowId> = model
        .keys()
        .filter(|id| filter(id))
        .map(|id| view.row_of(id).unwrap())
        .collect();
    gather.extend(gather.clone().iter().take(3));
    gather.extend(invisible.iter().take(5));
    gather.push(RowId(u32::MAX - 1));

    for query in queries {
        let all = reference(metric, model, query, |_| true);
        let filtered = reference(metric, model, query, filter);
        let full = view.search(query, k, 1).unwrap();
        assert_top_k(&full, &all, k, exact);
        for threads in [0, 2, 3] {
            assert_eq!(view.search(query, k, threads).unwrap(), full, "threads {threads}");
        }
        for threads in [1, 2] {
            let (lazy, stats) = view.search_lazy(query, k, threads, &|_, id| filter(id)).unwrap();
            assert_top_k(&lazy, &filtered, k, exact);
            assert_eq!(stats.rows_scanned, model.len() as u64);
            assert!(stats.predicate_calls <= stats.rows_scanned);
            assert!(stats.heap_pushes <= stats.predicate_calls);
            assert!(stats.heap_pushes >= lazy.len() as u64);
            let (unfiltered, _) = view.search_lazy(query, k, threads, &|_, _| true).unwrap();
            assert_eq!(unfiltered, full);
            assert_eq!(view.search_mask(query, k, threads, &mask).unwrap(), lazy);
        }
        let (lazy, _) = view.search_lazy(query, k, 1, &|_, id| filter(id)).unwrap();
        assert_eq!(view.search_rows(query, k, &gather).unwrap(), lazy);
        // Gather over every row (visible or not), nothing to check: the
        // codes may prune, and the hits are the full scan's.
        let every: Vec<RowId> = (0..view.row_count() as u32).map(RowId).collect();
        let (gathered, stats) = view.search_rows_counted(query, k, &every).unwrap();
        assert_eq!(gathered, full);
        assert_eq!(stats.rows_scanned, model.len() as u64);
        assert!(stats.rows_pruned <= stats.rows_scanned);
        // Gather over every row (visible or not) with the filter checked lazily.
        let every: Vec<RowId> = (0..view.row_count() as u32).map(RowId).collect();
        let (lazy_rows, stats) = view
            .search_rows_lazy(query, k, &every, &|_, id| filter(id))
            .unwrap();
        assert_eq!(lazy_rows, lazy);
        assert_eq!(stats.rows_scanned, model.len() as u64);
        assert!(stats.predicate_calls <= stats.rows_scanned);
    }
    let flat: Vec<f32> = queries.concat();
    for threads in [1, 2] {
        let batch = view.search_batch(&flat, k, threads).unwrap();
        assert_eq!(batch.len(), queries.len());
        for (query, hits) in queries.iter().zip(&batch) {
            assert_eq!(hits, &view.search(query, k, 1).unwrap());
        }
    }
}
