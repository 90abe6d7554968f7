//! The server's log: every request is answered inside a span naming its
//! protocol, its endpoint, its database and its outcome, HTTP and gRPC
//! alike. The real binary logs at `debug` into a pipe, read once it is
//! killed.

#[path = "support/child.rs"]
mod child;

use std::io::Read as _;

use chingest_proto::v1::ingest_client::IngestClient;
use chingest_proto::v1::{write_request, WriteRequest};

const DB: &str = "spans";

#[test]
fn every_request_is_answered_in_a_span_with_its_protocol_database_and_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = child::start_logged(&dir.path().join("data"), "chingest_server=debug,warn");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        child::wait_ready(&server).await;
        let client = child::client();
        let url = |path: &str| format!("{}{path}", server.url);
        for (path, body, status) in [
            (format!("/write?db={DB}"), "cpu v=1 1", 204),
            (format!("/write?db={DB}"), "cpu v=", 400),
            (
                format!("/api/v2/delete?bucket={DB}"),
                r#"{"start": "1970-01-01T00:00:00Z", "stop": "1970-01-02T00:00:00Z"}"#,
                204,
            ),
        ] {
            let response = client.post(url(&path)).body(body).send().await.unwrap();
            assert_eq!(response.status(), status, "{path} {body}");
        }
        for (path, status) in [
            (format!("/query?db={DB}&q=SELECT%20*%20FROM%20cpu"), 200),
            (format!("/api/v1/query?db={DB}&query=up"), 200),
            (format!("/db/{DB}/api/v1/query?query=rate("), 400),
            (format!("/sql?db={DB}&query=SELECT%201"), 200),
        ] {
            let response = client.get(url(&path)).send().await.unwrap();
            assert_eq!(response.status(), status, "{path}");
        }
        // An empty export, its database named by the header.
        let exported = client
            .post(url("/v1/metrics"))
            .header("content-type", "application/json")
            .header("x-chingest-database", DB)
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(exported.status(), 200);
        let snapshots = client.get(url("/api/v1/admin/snapshots")).send().await;
        assert_eq!(snapshots.unwrap().status(), 200);
        let mut grpc = IngestClient::connect(server.grpc_url.clone())
            .await
            .unwrap();
        let write = |precision| WriteRequest {
            database: DB.to_owned(),
            precision,
            data: Some(write_request::Data::LineProtocol("cpu v=2 2".into())),
            ..WriteRequest::default()
        };
        grpc.write(write(0)).await.unwrap();
        let refused = grpc.write(write(99)).await.unwrap_err();
        assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    });
    server.kill();
    let mut log = String::new();
    let mut stdout = server.child.stdout.take().expect("piped");
    stdout.read_to_string(&mut log).unwrap();
    let log = without_colours(&log);
    let db = format!("db=\"{DB}\"");
    for (protocol, endpoint, status, outcome) in [
        ("otlp", "\"/v1/metrics\"", "200", "ok"),
        ("admin", "\"/api/v1/admin/snapshots\"", "200", "ok"),
        ("influxdb", "\"/write\"", "204", "ok"),
        ("influxdb", "\"/write\"", "400", "refused"),
        ("edit", "\"/api/v2/delete\"", "204", "ok"),
        ("influxql", "\"/query\"", "200", "ok"),
        ("promql", "\"/api/v1/query\"", "200", "ok"),
        ("promql", "\"/db/{db}/api/v1/query\"", "400", "refused"),
        ("sql", "\"/sql\"", "200", "ok"),
        ("grpc", "\"Write\"", "Ok", "ok"),
        ("grpc", "\"Write\"", "InvalidArgument", "refused"),
    ] {
        let mut fields = vec![
            format!("protocol=\"{protocol}\""),
            format!("endpoint={endpoint}"),
            format!("status={status}"),
            format!("outcome=\"{outcome}\""),
        ];
        // Snapshots are of every database.
        if protocol != "admin" {
            fields.push(db.clone());
        }
        assert!(
            log.lines()
                .any(|line| line.contains("answered") && fields.iter().all(|f| line.contains(f))),
            "no line answering {fields:?} in the log:\n{log}"
        );
    }
}

/// The log without its terminal colours (`ESC [ … m`).
fn without_colours(log: &str) -> String {
    let mut plain = String::with_capacity(log.len());
    let mut rest = log;
    while let Some(start) = rest.find('\x1b') {
        plain.push_str(&rest[..start]);
        rest = rest[start..].split_once('m').map_or("", |(_, after)| after);
    }
    plain.push_str(rest);
    plain
}
