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
}

/// A ClickHouse node on free loopback ports over `dir`, killed (-9) when
/// dropped.
struct ClickHouseNode {
    child: Child,
    http: String,
}

impl ClickHouseNode {
    async fn start(dir: &Path, http_port: u16) -> ClickHouseNode {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let library: PathBuf = root.join("engine/lib/libchdb.so");
        let script = root.join("crates/server/tests/support/clickhouse_node.py");
        let log = std::fs::File::create(dir.with_extension("log")).unwrap();
        let child = Command::new("python3")
            .arg(&script)
            .arg(&library)
            .arg(dir)
            .arg(free_port().to_string())
            .arg(http_port.to_string())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let node = ClickHouseNode {
            child,
            http: format!("http://127.0.0.1:{http_port}"),
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
    let port = free_port();
    let insert = |node_url: String, token: &'static str| async move {
        let sql = format!(
            "INSERT INTO shard.t SETTINGS insert_deduplication_token = '{token}' FORMAT ArrowStream"
        );
        post(&node_url, Some(&sql), arrow_stream(&[1, 2, 3])).await
    };
    let node = ClickHouseNode::start(&data, port).await;
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
    let node = ClickHouseNode::start(&data, port).await;
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
