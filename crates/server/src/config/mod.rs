//! The server's configuration: built-in defaults, then the TOML file
//! (`config/chingest.toml` documents every key), then command-line flags and
//! their `CHINGEST_*` environment variables, then [`ServerConfig::validate`].
//!
//! The sections hold the libraries' own types (`chingest::FlushPolicy`,
//! `CardinalityLimits`, `ClusterConfig`, `Durability`, `DuplicatePolicy`,
//! `WalConfig`, `QueryLimits`, `LastValueConfig`, `DownsamplingConfig`,
//! `ContinuousQueryConfig`;
//! `chingest_promql::Options` and `Limits`), read from the file as it is:
//! their defaults are the libraries', every value is parsed once, when the
//! file is read (a bad one is an error naming it), and
//! [`ServerConfig::ingest_config`] only moves
//! them into place. Where the file's keys are not the type's field names
//! (the file is flat, units in the names: `flush_max_age_ms`), a `*Keys`
//! definition below maps them: it lists every field of its type, so a
//! field the library adds fails to compile here until it has a key.

use std::fmt::Display;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer};

mod millis;
mod rules;
pub use rules::{AlertmanagerSection, RulesSection};

/// Everything the server needs. Field docs are the reference; the example
/// file repeats them.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// The engine's data directory.
    pub data_dir: PathBuf,
    /// Address of the HTTP API.
    pub http_addr: SocketAddr,
    /// Address of the gRPC API (`chingest.v1.Ingest`, health, reflection).
    pub grpc_addr: SocketAddr,
    /// Address of the ClickHouse HTTP interface (ClickHouse clients read
    /// through it); `None` (`""` or `"off"` in the file): not served.
    #[serde(deserialize_with = "optional_addr")]
    pub clickhouse_http_addr: Option<SocketAddr>,
    /// Log filter (`tracing` syntax: `info`, `chingest=debug,warn`, …).
    pub log: String,
    /// Tokens that may read and write every database. With `tokens`, the
    /// credentials every endpoint checks; both empty: no auth.
    pub auth_tokens: Vec<String>,
    /// Tokens with a scope: read and/or write, all databases or a list.
    pub tokens: Vec<TokenConfig>,
    /// `/metrics` asks for a token too (any configured token).
    pub metrics_require_token: bool,
    /// Serve the web UI at `/` and `/ui/` (`ui/`, embedded in the binary).
    pub ui: bool,
    /// Request limits.
    pub limits: Limits,
    /// Write behaviour.
    pub write: WriteConfig,
    /// Engine and batching.
    pub ingest: IngestSection,
    /// The write-ahead log (the library's own section).
    pub wal: chingest::WalConfig,
    /// Limits on `/sql` statements (the library's own section; 0: no
    /// limit).
    pub query: chingest::QueryLimits,
    /// TLS for both listeners.
    pub tls: TlsSection,
    /// The last-value cache (the library's own section).
    pub last_values: chingest::LastValueConfig,
    /// PromQL and the Prometheus HTTP API.
    pub promql: PromqlSection,
    /// Where rows are stored: this machine's engine, or a ClickHouse
    /// cluster's shards.
    pub storage: StorageSection,
    /// The databases kept at coarser resolutions as they age, and how
    /// often their rollups catch up (docs/downsampling.md; the library's
    /// own section).
    pub downsampling: chingest::DownsamplingConfig,
    /// Whether continuous queries run here, how often their schedule is
    /// checked and how many missed periods a restart catches up
    /// (docs/influxql.md; the library's own section).
    pub continuous_queries: chingest::ContinuousQueryConfig,
    /// Prometheus rule files evaluated here (docs/rules.md).
    pub rules: RulesSection,
}

/// Where rows are stored (docs/cluster.md).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StorageSection {
    /// `embedded` (the engine in this process) or `clickhouse` (the shards
    /// of `cluster`).
    pub mode: StorageKind,
    /// The cluster's shards and how to reach them; in the file `shards`
    /// (each the HTTP URL of its replica, or a list of its replicas'
    /// URLs), `user`, `password`, `ca_file`, `timeout_ms`, `keeper_path`,
    /// `refresh_ms`.
    #[serde(flatten, with = "ClusterKeys")]
    pub cluster: chingest::ClusterConfig,
}

/// Where rows are stored: `mode` in `[storage]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StorageKind {
    /// This process's engine, in `data_dir`.
    #[default]
    Embedded,
    /// A ClickHouse cluster's shards.
    ClickHouse,
}

impl StorageSection {
    /// The library's storage mode.
    pub fn mode(&self) -> chingest::StorageMode {
        match self.mode {
            StorageKind::Embedded => chingest::StorageMode::Embedded,
            StorageKind::ClickHouse => chingest::StorageMode::ClickHouse(self.cluster.clone()),
        }
    }
}

/// A shard from the command line or environment: its replicas' URLs,
/// separated by `|`.
pub fn parse_shard(text: &str) -> Vec<String> {
    text.split('|').map(|r| r.trim().to_owned()).collect()
}

/// How PromQL queries are evaluated and bounded.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PromqlSection {
    /// The database read when a request names none (`?db=`, `/db/<name>/`).
    pub default_database: String,
    /// How far back an instant selector looks for a sample (Prometheus's
    /// `--query.lookback-delta`) and how long a query may take (a
    /// request's `timeout` may shorten it); in the file
    /// `lookback_delta_ms` and `timeout_ms`.
    #[serde(flatten, with = "OptionsKeys")]
    pub options: chingest_promql::Options,
    /// Most series one query (or lookup) may select, most samples it may
    /// read; in the file `max_series` and `max_samples`.
    #[serde(flatten, with = "PromqlLimitsKeys")]
    pub limits: chingest_promql::Limits,
    /// Memory bound of the result cache of range queries, in bytes (an
    /// estimate); 0 turns it off.
    pub result_cache_max_bytes: usize,
}

impl Default for PromqlSection {
    fn default() -> Self {
        PromqlSection {
            default_database: "prometheus".to_owned(),
            options: chingest_promql::Options::default(),
            limits: chingest_promql::Limits::default(),
            result_cache_max_bytes: 64 << 20,
        }
    }
}

/// TLS for HTTP and gRPC: both files, or neither (plain TCP).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsSection {
    /// PEM certificate chain, the server's certificate first.
    pub cert: Option<PathBuf>,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: Option<PathBuf>,
}

/// Limits on what one request may carry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Largest request body, after gzip decompression, in bytes (413 past it).
    pub max_body_bytes: usize,
    /// Largest gRPC message after decompression, in bytes.
    pub max_grpc_message_bytes: usize,
    /// Longest line of line protocol, in bytes (that line is rejected).
    pub max_line_bytes: usize,
    /// Most tags on one line (that line is rejected).
    pub max_tags_per_line: usize,
    /// Most fields on one line (that line is rejected).
    pub max_fields_per_line: usize,
    /// Longest measurement, tag key or field key, in bytes.
    pub max_name_bytes: usize,
    /// Series per database and values of one tag key in one measurement
    /// (0: no limit); lines with new series past them are rejected. In the
    /// file `max_series_per_database` and `max_values_per_tag`.
    #[serde(flatten, with = "CardinalityKeys")]
    pub cardinality: chingest::CardinalityLimits,
}

/// How writes behave.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WriteConfig {
    /// Create a database on its first write; otherwise such writes get 404.
    pub auto_create_databases: bool,
    /// Retention policy used when a write names none.
    pub default_retention_policy: String,
    /// When a write is answered, unless the request says otherwise (the
    /// `durability` query parameter, `X-Chingest-Durability` header or gRPC
    /// field): `fsync`, `os`, `none` or `visible` (see docs/durability.md).
    #[serde(deserialize_with = "parsed")]
    pub durability: chingest::Durability,
    /// What tables keep when a point is written again, for databases and
    /// measurements without a policy of their own: `append` or `last`.
    #[serde(deserialize_with = "parsed")]
    pub duplicate_policy: chingest::DuplicatePolicy,
}

/// A token and what it may do.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenConfig {
    /// The secret clients present.
    pub token: String,
    /// May query (`/sql`, InfluxQL `SHOW`).
    #[serde(default = "yes")]
    pub read: bool,
    /// May write (and create databases and retention policies).
    #[serde(default = "yes")]
    pub write: bool,
    /// The databases it may read and write; empty: every database.
    #[serde(default)]
    pub databases: Vec<String>,
}

fn yes() -> bool {
    true
}

/// The engine and batching knobs of `chingest::IngestConfig`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IngestSection {
    /// Engine connections (0: one per core).
    pub connections: usize,
    /// When a table's logged rows are inserted; in the file
    /// `flush_max_rows`, `flush_max_bytes`, `flush_max_age_ms`,
    /// `flush_concurrency`.
    #[serde(flatten, with = "FlushKeys")]
    pub flush: chingest::FlushPolicy,
    /// Bytes of request bodies and rows waiting to be inserted before
    /// writes are refused (429).
    pub max_buffered_bytes: usize,
    /// How long a write waits for room under `max_buffered_bytes`; in the
    /// file `overload_wait_ms`.
    #[serde(rename = "overload_wait_ms", with = "millis")]
    pub overload_wait: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            data_dir: PathBuf::from("data/chingest"),
            http_addr: SocketAddr::from(([127, 0, 0, 1], 8086)),
            grpc_addr: SocketAddr::from(([127, 0, 0, 1], 8087)),
            clickhouse_http_addr: Some(SocketAddr::from(([127, 0, 0, 1], 8123))),
            log: "info".to_owned(),
            auth_tokens: Vec::new(),
            tokens: Vec::new(),
            metrics_require_token: false,
            ui: true,
            limits: Limits::default(),
            write: WriteConfig::default(),
            ingest: IngestSection::default(),
            wal: chingest::WalConfig::default(),
            query: chingest::QueryLimits::default(),
            tls: TlsSection::default(),
            last_values: chingest::LastValueConfig::default(),
            promql: PromqlSection::default(),
            storage: StorageSection::default(),
            downsampling: chingest::DownsamplingConfig::default(),
            continuous_queries: chingest::ContinuousQueryConfig::default(),
            rules: RulesSection::default(),
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 64 << 20,
            max_grpc_message_bytes: 64 << 20,
            max_line_bytes: 1 << 20,
            max_tags_per_line: 256,
            max_fields_per_line: 1024,
            max_name_bytes: 256,
            cardinality: chingest::CardinalityLimits::default(),
        }
    }
}

impl Default for WriteConfig {
    fn default() -> Self {
        WriteConfig {
            auto_create_databases: true,
            default_retention_policy: "autogen".to_owned(),
            durability: chingest::Durability::default(),
            duplicate_policy: chingest::DuplicatePolicy::default(),
        }
    }
}

impl Default for IngestSection {
    fn default() -> Self {
        let library = chingest::IngestConfig::new("");
        IngestSection {
            connections: 0,
            flush: library.flush,
            max_buffered_bytes: library.max_buffered_bytes,
            overload_wait: library.overload_wait,
        }
    }
}

/// An address that may be switched off: `""` or `off` (any case) mean
/// none. For `clickhouse_http_addr` in the file and its flag.
pub fn parse_optional_addr(text: &str) -> Result<Option<SocketAddr>, String> {
    let text = text.trim();
    if text.is_empty() || text.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    text.parse()
        .map(Some)
        .map_err(|e| format!("{text:?} is not an address (host:port) or \"off\": {e}"))
}

fn optional_addr<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<SocketAddr>, D::Error> {
    let text = String::deserialize(deserializer)?;
    parse_optional_addr(&text).map_err(serde::de::Error::custom)
}

/// A value written as its text (`durability = "fsync"`), parsed as the
/// file is read: a bad one is an error naming the key and the choices.
fn parsed<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr,
    T::Err: Display,
{
    let text = String::deserialize(deserializer)?;
    text.parse().map_err(serde::de::Error::custom)
}

/// A shard in the file: one replica's URL, or a list of its replicas'.
fn shards<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<Vec<String>>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Shard {
        One(String),
        Replicas(Vec<String>),
    }
    let shards = Vec::<Shard>::deserialize(deserializer)?;
    Ok(shards
        .into_iter()
        .map(|shard| match shard {
            Shard::One(url) => vec![url],
            Shard::Replicas(urls) => urls,
        })
        .collect())
}

// The file's keys of the libraries' types whose field names are not
// theirs. Each lists every field of its type (a remote definition
// constructs the type), its defaults are the type's.

/// `[ingest]`'s keys of `chingest::FlushPolicy`.
#[derive(Deserialize)]
#[serde(
    remote = "chingest::FlushPolicy",
    default = "chingest::FlushPolicy::default"
)]
struct FlushKeys {
    #[serde(rename = "flush_max_rows")]
    max_rows: usize,
    #[serde(rename = "flush_max_bytes")]
    max_bytes: usize,
    #[serde(rename = "flush_max_age_ms", with = "millis")]
    max_age: Duration,
    #[serde(rename = "flush_concurrency")]
    concurrency: usize,
}

/// `[limits]`'s keys of `chingest::CardinalityLimits`.
#[derive(Deserialize)]
#[serde(
    remote = "chingest::CardinalityLimits",
    default = "chingest::CardinalityLimits::default"
)]
struct CardinalityKeys {
    #[serde(rename = "max_series_per_database")]
    max_series: usize,
    #[serde(rename = "max_values_per_tag")]
    max_values_per_tag: usize,
}

/// `[storage]`'s keys of `chingest::ClusterConfig`.
#[derive(Deserialize)]
#[serde(
    remote = "chingest::ClusterConfig",
    default = "chingest::ClusterConfig::default"
)]
struct ClusterKeys {
    #[serde(deserialize_with = "shards")]
    shards: Vec<Vec<String>>,
    user: String,
    password: String,
    ca_file: Option<PathBuf>,
    #[serde(rename = "timeout_ms", with = "millis")]
    timeout: Duration,
    keeper_path: Option<String>,
    #[serde(rename = "refresh_ms", with = "millis")]
    refresh: Duration,
}

/// `[promql]`'s keys of `chingest_promql::Options`.
#[derive(Deserialize)]
#[serde(
    remote = "chingest_promql::Options",
    default = "chingest_promql::Options::default"
)]
struct OptionsKeys {
    #[serde(rename = "lookback_delta_ms", with = "millis")]
    lookback: Duration,
    #[serde(rename = "timeout_ms", with = "millis")]
    timeout: Duration,
}

/// `[promql]`'s keys of `chingest_promql::Limits` (its field names).
#[derive(Deserialize)]
#[serde(
    remote = "chingest_promql::Limits",
    default = "chingest_promql::Limits::default"
)]
struct PromqlLimitsKeys {
    max_series: usize,
    max_samples: usize,
}

/// A configuration problem, with where it was found.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid configuration.
    #[error("{path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong, with line and column.
        source: toml::de::Error,
    },
    /// A value is out of range.
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

impl ServerConfig {
    /// Reads a TOML file; keys it leaves out keep their defaults.
    pub fn from_file(path: &Path) -> Result<ServerConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let mut config: ServerConfig =
            toml::from_str(&text).map_err(|source| ConfigError::Parse {
                path: path.to_owned(),
                source,
            })?;
        config.rules.base_dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
            _ => PathBuf::from("."),
        };
        Ok(config)
    }

    /// How rules are evaluated, from `[rules]`, `[promql]` and `[write]`.
    pub fn rules_settings(&self) -> chingest_rules::Settings {
        let r = &self.rules;
        let external_url = match r.external_url.is_empty() {
            true => format!("http://{}", self.http_addr),
            false => r.external_url.clone(),
        };
        chingest_rules::Settings {
            evaluation_interval: r.evaluation_interval,
            query_offset: r.query_offset,
            read_database: self.promql.default_database.clone(),
            write_database: r.database.clone(),
            retention_policy: self.write.default_retention_policy.clone(),
            options: self.promql.options,
            limits: self.promql.limits,
            max_concurrent_groups: r.max_concurrent_groups,
            resend_delay: r.resend_delay,
            for_grace_period: r.for_grace_period,
            for_outage_tolerance: r.for_outage_tolerance,
            lease_term: r.lease_term,
            external_labels: r.external_labels.clone(),
            external_url,
        }
    }

    /// Checks values against each other.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |msg: &str| Err(ConfigError::Invalid(msg.to_owned()));
        let l = &self.limits;
        if [
            l.max_body_bytes,
            l.max_grpc_message_bytes,
            l.max_line_bytes,
            l.max_fields_per_line,
            l.max_name_bytes,
        ]
        .contains(&0)
        {
            return invalid("limits must be positive");
        }
        if self.auth_tokens.iter().any(String::is_empty)
            || self.tokens.iter().any(|t| t.token.is_empty())
        {
            return invalid("tokens must not be empty");
        }
        if self.tls.cert.is_some() != self.tls.key.is_some() {
            return invalid("tls.cert and tls.key go together");
        }
        if self.tokens.iter().any(|t| !t.read && !t.write) {
            return invalid("a token in tokens must be allowed to read or write");
        }
        if self.write.default_retention_policy.is_empty() {
            return invalid("write.default_retention_policy must not be empty");
        }
        self.rules.validate().map_err(ConfigError::Invalid)?;
        let p = &self.promql;
        if p.default_database.is_empty() {
            return invalid("promql.default_database must not be empty");
        }
        if p.options.lookback.is_zero()
            || p.options.timeout.is_zero()
            || p.limits.max_series == 0
            || p.limits.max_samples == 0
        {
            return invalid("promql limits must be positive");
        }
        let cluster = &self.storage.cluster;
        if self.storage.mode == StorageKind::Embedded
            && (!cluster.shards.is_empty() || cluster.keeper_path.is_some())
        {
            return invalid(
                "storage.shards or storage.keeper_path are set but storage.mode is embedded \
                 (set mode = \"clickhouse\")",
            );
        }
        self.ingest_config()
            .validate()
            .map_err(|e| ConfigError::Invalid(e.to_string()))
    }

    /// The library configuration this server opens its engine with: the
    /// sections' values moved into place (every field named, so a field
    /// the library adds is a decision here).
    pub fn ingest_config(&self) -> chingest::IngestConfig {
        let library = chingest::IngestConfig::new(&self.data_dir);
        let ingest = self.ingest.clone();
        chingest::IngestConfig {
            data_dir: library.data_dir,
            connections: match ingest.connections {
                0 => library.connections,
                n => n,
            },
            flush: ingest.flush,
            wal: self.wal.clone(),
            max_buffered_bytes: ingest.max_buffered_bytes,
            overload_wait: ingest.overload_wait,
            view_retention_policy: library.view_retention_policy,
            query: self.query.clone(),
            cardinality: self.limits.cardinality,
            duplicate_policy: self.write.duplicate_policy,
            last_values: self.last_values.clone(),
            storage: self.storage.mode(),
            downsampling: self.downsampling.clone(),
            continuous_queries: self.continuous_queries.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The documented example file must load and mean the defaults: the
    /// whole configuration, the libraries' sections included, equals the
    /// built-in one.
    #[test]
    fn example_config_loads() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/chingest.toml");
        let mut config = ServerConfig::from_file(&path).unwrap();
        config.validate().unwrap();
        // Relative rule files are read from the file's directory.
        assert_eq!(config.rules.base_dir, path.parent().unwrap());
        config.rules.base_dir = PathBuf::from(".");
        assert_eq!(config, ServerConfig::default(), "config/chingest.toml");
    }

    /// Every key the file may set reaches the type it configures.
    #[test]
    fn keys_reach_the_libraries_types() {
        let config: ServerConfig = toml::from_str(
            "[ingest]\nconnections = 3\nflush_max_rows = 5\nflush_max_bytes = 6\n\
             flush_max_age_ms = 7\nflush_concurrency = 2\nmax_buffered_bytes = 8\n\
             overload_wait_ms = 9\n\
             [limits]\nmax_series_per_database = 10\nmax_values_per_tag = 11\n\
             [write]\ndurability = 'VISIBLE'\nduplicate_policy = 'last'\n\
             [promql]\nlookback_delta_ms = 12\ntimeout_ms = 13\nmax_series = 14\n\
             max_samples = 15\n\
             [storage]\nuser = 'u'\npassword = 'p'\nca_file = '/ca.pem'\ntimeout_ms = 16\n\
             refresh_ms = 17\n\
             [continuous_queries]\nenabled = false\nrun_interval_ms = 18\nmax_catch_up_periods = 19",
        )
        .unwrap();
        let library = config.ingest_config();
        assert_eq!(library.connections, 3);
        let flush = &library.flush;
        assert_eq!(
            (
                flush.max_rows,
                flush.max_bytes,
                flush.max_age,
                flush.concurrency
            ),
            (5, 6, Duration::from_millis(7), 2)
        );
        assert_eq!(library.max_buffered_bytes, 8);
        assert_eq!(library.overload_wait, Duration::from_millis(9));
        assert_eq!(
            library.cardinality,
            chingest::CardinalityLimits {
                max_series: 10,
                max_values_per_tag: 11
            }
        );
        assert_eq!(
            library.continuous_queries,
            chingest::ContinuousQueryConfig {
                enabled: false,
                run_interval: Duration::from_millis(18),
                max_catch_up_periods: 19,
            }
        );
        assert_eq!(config.write.durability, chingest::Durability::Visible);
        assert_eq!(library.duplicate_policy, chingest::DuplicatePolicy::Last);
        let promql = &config.promql;
        assert_eq!(
            (promql.options.lookback, promql.options.timeout),
            (Duration::from_millis(12), Duration::from_millis(13))
        );
        assert_eq!(
            promql.limits,
            chingest_promql::Limits {
                max_series: 14,
                max_samples: 15
            }
        );
        assert_eq!(
            config.storage.cluster,
            chingest::ClusterConfig {
                user: "u".to_owned(),
                password: "p".to_owned(),
                ca_file: Some(PathBuf::from("/ca.pem")),
                timeout: Duration::from_millis(16),
                refresh: Duration::from_millis(17),
                ..chingest::ClusterConfig::default()
            }
        );
        // `[rules]` reaches the rules' settings, `[promql]` and `[write]`
        // filling what rules read.
        let config: ServerConfig = toml::from_str(
            "http_addr = '127.0.0.1:9999'\n[rules]\nfiles = ['a/*.yml']\n\
             evaluation_interval_ms = 20\nquery_offset_ms = 21\ndatabase = 'rec'\n\
             max_concurrent_groups = 22\nresend_delay_ms = 23\nfor_grace_period_ms = 24\n\
             for_outage_tolerance_ms = 25\nnotification_queue_capacity = 26\nlease_term_ms = 28\n\
             [rules.external_labels]\ncluster = 'c'\n\
             [[rules.alertmanagers]]\nurl = 'http://am:9093'\n\
             [[rules.alertmanagers]]\nurl = 'http://am2:9093'\ntimeout_ms = 27",
        )
        .unwrap();
        let rules = config.rules_settings();
        assert_eq!(
            (rules.evaluation_interval, rules.query_offset),
            (Duration::from_millis(20), Duration::from_millis(21))
        );
        assert_eq!(
            (
                &*rules.write_database,
                &*rules.read_database,
                &*rules.retention_policy
            ),
            ("rec", "prometheus", "autogen")
        );
        assert_eq!(rules.max_concurrent_groups, 22);
        assert_eq!(
            (
                rules.resend_delay,
                rules.for_grace_period,
                rules.for_outage_tolerance
            ),
            (
                Duration::from_millis(23),
                Duration::from_millis(24),
                Duration::from_millis(25)
            )
        );
        assert_eq!(rules.external_labels["cluster"], "c");
        assert_eq!(rules.lease_term, Duration::from_millis(28));
        assert_eq!(rules.external_url, "http://127.0.0.1:9999");
        assert_eq!(config.rules.files, ["a/*.yml"]);
        assert_eq!(config.rules.notification_queue_capacity, 26);
        let timeouts: Vec<Duration> = config
            .rules
            .alertmanagers
            .iter()
            .map(|a| a.timeout)
            .collect();
        assert_eq!(
            timeouts,
            [Duration::from_secs(10), Duration::from_millis(27)]
        );
        // A measurement's levels, or none, reach the library; bad ones are
        // refused naming their key.
        let config: ServerConfig =
            toml::from_str("[downsampling.measurements.telegraf]\ncpu = ['7d:1m']\nevents = []")
                .unwrap();
        let own = &config.ingest_config().downsampling.measurements["telegraf"];
        assert_eq!(
            own["cpu"],
            Some(chingest::Downsampling::parse(&["7d:1m"]).unwrap())
        );
        assert_eq!(own["events"], None);
        for (bad, key) in [
            (
                "[downsampling.measurements.telegraf]\ncpu = ['7d:7m', '30d:1h']",
                "downsampling.measurements.telegraf.cpu: ",
            ),
            (
                "[downsampling.databases]\ntelegraf = ['30d']",
                "downsampling.databases.telegraf: ",
            ),
            (
                "[downsampling.databases]\ntelegraf = []",
                "at least one level",
            ),
        ] {
            let err = toml::from_str::<ServerConfig>(bad).unwrap_err().to_string();
            assert!(err.contains(key), "{bad}: {err}");
        }
        // A key left out keeps the library's default.
        let config: ServerConfig = toml::from_str("[ingest]\nflush_max_rows = 5").unwrap();
        let defaults = chingest::FlushPolicy::default();
        assert_eq!(config.ingest.flush.max_bytes, defaults.max_bytes);
        assert_eq!(config.ingest.flush.max_age, defaults.max_age);
    }

    #[test]
    fn shards_are_urls_or_lists_of_replicas() {
        let config: ServerConfig = toml::from_str(
            "[storage]\nmode = 'clickhouse'\n\
             shards = ['http://a:8123', ['http://b1:8123', 'http://b2:8123?native_port=9001']]\n\
             keeper_path = '/clickhouse/tables/chingest'",
        )
        .unwrap();
        config.validate().unwrap();
        let chingest::StorageMode::ClickHouse(cluster) = config.ingest_config().storage else {
            panic!("not the clickhouse mode");
        };
        assert_eq!(
            cluster.shards,
            [
                vec!["http://a:8123".to_owned()],
                vec![
                    "http://b1:8123".to_owned(),
                    "http://b2:8123?native_port=9001".to_owned()
                ]
            ]
        );
        assert_eq!(
            cluster.keeper_path.as_deref(),
            Some("/clickhouse/tables/chingest")
        );
        let err = toml::from_str::<ServerConfig>("[storage]\nmode = 'remote'").unwrap_err();
        assert!(
            err.to_string().contains("`embedded` or `clickhouse`"),
            "{err}"
        );
        for (bad, why) in [
            ("[storage]\nshards = ['http://a:8123']", "mode is embedded"),
            ("[storage]\nmode = 'clickhouse'", "needs shards"),
            (
                "[storage]\nmode = 'clickhouse'\nshards = ['http://a:8123']\nkeeper_path = 'x/'",
                "keeper_path must start with '/'",
            ),
        ] {
            let config: ServerConfig = toml::from_str(bad).unwrap();
            let err = config.validate().unwrap_err().to_string();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }

    #[test]
    fn the_clickhouse_interface_can_be_switched_off() {
        for off in ["''", "'off'", "'OFF'"] {
            let config: ServerConfig =
                toml::from_str(&format!("clickhouse_http_addr = {off}")).unwrap();
            assert_eq!(config.clickhouse_http_addr, None, "{off}");
        }
        let config: ServerConfig = toml::from_str("clickhouse_http_addr = '0.0.0.0:9123'").unwrap();
        assert_eq!(
            config.clickhouse_http_addr,
            Some(SocketAddr::from(([0, 0, 0, 0], 9123)))
        );
        let err = toml::from_str::<ServerConfig>("clickhouse_http_addr = 'nope'").unwrap_err();
        assert!(err.to_string().contains("\"off\""), "{err}");
    }

    #[test]
    fn unknown_keys_and_bad_values_are_errors() {
        let err = toml::from_str::<ServerConfig>("http_adr = '127.0.0.1:1'").unwrap_err();
        assert!(err.to_string().contains("http_adr"), "{err}");
        let config: ServerConfig = toml::from_str("[limits]\nmax_body_bytes = 0").unwrap();
        assert!(config.validate().is_err());
        // Parsed as the file is read: no default in its place.
        for (bad, why) in [
            (
                "[write]\ndurability = 'eventually'",
                "unknown durability \"eventually\"",
            ),
            (
                "[write]\nduplicate_policy = 'first'",
                "unknown duplicate policy \"first\"",
            ),
            ("[ingest]\nflush_max_rows = 'many'", "expected usize"),
            ("[ingest]\nflush_max_row = 1", "flush_max_row"),
        ] {
            let err = toml::from_str::<ServerConfig>(bad).unwrap_err().to_string();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }
}
