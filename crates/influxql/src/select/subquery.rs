//! `SELECT … FROM (SELECT …)`: the inner statements answered first (the
//! outer's time range and `GROUP BY` tags given to them, as InfluxDB
//! does), their series read
//! as measurements — their columns as fields, their `GROUP BY` tags as
//! tags — and the outer statement answered over them in memory with the
//! same reducers, transformations and formulas as any statement.

use std::collections::BTreeMap;

use chingest::layout::names::TableNames;
use chingest::layout::schema::FieldType;
use chingest::MeasurementSchema;

use super::after::{in_points_order, raw_series};
use super::model::{wildcard, Operand, Shape};
use super::points;
use super::sql::Plan;
use crate::answer::{Answer, Series, Value};
use crate::condition::{FieldCondition, FieldLiteral};
use crate::error::Error;
use crate::parse::{GroupBy, Select};
use crate::plan::{page, Context, TagMatcher, Target};

/// Answers `select`, whose `FROM` is subqueries, over their answers
/// (each asked [`within`] the outer statement).
pub(super) fn answer(
    ctx: &Context<'_>,
    select: &Select,
    shape: &Shape,
    answers: Vec<Answer>,
) -> Result<Answer, Error> {
    // Per measurement: the inner answers' series.
    let mut measurements: BTreeMap<String, Vec<Series>> = BTreeMap::new();
    let mut held = 0;
    for answer in answers {
        // The inner answers are held in memory while the outer reads them.
        held += answer.series.iter().map(|s| s.values.len()).sum::<usize>();
        let most = ctx.ingestor.config().query.max_points_in_memory;
        if held > most {
            return Err(format!(
                "subqueries answer more than {most} rows (query.max_points_in_memory): narrow \
                 their time range or series"
            )
            .into());
        }
        for series in answer.series {
            let name = series.name.clone().unwrap_or_default();
            measurements.entry(name).or_default().push(series);
        }
    }
    let database = ctx.database.unwrap_or_default();
    let targets: Vec<(Target, Vec<Series>)> = measurements
        .into_iter()
        .map(|(name, series)| {
            (
                target(database, ctx.retention_policy, name, &series),
                series,
            )
        })
        .collect();
    let just_targets: Vec<Target> = targets.iter().map(|(t, _)| target_copy(t)).collect();
    let wildcard = wildcard(select, &just_targets);
    let mut answer = Vec::new();
    for (target, series) in &targets {
        let Some(mut plan) = Plan::new(select, shape, target, &wildcard)? else {
            continue;
        };
        plan.max_points = ctx.ingestor.config().query.max_points_in_memory;
        let rows = rows(select, &plan, series)?;
        answer.extend(match shape.aggregate {
            true => points::series(select, target, &plan, rows, select.time_zone, ctx.now)?,
            false => raw_series(select, target, &plan, rows, true),
        });
    }
    if select.descending {
        answer.reverse();
    }
    Ok(Answer {
        series: page(answer, select.soffset, select.slimit),
        zone: select.time_zone,
    })
}

/// `inner` with the outer statement's time range and `GROUP BY` tags
/// too.
pub(super) fn within(inner: &Select, outer: &Select) -> Select {
    let mut inner = inner.clone();
    inner.group_by = match (&inner.group_by, &outer.group_by) {
        (GroupBy::All, _) | (_, GroupBy::All) => GroupBy::All,
        (GroupBy::Nothing, outer) => outer.clone(),
        (inner, GroupBy::Nothing) => inner.clone(),
        (GroupBy::Tags(a), GroupBy::Tags(b)) => {
            let mut tags = a.clone();
            tags.extend(b.iter().filter(|t| !a.contains(t)).cloned());
            GroupBy::Tags(tags)
        }
    };
    let (start, stop) = (&mut inner.condition.start, &mut inner.condition.stop);
    *start = match (*start, outer.condition.start) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    *stop = match (*stop, outer.condition.stop) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    inner
}

/// A measurement of the inner answers: their columns as fields (typed by
/// their first value), their tag keys as tags.
fn target(database: &str, rp: &str, name: String, series: &[Series]) -> Target {
    let mut fields: BTreeMap<String, FieldType> = BTreeMap::new();
    let mut tag_keys: Vec<String> = Vec::new();
    for one in series {
        for (c, column) in one.columns.iter().enumerate().skip(1) {
            let seen = one.values.iter().map(|row| &row[c]).find(|v| !v.is_null());
            let ty = match seen {
                Some(Value::Integer(_)) => FieldType::Integer,
                Some(Value::Unsigned(_)) => FieldType::UInteger,
                Some(Value::String(_)) => FieldType::String,
                Some(Value::Boolean(_)) => FieldType::Boolean,
                _ => FieldType::Float,
            };
            let known = fields.entry(column.clone()).or_insert(ty);
            if seen.is_some() && *known == FieldType::Float {
                *known = ty;
            }
        }
        tag_keys.extend(one.tags.iter().flatten().map(|(k, _)| k.clone()));
    }
    tag_keys.sort();
    tag_keys.dedup();
    Target {
        names: TableNames::new(database, rp, &name),
        database: database.to_owned(),
        retention_policy: rp.to_owned(),
        schema: MeasurementSchema {
            name,
            fields: fields.into_iter().collect(),
            tag_keys,
        },
    }
}

fn target_copy(target: &Target) -> Target {
    Target {
        names: TableNames::new(
            &target.database,
            &target.retention_policy,
            &target.schema.name,
        ),
        database: target.database.clone(),
        retention_policy: target.retention_policy.clone(),
        schema: target.schema.clone(),
    }
}

/// The inner series' rows the outer statement reads, as the engine would
/// answer its points' SQL: (time, group keys…, cells…), ordered by group,
/// time and series; only rows in its range, of series its tags select,
/// whose values meet its field conditions, with a field it reads.
fn rows(select: &Select, plan: &Plan, series: &[Series]) -> Result<Vec<Vec<Value>>, Error> {
    // A tag condition on a name that is a field here compares the field's
    // text, as the engine's statements do.
    let matcher = TagMatcher::new(&select.condition.tags)?;
    let (start, stop) = (select.condition.start, select.condition.stop);
    let mut rows: Vec<(Vec<Value>, String)> = Vec::new();
    for one in series {
        let tags: Vec<(String, String)> = one.tags.clone().unwrap_or_default();
        let key: String = tags.iter().map(|(k, v)| format!(",{k}={v}")).collect();
        let column = |name: &str| one.columns.iter().position(|c| c == name);
        let tag = |name: &str| tags.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        for values in &one.values {
            let Value::Time(t) = values[0] else { continue };
            if start.is_some_and(|s| t < s) || stop.is_some_and(|s| t >= s) {
                continue;
            }
            let mut named: Vec<(String, String)> = tags.clone();
            for (c, name) in one.columns.iter().enumerate().skip(1) {
                if let Value::String(text) = &values[c] {
                    if tag(name).is_none() {
                        named.push((name.clone(), text.clone()));
                    }
                }
            }
            named.sort();
            if !matcher.matches(&named) {
                continue;
            }
            let meets = select.condition.fields.iter().all(|condition| {
                column(&condition.field).is_some_and(|c| meets(&values[c], condition))
            });
            if !meets {
                continue;
            }
            let mut row = vec![Value::Integer(t)];
            row.extend(
                plan.keys
                    .iter()
                    .map(|k| Value::String(tag(k).unwrap_or_default())),
            );
            let mut any_field = false;
            for output in &plan.outputs {
                row.push(match &output.operand {
                    Operand::Field(name, _) => match column(name) {
                        Some(c) => {
                            any_field |= !values[c].is_null();
                            values[c].clone()
                        }
                        None => Value::Null,
                    },
                    Operand::Tag(k) => tag(k)
                        .filter(|v| !v.is_empty())
                        .map_or(Value::Null, Value::String),
                    Operand::Missing => Value::Null,
                });
            }
            if any_field {
                rows.push((row, key.clone()));
            }
        }
    }
    let descending = select.descending && !plan.aggregates();
    Ok(in_points_order(rows, plan.keys.len(), descending))
}

/// Whether `value` meets `field <op> literal` (a value of another kind
/// never does, as in InfluxDB).
fn meets(value: &Value, condition: &FieldCondition) -> bool {
    let ordering = match (value, condition.value) {
        (Value::Boolean(b), FieldLiteral::Boolean(literal)) => b.cmp(&literal),
        (value, FieldLiteral::Number(literal)) => match value.as_f64() {
            Some(v) => v.total_cmp(&literal),
            None => return false,
        },
        _ => return false,
    };
    match condition.op {
        "=" => ordering.is_eq(),
        "!=" => ordering.is_ne(),
        "<" => ordering.is_lt(),
        "<=" => ordering.is_le(),
        ">" => ordering.is_gt(),
        _ => ordering.is_ge(),
    }
}
