//! Configuration of an [`Ingestor`](crate::Ingestor): where data lives, how
//! many engine connections to open, the write-ahead log, and when logged rows
//! are flushed into the engine.

use std::path::PathBuf;
use std::time::Duration;

/// A configuration that cannot be used, and why (the library's
/// [`Error::Config`](crate::Error::Config)).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid configuration: {0}")]
pub struct InvalidConfig(pub String);

/// Everything an [`Ingestor`](crate::Ingestor) needs to open. Start from
/// [`IngestConfig::new`] and change what you need.
#[derive(Debug, Clone, PartialEq)]
pub struct IngestConfig {
    /// The engine's data directory (created if missing). One per process.
    pub data_dir: PathBuf,
    /// Engine connections in the pool: statements on one connection run one
    /// at a time, separate connections in parallel. Default: one per core.
    pub connections: usize,
    /// When a table's pending rows are flushed.
    pub flush: FlushPolicy,
    /// The write-ahead log.
    pub wal: WalConfig,
    /// Upper bound on bytes of rows held by the batchers, waiting to be
    /// flushed. A write that would exceed it waits up to `overload_wait`,
    /// then fails with [`Error::Overloaded`](crate::Error::Overloaded).
    pub max_buffered_bytes: usize,
    /// How long a write waits for room under `max_buffered_bytes`.
    pub overload_wait: Duration,
    /// Retention policy whose measurements get a view named after the
    /// measurement, with one column per tag and per field (`db.cpu` shows
    /// `db.\`cpu.autogen\`` with its tags). `None`: no views.
    pub view_retention_policy: Option<String>,
    /// Limits on queries from untrusted callers.
    pub query: QueryLimits,
    /// Series and tag values each database may hold.
    pub cardinality: CardinalityLimits,
    /// What tables keep when the same series and time is written again,
    /// for databases and measurements without a policy of their own
    /// ([`Ingestor::set_duplicate_policy`](crate::Ingestor::set_duplicate_policy)).
    pub duplicate_policy: DuplicatePolicy,
    /// Which measurements keep their newest values in memory
    /// ([`Ingestor::last_values`](crate::Ingestor::last_values)), within
    /// what memory. Off in the `clickhouse` storage mode, whatever this
    /// says: other nodes' writes never reach this node's memory.
    pub last_values: LastValueConfig,
    /// Where flushed rows are stored: the embedded engine, or the shards
    /// of a ClickHouse cluster.
    pub storage: StorageMode,
    /// The databases kept at coarser resolutions as they age, and how often
    /// their rollups are brought up to date.
    pub downsampling: DownsamplingConfig,
    /// Whether and how continuous queries run
    /// ([`Ingestor::run_continuous_queries`](crate::Ingestor::run_continuous_queries)).
    pub continuous_queries: ContinuousQueryConfig,
}

/// Where flushed rows are stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum StorageMode {
    /// The embedded engine's MergeTrees, in `data_dir`.
    #[default]
    Embedded,
    /// The MergeTrees of a ClickHouse cluster's shards. The embedded
    /// engine still runs: it holds `Distributed` tables over the shards,
    /// which every read goes through, and checks untrusted SQL.
    ClickHouse(ClusterConfig),
}

/// The shards of a ClickHouse cluster, as [`StorageMode::ClickHouse`]
/// reaches them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    /// The shards, in order (a series' shard is its id modulo their
    /// number: the list is part of the data's layout). Each is a list of
    /// its replicas' HTTP interfaces, `http://host:8123` or `https://…`;
    /// reads reach a replica over the native protocol, on port 9000
    /// (9440 over https) of the same host unless the URL says
    /// `?native_port=N`.
    pub shards: Vec<Vec<String>>,
    /// The user chingest signs in as, on every shard.
    pub user: String,
    /// Its password.
    pub password: String,
    /// A PEM file of certificates to trust for `https` shards, besides
    /// the system's roots.
    pub ca_file: Option<PathBuf>,
    /// How long one request to a shard may take.
    pub timeout: Duration,
    /// Where the shards' Keeper registers replicated tables: set, chingest
    /// creates `Replicated*MergeTree`s at `<keeper_path>/{shard}/{database}/{table}`,
    /// each replica named `{replica}` (the macros of every replicated
    /// ClickHouse server); unset, plain `*MergeTree`s.
    pub keeper_path: Option<String>,
    /// How often this node reads back from the shards what other nodes
    /// created since (databases, tables, fields, policies, series and
    /// their tag keys): they are readable here within this delay, plus
    /// one refresh's few queries.
    pub refresh: Duration,
}

impl Default for ClusterConfig {
    /// No shards, ClickHouse's `default` user, 60 s per request, other
    /// nodes' tables and series learnt every 5 s.
    fn default() -> Self {
        ClusterConfig {
            shards: Vec::new(),
            user: "default".to_owned(),
            password: String::new(),
            ca_file: None,
            timeout: Duration::from_secs(60),
            keeper_path: None,
            refresh: Duration::from_secs(5),
        }
    }
}

/// What a fact table keeps when a point (series and time) is written
/// again. Chosen when the table is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DuplicatePolicy {
    /// Every row is kept: the fastest to write, and what a table made by
    /// `INSERT` alone holds.
    #[default]
    Append,
    /// One row per point: each field keeps its newest written value, and
    /// a write that lacks a field leaves its older value (InfluxDB's
    /// behaviour). The table is a `CoalescingMergeTree`; queries see the
    /// merged points (every connection reads with `final = 1`).
    Last,
}

impl DuplicatePolicy {
    /// The policy's name: `append` or `last`.
    pub fn as_str(self) -> &'static str {
        match self {
            DuplicatePolicy::Append => "append",
            DuplicatePolicy::Last => "last",
        }
    }

    /// The table engine that keeps what the policy says.
    pub(crate) fn engine(self) -> &'static str {
        match self {
            DuplicatePolicy::Append => "MergeTree",
            DuplicatePolicy::Last => "CoalescingMergeTree",
        }
    }

    /// The policy a table engine keeps, if it is one of chingest's,
    /// replicated or not.
    pub(crate) fn of_engine(engine: &str) -> Option<DuplicatePolicy> {
        match engine.strip_prefix("Replicated").unwrap_or(engine) {
            "MergeTree" => Some(DuplicatePolicy::Append),
            "CoalescingMergeTree" => Some(DuplicatePolicy::Last),
            _ => None,
        }
    }
}

impl std::fmt::Display for DuplicatePolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for DuplicatePolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "append" => Ok(DuplicatePolicy::Append),
            "last" => Ok(DuplicatePolicy::Last),
            _ => Err(format!("unknown duplicate policy {s:?} (append or last)")),
        }
    }
}

/// How many series a database and how many values a tag key (per
/// measurement) may hold; `0` means no limit. A line that would go past
/// one is rejected with the reason, the rest of its write stored (an Arrow
/// batch is refused whole). Series and values stay counted once written,
/// until the series are dropped; a write that fails after being admitted
/// may leave its new tag values counted until the next open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CardinalityLimits {
    /// Series per database (InfluxDB's `max-series-per-database`).
    pub max_series: usize,
    /// Distinct values of one tag key in one measurement (InfluxDB's
    /// `max-values-per-tag`), for series written as line protocol (HTTP
    /// `/write`, gRPC `Write`, typed points), as InfluxDB applies it;
    /// remote write, OTLP and Arrow batches name series by pods and
    /// instances by design and meet only the series limit. Values are
    /// tracked (8 bytes each, hashed) only while this is set.
    pub max_values_per_tag: usize,
}

impl Default for CardinalityLimits {
    /// InfluxDB's defaults: 1 M series per database, 100 k values per tag.
    fn default() -> Self {
        CardinalityLimits {
            max_series: 1_000_000,
            max_values_per_tag: 100_000,
        }
    }
}

/// Limits the engine enforces on every statement of
/// [`Ingestor::query_untrusted`](crate::Ingestor::query_untrusted) (the
/// server's `/sql`). They are settings of read-only connections, where a
/// statement cannot change settings, so a caller cannot raise them. A
/// statement past one fails with [`Error::QueryLimit`](crate::Error::QueryLimit); `0` means no limit
/// (the engine's convention). The last three say how many such statements
/// (and [`query_translated`](crate::Ingestor::query_translated)'s) run at
/// once and how many wait, and how long, for a slot.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize),
    serde(default, deny_unknown_fields)
)]
pub struct QueryLimits {
    /// Wall-clock time of a statement (`max_execution_time`); in a file,
    /// `max_execution_time_ms`.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "max_execution_time_ms", with = "millis")
    )]
    pub max_execution_time: Duration,
    /// Memory of a statement (`max_memory_usage`).
    pub max_memory_bytes: u64,
    /// Rows read from tables (`max_rows_to_read`).
    pub max_rows_to_read: u64,
    /// Bytes read from tables, uncompressed (`max_bytes_to_read`).
    pub max_bytes_to_read: u64,
    /// Rows in the result (`max_result_rows`).
    pub max_result_rows: u64,
    /// Bytes in the result, uncompressed (`max_result_bytes`).
    pub max_result_bytes: u64,
    /// Threads one statement may use (`max_threads`): 1 leaves the other
    /// cores to ingestion.
    pub max_threads: u64,
    /// Threads that decode and evaluate a read's series in parallel
    /// (PromQL's range functions and aggregations, many series' recent
    /// samples), one pool for the process (`parallel`); 0: one per core.
    /// Set by the first ingestor opened in the process.
    pub evaluation_threads: usize,
    /// Statements running at once; more wait in a queue for a slot.
    pub max_concurrent: usize,
    /// Statements that may wait for a slot, in arrival order, while
    /// `max_concurrent` run: enough for a dashboard's panels, which ask at
    /// once. One more fails at once with
    /// [`Error::TooManyQueries`](crate::Error::TooManyQueries); `0`
    /// refuses every statement that finds no free slot.
    pub max_queued: usize,
    /// How long a statement waits in the queue before it fails with
    /// [`Error::QueryQueueTimeout`](crate::Error::QueryQueueTimeout); in
    /// a file, `queue_timeout_ms`.
    #[cfg_attr(feature = "serde", serde(rename = "queue_timeout_ms", with = "millis"))]
    pub queue_timeout: Duration,
    /// Points (or rows of subqueries' answers) one query may hold in memory
    /// where it is computed outside the engine (InfluxQL's `top`, `mode`,
    /// `integral`… and subqueries); more is an error asking to narrow it.
    pub max_points_in_memory: usize,
}

impl Default for QueryLimits {
    fn default() -> Self {
        QueryLimits {
            max_execution_time: Duration::from_secs(30),
            max_memory_bytes: 1 << 30,
            max_rows_to_read: 0,
            max_bytes_to_read: 0,
            max_result_rows: 0,
            max_result_bytes: 1 << 30,
            max_threads: 1,
            evaluation_threads: 0,
            max_concurrent: 4,
            max_queued: 64,
            queue_timeout: Duration::from_secs(10),
            max_points_in_memory: 2_000_000,
        }
    }
}

impl QueryLimits {
    /// The limits as engine settings, `--name=value` connection arguments.
    pub(crate) fn connection_args(&self) -> Vec<String> {
        let seconds = self.max_execution_time.as_secs_f64();
        [
            ("max_execution_time", seconds.to_string()),
            ("timeout_overflow_mode", "throw".to_owned()),
            ("max_memory_usage", self.max_memory_bytes.to_string()),
            ("max_rows_to_read", self.max_rows_to_read.to_string()),
            ("max_bytes_to_read", self.max_bytes_to_read.to_string()),
            ("read_overflow_mode", "throw".to_owned()),
            ("max_result_rows", self.max_result_rows.to_string()),
            ("max_result_bytes", self.max_result_bytes.to_string()),
            ("result_overflow_mode", "throw".to_owned()),
            ("max_threads", self.max_threads.to_string()),
            // Below ingestion on a busy machine: a query's threads are
            // niced (lowering priority needs no privilege).
            ("os_thread_priority", "10".to_owned()),
            // A lookup by tag through a measurement's view: the series the
            // tag filter matched also prune the fact table's granules by
            // its primary key (docs/benchmarks.md §9).
            ("enable_join_runtime_filters_index_analysis", "1".to_owned()),
        ]
        .into_iter()
        .map(|(name, value)| format!("--{name}={value}"))
        .collect()
    }
}

/// The write-ahead log: where it lives, how large it may grow, how often
/// its checkpoint advances.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize),
    serde(default, deny_unknown_fields)
)]
pub struct WalConfig {
    /// Its directory. Default: `wal` in the data directory (in a file, also
    /// `""`).
    #[cfg_attr(feature = "serde", serde(deserialize_with = "empty_is_none"))]
    pub dir: Option<PathBuf>,
    /// A segment file is closed and a new one started past this size.
    pub segment_bytes: u64,
    /// Bytes the log may hold. Past it (when inserts into the engine fall
    /// behind or fail), writes wait up to `overload_wait`, then fail with
    /// [`Error::LogFull`](crate::Error::LogFull).
    pub max_bytes: u64,
    /// How often the checkpoint advances and segments whose rows are all
    /// in the engine are deleted; in a file, `checkpoint_interval_ms`.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "checkpoint_interval_ms", with = "millis")
    )]
    pub checkpoint_interval: Duration,
}

impl Default for WalConfig {
    fn default() -> Self {
        WalConfig {
            dir: None,
            segment_bytes: 64 << 20,
            max_bytes: 1 << 30,
            checkpoint_interval: Duration::from_secs(1),
        }
    }
}

/// When a table's batcher flushes its logged rows into the engine. A table
/// flushes one batch at a time: rows that arrive while a flush runs are
/// gathered into the next one, so the batch size grows with the load.
#[derive(Debug, Clone, PartialEq)]
pub struct FlushPolicy {
    /// Flush as soon as this many rows are pending.
    pub max_rows: usize,
    /// Flush as soon as this many bytes are pending.
    pub max_bytes: usize,
    /// Flush once the oldest pending row is this old: the longest a logged
    /// row waits before it is queryable (plus the insert's own time).
    pub max_age: Duration,
    /// Flushes of one table that may run at once, each on its own engine
    /// connection. 1 (the default) keeps a table's inserts one after
    /// another; on 2 cores, 2 measured 5–15% slower over HTTP (the inserts
    /// compete with parsing for the cores). More may pay on more cores.
    pub concurrency: usize,
}

impl Default for FlushPolicy {
    fn default() -> Self {
        FlushPolicy {
            max_rows: 200_000,
            max_bytes: 64 << 20,
            max_age: Duration::from_secs(1),
            concurrency: 1,
        }
    }
}

impl IngestConfig {
    /// Defaults for a data directory.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        IngestConfig {
            data_dir: data_dir.into(),
            connections: std::thread::available_parallelism().map_or(2, |n| n.get()),
            flush: FlushPolicy::default(),
            wal: WalConfig::default(),
            max_buffered_bytes: 256 << 20,
            overload_wait: Duration::from_secs(1),
            view_retention_policy: Some("autogen".to_owned()),
            query: QueryLimits::default(),
            cardinality: CardinalityLimits::default(),
            duplicate_policy: DuplicatePolicy::default(),
            last_values: LastValueConfig::default(),
            storage: StorageMode::Embedded,
            downsampling: DownsamplingConfig::default(),
            continuous_queries: ContinuousQueryConfig::default(),
        }
    }

    /// Checks the values against each other.
    pub fn validate(&self) -> Result<(), InvalidConfig> {
        let fail = |msg: &str| Err(InvalidConfig(msg.to_owned()));
        if self.connections == 0 {
            return fail("connections must be at least 1");
        }
        if self.flush.max_rows == 0 || self.flush.max_bytes == 0 {
            return fail("flush.max_rows and flush.max_bytes must be positive");
        }
        if self.wal.segment_bytes < 4096 || self.wal.max_bytes < self.wal.segment_bytes {
            return fail("wal.segment_bytes must be at least 4096 and at most wal.max_bytes");
        }
        if self.query.max_concurrent == 0 || self.query.max_threads == 0 {
            return fail("query.max_concurrent and query.max_threads must be at least 1");
        }
        if let StorageMode::ClickHouse(cluster) = &self.storage {
            if cluster.shards.is_empty() || cluster.shards.iter().any(Vec::is_empty) {
                return fail("the clickhouse storage mode needs shards, each with a replica");
            }
            if cluster.refresh.is_zero() {
                return fail("storage.refresh must be positive");
            }
            if let Some(path) = &cluster.keeper_path {
                if !path.starts_with('/') || path.ends_with('/') || path.contains('{') {
                    return fail(
                        "storage.keeper_path must start with '/', not end with one, \
                         and hold no macros (chingest adds {shard}/{database}/{table})",
                    );
                }
            }
        }
        if self.query.max_queued > 0 && self.query.queue_timeout.is_zero() {
            return fail("query.queue_timeout must be positive when query.max_queued is");
        }
        if self.wal.checkpoint_interval.is_zero() {
            return fail("wal.checkpoint_interval must be positive");
        }
        let levelled = |levels: &std::collections::BTreeMap<String, Option<Downsampling>>| {
            levels.values().any(Option::is_some)
        };
        if !self.downsampling.databases.is_empty()
            || self.downsampling.measurements.values().any(levelled)
        {
            if self.downsampling.period.is_zero() {
                return fail("downsampling.period must be positive");
            }
            if let StorageMode::ClickHouse(cluster) = &self.storage {
                // A pass finds new rows by block number: a replicated
                // table's blocks may become visible out of their order.
                if cluster.keeper_path.is_some() {
                    return fail(
                        "downsampling is not available over replicated shards (storage.keeper_path)",
                    );
                }
                // Every node learns a moved cut before rows go.
                if self.downsampling.removal_delay < self.downsampling.period.saturating_mul(3) {
                    return fail("downsampling.removal_delay must be at least 3 periods");
                }
            }
            // A pass finds new rows by block number, which assumes one
            // table's inserts commit in the order they were numbered.
            if self.flush.concurrency != 1 {
                return fail("downsampling needs flush.concurrency = 1");
            }
        }
        if self.max_buffered_bytes < self.flush.max_bytes {
            return fail("max_buffered_bytes must be at least flush.max_bytes");
        }
        if self.continuous_queries.run_interval.is_zero() {
            return fail("continuous_queries.run_interval must be positive");
        }
        Ok(())
    }
}

/// Which measurements the last-value cache keeps, and how much memory it
/// may use.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize),
    serde(default, deny_unknown_fields)
)]
pub struct LastValueConfig {
    /// Patterns of the measurements cached: `*` (every measurement),
    /// `db.*` (every measurement of a database), `db.measurement`, or a
    /// bare `measurement` (in every database). Empty: the cache is off.
    pub measurements: Vec<String>,
    /// A hard cap on the cache's memory, over all measurements, in bytes
    /// (an estimate: tags and their index, values and per-series
    /// bookkeeping), for machines too small for their series limit. A
    /// measurement whose growth would pass it is evicted whole (its reads
    /// go to the engine). `0` (the default): no cap besides the
    /// cardinality limits — the index holds every series a database may
    /// keep ([`CardinalityLimits::max_series`]), never evicted.
    pub max_bytes: usize,
    /// How far back each series' samples of numeric fields are kept in
    /// memory, from now, for reads of recent times (a dashboard's panels)
    /// without an engine statement. Zero: none are kept.
    #[cfg_attr(feature = "serde", serde(rename = "recent_span_ms", with = "millis"))]
    pub recent_span: Duration,
    /// Upper bound on the memory of those samples, over all measurements,
    /// in bytes (compressed: about 2 a scraped sample, up to 9 for floats
    /// that are no decimals). A measurement whose samples would pass it
    /// keeps a shorter span.
    pub recent_max_bytes: usize,
    /// Upper bound on the chunk cache: samples older than the recent
    /// window, read from the engine by 2 h blocks and kept compressed for
    /// the next read of that range (the least recently used dropped
    /// first). Zero: none are kept.
    pub chunk_cache_bytes: usize,
}

impl Default for LastValueConfig {
    /// Every measurement, bounded by the series limit (a series of six
    /// tags takes about 300 bytes: `crates/chingest/tests/index.rs`);
    /// recent samples of the last
    /// 26 hours — Grafana's "last 24 hours" with its `rate` windows, or a
    /// day ending an hour or two back — within 512 MiB (about 270 M
    /// scraped samples: 43,000 series scraped every 15 s).
    fn default() -> Self {
        LastValueConfig {
            measurements: vec!["*".to_owned()],
            max_bytes: 0,
            recent_span: Duration::from_secs(26 * 3600),
            recent_max_bytes: 512 << 20,
            chunk_cache_bytes: 512 << 20,
        }
    }
}

impl LastValueConfig {
    /// Whether `measurement` of `db` is cached.
    pub fn covers(&self, db: &str, measurement: &str) -> bool {
        self.measurements.iter().any(|pattern| {
            pattern == "*"
                || pattern == measurement
                || pattern
                    .strip_prefix(db)
                    .and_then(|rest| rest.strip_prefix('.'))
                    .is_some_and(|rest| rest == "*" || rest == measurement)
        })
    }
}

/// A duration written in a file as whole milliseconds.
#[cfg(feature = "serde")]
mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer};

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Duration, D::Error> {
        u64::deserialize(deserializer).map(Duration::from_millis)
    }
}

/// `[downsampling]`'s levels in a file, each parsed as it is read; a bad one
/// is an error naming its key (`downsampling.databases.telegraf: …`).
#[cfg(feature = "serde")]
mod levels {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer};

    use crate::config::{Downsampling, InvalidConfig};

    /// Levels by name, as written (`telegraf = ["30d:5m", "180d:1h"]`).
    type Written = BTreeMap<String, Vec<String>>;

    /// `[downsampling.databases]`: each database's levels.
    pub(super) fn databases<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<BTreeMap<String, Downsampling>, D::Error> {
        let written = Written::deserialize(deserializer)?;
        parse_each(written, "downsampling.databases", Downsampling::parse)
    }

    /// Each database's measurements with levels of their own, or none.
    type Measurements = BTreeMap<String, BTreeMap<String, Option<Downsampling>>>;

    /// `[downsampling.measurements.<database>]`: each measurement's levels,
    /// `[]` keeping it whole.
    pub(super) fn measurements<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Measurements, D::Error> {
        let whole_or_parsed = |levels: &[String]| match levels.is_empty() {
            true => Ok(None),
            false => Downsampling::parse(levels).map(Some),
        };
        BTreeMap::<String, Written>::deserialize(deserializer)?
            .into_iter()
            .map(|(database, measurements)| {
                let key = format!("downsampling.measurements.{database}");
                Ok((database, parse_each(measurements, &key, whole_or_parsed)?))
            })
            .collect()
    }

    fn parse_each<T, E: serde::de::Error>(
        written: Written,
        key: &str,
        parse: impl Fn(&[String]) -> Result<T, InvalidConfig>,
    ) -> Result<BTreeMap<String, T>, E> {
        written
            .into_iter()
            .map(|(name, levels)| match parse(&levels) {
                Ok(parsed) => Ok((name, parsed)),
                Err(e) => Err(E::custom(format!("{key}.{name}: {e}"))),
            })
            .collect()
    }
}

/// A path where `""` means none (the default).
#[cfg(feature = "serde")]
fn empty_is_none<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<PathBuf>, D::Error> {
    let path = <PathBuf as serde::Deserialize>::deserialize(deserializer)?;
    Ok((!path.as_os_str().is_empty()).then_some(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_name_every_measurement_a_database_or_one_measurement() {
        let config = |patterns: &[&str]| LastValueConfig {
            measurements: patterns.iter().map(|p| p.to_string()).collect(),
            max_bytes: 1,
            ..LastValueConfig::default()
        };
        assert!(config(&["*"]).covers("db", "cpu"));
        assert!(config(&["db.*"]).covers("db", "cpu"));
        assert!(!config(&["db.*"]).covers("db2", "cpu"));
        assert!(config(&["db.cpu"]).covers("db", "cpu"));
        assert!(!config(&["db.cpu"]).covers("db", "mem"));
        assert!(config(&["cpu"]).covers("any", "cpu"));
        assert!(!config(&["dbx.cpu"]).covers("db", "x.cpu"));
        assert!(!config(&[]).covers("db", "cpu"));
    }

    #[test]
    fn a_keeper_path_is_absolute_and_free_of_macros() {
        let config = |path: &str| {
            let mut config = IngestConfig::new("/tmp/x");
            config.storage = StorageMode::ClickHouse(ClusterConfig {
                shards: vec![vec!["http://a:8123".to_owned()]],
                keeper_path: Some(path.to_owned()),
                ..ClusterConfig::default()
            });
            config.validate()
        };
        assert!(config("/clickhouse/tables/chingest").is_ok());
        for bad in ["clickhouse/tables", "/clickhouse/", "/t/{shard}", ""] {
            assert!(config(bad).is_err(), "{bad:?}");
        }
    }
}

/// Whether continuous queries run here, how often they are checked, and
/// how far back a restart catches up (docs/influxql.md).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize),
    serde(default, deny_unknown_fields)
)]
pub struct ContinuousQueryConfig {
    /// Whether this process runs them (they are stored, listed and
    /// dropped either way, as InfluxDB's `[continuous_queries] enabled`).
    pub enabled: bool,
    /// How often the schedule is checked: a period runs at most this long
    /// after its boundary (InfluxDB's `run-interval`); in a file,
    /// `run_interval_ms`.
    #[cfg_attr(feature = "serde", serde(rename = "run_interval_ms", with = "millis"))]
    pub run_interval: Duration,
    /// Most periods of one query run at once to catch up after the
    /// process was down (or fell behind), the newest among them: older
    /// ones are skipped, logged and counted. 0 or 1: only the newest, the
    /// query goes on from now as InfluxDB's do.
    pub max_catch_up_periods: u64,
}

impl Default for ContinuousQueryConfig {
    /// On, checked every second, up to 1,000 missed periods caught up.
    fn default() -> Self {
        ContinuousQueryConfig {
            enabled: true,
            run_interval: Duration::from_secs(1),
            max_catch_up_periods: 1_000,
        }
    }
}

/// Which databases are downsampled ([`Downsampling`]), and how often their
/// rollups are brought up to date. In a file, levels are written as
/// [`Downsampling::parse`] reads them and parsed as the file is read: a bad
/// one is an error naming its key (`downsampling.databases.telegraf: …`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize),
    serde(default, deny_unknown_fields)
)]
pub struct DownsamplingConfig {
    /// Each downsampled database's levels (`telegraf = ["30d:5m"]`).
    #[cfg_attr(feature = "serde", serde(deserialize_with = "levels::databases"))]
    pub databases: std::collections::BTreeMap<String, Downsampling>,
    /// Per database, measurements with levels of their own, whatever the
    /// database's are (`None`: kept whole, in a file `[]`; also in a
    /// database that is not downsampled).
    #[cfg_attr(feature = "serde", serde(deserialize_with = "levels::measurements"))]
    pub measurements: std::collections::BTreeMap<
        String,
        std::collections::BTreeMap<String, Option<Downsampling>>,
    >,
    /// How often the rollups catch up with what was written and edited
    /// (and, in the `clickhouse` storage mode, how often each node learns
    /// the shards' rollups); in a file, `period_ms`.
    #[cfg_attr(feature = "serde", serde(rename = "period_ms", with = "millis"))]
    pub period: Duration,
    /// In the `clickhouse` storage mode: how long after a cut moves the
    /// rows (or buckets) before it are removed, so that every node has
    /// learnt it; at least 3 periods. In a file, `removal_delay_ms`.
    #[cfg_attr(feature = "serde", serde(rename = "removal_delay_ms", with = "millis"))]
    pub removal_delay: Duration,
}

impl Default for DownsamplingConfig {
    fn default() -> Self {
        DownsamplingConfig {
            databases: std::collections::BTreeMap::new(),
            measurements: std::collections::BTreeMap::new(),
            period: Duration::from_secs(10),
            removal_delay: Duration::from_secs(600),
        }
    }
}

/// How a database's older data is kept at coarser resolutions: after
/// `levels[0].after`, one row per `levels[0].interval` for each series, and
/// so on (`["30d:5m", "180d:1h"]`). Built by [`Downsampling::parse`], which
/// checks the levels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Downsampling {
    levels: Vec<DownsamplingLevel>,
}

/// One level of a [`Downsampling`]: data older than `after` is kept as one
/// row per `interval`, keeping `keeps` of each bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DownsamplingLevel {
    /// The age from which this level holds the data.
    pub after: Duration,
    /// The width of its buckets.
    pub interval: Duration,
    /// What it keeps of each series' bucket.
    pub keeps: Keeps,
}

/// What a downsampling level keeps of each series' bucket
/// (docs/downsampling.md, "What a bucket keeps").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Keeps {
    /// Its count, sum, min, max, and first and last values with their
    /// times: InfluxQL's `mean`, `sum`, `count`, `min`, `max`, `first` and
    /// `last` stay exact (`<age>:<interval>`).
    #[default]
    Aggregates,
    /// Its last value with its time, and its count: what PromQL's `rate`,
    /// `increase` and `last_over_time` read of a bucket, in about a fifth
    /// of the bytes (`<age>:<interval>:last`).
    Last,
}

impl Keeps {
    /// How a level keeping it is written after its interval (`""`, `":last"`).
    pub fn suffix(self) -> &'static str {
        match self {
            Keeps::Aggregates => "",
            Keeps::Last => ":last",
        }
    }

    /// Its name, as `SHOW DOWNSAMPLING` and a database's registry write
    /// it: `aggregates`, `last`.
    pub fn name(self) -> &'static str {
        match self {
            Keeps::Aggregates => "aggregates",
            Keeps::Last => "last",
        }
    }

    /// The kind [`name`](Self::name) names.
    pub fn named(name: &str) -> Option<Keeps> {
        [Keeps::Aggregates, Keeps::Last]
            .into_iter()
            .find(|keeps| keeps.name() == name)
    }

    /// Whether a level keeping this keeps what one keeping `other` does
    /// (so can be built from, or read in place of, it).
    pub fn provides(self, other: Keeps) -> bool {
        self == Keeps::Aggregates || other == Keeps::Last
    }
}

impl Downsampling {
    /// Parses levels written `<age>:<interval>` (`30d:5m`; units `s`, `m`,
    /// `h`, `d`, `w`), or `<age>:<interval>:last` for a level that keeps
    /// the last sample only ([`Keeps`]). Ages and intervals must grow from
    /// level to level, each interval must be a whole number of seconds
    /// dividing the next one and no longer than its own age, a level after
    /// one keeping the last sample must keep it too (it is built from it),
    /// and there must be at least one.
    pub fn parse<S: AsRef<str>>(levels: &[S]) -> Result<Downsampling, InvalidConfig> {
        let invalid =
            |text: &str, why: String| InvalidConfig(format!("downsampling level {text:?}: {why}"));
        if levels.is_empty() {
            return Err(InvalidConfig(
                "downsampling needs at least one level".to_owned(),
            ));
        }
        let mut parsed: Vec<DownsamplingLevel> = Vec::new();
        for text in levels {
            let text = text.as_ref();
            let (after, rest) = text.split_once(':').ok_or_else(|| {
                invalid(text, "write it <age>:<interval>, e.g. 30d:5m".to_owned())
            })?;
            let (interval, keeps) = match rest.split_once(':') {
                None => (rest, Keeps::Aggregates),
                Some((interval, "last")) => (interval, Keeps::Last),
                Some((_, other)) => {
                    return Err(invalid(
                        text,
                        format!("unknown {other:?} after the interval: only \"last\" may follow"),
                    ))
                }
            };
            let level = DownsamplingLevel {
                after: parse_duration(after).map_err(|why| invalid(text, why))?,
                interval: parse_duration(interval).map_err(|why| invalid(text, why))?,
                keeps,
            };
            if level.interval > level.after {
                return Err(invalid(
                    text,
                    "the interval is longer than the age".to_owned(),
                ));
            }
            if let Some(previous) = parsed.last() {
                if level.after <= previous.after || level.interval <= previous.interval {
                    return Err(invalid(
                        text,
                        "ages and intervals must grow from level to level".to_owned(),
                    ));
                }
                if !previous.keeps.provides(level.keeps) {
                    return Err(invalid(
                        text,
                        "it keeps every aggregate, but the level before keeps the last sample \
                         only: write it <age>:<interval>:last"
                            .to_owned(),
                    ));
                }
                if !level
                    .interval
                    .as_secs()
                    .is_multiple_of(previous.interval.as_secs())
                {
                    return Err(invalid(
                        text,
                        format!(
                            "the interval is not a multiple of the previous level's ({}s)",
                            previous.interval.as_secs()
                        ),
                    ));
                }
            }
            parsed.push(level);
        }
        Ok(Downsampling { levels: parsed })
    }

    /// The levels, youngest first.
    pub fn levels(&self) -> &[DownsamplingLevel] {
        &self.levels
    }
}

impl DownsamplingLevel {
    /// The level as [`Downsampling::parse`] reads it, in seconds
    /// (`2592000s:300s`, `2592000s:300s:last`).
    pub fn to_seconds(&self) -> String {
        format!(
            "{}s:{}s{}",
            self.after.as_secs(),
            self.interval.as_secs(),
            self.keeps.suffix()
        )
    }
}

/// A duration written `<n><unit>`: whole seconds, more than none.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("{text:?} has no unit (s, m, h, d or w)"))?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} does not start with a whole number"))?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 604_800,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {text:?}: use s, m, h, d or w"
            ))
        }
    };
    match number.checked_mul(seconds) {
        Some(0) => Err(format!("{text:?} is no time at all")),
        Some(total) => Ok(Duration::from_secs(total)),
        None => Err(format!("{text:?} is too long")),
    }
}

#[cfg(test)]
mod downsampling_tests {
    use super::*;

    fn minutes(n: u64) -> Duration {
        Duration::from_secs(60 * n)
    }

    #[test]
    fn levels_parse_youngest_first() {
        let policy = Downsampling::parse(&["30d:5m", "180d:1h"]).unwrap();
        assert_eq!(
            policy.levels(),
            [
                DownsamplingLevel {
                    after: minutes(30 * 24 * 60),
                    interval: minutes(5),
                    keeps: Keeps::Aggregates,
                },
                DownsamplingLevel {
                    after: minutes(180 * 24 * 60),
                    interval: minutes(60),
                    keeps: Keeps::Aggregates,
                },
            ]
        );
        let policy = Downsampling::parse(&["30d:5m", "180d:1h:last", "52w:1d:last"]).unwrap();
        let keeps: Vec<Keeps> = policy.levels().iter().map(|l| l.keeps).collect();
        assert_eq!(keeps, [Keeps::Aggregates, Keeps::Last, Keeps::Last]);
        let written: Vec<String> = policy.levels().iter().map(|l| l.to_seconds()).collect();
        assert_eq!(Downsampling::parse(&written).unwrap(), policy);
        for keeps in [Keeps::Aggregates, Keeps::Last] {
            assert_eq!(Keeps::named(keeps.name()), Some(keeps));
        }
        assert_eq!(Keeps::named(""), None);
    }

    #[test]
    fn bad_levels_say_why() {
        for (levels, why) in [
            (&[][..], "at least one level"),
            (&["30d"][..], "<age>:<interval>"),
            (&["30d:5x"][..], "unknown unit"),
            (&["30d:m"][..], "whole number"),
            (&["30d:0m"][..], "no time at all"),
            (&["30d:5"][..], "no unit"),
            (&["1h:2h"][..], "longer than the age"),
            (&["30d:5m", "10d:1h"][..], "must grow"),
            (&["30d:1h", "180d:5m"][..], "must grow"),
            (&["30d:5m", "180d:7m"][..], "not a multiple"),
            (&["30d:5m:max"][..], "only \"last\" may follow"),
            (
                &["30d:5m:last", "180d:1h"][..],
                "the level before keeps the last sample",
            ),
        ] {
            let err = Downsampling::parse(levels).unwrap_err().to_string();
            assert!(err.contains(why), "{levels:?}: {err}");
        }
    }
}
