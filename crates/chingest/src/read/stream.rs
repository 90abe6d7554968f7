//! One read-only statement from an untrusted caller, run to its stream:
//! the engine's classifier and the [`Sandbox`] check it (a statement seen
//! before passes without the parses), `USE` sets its database, each
//! `last_values(…)` call is read from the cache into a snapshot table and
//! the statement is checked again as rewritten, then its output streams
//! chunk by chunk from a read-only connection; a caller that goes away
//! cancels it.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use tokio::sync::mpsc;

use crate::engine::{self, Canceller, Connection, Engine, OutputFormat, Streamed};
use crate::error::Result;
use crate::layout::names::quote_ident;
use crate::read::sandbox::{LastValuesCall, ReadScope, Sandbox, SNAPSHOT_DATABASE};

/// The output of a streamed query, chunk by chunk.
///
/// Dropping it before the end cancels the statement within moments, even
/// one that has produced nothing yet (an aggregation over a large table):
/// the engine is told to kill it.
#[derive(Debug)]
pub struct QueryChunks {
    receiver: mpsc::Receiver<Result<Vec<u8>>>,
    canceller: Canceller,
}

impl QueryChunks {
    /// The next chunk; `None` once the output is complete. An error ends
    /// the output early.
    pub async fn next(&mut self) -> Option<Result<Vec<u8>>> {
        let next = self.receiver.recv().await;
        if next.is_none() {
            // Complete: nothing left to cancel.
            self.canceller.finished = true;
        }
        next
    }
}

/// One untrusted statement, as asked.
pub(crate) struct Statement<F> {
    pub(crate) sql: String,
    pub(crate) format: OutputFormat,
    pub(crate) scope: ReadScope,
    /// Where unqualified table names are (else `default`).
    pub(crate) database: Option<String>,
    /// Reads a `last_values` call's rows from the cache.
    pub(crate) snapshot: F,
}

/// Runs `statement` on a read-only connection and streams its output. The
/// first message is the first chunk or the error that stopped the
/// statement from starting.
pub(crate) async fn run<F>(
    engine: &Arc<Engine>,
    sandbox: &Arc<Sandbox>,
    statement: Statement<F>,
) -> Result<QueryChunks>
where
    F: Fn(&LastValuesCall) -> Result<RecordBatch> + Send + 'static,
{
    let (mut conn, slot) = engine.read_only_connection().await?;
    let (sender, receiver) = mpsc::channel(4);
    let canceller = engine.canceller();
    let cancelled = Arc::clone(&canceller.cancelled);
    // The marker names the statement in `system.processes`, for KILL.
    let marker = canceller.marker.clone();
    let (engine, sandbox) = (Arc::clone(engine), Arc::clone(sandbox));
    tokio::task::spawn_blocking(move || {
        let database = statement.database.clone();
        let mut snapshots = Snapshots {
            engine,
            tables: Vec::new(),
        };
        let streamed = (|| -> Result<Streamed> {
            let (sql, streams) = check(&conn, &sandbox, &statement, &mut snapshots)?;
            let marked = format!("{sql}\n{marker}");
            let send = |chunk| sender.blocking_send(Ok(chunk)).is_ok();
            let streamed = match streams {
                true => engine::stream(&mut conn, &marked, statement.format, &cancelled, send)?,
                false => Streamed::Empty,
            };
            if streamed != Streamed::Empty {
                return Ok(streamed);
            }
            // SHOW, EXPLAIN, DESCRIBE are answered whole; so is a SELECT
            // with no rows, whose stream yields nothing, not even the
            // format's header (JSON's meta, CSVWithNames' names, a
            // Parquet schema).
            let output = engine::query(&conn, &marked, statement.format)?;
            let _ = sender.blocking_send(Ok(output));
            Ok(Streamed::Whole)
        })();
        snapshots.drop_all();
        // A connection left in another database must not go back.
        let streamed = match (streamed, &database) {
            (Ok(Streamed::Whole), Some(_)) => {
                engine::execute(&conn, "USE default").map(|()| Streamed::Whole)
            }
            (other, _) => other,
        };
        // Connection and slot go back before the answer ends (an error
        // sent, the sender dropped), so the caller's next statement finds
        // them free.
        engine::release(
            conn,
            slot,
            matches!(streamed, Ok(Streamed::Whole | Streamed::Empty)),
        );
        if let Err(err) = streamed {
            let _ = sender.blocking_send(Err(engine::limit_error(err)));
        }
    });
    Ok(QueryChunks {
        receiver,
        canceller,
    })
}

/// Checks the statement (or finds it passed before), makes its database
/// current, and replaces its `last_values` calls by snapshot tables,
/// checked again; returns the statement to run and whether it streams.
fn check<F>(
    conn: &Connection,
    sandbox: &Sandbox,
    statement: &Statement<F>,
    snapshots: &mut Snapshots,
) -> Result<(String, bool)>
where
    F: Fn(&LastValuesCall) -> Result<RecordBatch>,
{
    let Statement {
        sql,
        scope,
        database,
        snapshot,
        ..
    } = statement;
    let database = database.as_deref();
    // A statement seen before passes without its two parses.
    let checked = match sandbox.passed(sql, scope, database) {
        Some(checked) => checked,
        None => {
            engine::check_read_only(conn, sql)?;
            sandbox.check(conn, sql, scope, database)?
        }
    };
    // The current database is the connection's (a session's): set for
    // this statement, put back once it ran to its end (a connection whose
    // statement failed is closed instead).
    if let Some(name) = database {
        // `USE` is allowed in read-only mode.
        engine::execute(conn, &format!("USE {}", quote_ident(name)))?;
    }
    if checked.last_values.is_empty() {
        return Ok((sql.clone(), checked.streams));
    }
    let rewritten = snapshots.create(sql, &checked.last_values, snapshot)?;
    sandbox.check_rewritten(conn, &rewritten, scope, database, &snapshots.tables)?;
    Ok((rewritten, checked.streams))
}

/// Numbers the snapshot tables.
static SNAPSHOT_SEQ: AtomicU64 = AtomicU64::new(0);

/// The snapshot tables of one statement's `last_values` calls, made on a
/// connection of the writable pool (a read-only one may not create tables
/// nor read `ArrowStream`) and dropped once the statement ends. The
/// connection goes back to the pool in between: flushes need it while a
/// client reads.
struct Snapshots {
    engine: Arc<Engine>,
    /// `database.table`, unquoted, as the statement's tree names them.
    tables: Vec<String>,
}

impl Snapshots {
    /// Copies the snapshot of each of `calls` into a table of its own in
    /// [`SNAPSHOT_DATABASE`] and returns `sql` with each call's text
    /// replaced by its table's name.
    fn create(
        &mut self,
        sql: &str,
        calls: &[LastValuesCall],
        snapshot: &impl Fn(&LastValuesCall) -> Result<RecordBatch>,
    ) -> Result<String> {
        let conn = self.engine.connection_blocking()?;
        let created = self.create_on(&conn, sql, calls, snapshot);
        if created.is_err() {
            engine::discard(conn);
        }
        created
    }

    fn create_on(
        &mut self,
        conn: &Connection,
        sql: &str,
        calls: &[LastValuesCall],
        snapshot: &impl Fn(&LastValuesCall) -> Result<RecordBatch>,
    ) -> Result<String> {
        let database = quote_ident(SNAPSHOT_DATABASE);
        engine::execute(
            conn,
            &format!("CREATE DATABASE IF NOT EXISTS {database} ENGINE = Memory"),
        )?;
        let mut rewritten = sql.to_owned();
        // Back to front, so the spans before each stay valid.
        for call in calls.iter().rev() {
            let batch = snapshot(call)?;
            let table = format!("s{}", SNAPSHOT_SEQ.fetch_add(1, Ordering::Relaxed));
            let quoted = format!("{database}.{}", quote_ident(&table));
            self.tables.push(format!("{SNAPSHOT_DATABASE}.{table}"));
            // Not `CREATE … AS SELECT`: a Memory database cannot rename the
            // table that builds.
            engine::create_memory_table(conn, &quoted, batch)?;
            rewritten.replace_range(call.span.clone(), &quoted);
        }
        Ok(rewritten)
    }

    /// Drops the tables.
    fn drop_all(self) {
        if self.tables.is_empty() {
            return;
        }
        let conn = match self.engine.connection_blocking() {
            Ok(conn) => conn,
            Err(err) => {
                tracing::warn!(%err, "dropping last-value snapshots");
                return;
            }
        };
        for table in &self.tables {
            let (database, name) = table.split_once('.').unwrap_or_default();
            let drop = format!(
                "DROP TABLE IF EXISTS {}.{} SYNC",
                quote_ident(database),
                quote_ident(name)
            );
            if let Err(err) = engine::execute(&conn, &drop) {
                tracing::warn!(%err, table, "dropping a last-value snapshot");
                engine::discard(conn);
                return;
            }
        }
    }
}
