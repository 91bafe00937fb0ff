//! `MemoryStore`: persistent ordered maps published through `arc-swap`.
//!
//! Each column family is an `imbl::OrdMap` whose clones share structure, so a
//! commit copies only the O(log n) path to each key it touches, and a snapshot
//! is one `Arc` to an immutable state: reads take no lock and lend their bytes
//! straight out of the snapshot.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use arc_swap::ArcSwap;

use super::{
    check_cf_name, Batch, Direction, EntryIter, KeyRange, Op, Snapshot, Store, WriteGuard, WriterGate,
};
use crate::{Error, Result};

type Bytes = Arc<[u8]>;
type Table = imbl::OrdMap<Bytes, Bytes>;

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
        }
    }

    fn lock_publish(&self) -> MutexGuard<'_, ()> {
        self.publish.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Store for MemoryStore {
    fn snapshot(&self) -> Box<dyn Snapshot + '_> {
        Box::new(MemorySnapshot(self.state.load_full()))
    }

    fn create_cf(&self, name: &str) -> Result<()> {
        check_cf_name(name)?;
        let _publish = self.lock_publish();
        let mut state = State::clone(&self.state.load());
        if state.tables.contains_key(name) {
            return Err(Error::ColumnFamilyExists {
                name: name.to_owned(),
            });
        }
        state.tables.insert(name.to_owned(), Table::new());
        self.state.store(Arc::new(state));
        Ok(())
    }

    fn drop_cf(&self, name: &str) -> Result<()> {
        let _publish = self.lock_publish();
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

    fn write_lock(&self) -> WriteGuard<'_> {
        self.writer.acquire()
    }

    fn apply(&self, batch: Batch, before_publish: &mut dyn FnMut(u64)) -> Result<u64> {
        let _publish = self.lock_publish();
        let mut state = State::clone(&self.state.load());
        for (cf, op) in batch.ops {
            let table = state
                .tables
                .get_mut(&cf)
                .ok_or_else(|| Error::UnknownColumnFamily { name: cf.clone() })?;
            match op {
                Op::Put { key, value } => {
                    table.insert(key.into(), value.into());
                }
                Op::Delete { key } => {
                    table.remove(key.as_slice());
                }
                Op::DeleteRange { start, end } => {
                    let range = KeyRange {
                        start: Some(start),
                        end,
                    };
                    if range.is_empty() {
                        continue;
                    }
                    let doomed: Vec<Bytes> = table
                        .range::<_, [u8]>(range.bounds())
                        .map(|(k, _)| k.clone())
                        .collect();
                    for k in doomed {
                        table.remove(&k);
                    }
                }
            }
        }
        state.version += 1;
        before_publish(state.version);
        let version = state.version;
        self.state.store(Arc::new(state));
        Ok(version)
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
        Ok(keys
            .iter()
            .map(|k| table.get(*k).map(|v| Cow::Borrowed(&**v)))
            .collect())
    }

    fn range(&self, cf: &str, range: &KeyRange, dir: Direction) -> Result<EntryIter<'_>> {
        let table = self.table(cf)?;
        if range.is_empty() {
            return Ok(Box::new(std::iter::empty()));
        }
        let iter = table
            .range::<_, [u8]>(range.bounds())
            .map(|(k, v)| Ok((Cow::Borrowed(&**k), Cow::Borrowed(&**v))));
        Ok(match dir {
            Direction::Forward => Box::new(iter),
            Direction::Reverse => Box::new(iter.rev()),
        })
    }

    fn has_cf(&self, cf: &str) -> bool {
        self.0.tables.contains_key(cf)
    }
}
