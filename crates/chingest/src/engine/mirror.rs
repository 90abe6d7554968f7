//! The `clickhouse` storage mode's side of the engine: statements on the
//! tables that hold rows run on every shard, and the tables here are
//! `Distributed` tables over the shards', made again whenever the first
//! shard's columns or engine change.

use crate::cluster::{Cluster, StatementKind, CLUSTER_NAME};
use crate::engine::{Engine, ShardTable};
use crate::error::{Error, Result};
use crate::layout::names::{quote_ident, quote_literal};

impl Engine {
    /// Runs statements on the tables that hold rows (DDL, edits):
    /// `statements`, of the `kind`, which create or change the columns of
    /// `tables` (database and table names, unquoted). Here, or in the
    /// `clickhouse` storage mode on every shard (on the replicas `kind`
    /// says), after which each of `tables` is a `Distributed` table here
    /// with the shards' columns.
    pub(crate) async fn execute_on_storage(
        &self,
        statements: Vec<String>,
        kind: StatementKind,
        tables: Vec<(String, String)>,
    ) -> Result<()> {
        let Some(cluster) = &self.cluster else {
            return self.execute_all(statements).await;
        };
        for sql in &statements {
            cluster.execute_everywhere(sql, kind).await?;
        }
        self.mirror(cluster, Some(tables)).await?;
        Ok(())
    }

    /// Where the tables that hold rows are registered in Keeper, if they
    /// are replicated (the `clickhouse` storage mode with a Keeper path).
    pub(crate) fn keeper_path(&self) -> Option<&str> {
        self.cluster.as_ref()?.keeper_path()
    }

    /// In the `clickhouse` storage mode: a `Distributed` table here for
    /// every table of chingest's databases on the first shard (those other
    /// nodes made too), made again only where the shard's columns or
    /// engine changed since; every such table of the first shard. Empty in
    /// the embedded mode.
    pub(crate) async fn mirror_shards(&self) -> Result<Vec<ShardTable>> {
        let Some(cluster) = &self.cluster else {
            return Ok(Vec::new());
        };
        self.mirror(cluster, None).await
    }

    /// Makes each of `tables` a `Distributed` table over the shards', with
    /// the first shard's columns (its comment is the shards' table
    /// engine); with `None`, every MergeTree of chingest's databases on the
    /// first shard that has no such table here or whose columns changed.
    /// One query to the first shard reads every table's columns and
    /// engine; returns what it read.
    async fn mirror(
        &self,
        cluster: &Cluster,
        tables: Option<Vec<(String, String)>>,
    ) -> Result<Vec<ShardTable>> {
        let mut mirrored = self.mirrored.lock().await;
        let selected = match &tables {
            None => "c.database IN (SELECT database FROM system.tables WHERE name = '_series') \
                     AND endsWith(t.engine, 'MergeTree')"
                .to_owned(),
            Some(tables) if tables.is_empty() => return Ok(Vec::new()),
            Some(tables) => format!(
                "(c.database, c.table) IN ({})",
                tables
                    .iter()
                    .map(|(db, table)| format!("({}, {})", quote_literal(db), quote_literal(table)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let rows = cluster
            .query_rows(
                0,
                &format!(
                    "SELECT c.database, c.table, t.engine, c.name, c.type FROM system.columns AS c \
                     INNER JOIN system.tables AS t ON c.database = t.database AND c.table = t.name \
                     WHERE {selected} ORDER BY c.database, c.table, c.position"
                ),
            )
            .await?;
        let mut found: Vec<ShardTable> = Vec::new();
        for row in rows {
            let Ok([database, table, engine, name, type_name]) = <[String; 5]>::try_from(row)
            else {
                continue;
            };
            match found.last_mut() {
                Some(last) if last.database == database && last.table == table => {
                    last.columns.push((name, type_name));
                }
                _ => found.push(ShardTable {
                    database,
                    table,
                    engine,
                    columns: vec![(name, type_name)],
                }),
            }
        }
        for (database, table) in tables.iter().flatten() {
            if !found
                .iter()
                .any(|t| &t.database == database && &t.table == table)
            {
                return Err(Error::Engine(format!(
                    "{database}.{table} is missing on the first shard"
                )));
            }
        }
        let mut statements = Vec::new();
        let mut made = Vec::new();
        for shard_table in &found {
            let key = (shard_table.database.clone(), shard_table.table.clone());
            if tables.is_none() && mirrored.get(&key) == Some(shard_table) {
                continue;
            }
            made.push((key, shard_table.clone()));
            let ShardTable {
                database,
                table,
                engine,
                columns,
            } = shard_table;
            let sharding_key = if columns.iter().any(|(name, _)| name == "series_id") {
                "series_id"
            } else {
                // Registries: one row per key, on the first shard.
                "0"
            };
            let columns = columns
                .iter()
                .map(|(name, type_name)| format!("{} {type_name}", quote_ident(name)))
                .collect::<Vec<_>>()
                .join(", ");
            let db = quote_ident(database);
            statements.push(format!("CREATE DATABASE IF NOT EXISTS {db}"));
            statements.push(format!(
                "CREATE OR REPLACE TABLE {db}.{} ({columns}) \
                 ENGINE = Distributed({}, {}, {}, {sharding_key}) COMMENT {}",
                quote_ident(table),
                quote_literal(CLUSTER_NAME),
                quote_literal(database),
                quote_literal(table),
                quote_literal(engine),
            ));
        }
        if !statements.is_empty() {
            self.execute_all(statements).await?;
        }
        mirrored.extend(made);
        Ok(found)
    }
}
