//! The chingest server the end-to-end modes talk to: their own, in this
//! process on its data directory, or a running one at `--url`.

use std::time::{Duration, Instant};

use anyhow::bail;
use chingest_server::config::ServerConfig;

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
    let (server, endpoints) = start(ctx, args, adjust).await?;
    let result = match wait_ready(&endpoints).await {
        Ok(()) => work(&endpoints).await,
        Err(err) => Err(err),
    };
    if let Some(server) = server {
        server.shutdown().await?;
    }
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

async fn wait_ready(endpoints: &Endpoints) -> anyhow::Result<()> {
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
