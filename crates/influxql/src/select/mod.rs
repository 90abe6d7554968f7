//! `SELECT`: each measurement's statement in SQL ([`sql`]) over what the
//! statement asks ([`model`]), run on the engine — or answered from memory:
//! `last()` over all time from the last-value cache, aggregates of recent
//! points from the recent samples ([`recent`]) — then what the answer still
//! needs to read as InfluxDB's ([`after`]).

mod after;
mod aggregate;
mod explain;
mod math;
mod model;
mod points;
mod recent;
mod reduce;
mod rollup;
mod sql;
mod subquery;
mod technical;
mod transform;

pub use sql::select_sql;

use std::collections::BTreeMap;
use std::time::Instant;

use chingest::{LastSeries, TagPredicate};

use after::{limited, raw_series, series_of};
use aggregate::Aggregate;
use explain::{Store, Trace};
use model::{shape, wildcard, Column, Operand, Shape};
use sql::{Filter, Plan, Statement};

use crate::answer::{Answer, Series, Value};
use crate::error::Error;
use crate::parse::Select;
use crate::plan::{page, rows, Context, TagMatcher, Target};

/// `EXPLAIN [ANALYZE]` of a `SELECT`: how it is answered (`analyze`:
/// answered, with times and rows).
pub(crate) async fn explain(
    ctx: &Context<'_>,
    select: &Select,
    analyze: bool,
) -> Result<Answer, Error> {
    let started = Instant::now();
    let trace = match analyze {
        true => Trace::default(),
        false => Trace::planning(),
    };
    let answer = run_traced(ctx, select, &trace).await?;
    let series = match analyze {
        true => {
            let rows = answer.series.iter().map(|s| s.values.len()).sum();
            trace.analyzed(started.elapsed(), rows)
        }
        false => trace.plan(),
    };
    Ok(Answer {
        series: vec![series],
        zone: None,
    })
}

/// Answers a `SELECT`.
pub(crate) async fn run(ctx: &Context<'_>, select: &Select) -> Result<Answer, Error> {
    run_traced(ctx, select, &Trace::default()).await
}

/// Answers a `SELECT`, noting in `trace` how.
async fn run_traced(ctx: &Context<'_>, select: &Select, trace: &Trace) -> Result<Answer, Error> {
    let zone = select.time_zone;
    let shape = shape(select)?;
    if !select.subqueries.is_empty() {
        let mut answers = Vec::new();
        for inner in &select.subqueries {
            let inner = subquery::within(inner, select);
            answers.push(Box::pin(run_traced(ctx, &inner, trace)).await?);
        }
        let started = Instant::now();
        let answer = subquery::answer(ctx, select, &shape, answers)?;
        trace.note(
            "(subqueries)",
            Store::Subqueries,
            None,
            &answer.series,
            started,
        );
        return Ok(answer);
    }
    let targets = ctx.targets(&select.sources)?;
    let wildcard = wildcard(select, &targets);
    let mut series = Vec::new();
    for target in &targets {
        series.extend(measurement(ctx, select, &shape, target, &wildcard, trace).await?);
    }
    // ORDER BY time DESC orders series the other way too.
    if select.descending {
        series.reverse();
    }
    let series = page(series, select.soffset, select.slimit);
    Ok(Answer { series, zone })
}

/// The statement over one measurement.
async fn measurement(
    ctx: &Context<'_>,
    select: &Select,
    shape: &Shape,
    target: &Target,
    wildcard: &[(String, Option<String>)],
    trace: &Trace,
) -> Result<Vec<Series>, Error> {
    // Transformations over `GROUP BY time` (but `cumulative_sum`) read the
    // interval before the range too, as InfluxDB does, so that the first
    // interval has one before it.
    let reads_before = select.interval.zip(select.condition.start).filter(|_| {
        shape.columns.iter().flat_map(|(_, f)| f.cells()).any(
            |cell| matches!(cell, Column::Transform { func, .. } if func.reads_previous_interval()),
        )
    });
    let Some((interval, start)) = reads_before else {
        return answered(ctx, select, shape, target, wildcard, None, trace).await;
    };
    let mut widened = select.clone();
    widened.condition.start = Some(start.saturating_sub(interval.every));
    answered(ctx, &widened, shape, target, wildcard, Some(start), trace).await
}

/// The statement over one measurement, answered from `answer_from` on
/// when it reads before its range: there, only the transformations'
/// values.
async fn answered(
    ctx: &Context<'_>,
    select: &Select,
    shape: &Shape,
    target: &Target,
    wildcard: &[(String, Option<String>)],
    answer_from: Option<i64>,
    trace: &Trace,
) -> Result<Vec<Series>, Error> {
    let Some(mut plan) = Plan::new(select, shape, target, wildcard)? else {
        return Ok(Vec::new());
    };
    plan.answer_from = answer_from;
    plan.max_points = ctx.ingestor.config().query.max_points_in_memory;
    let mut series = planned(ctx, select, target, &mut plan, trace).await?;
    if let Some(start) = answer_from {
        after::only_transformed_before(&mut series, &plan, start);
    }
    Ok(series)
}

/// The statement over one measurement, as planned: from the last-value
/// cache, the recent samples, rollups or the engine, noted in `trace`
/// (which, for `EXPLAIN`, may ask the engine nothing).
async fn planned(
    ctx: &Context<'_>,
    select: &Select,
    target: &Target,
    plan: &mut Plan,
    trace: &Trace,
) -> Result<Vec<Series>, Error> {
    let zone = select.time_zone;
    let started = Instant::now();
    let name = target.schema.name.as_str();
    let noted = |store: Store, sql: Option<&str>, series: Vec<Series>| {
        trace.note(name, store, sql, &series, started);
        Ok(series)
    };
    if plan.aggregates() {
        if let Some(series) = from_cache(ctx, select, target, plan)? {
            return noted(Store::LastValues, None, series);
        }
    }
    let listed = cached_series(ctx, target, &plan.filter)?;
    let ids = listed
        .as_ref()
        .map(|series| series.iter().map(|s| s.series_id).collect());
    plan.filter.list_series(ids);
    let rollups = ctx.ingestor.rollups(target.table());
    let statement = plan.statement(select, target, zone, ctx.now, rollups.as_ref());
    let (store, sql) = match &statement {
        None => return noted(Store::Nothing, None, Vec::new()),
        Some(Statement::Raw(sql)) => (Store::Raw, sql),
        Some(Statement::Points(sql)) => {
            let stop = sql::stop(select, ctx.now);
            let remembered =
                recent::points(ctx, select, target, plan, stop, listed.as_deref()).await?;
            if let Some(read) = remembered {
                let series = points::series(select, target, plan, read, zone, ctx.now)?;
                return noted(Store::RecentPoints, None, series);
            }
            (Store::Points, sql)
        }
        Some(Statement::Aggregated(aggregation)) => {
            let remembered =
                recent::rows(ctx, select, target, plan, aggregation, listed.as_deref()).await?;
            if let Some(rows) = remembered {
                let series = after::aggregated_series(
                    select,
                    target,
                    plan,
                    aggregation,
                    rows,
                    zone,
                    ctx.now,
                )?;
                return noted(Store::Recent, None, series);
            }
            match aggregation.rollups {
                true => (Store::Rollups, &aggregation.sql),
                false => (Store::Engine, &aggregation.sql),
            }
        }
    };
    if trace.dry {
        return noted(store, Some(sql), Vec::new());
    }
    let read = match store {
        Store::Rollups => rows(&ctx.ingestor.query_rollups(sql).await?),
        _ => rows(&ctx.ingestor.query_translated(sql).await?),
    };
    let series = match &statement {
        Some(Statement::Raw(_)) => raw_series(select, target, plan, read, false),
        Some(Statement::Points(_)) => points::series(select, target, plan, read, zone, ctx.now)?,
        Some(Statement::Aggregated(aggregation)) => {
            after::aggregated_series(select, target, plan, aggregation, read, zone, ctx.now)?
        }
        None => Vec::new(),
    };
    noted(store, Some(sql), series)
}

/// The series `filter`'s tags select, from the last-value cache when it
/// knows the measurement (`None` when it does not, or when the tags
/// select every series).
fn cached_series(
    ctx: &Context<'_>,
    target: &Target,
    filter: &Filter,
) -> Result<Option<Vec<LastSeries>>, Error> {
    if filter.tags == TagPredicate::Any {
        return Ok(None);
    }
    let matcher = TagMatcher::new(&filter.tags)?;
    Ok(ctx
        .ingestor
        .last_values(target.table(), |tags| matcher.matches(tags)))
}

/// `last(field), …` over all time, from the ingestor's last-value cache:
/// no engine query. `None` when the statement does not fit (another
/// function, a time condition, a condition on field values, `GROUP BY
/// time`) or the measurement is not cached (or not yet rebuilt after a
/// restart or an edit).
fn from_cache(
    ctx: &Context<'_>,
    select: &Select,
    target: &Target,
    plan: &Plan,
) -> Result<Option<Vec<Series>>, Error> {
    let (filter, outputs, keys) = (&plan.filter, plan.outputs.as_slice(), plan.keys.as_slice());
    let only_last = outputs.iter().all(|o| {
        matches!(
            o.column,
            Column::Aggregate {
                func: Aggregate::Last,
                ..
            }
        )
    });
    let timeless = select.condition.start.is_none() && select.condition.stop.is_none();
    if !only_last || !timeless || select.interval.is_some() || !filter.points.is_empty() {
        return Ok(None);
    }
    let matcher = TagMatcher::new(&filter.tags)?;
    let Some(cached) = ctx
        .ingestor
        .last_values(target.table(), |tags| matcher.matches(tags))
    else {
        return Ok(None);
    };
    // Per group, per column: the newest (time, value) of its series.
    let mut groups: BTreeMap<Vec<String>, Vec<Option<(i64, Value)>>> = BTreeMap::new();
    for series in cached {
        let tag = |key: &String| {
            series
                .tags
                .iter()
                .find(|(k, _)| k == key)
                .map_or_else(String::new, |(_, v)| v.clone())
        };
        let newest = groups
            .entry(keys.iter().map(tag).collect())
            .or_insert_with(|| vec![None; outputs.len()]);
        for (newest, output) in newest.iter_mut().zip(outputs) {
            let Operand::Field(field, _) = &output.operand else {
                continue;
            };
            let Ok(at) = series.fields.binary_search_by(|(f, _)| f.cmp(field)) else {
                continue;
            };
            let last = &series.fields[at].1;
            let value = cached_value(&last.value);
            // At equal times, the greatest value, as the engine's `last`.
            let newer = newest.as_ref().is_none_or(|(t, v)| {
                last.time_ns > *t || (last.time_ns == *t && greater(&value, v))
            });
            if newer {
                *newest = Some((last.time_ns, value));
            }
        }
    }
    let mut answer = Vec::new();
    for (group, newest) in groups {
        if newest.iter().all(Option::is_none) {
            continue;
        }
        // A lone selector reports its point's time; several, the start (0).
        let time = match newest.as_slice() {
            [Some((t, _))] => *t,
            _ => 0,
        };
        let mut row = vec![Value::Time(time)];
        row.extend(
            newest
                .into_iter()
                .map(|n| n.map_or(Value::Null, |(_, v)| v)),
        );
        let rows = limited(select, vec![row]);
        if !rows.is_empty() {
            answer.push(series_of(target, keys, group, &plan.columns, rows));
        }
    }
    if select.descending {
        answer.reverse();
    }
    Ok(Some(answer))
}

/// Whether `a` sorts after `b` (values of one field, so of one type).
fn greater(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::String(a), Value::String(b)) => a > b,
        (Value::Boolean(a), Value::Boolean(b)) => a > b,
        (Value::Integer(a), Value::Integer(b)) => a > b,
        (Value::Unsigned(a), Value::Unsigned(b)) => a > b,
        (a, b) => a.as_f64() > b.as_f64(),
    }
}

fn cached_value(value: &chingest::LastField) -> Value {
    match value {
        chingest::LastField::Float(v) => Value::Float(*v),
        chingest::LastField::Integer(v) => Value::Integer(*v),
        chingest::LastField::UInteger(v) => Value::Unsigned(*v),
        chingest::LastField::String(v) => Value::String(v.clone()),
        chingest::LastField::Boolean(v) => Value::Boolean(*v),
    }
}
