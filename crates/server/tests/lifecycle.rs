//! Servers started and stopped one after another in this process, each
//! with its own configuration: shutdown with writes in flight, reopening,
//! overload, and refused database creation. Sequential (`--test-threads`
//! is forced to 1): the engine serves one data directory at a time.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chingest_proto::v1::ingest_client::IngestClient;
use chingest_proto::v1::{write_request, ArrowTarget, WriteArrowRequest, WriteRequest};
use chingest_server::config::ServerConfig;
use reqwest::{Client, StatusCode};
use serde_json::{json, Value};

mod support;

fn client() -> Client {
    Client::builder().no_proxy().build().unwrap()
}

fn config(dir: &std::path::Path) -> ServerConfig {
    ServerConfig {
        data_dir: dir.to_owned(),
        http_addr: "127.0.0.1:0".parse().unwrap(),
        grpc_addr: "127.0.0.1:0".parse().unwrap(),
        clickhouse_http_addr: None,
        ..ServerConfig::default()
    }
}

async fn ready(base: &str) {
    for _ in 0..400 {
        if let Ok(r) = client().get(format!("{base}/ready")).send().await {
            if r.status() == StatusCode::OK {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("server not ready");
}

/// Starts a server with `config` and waits until it is ready: the server
/// and its base URL.
async fn serve(config: ServerConfig) -> (chingest_server::RunningServer, String) {
    let server = chingest_server::start(config).await.unwrap();
    let base = format!("http://{}", server.addr);
    ready(&base).await;
    (server, base)
}

async fn count(base: &str, table: &str) -> u64 {
    let r = client()
        .get(format!("{base}/sql"))
        .query(&[
            ("query", format!("SELECT count() FROM {table}")),
            ("format", "TabSeparated".into()),
        ])
        .send()
        .await
        .unwrap();
    r.text().await.unwrap().trim().parse().unwrap()
}

fn main() {
    let mut args = libtest_mimic::Arguments::from_args();
    args.test_threads = Some(1);
    let runtime = Arc::new(tokio::runtime::Runtime::new().unwrap());
    macro_rules! trials {
        ($($test:ident),* $(,)?) => {
            vec![$({
                let runtime = Arc::clone(&runtime);
                libtest_mimic::Trial::test(stringify!($test), move || {
                    runtime.block_on($test());
                    Ok(())
                })
            }),*]
        };
    }
    let trials = trials![
        shutdown_answers_writes_in_flight_and_keeps_every_acknowledged_row,
        overload_answers_429_with_retry_after,
        concurrent_bodies_past_the_memory_budget_get_429,
        concurrent_grpc_writes_past_the_memory_budget_are_resource_exhausted,
        durability_is_chosen_per_request,
        query_limits_answer_422_naming_the_limit,
        queries_past_the_queue_get_429_and_past_its_timeout_503,
        a_client_that_goes_away_leaves_the_queue,
        a_client_that_goes_away_cancels_its_query,
        scoped_tokens_on_every_endpoint,
        last_values_are_read_through_sql_within_the_token_s_scope,
        tls_serves_clients_that_trust_its_certificate,
        unknown_databases_are_404_when_auto_create_is_off,
        series_past_the_limit_are_refused_and_counted,
        a_fleet_past_the_tag_value_limit_is_stored_and_listed_whole,
        prometheus_remote_write_stores_samples_metadata_and_stale_markers,
        prometheus_remote_write_2_stores_histograms_exemplars_and_metadata,
    ];
    libtest_mimic::run(&args, trials).exit()
}

async fn shutdown_answers_writes_in_flight_and_keeps_every_acknowledged_row() {
    let dir = tempfile::tempdir().unwrap();
    let (server, base) = serve(config(dir.path())).await;
    let acknowledged = Arc::new(AtomicUsize::new(0));
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let base = base.clone();
            let acknowledged = Arc::clone(&acknowledged);
            tokio::spawn(async move {
                for i in 0.. {
                    let body: String = (0..200)
                        .map(|l| format!("m,w={w} v={l}i {}\n", i * 200 + l))
                        .collect();
                    match client()
                        .post(format!("{base}/write?db=life"))
                        .body(body)
                        .send()
                        .await
                    {
                        Ok(r) if r.status() == StatusCode::NO_CONTENT => {
                            acknowledged.fetch_add(200, Ordering::SeqCst);
                        }
                        // Refused or cut off by the shutdown: not acknowledged.
                        _ => break,
                    }
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(400)).await;
    server.shutdown().await.unwrap();
    for writer in writers {
        writer.await.unwrap();
    }
    let acknowledged = acknowledged.load(Ordering::SeqCst) as u64;
    assert!(acknowledged > 0);

    // Shutdown inserts everything it acknowledged before it closes.
    let (server, base) = serve(config(dir.path())).await;
    let stored = count(&base, "life.`m.autogen`").await;
    assert_eq!(
        stored, acknowledged,
        "every acknowledged row, and only those, is on disk"
    );
    server.shutdown().await.unwrap();
}

async fn overload_answers_429_with_retry_after() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path());
    config.ingest.max_buffered_bytes = 256 << 10;
    config.ingest.overload_wait = Duration::from_millis(10);
    config.ingest.flush.max_rows = 100;
    config.ingest.flush.max_bytes = 64 << 10;
    let (server, base) = serve(config).await;
    let body: String = (0..20_000).map(|i| format!("m v={i}i {i}\n")).collect();
    let r = client()
        .post(format!("{base}/write?db=over"))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(r.headers().contains_key("retry-after"));
    let json: Value = r.json().await.unwrap();
    assert!(
        json["error"].as_str().unwrap().contains("overloaded"),
        "{json}"
    );
    let r = client()
        .post(format!("{base}/write?db=over"))
        .body("m v=1i 1\n")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    server.shutdown().await.unwrap();
}

/// Polls `table` until it holds `expected` rows (ten seconds at most).
async fn wait_for_count(base: &str, table: &str, expected: u64) {
    for _ in 0..500 {
        if count(base, table).await == expected {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(count(base, table).await, expected, "{table}");
}

/// Bodies are held in the memory budget while they are read and parsed:
/// many large ones at once are refused with 429 instead of growing the
/// process, and every one that was answered 204 is stored.
async fn concurrent_bodies_past_the_memory_budget_get_429() {
    bodies_past_the_memory_budget(false).await;
}

/// The same over gRPC `Write`: each message is counted in the budget as a
/// body is, and refused with RESOURCE_EXHAUSTED.
async fn concurrent_grpc_writes_past_the_memory_budget_are_resource_exhausted() {
    bodies_past_the_memory_budget(true).await;
}

/// Sends 24 large line-protocol writes at once, over HTTP or gRPC, to a
/// server with a 1 MiB budget: some are refused, some stored, and exactly
/// the stored ones are in the table.
async fn bodies_past_the_memory_budget(grpc: bool) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path());
    config.ingest.max_buffered_bytes = 1 << 20;
    config.ingest.flush.max_bytes = 256 << 10;
    config.ingest.overload_wait = Duration::from_millis(10);
    let (server, base) = serve(config).await;
    let grpc_url = format!("http://{}", server.grpc_addr);
    const LINES: usize = 5_000;
    let requests: Vec<_> = (0..24)
        .map(|r| {
            // 200 KB each, and about as much again once parsed: two fit in
            // the budget at once.
            let body: String = (0..LINES)
                .map(|l| format!("m,r={r} v={l}i,pad=\"{:08}\" {}\n", l, r * LINES + l))
                .collect();
            let url = format!("{base}/write?db=bodies");
            let grpc_url = grpc_url.clone();
            tokio::spawn(async move {
                if !grpc {
                    let r = client().post(url).body(body).send().await.unwrap();
                    let refused = r.status() == StatusCode::TOO_MANY_REQUESTS;
                    assert!(!refused || r.headers().contains_key("retry-after"));
                    assert!(refused || r.status() == StatusCode::NO_CONTENT, "{r:?}");
                    return refused;
                }
                let mut client = IngestClient::connect(grpc_url).await.unwrap();
                let written = client
                    .write(WriteRequest {
                        database: "bodies".into(),
                        data: Some(write_request::Data::LineProtocol(body.into())),
                        ..Default::default()
                    })
                    .await;
                match written {
                    Ok(_) => false,
                    Err(status) => {
                        assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
                        assert!(status.message().contains("overloaded"), "{status:?}");
                        true
                    }
                }
            })
        })
        .collect();
    let (mut stored, mut refused) = (0, 0);
    for request in requests {
        match request.await.unwrap() {
            true => refused += 1,
            false => stored += 1,
        }
    }
    assert!(
        refused > 0,
        "24 such requests do not fit a 1 MiB budget at once"
    );
    assert!(stored > 0, "the budget lets some through");
    wait_for_count(&base, "bodies.m", (stored * LINES) as u64).await;
    if grpc {
        // A message larger than the whole budget is refused before it is
        // parsed, even when its rows would fit (its long tags are series).
        let body: String = (0..LINES)
            .map(|l| format!("big,t={l:0>250} v=1i {l}\n"))
            .collect();
        assert!(body.len() > 1 << 20);
        let status = IngestClient::connect(grpc_url.clone())
            .await
            .unwrap()
            .write(WriteRequest {
                database: "bodies".into(),
                data: Some(write_request::Data::LineProtocol(body.into())),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
        // So is an OTLP export larger than the budget.
        let status = otlp_export_past_the_budget(&grpc_url).await;
        assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    }
    // Once the burst is over, a request alone fits again.
    let r = client()
        .post(format!("{base}/write?db=bodies"))
        .body("m v=1i 1\n")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    server.shutdown().await.unwrap();
}

/// Exports one gauge point whose attribute makes the message 2 MiB; the
/// refusal.
async fn otlp_export_past_the_budget(grpc_url: &str) -> tonic::Status {
    use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_client::MetricsServiceClient;
    use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
    use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
    use opentelemetry_proto::tonic::metrics::v1::{
        metric, number_data_point, Gauge, Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics,
    };
    let point = NumberDataPoint {
        attributes: vec![KeyValue {
            key: "pad".into(),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue("x".repeat(2 << 20))),
            }),
            ..KeyValue::default()
        }],
        time_unix_nano: 1,
        value: Some(number_data_point::Value::AsDouble(1.0)),
        ..NumberDataPoint::default()
    };
    let request = ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            scope_metrics: vec![ScopeMetrics {
                metrics: vec![Metric {
                    name: "big".into(),
                    data: Some(metric::Data::Gauge(Gauge {
                        data_points: vec![point],
                    })),
                    ..Metric::default()
                }],
                ..ScopeMetrics::default()
            }],
            ..ResourceMetrics::default()
        }],
    };
    MetricsServiceClient::connect(grpc_url.to_owned())
        .await
        .unwrap()
        .export(request)
        .await
        .unwrap_err()
}

/// The `durability` parameter and `X-Chingest-Durability` header of both
/// write endpoints, and the gRPC field: `visible` writes are queryable at
/// once; an unknown mode is refused before anything is written.
async fn durability_is_chosen_per_request() {
    let dir = tempfile::tempdir().unwrap();
    // The server's default mode is fsync.
    let (server, base) = serve(config(dir.path())).await;
    let write = |path: &str, header: Option<&str>, line: &str| {
        let mut request = client().post(format!("{base}{path}")).body(line.to_owned());
        if let Some(mode) = header {
            request = request.header("X-Chingest-Durability", mode);
        }
        request.send()
    };
    // Each visible write is counted at once, without waiting.
    let r = write("/write?db=dur&durability=visible", None, "m v=1i 1\n")
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    assert_eq!(count(&base, "dur.m").await, 1);
    let r = write("/write?db=dur", Some("visible"), "m v=2i 2\n")
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    assert_eq!(count(&base, "dur.m").await, 2);
    let r = write(
        "/api/v2/write?bucket=dur&durability=VISIBLE",
        None,
        "m v=3i 3\n",
    )
    .await
    .unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    assert_eq!(count(&base, "dur.m").await, 3);
    let mut grpc = IngestClient::connect(format!("http://{}", server.grpc_addr))
        .await
        .unwrap();
    grpc.write(WriteRequest {
        database: "dur".into(),
        data: Some(write_request::Data::LineProtocol("m v=4i 4\n".into())),
        durability: chingest_proto::v1::Durability::Visible.into(),
        ..Default::default()
    })
    .await
    .unwrap();
    assert_eq!(count(&base, "dur.m").await, 4);
    // The other modes are answered once logged, and queryable soon after.
    for (i, mode) in ["fsync", "os", "none"].into_iter().enumerate() {
        let line = format!("m v={}i {}\n", 5 + i, 5 + i);
        let r = write(&format!("/write?db=dur&durability={mode}"), None, &line)
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::NO_CONTENT, "{mode}");
    }
    wait_for_count(&base, "dur.m", 7).await;
    // Unknown modes: 400 naming the choices, in the endpoint's error shape;
    // the parameter wins over the header.
    let r = write("/write?db=dur&durability=later", None, "m v=0i 0\n")
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let json: Value = r.json().await.unwrap();
    assert!(
        json["error"]
            .as_str()
            .unwrap()
            .contains("fsync, os, none or visible"),
        "{json}"
    );
    let r = write("/api/v2/write?bucket=dur", Some("eventually"), "m v=0i 0\n")
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(r.json::<Value>().await.unwrap()["code"], "invalid");
    let r = write(
        "/write?db=dur&durability=visible",
        Some("bogus"),
        "m v=8i 8\n",
    )
    .await
    .unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    let status = grpc
        .write(WriteRequest {
            database: "dur".into(),
            data: Some(write_request::Data::LineProtocol("m v=0i 0\n".into())),
            durability: 99,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    assert_eq!(
        count(&base, "dur.m").await,
        8,
        "refused writes stored nothing"
    );
    // The fsync write was synced in the log.
    let metrics = client()
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap();
    let metrics = metrics.text().await.unwrap();
    let syncs: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("chingest_wal_syncs_total "))
        .expect("chingest_wal_syncs_total in /metrics")
        .parse()
        .unwrap();
    assert!(syncs >= 1.0, "{syncs}");
    server.shutdown().await.unwrap();
}

/// Runs `statement` through `/sql`; the status and body.
async fn sql(base: &str, statement: &str) -> (StatusCode, String) {
    let r = client()
        .post(format!("{base}/sql?format=TabSeparated"))
        .body(statement.to_owned())
        .send()
        .await
        .unwrap();
    (r.status(), r.text().await.unwrap())
}

/// Each limit of `[query]` stops the statement that passes it with 422 and
/// an error naming the limit; the statement cannot raise it.
async fn query_limits_answer_422_naming_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path());
    config.query.max_execution_time = Duration::from_millis(500);
    config.query.max_memory_bytes = 32 << 20;
    config.query.max_rows_to_read = 1_000_000;
    config.query.max_result_rows = 1_000;
    config.query.max_result_bytes = 1 << 20;
    let (server, base) = serve(config).await;
    for (statement, limit) in [
        (
            "SELECT count() FROM numbers(100000) AS a, numbers(100000) AS b WHERE a.number + b.number = 7",
            "max_execution_time",
        ),
        (
            "SELECT length(groupArray(repeat('x', 1000))) FROM numbers(100000)",
            "max_memory_usage",
        ),
        ("SELECT sum(number) FROM numbers(2000000)", "max_rows_to_read"),
        ("SELECT number FROM numbers(5000)", "max_result_rows"),
        // Not a constant: the engine counts a constant column once.
        ("SELECT repeat('x', 5000 + number % 2) FROM numbers(500)", "max_result_bytes"),
    ] {
        let (status, text) = sql(&base, statement).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{statement}: {text}");
        let json: Value = serde_json::from_str(&text).unwrap();
        let message = json["error"].as_str().unwrap();
        assert!(message.contains(&format!("query limit {limit} exceeded")), "{message}");
    }
    let (status, text) = sql(&base, "SELECT 1 SETTINGS max_execution_time = 0").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    let (status, text) = sql(&base, "SELECT getSetting('max_execution_time')").await;
    assert_eq!((status, text.trim()), (StatusCode::OK, "0.5"));
    server.shutdown().await.unwrap();
}

/// A request of each read API, on a server with one slot and room for one
/// statement in the queue.
#[derive(Debug, Clone, Copy)]
enum ReadApi {
    Sql,
    ClickHouse,
    InfluxQl,
}

impl ReadApi {
    fn request(self, base: &str, clickhouse: &str) -> reqwest::RequestBuilder {
        match self {
            ReadApi::Sql => client().post(format!("{base}/sql")).body("SELECT 1"),
            ReadApi::ClickHouse => client().post(format!("{clickhouse}/")).body("SELECT 1"),
            ReadApi::InfluxQl => client()
                .get(format!("{base}/query"))
                .query(&[("db", "queue"), ("q", "SELECT v FROM m")]),
        }
    }

    /// Checks a refusal: its status, Retry-After, and the message in the
    /// API's own shape (InfluxDB's JSON, ClickHouse's exception text).
    async fn check_refusal(self, response: reqwest::Response, status: StatusCode, says: &str) {
        assert_eq!(response.status(), status, "{self:?}");
        assert_eq!(response.headers()["retry-after"], "1", "{self:?}");
        let code = response
            .headers()
            .get("x-clickhouse-exception-code")
            .cloned();
        let text = response.text().await.unwrap();
        match self {
            ReadApi::Sql | ReadApi::InfluxQl => {
                let json: Value = serde_json::from_str(&text).unwrap();
                let message = json["error"].as_str().unwrap();
                assert!(message.starts_with(says), "{self:?}: {message}");
            }
            ReadApi::ClickHouse => {
                assert_eq!(code.unwrap(), "202");
                let text = text.trim_end();
                assert!(
                    text.starts_with(&format!("Code: 202. DB::Exception: {says}")),
                    "{text}"
                );
                assert!(text.ends_with("(TOO_MANY_SIMULTANEOUS_QUERIES)"), "{text}");
            }
        }
    }
}

/// Waits until the gauge or counter `name` of `/metrics` is `value`.
async fn metric_reaches(base: &str, name: &str, value: f64) {
    let mut last = 0.0;
    for _ in 0..200 {
        let text = client()
            .get(format!("{base}/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        last = support::metric(&text, name);
        if last == value {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{name} is {last}, not {value}");
}

/// Holds the one slot with a statement of 1.5 s, once it runs.
async fn hold_the_slot(base: &str) -> tokio::task::JoinHandle<(StatusCode, String)> {
    let slow = {
        let base = base.to_owned();
        tokio::spawn(async move { sql(&base, "SELECT sleepEachRow(0.5) FROM numbers(3)").await })
    };
    metric_reaches(base, "chingest_queries_running", 1.0).await;
    slow
}

/// Past the slots and the queue, a statement is refused at once with 429;
/// one that waited past `query.queue_timeout` gets 503; both with
/// Retry-After, on `/sql`, the ClickHouse interface and InfluxQL alike.
async fn queries_past_the_queue_get_429_and_past_its_timeout_503() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path());
    config.clickhouse_http_addr = Some("127.0.0.1:0".parse().unwrap());
    config.query.max_concurrent = 1;
    config.query.max_queued = 1;
    config.query.queue_timeout = Duration::from_millis(500);
    let (server, base) = serve(config).await;
    let clickhouse = format!("http://{}", server.clickhouse_addr.unwrap());
    let r = client()
        .post(format!("{base}/write?db=queue&durability=visible"))
        .body("m v=1i 1\n")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    for api in [ReadApi::Sql, ReadApi::ClickHouse, ReadApi::InfluxQl] {
        let slow = hold_the_slot(&base).await;
        let waiting = tokio::spawn(api.request(&base, &clickhouse).send());
        metric_reaches(&base, "chingest_queries_waiting", 1.0).await;
        let full = api.request(&base, &clickhouse).send().await.unwrap();
        api.check_refusal(
            full,
            StatusCode::TOO_MANY_REQUESTS,
            "too many queries: 1 running and 1 waiting",
        )
        .await;
        let timed_out = waiting.await.unwrap().unwrap();
        api.check_refusal(
            timed_out,
            StatusCode::SERVICE_UNAVAILABLE,
            "no query slot came free within 500ms",
        )
        .await;
        assert_eq!(slow.await.unwrap().0, StatusCode::OK);
    }
    let metrics = client()
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let refused = |reason: &str| {
        support::metric(
            &metrics,
            &format!("chingest_queries_refused_total{{reason=\"{reason}\"}}"),
        )
    };
    assert_eq!(
        (refused("queue_full"), refused("queue_timeout")),
        (3.0, 3.0)
    );
    assert_eq!(
        support::metric(&metrics, "chingest_queries_queued_total"),
        3.0
    );
    // Free again: a statement runs at once.
    assert_eq!(
        sql(&base, "SELECT 1").await,
        (StatusCode::OK, "1\n".to_owned())
    );
    server.shutdown().await.unwrap();
}

/// A client that gives up while its statement waits for a slot takes it
/// out of the queue: the next statement finds room, waits, and is answered.
async fn a_client_that_goes_away_leaves_the_queue() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path());
    config.query.max_concurrent = 1;
    config.query.max_queued = 1;
    let (server, base) = serve(config).await;
    let slow = hold_the_slot(&base).await;
    let impatient = Client::builder()
        .no_proxy()
        .timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let sent = impatient
        .post(format!("{base}/sql"))
        .body("SELECT 1")
        .send()
        .await;
    assert!(sent.unwrap_err().is_timeout());
    metric_reaches(&base, "chingest_queries_abandoned_in_queue_total", 1.0).await;
    metric_reaches(&base, "chingest_queries_waiting", 0.0).await;
    assert_eq!(
        sql(&base, "SELECT 1").await,
        (StatusCode::OK, "1\n".to_owned())
    );
    assert_eq!(slow.await.unwrap().0, StatusCode::OK);
    server.shutdown().await.unwrap();
}

/// CPU time this process has used (user + system), from /proc.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // Fields after the command name, which is in parentheses.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

/// A statement that produces nothing until it is done (an aggregation over
/// 100 billion rows) stops when its client goes away: the server's CPU is
/// back to idle within two seconds, long before the time limit.
async fn a_client_that_goes_away_cancels_its_query() {
    let dir = tempfile::tempdir().unwrap();
    // One read-only connection: the next statement runs where the cancelled
    // one did, and must not see anything of it.
    let mut config = config(dir.path());
    config.query.max_concurrent = 1;
    let (server, base) = serve(config).await;
    // Once passed by the sandbox, `SELECT 1` runs without its checks, which
    // would otherwise run first on the connection.
    let one = (StatusCode::OK, "1\n".to_owned());
    assert_eq!(sql(&base, "SELECT 1").await, one);
    let impatient = Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let sent = impatient
        .post(format!("{base}/sql"))
        .body("SELECT count() FROM numbers(100000000000) WHERE sipHash64(number) = 7")
        .send()
        .await;
    assert!(sent.unwrap_err().is_timeout());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = cpu_seconds();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let used = cpu_seconds() - before;
    // The statement alone keeps a core busy (max_threads = 1).
    assert!(
        used < 0.3,
        "{used:.2} s of CPU in the second after cancelling"
    );
    assert_eq!(sql(&base, "SELECT 1").await, one);
    server.shutdown().await.unwrap();
}

/// Every kind of token on every endpoint: full (`auth_tokens`), read-only,
/// write-only, and read-write limited to one database.
async fn scoped_tokens_on_every_endpoint() {
    use chingest_server::config::TokenConfig;
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path());
    let scoped = |token: &str, read, write, databases: &[&str]| TokenConfig {
        token: token.to_owned(),
        read,
        write,
        databases: databases.iter().map(|d| d.to_string()).collect(),
    };
    config.auth_tokens = vec!["admin".into()];
    config.tokens = vec![
        scoped("reader", true, false, &[]),
        scoped("writer", false, true, &[]),
        scoped("one", true, true, &["db1"]),
    ];
    config.metrics_require_token = true;
    let (server, base) = serve(config).await;
    let status = |request: reqwest::RequestBuilder| async move {
        let r = request.send().await.unwrap();
        let status = r.status();
        (status, r.text().await.unwrap())
    };
    let post = |path: &str, token: &str, body: &str| {
        client()
            .post(format!("{base}{path}"))
            .header("Authorization", format!("Token {token}"))
            .body(body.to_owned())
    };
    const OK: StatusCode = StatusCode::NO_CONTENT;
    const FORBIDDEN: StatusCode = StatusCode::FORBIDDEN;
    // Writes.
    for (token, db, expected) in [
        ("admin", "db1", OK),
        ("writer", "db2", OK),
        ("one", "db1", OK),
        ("one", "db2", FORBIDDEN),
        ("reader", "db1", FORBIDDEN),
    ] {
        let path = format!("/write?db={db}&durability=visible");
        let (got, text) = status(post(&path, token, "m v=1i 1\n")).await;
        assert_eq!(got, expected, "{token} writing {db}: {text}");
        let path = format!("/api/v2/write?bucket={db}&durability=visible");
        let (got, text) = status(post(&path, token, "m v=2i 2\n")).await;
        assert_eq!(got, expected, "{token} writing {db} (v2): {text}");
    }
    // Queries.
    for (token, sql, expected) in [
        ("admin", "SELECT count() FROM db2.m", StatusCode::OK),
        ("reader", "SELECT count() FROM db2.m", StatusCode::OK),
        ("writer", "SELECT count() FROM db1.m", FORBIDDEN),
        ("one", "SELECT count() FROM db1.m", StatusCode::OK),
        ("one", "SELECT count() FROM db2.m", FORBIDDEN),
        (
            "one",
            "SELECT * FROM db1.m WHERE v IN (SELECT v FROM db2.m)",
            FORBIDDEN,
        ),
        ("one", "SELECT 1", StatusCode::OK),
        ("one", "SELECT name FROM system.columns", FORBIDDEN),
        ("one", "SHOW DATABASES", FORBIDDEN),
        ("reader", "SHOW DATABASES", StatusCode::OK),
    ] {
        let (got, text) = status(post("/sql", token, sql)).await;
        assert_eq!(got, expected, "{token}: {sql}: {text}");
    }
    // InfluxQL.
    let influxql = |token: &str, q: &str| {
        client()
            .get(format!("{base}/query"))
            .query(&[("q", q), ("p", token)])
    };
    for (token, q, expected) in [
        ("writer", "CREATE DATABASE db3", StatusCode::OK),
        ("reader", "CREATE DATABASE db4", FORBIDDEN),
        ("one", "CREATE DATABASE db4", FORBIDDEN),
        ("one", "CREATE DATABASE db1", StatusCode::OK),
        ("writer", "SHOW DATABASES", FORBIDDEN),
        ("one", "SHOW RETENTION POLICIES ON db2", FORBIDDEN),
        ("one", "SELECT v FROM db1..m", StatusCode::OK),
        ("one", "SELECT v FROM db2..m", FORBIDDEN),
        ("one", "SELECT v FROM db1..m, db2..m", FORBIDDEN),
        ("one", "SELECT last(v) FROM db2.autogen.m", FORBIDDEN),
        ("one", "SHOW MEASUREMENTS ON db2", FORBIDDEN),
        ("one", "SHOW TAG KEYS ON db2", FORBIDDEN),
        ("one", "SHOW FIELD KEYS ON db2", FORBIDDEN),
        ("one", "SHOW SERIES ON db2", FORBIDDEN),
        ("writer", "SELECT v FROM db1..m", FORBIDDEN),
        ("reader", "SELECT v FROM db2..m", StatusCode::OK),
    ] {
        let (got, text) = status(influxql(token, q)).await;
        assert_eq!(got, expected, "{token}: {q}: {text}");
    }
    // PromQL, its lookups and remote read.
    for (token, path, expected) in [
        ("one", "/api/v1/query?db=db1&query=m_v", StatusCode::OK),
        ("one", "/api/v1/query?db=db2&query=m_v", FORBIDDEN),
        (
            "one",
            "/db/db2/api/v1/query_range?query=m_v&start=0&end=1&step=1",
            FORBIDDEN,
        ),
        ("one", "/api/v1/labels?db=db2", FORBIDDEN),
        ("one", "/api/v1/series?db=db2&match[]=m_v", FORBIDDEN),
        ("writer", "/api/v1/query?db=db1&query=m_v", FORBIDDEN),
        ("reader", "/api/v1/query?db=db2&query=m_v", StatusCode::OK),
        (
            "nope",
            "/api/v1/query?db=db1&query=m_v",
            StatusCode::UNAUTHORIZED,
        ),
    ] {
        let request = client().get(format!("{base}{path}")).bearer_auth(token);
        let (got, text) = status(request).await;
        assert_eq!(got, expected, "{token}: {path}: {text}");
        if got != StatusCode::OK {
            let body: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(body["status"], "error", "{text}");
        }
    }
    let (got, _) = status(post("/api/v1/read?db=db2", "one", "")).await;
    assert_eq!(got, FORBIDDEN, "remote read of another database");
    let (_, text) = status(influxql("one", "SHOW DATABASES")).await;
    let listed: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        listed["results"][0]["series"][0]["values"],
        json!([["db1"]]),
        "a scoped token sees its databases only"
    );
    // gRPC.
    let grpc = IngestClient::connect(format!("http://{}", server.grpc_addr))
        .await
        .unwrap();
    for (token, db, expected) in [
        ("one", "db2", tonic::Code::PermissionDenied),
        ("reader", "db1", tonic::Code::PermissionDenied),
        ("nope", "db1", tonic::Code::Unauthenticated),
    ] {
        let mut request = tonic::Request::new(WriteRequest {
            database: db.into(),
            data: Some(write_request::Data::LineProtocol("m v=3i 3\n".into())),
            ..Default::default()
        });
        let value = format!("Token {token}").parse().unwrap();
        request.metadata_mut().insert("authorization", value);
        let refused = grpc.clone().write(request).await.unwrap_err();
        assert_eq!(
            refused.code(),
            expected,
            "{token} writing {db}: {refused:?}"
        );
    }
    // /metrics behind a token.
    let (got, _) = status(client().get(format!("{base}/metrics"))).await;
    assert_eq!(got, StatusCode::UNAUTHORIZED);
    let metrics = client()
        .get(format!("{base}/metrics"))
        .bearer_auth("reader");
    assert_eq!(status(metrics).await.0, StatusCode::OK);
    // Credentials are checked before a body is read: a request announcing a
    // body and sending none is answered 401 at once, not left waiting.
    for path in [
        "/sql",
        "/write?db=db1",
        "/api/v2/write?bucket=db1",
        "/query",
    ] {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let mut tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Token nope\r\n\
             Content-Length: 100000\r\n\r\n"
        );
        tcp.write_all(head.as_bytes()).await.unwrap();
        let mut answer = vec![0; 64];
        let read = tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut answer))
            .await
            .expect("answered without the body")
            .unwrap();
        let answer = String::from_utf8_lossy(&answer[..read]);
        assert!(answer.starts_with("HTTP/1.1 401"), "{path}: {answer}");
    }
    server.shutdown().await.unwrap();
}

/// `[tls]`: HTTPS and gRPC over TLS with a certificate made here; clients
/// that trust it are served, clients that do not are refused by their own
/// TLS, and plain HTTP is not answered.
async fn tls_serves_clients_that_trust_its_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let cert_pem = made.cert.pem();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, &cert_pem).unwrap();
    std::fs::write(&key, made.key_pair.serialize_pem()).unwrap();
    let mut config = config(&dir.path().join("data"));
    config.tls.cert = Some(cert);
    config.tls.key = Some(key);
    let server = chingest_server::start(config).await.unwrap();
    let https = format!("https://localhost:{}", server.addr.port());
    let trusting = Client::builder()
        .no_proxy()
        .add_root_certificate(reqwest::Certificate::from_pem(cert_pem.as_bytes()).unwrap())
        .build()
        .unwrap();
    let mut ready = false;
    for _ in 0..400 {
        if let Ok(r) = trusting.get(format!("{https}/ready")).send().await {
            if r.status() == StatusCode::OK {
                ready = true;
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(ready, "the server answers over HTTPS");
    let r = trusting
        .post(format!("{https}/write?db=tls&durability=visible"))
        .body("m v=1i 1\n")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    let r = trusting
        .post(format!("{https}/sql?format=TabSeparated"))
        .body("SELECT count() FROM tls.m")
        .send()
        .await
        .unwrap();
    assert_eq!(r.text().await.unwrap(), "1\n");
    let untrusting = Client::builder().no_proxy().build().unwrap();
    let refused = untrusting
        .get(format!("{https}/ping"))
        .send()
        .await
        .unwrap_err();
    assert!(refused.is_connect(), "{refused:?}");
    let plain = client()
        .get(format!("http://localhost:{}/ping", server.addr.port()))
        .send()
        .await;
    assert!(plain.is_err(), "plain HTTP on the TLS port: {plain:?}");
    // gRPC.
    let endpoint = |tls: Option<&str>| {
        let channel = tonic::transport::Channel::from_shared(format!(
            "https://localhost:{}",
            server.grpc_addr.port()
        ))
        .unwrap();
        let config = tonic::transport::ClientTlsConfig::new().domain_name("localhost");
        let config = match tls {
            Some(pem) => config.ca_certificate(tonic::transport::Certificate::from_pem(pem)),
            None => config,
        };
        channel.tls_config(config).unwrap()
    };
    let channel = endpoint(Some(&cert_pem)).connect().await.unwrap();
    let reply = IngestClient::new(channel)
        .write(WriteRequest {
            database: "tls".into(),
            data: Some(write_request::Data::LineProtocol("m v=2i 2\n".into())),
            durability: chingest_proto::v1::Durability::Visible.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(reply.accepted, 1);
    assert!(
        endpoint(None).connect().await.is_err(),
        "a client that does not trust it"
    );
    server.shutdown().await.unwrap();
}

/// Lines past the series limit are a partial write naming the limit, and
/// `/metrics` counts them.
async fn series_past_the_limit_are_refused_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path());
    config.limits.cardinality.max_series = 2;
    let (server, base) = serve(config).await;
    let r = client()
        .post(format!("{base}/write?db=card&durability=visible"))
        .body("m,h=a v=1i 1\nm,h=b v=1i 2\nm,h=c v=1i 3\nm,h=a v=2i 4\n")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        (body["accepted"].clone(), body["line"].clone()),
        (3.into(), 3.into()),
        "{body}"
    );
    let message = body["error"].as_str().unwrap();
    assert!(
        message.contains("series limit reached") && message.contains("limit 2"),
        "{message}"
    );
    assert_eq!(count(&base, "card.`m.autogen`").await, 3);
    let metrics = client()
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("chingest_lines_refused_by_limits_total 1\n"),
        "{metrics}"
    );
    server.shutdown().await.unwrap();
}

/// Past `max_values_per_tag` and `[promql] max_series` (set small): a
/// remote-written fleet is stored whole (the per-tag limit is line
/// protocol's), and label names and values are listed whole while series
/// lookups are cut at their limit with Prometheus 3's warning; line
/// protocol still meets the per-tag limit.
async fn a_fleet_past_the_tag_value_limit_is_stored_and_listed_whole() {
    use chingest_proto::prometheus::{Label, Sample, TimeSeries};
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path());
    config.limits.cardinality.max_values_per_tag = 3;
    config.promql.limits.max_series = 4;
    let (server, base) = serve(config).await;
    let now_ms = chingest::clock::now_ms();
    let pods: Vec<String> = (0..10).map(|i| format!("pod-{i}")).collect();
    let request = chingest_proto::prometheus::WriteRequest {
        timeseries: pods
            .iter()
            .map(|pod| TimeSeries {
                labels: [("__name__", "up"), ("namespace", "web"), ("pod", pod)]
                    .iter()
                    .map(|(n, v)| Label {
                        name: n.to_string().into(),
                        value: v.to_string().into(),
                    })
                    .collect(),
                samples: vec![Sample {
                    value: 1.0,
                    timestamp: now_ms,
                }],
            })
            .collect(),
        metadata: Vec::new(),
    };
    let url = format!("{base}/api/v1/write?db=fleet&durability=visible");
    let r = support::post_snappy(&url, "application/x-protobuf", &request)
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::NO_CONTENT,
        "{}",
        r.text().await.unwrap()
    );
    assert_eq!(count(&base, "fleet.prometheus").await, 10);
    let get = |path: String| {
        let base = base.clone();
        async move {
            let r = client().get(format!("{base}{path}")).send().await.unwrap();
            assert_eq!(r.status(), StatusCode::OK);
            r.json::<Value>().await.unwrap()
        }
    };
    // Label values: all ten pods, past both limits; no warning.
    let values = get("/api/v1/label/pod/values?db=fleet".into()).await;
    assert_eq!(values["data"], json!(pods), "{values}");
    assert!(values.get("warnings").is_none(), "{values}");
    let selector = "match[]=up%7Bnamespace%3D%22web%22%7D";
    let values = get(format!("/api/v1/label/pod/values?db=fleet&{selector}")).await;
    assert_eq!(values["data"].as_array().unwrap().len(), 10, "{values}");
    let names = get(format!("/api/v1/labels?db=fleet&{selector}")).await;
    assert_eq!(
        names["data"],
        json!(["__name__", "namespace", "pod"]),
        "{names}"
    );
    // Cut at a limit, with the warning.
    let cut = get("/api/v1/label/pod/values?db=fleet&limit=2".into()).await;
    assert_eq!(cut["data"], json!(["pod-0", "pod-1"]), "{cut}");
    assert_eq!(cut["warnings"], json!(["results truncated due to limit"]));
    let series = get(format!("/api/v1/series?db=fleet&{selector}&limit=3")).await;
    assert_eq!(series["data"].as_array().unwrap().len(), 3, "{series}");
    assert_eq!(
        series["warnings"],
        json!(["results truncated due to limit"])
    );
    // Without a limit: cut at [promql] max_series, never refused.
    let series = get(format!("/api/v1/series?db=fleet&{selector}")).await;
    assert_eq!(series["data"].as_array().unwrap().len(), 4, "{series}");
    assert_eq!(
        series["warnings"],
        json!(["results truncated due to limit"])
    );
    // A query still may not select past it.
    let r = client()
        .get(format!("{base}/api/v1/query?db=fleet&query=up"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    // Line protocol meets the per-tag limit: the fourth host is refused.
    let r = client()
        .post(format!("{base}/write?db=fleet&durability=visible"))
        .body("m,h=a v=1i 1\nm,h=b v=1i 2\nm,h=c v=1i 3\nm,h=d v=1i 4\n")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let body: Value = r.json().await.unwrap();
    let message = body["error"].as_str().unwrap();
    assert!(message.contains("tag value limit reached"), "{message}");
    assert_eq!(count(&base, "fleet.`m.autogen`").await, 3);
    server.shutdown().await.unwrap();
}

/// Prometheus remote write 1.0 requests as the specification describes
/// them: snappy-compressed `WriteRequest`s with series, a stale marker and
/// metadata, and the ways one can be wrong.
async fn prometheus_remote_write_stores_samples_metadata_and_stale_markers() {
    use chingest_proto::prometheus::{Label, MetricMetadata, MetricType, Sample, TimeSeries};
    use prost::Message;
    const STALE_NAN: u64 = 0x7ff0_0000_0000_0002;
    let dir = tempfile::tempdir().unwrap();
    let (server, base) = serve(config(dir.path())).await;
    let labels = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(n, v)| Label {
                name: n.to_string().into(),
                value: v.to_string().into(),
            })
            .collect()
    };
    let sample = |value, timestamp| Sample { value, timestamp };
    let request = chingest_proto::prometheus::WriteRequest {
        timeseries: vec![
            TimeSeries {
                labels: labels(&[("__name__", "up"), ("instance", "x:9100"), ("job", "node")]),
                samples: vec![sample(1.0, 1_000), sample(0.0, 2_000)],
            },
            TimeSeries {
                labels: labels(&[
                    ("__name__", "http_requests_total"),
                    ("code", "200"),
                    ("job", "api"),
                ]),
                samples: vec![sample(5.0, 1_000), sample(f64::from_bits(STALE_NAN), 2_000)],
            },
        ],
        metadata: vec![MetricMetadata {
            r#type: MetricType::Counter as i32,
            metric_family_name: "http_requests_total".into(),
            help: "Requests served.".into(),
            unit: String::new(),
        }],
    };
    let post = |body: Vec<u8>, encoding: &'static str, content_type: &'static str| {
        client()
            .post(format!("{base}/api/v1/write?db=prom&durability=visible"))
            .header("Content-Encoding", encoding)
            .header("Content-Type", content_type)
            .header("X-Prometheus-Remote-Write-Version", "0.1.0")
            .body(body)
            .send()
    };
    let snappy = |bytes: &[u8]| snap::raw::Encoder::new().compress_vec(bytes).unwrap();
    let body = snappy(&request.encode_to_vec());
    let r = post(body.clone(), "snappy", "application/x-protobuf")
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::NO_CONTENT,
        "{}",
        r.text().await.unwrap()
    );
    let (status, rows) = sql(
        &base,
        "SELECT __name__, job, code, instance, toUnixTimestamp64Milli(time), value, \
         reinterpretAsUInt64(value) = 9218868437227405314 FROM prom.prometheus \
         ORDER BY __name__, time",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{rows}");
    assert_eq!(
        rows,
        "http_requests_total\tapi\t200\t\t1000\t5\t0\n\
         http_requests_total\tapi\t200\t\t2000\tnan\t1\n\
         up\tnode\t\tx:9100\t1000\t1\t0\n\
         up\tnode\t\tx:9100\t2000\t0\t0\n"
    );
    let (_, metadata) = sql(
        &base,
        "SELECT metric, type, help FROM prom.prometheus_metadata",
    )
    .await;
    assert_eq!(metadata, "http_requests_total\tcounter\tRequests served.\n");
    // Refused, and nothing of them stored.
    let v3 = "application/x-protobuf;proto=io.prometheus.write.v3.Request";
    for (body, encoding, content_type, status, says) in [
        (
            body.clone(),
            "gzip",
            "application/x-protobuf",
            415,
            "snappy",
        ),
        (body.clone(), "snappy", v3, 415, "Content-Type"),
        (
            b"not snappy".to_vec(),
            "snappy",
            "application/x-protobuf",
            400,
            "snappy",
        ),
        (
            snappy(b"\xff\xff\xff"),
            "snappy",
            "application/x-protobuf",
            400,
            "WriteRequest",
        ),
        // A block cut short of the length it states.
        (
            body[..body.len() / 2].to_vec(),
            "snappy",
            "application/x-protobuf",
            400,
            "invalid snappy body",
        ),
        // A block stating 100 MiB, past the body limit: refused unread.
        (
            b"\x80\x80\x80\x32".to_vec(),
            "snappy",
            "application/x-protobuf",
            413,
            "",
        ),
    ] {
        let r = post(body, encoding, content_type).await.unwrap();
        assert_eq!(r.status().as_u16(), status);
        let text = r.text().await.unwrap();
        assert!(text.contains(says), "{text}");
    }
    // Valid protobuf, but not series chingest can store.
    let refused = |labels: Vec<Label>| chingest_proto::prometheus::WriteRequest {
        timeseries: vec![TimeSeries {
            labels,
            samples: vec![sample(1.0, 3_000)],
        }],
        metadata: Vec::new(),
    };
    let not_utf8 = vec![Label {
        name: "__name__".into(),
        value: prost::bytes::Bytes::from_static(b"\xff\xfe"),
    }];
    for (request, says) in [
        (refused(labels(&[("job", "x")])), "__name__"),
        (refused(not_utf8), "not UTF-8"),
    ] {
        let body = snappy(&request.encode_to_vec());
        let r = post(body, "snappy", "application/x-protobuf")
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        assert!(r.text().await.unwrap().contains(says));
    }
    assert_eq!(
        sql(&base, "SELECT count() FROM prom.prometheus").await.1,
        "4\n"
    );
    server.shutdown().await.unwrap();
}

/// Prometheus remote write 2.0 requests built from the specification:
/// a symbols table, float samples with a created timestamp, integer and
/// float native histograms, exemplars and metadata; and requests that are
/// invalid (references past the symbols table among them), of which
/// nothing is stored.
async fn prometheus_remote_write_2_stores_histograms_exemplars_and_metadata() {
    use chingest_proto::prometheus::v2::{
        BucketSpan, Count, Exemplar, Histogram, Metadata, Request, ResetHint, TimeSeries, ZeroCount,
    };
    use chingest_proto::prometheus::{MetricType, Sample};
    use prost::Message;
    let dir = tempfile::tempdir().unwrap();
    let (server, base) = serve(config(dir.path())).await;
    let symbols: Vec<prost::bytes::Bytes> = [
        "",
        "__name__",
        "http_requests_total",
        "job",
        "api",
        "Requests served.",
        "trace_id",
        "abc123",
        "request_seconds",
        "seconds",
        "custom_seconds",
    ]
    .into_iter()
    .map(|s| prost::bytes::Bytes::from(s.to_owned()))
    .collect();
    let metadata = |kind: MetricType, help_ref, unit_ref| {
        Some(Metadata {
            r#type: kind as i32,
            help_ref,
            unit_ref,
        })
    };
    let span = |offset, length| BucketSpan { offset, length };
    let request = Request {
        symbols: symbols.clone(),
        timeseries: vec![
            TimeSeries {
                labels_refs: vec![1, 2, 3, 4],
                samples: vec![
                    Sample {
                        value: 5.0,
                        timestamp: 1_000,
                    },
                    Sample {
                        value: 7.0,
                        timestamp: 2_000,
                    },
                ],
                exemplars: vec![Exemplar {
                    labels_refs: vec![6, 7],
                    value: 0.25,
                    timestamp: 1_500,
                }],
                metadata: metadata(MetricType::Counter, 5, 0),
                created_timestamp: 500,
                ..TimeSeries::default()
            },
            TimeSeries {
                labels_refs: vec![1, 8, 3, 4],
                histograms: vec![Histogram {
                    count: Some(Count::Int(6)),
                    sum: 4.5,
                    schema: 0,
                    zero_threshold: 0.001,
                    zero_count: Some(ZeroCount::Int(1)),
                    positive_spans: vec![span(1, 2), span(2, 1)],
                    positive_deltas: vec![2, 1, -2],
                    negative_spans: vec![span(0, 1)],
                    negative_deltas: vec![1],
                    reset_hint: ResetHint::No as i32,
                    timestamp: 3_000,
                    ..Histogram::default()
                }],
                // No timestamp of its own: its series' newest sample's.
                exemplars: vec![Exemplar {
                    labels_refs: vec![6, 7],
                    value: 1.5,
                    timestamp: 0,
                }],
                metadata: metadata(MetricType::Histogram, 0, 9),
                created_timestamp: 0,
                ..TimeSeries::default()
            },
            TimeSeries {
                labels_refs: vec![1, 10],
                histograms: vec![Histogram {
                    count: Some(Count::Float(2.5)),
                    sum: 3.0,
                    schema: -53,
                    positive_spans: vec![span(0, 2)],
                    positive_counts: vec![1.5, 1.0],
                    custom_values: vec![0.1, 1.0],
                    timestamp: 4_000,
                    ..Histogram::default()
                }],
                created_timestamp: 100,
                ..TimeSeries::default()
            },
        ],
    };
    let v2 = "application/x-protobuf;proto=io.prometheus.write.v2.Request";
    let post = |request: &Request| {
        client()
            .post(format!("{base}/api/v1/write?db=prom2&durability=visible"))
            .header("Content-Encoding", "snappy")
            .header("Content-Type", v2)
            .header("X-Prometheus-Remote-Write-Version", "2.0.0")
            .body(
                snap::raw::Encoder::new()
                    .compress_vec(&request.encode_to_vec())
                    .unwrap(),
            )
            .send()
    };
    let r = post(&request).await.unwrap();
    let written = |r: &reqwest::Response, what: &str| {
        r.headers()[format!("x-prometheus-remote-write-{what}-written").as_str()]
            .to_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    assert_eq!(
        [
            written(&r, "samples"),
            written(&r, "histograms"),
            written(&r, "exemplars")
        ],
        ["2", "2", "2"]
    );
    let rows = |query: &'static str| {
        let base = base.clone();
        async move {
            let (status, rows) = sql(&base, query).await;
            assert_eq!(status, StatusCode::OK, "{rows}");
            rows
        }
    };
    assert_eq!(
        rows(
            "SELECT __name__, job, toUnixTimestamp64Milli(time), value, created_timestamp \
              FROM prom2.prometheus ORDER BY time"
        )
        .await,
        "http_requests_total\tapi\t1000\t5\t500\nhttp_requests_total\tapi\t2000\t7\t500\n"
    );
    assert_eq!(
        rows("SELECT __name__, job, toUnixTimestamp64Milli(time), count, sum, schema, \
              zero_threshold, zero_count, reset_hint, positive_index, positive_count, \
              negative_index, negative_count, custom_values, created_timestamp \
              FROM prom2.prometheus_histograms ORDER BY time")
        .await,
        "request_seconds\tapi\t3000\t6\t4.5\t0\t0.001\t1\tno\t[1,2,5]\t[2,3,1]\t[0]\t[1]\t[]\t\\N\n\
         custom_seconds\t\t4000\t2.5\t3\t-53\t0\t0\tunspecified\t[0,1]\t[1.5,1]\t[]\t[]\t[0.1,1]\t100\n"
    );
    assert_eq!(
        rows(
            "SELECT __name__, toUnixTimestamp64Milli(time), value, trace_id \
              FROM prom2.prometheus_exemplars ORDER BY time"
        )
        .await,
        "http_requests_total\t1500\t0.25\tabc123\nrequest_seconds\t3000\t1.5\tabc123\n"
    );
    assert_eq!(
        rows("SELECT metric, type, help, unit FROM prom2.prometheus_metadata ORDER BY metric")
            .await,
        "http_requests_total\tcounter\tRequests served.\t\nrequest_seconds\thistogram\t\tseconds\n"
    );
    // Invalid requests: each has one bad series beside the good ones, and
    // nothing of it is stored.
    let with = |change: &dyn Fn(&mut Request)| {
        let mut bad = request.clone();
        change(&mut bad);
        bad
    };
    let cases: Vec<(Request, &str)> = vec![
        (
            with(&|r| r.timeseries[1].labels_refs[3] = 99),
            "symbol reference 99 is past the symbols table (11 symbols)",
        ),
        (
            with(&|r| r.timeseries[0].exemplars[0].labels_refs = vec![6, 11]),
            "symbol reference 11",
        ),
        (
            with(&|r| r.timeseries[0].metadata.as_mut().unwrap().help_ref = 12),
            "symbol reference 12",
        ),
        (
            with(&|r| {
                r.timeseries[0].labels_refs.pop();
            }),
            "odd number",
        ),
        (
            with(&|r| r.timeseries[0].labels_refs = vec![3, 4]),
            "no __name__",
        ),
        (
            with(&|r| r.timeseries[0].labels_refs = vec![1, 2, 1, 4]),
            "repeats the label",
        ),
        (
            with(&|r| r.timeseries[0].labels_refs = vec![1, 2, 0, 4]),
            "empty label name",
        ),
        (
            with(&|r| r.symbols[0] = "x".into()),
            "start with an empty string",
        ),
        (
            with(&|r| {
                r.timeseries[1].samples = vec![Sample {
                    value: 1.0,
                    timestamp: 1,
                }]
            }),
            "both samples and histograms",
        ),
        (
            with(&|r| {
                r.timeseries[1].histograms[0].positive_deltas.pop();
            }),
            "cover 3 buckets but 2",
        ),
        (
            with(&|r| r.timeseries[1].histograms[0].schema = 12),
            "schema 12",
        ),
        (
            with(&|r| r.timeseries[0].exemplars[0].labels_refs = vec![3, 7]),
            "exemplar label cannot share",
        ),
        (
            with(&|r| {
                r.symbols[9] = "value".into();
                r.timeseries[0].labels_refs = vec![1, 2, 9, 4];
            }),
            "value\\\" is not supported: it names a stored column",
        ),
    ];
    let before = rows("SELECT count() FROM prom2.prometheus").await;
    for (bad, says) in cases {
        let r = post(&bad).await.unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{says}");
        let text = r.text().await.unwrap();
        assert!(text.contains(says), "{text:?} lacks {says:?}");
    }
    let r = client()
        .post(format!("{base}/api/v1/write?db=prom2"))
        .header("Content-Encoding", "snappy")
        .header("Content-Type", v2)
        .body(
            snap::raw::Encoder::new()
                .compress_vec(b"\x22\x02\xff\xfe")
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(rows("SELECT count() FROM prom2.prometheus").await, before);
    assert_eq!(
        rows("SELECT count() FROM prom2.prometheus_histograms").await,
        "2\n"
    );
    assert_eq!(
        rows("SELECT count() FROM prom2.prometheus_exemplars").await,
        "2\n"
    );
    server.shutdown().await.unwrap();
}

/// 404 over HTTP, NOT_FOUND over gRPC.
async fn unknown_databases_are_404_when_auto_create_is_off() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path());
    config.write.auto_create_databases = false;
    let (server, base) = serve(config).await;
    let r = client()
        .post(format!("{base}/write?db=nope"))
        .body("m v=1i\n")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let r = client()
        .post(format!("{base}/api/v2/write?bucket=nope"))
        .body("m v=1i\n")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(r.json::<Value>().await.unwrap()["code"], "not found");
    // gRPC: NOT_FOUND, for line protocol and Arrow alike.
    let mut grpc = IngestClient::connect(format!("http://{}", server.grpc_addr))
        .await
        .unwrap();
    let status = grpc
        .write(WriteRequest {
            database: "nope".into(),
            data: Some(write_request::Data::LineProtocol("m v=1i\n".into())),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::NotFound, "{status:?}");
    let batch = arrow::array::RecordBatch::try_from_iter(vec![
        (
            "time",
            Arc::new(arrow::array::Int64Array::from(vec![1])) as arrow::array::ArrayRef,
        ),
        (
            "v",
            Arc::new(arrow::array::Int64Array::from(vec![1])) as arrow::array::ArrayRef,
        ),
    ])
    .unwrap();
    let mut ipc = Vec::new();
    let mut writer = arrow::ipc::writer::StreamWriter::try_new(&mut ipc, &batch.schema()).unwrap();
    writer.write(&batch).unwrap();
    writer.finish().unwrap();
    drop(writer);
    let request = WriteArrowRequest {
        target: Some(ArrowTarget {
            database: "nope".into(),
            measurement: "m".into(),
            ..Default::default()
        }),
        ipc: ipc.into(),
    };
    let status = grpc
        .write_arrow(tokio_stream::iter(vec![request]))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::NotFound, "{status:?}");
    let r = client()
        .post(format!("{base}/query"))
        .form(&[("q", "CREATE DATABASE nope")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let r = client()
        .post(format!("{base}/write?db=nope"))
        .body("m v=1i\n")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    server.shutdown().await.unwrap();
}

/// `last_values(…)` on `/sql`: the cache as a table, the token's scope on
/// its database, and statements that try to get around either.
async fn last_values_are_read_through_sql_within_the_token_s_scope() {
    use chingest_server::config::TokenConfig;
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path());
    config.auth_tokens = vec!["admin".into()];
    config.tokens = vec![TokenConfig {
        token: "one".into(),
        read: true,
        write: true,
        databases: vec!["db1".into()],
    }];
    let (server, base) = serve(config).await;
    let post = |path: String, token: &str, body: &str| {
        client()
            .post(format!("{base}{path}"))
            .header("Authorization", format!("Token {token}"))
            .body(body.to_owned())
            .send()
    };
    for db in ["db1", "db2"] {
        let body = "cpu,host=a,rack=r1 x=1,n=1i 1\ncpu,host=a,rack=r1 x=2 2\ncpu,host=b x=3 1\n";
        let r = post(format!("/write?db={db}&durability=visible"), "admin", body)
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::NO_CONTENT);
    }
    let sql = |token: &'static str, statement: &str| {
        let request = post("/sql?format=TabSeparated".into(), token, statement);
        async move {
            let r = request.await.unwrap();
            (r.status(), r.text().await.unwrap())
        }
    };
    // The cache as a table: tags and fields as columns, NULL where a
    // series has no value, `time` its newest field's.
    let all = "SELECT host, rack, x, n, toUnixTimestamp64Nano(time) \
               FROM last_values('db1', 'cpu') ORDER BY host";
    for token in ["admin", "one"] {
        assert_eq!(
            sql(token, all).await,
            (
                StatusCode::OK,
                "a\tr1\t2\t1\t2\nb\t\t3\t\\N\t1\n".to_owned()
            ),
            "{token}"
        );
    }
    let one_host = "SELECT x FROM last_values('db1', 'cpu', 'autogen') WHERE host = 'a'";
    assert_eq!(sql("one", one_host).await, (StatusCode::OK, "2\n".into()));
    // Two calls, a join, a subquery, text that only looks like a call.
    for (statement, expected) in [
        (
            "SELECT count() FROM last_values('db1', 'cpu') AS l \
             JOIN last_values('db1', 'cpu') AS r USING series_id",
            "2\n",
        ),
        (
            "SELECT count() FROM db1.cpu WHERE host IN (SELECT host FROM last_values('db1', 'cpu'))",
            "3\n",
        ),
        (
            "SELECT count() /* last_values('db2', 'cpu') */ FROM last_values('db1', 'cpu') \
             -- last_values('db2', 'cpu')\n",
            "2\n",
        ),
        (
            "SELECT 'last_values(''db2'', ''cpu'')' FROM last_values('db1', 'cpu') WHERE host = 'b'",
            "last_values(\\'db2\\', \\'cpu\\')\n",
        ),
    ] {
        assert_eq!(
            sql("one", statement).await,
            (StatusCode::OK, expected.to_owned()),
            "{statement}"
        );
    }
    // Outside the token's scope, by hand, or past the tokenizer.
    let forbidden = StatusCode::FORBIDDEN;
    for (token, statement) in [
        ("one", "SELECT * FROM last_values('db2', 'cpu')"),
        ("one", "SELECT * FROM db1.cpu WHERE host IN (SELECT host FROM last_values('db2', 'cpu'))"),
        ("one", "SELECT * FROM (SELECT * FROM (SELECT * FROM last_values('db2', 'cpu')))"),
        ("one", "WITH l AS (SELECT * FROM last_values('db2', 'cpu')) SELECT * FROM l"),
        ("one", "SELECT * FROM view(SELECT * FROM last_values('db2', 'cpu'))"),
        ("one", "SELECT * FROM last_values('db2', 'cpu') SETTINGS readonly = 0"),
        ("one", "SELECT * FROM last_values('db1', 'cpu') UNION ALL SELECT * FROM last_values('db2', 'cpu')"),
        ("one", "SELECT * FROM last_values(concat('db', '2'), 'cpu')"),
        ("one", "SELECT * FROM last_values(db2, cpu)"),
        ("one", "SELECT * FROM last_values(\"db2\", 'cpu')"),
        ("one", "SELECT * FROM last_values('db1')"),
        ("one", "SELECT * FROM last_values('db1', 'cpu', 'autogen', 'x')"),
        ("one", "SELECT * FROM _chingest_last_values.s1"),
        ("admin", "SELECT * FROM `_chingest_last_values`.`s1`"),
        ("admin", "SELECT * FROM ArrowStream('chingest_1_1')"),
        ("admin", "SELECT * FROM arrowstream('x')"),
        ("admin", "SELECT last_values('db1', 'cpu')"),
        // A call the tokenizer cannot read (a heredoc string): refused,
        // never guessed.
        ("admin", "SELECT * FROM last_values($$db1$$, 'cpu')"),
    ] {
        let (status, text) = sql(token, statement).await;
        assert!(
            status == forbidden || status == StatusCode::BAD_REQUEST,
            "{token}: {statement}: {status} {text}"
        );
        assert_ne!(status, StatusCode::OK);
    }
    // A measurement the cache does not hold: 404 naming it.
    let (status, text) = sql("admin", "SELECT * FROM last_values('db1', 'nope')").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{text}");
    assert!(text.contains("nope"), "{text}");
    // Nothing left behind: every snapshot table was dropped.
    let (status, text) = sql(
        "admin",
        "SELECT count() FROM system.tables WHERE database = '_chingest_last_values'",
    )
    .await;
    assert!(status == forbidden || text == "0\n", "{status} {text}");
    let metrics = client()
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap();
    let metrics = metrics.text().await.unwrap();
    assert!(
        metrics.contains("chingest_last_value_series 4"),
        "{metrics}"
    );
    server.shutdown().await.unwrap();
}
