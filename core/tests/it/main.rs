//! slate-core integration tests: one binary, a module per topic.

mod broken;
mod compaction;
mod conformance;
mod documents;
mod model;
mod rocks_store;

use slate_core::{MemoryStore, RocksStore, Store};

/// A fresh store, with the temporary directory it lives in (if any) kept alive.
#[allow(missing_debug_implementations)]
pub struct Fixture {
    pub store: Box<dyn Store>,
    _dir: Option<tempfile::TempDir>,
}

pub fn memory() -> Fixture {
    Fixture {
        store: Box::new(MemoryStore::new()),
        _dir: None,
    }
}

/// A `MemoryStore` whose every batch rebuilds a table's sorted run (when
/// it holds a sixteenth of the table's entries): the merge paths a bulk load
/// takes, reached with small batches.
pub fn memory_rebuilt() -> Fixture {
    Fixture {
        store: Box::new(MemoryStore::with_bulk_rebuild(1)),
        _dir: None,
    }
}

/// A `MemoryStore` that rebuilds from batches of 3 operations: a mix of runs
/// and of writes kept beside them, folded in when they grow.
pub fn memory_mixed() -> Fixture {
    Fixture {
        store: Box::new(MemoryStore::with_bulk_rebuild(3)),
        _dir: None,
    }
}

pub fn rocks() -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = RocksStore::builder(dir.path())
        .sync(false)
        .open()
        .expect("open rocks");
    Fixture {
        store: Box::new(store),
        _dir: Some(dir),
    }
}

/// The conformance suite, instantiated once per backend.
macro_rules! conformance_suite {
    ($backend:ident) => {
        mod $backend {
            use crate::conformance as c;

            fn check(result: c::Check) {
                if let Err(e) = result {
                    panic!("{} backend fails conformance: {e}", stringify!($backend));
                }
            }

            #[test]
            fn basic_ops() {
                check(c::basic_ops(crate::$backend().store.as_ref()));
            }

            #[test]
            fn iteration_order() {
                check(c::iteration_order(crate::$backend().store.as_ref()));
            }

            #[test]
            fn rollback_leaves_nothing() {
                check(c::rollback_leaves_nothing(crate::$backend().store.as_ref()));
            }

            #[test]
            fn snapshot_isolation() {
                check(c::snapshot_isolation(crate::$backend().store.as_ref()));
            }

            #[test]
            fn delete_range() {
                check(c::delete_range(crate::$backend().store.as_ref()));
            }

            #[test]
            fn concurrent_stress_one_writer_four_readers() {
                check(c::concurrent_stress(crate::$backend().store.as_ref(), 300));
            }

            proptest::proptest! {
                #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
                #[test]
                fn random_operations_match_a_btreemap_model(ops in crate::model::ops()) {
                    check(crate::model::run(crate::$backend().store.as_ref(), &ops));
                }
            }
        }
    };
}

conformance_suite!(memory);
conformance_suite!(memory_rebuilt);
conformance_suite!(memory_mixed);
conformance_suite!(rocks);
