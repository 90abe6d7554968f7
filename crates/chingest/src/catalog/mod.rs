//! What this process knows about the engine's databases and tables: fact
//! table schemas and the series already stored. Metadata only: the rows on
//! their way in (`write`) and the cached last values (`last_value`) are
//! kept by the layers above, keyed by [`TableRef`].
//!
//! The engine's own catalog is the source of truth. On open it is read back
//! (`system.columns`, every series table's ids), so schemas and series
//! survive a restart. Schema changes go through [`Database::ensure_table`],
//! which serializes DDL per database and re-reads nothing: it is the only
//! writer of the schemas it hands out.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};

use arrow::array::{AsArray, MapBuilder, StringBuilder, UInt64Array};
use arrow::record_batch::RecordBatch;

use crate::config::{CardinalityLimits, DuplicatePolicy};
use crate::engine::{self, Connection, DataDir, Engine};
use crate::error::{Error, Result};
use crate::layout::names::{
    self, quote_ident, quote_literal, TableNames, LEGACY_STORAGE_SUFFIX, SERIES_TABLE,
};
use crate::layout::schema::{self, FieldType, TableSchema};
use crate::layout::series::{FingerprintMap, SeriesIdMap, SeriesIdSet, SeriesKey};
use crate::wal::{Lsn, TableRef};

/// One fact table: its names and its current schema.
#[derive(Debug)]
pub(crate) struct Table {
    /// The names writes use for it, which the log records.
    pub(crate) id: TableRef,
    schema: RwLock<Arc<TableSchema>>,
    /// What the table keeps of points written again (fixed at creation).
    pub(crate) duplicates: DuplicatePolicy,
}

impl Table {
    fn new(
        database: &str,
        rp: &str,
        measurement: &str,
        schema: TableSchema,
        duplicates: DuplicatePolicy,
    ) -> Self {
        Table {
            id: TableRef {
                database: database.to_owned(),
                retention_policy: rp.to_owned(),
                measurement: measurement.to_owned(),
            },
            schema: RwLock::new(Arc::new(schema)),
            duplicates,
        }
    }

    /// The current schema (a snapshot; later schemas only add fields).
    pub(crate) fn schema(&self) -> Arc<TableSchema> {
        Arc::clone(&self.schema.read().unwrap())
    }
}

/// Series ids of one database: which are stored or logged, which raw
/// series keys map to which id, and the rows not yet committed.
///
/// A series is registered when the first record that carries it is
/// logged ([`register`](Self::register), called by the appender in log
/// order): from then on other writes leave it out of their records, and its
/// row waits in `pending` until a flush of the database commits it, before
/// any fact row flushed after it.
#[derive(Debug, Default)]
pub(crate) struct SeriesState {
    /// Fingerprint of a series key as written on a line → series_id. Lets a
    /// series seen before skip parsing its tags, canonicalization and hashing.
    pub(crate) by_raw_key: RwLock<FingerprintMap<u64>>,
    /// Ids stored in the series table or logged, and the logged rows not
    /// yet committed: one lock, so an id is never known without its row
    /// being stored or pending.
    registry: Mutex<Registry>,
    /// Held while pending rows are being committed, so a flush never inserts
    /// facts while the series they use are still in flight.
    committing: Mutex<()>,
    /// Tag keys seen per measurement: the columns of its view.
    tag_keys: Mutex<HashMap<String, BTreeSet<String>>>,
    /// Hashes of the values seen per (measurement, tag key), kept while
    /// the values-per-tag limit is set.
    tag_values: Mutex<HashMap<(String, String), HashSet<u64>>>,
}

/// Entries of a database's raw-key cache: two spellings for each of the
/// default limit's million series. Measured (`HashMap`, 1 M entries): 69
/// bytes per entry, so at most ~140 MB; plus 38 bytes per known series
/// (the id set) and 19 bytes per tag value tracked for its limit.
pub(crate) const RAW_KEY_CACHE_MAX: usize = 2_000_000;

/// A tag value's hash, as the values-per-tag limit counts it.
fn value_hash(value: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(value.as_bytes())
}

#[derive(Debug, Default)]
struct Registry {
    known: SeriesIdSet,
    /// Rows to commit, with the lsn of the record that logged them.
    pending: Vec<(Lsn, u64, SeriesKey)>,
    /// Series admitted under the series limit by writes not yet logged,
    /// with how many writes hold each: they count against the limit until
    /// known (then `admitted_known` keeps them from counting twice) or
    /// released.
    admitted: SeriesIdMap<usize>,
    admitted_known: usize,
}

impl Registry {
    /// Series stored, logged, or admitted by writes in flight.
    fn count(&self) -> usize {
        self.known.len() + self.admitted.len() - self.admitted_known
    }
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
        let admitted = db.series.admit(id, key, limits)?;
        if admitted {
            let (_, ids) = self
                .held
                .get_or_insert_with(|| (Arc::clone(db), Vec::new()));
            ids.push(id);
        }
        Ok(admitted)
    }

    /// Admits every series of `series` (an Arrow write's), keeping those
    /// new to the database; the first refusal fails them all.
    pub(crate) fn admit_all(
        &mut self,
        db: &Arc<Database>,
        series: Vec<(u64, SeriesKey)>,
        limits: CardinalityLimits,
    ) -> Result<Vec<(u64, SeriesKey)>, String> {
        let mut new = Vec::with_capacity(series.len());
        for (id, key) in series {
            if self.admit(db, id, &key, limits)? {
                new.push((id, key));
            }
        }
        Ok(new)
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

impl SeriesState {
    /// Registers the series of the record numbered `lsn`: returns those not
    /// known yet, which the record must carry, and queues their rows.
    pub(crate) fn register(&self, lsn: Lsn, rows: Vec<(u64, SeriesKey)>) -> Vec<(u64, SeriesKey)> {
        if rows.is_empty() {
            return rows;
        }
        let mut registry = self.registry.lock().unwrap();
        let registry = &mut *registry;
        let fresh: Vec<_> = rows
            .into_iter()
            .filter(|(id, _)| registry.known.insert(*id))
            .collect();
        registry.admitted_known += fresh
            .iter()
            .filter(|(id, _)| registry.admitted.contains_key(id))
            .count();
        registry
            .pending
            .extend(fresh.iter().map(|(id, key)| (lsn, *id, key.clone())));
        fresh
    }

    /// Forgets series dropped from the series table: a later write of one
    /// registers it (and stores its row) again.
    pub(crate) fn forget(&self, ids: impl IntoIterator<Item = u64>) {
        let forgotten: SeriesIdSet = ids.into_iter().collect();
        // A line spelled as before must not find the id there either, or
        // it would skip the series row it now has to carry again. (Taken
        // before `registry`, not inside it: parsing holds this lock while
        // it admits series.)
        self.by_raw_key
            .write()
            .unwrap()
            .retain(|_, id| !forgotten.contains(id));
        let mut registry = self.registry.lock().unwrap();
        for id in forgotten {
            if registry.known.remove(&id) && registry.admitted.contains_key(&id) {
                registry.admitted_known -= 1;
            }
        }
    }

    /// Admits a series the database does not know under `limits`, for a
    /// write that will log it, or says which limit it would pass. `Ok(true)`:
    /// admitted, to be released with [`Admission`]; `Ok(false)`: known.
    /// Checks, counts and admits under one lock, so concurrent writers
    /// cannot pass a limit together.
    pub(crate) fn admit(
        &self,
        id: u64,
        key: &SeriesKey,
        limits: CardinalityLimits,
    ) -> Result<bool, String> {
        let mut registry = self.registry.lock().unwrap();
        if registry.known.contains(&id) {
            return Ok(false);
        }
        if let Some(holders) = registry.admitted.get_mut(&id) {
            *holders += 1;
            return Ok(true);
        }
        let count = registry.count();
        if limits.max_series > 0 && count >= limits.max_series {
            return Err(format!(
                "series limit reached: the database has {count} series (limit {}); \
                 a new series is refused",
                limits.max_series
            ));
        }
        if limits.max_values_per_tag > 0 {
            let mut tag_values = self.tag_values.lock().unwrap();
            let key_of = |tag: &str| (key.measurement.clone(), tag.to_owned());
            for (tag, value) in &key.tags {
                if let Some(values) = tag_values.get(&key_of(tag)) {
                    if values.len() >= limits.max_values_per_tag
                        && !values.contains(&value_hash(value))
                    {
                        return Err(format!(
                            "tag value limit reached: tag {tag:?} of measurement {:?} has {} \
                             values (limit {}); a new value is refused",
                            key.measurement,
                            values.len(),
                            limits.max_values_per_tag
                        ));
                    }
                }
            }
            for (tag, value) in &key.tags {
                tag_values
                    .entry(key_of(tag))
                    .or_default()
                    .insert(value_hash(value));
            }
        }
        registry.admitted.insert(id, 1);
        Ok(true)
    }

    /// Releases admissions (see [`admit`](Self::admit)).
    fn release(&self, ids: &[u64]) {
        let mut registry = self.registry.lock().unwrap();
        for id in ids {
            let Some(holders) = registry.admitted.get_mut(id) else {
                continue;
            };
            *holders -= 1;
            if *holders == 0 {
                registry.admitted.remove(id);
                if registry.known.contains(id) {
                    registry.admitted_known -= 1;
                }
            }
        }
    }

    /// Counts tag values of stored series (read back on open).
    pub(crate) fn note_tag_values<'a>(
        &self,
        values: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
    ) {
        let mut tag_values = self.tag_values.lock().unwrap();
        for (measurement, tag, value) in values {
            tag_values
                .entry((measurement.to_owned(), tag.to_owned()))
                .or_default()
                .insert(value_hash(value));
        }
    }

    /// Adds raw series keys to the lookup cache. Past
    /// [`RAW_KEY_CACHE_MAX`] entries the cache starts over: the same series
    /// spelled many ways (tags reordered, escaped differently) must not grow
    /// it without bound.
    pub(crate) fn cache_raw_keys(&self, raw_keys: Vec<(u128, u64)>) {
        if !raw_keys.is_empty() {
            let mut cache = self.by_raw_key.write().unwrap();
            if cache.len() + raw_keys.len() > RAW_KEY_CACHE_MAX {
                *cache = FingerprintMap::default();
            }
            cache.extend(raw_keys);
        }
    }

    /// Records the tag keys of series met by a write; returns the
    /// measurements that gained keys (their views need new columns).
    pub(crate) fn note_tag_keys(&self, rows: &[(u64, SeriesKey)]) -> Vec<String> {
        let mut grown = Vec::new();
        let mut tag_keys = self.tag_keys.lock().unwrap();
        for (_, key) in rows {
            let keys = tag_keys.entry(key.measurement.clone()).or_default();
            let before = keys.len();
            keys.extend(key.tags.iter().map(|(k, _)| k.clone()));
            if keys.len() > before && !grown.contains(&key.measurement) {
                grown.push(key.measurement.clone());
            }
        }
        grown
    }

    /// The tag keys seen for `measurement`, sorted.
    pub(crate) fn tag_keys(&self, measurement: &str) -> Vec<String> {
        self.tag_keys
            .lock()
            .unwrap()
            .get(measurement)
            .map(|keys| keys.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Whether each of `ids` is stored or logged, under one lock.
    pub(crate) fn known_mask(&self, ids: impl Iterator<Item = u64>) -> Vec<bool> {
        let registry = self.registry.lock().unwrap();
        ids.map(|id| registry.known.contains(&id)).collect()
    }

    /// The lsn of the oldest record whose series rows are not committed.
    pub(crate) fn oldest_pending(&self) -> Option<Lsn> {
        let registry = self.registry.lock().unwrap();
        registry.pending.iter().map(|(lsn, _, _)| *lsn).min()
    }

    /// Inserts the pending series rows into `table` and returns how many.
    /// On failure they stay pending for the next flush.
    pub(crate) fn commit(&self, conn: &Connection, disk: &DataDir, table: &str) -> Result<usize> {
        let _committing = self.committing.lock().unwrap();
        let rows = std::mem::take(&mut self.registry.lock().unwrap().pending);
        if rows.is_empty() {
            return Ok(0);
        }
        let batch = series_batch(rows.iter().map(|(_, id, key)| (*id, key)));
        let inserted = engine::insert_batch(conn, table, batch, None)
            .and_then(|_| disk.sync_table(conn, table));
        match inserted {
            Ok(_) => Ok(rows.len()),
            Err(err) => {
                let mut registry = self.registry.lock().unwrap();
                let later = std::mem::replace(&mut registry.pending, rows);
                registry.pending.extend(later);
                Err(err)
            }
        }
    }
}

fn series_batch<'a>(rows: impl Iterator<Item = (u64, &'a SeriesKey)> + Clone) -> RecordBatch {
    let ids = UInt64Array::from_iter_values(rows.clone().map(|(id, _)| id));
    let mut measurements = StringBuilder::new();
    let mut tags = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
    for (_, key) in rows {
        measurements.append_value(&key.measurement);
        for (k, v) in &key.tags {
            tags.keys().append_value(k);
            tags.values().append_value(v);
        }
        tags.append(true)
            .expect("keys and values are appended in pairs");
    }
    RecordBatch::try_from_iter([
        ("series_id", Arc::new(ids) as _),
        ("measurement", Arc::new(measurements.finish()) as _),
        ("tags", Arc::new(tags.finish()) as _),
    ])
    .expect("series columns have equal lengths")
}

/// One InfluxDB database.
#[derive(Debug)]
pub(crate) struct Database {
    /// The database name as the user gave it.
    pub(crate) name: String,
    /// Quoted series table name.
    pub(crate) series_table: String,
    pub(crate) series: SeriesState,
    /// Fact tables by retention policy, then measurement.
    tables: RwLock<HashMap<String, HashMap<String, Arc<Table>>>>,
    /// Retention policies created explicitly: name → seconds rows live
    /// (0: forever). Policies only written to are not listed here.
    retention: RwLock<HashMap<String, u64>>,
    /// Duplicate policies set for the database (`""`) and measurements.
    duplicates: RwLock<HashMap<String, DuplicatePolicy>>,
    /// Serializes DDL on this database.
    ddl: tokio::sync::Mutex<()>,
}

impl Database {
    fn new(name: &str) -> Self {
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

    fn insert_table(&self, rp: &str, measurement: &str, table: Arc<Table>) {
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
    async fn ensure_table(
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
            .ensure_table_locked(engine, rp, measurement, fields, duplicates)
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
        let mut statements = vec![format!(
            "INSERT INTO {} (name, duration_seconds, updated) SETTINGS async_insert = 0 \
             VALUES ({}, {seconds}, now64(3))",
            names.retention_table,
            quote_literal(rp),
        )];
        let tables = self
            .tables
            .read()
            .unwrap()
            .get(rp)
            .cloned()
            .unwrap_or_default();
        statements.extend(
            tables
                .values()
                .map(|t| schema::alter_ttl_sql(&t.schema().names, seconds)),
        );
        engine.execute_all(statements).await?;
        self.retention
            .write()
            .unwrap()
            .insert(rp.to_owned(), seconds);
        Ok(())
    }

    /// Recreates the view of `measurement` in `view_rp`, if that table exists.
    async fn refresh_view(&self, engine: &Engine, view_rp: &str, measurement: &str) -> Result<()> {
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
                    .execute(schema::add_columns_sql(&current.names, &added))
                    .await?;
                *table.schema.write().unwrap() = Arc::new(current.with_fields(&added));
            }
            return Ok(table);
        }
        let schema = TableSchema::new(
            TableNames::new(&self.name, rp, measurement),
            fields.to_vec(),
        );
        let statement = schema::create_table_sql(&schema, self.retention_seconds(rp), duplicates);
        engine.execute(statement).await?;
        let table = Arc::new(Table::new(&self.name, rp, measurement, schema, duplicates));
        self.insert_table(rp, measurement, Arc::clone(&table));
        Ok(table)
    }
}

/// All databases this process manages.
#[derive(Debug, Default)]
pub(crate) struct Catalog {
    databases: RwLock<HashMap<String, Arc<Database>>>,
    /// Serializes database creation.
    create: tokio::sync::Mutex<()>,
    defaults: TableDefaults,
}

/// What every new table gets unless its database says otherwise.
#[derive(Debug, Clone, Default)]
pub(crate) struct TableDefaults {
    /// The retention policy whose tables get a view named after the
    /// measurement ([`IngestConfig::view_retention_policy`](crate::IngestConfig::view_retention_policy)).
    pub(crate) view_rp: Option<String>,
    /// The duplicate policy of tables whose database and measurement set
    /// none.
    pub(crate) duplicates: DuplicatePolicy,
}

impl Catalog {
    /// The database, if it exists.
    pub(crate) fn database(&self, name: &str) -> Option<Arc<Database>> {
        self.databases.read().unwrap().get(name).cloned()
    }

    /// Every database.
    pub(crate) fn databases(&self) -> Vec<Arc<Database>> {
        self.databases.read().unwrap().values().cloned().collect()
    }

    /// What new tables get by default.
    pub(crate) fn defaults(&self) -> &TableDefaults {
        &self.defaults
    }

    /// The table for (`rp`, `measurement`) of `db`, created or extended to
    /// hold `fields` first if needed (with its view, in the view retention
    /// policy).
    pub(crate) async fn ensure_table(
        &self,
        engine: &Engine,
        db: &Database,
        rp: &str,
        measurement: &str,
        fields: &[(String, FieldType)],
    ) -> Result<Arc<Table>> {
        if let Some(table) = db.table(rp, measurement) {
            let schema = table.schema();
            if fields.iter().all(|(name, _)| schema.field(name).is_some()) {
                return Ok(table);
            }
        }
        db.ensure_table(engine, &self.defaults, rp, measurement, fields)
            .await
    }

    /// Gives `measurement` of `db` the duplicate `policy` unless it has
    /// one of its own; a table it already has with another policy keeps
    /// that one (a protocol's choice yields to the user's).
    pub(crate) async fn default_duplicate_policy(
        &self,
        engine: &Engine,
        db: &Database,
        measurement: &str,
        policy: DuplicatePolicy,
    ) -> Result<()> {
        if db.duplicates.read().unwrap().contains_key(measurement) {
            return Ok(());
        }
        match db
            .set_duplicate_policy(engine, Some(measurement), policy, self.defaults.duplicates)
            .await
        {
            Ok(()) | Err(Error::Conflict(_)) => Ok(()),
            Err(other) => Err(other),
        }
    }

    /// Gives the views of `measurements` of `db` the tag columns they
    /// gained.
    pub(crate) async fn refresh_views(
        &self,
        engine: &Engine,
        db: &Database,
        measurements: &[String],
    ) -> Result<()> {
        let Some(view_rp) = self.defaults.view_rp.as_deref() else {
            return Ok(());
        };
        for measurement in measurements {
            db.refresh_view(engine, view_rp, measurement).await?;
        }
        Ok(())
    }

    /// The database, created in the engine first if needed.
    pub(crate) async fn ensure_database(
        &self,
        engine: &Engine,
        name: &str,
    ) -> Result<Arc<Database>> {
        if let Some(db) = self.database(name) {
            return Ok(db);
        }
        names::validate(names::NameKind::Database, name)?;
        let _create = self.create.lock().await;
        if let Some(db) = self.database(name) {
            return Ok(db);
        }
        let statements = schema::create_database_sql(&TableNames::new(name, "", ""));
        engine.execute_all(statements).await?;
        let db = Arc::new(Database::new(name));
        self.databases
            .write()
            .unwrap()
            .insert(name.to_owned(), Arc::clone(&db));
        Ok(db)
    }

    /// Finishes DDL a crash may have cut short, so no table is left in a
    /// state that fails every later insert or query: fact tables without
    /// the deduplication window replay relies on (also those created by
    /// older versions), tables of older versions without codecs or block
    /// numbers (`schema::PATCHABLE`), and views missing or made by an older version
    /// (`schema::VIEW_VERSION`). Every statement is idempotent.
    pub(crate) async fn repair(&self, engine: &Engine) -> Result<()> {
        let view_rp = self.defaults.view_rp.as_deref();
        let databases: Vec<_> = self.databases();
        if databases.is_empty() {
            return Ok(());
        }
        let in_list = databases
            .iter()
            .map(|db| quote_literal(&names::encode(&db.name)))
            .collect::<Vec<_>>()
            .join(", ");
        let (tables, no_codec) = engine
            .run(move |conn| {
                // Per table: a view of this version; a MergeTree without
                // the deduplication window; one without block numbers.
                let tables = engine::query_rows(
                    conn,
                    &format!(
                        "SELECT database, name, \
                         engine = 'View' AND comment = {}, \
                         endsWith(engine, 'MergeTree') \
                         AND position(engine_full, 'non_replicated_deduplication_window') = 0, \
                         endsWith(engine, 'MergeTree') \
                         AND position(engine_full, 'enable_block_number_column') = 0 \
                         FROM system.tables WHERE database IN ({in_list})",
                        quote_literal(schema::VIEW_VERSION)
                    ),
                )?;
                let no_codec = engine::query_rows(
                    conn,
                    &format!(
                        "SELECT database, table, name FROM system.columns \
                         WHERE database IN ({in_list}) AND compression_codec = '' \
                         AND (database, table) IN (SELECT database, name FROM system.tables \
                         WHERE database IN ({in_list}) AND endsWith(engine, 'MergeTree'))"
                    ),
                )?;
                Ok((tables, no_codec))
            })
            .await?;
        let mut no_codec_by_table: HashMap<(String, String), Vec<String>> = HashMap::new();
        for row in no_codec {
            if let Ok([db, table, column]) = <[String; 3]>::try_from(row) {
                no_codec_by_table
                    .entry((db, table))
                    .or_default()
                    .push(column);
            }
        }
        // Views missing or made by an older version are (re)created.
        let mut current_views = HashSet::new();
        let mut no_window = HashSet::new();
        let mut unpatchable = HashSet::new();
        for row in tables {
            if let Ok([db, name, view, window, patch]) = <[String; 5]>::try_from(row) {
                let table = (db, name);
                for (flag, set) in [
                    (view, &mut current_views),
                    (window, &mut no_window),
                    (patch, &mut unpatchable),
                ] {
                    if flag == "1" {
                        set.insert(table.clone());
                    }
                }
            }
        }
        let mut statements = Vec::new();
        for db in &databases {
            let series = (names::encode(&db.name), SERIES_TABLE.to_owned());
            if unpatchable.contains(&series) {
                let names = TableNames::new(&db.name, "", "");
                statements.push(schema::patchable_sql(&names.series_table));
            }
            for ((rp, measurement), table) in db.tables() {
                let schema = table.schema();
                let names = &schema.names;
                let table_key = (names.database_name.clone(), names.storage_name.clone());
                if no_window.contains(&table_key) {
                    statements.push(schema::dedup_window_sql(names));
                }
                if unpatchable.contains(&table_key) {
                    statements.push(schema::patchable_sql(&names.storage_table));
                }
                if let Some(columns) = no_codec_by_table.get(&table_key) {
                    statements.extend(schema::add_codecs_sql(&schema, columns));
                }
                let view = (names.database_name.clone(), names::encode(&measurement));
                if view_rp == Some(rp.as_str()) && !current_views.contains(&view) {
                    statements.push(schema::view_sql(
                        &schema,
                        &measurement,
                        &db.series.tag_keys(&measurement),
                    ));
                }
            }
        }
        if !statements.is_empty() {
            tracing::info!(
                statements = statements.len(),
                "repairing tables left unfinished"
            );
            engine.execute_all(statements).await?;
        }
        Ok(())
    }

    /// Reads back every database chingest created in the engine: its fact
    /// tables' columns and its stored series ids.
    pub(crate) async fn load(
        engine: &Engine,
        cardinality: CardinalityLimits,
        defaults: TableDefaults,
    ) -> Result<Catalog> {
        // Migrations and registry tables are DDL: made durable.
        let loaded = engine
            .run_durable(move |conn| {
                migrate_legacy_fact_tables(conn)?;
                let databases = engine::query_rows(
                    conn,
                    &format!(
                        "SELECT database FROM system.tables WHERE name = {} ORDER BY database",
                        quote_literal(SERIES_TABLE)
                    ),
                )?;
                let columns = engine::query_rows(
                    conn,
                    &format!(
                        "SELECT database, table, name, type FROM system.columns \
                         WHERE database IN (SELECT database FROM system.tables WHERE name = {0}) \
                         AND (database, table) IN (SELECT database, name FROM system.tables \
                         WHERE endsWith(engine, 'MergeTree') AND name != {0}) \
                         ORDER BY database, table, position",
                        quote_literal(SERIES_TABLE)
                    ),
                )?;
                let mut series = Vec::new();
                let mut tag_keys = Vec::new();
                let mut tag_values = Vec::new();
                let mut retention = Vec::new();
                let mut duplicates = Vec::new();
                let engines = engine::query_rows(
                    conn,
                    "SELECT database, name, engine FROM system.tables \
                     WHERE endsWith(engine, 'MergeTree')",
                )?;
                for row in &databases {
                    let db = &row[0];
                    let Some(name) = names::decode(db) else { continue };
                    let names = TableNames::new(&name, "", "");
                    // Databases from before the registry existed get one now.
                    engine::execute(conn, &schema::retention_policies_table_sql(&names))?;
                    engine::execute(conn, &schema::duplicate_policies_table_sql(&names))?;
                    for row in engine::query_rows(
                        conn,
                        &format!(
                            "SELECT measurement, policy FROM {} FINAL",
                            names.duplicate_policies_table
                        ),
                    )? {
                        if let [measurement, policy] = row.as_slice() {
                            if let Ok(policy) = policy.parse::<DuplicatePolicy>() {
                                duplicates.push((db.clone(), measurement.clone(), policy));
                            }
                        }
                    }
                    for policy in engine::query_rows(
                        conn,
                        &format!(
                            "SELECT name, duration_seconds FROM {} FINAL",
                            names.retention_table
                        ),
                    )? {
                        if let [name, seconds] = policy.as_slice() {
                            retention.push((db.clone(), name.clone(), seconds.parse::<u64>().unwrap_or(0)));
                        }
                    }
                    for batch in engine::query_arrow(conn, &format!(
                        "SELECT measurement, groupUniqArrayArray(mapKeys(tags)) FROM {} GROUP BY measurement",
                        names.series_table
                    ))? {
                        let measurements = batch.column(0).as_string::<i32>();
                        let keys = batch.column(1).as_list::<i32>();
                        for row in 0..batch.num_rows() {
                            let list = keys.value(row);
                            let list = list.as_string::<i32>();
                            tag_keys.push((
                                db.clone(),
                                measurements.value(row).to_owned(),
                                list.iter().flatten().map(str::to_owned).collect::<Vec<_>>(),
                            ));
                        }
                    }
                    let ids: Vec<u64> =
                        engine::query_arrow(conn, &format!("SELECT series_id FROM {}", names.series_table))?
                        .iter()
                        .map(|batch| {
                            let column = batch
                                .column(0)
                                .as_any()
                                .downcast_ref::<UInt64Array>()
                                .ok_or_else(|| Error::Engine("series_id is not UInt64".into()))?
                                .values()
                                .to_vec();
                            Ok(column)
                        })
                        .collect::<Result<Vec<_>>>()?
                        .concat();
                    series.push((db.clone(), ids));
                    if cardinality.max_values_per_tag > 0 {
                        // Through Arrow: values may hold tabs and newlines.
                        let mut values = Vec::new();
                        for batch in engine::query_arrow(conn, &format!(
                            "SELECT DISTINCT measurement, k, v FROM {} \
                             ARRAY JOIN mapKeys(tags) AS k, mapValues(tags) AS v",
                            names.series_table
                        ))? {
                            let column = |i: usize| batch.column(i).as_string::<i32>().clone();
                            let (m, k, v) = (column(0), column(1), column(2));
                            for row in 0..batch.num_rows() {
                                values.push([m.value(row), k.value(row), v.value(row)].map(str::to_owned));
                            }
                        }
                        tag_values.push((db.clone(), values));
                    }
                }
                Ok((columns, series, tag_keys, tag_values, retention, duplicates, engines))
            })
            .await?;
        let (columns, series, tag_keys, tag_values, retention, duplicates, engines) = loaded;
        let engines: HashMap<(String, String), DuplicatePolicy> = engines
            .into_iter()
            .filter_map(|row| match <[String; 3]>::try_from(row) {
                Ok([db, table, engine]) => {
                    Some(((db, table), DuplicatePolicy::of_engine(&engine)?))
                }
                Err(_) => None,
            })
            .collect();

        let catalog = Catalog {
            defaults,
            ..Catalog::default()
        };
        {
            let mut databases = catalog.databases.write().unwrap();
            for (encoded, ids) in series {
                let Some(name) = names::decode(&encoded) else {
                    continue;
                };
                let db = Database::new(&name);
                db.series.registry.lock().unwrap().known.extend(ids);
                databases.insert(name, Arc::new(db));
            }
            let mut fields: HashMap<(String, String, String), Vec<(String, FieldType)>> =
                HashMap::new();
            for row in columns {
                let [database, table, column, type_name] = <[String; 4]>::try_from(row)
                    .map_err(|_| Error::Engine("unexpected system.columns row".into()))?;
                let (Some(db), Some((rp, measurement))) =
                    (names::decode(&database), names::parse_storage_name(&table))
                else {
                    continue;
                };
                let entry = fields.entry((db, rp, measurement)).or_default();
                if let Some(ty) = FieldType::from_clickhouse(&type_name) {
                    entry.push((column, ty));
                }
            }
            for (encoded, rp, seconds) in retention {
                let Some(db) = names::decode(&encoded).and_then(|name| databases.get(&name)) else {
                    continue;
                };
                db.retention.write().unwrap().insert(rp, seconds);
            }
            for (encoded, measurement, policy) in duplicates {
                let Some(db) = names::decode(&encoded).and_then(|name| databases.get(&name)) else {
                    continue;
                };
                db.duplicates.write().unwrap().insert(measurement, policy);
            }
            for (encoded, values) in tag_values {
                let Some(db) = names::decode(&encoded).and_then(|name| databases.get(&name)) else {
                    continue;
                };
                db.series
                    .note_tag_values(values.iter().map(|[measurement, tag, value]| {
                        (measurement.as_str(), tag.as_str(), value.as_str())
                    }));
            }
            for (encoded, measurement, keys) in tag_keys {
                let Some(db) = names::decode(&encoded).and_then(|name| databases.get(&name)) else {
                    continue;
                };
                db.series
                    .tag_keys
                    .lock()
                    .unwrap()
                    .entry(measurement)
                    .or_default()
                    .extend(keys);
            }
            for ((db, rp, measurement), fields) in fields {
                let Some(database) = databases.get(&db) else {
                    continue;
                };
                let names = TableNames::new(&db, &rp, &measurement);
                let key = (names.database_name.clone(), names.storage_name.clone());
                let duplicates = engines.get(&key).copied().unwrap_or_default();
                let schema = TableSchema::new(names, fields);
                let table = Table::new(&db, &rp, &measurement, schema, duplicates);
                database.insert_table(&rp, &measurement, Arc::new(table));
            }
        }
        Ok(catalog)
    }
}

/// Renames the fact tables of older versions, which kept the facts in
/// `m.rp.mergetree` behind a Buffer table named `m.rp` (chingest never
/// inserted into the Buffer, so it holds no rows): the Buffer is dropped
/// and the MergeTree takes its name. Each step is idempotent, so an open
/// that crashed between them is finished by the next.
fn migrate_legacy_fact_tables(conn: &Connection) -> Result<()> {
    let legacy = engine::query_rows(
        conn,
        &format!(
            "SELECT database, name FROM system.tables \
             WHERE database IN (SELECT database FROM system.tables WHERE name = {}) \
             AND endsWith(name, {}) AND engine = 'MergeTree'",
            quote_literal(SERIES_TABLE),
            quote_literal(LEGACY_STORAGE_SUFFIX)
        ),
    )?;
    for row in legacy {
        let [database, storage] = <[String; 2]>::try_from(row)
            .map_err(|_| Error::Engine("unexpected system.tables row".into()))?;
        let table = &storage[..storage.len() - LEGACY_STORAGE_SUFFIX.len()];
        let in_front = engine::query_rows(
            conn,
            &format!(
                "SELECT engine FROM system.tables WHERE database = {} AND name = {}",
                quote_literal(&database),
                quote_literal(table)
            ),
        )?;
        let db = quote_ident(&database);
        match in_front.first().map(|row| row[0].as_str()) {
            None => {}
            Some("Buffer") => engine::execute(
                conn,
                &format!("DROP TABLE {db}.{} SYNC", quote_ident(table)),
            )?,
            Some(other) => {
                return Err(Error::Engine(format!(
                    "cannot rename {database}.{storage} to {table}: a {other} table has that name"
                )))
            }
        }
        engine::execute(
            conn,
            &format!(
                "RENAME TABLE {db}.{} TO {db}.{}",
                quote_ident(&storage),
                quote_ident(table)
            ),
        )?;
        tracing::info!(%database, from = %storage, to = %table, "renamed a fact table of an older version");
    }
    Ok(())
}
