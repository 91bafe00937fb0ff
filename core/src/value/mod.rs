//! BSON values as Slate orders, encodes and finds them.
//!
//! - [`compare`]: MongoDB's comparison order over borrowed [`RawBsonRef`] values (type brackets
//!   first, numbers compared across int32/int64/double exactly).
//! - [`encode_value`] / [`decode_value`]: an order-preserving, self-delimiting byte encoding.
//!   For all values `a`, `b`: `compare(a, b) == enc(a).cmp(&enc(b))`, so index range scans and
//!   `_id` keys sort exactly like the values they hold. The byte layout is in
//!   `docs/format-values.md`.
//! - [`visit_path`] / [`lookup_path`] / [`index_values`]: the values at a dot path, with
//!   MongoDB's array expansion; shared by index maintenance, sort keys and the filter language.
//!
//! - [`to_bytes`]: `bson::Document` to raw bytes, the same as `bson::to_vec`, directly for the
//!   common value types.
//! - [`Materializer`]: raw bytes to `bson::Document`, reusing the field layout of the previous
//!   document (the one place documents are materialised).
//!
//! Malformed raw bytes never panic: a document or array whose bytes stop parsing is read up to
//! the last well-formed element, consistently in comparison, encoding and path lookup.
//!
//! [`RawBsonRef`]: bson::RawBsonRef

mod de;
mod decimal;
mod encoding;
mod materialize;
mod nesting;
mod order;
mod path;
mod project;
mod serialize;
#[cfg(test)]
mod tests;

pub(crate) use de::pick_top_level_refs;
pub use de::{from_raw, from_raw_fields, DeError};
pub use encoding::{decode_value, encode_id, encode_id_into, encode_key_value, encode_value, key_successor};
pub use materialize::{to_bson, Materializer, RawResult};
pub use nesting::{nested_deeper_than, MAX_NESTING};
pub use order::{bracket, compare, TypeBracket};
pub(crate) use path::crosses_array;
pub use path::{
    array_index, best_sort_keys, better_sort_key, index_values, is_under, lookup_path, visit_path,
    visit_sort_keys, FieldPath, LeafArrays, PathValue, SortPath,
};
pub(crate) use project::{pick_top_level, project_path};
pub use serialize::{to_bytes, to_shared_bytes};

/// `b` as text, if it is UTF-8. Stored keys and most string values are short
/// ASCII, which `is_ascii` checks a word at a time, where `str::from_utf8`
/// walks a short input byte by byte: on 9-field documents its validation
/// was a sixth of a typed `get`'s instructions.
#[inline]
pub(crate) fn utf8(b: &[u8]) -> Option<&str> {
    if b.is_ascii() {
        // SAFETY: every ASCII byte sequence is valid UTF-8.
        #[allow(unsafe_code)]
        return Some(unsafe { std::str::from_utf8_unchecked(b) });
    }
    std::str::from_utf8(b).ok()
}

/// Where the first NUL byte of `b` is (the end of a BSON key), looked for
/// eight bytes at a time: keys are a few to a few dozen bytes, where a
/// byte-by-byte search was about a third of a field lookup's time and
/// `memchr`'s call and set-up cost more than they saved on a sorted find.
#[inline]
pub(crate) fn nul_at(b: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let mut words = b.chunks_exact(8);
    let mut at = 0;
    for word in words.by_ref() {
        let w = u64::from_le_bytes(word.try_into().expect("eight bytes"));
        // A byte's high bit is set here if it is 0; bytes above a 0 may be
        // flagged too, never a byte below the first 0, which is what the
        // lowest flag (the first byte, read little-endian) gives.
        let zeros = w.wrapping_sub(ONES) & !w & HIGHS;
        if zeros != 0 {
            return Some(at + (zeros.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    words.remainder().iter().position(|&c| c == 0).map(|n| at + n)
}

/// The BSON key at the start of `b` (a C string) as text, and where its NUL
/// byte is: `None` when no NUL ends it or it is not UTF-8. The NUL search
/// notes on the way, eight bytes at a time, whether any byte before it has
/// its high bit set, so an ASCII key (the usual one) needs no second pass to
/// be checked as text.
#[inline]
pub(crate) fn key_str(b: &[u8]) -> Option<(&str, usize)> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let mut words = b.chunks_exact(8);
    let mut at = 0;
    let mut high = 0;
    let len = loop {
        let Some(word) = words.next() else {
            let rest = words.remainder();
            let n = rest.iter().position(|&c| c == 0)?;
            high |= rest[..n].iter().fold(0, |h, &c| h | u64::from(c & 0x80));
            break at + n;
        };
        let w = u64::from_le_bytes(word.try_into().expect("eight bytes"));
        let zeros = w.wrapping_sub(ONES) & !w & HIGHS;
        if zeros != 0 {
            // The bytes below the first 0 (see `nul_at`).
            let n = zeros.trailing_zeros() / 8;
            let below = if n == 0 { 0 } else { u64::MAX >> (64 - 8 * n) };
            high |= w & HIGHS & below;
            break at + n as usize;
        }
        high |= w & HIGHS;
        at += 8;
    };
    let key = &b[..len];
    if high == 0 {
        // SAFETY: every ASCII byte sequence is valid UTF-8.
        #[allow(unsafe_code)]
        return Some((unsafe { std::str::from_utf8_unchecked(key) }, len));
    }
    std::str::from_utf8(key).ok().map(|k| (k, len))
}

/// Errors of the value layer: bad `_id` types, undecodable key bytes, bad field paths.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ValueError {
    /// An `_id` that is not an int32, int64, string or ObjectId.
    #[error("an _id must be an int32, int64, string or ObjectId, got {found}")]
    UnsupportedIdType {
        /// The BSON type name of the rejected value.
        found: &'static str,
    },
    /// Bytes that are not a valid encoding (truncated key, unknown tag, bad escape).
    #[error("cannot decode an encoded value at byte {offset}: {reason}")]
    Decode {
        /// Offset into the input where decoding failed.
        offset: usize,
        /// What was wrong there.
        reason: &'static str,
    },
    /// A field path that is empty, has an empty component or contains a NUL byte.
    #[error("invalid field path {path:?}: {reason}")]
    InvalidPath {
        /// The path as given.
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A `bson::Bson` value that cannot be written as raw BSON (e.g. a key with a NUL byte).
    #[error("cannot convert the value to raw BSON: {message}")]
    Bson {
        /// The bson crate's message.
        message: String,
    },
}

/// Result of the value layer.
pub type Result<T, E = ValueError> = std::result::Result<T, E>;

/// The BSON type name of a value, as used in error messages (`"double"`, `"string"`, ...).
pub fn type_name(t: bson::spec::ElementType) -> &'static str {
    use bson::spec::ElementType as T;
    match t {
        T::Double => "double",
        T::String => "string",
        T::EmbeddedDocument => "object",
        T::Array => "array",
        T::Binary => "binData",
        T::Undefined => "undefined",
        T::ObjectId => "objectId",
        T::Boolean => "bool",
        T::DateTime => "date",
        T::Null => "null",
        T::RegularExpression => "regex",
        T::DbPointer => "dbPointer",
        T::JavaScriptCode => "javascript",
        T::Symbol => "symbol",
        T::JavaScriptCodeWithScope => "javascriptWithScope",
        T::Int32 => "int",
        T::Timestamp => "timestamp",
        T::Int64 => "long",
        T::Decimal128 => "decimal",
        T::MaxKey => "maxKey",
        T::MinKey => "minKey",
    }
}
