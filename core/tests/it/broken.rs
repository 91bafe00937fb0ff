//! Deliberately broken toy backends: the conformance suite must catch them.

use std::borrow::Cow;
use std::sync::Arc;

use slate_core::store::WriteGuard;
use slate_core::{Batch, Direction, EntryIter, KeyRange, MemoryStore, Result, Snapshot, Store};

use crate::conformance;

/// Its "snapshots" read the live state on every call: no isolation.
#[derive(Debug, Default)]
struct LiveReads(MemoryStore);

struct LiveSnapshot<'a>(&'a MemoryStore);

impl Snapshot for LiveSnapshot<'_> {
    fn version(&self) -> u64 {
        self.0.snapshot().version()
    }
    fn get(&self, cf: &str, key: &[u8]) -> Result<Option<Cow<'_, [u8]>>> {
        Ok(self
            .0
            .snapshot()
            .get(cf, key)?
            .map(|v| Cow::Owned(v.into_owned())))
    }
    fn range(&self, cf: &str, range: &KeyRange, dir: Direction) -> Result<EntryIter<'_>> {
        let snap = self.0.snapshot();
        let items: Vec<_> = snap
            .range(cf, range, dir)?
            .map(|e| e.map(|(k, v)| (Cow::Owned(k.into_owned()), Cow::Owned(v.into_owned()))))
            .collect();
        Ok(Box::new(items.into_iter()))
    }
    fn has_cf(&self, cf: &str) -> bool {
        self.0.snapshot().has_cf(cf)
    }
}

impl Store for LiveReads {
    fn snapshot(&self) -> Arc<dyn Snapshot + '_> {
        Arc::new(LiveSnapshot(&self.0))
    }
    fn create_cf(&self, name: &str) -> Result<()> {
        self.0.create_cf(name)
    }
    fn drop_cf(&self, name: &str) -> Result<()> {
        self.0.drop_cf(name)
    }
    fn list_cfs(&self) -> Vec<String> {
        self.0.list_cfs()
    }
    fn write_lock(&self) -> slate_core::Result<WriteGuard<'_>> {
        self.0.write_lock()
    }
    fn apply(&self, batch: Batch, before_publish: &mut dyn FnMut(u64)) -> Result<u64> {
        self.0.apply(batch, before_publish)
    }
}

/// Publishes a commit one operation at a time: readers can see half of it.
#[derive(Debug, Default)]
struct TornCommits(MemoryStore);

impl Store for TornCommits {
    fn snapshot(&self) -> Arc<dyn Snapshot + '_> {
        self.0.snapshot()
    }
    fn create_cf(&self, name: &str) -> Result<()> {
        self.0.create_cf(name)
    }
    fn drop_cf(&self, name: &str) -> Result<()> {
        self.0.drop_cf(name)
    }
    fn list_cfs(&self) -> Vec<String> {
        self.0.list_cfs()
    }
    fn write_lock(&self) -> slate_core::Result<WriteGuard<'_>> {
        self.0.write_lock()
    }
    fn apply(&self, batch: Batch, before_publish: &mut dyn FnMut(u64)) -> Result<u64> {
        let mut version = 0;
        for (cf, ops) in batch.ops {
            for op in ops {
                version = self.0.apply(
                    Batch {
                        ops: vec![(cf.clone(), vec![op])],
                    },
                    before_publish,
                )?;
                std::thread::yield_now();
            }
        }
        Ok(version)
    }
}

#[test]
fn suite_catches_a_backend_without_snapshot_isolation() {
    let store = LiveReads::default();
    let result = conformance::snapshot_isolation(&store);
    let message = result.expect_err("the suite passed a backend whose snapshots read live data");
    assert!(
        message.contains("old snapshot") || message.contains("version moved"),
        "unexpected failure: {message}"
    );
}

#[test]
fn suite_catches_a_backend_with_torn_commits() {
    let store = TornCommits::default();
    let result = conformance::concurrent_stress(&store, 300);
    let message = result.expect_err("the suite passed a backend that publishes half-commits");
    assert!(
        message.contains("torn") || message.contains("half-committed"),
        "unexpected failure: {message}"
    );
}

#[test]
fn healthy_wrappers_pass_the_same_checks() {
    // The checks above fail because of the breakage, not because the wrapper
    // plumbing is wrong: the same check passes on the unbroken store.
    conformance::snapshot_isolation(&MemoryStore::new()).expect("memory store passes");
    conformance::concurrent_stress(&MemoryStore::new(), 100).expect("memory store passes");
}
