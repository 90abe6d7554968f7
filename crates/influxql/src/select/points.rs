//! Statements whose aggregates are computed here ([`reduce`]), over the
//! points the engine reads in time order: each group's points into its
//! windows, then either one row per window — in the layout of the engine's
//! aggregate rows, so `fill()`, transformations and limits follow as for
//! those — or, for `distinct`, `top`, `bottom` and `sample`, the rows they
//! pick. What is read is bounded ([`MAX_POINTS`]).

use std::collections::BTreeMap;

use super::after::{
    aggregated_series, by_group, limited, move_time_first, series_of, window_start,
};
use super::aggregate::Aggregate;
use super::model::{aggregate_of, Column, Output};
use super::reduce::{integral, reduce, rows as picked_rows, Point};
use super::sql::{stop, Aggregation, Plan};
use crate::answer::{Series, Value};
use crate::error::Error;
use crate::parse::{Fill, Select};
use crate::plan::{text, Target};

/// The statement's series from its points, read by `sql`.
pub(super) fn series(
    select: &Select,
    target: &Target,
    plan: &Plan,
    points: Vec<Vec<Value>>,
    zone: Option<chrono_tz::Tz>,
    now: i64,
) -> Result<Vec<Series>, Error> {
    if points.len() > plan.max_points {
        return Err(format!(
            "the statement's functions read more than {} points of {} (query.max_points_in_memory): \
             narrow the time range or the series",
            plan.max_points, target.schema.name
        )
        .into());
    }
    let keys = plan.keys.len();
    let rows: Vec<Vec<Value>> = points.into_iter().map(move_time_first(keys)).collect();
    let groups = by_group(rows, keys);
    let window = |t: i64| match select.interval {
        Some(interval) => window_start(t, interval, zone),
        None => 0,
    };
    let giver = plan
        .outputs
        .iter()
        .position(|o| matches!(o.column, Column::Aggregate { func, .. } if func.gives_rows()));
    if let Some(giver) = giver {
        return Ok(groups
            .into_iter()
            .filter_map(|(group, rows)| {
                let rows = limited(select, picked(select, plan, giver, rows, &window));
                (!rows.is_empty())
                    .then(|| series_of(target, &plan.keys, group, &plan.columns, rows))
            })
            .collect());
    }
    // One row per window: (start, keys…, (value, time) per cell).
    let width = 1 + keys + 2 * plan.outputs.len();
    let at = (0..plan.outputs.len())
        .map(|i| (1 + keys + 2 * i, Some(2 + keys + 2 * i)))
        .collect();
    let mut windows = Vec::new();
    for (group, rows) in groups {
        for (start, cells) in reduced(select, plan, &rows, &window) {
            let mut row = vec![Value::Integer(start)];
            row.extend(group.iter().cloned().map(Value::String));
            row.extend(cells);
            windows.push(row);
        }
    }
    // `integral` alone answers only the windows it has a value for,
    // whatever `fill()` says (as InfluxDB does).
    let integrals_only = plan.outputs.iter().all(|o| {
        matches!(
            o.column,
            Column::Aggregate {
                func: Aggregate::Integral(_),
                ..
            }
        )
    });
    let unfilled;
    let select = match integrals_only {
        true => {
            unfilled = Select {
                fill: Fill::None,
                ..select.clone()
            };
            &unfilled
        }
        false => select,
    };
    let aggregation = Aggregation {
        sql: String::new(),
        at,
        width,
        stop: stop(select, now),
        rollups: false,
    };
    aggregated_series(select, target, plan, &aggregation, windows, zone, now)
}

/// Rows (time, cells…) by the start of their window, in time order.
fn by_window(
    rows: impl IntoIterator<Item = Vec<Value>>,
    window: &impl Fn(i64) -> i64,
) -> BTreeMap<i64, Vec<Vec<Value>>> {
    let mut windows: BTreeMap<i64, Vec<Vec<Value>>> = BTreeMap::new();
    for row in rows {
        if let Value::Time(t) = row[0] {
            windows.entry(window(t)).or_default().push(row);
        }
    }
    windows
}

/// One cell's points among `rows` (time, cells…): non-null values.
fn cell_points(rows: &[Vec<Value>], cell: usize) -> Vec<Point<'_>> {
    rows.iter()
        .enumerate()
        .filter_map(|(i, row)| match (&row[0], &row[cell + 1]) {
            (_, Value::Null) => None,
            (Value::Time(t), value) => Some((*t, value, i)),
            _ => None,
        })
        .collect()
}

/// Per window of one group's rows (time, cells…), in time order: its
/// start and each cell's (value, picked point's time).
fn reduced(
    select: &Select,
    plan: &Plan,
    rows: &[Vec<Value>],
    window: &impl Fn(i64) -> i64,
) -> Vec<(i64, Vec<Value>)> {
    let by_window = by_window(rows.iter().cloned(), window);
    // `integral` spans windows: computed over the group's points at once.
    let integrals: Vec<BTreeMap<i64, f64>> = plan
        .outputs
        .iter()
        .enumerate()
        .map(|(c, output)| match aggregate_of(&output.column) {
            Some(Aggregate::Integral(unit))
                if matches!(output.column, Column::Aggregate { .. }) =>
            {
                let points: Vec<(i64, f64)> = cell_points(rows, c)
                    .into_iter()
                    .filter_map(|(t, v, _)| Some((t, v.as_f64()?)))
                    .collect();
                let bounds = |t: i64| match select.interval {
                    Some(interval) => {
                        let start = window(t);
                        (start, start.saturating_add(interval.every))
                    }
                    None => (0, i64::MAX),
                };
                integral(&points, unit, bounds).into_iter().collect()
            }
            _ => BTreeMap::new(),
        })
        .collect();
    by_window
        .into_iter()
        .map(|(start, rows)| {
            let mut cells = Vec::with_capacity(2 * plan.outputs.len());
            // The point a lone selector picked: where fields beside it are read.
            let mut selected: Option<usize> = None;
            for (c, output) in plan.outputs.iter().enumerate() {
                let (value, time) =
                    cell_value(output, c, &rows, &integrals[c], start, &mut selected);
                cells.push(value);
                cells.push(time);
            }
            for (c, output) in plan.outputs.iter().enumerate() {
                if matches!(output.column, Column::Raw { .. }) {
                    cells[2 * c] = selected.map_or(Value::Null, |i| rows[i][c + 1].clone());
                }
            }
            (start, cells)
        })
        .collect()
}

fn cell_value(
    output: &Output,
    c: usize,
    rows: &[Vec<Value>],
    integrals: &BTreeMap<i64, f64>,
    start: i64,
    selected: &mut Option<usize>,
) -> (Value, Value) {
    let Column::Aggregate { func, .. } = output.column else {
        return (Value::Null, Value::Null);
    };
    if let Aggregate::Integral(_) = func {
        let value = integrals
            .get(&start)
            .map_or(Value::Null, |v| Value::Float(*v));
        return (value, Value::Null);
    }
    match reduce(func, &cell_points(rows, c)) {
        Some((value, Some(point))) => {
            *selected = Some(point);
            let Value::Time(t) = rows[point][0] else {
                return (value, Value::Null);
            };
            (value, Value::Integer(t))
        }
        Some((value, None)) => (value, Value::Null),
        None => (Value::Null, Value::Null),
    }
}

/// The rows `distinct`, `top`, `bottom` or `sample` (cell `giver`) picks
/// of one group's rows (time, cells…), window by window: (time, cells…)
/// with the fields beside it read at each picked point; `distinct`'s at
/// its window's start.
fn picked(
    select: &Select,
    plan: &Plan,
    giver: usize,
    rows: Vec<Vec<Value>>,
    window: &impl Fn(i64) -> i64,
) -> Vec<Vec<Value>> {
    let Column::Aggregate { func, .. } = plan.outputs[giver].column else {
        return Vec::new();
    };
    let by_window = by_window(rows, window);
    // Without GROUP BY time, the statement's start (or the epoch).
    let start_of = |start: i64| match select.interval {
        Some(_) => start,
        None => select.condition.start.unwrap_or(0),
    };
    let by_cells: Vec<usize> = plan
        .by_tags
        .iter()
        .filter_map(|tag| {
            plan.outputs
                .iter()
                .position(|o| matches!(&o.column, Column::Raw { name, .. } if name == tag))
        })
        .collect();
    let mut out = Vec::new();
    let windows: Vec<(i64, Vec<Vec<Value>>)> = match select.descending {
        true => by_window.into_iter().rev().collect(),
        false => by_window.into_iter().collect(),
    };
    for (start, rows) in windows {
        let points = cell_points(&rows, giver);
        let tag_sets: Option<Vec<String>> = (!by_cells.is_empty()).then(|| {
            rows.iter()
                .map(|row| {
                    let set: Vec<String> = by_cells.iter().map(|&c| text(&row[c + 1])).collect();
                    set.join("\u{0}")
                })
                .collect()
        });
        for i in picked_rows(func, &points, tag_sets.as_deref()) {
            let mut row = rows[i].clone();
            if func == Aggregate::Distinct {
                row[0] = Value::Time(start_of(start));
            }
            out.push(row);
        }
    }
    out
}
