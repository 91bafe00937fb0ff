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
//!
//! Filling a layout from a whole document reads the bytes directly (one pass,
//! each key checked against the layout's, no `RawElement` per field); anything
//! it does not decode itself (a type it leaves to bson, bytes that do not parse)
//! sends the document to bson's iterator, which gives the same document or the
//! same error.
//!
//! Single-document reads share a per-thread materializer
//! ([`Materializer::with_thread_local`]), so that a `get` reuses the layout of
//! the previous document read on the thread instead of building one each time.

use std::cell::RefCell;

use bson::spec::ElementType;
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

    /// Runs `f` with this thread's shared materializer, whose layout outlives
    /// the call: single-document reads use it so that consecutive reads of one
    /// collection skip building the layout. A nested call gets a fresh one.
    pub fn with_thread_local<R>(f: impl FnOnce(&mut Materializer) -> R) -> R {
        thread_local! {
            static SHARED: RefCell<Materializer> = RefCell::new(Materializer::new());
        }
        SHARED.with(|m| match m.try_borrow_mut() {
            Ok(mut m) => f(&mut m),
            Err(_) => f(&mut Materializer::new()),
        })
    }

    /// `raw` as a `Document`: equal to `Document::try_from(raw)`.
    pub fn document(&mut self, raw: &RawDocument) -> RawResult<Document> {
        if let Some(layout) = &self.layout {
            let mut out = layout.clone();
            // The direct pass, then (other keys, a type left to bson, bad
            // bytes) bson's iterator on the same layout, then the plain way.
            if fill_fast(&mut out, raw.as_bytes()) || fill(&mut out, raw.iter())? {
                return Ok(out);
            }
        }
        self.plain(raw.iter())
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
        self.plain(fields())
    }

    /// Builds the document field by field and remembers its layout.
    fn plain<'a>(
        &mut self,
        fields: impl Iterator<Item = RawResult<(&'a str, RawBsonRef<'a>)>>,
    ) -> RawResult<Document> {
        let mut out = Document::new();
        for field in fields {
            let (key, value) = field?;
            out.insert(key, to_bson(value)?);
        }
        self.layout = Some(out.keys().map(|k| (k.clone(), Bson::Null)).collect());
        Ok(out)
    }
}

/// Fills layout `out` from the bytes `b` of a whole document (framing already
/// checked by `RawDocument::from_bytes`: length prefix equal to `b.len()`, last
/// byte 0) in one pass. `false` when the keys are not exactly the layout's, in
/// order, or when an element is of a type left to bson or does not parse as
/// bson's iterator would parse it; the values filled so far are then
/// overwritten by the caller. When `true`, `out` equals `Document::try_from`.
fn fill_fast(out: &mut Document, b: &[u8]) -> bool {
    let Some(end) = b.len().checked_sub(1) else {
        return false;
    };
    let mut at = 4;
    for (key, slot) in out.iter_mut() {
        if at >= end {
            return false;
        }
        // Type byte, key as a C string, value. The layout's key (read from
        // a C string, so free of NUL bytes) is compared where the element's
        // key starts, NUL included: no search for the key's end.
        let kind = b[at];
        let key_len = key.len();
        if at + 1 + key_len >= end
            || b[at + 1 + key_len] != 0
            || &b[at + 1..at + 1 + key_len] != key.as_bytes()
        {
            return false;
        }
        let Some((value, next)) = fast_value(kind, b, at + 1 + key_len + 1) else {
            return false;
        };
        *slot = value;
        at = next;
    }
    at == end
}

/// The value of type `kind` starting at `start` in `b`, and where the next
/// element starts; `None` for the types bson's iterator should decode and for
/// bytes it would refuse (so the caller falls back to it for the error).
fn fast_value(kind: u8, b: &[u8], start: usize) -> Option<(Bson, usize)> {
    let bytes = |n: usize| b.get(start..start.checked_add(n)?);
    let le4 = || Some(i32::from_le_bytes(bytes(4)?.try_into().ok()?));
    let le8 = || Some(i64::from_le_bytes(bytes(8)?.try_into().ok()?));
    let kind = ElementType::from(kind)?;
    Some(match kind {
        ElementType::Double => (Bson::Double(f64::from_bits(le8()? as u64)), start + 8),
        ElementType::Int32 => (Bson::Int32(le4()?), start + 4),
        ElementType::Int64 => (Bson::Int64(le8()?), start + 8),
        ElementType::DateTime => (Bson::DateTime(bson::DateTime::from_millis(le8()?)), start + 8),
        ElementType::Boolean => match *b.get(start)? {
            0 => (Bson::Boolean(false), start + 1),
            1 => (Bson::Boolean(true), start + 1),
            _ => return None,
        },
        ElementType::Null => (Bson::Null, start),
        ElementType::ObjectId => (
            Bson::ObjectId(bson::oid::ObjectId::from_bytes(bytes(12)?.try_into().ok()?)),
            start + 12,
        ),
        ElementType::String => {
            // bson's read_len: length >= 1, in bounds, NUL-terminated; then UTF-8.
            let len = usize::try_from(le4()?).ok().filter(|&n| n >= 1)?;
            let body = b.get(start + 4..(start + 4).checked_add(len)?)?;
            let Some((&0, text)) = body.split_last() else {
                return None;
            };
            (Bson::String(super::utf8(text)?.to_owned()), start + 4 + len)
        }
        ElementType::EmbeddedDocument | ElementType::Array => {
            // bson's next_document_len: at least 5 bytes, in bounds, NUL-terminated.
            let len = usize::try_from(le4()?).ok().filter(|&n| n >= 5)?;
            let doc = RawDocument::from_bytes(bytes(len)?).ok()?;
            let value = if kind == ElementType::Array {
                Bson::Array(
                    doc.iter()
                        .map(|e| e.and_then(|(_, v)| to_bson(v)))
                        .collect::<RawResult<_>>()
                        .ok()?,
                )
            } else {
                Bson::Document(plain_document(doc).ok()?)
            };
            (value, start + len)
        }
        _ => return None,
    })
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
