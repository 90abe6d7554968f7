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
use chingest_proto::prometheus::{MetricType, Sample, WriteRequest};

use crate::error::{Error, Result};

/// The label that names a series' metric.
pub(super) const METRIC_NAME_LABEL: &str = "__name__";

/// A request resolved to strings, borrowing from the decoded message.
#[derive(Debug, Default)]
pub struct Decoded<'a> {
    /// Every series' labels, one flat list (`Series::labels` ranges in it).
    pub(super) label_pairs: Vec<(&'a str, &'a str)>,
    /// The series, in request order.
    pub(super) series: Vec<Series<'a>>,
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
    /// Its position in [`Decoded::series`].
    pub(super) index: usize,
    /// Its labels: a range of [`Decoded::label_pairs`].
    pub(super) labels: Range<usize>,
    /// Float samples.
    pub(super) samples: &'a [Sample],
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

    /// Float samples in the request.
    pub fn sample_count(&self) -> usize {
        self.series.iter().map(|s| s.samples.len()).sum()
    }

    /// Native histogram samples in the request.
    pub fn histogram_count(&self) -> usize {
        self.series.iter().map(|s| s.histograms.len()).sum()
    }

    /// Exemplars in the request.
    pub fn exemplar_count(&self) -> usize {
        self.exemplars.len()
    }

    /// A 1.0 `WriteRequest`.
    pub fn v1(request: &'a WriteRequest) -> Result<Decoded<'a>> {
        let mut decoded = Decoded::default();
        for (i, series) in request.timeseries.iter().enumerate() {
            let start = decoded.label_pairs.len();
            for label in &series.labels {
                decoded
                    .label_pairs
                    .push((utf8(&label.name, "name")?, utf8(&label.value, "value")?));
            }
            decoded.push_series(i, start, &series.samples, &[], 0)?;
        }
        for entry in &request.metadata {
            let kind = MetricType::try_from(entry.r#type).map_or("unknown", MetricType::name);
            decoded.metadata.insert(
                &entry.metric_family_name,
                Metadata {
                    kind,
                    help: &entry.help,
                    unit: &entry.unit,
                },
            );
        }
        Ok(decoded)
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
            let index = decoded.push_series(
                i,
                start,
                &series.samples,
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

    /// Adds a series whose labels start at `start` in `label_pairs`,
    /// after checking them; returns its index.
    fn push_series(
        &mut self,
        i: usize,
        start: usize,
        samples: &'a [Sample],
        histograms: &'a [Histogram],
        created_timestamp: i64,
    ) -> Result<usize> {
        let labels = &self.label_pairs[start..];
        for (k, (name, _)) in labels.iter().enumerate() {
            if name.is_empty() {
                return Err(Error::Invalid(format!(
                    "series {i} has an empty label name"
                )));
            }
            if labels[..k].iter().any(|(other, _)| other == name) {
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
            index: self.series.len(),
            labels: start..self.label_pairs.len(),
            samples,
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

fn utf8<'a>(bytes: &'a [u8], what: &str) -> Result<&'a str> {
    std::str::from_utf8(bytes).map_err(|_| Error::Invalid(format!("a label {what} is not UTF-8")))
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

#[cfg(test)]
mod tests {
    use super::*;
    use v2::BucketSpan;

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
}
