//! `pushit http` and `pushit grpc`: chingest end to end. TSBS cpu-only data
//! (10 tags, 10 integer fields per row) is generated first, then sent to a
//! chingest server (its own, in-process, or a running one at `--url` /
//! `--grpc-url`) over each path in turn, each into a database of its own:
//!
//! - `http`: line protocol, `POST /write`, over keep-alive connections;
//! - `grpc-lp`: the same bodies through gRPC `Write` (line_protocol);
//! - `grpc-points`: the same rows as typed points through `Write`;
//! - `grpc-arrow`: the same rows as Arrow record batches (tags
//!   dictionary-encoded) streamed through `WriteArrow`.
//!
//! Every request asks for `--durability` (default `fsync`: answered once
//! its rows are synced in the server's write-ahead log). Each path reports
//! two rates: until the last request is answered (`rows/s`), and until
//! every row is queryable (`visible/s`, polled through `/sql`; the stored
//! count is checked). While the load runs, a probe writes one row a tenth
//! of a second into a table of its own and polls (every 50 ms) until it is
//! queryable: the visibility lag (write sent → queryable) a dashboard sees
//! under load.
//! With the in-process server, the table is then merged and its bytes on
//! disk per field value reported (`B/value`).
//!
//! Right before each path, the same rows are inserted straight into this
//! process's engine as pre-built fact batches: the engine's rate on this
//! machine at that moment, against which the path is reported. `--runs`
//! repeats the engine arm only; each path sends its load once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use chingest::Durability;
use chingest_proto::v1::ingest_client::IngestClient;
use chingest_proto::v1::{write_request, WriteArrowRequest, WriteRequest, WriteResponse};
use pushit::engine::{tsbs_fact_batch, tsbs_fact_schema};
use pushit::layouts::LayoutTables;
use pushit::report::{column, Format};
use serde_json::json;

use super::client::{bytes_per_value, count, drive, wait_visible, Sent};
use super::load;
use super::server::{
    authorized, http_client, shard_inserts, sql, with_server, Endpoints, ServerArgs,
};
use super::{check_stored, insert_layout, millis_at, per_second, settle};
use crate::Context;

const ENGINE_DATABASE: &str = "pushit_engine";

/// A way of sending the load to chingest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Path {
    /// Line protocol over HTTP (`POST /write`).
    Http,
    /// Line protocol over gRPC (`Write`).
    GrpcLp,
    /// Typed points over gRPC (`Write`).
    GrpcPoints,
    /// Arrow IPC streams over gRPC (`WriteArrow`).
    GrpcArrow,
}

impl Path {
    fn name(self) -> &'static str {
        match self {
            Path::Http => "http",
            Path::GrpcLp => "grpc-lp",
            Path::GrpcPoints => "grpc-points",
            Path::GrpcArrow => "grpc-arrow",
        }
    }

    /// The name as it appears in database names and JSON keys.
    fn key(self) -> String {
        self.name().replace('-', "_")
    }
}

/// Flags of `pushit http` and `pushit grpc`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    load: load::LoadArgs,
    /// Concurrent connections for the line-protocol and points paths.
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// Rows per Arrow record batch, and per insert in the engine arm.
    #[arg(long, default_value_t = 200_000)]
    batch_rows: usize,
    /// Concurrent WriteArrow streams (the batches are split among them).
    #[arg(long, default_value_t = 1)]
    arrow_streams: usize,
    /// Paths to measure, comma-separated. Default: `http` for `pushit
    /// http`, all four for `pushit grpc`.
    #[arg(long, value_enum, value_delimiter = ',')]
    paths: Vec<Path>,
    #[command(flatten)]
    server: ServerArgs,
    /// Database name prefix; each path writes `<prefix>_<path>`. Default:
    /// `pushit_<unix time in ms>`, new each run.
    #[arg(long)]
    database: Option<String>,
    /// When each request is answered: fsync, os, none or visible (see
    /// docs/durability.md).
    #[arg(long, default_value_t = Durability::Fsync)]
    durability: Durability,
    /// A heavy query: each path then runs a second time while this SQL is
    /// posted to `/sql` over and over, each post abandoned after
    /// `--bomb-seconds` (which cancels it in the server), and is reported
    /// as `<path> + bomb` against its plain run just before.
    #[arg(long, value_name = "SQL")]
    query_bomb: Option<String>,
    /// Seconds each `--query-bomb` query runs before the client hangs up.
    #[arg(long, default_value_t = 1.0)]
    bomb_seconds: f64,
}

/// Runs the engine arm, then every path, and reports each against the
/// engine.
pub(crate) fn run(ctx: &Context, args: &Args, mode: &'static str) -> anyhow::Result<()> {
    let rows = args.load.hosts * args.load.steps;
    if rows == 0 {
        bail!("--hosts and --steps must be positive");
    }
    let paths = match (args.paths.is_empty(), mode) {
        (false, _) => args.paths.clone(),
        (true, "http") => vec![Path::Http],
        (true, _) => vec![Path::Http, Path::GrpcLp, Path::GrpcPoints, Path::GrpcArrow],
    };
    if args.server.url.is_some() && args.server.grpc_url.is_none() && paths != [Path::Http] {
        bail!("--url with gRPC paths needs --grpc-url");
    }
    let mut columns = vec![
        column("path", "path", Format::Text),
        column("durability", "durability", Format::Text),
        column("rows", "rows", Format::Count),
        column("rows/s", "rows_per_s", Format::Count),
        column("÷ engine", "over_engine", Format::Ratio),
        column("visible/s", "visible_rows_per_s", Format::Count),
        column("vis ÷ engine", "visible_over_engine", Format::Ratio),
        column("MB/s", "mb_per_s", Format::Ratio),
        column("p50", "p50_ms", Format::Millis),
        column("p99", "p99_ms", Format::Millis),
        column("lag p50", "lag_p50_ms", Format::Millis),
        column("lag p99", "lag_p99_ms", Format::Millis),
        column("B/value", "bytes_per_value", Format::Ratio),
        column("run", "run", Format::Text),
    ];
    if args.query_bomb.is_some() {
        columns.push(column("÷ plain", "over_plain", Format::Ratio));
    }
    let mut report = ctx.report(mode, columns);
    ctx.progress(format!("engine: building {rows} rows"));
    let engine_batches: Vec<_> =
        load::row_chunks(args.load.hosts, args.load.steps, args.batch_rows)
            .map(|body| tsbs_fact_batch(&body))
            .collect::<Result<_, _>>()?;
    let mut engine_rates = Vec::new();

    let runtime = tokio::runtime::Runtime::new()?;
    let database = args.database.clone().unwrap_or_else(|| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        format!("pushit_{}", now.as_millis())
    });
    // (path, rows/s, ÷ the engine run next to it, visible ÷ that engine),
    // in the order measured.
    let mut results: Vec<(Path, f64, f64, f64)> = Vec::new();
    // (path, rows/s under the bomb ÷ its plain rows/s).
    let mut bombed: Vec<(Path, f64)> = Vec::new();
    // Cluster mode: (rows, inserts) per shard.
    let mut shards = Vec::new();
    runtime.block_on(with_server(
        ctx,
        &args.server,
        |_| {},
        async |endpoints| {
            for &path in &paths {
                let db = format!("{database}_{}", path.key());
                // The engine right before each path: on a shared machine the
                // speed drifts over a run, and each path is compared with the
                // engine as it ran next to it.
                let engine_rate = engine_arm(ctx, args, &engine_batches, &mut report)?;
                engine_rates.push(engine_rate);
                let plain =
                    measure_path(ctx, args, endpoints, path, &db, engine_rate, None).await?;
                results.push((
                    path,
                    plain.rate,
                    plain.rate / engine_rate,
                    plain.visible_rate / engine_rate,
                ));
                report.push(plain.row);
                if let Some(bomb) = &args.query_bomb {
                    let db = format!("{db}_bomb");
                    let under =
                        measure_path(ctx, args, endpoints, path, &db, engine_rate, Some(bomb))
                            .await?;
                    bombed.push((path, under.rate / plain.rate));
                    let mut row = under.row;
                    row["over_plain"] = (under.rate / plain.rate).into();
                    report.push(row);
                }
            }
            shards = shard_inserts(endpoints).await?;
            Ok(())
        },
    ))?;
    report.finish();
    let rate_of = |path: Path| results.iter().find(|r| r.0 == path).map(|r| r.1);
    engine_rates.sort_by(f64::total_cmp);
    // The first path's figures are the run's headline.
    let (_, e2e_rate, e2e_ratio, e2e_visible_ratio) = results[0];
    let mut summary = json!({
        "durability": args.durability.as_str(),
        "engine_rows_per_s": engine_rates[engine_rates.len() / 2],
        "e2e_rows_per_s": e2e_rate,
        "e2e_over_engine": e2e_ratio,
        "e2e_visible_over_engine": e2e_visible_ratio,
    });
    for &(path, rate, ratio, visible_ratio) in &results {
        summary[format!("{}_rows_per_s", path.key())] = rate.into();
        summary[format!("{}_over_engine", path.key())] = ratio.into();
        summary[format!("{}_visible_over_engine", path.key())] = visible_ratio.into();
    }
    if let (Some(lp), Some(http)) = (rate_of(Path::GrpcLp), rate_of(Path::Http)) {
        summary["grpc_lp_over_http"] = (lp / http).into();
    }
    for &(path, ratio) in &bombed {
        summary[format!("{}_bomb_over_plain", path.key())] = ratio.into();
    }
    if !shards.is_empty() {
        summary["shards"] = shards.len().into();
        summary["shard_rows"] = shards.iter().map(|s| s.0).collect::<Vec<_>>().into();
        summary["shard_rows_per_insert"] = shards
            .iter()
            .map(|&(rows, inserts)| rows as f64 / inserts.max(1) as f64)
            .collect::<Vec<_>>()
            .into();
    }
    report.summary(summary);
    Ok(())
}

/// What one path measured, and its report row.
struct Measured {
    rate: f64,
    visible_rate: f64,
    row: serde_json::Value,
}

/// Sends the load over `path` into `db` (with `bomb` posted to `/sql`
/// meanwhile, if given), waits until every row is queryable and checks
/// the stored count.
async fn measure_path(
    ctx: &Context,
    args: &Args,
    endpoints: &Endpoints,
    path: Path,
    db: &str,
    engine_rate: f64,
    bomb: Option<&str>,
) -> anyhow::Result<Measured> {
    let rows = args.load.hosts * args.load.steps;
    settle(ctx, &ctx.connect()?)?;
    let probe = Probe::start(endpoints, db, args.durability)?;
    let bomb = match bomb {
        Some(sql) => Some(Bomb::start(
            endpoints,
            sql,
            Duration::from_secs_f64(args.bomb_seconds),
        )?),
        None => None,
    };
    let sent = send_path(ctx, args, endpoints, path, db).await?;
    let bomb = match bomb {
        Some(bomb) => Some(bomb.finish().await?),
        None => None,
    };
    let visible = wait_visible(endpoints, db, "cpu", rows as u64).await?;
    let lags = probe.finish().await?;
    let stored = count(endpoints, db, "cpu").await?;
    check_stored(&format!("{db}.cpu"), rows as u64, stored)?;
    // Only where the rows are in this process's engine: not behind --url
    // or on a --cluster's shards.
    let bytes_per_value = match (&args.server.url, args.server.cluster) {
        (None, 0) => Some(bytes_per_value(ctx, db, "cpu", rows * tsbs::FIELDS.len())?),
        _ => None,
    };
    let rate = per_second(sent.rows, sent.elapsed);
    let visible_seconds = (visible - sent.started).as_secs_f64();
    let visible_rate = sent.rows as f64 / visible_seconds.max(1e-9);
    let mut row = json!({
        "path": match bomb {
            Some(_) => format!("{} + bomb", path.name()),
            None => path.name().to_owned(),
        },
        "durability": args.durability.as_str(),
        "rows": sent.rows,
        "connections": if path == Path::GrpcArrow { args.arrow_streams } else { args.connections },
        "lines_per_body": args.load.lines_per_body,
        "batch_rows": args.batch_rows,
        "requests": sent.latencies.len(),
        "seconds": sent.elapsed.as_secs_f64(),
        "rows_per_s": rate,
        "samples_per_s": rate * tsbs::FIELDS.len() as f64,
        "engine_rows_per_s": engine_rate,
        "over_engine": rate / engine_rate,
        "visible_seconds": visible_seconds,
        "visible_rows_per_s": visible_rate,
        "visible_over_engine": visible_rate / engine_rate,
        "mb_per_s": sent.bytes as f64 / 1e6 / sent.elapsed.as_secs_f64(),
        "p50_ms": millis_at(&sent.latencies, 0.50),
        "p95_ms": millis_at(&sent.latencies, 0.95),
        "p99_ms": millis_at(&sent.latencies, 0.99),
        "lag_probes": lags.len(),
        "lag_p50_ms": millis_at(&lags, 0.50),
        "lag_p99_ms": millis_at(&lags, 0.99),
        "lag_max_ms": millis_at(&lags, 1.0),
        "bytes_per_value": bytes_per_value,
        "run": sent.label,
    });
    if let Some(bomb) = bomb {
        row["bomb_queries"] = bomb.started.into();
        row["bomb_cancelled"] = bomb.cancelled.into();
    }
    Ok(Measured {
        rate,
        visible_rate,
        row,
    })
}

/// Posts a query to `/sql` over and over while a load runs, hanging up on
/// each after a while: the server cancels a query whose client went away.
struct Bomb {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<anyhow::Result<BombCount>>,
}

/// How many bomb queries were posted, and how many of them were cut off
/// by hanging up (the others finished or failed on their own first).
struct BombCount {
    started: u64,
    cancelled: u64,
}

impl Bomb {
    fn start(endpoints: &Endpoints, sql: &str, hang_up_after: Duration) -> anyhow::Result<Bomb> {
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let client = http_client()?;
        let request = authorized(
            endpoints,
            client
                .post(format!("{}/sql", endpoints.http))
                .body(sql.to_owned()),
        );
        let task = tokio::spawn(async move {
            let mut count = BombCount {
                started: 0,
                cancelled: 0,
            };
            // At least one, however short the load.
            loop {
                let request = request.try_clone().context("bomb request")?;
                count.started += 1;
                let answer = async { request.send().await?.bytes().await };
                if tokio::time::timeout(hang_up_after, answer).await.is_err() {
                    count.cancelled += 1;
                }
                if *stopped.borrow() {
                    return Ok(count);
                }
            }
        });
        Ok(Bomb { stop, task })
    }

    /// Stops posting (after the query in flight ends or is abandoned).
    async fn finish(self) -> anyhow::Result<BombCount> {
        let _ = self.stop.send(true);
        self.task.await?
    }
}

/// The same rows as pre-built fact batches, straight into the engine;
/// reported as an `engine` row. Returns its rate.
fn engine_arm(
    ctx: &Context,
    args: &Args,
    batches: &[chingest::arrow::array::RecordBatch],
    report: &mut pushit::report::Report,
) -> anyhow::Result<f64> {
    let rows = args.load.hosts * args.load.steps;
    let conn = ctx.connect()?;
    let tables = LayoutTables::chingest(&tsbs_fact_schema(ENGINE_DATABASE), false);
    ctx.progress("engine: inserting");
    let measured = ctx.measure(|| {
        let elapsed = insert_layout(ctx, &conn, ENGINE_DATABASE, &tables, batches, rows)?;
        Ok((elapsed, ()))
    })?;
    conn.execute(&[&format!("DROP DATABASE {ENGINE_DATABASE} SYNC")])?;
    let mut rate = 0.0;
    for m in measured {
        rate = per_second(rows, m.elapsed);
        report.push(json!({
            "path": "engine",
            "rows": rows,
            "batch_rows": args.batch_rows,
            "seconds": m.elapsed.as_secs_f64(),
            "rows_per_s": rate,
            "samples_per_s": rate * tsbs::FIELDS.len() as f64,
            "over_engine": 1.0,
            "run": m.label,
        }));
    }
    Ok(rate)
}

/// How often the probe writes a row.
const PROBE_EVERY: Duration = Duration::from_millis(100);

/// How often the probe polls for its rows. Each poll is a query, ~2.5 ms
/// of the server's CPU: polling every 10 ms took ~9% of a 2-core machine
/// from the load being measured. Lags are reported to within this.
const PROBE_POLL: Duration = Duration::from_millis(50);

/// Measures the visibility lag while a load runs: writes one row every
/// [`PROBE_EVERY`] into `<db>.pushit_probe`, each with its own `seq`, and
/// polls that table for the rows it has not seen yet.
struct Probe {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<anyhow::Result<Vec<Duration>>>,
}

impl Probe {
    fn start(endpoints: &Endpoints, db: &str, durability: Durability) -> anyhow::Result<Probe> {
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let endpoints = Endpoints {
            http: endpoints.http.clone(),
            grpc: None,
            clickhouse: None,
            token: endpoints.token.clone(),
        };
        let write_url = format!("{}/write?db={db}&durability={durability}", endpoints.http);
        let query = format!("SELECT seq FROM `{db}`.`pushit_probe.autogen`");
        let client = http_client()?;
        let task = tokio::spawn(async move {
            // When each probe row was sent; its lag once seen.
            let mut sent: Vec<Instant> = Vec::new();
            let mut lags: Vec<Option<Duration>> = Vec::new();
            let mut next_write = Instant::now();
            let mut finish_by = None;
            loop {
                let stopping = *stopped.borrow();
                if stopping {
                    finish_by.get_or_insert(Instant::now() + Duration::from_secs(60));
                } else if Instant::now() >= next_write {
                    next_write += PROBE_EVERY;
                    sent.push(Instant::now());
                    lags.push(None);
                    let line = format!("pushit_probe seq={}i", sent.len() - 1);
                    let request = authorized(&endpoints, client.post(&write_url).body(line));
                    request.send().await?.error_for_status()?;
                }
                if !sent.is_empty() {
                    // The table appears with the first probe's insert.
                    if let Ok(text) = sql(&client, &endpoints, &query).await {
                        for seq in text.lines().filter_map(|l| l.parse::<usize>().ok()) {
                            if let Some(lag @ None) = lags.get_mut(seq) {
                                *lag = Some(sent[seq].elapsed());
                            }
                        }
                    }
                }
                let unseen = lags.iter().filter(|l| l.is_none()).count();
                match finish_by {
                    Some(_) if unseen == 0 => break,
                    Some(by) if Instant::now() > by => {
                        bail!("{unseen} probe rows not queryable a minute after the load")
                    }
                    _ => tokio::time::sleep(PROBE_POLL).await,
                }
            }
            let mut lags: Vec<Duration> = lags.into_iter().flatten().collect();
            lags.sort();
            Ok(lags)
        });
        Ok(Probe { stop, task })
    }

    /// Stops writing, waits until every probe row is seen; the lags, sorted.
    async fn finish(self) -> anyhow::Result<Vec<Duration>> {
        let _ = self.stop.send(true);
        self.task.await?
    }
}

/// Builds `path`'s load, sends its first request before the clock starts
/// (it creates the table and every series; unless `--cold`), then the rest
/// over the path's connections.
async fn send_path(
    ctx: &Context,
    args: &Args,
    endpoints: &Endpoints,
    path: Path,
    db: &str,
) -> anyhow::Result<Sent> {
    let name = path.name();
    ctx.progress(format!("{name}: building the load"));
    let token = endpoints.token.clone().map(|t| format!("Token {t}"));
    match path {
        Path::Http => {
            let bodies = load::bodies(args.load.hosts, args.load.steps, args.load.lines_per_body);
            let url = format!(
                "{}/write?db={db}&durability={}",
                endpoints.http, args.durability
            );
            let client = http_client()?;
            let send = move |_: usize, body: String| {
                let mut request = client.post(&url).body(body);
                if let Some(token) = &token {
                    request = request.header("Authorization", token);
                }
                async move {
                    let response = request.send().await?;
                    if response.status() != reqwest::StatusCode::NO_CONTENT {
                        let status = response.status();
                        bail!(
                            "write answered {status}: {}",
                            response.text().await.unwrap_or_default()
                        );
                    }
                    Ok(())
                }
            };
            let sizes = |body: &String| (body.lines().count(), body.len());
            drive(ctx, name, bodies, args.connections, sizes, send).await
        }
        Path::GrpcLp | Path::GrpcPoints => {
            let requests: Vec<(PreEncoded, usize)> =
                load::bodies(args.load.hosts, args.load.steps, args.load.lines_per_body)
                    .into_iter()
                    .map(|body| {
                        let rows = body.lines().count();
                        let request = WriteRequest {
                            database: db.to_owned(),
                            data: Some(if path == Path::GrpcLp {
                                write_request::Data::LineProtocol(body.into())
                            } else {
                                write_request::Data::Points(load::points(&body))
                            }),
                            durability: proto_durability(args.durability).into(),
                            ..Default::default()
                        };
                        (
                            PreEncoded(prost::Message::encode_to_vec(&request).into()),
                            rows,
                        )
                    })
                    .collect();
            let url = endpoints.grpc.clone().context("no gRPC endpoint")?;
            let mut channels = Vec::new();
            for _ in 0..args.connections.max(1) {
                let channel = tonic::transport::Channel::from_shared(url.clone())?
                    .connect()
                    .await
                    .with_context(|| format!("connecting to {url}"))?;
                channels.push(channel);
            }
            let send = move |connection: usize, (request, _): (PreEncoded, usize)| {
                let mut client =
                    tonic::client::Grpc::new(channels[connection % channels.len()].clone())
                        .max_encoding_message_size(usize::MAX);
                let request = grpc_request(request, token.as_deref());
                async move {
                    client.ready().await?;
                    let codec = tonic_prost::ProstCodec::<PreEncoded, WriteResponse>::default();
                    let write = tonic::codegen::http::uri::PathAndQuery::from_static(
                        "/chingest.v1.Ingest/Write",
                    );
                    let reply = client.unary(request?, write, codec).await?.into_inner();
                    if reply.rejected > 0 {
                        bail!(
                            "{} rows rejected: {:?}",
                            reply.rejected,
                            reply.rejections.first()
                        );
                    }
                    Ok(())
                }
            };
            let sizes = |(request, rows): &(PreEncoded, usize)| (*rows, request.0.len());
            drive(ctx, name, requests, args.connections, sizes, send).await
        }
        Path::GrpcArrow => {
            let streams = load::arrow_streams(
                args.load.hosts,
                args.load.steps,
                args.batch_rows,
                args.arrow_streams,
                db,
                proto_durability(args.durability),
            )?;
            let clients = grpc_clients(endpoints, args.arrow_streams).await?;
            let send = move |connection: usize, stream: load::ArrowStream| {
                let mut client = clients[connection % clients.len()].clone();
                let request = grpc_request(tokio_stream::iter(stream.requests), token.as_deref());
                async move {
                    let reply = client.write_arrow(request?).await?.into_inner();
                    if reply.rows != stream.rows as u64 {
                        bail!("WriteArrow stored {} rows of {}", reply.rows, stream.rows);
                    }
                    Ok(())
                }
            };
            let sizes = |stream: &load::ArrowStream| {
                let bytes = stream
                    .requests
                    .iter()
                    .map(|r: &WriteArrowRequest| r.ipc.len())
                    .sum();
                (stream.rows, bytes)
            };
            drive(ctx, name, streams, args.arrow_streams, sizes, send).await
        }
    }
}

/// `durability` as the gRPC API spells it.
fn proto_durability(durability: Durability) -> chingest_proto::v1::Durability {
    use chingest_proto::v1::Durability as D;
    match durability {
        Durability::Fsync => D::Fsync,
        Durability::Os => D::Os,
        Durability::None => D::None,
        Durability::Visible => D::Visible,
    }
}

/// `connections` gRPC connections (one HTTP/2 connection each).
async fn grpc_clients(
    endpoints: &Endpoints,
    connections: usize,
) -> anyhow::Result<Arc<Vec<IngestClient<tonic::transport::Channel>>>> {
    let url = endpoints.grpc.clone().context("no gRPC endpoint")?;
    let limit = 256 << 20;
    let mut clients = Vec::new();
    for _ in 0..connections.max(1) {
        let client = IngestClient::connect(url.clone())
            .await
            .with_context(|| format!("connecting to {url}"))?
            .max_encoding_message_size(limit);
        clients.push(client);
    }
    Ok(Arc::new(clients))
}

fn grpc_request<T>(message: T, token: Option<&str>) -> anyhow::Result<tonic::Request<T>> {
    let mut request = tonic::Request::new(message);
    if let Some(token) = token {
        request
            .metadata_mut()
            .insert("authorization", token.parse()?);
    }
    Ok(request)
}

/// A `WriteRequest` encoded before the clock starts and sent as it is, so
/// that the client's protobuf encoding (on a 2-core machine, a large share
/// of a run for deep messages such as typed points) stays out of the timed
/// region, as remote-write bodies are compressed beforehand.
#[derive(Clone, Default, PartialEq)]
struct PreEncoded(bytes::Bytes);

impl std::fmt::Debug for PreEncoded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PreEncoded({} bytes)", self.0.len())
    }
}

impl prost::Message for PreEncoded {
    fn encode_raw(&self, buf: &mut impl prost::bytes::BufMut) {
        buf.put_slice(&self.0);
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: prost::encoding::WireType,
        buf: &mut impl prost::bytes::Buf,
        ctx: prost::encoding::DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        // Only ever sent, never received.
        prost::encoding::skip_field(wire_type, tag, buf, ctx)
    }

    fn encoded_len(&self) -> usize {
        self.0.len()
    }

    fn clear(&mut self) {
        self.0.clear();
    }
}
