//! The [`Downsampler`]: what it knows, grouped by who takes each lock
//! (readers on every insert and read; passes, edits and settings under
//! the pass lock), and the background task that makes its passes
//! ([`run`]). What it does lives in the rooms beside this file.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use crate::catalog::Catalog;
use crate::config::DownsamplingConfig;
use crate::engine::Engine;
use crate::error::Result;
use crate::last_value::LastValues;
use crate::layout::names::TableNames;
use crate::layout::schema::FieldType;
use crate::stats::IngestStats;

use super::cluster::Known;
use super::policy::Policies;
use super::state::{Cuts, Kept, Span};
use crate::lease::Lease;

/// The lease table's name in each downsampled database.
const LEASE_TABLE: &str = "_downsampling_lease";

/// A lease on passes in the cluster mode lasts this many periods.
pub(super) const LEASE_PERIODS: u32 = 15;

/// Keeps the rollups of the downsampled databases: those the
/// configuration file names, and those `SET DOWNSAMPLING` set.
#[derive(Debug)]
pub(crate) struct Downsampler {
    pub(super) engine: Weak<Engine>,
    pub(super) catalog: Weak<Catalog>,
    /// Told when an answer about settled times changes here: where rows
    /// are gone, by a merge or by moved cuts.
    pub(super) last_values: Weak<LastValues>,
    /// Which tables are downsampled, at which levels.
    pub(crate) policies: Policies,
    /// What readers may take from the rollups: reported by inserts and
    /// edits, kept by passes, taken on every insert and read.
    pub(super) readers: Mutex<Readers>,
    /// Held by a pass over a table and by an edit or a setting of a
    /// downsampled database.
    pub(super) passes: tokio::sync::Mutex<()>,
    /// What passes keep from one to the next (taken by passes, edits and
    /// settings, under [`passes`](Self::passes)).
    pub(super) book: Mutex<Book>,
    /// The storage mode's part in passes.
    pub(super) mode: Mode,
}

/// What readers may take from the rollups, by storage table.
#[derive(Debug, Default)]
pub(super) struct Readers {
    /// The fields each fact table's rollups and registry were made for in
    /// this process: tables are made again only for a table new here or
    /// grown a field (schemas only grow), not every pass.
    pub(super) made: HashMap<String, Vec<(String, FieldType)>>,
    /// What each table's rollups may lack (the embedded mode).
    pub(super) unsettled: Unsettled,
    /// Each fact table's levels and cuts, once a pass or the registry told
    /// them (the embedded mode).
    pub(super) kept: HashMap<String, Kept>,
    /// What readers take from each table's rollups, learnt from every
    /// shard ([`learn`](Downsampler::learn); the `clickhouse` storage mode).
    pub(super) known: Known,
}

/// What passes keep from one to the next, by storage table.
#[derive(Debug, Default)]
pub(super) struct Book {
    /// Tables whose rollups are made again at their next pass (one
    /// failed).
    pub(super) stale: HashSet<String>,
    /// Fact tables whose next pass drops the rollups of levels they no
    /// longer have.
    pub(super) retiring: HashSet<String>,
    /// The cuts before which each fact table's rows and buckets were
    /// removed by this process, by [`Store::key`](super::store::Store::key).
    pub(super) removed: HashMap<String, Cuts>,
}

/// How passes run in each storage mode (where: [`stores`](super::store::stores)).
#[derive(Debug)]
pub(super) enum Mode {
    /// Every pass, here.
    Embedded,
    /// One node at a time, each table on every shard.
    Cluster {
        /// The right to make passes over a database.
        lease: Lease,
        /// How long after a cut is recorded the rows and buckets before it
        /// are removed: every node learns it meanwhile.
        removal_delay: Duration,
    },
}

impl Mode {
    /// Whether this node may make a pass over the table `names` now: in
    /// the embedded mode always; in the cluster mode while it holds the
    /// lease on its database (asked before each table, so a pass that
    /// outlives its term stops at the next).
    pub(super) async fn may_pass(&self, engine: &Engine, names: &TableNames) -> Result<bool> {
        match (self, &engine.cluster) {
            (Mode::Cluster { lease, .. }, Some(shards)) => lease.holds(shards, names).await,
            _ => Ok(true),
        }
    }

    /// Whether every node has learnt, by `now`, cuts or levels recorded at
    /// `recorded` (ns): at once in the embedded mode; in the cluster mode
    /// once the removal delay passed.
    pub(super) fn learnt_by_all(&self, recorded: i64, now: i64) -> bool {
        let delay = match self {
            Mode::Embedded => 0,
            Mode::Cluster { removal_delay, .. } => removal_delay.as_nanos() as i64,
        };
        now.saturating_sub(recorded) >= delay
    }
}

/// The rows each fact table (by storage table) may hold that its rollups
/// do not.
#[derive(Debug, Default)]
pub(super) struct Unsettled {
    /// Tables a pass finished in this process: for these, every row a
    /// rollup lacks is in `pending` or `passing`.
    pub(super) known: HashSet<String>,
    /// Spans of inserts and marks since a pass last took them.
    pub(super) pending: HashMap<String, Span>,
    /// The spans the running pass took.
    pub(super) passing: HashMap<String, Span>,
}

impl Downsampler {
    pub(crate) fn new(
        engine: &Arc<Engine>,
        catalog: &Arc<Catalog>,
        last_values: &Arc<LastValues>,
        config: &DownsamplingConfig,
    ) -> Downsampler {
        let mode = match engine.cluster {
            None => Mode::Embedded,
            Some(_) => Mode::Cluster {
                lease: Lease::new(config.period.saturating_mul(LEASE_PERIODS), LEASE_TABLE),
                removal_delay: config.removal_delay,
            },
        };
        Downsampler {
            engine: Arc::downgrade(engine),
            catalog: Arc::downgrade(catalog),
            last_values: Arc::downgrade(last_values),
            policies: Policies {
                configured: config.databases.clone(),
                measurements: config.measurements.clone(),
                set: RwLock::default(),
            },
            readers: Mutex::default(),
            passes: tokio::sync::Mutex::new(()),
            book: Mutex::default(),
            mode,
        }
    }

    /// Tells readers' caches that an answer about `database`'s settled
    /// times may have changed.
    pub(super) fn unsettle(&self, database: &str) {
        if let Some(last_values) = self.last_values.upgrade() {
            last_values.unsettle(database);
        }
    }
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
        if let Mode::Cluster { .. } = downsampler.mode {
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
