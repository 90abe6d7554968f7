//! End-to-end tests of the gRPC API: a real server on loopback, a tonic
//! client. Every RPC, partial writes, every error path, gzip, health,
//! reflection, and concurrent Arrow streams with exact counts.
//!
//! The server comes from `support` (one per binary, token `secret`, 1 MiB
//! message limit); every test uses databases of its own.

mod support;

use std::sync::Arc;

use arrow::array::{
    ArrayRef, DictionaryArray, Float64Array, Int64Array, RecordBatch, StringArray,
    TimestampNanosecondArray,
};
use arrow::datatypes::Int32Type;
use arrow::ipc::writer::StreamWriter;
use chingest_proto::v1::ingest_client::IngestClient;
use chingest_proto::v1::{
    field_value, ArrowTarget, Field, FieldValue, Point, Points, Precision, WriteArrowRequest,
    WriteRequest,
};
use tonic::codec::CompressionEncoding;
use tonic::transport::Channel;
use tonic::{Code, Request};

use support::{grpc_base, run, sql, wait_ready, TOKEN};

fn main() {
    support::main(tests![
        line_protocol_writes_partially,
        points_of_every_type,
        points_that_cannot_be_stored_are_rejected,
        write_errors_have_their_codes,
        tokens_are_required,
        oversized_messages_are_refused,
        gzip_requests_are_accepted,
        arrow_streams_are_stored,
        arrow_and_line_protocol_agree_on_series,
        arrow_errors_name_the_problem,
        concurrent_arrow_streams_have_exact_counts,
        health_and_reflection,
        calls_are_counted_in_metrics,
    ]);
}

async fn connect() -> IngestClient<Channel> {
    wait_ready().await;
    IngestClient::connect(grpc_base()).await.expect("connect")
}

/// `message` with the token in its `authorization` metadata.
fn authorized<T>(message: T) -> Request<T> {
    let mut request = Request::new(message);
    request
        .metadata_mut()
        .insert("authorization", format!("Token {TOKEN}").parse().unwrap());
    request
}

fn lp_request(database: &str, body: &str) -> WriteRequest {
    WriteRequest {
        database: database.into(),
        data: Some(chingest_proto::v1::write_request::Data::LineProtocol(
            body.as_bytes().to_vec().into(),
        )),
        ..Default::default()
    }
}

fn points_request(database: &str, points: Vec<Point>) -> WriteRequest {
    WriteRequest {
        database: database.into(),
        precision: Precision::Seconds as i32,
        data: Some(chingest_proto::v1::write_request::Data::Points(Points {
            points,
        })),
        ..Default::default()
    }
}

fn value(v: field_value::Value) -> FieldValue {
    FieldValue { value: Some(v) }
}

fn point(
    measurement: &str,
    tags: &[(&str, &str)],
    fields: Vec<(&str, FieldValue)>,
    t: i64,
) -> Point {
    let mut point = Point::new(measurement, Some(t));
    for (k, v) in tags {
        point = point.tag(k, v);
    }
    for (k, v) in fields {
        point.fields.push(Field {
            key: k.as_bytes().to_vec().into(),
            value: Some(v),
        });
    }
    point
}

async fn query(statement: &str) -> String {
    let (status, body) = sql(statement).await;
    assert_eq!(status, 200, "{body}");
    body
}

/// `batches` as one Arrow IPC stream, cut into messages of `chunk` bytes;
/// the first carries `target`.
fn arrow_stream(
    target: ArrowTarget,
    batches: &[RecordBatch],
    chunk: usize,
) -> Vec<WriteArrowRequest> {
    let mut bytes = Vec::new();
    let mut writer = StreamWriter::try_new(&mut bytes, &batches[0].schema()).unwrap();
    for batch in batches {
        writer.write(batch).unwrap();
    }
    writer.finish().unwrap();
    drop(writer);
    let mut requests: Vec<WriteArrowRequest> = bytes
        .chunks(chunk)
        .map(|piece| WriteArrowRequest {
            target: None,
            ipc: piece.to_vec().into(),
        })
        .collect();
    requests[0].target = Some(target);
    requests
}

fn target(database: &str, measurement: &str, tags: &[&str]) -> ArrowTarget {
    ArrowTarget {
        database: database.into(),
        measurement: measurement.into(),
        tag_columns: tags.iter().map(|t| t.to_string()).collect(),
        ..Default::default()
    }
}

/// `rows` cpu rows from `first` on: time, host (dictionary-encoded), usage.
fn cpu_batch(first: i64, rows: usize, hosts: usize) -> RecordBatch {
    let time: Vec<i64> = (0..rows as i64)
        .map(|i| (first + i) * 1_000_000_000)
        .collect();
    let host: DictionaryArray<Int32Type> = (0..rows)
        .map(|i| format!("host_{}", i % hosts))
        .collect::<Vec<_>>()
        .iter()
        .map(String::as_str)
        .collect();
    let columns: Vec<(&str, ArrayRef)> = vec![
        (
            "time",
            Arc::new(TimestampNanosecondArray::from(time).with_timezone("UTC")),
        ),
        ("host", Arc::new(host)),
        (
            "usage",
            Arc::new(Float64Array::from_iter_values((0..rows).map(|i| i as f64))),
        ),
    ];
    RecordBatch::try_from_iter(columns).unwrap()
}

async fn write_arrow(
    client: &mut IngestClient<Channel>,
    requests: Vec<WriteArrowRequest>,
) -> Result<chingest_proto::v1::WriteArrowResponse, tonic::Status> {
    client
        .write_arrow(authorized(tokio_stream::iter(requests)))
        .await
        .map(tonic::Response::into_inner)
}

fn line_protocol_writes_partially() {
    run(async {
        let mut client = connect().await;
        let body = "cpu,host=a usage=1 1\ncpu,host=b usage=oops 2\ncpu,host=c usage=3 3\n";
        let reply = client
            .write(authorized(lp_request("g_lp", body)))
            .await
            .unwrap()
            .into_inner();
        assert_eq!((reply.accepted, reply.rejected), (2, 1));
        let rejection = &reply.rejections[0];
        assert_eq!(rejection.line, 2);
        assert!(rejection.column > 0, "{rejection:?}");
        assert!(
            rejection.reason.contains("oops") || rejection.reason.contains("usage"),
            "{rejection:?}"
        );
        assert_eq!(
            query("SELECT host FROM g_lp.cpu ORDER BY host").await,
            "a\nc\n"
        );
    })
}

fn points_of_every_type() {
    run(async {
        let mut client = connect().await;
        use field_value::Value as V;
        let points = vec![
            point(
                "m",
                &[("host", "a b,c"), ("empty", "")],
                vec![
                    ("f", value(V::Float(0.1))),
                    ("i", value(V::Integer(i64::MIN))),
                    ("u", value(V::Unsigned(u64::MAX))),
                    ("s", value(V::String("quote \" and \\ backslash".into()))),
                    ("b", value(V::Boolean(false))),
                ],
                1_700_000_000,
            ),
            // A later point of another type for `f` is rejected alone.
            point(
                "m",
                &[("host", "x")],
                vec![("f", value(V::Integer(1)))],
                1_700_000_001,
            ),
            // No timestamp: the server's clock.
            Point {
                timestamp: None,
                ..point(
                    "m",
                    &[("host", "now")],
                    vec![("f", value(V::Float(2.0)))],
                    0,
                )
            },
        ];
        let reply = client
            .write(authorized(points_request("g_points", points)))
            .await
            .unwrap()
            .into_inner();
        assert_eq!((reply.accepted, reply.rejected), (2, 1), "{reply:?}");
        assert_eq!(reply.rejections[0].line, 2);
        assert_eq!(reply.rejections[0].column, 0);
        assert!(reply.rejections[0].reason.contains('f'), "{reply:?}");
        assert_eq!(
            query("SELECT host, f, i, u, s, b, toUnixTimestamp(time) FROM g_points.m WHERE host != 'now'").await,
            "a b,c\t0.1\t-9223372036854775808\t18446744073709551615\tquote \" and \\\\ backslash\tfalse\t1700000000\n"
        );
        let recent = query("SELECT time > now() - 600 FROM g_points.m WHERE host = 'now'").await;
        assert_eq!(recent, "1\n");
    })
}

/// Points are refused one by one, by position, for what cannot be stored
/// (the rest of the request is); what line protocol cannot say but the
/// tables can store — a line feed in a tag value, a name that starts with
/// `#` — is stored, since points are never written out as text.
fn points_that_cannot_be_stored_are_rejected() {
    run(async {
        let mut client = connect().await;
        use field_value::Value as V;
        let good = point("m", &[], vec![("v", value(V::Integer(1)))], 1);
        let points = vec![
            point("m", &[], vec![("v", value(V::Float(f64::INFINITY)))], 1),
            point("", &[], vec![("v", value(V::Integer(1)))], 1),
            point("m", &[("", "x")], vec![("v", value(V::Integer(1)))], 1),
            point("m", &[], vec![], 1),
            point("m", &[], vec![("v", FieldValue { value: None })], 1),
            point(
                "m",
                &[("k", "line\nbreak")],
                vec![("v", value(V::Integer(2)))],
                2,
            ),
            point("#m", &[], vec![("v", value(V::Integer(3)))], 3),
            good,
            point("m", &[], vec![("v", value(V::String("text".into())))], 1),
        ];
        let reply = client
            .write(authorized(points_request("g_points_bad", points)))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            (reply.accepted, reply.rejected),
            (3, 6),
            "{:?}",
            reply.rejections
        );
        let lines: Vec<u64> = reply.rejections.iter().map(|r| r.line).collect();
        assert_eq!(lines, [1, 2, 3, 4, 5, 9]);
        let reasons: Vec<&str> = reply.rejections.iter().map(|r| r.reason.as_str()).collect();
        assert!(reasons[0].contains("finite"), "{reasons:?}");
        assert!(reasons[5].contains("type conflict"), "{reasons:?}");
        assert_eq!(
            query("SELECT k, v FROM g_points_bad.m ORDER BY time").await,
            "\t1\nline\\nbreak\t2\n"
        );
        assert_eq!(query("SELECT v FROM g_points_bad.`#m`").await, "3\n");
    })
}

fn write_errors_have_their_codes() {
    run(async {
        let mut client = connect().await;
        let cases = [
            (lp_request("", "m v=1"), "database is required"),
            (
                WriteRequest {
                    database: "g_err".into(),
                    ..Default::default()
                },
                "line_protocol or points",
            ),
            (
                WriteRequest {
                    precision: 99,
                    ..lp_request("g_err", "m v=1")
                },
                "precision",
            ),
            (
                WriteRequest {
                    retention_policy: "r".repeat(300),
                    ..lp_request("g_err", "m v=1")
                },
                "too long",
            ),
        ];
        for (request, expected) in cases {
            let status = client.write(authorized(request)).await.unwrap_err();
            assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
            assert!(status.message().contains(expected), "{status:?}");
        }
    })
}

fn tokens_are_required() {
    run(async {
        let mut client = connect().await;
        let status = client
            .write(Request::new(lp_request("g_auth", "m v=1")))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::Unauthenticated);
        let mut wrong = Request::new(lp_request("g_auth", "m v=1"));
        wrong
            .metadata_mut()
            .insert("authorization", "Token nope".parse().unwrap());
        assert_eq!(
            client.write(wrong).await.unwrap_err().code(),
            Code::Unauthenticated
        );
        let mut bearer = Request::new(lp_request("g_auth", "m v=1"));
        bearer
            .metadata_mut()
            .insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
        assert_eq!(client.write(bearer).await.unwrap().into_inner().accepted, 1);
        // Streams too.
        let requests = arrow_stream(
            target("g_auth", "cpu", &["host"]),
            &[cpu_batch(0, 10, 2)],
            1 << 20,
        );
        let status = client
            .write_arrow(Request::new(tokio_stream::iter(requests)))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::Unauthenticated);
    })
}

fn oversized_messages_are_refused() {
    run(async {
        let mut client = connect().await;
        let big = "m v=1\n".repeat(200_000); // 1.2 MB, over the 1 MiB limit
        let status = client
            .write(authorized(lp_request("g_big", &big)))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::OutOfRange, "{status:?}");
        assert!(status.message().contains("too large"), "{status:?}");
        // The server keeps serving, and nothing of it was stored.
        let reply = client
            .write(authorized(lp_request("g_big", "m v=1")))
            .await
            .unwrap();
        assert_eq!(reply.into_inner().accepted, 1);
        assert_eq!(query("SELECT count() FROM g_big.m").await, "1\n");
    })
}

fn gzip_requests_are_accepted() {
    run(async {
        let mut client = connect()
            .await
            .send_compressed(CompressionEncoding::Gzip)
            .accept_compressed(CompressionEncoding::Gzip);
        let body: String = (0..1000)
            .map(|i| format!("m,host=h{i} v={i}i {i}\n"))
            .collect();
        let reply = client
            .write(authorized(lp_request("g_gzip", &body)))
            .await
            .unwrap();
        assert_eq!(reply.into_inner().accepted, 1000);
        let requests = arrow_stream(
            target("g_gzip", "cpu", &["host"]),
            &[cpu_batch(0, 5000, 50)],
            4096,
        );
        assert_eq!(write_arrow(&mut client, requests).await.unwrap().rows, 5000);
        assert_eq!(query("SELECT count() FROM g_gzip.cpu").await, "5000\n");
    })
}

fn arrow_streams_are_stored() {
    run(async {
        let mut client = connect().await;
        let batches: Vec<RecordBatch> = (0..5).map(|b| cpu_batch(b * 1000, 1000, 10)).collect();
        // Messages cut mid-batch: the stream is reassembled across them.
        let requests = arrow_stream(target("g_arrow", "cpu", &["host"]), &batches, 7000);
        assert!(requests.len() > 5);
        let reply = write_arrow(&mut client, requests).await.unwrap();
        assert_eq!((reply.rows, reply.batches), (5000, 5));
        assert_eq!(
            query("SELECT count(), uniqExact(host), sum(usage), min(toUnixTimestamp(time)), max(toUnixTimestamp(time)) FROM g_arrow.cpu").await,
            "5000\t10\t2497500\t0\t4999\n"
        );
        // A stream with a schema and no batches stores nothing and succeeds.
        let empty = arrow_stream(
            target("g_arrow", "cpu", &["host"]),
            &[cpu_batch(0, 0, 1)],
            1 << 20,
        );
        assert_eq!(write_arrow(&mut client, empty).await.unwrap().rows, 0);
    })
}

fn arrow_and_line_protocol_agree_on_series() {
    run(async {
        let mut client = connect().await;
        let lp = "cpu,host=host_0 usage=1 1000000000000\ncpu,host=host_1 usage=1 1000000000000\n";
        client
            .write(authorized(lp_request("g_same", lp)))
            .await
            .unwrap();
        let requests = arrow_stream(
            target("g_same", "cpu", &["host"]),
            &[cpu_batch(0, 10, 2)],
            1 << 20,
        );
        write_arrow(&mut client, requests).await.unwrap();
        // Two series in all: Arrow rows hash to the ids line protocol gave.
        assert_eq!(
            query("SELECT uniqExact(series_id), count() FROM g_same.`cpu.autogen`").await,
            "2\t12\n"
        );
        assert_eq!(query("SELECT count() FROM g_same._series").await, "2\n");
    })
}

fn arrow_errors_name_the_problem() {
    run(async {
        let mut client = connect().await;
        let t = || target("g_arrow_err", "cpu", &["host"]);
        write_arrow(
            &mut client,
            arrow_stream(t(), &[cpu_batch(0, 10, 2)], 1 << 20),
        )
        .await
        .unwrap();

        // The first message must carry the target.
        let mut requests = arrow_stream(t(), &[cpu_batch(0, 10, 2)], 1 << 20);
        requests[0].target = None;
        let status = write_arrow(&mut client, requests).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument);
        assert!(status.message().contains("target"), "{status:?}");
        let status = write_arrow(&mut client, vec![]).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument);
        let status = write_arrow(
            &mut client,
            arrow_stream(
                ArrowTarget {
                    measurement: String::new(),
                    ..t()
                },
                &[cpu_batch(0, 1, 1)],
                1 << 20,
            ),
        )
        .await
        .unwrap_err();
        assert!(status.message().contains("measurement"), "{status:?}");

        // A field whose type conflicts with its column: named.
        let conflicting = RecordBatch::try_from_iter(vec![
            ("time", Arc::new(Int64Array::from(vec![1])) as ArrayRef),
            (
                "usage",
                Arc::new(StringArray::from(vec!["high"])) as ArrayRef,
            ),
        ])
        .unwrap();
        let untagged = || target("g_arrow_err", "cpu", &[]);
        let status = write_arrow(
            &mut client,
            arrow_stream(untagged(), &[conflicting], 1 << 20),
        )
        .await
        .unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument);
        assert!(status.message().contains("usage"), "{status:?}");

        // No time column.
        let no_time = RecordBatch::try_from_iter(vec![(
            "usage",
            Arc::new(Float64Array::from(vec![1.0])) as ArrayRef,
        )])
        .unwrap();
        let status = write_arrow(&mut client, arrow_stream(untagged(), &[no_time], 1 << 20))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument);
        assert!(status.message().contains("time"), "{status:?}");

        // Bytes that are not Arrow IPC, and a stream cut short.
        let garbage = vec![WriteArrowRequest {
            target: Some(t()),
            ipc: vec![0xAB; 64].into(),
        }];
        let status = write_arrow(&mut client, garbage).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument);
        assert!(status.message().contains("Arrow IPC"), "{status:?}");
        let mut cut = arrow_stream(t(), &[cpu_batch(100, 100, 2)], 1000);
        cut.pop();
        cut.pop();
        let status = write_arrow(&mut client, cut).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");

        // Only the first good stream was stored.
        assert_eq!(query("SELECT count() FROM g_arrow_err.cpu").await, "10\n");
    })
}

fn concurrent_arrow_streams_have_exact_counts() {
    run(async {
        let client = connect().await;
        let streams: Vec<_> = (0..8)
            .map(|s| {
                let mut client = client.clone();
                tokio::spawn(async move {
                    // Half the streams share a table, half have their own.
                    let measurement = if s % 2 == 0 {
                        "shared".to_owned()
                    } else {
                        format!("own{s}")
                    };
                    let batches: Vec<RecordBatch> = (0..5)
                        .map(|b| cpu_batch((s * 5 + b) * 1000, 1000, 20))
                        .collect();
                    let requests = arrow_stream(
                        target("g_concurrent", &measurement, &["host"]),
                        &batches,
                        16 << 10,
                    );
                    write_arrow(&mut client, requests).await.unwrap().rows
                })
            })
            .collect();
        let mut total = 0;
        for stream in streams {
            total += stream.await.unwrap();
        }
        assert_eq!(total, 40_000);
        assert_eq!(
            query("SELECT count() FROM g_concurrent.shared").await,
            "20000\n"
        );
        for s in [1, 3, 5, 7] {
            assert_eq!(
                query(&format!("SELECT count() FROM g_concurrent.own{s}")).await,
                "5000\n"
            );
        }
    })
}

fn health_and_reflection() {
    run(async {
        wait_ready().await;
        let channel = Channel::from_shared(grpc_base())
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
        for service in ["", "chingest.v1.Ingest"] {
            let reply = health
                .check(tonic_health::pb::HealthCheckRequest {
                    service: service.into(),
                })
                .await
                .unwrap()
                .into_inner();
            assert_eq!(
                reply.status(),
                tonic_health::pb::health_check_response::ServingStatus::Serving,
                "{service:?}"
            );
        }

        use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
        use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
        use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
        use tonic_reflection::pb::v1::ServerReflectionRequest;
        let mut reflection = ServerReflectionClient::new(channel);
        let request = ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::ListServices(String::new())),
        };
        let mut replies = reflection
            .server_reflection_info(tokio_stream::iter(vec![request]))
            .await
            .unwrap()
            .into_inner();
        let reply = replies.message().await.unwrap().unwrap();
        let Some(MessageResponse::ListServicesResponse(list)) = reply.message_response else {
            panic!("{reply:?}");
        };
        let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
        assert!(
            names.contains(&"chingest.v1.Ingest".to_owned()),
            "{names:?}"
        );
        assert!(
            names.contains(&"grpc.health.v1.Health".to_owned()),
            "{names:?}"
        );
    })
}

fn calls_are_counted_in_metrics() {
    run(async {
        let mut client = connect().await;
        client
            .write(authorized(lp_request("g_metrics", "m v=1")))
            .await
            .unwrap();
        let refused = client
            .write(Request::new(lp_request("g_metrics", "m v=1")))
            .await;
        assert_eq!(refused.unwrap_err().code(), Code::Unauthenticated);
        let invalid = client.write(authorized(lp_request("", "m v=1"))).await;
        assert_eq!(invalid.unwrap_err().code(), Code::InvalidArgument);
        let metrics = support::metrics().await;
        for line in [
            "chingest_grpc_calls_total{method=\"Write\",code=\"Ok\"}",
            "chingest_grpc_calls_total{method=\"Write\",code=\"InvalidArgument\"}",
            "chingest_grpc_calls_total{method=\"*\",code=\"Unauthenticated\"}",
            "chingest_grpc_call_duration_seconds_count{method=\"Write\"}",
        ] {
            assert!(metrics.contains(line), "{line} missing from:\n{metrics}");
        }
        let rows = support::metric(&metrics, "chingest_rows_written_total{protocol=\"grpc\"}");
        assert!(rows >= 1.0, "{metrics}");
    })
}
