//! How deeply a document nests, found without recursion.
//!
//! Converting BSON to a `Document`, walking a path and writing bytes all
//! recurse once per level of nesting, so a document nested a few thousand
//! levels deep overflows a thread's stack (a server connection's first). Slate
//! stores and accepts documents nested at most [`MAX_NESTING`] levels, as
//! MongoDB does, and checks incoming bytes with this iterative walk before
//! anything recursive reads them.

use bson::spec::ElementType;

use super::de::{cstring_end, le_i32, value_end};

/// The most levels of documents and arrays a document may hold below its top
/// level (MongoDB's limit): `{"a": {"b": 1}}` holds one.
pub const MAX_NESTING: usize = 100;

/// Whether the BSON document `bytes` holds documents or arrays nested more
/// than `limit` levels below its top level. Bytes that stop parsing answer
/// `false` at the point where they stop: a parser then fails there, at no
/// greater depth than this walk reached.
pub fn nested_deeper_than(bytes: &[u8], limit: usize) -> bool {
    let Ok(len) = le_i32(bytes, 0) else {
        return false;
    };
    let Some(mut end) = usize::try_from(len)
        .ok()
        .filter(|&n| n >= 5 && n <= bytes.len())
        .map(|n| n - 1)
    else {
        return false;
    };
    // The closing NUL of each enclosing container; `end` is the current one's.
    let mut outer: Vec<usize> = Vec::new();
    let mut at = 4;
    loop {
        if at >= end {
            match outer.pop() {
                Some(e) => {
                    at = end + 1;
                    end = e;
                    continue;
                }
                None => return false,
            }
        }
        let Some(kind) = ElementType::from(bytes[at]) else {
            return false;
        };
        let Ok(key_end) = cstring_end(bytes, at + 1) else {
            return false;
        };
        let start = key_end + 1;
        let Ok(next) = value_end(kind, bytes, start) else {
            return false;
        };
        if next > end {
            return false;
        }
        // Where a nested document's elements start (its frame is checked by
        // `value_end`: at least five bytes, in bounds).
        let inner = match kind {
            ElementType::EmbeddedDocument | ElementType::Array => Some(start + 4),
            // Total length, the code as a string, then the scope document.
            ElementType::JavaScriptCodeWithScope => le_i32(bytes, start + 4)
                .ok()
                .and_then(|n| usize::try_from(n).ok())
                .map(|n| start + 4 + 4 + n + 4),
            _ => None,
        };
        match inner {
            Some(first) if first < next && bytes[next - 1] == 0 => {
                if outer.len() + 1 > limit {
                    return true;
                }
                outer.push(end);
                end = next - 1;
                at = first;
            }
            Some(_) => return false,
            None => at = next,
        }
    }
}
