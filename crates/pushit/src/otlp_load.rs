//! The OTLP load `pushit otlp` sends and the `otlp` criterion bench
//! decodes: host metrics as an OpenTelemetry Collector exports them, a
//! resource per host (`service.name`, `host.name`) whose gauge metrics
//! have one point per `cpu`.

use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{
    metric::Data, number_data_point, Gauge, Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics,
};
use opentelemetry_proto::tonic::resource::v1::Resource;

/// Time between two collections of a host.
const INTERVAL_NS: u64 = 10_000_000_000;

fn text(key: &str, value: String) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value)),
        }),
        ..KeyValue::default()
    }
}

/// Host `host`'s collection number `scrape`: `points` gauge points, in
/// metrics of 10 (one per `cpu`), at the TSBS start plus `scrape`
/// intervals.
pub fn host_metrics(host: usize, scrape: usize, points: usize) -> ResourceMetrics {
    let start = tsbs::START_NS as u64;
    let time = start + scrape as u64 * INTERVAL_NS;
    let mut metrics = Vec::with_capacity(points.div_ceil(10));
    let mut left = points;
    for m in 0..points.div_ceil(10) {
        let data_points = (0..left.min(10))
            .map(|cpu| NumberDataPoint {
                attributes: vec![text("cpu", cpu.to_string())],
                start_time_unix_nano: start,
                time_unix_nano: time,
                // A bounded random walk's worth of variety.
                value: Some(number_data_point::Value::AsDouble(
                    ((host * 31 + m * 7 + cpu + scrape * 3) % 1000) as f64 / 10.0,
                )),
                ..NumberDataPoint::default()
            })
            .collect::<Vec<_>>();
        left -= data_points.len();
        metrics.push(Metric {
            name: format!("system.metric_{m}.utilization"),
            unit: "1".into(),
            data: Some(Data::Gauge(Gauge { data_points })),
            ..Metric::default()
        });
    }
    ResourceMetrics {
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
            metrics,
            ..ScopeMetrics::default()
        }],
        ..ResourceMetrics::default()
    }
}
