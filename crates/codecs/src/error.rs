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

/// What a caught panic said, when it said it as text (`panic!` with a
/// message gives a `String`, with a literal a `&str`). For the third
/// parties whose panics are caught and made errors: arrow's IPC reader
/// here, PromQL's grammar in `chingest-promql`.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> Option<&str> {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
}
