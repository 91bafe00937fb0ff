//! Key ranges and iteration direction.

use std::ops::Bound;

/// Iteration order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Direction {
    /// Ascending key order.
    #[default]
    Forward,
    /// Descending key order.
    Reverse,
}

/// A half-open key range `[start, end)`; `None` is unbounded on that side.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KeyRange {
    /// Inclusive lower bound.
    pub start: Option<Vec<u8>>,
    /// Exclusive upper bound.
    pub end: Option<Vec<u8>>,
}

impl KeyRange {
    /// Every key.
    pub fn all() -> Self {
        Self::default()
    }

    /// `[start, end)`.
    pub fn new(start: impl Into<Vec<u8>>, end: impl Into<Vec<u8>>) -> Self {
        Self {
            start: Some(start.into()),
            end: Some(end.into()),
        }
    }

    /// Every key that starts with `prefix`.
    pub fn prefix(prefix: &[u8]) -> Self {
        Self {
            start: Some(prefix.to_vec()),
            end: prefix_end(prefix),
        }
    }

    /// Whether `key` lies in the range.
    pub fn contains(&self, key: &[u8]) -> bool {
        self.start.as_deref().is_none_or(|s| key >= s) && self.end.as_deref().is_none_or(|e| key < e)
    }

    /// The range as a pair of `Bound`s over byte slices.
    pub fn bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (
            self.start.as_deref().map_or(Bound::Unbounded, Bound::Included),
            self.end.as_deref().map_or(Bound::Unbounded, Bound::Excluded),
        )
    }

    /// Whether no key can lie in the range.
    pub fn is_empty(&self) -> bool {
        matches!((&self.start, &self.end), (Some(s), Some(e)) if s >= e)
    }
}

/// The smallest key greater than every key starting with `prefix`, or `None`
/// when there is none (the prefix is empty or all `0xff`).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_range_covers_exactly_the_prefix() {
        let r = KeyRange::prefix(b"ab");
        assert!(r.contains(b"ab"));
        assert!(r.contains(b"ab\xff\xff"));
        assert!(!r.contains(b"ac"));
        assert!(!r.contains(b"aa\xff"));
        let r = KeyRange::prefix(b"a\xff");
        assert_eq!(r.end.as_deref(), Some(&b"b"[..]));
        assert_eq!(KeyRange::prefix(b"\xff\xff").end, None);
    }

    #[test]
    fn empty_ranges() {
        assert!(KeyRange::new(b"b".to_vec(), b"a".to_vec()).is_empty());
        assert!(KeyRange::new(b"a".to_vec(), b"a".to_vec()).is_empty());
        assert!(!KeyRange::all().is_empty());
    }
}
