//! The administrative statements run: `CREATE DATABASE`, `SHOW DATABASES`,
//! `SHOW RETENTION POLICIES [ON db]`, `CREATE|ALTER RETENTION POLICY name
//! ON db DURATION d …` (the duration becomes the TTL of the policy's
//! tables; replication, shard duration and DEFAULT are accepted and
//! ignored), and on the request's database `DELETE FROM m [WHERE …]`,
//! `DELETE WHERE …`, `DROP SERIES [FROM m] [WHERE …]` and `DROP
//! MEASUREMENT m` (conditions on tags and time, see [`condition`]; every
//! retention policy); and chingest's own `SET DUPLICATE POLICY
//! append|last [ON db [MEASUREMENT m]]`, `SHOW DUPLICATE POLICIES [ON
//! db]`, `SET DOWNSAMPLING '<age>:<interval>', …|NONE|DEFAULT [ON db]`
//! and `SHOW DOWNSAMPLING [ON db]`; `CREATE|DROP CONTINUOUS QUERY` and
//! `SHOW CONTINUOUS QUERIES` (a query runs as the server, so creating one
//! takes what it would take to run it: reading its sources, writing its
//! target and its database).
//!
//! Unlike a query's, the library's errors here fail the request, but for a
//! database that does not exist: the statement's error, as InfluxDB says it.

use std::time::Duration;

use chingest::layout::rollup::interval_name;
use chingest::{ContinuousQuery, DuplicatePolicy, PointFilter, Schedule};

use crate::answer::{Series, Value};
use crate::condition::{self, Dialect};
use crate::error::Error;
use crate::into::target_of;
use crate::parse::{Admin, CreateContinuousQuery};
use crate::plan::Context;

/// Runs one administrative statement; its series (none for most).
pub(crate) async fn run(ctx: &Context<'_>, statement: &Admin) -> Result<Vec<Series>, Error> {
    let ingestor = ctx.ingestor;
    match statement {
        Admin::CreateDatabase(name) => {
            ctx.access.require_write(name)?;
            ingestor
                .create_database(name)
                .await
                .map_err(Error::Request)?;
            Ok(Vec::new())
        }
        Admin::ShowDatabases => {
            ctx.access.require_read()?;
            let values = ingestor
                .databases()
                .into_iter()
                .filter(|d| ctx.access.covers(d))
                .map(|d| vec![Value::String(d)])
                .collect();
            Ok(vec![Series::new(Some("databases"), &["name"], values)])
        }
        Admin::ShowRetentionPolicies(db) => {
            let db = db
                .as_deref()
                .or(ctx.database)
                .ok_or_else(|| Error::Invalid("database name required (ON db, or db=)".into()))?;
            ctx.access.require_read_of(db)?;
            if !ingestor.databases().iter().any(|d| d == db) {
                return Err(not_found(db));
            }
            let default_rp = ctx.default_retention_policy;
            let mut policies = ingestor.retention_policies(db);
            if !policies.iter().any(|(name, _)| name == default_rp) {
                policies.insert(0, (default_rp.to_owned(), None));
            }
            let values = policies
                .into_iter()
                .map(|(rp, duration)| {
                    let default = rp == default_rp;
                    vec![
                        Value::String(rp),
                        Value::String(format_duration(duration)),
                        Value::String("168h0m0s".to_owned()),
                        Value::Integer(1),
                        Value::Boolean(default),
                    ]
                })
                .collect();
            let columns = [
                "name",
                "duration",
                "shardGroupDuration",
                "replicaN",
                "default",
            ];
            Ok(vec![Series::new(None, &columns, values)])
        }
        Admin::CreateRetentionPolicy {
            name,
            database,
            duration,
        } => {
            ctx.access.require_write(database)?;
            let created = ingestor
                .create_retention_policy(database, name, *duration)
                .await;
            missing_database(created).map(|()| Vec::new())
        }
        Admin::SetDuplicatePolicy {
            policy,
            database,
            measurement,
        } => {
            let db = named_or_requested(ctx, database.as_deref())?;
            ctx.access.require_write(db)?;
            let set = ingestor
                .set_duplicate_policy(db, measurement.as_deref(), *policy)
                .await;
            missing_database(set).map(|()| Vec::new())
        }
        Admin::ShowDuplicatePolicies(database) => {
            let db = named_or_requested(ctx, database.as_deref())?;
            ctx.access.require_read_of(db)?;
            if !ingestor.databases().iter().any(|d| d == db) {
                return Err(not_found(db));
            }
            let policies = ingestor.duplicate_policies(db);
            let own = policies.iter().find(|(m, _)| m.is_none()).map(|(_, p)| *p);
            let own = own.unwrap_or(ctx.default_duplicate_policy);
            let mut values = vec![vec![
                Value::String(String::new()),
                Value::String(own.as_str().to_owned()),
            ]];
            values.extend(policies.iter().filter_map(|(m, p)| {
                Some(vec![
                    Value::String(m.clone()?),
                    Value::String(p.as_str().to_owned()),
                ])
            }));
            let columns = ["measurement", "policy"];
            Ok(vec![Series::new(
                Some("duplicate policies"),
                &columns,
                values,
            )])
        }
        Admin::SetDownsampling { setting, database } => {
            let db = named_or_requested(ctx, database.as_deref())?;
            ctx.access.require_write(db)?;
            let set = ingestor.set_downsampling(db, setting.clone()).await;
            missing_database(set).map(|()| Vec::new())
        }
        Admin::ShowDownsampling(database) => {
            let db = named_or_requested(ctx, database.as_deref())?;
            ctx.access.require_read_of(db)?;
            if !ingestor.databases().iter().any(|d| d == db) {
                return Err(not_found(db));
            }
            let (levels, stated) = ingestor.downsampling(db);
            let set_by = match stated {
                true => "statement",
                false => "configuration",
            };
            let values = levels
                .iter()
                .flat_map(|levels| levels.levels())
                .map(|level| {
                    vec![
                        Value::String(interval_name(level.after)),
                        Value::String(interval_name(level.interval)),
                        Value::String(level.keeps.name().to_owned()),
                        Value::String(set_by.to_owned()),
                    ]
                })
                .collect();
            let columns = ["age", "interval", "keeps", "set_by"];
            Ok(vec![Series::new(Some("downsampling"), &columns, values)])
        }
        Admin::CreateContinuousQuery(create) => {
            create_continuous_query(ctx, create).await?;
            Ok(Vec::new())
        }
        Admin::DropContinuousQuery { name, database } => {
            ctx.access.require_write(database)?;
            let dropped = ingestor.drop_continuous_query(database, name).await;
            // Dropping one that is not there is no error, as in InfluxDB.
            dropped.map(|_| Vec::new()).map_err(Error::Request)
        }
        Admin::ShowContinuousQueries => {
            ctx.access.require_read()?;
            let queries = ingestor.continuous_queries();
            let series = ingestor
                .databases()
                .into_iter()
                .filter(|db| ctx.access.covers(db))
                .map(|db| {
                    let values = queries
                        .iter()
                        .filter(|q| q.database == db)
                        .map(|q| {
                            vec![
                                Value::String(q.name.clone()),
                                Value::String(q.statement.clone()),
                            ]
                        })
                        .collect();
                    Series::new(Some(&db), &["name", "query"], values)
                })
                .collect();
            Ok(series)
        }
        Admin::Delete {
            drop_series,
            measurement,
            condition,
        } => {
            let db = ctx
                .database
                .filter(|db| !db.is_empty())
                .ok_or_else(|| Error::Invalid("database name required (db=)".into()))?;
            ctx.access.require_write(db)?;
            let mut filter = PointFilter {
                measurement: measurement.clone(),
                ..PointFilter::all()
            };
            condition::parse(condition, Dialect::InfluxQl, ctx.now)
                .map_err(Error::Invalid)?
                .apply(&mut filter)
                .map_err(Error::Invalid)?;
            let done = match drop_series {
                true => ingestor.drop_series(db, &filter).await,
                false => ingestor.delete(db, &filter).await,
            };
            missing_database(done).map(|_| Vec::new())
        }
    }
}

/// Creates a continuous query, once the caller may do all it will do as
/// the server: write its database and its target, read its sources.
async fn create_continuous_query(
    ctx: &Context<'_>,
    create: &CreateContinuousQuery,
) -> Result<(), Error> {
    let ingestor = ctx.ingestor;
    let database = &create.database;
    ctx.access.require_write(database)?;
    for source in &create.query.select.sources {
        ctx.access
            .require_read_of(source.database.as_deref().unwrap_or(database))?;
    }
    // As its periods will resolve it: names it leaves out are its
    // database's and the default retention policy.
    let runs_as = Context {
        database: Some(database),
        retention_policy: ctx.default_retention_policy,
        ..*ctx
    };
    let (target_db, target_rp) = target_of(&runs_as, &create.query.target)?;
    ctx.access.require_write(&target_db)?;
    if let Some(measurement) = &create.query.target.measurement {
        let own = ingestor
            .duplicate_policies(&target_db)
            .into_iter()
            .find(|(m, _)| m.as_ref() == Some(measurement))
            .map(|(_, policy)| policy);
        let table = (target_db.as_str(), target_rp.as_str(), measurement.as_str());
        if ingestor.table_duplicate_policy(table).or(own) == Some(DuplicatePolicy::Append) {
            return Err(Error::Statement(format!(
                "the target {measurement:?} keeps every duplicate point (duplicate policy \
                 append): a period run again (after a crash, or by RESAMPLE) would add its \
                 points again; write into a new measurement, or one whose policy is last"
            )));
        }
    }
    let interval = create.query.select.interval.ok_or_else(|| {
        Error::Statement("a continuous query must have GROUP BY time(...)".into())
    })?;
    let duration = |ns: i64| Duration::from_nanos(ns.unsigned_abs());
    let query = ContinuousQuery {
        database: database.clone(),
        name: create.name.clone(),
        statement: create.text.clone(),
        schedule: Schedule {
            interval: duration(interval.every),
            offset: duration(interval.offset),
            resample_every: create.resample_every.map(duration),
            resample_for: create.resample_for.map(duration),
        },
    };
    ingestor
        .create_continuous_query(query)
        .await
        .map_err(|err| match err {
            chingest::Error::DatabaseNotFound(db) => not_found(&db),
            chingest::Error::Conflict(message) | chingest::Error::Config(message) => {
                Error::Statement(message)
            }
            other => Error::Request(other),
        })
}

/// The database a statement names, else the request's `db=`.
fn named_or_requested<'a>(ctx: &Context<'a>, named: Option<&'a str>) -> Result<&'a str, Error> {
    named
        .or(ctx.database.filter(|db| !db.is_empty()))
        .ok_or_else(|| Error::Invalid("database name required (ON db, or db=)".into()))
}

/// The library's answer: a database that does not exist is the
/// statement's error, any other error the request's.
fn missing_database<T>(done: chingest::Result<T>) -> Result<T, Error> {
    done.map_err(|err| match err {
        chingest::Error::DatabaseNotFound(db) => not_found(&db),
        other => Error::Request(other),
    })
}

fn not_found(db: &str) -> Error {
    Error::Statement(format!("database not found: {db}"))
}

/// A duration as InfluxDB shows it: `168h0m0s`, `0s` for infinite.
fn format_duration(duration: Option<Duration>) -> String {
    let Some(duration) = duration else {
        return "0s".to_owned();
    };
    let seconds = duration.as_secs();
    format!(
        "{}h{}m{}s",
        seconds / 3600,
        seconds % 3600 / 60,
        seconds % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_format_like_influxdb() {
        assert_eq!(
            format_duration(Some(Duration::from_secs(7 * 86_400))),
            "168h0m0s"
        );
        assert_eq!(format_duration(None), "0s");
    }
}
