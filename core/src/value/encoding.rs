//! The order-preserving, self-delimiting value encoding used by index keys and `_id` keys.
//!
//! Invariants, for all values `a`, `b` (checked by property tests):
//! 1. `compare(a, b) == enc(a).cmp(&enc(b))`, including `Equal` ⇔ identical bytes;
//! 2. no encoding is a proper prefix of another (self-delimiting), so a concatenation of
//!    encodings compares like the tuple of values, and `decode_value` knows where a value ends.
//!
//! Every encoding is a [`TypeBracket`] tag byte, then a body whose layout depends on the
//! bracket (see `docs/format-values.md`). Bodies are themselves prefix-free and ordered within
//! their bracket, so (2) lifts from the parts to documents and arrays: an element is its tag
//! and body (a document element puts its escaped field name between the two), and the end
//! marker `0x00` sorts below every tag, so a prefix sorts first.

use bson::{
    spec::BinarySubtype, Binary, Bson, DateTime, Document, JavaScriptCodeWithScope, RawArray, RawBson,
    RawBsonRef, RawDocument, RawDocumentBuf, Regex, Timestamp,
};

use super::order::{Number, TWO_POW_63};
use super::{bracket, decimal, type_name, Result, TypeBracket, ValueError};

/// Ends an encoded document or array; below every tag.
const END: u8 = 0x00;
/// Escaped string terminator (`00 01`) and escaped NUL byte (`00 FF`).
const STR_END: [u8; 2] = [0x00, 0x01];
const STR_NUL: [u8; 2] = [0x00, 0xFF];

/// Appends the encoding of `v` to `out`.
pub fn encode_value(v: RawBsonRef<'_>, out: &mut Vec<u8>) {
    out.push(bracket(v).tag());
    encode_body(v, out);
}

/// Encodes an owned `Bson` value (a convenience for callers that hold one). Fails only when
/// the value cannot be written as raw BSON, e.g. a document key with a NUL byte.
pub fn encode_key_value(v: &Bson) -> Result<Vec<u8>> {
    let raw = RawBson::try_from(v.clone()).map_err(|e| ValueError::Bson {
        message: e.to_string(),
    })?;
    let mut out = Vec::new();
    encode_value(raw.as_raw_bson_ref(), &mut out);
    Ok(out)
}

/// Encodes a document `_id`: an int32, int64, string or ObjectId, with the same encoding as
/// [`encode_value`] (so `_id: 1` and `_id: 1i64` are the same id).
pub fn encode_id(id: &Bson) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(16);
    encode_id_into(id, &mut out)?;
    Ok(out)
}

/// [`encode_id`] appended to `out` (a key prefix), without a buffer of its
/// own; `out` is unchanged on error.
pub fn encode_id_into(id: &Bson, out: &mut Vec<u8>) -> Result<()> {
    let v = match id {
        Bson::Int32(i) => RawBsonRef::Int32(*i),
        Bson::Int64(i) => RawBsonRef::Int64(*i),
        Bson::String(s) => RawBsonRef::String(s),
        Bson::ObjectId(o) => RawBsonRef::ObjectId(*o),
        other => {
            return Err(ValueError::UnsupportedIdType {
                found: type_name(other.element_type()),
            })
        }
    };
    encode_value(v, out);
    Ok(())
}

/// The smallest byte string greater than every string that starts with `prefix`, or `None`
/// when there is none (`prefix` empty or all `0xFF`). With a self-delimiting `prefix` that is
/// an encoded value, `[prefix, key_successor(prefix))` is exactly the keys holding that value.
pub fn key_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let last = prefix.iter().rposition(|&b| b != 0xFF)?;
    let mut out = prefix[..=last].to_vec();
    out[last] += 1;
    Some(out)
}

fn encode_body(v: RawBsonRef<'_>, out: &mut Vec<u8>) {
    match v {
        RawBsonRef::Int32(_) | RawBsonRef::Int64(_) | RawBsonRef::Double(_) => {
            if let Some(n) = Number::of(v) {
                encode_number(n, out);
            }
        }
        RawBsonRef::Decimal128(d) => out.extend_from_slice(decimal::sort_key(d).as_slice()),
        RawBsonRef::String(s) | RawBsonRef::Symbol(s) | RawBsonRef::JavaScriptCode(s) => {
            escape(s.as_bytes(), out)
        }
        RawBsonRef::Document(d) => encode_document_body(d, out),
        RawBsonRef::Array(a) => encode_array_body(a, out),
        RawBsonRef::Binary(b) => {
            // Length first, as MongoDB orders binary data. BSON lengths fit an i32.
            let len = u32::try_from(b.bytes.len()).unwrap_or(u32::MAX);
            out.extend_from_slice(&len.to_be_bytes());
            out.push(u8::from(b.subtype));
            out.extend_from_slice(b.bytes);
        }
        RawBsonRef::ObjectId(o) => out.extend_from_slice(&o.bytes()),
        RawBsonRef::Boolean(b) => out.push(u8::from(b)),
        RawBsonRef::DateTime(d) => out.extend_from_slice(&flip_i64(d.timestamp_millis())),
        RawBsonRef::Timestamp(t) => {
            out.extend_from_slice(&t.time.to_be_bytes());
            out.extend_from_slice(&t.increment.to_be_bytes());
        }
        RawBsonRef::RegularExpression(r) => {
            escape(r.pattern.as_bytes(), out);
            escape(r.options.as_bytes(), out);
        }
        RawBsonRef::DbPointer(p) => {
            let (ns, oid) = super::order::db_pointer_parts(p);
            escape(ns.as_bytes(), out);
            out.extend_from_slice(&oid);
        }
        RawBsonRef::JavaScriptCodeWithScope(c) => {
            escape(c.code.as_bytes(), out);
            encode_document_body(c.scope, out);
        }
        RawBsonRef::Null | RawBsonRef::Undefined | RawBsonRef::MinKey | RawBsonRef::MaxKey => {}
    }
}

fn encode_document_body(d: &RawDocument, out: &mut Vec<u8>) {
    for (key, value) in d.iter().map_while(Result::ok) {
        // Bracket before name, as MongoDB compares document elements.
        out.push(bracket(value).tag());
        escape(key.as_bytes(), out);
        encode_body(value, out);
    }
    out.push(END);
}

fn encode_array_body(a: &RawArray, out: &mut Vec<u8>) {
    for value in a.into_iter().map_while(Result::ok) {
        encode_value(value, out);
    }
    out.push(END);
}

/// Bytes with `00` → `00 FF`, then `00 01`. Ordered like the raw bytes and prefix-free: where
/// two strings first differ, a NUL (`00 FF`) sorts below any other byte, and the terminator
/// (`00 01`) below both a NUL and any other byte, so a prefix sorts first.
fn escape(bytes: &[u8], out: &mut Vec<u8>) {
    for &b in bytes {
        if b == 0 {
            out.extend_from_slice(&STR_NUL);
        } else {
            out.push(b);
        }
    }
    out.extend_from_slice(&STR_END);
}

fn flip_i64(i: i64) -> [u8; 8] {
    ((i as u64) ^ (1 << 63)).to_be_bytes()
}

/// Numbers: 8 bytes of the total-order bits of `f`, then a big-endian u16 remainder `r`, where
/// `f` is the largest double not above the value and `r = value - f` (an integer below 2^11;
/// non-zero only for an int64 that no double holds exactly). `(f, r)` is strictly increasing in
/// the value and equal for equal values, whatever their BSON type. NaN is 10 zero bytes, below
/// the bits of -inf. -0.0 is written as 0.0.
fn encode_number(n: Number, out: &mut Vec<u8>) {
    let (f, rem) = match n {
        Number::Float(x) if x.is_nan() => {
            out.extend_from_slice(&[0; 10]);
            return;
        }
        Number::Float(x) => (if x == 0.0 { 0.0 } else { x }, 0),
        Number::Int(i) => floor_to_f64(i),
    };
    out.extend_from_slice(&total_order_bits(f).to_be_bytes());
    out.extend_from_slice(&rem.to_be_bytes());
}

/// The largest double `f <= i`, and `i - f`.
fn floor_to_f64(i: i64) -> (f64, u16) {
    let mut f = i as f64; // round to nearest: f is one of the two doubles around i
    if f as i128 > i128::from(i) {
        // f != 0 here (small integers are exact); step one ulp towards -inf.
        let bits = f.to_bits();
        f = f64::from_bits(if f > 0.0 { bits - 1 } else { bits + 1 });
    }
    // |i| < 2^63, so the spacing of doubles there is at most 2^10 and the remainder fits.
    let rem = u16::try_from(i128::from(i) - f as i128).unwrap_or(u16::MAX);
    (f, rem)
}

/// Maps a non-NaN double to a u64 that orders like the double (-inf < ... < -0 < 0 < ... < inf).
fn total_order_bits(f: f64) -> u64 {
    let bits = f.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

fn from_total_order_bits(bits: u64) -> f64 {
    f64::from_bits(if bits >> 63 == 1 { bits & !(1 << 63) } else { !bits })
}

/// Decodes one value from the start of `bytes`: the value and the number of bytes it used.
///
/// Type distinctions that the order ignores are lost: every number comes back as an Int64 when
/// it is integral and fits one, else as a Double; a symbol comes back as a string, undefined
/// as null, a decimal128 normalised (`1.00` → `1`).
pub fn decode_value(bytes: &[u8]) -> Result<(Bson, usize)> {
    let mut r = Reader { bytes, pos: 0 };
    let v = r.value()?;
    Ok((v, r.pos))
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn err(&self, reason: &'static str) -> ValueError {
        ValueError::Decode {
            offset: self.pos,
            reason,
        }
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N]> {
        let out: [u8; N] = self
            .bytes
            .get(self.pos..self.pos + N)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| self.err("truncated value"))?;
        self.pos += N;
        Ok(out)
    }

    fn byte(&mut self) -> Result<u8> {
        Ok(self.take::<1>()?[0])
    }

    fn value(&mut self) -> Result<Bson> {
        let tag = self.byte()?;
        self.body(tag)
    }

    fn body(&mut self, tag: u8) -> Result<Bson> {
        use TypeBracket as B;
        let bracket = TypeBracket::from_tag(tag).ok_or_else(|| self.err("unknown tag"))?;
        Ok(match bracket {
            B::MinKey => Bson::MinKey,
            B::Null => Bson::Null,
            B::MaxKey => Bson::MaxKey,
            B::Number => self.number()?,
            B::Decimal => {
                let (d, used) = decimal::from_key(&self.bytes[self.pos..], self.pos)?;
                self.pos += used;
                Bson::Decimal128(d)
            }
            B::String => Bson::String(self.string()?),
            B::Document => Bson::Document(self.document()?),
            B::Array => {
                let mut items = Vec::new();
                loop {
                    let tag = self.byte()?;
                    if tag == END {
                        break Bson::Array(items);
                    }
                    items.push(self.body(tag)?);
                }
            }
            B::Binary => {
                let len = u32::from_be_bytes(self.take()?) as usize;
                let subtype = BinarySubtype::from(self.byte()?);
                let data = self
                    .bytes
                    .get(self.pos..self.pos.saturating_add(len))
                    .ok_or_else(|| self.err("truncated binary"))?
                    .to_vec();
                self.pos += len;
                Bson::Binary(Binary { subtype, bytes: data })
            }
            B::ObjectId => Bson::ObjectId(bson::oid::ObjectId::from_bytes(self.take()?)),
            B::Boolean => match self.byte()? {
                0 => Bson::Boolean(false),
                1 => Bson::Boolean(true),
                _ => return Err(self.err("bad boolean")),
            },
            B::DateTime => {
                let millis = (u64::from_be_bytes(self.take()?) ^ (1 << 63)) as i64;
                Bson::DateTime(DateTime::from_millis(millis))
            }
            B::Timestamp => {
                let time = u32::from_be_bytes(self.take()?);
                let increment = u32::from_be_bytes(self.take()?);
                Bson::Timestamp(Timestamp { time, increment })
            }
            B::Regex => {
                let pattern = self.string()?;
                let options = self.string()?;
                Bson::RegularExpression(Regex { pattern, options })
            }
            B::DbPointer => {
                let ns = self.string()?;
                let oid: [u8; 12] = self.take()?;
                db_pointer(&ns, oid).ok_or_else(|| self.err("bad dbPointer"))?
            }
            B::JavaScript => Bson::JavaScriptCode(self.string()?),
            B::JavaScriptWithScope => {
                let code = self.string()?;
                let scope = self.document()?;
                Bson::JavaScriptCodeWithScope(JavaScriptCodeWithScope { code, scope })
            }
        })
    }

    fn number(&mut self) -> Result<Bson> {
        let bits = u64::from_be_bytes(self.take()?);
        let rem = u16::from_be_bytes(self.take()?);
        if bits == 0 {
            return if rem == 0 {
                Ok(Bson::Double(f64::NAN))
            } else {
                Err(self.err("bad NaN"))
            };
        }
        let f = from_total_order_bits(bits);
        let integral = f.fract() == 0.0 && (-TWO_POW_63..TWO_POW_63).contains(&f);
        if rem == 0 {
            return Ok(if integral {
                Bson::Int64(f as i64)
            } else {
                Bson::Double(f)
            });
        }
        if !integral {
            return Err(self.err("remainder on a non-integral number"));
        }
        i64::try_from(f as i128 + i128::from(rem))
            .map(Bson::Int64)
            .map_err(|_| self.err("integer out of range"))
    }

    fn string(&mut self) -> Result<String> {
        let mut out = Vec::new();
        loop {
            match self.byte()? {
                0 => match self.byte()? {
                    0x01 => break,
                    0xFF => out.push(0),
                    _ => return Err(self.err("bad string escape")),
                },
                b => out.push(b),
            }
        }
        String::from_utf8(out).map_err(|_| self.err("string is not UTF-8"))
    }

    fn document(&mut self) -> Result<Document> {
        let mut doc = Document::new();
        loop {
            let tag = self.byte()?;
            if tag == END {
                return Ok(doc);
            }
            let key = self.string()?;
            let value = self.body(tag)?;
            doc.insert(key, value);
        }
    }
}

/// Builds a DBPointer through its wire bytes (the bson crate has no public constructor).
fn db_pointer(ns: &str, oid: [u8; 12]) -> Option<Bson> {
    let ns_len = i32::try_from(ns.len() + 1).ok()?;
    let mut bytes = Vec::with_capacity(ns.len() + 26);
    bytes.extend_from_slice(&[0; 4]);
    bytes.extend_from_slice(&[0x0C, b'x', 0]);
    bytes.extend_from_slice(&ns_len.to_le_bytes());
    bytes.extend_from_slice(ns.as_bytes());
    bytes.push(0);
    bytes.extend_from_slice(&oid);
    bytes.push(0);
    let total = i32::try_from(bytes.len()).ok()?;
    bytes[..4].copy_from_slice(&total.to_le_bytes());
    let doc = RawDocumentBuf::from_bytes(bytes).ok()?;
    let value = doc.get("x").ok()??;
    Bson::try_from(value).ok()
}
