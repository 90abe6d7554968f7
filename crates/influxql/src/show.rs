//! `SHOW MEASUREMENTS`, `SHOW TAG KEYS`, `SHOW TAG VALUES`, `SHOW SERIES`
//! (from the database's series table) and `SHOW FIELD KEYS` (from the
//! ingestor's catalog, no query). `SHOW TAG KEYS` and `SHOW TAG VALUES` of
//! given keys — what Grafana's query editor, ad-hoc filters and variables
//! ask — come from the ingestor's index of tags when it holds every table
//! read.

use std::collections::{BTreeMap, BTreeSet};

use arrow::array::{Array as _, AsArray as _};
use chingest::layout::names::quote_literal;
use chingest::layout::schema::FieldType;
use chingest::TagPredicate;

use crate::answer::{Series, Value};
use crate::error::Error;
use crate::parse::{KeyFilter, Name, Show, Source, Statement};
use crate::plan::{page, rows, text, Context, TagMatcher};

/// Answers a `SHOW` of series metadata.
pub(crate) async fn run(ctx: &Context<'_>, statement: &Statement) -> Result<Vec<Series>, Error> {
    match statement {
        Statement::ShowMeasurements { show, with } => measurements(ctx, show, with.as_ref()).await,
        Statement::ShowTagKeys(show) => tag_keys(ctx, show).await,
        Statement::ShowTagValues { show, keys } => tag_values(ctx, show, keys).await,
        Statement::ShowFieldKeys(show) => field_keys(ctx, show),
        Statement::ShowSeries(show) => series(ctx, show).await,
        Statement::Select(_)
        | Statement::SelectInto(_)
        | Statement::Explain { .. }
        | Statement::ShowCardinality(_)
        | Statement::Admin(_) => {
            unreachable!("answered by select, into, cardinality and admin")
        }
    }
}

/// The database of a `SHOW`: `ON db`, else the one its `FROM` names,
/// else the request's; `None` if it does not exist (an empty answer, as
/// InfluxDB gives).
fn database(ctx: &Context<'_>, show: &Show) -> Result<Option<String>, Error> {
    let db = ctx.readable_database(named_database(show))?;
    Ok(ctx.exists(&db).then_some(db))
}

/// The database a `SHOW` names: `ON db`, else the first its `FROM` names.
pub(crate) fn named_database(show: &Show) -> Option<&str> {
    show.database
        .as_deref()
        .or_else(|| show.from.iter().find_map(|s| s.database.as_deref()))
}

/// The series table's condition for `show`'s `FROM` and `WHERE`.
pub(crate) fn series_condition(from: &[Source], tags: Option<&TagPredicate>) -> String {
    let mut measurements: Vec<String> = from
        .iter()
        .map(|source| match &source.measurement {
            Name::Exact(m) => format!("measurement = {}", quote_literal(m)),
            Name::Regex(re) => format!("match(measurement, {})", quote_literal(re)),
        })
        .collect();
    if measurements.is_empty() {
        measurements.push("1".to_owned());
    }
    format!(
        "({}) AND ({})",
        measurements.join(" OR "),
        tags.unwrap_or(&TagPredicate::Any).sql()
    )
}

pub(crate) fn series_table(db: &str) -> String {
    chingest::layout::names::TableNames::new(db, "", "").series_table
}

/// `LIMIT`/`OFFSET` as SQL.
fn limit_sql(show: &Show) -> String {
    match show.limit {
        Some(limit) => format!(" LIMIT {limit} OFFSET {}", show.offset),
        None if show.offset > 0 => format!(" LIMIT 18446744073709551615 OFFSET {}", show.offset),
        None => String::new(),
    }
}

/// Applies `LIMIT`/`OFFSET` to each series' values; series left with none
/// are dropped.
pub(crate) fn limit_values(series: &mut Vec<Series>, show: &Show) {
    for s in series.iter_mut() {
        s.values = page(std::mem::take(&mut s.values), show.offset, show.limit);
    }
    series.retain(|s| !s.values.is_empty());
}

async fn measurements(
    ctx: &Context<'_>,
    show: &Show,
    with: Option<&Name>,
) -> Result<Vec<Series>, Error> {
    let Some(db) = database(ctx, show)? else {
        return Ok(Vec::new());
    };
    let from: Vec<Source> = with
        .map(|name| Source {
            database: None,
            retention_policy: None,
            measurement: name.clone(),
        })
        .into_iter()
        .collect();
    let sql = format!(
        "SELECT DISTINCT measurement FROM {} FINAL WHERE {} ORDER BY measurement{}",
        series_table(&db),
        series_condition(&from, show.tags.as_ref()),
        limit_sql(show)
    );
    let values = rows(&ctx.ingestor.query_translated(&sql).await?);
    Ok(one_series(Some("measurements"), &["name"], values))
}

/// One series, or none when it has no values (InfluxDB's empty answer).
fn one_series(name: Option<&str>, columns: &[&str], values: Vec<Vec<Value>>) -> Vec<Series> {
    if values.is_empty() {
        return Vec::new();
    }
    vec![Series::new(name, columns, values)]
}

/// Rows `(measurement, …)` sorted by measurement, as one series per
/// measurement of the remaining columns.
fn per_measurement(rows: Vec<Vec<Value>>, columns: &[&str]) -> Vec<Series> {
    let mut series: Vec<Series> = Vec::new();
    for mut row in rows {
        let measurement = text(&row.remove(0));
        match series.last_mut() {
            Some(last) if last.name.as_deref() == Some(measurement.as_str()) => {
                last.values.push(row)
            }
            _ => series.push(Series::new(Some(&measurement), columns, vec![row])),
        }
    }
    series
}

async fn tag_keys(ctx: &Context<'_>, show: &Show) -> Result<Vec<Series>, Error> {
    let Some(db) = database(ctx, show)? else {
        return Ok(Vec::new());
    };
    if let Some(mut series) = indexed_tag_keys(ctx, &db, show)? {
        limit_values(&mut series, show);
        return Ok(series);
    }
    let sql = format!(
        "SELECT measurement, key FROM {} FINAL ARRAY JOIN mapKeys(tags) AS key WHERE {} \
         GROUP BY measurement, key ORDER BY measurement, key",
        series_table(&db),
        series_condition(&show.from, show.tags.as_ref()),
    );
    let mut series = per_measurement(
        rows(&ctx.ingestor.query_translated(&sql).await?),
        &["tagKey"],
    );
    limit_values(&mut series, show);
    Ok(series)
}

async fn tag_values(
    ctx: &Context<'_>,
    show: &Show,
    keys: &KeyFilter,
) -> Result<Vec<Series>, Error> {
    let Some(db) = database(ctx, show)? else {
        return Ok(Vec::new());
    };
    if let Some(mut series) = indexed_tag_values(ctx, &db, show, keys)? {
        limit_values(&mut series, show);
        return Ok(series);
    }
    let sql = format!(
        "SELECT measurement, key, value FROM {} FINAL ARRAY JOIN mapKeys(tags) AS key, \
         mapValues(tags) AS value WHERE {} AND {} \
         GROUP BY measurement, key, value ORDER BY measurement, key, value",
        series_table(&db),
        series_condition(&show.from, show.tags.as_ref()),
        key_condition(keys, "key"),
    );
    let mut series = per_measurement(
        rows(&ctx.ingestor.query_translated(&sql).await?),
        &["key", "value"],
    );
    limit_values(&mut series, show);
    Ok(series)
}

/// `WITH KEY …` as a condition on the tag key `key` (a column or any
/// expression).
pub(crate) fn key_condition(keys: &KeyFilter, key: &str) -> String {
    match keys {
        KeyFilter::Equals(k) => format!("{key} = {}", quote_literal(k)),
        KeyFilter::NotEquals(k) => format!("{key} != {}", quote_literal(k)),
        KeyFilter::In(keys) => format!(
            "{key} IN ({})",
            keys.iter()
                .map(|k| quote_literal(k))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        KeyFilter::Matches(re) => format!("match({key}, {})", quote_literal(re)),
        KeyFilter::NotMatches(re) => format!("NOT match({key}, {})", quote_literal(re)),
    }
}

/// Asks the index of every table of the measurements `show` names (or
/// all, each retention policy's: the series table the engine would read
/// spans them all), with its `WHERE` — a conjunction of conditions on one
/// tag each — as the index's matchers: `ask(table, matchers)` per table,
/// with the table's measurement. `None` when the statement asks more or
/// a table is not indexed now (`ask` said `None`).
fn ask_index<T>(
    ctx: &Context<'_>,
    db: &str,
    show: &Show,
    mut ask: impl FnMut((&str, &str, &str), &[chingest::TagMatcher<'_>]) -> Option<T>,
) -> Result<Option<Vec<(String, T)>>, Error> {
    let mut named = Vec::new();
    for source in &show.from {
        match &source.measurement {
            Name::Exact(m) if source.database.as_deref().is_none_or(|d| d == db) => {
                named.push(m.as_str())
            }
            _ => return Ok(None),
        }
    }
    let terms = match &show.tags {
        None | Some(TagPredicate::Any) => Vec::new(),
        Some(TagPredicate::And(all)) => all.iter().collect(),
        Some(one) => vec![one],
    };
    let mut tests = Vec::new();
    for term in terms {
        let key = match term {
            TagPredicate::Equals(k, _)
            | TagPredicate::NotEquals(k, _)
            | TagPredicate::Matches(k, _)
            | TagPredicate::NotMatches(k, _) => k.clone(),
            _ => return Ok(None),
        };
        tests.push((key, TagMatcher::new(term)?));
    }
    // A test of the value alone: the matcher sees a series carrying only
    // this tag (`""` where it has none, as it reads absent tags).
    let accepts: Vec<_> = tests
        .iter()
        .map(|(key, matcher)| {
            let test = move |value: &str| matcher.matches(&[(key.as_str(), value)]);
            (key.as_str(), test)
        })
        .collect();
    let matchers: Vec<chingest::TagMatcher<'_>> = accepts
        .iter()
        .map(|(key, test)| chingest::TagMatcher {
            key,
            test: chingest::TagTest::Matches(test),
        })
        .collect();
    let mut answers = Vec::new();
    for (rp, _) in ctx.ingestor.retention_policies(db) {
        for measurement in ctx.ingestor.measurements(db, &rp) {
            if !named.is_empty() && !named.contains(&measurement.name.as_str()) {
                continue;
            }
            let table = (db, rp.as_str(), measurement.name.as_str());
            let Some(answer) = ask(table, &matchers) else {
                return Ok(None);
            };
            answers.push((measurement.name, answer));
        }
    }
    Ok(Some(answers))
}

/// `SHOW TAG VALUES` of keys named (`=`, `IN`), from the index
/// ([`ask_index`]); `None` when it cannot answer.
fn indexed_tag_values(
    ctx: &Context<'_>,
    db: &str,
    show: &Show,
    keys: &KeyFilter,
) -> Result<Option<Vec<Series>>, Error> {
    let mut keys = match keys {
        KeyFilter::Equals(key) => vec![key.clone()],
        KeyFilter::In(keys) => keys.clone(),
        _ => return Ok(None),
    };
    keys.sort();
    keys.dedup();
    let answers = ask_index(ctx, db, show, |table, matchers| {
        keys.iter()
            .map(|key| {
                Some((
                    key,
                    ctx.ingestor.tag_values(table, key, matchers, None, None)?,
                ))
            })
            .collect::<Option<Vec<_>>>()
    })?;
    let Some(answers) = answers else {
        return Ok(None);
    };
    // (measurement, key) → values, over every retention policy.
    let mut found: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for (measurement, per_key) in answers {
        for (key, values) in per_key {
            found
                .entry((measurement.clone(), key.clone()))
                .or_default()
                .extend(values);
        }
    }
    let rows = found
        .into_iter()
        .flat_map(|((measurement, key), values)| {
            values.into_iter().map(move |value| {
                vec![
                    Value::String(measurement.clone()),
                    Value::String(key.clone()),
                    Value::String(value),
                ]
            })
        })
        .collect();
    Ok(Some(per_measurement(rows, &["key", "value"])))
}

/// `SHOW TAG KEYS` from the index ([`ask_index`]): what Grafana's query
/// editor and ad-hoc filters ask; `None` when it cannot answer.
fn indexed_tag_keys(
    ctx: &Context<'_>,
    db: &str,
    show: &Show,
) -> Result<Option<Vec<Series>>, Error> {
    let answers = ask_index(ctx, db, show, |table, matchers| {
        ctx.ingestor.tag_keys(table, matchers, None, None)
    })?;
    let Some(answers) = answers else {
        return Ok(None);
    };
    let mut found: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (measurement, keys) in answers {
        found.entry(measurement).or_default().extend(keys);
    }
    let rows = found
        .into_iter()
        .flat_map(|(measurement, keys)| {
            keys.into_iter()
                .map(move |key| vec![Value::String(measurement.clone()), Value::String(key)])
        })
        .collect();
    Ok(Some(per_measurement(rows, &["tagKey"])))
}

/// The measurements a `SHOW` reads: its `FROM` (in its `ON` database
/// where a source names none), or every measurement.
pub(crate) fn sources(show: &Show) -> Vec<Source> {
    match show.from.is_empty() {
        true => vec![Source {
            database: show.database.clone(),
            retention_policy: None,
            measurement: Name::Regex(String::new()),
        }],
        false => show
            .from
            .iter()
            .map(|s| Source {
                database: s.database.clone().or_else(|| show.database.clone()),
                ..s.clone()
            })
            .collect(),
    }
}

/// InfluxDB's name for a field type; `None` for arrays, which InfluxQL
/// cannot read.
pub(crate) fn field_type_name(ty: FieldType) -> Option<&'static str> {
    Some(match ty {
        FieldType::Float => "float",
        FieldType::Integer => "integer",
        FieldType::UInteger => "unsigned",
        FieldType::String => "string",
        FieldType::Boolean => "boolean",
        FieldType::FloatArray | FieldType::IntegerArray | FieldType::UIntegerArray => return None,
    })
}

fn field_keys(ctx: &Context<'_>, show: &Show) -> Result<Vec<Series>, Error> {
    if database(ctx, show)?.is_none() {
        return Ok(Vec::new());
    }
    let from = sources(show);
    let mut series: Vec<Series> = ctx
        .targets(&from)?
        .into_iter()
        .map(|target| Series {
            name: Some(target.schema.name),
            tags: None,
            columns: vec!["fieldKey".into(), "fieldType".into()],
            values: target
                .schema
                .fields
                .iter()
                .filter_map(|(name, ty)| {
                    Some(vec![
                        Value::String(name.clone()),
                        Value::String(field_type_name(*ty)?.to_owned()),
                    ])
                })
                .collect(),
        })
        .collect();
    limit_values(&mut series, show);
    Ok(series)
}

/// A series key as line protocol writes it: `m,k=v` with `,`, ` ` and `=`
/// escaped (`,` and ` ` in the measurement).
fn series_key(measurement: &str, tags: &[(String, String)]) -> String {
    let escape = |text: &str, specials: &[char]| {
        let mut out = String::with_capacity(text.len());
        for c in text.chars() {
            if specials.contains(&c) {
                out.push('\\');
            }
            out.push(c);
        }
        out
    };
    let mut key = escape(measurement, &[',', ' ']);
    for (k, v) in tags {
        key.push(',');
        key.push_str(&escape(k, &[',', ' ', '=']));
        key.push('=');
        key.push_str(&escape(v, &[',', ' ', '=']));
    }
    key
}

async fn series(ctx: &Context<'_>, show: &Show) -> Result<Vec<Series>, Error> {
    let Some(db) = database(ctx, show)? else {
        return Ok(Vec::new());
    };
    let sql = format!(
        "SELECT measurement, arraySort(mapKeys(tags)) AS k, \
         arrayMap(x -> tags[x], k) FROM {} FINAL WHERE {}",
        series_table(&db),
        series_condition(&show.from, show.tags.as_ref()),
    );
    let batches = ctx.ingestor.query_translated(&sql).await?;
    let mut keys = Vec::new();
    for batch in &batches {
        let measurements = batch.column(0).as_string::<i32>();
        let tag_keys = batch.column(1).as_list::<i32>();
        let tag_values = batch.column(2).as_list::<i32>();
        for row in 0..batch.num_rows() {
            let (k, v) = (tag_keys.value(row), tag_values.value(row));
            let (k, v) = (k.as_string::<i32>(), v.as_string::<i32>());
            let tags: Vec<(String, String)> = (0..k.len())
                .map(|i| (k.value(i).to_owned(), v.value(i).to_owned()))
                .collect();
            keys.push(series_key(measurements.value(row), &tags));
        }
    }
    keys.sort();
    keys.dedup();
    let values = keys.into_iter().map(|k| vec![Value::String(k)]).collect();
    let mut series = one_series(None, &["key"], values);
    limit_values(&mut series, show);
    Ok(series)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_keys_escape_like_line_protocol() {
        assert_eq!(
            series_key("c p,u", &[("a b".into(), "x=y,z".into())]),
            "c\\ p\\,u,a\\ b=x\\=y\\,z"
        );
        assert_eq!(series_key("m", &[]), "m");
    }
}
