//! Why a payload cannot become tables: the crate's one error type, so the
//! server maps codec failures to its answers in one place (today every
//! one is a 400: nothing of the request is stored, and sending it again
//! cannot help).

use arrow::error::ArrowError;

/// A payload that cannot become tables.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The payload breaks its protocol's rules or ours (a symbol reference
    /// past the table, a label named like a stored column, …); the message
    /// says what is wrong, naming the series where there is one.
    #[error("{0}")]
    Invalid(String),
    /// The payload is not protobuf, or not the message its protocol sends
    /// (cut short, a field of another wire type, a string not UTF-8).
    #[error("not {message}: malformed protobuf: {why}")]
    Malformed {
        /// The message expected, with its article ("a remote write
        /// WriteRequest").
        message: &'static str,
        /// Where it breaks.
        why: String,
    },
    /// Arrow refused the columns built for a table.
    #[error(transparent)]
    Arrow(#[from] ArrowError),
}

/// A codec's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
