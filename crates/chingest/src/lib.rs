//! chingest: metrics ingest into embedded chDB.
//!
//! An [`Ingestor`] opens the in-process ClickHouse engine on a data directory
//! and writes InfluxDB line protocol or Arrow batches into MergeTree tables —
//! no database server, no network hop. Each tag set is hashed to a `series_id`
//! (see [`series`]); rows are built straight into Arrow columns, gathered per
//! table, and inserted in large batches through a pool of engine connections.
//!
//! ```no_run
//! # async fn demo() -> chingest::Result<()> {
//! use chingest::{IngestConfig, Ingestor, WriteOptions};
//!
//! let ingestor = Ingestor::open(IngestConfig::new("./data")).await?;
//! let outcome = ingestor
//!     .write_lp("telegraf", "autogen", b"cpu,host=a usage=0.5 1700000000000000000\n", &WriteOptions::default())
//!     .await?;
//! assert_eq!(outcome.accepted, 1);
//! // The write returned once logged; `flush` makes everything logged queryable.
//! ingestor.flush().await?;
//! let csv = ingestor
//!     .query("SELECT count() FROM telegraf.`cpu.autogen`", "CSV")
//!     .await?;
//! assert_eq!(csv, b"1\n");
//! ingestor.close().await?;
//! # Ok(()) }
//! ```
//!
//! # What an acknowledged write means
//!
//! A write returns once its rows are in the write-ahead log (`<data
//! dir>/wal`), as durably as its [`Durability`] asks: synced to disk
//! (the default), written to the operating system, or only queued in
//! memory; or, with [`Durability::Visible`], once they are also in the
//! engine and queryable. Behind the log, each table's rows are inserted
//! into its MergeTree in large batches, every insert exactly once: after a
//! crash, [`Ingestor::open`] replays what the log holds past its checkpoint
//! before it returns, and the engine ignores a replayed insert that had
//! already landed.
//!
//! # One engine per process
//!
//! chDB is process-global: a process opens one data directory, and every
//! [`Ingestor`] in it must use the same one (a second directory is refused
//! until the first is closed).

mod catalog;
mod config;
mod durable;
mod edit;
mod engine;
mod error;
mod last_value;
pub mod layout;
pub mod read;
pub mod stats;
pub mod wal;
mod write;

pub use layout::{names, schema, series};
pub use read::sandbox;
pub use write::chunk;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arrow::record_batch::RecordBatch;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tracing::Instrument;

pub use arrow;
pub use write::budget::MemoryReservation;
pub use config::{
    CardinalityLimits, DuplicatePolicy, FlushPolicy, IngestConfig, QueryLimits, WalConfig,
};
pub use edit::{FieldValue, PointFilter, TagPredicate};
pub use engine::QueryChunks;
pub use error::{Error, Result};
pub use last_value::{LastField, LastSeries, LastValue, LastValueConfig};
pub use lineproto::Precision;
pub use write::points::{Point, PointValue};
pub use sandbox::ReadScope;
pub use stats::IngestStats;

use crate::write::appender::{Appender, PendingWrite, TablePart};
use crate::write::batcher::FlushOutcome;
use crate::write::budget::MemoryBudget;
use crate::catalog::{Admission, Catalog, Database, Table};
use crate::engine::Engine;
use crate::last_value::LastValues;
use crate::layout::names::NameKind;
use crate::layout::series::SeriesKey;

/// When a write is answered: how far its rows have gone by then, and so
/// what survives a crash. Every mode writes the rows to the log, and every
/// logged row reaches the engine exactly once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Once the log is synced to disk (`fdatasync`): survives the process
    /// being killed and the machine losing power. The default.
    #[default]
    Fsync,
    /// Once the log is written to the operating system: survives the
    /// process being killed, not a power loss.
    Os,
    /// Once the rows are queued for the log, in memory: the fastest; a
    /// crash loses what was not written yet (a few milliseconds of writes
    /// under load), and a failure to write the log is only logged.
    None,
    /// Once the rows are also inserted into the engine and queryable
    /// (read-your-writes): the slowest, as each such write asks for a flush.
    Visible,
}

impl Durability {
    /// The mode's name: `fsync`, `os`, `none` or `visible`.
    pub fn as_str(self) -> &'static str {
        match self {
            Durability::Fsync => "fsync",
            Durability::Os => "os",
            Durability::None => "none",
            Durability::Visible => "visible",
        }
    }
}

impl std::str::FromStr for Durability {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "fsync" => Ok(Durability::Fsync),
            "os" => Ok(Durability::Os),
            "none" => Ok(Durability::None),
            "visible" => Ok(Durability::Visible),
            _ => Err(format!(
                "unknown durability {s:?}: use fsync, os, none or visible"
            )),
        }
    }
}

impl std::fmt::Display for Durability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Options of one write call.
#[derive(Debug, Clone, Copy)]
pub struct WriteOptions {
    /// Unit of the timestamps in a line-protocol body.
    pub precision: Precision,
    /// When the write returns (see [`Durability`]).
    pub durability: Durability,
    /// Longest line accepted, in bytes; longer lines are rejected.
    pub max_line_len: usize,
    /// Most tags a line may have; lines with more are rejected.
    pub max_tags_per_line: usize,
    /// Most fields a line may have; lines with more are rejected.
    pub max_fields_per_line: usize,
    /// Longest measurement, tag key or new field name, in bytes (names the
    /// engine cannot hold are refused whatever this says).
    pub max_name_len: usize,
    /// Create the database if it does not exist (default); otherwise such a
    /// write fails with [`Error::DatabaseNotFound`].
    pub create_database: bool,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            precision: Precision::Nanoseconds,
            durability: Durability::Fsync,
            max_line_len: usize::MAX,
            max_tags_per_line: usize::MAX,
            max_fields_per_line: usize::MAX,
            max_name_len: usize::MAX,
            create_database: true,
        }
    }
}

/// A line that was not stored, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineRejection {
    /// 1-based line number in the request body.
    pub line: usize,
    /// 1-based byte column of the problem, when it is known.
    pub column: Option<usize>,
    /// What is wrong, for the client.
    pub reason: String,
}

impl std::fmt::Display for LineRejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.column {
            Some(column) => write!(f, "line {}, column {}: {}", self.line, column, self.reason),
            None => write!(f, "line {}: {}", self.line, self.reason),
        }
    }
}

/// The result of a line-protocol write: what was stored and what was not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteOutcome {
    /// Lines stored.
    pub accepted: usize,
    /// Lines refused, in line order.
    pub rejected: Vec<LineRejection>,
}

/// One measurement's batch in [`Ingestor::write_arrow_tables`].
#[derive(Debug, Clone, Copy)]
pub struct ArrowTable<'a> {
    /// The measurement the rows belong to.
    pub measurement: &'a str,
    /// The rows: `time`, the tag columns, fields in the rest.
    pub batch: &'a RecordBatch,
    /// The names of the batch's tag columns.
    pub tag_columns: &'a [&'a str],
}

/// A parsed line-protocol write whose rows are built but not yet handed to
/// the batchers (see [`Ingestor::prepare_lp`]). Dropping it writes nothing.
#[derive(Debug)]
pub struct PreparedWrite {
    database: Arc<Database>,
    rp: String,
    finished: write::lp::Finished,
}

impl PreparedWrite {
    /// What will be stored and what was rejected.
    pub fn outcome(&self) -> &WriteOutcome {
        &self.finished.outcome
    }

    /// Rows built, over all tables.
    pub fn rows(&self) -> usize {
        self.finished
            .chunks
            .iter()
            .map(|(_, chunk)| chunk.num_rows())
            .sum()
    }
}

/// An open ingest engine. Cheap to clone; all clones share one engine.
///
/// Must be opened inside a tokio runtime that outlives it (a multi-threaded
/// one: its flushers are tasks there). Calls may come from any runtime; each
/// engine call runs on the calling runtime's blocking pool.
#[derive(Debug, Clone)]
pub struct Ingestor {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    config: IngestConfig,
    engine: Engine,
    catalog: Catalog,
    /// Request bodies and built rows until they are inserted.
    budget: Arc<MemoryBudget>,
    /// The write-ahead log's writer.
    appender: Appender,
    /// The runtime `open` ran on: flushers live there, whichever runtime
    /// later writes come from.
    runtime: tokio::runtime::Handle,
    flushers: Mutex<Vec<JoinHandle<()>>>,
    /// Advances the log's checkpoint.
    checkpointer: Mutex<Option<JoinHandle<()>>>,
    /// The newest value of each field of each series, per table.
    last_values: Arc<LastValues>,
    closed: AtomicBool,
}

fn now_ns() -> i64 {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since_epoch.as_nanos()).unwrap_or(i64::MAX)
}

impl Ingestor {
    /// Opens the engine on `config.data_dir` (created if missing), reads
    /// back the databases, tables and series stored there, and replays the
    /// write-ahead log: rows acknowledged before a crash but not yet in the
    /// engine are inserted before this returns.
    pub async fn open(config: IngestConfig) -> Result<Ingestor> {
        config.validate()?;
        let runtime = tokio::runtime::Handle::current();
        durable::create_dir_all(&config.data_dir).map_err(|source| Error::Io {
            context: format!("creating data directory {}", config.data_dir.display()),
            source,
        })?;
        let data_dir = config.data_dir.canonicalize().map_err(|source| Error::Io {
            context: format!("resolving data directory {}", config.data_dir.display()),
            source,
        })?;
        let engine = Engine::open(&data_dir, config.connections, &config.query).await?;
        let catalog = Catalog::load(&engine, config.cardinality).await?;
        catalog
            .repair(&engine, config.view_retention_policy.as_deref())
            .await?;
        let wal_dir = config
            .wal
            .dir
            .clone()
            .unwrap_or_else(|| data_dir.join("wal"));
        let segment_bytes = config.wal.segment_bytes;
        let (files, opened, scan) = tokio::task::spawn_blocking(move || {
            let mut scan = write::replay::Scan::default();
            wal::LogFiles::open(&wal_dir, segment_bytes, |lsn, record| {
                scan.visit(lsn, record)
            })
            .map(|(files, opened)| (files, opened, scan))
        })
        .await
        .map_err(|e| Error::Engine(format!("opening the log failed: {e}")))??;
        for cut in &opened.cuts {
            tracing::warn!(segment = %cut.path.display(), offset = cut.offset, dropped_bytes = cut.dropped,
                reason = %cut.reason, "cut the log's torn tail (a write that was never acknowledged)");
            IngestStats::add(&engine.stats.wal_cut_bytes, cut.dropped);
        }
        let (last_values, rebuilds) =
            LastValues::new(config.last_values.clone(), Arc::clone(&engine.stats));
        let last_values = Arc::new(last_values);
        let appender = Appender::start(files, Arc::clone(&engine.stats), Arc::clone(&last_values))?;
        let shared = Arc::new(Shared {
            budget: Arc::new(MemoryBudget::new(
                config.max_buffered_bytes,
                config.overload_wait,
            )),
            config: IngestConfig { data_dir, ..config },
            engine,
            catalog,
            appender,
            runtime,
            flushers: Mutex::default(),
            checkpointer: Mutex::default(),
            last_values,
            closed: AtomicBool::new(false),
        });
        for db in shared.catalog.databases() {
            for (_, table) in db.tables() {
                shared.spawn_flusher(&db, table);
            }
        }
        let ingestor = Ingestor { shared };
        let broken = ingestor.shared.broken_tables().await?;
        if let Err(err) = write::replay::run(&ingestor.shared, &opened, scan, &broken).await {
            let _ = ingestor.close().await;
            return Err(err);
        }
        // Rebuilt in the background: until then its tables answer `None`.
        let shared = &ingestor.shared;
        let tables = shared
            .catalog
            .databases()
            .into_iter()
            .flat_map(|db| db.tables());
        shared.last_values.activate(tables.map(|(_, table)| table));
        shared
            .runtime
            .spawn(last_value::run_rebuilds(Arc::downgrade(shared), rebuilds));
        let checkpointer = ingestor
            .shared
            .runtime
            .spawn(run_checkpointer(Arc::downgrade(&ingestor.shared)));
        *ingestor.shared.checkpointer.lock().unwrap() = Some(checkpointer);
        tracing::info!(data_dir = %ingestor.shared.config.data_dir.display(), "engine open");
        Ok(ingestor)
    }

    /// What this ingestor has done so far: lines, flushes, series, errors.
    pub fn stats(&self) -> &IngestStats {
        &self.shared.engine.stats
    }

    /// Bytes held in the memory budget: rows waiting to be inserted, and
    /// reservations such as request bodies being read.
    pub fn buffered_bytes(&self) -> usize {
        self.shared.budget.used()
    }

    /// Reserves `bytes` of the memory budget for data the caller holds on
    /// its way in — a request body while it is read and parsed — so that
    /// many large requests at once are refused with [`Error::Overloaded`]
    /// instead of growing the process. Released when dropped.
    pub async fn reserve_memory(&self, bytes: usize) -> Result<MemoryReservation> {
        MemoryReservation::new(Arc::clone(&self.shared.open()?.budget), bytes).await
    }

    /// The configuration in force (with the data directory resolved).
    pub fn config(&self) -> &IngestConfig {
        &self.shared.config
    }

    /// Writes a line-protocol body into `db` / `rp`. Good lines are stored
    /// even when others are rejected; the outcome lists both.
    ///
    /// Fails as a whole only when nothing can be written — a bad database
    /// or retention policy name, an overload, a full or failing log, a
    /// closed ingestor — and then nothing of the request is stored. (The
    /// one exception is [`Error::NotVisible`]: logged, not yet queryable.)
    ///
    /// The same as [`prepare_lp`](Self::prepare_lp) followed by
    /// [`commit`](Self::commit).
    pub async fn write_lp(
        &self,
        db: &str,
        rp: &str,
        body: &[u8],
        options: &WriteOptions,
    ) -> Result<WriteOutcome> {
        let prepared = self.prepare_lp(db, rp, body, options).await?;
        self.commit(prepared, options.durability).await
    }

    /// The first half of a write: parses `body`, creates the tables and
    /// columns it needs, and builds its rows into Arrow chunks, without
    /// handing them to the batchers yet. Parsing and building run on the
    /// calling task (CPU work); only DDL waits on the engine.
    pub async fn prepare_lp(
        &self,
        db: &str,
        rp: &str,
        body: &[u8],
        options: &WriteOptions,
    ) -> Result<PreparedWrite> {
        let shared = self.shared.open()?;
        let span = tracing::debug_span!(
            "prepare_lp",
            db,
            rp,
            bytes = body.len(),
            lines = tracing::field::Empty
        );
        async move {
            names::validate(NameKind::RetentionPolicy, rp)?;
            let database = shared.database_for_write(db, options).await?;
            let parse_options = lineproto::ParseOptions {
                precision: options.precision,
                default_time: now_ns(),
                max_line_len: options.max_line_len,
            };
            let limits = shared.line_limits(options);
            let mut batch = write::lp::parse_pieces(&database, rp, body, parse_options, limits);
            if batch.has_deferred() {
                shared.create_needed(&database, rp, &mut batch).await?;
                batch.parse_deferred(body, parse_options);
            }
            let finished = batch.finish();
            tracing::Span::current().record("lines", finished.outcome.accepted);
            Ok(PreparedWrite {
                database,
                rp: rp.to_owned(),
                finished,
            })
        }
        .instrument(span)
        .await
    }

    /// Writes typed points into `db` / `rp`: each point is what one line of
    /// line protocol says, taken by the same rules (limits, schema on
    /// write, type conflicts, partial writes) without being written out as
    /// text or parsed. A rejection's `line` is the point's 1-based position.
    /// Fails as a whole only as [`write_lp`](Self::write_lp) does.
    pub async fn write_points(
        &self,
        db: &str,
        rp: &str,
        points: &[Point<'_>],
        options: &WriteOptions,
    ) -> Result<WriteOutcome> {
        let prepared = self.prepare_points(db, rp, points, options).await?;
        self.commit(prepared, options.durability).await
    }

    /// The first half of [`write_points`](Self::write_points), as
    /// [`prepare_lp`](Self::prepare_lp) is of [`write_lp`](Self::write_lp).
    pub async fn prepare_points(
        &self,
        db: &str,
        rp: &str,
        points: &[Point<'_>],
        options: &WriteOptions,
    ) -> Result<PreparedWrite> {
        let shared = self.shared.open()?;
        let span = tracing::debug_span!("prepare_points", db, rp, points = points.len());
        async move {
            names::validate(NameKind::RetentionPolicy, rp)?;
            let database = shared.database_for_write(db, options).await?;
            let lines = write::points::PointLines::new(points, options.precision, now_ns());
            let mut batch =
                write::lp::LineBatch::new(Arc::clone(&database), rp, shared.line_limits(options));
            batch.add_points(&lines);
            if batch.has_deferred() {
                shared.create_needed(&database, rp, &mut batch).await?;
                batch.add_deferred_points(&lines);
            }
            Ok(PreparedWrite {
                database,
                rp: rp.to_owned(),
                finished: batch.finish(),
            })
        }
        .instrument(span)
        .await
    }

    /// The second half of a write: logs the rows and returns when
    /// `durability` is met.
    pub async fn commit(
        &self,
        prepared: PreparedWrite,
        durability: Durability,
    ) -> Result<WriteOutcome> {
        let shared = self.shared.open()?;
        let PreparedWrite {
            database,
            rp,
            finished,
        } = prepared;
        let refused_by_limits = finished.refused_by_limits as u64;
        let write = NewRows {
            chunks: finished.chunks,
            series: finished.series,
            raw_keys: finished.raw_keys,
            admission: finished.admission,
        };
        shared.log_write(database, rp, write, durability).await?;
        let stats = &shared.engine.stats;
        IngestStats::add(&stats.lines_refused_by_limits, refused_by_limits);
        IngestStats::add(&stats.lines_accepted, finished.outcome.accepted as u64);
        IngestStats::add(
            &stats.lines_rejected,
            finished.outcome.rejected.len() as u64,
        );
        Ok(finished.outcome)
    }

    /// Writes an Arrow batch for one measurement: a `time` column (a
    /// timestamp of any unit, or Int64 nanoseconds), the tag columns named in
    /// `tag_columns` (strings; NULL or empty means the row lacks the tag), and
    /// fields in every other column (floats, signed and unsigned integers,
    /// strings, booleans, lists of numbers). The batch is taken whole or
    /// refused with the offending column. Returns the rows written.
    pub async fn write_arrow(
        &self,
        db: &str,
        rp: &str,
        measurement: &str,
        batch: &RecordBatch,
        tag_columns: &[&str],
        options: &WriteOptions,
    ) -> Result<usize> {
        let table = ArrowTable {
            measurement,
            batch,
            tag_columns,
        };
        self.write_arrow_tables(db, rp, &[table], options).await
    }

    /// Writes Arrow batches for several measurements as one write: one
    /// record in the log, so either every batch is written or none is (a
    /// protocol whose request spans measurements, e.g. samples and their
    /// metadata, is stored whole or not at all). Each batch follows
    /// [`write_arrow`](Self::write_arrow)'s rules; a measurement may appear
    /// once. Returns the rows written.
    pub async fn write_arrow_tables(
        &self,
        db: &str,
        rp: &str,
        tables: &[ArrowTable<'_>],
        options: &WriteOptions,
    ) -> Result<usize> {
        let shared = self.shared.open()?;
        let rows: usize = tables.iter().map(|t| t.batch.num_rows()).sum();
        let span = tracing::debug_span!("write_arrow", db, rp, tables = tables.len(), rows);
        async move {
            names::validate(NameKind::RetentionPolicy, rp)?;
            let mut inputs = Vec::with_capacity(tables.len());
            for (i, table) in tables.iter().enumerate() {
                names::validate(NameKind::Measurement, table.measurement)?;
                if tables[..i]
                    .iter()
                    .any(|t| t.measurement == table.measurement)
                {
                    return Err(Error::InvalidBatch {
                        column: "*".into(),
                        reason: format!("measurement {:?} given twice", table.measurement),
                    });
                }
                inputs.push(write::arrow_input::ArrowInput::new(
                    table.batch,
                    table.tag_columns,
                )?);
            }
            if rows == 0 {
                return Ok(0);
            }
            let database = shared.database_for_write(db, options).await?;
            let mut write = NewRows {
                chunks: Vec::with_capacity(tables.len()),
                series: Vec::new(),
                raw_keys: Vec::new(),
                admission: Admission::default(),
            };
            for (table, input) in tables.iter().zip(inputs) {
                if table.batch.num_rows() == 0 {
                    continue;
                }
                let stored = shared
                    .ensure_table(&database, rp, table.measurement, &input.field_types())
                    .await?;
                let (chunk, series) =
                    input.into_chunk(&stored.schema(), table.measurement, &database)?;
                let series = write
                    .admission
                    .admit_all(&database, series, shared.config.cardinality)
                    .map_err(|reason| {
                        IngestStats::add(&shared.engine.stats.lines_refused_by_limits, rows as u64);
                        Error::InvalidBatch {
                            column: table.tag_columns.join(","),
                            reason,
                        }
                    })?;
                write.series.extend(series);
                write.chunks.push((stored, chunk));
            }
            shared
                .log_write(database, rp.to_owned(), write, options.durability)
                .await?;
            Ok(rows)
        }
        .instrument(span)
        .await
    }

    /// Inserts every row written so far into the engine and waits until
    /// they are committed.
    pub async fn flush(&self) -> Result<()> {
        self.shared.open()?.flush_all().await
    }

    /// Runs a read query and returns its output in the named ClickHouse
    /// output format (`"JSON"`, `"CSV"`, `"Parquet"`, `"ArrowStream"`, …).
    pub async fn query(&self, sql: &str, format: &str) -> Result<Vec<u8>> {
        let format = engine::output_format(format)?;
        self.shared
            .open()?
            .engine
            .query(sql.to_owned(), format)
            .await
    }

    /// Runs one read-only statement, for SQL from untrusted callers: writes,
    /// DDL, settings changes, several statements, `INTO OUTFILE` and table
    /// functions that reach outside the engine (`file`, `url`, `remote`, …)
    /// are refused ([`Error::NotReadOnly`], or the engine's own error).
    pub async fn query_read_only(&self, sql: &str, format: &str) -> Result<Vec<u8>> {
        let mut chunks = self
            .query_read_only_stream(sql, format, &ReadScope::All, None)
            .await?;
        let mut output = Vec::new();
        while let Some(chunk) = chunks.next().await {
            output.extend(chunk?);
        }
        Ok(output)
    }

    /// [`query_read_only`](Self::query_read_only), streamed: the output
    /// arrives chunk by chunk as the engine produces it, so a large result
    /// is never held whole. Dropping the chunks cancels the query. `scope`:
    /// the databases the caller may read; `database`: the one unqualified
    /// table names are in (else `default`), as ClickHouse's current
    /// database.
    ///
    /// The statement may read the last-value cache as a table:
    /// `last_values('db', 'measurement'[, 'rp'])` with string literals has
    /// the columns `series_id`, `time` (the newest of its fields' times),
    /// one per tag and one per field (NULL where the series has no value),
    /// like the measurement's view; a measurement the cache does not hold
    /// is [`Error::NotCached`].
    pub async fn query_read_only_stream(
        &self,
        sql: &str,
        format: &str,
        scope: &ReadScope,
        database: Option<&str>,
    ) -> Result<QueryChunks> {
        let format = engine::output_format(format)?;
        let shared = self.shared.open()?;
        let cached = Arc::clone(shared);
        let snapshot = move |call: &sandbox::LastValuesCall| {
            let not_cached = || Error::NotCached {
                database: call.database.clone(),
                retention_policy: call.retention_policy.clone(),
                measurement: call.measurement.clone(),
            };
            let database = cached
                .catalog
                .database(&call.database)
                .ok_or_else(not_cached)?;
            let table = database
                .table(&call.retention_policy, &call.measurement)
                .ok_or_else(not_cached)?;
            table.last.snapshot().ok_or_else(not_cached)
        };
        shared
            .engine
            .stream_read_only(
                sql.to_owned(),
                format,
                scope.clone(),
                database.map(str::to_owned),
                snapshot,
            )
            .await
    }

    /// Creates a database (and its series table) if it does not exist.
    pub async fn create_database(&self, name: &str) -> Result<()> {
        let shared = self.shared.open()?;
        shared.catalog.ensure_database(&shared.engine, name).await?;
        Ok(())
    }

    /// The databases written to or created, sorted.
    pub fn databases(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .shared
            .catalog
            .databases()
            .iter()
            .map(|db| db.name.clone())
            .collect();
        names.sort();
        names
    }

    /// The retention policies of `db`, sorted by name: those created with
    /// [`create_retention_policy`](Self::create_retention_policy) with their
    /// durations, and those only written to (kept forever, `None`).
    pub fn retention_policies(&self, db: &str) -> Vec<(String, Option<Duration>)> {
        let Some(database) = self.shared.catalog.database(db) else {
            return Vec::new();
        };
        database
            .retention_policies()
            .into_iter()
            .map(|(name, seconds)| (name, (seconds > 0).then(|| Duration::from_secs(seconds))))
            .collect()
    }

    /// Creates or changes a retention policy of an existing database: rows
    /// of its tables are deleted by the engine once older than `duration`
    /// (a MergeTree TTL, applied as parts merge); `None` keeps them forever.
    pub async fn create_retention_policy(
        &self,
        db: &str,
        name: &str,
        duration: Option<Duration>,
    ) -> Result<()> {
        let shared = self.shared.open()?;
        names::validate(NameKind::RetentionPolicy, name)?;
        let database = shared
            .catalog
            .database(db)
            .ok_or_else(|| Error::DatabaseNotFound(db.to_owned()))?;
        let seconds = duration.map_or(0, |d| d.as_secs().max(1));
        database
            .set_retention_policy(&shared.engine, name, seconds)
            .await
    }

    /// Sets what the tables of `db` (or, with `measurement`, of one
    /// measurement) keep when a point is written again: see
    /// [`DuplicatePolicy`]. A table keeps the policy it was created with,
    /// so this applies to tables created from now on, and is refused
    /// ([`Error::Conflict`]) while tables it would cover have another.
    pub async fn set_duplicate_policy(
        &self,
        db: &str,
        measurement: Option<&str>,
        policy: DuplicatePolicy,
    ) -> Result<()> {
        let shared = self.shared.open()?;
        if let Some(measurement) = measurement {
            names::validate(NameKind::Measurement, measurement)?;
        }
        let database = shared
            .catalog
            .database(db)
            .ok_or_else(|| Error::DatabaseNotFound(db.to_owned()))?;
        database
            .set_duplicate_policy(
                &shared.engine,
                measurement,
                policy,
                shared.config.duplicate_policy,
            )
            .await
    }

    /// The duplicate policies set for `db`: the database's own (`None`)
    /// and its measurements', sorted. Tables of others take
    /// [`IngestConfig::duplicate_policy`].
    pub fn duplicate_policies(&self, db: &str) -> Vec<(Option<String>, DuplicatePolicy)> {
        self.shared
            .catalog
            .database(db)
            .map(|database| database.duplicate_policies())
            .unwrap_or_default()
    }

    /// The measurements of retention policy `rp` of `db` that have a
    /// table, with their fields (sorted by name) and the tag keys their
    /// series carry (sorted): what InfluxQL's `SHOW FIELD KEYS` and source
    /// resolution need, from memory.
    pub fn measurements(&self, db: &str, rp: &str) -> Vec<MeasurementSchema> {
        let Some(database) = self.shared.catalog.database(db) else {
            return Vec::new();
        };
        let mut measurements: Vec<MeasurementSchema> = database
            .tables()
            .into_iter()
            .filter(|((table_rp, _), _)| table_rp == rp)
            .map(|((_, name), table)| MeasurementSchema::of(&database, name, &table))
            .collect();
        measurements.sort_by(|a, b| a.name.cmp(&b.name));
        measurements
    }

    /// One measurement of [`measurements`](Self::measurements), if it has
    /// a table.
    pub fn measurement(&self, db: &str, rp: &str, name: &str) -> Option<MeasurementSchema> {
        let database = self.shared.catalog.database(db)?;
        let table = database.table(rp, name)?;
        Some(MeasurementSchema::of(&database, name.to_owned(), &table))
    }

    /// Runs a read statement the caller wrote itself from an untrusted
    /// query (every name and literal quoted), on a read-only connection
    /// under the query limits, without the sandbox's parses; its result as
    /// Arrow batches. For translators such as InfluxQL's, never for SQL
    /// text that a caller sent (that is [`query_read_only`](Self::query_read_only)).
    pub async fn query_translated(&self, sql: &str) -> Result<Vec<RecordBatch>> {
        self.shared
            .open()?
            .engine
            .query_read_only_arrow(sql.to_owned())
            .await
    }

    /// The newest value of each field of the series of `measurement` in
    /// `db` / `rp` whose tags `keep` accepts (tags sorted by key), from
    /// memory. `None` if the measurement is not cached — left out by
    /// [`IngestConfig::last_values`], evicted for the memory bound, or not
    /// yet rebuilt after an open or an edit: the caller must ask the engine.
    /// Holds a read lock on the measurement's cache while `keep` runs;
    /// series `keep` refuses are not copied.
    pub fn last_values(
        &self,
        db: &str,
        rp: &str,
        measurement: &str,
        keep: impl FnMut(&[(String, String)]) -> bool,
    ) -> Option<Vec<LastSeries>> {
        let table = self.shared.catalog.database(db)?.table(rp, measurement)?;
        table.last.read(keep)
    }

    /// Runs a query and returns its result as Arrow record batches.
    pub async fn query_arrow(&self, sql: &str) -> Result<Vec<RecordBatch>> {
        self.shared.open()?.engine.query_arrow(sql.to_owned()).await
    }

    /// Inserts everything logged into the engine, advances the log's
    /// checkpoint and closes the engine connections. Writes after this fail
    /// with [`Error::Closed`]; other clones of this ingestor are closed too.
    /// Rows whose insert fails now stay in the log for the next open.
    pub async fn close(&self) -> Result<()> {
        let shared = &self.shared;
        if shared.closed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        if let Some(checkpointer) = shared.checkpointer.lock().unwrap().take() {
            checkpointer.abort();
        }
        // Writes that passed the open check before `closed` was set reach
        // their batchers before these close.
        shared.appender.barrier().await;
        for db in shared.catalog.databases() {
            for (_, table) in db.tables() {
                table.batcher.close();
            }
        }
        let flushers = std::mem::take(&mut *shared.flushers.lock().unwrap());
        for flusher in flushers {
            let _ = flusher.await;
        }
        let checkpointed = shared.appender.checkpoint(shared.checkpoint_lsn()).await;
        let stopping = Arc::clone(shared);
        let _ = tokio::task::spawn_blocking(move || stopping.appender.stop()).await;
        shared.engine.close();
        tracing::info!("engine closed");
        checkpointed
    }
}

/// What a write adds: rows per table, and the series and raw series keys
/// it met that the database did not know.
struct NewRows {
    chunks: Vec<(Arc<Table>, RecordBatch)>,
    series: Vec<(u64, SeriesKey)>,
    raw_keys: Vec<(u128, u64)>,
    admission: Admission,
}

impl Shared {
    /// Creates the tables and columns the deferred lines of `batch` need.
    async fn create_needed(
        self: &Arc<Self>,
        database: &Arc<Database>,
        rp: &str,
        batch: &mut write::lp::LineBatch<'_>,
    ) -> Result<()> {
        for (measurement, fields) in batch.take_schema_needs() {
            self.ensure_table(database, rp, &measurement, &fields)
                .await?;
        }
        Ok(())
    }

    /// The per-line limits of a write with `options`.
    fn line_limits(&self, options: &WriteOptions) -> write::lp::LineLimits {
        write::lp::LineLimits {
            max_tags: options.max_tags_per_line,
            max_fields: options.max_fields_per_line,
            max_name_len: options.max_name_len,
            cardinality: self.config.cardinality,
        }
    }

    /// `self`, unless the ingestor is closed.
    fn open(self: &Arc<Self>) -> Result<&Arc<Self>> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(self)
    }

    /// The database a write goes to, created if the options allow it.
    async fn database_for_write(
        &self,
        name: &str,
        options: &WriteOptions,
    ) -> Result<Arc<Database>> {
        match self.catalog.database(name) {
            Some(db) => Ok(db),
            None if options.create_database => {
                self.catalog.ensure_database(&self.engine, name).await
            }
            None => Err(Error::DatabaseNotFound(name.to_owned())),
        }
    }

    /// Gives the views of `measurements` the tag columns they gained.
    async fn refresh_views(&self, db: &Database, measurements: &[String]) -> Result<()> {
        let Some(view_rp) = self.config.view_retention_policy.as_deref() else {
            return Ok(());
        };
        for measurement in measurements {
            db.refresh_view(&self.engine, view_rp, measurement).await?;
        }
        Ok(())
    }

    /// The table, created or extended to hold `fields` first if needed.
    async fn ensure_table(
        self: &Arc<Self>,
        db: &Arc<Database>,
        rp: &str,
        measurement: &str,
        fields: &[(String, schema::FieldType)],
    ) -> Result<Arc<Table>> {
        if let Some(table) = db.table(rp, measurement) {
            let schema = table.schema();
            if fields.iter().all(|(name, _)| schema.field(name).is_some()) {
                return Ok(table);
            }
        }
        let view_rp = self.config.view_retention_policy.as_deref();
        let (table, created) = db
            .ensure_table(
                &self.engine,
                view_rp,
                self.config.duplicate_policy,
                rp,
                measurement,
                fields,
                self.last_values.caches_new(&db.name, measurement),
            )
            .await?;
        if created {
            self.spawn_flusher(db, Arc::clone(&table));
        }
        Ok(table)
    }

    fn spawn_flusher(self: &Arc<Self>, db: &Arc<Database>, table: Arc<Table>) {
        let task = write::flusher::run(Arc::downgrade(self), Arc::clone(db), table);
        let handle = self.runtime.spawn(task);
        self.flushers.lock().unwrap().push(handle);
    }

    /// Logs a write whole or refuses it whole, and returns when
    /// `durability` is met: memory for every table's rows is reserved
    /// first, so a write never fails after part of it was queued.
    async fn log_write(
        &self,
        db: Arc<Database>,
        rp: String,
        write: NewRows,
        durability: Durability,
    ) -> Result<()> {
        if write.chunks.is_empty() {
            return Ok(());
        }
        let grown = db.series.note_tag_keys(&write.series);
        self.refresh_views(&db, &grown).await?;
        self.wait_for_log_room().await?;
        let mut tables = Vec::new();
        let mut visible = Vec::new();
        for (table, chunks) in group_by_table(write.chunks) {
            let bytes = chunks.iter().map(chunk_bytes).sum();
            let permit = self.budget.reserve(bytes).await?;
            let waiter = (durability == Durability::Visible).then(|| {
                let (sender, receiver) = oneshot::channel();
                visible.push(receiver);
                sender
            });
            tables.push(TablePart {
                measurement: table.id.measurement.clone(),
                table,
                chunks,
                bytes,
                permit,
                visible: waiter,
            });
        }
        let (logged, answer) = oneshot::channel();
        self.appender.write(PendingWrite {
            db,
            rp,
            tables,
            series: write.series,
            raw_keys: write.raw_keys,
            _admission: write.admission,
            sync: durability == Durability::Fsync,
            logged: Some(logged),
        })?;
        if durability == Durability::None {
            return Ok(());
        }
        answer.await.unwrap_or(Err(Error::Closed))?;
        for receiver in visible {
            match receiver.await {
                Ok(Ok(())) => {}
                Ok(Err(message)) => return Err(Error::NotVisible(message)),
                Err(_) => return Err(Error::Closed),
            }
        }
        Ok(())
    }

    /// Waits, up to the overload wait, while the log is over its size
    /// limit (the engine is behind): then [`Error::LogFull`].
    async fn wait_for_log_room(&self) -> Result<()> {
        let limit = self.config.wal.max_bytes;
        let started = Instant::now();
        loop {
            let bytes = self.appender.bytes();
            if bytes <= limit {
                return Ok(());
            }
            if started.elapsed() >= self.config.overload_wait {
                return Err(Error::LogFull {
                    bytes,
                    limit,
                    retry_after: Duration::from_secs(1),
                });
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The tables in which the engine found broken parts when it opened
    /// (new since the last open): each is logged as an error and reported
    /// by [`IngestStats::problems`]; replay inserts their committed ranges
    /// still in the log again.
    async fn broken_tables(&self) -> Result<HashSet<wal::TableRef>> {
        let disk = Arc::clone(&self.engine.disk);
        let broken = self
            .engine
            .run(move |conn| disk.new_broken_parts(conn))
            .await?;
        let mut tables = HashSet::new();
        for (quoted, part) in &broken {
            tracing::error!(part = %part, "the engine found a broken part and set it aside; \
                rows the write-ahead log still holds for its table are inserted again");
            for db in self.catalog.databases() {
                for (_, table) in db.tables() {
                    if &table.schema().names.storage_table == quoted {
                        tables.insert(table.id.clone());
                    }
                }
            }
        }
        IngestStats::add(&self.engine.stats.engine_broken_parts, broken.len() as u64);
        self.engine
            .stats
            .broken_parts
            .lock()
            .unwrap()
            .extend(broken.into_iter().map(|(_, part)| part));
        Ok(tables)
    }

    /// The lsn the checkpoint may advance to: every record up to it is
    /// committed, series rows included.
    fn checkpoint_lsn(&self) -> wal::Lsn {
        let series = self
            .catalog
            .databases()
            .iter()
            .filter_map(|db| db.series.oldest_pending())
            .min()
            .map_or(wal::Lsn::MAX, |lsn| lsn.saturating_sub(1));
        self.appender.progress.committed().min(series)
    }

    /// Whether [`Ingestor::close`] has begun.
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    async fn flush_all(&self) -> Result<()> {
        self.appender.barrier().await;
        let receivers = self
            .catalog
            .databases()
            .iter()
            .flat_map(|db| db.tables())
            .map(|(_, table)| table.batcher.request_flush())
            .collect();
        await_flushes(receivers).await
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Wakes the flushers so they answer their waiters and end.
        for db in self.catalog.databases() {
            for (_, table) in db.tables() {
                table.batcher.close();
            }
        }
    }
}

/// Advances the log's checkpoint every `wal.checkpoint_interval`, which
/// deletes the segments whose rows are all in the engine.
async fn run_checkpointer(shared: Weak<Shared>) {
    let Some(interval) = shared.upgrade().map(|s| s.config.wal.checkpoint_interval) else {
        return;
    };
    let mut last = 0;
    loop {
        tokio::time::sleep(interval).await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let lsn = shared.checkpoint_lsn();
        if lsn > last {
            match shared.appender.checkpoint(lsn).await {
                Ok(()) => last = lsn,
                Err(err) => tracing::error!(%err, "advancing the log checkpoint failed"),
            }
        }
    }
}

/// Chunks grouped by table. A table may have several chunks (one per parsed
/// piece): they must reach its batcher together, or a flush could carry some
/// of them and leave the rest for the next.
fn group_by_table(chunks: Vec<(Arc<Table>, RecordBatch)>) -> Vec<(Arc<Table>, Vec<RecordBatch>)> {
    let mut tables: Vec<(Arc<Table>, Vec<RecordBatch>)> = Vec::new();
    let mut index: HashMap<*const Table, usize> = HashMap::new();
    for (table, chunk) in chunks {
        let i = *index.entry(Arc::as_ptr(&table)).or_insert_with(|| {
            tables.push((Arc::clone(&table), Vec::new()));
            tables.len() - 1
        });
        tables[i].1.push(chunk);
    }
    tables
}

async fn await_flushes(receivers: Vec<oneshot::Receiver<FlushOutcome>>) -> Result<()> {
    let mut first_error = None;
    for receiver in receivers {
        match receiver.await {
            Ok(Ok(())) => {}
            Ok(Err(message)) => {
                first_error.get_or_insert(Error::Engine(message));
            }
            Err(_) => {
                first_error.get_or_insert(Error::Closed);
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// The bytes a chunk's rows hold: the slices of buffers its columns use.
/// Not the buffers' capacity: columns decoded from one Arrow IPC message
/// all point into that message's buffer, which would be counted once per
/// column (a 200k-row batch as 12 × its whole size).
fn chunk_bytes(chunk: &RecordBatch) -> usize {
    chunk
        .columns()
        .iter()
        .map(|column| {
            column
                .to_data()
                .get_slice_memory_size()
                .unwrap_or_else(|_| column.get_array_memory_size())
        })
        .sum()
}

/// A measurement of one retention policy, as [`Ingestor::measurements`]
/// lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeasurementSchema {
    /// The measurement's name.
    pub name: String,
    /// Its fields and their types, sorted by name.
    pub fields: Vec<(String, schema::FieldType)>,
    /// The tag keys of its series, sorted.
    pub tag_keys: Vec<String>,
}

impl MeasurementSchema {
    fn of(database: &catalog::Database, name: String, table: &catalog::Table) -> MeasurementSchema {
        let mut fields = table.schema().fields.clone();
        fields.sort_by(|a, b| a.0.cmp(&b.0));
        MeasurementSchema {
            tag_keys: database.series.tag_keys(&name),
            name,
            fields,
        }
    }
}

/// The release of the linked engine library, e.g. `"26.7.3"`.
pub fn engine_version() -> &'static str {
    chdb_rust::version::engine_version().unwrap_or("unknown")
}

/// Stops the engine's threads for good, once every [`Ingestor`] is closed
/// and dropped. Only needed by programs that run teardown code of their own
/// after using the engine (exit-time destructors, `atexit` handlers): they
/// would race the engine's threads. No engine can be opened afterwards.
pub fn shutdown_engine() -> Result<()> {
    chdb_rust::runtime::shutdown().map_err(Error::from)
}
