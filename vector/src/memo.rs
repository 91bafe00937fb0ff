//! [`Memo`]: what searches derived from a generation's rows, kept for later
//! searches of the same rows.
//!
//! A search under a filter that no index answers finds the matching rows by
//! reading documents. Kept here, keyed by a version the caller names (the
//! collection's version as of the search's snapshot), those rows serve
//! every later search at that version as an index's posting list would,
//! and can be brought forward to a later version
//! ([`Memo::latest_before`]). The memo belongs to one generation, so the row ids
//! it holds always name that generation's rows; what a value means, and
//! which versions it holds for, is the caller's business (the cache cannot
//! tell whether a commit changed the documents behind a value).

use std::any::Any;
use std::sync::{Arc, Mutex, PoisonError};

/// Most values a memo keeps.
pub const MEMO_ENTRIES: usize = 64;

/// Most bytes (as reported by [`Memo::put`]'s callers) a memo keeps.
pub const MEMO_BYTES: usize = 64 << 20;

type Value = Arc<dyn Any + Send + Sync>;

#[derive(Clone)]
struct Entry {
    /// The version the value holds at; `None`: any version.
    version: Option<u64>,
    bytes: usize,
    value: Value,
}

/// Values keyed by version, least recently used first out, bounded by
/// [`MEMO_ENTRIES`] and [`MEMO_BYTES`].
#[derive(Default)]
pub struct Memo {
    /// Least recently used first.
    entries: Mutex<Vec<Entry>>,
}

impl std::fmt::Debug for Memo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("Memo")
            .field("entries", &entries.len())
            .field("bytes", &entries.iter().map(|e| e.bytes).sum::<usize>())
            .finish()
    }
}

impl Memo {
    /// The most recently kept value of type `T` at `version` (exactly:
    /// `None` finds only values kept for any version) for which `is` holds,
    /// now the most recently used.
    pub fn get<T: Any + Send + Sync>(&self, version: Option<u64>, is: impl Fn(&T) -> bool) -> Option<Arc<T>> {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let i = entries
            .iter()
            .rposition(|e| e.version == version && e.value.downcast_ref::<T>().is_some_and(&is))?;
        let entry = entries.remove(i);
        let value = Arc::clone(&entry.value);
        entries.push(entry);
        value.downcast::<T>().ok()
    }

    /// The most recently kept value of type `T` at the newest version below
    /// `version` (values kept for any version excluded) for which `is`
    /// holds, with that version: what a caller may bring forward to
    /// `version` (see [`put`](Self::put)). Not marked used: the value
    /// brought forward, kept at `version`, replaces it.
    pub fn latest_before<T: Any + Send + Sync>(
        &self,
        version: u64,
        is: impl Fn(&T) -> bool,
    ) -> Option<(u64, Arc<T>)> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let mut best: Option<(usize, u64)> = None;
        for (i, e) in entries.iter().enumerate() {
            let Some(v) = e.version.filter(|&v| v < version) else {
                continue;
            };
            if best.is_none_or(|(_, b)| v >= b) && e.value.downcast_ref::<T>().is_some_and(&is) {
                best = Some((i, v));
            }
        }
        let (i, v) = best?;
        Arc::clone(&entries[i].value)
            .downcast::<T>()
            .ok()
            .map(|value| (v, value))
    }

    /// Keeps `value`, of `bytes` bytes, for `version` (`None`: any), in place
    /// of the values of type `T` for which `replaces` holds at that version
    /// or an older one (a value brought forward to a newer version replaces
    /// the one it came from). Then the least recently used go, down to the
    /// bounds. A value over [`MEMO_BYTES`] is not kept.
    pub fn put<T: Any + Send + Sync>(
        &self,
        version: Option<u64>,
        bytes: usize,
        value: Arc<T>,
        replaces: impl Fn(&T) -> bool,
    ) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.retain(|e| {
            let at_or_before =
                e.version == version || matches!((e.version, version), (Some(old), Some(new)) if old < new);
            !(at_or_before && e.value.downcast_ref::<T>().is_some_and(&replaces))
        });
        if bytes > MEMO_BYTES {
            return;
        }
        let mut total = entries.iter().map(|e| e.bytes).sum::<usize>() + bytes;
        let mut excess = (entries.len() + 1).saturating_sub(MEMO_ENTRIES);
        let mut drop = 0;
        while drop < entries.len() && (excess > 0 || total > MEMO_BYTES) {
            total -= entries[drop].bytes;
            excess = excess.saturating_sub(1);
            drop += 1;
        }
        entries.drain(..drop);
        entries.push(Entry {
            version,
            bytes,
            value,
        });
    }

    /// Values kept, and their bytes.
    pub fn usage(&self) -> (usize, usize) {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        (entries.len(), entries.iter().map(|e| e.bytes).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_found_at_its_version_and_of_its_type_only() {
        let memo = Memo::default();
        memo.put(Some(3), 8, Arc::new(7u32), |_| true);
        assert_eq!(memo.get::<u32>(Some(3), |v| *v == 7).as_deref(), Some(&7));
        assert!(memo.get::<u32>(Some(4), |_| true).is_none());
        assert!(memo.get::<u32>(None, |_| true).is_none());
        assert!(memo.get::<u64>(Some(3), |_| true).is_none());
        assert!(memo.get::<u32>(Some(3), |v| *v == 8).is_none());
    }

    #[test]
    fn a_newer_version_replaces_what_it_names_at_older_versions_only() {
        let memo = Memo::default();
        memo.put(Some(3), 8, Arc::new(1u32), |_| false);
        memo.put(Some(3), 8, Arc::new(10u32), |_| false);
        memo.put(None, 8, Arc::new(2u32), |_| false);
        memo.put(Some(5), 8, Arc::new(3u32), |v| *v == 1 || *v == 2);
        assert!(memo.get::<u32>(Some(3), |v| *v == 1).is_none());
        assert_eq!(memo.get::<u32>(Some(3), |_| true).as_deref(), Some(&10));
        assert_eq!(memo.get::<u32>(None, |_| true).as_deref(), Some(&2));
        assert_eq!(memo.get::<u32>(Some(5), |_| true).as_deref(), Some(&3));
        // An older reader's value does not push out the newer one.
        memo.put(Some(4), 8, Arc::new(4u32), |_| true);
        assert_eq!(memo.get::<u32>(Some(5), |_| true).as_deref(), Some(&3));
        assert!(memo.get::<u32>(Some(3), |_| true).is_none());
        assert_eq!(memo.usage().0, 3);
    }

    #[test]
    fn the_latest_value_below_a_version_is_found() {
        let memo = Memo::default();
        memo.put(Some(2), 8, Arc::new(20u32), |_| false);
        memo.put(Some(6), 8, Arc::new(60u32), |_| false);
        memo.put(Some(4), 8, Arc::new(40u32), |_| false);
        memo.put(None, 8, Arc::new(0u32), |_| false);
        assert_eq!(
            memo.latest_before::<u32>(7, |_| true).map(|(v, x)| (v, *x)),
            Some((6, 60))
        );
        assert_eq!(
            memo.latest_before::<u32>(6, |_| true).map(|(v, x)| (v, *x)),
            Some((4, 40))
        );
        assert_eq!(
            memo.latest_before::<u32>(7, |x| *x < 50).map(|(v, x)| (v, *x)),
            Some((4, 40))
        );
        assert!(memo.latest_before::<u32>(2, |_| true).is_none());
        assert!(memo.latest_before::<u64>(7, |_| true).is_none());
    }

    #[test]
    fn a_put_replaces_what_it_names_and_the_least_recently_used_go_first() {
        let memo = Memo::default();
        for i in 0..MEMO_ENTRIES as u32 {
            memo.put(Some(1), 1, Arc::new(i), |_| false);
        }
        // 0 used: 1 is now the least recently used.
        assert!(memo.get::<u32>(Some(1), |v| *v == 0).is_some());
        memo.put(Some(1), 1, Arc::new(1000u32), |_| false);
        assert!(memo.get::<u32>(Some(1), |v| *v == 1).is_none());
        assert!(memo.get::<u32>(Some(1), |v| *v == 0).is_some());
        assert_eq!(memo.usage(), (MEMO_ENTRIES, MEMO_ENTRIES));
        memo.put(Some(1), 1, Arc::new(2000u32), |v| *v == 1000);
        assert!(memo.get::<u32>(Some(1), |v| *v == 1000).is_none());
        assert_eq!(memo.usage(), (MEMO_ENTRIES, MEMO_ENTRIES));
    }

    #[test]
    fn bytes_are_bounded() {
        let memo = Memo::default();
        memo.put(Some(1), MEMO_BYTES / 2, Arc::new(1u32), |_| false);
        memo.put(Some(1), MEMO_BYTES / 2, Arc::new(2u32), |_| false);
        memo.put(Some(1), 1, Arc::new(3u32), |_| false);
        assert!(memo.get::<u32>(Some(1), |v| *v == 1).is_none());
        assert_eq!(memo.usage(), (2, MEMO_BYTES / 2 + 1));
        memo.put(Some(1), MEMO_BYTES + 1, Arc::new(4u32), |_| false);
        assert!(memo.get::<u32>(Some(1), |v| *v == 4).is_none());
        assert_eq!(memo.usage(), (2, MEMO_BYTES / 2 + 1));
    }
}
