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

use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use pushit::report::{column, Format};
use serde_json::json;

use super::http::{count, wait_visible};
use super::prom::write_all;
use super::promql_data::{Data, Requests, INTERVAL_MS, LOAD_CONNECTIONS, METRIC, MODES};
use super::promql_peers::{prometheus, victoriametrics};
use super::query::{hammer, Measured};
use super::server::{authorized, http_client, with_server, Endpoints, ServerArgs};
use super::{check_stored, millis_at, per_second, settle};
use crate::Context;

/// Flags of `pushit promql`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Jobs (`job` label: web, api, db, cache, batch, queue, auth, search).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u8).range(1..=8))]
    jobs: u8,
    /// Instances of each job.
    #[arg(long, default_value_t = 5)]
    instances: usize,
    /// CPUs of each instance, a series per CPU and mode (8 modes).
    #[arg(long, default_value_t = 5)]
    cpus: usize,
    /// Hours of scrapes, 15 s apart, ending on the last full hour.
    #[arg(long, default_value_t = 24)]
    hours: usize,
    /// Concurrent clients asking the panel query.
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// Seconds the panel query is asked on each server.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Times each other query is asked, one at a time (median reported).
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    /// Compare with a Prometheus: its binary (`promtool` beside it), by
    /// default /usr/bin/prometheus.
    #[arg(long, value_name = "PATH", num_args = 0..=1, default_missing_value = "/usr/bin/prometheus")]
    prometheus: Option<std::path::PathBuf>,
    /// Compare with a VictoriaMetrics: its binary, by default
    /// /usr/bin/victoria-metrics.
    #[arg(long, value_name = "PATH", num_args = 0..=1, default_missing_value = "/usr/bin/victoria-metrics")]
    victoriametrics: Option<std::path::PathBuf>,
    /// With --victoriametrics: also a VictoriaMetrics without its response
    /// cache (`-search.disableCache`), as a peer of its own. The cache
    /// answers a repeated range query without evaluating it again.
    #[arg(long, requires = "victoriametrics")]
    victoriametrics_uncached: bool,
    #[command(flatten)]
    server: ServerArgs,
}

/// What a query's speed on chingest must be.
#[derive(Debug, Clone, Copy)]
enum Target {
    /// QPS ≥ 0.5× the faster peer's, and p99 ≤ 20 ms.
    Panel,
    /// Speed ≥ 1× the faster peer's.
    FasterPeer,
    /// Speed ≥ 1× Prometheus's.
    Prometheus,
}

impl Target {
    fn text(self) -> &'static str {
        match self {
            Target::Panel => "≥ 0.5× faster peer, p99 ≤ 20 ms",
            Target::FasterPeer => "≥ 1× faster peer",
            Target::Prometheus => "≥ 1× prometheus",
        }
    }
}

/// One query of the set, as an HTTP GET.
struct Query {
    name: String,
    /// Under the server's root, e.g. `/api/v1/query_range`.
    path: String,
    params: Vec<(&'static str, String)>,
    /// Asked by `--connections` clients for `--seconds` (QPS); otherwise
    /// `--repeat` times one at a time (latency).
    concurrent: bool,
    target: Target,
}

impl Query {
    /// Its request to `endpoints`, in chingest's database `db` if given.
    fn request(
        &self,
        client: &reqwest::Client,
        endpoints: &Endpoints,
        db: Option<&str>,
    ) -> reqwest::RequestBuilder {
        let request = client
            .get(format!("{}{}", endpoints.http, self.path))
            .query(&self.params);
        let request = match db {
            Some(db) => request.query(&[("db", db)]),
            None => request,
        };
        authorized(endpoints, request)
    }

    /// Its PromQL or selector, for the JSON rows.
    fn text(&self) -> String {
        let mut text = self.path.clone();
        for (name, value) in &self.params {
            text.push_str(&format!(" {name}={value}"));
        }
        text
    }
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
    let range = |query: String, seconds: i64, step: &str| {
        vec![
            ("query", query),
            ("start", (end - seconds).to_string()),
            ("end", end.to_string()),
            ("step", step.to_owned()),
        ]
    };
    let day = data.scrapes as i64 * INTERVAL_MS / 1000;
    let query_range = "/api/v1/query_range".to_owned();
    vec![
        Query {
            name: "panel: rate of 1 series, 1 h @ 15 s".to_owned(),
            path: query_range.clone(),
            params: range(
                format!(
                    "rate({METRIC}{{instance=\"{}\",cpu=\"{}\",mode=\"{}\"}}[5m])",
                    label("instance"),
                    label("cpu"),
                    label("mode")
                ),
                3_600,
                "15s",
            ),
            concurrent: true,
            target: Target::Panel,
        },
        Query {
            name: format!("sum by (job) (rate) of all, {} h @ 1 m", day / 3_600),
            path: query_range,
            params: range(format!("sum by (job) (rate({METRIC}[5m]))"), day, "60s"),
            concurrent: false,
            target: Target::FasterPeer,
        },
        Query {
            name: "series: all".to_owned(),
            path: "/api/v1/series".to_owned(),
            params: vec![("match[]", "{__name__=~\".+\"}".to_owned())],
            concurrent: false,
            target: Target::Prometheus,
        },
        Query {
            name: "label values: instance".to_owned(),
            path: "/api/v1/label/instance/values".to_owned(),
            params: Vec::new(),
            concurrent: false,
            target: Target::Prometheus,
        },
        Query {
            name: "label values: __name__".to_owned(),
            path: "/api/v1/label/__name__/values".to_owned(),
            params: Vec::new(),
            concurrent: false,
            target: Target::Prometheus,
        },
    ]
}

/// What one server answered and measured for one query.
struct Answered {
    /// Series (or label values) and points of its answer.
    size: (usize, usize),
    measured: Measured,
}

impl Answered {
    /// Queries per second under `--connections` clients, or one at a time.
    fn qps(&self) -> f64 {
        per_second(self.measured.queries, self.measured.elapsed)
    }

    /// What the targets compare: QPS of a concurrent query, 1 ÷ the median
    /// latency of the others.
    fn speed(&self, query: &Query) -> f64 {
        match query.concurrent {
            true => self.qps(),
            false => 1e3 / millis_at(&self.measured.latencies, 0.5).max(1e-6),
        }
    }
}

pub(crate) fn run(ctx: &Context, args: &Args) -> anyhow::Result<()> {
    if args.instances == 0 || args.cpus == 0 || args.hours == 0 {
        bail!("--instances, --cpus and --hours must be positive");
    }
    if args.connections == 0 || args.seconds <= 0.0 || args.repeat == 0 {
        bail!("--connections, --seconds and --repeat must be positive");
    }
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as i64;
    // On the hour, a minute back: VictoriaMetrics hides the last 30 s.
    let data = Data::generate(
        usize::from(args.jobs),
        args.instances,
        args.cpus,
        args.hours,
        now_ms - 60_000,
    );
    ctx.progress(format!(
        "promql: {} series × {} scrapes = {} samples, ending {}",
        data.series.len(),
        data.scrapes,
        data.samples(),
        data.end_ms() / 1000
    ));
    let queries = queries(&data);
    let runtime = tokio::runtime::Runtime::new()?;
    // (server, its answers in query order)
    let mut servers: Vec<(&str, Vec<Answered>)> = Vec::new();
    let db = format!("pushit_promql_{}", std::process::id());
    let answers = runtime.block_on(with_server(
        ctx,
        &args.server,
        |_| {},
        async |endpoints| {
            load_chingest(ctx, endpoints, &db, data.requests(), &data).await?;
            settle(ctx, &ctx.connect()?)?;
            ask_all(ctx, args, "chingest", endpoints, Some(&db), &queries).await
        },
    ))?;
    servers.push(("chingest", answers));
    if let Some(binary) = &args.prometheus {
        let answers = runtime.block_on(async {
            let peer = prometheus(ctx, binary, &data).await?;
            ask_all(ctx, args, "prometheus", &peer.endpoints(), None, &queries).await
        })?;
        servers.push(("prometheus", answers));
    }
    if let Some(binary) = &args.victoriametrics {
        let mut variants = vec![("victoriametrics", &[][..])];
        if args.victoriametrics_uncached {
            variants.push(("victoriametrics-uncached", &["-search.disableCache"][..]));
        }
        for (name, flags) in variants {
            let answers = runtime.block_on(async {
                let peer =
                    victoriametrics(ctx, name, binary, flags, data.requests(), &data).await?;
                ask_all(ctx, args, name, &peer.endpoints(), None, &queries).await
            })?;
            servers.push((name, answers));
        }
    }
    report(ctx, args, &queries, &servers)
}

/// Remote-writes `requests` into chingest's `db` and waits until every
/// sample is queryable.
async fn load_chingest(
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

/// Every query on one server: once untimed (its answer's size), then
/// measured.
async fn ask_all(
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
        let (_, body) = ask(query.request(&client, endpoints, db))
            .await
            .with_context(|| format!("{server}: {}", query.text()))?;
        let size = answer_size(&body).with_context(|| format!("{server}: {}", query.text()))?;
        let measured = match query.concurrent {
            true => {
                let request = |client: &reqwest::Client| Some(query.request(client, endpoints, db));
                hammer(args.connections, args.seconds, request, |_| 0)
                    .await?
                    .context("no request")?
            }
            false => {
                let started = Instant::now();
                let mut latencies = Vec::new();
                let mut bytes = 0;
                for _ in 0..args.repeat {
                    let (took, body) = ask(query.request(&client, endpoints, db)).await?;
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

/// Sends `request`; its time until the whole answer is in, and the answer.
async fn ask(request: reqwest::RequestBuilder) -> anyhow::Result<(Duration, bytes::Bytes)> {
    let sent = Instant::now();
    let response = request.send().await?;
    let status = response.status();
    let body = response.bytes().await?;
    if !status.is_success() {
        bail!("{status}: {}", String::from_utf8_lossy(&body));
    }
    Ok((sent.elapsed(), body))
}

/// Series (or label values) and points in a successful answer of
/// Prometheus's HTTP API.
fn answer_size(body: &[u8]) -> anyhow::Result<(usize, usize)> {
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
fn report(
    ctx: &Context,
    args: &Args,
    queries: &[Query],
    servers: &[(&str, Vec<Answered>)],
) -> anyhow::Result<()> {
    let mut report = ctx.report(
        "promql",
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
        let peers: Vec<(&str, &Answered)> = servers
            .iter()
            .filter(|(server, _)| *server != "chingest")
            .map(|(server, answers)| (*server, &answers[i]))
            .collect();
        let faster_peer = peers
            .iter()
            .map(|(_, answered)| answered.speed(query))
            .fold(None, |best: Option<f64>, s| {
                Some(best.map_or(s, |b| b.max(s)))
            });
        let over_faster = faster_peer.map(|peer| speed / peer);
        let p99 = millis_at(&chingest.measured.latencies, 0.99);
        let met = match query.target {
            Target::Panel => over_faster.map(|ratio| ratio >= 0.5 && p99 <= 20.0),
            Target::FasterPeer => over_faster.map(|ratio| ratio >= 1.0),
            Target::Prometheus => answered("prometheus").map(|p| speed / p.speed(query) >= 1.0),
        };
        for (server, answers) in servers {
            let answer = &answers[i];
            if answer.size != chingest.size {
                differ.push(format!(
                    "{}: {server} answered {:?} (series, points), chingest {:?}",
                    query.name, answer.size, chingest.size
                ));
            }
            let is_chingest = *server == "chingest";
            let over = match is_chingest {
                true => over_faster,
                false => Some(speed / answer.speed(query)),
            };
            let mut row = json!({
                "query": query.name,
                "server": server,
                "series": answer.size.0,
                "points": answer.size.1,
                "qps": answer.qps(),
                "queries": answer.measured.queries,
                "connections": if query.concurrent { args.connections } else { 1 },
                "p50_ms": millis_at(&answer.measured.latencies, 0.5),
                "p99_ms": millis_at(&answer.measured.latencies, 0.99),
                "chingest_over": over,
                "request": query.text(),
            });
            if is_chingest {
                row["target"] = query.target.text().into();
                row["met"] = met.into();
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
