//! An `ExportMetricsServiceRequest` read in place ([`crate::wire`]): the
//! messages [`super::convert`] needs, their strings borrowed from the
//! request's bytes. Decoding into `opentelemetry-proto`'s generated
//! structs took a `String` per attribute key and value and a `Vec` per
//! point, and dropping them as long: 70% of the codec's time on a
//! Collector's host metrics (docs/benchmarks.md §12).
//!
//! What prost refuses is refused here too (malformed wire format, a known
//! field with another wire type, strings that are not UTF-8, attribute
//! values nested past [`MAX_DEPTH`]); unknown fields and what chingest
//! does not store (exemplars, schema URLs, dropped counts, metric
//! metadata) are skipped. As in prost, a scalar field sent twice keeps the
//! last value, a message field sent twice is merged, and a metric's data
//! of another kind replaces the earlier.

use crate::error::Result;
use crate::wire::{invalid, reading, string_pair, wrong_type, Fields, Value};

/// How deep attribute values may nest (arrays and maps in arrays and
/// maps): prost's recursion limit.
pub const MAX_DEPTH: usize = 100;

/// The request: its resources.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Request<'a> {
    /// `resource_metrics`.
    pub resource_metrics: Vec<ResourceMetrics<'a>>,
}

/// A resource (a host, a process) and what its scopes measured.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ResourceMetrics<'a> {
    /// The resource's attributes.
    pub attributes: Vec<KeyValue<'a>>,
    /// `scope_metrics`.
    pub scope_metrics: Vec<ScopeMetrics<'a>>,
}

/// The metrics of one instrumentation scope.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ScopeMetrics<'a> {
    /// The scope's name (empty when it has none).
    pub name: &'a str,
    /// The scope's version.
    pub version: &'a str,
    /// `metrics`.
    pub metrics: Vec<Metric<'a>>,
}

/// A metric: its name and description, and its points.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Metric<'a> {
    /// `name`.
    pub name: &'a str,
    /// `description`.
    pub description: &'a str,
    /// `unit`.
    pub unit: &'a str,
    /// The points, of one kind; `None` when the metric has no data.
    pub data: Option<Data<'a>>,
}

/// A metric's points, by kind; temporalities are the enum's numbers.
#[derive(Debug, Clone, PartialEq)]
pub enum Data<'a> {
    /// A gauge's points.
    Gauge(Vec<NumberDataPoint<'a>>),
    /// A sum's points, its temporality and whether it only grows.
    Sum(Vec<NumberDataPoint<'a>>, i32, bool),
    /// A histogram's points and temporality.
    Histogram(Vec<HistogramDataPoint<'a>>, i32),
    /// An exponential histogram's points and temporality.
    ExponentialHistogram(Vec<ExponentialHistogramDataPoint<'a>>, i32),
    /// A summary's points.
    Summary(Vec<SummaryDataPoint<'a>>),
}

/// What points of every kind carry.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct PointCommon<'a> {
    /// The point's own attributes.
    pub attributes: Vec<KeyValue<'a>>,
    /// `start_time_unix_nano` (0: none).
    pub start_time_unix_nano: u64,
    /// `time_unix_nano` (0: none).
    pub time_unix_nano: u64,
    /// `flags`.
    pub flags: u32,
}

/// A gauge's or a sum's point.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct NumberDataPoint<'a> {
    /// Attributes and times.
    pub common: PointCommon<'a>,
    /// The value (an integer one as a float); `None` when it has none.
    pub value: Option<f64>,
}

/// A histogram's point.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct HistogramDataPoint<'a> {
    /// Attributes and times.
    pub common: PointCommon<'a>,
    /// `count`.
    pub count: u64,
    /// `sum`.
    pub sum: Option<f64>,
    /// `bucket_counts`.
    pub bucket_counts: Vec<u64>,
    /// `explicit_bounds`.
    pub explicit_bounds: Vec<f64>,
    /// `min`.
    pub min: Option<f64>,
    /// `max`.
    pub max: Option<f64>,
}

/// An exponential histogram's buckets on one side of zero.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Buckets {
    /// `offset`.
    pub offset: i32,
    /// `bucket_counts`.
    pub bucket_counts: Vec<u64>,
}

/// An exponential histogram's point.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ExponentialHistogramDataPoint<'a> {
    /// Attributes and times.
    pub common: PointCommon<'a>,
    /// `count`.
    pub count: u64,
    /// `sum`.
    pub sum: Option<f64>,
    /// `scale`.
    pub scale: i32,
    /// `zero_count`.
    pub zero_count: u64,
    /// `zero_threshold`.
    pub zero_threshold: f64,
    /// `positive` (empty when absent).
    pub positive: Buckets,
    /// `negative` (empty when absent).
    pub negative: Buckets,
    /// `min`.
    pub min: Option<f64>,
    /// `max`.
    pub max: Option<f64>,
}

/// A summary's point.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct SummaryDataPoint<'a> {
    /// Attributes and times.
    pub common: PointCommon<'a>,
    /// `count`.
    pub count: u64,
    /// `sum`.
    pub sum: f64,
    /// `quantile_values`: (quantile, value).
    pub quantile_values: Vec<(f64, f64)>,
}

/// An attribute.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyValue<'a> {
    /// `key`.
    pub key: &'a str,
    /// `value`.
    pub value: AnyValue<'a>,
}

/// An attribute's value.
#[derive(Debug, Clone, PartialEq)]
pub enum AnyValue<'a> {
    /// No value.
    Empty,
    /// `string_value`.
    String(&'a str),
    /// `bool_value`.
    Bool(bool),
    /// `int_value`.
    Int(i64),
    /// `double_value`.
    Double(f64),
    /// `bytes_value`.
    Bytes(&'a [u8]),
    /// `array_value`.
    Array(Vec<AnyValue<'a>>),
    /// `kvlist_value`.
    KvList(Vec<KeyValue<'a>>),
    /// `string_value_strindex` (OTLP profiles' string table: none here).
    StringIndex,
}

impl<'a> Request<'a> {
    /// Reads the request encoded in `message`.
    pub fn decode(message: &'a [u8]) -> Result<Request<'a>> {
        let mut request = Request::default();
        let read = for_each(message, |number, value| match (number, value) {
            (1, Value::Bytes(bytes)) => {
                request.resource_metrics.push(resource_metrics(bytes)?);
                Ok(())
            }
            (1, value) => Err(wrong_type("ExportMetricsServiceRequest", number, &value)),
            _ => Ok(()),
        });
        reading("an ExportMetricsServiceRequest", read)?;
        Ok(request)
    }
}

/// Calls `visit` with each field of `message`, in order.
fn for_each<'a>(
    message: &'a [u8],
    mut visit: impl FnMut(u32, Value<'a>) -> Result<()>,
) -> Result<()> {
    let mut fields = Fields::of(message);
    while let Some((number, value)) = fields.next_field()? {
        visit(number, value)?;
    }
    Ok(())
}

fn text<'a>(message: &str, number: u32, bytes: &'a [u8]) -> Result<&'a str> {
    std::str::from_utf8(bytes)
        .map_err(|_| invalid(format!("{message} field {number} is not UTF-8")))
}

fn resource_metrics(message: &[u8]) -> Result<ResourceMetrics<'_>> {
    let mut rm = ResourceMetrics::default();
    for_each(message, |number, value| match (number, value) {
        (1, Value::Bytes(resource)) => for_each(resource, |number, value| match (number, value) {
            (1, Value::Bytes(kv)) => {
                rm.attributes.push(key_value(kv, 0)?);
                Ok(())
            }
            (1, value) => Err(wrong_type("Resource", number, &value)),
            _ => Ok(()),
        }),
        (2, Value::Bytes(sm)) => {
            rm.scope_metrics.push(scope_metrics(sm)?);
            Ok(())
        }
        (1 | 2, value) => Err(wrong_type("ResourceMetrics", number, &value)),
        _ => Ok(()),
    })?;
    Ok(rm)
}

fn scope_metrics(message: &[u8]) -> Result<ScopeMetrics<'_>> {
    let mut sm = ScopeMetrics::default();
    for_each(message, |number, value| match (number, value) {
        (1, Value::Bytes(scope)) => for_each(scope, |number, value| match (number, value) {
            (1, Value::Bytes(name)) => {
                sm.name = text("InstrumentationScope", 1, name)?;
                Ok(())
            }
            (2, Value::Bytes(version)) => {
                sm.version = text("InstrumentationScope", 2, version)?;
                Ok(())
            }
            (1 | 2, value) => Err(wrong_type("InstrumentationScope", number, &value)),
            _ => Ok(()),
        }),
        (2, Value::Bytes(metric_bytes)) => {
            sm.metrics.push(metric(metric_bytes)?);
            Ok(())
        }
        (1 | 2, value) => Err(wrong_type("ScopeMetrics", number, &value)),
        _ => Ok(()),
    })?;
    Ok(sm)
}

fn metric(message: &[u8]) -> Result<Metric<'_>> {
    let mut m = Metric::default();
    for_each(message, |number, value| {
        match (number, value) {
            (1, Value::Bytes(b)) => m.name = text("Metric", 1, b)?,
            (2, Value::Bytes(b)) => m.description = text("Metric", 2, b)?,
            (3, Value::Bytes(b)) => m.unit = text("Metric", 3, b)?,
            (5 | 7 | 9 | 10 | 11, Value::Bytes(b)) => data(number, b, &mut m.data)?,
            (1 | 2 | 3 | 5 | 7 | 9 | 10 | 11, value) => {
                return Err(wrong_type("Metric", number, &value))
            }
            _ => {}
        }
        Ok(())
    })?;
    Ok(m)
}

/// Reads the data of kind `number` (Metric's field) into `data`: merged
/// into data of the same kind, replacing data of another.
fn data<'a>(number: u32, message: &'a [u8], data: &mut Option<Data<'a>>) -> Result<()> {
    let same = matches!(
        (number, &*data),
        (5, Some(Data::Gauge(..)))
            | (7, Some(Data::Sum(..)))
            | (9, Some(Data::Histogram(..)))
            | (10, Some(Data::ExponentialHistogram(..)))
            | (11, Some(Data::Summary(..)))
    );
    if !same {
        *data = Some(match number {
            5 => Data::Gauge(Vec::new()),
            7 => Data::Sum(Vec::new(), 0, false),
            9 => Data::Histogram(Vec::new(), 0),
            10 => Data::ExponentialHistogram(Vec::new(), 0),
            _ => Data::Summary(Vec::new()),
        });
    }
    let data = data.as_mut().expect("set above");
    for_each(message, |field, value| {
        match (&mut *data, field, value) {
            (Data::Gauge(points) | Data::Sum(points, ..), 1, Value::Bytes(b)) => {
                points.push(number_point(b)?)
            }
            (Data::Histogram(points, _), 1, Value::Bytes(b)) => points.push(histogram_point(b)?),
            (Data::ExponentialHistogram(points, _), 1, Value::Bytes(b)) => {
                points.push(exponential_point(b)?)
            }
            (Data::Summary(points), 1, Value::Bytes(b)) => points.push(summary_point(b)?),
            (
                Data::Sum(_, temporality, _)
                | Data::Histogram(_, temporality)
                | Data::ExponentialHistogram(_, temporality),
                2,
                Value::Varint(v),
            ) => *temporality = v as i32,
            (Data::Sum(_, _, monotonic), 3, Value::Varint(v)) => *monotonic = v != 0,
            (data, field, value) => {
                let known = match data {
                    Data::Gauge(_) | Data::Summary(_) => field == 1,
                    Data::Sum(..) => field <= 3,
                    Data::Histogram(..) | Data::ExponentialHistogram(..) => field <= 2,
                };
                if known {
                    return Err(wrong_type(data.kind(), field, &value));
                }
            }
        }
        Ok(())
    })
}

impl Data<'_> {
    /// The message's name, for errors.
    fn kind(&self) -> &'static str {
        match self {
            Data::Gauge(_) => "Gauge",
            Data::Sum(..) => "Sum",
            Data::Histogram(..) => "Histogram",
            Data::ExponentialHistogram(..) => "ExponentialHistogram",
            Data::Summary(_) => "Summary",
        }
    }
}

/// Reads a field every point kind has — `attributes` (at
/// `attributes_field`), `start_time_unix_nano` (2), `time_unix_nano` (3)
/// and `flags` (`flags_field`) — into `common`; `Ok(false)` when the field
/// is another.
fn common_field<'a>(
    common: &mut PointCommon<'a>,
    (attributes_field, flags_field): (u32, u32),
    message: &'static str,
    number: u32,
    value: Value<'a>,
) -> Result<bool> {
    match (number, value) {
        (n, Value::Bytes(kv)) if n == attributes_field => common.attributes.push(key_value(kv, 0)?),
        (2, Value::Fixed64(t)) => common.start_time_unix_nano = t,
        (3, Value::Fixed64(t)) => common.time_unix_nano = t,
        (n, Value::Varint(flags)) if n == flags_field => common.flags = flags as u32,
        (n, value) if n == attributes_field || n == flags_field || n == 2 || n == 3 => {
            return Err(wrong_type(message, number, &value))
        }
        _ => return Ok(false),
    }
    Ok(true)
}

fn number_point(message: &[u8]) -> Result<NumberDataPoint<'_>> {
    match common_number_point(message) {
        Some(point) => Ok(point),
        None => number_point_fields(message),
    }
}

/// A gauge's or a sum's point in the form senders write it, read without
/// the field loop: in field order, the start time if any, the time, the
/// value (a double or an integer), attributes of the form
/// [`common_attribute`] reads, the flags if any; nothing else. `None`:
/// read it field by field.
fn common_number_point(message: &[u8]) -> Option<NumberDataPoint<'_>> {
    fn fixed64(bytes: &[u8]) -> Option<(u64, &[u8])> {
        let (value, rest) = bytes.split_first_chunk::<8>()?;
        Some((u64::from_le_bytes(*value), rest))
    }
    let mut p = NumberDataPoint::default();
    let mut rest = message;
    if let [0x11, after @ ..] = rest {
        (p.common.start_time_unix_nano, rest) = fixed64(after)?;
    }
    let [0x19, after @ ..] = rest else {
        return None;
    };
    (p.common.time_unix_nano, rest) = fixed64(after)?;
    let (value, after) = match rest {
        [0x21, after @ ..] => fixed64(after).map(|(bits, rest)| (f64::from_bits(bits), rest))?,
        // sfixed64.
        [0x31, after @ ..] => fixed64(after).map(|(bits, rest)| (bits as i64 as f64, rest))?,
        _ => return None,
    };
    p.value = Some(value);
    rest = after;
    while let [0x3a, len, after @ ..] = rest {
        let len = usize::from(*len);
        if len >= 0x80 {
            return None;
        }
        p.common
            .attributes
            .push(common_attribute(after.get(..len)?)?);
        rest = &after[len..];
    }
    if let [0x40, after @ ..] = rest {
        let mut flags = Fields::of(after);
        p.common.flags = flags.varint().ok()? as u32;
        return flags.is_empty().then_some(p);
    }
    rest.is_empty().then_some(p)
}

fn number_point_fields(message: &[u8]) -> Result<NumberDataPoint<'_>> {
    const NAME: &str = "NumberDataPoint";
    let mut p = NumberDataPoint::default();
    for_each(message, |number, value| {
        if common_field(&mut p.common, (7, 8), NAME, number, value)? {
            return Ok(());
        }
        match (number, value) {
            (4, Value::Fixed64(bits)) => p.value = Some(f64::from_bits(bits)),
            // sfixed64.
            (6, Value::Fixed64(bits)) => p.value = Some(bits as i64 as f64),
            (4 | 6, value) => return Err(wrong_type(NAME, number, &value)),
            _ => {}
        }
        Ok(())
    })?;
    Ok(p)
}

fn histogram_point(message: &[u8]) -> Result<HistogramDataPoint<'_>> {
    const NAME: &str = "HistogramDataPoint";
    let mut p = HistogramDataPoint::default();
    for_each(message, |number, value| {
        if common_field(&mut p.common, (9, 10), NAME, number, value)? {
            return Ok(());
        }
        match (number, value) {
            (4, Value::Fixed64(count)) => p.count = count,
            (5, Value::Fixed64(bits)) => p.sum = Some(f64::from_bits(bits)),
            (6, value) => fixed64s(NAME, 6, value, &mut p.bucket_counts, |bits| bits)?,
            (7, value) => fixed64s(NAME, 7, value, &mut p.explicit_bounds, f64::from_bits)?,
            (11, Value::Fixed64(bits)) => p.min = Some(f64::from_bits(bits)),
            (12, Value::Fixed64(bits)) => p.max = Some(f64::from_bits(bits)),
            (4 | 5 | 11 | 12, value) => return Err(wrong_type(NAME, number, &value)),
            _ => {}
        }
        Ok(())
    })?;
    Ok(p)
}

fn exponential_point(message: &[u8]) -> Result<ExponentialHistogramDataPoint<'_>> {
    const NAME: &str = "ExponentialHistogramDataPoint";
    let mut p = ExponentialHistogramDataPoint::default();
    for_each(message, |number, value| {
        if common_field(&mut p.common, (1, 10), NAME, number, value)? {
            return Ok(());
        }
        match (number, value) {
            (4, Value::Fixed64(count)) => p.count = count,
            (5, Value::Fixed64(bits)) => p.sum = Some(f64::from_bits(bits)),
            (6, Value::Varint(v)) => p.scale = zigzag32(v),
            (7, Value::Fixed64(count)) => p.zero_count = count,
            (8, Value::Bytes(b)) => buckets(b, &mut p.positive)?,
            (9, Value::Bytes(b)) => buckets(b, &mut p.negative)?,
            (12, Value::Fixed64(bits)) => p.min = Some(f64::from_bits(bits)),
            (13, Value::Fixed64(bits)) => p.max = Some(f64::from_bits(bits)),
            (14, Value::Fixed64(bits)) => p.zero_threshold = f64::from_bits(bits),
            (4..=9 | 12..=14, value) => return Err(wrong_type(NAME, number, &value)),
            _ => {}
        }
        Ok(())
    })?;
    Ok(p)
}

fn buckets(message: &[u8], buckets: &mut Buckets) -> Result<()> {
    for_each(message, |number, value| {
        match (number, value) {
            (1, Value::Varint(v)) => buckets.offset = zigzag32(v),
            (2, Value::Varint(count)) => buckets.bucket_counts.push(count),
            (2, Value::Bytes(packed)) => {
                let mut counts = Fields::of(packed);
                while !counts.is_empty() {
                    buckets.bucket_counts.push(counts.varint()?);
                }
            }
            (1 | 2, value) => return Err(wrong_type("Buckets", number, &value)),
            _ => {}
        }
        Ok(())
    })
}

fn summary_point(message: &[u8]) -> Result<SummaryDataPoint<'_>> {
    const NAME: &str = "SummaryDataPoint";
    let mut p = SummaryDataPoint::default();
    for_each(message, |number, value| {
        if common_field(&mut p.common, (7, 8), NAME, number, value)? {
            return Ok(());
        }
        match (number, value) {
            (4, Value::Fixed64(count)) => p.count = count,
            (5, Value::Fixed64(bits)) => p.sum = f64::from_bits(bits),
            (6, Value::Bytes(b)) => {
                let (mut quantile, mut value) = (0.0, 0.0);
                for_each(b, |number, field| {
                    match (number, field) {
                        (1, Value::Fixed64(bits)) => quantile = f64::from_bits(bits),
                        (2, Value::Fixed64(bits)) => value = f64::from_bits(bits),
                        (1 | 2, field) => {
                            return Err(wrong_type("ValueAtQuantile", number, &field))
                        }
                        _ => {}
                    }
                    Ok(())
                })?;
                p.quantile_values.push((quantile, value));
            }
            (4..=6, value) => return Err(wrong_type(NAME, number, &value)),
            _ => {}
        }
        Ok(())
    })?;
    Ok(p)
}

/// A repeated `fixed64` or `double`, packed or not, into `out`.
fn fixed64s<T>(
    message: &'static str,
    number: u32,
    value: Value<'_>,
    out: &mut Vec<T>,
    convert: impl Fn(u64) -> T,
) -> Result<()> {
    match value {
        Value::Fixed64(bits) => out.push(convert(bits)),
        Value::Bytes(packed) if packed.len() % 8 == 0 => out.extend(
            packed
                .chunks_exact(8)
                .map(|b| convert(u64::from_le_bytes(b.try_into().expect("8 bytes")))),
        ),
        Value::Bytes(packed) => {
            return Err(invalid(format!(
                "{message} field {number}: {} packed bytes are not whole 8-byte values",
                packed.len()
            )))
        }
        value => return Err(wrong_type(message, number, &value)),
    }
    Ok(())
}

/// A `sint32` from its varint.
fn zigzag32(v: u64) -> i32 {
    let v = v as u32;
    ((v >> 1) as i32) ^ -((v & 1) as i32)
}

fn key_value(message: &[u8], depth: usize) -> Result<KeyValue<'_>> {
    match common_attribute(message) {
        Some(kv) => Ok(kv),
        None => key_value_fields(message, depth),
    }
}

/// An attribute in the form senders write it, read without the field
/// loop: a [`string_pair`] whose second string is an `AnyValue` holding a
/// string (its field 1), nothing else. `None`: read it field by field.
fn common_attribute(kv: &[u8]) -> Option<KeyValue<'_>> {
    let (key, value) = string_pair(kv)?;
    let [0x0a, string_len, string @ ..] = value.as_bytes() else {
        return None;
    };
    // The two bytes before the string are ASCII: it starts on a character.
    (usize::from(*string_len) == string.len()).then(|| KeyValue {
        key,
        value: AnyValue::String(&value[2..]),
    })
}

fn key_value_fields(message: &[u8], depth: usize) -> Result<KeyValue<'_>> {
    let mut kv = KeyValue {
        key: "",
        value: AnyValue::Empty,
    };
    for_each(message, |number, value| {
        match (number, value) {
            (1, Value::Bytes(key)) => kv.key = text("KeyValue", 1, key)?,
            (2, Value::Bytes(value)) => any_value(value, depth, &mut kv.value)?,
            (1 | 2, value) => return Err(wrong_type("KeyValue", number, &value)),
            _ => {}
        }
        Ok(())
    })?;
    Ok(kv)
}

/// Reads an `AnyValue` into `out` (merged into an array or a map already
/// there, as prost merges a message sent twice).
fn any_value<'a>(message: &'a [u8], depth: usize, out: &mut AnyValue<'a>) -> Result<()> {
    if depth >= MAX_DEPTH {
        return Err(invalid(format!(
            "an attribute value nests arrays or maps more than {MAX_DEPTH} deep"
        )));
    }
    for_each(message, |number, value| {
        match (number, value) {
            (1, Value::Bytes(s)) => *out = AnyValue::String(text("AnyValue", 1, s)?),
            (2, Value::Varint(b)) => *out = AnyValue::Bool(b != 0),
            (3, Value::Varint(i)) => *out = AnyValue::Int(i as i64),
            (4, Value::Fixed64(bits)) => *out = AnyValue::Double(f64::from_bits(bits)),
            (5, Value::Bytes(array)) => {
                if !matches!(out, AnyValue::Array(_)) {
                    *out = AnyValue::Array(Vec::new());
                }
                let AnyValue::Array(values) = out else {
                    unreachable!("set above")
                };
                for_each(array, |number, value| match (number, value) {
                    (1, Value::Bytes(item)) => {
                        let mut item_value = AnyValue::Empty;
                        any_value(item, depth + 1, &mut item_value)?;
                        values.push(item_value);
                        Ok(())
                    }
                    (1, value) => Err(wrong_type("ArrayValue", number, &value)),
                    _ => Ok(()),
                })?;
            }
            (6, Value::Bytes(map)) => {
                if !matches!(out, AnyValue::KvList(_)) {
                    *out = AnyValue::KvList(Vec::new());
                }
                let AnyValue::KvList(values) = out else {
                    unreachable!("set above")
                };
                for_each(map, |number, value| match (number, value) {
                    (1, Value::Bytes(kv)) => {
                        values.push(key_value(kv, depth + 1)?);
                        Ok(())
                    }
                    (1, value) => Err(wrong_type("KeyValueList", number, &value)),
                    _ => Ok(()),
                })?;
            }
            (7, Value::Bytes(bytes)) => *out = AnyValue::Bytes(bytes),
            (8, Value::Varint(_)) => *out = AnyValue::StringIndex,
            (1..=8, value) => return Err(wrong_type("AnyValue", number, &value)),
            _ => {}
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
    use opentelemetry_proto::tonic::common::v1 as common;
    use opentelemetry_proto::tonic::metrics::v1 as metrics;
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use prost::Message;

    use super::*;

    fn any(value: common::any_value::Value) -> Option<common::AnyValue> {
        Some(common::AnyValue { value: Some(value) })
    }

    fn kv(key: &str, value: common::any_value::Value) -> common::KeyValue {
        common::KeyValue {
            key: key.into(),
            value: any(value),
            ..Default::default()
        }
    }

    /// A request with a metric of every kind, as a sender's prost encodes it.
    fn every_kind() -> ExportMetricsServiceRequest {
        use common::any_value::Value as V;
        use metrics::metric::Data as D;
        let attributes = vec![
            kv("s", V::StringValue("x".into())),
            kv(
                "list",
                V::ArrayValue(common::ArrayValue {
                    values: vec![
                        any(V::IntValue(-3)).unwrap(),
                        any(V::KvlistValue(common::KeyValueList {
                            values: vec![kv("b", V::BoolValue(true))],
                        }))
                        .unwrap(),
                    ],
                }),
            ),
            kv("bytes", V::BytesValue(vec![1, 2])),
            kv("d", V::DoubleValue(0.5)),
        ];
        let metric = |name: &str, data| metrics::Metric {
            name: name.into(),
            description: format!("{name} described"),
            unit: "s".into(),
            data: Some(data),
            ..Default::default()
        };
        let number = |value| metrics::NumberDataPoint {
            attributes: attributes.clone(),
            start_time_unix_nano: 5,
            time_unix_nano: 10,
            flags: 1,
            value: Some(value),
            ..Default::default()
        };
        ExportMetricsServiceRequest {
            resource_metrics: vec![metrics::ResourceMetrics {
                resource: Some(Resource {
                    attributes: vec![kv("host.name", V::StringValue("h".into()))],
                    ..Default::default()
                }),
                scope_metrics: vec![metrics::ScopeMetrics {
                    scope: Some(common::InstrumentationScope {
                        name: "scope".into(),
                        version: "1.0".into(),
                        ..Default::default()
                    }),
                    metrics: vec![
                        metric(
                            "gauge",
                            D::Gauge(metrics::Gauge {
                                data_points: vec![number(
                                    metrics::number_data_point::Value::AsDouble(1.5),
                                )],
                            }),
                        ),
                        metric(
                            "sum",
                            D::Sum(metrics::Sum {
                                data_points: vec![number(
                                    metrics::number_data_point::Value::AsInt(-7),
                                )],
                                aggregation_temporality: 2,
                                is_monotonic: true,
                            }),
                        ),
                        metric(
                            "histogram",
                            D::Histogram(metrics::Histogram {
                                data_points: vec![metrics::HistogramDataPoint {
                                    time_unix_nano: 10,
                                    count: 3,
                                    sum: Some(0.6),
                                    bucket_counts: vec![1, 2],
                                    explicit_bounds: vec![0.25],
                                    min: Some(0.1),
                                    max: Some(0.3),
                                    ..Default::default()
                                }],
                                aggregation_temporality: 1,
                            }),
                        ),
                        metric(
                            "exponential",
                            D::ExponentialHistogram(metrics::ExponentialHistogram {
                                data_points: vec![metrics::ExponentialHistogramDataPoint {
                                    time_unix_nano: 10,
                                    count: 4,
                                    scale: -2,
                                    zero_count: 1,
                                    zero_threshold: 0.001,
                                    positive: Some(
                                        metrics::exponential_histogram_data_point::Buckets {
                                            offset: -1,
                                            bucket_counts: vec![1, 300],
                                        },
                                    ),
                                    ..Default::default()
                                }],
                                aggregation_temporality: 2,
                            }),
                        ),
                        metric(
                            "summary",
                            D::Summary(metrics::Summary {
                                data_points: vec![metrics::SummaryDataPoint {
                                    time_unix_nano: 10,
                                    count: 2,
                                    sum: 3.0,
                                    quantile_values: vec![
                                        metrics::summary_data_point::ValueAtQuantile {
                                            quantile: 0.5,
                                            value: 1.0,
                                        },
                                    ],
                                    ..Default::default()
                                }],
                            }),
                        ),
                    ],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
    }

    #[test]
    fn every_kind_reads_as_prost_wrote_it() {
        let bytes = every_kind().encode_to_vec();
        let request = Request::decode(&bytes).unwrap();
        let [rm] = &request.resource_metrics[..] else {
            panic!("one resource")
        };
        assert_eq!(
            rm.attributes,
            [KeyValue {
                key: "host.name",
                value: AnyValue::String("h")
            }]
        );
        let [sm] = &rm.scope_metrics[..] else {
            panic!("one scope")
        };
        assert_eq!((sm.name, sm.version), ("scope", "1.0"));
        let names: Vec<_> = sm
            .metrics
            .iter()
            .map(|m| (m.name, m.description, m.unit))
            .collect();
        assert_eq!(names[0], ("gauge", "gauge described", "s"));
        let attributes = vec![
            KeyValue {
                key: "s",
                value: AnyValue::String("x"),
            },
            KeyValue {
                key: "list",
                value: AnyValue::Array(vec![
                    AnyValue::Int(-3),
                    AnyValue::KvList(vec![KeyValue {
                        key: "b",
                        value: AnyValue::Bool(true),
                    }]),
                ]),
            },
            KeyValue {
                key: "bytes",
                value: AnyValue::Bytes(&[1, 2]),
            },
            KeyValue {
                key: "d",
                value: AnyValue::Double(0.5),
            },
        ];
        let number = |value| NumberDataPoint {
            common: PointCommon {
                attributes: attributes.clone(),
                start_time_unix_nano: 5,
                time_unix_nano: 10,
                flags: 1,
            },
            value: Some(value),
        };
        let at_10 = PointCommon {
            time_unix_nano: 10,
            ..PointCommon::default()
        };
        let data: Vec<_> = sm.metrics.iter().map(|m| m.data.clone().unwrap()).collect();
        assert_eq!(
            data,
            [
                Data::Gauge(vec![number(1.5)]),
                Data::Sum(vec![number(-7.0)], 2, true),
                Data::Histogram(
                    vec![HistogramDataPoint {
                        common: at_10.clone(),
                        count: 3,
                        sum: Some(0.6),
                        bucket_counts: vec![1, 2],
                        explicit_bounds: vec![0.25],
                        min: Some(0.1),
                        max: Some(0.3),
                    }],
                    1
                ),
                Data::ExponentialHistogram(
                    vec![ExponentialHistogramDataPoint {
                        common: at_10.clone(),
                        count: 4,
                        scale: -2,
                        zero_count: 1,
                        zero_threshold: 0.001,
                        positive: Buckets {
                            offset: -1,
                            bucket_counts: vec![1, 300],
                        },
                        ..ExponentialHistogramDataPoint::default()
                    }],
                    2
                ),
                Data::Summary(vec![SummaryDataPoint {
                    common: at_10,
                    count: 2,
                    sum: 3.0,
                    quantile_values: vec![(0.5, 1.0)],
                }]),
            ]
        );
    }

    #[test]
    fn unpacked_repeated_fields_unknown_fields_and_repeats_read_as_prost_reads_them() {
        // A histogram point with its bucket counts and bounds unpacked,
        // an unknown field (99), and its count sent twice (the last wins).
        let mut point = Vec::new();
        for count in [1u64, 2] {
            point.push(0x31); // 6: fixed64
            point.extend(count.to_le_bytes());
        }
        point.push(0x39); // 7: double
        point.extend(0.25f64.to_le_bytes());
        point.extend([0x98, 0x06, 0x01]); // 99: varint 1
        for count in [5u64, 3] {
            point.push(0x21); // 4: fixed64
            point.extend(count.to_le_bytes());
        }
        let decoded = metrics::HistogramDataPoint::decode(&point[..]).unwrap();
        let mine = histogram_point(&point).unwrap();
        assert_eq!(mine.bucket_counts, decoded.bucket_counts);
        assert_eq!(mine.explicit_bounds, decoded.explicit_bounds);
        assert_eq!((mine.count, decoded.count), (3, 3));
        // A metric whose gauge comes in two pieces: merged, as prost does.
        let gauge = metrics::Gauge {
            data_points: vec![metrics::NumberDataPoint {
                time_unix_nano: 1,
                ..Default::default()
            }],
        }
        .encode_to_vec();
        let mut metric_bytes = Vec::new();
        for _ in 0..2 {
            metric_bytes.push(0x2a); // 5: gauge
            metric_bytes.push(gauge.len() as u8);
            metric_bytes.extend(&gauge);
        }
        let Some(Data::Gauge(points)) = metric(&metric_bytes).unwrap().data else {
            panic!("a gauge")
        };
        let decoded = metrics::Metric::decode(&metric_bytes[..]).unwrap();
        let Some(metrics::metric::Data::Gauge(theirs)) = decoded.data else {
            panic!("a gauge")
        };
        assert_eq!(points.len(), theirs.data_points.len());
    }

    #[test]
    fn common_forms_read_as_the_field_loop_does() {
        use common::any_value::Value::{IntValue, StringValue};
        use metrics::number_data_point::Value::{AsDouble, AsInt};
        let attributes = vec![
            kv("cpu", StringValue("cpu0".into())),
            kv("state", StringValue(String::new())),
        ];
        let point = |value, start, flags, attributes| metrics::NumberDataPoint {
            attributes,
            start_time_unix_nano: start,
            time_unix_nano: 7,
            value: Some(value),
            exemplars: vec![],
            flags,
        };
        for sent in [
            point(AsDouble(1.5), 0, 0, vec![]),
            point(AsInt(-3), 5, 1, attributes.clone()),
            point(AsDouble(2.0), 0, 0, attributes),
        ] {
            let bytes = sent.encode_to_vec();
            let common = common_number_point(&bytes);
            assert!(common.is_some(), "{sent:?} is in the common form");
            assert_eq!(common, number_point_fields(&bytes).ok());
            // Cut short, it is left to the field loop or read as the loop reads it.
            for cut in 0..bytes.len() {
                if let Some(point) = common_number_point(&bytes[..cut]) {
                    assert_eq!(Some(point), number_point_fields(&bytes[..cut]).ok());
                }
            }
        }
        // Anything else is left to the field loop, which reads or refuses it.
        let long = "k".repeat(128);
        for other in [
            kv(&long, StringValue("v".into())),
            kv("k", StringValue(long.clone())),
            kv("k", IntValue(1)),
        ] {
            assert_eq!(common_attribute(&other.encode_to_vec()), None, "{other:?}");
        }
        assert_eq!(common_attribute(b"\x0a\x01k\x12\x03\x0a\x01\xff"), None); // not UTF-8
        assert_eq!(common_attribute(b"\x12\x03\x0a\x01v\x0a\x01k"), None); // value first
        let mut time_first = metrics::NumberDataPoint {
            time_unix_nano: 7,
            ..Default::default()
        }
        .encode_to_vec();
        time_first.extend(b"\x11\x01\0\0\0\0\0\0\0"); // the start time after it
        assert_eq!(common_number_point(&time_first), None);
    }

    #[test]
    fn what_prost_refuses_is_refused() {
        let good = every_kind().encode_to_vec();
        // Cut anywhere inside, the request is refused or shorter (a cut
        // between top-level fields is a request with fewer resources).
        for cut in 1..good.len() {
            let refused = Request::decode(&good[..cut]).is_err();
            assert_eq!(
                refused,
                ExportMetricsServiceRequest::decode(&good[..cut]).is_err(),
                "cut at {cut}"
            );
        }
        let mut nested = b"\x0a\x01k".to_vec(); // KeyValue "k"
        let mut value = b"\x0a\x00".to_vec(); // AnyValue "": the innermost
        for _ in 0..MAX_DEPTH + 1 {
            // AnyValue { array_value: ArrayValue { values: [value] } }
            let array = [&[0x0a][..], &varint(value.len()), &value].concat();
            value = [&[0x2a], &varint(array.len())[..], &array].concat();
        }
        nested.push(0x12);
        nested.extend(varint(value.len()));
        nested.extend(&value);
        let err = key_value(&nested, 0).unwrap_err().to_string();
        assert!(err.contains("nests"), "{err}");
        for (bad, why) in [
            (&b"\x0a\x02\xff\xfe"[..], "not UTF-8"),   // key not UTF-8
            (b"\x08\x01", "wrong wire type"),          // key as a varint
            (b"\x12\x02\x10\x01\x12\x02\x08\x01", ""), // a well-formed repeat: fine
        ] {
            match key_value(bad, 0) {
                Err(e) => assert!(e.to_string().contains(why), "{e}"),
                Ok(_) => assert!(why.is_empty(), "{bad:?} read"),
            }
            assert_eq!(
                key_value(bad, 0).is_err(),
                common::KeyValue::decode(bad).is_err(),
                "{bad:?}"
            );
        }
    }

    fn varint(mut n: usize) -> Vec<u8> {
        let mut out = Vec::new();
        while n >= 0x80 {
            out.push((n as u8) | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
        out
    }
}
