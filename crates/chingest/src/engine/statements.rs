//! One statement on a connection: run for its output (whole, streamed,
//! as rows or Arrow batches) or for none, refused unless it only reads,
//! cancelled when its caller goes away ([`Canceller`]), and its errors in
//! the crate's terms: the engine's message, or the query limit it hit.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use chdb_rust::admin::QueryClass;
use chdb_rust::connection::Connection;
use deadpool::managed;

use crate::engine::format::OutputFormat;
use crate::engine::pool::ConnectionManager;
use crate::error::{Error, Result};
use crate::layout::names::quote_literal;

/// Runs a statement on `conn`, discarding its output.
pub(crate) fn execute(conn: &Connection, sql: &str) -> Result<()> {
    let started = std::time::Instant::now();
    conn.query(sql, OutputFormat::Null)?;
    traced(started, sql);
    Ok(())
}

/// Runs a query on `conn` and returns its TabSeparated output as lines of
/// tab-separated fields (for small catalog queries).
pub(crate) fn query_rows(conn: &Connection, sql: &str) -> Result<Vec<Vec<String>>> {
    let started = std::time::Instant::now();
    let result = conn.query(sql, OutputFormat::TabSeparatedRaw)?;
    traced(started, sql);
    let text = String::from_utf8_lossy(result.data_ref());
    Ok(text
        .lines()
        .map(|line| line.split('\t').map(str::to_owned).collect())
        .collect())
}

/// Runs a query on `conn` and returns its whole output in `format`.
pub(crate) fn query(conn: &Connection, sql: &str, format: OutputFormat) -> Result<Vec<u8>> {
    Ok(conn.query(sql, format)?.data_ref().to_vec())
}

/// Runs a query on `conn` and returns its result as Arrow batches.
pub(crate) fn query_arrow(conn: &Connection, sql: &str) -> Result<Vec<RecordBatch>> {
    let started = std::time::Instant::now();
    let batches = conn
        .query_arrow(sql)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::Engine(e.to_string()));
    traced(started, sql);
    batches
}

/// Logs a statement's time (`log = "info,chingest::engine=debug"`): where a
/// slow answer's time went.
fn traced(started: std::time::Instant, sql: &str) {
    tracing::debug!(
        micros = started.elapsed().as_micros() as u64,
        sql = sql.get(..sql.floor_char_boundary(1000)).unwrap_or(sql),
        "statement"
    );
}

/// How a streamed statement ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Streamed {
    /// It produced chunks to its end.
    Whole,
    /// It ran but produced no chunk (SHOW, EXPLAIN, a SELECT with no rows):
    /// its whole answer is to be asked for with [`query`].
    Empty,
    /// It was cancelled, or `send` refused a chunk.
    Abandoned,
}

/// Runs `sql` on `conn` and hands each chunk of its output in `format` to
/// `send` as the engine produces it; stops when `send` returns `false` or
/// `cancelled` is set before it runs.
pub(crate) fn stream(
    conn: &mut Connection,
    sql: &str,
    format: OutputFormat,
    cancelled: &AtomicBool,
    mut send: impl FnMut(Vec<u8>) -> bool,
) -> Result<Streamed> {
    let mut stream = conn.query_stream(sql, format)?;
    // Cancelled before it was running: KILL may have missed it.
    if cancelled.load(Ordering::SeqCst) {
        stream.cancel();
        return Ok(Streamed::Abandoned);
    }
    let mut produced = false;
    while let Some(chunk) = stream.next_chunk()? {
        produced = true;
        if !send(chunk.data_ref().to_vec()) {
            stream.cancel();
            return Ok(Streamed::Abandoned);
        }
    }
    Ok(if produced {
        Streamed::Whole
    } else {
        Streamed::Empty
    })
}

/// The lines of the engine's parse of `sql` (`EXPLAIN AST`). A syntax
/// error's `failed at position N` counts from the start of the `EXPLAIN`;
/// it is moved to count from the start of `sql`, as its author wrote it.
pub(crate) fn syntax_tree(conn: &Connection, sql: &str) -> Result<Vec<String>> {
    const EXPLAIN: &str = "EXPLAIN AST ";
    match query_rows(conn, &format!("{EXPLAIN}{sql}")) {
        Ok(tree) => Ok(tree.into_iter().map(|row| row.join("\t")).collect()),
        Err(Error::Engine(message)) => Err(Error::Engine(shift_position(&message, EXPLAIN.len()))),
        Err(other) => Err(other),
    }
}

/// `message` with its `failed at position N` moved back by `by`.
fn shift_position(message: &str, by: usize) -> String {
    const AT: &str = "failed at position ";
    let Some(start) = message.find(AT).map(|i| i + AT.len()) else {
        return message.to_owned();
    };
    let digits = message[start..]
        .find(|c: char| !c.is_ascii_digit())
        .map_or(message.len(), |end| start + end);
    match message[start..digits].parse::<usize>() {
        Ok(position) if position > by => {
            format!(
                "{}{}{}",
                &message[..start],
                position - by,
                &message[digits..]
            )
        }
        _ => message.to_owned(),
    }
}

/// Refuses anything but a single read-only statement (writes, DDL, `SET`,
/// `INTO OUTFILE`, several statements), as classified by the engine's own
/// parser. The read-only connection refuses table functions and settings
/// changes on its own.
pub(crate) fn check_read_only(conn: &Connection, sql: &str) -> Result<()> {
    let analysis = conn.classify_query(sql, None)?;
    match (analysis.class, analysis.statement_count) {
        (QueryClass::ReadOnly, 1) => Ok(()),
        (QueryClass::Unknown, _) => {
            // Did not parse: let the engine say why.
            syntax_tree(conn, sql)?;
            Err(Error::NotReadOnly(
                "the statement was not recognised".into(),
            ))
        }
        (QueryClass::ReadOnly, n) => Err(Error::NotReadOnly(format!(
            "{n} statements; send one at a time"
        ))),
        (class, _) => Err(Error::NotReadOnly(format!(
            "a {} statement; only reads are accepted here",
            class.as_str().to_lowercase().replace('_', "-")
        ))),
    }
}

/// An engine error that reports a query limit, as [`Error::QueryLimit`]
/// naming the limit's setting; other errors as they are.
pub(crate) fn limit_error(err: Error) -> Error {
    let Error::Engine(message) = err else {
        return err;
    };
    let limit = if message.contains("(TIMEOUT_EXCEEDED)") {
        "max_execution_time"
    } else if message.contains("(MEMORY_LIMIT_EXCEEDED)") {
        "max_memory_usage"
    } else if message.contains("(TOO_MANY_ROWS)") {
        "max_rows_to_read"
    } else if message.contains("(TOO_MANY_BYTES)") {
        "max_bytes_to_read"
    } else if message.contains("(TOO_MANY_ROWS_OR_BYTES)") {
        match message.contains("max bytes") {
            true => "max_result_bytes",
            false => "max_result_rows",
        }
    } else {
        return Error::Engine(message);
    };
    Error::QueryLimit { limit, message }
}

/// Kills its statement when dropped before the statement finished.
#[derive(Debug)]
pub(crate) struct Canceller {
    /// A comment appended to the statement, unique in this process.
    pub(crate) marker: String,
    /// Set when dropped; the statement checks it once running.
    pub(crate) cancelled: Arc<AtomicBool>,
    /// The statement ended: nothing to cancel.
    pub(crate) finished: bool,
    /// Where `KILL QUERY` runs (the read-only connections may not).
    pool: managed::Pool<ConnectionManager>,
}

/// Numbers the statements' markers.
static STATEMENT_SEQ: AtomicU64 = AtomicU64::new(0);

impl Canceller {
    pub(super) fn new(pool: managed::Pool<ConnectionManager>) -> Canceller {
        let n = STATEMENT_SEQ.fetch_add(1, Ordering::Relaxed);
        Canceller {
            marker: format!("/* chingest statement {n} */"),
            cancelled: Arc::default(),
            finished: false,
            pool,
        }
    }
}

impl Drop for Canceller {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        self.cancelled.store(true, Ordering::SeqCst);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (pool, marker) = (self.pool.clone(), self.marker.clone());
        runtime.spawn(async move {
            let Ok(conn) = pool.get().await else { return };
            let kill = format!(
                "KILL QUERY WHERE query LIKE {} ASYNC",
                quote_literal(&format!("%{marker}"))
            );
            let killed = tokio::task::spawn_blocking(move || execute(&conn, &kill)).await;
            if let Ok(Err(err)) = killed {
                tracing::warn!(%err, "cancelling a statement whose caller went away");
            }
        });
    }
}

/// The engine's errors: a failed statement's message as the engine wrote it.
impl From<chdb_rust::error::Error> for Error {
    fn from(err: chdb_rust::error::Error) -> Self {
        match err {
            chdb_rust::error::Error::QueryError(message) => Error::Engine(message),
            other => Error::Engine(other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syntax_error_positions_count_from_the_statement() {
        let engine =
            "Code: 62. DB::Exception: Syntax error: failed at position 19 (1): 1. Expected";
        assert_eq!(
            shift_position(engine, 12),
            "Code: 62. DB::Exception: Syntax error: failed at position 7 (1): 1. Expected"
        );
        assert_eq!(shift_position("no position here", 12), "no position here");
        assert_eq!(
            shift_position("failed at position 3", 12),
            "failed at position 3"
        );
    }
}
