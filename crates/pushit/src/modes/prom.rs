//! `pushit prom`: Prometheus remote write 1.0 as Prometheus sends it. A
//! scrape load — `--targets` targets × `--series-per-target` series (100
//! metric families of node-exporter shape per target), scraped `--scrapes`
//! times 15 s apart — is cut into requests of `--samples-per-request`
//! samples from as many series, each a snappy-compressed `WriteRequest`
//! built before the clock starts, and posted to `/api/v1/write` over
//! `--connections` keep-alive connections. Reports samples/s until the last
//! request is answered and until every sample is queryable (after asking
//! the receiver to flush: one sample more written `visible` to chingest,
//! `/internal/force_flush` to VictoriaMetrics), and (with the
//! in-process server) bytes per sample on disk once merged. With
//! `--victoriametrics URL` the same requests then go to a VictoriaMetrics,
//! over as many connections, for a second row measured the same way.

use anyhow::{bail, Context as _};
use chingest_proto::prometheus::{Label, Sample, TimeSeries, WriteRequest};
use prost::Message;
use pushit::report::{column, Format};
use serde_json::json;

use super::client::counter;
use super::client::{bytes_per_value, count, drive, wait_visible, Sent};
use super::server::{authorized, http_client, with_server, Endpoints, ServerArgs};
use super::{check_stored, millis_at, per_second};
use crate::Context;

/// Flags of `pushit prom`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Scrape targets (`instance` label).
    #[arg(long, default_value_t = 100)]
    targets: usize,
    /// Series per target, in metric families of 10 series each.
    #[arg(long, default_value_t = 1_000)]
    series_per_target: usize,
    /// Scrapes of every target, 15 s apart.
    #[arg(long, default_value_t = 10)]
    scrapes: usize,
    /// Samples per request (Prometheus's `max_samples_per_send`).
    #[arg(long, default_value_t = 500)]
    samples_per_request: usize,
    /// Concurrent keep-alive connections (Prometheus's shards).
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// A VictoriaMetrics (e.g. http://127.0.0.1:8428, started with a
    /// `-retentionPeriod` that keeps 2016's samples) to send the same
    /// requests to after chingest, for comparison.
    #[arg(long, value_name = "URL")]
    victoriametrics: Option<String>,
    /// Evaluate recording and alerting rules while the load runs, every
    /// this many seconds (in-process server only): 3 recording rules and
    /// an alert over the loaded series (1,000 to 10,000 of them each, what
    /// they record written to `pushit_prom_rules`), their
    /// queries looking back to the samples' time (RULES_FILE). With and
    /// without: what rules cost ingest.
    #[arg(long, value_name = "SECONDS", conflicts_with = "url")]
    rules_every: Option<u64>,
    #[command(flatten)]
    server: ServerArgs,
}

/// The rules `--rules-every` evaluates: `{every}` and `{offset}` (s) are
/// filled in.
const RULES_FILE: &str = r#"groups:
- name: load
  interval: {every}s
  query_offset: {offset}s
  rules:
  - record: instance:node_metric_0:rate5m
    expr: sum by (instance) (rate(node_metric_0_total[5m]))
  - record: instance:node_metric_1:sum
    expr: sum by (instance) (node_metric_1_total)
  - record: fleet:node_metric:count
    expr: count({__name__=~"node_metric_[0-9]_total"})
  - alert: Busy
    expr: sum by (instance) (rate(node_metric_2_total[5m])) > 0
"#;

const DATABASE: &str = "pushit_prom";
const SCRAPE_INTERVAL_MS: i64 = 15_000;
/// 2016-01-01T00:00:00Z, in ms, where TSBS starts too.
const START_MS: i64 = tsbs::START_NS / 1_000_000;

pub(crate) fn run(ctx: &Context, args: &Args) -> anyhow::Result<()> {
    let samples = args.targets * args.series_per_target * args.scrapes;
    if samples == 0 || args.samples_per_request == 0 {
        bail!(
            "--targets, --series-per-target, --scrapes and --samples-per-request must be positive"
        );
    }
    ctx.progress(format!("prom: building {samples} samples"));
    let requests = build_requests(args);
    let requests_again = args.victoriametrics.as_ref().map(|_| requests.clone());
    let mut report = ctx.report(
        "prom",
        vec![
            column("receiver", "receiver", Format::Text),
            column("samples", "samples", Format::Count),
            column("series", "series", Format::Count),
            column("samples/s", "samples_per_s", Format::Count),
            column("visible/s", "visible_samples_per_s", Format::Count),
            column("MB/s", "mb_per_s", Format::Ratio),
            column("p50", "p50_ms", Format::Millis),
            column("p99", "p99_ms", Format::Millis),
            column("B/sample", "bytes_per_sample", Format::Ratio),
            column("run", "run", Format::Text),
        ],
    );
    let runtime = tokio::runtime::Runtime::new()?;
    let in_process = args.server.url.is_none();
    let rules = match args.rules_every {
        Some(0) => bail!("--rules-every must be positive"),
        Some(every) => {
            // The rules read where the load's samples are: the middle of
            // its scrapes (in 2016).
            let now_s = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)?
                .as_secs() as i64;
            let middle_s = (START_MS + args.scrapes as i64 * SCRAPE_INTERVAL_MS / 2) / 1000;
            let file = ctx.data_dir.join("pushit-prom-rules.yml");
            let text = RULES_FILE
                .replace("{every}", &every.to_string())
                .replace("{offset}", &(now_s - middle_s).to_string());
            std::fs::write(&file, text)?;
            Some(file)
        }
        None => None,
    };
    let mut rules_ran = None;
    let with_rules = |config: &mut chingest_server::config::ServerConfig| {
        if let Some(file) = &rules {
            config.rules.files = vec![file.display().to_string()];
            // Recorded elsewhere: the load's table holds its samples alone.
            config.rules.database = format!("{DATABASE}_rules");
            config.promql.default_database = DATABASE.to_owned();
        }
    };
    runtime.block_on(with_server(
        ctx,
        &args.server,
        with_rules,
        async |endpoints| {
            let write = format!("/api/v1/write?db={DATABASE}");
            let sent =
                write_all(ctx, "prom", endpoints, &write, requests, args.connections).await?;
            // VictoriaMetrics is asked to flush (`flush_victoriametrics`);
            // chingest is too, by one more sample written `visible`.
            let flush = format!("{}{write}&durability=visible", endpoints.http);
            let flushing = authorized(endpoints, http_client()?.post(flush));
            remote_write(flushing, flush_request()).await?;
            let expected = samples as u64 + 1;
            let visible = wait_visible(endpoints, DATABASE, "prometheus", expected)
                .await?
                .duration_since(sent.started);
            let stored = count(endpoints, DATABASE, "prometheus").await?;
            check_stored(&format!("{DATABASE}.prometheus"), expected, stored)?;
            let bytes_per_sample = match in_process {
                true => Some(bytes_per_value(ctx, DATABASE, "prometheus", samples)?),
                false => None,
            };
            report.push(row("chingest", args, &sent, visible, bytes_per_sample));
            if rules.is_some() {
                rules_ran = Some(rule_counters(endpoints).await?);
            }
            Ok(())
        },
    ))?;
    if let (Some(url), Some(requests)) = (&args.victoriametrics, requests_again) {
        let row = runtime.block_on(victoriametrics(ctx, args, url, requests, samples))?;
        report.push(row);
    }
    report.finish();
    if let Some((iterations, missed, failures)) = rules_ran {
        println!(
            "rules: {iterations} evaluations of the group, {missed} missed, {failures} rule failures"
        );
    }
    Ok(())
}

/// The rule group's evaluations, missed slots and failed rule evaluations,
/// from `/metrics`.
async fn rule_counters(endpoints: &Endpoints) -> anyhow::Result<(u64, u64, u64)> {
    Ok((
        counter(endpoints, "chingest_rule_group_iterations_total").await?,
        counter(endpoints, "chingest_rule_group_iterations_missed_total").await?,
        counter(endpoints, "chingest_rule_evaluation_failures_total").await?,
    ))
}

/// The same requests posted to a VictoriaMetrics at `url`: samples/s until
/// the last is answered, and until all are queryable (after asking it to
/// flush its in-memory buffers).
async fn victoriametrics(
    ctx: &Context,
    args: &Args,
    url: &str,
    requests: Vec<(Vec<u8>, usize)>,
    samples: usize,
) -> anyhow::Result<serde_json::Value> {
    let client = http_client()?;
    let victoriametrics = Endpoints {
        http: url.to_owned(),
        grpc: None,
        clickhouse: None,
        token: None,
    };
    let sent = write_all(
        ctx,
        "prom/victoriametrics",
        &victoriametrics,
        "/api/v1/write",
        requests,
        args.connections,
    )
    .await?;
    // Every sample of the load, counted at its last scrape.
    let end_ms = START_MS + (args.scrapes as i64 - 1) * SCRAPE_INTERVAL_MS;
    let stored = flush_victoriametrics(
        &client,
        url,
        "sum(count_over_time({job=\"node\"}[1h]))",
        end_ms,
        samples as u64,
    )
    .await?;
    let visible = sent.started.elapsed();
    // The warm-up request counts too: every sample must be there.
    check_stored("VictoriaMetrics", samples as u64, stored)?;
    Ok(row("victoriametrics", args, &sent, visible, None))
}

/// Remote-writes `requests` (bodies and their sample counts) to `path` of
/// `endpoints` over `connections` connections, through [`drive`].
pub(super) async fn write_all(
    ctx: &Context,
    name: &str,
    endpoints: &Endpoints,
    path: &str,
    requests: Vec<(Vec<u8>, usize)>,
    connections: usize,
) -> anyhow::Result<Sent> {
    let client = http_client()?;
    let url = format!("{}{path}", endpoints.http);
    let endpoints = endpoints.clone();
    let send = move |_: usize, (body, _): (Vec<u8>, usize)| {
        remote_write(authorized(&endpoints, client.post(&url)), body)
    };
    let sizes = |(body, samples): &(Vec<u8>, usize)| (*samples, body.len());
    drive(ctx, name, requests, connections, sizes, send).await
}

/// Posts one remote write 1.0 body as Prometheus does; fails unless the
/// receiver answers 2xx.
async fn remote_write(request: reqwest::RequestBuilder, body: Vec<u8>) -> anyhow::Result<()> {
    let request = request
        .header("Content-Encoding", "snappy")
        .header("Content-Type", "application/x-protobuf")
        .header("X-Prometheus-Remote-Write-Version", "0.1.0")
        .body(body);
    // A 429 is asked again after its Retry-After, as Prometheus does, for
    // up to a minute.
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let attempt = request.try_clone().context("a remote-write request")?;
        let response = attempt.send().await?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let wait = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
            .map(std::time::Duration::from_secs);
        match (status, wait) {
            (reqwest::StatusCode::TOO_MANY_REQUESTS, Some(wait))
                if std::time::Instant::now() + wait < give_up =>
            {
                tokio::time::sleep(wait).await
            }
            _ => bail!(
                "remote write answered {status}: {}",
                response.text().await.unwrap_or_default()
            ),
        }
    }
}

/// Has the VictoriaMetrics at `url` flush its in-memory buffers until
/// `count` (an instant query of one number, at `time_ms`) reaches
/// `expected`, for up to two minutes; returns the last count.
pub(super) async fn flush_victoriametrics(
    client: &reqwest::Client,
    url: &str,
    count: &str,
    time_ms: i64,
    expected: u64,
) -> anyhow::Result<u64> {
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let time = (time_ms as f64 / 1000.0).to_string();
    loop {
        client
            .get(format!("{url}/internal/force_flush"))
            .send()
            .await?;
        // `nocache`: a count cached before the flush would stay short.
        let answer: serde_json::Value = client
            .get(format!("{url}/api/v1/query"))
            .query(&[("query", count), ("time", &time), ("nocache", "1")])
            .send()
            .await?
            .json()
            .await?;
        let stored = answer["data"]["result"][0]["value"][1]
            .as_str()
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0) as u64;
        if stored >= expected || std::time::Instant::now() > give_up {
            return Ok(stored);
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// A report row: `sent`'s rates, queryable after `visible`.
fn row(
    receiver: &str,
    args: &Args,
    sent: &Sent,
    visible: std::time::Duration,
    bytes_per_sample: Option<f64>,
) -> serde_json::Value {
    json!({
        "receiver": receiver,
        "samples": sent.rows,
        "series": args.targets * args.series_per_target,
        "requests": sent.latencies.len(),
        "samples_per_s": per_second(sent.rows, sent.elapsed),
        "visible_samples_per_s": sent.rows as f64 / visible.as_secs_f64().max(1e-9),
        "mb_per_s": sent.bytes as f64 / 1e6 / sent.elapsed.as_secs_f64(),
        "p50_ms": millis_at(&sent.latencies, 0.5),
        "p99_ms": millis_at(&sent.latencies, 0.99),
        "bytes_per_sample": bytes_per_sample,
        "run": sent.label,
    })
}

/// `request` as Prometheus sends it: encoded, snappy-compressed.
fn body(encoder: &mut snap::raw::Encoder, request: &WriteRequest) -> Vec<u8> {
    encoder
        .compress_vec(&request.encode_to_vec())
        .expect("snappy compresses any input")
}

/// The body of a request of one sample of its own series (`pushit_flush`):
/// written `visible`, it has every row pending for the table inserted
/// before it is answered.
fn flush_request() -> Vec<u8> {
    let request = WriteRequest {
        timeseries: vec![TimeSeries {
            labels: vec![Label {
                name: "__name__".into(),
                value: "pushit_flush".into(),
            }],
            samples: vec![Sample {
                value: 1.0,
                timestamp: START_MS,
            }],
        }],
        metadata: Vec::new(),
    };
    body(&mut snap::raw::Encoder::new(), &request)
}

/// Every request's snappy-compressed body and sample count, in send order:
/// scrape by scrape, each scrape's samples in series order.
fn build_requests(args: &Args) -> Vec<(Vec<u8>, usize)> {
    let families = args.series_per_target.div_ceil(10);
    let mut requests = Vec::new();
    let mut series = Vec::with_capacity(args.samples_per_request);
    let mut encoder = snap::raw::Encoder::new();
    let mut flush = |series: &mut Vec<TimeSeries>| {
        let request = WriteRequest {
            timeseries: std::mem::take(series),
            metadata: Vec::new(),
        };
        requests.push((body(&mut encoder, &request), request.timeseries.len()));
    };
    for scrape in 0..args.scrapes {
        let timestamp = START_MS + scrape as i64 * SCRAPE_INTERVAL_MS;
        for target in 0..args.targets {
            for s in 0..args.series_per_target {
                let (family, cpu) = (s / 10 % families, s % 10);
                let labels = [
                    ("__name__", format!("node_metric_{family}_total")),
                    ("cpu", cpu.to_string()),
                    ("instance", format!("host-{target}:9100")),
                    ("job", "node".to_owned()),
                ];
                // A counter: it grows by a series-specific step each scrape.
                let step = (target * 31 + s * 7) % 100 + 1;
                series.push(TimeSeries {
                    labels: labels
                        .into_iter()
                        .map(|(name, value)| Label {
                            name: name.into(),
                            value: value.into(),
                        })
                        .collect(),
                    samples: vec![Sample {
                        value: (scrape * step) as f64,
                        timestamp,
                    }],
                });
                if series.len() == args.samples_per_request {
                    flush(&mut series);
                }
            }
        }
    }
    if !series.is_empty() {
        flush(&mut series);
    }
    requests
}
