//! The CPU side of an OTLP metrics export on the server: decoding the
//! `ExportMetricsServiceRequest` and building its Arrow tables, without
//! the write. The request is what an OpenTelemetry Collector sends for
//! host metrics (`pushit otlp`'s load): 82 resources (hosts) of 100 gauge
//! points each, 10 metrics × 10 `cpu`s, ~8,192 points.
//!
//! Throughput is in points. The allocator is the server's (jemalloc), as
//! most of decoding's cost is allocation.

use chingest_codecs::otlp::{convert, Request, ResourceTags};
use criterion::{Criterion, Throughput};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{
    metric::Data, number_data_point, Gauge, Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn text(key: &str, value: String) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value)),
        }),
        ..KeyValue::default()
    }
}

fn main() {
    let (hosts, metrics, cpus) = (82, 10, 10);
    let time = 1_451_606_400_000_000_000u64;
    let resource = |host: usize| ResourceMetrics {
        resource: Some(Resource {
            attributes: vec![
                text("service.name", "hostmetrics".into()),
                text("host.name", format!("host-{host}")),
            ],
            ..Resource::default()
        }),
        scope_metrics: vec![ScopeMetrics {
            scope: Some(InstrumentationScope {
                name: "hostmetricsreceiver".into(),
                ..InstrumentationScope::default()
            }),
            metrics: (0..metrics)
                .map(|m| Metric {
                    name: format!("system.metric_{m}.utilization"),
                    unit: "1".into(),
                    data: Some(Data::Gauge(Gauge {
                        data_points: (0..cpus)
                            .map(|cpu| NumberDataPoint {
                                attributes: vec![text("cpu", cpu.to_string())],
                                start_time_unix_nano: time,
                                time_unix_nano: time + 10_000_000_000,
                                value: Some(number_data_point::Value::AsDouble(
                                    ((host * 31 + m * 7 + cpu) % 1000) as f64 / 10.0,
                                )),
                                ..NumberDataPoint::default()
                            })
                            .collect(),
                    })),
                    ..Metric::default()
                })
                .collect(),
            ..ScopeMetrics::default()
        }],
        ..ResourceMetrics::default()
    };
    let request = ExportMetricsServiceRequest {
        resource_metrics: (0..hosts).map(resource).collect(),
    };
    let body = request.encode_to_vec();
    let mut criterion = Criterion::default().configure_from_args();
    let mut group = criterion.benchmark_group("otlp");
    group.throughput(Throughput::Elements((hosts * metrics * cpus) as u64));
    group.bench_function("decode", |b| {
        b.iter(|| Request::decode(&body).unwrap().resource_metrics.len())
    });
    group.bench_function("decode and build tables", |b| {
        b.iter(|| {
            let request = Request::decode(&body).unwrap();
            let resources = ResourceTags::of(&request);
            convert(&request, &resources).unwrap().tables.len()
        })
    });
    group.finish();
    criterion.final_summary();
}
