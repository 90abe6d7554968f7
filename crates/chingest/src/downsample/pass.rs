//! A pass: over every downsampled database's tables, what changed since
//! the last one (new blocks, marked edits), the rollups rebuilt or merged
//! over it, the progress recorded, then the moves and removals the
//! levels' ages ask for. Tables nothing happened to are passed by.

use crate::config::Downsampling;
use crate::engine::{Engine, StatementKind};
use crate::error::{Error, Result};
use crate::layout::names::{quote_literal, TableNames};
use crate::layout::rollup::{blocks_after_sql, rollup_name, Rollup, Source};
use crate::layout::schema::FieldType;

use super::downsampler::{Downsampler, Mode};
use super::registry::{
    clear_marks, read_state, save_state, state_table_sql, Glance, Mark, MARK, STATE_TABLE,
};
use super::state::{ceil_to, chunks, floor_to, resolutions, rollups, widen, Span, State, CLEAN};
use super::store::{stores, Store};
use crate::clock::now_ns;

impl Downsampler {
    /// One pass over every downsampled database; in the `clickhouse`
    /// storage mode over each shard, and only over the databases whose
    /// [`Lease`](crate::lease::Lease) this node holds. Whether it passed over any table.
    pub(crate) async fn pass(&self) -> Result<bool> {
        let (Some(engine), Some(catalog)) = (self.engine.upgrade(), self.catalog.upgrade()) else {
            return Ok(false);
        };
        // (In the embedded mode a pass is made even with no table.)
        let mut passed_any = matches!(self.mode, Mode::Embedded);
        for name in self.policies.downsampled() {
            let Some(database) = catalog.database(&name) else {
                continue;
            };
            // Read at the first table this node passes over.
            let mut glances: Option<Vec<Glance>> = None;
            for ((rp, measurement), table) in database.tables() {
                let names = TableNames::new(&name, &rp, &measurement);
                let fields = table.schema().fields.clone();
                let storage = &names.storage_table;
                // One table at a time: an edit waits for one table's pass
                // at most, not for a pass over every database.
                let _pass = self.passes.lock().await;
                // Read under the lock: a statement may have changed it.
                let Some(policy) = self.policies.table_policy(&name, &measurement) else {
                    continue;
                };
                // Asked before each table: a pass that outlives its term
                // stops at the next table.
                if !self.mode.may_pass(&engine, &names).await? {
                    break;
                }
                passed_any = true;
                // Taken before the pass looks for new rows: an insert it
                // does not find reports again, after, into `pending`.
                // (Under the pass lock, no other pass holds this table's.)
                let (reported, known) = {
                    let mut readers = self.readers.lock().unwrap();
                    let unsettled = &mut readers.unsettled;
                    let reported = unsettled.pending.remove(storage);
                    if let Some(span) = reported {
                        unsettled.passing.insert(storage.clone(), span);
                    }
                    (reported.is_some(), unsettled.known.contains(storage))
                };
                let retention_s = database.retention_seconds(&rp);
                if glances.is_none() {
                    glances = Some(self.glance(&engine, &name).await);
                }
                let stores = stores(&engine);
                let now = now_ns();
                let idle = !reported
                    && known
                    && !self.book.lock().unwrap().stale.contains(storage)
                    && glances.as_ref().is_some_and(|glances| {
                        glances.len() == stores.len()
                            && glances.iter().zip(&stores).all(|(glance, store)| {
                                let key = store.key(storage);
                                self.idle(&key, glance, &names, &policy, retention_s, now)
                            })
                    });
                let passed = match idle {
                    true => Ok(Passed::Done),
                    false => {
                        self.pass_everywhere(&engine, &names, &fields, &policy, retention_s)
                            .await
                    }
                };
                let mut readers = self.readers.lock().unwrap();
                let unsettled = &mut readers.unsettled;
                let passing = unsettled.passing.remove(storage);
                match passed {
                    Ok(Passed::Done) => {
                        unsettled.known.insert(storage.clone());
                    }
                    Ok(Passed::Deferred) => {
                        if let Some(span) = passing {
                            widen(&mut unsettled.pending, storage, span);
                        }
                    }
                    Err(err) => {
                        // Its tables may be gone (a database dropped and
                        // made again): made again at the next pass, while
                        // readers keep reading them where rows are gone.
                        // What it took is still unsettled.
                        self.book.lock().unwrap().stale.insert(storage.clone());
                        unsettled.known.remove(storage);
                        if let Some(span) = passing {
                            widen(&mut unsettled.pending, storage, span);
                        }
                        return Err(err);
                    }
                }
            }
        }
        Ok(passed_any)
    }

    /// What a pass reads at once of the tables of `database` in each
    /// store ([`Glance`]); none where that fails (each table is then
    /// passed over, which reports what failed).
    pub(super) async fn glance(&self, engine: &Engine, database: &str) -> Vec<Glance> {
        let names = TableNames::new(database, "", "");
        let mut glances = Vec::new();
        for store in stores(engine) {
            match Glance::read(store, &names).await {
                Ok(glance) => glances.push(glance),
                Err(_) => return Vec::new(),
            }
        }
        glances
    }

    /// Whether a pass over the table `names` in a store (its [`Store::key`]
    /// there `key`) has nothing to do, by what `glance` read there at
    /// `now`: no block after the last one rolled up, no edit marked, its
    /// levels `policy`'s, its cuts where `policy` and `retention_s` put
    /// them, nothing before them left to remove, and no level's tables to
    /// drop. (New rows or an edit reported here are passed over anyway.)
    pub(super) fn idle(
        &self,
        key: &str,
        glance: &Glance,
        names: &TableNames,
        policy: &Downsampling,
        retention_s: u64,
        now: i64,
    ) -> bool {
        let storage = &names.storage_name;
        let Some(state) = glance.registry.tables.get(storage) else {
            return false;
        };
        let marked = glance.registry.marks.iter().any(|mark| {
            mark.key
                .split_once(MARK)
                .is_some_and(|(table, _)| table == storage)
        });
        let (last_block, first_end_s) = glance.parts.get(storage).copied().unwrap_or((0, i64::MAX));
        let removal_due = self.book.lock().unwrap().removed.get(key) != Some(&state.cuts)
            && self.mode.learnt_by_all(state.cuts_at, now);
        let parts_due = state
            .cuts
            .rows_from
            .is_some_and(|rows_from| first_end_s < rows_from.div_euclid(1_000_000_000));
        !marked
            && state.dirty_from == CLEAN
            && last_block <= state.seen_block
            && state.levels == resolutions(policy)
            && state.cuts.at(policy, retention_s, now) == state.cuts
            && !removal_due
            && !parts_due
            && !self.retires(key, state)
    }

    /// A pass over the fact table `names`: here in the embedded mode; in
    /// the cluster mode over each shard in turn, once every shard holds
    /// the table's levels ([`move_shards`](Self::move_shards)).
    pub(super) async fn pass_everywhere(
        &self,
        engine: &Engine,
        names: &TableNames,
        fields: &[(String, FieldType)],
        policy: &Downsampling,
        retention_s: u64,
    ) -> Result<Passed> {
        let levels = resolutions(policy);
        let rollups = rollups(names, fields, &levels);
        if !rollups[0].keeps_fields() {
            // Nothing to keep (array fields only): the rows stay.
            return Ok(Passed::Done);
        }
        self.make_tables(engine, names, &rollups, fields).await?;
        let stores = stores(engine);
        // This process's first pass over the table drops what a move (by
        // another process, or one cut short) left.
        if !self
            .readers
            .lock()
            .unwrap()
            .unsettled
            .known
            .contains(&names.storage_table)
        {
            let mut book = self.book.lock().unwrap();
            let retiring = &mut book.retiring;
            retiring.extend(stores.iter().map(|store| store.key(&names.storage_table)));
        }
        let mut states = Vec::new();
        for store in &stores {
            states.push(read_state(*store, names).await?);
        }
        if let Some(shards) = &engine.cluster {
            self.move_shards(engine, shards, names, fields, &mut states, &levels)
                .await?;
        }
        let mut passed = Passed::Done;
        for (store, state) in stores.into_iter().zip(states) {
            let table = (names, fields, &rollups[..]);
            if let Passed::Deferred = self
                .pass_table(store, table, policy, retention_s, state)
                .await?
            {
                passed = Passed::Deferred;
            }
        }
        Ok(passed)
    }

    /// A pass over the fact table `names` (with `fields` and the
    /// `rollups` of `policy`'s levels) in `store`, whose registry holds
    /// `state` and `marks`.
    pub(super) async fn pass_table(
        &self,
        store: Store<'_>,
        (names, fields, rollups): (&TableNames, &[(String, FieldType)], &[Rollup]),
        policy: &Downsampling,
        retention_s: u64,
        (mut state, marks): (State, Vec<Mark>),
    ) -> Result<Passed> {
        let levels = resolutions(policy);
        let retiring = store.key(&names.storage_table);
        if !state.levels.is_empty() && state.levels != levels {
            // (Only in the embedded mode: `move_shards` moved the shards.)
            self.migrate(store, names, fields, &mut state, &levels)
                .await?;
        } else if self.retires(&retiring, &state) {
            self.drop_retired(store, names, &levels).await?;
            self.book.lock().unwrap().retiring.remove(&retiring);
        }
        // Marks of edits made on any node (the cluster mode).
        for mark in &marks {
            state.dirty_from = state.dirty_from.min(mark.span.0);
            state.dirty_to = state.dirty_to.max(mark.span.1);
        }
        let (seen_block, inserted) = self.changes(store, names, state.seen_block).await?;
        let edited = match state.dirty_from {
            CLEAN => None,
            _ => Some(self.bounded(store, names, &rollups[0], &state).await?),
        };
        // Rows arriving at the present fill the newest bucket pass after
        // pass; rebuilt at each, each of its rows would be read about
        // bucket ÷ period times. Until it closes readers read its rows,
        // then one pass builds it (a table known since this process
        // started: the first pass takes everything).
        // (Rows stamped later than the newest bucket are not waited for:
        // a clock ahead would defer the table for ever.)
        let open = floor_to(now_ns(), levels[0].interval);
        let open_end = open.saturating_add(levels[0].interval.as_nanos() as i64);
        let known = self
            .readers
            .lock()
            .unwrap()
            .unsettled
            .known
            .contains(&names.storage_table);
        let in_open = |(from, to): Span| from >= open && to <= open_end;
        if known && edited.is_none() && inserted.is_some_and(in_open) {
            return Ok(Passed::Deferred);
        }
        let changed = inserted.is_some() || edited.is_some();
        let (statements, merged) = catch_up(names, rollups, &state, inserted, edited, seen_block);
        store.execute_all(statements).await?;
        if merged || edited.is_some() {
            // Where rows are gone, rows written there are read from now
            // on, and coarser levels edited are rebuilt from finer ones.
            self.unsettle(&names.database_name);
        }
        let mut done = State {
            seen_block,
            levels,
            cuts: state.cuts.clone(),
            cuts_at: state.cuts_at,
            ..State::default()
        };
        if changed || state.levels.is_empty() {
            save_state(store, names, &done).await?;
        }
        clear_marks(store, names, &marks).await?;
        self.remove_aged(store, names, rollups, &mut done, policy, retention_s)
            .await?;
        // (In the cluster mode readers learn them from every shard.)
        if store.is_here() {
            self.keep(names, done.levels, done.cuts);
        }
        Ok(Passed::Done)
    }

    /// Makes the registry and `rollups` (with a column for every one of
    /// `fields`) unless this process made them for as many fields already
    /// and no pass over the table failed since ([`stale`](super::downsampler::Book::stale)).
    /// Until they are made, readers keep the fields made before.
    pub(super) async fn make_tables(
        &self,
        engine: &Engine,
        names: &TableNames,
        rollups: &[Rollup],
        fields: &[(String, FieldType)],
    ) -> Result<()> {
        let table = &names.storage_table;
        let stale = self.book.lock().unwrap().stale.contains(table);
        if !stale
            && self.readers.lock().unwrap().made.get(table).map(Vec::len) == Some(fields.len())
        {
            return Ok(());
        }
        // Readers keep the fields made before until these are.
        let mut ddl = state_table_sql(names);
        let mut tables = vec![(names.database_name.clone(), STATE_TABLE.to_owned())];
        for rollup in rollups {
            ddl.push(rollup.create_sql());
            ddl.push(rollup.add_columns_sql(fields));
            let name = rollup_name(&names.storage_name, rollup.resolution());
            tables.push((names.database_name.clone(), name));
        }
        // In the cluster mode on every shard, read here through
        // `Distributed` tables.
        engine
            .execute_on_storage(ddl, StatementKind::Create, tables)
            .await?;
        self.readers
            .lock()
            .unwrap()
            .made
            .insert(table.clone(), fields.to_vec());
        self.book.lock().unwrap().stale.remove(table);
        Ok(())
    }

    /// The marked range of `state`, its open ends bounded by the rows of
    /// the fact table and of its finest rollup (which an edit may have
    /// left with buckets whose rows are gone). An empty table bounds
    /// nothing (`min` of no rows would be 1970, `minOrNull` is none).
    pub(super) async fn bounded(
        &self,
        store: Store<'_>,
        names: &TableNames,
        finest: &Rollup,
        state: &State,
    ) -> Result<(i64, i64)> {
        let sql = format!(
            "SELECT toUnixTimestamp64Nano(min(t)), toUnixTimestamp64Nano(max(t)) FROM \
             (SELECT minOrNull(time) AS t FROM {} UNION ALL SELECT maxOrNull(time) FROM {} \
              UNION ALL SELECT minOrNull(time) FROM {} UNION ALL SELECT maxOrNull(time) FROM {})",
            names.storage_table, names.storage_table, finest.table, finest.table
        );
        let rows = store.rows(sql).await?;
        let number = |i: usize| rows.first().and_then(|row| row.get(i)?.parse::<i64>().ok());
        let (Some(first), Some(last)) = (number(0), number(1)) else {
            return Ok((state.dirty_from, state.dirty_from));
        };
        let last = last.saturating_add(finest.interval.as_nanos() as i64);
        Ok((state.dirty_from.max(first), state.dirty_to.min(last)))
    }

    /// The last block number of the fact table, and the time range of the
    /// rows inserted after block `seen` (`[first, last + 1)`, ns), if any.
    pub(super) async fn changes(
        &self,
        store: Store<'_>,
        names: &TableNames,
        seen: u64,
    ) -> Result<(u64, Option<(i64, i64)>)> {
        let parts_sql = format!(
            "SELECT max(max_block_number) FROM system.parts WHERE database = {} AND table = {} \
             AND active AND NOT startsWith(name, 'patch-')",
            quote_literal(&names.database_name),
            quote_literal(&names.storage_name)
        );
        let parts = store.rows(parts_sql).await?;
        let last = match parts.first().map(|row| row[0].parse::<u64>()) {
            Some(Ok(block)) => block.max(seen),
            Some(Err(_)) => return Err(Error::Engine(format!("system.parts: {parts:?}"))),
            None => seen,
        };
        if last == seen {
            return Ok((last, None));
        }
        // Only the parts holding new rows are read.
        let sql = format!(
            "SELECT toUnixTimestamp64Nano(min(time)), toUnixTimestamp64Nano(max(time)), count() \
             FROM {} WHERE {} AND _block_number <= {last}",
            names.storage_table,
            blocks_after_sql(seen)
        );
        let rows = store.rows(sql).await?;
        let range = match rows.first() {
            Some(row) if row[2] != "0" => match (row[0].parse::<i64>(), row[1].parse::<i64>()) {
                (Ok(first), Ok(last)) => Some((first, last.saturating_add(1))),
                _ => None,
            },
            _ => None,
        };
        Ok((last, range))
    }
}

/// The statements that bring `rollups` up to block `through` where rows
/// were `inserted` (`[from, to)`, ns) or an edit marked (`edited`): per
/// level, finest first, in whole buckets, a rebuild from its source where
/// that is kept (deleting the buckets first after an edit) and, where it
/// is gone, a merge with the inserted rows (edits changed those buckets
/// themselves); nothing before the level's own cut.
pub(super) fn catch_up(
    names: &TableNames,
    rollups: &[Rollup],
    state: &State,
    inserted: Option<Span>,
    edited: Option<Span>,
    through: u64,
) -> (Vec<String>, bool) {
    let (Some((mut from, mut to)), mut new) = (
        match (inserted, edited) {
            (Some(a), Some(b)) => Some((a.0.min(b.0), a.1.max(b.1))),
            (a, b) => a.or(b),
        },
        inserted.unwrap_or((0, 0)),
    ) else {
        return (Vec::new(), false);
    };
    let mut statements = Vec::new();
    let mut merged = false;
    for (i, rollup) in rollups.iter().enumerate() {
        // Whole buckets of this level over what changed in the finer one.
        let whole = |(from, to): Span| {
            (
                floor_to(from, rollup.interval),
                ceil_to(to, rollup.interval),
            )
        };
        ((from, to), new) = (whole((from, to)), whole(new));
        let own = state.cuts.kept_from(i);
        let source = state.cuts.source_from(i);
        let rebuild_from = from.max(own).max(source);
        // Where the rows are kept, readers read them over what an edit
        // marked until the pass is done: its buckets may go first.
        let hidden = rebuild_from.max(state.cuts.rows_from());
        if edited.is_some() && hidden < to {
            statements.push(rollup.delete_sql(hidden, to));
        }
        for (start, end) in chunks(rollup.interval, new.0.max(own), new.1.min(source)) {
            statements.push(rollup.merge_sql(
                &names.storage_table,
                start,
                end,
                state.seen_block,
                through,
            ));
            merged = true;
        }
        let source = match i {
            0 => Source::Facts(&names.storage_table),
            _ => Source::Rollup(&rollups[i - 1]),
        };
        for (start, end) in chunks(rollup.interval, rebuild_from, to) {
            statements.push(rollup.rebuild_sql(source, start, end, through));
        }
        // Before, readers read this level: emptied buckets go after.
        if let (Some(_), Source::Rollup(finer)) = (edited, source) {
            if rebuild_from < hidden.min(to) {
                statements.push(rollup.delete_emptied_sql(finer, rebuild_from, hidden.min(to)));
            }
        }
    }
    (statements, merged)
}

/// What a pass did with a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Passed {
    /// Its rollups hold every row it found.
    Done,
    /// Its new rows all fall in the newest bucket: left to a later pass.
    Deferred,
}
