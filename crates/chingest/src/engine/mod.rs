//! The embedded engine: a pool of chdb-rust connections to the process-wide
//! chDB instance, and the only module that calls chdb-rust. Its files by
//! job: the connections and their pools ([`pool`]), one statement on a
//! connection ([`statements`]), Arrow data handed to the engine
//! ([`register`]), what makes its writes durable ([`data_dir`]), the
//! `clickhouse` storage mode's `Distributed` tables ([`mirror`]), the
//! output formats ([`format`](mod@format)) and the untrusted statements'
//! [`queue`]; here, the [`Engine`] that holds them together.
//!
//! Every chDB call blocks its thread for the whole statement, so every call
//! here runs on tokio's blocking pool ([`Engine::run`]), never on an async
//! worker. A connection runs one statement at a time; the pool hands each
//! concurrent caller its own connection, which is what lets inserts overlap.
//! Untrusted statements take a slot of their [`queue`] first.

mod data_dir;
mod format;
mod mirror;
mod pool;
mod queue;
mod register;
mod statements;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arrow::record_batch::RecordBatch;
use deadpool::managed;

use crate::cluster::Cluster;
pub(crate) use crate::cluster::StatementKind;
use crate::config::QueryLimits;
use crate::durable;
use crate::engine::data_dir::{check_durability_settings, DataDir};
use crate::engine::pool::{connection_pool, pool_error, ConnectionManager, Pooled};
use crate::engine::queue::{QueryQueue, QuerySlot};
use crate::error::{Error, Result};
use crate::stats::IngestStats;

/// The engine's connection, named here so that the rest of the crate
/// reaches chdb-rust only through this module.
pub(crate) use chdb_rust::connection::Connection;
pub(crate) use format::{output_format, OutputFormat};
pub(crate) use pool::{discard, release};
pub(crate) use register::create_memory_table;
pub(crate) use statements::{
    check_read_only, execute, limit_error, query, query_arrow, query_rows, stream, syntax_tree,
    Canceller, Streamed,
};

/// A pool of engine connections. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub(crate) struct Engine {
    pool: managed::Pool<ConnectionManager>,
    /// Connections opened with `readonly = 1` and the query limits: the
    /// engine itself refuses writes, settings changes and table functions
    /// that read outside (`file`, `url`, `remote`, …) on them. Used for
    /// queries from untrusted callers, together with the sandbox
    /// (`read::sandbox`).
    read_only: managed::Pool<ConnectionManager>,
    /// At most `QueryLimits::max_concurrent` untrusted statements at once
    /// (the read-only pool's size), more waiting their turn.
    queries: QueryQueue,
    /// Counters, shared with the ingestor.
    pub(crate) stats: Arc<IngestStats>,
    /// What the engine keeps on disk, synced where it does not sync itself.
    pub(crate) disk: Arc<DataDir>,
    /// In the `clickhouse` storage mode, the shards that store the rows:
    /// the tables here are `Distributed` tables over theirs.
    pub(crate) cluster: Option<Arc<Cluster>>,
    /// Connections of both pools still open, lent out ones included.
    open: Arc<AtomicUsize>,
    /// The shards' tables as the `Distributed` tables here were last made
    /// over them, by database and name; held while they are read and made
    /// again, so that the newest columns read are the last made.
    mirrored: tokio::sync::Mutex<HashMap<(String, String), ShardTable>>,
}

/// A table on the first shard, as [`Engine::mirror`] reads it: its engine
/// and its columns (name, type) in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShardTable {
    /// Its database, as named on the shards (encoded).
    pub(crate) database: String,
    pub(crate) table: String,
    pub(crate) engine: String,
    pub(crate) columns: Vec<(String, String)>,
}

/// How long [`Engine::close`] waits for the connections lent out.
const CLOSE_WAIT: Duration = Duration::from_secs(30);

impl Engine {
    /// Boots the engine on `data_dir` and checks that it answers.
    pub(crate) async fn open(
        data_dir: &Path,
        connections: usize,
        limits: &QueryLimits,
        cluster: Option<Arc<Cluster>>,
        stats: Arc<IngestStats>,
    ) -> Result<Engine> {
        let path = format!("--path={}", data_dir.display());
        // The engine's own durability settings, engine-wide, and the
        // cluster its `Distributed` tables reach.
        let config_file = data_dir.join(durable::ENGINE_CONFIG_FILE);
        let mut config = durable::ENGINE_CONFIG.to_owned();
        if let Some(cluster) = &cluster {
            config = config.replace(
                "</clickhouse>",
                &(cluster.engine_config() + "</clickhouse>"),
            );
        }
        durable::write(&config_file, config.as_bytes()).map_err(|source| Error::Io {
            context: format!("writing {}", config_file.display()),
            source,
        })?;
        let config = format!("--config-file={}", config_file.display());
        // Every query reads tables that merge points written again (the
        // `last` duplicate policy) as merged; other tables are unaffected.
        let final_reads = "--final=1".to_owned();
        let mut read_only_args = vec![
            path.clone(),
            config.clone(),
            "--readonly=1".to_owned(),
            final_reads.clone(),
        ];
        read_only_args.extend(limits.connection_args());
        let mut args = vec![path, config, final_reads];
        if cluster.is_some() {
            // A join of two `Distributed` tables (a view's facts and
            // series) runs on each shard against its own tables: a series
            // and its facts share a shard.
            let per_shard_joins = "--distributed_product_mode=local".to_owned();
            read_only_args.push(per_shard_joins.clone());
            args.push(per_shard_joins);
            // A read of given series (`series_id IN (…)`) asks only their
            // shards: `Distributed` places by `series_id` as `shard_of`.
            let skip_shards = "--optimize_skip_unused_shards=1".to_owned();
            read_only_args.push(skip_shards.clone());
            args.push(skip_shards);
            // Rows written through a `Distributed` table (the registries')
            // reach their shard before the statement returns, instead of
            // waiting in a local queue.
            args.push("--distributed_foreground_insert=1".to_owned());
        }
        let open = Arc::default();
        let pool = connection_pool(args, connections, &open)?;
        let disk = Arc::new(DataDir::new(data_dir));
        let engine = Engine {
            pool,
            read_only: connection_pool(read_only_args, limits.max_concurrent, &open)?,
            queries: QueryQueue::new(limits, Arc::clone(&stats)),
            stats,
            disk: Arc::clone(&disk),
            cluster,
            open,
            mirrored: tokio::sync::Mutex::default(),
        };
        engine
            .run(move |conn| {
                check_durability_settings(conn)?;
                // What the engine made when it booted.
                disk.sync_catalog()
            })
            .await?;
        Ok(engine)
    }

    /// Runs `f` with a pooled connection on the blocking pool.
    pub(crate) async fn run<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let waited = std::time::Instant::now();
        let conn = self.pool.get().await.map_err(pool_error)?;
        self.stats
            .connection_wait_seconds
            .observe(waited.elapsed().as_secs_f64());
        let result = tokio::task::spawn_blocking(move || {
            let result = f(&conn);
            if result.is_err() {
                discard(conn);
            }
            result
        })
        .await
        .map_err(|e| Error::Internal(format!("engine task failed: {e}")))?;
        if let Err(Error::Engine(_)) = &result {
            IngestStats::add(&self.stats.engine_errors, 1);
        }
        result
    }

    /// Runs `f`, which changes the catalog or edits rows, then makes its
    /// effect durable ([`DataDir::sync_catalog`]), also when it failed
    /// part way.
    pub(crate) async fn run_durable<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let disk = Arc::clone(&self.disk);
        self.run(move |conn| {
            let result = f(conn);
            disk.sync_catalog()?;
            result
        })
        .await
    }

    /// Runs a statement whose output is not needed (DDL or an edit), and
    /// makes its effect durable.
    pub(crate) async fn execute(&self, sql: String) -> Result<()> {
        self.run_durable(move |conn| execute(conn, &sql)).await
    }

    /// Runs statements in order on one connection, stopping at the first
    /// that fails (DDL that must happen in sequence), and makes their
    /// effect durable. No statement, nothing to make durable: no sync.
    pub(crate) async fn execute_all(
        &self,
        statements: impl IntoIterator<Item = String>,
    ) -> Result<()> {
        let statements: Vec<String> = statements.into_iter().collect();
        if statements.is_empty() {
            return Ok(());
        }
        self.run_durable(move |conn| statements.iter().try_for_each(|sql| execute(conn, sql)))
            .await
    }

    /// Runs a query and returns its output in `format`.
    pub(crate) async fn query(&self, sql: String, format: OutputFormat) -> Result<Vec<u8>> {
        self.run(move |conn| query(conn, &sql, format)).await
    }

    /// A slot among the untrusted statements, waited for in their queue
    /// ([`Error::TooManyQueries`], [`Error::QueryQueueTimeout`]), and a
    /// connection of the read-only pool, for one such statement. Its
    /// caller gives the connection back before the slot ([`release`]).
    pub(crate) async fn read_only_connection(&self) -> Result<(Pooled, QuerySlot)> {
        let slot = self.queries.enter().await?;
        let conn = self.read_only.get().await.map_err(pool_error)?;
        Ok((conn, slot))
    }

    /// A connection of the writable pool, waited for on a blocking-pool
    /// thread (waiting there blocks no async worker).
    pub(crate) fn connection_blocking(&self) -> Result<Pooled> {
        tokio::runtime::Handle::current()
            .block_on(self.pool.get())
            .map_err(pool_error)
    }

    /// What cancels a statement when its caller goes away.
    pub(crate) fn canceller(&self) -> Canceller {
        Canceller::new(self.pool.clone())
    }

    /// Runs a read statement chingest wrote itself from an untrusted query
    /// (InfluxQL: every name and literal quoted by the translator) on a
    /// read-only connection, under the query limits; its result as Arrow
    /// batches. The sandbox's parses are skipped: the statement is ours. A
    /// caller that drops the future before the answer (a client that went
    /// away) kills the statement.
    pub(crate) async fn query_read_only_arrow(&self, sql: String) -> Result<Vec<RecordBatch>> {
        let (conn, slot) = self.read_only_connection().await?;
        let mut canceller = self.canceller();
        let marked = format!("{sql}\n{}", canceller.marker);
        let answer = tokio::task::spawn_blocking(move || {
            let batches = query_arrow(&conn, &marked);
            release(conn, slot, batches.is_ok());
            batches.map_err(limit_error)
        })
        .await;
        canceller.finished = true;
        answer.map_err(|e| Error::Internal(format!("engine task failed: {e}")))?
    }

    /// Runs a query and returns its result as Arrow record batches.
    pub(crate) async fn query_arrow(&self, sql: String) -> Result<Vec<RecordBatch>> {
        self.run(move |conn| query_arrow(conn, &sql)).await
    }

    /// Closes every connection; later calls fail with [`Error::Closed`].
    /// Returns once the connections lent out are closed too (their users
    /// done), so that the engine can be opened on another data path at
    /// once; or after [`CLOSE_WAIT`], with a warning.
    pub(crate) async fn close(&self) {
        self.pool.close();
        self.read_only.close();
        self.queries.close();
        let started = std::time::Instant::now();
        while self.open.load(Ordering::SeqCst) > 0 {
            if started.elapsed() > CLOSE_WAIT {
                tracing::warn!(
                    open = self.open.load(Ordering::SeqCst),
                    "engine connections still in use after closing"
                );
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// The release of the linked engine library, e.g. `"26.7.3"`.
pub fn engine_version() -> &'static str {
    chdb_rust::version::engine_version().unwrap_or("unknown")
}

/// Stops the engine's threads for good, once every
/// [`Ingestor`](crate::Ingestor) is closed and dropped. Only needed by
/// programs that run teardown code of their own after using the engine
/// (exit-time destructors, `atexit` handlers): they would race the
/// engine's threads. No engine can be opened afterwards.
pub fn shutdown_engine() -> Result<()> {
    chdb_rust::runtime::shutdown().map_err(Error::from)
}
