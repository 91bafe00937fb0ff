//! Intervals of encoded values: what an index can answer of a predicate.

use slate_core::value::{bracket, encode_value};

/// One end of an interval: an encoded value and whether it is included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bound {
    /// The encoded value (a self-delimiting prefix of index keys).
    pub value: Vec<u8>,
    /// Whether keys equal to `value` are inside.
    pub inclusive: bool,
}

/// An interval of encoded values; `None` is unbounded on that side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interval {
    /// Lower end.
    pub lo: Option<Bound>,
    /// Upper end.
    pub hi: Option<Bound>,
}

impl Interval {
    /// Exactly the value `v`.
    pub fn point(v: bson::RawBsonRef<'_>) -> Self {
        let mut e = Vec::new();
        encode_value(v, &mut e);
        Self {
            lo: Some(Bound { value: e.clone(), inclusive: true }),
            hi: Some(Bound { value: e, inclusive: true }),
        }
    }

    /// Values of `v`'s type bracket above (or from, if `inclusive`) `v`:
    /// comparisons never cross type brackets.
    pub fn above(v: bson::RawBsonRef<'_>, inclusive: bool) -> Self {
        let mut e = Vec::new();
        encode_value(v, &mut e);
        let tag = bracket(v).tag();
        Self {
            lo: Some(Bound { value: e, inclusive }),
            hi: Some(Bound { value: vec![tag + 1], inclusive: false }),
        }
    }

    /// Values of `v`'s type bracket below (or up to, if `inclusive`) `v`.
    pub fn below(v: bson::RawBsonRef<'_>, inclusive: bool) -> Self {
        let mut e = Vec::new();
        encode_value(v, &mut e);
        let tag = bracket(v).tag();
        Self {
            lo: Some(Bound { value: vec![tag], inclusive: true }),
            hi: Some(Bound { value: e, inclusive }),
        }
    }

    /// The intersection of two intervals (`None` when provably empty is not
    /// attempted: an empty intersection simply scans nothing).
    pub fn intersect(&self, other: &Interval) -> Interval {
        let lo = match (&self.lo, &other.lo) {
            (None, b) | (b, None) => b.clone(),
            (Some(a), Some(b)) => Some(match a.value.cmp(&b.value) {
                std::cmp::Ordering::Greater => a.clone(),
                std::cmp::Ordering::Less => b.clone(),
                std::cmp::Ordering::Equal => Bound { value: a.value.clone(), inclusive: a.inclusive && b.inclusive },
            }),
        };
        let hi = match (&self.hi, &other.hi) {
            (None, b) | (b, None) => b.clone(),
            (Some(a), Some(b)) => Some(match a.value.cmp(&b.value) {
                std::cmp::Ordering::Less => a.clone(),
                std::cmp::Ordering::Greater => b.clone(),
                std::cmp::Ordering::Equal => Bound { value: a.value.clone(), inclusive: a.inclusive && b.inclusive },
            }),
        };
        Interval { lo, hi }
    }

    /// The bounds as `keys::index_value_range` takes them.
    pub fn as_range(&self) -> (Option<(&[u8], bool)>, Option<(&[u8], bool)>) {
        (
            self.lo.as_ref().map(|b| (b.value.as_slice(), b.inclusive)),
            self.hi.as_ref().map(|b| (b.value.as_slice(), b.inclusive)),
        )
    }
}

/// What an index on `field` can answer of one conjunct of the filter: the
/// documents matching the conjunct all have an entry in one of `intervals`.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexPredicate {
    /// The dot path.
    pub field: String,
    /// A document matching the conjunct has an index entry in one of these.
    pub intervals: Vec<Interval>,
}
