//! Inclusion projection of one dot path, through documents and arrays.
//!
//! `a.b` copies `b` out of the document at `a`; when `a` is an array, each
//! document element is projected (an element without `b` becomes `{}`),
//! nested arrays likewise, and scalar elements are dropped, as MongoDB does.
//! A document that has none of the path is left out (MongoDB keeps `a: {}`).
//! Numeric components name fields, never array positions. Paths sharing a
//! prefix merge into the same output document or array.

use bson::{Bson, Document, RawArray, RawBsonRef, RawDocument};

use super::materialize::{to_bson, RawResult};

/// One pass over a document's `elements` for a top-level projection: returns
/// the first `_id`, and puts in `found[i]` the first element named
/// `fields[i]` (a name listed twice is filled once, at its first place, as
/// `RawDocument::get` reads the first of duplicate names). Stops as soon as
/// the rest of the document cannot change the result.
pub(crate) fn pick_top_level<'a, V: Copy, E>(
    elements: impl IntoIterator<Item = Result<(&'a str, V), E>>,
    fields: &[String],
    found: &mut [Option<(&'a str, V)>],
) -> Result<Option<V>, E> {
    let mut id = None;
    let mut missing = (0..fields.len())
        .filter(|&i| !fields[..i].contains(&fields[i]))
        .count();
    for element in elements {
        let (key, value) = element?;
        if key == "_id" {
            id.get_or_insert(value);
        } else if let Some(i) = fields.iter().position(|f| f == key) {
            if found[i].is_none() {
                found[i] = Some((key, value));
                missing -= 1;
            }
        }
        if missing == 0 && id.is_some() {
            break;
        }
    }
    Ok(id)
}

/// Copies the values at `path` in `raw` into `out`, merging with what earlier
/// paths put there. The first of duplicate field names is read.
pub(crate) fn project_path(out: &mut Document, raw: &RawDocument, path: &str) -> RawResult<()> {
    let (head, rest) = match path.split_once('.') {
        Some((head, rest)) => (head, Some(rest)),
        None => (path, None),
    };
    let Some(value) = raw.get(head).ok().flatten() else {
        return Ok(());
    };
    let Some(rest) = rest else {
        out.insert(head, to_bson(value)?);
        return Ok(());
    };
    match value {
        RawBsonRef::Document(d) => {
            let existed = matches!(out.get(head), Some(Bson::Document(_)));
            if !existed {
                out.insert(head, Document::new());
            }
            if let Some(Bson::Document(inner)) = out.get_mut(head) {
                project_path(inner, d, rest)?;
                if !existed && inner.is_empty() {
                    out.remove(head);
                }
            }
        }
        RawBsonRef::Array(a) => {
            if !matches!(out.get(head), Some(Bson::Array(_))) {
                out.insert(head, Bson::Array(Vec::new()));
            }
            if let Some(Bson::Array(inner)) = out.get_mut(head) {
                project_array(inner, a, rest)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Projects `rest` out of each element of `a` into `out`: element by element
/// when `out` already holds this array's projection (same length), else anew.
fn project_array(out: &mut Vec<Bson>, a: &RawArray, rest: &str) -> RawResult<()> {
    let kept: Vec<RawBsonRef<'_>> = a
        .into_iter()
        .map_while(Result::ok)
        .filter(|e| matches!(e, RawBsonRef::Document(_) | RawBsonRef::Array(_)))
        .collect();
    if out.len() != kept.len() {
        out.clear();
        out.extend(kept.iter().map(|e| match e {
            RawBsonRef::Array(_) => Bson::Array(Vec::new()),
            _ => Bson::Document(Document::new()),
        }));
    }
    for (slot, e) in out.iter_mut().zip(kept) {
        match (slot, e) {
            // An element stays even when it has none of the path.
            (Bson::Document(d), RawBsonRef::Document(raw)) => project_path(d, raw, rest)?,
            (Bson::Array(inner), RawBsonRef::Array(raw)) => project_array(inner, raw, rest)?,
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use bson::{doc, Bson, Document, RawDocumentBuf};

    fn project(d: Document, paths: &[&str]) -> Document {
        let raw = RawDocumentBuf::from_document(&d).expect("valid");
        let mut out = Document::new();
        for p in paths {
            super::project_path(&mut out, &raw, p).expect("valid");
        }
        out
    }

    #[test]
    fn through_documents_and_arrays() {
        let d = doc! {
            "items": [ { "name": "a", "n": 1 }, { "n": 2 }, 7, [ { "name": "b" } ] ],
            "m": { "x": 1, "y": 2 },
            "s": 5,
        };
        assert_eq!(
            project(d.clone(), &["items.name"]),
            doc! { "items": [ { "name": "a" }, {}, [ { "name": "b" } ] ] }
        );
        assert_eq!(
            project(d.clone(), &["items.name", "items.n"]),
            doc! { "items": [ { "name": "a", "n": 1 }, { "n": 2 }, [ { "name": "b" } ] ] }
        );
        assert_eq!(
            project(d.clone(), &["m.y", "m.x"]),
            doc! { "m": { "y": 2, "x": 1 } }
        );
        // A document without the path, or a scalar on it, is left out.
        assert_eq!(project(d.clone(), &["m.z", "s.t"]), doc! {});
        // Numeric components are field names.
        assert_eq!(project(d, &["items.0"]), doc! { "items": [ {}, {}, [ {} ] ] });
        assert_eq!(
            project(doc! { "a": [1, 2] }, &["a.b"]),
            doc! { "a": Bson::Array(vec![]) }
        );
    }
}
