//! The query layer's error type.

/// Errors of slate-query.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Storage or document errors from slate-core.
    #[error(transparent)]
    Core(#[from] slate_core::Error),
    /// A filter that does not parse (names the operator or operand).
    #[error("bad filter: {0}")]
    Filter(#[from] crate::FilterError),
    /// An update document that does not parse or apply.
    #[error("bad update: {0}")]
    Update(#[from] crate::UpdateError),
    /// A vector search refused (query vector, k, field).
    #[error(transparent)]
    Vector(#[from] slate_vector::Error),
    /// A query that cannot run as asked (a bad sort spec, a bad option).
    #[error("invalid query: {reason}")]
    InvalidQuery { reason: String },
    /// A stored document that does not deserialize into the type a typed
    /// find asked for (a missing field, a string where a number was wanted).
    #[error("document {id} does not decode as {type_name}: {reason}")]
    Decode {
        /// The document's `_id`, as relaxed extended JSON.
        id: String,
        /// The requested Rust type.
        type_name: &'static str,
        /// What serde reported.
        reason: String,
    },
}

/// `Result` with slate-query's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
