//! What the server's end-to-end test binaries share: one server per binary
//! (the engine is process-global) on loopback ports, requiring the token
//! [`TOKEN`], with small limits so the tests can reach them; a runtime; and
//! a libtest-mimic runner (`harness = false`) that shuts the server, and
//! with it the engine, down after the last test, before the process exits.
//! Every test uses databases of its own.

#![allow(dead_code)]

pub(crate) mod aged;
pub(crate) mod clickhouse;
pub(crate) mod remote_write;

use std::sync::{LazyLock, OnceLock};

use chingest_server::config::{ServerConfig, StorageKind, StorageSection};
use chingest_server::RunningServer;
use reqwest::{Client, StatusCode};

use clickhouse::ClickHouseNode;

/// The token the server requires.
pub(crate) const TOKEN: &str = "secret";

static RUNTIME: LazyLock<tokio::runtime::Runtime> =
    LazyLock::new(|| tokio::runtime::Runtime::new().expect("runtime"));
/// The HTTP, gRPC and ClickHouse HTTP addresses.
static ADDRS: OnceLock<(
    std::net::SocketAddr,
    std::net::SocketAddr,
    std::net::SocketAddr,
)> = OnceLock::new();

/// Whether this binary's server stores into a ClickHouse node (the
/// `clickhouse` storage mode): the `*_cluster` test targets, which run the
/// tests of the file of the same name without the suffix.
fn cluster_backed() -> bool {
    env!("CARGO_CRATE_NAME").ends_with("_cluster")
}

/// The server, and the ClickHouse node it stores into if it is
/// [`cluster_backed`].
fn start_server() -> (RunningServer, Option<ClickHouseNode>) {
    let dir = tempfile::tempdir().unwrap().keep();
    let shard = cluster_backed().then(|| {
        let shard_dir = tempfile::tempdir().unwrap().keep();
        RUNTIME.block_on(ClickHouseNode::start_new(&shard_dir.join("shard")))
    });
    let storage = match &shard {
        Some(node) => StorageSection {
            mode: StorageKind::ClickHouse,
            cluster: chingest::ClusterConfig {
                shards: vec![vec![node.shard_url()]],
                ..chingest::ClusterConfig::default()
            },
        },
        None => StorageSection::default(),
    };
    let config = ServerConfig {
        data_dir: dir,
        http_addr: "127.0.0.1:0".parse().unwrap(),
        grpc_addr: "127.0.0.1:0".parse().unwrap(),
        clickhouse_http_addr: Some("127.0.0.1:0".parse().unwrap()),
        auth_tokens: vec![TOKEN.to_owned()],
        limits: chingest_server::config::Limits {
            max_body_bytes: 1 << 20,
            max_grpc_message_bytes: 1 << 20,
            max_line_bytes: 4096,
            ..Default::default()
        },
        // Tests read what they wrote at once; tests of the other modes ask
        // for them per request.
        write: chingest_server::config::WriteConfig {
            durability: chingest::Durability::Visible,
            ..Default::default()
        },
        storage,
        ..ServerConfig::default()
    };
    let server = RUNTIME.block_on(chingest_server::start(config)).unwrap();
    let clickhouse = server
        .clickhouse_addr
        .expect("the ClickHouse interface is on");
    ADDRS
        .set((server.addr, server.grpc_addr, clickhouse))
        .unwrap();
    (server, shard)
}

/// `http://<the HTTP API>`.
pub(crate) fn base() -> String {
    format!("http://{}", ADDRS.get().expect("server started").0)
}

/// `http://<the gRPC API>`.
pub(crate) fn grpc_base() -> String {
    format!("http://{}", ADDRS.get().expect("server started").1)
}

/// `http://<the ClickHouse HTTP interface>`.
pub(crate) fn clickhouse_base() -> String {
    format!("http://{}", ADDRS.get().expect("server started").2)
}

/// An HTTP client that ignores proxy settings.
pub(crate) fn client() -> Client {
    Client::builder().no_proxy().build().unwrap()
}

/// Runs `future` on the binary's runtime.
pub(crate) fn run<F: std::future::Future>(future: F) -> F::Output {
    RUNTIME.block_on(future)
}

/// Waits until the engine is open (`/ready` answers 200).
pub(crate) async fn wait_ready() {
    for _ in 0..200 {
        if let Ok(r) = client().get(format!("{}/ready", base())).send().await {
            if r.status() == StatusCode::OK {
                return;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("server not ready");
}

/// Runs one read-only statement through `/sql`, TabSeparated.
pub(crate) async fn sql(query: &str) -> (StatusCode, String) {
    wait_ready().await;
    let r = client()
        .post(format!("{}/sql?format=TabSeparated", base()))
        .bearer_auth(TOKEN)
        .body(query.to_owned())
        .send()
        .await
        .unwrap();
    (r.status(), r.text().await.unwrap())
}

/// A POST of `message` to `url` with the token, protobuf compressed with
/// snappy as Prometheus's remote write and read send it; callers add their
/// protocol's headers and send it.
pub(crate) fn post_snappy(
    url: &str,
    content_type: &str,
    message: &impl prost::Message,
) -> reqwest::RequestBuilder {
    let body = snap::raw::Encoder::new()
        .compress_vec(&message.encode_to_vec())
        .unwrap();
    client()
        .post(url)
        .bearer_auth(TOKEN)
        .header("Content-Encoding", "snappy")
        .header("Content-Type", content_type)
        .body(body)
}

/// The Prometheus text of `/metrics`.
pub(crate) async fn metrics() -> String {
    wait_ready().await;
    client()
        .get(format!("{}/metrics", base()))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// The value of the sample `name` (with its labels, if any) in the
/// Prometheus text `exposition`.
pub(crate) fn metric(exposition: &str, name: &str) -> f64 {
    exposition
        .lines()
        .find(|line| line.starts_with(name) && line[name.len()..].starts_with(' '))
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("{name} missing from:\n{exposition}"))
}

/// Each test function, by name (stringify keeps the two in step).
#[macro_export]
macro_rules! tests {
    ($($test:ident),* $(,)?) => { &[$((stringify!($test), $test as fn())),*] };
}

/// Starts the server, runs `tests` as libtest-mimic trials, shuts the
/// server down, and exits with the tests' verdict.
pub(crate) fn main(tests: &[(&'static str, fn())]) {
    let args = libtest_mimic::Arguments::from_args();
    let (server, shard) = start_server();
    let trials = tests
        .iter()
        .map(|&(name, test)| {
            libtest_mimic::Trial::test(name, move || {
                test();
                Ok(())
            })
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    RUNTIME.block_on(server.shutdown()).expect("clean shutdown");
    if let Some(shard) = shard {
        // The suite ran against the shard: the tables it wrote are there.
        let tables = RUNTIME
            .block_on(shard.query("SELECT count() FROM system.tables WHERE name = '_series'"))
            .expect("the shard answers");
        assert_ne!(
            tables.trim(),
            "0",
            "the cluster-backed server stored nothing on its shard"
        );
    }
    conclusion.exit()
}
