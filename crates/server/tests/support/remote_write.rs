//! Prometheus remote-write bodies for tests: series and their samples in,
//! a snappy-compressed `WriteRequest` out.

use chingest_proto::prometheus::{Label, Sample, TimeSeries, WriteRequest};
use prost::Message;

/// One series: its labels (`__name__` among them) and its samples as
/// `(timestamp in ms, value)`.
pub(crate) fn series(
    labels: &[(&str, String)],
    samples: impl IntoIterator<Item = (i64, f64)>,
) -> TimeSeries {
    TimeSeries {
        labels: labels
            .iter()
            .map(|(name, value)| Label {
                name: (*name).to_owned().into(),
                value: value.clone().into(),
            })
            .collect(),
        samples: samples
            .into_iter()
            .map(|(timestamp, value)| Sample { value, timestamp })
            .collect(),
    }
}

/// Series `name{instance="i<n>", job="j"}` with `samples`.
pub(crate) fn instance_series(
    name: &str,
    n: usize,
    samples: impl IntoIterator<Item = (i64, f64)>,
) -> TimeSeries {
    let labels = [
        ("__name__", name.to_owned()),
        ("instance", format!("i{n}")),
        ("job", "j".to_owned()),
    ];
    series(&labels, samples)
}

/// The body of a remote write of `timeseries`, as Prometheus sends it.
pub(crate) fn body(timeseries: Vec<TimeSeries>) -> Vec<u8> {
    let request = WriteRequest {
        timeseries,
        metadata: Vec::new(),
    };
    snap::raw::Encoder::new()
        .compress_vec(&request.encode_to_vec())
        .expect("snappy compresses any input")
}
