//! The id → row index of one cache generation.
//!
//! Ids are not stored again here: the index maps a 64-bit hash of the id
//! (keyed per generation with `RandomState`, so crafted ids cannot force
//! collisions) to the newest row whose id has that hash, and `prev` chains
//! each row to the previous row with the same hash. A lookup walks the chain
//! newest-first and compares the id bytes stored in the rows, so collisions
//! cost a step, never a wrong answer.
//!
//! Invariants: only committed rows are linked; a row's `prev` is older
//! (smaller) than the row; chains hold an id's retired rows too, until
//! compaction drops them.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};
use std::mem;

/// End-of-chain marker in `prev` and the head map.
const NONE: u32 = u32::MAX;

/// The index's keys are already hashes; this hasher passes them through.
#[derive(Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used by `u64` keys; fold anything else in.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

pub(crate) struct IdIndex {
    hasher: RandomState,
    heads: HashMap<u64, u32, BuildHasherDefault<PassThrough>>,
    prev: Vec<u32>,
}

impl IdIndex {
    pub(crate) fn new() -> Self {
        IdIndex {
            hasher: RandomState::new(),
            heads: HashMap::default(),
            prev: Vec::new(),
        }
    }

    /// The hash under which `id` is indexed.
    pub(crate) fn hash(&self, id: &[u8]) -> u64 {
        self.hasher.hash_one(id)
    }

    /// Rows whose id hashes to `hash`, newest first.
    pub(crate) fn chain(&self, hash: u64) -> impl Iterator<Item = u32> + '_ {
        let mut cur = self.heads.get(&hash).copied().unwrap_or(NONE);
        std::iter::from_fn(move || {
            if cur == NONE {
                return None;
            }
            let row = cur;
            cur = self.prev.get(row as usize).copied().unwrap_or(NONE);
            Some(row)
        })
    }

    /// Makes `row` the newest row for `hash`. Rows must be linked in
    /// increasing order.
    pub(crate) fn link(&mut self, hash: u64, row: u32) {
        let i = row as usize;
        if self.prev.len() <= i {
            self.prev.resize(i + 1, NONE);
        }
        self.prev[i] = self.heads.insert(hash, row).unwrap_or(NONE);
    }

    /// Approximate heap bytes: the hash table's buckets and control bytes,
    /// and the chain vector.
    pub(crate) fn memory_bytes(&self) -> usize {
        let cap = self.heads.capacity();
        let buckets = if cap == 0 {
            0
        } else {
            (cap * 8 / 7).next_power_of_two()
        };
        buckets * (mem::size_of::<(u64, u32)>() + 1) + self.prev.capacity() * mem::size_of::<u32>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_are_newest_first() {
        let mut idx = IdIndex::new();
        let (a, b) = (idx.hash(b"a"), idx.hash(b"b"));
        idx.link(a, 0);
        idx.link(b, 1);
        idx.link(a, 3);
        idx.link(a, 7);
        assert_eq!(idx.chain(a).collect::<Vec<_>>(), vec![7, 3, 0]);
        assert_eq!(idx.chain(b).collect::<Vec<_>>(), vec![1]);
        assert_eq!(idx.chain(idx.hash(b"c")).count(), 0);
        assert!(idx.memory_bytes() > 0);
    }

    #[test]
    fn colliding_hashes_share_a_chain() {
        let mut idx = IdIndex::new();
        idx.link(42, 0);
        idx.link(42, 1);
        assert_eq!(idx.chain(42).collect::<Vec<_>>(), vec![1, 0]);
    }
}
