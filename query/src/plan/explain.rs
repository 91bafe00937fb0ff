//! Rendering a plan: an indented tree of its nodes with their estimates.

use std::fmt::{self, Write as _};

use bson::{doc, Bson, Document};

use super::{MergeOp, Plan, Source};

fn fmt_value(v: &[u8]) -> String {
    match slate_core::value::decode_value(v) {
        Ok((b, n)) if n == v.len() => b.into_relaxed_extjson().to_string(),
        // A bracket edge (one tag byte): the start or end of a type.
        _ => format!("<type {:#04x}>", v.first().copied().unwrap_or(0)),
    }
}

fn fmt_interval(iv: &super::Interval) -> String {
    use std::ops::Bound;
    if let (Bound::Included(a), Bound::Included(b)) = (&iv.start, &iv.end) {
        if a == b {
            return format!("= {}", fmt_value(a));
        }
    }
    let lo = match &iv.start {
        Bound::Included(v) => format!("[{}", fmt_value(v)),
        Bound::Excluded(v) => format!("({}", fmt_value(v)),
        Bound::Unbounded => "(..".to_owned(),
    };
    let hi = match &iv.end {
        Bound::Included(v) => format!("{}]", fmt_value(v)),
        Bound::Excluded(v) => format!("{})", fmt_value(v)),
        Bound::Unbounded => "..)".to_owned(),
    };
    format!("{lo}, {hi}")
}

fn source_doc(s: &Source) -> Document {
    match s {
        Source::Scan { estimate } => doc! { "node": "Scan", "estimate": *estimate as i64 },
        Source::IdScan {
            intervals,
            estimate,
            capped,
        } => doc! {
            "node": "IdScan",
            "intervals": intervals.iter().map(|i| Bson::String(fmt_interval(i))).collect::<Vec<_>>(),
            "estimate": *estimate as i64,
            "capped": *capped,
        },
        Source::IndexScan {
            field,
            intervals,
            estimate,
            capped,
            multikey,
        } => doc! {
            "node": "IndexScan",
            "field": field,
            "intervals": intervals.iter().map(|i| Bson::String(fmt_interval(i))).collect::<Vec<_>>(),
            "estimate": *estimate as i64,
            "capped": *capped,
            "multikey": *multikey,
        },
        Source::IndexMerge { op, inputs, estimate } => doc! {
            "node": "IndexMerge",
            "op": if *op == MergeOp::And { "and" } else { "or" },
            "estimate": *estimate as i64,
            "inputs": inputs.iter().map(|i| Bson::Document(source_doc(i))).collect::<Vec<_>>(),
        },
    }
}

impl Plan {
    /// The plan as a document: one nested node per level, outermost first.
    pub fn to_document(&self) -> Document {
        let mode = match &self.source {
            Source::Scan { .. } => "single pass",
            Source::IdScan { .. } if !self.source.is_id_points() => "key ranges",
            _ => "multi_get",
        };
        let mut node = doc! { "node": "ReadRecord", "mode": mode, "input": source_doc(&self.source) };
        if self.key_order {
            // The sort asked for is the order the keys are read in.
            let order = match (&self.source, self.reverse) {
                (Source::IndexScan { field, .. }, true) => {
                    format!("{field} desc (index in reverse, no sort)")
                }
                (Source::IndexScan { field, .. }, false) => format!("{field} (index order, no sort)"),
                (_, true) => "_id desc (keys in reverse, no sort)".to_owned(),
                (_, false) => "_id (key order, no sort)".to_owned(),
            };
            node.insert("order", order);
        }
        if let Some(f) = &self.filter {
            let text = self.filter_text.clone().unwrap_or_else(|| format!("{f:?}"));
            node = doc! { "node": "Filter", "filter": text, "input": node };
        } else if let Some(text) = &self.filter_text {
            // Answered by the source's keys: nothing to check.
            node = doc! { "node": "Filter", "filter": text, "checked": "no: the keys are the matches", "input": node };
        }
        if !self.sort.is_empty() {
            let bound = self.limit.map(|l| as_i64(l.saturating_add(self.skip)));
            node = doc! {
                "node": "Sort",
                "fields": self.sort.iter().map(|s| Bson::String(format!("{}:{}", s.path, if s.descending { "desc" } else { "asc" }))).collect::<Vec<_>>(),
                "bounded_heap": bound.map_or(Bson::Null, Bson::Int64),
                "input": node,
            };
        }
        if self.skip > 0 || self.limit.is_some() {
            node = doc! { "node": "Limit", "skip": as_i64(self.skip), "limit": self.limit.map_or(Bson::Null, |l| Bson::Int64(as_i64(l))), "input": node };
        }
        doc! {
            "node": "Projection",
            "fields": self.projection.as_ref().map_or(Bson::String("*".into()), |p| Bson::Array(p.iter().map(|f| Bson::String(f.clone())).collect())),
            "collection": &self.collection,
            "documents": i64::try_from(self.total).unwrap_or(i64::MAX),
            "input": node,
        }
    }
}

/// A count as BSON holds it: an `i64`, saturated (a skip of `usize::MAX`
/// shows as `i64::MAX`, not -1).
fn as_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn render(d: &Document, depth: usize, out: &mut String) -> fmt::Result {
    let name = d.get_str("node").unwrap_or("?");
    write!(out, "{:indent$}{name}", "", indent = depth * 2)?;
    for (k, v) in d {
        if k == "node" || k == "input" || k == "inputs" {
            continue;
        }
        let v = match v {
            Bson::String(s) => s.clone(),
            other => other.clone().into_relaxed_extjson().to_string(),
        };
        write!(out, " {k}={v}")?;
    }
    out.push('\n');
    if let Ok(input) = d.get_document("input") {
        render(input, depth + 1, out)?;
    }
    if let Ok(inputs) = d.get_array("inputs") {
        for i in inputs.iter().filter_map(Bson::as_document) {
            render(i, depth + 1, out)?;
        }
    }
    Ok(())
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        render(&self.to_document(), 0, &mut out)?;
        f.write_str(out.trim_end())
    }
}
