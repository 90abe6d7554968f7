//! A [`Decoded`] request as Arrow batches, one per measurement it fills:
//!
//! | measurement | tags | fields |
//! |---|---|---|
//! | `prometheus` | the labels | `value`, `created_timestamp` (2.0) |
//! | `prometheus_histograms` | the labels | `count`, `sum`, `schema`, `zero_threshold`, `zero_count`, `reset_hint`, `positive_index`, `positive_count`, `negative_index`, `negative_count`, `custom_values`, `created_timestamp` |
//! | `prometheus_exemplars` | the series' labels | `value`, one string per exemplar label (`trace_id`, …) |
//! | `prometheus_metadata` | `metric` | `type`, `help`, `unit` (time 0) |
//!
//! Rows go series after series, each series' labels given once (its
//! tags). A label whose name is one of its measurement's columns makes the
//! request invalid.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Float64Builder, Int64Builder, ListBuilder, StringBuilder};
use chingest_proto::prometheus::v2::{Count, ResetHint, ZeroCount};

use super::decode::{bucket_counts, bucket_indices, Decoded, Series};
use crate::error::{Error, Result};
use crate::table::{metadata_table, SeriesTags, Table};

/// `series`' labels as tags.
fn tags<'a, 'd>(
    decoded: &'d Decoded<'a>,
    series: &Series<'a>,
) -> impl Iterator<Item = (&'a str, Cow<'a, str>)> + 'd {
    decoded
        .labels(series)
        .iter()
        .map(|&(name, value)| (name, Cow::Borrowed(value)))
}

/// The measurement float samples are stored in.
pub const SAMPLES: &str = "prometheus";
/// The measurement native histograms are stored in.
pub const HISTOGRAMS: &str = "prometheus_histograms";
/// The measurement exemplars are stored in.
pub const EXEMPLARS: &str = "prometheus_exemplars";
/// The measurement metric metadata is stored in.
pub const METADATA: &str = "prometheus_metadata";
/// Every measurement remote write fills.
pub const MEASUREMENTS: [&str; 4] = [SAMPLES, HISTOGRAMS, EXEMPLARS, METADATA];

/// The field of [`SAMPLES`] holding a sample's value, and of [`EXEMPLARS`]
/// an exemplar's. The series' labels are the tags, as sent (the metric
/// name in `__name__`).
pub const VALUE: &str = "value";
/// The tag of [`METADATA`] holding the metric family's name.
pub const METADATA_METRIC: &str = "metric";
/// The fields of [`METADATA`]: the family's type, help and unit.
pub const METADATA_FIELDS: [&str; 3] = ["type", "help", "unit"];

/// The field holding a series' created (start) timestamp, in ms.
const CREATED: &str = "created_timestamp";

/// The batches of every measurement `decoded` has rows for, metadata first.
pub fn tables<'a>(decoded: &Decoded<'a>) -> Result<Vec<Table<'a>>> {
    let mut tables = Vec::with_capacity(4);
    tables.extend(metadata(decoded)?);
    tables.extend(samples(decoded)?);
    tables.extend(histograms(decoded)?);
    tables.extend(exemplars(decoded)?);
    Ok(tables)
}

/// Milliseconds to the nanoseconds of the `time` column.
fn nanos(series: usize, ms: i64) -> Result<i64> {
    ms.checked_mul(1_000_000).ok_or_else(|| {
        Error::Invalid(format!(
            "series {series}: timestamp {ms} ms is out of range"
        ))
    })
}

fn samples<'a>(decoded: &Decoded<'a>) -> Result<Option<Table<'a>>> {
    let rows = decoded.sample_count();
    if rows == 0 {
        return Ok(None);
    }
    let has_samples = |s: &Series<'_>| !s.samples.is_empty();
    let created = decoded
        .series
        .iter()
        .any(|s| has_samples(s) && s.created_timestamp != 0);
    let reserved: &[&str] = if created {
        &["time", VALUE, CREATED]
    } else {
        &["time", VALUE]
    };
    let mut labels =
        SeriesTags::with_capacity(reserved, decoded.series.len(), decoded.label_pairs.len());
    let mut times = Int64Builder::with_capacity(rows);
    let mut values = Float64Builder::with_capacity(rows);
    let mut created_at = Int64Builder::with_capacity(if created { rows } else { 0 });
    for (i, series) in decoded
        .series
        .iter()
        .enumerate()
        .filter(|(_, s)| has_samples(s))
    {
        labels.push(tags(decoded, series), series.samples.len())?;
        for sample in decoded.samples(series) {
            times.append_value(nanos(i, sample.timestamp)?);
            values.append_value(sample.value);
        }
        if created {
            let value = (series.created_timestamp != 0).then_some(series.created_timestamp);
            (0..series.samples.len()).for_each(|_| created_at.append_option(value));
        }
    }
    let mut fields: Vec<(&str, ArrayRef)> = vec![(VALUE, Arc::new(values.finish()))];
    if created {
        fields.push((CREATED, Arc::new(created_at.finish())));
    }
    let (tags, series) = labels.finish();
    Table::new(SAMPLES, times, tags, series, fields).map(Some)
}

/// The fields of a histogram row, in column order.
const HISTOGRAM_FIELDS: [&str; 11] = [
    "count",
    "sum",
    "schema",
    "zero_threshold",
    "zero_count",
    "reset_hint",
    "positive_index",
    "positive_count",
    "negative_index",
    "negative_count",
    "custom_values",
];

fn histograms<'a>(decoded: &Decoded<'a>) -> Result<Option<Table<'a>>> {
    let rows = decoded.histogram_count();
    if rows == 0 {
        return Ok(None);
    }
    let has_histograms = |s: &Series<'_>| !s.histograms.is_empty();
    let mut reserved = vec!["time", CREATED];
    reserved.extend(HISTOGRAM_FIELDS);
    let mut labels = SeriesTags::new(&reserved);
    let mut times = Int64Builder::with_capacity(rows);
    let (mut count, mut sum, mut zero_threshold, mut zero_count) = (
        Float64Builder::with_capacity(rows),
        Float64Builder::with_capacity(rows),
        Float64Builder::with_capacity(rows),
        Float64Builder::with_capacity(rows),
    );
    let mut schema = Int64Builder::with_capacity(rows);
    let mut reset_hint = StringBuilder::new();
    let mut created = Int64Builder::with_capacity(rows);
    let index_list = || ListBuilder::new(Int64Builder::new());
    let float_list = || ListBuilder::new(Float64Builder::new());
    let (mut positive_index, mut negative_index) = (index_list(), index_list());
    let (mut positive_count, mut negative_count, mut custom_values) =
        (float_list(), float_list(), float_list());
    for (i, series) in decoded
        .series
        .iter()
        .enumerate()
        .filter(|(_, s)| has_histograms(s))
    {
        labels.push(tags(decoded, series), series.histograms.len())?;
        for h in series.histograms {
            times.append_value(nanos(i, h.timestamp)?);
            count.append_value(match h.count {
                Some(Count::Int(n)) => n as f64,
                Some(Count::Float(n)) => n,
                None => 0.0,
            });
            sum.append_value(h.sum);
            schema.append_value(i64::from(h.schema));
            zero_threshold.append_value(h.zero_threshold);
            zero_count.append_value(match h.zero_count {
                Some(ZeroCount::Int(n)) => n as f64,
                Some(ZeroCount::Float(n)) => n,
                None => 0.0,
            });
            let hint = ResetHint::try_from(h.reset_hint).unwrap_or(ResetHint::Unspecified);
            reset_hint.append_value(hint.name());
            positive_index.append_value(bucket_indices(&h.positive_spans).map(Some));
            positive_count.append_value(
                bucket_counts(&h.positive_deltas, &h.positive_counts)
                    .into_iter()
                    .map(Some),
            );
            negative_index.append_value(bucket_indices(&h.negative_spans).map(Some));
            negative_count.append_value(
                bucket_counts(&h.negative_deltas, &h.negative_counts)
                    .into_iter()
                    .map(Some),
            );
            custom_values.append_value(h.custom_values.iter().copied().map(Some));
            created
                .append_option((series.created_timestamp != 0).then_some(series.created_timestamp));
        }
    }
    let arrays: [ArrayRef; 11] = [
        Arc::new(count.finish()),
        Arc::new(sum.finish()),
        Arc::new(schema.finish()),
        Arc::new(zero_threshold.finish()),
        Arc::new(zero_count.finish()),
        Arc::new(reset_hint.finish()),
        Arc::new(positive_index.finish()),
        Arc::new(positive_count.finish()),
        Arc::new(negative_index.finish()),
        Arc::new(negative_count.finish()),
        Arc::new(custom_values.finish()),
    ];
    let mut fields: Vec<(&str, ArrayRef)> = HISTOGRAM_FIELDS.into_iter().zip(arrays).collect();
    let created = created.finish();
    if created.null_count() < created.len() {
        fields.push((CREATED, Arc::new(created)));
    }
    let (tags, series) = labels.finish();
    Table::new(HISTOGRAMS, times, tags, series, fields).map(Some)
}

fn exemplars<'a>(decoded: &Decoded<'a>) -> Result<Option<Table<'a>>> {
    if decoded.exemplars.is_empty() {
        return Ok(None);
    }
    let rows = decoded.exemplars.len();
    let names: BTreeSet<&str> = decoded.exemplar_pairs.iter().map(|(n, _)| *n).collect();
    let mut reserved = vec!["time", VALUE];
    reserved.extend(names.iter().copied());
    if let Some(bad) = names.iter().find(|n| ["", "time", VALUE].contains(*n)) {
        return Err(Error::Invalid(format!(
            "exemplar label name {bad:?} is not supported"
        )));
    }
    let mut labels = SeriesTags::new(&reserved);
    let mut times = Int64Builder::with_capacity(rows);
    let mut values = Float64Builder::with_capacity(rows);
    let mut exemplar_labels: Vec<StringBuilder> =
        names.iter().map(|_| StringBuilder::new()).collect();
    for exemplar in &decoded.exemplars {
        let series = &decoded.series[exemplar.series];
        labels.push(tags(decoded, series), 1).map_err(|e| {
            Error::Invalid(format!(
                "{e} (an exemplar label cannot share a series label's name)"
            ))
        })?;
        times.append_value(nanos(exemplar.series, exemplar.timestamp)?);
        values.append_value(exemplar.value);
        let pairs = &decoded.exemplar_pairs[exemplar.labels.clone()];
        for (name, builder) in names.iter().zip(&mut exemplar_labels) {
            builder.append_option(pairs.iter().find(|(n, _)| n == name).map(|(_, v)| *v));
        }
    }
    let mut fields: Vec<(&str, ArrayRef)> = vec![(VALUE, Arc::new(values.finish()))];
    for (name, mut builder) in names.iter().zip(exemplar_labels) {
        fields.push((name, Arc::new(builder.finish())));
    }
    let (tags, series) = labels.finish();
    Table::new(EXEMPLARS, times, tags, series, fields).map(Some)
}

/// Points of [`METADATA`]: tag [`METADATA_METRIC`], [`METADATA_FIELDS`]
/// (see [`metadata_table`]).
fn metadata<'a>(decoded: &Decoded<'a>) -> Result<Option<Table<'a>>> {
    if decoded.metadata.is_empty() {
        return Ok(None);
    }
    let rows = decoded
        .metadata
        .iter()
        .map(|(name, m)| (*name, [m.kind, m.help, m.unit]));
    metadata_table(METADATA, METADATA_METRIC, METADATA_FIELDS, rows).map(Some)
}
