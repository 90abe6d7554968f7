//! Deletes and corrections of stored points: which points a request means
//! ([`PointFilter`]), and the statements that remove or change them in
//! place.
//!
//! Both run as the engine's lightweight updates: the table gets a small
//! patch part (for a delete, of its row mask) that every query applies at
//! once, and merges fold it into the data later. On 10 M rows a delete or
//! an update of one series' hour took 0.015 s, where a delete as a classic
//! mutation rewrote parts for 1.8–4 s (docs/benchmarks.md §10).
//!
//! Rows written before the request are all affected: the ingestor first
//! inserts everything it has logged. Rows written while it runs may or may
//! not be.

use std::future::Future;
use std::sync::Arc;

use crate::catalog::Database;
use crate::downsample::Downsampler;
use crate::engine::{self, StatementKind};
use crate::error::{Error, Result};
use crate::layout::names::{quote_ident, quote_literal, TableNames};
use crate::layout::rollup::{Aggregate as Kept, Rollup};
use crate::layout::schema::FieldType;
use crate::write::Writer;

/// A condition on a series' tags, as InfluxQL's `WHERE` and InfluxDB's
/// delete predicates state them. A tag a series lacks reads as the empty
/// string (so `host != 'a'` matches series without `host`, as in InfluxDB).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TagPredicate {
    /// Every series.
    Any,
    /// `key = value`.
    Equals(String, String),
    /// `key != value`.
    NotEquals(String, String),
    /// `key =~ /pattern/` (RE2 syntax, unanchored like InfluxQL's).
    Matches(String, String),
    /// `key !~ /pattern/`.
    NotMatches(String, String),
    /// All of them.
    And(Vec<TagPredicate>),
    /// Any of them.
    Or(Vec<TagPredicate>),
}

impl TagPredicate {
    /// The condition over the series table's `tags` map, in SQL.
    pub fn sql(&self) -> String {
        let tag = |key: &str| format!("tags[{}]", quote_literal(key));
        match self {
            TagPredicate::Any => "1".to_owned(),
            TagPredicate::Equals(k, v) => format!("{} = {}", tag(k), quote_literal(v)),
            TagPredicate::NotEquals(k, v) => format!("{} != {}", tag(k), quote_literal(v)),
            TagPredicate::Matches(k, p) => format!("match({}, {})", tag(k), quote_literal(p)),
            TagPredicate::NotMatches(k, p) => {
                format!("NOT match({}, {})", tag(k), quote_literal(p))
            }
            TagPredicate::And(all) => join(all, " AND ", "1"),
            TagPredicate::Or(any) => join(any, " OR ", "0"),
        }
    }
}

fn join(parts: &[TagPredicate], separator: &str, empty: &str) -> String {
    if parts.is_empty() {
        return empty.to_owned();
    }
    let parts: Vec<String> = parts.iter().map(|p| format!("({})", p.sql())).collect();
    parts.join(separator)
}

/// Which stored points a delete or an update touches: every condition
/// given must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PointFilter {
    /// One retention policy's tables; `None`: every retention policy.
    pub retention_policy: Option<String>,
    /// One measurement; `None`: every measurement.
    pub measurement: Option<String>,
    /// Which series.
    pub tags: TagPredicate,
    /// Points at or after this time (ns since the epoch).
    pub start: Option<i64>,
    /// Points before this time (ns since the epoch).
    pub stop: Option<i64>,
}

impl PointFilter {
    /// Every point of every measurement.
    pub fn all() -> PointFilter {
        PointFilter {
            retention_policy: None,
            measurement: None,
            tags: TagPredicate::Any,
            start: None,
            stop: None,
        }
    }

    /// Whether the table of (`rp`, `measurement`) is in scope.
    pub(crate) fn covers(&self, rp: &str, measurement: &str) -> bool {
        self.retention_policy.as_deref().is_none_or(|r| r == rp)
            && self.measurement.as_deref().is_none_or(|m| m == measurement)
    }

    /// The `WHERE` condition on one fact table of `measurement`.
    fn fact_condition(&self, names: &TableNames, measurement: &str) -> String {
        let mut conditions = Vec::new();
        if self.tags != TagPredicate::Any {
            conditions.push(format!(
                "series_id IN (SELECT series_id FROM {} WHERE {})",
                names.series_table,
                self.series_condition(Some(measurement))
            ));
        }
        if let Some(start) = self.start {
            conditions.push(format!("time >= fromUnixTimestamp64Nano({start})"));
        }
        if let Some(stop) = self.stop {
            conditions.push(format!("time < fromUnixTimestamp64Nano({stop})"));
        }
        if conditions.is_empty() {
            "1".to_owned()
        } else {
            conditions.join(" AND ")
        }
    }

    /// The condition on the series table's rows: of `measurement`, or of
    /// the filter's measurement if it names one.
    fn series_condition(&self, measurement: Option<&str>) -> String {
        match measurement.or(self.measurement.as_deref()) {
            Some(m) => format!(
                "measurement = {} AND ({})",
                quote_literal(m),
                self.tags.sql()
            ),
            None => self.tags.sql(),
        }
    }
}

/// A new value for a field, typed like the field.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldValue {
    /// For a float field.
    Float(f64),
    /// For an integer field.
    Integer(i64),
    /// For an unsigned field.
    UInteger(u64),
    /// For a string field.
    String(String),
    /// For a boolean field.
    Boolean(bool),
}

impl FieldValue {
    /// The value as an SQL literal of `ty`; a value of another type is an
    /// error naming both (an integer is accepted for a float field).
    fn literal(&self, field: &str, ty: FieldType) -> Result<String> {
        Ok(match (self, ty) {
            (FieldValue::Float(v), FieldType::Float) if v.is_finite() => format!("{v:?}"),
            (FieldValue::Integer(v), FieldType::Float) => format!("{v}.0"),
            (FieldValue::Integer(v), FieldType::Integer) => v.to_string(),
            (FieldValue::UInteger(v), FieldType::UInteger) => v.to_string(),
            (FieldValue::Integer(v), FieldType::UInteger) if *v >= 0 => v.to_string(),
            (FieldValue::String(v), FieldType::String) => quote_literal(v),
            (FieldValue::Boolean(v), FieldType::Boolean) => v.to_string(),
            (value, ty) => {
                return Err(Error::InvalidEdit(format!(
                    "field {field:?} is {ty}; {value:?} does not fit it"
                )))
            }
        })
    }
}

/// `DELETE` of the points of one fact table that `filter` matches.
fn delete_sql(names: &TableNames, measurement: &str, filter: &PointFilter) -> String {
    format!(
        "DELETE FROM {} WHERE {} SETTINGS lightweight_delete_mode = 'lightweight_update_force'",
        names.storage_table,
        filter.fact_condition(names, measurement)
    )
}

/// `DELETE` of the series rows that `filter` matches.
fn delete_series_sql(names: &TableNames, filter: &PointFilter) -> String {
    format!(
        "DELETE FROM {} WHERE {} SETTINGS lightweight_delete_mode = 'lightweight_update_force'",
        names.series_table,
        filter.series_condition(None)
    )
}

/// `UPDATE` of one field of the points of one fact table that `filter`
/// matches. `ty` is the field's type in the table.
fn update_sql(
    names: &TableNames,
    measurement: &str,
    filter: &PointFilter,
    field: &str,
    ty: FieldType,
    value: &FieldValue,
) -> Result<String> {
    Ok(format!(
        "UPDATE {} SET {} = {} WHERE {}",
        names.storage_table,
        quote_ident(field),
        value.literal(field, ty)?,
        filter.fact_condition(names, measurement)
    ))
}

/// An edit as it changes rollup buckets whose rows are gone.
#[derive(Debug, Clone, Copy)]
pub(crate) enum RollupEdit<'a> {
    /// Deletes them.
    Delete,
    /// Sets `field` to `value` in them: every value the bucket held
    /// becomes `value` (its count stays).
    Update(&'a str, &'a FieldValue),
}

/// The statement applying `edit` to the buckets of `rollup` (a level of
/// the fact table `names` of `measurement`, keeping `kept` fields) that
/// `filter` matches, a bucket judged by its series and its start, before
/// `before` (ns); `None` when none can match (or the field is not kept).
pub(crate) fn rollup_edit_sql(
    rollup: &str,
    names: &TableNames,
    measurement: &str,
    filter: &PointFilter,
    before: i64,
    kept: &[(String, FieldType)],
    edit: RollupEdit<'_>,
) -> Result<Option<String>> {
    let stop = filter.stop.map_or(before, |stop| stop.min(before));
    if filter.start.is_some_and(|start| start >= stop) || before == i64::MIN {
        return Ok(None);
    }
    let bounded = PointFilter {
        stop: Some(stop),
        ..filter.clone()
    };
    let condition = bounded.fact_condition(names, measurement);
    Ok(match edit {
        RollupEdit::Delete => Some(format!("DELETE FROM {rollup} WHERE {condition}")),
        RollupEdit::Update(field, value) => {
            let Some((_, ty)) = kept.iter().find(|(f, _)| f == field) else {
                return Ok(None);
            };
            let literal = value.literal(field, *ty)?;
            let column = |k: Kept| Rollup::column(field, k);
            let mut sets = vec![
                format!("{} = {literal}", column(Kept::First)),
                format!("{} = {literal}", column(Kept::Last)),
            ];
            if Kept::Sum.applies_to(*ty) {
                sets.push(format!(
                    "{} = {} * {literal}",
                    column(Kept::Sum),
                    column(Kept::Count)
                ));
                sets.push(format!("{} = {literal}", column(Kept::Min)));
                sets.push(format!("{} = {literal}", column(Kept::Max)));
            }
            Some(format!(
                "ALTER TABLE {rollup} UPDATE {} WHERE {condition} AND {} > 0 \
                 SETTINGS mutations_sync = 1",
                sets.join(", "),
                column(Kept::Count)
            ))
        }
    })
}

/// Runs `edit`, of the points of `db` that `filter` matches, with the
/// rollups of a downsampled database kept equal to the rows: passes are
/// held off until it is done, the tables it may change are marked, from
/// its start on, for the next pass to rebuild, and `on_rollups` is
/// applied to the buckets whose rows are gone (in the cluster mode to
/// every bucket, the marks recorded after the edit). Marks are recorded
/// after an edit that failed part way too: a rebuild from the rows is
/// right either way.
pub(crate) async fn keeping_rollups<T>(
    downsampler: &Downsampler,
    db: &str,
    filter: &PointFilter,
    on_rollups: RollupEdit<'_>,
    edit: impl Future<Output = Result<T>>,
) -> Result<T> {
    if !downsampler.is_downsampled_anywhere(db) {
        return edit.await;
    }
    let range = (
        filter.start.unwrap_or(i64::MIN),
        filter.stop.unwrap_or(i64::MAX),
    );
    let _passes_held = downsampler.hold().await;
    let covers = |rp: &str, measurement: &str| filter.covers(rp, measurement);
    let statement = |rollup: &str, names: &TableNames, measurement: &str, before, kept: &_| {
        rollup_edit_sql(rollup, names, measurement, filter, before, kept, on_rollups)
    };
    // Before the edit: its tag condition reads the series table, which
    // dropping series empties.
    let tables = downsampler.mark(db, covers, range, &statement).await?;
    let edited = edit.await;
    downsampler.marked(&tables, range).await?;
    edited
}

/// Deletes the points of `db` that `filter` matches, in every table in
/// its scope. Queries stop seeing them at once; the engine removes them
/// from disk as it merges. Returns how many tables it ran on.
pub(crate) async fn delete(writer: &Writer, db: &str, filter: &PointFilter) -> Result<usize> {
    let database = edit_target(writer, db).await?;
    let deleted = delete_points(writer, &database, filter).await;
    forget_last_values(writer, &database, filter);
    deleted
}

/// Drops the series `filter` matches (InfluxQL's `DROP SERIES`, and
/// `DROP MEASUREMENT` for all of one measurement's): their points in
/// every table in scope, and their rows in the series table. Writing
/// one of them again creates it anew. The filter takes no time range.
pub(crate) async fn drop_series(writer: &Writer, db: &str, filter: &PointFilter) -> Result<usize> {
    if filter.start.is_some() || filter.stop.is_some() {
        return Err(Error::InvalidEdit(
            "dropping series takes no time range (delete points instead)".into(),
        ));
    }
    let database = edit_target(writer, db).await?;
    let dropped = drop_matching(writer, &database, filter).await;
    forget_last_values(writer, &database, filter);
    dropped
}

/// Sets `field` to `value` in the points of `db` that `filter` matches
/// (a correction). The filter must name the measurement; the value must
/// fit the field's type. Queries see the new value at once. Returns how
/// many tables it ran on.
pub(crate) async fn update(
    writer: &Writer,
    db: &str,
    filter: &PointFilter,
    field: &str,
    value: &FieldValue,
) -> Result<usize> {
    let Some(measurement) = filter.measurement.as_deref() else {
        return Err(Error::InvalidEdit("an update names its measurement".into()));
    };
    let database = edit_target(writer, db).await?;
    let mut statements = Vec::new();
    for ((rp, m), table) in database.tables() {
        if !filter.covers(&rp, &m) {
            continue;
        }
        let schema = table.schema();
        if let Some((_, ty)) = schema.field(field) {
            statements.push(update_sql(&schema.names, &m, filter, field, ty, value)?);
        }
    }
    if statements.is_empty() {
        return Err(Error::InvalidEdit(format!(
            "measurement {measurement:?} has no field {field:?}"
        )));
    }
    let tables = statements.len();
    let updated = writer
        .engine()
        .execute_on_storage(statements, StatementKind::Change, Vec::new())
        .await;
    forget_last_values(writer, &database, filter);
    updated.map(|()| tables)
}

/// The database an edit applies to, once every row logged so far is in
/// the engine (so the edit sees it).
async fn edit_target(writer: &Writer, db: &str) -> Result<Arc<Database>> {
    let database = writer
        .catalog
        .database(db)
        .ok_or_else(|| Error::DatabaseNotFound(db.to_owned()))?;
    writer.flush_all().await?;
    Ok(database)
}

/// Deletes the points and the series rows of the series `filter` matches;
/// returns how many tables it ran on.
async fn drop_matching(
    writer: &Writer,
    database: &Database,
    filter: &PointFilter,
) -> Result<usize> {
    let tables = delete_points(writer, database, filter).await?;
    let names = TableNames::new(&database.name, "", "");
    let ids_sql = format!(
        "SELECT series_id FROM {} WHERE {}",
        names.series_table,
        filter.series_condition(None)
    );
    let delete = delete_series_sql(&names, filter);
    let ids = writer
        .engine()
        .run(move |conn| engine::query_rows(conn, &ids_sql))
        .await?;
    writer
        .engine()
        .execute_on_storage(vec![delete], StatementKind::Change, Vec::new())
        .await?;
    let ids = ids
        .iter()
        .filter_map(|row| row.first()?.parse::<u64>().ok());
    database.series.forget(ids);
    Ok(tables)
}

/// Empties the last values of the tables `filter` covers, and queues their
/// rebuild from the engine: after an edit (applied or not: it may have
/// changed some tables), until rebuilt, they answer "not cached".
fn forget_last_values(writer: &Writer, database: &Database, filter: &PointFilter) {
    for ((rp, measurement), table) in database.tables() {
        if filter.covers(&rp, &measurement) {
            writer.last_values.invalidate(&table);
        }
    }
}

/// Deletes the points `filter` matches in every table of `database` in its
/// scope; returns how many tables that was.
async fn delete_points(
    writer: &Writer,
    database: &Database,
    filter: &PointFilter,
) -> Result<usize> {
    let statements: Vec<String> = database
        .tables()
        .into_iter()
        .filter(|((rp, m), _)| filter.covers(rp, m))
        .map(|((_, m), table)| delete_sql(&table.schema().names, &m, filter))
        .collect();
    let tables = statements.len();
    writer
        .engine()
        .execute_on_storage(statements, StatementKind::Change, Vec::new())
        .await?;
    Ok(tables)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> TableNames {
        TableNames::new("db", "autogen", "cpu")
    }

    #[test]
    fn a_filter_without_conditions_matches_every_row() {
        let sql = delete_sql(&names(), "cpu", &PointFilter::all());
        assert_eq!(
            sql,
            "DELETE FROM `db`.`cpu.autogen` WHERE 1 \
             SETTINGS lightweight_delete_mode = 'lightweight_update_force'"
        );
    }

    #[test]
    fn tags_and_times_become_conditions_with_quoted_values() {
        let filter = PointFilter {
            tags: TagPredicate::And(vec![
                TagPredicate::Equals("host".into(), "a'b".into()),
                TagPredicate::Or(vec![
                    TagPredicate::Matches("dc".into(), "^eu".into()),
                    TagPredicate::NotEquals("rack".into(), String::new()),
                ]),
            ]),
            start: Some(10),
            stop: Some(20),
            ..PointFilter::all()
        };
        let sql = update_sql(
            &names(),
            "cpu",
            &filter,
            "usage",
            FieldType::Float,
            &FieldValue::Integer(2),
        )
        .unwrap();
        assert_eq!(
            sql,
            "UPDATE `db`.`cpu.autogen` SET `usage` = 2.0 WHERE series_id IN \
             (SELECT series_id FROM `db`.`_series` WHERE measurement = 'cpu' AND \
             ((tags['host'] = 'a\\'b') AND ((match(tags['dc'], '^eu')) OR (tags['rack'] != '')))) \
             AND time >= fromUnixTimestamp64Nano(10) AND time < fromUnixTimestamp64Nano(20)"
        );
    }

    #[test]
    fn values_must_fit_the_field() {
        let literal = |v: FieldValue, ty| v.literal("f", ty);
        assert_eq!(
            literal(FieldValue::Float(1.5), FieldType::Float).unwrap(),
            "1.5"
        );
        assert_eq!(
            literal(FieldValue::Integer(-3), FieldType::Integer).unwrap(),
            "-3"
        );
        assert_eq!(
            literal(FieldValue::String("x'".into()), FieldType::String).unwrap(),
            "'x\\''"
        );
        assert_eq!(
            literal(FieldValue::Boolean(true), FieldType::Boolean).unwrap(),
            "true"
        );
        for (value, ty) in [
            (FieldValue::Float(1.5), FieldType::Integer),
            (FieldValue::Float(f64::NAN), FieldType::Float),
            (FieldValue::Integer(-1), FieldType::UInteger),
            (FieldValue::String("1".into()), FieldType::Integer),
            (FieldValue::Boolean(true), FieldType::String),
        ] {
            let err = literal(value.clone(), ty).unwrap_err();
            assert!(matches!(err, Error::InvalidEdit(_)), "{value:?} into {ty}");
        }
    }

    #[test]
    fn scope_is_by_policy_and_measurement() {
        let filter = PointFilter {
            retention_policy: Some("autogen".into()),
            measurement: Some("cpu".into()),
            ..PointFilter::all()
        };
        assert!(filter.covers("autogen", "cpu"));
        assert!(!filter.covers("weekly", "cpu"));
        assert!(!filter.covers("autogen", "mem"));
        assert!(PointFilter::all().covers("any", "thing"));
    }
}
