//! Downsampling: the rollups of every fact table of a downsampled
//! database ([`Downsampling`], `layout::rollup`) kept equal to what they
//! roll up. A background task ([`run`]) makes a pass every
//! [`DownsamplingConfig::period`](crate::DownsamplingConfig::period); a
//! pass over a table:
//!
//! 1. finds what changed since the last pass: the time range of the rows
//!    of blocks inserted since (each insert into a fact table gets the next
//!    block number, and one table's inserts run one at a time, so none
//!    becomes visible below a number already seen), and the range an edit
//!    marked ([`Downsampler::mark`]);
//! 2. rebuilds the finest level's buckets over that range from the rows
//!    (deleting them first after an edit), then each coarser level's over
//!    the same span from the finer level;
//! 3. records, in the database's `_downsampling` table, the last block seen
//!    and no mark, after the rebuilt buckets are durable.
//!
//! A crash anywhere repeats work, never skips it: a bucket is rebuilt
//! whole and the table keeps the newest build. Edits hold the pass lock
//! while they mark and edit, so a pass sees an edit's mark and its effect
//! together.
//!
//! Readers ([`RollupView`]) take a bucket from a rollup only where no row
//! may be missing from it: the downsampler keeps, in memory, the span of
//! the rows each table was given since a pass took its last span (the
//! flusher reports every insert before and after it is made) and of the
//! edits marked since; readers read the rows over those spans. After a
//! restart nothing is known until a table's first pass (which finds every
//! row the rollups lack by block number): until then readers read rows.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::catalog::Catalog;
use crate::config::Downsampling;
use crate::engine::{query_rows, Engine};
use crate::error::{Error, Result};
use crate::last_value::now_ns;
use crate::layout::names::{quote_ident, quote_literal, TableNames};
use crate::layout::rollup::{Rollup, Source};
use crate::layout::schema::FieldType;
use crate::stats::IngestStats;

/// The registry of a downsampled database's progress: per fact table, the
/// last block rolled up and the range an edit marked.
pub(crate) const STATE_TABLE: &str = "_downsampling";

/// No mark.
const CLEAN: i64 = i64::MAX;
/// The most of the finest level's time one statement rebuilds.
const CHUNK_NS: i64 = 86_400 * 1_000_000_000;

/// Keeps the rollups of the databases `policies` names.
#[derive(Debug)]
pub(crate) struct Downsampler {
    engine: Weak<Engine>,
    catalog: Weak<Catalog>,
    policies: BTreeMap<String, Downsampling>,
    /// Held by a pass over a table and by an edit of a downsampled database.
    passes: tokio::sync::Mutex<()>,
    /// The fields each fact table's rollups and registry were made for in
    /// this process (by storage table): tables are made again only for a
    /// table new here or grown a field (schemas only grow), not every pass.
    made: Mutex<HashMap<String, Vec<(String, FieldType)>>>,
    /// What each table's rollups may lack.
    unsettled: Mutex<Unsettled>,
}

/// A time span, `[from, to)` in ns.
type Span = (i64, i64);

impl RollupView {
    /// The coarsest level whose bucket width `fits`, as (width, table).
    pub fn level(&self, fits: impl Fn(Duration) -> bool) -> Option<(Duration, &str)> {
        self.levels
            .iter()
            .rev()
            .find(|(interval, _)| fits(*interval))
            .map(|(interval, table)| (*interval, table.as_str()))
    }

    /// Splits `[start, end)` (ns) for a read at buckets of `interval`:
    /// the spans whose buckets the rollup holds whole (inside the range,
    /// outside what it may lack), and the rest, to be read from the rows.
    /// `None` when no whole bucket is left to the rollup.
    pub fn split(&self, interval: Duration, start: i64, end: i64) -> Option<RollupSplit> {
        let (first, last) = (ceil_to(start, interval), floor_to(end, interval));
        if first >= last {
            return None;
        }
        let (skip_from, skip_to) = self.unsettled.map_or((last, last), |(from, to)| {
            (
                floor_to(from, interval).clamp(first, last),
                ceil_to(to, interval).clamp(first, last),
            )
        });
        let keep = |spans: &[Span]| -> Vec<Span> {
            spans.iter().copied().filter(|(a, b)| a < b).collect()
        };
        let rollup = keep(&[(first, skip_from), (skip_to, last)]);
        (!rollup.is_empty()).then(|| RollupSplit {
            rows: keep(&[(start, first), (skip_from, skip_to), (last, end)]),
            rollup,
        })
    }
}

/// A range split between a rollup and the rows ([`RollupView::split`]):
/// `[from, to)` spans in ns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollupSplit {
    /// Whole buckets the rollup holds.
    pub rollup: Vec<(i64, i64)>,
    /// The rest of the range.
    pub rows: Vec<(i64, i64)>,
}

fn union(a: Option<Span>, b: Span) -> Span {
    a.map_or(b, |a| (a.0.min(b.0), a.1.max(b.1)))
}

/// Widens `table`'s span in `spans` to cover `span`.
fn widen(spans: &mut HashMap<String, Span>, table: &str, span: Span) {
    let widened = union(spans.get(table).copied(), span);
    spans.insert(table.to_owned(), widened);
}

/// The rows each fact table (by storage table) may hold that its rollups
/// do not.
#[derive(Debug, Default)]
struct Unsettled {
    /// Tables a pass finished in this process: for these, every row a
    /// rollup lacks is in `pending` or `passing`.
    known: std::collections::HashSet<String>,
    /// Spans of inserts and marks since a pass last took them.
    pending: HashMap<String, Span>,
    /// The spans the running pass took.
    passing: HashMap<String, Span>,
}

/// What a reader may take from the rollups of one fact table
/// ([`crate::Ingestor::rollups`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollupView {
    /// The levels, finest first: the width of their buckets and their
    /// table's quoted name.
    pub levels: Vec<(Duration, String)>,
    /// The fields whose columns (`Rollup::column`) every level has.
    pub fields: Vec<(String, FieldType)>,
    /// The span `[from, to)` (ns) where the rollups may lack rows or keep
    /// some an edit removed: read the rows there, in whole buckets.
    pub unsettled: Option<(i64, i64)>,
}

/// A fact table's progress: the last block rolled up, and the range an
/// edit marked and no pass rebuilt yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct State {
    /// The last block number of the fact table rolled up.
    seen_block: u64,
    /// The start of the marked range (ns), or [`CLEAN`].
    dirty_from: i64,
    /// Its end (ns, excluded).
    dirty_to: i64,
}

impl Default for State {
    fn default() -> Self {
        State {
            seen_block: 0,
            dirty_from: CLEAN,
            dirty_to: i64::MIN,
        }
    }
}

fn floor_to(t: i64, interval: Duration) -> i64 {
    let step = interval.as_nanos() as i64;
    t.div_euclid(step).saturating_mul(step)
}

/// The end of the bucket holding `t - 1`: `[from, to)` in whole buckets
/// is `[floor_to(from), ceil_to(to))`.
fn ceil_to(t: i64, interval: Duration) -> i64 {
    floor_to(t.saturating_sub(1), interval).saturating_add(interval.as_nanos() as i64)
}

impl Downsampler {
    pub(crate) fn new(
        engine: &Arc<Engine>,
        catalog: &Arc<Catalog>,
        policies: BTreeMap<String, Downsampling>,
    ) -> Downsampler {
        Downsampler {
            engine: Arc::downgrade(engine),
            catalog: Arc::downgrade(catalog),
            policies,
            passes: tokio::sync::Mutex::new(()),
            made: Mutex::default(),
            unsettled: Mutex::default(),
        }
    }

    /// The policy of `database`, if it is downsampled.
    pub(crate) fn policy(&self, database: &str) -> Option<&Downsampling> {
        self.policies.get(database)
    }

    /// Notes rows of `table` (a storage table of `database`) over `span`
    /// being inserted: readers read them from the rows until a pass has
    /// rolled them up. Tables of other databases are not kept.
    pub(crate) fn inserting(&self, database: &str, table: &str, span: Span) {
        if self.policy(database).is_some() {
            widen(&mut self.unsettled.lock().unwrap().pending, table, span);
        }
    }

    /// What a reader may take from the rollups of the fact table `names`;
    /// `None` when its database is not downsampled or no pass finished
    /// over the table since the process started.
    pub(crate) fn view(&self, names: &TableNames) -> Option<RollupView> {
        let policy = self.policy(&names.database_name)?;
        let table = &names.storage_table;
        let unsettled = {
            let unsettled = self.unsettled.lock().unwrap();
            if !unsettled.known.contains(table) {
                return None;
            }
            let pending = unsettled.pending.get(table).copied();
            let passing = unsettled.passing.get(table).copied();
            match (pending, passing) {
                (None, None) => None,
                (a, Some(b)) | (Some(b), a) => Some(union(a, b)),
            }
        };
        let fields = self.made.lock().unwrap().get(table)?.clone();
        // Their names only: no field's columns are needed here.
        let levels = rollups(names, &[], policy)
            .into_iter()
            .map(|rollup| (rollup.interval, rollup.table))
            .collect();
        Some(RollupView {
            levels,
            fields: fields
                .into_iter()
                .filter(|(_, ty)| crate::layout::rollup::Aggregate::Count.applies_to(*ty))
                .collect(),
            unsettled,
        })
    }

    /// Holds passes off while an edit of a downsampled database marks and
    /// changes rows.
    pub(crate) async fn hold(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.passes.lock().await
    }

    /// Marks the fact tables of `database` an edit is about to change (of
    /// retention policy `rp` and measurement `measurement`, `None`: every
    /// one) as changed from `from_ns` on; durable when it returns. The
    /// caller holds [`hold`](Self::hold) until the edit is done.
    pub(crate) async fn mark(
        &self,
        database: &str,
        rp: Option<&str>,
        measurement: Option<&str>,
        (from_ns, to_ns): (i64, i64),
    ) -> Result<()> {
        let (Some(policy), Some(engine), Some(catalog)) = (
            self.policy(database),
            self.engine.upgrade(),
            self.catalog.upgrade(),
        ) else {
            return Ok(());
        };
        let Some(db) = catalog.database(database) else {
            return Ok(());
        };
        for ((table_rp, table_measurement), table) in db.tables() {
            if rp.is_some_and(|rp| rp != table_rp)
                || measurement.is_some_and(|m| m != table_measurement)
            {
                continue;
            }
            let names = TableNames::new(database, &table_rp, &table_measurement);
            let fields = &table.schema().fields;
            self.make_tables(&engine, &names, &rollups(&names, fields, policy), fields)
                .await?;
            let mut state = self.state(&engine, &names).await?;
            state.dirty_from = state.dirty_from.min(from_ns);
            state.dirty_to = state.dirty_to.max(to_ns);
            // Readers read rows over the span before the edit changes them.
            self.inserting(database, &names.storage_table, (from_ns, to_ns));
            self.save(&engine, &names, state).await?;
        }
        Ok(())
    }

    /// One pass over every downsampled database.
    pub(crate) async fn pass(&self) -> Result<()> {
        let (Some(engine), Some(catalog)) = (self.engine.upgrade(), self.catalog.upgrade()) else {
            return Ok(());
        };
        for (name, policy) in &self.policies {
            let Some(database) = catalog.database(name) else {
                continue;
            };
            for ((rp, measurement), table) in database.tables() {
                let names = TableNames::new(name, &rp, &measurement);
                let fields = table.schema().fields.clone();
                let storage = &names.storage_table;
                // One table at a time: an edit waits for one table's pass
                // at most, not for a pass over every database.
                let _pass = self.passes.lock().await;
                // Taken before the pass looks for new rows: an insert it
                // does not find reports again, after, into `pending`.
                // (Under the pass lock, no other pass holds this table's.)
                {
                    let mut unsettled = self.unsettled.lock().unwrap();
                    if let Some(span) = unsettled.pending.remove(storage) {
                        unsettled.passing.insert(storage.clone(), span);
                    }
                }
                let passed = self.pass_table(&engine, &names, &fields, policy).await;
                let mut unsettled = self.unsettled.lock().unwrap();
                let passing = unsettled.passing.remove(storage);
                match passed {
                    Ok(()) => {
                        unsettled.known.insert(storage.clone());
                    }
                    Err(err) => {
                        // Its tables may be gone (a database dropped and
                        // made again); what it took is still unsettled.
                        self.made.lock().unwrap().remove(storage);
                        unsettled.known.remove(storage);
                        if let Some(span) = passing {
                            widen(&mut unsettled.pending, storage, span);
                        }
                        return Err(err);
                    }
                }
            }
        }
        Ok(())
    }

    async fn pass_table(
        &self,
        engine: &Engine,
        names: &TableNames,
        fields: &[(String, FieldType)],
        policy: &Downsampling,
    ) -> Result<()> {
        let rollups = rollups(names, fields, policy);
        self.make_tables(engine, names, &rollups, fields).await?;
        let state = self.state(engine, names).await?;
        let (seen_block, inserted) = self.changes(engine, names, state.seen_block).await?;
        let edited = match state.dirty_from {
            CLEAN => None,
            _ => Some(self.bounded(engine, names, &rollups[0], state).await?),
        };
        let changed = match (inserted, edited) {
            (Some(a), Some(b)) => Some((a.0.min(b.0), a.1.max(b.1))),
            (a, b) => a.or(b),
        };
        let Some((mut from, mut to)) = changed else {
            return Ok(());
        };
        let mut statements = Vec::new();
        for (i, rollup) in rollups.iter().enumerate() {
            // Whole buckets of this level over what changed in the finer one.
            (from, to) = (
                floor_to(from, rollup.interval),
                ceil_to(to, rollup.interval),
            );
            // An edit can empty a bucket, which a rebuild would not replace.
            if edited.is_some() {
                statements.push(rollup.delete_sql(from, to));
            }
            let source = match i {
                0 => Source::Facts(&names.storage_table),
                _ => Source::Rollup(&rollups[i - 1]),
            };
            // Whole buckets per statement, about a day of them.
            let step = rollup.interval.as_nanos() as i64;
            let chunk = (CHUNK_NS / step).max(1) * step;
            let mut start = from;
            while start < to {
                let end = start.saturating_add(chunk).min(to);
                statements.push(rollup.rebuild_sql(source, start, end));
                start = end;
            }
        }
        engine.execute_all(statements).await?;
        let done = State {
            seen_block,
            ..State::default()
        };
        self.save(engine, names, done).await
    }

    /// Makes the registry and `rollups` (with a column for every one of
    /// `fields`) unless this process made them for as many fields already.
    /// A failure forgets the table, so the next pass makes them again.
    async fn make_tables(
        &self,
        engine: &Engine,
        names: &TableNames,
        rollups: &[Rollup],
        fields: &[(String, FieldType)],
    ) -> Result<()> {
        let table = &names.storage_table;
        if self.made.lock().unwrap().get(table).map(Vec::len) == Some(fields.len()) {
            return Ok(());
        }
        self.made.lock().unwrap().remove(table);
        let mut ddl = vec![state_table_sql(names)];
        for rollup in rollups {
            ddl.push(rollup.create_sql());
            ddl.extend(rollup.add_columns_sql(fields));
        }
        engine.execute_all(ddl).await?;
        self.made
            .lock()
            .unwrap()
            .insert(table.clone(), fields.to_vec());
        Ok(())
    }

    /// The marked range of `state`, its open ends bounded by the rows of
    /// the fact table and of its finest rollup (which an edit may have
    /// left with buckets whose rows are gone). An empty table bounds
    /// nothing (`min` of no rows would be 1970, `minOrNull` is none).
    async fn bounded(
        &self,
        engine: &Engine,
        names: &TableNames,
        finest: &Rollup,
        state: State,
    ) -> Result<(i64, i64)> {
        let sql = format!(
            "SELECT toUnixTimestamp64Nano(min(t)), toUnixTimestamp64Nano(max(t)) FROM \
             (SELECT minOrNull(time) AS t FROM {} UNION ALL SELECT maxOrNull(time) FROM {} \
              UNION ALL SELECT minOrNull(time) FROM {} UNION ALL SELECT maxOrNull(time) FROM {})",
            names.storage_table, names.storage_table, finest.table, finest.table
        );
        let rows = engine.run(move |conn| query_rows(conn, &sql)).await?;
        let number = |i: usize| rows.first().and_then(|row| row.get(i)?.parse::<i64>().ok());
        let (Some(first), Some(last)) = (number(0), number(1)) else {
            return Ok((state.dirty_from, state.dirty_from));
        };
        let last = last.saturating_add(finest.interval.as_nanos() as i64);
        Ok((state.dirty_from.max(first), state.dirty_to.min(last)))
    }

    /// The last block number of the fact table, and the time range of the
    /// rows inserted after block `seen` (`[first, last + 1)`, ns), if any.
    async fn changes(
        &self,
        engine: &Engine,
        names: &TableNames,
        seen: u64,
    ) -> Result<(u64, Option<(i64, i64)>)> {
        let parts_sql = format!(
            "SELECT name, max_block_number FROM system.parts WHERE database = {} AND table = {} \
             AND active AND NOT startsWith(name, 'patch-')",
            quote_literal(&names.database_name),
            quote_literal(&names.storage_name)
        );
        let table = names.storage_table.clone();
        engine
            .run(move |conn| {
                let parts = query_rows(conn, &parts_sql)?;
                let mut last = seen;
                let mut newer = Vec::new();
                for row in &parts {
                    let block: u64 = row[1]
                        .parse()
                        .map_err(|_| Error::Engine(format!("system.parts: {row:?}")))?;
                    last = last.max(block);
                    if block > seen {
                        newer.push(quote_literal(&row[0]));
                    }
                }
                if newer.is_empty() {
                    return Ok((last, None));
                }
                // The part names prune the read to the parts holding new rows.
                let sql = format!(
                    "SELECT toUnixTimestamp64Nano(min(time)), toUnixTimestamp64Nano(max(time)), count() \
                     FROM {table} WHERE _part IN ({}) AND _block_number > {seen} AND _block_number <= {last}",
                    newer.join(", ")
                );
                let rows = query_rows(conn, &sql)?;
                let range = match rows.first() {
                    Some(row) if row[2] != "0" => match (row[0].parse::<i64>(), row[1].parse::<i64>()) {
                        (Ok(first), Ok(last)) => Some((first, last.saturating_add(1))),
                        _ => None,
                    },
                    _ => None,
                };
                Ok((last, range))
            })
            .await
    }

    /// The fact table's progress (its registry made: [`make_tables`](Self::make_tables)).
    async fn state(&self, engine: &Engine, names: &TableNames) -> Result<State> {
        let sql = format!(
            "SELECT seen_block, dirty_from, dirty_to FROM {} FINAL WHERE table = {}",
            state_table(names),
            quote_literal(&names.storage_name)
        );
        engine
            .run(move |conn| {
                let rows = query_rows(conn, &sql)?;
                let Some(row) = rows.first() else {
                    return Ok(State::default());
                };
                let number = |text: &str| -> Result<i64> {
                    text.parse()
                        .map_err(|_| Error::Engine(format!("{STATE_TABLE}: {text:?}")))
                };
                Ok(State {
                    seen_block: number(&row[0])? as u64,
                    dirty_from: number(&row[1])?,
                    dirty_to: number(&row[2])?,
                })
            })
            .await
    }

    /// Records the fact table's progress, durably.
    async fn save(&self, engine: &Engine, names: &TableNames, state: State) -> Result<()> {
        engine
            .execute(format!(
                "INSERT INTO {} VALUES ({}, {}, {}, {}, {})",
                state_table(names),
                quote_literal(&names.storage_name),
                state.seen_block,
                state.dirty_from,
                state.dirty_to,
                now_ns()
            ))
            .await
    }
}

/// The rollups of the fact table `names` with `fields`, one per level.
fn rollups(
    names: &TableNames,
    fields: &[(String, FieldType)],
    policy: &Downsampling,
) -> Vec<Rollup> {
    policy
        .levels()
        .iter()
        .map(|level| Rollup::new(names, fields, level.interval))
        .collect()
}

/// The registry's quoted name in the database of `names`.
fn state_table(names: &TableNames) -> String {
    format!("{}.{}", names.database, quote_ident(STATE_TABLE))
}

fn state_table_sql(names: &TableNames) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {} (table String, seen_block UInt64, dirty_from Int64, \
         dirty_to Int64, version Int64) ENGINE = ReplacingMergeTree(version) ORDER BY table",
        state_table(names)
    )
}

/// Makes a pass every `every` until the engine closes; a failed pass is
/// counted, logged and made again at the next tick.
pub(crate) async fn run(downsampler: Arc<Downsampler>, every: Duration) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(engine) = downsampler.engine.upgrade() else {
            return;
        };
        let stats = Arc::clone(&engine.stats);
        drop(engine);
        match downsampler.pass().await {
            Ok(()) => IngestStats::add(&stats.downsampling_passes, 1),
            Err(err) => {
                IngestStats::add(&stats.downsampling_errors, 1);
                tracing::warn!(%err, "a downsampling pass failed; trying again");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(unsettled: Option<Span>) -> RollupView {
        RollupView {
            levels: vec![(Duration::from_nanos(10), "t".to_owned())],
            fields: Vec::new(),
            unsettled,
        }
    }

    #[test]
    fn a_range_splits_into_whole_buckets_and_the_rest() {
        let step = Duration::from_nanos(10);
        // Cut ends go to the rows.
        let split = view(None).split(step, 5, 47).unwrap();
        assert_eq!(split.rollup, vec![(10, 40)]);
        assert_eq!(split.rows, vec![(5, 10), (40, 47)]);
        // What the rollups may lack too, in whole buckets.
        let split = view(Some((23, 27))).split(step, 0, 50).unwrap();
        assert_eq!(split.rollup, vec![(0, 20), (30, 50)]);
        assert_eq!(split.rows, vec![(20, 30)]);
        // Unsettled past the end, an unbounded start.
        let split = view(Some((45, 90))).split(step, i64::MIN, 50).unwrap();
        assert_eq!(split.rows.last(), Some(&(40, 50)));
        assert_eq!(split.rows[0].0, i64::MIN);
        // No whole bucket: nothing for the rollup.
        assert_eq!(view(None).split(step, 11, 19), None);
        assert_eq!(view(Some((0, 100))).split(step, 0, 50), None);
    }
}
