//! The wire kind of every facade error: what a server sends, what a client
//! and a test compare.

use crate::server::protocol::{ErrorKind, WireError};
use crate::Error;

fn core_kind(e: &slate_core::Error) -> ErrorKind {
    use slate_core::Error as C;
    match e {
        C::UnknownCollection { .. } => ErrorKind::UnknownCollection,
        C::CollectionExists { .. } => ErrorKind::CollectionExists,
        C::InvalidCollectionName { .. } => ErrorKind::InvalidCollectionName,
        C::InvalidConfig { .. } => ErrorKind::InvalidConfig,
        C::InvalidPartition { .. } => ErrorKind::InvalidPartition,
        C::InvalidId { .. } => ErrorKind::InvalidId,
        C::UnknownIndex { .. } => ErrorKind::UnknownIndex,
        C::IndexExists { .. } => ErrorKind::IndexExists,
        C::UnknownVectorField { .. } => ErrorKind::UnknownVectorField,
        C::DuplicateId { .. } => ErrorKind::DuplicateId,
        C::InvalidDocument { .. } => ErrorKind::InvalidDocument,
        C::InvalidVector { .. } => ErrorKind::InvalidVector,
        C::Corrupt { .. } => ErrorKind::Corrupt,
        C::Poisoned { .. } => ErrorKind::Poisoned,
        C::NestedWrite => ErrorKind::BadRequest,
        C::TransactionTooLarge { .. } => ErrorKind::TransactionTooLarge,
        _ => ErrorKind::Storage,
    }
}

fn vector_kind(e: &slate_vector::Error) -> ErrorKind {
    use slate_vector::Error as V;
    match e {
        V::InvalidVector { .. } | V::InvalidQuery { .. } | V::BatchShape { .. } => ErrorKind::InvalidVector,
        V::ZeroK | V::UnknownMetric { .. } | V::InvalidDimension { .. } => ErrorKind::InvalidQuery,
        _ => ErrorKind::Storage,
    }
}

impl Error {
    /// What kind of error this is, as a server names it on the wire.
    pub fn kind(&self) -> ErrorKind {
        use slate_query::Error as Q;
        match self {
            Error::Core(e) | Error::Query(Q::Core(e)) => core_kind(e),
            Error::Query(Q::Filter(_)) => ErrorKind::BadFilter,
            Error::Query(Q::Update(_)) => ErrorKind::BadUpdate,
            Error::Query(Q::Vector(e)) => vector_kind(e),
            Error::Query(Q::InvalidQuery { .. }) => ErrorKind::InvalidQuery,
            Error::Query(_) => ErrorKind::InvalidQuery,
            Error::Server { kind, .. } => *kind,
            Error::Connection { .. } => ErrorKind::Connection,
        }
    }
}

impl From<&Error> for WireError {
    fn from(e: &Error) -> Self {
        WireError::new(e.kind(), e.to_string())
    }
}
