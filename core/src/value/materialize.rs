//! Raw BSON to `bson::Document`, fast when documents share their field names.
//!
//! `Document` is an `IndexMap` with hashed `String` keys; building one by
//! inserting field after field hashes every key and regrows the map several
//! times. Documents of one collection usually have the same fields in the
//! same order, so a [`Materializer`] remembers the last layout it built (the
//! keys, with null values) and builds the next document by cloning that
//! layout, which copies the hash table as it is, and filling in the values.
//! When the fields differ it builds the document the plain way and remembers
//! the new layout. Either way the result equals `Document::try_from(raw)`.

use bson::{Bson, Document, RawArray, RawBsonRef, RawDocument};

/// Result of materialising: the bson crate's error for malformed bytes.
pub type RawResult<T> = std::result::Result<T, bson::raw::Error>;

/// Builds `Document`s from raw bytes, reusing the previous document's layout.
#[derive(Debug, Clone, Default)]
pub struct Materializer {
    /// The keys of the last document built, in order, each with a null value.
    layout: Option<Document>,
}

impl Materializer {
    /// A materializer with no layout yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// `raw` as a `Document`: equal to `Document::try_from(raw)`.
    pub fn document(&mut self, raw: &RawDocument) -> RawResult<Document> {
        self.assemble(|| raw.iter())
    }

    /// A document of the given `(key, value)` fields in order (a later
    /// duplicate key overwrites the value and keeps the first position, as
    /// `Document::insert` does).
    pub fn fields<'a, I>(&mut self, fields: impl Fn() -> I) -> RawResult<Document>
    where
        I: Iterator<Item = (&'a str, RawBsonRef<'a>)>,
    {
        self.assemble(|| fields().map(Ok))
    }

    fn assemble<'a, I>(&mut self, fields: impl Fn() -> I) -> RawResult<Document>
    where
        I: Iterator<Item = RawResult<(&'a str, RawBsonRef<'a>)>>,
    {
        if let Some(layout) = &self.layout {
            let mut out = layout.clone();
            if fill(&mut out, fields())? {
                return Ok(out);
            }
        }
        let mut out = Document::new();
        for field in fields() {
            let (key, value) = field?;
            out.insert(key, to_bson(value)?);
        }
        self.layout = Some(out.keys().map(|k| (k.clone(), Bson::Null)).collect());
        Ok(out)
    }
}

/// Sets the values of `out` (a layout) from `fields`; `false` when the keys
/// are not exactly the layout's, in order.
fn fill<'a>(
    out: &mut Document,
    fields: impl Iterator<Item = RawResult<(&'a str, RawBsonRef<'a>)>>,
) -> RawResult<bool> {
    let mut slots = out.iter_mut();
    for field in fields {
        let (key, value) = field?;
        match slots.next() {
            Some((k, slot)) if k == key => *slot = to_bson(value)?,
            _ => return Ok(false),
        }
    }
    Ok(slots.next().is_none())
}

/// One raw value as a `Bson`, converting nested documents and arrays in
/// place rather than through an owned copy of their bytes.
pub fn to_bson(v: RawBsonRef<'_>) -> RawResult<Bson> {
    Ok(match v {
        RawBsonRef::Double(x) => Bson::Double(x),
        RawBsonRef::String(s) => Bson::String(s.to_owned()),
        RawBsonRef::Boolean(b) => Bson::Boolean(b),
        RawBsonRef::Null => Bson::Null,
        RawBsonRef::Int32(i) => Bson::Int32(i),
        RawBsonRef::Int64(i) => Bson::Int64(i),
        RawBsonRef::DateTime(d) => Bson::DateTime(d),
        RawBsonRef::ObjectId(o) => Bson::ObjectId(o),
        RawBsonRef::Document(d) => Bson::Document(plain_document(d)?),
        RawBsonRef::Array(a) => Bson::Array(array(a)?),
        other => Bson::try_from(other.to_raw_bson())?,
    })
}

fn plain_document(raw: &RawDocument) -> RawResult<Document> {
    let mut out = Document::new();
    for field in raw {
        let (key, value) = field?;
        out.insert(key, to_bson(value)?);
    }
    Ok(out)
}

fn array(raw: &RawArray) -> RawResult<Vec<Bson>> {
    raw.into_iter().map(|e| to_bson(e?)).collect()
}
