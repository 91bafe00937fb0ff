//! Row addressing: [`RowId`] and the [`RowMask`] bitset.

/// Position of a row in one cache generation.
///
/// Row ids are only meaningful together with the [`CacheView`](crate::CacheView)
/// they came from: compaction renumbers rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RowId(pub u32);

impl RowId {
    /// The row's index as a `usize`.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

/// A set of rows as a bitset, for the bitmap-scan strategy.
///
/// Invariant: bits at positions `>= len` are zero.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RowMask {
    words: Vec<u64>,
    len: usize,
}

impl RowMask {
    /// An empty mask covering rows `0..len`.
    pub fn new(len: usize) -> Self {
        RowMask {
            words: vec![0; len.div_ceil(64)],
            len,
        }
    }

    /// Number of rows covered (set or not).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the mask covers no rows at all.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds `row`, growing the mask if it lies beyond [`len`](Self::len).
    pub fn set(&mut self, row: RowId) {
        let i = row.index();
        if i >= self.len {
            self.len = i + 1;
            self.words.resize(self.len.div_ceil(64), 0);
        }
        self.words[i / 64] |= 1 << (i % 64);
    }

    /// Removes `row` (no-op beyond [`len`](Self::len)).
    pub fn unset(&mut self, row: RowId) {
        let i = row.index();
        if let Some(w) = self.words.get_mut(i / 64) {
            *w &= !(1 << (i % 64));
        }
    }

    /// Whether `row` is in the mask; rows beyond [`len`](Self::len) are not.
    pub fn contains(&self, row: RowId) -> bool {
        let i = row.index();
        self.words.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    /// Number of rows in the mask.
    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The rows in the mask, ascending.
    pub fn iter(&self) -> impl Iterator<Item = RowId> + '_ {
        self.words.iter().enumerate().flat_map(|(wi, &w)| {
            let mut bits = w;
            std::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let b = bits.trailing_zeros();
                bits &= bits - 1;
                // wi * 64 + b < len <= u32::MAX + 1 because every set bit came from a RowId.
                Some(RowId((wi * 64) as u32 + b))
            })
        })
    }

    /// Keeps only the rows also in `other`.
    pub fn intersect(&mut self, other: &RowMask) {
        for (i, w) in self.words.iter_mut().enumerate() {
            *w &= other.words.get(i).copied().unwrap_or(0);
        }
    }

    /// Adds every row of `other` (growing to cover its rows).
    pub fn union(&mut self, other: &RowMask) {
        if other.len > self.len {
            self.len = other.len;
            self.words.resize(other.words.len(), 0);
        }
        for (w, o) in self.words.iter_mut().zip(&other.words) {
            *w |= o;
        }
    }

    /// Calls `f` with each row of the mask within `range`, ascending.
    pub fn for_each_in(&self, range: std::ops::Range<usize>, mut f: impl FnMut(usize)) {
        let end = range.end.min(self.len);
        if range.start >= end {
            return;
        }
        for wi in range.start / 64..end.div_ceil(64) {
            let mut bits = self.words[wi];
            let lo = wi * 64;
            if lo < range.start {
                bits &= !0u64 << (range.start - lo);
            }
            if lo + 64 > end {
                bits &= !0u64 >> (lo + 64 - end);
            }
            while bits != 0 {
                f(lo + bits.trailing_zeros() as usize);
                bits &= bits - 1;
            }
        }
    }

    /// Appends the rows in the mask to `out`, ascending: what
    /// [`iter`](Self::iter) yields, in one tight loop over the words.
    pub fn extend_rows(&self, out: &mut Vec<RowId>) {
        // Every set bit came from a RowId, so each index fits a u32.
        self.for_each_in(0..self.len, |i| out.push(RowId(i as u32)));
    }
}

impl FromIterator<RowId> for RowMask {
    fn from_iter<T: IntoIterator<Item = RowId>>(iter: T) -> Self {
        let mut mask = RowMask::default();
        for row in iter {
            mask.set(row);
        }
        mask
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_contains_count() {
        let mut m = RowMask::new(100);
        assert_eq!(m.len(), 100);
        assert_eq!(m.count(), 0);
        for r in [0, 5, 63, 64, 99] {
            m.set(RowId(r));
        }
        assert!(m.contains(RowId(63)) && m.contains(RowId(64)) && !m.contains(RowId(62)));
        assert!(!m.contains(RowId(1000)));
        assert_eq!(m.count(), 5);
        m.unset(RowId(5));
        m.unset(RowId(5000));
        assert_eq!(m.count(), 4);
        m.set(RowId(200));
        assert_eq!(m.len(), 201);
        assert_eq!(
            m.iter().collect::<Vec<_>>(),
            [0, 63, 64, 99, 200].map(RowId).to_vec()
        );
        let mut rows = vec![RowId(7)];
        m.extend_rows(&mut rows);
        assert_eq!(rows, [7, 0, 63, 64, 99, 200].map(RowId).to_vec());
        let n: RowMask = [RowId(3), RowId(1)].into_iter().collect();
        // Ranges within a word, across words, past the end, and empty.
        let ranged = |r: std::ops::Range<usize>| {
            let mut out = Vec::new();
            m.for_each_in(r, |i| out.push(i));
            out
        };
        assert_eq!(ranged(0..1000), [0, 63, 64, 99, 200]);
        assert_eq!(ranged(1..64), [63]);
        assert_eq!(ranged(63..65), [63, 64]);
        assert_eq!(ranged(64..200), [64, 99]);
        assert_eq!(ranged(65..201), [99, 200]);
        assert_eq!(ranged(150..150), Vec::<usize>::new());
        assert_eq!(ranged(300..400), Vec::<usize>::new());
        let wide: RowMask = [RowId(1), RowId(64), RowId(300)].into_iter().collect();
        let mut both = n.clone();
        both.intersect(&wide);
        assert_eq!(both.iter().collect::<Vec<_>>(), [RowId(1)]);
        let mut either = n.clone();
        either.union(&wide);
        assert_eq!(either.len(), 301);
        assert_eq!(
            either.iter().collect::<Vec<_>>(),
            [1, 3, 64, 300].map(RowId).to_vec()
        );
        let mut narrow = wide.clone();
        narrow.intersect(&n);
        assert_eq!(narrow.iter().collect::<Vec<_>>(), [RowId(1)]);
        assert_eq!(n.iter().collect::<Vec<_>>(), vec![RowId(1), RowId(3)]);
        assert!(RowMask::new(0).is_empty());
    }
}
