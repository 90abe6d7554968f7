//! The chingest server the end-to-end modes talk to: their own, in this
//! process on its data directory (storing into its embedded engine, or
//! with `--cluster N` into N ClickHouse nodes started beside it), or a
//! running one at `--url`.

use std::time::{Duration, Instant};

use anyhow::bail;
use chingest_server::config::{ServerConfig, StorageKind};

use crate::Context;

/// Which server, and how to reach it.
#[derive(Debug, clap::Args)]
pub(crate) struct ServerArgs {
    /// A running chingest's HTTP API, e.g. http://127.0.0.1:8086. Default:
    /// start one in this process, on the data directory.
    #[arg(long)]
    pub(super) url: Option<String>,
    /// The running chingest's gRPC API (with --url), e.g.
    /// http://127.0.0.1:8087.
    #[arg(long, requires = "url")]
    pub(super) grpc_url: Option<String>,
    /// The running chingest's ClickHouse HTTP interface (with --url), e.g.
    /// http://127.0.0.1:8123.
    #[arg(long, requires = "url")]
    pub(super) clickhouse_url: Option<String>,
    /// Server config file for the in-process server (default: built-in
    /// defaults).
    #[arg(long, value_name = "PATH", conflicts_with = "url")]
    pub(super) server_config: Option<std::path::PathBuf>,
    /// Token for a server that requires one.
    #[arg(long, env = "CHINGEST_AUTH_TOKEN")]
    pub(super) token: Option<String>,
    /// The in-process server stores into a ClickHouse cluster of this many
    /// shards (the cluster mode), each a ClickHouse node started here on
    /// loopback from the engine library (the cluster tests' fixture,
    /// `crates/server/tests/support/clickhouse_node.py`; needs python3).
    /// 0: the embedded engine.
    #[arg(long, default_value_t = 0, conflicts_with = "url")]
    pub(super) cluster: usize,
}

/// ClickHouse nodes started for `--cluster`, killed when dropped.
struct Nodes(Vec<std::process::Child>);

impl Drop for Nodes {
    fn drop(&mut self) {
        for node in &mut self.0 {
            let _ = node.kill();
            let _ = node.wait();
        }
    }
}

/// Starts `count` ClickHouse nodes beside `data_dir`; their shard URLs.
async fn start_nodes(
    data_dir: &std::path::Path,
    count: usize,
) -> anyhow::Result<(Nodes, Vec<String>)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut nodes = Nodes(Vec::new());
    let mut shards = Vec::new();
    for n in 0..count {
        let dir = data_dir.with_extension(format!("shard{n}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let (tcp, http) = (free_port()?, free_port()?);
        nodes.0.push(
            std::process::Command::new("python3")
                .arg(root.join("crates/server/tests/support/clickhouse_node.py"))
                .arg(root.join("engine/lib/libchdb.so"))
                .arg(&dir)
                .args([tcp.to_string(), http.to_string()])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()?,
        );
        let url = format!("http://127.0.0.1:{http}");
        let client = http_client()?;
        let up_by = Instant::now() + Duration::from_secs(60);
        while !client
            .post(&url)
            .body("SELECT 1")
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            if Instant::now() > up_by {
                bail!("ClickHouse node {n} did not answer on {url} within 60 s");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        shards.push(format!("{url}?native_port={tcp}"));
    }
    Ok((nodes, shards))
}

/// A loopback port free now, for a server started beside this process.
pub(super) fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Rows and inserts each shard stored, from `/metrics` (cluster mode;
/// empty otherwise).
pub(super) async fn shard_inserts(endpoints: &Endpoints) -> anyhow::Result<Vec<(u64, u64)>> {
    let request = http_client()?.get(format!("{}/metrics", endpoints.http));
    let text = authorized(endpoints, request).send().await?.text().await?;
    let value = |name: &str, shard: usize| {
        let prefix = format!("{name}{{shard=\"{shard}\"}} ");
        text.lines()
            .find_map(|line| line.strip_prefix(&prefix)?.trim().parse::<u64>().ok())
    };
    Ok((0..)
        .map_while(|shard| {
            Some((
                value("chingest_shard_rows_total", shard)?,
                value("chingest_shard_inserts_total", shard)?,
            ))
        })
        .collect())
}

/// Where the server answers.
#[derive(Clone)]
pub(super) struct Endpoints {
    pub(super) http: String,
    pub(super) grpc: Option<String>,
    /// The ClickHouse HTTP interface, when known.
    pub(super) clickhouse: Option<String>,
    pub(super) token: Option<String>,
}

/// Runs `work` against the server: the in-process one, started here with
/// the mode's `adjust`ment to its configuration and stopped after `work`
/// whatever it returned, or the one at `--url`. Either is ready first.
pub(super) async fn with_server<T>(
    ctx: &Context,
    args: &ServerArgs,
    adjust: impl FnOnce(&mut ServerConfig),
    work: impl AsyncFnOnce(&Endpoints) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let (nodes, shards) = match args.cluster {
        0 => (Nodes(Vec::new()), Vec::new()),
        count => start_nodes(&ctx.data_dir, count).await?,
    };
    let cluster = |config: &mut ServerConfig| {
        if !shards.is_empty() {
            config.storage.mode = StorageKind::ClickHouse;
            config.storage.cluster.shards = shards.iter().map(|s| vec![s.clone()]).collect();
        }
        adjust(config);
    };
    let (server, endpoints) = start(ctx, args, cluster).await?;
    let result = match wait_ready(&endpoints).await {
        Ok(()) => work(&endpoints).await,
        Err(err) => Err(err),
    };
    if let Some(server) = server {
        server.shutdown().await?;
    }
    drop(nodes);
    result
}

/// Starts the in-process server unless `--url` names one.
async fn start(
    ctx: &Context,
    args: &ServerArgs,
    adjust: impl FnOnce(&mut ServerConfig),
) -> anyhow::Result<(Option<chingest_server::RunningServer>, Endpoints)> {
    if let Some(url) = &args.url {
        let endpoints = Endpoints {
            http: url.trim_end_matches('/').to_owned(),
            grpc: args.grpc_url.clone(),
            clickhouse: args
                .clickhouse_url
                .as_ref()
                .map(|url| url.trim_end_matches('/').to_owned()),
            token: args.token.clone(),
        };
        return Ok((None, endpoints));
    }
    let mut config = match &args.server_config {
        Some(path) => ServerConfig::from_file(path)?,
        None => ServerConfig::default(),
    };
    // One engine per process: the server shares this data path.
    config.data_dir = ctx.data_dir.clone();
    config.http_addr = "127.0.0.1:0".parse()?;
    config.grpc_addr = "127.0.0.1:0".parse()?;
    config.clickhouse_http_addr = Some("127.0.0.1:0".parse()?);
    config.log = "warn".into();
    config.auth_tokens.extend(args.token.clone());
    adjust(&mut config);
    let server = chingest_server::start(config).await?;
    let endpoints = Endpoints {
        http: format!("http://{}", server.addr),
        grpc: Some(format!("http://{}", server.grpc_addr)),
        clickhouse: server.clickhouse_addr.map(|addr| format!("http://{addr}")),
        token: args.token.clone(),
    };
    Ok((Some(server), endpoints))
}

pub(super) fn http_client() -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder().no_proxy().build()?)
}

pub(super) fn authorized(
    endpoints: &Endpoints,
    request: reqwest::RequestBuilder,
) -> reqwest::RequestBuilder {
    match &endpoints.token {
        Some(token) => request.header("Authorization", format!("Token {token}")),
        None => request,
    }
}

pub(super) async fn wait_ready(endpoints: &Endpoints) -> anyhow::Result<()> {
    let client = http_client()?;
    let ready_by = Instant::now() + Duration::from_secs(30);
    loop {
        match client.get(format!("{}/ready", endpoints.http)).send().await {
            Ok(r) if r.status().is_success() => return Ok(()),
            _ if Instant::now() > ready_by => {
                bail!("{}/ready did not answer 200 within 30 s", endpoints.http)
            }
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// The answer to `query` through `/sql`, as tab-separated text.
pub(super) async fn sql(
    client: &reqwest::Client,
    endpoints: &Endpoints,
    query: &str,
) -> anyhow::Result<String> {
    let request = client
        .get(format!("{}/sql", endpoints.http))
        .query(&[("query", query), ("format", "TabSeparated")]);
    Ok(authorized(endpoints, request)
        .send()
        .await?
        .error_for_status()?
        .text()
        .await?)
}
