//! Update documents: `$set`, `$unset`, `$inc`, `$push`, `$pull` on dot paths.
//!
//! An [`Update`] is parsed once (errors name the operator and path) and then
//! applied to each matching document. Application fails, leaving the document
//! untouched, when a path runs into a value of the wrong type (`$inc` on a
//! string, `$push` onto a non-array).

use std::collections::BTreeMap;

use bson::{doc, Bson, Document, RawDocumentBuf};
use slate_core::value::{array_index, is_under};

use crate::filter::Filter;

/// Why an update was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum UpdateError {
    /// An operator this module does not know.
    #[error("unknown update operator {op:?}")]
    UnknownOperator { op: String },
    /// An update document without operators (use a replacement instead).
    #[error("an update document needs operators such as $set; got field {field:?} (use replace for a whole document)")]
    NotAnOperator { field: String },
    /// An operator whose operand is not a document of paths.
    #[error("{op} takes a document of field paths")]
    BadOperand { op: String },
    /// An operand of the wrong type, e.g. `$inc` by a string.
    #[error("{op} on {path:?}: {reason}")]
    BadValue {
        op: String,
        path: String,
        reason: String,
    },
    /// The update would change `_id`.
    #[error("{op} cannot change _id")]
    ImmutableId { op: String },
    /// A path that conflicts with the document's shape.
    #[error("{op} on {path:?}: {reason}")]
    PathConflict {
        op: String,
        path: String,
        reason: String,
    },
}

#[derive(Debug, Clone)]
enum Action {
    Set(Bson),
    Unset,
    Inc(Bson),
    Push(Vec<Bson>),
    Pull(PullCond),
}

#[derive(Debug, Clone)]
enum PullCond {
    /// Remove elements equal to the value.
    Equals(Bson),
    /// Remove elements matching a condition on the element (`{$gte: 6}`), or
    /// documents matching a query (`{a: 1}`).
    /// `wrapped`: the filter tests `{v: element}` rather than the element.
    Matches { filter: Box<Filter>, wrapped: bool },
}

/// A parsed update document.
#[derive(Debug, Clone)]
pub struct Update {
    actions: Vec<(String, &'static str, Action)>,
}

fn is_number(b: &Bson) -> bool {
    matches!(b, Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_))
}

impl Update {
    /// Parses `{ $set: {..}, $inc: {..}, .. }`.
    pub fn parse(update: &Document) -> Result<Self, UpdateError> {
        let mut actions = Vec::new();
        for (op, operand) in update {
            let op_name: &'static str = match op.as_str() {
                "$set" => "$set",
                "$unset" => "$unset",
                "$inc" => "$inc",
                "$push" => "$push",
                "$pull" => "$pull",
                other if other.starts_with('$') => {
                    return Err(UpdateError::UnknownOperator { op: other.to_owned() })
                }
                other => {
                    return Err(UpdateError::NotAnOperator {
                        field: other.to_owned(),
                    })
                }
            };
            let Bson::Document(fields) = operand else {
                return Err(UpdateError::BadOperand {
                    op: op_name.to_owned(),
                });
            };
            for (path, value) in fields {
                if path == "_id" || path.starts_with("_id.") {
                    return Err(UpdateError::ImmutableId {
                        op: op_name.to_owned(),
                    });
                }
                check_path(op_name, path)?;
                let action = match op_name {
                    "$set" => Action::Set(value.clone()),
                    "$unset" => Action::Unset,
                    "$inc" => {
                        if !is_number(value) {
                            return Err(UpdateError::BadValue {
                                op: op_name.to_owned(),
                                path: path.clone(),
                                reason: format!("cannot increment by a non-number {value}"),
                            });
                        }
                        Action::Inc(value.clone())
                    }
                    "$push" => match value {
                        Bson::Document(d) if d.contains_key("$each") => match d.get("$each") {
                            Some(Bson::Array(items)) if d.len() == 1 => Action::Push(items.clone()),
                            _ => {
                                return Err(UpdateError::BadValue {
                                    op: op_name.to_owned(),
                                    path: path.clone(),
                                    reason: "$each takes an array (and no other modifier)".into(),
                                })
                            }
                        },
                        v => Action::Push(vec![v.clone()]),
                    },
                    _ => Action::Pull(pull_condition(path, value)?),
                };
                actions.push((path.clone(), op_name, action));
            }
        }
        if actions.is_empty() {
            return Err(UpdateError::BadOperand { op: "update".into() });
        }
        // Ordered, so that n actions cost O(n log n), as in `equality_seed`.
        let mut seen: BTreeMap<&str, ()> = BTreeMap::new();
        for (a, op, _) in &actions {
            let earlier = if seen.contains_key(a.as_str()) {
                Some(a.as_str())
            } else {
                nested(&seen, a)
            };
            if let Some(b) = earlier {
                return Err(UpdateError::PathConflict {
                    op: (*op).to_owned(),
                    path: a.clone(),
                    reason: format!("conflicts with another update of {b:?}"),
                });
            }
            seen.insert(a, ());
        }
        // Applied in path order, as MongoDB (5.0 on) applies them: the
        // fields an update adds land in that order, whatever order the
        // update document named them in.
        actions.sort_by(|a, b| path_order(&a.0, &b.0));
        Ok(Self { actions })
    }

    /// Applies the update to `doc`; on error `doc` is unchanged.
    pub fn apply(&self, doc: &Document) -> Result<Document, UpdateError> {
        let mut out = doc.clone();
        // Positions padded with nulls so far, over all the paths: each path
        // is held to MAX_PAD, and so is their sum (a thousand arrays each
        // padded to the limit would hold billions of nulls in memory).
        let mut padded = 0usize;
        for (path, op, action) in &self.actions {
            apply_one(&mut out, path, op, action, &mut padded)?;
        }
        Ok(out)
    }

    /// The top-level fields the update touches (first path components).
    pub fn touched_roots(&self) -> impl Iterator<Item = &str> {
        self.actions
            .iter()
            .map(|(p, _, _)| p.split('.').next().unwrap_or(p))
    }

    /// A new document built from an upsert's equality filter fields plus this
    /// update (MongoDB's upsert): `seed` holds the filter's equality values.
    pub fn apply_to_seed(&self, seed: Document) -> Result<Document, UpdateError> {
        self.apply(&seed)
    }
}

/// The order MongoDB applies an update's paths in: component by component,
/// names made of digits by their numbers (`a.2` before `a.10`), others by
/// their bytes. A total order (`sort_by` needs one): names of digits come
/// before all others, and two of equal number (`1`, `01`) by their bytes.
fn path_order(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let numeric = |c: &str| !c.is_empty() && c.bytes().all(|b| b.is_ascii_digit());
    let component = |x: &str, y: &str| match (numeric(x), numeric(y)) {
        (true, true) => {
            let (tx, ty) = (x.trim_start_matches('0'), y.trim_start_matches('0'));
            // Longer (leading zeros aside) is larger; then digit by digit.
            tx.len()
                .cmp(&ty.len())
                .then_with(|| tx.cmp(ty))
                .then_with(|| x.cmp(y))
        }
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        (false, false) => x.cmp(y),
    };
    let mut left = a.split('.');
    let mut right = b.split('.');
    loop {
        match (left.next(), right.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) => {
                let order = component(x, y);
                if order.is_ne() {
                    return order;
                }
            }
        }
    }
}

fn pull_condition(path: &str, value: &Bson) -> Result<PullCond, UpdateError> {
    let bad = |reason: String| UpdateError::BadValue {
        op: "$pull".into(),
        path: path.to_owned(),
        reason,
    };
    match value {
        // A condition on the element itself (`{$gte: 6}`), not a query on
        // document elements (`{a: 1}`, `{$or: [..]}`).
        // (A DBRef's `$ref`, `$id` and `$db` are fields, as in a filter.)
        Bson::Document(d)
            if crate::filter::is_operator_document(d)
                && d.keys()
                    .next()
                    .is_some_and(|k| !matches!(k.as_str(), "$and" | "$or" | "$nor")) =>
        {
            // A condition on the element itself: wrap it as {v: cond}.
            let f =
                Filter::parse(&doc! { "v": Bson::Document(d.clone()) }).map_err(|e| bad(e.to_string()))?;
            Ok(PullCond::Matches {
                filter: Box::new(f),
                wrapped: true,
            })
        }
        Bson::Document(d) => {
            let f = Filter::parse(d).map_err(|e| bad(e.to_string()))?;
            Ok(PullCond::Matches {
                filter: Box::new(f),
                wrapped: false,
            })
        }
        // A pattern, which MongoDB matches against string elements: refused,
        // as everywhere else (an equality test would remove nothing).
        Bson::RegularExpression(_) => Err(UpdateError::BadValue {
            op: "$pull".into(),
            path: path.to_owned(),
            reason: "a regular expression is not supported".into(),
        }),
        v => Ok(PullCond::Equals(v.clone())),
    }
}

/// Refuses a path an update cannot follow: empty components, `$` components
/// other than a DBRef's `$ref`, `$id` and `$db` (positional operators, which
/// Slate does not support, or field names no filter could name), and more
/// components than a stored document may nest
/// ([`MAX_NESTING`](slate_core::value::MAX_NESTING)), found before anything
/// builds (and recursively compares) a document that deep.
fn check_path(op: &str, path: &str) -> Result<(), UpdateError> {
    let bad = |reason: String| UpdateError::BadValue {
        op: op.to_owned(),
        path: path.to_owned(),
        reason,
    };
    let mut components = 0usize;
    for part in path.split('.') {
        components += 1;
        if part.is_empty() {
            return Err(bad("empty path component".into()));
        }
        if part.starts_with('$') && !matches!(part, "$ref" | "$id" | "$db") {
            return Err(bad(format!(
                "path component {part:?}: positional operators and $-prefixed field names are not supported"
            )));
        }
    }
    let most = slate_core::value::MAX_NESTING + 1;
    if components > most {
        return Err(bad(format!("{components} path components, at most {most}")));
    }
    Ok(())
}

/// Where a path's last component lives: a field of a document, or a
/// position of an array (`tags.1`).
enum Slot<'d> {
    Field(&'d mut Document, String),
    Element(&'d mut Vec<Bson>, usize),
}

impl<'d> Slot<'d> {
    fn get(&self) -> Option<&Bson> {
        match self {
            Slot::Field(d, k) => d.get(k),
            Slot::Element(a, i) => a.get(*i),
        }
    }

    fn get_mut(&mut self) -> Option<&mut Bson> {
        match self {
            Slot::Field(d, k) => d.get_mut(k.as_str()),
            Slot::Element(a, i) => a.get_mut(*i),
        }
    }

    fn into_mut(self) -> Option<&'d mut Bson> {
        match self {
            Slot::Field(d, k) => d.get_mut(k.as_str()),
            Slot::Element(a, i) => a.get_mut(i),
        }
    }

    /// Sets the value and returns it; an array grows to the position with
    /// nulls first, as in MongoDB.
    fn set(self, value: Bson) -> &'d mut Bson {
        match self {
            Slot::Field(d, k) => {
                // An existing field keeps its place; a new one goes last.
                let slot = d.entry(k).or_insert(Bson::Null);
                *slot = value;
                slot
            }
            Slot::Element(a, i) => {
                if i >= a.len() {
                    a.resize(i, Bson::Null);
                    a.push(value);
                } else {
                    a[i] = value;
                }
                &mut a[i]
            }
        }
    }

    /// Removes a field; an array element becomes null (positions keep).
    fn unset(self) {
        match self {
            Slot::Field(d, k) => {
                d.remove(&k);
            }
            Slot::Element(a, i) => {
                if let Some(e) = a.get_mut(i) {
                    *e = Bson::Null;
                }
            }
        }
    }

    /// The slot as messages name it.
    fn name(&self) -> String {
        match self {
            Slot::Field(_, k) => format!("{k:?}"),
            Slot::Element(_, i) => format!("position {i}"),
        }
    }
}

/// Positions an update may pad an array to, exclusive (MongoDB refuses to
/// pad an array past 1,500,000 elements).
const MAX_PAD: usize = 1_500_000;

/// Walks to where `path`'s last component lives, stepping into documents by
/// name and into arrays by position; creates missing documents when
/// `create` (for `$set`, `$inc`, `$push`). `None`: the path is missing
/// (and not created), or runs through a value it cannot follow (without
/// `create`: MongoDB's `$unset` and `$pull` then do nothing).
fn walk<'d>(
    doc: &'d mut Document,
    path: &str,
    op: &str,
    create: bool,
    padded: &mut usize,
) -> Result<Option<Slot<'d>>, UpdateError> {
    let conflict = |reason: String| UpdateError::PathConflict {
        op: op.to_owned(),
        path: path.to_owned(),
        reason,
    };
    let mut parts = path.split('.');
    let mut slot = Slot::Field(doc, parts.next().unwrap_or_default().to_owned());
    for part in parts {
        let name = slot.name();
        let value = if slot.get().is_some() {
            slot.into_mut()
        } else if create {
            Some(slot.set(Bson::Document(Document::new())))
        } else {
            None
        };
        slot = match value {
            Some(Bson::Document(d)) => Slot::Field(d, part.to_owned()),
            Some(Bson::Array(a)) => match array_index(part) {
                Some(i) if create && i >= a.len() && i >= MAX_PAD => {
                    return Err(conflict(format!("position {i} is past {MAX_PAD}")))
                }
                Some(i) if create && i > a.len() => {
                    *padded += i - a.len();
                    if *padded > MAX_PAD {
                        return Err(conflict(format!(
                            "the update pads arrays with more than {MAX_PAD} nulls in all"
                        )));
                    }
                    Slot::Element(a, i)
                }
                Some(i) => Slot::Element(a, i),
                None if create => {
                    return Err(conflict(format!(
                        "{name} holds an array, and {part:?} is not a position in it"
                    )))
                }
                None => return Ok(None),
            },
            Some(other) if create => {
                return Err(conflict(format!(
                    "{name} holds a {:?}, not a document",
                    other.element_type()
                )))
            }
            _ => return Ok(None),
        };
    }
    Ok(Some(slot))
}

fn add_numbers(a: &Bson, b: &Bson) -> Option<Bson> {
    Some(match (a, b) {
        (Bson::Int32(x), Bson::Int32(y)) => match x.checked_add(*y) {
            Some(s) => Bson::Int32(s),
            None => Bson::Int64(i64::from(*x) + i64::from(*y)),
        },
        (Bson::Int32(x), Bson::Int64(y)) | (Bson::Int64(y), Bson::Int32(x)) => {
            Bson::Int64(i64::from(*x).checked_add(*y)?)
        }
        (Bson::Int64(x), Bson::Int64(y)) => Bson::Int64(x.checked_add(*y)?),
        (Bson::Double(x), y) | (y, Bson::Double(x)) => Bson::Double(
            x + match y {
                Bson::Double(d) => *d,
                Bson::Int32(i) => f64::from(*i),
                Bson::Int64(i) => *i as f64,
                _ => return None,
            },
        ),
        _ => return None,
    })
}

fn element_matches(filter: &Filter, element: &Bson, wrapped: bool) -> bool {
    let doc = if wrapped {
        doc! { "v": element.clone() }
    } else {
        match element {
            Bson::Document(d) => d.clone(),
            _ => return false,
        }
    };
    match RawDocumentBuf::from_document(&doc) {
        Ok(raw) => filter.matches(&raw),
        Err(_) => false,
    }
}

fn apply_one(
    doc: &mut Document,
    path: &str,
    op: &str,
    action: &Action,
    padded: &mut usize,
) -> Result<(), UpdateError> {
    let create = !matches!(action, Action::Unset | Action::Pull(_));
    let Some(mut slot) = walk(doc, path, op, create, padded)? else {
        return Ok(());
    };
    let conflict = |reason: String| UpdateError::PathConflict {
        op: op.to_owned(),
        path: path.to_owned(),
        reason,
    };
    match action {
        Action::Set(v) => {
            slot.set(v.clone());
        }
        Action::Unset => slot.unset(),
        Action::Inc(by) => {
            let new = match slot.get() {
                None => by.clone(),
                Some(cur) => add_numbers(cur, by).ok_or_else(|| {
                    conflict(format!(
                        "cannot increment a {:?} (or it overflows)",
                        cur.element_type()
                    ))
                })?,
            };
            slot.set(new);
        }
        Action::Push(items) => match slot.get_mut() {
            None => {
                slot.set(Bson::Array(items.clone()));
            }
            Some(Bson::Array(a)) => a.extend(items.iter().cloned()),
            Some(other) => return Err(conflict(format!("cannot push onto a {:?}", other.element_type()))),
        },
        Action::Pull(cond) => match slot.get_mut() {
            None => {}
            Some(Bson::Array(a)) => match cond {
                PullCond::Equals(v) => a.retain(|e| !values_equal(e, v)),
                PullCond::Matches { filter, wrapped } => a.retain(|e| !element_matches(filter, e, *wrapped)),
            },
            Some(other) => return Err(conflict(format!("cannot pull from a {:?}", other.element_type()))),
        },
    }
    Ok(())
}

/// Equality as the filter language defines it (numbers across types).
fn values_equal(a: &Bson, b: &Bson) -> bool {
    let wrap = |v: &Bson| RawDocumentBuf::from_document(&doc! { "v": v.clone() }).ok();
    match (wrap(a), wrap(b)) {
        (Some(x), Some(y)) => match (x.get("v"), y.get("v")) {
            (Ok(Some(x)), Ok(Some(y))) => slate_core::value::compare(x, y) == std::cmp::Ordering::Equal,
            _ => false,
        },
        _ => false,
    }
}

/// A path of `seen` that `path` lies under, or one that lies under `path`
/// (not `path` itself): its parents are looked up, its children found by
/// range, in O(log n) each.
fn nested<'p, V>(seen: &BTreeMap<&'p str, V>, path: &str) -> Option<&'p str> {
    use std::ops::Bound::{Excluded, Included};
    if let Some(parent) = path
        .match_indices('.')
        .find_map(|(i, _)| seen.get_key_value(&path[..i]))
    {
        return Some(parent.0);
    }
    // Children of `path` sort from `path.` up to `path/` ('/' follows '.').
    let (lo, hi) = (format!("{path}."), format!("{path}/"));
    seen.range::<str, _>((Included(lo.as_str()), Excluded(hi.as_str())))
        .next()
        .map(|(k, _)| *k)
}

/// The document an upsert starts from (MongoDB's upsert): the filter's
/// equality conditions (`{a: 1}`, `{"b.c": {$eq: 2}}`), also those inside
/// `$and`, operators left out. Two equalities on one path (or on a path
/// and a path inside it) are refused unless they agree, as is a path an
/// update could not take.
pub fn equality_seed(filter: &Document) -> Result<Document, UpdateError> {
    let mut equalities: Vec<(&str, &Bson)> = Vec::new();
    collect_equalities(filter, &mut equalities);
    let mut out = Document::new();
    // The paths so far, ordered: a path's parents are looked up and its
    // children found by range, so a filter of n equalities costs
    // O(n log n), not n² comparisons (a 4 MiB request holds 300,000).
    let mut seen: BTreeMap<&str, &Bson> = BTreeMap::new();
    for &(path, value) in &equalities {
        check_path("upsert", path)?;
        let clash = match (nested(&seen, path), seen.get(path)) {
            (Some(earlier), _) => Some(earlier),
            (None, Some(first)) if !values_equal(first, value) => Some(path),
            (None, Some(_)) => continue,
            (None, None) => None,
        };
        if let Some(earlier) = clash {
            debug_assert!(earlier == path || is_under(path, earlier) || is_under(earlier, path));
            return Err(UpdateError::PathConflict {
                op: "upsert".into(),
                path: path.to_owned(),
                reason: format!("the filter also sets {earlier:?}, so the document to insert is ambiguous"),
            });
        }
        seen.insert(path, value);
        slate_core::set_path(&mut out, path, value.clone());
    }
    // `_id` first, wherever the filter named it (as an insert stores it).
    Ok(match out.remove("_id") {
        Some(id) => {
            let mut first = bson::doc! { "_id": id };
            first.extend(out);
            first
        }
        None => out,
    })
}

/// The value `filter` sets `path` to by equality (at the top, or inside
/// `$and`), the first if several; `None` when it sets none. Never fails,
/// where [`equality_seed`] refuses filters it cannot build a document from.
pub fn equality_on<'f>(filter: &'f Document, path: &str) -> Option<&'f Bson> {
    let mut equalities = Vec::new();
    collect_equalities(filter, &mut equalities);
    equalities.into_iter().find(|(p, _)| *p == path).map(|(_, v)| v)
}

/// The equality conditions of `filter` and of the documents in its `$and`s
/// (and in an `$or` of one clause), as MongoDB finds them once it has
/// rewritten a one-clause `$or` and a one-value `$in` or `$all` as that
/// clause or equality.
fn collect_equalities<'f>(filter: &'f Document, out: &mut Vec<(&'f str, &'f Bson)>) {
    for (k, v) in filter {
        if k == "$and" || k == "$or" {
            if let Bson::Array(clauses) = v {
                if k == "$and" || clauses.len() == 1 {
                    for clause in clauses {
                        if let Bson::Document(d) = clause {
                            collect_equalities(d, out);
                        }
                    }
                }
            }
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        // Read as the filter parser reads it: a document of operators
        // gives its `$eq` (whatever else it holds: MongoDB takes the
        // equality out of the conjunction) and the one value of an `$in`
        // or `$all`; any other value, a DBRef (`{$ref, $id}`) included, is
        // the equality itself.
        match v {
            // Each of these is an equality of its own, so that two that
            // disagree are refused as two equalities on one path are.
            Bson::Document(d) if crate::filter::is_operator_document(d) => {
                let one = |op: &str| match d.get(op) {
                    Some(Bson::Array(values)) => one_value(values),
                    _ => None,
                };
                for value in [d.get("$eq"), one("$in"), one("$all")].into_iter().flatten() {
                    out.push((k, value));
                }
            }
            other => out.push((k, other)),
        }
    }
}

/// The one value `$in` or `$all` lists (repeats of it included), when it
/// means equality to itself: not a regular expression (a pattern) nor an
/// `$elemMatch` (a condition).
fn one_value(values: &[Bson]) -> Option<&Bson> {
    let first = values.first()?;
    let plain = match first {
        Bson::RegularExpression(_) => false,
        Bson::Document(d) => d.keys().next().is_none_or(|k| k != "$elemMatch"),
        _ => true,
    };
    (plain && values.iter().all(|v| v == first)).then_some(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conflict(filter: Document) -> Option<String> {
        match equality_seed(&filter) {
            Err(UpdateError::PathConflict { path, .. }) => Some(path),
            Err(e) => panic!("{filter}: {e}"),
            Ok(_) => None,
        }
    }

    /// Field names in order, nested ones after their parent's (`Document`'s
    /// `==` ignores order).
    fn keys(doc: &Document) -> Vec<String> {
        let mut out = Vec::new();
        for (k, v) in doc {
            out.push(k.clone());
            if let Bson::Document(d) = v {
                out.extend(keys(d).into_iter().map(|inner| format!("{k}.{inner}")));
            }
        }
        out
    }

    #[test]
    fn an_update_adds_fields_in_path_order_numbers_by_value() {
        // `m` exists and keeps its place; `b` is new and comes last.
        let update = Update::parse(&doc! { "$set": { "m.y": 1, "m.x": 2 }, "$inc": { "b": 1 } }).unwrap();
        let out = update.apply(&doc! { "_id": 1, "m": {} }).unwrap();
        assert_eq!(keys(&out), ["_id", "m", "m.x", "m.y", "b"]);
        let update = Update::parse(&doc! { "$set": { "a.b": 0, "a.10": 10, "a.2": 2 } }).unwrap();
        let out = update.apply(&doc! { "a": {} }).unwrap();
        assert_eq!(keys(&out), ["a", "a.2", "a.10", "a.b"]);
        let mut paths = vec![
            "b", "a.10", "a.09", "a.2", "a", "ab", "a.b", "a.1a", "a.01", "a.1",
        ];
        paths.sort_by(|a, b| path_order(a, b));
        assert_eq!(
            paths,
            ["a", "a.01", "a.1", "a.2", "a.09", "a.10", "a.1a", "a.b", "ab", "b"]
        );
    }

    /// A total order on any components (digits, letters, leading zeros):
    /// antisymmetric and transitive over every triple of a small alphabet's
    /// paths, so `sort_by` cannot meet an inconsistent comparison.
    #[test]
    fn path_order_is_a_total_order() {
        use std::cmp::Ordering;
        let parts = ["0", "00", "1", "01", "2", "10", "1a", "a", "a1", ""];
        let mut paths: Vec<String> = parts.iter().map(|p| (*p).to_owned()).collect();
        for x in parts {
            for y in ["1", "01", "a", "10"] {
                paths.push(format!("{x}.{y}"));
            }
        }
        for a in &paths {
            assert_eq!(path_order(a, a), Ordering::Equal);
            for b in &paths {
                assert_eq!(path_order(a, b), path_order(b, a).reverse(), "{a} {b}");
                assert_eq!(path_order(a, b) == Ordering::Equal, a == b, "{a} {b}");
                for c in &paths {
                    if path_order(a, b).is_le() && path_order(b, c).is_le() {
                        assert!(path_order(a, c).is_le(), "{a} <= {b} <= {c}");
                    }
                }
            }
        }
    }

    #[test]
    fn seed_refuses_nested_or_disagreeing_paths_in_either_order() {
        assert_eq!(conflict(doc! { "a": 1, "a.b": 2 }), Some("a.b".into()));
        assert_eq!(conflict(doc! { "a.b": 2, "a": 1 }), Some("a".into()));
        // "a!" sorts between "a" and "a.b": the child is still found.
        assert_eq!(conflict(doc! { "a.b": 2, "a!": 0, "a": 1 }), Some("a".into()));
        assert_eq!(conflict(doc! { "x.y.z": 1, "x": { "$eq": 2 } }), Some("x".into()));
        assert_eq!(
            conflict(doc! { "$and": [{ "a": 1 }, { "a": 2 }] }),
            Some("a".into())
        );
        // Agreeing repeats (numbers across types), siblings and look-alike
        // prefixes are fine.
        assert_eq!(conflict(doc! { "$and": [{ "a": 1 }, { "a": 1.0 }] }), None);
        assert_eq!(conflict(doc! { "a.b": 1, "a.c": 2, "ab": 3, "a!": 4 }), None);
        let seed = equality_seed(&doc! { "$and": [{ "a.c": 2 }, { "a.b": 1 }], "_id": 7 }).unwrap();
        assert_eq!(seed, doc! { "_id": 7, "a": { "c": 2, "b": 1 } });
    }

    #[test]
    fn seed_of_many_equalities_is_built_whole() {
        // 100,000 distinct paths: once n² comparisons under the write lock.
        let filter: Document = (0..100_000).map(|i| (format!("f{i}"), Bson::Int32(i))).collect();
        let seed = equality_seed(&filter).unwrap();
        assert_eq!(seed.len(), 100_000);
        assert_eq!(seed.get_i32("f99999").unwrap(), 99_999);
    }
}
