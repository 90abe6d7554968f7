//! What a PromQL request can fail with, in Prometheus's error types: the
//! front end answers each with its `errorType` and status.

use chingest::Denied;

/// A PromQL request's error, by Prometheus's `errorType`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request is malformed: a query that does not parse, a bad
    /// parameter, something chingest does not support (`bad_data`, 400).
    #[error("{0}")]
    BadData(String),
    /// The query is valid but cannot be answered: a matching error, a
    /// limit (`execution`, 422).
    #[error("{0}")]
    Execution(String),
    /// The query ran past its time (`timeout`, 503).
    #[error("{0}")]
    Timeout(String),
    /// The caller may not read the database (the front end's 403).
    #[error(transparent)]
    Forbidden(#[from] Denied),
    /// The library refused or failed the query for a reason the query did
    /// not cause: too many queries, closing, an engine failure. The front
    /// end answers it as it answers the library's errors elsewhere
    /// (`internal` unless that says otherwise).
    #[error(transparent)]
    Engine(chingest::Error),
}

impl Error {
    /// Prometheus's `errorType` of the error.
    pub fn error_type(&self) -> &'static str {
        match self {
            Error::BadData(_) => "bad_data",
            Error::Execution(_) => "execution",
            Error::Timeout(_) => "timeout",
            Error::Forbidden(_) => "forbidden",
            Error::Engine(_) => "internal",
        }
    }
}

impl From<chingest::Error> for Error {
    fn from(err: chingest::Error) -> Self {
        match err {
            chingest::Error::QueryLimit {
                limit: "max_execution_time",
                ..
            } => Error::Timeout(format!("query timed out in query execution: {err}")),
            chingest::Error::QueryLimit { .. } => Error::Execution(err.to_string()),
            other => Error::Engine(other),
        }
    }
}
