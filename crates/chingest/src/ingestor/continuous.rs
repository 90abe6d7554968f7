//! Continuous queries: created, dropped and listed here, run by the
//! library's task over the query language's [`ContinuousQueryRunner`]
//! (the module `continuous` keeps their registry, schedule and progress).

use std::sync::{Arc, Weak};

use crate::continuous::{self, ContinuousQuery, PeriodError};
use crate::error::{Error, Result};

use super::{ContinuousQueryRunner, Ingestor, Shared};

impl Ingestor {
    /// Creates a continuous query on an existing database, durably (in
    /// the database's registry: backups carry it); it runs from the next
    /// boundary of its schedule on. The same query again changes nothing;
    /// another of the same name is refused ([`Error::Conflict`]), as it
    /// is in the `clickhouse` storage mode ([`Error::Config`]).
    pub async fn create_continuous_query(&self, query: ContinuousQuery) -> Result<()> {
        let shared = self.shared.open()?;
        if shared.engine.cluster.is_some() {
            return Err(Error::Config(
                "continuous queries are not available in the clickhouse storage mode: every \
                 node would run them; run them on one chingest in the embedded mode, or as \
                 scheduled INSERT … SELECTs on the cluster"
                    .to_owned(),
            ));
        }
        shared.continuous.create(query).await
    }

    /// Drops the continuous query `name` of `db` (once a period of it
    /// under way is done); whether there was one.
    pub async fn drop_continuous_query(&self, db: &str, name: &str) -> Result<bool> {
        self.shared.open()?.continuous.drop_query(db, name).await
    }

    /// Every continuous query, by database, each database's in the order
    /// they were created.
    pub fn continuous_queries(&self) -> Vec<ContinuousQuery> {
        self.shared.continuous.list()
    }

    /// Starts running the continuous queries with `runner`, on their
    /// schedule, until the ingestor closes (`[continuous_queries]` says
    /// whether they run here, how often the schedule is checked and how
    /// many missed periods a restart catches up). Not in the `clickhouse`
    /// storage mode, where none can be created. Once per ingestor: a
    /// second call replaces the runner.
    pub fn run_continuous_queries(&self, runner: Arc<dyn ContinuousQueryRunner>) -> Result<()> {
        let shared = self.shared.open()?;
        let config = shared.config.continuous_queries.clone();
        if !config.enabled || shared.engine.cluster.is_some() {
            return Ok(());
        }
        let weak = Arc::downgrade(&self.shared);
        let run_period: continuous::RunPeriod = Box::new(move |query, window| {
            let weak: Weak<Shared> = weak.clone();
            let runner = Arc::clone(&runner);
            Box::pin(async move {
                let shared = weak
                    .upgrade()
                    .ok_or_else(|| PeriodError::Unavailable(Error::Closed.to_string()))?;
                let ingestor = Ingestor { shared };
                // A period reads every point acknowledged before it began,
                // also those still waiting for their flush.
                let unavailable = |err: Error| PeriodError::Unavailable(err.to_string());
                ingestor.flush().await.map_err(unavailable)?;
                runner.run_period(&ingestor, &query, window).await
            })
        });
        let task = continuous::run(
            Arc::clone(&shared.continuous),
            config,
            Arc::clone(&shared.engine.stats),
            run_period,
        );
        let task = tokio::spawn(task);
        if let Some(previous) = shared.continuous_task.lock().unwrap().replace(task) {
            previous.abort();
        }
        Ok(())
    }
}
