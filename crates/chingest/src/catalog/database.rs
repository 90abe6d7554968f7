//! One InfluxDB database: its tables by retention policy and measurement,
//! its retention and duplicate policies, its views, the lock that
//! serializes its DDL, and the series a write in flight admitted into it
//! ([`Admission`]).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use crate::catalog::policies::{Policy, TableDefaults};
use crate::catalog::series::SeriesState;
use crate::catalog::table::Table;
use crate::config::CardinalityLimits;
use crate::config::DuplicatePolicy;
use crate::engine::{Engine, StatementKind};
use crate::error::{Error, Result};
use crate::layout::names::{quote_literal, TableNames};
use crate::layout::schema::{self, FieldType, TableSchema};
use crate::layout::series::SeriesKey;

/// One InfluxDB database.
#[derive(Debug)]
pub(crate) struct Database {
    /// The database name as the user gave it.
    pub(crate) name: String,
    /// Quoted series table name.
    pub(crate) series_table: String,
    pub(crate) series: SeriesState,
    /// Fact tables by retention policy, then measurement.
    pub(super) tables: RwLock<HashMap<String, HashMap<String, Arc<Table>>>>,
    /// Retention policies created explicitly: name → seconds rows live
    /// (0: forever). Policies only written to are not listed here.
    pub(super) retention: RwLock<HashMap<String, u64>>,
    /// Duplicate policies set for the database (`""`) and measurements.
    pub(super) duplicates: RwLock<HashMap<String, DuplicatePolicy>>,
    /// Serializes DDL on this database.
    ddl: tokio::sync::Mutex<()>,
}

impl Database {
    pub(super) fn new(name: &str) -> Self {
        Database {
            name: name.to_owned(),
            series_table: TableNames::new(name, "", "").series_table,
            series: SeriesState::default(),
            tables: RwLock::default(),
            retention: RwLock::default(),
            duplicates: RwLock::default(),
            ddl: tokio::sync::Mutex::new(()),
        }
    }

    /// The table for (rp, measurement), if it exists.
    pub(crate) fn table(&self, rp: &str, measurement: &str) -> Option<Arc<Table>> {
        self.tables
            .read()
            .unwrap()
            .get(rp)?
            .get(measurement)
            .cloned()
    }

    pub(super) fn insert_table(&self, rp: &str, measurement: &str, table: Arc<Table>) {
        self.tables
            .write()
            .unwrap()
            .entry(rp.to_owned())
            .or_default()
            .insert(measurement.to_owned(), table);
    }

    /// Every table, for flushing and closing.
    pub(crate) fn tables(&self) -> Vec<((String, String), Arc<Table>)> {
        self.tables
            .read()
            .unwrap()
            .iter()
            .flat_map(|(rp, tables)| {
                tables
                    .iter()
                    .map(|(m, t)| ((rp.clone(), m.clone()), Arc::clone(t)))
            })
            .collect()
    }

    /// Makes sure the table for (rp, measurement) exists with at least
    /// `fields` (fields that exist with another type are left as they are:
    /// the caller's type check rejects those values).
    pub(super) async fn ensure_table(
        &self,
        engine: &Engine,
        defaults: &TableDefaults,
        rp: &str,
        measurement: &str,
        fields: &[(String, FieldType)],
    ) -> Result<Arc<Table>> {
        let _ddl = self.ddl.lock().await;
        let duplicates = self.duplicate_policy(measurement, defaults.duplicates);
        let table = self
            .ensure_table_locked(engine, rp, measurement, fields, duplicates, defaults)
            .await?;
        if defaults.view_rp.as_deref() == Some(rp) {
            self.create_view(engine, &table, measurement).await?;
        }
        Ok(table)
    }

    /// The duplicate policy of `measurement`: its own, else the database's,
    /// else `default`.
    pub(crate) fn duplicate_policy(
        &self,
        measurement: &str,
        default: DuplicatePolicy,
    ) -> DuplicatePolicy {
        let policies = self.duplicates.read().unwrap();
        policies
            .get(measurement)
            .or_else(|| policies.get(""))
            .copied()
            .unwrap_or(default)
    }

    /// The duplicate policies set: the database's (`None`) and
    /// measurements', sorted.
    pub(crate) fn duplicate_policies(&self) -> Vec<(Option<String>, DuplicatePolicy)> {
        let mut policies: Vec<_> = self
            .duplicates
            .read()
            .unwrap()
            .iter()
            .map(|(m, p)| ((!m.is_empty()).then(|| m.clone()), *p))
            .collect();
        policies.sort_by(|a, b| a.0.cmp(&b.0));
        policies
    }

    /// Sets the duplicate policy of the database (`measurement` `None`) or
    /// of one measurement, for the tables created from now on. Refused
    /// ([`Error::Conflict`]) while a table it would cover keeps another
    /// policy: a table's engine cannot change.
    pub(crate) async fn set_duplicate_policy(
        &self,
        engine: &Engine,
        measurement: Option<&str>,
        policy: DuplicatePolicy,
        default: DuplicatePolicy,
    ) -> Result<()> {
        let _ddl = self.ddl.lock().await;
        let key = measurement.unwrap_or("");
        let conflicting: Vec<String> = {
            let own = self.duplicates.read().unwrap();
            self.tables()
                .into_iter()
                .filter(|((_, m), table)| {
                    let covered = match measurement {
                        Some(wanted) => m == wanted,
                        None => !own.contains_key(m),
                    };
                    covered && table.duplicates != policy
                })
                .map(|((rp, m), table)| format!("{m} in {rp} ({})", table.duplicates))
                .collect()
        };
        if !conflicting.is_empty() {
            let current = self.duplicate_policy(key, default);
            return Err(Error::Conflict(format!(
                "tables already exist with another duplicate policy: {}; a table keeps the \
                 policy it was created with (now {current}), so set it before the first write",
                conflicting.join(", ")
            )));
        }
        let names = TableNames::new(&self.name, "", "");
        engine
            .execute(format!(
                "INSERT INTO {} (measurement, policy, updated) SETTINGS async_insert = 0 \
                 VALUES ({}, {}, now64(3))",
                names.duplicate_policies_table,
                quote_literal(key),
                quote_literal(policy.as_str()),
            ))
            .await?;
        self.duplicates
            .write()
            .unwrap()
            .insert(key.to_owned(), policy);
        Ok(())
    }

    /// Takes a policy the registries record (read on open, or learnt
    /// from the shards).
    pub(super) fn note_policy(&self, policy: Policy) {
        match policy {
            Policy::Retention(rp, seconds) => {
                self.retention.write().unwrap().insert(rp, seconds);
            }
            Policy::Duplicates(measurement, policy) => {
                self.duplicates.write().unwrap().insert(measurement, policy);
            }
        }
    }

    /// Adds the table another node made on the shards, or the fields
    /// another node gave it (the `clickhouse` storage mode), under the
    /// DDL lock so that no write of this node's changes it meanwhile;
    /// whether the catalog changed.
    pub(super) async fn learn_table(
        &self,
        rp: &str,
        measurement: &str,
        fields: Vec<(String, FieldType)>,
        duplicates: DuplicatePolicy,
    ) -> bool {
        let _ddl = self.ddl.lock().await;
        let Some(table) = self.table(rp, measurement) else {
            let schema = TableSchema::new(TableNames::new(&self.name, rp, measurement), fields);
            let table = Table::new(&self.name, rp, measurement, schema, duplicates);
            self.insert_table(rp, measurement, Arc::new(table));
            return true;
        };
        let current = table.schema();
        let added: Vec<_> = fields
            .into_iter()
            .filter(|(name, _)| current.field(name).is_none())
            .collect();
        if added.is_empty() {
            return false;
        }
        *table.schema.write().unwrap() = Arc::new(current.with_fields(&added));
        true
    }

    /// Seconds rows of `rp` live (0: forever, also for unknown policies).
    pub(crate) fn retention_seconds(&self, rp: &str) -> u64 {
        self.retention.read().unwrap().get(rp).copied().unwrap_or(0)
    }

    /// Every retention policy: created ones with their durations, and the
    /// ones that only have tables (forever), sorted by name.
    pub(crate) fn retention_policies(&self) -> Vec<(String, u64)> {
        let mut policies: HashMap<String, u64> = self.retention.read().unwrap().clone();
        for rp in self.tables.read().unwrap().keys() {
            policies.entry(rp.clone()).or_insert(0);
        }
        let mut policies: Vec<_> = policies.into_iter().collect();
        policies.sort();
        policies
    }

    /// Creates or changes a retention policy: records it and applies its
    /// duration as the TTL of every table it already has.
    pub(crate) async fn set_retention_policy(
        &self,
        engine: &Engine,
        rp: &str,
        seconds: u64,
    ) -> Result<()> {
        let _ddl = self.ddl.lock().await;
        let names = TableNames::new(&self.name, rp, "");
        let record = format!(
            "INSERT INTO {} (name, duration_seconds, updated) SETTINGS async_insert = 0 \
             VALUES ({}, {seconds}, now64(3))",
            names.retention_table,
            quote_literal(rp),
        );
        let tables = self
            .tables
            .read()
            .unwrap()
            .get(rp)
            .cloned()
            .unwrap_or_default();
        let alters = tables
            .values()
            .map(|t| schema::alter_ttl_sql(&t.schema().names, seconds))
            .collect();
        engine
            .execute_on_storage(alters, StatementKind::Change, Vec::new())
            .await?;
        engine.execute(record).await?;
        self.retention
            .write()
            .unwrap()
            .insert(rp.to_owned(), seconds);
        Ok(())
    }

    /// Recreates the view of `measurement` in `view_rp`, if that table exists.
    pub(super) async fn refresh_view(
        &self,
        engine: &Engine,
        view_rp: &str,
        measurement: &str,
    ) -> Result<()> {
        let _ddl = self.ddl.lock().await;
        match self.table(view_rp, measurement) {
            Some(table) => self.create_view(engine, &table, measurement).await,
            None => Ok(()),
        }
    }

    async fn create_view(&self, engine: &Engine, table: &Table, measurement: &str) -> Result<()> {
        let sql = schema::view_sql(
            &table.schema(),
            measurement,
            &self.series.tag_keys(measurement),
        );
        engine.execute(sql).await
    }

    async fn ensure_table_locked(
        &self,
        engine: &Engine,
        rp: &str,
        measurement: &str,
        fields: &[(String, FieldType)],
        duplicates: DuplicatePolicy,
        defaults: &TableDefaults,
    ) -> Result<Arc<Table>> {
        if let Some(table) = self.table(rp, measurement) {
            let current = table.schema();
            let added: Vec<_> = fields
                .iter()
                .filter(|(name, _)| current.field(name).is_none())
                .cloned()
                .collect();
            if !added.is_empty() {
                engine
                    .execute_on_storage(
                        vec![schema::add_columns_sql(&current.names, &added)],
                        StatementKind::Change,
                        vec![stored_name(&current.names)],
                    )
                    .await?;
                *table.schema.write().unwrap() = Arc::new(current.with_fields(&added));
            }
            return Ok(table);
        }
        let schema = TableSchema::new(
            TableNames::new(&self.name, rp, measurement),
            fields.to_vec(),
        );
        let statement = schema::create_table_sql(
            &schema,
            self.retention_seconds(rp),
            defaults.downsampled.read().unwrap().contains(&self.name),
            duplicates,
            engine.keeper_path(),
        );
        engine
            .execute_on_storage(
                vec![statement],
                StatementKind::Create,
                vec![stored_name(&schema.names)],
            )
            .await?;
        let table = Arc::new(Table::new(&self.name, rp, measurement, schema, duplicates));
        self.insert_table(rp, measurement, Arc::clone(&table));
        Ok(table)
    }
}

/// A fact table's database and name, unquoted.
fn stored_name(names: &TableNames) -> (String, String) {
    (names.database_name.clone(), names.storage_name.clone())
}

/// The series a write admitted under the limits; dropping it (once the
/// write is logged, or failed) releases them.
#[derive(Debug, Default)]
pub(crate) struct Admission {
    held: Option<(Arc<Database>, Vec<u64>)>,
}

impl Admission {
    /// Admits `id` (with `key`) into `db` under `limits` for this write:
    /// `Ok(true)` if it is new to the database, `Ok(false)` if known, or
    /// which limit refuses it.
    pub(crate) fn admit(
        &mut self,
        db: &Arc<Database>,
        id: u64,
        key: &SeriesKey,
        limits: CardinalityLimits,
    ) -> Result<bool, String> {
        let admitted = db.series.admitting(limits).admit(id, key)?;
        if admitted {
            self.hold(db, id);
        }
        Ok(admitted)
    }

    /// Admits every series of `series` (an Arrow write's) under one lock,
    /// keeping those new to the database; the first refusal fails them all.
    pub(crate) fn admit_all(
        &mut self,
        db: &Arc<Database>,
        series: Vec<(u64, SeriesKey)>,
        limits: CardinalityLimits,
    ) -> Result<Vec<(u64, SeriesKey)>, String> {
        // Most writes bring no series the database does not know.
        if series.is_empty() {
            return Ok(series);
        }
        let mut admitter = db.series.admitting(limits);
        let mut new = Vec::with_capacity(series.len());
        for (id, key) in series {
            if admitter.admit(id, &key)? {
                self.hold(db, id);
                new.push((id, key));
            }
        }
        Ok(new)
    }

    /// Keeps `id`'s admission until this write is logged or fails.
    fn hold(&mut self, db: &Arc<Database>, id: u64) {
        let (_, ids) = self
            .held
            .get_or_insert_with(|| (Arc::clone(db), Vec::new()));
        ids.push(id);
    }

    /// Adds the admissions of `other` to this one (same database).
    pub(crate) fn absorb(&mut self, mut other: Admission) {
        if let Some((db, ids)) = other.held.take() {
            match &mut self.held {
                Some((_, mine)) => mine.extend(ids),
                None => self.held = Some((db, ids)),
            }
        }
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        if let Some((db, ids)) = self.held.take() {
            db.series.release(&ids);
        }
    }
}
