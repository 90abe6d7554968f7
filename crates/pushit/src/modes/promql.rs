//! `pushit promql`: PromQL and Prometheus's HTTP API, chingest against
//! Prometheus 2.42 and VictoriaMetrics 1.79 on the same data. A day of
//! node-exporter scrapes (`node_cpu_seconds_total{cpu,instance,job,mode}`
//! of `--jobs` × `--instances` × `--cpus` × 8 modes, 1,000 series by
//! default, 15 s apart, ending on the last full hour) is generated
//! deterministically and loaded into chingest by remote write (the
//! in-process server, or `--url`), into a Prometheus by `promtool`'s
//! backfill (`--prometheus`) and into a VictoriaMetrics by the same
//! remote-write requests (`--victoriametrics`). Each server is then asked,
//! alone and idle, the queries: a dashboard panel (one series'
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

use anyhow::bail;

use super::downsampling::wait_for_passes;
use super::promql_data::{Data, INTERVAL_MS, METRIC, MODES};
pub(crate) use super::promql_measure::Args;
use super::promql_measure::{
    ask_all, chingest_memory, load_chingest, peer_memory, report, report_memory, Answered,
    PeerToStart, IN_PROCESS,
};
use super::promql_query::{Load, Query, Request, Target};
use super::server::with_server;
use super::settle;
use super::{promql_age, promql_cardinality, promql_dashboard, promql_rules};
use crate::Context;

/// The queries over `data`.
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

/// How often chingest evaluates the rules of `--rules`.
const RULES_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

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
        _ if args.rules => promql_rules::queries(&data),
        (true, _) => promql_dashboard::queries(&data, args.hosts, args.back.unwrap_or(0)),
        (false, true) => long_range_queries(&data),
        (false, false) => queries(&data),
    };
    let runtime = tokio::runtime::Runtime::new()?;
    // (server, its answers in query order)
    let mut servers: Vec<(&str, Vec<Answered>)> = Vec::new();
    let db = format!("pushit_promql_{}", std::process::id());
    let rolled = format!("{db}_rolled");
    let levels: Vec<&str> = args.downsampled_levels.split(',').map(str::trim).collect();
    let levels = chingest::Downsampling::parse(&levels)?;
    // With --rules, chingest evaluates the group every 5 s, looking back
    // to the data's end.
    let rule_file = ctx.data_dir.join("pushit-rules.yml");
    let offset_s = (now_ms - data.end_ms()) / 1000;
    std::fs::write(
        &rule_file,
        promql_rules::rule_file(RULES_INTERVAL.as_secs(), offset_s),
    )?;
    let downsample = |config: &mut chingest_server::config::ServerConfig| {
        if args.downsampled {
            config.downsampling.period = std::time::Duration::from_secs(1);
            config.downsampling.databases.insert(rolled.clone(), levels);
        }
        if args.rules {
            config.rules.files = vec![rule_file.display().to_string()];
            config.rules.database = db.clone();
            config.promql.default_database = db.clone();
        }
    };
    let mut evaluated = Vec::new();
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
                if args.rules {
                    ctx.progress("promql: chingest evaluating the rules itself");
                    evaluated = promql_rules::evaluated(endpoints, RULES_INTERVAL, 5).await?;
                }
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
    if !evaluated.is_empty() {
        println!("\nchingest's evaluation of the group (median of 5, query and write-back):");
        for (record, seconds, series) in &evaluated {
            println!(
                "  {record:<58} {:>9.2} ms  {series} series",
                seconds * 1000.0
            );
        }
    }
    report_memory(ctx, &memory, data.series.len());
    Ok(())
}
