//! OTLP metrics end to end: requests of every metric kind over OTLP/HTTP
//! (protobuf, gzip and JSON) and OTLP/gRPC, read back through `/sql`;
//! partial success for the points that cannot be stored; the errors, in
//! the request's encoding; and gauges and sums read by PromQL under
//! OpenTelemetry's Prometheus names.
//!
//! The server comes from `support` (one per binary, token `secret`); every
//! test uses databases of its own.

mod support;

use std::io::Write as _;

use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_client::MetricsServiceClient;
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{
    exponential_histogram_data_point::Buckets, metric::Data, number_data_point,
    summary_data_point::ValueAtQuantile, AggregationTemporality, ExponentialHistogram,
    ExponentialHistogramDataPoint, Gauge, Histogram, HistogramDataPoint, Metric, NumberDataPoint,
    ResourceMetrics, ScopeMetrics, Sum, Summary, SummaryDataPoint,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;
use reqwest::StatusCode;

use support::{base, client, grpc_base, run, sql, wait_ready, TOKEN};

fn main() {
    support::main(tests![
        every_kind_over_http_protobuf_is_stored,
        json_requests_take_strings_and_numbers,
        grpc_export_is_stored_in_the_named_database,
        errors_answer_in_the_request_encoding,
        gauges_and_sums_are_promql_metrics,
    ]);
}

const T0: u64 = 1_700_000_000_000_000_000;
const T1: u64 = T0 + 10_000_000_000;

fn kv(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(value) }),
        ..KeyValue::default()
    }
}

fn text(key: &str, value: &str) -> KeyValue {
    kv(key, any_value::Value::StringValue(value.into()))
}

fn number(
    attributes: Vec<KeyValue>,
    time: u64,
    value: number_data_point::Value,
) -> NumberDataPoint {
    NumberDataPoint {
        attributes,
        start_time_unix_nano: T0,
        time_unix_nano: time,
        value: Some(value),
        ..NumberDataPoint::default()
    }
}

fn metric(name: &str, unit: &str, data: Data) -> Metric {
    Metric {
        name: name.into(),
        description: format!("{name} described"),
        unit: unit.into(),
        data: Some(data),
        ..Metric::default()
    }
}

fn request(metrics: Vec<Metric>) -> ExportMetricsServiceRequest {
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(Resource {
                attributes: vec![
                    text("service.name", "checkout"),
                    kv("host.cores", any_value::Value::IntValue(8)),
                ],
                ..Resource::default()
            }),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(InstrumentationScope {
                    name: "shop".into(),
                    version: "1.2".into(),
                    ..InstrumentationScope::default()
                }),
                metrics,
                ..ScopeMetrics::default()
            }],
            ..ResourceMetrics::default()
        }],
    }
}

/// Every kind, and points that cannot be stored beside them.
fn every_kind() -> ExportMetricsServiceRequest {
    use number_data_point::Value::{AsDouble, AsInt};
    request(vec![
        metric(
            "cpu.temp",
            "Cel",
            Data::Gauge(Gauge {
                data_points: vec![
                    number(
                        vec![kv("core", any_value::Value::IntValue(0))],
                        T1,
                        AsDouble(41.5),
                    ),
                    number(
                        vec![kv("core", any_value::Value::IntValue(1))],
                        T1,
                        AsInt(40),
                    ),
                    // Refused: no time; an attribute named like a column.
                    number(vec![], 0, AsDouble(1.0)),
                    number(vec![text("value", "x")], T1, AsDouble(1.0)),
                ],
            }),
        ),
        metric(
            "requests",
            "1",
            Data::Sum(Sum {
                data_points: vec![number(vec![text("method", "GET")], T1, AsInt(10))],
                aggregation_temporality: AggregationTemporality::Cumulative as i32,
                is_monotonic: true,
            }),
        ),
        metric(
            "latency",
            "s",
            Data::Histogram(Histogram {
                data_points: vec![HistogramDataPoint {
                    time_unix_nano: T1,
                    start_time_unix_nano: T0,
                    count: 3,
                    sum: Some(0.6),
                    min: Some(0.1),
                    max: Some(0.3),
                    bucket_counts: vec![1, 2, 0],
                    explicit_bounds: vec![0.2, 0.5],
                    ..HistogramDataPoint::default()
                }],
                aggregation_temporality: AggregationTemporality::Delta as i32,
            }),
        ),
        metric(
            "size",
            "By",
            Data::ExponentialHistogram(ExponentialHistogram {
                data_points: vec![ExponentialHistogramDataPoint {
                    time_unix_nano: T1,
                    count: 4,
                    sum: Some(10.0),
                    scale: 2,
                    zero_count: 1,
                    positive: Some(Buckets {
                        offset: 3,
                        bucket_counts: vec![1, 2],
                    }),
                    ..ExponentialHistogramDataPoint::default()
                }],
                aggregation_temporality: AggregationTemporality::Cumulative as i32,
            }),
        ),
        metric(
            "rt",
            "ms",
            Data::Summary(Summary {
                data_points: vec![SummaryDataPoint {
                    time_unix_nano: T1,
                    count: 5,
                    sum: 2.5,
                    quantile_values: vec![
                        ValueAtQuantile {
                            quantile: 0.5,
                            value: 0.4,
                        },
                        ValueAtQuantile {
                            quantile: 0.99,
                            value: 0.9,
                        },
                    ],
                    ..SummaryDataPoint::default()
                }],
            }),
        ),
        Metric {
            name: "no.data".into(),
            ..Metric::default()
        },
    ])
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

async fn rows(query: &str) -> String {
    let (status, rows) = sql(query).await;
    assert_eq!(status, StatusCode::OK, "{rows}");
    rows
}

/// Posts [`every_kind`] as OTLP/HTTP protobuf with the query string
/// `query`; the status.
async fn post_every_kind(query: &str) -> StatusCode {
    client()
        .post(format!("{}/v1/metrics?{query}", base()))
        .bearer_auth(TOKEN)
        .header("Content-Type", "application/x-protobuf")
        .body(every_kind().encode_to_vec())
        .send()
        .await
        .unwrap()
        .status()
}

fn every_kind_over_http_protobuf_is_stored() {
    run(async {
        wait_ready().await;
        let r = client()
            .post(format!("{}/v1/metrics?db=otlp_pb", base()))
            .bearer_auth(TOKEN)
            .header("Content-Type", "application/x-protobuf")
            .header("Content-Encoding", "gzip")
            .body(gzip(&every_kind().encode_to_vec()))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()["content-type"], "application/x-protobuf");
        let response = ExportMetricsServiceResponse::decode(r.bytes().await.unwrap()).unwrap();
        let partial = response.partial_success.expect("three points refused");
        assert_eq!(partial.rejected_data_points, 3, "{}", partial.error_message);
        assert!(
            partial.error_message.contains("time_unix_nano is missing"),
            "{}",
            partial.error_message
        );
        assert_eq!(
            rows(
                "SELECT metric_name, `resource.service.name`, `resource.host.cores`, `scope.name`, \
                 `scope.version`, core, value, toUnixTimestamp64Nano(time), start_time_unix_nano, flags \
                 FROM otlp_pb.otel_metrics_gauge ORDER BY core"
            )
            .await,
            format!(
                "cpu.temp\tcheckout\t8\tshop\t1.2\t0\t41.5\t{T1}\t{T0}\t0\n\
                 cpu.temp\tcheckout\t8\tshop\t1.2\t1\t40\t{T1}\t{T0}\t0\n"
            )
        );
        assert_eq!(
            rows(
                "SELECT metric_name, method, value, aggregation_temporality, is_monotonic \
                 FROM otlp_pb.otel_metrics_sum"
            )
            .await,
            "requests\tGET\t10\tcumulative\ttrue\n"
        );
        assert_eq!(
            rows(
                "SELECT metric_name, count, sum, min, max, bucket_counts, explicit_bounds, \
                 aggregation_temporality FROM otlp_pb.otel_metrics_histogram"
            )
            .await,
            "latency\t3\t0.6\t0.1\t0.3\t[1,2,0]\t[0.2,0.5]\tdelta\n"
        );
        assert_eq!(
            rows(
                "SELECT metric_name, count, sum, scale, zero_count, positive_offset, \
                 positive_bucket_counts, negative_offset, negative_bucket_counts, start_time_unix_nano \
                 FROM otlp_pb.otel_metrics_exponential_histogram"
            )
            .await,
            "size\t4\t10\t2\t1\t3\t[1,2]\t0\t[]\t\\N\n"
        );
        assert_eq!(
            rows(
                "SELECT metric_name, count, sum, quantiles, quantile_values \
                 FROM otlp_pb.otel_metrics_summary"
            )
            .await,
            "rt\t5\t2.5\t[0.5,0.99]\t[0.4,0.9]\n"
        );
        assert_eq!(
            rows("SELECT metric_name, type, unit FROM otlp_pb.otel_metrics_metadata ORDER BY metric_name")
                .await,
            "cpu.temp\tgauge\tCel\nlatency\thistogram\ts\nrequests\tsum\t1\nrt\tsummary\tms\nsize\texponential_histogram\tBy\n"
        );
        // Sent again, the metadata keeps one point per metric.
        assert_eq!(post_every_kind("db=otlp_pb").await, StatusCode::OK);
        assert_eq!(
            rows("SELECT count() FROM otlp_pb.otel_metrics_metadata").await,
            "5\n"
        );
        assert_eq!(
            rows("SELECT count() FROM otlp_pb.otel_metrics_gauge").await,
            "4\n"
        );
    })
}

/// OTLP's JSON: lowerCamelCase keys, 64-bit integers as strings (or
/// numbers), enums as numbers.
fn json_requests_take_strings_and_numbers() {
    run(async {
        wait_ready().await;
        let body = serde_json::json!({
            "resourceMetrics": [{
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "web"}}]},
                "scopeMetrics": [{
                    "scope": {"name": "js"},
                    "metrics": [
                        {"name": "queue.depth", "unit": "1", "gauge": {"dataPoints": [
                            {"timeUnixNano": T1.to_string(), "asInt": "7",
                             "attributes": [{"key": "queue", "value": {"stringValue": "a"}}]},
                            {"timeUnixNano": T1, "asDouble": 2.5,
                             "attributes": [{"key": "queue", "value": {"stringValue": "b"}}]},
                            {"timeUnixNano": "0", "asDouble": 1.0}
                        ]}},
                        {"name": "hits", "sum": {"aggregationTemporality": 1, "isMonotonic": true,
                            "dataPoints": [{"timeUnixNano": T1.to_string(), "startTimeUnixNano": T0.to_string(), "asInt": 3}]}},
                        {"name": "lat", "histogram": {"aggregationTemporality": 2, "dataPoints": [
                            {"timeUnixNano": T1.to_string(), "count": "2", "sum": 1.5,
                             "bucketCounts": ["1", 1], "explicitBounds": [1.0]}]}}
                    ]
                }]
            }]
        });
        let r = client()
            .post(format!("{}/v1/metrics", base()))
            .bearer_auth(TOKEN)
            .header("X-Chingest-Database", "otlp_json")
            .header("Content-Type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()["content-type"], "application/json");
        let answer: serde_json::Value = r.json().await.unwrap();
        let rejected = &answer["partialSuccess"]["rejectedDataPoints"];
        assert!(rejected == 1 || rejected == "1", "{answer}");
        assert_eq!(
            rows("SELECT queue, `resource.service.name`, value FROM otlp_json.otel_metrics_gauge ORDER BY queue")
                .await,
            "a\tweb\t7\nb\tweb\t2.5\n"
        );
        assert_eq!(
            rows("SELECT value, aggregation_temporality, start_time_unix_nano FROM otlp_json.otel_metrics_sum")
                .await,
            format!("3\tdelta\t{T0}\n")
        );
        assert_eq!(
            rows("SELECT count, bucket_counts, explicit_bounds, aggregation_temporality FROM otlp_json.otel_metrics_histogram")
                .await,
            "2\t[1,1]\t[1]\tcumulative\n"
        );
    })
}

fn grpc_export_is_stored_in_the_named_database() {
    run(async {
        wait_ready().await;
        let mut client = MetricsServiceClient::connect(grpc_base()).await.unwrap();
        let mut call = tonic::Request::new(every_kind());
        let metadata = call.metadata_mut();
        metadata.insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
        metadata.insert("x-chingest-database", "otlp_grpc".parse().unwrap());
        let response = client.export(call).await.unwrap().into_inner();
        assert_eq!(response.partial_success.unwrap().rejected_data_points, 3);
        assert_eq!(
            rows("SELECT metric_name, value FROM otlp_grpc.otel_metrics_sum").await,
            "requests\t10\n"
        );
        // Without a token: UNAUTHENTICATED, and nothing stored.
        let refused = client
            .export(tonic::Request::new(every_kind()))
            .await
            .unwrap_err();
        assert_eq!(refused.code(), tonic::Code::Unauthenticated);
        assert_eq!(
            rows("SELECT count() FROM otlp_grpc.otel_metrics_sum").await,
            "1\n"
        );
    })
}

/// Errors are a `google.rpc.Status` in the request's encoding.
fn errors_answer_in_the_request_encoding() {
    #[derive(Clone, PartialEq, prost::Message)]
    struct RpcStatus {
        #[prost(int32, tag = "1")]
        code: i32,
        #[prost(string, tag = "2")]
        message: String,
    }
    run(async {
        wait_ready().await;
        let post = |content_type: &'static str, body: Vec<u8>, token: bool| {
            let mut request = client()
                .post(format!("{}/v1/metrics?db=otlp_err", base()))
                .header("Content-Type", content_type)
                .body(body);
            if token {
                request = request.bearer_auth(TOKEN);
            }
            request.send()
        };
        let r = post("application/x-protobuf", b"\xff\xff".to_vec(), true)
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        let status = RpcStatus::decode(r.bytes().await.unwrap()).unwrap();
        assert_eq!(status.code, tonic::Code::InvalidArgument as i32);
        assert!(
            status.message.contains("ExportMetricsServiceRequest"),
            "{}",
            status.message
        );

        let r = post(
            "application/json",
            b"{\"resourceMetrics\": 5}".to_vec(),
            true,
        )
        .await
        .unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        let status: serde_json::Value = r.json().await.unwrap();
        assert_eq!(status["code"], 3);
        assert!(
            status["message"].as_str().unwrap().contains("OTLP JSON"),
            "{status}"
        );

        let r = post("text/plain", b"x".to_vec(), true).await.unwrap();
        assert_eq!(r.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
        let r = post(
            "application/x-protobuf",
            every_kind().encode_to_vec(),
            false,
        )
        .await
        .unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        let status = RpcStatus::decode(r.bytes().await.unwrap()).unwrap();
        assert_eq!(status.code, tonic::Code::Unauthenticated as i32);
        // Nothing of the refused requests was stored.
        assert_eq!(
            rows("SELECT count() FROM system.columns WHERE database = 'otlp_err'").await,
            "0\n"
        );
    })
}

/// Gauges and sums read by PromQL: the metric's Prometheus name (unit
/// suffix, `_total` for a monotonic sum), tags as valid labels, `job` from
/// the service.
fn gauges_and_sums_are_promql_metrics() {
    run(async {
        wait_ready().await;
        assert_eq!(
            post_every_kind("db=otlp_promql&durability=visible").await,
            StatusCode::OK
        );
        let get = |path: String| async move {
            let r = client()
                .get(format!("{}{path}", base()))
                .bearer_auth(TOKEN)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::OK);
            r.json::<serde_json::Value>().await.unwrap()
        };
        let series = get("/api/v1/series?db=otlp_promql&match[]={__name__=~\".%2B\"}".into()).await;
        let shared = serde_json::json!({
            "job": "checkout",
            "resource_host_cores": "8",
            "resource_service_name": "checkout",
            "scope_name": "shop",
            "scope_version": "1.2",
        });
        let with = |extra: serde_json::Value| {
            let mut labels = shared.clone();
            labels
                .as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            labels
        };
        assert_eq!(
            series["data"],
            serde_json::json!([
                with(serde_json::json!({"__name__": "cpu_temp_celsius", "core": "0"})),
                with(serde_json::json!({"__name__": "cpu_temp_celsius", "core": "1"})),
                with(serde_json::json!({"__name__": "requests_total", "method": "GET"})),
            ])
        );
        let at = T1 / 1_000_000_000;
        let total = get(format!(
            "/api/v1/query?db=otlp_promql&query=sum(requests_total)&time={at}"
        ))
        .await;
        assert_eq!(total["data"]["result"][0]["value"][1], "10");
        let hot = get(format!(
            "/api/v1/query?db=otlp_promql&query=max%20by%20(job)%20(cpu_temp_celsius)&time={at}"
        ))
        .await;
        assert_eq!(
            hot["data"]["result"],
            serde_json::json!([{"metric": {"job": "checkout"}, "value": [at, "41.5"]}])
        );
    });
}
