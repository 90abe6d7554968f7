//! Where a pass's statements run ([`Store`]): the storage mode as a value.
//! A pass is handed the stores of its mode ([`stores`]) and reads and
//! writes each the same way.

use std::collections::HashMap;

use crate::cluster::{Cluster, StatementKind};
use crate::engine::{query_rows, Engine};
use crate::error::{Error, Result};
use crate::layout::names::{quote_literal, TableNames};
use crate::layout::rollup::{time_in_sql, Rollup};
use crate::stats::IngestStats;

use super::state::Span;

/// Where a pass's statements run: the embedded engine, or one shard of
/// the `clickhouse` storage mode (its own tables, by the same names).
#[derive(Debug, Clone, Copy)]
pub(super) enum Store<'a> {
    Here(&'a Engine),
    Shard(&'a Engine, &'a Cluster, usize),
}

impl Store<'_> {
    /// The rows `sql` returns, as text fields.
    pub(super) async fn rows(&self, sql: String) -> Result<Vec<Vec<String>>> {
        match self {
            Store::Here(engine) => engine.run(move |conn| query_rows(conn, &sql)).await,
            Store::Shard(_, cluster, shard) => cluster.query_rows(*shard, &sql).await,
        }
    }

    /// Runs `statements` in order, stopping at the first that fails;
    /// durably ([`Engine::execute_all`]) or on the shard's replicas.
    pub(super) async fn execute_all(&self, statements: Vec<String>) -> Result<()> {
        match self {
            Store::Here(engine) => engine.execute_all(statements).await,
            Store::Shard(_, cluster, shard) => {
                for sql in &statements {
                    cluster
                        .execute_on(*shard, sql, StatementKind::Change)
                        .await?;
                }
                Ok(())
            }
        }
    }

    /// Runs `drops` (statements dropping tables): a shard's tables are
    /// read here through `Distributed` tables of the same names, dropped
    /// here too (other nodes drop theirs when they learn it).
    pub(super) async fn drop_tables(&self, drops: Vec<String>) -> Result<()> {
        self.execute_all(drops.clone()).await?;
        match self {
            Store::Here(_) => Ok(()),
            Store::Shard(engine, _, _) => engine.execute_all(drops).await,
        }
    }

    /// [`execute_all`](Self::execute_all) of one statement.
    pub(super) async fn execute(&self, sql: String) -> Result<()> {
        self.execute_all(vec![sql]).await
    }

    /// The counters passes add to.
    pub(super) fn stats(&self) -> &IngestStats {
        match self {
            Store::Here(engine) | Store::Shard(engine, _, _) => &engine.stats,
        }
    }

    /// `table`'s key among what this process removed of each table, per
    /// store.
    pub(super) fn key(&self, table: &str) -> String {
        match self {
            Store::Here(_) => table.to_owned(),
            Store::Shard(_, _, shard) => format!("{table}@{shard}"),
        }
    }

    /// Whether readers take what a pass keeps here from this process's
    /// memory (the embedded mode) rather than from every shard's registry.
    pub(super) fn is_here(&self) -> bool {
        matches!(self, Store::Here(_))
    }
}

/// Where a pass's statements run: the embedded engine, or each shard.
pub(super) fn stores(engine: &Engine) -> Vec<Store<'_>> {
    match &engine.cluster {
        None => vec![Store::Here(engine)],
        Some(shards) => (0..shards.shards())
            .map(|shard| Store::Shard(engine, shards, shard))
            .collect(),
    }
}

/// By table (storage name) of the database of `names` in `store`: the last
/// block of its active parts and the end of the part ending first (s).
pub(super) async fn parts_by_table(
    store: Store<'_>,
    names: &TableNames,
) -> Result<HashMap<String, (u64, i64)>> {
    let sql = format!(
        "SELECT table, max(max_block_number), min(toUnixTimestamp(max_time)) \
         FROM system.parts WHERE database = {} AND active \
         AND NOT startsWith(name, 'patch-') GROUP BY table",
        quote_literal(&names.database_name)
    );
    let mut parts = HashMap::new();
    for row in store.rows(sql).await? {
        let bad = || Error::Engine(format!("system.parts: {row:?}"));
        let [table, block, end] = row.as_slice() else {
            return Err(bad());
        };
        let block = block.parse().map_err(|_| bad())?;
        let end = end.parse().map_err(|_| bad())?;
        parts.insert(table.clone(), (block, end));
    }
    Ok(parts)
}

/// The first and last time (ns) of `table`'s rows in `span`, if any.
pub(super) async fn time_bounds(store: Store<'_>, table: &str, span: Span) -> Result<Option<Span>> {
    let sql = format!(
        "SELECT toUnixTimestamp64Nano(minOrNull(time)), toUnixTimestamp64Nano(maxOrNull(time)) \
         FROM {table} WHERE {}",
        time_in_sql("time", &[span])
    );
    let rows = store.rows(sql).await?;
    let number = |i: usize| rows.first().and_then(|row| row.get(i)?.parse::<i64>().ok());
    Ok(number(0).zip(number(1)))
}

/// Whether `rollup` holds a bucket in `span`.
pub(super) async fn holds_buckets(store: Store<'_>, rollup: &Rollup, span: Span) -> Result<bool> {
    let sql = format!(
        "SELECT count() FROM (SELECT 1 FROM {} WHERE {} LIMIT 1)",
        rollup.table,
        time_in_sql("time", &[span])
    );
    let rows = store.rows(sql).await?;
    Ok(rows.first().is_none_or(|row| row[0] != "0"))
}
