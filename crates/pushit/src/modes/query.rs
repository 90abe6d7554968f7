//! `pushit query`: queries at concurrency N over keep-alive HTTP, in the
//! shape of `clickhouse-benchmark`. TSBS cpu-only rows are loaded first
//! (through `/write`); then each query runs on `--connections` connections
//! for `--seconds` on every HTTP [`Path`] the server offers (`/sql`, the
//! ClickHouse HTTP interface, and `/query` for the queries that have an
//! InfluxQL form), and is reported with its QPS, result rows/s, MiB/s and
//! latency percentiles, each path against `/sql`. With the in-process
//! server, the same SQL then runs as long on as many threads straight on
//! the engine, and every path is reported against it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use pushit::chart::{bars_svg, BarGroup};
use pushit::report::{column, Format};
use serde_json::json;

use super::server::{authorized, http_client, sql, with_server, Endpoints, ServerArgs};
use super::{load, millis_at};
use crate::Context;

/// Flags of `pushit query`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    load: load::LoadArgs,
    /// Concurrent keep-alive connections (and engine threads).
    #[arg(long, default_value_t = 8)]
    connections: usize,
    /// Seconds each query runs, on each side.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Queries to run instead of the built-in set (repeat the flag). `{db}`
    /// names the loaded database, `{series_id}` one host's series, `{host}`
    /// its hostname, `{start}` the first timestamp (as a DateTime64 literal).
    #[arg(long = "query", value_name = "SQL")]
    queries: Vec<String>,
    /// Where to write the SVG chart of QPS per query: each HTTP path and the
    /// engine.
    #[arg(long, value_name = "PATH", default_value = "pushit-query.svg")]
    chart: std::path::PathBuf,
    /// Do not write a chart.
    #[arg(long)]
    no_chart: bool,
    #[command(flatten)]
    server: ServerArgs,
}

/// One query of the set: its SQL (over `/sql`, the ClickHouse interface
/// and, unless it reads chingest's own `last_values`, the engine) and,
/// where InfluxQL says the same, its InfluxQL (over `/query`).
struct Query {
    name: String,
    sql: String,
    influxql: Option<String>,
}

/// The built-in set: (name, SQL, InfluxQL).
const BUILT_IN: &[(&str, &str, Option<&str>)] = &[
    ("select-1", "SELECT 1", None),
    (
        "last-point-by-series-id",
        "SELECT * FROM {db}.`cpu.autogen` WHERE series_id = {series_id} ORDER BY time DESC LIMIT 1",
        None,
    ),
    (
        "last-point-by-host-tag",
        "SELECT * FROM {db}.cpu WHERE hostname = '{host}' ORDER BY time DESC LIMIT 1",
        None,
    ),
    // Served by chingest from its last-value cache (no engine side).
    (
        "last-values-by-host-tag",
        "SELECT * FROM last_values('{db}', 'cpu') WHERE hostname = '{host}'",
        Some("SELECT last(*) FROM {db}..cpu WHERE hostname = '{host}'"),
    ),
    (
        "last-value-by-host-tag",
        "SELECT usage_user FROM last_values('{db}', 'cpu') WHERE hostname = '{host}'",
        Some("SELECT last(usage_user) FROM {db}..cpu WHERE hostname = '{host}'"),
    ),
    (
        "1h-avg-per-minute",
        "SELECT toStartOfMinute(time) AS minute, avg(usage_user) FROM {db}.`cpu.autogen` \
         WHERE series_id = {series_id} AND time >= {start} AND time < {start} + INTERVAL 1 HOUR \
         GROUP BY minute ORDER BY minute",
        // What Grafana's InfluxDB data source sends for a panel.
        Some(
            "SELECT mean(usage_user) FROM {db}..cpu WHERE hostname = '{host}' \
             AND time >= {start_ns} AND time < {start_ns} + 1h GROUP BY time(1m) fill(null)",
        ),
    ),
    (
        "max-per-host",
        "SELECT hostname, max(usage_user) FROM {db}.cpu GROUP BY hostname",
        Some("SELECT max(usage_user) FROM {db}..cpu GROUP BY hostname"),
    ),
];

/// A way a query reaches the server over HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    /// `POST /sql?format=TabSeparated`, the statement as the body.
    Sql,
    /// `POST /` of the ClickHouse HTTP interface, the statement as the body
    /// (TabSeparated, its default), the token as the Basic auth password.
    ClickHouse,
    /// `GET /query?q=` with the query's InfluxQL form.
    InfluxQl,
}

impl Path {
    /// Every path, `/sql` (the reference) first.
    const ALL: [Path; 3] = [Path::Sql, Path::ClickHouse, Path::InfluxQl];

    /// Its name in the report and the chart.
    fn name(self) -> &'static str {
        match self {
            Path::Sql => "sql",
            Path::ClickHouse => "clickhouse",
            Path::InfluxQl => "influxql",
        }
    }

    /// The request that sends `query` this way; `None` when the server
    /// does not offer the path or the query has no form for it.
    fn request(
        self,
        client: &reqwest::Client,
        endpoints: &Endpoints,
        query: &Query,
    ) -> Option<reqwest::RequestBuilder> {
        let request = match self {
            Path::Sql => authorized(
                endpoints,
                client.post(format!("{}/sql?format=TabSeparated", endpoints.http)),
            ),
            Path::ClickHouse => {
                let request = client.post(format!("{}/", endpoints.clickhouse.as_ref()?));
                match &endpoints.token {
                    Some(token) => request.basic_auth("default", Some(token)),
                    None => request,
                }
            }
            Path::InfluxQl => {
                let url = format!("{}/query", endpoints.http);
                let request = client.get(url).query(&[("q", query.influxql.as_ref()?)]);
                return Some(authorized(endpoints, request));
            }
        };
        Some(request.body(query.sql.clone()))
    }

    /// Rows in one answer: lines of TabSeparated, or the rows of every
    /// series of InfluxDB's JSON.
    fn rows(self, body: &[u8]) -> usize {
        match self {
            Path::Sql | Path::ClickHouse => body.iter().filter(|&&b| b == b'\n').count(),
            Path::InfluxQl => serde_json::from_slice::<serde_json::Value>(body)
                .ok()
                .and_then(|answer| {
                    let series = answer["results"][0]["series"].as_array()?.clone();
                    Some(
                        series
                            .iter()
                            .map(|s| s["values"].as_array().map_or(0, Vec::len))
                            .sum(),
                    )
                })
                .unwrap_or(0),
        }
    }
}

/// What one side measured for one query.
pub(super) struct Measured {
    pub(super) queries: usize,
    pub(super) rows: usize,
    pub(super) bytes: usize,
    pub(super) elapsed: Duration,
    /// Sorted.
    pub(super) latencies: Vec<Duration>,
}

/// What one connection or thread measured: latencies, result rows, bytes.
type Part = (Vec<Duration>, usize, usize);

impl Measured {
    pub(super) fn gather(parts: Vec<Part>, elapsed: Duration) -> Measured {
        let mut all = Measured {
            queries: 0,
            rows: 0,
            bytes: 0,
            elapsed,
            latencies: Vec::new(),
        };
        for (latencies, rows, bytes) in parts {
            all.queries += latencies.len();
            all.latencies.extend(latencies);
            all.rows += rows;
            all.bytes += bytes;
        }
        all.latencies.sort();
        all
    }
}

pub(crate) fn run(ctx: &Context, args: &Args) -> anyhow::Result<()> {
    if args.connections == 0 || args.seconds <= 0.0 {
        bail!("--connections and --seconds must be positive");
    }
    let mut report = ctx.report(
        "query",
        vec![
            column("query", "query", Format::Text),
            column("side", "side", Format::Text),
            column("QPS", "qps", Format::Count),
            column("rows/s", "rows_per_s", Format::Count),
            column("MiB/s", "mib_per_s", Format::Ratio),
            column("p50", "p50_ms", Format::Millis),
            column("p90", "p90_ms", Format::Millis),
            column("p99", "p99_ms", Format::Millis),
            column("p99.9", "p99_9_ms", Format::Millis),
            column("p99.99", "p99_99_ms", Format::Millis),
            column("÷ /sql", "over_sql", Format::Ratio),
            column("÷ engine", "over_engine", Format::Ratio),
        ],
    );
    let queries: Vec<Query> = match args.queries.is_empty() {
        true => BUILT_IN
            .iter()
            .map(|(name, sql, influxql)| Query {
                name: name.to_string(),
                sql: sql.to_string(),
                influxql: influxql.map(str::to_owned),
            })
            .collect(),
        false => args
            .queries
            .iter()
            .enumerate()
            .map(|(i, sql)| Query {
                name: format!("query-{}", i + 1),
                sql: sql.clone(),
                influxql: None,
            })
            .collect(),
    };
    let mut groups: Vec<BarGroup> = Vec::new();
    let runtime = tokio::runtime::Runtime::new()?;
    // Every connection's statement runs at once, as the engine side runs
    // one per thread; a server at `--url` queues those past its
    // `query.max_concurrent`, which shows in the latencies.
    let admit_all = |config: &mut chingest_server::config::ServerConfig| {
        config.query.max_concurrent = config.query.max_concurrent.max(args.connections);
    };
    runtime.block_on(with_server(
        ctx,
        &args.server,
        admit_all,
        async |endpoints| {
            let db = format!("pushit_query_{}", std::process::id());
            ctx.progress(format!(
                "query: loading {} rows into {db}",
                args.load.hosts * args.load.steps
            ));
            let values = load_data(args, endpoints, &db).await?;
            for template in &queries {
                let name = &template.name;
                let query = Query {
                    name: name.clone(),
                    sql: fill(&template.sql, &values),
                    influxql: template.influxql.as_deref().map(|q| fill(q, &values)),
                };
                let sql = &query.sql;
                let mut sides: Vec<(&str, Measured)> = Vec::new();
                for path in Path::ALL {
                    ctx.progress(format!("query: {name} over {}", path.name()));
                    if let Some(m) = over_http(args, endpoints, path, &query).await? {
                        sides.push((path.name(), m));
                    }
                }
                // chingest's own table function: the engine alone has no
                // such thing to compare with.
                let on_chingest_only = template.sql.contains("last_values(");
                if args.server.url.is_none() && !on_chingest_only {
                    ctx.progress(format!("query: {name} on the engine"));
                    let m = on_engine(&ctx.data_dir, sql, args.connections, args.seconds)?;
                    sides.push(("engine", m));
                }
                let qps = |m: &Measured| m.queries as f64 / m.elapsed.as_secs_f64();
                let qps_of =
                    |side: &str| sides.iter().find(|(s, _)| *s == side).map(|(_, m)| qps(m));
                let (sql_qps, engine_qps) = (qps_of(Path::Sql.name()), qps_of("engine"));
                groups.push(BarGroup {
                    label: name.clone(),
                    bars: sides
                        .iter()
                        .map(|(side, m)| (side.to_string(), qps(m)))
                        .collect(),
                });
                for (side, m) in &sides {
                    let seconds = m.elapsed.as_secs_f64();
                    let at = |q: f64| millis_at(&m.latencies, q);
                    report.push(json!({
                        "query": name,
                        "side": side,
                        "connections": args.connections,
                        "queries": m.queries,
                        "qps": qps(m),
                        "rows_per_s": m.rows as f64 / seconds,
                        "mib_per_s": m.bytes as f64 / seconds / (1 << 20) as f64,
                        "p50_ms": at(0.50),
                        "p90_ms": at(0.90),
                        "p99_ms": at(0.99),
                        "p99_9_ms": at(0.999),
                        "p99_99_ms": at(0.9999),
                        "over_sql": sql_qps.map(|s| qps(m) / s),
                        "over_engine": engine_qps.map(|e| qps(m) / e),
                        "sql": sql,
                    }));
                }
            }
            Ok(())
        },
    ))?;
    report.finish();
    if !args.no_chart {
        let title = format!(
            "pushit query: {} connections, {} cores",
            args.connections,
            std::thread::available_parallelism().map_or(1, |n| n.get())
        );
        bars_svg(&args.chart, &title, "queries/s", &groups)?;
        ctx.progress(format!("query: chart written to {}", args.chart.display()));
    }
    Ok(())
}

/// Loads the TSBS rows; returns the placeholders' values.
async fn load_data(
    args: &Args,
    endpoints: &Endpoints,
    db: &str,
) -> anyhow::Result<Vec<(&'static str, String)>> {
    let client = http_client()?;
    load::post_all(&args.load, endpoints, db).await?;
    let host = "host_7";
    let series_id = sql(
        &client,
        endpoints,
        &format!("SELECT series_id FROM {db}._series FINAL WHERE tags['hostname'] = '{host}'"),
    )
    .await?;
    let start = format!("toDateTime64({:.9}, 9, 'UTC')", tsbs::START_NS as f64 / 1e9);
    Ok(vec![
        ("{start_ns}", tsbs::START_NS.to_string()),
        ("{db}", db.to_owned()),
        ("{series_id}", series_id.trim().to_owned()),
        ("{host}", host.to_owned()),
        ("{start}", start),
    ])
}

fn fill(template: &str, values: &[(&str, String)]) -> String {
    values
        .iter()
        .fold(template.to_owned(), |sql, (name, value)| {
            sql.replace(name, value)
        })
}

/// `query` over `path` on `connections` keep-alive connections (one client
/// each) for `seconds`; `None` when the server does not offer `path`.
async fn over_http(
    args: &Args,
    endpoints: &Endpoints,
    path: Path,
    query: &Query,
) -> anyhow::Result<Option<Measured>> {
    let requests = |client: &reqwest::Client| Some(vec![path.request(client, endpoints, query)?]);
    hammer(args.connections, args.seconds, requests, move |body| {
        path.rows(body)
    })
    .await
}

/// A client of one keep-alive connection: a connection of a measured load.
fn keep_alive_client() -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(1)
        .build()
}

/// Sends requests over and over on `connections` keep-alive connections
/// (one client each) for `seconds`, each connection waiting for its answer
/// before it asks again. `requests` builds a client's requests once, up
/// front; the k-th request sent (counted over all connections) is the
/// k-th of that list, round and round. `rows` counts an answer's rows.
/// `None` when `requests` has none to send.
pub(super) async fn hammer(
    connections: usize,
    seconds: f64,
    requests: impl Fn(&reqwest::Client) -> Option<Vec<reqwest::RequestBuilder>>,
    rows: impl Fn(&[u8]) -> usize + Copy + Send + 'static,
) -> anyhow::Result<Option<Measured>> {
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let started = Instant::now();
    let next = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..connections {
        let client = keep_alive_client()?;
        let Some(requests) = requests(&client).filter(|requests| !requests.is_empty()) else {
            return Ok(None);
        };
        let next = Arc::clone(&next);
        workers.push(tokio::spawn(async move {
            let mut measured = (Vec::new(), 0usize, 0usize);
            while Instant::now() < deadline {
                let k = next.fetch_add(1, Ordering::Relaxed);
                let request = requests[k % requests.len()]
                    .try_clone()
                    .context("a request without a stream body")?;
                let (took, body) = ask(request).await?;
                measured.0.push(took);
                measured.1 += rows(&body);
                measured.2 += body.len();
            }
            anyhow::Ok(measured)
        }));
    }
    let mut parts = Vec::new();
    for worker in workers {
        parts.push(worker.await??);
    }
    Ok(Some(Measured::gather(parts, started.elapsed())))
}

/// Sends rounds of `round` requests, one round after another, for
/// `seconds`: a round's requests at once, up to `connections` at a time
/// (a free connection takes the round's next request), as a browser
/// refreshes a dashboard's panels. `requests` builds a client's requests
/// once, up front; round r is requests `r × round` to `(r + 1) × round`
/// of that list, round and round. Each latency is a whole round's, from
/// its first request sent to its last answer in.
pub(super) async fn rounds(
    connections: usize,
    seconds: f64,
    round: usize,
    requests: impl Fn(&reqwest::Client) -> Vec<reqwest::RequestBuilder>,
) -> anyhow::Result<Measured> {
    if round == 0 {
        bail!("a round of no requests");
    }
    let mut clients = Vec::new();
    for _ in 0..connections.clamp(1, round) {
        clients.push(Arc::new(requests(&keep_alive_client()?)));
    }
    let all = clients[0].len();
    if all < round {
        bail!("{all} requests make no round of {round}");
    }
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let started = Instant::now();
    let (mut latencies, mut bytes, mut first) = (Vec::new(), 0, 0);
    while Instant::now() < deadline {
        let sent = Instant::now();
        let next = Arc::new(AtomicUsize::new(0));
        let workers: Vec<_> = clients
            .iter()
            .map(|requests| {
                let (requests, next) = (Arc::clone(requests), Arc::clone(&next));
                tokio::spawn(async move {
                    let mut bytes = 0;
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= round {
                            return anyhow::Ok(bytes);
                        }
                        let request = requests[(first + i) % all]
                            .try_clone()
                            .context("a request without a stream body")?;
                        bytes += ask(request).await?.1.len();
                    }
                })
            })
            .collect();
        for worker in workers {
            bytes += worker.await??;
        }
        latencies.push(sent.elapsed());
        first += round;
    }
    Ok(Measured::gather(
        vec![(latencies, 0, bytes)],
        started.elapsed(),
    ))
}

/// Sends `request`; its time until the whole answer is in, and the answer.
/// Fails unless the server answers 2xx.
pub(super) async fn ask(
    request: reqwest::RequestBuilder,
) -> anyhow::Result<(Duration, bytes::Bytes)> {
    let sent = Instant::now();
    let response = request.send().await?;
    let status = response.status();
    let body = response.bytes().await?;
    if !status.is_success() {
        bail!("{status}: {}", String::from_utf8_lossy(&body));
    }
    Ok((sent.elapsed(), body))
}

/// `sql` on `threads` engine connections of this process for `seconds`.
fn on_engine(
    data_dir: &std::path::Path,
    sql: &str,
    threads: usize,
    seconds: f64,
) -> anyhow::Result<Measured> {
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (stop, sql, data_dir) = (Arc::clone(&stop), sql.to_owned(), data_dir.to_owned());
            std::thread::spawn(move || -> anyhow::Result<Part> {
                let conn = pushit::engine::RawConnection::open(&data_dir)?;
                let mut measured = (Vec::new(), 0, 0);
                while !stop.load(Ordering::Relaxed) {
                    let sent = Instant::now();
                    let output = conn.query(&sql)?;
                    measured.0.push(sent.elapsed());
                    measured.1 += output.iter().filter(|&&b| b == b'\n').count();
                    measured.2 += output.len();
                }
                Ok(measured)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    stop.store(true, Ordering::Relaxed);
    let parts = workers
        .into_iter()
        .map(|worker| worker.join().expect("engine thread"))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(Measured::gather(parts, started.elapsed()))
}
