//! Learning, in the `clickhouse` storage mode, what other nodes create on
//! the shards after this node opened: databases, tables and their fields,
//! retention and duplicate policies, series and their tag keys (the
//! columns of the views). Every [`ClusterConfig::refresh`](crate::ClusterConfig::refresh)
//! a background task ([`run`]) reads back what [`Engine::mirror_shards`]
//! and [`Catalog::load`] read on open, without reading whole tables: the
//! first shard's columns (one query; a `Distributed` table is made again
//! only where they changed), the registries (one statement), and on each
//! shard the names of the series tables' active parts, of which only the
//! parts not read before are read. A part never changes once made, so
//! each series row is read once, and again only when a merge moves it
//! into a new part.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Weak};
use std::time::Duration;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, UInt64Type};
use arrow::record_batch::RecordBatch;

use crate::catalog::policies::read_policies;
use crate::catalog::{Catalog, Database};
use crate::cluster::Cluster;
use crate::config::DuplicatePolicy;
use crate::engine::{Engine, ShardTable};
use crate::error::{Error, Result};
use crate::layout::names::{self, quote_literal, TableNames, SERIES_TABLE};
use crate::layout::schema::FieldType;
use crate::stats::IngestStats;

/// The active parts of each database's series table (encoded name) on
/// one shard.
type Parts = HashMap<String, HashSet<String>>;

/// The parts of the series tables already read, per shard.
#[derive(Debug)]
pub(crate) struct SeriesParts {
    read: Vec<Parts>,
}

/// A series as a shard's series table stores it.
#[derive(Debug)]
struct StoredSeries {
    id: u64,
    measurement: String,
    tag_keys: Vec<String>,
}

impl SeriesParts {
    /// The parts active on every shard now, counted as read: taken on
    /// open before the catalog reads the series, so that every part made
    /// after it is read by a refresh.
    pub(crate) async fn active(cluster: &Cluster) -> Result<SeriesParts> {
        let mut read = Vec::with_capacity(cluster.shards());
        for shard in 0..cluster.shards() {
            read.push(active_parts(cluster, shard, None).await?);
        }
        Ok(SeriesParts { read })
    }

    /// The series in the parts of `databases`' series tables (encoded
    /// names) not read before, by database, and the parts to count as
    /// read once they are learnt.
    async fn read_new(
        &self,
        cluster: &Cluster,
        databases: &[String],
    ) -> Result<(HashMap<String, Vec<StoredSeries>>, Vec<Parts>)> {
        let mut stored: HashMap<String, Vec<StoredSeries>> = HashMap::new();
        let mut active = Vec::with_capacity(self.read.len());
        for (shard, read) in self.read.iter().enumerate() {
            let parts = active_parts(cluster, shard, Some(databases)).await?;
            let selects: Vec<String> = parts
                .iter()
                .filter_map(|(encoded, parts)| {
                    let new: Vec<String> = parts
                        .iter()
                        .filter(|part| !read.get(encoded).is_some_and(|r| r.contains(*part)))
                        .map(|part| quote_literal(part))
                        .collect();
                    let series_table =
                        TableNames::new(&names::decode(encoded)?, "", "").series_table;
                    (!new.is_empty()).then(|| {
                        format!(
                            "SELECT {} AS db, series_id, measurement, mapKeys(tags) AS keys \
                             FROM {series_table} WHERE _part IN ({})",
                            quote_literal(encoded),
                            new.join(", ")
                        )
                    })
                })
                .collect();
            if !selects.is_empty() {
                let sql = format!("SELECT * FROM ({})", selects.join(" UNION ALL "));
                for batch in cluster.query_arrow(shard, &sql).await? {
                    stored_series(&batch, &mut stored)?;
                }
            }
            active.push(parts);
        }
        Ok((stored, active))
    }
}

/// The active parts of the series tables on `shard`, of `databases` only
/// if given.
async fn active_parts(
    cluster: &Cluster,
    shard: usize,
    databases: Option<&[String]>,
) -> Result<Parts> {
    let only = match databases {
        None => String::new(),
        Some([]) => return Ok(Parts::new()),
        Some(databases) => format!(
            " AND database IN ({})",
            databases
                .iter()
                .map(|db| quote_literal(db))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let rows = cluster
        .query_rows(
            shard,
            &format!(
                "SELECT database, name FROM system.parts WHERE table = {} AND active{only}",
                quote_literal(SERIES_TABLE)
            ),
        )
        .await?;
    let mut parts = Parts::new();
    for row in rows {
        if let Ok([database, part]) = <[String; 2]>::try_from(row) {
            parts.entry(database).or_default().insert(part);
        }
    }
    Ok(parts)
}

/// Adds the series of `batch` (database, id, measurement, tag keys) to
/// `stored`.
fn stored_series(
    batch: &RecordBatch,
    stored: &mut HashMap<String, Vec<StoredSeries>>,
) -> Result<()> {
    let unexpected = || Error::Internal(format!("a shard's series rows as {:?}", batch.schema()));
    let strings = |column: &dyn Array| {
        arrow::compute::cast(column, &DataType::Utf8).map_err(|_| unexpected())
    };
    if batch.num_columns() != 4 {
        return Err(unexpected());
    }
    let databases = strings(batch.column(0))?;
    let measurements = strings(batch.column(2))?;
    let ids = batch
        .column(1)
        .as_primitive_opt::<UInt64Type>()
        .ok_or_else(unexpected)?;
    let keys = batch
        .column(3)
        .as_list_opt::<i32>()
        .ok_or_else(unexpected)?;
    let key_names = strings(keys.values())?;
    let (databases, measurements, key_names) = (
        databases.as_string::<i32>(),
        measurements.as_string::<i32>(),
        key_names.as_string::<i32>(),
    );
    let offsets = keys.value_offsets();
    for row in 0..batch.num_rows() {
        let (start, end) = (offsets[row] as usize, offsets[row + 1] as usize);
        stored
            .entry(databases.value(row).to_owned())
            .or_default()
            .push(StoredSeries {
                id: ids.value(row),
                measurement: measurements.value(row).to_owned(),
                tag_keys: (start..end)
                    .map(|i| key_names.value(i).to_owned())
                    .collect(),
            });
    }
    Ok(())
}

/// What one refresh learnt.
#[derive(Debug, Default, PartialEq, Eq)]
struct Learned {
    databases: usize,
    /// Tables made or given fields.
    tables: usize,
    series: usize,
    /// Measurements that gained tag keys.
    tag_keys: usize,
}

/// Learns what other nodes create, in the `clickhouse` storage mode.
#[derive(Debug)]
pub(crate) struct Learner {
    /// Weak: the task ends once the ingestor is gone.
    engine: Weak<Engine>,
    catalog: Weak<Catalog>,
    cluster: Arc<Cluster>,
    parts: SeriesParts,
}

impl Learner {
    /// The learner of `catalog`, with the parts it read on open.
    pub(crate) fn new(
        engine: &Arc<Engine>,
        catalog: &Arc<Catalog>,
        cluster: Arc<Cluster>,
        parts: SeriesParts,
    ) -> Learner {
        Learner {
            engine: Arc::downgrade(engine),
            catalog: Arc::downgrade(catalog),
            cluster,
            parts,
        }
    }

    /// One refresh: the `Distributed` tables made for new or changed
    /// tables, then the catalog told what they hold; the series parts
    /// count as read only once the catalog has their series.
    async fn refresh(&mut self, engine: &Engine, catalog: &Catalog) -> Result<Learned> {
        let tables = engine.mirror_shards().await?;
        let databases: Vec<String> = tables
            .iter()
            .filter(|t| t.table == SERIES_TABLE)
            .map(|t| t.database.clone())
            .collect();
        let (series, parts) = self.parts.read_new(&self.cluster, &databases).await?;
        let learned = catalog.learn(engine, &tables, &databases, series).await?;
        self.parts.read = parts;
        Ok(learned)
    }
}

/// Refreshes every `every` until the ingestor is gone, or its task is
/// aborted when the ingestor closes. A failed refresh is logged and
/// counted; the next one tries again.
pub(crate) async fn run(mut learner: Learner, every: Duration) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first tick is now, when the catalog was just read.
    ticks.tick().await;
    loop {
        ticks.tick().await;
        let (Some(engine), Some(catalog)) = (learner.engine.upgrade(), learner.catalog.upgrade())
        else {
            return;
        };
        let stats = Arc::clone(&engine.stats);
        match learner.refresh(&engine, &catalog).await {
            Ok(learned) => {
                IngestStats::add(&stats.catalog_refreshes, 1);
                if learned != Learned::default() {
                    tracing::info!(
                        databases = learned.databases,
                        tables = learned.tables,
                        series = learned.series,
                        tag_keys = learned.tag_keys,
                        "learnt what other nodes created on the shards"
                    );
                }
            }
            Err(err) => {
                IngestStats::add(&stats.catalog_refresh_errors, 1);
                tracing::warn!(%err, "learning what other nodes created on the shards failed; trying again");
            }
        }
    }
}

impl Catalog {
    /// Adds what the shards hold that the catalog lacks: `databases`
    /// (encoded; those with a series table), their policies, the fact
    /// tables of `tables` and their fields, the `series`; and makes the
    /// views of the measurements that gained fields or tag keys again.
    async fn learn(
        &self,
        engine: &Engine,
        tables: &[ShardTable],
        databases: &[String],
        series: HashMap<String, Vec<StoredSeries>>,
    ) -> Result<Learned> {
        let mut learned = Learned::default();
        for encoded in databases {
            let Some(name) = names::decode(encoded) else {
                continue;
            };
            if self.database(&name).is_some() {
                continue;
            }
            // As `ensure_database`, whose database would replace this one.
            let _create = self.create.lock().await;
            if self.database(&name).is_none() {
                let db = Arc::new(Database::new(&name));
                self.databases.write().unwrap().insert(name, db);
                learned.databases += 1;
            }
        }
        let encoded = databases.to_vec();
        // A policy this node sets while this runs may read as it was
        // until the next refresh.
        for (db, policy) in engine
            .run(move |conn| read_policies(conn, &encoded))
            .await?
        {
            if let Some(database) = self.learnt(&db) {
                database.note_policy(policy);
            }
        }
        // Measurements whose views need making again, by database.
        let mut views: HashMap<String, BTreeSet<String>> = HashMap::new();
        let view_rp = self.defaults.view_rp.as_deref();
        for table in tables {
            let (Some(database), Some((rp, measurement))) = (
                self.learnt(&table.database),
                names::parse_storage_name(&table.table),
            ) else {
                continue;
            };
            let fields = table
                .columns
                .iter()
                .filter_map(|(name, ty)| Some((name.clone(), FieldType::from_clickhouse(ty)?)))
                .collect();
            let duplicates = DuplicatePolicy::of_engine(&table.engine).unwrap_or_default();
            if database
                .learn_table(&rp, &measurement, fields, duplicates)
                .await
            {
                learned.tables += 1;
                if view_rp == Some(rp.as_str()) {
                    views
                        .entry(database.name.clone())
                        .or_default()
                        .insert(measurement);
                }
            }
        }
        for (encoded, stored) in series {
            let Some(database) = self.learnt(&encoded) else {
                continue;
            };
            learned.series += database.series.learn(stored.iter().map(|s| s.id));
            let mut keys: HashMap<String, Vec<String>> = HashMap::new();
            for s in stored {
                keys.entry(s.measurement).or_default().extend(s.tag_keys);
            }
            for (measurement, keys) in keys {
                if database.series.load_tag_keys(measurement.clone(), keys) {
                    learned.tag_keys += 1;
                    views
                        .entry(database.name.clone())
                        .or_default()
                        .insert(measurement);
                }
            }
        }
        for (db, measurements) in views {
            if let Some(database) = self.database(&db) {
                let measurements: Vec<String> = measurements.into_iter().collect();
                self.refresh_views(engine, &database, &measurements).await?;
            }
        }
        Ok(learned)
    }

    /// The database named `encoded` on the shards, if the catalog has it.
    fn learnt(&self, encoded: &str) -> Option<Arc<Database>> {
        self.database(&names::decode(encoded)?)
    }
}
