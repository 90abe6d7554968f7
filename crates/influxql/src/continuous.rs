//! Continuous queries' periods: the runner the library's task calls
//! ([`chingest::ContinuousQueryRunner`]) once per period of each query,
//! as InfluxDB's continuous query service runs them — the statement's
//! `SELECT … INTO` with its time condition replaced by the period's
//! window, on its database, as the server (it was checked against its
//! creator's rights when created), its answer written as `INTO` writes
//! one ([`into::write`]).

use chingest::{
    Access, ContinuousQuery, DuplicatePolicy, Ingestor, PeriodError, PeriodFuture, Window,
};

use crate::error::Error;
use crate::into;
use crate::parse::{parse_query, Admin, Statement};
use crate::plan::Context;
use crate::select;

/// Runs continuous queries' periods: the server gives it to
/// [`Ingestor::run_continuous_queries`].
#[derive(Debug, Clone)]
pub struct ContinuousQueryRunner {
    /// The retention policy of sources and targets that name none.
    default_retention_policy: String,
    /// The duplicate policy of tables given none (as [`Context`] says).
    default_duplicate_policy: DuplicatePolicy,
}

impl ContinuousQueryRunner {
    /// A runner whose queries read and write `default_retention_policy`
    /// where they name no policy.
    pub fn new(default_retention_policy: &str, default_duplicate_policy: DuplicatePolicy) -> Self {
        ContinuousQueryRunner {
            default_retention_policy: default_retention_policy.to_owned(),
            default_duplicate_policy,
        }
    }

    async fn run(
        &self,
        ingestor: &Ingestor,
        query: &ContinuousQuery,
        window: Window,
    ) -> Result<u64, Error> {
        let now = chingest::clock::now_ns();
        let statement = parse_query(&query.statement, now)?.into_iter().next();
        let Some(Ok(Statement::Admin(Admin::CreateContinuousQuery(create)))) = statement else {
            return Err(Error::Statement(format!(
                "not a continuous query: {}",
                query.statement
            )));
        };
        let mut into = create.query;
        into.select.condition.start = Some(window.start);
        into.select.condition.stop = Some(window.end);
        let ctx = Context {
            ingestor,
            access: &Access::ALL,
            database: Some(&query.database),
            retention_policy: &self.default_retention_policy,
            default_retention_policy: &self.default_retention_policy,
            default_duplicate_policy: self.default_duplicate_policy,
            now,
        };
        let answer = select::run(&ctx, &into.select).await?;
        into::write(&ctx, &into.target, &answer).await
    }
}

impl chingest::ContinuousQueryRunner for ContinuousQueryRunner {
    fn run_period<'a>(
        &'a self,
        ingestor: &'a Ingestor,
        query: &'a ContinuousQuery,
        window: Window,
    ) -> PeriodFuture<'a> {
        Box::pin(async move {
            self.run(ingestor, query, window)
                .await
                .map_err(|err| match err {
                    // The library could not answer now: the period waits.
                    Error::Request(err) => PeriodError::Unavailable(err.to_string()),
                    failed => PeriodError::Failed(failed.to_string()),
                })
        })
    }
}
