//! Differential test of the PromQL HTTP API against Prometheus 2.42
//! (Debian's `/usr/bin/prometheus`, which `make test-setup` installs).
//!
//! A generated hour of samples (counters with resets, gauges, classic
//! histograms, stale markers, gaps, NaN and ±Inf) goes by remote write to a
//! Prometheus started for the test and to chingest's database `prometheus`.
//! Every query of `promql/corpus.txt` is then asked of both, through
//! `/api/v1/query` at several times and `/api/v1/query_range` at several
//! steps and alignments, and the answers must agree: the status and
//! `errorType` of an error (not its text: the parsers differ); for a
//! success the result type, the series (by label set, in order only where
//! Prometheus defines one: an instant `sort`/`sort_desc`), every timestamp,
//! and every value within 1e-9 relative (1e-12 absolute near 0), NaN equal
//! to NaN.
//!
//! `promql/differences.txt` lists the queries whose answers may differ,
//! each with its reason; a listed query that no longer differs fails the
//! test, so the list stays true. Every mismatch is reported with its query,
//! parameters and both answers, on stderr and in
//! `<target>/tmp/promql-mismatches.txt`.

mod support;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chingest_proto::prometheus::{Label, Sample, TimeSeries, WriteRequest};
use reqwest::{Client, StatusCode};
use serde_json::Value;

use support::{base, post_snappy, run, sql, wait_ready, TOKEN};

const PROMETHEUS: &str = "/usr/bin/prometheus";
/// The NaN Prometheus sends to mark a series stale (a normal NaN is a value).
const STALE_NAN: u64 = 0x7ff0_0000_0000_0002;
const SCRAPE_MS: i64 = 15_000;
/// Scrapes 0..=240: one hour, both ends included.
const SCRAPES: i64 = 241;
/// Scrapes per remote-write request: requests go in time order, so neither
/// receiver sees a sample older than one it already has.
const SCRAPES_PER_REQUEST: i64 = 20;
/// Queries in flight at once, each asked of both servers.
const CONCURRENCY: usize = 3;

fn main() {
    support::main(tests![
        answers_match_prometheus_2_42,
        prometheus_reads_chingest_through_remote_read,
    ]);
}

fn answers_match_prometheus_2_42() {
    let dir = tempfile::tempdir().unwrap();
    let prometheus = Prometheus::start(dir.path(), "scrape_configs: []\n");
    let end_ms = chingest::clock::now_ms() / 60_000 * 60_000;
    let data = dataset(end_ms);
    let files = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/promql");
    let entries = Arc::new(corpus(&files.join("corpus.txt"), end_ms / 1000));
    let listed = differences(&files.join("differences.txt"));
    let jobs: Arc<Vec<(usize, usize)>> = Arc::new(
        entries
            .iter()
            .enumerate()
            .flat_map(|(e, entry)| (0..entry.evaluations.len()).map(move |v| (e, v)))
            .collect(),
    );
    run(async {
        wait_ready().await;
        prometheus.wait_ready().await;
        load(end_ms, &data, &prometheus.url).await;
        let answers = ask_all(&prometheus.url, &entries, &jobs).await;
        judge(end_ms, &entries, &jobs, &answers, &listed);
    });
}

/// A Prometheus whose `remote_read` points at chingest answers queries
/// for data only chingest holds, as chingest answers them itself.
fn prometheus_reads_chingest_through_remote_read() {
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "remote_read:\n  - url: {}/api/v1/read?db=promql_remote_read\n    read_recent: true\n    \
         authorization: {{ credentials: {TOKEN} }}\n",
        base()
    );
    let prometheus = Prometheus::start(dir.path(), &config);
    let end_ms = chingest::clock::now_ms() / 60_000 * 60_000;
    let counter = |instance: &str, step: f64| {
        series(
            &[
                ("__name__", "rr_requests_total"),
                ("instance", instance),
                ("job", "api"),
            ],
            (0..40)
                .map(|i| (end_ms - (39 - i) * SCRAPE_MS, step * i as f64))
                .collect(),
        )
    };
    let data = [counter("a", 3.0), counter("b", 5.0)];
    run(async {
        wait_ready().await;
        prometheus.wait_ready().await;
        post_write(
            &base(),
            "promql_remote_read",
            &write_request(&data, i64::MIN, i64::MAX),
        )
        .await;
        let at = format!("{}", end_ms / 1000);
        for query in [
            "rr_requests_total",
            "sum by (job) (rate(rr_requests_total[5m]))",
            "rr_requests_total{instance!=\"a\"}[1m]",
        ] {
            let form = [("query", query), ("time", at.as_str())];
            let ask = |url: String| async move {
                let r = client()
                    .post(url)
                    .header("Authorization", format!("Token {TOKEN}"))
                    .form(&form)
                    .send()
                    .await
                    .unwrap();
                r.json::<serde_json::Value>().await.unwrap()
            };
            let theirs = ask(format!("{}/api/v1/query", prometheus.url)).await;
            let ours = ask(format!("{}/api/v1/query?db=promql_remote_read", base())).await;
            assert_eq!(theirs["status"], "success", "{query}: {theirs}");
            assert!(theirs.get("warnings").is_none(), "{query}: {theirs}");
            let result = theirs["data"]["result"].as_array().unwrap();
            assert!(
                !result.is_empty(),
                "{query}: Prometheus read nothing: {theirs}"
            );
            assert_eq!(theirs["data"], ours["data"], "{query}");
        }
    });
}

// ---------------------------------------------------------------------------
// The data set.

/// A series: its labels, sorted by name (`__name__` among them), and its
/// samples in time order.
struct Series {
    labels: Vec<(String, String)>,
    samples: Vec<(i64, f64)>,
}

fn series(labels: &[(&str, &str)], samples: Vec<(i64, f64)>) -> Series {
    let mut labels: Vec<(String, String)> = labels
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    labels.sort();
    Series { labels, samples }
}

/// xorshift64: the same data set on every run, without a crate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The hour of scrapes ending at `end` (ms, a whole minute): scrape `i` is
/// at `end - (240 - i) * 15 s`. The times corpus.txt and [`evaluations`]
/// aim at follow from the scrape numbers noted here.
fn dataset(end: i64) -> Vec<Series> {
    let t = |i: i64| end - (SCRAPES - 1 - i) * SCRAPE_MS;
    let stale = f64::from_bits(STALE_NAN);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut out = Vec::new();

    // Counters: integer increments, reset to 0 at the scrapes listed.
    for (job, instance, method, code, resets) in [
        ("api", "api-1:8080", "GET", "200", &[][..]),
        ("api", "api-1:8080", "GET", "500", &[]),
        ("api", "api-1:8080", "POST", "200", &[60, 170]),
        ("api", "api-1:8080", "POST", "500", &[]),
        ("api", "api-2:8080", "GET", "200", &[100]),
        ("api", "api-2:8080", "GET", "500", &[]),
        ("api", "api-2:8080", "POST", "200", &[]),
        ("api", "api-2:8080", "POST", "500", &[200]),
        ("web", "web-1:80", "GET", "200", &[]),
    ] {
        let most = if code == "200" { 20 } else { 3 };
        let mut value = rng.below(1000) as f64;
        let samples = (0..SCRAPES)
            .map(|i| {
                if resets.contains(&i) {
                    value = 0.0;
                }
                value += rng.below(most) as f64;
                (t(i), value)
            })
            .collect();
        out.push(series(
            &[
                ("__name__", "http_requests_total"),
                ("job", job),
                ("instance", instance),
                ("method", method),
                ("code", code),
            ],
            samples,
        ));
    }

    // Classic histograms; api-2's resets at scrape 150.
    const BOUNDS: [f64; 7] = [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0];
    const LE: [&str; 7] = ["0.05", "0.1", "0.25", "0.5", "1", "2.5", "+Inf"];
    for (instance, reset) in [("api-1:8080", None), ("api-2:8080", Some(150))] {
        let mut counts = [0u64; 7];
        let mut sum = 0.0;
        let mut scrapes = Vec::new();
        for i in 0..SCRAPES {
            if reset == Some(i) {
                counts = [0; 7];
                sum = 0.0;
            }
            for _ in 0..rng.below(8) {
                let b = ((rng.below(7) + rng.below(7)) / 2) as usize;
                let lower = if b == 0 { 0.0 } else { BOUNDS[b - 1] };
                counts[b] += 1;
                sum += ((lower + (BOUNDS[b] - lower) * rng.unit()) * 1000.0).round() / 1000.0;
            }
            scrapes.push((counts, sum));
        }
        let name_labels =
            |name: &'static str| [("__name__", name), ("job", "api"), ("instance", instance)];
        for (k, le) in LE.iter().enumerate() {
            let mut labels = name_labels("request_duration_seconds_bucket").to_vec();
            labels.push(("le", le));
            let samples = (0..SCRAPES)
                .map(|i| (t(i), scrapes[i as usize].0[..=k].iter().sum::<u64>() as f64))
                .collect();
            out.push(series(&labels, samples));
        }
        let samples = (0..SCRAPES)
            .map(|i| (t(i), scrapes[i as usize].1))
            .collect();
        out.push(series(
            &name_labels("request_duration_seconds_sum"),
            samples,
        ));
        let samples = (0..SCRAPES)
            .map(|i| (t(i), scrapes[i as usize].0.iter().sum::<u64>() as f64))
            .collect();
        out.push(series(
            &name_labels("request_duration_seconds_count"),
            samples,
        ));
    }

    // Gauges: temperatures (to two decimals, some below zero) and memory.
    for (k, (instance, location, middle)) in [
        ("n1", "outside", -3.0),
        ("n2", "inside", 21.0),
        ("n3", "outside", 2.0),
    ]
    .into_iter()
    .enumerate()
    {
        let samples = (0..SCRAPES)
            .map(|i| {
                let wave = 8.0 * (i as f64 / 20.0 + k as f64).sin() + rng.unit() - 0.5;
                (t(i), ((middle + wave) * 100.0).round() / 100.0)
            })
            .collect();
        out.push(series(
            &[
                ("__name__", "temperature_celsius"),
                ("job", "node"),
                ("instance", instance),
                ("location", location),
            ],
            samples,
        ));
        let mut bytes = 1e9 + k as f64 * 2.5e8;
        let samples = (0..SCRAPES)
            .map(|i| {
                bytes += rng.below(2_000_001) as f64 - 1e6;
                (t(i), bytes)
            })
            .collect();
        out.push(series(
            &[
                ("__name__", "memory_usage_bytes"),
                ("job", "node"),
                ("instance", instance),
            ],
            samples,
        ));
    }

    // up: api-2 down for scrapes 50..55, n3 now and then; batch's goes
    // stale at scrape 200 with its target.
    for (job, instance) in [
        ("api", "api-1:8080"),
        ("api", "api-2:8080"),
        ("web", "web-1:80"),
        ("node", "n1"),
        ("node", "n2"),
        ("node", "n3"),
        ("batch", "b-1"),
    ] {
        let samples = (0..SCRAPES)
            .filter(|&i| job != "batch" || i <= 200)
            .map(|i| {
                let down = (instance == "api-2:8080" && (50..55).contains(&i))
                    || (instance == "n3" && rng.below(20) == 0);
                let value = match (job, i) {
                    ("batch", 200) => stale,
                    _ if down => 0.0,
                    _ => 1.0,
                };
                (t(i), value)
            })
            .collect();
        out.push(series(
            &[("__name__", "up"), ("job", job), ("instance", instance)],
            samples,
        ));
    }

    // A label only some series have: priority.
    for (instance, queue, priority) in [
        ("w-1", "email", None),
        ("w-1", "email", Some("high")),
        ("w-1", "sms", None),
        ("w-2", "email", None),
        ("w-2", "sms", Some("low")),
    ] {
        let mut depth = rng.below(10) as f64;
        let samples = (0..SCRAPES)
            .map(|i| {
                depth = (depth + rng.below(7) as f64 - 3.0).max(0.0);
                (t(i), depth)
            })
            .collect();
        let mut labels = vec![
            ("__name__", "queue_depth"),
            ("job", "worker"),
            ("instance", instance),
            ("queue", queue),
        ];
        labels.extend(priority.map(|p| ("priority", p)));
        out.push(series(&labels, samples));
    }

    // Stale series. batch_jobs_running: stale at scrape 80 (end - 2400 s),
    // back from scrape 140. batch_last_success_timestamp_seconds: stale at
    // 121 (end - 1785 s), never back. batch_processed_total: stale at 200.
    let batch = |name| [("__name__", name), ("job", "batch"), ("instance", "b-1")];
    let samples = (0..SCRAPES)
        .filter(|i| !(81..140).contains(i))
        .map(|i| (t(i), if i == 80 { stale } else { rng.below(4) as f64 }))
        .collect();
    out.push(series(&batch("batch_jobs_running"), samples));
    let samples = (0..=121)
        .map(|i| {
            (
                t(i),
                if i == 121 {
                    stale
                } else {
                    (t(i - i % 20) / 1000) as f64
                },
            )
        })
        .collect();
    out.push(series(
        &batch("batch_last_success_timestamp_seconds"),
        samples,
    ));
    let mut processed = 0.0;
    let samples = (0..=200)
        .map(|i| {
            processed += rng.below(50) as f64;
            (t(i), if i == 200 { stale } else { processed })
        })
        .collect();
    out.push(series(&batch("batch_processed_total"), samples));

    // Missed scrapes (about one in seven), and for f-1 a gap longer than the
    // 5 m lookback: scrapes 100..133, the last before it at end - 2115 s.
    for instance in ["f-1", "f-2"] {
        let present: Vec<i64> = (0..SCRAPES)
            .filter(|&i| {
                let kept = rng.below(7) != 0;
                if instance == "f-1" && (100..133).contains(&i) {
                    return false;
                }
                kept || (instance == "f-1" && (i == 99 || i == 133))
            })
            .collect();
        let labels = |name| [("__name__", name), ("job", "flaky"), ("instance", instance)];
        let samples = present
            .iter()
            .map(|&i| (t(i), rng.below(400) as f64 / 4.0 - 50.0))
            .collect();
        out.push(series(&labels("flaky_gauge"), samples));
        let mut total = 0.0;
        let samples = present
            .iter()
            .map(|&i| {
                total += rng.below(10) as f64;
                (t(i), total)
            })
            .collect();
        out.push(series(&labels("flaky_requests_total"), samples));
    }

    // Values that are NaN (a normal one, not a stale marker) and ±Inf.
    let samples = (0..SCRAPES)
        .map(|i| {
            let value = match i {
                _ if i % 10 == 3 => f64::NAN,
                _ if i % 17 == 5 => f64::INFINITY,
                _ if i % 23 == 7 => f64::NEG_INFINITY,
                _ => i as f64 * 0.5 - 30.0,
            };
            (t(i), value)
        })
        .collect();
    out.push(series(
        &[
            ("__name__", "odd_values"),
            ("job", "odd"),
            ("kind", "mixed"),
        ],
        samples,
    ));
    let samples = (0..SCRAPES)
        .map(|i| (t(i), if i % 30 == 0 { 1.0 } else { f64::NAN }))
        .collect();
    out.push(series(
        &[("__name__", "odd_values"), ("job", "odd"), ("kind", "nan")],
        samples,
    ));
    out
}

// ---------------------------------------------------------------------------
// Prometheus, and loading both servers.

/// A Prometheus on a free port over a temporary directory, killed when
/// dropped (also when the test fails).
struct Prometheus {
    child: Child,
    url: String,
    log: PathBuf,
}

impl Prometheus {
    /// Started with `config` as its configuration file.
    fn start(dir: &Path, config: &str) -> Prometheus {
        assert!(
            Path::new(PROMETHEUS).exists(),
            "{PROMETHEUS} is missing: `make test-setup` installs Debian's prometheus package"
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config_file = dir.join("prometheus.yml");
        std::fs::write(&config_file, config).unwrap();
        let log = dir.join("prometheus.log");
        let child = Command::new(PROMETHEUS)
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--web.enable-remote-write-receiver")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::options().append(true).open(&log).unwrap())
            .spawn()
            .unwrap();
        Prometheus {
            child,
            url: format!("http://127.0.0.1:{port}"),
            log,
        }
    }

    async fn wait_ready(&self) {
        for _ in 0..600 {
            if let Ok(r) = client().get(format!("{}/-/ready", self.url)).send().await {
                if r.status() == StatusCode::OK {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "Prometheus not ready after 30 s:\n{}",
            std::fs::read_to_string(&self.log).unwrap_or_default()
        );
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn client() -> Client {
    Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// The remote-write request of `data`'s samples in `[from, to)` (ms).
fn write_request(data: &[Series], from: i64, to: i64) -> WriteRequest {
    WriteRequest {
        timeseries: data
            .iter()
            .map(|s| TimeSeries {
                labels: s
                    .labels
                    .iter()
                    .map(|(n, v)| Label {
                        name: n.clone().into(),
                        value: v.clone().into(),
                    })
                    .collect(),
                samples: s
                    .samples
                    .iter()
                    .filter(|&&(t, _)| (from..to).contains(&t))
                    .map(|&(timestamp, value)| Sample { value, timestamp })
                    .collect(),
            })
            .filter(|s| !s.samples.is_empty())
            .collect(),
        metadata: vec![],
    }
}

/// Posts a remote-write `request` to the server at `url`, into database
/// `db` (chingest's parameters), visible when answered.
async fn post_write(url: &str, db: &str, request: &WriteRequest) {
    let url = format!("{url}/api/v1/write?db={db}&durability=visible");
    let r = post_snappy(&url, "application/x-protobuf", request)
        .header("X-Prometheus-Remote-Write-Version", "0.1.0")
        .send()
        .await
        .unwrap();
    let status = r.status();
    assert_eq!(
        status,
        StatusCode::NO_CONTENT,
        "{url}: {}",
        r.text().await.unwrap()
    );
}

/// Sends `data` (ending at `end`, ms) to both servers in time-ordered
/// remote-write requests and checks that both hold all of it.
async fn load(end: i64, data: &[Series], prometheus: &str) {
    for first in (0..SCRAPES).step_by(SCRAPES_PER_REQUEST as usize) {
        let from = end - (SCRAPES - 1 - first) * SCRAPE_MS;
        let request = write_request(data, from, from + SCRAPES_PER_REQUEST * SCRAPE_MS);
        // Prometheus ignores the parameters chingest reads.
        for url in [prometheus, &base()] {
            post_write(url, "prometheus", &request).await;
        }
    }

    let samples: usize = data.iter().map(|s| s.samples.len()).sum();
    let (status, count) = sql("SELECT count() FROM prometheus.prometheus").await;
    assert_eq!(status, StatusCode::OK, "{count}");
    assert_eq!(
        count.trim(),
        samples.to_string(),
        "chingest holds every sample written"
    );
    let r: Value = client()
        .get(format!("{prometheus}/api/v1/query"))
        .query(&[
            ("query", "{__name__=~\".+\"}[2h]"),
            ("time", &time(end / 1000, 0.0)),
        ])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let held: usize = r["data"]["result"]
        .as_array()
        .unwrap_or_else(|| panic!("Prometheus's samples: {r}"))
        .iter()
        .map(|s| s["values"].as_array().unwrap().len())
        .sum();
    // Stale markers are not samples in a range.
    let values = data
        .iter()
        .flat_map(|s| &s.samples)
        .filter(|(_, v)| v.to_bits() != STALE_NAN)
        .count();
    assert_eq!(held, values, "Prometheus holds every sample written");
}

// ---------------------------------------------------------------------------
// The corpus, and how each query is asked.

/// One request: the API path and its parameters.
struct Evaluation {
    path: &'static str,
    params: Vec<(String, String)>,
    /// What the times aim at, for the report.
    why: &'static str,
}

/// A corpus line: its query and the requests that ask it.
struct Entry {
    line: String,
    evaluations: Vec<Evaluation>,
}

/// Instant queries, at offsets from the data's end (s): the times the data
/// set's comments name.
const INSTANT: [(f64, &str); 7] = [
    (0.0, "the last scrape"),
    (-1007.3, "between scrapes"),
    (
        -1815.0,
        "5 m after the last sample before a gap (the lookback's edge)",
    ),
    (-1814.0, "just past the lookback's edge in a gap"),
    (-2399.0, "1 s after a stale marker"),
    (-3540.0, "a minute after the data's start"),
    (90.0, "90 s after the data's end"),
];

/// Range queries: start and end offsets (s), step.
const RANGE: [(f64, f64, &str, &str); 4] = [
    (-3600.0, 0.0, "15", "the hour at the scrape interval"),
    (-1796.5, 0.0, "30", "an unaligned start"),
    (-3600.0, 0.0, "60", "the hour by the minute"),
    (
        -2500.0,
        -1700.0,
        "7",
        "stale markers and the gap's edge, every 7 s",
    ),
];

fn time(end_s: i64, offset: f64) -> String {
    format!("{:.3}", end_s as f64 + offset)
}

fn instant(query: &str, time: String, why: &'static str) -> Evaluation {
    Evaluation {
        path: "/api/v1/query",
        params: vec![("query".into(), query.into()), ("time".into(), time)],
        why,
    }
}

fn range(query: &str, start: String, end: String, step: &str, why: &'static str) -> Evaluation {
    Evaluation {
        path: "/api/v1/query_range",
        params: vec![
            ("query".into(), query.into()),
            ("start".into(), start),
            ("end".into(), end),
            ("step".into(), step.into()),
        ],
        why,
    }
}

/// Replaces each `${N}` by the data's end plus N seconds, in seconds.
fn expand(text: &str, end_s: i64) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let close = rest[at..].find('}').expect("`${` without `}`") + at;
        let offset: f64 = rest[at + 2..close].parse().expect("${N}: N is a number");
        out.push_str(&time(end_s, offset));
        rest = &rest[close + 1..];
    }
    out + rest
}

/// Reads corpus.txt: a query per line, asked at every [`INSTANT`] time and
/// in every [`RANGE`]; or, for bad parameters, `!instant` or `!range`, then
/// `key=value` words replacing the defaults (`-key` drops one), `::` and the
/// query, asked once. `#` starts a comment line.
fn corpus(path: &Path, end_s: i64) -> Vec<Entry> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut entries: Vec<Entry> = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        assert!(
            entries.iter().all(|e| e.line != line),
            "corpus.txt repeats {line:?}"
        );
        let expanded = expand(line, end_s);
        let evaluations = if let Some(special) = expanded.strip_prefix('!') {
            let (head, query) = special
                .split_once("::")
                .unwrap_or_else(|| panic!("{line:?}: `!` lines need `::` before the query"));
            let mut words = head.split_whitespace();
            let mut evaluation = match words.next() {
                Some("instant") => instant(query.trim(), time(end_s, 0.0), "the parameters given"),
                Some("range") => range(
                    query.trim(),
                    time(end_s, -3600.0),
                    time(end_s, 0.0),
                    "60",
                    "the parameters given",
                ),
                _ => panic!("{line:?}: `!instant` or `!range`"),
            };
            for word in words {
                let key = word.split('=').next().unwrap().trim_start_matches('-');
                evaluation.params.retain(|(k, _)| k != key);
                if let Some((key, value)) = word.split_once('=') {
                    evaluation.params.push((key.into(), value.into()));
                }
            }
            vec![evaluation]
        } else {
            let instants = INSTANT
                .iter()
                .map(|&(offset, why)| instant(&expanded, time(end_s, offset), why));
            let ranges = RANGE.iter().map(|&(start, end, step, why)| {
                range(&expanded, time(end_s, start), time(end_s, end), step, why)
            });
            instants.chain(ranges).collect()
        };
        entries.push(Entry {
            line: line.to_owned(),
            evaluations,
        });
    }
    assert!(
        entries.len() >= 150,
        "corpus.txt has {} queries",
        entries.len()
    );
    entries
}

/// Reads differences.txt: `query || reason` per line, the query as in
/// corpus.txt; `#` starts a comment line.
fn differences(path: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut listed = BTreeMap::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (query, reason) = line
            .rsplit_once(" || ")
            .unwrap_or_else(|| panic!("differences.txt: {line:?} is not `query || reason`"));
        assert!(
            !reason.trim().is_empty(),
            "differences.txt: {line:?} gives no reason"
        );
        listed.insert(query.trim().to_owned(), reason.trim().to_owned());
    }
    listed
}

/// A server's answer: its status and body (or why there is none).
type Reply = (u16, String);

/// Asks `evaluation` of the server at `url`: instant queries by GET,
/// range queries by POST (a form, with `db` in the URL; Prometheus
/// ignores it, chingest's default is the same database).
async fn ask(url: &str, evaluation: &Evaluation) -> Reply {
    let request = if evaluation.path == "/api/v1/query" {
        client()
            .get(format!("{url}{}", evaluation.path))
            .query(&evaluation.params)
    } else {
        client()
            .post(format!("{url}{}?db=prometheus", evaluation.path))
            .form(&evaluation.params)
    };
    match request.bearer_auth(TOKEN).send().await {
        Ok(r) => {
            let status = r.status().as_u16();
            match r.text().await {
                Ok(body) => (status, body),
                Err(e) => (status, format!("(no body: {e})")),
            }
        }
        Err(e) => (0, format!("(no answer: {e})")),
    }
}

/// Every job's answers, Prometheus's and chingest's, in the jobs' order.
async fn ask_all(
    prometheus: &str,
    entries: &Arc<Vec<Entry>>,
    jobs: &Arc<Vec<(usize, usize)>>,
) -> Vec<(Reply, Reply)> {
    let next = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..CONCURRENCY)
        .map(|_| {
            let (next, entries, jobs) = (Arc::clone(&next), Arc::clone(entries), Arc::clone(jobs));
            let (prometheus, chingest) = (prometheus.to_owned(), base());
            tokio::spawn(async move {
                let mut done = Vec::new();
                loop {
                    let job = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(e, v)) = jobs.get(job) else {
                        break done;
                    };
                    let evaluation = &entries[e].evaluations[v];
                    let replies =
                        tokio::join!(ask(&prometheus, evaluation), ask(&chingest, evaluation));
                    done.push((job, replies));
                }
            })
        })
        .collect();
    let mut answers = Vec::new();
    for worker in workers {
        answers.extend(worker.await.unwrap());
    }
    answers.sort_by_key(|(job, _)| *job);
    answers.into_iter().map(|(_, replies)| replies).collect()
}

// ---------------------------------------------------------------------------
// Reading and comparing answers.

type Labels = BTreeMap<String, String>;

#[derive(Clone, Copy)]
struct Point {
    ms: i64,
    value: f64,
}

enum Answer {
    Error { status: u16, kind: String },
    Scalar(Point),
    String(i64, String),
    Vector(Vec<(Labels, Point)>),
    Matrix(Vec<(Labels, Vec<Point>)>),
}

impl Answer {
    fn describe(&self) -> String {
        match self {
            Answer::Error { status, kind } => format!("error {status} {kind}"),
            Answer::Scalar(_) => "a scalar".into(),
            Answer::String(..) => "a string".into(),
            Answer::Vector(v) => format!("a vector of {} series", v.len()),
            Answer::Matrix(m) => format!("a matrix of {} series", m.len()),
        }
    }
}

/// Reads an API answer; `Err` says why it is not one.
fn parse((status, body): &Reply) -> Result<Answer, String> {
    let json: Value =
        serde_json::from_str(body).map_err(|_| format!("status {status}, not JSON"))?;
    if json["status"] == "error" {
        let kind = json["errorType"]
            .as_str()
            .ok_or("an error without errorType")?;
        return Ok(Answer::Error {
            status: *status,
            kind: kind.to_owned(),
        });
    }
    if json["status"] != "success" || *status != 200 {
        return Err(format!("status {status} with status {:?}", json["status"]));
    }
    let result = &json["data"]["result"];
    let bad = || format!("a malformed result: {result}");
    let ms = |t: &Value| {
        t.as_f64()
            .map(|s| (s * 1000.0).round() as i64)
            .ok_or_else(bad)
    };
    let point = |p: &Value| -> Result<Point, String> {
        let value = match p[1].as_str().ok_or_else(bad)? {
            "NaN" => f64::NAN,
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            text => text.parse().map_err(|_| bad())?,
        };
        Ok(Point {
            ms: ms(&p[0])?,
            value,
        })
    };
    let labels = |m: &Value| -> Result<Labels, String> {
        m.as_object()
            .ok_or_else(bad)?
            .iter()
            .map(|(k, v)| Ok((k.clone(), v.as_str().ok_or_else(bad)?.to_owned())))
            .collect()
    };
    let items = || result.as_array().ok_or_else(bad);
    Ok(match json["data"]["resultType"].as_str() {
        Some("scalar") => Answer::Scalar(point(result)?),
        Some("string") => {
            Answer::String(ms(&result[0])?, result[1].as_str().ok_or_else(bad)?.into())
        }
        Some("vector") => Answer::Vector(
            items()?
                .iter()
                .map(|s| Ok((labels(&s["metric"])?, point(&s["value"])?)))
                .collect::<Result<_, String>>()?,
        ),
        Some("matrix") => Answer::Matrix(
            items()?
                .iter()
                .map(|s| {
                    let points = s["values"].as_array().ok_or_else(bad)?;
                    Ok((
                        labels(&s["metric"])?,
                        points.iter().map(point).collect::<Result<_, _>>()?,
                    ))
                })
                .collect::<Result<_, String>>()?,
        ),
        other => return Err(format!("resultType {other:?}")),
    })
}

fn same(a: f64, b: f64) -> bool {
    if a.is_nan() || b.is_nan() {
        return a.is_nan() && b.is_nan();
    }
    if a == b {
        return true;
    }
    let d = (a - b).abs();
    d.is_finite() && (d <= 1e-12 || d <= 1e-9 * a.abs().max(b.abs()))
}

fn show_value(v: f64) -> String {
    match v {
        _ if v.is_nan() => "NaN".into(),
        f64::INFINITY => "+Inf".into(),
        f64::NEG_INFINITY => "-Inf".into(),
        _ => v.to_string(),
    }
}

/// A time as the API writes it, and how far it is from the data's end.
fn show_time(ms: i64, end: i64) -> String {
    let seconds = |ms: i64| format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000));
    let from_end = ms - end;
    let sign = if from_end < 0 { "-" } else { "+" };
    let offset = seconds(from_end.abs());
    format!(
        "{} (end{sign}{}s)",
        seconds(ms),
        offset.trim_end_matches(".000")
    )
}

fn show_labels(labels: &Labels) -> String {
    let rest: Vec<String> = labels
        .iter()
        .filter(|(k, _)| *k != "__name__")
        .map(|(k, v)| format!("{k}={v:?}"))
        .collect();
    format!(
        "{}{{{}}}",
        labels.get("__name__").map_or("", String::as_str),
        rest.join(", ")
    )
}

/// Whether an instant query's series come in a defined order: its
/// outermost expression is a `sort` or `sort_desc` call.
fn ordered(query: &str) -> bool {
    let query = query.trim();
    let Some(rest) = query
        .strip_prefix("sort_desc(")
        .or_else(|| query.strip_prefix("sort("))
    else {
        return false;
    };
    let (mut depth, mut quote, mut escaped) = (1, None, false);
    for (i, c) in rest.char_indices() {
        match (quote, c) {
            (Some(_), _) if escaped => escaped = false,
            (Some(_), '\\') => escaped = true,
            (Some(q), _) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'' | '`') => quote = Some(c),
            (None, '(') => depth += 1,
            (None, ')') => {
                depth -= 1;
                if depth == 0 {
                    return i == rest.len() - 1;
                }
            }
            _ => {}
        }
    }
    false
}

/// Compares two series sets (an instant vector's series have one point):
/// what differs, in words.
fn compare_series(
    expected: &[(Labels, Vec<Point>)],
    got: &[(Labels, Vec<Point>)],
    end: i64,
    diffs: &mut Vec<String>,
) {
    let mut theirs = BTreeMap::new();
    for (labels, points) in expected {
        theirs.insert(labels, points);
    }
    let mut ours = BTreeMap::new();
    for (labels, points) in got {
        if ours.insert(labels, points).is_some() {
            diffs.push(format!(
                "chingest repeats the series {}",
                show_labels(labels)
            ));
        }
    }
    for (labels, points) in &theirs {
        let Some(mine) = ours.get(labels) else {
            diffs.push(format!(
                "series only in Prometheus: {}",
                show_labels(labels)
            ));
            continue;
        };
        let a: BTreeMap<i64, f64> = points.iter().map(|p| (p.ms, p.value)).collect();
        let b: BTreeMap<i64, f64> = mine.iter().map(|p| (p.ms, p.value)).collect();
        let only = |x: &BTreeMap<i64, f64>, y: &BTreeMap<i64, f64>| -> Vec<String> {
            x.keys()
                .filter(|t| !y.contains_key(t))
                .map(|&t| show_time(t, end))
                .collect()
        };
        let (only_a, only_b) = (only(&a, &b), only(&b, &a));
        for (who, times) in [("Prometheus", only_a), ("chingest", only_b)] {
            if !times.is_empty() {
                let shown = times.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
                let more = match times.len() {
                    n if n > 5 => format!(" and {} more", n - 5),
                    _ => String::new(),
                };
                diffs.push(format!(
                    "{}: only {who} has points at {shown}{more}",
                    show_labels(labels)
                ));
            }
        }
        for (t, x) in &a {
            if let Some(&y) = b.get(t) {
                if !same(*x, y) {
                    diffs.push(format!(
                        "{} at {}: Prometheus {}, chingest {}",
                        show_labels(labels),
                        show_time(*t, end),
                        show_value(*x),
                        show_value(y)
                    ));
                }
            }
        }
    }
    for labels in ours.keys().filter(|l| !theirs.contains_key(*l)) {
        diffs.push(format!("series only in chingest: {}", show_labels(labels)));
    }
}

/// What differs between Prometheus's answer and chingest's, in words.
fn compare(query: &str, end: i64, expected: &Reply, got: &Reply) -> Vec<String> {
    let expected =
        parse(expected).unwrap_or_else(|e| panic!("Prometheus's answer to {query:?}: {e}"));
    let got = match parse(got) {
        Ok(answer) => answer,
        Err(e) => return vec![format!("chingest's answer is not an API answer: {e}")],
    };
    let mut diffs = Vec::new();
    let one = |p: &Point| vec![*p];
    match (&expected, &got) {
        (
            Answer::Error {
                status: s1,
                kind: k1,
            },
            Answer::Error {
                status: s2,
                kind: k2,
            },
        ) => {
            if (s1, k1) != (s2, k2) {
                diffs.push(format!(
                    "Prometheus: {}, chingest: {}",
                    expected.describe(),
                    got.describe()
                ));
            }
        }
        (Answer::Scalar(a), Answer::Scalar(b)) => compare_series(
            &[(Labels::new(), one(a))],
            &[(Labels::new(), one(b))],
            end,
            &mut diffs,
        ),
        (Answer::String(t1, s1), Answer::String(t2, s2)) => {
            if (t1, s1) != (t2, s2) {
                diffs.push(format!(
                    "Prometheus {s1:?} at {}, chingest {s2:?} at {}",
                    show_time(*t1, end),
                    show_time(*t2, end)
                ));
            }
        }
        (Answer::Vector(a), Answer::Vector(b)) => {
            let series = |v: &[(Labels, Point)]| -> Vec<(Labels, Vec<Point>)> {
                v.iter().map(|(l, p)| (l.clone(), one(p))).collect()
            };
            compare_series(&series(a), &series(b), end, &mut diffs);
            let values = |v: &[(Labels, Point)]| v.iter().map(|(_, p)| p.value).collect::<Vec<_>>();
            let (x, y) = (values(a), values(b));
            if diffs.is_empty() && ordered(query) && x.iter().zip(&y).any(|(x, y)| !same(*x, *y)) {
                let show = |v: &[f64]| {
                    v.iter()
                        .map(|&x| show_value(x))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                diffs.push(format!(
                    "order: Prometheus [{}], chingest [{}]",
                    show(&x),
                    show(&y)
                ));
            }
        }
        (Answer::Matrix(a), Answer::Matrix(b)) => compare_series(a, b, end, &mut diffs),
        _ => diffs.push(format!(
            "Prometheus: {}, chingest: {}",
            expected.describe(),
            got.describe()
        )),
    }
    diffs
}

fn excerpt(text: &str) -> String {
    const MOST: usize = 300;
    match text.char_indices().nth(MOST) {
        Some((at, _)) => format!("{}… ({} bytes)", &text[..at], text.len()),
        None => text.to_owned(),
    }
}

/// Compares every answer, reports each mismatch, and fails if a query
/// differs without being listed in differences.txt, or is listed and no
/// longer differs (or is not in the corpus).
fn judge(
    end: i64,
    entries: &[Entry],
    jobs: &[(usize, usize)],
    answers: &[(Reply, Reply)],
    listed: &BTreeMap<String, String>,
) {
    let mut report: BTreeMap<usize, String> = BTreeMap::new();
    let mut differing = 0;
    for (&(e, v), (theirs, ours)) in jobs.iter().zip(answers) {
        let entry = &entries[e];
        let evaluation = &entry.evaluations[v];
        let query = evaluation
            .params
            .iter()
            .find(|(k, _)| k == "query")
            .map_or("", |(_, q)| q.as_str());
        let diffs = compare(query, end, theirs, ours);
        if diffs.is_empty() {
            continue;
        }
        differing += 1;
        let text = report.entry(e).or_default();
        let params: Vec<String> = evaluation
            .params
            .iter()
            .filter(|(k, _)| k != "query")
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let _ = writeln!(
            text,
            "  {} {} ({})",
            evaluation.path,
            params.join(" "),
            evaluation.why
        );
        for diff in diffs.iter().take(8) {
            let _ = writeln!(text, "    - {diff}");
        }
        if diffs.len() > 8 {
            let _ = writeln!(text, "    - … and {} more", diffs.len() - 8);
        }
        let _ = writeln!(text, "    Prometheus {}: {}", theirs.0, excerpt(&theirs.1));
        let _ = writeln!(text, "    chingest {}: {}", ours.0, excerpt(&ours.1));
    }

    let mut failures = String::new();
    let mut all = String::new();
    for (&e, text) in &report {
        let line = &entries[e].line;
        let block = format!("query: {line}\n{text}");
        match listed.get(line) {
            Some(reason) => {
                let _ = writeln!(all, "(listed: {reason})\n{block}");
            }
            None => {
                all.push_str(&block);
                failures.push_str(&block);
            }
        }
    }
    for (line, reason) in listed {
        match entries.iter().position(|e| &e.line == line) {
            None => {
                let _ = writeln!(
                    failures,
                    "differences.txt lists a query not in corpus.txt: {line}"
                );
            }
            Some(e) if !report.contains_key(&e) => {
                let _ = writeln!(
                    failures,
                    "differences.txt lists a query that no longer differs ({reason}): {line}"
                );
            }
            Some(_) => {}
        }
    }
    let summary = format!(
        "{} of {} queries differ from Prometheus 2.42 ({differing} of {} requests); {} listed in differences.txt\n",
        report.len(),
        entries.len(),
        jobs.len(),
        listed.len()
    );
    let file = Path::new(env!("CARGO_TARGET_TMPDIR")).join("promql-mismatches.txt");
    std::fs::write(&file, format!("{summary}\n{all}")).unwrap();
    // Printed once here: a panic message is printed twice (by the hook and
    // by the runner), and this one can be long.
    eprintln!("{summary}{failures}");
    assert!(
        failures.is_empty(),
        "{summary}every mismatch is above and in {}",
        file.display()
    );
}
