//! The ClickHouse nodes cluster mode stores into (issue: chingest as the
//! ingest tier of a ClickHouse cluster), as a test fixture: real ClickHouse
//! server code, the engine library's own, started as separate processes
//! (`support/clickhouse_node.py`) on loopback ports. These tests check the
//! facts the cluster sink relies on: an `INSERT … FORMAT ArrowStream` over
//! HTTP under an `insert_deduplication_token` is stored once however often
//! it is repeated, also after the node was killed and restarted.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use arrow::array::UInt64Array;
use arrow::record_batch::RecordBatch;

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(a_token_stores_an_arrow_insert_once_across_a_restart());
    println!("test a_token_stores_an_arrow_insert_once_across_a_restart ... ok");
    runtime.block_on(each_series_lives_on_its_shard_with_its_facts());
    println!("test each_series_lives_on_its_shard_with_its_facts ... ok");
}

/// The real `chingest` binary in the clickhouse storage mode, killed (-9)
/// when dropped.
struct Chingest {
    child: Child,
    url: String,
}

impl Chingest {
    /// Starts a node on `data_dir` storing into `shards`; ready when this
    /// returns.
    async fn start(data_dir: &Path, shards: &[&ClickHouseNode]) -> Chingest {
        let http = free_port();
        let mut command = Command::new(env!("CARGO_BIN_EXE_chingest"));
        command
            .args(["serve", "--log", "warn", "--data-dir"])
            .arg(data_dir)
            .args(["--http-addr", &format!("127.0.0.1:{http}")])
            .args(["--grpc-addr", &format!("127.0.0.1:{}", free_port())])
            .args(["--clickhouse-http-addr", "off"]);
        for shard in shards {
            command.args(["--clickhouse-shard", &shard.shard_url()]);
        }
        let node = Chingest {
            child: command.stdout(Stdio::null()).spawn().unwrap(),
            url: format!("http://127.0.0.1:{http}"),
        };
        for _ in 0..1200 {
            let ready = client().get(format!("{}/ready", node.url)).send().await;
            if ready.is_ok_and(|r| r.status().is_success()) {
                return node;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("chingest did not become ready in 60 s");
    }

    /// Line protocol into `db`, answered once queryable; the status and
    /// the answer's text.
    async fn write(&self, db: &str, body: String) -> (reqwest::StatusCode, String) {
        let url = format!("{}/write?db={db}&durability=visible", self.url);
        let r = client().post(url).body(body).send().await.unwrap();
        (r.status(), r.text().await.unwrap())
    }

    /// `/sql`'s answer (TSV).
    async fn sql(&self, query: &str) -> String {
        let url = format!("{}/sql?format=TabSeparated", self.url);
        let r = client()
            .post(url)
            .body(query.to_owned())
            .send()
            .await
            .unwrap();
        let status = r.status();
        let text = r.text().await.unwrap();
        assert!(status.is_success(), "{query}: {status} {text}");
        text
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
}

/// The numbers of a one-row TSV answer.
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

/// A ClickHouse node on loopback ports over `dir`, killed (-9) when
/// dropped.
struct ClickHouseNode {
    child: Child,
    http: String,
    tcp_port: u16,
}

impl ClickHouseNode {
    /// A node on a free HTTP port and a free native port.
    async fn start_new(dir: &Path) -> ClickHouseNode {
        ClickHouseNode::start(dir, free_port(), free_port()).await
    }

    /// The node's address as chingest's shard list takes it.
    fn shard_url(&self) -> String {
        format!("{}?native_port={}", self.http, self.tcp_port)
    }

    async fn start(dir: &Path, http_port: u16, tcp_port: u16) -> ClickHouseNode {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let library: PathBuf = root.join("engine/lib/libchdb.so");
        let script = root.join("crates/server/tests/support/clickhouse_node.py");
        let log = std::fs::File::create(dir.with_extension("log")).unwrap();
        let child = Command::new("python3")
            .arg(&script)
            .arg(&library)
            .arg(dir)
            .arg(tcp_port.to_string())
            .arg(http_port.to_string())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let node = ClickHouseNode {
            child,
            http: format!("http://127.0.0.1:{http_port}"),
            tcp_port,
        };
        for _ in 0..600 {
            if node
                .query("SELECT 1")
                .await
                .is_ok_and(|answer| answer == "1\n")
            {
                return node;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "ClickHouse node not up after 30 s: {}",
            std::fs::read_to_string(dir.with_extension("log")).unwrap_or_default()
        );
    }

    /// A statement's answer (TSV), or its error.
    async fn query(&self, sql: &str) -> Result<String, String> {
        post(&self.http, None, sql.as_bytes().to_vec()).await
    }
}

impl Drop for ClickHouseNode {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// POSTs `body` to the HTTP interface: the statement, or its data with
/// the statement as `query`.
async fn post(url: &str, query: Option<&str>, body: Vec<u8>) -> Result<String, String> {
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let mut request = client.post(url);
    if let Some(query) = query {
        request = request.query(&[("query", query)]);
    }
    let response = request.body(body).send().await.map_err(|e| e.to_string())?;
    let ok = response.status().is_success();
    let text = response.text().await.map_err(|e| e.to_string())?;
    if ok {
        Ok(text)
    } else {
        Err(text)
    }
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
