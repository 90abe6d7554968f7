//! Which series the matchers select, with their labels: from the
//! ingestor's in-memory index where it can say, else from the engine's
//! series table (OTLP's names made from its metadata); bounded by the
//! query's series budget ([`Overflow`]). Also the label lookups the index
//! answers alone.

use std::collections::HashMap;

use arrow::array::AsArray as _;
use arrow::datatypes::UInt64Type;
use chingest::layout::names::{quote_ident, quote_literal, TableNames};
use chingest::{TagMatcher, TagTest};
use chingest_codecs::otlp;

use super::candidate::{Candidate, Naming};
use super::matcher::{LabelMatcher, MatchKind};
use super::source::{ms_to_ns, strings, time_condition, Source};
use crate::error::Error;
use crate::naming;
use crate::value::{Labels, METRIC_NAME};

impl Source<'_> {
    /// The series of `candidate` the matchers select, by id; bounded by
    /// `budget` (series left for the query), past which `overflow` says
    /// what happens.
    pub(super) async fn candidate_series(
        &self,
        candidate: &Candidate,
        matchers: &[LabelMatcher],
        range: Option<(i64, i64)>,
        budget: &mut usize,
        overflow: Overflow,
    ) -> Result<HashMap<u64, Labels>, Error> {
        if let Some(found) = self.indexed_series(candidate, matchers, range, budget, overflow)? {
            return Ok(found);
        }
        let mut sql = format!(
            "SELECT series_id, mapKeys(tags), mapValues(tags) FROM {} FINAL WHERE {}",
            candidate.names.series_table,
            self.series_condition(candidate, matchers)
        );
        let mut facts = Vec::new();
        if let Some((start, end)) = range {
            facts.push(time_condition(start, end));
        }
        if candidate.sparse {
            facts.push(format!("{} IS NOT NULL", quote_ident(&candidate.field)));
        }
        if !facts.is_empty() {
            sql.push_str(&format!(
                " AND series_id IN (SELECT series_id FROM {} WHERE {})",
                self.facts(candidate, range),
                facts.join(" AND ")
            ));
        }
        sql.push_str(&format!(" LIMIT {}", budget.saturating_add(1)));
        let batches = self.statement(&sql).await?;
        let otlp = match candidate.naming {
            Naming::Otlp { gauge } => Some((gauge, self.otlp_names(candidate, gauge).await?)),
            _ => None,
        };
        let mut out = HashMap::new();
        'batches: for batch in &batches {
            let ids = batch.column(0).as_primitive::<UInt64Type>();
            let keys = batch.column(1).as_list::<i32>();
            let values = batch.column(2).as_list::<i32>();
            for row in 0..batch.num_rows() {
                let id = ids.value(row);
                let keys = strings(&keys.value(row));
                let values = strings(&values.value(row));
                let labels = match (&candidate.naming, &otlp) {
                    (Naming::Otlp { .. }, Some((gauge, names))) => {
                        otlp_labels(keys, values, *gauge, names, id)
                    }
                    (naming, _) => plain_labels(naming, keys.into_iter().zip(values)),
                };
                if matchers.iter().all(|m| m.matches(labels.get(&m.name))) {
                    if !overflow.take(budget, self.limits.max_series)? {
                        break 'batches;
                    }
                    out.insert(id, labels);
                }
            }
        }
        Ok(out)
    }

    /// The series of `candidate` the matchers select, from the ingestor's
    /// in-memory index (no engine statement), with a value of the field in
    /// `range` (ms) if given, judged by each series' first and newest value
    /// (as Prometheus judges by its chunks' bounds). `None`: the
    /// measurement is not indexed now (or its names need the engine, as
    /// OTLP's do): ask the engine.
    fn indexed_series(
        &self,
        candidate: &Candidate,
        matchers: &[LabelMatcher],
        range: Option<(i64, i64)>,
        budget: &mut usize,
        overflow: Overflow,
    ) -> Result<Option<HashMap<u64, Labels>>, Error> {
        let range = range.map(|(start, end)| ms_to_ns(start, end));
        // What the index can say; everything is checked again on the
        // labels below (a renamed tag, the metric name of a field).
        let Some(indexed) =
            self.with_index_matchers(candidate, matchers, false, |table, pushed| {
                self.ingestor
                    .indexed_series(table, pushed, &candidate.field, range)
            })
        else {
            return Ok(None);
        };
        let mut out = HashMap::with_capacity(indexed.len());
        for series in indexed {
            let labels = plain_labels(&candidate.naming, series.tags.into_iter());
            if !matchers.iter().all(|m| m.matches(labels.get(&m.name))) {
                continue;
            }
            if !overflow.take(budget, self.limits.max_series)? {
                break;
            }
            out.insert(series.series_id, labels);
        }
        Ok(Some(out))
    }

    /// What OTLP's names need beside a series' tags: each metric's unit
    /// (its newest metadata), and for sums the series that are monotonic
    /// (their newest point says).
    async fn otlp_names(&self, candidate: &Candidate, gauge: bool) -> Result<OtlpNames, Error> {
        let mut names = OtlpNames::default();
        let [_, _, unit] = otlp::METADATA_FIELDS;
        if let Some(schema) = self
            .ingestor
            .measurement((&self.database, &self.retention_policy, otlp::METADATA))
            .filter(|s| s.fields.iter().any(|(f, _)| f == unit))
        {
            let metadata = TableNames::new(&self.database, &self.retention_policy, &schema.name);
            let sql = format!(
                "SELECT s.tags[{tag}], toString(argMax(ifNull(f.{unit}, ''), f.time)) FROM {facts} AS f \
                 INNER JOIN (SELECT series_id, tags FROM {series} FINAL WHERE measurement = {measurement}) AS s \
                 USING series_id GROUP BY s.tags[{tag}]",
                tag = quote_literal(otlp::METRIC_NAME),
                unit = quote_ident(unit),
                facts = metadata.storage_table,
                series = metadata.series_table,
                measurement = quote_literal(otlp::METADATA),
            );
            for batch in &self.statement(&sql).await? {
                let [metric, unit] = [0, 1].map(|c| strings(batch.column(c).as_ref()));
                names.units.extend(metric.into_iter().zip(unit));
            }
        }
        if !gauge {
            let sql = format!(
                "SELECT series_id FROM {} GROUP BY series_id HAVING argMax({}, time)",
                candidate.names.storage_table,
                quote_ident(otlp::IS_MONOTONIC)
            );
            for batch in &self.statement(&sql).await? {
                let ids = batch.column(0).as_primitive::<UInt64Type>();
                names.monotonic.extend(ids.values().iter().copied());
            }
        }
        Ok(names)
    }

    /// Calls `ask` with the candidate's table and the matchers the index
    /// can say of it. `None` for OTLP's names (made by the engine), and,
    /// when the selection must be `exact` (not checked again on labels),
    /// for a matcher on a renamed tag key.
    fn with_index_matchers<T>(
        &self,
        candidate: &Candidate,
        matchers: &[LabelMatcher],
        exact: bool,
        ask: impl FnOnce((&str, &str, &str), &[TagMatcher<'_>]) -> Option<T>,
    ) -> Option<T> {
        if matches!(candidate.naming, Naming::Otlp { .. }) {
            return None;
        }
        let tests: Vec<_> = matchers
            .iter()
            .map(|m| move |value: &str| m.matches(value))
            .collect();
        let mut pushed = Vec::with_capacity(matchers.len());
        for (m, test) in matchers.iter().zip(&tests) {
            if self.pushed_down(candidate, m) {
                pushed.push(TagMatcher {
                    key: &m.name,
                    test: match m.kind {
                        MatchKind::Equal => TagTest::Equal(&m.value),
                        _ => TagTest::Matches(test),
                    },
                });
            } else if exact
                && !(m.name == METRIC_NAME && matches!(candidate.naming, Naming::Fixed(_)))
            {
                // (A fixed name's matchers chose the candidate already.)
                return None;
            }
        }
        ask(self.table_of(candidate), &pushed)
    }

    /// The values of label `name` among the series any of `selectors`
    /// selects (every series when there are none), with a sample in
    /// `range` (ms) if given, from the index's postings (no label set is
    /// built); sorted. `None` when some table's series cannot be answered
    /// so (not indexed now, named by OTLP's rules, the label a renamed tag
    /// key or a fixed metric name): ask [`series`](Self::series).
    pub(crate) fn indexed_label_values(
        &self,
        name: &str,
        selectors: &[Vec<LabelMatcher>],
        range: Option<(i64, i64)>,
    ) -> Option<Vec<String>> {
        let range = range.map(|(start, end)| ms_to_ns(start, end));
        let mut values = std::collections::BTreeSet::new();
        for matchers in every_series_or(selectors) {
            for candidate in self.candidates(matchers) {
                if name == METRIC_NAME && !matches!(candidate.naming, Naming::Tag) {
                    return None;
                }
                let named = |k: &String| naming::label_name(k) == name;
                match candidate.tag_keys.iter().filter(|k| named(k)).count() {
                    0 => continue,
                    1 if candidate.tag_keys.iter().any(|k| k == name) => {}
                    _ => return None,
                }
                let field = Some(candidate.field.as_str());
                values.extend(self.with_index_matchers(
                    &candidate,
                    matchers,
                    true,
                    |table, pushed| self.ingestor.tag_values(table, name, pushed, field, range),
                )?);
            }
        }
        values.remove("");
        Some(values.into_iter().collect())
    }

    /// The label names of the series any of `selectors` selects, as
    /// [`indexed_label_values`](Self::indexed_label_values) finds them;
    /// `None` when it would say `None`.
    pub(crate) fn indexed_label_names(
        &self,
        selectors: &[Vec<LabelMatcher>],
        range: Option<(i64, i64)>,
    ) -> Option<Vec<String>> {
        let range = range.map(|(start, end)| ms_to_ns(start, end));
        let mut names = std::collections::BTreeSet::new();
        for matchers in every_series_or(selectors) {
            for candidate in self.candidates(matchers) {
                let field = Some(candidate.field.as_str());
                let keys =
                    self.with_index_matchers(&candidate, matchers, true, |table, pushed| {
                        self.ingestor.tag_keys(table, pushed, field, range)
                    })?;
                if let Naming::Fixed(_) = candidate.naming {
                    // Named by its table, not a tag: a series without
                    // tags would not show whether any is selected.
                    if keys.is_empty() {
                        return None;
                    }
                    names.insert(METRIC_NAME.to_owned());
                }
                names.extend(keys.iter().map(|k| naming::label_name(k)));
            }
        }
        Some(names.into_iter().collect())
    }

    /// The label sets of the series any of `selectors` selects (all series
    /// when there are none), with a sample in `range` if given; sorted,
    /// each once. With a `limit`, the first that many found (a listing);
    /// without, every one, refused past `query.max_series`.
    pub async fn series(
        &self,
        selectors: &[Vec<LabelMatcher>],
        range: Option<(i64, i64)>,
        limit: Option<usize>,
    ) -> Result<Vec<Labels>, Error> {
        let (mut budget, overflow) = match limit {
            Some(limit) => (limit, Overflow::Truncate),
            None => (self.limits.max_series, Overflow::Refuse),
        };
        let mut out = Vec::new();
        for matchers in every_series_or(selectors) {
            for candidate in self.candidates(matchers) {
                let found = self
                    .candidate_series(&candidate, matchers, range, &mut budget, overflow)
                    .await?;
                out.extend(found.into_values());
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }
}

/// The labels of a series named by its tags or by its measurement and
/// field: its tags with valid label names, and the metric name.
fn plain_labels(naming: &Naming, tags: impl Iterator<Item = (String, String)>) -> Labels {
    let mut pairs: Vec<(String, String)> =
        tags.map(|(k, v)| (naming::into_label_name(k), v)).collect();
    if let Naming::Fixed(metric) = naming {
        pairs.push((METRIC_NAME.to_owned(), metric.clone()));
    }
    Labels::new(pairs)
}

/// What OTLP's Prometheus names need beside a series' tags.
#[derive(Default)]
struct OtlpNames {
    /// Each metric's unit.
    units: HashMap<String, String>,
    /// The monotonic sums' series.
    monotonic: std::collections::HashSet<u64>,
}

/// An OTLP series' labels: its metric's Prometheus name, its tags as
/// labels, and `job` and `instance` from the service (as OpenTelemetry's
/// Prometheus exporters set them).
fn otlp_labels(
    keys: Vec<String>,
    values: Vec<String>,
    gauge: bool,
    names: &OtlpNames,
    id: u64,
) -> Labels {
    let tags: HashMap<String, String> = keys.into_iter().zip(values).collect();
    let tag = |key: &str| tags.get(key).map_or("", String::as_str);
    // The service's attributes (OpenTelemetry's semantic conventions), by
    // the tags the codec stores resource attributes under.
    let resource = |attribute: &str| {
        tags.iter()
            .find(|(k, _)| otlp::resource_attribute(k) == Some(attribute))
            .map_or("", |(_, v)| v.as_str())
    };
    let metric = tag(otlp::METRIC_NAME);
    let unit = names.units.get(metric).map_or("", String::as_str);
    let name = naming::otlp_metric_name(metric, unit, gauge, names.monotonic.contains(&id));
    let mut pairs: Vec<(String, String)> = tags
        .iter()
        .filter(|(k, _)| *k != otlp::METRIC_NAME)
        .map(|(k, v)| (naming::label_name(k), v.clone()))
        .collect();
    let service = resource("service.name");
    let job = match resource("service.namespace") {
        "" => service.to_owned(),
        namespace => format!("{namespace}/{service}"),
    };
    // An attribute of the point named so is overridden only by a service.
    if !service.is_empty() {
        pairs.push(("job".to_owned(), job));
    }
    let instance = resource("service.instance.id");
    if !instance.is_empty() {
        pairs.push(("instance".to_owned(), instance.to_owned()));
    }
    pairs.push((METRIC_NAME.to_owned(), name));
    Labels::new(pairs)
}

/// `selectors`, or one selector of every series when there are none.
fn every_series_or(selectors: &[Vec<LabelMatcher>]) -> &[Vec<LabelMatcher>] {
    const EVERYTHING: &[Vec<LabelMatcher>] = &[Vec::new()];
    match selectors.is_empty() {
        true => EVERYTHING,
        false => selectors,
    }
}

/// What a read does once it has selected as many series as it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Overflow {
    /// Fails: a query's answer would be wrong without every series.
    Refuse,
    /// Stops selecting: a listing bounded by its `limit`.
    Truncate,
}

impl Overflow {
    /// Takes one series from `budget`: `Ok(false)` when none is left and
    /// the read stops there, an error when it must fail (`limit` is the
    /// configured bound the message names).
    fn take(self, budget: &mut usize, limit: usize) -> Result<bool, Error> {
        if *budget == 0 {
            return match self {
                Overflow::Refuse => Err(too_many_series(limit)),
                Overflow::Truncate => Ok(false),
            };
        }
        *budget -= 1;
        Ok(true)
    }
}

fn too_many_series(limit: usize) -> Error {
    Error::Execution(format!(
        "the query selects more than query.max_series = {limit} series"
    ))
}
