//! PromQL reads what the codecs write: requests encoded as senders do,
//! decoded into tables by `chingest_codecs` as the server stores them, and
//! each table's measurement, value field and naming tags checked against
//! how PromQL reads it ([`naming::shape`]). A measurement, field or tag
//! renamed on one side only (or a new measurement PromQL would misread as
//! plain metrics) fails here instead of emptying PromQL's answers.

use std::collections::BTreeMap;

use arrow::datatypes::DataType;
use chingest_codecs::{otlp, prometheus as remote_write, Table};
use chingest_promql::naming::{self, Shape};
use chingest_proto::prometheus::v2::{self, Count, ZeroCount};
use chingest_proto::prometheus::{Label, MetricMetadata, Sample, TimeSeries, WriteRequest};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{
    metric::Data, number_data_point, summary_data_point::ValueAtQuantile, AggregationTemporality,
    Gauge, Histogram, HistogramDataPoint, Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics,
    Sum, Summary, SummaryDataPoint,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;

/// The shape PromQL gives each table's measurement, by measurement.
fn shapes(tables: &[Table<'_>]) -> BTreeMap<&'static str, Shape> {
    tables
        .iter()
        .map(|t| (t.measurement, naming::shape(t.measurement)))
        .collect()
}

/// The table of `measurement`.
fn table<'t, 'a>(tables: &'t [Table<'a>], measurement: &str) -> &'t Table<'a> {
    tables
        .iter()
        .find(|t| t.measurement == measurement)
        .unwrap_or_else(|| panic!("no table {measurement}"))
}

/// Whether `table` has a Float64 column `field`.
fn has_float_field(table: &Table<'_>, field: &str) -> bool {
    table
        .batch
        .schema()
        .column_with_name(field)
        .is_some_and(|(_, f)| f.data_type() == &DataType::Float64)
}

/// Whether every series of `table` has tag `name`.
fn every_series_has_tag(table: &Table<'_>, name: &str) -> bool {
    let mut tags = table.tags.iter();
    table.series.iter().all(|&(count, _)| {
        let mine: Vec<_> = tags.by_ref().take(count).collect();
        mine.iter().any(|(k, _)| *k == name)
    })
}

#[test]
fn remote_write_samples_are_read_by_their_name_tag_and_the_rest_not_as_metrics() {
    let label = |name: &'static str, value: &'static str| Label {
        name: name.into(),
        value: value.into(),
    };
    let v1 = WriteRequest {
        timeseries: vec![TimeSeries {
            labels: vec![label("__name__", "up"), label("job", "node")],
            samples: vec![Sample {
                value: 1.0,
                timestamp: 1_000,
            }],
        }],
        metadata: vec![MetricMetadata {
            r#type: 1,
            metric_family_name: "up".into(),
            help: "Up.".into(),
            unit: String::new(),
        }],
    }
    .encode_to_vec();
    let decoded = remote_write::Decoded::v1(&v1).unwrap();
    let tables = remote_write::tables(&decoded).unwrap();
    assert_eq!(
        shapes(&tables),
        BTreeMap::from([
            (remote_write::METADATA, Shape::Other),
            (remote_write::SAMPLES, Shape::RemoteWrite),
        ])
    );
    let samples = table(&tables, remote_write::SAMPLES);
    assert!(has_float_field(samples, remote_write::VALUE));
    assert!(every_series_has_tag(samples, "__name__"));
    let metadata = table(&tables, remote_write::METADATA);
    assert!(every_series_has_tag(
        metadata,
        remote_write::METADATA_METRIC
    ));
    for field in remote_write::METADATA_FIELDS {
        assert!(metadata.batch.column_by_name(field).is_some(), "{field}");
    }

    // 2.0's histograms and exemplars: other shapes, never plain metrics.
    let symbols = ["", "__name__", "requests", "trace_id", "abc", "latency"];
    let v2 = v2::Request {
        symbols: symbols.iter().map(|s| (*s).into()).collect(),
        timeseries: vec![
            v2::TimeSeries {
                labels_refs: vec![1, 2],
                samples: vec![Sample {
                    value: 0.5,
                    timestamp: 1_000,
                }],
                exemplars: vec![v2::Exemplar {
                    labels_refs: vec![3, 4],
                    value: 0.5,
                    timestamp: 1_000,
                }],
                ..v2::TimeSeries::default()
            },
            v2::TimeSeries {
                labels_refs: vec![1, 5],
                histograms: vec![v2::Histogram {
                    count: Some(Count::Int(1)),
                    zero_count: Some(ZeroCount::Int(1)),
                    timestamp: 2_000,
                    ..v2::Histogram::default()
                }],
                ..v2::TimeSeries::default()
            },
        ],
    };
    let decoded = remote_write::Decoded::v2(&v2).unwrap();
    let tables = remote_write::tables(&decoded).unwrap();
    assert_eq!(
        shapes(&tables),
        BTreeMap::from([
            (remote_write::EXEMPLARS, Shape::Other),
            (remote_write::HISTOGRAMS, Shape::Other),
            (remote_write::SAMPLES, Shape::RemoteWrite),
        ])
    );
    // Exemplars are read by their series' labels, their value as samples'.
    let exemplars = table(&tables, remote_write::EXEMPLARS);
    assert!(has_float_field(exemplars, remote_write::VALUE));
    assert!(every_series_has_tag(exemplars, "__name__"));
}

fn attribute(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.into())),
        }),
        ..KeyValue::default()
    }
}

fn metric(name: &str, unit: &str, data: Data) -> Metric {
    Metric {
        name: name.into(),
        unit: unit.into(),
        data: Some(data),
        ..Metric::default()
    }
}

#[test]
fn otlp_gauges_and_sums_are_read_by_their_metric_name_and_the_rest_not_as_metrics() {
    let point = |value: f64| NumberDataPoint {
        time_unix_nano: 1_000,
        value: Some(number_data_point::Value::AsDouble(value)),
        ..NumberDataPoint::default()
    };
    let metrics = vec![
        metric(
            "room.temperature",
            "Cel",
            Data::Gauge(Gauge {
                data_points: vec![point(21.5)],
            }),
        ),
        metric(
            "http.server.requests",
            "{request}",
            Data::Sum(Sum {
                data_points: vec![point(7.0)],
                aggregation_temporality: AggregationTemporality::Cumulative as i32,
                is_monotonic: true,
            }),
        ),
        metric(
            "http.server.duration",
            "s",
            Data::Histogram(Histogram {
                data_points: vec![HistogramDataPoint {
                    time_unix_nano: 1_000,
                    count: 1,
                    bucket_counts: vec![1],
                    ..HistogramDataPoint::default()
                }],
                aggregation_temporality: AggregationTemporality::Delta as i32,
            }),
        ),
        metric(
            "rpc.duration",
            "s",
            Data::Summary(Summary {
                data_points: vec![SummaryDataPoint {
                    time_unix_nano: 1_000,
                    count: 1,
                    quantile_values: vec![ValueAtQuantile {
                        quantile: 0.5,
                        value: 0.1,
                    }],
                    ..SummaryDataPoint::default()
                }],
            }),
        ),
    ];
    let request = ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(Resource {
                attributes: vec![attribute("service.name", "api")],
                ..Resource::default()
            }),
            scope_metrics: vec![ScopeMetrics {
                metrics,
                ..ScopeMetrics::default()
            }],
            ..ResourceMetrics::default()
        }],
    }
    .encode_to_vec();
    let request = otlp::Request::decode(&request).unwrap();
    let resources = otlp::ResourceTags::of(&request);
    let converted = otlp::convert(&request, &resources).unwrap();
    assert_eq!(converted.rejected, 0, "{}", converted.message);
    let tables = converted.tables;
    assert_eq!(
        shapes(&tables),
        BTreeMap::from([
            (otlp::GAUGE, Shape::Otlp { gauge: true }),
            (otlp::HISTOGRAM, Shape::Other),
            (otlp::METADATA, Shape::Other),
            (otlp::SUM, Shape::Otlp { gauge: false }),
            (otlp::SUMMARY, Shape::Other),
        ])
    );
    for measurement in [otlp::GAUGE, otlp::SUM] {
        let points = table(&tables, measurement);
        assert!(has_float_field(points, otlp::VALUE), "{measurement}");
        assert!(every_series_has_tag(points, otlp::METRIC_NAME));
        // `job` comes from the service's resource attribute.
        let service = points
            .tags
            .iter()
            .find(|(k, _)| otlp::resource_attribute(k) == Some("service.name"));
        assert_eq!(service.map(|(_, v)| v.as_ref()), Some("api"));
    }
    let sums = table(&tables, otlp::SUM);
    assert!(sums.batch.column_by_name(otlp::IS_MONOTONIC).is_some());
    // Units, which name the metric, come from the metadata.
    let metadata = table(&tables, otlp::METADATA);
    assert!(every_series_has_tag(metadata, otlp::METRIC_NAME));
    let [_, _, unit] = otlp::METADATA_FIELDS;
    assert!(metadata.batch.column_by_name(unit).is_some());
    assert_eq!(
        naming::otlp_metric_name("http.server.requests", "{request}", false, true),
        "http_server_requests_total"
    );
}
