//! Evaluation of a parsed query over the samples its selectors selected,
//! in memory, with Prometheus 2.x's semantics: an instant query is one
//! evaluation, a range query one per step (a step's answer does not
//! depend on the others', so this is what Prometheus's range evaluation
//! computes). The samples are read beforehand ([`selectors`] says which
//! and over what times), so nothing here waits on the engine.
//!
//! Here: which samples a query needs ([`selectors`]) and the dispatch of
//! an expression by its kind. The submodules: `evaluator` (what they all
//! share: the evaluator's state, the values passed between them, reading
//! a selector at one time; it imports none of them), `functions` (calls),
//! `range_functions` (a range function of one series' window),
//! `histogram` (`histogram_quantile`), `aggregate` (`sum by`, `topk`, …),
//! `binary` (operators and vector matching), `rollup` (a range query's range functions and their
//! aggregations, series by series).

mod aggregate;
mod binary;
mod evaluator;
mod functions;
mod histogram;
mod range_functions;
mod rollup;

use rustc_hash::FxHashMap as HashMap;
use std::borrow::Cow;

use promql_parser::parser::{AtModifier, Expr, Offset, VectorSelector};

use crate::error::Error;
use crate::value::{Labels, Sample, Series, Value};
use evaluator::{at_ms, duration_ms, offset_ms, same_labelset, unique, Val, Window};

pub(crate) use evaluator::{key, Evaluator, Grid, ReadSeries};

/// A subquery's step when it names none (Prometheus's default evaluation
/// interval).
const DEFAULT_SUBQUERY_STEP_MS: i64 = 60_000;

/// One selector of a query and the times its samples are needed over.
pub(crate) struct Selection<'e> {
    pub(crate) selector: &'e VectorSelector,
    pub(crate) start: i64,
    pub(crate) end: i64,
    /// For the range of a function that a bucket's last (or greatest, or
    /// least) sample answers closely: what may stand for each bucket's
    /// samples, and the range (docs/downsampling.md).
    pub(crate) thin: Option<(Thinned, i64)>,
}

/// What a rollup's bucket gives a range function instead of its samples:
/// one sample at the time of the bucket's last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Thinned {
    /// The last sample (`rate`, `increase`, `delta`, `last_over_time`).
    Last,
    /// The greatest value (`max_over_time`).
    Max,
    /// The least value (`min_over_time`).
    Min,
}

impl Thinned {
    /// What stands for a bucket in the range of the function `name`;
    /// `None` where the bucket's samples are all needed.
    fn of_function(name: &str) -> Option<Thinned> {
        match name {
            "rate" | "increase" | "delta" | "last_over_time" => Some(Thinned::Last),
            "max_over_time" => Some(Thinned::Max),
            "min_over_time" => Some(Thinned::Min),
            _ => None,
        }
    }
}

/// The selectors of `expr` evaluated at times in `[start, end]` (ms) and
/// the samples each needs: a lookback or range before its evaluation
/// times, moved by `offset`, pinned by `@`, widened by subqueries.
pub(crate) fn selectors(
    expr: &Expr,
    start: i64,
    end: i64,
    query: (i64, i64),
    lookback: i64,
) -> Vec<Selection<'_>> {
    let mut out = Vec::new();
    collect(expr, start, end, query, lookback, &mut out);
    out
}

fn collect<'e>(
    expr: &'e Expr,
    start: i64,
    end: i64,
    query: (i64, i64),
    lookback: i64,
    out: &mut Vec<Selection<'e>>,
) {
    let pinned = |at: &Option<AtModifier>, offset: &Option<Offset>| {
        let (lo, hi) = match at_ms(at, query) {
            Some(t) => (t, t),
            None => (start, end),
        };
        (lo - offset_ms(offset), hi - offset_ms(offset))
    };
    match expr {
        Expr::VectorSelector(vs) => {
            let (lo, hi) = pinned(&vs.at, &vs.offset);
            out.push(Selection {
                selector: vs,
                start: lo - lookback,
                end: hi,
                thin: None,
            });
        }
        Expr::MatrixSelector(ms) => {
            let (lo, hi) = pinned(&ms.vs.at, &ms.vs.offset);
            let range = duration_ms(&ms.range);
            out.push(Selection {
                selector: &ms.vs,
                start: lo - range,
                end: hi,
                thin: None,
            });
        }
        Expr::Subquery(sq) => {
            let (lo, hi) = pinned(&sq.at, &sq.offset);
            let before = out.len();
            collect(
                &sq.expr,
                lo - duration_ms(&sq.range),
                hi,
                query,
                lookback,
                out,
            );
            // Inside a subquery the steps are the subquery's: nothing is thinned.
            for selection in &mut out[before..] {
                selection.thin = None;
            }
        }
        Expr::Aggregate(agg) => {
            if let Some(param) = &agg.param {
                collect(param, start, end, query, lookback, out);
            }
            collect(&agg.expr, start, end, query, lookback, out);
        }
        Expr::Unary(u) => collect(&u.expr, start, end, query, lookback, out),
        Expr::Binary(b) => {
            collect(&b.lhs, start, end, query, lookback, out);
            collect(&b.rhs, start, end, query, lookback, out);
        }
        Expr::Paren(p) => collect(&p.expr, start, end, query, lookback, out),
        Expr::Call(call) => {
            let thinned = Thinned::of_function(call.func.name);
            for arg in &call.args.args {
                let before = out.len();
                collect(arg, start, end, query, lookback, out);
                if let (Some(thinned), Expr::MatrixSelector(ms)) = (thinned, arg.as_ref()) {
                    out[before].thin = Some((thinned, duration_ms(&ms.range)));
                }
            }
        }
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => {}
    }
}

impl Evaluator {
    /// `expr` at each of `times`: one value for an instant query, a matrix
    /// of every step's samples for a range query.
    pub(crate) fn run(&self, expr: &Expr, start: i64, end: i64, step: i64) -> Result<Value, Error> {
        if start == end && step == 0 {
            return Ok(match self.eval(expr, start)? {
                Val::Scalar(v) => Value::Scalar(start, v),
                Val::String(s) => Value::String(start, s),
                Val::Vector(samples) => {
                    unique(&samples)?;
                    Value::Vector(start, samples)
                }
                Val::Matrix(windows) => Value::Matrix(
                    windows
                        .into_iter()
                        .map(|w| Series {
                            labels: w.labels,
                            points: w.points.into_owned(),
                        })
                        .collect(),
                ),
            });
        }
        let mut series: HashMap<Labels, Vec<(i64, f64)>> = HashMap::default();
        let mut ts = start;
        while ts <= end {
            self.check_time()?;
            match self.eval(expr, ts)? {
                Val::Scalar(v) => series.entry(Labels::default()).or_default().push((ts, v)),
                Val::Vector(samples) => {
                    for sample in samples {
                        let points = series.entry(sample.labels).or_default();
                        if points.last().is_some_and(|p| p.0 == ts) {
                            return Err(same_labelset());
                        }
                        points.push((ts, sample.value));
                    }
                }
                other => {
                    return Err(Error::BadData(format!(
                        "invalid expression type {:?} for range query, must be Scalar or instant Vector",
                        other.kind()
                    )))
                }
            }
            ts += step;
        }
        let mut out: Vec<Series> = series
            .into_iter()
            .map(|(labels, points)| Series { labels, points })
            .collect();
        crate::value::sort_by_labels(&mut out, |s| &s.labels);
        Ok(Value::Matrix(out))
    }

    pub(crate) fn eval<'d>(&'d self, expr: &Expr, ts: i64) -> Result<Val<'d>, Error> {
        Ok(match expr {
            Expr::NumberLiteral(n) => Val::Scalar(n.val),
            Expr::StringLiteral(s) => Val::String(s.val.clone()),
            Expr::Paren(p) => self.eval(&p.expr, ts)?,
            Expr::Unary(u) => match self.eval(&u.expr, ts)? {
                Val::Scalar(v) => Val::Scalar(-v),
                Val::Vector(samples) => Val::Vector(
                    samples
                        .into_iter()
                        .map(|s| Sample {
                            labels: s.labels.without_name(),
                            time: ts,
                            value: -s.value,
                        })
                        .collect(),
                ),
                other => return Err(Error::BadData(format!("unary minus of a {}", other.kind()))),
            },
            Expr::VectorSelector(vs) => Val::Vector(self.instant(vs, ts)),
            Expr::MatrixSelector(ms) => {
                Val::Matrix(self.windows(&ms.vs, duration_ms(&ms.range), ts))
            }
            Expr::Subquery(sq) => {
                let reference = self.reference(&sq.at, &sq.offset, ts);
                let step = sq
                    .step
                    .as_ref()
                    .map_or(DEFAULT_SUBQUERY_STEP_MS, duration_ms);
                Val::Matrix(self.subquery(&sq.expr, reference, duration_ms(&sq.range), step)?)
            }
            // A range query's rollups first: the same answers, series by
            // series (rollup.rs).
            Expr::Call(call) => match self.step_of(ts) {
                Some(k) if let Some(rolled) = rollup::rolled(self, call)? => {
                    Val::Vector(rolled.at(k, ts))
                }
                _ => functions::call(self, call, ts)?,
            },
            Expr::Aggregate(agg) => match self.step_of(ts) {
                Some(k) if let Some(grouped) = rollup::grouped(self, agg)? => {
                    Val::Vector(grouped.at(k, ts))
                }
                _ => aggregate::run(self, agg, ts)?,
            },
            Expr::Binary(b) => binary::run(self, b, ts)?,
            Expr::Extension(_) => {
                return Err(Error::BadData(
                    "extension expressions are not supported".into(),
                ))
            }
        })
    }

    /// A subquery ending at `reference`: `expr` at the multiples of `step`
    /// within `range` before it (both ends included).
    fn subquery<'d>(
        &'d self,
        expr: &Expr,
        reference: i64,
        range: i64,
        step: i64,
    ) -> Result<Vec<Window<'d>>, Error> {
        let first = reference - range;
        let mut ts = step * (first / step);
        if ts < first {
            ts += step;
        }
        let mut order: Vec<Labels> = Vec::new();
        let mut series: HashMap<Labels, Vec<(i64, f64)>> = HashMap::default();
        while ts <= reference {
            self.check_time()?;
            match self.eval(expr, ts)? {
                Val::Vector(samples) => {
                    for s in samples {
                        let points = series.entry(s.labels.clone()).or_insert_with(|| {
                            order.push(s.labels);
                            Vec::new()
                        });
                        points.push((ts, s.value));
                    }
                }
                Val::Scalar(v) => {
                    let labels = Labels::default();
                    let points = series.entry(labels.clone()).or_insert_with(|| {
                        order.push(labels);
                        Vec::new()
                    });
                    points.push((ts, v));
                }
                other => {
                    return Err(Error::BadData(format!("subquery of a {}", other.kind())));
                }
            }
            ts += step;
        }
        Ok(order
            .into_iter()
            .map(|labels| {
                let points = series.remove(&labels).unwrap_or_default();
                Window {
                    labels,
                    points: Cow::Owned(points),
                }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::{selectors, Thinned};

    #[test]
    fn only_range_functions_outside_subqueries_may_be_thinned() {
        let expr = crate::parse::parse_query(
            "rate(a[1h]) + max_over_time(rate(b[30m])[2h:5m]) + avg_over_time(c[1h]) + d",
        )
        .unwrap();
        let thin: Vec<(String, Option<(Thinned, i64)>)> = selectors(&expr, 0, 0, (0, 0), 300_000)
            .into_iter()
            .map(|s| (s.selector.name.clone().unwrap_or_default(), s.thin))
            .collect();
        assert_eq!(
            thin,
            [
                ("a".to_owned(), Some((Thinned::Last, 3_600_000))),
                ("b".to_owned(), None),
                ("c".to_owned(), None),
                ("d".to_owned(), None),
            ]
        );
    }
}
