//! `chingest`: the server binary.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use chingest::Durability;
use chingest_server::config::{parse_optional_addr, parse_shard, ServerConfig, StorageKind};
use clap::{Parser, Subcommand};

/// jemalloc rather than glibc's malloc, which kept what an overload's
/// requests took in an arena per thread long after (docs/benchmarks.md §15).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// chingest: InfluxDB-compatible metrics ingest into embedded ClickHouse (chDB).
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the server. Settings come from the built-in defaults, then
    /// --config, then CHINGEST_* environment variables and flags.
    Serve(Box<ServeArgs>),
    /// Ask a running server for a backup (docs/backup.md): every write it
    /// acknowledged before, exactly once, to a new directory on the
    /// server's machine or an S3 prefix.
    Backup(BackupArgs),
    /// Restore a backup into an empty data directory, for `serve`
    /// (run it while no server uses that directory).
    Restore(RestoreArgs),
    /// Prometheus rule files (docs/rules.md).
    Rules(RulesArgs),
}

#[derive(Debug, clap::Args)]
struct RulesArgs {
    #[command(subcommand)]
    command: RulesCommand,
}

#[derive(Debug, Subcommand)]
enum RulesCommand {
    /// Check rule files as `promtool check rules` does: the same output,
    /// exit code 0 (valid), 1 (invalid) or 3 (lint found something, with
    /// --lint-fatal).
    Check(RulesCheckArgs),
    /// Run unit tests of rules as `promtool test rules` does: its test
    /// files, its output, exit code 0 (passed) or 1 (failed).
    Test(RulesTestArgs),
    /// Write recording rules' results for a past range into a running
    /// server, as `promtool tsdb create-blocks-from rules` makes them:
    /// each rule's range queries at its group's interval, written by
    /// remote write, in the files' order (a rule sees an earlier one's
    /// output). Alerting rules are left out.
    Backfill(RulesBackfillArgs),
}

#[derive(Debug, clap::Args)]
struct RulesBackfillArgs {
    /// The server's HTTP address.
    #[arg(long, env = "CHINGEST_URL", default_value = "http://127.0.0.1:8086")]
    url: String,
    /// A token that may read and write the database, when the server asks.
    #[arg(long, env = "CHINGEST_TOKEN")]
    token: Option<String>,
    /// The database the rules read and their results go to.
    #[arg(long, default_value = "prometheus")]
    database: String,
    /// The range's start: RFC 3339 or Unix seconds.
    #[arg(long)]
    from: String,
    /// The range's end: RFC 3339 or Unix seconds (default: now).
    #[arg(long)]
    to: Option<String>,
    /// A group's interval when it has none, e.g. 1m.
    #[arg(long, default_value = "1m")]
    evaluation_interval: String,
    /// The rule files.
    #[arg(required = true)]
    files: Vec<String>,
}

/// `chingest rules backfill`: each rule's series and samples written.
async fn backfill_rules(args: RulesBackfillArgs) -> anyhow::Result<()> {
    let time = |name: &str, text: &str| {
        chingest_promql::parse_time(name, text).map_err(|err| anyhow::anyhow!("--{name}: {err}"))
    };
    let from = time("from", &args.from)?;
    let to = match &args.to {
        Some(text) => time("to", text)?,
        None => chingest::clock::now_ms(),
    };
    let interval = chingest_rules::duration::parse(&args.evaluation_interval)
        .map_err(|err| anyhow::anyhow!("--evaluation-interval: {err}"))?;
    let files = chingest_rules::load::load(&args.files, std::path::Path::new("."))?;
    let remote = chingest_rules::backfill::Remote {
        url: args.url,
        token: args.token,
        database: args.database,
    };
    let filled = chingest_rules::backfill::backfill(&remote, &files, (from, to), interval)
        .await
        .map_err(|err| anyhow::anyhow!(err))?;
    for f in &filled {
        println!(
            "{} {}: {} series, {} samples",
            f.group, f.rule, f.series, f.samples
        );
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
struct RulesTestArgs {
    /// The test files.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct RulesCheckArgs {
    /// Linting checks to apply: all, duplicate-rules or none.
    #[arg(long, default_value = "duplicate-rules", value_parser = ["all", "duplicate-rules", "none"])]
    lint: String,
    /// Make lint errors exit with exit code 3.
    #[arg(long)]
    lint_fatal: bool,
    /// The rule files to check.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

/// `chingest rules check`: promtool's output and exit code.
fn check_rules(args: RulesCheckArgs) -> anyhow::Result<i32> {
    // As promtool's argument parser, before any file is read.
    for file in &args.files {
        if let Some(refusal) = chingest_rules::check::refuse_argument(file) {
            eprintln!("chingest: error: {refusal}, try --help");
            return Ok(chingest_rules::check::FAILURE);
        }
    }
    let options = chingest_rules::check::Options {
        duplicate_rules: args.lint != "none",
        lint_fatal: args.lint_fatal,
    };
    let code = chingest_rules::check::check_files(
        &args.files,
        options,
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    )?;
    Ok(code)
}

/// Where `s3://` locations are.
#[derive(Debug, clap::Args)]
struct S3Args {
    /// The S3 service for s3://bucket/prefix locations, e.g.
    /// https://s3.eu-west-1.amazonaws.com or http://127.0.0.1:9000; the
    /// credentials come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
    #[arg(long, env = "CHINGEST_S3_ENDPOINT")]
    s3_endpoint: Option<String>,
}

impl S3Args {
    fn credentials(&self) -> anyhow::Result<Option<chingest::backup::S3Credentials>> {
        let Some(endpoint) = &self.s3_endpoint else {
            return Ok(None);
        };
        let var = |name: &str| std::env::var(name).with_context(|| format!("{name} is not set"));
        Ok(Some(chingest::backup::S3Credentials {
            endpoint: endpoint.clone(),
            access_key_id: var("AWS_ACCESS_KEY_ID")?,
            secret_access_key: var("AWS_SECRET_ACCESS_KEY")?,
        }))
    }
}

#[derive(Debug, clap::Args)]
struct BackupArgs {
    /// The server's HTTP address.
    #[arg(long, env = "CHINGEST_URL", default_value = "http://127.0.0.1:8086")]
    url: String,
    /// A token of the server's auth_tokens, when it has some.
    #[arg(long, env = "CHINGEST_TOKEN")]
    token: Option<String>,
    /// Where: a new absolute directory on the server's machine, or
    /// s3://bucket/prefix (with --s3-endpoint).
    #[arg(long)]
    to: String,
    /// An earlier backup to add to: only what changed since is written.
    #[arg(long)]
    base: Option<String>,
    /// A database to back up (repeat); all when none is named.
    #[arg(long = "database")]
    databases: Vec<String>,
    #[command(flatten)]
    s3: S3Args,
}

#[derive(Debug, clap::Args)]
struct RestoreArgs {
    /// The backup: a directory, or s3://bucket/prefix (with --s3-endpoint).
    #[arg(long)]
    from: String,
    /// The data directory to restore into: empty or missing.
    #[arg(long)]
    data_dir: PathBuf,
    /// A database to restore (repeat); all the backup holds when none is
    /// named.
    #[arg(long = "database")]
    databases: Vec<String>,
    #[command(flatten)]
    s3: S3Args,
}

/// Asks the server at `args.url` for a backup; prints its report (JSON).
async fn backup(args: BackupArgs) -> anyhow::Result<()> {
    let mut body = serde_json::json!({ "to": args.to, "databases": args.databases });
    if let Some(base) = &args.base {
        body["base"] = base.clone().into();
    }
    if let Some(s3) = args.s3.credentials()? {
        body["s3"] = serde_json::json!({
            "endpoint": s3.endpoint,
            "access_key_id": s3.access_key_id,
            "secret_access_key": s3.secret_access_key,
        });
    }
    let url = format!("{}/api/v1/admin/backup", args.url.trim_end_matches('/'));
    let mut request = reqwest::Client::new().post(&url).json(&body);
    if let Some(token) = &args.token {
        request = request.bearer_auth(token);
    }
    let response = request
        .send()
        .await
        .with_context(|| format!("POST {url}"))?;
    let status = response.status();
    let text = response.text().await.context("reading the answer")?;
    if !status.is_success() {
        let message = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v["message"].as_str().map(str::to_owned))
            .unwrap_or(text);
        anyhow::bail!("the backup failed ({status}): {message}");
    }
    println!("{text}");
    Ok(())
}

/// Restores a backup into an empty data directory; prints what it did.
async fn restore(args: RestoreArgs) -> anyhow::Result<()> {
    let location = chingest::backup::BackupLocation::parse(&args.from, args.s3.credentials()?)?;
    let report = chingest::backup::restore(chingest::backup::RestoreRequest {
        location,
        data_dir: args.data_dir.clone(),
        databases: args.databases,
    })
    .await?;
    println!(
        "{}",
        serde_json::json!({
            "data_dir": args.data_dir,
            "databases": report.databases,
            "bytes_checked": report.bytes_checked,
            "elapsed_ms": report.elapsed.as_millis() as u64,
        })
    );
    Ok(())
}

#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// TOML configuration file (config/chingest.toml documents every key).
    #[arg(long, env = "CHINGEST_CONFIG")]
    config: Option<PathBuf>,
    /// The engine's data directory [default: data/chingest].
    #[arg(long, env = "CHINGEST_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Address of the HTTP API [default: 127.0.0.1:8086].
    #[arg(long, env = "CHINGEST_HTTP_ADDR")]
    http_addr: Option<SocketAddr>,
    /// Address of the gRPC API [default: 127.0.0.1:8087].
    #[arg(long, env = "CHINGEST_GRPC_ADDR")]
    grpc_addr: Option<SocketAddr>,
    /// Address of the ClickHouse HTTP interface, or `off`
    /// [default: 127.0.0.1:8123].
    #[arg(long, env = "CHINGEST_CLICKHOUSE_HTTP_ADDR")]
    clickhouse_http_addr: Option<String>,
    /// When writes are answered: fsync, os, none or visible [default: fsync]
    /// (see config/chingest.toml). A request may ask for another.
    #[arg(long, env = "CHINGEST_DURABILITY", value_parser = str::parse::<Durability>)]
    durability: Option<Durability>,
    /// Log filter, e.g. info or chingest=debug [default: info].
    #[arg(long, env = "CHINGEST_LOG")]
    log: Option<String>,
    /// PEM certificate chain: serve HTTPS and gRPC over TLS (with --tls-key).
    #[arg(long, env = "CHINGEST_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, env = "CHINGEST_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// A token clients must present (repeat for several; comma-separated in
    /// the environment variable). Replaces the file's auth_tokens.
    #[arg(
        long = "auth-token",
        env = "CHINGEST_AUTH_TOKENS",
        value_delimiter = ','
    )]
    auth_tokens: Vec<String>,
    /// Measurements the last-value cache keeps: `*`, `db.*`, `db.m` or `m`
    /// (repeat, or comma-separated in the environment variable; `-` for
    /// none) [default: *]. Replaces the file's last_values.measurements.
    #[arg(
        long = "last-values",
        env = "CHINGEST_LAST_VALUES",
        value_delimiter = ','
    )]
    last_values: Vec<String>,
    /// Store rows on a ClickHouse cluster: a shard's HTTP URL, its
    /// replicas separated by `|` (repeat per shard, in order; comma-separated
    /// in the environment variable). Sets storage.mode = clickhouse and
    /// replaces the file's storage.shards.
    #[arg(
        long = "clickhouse-shard",
        env = "CHINGEST_CLICKHOUSE_SHARDS",
        value_delimiter = ','
    )]
    clickhouse_shards: Vec<String>,
    /// Replicate the shards' tables: the Keeper path they are registered
    /// under (`Replicated*MergeTree`s at `<path>/{shard}/{database}/{table}`).
    /// Replaces the file's storage.keeper_path.
    #[arg(
        long = "clickhouse-keeper-path",
        env = "CHINGEST_CLICKHOUSE_KEEPER_PATH"
    )]
    clickhouse_keeper_path: Option<String>,
    /// How often a node learns what other nodes created on the shards, in
    /// ms. Replaces the file's storage.refresh_ms.
    #[arg(long = "clickhouse-refresh-ms", env = "CHINGEST_CLICKHOUSE_REFRESH_MS")]
    clickhouse_refresh_ms: Option<u64>,
    /// Run continuous queries here: true or false. Replaces the file's
    /// continuous_queries.enabled.
    #[arg(long = "continuous-queries", env = "CHINGEST_CONTINUOUS_QUERIES")]
    continuous_queries: Option<bool>,
    /// How often continuous queries' schedule is checked, in ms. Replaces
    /// the file's continuous_queries.run_interval_ms.
    #[arg(
        long = "continuous-queries-run-interval-ms",
        env = "CHINGEST_CONTINUOUS_QUERIES_RUN_INTERVAL_MS"
    )]
    continuous_queries_run_interval_ms: Option<u64>,
    /// Most missed periods of a continuous query run after a restart.
    /// Replaces the file's continuous_queries.max_catch_up_periods.
    #[arg(
        long = "continuous-queries-max-catch-up-periods",
        env = "CHINGEST_CONTINUOUS_QUERIES_MAX_CATCH_UP_PERIODS"
    )]
    continuous_queries_max_catch_up_periods: Option<u64>,
    /// Rule files (globs; repeat the flag, or separate with commas), read
    /// from the working directory when relative. Replaces the file's
    /// rules.files.
    #[arg(
        long = "rules-file",
        env = "CHINGEST_RULES_FILES",
        value_delimiter = ','
    )]
    rules_files: Vec<String>,
    /// A rule group's interval when it has none, in ms. Replaces the
    /// file's rules.evaluation_interval_ms.
    #[arg(
        long = "rules-evaluation-interval-ms",
        env = "CHINGEST_RULES_EVALUATION_INTERVAL_MS"
    )]
    rules_evaluation_interval_ms: Option<u64>,
    /// The database recorded series and ALERTS are written to. Replaces
    /// the file's rules.database.
    #[arg(long = "rules-database", env = "CHINGEST_RULES_DATABASE")]
    rules_database: Option<String>,
}

impl ServeArgs {
    fn into_config(self) -> anyhow::Result<ServerConfig> {
        let mut config = match &self.config {
            Some(path) => ServerConfig::from_file(path)?,
            None => ServerConfig::default(),
        };
        if let Some(data_dir) = self.data_dir {
            config.data_dir = data_dir;
        }
        if let Some(addr) = self.http_addr {
            config.http_addr = addr;
        }
        if let Some(addr) = self.grpc_addr {
            config.grpc_addr = addr;
        }
        if let Some(addr) = self.clickhouse_http_addr {
            config.clickhouse_http_addr = parse_optional_addr(&addr)
                .map_err(|e| anyhow::anyhow!("--clickhouse-http-addr: {e}"))?;
        }
        if let Some(durability) = self.durability {
            config.write.durability = durability;
        }
        if let Some(log) = self.log {
            config.log = log;
        }
        if self.tls_cert.is_some() {
            config.tls.cert = self.tls_cert;
            config.tls.key = self.tls_key;
        }
        if !self.auth_tokens.is_empty() {
            config.auth_tokens = self.auth_tokens;
        }
        if !self.last_values.is_empty() {
            config.last_values.measurements =
                self.last_values.into_iter().filter(|m| m != "-").collect();
        }
        if !self.clickhouse_shards.is_empty() {
            config.storage.mode = StorageKind::ClickHouse;
            config.storage.cluster.shards = self
                .clickhouse_shards
                .iter()
                .map(|shard| parse_shard(shard))
                .collect();
        }
        if let Some(path) = self.clickhouse_keeper_path {
            config.storage.cluster.keeper_path = Some(path);
        }
        if let Some(refresh) = self.clickhouse_refresh_ms {
            config.storage.cluster.refresh = Duration::from_millis(refresh);
        }
        let continuous = &mut config.continuous_queries;
        if let Some(enabled) = self.continuous_queries {
            continuous.enabled = enabled;
        }
        if let Some(interval) = self.continuous_queries_run_interval_ms {
            continuous.run_interval = Duration::from_millis(interval);
        }
        if let Some(most) = self.continuous_queries_max_catch_up_periods {
            continuous.max_catch_up_periods = most;
        }
        if !self.rules_files.is_empty() {
            config.rules.files = self.rules_files;
            config.rules.base_dir = PathBuf::from(".");
        }
        if let Some(interval) = self.rules_evaluation_interval_ms {
            config.rules.evaluation_interval = Duration::from_millis(interval);
        }
        if let Some(database) = self.rules_database {
            config.rules.database = database;
        }
        config.validate()?;
        Ok(config)
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = match Cli::parse().command {
        Command::Serve(args) => *args,
        Command::Backup(args) => return backup(args).await,
        Command::Restore(args) => {
            let restored = restore(args).await;
            let _ = chingest::shutdown_engine();
            return restored;
        }
        Command::Rules(RulesArgs {
            command: RulesCommand::Check(args),
        }) => std::process::exit(check_rules(args)?),
        Command::Rules(RulesArgs {
            command: RulesCommand::Backfill(args),
        }) => return backfill_rules(args).await,
        Command::Rules(RulesArgs {
            command: RulesCommand::Test(args),
        }) => std::process::exit(chingest_rules::unittest::test_files(
            &args.files,
            &mut std::io::stdout().lock(),
            &mut std::io::stderr().lock(),
        )?),
    };
    let config = args.into_config()?;
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_new(&config.log).context("log filter")?)
        .init();
    let mut server = chingest_server::start(config).await?;
    let trigger = server.shutdown_trigger();
    tokio::spawn(async move {
        shutdown_signal().await;
        if let Some(trigger) = trigger {
            let _ = trigger.send(());
        }
    });
    server.wait().await?;
    Ok(())
}

/// SIGINT or SIGTERM.
async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .expect("install the SIGTERM handler");
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}
