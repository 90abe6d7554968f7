//! OTLP metrics in, Arrow tables out: an `ExportMetricsServiceRequest`
//! with a gauge, a sum and a histogram as the tables the server stores
//! (names, types and values of every column), and the points it refuses
//! counted, not stored.

mod support;

use chingest_codecs::otlp::{convert, Request, ResourceTags};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{
    metric::Data, number_data_point, AggregationTemporality, Gauge, Histogram, HistogramDataPoint,
    Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;
use support::check;

fn attribute(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.into())),
        }),
        ..KeyValue::default()
    }
}

fn metric(name: &str, description: &str, unit: &str, data: Data) -> Metric {
    Metric {
        name: name.into(),
        description: description.into(),
        unit: unit.into(),
        data: Some(data),
        ..Metric::default()
    }
}

#[test]
fn a_gauge_a_sum_and_a_histogram_are_a_table_each_after_their_metadata() {
    let gauge = Data::Gauge(Gauge {
        data_points: vec![
            NumberDataPoint {
                attributes: vec![attribute("room", "a")],
                time_unix_nano: 1_000,
                value: Some(number_data_point::Value::AsDouble(21.5)),
                ..NumberDataPoint::default()
            },
            // No value: refused, and counted.
            NumberDataPoint {
                time_unix_nano: 1_000,
                ..NumberDataPoint::default()
            },
        ],
    });
    let sum = Data::Sum(Sum {
        data_points: vec![NumberDataPoint {
            attributes: vec![attribute("code", "200")],
            start_time_unix_nano: 500,
            time_unix_nano: 1_000,
            value: Some(number_data_point::Value::AsInt(7)),
            ..NumberDataPoint::default()
        }],
        aggregation_temporality: AggregationTemporality::Cumulative as i32,
        is_monotonic: true,
    });
    let histogram = Data::Histogram(Histogram {
        data_points: vec![HistogramDataPoint {
            time_unix_nano: 2_000,
            count: 3,
            sum: Some(0.6),
            bucket_counts: vec![1, 2],
            explicit_bounds: vec![0.25],
            min: Some(0.1),
            max: Some(0.3),
            flags: 1,
            ..HistogramDataPoint::default()
        }],
        aggregation_temporality: AggregationTemporality::Delta as i32,
    });
    let request = ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(Resource {
                attributes: vec![attribute("service.name", "api")],
                ..Resource::default()
            }),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(InstrumentationScope {
                    name: "meter".into(),
                    version: "1.0".into(),
                    ..InstrumentationScope::default()
                }),
                metrics: vec![
                    metric("temperature", "Room temperature.", "Cel", gauge),
                    metric("requests", "", "1", sum),
                    metric("latency", "", "s", histogram),
                ],
                ..ScopeMetrics::default()
            }],
            ..ResourceMetrics::default()
        }],
    };
    let message = request.encode_to_vec();
    let request = Request::decode(&message).unwrap();
    let resources = ResourceTags::of(&request);
    let converted = convert(&request, &resources).unwrap();
    assert_eq!(converted.rejected, 1);
    assert_eq!(
        converted.message,
        r#"1 data points rejected; the first: metric "temperature": a number point without a value"#
    );
    check(
        &converted.tables,
        &[
            &[
                "otel_metrics_metadata newest wins",
                "series metric_name=latency × 1",
                "series metric_name=requests × 1",
                "series metric_name=temperature × 1",
                "time: Int64 = [0, 0, 0]",
                "type: Utf8 = [histogram, sum, gauge]",
                "description: Utf8 = [, , Room temperature.]",
                "unit: Utf8 = [s, 1, Cel]",
            ],
            &[
                "otel_metrics_gauge",
                "series metric_name=temperature,resource.service.name=api,room=a,scope.name=meter,scope.version=1.0 × 1",
                "time: Int64 = [1000]",
                "value: Float64 = [21.5]",
                "start_time_unix_nano: Int64 = [null]",
                "flags: UInt64 = [0]",
            ],
            &[
                "otel_metrics_sum",
                "series code=200,metric_name=requests,resource.service.name=api,scope.name=meter,scope.version=1.0 × 1",
                "time: Int64 = [1000]",
                "value: Float64 = [7.0]",
                "aggregation_temporality: Utf8 = [cumulative]",
                "is_monotonic: Boolean = [true]",
                "start_time_unix_nano: Int64 = [500]",
                "flags: UInt64 = [0]",
            ],
            &[
                "otel_metrics_histogram",
                "series metric_name=latency,resource.service.name=api,scope.name=meter,scope.version=1.0 × 1",
                "time: Int64 = [2000]",
                "count: UInt64 = [3]",
                "sum: Float64 = [0.6]",
                "min: Float64 = [0.1]",
                "max: Float64 = [0.3]",
                "bucket_counts: List(UInt64) = [[1, 2]]",
                "explicit_bounds: List(Float64) = [[0.25]]",
                "aggregation_temporality: Utf8 = [delta]",
                "start_time_unix_nano: Int64 = [null]",
                "flags: UInt64 = [1]",
            ],
        ],
    );
}

#[test]
fn a_request_of_refused_points_is_no_table() {
    let request = ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            scope_metrics: vec![ScopeMetrics {
                metrics: vec![Metric {
                    name: "empty".into(),
                    ..Metric::default()
                }],
                ..ScopeMetrics::default()
            }],
            ..ResourceMetrics::default()
        }],
    };
    let message = request.encode_to_vec();
    let request = Request::decode(&message).unwrap();
    let resources = ResourceTags::of(&request);
    let converted = convert(&request, &resources).unwrap();
    assert!(converted.tables.is_empty());
    assert_eq!(converted.rejected, 1);
    assert_eq!(
        converted.message,
        r#"1 data points rejected; the first: metric "empty": a metric without data (gauge, sum, …)"#
    );
}
