//! Prometheus remote write 2.0 messages (`io.prometheus.write.v2.Request`),
//! written from the specification's field numbers
//! (<https://prometheus.io/docs/specs/prw/remote_write_spec_2_0/>). Every
//! string of a request is interned in its `symbols` table; series, exemplars
//! and metadata refer to strings by their index there. Samples are 1.0's
//! [`Sample`](super::Sample) and metric types 1.0's
//! [`MetricType`](super::MetricType) (same field numbers and values).

use prost::bytes::Bytes;

use super::{MetricType, Sample};

/// A batch of series.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Request {
    /// The strings the request refers to by index; the first is `""`.
    /// Bytes rather than `String`: the receiver checks UTF-8 once per
    /// symbol, and each is a slice of the decoded buffer.
    #[prost(bytes = "bytes", repeated, tag = "4")]
    pub symbols: Vec<Bytes>,
    /// The series.
    #[prost(message, repeated, tag = "5")]
    pub timeseries: Vec<TimeSeries>,
}

/// One series: labels, then float samples or native histograms (never
/// both), exemplars, metadata and the created timestamp.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TimeSeries {
    /// Label name and value pairs, as indices into `symbols`.
    #[prost(uint32, repeated, tag = "1")]
    pub labels_refs: Vec<u32>,
    /// Float samples, in time order.
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<Sample>,
    /// Native histogram samples, in time order.
    #[prost(message, repeated, tag = "3")]
    pub histograms: Vec<Histogram>,
    /// Exemplars of the series' samples.
    #[prost(message, repeated, tag = "4")]
    pub exemplars: Vec<Exemplar>,
    /// Type, help and unit of the series' metric.
    #[prost(message, optional, tag = "5")]
    pub metadata: Option<Metadata>,
    /// When a counter or histogram started counting, in ms (0: not sent).
    #[prost(int64, tag = "6")]
    pub created_timestamp: i64,
}

/// An example observation of a series (typically carrying a trace id).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Exemplar {
    /// Label name and value pairs, as indices into `symbols`.
    #[prost(uint32, repeated, tag = "1")]
    pub labels_refs: Vec<u32>,
    /// The observed value.
    #[prost(double, tag = "2")]
    pub value: f64,
    /// Milliseconds since the epoch (0: not sent).
    #[prost(int64, tag = "3")]
    pub timestamp: i64,
}

/// A series' metric metadata.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Metadata {
    /// The metric's type (0: not specified).
    #[prost(enumeration = "MetricType", tag = "1")]
    pub r#type: i32,
    /// Its help text, as an index into `symbols`.
    #[prost(uint32, tag = "3")]
    pub help_ref: u32,
    /// Its unit, as an index into `symbols`.
    #[prost(uint32, tag = "4")]
    pub unit_ref: u32,
}

/// A native histogram sample, with integer counts (`*_deltas`, each
/// bucket's count as the difference to the previous bucket's) or float
/// counts (`*_counts`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Histogram {
    /// Observations in the histogram.
    #[prost(oneof = "Count", tags = "1, 2")]
    pub count: Option<Count>,
    /// Sum of the observations.
    #[prost(double, tag = "3")]
    pub sum: f64,
    /// The bucket layout: -4..=8 exponential (each power of two split
    /// into 2^schema buckets), -53 the custom bounds in `custom_values`.
    #[prost(sint32, tag = "4")]
    pub schema: i32,
    /// Width of the zero bucket.
    #[prost(double, tag = "5")]
    pub zero_threshold: f64,
    /// Observations in the zero bucket.
    #[prost(oneof = "ZeroCount", tags = "6, 7")]
    pub zero_count: Option<ZeroCount>,
    /// Runs of populated negative buckets.
    #[prost(message, repeated, tag = "8")]
    pub negative_spans: Vec<BucketSpan>,
    /// Integer counts of the negative buckets, delta-encoded.
    #[prost(sint64, repeated, tag = "9")]
    pub negative_deltas: Vec<i64>,
    /// Float counts of the negative buckets.
    #[prost(double, repeated, tag = "10")]
    pub negative_counts: Vec<f64>,
    /// Runs of populated positive buckets.
    #[prost(message, repeated, tag = "11")]
    pub positive_spans: Vec<BucketSpan>,
    /// Integer counts of the positive buckets, delta-encoded.
    #[prost(sint64, repeated, tag = "12")]
    pub positive_deltas: Vec<i64>,
    /// Float counts of the positive buckets.
    #[prost(double, repeated, tag = "13")]
    pub positive_counts: Vec<f64>,
    /// Whether a counter reset happened ([`ResetHint`]).
    #[prost(enumeration = "ResetHint", tag = "14")]
    pub reset_hint: i32,
    /// Milliseconds since the epoch.
    #[prost(int64, tag = "15")]
    pub timestamp: i64,
    /// Upper bounds of the custom buckets (schema -53).
    #[prost(double, repeated, tag = "16")]
    pub custom_values: Vec<f64>,
}

/// A histogram's observation count: integer or float.
#[derive(Clone, Copy, PartialEq, prost::Oneof)]
pub enum Count {
    /// Integer count.
    #[prost(uint64, tag = "1")]
    Int(u64),
    /// Float count.
    #[prost(double, tag = "2")]
    Float(f64),
}

/// The zero bucket's count: integer or float.
#[derive(Clone, Copy, PartialEq, prost::Oneof)]
pub enum ZeroCount {
    /// Integer count.
    #[prost(uint64, tag = "6")]
    Int(u64),
    /// Float count.
    #[prost(double, tag = "7")]
    Float(f64),
}

/// A run of consecutive populated buckets.
#[derive(Clone, Copy, PartialEq, prost::Message)]
pub struct BucketSpan {
    /// Gap to the previous span's end (for the first span: its start).
    #[prost(sint32, tag = "1")]
    pub offset: i32,
    /// Buckets in the run.
    #[prost(uint32, tag = "2")]
    pub length: u32,
}

/// Whether a histogram follows a counter reset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum ResetHint {
    /// Not known: check the counts.
    Unspecified = 0,
    /// The first histogram after a reset.
    Yes = 1,
    /// No reset since the previous histogram.
    No = 2,
    /// A gauge histogram: resets do not apply.
    Gauge = 3,
}

impl ResetHint {
    /// Its name in lowercase (`unspecified`, `yes`, `no`, `gauge`).
    pub fn name(self) -> &'static str {
        match self {
            ResetHint::Unspecified => "unspecified",
            ResetHint::Yes => "yes",
            ResetHint::No => "no",
            ResetHint::Gauge => "gauge",
        }
    }
}
