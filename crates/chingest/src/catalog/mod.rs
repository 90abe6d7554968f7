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

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};

use arrow::array::{AsArray, UInt64Array};

use crate::config::{CardinalityLimits, DuplicatePolicy};
use crate::engine::{self, Engine, StatementKind};
use crate::error::{Error, Result};
use crate::layout::names::{
    self, quote_literal, TableNames, DUPLICATE_POLICIES_TABLE, RETENTION_POLICIES_TABLE,
    SERIES_TABLE,
};
use crate::layout::schema::{self, FieldType, TableSchema};

mod database;
pub(crate) mod learn;
mod migrate;
mod policies;
mod series;
mod table;

pub(crate) use database::Admission;
pub(crate) use database::Database;
use policies::read_policies;
pub(crate) use policies::TableDefaults;
pub(crate) use table::Table;

use migrate::migrate_legacy_fact_tables;

/// Tables that hold rows: the engine's MergeTrees, or in the `clickhouse`
/// storage mode the `Distributed` tables over the shards' (whose comment
/// names the shards' engine).
const STORED: &str = "(endsWith(engine, 'MergeTree') OR engine = 'Distributed')";

/// All databases this process manages.
#[derive(Debug, Default)]
pub(crate) struct Catalog {
    databases: RwLock<HashMap<String, Arc<Database>>>,
    /// Serializes database creation.
    create: tokio::sync::Mutex<()>,
    defaults: TableDefaults,
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

    /// Whether `database` is downsampled: its new tables get daily
    /// partitions.
    pub(crate) fn set_downsampled(&self, database: &str, downsampled: bool) {
        let mut set = self.defaults.downsampled.write().unwrap();
        match downsampled {
            true => set.insert(database.to_owned()),
            false => set.remove(database),
        };
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
        let statements =
            schema::create_database_sql(&TableNames::new(name, "", ""), engine.keeper_path());
        let encoded = names::encode(name);
        let tables = [
            SERIES_TABLE,
            RETENTION_POLICIES_TABLE,
            DUPLICATE_POLICIES_TABLE,
        ]
        .map(|table| (encoded.clone(), table.to_owned()));
        engine
            .execute_on_storage(statements.into(), StatementKind::Create, tables.into())
            .await?;
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
                         WHERE {STORED} AND name != {0}) \
                         ORDER BY database, table, position",
                        quote_literal(SERIES_TABLE)
                    ),
                )?;
                let mut series = Vec::new();
                let mut tag_keys = Vec::new();
                let mut tag_values = Vec::new();
                let engines = engine::query_rows(
                    conn,
                    &format!(
                        "SELECT database, name, if(engine = 'Distributed', comment, engine) \
                         FROM system.tables WHERE {STORED}"
                    ),
                )?;
                for row in &databases {
                    let db = &row[0];
                    let Some(name) = names::decode(db) else { continue };
                    let names = TableNames::new(&name, "", "");
                    // Databases from before the registry existed get one now.
                    engine::execute(conn, &schema::retention_policies_table_sql(&names, None))?;
                    engine::execute(conn, &schema::duplicate_policies_table_sql(&names, None))?;
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
                let encoded: Vec<String> = databases.iter().map(|row| row[0].clone()).collect();
                let policies = read_policies(conn, &encoded)?;
                Ok((columns, series, tag_keys, tag_values, policies, engines))
            })
            .await?;
        let (columns, series, tag_keys, tag_values, policies, engines) = loaded;
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
                db.series.learn(ids);
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
            for (encoded, policy) in policies {
                if let Some(db) = names::decode(&encoded).and_then(|name| databases.get(&name)) {
                    db.note_policy(policy);
                }
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
                db.series.load_tag_keys(measurement, keys);
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
