//! Property and table tests of the order and the encoding together.

use std::cmp::Ordering;

use bson::{
    doc, oid::ObjectId, spec::BinarySubtype, spec::ElementType, Binary, Bson, DateTime, Decimal128,
    JavaScriptCodeWithScope, RawBsonRef, RawDocumentBuf, Regex, Timestamp,
};
use proptest::prelude::*;

use super::*;

/// Wraps `v` in a raw document so that a `RawBsonRef` can borrow it.
fn raw(v: &Bson) -> RawDocumentBuf {
    RawDocumentBuf::from_document(&doc! { "v": v.clone() }).expect("valid value")
}

fn get(d: &RawDocumentBuf) -> RawBsonRef<'_> {
    d.get("v").expect("readable").expect("present")
}

fn enc(v: &Bson) -> Vec<u8> {
    let d = raw(v);
    let mut out = Vec::new();
    encode_value(get(&d), &mut out);
    out
}

fn cmp(a: &Bson, b: &Bson) -> Ordering {
    let (da, db) = (raw(a), raw(b));
    compare(get(&da), get(&db))
}

fn dec(negative: bool, coeff: u128, exp: i32) -> Bson {
    let biased = (exp + 6176) as u128;
    let x = (u128::from(negative) << 127) | (biased << 113) | coeff;
    Bson::Decimal128(Decimal128::from_bytes(x.to_le_bytes()))
}

fn db_pointer(ns: &str, oid: [u8; 12]) -> Bson {
    let mut key = vec![TypeBracket::DbPointer.tag()];
    key.extend_from_slice(ns.as_bytes());
    key.extend_from_slice(&[0, 1]);
    key.extend_from_slice(&oid);
    decode_value(&key).expect("valid dbPointer key").0
}

/// Ascending groups; values within a group are equal.
fn ordered_groups() -> Vec<Vec<Bson>> {
    let big = (1i64 << 53) + 1;
    vec![
        vec![Bson::MinKey],
        vec![Bson::Null, Bson::Undefined],
        vec![Bson::Double(f64::NAN), Bson::Double(-f64::NAN)],
        vec![Bson::Double(f64::NEG_INFINITY)],
        vec![Bson::Int64(i64::MIN), Bson::Double(-9_223_372_036_854_775_808.0)],
        vec![Bson::Int64(i64::MIN + 1)],
        vec![Bson::Int32(-1), Bson::Int64(-1), Bson::Double(-1.0)],
        vec![Bson::Double(-0.5)],
        vec![Bson::Int32(0), Bson::Double(-0.0), Bson::Double(0.0)],
        vec![Bson::Double(f64::from_bits(1))],
        vec![Bson::Int32(1), Bson::Int64(1), Bson::Double(1.0)],
        vec![Bson::Double(9_007_199_254_740_992.0), Bson::Int64(1 << 53)],
        vec![Bson::Int64(big)],
        vec![Bson::Int64(big + 1), Bson::Double(9_007_199_254_740_994.0)],
        vec![Bson::Int64(i64::MAX - 1)],
        vec![Bson::Int64(i64::MAX)],
        vec![Bson::Double(9_223_372_036_854_775_808.0)],
        vec![Bson::Double(f64::INFINITY)],
        vec![dec(false, 0, 0)], // decimals after every other number
        vec![dec(false, 1, 0), dec(false, 10, -1)],
        vec![Bson::String(String::new())],
        vec![Bson::String("a".into()), Bson::Symbol("a".into())],
        vec![Bson::String("a\0".into())],
        vec![Bson::String("a\0b".into())],
        vec![Bson::String("a\u{1}".into())],
        vec![Bson::String("ab".into())],
        vec![Bson::String("é".into())],
        vec![Bson::Document(doc! {})],
        vec![Bson::Document(doc! { "b": Bson::Null })], // null bracket before number
        vec![Bson::Document(doc! { "a": 1 }), Bson::Document(doc! { "a": 1.0 })],
        vec![Bson::Document(doc! { "a": 1, "b": 1 })],
        vec![Bson::Document(doc! { "a": 2 })],
        vec![Bson::Document(doc! { "a": "x" })],
        vec![Bson::Array(vec![])],
        vec![Bson::Array(vec![Bson::Null])],
        vec![Bson::Array(vec![1.into()]), Bson::Array(vec![Bson::Int64(1)])],
        vec![Bson::Array(vec![1.into(), Bson::MinKey])],
        vec![Bson::Array(vec![2.into()])],
        vec![Bson::Binary(Binary {
            subtype: BinarySubtype::UserDefined(0x80),
            bytes: vec![],
        })],
        vec![Bson::Binary(Binary {
            subtype: BinarySubtype::Generic,
            bytes: vec![9],
        })],
        vec![Bson::Binary(Binary {
            subtype: BinarySubtype::Uuid,
            bytes: vec![1],
        })],
        vec![Bson::Binary(Binary {
            subtype: BinarySubtype::Generic,
            bytes: vec![0, 0],
        })],
        vec![Bson::ObjectId(ObjectId::from_bytes([0; 12]))],
        vec![Bson::ObjectId(ObjectId::from_bytes([1; 12]))],
        vec![Bson::Boolean(false)],
        vec![Bson::Boolean(true)],
        vec![Bson::DateTime(DateTime::from_millis(-1))],
        vec![Bson::DateTime(DateTime::from_millis(0))],
        vec![Bson::Timestamp(Timestamp {
            time: 1,
            increment: 9,
        })],
        vec![Bson::Timestamp(Timestamp {
            time: 2,
            increment: 0,
        })],
        vec![Bson::RegularExpression(Regex {
            pattern: "a".into(),
            options: "i".into(),
        })],
        vec![db_pointer("db.c", [0; 12])],
        vec![Bson::JavaScriptCode("f()".into())],
        vec![Bson::JavaScriptCodeWithScope(JavaScriptCodeWithScope {
            code: "f()".into(),
            scope: doc! { "x": 1 },
        })],
        vec![Bson::MaxKey],
    ]
}

#[test]
fn cross_type_order_and_encoding_agree() {
    let groups = ordered_groups();
    for (i, gi) in groups.iter().enumerate() {
        for (j, gj) in groups.iter().enumerate() {
            for a in gi {
                for b in gj {
                    let want = i.cmp(&j);
                    assert_eq!(cmp(a, b), want, "compare({a:?}, {b:?})");
                    assert_eq!(enc(a).cmp(&enc(b)), want, "encodings of {a:?}, {b:?}");
                }
            }
        }
    }
}

#[test]
fn every_value_decodes_to_an_equal_value() {
    for v in ordered_groups().iter().flatten() {
        let bytes = enc(v);
        let (back, used) = decode_value(&bytes).expect("decodes");
        assert_eq!(used, bytes.len(), "{v:?}");
        assert_eq!(enc(&back), bytes, "{v:?} came back as {back:?}");
    }
}

#[test]
fn ids() {
    let oid = ObjectId::from_bytes([7; 12]);
    for (id, back) in [
        (Bson::Int32(5), Bson::Int64(5)),
        (Bson::Int64(i64::MIN), Bson::Int64(i64::MIN)),
        (Bson::Int64(i64::MAX), Bson::Int64(i64::MAX)),
        (Bson::String("a\0b".into()), Bson::String("a\0b".into())),
        (Bson::ObjectId(oid), Bson::ObjectId(oid)),
    ] {
        let bytes = encode_id(&id).expect("valid id");
        assert_eq!(bytes, enc(&id));
        assert_eq!(decode_value(&bytes).expect("decodes"), (back, bytes.len()));
    }
    let err = encode_id(&Bson::Double(1.5)).expect_err("doubles are not ids");
    assert!(err.to_string().contains("double"), "{err}");
    assert!(matches!(
        encode_id(&Bson::Array(vec![])),
        Err(ValueError::UnsupportedIdType { found: "array" })
    ));
}

#[test]
fn decode_rejects_bad_bytes() {
    for bad in [
        &[][..],
        &[0x01],
        &[TypeBracket::String.tag(), b'a'],
        &[TypeBracket::Number.tag(), 1],
    ] {
        assert!(decode_value(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn key_successor_bounds_a_prefix() {
    assert_eq!(key_successor(&[1, 2]), Some(vec![1, 3]));
    assert_eq!(key_successor(&[1, 0xFF]), Some(vec![2]));
    assert_eq!(key_successor(&[0xFF]), None);
    let five = enc(&Bson::Int32(5));
    let succ = key_successor(&five).expect("bounded");
    let mut key = five.clone();
    key.extend_from_slice(&encode_id(&Bson::Int32(i32::MAX)).expect("id"));
    assert!(key < succ && enc(&Bson::Double(5.000001)) >= succ);
}

// ---- property tests --------------------------------------------------------------------

fn int64() -> impl Strategy<Value = i64> {
    prop_oneof![
        -3i64..3,
        ((1i64 << 53) - 3)..((1i64 << 53) + 3),
        (-(1i64 << 53) - 3)..(-(1i64 << 53) + 3),
        (i64::MAX - 2050)..=i64::MAX,
        i64::MIN..(i64::MIN + 2050),
        any::<i64>(),
    ]
}

fn double() -> impl Strategy<Value = f64> {
    prop_oneof![
        prop::sample::select(vec![
            0.0,
            -0.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE,
            -f64::MIN_POSITIVE,
            f64::from_bits(1),
            -f64::from_bits(1),
            f64::MAX,
            f64::MIN,
            0.5,
            -1.5,
            9_223_372_036_854_775_808.0,
            -9_223_372_036_854_775_808.0,
            9_223_372_036_854_774_784.0,
        ]),
        int64().prop_map(|i| i as f64),
        (-4i32..4).prop_map(f64::from),
        any::<u64>().prop_map(f64::from_bits),
    ]
}

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec!['a', 'b', '\0', '\u{1}', 'é', '\u{ff}']),
        0..4,
    )
    .prop_map(|c| c.into_iter().collect())
}

fn leaf() -> impl Strategy<Value = Bson> {
    prop_oneof![
        Just(Bson::Null),
        Just(Bson::Undefined),
        Just(Bson::MinKey),
        Just(Bson::MaxKey),
        any::<bool>().prop_map(Bson::Boolean),
        prop_oneof![-3i32..3, any::<i32>()].prop_map(Bson::Int32),
        int64().prop_map(Bson::Int64),
        double().prop_map(Bson::Double),
        double().prop_map(Bson::Double),
        text().prop_map(Bson::String),
        text().prop_map(Bson::Symbol),
        text().prop_map(Bson::JavaScriptCode),
        (0u8..3).prop_map(|b| Bson::ObjectId(ObjectId::from_bytes([b; 12]))),
        (
            prop::sample::select(vec![0u8, 4, 0x80]),
            prop::collection::vec(0u8..3, 0..3)
        )
            .prop_map(|(t, bytes)| Bson::Binary(Binary {
                subtype: BinarySubtype::from(t),
                bytes
            })),
        prop_oneof![-2i64..2, any::<i64>()].prop_map(|m| Bson::DateTime(DateTime::from_millis(m))),
        (0u32..3, 0u32..3).prop_map(|(time, increment)| Bson::Timestamp(Timestamp { time, increment })),
        (text(), prop::sample::select(vec!["", "i", "im"])).prop_map(|(pattern, o)| {
            Bson::RegularExpression(Regex {
                pattern: pattern.replace('\0', ""),
                options: o.into(),
            })
        }),
        (
            any::<bool>(),
            prop_oneof![0u128..30, Just(10u128.pow(34) - 1), Just(10u128.pow(34))],
            -3i32..3
        )
            .prop_map(|(n, c, e)| dec(n, c, e)),
        any::<u128>().prop_map(|x| Bson::Decimal128(Decimal128::from_bytes(x.to_le_bytes()))),
        (0u8..2).prop_map(|b| db_pointer("db.c", [b; 12])),
    ]
}

fn value() -> impl Strategy<Value = Bson> {
    leaf().prop_recursive(3, 24, 4, |inner| {
        let key = prop::sample::select(vec!["", "a", "b", "ab"]);
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Bson::Array),
            prop::collection::vec((key, inner.clone()), 0..4)
                .prop_map(|kv| Bson::Document(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
            (text(), prop::collection::vec(inner, 0..2)).prop_map(|(code, vs)| {
                let scope = vs
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| (i.to_string(), v))
                    .collect();
                Bson::JavaScriptCodeWithScope(JavaScriptCodeWithScope { code, scope })
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn encoding_orders_like_compare(a in value(), b in value()) {
        let (ea, eb) = (enc(&a), enc(&b));
        prop_assert_eq!(cmp(&a, &b), ea.cmp(&eb), "{:?} vs {:?}", a, b);
        prop_assert_eq!(cmp(&a, &b), cmp(&b, &a).reverse());
        prop_assert_eq!(cmp(&a, &a), Ordering::Equal);
    }

    #[test]
    fn concatenations_order_like_tuples(a in value(), b in value(), c in value(), d in value()) {
        let mut ab = enc(&a);
        ab.extend(enc(&b));
        let mut cd = enc(&c);
        cd.extend(enc(&d));
        prop_assert_eq!(ab.cmp(&cd), cmp(&a, &c).then(cmp(&b, &d)));
        // Self-delimiting: decoding the pair stops exactly where `a` ends.
        let (_, used) = decode_value(&ab).expect("decodes");
        prop_assert_eq!(used, enc(&a).len());
    }

    #[test]
    fn decoding_is_equal_to_the_original(v in value()) {
        let bytes = enc(&v);
        let (back, used) = decode_value(&bytes).expect("decodes");
        prop_assert_eq!(used, bytes.len());
        prop_assert_eq!(enc(&back), bytes.clone());
        prop_assert_eq!(encode_key_value(&v).expect("encodes"), bytes);
    }

    #[test]
    fn ids_round_trip(id in prop_oneof![
        any::<i32>().prop_map(Bson::Int32),
        int64().prop_map(Bson::Int64),
        text().prop_map(Bson::String),
        any::<[u8; 12]>().prop_map(|b| Bson::ObjectId(ObjectId::from_bytes(b))),
    ]) {
        let bytes = encode_id(&id).expect("valid id");
        let (back, used) = decode_value(&bytes).expect("decodes");
        prop_assert_eq!(used, bytes.len());
        let want = match id { Bson::Int32(i) => Bson::Int64(i.into()), other => other };
        prop_assert_eq!(back, want);
    }
}

/// A raw document appended field by field, so that keys may repeat.
fn raw_fields(fields: &[(&str, Bson)]) -> RawDocumentBuf {
    let mut raw = RawDocumentBuf::new();
    for (k, v) in fields {
        let v = bson::RawBson::try_from(v.clone()).expect("convertible value");
        raw.append(*k, v);
    }
    raw
}

/// Equality through the bytes, so that NaN equals NaN.
fn same(a: &bson::Document, b: &bson::Document) -> bool {
    let bytes = |d: &bson::Document| RawDocumentBuf::from_document(d).expect("valid").into_bytes();
    bytes(a) == bytes(b) && a.keys().eq(b.keys())
}

fn field_sets() -> impl Strategy<Value = Vec<Vec<(&'static str, Bson)>>> {
    // Few key names, so consecutive documents often share (or nearly share) a layout.
    let key = prop::sample::select(vec!["_id", "a", "b", "c"]);
    prop::collection::vec(prop::collection::vec((key, value()), 0..5), 1..8)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn materializer_equals_document_try_from(docs in field_sets()) {
        let mut m = Materializer::new();
        for fields in &docs {
            let raw = raw_fields(fields);
            let want = bson::Document::try_from(raw.as_ref()).expect("valid");
            let got = m.document(&raw).expect("valid");
            prop_assert!(same(&got, &want), "{:?} vs {:?}", got, want);
            // The same fields given as a list: later duplicates overwrite in place.
            let got = m
                .fields(|| raw.iter().map(|e| e.expect("valid")))
                .expect("valid");
            prop_assert!(same(&got, &want), "{:?} vs {:?}", got, want);
        }
    }
}

#[test]
fn materializer_refuses_what_try_from_refuses() {
    let mut bytes = raw_fields(&[("a", Bson::Int32(1)), ("b", Bson::String("xy".into()))]).into_bytes();
    let mut m = Materializer::new();
    let good = RawDocumentBuf::from_bytes(bytes.clone()).expect("valid");
    assert!(m.document(&good).is_ok());
    // Make the string "xy" invalid UTF-8.
    let at = bytes.len() - 4;
    bytes[at] = 0xff;
    let bad = bson::RawDocument::from_bytes(&bytes).expect("framing is intact");
    assert!(bson::Document::try_from(bad).is_err());
    assert!(m.document(bad).is_err(), "same layout, bad value");
}

/// Documents as bytes, some with one byte overwritten (the frame kept valid).
fn field_docs() -> impl Strategy<Value = (Vec<u8>, &'static str)> {
    let key = prop::sample::select(vec!["a", "b", "c", "é", "product_recommendation1"]);
    let fields = prop::collection::vec((key.clone(), value()), 0..5);
    (
        fields,
        any::<bool>(),
        any::<prop::sample::Index>(),
        any::<u8>(),
        key,
    )
        .prop_map(|(fields, corrupt, at, byte, name)| {
            let mut bytes = raw_fields(&fields).into_bytes();
            let inner = bytes.len() - 5;
            if corrupt && inner > 0 {
                bytes[4 + at.index(inner)] = byte;
            }
            (bytes, name)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    #[test]
    fn field_lookup_equals_raw_document_get((bytes, name) in field_docs()) {
        let doc = bson::RawDocument::from_bytes(&bytes).expect("frame intact");
        let want = doc.get(name).ok().flatten();
        let got = super::path::field(doc, name);
        prop_assert_eq!(format!("{got:?}"), format!("{want:?}"));
    }
}

#[test]
fn field_lookup_stops_where_raw_document_get_does() {
    let base = raw_fields(&[
        ("a", Bson::String("xy".into())),
        ("d", Bson::Document(doc! { "k": 1 })),
        ("t", Bson::Boolean(true)),
        ("b", Bson::Int32(5)),
    ])
    .into_bytes();
    let find = |needle: &[u8]| {
        base.windows(needle.len())
            .position(|w| w == needle)
            .expect("present")
    };
    let a = find(b"\x02a\0");
    let d = find(b"\x03d\0");
    let t = find(b"\x08t\0");
    let corruptions: Vec<(&str, usize, u8)> = vec![
        ("string terminator", a + 3 + 4 + 2, 1),
        ("negative string length", a + 3 + 3, 0x80),
        ("string length past the end", a + 3 + 1, 0x70),
        ("document terminator", d + 3 + 11, 7),
        ("document length too small", d + 3, 4),
        ("key not UTF-8", d + 1, 0xff),
        ("unknown type", t, 0x77),
        ("boolean 2", t + 3, 2),
    ];
    for (what, at, byte) in corruptions {
        let mut bytes = base.clone();
        bytes[at] = byte;
        let doc = bson::RawDocument::from_bytes(&bytes).expect("frame intact");
        for name in ["a", "d", "t", "b", "zz"] {
            let want = doc.get(name).ok().flatten();
            let got = super::path::field(doc, name);
            assert_eq!(format!("{got:?}"), format!("{want:?}"), "{what}, field {name}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    /// The direct fill of a remembered layout must read a damaged document
    /// exactly as bson does: the same document, or an error where bson errs.
    #[test]
    fn a_remembered_layout_reads_damaged_bytes_as_try_from_does(
        values in prop::collection::vec(direct_leaf(), 1..5),
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        // Distinct keys, so that the layout has every field; some longer
        // than a word, where a damaged byte falls inside a key more often.
        let fields: Vec<(&str, Bson)> = ["a", "product_recommendation1", "c", "last_contacted_é"]
            .into_iter()
            .zip(values)
            .collect();
        let good = raw_fields(&fields);
        let mut m = Materializer::new();
        m.document(&good).expect("valid");
        let mut bytes = good.into_bytes();
        let inner = bytes.len() - 5;
        prop_assume!(inner > 0);
        bytes[4 + at.index(inner)] = byte;
        let Ok(bad) = bson::RawDocument::from_bytes(&bytes) else {
            return Ok(());
        };
        match (bson::Document::try_from(bad), m.document(bad)) {
            (Ok(want), Ok(got)) => prop_assert!(same(&got, &want), "{:?} vs {:?}", got, want),
            (Err(_), Err(_)) => {}
            (want, got) => prop_assert!(false, "try_from {:?}, materializer {:?}", want, got),
        }
    }
}

/// The values the direct fill decodes itself (and a nested document, which
/// it hands to bson), each from a few byte patterns.
fn direct_leaf() -> impl Strategy<Value = Bson> {
    prop_oneof![
        Just(Bson::Null),
        any::<bool>().prop_map(Bson::Boolean),
        any::<i32>().prop_map(Bson::Int32),
        int64().prop_map(Bson::Int64),
        any::<f64>().prop_map(Bson::Double),
        int64().prop_map(|ms| Bson::DateTime(bson::DateTime::from_millis(ms))),
        any::<[u8; 12]>().prop_map(|b| Bson::ObjectId(ObjectId::from_bytes(b))),
        text().prop_map(Bson::String),
        text().prop_map(|t| Bson::Document(bson::doc! { "t": t })),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// The typed reader decodes every value as bson does: through a
    /// `Document` it gives back the document's exact bytes.
    #[test]
    fn from_raw_reads_a_document_as_bson_does(docs in field_sets()) {
        for fields in &docs {
            let raw = raw_fields(fields);
            let want = bson::Document::try_from(raw.as_ref()).expect("valid");
            let got: bson::Document = from_raw(raw.as_bytes()).expect("valid");
            prop_assert!(same(&got, &want), "{:?} vs {:?}", got, want);
            let via_bson: bson::Document = bson::from_slice(raw.as_bytes()).expect("valid");
            prop_assert!(same(&got, &via_bson), "{:?} vs bson::from_slice {:?}", got, via_bson);
        }
    }

    /// Into a struct: the fields it names, typed; the rest skipped; the same
    /// answer (or the same refusal) as `bson::from_slice`.
    #[test]
    fn from_raw_fills_a_struct_as_bson_from_slice_does(
        n in prop_oneof![any::<i32>().prop_map(Bson::Int32), int64().prop_map(Bson::Int64), value()],
        name in prop_oneof![text().prop_map(Bson::String), value()],
        when in prop_oneof![Just(None), int64().prop_map(|ms| Some(Bson::DateTime(DateTime::from_millis(ms)))), value().prop_map(Some)],
        tags in prop_oneof![prop::collection::vec(text().prop_map(Bson::String), 0..3).prop_map(Bson::Array), value()],
        extra in value(),
    ) {
        #[derive(Debug, PartialEq, serde::Deserialize)]
        struct Inner {
            n: i64,
        }
        #[derive(Debug, PartialEq, serde::Deserialize)]
        struct Rec {
            n: i64,
            name: String,
            when: Option<DateTime>,
            tags: Vec<String>,
            inner: Option<Inner>,
        }
        let mut d = bson::Document::new();
        d.insert("extra", extra.clone());
        d.insert("n", n.clone());
        d.insert("name", name);
        if let Some(w) = when {
            d.insert("when", w);
        }
        d.insert("tags", tags);
        d.insert("inner", bson::doc! { "n": n.clone(), "skip": extra.clone() });
        let raw = RawDocumentBuf::from_document(&d).expect("valid");
        let got = from_raw::<Rec>(raw.as_bytes());
        // One deliberate difference: a date asked for as an `i64` reads as its
        // milliseconds, where bson refuses it. Compare with bson on the
        // milliseconds then.
        if let Bson::DateTime(at) = &n {
            let ms = Bson::Int64(at.timestamp_millis());
            d.insert("n", ms.clone());
            d.insert("inner", bson::doc! { "n": ms, "skip": extra });
        }
        let plain = RawDocumentBuf::from_document(&d).expect("valid");
        let want = bson::from_slice::<Rec>(plain.as_bytes());
        match (&got, &want) {
            (Ok(g), Ok(w)) => prop_assert_eq!(g, w),
            (Err(_), Err(_)) => {}
            _ => prop_assert!(false, "from_raw {:?}, bson::from_slice {:?}", got, want),
        }
    }

    /// Damaged bytes: an error or the document bson reads, never a panic.
    #[test]
    fn from_raw_reads_damaged_bytes_without_panicking(
        fields in prop::collection::vec((prop::sample::select(vec!["a", "b"]), value()), 1..4),
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let mut bytes = raw_fields(&fields).into_bytes();
        let inner = bytes.len() - 5;
        prop_assume!(inner > 0);
        bytes[4 + at.index(inner)] = byte;
        let Ok(bad) = bson::RawDocument::from_bytes(&bytes) else {
            return Ok(());
        };
        if let (Ok(got), Ok(want)) = (from_raw::<bson::Document>(bad.as_bytes()), bson::Document::try_from(bad)) {
            prop_assert!(same(&got, &want), "{:?} vs {:?}", got, want);
        }
    }
}

#[test]
fn a_date_reads_into_an_i64_as_its_milliseconds() {
    #[derive(Debug, PartialEq, serde::Deserialize)]
    struct Row {
        at: i64,
        maybe: Option<i64>,
        none: Option<i64>,
        all: Vec<i64>,
        same: DateTime,
    }
    let at = DateTime::from_millis(1_700_000_000_123);
    let before = DateTime::from_millis(-5);
    let raw = bson::rawdoc! {
        "at": at, "maybe": before, "none": bson::RawBson::Null, "all": [at, 7_i64, 8_i32], "same": at,
    };
    assert_eq!(
        from_raw::<Row>(raw.as_bytes()).expect("dates as millis"),
        Row {
            at: 1_700_000_000_123,
            maybe: Some(-5),
            none: None,
            all: vec![1_700_000_000_123, 7, 8],
            same: at,
        }
    );
    // Only `i64`: a date is no `i32` or string.
    #[derive(Debug, serde::Deserialize)]
    struct Narrow {
        #[allow(dead_code)]
        at: i32,
    }
    assert!(from_raw::<Narrow>(bson::rawdoc! { "at": at }.as_bytes()).is_err());
    #[derive(Debug, serde::Deserialize)]
    struct Text {
        #[allow(dead_code)]
        at: String,
    }
    assert!(from_raw::<Text>(bson::rawdoc! { "at": at }.as_bytes()).is_err());
}

#[test]
fn from_raw_is_not_human_readable_on_its_fallback_path_either() {
    // An enum variant goes through bson's own Deserializer; an IpAddr read
    // there as text only if that reader claimed to be human-readable, which
    // bson's raw reader (and so from_raw) is not.
    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    enum Holder {
        Addr(std::net::IpAddr),
    }
    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Doc {
        h: Holder,
    }
    let raw = RawDocumentBuf::from_document(&doc! { "h": { "Addr": "127.0.0.1" } }).expect("valid");
    assert!(bson::from_slice::<Doc>(raw.as_bytes()).is_err());
    assert!(from_raw::<Doc>(raw.as_bytes()).is_err());
}

/// Values of the types `to_bytes` writes itself, nested.
fn direct_value() -> impl Strategy<Value = Bson> {
    let scalar = prop_oneof![
        Just(Bson::Null),
        any::<bool>().prop_map(Bson::Boolean),
        any::<i32>().prop_map(Bson::Int32),
        int64().prop_map(Bson::Int64),
        double().prop_map(Bson::Double),
        text().prop_map(Bson::String),
        (0u8..3).prop_map(|b| Bson::ObjectId(ObjectId::from_bytes([b; 12]))),
        any::<i64>().prop_map(|m| Bson::DateTime(DateTime::from_millis(m))),
    ];
    scalar.prop_recursive(3, 24, 12, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..12).prop_map(Bson::Array),
            prop::collection::vec((prop::sample::select(vec!["", "a", "b", "é"]), inner), 0..4)
                .prop_map(|kv| Bson::Document(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn to_bytes_writes_what_bson_writes(
        fields in prop::collection::vec(
            (prop::sample::select(vec!["_id", "a", "", "a\0b", "ü"]), prop_oneof![3 => direct_value(), 1 => value()]),
            0..6,
        )
    ) {
        let doc: bson::Document = fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        match (to_bytes(&doc), bson::to_vec(&doc)) {
            (Ok(got), Ok(want)) => prop_assert_eq!(got, want, "{:?}", doc),
            (Err(_), Err(_)) => {}
            (got, want) => prop_assert!(false, "{:?}: {:?} against bson's {:?}", doc, got, want),
        }
        match (to_shared_bytes(&doc), bson::to_vec(&doc)) {
            (Ok(got), Ok(want)) => prop_assert_eq!(&got[..], &want[..], "{:?}", doc),
            (Err(_), Err(_)) => {}
            (got, want) => prop_assert!(false, "{:?}: {:?} against bson's {:?}", doc, got, want),
        }
    }

    #[test]
    fn to_bytes_writes_the_common_types_itself(
        fields in prop::collection::vec((prop::sample::select(vec!["_id", "a", "", "ü"]), direct_value()), 0..6)
    ) {
        let doc: bson::Document = fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        let mut out = Vec::new();
        prop_assert!(super::serialize::write_document(&doc, &mut out).is_some(), "{:?}", doc);
        prop_assert_eq!(out, bson::to_vec(&doc).expect("valid"));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    /// The word-at-a-time key end search finds the first NUL a byte loop
    /// finds, wherever it falls in or across words, and none where none is.
    #[test]
    fn nul_at_finds_the_first_nul(
        bytes in prop::collection::vec(prop_oneof![Just(0u8), Just(0x80u8), Just(1u8), any::<u8>()], 0..40),
        skip in 0usize..8,
    ) {
        let b = &bytes[skip.min(bytes.len())..];
        prop_assert_eq!(super::nul_at(b), b.iter().position(|&c| c == 0));
    }

    /// A key read in one pass is the bytes before the first NUL, as text,
    /// exactly when they are UTF-8, whether ASCII or not, wherever the NUL
    /// and the non-ASCII bytes fall in or across words.
    #[test]
    fn key_str_reads_a_key_as_a_byte_loop_does(
        key in "[a-z_.]{0,30}|[a-zé€]{0,12}",
        bytes in prop::collection::vec(
            prop_oneof![Just(0u8), Just(0x80u8), Just(b'a'), Just(0xC3u8), Just(0xA9u8), any::<u8>()],
            0..40,
        ),
        skip in 0usize..8,
        whole in any::<bool>(),
    ) {
        // A real key (ASCII or not, often eight bytes or more) and its NUL
        // before the random bytes, or the random bytes alone.
        let mut owned = Vec::new();
        if whole {
            owned.extend_from_slice(key.as_bytes());
            owned.push(0);
        }
        owned.extend_from_slice(&bytes);
        let b = &owned[if whole { 0 } else { skip.min(owned.len()) }..];
        let expected = b
            .iter()
            .position(|&c| c == 0)
            .and_then(|n| std::str::from_utf8(&b[..n]).ok().map(|k| (k, n)));
        prop_assert_eq!(super::key_str(b), expected);
    }
}

/// Levels of documents and arrays below `v` (0 for a scalar), counted the
/// recursive way: the reference for [`nested_deeper_than`].
fn nesting_of(v: &Bson) -> usize {
    let inner = |vs: &mut dyn Iterator<Item = &Bson>| vs.map(nesting_of).max().unwrap_or(0);
    match v {
        Bson::Document(d) => 1 + inner(&mut d.values()),
        Bson::Array(a) => 1 + inner(&mut a.iter()),
        Bson::JavaScriptCodeWithScope(c) => 1 + inner(&mut c.scope.values()),
        _ => 0,
    }
}

/// `{"": {"": ... {} ...}}`, `levels` documents below the top one, written
/// without recursion (a `Document` this deep could not even be dropped).
fn nested_bytes(levels: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(7 * levels + 5);
    for j in (1..=levels).rev() {
        // Each level: its length, then one element (type, empty key) holding the next.
        out.extend_from_slice(&i32::try_from(5 + 7 * j).expect("small").to_le_bytes());
        out.extend_from_slice(&[ElementType::EmbeddedDocument as u8, 0]);
    }
    out.extend_from_slice(&[5, 0, 0, 0, 0]);
    out.resize(out.len() + levels, 0);
    out
}

#[test]
fn nesting_is_checked_at_the_limit_and_far_beyond_it() {
    for levels in [0, 1, 99, 100] {
        let bytes = nested_bytes(levels);
        bson::RawDocument::from_bytes(&bytes).expect("well formed");
        assert!(!nested_deeper_than(&bytes, MAX_NESTING), "{levels} levels");
    }
    let bytes = nested_bytes(101);
    let doc = bson::Document::try_from(bson::RawDocument::from_bytes(&bytes).expect("well formed"));
    assert!(doc.is_ok(), "101 levels still parse");
    assert!(nested_deeper_than(&bytes, MAX_NESTING));
    // Deep enough to overflow any recursive reader's stack.
    assert!(nested_deeper_than(&nested_bytes(1_000_000), MAX_NESTING));
    // An array counts as a level too.
    let arrays = RawDocumentBuf::from_document(&doc! { "a": [[1], 2] }).expect("valid");
    assert!(nested_deeper_than(arrays.as_bytes(), 1));
    assert!(!nested_deeper_than(arrays.as_bytes(), 2));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn nesting_walk_agrees_with_a_recursive_count(
        fields in prop::collection::vec((prop::sample::select(vec!["a", "b", ""]), value()), 0..4),
        limit in 0usize..5,
    ) {
        let raw = raw_fields(&fields.iter().map(|(k, v)| (*k, v.clone())).collect::<Vec<_>>());
        let depth = fields.iter().map(|(_, v)| nesting_of(v)).max().unwrap_or(0);
        prop_assert_eq!(nested_deeper_than(raw.as_bytes(), limit), depth > limit, "{:?}", fields);
    }

    /// Damaged bytes: an answer, never a panic or a hang.
    #[test]
    fn nesting_walk_reads_damaged_bytes(
        fields in prop::collection::vec((prop::sample::select(vec!["a", "b"]), value()), 1..4),
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let mut bytes = raw_fields(&fields.iter().map(|(k, v)| (*k, v.clone())).collect::<Vec<_>>()).into_bytes();
        let i = at.index(bytes.len());
        bytes[i] = byte;
        let _ = nested_deeper_than(&bytes, 2);
        let _ = nested_deeper_than(&bytes[..i], 2);
    }
}

/// `_id` and `fields` picked by bson's iterator: the reference for the
/// quick walk.
type Picked<'a> = (Option<RawBsonRef<'a>>, Vec<Option<(&'a str, RawBsonRef<'a>)>>);

fn pick_by_bson<'a>(doc: &'a bson::RawDocument, fields: &[String]) -> Result<Picked<'a>, bson::raw::Error> {
    let mut found = vec![None; fields.len()];
    let id = super::project::pick_top_level(doc, fields, &mut found)?;
    Ok((id, found))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    /// Where the quick walk answers, bson's iterator gives the same `_id`
    /// and fields, on damaged bytes too; where that iterator fails before
    /// the fields are found, the walk gives up.
    #[test]
    fn quick_pick_equals_bsons_iterator((bytes, name) in field_docs(), other in prop::sample::select(vec!["a", "b", "zz", "_id"])) {
        let doc = bson::RawDocument::from_bytes(&bytes).expect("frame intact");
        let fields = vec![name.to_owned(), other.to_owned(), name.to_owned()];
        let mut found = vec![None; fields.len()];
        if let Some(id) = super::pick_top_level_refs(doc.as_bytes(), &fields, &mut found) {
            let want = pick_by_bson(doc, &fields);
            prop_assert!(want.is_ok(), "bson's iterator fails: {:?}", want);
            let (want_id, want_found) = want.expect("checked");
            prop_assert_eq!(format!("{id:?}"), format!("{want_id:?}"));
            prop_assert_eq!(format!("{found:?}"), format!("{want_found:?}"));
        }
    }
}

#[test]
fn quick_pick_answers_for_plain_records_and_gives_up_on_arrays() {
    let record = doc! {
        "_id": 7i64, "name": "n", "status": "active", "count": 3, "when": bson::DateTime::from_millis(5),
        "notes": Bson::Null, "ok": true, "x": 1.5, "sub": { "k": 1 }, "tags": ["a"],
    };
    let raw = RawDocumentBuf::from_document(&record).expect("valid");
    let fields: Vec<String> = ["status", "sub", "x", "missing"].map(String::from).to_vec();
    let mut found = vec![None; fields.len()];
    let id = super::pick_top_level_refs(raw.as_bytes(), &fields, &mut found).expect("the quick walk answers");
    let (want_id, want_found) = pick_by_bson(&raw, &fields).expect("valid");
    assert_eq!(format!("{id:?}"), format!("{want_id:?}"));
    assert_eq!(format!("{found:?}"), format!("{want_found:?}"));
    // An array among the values asked for is left to bson.
    let tags = vec!["tags".to_owned()];
    let mut found = vec![None; 1];
    assert!(super::pick_top_level_refs(raw.as_bytes(), &tags, &mut found).is_none());
}
