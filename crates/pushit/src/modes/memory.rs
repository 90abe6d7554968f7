//! `pushit memory`: the server's memory under a line-protocol load. The
//! TSBS cpu-only load (`--hosts` × `--steps` rows in bodies of
//! `--lines-per-body` lines) is posted over `--connections` connections at
//! once to a `chingest serve` started here in its own process (so that its
//! memory is the server's alone), each body sent again after its
//! `Retry-After` when the memory budget answers 429, as Telegraf and the
//! InfluxDB clients do. Reports the server's peak resident memory (its
//! `VmHWM`) against its memory budget, its resident
//! memory when the last body was answered and as it settles over
//! `--settle` seconds, how many 429s were answered, and checks that every
//! acknowledged row is stored exactly once.
//!
//! `--connections 128 --lines-per-body 50000 --steps 6400` offers 1.7 GB
//! at once to a server with a 256 MiB budget (the overload case);
//! the defaults are the TSBS 1 M-row load of `pushit http`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use bytes::Bytes;
use pushit::report::{column, Format};
use serde_json::json;

use super::client::{count, drive, wait_visible};
use super::load::{bodies, LoadArgs};
use super::server::{authorized, free_port, http_client, wait_ready, Endpoints};
use super::{check_stored, per_second};
use crate::Context;

/// Flags of `pushit memory`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    load: LoadArgs,
    /// Concurrent connections, each posting its bodies one at a time.
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// Seconds to watch the server's memory after the last answer.
    #[arg(long, default_value_t = 60)]
    settle: u64,
    /// The `chingest` binary to start. Default: the one beside pushit.
    #[arg(long, value_name = "PATH")]
    server: Option<PathBuf>,
    /// Its config file (`chingest serve --config`), e.g. another
    /// `ingest.max_buffered_bytes`.
    #[arg(long, value_name = "PATH")]
    server_config: Option<PathBuf>,
}

const DATABASE: &str = "pushit_memory";
const MEASUREMENT: &str = "cpu";

pub(crate) fn run(ctx: &Context, args: &Args) -> anyhow::Result<()> {
    let rows = args.load.hosts * args.load.steps;
    if rows == 0 || args.load.lines_per_body == 0 || args.connections == 0 {
        bail!("--hosts, --steps, --lines-per-body and --connections must be positive");
    }
    ctx.progress(format!("memory: building {rows} lines"));
    let bodies: Vec<Bytes> = bodies(args.load.hosts, args.load.steps, args.load.lines_per_body)
        .into_iter()
        .map(Bytes::from)
        .collect();
    let offered: usize = bodies.iter().map(Bytes::len).sum();
    let server = Server::start(ctx, args)?;
    let mut report = ctx.report(
        "memory",
        vec![
            column("conns", "connections", Format::Count),
            column("lines/body", "lines_per_body", Format::Count),
            column("offered", "offered_bytes", Format::Mib),
            column("rows/s", "rows_per_s", Format::Count),
            column("429s", "refused", Format::Count),
            column("budget", "budget_bytes", Format::Mib),
            column("peak RSS", "peak_rss_bytes", Format::Mib),
            column("at end", "end_rss_bytes", Format::Mib),
            column("+10 s", "rss_10s_bytes", Format::Mib),
            column("settled", "settled_rss_bytes", Format::Mib),
            column("run", "run", Format::Text),
        ],
    );
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let endpoints = &server.endpoints;
        wait_ready(endpoints).await?;
        let client = http_client()?;
        let url = format!("{}/write?db={DATABASE}", endpoints.http);
        let refused = Arc::new(AtomicU64::new(0));
        let send = {
            let (endpoints, refused) = (endpoints.clone(), Arc::clone(&refused));
            move |_: usize, body: Bytes| {
                let (client, url, endpoints, refused) = (
                    client.clone(),
                    url.clone(),
                    endpoints.clone(),
                    Arc::clone(&refused),
                );
                async move { post_until_taken(&client, &endpoints, &url, body, &refused).await }
            }
        };
        let lines = args.load.lines_per_body;
        let sizes = |body: &Bytes| (lines, body.len());
        let sent = drive(ctx, "memory", bodies, args.connections, sizes, send).await?;
        let end = memory(&server)?;
        ctx.progress(format!("memory: watching the server for {} s", args.settle));
        let settle_from = Instant::now();
        let mut after_10s = None;
        let mut settled = end.resident;
        while settle_from.elapsed() < Duration::from_secs(args.settle) {
            tokio::time::sleep(Duration::from_secs(1)).await;
            settled = memory(&server)?.resident;
            if after_10s.is_none() && settle_from.elapsed() >= Duration::from_secs(10) {
                after_10s = Some(settled);
            }
        }
        wait_visible(endpoints, DATABASE, MEASUREMENT, rows as u64).await?;
        let stored = count(endpoints, DATABASE, MEASUREMENT).await?;
        check_stored(&format!("{DATABASE}.{MEASUREMENT}"), rows as u64, stored)?;
        let peak = memory(&server)?.peak;
        report.push(json!({
            "connections": args.connections,
            "lines_per_body": lines,
            "offered_bytes": offered,
            "rows_per_s": per_second(sent.rows, sent.elapsed),
            "refused": refused.load(Ordering::Relaxed),
            "budget_bytes": budget(endpoints).await?,
            "peak_rss_bytes": peak,
            "end_rss_bytes": end.resident,
            "rss_10s_bytes": after_10s,
            "settled_rss_bytes": settled,
            "run": sent.label,
        }));
        anyhow::Ok(())
    })?;
    report.finish();
    Ok(())
}

/// Posts `body` until it is taken: a 429 is counted in `refused` and the
/// body sent again after the `Retry-After` it names; any other failure ends
/// the run.
async fn post_until_taken(
    client: &reqwest::Client,
    endpoints: &Endpoints,
    url: &str,
    body: Bytes,
    refused: &AtomicU64,
) -> anyhow::Result<()> {
    loop {
        let response = authorized(endpoints, client.post(url).body(body.clone()))
            .send()
            .await?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        if status != reqwest::StatusCode::TOO_MANY_REQUESTS {
            bail!(
                "/write answered {status}: {}",
                response.text().await.unwrap_or_default()
            );
        }
        refused.fetch_add(1, Ordering::Relaxed);
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|value| value.to_str().ok()?.parse::<u64>().ok())
            .unwrap_or(1);
        tokio::time::sleep(Duration::from_secs(retry_after)).await;
    }
}

/// The server's memory: resident now and at its peak, from its
/// `/proc/<pid>/status`.
struct Memory {
    resident: u64,
    peak: u64,
}

fn memory(server: &Server) -> anyhow::Result<Memory> {
    let path = format!("/proc/{}/status", server.child.id());
    let status = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    let bytes = |key: &str| {
        status
            .lines()
            .find_map(|line| {
                line.strip_prefix(key)?
                    .trim()
                    .strip_suffix("kB")?
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .map(|kib| kib * 1024)
            .with_context(|| format!("{key} is not in {path}"))
    };
    Ok(Memory {
        resident: bytes("VmRSS:")?,
        peak: bytes("VmHWM:")?,
    })
}

/// The server's memory budget, from its `/metrics`.
async fn budget(endpoints: &Endpoints) -> anyhow::Result<u64> {
    const NAME: &str = "chingest_buffered_bytes_limit ";
    let request = http_client()?.get(format!("{}/metrics", endpoints.http));
    let text = authorized(endpoints, request).send().await?.text().await?;
    text.lines()
        .find_map(|line| line.strip_prefix(NAME)?.trim().parse().ok())
        .with_context(|| format!("{NAME}is not in /metrics"))
}

/// `chingest serve` in its own process on `<data dir>/server`, killed when
/// dropped.
struct Server {
    child: std::process::Child,
    endpoints: Endpoints,
}

impl Server {
    fn start(ctx: &Context, args: &Args) -> anyhow::Result<Server> {
        let binary = match &args.server {
            Some(path) => path.clone(),
            None => std::env::current_exe()?.with_file_name("chingest"),
        };
        let (http, grpc) = (free_port()?, free_port()?);
        let data_dir = ctx.data_dir.join("server");
        let mut command = std::process::Command::new(&binary);
        command
            .arg("serve")
            .arg("--data-dir")
            .arg(&data_dir)
            .args(["--http-addr", &format!("127.0.0.1:{http}")])
            .args(["--grpc-addr", &format!("127.0.0.1:{grpc}")])
            .args(["--clickhouse-http-addr", "off", "--log", "warn"]);
        if let Some(config) = &args.server_config {
            command.arg("--config").arg(config);
        }
        let child = command.spawn().with_context(|| {
            format!(
                "starting {} (build it: cargo build --release -p chingest-server)",
                binary.display()
            )
        })?;
        ctx.progress(format!(
            "memory: {} serving {} on port {http}",
            binary.display(),
            data_dir.display()
        ));
        Ok(Server {
            child,
            endpoints: Endpoints {
                http: format!("http://127.0.0.1:{http}"),
                grpc: None,
                clickhouse: None,
                token: None,
            },
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
