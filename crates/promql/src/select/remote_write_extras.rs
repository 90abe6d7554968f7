//! What remote write keeps beside samples: exemplars, metric families'
//! metadata, and the time bounds of its samples, each read from its own
//! measurement.

use std::collections::HashMap;

use arrow::array::AsArray as _;
use arrow::datatypes::{Float64Type, Int64Type, UInt64Type};
use chingest::layout::names::{quote_ident, quote_literal};
use chingest::layout::schema::FieldType;
use chingest_codecs::prometheus as remote_write;

use super::matcher::LabelMatcher;
use super::series::Overflow;
use super::source::{strings, time_condition, Source};
use crate::error::Error;
use crate::value::Labels;

/// An exemplar: its own labels (`trace_id`, …), value and time (ms).
#[derive(Debug, Clone, PartialEq)]
pub struct Exemplar {
    /// The exemplar's labels.
    pub labels: Labels,
    /// Its value.
    pub value: f64,
    /// Its time, ms since the epoch.
    pub time: i64,
}

/// A metric family's metadata, as remote write sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    /// The family's name.
    pub metric: String,
    /// `counter`, `gauge`, …
    pub kind: String,
    /// Its help text.
    pub help: String,
    /// Its unit.
    pub unit: String,
}

impl Source<'_> {
    /// The exemplars of the series the matchers select, in `[start, end]`
    /// (ms), by series; each series' in time order.
    pub async fn exemplars(
        &self,
        matchers: &[LabelMatcher],
        start: i64,
        end: i64,
        series_budget: &mut usize,
    ) -> Result<Vec<(Labels, Vec<Exemplar>)>, Error> {
        let Some((candidate, schema)) =
            self.prometheus_shaped(remote_write::EXEMPLARS, remote_write::VALUE)
        else {
            return Ok(Vec::new());
        };
        let found = self
            .candidate_series(&candidate, matchers, None, series_budget, Overflow::Refuse)
            .await?;
        if found.is_empty() {
            return Ok(Vec::new());
        }
        let label_fields: Vec<&String> = schema
            .fields
            .iter()
            .filter(|(_, kind)| *kind == FieldType::String)
            .map(|(name, _)| name)
            .collect();
        let columns: String = label_fields
            .iter()
            .map(|f| format!(", toString(ifNull({}, ''))", quote_ident(f)))
            .collect();
        let sql = format!(
            "SELECT series_id, toUnixTimestamp64Milli(time), toFloat64({value}){columns} FROM {facts} \
             WHERE series_id IN (SELECT series_id FROM {series} FINAL WHERE {condition}) AND {time} \
             ORDER BY series_id, time LIMIT {limit}",
            value = quote_ident(&candidate.field),
            facts = candidate.names.storage_table,
            series = candidate.names.series_table,
            condition = self.series_condition(&candidate, matchers),
            time = time_condition(start, end),
            limit = self.limits.max_samples,
        );
        let batches = self.statement(&sql).await?;
        let mut by_series: HashMap<u64, Vec<Exemplar>> = HashMap::new();
        for batch in &batches {
            let ids = batch.column(0).as_primitive::<UInt64Type>();
            let times = batch.column(1).as_primitive::<Int64Type>();
            let values = batch.column(2).as_primitive::<Float64Type>();
            let texts: Vec<Vec<String>> = (3..batch.num_columns())
                .map(|c| strings(batch.column(c).as_ref()))
                .collect();
            for row in 0..batch.num_rows() {
                let id = ids.value(row);
                if !found.contains_key(&id) {
                    continue;
                }
                let labels = label_fields
                    .iter()
                    .zip(&texts)
                    .map(|(name, column)| ((*name).clone(), column[row].clone()))
                    .collect();
                by_series.entry(id).or_default().push(Exemplar {
                    labels: Labels::new(labels),
                    value: values.value(row),
                    time: times.value(row),
                });
            }
        }
        let mut out: Vec<(Labels, Vec<Exemplar>)> = by_series
            .into_iter()
            .map(|(id, exemplars)| (found[&id].clone(), exemplars))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// The metadata of each metric family (the newest of each), sorted by
    /// name; of `metric` only when given.
    pub async fn metadata(&self, metric: Option<&str>) -> Result<Vec<Metadata>, Error> {
        let [kind, help, unit] = remote_write::METADATA_FIELDS;
        let Some((candidate, schema)) = self.prometheus_shaped(remote_write::METADATA, kind) else {
            return Ok(Vec::new());
        };
        let column = |name: &str| {
            if schema.fields.iter().any(|(f, _)| f == name) {
                format!(
                    "toString(argMax(ifNull({}, ''), f.time))",
                    quote_ident(name)
                )
            } else {
                "''".to_owned()
            }
        };
        let tag = quote_literal(remote_write::METADATA_METRIC);
        let filter = metric.map_or(String::new(), |m| {
            format!(" AND tags[{tag}] = {}", quote_literal(m))
        });
        let sql = format!(
            "SELECT s.tags[{tag}] AS metric, {kind}, {help}, {unit} FROM {facts} AS f \
             INNER JOIN (SELECT series_id, tags FROM {series} FINAL WHERE measurement = {measurement}{filter}) AS s \
             USING series_id GROUP BY metric ORDER BY metric",
            kind = column(kind),
            help = column(help),
            unit = column(unit),
            facts = candidate.names.storage_table,
            series = candidate.names.series_table,
            measurement = quote_literal(remote_write::METADATA),
        );
        let batches = self.statement(&sql).await?;
        let mut out = Vec::new();
        for batch in &batches {
            let [metric, kind, help, unit] =
                [0, 1, 2, 3].map(|c| strings(batch.column(c).as_ref()));
            for (((metric, kind), help), unit) in metric.into_iter().zip(kind).zip(help).zip(unit) {
                out.push(Metadata {
                    metric,
                    kind,
                    help,
                    unit,
                });
            }
        }
        Ok(out)
    }

    /// The first and last sample times (ms) of remote write's samples, if
    /// there are any.
    pub async fn time_bounds(&self) -> Result<Option<(i64, i64)>, Error> {
        let Some((candidate, _)) =
            self.prometheus_shaped(remote_write::SAMPLES, remote_write::VALUE)
        else {
            return Ok(None);
        };
        let sql = format!(
            "SELECT toUnixTimestamp64Milli(min(time)), toUnixTimestamp64Milli(max(time)), count() FROM {}",
            candidate.names.storage_table
        );
        let batches = self.statement(&sql).await?;
        let Some(batch) = batches.iter().find(|b| b.num_rows() > 0) else {
            return Ok(None);
        };
        let count = batch.column(2).as_primitive::<UInt64Type>().value(0);
        let min = batch.column(0).as_primitive::<Int64Type>().value(0);
        let max = batch.column(1).as_primitive::<Int64Type>().value(0);
        Ok((count > 0).then_some((min, max)))
    }
}
