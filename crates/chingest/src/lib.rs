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
//! let csv = ingestor
//!     .query("SELECT count() FROM telegraf.`cpu.autogen`", "CSV")
//!     .await?;
//! assert_eq!(csv, b"1\n");
//! ingestor.close().await?;
//! # Ok(()) }
//! ```
//!
//! # What "committed" means
//!
//! A write with [`WriteOptions::wait`] (the default) returns once its rows
//! are in the engine. Flushes of at least
//! [`BufferPolicy::direct_min_rows`] rows are MergeTree parts on disk and
//! survive a crash. Smaller flushes go to the table's Buffer table, which
//! holds them in memory for up to [`BufferPolicy::max_seconds`]: they are
//! visible to queries at once, written to disk by the Buffer engine or by
//! [`Ingestor::close`], and lost if the process dies before that. Set
//! `direct_min_rows = 0` to make every acknowledged row a part on disk.
//!
//! # One engine per process
//!
//! chDB is process-global: a process opens one data directory, and every
//! [`Ingestor`] in it must use the same one (a second directory is refused
//! until the first is closed).

mod arrow_write;
mod batcher;
mod catalog;
pub mod chunk;
mod config;
mod engine;
mod error;
mod lp;
pub mod names;
pub mod schema;
pub mod series;
pub mod stats;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arrow::record_batch::RecordBatch;
use tokio::sync::{oneshot, Semaphore};
use tokio::task::JoinHandle;
use tracing::Instrument;

pub use arrow;
pub use config::{BufferPolicy, FlushPolicy, IngestConfig};
pub use engine::QueryChunks;
pub use error::{Error, Result};
pub use lineproto::Precision;
pub use stats::IngestStats;

use crate::batcher::{Flush, FlushOutcome};
use crate::catalog::{Catalog, Database, Table};
use crate::engine::Engine;
use crate::names::NameKind;

/// Options of one write call.
#[derive(Debug, Clone, Copy)]
pub struct WriteOptions {
    /// Unit of the timestamps in a line-protocol body.
    pub precision: Precision,
    /// Return only after the rows are committed to the engine (default).
    /// `false` returns once they are buffered: faster, and a crash or a
    /// failed flush then loses them without the caller knowing.
    pub wait: bool,
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
            wait: true,
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

/// A parsed line-protocol write whose rows are built but not yet handed to
/// the batchers (see [`Ingestor::prepare_lp`]). Dropping it writes nothing.
#[derive(Debug)]
pub struct PreparedWrite {
    database: Arc<Database>,
    finished: lp::Finished,
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
    /// Bytes of pending chunks, in KiB permits.
    memory: Arc<Semaphore>,
    memory_kib: usize,
    /// The runtime `open` ran on: flushers live there, whichever runtime
    /// later writes come from.
    runtime: tokio::runtime::Handle,
    flushers: Mutex<Vec<JoinHandle<()>>>,
    closed: AtomicBool,
}

fn now_ns() -> i64 {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since_epoch.as_nanos()).unwrap_or(i64::MAX)
}

impl Ingestor {
    /// Opens the engine on `config.data_dir` (created if missing) and reads
    /// back the databases, tables and series stored there.
    pub async fn open(config: IngestConfig) -> Result<Ingestor> {
        config.validate()?;
        let runtime = tokio::runtime::Handle::current();
        std::fs::create_dir_all(&config.data_dir).map_err(|source| Error::Io {
            context: format!("creating data directory {}", config.data_dir.display()),
            source,
        })?;
        let data_dir = config.data_dir.canonicalize().map_err(|source| Error::Io {
            context: format!("resolving data directory {}", config.data_dir.display()),
            source,
        })?;
        let engine = Engine::open(&data_dir, config.connections).await?;
        let catalog = Catalog::load(&engine).await?;
        let memory_kib = config.max_buffered_bytes.div_ceil(1024);
        let shared = Arc::new(Shared {
            memory: Arc::new(Semaphore::new(memory_kib)),
            memory_kib,
            config: IngestConfig { data_dir, ..config },
            engine,
            catalog,
            runtime,
            flushers: Mutex::default(),
            closed: AtomicBool::new(false),
        });
        for db in shared.catalog.databases() {
            for (_, table) in db.tables() {
                shared.spawn_flusher(&db, table);
            }
        }
        tracing::info!(data_dir = %shared.config.data_dir.display(), "engine open");
        Ok(Ingestor { shared })
    }

    /// What this ingestor has done so far: lines, flushes, series, errors.
    pub fn stats(&self) -> &IngestStats {
        &self.shared.engine.stats
    }

    /// Bytes of rows held by the batchers, waiting to be flushed.
    pub fn buffered_bytes(&self) -> usize {
        self.shared.buffered_bytes()
    }

    /// The configuration in force (with the data directory resolved).
    pub fn config(&self) -> &IngestConfig {
        &self.shared.config
    }

    /// Writes a line-protocol body into `db` / `rp`. Good lines are stored
    /// even when others are rejected; the outcome lists both.
    ///
    /// Fails as a whole only when nothing can be written: a bad database or
    /// retention policy name, an overload, a closed ingestor, or an engine
    /// error while committing (then nothing of the request is acknowledged,
    /// though rows of it may have been stored).
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
        self.commit(prepared, options.wait).await
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
            let limits = lp::LineLimits {
                max_tags: options.max_tags_per_line,
                max_fields: options.max_fields_per_line,
                max_name_len: options.max_name_len,
            };
            let mut batch = lp::parse_pieces(&database, rp, body, parse_options, limits);
            if batch.has_deferred() {
                for (measurement, fields) in batch.take_schema_needs() {
                    shared
                        .ensure_table(&database, rp, &measurement, &fields)
                        .await?;
                }
                batch.parse_deferred(body, parse_options);
            }
            let finished = batch.finish();
            tracing::Span::current().record("lines", finished.outcome.accepted);
            Ok(PreparedWrite { database, finished })
        }
        .instrument(span)
        .await
    }

    /// The second half of a write: records the new series and hands the
    /// chunks to their tables' batchers; with `wait`, returns once they are
    /// committed.
    pub async fn commit(&self, prepared: PreparedWrite, wait: bool) -> Result<WriteOutcome> {
        let shared = self.shared.open()?;
        let PreparedWrite { database, finished } = prepared;
        let stats = &shared.engine.stats;
        IngestStats::add(&stats.lines_accepted, finished.outcome.accepted as u64);
        IngestStats::add(
            &stats.lines_rejected,
            finished.outcome.rejected.len() as u64,
        );
        let grown = database.series.register(finished.series, finished.raw_keys);
        shared.refresh_views(&database, &grown).await?;
        shared.submit(finished.chunks, wait).await?;
        Ok(finished.outcome)
    }

    /// Writes an Arrow batch for one measurement: a `time` column (a
    /// timestamp of any unit, or Int64 nanoseconds), the tag columns named in
    /// `tag_columns` (strings; NULL or empty means the row lacks the tag), and
    /// fields in every other column (floats, signed and unsigned integers,
    /// strings, booleans). The batch is taken whole or refused with the
    /// offending column. Returns the rows written.
    pub async fn write_arrow(
        &self,
        db: &str,
        rp: &str,
        measurement: &str,
        batch: &RecordBatch,
        tag_columns: &[&str],
        options: &WriteOptions,
    ) -> Result<usize> {
        let shared = self.shared.open()?;
        let span =
            tracing::debug_span!("write_arrow", db, rp, measurement, rows = batch.num_rows());
        async move {
            names::validate(NameKind::RetentionPolicy, rp)?;
            names::validate(NameKind::Measurement, measurement)?;
            let input = arrow_write::ArrowInput::new(batch, tag_columns)?;
            if batch.num_rows() == 0 {
                return Ok(0);
            }
            let database = shared.database_for_write(db, options).await?;
            let table = shared
                .ensure_table(&database, rp, measurement, &input.field_types())
                .await?;
            let (chunk, series) = input.into_chunk(&table.schema(), measurement, &database)?;
            let grown = database.series.register(series, Vec::new());
            shared.refresh_views(&database, &grown).await?;
            shared.submit(vec![(table, chunk)], options.wait).await?;
            Ok(batch.num_rows())
        }
        .instrument(span)
        .await
    }

    /// Flushes every table's pending rows and waits until they are committed.
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
        let mut chunks = self.query_read_only_stream(sql, format).await?;
        let mut output = Vec::new();
        while let Some(chunk) = chunks.next().await {
            output.extend(chunk?);
        }
        Ok(output)
    }

    /// [`query_read_only`](Self::query_read_only), streamed: the output
    /// arrives chunk by chunk as the engine produces it, so a large result
    /// is never held whole. Dropping the chunks cancels the query.
    pub async fn query_read_only_stream(&self, sql: &str, format: &str) -> Result<QueryChunks> {
        let format = engine::output_format(format)?;
        self.shared
            .open()?
            .engine
            .stream_read_only(sql.to_owned(), format)
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

    /// Runs a query and returns its result as Arrow record batches.
    pub async fn query_arrow(&self, sql: &str) -> Result<Vec<RecordBatch>> {
        self.shared.open()?.engine.query_arrow(sql.to_owned()).await
    }

    /// Flushes everything, writes the Buffer tables' contents to disk and
    /// closes the engine connections. Writes after this fail with
    /// [`Error::Closed`]; other clones of this ingestor are closed too.
    pub async fn close(&self) -> Result<()> {
        let shared = &self.shared;
        if shared.closed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let tables: Vec<_> = shared
            .catalog
            .databases()
            .iter()
            .flat_map(|db| db.tables())
            .collect();
        for (_, table) in &tables {
            table.batcher.close();
        }
        let flushers = std::mem::take(&mut *shared.flushers.lock().unwrap());
        for flusher in flushers {
            let _ = flusher.await;
        }
        // OPTIMIZE on a Buffer table writes its contents to the MergeTree.
        let buffers: Vec<String> = tables
            .iter()
            .map(|(_, table)| format!("OPTIMIZE TABLE {}", table.schema().names.query_table))
            .collect();
        let flushed = shared.engine.execute_all(buffers).await;
        shared.engine.close();
        tracing::info!("engine closed");
        flushed
    }
}

impl Shared {
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
                &self.config.buffer,
                view_rp,
                rp,
                measurement,
                fields,
            )
            .await?;
        if created {
            self.spawn_flusher(db, Arc::clone(&table));
        }
        Ok(table)
    }

    fn spawn_flusher(self: &Arc<Self>, db: &Arc<Database>, table: Arc<Table>) {
        let task = run_flusher(Arc::downgrade(self), Arc::clone(db), table);
        let handle = self.runtime.spawn(task);
        self.flushers.lock().unwrap().push(handle);
    }

    /// Hands finished chunks to their tables' batchers, within the memory
    /// budget, and waits for their flushes when asked to.
    async fn submit(&self, chunks: Vec<(Arc<Table>, RecordBatch)>, wait: bool) -> Result<()> {
        let tables = group_by_table(chunks);
        let mut receivers = Vec::with_capacity(tables.len());
        for (table, chunks) in tables {
            let bytes = chunks.iter().map(chunk_bytes).sum();
            let permit = self.reserve_memory(bytes).await?;
            receivers.extend(table.batcher.append(chunks, bytes, permit, wait)?);
        }
        await_flushes(receivers).await
    }

    /// Bytes reserved by chunks waiting in the batchers.
    fn buffered_bytes(&self) -> usize {
        (self.memory_kib - self.memory.available_permits()) * 1024
    }

    async fn reserve_memory(&self, bytes: usize) -> Result<tokio::sync::OwnedSemaphorePermit> {
        let kib = bytes.div_ceil(1024).max(1);
        let overloaded = || Error::Overloaded {
            buffered: self.buffered_bytes(),
            limit: self.config.max_buffered_bytes,
            retry_after: Duration::from_secs(1),
        };
        let Ok(kib) = u32::try_from(kib) else {
            return Err(overloaded());
        };
        if kib as usize > self.memory_kib {
            return Err(overloaded());
        }
        let acquire = Arc::clone(&self.memory).acquire_many_owned(kib);
        match tokio::time::timeout(self.config.overload_wait, acquire).await {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_)) => Err(Error::Closed),
            Err(_) => Err(overloaded()),
        }
    }

    async fn flush_all(&self) -> Result<()> {
        let receivers = self
            .catalog
            .databases()
            .iter()
            .flat_map(|db| db.tables())
            .map(|(_, table)| table.batcher.request_flush())
            .collect();
        await_flushes(receivers).await
    }

    /// Commits the database's pending series, then inserts one flush of a
    /// table: into its Buffer table when small, its MergeTree when large.
    async fn flush(
        &self,
        db: &Arc<Database>,
        table: &Table,
        flush: Vec<RecordBatch>,
        rows: usize,
    ) -> Result<()> {
        let schema = table.schema();
        let direct = rows >= self.config.buffer.direct_min_rows;
        let target = if direct {
            schema.names.storage_table.clone()
        } else {
            schema.names.query_table.clone()
        };
        let span = tracing::debug_span!("flush", table = %schema.names.query_table, rows, direct);
        let db = Arc::clone(db);
        let started = std::time::Instant::now();
        let stats = Arc::clone(&self.engine.stats);
        let flushed = self
            .engine
            .run(move |conn| {
                let series = db.series.commit(conn, &db.series_table)?;
                IngestStats::add(&stats.series_created, series as u64);
                if flush.is_empty() {
                    return Ok(());
                }
                let batch = chunk::merge(&schema, flush);
                engine::insert_batch(conn, &target, batch)?;
                Ok(())
            })
            .instrument(span.clone())
            .await;
        let stats = &self.engine.stats;
        if flushed.is_err() {
            IngestStats::add(&stats.flush_errors, 1);
            return flushed;
        }
        let elapsed = started.elapsed();
        if rows > 0 {
            IngestStats::add(&stats.flushes, 1);
            IngestStats::add(&stats.buffered_flushes, u64::from(!direct));
            stats.flush_rows.observe(rows as f64);
            stats.flush_seconds.observe(elapsed.as_secs_f64());
        }
        span.in_scope(|| tracing::debug!(elapsed_ms = elapsed.as_secs_f64() * 1e3, "flushed"));
        Ok(())
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

/// One table's flusher: takes each due flush and reports its outcome to the
/// writers waiting on it, until the batcher closes. Holds the ingestor only
/// while flushing, so dropping every [`Ingestor`] ends it.
async fn run_flusher(shared: Weak<Shared>, db: Arc<Database>, table: Arc<Table>) {
    let Some(policy) = shared.upgrade().map(|s| s.config.flush.clone()) else {
        return;
    };
    // A slot is taken before the next flush is: while every slot is busy,
    // rows keep gathering into the flush after.
    let slots = Arc::new(Semaphore::new(policy.concurrency.max(1)));
    let mut running = tokio::task::JoinSet::new();
    loop {
        let slot = Arc::clone(&slots)
            .acquire_owned()
            .await
            .expect("never closed");
        let Some(Flush {
            chunks,
            rows,
            permits,
            waiters,
        }) = table.batcher.next_flush(&policy).await
        else {
            break;
        };
        let (shared, db, table) = (shared.clone(), Arc::clone(&db), Arc::clone(&table));
        running.spawn(async move {
            let outcome: FlushOutcome = match shared.upgrade() {
                Some(shared) => shared
                    .flush(&db, &table, chunks, rows)
                    .await
                    .map_err(|err| {
                        tracing::error!(db = %db.name, %err, "flush failed");
                        err.to_string()
                    }),
                None => Err("the ingestor was dropped before these rows were written".to_owned()),
            };
            drop(permits);
            drop(slot);
            for waiter in waiters {
                let _ = waiter.send(outcome.clone());
            }
        });
        while running.try_join_next().is_some() {}
    }
    while running.join_next().await.is_some() {}
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
