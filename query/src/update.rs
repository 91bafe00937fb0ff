//! Update documents: `$set`, `$unset`, `$inc`, `$push`, `$pull` on dot paths.
//!
//! An [`Update`] is parsed once (errors name the operator and path) and then
//! applied to each matching document. Application fails, leaving the document
//! untouched, when a path runs into a value of the wrong type (`$inc` on a
//! string, `$push` onto a non-array).

use bson::{doc, Bson, Document, RawDocumentBuf};

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
                if path.is_empty() || path.split('.').any(str::is_empty) {
                    return Err(UpdateError::BadValue {
                        op: op_name.to_owned(),
                        path: path.clone(),
                        reason: "empty path component".into(),
                    });
                }
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
        for (i, (a, op, _)) in actions.iter().enumerate() {
            for (b, _, _) in &actions[..i] {
                if a == b || a.starts_with(&format!("{b}.")) || b.starts_with(&format!("{a}.")) {
                    return Err(UpdateError::PathConflict {
                        op: (*op).to_owned(),
                        path: a.clone(),
                        reason: format!("conflicts with another update of {b:?}"),
                    });
                }
            }
        }
        Ok(Self { actions })
    }

    /// Applies the update to `doc`; on error `doc` is unchanged.
    pub fn apply(&self, doc: &Document) -> Result<Document, UpdateError> {
        let mut out = doc.clone();
        for (path, op, action) in &self.actions {
            apply_one(&mut out, path, op, action)?;
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

fn pull_condition(path: &str, value: &Bson) -> Result<PullCond, UpdateError> {
    let bad = |reason: String| UpdateError::BadValue {
        op: "$pull".into(),
        path: path.to_owned(),
        reason,
    };
    match value {
        Bson::Document(d) if d.keys().next().is_some_and(|k| k.starts_with('$')) => {
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
        v => Ok(PullCond::Equals(v.clone())),
    }
}

/// Walks to the parent document of `path`'s last component, creating
/// documents when `create` (for `$set`, `$inc`, `$push`).
fn parent_mut<'d>(
    doc: &'d mut Document,
    path: &str,
    op: &str,
    create: bool,
) -> Result<Option<(&'d mut Document, String)>, UpdateError> {
    let mut parts: Vec<&str> = path.split('.').collect();
    let last = parts.pop().unwrap_or_default().to_owned();
    let mut cur = doc;
    for p in parts {
        if !cur.contains_key(p) {
            if !create {
                return Ok(None);
            }
            cur.insert(p, Document::new());
        }
        cur = match cur.get_mut(p) {
            Some(Bson::Document(d)) => d,
            Some(other) if create => {
                return Err(UpdateError::PathConflict {
                    op: op.to_owned(),
                    path: path.to_owned(),
                    reason: format!("{p:?} holds a {:?}, not a document", other.element_type()),
                })
            }
            _ => return Ok(None),
        };
    }
    Ok(Some((cur, last)))
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

fn apply_one(doc: &mut Document, path: &str, op: &str, action: &Action) -> Result<(), UpdateError> {
    let create = !matches!(action, Action::Unset | Action::Pull(_));
    let Some((parent, last)) = parent_mut(doc, path, op, create)? else {
        return Ok(());
    };
    let conflict = |reason: String| UpdateError::PathConflict {
        op: op.to_owned(),
        path: path.to_owned(),
        reason,
    };
    match action {
        Action::Set(v) => {
            parent.insert(last, v.clone());
        }
        Action::Unset => {
            parent.remove(&last);
        }
        Action::Inc(by) => {
            let new = match parent.get(&last) {
                None => by.clone(),
                Some(cur) => add_numbers(cur, by).ok_or_else(|| {
                    conflict(format!(
                        "cannot increment a {:?} (or it overflows)",
                        cur.element_type()
                    ))
                })?,
            };
            parent.insert(last, new);
        }
        Action::Push(items) => match parent.get_mut(&last) {
            None => {
                parent.insert(last, Bson::Array(items.clone()));
            }
            Some(Bson::Array(a)) => a.extend(items.iter().cloned()),
            Some(other) => return Err(conflict(format!("cannot push onto a {:?}", other.element_type()))),
        },
        Action::Pull(cond) => match parent.get_mut(&last) {
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

/// The document an upsert starts from: the filter's top-level equality
/// conditions (`{a: 1}`, `{"b.c": {$eq: 2}}`), operators left out.
pub fn equality_seed(filter: &Document) -> Document {
    let mut out = Document::new();
    for (k, v) in filter {
        if k.starts_with('$') {
            continue;
        }
        let value = match v {
            Bson::Document(d) if d.keys().any(|x| x.starts_with('$')) => match d.get("$eq") {
                Some(eq) if d.len() == 1 => eq.clone(),
                _ => continue,
            },
            other => other.clone(),
        };
        slate_core::set_path(&mut out, k, value);
    }
    out
}
