//! Why a statement or a request has no answer. A front end maps these to
//! its own errors in one place; InfluxQL's own rule is that a statement's
//! error is part of the answer ([`Error::Statement`]) while the others
//! refuse the request.

use chingest::Denied;

/// Why a statement, or the whole request, has no answer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The statement's `error` in its result: the request still answers,
    /// and the statements after it run (InfluxDB answers 200).
    #[error("{0}")]
    Statement(String),
    /// The query is not InfluxQL (or a `$name` cannot be bound): nothing
    /// runs (InfluxDB answers 400).
    #[error("error parsing query: {0}")]
    Parse(String),
    /// A statement cannot run as asked (no database named, a delete's
    /// condition): the request fails here, after the statements before it
    /// ran.
    #[error("{0}")]
    Invalid(String),
    /// The caller may not do what a statement asks.
    #[error("{0}")]
    Forbidden(#[from] Denied),
    /// The library failed (closed, overloaded, the engine): the request
    /// fails as the library's error says.
    #[error(transparent)]
    Request(chingest::Error),
}

/// A query's error from the library: the engine's own (a statement it
/// cannot run) and a query limit are the statement's error, the rest the
/// request's. Administrative statements map the library's errors
/// themselves.
impl From<chingest::Error> for Error {
    fn from(err: chingest::Error) -> Self {
        match err {
            chingest::Error::Engine(message) => Error::Statement(message),
            limit @ chingest::Error::QueryLimit { .. } => Error::Statement(limit.to_string()),
            other => Error::Request(other),
        }
    }
}

impl From<String> for Error {
    fn from(message: String) -> Self {
        Error::Statement(message)
    }
}
