//! `pushit downsampling`: long-range InfluxQL panels on a downsampled
//! database against the same rows in one that is not, on one server in
//! one run (docs/downsampling.md). The data: TSBS cpu-only rows of
//! `--hosts` hosts every 10 s over the `--days` before the last whole
//! minute, written to both databases a day at a time; the downsampled one
//! keeps 5 m and 1 h rollups, at ages past the data's (`3000d:5m`,
//! `6000d:1h`) so that its rows stay and every answer can be compared with
//! the rows' (where rows are gone, a range's cut ends count whole buckets:
//! `pushit downsampling-disk` measures that side), and the run waits for
//! two passes after the load so its rollups hold every row. A statement
//! over few series × days reads the rows even there (docs/influxql.md):
//! the report says which read rollups. Each panel's
//! range ends a minute earlier per request over an hour, so its ends cut
//! buckets as a live dashboard's do. Each panel's first answers are
//! compared (floats within a relative 1e-9) before any clock starts; then
//! each database takes the panel on `--connections` keep-alive
//! connections for `--seconds`.

use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use pushit::report::{column, Format};
use serde_json::json;

use super::client::counter;
use super::influxql::{answer, bodies, last_whole_minute_ms, load, query_request, same};
use super::query::{hammer, Measured};
use super::server::{http_client, with_server, Endpoints, ServerArgs};
use super::{millis_at, per_second};
use crate::Context;

/// Flags of `pushit downsampling`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Hosts (series of `cpu`), each with TSBS's 10 integer fields.
    #[arg(long, default_value_t = 40)]
    hosts: usize,
    /// Days of data before the last whole minute, one row per host every
    /// 10 s (at least 2).
    #[arg(long, default_value_t = 30)]
    days: usize,
    /// Concurrent keep-alive connections.
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// Seconds each panel runs on each database.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    #[command(flatten)]
    server: ServerArgs,
}

/// Seconds between a host's rows (TSBS's interval).
const STEP_S: i64 = 10;
/// Positions of a moving range: an hour of minutes.
const POSITIONS: i64 = 60;
/// The downsampled database's levels: its rows are kept.
const LEVELS: [&str; 2] = ["3000d:5m", "6000d:1h"];

/// The panels: name, the days of their range (`None`: the whole data less
/// the hour the ends move over), and the InfluxQL a Grafana panel sends,
/// with `{host}` and the range (`{start}`, `{end}`, ms) filled per request.
const PANELS: &[(&str, Option<i64>, &str)] = &[
    (
        "one host, mean, whole range @ 1 h",
        None,
        "SELECT mean(usage_user) FROM cpu WHERE hostname = '{host}' \
         AND time >= {start}ms AND time <= {end}ms GROUP BY time(1h) fill(null)",
    ),
    (
        "one host, 3 fields, whole range @ 1 h",
        None,
        "SELECT mean(usage_user), max(usage_system), min(usage_idle) FROM cpu \
         WHERE hostname = '{host}' AND time >= {start}ms AND time <= {end}ms \
         GROUP BY time(1h) fill(null)",
    ),
    (
        "fleet, mean, whole range @ 1 h",
        None,
        "SELECT mean(usage_user) FROM cpu WHERE time >= {start}ms AND time <= {end}ms \
         GROUP BY time(1h) fill(null)",
    ),
    (
        "fleet, max by host, whole range @ 6 h",
        None,
        "SELECT max(usage_user) FROM cpu WHERE time >= {start}ms AND time <= {end}ms \
         GROUP BY time(6h), hostname fill(null)",
    ),
    (
        "fleet, mean by host, 7 days @ 5 m",
        Some(7),
        "SELECT mean(usage_user) FROM cpu WHERE time >= {start}ms AND time <= {end}ms \
         GROUP BY time(5m), hostname fill(null)",
    ),
    (
        "one host, mean, 2 days @ 5 m",
        Some(2),
        "SELECT mean(usage_user) FROM cpu WHERE hostname = '{host}' \
         AND time >= {start}ms AND time <= {end}ms GROUP BY time(5m) fill(null)",
    ),
];

pub(crate) fn run(ctx: &Context, args: &Args) -> anyhow::Result<()> {
    if args.hosts == 0 || args.days < 2 || args.connections == 0 || args.seconds <= 0.0 {
        bail!("--hosts, --connections and --seconds must be positive, --days at least 2");
    }
    let mut report = ctx.report(
        "downsampling",
        vec![
            column("panel", "panel", Format::Text),
            column("database", "side", Format::Text),
            column("QPS", "qps", Format::Count),
            column("p50", "p50_ms", Format::Millis),
            column("p99", "p99_ms", Format::Millis),
            column("÷ rows", "over_rows", Format::Ratio),
            column("rollups read", "read_rollups", Format::YesNo),
        ],
    );
    let end_ms = last_whole_minute_ms()?;
    let day_steps = 86_400 / STEP_S as usize;
    let start_ms = end_ms - (args.days * day_steps) as i64 * STEP_S * 1000;
    let pid = std::process::id();
    let (rows_db, rolled_db) = (format!("pushit_rows_{pid}"), format!("pushit_rolled_{pid}"));
    let runtime = tokio::runtime::Runtime::new()?;
    let configure = |config: &mut chingest_server::config::ServerConfig| {
        config.query.max_concurrent = config.query.max_concurrent.max(args.connections);
        config.downsampling.period = Duration::from_secs(1);
        config.downsampling.databases.insert(
            rolled_db.clone(),
            chingest::Downsampling::parse(&LEVELS).expect("pushit's levels parse"),
        );
    };
    runtime.block_on(with_server(
        ctx,
        &args.server,
        configure,
        async |endpoints| {
            let started = Instant::now();
            for day in 0..args.days {
                ctx.progress(format!(
                    "downsampling: day {}/{} ({} rows a day) into {rows_db} and {rolled_db}",
                    day + 1,
                    args.days,
                    args.hosts * day_steps
                ));
                let day_start = start_ms + (day * day_steps) as i64 * STEP_S * 1000;
                let bodies = bodies(args.hosts, day_steps, day_start);
                for db in [&rows_db, &rolled_db] {
                    load(endpoints, db, &bodies, false).await?;
                }
            }
            ctx.progress(format!(
                "downsampling: loaded in {:.1} s; waiting for two passes",
                started.elapsed().as_secs_f64()
            ));
            wait_for_passes(endpoints, 2).await?;
            let span_ms = args.days as i64 * 86_400_000;
            let last_ms = end_ms - STEP_S * 1000;
            for (name, days, template) in PANELS {
                let span_ms = days.map_or(span_ms - POSITIONS * 60_000, |days| days * 86_400_000);
                let requests = |client: &reqwest::Client, db: &str| {
                    (0..POSITIONS * args.hosts as i64)
                        .map(|k| {
                            let end = last_ms - (k % POSITIONS) * 60_000;
                            let start = end - span_ms;
                            let q = template
                                .replace("{host}", &format!("host_{}", k as usize % args.hosts))
                                .replace("{start}", &start.to_string())
                                .replace("{end}", &end.to_string());
                            query_request(client, endpoints, db, &q)
                        })
                        .collect::<Vec<_>>()
                };
                let client = http_client()?;
                let before = rollup_queries(endpoints).await?;
                let rolled = answer(requests(&client, &rolled_db).remove(0)).await?;
                let read_rollups = rollup_queries(endpoints).await? > before;
                let rows = answer(requests(&client, &rows_db).remove(0)).await?;
                if !same(&rolled, &rows) {
                    bail!(
                        "{name}: the answers differ:\nrollups: {rolled:.2000}\nrows: {rows:.2000}"
                    );
                }
                let mut measured: Vec<(&str, Measured)> = Vec::new();
                for (side, db) in [("rows", &rows_db), ("rollups", &rolled_db)] {
                    ctx.progress(format!("downsampling: {name} on {side}"));
                    let built = |client: &reqwest::Client| Some(requests(client, db));
                    let m = hammer(args.connections, args.seconds, built, |_| 0)
                        .await?
                        .context("no requests")?;
                    measured.push((side, m));
                }
                let qps = |m: &Measured| per_second(m.queries, m.elapsed);
                let rows_qps = qps(&measured[0].1);
                for (side, m) in &measured {
                    report.push(json!({
                        "panel": name,
                        "side": side,
                        "hosts": args.hosts,
                        "days": args.days,
                        "connections": args.connections,
                        "queries": m.queries,
                        "qps": qps(m),
                        "p50_ms": millis_at(&m.latencies, 0.50),
                        "p99_ms": millis_at(&m.latencies, 0.99),
                        "over_rows": qps(m) / rows_qps,
                    "read_rollups": (*side == "rollups").then_some(read_rollups),
                    }));
                }
            }
            Ok(())
        },
    ))?;
    report.finish();
    Ok(())
}

async fn rollup_queries(endpoints: &Endpoints) -> anyhow::Result<u64> {
    counter(endpoints, "chingest_rollup_queries_total").await
}

/// Waits until `passes` more downsampling passes have finished, failing
/// on a failed one or after ten minutes.
pub(super) async fn wait_for_passes(endpoints: &Endpoints, passes: u64) -> anyhow::Result<()> {
    let passed = || counter(endpoints, "chingest_downsampling_passes_total");
    let failed = || counter(endpoints, "chingest_downsampling_errors_total");
    let (first, errors) = (passed().await?, failed().await?);
    let deadline = Instant::now() + Duration::from_secs(600);
    while passed().await? < first + passes {
        if failed().await? > errors {
            bail!("a downsampling pass failed (see the server's log)");
        }
        if Instant::now() > deadline {
            bail!("the downsampling passes did not finish in ten minutes");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}
