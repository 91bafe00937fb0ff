//! [`Memo`]: what searches derived from a generation's rows, kept for later
//! searches of the same rows.
//!
//! A search under a filter that no index answers finds the matching rows by
//! reading documents. Kept here, keyed by the version the search read at,
//! those rows serve every later search at that version as an index's
//! posting list would. The memo belongs to one generation, so the row ids
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

    /// Keeps `value`, of `bytes` bytes, for `version` (`None`: any), in place
    /// of the values of type `T` at that version for which `replaces` holds.
    /// Values kept for older versions go first (a reader at such a version
    /// is rare once a newer one asks), then the least recently used, down to
    /// the bounds. A value over [`MEMO_BYTES`] is not kept.
    pub fn put<T: Any + Send + Sync>(
        &self,
        version: Option<u64>,
        bytes: usize,
        value: Arc<T>,
        replaces: impl Fn(&T) -> bool,
    ) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.retain(|e| {
            let same = e.version == version && e.value.downcast_ref::<T>().is_some_and(&replaces);
            let older = matches!((e.version, version), (Some(old), Some(new)) if old < new);
            !same && !older
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
    fn a_newer_version_drops_older_values_but_not_those_for_any_version() {
        let memo = Memo::default();
        memo.put(Some(3), 8, Arc::new(1u32), |_| false);
        memo.put(None, 8, Arc::new(2u32), |_| false);
        memo.put(Some(5), 8, Arc::new(3u32), |_| false);
        assert!(memo.get::<u32>(Some(3), |_| true).is_none());
        assert_eq!(memo.get::<u32>(None, |_| true).as_deref(), Some(&2));
        assert_eq!(memo.get::<u32>(Some(5), |_| true).as_deref(), Some(&3));
        // An older reader's value does not push out the newer one.
        memo.put(Some(4), 8, Arc::new(4u32), |_| false);
        assert_eq!(memo.get::<u32>(Some(5), |_| true).as_deref(), Some(&3));
        assert_eq!(memo.usage().0, 3);
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
