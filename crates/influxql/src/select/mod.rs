//! `SELECT`: each measurement's statement in SQL ([`sql`]) over what the
//! statement asks ([`model`]), run on the engine — or answered from memory:
//! `last()` over all time from the last-value cache, aggregates of recent
//! points from the recent samples ([`recent`]) — then what the answer still
//! needs to read as InfluxDB's ([`after`]).

mod after;
mod model;
mod recent;
mod rollup;
mod sql;

pub use sql::select_sql;

use std::collections::BTreeMap;

use chingest::{LastSeries, TagPredicate};

use after::{by_group, limited, move_time_first, series_of, transformed};
use model::{shape, transforms, wildcard, Aggregate, Column, Operand, Shape};
use sql::{Aggregation, Filter, Plan, Statement};

use crate::answer::{Answer, Series, Value};
use crate::error::Error;
use crate::parse::Select;
use crate::plan::{page, rows, Context, TagMatcher, Target};

/// Answers a `SELECT`.
pub(crate) async fn run(ctx: &Context<'_>, select: &Select) -> Result<Answer, Error> {
    let zone = select.time_zone;
    let shape = shape(select)?;
    let targets = ctx.targets(&select.sources)?;
    let wildcard = wildcard(select, &targets);
    let mut series = Vec::new();
    for target in &targets {
        series.extend(measurement(ctx, select, &shape, target, &wildcard, zone).await?);
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
    zone: Option<chrono_tz::Tz>,
) -> Result<Vec<Series>, Error> {
    let Some(mut plan) = Plan::new(select, shape, target, wildcard)? else {
        return Ok(Vec::new());
    };
    if shape.aggregate {
        if let Some(series) = from_cache(ctx, select, target, &plan)? {
            return Ok(series);
        }
    }
    let listed = cached_series(ctx, target, &plan.filter)?;
    let ids = listed
        .as_ref()
        .map(|series| series.iter().map(|s| s.series_id).collect());
    plan.filter.list_series(ids);
    let rollups = ctx.ingestor.rollups(target.table());
    match plan.statement(select, target, zone, ctx.now, rollups.as_ref()) {
        None => Ok(Vec::new()),
        Some(Statement::Raw(sql)) => raw(ctx, select, target, &plan, &sql).await,
        Some(Statement::Aggregated(aggregation)) => {
            let listed = listed.as_deref();
            aggregated(ctx, select, target, &plan, &aggregation, listed, zone).await
        }
    }
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
            answer.push(series_of(target, keys, group, outputs, rows));
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

/// Raw points: `SELECT field, tag FROM m`.
async fn raw(
    ctx: &Context<'_>,
    select: &Select,
    target: &Target,
    plan: &Plan,
    sql: &str,
) -> Result<Vec<Series>, Error> {
    let (outputs, keys) = (plan.outputs.as_slice(), plan.keys.as_slice());
    let transforms = transforms(outputs);
    let rows = rows(&ctx.ingestor.query_translated(sql).await?);
    let rows = rows.into_iter().map(move_time_first(keys.len())).collect();
    let mut answer = Vec::new();
    for (group, mut rows) in by_group(rows, keys.len()) {
        if transforms {
            // The engine's order is the statement's.
            let unit = 1_000_000_000;
            rows = limited(select, transformed(outputs, rows, unit, select.descending));
        }
        if !rows.is_empty() {
            answer.push(series_of(target, keys, group, outputs, rows));
        }
    }
    Ok(answer)
}

/// Aggregates, per `GROUP BY time` interval when given: from memory when
/// it holds the range whole (the recent samples, and the chunk cache
/// before them), else from the engine. `listed`: the series
/// the tags select, if the cache already listed them.
async fn aggregated(
    ctx: &Context<'_>,
    select: &Select,
    target: &Target,
    plan: &Plan,
    aggregation: &Aggregation,
    listed: Option<&[LastSeries]>,
    zone: Option<chrono_tz::Tz>,
) -> Result<Vec<Series>, Error> {
    let remembered = recent::rows(ctx, select, target, plan, aggregation, listed).await?;
    let rows = match remembered {
        Some(rows) => rows,
        None if aggregation.rollups => rows(&ctx.ingestor.query_rollups(&aggregation.sql).await?),
        None => rows(&ctx.ingestor.query_translated(&aggregation.sql).await?),
    };
    after::aggregated_series(select, target, plan, aggregation, rows, zone, ctx.now)
}
