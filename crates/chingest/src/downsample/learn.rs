//! In the `clickhouse` storage mode, what every node learns each period
//! from the shards' registries: what readers may take from the rollups
//! another node's passes keep.

use std::collections::HashMap;

use crate::catalog::Catalog;
use crate::engine::{query_rows, Engine, StatementKind};
use crate::error::Result;
use crate::layout::names::{quote_ident, quote_literal, TableNames};

use super::cluster;
use super::downsampler::Downsampler;
use super::registry::STATE_TABLE;

impl Downsampler {
    /// In the `clickhouse` storage mode: learns what readers may take
    /// from the rollups of every database with a registry here, from the
    /// registries of all shards ([`cluster::learnt_tables`]).
    pub(crate) async fn learn(&self) -> Result<()> {
        let (Some(engine), Some(catalog)) = (self.engine.upgrade(), self.catalog.upgrade()) else {
            return Ok(());
        };
        // (The engine has shards exactly in the cluster mode.)
        let Some(shards) = &engine.cluster else {
            return Ok(());
        };
        // What this node reported before now, this learning reads where
        // it is; what it reports later stays pending.
        let begun = self.readers.lock().unwrap().known.reports;
        let learnt = self.learn_from(&engine, shards, &catalog).await?;
        let changed = {
            let known = &mut self.readers.lock().unwrap().known;
            known.pending.retain(|_, (_, report)| *report > begun);
            let changed = known.learnt != learnt;
            known.learnt = learnt;
            changed
        };
        if changed {
            for db in catalog.databases() {
                self.unsettle(&db.name);
            }
        }
        Ok(())
    }

    /// [`learn`](Self::learn)'s reads.
    pub(super) async fn learn_from(
        &self,
        engine: &Engine,
        shards: &crate::cluster::Cluster,
        catalog: &Catalog,
    ) -> Result<HashMap<String, cluster::Learnt>> {
        // The registries and rollups the first shard has (every shard has
        // them once made), each readable here first: a node whose catalog
        // refresh has not made them yet would read rows where they are gone.
        let sql = format!(
            "SELECT database, name FROM system.tables WHERE name = {} \
             OR startsWith(name, '_rollup.')",
            quote_literal(STATE_TABLE)
        );
        let on_shards = shards.query_rows(0, &sql).await?;
        let here = engine.run(move |conn| query_rows(conn, &sql)).await?;
        let missing: Vec<(String, String)> = on_shards
            .iter()
            .filter(|row| !here.contains(row))
            .filter_map(|row| Some((row.first()?.clone(), row.get(1)?.clone())))
            .collect();
        if !missing.is_empty() {
            engine
                .execute_on_storage(Vec::new(), StatementKind::Create, missing)
                .await?;
        }
        // Those of levels a move left, dropped on the shards.
        let left: Vec<String> = here
            .iter()
            .filter(|row| !on_shards.contains(row))
            .filter_map(|row| match row.as_slice() {
                [database, table] if table.starts_with("_rollup.") => Some(format!(
                    "DROP TABLE IF EXISTS {}.{}",
                    quote_ident(database),
                    quote_ident(table)
                )),
                _ => None,
            })
            .collect();
        if !left.is_empty() {
            engine.execute_all(left).await?;
        }
        let mut learnt = HashMap::new();
        for row in on_shards
            .iter()
            .filter(|row| row.get(1).map(String::as_str) == Some(STATE_TABLE))
        {
            let Some(database) = catalog.database(&row[0]) else {
                continue;
            };
            let facts: Vec<_> = database
                .tables()
                .into_iter()
                .map(|((rp, measurement), table)| {
                    let names = TableNames::new(&row[0], &rp, &measurement);
                    (names, table.schema().fields.clone())
                })
                .collect();
            let names = TableNames::new(&row[0], "", "");
            learnt.extend(cluster::learnt_tables(engine, shards, &names, &facts).await?);
        }
        Ok(learnt)
    }
}
