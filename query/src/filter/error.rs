//! Errors of filter parsing. Each names the operator or operand at fault and the field path
//! it was found on (empty for the top level).

use bson::Bson;

/// Why a query document was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FilterError {
    /// An operator MongoDB does not have, or a field name where an operator was expected.
    #[error("unknown operator {op} {}", at(.path))]
    UnknownOperator {
        /// The operator as written (`$foo`).
        op: String,
        /// The field path it was applied to.
        path: String,
    },
    /// A MongoDB operator Slate does not implement (`$regex`, `$type`, `$where`, ...).
    #[error("unsupported operator {op} {}: {reason}", at(.path))]
    Unsupported {
        /// The operator.
        op: String,
        /// The field path it was applied to.
        path: String,
        /// Why, or what to use instead.
        reason: &'static str,
    },
    /// An operator with an operand of the wrong shape.
    #[error("{op} {} needs {expected}, got {got}", at(.path))]
    BadOperand {
        /// The operator.
        op: String,
        /// The field path it was applied to.
        path: String,
        /// What the operator accepts.
        expected: &'static str,
        /// The operand's type and (shortened) value.
        got: String,
    },
    /// A field name that is not a valid dot path (empty, `a..b`, NUL byte).
    #[error("invalid field path {path:?}: {reason}")]
    InvalidPath {
        /// The path as written.
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

fn at(path: &str) -> String {
    if path.is_empty() {
        "at the top level".to_owned()
    } else {
        format!("on field {path:?}")
    }
}

/// `"<type> <value>"`, the value cut to 40 characters, for error messages.
pub(crate) fn describe(v: &Bson) -> String {
    let ty = slate_core::value::type_name(v.element_type());
    let mut text = v.to_string();
    if let Some((cut, _)) = text.char_indices().nth(40) {
        text.truncate(cut);
        text.push('…');
    }
    format!("{ty} {text}")
}
