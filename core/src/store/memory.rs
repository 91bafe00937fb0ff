//! `MemoryStore`: persistent ordered tables published through `arc-swap`.
//!
//! Each column family is a [`Table`]: a sorted run and an `imbl::OrdMap` of
//! the writes since, whose clones share structure, so a small commit copies
//! the O(log n) path to each key it touches (plus, amortised, the folds of
//! the map into the run) and a large one rebuilds the run in one merge. A
//! snapshot is one `Arc` to an immutable state: reads take no lock and lend
//! their bytes straight out of the snapshot.

use std::borrow::{Borrow, Cow};
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use arc_swap::ArcSwap;

use super::table::{Rebuild, Table};
use super::{
    check_cf_name, Batch, Bytes, Direction, EntryIter, KeyRange, Snapshot, Store, WriteGuard, WriterGate,
};
use crate::{Error, Result};

/// Longest key held inline in the tree node (a `Key` is 32 bytes either way).
const INLINE_KEY: usize = 30;

/// A table key: inline when it is short (document keys `d:{id}` of int,
/// ObjectId and short string ids; most index entries), so that the
/// comparisons of a lookup read the tree node alone instead of following one
/// pointer per compared key; shared on the heap otherwise. Orders, compares
/// and borrows as its bytes, so `&[u8]` lookups and ranges work unchanged.
#[derive(Clone)]
pub(super) enum Key {
    Inline { len: u8, bytes: [u8; INLINE_KEY] },
    Shared(Bytes),
}

impl Key {
    pub(super) fn new(key: Vec<u8>) -> Self {
        Self::inline(&key).unwrap_or_else(|| Key::Shared(key.into()))
    }

    /// `key` held inline, if it is short enough: what a lookup compares
    /// against the tree's keys (see [`Key::cmp`]), built without allocating.
    pub(super) fn inline(key: &[u8]) -> Option<Self> {
        let len = u8::try_from(key.len()).ok().filter(|_| key.len() <= INLINE_KEY)?;
        let mut bytes = [0; INLINE_KEY];
        bytes[..key.len()].copy_from_slice(key);
        Some(Key::Inline { len, bytes })
    }
}

/// Orders two inline keys by their zero-padded bytes, read as two
/// overlapping big-endian `u128`s, then by length: the order of the keys'
/// bytes. Where the padded bytes first differ inside both keys, that byte
/// decides either way; where it lies past the end of one key, that key's
/// (padding) byte is 0 and the other's is not, and a proper prefix sorts
/// first; padded bytes that are all equal mean one key is the other plus
/// trailing zeros, and the shorter sorts first. Two register compares
/// instead of a `memcmp` call per node a lookup visits.
fn cmp_inline(a: &[u8; INLINE_KEY], b: &[u8; INLINE_KEY]) -> Ordering {
    let word = |k: &[u8; INLINE_KEY], at: usize| {
        let mut w = [0; 16];
        w.copy_from_slice(&k[at..at + 16]);
        u128::from_be_bytes(w)
    };
    // Bytes 0..16, then 14..30 (14 and 15 are equal by then).
    word(a, 0)
        .cmp(&word(b, 0))
        .then_with(|| word(a, INLINE_KEY - 16).cmp(&word(b, INLINE_KEY - 16)))
}

impl std::ops::Deref for Key {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Key::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Key::Shared(b) => b,
        }
    }
}

impl Borrow<[u8]> for Key {
    fn borrow(&self) -> &[u8] {
        self
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for Key {}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Key::Inline { len: la, bytes: a }, Key::Inline { len: lb, bytes: b }) => {
                cmp_inline(a, b).then(la.cmp(lb))
            }
            _ => (**self).cmp(&**other),
        }
    }
}

#[derive(Clone, Default)]
struct State {
    version: u64,
    /// Cloning the map clones each table's root pointer only.
    tables: BTreeMap<String, Table>,
}

/// An in-memory [`Store`]. Nothing survives the process; everything else
/// behaves as [`RocksStore`](super::RocksStore) does.
pub struct MemoryStore {
    state: ArcSwap<State>,
    writer: WriterGate,
    /// Serialises the read-modify-publish of `state` between commits and
    /// column family changes. Held for microseconds; readers never take it.
    publish: Mutex<()>,
    /// Set when a commit's publication step panicked (as `RocksStore`'s):
    /// that commit is published, and no later change is taken.
    poisoned: Mutex<Option<String>>,
    /// When a commit rebuilds a table's run.
    rebuild: Rebuild,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state.load();
        f.debug_struct("MemoryStore")
            .field("version", &state.version)
            .field("column_families", &state.tables.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self {
            state: ArcSwap::from_pointee(State::default()),
            writer: WriterGate::new(),
            publish: Mutex::new(()),
            poisoned: Mutex::new(None),
            rebuild: Rebuild::default(),
        }
    }

    /// An empty store whose commits rebuild a table's sorted run from
    /// batches of `bulk` operations on (and a sixteenth of) it, instead of
    /// 1,024: for tests, which reach the rebuilds with small batches. The
    /// contents read the same either way.
    #[doc(hidden)]
    pub fn with_bulk_rebuild(bulk: usize) -> Self {
        Self {
            rebuild: Rebuild { bulk: bulk.max(1) },
            ..Self::new()
        }
    }

    fn check_poisoned(&self) -> Result<()> {
        match &*self.poisoned.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(cause) => Err(Error::Poisoned { cause: cause.clone() }),
            None => Ok(()),
        }
    }

    fn lock_publish(&self) -> MutexGuard<'_, ()> {
        self.publish.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Store for MemoryStore {
    fn snapshot(&self) -> Arc<dyn Snapshot + '_> {
        Arc::new(MemorySnapshot(self.state.load_full()))
    }

    fn create_cf(&self, name: &str) -> Result<()> {
        check_cf_name(name)?;
        let _publish = self.lock_publish();
        self.check_poisoned()?;
        let mut state = State::clone(&self.state.load());
        if state.tables.contains_key(name) {
            return Err(Error::ColumnFamilyExists {
                name: name.to_owned(),
            });
        }
        state.tables.insert(name.to_owned(), Table::default());
        self.state.store(Arc::new(state));
        Ok(())
    }

    fn drop_cf(&self, name: &str) -> Result<()> {
        let _publish = self.lock_publish();
        self.check_poisoned()?;
        let mut state = State::clone(&self.state.load());
        if state.tables.remove(name).is_none() {
            return Err(Error::UnknownColumnFamily {
                name: name.to_owned(),
            });
        }
        self.state.store(Arc::new(state));
        Ok(())
    }

    fn list_cfs(&self) -> Vec<String> {
        self.state.load().tables.keys().cloned().collect()
    }

    fn write_lock(&self) -> Result<WriteGuard<'_>> {
        self.writer.acquire()
    }

    fn apply(&self, batch: Batch, before_publish: &mut dyn FnMut(u64)) -> Result<u64> {
        let _publish = self.lock_publish();
        self.check_poisoned()?;
        let mut state = State::clone(&self.state.load());
        for (cf, ops) in batch.ops {
            let table = state
                .tables
                .get_mut(&cf)
                .ok_or_else(|| Error::UnknownColumnFamily { name: cf.clone() })?;
            table.apply(ops, self.rebuild);
        }
        state.version += 1;
        let version = state.version;
        // Published even if `before_publish` panics (having updated the
        // vector caches to this version, or part of them): the data is then
        // at least as new as any cache, and the store takes no more changes
        // (the database's own poisoning covers caches left part way).
        let mut publish = Publish {
            store: self,
            state: Some(state),
        };
        before_publish(version);
        if let Some(state) = publish.state.take() {
            self.state.store(Arc::new(state));
        }
        Ok(version)
    }
}

/// A commit's state until it is published; published on drop by a panic.
struct Publish<'a> {
    store: &'a MemoryStore,
    state: Option<State>,
}

impl Drop for Publish<'_> {
    fn drop(&mut self) {
        if let Some(state) = self.state.take() {
            *self.store.poisoned.lock().unwrap_or_else(|p| p.into_inner()) = Some(format!(
                "a commit's publication panicked at version {}",
                state.version
            ));
            self.store.state.store(Arc::new(state));
        }
    }
}

struct MemorySnapshot(Arc<State>);

impl MemorySnapshot {
    fn table(&self, cf: &str) -> Result<&Table> {
        self.0
            .tables
            .get(cf)
            .ok_or_else(|| Error::UnknownColumnFamily { name: cf.to_owned() })
    }
}

impl Snapshot for MemorySnapshot {
    fn version(&self) -> u64 {
        self.0.version
    }

    fn get(&self, cf: &str, key: &[u8]) -> Result<Option<Cow<'_, [u8]>>> {
        Ok(self.table(cf)?.get(key).map(|v| Cow::Borrowed(&**v)))
    }

    /// One table lookup for all the keys.
    fn multi_get(&self, cf: &str, keys: &[&[u8]]) -> Result<Vec<Option<Cow<'_, [u8]>>>> {
        let table = self.table(cf)?;
        Ok(table
            .get_many(keys)
            .into_iter()
            .map(|v| v.map(|v| Cow::Borrowed(&**v)))
            .collect())
    }

    fn range(&self, cf: &str, range: &KeyRange, dir: Direction) -> Result<EntryIter<'_>> {
        let table = self.table(cf)?;
        if range.is_empty() {
            return Ok(Box::new(std::iter::empty()));
        }
        Ok(Box::new(
            table
                .range(range, dir)
                .map(|(k, v)| Ok((Cow::Borrowed(&**k), Cow::Borrowed(&**v)))),
        ))
    }

    fn count_range(&self, cf: &str, range: &KeyRange, cap: usize) -> Result<usize> {
        let table = self.table(cf)?;
        if range.is_empty() {
            return Ok(0);
        }
        Ok(table.count(range, cap))
    }

    fn has_cf(&self, cf: &str) -> bool {
        self.0.tables.contains_key(cf)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn keys_compare_and_borrow_as_their_bytes_inline_or_shared() {
        let raw: Vec<Vec<u8>> = vec![
            vec![],
            vec![0],
            vec![1; 29],
            vec![1; 30],
            // Differs from the one above in the last inline byte only.
            [vec![1; 29], vec![2]].concat(),
            vec![0; 29],
            vec![0; 30],
            vec![1; 31],
            vec![0xff; 30],
            vec![0xff; 64],
            b"d:\x10".to_vec(),
        ];
        for a in &raw {
            let ka = Key::new(a.clone());
            assert_eq!(matches!(ka, Key::Inline { .. }), a.len() <= INLINE_KEY);
            assert_eq!(&*ka, a.as_slice());
            for b in &raw {
                assert_eq!(ka.cmp(&Key::new(b.clone())), a.cmp(b), "{a:?} vs {b:?}");
            }
        }
        assert_eq!(std::mem::size_of::<Key>(), 32);
    }

    proptest! {
        /// Inline keys (compared as padded words) and shared ones order
        /// exactly as their bytes, near the inline limit and either side.
        #[test]
        fn keys_order_as_their_bytes((a, b) in crate::testing::key_pair(33)) {
            let (ka, kb) = (Key::new(a.clone()), Key::new(b.clone()));
            prop_assert_eq!(ka.cmp(&kb), a.cmp(&b));
            prop_assert_eq!(ka == kb, a == b);
        }
    }
}
