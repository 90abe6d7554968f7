//! Prometheus remote write 1.0 messages (`prometheus.WriteRequest`), written
//! from the specification's field numbers
//! (<https://prometheus.io/docs/specs/prw/remote_write_spec/>). Fields a
//! receiver of 1.0 does not use (exemplars, native histograms) are left out:
//! protobuf decoding skips them. Remote write 2.0's messages are in [`v2`],
//! remote read's in [`read`].

pub mod read;
pub mod v2;

/// A batch of series, and the metadata of metric families.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WriteRequest {
    /// The series and their samples.
    #[prost(message, repeated, tag = "1")]
    pub timeseries: Vec<TimeSeries>,
    /// Type, help and unit of metric families (sent about once a minute,
    /// often in requests of their own).
    #[prost(message, repeated, tag = "3")]
    pub metadata: Vec<MetricMetadata>,
}

/// One series: its labels (`__name__` among them) and samples.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TimeSeries {
    /// The labels, sorted by name.
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<Label>,
    /// The samples, in time order.
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<Sample>,
}

/// A label. Name and value are UTF-8 (checked by the receiver): kept as
/// bytes, they are slices of the decoded buffer instead of a string
/// allocated for each.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Label {
    /// Its name.
    #[prost(bytes = "bytes", tag = "1")]
    pub name: prost::bytes::Bytes,
    /// Its value.
    #[prost(bytes = "bytes", tag = "2")]
    pub value: prost::bytes::Bytes,
}

/// A sample.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    /// The value (a special NaN marks a stale series).
    #[prost(double, tag = "1")]
    pub value: f64,
    /// Milliseconds since the epoch.
    #[prost(int64, tag = "2")]
    pub timestamp: i64,
}

/// What a metric family is.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MetricMetadata {
    /// The family's type ([`MetricType`]).
    #[prost(enumeration = "MetricType", tag = "1")]
    pub r#type: i32,
    /// The family's name.
    #[prost(string, tag = "2")]
    pub metric_family_name: String,
    /// Its help text.
    #[prost(string, tag = "4")]
    pub help: String,
    /// Its unit.
    #[prost(string, tag = "5")]
    pub unit: String,
}

/// Metric family types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum MetricType {
    /// Not known.
    Unknown = 0,
    /// A counter.
    Counter = 1,
    /// A gauge.
    Gauge = 2,
    /// A classic histogram.
    Histogram = 3,
    /// A gauge histogram.
    Gaugehistogram = 4,
    /// A summary.
    Summary = 5,
    /// An info metric.
    Info = 6,
    /// A state set.
    Stateset = 7,
}

impl MetricType {
    /// The name Prometheus shows for it (`counter`, `gauge`, …).
    pub fn name(self) -> &'static str {
        match self {
            MetricType::Unknown => "unknown",
            MetricType::Counter => "counter",
            MetricType::Gauge => "gauge",
            MetricType::Histogram => "histogram",
            MetricType::Gaugehistogram => "gaugehistogram",
            MetricType::Summary => "summary",
            MetricType::Info => "info",
            MetricType::Stateset => "stateset",
        }
    }
}
