//! A serde `Deserializer` straight over stored BSON bytes, for typed reads.
//!
//! `bson::from_slice` does the same job, but walks elements through bson's
//! validating iterator and hands dates over as extended-JSON maps with the
//! milliseconds formatted as a string; on the bench's 9-field records it costs
//! about 0.7 µs a document. This one walks the bytes once: keys and strings
//! are lent to the visitor, numbers read in place, and fields the target type
//! does not name are skipped by their length without being parsed.
//!
//! The common types (double, string, document, array, bool, null, int32,
//! int64, date, ObjectId) take the fast path; dates and ObjectIds are handed
//! over in the shape bson's own deserializer gives them. Every other value, and every value a
//! `bson` type asks for by its private newtype name (`RawDocumentBuf`,
//! `Uuid`, …), is converted to a `Bson` and handed to bson's own
//! `bson::Deserializer` (not human-readable, as bson's raw reader), so
//! `from_raw::<T>` decodes what `bson::from_slice::<T>` decodes (the tests
//! check it), with one addition: a date asked for as an `i64` reads as its
//! milliseconds since the epoch, where bson refuses it, so a timestamp field
//! can skip the `{"$date": ..}` map (a tenth of a typed find's decoding on
//! the bench's records). Only a field serde asks for as an `i64` gets it: one
//! read through `#[serde(flatten)]` or an untagged enum is buffered through
//! `deserialize_any` and sees the map, as with bson.

use std::fmt;

use bson::spec::ElementType;
use bson::{Bson, RawBsonRef, RawDocument, RawDocumentBuf};
use serde::de::value::{BorrowedStrDeserializer, MapAccessDeserializer};
use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};

/// Why a document did not decode into the requested type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeError(String);

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DeError {}

impl de::Error for DeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        DeError(msg.to_string())
    }
}

type DeResult<T> = Result<T, DeError>;

fn malformed(what: &str) -> DeError {
    DeError(format!("malformed BSON: {what}"))
}

/// Deserializes `T` from a stored document's bytes.
pub fn from_raw<T: DeserializeOwned>(doc: &[u8]) -> DeResult<T> {
    T::deserialize(whole(doc)?)
}

/// A whole document's bytes as a value, once its frame is checked: length
/// prefix equal to the length, at least 5 bytes, last byte NUL.
fn whole(doc: &[u8]) -> DeResult<Value<'_>> {
    let framed = doc.len() >= 5 && le_i32(doc, 0)? as usize == doc.len() && doc[doc.len() - 1] == 0;
    if !framed {
        return Err(malformed("bad document frame"));
    }
    Ok(Value {
        kind: ElementType::EmbeddedDocument,
        b: doc,
        start: 0,
        end: doc.len(),
    })
}

/// `_id` and the first element named by each of `fields` at the top of
/// stored document `doc`, as [`pick_top_level`](super::project::pick_top_level)
/// finds them over bson's iterator, found by this module's walk over the
/// bytes (keys found a word at a time, no error values built). Each element
/// walked is checked as bson's iterator checks it, so that where that
/// iterator would fail before the fields are found, this gives up too.
/// `None` (`found` then in any state) when the walk meets a type it leaves
/// to bson, an array among the values returned, or bytes that do not parse:
/// bson's iterator then gives the same values or the error.
pub(crate) fn pick_top_level_refs<'a>(
    doc: &'a [u8],
    fields: &[String],
    found: &mut [Option<(&'a str, RawBsonRef<'a>)>],
) -> Option<Option<RawBsonRef<'a>>> {
    let mut elements = whole(doc).ok()?.elements().ok()?;
    let walk = std::iter::from_fn(|| match elements.next_element() {
        Ok(Some((key, value))) => {
            let checked = value.to_raw_ref().is_some()
                || (value.kind == ElementType::Array
                    && RawDocument::from_bytes(&value.b[value.start..value.end]).is_ok());
            Some(if checked { Ok((key, value)) } else { Err(()) })
        }
        Ok(None) => None,
        Err(_) => Some(Err(())),
    });
    with_slots(fields.len(), |values| {
        let id = super::project::pick_top_level(walk, fields, values).ok()?;
        for (slot, value) in found.iter_mut().zip(values.iter()) {
            *slot = match value {
                Some((key, v)) => Some((*key, v.to_raw_ref()?)),
                None => None,
            };
        }
        id.map_or(Some(None), |v| v.to_raw_ref().map(Some))
    })
}

/// Runs `f` on `n` empty slots for found fields: on the stack when few.
fn with_slots<'a, R>(n: usize, f: impl FnOnce(&mut [Option<(&'a str, Value<'a>)>]) -> R) -> R {
    if n <= INLINE_FIELDS {
        f(&mut [None; INLINE_FIELDS][..n])
    } else {
        f(&mut vec![None; n])
    }
}

/// Fields a projection names, found without allocating when few.
const INLINE_FIELDS: usize = 8;

/// Deserializes `T` from `_id` and the top-level `fields` of a stored
/// document (the first of each name, in that order): what [`from_raw`]
/// gives on the document projected to them, without building it.
pub fn from_raw_fields<T: DeserializeOwned>(doc: &[u8], fields: &[String]) -> DeResult<T> {
    let mut elements = whole(doc)?.elements()?;
    with_slots(fields.len(), |found| {
        let elements = std::iter::from_fn(|| elements.next_element().transpose());
        let id = super::project::pick_top_level(elements, fields, found)?;
        T::deserialize(MapAccessDeserializer::new(Listed {
            id,
            found,
            pos: 0,
            pending: None,
        }))
    })
}

/// `_id`, then the fields found, as a map.
struct Listed<'a, 'f> {
    id: Option<Value<'a>>,
    found: &'f [Option<(&'a str, Value<'a>)>],
    /// The next field to offer.
    pos: usize,
    pending: Option<Value<'a>>,
}

impl<'de> MapAccess<'de> for Listed<'de, '_> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> DeResult<Option<K::Value>> {
        if let Some(id) = self.id.take() {
            self.pending = Some(id);
            return seed.deserialize(BorrowedStrDeserializer::new("_id")).map(Some);
        }
        while self.pos < self.found.len() {
            let pos = self.pos;
            self.pos += 1;
            if let Some((key, value)) = self.found[pos] {
                self.pending = Some(value);
                return seed.deserialize(BorrowedStrDeserializer::new(key)).map(Some);
            }
        }
        Ok(None)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> DeResult<V::Value> {
        pending_value(&mut self.pending, seed)
    }
}

/// The value whose key a map access last handed out.
fn pending_value<'de, V: DeserializeSeed<'de>>(
    pending: &mut Option<Value<'de>>,
    seed: V,
) -> DeResult<V::Value> {
    let value = pending
        .take()
        .ok_or_else(|| DeError("a value asked for before its key".into()))?;
    seed.deserialize(value)
}

pub(super) fn le_i32(b: &[u8], at: usize) -> DeResult<i32> {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map(i32::from_le_bytes)
        .ok_or_else(|| malformed("truncated value"))
}

fn le_i64(b: &[u8], at: usize) -> DeResult<i64> {
    b.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map(i64::from_le_bytes)
        .ok_or_else(|| malformed("truncated value"))
}

/// The length field at `at` as a length of at least `min` that fits in `b`.
fn length(b: &[u8], at: usize, min: usize) -> DeResult<usize> {
    let n = usize::try_from(le_i32(b, at)?).map_err(|_| malformed("negative length"))?;
    if n < min || at.checked_add(n).is_none_or(|e| e > b.len()) {
        return Err(malformed("bad length"));
    }
    Ok(n)
}

/// Where the C string starting at `at` ends (its NUL byte).
pub(super) fn cstring_end(b: &[u8], at: usize) -> DeResult<usize> {
    b.get(at..)
        .and_then(super::nul_at)
        .map(|n| at + n)
        .ok_or_else(|| malformed("unterminated name"))
}

/// Where the value of type `kind` starting at `start` ends.
pub(super) fn value_end(kind: ElementType, b: &[u8], start: usize) -> DeResult<usize> {
    use ElementType as E;
    let fixed = |n: usize| {
        if start + n <= b.len() {
            Ok(start + n)
        } else {
            Err(malformed("truncated value"))
        }
    };
    match kind {
        E::Double | E::DateTime | E::Int64 | E::Timestamp => fixed(8),
        E::Int32 => fixed(4),
        E::Boolean => fixed(1),
        E::ObjectId => fixed(12),
        E::Decimal128 => fixed(16),
        E::Null | E::Undefined | E::MinKey | E::MaxKey => Ok(start),
        E::String | E::JavaScriptCode | E::Symbol => {
            let n = length(b, start, 1)?;
            fixed(4 + n)
        }
        E::EmbeddedDocument | E::Array | E::JavaScriptCodeWithScope => Ok(start + length(b, start, 5)?),
        E::Binary => {
            let n = length(b, start, 0)?;
            fixed(4 + 1 + n)
        }
        E::RegularExpression => Ok(cstring_end(b, cstring_end(b, start)? + 1)? + 1),
        E::DbPointer => {
            let n = length(b, start, 1)?;
            fixed(4 + n + 12)
        }
    }
}

/// One value: its type and its bytes `b[start..end]`.
#[derive(Clone, Copy)]
struct Value<'a> {
    kind: ElementType,
    b: &'a [u8],
    start: usize,
    end: usize,
}

impl<'a> Value<'a> {
    fn string(&self) -> DeResult<&'a str> {
        // Length prefix, bytes, NUL; the length counts the NUL.
        let body = self
            .b
            .get(self.start + 4..self.end - 1)
            .ok_or_else(|| malformed("bad string"))?;
        if self.b[self.end - 1] != 0 {
            return Err(malformed("unterminated string"));
        }
        super::utf8(body).ok_or_else(|| malformed("string is not UTF-8"))
    }

    /// The value as bson's borrowed form, checked as bson's iterator checks
    /// it (a string's frame and UTF-8, a document's frame, a bool's byte);
    /// `None` for the types left to bson (arrays among them: bson lends no
    /// way to make a `RawArray`) and for bytes it would refuse.
    fn to_raw_ref(self) -> Option<RawBsonRef<'a>> {
        use ElementType as E;
        let bytes = self.b.get(self.start..self.end)?;
        Some(match self.kind {
            E::Double => RawBsonRef::Double(f64::from_le_bytes(bytes.try_into().ok()?)),
            E::String => RawBsonRef::String(self.string().ok()?),
            E::EmbeddedDocument => RawBsonRef::Document(RawDocument::from_bytes(bytes).ok()?),
            E::Boolean => match bytes {
                [0] => RawBsonRef::Boolean(false),
                [1] => RawBsonRef::Boolean(true),
                _ => return None,
            },
            E::Null => RawBsonRef::Null,
            E::Int32 => RawBsonRef::Int32(i32::from_le_bytes(bytes.try_into().ok()?)),
            E::Int64 => RawBsonRef::Int64(i64::from_le_bytes(bytes.try_into().ok()?)),
            E::DateTime => RawBsonRef::DateTime(bson::DateTime::from_millis(i64::from_le_bytes(
                bytes.try_into().ok()?,
            ))),
            E::ObjectId => RawBsonRef::ObjectId(bson::oid::ObjectId::from_bytes(bytes.try_into().ok()?)),
            _ => return None,
        })
    }

    /// The elements of a document or array value.
    fn elements(&self) -> DeResult<Elements<'a>> {
        if self.end - self.start < 5 || self.b[self.end - 1] != 0 {
            return Err(malformed("bad document"));
        }
        Ok(Elements {
            b: &self.b[..self.end - 1],
            at: self.start + 4,
            pending: None,
        })
    }

    /// The value as an owned `Bson`, through bson's own parser.
    fn to_bson(self) -> DeResult<Bson> {
        // A one-element document around the value's bytes: bson parses it.
        let body = &self.b[self.start..self.end];
        let len = 4 + 1 + 1 + body.len() + 1;
        let mut bytes = Vec::with_capacity(len);
        bytes.extend_from_slice(
            &i32::try_from(len)
                .map_err(|_| malformed("too long"))?
                .to_le_bytes(),
        );
        bytes.push(self.kind as u8);
        bytes.push(0);
        bytes.extend_from_slice(body);
        bytes.push(0);
        let doc = RawDocumentBuf::from_bytes(bytes).map_err(|e| malformed(&e.to_string()))?;
        let (_, value) = doc
            .iter()
            .next()
            .ok_or_else(|| malformed("empty value"))?
            .map_err(|e| malformed(&e.to_string()))?;
        crate::value::to_bson(value).map_err(|e| malformed(&e.to_string()))
    }

    fn slow(self) -> DeResult<bson::Deserializer> {
        // Not human-readable, as the fast path and bson's raw reader.
        #[allow(deprecated)]
        let options = bson::DeserializerOptions::builder().human_readable(false).build();
        #[allow(deprecated)]
        let de = bson::Deserializer::new_with_options(self.to_bson()?, options);
        Ok(de)
    }
}

fn from_bson_error(e: bson::de::Error) -> DeError {
    DeError(e.to_string())
}

/// Hands one `deserialize_*` call to bson's `Deserializer` over the value.
macro_rules! slow {
    ($self:ident . $method:ident ( $($arg:expr),* )) => {
        de::Deserializer::$method($self.slow()?, $($arg),*).map_err(from_bson_error)
    };
}

impl<'de> de::Deserializer<'de> for Value<'de> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> DeResult<V::Value> {
        use ElementType as E;
        match self.kind {
            E::Double => visitor.visit_f64(f64::from_bits(le_i64(self.b, self.start)? as u64)),
            E::String => visitor.visit_borrowed_str(self.string()?),
            E::EmbeddedDocument => visitor.visit_map(self.elements()?),
            E::Array => visitor.visit_seq(self.elements()?),
            E::Boolean => match self.b[self.start] {
                0 => visitor.visit_bool(false),
                1 => visitor.visit_bool(true),
                _ => Err(malformed("bad boolean")),
            },
            E::Null => visitor.visit_unit(),
            E::Int32 => visitor.visit_i32(le_i32(self.b, self.start)?),
            E::Int64 => visitor.visit_i64(le_i64(self.b, self.start)?),
            // As bson presents them: `{"$date": {"$numberLong": ".."}}`, `{"$oid": ".."}`.
            E::DateTime => visitor.visit_map(Tagged {
                key: "$date",
                value: Some(Inner::Map("$numberLong", le_i64(self.b, self.start)?.to_string())),
            }),
            E::ObjectId => {
                let bytes: [u8; 12] = self.b[self.start..self.end]
                    .try_into()
                    .map_err(|_| malformed("bad ObjectId"))?;
                visitor.visit_map(Tagged {
                    key: "$oid",
                    value: Some(Inner::Text(bson::oid::ObjectId::from_bytes(bytes).to_hex())),
                })
            }
            _ => slow!(self.deserialize_any(visitor)),
        }
    }

    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> DeResult<V::Value> {
        match self.kind {
            // A date asked for as an `i64`: its milliseconds since the epoch
            // (where bson refuses), so that a date field reads like SQLite's
            // INTEGER timestamps, without the extended-JSON map.
            ElementType::DateTime => visitor.visit_i64(le_i64(self.b, self.start)?),
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> DeResult<V::Value> {
        match self.kind {
            ElementType::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> DeResult<V::Value> {
        // bson's own types (raw documents, UUIDs, …) ask by private names.
        if name.starts_with("$__") {
            return slow!(self.deserialize_newtype_struct(name, visitor));
        }
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> DeResult<V::Value> {
        match self.kind {
            ElementType::String => visitor.visit_enum(self.string()?.into_deserializer()),
            _ => slow!(self.deserialize_enum(name, variants, visitor)),
        }
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> DeResult<V::Value> {
        match self.kind {
            // How bson hands an ObjectId to a reader that is not human-readable.
            ElementType::ObjectId => visitor.visit_borrowed_bytes(&self.b[self.start..self.end]),
            _ => slow!(self.deserialize_bytes(visitor)),
        }
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> DeResult<V::Value> {
        slow!(self.deserialize_byte_buf(visitor))
    }

    fn is_human_readable(&self) -> bool {
        // As bson's deserializers.
        false
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> DeResult<V::Value> {
        // Skipped by its length: nothing inside is read.
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        unit unit_struct seq tuple tuple_struct map struct identifier
    }
}

/// A map of one entry, `{key: value}`.
struct Tagged {
    key: &'static str,
    /// `None` once the value is taken.
    value: Option<Inner>,
}

enum Inner {
    Text(String),
    /// `{key: text}`.
    Map(&'static str, String),
}

impl<'de> MapAccess<'de> for Tagged {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> DeResult<Option<K::Value>> {
        if self.value.is_none() {
            return Ok(None);
        }
        seed.deserialize(BorrowedStrDeserializer::new(self.key)).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> DeResult<V::Value> {
        match self.value.take() {
            Some(Inner::Text(text)) => seed.deserialize(text.into_deserializer()),
            Some(Inner::Map(key, text)) => seed.deserialize(MapAccessDeserializer::new(Tagged {
                key,
                value: Some(Inner::Text(text)),
            })),
            None => Err(DeError("a value asked for twice".into())),
        }
    }
}

/// The elements of a document (as a map) or an array (as a sequence).
struct Elements<'a> {
    /// The container's bytes without its final NUL.
    b: &'a [u8],
    at: usize,
    /// The value whose key `next_key_seed` returned.
    pending: Option<Value<'a>>,
}

impl<'a> Elements<'a> {
    /// The next element's key and value, or `None` at the end.
    fn next_element(&mut self) -> DeResult<Option<(&'a str, Value<'a>)>> {
        if self.at >= self.b.len() {
            return Ok(None);
        }
        let kind = ElementType::from(self.b[self.at]).ok_or_else(|| malformed("unknown element type"))?;
        let (key, len) = match super::key_str(&self.b[self.at + 1..]) {
            Some(key) => key,
            None => {
                // Which of the two it is, for the message.
                cstring_end(self.b, self.at + 1)?;
                return Err(malformed("name is not UTF-8"));
            }
        };
        let start = self.at + 1 + len + 1;
        let end = value_end(kind, self.b, start)?;
        self.at = end;
        Ok(Some((
            key,
            Value {
                kind,
                b: self.b,
                start,
                end,
            },
        )))
    }
}

impl<'de> MapAccess<'de> for Elements<'de> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> DeResult<Option<K::Value>> {
        match self.next_element()? {
            None => Ok(None),
            Some((key, value)) => {
                self.pending = Some(value);
                seed.deserialize(BorrowedStrDeserializer::new(key)).map(Some)
            }
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> DeResult<V::Value> {
        pending_value(&mut self.pending, seed)
    }
}

impl<'de> SeqAccess<'de> for Elements<'de> {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> DeResult<Option<T::Value>> {
        match self.next_element()? {
            None => Ok(None),
            Some((_, value)) => seed.deserialize(value).map(Some),
        }
    }
}
