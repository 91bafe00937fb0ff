//! Tests of the filter language: parse errors, a table of MongoDB semantics, index bounds, and
//! a property test against an independent reference evaluator.

mod bounds;
mod parse_errors;
mod reference;
mod table;

use bson::{Document, RawDocumentBuf};

use super::Filter;

fn raw(d: &Document) -> RawDocumentBuf {
    RawDocumentBuf::from_document(d).expect("valid document")
}

fn parse(q: &Document) -> Filter {
    Filter::parse(q).unwrap_or_else(|e| panic!("{q} should parse: {e}"))
}
