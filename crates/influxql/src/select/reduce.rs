//! Aggregates and selectors over one window's points, as InfluxDB's
//! reducers compute them: what the engine cannot be asked for in InfluxDB's
//! terms (`mode`, `integral`, `distinct`, `top`, `bottom`, `sample`), and
//! every other aggregate of a statement that has one, so that its row is
//! computed in one place. Pure: points in, values out.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use super::aggregate::Aggregate;
use crate::answer::Value;

/// One point of a cell: its time, its value (never null), and its row in
/// the window (where the other cells of a selected point are).
pub(super) type Point<'a> = (i64, &'a Value, usize);

/// The order of two values of one field (so of one type); numbers by
/// value whatever their kind.
pub(super) fn compare(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::String(a), Value::String(b)) => a.cmp(b),
        (Value::Boolean(a), Value::Boolean(b)) => a.cmp(b),
        (Value::Integer(a), Value::Integer(b)) => a.cmp(b),
        (Value::Unsigned(a), Value::Unsigned(b)) => a.cmp(b),
        (a, b) => match (a.as_f64(), b.as_f64()) {
            (Some(a), Some(b)) => a.total_cmp(&b),
            _ => Ordering::Equal,
        },
    }
}

/// `func` over `points` (in time order): its value, and for a selector
/// the point it picked; `None` when there is no point.
pub(super) fn reduce(func: Aggregate, points: &[Point]) -> Option<(Value, Option<usize>)> {
    let first = points.first()?;
    let numbers = || points.iter().filter_map(|(_, v, _)| v.as_f64());
    let picked = |point: &Point| Some(((*point.1).clone(), Some(point.2)));
    match func {
        Aggregate::Count => Some((Value::Integer(points.len() as i64), None)),
        Aggregate::CountDistinct => {
            let mut values: Vec<&Value> = points.iter().map(|(_, v, _)| *v).collect();
            values.sort_by(|a, b| compare(a, b));
            values.dedup_by(|a, b| compare(a, b) == Ordering::Equal);
            Some((Value::Integer(values.len() as i64), None))
        }
        Aggregate::Sum => Some((sum(points), None)),
        Aggregate::Mean => {
            let count = points.len() as f64;
            Some((Value::Float(numbers().sum::<f64>() / count), None))
        }
        Aggregate::Median => {
            let mut sorted: Vec<f64> = numbers().collect();
            sorted.sort_by(f64::total_cmp);
            let n = sorted.len();
            let median = match n % 2 {
                1 => sorted[n / 2],
                _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
            };
            Some((Value::Float(median), None))
        }
        Aggregate::Mode => Some((mode(points), None)),
        Aggregate::Spread => {
            let min = points.iter().min_by(|a, b| compare(a.1, b.1))?;
            let max = points.iter().max_by(|a, b| compare(a.1, b.1))?;
            Some((spread(min.1, max.1), None))
        }
        Aggregate::Stddev => {
            let n = points.len() as f64;
            if points.len() < 2 {
                return Some((Value::Null, None));
            }
            let mean = numbers().sum::<f64>() / n;
            let squares: f64 = numbers().map(|v| (v - mean) * (v - mean)).sum();
            Some((Value::Float((squares / (n - 1.0)).sqrt()), None))
        }
        // Among points at one time, the greatest value.
        Aggregate::First => picked(points.iter().fold(first, |best, p| {
            match p.0 < best.0 || p.0 == best.0 && compare(p.1, best.1).is_gt() {
                true => p,
                false => best,
            }
        })),
        Aggregate::Last => picked(points.iter().fold(first, |best, p| {
            match p.0 > best.0 || p.0 == best.0 && compare(p.1, best.1).is_gt() {
                true => p,
                false => best,
            }
        })),
        // Among equal values, the earliest point.
        Aggregate::Min => {
            picked(
                points
                    .iter()
                    .fold(first, |best, p| match compare(p.1, best.1).is_lt() {
                        true => p,
                        false => best,
                    }),
            )
        }
        Aggregate::Max => {
            picked(
                points
                    .iter()
                    .fold(first, |best, p| match compare(p.1, best.1).is_gt() {
                        true => p,
                        false => best,
                    }),
            )
        }
        Aggregate::Percentile(p) => {
            let mut sorted: Vec<&Point> = points.iter().collect();
            sorted.sort_by(|a, b| compare(a.1, b.1).then(a.0.cmp(&b.0)));
            let rank = (sorted.len() as f64 * p / 100.0 + 0.5).floor() as i64;
            match usize::try_from(rank - 1).ok().and_then(|i| sorted.get(i)) {
                Some(point) => picked(point),
                None => Some((Value::Null, None)),
            }
        }
        // Across windows (`integral`), or rows (`distinct`, `top`, …):
        // computed by their callers.
        Aggregate::Integral(_)
        | Aggregate::Distinct
        | Aggregate::Top(_)
        | Aggregate::Bottom(_)
        | Aggregate::Sample(_) => None,
    }
}

/// The sum, in the points' type: integers wrap as Go's do.
fn sum(points: &[Point]) -> Value {
    let mut integer: Option<i64> = Some(0);
    let mut unsigned: Option<u64> = Some(0);
    let mut float = 0.0;
    for (_, value, _) in points {
        integer = match (integer, value) {
            (Some(sum), Value::Integer(v)) => Some(sum.wrapping_add(*v)),
            _ => None,
        };
        unsigned = match (unsigned, value) {
            (Some(sum), Value::Unsigned(v)) => Some(sum.wrapping_add(*v)),
            _ => None,
        };
        float += value.as_f64().unwrap_or(0.0);
    }
    match (integer, unsigned) {
        (Some(sum), _) => Value::Integer(sum),
        (_, Some(sum)) => Value::Unsigned(sum),
        _ => Value::Float(float),
    }
}

fn spread(min: &Value, max: &Value) -> Value {
    match (min, max) {
        (Value::Integer(a), Value::Integer(b)) => Value::Integer(b.wrapping_sub(*a)),
        (Value::Unsigned(a), Value::Unsigned(b)) => Value::Unsigned(b.wrapping_sub(*a)),
        (a, b) => Value::Float(b.as_f64().unwrap_or(0.0) - a.as_f64().unwrap_or(0.0)),
    }
}

/// The most frequent value, found as InfluxDB's reducer finds it: over
/// the points sorted by value (then time), a run of one value wins when it
/// is longer than the best so far, or as long and starting no later than
/// the best's last point — and a run of one only when it comes first.
/// (Where InfluxDB's unstable sort leaves a run's points out of time
/// order, its pick among as frequent values may differ: docs/influxql.md,
/// `mode-ties`.)
fn mode(points: &[Point]) -> Value {
    let mut sorted: Vec<&Point> = points.iter().collect();
    sorted.sort_by(|a, b| compare(a.1, b.1).then(a.0.cmp(&b.0)));
    let (mut best, mut best_count, mut best_time) = (sorted[0].1, 0, sorted[0].0);
    let (mut current, mut count, mut current_time) = (sorted[0].1, 0, sorted[0].0);
    for point in &sorted {
        if compare(point.1, current).is_ne() {
            (current, count, current_time) = (point.1, 1, point.0);
            continue;
        }
        count += 1;
        if best_count > count || best_count == count && current_time > best_time {
            continue;
        }
        (best, best_count, best_time) = (point.1, count, point.0);
    }
    best.clone()
}

/// The rows `func` (`distinct`, `top`, `bottom`, `sample`) gives over one
/// window's points: the points it picks, in time order (`distinct`: the
/// first point of each value, in the order they come). `tag_sets`: for
/// `top(x, tag…, n)`, each point's tag set, of which only the greatest
/// point competes.
pub(super) fn rows(func: Aggregate, points: &[Point], tag_sets: Option<&[String]>) -> Vec<usize> {
    let mut picked: Vec<&Point> = match func {
        Aggregate::Distinct => {
            let mut seen: Vec<&Value> = Vec::new();
            let mut firsts = Vec::new();
            for point in points {
                if !seen.iter().any(|v| compare(v, point.1).is_eq()) {
                    seen.push(point.1);
                    firsts.push(point);
                }
            }
            return firsts.into_iter().map(|p| p.2).collect();
        }
        Aggregate::Top(n) | Aggregate::Bottom(n) => {
            let top = matches!(func, Aggregate::Top(_));
            // The greater (lesser) value first; among equal ones, the earlier.
            let rank = |a: &&Point, b: &&Point| {
                let by_value = compare(a.1, b.1);
                match top {
                    true => by_value.reverse(),
                    false => by_value,
                }
                .then(a.0.cmp(&b.0))
            };
            let mut candidates: Vec<&Point> = match tag_sets {
                None => points.iter().collect(),
                Some(sets) => {
                    let mut best: BTreeMap<&str, &Point> = BTreeMap::new();
                    for point in points {
                        let set = sets[point.2].as_str();
                        let better = best.get(set).is_none_or(|b| rank(&point, b).is_lt());
                        if better {
                            best.insert(set, point);
                        }
                    }
                    best.into_values().collect()
                }
            };
            candidates.sort_by(rank);
            candidates.truncate(n);
            candidates
        }
        Aggregate::Sample(n) => sample(points, n),
        _ => Vec::new(),
    };
    picked.sort_by_key(|p| p.0);
    picked.into_iter().map(|p| p.2).collect()
}

/// `n` of `points` at random (reservoir sampling; a fixed seed, so a
/// statement asked twice answers alike).
fn sample<'a>(points: &'a [Point<'a>], n: usize) -> Vec<&'a Point<'a>> {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = |bound: usize| {
        // xorshift64*
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        (state.wrapping_mul(0x2545_F491_4F6C_DD1D) % bound as u64) as usize
    };
    let mut kept: Vec<&Point> = Vec::with_capacity(n.min(points.len()));
    for (i, point) in points.iter().enumerate() {
        if kept.len() < n {
            kept.push(point);
        } else {
            let at = next(i + 1);
            if at < n {
                kept[at] = point;
            }
        }
    }
    kept
}

/// `integral(x, unit)` over one series group's points (time order), per
/// window (`window`: the start of the window of a time; one window when
/// there is no `GROUP BY time`), as InfluxDB's streaming reducer computes
/// it: trapezoids between consecutive points, the one that crosses a
/// window's end cut there at the line's value; a later point at the same
/// time replaces the earlier; a window whose only point is at its start
/// has no area and no value.
pub(super) fn integral(
    points: &[(i64, f64)],
    unit: i64,
    window: impl Fn(i64) -> (i64, i64),
) -> Vec<(i64, f64)> {
    let mut out = Vec::new();
    let Some(&(t0, v0)) = points.first() else {
        return out;
    };
    let (mut prev_t, mut prev_v) = (t0, v0);
    let (mut start, mut end) = window(t0);
    let mut sum = 0.0;
    let unit = unit as f64;
    for &(t, v) in &points[1..] {
        if t == prev_t {
            prev_v = v;
            continue;
        }
        if t >= end {
            if prev_t != end {
                let at_end = prev_v + (v - prev_v) * (end - prev_t) as f64 / (t - prev_t) as f64;
                sum += 0.5 * (at_end + prev_v) * (end - prev_t) as f64 / unit;
                (prev_t, prev_v) = (end, at_end);
            }
            out.push((start, sum));
            (start, end) = window(t);
            sum = 0.0;
        }
        sum += 0.5 * (v + prev_v) * (t - prev_t) as f64 / unit;
        (prev_t, prev_v) = (t, v);
    }
    if prev_t != start {
        out.push((start, sum));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn points(values: &[(i64, Value)]) -> Vec<Point<'_>> {
        values
            .iter()
            .enumerate()
            .map(|(i, (t, v))| (*t, v, i))
            .collect()
    }

    #[test]
    fn selectors_break_ties_as_influxdb_does() {
        let (f, i) = (Value::Float, Value::Integer);
        let data = [(0, f(3.0)), (1, f(5.0)), (2, f(5.0)), (2, f(1.0))];
        let p = points(&data);
        assert_eq!(reduce(Aggregate::Max, &p), Some((f(5.0), Some(1))));
        assert_eq!(reduce(Aggregate::Min, &p), Some((f(1.0), Some(3))));
        assert_eq!(reduce(Aggregate::Last, &p), Some((f(5.0), Some(2))));
        assert_eq!(reduce(Aggregate::Count, &p), Some((i(4), None)));
        assert_eq!(reduce(Aggregate::CountDistinct, &p), Some((i(3), None)));
        assert_eq!(reduce(Aggregate::Median, &p), Some((f(4.0), None)));
        assert_eq!(
            reduce(Aggregate::Percentile(50.0), &p),
            Some((f(3.0), Some(0)))
        );
        assert_eq!(reduce(Aggregate::Mode, &p), Some((f(5.0), None)));
        // All values once: the least, as InfluxDB's reducer ends up with.
        let once = [(0, f(2.0)), (1, f(1.0)), (2, f(3.0))];
        assert_eq!(
            reduce(Aggregate::Mode, &points(&once)),
            Some((f(1.0), None))
        );
        assert_eq!(rows(Aggregate::Top(2), &p, None), vec![1, 2]);
        assert_eq!(rows(Aggregate::Bottom(1), &p, None), vec![3]);
        assert_eq!(rows(Aggregate::Distinct, &p, None), vec![0, 1, 3]);
        let sets = [
            "a".to_owned(),
            "a".to_owned(),
            "b".to_owned(),
            "b".to_owned(),
        ];
        assert_eq!(rows(Aggregate::Top(2), &p, Some(&sets)), vec![1, 2]);
        assert_eq!(rows(Aggregate::Sample(10), &p, None), vec![0, 1, 2, 3]);
        assert_eq!(rows(Aggregate::Sample(2), &p, None).len(), 2);
    }

    #[test]
    fn integrals_cut_at_window_ends() {
        let window = |t: i64| (t / 10 * 10, t / 10 * 10 + 10);
        // 0..10: 5 × 1 (flat), then 10..12 at the line's value.
        let area = integral(&[(0, 1.0), (5, 1.0), (15, 3.0)], 1, window);
        assert_eq!(area, vec![(0, 5.0 + 5.0 * 1.5), (10, 5.0 * 2.5)]);
        assert_eq!(integral(&[(10, 1.0)], 1, window), vec![]);
        let whole = |_| (0, i64::MAX);
        assert_eq!(
            integral(&[(0, 2.0), (2, 2.0), (2, 4.0), (4, 4.0)], 2, whole),
            vec![(0, 2.0 + 4.0)]
        );
    }
}
