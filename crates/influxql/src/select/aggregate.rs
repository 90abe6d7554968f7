//! Aggregates and selectors: what each takes and gives, and their
//! arguments checked as InfluxDB checks them.

use crate::parse::Expr;

/// An aggregate or selector.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Aggregate {
    Count,
    /// `count(distinct(x))`.
    CountDistinct,
    Sum,
    Mean,
    Median,
    Mode,
    Spread,
    Stddev,
    /// The area under the points, per unit of time (ns).
    Integral(i64),
    First,
    Last,
    Min,
    Max,
    /// `percentile(x, p)`.
    Percentile(f64),
    /// Each value once, as rows.
    Distinct,
    /// The `n` greatest points, as rows (`top(x, tag…, n)`: the greatest
    /// of each tag set's).
    Top(usize),
    /// The `n` least points.
    Bottom(usize),
    /// `n` points at random.
    Sample(usize),
}

impl Aggregate {
    /// The aggregate `name(args…)`, its arguments checked; `None` when
    /// `name` is not one.
    pub(super) fn parse(name: &str, args: &[Expr]) -> Option<Result<Aggregate, String>> {
        let func = match name {
            "count" => Aggregate::Count,
            "sum" => Aggregate::Sum,
            "mean" => Aggregate::Mean,
            "median" => Aggregate::Median,
            "mode" => Aggregate::Mode,
            "spread" => Aggregate::Spread,
            "stddev" => Aggregate::Stddev,
            "integral" => Aggregate::Integral(1_000_000_000),
            "first" => Aggregate::First,
            "last" => Aggregate::Last,
            "min" => Aggregate::Min,
            "max" => Aggregate::Max,
            "percentile" => Aggregate::Percentile(0.0),
            "distinct" => Aggregate::Distinct,
            "top" => Aggregate::Top(0),
            "bottom" => Aggregate::Bottom(0),
            "sample" => Aggregate::Sample(0),
            _ => return None,
        };
        Some(func.with_arguments(name, args))
    }

    fn with_arguments(self, name: &str, args: &[Expr]) -> Result<Aggregate, String> {
        let count = args.len();
        let exactly = |n: usize| match count == n {
            true => Ok(()),
            false => Err(format!(
                "invalid number of arguments for {name}, expected {n}, got {count}"
            )),
        };
        let n = |arg: &Expr| match arg {
            Expr::Integer(n) if *n >= 1 => Ok(usize::try_from(*n).unwrap_or(usize::MAX)),
            Expr::Integer(n) => Err(format!("limit ({n}) in {name} function must be at least 1")),
            other => Err(format!(
                "expected integer as last argument in {name}(), found {other:?}"
            )),
        };
        Ok(match self {
            Aggregate::Percentile(_) => {
                exactly(2)?;
                Aggregate::Percentile(match args[1] {
                    Expr::Integer(n) => n as f64,
                    Expr::Number(n) => n,
                    _ => return Err(format!("expected float argument in {name}()")),
                })
            }
            Aggregate::Count if matches!(args, [Expr::Call { name, .. }] if name == "distinct") => {
                let Expr::Call { args: inner, .. } = &args[0] else {
                    unreachable!("matched as a call")
                };
                match inner.as_slice() {
                    [Expr::Var { .. }] => Aggregate::CountDistinct,
                    _ => return Err("distinct function requires at least one argument".into()),
                }
            }
            Aggregate::Integral(_) => {
                if count == 0 || count > 2 {
                    return Err(format!(
                        "invalid number of arguments for {name}, expected at least 1 but no more than 2, got {count}"
                    ));
                }
                match args.get(1) {
                    None => self,
                    Some(Expr::Duration(ns)) if *ns > 0 => Aggregate::Integral(*ns),
                    Some(other) => {
                        return Err(format!(
                            "second argument must be a positive duration, got {other:?}"
                        ))
                    }
                }
            }
            Aggregate::Top(_) | Aggregate::Bottom(_) => {
                if count < 2 {
                    return Err(format!(
                        "invalid number of arguments for {name}, expected at least 2, got {count}"
                    ));
                }
                if let Some(tag) = args[1..count - 1]
                    .iter()
                    .find(|a| !matches!(a, Expr::Var { .. }))
                {
                    return Err(format!(
                        "only fields or tags are allowed in {name}(), found {tag:?}"
                    ));
                }
                let n = n(&args[count - 1])?;
                match self {
                    Aggregate::Top(_) => Aggregate::Top(n),
                    _ => Aggregate::Bottom(n),
                }
            }
            Aggregate::Sample(_) => {
                exactly(2)?;
                Aggregate::Sample(n(&args[1])?)
            }
            _ => {
                exactly(1)?;
                self
            }
        })
    }

    /// The argument it aggregates (`count(distinct(x))`: `x`).
    pub(super) fn field(self, args: &[Expr]) -> &Expr {
        match (self, args.first()) {
            (Aggregate::CountDistinct, Some(Expr::Call { args, .. })) => &args[0],
            (_, Some(first)) => first,
            (_, None) => &Expr::Wildcard,
        }
    }

    /// Whether it may take `*` (every field it takes).
    pub(super) fn takes_wildcard(self) -> bool {
        !matches!(
            self,
            Aggregate::Distinct
                | Aggregate::CountDistinct
                | Aggregate::Top(_)
                | Aggregate::Bottom(_)
        )
    }

    /// `count` and `count(distinct)`: 0, not null, where there is no point.
    pub(super) fn counts(self) -> bool {
        matches!(self, Aggregate::Count | Aggregate::CountDistinct)
    }

    /// Selectors pick a point, whose time a lone selector reports.
    pub(super) fn is_selector(self) -> bool {
        matches!(
            self,
            Aggregate::First
                | Aggregate::Last
                | Aggregate::Min
                | Aggregate::Max
                | Aggregate::Percentile(_)
        )
    }

    /// Whether it takes numbers only.
    pub(super) fn is_numeric(self) -> bool {
        !matches!(
            self,
            Aggregate::Count
                | Aggregate::CountDistinct
                | Aggregate::First
                | Aggregate::Last
                | Aggregate::Mode
                | Aggregate::Distinct
                | Aggregate::Sample(_)
        )
    }

    /// `first`, `last`, `min`, `max`, `top`, `bottom` and `sample`: the
    /// selectors whose points other columns can be read at.
    pub(super) fn picks_point(self) -> bool {
        matches!(
            self,
            Aggregate::First
                | Aggregate::Last
                | Aggregate::Min
                | Aggregate::Max
                | Aggregate::Top(_)
                | Aggregate::Bottom(_)
                | Aggregate::Sample(_)
        )
    }

    /// `distinct`, `top`, `bottom` and `sample`: rows of their own (so
    /// alone in a statement, but for fields read at their points).
    pub(super) fn gives_rows(self) -> bool {
        matches!(
            self,
            Aggregate::Distinct | Aggregate::Top(_) | Aggregate::Bottom(_) | Aggregate::Sample(_)
        )
    }

    /// Whether the engine computes it as InfluxDB does (else it is
    /// computed here, over the points).
    pub(super) fn in_engine(self) -> bool {
        !matches!(
            self,
            Aggregate::Mode | Aggregate::Integral(_) | Aggregate::Distinct
        ) && !self.gives_rows()
    }

    /// The function's name.
    pub(super) fn name(self) -> &'static str {
        match self {
            Aggregate::Count | Aggregate::CountDistinct => "count",
            Aggregate::Sum => "sum",
            Aggregate::Mean => "mean",
            Aggregate::Median => "median",
            Aggregate::Mode => "mode",
            Aggregate::Spread => "spread",
            Aggregate::Stddev => "stddev",
            Aggregate::Integral(_) => "integral",
            Aggregate::First => "first",
            Aggregate::Last => "last",
            Aggregate::Min => "min",
            Aggregate::Max => "max",
            Aggregate::Percentile(_) => "percentile",
            Aggregate::Distinct => "distinct",
            Aggregate::Top(_) => "top",
            Aggregate::Bottom(_) => "bottom",
            Aggregate::Sample(_) => "sample",
        }
    }
}
