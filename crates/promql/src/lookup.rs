//! The lookups of Prometheus's HTTP API beside queries: series, label
//! names and values, metric metadata, exemplars, and the cardinality
//! figures of `/api/v1/status/tsdb`.

use std::collections::{BTreeSet, HashMap};

use promql_parser::parser::Expr;

use crate::error::Error;
use crate::eval;
use crate::parse::parse_query;
use crate::select::{Exemplar, LabelMatcher, Metadata, Source};
use crate::value::{Labels, METRIC_NAME};

/// A lookup's answer, cut at the `limit` asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing<T> {
    /// Sorted, each once, at most `limit`.
    pub items: Vec<T>,
    /// Whether there were more than `limit`.
    pub truncated: bool,
}

impl<T> Listing<T> {
    fn cut(mut items: Vec<T>, limit: usize) -> Listing<T> {
        let truncated = items.len() > limit;
        items.truncate(limit);
        Listing { items, truncated }
    }
}

/// The matchers of each `match[]` selector.
fn matcher_sets(selectors: &[String]) -> Result<Vec<Vec<LabelMatcher>>, Error> {
    let mut sets = Vec::new();
    for text in selectors {
        let expr = parse_query(text)
            .map_err(|err| Error::BadData(format!("invalid parameter \"match[]\": {err}")))?;
        let Expr::VectorSelector(vs) = expr else {
            return Err(Error::BadData(format!(
                "invalid parameter \"match[]\": {text:?} is not a series selector"
            )));
        };
        sets.push(LabelMatcher::of_selector(
            vs.name.as_deref(),
            &vs.matchers.matchers,
        )?);
    }
    Ok(sets)
}

/// The series any of the `match[]` selectors select (every series when
/// none is given), with a sample in `[start, end]` (ms) when given; at most
/// `limit` (Prometheus 3's parameter) and `query.max_series`: a listing is
/// cut, never refused for its size.
pub async fn series(
    source: &Source<'_>,
    selectors: &[String],
    range: Option<(i64, i64)>,
    limit: usize,
) -> Result<Listing<Labels>, Error> {
    let limit = limit.min(source.limits.max_series);
    // One more than asked: whether there were more.
    let found = source
        .series(
            &matcher_sets(selectors)?,
            range,
            Some(limit.saturating_add(1)),
        )
        .await?;
    Ok(Listing::cut(found, limit))
}

/// The label names of [`series`]' answer, sorted, at most `limit`: from
/// the index whatever the number of series.
pub async fn label_names(
    source: &Source<'_>,
    selectors: &[String],
    range: Option<(i64, i64)>,
    limit: usize,
) -> Result<Listing<String>, Error> {
    let sets = matcher_sets(selectors)?;
    if let Some(names) = source.indexed_label_names(&sets, range) {
        return Ok(Listing::cut(names, limit));
    }
    let names: BTreeSet<String> = source
        .series(&sets, range, None)
        .await?
        .iter()
        .flat_map(|labels| labels.pairs().iter().map(|(n, _)| n.clone()))
        .collect();
    Ok(Listing::cut(names.into_iter().collect(), limit))
}

/// The values of label `name` in [`series`]' answer, sorted, at most
/// `limit`: from the index whatever the number of series.
pub async fn label_values(
    source: &Source<'_>,
    name: &str,
    selectors: &[String],
    range: Option<(i64, i64)>,
    limit: usize,
) -> Result<Listing<String>, Error> {
    let sets = matcher_sets(selectors)?;
    if let Some(values) = source.indexed_label_values(name, &sets, range) {
        return Ok(Listing::cut(values, limit));
    }
    let values: BTreeSet<String> = source
        .series(&sets, range, None)
        .await?
        .iter()
        .map(|labels| labels.get(name).to_owned())
        .filter(|v| !v.is_empty())
        .collect();
    Ok(Listing::cut(values.into_iter().collect(), limit))
}

/// The metadata of every metric family (of `metric` only, when given),
/// at most `limit` families.
pub async fn metadata(
    source: &Source<'_>,
    metric: Option<&str>,
    limit: usize,
) -> Result<Vec<Metadata>, Error> {
    let mut out = source.metadata(metric).await?;
    out.truncate(limit);
    Ok(out)
}

/// The exemplars of the series the query's selectors select, in `[start,
/// end]` (ms), by series.
pub async fn exemplars(
    source: &Source<'_>,
    query: &str,
    start: i64,
    end: i64,
) -> Result<Vec<(Labels, Vec<Exemplar>)>, Error> {
    let expr = parse_query(query)?;
    let mut budget = source.limits.max_series;
    let mut by_series: HashMap<Labels, Vec<Exemplar>> = HashMap::new();
    for selection in eval::selectors(&expr, start, end, (start, end), 0) {
        let vs = selection.selector;
        let matchers = LabelMatcher::of_selector(vs.name.as_deref(), &vs.matchers.matchers)?;
        for (labels, exemplars) in source.exemplars(&matchers, start, end, &mut budget).await? {
            let list = by_series.entry(labels).or_default();
            if list.is_empty() {
                list.extend(exemplars);
            }
        }
    }
    let mut out: Vec<(Labels, Vec<Exemplar>)> = by_series.into_iter().collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// What `/api/v1/status/tsdb` reports: how many series and label pairs the
/// database holds, its time span, and where the series are.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TsdbStatus {
    /// Series.
    pub series: usize,
    /// Distinct label name-value pairs.
    pub label_pairs: usize,
    /// The first and last sample times of remote write's samples (ms).
    pub time_bounds: Option<(i64, i64)>,
    /// The metric names with the most series, most first.
    pub series_by_metric: Vec<(String, usize)>,
    /// The label names with the most values, most first.
    pub values_by_label: Vec<(String, usize)>,
    /// The label names whose values take the most bytes, most first.
    pub bytes_by_label: Vec<(String, usize)>,
    /// The label pairs (`name=value`) with the most series, most first.
    pub series_by_pair: Vec<(String, usize)>,
}

/// The cardinality of every series of the database, each list cut at
/// `limit` entries.
pub async fn tsdb_status(source: &Source<'_>, limit: usize) -> Result<TsdbStatus, Error> {
    let all = source.series(&[], None, None).await?;
    let mut by_metric: HashMap<&str, usize> = HashMap::new();
    let mut by_pair: HashMap<(&str, &str), usize> = HashMap::new();
    for labels in &all {
        *by_metric.entry(labels.get(METRIC_NAME)).or_default() += 1;
        for (name, value) in labels.pairs() {
            *by_pair.entry((name, value)).or_default() += 1;
        }
    }
    let mut values: HashMap<&str, usize> = HashMap::new();
    let mut bytes: HashMap<&str, usize> = HashMap::new();
    for (name, value) in by_pair.keys() {
        *values.entry(name).or_default() += 1;
        *bytes.entry(name).or_default() += value.len();
    }
    let top = |counts: Vec<(String, usize)>| {
        let mut counts = counts;
        counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        counts.truncate(limit);
        counts
    };
    Ok(TsdbStatus {
        series: all.len(),
        label_pairs: by_pair.len(),
        time_bounds: source.time_bounds().await?,
        series_by_metric: top(by_metric
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect()),
        values_by_label: top(values.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()),
        bytes_by_label: top(bytes.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()),
        series_by_pair: top(by_pair
            .into_iter()
            .map(|((n, v), c)| (format!("{n}={v}"), c))
            .collect()),
    })
}
