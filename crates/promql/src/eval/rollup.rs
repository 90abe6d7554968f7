//! Series-major evaluation of a range query's range functions and their
//! aggregations (VictoriaMetrics' rollups and incremental aggregation):
//! `rate(m[5m])` over a selector is computed for each series at every
//! step in one pass, each window found from the last one's, and `sum by
//! (…)` of it folded series by series into its group's value at each step
//! — instead of a vector of samples with their labels built, grouped and
//! hashed at every step.
//!
//! Only what gives the per-step evaluation's answer, bit for bit: a
//! function of the window alone ([`window_function`]) over a range
//! selector, at the query's steps (a subquery's steps off the query's
//! grid evaluate as before), series whose names do not collide once
//! dropped, and the aggregations that fold values in the order the
//! per-step vector holds them (`sum`, `avg`, `count`, `min`, `max`,
//! `group`). The value of such a node at a step depends on the step's
//! time alone, so a table made once answers every evaluation of it.

use rustc_hash::FxHashMap as HashMap;
use std::cell::RefCell;
use std::sync::Arc;

use chingest::parallel;
use promql_parser::parser::{AggregateExpr, Call, Expr, MatrixSelector};

use super::aggregate::group_labels;
use super::evaluator::{check_time, duration_ms, key, window, Evaluator, Grouped, Rolled};
use super::functions::unparen;
use super::range_functions::{counter_rates, window_function, Span};
use crate::error::Error;
use crate::value::{is_stale, Labels, METRIC_NAME};

/// Most (series × steps) values a table holds; past it, the per-step
/// evaluation runs (its memory is one step's).
const MAX_VALUES: usize = 20_000_000;

/// Series whose range function is worth a core of their own
/// (`parallel::map`).
const SERIES_PER_TASK: usize = 16;

/// Samples a thread keeps room for between the series it decodes to roll
/// them up (1 MiB), and the room itself.
const MAX_KEPT_DECODED: usize = 65_536;

thread_local! {
    static DECODED: RefCell<Vec<(i64, f64)>> = const { RefCell::new(Vec::new()) };
}

/// (Series × steps) values of an aggregation's fold worth a core of their
/// own.
const VALUES_PER_TASK: usize = 65_536;

/// A node's table from `tables`, made by `make` on first use (`None`:
/// the node is evaluated step by step) and kept for the query.
fn memoized<T>(
    tables: &RefCell<HashMap<usize, Option<Arc<T>>>>,
    node: usize,
    make: impl FnOnce() -> Result<Option<T>, Error>,
) -> Result<Option<Arc<T>>, Error> {
    if let Some(done) = tables.borrow().get(&node) {
        return Ok(done.clone());
    }
    let made = make()?.map(Arc::new);
    tables.borrow_mut().insert(node, made.clone());
    Ok(made)
}

/// `call`'s table, if it is a rollup.
pub(crate) fn rolled(ev: &Evaluator, call: &Call) -> Result<Option<Arc<Rolled>>, Error> {
    let node = call as *const Call as usize;
    memoized(&ev.rollups, node, || make_rolled(ev, call))
}

fn make_rolled(ev: &Evaluator, call: &Call) -> Result<Option<Rolled>, Error> {
    let Some(grid) = ev.grid else {
        return Ok(None);
    };
    let name = call.func.name;
    let (Some(f), [arg]) = (window_function(name), call.args.args.as_slice()) else {
        return Ok(None);
    };
    let Expr::MatrixSelector(ms) = unparen(arg) else {
        return Ok(None);
    };
    let MatrixSelector { vs, range } = ms;
    let Some(selection) = ev.data.get(&key(vs)) else {
        return Ok(None);
    };
    // Read as selection left them, each series decoded where it is rolled
    // up; decoded already, as they are.
    let pending = selection.pending();
    let labels: Vec<&Labels> = match pending {
        Some(selected) => selected.iter().map(|s| &s.labels).collect(),
        None => selection.series().iter().map(|s| &s.labels).collect(),
    };
    let keep_name = name == "last_over_time";
    let first_name = labels.first().map(|labels| labels.get(METRIC_NAME));
    let names_collide = !keep_name
        && labels
            .iter()
            .any(|labels| Some(labels.get(METRIC_NAME)) != first_name);
    if names_collide || labels.len().saturating_mul(grid.steps) > MAX_VALUES {
        return Ok(None);
    }
    let range = duration_ms(range);
    // As `Evaluator::windows` reads a selector at one time: the same
    // times for every series.
    let references: Vec<i64> = (0..grid.steps)
        .map(|k| ev.reference(&vs.at, &vs.offset, grid.time(k)))
        .collect();
    let range_seconds = range as f64 / 1000.0;
    let span = |reference: i64| Span {
        start: reference - range,
        end: reference,
        range_seconds,
    };
    let (deadline, cancelled) = (ev.deadline, &*ev.cancelled);
    let roll = |labels: &Labels, points: &[(i64, f64)]| {
        check_time(deadline, cancelled)?;
        let labels = match keep_name {
            true => labels.clone(),
            false => labels.without_name(),
        };
        let mut cursor = (0, 0);
        // Most series have no stale marker: their windows need no look.
        let has_stale = points.iter().any(|p| is_stale(p.1));
        if let ("rate" | "increase", false) = (name, has_stale) {
            let windows = references.iter().map(|&reference| {
                window(points, &mut cursor, reference, range, false);
                (cursor.0, cursor.1, span(reference))
            });
            return Ok((labels, counter_rates(points, name == "rate", windows)));
        }
        let values = references
            .iter()
            .map(|&reference| {
                let points = window(points, &mut cursor, reference, range, has_stale);
                match points.is_empty() {
                    true => None,
                    false => f(&points, &span(reference)),
                }
            })
            .collect();
        Ok((labels, values))
    };
    let rolled = match pending {
        Some(selected) => parallel::map(selected.iter().collect(), SERIES_PER_TASK, |s| {
            DECODED.with_borrow_mut(|points| {
                s.samples.decode_into(points);
                let rolled = roll(&s.labels, points);
                if points.capacity() > MAX_KEPT_DECODED {
                    *points = Vec::new();
                }
                rolled
            })
        }),
        None => parallel::map(selection.series().iter().collect(), SERIES_PER_TASK, |s| {
            roll(&s.labels, &s.points)
        }),
    };
    let out = rolled.into_iter().collect::<Result<_, Error>>()?;
    Ok(Some(Rolled { series: out }))
}

/// `agg`'s table, if it aggregates a rollup in a way that folds.
pub(crate) fn grouped(ev: &Evaluator, agg: &AggregateExpr) -> Result<Option<Arc<Grouped>>, Error> {
    let node = agg as *const AggregateExpr as usize;
    memoized(&ev.groupings, node, || make_grouped(ev, agg))
}

/// How an aggregation folds a group's values, in order.
#[derive(Clone, Copy)]
enum Fold {
    Sum,
    Avg,
    Count,
    Min,
    Max,
    Group,
}

/// A group's value so far at one step: as the per-step aggregation
/// computes it (`sum` from the first value on, `avg` as
/// `range_functions::average`, `min`/`max` replacing NaN).
#[derive(Clone, Copy)]
struct Acc {
    value: f64,
    count: f64,
}

impl Fold {
    fn first(self, v: f64) -> Acc {
        match self {
            Fold::Avg => {
                let mut acc = Acc {
                    value: 0.0,
                    count: 0.0,
                };
                self.add(&mut acc, v);
                acc
            }
            _ => Acc {
                value: v,
                count: 1.0,
            },
        }
    }

    fn add(self, acc: &mut Acc, v: f64) {
        match self {
            Fold::Sum => acc.value += v,
            Fold::Avg => {
                acc.count += 1.0;
                let (mean, count) = (acc.value, acc.count);
                if mean.is_infinite()
                    && ((v.is_infinite() && (mean > 0.0) == (v > 0.0))
                        || (!v.is_infinite() && !v.is_nan()))
                {
                    return;
                }
                acc.value = mean + (v / count - mean / count);
            }
            Fold::Count | Fold::Group => acc.count += 1.0,
            Fold::Min => {
                if acc.value > v || acc.value.is_nan() {
                    acc.value = v;
                }
            }
            Fold::Max => {
                if acc.value < v || acc.value.is_nan() {
                    acc.value = v;
                }
            }
        }
    }

    fn finish(self, acc: Acc) -> f64 {
        match self {
            Fold::Count => acc.count,
            Fold::Group => 1.0,
            _ => acc.value,
        }
    }
}

fn make_grouped(ev: &Evaluator, agg: &AggregateExpr) -> Result<Option<Grouped>, Error> {
    let fold = match agg.op.to_string().as_str() {
        "sum" => Fold::Sum,
        "avg" => Fold::Avg,
        "count" => Fold::Count,
        "min" => Fold::Min,
        "max" => Fold::Max,
        "group" => Fold::Group,
        _ => return Ok(None),
    };
    let (Some(grid), None, Expr::Call(call)) = (ev.grid, &agg.param, unparen(&agg.expr)) else {
        return Ok(None);
    };
    let Some(rolled) = rolled(ev, call)? else {
        return Ok(None);
    };
    let mut groups: Vec<Labels> = Vec::new();
    let mut of_series = Vec::with_capacity(rolled.series.len());
    let mut index = HashMap::default();
    for (labels, _) in &rolled.series {
        let group = group_labels(ev, agg, labels);
        let g = *index.entry(group.clone()).or_insert_with(|| {
            groups.push(group);
            groups.len() - 1
        });
        of_series.push(g);
    }
    // Steps fold independently: runs of them on every core, each series'
    // values folded in the series' order (the per-step vector's).
    let run = (VALUES_PER_TASK / rolled.series.len().max(1)).max(1);
    let runs: Vec<(usize, usize)> = (0..grid.steps)
        .step_by(run)
        .map(|first| (first, (first + run).min(grid.steps)))
        .collect();
    let (deadline, cancelled) = (ev.deadline, &*ev.cancelled);
    let folded = parallel::map(runs, 1, |(first, end)| {
        // Per step: each group's value so far, and the groups in the
        // order their first member comes.
        let mut accs: Vec<Vec<Option<Acc>>> = vec![vec![None; groups.len()]; end - first];
        let mut order: Vec<Vec<u32>> = vec![Vec::new(); end - first];
        for ((_, values), &g) in rolled.series.iter().zip(&of_series) {
            check_time(deadline, cancelled)?;
            for (k, value) in values[first..end].iter().enumerate() {
                let Some(v) = *value else { continue };
                match &mut accs[k][g] {
                    Some(acc) => fold.add(acc, v),
                    slot @ None => {
                        *slot = Some(fold.first(v));
                        order[k].push(g as u32);
                    }
                }
            }
        }
        let steps: Vec<Vec<(u32, f64)>> = order
            .into_iter()
            .zip(accs)
            .map(|(order, accs)| {
                order
                    .into_iter()
                    .map(|g| {
                        let acc = accs[g as usize].expect("a group in the order has a value");
                        (g, fold.finish(acc))
                    })
                    .collect()
            })
            .collect();
        Ok::<_, Error>(steps)
    });
    let mut steps = Vec::with_capacity(grid.steps);
    for run in folded {
        steps.extend(run?);
    }
    Ok(Some(Grouped { groups, steps }))
}

#[cfg(test)]
mod tests {
    use rustc_hash::FxHashMap as HashMap;
    use std::sync::atomic::AtomicBool;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::eval::evaluator::{Grid, ReadSeries};
    use crate::selected::{Samples, Selected};
    use crate::value::{Series, Value};

    const STALE: u64 = 0x7ff0_0000_0000_0002;

    /// Eight series of `m` (two jobs): counters with resets, gaps, NaN,
    /// ±Inf and stale markers, 15 s apart with jitter, over an hour.
    fn data() -> Vec<Series> {
        let mut seed = 7u64;
        let mut random = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as f64 / (1u64 << 31) as f64
        };
        (0..8)
            .map(|i| {
                let mut points = Vec::new();
                let mut value = 0.0;
                for k in 0..240 {
                    let t = k * 15_000 + (random() * 2_000.0) as i64;
                    let r = random();
                    value = match r {
                        r if r < 0.02 => 0.0,
                        r if r < 0.03 => f64::NAN,
                        r if r < 0.035 => f64::INFINITY,
                        r if r < 0.04 => f64::from_bits(STALE),
                        r if r < 0.1 => continue,
                        _ if value.is_finite() => value + random() * 10.0,
                        _ => random(),
                    };
                    points.push((t, value));
                }
                let labels = Labels::new(vec![
                    ("__name__".into(), "m".into()),
                    ("job".into(), ["a", "b"][i % 2].into()),
                    ("i".into(), i.to_string()),
                ]);
                Series { labels, points }
            })
            .collect()
    }

    /// `query` over the data, step by step or with rollups.
    fn run(query: &str, rollups: bool) -> Value {
        run_at(query, rollups, 30_000)
    }

    /// [`run`] at steps of `step` ms.
    fn run_at(query: &str, rollups: bool, step: i64) -> Value {
        let expr = crate::parse::parse_query(query).unwrap();
        let (start, end) = (600_000, 3_500_000);
        let mut selected = HashMap::default();
        for selection in super::super::selectors(&expr, start, end, (start, end), 300_000) {
            // As selection reads them: decoded where rolled up.
            let series = data().into_iter().map(|s| Selected {
                labels: s.labels,
                samples: Samples::decoded(s.points),
            });
            selected.insert(key(selection.selector), ReadSeries::new(series.collect()));
        }
        let evaluator = Evaluator {
            data: selected,
            lookback: 300_000,
            query: (start, end),
            deadline: Instant::now() + Duration::from_secs(60),
            cancelled: Arc::new(AtomicBool::new(false)),
            derived: Default::default(),
            interned: Default::default(),
            cursors: Default::default(),
            grid: rollups.then_some(Grid {
                start,
                step,
                steps: ((end - start) / step) as usize + 1,
            }),
            rollups: Default::default(),
            groupings: Default::default(),
        };
        let value = evaluator.run(&expr, start, end, step).unwrap();
        if rollups {
            assert!(
                evaluator.rollups.borrow().values().any(Option::is_some),
                "{query}: no rollup"
            );
        }
        value
    }

    /// The answer's values bit for bit, but NaN as one NaN: the sign and
    /// payload of a NaN an operation makes are the compiler's to choose
    /// (and Prometheus writes every NaN as `NaN`).
    fn bits(value: &Value) -> Vec<(String, Vec<(i64, u64)>)> {
        let Value::Matrix(series) = value else {
            panic!("not a matrix: {value:?}");
        };
        series
            .iter()
            .map(|s| {
                let points = s
                    .points
                    .iter()
                    .map(|(t, v)| (*t, if v.is_nan() { f64::NAN } else { *v }.to_bits()))
                    .collect();
                (s.labels.to_string(), points)
            })
            .collect()
    }

    #[test]
    fn folds_of_many_steps_on_every_core_answer_what_steps_answer() {
        // 8 series at 9,667 steps: the fold in two runs of steps.
        let step = 300;
        assert!(8 * ((3_500_000 - 600_000) / step) as usize > VALUES_PER_TASK);
        for query in [
            "sum by (job) (rate(m[1m]))",
            "avg(max_over_time(m[2m]))",
            "count without (i) (changes(m[1m]))",
        ] {
            assert_eq!(
                bits(&run_at(query, true, step)),
                bits(&run_at(query, false, step)),
                "{query}"
            );
        }
    }

    #[test]
    fn rollups_answer_what_steps_answer_bit_for_bit() {
        let functions = [
            "rate",
            "increase",
            "delta",
            "irate",
            "idelta",
            "deriv",
            "changes",
            "resets",
            "avg_over_time",
            "sum_over_time",
            "count_over_time",
            "min_over_time",
            "max_over_time",
            "last_over_time",
            "present_over_time",
            "stddev_over_time",
            "stdvar_over_time",
        ];
        for f in functions {
            for selector in ["m[1m]", "m[5m] offset 2m", "m[2m] @ 1800"] {
                let call = format!("{f}({selector})");
                let mut queries = vec![call.clone(), format!("100 - {call} * 2")];
                for agg in ["sum", "avg", "count", "min", "max", "group"] {
                    queries.push(format!("{agg} by (job) ({call})"));
                    queries.push(format!("{agg}({call})"));
                    queries.push(format!("{agg} without (i) ({call})"));
                }
                for query in queries {
                    assert_eq!(
                        bits(&run(&query, true)),
                        bits(&run(&query, false)),
                        "{query}"
                    );
                }
            }
        }
    }
}
