//! Remote write requests in, Arrow tables out: a 1.0 `WriteRequest` and a
//! 2.0 `Request` as the tables the server stores (names, types and values
//! of every column), and a request refused before any table is built.

mod support;

use chingest_codecs::prometheus::{tables, Decoded};
use chingest_codecs::Error;
use chingest_proto::prometheus::v2::{self, BucketSpan, Count, ResetHint, ZeroCount};
use chingest_proto::prometheus::{
    Label, MetricMetadata, MetricType, Sample, TimeSeries, WriteRequest,
};
use prost::Message;
use support::check;

fn label(name: &'static str, value: &'static str) -> Label {
    Label {
        name: name.into(),
        value: value.into(),
    }
}

fn sample(value: f64, timestamp: i64) -> Sample {
    Sample { value, timestamp }
}

#[test]
fn a_v1_request_is_one_table_of_samples_and_one_of_metadata() {
    let request = WriteRequest {
        timeseries: vec![
            TimeSeries {
                labels: vec![label("__name__", "up"), label("instance", "a:9100")],
                samples: vec![sample(1.0, 1_000)],
            },
            TimeSeries {
                labels: vec![
                    label("__name__", "http_requests_total"),
                    label("code", "200"),
                ],
                samples: vec![sample(1.0, 1_000), sample(2.0, 2_000)],
            },
        ],
        metadata: vec![MetricMetadata {
            r#type: MetricType::Counter as i32,
            metric_family_name: "http_requests_total".into(),
            help: "Requests served.".into(),
            unit: String::new(),
        }],
    };
    let encoded = request.encode_to_vec();
    let decoded = Decoded::v1(&encoded).unwrap();
    assert_eq!(decoded.sample_count(), 3);
    check(
        &tables(&decoded).unwrap(),
        &[
            &[
                "prometheus_metadata newest wins",
                "series metric=http_requests_total × 1",
                "time: Int64 = [0]",
                "type: Utf8 = [counter]",
                "help: Utf8 = [Requests served.]",
                "unit: Utf8 = []",
            ],
            &[
                "prometheus",
                "series __name__=up,instance=a:9100 × 1",
                "series __name__=http_requests_total,code=200 × 2",
                "time: Int64 = [1000000000, 1000000000, 2000000000]",
                "value: Float64 = [1.0, 1.0, 2.0]",
            ],
        ],
    );
}

#[test]
fn a_v2_request_fills_samples_histograms_exemplars_and_metadata() {
    let symbols = [
        "",
        "__name__",
        "http_requests_total",
        "job",
        "api",
        "Requests served.",
        "trace_id",
        "abc",
        "request_duration_seconds",
        "seconds",
    ];
    let request = v2::Request {
        symbols: symbols.iter().map(|s| (*s).into()).collect(),
        timeseries: vec![
            v2::TimeSeries {
                labels_refs: vec![1, 2, 3, 4],
                samples: vec![sample(5.0, 1_000)],
                // Without a timestamp: its series' newest sample's.
                exemplars: vec![v2::Exemplar {
                    labels_refs: vec![6, 7],
                    value: 1.0,
                    timestamp: 0,
                }],
                metadata: Some(v2::Metadata {
                    r#type: MetricType::Counter as i32,
                    help_ref: 5,
                    unit_ref: 0,
                }),
                created_timestamp: 500,
                ..v2::TimeSeries::default()
            },
            v2::TimeSeries {
                labels_refs: vec![1, 8, 3, 4],
                histograms: vec![v2::Histogram {
                    count: Some(Count::Int(3)),
                    sum: 0.6,
                    schema: 0,
                    zero_threshold: 0.001,
                    zero_count: Some(ZeroCount::Int(1)),
                    positive_spans: vec![BucketSpan {
                        offset: 0,
                        length: 2,
                    }],
                    positive_deltas: vec![1, 0],
                    reset_hint: ResetHint::No as i32,
                    timestamp: 2_000,
                    ..v2::Histogram::default()
                }],
                metadata: Some(v2::Metadata {
                    r#type: MetricType::Histogram as i32,
                    help_ref: 0,
                    unit_ref: 9,
                }),
                ..v2::TimeSeries::default()
            },
        ],
    };
    let decoded = Decoded::v2(&request).unwrap();
    assert_eq!(
        (
            decoded.sample_count(),
            decoded.histogram_count(),
            decoded.exemplar_count()
        ),
        (1, 1, 1)
    );
    check(
        &tables(&decoded).unwrap(),
        &[
            &[
                "prometheus_metadata newest wins",
                "series metric=http_requests_total × 1",
                "series metric=request_duration_seconds × 1",
                "time: Int64 = [0, 0]",
                "type: Utf8 = [counter, histogram]",
                "help: Utf8 = [Requests served., ]",
                "unit: Utf8 = [, seconds]",
            ],
            &[
                "prometheus",
                "series __name__=http_requests_total,job=api × 1",
                "time: Int64 = [1000000000]",
                "value: Float64 = [5.0]",
                "created_timestamp: Int64 = [500]",
            ],
            &[
                "prometheus_histograms",
                "series __name__=request_duration_seconds,job=api × 1",
                "time: Int64 = [2000000000]",
                "count: Float64 = [3.0]",
                "sum: Float64 = [0.6]",
                "schema: Int64 = [0]",
                "zero_threshold: Float64 = [0.001]",
                "zero_count: Float64 = [1.0]",
                "reset_hint: Utf8 = [no]",
                "positive_index: List(Int64) = [[0, 1]]",
                "positive_count: List(Float64) = [[1.0, 1.0]]",
                "negative_index: List(Int64) = [[]]",
                "negative_count: List(Float64) = [[]]",
                "custom_values: List(Float64) = [[]]",
            ],
            &[
                "prometheus_exemplars",
                "series __name__=http_requests_total,job=api × 1",
                "time: Int64 = [1000000000]",
                "value: Float64 = [1.0]",
                "trace_id: Utf8 = [abc]",
            ],
        ],
    );
}

#[test]
fn an_invalid_request_is_refused_whole() {
    let request = WriteRequest {
        timeseries: vec![TimeSeries {
            labels: vec![label("job", "api")],
            samples: vec![sample(1.0, 1_000)],
        }],
        metadata: Vec::new(),
    };
    let err = Decoded::v1(&request.encode_to_vec()).unwrap_err();
    assert!(
        matches!(&err, Error::Invalid(m) if m == "series 0 has no __name__ label"),
        "{err:?}"
    );
    let request = WriteRequest {
        timeseries: vec![TimeSeries {
            labels: vec![label("__name__", "up"), label("value", "x")],
            samples: vec![sample(1.0, 1_000)],
        }],
        metadata: Vec::new(),
    };
    let encoded = request.encode_to_vec();
    let decoded = Decoded::v1(&encoded).unwrap();
    assert_eq!(
        tables(&decoded).unwrap_err().to_string(),
        r#"label name "value" is not supported: it names a stored column"#
    );
}
