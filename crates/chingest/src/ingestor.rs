//! [`Ingestor`]: an open engine and everything around it. Opening wires
//! the layers together (engine, catalog, replay of the log, last-value
//! cache, writer, reader); every other method hands its call to the layer
//! that owns it.

use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use arrow::record_batch::RecordBatch;
use tokio::task::JoinHandle;

use crate::backup::{self, BackupReport, BackupRequest, Snapshot};
use crate::catalog::learn::{self, Learner, SeriesParts};
use crate::catalog::{Catalog, Table, TableDefaults};
use crate::cluster::Cluster;
use crate::config::{Downsampling, DuplicatePolicy, IngestConfig, LastValueConfig, StorageMode};
use crate::downsample::{self, Downsampler, DownsamplingSetting, RollupView};
use crate::durable;
use crate::edit::{self, FieldValue, PointFilter, RollupEdit};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::last_value::rebuild::{self, BoxFuture, RebuildSource};
use crate::last_value::{
    CompressedSamples, IndexedSeries, LastSeries, LastValues, RecentSamples, TagMatcher, Taken,
};
use crate::layout::names::{self, NameKind, TableNames};
use crate::layout::rollup::Aggregate;
use crate::layout::schema::FieldType;
use crate::read::samples::{WholeRows, AGGREGATE_FILL_SAMPLES};
use crate::read::sandbox::ReadScope;
use crate::read::stream::QueryChunks;
use crate::read::{MeasurementSchema, Reader};
use crate::stats::{IngestStats, PartsSummary};
use crate::wal;
use crate::write::appender::Appender;
use crate::write::budget::MemoryReservation;
use crate::write::flusher::{FlushContext, InsertObserver};
use crate::write::points::Point;
use crate::write::replay;
use crate::write::request::{ArrowTable, Durability, WriteOptions, WriteOutcome};
use crate::write::sink::{ClusterSink, EmbeddedSink, Sink};
use crate::write::{Handoff, PreparedWrite, Writer};

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
    config: Arc<IngestConfig>,
    engine: Arc<Engine>,
    catalog: Arc<Catalog>,
    writer: Arc<Writer>,
    reader: Reader,
    /// In the `clickhouse` storage mode, the task that learns what other
    /// nodes create ([`learn::run`]); aborted on close.
    learner: Mutex<Option<JoinHandle<()>>>,
    /// The rollups of downsampled databases (and in the cluster mode what
    /// is learnt of the shards'); its background task, aborted on close.
    downsampler: Arc<Downsampler>,
    downsampling: Mutex<Option<JoinHandle<()>>>,
}

impl Shared {
    /// `self`, unless the ingestor is closing.
    fn open(&self) -> Result<&Self> {
        self.writer.open()?;
        Ok(self)
    }
}

/// What [`Ingestor::mark_edit`] leaves to the end of an edit: the pass
/// lock it holds, and (in the cluster mode) the tables to mark, over
/// `range`.
struct EditMarks<'a> {
    held: Option<tokio::sync::MutexGuard<'a, ()>>,
    tables: Vec<TableNames>,
    range: (i64, i64),
}

/// Rebuilds of the last-value cache read the rows and, where a downsampled
/// table's rows are gone, its rollups.
impl RebuildSource for Shared {
    fn engine(&self) -> &Engine {
        &self.engine
    }

    fn flush_all(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(self.writer.flush_all())
    }

    fn is_closed(&self) -> bool {
        self.writer.open().is_err()
    }

    fn gone_rows(&self, table: &Table, fields: &[(String, FieldType)]) -> Vec<String> {
        let Some(view) = self.downsampler.view(&table.schema().names) else {
            return Vec::new();
        };
        [Aggregate::First, Aggregate::Last]
            .into_iter()
            .flat_map(|at| view.gone_rows_sql(fields, i64::MIN, i64::MAX, at))
            .collect()
    }
}

impl Ingestor {
    /// Opens the engine on `config.data_dir` (created if missing), reads
    /// back the databases, tables and series stored there, and replays the
    /// write-ahead log: rows acknowledged before a crash but not yet in the
    /// engine are inserted before this returns.
    pub async fn open(config: IngestConfig) -> Result<Ingestor> {
        config.validate()?;
        crate::parallel::set_threads(config.query.evaluation_threads);
        let runtime = tokio::runtime::Handle::current();
        durable::create_dir_all(&config.data_dir).map_err(|source| Error::Io {
            context: format!("creating data directory {}", config.data_dir.display()),
            source,
        })?;
        let data_dir = config.data_dir.canonicalize().map_err(|source| Error::Io {
            context: format!("resolving data directory {}", config.data_dir.display()),
            source,
        })?;
        if data_dir.join(backup::RESTORING_MARKER).exists() {
            return Err(Error::InvalidBackup(format!(
                "{} holds a restore that did not finish ({} is there): remove the directory and restore again",
                data_dir.display(),
                backup::RESTORING_MARKER
            )));
        }
        let config = Arc::new(IngestConfig { data_dir, ..config });
        let config_downsampling = config.downsampling.clone();
        let stats = Arc::<IngestStats>::default();
        let cluster = match &config.storage {
            StorageMode::Embedded => None,
            StorageMode::ClickHouse(cluster) => {
                Some(Arc::new(Cluster::new(cluster, Arc::clone(&stats))?))
            }
        };
        let engine = Engine::open(
            &config.data_dir,
            config.connections,
            &config.query,
            cluster.clone(),
            stats,
        )
        .await?;
        let engine = Arc::new(engine);
        // Before the catalog reads the series: what it reads counts as
        // read, and the learner reads the series stored after.
        let series_parts = match &cluster {
            Some(cluster) => Some(SeriesParts::active(cluster).await?),
            None => None,
        };
        // Tables other nodes made on the shards become readable here.
        engine.mirror_shards().await?;
        let defaults = TableDefaults {
            view_rp: config.view_retention_policy.clone(),
            duplicates: config.duplicate_policy,
            downsampled: RwLock::new(config_downsampling.databases.keys().cloned().collect()),
        };
        let catalog = Arc::new(Catalog::load(&engine, config.cardinality, defaults).await?);
        catalog.repair(&engine).await?;
        let wal_dir = config
            .wal
            .dir
            .clone()
            .unwrap_or_else(|| config.data_dir.join("wal"));
        let segment_bytes = config.wal.segment_bytes;
        let (files, opened, scan) = tokio::task::spawn_blocking(move || {
            let mut scan = replay::Scan::default();
            wal::LogFiles::open(&wal_dir, segment_bytes, |lsn, record| {
                scan.visit(lsn, record)
            })
            .map(|(files, opened)| (files, opened, scan))
        })
        .await
        .map_err(|e| Error::Internal(format!("opening the log failed: {e}")))??;
        for cut in &opened.cuts {
            tracing::warn!(segment = %cut.path.display(), offset = cut.offset, dropped_bytes = cut.dropped,
                reason = %cut.reason, "cut the log's torn tail (a write that was never acknowledged)");
            IngestStats::add(&engine.stats.wal_cut_bytes, cut.dropped);
        }
        // In the `clickhouse` mode other nodes write too, and their rows
        // never reach this node's memory: answers from it (last values,
        // the series index, recent samples) could miss them, so the cache
        // is off and those reads go to the shards.
        let cached = match &config.storage {
            StorageMode::Embedded => config.last_values.clone(),
            // Other nodes change the shards unseen: no block would hold.
            StorageMode::ClickHouse(_) => LastValueConfig {
                measurements: Vec::new(),
                chunk_cache_bytes: 0,
                ..config.last_values.clone()
            },
        };
        let (last_values, rebuilds) = LastValues::new(cached, Arc::clone(&engine.stats));
        let last_values = Arc::new(last_values);
        // Before the appender starts: nothing to stop if this fails.
        let reader = Reader::open(
            Arc::clone(&engine),
            Arc::clone(&catalog),
            Arc::clone(&last_values),
        )
        .await?;
        let handoff = Arc::new(Handoff::new(Arc::clone(&last_values)));
        let appender = Appender::start(files, Arc::clone(&engine.stats), handoff)?;
        let sink: Box<dyn Sink> = match &cluster {
            None => Box::new(EmbeddedSink::new(Arc::clone(&engine))),
            Some(cluster) => Box::new(ClusterSink::new(Arc::clone(cluster))),
        };
        // Statements may downsample any database (in the embedded mode),
        // and in the cluster mode readers learn any shard's rollups.
        let downsampler = Arc::new(Downsampler::new(
            &engine,
            &catalog,
            &last_values,
            &config_downsampling,
        ));
        let on_insert = {
            let downsampler = Arc::downgrade(&downsampler);
            InsertObserver(Arc::new(move |database: &str, table: &str, span| {
                if let Some(downsampler) = downsampler.upgrade() {
                    downsampler.inserting(database, table, span);
                }
            }))
        };
        let flush = FlushContext::new(
            Arc::clone(&engine),
            sink,
            appender,
            config.flush.clone(),
            on_insert,
        );
        let writer = Arc::new(Writer::new(
            Arc::clone(&config),
            Arc::clone(&catalog),
            Arc::clone(&last_values),
            flush,
            runtime.clone(),
        ));
        let ingestor = Ingestor {
            shared: Arc::new(Shared {
                config,
                engine: Arc::clone(&engine),
                catalog: Arc::clone(&catalog),
                writer: Arc::clone(&writer),
                reader,
                learner: Mutex::default(),
                downsampler: Arc::clone(&downsampler),
                downsampling: Mutex::default(),
            }),
        };
        let broken = replay::broken_tables(&engine, &catalog).await?;
        let replayed = replay::run(writer.flush_context(), &catalog, &opened, scan, &broken).await;
        if let Err(err) = replayed {
            let _ = ingestor.close().await;
            return Err(err);
        }
        // Readers and rebuilds must know where rows are gone.
        let loaded = match cluster {
            None => downsampler.load().await,
            Some(_) => downsampler.learn().await,
        };
        if let Err(err) = loaded {
            let _ = ingestor.close().await;
            return Err(err);
        }
        for db in catalog.databases() {
            catalog.set_downsampled(&db.name, downsampler.policies.is_downsampled(&db.name));
        }
        // Rebuilt in the background: until then its tables answer `None`.
        let tables = catalog.databases().into_iter().flat_map(|db| db.tables());
        last_values.activate(tables.map(|(_, table)| table));
        let source: Weak<dyn RebuildSource> = Arc::downgrade(&ingestor.shared) as _;
        runtime.spawn(rebuild::run_rebuilds(
            source,
            Arc::downgrade(&last_values),
            rebuilds,
        ));
        writer.start_checkpointer();
        let task = runtime.spawn(downsample::run(downsampler, config_downsampling.period));
        *ingestor.shared.downsampling.lock().unwrap() = Some(task);
        if let (StorageMode::ClickHouse(config), Some(cluster), Some(parts)) =
            (&ingestor.shared.config.storage, cluster, series_parts)
        {
            let learner = Learner::new(&engine, &catalog, cluster, parts);
            let task = runtime.spawn(learn::run(learner, config.refresh));
            *ingestor.shared.learner.lock().unwrap() = Some(task);
        }
        tracing::info!(data_dir = %ingestor.shared.config.data_dir.display(), "engine open");
        Ok(ingestor)
    }

    /// What this ingestor has done so far: lines, flushes, series, errors.
    pub fn stats(&self) -> &IngestStats {
        &self.shared.engine.stats
    }

    /// The engine's active parts, their rows and bytes on disk; `None` in
    /// the `clickhouse` storage mode, where the shards keep the parts.
    pub async fn parts(&self) -> Result<Option<PartsSummary>> {
        let shared = self.shared.open()?;
        match shared.config.storage {
            StorageMode::Embedded => shared.reader.parts().await.map(Some),
            StorageMode::ClickHouse(_) => Ok(None),
        }
    }

    /// Bytes held in the memory budget: rows waiting to be inserted, and
    /// reservations such as request bodies being read.
    pub fn buffered_bytes(&self) -> usize {
        self.shared.writer.budget.used()
    }

    /// Reserves `bytes` of the memory budget for data the caller holds on
    /// its way in — a request body while it is read and parsed — so that
    /// many large requests at once are refused with [`Error::Overloaded`]
    /// instead of growing the process. Released when dropped.
    pub async fn reserve_memory(&self, bytes: usize) -> Result<MemoryReservation> {
        let budget = Arc::clone(&self.shared.writer.open()?.budget);
        MemoryReservation::new(budget, bytes).await
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
        self.shared
            .writer
            .open()?
            .prepare_lp(db, rp, body, options)
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
        self.shared
            .writer
            .open()?
            .prepare_points(db, rp, points, options)
            .await
    }

    /// The second half of a write: logs the rows and returns when
    /// `durability` is met.
    pub async fn commit(
        &self,
        prepared: PreparedWrite,
        durability: Durability,
    ) -> Result<WriteOutcome> {
        self.shared
            .writer
            .open()?
            .commit(prepared, durability)
            .await
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
        let table = ArrowTable::new(measurement, batch, tag_columns);
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
        self.shared
            .writer
            .open()?
            .write_arrow_tables(db, rp, tables, options)
            .await
    }

    /// Inserts every row written so far into the engine and waits until
    /// they are committed.
    pub async fn flush(&self) -> Result<()> {
        self.shared.writer.open()?.flush_all().await
    }

    /// Runs a statement the program itself wrote (trusted: no sandbox, no
    /// limits, any statement the engine runs) and returns its output in the
    /// named ClickHouse output format (`"JSON"`, `"CSV"`, `"Parquet"`,
    /// `"ArrowStream"`, …). SQL from callers goes to
    /// [`query_untrusted`](Self::query_untrusted).
    pub async fn query_trusted(&self, sql: &str, format: &str) -> Result<Vec<u8>> {
        self.shared.open()?.reader.query(sql, format).await
    }

    /// Runs one read-only statement, for SQL from untrusted callers: writes,
    /// DDL, settings changes, several statements, `INTO OUTFILE` and table
    /// functions that reach outside the engine (`file`, `url`, `remote`, …)
    /// are refused ([`Error::NotReadOnly`], or the engine's own error).
    ///
    /// At most [`QueryLimits::max_concurrent`](crate::QueryLimits::max_concurrent)
    /// such statements (with those of [`query_translated`](Self::query_translated))
    /// run at once; the next wait for a slot in arrival order, up to
    /// `max_queued` of them for up to `queue_timeout` each: past those,
    /// [`Error::TooManyQueries`] or [`Error::QueryQueueTimeout`]. Dropping
    /// the future while it waits leaves the queue.
    pub async fn query_untrusted(&self, sql: &str, format: &str) -> Result<Vec<u8>> {
        let mut chunks = self
            .query_untrusted_stream(sql, format, &ReadScope::All, None)
            .await?;
        let mut output = Vec::new();
        while let Some(chunk) = chunks.next().await {
            output.extend(chunk?);
        }
        Ok(output)
    }

    /// [`query_untrusted`](Self::query_untrusted), streamed: the output
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
    pub async fn query_untrusted_stream(
        &self,
        sql: &str,
        format: &str,
        scope: &ReadScope,
        database: Option<&str>,
    ) -> Result<QueryChunks> {
        self.shared
            .open()?
            .reader
            .query_read_only_stream(sql, format, scope, database)
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
        self.shared.reader.databases()
    }

    /// The retention policies of `db`, sorted by name: those created with
    /// [`create_retention_policy`](Self::create_retention_policy) with their
    /// durations, and those only written to (kept forever, `None`).
    pub fn retention_policies(&self, db: &str) -> Vec<(String, Option<Duration>)> {
        self.shared.reader.retention_policies(db)
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
                shared.catalog.defaults().duplicates,
            )
            .await
    }

    /// The duplicate policies set for `db`: the database's own (`None`)
    /// and its measurements', sorted. Tables of others take
    /// [`IngestConfig::duplicate_policy`].
    pub fn duplicate_policies(&self, db: &str) -> Vec<(Option<String>, DuplicatePolicy)> {
        self.shared.reader.duplicate_policies(db)
    }

    /// The measurements of retention policy `rp` of `db` that have a
    /// table, with their fields (sorted by name) and the tag keys their
    /// series carry (sorted): what InfluxQL's `SHOW FIELD KEYS` and source
    /// resolution need, from memory.
    pub fn measurements(&self, db: &str, rp: &str) -> Vec<MeasurementSchema> {
        self.shared.reader.measurements(db, rp)
    }

    /// One measurement of [`measurements`](Self::measurements), if it has
    /// a table.
    pub fn measurement(&self, db: &str, rp: &str, name: &str) -> Option<MeasurementSchema> {
        self.shared.reader.measurement(db, rp, name)
    }

    /// Runs a read statement the caller wrote itself from an untrusted
    /// query (every name and literal quoted), on a read-only connection
    /// under the query limits, without the sandbox's parses; its result as
    /// Arrow batches. For translators such as InfluxQL's, never for SQL
    /// text that a caller sent (that is [`query_untrusted`](Self::query_untrusted)).
    /// It waits for a slot in the same queue.
    pub async fn query_translated(&self, sql: &str) -> Result<Vec<RecordBatch>> {
        self.shared.open()?.reader.query_translated(sql).await
    }

    /// As [`query_translated`](Self::query_translated), for a statement
    /// that reads rollups ([`rollups`](Self::rollups)); counted in
    /// [`IngestStats::rollup_queries`].
    pub async fn query_rollups(&self, sql: &str) -> Result<Vec<RecordBatch>> {
        let shared = self.shared.open()?;
        IngestStats::add(&shared.engine.stats.rollup_queries, 1);
        shared.reader.query_translated(sql).await
    }

    /// What a reader may take from the rollups of `measurement` in `db` /
    /// `rp` (docs/downsampling.md): `None` when the database is not
    /// downsampled, or no pass has finished over the table since the
    /// ingestor opened (then every row is to be read).
    pub fn rollups(&self, db: &str, rp: &str, measurement: &str) -> Option<RollupView> {
        self.shared
            .downsampler
            .view(&TableNames::new(db, rp, measurement))
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
        keep: impl FnMut(&[(&str, &str)]) -> bool,
    ) -> Option<Vec<LastSeries>> {
        self.shared.reader.last_values(db, rp, measurement, keep)
    }

    /// The series of `measurement` in `db` / `rp` whose tags the matchers
    /// accept and that have a value of `field` in `range` (ns, judged by
    /// each series' first and newest value), from the in-memory index (a
    /// few list intersections, no engine statement); in no particular
    /// order. `None` when the measurement is not indexed now (as
    /// [`last_values`](Self::last_values): not cached, evicted, or being
    /// rebuilt): the caller must ask the engine.
    pub fn indexed_series(
        &self,
        (db, rp, measurement): (&str, &str, &str),
        matchers: &[TagMatcher<'_>],
        field: &str,
        range: Option<(i64, i64)>,
    ) -> Option<Vec<IndexedSeries>> {
        let table = (db, rp, measurement);
        self.shared
            .reader
            .indexed_series(table, matchers, field, range)
    }

    /// The values of tag `key` among the series of `measurement` in `db` /
    /// `rp` the matchers accept (all when there are none) that have a
    /// value of `field` if given (any field, with a `range`), between their
    /// first and newest value in `range` (ns) if given; sorted, from the
    /// in-memory index, which holds every series (no engine statement).
    /// With neither `field` nor `range`, every series of the series table
    /// counts, rows or not. `None` as for
    /// [`indexed_series`](Self::indexed_series).
    pub fn tag_values(
        &self,
        (db, rp, measurement): (&str, &str, &str),
        key: &str,
        matchers: &[TagMatcher<'_>],
        field: Option<&str>,
        range: Option<(i64, i64)>,
    ) -> Option<Vec<String>> {
        let table = (db, rp, measurement);
        self.shared
            .reader
            .tag_values(table, key, matchers, field, range)
    }

    /// The tag keys of the series of `measurement` in `db` / `rp` the
    /// matchers select (with a value of `field` if given, in `range` (ns)
    /// if given), sorted, from the in-memory index; `None` when the
    /// measurement is not indexed now.
    pub fn tag_keys(
        &self,
        (db, rp, measurement): (&str, &str, &str),
        matchers: &[TagMatcher<'_>],
        field: Option<&str>,
        range: Option<(i64, i64)>,
    ) -> Option<Vec<String>> {
        let table = (db, rp, measurement);
        self.shared.reader.tag_keys(table, matchers, field, range)
    }

    /// A number that grows whenever an answer about `database`'s times
    /// more than [`SETTLED_AFTER`](crate::SETTLED_AFTER) ago may have
    /// changed: an
    /// acknowledged write of a sample that old (counted before the writer
    /// is answered), a delete, a correction, a dropped series. A result
    /// computed from memory ([`recent_samples`](Self::recent_samples),
    /// [`indexed_series`](Self::indexed_series)) about such times holds
    /// while the number is what it was before the result was read. In the
    /// `clickhouse` storage mode other nodes may change any time, unseen
    /// here: the number grows at every call, so no result is kept.
    pub fn settled_version(&self, database: &str) -> u64 {
        self.shared.reader.settled_version(database)
    }

    /// The time (ns) before which the engine holds every acknowledged row:
    /// none with an earlier time is on its way to it (`i64::MAX` when none
    /// at all is). A result the engine gives about earlier times that are
    /// settled holds, as one from memory does, while
    /// [`settled_version`](Self::settled_version) — read before this —
    /// stays what it was.
    pub fn engine_complete_before(&self) -> i64 {
        self.shared.writer.earliest_in_flight()
    }

    /// Each of `ids`' samples of numeric field `field` of `measurement` in
    /// `db` / `rp` in `[start, end]` (ns), as
    /// [`recent_samples`](Self::recent_samples) gives them, reaching back
    /// past the recent window through the chunk cache: blocks of older
    /// samples read from the engine on a miss and kept
    /// ([`LastValueConfig::chunk_cache_bytes`](crate::LastValueConfig::chunk_cache_bytes)).
    /// They start later than `start` ([`RecentSamples::from_ns`]; the
    /// caller reads the rest from the engine) where its rows are not whole
    /// there: downsampled or past retention, not settled, not all in the
    /// engine yet, or more than a fill may read. With no `ids`, it tells
    /// where they would start.
    ///
    /// For a reader that aggregates: a fill reads at most
    /// [`AGGREGATE_FILL_SAMPLES`],
    /// past which the engine's own aggregation is the cheaper read.
    pub async fn samples(
        &self,
        table: (&str, &str, &str),
        field: &str,
        ids: &[u64],
        range: (i64, i64),
    ) -> Result<Option<RecentSamples>> {
        let most = AGGREGATE_FILL_SAMPLES;
        self.samples_as(table, field, ids, range, (1, most)).await
    }

    /// [`samples`](Self::samples), each series' samples compressed as
    /// memory keeps them, to be decoded where they are used, their times
    /// in units of `per` ns (1,000,000: ms), floored as they are decoded,
    /// the last sample of equal times kept. For a reader that reads the
    /// rest's rows anyway: a fill reads up to `most` samples (the reader's
    /// own bound), or as many as half the chunk cache holds.
    pub async fn samples_compressed(
        &self,
        table: (&str, &str, &str),
        field: &str,
        ids: &[u64],
        range: (i64, i64),
        (per, most): (i64, usize),
    ) -> Result<Option<RecentSamples<CompressedSamples>>> {
        assert!(per > 0, "a unit of time is 1 ns or more");
        self.samples_as(table, field, ids, range, (per, most)).await
    }

    /// [`samples`](Self::samples) as `S` takes them, times in units of
    /// `per` ns, a fill of at most `most` samples.
    async fn samples_as<S: Taken>(
        &self,
        table: (&str, &str, &str),
        field: &str,
        ids: &[u64],
        range: (i64, i64),
        (per, most): (i64, usize),
    ) -> Result<Option<RecentSamples<S>>> {
        let whole = self.whole_rows(table);
        self.shared
            .reader
            .samples(table, field, ids, range, (per, most), whole)
            .await
    }

    /// Where the rows of `measurement` in `db` / `rp` are whole now, for a
    /// reader to keep what it reads of them in the chunk cache.
    pub fn whole_rows(&self, (db, rp, measurement): (&str, &str, &str)) -> WholeRows {
        // The version first: a change from here on leaves what is kept
        // stale. Then how far the engine is whole.
        let version = self.settled_version(db);
        let complete = self.engine_complete_before();
        let now = crate::last_value::now_ns();
        let settled = now - crate::last_value::SETTLED_AFTER.as_nanos() as i64;
        let retained_from = self
            .retention_policies(db)
            .into_iter()
            .find(|(name, _)| name == rp)
            .and_then(|(_, duration)| duration)
            .map_or(i64::MIN, |d| {
                now - i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
            });
        WholeRows {
            version,
            retained_from,
            downsampled_from: self
                .rollups(db, rp, measurement)
                .map_or(i64::MIN, |view| view.rows_from),
            settled_before: settled.min(complete),
        }
    }

    /// Each of `ids`' samples of numeric field `field` of `measurement` in
    /// `db` / `rp` with a time in `[start, end]` (ns), as floats, in time
    /// order with one sample per time (of two writes of one time, the
    /// later), in `ids`' order; from memory, which holds every
    /// acknowledged sample of the last
    /// [`recent_span`](crate::LastValueConfig::recent_span). When memory
    /// does not reach back to `start`, the samples start later
    /// ([`RecentSamples::from_ns`]) and the caller asks the engine for the
    /// rest; `None` when memory holds no part of the range (or the
    /// measurement is not cached now). Acknowledged samples are here
    /// before the engine has them. With no `ids`, it tells where memory
    /// starts and whether its samples are one row each
    /// ([`RecentSamples::one_row_each`]), without counting a read.
    pub fn recent_samples(
        &self,
        table: (&str, &str, &str),
        field: &str,
        ids: &[u64],
        range: (i64, i64),
    ) -> Option<RecentSamples> {
        self.shared
            .reader
            .recent_samples(table, field, ids, range, 1)
    }

    /// [`recent_samples`](Self::recent_samples), each series' samples
    /// compressed as memory keeps them (as
    /// [`samples_compressed`](Self::samples_compressed) gives them, without
    /// reaching past memory: for a reader whose older part rollups answer
    /// cheaper).
    pub fn recent_compressed(
        &self,
        table: (&str, &str, &str),
        field: &str,
        ids: &[u64],
        range: (i64, i64),
        per: i64,
    ) -> Option<RecentSamples<CompressedSamples>> {
        assert!(per > 0, "a unit of time is 1 ns or more");
        self.shared
            .reader
            .recent_samples(table, field, ids, range, per)
    }

    /// [`query_trusted`](Self::query_trusted), its result as Arrow record
    /// batches.
    pub async fn query_trusted_arrow(&self, sql: &str) -> Result<Vec<RecordBatch>> {
        self.shared.open()?.reader.query_arrow(sql).await
    }

    /// Inserts everything logged into the engine, advances the log's
    /// checkpoint and closes the engine connections. Writes after this fail
    /// with [`Error::Closed`]; other clones of this ingestor are closed too.
    /// Rows whose insert fails now stay in the log for the next open.
    pub async fn close(&self) -> Result<()> {
        let shared = &self.shared;
        if let Some(learner) = shared.learner.lock().unwrap().take() {
            learner.abort();
        }
        if let Some(task) = shared.downsampling.lock().unwrap().take() {
            task.abort();
        }
        let Some(checkpointed) = shared.writer.close().await else {
            return Ok(());
        };
        shared.engine.close().await;
        tracing::info!("engine closed");
        checkpointed
    }

    /// Writes a backup of the request's databases (every one when none is
    /// named) to a new directory or S3 prefix: every write acknowledged
    /// before the call, exactly once, with the databases' schemas,
    /// series and policies. Writes are still acknowledged while it runs;
    /// their inserts wait until the engine has picked the tables' parts.
    /// See [`backup`](crate::backup).
    pub async fn backup(&self, request: BackupRequest) -> Result<BackupReport> {
        let shared = self.shared.open()?;
        backup::backup(shared.writer.open()?, &shared.catalog, request).await
    }

    /// Takes a snapshot: hard links of every table's parts, with their
    /// definitions, in `<data dir>/shadow/<name>` (a data directory once
    /// copied), as of every write acknowledged before the call.
    pub async fn create_snapshot(&self) -> Result<Snapshot> {
        let shared = self.shared.open()?;
        let writer = shared.writer.open()?;
        backup::create_snapshot(writer, &shared.catalog, &shared.config.data_dir).await
    }

    /// The snapshots in the data directory, oldest first.
    pub fn snapshots(&self) -> Result<Vec<Snapshot>> {
        backup::snapshots(&self.shared.config.data_dir)
    }

    /// Deletes the snapshot `name`; false if there is none.
    pub fn delete_snapshot(&self, name: &str) -> Result<bool> {
        backup::delete_snapshot(&self.shared.config.data_dir, name)
    }

    /// Deletes the points of `db` that `filter` matches, in every table in
    /// its scope. Queries stop seeing them at once; the engine removes them
    /// from disk as it merges. Returns how many tables it ran on.
    pub async fn delete(&self, db: &str, filter: &PointFilter) -> Result<usize> {
        let marks = self.mark_edit(db, filter, RollupEdit::Delete).await?;
        let deleted = edit::delete(self.shared.writer.open()?, db, filter).await;
        self.marked(marks).await?;
        deleted
    }

    /// Before an edit of a downsampled database: holds its rollups' passes
    /// off until [`marked`](Self::marked), marks the tables the edit may
    /// change, from its start on, for the next pass to rebuild, and applies
    /// `edit` to the buckets whose rows are gone (in the cluster mode to
    /// every bucket, the marks recorded by `marked`, after the edit).
    async fn mark_edit(
        &self,
        db: &str,
        filter: &PointFilter,
        edit: RollupEdit<'_>,
    ) -> Result<EditMarks<'_>> {
        let downsampler = &self.shared.downsampler;
        let range = (
            filter.start.unwrap_or(i64::MIN),
            filter.stop.unwrap_or(i64::MAX),
        );
        if !downsampler.is_downsampled_anywhere(db) {
            return Ok(EditMarks {
                held: None,
                tables: Vec::new(),
                range,
            });
        }
        let held = downsampler.hold().await;
        let covers = |rp: &str, measurement: &str| filter.covers(rp, measurement);
        let statement = |rollup: &str, names: &TableNames, measurement: &str, before, kept: &_| {
            edit::rollup_edit_sql(rollup, names, measurement, filter, before, kept, edit)
        };
        let tables = downsampler.mark(db, covers, range, &statement).await?;
        Ok(EditMarks {
            held: Some(held),
            tables,
            range,
        })
    }

    /// After an edit, also one that failed part way (a rebuild from the
    /// rows is right either way): records the marks
    /// [`mark_edit`](Self::mark_edit) left to it, and lets passes run
    /// again.
    async fn marked(&self, marks: EditMarks<'_>) -> Result<()> {
        let marked = self
            .shared
            .downsampler
            .marked(&marks.tables, marks.range)
            .await;
        drop(marks.held);
        marked
    }

    /// Sets how `db` is downsampled ([`DownsamplingSetting`]), durably;
    /// until a statement does, the configuration file's
    /// [`DownsamplingConfig::databases`](crate::DownsamplingConfig::databases)
    /// say. Passes move its tables to the levels (docs/downsampling.md): a
    /// level kept keeps its buckets, a new one is built from the rows
    /// where they are kept and, where not, from a level whose buckets
    /// divide its own. Refused ([`Error::Conflict`]) where the new levels
    /// could not hold data whose rows are gone, and to stop downsampling
    /// a database whose rows went; ([`Error::Config`]) in the
    /// `clickhouse` storage mode and with `flush.concurrency` above 1.
    pub async fn set_downsampling(&self, db: &str, setting: DownsamplingSetting) -> Result<()> {
        let shared = self.shared.open()?;
        if shared.engine.cluster.is_some() {
            return Err(Error::Config(
                "SET DOWNSAMPLING is not available in the clickhouse storage mode: give every \
                 node the levels in its configuration file ([downsampling.databases])"
                    .to_owned(),
            ));
        }
        let downsampler = &shared.downsampler;
        // As the configuration's check says: passes find new rows by block.
        if matches!(setting, DownsamplingSetting::Levels(_)) && shared.config.flush.concurrency != 1
        {
            return Err(Error::Config(
                "downsampling needs flush.concurrency = 1".to_owned(),
            ));
        }
        downsampler.set(db, setting).await?;
        let downsampled = downsampler.policies.is_downsampled(db);
        shared.catalog.set_downsampled(db, downsampled);
        Ok(())
    }

    /// The levels `db` is downsampled at, if it is, and whether a
    /// statement set that ([`set_downsampling`](Self::set_downsampling);
    /// else the configuration file did).
    pub fn downsampling(&self, db: &str) -> (Option<Downsampling>, bool) {
        let downsampler = &self.shared.downsampler;
        (
            downsampler.policies.policy(db),
            downsampler.policies.is_set(db),
        )
    }

    /// Brings the rollups of every downsampled database up to date now: the
    /// pass the background task makes every
    /// [`DownsamplingConfig::period`](crate::DownsamplingConfig::period).
    pub async fn downsample(&self) -> Result<()> {
        self.shared.open()?.downsampler.pass().await.map(|_| ())
    }

    /// Drops the series `filter` matches (InfluxQL's `DROP SERIES`, and
    /// `DROP MEASUREMENT` for all of one measurement's): their points in
    /// every table in scope, and their rows in the series table. Writing
    /// one of them again creates it anew. The filter takes no time range.
    pub async fn drop_series(&self, db: &str, filter: &PointFilter) -> Result<usize> {
        let marks = self.mark_edit(db, filter, RollupEdit::Delete).await?;
        let dropped = edit::drop_series(self.shared.writer.open()?, db, filter).await;
        self.marked(marks).await?;
        dropped
    }

    /// Sets `field` to `value` in the points of `db` that `filter` matches
    /// (a correction). The filter must name the measurement; the value must
    /// fit the field's type. Queries see the new value at once. Returns how
    /// many tables it ran on.
    pub async fn update(
        &self,
        db: &str,
        filter: &PointFilter,
        field: &str,
        value: &FieldValue,
    ) -> Result<usize> {
        let marks = self
            .mark_edit(db, filter, RollupEdit::Update(field, value))
            .await?;
        let updated = edit::update(self.shared.writer.open()?, db, filter, field, value).await;
        self.marked(marks).await?;
        updated
    }
}
