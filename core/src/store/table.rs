//! A [`MemoryStore`](super::MemoryStore) column family: a sorted run of
//! entries, rebuilt now and then, and the writes since it was built in a
//! persistent map.
//!
//! A large batch (a bulk load, an index built over a collection) rebuilds
//! the run in one merge, O(entries), instead of inserting its keys into the
//! persistent map one by one, each insert copying its path through the tree.
//! A small one goes to the map, as before: `None` there deletes an entry of
//! the run, and a key deleted at either end of the run narrows the run's
//! window instead (a queue leaves no deletions to step past). Reads look in
//! the map first, then in the run, and a range merges the two. The map is
//! folded into the run once it (with the keys out of the window) holds half
//! as many entries, or its deletions a sixteenth of the run (at least 64):
//! a read mostly finds its keys in contiguous memory, and most deleted and
//! replaced values are let go (a segment keeps its dead values while one of
//! its keys lives: right after a fold, at most as many as the live ones in
//! all, and until the next one also the values the map replaced or deleted
//! since; a table whose run is empty is a plain persistent map). Clones
//! share every part: a snapshot is a few pointers. A small commit is
//! O(log n) amortised: the fold it may trigger copies the run's keys.

use std::cmp::Ordering;
use std::ops::Range;
use std::sync::Arc;

use super::memory::Key;
use super::{last_of_each, Bytes, Direction, KeyRange, Op};

/// When batches and the map are folded into the run (see [`Table::apply`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct Rebuild {
    /// A batch of at least this many operations on one column family, and
    /// at least a sixteenth of its entries, rebuilds the run.
    pub bulk: usize,
}

impl Default for Rebuild {
    fn default() -> Self {
        Rebuild { bulk: 1024 }
    }
}

/// A batch rebuilds the run when it holds at least this fraction (1 / n) of
/// the table's entries: each rebuild then copies at most this many entries
/// per operation in it.
const BULK_SHARE: usize = 16;

/// The map is folded into the run once its deletions reach this fraction
/// (1 / n) of the run, or [`GONE_MIN`], whichever is more: a range read
/// steps past at most that many deletions, and a fold copies at most n run
/// keys per deletion.
const GONE_SHARE: usize = 16;

/// See [`GONE_SHARE`].
const GONE_MIN: usize = 64;

/// A column family's entries. Cloning shares the run and the map's tree.
#[derive(Clone, Default)]
pub(super) struct Table {
    run: Arc<Run>,
    /// Writes since the run was built: `Some` puts, `None` deletes a key of
    /// the run (a key only here is removed outright).
    delta: imbl::OrdMap<Key, Option<Bytes>>,
    /// The deletions in `delta`, which every range read over them steps past.
    gone: usize,
    /// The positions of the run still in the table: a key deleted at either
    /// end moves its end instead of being marked deleted, so that a queue
    /// (deleting its oldest keys, reading its head) leaves nothing to step
    /// past. Deletions are only ever marked within it.
    window: Range<usize>,
}

/// Entries in ascending key order, keys distinct. The values sit in
/// segments shared between runs (each rebuild adds one, of the values it
/// took from the map and the batch), so that a rebuild copies the keys and
/// where their values are, never touching a value's reference count.
#[derive(Default)]
struct Run {
    keys: Vec<Key>,
    /// Each key's value: its segment, and its position there.
    at: Vec<(usize, usize)>,
    segments: Vec<Arc<[Bytes]>>,
    /// How many keys refer to each segment.
    live: Vec<usize>,
    /// How many leading bytes every key of the run shares.
    skip: usize,
    /// Every [`HEAD_STEP`]th key's [`head`] past those `skip` bytes: a
    /// lookup searches these (2 bytes a key: about 200 KB at 100,000 keys,
    /// within L2) before the few keys between two of them, instead of
    /// binary-searching the whole run, which misses the cache at most of its
    /// steps. A collection's column family holds its documents, index
    /// entries and counters, so `skip` is usually 0 and a head starts with
    /// the key's kind (`{P}d:`): ids whose first 16 encoded bytes agree
    /// (long shared string prefixes, long partition prefixes) tie, and their
    /// lookups fall back to a binary search among the tied keys.
    heads: Vec<u128>,
}

/// Keys of a run per entry of its `heads`.
const HEAD_STEP: usize = 8;

/// The 16 bytes of `key` from `skip` on, zero-padded, read big-endian. For
/// keys sharing their first `skip` bytes, a smaller head means a smaller key
/// (where the padded bytes first differ, either both keys have a byte there
/// or the one that ended is a prefix of the other); equal heads decide nothing.
fn head(key: &[u8], skip: usize) -> u128 {
    let mut bytes = [0; 16];
    let rest = key.get(skip..).unwrap_or_default();
    let n = rest.len().min(16);
    bytes[..n].copy_from_slice(&rest[..n]);
    u128::from_be_bytes(bytes)
}

/// An entry as the two parts yield them: the map's may be a deletion.
type Item<'t> = (&'t Key, Option<&'t Bytes>);

impl Run {
    fn new(keys: Vec<Key>, at: Vec<(usize, usize)>, segments: Vec<Arc<[Bytes]>>, live: Vec<usize>) -> Self {
        let skip = match (keys.first(), keys.last()) {
            (Some(first), Some(last)) => first.iter().zip(last.iter()).take_while(|(a, b)| a == b).count(),
            _ => 0,
        };
        let heads = keys.iter().step_by(HEAD_STEP).map(|k| head(k, skip)).collect();
        Run {
            keys,
            at,
            segments,
            live,
            skip,
            heads,
        }
    }

    /// The positions between which `key` is or would go, narrowed by the
    /// heads: past every key whose head is below `key`'s, before the first
    /// whose head is above it.
    fn narrow(&self, key: &[u8]) -> Range<usize> {
        let n = self.keys.len();
        let Some(first) = self.keys.first() else {
            return 0..0;
        };
        // Without the run's shared bytes, `key` sorts before or after all of it.
        if !key.starts_with(&first[..self.skip]) {
            return if key < &**first { 0..0 } else { n..n };
        }
        let h = head(key, self.skip);
        let below = self.heads.partition_point(|&x| x < h);
        let not_above = match self.heads.get(below) {
            Some(&x) if x == h => self.heads.partition_point(|&x| x <= h),
            _ => below,
        };
        let lo = below.checked_sub(1).map_or(0, |j| j * HEAD_STEP + 1);
        lo..(not_above * HEAD_STEP).min(n)
    }

    /// Where `key` is (`Ok`) or would go (`Err`); a short key compared
    /// inline, as the map compares it.
    fn find(&self, key: &[u8]) -> Result<usize, usize> {
        self.find_probe(key, Key::inline(key).as_ref())
    }

    /// [`Run::find`] with `key` held inline already (if short enough).
    fn find_probe(&self, key: &[u8], probe: Option<&Key>) -> Result<usize, usize> {
        let span = self.narrow(key);
        let keys = &self.keys[span.clone()];
        let found = match probe {
            Some(probe) => keys.binary_search(probe),
            None => keys.binary_search_by(|k| (**k).cmp(key)),
        };
        found.map(|i| span.start + i).map_err(|i| span.start + i)
    }

    fn value(&self, i: usize) -> &Bytes {
        let (segment, j) = self.at[i];
        &self.segments[segment][j]
    }

    /// The positions of the keys within `range` (its start included, its
    /// end not).
    fn span(&self, range: &KeyRange) -> Range<usize> {
        let at = |key: &[u8]| self.find(key).unwrap_or_else(|i| i);
        let start = range.start.as_deref().map_or(0, at);
        let end = range.end.as_deref().map_or(self.keys.len(), at);
        start..end.max(start)
    }

    fn entries(&self, span: Range<usize>) -> impl DoubleEndedIterator<Item = Item<'_>> + Send + '_ {
        span.map(|i| (&self.keys[i], Some(self.value(i))))
    }
}

impl Table {
    /// Entries held (deletions in the map count, so this is an upper bound).
    fn len(&self) -> usize {
        self.window.len() + self.delta.len()
    }

    /// What the map holds for `key` (`probe`: `key` inline, if short enough):
    /// `None` when the run decides, `Some(None)` for a deletion.
    fn in_delta(&self, key: &[u8], probe: Option<&Key>) -> Option<Option<&Bytes>> {
        if self.delta.is_empty() {
            return None;
        }
        let found = match probe {
            Some(probe) => self.delta.get(probe),
            None => self.delta.get(key),
        };
        found.map(Option::as_ref)
    }

    /// The value of `key`.
    pub(super) fn get(&self, key: &[u8]) -> Option<&Bytes> {
        let probe = Key::inline(key);
        if let Some(value) = self.in_delta(key, probe.as_ref()) {
            return value;
        }
        let i = self.run.find_probe(key, probe.as_ref()).ok()?;
        self.window.contains(&i).then(|| self.run.value(i))
    }

    /// [`Table::get`] of each key, in order. When the keys ascend (an
    /// index's matches in `_id` order), each is searched for in the run from
    /// where the one before it would go, by doubling steps: a few
    /// comparisons among nearby keys rather than a binary search of the
    /// whole run, which misses the cache at most of its steps. Keys in any
    /// other order are searched for one by one: galloping from a random
    /// place costs more comparisons than a binary search.
    pub(super) fn get_many<'t>(&'t self, keys: &[&[u8]]) -> Vec<Option<&'t Bytes>> {
        let run = &self.run.keys;
        let ascending = keys.is_sorted();
        // Where the previous key is or would go in the run.
        let mut from: Option<usize> = None;
        keys.iter()
            .map(|&key| {
                let probe = Key::inline(key);
                if let Some(value) = self.in_delta(key, probe.as_ref()) {
                    return value;
                }
                let i = match from.filter(|_| ascending) {
                    Some(from) => match &probe {
                        Some(probe) => gallop_by(run, from, |k| k < probe),
                        None => gallop_by(run, from, |k| **k < *key),
                    },
                    None => self.run.find_probe(key, probe.as_ref()).unwrap_or_else(|i| i),
                };
                from = Some(i);
                let hit = run.get(i).is_some_and(|k| **k == *key) && self.window.contains(&i);
                hit.then(|| self.run.value(i))
            })
            .collect()
    }

    /// The entries within `range`, in `dir`'s order (none when it is empty
    /// or inverted).
    pub(super) fn range<'t>(
        &'t self,
        range: &KeyRange,
        dir: Direction,
    ) -> Box<dyn Iterator<Item = (&'t Key, &'t Bytes)> + Send + 't> {
        if range.is_empty() {
            return Box::new(std::iter::empty());
        }
        let span = self.span(range);
        let run = self.run.entries(span);
        if self.delta.is_empty() {
            let live = |(k, v): Item<'t>| v.map(|v| (k, v));
            return match dir {
                Direction::Forward => Box::new(run.filter_map(live)),
                Direction::Reverse => Box::new(run.rev().filter_map(live)),
            };
        }
        // The map's write replaces the run's entry; deletions dropped.
        let delta = self
            .delta
            .range::<_, [u8]>(range.bounds())
            .map(|(k, v)| (k, v.as_ref()));
        let live = |(k, v): Item<'t>| v.map(|v| (k, v));
        match dir {
            Direction::Forward => Box::new(newest(run, delta, Ordering::Less).filter_map(live)),
            Direction::Reverse => {
                Box::new(newest(run.rev(), delta.rev(), Ordering::Greater).filter_map(live))
            }
        }
    }

    /// The positions of the run's keys within `range` still in the table.
    fn span(&self, range: &KeyRange) -> Range<usize> {
        let span = self.run.span(range);
        let start = span.start.max(self.window.start);
        start..span.end.min(self.window.end).max(start)
    }

    /// How many entries lie within `range`, counting no further than `cap`.
    pub(super) fn count(&self, range: &KeyRange, cap: usize) -> usize {
        if self.delta.is_empty() {
            return self.span(range).len().min(cap);
        }
        self.range(range, Direction::Forward).take(cap).count()
    }

    /// Applies one column family's operations of a commit, in order.
    ///
    /// A batch of at least `rebuild.bulk` operations and a sixteenth of the
    /// table (a load, an index build) is merged with the run and the map into
    /// a new run; so is the map, once a smaller batch leaves it holding half
    /// as many entries as the run, or deletions of a sixteenth of the run's
    /// keys (at least 64). A merge copies the run's keys and where their
    /// values are (the values are shared), at most 16 per operation since the
    /// last one, amortised. A batch with a range deletion goes to the map
    /// (its keys are found in the current entries first).
    pub(super) fn apply(&mut self, ops: Vec<Op>, rebuild: Rebuild) {
        let bulk = ops.len() >= rebuild.bulk
            && ops.len().saturating_mul(BULK_SHARE) >= self.len()
            && !ops.iter().any(|op| matches!(op, Op::DeleteRange { .. }));
        if bulk {
            self.rebuild(sorted_batch(ops));
            return;
        }
        for op in ops {
            self.apply_op(op);
        }
        let run = self.run.keys.len();
        // Keys out of the window count as deletions.
        let trimmed = run - self.window.len();
        if run > 0
            && (self.delta.len() + trimmed >= (run / 2).max(1)
                || self.gone + trimmed >= (run / GONE_SHARE).max(GONE_MIN))
        {
            self.rebuild(Vec::new());
        }
    }

    fn apply_op(&mut self, op: Op) {
        match op {
            Op::Put { key, value } => {
                if let Some(None) = self.delta.insert(Key::new(key), Some(value)) {
                    self.gone -= 1;
                }
            }
            Op::Delete { key } => self.delete(Key::new(key)),
            Op::DeleteRange { start, end } => {
                let range = KeyRange {
                    start: Some(start),
                    end,
                };
                if range.is_empty() {
                    return;
                }
                let doomed: Vec<Key> = self
                    .range(&range, Direction::Forward)
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in doomed {
                    self.delete(k);
                }
            }
        }
    }

    /// Deletes `key`: at either end of the run's window, by moving that end
    /// (and past the marks it then reaches); inside it, by a deletion mark
    /// in the map; otherwise (not in the run, or out of the window already)
    /// by dropping the map's entry, if any.
    fn delete(&mut self, key: Key) {
        match self.run.find(&key) {
            Ok(i) if self.window.contains(&i) => {
                if i == self.window.start || i + 1 == self.window.end {
                    self.forget(&key);
                    if i == self.window.start {
                        self.window.start += 1;
                    } else {
                        self.window.end -= 1;
                    }
                    self.trim();
                } else if !matches!(self.delta.insert(key, None), Some(None)) {
                    self.gone += 1;
                }
            }
            // Not in the run, or out of the window already: only a put in
            // the map may hold it.
            _ => self.forget(&key),
        }
    }

    /// Drops the map's entry for `key`, if any.
    fn forget(&mut self, key: &Key) {
        if let Some(None) = self.delta.remove(key) {
            self.gone -= 1;
        }
    }

    /// Moves the window's ends past keys marked deleted, dropping the marks.
    fn trim(&mut self) {
        let deleted = |t: &Table, i: usize| matches!(t.delta.get(&t.run.keys[i]), Some(None));
        while !self.window.is_empty() && deleted(self, self.window.start) {
            let key = self.run.keys[self.window.start].clone();
            self.forget(&key);
            self.window.start += 1;
        }
        while !self.window.is_empty() && deleted(self, self.window.end - 1) {
            let key = self.run.keys[self.window.end - 1].clone();
            self.forget(&key);
            self.window.end -= 1;
        }
    }

    /// A new run of the current entries with `batch` (ascending, distinct
    /// keys, the newest writes) applied; the map emptied.
    fn rebuild(&mut self, batch: Vec<(Key, Option<Bytes>)>) {
        let delta = std::mem::take(&mut self.delta);
        self.gone = 0;
        let changes = newest(
            delta.iter().map(|(k, v)| (k.clone(), v.clone())),
            batch.into_iter(),
            Ordering::Less,
        );
        let old = &*self.run;
        let fresh_segment = old.segments.len();
        let mut keys = Vec::with_capacity(old.keys.len() + delta.len());
        let mut at = Vec::with_capacity(old.keys.len() + delta.len());
        let mut fresh = Vec::new();
        let mut live = old.live.clone();
        // The keys out of the window are deleted.
        let window = self.window.clone();
        for &(segment, _) in old.at[..window.start].iter().chain(&old.at[window.end..]) {
            live[segment] -= 1;
        }
        let (old_keys, old_at) = (&old.keys[window.clone()], &old.at[window]);
        // The old run's keys between two changes are copied a stretch at a
        // time (a batch of ascending ids lands after them all, an index's
        // new entries at the end of each value's entries).
        let mut i = 0;
        for (key, value) in changes {
            let j = gallop_by(old_keys, i, |k| *k < key);
            keys.extend_from_slice(&old_keys[i..j]);
            at.extend_from_slice(&old_at[i..j]);
            i = j;
            if old_keys.get(i) == Some(&key) {
                // Replaced or deleted.
                live[old_at[i].0] -= 1;
                i += 1;
            }
            if let Some(value) = value {
                keys.push(key);
                at.push((fresh_segment, fresh.len()));
                fresh.push(value);
            }
        }
        keys.extend_from_slice(&old_keys[i..]);
        at.extend_from_slice(&old_at[i..]);
        keys.shrink_to_fit();
        at.shrink_to_fit();
        live.push(fresh.len());
        let mut segments = old.segments.clone();
        segments.push(fresh.into());
        let held: usize = segments.iter().map(|s| s.len()).sum();
        if held > 2 * keys.len() {
            // Mostly values deleted or replaced: the live ones copied into
            // one segment, the rest let go.
            let values: Arc<[Bytes]> = at.iter().map(|&(s, j)| segments[s][j].clone()).collect();
            segments = vec![values];
            live = vec![keys.len()];
            at = (0..keys.len()).map(|j| (0, j)).collect();
        } else if live.contains(&0) {
            // Segments no key refers to any more dropped, the others renumbered.
            let mut renumber = vec![0; segments.len()];
            let mut kept = Vec::new();
            for (i, segment) in segments.into_iter().enumerate() {
                if live[i] > 0 {
                    renumber[i] = kept.len();
                    kept.push(segment);
                }
            }
            segments = kept;
            live.retain(|&n| n > 0);
            for a in &mut at {
                a.0 = renumber[a.0];
            }
        }
        self.window = 0..keys.len();
        self.run = Arc::new(Run::new(keys, at, segments, live));
    }
}

/// The first position at or after `from` whose key is not `below` (`keys`
/// partitioned by `below` from `from` on, as ascending keys are by "below
/// some key"): found by doubling steps from `from`, then halving, so that a
/// position near `from` costs a few comparisons.
fn gallop_by(keys: &[Key], from: usize, below: impl Fn(&Key) -> bool) -> usize {
    let rest = &keys[from..];
    let mut hi = 1;
    while hi <= rest.len() && below(&rest[hi - 1]) {
        hi *= 2;
    }
    let lo = hi / 2;
    let hi = hi.min(rest.len());
    from + lo + rest[lo..hi].partition_point(below)
}

/// A batch's operations (no range deletion) as entries by ascending key,
/// the last operation on a key winning.
fn sorted_batch(ops: Vec<Op>) -> Vec<(Key, Option<Bytes>)> {
    last_of_each(
        ops.into_iter()
            .filter_map(|op| match op {
                Op::Put { key, value } => Some((Key::new(key), Some(value))),
                Op::Delete { key } => Some((Key::new(key), None)),
                Op::DeleteRange { .. } => None,
            })
            .collect(),
    )
}

/// Two streams of distinct keys in one order (`first`: how a key compares
/// to one after it, `Less` ascending) merged into one, `newer`'s entry taken
/// where both hold a key.
fn newest<K: Ord, V>(
    older: impl Iterator<Item = (K, V)>,
    newer: impl Iterator<Item = (K, V)>,
    first: Ordering,
) -> impl Iterator<Item = (K, V)> {
    let mut older = older.peekable();
    let mut newer = newer.peekable();
    std::iter::from_fn(move || {
        let order = match (older.peek(), newer.peek()) {
            (None, None) => return None,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some((a, _)), Some((b, _))) if first == Ordering::Less => a.cmp(b),
            (Some((a, _)), Some((b, _))) => b.cmp(a),
        };
        match order {
            Ordering::Less => older.next(),
            Ordering::Greater => newer.next(),
            Ordering::Equal => {
                older.next();
                newer.next()
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    fn put(key: &[u8], value: u8) -> Op {
        Op::Put {
            key: key.to_vec(),
            value: vec![value].into(),
        }
    }

    #[test]
    fn a_batch_writing_a_key_twice_keeps_the_last_write() {
        let batch = sorted_batch(vec![
            put(b"b", 1),
            put(b"a", 2),
            put(b"b", 3),
            Op::Delete { key: b"a".to_vec() },
            put(b"c", 4),
            Op::Delete { key: b"c".to_vec() },
            put(b"c", 5),
        ]);
        let got: Vec<(Vec<u8>, Option<u8>)> = batch
            .iter()
            .map(|(k, v)| (k.to_vec(), v.as_ref().map(|v| v[0])))
            .collect();
        assert_eq!(
            got,
            vec![
                (b"a".to_vec(), None),
                (b"b".to_vec(), Some(3)),
                (b"c".to_vec(), Some(5))
            ]
        );
    }

    /// Loads `n` values in one batch, deletes every key one commit at a time
    /// in `order`, and returns how many of the deleted values are still held.
    fn held_after_emptying(n: u32, rebuild: Rebuild, order: impl Iterator<Item = u32>) -> usize {
        let mut table = Table::default();
        let values: Vec<Bytes> = (0..n).map(|i| Bytes::from(i.to_be_bytes().to_vec())).collect();
        let weak: Vec<std::sync::Weak<[u8]>> = values.iter().map(Arc::downgrade).collect();
        let load = (0..n)
            .zip(values)
            .map(|(i, value)| Op::Put {
                key: i.to_be_bytes().to_vec(),
                value,
            })
            .collect();
        table.apply(load, rebuild);
        for i in order {
            table.apply(
                vec![Op::Delete {
                    key: i.to_be_bytes().to_vec(),
                }],
                rebuild,
            );
        }
        assert_eq!(table.range(&KeyRange::all(), Direction::Forward).count(), 0);
        assert_eq!(table.gone, 0);
        weak.iter().filter(|w| w.upgrade().is_some()).count()
    }

    /// Values deleted by small commits are let go when the writes are
    /// folded into the run, whether the deletions narrow the run's window
    /// (from the front) or are marked (from the middle out), and with the
    /// default thresholds a run smaller than a bulk batch too.
    #[test]
    fn deleted_values_are_let_go() {
        let middle_out = |n: u32| {
            (0..n).map(move |i| {
                if i % 2 == 0 {
                    n / 2 + i / 2
                } else {
                    n / 2 - 1 - i / 2
                }
            })
        };
        assert_eq!(held_after_emptying(200, Rebuild { bulk: 4 }, 0..200), 0);
        assert_eq!(held_after_emptying(200, Rebuild { bulk: 4 }, middle_out(200)), 0);
        assert_eq!(held_after_emptying(1500, Rebuild::default(), 0..1500), 0);
        assert_eq!(held_after_emptying(1500, Rebuild::default(), middle_out(1500)), 0);
    }

    /// A queue: keys deleted from either end of the run leave no deletion
    /// for a read to step past, and the ends read as the keys left.
    #[test]
    fn deletes_at_the_ends_move_the_window() {
        let rebuild = Rebuild { bulk: 16 };
        let mut table = Table::default();
        let key = |i: u32| i.to_be_bytes().to_vec();
        let load = (0..1000u32).map(|i| put(&key(i), 1)).collect();
        table.apply(load, rebuild);
        for i in 0..300u32 {
            table.apply(vec![Op::Delete { key: key(i) }], rebuild);
            table.apply(vec![Op::Delete { key: key(999 - i) }], rebuild);
        }
        assert_eq!(table.gone, 0);
        assert!(table.delta.is_empty());
        let first = table
            .range(&KeyRange::all(), Direction::Forward)
            .next()
            .map(|(k, _)| k.to_vec());
        let last = table
            .range(&KeyRange::all(), Direction::Reverse)
            .next()
            .map(|(k, _)| k.to_vec());
        assert_eq!((first, last), (Some(key(300)), Some(key(699))));
        assert_eq!(table.count(&KeyRange::all(), usize::MAX), 400);
        assert!(table.get(&key(299)).is_none() && table.get(&key(300)).is_some());
        // A key deleted in the middle is marked; deleting up to it from the
        // front then takes the mark away with it.
        table.apply(vec![Op::Delete { key: key(302) }], rebuild);
        assert_eq!(table.gone, 1);
        table.apply(vec![Op::Delete { key: key(300) }], rebuild);
        table.apply(vec![Op::Delete { key: key(301) }], rebuild);
        assert_eq!((table.gone, table.delta.len()), (0, 0));
        assert_eq!(
            table
                .range(&KeyRange::all(), Direction::Forward)
                .next()
                .map(|(k, _)| k.to_vec()),
            Some(key(303))
        );
    }

    /// A run's lookups narrowed by its heads find what a binary search of
    /// all its keys finds: keys present and absent, before and after the
    /// run, without its shared bytes, sharing a head (equal past 16 bytes)
    /// or a prefix of one another.
    #[test]
    fn heads_narrow_lookups_as_a_binary_search_would() {
        let mut keys: Vec<Vec<u8>> = Vec::new();
        for i in (0u32..3000).step_by(3) {
            keys.push([b"d:".as_slice(), &i.to_be_bytes()].concat());
        }
        for i in 0u8..40 {
            // Equal heads: 16 shared bytes past `d:`, then a difference.
            keys.push([b"d:".as_slice(), &[0xF0; 16], &[i]].concat());
            keys.push([b"d:".as_slice(), &[0xF0; 16], &[i, 1]].concat());
        }
        keys.push(b"d:".to_vec());
        keys.sort();
        keys.dedup();
        let run = Run::new(
            keys.iter().cloned().map(Key::new).collect(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
        );
        assert_eq!(run.skip, 2);
        let mut asked = keys.clone();
        for i in 0u32..3100 {
            asked.push([b"d:".as_slice(), &i.to_be_bytes()].concat());
        }
        asked.extend([
            b"c".to_vec(),
            b"d".to_vec(),
            b"e:".to_vec(),
            [b"d:".as_slice(), &[0xF0; 16]].concat(),
            [b"d:".as_slice(), &[0xF0; 16], &[0]].concat(),
            [b"d:".as_slice(), &[0xF0; 16], &[40]].concat(),
            [b"d:".as_slice(), &[0xFF; 20]].concat(),
        ]);
        for key in &asked {
            let want = keys.binary_search(key);
            assert_eq!(run.find(key), want, "key {key:?}");
        }
    }

    /// Keys short enough to sit inline and long ones (shared), interleaved
    /// in order: a common prefix, then one distinguishing byte.
    fn key() -> impl Strategy<Value = Vec<u8>> {
        (
            0u8..6,
            prop_oneof![Just(1usize), Just(29), Just(30), Just(31), Just(40)],
        )
            .prop_map(|(b, len)| [vec![7; len - 1], vec![b]].concat())
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (key(), any::<u8>()).prop_map(|(k, v)| put(&k, v)),
            2 => key().prop_map(|key| Op::Delete { key }),
            1 => (key(), proptest::option::of(key())).prop_map(|(start, end)| Op::DeleteRange { start, end }),
        ]
    }

    type Model = BTreeMap<Vec<u8>, u8>;

    fn apply_model(model: &mut Model, ops: &[Op]) {
        for op in ops {
            match op {
                Op::Put { key, value } => {
                    model.insert(key.clone(), value[0]);
                }
                Op::Delete { key } => {
                    model.remove(key);
                }
                Op::DeleteRange { start, end } => {
                    let range = KeyRange {
                        start: Some(start.clone()),
                        end: end.clone(),
                    };
                    model.retain(|k, _| !range.contains(k));
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// Whatever mix of rebuilt runs and kept writes the batches leave,
        /// reads answer as a map that took every operation in order, and a
        /// clone taken before a batch keeps answering as before it.
        #[test]
        fn reads_answer_as_a_map_of_every_write(
            batches in proptest::collection::vec(proptest::collection::vec(op(), 0..24), 1..8),
            bulk in 1usize..6,
            (lo, hi, cap) in (key(), key(), 0usize..12),
            lookups in proptest::collection::vec(key(), 0..16),
        ) {
            let mut table = Table::default();
            let mut model = Model::new();
            for ops in batches {
                let before = table.clone();
                let frozen = model.clone();
                apply_model(&mut model, &ops);
                table.apply(ops, Rebuild { bulk });
                prop_assert_eq!(table.gone, table.delta.values().filter(|v| v.is_none()).count());
                // Deletions are marked only inside the window.
                prop_assert!(table.window.start <= table.window.end && table.window.end <= table.run.keys.len());
                for (k, v) in table.delta.iter() {
                    if v.is_none() {
                        let i = table.run.find(k);
                        prop_assert!(i.is_ok_and(|i| table.window.contains(&i)));
                    }
                }
                for (t, m) in [(&table, &model), (&before, &frozen)] {
                    let all: Vec<(Vec<u8>, u8)> = t
                        .range(&KeyRange::all(), Direction::Forward)
                        .map(|(k, v)| (k.to_vec(), v[0]))
                        .collect();
                    let want: Vec<(Vec<u8>, u8)> = m.iter().map(|(k, v)| (k.clone(), *v)).collect();
                    prop_assert_eq!(all, want);
                    let range = KeyRange::new(lo.clone(), hi.clone());
                    let back: Vec<Vec<u8>> = t.range(&range, Direction::Reverse).map(|(k, _)| k.to_vec()).collect();
                    let want: Vec<Vec<u8>> = m.keys().filter(|k| range.contains(k)).rev().cloned().collect();
                    prop_assert_eq!(t.count(&range, cap), want.len().min(cap));
                    prop_assert_eq!(back, want);
                    for b in 0u8..6 {
                        for len in [1usize, 29, 30, 31, 40] {
                            let k = [vec![7; len - 1], vec![b]].concat();
                            prop_assert_eq!(t.get(&k).map(|v| v[0]), m.get(&k).copied());
                        }
                    }
                    // Many at once: ascending (with repeats), and in the
                    // generated order.
                    let mut sorted = lookups.clone();
                    sorted.sort();
                    for asked in [&sorted, &lookups] {
                        let refs: Vec<&[u8]> = asked.iter().map(Vec::as_slice).collect();
                        let got: Vec<Option<u8>> = t.get_many(&refs).into_iter().map(|v| v.map(|v| v[0])).collect();
                        let want: Vec<Option<u8>> = asked.iter().map(|k| m.get(k).copied()).collect();
                        prop_assert_eq!(got, want);
                    }
                }
            }
        }
    }
}
