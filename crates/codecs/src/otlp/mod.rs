//! OTLP metrics (`ExportMetricsServiceRequest`) as Arrow batches, whichever
//! transport brought them (the server's OTLP/HTTP and OTLP/gRPC share
//! this). No I/O.
//!
//! Data model: one measurement per metric kind, named after the tables of
//! the OpenTelemetry Collector's ClickHouse exporter, in the series_id
//! layout every other protocol uses:
//!
//! | measurement | fields |
//! |---|---|
//! | `otel_metrics_gauge` | `value`, `start_time_unix_nano`, `flags` |
//! | `otel_metrics_sum` | `value`, `start_time_unix_nano`, `aggregation_temporality`, `is_monotonic`, `flags` |
//! | `otel_metrics_histogram` | `count`, `sum`, `min`, `max`, `bucket_counts`, `explicit_bounds`, `start_time_unix_nano`, `aggregation_temporality`, `flags` |
//! | `otel_metrics_exponential_histogram` | `count`, `sum`, `min`, `max`, `scale`, `zero_count`, `zero_threshold`, `positive_offset`, `positive_bucket_counts`, `negative_offset`, `negative_bucket_counts`, `start_time_unix_nano`, `aggregation_temporality`, `flags` |
//! | `otel_metrics_summary` | `count`, `sum`, `quantiles`, `quantile_values`, `start_time_unix_nano`, `flags` |
//! | `otel_metrics_metadata` | `type`, `description`, `unit` (tag `metric_name`, time 0, newest wins) |
//!
//! A point's tags: `metric_name`, the resource's attributes as
//! `resource.<key>`, `scope.name` and `scope.version`, and the point's own
//! attributes under their keys. Non-string attribute values are written as
//! text (JSON for arrays and maps, hex for bytes). Numbers are Float64
//! (an integer point too, as the exporter stores them); exemplars are not
//! stored. A point without a time, without a value, or with an attribute
//! named like one of its columns (or repeating another tag) is rejected
//! and counted in the response's `partial_success`; the rest are stored.
//!
//! The names of the measurements, [`METRIC_NAME`], [`VALUE`],
//! [`IS_MONOTONIC`], [`METADATA_FIELDS`] and the resource tags
//! ([`resource_tag`]) are the contract with readers (PromQL names OTLP's
//! series by them): they are defined here and nowhere else.
//!
//! The request is read in place ([`read`]): [`Request::decode`], then
//! [`ResourceTags::of`] and [`convert`]. A request in OTLP's JSON encoding
//! is first made protobuf by [`protobuf_from_json`].

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BooleanBuilder, Float64Builder, Int64Builder, ListBuilder, StringBuilder,
    UInt64Builder,
};

use crate::error::Result;
use crate::table::{metadata_table, Table, Tag};

pub mod read;

use crate::error::Error;

pub use read::Request;
use read::{
    AnyValue, Data, ExponentialHistogramDataPoint, HistogramDataPoint, NumberDataPoint,
    PointCommon, SummaryDataPoint,
};

/// The protobuf encoding of an `ExportMetricsServiceRequest` in OTLP's
/// JSON encoding (lowerCamelCase keys, 64-bit integers as strings or
/// numbers): read into the generated messages, then encoded, so both
/// encodings have one reader.
pub fn protobuf_from_json(json: &[u8]) -> Result<Vec<u8>> {
    use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
    use prost::Message as _;
    let request: ExportMetricsServiceRequest = serde_json::from_slice(json)
        .map_err(|e| Error::Invalid(format!("not an OTLP JSON metrics request: {e}")))?;
    Ok(request.encode_to_vec())
}

/// Measurement of gauge points.
pub const GAUGE: &str = "otel_metrics_gauge";
/// Measurement of sum points.
pub const SUM: &str = "otel_metrics_sum";
/// Measurement of histogram points.
pub const HISTOGRAM: &str = "otel_metrics_histogram";
/// Measurement of exponential histogram points.
pub const EXPONENTIAL_HISTOGRAM: &str = "otel_metrics_exponential_histogram";
/// Measurement of summary points.
pub const SUMMARY: &str = "otel_metrics_summary";
/// Measurement of metric metadata.
pub const METADATA: &str = "otel_metrics_metadata";
/// Every measurement an export fills.
pub const MEASUREMENTS: [&str; 6] = [
    GAUGE,
    SUM,
    HISTOGRAM,
    EXPONENTIAL_HISTOGRAM,
    SUMMARY,
    METADATA,
];

/// The tag holding a point's metric name (OTLP's, as sent), and
/// [`METADATA`]'s metric.
pub const METRIC_NAME: &str = "metric_name";
/// The field of [`GAUGE`] and [`SUM`] holding a point's value.
pub const VALUE: &str = "value";
/// The field of [`SUM`] saying whether the sum only grows.
pub const IS_MONOTONIC: &str = "is_monotonic";
/// The fields of [`METADATA`]: the metric's kind, description and unit.
pub const METADATA_FIELDS: [&str; 3] = ["type", "description", "unit"];

/// What a resource attribute's tag starts with.
const RESOURCE_PREFIX: &str = "resource.";

/// The tag of resource attribute `key` (`service.name` →
/// `resource.service.name`).
pub fn resource_tag(key: &str) -> String {
    format!("{RESOURCE_PREFIX}{key}")
}

/// The resource attribute a tag holds, if it holds one (the inverse of
/// [`resource_tag`]).
pub fn resource_attribute(tag: &str) -> Option<&str> {
    tag.strip_prefix(RESOURCE_PREFIX)
}

/// A request as batches, and what of it was refused.
#[derive(Debug, Default)]
pub struct Converted<'a> {
    /// One batch per measurement with points, metadata first.
    pub tables: Vec<Table<'a>>,
    /// Data points refused.
    pub rejected: i64,
    /// Why the first refused point was refused, and how many were.
    pub message: String,
}

/// Every resource's attributes of a request as tags (`resource.<key>`),
/// made before [`convert`]: every point of the resource borrows them.
#[derive(Debug)]
pub struct ResourceTags(Vec<Vec<(String, String)>>);

impl ResourceTags {
    /// The tags of `request`'s resources.
    pub fn of(request: &Request<'_>) -> ResourceTags {
        let tags = request
            .resource_metrics
            .iter()
            .map(|rm| {
                rm.attributes
                    .iter()
                    .map(|kv| (resource_tag(kv.key), any_text(&kv.value).into_owned()))
                    .collect()
            })
            .collect();
        ResourceTags(tags)
    }
}

/// Converts `request`, whose resources' tags are `resources`: every valid
/// data point becomes a row of its kind's measurement; the others are
/// counted in [`Converted::rejected`].
pub fn convert<'a>(request: &'a Request<'a>, resources: &'a ResourceTags) -> Result<Converted<'a>> {
    let mut kinds = Kinds::default();
    let mut rejected = Rejected::default();
    let mut metadata: BTreeMap<&str, (&'static str, &str, &str)> = BTreeMap::new();
    for (rm, resource_tags) in request.resource_metrics.iter().zip(&resources.0) {
        for sm in &rm.scope_metrics {
            let mut context: Vec<(&str, Cow<'_, str>)> = resource_tags
                .iter()
                .map(|(k, v)| (k.as_str(), Cow::Borrowed(v.as_str())))
                .collect();
            for (key, value) in [("scope.name", sm.name), ("scope.version", sm.version)] {
                if !value.is_empty() {
                    context.push((key, Cow::Borrowed(value)));
                }
            }
            // Sorted once here, so that a point's tags are sorted (as the
            // library hashes a series' tags) by inserting its own few.
            context.sort_by(|a, b| a.0.cmp(b.0));
            for metric in &sm.metrics {
                let Some(data) = &metric.data else {
                    rejected.add(metric.name, "a metric without data (gauge, sum, …)");
                    continue;
                };
                let base = Base {
                    context: &context,
                    metric_name: metric.name,
                };
                let r = &mut rejected;
                let kind = match data {
                    Data::Gauge(points) => kinds.gauge.push_all(&base, points, None, r),
                    Data::Sum(points, temporality, monotonic) => {
                        let shared = Some((*temporality, *monotonic));
                        kinds.sum.push_all(&base, points, shared, r)
                    }
                    Data::Histogram(points, temporality) => {
                        kinds.histogram.push_all(&base, points, *temporality, r)
                    }
                    Data::ExponentialHistogram(points, temporality) => {
                        kinds.exponential.push_all(&base, points, *temporality, r)
                    }
                    Data::Summary(points) => kinds.summary.push_all(&base, points, 0, r),
                };
                metadata.insert(metric.name, (kind, metric.description, metric.unit));
            }
        }
    }
    let mut converted = Converted {
        rejected: rejected.count,
        message: rejected.message(),
        ..Converted::default()
    };
    if kinds.rows() > 0 {
        let rows = metadata
            .into_iter()
            .map(|(name, (k, d, u))| (name, [k, d, u]));
        converted.tables.push(metadata_table(
            METADATA,
            METRIC_NAME,
            METADATA_FIELDS,
            rows,
        )?);
    }
    kinds.finish(&mut converted.tables)?;
    Ok(converted)
}

/// Refused points: how many, and the first reason.
#[derive(Debug, Default)]
struct Rejected {
    count: i64,
    first: Option<String>,
}

impl Rejected {
    fn add(&mut self, metric: &str, reason: &str) {
        self.count += 1;
        if self.first.is_none() {
            self.first = Some(format!("metric {metric:?}: {reason}"));
        }
    }

    fn message(&self) -> String {
        match &self.first {
            Some(first) => format!("{} data points rejected; the first: {first}", self.count),
            None => String::new(),
        }
    }
}

/// What every point of a metric shares: its resource's and scope's tags
/// and its name.
struct Base<'c, 'a> {
    context: &'c [Tag<'a>],
    metric_name: &'a str,
}

/// A data point of any kind, as the rows need it.
trait Point<'a> {
    fn common(&self) -> &PointCommon<'a>;
}

macro_rules! point {
    ($($t:ident),*) => {$(
        impl<'a> Point<'a> for $t<'a> {
            fn common(&self) -> &PointCommon<'a> { &self.common }
        }
    )*};
}
point!(
    NumberDataPoint,
    HistogramDataPoint,
    ExponentialHistogramDataPoint,
    SummaryDataPoint
);

/// The fields of one kind of point, built column by column.
trait Fields<P>: Default {
    /// The metric kind, as metadata names it.
    fn kind(shared: Self::Shared) -> &'static str;
    /// The field names, in column order.
    const NAMES: &'static [&'static str];
    /// Extra information every point of a metric shares.
    type Shared: Copy;
    /// Why `point` cannot be stored, if it cannot.
    fn check(_point: &P) -> Option<&'static str> {
        None
    }
    fn push(&mut self, point: &P, shared: Self::Shared);
    fn finish(self) -> Vec<ArrayRef>;
}

/// Rows of one kind: times, tags (a flat list, each row a series of its
/// own) and fields.
struct Rows<'a, P, F: Fields<P>> {
    times: Vec<i64>,
    tags: Vec<Tag<'a>>,
    /// Per row: its tag count, and 1 (its row count as a series).
    series: Vec<(usize, usize)>,
    fields: F,
    /// Common to every kind: start time, flags.
    start: Int64Builder,
    flags: UInt64Builder,
    _point: std::marker::PhantomData<P>,
}

impl<'a, P, F: Fields<P>> Default for Rows<'a, P, F> {
    fn default() -> Self {
        Rows {
            times: Vec::new(),
            tags: Vec::new(),
            series: Vec::new(),
            fields: F::default(),
            start: Int64Builder::new(),
            flags: UInt64Builder::new(),
            _point: std::marker::PhantomData,
        }
    }
}

/// Columns every kind has besides its own fields.
const COMMON_FIELDS: [&str; 2] = ["start_time_unix_nano", "flags"];

impl<'a, P: Point<'a>, F: Fields<P>> Rows<'a, P, F> {
    /// Adds every point of a metric; returns the kind's name (its
    /// metadata `type`).
    fn push_all(
        &mut self,
        base: &Base<'_, 'a>,
        points: &'a [P],
        shared: F::Shared,
        rejected: &mut Rejected,
    ) -> &'static str {
        for point in points {
            self.push(base, point, shared, rejected);
        }
        F::kind(shared)
    }

    /// Adds `point` as a row, or counts it rejected.
    fn push(
        &mut self,
        base: &Base<'_, 'a>,
        point: &'a P,
        shared: F::Shared,
        rejected: &mut Rejected,
    ) {
        let refuse = |rejected: &mut Rejected, reason: &str| rejected.add(base.metric_name, reason);
        let common = point.common();
        let Ok(time) = i64::try_from(common.time_unix_nano) else {
            return refuse(rejected, "time_unix_nano is past 2262");
        };
        if time == 0 {
            return refuse(rejected, "time_unix_nano is missing");
        }
        if let Some(reason) = F::check(point) {
            return refuse(rejected, reason);
        }
        let start = self.tags.len();
        self.tags.extend(base.context.iter().cloned());
        self.tags
            .push((METRIC_NAME, Cow::Borrowed(base.metric_name)));
        for kv in &common.attributes {
            self.tags.push((kv.key, any_text(&kv.value)));
        }
        let tags = &mut self.tags[start..];
        tags.sort_by(|a, b| a.0.cmp(b.0));
        // Only attributes can name a column: the context's keys have a dot.
        let reserved = common.attributes.iter().map(|kv| kv.key).find(|name| {
            *name == "time" || F::NAMES.contains(name) || COMMON_FIELDS.contains(name)
        });
        let repeated = tags.windows(2).find(|pair| pair[0].0 == pair[1].0);
        if let Some(name) = reserved.or(repeated.map(|pair| pair[0].0)) {
            self.tags.truncate(start);
            let reason = format!("attribute {name:?} names one of its columns or another tag");
            return rejected.add(base.metric_name, &reason);
        }
        self.series.push((self.tags.len() - start, 1));
        self.times.push(time);
        let start_time = i64::try_from(common.start_time_unix_nano).unwrap_or(0);
        self.start
            .append_option((start_time != 0).then_some(start_time));
        self.flags.append_value(u64::from(common.flags));
        self.fields.push(point, shared);
    }

    /// The rows as a table of `measurement` (none without rows).
    fn finish(mut self, measurement: &'static str, tables: &mut Vec<Table<'a>>) -> Result<()> {
        if self.times.is_empty() {
            return Ok(());
        }
        let mut times = Int64Builder::with_capacity(self.times.len());
        times.append_slice(&self.times);
        let mut fields: Vec<(&str, ArrayRef)> =
            F::NAMES.iter().copied().zip(self.fields.finish()).collect();
        fields.push(("start_time_unix_nano", Arc::new(self.start.finish())));
        fields.push(("flags", Arc::new(self.flags.finish())));
        tables.push(Table::new(
            measurement,
            times,
            self.tags,
            self.series,
            fields,
        )?);
        Ok(())
    }
}

#[derive(Default)]
struct Kinds<'a> {
    gauge: Rows<'a, NumberDataPoint<'a>, NumberFields>,
    sum: Rows<'a, NumberDataPoint<'a>, NumberFields>,
    histogram: Rows<'a, HistogramDataPoint<'a>, HistogramFields>,
    exponential: Rows<'a, ExponentialHistogramDataPoint<'a>, ExponentialFields>,
    summary: Rows<'a, SummaryDataPoint<'a>, SummaryFields>,
}

impl<'a> Kinds<'a> {
    fn rows(&self) -> usize {
        self.gauge.times.len()
            + self.sum.times.len()
            + self.histogram.times.len()
            + self.exponential.times.len()
            + self.summary.times.len()
    }

    fn finish(self, tables: &mut Vec<Table<'a>>) -> Result<()> {
        self.gauge.finish(GAUGE, tables)?;
        self.sum.finish(SUM, tables)?;
        self.histogram.finish(HISTOGRAM, tables)?;
        self.exponential.finish(EXPONENTIAL_HISTOGRAM, tables)?;
        self.summary.finish(SUMMARY, tables)
    }
}

/// An `AggregationTemporality`'s name.
fn temporality(value: i32) -> &'static str {
    match value {
        1 => "delta",
        2 => "cumulative",
        _ => "unspecified",
    }
}

/// Gauges and sums: the value, and for sums the temporality and whether
/// the sum only grows (gauges leave those columns out).
#[derive(Default)]
struct NumberFields {
    value: Float64Builder,
    temporality: StringBuilder,
    monotonic: BooleanBuilder,
}

impl Fields<NumberDataPoint<'_>> for NumberFields {
    const NAMES: &'static [&'static str] = &[VALUE, "aggregation_temporality", IS_MONOTONIC];
    /// A sum's temporality and monotonicity; `None` for a gauge.
    type Shared = Option<(i32, bool)>;

    fn kind(shared: Self::Shared) -> &'static str {
        match shared {
            Some(_) => "sum",
            None => "gauge",
        }
    }

    fn check(point: &NumberDataPoint<'_>) -> Option<&'static str> {
        point
            .value
            .is_none()
            .then_some("a number point without a value")
    }

    fn push(&mut self, point: &NumberDataPoint<'_>, shared: Self::Shared) {
        self.value
            .append_value(point.value.expect("checked: a value"));
        if let Some((kind, monotonic)) = shared {
            self.temporality.append_value(temporality(kind));
            self.monotonic.append_value(monotonic);
        }
    }

    fn finish(mut self) -> Vec<ArrayRef> {
        let temporality = self.temporality.finish();
        let monotonic = self.monotonic.finish();
        let mut columns: Vec<ArrayRef> = vec![Arc::new(self.value.finish())];
        // A gauge's rows have no temporality: its table leaves both out.
        if temporality.len() > 0 {
            columns.push(Arc::new(temporality));
            columns.push(Arc::new(monotonic));
        }
        columns
    }
}

/// What histograms of both kinds carry besides their buckets: the
/// observations' count, sum and extremes, and the temporality (the first
/// four columns and the last of either kind).
#[derive(Default)]
struct Observations {
    count: UInt64Builder,
    sum: Float64Builder,
    min: Float64Builder,
    max: Float64Builder,
    temporality: StringBuilder,
}

impl Observations {
    fn push(
        &mut self,
        count: u64,
        sum: Option<f64>,
        min: Option<f64>,
        max: Option<f64>,
        kind: i32,
    ) {
        self.count.append_value(count);
        self.sum.append_option(sum);
        self.min.append_option(min);
        self.max.append_option(max);
        self.temporality.append_value(temporality(kind));
    }

    /// The columns: `count`, `sum`, `min`, `max`, then `buckets` (the
    /// kind's own), then `aggregation_temporality`.
    fn finish(mut self, buckets: impl IntoIterator<Item = ArrayRef>) -> Vec<ArrayRef> {
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(self.count.finish()),
            Arc::new(self.sum.finish()),
            Arc::new(self.min.finish()),
            Arc::new(self.max.finish()),
        ];
        columns.extend(buckets);
        columns.push(Arc::new(self.temporality.finish()));
        columns
    }
}

#[derive(Default)]
struct HistogramFields {
    observations: Observations,
    bucket_counts: ListBuilder<UInt64Builder>,
    explicit_bounds: ListBuilder<Float64Builder>,
}

impl Fields<HistogramDataPoint<'_>> for HistogramFields {
    const NAMES: &'static [&'static str] = &[
        "count",
        "sum",
        "min",
        "max",
        "bucket_counts",
        "explicit_bounds",
        "aggregation_temporality",
    ];
    type Shared = i32;

    fn kind(_: i32) -> &'static str {
        "histogram"
    }

    fn check(point: &HistogramDataPoint<'_>) -> Option<&'static str> {
        let buckets = point.bucket_counts.len();
        (buckets != 0 && buckets != point.explicit_bounds.len() + 1)
            .then_some("bucket_counts must have one more entry than explicit_bounds")
    }

    fn push(&mut self, point: &HistogramDataPoint<'_>, kind: i32) {
        let p = point;
        self.observations.push(p.count, p.sum, p.min, p.max, kind);
        self.bucket_counts
            .append_value(p.bucket_counts.iter().copied().map(Some));
        self.explicit_bounds
            .append_value(p.explicit_bounds.iter().copied().map(Some));
    }

    fn finish(mut self) -> Vec<ArrayRef> {
        let buckets: [ArrayRef; 2] = [
            Arc::new(self.bucket_counts.finish()),
            Arc::new(self.explicit_bounds.finish()),
        ];
        self.observations.finish(buckets)
    }
}

#[derive(Default)]
struct ExponentialFields {
    observations: Observations,
    scale: Int64Builder,
    zero_count: UInt64Builder,
    zero_threshold: Float64Builder,
    positive_offset: Int64Builder,
    positive_bucket_counts: ListBuilder<UInt64Builder>,
    negative_offset: Int64Builder,
    negative_bucket_counts: ListBuilder<UInt64Builder>,
}

impl Fields<ExponentialHistogramDataPoint<'_>> for ExponentialFields {
    const NAMES: &'static [&'static str] = &[
        "count",
        "sum",
        "min",
        "max",
        "scale",
        "zero_count",
        "zero_threshold",
        "positive_offset",
        "positive_bucket_counts",
        "negative_offset",
        "negative_bucket_counts",
        "aggregation_temporality",
    ];
    type Shared = i32;

    fn kind(_: i32) -> &'static str {
        "exponential_histogram"
    }

    fn push(&mut self, point: &ExponentialHistogramDataPoint<'_>, kind: i32) {
        let p = point;
        self.observations.push(p.count, p.sum, p.min, p.max, kind);
        self.scale.append_value(i64::from(p.scale));
        self.zero_count.append_value(p.zero_count);
        self.zero_threshold.append_value(p.zero_threshold);
        for (buckets, offset, counts) in [
            (
                &p.positive,
                &mut self.positive_offset,
                &mut self.positive_bucket_counts,
            ),
            (
                &p.negative,
                &mut self.negative_offset,
                &mut self.negative_bucket_counts,
            ),
        ] {
            offset.append_value(i64::from(buckets.offset));
            counts.append_value(buckets.bucket_counts.iter().copied().map(Some));
        }
    }

    fn finish(mut self) -> Vec<ArrayRef> {
        let buckets: [ArrayRef; 7] = [
            Arc::new(self.scale.finish()),
            Arc::new(self.zero_count.finish()),
            Arc::new(self.zero_threshold.finish()),
            Arc::new(self.positive_offset.finish()),
            Arc::new(self.positive_bucket_counts.finish()),
            Arc::new(self.negative_offset.finish()),
            Arc::new(self.negative_bucket_counts.finish()),
        ];
        self.observations.finish(buckets)
    }
}

#[derive(Default)]
struct SummaryFields {
    count: UInt64Builder,
    sum: Float64Builder,
    quantiles: ListBuilder<Float64Builder>,
    values: ListBuilder<Float64Builder>,
}

impl Fields<SummaryDataPoint<'_>> for SummaryFields {
    const NAMES: &'static [&'static str] = &["count", "sum", "quantiles", "quantile_values"];
    type Shared = i32;

    fn kind(_: i32) -> &'static str {
        "summary"
    }

    fn push(&mut self, point: &SummaryDataPoint<'_>, _: i32) {
        self.count.append_value(point.count);
        self.sum.append_value(point.sum);
        let quantiles = &point.quantile_values;
        self.quantiles
            .append_value(quantiles.iter().map(|(q, _)| Some(*q)));
        self.values
            .append_value(quantiles.iter().map(|(_, v)| Some(*v)));
    }

    fn finish(mut self) -> Vec<ArrayRef> {
        vec![
            Arc::new(self.count.finish()),
            Arc::new(self.sum.finish()),
            Arc::new(self.quantiles.finish()),
            Arc::new(self.values.finish()),
        ]
    }
}

/// An attribute value as a tag value: strings as they are, other scalars
/// in their usual text form, bytes in hex, arrays and maps as JSON.
fn any_text<'a>(value: &AnyValue<'a>) -> Cow<'a, str> {
    match value {
        AnyValue::String(s) => Cow::Borrowed(s),
        AnyValue::Empty => Cow::Borrowed(""),
        _ => {
            let mut text = String::new();
            write_any(value, &mut text, false);
            Cow::Owned(text)
        }
    }
}

/// Writes `value` into `out`: as JSON when `json` (inside an array or a
/// map), else as plain text.
fn write_any(value: &AnyValue<'_>, out: &mut String, json: bool) {
    match value {
        AnyValue::String(s) if json => out.push_str(&serde_json::Value::from(*s).to_string()),
        AnyValue::String(s) => out.push_str(s),
        AnyValue::Bool(b) => {
            let _ = write!(out, "{b}");
        }
        AnyValue::Int(i) => {
            let _ = write!(out, "{i}");
        }
        AnyValue::Double(d) if json && !d.is_finite() => out.push_str("null"),
        AnyValue::Double(d) => {
            let _ = write!(out, "{d}");
        }
        AnyValue::Bytes(bytes) => {
            if json {
                out.push('"');
            }
            bytes.iter().for_each(|b| {
                let _ = write!(out, "{b:02x}");
            });
            if json {
                out.push('"');
            }
        }
        AnyValue::Array(values) => {
            out.push('[');
            for (i, item) in values.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_any(item, out, true);
            }
            out.push(']');
        }
        AnyValue::KvList(values) => {
            out.push('{');
            for (i, kv) in values.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::Value::from(kv.key).to_string());
                out.push(':');
                match &kv.value {
                    AnyValue::Empty => out.push_str("null"),
                    v => write_any(v, out, true),
                }
            }
            out.push('}');
        }
        // A string-table index (OTLP profiles): no table to look it up in.
        AnyValue::StringIndex | AnyValue::Empty => {
            if json {
                out.push_str("null");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::read::KeyValue;
    use super::*;

    #[test]
    fn attribute_values_as_text() {
        let cases = [
            (AnyValue::String("a b"), "a b"),
            (AnyValue::Bool(true), "true"),
            (AnyValue::Int(-7), "-7"),
            (AnyValue::Double(0.5), "0.5"),
            (AnyValue::Bytes(&[0xde, 0xad]), "dead"),
            (
                AnyValue::Array(vec![AnyValue::String("x\""), AnyValue::Int(1)]),
                r#"["x\"",1]"#,
            ),
            (
                AnyValue::KvList(vec![KeyValue {
                    key: "k",
                    value: AnyValue::Double(f64::NAN),
                }]),
                r#"{"k":null}"#,
            ),
            (AnyValue::Empty, ""),
        ];
        for (value, text) in cases {
            assert_eq!(any_text(&value), text);
        }
    }

    #[test]
    fn a_resource_attribute_is_found_from_its_tag() {
        let tag = resource_tag("service.name");
        assert_eq!(tag, "resource.service.name");
        assert_eq!(resource_attribute(&tag), Some("service.name"));
        assert_eq!(resource_attribute("scope.name"), None);
    }
}
