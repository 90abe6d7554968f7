//! The server's configuration: built-in defaults, then the TOML file
//! (`config/chingest.toml` documents every key), then command-line flags and
//! their `CHINGEST_*` environment variables, then [`ServerConfig::validate`].

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// Everything the server needs. Field docs are the reference; the example
/// file repeats them.
#[derive(Debug, Clone, Deserialize)]
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
}

/// Where rows are stored (docs/cluster.md).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StorageSection {
    /// `embedded` (the engine in this process) or `clickhouse` (the shards
    /// below).
    pub mode: String,
    /// The shards, in order: each the HTTP URL of its replica, or a list of
    /// its replicas' URLs (`?native_port=N` if reads must not use 9000).
    pub shards: Vec<ShardEntry>,
    /// The user chingest signs in as on the shards.
    pub user: String,
    /// Its password.
    pub password: String,
    /// PEM certificates to trust for `https` shards (besides the system's).
    pub ca_file: Option<PathBuf>,
    /// How long one request to a shard may take, in ms.
    pub timeout_ms: u64,
    /// The Keeper path under which the shards' tables are replicated
    /// (`Replicated*MergeTree`s at `<keeper_path>/{shard}/{database}/{table}`,
    /// replica `{replica}`); unset, they are not replicated.
    pub keeper_path: Option<String>,
    /// How often, in ms, a node learns the databases, tables, fields and
    /// series other nodes created on the shards.
    pub refresh_ms: u64,
}

/// A shard in the file: one replica's URL, or several.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum ShardEntry {
    /// A shard with one replica.
    One(String),
    /// A shard's replicas, tried in order.
    Replicas(Vec<String>),
}

impl ShardEntry {
    /// A shard from the command line or environment: replicas separated by
    /// `|`.
    pub fn parse(text: &str) -> ShardEntry {
        ShardEntry::Replicas(text.split('|').map(|r| r.trim().to_owned()).collect())
    }

    fn replicas(&self) -> Vec<String> {
        match self {
            ShardEntry::One(url) => vec![url.clone()],
            ShardEntry::Replicas(urls) => urls.clone(),
        }
    }
}

impl Default for StorageSection {
    fn default() -> Self {
        let cluster = chingest::ClusterConfig::default();
        StorageSection {
            mode: "embedded".to_owned(),
            shards: Vec::new(),
            user: cluster.user,
            password: cluster.password,
            ca_file: cluster.ca_file,
            timeout_ms: cluster.timeout.as_millis() as u64,
            keeper_path: cluster.keeper_path,
            refresh_ms: cluster.refresh.as_millis() as u64,
        }
    }
}

impl StorageSection {
    /// The library's storage mode.
    fn storage_mode(&self) -> Result<chingest::StorageMode, ConfigError> {
        match self.mode.as_str() {
            "embedded" if self.shards.is_empty() && self.keeper_path.is_none() => {
                Ok(chingest::StorageMode::Embedded)
            }
            "embedded" => Err(ConfigError::Invalid(
                "storage.shards or storage.keeper_path are set but storage.mode is embedded \
                 (set mode = \"clickhouse\")"
                    .into(),
            )),
            "clickhouse" => Ok(chingest::StorageMode::ClickHouse(chingest::ClusterConfig {
                shards: self.shards.iter().map(ShardEntry::replicas).collect(),
                user: self.user.clone(),
                password: self.password.clone(),
                ca_file: self.ca_file.clone(),
                timeout: Duration::from_millis(self.timeout_ms),
                keeper_path: self.keeper_path.clone(),
                refresh: Duration::from_millis(self.refresh_ms),
            })),
            other => Err(ConfigError::Invalid(format!(
                "storage.mode: {other:?} (embedded or clickhouse)"
            ))),
        }
    }
}

/// How PromQL queries are evaluated and bounded.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PromqlSection {
    /// The database read when a request names none (`?db=`, `/db/<name>/`).
    pub default_database: String,
    /// How far back an instant selector looks for a sample, in ms
    /// (Prometheus's `--query.lookback-delta`).
    pub lookback_delta_ms: u64,
    /// Longest a query may take, in ms; a request's `timeout` may shorten it.
    pub timeout_ms: u64,
    /// Most series one query (or lookup) may select.
    pub max_series: usize,
    /// Most samples one query may read.
    pub max_samples: usize,
    /// Memory bound of the result cache of range queries, in bytes (an
    /// estimate); 0 turns it off.
    pub result_cache_max_bytes: usize,
}

impl Default for PromqlSection {
    fn default() -> Self {
        let limits = chingest_promql::Limits::default();
        let options = chingest_promql::Options::default();
        PromqlSection {
            default_database: "prometheus".to_owned(),
            lookback_delta_ms: options.lookback.as_millis() as u64,
            timeout_ms: options.timeout.as_millis() as u64,
            max_series: limits.max_series,
            max_samples: limits.max_samples,
            result_cache_max_bytes: 64 << 20,
        }
    }
}

/// TLS for HTTP and gRPC: both files, or neither (plain TCP).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsSection {
    /// PEM certificate chain, the server's certificate first.
    pub cert: Option<PathBuf>,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: Option<PathBuf>,
}

/// Limits on what one request may carry.
#[derive(Debug, Clone, Deserialize)]
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
    /// Series per database (0: no limit); lines with new series past it
    /// are rejected.
    pub max_series_per_database: usize,
    /// Values of one tag key in one measurement (0: no limit).
    pub max_values_per_tag: usize,
}

/// How writes behave.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WriteConfig {
    /// Create a database on its first write; otherwise such writes get 404.
    pub auto_create_databases: bool,
    /// Retention policy used when a write names none.
    pub default_retention_policy: String,
    /// When a write is answered, unless the request says otherwise (the
    /// `durability` query parameter, `X-Chingest-Durability` header or gRPC
    /// field): `fsync`, `os`, `none` or `visible` (see docs/durability.md).
    pub durability: String,
    /// What tables keep when a point is written again, for databases and
    /// measurements without a policy of their own: `append` or `last`.
    pub duplicate_policy: String,
}

/// A token and what it may do.
#[derive(Debug, Clone, Deserialize)]
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
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IngestSection {
    /// Engine connections (0: one per core).
    pub connections: usize,
    /// Flush a table once this many rows are pending...
    pub flush_max_rows: usize,
    /// ...or this many bytes.
    pub flush_max_bytes: usize,
    /// ...or once the oldest pending row is this old, in milliseconds.
    pub flush_max_age_ms: u64,
    /// Flushes of one table that may run at once.
    pub flush_concurrency: usize,
    /// Bytes of request bodies and rows waiting to be inserted before
    /// writes are refused (429).
    pub max_buffered_bytes: usize,
    /// How long a write waits for room under `max_buffered_bytes`, in ms.
    pub overload_wait_ms: u64,
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
            limits: Limits::default(),
            write: WriteConfig::default(),
            ingest: IngestSection::default(),
            wal: chingest::WalConfig::default(),
            query: chingest::QueryLimits::default(),
            tls: TlsSection::default(),
            last_values: chingest::LastValueConfig::default(),
            promql: PromqlSection::default(),
            storage: StorageSection::default(),
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
            max_series_per_database: chingest::CardinalityLimits::default().max_series,
            max_values_per_tag: chingest::CardinalityLimits::default().max_values_per_tag,
        }
    }
}

impl Default for WriteConfig {
    fn default() -> Self {
        WriteConfig {
            auto_create_databases: true,
            default_retention_policy: "autogen".to_owned(),
            durability: chingest::Durability::default().to_string(),
            duplicate_policy: chingest::DuplicatePolicy::default().to_string(),
        }
    }
}

impl Default for IngestSection {
    fn default() -> Self {
        let library = chingest::IngestConfig::new("");
        IngestSection {
            connections: 0,
            flush_max_rows: library.flush.max_rows,
            flush_max_bytes: library.flush.max_bytes,
            flush_max_age_ms: library.flush.max_age.as_millis() as u64,
            flush_concurrency: library.flush.concurrency,
            max_buffered_bytes: library.max_buffered_bytes,
            overload_wait_ms: library.overload_wait.as_millis() as u64,
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

fn optional_addr<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<SocketAddr>, D::Error> {
    let text = String::deserialize(deserializer)?;
    parse_optional_addr(&text).map_err(serde::de::Error::custom)
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
        toml::from_str(&text).map_err(|source| ConfigError::Parse {
            path: path.to_owned(),
            source,
        })
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
        let p = &self.promql;
        if p.default_database.is_empty() {
            return invalid("promql.default_database must not be empty");
        }
        if p.lookback_delta_ms == 0 || p.timeout_ms == 0 || p.max_series == 0 || p.max_samples == 0
        {
            return invalid("promql limits must be positive");
        }
        self.write
            .durability
            .parse::<chingest::Durability>()
            .map_err(|e| ConfigError::Invalid(format!("write.durability: {e}")))?;
        self.write
            .duplicate_policy
            .parse::<chingest::DuplicatePolicy>()
            .map_err(|e| ConfigError::Invalid(format!("write.duplicate_policy: {e}")))?;
        self.storage.storage_mode()?;
        self.ingest_config()
            .validate()
            .map_err(|e| ConfigError::Invalid(e.to_string()))
    }

    /// The library configuration this server opens its engine with.
    pub fn ingest_config(&self) -> chingest::IngestConfig {
        let mut config = chingest::IngestConfig::new(&self.data_dir);
        let ingest = &self.ingest;
        if ingest.connections > 0 {
            config.connections = ingest.connections;
        }
        config.flush.max_rows = ingest.flush_max_rows;
        config.flush.max_bytes = ingest.flush_max_bytes;
        config.flush.max_age = Duration::from_millis(ingest.flush_max_age_ms);
        config.flush.concurrency = ingest.flush_concurrency;
        config.wal = self.wal.clone();
        config.max_buffered_bytes = ingest.max_buffered_bytes;
        config.overload_wait = Duration::from_millis(ingest.overload_wait_ms);
        config.duplicate_policy = self.write.duplicate_policy.parse().unwrap_or_default();
        config.last_values = self.last_values.clone();
        config.cardinality = chingest::CardinalityLimits {
            max_series: self.limits.max_series_per_database,
            max_values_per_tag: self.limits.max_values_per_tag,
        };
        config.query = self.query.clone();
        // Checked by `validate`.
        config.storage = self.storage.storage_mode().unwrap_or_default();
        config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The documented example file must load and mean the defaults.
    #[test]
    fn example_config_loads() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/chingest.toml");
        let config = ServerConfig::from_file(&path).unwrap();
        config.validate().unwrap();
        let defaults = ServerConfig::default();
        assert_eq!(config.http_addr, defaults.http_addr);
        assert_eq!(config.grpc_addr, defaults.grpc_addr);
        assert_eq!(config.clickhouse_http_addr, defaults.clickhouse_http_addr);
        assert_eq!(
            config.limits.max_grpc_message_bytes,
            defaults.limits.max_grpc_message_bytes
        );
        assert_eq!(config.data_dir, defaults.data_dir);
        assert_eq!(config.limits.max_body_bytes, defaults.limits.max_body_bytes);
        assert_eq!(config.write.durability, defaults.write.durability);
        assert_eq!(config.wal.max_bytes, defaults.wal.max_bytes);
        assert_eq!(
            config.last_values.measurements,
            defaults.last_values.measurements
        );
        assert_eq!(config.last_values.max_bytes, defaults.last_values.max_bytes);
        assert_eq!(
            config.ingest.flush_max_age_ms,
            defaults.ingest.flush_max_age_ms
        );
        assert_eq!(config.query.max_queued, defaults.query.max_queued);
        assert_eq!(config.query.queue_timeout, defaults.query.queue_timeout);
        let (p, d) = (&config.promql, &defaults.promql);
        assert_eq!(p.default_database, d.default_database);
        assert_eq!(p.lookback_delta_ms, d.lookback_delta_ms);
        assert_eq!(p.timeout_ms, d.timeout_ms);
        assert_eq!(p.max_series, d.max_series);
        assert_eq!(p.max_samples, d.max_samples);
        let (s, d) = (&config.storage, &defaults.storage);
        assert_eq!((s.mode.as_str(), s.shards.len()), (d.mode.as_str(), 0));
        assert_eq!((&s.user, &s.password), (&d.user, &d.password));
        assert_eq!(s.timeout_ms, d.timeout_ms);
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
        for (bad, why) in [
            ("[storage]\nshards = ['http://a:8123']", "mode is embedded"),
            ("[storage]\nmode = 'clickhouse'", "needs shards"),
            ("[storage]\nmode = 'remote'", "embedded or clickhouse"),
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
        let config: ServerConfig = toml::from_str("[write]\ndurability = 'eventually'").unwrap();
        assert!(config
            .validate()
            .unwrap_err()
            .to_string()
            .contains("eventually"));
    }
}
