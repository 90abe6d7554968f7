//! What the engine's (or memory's) rows still need to read as InfluxDB's
//! answer: every `GROUP BY time` interval of the range with `fill()`,
//! transformations (`derivative`, `difference`, …), series order,
//! `LIMIT`/`OFFSET` per series, rows grouped into [`Series`].

use std::collections::BTreeMap;

use super::model::{aggregate_of, transforms, Aggregate, Column, Output};
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

pub(super) fn series_of(
    target: &Target,
    keys: &[String],
    group: Vec<String>,
    outputs: &[Output],
    values: Vec<Vec<Value>>,
) -> Series {
    let mut columns = vec!["time".to_owned()];
    columns.extend(outputs.iter().map(|o| o.name.clone()));
    Series {
        name: Some(target.schema.name.clone()),
        tags: (!keys.is_empty()).then(|| keys.iter().cloned().zip(group).collect()),
        columns,
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

/// Each column's transformation over its non-null points, taken in the
/// statement's order (rows are (time, values…), descending when
/// `descending`, as InfluxDB runs them); the rows of every time that has a
/// result, in the same order.
pub(super) fn transformed(
    outputs: &[Output],
    rows: Vec<Vec<Value>>,
    default_unit: i64,
    descending: bool,
) -> Vec<Vec<Value>> {
    let mut by_time: BTreeMap<i64, Vec<Value>> = BTreeMap::new();
    for (c, output) in outputs.iter().enumerate() {
        let Column::Transform { func, .. } = output.column else {
            continue;
        };
        let points: Vec<(i64, f64, bool)> = rows
            .iter()
            .filter_map(|row| {
                let Value::Time(t) = row[0] else { return None };
                let integer = matches!(row[c + 1], Value::Integer(_) | Value::Unsigned(_));
                Some((t, row[c + 1].as_f64()?, integer))
            })
            .collect();
        for (t, value) in func.apply(&points, default_unit) {
            by_time
                .entry(t)
                .or_insert_with(|| vec![Value::Null; outputs.len()])[c] = value;
        }
    }
    let mut rows: Vec<Vec<Value>> = by_time
        .into_iter()
        .map(|(t, mut values)| {
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
        .map(|(o, (value, _))| (*value, aggregate_of(&o.column) == Some(Aggregate::Count)))
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
            .map(|(group, rows)| series_of(target, keys, group, outputs, rows))
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
        .map(|o| {
            matches!(
                o.column,
                Column::Aggregate {
                    func: Aggregate::Count,
                    ..
                }
            )
        })
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
                let rows = transformed(outputs, filled, interval.every, select.descending);
                limited(select, rows)
            }
            false => order_and_limit(select, filled),
        };
        if !rows.is_empty() {
            answer.push(series_of(target, keys, group, outputs, rows));
        }
    }
    Ok(answer)
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
