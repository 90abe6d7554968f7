//! Edits of a downsampled database: held off passes, marked for the next
//! pass to rebuild, and applied to the buckets whose rows are gone (in
//! the cluster mode, to every bucket on every shard).

use crate::engine::{Engine, StatementKind};
use crate::error::Result;
use crate::layout::names::{quote_ident, quote_literal, TableNames};
use crate::layout::rollup::is_rollup_of;
use crate::layout::schema::FieldType;

use super::cluster;
use super::downsampler::Downsampler;
use super::registry::{
    read_state, rollup_columns, save_state, state_table, state_table_sql, MARK, STATE_TABLE,
};
use super::state::{rollups, Span};
use super::store::Store;
use crate::clock::now_ns;

/// Gives the statement applying an edit to the buckets of one level
/// ([`Downsampler::mark`]): `(rollup, names, measurement, before, kept)`,
/// the level's table, its fact table's names and measurement, the time
/// before which it applies, and the fields the level keeps.
pub(crate) type EditStatement<'a> = dyn Fn(&str, &TableNames, &str, i64, &[(String, FieldType)]) -> Result<Option<String>>
    + Send
    + Sync
    + 'a;

/// A fact table an edit may change, in the cluster mode.
pub(super) struct EditedTable {
    pub(super) names: TableNames,
    pub(super) measurement: String,
    pub(super) fields: Vec<(String, FieldType)>,
}

impl Downsampler {
    /// Holds passes off while an edit of a downsampled database marks and
    /// changes rows.
    pub(crate) async fn hold(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.passes.lock().await
    }

    /// Before an edit of the fact tables of `database` it `covers` (by
    /// retention policy and measurement) over `[from, to)` (ns): marks
    /// them as changed there, durably, for the next pass to rebuild; and,
    /// where the rows are gone (a pass cannot rebuild from them), applies
    /// it to every level's buckets: `statement(rollup, names, measurement,
    /// before, kept)` gives the statement editing the level `rollup` (of
    /// the fact table `names`, keeping the fields `kept`) before `before`.
    /// The caller holds [`hold`](Self::hold) until the edit is done, and
    /// calls this before the edit changes rows (its tag condition reads
    /// the series table, which dropping series empties), then
    /// [`marked`](Self::marked) with what this returns.
    ///
    /// In the `clickhouse` storage mode, where a pass may run on another
    /// node at any time, the marks wait for the edit: this applies it to
    /// every level's buckets on every shard (where rows are kept too:
    /// the pass the mark asks for rebuilds those from the edited rows),
    /// and returns the tables `marked` marks once the edit is done.
    pub(crate) async fn mark(
        &self,
        database: &str,
        covers: impl Fn(&str, &str) -> bool,
        (from_ns, to_ns): (i64, i64),
        statement: &EditStatement<'_>,
    ) -> Result<Vec<TableNames>> {
        let (Some(engine), Some(catalog)) = (self.engine.upgrade(), self.catalog.upgrade()) else {
            return Ok(Vec::new());
        };
        let Some(db) = catalog.database(database) else {
            return Ok(Vec::new());
        };
        if let Some(shards) = &engine.cluster {
            let tables: Vec<EditedTable> = db
                .tables()
                .into_iter()
                .filter(|((rp, measurement), _)| covers(rp, measurement))
                .map(|((rp, measurement), table)| EditedTable {
                    names: TableNames::new(database, &rp, &measurement),
                    measurement,
                    fields: table.schema().fields.clone(),
                })
                .collect();
            // Read from the rows here until the marks are learnt.
            for table in &tables {
                self.inserting(database, &table.names.storage_table, (from_ns, to_ns));
            }
            self.edit_on_shards(&engine, shards, database, &tables, statement)
                .await?;
            return Ok(tables.into_iter().map(|table| table.names).collect());
        }
        let mut statements = Vec::new();
        for ((rp, measurement), table) in db.tables() {
            if !covers(&rp, &measurement) {
                continue;
            }
            let Some(policy) = self.policies.table_policy(database, &measurement) else {
                continue;
            };
            let names = TableNames::new(database, &rp, &measurement);
            let fields = &table.schema().fields;
            let levels = self.levels_of(&names, &policy);
            self.make_tables(&engine, &names, &rollups(&names, fields, &levels), fields)
                .await?;
            let (mut state, _) = read_state(Store::Here(&engine), &names).await?;
            state.dirty_from = state.dirty_from.min(from_ns);
            state.dirty_to = state.dirty_to.max(to_ns);
            // Readers read rows over the span before the edit changes them.
            self.inserting(database, &names.storage_table, (from_ns, to_ns));
            save_state(Store::Here(&engine), &names, &state).await?;
            let kept = self
                .readers
                .lock()
                .unwrap()
                .made
                .get(&names.storage_table)
                .cloned();
            let (Some(kept), Some(before)) = (kept, state.cuts.rows_from) else {
                continue;
            };
            // Readers read every level there: each shows the edit at once
            // (the next pass rebuilds coarser levels from finer ones where
            // those are kept).
            for rollup in &rollups(&names, &kept, &state.levels_or(&policy)) {
                statements.extend(statement(
                    &rollup.table,
                    &names,
                    &measurement,
                    before,
                    &kept,
                )?);
            }
        }
        engine.execute_all(statements).await?;
        Ok(Vec::new())
    }

    /// [`mark`](Self::mark)'s edit of the buckets of `tables` (with their
    /// measurements and fields) on every shard: every level whose table
    /// the shard holds, each with the fields it has columns for there.
    pub(super) async fn edit_on_shards(
        &self,
        engine: &Engine,
        shards: &crate::cluster::Cluster,
        database: &str,
        tables: &[EditedTable],
        statement: &EditStatement<'_>,
    ) -> Result<()> {
        let registry_names = TableNames::new(database, "", "");
        let registry = vec![(registry_names.database_name.clone(), STATE_TABLE.to_owned())];
        engine
            .execute_on_storage(
                state_table_sql(&registry_names),
                StatementKind::Create,
                registry,
            )
            .await?;
        for shard in 0..shards.shards() {
            let store = Store::Shard(engine, shards, shard);
            let columns = rollup_columns(store, &registry_names).await?;
            let mut statements = Vec::new();
            for EditedTable {
                names,
                measurement,
                fields,
            } in tables
            {
                // Every level's table there, also a move's new levels
                // being built (`move_shards`).
                for (table, columns) in &columns {
                    if !is_rollup_of(table, &names.storage_name) {
                        continue;
                    }
                    let kept = cluster::fields_with_columns(fields, columns);
                    statements.extend(statement(
                        &format!("{}.{}", names.database, quote_ident(table)),
                        names,
                        measurement,
                        i64::MAX,
                        &kept,
                    )?);
                }
            }
            store.execute_all(statements).await?;
        }
        Ok(())
    }

    /// Records, after an edit, the marks [`mark`](Self::mark) left to it
    /// (the `clickhouse` storage mode): on every shard, a mark of `span`
    /// for each of `tables`, which the next pass over the table takes.
    pub(crate) async fn marked(&self, tables: &[TableNames], (from_ns, to_ns): Span) -> Result<()> {
        let (Some(engine), Some(first)) = (self.engine.upgrade(), tables.first()) else {
            return Ok(());
        };
        let Some(shards) = &engine.cluster else {
            return Ok(());
        };
        let now = now_ns();
        let rows: Vec<String> = tables
            .iter()
            .enumerate()
            .map(|(i, names)| {
                let key = format!("{}{MARK}{now}-{i}", names.storage_name);
                format!("({}, 0, {from_ns}, {to_ns}, {now})", quote_literal(&key))
            })
            .collect();
        let sql = format!(
            "INSERT INTO {} (table, seen_block, dirty_from, dirty_to, version) VALUES {}",
            state_table(first),
            rows.join(", ")
        );
        shards
            .execute_everywhere(&sql, StatementKind::Change)
            .await?;
        // A learning begun before they were recorded did not see them.
        for names in tables {
            self.inserting(&names.database_name, &names.storage_table, (from_ns, to_ns));
        }
        Ok(())
    }
}
