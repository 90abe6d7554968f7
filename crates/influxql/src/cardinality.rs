//! `SHOW SERIES | MEASUREMENT | FIELD KEY | TAG KEY | TAG VALUES [EXACT]
//! CARDINALITY`, counted by the engine: one aggregate over the database's
//! series table (`_series FINAL`, read as the other `SHOW`s read it) whose
//! answer is a row per measurement and `GROUP BY` tag set, so a million
//! series cost one scan under the query limits, never a million rows
//! brought here. A measurement's field keys come from the catalog.
//!
//! InfluxDB 1.6's answers: a series per measurement (per measurement and
//! tag set with `GROUP BY`, missing tags as `""`), one `count` row each,
//! none where the count is 0; measurement counts have no name. `LIMIT` and
//! `OFFSET` apply to each series' one row. The bare `SHOW SERIES |
//! MEASUREMENT CARDINALITY` is one `cardinality estimation` of the whole
//! database, which chingest counts exactly (0 for a database that does
//! not exist, as InfluxDB answers).

use std::collections::{BTreeMap, BTreeSet};

use chingest::layout::names::quote_literal;

use crate::answer::{Series, Value};
use crate::error::Error;
use crate::parse::{Cardinality, Counted, GroupBy};
use crate::plan::{rows, text, Context};
use crate::show::{
    field_type_name, key_condition, limit_values, named_database, series_condition, series_table,
    sources,
};

/// Answers a `SHOW … CARDINALITY`.
pub(crate) async fn run(
    ctx: &Context<'_>,
    cardinality: &Cardinality,
) -> Result<Vec<Series>, Error> {
    let show = &cardinality.show;
    if cardinality.estimate {
        return estimate(ctx, cardinality).await;
    }
    let db = ctx.database(named_database(show))?;
    // The measurements the statement names in the catalog: an unknown
    // database or retention policy is the statement's error; their field
    // keys, and tag keys for `GROUP BY *`.
    let from = sources(show);
    let targets = ctx.targets(&from)?;
    let keys: Vec<String> = match &cardinality.group_by {
        GroupBy::Nothing => Vec::new(),
        GroupBy::Tags(keys) => keys
            .iter()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .cloned()
            .collect(),
        GroupBy::All => targets
            .iter()
            .flat_map(|t| t.schema.tag_keys.iter())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .cloned()
            .collect(),
    };
    let sql = counts_sql(&series_table(&db), cardinality, &keys);
    let mut rows = rows(&ctx.ingestor.query_translated(&sql).await?);
    if cardinality.counted == Counted::FieldKeys {
        // Each row's count is its measurement's readable fields (in any
        // retention policy the statement reads), rows of measurements
        // without any dropped.
        let mut fields: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for target in &targets {
            let readable = target.schema.fields.iter();
            let readable = readable.filter(|(_, ty)| field_type_name(*ty).is_some());
            fields
                .entry(&target.schema.name)
                .or_default()
                .extend(readable.map(|(name, _)| name.as_str()));
        }
        rows.retain_mut(|row| {
            let count = fields.get(text(&row[0]).as_str()).map_or(0, BTreeSet::len);
            if let Some(cell) = row.last_mut() {
                *cell = Value::Integer(count as i64);
            }
            count > 0
        });
    }
    let named = cardinality.counted != Counted::Measurements;
    let mut series = counted_series(rows, named, &keys);
    limit_values(&mut series, show);
    Ok(series)
}

/// The bare `SHOW SERIES | MEASUREMENT CARDINALITY`: the database's count,
/// as InfluxDB's estimate is shaped.
async fn estimate(ctx: &Context<'_>, cardinality: &Cardinality) -> Result<Vec<Series>, Error> {
    let db = ctx.readable_database(cardinality.show.database.as_deref())?;
    let count = match ctx.exists(&db) {
        true => {
            let counted = match cardinality.counted {
                Counted::Series => "count()",
                _ => "uniqExact(measurement)",
            };
            let sql = format!("SELECT {counted} FROM {} FINAL", series_table(&db));
            let rows = rows(&ctx.ingestor.query_translated(&sql).await?);
            rows.into_iter()
                .flatten()
                .next()
                .unwrap_or(Value::Integer(0))
        }
        false => Value::Integer(0),
    };
    let columns = ["cardinality estimation"];
    Ok(vec![Series::new(None, &columns, vec![vec![count]])])
}

/// The statement counting what `cardinality` asks in the series table
/// `table`: a row per measurement (but for measurement counts) and value
/// of each of `keys` (sorted), those columns then the count, sorted as
/// InfluxDB orders its series; no row of a zero count. Field keys are
/// counted by the caller: theirs is the count of series.
fn counts_sql(table: &str, cardinality: &Cardinality, keys: &[String]) -> String {
    let count = match &cardinality.counted {
        Counted::Series | Counted::FieldKeys => "count()".to_owned(),
        Counted::Measurements => "uniqExact(measurement)".to_owned(),
        Counted::TagKeys => "uniqExactArray(mapKeys(tags))".to_owned(),
        Counted::TagValues(wanted) => format!(
            "uniqExactArray(arrayFilter(pair -> {}, arrayZip(mapKeys(tags), mapValues(tags))))",
            key_condition(wanted, "tupleElement(pair, 1)")
        ),
    };
    let mut groups = Vec::new();
    if cardinality.counted != Counted::Measurements {
        groups.push("measurement".to_owned());
    }
    groups.extend(
        keys.iter()
            .map(|key| format!("tags[{}]", quote_literal(key))),
    );
    let show = &cardinality.show;
    let condition = series_condition(&show.from, show.tags.as_ref());
    let groups = groups.join(", ");
    let (columns, group_by, order_by) = match groups.is_empty() {
        true => Default::default(),
        false => (
            format!("{groups}, "),
            format!(" GROUP BY {groups}"),
            format!(" ORDER BY {groups}"),
        ),
    };
    format!(
        "SELECT {columns}{count} AS n FROM {table} FINAL WHERE {condition}{group_by} \
         HAVING n > 0{order_by}"
    )
}

/// The rows of [`counts_sql`] as InfluxDB's series: each row one series
/// of one `count`, named by its measurement when `named`, tagged with the
/// `keys`' values.
fn counted_series(rows: Vec<Vec<Value>>, named: bool, keys: &[String]) -> Vec<Series> {
    rows.into_iter()
        .map(|mut row| {
            let count = row.pop().unwrap_or(Value::Integer(0));
            let name = named.then(|| text(&row.remove(0)));
            let tags = (!keys.is_empty())
                .then(|| keys.iter().cloned().zip(row.iter().map(text)).collect());
            Series {
                name,
                tags,
                columns: vec!["count".to_owned()],
                values: vec![vec![count]],
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{parse_query, Statement};

    fn sql(text: &str, keys: &[&str]) -> String {
        let Ok(Statement::ShowCardinality(cardinality)) = parse_query(text, 0).unwrap().remove(0)
        else {
            panic!("{text}: not a cardinality");
        };
        let keys: Vec<String> = keys.iter().map(|k| (*k).to_owned()).collect();
        counts_sql("db._series", &cardinality, &keys)
    }

    #[test]
    fn counts_are_one_aggregate_over_the_series_table() {
        assert_eq!(
            sql(
                "SHOW SERIES EXACT CARDINALITY FROM /^c/ WHERE host = 'a'",
                &[]
            ),
            "SELECT measurement, count() AS n FROM db._series FINAL \
             WHERE (match(measurement, '^c')) AND (tags['host'] = 'a') \
             GROUP BY measurement HAVING n > 0 ORDER BY measurement"
        );
        assert_eq!(
            sql("SHOW MEASUREMENT EXACT CARDINALITY", &[]),
            "SELECT uniqExact(measurement) AS n FROM db._series FINAL WHERE (1) AND (1) HAVING n > 0"
        );
        assert_eq!(
            sql(
                "SHOW MEASUREMENT CARDINALITY GROUP BY region, host",
                &["host", "region"]
            ),
            "SELECT tags['host'], tags['region'], uniqExact(measurement) AS n FROM db._series \
             FINAL WHERE (1) AND (1) GROUP BY tags['host'], tags['region'] HAVING n > 0 \
             ORDER BY tags['host'], tags['region']"
        );
        let tag_values = sql("SHOW TAG VALUES CARDINALITY WITH KEY IN (a, \"b'c\")", &[]);
        assert!(
            tag_values.starts_with(
                "SELECT measurement, uniqExactArray(arrayFilter(pair -> \
                 tupleElement(pair, 1) IN ('a', 'b\\'c'), \
                 arrayZip(mapKeys(tags), mapValues(tags)))) AS n"
            ),
            "{tag_values}"
        );
        assert!(
            sql("SHOW TAG KEY CARDINALITY", &[]).contains("uniqExactArray(mapKeys(tags)) AS n"),
        );
    }

    #[test]
    fn each_row_is_a_series_of_one_count() {
        let row = |cells: &[&str], n: u64| {
            let mut row: Vec<Value> = cells.iter().map(|c| Value::String((*c).into())).collect();
            row.push(Value::Unsigned(n));
            row
        };
        let keys = ["host".to_owned()];
        let series = counted_series(
            vec![row(&["cpu", "a"], 2), row(&["cpu", ""], 1)],
            true,
            &keys,
        );
        assert_eq!(series.len(), 2);
        assert_eq!(series[0].name.as_deref(), Some("cpu"));
        assert_eq!(series[1].tags, Some(vec![("host".into(), String::new())]));
        assert_eq!(series[1].values, vec![vec![Value::Unsigned(1)]]);
        let unnamed = counted_series(vec![row(&[], 11)], false, &[]);
        assert_eq!(
            unnamed,
            vec![Series::new(
                None,
                &["count"],
                vec![vec![Value::Unsigned(11)]]
            )]
        );
    }
}
