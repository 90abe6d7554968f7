//! The statements in SQL: one per measurement, over its fact table
//! narrowed to its series — the `WHERE` ([`Filter`], [`where_sql`]), the
//! columns ([`field_sql`], [`Aggregate::sql`]), the `GROUP BY time`
//! interval ([`window_sql`]). Pure: no ingestor, so the engine-free golden
//! tests (`tests/planner.rs`) pin the very text the real path sends.

use chingest::layout::names::{quote_ident, quote_literal};
use chingest::layout::schema::FieldType;
use chingest::{MeasurementSchema, RollupView, TagPredicate};

use super::aggregate::Aggregate;
use super::model::{
    aggregate_of, group_keys, outputs, shape, transforms, wildcard, Column, Operand, Output,
    Projection, Shape,
};
use crate::condition::{FieldCondition, FieldLiteral};
use crate::error::Error;
use crate::parse::{Interval, Name, Select};
use crate::plan::{fact_source, facts_as_f, named_targets, Target};

/// Where an output's value and its point's time are in a row.
pub(super) type Place = (usize, Option<usize>);

impl Aggregate {
    /// For `first`, `last`, `min` and `max`: the SQL of `other` at the
    /// point the selector picks from `x` (the other fields and tags a lone
    /// selector may be selected with).
    pub(super) fn at_selected(self, x: &str, other: &str) -> Option<String> {
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
    pub(super) fn sql(self, x: &str, id: usize) -> (String, Option<String>) {
        let t = "toUnixTimestamp64Nano(f.time)";
        let present = format!("{x} IS NOT NULL");
        match self {
            Aggregate::Count => (format!("count({x})"), None),
            Aggregate::CountDistinct => (format!("uniqExact({x})"), None),
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
            // Computed from the points instead (`in_engine`): a statement
            // with one never asks the engine for it.
            Aggregate::Mode
            | Aggregate::Integral(_)
            | Aggregate::Distinct
            | Aggregate::Top(_)
            | Aggregate::Bottom(_)
            | Aggregate::Sample(_) => {
                debug_assert!(!self.in_engine(), "{self:?} has SQL");
                ("NULL".to_owned(), None)
            }
        }
    }
}

/// What a statement's `WHERE` asks of one measurement: series by their
/// tags, and points by field values. A comparison written like a tag's
/// (`status = 'red'`, `=~ /re/`) is a field's when the measurement has
/// that field and no such tag.
pub(super) struct Filter {
    pub(super) tags: TagPredicate,
    /// The ids of the series `tags` selects, when the last-value cache
    /// knows the measurement's series and the tags narrow them (the
    /// engine then reads those series by primary key, without a subquery
    /// on the series table).
    pub(super) series: Option<Vec<u64>>,
    /// SQL conditions on the fact row.
    pub(super) points: Vec<String>,
}

/// Most series ids a statement names itself; more are selected by a
/// subquery on the series table.
pub(super) const MAX_LISTED_SERIES: usize = 1_000;

impl Filter {
    pub(super) fn new(select: &Select, target: &Target) -> Result<Filter, Error> {
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

    /// Narrows the filter to the series `ids` lists (found in the
    /// last-value cache), when its tags narrow them and they are few.
    pub(super) fn list_series(&mut self, ids: Option<Vec<u64>>) {
        let narrows = self.tags != TagPredicate::Any;
        self.series = ids.filter(|ids| narrows && ids.len() <= MAX_LISTED_SERIES);
    }

    /// Whether the filter selects no series at all (known from the cache).
    pub(super) fn selects_nothing(&self) -> bool {
        self.series.as_ref().is_some_and(Vec::is_empty)
    }
}

/// Whether `predicate` compares a key `field` says is a field.
pub(super) fn mentions(
    predicate: &TagPredicate,
    field: &impl Fn(&str) -> Option<FieldType>,
) -> bool {
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
pub(super) fn where_sql(
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
pub(super) fn field_condition_sql(target: &Target, condition: &FieldCondition) -> String {
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

pub(super) fn group_sql(keys: &[String]) -> Vec<String> {
    keys.iter()
        .enumerate()
        .map(|(i, k)| format!("s.tags[{}] AS __g{i}", quote_literal(k)))
        .collect()
}

pub(super) fn field_sql(operand: &Operand) -> String {
    match operand {
        Operand::Field(f, _) => format!("f.{}", quote_ident(f)),
        Operand::Tag(k) => format!("nullIf(s.tags[{}], '')", quote_literal(k)),
        Operand::Missing => "NULL".to_owned(),
    }
}

pub(super) fn fields_read(outputs: &[Output]) -> Vec<String> {
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

/// The exclusive end of an aggregate statement's range: its own, or now
/// for `GROUP BY time` without one (InfluxDB's rule).
pub(super) fn stop(select: &Select, now: i64) -> Option<i64> {
    match (select.condition.stop, select.interval) {
        (None, Some(_)) => Some(now.saturating_add(1)),
        (stop, _) => stop,
    }
}

/// The same in SQL, for the engine's `GROUP BY`.
pub(super) fn window_sql(interval: Interval, zone: Option<chrono_tz::Tz>) -> String {
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

/// The SQL a `SELECT` sends the engine, planned with no ingestor: for
/// each measurement it reads among `schemas` (sorted by name), its name and
/// its statement, or `None` when it asks the engine nothing (no field to
/// read, or no series selected).
///
/// `schemas` are the measurements of every database and retention policy
/// the statement names; `database` and `retention_policy` are those of
/// sources that name none. `listed` gives the ids of the series of a
/// measurement that its tags select, as the last-value cache would
/// (`None`: not known, so a subquery on the series table selects them);
/// `now` is what `now()` means, ns since the epoch. What the real path
/// answers from memory instead (`last()` over all time, recent aggregates)
/// is not planned here: this is the SQL it sends otherwise, built by the
/// same code.
pub fn select_sql(
    select: &Select,
    database: &str,
    retention_policy: &str,
    schemas: &[MeasurementSchema],
    listed: impl Fn(&str) -> Option<Vec<u64>>,
    now: i64,
) -> Result<Vec<(String, Option<String>)>, Error> {
    let shape = shape(select)?;
    let targets = named_targets(&select.sources, |source| {
        let schemas = schemas.iter().filter(|schema| match &source.measurement {
            Name::Exact(name) => schema.name == *name,
            Name::Regex(_) => true,
        });
        Ok((
            source.database.as_deref().unwrap_or(database).to_owned(),
            source
                .retention_policy
                .as_deref()
                .unwrap_or(retention_policy)
                .to_owned(),
            schemas.cloned().collect(),
        ))
    })?;
    let wildcard = wildcard(select, &targets);
    let mut statements = Vec::new();
    for target in &targets {
        let sql = match Plan::new(select, &shape, target, &wildcard)? {
            Some(mut plan) => {
                plan.filter.list_series(listed(&target.schema.name));
                plan.statement(select, target, select.time_zone, now, None)
                    .map(Statement::into_sql)
            }
            None => None,
        };
        statements.push((target.schema.name.clone(), sql));
    }
    Ok(statements)
}

/// One measurement's statement, planned with no ingestor: what it reads
/// and how it narrows the measurement's series.
pub(super) struct Plan {
    /// The cells of its rows, resolved against the measurement.
    pub(super) outputs: Vec<Output>,
    /// The columns of its answer, over the cells.
    pub(super) columns: Vec<Projection>,
    /// The tag keys it groups by, sorted.
    pub(super) keys: Vec<String>,
    pub(super) filter: Filter,
    /// Whether it aggregates (else it reads raw points).
    aggregate: bool,
    /// `top(x, tag…, n)`'s tags ([`Shape::by_tags`]).
    pub(super) by_tags: Vec<String>,
    /// Where the answer starts when the statement reads before its range
    /// (the interval its transformations read before it).
    pub(super) answer_from: Option<i64>,
    /// Most points it may hold where its aggregates are computed here
    /// ([`Statement::Points`]), while its windows are computed.
    pub(super) max_points: usize,
}

/// One measurement's statement in SQL.
pub(super) enum Statement {
    /// Raw points: (time, group keys…, outputs…) per row.
    Raw(String),
    Aggregated(Aggregation),
    /// The points its aggregates are computed from here (`in_engine`),
    /// as [`Statement::Raw`]'s rows, in time order per group.
    Points(String),
}

/// An aggregate statement in SQL, and where its answer's cells are.
pub(super) struct Aggregation {
    pub(super) sql: String,
    /// Per output, the cell of its value and of its point's time.
    pub(super) at: Vec<Place>,
    /// The cells of a row.
    pub(super) width: usize,
    /// The range's exclusive end: the statement's, or now for `GROUP BY
    /// time` without one.
    pub(super) stop: Option<i64>,
    /// Whether it reads rollups ([`Plan::rollup_sql`]).
    pub(super) rollups: bool,
}

impl Statement {
    /// The statement's SQL.
    fn into_sql(self) -> String {
        match self {
            Statement::Raw(sql) | Statement::Points(sql) => sql,
            Statement::Aggregated(aggregation) => aggregation.sql,
        }
    }
}

impl Plan {
    /// The statement over `target`; `None` when it has no field to read
    /// (only tags, or names the measurement lacks): no points, as InfluxDB
    /// answers.
    pub(super) fn new(
        select: &Select,
        shape: &Shape,
        target: &Target,
        wildcard: &[(String, Option<String>)],
    ) -> Result<Option<Plan>, Error> {
        let (outputs, columns) = outputs(shape, target, wildcard)?;
        if !outputs
            .iter()
            .any(|o| matches!(o.operand, Operand::Field(..)))
        {
            return Ok(None);
        }
        Ok(Some(Plan {
            filter: Filter::new(select, target)?,
            keys: group_keys(select, target),
            outputs,
            columns,
            aggregate: shape.aggregate,
            by_tags: shape.by_tags.clone(),
            answer_from: None,
            max_points: chingest::QueryLimits::default().max_points_in_memory,
        }))
    }

    /// Its SQL (`now`: what `now()` means; `rollups`: what the
    /// measurement's rollups offer, if it is downsampled); `None` when the
    /// filter selects no series at all.
    pub(super) fn statement(
        &self,
        select: &Select,
        target: &Target,
        zone: Option<chrono_tz::Tz>,
        now: i64,
        rollups: Option<&RollupView>,
    ) -> Option<Statement> {
        if self.filter.selects_nothing() {
            return None;
        }
        if self.needs_points() {
            let stop = stop(select, now);
            // One point past the bound tells a statement that reads too many.
            let sql = self.points_sql(select, target, rollups, stop, None);
            return Some(Statement::Points(format!(
                "{sql} LIMIT {}",
                self.max_points.saturating_add(1)
            )));
        }
        Some(match self.aggregate {
            false => Statement::Raw(self.raw_sql(select, target, rollups)),
            true => {
                let mut aggregation = self.aggregation(select, target, zone, now, rollups);
                let rolled = rollups
                    .zip(aggregation.stop)
                    .and_then(|(view, stop)| self.rollup_sql(select, target, view, stop));
                if let Some(sql) = rolled {
                    aggregation.sql = sql;
                    aggregation.rollups = true;
                }
                Statement::Aggregated(aggregation)
            }
        })
    }

    /// Whether it aggregates (else it reads raw points).
    pub(super) fn aggregates(&self) -> bool {
        self.aggregate
    }

    /// Whether an aggregate of its is computed here, from the points.
    pub(super) fn needs_points(&self) -> bool {
        self.outputs
            .iter()
            .any(|o| aggregate_of(&o.column).is_some_and(|func| !func.in_engine()))
    }

    fn raw_sql(&self, select: &Select, target: &Target, rollups: Option<&RollupView>) -> String {
        // Without transformations, LIMIT and OFFSET are the engine's (per
        // series); with them, they apply to what the transformation gives.
        let limit = select.limit.filter(|&l| l > 0);
        let paged = !transforms(&self.outputs) && (limit.is_some() || select.offset > 0);
        let page = paged.then(|| (limit.unwrap_or(u64::MAX), select.offset));
        self.points_sql(select, target, rollups, select.condition.stop, page)
    }

    /// The points of the range up to `stop`, as (time, group keys…,
    /// cells…) per row in the statement's order (`page`: `LIMIT` and
    /// `OFFSET` per group).
    pub(super) fn points_sql(
        &self,
        select: &Select,
        target: &Target,
        rollups: Option<&RollupView>,
        stop: Option<i64>,
        page: Option<(u64, u64)>,
    ) -> String {
        let (filter, outputs, keys) = (&self.filter, self.outputs.as_slice(), self.keys.as_slice());
        // Aggregates computed here take the points of one time in the
        // order of their series' keys, as InfluxDB merges series — which
        // takes the series table, but for one series.
        let one_series = filter.series.as_ref().is_some_and(|ids| ids.len() <= 1);
        let by_series_key = self.aggregate && !one_series;
        let join = by_series_key
            || !keys.is_empty()
            || outputs.iter().any(|o| matches!(o.operand, Operand::Tag(_)));
        let range = (select.condition.start, stop);
        let facts = facts_as_f(target, rollups, range);
        let (from, series) =
            fact_source(&facts, target, &filter.tags, filter.series.as_deref(), join);
        let mut columns = vec!["toUnixTimestamp64Nano(f.time) AS __t".to_owned()];
        columns.extend(group_sql(keys));
        columns.extend(outputs.iter().map(|o| field_sql(&o.operand)));
        let fields = fields_read(outputs);
        let fields: Vec<&str> = fields.iter().map(String::as_str).collect();
        let mut order: Vec<String> = (0..keys.len()).map(|i| format!("__g{i}")).collect();
        order.push(format!(
            "__t{}",
            if select.descending && !self.aggregate {
                " DESC"
            } else {
                ""
            }
        ));
        order.push(match by_series_key {
            true => "toString(s.tags)".to_owned(),
            false => "f.series_id".to_owned(),
        });
        let mut sql = format!(
            "SELECT {} FROM {from} WHERE {} ORDER BY {}",
            columns.join(", "),
            where_sql(select, filter, series, &fields, stop),
            order.join(", ")
        );
        if let Some((limit, offset)) = page {
            sql.push_str(&format!(" LIMIT {limit} OFFSET {offset}"));
            if !keys.is_empty() {
                let by: Vec<String> = (0..keys.len()).map(|i| format!("__g{i}")).collect();
                sql.push_str(&format!(" BY {}", by.join(", ")));
            }
        }
        sql
    }

    fn aggregation(
        &self,
        select: &Select,
        target: &Target,
        zone: Option<chrono_tz::Tz>,
        now: i64,
        rollups: Option<&RollupView>,
    ) -> Aggregation {
        let (filter, outputs, keys) = (&self.filter, self.outputs.as_slice(), self.keys.as_slice());
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
        let stop = stop(select, now);
        let facts = facts_as_f(target, rollups, (select.condition.start, stop));
        let (from, series) =
            fact_source(&facts, target, &filter.tags, filter.series.as_deref(), join);
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
        let mut sql = format!(
            "SELECT {} FROM {from} WHERE {}",
            columns.join(", "),
            where_sql(select, filter, series, &[], stop)
        );
        if !group.is_empty() {
            sql.push_str(&format!(" GROUP BY {}", group.join(", ")));
        }
        Aggregation {
            sql,
            at,
            width: columns.len(),
            stop,
            rollups: false,
        }
    }
}
