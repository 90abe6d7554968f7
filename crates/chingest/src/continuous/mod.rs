//! Continuous queries: statements a query language defines (InfluxQL's
//! `CREATE CONTINUOUS QUERY`), kept in each database's registry
//! ([`registry`]), run by one background task ([`run`]) on InfluxDB's
//! schedule ([`schedule`]). The library knows a query's schedule and
//! progress, not its language: each period is handed to a [`RunPeriod`]
//! the ingestor builds over the language's runner.
//!
//! A period reads every point acknowledged before it began: the ingestor
//! flushes what waits in its batchers first. A point that arrives after
//! its interval's period ran is not in it (as in InfluxDB; `RESAMPLE FOR`
//! reads intervals again).
//!
//! Each query's last completed period is recorded after its points are
//! written; on start the periods missed while the process was down run,
//! oldest first, up to `max_catch_up_periods` of them (older ones are
//! skipped, logged and counted; the newest always runs).
//!
//! Exactly once: a period's points go through the write-ahead log as one
//! write (durable when it is answered), and the mark is recorded after.
//! A crash between the two repeats the period, which writes the same
//! points again — the same series at the same times, computed over the
//! same window (the boundary, not the clock, fixes it). The measurements
//! a continuous query creates take the `last` duplicate policy (the
//! runner asks for it), so the repetition replaces what it repeats
//! instead of adding to it: the same way a downsampling pass rebuilds a
//! bucket whole rather than remembering that it had. It is also what
//! InfluxDB does with a point written again, and what `RESAMPLE FOR`
//! needs, since it recomputes intervals already written.

mod definition;
mod registry;
mod schedule;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

pub use definition::ContinuousQuery;
pub use schedule::{Schedule, Window};

use crate::catalog::Catalog;
use crate::clock::now_ns;
use crate::config::ContinuousQueryConfig;
use crate::engine::{self, Engine};
use crate::error::{Error, Result};
use crate::stats::{ContinuousQueryStats, IngestStats};

use registry::Stored;

/// Why a period of a continuous query wrote nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PeriodError {
    /// The statement failed over the period: the period is passed by, as
    /// InfluxDB passes it by (logged and counted).
    #[error("{0}")]
    Failed(String),
    /// The statement could not run now (the ingestor overloaded or
    /// closing, the engine failing): the period runs again at the next
    /// check.
    #[error("{0}")]
    Unavailable(String),
}

/// A boxed future, as the runner of a period returns it.
pub type PeriodFuture<'a> = Pin<Box<dyn Future<Output = Result<u64, PeriodError>> + Send + 'a>>;

/// Runs one period of a query over its window: the points written.
pub(crate) type RunPeriod =
    Box<dyn Fn(ContinuousQuery, Window) -> PeriodFuture<'static> + Send + Sync>;

/// Every continuous query and its progress.
#[derive(Debug)]
pub(crate) struct ContinuousQueries {
    engine: Weak<Engine>,
    catalog: Weak<Catalog>,
    /// By (database, name).
    queries: Mutex<BTreeMap<(String, String), Stored>>,
    /// Held by a create or drop, and by a query's period from its run to
    /// its mark: a drop waits for the period under way.
    changes: tokio::sync::Mutex<()>,
    /// The last registry row's version.
    version: AtomicU64,
}

impl ContinuousQueries {
    pub(crate) fn new(engine: &Arc<Engine>, catalog: &Arc<Catalog>) -> ContinuousQueries {
        ContinuousQueries {
            engine: Arc::downgrade(engine),
            catalog: Arc::downgrade(catalog),
            queries: Mutex::default(),
            changes: tokio::sync::Mutex::new(()),
            version: AtomicU64::new(0),
        }
    }

    fn engine(&self) -> Result<Arc<Engine>> {
        self.engine.upgrade().ok_or(Error::Closed)
    }

    /// A version above every row's so far (and, across restarts, above
    /// those of earlier processes: the clock's ns, unless the registries
    /// hold higher).
    fn next_version(&self) -> u64 {
        let now = now_ns().max(0) as u64;
        let mut current = self.version.load(Ordering::Relaxed);
        loop {
            let next = now.max(current + 1);
            match self
                .version
                .compare_exchange(current, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return next,
                Err(seen) => current = seen,
            }
        }
    }

    /// Reads back every registry (on open).
    pub(crate) async fn load(&self) -> Result<()> {
        let (stored, highest) = self.engine()?.run(registry::load).await?;
        self.version.fetch_max(highest, Ordering::Relaxed);
        let mut queries = self.queries.lock().unwrap();
        for stored in stored {
            let key = (stored.query.database.clone(), stored.query.name.clone());
            queries.insert(key, stored);
        }
        Ok(())
    }

    /// Every query, by database, each database's in creation order.
    pub(crate) fn list(&self) -> Vec<ContinuousQuery> {
        let mut stored: Vec<Stored> = self.queries.lock().unwrap().values().cloned().collect();
        stored.sort_by(|a, b| (&a.query.database, a.created).cmp(&(&b.query.database, b.created)));
        stored.into_iter().map(|s| s.query).collect()
    }

    /// Creates `query`, durably; its first period is the first boundary
    /// from now. The same query again is no change; another of its name
    /// is refused ([`Error::Conflict`]).
    pub(crate) async fn create(&self, query: ContinuousQuery) -> Result<()> {
        let catalog = self.catalog.upgrade().ok_or(Error::Closed)?;
        if catalog.database(&query.database).is_none() {
            return Err(Error::DatabaseNotFound(query.database));
        }
        let _changes = self.changes.lock().await;
        let key = (query.database.clone(), query.name.clone());
        if let Some(existing) = self.queries.lock().unwrap().get(&key) {
            return match existing.query == query {
                true => Ok(()),
                false => Err(Error::Conflict("continuous query already exists".into())),
            };
        }
        let version = self.next_version();
        let stored = Stored {
            last_period: query.schedule.boundary_at_or_before(now_ns()),
            created: version,
            query,
        };
        let statements = [
            registry::create_sql(&stored.query.database),
            registry::row_sql(&stored, false, version),
        ];
        self.engine()?.execute_all(statements).await?;
        self.queries.lock().unwrap().insert(key, stored);
        Ok(())
    }

    /// Drops the query `name` of `database`, durably, once a period of it
    /// under way is done; whether there was one.
    pub(crate) async fn drop_query(&self, database: &str, name: &str) -> Result<bool> {
        let _changes = self.changes.lock().await;
        let key = (database.to_owned(), name.to_owned());
        let Some(stored) = self.queries.lock().unwrap().get(&key).cloned() else {
            return Ok(false);
        };
        let row = registry::row_sql(&stored, true, self.next_version());
        let engine = self.engine()?;
        engine.execute(row).await?;
        self.queries.lock().unwrap().remove(&key);
        let mut counted = engine.stats.continuous_queries.lock().unwrap();
        counted.retain(|s| (s.database.as_str(), s.name.as_str()) != (database, name));
        Ok(true)
    }

    /// Records that `query` is done with the period at `boundary`. Not
    /// synced apart: the engine syncs the part, and a mark lost to a power
    /// cut only repeats the period, which replaces what it wrote.
    async fn mark(&self, query: &ContinuousQuery, boundary: i64) -> Result<()> {
        let key = (query.database.clone(), query.name.clone());
        let Some(mut stored) = self.queries.lock().unwrap().get(&key).cloned() else {
            return Ok(());
        };
        stored.last_period = boundary;
        let row = registry::row_sql(&stored, false, self.next_version());
        self.engine()?
            .run(move |conn| engine::execute(conn, &row))
            .await?;
        self.queries.lock().unwrap().insert(key, stored);
        Ok(())
    }

    /// The query `key` still exists as `query` was (not dropped, nor
    /// dropped and made again), and its last period.
    fn last_period(&self, query: &ContinuousQuery) -> Option<i64> {
        let key = (query.database.clone(), query.name.clone());
        let queries = self.queries.lock().unwrap();
        let stored = queries.get(&key)?;
        (stored.query == *query).then_some(stored.last_period)
    }
}

/// Runs the due periods of every query every `config.run_interval`, with
/// `run_period`, until the engine closes (or the task is aborted).
pub(crate) async fn run(
    queries: Arc<ContinuousQueries>,
    config: ContinuousQueryConfig,
    stats: Arc<IngestStats>,
    run_period: RunPeriod,
) {
    let mut ticks = tokio::time::interval(config.run_interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if queries.engine.strong_count() == 0 {
            return;
        }
        for query in queries.list() {
            catch_up(&queries, &query, &config, &stats, &run_period).await;
        }
    }
}

/// Runs the periods of `query` that are due, oldest first; stops at one
/// that could not run now.
async fn catch_up(
    queries: &ContinuousQueries,
    query: &ContinuousQuery,
    config: &ContinuousQueryConfig,
    stats: &IngestStats,
    run_period: &RunPeriod,
) {
    let Some(last) = queries.last_period(query) else {
        return;
    };
    let schedule = &query.schedule;
    let now = now_ns();
    let (due, skipped) = schedule.due(last, now, config.max_catch_up_periods);
    if skipped > 0 {
        // The mark moves past them first: a crash now does not run them.
        let through = due[0] - schedule.every_ns();
        tracing::warn!(
            database = %query.database, name = %query.name, skipped,
            "a continuous query missed more periods than continuous_queries.max_catch_up_periods: \
             the oldest are not run"
        );
        if let Err(err) = queries.mark(query, through).await {
            tracing::warn!(%err, name = %query.name, "recording a continuous query's progress failed");
            return;
        }
        update(stats, query, |s| s.periods_skipped += skipped);
    }
    for boundary in due {
        let _changes = queries.changes.lock().await;
        // Dropped (or made again) since the list was read.
        if queries
            .last_period(query)
            .is_none_or(|last| last >= boundary)
        {
            return;
        }
        let started = Instant::now();
        let result = match schedule.window(boundary) {
            Some(window) => run_period(query.clone(), window).await,
            None => Ok(0),
        };
        let seconds = started.elapsed().as_secs_f64();
        let lag = (now_ns().saturating_sub(boundary)) as f64 / 1e9;
        let (points, failed) = match &result {
            Ok(points) => (*points, false),
            Err(err) => {
                tracing::warn!(
                    database = %query.database, name = %query.name, boundary, %err,
                    "a continuous query's period failed"
                );
                (0, true)
            }
        };
        update(stats, query, |s| {
            s.runs += 1;
            s.failures += u64::from(failed);
            s.points_written += points;
            s.last_run_seconds = seconds;
            s.lag_seconds = lag;
        });
        if let Err(PeriodError::Unavailable(_)) = result {
            return;
        }
        if let Err(err) = queries.mark(query, boundary).await {
            tracing::warn!(%err, name = %query.name, "recording a continuous query's progress failed");
            return;
        }
        update(stats, query, |s| s.last_period_ns = boundary);
    }
}

/// Changes the counters of `query` (made at its first change).
fn update(
    stats: &IngestStats,
    query: &ContinuousQuery,
    change: impl FnOnce(&mut ContinuousQueryStats),
) {
    let mut all = stats.continuous_queries.lock().unwrap();
    let position = all
        .iter()
        .position(|s| s.database == query.database && s.name == query.name);
    let at = position.unwrap_or_else(|| {
        all.push(ContinuousQueryStats {
            database: query.database.clone(),
            name: query.name.clone(),
            ..ContinuousQueryStats::default()
        });
        all.len() - 1
    });
    change(&mut all[at]);
}
