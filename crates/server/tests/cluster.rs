//! The ClickHouse nodes cluster mode stores into (issue: chingest as the
//! ingest tier of a ClickHouse cluster), as a test fixture: real ClickHouse
//! server code, the engine library's own, started as separate processes
//! (`support/clickhouse_node.py`) on loopback ports. These tests check the
//! facts the cluster sink relies on: an `INSERT … FORMAT ArrowStream` over
//! HTTP under an `insert_deduplication_token` is stored once however often
//! it is repeated, also after the node was killed and restarted.

mod support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arrow::array::UInt64Array;
use arrow::record_batch::RecordBatch;

use support::aged::{same, Aged};
use support::clickhouse::{free_port, post, ClickHouseNode, ZooKeeper};

/// A test: its name and its body.
type Test = (
    &'static str,
    fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>,
);

/// Runs the tests whose names contain the first free argument (all
/// without one), in order.
fn main() {
    let tests: [Test; 7] = [
        (
            "a_token_stores_an_arrow_insert_once_across_a_restart",
            || Box::pin(a_token_stores_an_arrow_insert_once_across_a_restart()),
        ),
        ("each_series_lives_on_its_shard_with_its_facts", || {
            Box::pin(each_series_lives_on_its_shard_with_its_facts())
        }),
        (
            "acknowledged_rows_land_once_across_kill_9_and_a_dead_shard",
            || Box::pin(acknowledged_rows_land_once_across_kill_9_and_a_dead_shard()),
        ),
        ("replicated_tables_are_made_on_every_replica", || {
            Box::pin(replicated_tables_are_made_on_every_replica())
        }),
        ("a_node_learns_what_another_creates", || {
            Box::pin(a_node_learns_what_another_creates())
        }),
        (
            "downsampled_rows_go_on_the_shards_and_every_node_reads_the_rollups",
            || Box::pin(downsampled_rows_go_on_the_shards_and_every_node_reads_the_rollups()),
        ),
        (
            "one_node_evaluates_the_rules_and_another_takes_over_when_it_dies",
            || Box::pin(one_node_evaluates_the_rules_and_another_takes_over_when_it_dies()),
        ),
    ];
    let filter = std::env::args().skip(1).find(|arg| !arg.starts_with('-'));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for (name, test) in tests {
        if filter.as_deref().is_none_or(|f| name.contains(f)) {
            runtime.block_on(test());
            println!("test {name} ... ok");
        }
    }
}

/// The real `chingest` binary in the clickhouse storage mode, killed (-9)
/// when dropped.
struct Chingest {
    child: Child,
    url: String,
    /// Its ClickHouse HTTP interface.
    clickhouse: String,
}

impl Chingest {
    /// Starts a node on `data_dir` storing into `shards`; ready when this
    /// returns.
    async fn start(data_dir: &Path, shards: &[&ClickHouseNode]) -> Chingest {
        Chingest::start_with(data_dir, shards, &[]).await
    }

    /// [`start`](Self::start) with more arguments; the node's standard
    /// error goes to `<data_dir>.log`. A node that exits before it is ready
    /// is started again on other ports, twice at most, its shards first
    /// made to answer ([`ClickHouseNode::ensure_up`]): a port [`free_port`]
    /// found free may be taken before the node binds it.
    async fn start_with(data_dir: &Path, shards: &[&ClickHouseNode], args: &[&str]) -> Chingest {
        for _ in 0..3 {
            let (http, clickhouse) = (free_port(), free_port());
            let mut command = Command::new(env!("CARGO_BIN_EXE_chingest"));
            command
                .args(["serve", "--log", "warn", "--data-dir"])
                .arg(data_dir)
                .args(["--http-addr", &format!("127.0.0.1:{http}")])
                .args(["--grpc-addr", &format!("127.0.0.1:{}", free_port())])
                .args(["--clickhouse-http-addr", &format!("127.0.0.1:{clickhouse}")]);
            for shard in shards {
                command.args(["--clickhouse-shard", &shard.shard_url()]);
            }
            command.args(args);
            // Its warnings and errors, shown if it exits before it is ready.
            let log = data_dir.with_extension("log");
            let stderr = std::fs::File::create(&log).unwrap();
            let mut node = Chingest {
                child: command
                    .stdout(Stdio::null())
                    .stderr(stderr)
                    .spawn()
                    .unwrap(),
                url: format!("http://127.0.0.1:{http}"),
                clickhouse: format!("http://127.0.0.1:{clickhouse}"),
            };
            for _ in 0..1200 {
                let ready = client().get(format!("{}/ready", node.url)).send().await;
                if ready.is_ok_and(|r| r.status().is_success()) {
                    return node;
                }
                if let Some(status) = node.child.try_wait().unwrap() {
                    let said = std::fs::read_to_string(&log).unwrap_or_default();
                    eprintln!("chingest exited before it was ready ({status}): {said}");
                    for shard in shards {
                        shard.ensure_up().await;
                    }
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            if node.child.try_wait().unwrap().is_none() {
                panic!("chingest did not become ready in 60 s");
            }
        }
        panic!("chingest exited before it was ready, three times");
    }

    /// Line protocol into `db`, answered once queryable; the status and
    /// the answer's text.
    async fn write(&self, db: &str, body: String) -> (reqwest::StatusCode, String) {
        let url = format!("{}/write?db={db}&durability=visible", self.url);
        let r = client().post(url).body(body).send().await.unwrap();
        (r.status(), r.text().await.unwrap())
    }

    /// Remote-writes `series` series `up{job="j", instance="i<n>"}` of
    /// `samples` samples each into `db`, answered once queryable.
    async fn remote_write(
        &self,
        db: &str,
        series: usize,
        samples: i64,
    ) -> (reqwest::StatusCode, String) {
        let times = (0..samples).map(|t| 1_700_000_000_000 + t * 1000);
        self.remote_write_series(db, "up", 0..series, times).await
    }

    /// Remote-writes series `<name>{job="j", instance="i<n>"}`, `n` in
    /// `instances`, each with a sample of 1 at each of `times` (ms), into
    /// `db`, answered once queryable.
    async fn remote_write_series(
        &self,
        db: &str,
        name: &str,
        instances: std::ops::Range<usize>,
        times: impl Iterator<Item = i64> + Clone,
    ) -> (reqwest::StatusCode, String) {
        use support::remote_write::{body, instance_series};
        let body = body(
            instances
                .map(|n| instance_series(name, n, times.clone().map(|t| (t, 1.0))))
                .collect(),
        );
        let r = client()
            .post(format!(
                "{}/api/v1/write?db={db}&durability=visible",
                self.url
            ))
            .header("Content-Encoding", "snappy")
            .header("Content-Type", "application/x-protobuf")
            .body(body)
            .send()
            .await
            .unwrap();
        (r.status(), r.text().await.unwrap())
    }

    /// GET `path`: the status and the text.
    async fn get(&self, path: &str) -> (reqwest::StatusCode, String) {
        let r = client()
            .get(format!("{}{path}", self.url))
            .send()
            .await
            .unwrap();
        (r.status(), r.text().await.unwrap())
    }

    /// `/sql`'s answer (TSV).
    async fn sql(&self, query: &str) -> String {
        let (status, text) = self.try_sql(query).await;
        assert!(status.is_success(), "{query}: {status} {text}");
        text
    }

    /// `/sql`'s status and answer.
    async fn try_sql(&self, query: &str) -> (reqwest::StatusCode, String) {
        let url = format!("{}/sql?format=TabSeparated", self.url);
        let r = client()
            .post(url)
            .body(query.to_owned())
            .send()
            .await
            .unwrap();
        (r.status(), r.text().await.unwrap())
    }

    /// A PromQL query's JSON answer (`/api/v1/<api>`, with `params`).
    async fn promql(&self, api: &str, params: &[(&str, &str)]) -> serde_json::Value {
        let r = client()
            .get(format!("{}/api/v1/{api}", self.url))
            .query(&[("db", "metrics")])
            .query(params)
            .send()
            .await
            .unwrap();
        r.json().await.unwrap()
    }

    /// An InfluxQL statement's JSON answer.
    async fn influxql(&self, db: &str, query: &str) -> serde_json::Value {
        let url = format!("{}/query", self.url);
        let r = client()
            .get(url)
            .query(&[("db", db), ("q", query)])
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{query}: {}", r.status());
        r.json().await.unwrap()
    }
}

impl Drop for Chingest {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

/// One chingest node over two shards: every series row and every fact row
/// of it on the series' shard (its id modulo 2), none lost or doubled; the
/// node's SQL (the view joins per shard) and InfluxQL read them all back.
/// Then a second node joins, both write at once (line protocol, remote
/// write), and both read everything; a delete runs on every shard.
async fn each_series_lives_on_its_shard_with_its_facts() {
    let dir = tempfile::tempdir().unwrap();
    let shard0 = ClickHouseNode::start_new(&dir.path().join("shard0")).await;
    let shard1 = ClickHouseNode::start_new(&dir.path().join("shard1")).await;
    let node = Chingest::start(&dir.path().join("chingest"), &[&shard0, &shard1]).await;
    let body: String = (0..1000)
        .map(|i| format!("cpu,host=h{} value={i}i {}\n", i % 40, 1_000_000_000 + i))
        .collect();
    let (status, text) = node.write("metrics", body).await;
    assert_eq!(status, reqwest::StatusCode::NO_CONTENT, "{text}");
    let mut stored = 0;
    for (index, shard) in [&shard0, &shard1].into_iter().enumerate() {
        let answer = shard
            .query(&format!(
                "SELECT count(), countIf(series_id % 2 != {index}), uniqExact(series_id) \
                 FROM metrics.`cpu.autogen`"
            ))
            .await
            .unwrap();
        let [rows, misplaced, series] = numbers(&answer);
        assert_eq!(misplaced, 0, "shard {index} holds another shard's series");
        assert!(
            rows > 0 && series > 0,
            "shard {index} got nothing: {answer}"
        );
        let series_rows = shard
            .query(&format!(
                "SELECT count(), countIf(series_id % 2 != {index}) FROM metrics._series FINAL"
            ))
            .await
            .unwrap();
        assert_eq!(
            series_rows,
            format!("{series}\t0\n"),
            "shard {index}: its series rows are those of its facts"
        );
        stored += rows;
    }
    assert_eq!(stored, 1000);
    assert_eq!(
        node.sql("SELECT count(), uniqExact(host), sum(value) FROM metrics.cpu")
            .await,
        "1000\t40\t499500\n"
    );
    let answer = node
        .influxql("metrics", "SELECT count(value) FROM cpu WHERE host = 'h3'")
        .await;
    assert_eq!(
        answer["results"][0]["series"][0]["values"][0][1], 25,
        "{answer}"
    );
    // A second node over the same shards (it finds the first node's
    // tables there), both writing at once: line protocol into the same
    // measurement, and remote write.
    let node2 = Chingest::start(&dir.path().join("chingest2"), &[&shard0, &shard1]).await;
    let more: String = (0..500i64)
        .map(|i| format!("cpu,host=n2-{} value={i}i {}\n", i % 10, 2_000_000_000 + i))
        .collect();
    let again: String = (0..500i64)
        .map(|i| format!("cpu,host=n1-{} value={i}i {}\n", i % 10, 3_000_000_000 + i))
        .collect();
    let (first, second, third) = tokio::join!(
        node.write("metrics", again),
        node2.write("metrics", more),
        node2.remote_write("metrics", 20, 10),
    );
    for (status, text) in [first, second, third] {
        assert_eq!(status, reqwest::StatusCode::NO_CONTENT, "{text}");
    }
    for n in [&node, &node2] {
        assert_eq!(
            n.sql("SELECT count(), uniqExact(host), sum(value) FROM metrics.cpu")
                .await,
            format!("2000\t60\t{}\n", 499_500 + 2 * 124_750)
        );
    }
    assert_eq!(
        node2
            .sql(
                "SELECT count(), uniqExact(instance) FROM metrics.prometheus WHERE __name__ = 'up'"
            )
            .await,
        "200\t20\n"
    );
    for (index, shard) in [&shard0, &shard1].into_iter().enumerate() {
        let misplaced = shard
            .query(&format!(
                "SELECT (SELECT countIf(series_id % 2 != {index}) FROM metrics.`cpu.autogen`) \
                 + (SELECT countIf(series_id % 2 != {index}) FROM metrics.`prometheus.autogen`) \
                 + (SELECT countIf(series_id % 2 != {index}) FROM metrics._series)"
            ))
            .await
            .unwrap();
        assert_eq!(misplaced, "0\n", "shard {index}");
    }
    // PromQL and the ClickHouse interface read through the shards too.
    let r = client()
        .get(format!("{}/api/v1/query", node2.url))
        .query(&[
            ("db", "metrics"),
            ("query", "count(up)"),
            ("time", "1700000009"),
        ])
        .send()
        .await
        .unwrap();
    let answer: serde_json::Value = r.json().await.unwrap();
    assert_eq!(answer["data"]["result"][0]["value"][1], "20", "{answer}");
    let r = client()
        .get(&node.clickhouse)
        .query(&[("query", "SELECT count() FROM metrics.cpu")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.text().await.unwrap(), "2000\n");
    // Untrusted SQL reaches the server's data only: not the cluster the
    // engine is configured with, nor the shards' other tables.
    let shard_tcp = format!("127.0.0.1:{}", shard0.tcp_port);
    for statement in [
        format!("SELECT * FROM remote('{shard_tcp}', system.one)"),
        format!("SELECT * FROM remote('{shard_tcp}', metrics, `cpu.autogen`)"),
        "SELECT * FROM cluster('chingest', system.one)".to_owned(),
        "SELECT * FROM clusterAllReplicas('chingest', system.tables)".to_owned(),
        "SELECT * FROM cluster('chingest', metrics, `cpu.autogen`)".to_owned(),
        "SELECT * FROM system.clusters".to_owned(),
        "SELECT * FROM system.distribution_queue".to_owned(),
        "INSERT INTO metrics.`cpu.autogen` (series_id) VALUES (1)".to_owned(),
    ] {
        let (status, text) = node.try_sql(&statement).await;
        assert_eq!(
            status,
            reqwest::StatusCode::FORBIDDEN,
            "{statement}: {text}"
        );
    }
    let (status, text) = node
        .try_sql("SELECT count() FROM metrics.cpu SETTINGS max_execution_time = 1000")
        .await;
    assert_eq!(status, reqwest::StatusCode::BAD_REQUEST, "{text}");
    drop(node2);
    // A delete runs on every shard.
    let deleted = client()
        .post(format!("{}/api/v2/delete?bucket=metrics", node.url))
        .body(
            r#"{"start": "1970-01-01T00:00:00Z", "stop": "1970-01-02T00:00:00Z",
                "predicate": "host=\"h3\""}"#,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), reqwest::StatusCode::NO_CONTENT);
    assert_eq!(
        node.sql("SELECT count(), countIf(host = 'h3') FROM metrics.cpu")
            .await,
        "1975\t0\n"
    );
}

/// Lines per request of the load below.
const LINES: u64 = 50;

/// Request `id`: `LINES` lines over 10 series of its own writer, its id
/// in field `req`.
fn request(writer: u64, id: u64) -> String {
    (0..LINES)
        .map(|line| {
            format!(
                "load,w={writer},s={} req={id}i,line={line}i {}\n",
                line % 10,
                id * LINES + line
            )
        })
        .collect()
}

/// Posts requests (fsync acknowledgements) until the node dies or
/// `stop` is set; the ids answered 204. Any other answer must be 503
/// (the log full while a shard is down): then it waits and goes on.
async fn writer(
    url: String,
    writer: u64,
    next: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    refused: Arc<AtomicU64>,
) -> Vec<u64> {
    let mut acked = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let id = next.fetch_add(1, Ordering::Relaxed);
        let sent = client()
            .post(format!("{url}/write?db=metrics"))
            .body(request(writer, id))
            .send()
            .await;
        match sent {
            Ok(r) if r.status() == reqwest::StatusCode::NO_CONTENT => acked.push(id),
            Ok(r) if r.status() == reqwest::StatusCode::SERVICE_UNAVAILABLE => {
                refused.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Ok(r) => panic!("request {id}: {} {:?}", r.status(), r.text().await),
            Err(_) => break,
        }
    }
    acked
}

/// Rows per `req` across the shards.
async fn stored_per_request(shards: &[&ClickHouseNode]) -> std::collections::BTreeMap<u64, u64> {
    let mut stored = std::collections::BTreeMap::new();
    for shard in shards {
        let answer = shard
            .query("SELECT req, count() FROM metrics.`load.autogen` GROUP BY req")
            .await
            .unwrap();
        for line in answer.lines() {
            let [req, rows] = numbers(line);
            *stored.entry(req).or_default() += rows;
        }
    }
    stored
}

/// Two writers against a node over two shards, two more against a second
/// node writing the same series throughout. Five times the first node is
/// killed (-9) mid-load and restarted; then a shard dies: writes are
/// acknowledged until the log is full, then refused with 503, and
/// `/metrics` counts the failing inserts; the shard comes back and
/// everything lands. Every acknowledged request is stored exactly once
/// across the shards.
async fn acknowledged_rows_land_once_across_kill_9_and_a_dead_shard() {
    let dir = tempfile::tempdir().unwrap();
    let shard_dirs = [dir.path().join("shard0"), dir.path().join("shard1")];
    let shard0 = ClickHouseNode::start_new(&shard_dirs[0]).await;
    let mut shard1 = ClickHouseNode::start_new(&shard_dirs[1]).await;
    let data_dir = dir.path().join("chingest");
    let config = dir.path().join("chingest.toml");
    // A small log, so that it fills while a shard is down.
    std::fs::write(
        &config,
        "[wal]\nmax_bytes = 8388608\nsegment_bytes = 1048576\n",
    )
    .unwrap();
    let args = ["--config", config.to_str().unwrap()];
    let next = Arc::new(AtomicU64::new(1));
    let refused = Arc::new(AtomicU64::new(0));
    let mut acked = Vec::new();
    let load = |node: &Chingest, stop: &Arc<AtomicBool>| {
        (0..2)
            .map(|w| {
                tokio::spawn(writer(
                    node.url.clone(),
                    w,
                    Arc::clone(&next),
                    Arc::clone(stop),
                    Arc::clone(&refused),
                ))
            })
            .collect::<Vec<_>>()
    };
    let other_dir = dir.path().join("chingest-other");
    let other = Chingest::start_with(&other_dir, &[&shard0, &shard1], &args).await;
    let stop_other = Arc::new(AtomicBool::new(false));
    let other_writers = load(&other, &stop_other);
    for trial in 0..5u64 {
        let node = Chingest::start_with(&data_dir, &[&shard0, &shard1], &args).await;
        let stop = Arc::new(AtomicBool::new(false));
        let writers = load(&node, &stop);
        tokio::time::sleep(Duration::from_millis(400 + trial * 250)).await;
        drop(node);
        for writer in writers {
            acked.extend(writer.await.unwrap());
        }
    }
    stop_other.store(true, Ordering::Relaxed);
    for writer in other_writers {
        acked.extend(writer.await.unwrap());
    }
    // A shard dies under load.
    let node = Chingest::start_with(&data_dir, &[&shard0, &shard1], &args).await;
    let stop = Arc::new(AtomicBool::new(false));
    let writers = load(&node, &stop);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let shard1_ports = (shard1.http.clone(), shard1.tcp_port);
    drop(shard1);
    let started = std::time::Instant::now();
    while refused.load(Ordering::Relaxed) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the log never filled while a shard was down"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (_, metrics) = node.get("/metrics").await;
    let metric = |name: &str| {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no {name} in:\n{metrics}"))
    };
    assert!(
        metric("chingest_flush_errors_total ") > 0,
        "no failing insert counted"
    );
    assert!(
        metric("chingest_shard_failing{shard=\"1\"} ") > 0,
        "shard 1 not shown behind"
    );
    assert_eq!(metric("chingest_shard_failing{shard=\"0\"} "), 0);
    assert!(metric("chingest_shard_rows_total{shard=\"0\"} ") > 0);
    let (status, health) = node.get("/health").await;
    assert_eq!(status, reqwest::StatusCode::SERVICE_UNAVAILABLE);
    assert!(health.contains("shard 1"), "{health}");
    let http_port: u16 = shard1_ports.0.rsplit(':').next().unwrap().parse().unwrap();
    shard1 = ClickHouseNode::start(&shard_dirs[1], http_port, shard1_ports.1).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        acked.extend(writer.await.unwrap());
    }
    // Everything acknowledged lands, once.
    let started = std::time::Instant::now();
    loop {
        // A request lands shard by shard: in part until the last shard's
        // insert succeeds, never more than whole.
        let stored = stored_per_request(&[&shard0, &shard1]).await;
        let doubled: Vec<_> = stored.iter().filter(|(_, rows)| **rows > LINES).collect();
        assert!(doubled.is_empty(), "requests stored twice: {doubled:?}");
        let missing: Vec<_> = acked
            .iter()
            .filter(|id| stored.get(id) != Some(&LINES))
            .collect();
        let torn: Vec<_> = stored.iter().filter(|(_, rows)| **rows != LINES).collect();
        if missing.is_empty() && torn.is_empty() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "{} acknowledged requests never landed whole: {:?}…; in part: {:?}",
            missing.len(),
            &missing[..missing.len().min(10)],
            &torn[..torn.len().min(10)]
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(
        acked.len() >= 20,
        "only {} requests acknowledged",
        acked.len()
    );
    let (status, health) = node.get("/health").await;
    assert_eq!(status, reqwest::StatusCode::OK, "{health:?}");
    drop((node, other));
}

/// The numbers of a one-row TSV answer.
/// With a Keeper path, every table is a `Replicated*MergeTree` on every
/// replica of every shard: the replicas of a shard registered in the real
/// ZooKeeper under one path, each shard under its own, with the engines
/// chingest reads back when it reopens. The test nodes cannot replicate
/// (clickhouse-local has no interserver port, so a replicated table stays
/// read-only there): an insert waits there until it times out, which must
/// show as a failing shard in `/health`, the rows kept in the log.
async fn replicated_tables_are_made_on_every_replica() {
    let dir = tempfile::tempdir().unwrap();
    let keeper = ZooKeeper::start(&dir.path().join("zookeeper")).await;
    let mut replicas = Vec::new();
    for shard in 0..2 {
        for replica in 0..2 {
            let config = format!(
                "<zookeeper><node><host>127.0.0.1</host><port>{}</port></node></zookeeper>\
                 <macros><shard>s{shard}</shard><replica>r{replica}</replica></macros>",
                keeper.port
            );
            replicas.push(
                ClickHouseNode::start_configured(
                    &dir.path().join(format!("s{shard}r{replica}")),
                    free_port(),
                    free_port(),
                    Some(&config),
                )
                .await,
            );
        }
    }
    let shard_args: Vec<String> = replicas
        .chunks(2)
        .flat_map(|shard| {
            let urls: Vec<String> = shard.iter().map(ClickHouseNode::shard_url).collect();
            ["--clickhouse-shard".to_owned(), urls.join("|")]
        })
        .collect();
    // Short requests: the test replicas make an insert wait (below).
    let config = dir.path().join("chingest.toml");
    std::fs::write(&config, "[storage]\ntimeout_ms = 2000\n").unwrap();
    let mut args: Vec<&str> = shard_args.iter().map(String::as_str).collect();
    args.extend(["--clickhouse-keeper-path", "/chingest-test"]);
    args.extend(["--config", config.to_str().unwrap()]);
    let data = dir.path().join("chingest");
    let node = Chingest::start_with(&data, &[], &args).await;
    let url = format!("{}/write?db=metrics", node.url);
    let body = "cpu,host=a value=1i 1000000000\ncpu,host=b value=2i 1000000000\n";
    let r = client().post(url).body(body).send().await.unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::NO_CONTENT);
    for (index, replica) in replicas.iter().enumerate() {
        let (shard, name) = (index / 2, index % 2);
        let tables = replica
            .query(
                "SELECT table, engine, zookeeper_path, replica_name, total_replicas \
                 FROM system.replicas WHERE database = 'metrics' ORDER BY table",
            )
            .await
            .unwrap();
        let expected: String = [
            ("_duplicate_policies", "ReplicatedReplacingMergeTree"),
            ("_retention_policies", "ReplicatedReplacingMergeTree"),
            ("_series", "ReplicatedReplacingMergeTree"),
            ("cpu.autogen", "ReplicatedMergeTree"),
        ]
        .iter()
        .map(|(table, engine)| {
            format!("{table}\t{engine}\t/chingest-test/s{shard}/metrics/{table}\tr{name}\t2\n")
        })
        .collect();
        assert_eq!(tables, expected, "shard {shard} replica {name}");
    }
    // An insert into the test replicas' read-only tables waits for them to
    // become writable, until the request's timeout: the node shows the
    // shards behind, the rows kept in its log.
    let mut health = (reqwest::StatusCode::OK, String::new());
    for _ in 0..300 {
        health = node.get("/health").await;
        if health.1.contains("is failing") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        health.0,
        reqwest::StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        health.1
    );
    assert!(
        health.1.contains("rows for it stay in the write-ahead log"),
        "{}",
        health.1
    );
    // Another node over the same shards reads the replicated tables as
    // chingest's own.
    let other = Chingest::start_with(&dir.path().join("chingest-other"), &[], &args).await;
    let answer = other.influxql("metrics", "SHOW FIELD KEYS FROM cpu").await;
    assert_eq!(
        answer["results"][0]["series"][0]["values"],
        serde_json::json!([["value", "integer"]]),
        "{answer}"
    );
    assert_eq!(other.sql("SELECT count() FROM metrics.cpu").await, "0\n");
    drop((node, other));
}

fn numbers<const N: usize>(answer: &str) -> [u64; N] {
    let values: Vec<u64> = answer
        .trim()
        .split('\t')
        .map(|v| v.parse().unwrap())
        .collect();
    values
        .try_into()
        .unwrap_or_else(|_| panic!("{N} numbers expected: {answer}"))
}

/// `values` as an Arrow IPC stream of one column `a`.
fn arrow_stream(values: &[u64]) -> Vec<u8> {
    let batch =
        RecordBatch::try_from_iter([("a", Arc::new(UInt64Array::from(values.to_vec())) as _)])
            .unwrap();
    let mut out = Vec::new();
    let mut writer = arrow::ipc::writer::StreamWriter::try_new(&mut out, &batch.schema()).unwrap();
    writer.write(&batch).unwrap();
    writer.finish().unwrap();
    drop(writer);
    out
}

async fn a_token_stores_an_arrow_insert_once_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("node");
    let (port, tcp_port) = (free_port(), free_port());
    let insert = |node_url: String, token: &'static str| async move {
        let sql = format!(
            "INSERT INTO shard.t SETTINGS insert_deduplication_token = '{token}' FORMAT ArrowStream"
        );
        post(&node_url, Some(&sql), arrow_stream(&[1, 2, 3])).await
    };
    let node = ClickHouseNode::start(&data, port, tcp_port).await;
    node.query("CREATE DATABASE shard").await.unwrap();
    node.query(
        "CREATE TABLE shard.t (a UInt64) ENGINE = MergeTree ORDER BY a \
         SETTINGS non_replicated_deduplication_window = 1000",
    )
    .await
    .unwrap();
    insert(node.http.clone(), "log:1:3").await.unwrap();
    insert(node.http.clone(), "log:1:3").await.unwrap();
    assert_eq!(
        node.query("SELECT count() FROM shard.t").await.unwrap(),
        "3\n"
    );
    // Killed and restarted on the same directory: the token is remembered.
    drop(node);
    let node = ClickHouseNode::start(&data, port, tcp_port).await;
    insert(node.http.clone(), "log:1:3").await.unwrap();
    assert_eq!(
        node.query("SELECT count() FROM shard.t").await.unwrap(),
        "3\n"
    );
    insert(node.http.clone(), "log:4:6").await.unwrap();
    assert_eq!(
        node.query("SELECT count() FROM shard.t").await.unwrap(),
        "6\n"
    );
    // A 26.7 node: the version the embedded engine is.
    assert!(node
        .query("SELECT version()")
        .await
        .unwrap()
        .starts_with("26.7"));
}

/// How often the nodes of [`a_node_learns_what_another_creates`] learn
/// what the other created (ms); it is asked to within ten times that.
const REFRESH_MS: u64 = 500;

/// A node learns what another node creates after it opened, within the
/// refresh interval: a database, a measurement, a field, a tag key, new
/// remote-write series and a metric name, readable through `/sql` (the
/// views), InfluxQL's `SHOW`s and PromQL. And reads never answer from
/// memory, which holds only this node's writes: a range query on the
/// first node sees the samples the second wrote into series both write.
async fn a_node_learns_what_another_creates() {
    let dir = tempfile::tempdir().unwrap();
    let shard0 = ClickHouseNode::start_new(&dir.path().join("shard0")).await;
    let shard1 = ClickHouseNode::start_new(&dir.path().join("shard1")).await;
    let shards = [&shard0, &shard1];
    let refresh = REFRESH_MS.to_string();
    let args = ["--clickhouse-refresh-ms", refresh.as_str()];
    let node1 = Chingest::start_with(&dir.path().join("node1"), &shards, &args).await;
    let (status, text) = node1
        .write("metrics", "cpu,host=a value=1i 1000000000\n".to_owned())
        .await;
    assert_eq!(status, reqwest::StatusCode::NO_CONTENT, "{text}");
    // A node keeps nothing to back up: the shards are backed up on their own.
    for path in ["/api/v1/admin/backup", "/api/v1/admin/snapshots"] {
        let to = dir.path().join("backup").display().to_string();
        let r = client()
            .post(format!("{}{path}", node1.url))
            .json(&serde_json::json!({ "to": to }))
            .send()
            .await
            .unwrap();
        let status = r.status();
        let text = r.text().await.unwrap();
        assert_eq!(status, reqwest::StatusCode::BAD_REQUEST, "{path}: {text}");
        assert!(text.contains("ON CLUSTER"), "{path}: {text}");
    }
    // Downsampling levels come from every node's file: the statement is refused.
    let r = client()
        .post(format!("{}/query?db=metrics", node1.url))
        .form(&[("q", "SET DOWNSAMPLING '30d:5m'")])
        .send()
        .await
        .unwrap();
    let status = r.status();
    let text = r.text().await.unwrap();
    assert_eq!(status, reqwest::StatusCode::BAD_REQUEST, "{text}");
    assert!(text.contains("clickhouse storage mode"), "{text}");
    // Continuous queries would run on every node: refused, naming why.
    let create = "CREATE CONTINUOUS QUERY c ON metrics BEGIN SELECT mean(v) INTO m_1m FROM m \
                  GROUP BY time(1m) END";
    let r = client()
        .post(format!("{}/query?db=metrics", node1.url))
        .form(&[("q", create)])
        .send()
        .await
        .unwrap();
    let text = r.text().await.unwrap();
    assert!(
        text.contains("not available in the clickhouse storage mode"),
        "{text}"
    );
    let (_, text) = node1.get("/query?q=SHOW%20CONTINUOUS%20QUERIES").await;
    assert!(!text.contains("\"values\""), "{text}");
    // Samples of the last minutes, which memory would hold: node 1 writes
    // the first ten seconds of i0 and i1, node 2 the next ten of i0 to i4.
    let start = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
        - 120)
        * 1000;
    let seconds = |from: i64, to: i64| (from..to).map(move |s| start + s * 1000);
    let (status, text) = node1
        .remote_write_series("metrics", "up", 0..2, seconds(0, 10))
        .await;
    assert_eq!(status, reqwest::StatusCode::NO_CONTENT, "{text}");
    // Node 1 has read what it wrote: memory would now answer for `up`.
    let answer = node1
        .promql(
            "query",
            &[
                ("query", "count(up)"),
                ("time", &(start / 1000 + 9).to_string()),
            ],
        )
        .await;
    assert_eq!(answer["data"]["result"][0]["value"][1], "2", "{answer}");

    let node2 = Chingest::start_with(&dir.path().join("node2"), &shards, &args).await;
    for (db, body) in [
        ("other", "mem,host=b free=5i 1000000000\n"),
        ("metrics", "disk,host=c used=7i 1000000000\n"),
        ("metrics", "cpu,host=a idle=3i 1000000001\n"),
        ("metrics", "cpu,host=a,region=eu value=2i 1000000002\n"),
    ] {
        let (status, text) = node2.write(db, body.to_owned()).await;
        assert_eq!(status, reqwest::StatusCode::NO_CONTENT, "{db}: {text}");
    }
    for (name, instances) in [("up", 0..5), ("load1", 0..1)] {
        let (status, text) = node2
            .remote_write_series("metrics", name, instances, seconds(10, 20))
            .await;
        assert_eq!(status, reqwest::StatusCode::NO_CONTENT, "{text}");
    }
    let written = std::time::Instant::now();

    let end = (start / 1000 + 19).to_string();
    let range = [
        ("query", "up{instance=\"i0\"}"),
        ("start", &(start / 1000).to_string()),
        ("end", end.as_str()),
        ("step", "1"),
    ]
    .map(|(k, v)| (k, v.to_owned()));
    let range: Vec<(&str, &str)> = range.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let check = || async {
        let sql = [
            ("SELECT count() FROM other.mem", "1\n"),
            ("SELECT count(), sum(used) FROM metrics.disk", "1\t7\n"),
            ("SELECT count(idle), sum(idle) FROM metrics.cpu", "1\t3\n"),
            ("SELECT count() FROM metrics.cpu WHERE region = 'eu'", "1\n"),
        ];
        for (query, want) in sql {
            let (status, text) = node1.try_sql(query).await;
            if !status.is_success() || text != want {
                return Err(format!("{query}: {status} {text}"));
            }
        }
        let influxql = [
            ("other", "SHOW DATABASES", "\"other\""),
            ("metrics", "SHOW MEASUREMENTS", "\"disk\""),
            ("metrics", "SHOW FIELD KEYS FROM cpu", "\"idle\""),
            ("metrics", "SHOW TAG KEYS FROM cpu", "\"region\""),
        ];
        for (db, query, want) in influxql {
            let answer = node1.influxql(db, query).await.to_string();
            if !answer.contains(want) {
                return Err(format!("{query}: {answer}"));
            }
        }
        let time = end.as_str();
        let answer = node1
            .promql("query", &[("query", "count(up)"), ("time", time)])
            .await;
        if answer["data"]["result"][0]["value"][1] != "5" {
            return Err(format!("count(up): {answer}"));
        }
        let answer = node1.promql("query_range", &range).await;
        let points = answer["data"]["result"][0]["values"]
            .as_array()
            .map(Vec::len);
        if points != Some(20) {
            return Err(format!("up{{instance=\"i0\"}} over 20 s: {answer}"));
        }
        let answer = node1.promql("label/__name__/values", &[]).await;
        if !answer["data"].to_string().contains("\"load1\"") {
            return Err(format!("metric names: {answer}"));
        }
        let answer = node1.promql("series", &[("match[]", "up")]).await;
        if answer["data"].as_array().map(Vec::len) != Some(5) {
            return Err(format!("series of up: {answer}"));
        }
        Ok(())
    };
    let deadline = Duration::from_millis(10 * REFRESH_MS);
    loop {
        match check().await {
            Ok(()) => break,
            Err(missing) if written.elapsed() > deadline => {
                let (_, metrics) = node1.get("/metrics").await;
                let refreshes: Vec<&str> = metrics
                    .lines()
                    .filter(|l| l.starts_with("chingest_catalog"))
                    .collect();
                panic!("node 1 has not learnt it {deadline:?} after: {missing} ({refreshes:?})")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    let (_, metrics) = node1.get("/metrics").await;
    let refreshes = metrics
        .lines()
        .find_map(|line| line.strip_prefix("chingest_catalog_refreshes_total "))
        .unwrap_or_else(|| panic!("no refreshes counted: {metrics}"));
    assert!(refreshes.parse::<u64>().unwrap() > 0, "{refreshes}");
    assert!(
        metrics.contains("chingest_catalog_refresh_errors_total 0"),
        "{metrics}"
    );
    // Node 2 reads the field node 1 never wrote, the same on both.
    assert_eq!(
        node2.sql("SELECT count(idle) FROM metrics.cpu").await,
        "1\n"
    );
}

/// Downsampling on the shards (docs/downsampling.md, "In the cluster
/// mode"): two nodes over two shards, both configured to downsample
/// `down` (`1d:5m`, `2d:1h`), the same three days of points written into
/// it and into the plain `plain`. Each shard gets the rollups of its own
/// series, one node makes every pass (the lease), the rows past a day go
/// from both shards, and both nodes answer InfluxQL and PromQL over the
/// days in `down` as in `plain` (rollups read where rows are gone and
/// where they are kept): after the rows went, after deletes on either
/// node (at once there, and everywhere after their passes), after a late
/// point (at once on its node, soon on the other). `SET DOWNSAMPLING` is
/// refused. The node making passes is killed: the other takes the lease
/// over, and the rows of a measurement written after go too.
async fn downsampled_rows_go_on_the_shards_and_every_node_reads_the_rollups() {
    let dir = tempfile::tempdir().unwrap();
    let shard0 = ClickHouseNode::start_new(&dir.path().join("shard0")).await;
    let shard1 = ClickHouseNode::start_new(&dir.path().join("shard1")).await;
    let shards = [&shard0, &shard1];
    let config_file = dir.path().join("chingest.toml");
    let levels = |levels: &str| {
        let file = format!(
            "[downsampling]\nperiod_ms = 200\nremoval_delay_ms = 3000\n\
             [downsampling.databases]\ndown = {levels}\n"
        );
        std::fs::write(&config_file, file).unwrap();
    };
    levels(r#"["1d:5m", "2d:1h"]"#);
    let config = config_file.display().to_string();
    let args = [
        "--config",
        config.as_str(),
        "--clickhouse-refresh-ms",
        "500",
    ];
    let mut nodes = vec![
        Chingest::start_with(&dir.path().join("node1"), &shards, &args).await,
        Chingest::start_with(&dir.path().join("node2"), &shards, &args).await,
    ];
    let aged = Aged::now();
    // Its hosts, and four more, for series on both shards.
    let body = |measurement: &str| {
        let body = aged.body().replace("cpu,", &format!("{measurement},"));
        let more = body
            .replace("host=h0", "host=h2")
            .replace("host=h1", "host=h3");
        let most = body
            .replace("host=h0", "host=h4")
            .replace("host=h1", "host=h5");
        [body, more, most].join("\n")
    };
    for db in ["down", "plain"] {
        let (status, text) = nodes[0].write(db, body("cpu")).await;
        assert_eq!(status, reqwest::StatusCode::NO_CONTENT, "{text}");
    }
    let before_cut = |db: &str, measurement: &str| {
        format!(
            "SELECT count() FROM {db}.`{measurement}.autogen` WHERE time < toDateTime({})",
            aged.rows_from
        )
    };
    for shard in shards {
        let rows = shard.query(&before_cut("plain", "cpu")).await.unwrap();
        assert_ne!(rows.trim(), "0", "every shard holds rows before the cut");
    }
    until_gone_from(&shards, &before_cut("down", "cpu")).await;
    for (i, shard) in shards.iter().enumerate() {
        let rollups = shard
            .query(
                "SELECT count() FROM system.tables WHERE database = 'down' \
                 AND startsWith(name, '_rollup.')",
            )
            .await
            .unwrap();
        assert_eq!(rollups.trim(), "2", "each shard keeps both levels");
        // Each bucket on its series' shard (`series_id` mod 2).
        let buckets = shard
            .query(&format!(
                "SELECT count(), countIf(series_id % 2 != {i}) FROM down.`_rollup.1h.cpu.autogen`"
            ))
            .await
            .unwrap();
        let [held, misplaced] = numbers(&buckets);
        assert!(held > 0 && misplaced == 0, "shard {i}: {buckets}");
    }
    for node in &nodes {
        answers_agree(node, &aged, "cpu", "the rows went").await;
    }
    // One node made the passes.
    let mut passes = Vec::new();
    for node in &nodes {
        let (_, text) = node.get("/metrics").await;
        passes.push(support::metric(&text, "chingest_downsampling_passes_total"));
        assert_eq!(
            support::metric(&text, "chingest_downsampling_errors_total"),
            0.0,
            "{text}"
        );
    }
    assert!(
        passes.iter().filter(|p| **p > 0.0).count() == 1,
        "passes per node: {passes:?}"
    );
    // Levels come from the file.
    let r = client()
        .post(format!("{}/query?db=down", nodes[1].url))
        .form(&[("q", "SET DOWNSAMPLING '30d:5m'")])
        .send()
        .await
        .unwrap();
    let (status, text) = (r.status(), r.text().await.unwrap());
    assert_eq!(status, reqwest::StatusCode::BAD_REQUEST, "{text}");
    // Deletes on either node: where the rows are gone (whole hours, from
    // the buckets themselves) and where they are kept (from the middle
    // of a 5 m bucket: its pass rebuilds it from the rows).
    let ns = |s: i64| s * 1_000_000_000;
    let deletes = [
        format!(
            "DELETE FROM cpu WHERE host = 'h1' AND time >= {} AND time < {}",
            ns(aged.day0 + 6 * 3600),
            ns(aged.day0 + 8 * 3600)
        ),
        format!(
            "DELETE FROM cpu WHERE host = 'h3' AND time >= {} AND time < {}",
            ns(aged.rows_from + 5 * 3600 + 150),
            ns(aged.rows_from + 9 * 3600)
        ),
    ];
    for (delete, node) in deletes.iter().zip(&nodes) {
        for db in ["down", "plain"] {
            let r = client()
                .post(format!("{}/query?db={db}", node.url))
                .form(&[("q", delete.as_str())])
                .send()
                .await
                .unwrap();
            let (status, text) = (r.status(), r.text().await.unwrap());
            assert!(
                status.is_success() && !text.contains("error"),
                "{delete}: {text}"
            );
        }
        // At once on the node that deleted.
        influxql_agrees(node, &aged, delete).await;
    }
    // Every node, once a pass took the marks.
    let marked = format!(
        "SELECT count() FROM down._downsampling FINAL WHERE position(table, '.mark.') > 0 \
         AND dirty_from != {}",
        i64::MAX
    );
    until_gone_from(&shards, &marked).await;
    for node in &nodes {
        influxql_agrees(node, &aged, "the deletes' passes").await;
    }
    // A late point into a rolled-up bucket: at once on the node that
    // wrote it, within a period or two on the other.
    let late = format!(
        "cpu,host=h0 usage=1000.5,requests=7i {}\n",
        ns(aged.rows_from + 3 * 3600 + 1)
    );
    for db in ["down", "plain"] {
        let (status, text) = nodes[1].write(db, late.clone()).await;
        assert_eq!(status, reqwest::StatusCode::NO_CONTENT, "{text}");
    }
    influxql_agrees(&nodes[1], &aged, "a late point").await;
    let started = std::time::Instant::now();
    while !influxql_agree(&nodes[0], &aged).await {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the other node reads the late point"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The node making passes dies: the other takes over.
    let runner = passes.iter().position(|p| *p > 0.0).unwrap();
    drop(nodes.remove(runner));
    // A shard the kill brings down (`ensure_up`) may take a moment to
    // fail: up, and still up after a pause, three times over.
    for _ in 0..3 {
        for shard in shards {
            shard.ensure_up().await;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let survivor = &nodes[0];
    for db in ["down", "plain"] {
        let (status, text) = survivor.write(db, body("mem")).await;
        assert_eq!(status, reqwest::StatusCode::NO_CONTENT, "{text}");
    }
    until_gone_from(&shards, &before_cut("down", "mem")).await;
    let (_, text) = survivor.get("/metrics").await;
    assert!(support::metric(&text, "chingest_downsampling_passes_total") > 0.0);
    answers_agree(survivor, &aged, "mem", "the lease was taken over").await;
    // Levels changed in every node's file move every shard's rollups,
    // the nodes answering alike throughout: a 2 h level after 3 days
    // (built from the hours, and read by 6 h groups), then back to the
    // first levels (the 2 h tables go once every node has learnt that).
    nodes.clear();
    let restart = || async {
        for shard in shards {
            shard.ensure_up().await;
        }
        [
            Chingest::start_with(&dir.path().join("node1"), &shards, &args).await,
            Chingest::start_with(&dir.path().join("node2"), &shards, &args).await,
        ]
    };
    levels(r#"["1d:5m", "2d:1h", "3d:2h"]"#);
    let nodes = restart().await;
    until_moved(&nodes, &shards, &aged, "[300, 3600, 7200]").await;
    for shard in shards {
        let buckets = shard
            .query("SELECT count() FROM down.`_rollup.2h.cpu.autogen`")
            .await
            .unwrap();
        assert_ne!(buckets.trim(), "0", "2 h buckets on every shard");
    }
    for node in &nodes {
        influxql_agrees(node, &aged, "a level added").await;
        answers_agree(node, &aged, "mem", "a level added").await;
    }
    drop(nodes);
    levels(r#"["1d:5m", "2d:1h"]"#);
    let nodes = restart().await;
    until_moved(&nodes, &shards, &aged, "[300, 3600]").await;
    let retired = "SELECT count() FROM system.tables WHERE database = 'down' \
                   AND startsWith(name, '_rollup.2h.')";
    until_gone_from(&shards, retired).await;
    for node in &nodes {
        // (PromQL over cpu reads last samples where its edits and late
        // point left holes and resets: compared over mem.)
        influxql_agrees(node, &aged, "a level removed").await;
        answers_agree(node, &aged, "mem", "a level removed").await;
        let (_, text) = node.get("/metrics").await;
        assert_eq!(
            support::metric(&text, "chingest_downsampling_errors_total"),
            0.0,
            "{text}"
        );
    }
}

/// Waits until every shard's registry records `levels` (in seconds, as
/// the engine writes an array) for `down`'s cpu and mem, checking that
/// `nodes` answer InfluxQL alike meanwhile.
async fn until_moved(nodes: &[Chingest], shards: &[&ClickHouseNode], aged: &Aged, levels: &str) {
    let moved = format!(
        "SELECT count() FROM down._downsampling FINAL WHERE table IN \
         ('cpu.autogen', 'mem.autogen') AND levels != {levels}"
    );
    let started = std::time::Instant::now();
    loop {
        for node in nodes {
            influxql_agrees(node, aged, &format!("a move to {levels} began")).await;
        }
        let mut left = 0;
        for shard in shards {
            left += numbers::<1>(&shard.query(&moved).await.unwrap())[0];
        }
        if left == 0 {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "the move");
    }
}

/// InfluxQL over `aged`'s days of `measurement`, and PromQL range
/// functions over them at 1 h steps (while the series are regular: where
/// an edit left a hole, PromQL reads last samples from the buckets,
/// docs/downsampling.md): the same in `down` as in `plain`.
async fn answers_agree(node: &Chingest, aged: &Aged, measurement: &str, after: &str) {
    for (query, down, plain) in answers(node, aged, measurement).await {
        assert!(
            same(&down, &plain),
            "after {after}, {query}\ndown: {down}\nplain: {plain}"
        );
    }
}

/// [`answers_agree`] of the InfluxQL statements only (exact also where an
/// edit left a hole).
async fn influxql_agrees(node: &Chingest, aged: &Aged, after: &str) {
    for (query, down, plain) in influxql_answers(node, aged, "cpu").await {
        assert!(
            same(&down, &plain),
            "after {after}, {query}\ndown: {down}\nplain: {plain}"
        );
    }
}

/// Whether [`influxql_agrees`] would pass.
async fn influxql_agree(node: &Chingest, aged: &Aged) -> bool {
    let answers = influxql_answers(node, aged, "cpu").await;
    answers.iter().all(|(_, down, plain)| same(down, plain))
}

/// Each query of [`answers_agree`] and its answers in `down` and `plain`.
async fn answers(
    node: &Chingest,
    aged: &Aged,
    measurement: &str,
) -> Vec<(String, serde_json::Value, serde_json::Value)> {
    let mut answers = influxql_answers(node, aged, measurement).await;
    for query in ["rate({m}_requests[2h])", "max_over_time({m}_usage[1h])"] {
        let query = query.replace("{m}", measurement);
        let down = range_over(node, aged, "down", &query).await;
        let plain = range_over(node, aged, "plain", &query).await;
        answers.push((query, down, plain));
    }
    answers
}

/// Each of `aged`'s InfluxQL statements over `measurement` and its
/// answers in `down` and `plain`.
async fn influxql_answers(
    node: &Chingest,
    aged: &Aged,
    measurement: &str,
) -> Vec<(String, serde_json::Value, serde_json::Value)> {
    let mut answers = Vec::new();
    for query in aged.statements() {
        let query = query.replace("FROM cpu", &format!("FROM {measurement}"));
        let down = node.influxql("down", &query).await;
        let plain = node.influxql("plain", &query).await;
        answers.push((query, down, plain));
    }
    answers
}

/// Waits until `count` (a count of rows) answers 0 on every shard.
async fn until_gone_from(shards: &[&ClickHouseNode], count: &str) {
    let started = std::time::Instant::now();
    loop {
        let mut left = 0;
        for shard in shards {
            left += shard
                .query(count)
                .await
                .unwrap()
                .trim()
                .parse::<u64>()
                .unwrap();
        }
        if left == 0 {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "{left} rows stay: {count}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// PromQL `query` in `db` over `aged`'s days at 1 h steps, through
/// `node`: its series sorted, values as numbers.
async fn range_over(node: &Chingest, aged: &Aged, db: &str, query: &str) -> serde_json::Value {
    let r = client()
        .get(format!("{}/api/v1/query_range", node.url))
        .query(&[
            ("db", db),
            ("query", query),
            ("start", &(aged.day0 + 7200).to_string()),
            ("end", &aged.end.to_string()),
            ("step", "3600"),
        ])
        .send()
        .await
        .unwrap();
    let answer: serde_json::Value = r.json().await.unwrap();
    let mut series = answer["data"]["result"]
        .as_array()
        .unwrap_or_else(|| panic!("{query}: {answer}"))
        .clone();
    series.sort_by_key(|s| s["metric"].to_string());
    for s in &mut series {
        for point in s["values"].as_array_mut().unwrap() {
            let value: f64 = point[1].as_str().unwrap().parse().unwrap();
            point[1] = serde_json::json!(value);
        }
    }
    serde_json::Value::Array(series)
}

/// The value of the line of `/metrics` starting with `name`.
async fn gauge(node: &Chingest, name: &str) -> f64 {
    let (_, text) = node.get("/metrics").await;
    text.lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /metrics"))
}

/// The recorded samples on the shards: (rows, distinct series and times,
/// the newest time in ms).
async fn recorded(node: &Chingest) -> (u64, u64, u64) {
    let (status, answer) = node
        .try_sql(
            "SELECT count(), uniqExact(series_id, time), max(toUnixTimestamp64Milli(time)) \
             FROM prometheus.`prometheus.autogen` FORMAT TabSeparated",
        )
        .await;
    if !status.is_success() {
        // Not written yet: no table.
        assert!(answer.contains("UNKNOWN_TABLE"), "{status} {answer}");
        return (0, 0, 0);
    }
    let [rows, distinct, newest] = numbers(&answer);
    (rows, distinct, newest)
}

/// Two nodes with the same rule files: one evaluates them (the holder of
/// their lease, `chingest_rules_leader`), so each slot's sample is
/// written once; killed (-9), the other takes the rules over within two
/// terms and goes on writing, still once per slot.
async fn one_node_evaluates_the_rules_and_another_takes_over_when_it_dies() {
    let dir = tempfile::tempdir().unwrap();
    let shard = ClickHouseNode::start_new(&dir.path().join("shard")).await;
    let rules = dir.path().join("rules.yml");
    std::fs::write(
        &rules,
        "groups:\n- name: fast\n  interval: 200ms\n  rules:\n  - record: job:up:sum\n    \
         expr: sum(vector(1))\n",
    )
    .unwrap();
    let config = dir.path().join("chingest.toml");
    std::fs::write(
        &config,
        format!(
            "[rules]\nfiles = [{:?}]\nlease_term_ms = 1000\n",
            rules.display().to_string()
        ),
    )
    .unwrap();
    let config = config.display().to_string();
    let args = ["--config", config.as_str()];
    let mut nodes = vec![
        Chingest::start_with(&dir.path().join("a"), &[&shard], &args).await,
        Chingest::start_with(&dir.path().join("b"), &[&shard], &args).await,
    ];
    // Within a few terms: one leader, samples recorded once each.
    let started = std::time::Instant::now();
    let leader = loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let mut leaders = Vec::new();
        for (i, node) in nodes.iter().enumerate() {
            if gauge(node, "chingest_rules_leader ").await == 1.0 {
                leaders.push(i);
            }
        }
        let (rows, _, _) = recorded(&nodes[0]).await;
        if leaders.len() == 1 && rows >= 5 {
            break leaders[0];
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "leaders {leaders:?}, {rows} rows"
        );
    };
    let (rows, distinct, _) = recorded(&nodes[0]).await;
    assert_eq!(rows, distinct, "a slot recorded twice");
    // The leader dies: the other node takes over and records after it.
    let dead = nodes.remove(leader);
    let killed_at = chingest::clock::now_ms() as u64;
    drop(dead);
    let survivor = &nodes[0];
    let started = std::time::Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (_, _, newest) = recorded(survivor).await;
        if newest > killed_at + 1000 && gauge(survivor, "chingest_rules_leader ").await == 1.0 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no takeover: newest sample {newest}, killed at {killed_at}"
        );
    }
    let (rows, distinct, _) = recorded(survivor).await;
    assert_eq!(rows, distinct, "a slot recorded twice across the takeover");
}
