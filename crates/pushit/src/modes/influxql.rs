//! `pushit influxql`: what a Grafana InfluxDB dashboard asks, on chingest
//! and on InfluxDB 1.x (Debian's `influxd`, 1.6) holding the same rows.
//! The data: TSBS cpu-only rows of `--hosts` hosts every 10 s over the
//! `--hours` before the last whole minute (a live dashboard's data, as
//! the panels' ranges are recent), or before `--back` hours earlier, the
//! same line-protocol bodies written to both. The panels: each asked over a moving range, its request k
//! asking host k mod hosts with the hour ending k minutes before the data's
//! end, round and round over the last hour, so consecutive requests differ.
//! Each panel's first answer is compared between the servers (floats
//! within a relative 1e-9) before any clock starts; then each server takes
//! each panel on `--connections` keep-alive connections for `--seconds`,
//! one server at a time.

use std::path::PathBuf;

use anyhow::{bail, Context as _};
use pushit::report::{column, Format};
use serde_json::{json, Value};

use super::millis_at;
use super::peers::influxdb;
use super::query::{hammer, Measured};
use super::server::{authorized, http_client, with_server, Endpoints, ServerArgs};
use crate::Context;

/// Flags of `pushit influxql`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Hosts (series of `cpu`), each with TSBS's 10 integer fields.
    #[arg(long, default_value_t = 100)]
    hosts: usize,
    /// Hours of data before the last whole minute, one row per host every
    /// 10 s (at least 2: the ranges move over the last hour).
    #[arg(long, default_value_t = 3)]
    hours: usize,
    /// The data, and every panel's range with it, moved this many hours
    /// back from the last whole minute: panels over older rows, e.g.
    /// `--back 72` asks about three days ago, past the recent samples
    /// (26 h by default).
    #[arg(long, default_value_t = 0)]
    back: usize,
    /// Concurrent keep-alive connections.
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// Seconds each panel runs on each server.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// The InfluxDB 1.x server to compare with.
    #[arg(long, value_name = "PATH", default_value = "/usr/bin/influxd")]
    influxd: PathBuf,
    /// Measure chingest alone.
    #[arg(long)]
    no_influxdb: bool,
    #[command(flatten)]
    server: ServerArgs,
}

/// Seconds between a host's rows (TSBS's interval).
const STEP_S: i64 = 10;
/// Positions of a moving range: an hour of minutes.
const POSITIONS: i64 = 60;

/// The panels: name, and the InfluxQL a Grafana panel sends, with `{host}`
/// and the range (`{start}`, `{end}`, ms) filled per request.
const PANELS: &[(&str, &str)] = &[
    (
        "one host, mean, 1 h @ 1 m",
        "SELECT mean(usage_user) FROM cpu WHERE hostname = '{host}' \
         AND time >= {start}ms AND time <= {end}ms GROUP BY time(1m) fill(null)",
    ),
    (
        "one host, 3 fields, 1 h @ 1 m",
        "SELECT mean(usage_user), max(usage_system), min(usage_idle) FROM cpu \
         WHERE hostname = '{host}' AND time >= {start}ms AND time <= {end}ms \
         GROUP BY time(1m) fill(null)",
    ),
    (
        "stat, last value",
        "SELECT last(usage_user) FROM cpu WHERE hostname = '{host}' AND time >= {start}ms",
    ),
    (
        "fleet, mean by host, 1 h @ 5 m",
        "SELECT mean(usage_user) FROM cpu WHERE time >= {start}ms AND time <= {end}ms \
         GROUP BY time(5m), hostname fill(null)",
    ),
    (
        "variable, host names",
        "SHOW TAG VALUES FROM cpu WITH KEY = \"hostname\"",
    ),
];

pub(crate) fn run(ctx: &Context, args: &Args) -> anyhow::Result<()> {
    if args.hosts == 0 || args.hours < 2 || args.connections == 0 || args.seconds <= 0.0 {
        bail!("--hosts, --connections and --seconds must be positive, --hours at least 2");
    }
    let mut report = ctx.report(
        "influxql",
        vec![
            column("panel", "panel", Format::Text),
            column("side", "side", Format::Text),
            column("QPS", "qps", Format::Count),
            column("p50", "p50_ms", Format::Millis),
            column("p99", "p99_ms", Format::Millis),
            column("÷ influxdb", "over_influxdb", Format::Ratio),
        ],
    );
    let end_ms = last_whole_minute_ms()? - args.back as i64 * 3_600_000;
    let steps = args.hours * 3600 / STEP_S as usize;
    let start_ms = end_ms - steps as i64 * STEP_S * 1000;
    ctx.progress(format!(
        "influxql: generating {} rows ({} hosts, {} h)",
        args.hosts * steps,
        args.hosts,
        args.hours
    ));
    let bodies = bodies(args.hosts, steps, start_ms);
    let runtime = tokio::runtime::Runtime::new()?;
    let admit_all = |config: &mut chingest_server::config::ServerConfig| {
        config.query.max_concurrent = config.query.max_concurrent.max(args.connections);
    };
    runtime.block_on(async {
        let influxdb = match args.no_influxdb {
            true => None,
            false => {
                let peer = influxdb(&args.influxd)
                    .await
                    .with_context(|| format!("starting {}", args.influxd.display()))?;
                ctx.progress("influxql: loading influxdb");
                load(&peer.endpoints(), "pushit", &bodies, true).await?;
                peer.wait_idle(ctx).await?;
                Some(peer)
            }
        };
        with_server(ctx, &args.server, admit_all, async |endpoints| {
            let db = format!("pushit_influxql_{}", std::process::id());
            ctx.progress(format!("influxql: loading chingest into {db}"));
            load(endpoints, &db, &bodies, false).await?;
            let last_ms = end_ms - STEP_S * 1000;
            for (name, template) in PANELS {
                let requests = |client: &reqwest::Client, endpoints: &Endpoints, db: &str| {
                    (0..POSITIONS * args.hosts as i64)
                        .map(|k| {
                            let end = last_ms - (k % POSITIONS) * 60_000;
                            let q = template
                                .replace("{host}", &format!("host_{}", k as usize % args.hosts))
                                .replace("{start}", &(end - 3_600_000).to_string())
                                .replace("{end}", &end.to_string());
                            query_request(client, endpoints, db, &q)
                        })
                        .collect::<Vec<_>>()
                };
                let mut sides: Vec<(&str, &Endpoints, &str)> = vec![("chingest", endpoints, &db)];
                let peer_endpoints = influxdb.as_ref().map(|peer| peer.endpoints());
                if let Some(peer) = &peer_endpoints {
                    sides.push(("influxdb", peer, "pushit"));
                    let client = http_client()?;
                    let ours = answer(requests(&client, endpoints, &db).remove(0)).await?;
                    let theirs = answer(requests(&client, peer, "pushit").remove(0)).await?;
                    if !same(&ours, &theirs) {
                        bail!("{name}: the answers differ:\nchingest: {ours:.2000}\ninfluxdb: {theirs:.2000}");
                    }
                }
                let mut measured: Vec<(&str, Measured)> = Vec::new();
                for (side, endpoints, db) in sides {
                    ctx.progress(format!("influxql: {name} on {side}"));
                    let built = |client: &reqwest::Client| Some(requests(client, endpoints, db));
                    let m = hammer(args.connections, args.seconds, built, |_| 0)
                        .await?
                        .context("no requests")?;
                    measured.push((side, m));
                }
                let qps = |m: &Measured| m.queries as f64 / m.elapsed.as_secs_f64();
                let peer_qps = measured
                    .iter()
                    .find(|(side, _)| *side == "influxdb")
                    .map(|(_, m)| qps(m));
                for (side, m) in &measured {
                    report.push(json!({
                        "panel": name,
                        "side": side,
                        "connections": args.connections,
                        "queries": m.queries,
                        "qps": qps(m),
                        "p50_ms": millis_at(&m.latencies, 0.50),
                        "p99_ms": millis_at(&m.latencies, 0.99),
                        "over_influxdb": peer_qps.map(|p| qps(m) / p),
                    }));
                }
            }
            Ok(())
        })
        .await
    })?;
    report.finish();
    Ok(())
}

/// The start of this minute, ms since the epoch: where the data ends.
pub(super) fn last_whole_minute_ms() -> anyhow::Result<i64> {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as i64;
    Ok(now_ms / 60_000 * 60_000)
}

/// `GET /query` of `q` in `db`, times in ms.
pub(super) fn query_request(
    client: &reqwest::Client,
    endpoints: &Endpoints,
    db: &str,
    q: &str,
) -> reqwest::RequestBuilder {
    let url = format!("{}/query", endpoints.http);
    let request = client
        .get(url)
        .query(&[("db", db), ("q", q), ("epoch", "ms")]);
    authorized(endpoints, request)
}

/// The TSBS rows of `hosts` hosts for `steps` steps from `start_ms`, in
/// line-protocol bodies of 5,000 lines.
pub(super) fn bodies(hosts: usize, steps: usize, start_ms: i64) -> Vec<String> {
    let shift = start_ms * 1_000_000 - tsbs::START_NS;
    tsbs::CpuOnly::new(hosts)
        .bodies(steps, 5_000)
        .into_iter()
        .map(|body| {
            let mut shifted = String::with_capacity(body.len());
            for line in body.lines() {
                let (point, time) = line.rsplit_once(' ').expect("a line ends with its time");
                let time: i64 = time.parse().expect("a generated time");
                shifted.push_str(&format!("{point} {}\n", time + shift));
            }
            shifted
        })
        .collect()
}

/// Writes `bodies` into `db` (created first on InfluxDB, which does not
/// create databases on write); the last is visible when answered.
pub(super) async fn load(
    endpoints: &Endpoints,
    db: &str,
    bodies: &[String],
    create: bool,
) -> anyhow::Result<()> {
    let client = http_client()?;
    if create {
        let url = format!("{}/query", endpoints.http);
        let q = format!("CREATE DATABASE {db}");
        client
            .post(url)
            .form(&[("q", q.as_str())])
            .send()
            .await?
            .error_for_status()?;
    }
    for (i, body) in bodies.iter().enumerate() {
        let durability = if i + 1 == bodies.len() {
            "visible"
        } else {
            "fsync"
        };
        let url = format!("{}/write?db={db}&durability={durability}", endpoints.http);
        let r = authorized(endpoints, client.post(url).body(body.clone()))
            .send()
            .await?;
        if !r.status().is_success() {
            bail!("writing into {}: {}", endpoints.http, r.text().await?);
        }
    }
    Ok(())
}

/// One answer, as JSON.
pub(super) async fn answer(request: reqwest::RequestBuilder) -> anyhow::Result<Value> {
    let r = request.send().await?;
    let status = r.status();
    let text = r.text().await?;
    if !status.is_success() {
        bail!("{status}: {text}");
    }
    Ok(serde_json::from_str(&text)?)
}

/// JSON equal but for floats, equal within a relative 1e-9 (the servers
/// sum in different orders).
pub(super) fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (
                x.as_f64().unwrap_or(f64::NAN),
                y.as_f64().unwrap_or(f64::NAN),
            );
            (x - y).abs() <= 1e-9 * x.abs().max(y.abs())
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}
