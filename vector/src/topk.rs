//! Bounded top-k selection: a max-heap of the k best candidates seen so far.
//!
//! Candidates are totally ordered by `(distance, id bytes, row)`: distances
//! via [`OrderedFloat`] (NaN sorts last), ties broken by the smaller id. The
//! worst kept candidate sits on top of the heap, so deciding whether a new
//! one enters is one comparison.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU32, Ordering as AtomicOrdering};

use ordered_float::OrderedFloat;

use crate::error::{Error, Result};
use crate::row::RowId;

/// Most capacity reserved up front, whatever k is (k may be huge).
const MAX_PREALLOC: usize = 1024;

/// One search result in the making; `id` borrows from the scanned view.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    /// Distance to the query (smaller is nearer).
    pub distance: f32,
    /// The row's id bytes.
    pub id: &'a [u8],
    /// The row.
    pub row: RowId,
}

impl Candidate<'_> {
    fn key(&self) -> (OrderedFloat<f32>, &[u8], RowId) {
        (OrderedFloat(self.distance), self.id, self.row)
    }
}

impl Ord for Candidate<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

impl PartialOrd for Candidate<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Candidate<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Candidate<'_> {}

/// The k best candidates pushed so far.
///
/// Invariant: `len() <= k`, and the heap holds the k smallest candidates
/// pushed (under the total order above), whatever the push order.
#[derive(Debug, Clone)]
pub struct TopK<'a> {
    k: NonZeroUsize,
    heap: BinaryHeap<Candidate<'a>>,
}

impl<'a> TopK<'a> {
    /// An empty selection of at most `k` candidates; `k = 0` is
    /// [`Error::ZeroK`].
    pub fn new(k: usize) -> Result<Self> {
        NonZeroUsize::new(k).map(Self::with_k).ok_or(Error::ZeroK)
    }

    pub(crate) fn with_k(k: NonZeroUsize) -> Self {
        TopK {
            k,
            heap: BinaryHeap::with_capacity(k.get().min(MAX_PREALLOC)),
        }
    }

    /// The bound k.
    pub fn k(&self) -> usize {
        self.k.get()
    }

    /// Candidates held (at most k).
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether nothing was kept yet.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// The worst candidate kept, the one a better candidate would evict.
    pub fn worst(&self) -> Option<&Candidate<'a>> {
        self.heap.peek()
    }

    /// A distance above which no candidate can enter now: the worst kept
    /// distance once k are held, `+inf` before (NaN when the worst is NaN,
    /// which every comparison fails, so NaN bounds reject nothing). A
    /// candidate *at* the bound may still enter on its id, so callers skip
    /// only `distance > bound`.
    #[inline]
    pub fn bound(&self) -> f32 {
        match self.heap.peek() {
            Some(worst) if self.heap.len() >= self.k.get() => worst.distance,
            _ => f32::INFINITY,
        }
    }

    /// Whether a candidate at `distance` with `id` would be kept by
    /// [`push`](Self::push) now. Lets a caller check a filter only for rows
    /// that matter.
    #[inline]
    pub fn would_enter(&self, distance: f32, id: &[u8]) -> bool {
        match self.heap.peek() {
            Some(worst) if self.heap.len() >= self.k.get() => {
                (OrderedFloat(distance), id) < (OrderedFloat(worst.distance), worst.id)
            }
            _ => true,
        }
    }

    /// Offers a candidate; returns whether it was kept.
    #[inline]
    pub fn push(&mut self, distance: f32, id: &'a [u8], row: RowId) -> bool {
        self.push_candidate(Candidate { distance, id, row })
    }

    /// Offers a candidate; returns whether it was kept.
    #[inline]
    pub fn push_candidate(&mut self, candidate: Candidate<'a>) -> bool {
        if self.heap.len() < self.k.get() {
            self.heap.push(candidate);
            return true;
        }
        match self.heap.peek_mut() {
            Some(mut worst) if candidate < *worst => {
                // Replacing through `PeekMut` sifts the new top down on drop.
                *worst = candidate;
                true
            }
            _ => false,
        }
    }

    /// Offers every candidate of `other`.
    pub fn merge(&mut self, other: TopK<'a>) {
        for c in other.heap {
            self.push_candidate(c);
        }
    }

    /// The kept candidates, best first.
    pub fn into_sorted_vec(self) -> Vec<Candidate<'a>> {
        self.heap.into_sorted_vec()
    }
}

/// The smallest bound of any full top-k among the parallel tasks of one
/// scan, shared so that a task skips a row that some other task's heap
/// already rules out.
///
/// Exact: a published bound `b` is the worst of k kept candidates, each of
/// which passed every filter; a row at a distance above `b` is therefore
/// worse than k matching rows and cannot be in the final top-k. Rows *at*
/// `b` are never skipped (they may still win on their id).
#[derive(Debug)]
pub(crate) struct SharedBound(AtomicU32);

impl SharedBound {
    /// No bound yet: rules out nothing.
    pub(crate) fn new() -> Self {
        SharedBound(AtomicU32::new(order_bits(f32::INFINITY)))
    }

    /// The smallest bound published so far (`+inf` before any).
    #[inline]
    pub(crate) fn get(&self) -> f32 {
        from_order_bits(self.0.load(AtomicOrdering::Relaxed))
    }

    /// Publishes `top`'s bound if it is full and its bound is a number.
    #[inline]
    pub(crate) fn offer(&self, top: &TopK<'_>) {
        let bound = top.bound();
        if bound.is_finite() {
            self.0.fetch_min(order_bits(bound), AtomicOrdering::Relaxed);
        }
    }
}

/// Maps a non-NaN `f32` to a `u32` with the same order (negatives included).
fn order_bits(x: f32) -> u32 {
    let bits = x.to_bits();
    if bits >> 31 == 1 {
        !bits
    } else {
        bits | 1 << 31
    }
}

/// Inverse of [`order_bits`].
fn from_order_bits(bits: u32) -> f32 {
    if bits >> 31 == 1 {
        f32::from_bits(bits & !(1 << 31))
    } else {
        f32::from_bits(!bits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_k_is_an_error() {
        assert!(matches!(TopK::new(0), Err(Error::ZeroK)));
    }

    #[test]
    fn keeps_the_k_smallest_with_id_tie_break() {
        let ids: Vec<Vec<u8>> = (0u8..6).map(|i| vec![b'a' + i]).collect();
        let mut top = TopK::new(3).expect("k > 0");
        assert!(top.push(2.0, &ids[5], RowId(5)));
        assert!(top.push(1.0, &ids[4], RowId(4)));
        assert_eq!(top.bound(), f32::INFINITY);
        assert!(top.push(1.0, &ids[3], RowId(3)));
        // Full: the bound is the worst kept distance.
        assert_eq!(top.bound(), 2.0);
        // Full: equal distance, larger id than the worst (2.0, f) is still better.
        assert!(top.would_enter(1.0, &ids[5]));
        assert!(!top.would_enter(2.0, &ids[5]));
        assert!(top.would_enter(2.0, &ids[0]));
        assert!(!top.push(3.0, &ids[0], RowId(0)));
        assert!(top.push(1.0, &ids[2], RowId(2)));
        let got: Vec<_> = top.into_sorted_vec().iter().map(|c| c.row.0).collect();
        assert_eq!(got, vec![2, 3, 4]);
    }

    #[test]
    fn merge_equals_single_heap() {
        let ids: Vec<Vec<u8>> = (0u8..20).map(|i| vec![i]).collect();
        let dist = |i: usize| ((i * 7) % 5) as f32;
        let mut all = TopK::new(4).expect("k > 0");
        let mut left = TopK::new(4).expect("k > 0");
        let mut right = TopK::new(4).expect("k > 0");
        for (i, id) in ids.iter().enumerate() {
            all.push(dist(i), id, RowId(i as u32));
            let half = if i % 2 == 0 { &mut left } else { &mut right };
            half.push(dist(i), id, RowId(i as u32));
        }
        left.merge(right);
        assert_eq!(left.into_sorted_vec(), all.into_sorted_vec());
    }

    #[test]
    fn order_bits_keep_the_order_of_floats() {
        let xs = [
            f32::NEG_INFINITY,
            -1e30,
            -2.5,
            -f32::MIN_POSITIVE,
            -0.0,
            0.0,
            f32::MIN_POSITIVE,
            1.0,
            3.5e20,
            f32::INFINITY,
        ];
        for w in xs.windows(2) {
            assert!(order_bits(w[0]) <= order_bits(w[1]), "{} vs {}", w[0], w[1]);
        }
        for x in xs {
            assert_eq!(from_order_bits(order_bits(x)).to_bits(), x.to_bits());
        }
    }

    #[test]
    fn shared_bound_keeps_the_smallest_full_bound() {
        let ids: Vec<Vec<u8>> = (0u8..4).map(|i| vec![i]).collect();
        let shared = SharedBound::new();
        let mut a = TopK::new(2).expect("k > 0");
        a.push(-3.0, &ids[0], RowId(0));
        shared.offer(&a);
        // Not full yet: nothing is ruled out.
        assert_eq!(shared.get(), f32::INFINITY);
        a.push(-1.0, &ids[1], RowId(1));
        shared.offer(&a);
        assert_eq!(shared.get(), -1.0);
        let mut b = TopK::new(2).expect("k > 0");
        b.push(5.0, &ids[2], RowId(2));
        b.push(6.0, &ids[3], RowId(3));
        shared.offer(&b);
        assert_eq!(
            shared.get(),
            -1.0,
            "a larger bound does not replace a smaller one"
        );
    }
}
