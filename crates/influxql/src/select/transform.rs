//! Transformations: functions of consecutive points (raw, or the
//! intervals of an aggregate), each output at the later point's time —
//! `derivative`, `non_negative_derivative`, `difference`,
//! `non_negative_difference`, `cumulative_sum`, `moving_average` and
//! `elapsed`, as InfluxDB 1.x computes them — and the technical-analysis
//! and predictor functions ([`Technical`]).

use super::technical::Technical;
use crate::answer::Value;
use crate::parse::Expr;

/// What a transformation computes from consecutive points.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Change {
    /// Per unit of time (ns; `None`: the default unit).
    Derivative(Option<i64>),
    Difference,
    /// The running sum, from the first point on.
    CumulativeSum,
    /// The mean of the last `n` points, from the `n`th on.
    MovingAverage(usize),
    /// The time since the previous point, in whole units (ns).
    Elapsed(i64),
    /// A technical-analysis or predictor function.
    Technical(Technical),
}

/// One transformation, its arguments checked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Transform {
    change: Change,
    non_negative: bool,
}

impl Transform {
    /// The transformation `name(args…)`, its arguments after the first
    /// (the field or aggregate it transforms) checked; `None` when `name`
    /// is not one.
    pub(super) fn parse(name: &str, args: &[Expr]) -> Option<Result<Transform, String>> {
        if let Some(technical) = Technical::named(name, args) {
            return Some(technical.map(|technical| Transform {
                change: Change::Technical(technical),
                non_negative: false,
            }));
        }
        let (change, non_negative) = match name {
            "derivative" => (Change::Derivative(None), false),
            "non_negative_derivative" => (Change::Derivative(None), true),
            "difference" => (Change::Difference, false),
            "non_negative_difference" => (Change::Difference, true),
            "cumulative_sum" => (Change::CumulativeSum, false),
            "moving_average" => (Change::MovingAverage(0), false),
            "elapsed" => (Change::Elapsed(1), false),
            _ => return None,
        };
        let transform = Transform {
            change,
            non_negative,
        };
        Some(transform.with_arguments(name, args))
    }

    fn with_arguments(mut self, name: &str, args: &[Expr]) -> Result<Transform, String> {
        let count = args.len();
        match self.change {
            Change::MovingAverage(_) => {
                if count != 2 {
                    return Err(format!(
                        "invalid number of arguments for {name}, expected 2, got {count}"
                    ));
                }
                let Expr::Integer(n) = args[1] else {
                    return Err(format!(
                        "second argument for {name} must be an integer, got {:?}",
                        args[1]
                    ));
                };
                if n <= 1 {
                    return Err(format!("{name} window must be greater than 1, got {n}"));
                }
                self.change = Change::MovingAverage(usize::try_from(n).unwrap_or(usize::MAX));
            }
            Change::Derivative(_) | Change::Elapsed(_) => {
                if count == 0 || count > 2 {
                    return Err(format!(
                        "invalid number of arguments for {name}, expected at least 1 but no more than 2, got {count}"
                    ));
                }
                if let Some(unit) = args.get(1) {
                    let Expr::Duration(ns) = unit else {
                        return Err(format!(
                            "second argument to {name} must be a duration, got {unit:?}"
                        ));
                    };
                    if *ns <= 0 {
                        return Err(format!("duration argument must be positive, got {ns}ns"));
                    }
                    self.change = match self.change {
                        Change::Elapsed(_) => Change::Elapsed(*ns),
                        _ => Change::Derivative(Some(*ns)),
                    };
                }
            }
            _ if count != 1 => {
                return Err(format!(
                    "invalid number of arguments for {name}, expected 1, got {count}"
                ))
            }
            _ => {}
        }
        Ok(self)
    }

    /// The function's name.
    pub(super) fn name(self) -> &'static str {
        match (self.change, self.non_negative) {
            (Change::Derivative(_), false) => "derivative",
            (Change::Derivative(_), true) => "non_negative_derivative",
            (Change::Difference, false) => "difference",
            (Change::Difference, true) => "non_negative_difference",
            (Change::CumulativeSum, _) => "cumulative_sum",
            (Change::MovingAverage(_), _) => "moving_average",
            (Change::Elapsed(_), _) => "elapsed",
            (Change::Technical(technical), _) => technical.name(),
        }
    }

    /// Whether, over `GROUP BY time`, it reads the interval before the
    /// range too (all but `cumulative_sum` and `holt_winters`, as InfluxDB
    /// does).
    pub(super) fn reads_previous_interval(self) -> bool {
        match self.change {
            Change::CumulativeSum => false,
            Change::Technical(technical) => technical.reads_previous_interval(),
            _ => true,
        }
    }

    /// Whether it reads values (`elapsed` reads only times, of points of
    /// any type).
    pub(super) fn reads_values(self) -> bool {
        !matches!(self.change, Change::Elapsed(_))
    }

    /// Whether its values are floats whatever it reads (else integers stay
    /// integers).
    pub(super) fn gives_floats(self) -> bool {
        matches!(
            self.change,
            Change::Derivative(_) | Change::MovingAverage(_) | Change::Technical(_)
        )
    }

    /// Whether its values are integers whatever it reads.
    pub(super) fn gives_integers(self) -> bool {
        matches!(self.change, Change::Elapsed(_))
    }

    /// Applies to one column's points (time, value, whether an integer),
    /// nulls left out, in the statement's order: descending, each value
    /// is taken from the later one, over the time between them.
    pub(super) fn apply(self, points: &[(i64, f64, bool)], default_unit: i64) -> Vec<(i64, Value)> {
        let number = |v: f64, integer: bool| match integer {
            true => Value::Integer(v as i64),
            false => Value::Float(v),
        };
        match self.change {
            Change::CumulativeSum => {
                let mut sum = 0.0;
                return points
                    .iter()
                    .map(|&(t, v, integer)| {
                        sum += v;
                        (t, number(sum, integer))
                    })
                    .collect();
            }
            Change::MovingAverage(n) => {
                return points
                    .windows(n)
                    .map(|window| {
                        let sum: f64 = window.iter().map(|&(_, v, _)| v).sum();
                        (window[n - 1].0, Value::Float(sum / n as f64))
                    })
                    .collect();
            }
            // NaN is InfluxDB's null (a 0/0); the point stays.
            Change::Technical(technical) => {
                let points: Vec<(i64, f64)> = points.iter().map(|&(t, v, _)| (t, v)).collect();
                return technical
                    .apply(&points, Some(default_unit))
                    .into_iter()
                    .map(|(t, v)| match v.is_nan() {
                        true => (t, Value::Null),
                        false => (t, Value::Float(v)),
                    })
                    .collect();
            }
            // Every point counts, also one at the previous point's time.
            Change::Elapsed(unit) => {
                return points
                    .windows(2)
                    .map(|pair| {
                        (
                            pair[1].0,
                            Value::Integer((pair[1].0 - pair[0].0).abs() / unit),
                        )
                    })
                    .collect();
            }
            _ => {}
        }
        let mut out = Vec::new();
        for pair in points.windows(2) {
            let ((t0, v0, _), (t1, v1, integer)) = (pair[0], pair[1]);
            let value = match self.change {
                Change::Derivative(unit) => {
                    let elapsed = (t1 - t0).abs() as f64 / unit.unwrap_or(default_unit) as f64;
                    if elapsed == 0.0 {
                        continue;
                    }
                    Value::Float((v1 - v0) / elapsed)
                }
                _ => number(v1 - v0, integer),
            };
            if self.non_negative && value.as_f64().is_some_and(|v| v < 0.0) {
                continue;
            }
            out.push((t1, value));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str, args: &[Expr]) -> Transform {
        let mut all = vec![Expr::Var {
            name: "x".into(),
            cast: None,
        }];
        all.extend_from_slice(args);
        Transform::parse(name, &all).unwrap().unwrap()
    }

    #[test]
    fn derivatives_and_differences() {
        let points = [
            (0, 1.0, false),
            (1_000_000_000, 3.0, false),
            (3_000_000_000, 2.0, false),
        ];
        let derivative = named("derivative", &[]);
        assert_eq!(
            derivative.apply(&points, 1_000_000_000),
            vec![
                (1_000_000_000, Value::Float(2.0)),
                (3_000_000_000, Value::Float(-0.5))
            ]
        );
        let non_negative = named("non_negative_derivative", &[]);
        assert_eq!(non_negative.apply(&points, 1_000_000_000).len(), 1);
        let difference = named("difference", &[]);
        assert_eq!(
            difference.apply(&[(0, 5.0, true), (1, 7.0, true)], 1),
            vec![(1, Value::Integer(2))]
        );
    }

    #[test]
    fn moving_averages_and_elapsed_times() {
        let points = [
            (0, 1.0, true),
            (10, 3.0, true),
            (10, 8.0, true),
            (40, 4.0, true),
        ];
        let average = named("moving_average", &[Expr::Integer(3)]);
        assert_eq!(
            average.apply(&points, 1),
            vec![(10, Value::Float(4.0)), (40, Value::Float(5.0))]
        );
        let elapsed = named("elapsed", &[Expr::Duration(10)]);
        assert_eq!(
            elapsed.apply(&points, 1),
            vec![
                (10, Value::Integer(1)),
                (10, Value::Integer(0)),
                (40, Value::Integer(3))
            ]
        );
        let refused = |name: &str, args: &[Expr]| {
            let mut all = vec![Expr::Wildcard];
            all.extend_from_slice(args);
            Transform::parse(name, &all).unwrap().unwrap_err()
        };
        assert!(refused("moving_average", &[Expr::Integer(1)]).contains("greater than 1"));
        assert!(refused("moving_average", &[]).contains("expected 2"));
        assert!(refused("elapsed", &[Expr::Duration(0)]).contains("positive"));
        assert!(refused("cumulative_sum", &[Expr::Integer(1)]).contains("expected 1"));
    }
}
