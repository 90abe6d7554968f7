//! The registry of a database's continuous queries (its
//! `_continuous_queries` table): per query its statement, schedule, when
//! it was created and the last period it completed; a dropped query's
//! last row says so. A `ReplacingMergeTree` keeps each query's newest row
//! (by `version`), so a mark is one small insert. The table lives in the
//! database, so a backup carries it and a restore brings the queries
//! back, each resuming after its last period.

use std::time::Duration;

use arrow::array::AsArray as _;
use arrow::datatypes::{Int64Type, UInt64Type, UInt8Type};

use crate::engine::{self, Connection};
use crate::error::{Error, Result};
use crate::layout::names::{self, quote_ident, quote_literal};
use crate::layout::schema::table_engine;

use super::definition::ContinuousQuery;
use super::schedule::Schedule;

/// The registry's name in each database that has continuous queries.
pub(super) const REGISTRY_TABLE: &str = "_continuous_queries";

/// A query as its registry row holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Stored {
    pub(super) query: ContinuousQuery,
    /// The version of the row that created it: queries are listed in
    /// creation order, as InfluxDB lists them.
    pub(super) created: u64,
    /// The boundary of the last period it completed (or skipped), ns.
    pub(super) last_period: i64,
}

/// The registry of `database`, quoted.
fn table(database: &str) -> String {
    format!(
        "{}.{}",
        quote_ident(&names::encode(database)),
        quote_ident(REGISTRY_TABLE)
    )
}

/// Makes the registry of `database` if it has none.
pub(super) fn create_sql(database: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {} (name String, statement String, interval_ns Int64, \
         offset_ns Int64, every_ns Int64, for_ns Int64, created UInt64, last_period Int64, \
         dropped UInt8, version UInt64) ENGINE = {} ORDER BY name",
        table(database),
        table_engine("ReplacingMergeTree", "version", None)
    )
}

fn ns(duration: Option<Duration>) -> i64 {
    duration.map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

fn duration(ns: i64) -> Option<Duration> {
    (ns > 0).then(|| Duration::from_nanos(ns as u64))
}

/// The row that records `stored` as of `version` (or, `dropped`, that it
/// is gone).
pub(super) fn row_sql(stored: &Stored, dropped: bool, version: u64) -> String {
    let query = &stored.query;
    let schedule = &query.schedule;
    format!(
        "INSERT INTO {} (name, statement, interval_ns, offset_ns, every_ns, for_ns, created, \
         last_period, dropped, version) SETTINGS async_insert = 0 \
         VALUES ({}, {}, {}, {}, {}, {}, {}, {}, {}, {version})",
        table(&query.database),
        quote_literal(&query.name),
        quote_literal(&query.statement),
        ns(Some(schedule.interval)),
        ns(Some(schedule.offset)),
        ns(schedule.resample_every),
        ns(schedule.resample_for),
        stored.created,
        stored.last_period,
        u8::from(dropped),
    )
}

/// Every continuous query the registries hold, and the highest version
/// read (versions go on from there).
pub(super) fn load(conn: &Connection) -> Result<(Vec<Stored>, u64)> {
    let databases = engine::query_rows(
        conn,
        &format!(
            "SELECT database FROM system.tables WHERE name = {}",
            quote_literal(REGISTRY_TABLE)
        ),
    )?;
    let mut stored = Vec::new();
    let mut highest = 0;
    for row in databases {
        let Some(database) = names::decode(&row[0]) else {
            continue;
        };
        let sql = format!(
            "SELECT name, statement, interval_ns, offset_ns, every_ns, for_ns, created, \
             last_period, dropped, version FROM {} FINAL",
            table(&database)
        );
        // Through Arrow: statements hold tabs and newlines.
        for batch in engine::query_arrow(conn, &sql)? {
            let text = |i: usize| batch.column(i).as_string::<i32>().clone();
            let int = |i: usize| batch.column(i).as_primitive::<Int64Type>().clone();
            let unsigned = |i: usize| batch.column(i).as_primitive::<UInt64Type>().clone();
            let (name, statement) = (text(0), text(1));
            let (interval, offset, every, covers) = (int(2), int(3), int(4), int(5));
            let (created, last_period, version) = (unsigned(6), int(7), unsigned(9));
            let dropped = batch.column(8).as_primitive::<UInt8Type>().clone();
            for row in 0..batch.num_rows() {
                highest = highest.max(version.value(row));
                if dropped.value(row) != 0 {
                    continue;
                }
                let interval = duration(interval.value(row)).ok_or_else(|| {
                    Error::Engine(format!(
                        "{REGISTRY_TABLE}: {:?} has no interval",
                        name.value(row)
                    ))
                })?;
                stored.push(Stored {
                    query: ContinuousQuery {
                        database: database.clone(),
                        name: name.value(row).to_owned(),
                        statement: statement.value(row).to_owned(),
                        schedule: Schedule {
                            interval,
                            offset: duration(offset.value(row)).unwrap_or_default(),
                            resample_every: duration(every.value(row)),
                            resample_for: duration(covers.value(row)),
                        },
                    },
                    created: created.value(row),
                    last_period: last_period.value(row),
                });
            }
        }
    }
    Ok((stored, highest))
}
