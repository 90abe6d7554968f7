//! `pushit promql`: PromQL and Prometheus's HTTP API, chingest against
//! Prometheus 2.42 and VictoriaMetrics 1.79 on the same data. A day of
//! node-exporter scrapes (`node_cpu_seconds_total{cpu,instance,job,mode}`
//! of `--jobs` × `--instances` × `--cpus` × 8 modes, 1,000 series by
//! default, 15 s apart, ending on the last full hour) is generated
//! deterministically and loaded into chingest by remote write (the
//! in-process server, or `--url`), into a Prometheus by `promtool`'s
//! backfill (`--prometheus`) and into a VictoriaMetrics by the same
//! remote-write requests (`--victoriametrics`). Each server is then asked,
//! alone and idle, the issue's queries: a dashboard panel (one series'
//! `rate` over an hour at 15 s steps) by `--connections` clients for
//! `--seconds` (QPS, p50, p99); a `sum by (job)` of every series' `rate`
//! over the day at 1 m steps, and `/api/v1/series` and label values over
//! all time, `--repeat` times one at a time (median). Every query is asked
//! once untimed first; its answers must be of the same size (series and
//! points) on every server. Each query's row on chingest is its speed ÷
//! the faster peer's, and whether its target is met.
//!
//! `--dashboard` asks instead what a refreshing Grafana node-exporter
//! dashboard does, on `--hosts` hosts' node-exporter metrics: its panels
//! and variables one by one, all of them mixed, and whole refreshes
//! (promql_dashboard.rs makes the data and the requests). `--age` asks the
//! same panels over data of every age, now and moved back, cold (after a
//! restart) and warm (promql_age.rs). Every query is a
//! list of requests built before any clock starts and asked in turn, so
//! a moving range costs the clients nothing.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context as _};
use pushit::report::{column, Format};
use serde_json::json;

use super::client::{count, wait_visible};
use super::downsampling::wait_for_passes;
use super::peers::{prometheus, sample_of, victoriametrics, Peer};
use super::prom::write_all;
use super::promql_data::{Data, Requests, INTERVAL_MS, LOAD_CONNECTIONS, METRIC, MODES};
use super::promql_query::{Load, Query, Request, Target};
use super::query::{ask, hammer, rounds, Measured};
use super::server::{authorized, http_client, with_server, Endpoints, ServerArgs};
use super::{check_stored, millis_at, per_second, settle};
use super::{promql_age, promql_cardinality, promql_dashboard};
use crate::Context;

/// Flags of `pushit promql`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Jobs (`job` label: web, api, db, cache, batch, queue, auth, search).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u8).range(1..=8), conflicts_with = "dashboard")]
    jobs: u8,
    /// Instances of each job.
    #[arg(long, default_value_t = 5, conflicts_with = "dashboard")]
    instances: usize,
    /// CPUs of each instance, a series per CPU and mode (8 modes).
    #[arg(long, default_value_t = 5, conflicts_with = "dashboard")]
    cpus: usize,
    /// What a refreshing Grafana node-exporter dashboard asks instead, on
    /// `--hosts` hosts' node-exporter metrics: each panel and variable
    /// (a moving range, a host in turn), all of them mixed, and whole
    /// refreshes.
    #[arg(long)]
    dashboard: bool,
    /// The dashboard's panels over data of every age instead (e.g. a week:
    /// `--age --hours 168`): ranges of 6 h, 24 h and 7 d, now and `--back`
    /// hours back, each group's refresh cold (after a restart, the page
    /// cache emptied) and then warm; chingest run as a child process
    /// (`--chingest`), with its result cache and without.
    #[arg(long, conflicts_with_all = ["dashboard", "downsampled", "cardinality", "url"])]
    age: bool,
    /// With --age: the chingest binary to run, by default the one beside
    /// pushit.
    #[arg(long, value_name = "PATH", requires = "age")]
    pub(super) chingest: Option<PathBuf>,
    /// Long-range panels instead (`rate`, `max_over_time` of one series and
    /// a fleet's `sum by (job)` over the whole data at 1 h steps), chingest
    /// answering from a downsampled database (5 m and 1 h rollups, its rows
    /// kept: `3000d:5m`, `6000d:1h`) and, as `chingest-rows`, from one that
    /// is not: e.g. `--hours 720`.
    #[arg(long, conflicts_with = "dashboard")]
    downsampled: bool,
    /// With --downsampled: the downsampled database's levels,
    /// comma-separated (ages past the data's keep its rows; `:last` levels
    /// keep each bucket's last sample only).
    #[arg(long, default_value = "3000d:5m,6000d:1h", requires = "downsampled")]
    downsampled_levels: String,
    /// With --dashboard: every range moved this many hours back from the
    /// data's end (and the dashboard's last hour with it): panels over
    /// older times, e.g. `--hours 56 --back 48` asks about two days ago,
    /// past the recent samples (26 h by default). With --age: where the
    /// groups moved back end (default 48).
    #[arg(long)]
    pub(super) back: Option<usize>,
    /// With --dashboard or --age: hosts (`host-NN:9100`), 66 series each.
    #[arg(long, default_value_t = 20)]
    pub(super) hosts: usize,
    /// What Grafana asks of a Kubernetes-sized fleet instead: this many
    /// series of `http_requests_total{code,instance,job,namespace,path,pod}`
    /// (two a pod) over the last five minutes; a namespace's pods, a pod's
    /// series and rate, the 500s summed by path, label names
    /// (promql_cardinality.rs). E.g. 200000 or 1000000.
    #[arg(long, conflicts_with_all = ["dashboard", "downsampled"])]
    cardinality: Option<usize>,
    /// Hours of scrapes, 15 s apart, ending on the last full hour.
    #[arg(long, default_value_t = 24)]
    hours: usize,
    /// Concurrent clients asking the panel queries (with --dashboard, also
    /// the requests a refresh has in flight at once).
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// Seconds each panel query is asked on each server.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Times each other query is asked, one at a time (median reported).
    #[arg(long, default_value_t = 5, conflicts_with = "dashboard")]
    repeat: usize,
    /// Compare with a Prometheus: its binary (`promtool` beside it), by
    /// default /usr/bin/prometheus.
    #[arg(long, value_name = "PATH", num_args = 0..=1, default_missing_value = "/usr/bin/prometheus")]
    prometheus: Option<PathBuf>,
    /// Compare with a VictoriaMetrics: its binary, by default
    /// /usr/bin/victoria-metrics.
    #[arg(long, value_name = "PATH", num_args = 0..=1, default_missing_value = "/usr/bin/victoria-metrics")]
    victoriametrics: Option<PathBuf>,
    /// With --victoriametrics: also a VictoriaMetrics without its response
    /// cache (`-search.disableCache`), as a peer of its own. The cache
    /// answers a repeated range query without evaluating it again.
    #[arg(long, requires = "victoriametrics")]
    victoriametrics_uncached: bool,
    #[command(flatten)]
    server: ServerArgs,
}

/// The issue's queries over `data`.
fn queries(data: &Data) -> Vec<Query> {
    let end = data.end_ms() / 1000;
    let panel_series = &data.series[MODES.iter().position(|m| m.0 == "user").unwrap_or(0)];
    let label = |name: &str| {
        panel_series
            .iter()
            .find(|(label, _)| *label == name)
            .map_or_else(String::new, |(_, value)| value.clone())
    };
    let range = |query: String, seconds: i64, step: &str| Request {
        path: "/api/v1/query_range",
        params: vec![
            ("query", query),
            ("start", (end - seconds).to_string()),
            ("end", end.to_string()),
            ("step", step.to_owned()),
        ],
    };
    let all_time = |path| Request {
        path,
        params: Vec::new(),
    };
    let day = data.scrapes as i64 * INTERVAL_MS / 1000;
    vec![
        Query::single(
            "panel: rate of 1 series, 1 h @ 15 s".to_owned(),
            range(
                format!(
                    "rate({METRIC}{{instance=\"{}\",cpu=\"{}\",mode=\"{}\"}}[5m])",
                    label("instance"),
                    label("cpu"),
                    label("mode")
                ),
                3_600,
                "15s",
            ),
            Load::Concurrent,
            Target::Panel,
        ),
        Query::single(
            format!("sum by (job) (rate) of all, {} h @ 1 m", day / 3_600),
            range(format!("sum by (job) (rate({METRIC}[5m]))"), day, "60s"),
            Load::Repeated,
            Target::FasterPeer,
        ),
        Query::single(
            "series: all".to_owned(),
            Request {
                path: "/api/v1/series",
                params: vec![("match[]", "{__name__=~\".+\"}".to_owned())],
            },
            Load::Repeated,
            Target::Prometheus,
        ),
        Query::single(
            "label values: instance".to_owned(),
            all_time("/api/v1/label/instance/values"),
            Load::Repeated,
            Target::Prometheus,
        ),
        Query::single(
            "label values: __name__".to_owned(),
            all_time("/api/v1/label/__name__/values"),
            Load::Repeated,
            Target::Prometheus,
        ),
    ]
}

/// With `--downsampled`: panels over the whole data (less its first hour)
/// at 1 h steps, each range function reading one sample per 5 m bucket.
fn long_range_queries(data: &Data) -> Vec<Query> {
    let end = data.end_ms() / 1000;
    let span = data.scrapes as i64 * INTERVAL_MS / 1000 - 3_600;
    let series = &data.series[0];
    let selector: Vec<String> = series
        .iter()
        .filter(|(label, _)| *label != "__name__")
        .map(|(label, value)| format!("{label}=\"{value}\""))
        .collect();
    let one = format!("{METRIC}{{{}}}", selector.join(","));
    let days = span / 86_400;
    let range = |name: String, query: String| {
        let request = Request {
            path: "/api/v1/query_range",
            params: vec![
                ("query", query),
                ("start", (end - span).to_string()),
                ("end", end.to_string()),
                ("step", "3600".to_owned()),
            ],
        };
        Query::single(name, request, Load::Concurrent, Target::FasterPeer)
    };
    vec![
        range(
            format!("panel: rate of 1 series, {days} d @ 1 h"),
            format!("rate({one}[1h])"),
        ),
        range(
            format!("panel: max_over_time of 1 series, {days} d @ 1 h"),
            format!("max_over_time({one}[1h])"),
        ),
        range(
            format!("fleet: sum by (job) (rate) of all, {days} d @ 1 h"),
            format!("sum by (job) (rate({METRIC}[1h]))"),
        ),
    ]
}

/// What one server answered and measured for one query.
pub(super) struct Answered {
    /// Series (or label values) and points of its answer.
    pub(super) size: (usize, usize),
    pub(super) measured: Measured,
}

impl Answered {
    /// Queries per second under `--connections` clients, or one at a time.
    fn qps(&self) -> f64 {
        per_second(self.measured.queries, self.measured.elapsed)
    }

    /// What the targets compare: QPS (or rounds per second) under
    /// `--connections`, 1 ÷ the median latency of a query asked one at a
    /// time.
    fn speed(&self, query: &Query) -> f64 {
        match query.load {
            Load::Concurrent | Load::Rounds => self.qps(),
            Load::Repeated => 1e3 / millis_at(&self.measured.latencies, 0.5).max(1e-6),
        }
    }
}

pub(crate) fn run(ctx: &Context, args: &Args) -> anyhow::Result<()> {
    if args.instances == 0 || args.cpus == 0 || args.hosts == 0 || args.hours == 0 {
        bail!("--instances, --cpus, --hosts and --hours must be positive");
    }
    if args.back.is_some() && !(args.dashboard || args.age) {
        bail!("--back moves the ranges of --dashboard or --age");
    }
    if args.connections == 0 || args.seconds <= 0.0 || args.repeat == 0 {
        bail!("--connections, --seconds and --repeat must be positive");
    }
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as i64;
    // On the hour, a minute back: VictoriaMetrics hides the last 30 s.
    let data = match (args.dashboard || args.age, args.cardinality) {
        (true, _) => promql_dashboard::generate(args.hosts, args.hours, now_ms - 60_000),
        (false, Some(series)) => promql_cardinality::generate(series, now_ms - 60_000),
        (false, None) => Data::generate(
            usize::from(args.jobs),
            args.instances,
            args.cpus,
            args.hours,
            now_ms - 60_000,
        ),
    };
    ctx.progress(format!(
        "promql: {} series × {} scrapes = {} samples, ending {}",
        data.series.len(),
        data.scrapes,
        data.samples(),
        data.end_ms() / 1000
    ));
    if args.age {
        return promql_age::run(ctx, args, &data);
    }
    let queries = match (args.dashboard, args.downsampled) {
        _ if args.cardinality.is_some() => promql_cardinality::queries(&data),
        (true, _) => promql_dashboard::queries(&data, args.hosts, args.back.unwrap_or(0)),
        (false, true) => long_range_queries(&data),
        (false, false) => queries(&data),
    };
    let runtime = tokio::runtime::Runtime::new()?;
    // (server, its answers in query order)
    let mut servers: Vec<(&str, Vec<Answered>)> = Vec::new();
    let db = format!("pushit_promql_{}", std::process::id());
    let rolled = format!("{db}_rolled");
    let downsample = |config: &mut chingest_server::config::ServerConfig| {
        if args.downsampled {
            config.downsampling.period_ms = 1_000;
            let levels = args
                .downsampled_levels
                .split(',')
                .map(|l| l.trim().to_owned())
                .collect();
            config.downsampling.databases.insert(rolled.clone(), levels);
        }
    };
    let mut memory = Vec::new();
    let answers = runtime.block_on(with_server(
        ctx,
        &args.server,
        downsample,
        async |endpoints| {
            load_chingest(ctx, endpoints, &db, data.requests(), &data).await?;
            if !args.downsampled {
                settle(ctx, &ctx.connect()?)?;
                let answers =
                    ask_all(ctx, args, "chingest", endpoints, Some(&db), &queries).await?;
                let mut chingest = chingest_memory(endpoints, "chingest").await?;
                if args.server.url.is_none() {
                    chingest.note = IN_PROCESS.into();
                }
                memory.push(chingest);
                return Ok(vec![("chingest", answers)]);
            }
            load_chingest(ctx, endpoints, &rolled, data.requests(), &data).await?;
            ctx.progress("promql: waiting for two downsampling passes");
            wait_for_passes(endpoints, 2).await?;
            // Both databases as merged as the engine makes them: the one
            // loaded last has had less time.
            settle(ctx, &ctx.connect()?)?;
            let rows = ask_all(ctx, args, "chingest-rows", endpoints, Some(&db), &queries).await?;
            let rolled = ask_all(ctx, args, "chingest", endpoints, Some(&rolled), &queries).await?;
            Ok(vec![("chingest", rolled), ("chingest-rows", rows)])
        },
    ))?;
    servers.extend(answers);
    for peer in PeerToStart::of(args) {
        let name = peer.name();
        let answers = runtime.block_on(async {
            let peer = peer.start(ctx, &data).await?;
            let answers = ask_all(ctx, args, name, &peer.endpoints(), None, &queries).await;
            memory.push(peer_memory(name, &peer).await);
            answers
        })?;
        servers.push((name, answers));
    }
    report(ctx, args, "promql", &queries, &servers)?;
    report_memory(ctx, &memory, data.series.len());
    Ok(())
}

/// A peer `--prometheus` or `--victoriametrics` asks for.
pub(super) enum PeerToStart<'a> {
    Prometheus(&'a Path),
    VictoriaMetrics {
        name: &'static str,
        binary: &'a Path,
        flags: &'static [&'static str],
    },
}

impl<'a> PeerToStart<'a> {
    /// The peers `args` ask for, in the order they are measured.
    pub(super) fn of(args: &'a Args) -> Vec<PeerToStart<'a>> {
        let mut peers = Vec::new();
        if let Some(binary) = &args.prometheus {
            peers.push(PeerToStart::Prometheus(binary));
        }
        if let Some(binary) = &args.victoriametrics {
            peers.push(PeerToStart::VictoriaMetrics {
                name: "victoriametrics",
                binary,
                flags: &[],
            });
            if args.victoriametrics_uncached {
                peers.push(PeerToStart::VictoriaMetrics {
                    name: "victoriametrics-uncached",
                    binary,
                    flags: &["-search.disableCache"],
                });
            }
        }
        peers
    }

    pub(super) fn name(&self) -> &'static str {
        match self {
            PeerToStart::Prometheus(_) => "prometheus",
            PeerToStart::VictoriaMetrics { name, .. } => name,
        }
    }

    /// Starts it on `data`, loaded and idle.
    pub(super) async fn start(&self, ctx: &Context, data: &Data) -> anyhow::Result<Peer> {
        match self {
            PeerToStart::Prometheus(binary) => prometheus(ctx, binary, data).await,
            PeerToStart::VictoriaMetrics {
                name,
                binary,
                flags,
            } => victoriametrics(ctx, name, binary, flags, data.requests(), data).await,
        }
    }
}

/// The note on the memory of a chingest in pushit's own process.
const IN_PROCESS: &str =
    "pushit's process (with the generated data): use --url for the server's own";

/// How long each server is left idle after its queries before its memory
/// is read: what a query allocated is returned (Go's and jemalloc's
/// decay) alike on every server.
const MEMORY_SETTLE: std::time::Duration = std::time::Duration::from_secs(15);

/// One server's memory once its queries are answered.
pub(super) struct Memory {
    server: String,
    /// Private resident memory (`RssAnon`), bytes.
    rss_anon: Option<u64>,
    /// chingest's: its index of series and last values, bytes and series.
    index: Option<(f64, f64)>,
    /// chingest's: its recent samples, bytes and samples.
    recent: Option<(f64, f64)>,
    /// chingest's: its chunk cache's bytes.
    chunk_cache: Option<f64>,
    note: String,
}

/// A peer's memory, [`MEMORY_SETTLE`] after its queries.
pub(super) async fn peer_memory(server: &str, peer: &Peer) -> Memory {
    tokio::time::sleep(MEMORY_SETTLE).await;
    Memory {
        server: server.to_owned(),
        rss_anon: peer.rss_anon(),
        index: None,
        recent: None,
        chunk_cache: None,
        note: String::new(),
    }
}

/// chingest's memory from its `/metrics`, [`MEMORY_SETTLE`] after its
/// queries, reported as `server`.
pub(super) async fn chingest_memory(endpoints: &Endpoints, server: &str) -> anyhow::Result<Memory> {
    tokio::time::sleep(MEMORY_SETTLE).await;
    let text = authorized(
        endpoints,
        http_client()?.get(format!("{}/metrics", endpoints.http)),
    )
    .send()
    .await?
    .error_for_status()?
    .text()
    .await?;
    let metric = |name: &str| text.lines().find_map(|line| sample_of(line, name));
    let index = metric("chingest_last_value_bytes").zip(metric("chingest_last_value_series"));
    Ok(Memory {
        server: server.to_owned(),
        rss_anon: metric("chingest_process_resident_anon_bytes").map(|b| b as u64),
        index,
        recent: metric("chingest_recent_bytes").zip(metric("chingest_recent_samples")),
        chunk_cache: metric("chingest_chunk_cache_bytes"),
        note: String::new(),
    })
}

pub(super) fn report_memory(ctx: &Context, memory: &[Memory], series: usize) {
    let mut report = ctx.report(
        "promql-memory",
        vec![
            column("server", "server", Format::Text),
            column("RssAnon", "rss_anon_bytes", Format::Mib),
            column("bytes/series", "rss_anon_per_series", Format::Count),
            column("index", "index_bytes", Format::Mib),
            column(
                "index bytes/series",
                "index_bytes_per_series",
                Format::Count,
            ),
            column("recent", "recent_bytes", Format::Mib),
            column(
                "recent bytes/sample",
                "recent_bytes_per_sample",
                Format::Ratio,
            ),
            column("chunk cache", "chunk_cache_bytes", Format::Mib),
            column("note", "note", Format::Text),
        ],
    );
    for server in memory {
        let mut row = json!({
            "server": server.server,
            "rss_anon_bytes": server.rss_anon,
            "rss_anon_per_series": server.rss_anon.map(|b| b / series.max(1) as u64),
            "index_bytes": server.index.map(|(bytes, _)| bytes),
            "index_bytes_per_series": server.index.map(|(bytes, n)| (bytes / n.max(1.0)).round()),
            "recent_bytes": server.recent.map(|(bytes, _)| bytes),
            "recent_bytes_per_sample": server.recent.map(|(bytes, n)| bytes / n.max(1.0)),
            "chunk_cache_bytes": server.chunk_cache,
            "series": series,
        });
        if !server.note.is_empty() {
            row["note"] = server.note.as_str().into();
        }
        if let Some(fields) = row.as_object_mut() {
            fields.retain(|_, value| !value.is_null());
        }
        report.push(row);
    }
    report.finish();
}

/// Remote-writes `requests` into chingest's `db` and waits until every
/// sample is queryable.
pub(super) async fn load_chingest(
    ctx: &Context,
    endpoints: &Endpoints,
    db: &str,
    requests: Requests,
    data: &Data,
) -> anyhow::Result<()> {
    let write = format!("/api/v1/write?db={db}");
    let sent = write_all(
        ctx,
        "promql/chingest",
        endpoints,
        &write,
        requests,
        LOAD_CONNECTIONS,
    )
    .await?;
    let samples = data.samples() as u64;
    let queryable = wait_visible(endpoints, db, "prometheus", samples).await?;
    check_stored(
        &format!("{db}.prometheus"),
        samples,
        count(endpoints, db, "prometheus").await?,
    )?;
    ctx.progress(format!(
        "promql: chingest: {:.0} samples/s written, {:.1} s until queryable",
        per_second(sent.rows, sent.elapsed),
        queryable.duration_since(sent.started).as_secs_f64()
    ));
    Ok(())
}

/// Every query on one server: its first round untimed (the size of its
/// answers), then measured.
pub(super) async fn ask_all(
    ctx: &Context,
    args: &Args,
    server: &str,
    endpoints: &Endpoints,
    db: Option<&str>,
    queries: &[Query],
) -> anyhow::Result<Vec<Answered>> {
    let client = http_client()?;
    let mut answers = Vec::new();
    for query in queries {
        ctx.progress(format!("promql: {server}: {}", query.name));
        let urls = query
            .requests
            .iter()
            .map(|request| request.url(endpoints, db))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let get = |client: &reqwest::Client, url: &reqwest::Url| {
            authorized(endpoints, client.get(url.clone()))
        };
        let all = |client: &reqwest::Client| urls.iter().map(|url| get(client, url)).collect();
        let mut size = (0, 0);
        for (request, url) in query.requests.iter().zip(&urls).take(query.round) {
            let asked = async {
                let (_, body) = ask(get(&client, url)).await?;
                answer_size(&body)
            };
            let (series, points) = asked
                .await
                .with_context(|| format!("{server}: {}", request.text()))?;
            size = (size.0 + series, size.1 + points);
        }
        let measured = match query.load {
            Load::Concurrent => hammer(args.connections, args.seconds, |c| Some(all(c)), |_| 0)
                .await?
                .context("no request")?,
            Load::Rounds => rounds(args.connections, args.seconds, query.round, all).await?,
            Load::Repeated => {
                let started = Instant::now();
                let mut latencies = Vec::new();
                let mut bytes = 0;
                for k in 0..args.repeat {
                    let (took, body) = ask(get(&client, &urls[k % urls.len()])).await?;
                    latencies.push(took);
                    bytes += body.len();
                }
                Measured::gather(vec![(latencies, 0, bytes)], started.elapsed())
            }
        };
        answers.push(Answered { size, measured });
    }
    Ok(answers)
}

/// Series (or label values) and points in a successful answer of
/// Prometheus's HTTP API.
pub(super) fn answer_size(body: &[u8]) -> anyhow::Result<(usize, usize)> {
    let answer: serde_json::Value = serde_json::from_slice(body).context("not JSON")?;
    if answer["status"] != "success" {
        bail!("not a success: {answer}");
    }
    let data = &answer["data"];
    if let Some(items) = data.as_array() {
        return Ok((items.len(), 0));
    }
    let result = data["result"].as_array().context("no data.result")?;
    let points = result
        .iter()
        .map(|series| series["values"].as_array().map_or(1, Vec::len))
        .sum();
    Ok((result.len(), points))
}

/// The table: every query on every server, chingest's rows against the
/// peers; fails after it if some answer's size differs from chingest's.
/// chingest's servers (as shipped, and `chingest-…` variants) are
/// compared with the peers, never with each other.
pub(super) fn report(
    ctx: &Context,
    args: &Args,
    name: &'static str,
    queries: &[Query],
    servers: &[(&str, Vec<Answered>)],
) -> anyhow::Result<()> {
    let is_chingest = |server: &str| server.starts_with("chingest");
    let mut report = ctx.report(
        name,
        vec![
            column("query", "query", Format::Text),
            column("server", "server", Format::Text),
            column("series", "series", Format::Count),
            column("points", "points", Format::Count),
            column("QPS", "qps", Format::Ratio),
            column("p50", "p50_ms", Format::Millis),
            column("p99", "p99_ms", Format::Millis),
            column("chingest ÷", "chingest_over", Format::Times),
            column("target", "target", Format::Text),
            column("met", "met", Format::YesNo),
        ],
    );
    let mut differ = Vec::new();
    for (i, query) in queries.iter().enumerate() {
        let answered = |name: &str| {
            servers
                .iter()
                .find(|(server, _)| *server == name)
                .map(|(_, answers)| &answers[i])
        };
        let Some(chingest) = answered("chingest") else {
            continue;
        };
        let speed = chingest.speed(query);
        // `speed` over the fastest of `peers` that ran (`None`: every
        // peer).
        let over_peers = |speed: f64, peers: Option<&[&str]>| {
            servers
                .iter()
                .filter(|(server, _)| {
                    !is_chingest(server) && peers.is_none_or(|peers| peers.contains(server))
                })
                .map(|(_, answers)| answers[i].speed(query))
                .reduce(f64::max)
                .map(|peer| speed / peer)
        };
        for (server, answers) in servers {
            let answer = &answers[i];
            if answer.size != chingest.size {
                differ.push(format!(
                    "{}: {server} answered {:?} (series, points), chingest {:?}",
                    query.name, answer.size, chingest.size
                ));
            }
            let over = match is_chingest(server) {
                true => over_peers(answer.speed(query), None),
                false => Some(speed / answer.speed(query)),
            };
            let mut row = json!({
                "query": query.name,
                "server": server,
                "series": answer.size.0,
                "points": answer.size.1,
                "qps": answer.qps(),
                "queries": answer.measured.queries,
                "connections": match query.load {
                    Load::Repeated => 1,
                    Load::Concurrent | Load::Rounds => args.connections,
                },
                "p50_ms": millis_at(&answer.measured.latencies, 0.5),
                "p99_ms": millis_at(&answer.measured.latencies, 0.99),
                "chingest_over": over,
                "request": query.text(),
            });
            if let (true, Some(target)) = (is_chingest(server), query.target) {
                let p99 = millis_at(&answer.measured.latencies, 0.99);
                let over = over_peers(answer.speed(query), target.peers());
                row["target"] = target.text().into();
                row["met"] = over.map(|over| target.met(over, p99)).into();
            }
            // Without peers there is nothing to compare: no cell, not `null`.
            if let Some(fields) = row.as_object_mut() {
                fields.retain(|_, value| !value.is_null());
            }
            report.push(row);
        }
    }
    report.finish();
    if !differ.is_empty() {
        bail!("answers differ in size:\n{}", differ.join("\n"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answer_sizes() {
        let matrix = br#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{},"values":[[1,"1"],[2,"2"]]},{"metric":{},"values":[[1,"1"]]}]}}"#;
        assert_eq!(answer_size(matrix).unwrap(), (2, 3));
        let series = br#"{"status":"success","data":[{"__name__":"a"},{"__name__":"b"}]}"#;
        assert_eq!(answer_size(series).unwrap(), (2, 0));
        let error = br#"{"status":"error","errorType":"bad_data","error":"no"}"#;
        assert!(answer_size(error).is_err());
    }
}
