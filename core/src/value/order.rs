//! MongoDB's BSON comparison order over borrowed raw values.
//!
//! Values compare first by [`TypeBracket`], then within the bracket:
//! - numbers (int32, int64, double) by numeric value, exactly: `1 == 1i64 == 1.0`,
//!   `-0.0 == 0.0`, NaN equals NaN and sorts below every other number, and an int64 above
//!   2^53 is compared with a double without rounding either;
//! - decimal128 by numeric value within a bracket of its own just above the numbers
//!   (a Slate difference: MongoDB compares decimals with the other numbers);
//! - strings and symbols by their UTF-8 bytes (binary collation);
//! - documents element by element (the element's type bracket, then its field name, then its
//!   value), a document that is a prefix of another sorting first;
//! - arrays element by element, a prefix sorting first;
//! - binary data by length, then subtype, then bytes;
//! - the rest as listed on [`TypeBracket`].

use std::cmp::Ordering;

use bson::{RawArray, RawBsonRef, RawDbPointerRef, RawDocument};

use super::decimal;

/// The type brackets of the comparison order, lowest first. The discriminant is the tag byte
/// that starts every encoded value (see `encoding`), so tag order is bracket order; all tags
/// are above `0x00`, the end marker of encoded documents and arrays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
#[repr(u8)]
pub enum TypeBracket {
    /// MinKey, below everything.
    MinKey = 0x10,
    /// Null and undefined (and a missing field, where a query treats it as a value).
    Null = 0x14,
    /// int32, int64 and double, compared as numbers.
    Number = 0x18,
    /// decimal128, compared as numbers among themselves.
    Decimal = 0x1C,
    /// Strings and symbols.
    String = 0x20,
    /// Embedded documents.
    Document = 0x24,
    /// Arrays.
    Array = 0x28,
    /// Binary data.
    Binary = 0x2C,
    /// ObjectId, by its 12 bytes.
    ObjectId = 0x30,
    /// Booleans, false before true.
    Boolean = 0x34,
    /// UTC datetimes, by milliseconds since the epoch.
    DateTime = 0x38,
    /// Timestamps, by (time, increment).
    Timestamp = 0x3C,
    /// Regular expressions, by pattern then options.
    Regex = 0x40,
    /// DBPointer (deprecated), by namespace then ObjectId.
    DbPointer = 0x44,
    /// JavaScript code, by its text.
    JavaScript = 0x48,
    /// JavaScript code with scope, by text then scope document.
    JavaScriptWithScope = 0x4C,
    /// MaxKey, above everything.
    MaxKey = 0xF0,
}

impl TypeBracket {
    /// The tag byte that starts encodings of values in this bracket.
    pub fn tag(self) -> u8 {
        self as u8
    }

    /// The bracket whose tag is `tag`, if any.
    pub fn from_tag(tag: u8) -> Option<TypeBracket> {
        use TypeBracket as B;
        [
            B::MinKey,
            B::Null,
            B::Number,
            B::Decimal,
            B::String,
            B::Document,
            B::Array,
            B::Binary,
            B::ObjectId,
            B::Boolean,
            B::DateTime,
            B::Timestamp,
            B::Regex,
            B::DbPointer,
            B::JavaScript,
            B::JavaScriptWithScope,
            B::MaxKey,
        ]
        .into_iter()
        .find(|b| b.tag() == tag)
    }
}

/// The type bracket of a value.
pub fn bracket(v: RawBsonRef<'_>) -> TypeBracket {
    use TypeBracket as B;
    match v {
        RawBsonRef::MinKey => B::MinKey,
        RawBsonRef::Null | RawBsonRef::Undefined => B::Null,
        RawBsonRef::Int32(_) | RawBsonRef::Int64(_) | RawBsonRef::Double(_) => B::Number,
        RawBsonRef::Decimal128(_) => B::Decimal,
        RawBsonRef::String(_) | RawBsonRef::Symbol(_) => B::String,
        RawBsonRef::Document(_) => B::Document,
        RawBsonRef::Array(_) => B::Array,
        RawBsonRef::Binary(_) => B::Binary,
        RawBsonRef::ObjectId(_) => B::ObjectId,
        RawBsonRef::Boolean(_) => B::Boolean,
        RawBsonRef::DateTime(_) => B::DateTime,
        RawBsonRef::Timestamp(_) => B::Timestamp,
        RawBsonRef::RegularExpression(_) => B::Regex,
        RawBsonRef::DbPointer(_) => B::DbPointer,
        RawBsonRef::JavaScriptCode(_) => B::JavaScript,
        RawBsonRef::JavaScriptCodeWithScope(_) => B::JavaScriptWithScope,
        RawBsonRef::MaxKey => B::MaxKey,
    }
}

/// Compares two values in MongoDB's order (see the module docs for Slate's differences).
///
/// `Equal` means "the same value" for queries and indexes: `1`, `1i64` and `1.0` are equal,
/// as are null and undefined, and a string and a symbol with the same text.
pub fn compare(a: RawBsonRef<'_>, b: RawBsonRef<'_>) -> Ordering {
    let (ba, bb) = (bracket(a), bracket(b));
    if ba != bb {
        return ba.cmp(&bb);
    }
    match (a, b) {
        (RawBsonRef::Decimal128(x), RawBsonRef::Decimal128(y)) => decimal::sort_key(x)
            .as_slice()
            .cmp(decimal::sort_key(y).as_slice()),
        (RawBsonRef::Document(x), RawBsonRef::Document(y)) => compare_documents(x, y),
        (RawBsonRef::Array(x), RawBsonRef::Array(y)) => compare_arrays(x, y),
        (RawBsonRef::Binary(x), RawBsonRef::Binary(y)) => x
            .bytes
            .len()
            .cmp(&y.bytes.len())
            .then(u8::from(x.subtype).cmp(&u8::from(y.subtype)))
            .then(x.bytes.cmp(y.bytes)),
        (RawBsonRef::ObjectId(x), RawBsonRef::ObjectId(y)) => x.bytes().cmp(&y.bytes()),
        (RawBsonRef::Boolean(x), RawBsonRef::Boolean(y)) => x.cmp(&y),
        (RawBsonRef::DateTime(x), RawBsonRef::DateTime(y)) => x.timestamp_millis().cmp(&y.timestamp_millis()),
        (RawBsonRef::Timestamp(x), RawBsonRef::Timestamp(y)) => {
            (x.time, x.increment).cmp(&(y.time, y.increment))
        }
        (RawBsonRef::RegularExpression(x), RawBsonRef::RegularExpression(y)) => x
            .pattern
            .as_bytes()
            .cmp(y.pattern.as_bytes())
            .then(x.options.as_bytes().cmp(y.options.as_bytes())),
        (RawBsonRef::DbPointer(x), RawBsonRef::DbPointer(y)) => db_pointer_parts(x).cmp(&db_pointer_parts(y)),
        (RawBsonRef::JavaScriptCode(x), RawBsonRef::JavaScriptCode(y)) => x.as_bytes().cmp(y.as_bytes()),
        (RawBsonRef::JavaScriptCodeWithScope(x), RawBsonRef::JavaScriptCodeWithScope(y)) => x
            .code
            .as_bytes()
            .cmp(y.code.as_bytes())
            .then_with(|| compare_documents(x.scope, y.scope)),
        _ => match (string_of(a), string_of(b)) {
            (Some(x), Some(y)) => x.as_bytes().cmp(y.as_bytes()),
            _ => match (Number::of(a), Number::of(b)) {
                (Some(x), Some(y)) => x.cmp_exact(y),
                // MinKey, Null/Undefined, MaxKey: one value per bracket.
                _ => Ordering::Equal,
            },
        },
    }
}

fn string_of(v: RawBsonRef<'_>) -> Option<&str> {
    match v {
        RawBsonRef::String(s) | RawBsonRef::Symbol(s) => Some(s),
        _ => None,
    }
}

/// Element by element: bracket, then field name, then value; a prefix sorts first.
pub(crate) fn compare_documents(a: &RawDocument, b: &RawDocument) -> Ordering {
    let mut ia = a.iter().map_while(Result::ok);
    let mut ib = b.iter().map_while(Result::ok);
    loop {
        match (ia.next(), ib.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some((ka, va)), Some((kb, vb))) => {
                let o = bracket(va)
                    .cmp(&bracket(vb))
                    .then(ka.as_bytes().cmp(kb.as_bytes()))
                    .then_with(|| compare(va, vb));
                if o.is_ne() {
                    return o;
                }
            }
        }
    }
}

/// Element by element; a prefix sorts first.
pub(crate) fn compare_arrays(a: &RawArray, b: &RawArray) -> Ordering {
    let mut ia = a.into_iter().map_while(Result::ok);
    let mut ib = b.into_iter().map_while(Result::ok);
    loop {
        match (ia.next(), ib.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) => {
                let o = compare(x, y);
                if o.is_ne() {
                    return o;
                }
            }
        }
    }
}

/// The namespace and ObjectId of a DBPointer. The bson crate keeps them private, so they are
/// read back from the element's wire bytes (deprecated type: the allocation does not matter).
pub(crate) fn db_pointer_parts(p: RawDbPointerRef<'_>) -> (String, [u8; 12]) {
    let mut doc = bson::RawDocumentBuf::new();
    doc.append_ref("", RawBsonRef::DbPointer(p));
    // Layout: i32 length, 0x0C, "" + NUL, i32 string length (incl. NUL), string, NUL, 12 bytes.
    let bytes = doc.as_bytes();
    let parts = (|| {
        let len = i32::from_le_bytes(bytes.get(6..10)?.try_into().ok()?);
        let end = 10 + usize::try_from(len).ok()?.checked_sub(1)?;
        let ns = std::str::from_utf8(bytes.get(10..end)?).ok()?.to_owned();
        let oid: [u8; 12] = bytes.get(end + 1..end + 13)?.try_into().ok()?;
        Some((ns, oid))
    })();
    parts.unwrap_or_default()
}

/// A number of the Number bracket: an exact integer or a double.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Number {
    Int(i64),
    Float(f64),
}

/// 2^63 as a double: the first double above every i64.
pub(crate) const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;

impl Number {
    pub(crate) fn of(v: RawBsonRef<'_>) -> Option<Number> {
        match v {
            RawBsonRef::Int32(i) => Some(Number::Int(i64::from(i))),
            RawBsonRef::Int64(i) => Some(Number::Int(i)),
            RawBsonRef::Double(f) => Some(Number::Float(f)),
            _ => None,
        }
    }

    /// Exact numeric order; NaN equals NaN and sorts below everything else.
    pub(crate) fn cmp_exact(self, other: Number) -> Ordering {
        match (self, other) {
            (Number::Int(x), Number::Int(y)) => x.cmp(&y),
            (Number::Float(x), Number::Float(y)) => cmp_f64(x, y),
            (Number::Int(x), Number::Float(y)) => cmp_i64_f64(x, y),
            (Number::Float(x), Number::Int(y)) => cmp_i64_f64(y, x).reverse(),
        }
    }
}

fn cmp_f64(x: f64, y: f64) -> Ordering {
    match (x.is_nan(), y.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        // Neither is NaN, so partial_cmp is total here (and -0.0 == 0.0).
        (false, false) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
    }
}

/// Compares an integer with a double without rounding either.
fn cmp_i64_f64(i: i64, f: f64) -> Ordering {
    if f.is_nan() {
        return Ordering::Greater;
    }
    if f >= TWO_POW_63 {
        return Ordering::Less;
    }
    if f < -TWO_POW_63 {
        return Ordering::Greater;
    }
    // f is in [-2^63, 2^63): its integer part is an exact i64.
    let t = f.trunc();
    match i.cmp(&(t as i64)) {
        Ordering::Equal => {
            let frac = f - t;
            if frac > 0.0 {
                Ordering::Less
            } else if frac < 0.0 {
                Ordering::Greater
            } else {
                Ordering::Equal
            }
        }
        o => o,
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn big_integers_compare_exactly_with_doubles() {
        let big = (1i64 << 53) + 1;
        let d = (1u64 << 53) as f64;
        assert_eq!(cmp_i64_f64(big, d), Ordering::Greater);
        assert_eq!(cmp_i64_f64(big - 1, d), Ordering::Equal);
        assert_eq!(cmp_i64_f64(i64::MAX, TWO_POW_63), Ordering::Less);
        assert_eq!(cmp_i64_f64(i64::MIN, -TWO_POW_63), Ordering::Equal);
        assert_eq!(cmp_i64_f64(0, -0.5), Ordering::Greater);
        assert_eq!(cmp_i64_f64(-1, -0.5), Ordering::Less);
        assert_eq!(cmp_i64_f64(i64::MIN, f64::NEG_INFINITY), Ordering::Greater);
        assert_eq!(cmp_i64_f64(i64::MIN, f64::NAN), Ordering::Greater);
    }

    #[test]
    fn tags_round_trip() {
        for t in 0..=u8::MAX {
            if let Some(b) = TypeBracket::from_tag(t) {
                assert_eq!(b.tag(), t);
            }
        }
        assert_eq!(TypeBracket::from_tag(0), None);
    }
}
