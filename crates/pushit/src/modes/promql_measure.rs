//! How `pushit promql` and its age load (promql_age.rs) measure: the
//! flags, the peers started, every query asked on one server, the report
//! of each query on every server against chingest, and the servers'
//! memory.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context as _};
use pushit::report::{column, Format};
use serde_json::json;

use super::client::{count, wait_visible};
use super::peers::{prometheus, sample_of, victoriametrics, Peer};
use super::prom::write_all;
use super::promql_data::{Data, Requests, LOAD_CONNECTIONS};
use super::promql_query::{Load, Query};
use super::query::{ask, hammer, rounds, Measured};
use super::server::{authorized, http_client, Endpoints, ServerArgs};
use super::{check_stored, millis_at, per_second};
use crate::Context;

/// Flags of `pushit promql`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Jobs (`job` label: web, api, db, cache, batch, queue, auth, search).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u8).range(1..=8), conflicts_with = "dashboard")]
    pub(super) jobs: u8,
    /// Instances of each job.
    #[arg(long, default_value_t = 5, conflicts_with = "dashboard")]
    pub(super) instances: usize,
    /// CPUs of each instance, a series per CPU and mode (8 modes).
    #[arg(long, default_value_t = 5, conflicts_with = "dashboard")]
    pub(super) cpus: usize,
    /// What a refreshing Grafana node-exporter dashboard asks instead, on
    /// `--hosts` hosts' node-exporter metrics: each panel and variable
    /// (a moving range, a host in turn), all of them mixed, and whole
    /// refreshes.
    #[arg(long)]
    pub(super) dashboard: bool,
    /// With --dashboard: what recording rules cost instead, the
    /// node-exporter mixin's on the dashboard's data: each rule's
    /// expression as an instant query of every server, and chingest's own
    /// evaluation of the group (`[rules]`), query and write-back
    /// (promql_rules.rs).
    #[arg(long, requires = "dashboard")]
    pub(super) rules: bool,
    /// The dashboard's panels over data of every age instead (e.g. a week:
    /// `--age --hours 168`): ranges of 6 h, 24 h and 7 d, now and `--back`
    /// hours back, each group's refresh cold (after a restart, the page
    /// cache emptied) and then warm; chingest run as a child process
    /// (`--chingest`), with its result cache and without.
    #[arg(long, conflicts_with_all = ["dashboard", "downsampled", "cardinality", "url"])]
    pub(super) age: bool,
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
    pub(super) downsampled: bool,
    /// With --downsampled: the downsampled database's levels,
    /// comma-separated (ages past the data's keep its rows; `:last` levels
    /// keep each bucket's last sample only).
    #[arg(long, default_value = "3000d:5m,6000d:1h", requires = "downsampled")]
    pub(super) downsampled_levels: String,
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
    pub(super) cardinality: Option<usize>,
    /// Hours of scrapes, 15 s apart, ending on the last full hour.
    #[arg(long, default_value_t = 24)]
    pub(super) hours: usize,
    /// Concurrent clients asking the panel queries (with --dashboard, also
    /// the requests a refresh has in flight at once).
    #[arg(long, default_value_t = 4)]
    pub(super) connections: usize,
    /// Seconds each panel query is asked on each server.
    #[arg(long, default_value_t = 10.0)]
    pub(super) seconds: f64,
    /// Times each other query is asked, one at a time (median reported).
    #[arg(long, default_value_t = 5, conflicts_with = "dashboard")]
    pub(super) repeat: usize,
    /// Compare with a Prometheus: its binary (`promtool` beside it), by
    /// default /usr/bin/prometheus.
    #[arg(long, value_name = "PATH", num_args = 0..=1, default_missing_value = "/usr/bin/prometheus")]
    pub(super) prometheus: Option<PathBuf>,
    /// Compare with a VictoriaMetrics: its binary, by default
    /// /usr/bin/victoria-metrics.
    #[arg(long, value_name = "PATH", num_args = 0..=1, default_missing_value = "/usr/bin/victoria-metrics")]
    pub(super) victoriametrics: Option<PathBuf>,
    /// With --victoriametrics: also a VictoriaMetrics without its response
    /// cache (`-search.disableCache`), as a peer of its own. The cache
    /// answers a repeated range query without evaluating it again.
    #[arg(long, requires = "victoriametrics")]
    pub(super) victoriametrics_uncached: bool,
    #[command(flatten)]
    pub(super) server: ServerArgs,
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
pub(super) const IN_PROCESS: &str =
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
    pub(super) note: String,
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
