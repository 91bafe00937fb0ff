//! The write transaction: changes buffered over a snapshot, applied as one batch.
//!
//! A [`WriteTxn`] holds the store's write lock for its whole life, so its base
//! snapshot is the latest committed state and stays so until it commits.
//! Reads inside the transaction see its own changes first (read-your-writes),
//! then the base. Dropping the transaction without `commit` discards it.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::iter::Peekable;
use std::sync::Arc;

use super::{
    count_visited, last_of_each, visit_entries, Batch, Bytes, Direction, Entry, EntryIter, KeyRange, Op,
    Snapshot, Store, Visitor,
};
use crate::{Error, Result};

/// Fewest entries [`WriteTxn::put_many`] sorts and builds into a tree in
/// one pass rather than inserting one at a time.
const BULK_MIN_ENTRIES: usize = 64;

/// The buffered changes to one column family.
///
/// Invariant: no key in `writes` lies in a range of `ranges` that was added
/// after the write; `delete_range` removes such writes when it is called, so a
/// write always wins over every range tombstone it shares a key with.
#[derive(Debug, Default)]
struct CfChanges {
    ranges: Vec<KeyRange>,
    writes: BTreeMap<Vec<u8>, Option<Bytes>>,
}

impl CfChanges {
    fn deleted_by_range(&self, key: &[u8]) -> bool {
        self.ranges.iter().any(|r| r.contains(key))
    }
}

/// The one write transaction of a store. Commit with [`WriteTxn::commit`];
/// drop to roll back.
pub struct WriteTxn<'a> {
    store: &'a dyn Store,
    base: Arc<dyn Snapshot + 'a>,
    changes: BTreeMap<String, CfChanges>,
    /// Calls that changed something so far (see [`WriteTxn::writes`]).
    writes: u64,
    /// This transaction among every one begun in the process (see
    /// [`WriteTxn::writes`]).
    serial: u64,
    /// Bytes held for the changes (see [`WriteTxn::held_bytes`]).
    held: u64,
    /// See [`WriteTxn::limit_bytes`].
    limit: Option<u64>,
    // Declared last: released after the fields above are dropped.
    _guard: super::WriteGuard<'a>,
}

impl std::fmt::Debug for WriteTxn<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteTxn")
            .field("base_version", &self.base.version())
            .field("column_families", &self.changes.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl<'a> WriteTxn<'a> {
    pub(crate) fn new(store: &'a dyn Store) -> Result<Self> {
        let guard = store.write_lock()?;
        let base = store.snapshot();
        Ok(Self {
            store,
            base,
            changes: BTreeMap::new(),
            writes: 0,
            serial: {
                static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
                NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            },
            held: 0,
            limit: None,
            _guard: guard,
        })
    }

    /// Reads through a fresh snapshot of the store, which sees column
    /// families created since this transaction began (it holds the writer
    /// guard, so nothing else has changed). Only before the first change.
    pub fn rebase(&mut self) -> Result<()> {
        assert!(self.is_empty(), "rebase after a change would lose it");
        self.changes.clear();
        self.base = self.store.snapshot();
        Ok(())
    }

    /// The version of the state this transaction started from.
    pub fn base_version(&self) -> u64 {
        self.base.version()
    }

    /// Sets the cap [`check_room`](Self::check_room) holds the bytes of
    /// this transaction's changes to ([`held_bytes`](Self::held_bytes)).
    /// Writes themselves never fail on it, so that an operation made of
    /// several writes is never cut halfway; callers check before each
    /// operation. `None` (the default) lifts the cap.
    pub fn limit_bytes(&mut self, limit: Option<u64>) {
        self.limit = limit;
    }

    /// [`Error::TransactionTooLarge`] if this transaction holds more bytes
    /// than its limit.
    pub fn check_room(&self) -> Result<()> {
        self.check_room_for(0)
    }

    /// [`Error::TransactionTooLarge`] if this transaction would hold more
    /// bytes than its limit with `extra` more: checked by an operation that
    /// knows what it will write before it writes any of it.
    pub fn check_room_for(&self, extra: u64) -> Result<()> {
        let bytes = self.held.saturating_add(extra);
        match self.limit {
            Some(limit) if bytes > limit => Err(Error::TransactionTooLarge { bytes, limit }),
            _ => Ok(()),
        }
    }

    /// The bytes this transaction holds for its changes: keys and values
    /// buffered (a key written twice counts twice), plus what work staged
    /// against it holds until written (see [`hold`](Self::hold)).
    pub fn held_bytes(&self) -> u64 {
        self.held
    }

    /// Counts `bytes` more as held (work staged against this transaction).
    pub fn hold(&mut self, bytes: u64) {
        self.held = self.held.saturating_add(bytes);
    }

    /// Counts one write that buffered `bytes`.
    fn counted(&mut self, bytes: u64) {
        self.hold(bytes);
        self.writes += 1;
    }

    /// Counts `bytes` fewer as held (staged work that was written or dropped).
    pub fn release(&mut self, bytes: u64) {
        self.held = self.held.saturating_sub(bytes);
    }

    /// This transaction (unique in the process) and how many puts and
    /// deletes it has taken, a count that only grows: work prepared from
    /// what a transaction read can tell whether it is handed back to the
    /// same transaction, with no write since.
    pub fn writes(&self) -> (u64, u64) {
        (self.serial, self.writes)
    }

    /// The snapshot this transaction reads through (without its own changes).
    pub fn base(&self) -> &dyn Snapshot {
        self.base.as_ref()
    }

    fn changes_mut(&mut self, cf: &str) -> Result<&mut CfChanges> {
        if !self.changes.contains_key(cf) {
            if !self.base.has_cf(cf) {
                return Err(Error::UnknownColumnFamily { name: cf.to_owned() });
            }
            self.changes.insert(cf.to_owned(), CfChanges::default());
        }
        Ok(self.changes.get_mut(cf).expect("inserted above"))
    }

    /// Sets `key` to `value` in `cf`.
    pub fn put(&mut self, cf: &str, key: impl Into<Vec<u8>>, value: impl Into<Bytes>) -> Result<()> {
        let (key, value) = (key.into(), value.into());
        let bytes = (key.len() + value.len()) as u64;
        self.changes_mut(cf)?.writes.insert(key, Some(value));
        self.counted(bytes);
        Ok(())
    }

    /// Sets every `(key, value)` of `entries` in `cf`, in order (a later
    /// value for a key wins), as that many [`put`](Self::put)s would.
    ///
    /// A large run of entries is sorted and built into a tree in one pass,
    /// then merged with the writes already buffered, instead of descending
    /// the tree once per entry: this is what makes a bulk insert's writes
    /// cheap.
    pub fn put_many(&mut self, cf: &str, entries: Vec<(Vec<u8>, Bytes)>) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let bytes: u64 = entries.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum();
        merge_run(&mut self.changes_mut(cf)?.writes, entries);
        self.counted(bytes);
        Ok(())
    }

    /// Removes `key` from `cf` (a no-op if absent).
    pub fn delete(&mut self, cf: &str, key: impl Into<Vec<u8>>) -> Result<()> {
        let key = key.into();
        let bytes = key.len() as u64;
        self.changes_mut(cf)?.writes.insert(key, None);
        self.counted(bytes);
        Ok(())
    }

    /// Removes every key of `cf` in `range`.
    pub fn delete_range(&mut self, cf: &str, range: KeyRange) -> Result<()> {
        let bytes = range.start.as_ref().map_or(0, Vec::len) + range.end.as_ref().map_or(0, Vec::len);
        let changes = self.changes_mut(cf)?;
        if !range.is_empty() {
            let doomed: Vec<Vec<u8>> = changes
                .writes
                .range::<[u8], _>(range.bounds())
                .map(|(k, _)| k.clone())
                .collect();
            for k in doomed {
                changes.writes.remove(&k);
            }
            changes.ranges.push(range);
        }
        self.counted(bytes as u64);
        Ok(())
    }

    /// The value under `key` as this transaction sees it.
    pub fn get(&self, cf: &str, key: &[u8]) -> Result<Option<Cow<'_, [u8]>>> {
        if let Some(changes) = self.changes.get(cf) {
            if let Some(w) = changes.writes.get(key) {
                return Ok(w.as_deref().map(Cow::Borrowed));
            }
            if changes.deleted_by_range(key) {
                return Ok(None);
            }
        }
        self.base.get(cf, key)
    }

    /// Entries of `cf` in `range` as this transaction sees them.
    pub fn range(&self, cf: &str, range: &KeyRange, dir: Direction) -> Result<EntryIter<'_>> {
        let base = self.base.range(cf, range, dir)?;
        let Some(changes) = self.changes.get(cf) else {
            return Ok(base);
        };
        if range.is_empty() {
            return Ok(Box::new(std::iter::empty()));
        }
        let own = changes.writes.range::<[u8], _>(range.bounds());
        let own: OwnIter<'_> = match dir {
            Direction::Forward => Box::new(own),
            Direction::Reverse => Box::new(own.rev()),
        };
        Ok(Box::new(Merge {
            own: own.peekable(),
            base: base.peekable(),
            ranges: &changes.ranges,
            dir,
            failed: false,
        }))
    }

    /// Whether any key of `cf` lies in `range` as this transaction sees it
    /// ([`Snapshot::any_in`]); `None` when the store gave up, or when this
    /// transaction deleted keys there (its deletes may hide every stored
    /// key in the range).
    pub fn any_in(&self, cf: &str, range: &KeyRange) -> Result<Option<bool>> {
        if let Some(changes) = self.changes.get(cf) {
            let mut deleted = !changes.ranges.is_empty();
            for (_, write) in changes.writes.range::<[u8], _>(range.bounds()) {
                if write.is_some() {
                    return Ok(Some(true));
                }
                deleted = true;
            }
            if deleted {
                return Ok(None);
            }
        }
        self.base.any_in(cf, range)
    }

    /// Entries of `cf` whose keys start with `prefix`.
    pub fn prefix(&self, cf: &str, prefix: &[u8], dir: Direction) -> Result<EntryIter<'_>> {
        self.range(cf, &KeyRange::prefix(prefix), dir)
    }

    /// Whether the transaction has changed anything.
    pub fn is_empty(&self) -> bool {
        self.changes
            .values()
            .all(|c| c.ranges.is_empty() && c.writes.is_empty())
    }

    /// Commits atomically and returns the new version (the base version when
    /// nothing changed).
    pub fn commit(self) -> Result<u64> {
        self.commit_with(|_| {})
    }

    /// Commits, running `before_publish` with the new version once the batch
    /// is written but before any snapshot can see it (see [`Store::apply`]).
    /// It does not run when the transaction changed nothing.
    pub fn commit_with(mut self, before_publish: impl FnMut(u64)) -> Result<u64> {
        self.apply_changes(before_publish)
    }

    /// [`commit_with`](Self::commit_with), handing back the writer guard:
    /// for work that must follow the commit before any other writer runs
    /// (dropping the column family of a collection the commit removed, which
    /// a writer creating one of the same name would otherwise race).
    pub fn commit_holding(mut self, before_publish: impl FnMut(u64)) -> Result<(u64, super::WriteGuard<'a>)> {
        let version = self.apply_changes(before_publish)?;
        Ok((version, self._guard))
    }

    fn apply_changes(&mut self, mut before_publish: impl FnMut(u64)) -> Result<u64> {
        if self.is_empty() {
            return Ok(self.base.version());
        }
        let mut batch = Batch::default();
        for (cf, changes) in std::mem::take(&mut self.changes) {
            let mut ops = Vec::with_capacity(changes.ranges.len() + changes.writes.len());
            ops.extend(changes.ranges.into_iter().map(|r| Op::DeleteRange {
                start: r.start.unwrap_or_default(),
                end: r.end,
            }));
            ops.extend(changes.writes.into_iter().map(|(key, value)| match value {
                Some(value) => Op::Put { key, value },
                None => Op::Delete { key },
            }));
            batch.ops.push((cf, ops));
        }
        self.store.apply(batch, &mut before_publish)
    }

    /// Discards every change (the same as dropping the transaction).
    pub fn rollback(self) {}
}

impl Snapshot for WriteTxn<'_> {
    /// The base version: a transaction's own changes have no version yet.
    fn version(&self) -> u64 {
        self.base.version()
    }

    fn get(&self, cf: &str, key: &[u8]) -> Result<Option<Cow<'_, [u8]>>> {
        WriteTxn::get(self, cf, key)
    }

    fn range(&self, cf: &str, range: &KeyRange, dir: Direction) -> Result<EntryIter<'_>> {
        WriteTxn::range(self, cf, range, dir)
    }

    fn visit(&self, cf: &str, range: &KeyRange, f: &mut Visitor<'_>) -> Result<()> {
        if !self.changes.contains_key(cf) {
            return self.base.visit(cf, range, f);
        }
        visit_entries(WriteTxn::range(self, cf, range, Direction::Forward)?, f)
    }

    fn count_range(&self, cf: &str, range: &KeyRange, cap: usize) -> Result<usize> {
        if !self.changes.contains_key(cf) {
            return self.base.count_range(cf, range, cap);
        }
        count_visited(|f| self.visit(cf, range, f), cap)
    }

    fn any_in(&self, cf: &str, range: &KeyRange) -> Result<Option<bool>> {
        WriteTxn::any_in(self, cf, range)
    }

    fn has_cf(&self, cf: &str) -> bool {
        self.base.has_cf(cf)
    }

    fn on_disk(&self) -> bool {
        self.base.on_disk()
    }
}

type OwnIter<'t> = Box<dyn Iterator<Item = (&'t Vec<u8>, &'t Option<Bytes>)> + Send + 't>;

/// Merges the transaction's own writes with the base snapshot's entries.
struct Merge<'t> {
    own: Peekable<OwnIter<'t>>,
    base: Peekable<EntryIter<'t>>,
    ranges: &'t [KeyRange],
    dir: Direction,
    failed: bool,
}

impl<'t> Iterator for Merge<'t> {
    type Item = Result<Entry<'t>>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.failed {
                return None;
            }
            if let Some(Err(_)) = self.base.peek() {
                self.failed = true;
                return self.base.next();
            }
            let take_own = match (self.own.peek(), self.base.peek()) {
                (None, None) => return None,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some((own_key, _)), Some(Ok((base_key, _)))) => {
                    let ord = own_key.as_slice().cmp(base_key.as_ref());
                    let ord = if self.dir == Direction::Reverse {
                        ord.reverse()
                    } else {
                        ord
                    };
                    match ord {
                        Ordering::Less => true,
                        Ordering::Greater => false,
                        Ordering::Equal => {
                            self.base.next(); // shadowed by our own write
                            true
                        }
                    }
                }
                (Some(_), Some(Err(_))) => unreachable!("handled above"),
            };
            if take_own {
                let (key, value) = self.own.next()?;
                if let Some(value) = value {
                    return Some(Ok((Cow::Borrowed(key.as_slice()), Cow::Borrowed(&value[..]))));
                }
            } else {
                match self.base.next()? {
                    Ok((key, value)) => {
                        if !self.ranges.iter().any(|r| r.contains(&key)) {
                            return Some(Ok((key, value)));
                        }
                    }
                    Err(e) => {
                        self.failed = true;
                        return Some(Err(e));
                    }
                }
            }
        }
    }
}

/// Sets every `(key, value)` of `entries` in `writes`, in order (a later
/// value for a key wins): see [`WriteTxn::put_many`].
fn merge_run(writes: &mut BTreeMap<Vec<u8>, Option<Bytes>>, entries: Vec<(Vec<u8>, Bytes)>) {
    // Merging rebuilds the buffered tree too (`append` is linear in both
    // sizes), so a short run among many buffered writes goes one by one.
    if entries.len() < BULK_MIN_ENTRIES || entries.len() < writes.len() / 8 {
        for (key, value) in entries {
            writes.insert(key, Some(value));
        }
        return;
    }
    let mut run: BTreeMap<Vec<u8>, Option<Bytes>> = last_of_each(entries)
        .into_iter()
        .map(|(k, v)| (k, Some(v)))
        .collect();
    if writes.is_empty() {
        *writes = run;
    } else {
        // `append` keeps `run`'s value for a key in both.
        writes.append(&mut run);
    }
}
