//! The versions of recent commits to each column family, so that a reader
//! can tell the version at which a collection last changed as of its
//! snapshot.
//!
//! What a search derives from a collection's documents (the matching rows of
//! a filter no index narrows) holds for every snapshot at which those
//! documents are the same. A commit to another collection moves readers to a
//! newer version without changing them: keyed by [`Stamps::changed_at`]
//! rather than by the snapshot's version, such a value outlives commits that
//! do not touch its collection.
//!
//! [`TrackedStore`](crate::readers::TrackedStore) records every batch's
//! column families before its version is published, so a snapshot at version
//! `v` finds every commit at or below `v` recorded. Only commits through a
//! `Database` are recorded: a collection's column family written to through
//! the bare store would leave values derived from it in use. Each column family keeps
//! its last [`HISTORY`] commits; a snapshot older than them is told its own
//! version, which is always a correct key (the collection's state at `v` is
//! the state at `v`), only never shared with other versions. A collection
//! dropped and created again under its name continues its column family's
//! history: values derived from it live in its own vector caches, which
//! only readers at or after its creation reach.
//!
//! A commit of at most [`MAX_KEYS`] keys to a column family is remembered
//! with those keys ([`Stamps::changes`]), so that a value derived at one
//! version can be brought forward to a later one by looking again at just
//! the documents written in between. The keys of a column family's history
//! are bounded by [`MAX_KEY_BYTES`]; the oldest lists go first.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, OnceLock, PoisonError, RwLock};

use crate::store::{Batch, Op};

/// Commits remembered per column family.
pub(crate) const HISTORY: usize = 64;

/// The most keys of one column family a commit is remembered with; a larger
/// commit is remembered without them.
pub const MAX_KEYS: usize = 4096;

/// The most bytes of keys (with 4 bytes of bookkeeping each) a column
/// family's history holds.
pub const MAX_KEY_BYTES: usize = 1 << 20;

/// The keys one commit wrote (put or deleted) in one column family, in one
/// buffer.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct KeyList {
    bytes: Vec<u8>,
    /// Where each key ends in `bytes`.
    ends: Vec<u32>,
}

impl KeyList {
    /// The list of `keys`, in order.
    pub fn new<'a>(keys: impl Iterator<Item = &'a [u8]> + Clone) -> Self {
        let (n, total) = keys.clone().fold((0, 0), |(n, t), k| (n + 1, t + k.len()));
        let mut list = Self {
            bytes: Vec::with_capacity(total),
            ends: Vec::with_capacity(n),
        };
        for key in keys {
            list.bytes.extend_from_slice(key);
            list.ends
                .push(u32::try_from(list.bytes.len()).unwrap_or(u32::MAX));
        }
        list
    }

    /// The keys, in order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        let mut start = 0;
        self.ends.iter().map(move |&end| {
            let key = &self.bytes[start..end as usize];
            start = end as usize;
            key
        })
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Bytes held, counted against [`MAX_KEY_BYTES`].
    fn held(&self) -> usize {
        self.bytes.len() + 4 * self.ends.len()
    }
}

/// A commit's keys in one column family, shared with readers.
pub type Keys = Arc<KeyList>;

/// One commit to a column family: its version and, unless it wrote more
/// than [`MAX_KEYS`] or deleted a range, its keys.
#[derive(Debug)]
struct Commit {
    version: u64,
    keys: Option<Keys>,
}

fn key_bytes(c: &Commit) -> usize {
    c.keys.as_ref().map_or(0, |k| k.held())
}

/// Recent commit versions per column family, since the store was opened.
#[derive(Debug, Default)]
pub(crate) struct Stamps {
    /// The store's version when the first `Database` over it opened: no
    /// commit through it is older.
    start: OnceLock<u64>,
    /// Per column family, ascending by version: the oldest version since
    /// which every commit is listed (`start` until commits push it out;
    /// its keys are never read), then the commits since that wrote to it.
    by_cf: RwLock<HashMap<String, VecDeque<Commit>>>,
}

impl Stamps {
    /// Sets the version the history starts at (once: a later call, from
    /// another `Database` opened over the same store, changes nothing).
    pub(crate) fn begin(&self, version: u64) {
        let _ = self.start.set(version);
    }

    /// What [`record`](Self::record) takes of `batch`: per column family,
    /// its keys when it wrote at most [`MAX_KEYS`] and deleted no range.
    pub(crate) fn keys_of(batch: &Batch) -> Vec<(String, Option<Keys>)> {
        batch
            .ops
            .iter()
            .map(|(cf, ops)| {
                // None for a range delete, or past the bounds.
                let keys = (ops.len() <= MAX_KEYS)
                    .then(|| {
                        ops.iter()
                            .map(|op| match op {
                                Op::Put { key, .. } | Op::Delete { key } => Some(key.as_slice()),
                                Op::DeleteRange { .. } => None,
                            })
                            .collect::<Option<Vec<&[u8]>>>()
                    })
                    .flatten()
                    .map(|keys| KeyList::new(keys.into_iter()))
                    .filter(|list| list.held() <= MAX_KEY_BYTES)
                    .map(Arc::new);
                (cf.clone(), keys)
            })
            .collect()
    }

    /// Records a commit at `version` that wrote `keys` (from
    /// [`keys_of`](Self::keys_of)) to their column families. Called in the
    /// writer's turn, before the version is published.
    pub(crate) fn record(&self, keys: &[(String, Option<Keys>)], version: u64) {
        let Some(&start) = self.start.get() else {
            return;
        };
        let mut by_cf = self.by_cf.write().unwrap_or_else(PoisonError::into_inner);
        for (cf, keys) in keys {
            let history = by_cf.entry(cf.clone()).or_insert_with(|| {
                VecDeque::from([Commit {
                    version: start,
                    keys: None,
                }])
            });
            match history.back_mut() {
                // Two batches at one version (never made by a store here):
                // one commit, whose keys are known only if both are.
                Some(last) if last.version == version => {
                    last.keys = None;
                }
                _ => history.push_back(Commit {
                    version,
                    keys: keys.clone(),
                }),
            }
            if history.len() > HISTORY {
                history.pop_front();
            }
            // Past the byte bound, the oldest lists go (their commits stay
            // change points, their keys unknown).
            let mut bytes: usize = history.iter().map(key_bytes).sum();
            for commit in history.iter_mut() {
                if bytes <= MAX_KEY_BYTES {
                    break;
                }
                bytes -= key_bytes(commit);
                commit.keys = None;
            }
        }
    }

    /// Forgets the keys of the commits to `cf` (dropped: nothing reads them
    /// again), keeping their versions, which readers of its last state may
    /// still ask [`changed_at`](Self::changed_at) about.
    pub(crate) fn forget_keys(&self, cf: &str) {
        let mut by_cf = self.by_cf.write().unwrap_or_else(PoisonError::into_inner);
        for commit in by_cf.get_mut(cf).into_iter().flatten() {
            commit.keys = None;
        }
    }

    /// The version of the last commit at or below `version` that wrote to
    /// column family `cf`, or the history's start when none did: a snapshot
    /// at `version` reads the same data in `cf` as one at the version
    /// returned. `version` itself when the history does not reach back to
    /// it.
    pub(crate) fn changed_at(&self, cf: &str, version: u64) -> u64 {
        let Some(&start) = self.start.get() else {
            return version;
        };
        if version < start {
            return version;
        }
        let by_cf = self.by_cf.read().unwrap_or_else(PoisonError::into_inner);
        let Some(history) = by_cf.get(cf) else {
            return start;
        };
        // Ascending: the commits at or below `version` come first.
        let at_or_below = history.partition_point(|c| c.version <= version);
        match at_or_below {
            0 => version,
            n => history[n - 1].version,
        }
    }

    /// The keys the commits to `cf` after version `from`, up to `to`, wrote:
    /// one list a commit (a key may be in several). `None` when the history
    /// does not reach back to `from` or one of those commits was
    /// remembered without its keys.
    pub(crate) fn changes(&self, cf: &str, from: u64, to: u64) -> Option<Vec<Keys>> {
        let &start = self.start.get()?;
        if from < start {
            return None;
        }
        let by_cf = self.by_cf.read().unwrap_or_else(PoisonError::into_inner);
        let Some(history) = by_cf.get(cf) else {
            // No commit to `cf` since the start.
            return Some(Vec::new());
        };
        if history.front().is_none_or(|floor| floor.version > from) {
            return None;
        }
        history
            .iter()
            .filter(|c| from < c.version && c.version <= to)
            .map(|c| c.keys.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records a commit writing `keys` (as text) to each of `cfs`.
    fn commit(stamps: &Stamps, cfs: &[&str], keys: &[&str], version: u64) {
        let keys: Keys = Arc::new(KeyList::new(keys.iter().map(|k| k.as_bytes())));
        let cfs: Vec<(String, Option<Keys>)> = cfs
            .iter()
            .map(|cf| (cf.to_string(), Some(keys.clone())))
            .collect();
        stamps.record(&cfs, version);
    }

    fn texts(lists: Option<Vec<Keys>>) -> Option<Vec<Vec<String>>> {
        lists.map(|lists| {
            lists
                .iter()
                .map(|keys| {
                    keys.iter()
                        .map(|k| String::from_utf8_lossy(k).into_owned())
                        .collect()
                })
                .collect()
        })
    }

    #[test]
    fn a_snapshot_is_told_the_last_commit_to_its_column_family() {
        let stamps = Stamps::default();
        // Nothing is known before the history starts.
        commit(&stamps, &["a"], &[], 3);
        assert_eq!(stamps.changed_at("a", 3), 3);
        assert_eq!(stamps.changes("a", 3, 4), None);
        stamps.begin(5);
        stamps.begin(9); // a second open changes nothing
        assert_eq!(stamps.changed_at("a", 7), 5, "no commit to a since the start");
        assert_eq!(
            stamps.changed_at("a", 4),
            4,
            "older than the start: its own version"
        );
        commit(&stamps, &["a", "b"], &["x"], 6);
        commit(&stamps, &["b"], &["y"], 7);
        commit(&stamps, &["a"], &["z", "x"], 9);
        assert_eq!(stamps.changed_at("a", 5), 5);
        assert_eq!(stamps.changed_at("a", 6), 6);
        assert_eq!(stamps.changed_at("a", 8), 6, "the commit at 7 did not write to a");
        assert_eq!(stamps.changed_at("a", 9), 9);
        assert_eq!(stamps.changed_at("a", 12), 9);
        assert_eq!(stamps.changed_at("b", 8), 7);
        assert_eq!(stamps.changed_at("c", 12), 5);
        // The keys written in between.
        assert_eq!(
            texts(stamps.changes("a", 5, 9)),
            Some(vec![vec!["x".into()], vec!["z".into(), "x".into()]])
        );
        assert_eq!(texts(stamps.changes("a", 6, 8)), Some(vec![]));
        assert_eq!(
            texts(stamps.changes("a", 6, 9)),
            Some(vec![vec!["z".into(), "x".into()]])
        );
        assert_eq!(texts(stamps.changes("b", 6, 9)), Some(vec![vec!["y".into()]]));
        assert_eq!(texts(stamps.changes("c", 5, 9)), Some(vec![]));
        assert_eq!(stamps.changes("a", 4, 9), None, "from before the start");
        // A commit remembered without its keys.
        stamps.record(&[("a".into(), None)], 10);
        assert_eq!(stamps.changes("a", 9, 10), None);
        assert_eq!(stamps.changes("a", 6, 9).map(|l| l.len()), Some(1));
        assert_eq!(stamps.changed_at("a", 10), 10);
        // A dropped column family's keys are forgotten, its versions not.
        stamps.forget_keys("b");
        assert_eq!(stamps.changes("b", 6, 9), None);
        assert_eq!(stamps.changed_at("b", 8), 7);
    }

    #[test]
    fn a_snapshot_older_than_the_history_is_told_its_own_version() {
        let stamps = Stamps::default();
        stamps.begin(0);
        for v in 1..=(HISTORY as u64 + 10) {
            commit(&stamps, &["a"], &["k"], v * 2);
        }
        let newest = (HISTORY as u64 + 10) * 2;
        assert_eq!(stamps.changed_at("a", newest + 1), newest);
        // Below the oldest kept commit, nothing is known.
        let oldest = newest - 2 * (HISTORY as u64 - 1);
        assert_eq!(stamps.changed_at("a", oldest + 1), oldest);
        assert_eq!(stamps.changed_at("a", oldest - 1), oldest - 1);
        assert_eq!(stamps.changed_at("a", 3), 3);
        assert_eq!(
            stamps.changes("a", oldest, newest).map(|l| l.len()),
            Some(HISTORY - 1)
        );
        assert_eq!(stamps.changes("a", oldest - 1, newest), None);
    }

    #[test]
    fn large_commits_are_remembered_without_their_keys() {
        let stamps = Stamps::default();
        stamps.begin(0);
        let mut batch = Batch::default();
        let put = |i: usize| Op::Put {
            key: i.to_le_bytes().to_vec(),
            value: Arc::from(&b"v"[..]),
        };
        batch.ops.push(("small".into(), (0..MAX_KEYS).map(put).collect()));
        batch
            .ops
            .push(("large".into(), (0..=MAX_KEYS).map(put).collect()));
        batch.ops.push((
            "ranged".into(),
            vec![
                put(1),
                Op::DeleteRange {
                    start: vec![0],
                    end: None,
                },
            ],
        ));
        stamps.record(&Stamps::keys_of(&batch), 1);
        assert_eq!(stamps.changes("small", 0, 1).map(|l| l[0].len()), Some(MAX_KEYS));
        assert_eq!(stamps.changes("large", 0, 1), None);
        assert_eq!(stamps.changes("ranged", 0, 1), None);
        // Past the byte bound, the oldest lists are forgotten.
        let key = "k".repeat(64);
        let big: Vec<&str> = vec![key.as_str(); MAX_KEYS];
        let per_commit = (64 + 4) * MAX_KEYS;
        let fit = MAX_KEY_BYTES / per_commit;
        for v in 2..(2 + fit as u64 + 1) {
            commit(&stamps, &["b"], &big, v);
        }
        let last = 2 + fit as u64;
        assert_eq!(
            stamps.changes("b", last - fit as u64, last).map(|l| l.len()),
            Some(fit)
        );
        assert_eq!(stamps.changes("b", 1, last), None);
        assert_eq!(stamps.changed_at("b", last), last);
    }
}
