//! The library's error type. One enum for the whole public API; front ends
//! map each variant to one status code.

use std::sync::Arc;
use std::time::Duration;

use crate::config::InvalidConfig;
use crate::layout::names::{InvalidName, NameKind};

/// Errors returned by [`Ingestor`](crate::Ingestor) calls.
///
/// Line-level problems in a write are not errors: they are reported per line
/// in [`WriteOutcome::rejected`](crate::WriteOutcome::rejected) while the
/// other lines are stored.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A database, retention policy, measurement or field name is unusable.
    #[error("invalid {kind} name {name:?}: {reason}")]
    InvalidName {
        /// What the name is for.
        kind: NameKind,
        /// The name as given.
        name: String,
        /// Why it is refused.
        reason: String,
    },
    /// An Arrow batch handed to [`Ingestor::write_arrow`](crate::Ingestor::write_arrow)
    /// does not fit the measurement.
    #[error("column {column:?}: {reason}")]
    InvalidBatch {
        /// The offending column.
        column: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A statement refused by [`Ingestor::query_untrusted`](crate::Ingestor::query_untrusted).
    #[error("refused: {0}")]
    NotReadOnly(String),
    /// A query from an untrusted caller went past one of the
    /// [`QueryLimits`](crate::QueryLimits).
    #[error("query limit {limit} exceeded: {message}")]
    QueryLimit {
        /// The engine setting of the limit, e.g. `max_execution_time`.
        limit: &'static str,
        /// The engine's message.
        message: String,
    },
    /// `last_values(…)` in a statement names a measurement the last-value
    /// cache does not hold: not configured, evicted for its memory bound,
    /// or being rebuilt (after an open or an edit).
    #[error("measurement {measurement:?} of database {database:?} (retention policy {retention_policy:?}) \
             is not in the last-value cache (not configured, evicted for its memory bound, or being rebuilt): \
             query its table instead")]
    NotCached {
        /// The database named.
        database: String,
        /// The retention policy named (or the default).
        retention_policy: String,
        /// The measurement named.
        measurement: String,
    },
    /// Every query slot is busy and the queue for them is full
    /// ([`QueryLimits::max_concurrent`](crate::QueryLimits::max_concurrent),
    /// [`max_queued`](crate::QueryLimits::max_queued)). Retry after the
    /// given delay.
    #[error(
        "too many queries: {running} running and {queued} waiting for a slot, the most allowed \
         (query.max_concurrent, query.max_queued); retry later"
    )]
    TooManyQueries {
        /// Statements that may run at once.
        running: usize,
        /// Statements that may wait.
        queued: usize,
        /// A suggested delay before retrying.
        retry_after: Duration,
    },
    /// The statement waited its [`QueryLimits::queue_timeout`](crate::QueryLimits::queue_timeout)
    /// in the queue and no slot came free: the statements ahead of it are
    /// slow. Retry after the given delay.
    #[error(
        "no query slot came free within {waited:?} (query.queue_timeout): the {running} \
         statements running and those queued before this one take too long; retry later"
    )]
    QueryQueueTimeout {
        /// Statements that may run at once.
        running: usize,
        /// How long it waited.
        waited: Duration,
        /// A suggested delay before retrying.
        retry_after: Duration,
    },
    /// The database does not exist and the write did not ask to create it.
    #[error("database not found: {0:?}")]
    DatabaseNotFound(String),
    /// A delete or an update that cannot be done as asked (a value that
    /// does not fit the field, a field the measurement lacks, …).
    #[error("{0}")]
    InvalidEdit(String),
    /// The request conflicts with what is stored (a policy that tables
    /// created earlier cannot take).
    #[error("{0}")]
    Conflict(String),
    /// A query format name the engine does not know.
    #[error("unknown output format {0:?}")]
    UnknownFormat(String),
    /// The engine reported an error (the message is the engine's).
    #[error("engine: {0}")]
    Engine(String),
    /// Inserting logged rows into the engine failed; they stay in the log
    /// and the insert is retried until it lands.
    #[error(
        "inserting logged rows failed (they stay in the write-ahead log and are retried): {0}"
    )]
    Flush(#[source] Arc<Error>),
    /// A shard of the cluster (the `clickhouse` storage mode) failed a
    /// request, on every replica tried.
    #[error("shard {shard} ({url}): {message}")]
    Shard {
        /// Its index in the configured list.
        shard: usize,
        /// The replica that failed last.
        url: String,
        /// What it answered, or why no answer came.
        message: String,
    },
    /// Something inside chingest failed that no request caused: a task
    /// that panicked, the log's reader thread. A bug or the machine.
    #[error("internal error: {0}")]
    Internal(String),
    /// The write could not be buffered within its wait: too many bytes are
    /// already waiting to be flushed. Retry after the given delay.
    #[error("overloaded: {buffered} bytes are waiting to be written (limit {limit}); retry later")]
    Overloaded {
        /// Bytes held by the batchers when the write gave up.
        buffered: usize,
        /// The configured limit.
        limit: usize,
        /// A suggested delay before retrying.
        retry_after: Duration,
    },
    /// The write-ahead log has reached its size limit: inserts into the
    /// engine are behind or failing. Retry after the given delay.
    #[error("the write-ahead log is full ({bytes} bytes, limit {limit}): inserts into the engine are behind; retry later")]
    LogFull {
        /// Bytes in the log.
        bytes: u64,
        /// The configured limit.
        limit: u64,
        /// A suggested delay before retrying.
        retry_after: Duration,
    },
    /// A [`Durability::Visible`](crate::Durability::Visible) write is
    /// durable in the log, but its insert into the engine failed; it is
    /// retried until it lands. Resending the write would store it twice.
    #[error("the rows are durable in the write-ahead log but not yet queryable (the engine insert failed and is being retried; do not resend): {0}")]
    NotVisible(#[source] Arc<Error>),
    /// The write-ahead log could not be read when opening.
    #[error("write-ahead log: {0}")]
    LogRead(#[from] crate::wal::ReadError),
    /// The ingestor is closing or closed.
    #[error("the ingestor is closed")]
    Closed,
    /// The configuration is unusable.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A backup location, request or restore target is unusable (a
    /// relative directory, a non-empty data directory, a database the
    /// backup does not hold, …).
    #[error("{0}")]
    InvalidBackup(String),
    /// A backup is not whole: no manifest (never finished), or files
    /// missing, extra, shorter or different from what its manifest
    /// lists. Nothing was restored.
    #[error("the backup at {location} is damaged: {reason}")]
    DamagedBackup {
        /// Where the backup is (no credentials).
        location: String,
        /// What is wrong, naming the file.
        reason: String,
    },
    /// A file-system operation on the data directory failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl From<InvalidName> for Error {
    fn from(err: InvalidName) -> Self {
        Error::InvalidName {
            kind: err.kind,
            name: err.name,
            reason: err.reason,
        }
    }
}

impl From<InvalidConfig> for Error {
    fn from(err: InvalidConfig) -> Self {
        Error::Config(err.0)
    }
}

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
