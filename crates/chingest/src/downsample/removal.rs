//! Removing what is past its age: the cuts moved (durably first), each
//! level's buckets deleted before its cut, the fact table's parts dropped
//! wholly before the rows' cut; and the tables of levels a move left.

use crate::config::Downsampling;
use crate::error::Result;
use crate::layout::names::{quote_ident, quote_literal, TableNames};
use crate::layout::rollup::{is_rollup_of, rollup_name, Resolution, Rollup};
use crate::stats::IngestStats;

use super::downsampler::Downsampler;
use super::registry::save_state;
use super::state::State;
use super::store::Store;
use crate::clock::now_ns;

impl Downsampler {
    /// Drops the rollups of the fact table `names` not among `levels`:
    /// the levels a migration (or a crash after one) left.
    pub(super) async fn drop_retired(
        &self,
        store: Store<'_>,
        names: &TableNames,
        levels: &[Resolution],
    ) -> Result<()> {
        let sql = format!(
            "SELECT name FROM system.tables WHERE database = {} AND startsWith(name, '_rollup.')",
            quote_literal(&names.database_name)
        );
        let tables = store.rows(sql).await?;
        let kept: Vec<String> = levels
            .iter()
            .map(|level| rollup_name(&names.storage_name, *level))
            .collect();
        let drops: Vec<String> = tables
            .iter()
            .map(|row| &row[0])
            .filter(|name| is_rollup_of(name, &names.storage_name) && !kept.contains(name))
            .map(|name| {
                format!(
                    "DROP TABLE IF EXISTS {}.{}",
                    names.database,
                    quote_ident(name)
                )
            })
            .collect();
        store.drop_tables(drops).await
    }

    /// Moves the cuts of the table `names` as far as its ages allow (saved
    /// before anything is removed, so readers and passes never rely on what
    /// is gone), deletes each level's buckets before its moved cut, and
    /// drops the fact table's parts rolled up (`done.seen_block`) and
    /// wholly before the rows' cut. A part merged away meanwhile is
    /// dropped by a later pass.
    pub(super) async fn remove_aged(
        &self,
        store: Store<'_>,
        names: &TableNames,
        rollups: &[Rollup],
        done: &mut State,
        policy: &Downsampling,
        retention_s: u64,
    ) -> Result<()> {
        let now = now_ns();
        let cuts = done.cuts.at(policy, retention_s, now);
        let key = store.key(&names.storage_table);
        if !self.book.lock().unwrap().removed.contains_key(&key) && store.is_here() {
            // Removed up to the cuts recorded, but for a crash in between
            // (its buckets are never read).
            self.book
                .lock()
                .unwrap()
                .removed
                .insert(key.clone(), done.cuts.clone());
        }
        if cuts != done.cuts {
            done.cuts = cuts.clone();
            done.cuts_at = now;
            save_state(store, names, done).await?;
            if store.is_here() {
                self.keep(names, done.levels.clone(), cuts.clone());
            }
            // Readers read buckets where they read rows.
            self.unsettle(&names.database_name);
        }
        // In the cluster mode other nodes learn the cuts first.
        if !self.mode.learnt_by_all(done.cuts_at, now) {
            return Ok(());
        }
        let removed = self
            .book
            .lock()
            .unwrap()
            .removed
            .get(&key)
            .cloned()
            .unwrap_or_default();
        let deletes: Vec<String> = rollups
            .iter()
            .enumerate()
            .filter(|(i, _)| cuts.kept_from(*i) > removed.kept_from(*i))
            .map(|(i, rollup)| rollup.delete_sql(i64::MIN, cuts.kept_from(i)))
            .collect();
        store.execute_all(deletes).await?;
        self.book.lock().unwrap().removed.insert(key, cuts.clone());
        let Some(rows_from) = cuts.rows_from else {
            return Ok(());
        };
        let parts_sql = format!(
            "SELECT name FROM system.parts WHERE database = {} AND table = {} AND active \
             AND NOT startsWith(name, 'patch-') AND max_block_number <= {} \
             AND toUnixTimestamp(max_time) < {}",
            quote_literal(&names.database_name),
            quote_literal(&names.storage_name),
            done.seen_block,
            rows_from.div_euclid(1_000_000_000),
        );
        let mut dropped = 0;
        for part in store.rows(parts_sql).await? {
            let sql = format!(
                "ALTER TABLE {} DROP PART {}",
                names.storage_table,
                quote_literal(&part[0])
            );
            match store.execute_all(vec![sql]).await {
                Ok(()) => dropped += 1,
                Err(err) if err.to_string().contains("NO_SUCH_DATA_PART") => {}
                Err(err) => return Err(err),
            }
        }
        IngestStats::add(&store.stats().downsampling_parts_dropped, dropped);
        Ok(())
    }
}
