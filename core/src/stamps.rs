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
//! `v` finds every commit at or below `v` recorded. Each column family keeps
//! its last [`HISTORY`] commits; a snapshot older than them is told its own
//! version, which is always a correct key (the collection's state at `v` is
//! the state at `v`), only never shared with other versions. A collection
//! dropped and created again under its name continues its column family's
//! history: values derived from it live in its own vector caches, which
//! only readers at or after its creation reach.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, OnceLock, PoisonError};

/// Commits remembered per column family.
pub(crate) const HISTORY: usize = 64;

/// Recent commit versions per column family, since the store was opened.
#[derive(Debug, Default)]
pub(crate) struct Stamps {
    /// The store's version when the first `Database` over it opened: no
    /// commit through it is older.
    start: OnceLock<u64>,
    /// Per column family, ascending: the oldest version still known to be a
    /// change point (`start` until commits push it out), then the versions
    /// of the commits since that wrote to it.
    by_cf: Mutex<HashMap<String, VecDeque<u64>>>,
}

impl Stamps {
    /// Sets the version the history starts at (once: a later call, from
    /// another `Database` opened over the same store, changes nothing).
    pub(crate) fn begin(&self, version: u64) {
        let _ = self.start.set(version);
    }

    /// Records a commit at `version` that wrote to column families `cfs`.
    /// Called in the writer's turn, before the version is published.
    pub(crate) fn record<'a>(&self, cfs: impl Iterator<Item = &'a str>, version: u64) {
        let Some(&start) = self.start.get() else {
            return;
        };
        let mut by_cf = self.by_cf.lock().unwrap_or_else(PoisonError::into_inner);
        for cf in cfs {
            let history = by_cf
                .entry(cf.to_owned())
                .or_insert_with(|| VecDeque::from([start]));
            if history.back() != Some(&version) {
                history.push_back(version);
            }
            if history.len() > HISTORY {
                history.pop_front();
            }
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
        let by_cf = self.by_cf.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(history) = by_cf.get(cf) else {
            return start;
        };
        // Ascending: the commits at or below `version` come first.
        let at_or_below = history.partition_point(|&v| v <= version);
        match at_or_below {
            0 => version,
            n => history[n - 1],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_is_told_the_last_commit_to_its_column_family() {
        let stamps = Stamps::default();
        // Nothing is known before the history starts.
        stamps.record(["a"].into_iter(), 3);
        assert_eq!(stamps.changed_at("a", 3), 3);
        stamps.begin(5);
        stamps.begin(9); // a second open changes nothing
        assert_eq!(stamps.changed_at("a", 7), 5, "no commit to a since the start");
        assert_eq!(
            stamps.changed_at("a", 4),
            4,
            "older than the start: its own version"
        );
        stamps.record(["a", "b"].into_iter(), 6);
        stamps.record(["b"].into_iter(), 7);
        stamps.record(["a"].into_iter(), 9);
        assert_eq!(stamps.changed_at("a", 5), 5);
        assert_eq!(stamps.changed_at("a", 6), 6);
        assert_eq!(stamps.changed_at("a", 8), 6, "the commit at 7 did not write to a");
        assert_eq!(stamps.changed_at("a", 9), 9);
        assert_eq!(stamps.changed_at("a", 12), 9);
        assert_eq!(stamps.changed_at("b", 8), 7);
        assert_eq!(stamps.changed_at("c", 12), 5);
    }

    #[test]
    fn a_snapshot_older_than_the_history_is_told_its_own_version() {
        let stamps = Stamps::default();
        stamps.begin(0);
        for v in 1..=(HISTORY as u64 + 10) {
            stamps.record(["a"].into_iter(), v * 2);
        }
        let newest = (HISTORY as u64 + 10) * 2;
        assert_eq!(stamps.changed_at("a", newest + 1), newest);
        // The oldest kept commit is 22: below it, nothing is known.
        let oldest = newest - 2 * (HISTORY as u64 - 1);
        assert_eq!(stamps.changed_at("a", oldest + 1), oldest);
        assert_eq!(stamps.changed_at("a", oldest - 1), oldest - 1);
        assert_eq!(stamps.changed_at("a", 3), 3);
    }
}
