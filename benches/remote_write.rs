//! The CPU side of a Prometheus remote write 1.0 request on the server:
//! reading the `WriteRequest` (`Decoded::v1`) and building its Arrow
//! tables (`prometheus::tables`), without the write. The request is what
//! Prometheus sends for a node-exporter scrape: 500 series of one sample
//! each, 4 labels, sorted by name (`pushit prom`'s load).
//!
//! Throughput is in samples.
//!
//! The allocator is the server's (jemalloc), so allocation costs what it
//! costs there.

use chingest_codecs::prometheus::{tables, Decoded};
use chingest_proto::prometheus::{Label, Sample, TimeSeries, WriteRequest};
use criterion::{Criterion, Throughput};
use prost::Message;

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    let series = 500;
    let request = WriteRequest {
        timeseries: (0..series)
            .map(|s| TimeSeries {
                labels: [
                    ("__name__", format!("node_metric_{}_total", s / 10)),
                    ("cpu", (s % 10).to_string()),
                    ("instance", format!("host-{}:9100", s % 7)),
                    ("job", "node".to_owned()),
                ]
                .into_iter()
                .map(|(name, value)| Label {
                    name: name.into(),
                    value: value.into(),
                })
                .collect(),
                samples: vec![Sample {
                    value: s as f64,
                    timestamp: 1_451_606_400_000,
                }],
            })
            .collect(),
        metadata: Vec::new(),
    };
    let body = request.encode_to_vec();
    let mut criterion = Criterion::default().configure_from_args();
    let mut group = criterion.benchmark_group("remote_write");
    group.throughput(Throughput::Elements(series as u64));
    group.bench_function("decode 1.0", |b| {
        b.iter(|| Decoded::v1(&body).unwrap().sample_count())
    });
    group.bench_function("decode 1.0 and build tables", |b| {
        b.iter(|| tables(&Decoded::v1(&body).unwrap()).unwrap())
    });
    group.finish();
    criterion.final_summary();
}
