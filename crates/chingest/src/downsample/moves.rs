//! Moving a table's rollups to other levels: the new levels built from
//! the rows or from a level whose buckets divide theirs ([`plan_migration`]),
//! recorded, and the old levels retired once no reader needs them; and
//! the checks that refuse a move that would lose data.

use crate::config::Downsampling;
use crate::error::{Error, Result};
use crate::layout::names::TableNames;
use crate::layout::rollup::{Resolution, Rollup, Source};
use crate::layout::schema::FieldType;

use super::downsampler::Downsampler;
use super::migrate::{plan_migration, Migration};
use super::registry::{save_state, Mark};
use super::state::{ceil_to, chunks, date, floor_to, resolutions, rollups, Cuts, State};
use super::store::{holds_buckets, time_bounds, Store};
use crate::clock::now_ns;
use crate::engine::Engine;

impl Downsampler {
    /// Moves the rollups of the fact table `names` from the levels its
    /// `state` records to `levels` ([`build_levels`](Self::build_levels)),
    /// records the new levels and cuts, and readers read them from then on.
    /// The tables of the levels left go at the table's next pass (a read
    /// may have just begun).
    pub(super) async fn migrate(
        &self,
        store: Store<'_>,
        names: &TableNames,
        fields: &[(String, FieldType)],
        state: &mut State,
        levels: &[Resolution],
    ) -> Result<()> {
        state.cuts = self
            .build_levels(store, names, fields, state, levels)
            .await?;
        state.levels = levels.to_vec();
        self.record_move(store, names, state).await?;
        self.keep(names, state.levels.clone(), state.cuts.clone());
        // A bucket read as a row may now come from another level.
        self.unsettle(&names.database_name);
        Ok(())
    }

    /// In the cluster mode, moves the rollups of the fact table `names` on
    /// every shard whose registry (in `states`, by shard) records other
    /// levels to `levels`, in two rounds: each such shard builds the new
    /// levels ([`build_levels`](Self::build_levels)), then each records
    /// them, the first shard first. Readers take the levels the first
    /// shard records ([`cluster::learnt_tables`]), so whichever they read
    /// is whole on every shard: the old ones until it records the new,
    /// the new ones after. No pass rolls up more rows meanwhile. The old
    /// levels' tables go once every node has learnt the new
    /// ([`retires`](Self::retires)).
    pub(super) async fn move_shards(
        &self,
        engine: &Engine,
        shards: &crate::cluster::Cluster,
        names: &TableNames,
        fields: &[(String, FieldType)],
        states: &mut [(State, Vec<Mark>)],
        levels: &[Resolution],
    ) -> Result<()> {
        let moving: Vec<usize> = (0..states.len())
            .filter(|shard| {
                let kept = &states[*shard].0.levels;
                !kept.is_empty() && kept != levels
            })
            .collect();
        let mut cuts = Vec::new();
        for shard in &moving {
            let store = Store::Shard(engine, shards, *shard);
            let state = &states[*shard].0;
            cuts.push(
                self.build_levels(store, names, fields, state, levels)
                    .await?,
            );
        }
        for (shard, cuts) in moving.into_iter().zip(cuts) {
            let state = &mut states[shard].0;
            state.levels = levels.to_vec();
            state.cuts = cuts;
            let store = Store::Shard(engine, shards, shard);
            self.record_move(store, names, state).await?;
            tracing::info!(
                table = %names.storage_table,
                shard,
                "downsampling: moved to the configured levels"
            );
        }
        Ok(())
    }

    /// Builds the levels `levels` of the fact table `names` from the
    /// levels its `state` records ([`plan_migration`]): from the rows where
    /// they are kept and from a level whose buckets divide its own where
    /// not, up to the block `state` rolled up. Returns the cuts by the new
    /// levels. Refused ([`Error::Conflict`]) where they cannot take over
    /// the old levels' data.
    pub(super) async fn build_levels(
        &self,
        store: Store<'_>,
        names: &TableNames,
        fields: &[(String, FieldType)],
        state: &State,
        levels: &[Resolution],
    ) -> Result<Cuts> {
        let plan = checked_migration(
            store,
            names,
            (&state.levels, &state.cuts),
            levels,
            Error::Conflict,
        )
        .await?;
        let (old, new) = (
            rollups(names, fields, &state.levels),
            rollups(names, fields, levels),
        );
        // The new levels' tables (`make_tables` made those of the levels
        // it had).
        let ddl: Vec<String> = new
            .iter()
            .flat_map(|rollup| [rollup.create_sql(), rollup.add_columns_sql(fields)])
            .collect();
        store.execute_all(ddl).await?;
        let mut statements = Vec::new();
        for build in plan.builds {
            let rollup = &new[build.level];
            let source = match build.source {
                None => Source::Facts(&names.storage_table),
                Some(level) => Source::Rollup(&old[level]),
            };
            let table = match source {
                Source::Facts(table) => table,
                Source::Rollup(finer) => &finer.table,
            };
            let Some((first, last)) = time_bounds(store, table, build.span).await? else {
                continue;
            };
            let from = floor_to(first, rollup.interval).max(build.span.0);
            let to = ceil_to(last.saturating_add(1), rollup.interval).min(build.span.1);
            for (start, end) in chunks(rollup.interval, from, to) {
                statements.push(rollup.rebuild_sql(source, start, end, state.seen_block));
            }
        }
        store.execute_all(statements).await?;
        Ok(plan.cuts)
    }

    /// Records in `store` that the table `names` moved to the levels and
    /// cuts of `state` (now: removals before the new cuts wait, in the
    /// cluster mode, for every node to learn them), and that the tables
    /// of the levels it left go.
    pub(super) async fn record_move(
        &self,
        store: Store<'_>,
        names: &TableNames,
        state: &mut State,
    ) -> Result<()> {
        state.cuts_at = now_ns();
        save_state(store, names, state).await?;
        let key = store.key(&names.storage_table);
        // The removed cuts of the levels left mean nothing to the new.
        self.book
            .lock()
            .unwrap()
            .removed
            .insert(key.clone(), state.cuts.clone());
        self.book.lock().unwrap().retiring.insert(key);
        Ok(())
    }

    /// Whether the pass over the table whose key in `store` is `key`, with
    /// `state`, drops the rollups of levels it left: once it is
    /// [`retiring`](super::downsampler::Book::retiring); in the cluster
    /// mode only once the nodes, which read the old levels until they
    /// learn the new, had the removal delay to learn them.
    pub(super) fn retires(&self, key: &str, state: &State) -> bool {
        if !self.book.lock().unwrap().retiring.contains(key) {
            return false;
        }
        self.mode.learnt_by_all(state.cuts_at, now_ns())
    }
}

/// Whether rows of the fact table `names` went (its rollups hold buckets
/// before the rows' cut; its coarsest level holds every bucket there
/// that any level does). A registry of an earlier version, which does not
/// name its levels, went as soon as it has a cut.
pub(super) async fn rows_went(store: Store<'_>, names: &TableNames, state: &State) -> Result<bool> {
    let (Some(rows_from), Some(coarsest)) = (state.cuts.rows_from, state.levels.last()) else {
        return Ok(state.cuts.rows_from.is_some());
    };
    let rollup = Rollup::new(names, &[], *coarsest);
    holds_buckets(store, &rollup, (i64::MIN, rows_from)).await
}

/// How the rollups of the fact table `names` move from the levels `old`
/// (with their cuts) to `new` ([`plan_migration`]); refused (`refused`,
/// why) where it would lose buckets: the old coarsest level holds every
/// bucket any level does where no new level could be built.
pub(super) async fn checked_migration(
    store: Store<'_>,
    names: &TableNames,
    (old, cuts): (&[Resolution], &Cuts),
    new: &[Resolution],
    refused: impl Fn(String) -> Error,
) -> Result<Migration> {
    let plan = plan_migration(old, cuts, new).map_err(&refused)?;
    if let (Some(span), Some(coarsest)) = (plan.uncovered, old.last()) {
        if holds_buckets(store, &Rollup::new(names, &[], *coarsest), span).await? {
            return Err(refused(plan.loses(old)));
        }
    }
    Ok(plan)
}

/// Refuses (`refused`, why) moving the table `names` from the levels its
/// `state` records (`current`'s if it records none) to `wanted`'s where
/// that would lose data ([`checked_migration`]).
pub(super) async fn check_move(
    engine: &Engine,
    names: &TableNames,
    state: &State,
    (current, wanted): (&Downsampling, &Downsampling),
    refused: impl Fn(String) -> Error,
) -> Result<()> {
    let (levels, new) = (state.levels_or(current), resolutions(wanted));
    checked_migration(
        Store::Here(engine),
        names,
        (&levels, &state.cuts),
        &new,
        refused,
    )
    .await?;
    Ok(())
}

/// Why a database whose rows went before `cuts` cannot stop being
/// downsampled.
pub(super) fn no_longer_downsampled(cuts: &Cuts) -> String {
    format!(
        "its rows before {} went, and are kept only in its rollups: it stays downsampled \
         (give it its levels, or levels with longer ages to keep more rows from now on)",
        date(cuts.rows_from())
    )
}
