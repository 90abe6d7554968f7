//! What a `SELECT` asks, before any SQL: its columns ([`Column`]: raw
//! fields and tags, aggregates and selectors, transformations), their
//! checked [`Shape`], and each measurement's [`Output`]s with names
//! resolved against its schema.

use std::collections::BTreeMap;

use chingest::layout::schema::FieldType;

use crate::answer::Value;
use crate::error::Error;
use crate::parse::{Expr, GroupBy, Select};
use crate::plan::Target;
use crate::show::field_type_name;

/// An aggregate or selector.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Aggregate {
    Count,
    Sum,
    Mean,
    Median,
    Spread,
    Stddev,
    First,
    Last,
    Min,
    Max,
    /// `percentile(x, p)`.
    Percentile(f64),
}

impl Aggregate {
    pub(super) fn named(name: &str) -> Option<Aggregate> {
        Some(match name {
            "count" => Aggregate::Count,
            "sum" => Aggregate::Sum,
            "mean" => Aggregate::Mean,
            "median" => Aggregate::Median,
            "spread" => Aggregate::Spread,
            "stddev" => Aggregate::Stddev,
            "first" => Aggregate::First,
            "last" => Aggregate::Last,
            "min" => Aggregate::Min,
            "max" => Aggregate::Max,
            "percentile" => Aggregate::Percentile(0.0),
            _ => return None,
        })
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
        !matches!(self, Aggregate::Count | Aggregate::First | Aggregate::Last)
    }

    /// `first`, `last`, `min` and `max`: the selectors whose point other
    /// columns can be read at.
    pub(super) fn picks_point(self) -> bool {
        matches!(
            self,
            Aggregate::First | Aggregate::Last | Aggregate::Min | Aggregate::Max
        )
    }
}

/// What a transformation computes from consecutive points.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Change {
    /// Per unit of time (ns; `None`: the default unit).
    Derivative(Option<i64>),
    Difference,
    /// The running sum, from the first point on.
    CumulativeSum,
}

/// `derivative`, `non_negative_derivative`, `difference`,
/// `non_negative_difference`, `cumulative_sum`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Transform {
    change: Change,
    non_negative: bool,
}

impl Transform {
    pub(super) fn named(name: &str) -> Option<Transform> {
        let (change, non_negative) = match name {
            "derivative" => (Change::Derivative(None), false),
            "non_negative_derivative" => (Change::Derivative(None), true),
            "difference" => (Change::Difference, false),
            "non_negative_difference" => (Change::Difference, true),
            "cumulative_sum" => (Change::CumulativeSum, false),
            _ => return None,
        };
        Some(Transform {
            change,
            non_negative,
        })
    }

    /// The function's name.
    pub(super) fn name(self) -> &'static str {
        match (self.change, self.non_negative) {
            (Change::Derivative(_), false) => "derivative",
            (Change::Derivative(_), true) => "non_negative_derivative",
            (Change::Difference, false) => "difference",
            (Change::Difference, true) => "non_negative_difference",
            (Change::CumulativeSum, _) => "cumulative_sum",
        }
    }

    /// Applies to one column's points (time, value, whether an integer),
    /// nulls left out, in the statement's order: descending, each value
    /// is taken from the later one, over the time between them.
    pub(super) fn apply(self, points: &[(i64, f64, bool)], default_unit: i64) -> Vec<(i64, Value)> {
        let number = |v: f64, integer: bool| match integer {
            true => Value::Integer(v as i64),
            false => Value::Float(v),
        };
        if self.change == Change::CumulativeSum {
            let mut sum = 0.0;
            return points
                .iter()
                .map(|&(t, v, integer)| {
                    sum += v;
                    (t, number(sum, integer))
                })
                .collect();
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

/// What a column computes, before names are resolved against a
/// measurement.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Column {
    /// A field or tag as stored.
    Raw {
        name: String,
        cast: Option<String>,
    },
    /// Every field and tag.
    Wildcard,
    Aggregate {
        func: Aggregate,
        name: String,
        cast: Option<String>,
    },
    Transform {
        func: Transform,
        inner: Box<Column>,
    },
}

impl Column {
    pub(super) fn from_expr(expr: &Expr) -> Result<Column, String> {
        match expr {
            Expr::Var { name, cast } => Ok(Column::Raw {
                name: name.clone(),
                cast: cast.clone(),
            }),
            Expr::Wildcard => Ok(Column::Wildcard),
            Expr::Call { name, args } => {
                if let Some(mut func) = Aggregate::named(name) {
                    let expected = if matches!(func, Aggregate::Percentile(_)) {
                        2
                    } else {
                        1
                    };
                    if args.len() != expected {
                        return Err(format!(
                            "invalid number of arguments for {name}, expected {expected}, got {}",
                            args.len()
                        ));
                    }
                    if let Aggregate::Percentile(p) = &mut func {
                        *p = match args[1] {
                            Expr::Integer(n) => n as f64,
                            Expr::Number(n) => n,
                            _ => return Err(format!("expected float argument in {name}()")),
                        };
                    }
                    return match &args[0] {
                        Expr::Var { name, cast } => Ok(Column::Aggregate {
                            func,
                            name: name.clone(),
                            cast: cast.clone(),
                        }),
                        // Every field the function takes, expanded per measurement.
                        Expr::Wildcard => Ok(Column::Aggregate {
                            func,
                            name: "*".to_owned(),
                            cast: None,
                        }),
                        _ => Err(format!("expected field argument in {name}()")),
                    };
                }
                if let Some(mut func) = Transform::named(name) {
                    let takes_unit = matches!(func.change, Change::Derivative(_));
                    let most = if takes_unit { 2 } else { 1 };
                    if args.is_empty() || args.len() > most {
                        return Err(format!(
                            "invalid number of arguments for {name}, expected at least 1 but no more than {most}, got {}",
                            args.len()
                        ));
                    }
                    if let Some(unit) = args.get(1) {
                        match unit {
                            Expr::Duration(ns) if *ns > 0 => {
                                func.change = Change::Derivative(Some(*ns))
                            }
                            _ => {
                                return Err(format!(
                                    "second argument to {name} must be a duration, got {unit:?}"
                                ))
                            }
                        }
                    }
                    let inner = Column::from_expr(&args[0])?;
                    return match inner {
                        Column::Raw { .. } | Column::Aggregate { .. } => Ok(Column::Transform {
                            func,
                            inner: Box::new(inner),
                        }),
                        _ => Err(format!("{name}() takes a field or an aggregate of one")),
                    };
                }
                // InfluxDB's other functions.
                const NOT_TRANSLATED: [&str; 13] = [
                    "top",
                    "bottom",
                    "distinct",
                    "integral",
                    "mode",
                    "sample",
                    "elapsed",
                    "moving_average",
                    "holt_winters",
                    "holt_winters_with_fit",
                    "exponential_moving_average",
                    "chande_momentum_oscillator",
                    "kaufmans_efficiency_ratio",
                ];
                match NOT_TRANSLATED.contains(&name.as_str()) {
                    true => Err(format!("{name}() is not supported")),
                    false => Err(format!("undefined function {name}()")),
                }
            }
            other => Err(format!(
                "{other:?} is not supported as a column; select fields or functions"
            )),
        }
    }

    pub(super) fn aggregates(&self) -> bool {
        match self {
            Column::Aggregate { .. } => true,
            Column::Transform { inner, .. } => inner.aggregates(),
            _ => false,
        }
    }

    /// The column's default name: the field's, or the function's.
    pub(super) fn default_name(&self, expr: &Expr) -> String {
        match (self, expr) {
            (Column::Raw { name, .. }, _) => name.clone(),
            (_, Expr::Call { name, .. }) => name.clone(),
            _ => String::new(),
        }
    }
}

/// A field, a tag, or neither, in one measurement.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Operand {
    Field(String, FieldType),
    Tag(String),
    Missing,
}

pub(super) fn operand(target: &Target, name: &str, cast: Option<&str>) -> Operand {
    let field = target
        .schema
        .fields
        .iter()
        .find(|(f, ty)| f == name && !ty.is_array());
    let tag = target.schema.tag_keys.iter().any(|k| k == name);
    match (cast, field) {
        (Some("tag"), _) if tag => Operand::Tag(name.to_owned()),
        (Some("tag"), _) => Operand::Missing,
        (_, Some((f, ty))) => Operand::Field(f.clone(), *ty),
        (None, None) if tag => Operand::Tag(name.to_owned()),
        _ => Operand::Missing,
    }
}

/// The checked shape of a statement, the same for every measurement.
pub(super) struct Shape {
    pub(super) columns: Vec<(String, Column)>,
    pub(super) aggregate: bool,
}

pub(super) fn shape(select: &Select) -> Result<Shape, String> {
    let mut columns = Vec::new();
    for field in &select.fields {
        // Time is always the first column; naming it adds nothing.
        if matches!(&field.expr, Expr::Var { name, .. } if name == "time") {
            continue;
        }
        let column = Column::from_expr(&field.expr)?;
        let name = field
            .alias
            .clone()
            .unwrap_or_else(|| column.default_name(&field.expr));
        columns.push((name, column));
    }
    if columns.is_empty() {
        return Err("at least 1 non-time field must be queried".into());
    }
    let aggregate = columns.iter().any(|(_, c)| c.aggregates());
    // Fields and tags may stand beside one selector: their values at the
    // point it picks.
    let selectors = columns
        .iter()
        .filter(|(_, c)| matches!(c, Column::Aggregate { func, .. } if func.picks_point()))
        .count();
    let aggregates = columns.iter().filter(|(_, c)| c.aggregates()).count();
    let beside_selector =
        |c: &Column| matches!(c, Column::Raw { .. }) && selectors == 1 && aggregates == 1;
    if aggregate
        && !columns
            .iter()
            .all(|(_, c)| c.aggregates() || beside_selector(c))
    {
        return Err("mixing aggregate and non-aggregate queries is not supported".into());
    }
    for (_, column) in &columns {
        if let Column::Transform { inner, .. } = column {
            let name = match column {
                Column::Transform { func, .. } => func.name(),
                _ => unreachable!("matched as a transformation"),
            };
            match (inner.aggregates(), select.interval.is_some()) {
                (true, false) => {
                    return Err(format!("{name} aggregate requires a GROUP BY interval"))
                }
                (false, true) => {
                    return Err(format!(
                        "aggregate function required inside the call to {name}"
                    ))
                }
                _ => {}
            }
        }
    }
    if !aggregate && select.interval.is_some() {
        return Err("GROUP BY requires at least one aggregate function".into());
    }
    let transforms = columns
        .iter()
        .filter(|(_, c)| matches!(c, Column::Transform { .. }))
        .count();
    if transforms > 0 && transforms < columns.len() {
        return Err("mixing derivative or difference with other columns is not supported".into());
    }
    Ok(Shape { columns, aggregate })
}

/// The tag keys a statement groups `target`'s series by, sorted.
pub(super) fn group_keys(select: &Select, target: &Target) -> Vec<String> {
    match &select.group_by {
        GroupBy::Nothing => Vec::new(),
        GroupBy::All => target.schema.tag_keys.clone(),
        GroupBy::Tags(keys) => {
            let mut keys = keys.clone();
            keys.sort();
            keys.dedup();
            keys
        }
    }
}

/// One resolved output column.
pub(super) struct Output {
    pub(super) name: String,
    pub(super) column: Column,
    pub(super) operand: Operand,
}

/// The field or tag a column reads.
pub(super) fn leaf(column: &Column) -> (&str, Option<&str>) {
    match column {
        Column::Raw { name, cast } | Column::Aggregate { name, cast, .. } => {
            (name, cast.as_deref())
        }
        Column::Transform { inner, .. } => leaf(inner),
        Column::Wildcard => ("*", None),
    }
}

pub(super) fn aggregate_of(column: &Column) -> Option<Aggregate> {
    match column {
        Column::Aggregate { func, .. } => Some(*func),
        Column::Transform { inner, .. } => aggregate_of(inner),
        _ => None,
    }
}

/// `mean, mean` → `mean, mean_1`, as InfluxDB names repeated columns.
pub(super) fn dedupe_names(outputs: &mut [Output]) {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for output in outputs {
        let count = seen.entry(output.name.clone()).or_insert(0);
        if *count > 0 {
            output.name = format!("{}_{count}", output.name);
        }
        *count += 1;
    }
}

/// Each output column of the statement over `target` (`wildcard`: what
/// `*` is), named as InfluxDB names them.
pub(super) fn outputs(
    shape: &Shape,
    target: &Target,
    wildcard: &[(String, Option<String>)],
) -> Result<Vec<Output>, Error> {
    let mut outputs = Vec::new();
    for (name, column) in &shape.columns {
        match column {
            Column::Wildcard => {
                outputs.extend(wildcard.iter().map(|(name, cast)| Output {
                    column: Column::Raw {
                        name: name.clone(),
                        cast: cast.clone(),
                    },
                    name: name.clone(),
                    operand: operand(target, name, cast.as_deref()),
                }));
            }
            Column::Aggregate {
                func, name: all, ..
            } if all == "*" => {
                // The fields the function takes: numbers only for most.
                let takes = |ty: &FieldType| {
                    let text = matches!(ty, FieldType::String | FieldType::Boolean);
                    !(ty.is_array() || func.is_numeric() && text)
                };
                let fields = target.schema.fields.iter().filter(|(_, ty)| takes(ty));
                outputs.extend(fields.map(|(field, ty)| Output {
                    name: format!("{name}_{field}"),
                    column: Column::Aggregate {
                        func: *func,
                        name: field.clone(),
                        cast: None,
                    },
                    operand: Operand::Field(field.clone(), *ty),
                }));
            }
            _ => {
                let (var, cast) = leaf(column);
                let operand = operand(target, var, cast);
                let numeric = match column {
                    Column::Transform { .. } => true,
                    _ => aggregate_of(column).is_some_and(Aggregate::is_numeric),
                };
                if let Operand::Field(f, ty) = &operand {
                    if numeric && matches!(ty, FieldType::String | FieldType::Boolean) {
                        return Err(format!(
                            "{name}() of {f:?}, a {} field, is not supported",
                            field_type_name(*ty).unwrap_or("non-numeric")
                        )
                        .into());
                    }
                }
                outputs.push(Output {
                    name: name.clone(),
                    column: column.clone(),
                    operand,
                });
            }
        }
    }
    dedupe_names(&mut outputs);
    Ok(outputs)
}

/// What `*` is: every field and tag of every measurement read, sorted,
/// less the tags grouped by.
pub(super) fn wildcard(select: &Select, targets: &[Target]) -> Vec<(String, Option<String>)> {
    // A key that is both a field and a tag shows twice: `k` and `k_1`
    // (`k::tag`).
    let mut wildcard: Vec<(String, Option<String>)> = Vec::new();
    for target in targets {
        let grouped = group_keys(select, target);
        let fields = target.schema.fields.iter().filter(|(_, ty)| !ty.is_array());
        wildcard.extend(fields.map(|(f, _)| (f.clone(), Some("field".to_owned()))));
        let tags = target
            .schema
            .tag_keys
            .iter()
            .filter(|k| !grouped.contains(k));
        wildcard.extend(tags.map(|k| (k.clone(), Some("tag".to_owned()))));
    }
    wildcard.sort();
    wildcard.dedup();
    wildcard
}

/// Whether a column is a transformation (then they all are).
pub(super) fn transforms(outputs: &[Output]) -> bool {
    outputs
        .iter()
        .any(|o| matches!(o.column, Column::Transform { .. }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derivatives_and_differences() {
        let points = [
            (0, 1.0, false),
            (1_000_000_000, 3.0, false),
            (3_000_000_000, 2.0, false),
        ];
        let derivative = Transform::named("derivative").unwrap();
        assert_eq!(
            derivative.apply(&points, 1_000_000_000),
            vec![
                (1_000_000_000, Value::Float(2.0)),
                (3_000_000_000, Value::Float(-0.5))
            ]
        );
        let non_negative = Transform::named("non_negative_derivative").unwrap();
        assert_eq!(non_negative.apply(&points, 1_000_000_000).len(), 1);
        let difference = Transform::named("difference").unwrap();
        assert_eq!(
            difference.apply(&[(0, 5.0, true), (1, 7.0, true)], 1),
            vec![(1, Value::Integer(2))]
        );
    }

    #[test]
    fn statements_that_cannot_be_answered_say_why() {
        let shape_of = |q: &str| match crate::parse::parse_query(q, 0).unwrap().remove(0) {
            Ok(crate::parse::Statement::Select(s)) => shape(&s).map(|_| ()),
            other => panic!("{other:?}"),
        };
        for (query, says) in [
            ("SELECT mean(x), y FROM m", "mixing"),
            ("SELECT x FROM m GROUP BY time(1m)", "aggregate"),
            ("SELECT derivative(mean(x)) FROM m", "GROUP BY interval"),
            ("SELECT nope(x) FROM m", "undefined function"),
            ("SELECT top(x, 3) FROM m", "top() is not supported"),
            ("SELECT percentile(x) FROM m", "arguments"),
        ] {
            let err = shape_of(query).unwrap_err();
            assert!(err.contains(says), "{query}: {err}");
        }
        assert!(shape_of("SELECT mean(x) FROM m GROUP BY time(1m)").is_ok());
    }
}
