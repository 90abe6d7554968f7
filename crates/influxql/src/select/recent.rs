//! Aggregates of points from the ingestor's memory
//! ([`chingest::Ingestor::samples`]: the recent samples, and before them
//! the chunk cache, filled from the engine by whole blocks) instead of an
//! engine statement: what a Grafana panel asks (`mean(x) … WHERE host =
//! … AND time > now() - 1h GROUP BY time(1m)`), over the last hours or
//! last January, costs microseconds here against an engine statement's
//! milliseconds of floor.
//!
//! The rows come out as the engine's `GROUP BY` answer does (the same
//! columns, one row per interval and group with a point), so what follows
//! it — every interval with `fill()`, transformations, order and limits —
//! is shared. Memory answers only where it holds exactly the engine's rows:
//! the whole range (or, for `last()` alone over no intervals, each series'
//! newest point), `count`/`sum`/`mean`/`min`/`max`/`first`/`last` of
//! integer and float fields, no condition on field values, and no point in
//! the range written twice into a table that keeps every row.

use std::collections::{BTreeMap, HashMap};

use chingest::layout::schema::FieldType;
use chingest::LastSeries;

use super::after::{in_points_order, window_start};
use super::aggregate::Aggregate;
use super::model::{aggregate_of, Operand};
use super::sql::{Aggregation, Plan};
use crate::answer::Value;
use crate::error::Error;
use crate::parse::Select;
use crate::plan::{Context, TagMatcher, Target};

/// 2^53: memory keeps integer fields as floats, exact up to this.
const EXACT_INTEGER: f64 = 9_007_199_254_740_992.0;

/// The engine's rows for the aggregate statement (`aggregation.at`: where
/// each output's value and time go in a row of `aggregation.width` cells),
/// from memory; `None` when memory cannot answer it exactly. `listed`: the
/// series the tags select, when the caller has them from the cache.
pub(super) async fn rows(
    ctx: &Context<'_>,
    select: &Select,
    target: &Target,
    plan: &Plan,
    aggregation: &Aggregation,
    listed: Option<&[LastSeries]>,
) -> Result<Option<Vec<Vec<Value>>>, Error> {
    let (filter, outputs, keys) = (&plan.filter, plan.outputs.as_slice(), plan.keys.as_slice());
    let (at, width, stop) = (&aggregation.at, aggregation.width, aggregation.stop);
    let Some(start) = select.condition.start else {
        return Ok(None);
    };
    // Memory holds every acknowledged point, later ones too.
    let stop = stop.unwrap_or(i64::MAX);
    if start >= stop || !filter.points.is_empty() {
        return Ok(None);
    }
    let mut reads: Vec<(Aggregate, &str, FieldType)> = Vec::new();
    for output in outputs {
        let (Some(func), Operand::Field(field, ty)) =
            (aggregate_of(&output.column), &output.operand)
        else {
            return Ok(None);
        };
        let supported = matches!(
            func,
            Aggregate::Count
                | Aggregate::Sum
                | Aggregate::Mean
                | Aggregate::Min
                | Aggregate::Max
                | Aggregate::First
                | Aggregate::Last
        );
        if !supported || !matches!(ty, FieldType::Integer | FieldType::Float) {
            return Ok(None);
        }
        reads.push((func, field, *ty));
    }
    let table = target.table();
    let range = (start, stop - 1);
    let whole =
        |samples: &chingest::RecentSamples| samples.from_ns == start && samples.one_row_each;
    // Whether memory reaches back to the start, before listing series.
    // Where rollups answer (a long range, whole buckets), memory answers
    // only what it holds already: rollups are the cheaper first read.
    let read = async |field: &str, ids: &[u64]| match aggregation.rollups {
        true => Ok(ctx.ingestor.recent_samples(table, field, ids, range)),
        false => ctx.ingestor.samples(table, field, ids, range).await,
    };
    // `last()` alone over no intervals (a stat panel) needs each series'
    // newest point only: memory's, wherever the series has one there.
    let newest_only =
        select.interval.is_none() && reads.iter().all(|(func, _, _)| *func == Aggregate::Last);
    let probe = read(reads[0].1, &[]).await?;
    let reaches_start = probe.is_some_and(|probe| whole(&probe));
    if !reaches_start && !newest_only {
        return Ok(None);
    }
    let all;
    let series = match listed {
        Some(series) => series,
        None => {
            let matcher = TagMatcher::new(&filter.tags)?;
            let found = ctx
                .ingestor
                .last_values(table, |tags| matcher.matches(tags));
            let Some(found) = found else {
                return Ok(None);
            };
            all = found;
            &all
        }
    };
    let ids: Vec<u64> = series.iter().map(|s| s.series_id).collect();
    // Each series' group (index into `groups`).
    let mut groups: Vec<Vec<String>> = Vec::new();
    let mut group_of: HashMap<Vec<String>, usize> = HashMap::new();
    let member: Vec<usize> = series
        .iter()
        .map(|s| {
            let key: Vec<String> = keys
                .iter()
                .map(|k| {
                    s.tags
                        .iter()
                        .find(|(tag, _)| tag == k)
                        .map_or_else(String::new, |(_, v)| v.clone())
                })
                .collect();
            *group_of.entry(key.clone()).or_insert_with(|| {
                groups.push(key);
                groups.len() - 1
            })
        })
        .collect();
    // Each field read once, whatever number of outputs read it.
    let mut samples: HashMap<&str, Vec<Vec<(i64, f64)>>> = HashMap::new();
    for (_, field, _) in &reads {
        if samples.contains_key(field) {
            continue;
        }
        if newest_only {
            let recent = ctx.ingestor.recent_samples(table, field, &ids, range);
            if let Some(recent) = recent.filter(|recent| {
                recent.one_row_each && recent.samples.iter().all(|s| !s.is_empty())
            }) {
                let newest = recent.samples.iter().map(|s| s[s.len() - 1..].to_vec());
                samples.insert(field, newest.collect());
                continue;
            }
        }
        match read(field, &ids).await? {
            Some(read) if reaches_start && whole(&read) => samples.insert(field, read.samples),
            _ => return Ok(None),
        };
    }
    // (interval start, group) → an accumulator per output.
    let mut cells: BTreeMap<(i64, usize), Vec<Accumulator>> = BTreeMap::new();
    for (output, (_, field, ty)) in reads.iter().enumerate() {
        for (points, &group) in samples[field].iter().zip(&member) {
            for &(time, value) in points {
                let exact = match ty {
                    FieldType::Integer => value.abs() <= EXACT_INTEGER,
                    _ => !value.is_nan(),
                };
                if !exact {
                    return Ok(None);
                }
                let interval = select
                    .interval
                    .map_or(0, |every| window_start(time, every, select.time_zone));
                cells
                    .entry((interval, group))
                    .or_insert_with(|| vec![Accumulator::default(); reads.len()])[output]
                    .add(time, value);
            }
        }
    }
    let mut rows = Vec::with_capacity(cells.len());
    for ((interval, group), accumulators) in cells {
        let mut row = vec![Value::Null; width];
        row[0] = match select.interval {
            Some(_) => Value::Time(interval),
            None => Value::Integer(0),
        };
        for (cell, key) in row[1..].iter_mut().zip(&groups[group]) {
            *cell = Value::String(key.clone());
        }
        for ((accumulator, &(func, _, ty)), &(value_at, time_at)) in
            accumulators.iter().zip(&reads).zip(at)
        {
            let Some((value, time)) = accumulator.finish(func, ty) else {
                return Ok(None);
            };
            row[value_at] = value;
            if let Some(time_at) = time_at {
                row[time_at] = time;
            }
        }
        rows.push(row);
    }
    Ok(Some(rows))
}

/// The points a statement computed from points reads ([`super::points`]),
/// from memory: the rows its SQL would answer — (time, group keys…,
/// cells…), ordered by group, time and series key — where memory holds
/// the range whole for every field read (integer and float fields, no
/// condition on field values); `None` otherwise. `stop`: the range's end.
pub(super) async fn points(
    ctx: &Context<'_>,
    select: &Select,
    target: &Target,
    plan: &Plan,
    stop: Option<i64>,
    listed: Option<&[LastSeries]>,
) -> Result<Option<Vec<Vec<Value>>>, Error> {
    let (filter, keys) = (&plan.filter, plan.keys.as_slice());
    let (Some(start), stop) = (select.condition.start, stop.unwrap_or(i64::MAX)) else {
        return Ok(None);
    };
    if start >= stop || !filter.points.is_empty() {
        return Ok(None);
    }
    let mut fields: Vec<(&str, FieldType)> = Vec::new();
    for output in &plan.outputs {
        match &output.operand {
            Operand::Field(field, ty @ (FieldType::Integer | FieldType::Float)) => {
                if !fields.iter().any(|(f, _)| f == field) {
                    fields.push((field, *ty));
                }
            }
            Operand::Field(..) => return Ok(None),
            Operand::Tag(_) | Operand::Missing => {}
        }
    }
    let table = target.table();
    let range = (start, stop - 1);
    let all;
    let series = match listed {
        Some(series) => series,
        None => {
            let matcher = TagMatcher::new(&filter.tags)?;
            let Some(found) = ctx
                .ingestor
                .last_values(table, |tags| matcher.matches(tags))
            else {
                return Ok(None);
            };
            all = found;
            &all
        }
    };
    let ids: Vec<u64> = series.iter().map(|s| s.series_id).collect();
    // Per field, each series' samples.
    let mut read: Vec<Vec<Vec<(i64, f64)>>> = Vec::new();
    for (field, ty) in &fields {
        let Some(samples) = ctx.ingestor.samples(table, field, &ids, range).await? else {
            return Ok(None);
        };
        if samples.from_ns != start || !samples.one_row_each {
            return Ok(None);
        }
        let exact = |v: &f64| match ty {
            FieldType::Integer => v.abs() <= EXACT_INTEGER,
            _ => !v.is_nan(),
        };
        if !samples.samples.iter().flatten().all(|(_, v)| exact(v)) {
            return Ok(None);
        }
        read.push(samples.samples);
    }
    let tag = |s: &LastSeries, key: &str| {
        s.tags
            .iter()
            .find(|(k, _)| k == key)
            .map_or_else(String::new, |(_, v)| v.clone())
    };
    let mut rows: Vec<(Vec<Value>, String)> = Vec::new();
    for (i, one) in series.iter().enumerate() {
        let key: String = one.tags.iter().map(|(k, v)| format!(",{k}={v}")).collect();
        // The series' points: every time some field read has a value.
        let mut times: BTreeMap<i64, Vec<Option<f64>>> = BTreeMap::new();
        for (f, samples) in read.iter().enumerate() {
            for &(t, v) in &samples[i] {
                times.entry(t).or_insert_with(|| vec![None; fields.len()])[f] = Some(v);
            }
        }
        for (t, values) in times {
            let mut row = vec![Value::Integer(t)];
            row.extend(keys.iter().map(|k| Value::String(tag(one, k))));
            for output in &plan.outputs {
                row.push(match &output.operand {
                    Operand::Field(field, ty) => {
                        let f = fields.iter().position(|(name, _)| name == field);
                        match (f.and_then(|f| values[f]), ty) {
                            (Some(v), FieldType::Integer) => Value::Integer(v as i64),
                            (Some(v), _) => Value::Float(v),
                            (None, _) => Value::Null,
                        }
                    }
                    Operand::Tag(k) => match tag(one, k) {
                        v if v.is_empty() => Value::Null,
                        v => Value::String(v),
                    },
                    Operand::Missing => Value::Null,
                });
            }
            rows.push((row, key.clone()));
        }
    }
    Ok(Some(in_points_order(rows, keys.len(), false)))
}

/// One output's points in one interval and group.
#[derive(Debug, Clone, Default)]
struct Accumulator {
    count: u64,
    /// The sum of an integer field's points, exact.
    integers: i128,
    floats: f64,
    /// (value, time) of the smallest value, the earliest among equal.
    min: Option<(f64, i64)>,
    /// (value, time) of the greatest value, the earliest among equal.
    max: Option<(f64, i64)>,
    /// (time, value) of the earliest point, the greatest value among equal
    /// times (the engine's rule: `argMax` over `(-time, value)`).
    first: Option<(i64, f64)>,
    /// (time, value) of the newest point, the greatest among equal.
    last: Option<(i64, f64)>,
}

impl Accumulator {
    fn add(&mut self, time: i64, value: f64) {
        self.count += 1;
        self.integers += value as i128;
        self.floats += value;
        if self
            .min
            .is_none_or(|(v, t)| value < v || value == v && time < t)
        {
            self.min = Some((value, time));
        }
        if self
            .max
            .is_none_or(|(v, t)| value > v || value == v && time < t)
        {
            self.max = Some((value, time));
        }
        if self
            .first
            .is_none_or(|(t, v)| time < t || time == t && value > v)
        {
            self.first = Some((time, value));
        }
        if self
            .last
            .is_none_or(|(t, v)| time > t || time == t && value > v)
        {
            self.last = Some((time, value));
        }
    }

    /// The value of `func` over a field of type `ty`, and its point's time
    /// (selectors), typed as the engine answers them; `None` where the
    /// engine's answer would not be exact here (an integer sum past i64).
    fn finish(&self, func: Aggregate, ty: FieldType) -> Option<(Value, Value)> {
        let typed = |value: f64| match ty {
            FieldType::Integer => Value::Integer(value as i64),
            _ => Value::Float(value),
        };
        let point = |found: Option<(f64, i64)>| match found {
            Some((value, time)) => (typed(value), Value::Integer(time)),
            None => (Value::Null, Value::Null),
        };
        let none = (Value::Null, Value::Null);
        Some(match func {
            Aggregate::Count => (Value::Unsigned(self.count), Value::Null),
            _ if self.count == 0 => none,
            Aggregate::Sum => match ty {
                FieldType::Integer => (
                    Value::Integer(i64::try_from(self.integers).ok()?),
                    Value::Null,
                ),
                _ => (Value::Float(self.floats), Value::Null),
            },
            Aggregate::Mean => {
                let sum = match ty {
                    FieldType::Integer => self.integers as f64,
                    _ => self.floats,
                };
                (Value::Float(sum / self.count as f64), Value::Null)
            }
            Aggregate::Min => point(self.min),
            Aggregate::Max => point(self.max),
            Aggregate::First => point(self.first.map(|(t, v)| (v, t))),
            Aggregate::Last => point(self.last.map(|(t, v)| (v, t))),
            _ => return None,
        })
    }
}
