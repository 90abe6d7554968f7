//! The embedded engine: a pool of chdb-rust connections to the process-wide
//! chDB instance, and the only module that calls chdb-rust.
//!
//! Every chDB call blocks its thread for the whole statement, so every call
//! here runs on tokio's blocking pool ([`Engine::run`]), never on an async
//! worker. A connection runs one statement at a time; the pool hands each
//! concurrent caller its own connection, which is what lets inserts overlap.
//! Untrusted statements take a slot of their [`queue`] first.

mod queue;

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use arrow::array::StructArray;
use arrow::datatypes::{DataType, TimeUnit};
use arrow::ffi::to_ffi;
use arrow::record_batch::RecordBatch;
use chdb_rust::admin::QueryClass;
use chdb_rust::arrow_stream::{ArrowArray, ArrowSchema};
use deadpool::managed::{self, Metrics, RecycleResult};

pub(crate) use crate::cluster::StatementKind;
use crate::cluster::{Cluster, CLUSTER_NAME};
use crate::config::QueryLimits;
use crate::durable;
use crate::engine::queue::{QueryQueue, QuerySlot};
use crate::error::{Error, Result};
use crate::layout::names::{column_list, dedup_setting, quote_ident, quote_literal, TableNames};
use crate::stats::IngestStats;

/// The engine's connection and output formats, named here so that the
/// rest of the crate reaches chdb-rust only through this module.
pub(crate) use chdb_rust::connection::Connection;
pub(crate) use chdb_rust::format::OutputFormat;

/// A connection lent by a pool: back to it when dropped (see [`discard`]).
pub(crate) type Pooled = managed::Object<ConnectionManager>;

/// Creates connections to the engine's data path, with extra
/// connection-level settings.
#[derive(Debug)]
pub(crate) struct ConnectionManager {
    args: Vec<String>,
    /// The engine's connections still open, of every pool.
    open: Arc<AtomicUsize>,
}

impl managed::Manager for ConnectionManager {
    type Type = CountedConnection;
    type Error = Error;

    async fn create(&self) -> Result<CountedConnection> {
        let args = self.args.clone();
        let conn = tokio::task::spawn_blocking(move || {
            Connection::open(&args.iter().map(String::as_str).collect::<Vec<_>>())
        })
        .await
        .map_err(|e| Error::Engine(format!("connection task failed: {e}")))?
        .map_err(Error::from)?;
        self.open.fetch_add(1, Ordering::SeqCst);
        Ok(CountedConnection {
            conn: Some(conn),
            open: Arc::clone(&self.open),
        })
    }

    async fn recycle(&self, _: &mut CountedConnection, _: &Metrics) -> RecycleResult<Error> {
        Ok(())
    }
}

/// A connection counted among its engine's open ones until it is
/// dropped. A pool closes only the connections it holds; one lent out is
/// dropped when its user is done, and the engine takes another data path
/// only once every connection to this one is gone ([`Engine::close`]
/// waits for that).
#[derive(Debug)]
pub(crate) struct CountedConnection {
    /// Always `Some` until dropped.
    conn: Option<Connection>,
    open: Arc<AtomicUsize>,
}

impl std::ops::Deref for CountedConnection {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.conn.as_ref().expect("a connection until dropped")
    }
}

impl std::ops::DerefMut for CountedConnection {
    fn deref_mut(&mut self) -> &mut Connection {
        self.conn.as_mut().expect("a connection until dropped")
    }
}

impl Drop for CountedConnection {
    fn drop(&mut self) {
        // Closed first, then no longer counted.
        drop(self.conn.take());
        self.open.fetch_sub(1, Ordering::SeqCst);
    }
}

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

/// How long [`Engine::close`] waits for the connections lent out.
const CLOSE_WAIT: Duration = Duration::from_secs(30);

/// Where the broken parts already reported are listed, in the data
/// directory.
const BROKEN_PARTS_FILE: &str = "chingest-broken-parts";

/// The engine's data directory, as far as durability goes: the directories
/// the engine does not sync itself ([`durable`]).
#[derive(Debug)]
pub(crate) struct DataDir {
    root: PathBuf,
    /// Each MergeTree's directory, by quoted name; emptied by DDL (a table
    /// dropped and made again has a new directory).
    tables: Mutex<HashMap<String, PathBuf>>,
    /// Per table directory (by its name, the table's uuid): held shared by
    /// each insert into the table, exclusively by each sync of its
    /// deduplication log. The engine writes an insert's deduplication
    /// record before it renames the part into the directory; a sync in
    /// between would make the record durable without the part, and a
    /// power cut then would make the replay of that insert a no-op: its
    /// rows lost.
    inserting: Mutex<HashMap<OsString, Arc<RwLock<()>>>>,
}

impl DataDir {
    /// Inserts `batch` into `table` (quoted; see [`insert_batch`]) and
    /// makes it durable: the part's name and its deduplication record.
    pub(crate) fn insert_durably(
        &self,
        conn: &Connection,
        table: &str,
        batch: RecordBatch,
        dedup_token: Option<&str>,
    ) -> Result<()> {
        let dir = self.table_dir(conn, table)?;
        let lock = self.insert_lock(&dir);
        {
            let _inserting = lock.read().unwrap();
            insert_batch(conn, table, batch, dedup_token)?;
        }
        let _syncing = lock.write().unwrap();
        durable::sync_table_dir(&dir).map_err(|source| Error::Io {
            context: format!("syncing {} (table {table})", dir.display()),
            source,
        })
    }

    /// Whether the newest insert into the table `names` names was lost in
    /// a power cut although the engine would ignore its repetition: its
    /// deduplication record is durable, its part is not. A cut between
    /// the two syncs of [`insert_durably`](Self::insert_durably) (the
    /// record first, so that a part never outlives its record) leaves
    /// that. The record names a new part (`<partition>_<b>_<b>_0`); it was
    /// lost if no active part of the table holds block `b`.
    pub(crate) fn last_insert_lost(&self, conn: &Connection, names: &TableNames) -> Result<bool> {
        let dir = self.table_dir(conn, &names.storage_table)?;
        let logs = dir.join("deduplication_logs");
        let part = durable::last_deduplicated_part(&logs).map_err(|source| Error::Io {
            context: format!("reading {}", logs.display()),
            source,
        })?;
        let Some((partition, block)) = part.as_deref().and_then(new_part_block) else {
            return Ok(false);
        };
        let held = query_rows(
            conn,
            &format!(
                "SELECT count() FROM system.parts WHERE database = {} AND table = {} AND active \
                 AND partition_id = {} AND min_block_number <= {block} \
                 AND max_block_number >= {block}",
                quote_literal(&names.database_name),
                quote_literal(&names.storage_name),
                quote_literal(partition),
            ),
        )?;
        Ok(held.first().and_then(|row| row.first()).map(String::as_str) == Some("0"))
    }

    /// The lock of the table in `dir` ([`DataDir::inserting`]).
    fn insert_lock(&self, dir: &Path) -> Arc<RwLock<()>> {
        let name = dir.file_name().unwrap_or(dir.as_os_str()).to_owned();
        Arc::clone(self.inserting.lock().unwrap().entry(name).or_default())
    }

    /// The directory of MergeTree `table` (quoted).
    fn table_dir(&self, conn: &Connection, table: &str) -> Result<PathBuf> {
        if let Some(dir) = self.tables.lock().unwrap().get(table) {
            return Ok(dir.clone());
        }
        let mut tables = HashMap::new();
        for row in query_rows(
            conn,
            "SELECT database, name, data_paths[1] FROM system.tables \
             WHERE engine LIKE '%MergeTree' AND notEmpty(data_paths)",
        )? {
            if let [database, name, path] = &row[..] {
                let quoted = format!("{}.{}", quote_ident(database), quote_ident(name));
                tables.insert(quoted, PathBuf::from(path));
            }
        }
        let dir = tables
            .get(table)
            .cloned()
            .ok_or_else(|| Error::Engine(format!("{table} has no data directory to sync")))?;
        *self.tables.lock().unwrap() = tables;
        Ok(dir)
    }

    /// Parts the engine found broken when it booted and set aside
    /// (`detached/`), that no earlier open reported: the quoted name of
    /// each one's table, and `database.table/part: reason`. Remembers them
    /// in [`BROKEN_PARTS_FILE`].
    pub(crate) fn new_broken_parts(&self, conn: &Connection) -> Result<Vec<(String, String)>> {
        let rows = query_rows(
            conn,
            "SELECT database, table, name, reason FROM system.detached_parts \
             WHERE startsWith(reason, 'broken') OR reason = 'covered-by-broken' \
             ORDER BY database, table, name",
        )?;
        let seen_file = self.root.join(BROKEN_PARTS_FILE);
        let seen = std::fs::read_to_string(&seen_file).unwrap_or_default();
        let seen: std::collections::HashSet<&str> = seen.lines().collect();
        let mut all = Vec::new();
        let mut new = Vec::new();
        for row in rows {
            let [database, table, name, reason] = &row[..] else {
                continue;
            };
            let part = format!("{database}.{table}/{name}");
            if !seen.contains(part.as_str()) {
                let quoted = format!("{}.{}", quote_ident(database), quote_ident(table));
                new.push((quoted, format!("{part}: {reason}")));
            }
            all.push(part);
        }
        if !new.is_empty() {
            durable::write(&seen_file, all.join("\n").as_bytes()).map_err(|source| Error::Io {
                context: format!("writing {}", seen_file.display()),
                source,
            })?;
        }
        Ok(new)
    }

    /// Makes DDL or an edit durable: every catalog file and table directory.
    pub(crate) fn sync_catalog(&self) -> Result<()> {
        self.tables.lock().unwrap().clear();
        let sync_table_dir = |dir: &Path| {
            let lock = self.insert_lock(dir);
            let _syncing = lock.write().unwrap();
            durable::sync_table_dir(dir)
        };
        durable::sync_catalog(&self.root, sync_table_dir).map_err(|source| Error::Io {
            context: format!("syncing the engine's catalog in {}", self.root.display()),
            source,
        })
    }
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

/// The partition and block number of a part an insert created
/// (`<partition>_<b>_<b>_0`); `None` for any other name.
fn new_part_block(part: &str) -> Option<(&str, u64)> {
    let rest = part.strip_suffix("_0")?;
    let (rest, max) = rest.rsplit_once('_')?;
    let (partition, min) = rest.rsplit_once('_')?;
    let block = min.parse().ok()?;
    (max.parse::<u64>().ok()? == block && !partition.is_empty()).then_some((partition, block))
}

/// Names under which Arrow data is registered with the engine. Registrations
/// are engine-global and a taken name cannot be registered again, so every
/// insert gets a name no other insert in this process uses.
static REGISTRATION_SEQ: AtomicU64 = AtomicU64::new(0);

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
            // Rows written through a `Distributed` table (the registries')
            // reach their shard before the statement returns, instead of
            // waiting in a local queue.
            args.push("--distributed_foreground_insert=1".to_owned());
        }
        let open = Arc::default();
        let pool = connection_pool(args, connections, &open)?;
        let disk = Arc::new(DataDir {
            root: data_dir.to_owned(),
            tables: Mutex::default(),
            inserting: Mutex::default(),
        });
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
    /// effect durable.
    pub(crate) async fn execute_all(
        &self,
        statements: impl IntoIterator<Item = String>,
    ) -> Result<()> {
        let statements: Vec<String> = statements.into_iter().collect();
        self.run_durable(move |conn| statements.iter().try_for_each(|sql| execute(conn, sql)))
            .await
    }

    /// Runs statements on the tables that hold rows (DDL, edits):
    /// `statements`, of the `kind`, which create or change the columns of
    /// `tables` (database and table names, unquoted). Here, or in the
    /// `clickhouse` storage mode on every shard (on the replicas `kind`
    /// says), after which each of `tables` is a `Distributed` table here
    /// with the shards' columns.
    pub(crate) async fn execute_on_storage(
        &self,
        statements: Vec<String>,
        kind: StatementKind,
        tables: Vec<(String, String)>,
    ) -> Result<()> {
        let Some(cluster) = &self.cluster else {
            return self.execute_all(statements).await;
        };
        for sql in &statements {
            cluster.execute_everywhere(sql, kind).await?;
        }
        self.mirror(cluster, Some(tables)).await?;
        Ok(())
    }

    /// Where the tables that hold rows are registered in Keeper, if they
    /// are replicated (the `clickhouse` storage mode with a Keeper path).
    pub(crate) fn keeper_path(&self) -> Option<&str> {
        self.cluster.as_ref()?.keeper_path()
    }

    /// In the `clickhouse` storage mode: a `Distributed` table here for
    /// every table of chingest's databases on the first shard (those other
    /// nodes made too), made again only where the shard's columns or
    /// engine changed since; every such table of the first shard. Empty in
    /// the embedded mode.
    pub(crate) async fn mirror_shards(&self) -> Result<Vec<ShardTable>> {
        let Some(cluster) = &self.cluster else {
            return Ok(Vec::new());
        };
        self.mirror(cluster, None).await
    }

    /// Makes each of `tables` a `Distributed` table over the shards', with
    /// the first shard's columns (its comment is the shards' table
    /// engine); with `None`, every MergeTree of chingest's databases on the
    /// first shard that has no such table here or whose columns changed.
    /// One query to the first shard reads every table's columns and
    /// engine; returns what it read.
    async fn mirror(
        &self,
        cluster: &Cluster,
        tables: Option<Vec<(String, String)>>,
    ) -> Result<Vec<ShardTable>> {
        let mut mirrored = self.mirrored.lock().await;
        let selected = match &tables {
            None => "c.database IN (SELECT database FROM system.tables WHERE name = '_series') \
                     AND endsWith(t.engine, 'MergeTree')"
                .to_owned(),
            Some(tables) if tables.is_empty() => return Ok(Vec::new()),
            Some(tables) => format!(
                "(c.database, c.table) IN ({})",
                tables
                    .iter()
                    .map(|(db, table)| format!("({}, {})", quote_literal(db), quote_literal(table)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let rows = cluster
            .query_rows(
                0,
                &format!(
                    "SELECT c.database, c.table, t.engine, c.name, c.type FROM system.columns AS c \
                     INNER JOIN system.tables AS t ON c.database = t.database AND c.table = t.name \
                     WHERE {selected} ORDER BY c.database, c.table, c.position"
                ),
            )
            .await?;
        let mut found: Vec<ShardTable> = Vec::new();
        for row in rows {
            let Ok([database, table, engine, name, type_name]) = <[String; 5]>::try_from(row)
            else {
                continue;
            };
            match found.last_mut() {
                Some(last) if last.database == database && last.table == table => {
                    last.columns.push((name, type_name));
                }
                _ => found.push(ShardTable {
                    database,
                    table,
                    engine,
                    columns: vec![(name, type_name)],
                }),
            }
        }
        for (database, table) in tables.iter().flatten() {
            if !found
                .iter()
                .any(|t| &t.database == database && &t.table == table)
            {
                return Err(Error::Engine(format!(
                    "{database}.{table} is missing on the first shard"
                )));
            }
        }
        let mut statements = Vec::new();
        let mut made = Vec::new();
        for shard_table in &found {
            let key = (shard_table.database.clone(), shard_table.table.clone());
            if tables.is_none() && mirrored.get(&key) == Some(shard_table) {
                continue;
            }
            made.push((key, shard_table.clone()));
            let ShardTable {
                database,
                table,
                engine,
                columns,
            } = shard_table;
            let sharding_key = if columns.iter().any(|(name, _)| name == "series_id") {
                "series_id"
            } else {
                // Registries: one row per key, on the first shard.
                "0"
            };
            let columns = columns
                .iter()
                .map(|(name, type_name)| format!("{} {type_name}", quote_ident(name)))
                .collect::<Vec<_>>()
                .join(", ");
            let db = quote_ident(database);
            statements.push(format!("CREATE DATABASE IF NOT EXISTS {db}"));
            statements.push(format!(
                "CREATE OR REPLACE TABLE {db}.{} ({columns}) \
                 ENGINE = Distributed({}, {}, {}, {sharding_key}) COMMENT {}",
                quote_ident(table),
                quote_literal(CLUSTER_NAME),
                quote_literal(database),
                quote_literal(table),
                quote_literal(engine),
            ));
        }
        if !statements.is_empty() {
            self.execute_all(statements).await?;
        }
        mirrored.extend(made);
        Ok(found)
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

/// Ends an untrusted statement: its read-only connection back to the pool
/// (or closed if the statement did not run to its end, see [`discard`]),
/// then its slot to the next statement, which so finds a connection too.
/// Called before the statement's caller is answered: a client that asks
/// again as soon as it has the answer finds the slot free.
pub(crate) fn release(conn: Pooled, slot: QuerySlot, whole: bool) {
    match whole {
        true => drop(conn),
        false => discard(conn),
    }
    drop(slot);
}

/// Closes a pooled connection instead of returning it to its pool. A
/// statement that failed or was cut off part-way can leave the output it had
/// begun in the connection, and the engine prepends that to the next
/// statement's answer there — which may be another caller's. The pool opens
/// a fresh connection when it needs one.
pub(crate) fn discard(conn: managed::Object<ConnectionManager>) {
    drop(managed::Object::take(conn));
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
            execute(conn, &format!("EXPLAIN AST {sql}"))?;
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
    fn new(pool: managed::Pool<ConnectionManager>) -> Canceller {
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

/// A pool of up to `size` connections opened with `args`, counted in
/// `open`.
fn connection_pool(
    args: Vec<String>,
    size: usize,
    open: &Arc<AtomicUsize>,
) -> Result<managed::Pool<ConnectionManager>> {
    let open = Arc::clone(open);
    managed::Pool::builder(ConnectionManager { args, open })
        .max_size(size)
        .build()
        .map_err(|e| Error::Config(format!("connection pool: {e}")))
}

fn pool_error(err: managed::PoolError<Error>) -> Error {
    match err {
        managed::PoolError::Backend(err) => err,
        managed::PoolError::Closed => Error::Closed,
        other => Error::Engine(format!("connection pool: {other}")),
    }
}

/// Fails unless the engine read the durability settings of
/// [`durable::ENGINE_CONFIG`]: without them a power cut loses parts the log
/// has already forgotten.
fn check_durability_settings(conn: &Connection) -> Result<()> {
    let names = durable::ENGINE_SETTINGS
        .iter()
        .map(|(name, _)| quote_literal(name))
        .collect::<Vec<_>>()
        .join(", ");
    let rows = query_rows(
        conn,
        &format!("SELECT name, value FROM system.merge_tree_settings WHERE name IN ({names})"),
    )?;
    for (name, want) in durable::ENGINE_SETTINGS {
        let have = rows
            .iter()
            .find(|row| row[0] == name)
            .map(|row| row[1].as_str());
        if have != Some(want) {
            return Err(Error::Engine(format!(
                "the engine did not take its durability settings: {name} is {have:?}, not {want}"
            )));
        }
    }
    Ok(())
}

/// Runs a statement on `conn`, discarding its output.
pub(crate) fn execute(conn: &Connection, sql: &str) -> Result<()> {
    conn.query(sql, OutputFormat::Null)?;
    Ok(())
}

/// Runs a query on `conn` and returns its TabSeparated output as lines of
/// tab-separated fields (for small catalog queries).
pub(crate) fn query_rows(conn: &Connection, sql: &str) -> Result<Vec<Vec<String>>> {
    let result = conn.query(sql, OutputFormat::TabSeparatedRaw)?;
    let text = String::from_utf8_lossy(result.data_ref());
    Ok(text
        .lines()
        .map(|line| line.split('\t').map(str::to_owned).collect())
        .collect())
}

/// Inserts `batch` into `table` (already quoted) with one `INSERT … SELECT
/// FROM ArrowStream` statement, matching columns by name. Returns the rows
/// inserted.
///
/// With a `dedup_token`, a MergeTree with a deduplication window stores the
/// rows once however often the same insert is repeated with that token
/// (replay after a crash). The batch is registered as one Arrow array
/// (schema + array), not as a stream: the engine reads it in one go.
fn insert_batch(
    conn: &Connection,
    table: &str,
    batch: RecordBatch,
    dedup_token: Option<&str>,
) -> Result<u64> {
    let rows = batch.num_rows();
    if rows == 0 {
        return Ok(0);
    }
    let columns = column_list(&batch.schema());
    let settings = dedup_token.map_or(String::new(), |token| {
        format!(" SETTINGS {}", dedup_setting(token))
    });
    with_registered(conn, batch, |name| {
        let sql = format!(
            "INSERT INTO {table} ({columns}){settings} SELECT * FROM ArrowStream({})",
            quote_literal(name)
        );
        execute(conn, &sql)
    })?;
    Ok(rows as u64)
}

/// Registers `batch` with the engine as one Arrow array under a
/// process-unique name, runs `read(name)` — one statement reading
/// `ArrowStream(name)` — and unregisters it whether that failed or not (a
/// registration is consumed by the first read, failed or not).
fn with_registered<T>(
    conn: &Connection,
    batch: RecordBatch,
    read: impl FnOnce(&str) -> Result<T>,
) -> Result<T> {
    let name = format!(
        "chingest_{}_{}",
        std::process::id(),
        REGISTRATION_SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let (mut ffi_array, mut ffi_schema) =
        to_ffi(&StructArray::from(batch).into()).map_err(|e| Error::Engine(e.to_string()))?;
    // SAFETY: both structs outlive the registration: it is dropped below,
    // before this frame (and the structs, which release the data) ends, and
    // the engine does not take ownership of registered data.
    #[allow(unsafe_code)]
    let (schema, array) = unsafe {
        (
            ArrowSchema::from_raw(&mut ffi_schema),
            ArrowArray::from_raw(&mut ffi_array),
        )
    };
    conn.register_arrow_array(&name, &schema, &array)?;
    let result = read(&name);
    let unregistered = conn.unregister_arrow_table(&name);
    let result = result?;
    unregistered?;
    Ok(result)
}

/// Creates `table` (quoted) in a Memory database with `batch`'s columns
/// and inserts `batch` into it (a last-value snapshot).
pub(crate) fn create_memory_table(
    conn: &Connection,
    table: &str,
    batch: RecordBatch,
) -> Result<()> {
    execute(
        conn,
        &format!(
            "CREATE TABLE {table} ({}) ENGINE = Memory",
            column_defs(&batch)?
        ),
    )?;
    with_registered(conn, batch, |stream| {
        let insert = format!(
            "INSERT INTO {table} SELECT * FROM ArrowStream({})",
            quote_literal(stream)
        );
        execute(conn, &insert)
    })
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

/// Runs a query on `conn` and returns its whole output in `format`.
pub(crate) fn query(conn: &Connection, sql: &str, format: OutputFormat) -> Result<Vec<u8>> {
    Ok(conn.query(sql, format)?.data_ref().to_vec())
}

/// Runs a query on `conn` and returns its result as Arrow batches.
pub(crate) fn query_arrow(conn: &Connection, sql: &str) -> Result<Vec<RecordBatch>> {
    conn.query_arrow(sql)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::Engine(e.to_string()))
}

/// The column definitions of a table holding `batch` (a last-value
/// snapshot: ids, times, tags and field values).
fn column_defs(batch: &RecordBatch) -> Result<String> {
    let mut defs = Vec::new();
    for field in batch.schema().fields() {
        let base = match field.data_type() {
            DataType::UInt64 => "UInt64",
            DataType::Int64 => "Int64",
            DataType::Float64 => "Float64",
            DataType::Boolean => "Bool",
            DataType::Utf8 => "String",
            DataType::Timestamp(TimeUnit::Nanosecond, _) => "DateTime64(9, 'UTC')",
            other => return Err(Error::Engine(format!("a snapshot column of type {other}"))),
        };
        let ty = match field.is_nullable() {
            true => format!("Nullable({base})"),
            false => base.to_owned(),
        };
        defs.push(format!("{} {ty}", quote_ident(field.name())));
    }
    Ok(defs.join(", "))
}

/// Every output format the engine can produce, by the name ClickHouse uses.
pub(crate) fn output_format(name: &str) -> Result<OutputFormat> {
    use OutputFormat::*;
    const ALL: &[OutputFormat] = &[
        TabSeparated,
        TabSeparatedRaw,
        TabSeparatedWithNames,
        TabSeparatedWithNamesAndTypes,
        TabSeparatedRawWithNames,
        TabSeparatedRawWithNamesAndTypes,
        Template,
        CSV,
        CSVWithNames,
        CSVWithNamesAndTypes,
        CustomSeparated,
        CustomSeparatedWithNames,
        CustomSeparatedWithNamesAndTypes,
        Values,
        JSON,
        JSONStrings,
        JSONColumns,
        JSONColumnsWithMetadata,
        JSONCompact,
        JSONCompactStrings,
        JSONCompactColumns,
        JSONEachRow,
        PrettyJSONEachRow,
        JSONEachRowWithProgress,
        JSONStringsEachRow,
        JSONStringsEachRowWithProgress,
        JSONCompactEachRow,
        JSONCompactEachRowWithNames,
        JSONCompactEachRowWithNamesAndTypes,
        JSONCompactStringsEachRow,
        JSONCompactStringsEachRowWithNames,
        JSONCompactStringsEachRowWithNamesAndTypes,
        JSONObjectEachRow,
        BSONEachRow,
        TSKV,
        Pretty,
        PrettyNoEscapes,
        PrettyMonoBlock,
        PrettyNoEscapesMonoBlock,
        PrettyCompact,
        PrettyCompactNoEscapes,
        PrettyCompactMonoBlock,
        PrettyCompactNoEscapesMonoBlock,
        PrettySpace,
        PrettySpaceNoEscapes,
        PrettySpaceMonoBlock,
        PrettySpaceNoEscapesMonoBlock,
        Prometheus,
        Protobuf,
        ProtobufSingle,
        ProtobufList,
        Avro,
        Parquet,
        Arrow,
        ArrowStream,
        ORC,
        Npy,
        RowBinary,
        RowBinaryWithNames,
        RowBinaryWithNamesAndTypes,
        Native,
        Null,
        XML,
        CapnProto,
        LineAsString,
        RawBLOB,
        MsgPack,
        Markdown,
        Vertical,
    ];
    // The engine's short names: TSV, TSVWithNames, TSVRaw, …
    let full = match name.get(..3) {
        Some(prefix) if prefix.eq_ignore_ascii_case("TSV") => format!("TabSeparated{}", &name[3..]),
        _ => name.to_owned(),
    };
    ALL.iter()
        .copied()
        .find(|format| format.as_str().eq_ignore_ascii_case(&full))
        .ok_or_else(|| Error::UnknownFormat(name.to_owned()))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_are_found_by_any_case_and_the_engine_s_short_names() {
        let name = |format: &str| output_format(format).unwrap().as_str();
        assert_eq!(name("json"), "JSON");
        assert_eq!(name("TSVWithNames"), "TabSeparatedWithNames");
        assert_eq!(name("tsv"), "TabSeparated");
        assert!(matches!(
            output_format("Nope"),
            Err(Error::UnknownFormat(_))
        ));
    }

    #[test]
    fn only_the_names_of_parts_inserts_create_give_their_block() {
        assert_eq!(new_part_block("197001_135_135_0"), Some(("197001", 135)));
        assert_eq!(new_part_block("a_b_7_7_0"), Some(("a_b", 7)));
        for other in [
            "197001_1_126_11_123",
            "197001_1_8_1",
            "197001_3_4_0",
            "_5_5_0",
            "x",
        ] {
            assert_eq!(new_part_block(other), None, "{other}");
        }
    }
}
