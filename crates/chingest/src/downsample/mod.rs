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
//!    the same span from the finer level (unless every new row falls in
//!    the newest finest bucket and nothing is marked: that waits for the
//!    bucket to close, so live rows are rolled up once);
//! 3. records, in the database's `_downsampling` table, the last block seen
//!    and no mark, after the rebuilt buckets are durable;
//! 4. removes what is past its age: moves the table's cuts ([`Cuts`], as
//!    far as every level's age and the retention policy allow, durably
//!    first), drops the fact table's parts wholly before its rows' cut and
//!    rolled up, and deletes each level's buckets before its own cut.
//!
//! Where a level's source is gone (before its cut), its buckets are not
//! rebuilt but merged with the new rows ([`Rollup::merge_sql`]), and edits
//! change them directly ([`Downsampler::mark`]).
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
//! row the rollups lack by block number): until then readers read rows,
//! where rows are kept. The cuts are read back when the ingestor opens.
//!
//! In the `clickhouse` storage mode the same passes run on each shard,
//! by one node at a time, and readers learn from the shards what they
//! may read ([`cluster`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use crate::catalog::Catalog;
use crate::config::{Downsampling, DownsamplingConfig, Keeps};
use crate::engine::{query_rows, Engine, StatementKind};
use crate::error::{Error, Result};
use crate::last_value::{now_ns, LastValues};
use crate::layout::names::{quote_ident, quote_literal, TableNames};
use crate::layout::rollup::{
    blocks_after_sql, is_rollup_of, rollup_name, time_in_sql, Aggregate, Resolution, Rollup, Source,
};
use crate::layout::schema::FieldType;
use crate::stats::IngestStats;
use cluster::{Lease, Mark, Store};
use migrate::{plan_migration, Migration};

mod cluster;
mod migrate;

/// How `SET DOWNSAMPLING` sets a database's levels
/// ([`crate::Ingestor::set_downsampling`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DownsamplingSetting {
    /// These levels, whatever the configuration file says.
    Levels(Downsampling),
    /// Not downsampled, whatever the configuration file says.
    Off,
    /// The configuration file's levels, if it names the database.
    Configured,
}

/// The registry of a downsampled database's progress: per fact table, the
/// last block rolled up and the range an edit marked.
pub(crate) const STATE_TABLE: &str = "_downsampling";

/// No mark.
const CLEAN: i64 = i64::MAX;
/// A lease on passes in the cluster mode lasts this many periods.
const LEASE_PERIODS: u32 = 15;
/// The most of the finest level's time one statement rebuilds.
const CHUNK_NS: i64 = 86_400 * 1_000_000_000;

/// Keeps the rollups of the downsampled databases: those the
/// configuration file names, and those `SET DOWNSAMPLING` set.
#[derive(Debug)]
pub(crate) struct Downsampler {
    engine: Weak<Engine>,
    catalog: Weak<Catalog>,
    /// Told when an answer about settled times changes here: where rows
    /// are gone, by a merge or by moved cuts.
    last_values: Weak<LastValues>,
    /// The configuration file's levels, by database.
    configured: BTreeMap<String, Downsampling>,
    /// The file's levels of single measurements (`None`: kept whole), by
    /// database and measurement: they override their database's.
    measurements: BTreeMap<String, BTreeMap<String, Option<Downsampling>>>,
    /// The levels statements set (recorded in each database's registry,
    /// they outlive the file's); `None`: not downsampled.
    set: RwLock<BTreeMap<String, Option<Downsampling>>>,
    /// Held by a pass over a table and by an edit of a downsampled database.
    passes: tokio::sync::Mutex<()>,
    /// The fields each fact table's rollups and registry were made for in
    /// this process (by storage table): tables are made again only for a
    /// table new here or grown a field (schemas only grow), not every pass.
    made: Mutex<HashMap<String, Vec<(String, FieldType)>>>,
    /// Tables (by storage table) whose rollups are made again at their
    /// next pass (one failed).
    stale: Mutex<std::collections::HashSet<String>>,
    /// What each table's rollups may lack.
    unsettled: Mutex<Unsettled>,
    /// Each fact table's levels and cuts (by storage table), once a pass
    /// or the registry told them.
    kept: Mutex<HashMap<String, Kept>>,
    /// Fact tables (by storage table) whose next pass drops the rollups
    /// of levels they no longer have.
    retiring: Mutex<std::collections::HashSet<String>>,
    /// The cuts before which each fact table's rows and buckets were
    /// removed by this process, by [`Store::key`].
    removed: Mutex<HashMap<String, Cuts>>,
    /// In the `clickhouse` storage mode: the lease on passes, and what
    /// readers take from each table's rollups, learnt from every shard
    /// ([`learn`](Self::learn)), by storage table.
    cluster: Option<ClusterDownsampling>,
}

/// What the downsampler keeps in the `clickhouse` storage mode.
#[derive(Debug)]
struct ClusterDownsampling {
    lease: Lease,
    /// How long after a cut is recorded the rows and buckets before it
    /// are removed: every node learns it meanwhile.
    removal_delay: Duration,
    /// What readers take from the rollups, one lock for both halves.
    known: Mutex<Known>,
}

/// What a node knows of the rollups in the cluster mode.
#[derive(Debug, Default)]
struct Known {
    /// Each table's, by storage table, as last learnt.
    learnt: HashMap<String, cluster::Learnt>,
    /// The spans of this node's inserts and edits (by storage table),
    /// each with the number of its last report: read from the rows until
    /// a learning begun after that report is done.
    pending: HashMap<String, (Span, u64)>,
    /// The number of the last report.
    reports: u64,
}

/// The resolutions a fact table's data is kept at: its levels (finest
/// first; which may still be a database's earlier levels, until a pass
/// moves the table to its new ones) and where each begins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Kept {
    levels: Vec<Resolution>,
    cuts: Cuts,
}

/// Where each resolution of a fact table begins (ns, `None`: nothing
/// removed): a multiple of a day and of every level's width.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Cuts {
    /// Before it the rows are removed (or being removed).
    rows_from: Option<i64>,
    /// Per level: before it its buckets are removed.
    kept_from: Vec<Option<i64>>,
}

impl Cuts {
    fn rows_from(&self) -> i64 {
        self.rows_from.unwrap_or(i64::MIN)
    }

    fn kept_from(&self, level: usize) -> i64 {
        self.kept_from
            .get(level)
            .copied()
            .flatten()
            .unwrap_or(i64::MIN)
    }

    /// Where level `level`'s source (the rows, or the level finer) begins.
    fn source_from(&self, level: usize) -> i64 {
        match level {
            0 => self.rows_from(),
            _ => self.kept_from(level - 1),
        }
    }

    /// The cuts `policy` and a retention of `retention_s` (0: forever) ask
    /// for at `now`, never moved back.
    fn at(&self, policy: &Downsampling, retention_s: u64, now: i64) -> Cuts {
        let levels = policy.levels();
        let day = Duration::from_secs(86_400);
        let coarsest = levels.last().map_or(day, |level| level.interval);
        let align = Duration::from_secs(lcm(day.as_secs(), coarsest.as_secs()));
        let cut = |age: Duration| floor_to(now.saturating_sub(age.as_nanos() as i64), align);
        let retained = (retention_s > 0).then(|| cut(Duration::from_secs(retention_s)));
        // `None` (nothing removed) is less than any cut.
        Cuts {
            rows_from: self.rows_from.max(levels.first().map(|l| cut(l.after))),
            kept_from: (0..levels.len())
                .map(|i| {
                    let aged = levels.get(i + 1).map(|next| cut(next.after));
                    self.kept_from
                        .get(i)
                        .copied()
                        .flatten()
                        .max(aged)
                        .max(retained)
                })
                .collect(),
        }
    }
}

fn lcm(a: u64, b: u64) -> u64 {
    let gcd = |mut a: u64, mut b: u64| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    a / gcd(a, b) * b
}

/// A time span, `[from, to)` in ns.
type Span = (i64, i64);

impl RollupView {
    /// The coarsest level whose bucket width `fits` and that keeps what a
    /// reader `reads` (an index into [`levels`](Self::levels)).
    pub fn level(&self, reads: Keeps, fits: impl Fn(Duration) -> bool) -> Option<usize> {
        self.levels
            .iter()
            .rposition(|(level, _)| level.keeps.provides(reads) && fits(level.interval))
    }

    /// Splits `[start, end)` (ns) for a read at the buckets of `level`:
    /// where the rows are kept, the spans whose buckets the level holds
    /// whole (inside the range, outside what it may lack), and the rest,
    /// to be read from the rows; where the rows are gone, the buckets
    /// whose start is in the range, from `level` or, where its buckets are
    /// gone too, the coarser levels. `None` when no bucket is left to a
    /// rollup, or when a coarser level it needs does not keep what the
    /// reader `reads` (read the rows, [`rows_sql`](Self::rows_sql), instead).
    pub fn split(&self, level: usize, start: i64, end: i64, reads: Keeps) -> Option<RollupSplit> {
        let keep = |spans: &[Span]| -> Vec<Span> {
            spans.iter().copied().filter(|(a, b)| a < b).collect()
        };
        let interval = self.levels[level].0.interval;
        let mut rollups: Vec<(usize, Vec<Span>)> = Vec::new();
        let mut rows = Vec::new();
        // Where the rows are kept: whole buckets, but where unsettled.
        let (first, last) = (
            ceil_to(start.max(self.rows_from), interval),
            floor_to(end, interval),
        );
        if first < last {
            let (skip_from, skip_to) = self.unsettled.map_or((last, last), |(from, to)| {
                (
                    floor_to(from, interval).clamp(first, last),
                    ceil_to(to, interval).clamp(first, last),
                )
            });
            rollups.push((level, keep(&[(first, skip_from), (skip_to, last)])));
            rows = keep(&[
                (start.max(self.rows_from), first),
                (skip_from, skip_to),
                (last, end),
            ]);
        } else if end > self.rows_from {
            rows.push((start.max(self.rows_from), end));
        }
        // Where the rows are gone: each level from its cut, finest first.
        let mut upto = end.min(self.rows_from);
        for coarser in level..self.levels.len() {
            let from = start.max(self.kept_from[coarser]);
            if from < upto {
                if !self.levels[coarser].0.keeps.provides(reads) {
                    return None;
                }
                match rollups.iter_mut().find(|(l, _)| *l == coarser) {
                    Some((_, spans)) => spans.insert(0, (from, upto)),
                    None => rollups.push((coarser, vec![(from, upto)])),
                }
            }
            upto = upto.min(self.kept_from[coarser]);
        }
        let rollups: Vec<(String, Vec<Span>)> = rollups
            .into_iter()
            .filter(|(_, spans)| !spans.is_empty())
            .map(|(level, spans)| (self.levels[level].1.clone(), merge_adjacent(spans)))
            .collect();
        let rows = merge_adjacent(rows);
        (!rollups.is_empty()).then_some(RollupSplit { rollups, rows })
    }

    /// The rows of `facts` (a fact table's quoted name, whose fields are
    /// `fields`) a read of `[start, end)` (ns) needs, as a statement with
    /// their columns, where some of them are gone: the rows kept, and
    /// before them each bucket of the finest level left as a row
    /// ([`Rollup::as_rows_sql`]). `None` when the rows cover the range:
    /// read the table.
    pub fn rows_sql(
        &self,
        facts: &str,
        fields: &[(String, FieldType)],
        start: i64,
        end: i64,
    ) -> Option<String> {
        if start >= self.rows_from {
            return None;
        }
        let columns: String = fields
            .iter()
            .map(|(f, _)| format!(", {}", quote_ident(f)))
            .collect();
        let mut sides = vec![format!(
            "SELECT time, series_id{columns} FROM {facts} WHERE {}",
            time_in_sql("time", &[(self.rows_from, end)]),
        )];
        sides.extend(self.gone_rows_sql(fields, start, end, Aggregate::Last));
        Some(format!("({})", sides.join(" UNION ALL ")))
    }

    /// Where the rows of `[start, end)` (ns) are gone, statements giving
    /// each bucket of the finest level left as a row of the fact table
    /// with `fields`, at its `at` sample (`Last` or `First`):
    /// [`Rollup::as_rows_sql`].
    pub fn gone_rows_sql(
        &self,
        fields: &[(String, FieldType)],
        start: i64,
        end: i64,
        at: Aggregate,
    ) -> Vec<String> {
        let mut sides = Vec::new();
        let mut upto = end.min(self.rows_from);
        for (level, (resolution, table)) in self.levels.iter().enumerate() {
            // The bucket holding `start` may have its sample in range.
            let from = floor_to(start, resolution.interval).max(self.kept_from[level]);
            if from < upto {
                let rollup = Rollup::named(table, *resolution, &self.fields);
                sides.push(rollup.as_rows_sql(fields, from, upto, at));
            }
            upto = upto.min(self.kept_from[level]);
        }
        sides
    }
}

/// What a reader may take from the rollups of the fact table `names`,
/// kept at `levels` from `cuts`, with columns for `fields`.
fn view_of(
    names: &TableNames,
    Kept { levels, cuts }: Kept,
    fields: Vec<(String, FieldType)>,
    unsettled: Option<Span>,
) -> RollupView {
    RollupView {
        rows_from: cuts.rows_from(),
        kept_from: (0..levels.len()).map(|i| cuts.kept_from(i)).collect(),
        // Their names only: no field's columns are needed here.
        levels: rollups(names, &[], &levels)
            .into_iter()
            .map(|rollup| (rollup.resolution(), rollup.table))
            .collect(),
        fields: fields
            .into_iter()
            .filter(|(_, ty)| Aggregate::Count.applies_to(*ty))
            .collect(),
        unsettled,
    }
}

/// `spans` (sorted) with touching ones joined.
fn merge_adjacent(spans: Vec<Span>) -> Vec<Span> {
    let mut out: Vec<Span> = Vec::new();
    for (from, to) in spans {
        match out.last_mut() {
            Some(last) if last.1 == from => last.1 = to,
            _ => out.push((from, to)),
        }
    }
    out
}

/// A range split between rollups and the rows ([`RollupView::split`]):
/// `[from, to)` spans in ns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollupSplit {
    /// Per level's table (quoted), finest first, the spans of bucket
    /// starts to read from it.
    pub rollups: Vec<(String, Vec<(i64, i64)>)>,
    /// The rest of the range, from the rows.
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
    /// The levels, finest first, and their tables' quoted names.
    pub levels: Vec<(Resolution, String)>,
    /// The fields whose columns (`Rollup::column`) every level has.
    pub fields: Vec<(String, FieldType)>,
    /// The span `[from, to)` (ns) where the rollups may lack rows or keep
    /// some an edit removed: read the rows there, in whole buckets.
    pub unsettled: Option<(i64, i64)>,
    /// Before it (ns) the rows are gone; `i64::MIN` when all are kept.
    pub rows_from: i64,
    /// Per level: before it (ns) its buckets are gone.
    pub kept_from: Vec<i64>,
}

/// A fact table's progress: the last block rolled up, the range an
/// edit marked and no pass rebuilt yet, its levels and its cuts.
#[derive(Debug, Clone, PartialEq, Eq)]
struct State {
    /// The last block number of the fact table rolled up.
    seen_block: u64,
    /// The start of the marked range (ns), or [`CLEAN`].
    dirty_from: i64,
    /// Its end (ns, excluded).
    dirty_to: i64,
    /// The levels its rollups hold; empty before a first pass (and in
    /// registries of earlier versions, whose levels never changed: the
    /// database's).
    levels: Vec<Resolution>,
    cuts: Cuts,
    /// When the cuts were last moved (ns; 0: never).
    cuts_at: i64,
}

impl State {
    /// Its levels, or `policy`'s when it records none.
    fn levels_or(&self, policy: &Downsampling) -> Vec<Resolution> {
        match self.levels.is_empty() {
            true => resolutions(policy),
            false => self.levels.clone(),
        }
    }
}

impl Default for State {
    fn default() -> Self {
        State {
            seen_block: 0,
            dirty_from: CLEAN,
            dirty_to: i64::MIN,
            levels: Vec::new(),
            cuts: Cuts::default(),
            cuts_at: 0,
        }
    }
}

/// `policy`'s levels, finest first.
fn resolutions(policy: &Downsampling) -> Vec<Resolution> {
    policy.levels().iter().map(Resolution::of).collect()
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
        last_values: &Arc<LastValues>,
        config: &DownsamplingConfig,
    ) -> Downsampler {
        let cluster = engine.cluster.as_ref().map(|_| ClusterDownsampling {
            lease: Lease::new(config.period.saturating_mul(LEASE_PERIODS)),
            removal_delay: config.removal_delay,
            known: Mutex::default(),
        });
        Downsampler {
            engine: Arc::downgrade(engine),
            catalog: Arc::downgrade(catalog),
            last_values: Arc::downgrade(last_values),
            configured: config.databases.clone(),
            measurements: config.measurements.clone(),
            set: RwLock::default(),
            passes: tokio::sync::Mutex::new(()),
            made: Mutex::default(),
            stale: Mutex::default(),
            unsettled: Mutex::default(),
            kept: Mutex::default(),
            retiring: Mutex::default(),
            removed: Mutex::default(),
            cluster,
        }
    }

    /// The levels of `database`, if it is downsampled: a statement's, else
    /// the configuration file's.
    pub(crate) fn policy(&self, database: &str) -> Option<Downsampling> {
        match self.set.read().unwrap().get(database) {
            Some(set) => set.clone(),
            None => self.configured.get(database).cloned(),
        }
    }

    /// The levels of `measurement`'s tables in `database`, if they are
    /// downsampled: the file's for the measurement, else the database's.
    fn table_policy(&self, database: &str, measurement: &str) -> Option<Downsampling> {
        match self
            .measurements
            .get(database)
            .and_then(|m| m.get(measurement))
        {
            Some(own) => own.clone(),
            None => self.policy(database),
        }
    }

    /// [`table_policy`](Self::table_policy) of the fact table `names`.
    fn policy_of(&self, names: &TableNames) -> Option<Downsampling> {
        let (measurement, _) = names.storage_name.split_once('.')?;
        self.table_policy(
            &names.database_name,
            &crate::layout::names::decode(measurement)?,
        )
    }

    /// Whether any table of `database` is downsampled (asked on every
    /// insert and read).
    pub(crate) fn is_downsampled(&self, database: &str) -> bool {
        let own = match self.set.read().unwrap().get(database) {
            Some(set) => set.is_some(),
            None => self.configured.contains_key(database),
        };
        own || self
            .measurements
            .get(database)
            .is_some_and(|m| m.values().any(Option::is_some))
    }

    /// Whether this node downsamples `database`, or, in the cluster mode,
    /// another node did (its rollups were learnt); in the embedded mode,
    /// [`is_downsampled`](Self::is_downsampled).
    pub(crate) fn is_downsampled_anywhere(&self, database: &str) -> bool {
        let prefix = format!("{}.", TableNames::new(database, "", "").database);
        self.is_downsampled(database)
            || self.cluster.as_ref().is_some_and(|cluster| {
                let known = cluster.known.lock().unwrap();
                known.learnt.keys().any(|table| table.starts_with(&prefix))
            })
    }

    /// Whether a statement set the levels of `database`.
    pub(crate) fn is_set(&self, database: &str) -> bool {
        self.set.read().unwrap().contains_key(database)
    }

    /// Every database with a downsampled table.
    fn downsampled(&self) -> Vec<String> {
        let set = self.set.read().unwrap();
        let mut all: Vec<String> = self
            .configured
            .keys()
            .chain(set.keys())
            .chain(self.measurements.keys())
            .cloned()
            .collect();
        drop(set);
        all.sort();
        all.dedup();
        all.retain(|name| self.is_downsampled(name));
        all
    }

    /// Notes rows of `table` (a storage table of `database`) over `span`
    /// being inserted: readers read them from the rows until a pass has
    /// rolled them up. Tables of other databases are not kept.
    pub(crate) fn inserting(&self, database: &str, table: &str, span: Span) {
        if let Some(cluster) = &self.cluster {
            // Any database: another node may downsample it.
            let mut known = cluster.known.lock().unwrap();
            known.reports += 1;
            let widened = union(known.pending.get(table).map(|p| p.0), span);
            let report = known.reports;
            known.pending.insert(table.to_owned(), (widened, report));
        } else if self.is_downsampled(database) {
            widen(&mut self.unsettled.lock().unwrap().pending, table, span);
        }
    }

    /// What a reader may take from the rollups of the fact table `names`;
    /// `None` when its database is not downsampled or its rollups were
    /// not made (or found) since the process started.
    pub(crate) fn view(&self, names: &TableNames) -> Option<RollupView> {
        if let Some(cluster) = &self.cluster {
            let table = &names.storage_table;
            let (learnt, pending) = {
                let known = cluster.known.lock().unwrap();
                let pending = known.pending.get(table).map(|p| p.0);
                (known.learnt.get(table)?.clone(), pending)
            };
            let unsettled = match (learnt.unsettled, pending) {
                (None, None) => None,
                (a, Some(b)) | (Some(b), a) => Some(union(a, b)),
            };
            return Some(view_of(names, learnt.kept, learnt.fields, unsettled));
        }
        if !self.is_downsampled(&names.database_name) {
            return None;
        }
        let table = &names.storage_table;
        let unsettled = {
            let unsettled = self.unsettled.lock().unwrap();
            if !unsettled.known.contains(table) {
                // No pass yet: they may lack anything.
                Some((i64::MIN, i64::MAX))
            } else {
                let pending = unsettled.pending.get(table).copied();
                let passing = unsettled.passing.get(table).copied();
                match (pending, passing) {
                    (None, None) => None,
                    (a, Some(b)) | (Some(b), a) => Some(union(a, b)),
                }
            }
        };
        let kept = self.kept.lock().unwrap().get(table).cloned();
        let kept = match kept {
            Some(kept) => kept,
            None => Kept {
                levels: resolutions(&self.policy_of(names)?),
                cuts: Cuts::default(),
            },
        };
        let fields = self.made.lock().unwrap().get(table)?.clone();
        Some(view_of(names, kept, fields, unsettled))
    }

    /// The levels the rollups of the fact table `names` hold, as far as
    /// this process knows: `policy`'s until a pass or the registry said.
    fn levels_of(&self, names: &TableNames, policy: &Downsampling) -> Vec<Resolution> {
        match self.kept.lock().unwrap().get(&names.storage_table) {
            Some(kept) => kept.levels.clone(),
            None => resolutions(policy),
        }
    }

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
            let Some(policy) = self.table_policy(database, &measurement) else {
                continue;
            };
            let names = TableNames::new(database, &rp, &measurement);
            let fields = &table.schema().fields;
            let levels = self.levels_of(&names, &policy);
            self.make_tables(&engine, &names, &rollups(&names, fields, &levels), fields)
                .await?;
            let (mut state, _) = self.state(Store::Here(&engine), &names).await?;
            state.dirty_from = state.dirty_from.min(from_ns);
            state.dirty_to = state.dirty_to.max(to_ns);
            // Readers read rows over the span before the edit changes them.
            self.inserting(database, &names.storage_table, (from_ns, to_ns));
            self.save(Store::Here(&engine), &names, &state).await?;
            let kept = self.made.lock().unwrap().get(&names.storage_table).cloned();
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
    async fn edit_on_shards(
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
            let columns = cluster::rollup_columns(store, &registry_names).await?;
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

    /// Tells readers' caches that an answer about `database`'s settled
    /// times may have changed.
    fn unsettle(&self, database: &str) {
        if let Some(last_values) = self.last_values.upgrade() {
            last_values.unsettle(database);
        }
    }

    /// One pass over every downsampled database; in the `clickhouse`
    /// storage mode over each shard, and only over the databases whose
    /// [`Lease`] this node holds. Whether it passed over any table.
    pub(crate) async fn pass(&self) -> Result<bool> {
        let (Some(engine), Some(catalog)) = (self.engine.upgrade(), self.catalog.upgrade()) else {
            return Ok(false);
        };
        // (In the embedded mode a pass is made even with no table.)
        let mut passed_any = engine.cluster.is_none();
        for name in self.downsampled() {
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
                let Some(policy) = self.table_policy(&name, &measurement) else {
                    continue;
                };
                // Asked before each table: a pass that outlives its term
                // stops at the next table.
                if let (Some(cluster), Some(shards)) = (&self.cluster, &engine.cluster) {
                    if !cluster.lease.holds(shards, &names).await? {
                        break;
                    }
                }
                passed_any = true;
                // Taken before the pass looks for new rows: an insert it
                // does not find reports again, after, into `pending`.
                // (Under the pass lock, no other pass holds this table's.)
                let (reported, known) = {
                    let mut unsettled = self.unsettled.lock().unwrap();
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
                    && !self.stale.lock().unwrap().contains(storage)
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
                let mut unsettled = self.unsettled.lock().unwrap();
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
                        self.stale.lock().unwrap().insert(storage.clone());
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

    /// In the `clickhouse` storage mode: learns what readers may take
    /// from the rollups of every database with a registry here, from the
    /// registries of all shards ([`cluster::learnt_tables`]).
    pub(crate) async fn learn(&self) -> Result<()> {
        let (Some(cluster), Some(engine), Some(catalog)) =
            (&self.cluster, self.engine.upgrade(), self.catalog.upgrade())
        else {
            return Ok(());
        };
        let Some(shards) = &engine.cluster else {
            return Ok(());
        };
        // What this node reported before now, this learning reads where
        // it is; what it reports later stays pending.
        let begun = cluster.known.lock().unwrap().reports;
        let learnt = self.learn_from(&engine, shards, &catalog).await?;
        let changed = {
            let mut known = cluster.known.lock().unwrap();
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
    async fn learn_from(
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

    /// What a pass reads at once of the tables of `database` in each
    /// store ([`Glance`]); none where that fails (each table is then
    /// passed over, which reports what failed).
    async fn glance(&self, engine: &Engine, database: &str) -> Vec<Glance> {
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
    fn idle(
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
        let removal_due = self.removed.lock().unwrap().get(key) != Some(&state.cuts)
            && self.learnt_by_all(state.cuts_at, now);
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
    async fn pass_everywhere(
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
            .unsettled
            .lock()
            .unwrap()
            .known
            .contains(&names.storage_table)
        {
            let mut retiring = self.retiring.lock().unwrap();
            retiring.extend(stores.iter().map(|store| store.key(&names.storage_table)));
        }
        let mut states = Vec::new();
        for store in &stores {
            states.push(self.state(*store, names).await?);
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
    async fn pass_table(
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
            self.retiring.lock().unwrap().remove(&retiring);
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
            .unsettled
            .lock()
            .unwrap()
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
            self.save(store, names, &done).await?;
        }
        cluster::clear_marks(store, names, &marks).await?;
        self.remove_aged(store, names, rollups, &mut done, policy, retention_s)
            .await?;
        // (In the cluster mode readers learn them from every shard.)
        if store.is_here() {
            let kept = Kept {
                levels: done.levels,
                cuts: done.cuts,
            };
            self.kept
                .lock()
                .unwrap()
                .insert(names.storage_table.clone(), kept);
        }
        Ok(Passed::Done)
    }

    /// Moves the rollups of the fact table `names` from the levels its
    /// `state` records to `levels` ([`build_levels`](Self::build_levels)),
    /// records the new levels and cuts, and readers read them from then on.
    /// The tables of the levels left go at the table's next pass (a read
    /// may have just begun).
    async fn migrate(
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
        let kept = Kept {
            levels: state.levels.clone(),
            cuts: state.cuts.clone(),
        };
        self.kept
            .lock()
            .unwrap()
            .insert(names.storage_table.clone(), kept);
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
    async fn move_shards(
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
    async fn build_levels(
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
    async fn record_move(
        &self,
        store: Store<'_>,
        names: &TableNames,
        state: &mut State,
    ) -> Result<()> {
        state.cuts_at = now_ns();
        self.save(store, names, state).await?;
        let key = store.key(&names.storage_table);
        // The removed cuts of the levels left mean nothing to the new.
        self.removed
            .lock()
            .unwrap()
            .insert(key.clone(), state.cuts.clone());
        self.retiring.lock().unwrap().insert(key);
        Ok(())
    }

    /// Whether the pass over the table whose key in `store` is `key`, with
    /// `state`, drops the rollups of levels it left: once it is
    /// [`retiring`](Self::retiring); in the cluster mode only once the
    /// nodes, which read the old levels until they learn the new, had
    /// [`removal_delay`](ClusterDownsampling::removal_delay) to learn them.
    fn retires(&self, key: &str, state: &State) -> bool {
        if !self.retiring.lock().unwrap().contains(key) {
            return false;
        }
        self.learnt_by_all(state.cuts_at, now_ns())
    }

    /// Whether every node has learnt, by `now`, cuts or levels recorded at
    /// `recorded` (ns): at once in the embedded mode; in the cluster mode
    /// once [`removal_delay`](ClusterDownsampling::removal_delay) passed.
    fn learnt_by_all(&self, recorded: i64, now: i64) -> bool {
        let delay = self
            .cluster
            .as_ref()
            .map_or(0, |cluster| cluster.removal_delay.as_nanos() as i64);
        now.saturating_sub(recorded) >= delay
    }

    /// Drops the rollups of the fact table `names` not among `levels`:
    /// the levels a migration (or a crash after one) left.
    async fn drop_retired(
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
        store.execute_all(drops.clone()).await?;
        if let Store::Shard(engine, _, _) = store {
            // The `Distributed` table that read it here (other nodes drop
            // theirs when they learn, `learn_from`).
            engine.execute_all(drops).await?;
        }
        Ok(())
    }

    /// Moves the cuts of the table `names` as far as its ages allow (saved
    /// before anything is removed, so readers and passes never rely on what
    /// is gone), deletes each level's buckets before its moved cut, and
    /// drops the fact table's parts rolled up (`done.seen_block`) and
    /// wholly before the rows' cut. A part merged away meanwhile is
    /// dropped by a later pass.
    async fn remove_aged(
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
        if !self.removed.lock().unwrap().contains_key(&key) && store.is_here() {
            // Removed up to the cuts recorded, but for a crash in between
            // (its buckets are never read).
            self.removed
                .lock()
                .unwrap()
                .insert(key.clone(), done.cuts.clone());
        }
        if cuts != done.cuts {
            done.cuts = cuts.clone();
            done.cuts_at = now;
            self.save(store, names, done).await?;
            if store.is_here() {
                let kept = Kept {
                    levels: done.levels.clone(),
                    cuts: cuts.clone(),
                };
                self.kept
                    .lock()
                    .unwrap()
                    .insert(names.storage_table.clone(), kept);
            }
            // Readers read buckets where they read rows.
            self.unsettle(&names.database_name);
        }
        // In the cluster mode other nodes learn the cuts first.
        if !self.learnt_by_all(done.cuts_at, now) {
            return Ok(());
        }
        let removed = self
            .removed
            .lock()
            .unwrap()
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
        self.removed.lock().unwrap().insert(key, cuts.clone());
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

    /// Makes the registry and `rollups` (with a column for every one of
    /// `fields`) unless this process made them for as many fields already
    /// and no pass over the table failed since ([`stale`](Self::stale)).
    /// Until they are made, readers keep the fields made before.
    async fn make_tables(
        &self,
        engine: &Engine,
        names: &TableNames,
        rollups: &[Rollup],
        fields: &[(String, FieldType)],
    ) -> Result<()> {
        let table = &names.storage_table;
        let stale = self.stale.lock().unwrap().contains(table);
        if !stale && self.made.lock().unwrap().get(table).map(Vec::len) == Some(fields.len()) {
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
        self.made
            .lock()
            .unwrap()
            .insert(table.clone(), fields.to_vec());
        self.stale.lock().unwrap().remove(table);
        Ok(())
    }

    /// The marked range of `state`, its open ends bounded by the rows of
    /// the fact table and of its finest rollup (which an edit may have
    /// left with buckets whose rows are gone). An empty table bounds
    /// nothing (`min` of no rows would be 1970, `minOrNull` is none).
    async fn bounded(
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
    async fn changes(
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

    /// The fact table's progress (its registry made: [`make_tables`](Self::make_tables)).
    async fn state(&self, store: Store<'_>, names: &TableNames) -> Result<(State, Vec<Mark>)> {
        let mut registry = read_registry(store, names, Some(&names.storage_name)).await?;
        let state = registry
            .tables
            .remove(&names.storage_name)
            .unwrap_or_default();
        Ok((state, registry.marks))
    }

    /// Records the fact table's progress, durably.
    async fn save(&self, store: Store<'_>, names: &TableNames, state: &State) -> Result<()> {
        let cut = |cut: Option<i64>| cut.unwrap_or(i64::MIN).to_string();
        let kept: Vec<String> = state.cuts.kept_from.iter().map(|c| cut(*c)).collect();
        let levels: Vec<String> = state
            .levels
            .iter()
            .map(|l| l.interval.as_secs().to_string())
            .collect();
        let keeps: Vec<String> = state
            .levels
            .iter()
            .map(|l| quote_literal(l.keeps.name()))
            .collect();
        store
            .execute(format!(
                "INSERT INTO {} (table, seen_block, dirty_from, dirty_to, version, rows_from, \
                 kept_from, levels, keeps, cuts_at) VALUES ({}, {}, {}, {}, {}, {}, [{}], [{}], [{}], {})",
                state_table(names),
                quote_literal(&names.storage_name),
                state.seen_block,
                state.dirty_from,
                state.dirty_to,
                now_ns(),
                cut(state.cuts.rows_from),
                kept.join(", "),
                levels.join(", "),
                keeps.join(", "),
                state.cuts_at
            ))
            .await
    }

    /// Reads back, on open, the levels statements set and each table's
    /// levels and cuts (readers must not read rows before them), makes
    /// the rollups of tables with cuts (readers need their fields before a
    /// pass), and has each table's first pass drop the rollups of levels
    /// it left. Fails where the levels asked for cannot take over a
    /// table's data ([`plan_migration`]), or a database whose rows went
    /// is no longer downsampled.
    pub(crate) async fn load(&self) -> Result<()> {
        let (Some(engine), Some(catalog)) = (self.engine.upgrade(), self.catalog.upgrade()) else {
            return Ok(());
        };
        let sql = format!(
            "SELECT database FROM system.tables WHERE name = {}",
            quote_literal(STATE_TABLE)
        );
        let registered = engine.run(move |conn| query_rows(conn, &sql)).await?;
        for row in registered {
            let Some(database) = catalog.database(&row[0]) else {
                continue;
            };
            let name = &row[0];
            let names = TableNames::new(name, "", "");
            // Registries of earlier versions lack the later columns.
            engine.execute_all(state_table_sql(&names)).await?;
            let mut registry = read_registry(Store::Here(&engine), &names, None).await?;
            if let Some(set) = registry.set {
                self.set.write().unwrap().insert(name.clone(), set);
            }
            for ((rp, measurement), table) in database.tables() {
                let names = TableNames::new(name, &rp, &measurement);
                let Some(state) = registry.tables.remove(&names.storage_name) else {
                    continue;
                };
                let policy = self.table_policy(name, &measurement);
                let refused = |why: String| {
                    Error::Config(format!(
                        "downsampling of database {name:?}, measurement {measurement:?} in {rp:?}: {why}"
                    ))
                };
                let Some(policy) = &policy else {
                    if rows_went(Store::Here(&engine), &names, &state).await? {
                        return Err(refused(no_longer_downsampled(&state.cuts)));
                    }
                    continue;
                };
                check_move(&engine, &names, &state, (policy, policy), refused).await?;
                let levels = state.levels_or(policy);
                if state.cuts != Cuts::default() {
                    let fields = table.schema().fields.clone();
                    self.make_tables(&engine, &names, &rollups(&names, &fields, &levels), &fields)
                        .await?;
                }
                let kept = Kept {
                    levels,
                    cuts: state.cuts,
                };
                self.kept
                    .lock()
                    .unwrap()
                    .insert(names.storage_table.clone(), kept);
            }
        }
        Ok(())
    }

    /// Sets the levels of `database` ([`DownsamplingSetting`]), durably:
    /// passes move its tables to them. Refused ([`Error::Conflict`]) where
    /// they cannot take over a table's data ([`plan_migration`]), and off
    /// where rows went (they are kept only in the rollups). Off, its
    /// rollups are dropped.
    pub(crate) async fn set(&self, database: &str, setting: DownsamplingSetting) -> Result<()> {
        let (Some(engine), Some(catalog)) = (self.engine.upgrade(), self.catalog.upgrade()) else {
            return Err(Error::Closed);
        };
        let db = catalog
            .database(database)
            .ok_or_else(|| Error::DatabaseNotFound(database.to_owned()))?;
        let _pass = self.passes.lock().await;
        let wanted = match &setting {
            DownsamplingSetting::Levels(levels) => Some(levels.clone()),
            DownsamplingSetting::Off => None,
            DownsamplingSetting::Configured => self.configured.get(database).cloned(),
        };
        let names = TableNames::new(database, "", "");
        engine.execute_all(state_table_sql(&names)).await?;
        let mut registry = read_registry(Store::Here(&engine), &names, None).await?;
        let current = self.policy(database);
        let mut tables = Vec::new();
        for ((rp, measurement), _) in db.tables() {
            // Its levels are its own, not the database's.
            if self
                .measurements
                .get(database)
                .is_some_and(|m| m.contains_key(&measurement))
            {
                continue;
            }
            let names = TableNames::new(database, &rp, &measurement);
            let state = registry.tables.remove(&names.storage_name);
            tables.push(names.clone());
            let Some(state) = state else {
                continue;
            };
            let refused = |why: String| {
                Error::Conflict(format!("measurement {measurement:?} in {rp:?}: {why}"))
            };
            match (&wanted, &current) {
                (None, _) if rows_went(Store::Here(&engine), &names, &state).await? => {
                    return Err(refused(no_longer_downsampled(&state.cuts)));
                }
                (Some(wanted), Some(current)) => {
                    check_move(&engine, &names, &state, (current, wanted), refused).await?;
                }
                _ => {}
            }
        }
        let stored: Vec<String> = match &setting {
            DownsamplingSetting::Levels(levels) => {
                levels.levels().iter().map(|l| l.to_seconds()).collect()
            }
            DownsamplingSetting::Off => vec![OFF.to_owned()],
            DownsamplingSetting::Configured => Vec::new(),
        };
        let stored: Vec<String> = stored.iter().map(|s| quote_literal(s)).collect();
        engine
            .execute(format!(
                "INSERT INTO {} (table, seen_block, dirty_from, dirty_to, version, policy) \
                 VALUES ('', 0, {CLEAN}, {}, {}, [{}])",
                state_table(&names),
                i64::MIN,
                now_ns(),
                stored.join(", ")
            ))
            .await?;
        {
            let mut set = self.set.write().unwrap();
            match setting {
                DownsamplingSetting::Configured => set.remove(database),
                _ => set.insert(database.to_owned(), wanted.clone()),
            };
        }
        if wanted.is_none() {
            // Its rollups go; set again, they are built anew.
            for names in tables {
                self.drop_retired(Store::Here(&engine), &names, &[]).await?;
                self.save(Store::Here(&engine), &names, &State::default())
                    .await?;
                let table = &names.storage_table;
                self.made.lock().unwrap().remove(table);
                self.kept.lock().unwrap().remove(table);
                self.removed.lock().unwrap().remove(table);
                let mut unsettled = self.unsettled.lock().unwrap();
                unsettled.known.remove(table);
                unsettled.pending.remove(table);
            }
        }
        self.unsettle(database);
        Ok(())
    }
}

/// Gives the statement applying an edit to the buckets of one level
/// ([`Downsampler::mark`]): `(rollup, names, measurement, before, kept)`,
/// the level's table, its fact table's names and measurement, the time
/// before which it applies, and the fields the level keeps.
pub(crate) type EditStatement<'a> = dyn Fn(&str, &TableNames, &str, i64, &[(String, FieldType)]) -> Result<Option<String>>
    + Send
    + Sync
    + 'a;

/// A fact table an edit may change, in the cluster mode.
struct EditedTable {
    names: TableNames,
    measurement: String,
    fields: Vec<(String, FieldType)>,
}

/// The rollups of the fact table `names` with `fields`, one per level.
fn rollups(
    names: &TableNames,
    fields: &[(String, FieldType)],
    levels: &[Resolution],
) -> Vec<Rollup> {
    levels
        .iter()
        .map(|level| Rollup::new(names, fields, *level))
        .collect()
}

/// The registry's quoted name in the database of `names`.
fn state_table(names: &TableNames) -> String {
    format!("{}.{}", names.database, quote_ident(STATE_TABLE))
}

/// Makes the registry of `names`' database, and gives one of an earlier
/// version the later columns: the cuts, each table's levels (widths in
/// seconds, and what each keeps, [`Keeps::name`]; missing: every
/// aggregate), and in the row of table `''` the levels a statement
/// set (`'<age>s:<interval>s[:last]'`s; [`OFF`]; none: the configuration
/// file's).
fn state_table_sql(names: &TableNames) -> Vec<String> {
    let table = state_table(names);
    vec![
        format!(
            "CREATE TABLE IF NOT EXISTS {table} (table String, seen_block UInt64, dirty_from Int64, \
             dirty_to Int64, version Int64) ENGINE = ReplacingMergeTree(version) ORDER BY table"
        ),
        format!(
            "ALTER TABLE {table} ADD COLUMN IF NOT EXISTS rows_from Int64 DEFAULT {}, \
             ADD COLUMN IF NOT EXISTS kept_from Array(Int64), \
             ADD COLUMN IF NOT EXISTS levels Array(UInt32), \
             ADD COLUMN IF NOT EXISTS policy Array(String), \
             ADD COLUMN IF NOT EXISTS keeps Array(String), \
             ADD COLUMN IF NOT EXISTS cuts_at Int64",
            i64::MIN
        ),
    ]
}

/// What a pass reads at once of a downsampled database's tables in one
/// store, so that it passes over only those something happened to
/// ([`Downsampler::idle`]).
struct Glance {
    registry: Registry,
    /// By storage name: the last block of its active parts and the end of
    /// the part ending first (s).
    parts: HashMap<String, (u64, i64)>,
}

impl Glance {
    /// Two statements: the registry of the database of `names`, and its
    /// tables' parts.
    async fn read(store: Store<'_>, names: &TableNames) -> Result<Glance> {
        let registry = read_registry(store, names, None).await?;
        let parts = parts_by_table(store, names).await?;
        Ok(Glance { registry, parts })
    }
}

/// By table (storage name) of the database of `names` in `store`: the last
/// block of its active parts and the end of the part ending first (s).
async fn parts_by_table(
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

/// Where a pass's statements run: the embedded engine, or each shard.
fn stores(engine: &Engine) -> Vec<Store<'_>> {
    match &engine.cluster {
        None => vec![Store::Here(engine)],
        Some(shards) => (0..shards.shards())
            .map(|shard| Store::Shard(engine, shards, shard))
            .collect(),
    }
}

/// Between a fact table's storage name and a mark's id, the key of an
/// edit's mark in the cluster mode (a storage name holds one `.`).
const MARK: &str = ".mark.";

/// The registry's mark of a database a statement set not downsampled.
const OFF: &str = "off";

/// What a database's registry holds.
#[derive(Debug, Default)]
struct Registry {
    /// The levels a statement set: `Some(None)` off; `None`: none set.
    set: Option<Option<Downsampling>>,
    /// Each fact table's progress, by storage name.
    tables: HashMap<String, State>,
    /// The marks of edits no pass took yet (the cluster mode).
    marks: Vec<Mark>,
}

/// Reads the registry of the database of `names`: every row, or only the
/// fact table `only`'s (a storage name).
async fn read_registry(
    store: Store<'_>,
    names: &TableNames,
    only: Option<&str>,
) -> Result<Registry> {
    let filter = only.map_or(String::new(), |table| {
        format!(
            " WHERE table = {} OR startsWith(table, {})",
            quote_literal(table),
            quote_literal(&format!("{table}{MARK}"))
        )
    });
    let sql = format!(
        "SELECT {REGISTRY_COLUMNS} FROM {} FINAL{filter}",
        state_table(names)
    );
    let rows = store.rows(sql).await?;
    let mut registry = Registry::default();
    for row in rows {
        match parse_registry_row(&row)? {
            Some((key, state)) if key.contains(MARK) => {
                if state.dirty_from != CLEAN {
                    let version = row[10].parse().map_err(|_| bad_registry(&row[10]))?;
                    registry.marks.push(Mark {
                        key,
                        span: (state.dirty_from, state.dirty_to),
                        version,
                    });
                }
            }
            Some((table, state)) => {
                registry.tables.insert(table, state);
            }
            None => {
                let stored = parse_array(&row[7], |text| {
                    Ok(text.trim().trim_matches('\'').to_owned())
                })?;
                registry.set = match stored.as_slice() {
                    [] => None,
                    [off] if off == OFF => Some(None),
                    levels => Some(Some(
                        Downsampling::parse(levels)
                            .map_err(|err| bad_registry(&err.to_string()))?,
                    )),
                };
            }
        }
    }
    Ok(registry)
}

fn bad_registry(text: &str) -> Error {
    Error::Engine(format!("{STATE_TABLE}: {text:?}"))
}

/// The columns of a registry row [`parse_registry_row`] reads.
const REGISTRY_COLUMNS: &str =
    "table, seen_block, dirty_from, dirty_to, rows_from, kept_from, levels, policy, keeps, cuts_at, \
     version";

/// A registry row ([`REGISTRY_COLUMNS`]) as a fact table's storage name
/// and progress; `None` for the row of table `''` (the levels a
/// statement set).
fn parse_registry_row(row: &[String]) -> Result<Option<(String, State)>> {
    if row.len() < 10 {
        return Err(bad_registry(&row.join("\t")));
    }
    if row[0].is_empty() {
        return Ok(None);
    }
    let number = |text: &str| -> Result<i64> { text.parse().map_err(|_| bad_registry(text)) };
    let keeps = parse_array(&row[8], |text| {
        let name = text.trim().trim_matches('\'');
        Keeps::named(name).ok_or_else(|| bad_registry(name))
    })?;
    let widths = parse_array(&row[6], |text| {
        Ok(Duration::from_secs(number(text.trim())? as u64))
    })?;
    let state = State {
        seen_block: number(&row[1])? as u64,
        dirty_from: number(&row[2])?,
        dirty_to: number(&row[3])?,
        levels: widths
            .into_iter()
            .enumerate()
            .map(|(i, interval)| Resolution {
                interval,
                keeps: keeps.get(i).copied().unwrap_or_default(),
            })
            .collect(),
        cuts: parse_cuts(&row[4], &row[5])?,
        cuts_at: number(&row[9])?,
    };
    Ok(Some((row[0].clone(), state)))
}

/// Whether rows of the fact table `names` went (its rollups hold buckets
/// before the rows' cut; its coarsest level holds every bucket there
/// that any level does). A registry of an earlier version, which does not
/// name its levels, went as soon as it has a cut.
async fn rows_went(store: Store<'_>, names: &TableNames, state: &State) -> Result<bool> {
    let (Some(rows_from), Some(coarsest)) = (state.cuts.rows_from, state.levels.last()) else {
        return Ok(state.cuts.rows_from.is_some());
    };
    let rollup = Rollup::new(names, &[], *coarsest);
    holds_buckets(store, &rollup, (i64::MIN, rows_from)).await
}

/// Whether `rollup` holds a bucket in `span`.
async fn holds_buckets(store: Store<'_>, rollup: &Rollup, span: Span) -> Result<bool> {
    let sql = format!(
        "SELECT count() FROM (SELECT 1 FROM {} WHERE {} LIMIT 1)",
        rollup.table,
        time_in_sql("time", &[span])
    );
    let rows = store.rows(sql).await?;
    Ok(rows.first().is_none_or(|row| row[0] != "0"))
}

/// How the rollups of the fact table `names` move from the levels `old`
/// (with their cuts) to `new` ([`plan_migration`]); refused (`refused`,
/// why) where it would lose buckets: the old coarsest level holds every
/// bucket any level does where no new level could be built.
async fn checked_migration(
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
async fn check_move(
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
fn no_longer_downsampled(cuts: &Cuts) -> String {
    format!(
        "its rows before {} went, and are kept only in its rollups: it stays downsampled \
         (give it its levels, or levels with longer ages to keep more rows from now on)",
        date(cuts.rows_from())
    )
}

/// A time (ns) as the UTC date it falls on, `YYYY-MM-DD`.
fn date(ns: i64) -> String {
    chrono::DateTime::from_timestamp_nanos(ns)
        .format("%Y-%m-%d")
        .to_string()
}

/// An array as the engine writes it (`[a,b]`), each item by `item`.
fn parse_array<T>(text: &str, item: impl Fn(&str) -> Result<T>) -> Result<Vec<T>> {
    let inner = text.trim().trim_start_matches('[').trim_end_matches(']');
    match inner.is_empty() {
        true => Ok(Vec::new()),
        false => inner.split(',').map(item).collect(),
    }
}

/// The span `[from, to)` (ns) in whole buckets of `interval`, about a day
/// of them at a time: the spans one statement rebuilds.
fn chunks(interval: Duration, from: i64, to: i64) -> impl Iterator<Item = Span> {
    let step = interval.as_nanos() as i64;
    let chunk = (CHUNK_NS / step).max(1) * step;
    std::iter::successors(Some(from), move |s| Some(s.saturating_add(chunk)))
        .take_while(move |s| *s < to)
        .map(move |s| (s, s.saturating_add(chunk).min(to)))
}

/// The first and last time (ns) of `table`'s rows in `span`, if any.
async fn time_bounds(store: Store<'_>, table: &str, span: Span) -> Result<Option<Span>> {
    let sql = format!(
        "SELECT toUnixTimestamp64Nano(minOrNull(time)), toUnixTimestamp64Nano(maxOrNull(time)) \
         FROM {table} WHERE {}",
        time_in_sql("time", &[span])
    );
    let rows = store.rows(sql).await?;
    let number = |i: usize| rows.first().and_then(|row| row.get(i)?.parse::<i64>().ok());
    Ok(number(0).zip(number(1)))
}

/// Cuts as the registry keeps them (`i64::MIN`: none).
fn parse_cuts(rows_from: &str, kept_from: &str) -> Result<Cuts> {
    let cut = |text: &str| -> Result<Option<i64>> {
        let cut: i64 = text
            .trim()
            .parse()
            .map_err(|_| Error::Engine(format!("{STATE_TABLE}: cut {text:?}")))?;
        Ok((cut != i64::MIN).then_some(cut))
    };
    Ok(Cuts {
        rows_from: cut(rows_from)?,
        kept_from: parse_array(kept_from, cut)?,
    })
}

/// The statements that bring `rollups` up to block `through` where rows
/// were `inserted` (`[from, to)`, ns) or an edit marked (`edited`): per
/// level, finest first, in whole buckets, a rebuild from its source where
/// that is kept (deleting the buckets first after an edit) and, where it
/// is gone, a merge with the inserted rows (edits changed those buckets
/// themselves); nothing before the level's own cut.
fn catch_up(
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
enum Passed {
    /// Its rollups hold every row it found.
    Done,
    /// Its new rows all fall in the newest bucket: left to a later pass.
    Deferred,
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
        let started = std::time::Instant::now();
        let learnt = downsampler.learn().await;
        if downsampler.cluster.is_some() {
            let millis = started.elapsed().as_millis() as u64;
            IngestStats::add(&stats.downsampling_learn_millis, millis);
        }
        if let Err(err) = learnt {
            IngestStats::add(&stats.downsampling_learn_errors, 1);
            tracing::warn!(%err, "learning the shards' rollups failed; trying again");
        }
        let started = std::time::Instant::now();
        let passed = downsampler.pass().await;
        if !matches!(passed, Ok(false)) {
            IngestStats::add(
                &stats.downsampling_pass_millis,
                started.elapsed().as_millis() as u64,
            );
        }
        match passed {
            Ok(false) => {}
            Ok(true) => IngestStats::add(&stats.downsampling_passes, 1),
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

    const MIN: i64 = i64::MIN;
    const ALL: Keeps = Keeps::Aggregates;

    fn width(nanos: u64) -> Resolution {
        Resolution::aggregates(Duration::from_nanos(nanos))
    }

    fn view(unsettled: Option<Span>) -> RollupView {
        RollupView {
            levels: vec![(width(10), "t".to_owned())],
            fields: Vec::new(),
            unsettled,
            rows_from: MIN,
            kept_from: vec![MIN],
        }
    }

    fn spans(split: &RollupSplit) -> Vec<(&str, Vec<Span>)> {
        split
            .rollups
            .iter()
            .map(|(table, spans)| (table.as_str(), spans.clone()))
            .collect()
    }

    #[test]
    fn a_range_splits_into_whole_buckets_and_the_rest() {
        // Cut ends go to the rows.
        let split = view(None).split(0, 5, 47, ALL).unwrap();
        assert_eq!(spans(&split), vec![("t", vec![(10, 40)])]);
        assert_eq!(split.rows, vec![(5, 10), (40, 47)]);
        // What the rollups may lack too, in whole buckets.
        let split = view(Some((23, 27))).split(0, 0, 50, ALL).unwrap();
        assert_eq!(spans(&split), vec![("t", vec![(0, 20), (30, 50)])]);
        assert_eq!(split.rows, vec![(20, 30)]);
        // Unsettled past the end, an unbounded start.
        let split = view(Some((45, 90))).split(0, MIN, 50, ALL).unwrap();
        assert_eq!(split.rows.last(), Some(&(40, 50)));
        assert_eq!(split.rows[0].0, MIN);
        // No whole bucket: nothing for the rollup.
        assert_eq!(view(None).split(0, 11, 19, ALL), None);
        assert_eq!(view(Some((MIN, i64::MAX))).split(0, 0, 50, ALL), None);
    }

    #[test]
    fn where_rows_are_gone_buckets_count_by_their_start_from_the_finest_level_left() {
        let view = RollupView {
            levels: vec![
                (width(10), "fine".to_owned()),
                (width(20), "coarse".to_owned()),
            ],
            fields: Vec::new(),
            // Unknown after a restart: the rows where they are kept.
            unsettled: Some((MIN, i64::MAX)),
            rows_from: 40,
            kept_from: vec![20, MIN],
        };
        let split = view.split(0, 5, 67, ALL).unwrap();
        assert_eq!(
            spans(&split),
            vec![("fine", vec![(20, 40)]), ("coarse", vec![(5, 20)])]
        );
        assert_eq!(split.rows, vec![(40, 67)]);
        let settled = RollupView {
            unsettled: None,
            ..view.clone()
        };
        let split = settled.split(0, 25, 67, ALL).unwrap();
        assert_eq!(spans(&split), vec![("fine", vec![(25, 60)])]);
        assert_eq!(split.rows, vec![(60, 67)]);
        // The coarse level is asked for: the fine one is never read.
        let split = settled.split(1, 5, 90, ALL).unwrap();
        assert_eq!(spans(&split), vec![("coarse", vec![(5, 80)])]);
        assert_eq!(split.rows, vec![(80, 90)]);
        // Rows read where kept; the facts stand in for themselves there.
        assert_eq!(settled.rows_sql("f", &[], 40, 90), None);
        let rows = settled.rows_sql("f", &[], 0, 90).unwrap();
        assert!(
            rows.contains("FROM f WHERE") && rows.contains("FROM fine FINAL"),
            "{rows}"
        );
        assert!(rows.contains("FROM coarse FINAL"), "{rows}");
        // A coarse level keeping the last sample only: chosen and split
        // into for a reader of last samples, never for one of aggregates.
        let mut last = settled.clone();
        last.levels[1].0.keeps = Keeps::Last;
        assert_eq!(last.level(ALL, |_| true), Some(0));
        assert_eq!(last.level(Keeps::Last, |_| true), Some(1));
        assert_eq!(last.split(0, 5, 67, ALL), None);
        assert_eq!(
            spans(&last.split(0, 5, 67, Keeps::Last).unwrap())[1].0,
            "coarse"
        );
        // Nor where the fine level alone answers.
        assert!(last.split(0, 25, 67, ALL).is_some());
    }

    #[test]
    fn cuts_follow_the_ages_and_the_retention_and_never_move_back() {
        let policy = Downsampling::parse(&["1d:5m", "2d:1h"]).unwrap();
        let day = 86_400_000_000_000_i64;
        let now = 10 * day + 5 * 3_600_000_000_000;
        let cuts = Cuts::default().at(&policy, 0, now);
        assert_eq!(cuts.rows_from, Some(9 * day));
        assert_eq!(cuts.kept_from, vec![Some(8 * day), None]);
        let retained = Cuts::default().at(&policy, 7 * 86_400 + 60, now);
        assert_eq!(retained.kept_from, vec![Some(8 * day), Some(3 * day)]);
        let later = Cuts {
            rows_from: Some(12 * day),
            ..cuts.clone()
        };
        assert_eq!(later.at(&policy, 0, now).rows_from, Some(12 * day));
        assert_eq!(cuts.source_from(0), 9 * day);
        assert_eq!(cuts.source_from(1), 8 * day);
        assert_eq!(lcm(86_400, 3600), 86_400);
        assert_eq!(lcm(86_400, 7 * 3600), 7 * 86_400);
        // The registry's form round-trips.
        let parsed = parse_cuts(&(9 * day).to_string(), &format!("[{},{MIN}]", 8 * day)).unwrap();
        assert_eq!(parsed, cuts);
        assert_eq!(parse_cuts(&MIN.to_string(), "[]").unwrap(), Cuts::default());
    }
}
