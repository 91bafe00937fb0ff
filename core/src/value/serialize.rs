//! `bson::Document` to raw bytes, fast for the common value types.
//!
//! `bson::to_vec` goes through serde: every value passes through several
//! layers of serializer state, and the output grows from empty. A document
//! made of the types most documents hold (strings, numbers, booleans, nulls,
//! dates, ObjectIds, and documents and arrays of them) is written here
//! directly, in one pass into a buffer sized from the document. Anything else
//! (another type, a key that holds a NUL byte, which BSON cannot store)
//! sends the whole document to `bson::to_vec`, which gives the same bytes or
//! the error. Either way the result equals `bson::to_vec(doc)`.

use std::cell::RefCell;
use std::sync::Arc;

use bson::spec::ElementType;
use bson::{Bson, Document};

/// [`to_bytes`] into one shared allocation of the exact size, written
/// through a buffer the thread keeps between calls (no growing, no buffer
/// allocated and freed per document).
pub fn to_shared_bytes(doc: &Document) -> bson::ser::Result<Arc<[u8]>> {
    thread_local! {
        static BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    BUFFER.with(|buffer| {
        let Ok(mut out) = buffer.try_borrow_mut() else {
            return to_bytes(doc).map(Arc::from);
        };
        out.clear();
        if write_document(doc, &mut out).is_some() {
            return Ok(Arc::from(out.as_slice()));
        }
        bson::to_vec(doc).map(Arc::from)
    })
}

/// `doc` as BSON bytes: the same as `bson::to_vec(doc)`.
pub fn to_bytes(doc: &Document) -> bson::ser::Result<Vec<u8>> {
    // A guess at the size: a key, a type byte and a short value per field.
    let mut out = Vec::with_capacity(16 + doc.len() * 32);
    if write_document(doc, &mut out).is_some() {
        return Ok(out);
    }
    bson::to_vec(doc)
}

/// Writes `doc`; `None` (with `out` in any state) if it holds a value or a
/// key this does not write.
pub(super) fn write_document(doc: &Document, out: &mut Vec<u8>) -> Option<()> {
    framed(out, |out| {
        doc.iter()
            .try_for_each(|(key, value)| write_element(key.as_bytes(), value, out))
    })
}

/// Writes `items` as BSON does: a document keyed "0", "1", ...
fn write_array(items: &[Bson], out: &mut Vec<u8>) -> Option<()> {
    framed(out, |out| {
        let mut digits = [0u8; 20];
        items
            .iter()
            .enumerate()
            .try_for_each(|(i, item)| write_element(decimal(i, &mut digits), item, out))
    })
}

/// Writes a document's frame around what `fields` writes: its length
/// before, its terminating NUL after.
fn framed(out: &mut Vec<u8>, fields: impl FnOnce(&mut Vec<u8>) -> Option<()>) -> Option<()> {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    fields(out)?;
    out.push(0);
    let len = i32::try_from(out.len() - start).ok()?;
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    Some(())
}

/// `n` in decimal, written at the end of `buf`.
fn decimal(mut n: usize, buf: &mut [u8; 20]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[at..];
        }
    }
}

/// Writes one element: its type byte, its key as a C string, its value.
fn write_element(key: &[u8], value: &Bson, out: &mut Vec<u8>) -> Option<()> {
    if key.contains(&0) {
        return None;
    }
    let kind = match value {
        Bson::Double(_) => ElementType::Double,
        Bson::String(_) => ElementType::String,
        Bson::Document(_) => ElementType::EmbeddedDocument,
        Bson::Array(_) => ElementType::Array,
        Bson::Boolean(_) => ElementType::Boolean,
        Bson::Null => ElementType::Null,
        Bson::Int32(_) => ElementType::Int32,
        Bson::Int64(_) => ElementType::Int64,
        Bson::DateTime(_) => ElementType::DateTime,
        Bson::ObjectId(_) => ElementType::ObjectId,
        _ => return None,
    };
    out.push(kind as u8);
    out.extend_from_slice(key);
    out.push(0);
    match value {
        Bson::Double(d) => out.extend_from_slice(&d.to_le_bytes()),
        Bson::String(s) => {
            // Its length counts the terminating NUL; it may hold NULs itself.
            let len = i32::try_from(s.len() + 1).ok()?;
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(s.as_bytes());
            out.push(0);
        }
        Bson::Document(doc) => write_document(doc, out)?,
        Bson::Array(items) => write_array(items, out)?,
        Bson::Boolean(b) => out.push(u8::from(*b)),
        Bson::Null => {}
        Bson::Int32(i) => out.extend_from_slice(&i.to_le_bytes()),
        Bson::Int64(i) => out.extend_from_slice(&i.to_le_bytes()),
        Bson::DateTime(dt) => out.extend_from_slice(&dt.timestamp_millis().to_le_bytes()),
        Bson::ObjectId(oid) => out.extend_from_slice(&oid.bytes()),
        _ => return None,
    }
    Some(())
}
