//! `SELECT … INTO`: the query's answer written back as points, as InfluxDB
//! 1.x writes it — each row a point at its time, the series' `GROUP BY`
//! tags its tags, every other column a field (a null one left out, a row
//! of nulls not written), into the target measurement or, for
//! `:MEASUREMENT`, each series' own — answered as a series `result` with
//! the count of points `written`. Rows that become the same point (the
//! same tags and time, once tags not grouped by are fields) are one
//! point, the later row's fields over the earlier's, as InfluxDB keeps the
//! last point written (and counts each, as it does). Continuous queries write each period the same way
//! ([`write`]).
//!
//! The points go through the ingestor's write path as one write per
//! target (database and retention policy): logged, acknowledged once
//! queryable, all or none. A measurement created here takes the `last`
//! duplicate policy unless it has one of its own: InfluxDB keeps one
//! point per series and time, and a continuous query's period repeated
//! after a crash (or resampled) then replaces what it wrote.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Float64Array, Int64Array, StringArray, TimestampNanosecondArray,
    UInt64Array,
};
use arrow::datatypes::{Field, Schema};
use arrow::record_batch::RecordBatch;
use chingest::{ArrowTable, DuplicatePolicy, Durability, WriteOptions};

use crate::answer::{Answer, Series, Value};
use crate::error::Error;
use crate::parse::{IntoTarget, SelectInto};
use crate::plan::Context;
use crate::select;

/// Answers `SELECT … INTO`: runs the query, writes its answer.
pub(crate) async fn run(ctx: &Context<'_>, statement: &SelectInto) -> Result<Answer, Error> {
    let (database, _) = target_of(ctx, &statement.target)?;
    ctx.access.require_write(&database)?;
    let answer = select::run(ctx, &statement.select).await?;
    let written = write(ctx, &statement.target, &answer).await?;
    Ok(Answer {
        series: vec![Series::new(
            Some("result"),
            &["time", "written"],
            vec![vec![Value::Time(0), Value::Integer(written as i64)]],
        )],
        zone: None,
    })
}

/// The database and retention policy `target` names, or the request's:
/// its `db=` and `rp=` (the database's default policy for another
/// database).
pub(crate) fn target_of(ctx: &Context<'_>, target: &IntoTarget) -> Result<(String, String), Error> {
    let database = target
        .database
        .as_deref()
        .or(ctx.database)
        .filter(|db| !db.is_empty())
        .ok_or_else(|| Error::Statement("database name required".into()))?;
    let default = match ctx.database == Some(database) {
        true => ctx.retention_policy,
        false => ctx.default_retention_policy,
    };
    let retention_policy = target.retention_policy.as_deref().unwrap_or(default);
    Ok((database.to_owned(), retention_policy.to_owned()))
}

/// Writes `answer`'s rows into `target` as one write; the points written.
pub(crate) async fn write(
    ctx: &Context<'_>,
    target: &IntoTarget,
    answer: &Answer,
) -> Result<u64, Error> {
    let (database, rp) = target_of(ctx, target)?;
    if !ctx.exists(&database) {
        return Err(Error::Statement(format!("database not found: {database}")));
    }
    let known = rp == ctx.default_retention_policy
        || ctx
            .ingestor
            .retention_policies(&database)
            .iter()
            .any(|(name, _)| *name == rp);
    if !known {
        return Err(Error::Statement(format!(
            "retention policy not found: {rp}"
        )));
    }
    let mut points: BTreeMap<&str, Points<'_>> = BTreeMap::new();
    for series in &answer.series {
        let measurement = target
            .measurement
            .as_deref()
            .or(series.name.as_deref())
            .ok_or_else(|| Error::Statement("a series without a measurement".into()))?;
        points.entry(measurement).or_default().add(series);
    }
    let batches = points
        .iter()
        .map(|(measurement, points)| Ok((*measurement, points.batch(measurement)?)))
        .collect::<Result<Vec<_>, Error>>()?;
    let written: usize = points.values().map(|points| points.rows_written).sum();
    if written == 0 {
        return Ok(0);
    }
    let tables: Vec<ArrowTable<'_>> = batches
        .iter()
        .map(|(measurement, (batch, tags))| ArrowTable {
            duplicates: Some(DuplicatePolicy::Last),
            ..ArrowTable::new(measurement, batch, tags)
        })
        .collect();
    let options = WriteOptions {
        durability: Durability::Visible,
        create_database: false,
        ..WriteOptions::default()
    };
    match ctx
        .ingestor
        .write_arrow_tables(&database, &rp, &tables, &options)
        .await
    {
        // Logged: it will be queryable; it is written.
        Ok(_) | Err(chingest::Error::NotVisible(_)) => Ok(written as u64),
        Err(chingest::Error::DatabaseNotFound(db)) => {
            Err(Error::Statement(format!("database not found: {db}")))
        }
        Err(
            refused @ (chingest::Error::InvalidBatch { .. } | chingest::Error::InvalidName { .. }),
        ) => Err(Error::Statement(format!("partial write: {refused}"))),
        Err(other) => Err(Error::Request(other)),
    }
}

/// A point's series (its tags, sorted) and time.
type PointKey<'a> = (&'a [(String, String)], i64);

/// The points of one target measurement, column by column.
#[derive(Default)]
struct Points<'a> {
    /// Each point's row.
    rows: HashMap<PointKey<'a>, usize>,
    /// Rows with a field: points written, some of them onto others.
    rows_written: usize,
    times: Vec<i64>,
    /// Tag columns by key: one value per point (`""`: no such tag).
    tags: BTreeMap<&'a str, Vec<&'a str>>,
    /// Field columns by name, one value per point.
    fields: BTreeMap<&'a str, Vec<&'a Value>>,
}

const NULL: Value = Value::Null;

impl<'a> Points<'a> {
    /// Adds the rows of `series` that have a field.
    fn add(&mut self, series: &'a Series) {
        let Some(time) = series.columns.iter().position(|c| c == "time") else {
            return;
        };
        let tags = series.tags.as_deref().unwrap_or_default();
        for row in &series.values {
            let fields: Vec<(&str, &Value)> = series
                .columns
                .iter()
                .zip(row)
                .enumerate()
                .filter(|(i, (_, value))| *i != time && !value.is_null())
                .map(|(_, (column, value))| (column.as_str(), value))
                .collect();
            let Some(Value::Time(at)) = row.get(time) else {
                continue;
            };
            if fields.is_empty() {
                continue;
            }
            self.rows_written += 1;
            if let Some(&row) = self.rows.get(&(tags, *at)) {
                for (name, value) in fields {
                    let column = self.fields.entry(name).or_default();
                    column.resize(self.times.len(), &NULL);
                    column[row] = value;
                }
                continue;
            }
            let before = self.times.len();
            self.rows.insert((tags, *at), before);
            self.times.push(*at);
            for (key, value) in tags {
                let column = self.tags.entry(key.as_str()).or_default();
                column.resize(before, "");
                column.push(value.as_str());
            }
            for (name, value) in fields {
                let column = self.fields.entry(name).or_default();
                column.resize(before, &NULL);
                column.push(value);
            }
        }
    }

    /// The points as an Arrow batch (`time`, tags, fields) and its tag
    /// columns; a field whose values are of two types is refused, as
    /// InfluxDB refuses the second.
    fn batch(&self, measurement: &str) -> Result<(RecordBatch, Vec<&'a str>), Error> {
        let rows = self.times.len();
        let time = TimestampNanosecondArray::from(self.times.clone()).with_timezone("UTC");
        let mut columns: Vec<(String, ArrayRef)> = vec![("time".into(), Arc::new(time))];
        for (key, values) in &self.tags {
            let mut values = values.clone();
            values.resize(rows, "");
            columns.push(((*key).to_owned(), Arc::new(StringArray::from(values))));
        }
        for (name, values) in &self.fields {
            let mut values = values.clone();
            values.resize(rows, &NULL);
            if self.tags.contains_key(name) {
                return Err(Error::Statement(format!(
                    "measurement {measurement:?}: {name:?} would be both a tag and a field"
                )));
            }
            columns.push((
                (*name).to_owned(),
                field_column(measurement, name, &values)?,
            ));
        }
        let schema = Schema::new(
            columns
                .iter()
                .map(|(name, array)| Field::new(name, array.data_type().clone(), true))
                .collect::<Vec<_>>(),
        );
        let arrays = columns.into_iter().map(|(_, array)| array).collect();
        let batch = RecordBatch::try_new(Arc::new(schema), arrays)
            .map_err(|err| Error::Statement(format!("measurement {measurement:?}: {err}")))?;
        Ok((batch, self.tags.keys().copied().collect()))
    }
}

/// One field's values as a column of their type.
fn field_column(measurement: &str, name: &str, values: &[&Value]) -> Result<ArrayRef, Error> {
    let kind = |value: &Value| match value {
        Value::Float(_) => "float",
        Value::Integer(_) | Value::Time(_) => "integer",
        Value::Unsigned(_) => "unsigned",
        Value::String(_) => "string",
        Value::Boolean(_) => "boolean",
        Value::Null => "null",
    };
    let first = values
        .iter()
        .find(|v| !v.is_null())
        .map_or("null", |v| kind(v));
    if let Some(other) = values.iter().find(|v| !v.is_null() && kind(v) != first) {
        return Err(Error::Statement(format!(
            "partial write: field type conflict: input field \"{name}\" on measurement \
             \"{measurement}\" is type {}, already exists as type {first}",
            kind(other)
        )));
    }
    Ok(match first {
        "float" => Arc::new(Float64Array::from_iter(values.iter().map(|v| match v {
            Value::Float(f) => Some(*f),
            _ => None,
        }))),
        "integer" => Arc::new(Int64Array::from_iter(values.iter().map(|v| match v {
            Value::Integer(n) | Value::Time(n) => Some(*n),
            _ => None,
        }))),
        "unsigned" => Arc::new(UInt64Array::from_iter(values.iter().map(|v| match v {
            Value::Unsigned(n) => Some(*n),
            _ => None,
        }))),
        "boolean" => Arc::new(BooleanArray::from_iter(values.iter().map(|v| match v {
            Value::Boolean(b) => Some(*b),
            _ => None,
        }))),
        _ => Arc::new(StringArray::from_iter(values.iter().map(|v| match v {
            Value::String(s) => Some(s.as_str()),
            _ => None,
        }))),
    })
}

#[cfg(test)]
mod tests {
    use arrow::array::Array as _;
    use arrow::datatypes::{DataType, TimeUnit};

    use super::*;

    fn series(
        name: &str,
        tags: &[(&str, &str)],
        columns: &[&str],
        rows: Vec<Vec<Value>>,
    ) -> Series {
        Series {
            name: Some(name.into()),
            tags: (!tags.is_empty()).then(|| {
                tags.iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect()
            }),
            columns: columns.iter().map(|c| (*c).to_owned()).collect(),
            values: rows,
        }
    }

    #[test]
    fn rows_become_points_tags_from_the_group_and_nulls_left_out() {
        let a = series(
            "cpu",
            &[("host", "a")],
            &["time", "mean", "s"],
            vec![
                vec![Value::Time(1), Value::Float(0.5), Value::Null],
                vec![Value::Time(2), Value::Null, Value::Null],
                vec![Value::Time(3), Value::Null, Value::String("x".into())],
            ],
        );
        let b = series(
            "cpu",
            &[],
            &["time", "mean"],
            vec![
                vec![Value::Time(4), Value::Float(1.5)],
                vec![Value::Time(4), Value::Float(2.5)],
            ],
        );
        let mut points = Points::default();
        points.add(&a);
        points.add(&b);
        let (batch, tags) = points.batch("cpu").unwrap();
        assert_eq!(tags, vec!["host"]);
        assert_eq!(batch.num_rows(), 3, "a row of nulls is no point");
        assert_eq!(points.rows_written, 4, "each row with a field counts");
        let schema = batch.schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["time", "host", "mean", "s"]);
        let host = batch
            .column(1)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert_eq!(
            host.iter().collect::<Vec<_>>(),
            [Some("a"), Some("a"), Some("")]
        );
        assert_eq!(batch.column(3).null_count(), 2);
        // The later of two rows that are one point wins.
        let mean = batch
            .column(2)
            .as_any()
            .downcast_ref::<Float64Array>()
            .unwrap();
        assert_eq!(
            mean.iter().collect::<Vec<_>>(),
            [Some(0.5), None, Some(2.5)]
        );
        assert_eq!(*batch.column(2).data_type(), DataType::Float64);
        assert_eq!(
            *batch.column(0).data_type(),
            DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))
        );
    }

    #[test]
    fn a_field_of_two_types_is_refused() {
        let mixed = series(
            "m",
            &[],
            &["time", "v"],
            vec![
                vec![Value::Time(1), Value::Float(0.5)],
                vec![Value::Time(2), Value::Integer(1)],
            ],
        );
        let mut points = Points::default();
        points.add(&mixed);
        let err = points.batch("m").unwrap_err().to_string();
        assert!(
            err.contains("field type conflict") && err.contains("\"v\""),
            "{err}"
        );
    }
}
