//! `SELECT`: each measurement's statement in SQL — raw points, or the
//! aggregates per `GROUP BY time` interval and tag set — and what the
//! engine's answer still needs to read as InfluxDB's: every interval of the
//! range with `fill()`, transformations (`derivative`, `difference`),
//! series order, `LIMIT`/`OFFSET` per series and `SLIMIT`/`SOFFSET`.
//! Aggregates of recent points come from memory when it holds them
//! ([`recent`]).

mod recent;

use std::collections::BTreeMap;

use chingest::names::{quote_ident, quote_literal};
use chingest::schema::FieldType;
use chingest::TagPredicate;

use crate::answer::{Answer, Series, Value};
use crate::condition::{FieldCondition, FieldLiteral};
use crate::error::Error;
use crate::parse::{Expr, Fill, GroupBy, Interval, Select};
use crate::plan::{fact_source, page, rows, text, Context, TagMatcher, Target};
use crate::show::field_type_name;

/// Most intervals × series a `GROUP BY time` answer may have: a bound on
/// what a one-line query (`GROUP BY time(1ns)` over a year) can make the
/// server build.
const MAX_INTERVALS: i64 = 1_000_000;

/// An aggregate or selector.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Aggregate {
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
    fn named(name: &str) -> Option<Aggregate> {
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
    fn is_selector(self) -> bool {
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
    fn is_numeric(self) -> bool {
        !matches!(self, Aggregate::Count | Aggregate::First | Aggregate::Last)
    }

    /// `first`, `last`, `min` and `max`: the selectors whose point other
    /// columns can be read at.
    fn picks_point(self) -> bool {
        matches!(
            self,
            Aggregate::First | Aggregate::Last | Aggregate::Min | Aggregate::Max
        )
    }

    /// For `first`, `last`, `min` and `max`: the SQL of `other` at the
    /// point the selector picks from `x` (the other fields and tags a lone
    /// selector may be selected with).
    fn at_selected(self, x: &str, other: &str) -> Option<String> {
        let t = "toUnixTimestamp64Nano(f.time)";
        let (pick, order) = match self {
            // Among points at the same time, the greatest value (InfluxDB's
            // reducers' rule); among equal values, the earliest point.
            Aggregate::First => ("argMaxIf", format!("(-{t}, {x})")),
            Aggregate::Last => ("argMaxIf", format!("({t}, {x})")),
            Aggregate::Min => ("argMinIf", format!("({x}, {t})")),
            Aggregate::Max => ("argMaxIf", format!("({x}, -{t})")),
            _ => return None,
        };
        Some(format!("{pick}({other}, {order}, {x} IS NOT NULL)"))
    }

    /// The SQL of its value and, for selectors, of its point's time.
    fn sql(self, x: &str, id: usize) -> (String, Option<String>) {
        let t = "toUnixTimestamp64Nano(f.time)";
        let present = format!("{x} IS NOT NULL");
        match self {
            Aggregate::Count => (format!("count({x})"), None),
            Aggregate::Sum => (format!("sum({x})"), None),
            Aggregate::Mean => (format!("avg({x})"), None),
            // InfluxDB's median averages the two middle values.
            Aggregate::Median => (format!("quantileExactInclusive(0.5)({x})"), None),
            Aggregate::Spread => (format!("max({x}) - min({x})"), None),
            Aggregate::Stddev => (format!("stddevSamp({x})"), None),
            Aggregate::First | Aggregate::Last | Aggregate::Min | Aggregate::Max => (
                self.at_selected(x, x).unwrap_or_default(),
                self.at_selected(x, t),
            ),
            // InfluxDB's rank: floor(n × p / 100 + 0.5), 1-based; none
            // outside 1..=n.
            Aggregate::Percentile(p) => {
                let (points, rank) = (format!("__p{id}"), format!("__r{id}"));
                let pick = |rank_first: &str, element: u8| {
                    format!(
                        "if({rank_first} >= 1 AND {rank} <= length({points}), \
                         tupleElement(arrayElement({points}, {rank}), {element}), NULL)"
                    )
                };
                // The value's expression names the sorted points and the
                // rank; the time's reuses them.
                let defined = format!(
                    "(toInt64(floor(length((arraySort(groupArrayIf(({x}, {t}), {present})) AS {points})) \
                     * {p:?} / 100 + 0.5)) AS {rank})"
                );
                (pick(&defined, 1), Some(pick(&rank, 2)))
            }
        }
    }
}

/// What a transformation computes from consecutive points.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Change {
    /// Per unit of time (ns; `None`: the default unit).
    Derivative(Option<i64>),
    Difference,
    /// The running sum, from the first point on.
    CumulativeSum,
}

/// `derivative`, `non_negative_derivative`, `difference`,
/// `non_negative_difference`, `cumulative_sum`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Transform {
    change: Change,
    non_negative: bool,
}

impl Transform {
    fn named(name: &str) -> Option<Transform> {
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
    fn name(self) -> &'static str {
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
    fn apply(self, points: &[(i64, f64, bool)], default_unit: i64) -> Vec<(i64, Value)> {
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
enum Column {
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
    fn from_expr(expr: &Expr) -> Result<Column, String> {
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

    fn aggregates(&self) -> bool {
        match self {
            Column::Aggregate { .. } => true,
            Column::Transform { inner, .. } => inner.aggregates(),
            _ => false,
        }
    }

    /// The column's default name: the field's, or the function's.
    fn default_name(&self, expr: &Expr) -> String {
        match (self, expr) {
            (Column::Raw { name, .. }, _) => name.clone(),
            (_, Expr::Call { name, .. }) => name.clone(),
            _ => String::new(),
        }
    }
}

/// A field, a tag, or neither, in one measurement.
#[derive(Debug, Clone, PartialEq)]
enum Operand {
    Field(String, FieldType),
    Tag(String),
    Missing,
}

fn operand(target: &Target, name: &str, cast: Option<&str>) -> Operand {
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
struct Shape {
    columns: Vec<(String, Column)>,
    aggregate: bool,
}

fn shape(select: &Select) -> Result<Shape, String> {
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

/// Answers a `SELECT`.
pub(crate) async fn run(ctx: &Context<'_>, select: &Select) -> Result<Answer, Error> {
    let zone = select.time_zone;
    let shape = shape(select)?;
    let targets = ctx.targets(&select.sources)?;
    // `*` is every field and tag of every measurement read, sorted, less
    // the tags grouped by.
    // A key that is both a field and a tag shows twice: `k` and `k_1`
    // (`k::tag`).
    let mut wildcard: Vec<(String, Option<String>)> = Vec::new();
    for target in &targets {
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
    let mut series = Vec::new();
    for target in &targets {
        series.extend(measurement(ctx, select, &shape, target, &wildcard, zone).await?);
    }
    // ORDER BY time DESC orders series the other way too.
    if select.descending {
        series.reverse();
    }
    let series = page(series, select.soffset, select.slimit);
    Ok(Answer { series, zone })
}

/// The tag keys a statement groups `target`'s series by, sorted.
fn group_keys(select: &Select, target: &Target) -> Vec<String> {
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
struct Output {
    name: String,
    column: Column,
    operand: Operand,
}

/// The statement over one measurement.
async fn measurement(
    ctx: &Context<'_>,
    select: &Select,
    shape: &Shape,
    target: &Target,
    wildcard: &[(String, Option<String>)],
    zone: Option<chrono_tz::Tz>,
) -> Result<Vec<Series>, Error> {
    let group_keys = group_keys(select, target);
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
    // No field to read (only tags, or names the measurement lacks): no
    // points, as InfluxDB answers.
    if !outputs
        .iter()
        .any(|o| matches!(o.operand, Operand::Field(..)))
    {
        return Ok(Vec::new());
    }
    let mut filter = Filter::new(select, target)?;
    if shape.aggregate {
        if let Some(series) = from_cache(ctx, select, target, &filter, &outputs, &group_keys)? {
            return Ok(series);
        }
    }
    filter.list_series(ctx, target)?;
    if filter.selects_nothing() {
        return Ok(Vec::new());
    }
    match shape.aggregate {
        false => raw(ctx, select, target, &filter, &outputs, &group_keys).await,
        true => aggregated(ctx, select, target, &filter, &outputs, &group_keys, zone).await,
    }
}

/// `last(field), …` over all time, from the ingestor's last-value cache:
/// no engine query. `None` when the statement does not fit (another
/// function, a time condition, a condition on field values, `GROUP BY
/// time`) or the measurement is not cached (or not yet rebuilt after a
/// restart or an edit).
fn from_cache(
    ctx: &Context<'_>,
    select: &Select,
    target: &Target,
    filter: &Filter,
    outputs: &[Output],
    keys: &[String],
) -> Result<Option<Vec<Series>>, Error> {
    let only_last = outputs.iter().all(|o| {
        matches!(
            o.column,
            Column::Aggregate {
                func: Aggregate::Last,
                ..
            }
        )
    });
    let timeless = select.condition.start.is_none() && select.condition.stop.is_none();
    if !only_last || !timeless || select.interval.is_some() || !filter.points.is_empty() {
        return Ok(None);
    }
    let matcher = TagMatcher::new(&filter.tags)?;
    let Some(cached) = ctx.ingestor.last_values(
        &target.database,
        &target.retention_policy,
        &target.schema.name,
        |tags| matcher.matches(tags),
    ) else {
        return Ok(None);
    };
    // Per group, per column: the newest (time, value) of its series.
    let mut groups: BTreeMap<Vec<String>, Vec<Option<(i64, Value)>>> = BTreeMap::new();
    for series in cached {
        let tag = |key: &String| {
            series
                .tags
                .iter()
                .find(|(k, _)| k == key)
                .map_or_else(String::new, |(_, v)| v.clone())
        };
        let newest = groups
            .entry(keys.iter().map(tag).collect())
            .or_insert_with(|| vec![None; outputs.len()]);
        for (newest, output) in newest.iter_mut().zip(outputs) {
            let Operand::Field(field, _) = &output.operand else {
                continue;
            };
            let Ok(at) = series.fields.binary_search_by(|(f, _)| f.cmp(field)) else {
                continue;
            };
            let last = &series.fields[at].1;
            let value = cached_value(&last.value);
            // At equal times, the greatest value, as the engine's `last`.
            let newer = newest.as_ref().is_none_or(|(t, v)| {
                last.time_ns > *t || (last.time_ns == *t && greater(&value, v))
            });
            if newer {
                *newest = Some((last.time_ns, value));
            }
        }
    }
    let mut answer = Vec::new();
    for (group, newest) in groups {
        if newest.iter().all(Option::is_none) {
            continue;
        }
        // A lone selector reports its point's time; several, the start (0).
        let time = match newest.as_slice() {
            [Some((t, _))] => *t,
            _ => 0,
        };
        let mut row = vec![Value::Time(time)];
        row.extend(
            newest
                .into_iter()
                .map(|n| n.map_or(Value::Null, |(_, v)| v)),
        );
        let rows = limited(select, vec![row]);
        if !rows.is_empty() {
            answer.push(series_of(target, keys, group, outputs, rows));
        }
    }
    if select.descending {
        answer.reverse();
    }
    Ok(Some(answer))
}

/// Whether `a` sorts after `b` (values of one field, so of one type).
fn greater(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::String(a), Value::String(b)) => a > b,
        (Value::Boolean(a), Value::Boolean(b)) => a > b,
        (Value::Integer(a), Value::Integer(b)) => a > b,
        (Value::Unsigned(a), Value::Unsigned(b)) => a > b,
        (a, b) => a.as_f64() > b.as_f64(),
    }
}

fn cached_value(value: &chingest::LastField) -> Value {
    match value {
        chingest::LastField::Float(v) => Value::Float(*v),
        chingest::LastField::Integer(v) => Value::Integer(*v),
        chingest::LastField::UInteger(v) => Value::Unsigned(*v),
        chingest::LastField::String(v) => Value::String(v.clone()),
        chingest::LastField::Boolean(v) => Value::Boolean(*v),
    }
}

/// The field or tag a column reads.
fn leaf(column: &Column) -> (&str, Option<&str>) {
    match column {
        Column::Raw { name, cast } | Column::Aggregate { name, cast, .. } => {
            (name, cast.as_deref())
        }
        Column::Transform { inner, .. } => leaf(inner),
        Column::Wildcard => ("*", None),
    }
}

fn aggregate_of(column: &Column) -> Option<Aggregate> {
    match column {
        Column::Aggregate { func, .. } => Some(*func),
        Column::Transform { inner, .. } => aggregate_of(inner),
        _ => None,
    }
}

/// `mean, mean` → `mean, mean_1`, as InfluxDB names repeated columns.
fn dedupe_names(outputs: &mut [Output]) {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for output in outputs {
        let count = seen.entry(output.name.clone()).or_insert(0);
        if *count > 0 {
            output.name = format!("{}_{count}", output.name);
        }
        *count += 1;
    }
}

/// What a statement's `WHERE` asks of one measurement: series by their
/// tags, and points by field values. A comparison written like a tag's
/// (`status = 'red'`, `=~ /re/`) is a field's when the measurement has
/// that field and no such tag.
struct Filter {
    tags: TagPredicate,
    /// The ids of the series `tags` selects, when the last-value cache
    /// knows the measurement's series and the tags narrow them (the
    /// engine then reads those series by primary key, without a subquery
    /// on the series table).
    series: Option<Vec<u64>>,
    /// SQL conditions on the fact row.
    points: Vec<String>,
}

/// Most series ids a statement names itself; more are selected by a
/// subquery on the series table.
const MAX_LISTED_SERIES: usize = 1_000;

impl Filter {
    fn new(select: &Select, target: &Target) -> Result<Filter, Error> {
        let mut points: Vec<String> = select
            .condition
            .fields
            .iter()
            .map(|c| field_condition_sql(target, c))
            .collect();
        let field = |key: &str| {
            let tag = target.schema.tag_keys.iter().any(|k| k == key);
            target
                .schema
                .fields
                .iter()
                .find(|(f, _)| f == key && !tag)
                .map(|(_, ty)| *ty)
        };
        let terms = match &select.condition.tags {
            TagPredicate::And(all) => all.clone(),
            other => vec![other.clone()],
        };
        let mut tags = Vec::new();
        for term in terms {
            // (key, the condition were the key a field)
            let column = |k: &str| format!("f.{}", quote_ident(k));
            let (key, sql) = match &term {
                TagPredicate::Equals(k, v) => (k, format!("{} = {}", column(k), quote_literal(v))),
                TagPredicate::NotEquals(k, v) => {
                    (k, format!("{} != {}", column(k), quote_literal(v)))
                }
                TagPredicate::Matches(k, re) => {
                    (k, format!("match({}, {})", column(k), quote_literal(re)))
                }
                TagPredicate::NotMatches(k, re) => (
                    k,
                    format!("NOT match({}, {})", column(k), quote_literal(re)),
                ),
                TagPredicate::And(_) | TagPredicate::Or(_) if mentions(&term, &field) => {
                    return Err(
                        "conditions on field values must be joined to the rest with AND"
                            .to_owned()
                            .into(),
                    )
                }
                _ => {
                    tags.push(term);
                    continue;
                }
            };
            match field(key) {
                Some(FieldType::String) => points.push(sql),
                // A string never equals another type's value.
                Some(_) => points.push("0".to_owned()),
                None => tags.push(term),
            }
        }
        let tags = match tags.len() {
            0 => TagPredicate::Any,
            1 => tags.remove(0),
            _ => TagPredicate::And(tags),
        };
        Ok(Filter {
            tags,
            series: None,
            points,
        })
    }

    /// Finds the ids of the series the tags select in the last-value cache,
    /// when it knows the measurement and they are few.
    fn list_series(&mut self, ctx: &Context<'_>, target: &Target) -> Result<(), Error> {
        if self.tags == TagPredicate::Any {
            return Ok(());
        }
        let matcher = TagMatcher::new(&self.tags)?;
        self.series = ctx
            .ingestor
            .last_values(
                &target.database,
                &target.retention_policy,
                &target.schema.name,
                |tags| matcher.matches(tags),
            )
            .map(|series| series.iter().map(|s| s.series_id).collect::<Vec<u64>>())
            .filter(|ids| ids.len() <= MAX_LISTED_SERIES);
        Ok(())
    }

    /// Whether the filter selects no series at all (known from the cache).
    fn selects_nothing(&self) -> bool {
        self.series.as_ref().is_some_and(Vec::is_empty)
    }
}

/// Whether `predicate` compares a key `field` says is a field.
fn mentions(predicate: &TagPredicate, field: &impl Fn(&str) -> Option<FieldType>) -> bool {
    match predicate {
        TagPredicate::Any => false,
        TagPredicate::Equals(k, _)
        | TagPredicate::NotEquals(k, _)
        | TagPredicate::Matches(k, _)
        | TagPredicate::NotMatches(k, _) => field(k).is_some(),
        TagPredicate::And(all) | TagPredicate::Or(all) => all.iter().any(|p| mentions(p, field)),
    }
}

/// The `WHERE` of a statement over `target`: the time range, the series
/// (when not joined), points that have one of `fields`, the filter's
/// conditions on points.
fn where_sql(
    select: &Select,
    filter: &Filter,
    series: Option<String>,
    fields: &[&str],
    stop: Option<i64>,
) -> String {
    let mut conditions: Vec<String> = series.into_iter().collect();
    if let Some(start) = select.condition.start {
        conditions.push(format!(
            "f.time >= fromUnixTimestamp64Nano(toInt64({start}))"
        ));
    }
    if let Some(stop) = stop {
        conditions.push(format!("f.time < fromUnixTimestamp64Nano(toInt64({stop}))"));
    }
    if !fields.is_empty() {
        let any: Vec<String> = fields
            .iter()
            .map(|f| format!("f.{f} IS NOT NULL"))
            .collect();
        conditions.push(format!("({})", any.join(" OR ")));
    }
    conditions.extend(filter.points.iter().cloned());
    match conditions.is_empty() {
        true => "1".to_owned(),
        false => conditions.join(" AND "),
    }
}

/// `field <op> literal` in SQL. A field the measurement lacks, or one of
/// another kind than the literal, matches no point (as in InfluxDB).
fn field_condition_sql(target: &Target, condition: &FieldCondition) -> String {
    let field = target
        .schema
        .fields
        .iter()
        .find(|(f, _)| *f == condition.field);
    let literal = match (field.map(|(_, ty)| *ty), condition.value) {
        (
            Some(FieldType::Float | FieldType::Integer | FieldType::UInteger),
            FieldLiteral::Number(n),
        ) => {
            format!("{n:?}")
        }
        (Some(FieldType::Boolean), FieldLiteral::Boolean(b))
            if matches!(condition.op, "=" | "!=") =>
        {
            b.to_string()
        }
        _ => return "0".to_owned(),
    };
    format!(
        "f.{} {} {literal}",
        quote_ident(&condition.field),
        condition.op
    )
}

fn group_sql(keys: &[String]) -> Vec<String> {
    keys.iter()
        .enumerate()
        .map(|(i, k)| format!("s.tags[{}] AS __g{i}", quote_literal(k)))
        .collect()
}

fn field_sql(operand: &Operand) -> String {
    match operand {
        Operand::Field(f, _) => format!("f.{}", quote_ident(f)),
        Operand::Tag(k) => format!("nullIf(s.tags[{}], '')", quote_literal(k)),
        Operand::Missing => "NULL".to_owned(),
    }
}

fn fields_read(outputs: &[Output]) -> Vec<String> {
    let mut fields: Vec<String> = outputs
        .iter()
        .filter_map(|o| match &o.operand {
            Operand::Field(f, _) => Some(quote_ident(f)),
            _ => None,
        })
        .collect();
    fields.sort();
    fields.dedup();
    fields
}

/// Rows grouped by their first `keys` cells (sorted by them), the rest of
/// each row kept.
fn by_group(rows: Vec<Vec<Value>>, keys: usize) -> BTreeMap<Vec<String>, Vec<Vec<Value>>> {
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

fn series_of(
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
fn order_and_limit(select: &Select, mut rows: Vec<Vec<Value>>) -> Vec<Vec<Value>> {
    if select.descending {
        rows.reverse();
    }
    limited(select, rows)
}

/// `OFFSET` and `LIMIT` on one series' rows.
fn limited(select: &Select, rows: Vec<Vec<Value>>) -> Vec<Vec<Value>> {
    // LIMIT 0 is no limit, as in InfluxDB.
    page(rows, select.offset, select.limit.filter(|&n| n > 0))
}

/// Raw points: `SELECT field, tag FROM m`.
async fn raw(
    ctx: &Context<'_>,
    select: &Select,
    target: &Target,
    filter: &Filter,
    outputs: &[Output],
    keys: &[String],
) -> Result<Vec<Series>, Error> {
    let join = !keys.is_empty() || outputs.iter().any(|o| matches!(o.operand, Operand::Tag(_)));
    let (from, series) = fact_source(target, &filter.tags, filter.series.as_deref(), join);
    let mut columns = vec!["toUnixTimestamp64Nano(f.time) AS __t".to_owned()];
    columns.extend(group_sql(keys));
    columns.extend(outputs.iter().map(|o| field_sql(&o.operand)));
    let fields = fields_read(outputs);
    let fields: Vec<&str> = fields.iter().map(String::as_str).collect();
    let transforms = outputs
        .iter()
        .any(|o| matches!(o.column, Column::Transform { .. }));
    let mut order: Vec<String> = (0..keys.len()).map(|i| format!("__g{i}")).collect();
    order.push(format!(
        "__t{}",
        if select.descending { " DESC" } else { "" }
    ));
    order.push("f.series_id".to_owned());
    let mut sql = format!(
        "SELECT {} FROM {from} WHERE {} ORDER BY {}",
        columns.join(", "),
        where_sql(select, filter, series, &fields, select.condition.stop),
        order.join(", ")
    );
    // Without transformations, LIMIT and OFFSET are the engine's (per
    // series); with them, they apply to what the transformation gives.
    let limit = select.limit.filter(|&l| l > 0);
    if !transforms && (limit.is_some() || select.offset > 0) {
        sql.push_str(&format!(
            " LIMIT {} OFFSET {}",
            limit.unwrap_or(u64::MAX),
            select.offset
        ));
        if !keys.is_empty() {
            let by: Vec<String> = (0..keys.len()).map(|i| format!("__g{i}")).collect();
            sql.push_str(&format!(" BY {}", by.join(", ")));
        }
    }
    let rows = rows(&ctx.ingestor.query_translated(&sql).await?);
    let rows = rows.into_iter().map(move_time_first(keys.len())).collect();
    let mut answer = Vec::new();
    for (group, mut rows) in by_group(rows, keys.len()) {
        if transforms {
            // The engine's order is the statement's.
            let unit = 1_000_000_000;
            rows = limited(select, transformed(outputs, rows, unit, select.descending));
        }
        if !rows.is_empty() {
            answer.push(series_of(target, keys, group, outputs, rows));
        }
    }
    Ok(answer)
}

/// Rows come as (time, keys…, values…); grouping wants (keys…, time,
/// values…).
fn move_time_first(keys: usize) -> impl Fn(Vec<Value>) -> Vec<Value> {
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
fn transformed(
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
fn window_start(t: i64, interval: Interval, zone: Option<chrono_tz::Tz>) -> i64 {
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

/// The same in SQL, for the engine's `GROUP BY`.
fn window_sql(interval: Interval, zone: Option<chrono_tz::Tz>) -> String {
    // Signed constants: a bare literal is unsigned to the engine, and
    // unsigned arithmetic wraps times before 1970.
    let (every, offset) = (
        format!("toInt64({})", interval.every),
        format!("toInt64({})", interval.offset),
    );
    let t0 = format!("(toUnixTimestamp64Nano(f.time) - {offset})");
    match zone {
        // The engine's own rounding, a DateTime64: about 1.3× the queries
        // per second of the same in integer arithmetic (docs/benchmarks.md §9).
        None if interval.offset == 0 => {
            format!("toStartOfInterval(f.time, toIntervalNanosecond({every}))")
        }
        None => format!(
            "(toStartOfInterval(f.time - toIntervalNanosecond({offset}), \
             toIntervalNanosecond({every})) + toIntervalNanosecond({offset}))"
        ),
        Some(zone) => {
            let zone = quote_literal(zone.name());
            let offset_at = |ns: &str| {
                format!(
                    "(toInt64(timeZoneOffset(toTimeZone(fromUnixTimestamp64Nano(toInt64({ns})), {zone}))) \
                     * toInt64(1000000000))"
                )
            };
            let z0 = offset_at(&t0);
            let start = format!("({t0} - (({t0} + {z0}) % {every} + {every}) % {every})");
            let shift = format!("({z0} - {})", offset_at(&start));
            format!(
                "({start} + if({shift} != 0 AND abs({shift}) < {every}, {shift}, 0) + {offset})"
            )
        }
    }
}

/// Aggregates, per `GROUP BY time` interval when given.
async fn aggregated(
    ctx: &Context<'_>,
    select: &Select,
    target: &Target,
    filter: &Filter,
    outputs: &[Output],
    keys: &[String],
    zone: Option<chrono_tz::Tz>,
) -> Result<Vec<Series>, Error> {
    // The selector that fields and tags selected beside it are read at.
    let selector = outputs.iter().find_map(|o| match (&o.column, &o.operand) {
        (Column::Aggregate { func, .. }, Operand::Field(..)) => {
            Some((*func, field_sql(&o.operand)))
        }
        _ => None,
    });
    let aux_tags = outputs.iter().any(|o| {
        matches!(
            (&o.column, &o.operand),
            (Column::Raw { .. }, Operand::Tag(_))
        )
    });
    let join = !keys.is_empty() || aux_tags;
    let (from, series) = fact_source(target, &filter.tags, filter.series.as_deref(), join);
    // Without an upper bound, GROUP BY time ends now (InfluxDB's rule).
    let stop = match (select.condition.stop, select.interval) {
        (None, Some(_)) => Some(ctx.now.saturating_add(1)),
        (stop, _) => stop,
    };
    let mut columns = vec![match select.interval {
        Some(interval) => format!("{} AS __t", window_sql(interval, zone)),
        None => "toInt64(0) AS __t".to_owned(),
    }];
    columns.extend(group_sql(keys));
    // Per output: where its value is, and its point's time.
    let mut at = Vec::new();
    for (i, output) in outputs.iter().enumerate() {
        let (value, time) = match (aggregate_of(&output.column), &output.operand, &selector) {
            (None, Operand::Missing, _) | (None, _, None) => ("NULL".to_owned(), None),
            (None, other, Some((func, x))) => (
                func.at_selected(x, &field_sql(other)).unwrap_or_default(),
                None,
            ),
            (Some(func), Operand::Field(..), _) => func.sql(&field_sql(&output.operand), i),
            (Some(func), _, _) => (
                "NULL".to_owned(),
                func.is_selector().then(|| "NULL".to_owned()),
            ),
        };
        columns.push(value);
        at.push((
            columns.len() - 1,
            time.map(|t| {
                columns.push(t);
                columns.len() - 1
            }),
        ));
    }
    let mut group: Vec<String> = (0..keys.len()).map(|i| format!("__g{i}")).collect();
    if select.interval.is_some() {
        group.insert(0, "__t".to_owned());
    }
    // No filter on the fields being present: the aggregates skip NULLs,
    // and a row with none of them is told apart below (the filter cost
    // the panel query ~15% of its rate, docs/benchmarks.md §9).
    let aggregated: Vec<&Output> = outputs.iter().filter(|o| o.column.aggregates()).collect();
    let remembered = recent::rows(
        ctx,
        select,
        target,
        filter,
        outputs,
        keys,
        &at,
        columns.len(),
        stop,
    )?;
    let rows = match remembered {
        Some(rows) => rows,
        None => {
            let mut sql = format!(
                "SELECT {} FROM {from} WHERE {}",
                columns.join(", "),
                where_sql(select, filter, series, &[], stop)
            );
            if !group.is_empty() {
                sql.push_str(&format!(" GROUP BY {}", group.join(", ")));
            }
            rows(&ctx.ingestor.query_translated(&sql).await?)
        }
    };
    // A row where no aggregate found a point (every value NULL, every
    // count 0) is no row: a group or interval whose points lack the fields,
    // or the one row the engine answers for aggregating nothing.
    let found: Vec<(usize, bool)> = outputs
        .iter()
        .zip(&at)
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
    let last = window_start(stop.unwrap_or(ctx.now).saturating_sub(1), interval, zone);
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
    let transforms = outputs
        .iter()
        .any(|o| matches!(o.column, Column::Transform { .. }));
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

/// `fill(previous | linear | number)` over one series' rows (time first).
fn fill(rows: &mut [Vec<Value>], how: Fill) {
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
