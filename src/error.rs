//! The facade's error type: everything a Slate call can fail with.

/// Errors of the `slate` API.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Storage, collections, documents, indexes (see [`slate_core::Error`]).
    #[error(transparent)]
    Core(#[from] slate_core::Error),
    /// Filters, updates, plans and searches (see [`slate_query::Error`]).
    #[error(transparent)]
    Query(#[from] slate_query::Error),
    /// A server answered a [`crate::Client`] request with an error; `message`
    /// is the text the embedded call would have given.
    #[error("{message}")]
    Server {
        /// What went wrong (`docs/protocol.md` lists the kinds).
        kind: crate::ErrorKind,
        /// The server's message, naming the input.
        message: String,
    },
    /// A [`crate::Client`]'s connection failed, closed, or broke the protocol.
    #[error("server {addr}: {reason}")]
    Connection {
        /// The server's address.
        addr: String,
        /// What happened.
        reason: String,
    },
}

impl From<slate_query::FilterError> for Error {
    fn from(e: slate_query::FilterError) -> Self {
        Error::Query(e.into())
    }
}

impl From<slate_query::UpdateError> for Error {
    fn from(e: slate_query::UpdateError) -> Self {
        Error::Query(e.into())
    }
}

/// `Result` with the facade's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
