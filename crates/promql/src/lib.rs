//! PromQL over chingest's public read API: queries parsed by
//! `promql-parser` and held to Prometheus 2.x's language, the series and
//! samples their selectors name read from the library's memory (its index
//! of series and its recent samples) or the engine (label matchers as SQL
//! over the series table, samples by series and time from the fact
//! tables, on the read-only connections under the query limits), and
//! evaluated in memory with Prometheus's semantics. The series and label
//! lookups of Prometheus's HTTP API and remote read use the same selection.
//! A front end (the server's `/api/v1/…`) reads the request, hands over a
//! [`Source`], and writes the [`Value`] out; it maps [`Error`] by its
//! `error_type`.
//!
//! Which data is read: remote write's measurement as Prometheus stores it
//! (`__name__` a tag), and every other measurement's numeric fields as
//! metrics `<measurement>_<field>` ([`naming`]). docs/promql.md lists what
//! is supported and where answers differ from Prometheus's on purpose.
//!
//! The modules, each importing only those listed before it: `error`,
//! `value` (the model), `parse` (queries, times, durations), `naming`,
//! `cache` (range queries' settled steps), `select` (memory and the
//! engine), `eval` (in memory), `lookup` (series, labels, metadata,
//! exemplars, cardinality).

mod cache;
mod error;
mod eval;
mod lookup;
pub mod naming;
mod parse;
mod select;
mod selected;
mod value;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chingest::clock::now_ms;
use promql_parser::parser::Expr;

pub use cache::ResultCache;
pub use error::Error;
pub use lookup::{
    exemplars, label_names, label_values, metadata, series, tsdb_status, Listing, TsdbStatus,
};
pub use parse::{parse_duration, parse_expr, parse_query, parse_time, MAX_DEPTH, MAX_QUERY_LEN};
pub use select::{Exemplar, LabelMatcher, Limits, MatchKind, Metadata, Source};
use selected::{Samples, Selected};
pub use value::{
    format_time, format_value, is_stale, write_time, write_value, Labels, Sample, Series, Value,
    METRIC_NAME, STALE_NAN,
};

/// The most points a range query may answer per series (Prometheus's).
pub const MAX_POINTS: i64 = 11_000;

/// How a query is evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// How far back an instant selector looks for a sample.
    pub lookback: Duration,
    /// How long the query may take.
    pub timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            lookback: Duration::from_secs(300),
            timeout: Duration::from_secs(120),
        }
    }
}

impl Options {
    fn lookback_ms(&self) -> i64 {
        i64::try_from(self.lookback.as_millis()).unwrap_or(i64::MAX / 4)
    }
}

/// The query at one time (ms).
pub async fn instant_query(
    source: &Source<'_>,
    query: &str,
    time: i64,
    options: Options,
) -> Result<Value, Error> {
    evaluate(source, parse_query(query)?, (time, time, 0), options).await
}

/// The query at every step from `start` to `end` (ms, both included when
/// they fall on a step).
pub async fn range_query(
    source: &Source<'_>,
    query: &str,
    start: i64,
    end: i64,
    step: Duration,
    options: Options,
) -> Result<Value, Error> {
    if end < start {
        return Err(Error::BadData(
            "invalid parameter \"end\": end timestamp must not be before start time".into(),
        ));
    }
    let step = i64::try_from(step.as_millis()).unwrap_or(i64::MAX);
    if step <= 0 {
        return Err(Error::BadData(
            "invalid parameter \"step\": zero or negative query resolution step widths are not accepted. Try a positive integer".into(),
        ));
    }
    if (end - start) / step > MAX_POINTS {
        return Err(Error::BadData(
            "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)".into(),
        ));
    }
    let expr = parse_query(query)?;
    if !matches!(
        expr.value_type(),
        promql_parser::parser::value::ValueType::Scalar
            | promql_parser::parser::value::ValueType::Vector
    ) {
        return Err(Error::BadData(format!(
            "invalid expression type {:?} for range query, must be Scalar or instant Vector",
            type_name(&expr)
        )));
    }
    match source.cache {
        Some(cache) if cache::cacheable(&expr) => {
            cached_range(source, cache, expr, (start, end, step), options).await
        }
        _ => evaluate(source, expr, (start, end, step), options).await,
    }
}

/// A range query through the result cache: the steps it holds, the
/// others evaluated (before and after them), the settled steps of the
/// result (those the engine held every row for) kept for the next request.
async fn cached_range(
    source: &Source<'_>,
    cache: &ResultCache,
    expr: Expr,
    (start, end, step): (i64, i64, i64),
    options: Options,
) -> Result<Value, Error> {
    // Read before anything is: a change from here on makes what is
    // stored below stale, and it is dropped at its next use.
    let version = source.ingestor.settled_version(&source.database);
    // After the version: a late write it does not count yet is on its
    // way, and bounds what an engine read may keep.
    let complete_before = source.ingestor.engine_complete_before();
    let statements = source.statements();
    let key = cache::Key {
        database: source.database.clone(),
        retention_policy: source.retention_policy.clone(),
        query: format!("{}|{expr}", options.lookback.as_millis()),
        step,
        phase: start.rem_euclid(step),
    };
    let cached = cache
        .get(&key, version)
        .filter(|c| c.first <= end && c.last >= start);
    let parts = match &cached {
        Some(c) => [(start, c.first - step), (c.last + step, end)]
            .into_iter()
            .filter(|(from, to)| from <= to)
            .collect(),
        None => vec![(start, end)],
    };
    let (mut first, mut last) = cached
        .as_ref()
        .map_or((start, end), |c| (c.first.min(start), c.last.max(end)));
    let mut all: HashMap<Labels, Vec<(i64, f64)>> = HashMap::new();
    for series in cached.into_iter().flat_map(|c| c.series) {
        all.entry(series.labels).or_default().extend(series.points);
    }
    for (from, to) in parts {
        let Value::Matrix(series) =
            evaluate(source, expr.clone(), (from, to, step), options).await?
        else {
            return Err(Error::Engine(chingest::Error::Internal(
                "a range query answered something else than a matrix".into(),
            )));
        };
        for s in series {
            all.entry(s.labels).or_default().extend(s.points);
        }
    }
    for points in all.values_mut() {
        points.sort_by_key(|p| p.0);
    }
    // What is kept: settled steps, before what was on its way to the
    // engine when it was read, at most twice the range asked for.
    let mut settled = now_ms() - i64::try_from(chingest::SETTLED_AFTER.as_millis()).unwrap_or(0);
    if source.statements() != statements {
        settled = settled.min(complete_before.div_euclid(1_000_000));
    }
    last = last.min(first + (settled - 1 - first).div_euclid(step) * step);
    first = first.max(first + (last - 2 * (end - start) - first).div_euclid(step).max(0) * step);
    if first <= last {
        let kept = all
            .iter()
            .filter_map(|(labels, points)| {
                let points: Vec<(i64, f64)> = points
                    .iter()
                    .copied()
                    .filter(|p| (first..=last).contains(&p.0))
                    .collect();
                (!points.is_empty()).then(|| Series {
                    labels: labels.clone(),
                    points,
                })
            })
            .collect();
        let kept = cache::Cached {
            first,
            last,
            series: kept,
        };
        cache.put(key, kept, version);
    }
    let mut out: Vec<Series> = all
        .into_iter()
        .filter_map(|(labels, points)| {
            let points: Vec<(i64, f64)> = points
                .into_iter()
                .filter(|p| (start..=end).contains(&p.0))
                .collect();
            (!points.is_empty()).then_some(Series { labels, points })
        })
        .collect();
    out.sort_by(|a, b| a.labels.cmp(&b.labels));
    Ok(Value::Matrix(out))
}

fn type_name(expr: &Expr) -> &'static str {
    match expr.value_type() {
        promql_parser::parser::value::ValueType::Vector => "instant vector",
        promql_parser::parser::value::ValueType::Scalar => "scalar",
        promql_parser::parser::value::ValueType::Matrix => "range vector",
        promql_parser::parser::value::ValueType::String => "string",
    }
}

/// Sets its flag when dropped: a query whose caller went away stops at its
/// next step.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

async fn evaluate(
    source: &Source<'_>,
    expr: Expr,
    (start, end, step): (i64, i64, i64),
    options: Options,
) -> Result<Value, Error> {
    let deadline = Instant::now() + options.timeout;
    // Boxed: the samples are keyed by their selector's address in the tree.
    let expr = Box::new(expr);
    let lookback = options.lookback_ms();
    let mut data: rustc_hash::FxHashMap<usize, eval::ReadSeries> = Default::default();
    let (mut series_budget, mut sample_budget) =
        (source.limits.max_series, source.limits.max_samples);
    for selection in eval::selectors(&expr, start, end, (start, end), lookback) {
        let vs = selection.selector;
        let matchers = LabelMatcher::of_selector(vs.name.as_deref(), &vs.matchers.matchers)?;
        // A range function may read one sample per rollup bucket where its
        // range holds two buckets at least and a step one (a bucket per
        // step at most: docs/downsampling.md).
        let thin = selection.thin.map(|(thinned, range)| select::Thinning {
            thinned,
            widest_ms: (range / 2).min(if step > 0 { step } else { i64::MAX }),
        });
        let work = source.select_compressed(
            &matchers,
            (selection.start, selection.end),
            thin,
            &mut series_budget,
            &mut sample_budget,
        );
        let series = tokio::time::timeout_at(deadline.into(), work)
            .await
            .map_err(|_| timed_out())??;
        data.insert(eval::key(vs), eval::ReadSeries::new(series));
    }
    let cancelled = Arc::new(AtomicBool::new(false));
    let _cancel = CancelOnDrop(Arc::clone(&cancelled));
    let evaluator = evaluator(data, lookback, (start, end, step), deadline, cancelled);
    tokio::task::spawn_blocking(move || evaluator.run(&expr, start, end, step))
        .await
        .map_err(|err| {
            Error::Engine(chingest::Error::Internal(format!(
                "query evaluation failed: {err}"
            )))
        })?
}

/// The evaluator over `data` (each selector's series by [`eval::key`]) for
/// a query at `start` (`step` 0) or at each step from `start` to `end`.
fn evaluator(
    data: rustc_hash::FxHashMap<usize, eval::ReadSeries>,
    lookback: i64,
    (start, end, step): (i64, i64, i64),
    deadline: Instant,
    cancelled: Arc<AtomicBool>,
) -> eval::Evaluator {
    eval::Evaluator {
        data,
        lookback,
        query: (start, end),
        deadline,
        cancelled,
        derived: Default::default(),
        interned: Default::default(),
        cursors: Default::default(),
        grid: (step > 0).then(|| eval::Grid {
            start,
            step,
            steps: usize::try_from((end - start) / step).unwrap_or(0) + 1,
        }),
        rollups: Default::default(),
        groupings: Default::default(),
    }
}

/// `query` evaluated over series held in memory, no engine and no
/// [`Source`], at `start` (`step` 0: an instant query) or at each step
/// from `start` to `end` (ms): for unit tests of rules (`chingest rules
/// test`) and the engine-free tests. Each selector gets the series its
/// label matchers match, with their samples over the times it needs, as
/// selection gives them; the evaluation is the queries' own.
pub fn evaluate_in_memory(
    query: &str,
    series: &[Series],
    (start, end, step): (i64, i64, i64),
    options: Options,
) -> Result<Value, Error> {
    let expr = parse_query(query)?;
    let lookback = options.lookback_ms();
    let mut data: rustc_hash::FxHashMap<usize, eval::ReadSeries> = Default::default();
    for selection in eval::selectors(&expr, start, end, (start, end), lookback) {
        let vs = selection.selector;
        let matchers = LabelMatcher::of_selector(vs.name.as_deref(), &vs.matchers.matchers)?;
        let times = selection.start..=selection.end;
        let mut selected: Vec<Selected> = series
            .iter()
            .filter(|s| matchers.iter().all(|m| m.matches(s.labels.get(&m.name))))
            .map(|s| Selected {
                labels: s.labels.clone(),
                samples: Samples::decoded(
                    s.points
                        .iter()
                        .copied()
                        .filter(|p| times.contains(&p.0))
                        .collect(),
                ),
            })
            .filter(|s| s.samples.len() > 0)
            .collect();
        selected.sort_by(|a, b| a.labels.cmp(&b.labels));
        data.insert(eval::key(vs), eval::ReadSeries::new(selected));
    }
    let deadline = Instant::now() + options.timeout;
    let cancelled = Arc::new(AtomicBool::new(false));
    evaluator(data, lookback, (start, end, step), deadline, cancelled).run(&expr, start, end, step)
}

fn timed_out() -> Error {
    Error::Timeout("query timed out in query execution".into())
}

/// The query in Prometheus's canonical layout (`/api/v1/format_query`).
pub fn format_query(query: &str) -> Result<String, Error> {
    Ok(parse_query(query)?.prettify())
}
