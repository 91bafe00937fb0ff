//! Row tags: byte strings attached to a row when it is written, and posting
//! lists from each tag to its rows.
//!
//! Slate tags a document's vector row with the document's index entries (the
//! document id removed), so a filter an index can answer finds its rows here
//! without reading the index or mapping ids to rows. A row never changes
//! once written (a document write appends a new row, unless it keeps the
//! vector and every index entry, hence the tags), so its tags hold for
//! as long as the row is visible, and a lookup filters the posting lists by
//! the view's visibility like any scan.
//!
//! Tags belong to *fields* (the index names the caller passes). A field is
//! *covered* when every row linked so far was written with its tags: only
//! then can its posting lists stand in for the index. Rows written without
//! tags (bulk load at open, [`Writer::upsert`](crate::Writer::upsert)) or
//! before an index existed leave the field uncovered for the generation,
//! and so does dropping the index ([`Writer::uncover`](crate::Writer::uncover)):
//! a row outlives writes that keep its vector and its index entries, so
//! after a drop it may keep the dropped field's tags as they were.

use std::collections::{BTreeMap, BTreeSet};
use std::mem;
use std::ops::Bound;

/// A range of tags: start and end bounds on the tag bytes.
pub type TagRange<'a> = (Bound<&'a [u8]>, Bound<&'a [u8]>);

/// A row's tags: the fields they cover, and the tags themselves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RowTags {
    /// The fields (index names) whose tags are all in `tags`.
    pub fields: Vec<String>,
    /// Byte strings, each the prefix of one index entry of the row.
    pub tags: Vec<Vec<u8>>,
}

/// Posting lists of one cache generation.
#[derive(Debug, Default)]
pub(crate) struct TagIndex {
    /// Fields every linked row was tagged for; `None` until a row is linked.
    covered: Option<BTreeSet<String>>,
    /// Tag → rows, ascending (rows are linked in increasing order).
    postings: BTreeMap<Box<[u8]>, Vec<u32>>,
}

impl TagIndex {
    /// Links `row` (above every row linked before) with its tags; `None`
    /// for a row written without tags.
    pub(crate) fn link(&mut self, row: u32, tags: Option<&RowTags>) {
        let fields = tags.map_or(&[][..], |t| &t.fields);
        match &mut self.covered {
            None => self.covered = Some(fields.iter().cloned().collect()),
            // Nearly every row covers the same fields: nothing is allocated
            // per row, and only a row missing a field changes the coverage.
            Some(c) => c.retain(|f| fields.contains(f)),
        }
        for tag in tags.map_or(&[][..], |t| &t.tags) {
            let rows = match self.postings.get_mut(tag.as_slice()) {
                Some(rows) => rows,
                None => self.postings.entry(tag.as_slice().into()).or_default(),
            };
            // One row may carry a tag once only (an array holding a value
            // twice gives one index entry).
            if rows.last() != Some(&row) {
                rows.push(row);
            }
        }
    }

    /// Stops `field` being covered for the rest of the generation (its
    /// index was dropped: rows kept since may hold its tags as they were).
    pub(crate) fn uncover(&mut self, field: &str) {
        if let Some(covered) = &mut self.covered {
            covered.remove(field);
        }
    }

    /// Whether every row linked so far was tagged for `field` (vacuously,
    /// when none was).
    pub(crate) fn covers(&self, field: &str) -> bool {
        self.covered.as_ref().is_none_or(|c| c.contains(field))
    }

    /// The rows of every tag in `ranges`, unsorted, possibly repeated.
    pub(crate) fn rows_in(&self, ranges: &[TagRange<'_>], out: &mut Vec<u32>) {
        self.lists_in(ranges, |rows| out.extend_from_slice(rows));
    }

    /// Calls `f` with the posting list of every tag in `ranges`.
    pub(crate) fn lists_in(&self, ranges: &[TagRange<'_>], mut f: impl FnMut(&[u32])) {
        for &range in ranges.iter().filter(|r| !is_empty(r)) {
            for rows in self.postings.range::<[u8], _>(range).map(|(_, rows)| rows) {
                f(rows);
            }
        }
    }

    /// How many rows the tags in `ranges` list, retired rows and repeats
    /// included (an estimate of [`rows_in`](Self::rows_in)'s count).
    pub(crate) fn count_in(&self, ranges: &[TagRange<'_>]) -> usize {
        let mut n = 0;
        self.lists_in(ranges, |rows| n += rows.len());
        n
    }

    /// The same lists for a new generation: `new_row[old]` is the row's new
    /// number, or `u32::MAX` if compaction dropped it (increasing on the
    /// rows kept, so the lists stay ascending).
    pub(crate) fn remap(&self, new_row: &[u32]) -> TagIndex {
        let postings = self
            .postings
            .iter()
            .filter_map(|(tag, rows)| {
                let rows: Vec<u32> = rows
                    .iter()
                    .filter_map(|&r| new_row.get(r as usize).copied().filter(|&n| n != u32::MAX))
                    .collect();
                (!rows.is_empty()).then(|| (tag.clone(), rows))
            })
            .collect();
        TagIndex {
            covered: self.covered.clone(),
            postings,
        }
    }

    /// Approximate heap bytes of the lists and tags.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.postings
            .iter()
            .map(|(tag, rows)| {
                tag.len() + rows.capacity() * mem::size_of::<u32>() + 3 * mem::size_of::<usize>() * 2
            })
            .sum()
    }
}

/// Whether no byte string lies in `range` (which `BTreeMap::range` would
/// refuse with a panic when its start is above its end).
fn is_empty(range: &TagRange<'_>) -> bool {
    match *range {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Excluded(b))
        | (Bound::Excluded(a), Bound::Included(b)) => a >= b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(fields: &[&str], tags: &[&[u8]]) -> RowTags {
        RowTags {
            fields: fields.iter().map(|f| (*f).to_owned()).collect(),
            tags: tags.iter().map(|t| t.to_vec()).collect(),
        }
    }

    #[test]
    fn coverage_is_what_every_row_was_tagged_for() {
        let mut t = TagIndex::default();
        assert!(t.covers("a"), "no row yet");
        t.link(0, Some(&tags(&["a", "b"], &[b"a1", b"b1"])));
        assert!(t.covers("a") && t.covers("b") && !t.covers("c"));
        t.link(1, Some(&tags(&["a"], &[b"a2"])));
        assert!(t.covers("a") && !t.covers("b"));
        t.link(2, None);
        assert!(!t.covers("a"));
    }

    #[test]
    fn ranges_collect_rows_and_remap_keeps_survivors_in_order() {
        let mut t = TagIndex::default();
        t.link(0, Some(&tags(&["a"], &[b"a1"])));
        t.link(1, Some(&tags(&["a"], &[b"a2", b"a3"])));
        t.link(2, Some(&tags(&["a"], &[b"a1", b"a1"])));
        let mut out = Vec::new();
        t.rows_in(
            &[(Bound::Included(&b"a1"[..]), Bound::Excluded(&b"a2"[..]))],
            &mut out,
        );
        assert_eq!(out, [0, 2]);
        out.clear();
        t.rows_in(
            &[
                (Bound::Included(&b"a2"[..]), Bound::Unbounded),
                (Bound::Unbounded, Bound::Included(&b"a1"[..])),
            ],
            &mut out,
        );
        out.sort_unstable();
        assert_eq!(out, [0, 1, 1, 2]);
        // Empty or inverted ranges find nothing (and do not panic).
        out.clear();
        t.rows_in(
            &[
                (Bound::Included(&b"a3"[..]), Bound::Included(&b"a1"[..])),
                (Bound::Excluded(&b"a1"[..]), Bound::Excluded(&b"a1"[..])),
                (Bound::Excluded(&b"a2"[..]), Bound::Included(&b"a2"[..])),
            ],
            &mut out,
        );
        assert!(out.is_empty());
        // Row 1 dropped, row 2 becomes row 1.
        let r = t.remap(&[0, u32::MAX, 1]);
        out.clear();
        r.rows_in(&[(Bound::Unbounded, Bound::Unbounded)], &mut out);
        assert_eq!(out, [0, 1]);
        assert!(r.covers("a"));
    }
}
