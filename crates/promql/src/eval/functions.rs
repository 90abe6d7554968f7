//! PromQL's function calls, as Prometheus 2.x computes them: their
//! arguments evaluated, instant-vector functions per sample (math, dates,
//! labels, clamps), the few that see a whole vector, and range-vector
//! functions applied to each series' window (what they compute of a
//! window is `range_functions`'; `histogram_quantile` is `histogram`'s).

use chrono::{Datelike as _, Timelike as _};
use promql_parser::parser::{Call, Expr};

use super::evaluator::{duration_ms, unique, Evaluator, Val, Window};
use super::histogram::histogram_quantile;
use super::range_functions::{
    holt_winters, linear_regression, quantile, window_function, Span, WindowFunction,
};
use crate::error::Error;
use crate::value::{Labels, Sample, METRIC_NAME};

pub(super) fn call<'d>(ev: &'d Evaluator, call: &Call, ts: i64) -> Result<Val<'d>, Error> {
    let name = call.func.name;
    let args: Vec<&Expr> = call.args.args.iter().map(|a| a.as_ref()).collect();
    let out = match name {
        "time" => return Ok(Val::Scalar(ts as f64 / 1000.0)),
        "pi" => return Ok(Val::Scalar(std::f64::consts::PI)),
        "scalar" => {
            let v = vector(ev, args[0], ts)?;
            return Ok(Val::Scalar(if v.len() == 1 {
                v[0].value
            } else {
                f64::NAN
            }));
        }
        "vector" => vec![Sample {
            labels: Labels::default(),
            time: ts,
            value: scalar(ev, args[0], ts)?,
        }],
        "absent" | "absent_over_time" => {
            let absent = match name {
                "absent" => vector(ev, args[0], ts)?.is_empty(),
                _ => matrix(ev, args[0], ts)?.windows.is_empty(),
            };
            if absent {
                vec![Sample {
                    labels: absent_labels(args[0]),
                    time: ts,
                    value: 1.0,
                }]
            } else {
                Vec::new()
            }
        }
        "sort" | "sort_desc" => {
            let mut v = vector(ev, args[0], ts)?;
            let descending = name == "sort_desc";
            // NaN sorts last either way.
            v.sort_by(|a, b| match (a.value.is_nan(), b.value.is_nan()) {
                (true, true) => std::cmp::Ordering::Equal,
                (true, false) => std::cmp::Ordering::Greater,
                (false, true) => std::cmp::Ordering::Less,
                _ if descending => b.value.total_cmp(&a.value),
                _ => a.value.total_cmp(&b.value),
            });
            v.into_iter().map(|s| Sample { time: ts, ..s }).collect()
        }
        "timestamp" => vector(ev, args[0], ts)?
            .into_iter()
            .map(|s| Sample {
                labels: s.labels.without_name(),
                time: ts,
                value: s.time as f64 / 1000.0,
            })
            .collect(),
        "label_replace" => label_replace(ev, &args, ts)?,
        "label_join" => label_join(ev, &args, ts)?,
        "histogram_quantile" => {
            let q = scalar(ev, args[0], ts)?;
            histogram_quantile(q, vector(ev, args[1], ts)?, ts)
        }
        // Native histograms are not read yet: float samples have none.
        "histogram_count" | "histogram_sum" | "histogram_fraction" => Vec::new(),
        "round" => {
            let to_nearest = match args.get(1) {
                Some(arg) => scalar(ev, arg, ts)?,
                None => 1.0,
            };
            let inverse = 1.0 / to_nearest;
            map_values(ev, args[0], ts, |v| (v * inverse + 0.5).floor() / inverse)?
        }
        "clamp" => {
            let (min, max) = (scalar(ev, args[1], ts)?, scalar(ev, args[2], ts)?);
            if max < min {
                Vec::new()
            } else {
                map_values(ev, args[0], ts, |v| go_max(min, go_min(max, v)))?
            }
        }
        "clamp_max" => {
            let max = scalar(ev, args[1], ts)?;
            map_values(ev, args[0], ts, |v| go_min(v, max))?
        }
        "clamp_min" => {
            let min = scalar(ev, args[1], ts)?;
            map_values(ev, args[0], ts, |v| go_max(v, min))?
        }
        "day_of_month" | "day_of_week" | "day_of_year" | "days_in_month" | "hour" | "minute"
        | "month" | "year" => {
            let part = date_part(name);
            match args.first() {
                None => vec![Sample {
                    labels: Labels::default(),
                    time: ts,
                    value: part(ts as f64 / 1000.0),
                }],
                Some(arg) => map_values(ev, arg, ts, part)?,
            }
        }
        _ => {
            if let Some(f) = math(name) {
                map_values(ev, args[0], ts, f)?
            } else {
                range_function(ev, name, &args, ts)?
            }
        }
    };
    // (`map_values` and range functions check their own answers.)
    if matches!(
        name,
        "label_replace" | "label_join" | "histogram_quantile" | "timestamp"
    ) {
        unique(&out)?;
    }
    Ok(Val::Vector(out))
}

/// Go's `math.Max`: NaN if either is.
fn go_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// Go's `math.Min`: NaN if either is.
fn go_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

fn scalar(ev: &Evaluator, expr: &Expr, ts: i64) -> Result<f64, Error> {
    match ev.eval(expr, ts)? {
        Val::Scalar(v) => Ok(v),
        other => Err(Error::BadData(format!(
            "expected a scalar, got a {}",
            other.kind()
        ))),
    }
}

fn string(ev: &Evaluator, expr: &Expr, ts: i64) -> Result<String, Error> {
    match ev.eval(expr, ts)? {
        Val::String(s) => Ok(s),
        other => Err(Error::BadData(format!(
            "expected a string, got a {}",
            other.kind()
        ))),
    }
}

pub(super) fn vector(ev: &Evaluator, expr: &Expr, ts: i64) -> Result<Vec<Sample>, Error> {
    match ev.eval(expr, ts)? {
        Val::Vector(v) => Ok(v),
        other => Err(Error::BadData(format!(
            "expected an instant vector, got a {}",
            other.kind()
        ))),
    }
}

/// A range-vector argument's windows and the range they cover.
struct Matrix<'d> {
    windows: Vec<Window<'d>>,
    span: Span,
}

fn matrix<'d>(ev: &'d Evaluator, expr: &Expr, ts: i64) -> Result<Matrix<'d>, Error> {
    let (reference, range) = match unparen(expr) {
        Expr::MatrixSelector(ms) => (
            ev.reference(&ms.vs.at, &ms.vs.offset, ts),
            duration_ms(&ms.range),
        ),
        Expr::Subquery(sq) => (ev.reference(&sq.at, &sq.offset, ts), duration_ms(&sq.range)),
        _ => (ts, 0),
    };
    match ev.eval(expr, ts)? {
        Val::Matrix(windows) => Ok(Matrix {
            windows,
            span: Span {
                start: reference - range,
                end: reference,
                range_seconds: range as f64 / 1000.0,
            },
        }),
        other => Err(Error::BadData(format!(
            "expected a range vector, got a {}",
            other.kind()
        ))),
    }
}

/// `expr` without the parentheses around it.
pub(super) fn unparen(mut expr: &Expr) -> &Expr {
    while let Expr::Paren(p) = expr {
        expr = &p.expr;
    }
    expr
}

/// `f` of each sample's value; the metric name is dropped.
fn map_values(
    ev: &Evaluator,
    expr: &Expr,
    ts: i64,
    f: impl Fn(f64) -> f64,
) -> Result<Vec<Sample>, Error> {
    let input = vector(ev, expr, ts)?;
    let check = names_differ(input.iter().map(|s| &s.labels));
    let out: Vec<Sample> = input
        .into_iter()
        .map(|s| Sample {
            labels: s.labels.without_name(),
            time: ts,
            value: f(s.value),
        })
        .collect();
    if check {
        unique(&out)?;
    }
    Ok(out)
}

/// Whether the label sets carry more than one metric name: only then can
/// dropping it make two alike (they were distinct before).
fn names_differ<'l>(mut labels: impl Iterator<Item = &'l Labels>) -> bool {
    let Some(first) = labels.next() else {
        return false;
    };
    let name = first.get(METRIC_NAME);
    labels.any(|l| l.get(METRIC_NAME) != name)
}

fn math(name: &str) -> Option<fn(f64) -> f64> {
    Some(match name {
        "abs" => f64::abs,
        "ceil" => f64::ceil,
        "floor" => f64::floor,
        "exp" => f64::exp,
        "sqrt" => f64::sqrt,
        "ln" => f64::ln,
        "log2" => f64::log2,
        "log10" => f64::log10,
        "sgn" => |v| {
            if v < 0.0 {
                -1.0
            } else if v > 0.0 {
                1.0
            } else {
                v
            }
        },
        "deg" => |v| v * 180.0 / std::f64::consts::PI,
        "rad" => |v| v * std::f64::consts::PI / 180.0,
        "acos" => f64::acos,
        "acosh" => f64::acosh,
        "asin" => f64::asin,
        "asinh" => f64::asinh,
        "atan" => f64::atan,
        "atanh" => f64::atanh,
        "cos" => f64::cos,
        "cosh" => f64::cosh,
        "sin" => f64::sin,
        "sinh" => f64::sinh,
        "tan" => f64::tan,
        "tanh" => f64::tanh,
        _ => return None,
    })
}

/// A date function of Unix seconds, in UTC.
fn date_part(name: &str) -> fn(f64) -> f64 {
    fn at(seconds: f64) -> Option<chrono::DateTime<chrono::Utc>> {
        if !seconds.is_finite() {
            return None;
        }
        chrono::DateTime::from_timestamp(seconds as i64, 0)
    }
    match name {
        "day_of_month" => |s| at(s).map_or(f64::NAN, |t| f64::from(t.day())),
        "day_of_week" => {
            |s| at(s).map_or(f64::NAN, |t| f64::from(t.weekday().num_days_from_sunday()))
        }
        "day_of_year" => |s| at(s).map_or(f64::NAN, |t| f64::from(t.ordinal())),
        "days_in_month" => |s| {
            at(s).map_or(f64::NAN, |t| {
                let (y, m) = (t.year(), t.month());
                let next = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
                let first = chrono::NaiveDate::from_ymd_opt(y, m, 1);
                let following = chrono::NaiveDate::from_ymd_opt(next.0, next.1, 1);
                match (first, following) {
                    (Some(a), Some(b)) => (b - a).num_days() as f64,
                    _ => f64::NAN,
                }
            })
        },
        "hour" => |s| at(s).map_or(f64::NAN, |t| f64::from(t.hour())),
        "minute" => |s| at(s).map_or(f64::NAN, |t| f64::from(t.minute())),
        "month" => |s| at(s).map_or(f64::NAN, |t| f64::from(t.month())),
        _ => |s| at(s).map_or(f64::NAN, |t| f64::from(t.year())),
    }
}

/// The labels `absent()` answers with: those its selector fixes with `=`
/// (a label matched twice or otherwise is left out).
fn absent_labels(expr: &Expr) -> Labels {
    let vs = match unparen(expr) {
        Expr::VectorSelector(vs) => vs,
        Expr::MatrixSelector(ms) => &ms.vs,
        _ => return Labels::default(),
    };
    let mut fixed: Vec<(String, String)> = Vec::new();
    let mut dropped: Vec<&str> = Vec::new();
    for m in &vs.matchers.matchers {
        if m.name == METRIC_NAME {
            continue;
        }
        let equal = matches!(m.op, promql_parser::label::MatchOp::Equal);
        if equal && !fixed.iter().any(|(n, _)| *n == m.name) {
            fixed.push((m.name.clone(), m.value.clone()));
        } else {
            dropped.push(&m.name);
        }
    }
    fixed.retain(|(n, _)| !dropped.contains(&n.as_str()));
    Labels::new(fixed)
}

fn label_replace(ev: &Evaluator, args: &[&Expr], ts: i64) -> Result<Vec<Sample>, Error> {
    let v = vector(ev, args[0], ts)?;
    let dst = string(ev, args[1], ts)?;
    let replacement = string(ev, args[2], ts)?;
    let src = string(ev, args[3], ts)?;
    let pattern = string(ev, args[4], ts)?;
    let regex = regex::RegexBuilder::new(&format!("^(?:{pattern})$"))
        .size_limit(1 << 20)
        .build()
        .map_err(|err| {
            Error::Execution(format!(
                "invalid regular expression in label_replace(): {err}"
            ))
        })?;
    if !crate::naming::is_label_name(&dst) {
        return Err(Error::Execution(format!(
            "invalid destination label name in label_replace(): {dst}"
        )));
    }
    Ok(v.into_iter()
        .map(|s| {
            let value = s.labels.get(&src);
            let labels = match regex.captures(value) {
                Some(caps) => {
                    let mut out = String::new();
                    caps.expand(&replacement, &mut out);
                    s.labels.with(&dst, &out)
                }
                None => s.labels.clone(),
            };
            Sample {
                labels,
                time: ts,
                value: s.value,
            }
        })
        .collect())
}

fn label_join(ev: &Evaluator, args: &[&Expr], ts: i64) -> Result<Vec<Sample>, Error> {
    let v = vector(ev, args[0], ts)?;
    let dst = string(ev, args[1], ts)?;
    let separator = string(ev, args[2], ts)?;
    let mut sources = Vec::new();
    for arg in &args[3..] {
        let src = string(ev, arg, ts)?;
        if !crate::naming::is_label_name(&src) {
            return Err(Error::Execution(format!(
                "invalid source label name in label_join(): {src}"
            )));
        }
        sources.push(src);
    }
    if !crate::naming::is_label_name(&dst) {
        return Err(Error::Execution(format!(
            "invalid destination label name in label_join(): {dst}"
        )));
    }
    Ok(v.into_iter()
        .map(|s| {
            let joined: Vec<&str> = sources.iter().map(|src| s.labels.get(src)).collect();
            Sample {
                labels: s.labels.with(&dst, &joined.join(&separator)),
                time: ts,
                value: s.value,
            }
        })
        .collect())
}

/// A function of a range vector: one value per series with samples in the
/// window, the metric name dropped (but by `last_over_time`).
fn range_function(
    ev: &Evaluator,
    name: &str,
    args: &[&Expr],
    ts: i64,
) -> Result<Vec<Sample>, Error> {
    let matrix_at = if matches!(name, "quantile_over_time") {
        1
    } else {
        0
    };
    let m = matrix(ev, args[matrix_at], ts)?;
    let param = |i: usize| -> Result<f64, Error> { scalar(ev, args[i], ts) };
    let f: Box<WindowFunction> = match (window_function(name), name) {
        (Some(f), _) => f,
        (None, "predict_linear") => {
            let seconds = param(1)?;
            Box::new(move |p, _| {
                (p.len() >= 2).then(|| {
                    let (slope, intercept) = linear_regression(p, ts);
                    slope * seconds + intercept
                })
            })
        }
        (None, "quantile_over_time") => {
            let q = param(0)?;
            Box::new(move |p, _| Some(quantile(q, p.iter().map(|x| x.1).collect())))
        }
        (None, "holt_winters") => {
            let (smoothing, trend) = (param(1)?, param(2)?);
            if smoothing <= 0.0 || smoothing >= 1.0 {
                return Err(Error::Execution(format!(
                    "invalid smoothing factor. Expected: 0 < sf < 1, got: {smoothing:.6}"
                )));
            }
            if trend <= 0.0 || trend >= 1.0 {
                return Err(Error::Execution(format!(
                    "invalid trend factor. Expected: 0 < tf < 1, got: {trend:.6}"
                )));
            }
            Box::new(move |p, _| holt_winters(p, smoothing, trend))
        }
        (None, other) => {
            return Err(Error::BadData(format!(
                "function {other:?} is not supported"
            )))
        }
    };
    let keep_name = name == "last_over_time";
    let check = !keep_name && names_differ(m.windows.iter().map(|w| &w.labels));
    let out: Vec<Sample> = m
        .windows
        .iter()
        .filter_map(|w| {
            let value = f(&w.points, &m.span)?;
            let labels = if keep_name {
                w.labels.clone()
            } else {
                w.labels.without_name()
            };
            Some(Sample {
                labels,
                time: ts,
                value,
            })
        })
        .collect();
    if check {
        unique(&out)?;
    }
    Ok(out)
}
