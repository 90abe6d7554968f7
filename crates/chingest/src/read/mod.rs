//! The read path: what untrusted SQL may touch ([`sandbox`]), and
//! [`Reader`], which answers queries (trusted, untrusted, translated) and
//! what the catalog and the last-value cache know, from memory.

pub mod access;
pub(crate) mod samples;
pub mod sandbox;
pub(crate) mod stream;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arrow::record_batch::RecordBatch;

use crate::catalog::{self, Catalog, Table};
use crate::config::DuplicatePolicy;
use crate::engine::{self, Engine};
use crate::error::{Error, Result};
use crate::last_value::{
    IndexedSeries, LastSeries, LastValues, RecentSamples, TableLast, TagMatcher, Taken,
};
use crate::layout::schema;
use crate::read::sandbox::{ReadScope, Sandbox};
use crate::read::stream::{QueryChunks, Statement};
use crate::stats::{IngestStats, PartsSummary};

/// A measurement's table as every read names it: database, retention
/// policy, measurement.
pub type TableAddress<'a> = (&'a str, &'a str, &'a str);

/// The read half of an open ingestor.
#[derive(Debug)]
pub(crate) struct Reader {
    engine: Arc<Engine>,
    catalog: Arc<Catalog>,
    last_values: Arc<LastValues>,
    /// What untrusted statements may touch, read from the engine's
    /// catalogue once.
    sandbox: Arc<Sandbox>,
    /// The settled version of the `clickhouse` storage mode, which no
    /// two reads share.
    unsettled: AtomicU64,
}

impl Reader {
    /// The reader over `engine`, with the sandbox loaded from it.
    pub(crate) async fn open(
        engine: Arc<Engine>,
        catalog: Arc<Catalog>,
        last_values: Arc<LastValues>,
    ) -> Result<Reader> {
        let sandbox = engine.run(Sandbox::load).await?;
        Ok(Reader {
            engine,
            catalog,
            last_values,
            sandbox: Arc::new(sandbox),
            unsettled: AtomicU64::new(0),
        })
    }

    /// A trusted read query's output in the named format.
    pub(crate) async fn query(&self, sql: &str, format: &str) -> Result<Vec<u8>> {
        let format = engine::output_format(format)?;
        self.engine.query(sql.to_owned(), format).await
    }

    /// The engine's active parts outside `system` (see [`PartsSummary`]).
    pub(crate) async fn parts(&self) -> Result<PartsSummary> {
        let sql = "SELECT count(), sum(rows), sum(bytes_on_disk) FROM system.parts \
                   WHERE active AND database != 'system'";
        let output = self.query(sql, "TabSeparated").await?;
        let text = String::from_utf8_lossy(&output);
        let numbers: Vec<u64> = text
            .split_whitespace()
            .map(str::parse)
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| Error::Engine(format!("system.parts answered {text:?}")))?;
        match numbers[..] {
            [parts, rows, bytes_on_disk] => Ok(PartsSummary {
                parts,
                rows,
                bytes_on_disk,
            }),
            _ => Err(Error::Engine(format!("system.parts answered {text:?}"))),
        }
    }

    /// One untrusted read-only statement, streamed (see
    /// [`Ingestor::query_untrusted_stream`](crate::Ingestor::query_untrusted_stream)).
    pub(crate) async fn query_read_only_stream(
        &self,
        sql: &str,
        format: &str,
        scope: &ReadScope,
        database: Option<&str>,
    ) -> Result<QueryChunks> {
        let format = engine::output_format(format)?;
        let catalog = Arc::clone(&self.catalog);
        let last_values = Arc::clone(&self.last_values);
        let snapshot = move |call: &sandbox::LastValuesCall| {
            let not_cached = || Error::NotCached {
                database: call.database.clone(),
                retention_policy: call.retention_policy.clone(),
                measurement: call.measurement.clone(),
            };
            let database = catalog.database(&call.database).ok_or_else(not_cached)?;
            let table = database
                .table(&call.retention_policy, &call.measurement)
                .ok_or_else(not_cached)?;
            last_values.cache(&table).snapshot().ok_or_else(not_cached)
        };
        let statement = Statement {
            sql: sql.to_owned(),
            format,
            scope: scope.clone(),
            database: database.map(str::to_owned),
            snapshot,
        };
        stream::run(&self.engine, &self.sandbox, statement).await
    }

    /// A statement a translator wrote, under the query limits.
    pub(crate) async fn query_translated(&self, sql: &str) -> Result<Vec<RecordBatch>> {
        self.engine.query_read_only_arrow(sql.to_owned()).await
    }

    /// A trusted query's result as Arrow batches.
    pub(crate) async fn query_arrow(&self, sql: &str) -> Result<Vec<RecordBatch>> {
        self.engine.query_arrow(sql.to_owned()).await
    }

    /// The databases, sorted.
    pub(crate) fn databases(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .catalog
            .databases()
            .iter()
            .map(|db| db.name.clone())
            .collect();
        names.sort();
        names
    }

    /// The retention policies of `db` with their durations, sorted.
    pub(crate) fn retention_policies(&self, db: &str) -> Vec<(String, Option<Duration>)> {
        let Some(database) = self.catalog.database(db) else {
            return Vec::new();
        };
        database
            .retention_policies()
            .into_iter()
            .map(|(name, seconds)| (name, (seconds > 0).then(|| Duration::from_secs(seconds))))
            .collect()
    }

    /// The duplicate policies set for `db`, sorted.
    pub(crate) fn duplicate_policies(&self, db: &str) -> Vec<(Option<String>, DuplicatePolicy)> {
        self.catalog
            .database(db)
            .map(|database| database.duplicate_policies())
            .unwrap_or_default()
    }

    /// The measurements of `rp` of `db` that have a table, sorted.
    pub(crate) fn measurements(&self, db: &str, rp: &str) -> Vec<MeasurementSchema> {
        let Some(database) = self.catalog.database(db) else {
            return Vec::new();
        };
        let mut measurements: Vec<MeasurementSchema> = database
            .tables()
            .into_iter()
            .filter(|((table_rp, _), _)| table_rp == rp)
            .map(|((_, name), table)| MeasurementSchema::of(&database, name, &table))
            .collect();
        measurements.sort_by(|a, b| a.name.cmp(&b.name));
        measurements
    }

    /// One measurement, if it has a table.
    pub(crate) fn measurement(&self, db: &str, rp: &str, name: &str) -> Option<MeasurementSchema> {
        let database = self.catalog.database(db)?;
        let table = database.table(rp, name)?;
        Some(MeasurementSchema::of(&database, name.to_owned(), &table))
    }

    /// The cached newest values of the series `keep` accepts; `None` if
    /// the measurement is not cached.
    pub(crate) fn last_values(
        &self,
        db: &str,
        rp: &str,
        measurement: &str,
        keep: impl FnMut(&[(&str, &str)]) -> bool,
    ) -> Option<Vec<LastSeries>> {
        self.cache_of((db, rp, measurement))?.read(keep)
    }

    /// The last-value cache of a measurement's table, if it has one.
    fn cache_of(&self, table: (&str, &str, &str)) -> Option<Arc<TableLast>> {
        Some(self.last_values.cache(self.table(table)?.as_ref()))
    }

    /// A measurement's table in the catalog.
    fn table(&self, (db, rp, measurement): (&str, &str, &str)) -> Option<Arc<Table>> {
        self.catalog.database(db)?.table(rp, measurement)
    }

    /// The series of a measurement the matchers select that have a value
    /// of `field` in `range` (ns), from the in-memory index; `None` if the
    /// measurement is not indexed now.
    pub(crate) fn indexed_series(
        &self,
        table: (&str, &str, &str),
        matchers: &[TagMatcher<'_>],
        field: &str,
        range: Option<(i64, i64)>,
    ) -> Option<Vec<IndexedSeries>> {
        let found = self.cache_of(table)?.select(matchers, field, range)?;
        IngestStats::add(&self.engine.stats.index_reads, 1);
        Some(found)
    }

    /// The values of tag `key` among a measurement's series the matchers
    /// select (with a value of `field` if given, in `range` if given),
    /// sorted, from the in-memory index; `None` if the measurement is not
    /// indexed now.
    pub(crate) fn tag_values(
        &self,
        table: (&str, &str, &str),
        key: &str,
        matchers: &[TagMatcher<'_>],
        field: Option<&str>,
        range: Option<(i64, i64)>,
    ) -> Option<Vec<String>> {
        let values = self
            .cache_of(table)?
            .tag_values(key, matchers, field, range)?;
        IngestStats::add(&self.engine.stats.index_reads, 1);
        Some(values)
    }

    /// The tag keys of a measurement's series the matchers select, as
    /// [`tag_values`](Self::tag_values) selects them.
    pub(crate) fn tag_keys(
        &self,
        table: (&str, &str, &str),
        matchers: &[TagMatcher<'_>],
        field: Option<&str>,
        range: Option<(i64, i64)>,
    ) -> Option<Vec<String>> {
        let keys = self.cache_of(table)?.tag_keys(matchers, field, range)?;
        IngestStats::add(&self.engine.stats.index_reads, 1);
        Some(keys)
    }

    /// See [`LastValues::settled_version`]; in the `clickhouse` storage
    /// mode a new number at every call: other nodes' late writes and
    /// edits move nothing here.
    pub(crate) fn settled_version(&self, database: &str) -> u64 {
        match self.engine.cluster {
            None => self.last_values.settled_version(database),
            Some(_) => self.unsettled.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Each series' samples of a numeric field in `range` (ns), or the
    /// part of it memory holds, in `ids`' order; `None` if memory holds
    /// no part of it. Asked with no series, it tells only what memory
    /// holds, and is not counted as a read. Times in units of `per` ns,
    /// the last of equal times kept.
    pub(crate) fn recent_samples<S: Taken>(
        &self,
        table: (&str, &str, &str),
        field: &str,
        ids: &[u64],
        range: (i64, i64),
        per: i64,
    ) -> Option<RecentSamples<S>> {
        let samples = self.table(table).and_then(|table| {
            self.last_values
                .cache(&table)
                .recent(field, ids, range, per, table.duplicates)
        });
        let counter = match samples {
            Some(_) => &self.engine.stats.recent_reads,
            None => &self.engine.stats.recent_misses,
        };
        if !ids.is_empty() {
            IngestStats::add(counter, 1);
        }
        samples
    }
}

/// A measurement of one retention policy, as [`Ingestor::measurements`](crate::Ingestor::measurements)
/// lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeasurementSchema {
    /// The measurement's name.
    pub name: String,
    /// Its fields and their types, sorted by name.
    pub fields: Vec<(String, schema::FieldType)>,
    /// The tag keys of its series, sorted.
    pub tag_keys: Vec<String>,
}

impl MeasurementSchema {
    fn of(database: &catalog::Database, name: String, table: &catalog::Table) -> MeasurementSchema {
        let mut fields = table.schema().fields.clone();
        fields.sort_by(|a, b| a.0.cmp(&b.0));
        MeasurementSchema {
            tag_keys: database.series.tag_keys(&name),
            name,
            fields,
        }
    }
}
