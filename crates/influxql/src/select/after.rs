//! What the engine's (or memory's) rows still need to read as InfluxDB's
//! answer: every `GROUP BY time` interval of the range with `fill()`,
//! transformations (`derivative`, `difference`, …), series order,
//! `LIMIT`/`OFFSET` per series, rows grouped into [`Series`].

use std::collections::BTreeMap;

use super::aggregate::Aggregate;
use super::math::Formula;
use super::model::{aggregate_of, transforms, Column, Output, Projection};
use super::sql::{Aggregation, Plan};
use crate::answer::{Series, Value};
use crate::error::Error;
use crate::parse::{Fill, Interval, Select};
use crate::plan::{page, text, Target};

/// Most intervals × series a `GROUP BY time` answer may have: a bound on
/// what a one-line query (`GROUP BY time(1ns)` over a year) can make the
/// server build.
pub(super) const MAX_INTERVALS: i64 = 1_000_000;

/// Rows grouped by their first `keys` cells (sorted by them), the rest of
/// each row kept.
pub(super) fn by_group(
    rows: Vec<Vec<Value>>,
    keys: usize,
) -> BTreeMap<Vec<String>, Vec<Vec<Value>>> {
    let mut groups: BTreeMap<Vec<String>, Vec<Vec<Value>>> = BTreeMap::new();
    for mut row in rows {
        let rest = row.split_off(keys);
        groups
            .entry(row.iter().map(text).collect())
            .or_default()
            .push(rest);
    }
    groups
}

/// One series of the answer from its rows of cells (time first): each
/// row's columns computed from its cells.
pub(super) fn series_of(
    target: &Target,
    keys: &[String],
    group: Vec<String>,
    columns: &[Projection],
    rows: Vec<Vec<Value>>,
) -> Series {
    let mut names = vec!["time".to_owned()];
    names.extend(columns.iter().map(|(name, _)| name.clone()));
    let identity = columns
        .iter()
        .enumerate()
        .all(|(i, (_, formula))| *formula == Formula::Cell(i));
    let values = match identity {
        true => rows,
        false => rows
            .into_iter()
            .map(|mut row| {
                let cells = row.split_off(1);
                row.extend(columns.iter().map(|(_, formula)| formula.evaluate(&cells)));
                row
            })
            .collect(),
    };
    Series {
        name: Some(target.schema.name.clone()),
        tags: (!keys.is_empty()).then(|| keys.iter().cloned().zip(group).collect()),
        columns: names,
        values,
    }
}

/// Orders one series' rows (ascending in, as `ORDER BY` asks out) and
/// applies `OFFSET` and `LIMIT`.
pub(super) fn order_and_limit(select: &Select, mut rows: Vec<Vec<Value>>) -> Vec<Vec<Value>> {
    if select.descending {
        rows.reverse();
    }
    limited(select, rows)
}

/// `OFFSET` and `LIMIT` on one series' rows.
pub(super) fn limited(select: &Select, rows: Vec<Vec<Value>>) -> Vec<Vec<Value>> {
    // LIMIT 0 is no limit, as in InfluxDB.
    page(rows, select.offset, select.limit.filter(|&n| n > 0))
}

/// Rows come as (time, keys…, values…); grouping wants (keys…, time,
/// values…).
pub(super) fn move_time_first(keys: usize) -> impl Fn(Vec<Value>) -> Vec<Value> {
    move |mut row| {
        let time = row.remove(0);
        let time = match time {
            Value::Integer(t) => Value::Time(t),
            other => other,
        };
        row.insert(keys, time);
        row
    }
}

/// Each cell's transformation over its non-null points, taken in the
/// statement's order (rows are (time, cells…), descending when
/// `descending`, as InfluxDB runs them); the other cells (aggregates beside
/// a transformation of one) as they are. A row for every time some cell
/// has a value at, in the same order; points at one time (series merged)
/// each keep their row.
pub(super) fn transformed(
    plan: &Plan,
    rows: Vec<Vec<Value>>,
    default_unit: i64,
    descending: bool,
) -> Vec<Vec<Value>> {
    let outputs = plan.outputs.as_slice();
    // (time, the how-manieth at that time) → the row's cells.
    let mut merged: BTreeMap<(i64, usize), Vec<Value>> = BTreeMap::new();
    let mut put = |c: usize, column: Vec<(i64, Value)>| {
        let mut seen: BTreeMap<i64, usize> = BTreeMap::new();
        for (t, value) in column {
            let nth = seen.entry(t).or_insert(0);
            merged
                .entry((t, *nth))
                .or_insert_with(|| vec![Value::Null; outputs.len()])[c] = value;
            *nth += 1;
        }
    };
    for (c, output) in outputs.iter().enumerate() {
        let times = rows.iter().filter_map(|row| match row[0] {
            Value::Time(t) => Some((t, &row[c + 1])),
            _ => None,
        });
        let Column::Transform { func, .. } = output.column else {
            put(c, times.map(|(t, v)| (t, v.clone())).collect());
            continue;
        };
        // Only those that read the interval before the range see it.
        let seen =
            |t: &i64| func.reads_previous_interval() || plan.answer_from.is_none_or(|s| *t >= s);
        let points: Vec<(i64, f64, bool)> = times
            .filter(|(t, _)| seen(t))
            .filter_map(|(t, value)| {
                let integer = matches!(value, Value::Integer(_) | Value::Unsigned(_));
                match (value.as_f64(), func.reads_values()) {
                    (Some(v), _) => Some((t, v, integer)),
                    (None, false) if !value.is_null() => Some((t, 0.0, false)),
                    (None, _) => None,
                }
            })
            .collect();
        put(c, func.apply(&points, default_unit));
    }
    let mut rows: Vec<Vec<Value>> = merged
        .into_iter()
        .map(|((t, _), mut values)| {
            values.insert(0, Value::Time(t));
            values
        })
        .collect();
    if descending {
        rows.reverse();
    }
    rows
}

/// The start of the `GROUP BY time` interval that holds `t`, as InfluxDB
/// computes it (in `zone`'s local time when given).
pub(super) fn window_start(t: i64, interval: Interval, zone: Option<chrono_tz::Tz>) -> i64 {
    use chrono::{Offset as _, TimeZone as _};
    let offset_at = |ns: i64| -> i64 {
        zone.map_or(0, |zone| {
            let utc = chrono::Utc.timestamp_nanos(ns);
            i64::from(utc.with_timezone(&zone).offset().fix().local_minus_utc()) * 1_000_000_000
        })
    };
    let t0 = t - interval.offset;
    let zone_offset = offset_at(t0);
    let mut start = t0 - (t0 + zone_offset).rem_euclid(interval.every);
    let shift = zone_offset - offset_at(start);
    if shift != 0 && shift.abs() < interval.every {
        start += shift;
    }
    start + interval.offset
}

/// `fill(previous | linear | number)` over one series' rows (time first).
pub(super) fn fill(rows: &mut [Vec<Value>], how: Fill) {
    let width = rows.first().map_or(0, Vec::len);
    for c in 1..width {
        match how {
            Fill::Null | Fill::None => {}
            Fill::Integer(n) => rows
                .iter_mut()
                .filter(|r| r[c].is_null())
                .for_each(|r| r[c] = Value::Integer(n)),
            Fill::Float(n) => rows
                .iter_mut()
                .filter(|r| r[c].is_null())
                .for_each(|r| r[c] = Value::Float(n)),
            Fill::Previous => {
                let mut previous = Value::Null;
                for row in rows.iter_mut() {
                    match row[c].is_null() {
                        true => row[c] = previous.clone(),
                        false => previous = row[c].clone(),
                    }
                }
            }
            Fill::Linear => {
                let known: Vec<usize> =
                    (0..rows.len()).filter(|&i| !rows[i][c].is_null()).collect();
                for pair in known.windows(2) {
                    let (a, b) = (pair[0], pair[1]);
                    let (Value::Time(ta), Value::Time(tb)) = (&rows[a][0], &rows[b][0]) else {
                        continue;
                    };
                    let (ta, tb) = (*ta, *tb);
                    let (Some(va), Some(vb)) = (rows[a][c].as_f64(), rows[b][c].as_f64()) else {
                        continue;
                    };
                    let integer = matches!(rows[a][c], Value::Integer(_))
                        && matches!(rows[b][c], Value::Integer(_));
                    for row in &mut rows[a + 1..b] {
                        let Value::Time(t) = row[0] else { continue };
                        let v = va + (vb - va) * (t - ta) as f64 / (tb - ta) as f64;
                        row[c] = match integer {
                            true => Value::Integer(v as i64),
                            false => Value::Float(v),
                        };
                    }
                }
            }
        }
    }
}

/// The series of an aggregate statement from its rows, the engine's or
/// memory's (`now`: what `now()` means).
pub(super) fn aggregated_series(
    select: &Select,
    target: &Target,
    plan: &Plan,
    aggregation: &Aggregation,
    rows: Vec<Vec<Value>>,
    zone: Option<chrono_tz::Tz>,
    now: i64,
) -> Result<Vec<Series>, Error> {
    let (outputs, keys) = (plan.outputs.as_slice(), plan.keys.as_slice());
    let (at, stop) = (&aggregation.at, aggregation.stop);
    let aggregated: Vec<&Output> = outputs.iter().filter(|o| o.column.aggregates()).collect();
    // A row where no aggregate found a point (every value NULL, every
    // count 0) is no row: a group or interval whose points lack the fields,
    // or the one row the engine answers for aggregating nothing.
    let found: Vec<(usize, bool)> = outputs
        .iter()
        .zip(at)
        .filter(|(o, _)| o.column.aggregates())
        .map(|(o, (value, _))| {
            (
                *value,
                aggregate_of(&o.column).is_some_and(Aggregate::counts),
            )
        })
        .collect();
    let rows: Vec<Vec<Value>> = rows
        .into_iter()
        .filter(|row| {
            found.iter().any(|&(i, count)| match &row[i] {
                Value::Null => false,
                Value::Unsigned(0) => !count,
                _ => true,
            })
        })
        .collect();
    let lone_selector = aggregated.len() == 1
        && matches!(aggregated[0].column, Column::Aggregate { func, .. } if func.is_selector());
    let selector_time = outputs
        .iter()
        .position(|o| o.column.aggregates())
        .and_then(|i| at[i].1);
    // (keys…, time, values…) per row, with the interval's time or the
    // statement's.
    let start = select.condition.start.unwrap_or(0);
    let shaped: Vec<Vec<Value>> = rows
        .into_iter()
        .map(|row| {
            let mut out: Vec<Value> = row[1..=keys.len()].to_vec();
            let time = match (select.interval, lone_selector) {
                (Some(_), _) => match row[0] {
                    Value::Integer(t) | Value::Time(t) => t,
                    _ => start,
                },
                (None, true) => match selector_time.map(|i| &row[i]) {
                    Some(Value::Integer(t)) => *t,
                    _ => start,
                },
                (None, false) => start,
            };
            out.push(Value::Time(time));
            out.extend(at.iter().map(|(value, _)| row[*value].clone()));
            out
        })
        .collect();
    let groups = by_group(shaped, keys.len());
    let Some(interval) = select.interval else {
        return Ok(groups
            .into_iter()
            .map(|(group, rows)| series_of(target, keys, group, &plan.columns, rows))
            .collect());
    };
    // Every interval from the range's start (or the first point's) to its end.
    let first = match select.condition.start {
        Some(start) => window_start(start, interval, zone),
        None => groups
            .values()
            .flat_map(|rows| rows.first())
            .filter_map(|row| match row[0] {
                Value::Time(t) => Some(t),
                _ => None,
            })
            .min()
            .unwrap_or(0),
    };
    let last = window_start(stop.unwrap_or(now).saturating_sub(1), interval, zone);
    let intervals = (last.saturating_sub(first)) / interval.every + 1;
    if intervals.saturating_mul(groups.len().max(1) as i64) > MAX_INTERVALS {
        return Err(format!(
            "GROUP BY time({}ns) makes {intervals} intervals for each of {} series, over the \
             limit of {MAX_INTERVALS} in all: narrow the time range or widen the interval",
            interval.every,
            groups.len()
        )
        .into());
    }
    let transforms = transforms(outputs);
    // Count reports 0 for an empty interval, not null.
    let counts: Vec<bool> = outputs
        .iter()
        .map(|o| matches!(o.column, Column::Aggregate { func, .. } if func.counts()))
        .collect();
    let mut answer = Vec::new();
    for (group, rows) in groups {
        let by_start: BTreeMap<i64, Vec<Value>> = rows
            .into_iter()
            .filter_map(|mut row| match row.remove(0) {
                Value::Time(t) => Some((t, row)),
                _ => None,
            })
            .collect();
        let mut filled: Vec<Vec<Value>> = Vec::new();
        let mut t = first;
        while t <= last {
            let row = by_start.get(&t).cloned();
            if !(row.is_none() && select.fill == Fill::None) {
                let missing = row.is_none();
                let mut values = row.unwrap_or_else(|| vec![Value::Null; outputs.len()]);
                if missing && select.fill == Fill::Null {
                    for (value, count) in values.iter_mut().zip(&counts) {
                        if *count {
                            *value = Value::Integer(0);
                        }
                    }
                }
                values.insert(0, Value::Time(t));
                filled.push(values);
            }
            let mut next = window_start(t + interval.every, interval, zone);
            if next <= t {
                next = window_start(t + 2 * interval.every, interval, zone);
            }
            t = next;
        }
        fill(&mut filled, select.fill);
        let rows = match transforms {
            true => {
                if select.descending {
                    filled.reverse();
                }
                let rows = transformed(plan, filled, interval.every, select.descending);
                limited(select, rows)
            }
            false => order_and_limit(select, filled),
        };
        if !rows.is_empty() {
            answer.push(series_of(target, keys, group, &plan.columns, rows));
        }
    }
    Ok(answer)
}

/// The series of raw points read as (time, group keys…, cells…) rows in
/// the statement's order; `paged`: whether `LIMIT` and `OFFSET` are still
/// to apply (else the engine applied them).
pub(super) fn raw_series(
    select: &Select,
    target: &Target,
    plan: &Plan,
    read: Vec<Vec<Value>>,
    paged: bool,
) -> Vec<Series> {
    let (outputs, keys) = (plan.outputs.as_slice(), plan.keys.as_slice());
    let transforms = transforms(outputs);
    let read = read.into_iter().map(move_time_first(keys.len())).collect();
    let mut answer = Vec::new();
    for (group, mut rows) in by_group(read, keys.len()) {
        if transforms {
            // The rows' order is the statement's.
            let unit = 1_000_000_000;
            rows = limited(select, transformed(plan, rows, unit, select.descending));
        } else if paged {
            rows = limited(select, rows);
        }
        if !rows.is_empty() {
            answer.push(series_of(target, keys, group, &plan.columns, rows));
        }
    }
    answer
}

/// Rows before `start` (read so that transformations have the interval
/// before the range): only the columns computed from transformations keep
/// their values there, and a row left with none is dropped.
pub(super) fn only_transformed_before(series: &mut Vec<Series>, plan: &Plan, start: i64) {
    let transformed: Vec<bool> = plan
        .columns
        .iter()
        .map(|(_, formula)| {
            let cells = formula.cells();
            !cells.is_empty()
                && cells
                    .iter()
                    .all(|&&c| matches!(plan.outputs[c].column, Column::Transform { .. }))
        })
        .collect();
    for one in series.iter_mut() {
        one.values.retain_mut(|row| {
            if !matches!(row.first(), Some(Value::Time(t)) if *t < start) {
                return true;
            }
            for (value, transformed) in row[1..].iter_mut().zip(&transformed) {
                if !transformed {
                    *value = Value::Null;
                }
            }
            row[1..].iter().any(|v| !v.is_null())
        });
    }
    series.retain(|one| !one.values.is_empty());
}

/// Point rows read outside the engine — (time, group keys…, cells…),
/// each with its series' key — put in the order the engine's points
/// statement answers them: by group, then time (latest first when
/// `descending`), then series key (how InfluxDB merges series).
pub(super) fn in_points_order(
    rows: Vec<(Vec<Value>, String)>,
    keys: usize,
    descending: bool,
) -> Vec<Vec<Value>> {
    let mut rows = rows;
    rows.sort_by(|(a, key_a), (b, key_b)| {
        let time = |row: &[Value]| match row[0] {
            Value::Integer(t) | Value::Time(t) => t,
            _ => 0,
        };
        let by_time = match descending {
            true => time(b).cmp(&time(a)),
            false => time(a).cmp(&time(b)),
        };
        a[1..=keys]
            .iter()
            .map(text)
            .cmp(b[1..=keys].iter().map(text))
            .then(by_time)
            .then(key_a.cmp(key_b))
    });
    rows.into_iter().map(|(row, _)| row).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: i64 = 60_000_000_000;

    #[test]
    fn windows_align_to_the_epoch_offset_and_zone() {
        let minute = Interval {
            every: MINUTE,
            offset: 0,
        };
        assert_eq!(window_start(61 * 1_000_000_000, minute, None), MINUTE);
        assert_eq!(window_start(-1, minute, None), -MINUTE);
        let shifted = Interval {
            every: MINUTE,
            offset: 15_000_000_000,
        };
        assert_eq!(window_start(MINUTE, shifted, None), 15_000_000_000);
        let day = Interval {
            every: 1440 * MINUTE,
            offset: 0,
        };
        let chicago: chrono_tz::Tz = "America/Chicago".parse().unwrap();
        // 2020-01-02T03:00Z is 2020-01-01T21:00-06:00: the local day starts at 06:00Z.
        let t = 1_577_934_000 * 1_000_000_000;
        assert_eq!(
            window_start(t, day, Some(chicago)),
            1_577_858_400 * 1_000_000_000
        );
    }

    #[test]
    fn fills() {
        let rows = || {
            vec![
                vec![Value::Time(0), Value::Float(1.0)],
                vec![Value::Time(10), Value::Null],
                vec![Value::Time(20), Value::Null],
                vec![Value::Time(30), Value::Float(4.0)],
            ]
        };
        let mut linear = rows();
        fill(&mut linear, Fill::Linear);
        assert_eq!(linear[1][1], Value::Float(2.0));
        assert_eq!(linear[2][1], Value::Float(3.0));
        let mut previous = rows();
        fill(&mut previous, Fill::Previous);
        assert_eq!(previous[2][1], Value::Float(1.0));
        let mut zero = rows();
        fill(&mut zero, Fill::Integer(0));
        assert_eq!(zero[1][1], Value::Integer(0));
    }
}
