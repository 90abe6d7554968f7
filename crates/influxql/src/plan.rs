//! What every statement's plan shares: the [`Context`] a request gives
//! (the ingestor, what the caller may do, the request's database and
//! retention policy, what `now()` means), the measurements a statement
//! reads ([`Target`]), the SQL that reads a measurement's facts narrowed to
//! its series, and the engine's answer read back as answer values.
//!
//! The planner works over chingest's public read API only: SQL over the
//! storage layout on the read-only connections (`query_translated`), the
//! catalog (`measurements`), and the last-value cache (`last_values`),
//! whose series are matched in memory here ([`TagMatcher`]).

use arrow::array::{Array, AsArray as _};
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use chingest::layout::names::TableNames;
use chingest::{
    Access, DuplicatePolicy, Ingestor, MeasurementSchema, RollupView, TableAddress, TagPredicate,
};

use crate::answer::Value;
use crate::error::Error;
use crate::parse;

/// What a statement's answer needs besides the statement.
pub struct Context<'a> {
    /// What the statements read and change.
    pub ingestor: &'a Ingestor,
    /// What the caller may do.
    pub access: &'a Access,
    /// The request's `db=`, as given.
    pub database: Option<&'a str>,
    /// The retention policy of sources that name none (the request's `rp=`
    /// or the default).
    pub retention_policy: &'a str,
    /// The default retention policy, which every database has.
    pub default_retention_policy: &'a str,
    /// The duplicate policy of tables that were given none
    /// (`SHOW DUPLICATE POLICIES` lists it).
    pub default_duplicate_policy: DuplicatePolicy,
    /// What `now()` means, ns since the epoch.
    pub now: i64,
}

/// One measurement a statement reads.
pub(crate) struct Target {
    pub(crate) database: String,
    pub(crate) retention_policy: String,
    pub(crate) schema: MeasurementSchema,
    pub(crate) names: TableNames,
}

impl Target {
    /// Its table, as the ingestor's reads name it.
    pub(crate) fn table(&self) -> TableAddress<'_> {
        (&self.database, &self.retention_policy, &self.schema.name)
    }
}

impl Context<'_> {
    /// The database a statement reads: its own (`ON db`, `db.rp.m`) or the
    /// request's; it must exist and the caller may read it.
    pub(crate) fn database(&self, named: Option<&str>) -> Result<String, Error> {
        let db = self.readable_database(named)?;
        if !self.exists(&db) {
            return Err(format!("database not found: {db}").into());
        }
        Ok(db)
    }

    /// The database a statement names, or the request's, which the caller
    /// may read (whether or not it exists).
    pub(crate) fn readable_database(&self, named: Option<&str>) -> Result<String, Error> {
        let db = named
            .or(self.database)
            .filter(|db| !db.is_empty())
            .ok_or_else(|| "database name required".to_owned())?;
        self.access.require_read_of(db)?;
        Ok(db.to_owned())
    }

    pub(crate) fn exists(&self, db: &str) -> bool {
        self.ingestor.databases().iter().any(|d| d == db)
    }

    /// The measurements `sources` name that exist, sorted by name, each
    /// once.
    pub(crate) fn targets(&self, sources: &[parse::Source]) -> Result<Vec<Target>, Error> {
        named_targets(sources, |source| {
            let database = self.database(source.database.as_deref())?;
            let rp = source
                .retention_policy
                .clone()
                .unwrap_or_else(|| self.retention_policy.to_owned());
            let known = rp == self.default_retention_policy
                || self
                    .ingestor
                    .retention_policies(&database)
                    .iter()
                    .any(|(name, _)| *name == rp);
            if !known {
                return Err(format!("retention policy not found: {rp}").into());
            }
            let schemas = match &source.measurement {
                parse::Name::Exact(name) => self
                    .ingestor
                    .measurement((&database, &rp, name))
                    .into_iter()
                    .collect(),
                parse::Name::Regex(_) => self.ingestor.measurements(&database, &rp),
            };
            Ok((database, rp, schemas))
        })
    }
}

/// The measurements `sources` name, sorted by name, each once; `catalog`
/// gives a source's database, retention policy and the measurements it
/// may name (the one of its exact name, or every one for a `/regex/`).
pub(crate) fn named_targets(
    sources: &[parse::Source],
    mut catalog: impl FnMut(&parse::Source) -> Result<SourceCatalog, Error>,
) -> Result<Vec<Target>, Error> {
    let mut targets: Vec<Target> = Vec::new();
    for source in sources {
        let (database, rp, schemas) = catalog(source)?;
        let pattern = match &source.measurement {
            parse::Name::Regex(re) => Some(compile(re)?),
            parse::Name::Exact(_) => None,
        };
        for schema in schemas {
            let wanted = pattern.as_ref().is_none_or(|p| p.is_match(&schema.name));
            let known = targets.iter().any(|t| {
                t.database == database && t.retention_policy == rp && t.schema.name == schema.name
            });
            if wanted && !known {
                targets.push(Target {
                    names: TableNames::new(&database, &rp, &schema.name),
                    database: database.clone(),
                    retention_policy: rp.clone(),
                    schema,
                });
            }
        }
    }
    targets.sort_by(|a, b| a.schema.name.cmp(&b.schema.name));
    Ok(targets)
}

/// A source's database, retention policy, and the measurements it may
/// name.
pub(crate) type SourceCatalog = (String, String, Vec<MeasurementSchema>);

/// `OFFSET offset LIMIT limit` (`None`: no limit) of `items`: series, or
/// one series' rows.
pub(crate) fn page<T>(items: Vec<T>, offset: u64, limit: Option<u64>) -> Vec<T> {
    let count = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
    let take = limit.map_or(usize::MAX, count);
    items.into_iter().skip(count(offset)).take(take).collect()
}

/// A `/regex/` as InfluxDB reads it (Go's RE2 syntax; Rust's regex crate
/// takes the same).
pub(crate) fn compile(pattern: &str) -> Result<regex::Regex, Error> {
    regex::RegexBuilder::new(pattern)
        .size_limit(1 << 20)
        .build()
        .map_err(|err| Error::Statement(format!("invalid regex /{pattern}/: {err}")))
}

/// A [`TagPredicate`] with its regexes compiled, to test series in
/// memory (the last-value cache's). A missing tag reads as `""`, as in SQL
/// over the series table.
pub(crate) enum TagMatcher {
    Any,
    /// `key = value` (`!=` when not wanted).
    Equals(TagKey, String, bool),
    /// `key =~ /re/` (`!~` when not wanted).
    Matches(TagKey, regex::Regex, bool),
    And(Vec<TagMatcher>),
    Or(Vec<TagMatcher>),
}

/// A tag key to look up in series' sorted tags, and where it was found in
/// the last series: a measurement's series mostly have the same keys, so
/// the next one has it at the same place (one comparison instead of a
/// binary search's several).
pub(crate) struct TagKey {
    key: String,
    at: std::cell::Cell<usize>,
}

impl TagKey {
    fn new(key: &str) -> TagKey {
        TagKey {
            key: key.to_owned(),
            at: std::cell::Cell::new(0),
        }
    }

    /// The key's value in `tags` (sorted by key); `""` if absent.
    fn value<'t, T: AsRef<str>>(&self, tags: &'t [(T, T)]) -> &'t str {
        if let Some((k, v)) = tags.get(self.at.get()) {
            if k.as_ref() == self.key {
                return v.as_ref();
            }
        }
        match tags.binary_search_by(|(k, _)| k.as_ref().cmp(self.key.as_str())) {
            Ok(i) => {
                self.at.set(i);
                tags[i].1.as_ref()
            }
            Err(_) => "",
        }
    }
}

impl TagMatcher {
    pub(crate) fn new(predicate: &TagPredicate) -> Result<TagMatcher, Error> {
        let all = |parts: &[TagPredicate]| {
            parts
                .iter()
                .map(TagMatcher::new)
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(match predicate {
            TagPredicate::Any => TagMatcher::Any,
            TagPredicate::Equals(k, v) => TagMatcher::Equals(TagKey::new(k), v.clone(), true),
            TagPredicate::NotEquals(k, v) => TagMatcher::Equals(TagKey::new(k), v.clone(), false),
            TagPredicate::Matches(k, re) => TagMatcher::Matches(TagKey::new(k), compile(re)?, true),
            TagPredicate::NotMatches(k, re) => {
                TagMatcher::Matches(TagKey::new(k), compile(re)?, false)
            }
            TagPredicate::And(parts) => TagMatcher::And(all(parts)?),
            TagPredicate::Or(parts) => TagMatcher::Or(all(parts)?),
        })
    }

    /// Whether a series' tags, sorted by key, match.
    pub(crate) fn matches<T: AsRef<str>>(&self, tags: &[(T, T)]) -> bool {
        match self {
            TagMatcher::Any => true,
            TagMatcher::Equals(k, v, wanted) => (k.value(tags) == v) == *wanted,
            TagMatcher::Matches(k, re, wanted) => re.is_match(k.value(tags)) == *wanted,
            TagMatcher::And(all) => all.iter().all(|m| m.matches(tags)),
            TagMatcher::Or(any) => any.iter().any(|m| m.matches(tags)),
        }
    }
}

/// Cell `row` of an engine result column as an answer value.
fn cell(column: &dyn Array, row: usize) -> Value {
    if column.is_null(row) || *column.data_type() == DataType::Null {
        return Value::Null;
    }
    match column.data_type() {
        DataType::Float64 => Value::Float(
            column
                .as_primitive::<arrow::datatypes::Float64Type>()
                .value(row),
        ),
        DataType::Float32 => Value::Float(f64::from(
            column
                .as_primitive::<arrow::datatypes::Float32Type>()
                .value(row),
        )),
        DataType::Int64 => Value::Integer(
            column
                .as_primitive::<arrow::datatypes::Int64Type>()
                .value(row),
        ),
        DataType::Int32 => Value::Integer(i64::from(
            column
                .as_primitive::<arrow::datatypes::Int32Type>()
                .value(row),
        )),
        DataType::UInt64 => Value::Unsigned(
            column
                .as_primitive::<arrow::datatypes::UInt64Type>()
                .value(row),
        ),
        DataType::UInt32 => Value::Unsigned(u64::from(
            column
                .as_primitive::<arrow::datatypes::UInt32Type>()
                .value(row),
        )),
        DataType::UInt8 => Value::Unsigned(u64::from(
            column
                .as_primitive::<arrow::datatypes::UInt8Type>()
                .value(row),
        )),
        DataType::Boolean => Value::Boolean(column.as_boolean().value(row)),
        DataType::Timestamp(arrow::datatypes::TimeUnit::Nanosecond, _) => Value::Time(
            column
                .as_primitive::<arrow::datatypes::TimestampNanosecondType>()
                .value(row),
        ),
        DataType::Utf8 => Value::String(column.as_string::<i32>().value(row).to_owned()),
        DataType::LargeUtf8 => Value::String(column.as_string::<i64>().value(row).to_owned()),
        DataType::Binary => Value::String(
            String::from_utf8_lossy(column.as_binary::<i32>().value(row)).into_owned(),
        ),
        _ => Value::String(
            arrow::util::display::array_value_to_string(column, row).unwrap_or_default(),
        ),
    }
}

/// Every row of `batches` as answer values, column by column.
pub(crate) fn rows(batches: &[RecordBatch]) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    for batch in batches {
        for row in 0..batch.num_rows() {
            rows.push(
                batch
                    .columns()
                    .iter()
                    .map(|column| cell(column.as_ref(), row))
                    .collect(),
            );
        }
    }
    rows
}

/// A string cell's text (`""` for anything else).
pub(crate) fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        _ => String::new(),
    }
}

/// The facts of `target` over `[start, end)` (ns) as `f`: its table or,
/// where a downsampled database's rows are gone, its rollups' buckets as
/// rows ([`RollupView::rows_sql`]).
pub(crate) fn facts_as_f(
    target: &Target,
    rollups: Option<&RollupView>,
    (start, end): (Option<i64>, Option<i64>),
) -> String {
    let table = &target.names.storage_table;
    let (start, end) = (start.unwrap_or(i64::MIN), end.unwrap_or(i64::MAX));
    let facts = rollups
        .and_then(|view| view.rows_sql(table, &target.schema.fields, start, end))
        .unwrap_or_else(|| table.clone());
    format!("{facts} AS f")
}

/// The `FROM` of a statement over one measurement's facts (`facts`: its
/// table or a rollup's, as `f`): joined to the series table (`s.tags`)
/// when tags are read, narrowed to the series `tags` selects — by their
/// ids when `ids` has them (from the last-value cache), else by a subquery
/// on the series table; and the matching condition to put in its `WHERE`.
pub(crate) fn fact_source(
    facts: &str,
    target: &Target,
    tags: &TagPredicate,
    ids: Option<&[u64]>,
    join: bool,
) -> (String, Option<String>) {
    let series = format!(
        "SELECT series_id, tags FROM {} FINAL WHERE measurement = {} AND ({})",
        target.names.series_table,
        chingest::layout::names::quote_literal(&target.schema.name),
        tags.sql()
    );
    if join {
        return (
            format!("{facts} INNER JOIN ({series}) AS s USING series_id"),
            None,
        );
    }
    let condition = match ids {
        Some(ids) => {
            let ids: Vec<String> = ids.iter().map(u64::to_string).collect();
            Some(format!("f.series_id IN ({})", ids.join(", ")))
        }
        None if *tags != TagPredicate::Any => {
            Some(format!("f.series_id IN (SELECT series_id FROM ({series}))"))
        }
        None => None,
    };
    (facts.to_owned(), condition)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_matchers_read_missing_tags_as_empty_and_follow_each_series() {
        let tags = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let a = tags(&[("dc", "eu"), ("host", "a")]);
        let b = tags(&[("host", "b")]);
        let predicate = TagPredicate::Or(vec![
            TagPredicate::Equals("host".into(), "a".into()),
            TagPredicate::And(vec![
                TagPredicate::Matches("host".into(), "^b$".into()),
                TagPredicate::Equals("dc".into(), "".into()),
            ]),
        ]);
        let matcher = TagMatcher::new(&predicate).unwrap();
        // The key is at another place in each series: found all the same.
        for _ in 0..2 {
            assert!(matcher.matches(&a));
            assert!(matcher.matches(&b));
            assert!(!matcher.matches(&tags(&[("host", "c")])));
            assert!(!matcher.matches::<&str>(&[]));
        }
        let not = TagMatcher::new(&TagPredicate::NotMatches("host".into(), "a".into())).unwrap();
        assert!(!not.matches(&a) && not.matches(&b) && not.matches::<&str>(&[]));
    }
}
