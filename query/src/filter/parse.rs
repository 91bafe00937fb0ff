//! Query document → [`Filter`].
//!
//! A field's value is an operator document when its *first* key starts with `$` (as in
//! MongoDB; `{$ref, $id}` DBRef-style documents stay literal), and then every key must be an
//! operator. Anything else is an implicit `$eq` on the value, documents included.

use std::cmp::Ordering;

use bson::{Bson, Document, RawBson};
use slate_core::value::{compare, FieldPath, ValueError};

use super::error::describe;
use super::{ElemMatch, Filter, FilterError, Predicate};

type Result<T, E = FilterError> = std::result::Result<T, E>;

/// Known MongoDB operators that Slate refuses, with the reason given to the user.
const UNSUPPORTED: &[(&str, &str)] = &[
    ("$regex", "regular expressions are not supported"),
    ("$options", "regular expressions are not supported"),
    ("$type", "type queries are not supported"),
    ("$mod", "$mod is not supported"),
    ("$bitsAllSet", "bitwise queries are not supported"),
    ("$bitsAllClear", "bitwise queries are not supported"),
    ("$bitsAnySet", "bitwise queries are not supported"),
    ("$bitsAnyClear", "bitwise queries are not supported"),
    ("$geoWithin", "geospatial queries are not supported"),
    ("$geoIntersects", "geospatial queries are not supported"),
    ("$near", "geospatial queries are not supported"),
    ("$nearSphere", "geospatial queries are not supported"),
    ("$where", "JavaScript is not supported"),
    ("$expr", "aggregation expressions are not supported"),
    ("$jsonSchema", "schema validation is not supported"),
    ("$text", "text search is not supported"),
    ("$comment", "query comments are not supported"),
];

impl Filter {
    /// Parses a MongoDB-style query document. See `docs/query.md` for the operators.
    pub fn parse(query: &Document) -> Result<Filter> {
        parse_query(query, "")
    }
}

/// Parses a query; `prefix` is the path of an enclosing `$elemMatch`, for error messages.
fn parse_query(query: &Document, prefix: &str) -> Result<Filter> {
    let mut conjuncts = Vec::new();
    for (key, value) in query {
        // A DBRef's fields are queried as fields (MongoDB parses them so).
        if key.starts_with('$') && !is_dbref_field(key) {
            let node = match key.as_str() {
                "$and" => Filter::And(logical_list(key, value, prefix)?),
                "$or" => Filter::Or(logical_list(key, value, prefix)?),
                "$nor" => Filter::Nor(logical_list(key, value, prefix)?),
                _ => return Err(unknown_or_unsupported(key, prefix)),
            };
            push_conjunct(&mut conjuncts, node);
        } else {
            let path = FieldPath::parse(key).map_err(|e| bad_path(e, prefix))?;
            parse_field(path, value, prefix, &mut conjuncts)?;
        }
    }
    Ok(if conjuncts.len() == 1 {
        conjuncts.swap_remove(0)
    } else {
        Filter::And(conjuncts)
    })
}

/// Flattens `And` children into the enclosing conjunction, at any depth
/// (`{$and: [{a: 1, c: 2}], b: 3}` is `And([a, c, b])`), so that the planner
/// sees every condition an index could serve.
fn push_conjunct(conjuncts: &mut Vec<Filter>, node: Filter) {
    match node {
        Filter::And(children) => {
            for child in children {
                push_conjunct(conjuncts, child);
            }
        }
        other => conjuncts.push(other),
    }
}

fn logical_list(op: &str, value: &Bson, prefix: &str) -> Result<Vec<Filter>> {
    let bad = || bad_operand(op, prefix, "a non-empty array of query documents", value);
    let Bson::Array(items) = value else {
        return Err(bad());
    };
    if items.is_empty() {
        return Err(bad());
    }
    items
        .iter()
        .map(|item| match item {
            Bson::Document(d) => parse_query(d, prefix),
            _ => Err(bad()),
        })
        .collect()
}

fn parse_field(path: FieldPath, value: &Bson, prefix: &str, out: &mut Vec<Filter>) -> Result<()> {
    let shown = join(prefix, path.as_str());
    match value {
        Bson::Document(ops) if is_operator_document(ops) => {
            for pred in parse_operators(ops, &shown)? {
                out.push(Filter::Field {
                    path: path.clone(),
                    pred,
                });
            }
        }
        Bson::RegularExpression(_) => {
            return Err(unsupported("$regex", &shown));
        }
        _ => out.push(Filter::Field {
            path,
            pred: Predicate::Eq(to_raw("$eq", value, &shown)?),
        }),
    }
    Ok(())
}

/// The operators of an operator document, each parsed on its own (`shown` names the path).
fn parse_operators(ops: &Document, shown: &str) -> Result<Vec<Predicate>> {
    ops.iter()
        .map(|(op, operand)| parse_operator(op, operand, shown))
        .collect()
}

fn parse_operator(op: &str, operand: &Bson, path: &str) -> Result<Predicate> {
    let no_regex = |p: fn(RawBson) -> Predicate| match operand {
        Bson::RegularExpression(_) => Err(bad_operand(
            op,
            path,
            "a value other than a regular expression",
            operand,
        )),
        _ => Ok(p(to_raw(op, operand, path)?)),
    };
    match op {
        "$eq" => Ok(Predicate::Eq(to_raw(op, operand, path)?)),
        "$ne" => no_regex(Predicate::Ne),
        "$gt" => no_regex(Predicate::Gt),
        "$gte" => no_regex(Predicate::Gte),
        "$lt" => no_regex(Predicate::Lt),
        "$lte" => no_regex(Predicate::Lte),
        "$in" => Ok(Predicate::In(value_list(op, operand, path)?)),
        "$nin" => Ok(Predicate::Nin(value_list(op, operand, path)?)),
        "$all" => {
            let Bson::Array(items) = operand else {
                return Err(bad_operand(op, path, "an array", operand));
            };
            items
                .iter()
                .map(|item| match item {
                    Bson::RegularExpression(_) => Err(unsupported("$regex", path)),
                    Bson::Document(d) if is_operator_document(d) => Err(FilterError::Unsupported {
                        op: "$all".into(),
                        path: path.into(),
                        reason: "$all with $elemMatch operands is not supported; use $and of $elemMatch",
                    }),
                    _ => to_raw(op, item, path),
                })
                .collect::<Result<_>>()
                .map(Predicate::All)
        }
        "$size" => size(operand)
            .map(Predicate::Size)
            .ok_or_else(|| bad_operand(op, path, "a non-negative integer", operand)),
        "$exists" => match operand {
            Bson::Boolean(b) => Ok(Predicate::Exists(*b)),
            Bson::Int32(i) => Ok(Predicate::Exists(*i != 0)),
            Bson::Int64(i) => Ok(Predicate::Exists(*i != 0)),
            Bson::Double(f) => Ok(Predicate::Exists(*f != 0.0)),
            _ => Err(bad_operand(op, path, "a boolean (or a number)", operand)),
        },
        "$elemMatch" => {
            let Bson::Document(d) = operand else {
                return Err(bad_operand(op, path, "a document", operand));
            };
            // The document form when the first key is a field, a logical
            // operator, or when any key is a DBRef's (MongoDB's rule).
            let first_is_operator = d
                .keys()
                .next()
                .is_some_and(|k| k.starts_with('$') && !matches!(k.as_str(), "$and" | "$or" | "$nor"))
                && !d.keys().any(|k| is_dbref_field(k));
            if first_is_operator {
                Ok(Predicate::ElemMatch(ElemMatch::Value(parse_value_operators(
                    d, path,
                )?)))
            } else {
                Ok(Predicate::ElemMatch(ElemMatch::Document(Box::new(parse_query(
                    d, path,
                )?))))
            }
        }
        "$not" => match operand {
            Bson::Document(d) if !d.is_empty() && is_operator_document(d) => {
                Ok(Predicate::Not(parse_value_operators(d, path)?))
            }
            Bson::RegularExpression(_) => Err(unsupported("$regex", path)),
            _ => Err(bad_operand(op, path, "a non-empty operator document", operand)),
        },
        _ => Err(unknown_or_unsupported(op, path)),
    }
}

/// Operators of `$not` and of `$elemMatch`'s value form: every key must be an operator.
fn parse_value_operators(ops: &Document, path: &str) -> Result<Vec<Predicate>> {
    if let Some(key) = ops.keys().find(|k| !k.starts_with('$')) {
        return Err(FilterError::UnknownOperator {
            op: key.clone(),
            path: path.into(),
        });
    }
    parse_operators(ops, path)
}

fn value_list(op: &str, operand: &Bson, path: &str) -> Result<Vec<RawBson>> {
    let Bson::Array(items) = operand else {
        return Err(bad_operand(op, path, "an array", operand));
    };
    let mut out = items
        .iter()
        .map(|item| match item {
            Bson::RegularExpression(_) => Err(unsupported("$regex", path)),
            // A DBRef ({$ref, $id}) is a value, as everywhere else.
            Bson::Document(d) if is_operator_document(d) => {
                Err(bad_operand(op, path, "values, not operator documents", item))
            }
            _ => to_raw(op, item, path),
        })
        .collect::<Result<Vec<_>>>()?;
    out.sort_by(|a, b| compare(a.as_raw_bson_ref(), b.as_raw_bson_ref()));
    out.dedup_by(|a, b| compare(a.as_raw_bson_ref(), b.as_raw_bson_ref()) == Ordering::Equal);
    Ok(out)
}

fn size(operand: &Bson) -> Option<u64> {
    match *operand {
        Bson::Int32(i) => u64::try_from(i).ok(),
        Bson::Int64(i) => u64::try_from(i).ok(),
        Bson::Double(f) if f >= 0.0 && f.fract() == 0.0 && f < 1.8e19 => Some(f as u64),
        _ => None,
    }
}

/// Whether a field's value is a document of operators (its first key an
/// operator), not a literal document to compare with.
pub(crate) fn is_operator_document(d: &Document) -> bool {
    d.keys()
        .next()
        .is_some_and(|k| k.starts_with('$') && !is_dbref_field(k))
}

/// `$ref`, `$id` and `$db`: the fields of a DBRef, not operators.
fn is_dbref_field(key: &str) -> bool {
    matches!(key, "$ref" | "$id" | "$db")
}

fn to_raw(op: &str, value: &Bson, path: &str) -> Result<RawBson> {
    RawBson::try_from(value.clone())
        .map_err(|_| bad_operand(op, path, "a value that can be stored as BSON", value))
}

fn join(prefix: &str, path: &str) -> String {
    if prefix.is_empty() {
        path.to_owned()
    } else {
        format!("{prefix}.{path}")
    }
}

fn unknown_or_unsupported(op: &str, path: &str) -> FilterError {
    match UNSUPPORTED.iter().find(|(name, _)| *name == op) {
        Some((_, reason)) => FilterError::Unsupported {
            op: op.into(),
            path: path.into(),
            reason,
        },
        None => FilterError::UnknownOperator {
            op: op.into(),
            path: path.into(),
        },
    }
}

fn unsupported(op: &str, path: &str) -> FilterError {
    unknown_or_unsupported(op, path)
}

fn bad_operand(op: &str, path: &str, expected: &'static str, got: &Bson) -> FilterError {
    FilterError::BadOperand {
        op: op.into(),
        path: path.into(),
        expected,
        got: describe(got),
    }
}

fn bad_path(e: ValueError, prefix: &str) -> FilterError {
    match e {
        ValueError::InvalidPath { path, reason } => FilterError::InvalidPath {
            path: join(prefix, &path),
            reason,
        },
        _ => FilterError::InvalidPath {
            path: prefix.into(),
            reason: "invalid path",
        },
    }
}
