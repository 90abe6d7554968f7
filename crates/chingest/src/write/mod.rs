//! The write path, as stages. A write is prepared on the caller's task
//! (line protocol [`lp`], typed [`points`], Arrow [`arrow_input`]: rows
//! built into Arrow chunks by [`chunk`], tables and columns created first),
//! reserves memory in the [`budget`], and is logged by the [`appender`],
//! which hands its rows to each table's [`batcher`]; the table's
//! [`flusher`] inserts them exactly once through the [`sink`] (the
//! embedded engine). [`replay`] runs
//! the same rules on open. [`Writer`] owns the stages and is what the
//! [`Ingestor`](crate::Ingestor) writes through.

pub(crate) mod appender;
pub(crate) mod arrow_input;
pub(crate) mod batcher;
pub(crate) mod budget;
pub mod chunk;
pub(crate) mod flusher;
pub(crate) mod lp;
pub(crate) mod points;
pub(crate) mod replay;
pub(crate) mod request;
pub(crate) mod sink;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use arrow::record_batch::RecordBatch;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::catalog::{Admission, Catalog, Database, Table};
use crate::clock::now_ns;
use crate::config::{CardinalityLimits, IngestConfig};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::last_value::LastValues;
use crate::layout::names::{self, NameKind};
use crate::layout::series::SeriesKey;
use crate::stats::IngestStats;
use crate::wal::{self, TableRef};
use crate::write::appender::{earliest_time, PendingWrite, WriteNotifier};
use crate::write::batcher::{Batcher, TablePart};
use crate::write::budget::{MemoryBudget, MemoryReservation};
use crate::write::flusher::FlushContext;
use crate::write::lp::NewRows;
use crate::write::points::{Point, PointLines};
use crate::write::request::{ArrowTable, Durability, Tags, WriteOptions, WriteOutcome};

/// The write half of an open ingestor: the log, the memory budget, and a
/// batcher and a flusher per table.
#[derive(Debug)]
pub(crate) struct Writer {
    config: Arc<IngestConfig>,
    pub(crate) catalog: Arc<Catalog>,
    pub(crate) last_values: Arc<LastValues>,
    /// Request bodies and built rows until they are inserted.
    pub(crate) budget: Arc<MemoryBudget>,
    /// Writes being parsed and built at once, one per core: more wait with
    /// their bodies counted in the budget, so that the rows being built,
    /// which the budget counts only once built, are a few requests' worth.
    builders: tokio::sync::Semaphore,
    /// The engine, the log and the flush policy, shared with the flushers.
    flush: Arc<FlushContext>,
    /// Each table's pending rows, from its first write; its flusher starts
    /// with it.
    batchers: RwLock<HashMap<TableRef, Arc<Batcher>>>,
    /// The runtime `open` ran on: flushers live there, whichever runtime
    /// later writes come from.
    runtime: tokio::runtime::Handle,
    flushers: Mutex<Vec<JoinHandle<()>>>,
    /// Advances the log's checkpoint.
    checkpointer: Mutex<Option<JoinHandle<()>>>,
}

/// A parsed line-protocol write whose rows are built but not yet handed to
/// the batchers (see [`Ingestor::prepare_lp`](crate::Ingestor::prepare_lp)).
/// Dropping it writes nothing.
#[derive(Debug)]
pub struct PreparedWrite {
    pub(crate) database: Arc<Database>,
    pub(crate) rp: String,
    pub(crate) finished: lp::Finished,
    /// Memory the caller handed over for the rows (see [`hold`](Self::hold)).
    pub(crate) held: Option<MemoryReservation>,
}

impl PreparedWrite {
    /// What will be stored and what was rejected.
    pub fn outcome(&self) -> &WriteOutcome {
        &self.finished.outcome
    }

    /// Hands over memory the caller reserved — the request body's, once
    /// the body is no longer needed — for the rows to reserve first, so
    /// that the commit does not wait for room the request already has,
    /// holding rows the budget does not count. What the rows do not need
    /// is released when they are logged.
    pub fn hold(&mut self, reservation: MemoryReservation) {
        match &mut self.held {
            Some(held) => held.absorb(reservation),
            None => self.held = Some(reservation),
        }
    }

    /// Rows built, over all tables.
    pub fn rows(&self) -> usize {
        self.finished
            .rows
            .chunks
            .iter()
            .map(|(_, chunk)| chunk.num_rows())
            .sum()
    }
}

/// Where logged rows go: each table's rows to the last-value cache, then
/// to the table's batcher.
#[derive(Debug)]
pub(crate) struct Handoff {
    last_values: Arc<LastValues>,
}

impl Handoff {
    pub(crate) fn new(last_values: Arc<LastValues>) -> Handoff {
        Handoff { last_values }
    }
}

impl WriteNotifier for Handoff {
    fn registering(&self, tables: &[TablePart], series: &[(u64, SeriesKey)]) {
        let tables = tables.iter().map(|part| &*part.table);
        self.last_values.note_series(tables, series);
    }

    fn logged(&self, lsn: wal::Lsn, tables: Vec<TablePart>) {
        for part in tables {
            self.last_values.apply(&part.table, &part.chunks);
            Arc::clone(&part.batcher).append(lsn, part);
        }
    }
}

impl Writer {
    /// The writer over `flush`'s engine and log; flushers run on
    /// `runtime`. Nothing runs until the first write or
    /// [`start_checkpointer`](Self::start_checkpointer).
    pub(crate) fn new(
        config: Arc<IngestConfig>,
        catalog: Arc<Catalog>,
        last_values: Arc<LastValues>,
        flush: FlushContext,
        runtime: tokio::runtime::Handle,
    ) -> Writer {
        Writer {
            budget: Arc::new(MemoryBudget::new(
                config.max_buffered_bytes,
                config.overload_wait,
            )),
            builders: tokio::sync::Semaphore::new(
                std::thread::available_parallelism().map_or(1, |n| n.get()),
            ),
            config,
            catalog,
            last_values,
            flush: Arc::new(flush),
            batchers: RwLock::default(),
            runtime,
            flushers: Mutex::default(),
            checkpointer: Mutex::default(),
        }
    }

    /// The engine writes go to.
    pub(crate) fn engine(&self) -> &Engine {
        &self.flush.engine
    }

    /// What replay needs: the engine, the log, the flush policy.
    pub(crate) fn flush_context(&self) -> &FlushContext {
        &self.flush
    }

    /// `self`, unless the ingestor is closing.
    pub(crate) fn open(&self) -> Result<&Self> {
        if self.flush.is_closed() {
            return Err(Error::Closed);
        }
        Ok(self)
    }

    /// Starts advancing the log's checkpoint every
    /// `wal.checkpoint_interval`.
    pub(crate) fn start_checkpointer(self: &Arc<Self>) {
        let task = self.runtime.spawn(run_checkpointer(Arc::downgrade(self)));
        *self.checkpointer.lock().unwrap() = Some(task);
    }

    /// A slot to build rows in (see `builders`).
    async fn builder(&self) -> Result<tokio::sync::SemaphorePermit<'_>> {
        self.builders.acquire().await.map_err(|_| Error::Closed)
    }

    /// The first half of a line-protocol write: parses `body`, creates the
    /// tables and columns it needs, and builds its rows.
    pub(crate) async fn prepare_lp(
        &self,
        db: &str,
        rp: &str,
        body: &[u8],
        options: &WriteOptions,
    ) -> Result<PreparedWrite> {
        let span = tracing::debug_span!(
            "prepare_lp",
            db,
            rp,
            bytes = body.len(),
            lines = tracing::field::Empty
        );
        async move {
            names::validate(NameKind::RetentionPolicy, rp)?;
            let database = self.database_for_write(db, options).await?;
            let parse_options = lineproto::ParseOptions {
                precision: options.precision,
                default_time: now_ns(),
                max_line_len: options.max_line_len,
            };
            let limits = self.line_limits(options);
            let builder = self.builder().await?;
            let mut batch = lp::parse_pieces(&database, rp, body, parse_options, limits);
            if batch.has_deferred() {
                drop(builder);
                self.create_needed(&database, rp, &mut batch).await?;
                let _builder = self.builder().await?;
                batch.parse_deferred(body, parse_options);
            }
            let finished = batch.finish();
            tracing::Span::current().record("lines", finished.outcome.accepted);
            Ok(PreparedWrite {
                database,
                rp: rp.to_owned(),
                finished,
                held: None,
            })
        }
        .instrument(span)
        .await
    }

    /// The first half of a write of typed points.
    pub(crate) async fn prepare_points(
        &self,
        db: &str,
        rp: &str,
        points: &[Point<'_>],
        options: &WriteOptions,
    ) -> Result<PreparedWrite> {
        let span = tracing::debug_span!("prepare_points", db, rp, points = points.len());
        async move {
            names::validate(NameKind::RetentionPolicy, rp)?;
            let database = self.database_for_write(db, options).await?;
            let lines = PointLines::new(points, options.precision, now_ns());
            let mut batch =
                lp::LineBatch::new(Arc::clone(&database), rp, self.line_limits(options));
            let builder = self.builder().await?;
            batch.add_points(&lines);
            if batch.has_deferred() {
                drop(builder);
                self.create_needed(&database, rp, &mut batch).await?;
                let _builder = self.builder().await?;
                batch.add_deferred_points(&lines);
            }
            Ok(PreparedWrite {
                database,
                rp: rp.to_owned(),
                finished: batch.finish(),
                held: None,
            })
        }
        .instrument(span)
        .await
    }

    /// The second half of a write: logs the rows and returns when
    /// `durability` is met.
    pub(crate) async fn commit(
        &self,
        prepared: PreparedWrite,
        durability: Durability,
    ) -> Result<WriteOutcome> {
        let PreparedWrite {
            database,
            rp,
            finished,
            held,
        } = prepared;
        let refused_by_limits = finished.refused_by_limits as u64;
        self.log_write(database, rp, finished.rows, held, durability)
            .await?;
        let stats = &self.engine().stats;
        IngestStats::add(&stats.lines_refused_by_limits, refused_by_limits);
        IngestStats::add(&stats.lines_accepted, finished.outcome.accepted as u64);
        IngestStats::add(
            &stats.lines_rejected,
            finished.outcome.rejected.len() as u64,
        );
        Ok(finished.outcome)
    }

    /// Writes Arrow batches for several measurements as one log record;
    /// returns the rows written.
    pub(crate) async fn write_arrow_tables(
        &self,
        db: &str,
        rp: &str,
        tables: &[ArrowTable<'_>],
        options: &WriteOptions,
    ) -> Result<usize> {
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
                inputs.push(arrow_input::ArrowInput::new(table.batch, table.tags)?);
            }
            if rows == 0 {
                return Ok(0);
            }
            let database = self.database_for_write(db, options).await?;
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
                if let Some(policy) = table.duplicates {
                    self.catalog
                        .default_duplicate_policy(
                            self.engine(),
                            &database,
                            table.measurement,
                            policy,
                        )
                        .await?;
                }
                let stored = self
                    .catalog
                    .ensure_table(
                        self.engine(),
                        &database,
                        rp,
                        table.measurement,
                        &input.field_types(),
                    )
                    .await?;
                let (chunk, series) =
                    input.into_chunk(&stored.schema(), table.measurement, &database)?;
                // The values-per-tag limit is line protocol's (InfluxDB's):
                // remote write, OTLP and Arrow producers label series with
                // pods and instances by design, the series limit bounds them.
                let limits = CardinalityLimits {
                    max_values_per_tag: 0,
                    ..self.config.cardinality
                };
                let series = write
                    .admission
                    .admit_all(&database, series, limits)
                    .map_err(|reason| {
                        IngestStats::add(&self.engine().stats.lines_refused_by_limits, rows as u64);
                        let column = match table.tags {
                            Tags::Columns(names) => names.join(","),
                            Tags::Series { .. } => "*".to_owned(),
                        };
                        Error::InvalidBatch { column, reason }
                    })?;
                write.series.extend(series);
                write.chunks.push((stored, chunk));
            }
            self.log_write(database, rp.to_owned(), write, None, options.durability)
                .await?;
            Ok(rows)
        }
        .instrument(span)
        .await
    }

    /// Creates the tables and columns the deferred lines of `batch` need.
    async fn create_needed(
        &self,
        database: &Arc<Database>,
        rp: &str,
        batch: &mut lp::LineBatch<'_>,
    ) -> Result<()> {
        for (measurement, fields) in batch.take_schema_needs() {
            self.catalog
                .ensure_table(self.engine(), database, rp, &measurement, &fields)
                .await?;
        }
        Ok(())
    }

    /// The per-line limits of a write with `options`.
    fn line_limits(&self, options: &WriteOptions) -> lp::LineLimits {
        lp::LineLimits {
            max_tags: options.max_tags_per_line,
            max_fields: options.max_fields_per_line,
            max_name_len: options.max_name_len,
            cardinality: self.config.cardinality,
        }
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
                self.catalog.ensure_database(self.engine(), name).await
            }
            None => Err(Error::DatabaseNotFound(name.to_owned())),
        }
    }

    /// The table's batcher, created with its flusher on the table's first
    /// write.
    fn batcher(&self, db: &Arc<Database>, table: &Arc<Table>) -> Arc<Batcher> {
        if let Some(batcher) = self.batchers.read().unwrap().get(&table.id) {
            return Arc::clone(batcher);
        }
        let mut batchers = self.batchers.write().unwrap();
        let batcher = batchers.entry(table.id.clone()).or_insert_with(|| {
            let batcher = Arc::new(Batcher::default());
            let task = flusher::run(
                Arc::downgrade(&self.flush),
                Arc::clone(db),
                Arc::clone(table),
                Arc::clone(&batcher),
            );
            self.flushers.lock().unwrap().push(self.runtime.spawn(task));
            batcher
        });
        Arc::clone(batcher)
    }

    /// Logs a write whole or refuses it whole, and returns when
    /// `durability` is met: memory for every table's rows is reserved
    /// first (from `held` as far as it goes), so a write never fails after
    /// part of it was queued.
    async fn log_write(
        &self,
        db: Arc<Database>,
        rp: String,
        write: NewRows,
        mut held: Option<MemoryReservation>,
        durability: Durability,
    ) -> Result<()> {
        if write.chunks.is_empty() {
            return Ok(());
        }
        let grown = db.series.note_tag_keys(&write.series);
        self.catalog
            .refresh_views(self.engine(), &db, &grown)
            .await?;
        self.wait_for_log_room().await?;
        let mut tables = Vec::new();
        let mut visible = Vec::new();
        for (table, chunks) in group_by_table(write.chunks) {
            let bytes = chunks.iter().map(chunk_bytes).sum();
            let permit = self.budget.reserve_from(held.as_mut(), bytes).await?;
            let waiter = (durability == Durability::Visible).then(|| {
                let (sender, receiver) = oneshot::channel();
                visible.push(receiver);
                sender
            });
            tables.push(TablePart {
                batcher: self.batcher(&db, &table),
                table,
                chunks,
                bytes,
                permit,
                visible: waiter,
            });
        }
        let (logged, answer) = oneshot::channel();
        let logging = self.flush.logging.read().await;
        let earliest = earliest_time(&tables);
        self.flush.appender.write(PendingWrite {
            db,
            rp,
            earliest,
            tables,
            series: write.series,
            raw_keys: write.raw_keys,
            _admission: write.admission,
            sync: durability == Durability::Fsync,
            logged: Some(logged),
        })?;
        drop(logging);
        if durability == Durability::None {
            return Ok(());
        }
        answer.await.unwrap_or(Err(Error::Closed))?;
        for receiver in visible {
            match receiver.await {
                Ok(Ok(())) => {}
                Ok(Err(err)) => return Err(Error::NotVisible(err)),
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
            let bytes = self.flush.appender.bytes();
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

    /// The earliest row time (ns) of the acknowledged writes not yet all
    /// in the engine (`i64::MAX`: none).
    pub(crate) fn earliest_in_flight(&self) -> i64 {
        self.flush.appender.progress.earliest_in_flight()
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
        self.flush.appender.progress.committed().min(series)
    }

    /// Inserts every row logged so far into the engine and waits until
    /// they are committed.
    pub(crate) async fn flush_all(&self) -> Result<()> {
        self.flush.appender.barrier().await;
        let receivers = self
            .batchers
            .read()
            .unwrap()
            .values()
            .map(|batcher| batcher.request_flush())
            .collect();
        flusher::await_flushes(receivers).await
    }

    /// Inserts everything logged, advances the checkpoint and stops the
    /// log; returns whether the checkpoint advanced (`None` if closed
    /// already). Writes after this fail with [`Error::Closed`].
    pub(crate) async fn close(&self) -> Option<Result<()>> {
        if self.flush.close() {
            return None;
        }
        if let Some(checkpointer) = self.checkpointer.lock().unwrap().take() {
            checkpointer.abort();
        }
        // Writes that passed the open check before closing began reach
        // their batchers before these close.
        self.flush.appender.barrier().await;
        self.close_batchers();
        let flushers = std::mem::take(&mut *self.flushers.lock().unwrap());
        for flusher in flushers {
            let _ = flusher.await;
        }
        let checkpointed = self.flush.appender.checkpoint(self.checkpoint_lsn()).await;
        let flush = Arc::clone(&self.flush);
        let _ = tokio::task::spawn_blocking(move || flush.appender.stop()).await;
        Some(checkpointed)
    }

    fn close_batchers(&self) {
        for batcher in self.batchers.read().unwrap().values() {
            batcher.close();
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // Wakes the flushers so they answer their waiters and end.
        self.close_batchers();
    }
}

/// Advances the log's checkpoint every `wal.checkpoint_interval`, which
/// deletes the segments whose rows are all in the engine.
async fn run_checkpointer(writer: Weak<Writer>) {
    let Some(interval) = writer.upgrade().map(|w| w.config.wal.checkpoint_interval) else {
        return;
    };
    let mut last = 0;
    loop {
        tokio::time::sleep(interval).await;
        let Some(writer) = writer.upgrade() else {
            return;
        };
        let lsn = writer.checkpoint_lsn();
        if lsn > last {
            match writer.flush.appender.checkpoint(lsn).await {
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
