//! Remote write 1.0 and 2.0 requests, checked and resolved into one shape:
//! every series' labels as strings, its samples, native histograms,
//! exemplars and created timestamp, and the metric metadata. No I/O and no
//! Arrow: [`super::tables()`] builds the batches from a [`Decoded`].
//!
//! 2.0 interns strings: labels, exemplar labels, help and unit are indices
//! into the request's `symbols`. An index past the table, an odd number of
//! label references, a repeated or empty label name, a series with both
//! samples and histograms, or histogram spans that do not match their
//! counts make the request invalid (400), before anything is stored.

use std::collections::BTreeMap;
use std::ops::Range;

use chingest_proto::prometheus::v2::{self, Histogram};
use chingest_proto::prometheus::{MetricType, Sample};

use crate::error::{Error, Result};
use crate::wire::{reading, string_pair, wrong_type, Fields, Value};

/// The label that names a series' metric.
pub(super) const METRIC_NAME_LABEL: &str = "__name__";

/// A request resolved to strings, borrowing from the decoded message.
#[derive(Debug, Default)]
pub struct Decoded<'a> {
    /// Every series' labels, one flat list (`Series::labels` ranges in it).
    pub(super) label_pairs: Vec<(&'a str, &'a str)>,
    /// The series, in request order.
    pub(super) series: Vec<Series<'a>>,
    /// Every series' float samples, one flat list (`Series::samples`
    /// ranges in it).
    pub(super) samples: Vec<Sample>,
    /// Exemplar labels, one flat list (`Exemplar::labels` ranges in it).
    pub(super) exemplar_pairs: Vec<(&'a str, &'a str)>,
    /// Exemplars, each naming its series.
    pub(super) exemplars: Vec<Exemplar>,
    /// Metric metadata by metric name (the newest in the request wins).
    pub(super) metadata: BTreeMap<&'a str, Metadata<'a>>,
}

/// One series of a request.
#[derive(Debug)]
pub(super) struct Series<'a> {
    /// Its labels: a range of [`Decoded::label_pairs`].
    pub(super) labels: Range<usize>,
    /// Float samples: a range of [`Decoded::samples`].
    pub(super) samples: Range<usize>,
    /// Native histogram samples.
    pub(super) histograms: &'a [Histogram],
    /// When the counter started, in ms (0: not sent).
    pub(super) created_timestamp: i64,
}

/// An exemplar of a series.
#[derive(Debug)]
pub(super) struct Exemplar {
    /// Index of its series in [`Decoded::series`].
    pub(super) series: usize,
    /// Its labels: a range of [`Decoded::exemplar_pairs`].
    pub(super) labels: Range<usize>,
    /// The observed value.
    pub(super) value: f64,
    /// Milliseconds since the epoch: the exemplar's own, else its series'
    /// newest sample's.
    pub(super) timestamp: i64,
}

/// A metric family's metadata.
#[derive(Debug, Clone, Copy)]
pub(super) struct Metadata<'a> {
    /// `counter`, `gauge`, … (`unknown` when not sent).
    pub(super) kind: &'static str,
    /// Help text.
    pub(super) help: &'a str,
    /// Unit.
    pub(super) unit: &'a str,
}

impl<'a> Decoded<'a> {
    /// The labels of `series`.
    pub(super) fn labels(&self, series: &Series<'a>) -> &[(&'a str, &'a str)] {
        &self.label_pairs[series.labels.clone()]
    }

    /// The float samples of `series`.
    pub(super) fn samples(&self, series: &Series<'a>) -> &[Sample] {
        &self.samples[series.samples.clone()]
    }

    /// Float samples in the request.
    pub fn sample_count(&self) -> usize {
        self.samples.len()
    }

    /// Native histogram samples in the request.
    pub fn histogram_count(&self) -> usize {
        self.series.iter().map(|s| s.histograms.len()).sum()
    }

    /// Exemplars in the request.
    pub fn exemplar_count(&self) -> usize {
        self.exemplars.len()
    }

    /// A 1.0 `WriteRequest`, read from its encoding in place
    /// ([`crate::wire`]): labels are slices of `message`.
    pub fn v1(message: &'a [u8]) -> Result<Decoded<'a>> {
        let mut decoded = Decoded::default();
        reading("a remote write WriteRequest", decoded.read_v1(message))?;
        Ok(decoded)
    }

    fn read_v1(&mut self, message: &'a [u8]) -> Result<()> {
        let mut fields = Fields::of(message);
        while let Some((number, value)) = fields.next_field()? {
            match (number, value) {
                (1, Value::Bytes(series)) => self.push_v1_series(series)?,
                (3, Value::Bytes(metadata)) => self.insert_v1_metadata(metadata)?,
                (1 | 3, value) => return Err(wrong_type("WriteRequest", number, &value)),
                _ => {}
            }
        }
        Ok(())
    }

    /// Adds a 1.0 `TimeSeries`, from its encoding.
    fn push_v1_series(&mut self, message: &'a [u8]) -> Result<()> {
        let (labels, samples) = (self.label_pairs.len(), self.samples.len());
        let mut fields = Fields::of(message);
        while let Some((number, value)) = fields.next_field()? {
            match (number, value) {
                (1, Value::Bytes(label)) => {
                    if let Some(pair) = string_pair(label) {
                        self.label_pairs.push(pair);
                        continue;
                    }
                    let (mut name, mut value) = (&[][..], &[][..]);
                    let mut fields = Fields::of(label);
                    while let Some(field) = fields.next_field()? {
                        match field {
                            (1, Value::Bytes(bytes)) => name = bytes,
                            (2, Value::Bytes(bytes)) => value = bytes,
                            (number @ (1 | 2), value) => {
                                return Err(wrong_type("Label", number, &value))
                            }
                            _ => {}
                        }
                    }
                    self.label_pairs
                        .push((utf8(name, "name")?, utf8(value, "value")?));
                }
                (2, Value::Bytes(sample)) => {
                    if let Some((value, timestamp)) = common_sample(sample) {
                        self.samples.push(Sample { value, timestamp });
                        continue;
                    }
                    let mut decoded = Sample::default();
                    let mut fields = Fields::of(sample);
                    while let Some(field) = fields.next_field()? {
                        match field {
                            (1, Value::Fixed64(bits)) => decoded.value = f64::from_bits(bits),
                            // int64: two's complement in a varint.
                            (2, Value::Varint(ms)) => decoded.timestamp = ms as i64,
                            (number @ (1 | 2), value) => {
                                return Err(wrong_type("Sample", number, &value))
                            }
                            _ => {}
                        }
                    }
                    self.samples.push(decoded);
                }
                (1 | 2, value) => return Err(wrong_type("TimeSeries", number, &value)),
                _ => {}
            }
        }
        let index = self.series.len();
        self.push_series(index, labels, samples, &[], 0)?;
        Ok(())
    }

    /// Records a 1.0 `MetricMetadata`, from its encoding.
    fn insert_v1_metadata(&mut self, message: &'a [u8]) -> Result<()> {
        let (mut kind, mut name, mut help, mut unit) = (0, "", "", "");
        let mut fields = Fields::of(message);
        while let Some((number, value)) = fields.next_field()? {
            match (number, value) {
                // An enum: an int32 in a varint.
                (1, Value::Varint(number)) => kind = number as i32,
                (2, Value::Bytes(bytes)) => name = text(bytes, "metadata", "family name")?,
                (4, Value::Bytes(bytes)) => help = text(bytes, "metadata", "help")?,
                (5, Value::Bytes(bytes)) => unit = text(bytes, "metadata", "unit")?,
                (1 | 2 | 4 | 5, value) => return Err(wrong_type("MetricMetadata", number, &value)),
                _ => {}
            }
        }
        let kind = MetricType::try_from(kind).map_or("unknown", MetricType::name);
        self.metadata.insert(name, Metadata { kind, help, unit });
        Ok(())
    }

    /// A 2.0 `Request`.
    pub fn v2(request: &'a v2::Request) -> Result<Decoded<'a>> {
        let symbols = request
            .symbols
            .iter()
            .map(|s| utf8(s, "symbol"))
            .collect::<Result<Vec<&str>>>()?;
        if symbols.first().is_some_and(|first| !first.is_empty()) {
            return Err(Error::Invalid(
                "the symbols table must start with an empty string".into(),
            ));
        }
        let symbol = |series: usize, reference: u32| {
            symbols.get(reference as usize).copied().ok_or_else(|| {
                Error::Invalid(format!(
                    "series {series}: symbol reference {reference} is past the symbols table ({} symbols)",
                    symbols.len()
                ))
            })
        };
        let pairs = |series: usize, refs: &[u32], into: &mut Vec<(&'a str, &'a str)>| {
            if !refs.len().is_multiple_of(2) {
                return Err(Error::Invalid(format!(
                    "series {series}: an odd number of label references ({})",
                    refs.len()
                )));
            }
            for pair in refs.chunks_exact(2) {
                into.push((symbol(series, pair[0])?, symbol(series, pair[1])?));
            }
            Ok(())
        };
        let mut decoded = Decoded::default();
        for (i, series) in request.timeseries.iter().enumerate() {
            if !series.samples.is_empty() && !series.histograms.is_empty() {
                return Err(Error::Invalid(format!(
                    "series {i} has both samples and histograms (send them as two series)"
                )));
            }
            for (h, histogram) in series.histograms.iter().enumerate() {
                check_histogram(histogram)
                    .map_err(|e| Error::Invalid(format!("series {i}, histogram {h}: {e}")))?;
            }
            let start = decoded.label_pairs.len();
            pairs(i, &series.labels_refs, &mut decoded.label_pairs)?;
            let newest = series
                .samples
                .last()
                .map(|s| s.timestamp)
                .or(series.histograms.last().map(|h| h.timestamp));
            let samples = decoded.samples.len();
            decoded.samples.extend_from_slice(&series.samples);
            let index = decoded.push_series(
                i,
                start,
                samples,
                &series.histograms,
                series.created_timestamp,
            )?;
            for exemplar in &series.exemplars {
                let labels_start = decoded.exemplar_pairs.len();
                pairs(i, &exemplar.labels_refs, &mut decoded.exemplar_pairs)?;
                let timestamp = match (exemplar.timestamp, newest) {
                    (0, Some(newest)) => newest,
                    (0, None) => {
                        return Err(Error::Invalid(format!(
                        "series {i}: an exemplar without a timestamp in a series without samples"
                    )))
                    }
                    (timestamp, _) => timestamp,
                };
                decoded.exemplars.push(Exemplar {
                    series: index,
                    labels: labels_start..decoded.exemplar_pairs.len(),
                    value: exemplar.value,
                    timestamp,
                });
            }
            if let Some(metadata) = &series.metadata {
                let name = decoded.metric_name(index);
                let kind =
                    MetricType::try_from(metadata.r#type).map_or("unknown", MetricType::name);
                let help = symbol(i, metadata.help_ref)?;
                let unit = symbol(i, metadata.unit_ref)?;
                if metadata.r#type != 0 || !help.is_empty() || !unit.is_empty() {
                    decoded.metadata.insert(name, Metadata { kind, help, unit });
                }
            }
        }
        Ok(decoded)
    }

    /// Adds a series whose labels start at `start` in `label_pairs`, and
    /// its samples at `samples` in `samples`, after checking its labels;
    /// returns its index.
    fn push_series(
        &mut self,
        i: usize,
        start: usize,
        samples: usize,
        histograms: &'a [Histogram],
        created_timestamp: i64,
    ) -> Result<usize> {
        let labels = &self.label_pairs[start..];
        // Senders sort labels by name (both specifications say to): then
        // no name repeats if each is greater than the one before.
        let ascending = labels.windows(2).all(|pair| pair[0].0 < pair[1].0);
        for (k, (name, _)) in labels.iter().enumerate() {
            if name.is_empty() {
                return Err(Error::Invalid(format!(
                    "series {i} has an empty label name"
                )));
            }
            if !ascending && labels[..k].iter().any(|(other, _)| other == name) {
                return Err(Error::Invalid(format!(
                    "series {i} repeats the label {name:?}"
                )));
            }
        }
        if !labels.iter().any(|(name, _)| *name == METRIC_NAME_LABEL) {
            return Err(Error::Invalid(format!(
                "series {i} has no {METRIC_NAME_LABEL} label"
            )));
        }
        self.series.push(Series {
            labels: start..self.label_pairs.len(),
            samples: samples..self.samples.len(),
            histograms,
            created_timestamp,
        });
        Ok(self.series.len() - 1)
    }

    /// The metric name of series `index` (checked present when added).
    fn metric_name(&self, index: usize) -> &'a str {
        self.labels(&self.series[index])
            .iter()
            .find(|(name, _)| *name == METRIC_NAME_LABEL)
            .map(|(_, value)| *value)
            .unwrap_or_default()
    }
}

/// A label's `what` (name, value, symbol) as text.
fn utf8<'a>(bytes: &'a [u8], what: &str) -> Result<&'a str> {
    text(bytes, "label", what)
}

/// `bytes` as text, or the error that `what` of `whose` is not.
fn text<'a>(bytes: &'a [u8], whose: &str, what: &str) -> Result<&'a str> {
    std::str::from_utf8(bytes).map_err(|_| Error::Invalid(format!("a {whose} {what} is not UTF-8")))
}

/// The schema of custom bucket bounds.
pub(super) const CUSTOM_BUCKETS_SCHEMA: i32 = -53;

/// Checks what the bucket layout must satisfy for the counts to mean
/// anything: a known schema, spans covering exactly the counts, integer
/// or float counts (not both), and custom bounds that ascend.
fn check_histogram(h: &Histogram) -> Result<(), String> {
    let custom = h.schema == CUSTOM_BUCKETS_SCHEMA;
    if !custom && !(-4..=8).contains(&h.schema) {
        return Err(format!(
            "schema {} is not one of -4..=8 or {CUSTOM_BUCKETS_SCHEMA}",
            h.schema
        ));
    }
    let sides = [
        (
            "negative",
            &h.negative_spans,
            &h.negative_deltas,
            &h.negative_counts,
        ),
        (
            "positive",
            &h.positive_spans,
            &h.positive_deltas,
            &h.positive_counts,
        ),
    ];
    for (side, spans, deltas, counts) in sides {
        if !deltas.is_empty() && !counts.is_empty() {
            return Err(format!(
                "{side} buckets have both integer deltas and float counts"
            ));
        }
        let covered: u64 = spans.iter().map(|s| u64::from(s.length)).sum();
        let given = deltas.len().max(counts.len()) as u64;
        if covered != given {
            return Err(format!(
                "{side} spans cover {covered} buckets but {given} counts were sent"
            ));
        }
    }
    if custom {
        if !h.negative_spans.is_empty() {
            return Err("custom buckets have no negative buckets".into());
        }
        if h.custom_values.windows(2).any(|w| w[0] >= w[1]) {
            return Err("custom bucket bounds must ascend".into());
        }
        let bounds = h.custom_values.len() as i64;
        if bucket_indices(&h.positive_spans).any(|i| !(0..=bounds).contains(&i)) {
            return Err(format!(
                "a bucket index is outside the {} custom bounds",
                h.custom_values.len()
            ));
        }
    } else if !h.custom_values.is_empty() {
        return Err("custom bounds sent with an exponential schema".into());
    }
    Ok(())
}

/// The index of every bucket the spans cover, in order: the first span's
/// offset is its first index, each later offset the gap after the
/// previous span.
pub(super) fn bucket_indices(spans: &[v2::BucketSpan]) -> impl Iterator<Item = i64> + '_ {
    let mut next = 0i64;
    spans.iter().flat_map(move |span| {
        let start = next + i64::from(span.offset);
        next = start + i64::from(span.length);
        start..next
    })
}

/// Bucket counts as floats: integer histograms send each bucket as the
/// difference to the previous one (across spans), float ones the counts.
pub(super) fn bucket_counts(deltas: &[i64], counts: &[f64]) -> Vec<f64> {
    if deltas.is_empty() {
        return counts.to_vec();
    }
    let mut count = 0i64;
    deltas
        .iter()
        .map(|delta| {
            count = count.wrapping_add(*delta);
            count as f64
        })
        .collect()
}

/// A `Sample` in the form senders write it, read without the field loop:
/// the value (field 1) then the timestamp (field 2), nothing else. `None`:
/// read it field by field.
fn common_sample(sample: &[u8]) -> Option<(f64, i64)> {
    let [0x09, rest @ ..] = sample else {
        return None;
    };
    let (bits, rest) = rest.split_first_chunk::<8>()?;
    let [0x10, timestamp @ ..] = rest else {
        return None;
    };
    let mut fields = Fields::of(timestamp);
    let timestamp = fields.varint().ok()?;
    // int64: two's complement in a varint.
    fields
        .is_empty()
        .then_some((f64::from_bits(u64::from_le_bytes(*bits)), timestamp as i64))
}

#[cfg(test)]
mod tests {
    use chingest_proto::prometheus::{Label, MetricMetadata, TimeSeries, WriteRequest};
    use prost::Message;

    use super::*;
    use v2::BucketSpan;

    #[test]
    fn common_forms_read_as_the_field_loop_does() {
        assert_eq!(
            string_pair(b"\x0a\x08__name__\x12\x02up"),
            Some(("__name__", "up"))
        );
        let sample = [
            &[0x09][..],
            &1.5f64.to_le_bytes(),
            &[0x10, 0xe8, 0x07], // 1000
        ]
        .concat();
        assert_eq!(common_sample(&sample), Some((1.5, 1000)));
        // Anything else is left to the field loop, which reads or refuses it.
        for label in [
            &b"\x0a\x01a"[..],        // no value
            b"\x12\x01b\x0a\x01a",    // value first
            b"\x0a\x01a\x12\x02b",    // value cut short
            b"\x0a\x01a\x12\x01bc",   // something after the value
            b"\x0a\x01\xff\x12\x01b", // not UTF-8
            b"\x0a\x02\xc3\x12\x01b", // a character cut by the field key
        ] {
            assert_eq!(string_pair(label), None, "{label:?}");
        }
        for sample in [
            &sample[..sample.len() - 1],         // timestamp cut short
            &[&sample[..], &[0x18, 1]].concat(), // another field after
            &sample[9..],                        // no value
        ] {
            assert_eq!(common_sample(sample), None, "{sample:?}");
        }
    }

    fn span(offset: i32, length: u32) -> BucketSpan {
        BucketSpan { offset, length }
    }

    #[test]
    fn spans_give_bucket_indices() {
        let spans = [span(-2, 2), span(3, 1), span(0, 2)];
        let got: Vec<i64> = bucket_indices(&spans).collect();
        assert_eq!(got, [-2, -1, 3, 4, 5]);
        assert_eq!(bucket_indices(&[]).count(), 0);
    }

    #[test]
    fn deltas_accumulate_across_spans() {
        assert_eq!(bucket_counts(&[2, 1, -3, 4], &[]), [2.0, 3.0, 0.0, 4.0]);
        assert_eq!(bucket_counts(&[], &[0.5, 2.0]), [0.5, 2.0]);
    }

    #[test]
    fn histograms_that_do_not_add_up_are_refused() {
        let ok = Histogram {
            schema: 3,
            positive_spans: vec![span(0, 2)],
            positive_deltas: vec![1, 1],
            ..Histogram::default()
        };
        assert_eq!(check_histogram(&ok), Ok(()));
        let cases = [
            (
                Histogram {
                    schema: 9,
                    ..ok.clone()
                },
                "schema 9",
            ),
            (
                Histogram {
                    positive_deltas: vec![1],
                    ..ok.clone()
                },
                "cover 2 buckets but 1",
            ),
            (
                Histogram {
                    positive_counts: vec![1.0, 2.0],
                    ..ok.clone()
                },
                "both",
            ),
            (
                Histogram {
                    custom_values: vec![1.0],
                    ..ok.clone()
                },
                "exponential",
            ),
            (
                Histogram {
                    schema: CUSTOM_BUCKETS_SCHEMA,
                    custom_values: vec![2.0, 1.0],
                    ..ok.clone()
                },
                "ascend",
            ),
            (
                Histogram {
                    schema: CUSTOM_BUCKETS_SCHEMA,
                    custom_values: vec![1.0],
                    positive_spans: vec![span(1, 2)],
                    ..ok.clone()
                },
                "outside the 1 custom bounds",
            ),
        ];
        for (histogram, expected) in cases {
            let err = check_histogram(&histogram).unwrap_err();
            assert!(err.contains(expected), "{err:?} lacks {expected:?}");
        }
    }

    fn label(name: &str, value: &str) -> Label {
        Label {
            name: name.to_owned().into(),
            value: value.to_owned().into(),
        }
    }

    /// Series and metadata with what a decoder can get wrong: empty and
    /// non-ASCII strings, negative and extreme timestamps, NaN and
    /// infinities, a series without samples, metadata sent twice.
    fn request() -> WriteRequest {
        let sample = |value, timestamp| Sample { value, timestamp };
        WriteRequest {
            timeseries: vec![
                TimeSeries {
                    labels: vec![label("__name__", "up"), label("instance", "")],
                    samples: vec![sample(1.0, 1_700_000_000_000), sample(f64::NAN, -1)],
                },
                TimeSeries {
                    labels: vec![label("température", "été ☀"), label("__name__", "t")],
                    samples: vec![sample(f64::NEG_INFINITY, i64::MIN), sample(-0.0, i64::MAX)],
                },
                TimeSeries {
                    labels: vec![label("__name__", "empty")],
                    samples: Vec::new(),
                },
            ],
            metadata: vec![
                MetricMetadata {
                    r#type: MetricType::Gauge as i32,
                    metric_family_name: "t".into(),
                    help: "old".into(),
                    unit: String::new(),
                },
                MetricMetadata {
                    r#type: 42,
                    metric_family_name: "t".into(),
                    help: "Température ☀".into(),
                    unit: "celsius".into(),
                },
            ],
        }
    }

    /// Asserts `decoded` holds what `request` says, in its order.
    fn assert_holds(decoded: &Decoded<'_>, request: &WriteRequest) {
        assert_eq!(decoded.series.len(), request.timeseries.len());
        for (series, sent) in decoded.series.iter().zip(&request.timeseries) {
            let labels: Vec<(&[u8], &[u8])> = decoded
                .labels(series)
                .iter()
                .map(|(n, v)| (n.as_bytes(), v.as_bytes()))
                .collect();
            let sent_labels: Vec<(&[u8], &[u8])> = sent
                .labels
                .iter()
                .map(|l| (&l.name[..], &l.value[..]))
                .collect();
            assert_eq!(labels, sent_labels);
            let bits = |samples: &[Sample]| -> Vec<(u64, i64)> {
                samples
                    .iter()
                    .map(|s| (s.value.to_bits(), s.timestamp))
                    .collect()
            };
            assert_eq!(bits(decoded.samples(series)), bits(&sent.samples));
        }
        let mut metadata = BTreeMap::new();
        for m in &request.metadata {
            let kind = MetricType::try_from(m.r#type).map_or("unknown", MetricType::name);
            metadata.insert(
                m.metric_family_name.as_str(),
                (kind, &m.help[..], &m.unit[..]),
            );
        }
        let decoded: BTreeMap<_, _> = decoded
            .metadata
            .iter()
            .map(|(name, m)| (*name, (m.kind, m.help, m.unit)))
            .collect();
        assert_eq!(decoded, metadata);
    }

    #[test]
    fn a_v1_request_reads_as_prost_reads_it() {
        let encoded = request().encode_to_vec();
        let decoded = Decoded::v1(&encoded).unwrap();
        // What prost reads back (a -0.0 sample, say, is not on the wire).
        assert_holds(&decoded, &WriteRequest::decode(&encoded[..]).unwrap());
        assert_eq!(decoded.metadata["t"].kind, "unknown", "the newest wins");
    }

    /// Every prefix of a request: refused where `prost` refuses it, and
    /// otherwise read as `prost` reads it (or refused for a series without
    /// a metric name, which `prost` does not check).
    #[test]
    fn a_cut_request_is_refused_where_prost_refuses_it() {
        let encoded = request().encode_to_vec();
        for end in 0..encoded.len() {
            let cut = &encoded[..end];
            match (WriteRequest::decode(cut), Decoded::v1(cut)) {
                (Err(_), Ok(_)) => panic!("{end} bytes: prost refuses, v1 reads"),
                (Err(_), Err(_)) => {}
                (Ok(request), Ok(decoded)) => assert_holds(&decoded, &request),
                (Ok(request), Err(err)) => assert!(
                    request
                        .timeseries
                        .iter()
                        .any(|s| s.labels.iter().all(|l| l.name != METRIC_NAME_LABEL)),
                    "{end} bytes: {err}"
                ),
            }
        }
    }

    #[test]
    fn a_repeated_label_is_refused_in_any_order() {
        for labels in [
            vec![label("__name__", "up"), label("a", "1"), label("a", "2")],
            vec![label("a", "1"), label("__name__", "up"), label("a", "2")],
        ] {
            let request = WriteRequest {
                timeseries: vec![TimeSeries {
                    labels,
                    samples: Vec::new(),
                }],
                metadata: Vec::new(),
            };
            let err = Decoded::v1(&request.encode_to_vec()).unwrap_err();
            assert_eq!(err.to_string(), r#"series 0 repeats the label "a""#);
        }
    }

    #[test]
    fn unknown_fields_are_skipped_and_wrong_wire_types_refused() {
        // A label with an unknown fixed32 field 3 before its name.
        let label = [
            0x1d, 0, 0, 0, 0, 0x0a, 8, b'_', b'_', b'n', b'a', b'm', b'e', b'_', b'_', 0x12, 1,
            b'x',
        ];
        // A series with that label and an unknown varint field 9.
        let mut series = vec![0x48, 7, 0x0a, label.len() as u8];
        series.extend(label);
        // A request with an unknown bytes field 5 and the series.
        let mut request = vec![0x2a, 2, 1, 2, 0x0a, series.len() as u8];
        request.extend(&series);
        let decoded = Decoded::v1(&request).unwrap();
        assert_eq!(decoded.labels(&decoded.series[0]), [("__name__", "x")]);
        // The series sent as a varint.
        assert!(Decoded::v1(&[0x08, 1]).is_err());
        // A sample's value sent as a varint.
        let series = [0x0a, 4, 0x0a, 2, b'a', b'b', 0x12, 2, 0x08, 1];
        let mut request = vec![0x0a, series.len() as u8];
        request.extend(series);
        let err = Decoded::v1(&request).unwrap_err().to_string();
        assert!(err.contains("Sample field 1"), "{err}");
    }
}
