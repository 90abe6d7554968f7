//! What a `SELECT` asks, before any SQL: its columns ([`Column`]: raw
//! fields and tags, aggregates and selectors, transformations), their
//! checked [`Shape`], and each measurement's [`Output`]s with names
//! resolved against its schema.

use std::collections::BTreeMap;

use chingest::layout::schema::FieldType;

use super::aggregate::Aggregate;
use super::math::{Formula, Kind, MathFn};
use super::transform::Transform;
use crate::answer::Value;
use crate::error::Error;
use crate::parse::{Expr, GroupBy, Select};
use crate::plan::Target;
use crate::show::field_type_name;

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
                if let Some(parsed) = Aggregate::parse(name, args) {
                    let func = parsed?;
                    return match func.field(args) {
                        Expr::Var { name, cast } => Ok(Column::Aggregate {
                            func,
                            name: name.clone(),
                            cast: cast.clone(),
                        }),
                        // Every field the function takes, expanded per measurement.
                        Expr::Wildcard if func.takes_wildcard() => Ok(Column::Aggregate {
                            func,
                            name: "*".to_owned(),
                            cast: None,
                        }),
                        _ => Err(format!("expected field argument in {name}()")),
                    };
                }
                if let Some(func) = Transform::parse(name, args) {
                    let func = func?;
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
                Err(format!("undefined function {name}()"))
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
}

/// A column's default name, as InfluxDB names it: the field's, the
/// function's, or those of an expression's fields and functions joined by
/// `_`.
pub(super) fn default_name(expr: &Expr) -> String {
    match expr {
        Expr::Var { name, .. } | Expr::Call { name, .. } => name.clone(),
        Expr::Binary { left, right, .. } => {
            let names = [default_name(left), default_name(right)];
            let names: Vec<&String> = names.iter().filter(|n| !n.is_empty()).collect();
            names.into_iter().cloned().collect::<Vec<_>>().join("_")
        }
        _ => String::new(),
    }
}

/// A column's formula: arithmetic and math functions over cells.
pub(super) fn formula(expr: &Expr) -> Result<Formula<Column>, String> {
    Ok(match expr {
        Expr::Integer(n) => Formula::Literal(Value::Integer(*n)),
        Expr::Number(n) => Formula::Literal(Value::Float(*n)),
        Expr::Binary { op, left, right } => {
            Formula::Binary(*op, Box::new(formula(left)?), Box::new(formula(right)?))
        }
        Expr::Call { name, args } if MathFn::named(name).is_some() => {
            let func = MathFn::named(name).expect("matched as a math function");
            if args.len() != func.arity() {
                return Err(format!(
                    "invalid number of arguments for {name}, expected {}, got {}",
                    func.arity(),
                    args.len()
                ));
            }
            Formula::Call(func, args.iter().map(formula).collect::<Result<_, _>>()?)
        }
        other => Formula::Cell(Column::from_expr(other)?),
    })
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
    pub(super) columns: Vec<(String, Formula<Column>)>,
    pub(super) aggregate: bool,
    /// `top(x, tag…, n)`'s (or `bottom`'s) tags: of each of their tag
    /// sets, only the greatest point competes.
    pub(super) by_tags: Vec<String>,
}

pub(super) fn shape(select: &Select) -> Result<Shape, String> {
    let mut columns = Vec::new();
    let mut by_tags = Vec::new();
    for field in &select.fields {
        // Time is always the first column; naming it adds nothing.
        if matches!(&field.expr, Expr::Var { name, .. } if name == "time") {
            continue;
        }
        let formula = formula(&field.expr)?;
        let cells = formula.cells();
        if cells.is_empty() {
            return Err("field must contain at least one variable".into());
        }
        let wildcard = |c: &&Column| match c {
            Column::Wildcard => true,
            Column::Aggregate { name, .. } => name == "*",
            _ => false,
        };
        if !matches!(formula, Formula::Cell(_)) && cells.iter().any(wildcard) {
            return Err("a wildcard in an expression is not supported".into());
        }
        let name = field
            .alias
            .clone()
            .unwrap_or_else(|| default_name(&field.expr));
        columns.push((name, formula));
        // `top(x, tag…, n)`'s tags are columns too, after it.
        if let Expr::Call { name, args } = &field.expr {
            if matches!(name.as_str(), "top" | "bottom") && args.len() > 2 {
                for tag in &args[1..args.len() - 1] {
                    if let Expr::Var { name, .. } = tag {
                        by_tags.push(name.clone());
                        let column = Column::Raw {
                            name: name.clone(),
                            cast: Some("tag".to_owned()),
                        };
                        columns.push((name.clone(), Formula::Cell(column)));
                    }
                }
            }
        }
    }
    if columns.is_empty() {
        return Err("at least 1 non-time field must be queried".into());
    }
    let cells: Vec<&Column> = columns.iter().flat_map(|(_, f)| f.cells()).collect();
    let aggregate = cells.iter().any(|c| c.aggregates());
    // Fields and tags may stand beside one selector: their values at the
    // point it picks.
    let selectors = cells
        .iter()
        .filter(|c| matches!(c, Column::Aggregate { func, .. } if func.picks_point()))
        .count();
    let aggregates = cells.iter().filter(|c| c.aggregates()).count();
    rows_alone(select, &cells)?;
    let beside_selector =
        |c: &Column| matches!(c, Column::Raw { .. }) && selectors == 1 && aggregates == 1;
    if aggregate && !cells.iter().all(|c| c.aggregates() || beside_selector(c)) {
        return Err("mixing aggregate and non-aggregate queries is not supported".into());
    }
    for column in &cells {
        if let Column::Transform { func, inner } = column {
            let name = func.name();
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
    // Transformations of raw points stand only beside each other.
    let transforms = cells
        .iter()
        .filter(|c| matches!(c, Column::Transform { .. }))
        .count();
    if !aggregate && transforms > 0 && transforms < cells.len() {
        return Err("mixing aggregate and non-aggregate queries is not supported".into());
    }
    Ok(Shape {
        columns,
        aggregate,
        by_tags,
    })
}

/// `distinct`, `top`, `bottom` and `sample` give rows of their own: no
/// other function may stand beside them (nor a field beside `distinct`),
/// and `top`'s `n` may not exceed the statement's `LIMIT`.
fn rows_alone(select: &Select, cells: &[&Column]) -> Result<(), String> {
    let Some(func) = cells.iter().find_map(|c| match c {
        Column::Aggregate { func, .. } if func.gives_rows() => Some(*func),
        _ => None,
    }) else {
        return Ok(());
    };
    let name = func.name();
    let others = cells.iter().filter(|c| c.aggregates()).count() > 1;
    if func == Aggregate::Distinct && cells.len() > 1 {
        return Err(format!(
            "aggregate function {name}() cannot be combined with other functions or fields"
        ));
    }
    if others || cells.iter().any(|c| matches!(c, Column::Transform { .. })) {
        return Err(format!(
            "selector function {name}() cannot be combined with other functions"
        ));
    }
    if let (Aggregate::Top(n) | Aggregate::Bottom(n), Some(limit)) = (func, select.limit) {
        if limit > 0 && (n as u64) > limit {
            return Err(format!(
                "limit ({n}) in {name} function can not be larger than the LIMIT ({limit}) in the select statement"
            ));
        }
    }
    Ok(())
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

/// One cell of a statement's rows, resolved against a measurement: what
/// SQL (or memory) computes, before the formulas of its columns.
pub(super) struct Output {
    pub(super) column: Column,
    pub(super) operand: Operand,
}

/// A column of the answer: its name, and its formula over the cells.
pub(super) type Projection = (String, Formula<usize>);

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
pub(super) fn dedupe_names(columns: &mut [Projection]) {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for (name, _) in columns {
        let count = seen.entry(name.clone()).or_insert(0);
        if *count > 0 {
            *name = format!("{name}_{count}");
        }
        *count += 1;
    }
}

/// The cells the statement over `target` computes (`wildcard`: what `*`
/// is) and the answer's columns over them, named as InfluxDB names them.
pub(super) fn outputs(
    shape: &Shape,
    target: &Target,
    wildcard: &[(String, Option<String>)],
) -> Result<(Vec<Output>, Vec<Projection>), Error> {
    let mut cells: Vec<Output> = Vec::new();
    let mut columns: Vec<Projection> = Vec::new();
    // A cell the statement reads twice is computed once.
    let cell = |output: Output, cells: &mut Vec<Output>| {
        let same = |c: &Output| c.column == output.column && c.operand == output.operand;
        cells.iter().position(same).unwrap_or_else(|| {
            cells.push(output);
            cells.len() - 1
        })
    };
    for (name, formula) in &shape.columns {
        match formula {
            Formula::Cell(Column::Wildcard) => {
                for (field, cast) in wildcard {
                    let output = Output {
                        column: Column::Raw {
                            name: field.clone(),
                            cast: cast.clone(),
                        },
                        operand: operand(target, field, cast.as_deref()),
                    };
                    columns.push((field.clone(), Formula::Cell(cell(output, &mut cells))));
                }
            }
            Formula::Cell(Column::Aggregate {
                func, name: all, ..
            }) if all == "*" => {
                // The fields the function takes: numbers only for most.
                let takes = |ty: &FieldType| {
                    let text = matches!(ty, FieldType::String | FieldType::Boolean);
                    !(ty.is_array() || func.is_numeric() && text)
                };
                let fields = target.schema.fields.iter().filter(|(_, ty)| takes(ty));
                for (field, ty) in fields {
                    let output = Output {
                        column: Column::Aggregate {
                            func: *func,
                            name: field.clone(),
                            cast: None,
                        },
                        operand: Operand::Field(field.clone(), *ty),
                    };
                    let at = cell(output, &mut cells);
                    columns.push((format!("{name}_{field}"), Formula::Cell(at)));
                }
            }
            _ => {
                let resolved = formula.map(&mut |column: &Column| -> Result<usize, Error> {
                    let (var, cast) = leaf(column);
                    let operand = operand(target, var, cast);
                    let numeric = match column {
                        Column::Transform { func, .. } => func.reads_values(),
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
                    Ok(cell(
                        Output {
                            column: column.clone(),
                            operand,
                        },
                        &mut cells,
                    ))
                })?;
                resolved.kind(&|at: &usize| kind(&cells[*at].column, &cells[*at].operand))?;
                columns.push((name.clone(), resolved));
            }
        }
    }
    dedupe_names(&mut columns);
    Ok((cells, columns))
}

/// What a cell's values are.
fn kind(column: &Column, operand: &Operand) -> Kind {
    let Operand::Field(_, ty) = operand else {
        return Kind::Unknown;
    };
    let stored = match ty {
        FieldType::Float => Kind::Float,
        FieldType::Integer => Kind::Integer,
        FieldType::UInteger => Kind::Unsigned,
        FieldType::String => Kind::String,
        FieldType::Boolean => Kind::Boolean,
        _ => Kind::Unknown,
    };
    match column {
        Column::Aggregate { func, .. } => match func {
            Aggregate::Count | Aggregate::CountDistinct => Kind::Integer,
            Aggregate::Integral(_) => Kind::Float,
            Aggregate::Mean | Aggregate::Median | Aggregate::Stddev => Kind::Float,
            _ => stored,
        },
        Column::Transform { func, .. } if func.gives_floats() => Kind::Float,
        Column::Transform { func, .. } if func.gives_integers() => Kind::Integer,
        _ => stored,
    }
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
            ("SELECT top(x, 3), mean(x) FROM m", "cannot be combined"),
            ("SELECT holt_winters(x, 3, 1) FROM m", "must use aggregate"),
            ("SELECT percentile(x) FROM m", "arguments"),
        ] {
            let err = shape_of(query).unwrap_err();
            assert!(err.contains(says), "{query}: {err}");
        }
        assert!(shape_of("SELECT mean(x) FROM m GROUP BY time(1m)").is_ok());
    }
}
