//! The vector layer's errors: one enum for the crate, one for a refused vector.

use thiserror::Error;

/// Why a vector (stored or query) was refused.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum VectorError {
    /// The vector does not have the field's dimension.
    #[error("expected {expected} dimensions, got {got}")]
    WrongDimension {
        /// The field's dimension.
        expected: usize,
        /// The vector's length.
        got: usize,
    },
    /// A component is NaN or infinite.
    #[error("component {index} is {value}, not a finite number")]
    NonFinite {
        /// Position of the first offending component.
        index: usize,
        /// Its value.
        value: f32,
    },
    /// A component so large that a distance to a vector like it would
    /// overflow f32 to infinity (and stop ordering the hits).
    #[error("component {index} is {value}: beyond {limit:e}, distances would overflow f32")]
    TooLarge {
        /// Position of the first offending component.
        index: usize,
        /// Its value.
        value: f32,
        /// The largest magnitude a component of this dimension may have.
        limit: f32,
    },
    /// Under cosine, a vector other than zero so short that f32 cannot
    /// normalise it (its squared norm underflows): its distances would
    /// not be exact.
    #[error(
        "its norm is {norm:e}: under cosine a vector must be zero or have a norm of at least 1e-14 \
         (f32 cannot normalise a shorter one)"
    )]
    TooShort {
        /// The vector's norm.
        norm: f64,
    },
}

/// Errors of `slate-vector`.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    /// A vector offered for storage was refused; nothing was written for it.
    #[error("vector for id `{}` refused: {source}", .id.escape_ascii())]
    InvalidVector {
        /// The id the vector was to be stored under.
        id: Box<[u8]>,
        /// What was wrong with it.
        #[source]
        source: VectorError,
    },
    /// A query vector was refused.
    #[error("query {index} refused: {source}")]
    InvalidQuery {
        /// Position of the query in its batch (0 for a single query).
        index: usize,
        /// What was wrong with it.
        #[source]
        source: VectorError,
    },
    /// A query batch is not a whole number of queries.
    #[error("a batch of {len} floats is not a whole number of {dim}-dimensional queries")]
    BatchShape {
        /// Length of the batch slice.
        len: usize,
        /// The field's dimension.
        dim: usize,
    },
    /// A top-k search asked for zero results.
    #[error("k must be at least 1")]
    ZeroK,
    /// A metric name that is not `l2`, `cosine` or `dot`.
    #[error("unknown metric `{name}` (expected l2, cosine or dot)")]
    UnknownMetric {
        /// The name as given.
        name: String,
    },
    /// A cache was configured with dimension 0 or above the maximum.
    #[error("a vector field needs 1 to {max} dimensions, got {dim}")]
    InvalidDimension {
        /// The requested dimension.
        dim: usize,
        /// The largest accepted dimension.
        max: usize,
    },
    /// A cache was configured with an unusable chunk size.
    #[error("chunk_rows must be between 1 and {max}, got {chunk_rows}")]
    InvalidChunkRows {
        /// The requested rows per chunk.
        chunk_rows: usize,
        /// The largest accepted value.
        max: usize,
    },
    /// A commit's version is not above the previous commit's.
    #[error("commit version {version} is not greater than the last committed version {last}")]
    VersionNotIncreasing {
        /// The refused version.
        version: u64,
        /// The last committed version.
        last: u64,
    },
    /// `u64::MAX` marks uncommitted rows and cannot be a commit version.
    #[error("commit version u64::MAX is reserved")]
    ReservedVersion,
    /// A view was asked for at a version that compaction has discarded.
    #[error("version {requested} is older than the cache's oldest readable version {oldest}")]
    VersionCompacted {
        /// The version asked for.
        requested: u64,
        /// The oldest version the current generation can serve.
        oldest: u64,
    },
    /// The cache generation has no room for more rows (row ids are 32-bit).
    #[error("the cache is full: at most {limit} rows per generation")]
    TooManyRows {
        /// Maximum rows in one generation.
        limit: usize,
    },
    /// A search thread pool could not be started.
    #[error("could not start a search thread pool of {threads} threads: {source}")]
    ThreadPool {
        /// Requested pool size.
        threads: usize,
        /// Rayon's error.
        #[source]
        source: rayon::ThreadPoolBuildError,
    },
}

/// `Result` with [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
