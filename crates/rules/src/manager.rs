//! The rules a server runs ([`Manager`]): a task per group, evaluating it
//! at its interval from a time of its own within the interval (groups
//! spread out, as Prometheus spreads them by a hash of file and name), at
//! most `max_concurrent_groups` at once. A group late for its slot skips
//! the slots it missed, counts them and evaluates the latest, so a slow
//! group never piles up. After the first load each group restores its
//! alerts' `for` state once it has been evaluated twice, as Prometheus
//! does. A reload reads every file first and changes nothing when one is
//! invalid; else groups that stay hand their alerts and written series to
//! their new selves, and groups that go mark their series stale.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use chingest::Ingestor;
use tokio::sync::{watch, OnceCell, Semaphore};
use tokio::task::JoinHandle;

use crate::duration::millis;
use crate::group::{GroupState, IngestorStorage};
use crate::load::{self, LoadError, LoadedFile};
use crate::notify::Notifier;
use crate::settings::Settings;

/// A group's counters, as Prometheus names them per group.
#[derive(Debug, Default)]
pub struct GroupCounters {
    /// Evaluations of the group that ran (`…_group_iterations_total`).
    pub iterations: AtomicU64,
    /// Slots skipped because the group was late
    /// (`…_group_iterations_missed_total`).
    pub missed: AtomicU64,
    /// Rule evaluations (`…_rule_evaluations_total`).
    pub evaluations: AtomicU64,
    /// Rule evaluations that failed (`…_rule_evaluation_failures_total`).
    pub failures: AtomicU64,
    /// Samples written, stale markers included.
    pub samples: AtomicU64,
    /// Time spent evaluating, in microseconds.
    pub duration_us: AtomicU64,
}

/// A running group as the APIs and `/metrics` see it.
#[derive(Debug)]
pub struct GroupView {
    /// Its state after its last evaluation.
    pub state: RwLock<GroupState>,
    /// Its counters.
    pub counters: GroupCounters,
}

struct Running {
    view: Arc<GroupView>,
    stop: watch::Sender<bool>,
    task: JoinHandle<GroupState>,
}

/// The ingestor as a server holds it: set once the engine is open.
pub type SharedIngestor = Arc<OnceCell<Ingestor>>;

/// The table of the rules' lease in the database they write, in the
/// cluster mode (`Ingestor::holds_lease`).
const LEASE_TABLE: &str = "_rules_lease";

/// What every group's task shares.
struct Shared {
    ingestor: SharedIngestor,
    settings: Settings,
    permits: Semaphore,
    notifier: Option<Arc<Notifier>>,
    /// Whether this node held the rules' lease when a group last asked
    /// (always, but in the cluster mode).
    leader: AtomicBool,
}

/// The rules a server runs, reloaded from the same patterns.
pub struct Manager {
    shared: Arc<Shared>,
    patterns: Vec<String>,
    base: PathBuf,
    /// The groups running, by (file, name), in the files' order.
    running: tokio::sync::Mutex<Vec<((String, String), Running)>>,
    /// What the APIs read: the running groups' views, in order.
    views: RwLock<Vec<Arc<GroupView>>>,
    /// Reloads that worked and that failed, and the last one's outcome.
    reloads: Mutex<ReloadStatus>,
}

/// How the last reload went.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReloadStatus {
    /// Loads that worked (the first included).
    pub successes: u64,
    /// Loads refused.
    pub failures: u64,
    /// Whether the last one worked.
    pub last_successful: bool,
    /// When it happened (ms).
    pub last_at: i64,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager")
            .field("patterns", &self.patterns)
            .finish_non_exhaustive()
    }
}

impl Manager {
    /// Loads the rule files `patterns` name (relative ones from `base`)
    /// and starts evaluating them over `ingestor` (groups wait while it is
    /// not set); refused when one is invalid.
    pub async fn start(
        ingestor: SharedIngestor,
        settings: Settings,
        patterns: Vec<String>,
        base: PathBuf,
        notifier: Option<Arc<Notifier>>,
    ) -> Result<Manager, LoadError> {
        let files = load::load(&patterns, &base)?;
        let manager = Manager {
            shared: Arc::new(Shared {
                ingestor,
                permits: Semaphore::new(settings.max_concurrent_groups.max(1)),
                settings,
                notifier,
                leader: AtomicBool::new(true),
            }),
            patterns,
            base,
            running: tokio::sync::Mutex::new(Vec::new()),
            views: RwLock::new(Vec::new()),
            reloads: Mutex::new(ReloadStatus::default()),
        };
        manager.apply(files, true).await;
        Ok(manager)
    }

    /// Reads the rule files again and runs them; when one is invalid,
    /// nothing changes and the error says what (file, line, reason).
    pub async fn reload(&self) -> Result<(), LoadError> {
        match load::load(&self.patterns, &self.base) {
            Ok(files) => {
                self.apply(files, false).await;
                Ok(())
            }
            Err(err) => {
                let mut status = self.reloads.lock().unwrap();
                status.failures += 1;
                status.last_successful = false;
                status.last_at = chingest::clock::now_ms();
                tracing::error!(%err, "rule files refused; the rules loaded before keep running");
                Err(err)
            }
        }
    }

    /// The running groups, in the files' order.
    pub fn groups(&self) -> Vec<Arc<GroupView>> {
        self.views.read().unwrap().clone()
    }

    /// Whether this node evaluates the rules: always, but in a cluster
    /// while it holds their lease.
    pub fn is_leader(&self) -> bool {
        self.shared.leader.load(Ordering::Relaxed)
    }

    /// Where alerts are sent, when Alertmanagers are configured.
    pub fn notifier(&self) -> Option<&Notifier> {
        self.shared.notifier.as_deref()
    }

    /// How loading went.
    pub fn reload_status(&self) -> ReloadStatus {
        self.reloads.lock().unwrap().clone()
    }

    /// Stops every group, each after the evaluation it is in.
    pub async fn stop(&self) {
        let mut running = self.running.lock().await;
        for (_, group) in running.drain(..) {
            let _ = group.stop.send(true);
            let _ = group.task.await;
        }
        self.views.write().unwrap().clear();
    }

    async fn apply(&self, files: Vec<LoadedFile>, first: bool) {
        let mut running = self.running.lock().await;
        let mut old: HashMap<(String, String), Running> = running.drain(..).collect();
        let mut next = Vec::new();
        for file in &files {
            for group in &file.groups {
                let key = (file.path.clone(), group.name.clone());
                let mut state = GroupState::new(&file.path, group, &self.shared.settings);
                if let Some(before) = old.remove(&key) {
                    let _ = before.stop.send(true);
                    if let Ok(before) = before.task.await {
                        state.take_over(before);
                    }
                }
                next.push((key, self.spawn(state, first)));
            }
        }
        // Groups that went: their series end now.
        for (_, gone) in old {
            let _ = gone.stop.send(true);
            if let Ok(state) = gone.task.await {
                mark_stale(&self.shared, &state).await;
            }
        }
        *self.views.write().unwrap() = next.iter().map(|(_, r)| Arc::clone(&r.view)).collect();
        *running = next;
        let mut status = self.reloads.lock().unwrap();
        status.successes += 1;
        status.last_successful = true;
        status.last_at = chingest::clock::now_ms();
        let groups = running.len();
        tracing::info!(groups, "rule files loaded");
    }

    fn spawn(&self, mut state: GroupState, restore: bool) -> Running {
        if restore {
            state.set_restored(false);
        }
        let view = Arc::new(GroupView {
            state: RwLock::new(state.clone()),
            counters: GroupCounters::default(),
        });
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(run(
            state,
            Arc::clone(&self.shared),
            Arc::clone(&view),
            stopped,
            restore,
        ));
        Running { view, stop, task }
    }
}

/// Where in its interval a group is evaluated: a hash of its file and
/// name, so groups of one interval do not all start at once.
fn offset_in(state: &GroupState, interval: i64) -> i64 {
    let key = format!("{}\u{0}{}", state.file, state.name);
    (xxhash_rust::xxh3::xxh3_64(key.as_bytes()) % interval as u64) as i64
}

/// The first slot after `now` of a group whose slots are `offset` into
/// each `interval` (ms).
fn next_slot(now: i64, offset: i64, interval: i64) -> i64 {
    let base = (now - offset).div_euclid(interval) * interval + offset;
    base + interval
}

/// A group's task: evaluates it at each slot until told to stop, then
/// hands its state back.
async fn run(
    mut state: GroupState,
    shared: Arc<Shared>,
    view: Arc<GroupView>,
    mut stop: watch::Receiver<bool>,
    restore: bool,
) -> GroupState {
    let interval = millis(state.interval).max(1);
    let offset = offset_in(&state, interval);
    let mut slot = next_slot(chingest::clock::now_ms(), offset, interval);
    // Evaluations since this node took the rules over (at start, or from
    // another node of a cluster): the second restores `for` state.
    let mut evaluations = 0u64;
    let mut restore = restore;
    let mut held = true;
    let group_settings = state.settings(&shared.settings);
    loop {
        let wait = Duration::from_millis((slot - chingest::clock::now_ms()).max(0) as u64);
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.changed() => return state,
        }
        let permit = tokio::select! {
            permit = shared.permits.acquire() => permit,
            _ = stop.changed() => return state,
        };
        let Some(ingestor) = shared.ingestor.get() else {
            slot += interval;
            continue;
        };
        // In a cluster, one node evaluates the rules: the lease's holder
        // (kept in the configured database, whatever the group's).
        let lease = ingestor
            .holds_lease(
                &shared.settings.write_database,
                LEASE_TABLE,
                shared.settings.lease_term,
            )
            .await;
        let settings = &group_settings;
        let holds = lease.unwrap_or_else(|err| {
            tracing::warn!(%err, "the rules' lease could not be read; not evaluating");
            false
        });
        shared.leader.store(holds, Ordering::Relaxed);
        if !holds {
            held = false;
            drop(permit);
            slot = next_slot(chingest::clock::now_ms(), offset, interval);
            continue;
        }
        if !held {
            // Taken over: what this node held is stale; the alerts' time
            // comes back from ALERTS_FOR_STATE, as after a restart.
            held = true;
            state.forget();
            state.set_restored(false);
            restore = true;
            evaluations = 0;
        }
        let storage = IngestorStorage { ingestor, settings };
        let evaluated = state.evaluate(&storage, settings, slot).await;
        drop(permit);
        evaluations += 1;
        if restore && evaluations == 2 {
            restore = false;
            // As Prometheus: once the rules have had two evaluations to
            // see the data again.
            let now = chingest::clock::now_ms();
            match state.restore_for_state(ingestor, settings, now).await {
                Ok(0) => {}
                Ok(alerts) => {
                    tracing::info!(group = %state.name, alerts, "alerts' for state restored")
                }
                Err(err) => {
                    tracing::warn!(group = %state.name, %err, "alerts' for state not restored")
                }
            }
        }
        let counters = &view.counters;
        counters.iterations.fetch_add(1, Ordering::Relaxed);
        counters
            .evaluations
            .fetch_add(evaluated.rules, Ordering::Relaxed);
        counters
            .failures
            .fetch_add(evaluated.failures, Ordering::Relaxed);
        counters
            .samples
            .fetch_add(evaluated.samples as u64, Ordering::Relaxed);
        counters
            .duration_us
            .fetch_add(state.evaluation_time.as_micros() as u64, Ordering::Relaxed);
        if let (Some(notifier), false) = (&shared.notifier, evaluated.notifications.is_empty()) {
            notifier.send(evaluated.notifications);
        }
        *view.state.write().unwrap() = state.clone();
        // The slots that passed meanwhile are missed: the next is the
        // first still ahead.
        let now = chingest::clock::now_ms();
        let missed = ((now - slot) / interval - 1).max(0);
        if missed > 0 {
            counters.missed.fetch_add(missed as u64, Ordering::Relaxed);
            tracing::warn!(group = %state.name, missed, "rule group slower than its interval");
        }
        slot += (missed + 1) * interval;
    }
}

/// Writes a stale marker for every series a group that went wrote last.
async fn mark_stale(shared: &Shared, state: &GroupState) {
    let (Some(ingestor), now) = (shared.ingestor.get(), chingest::clock::now_ms()) else {
        return;
    };
    let settings = &state.settings(&shared.settings);
    let storage = IngestorStorage { ingestor, settings };
    if let Err(err) = state.write_stale(&storage, now).await {
        tracing::warn!(group = %state.name, %err, "stale markers of a removed group not written");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_the_offset_into_each_interval_after_now() {
        assert_eq!(next_slot(1_000, 250, 1_000), 1_250);
        assert_eq!(next_slot(1_250, 250, 1_000), 2_250);
        assert_eq!(next_slot(1_249, 250, 1_000), 1_250);
        assert_eq!(next_slot(0, 0, 60_000), 60_000);
    }
}
