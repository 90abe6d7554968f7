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
use prost::Message;
use pushit::otlp_load::host_metrics;

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    let (hosts, points_per_host) = (82, 100);
    let request = ExportMetricsServiceRequest {
        resource_metrics: (0..hosts)
            .map(|host| host_metrics(host, 1, points_per_host))
            .collect(),
    };
    let body = request.encode_to_vec();
    let mut criterion = Criterion::default().configure_from_args();
    let mut group = criterion.benchmark_group("otlp");
    group.throughput(Throughput::Elements((hosts * points_per_host) as u64));
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
