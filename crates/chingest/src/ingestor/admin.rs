//! Databases and their policies, downsampling settings, backups and
//! snapshots.

use std::sync::Arc;
use std::time::Duration;

use crate::backup::{self, BackupReport, BackupRequest, Snapshot};
use crate::config::{Downsampling, DuplicatePolicy};
use crate::downsample::DownsamplingSetting;
use crate::error::{Error, Result};
use crate::layout::names::{self, NameKind, TableNames};
use crate::lease::Lease;

use super::Ingestor;

impl Ingestor {
    /// Creates a database (and its series table) if it does not exist.
    pub async fn create_database(&self, name: &str) -> Result<()> {
        let shared = self.shared.open()?;
        shared.catalog.ensure_database(&shared.engine, name).await?;
        Ok(())
    }

    /// Whether this process may do now the work that one node of a
    /// cluster does at a time (the server's rule evaluation): always in
    /// the embedded mode; in the `clickhouse` storage mode while it holds
    /// the lease kept in `database`'s table `table` (a name starting with
    /// `_`), claimed in terms of `term` — held by one live node, taken
    /// over within two terms of its holder's death. `database` is created
    /// if it does not exist.
    pub async fn holds_lease(
        &self,
        database: &str,
        table: &'static str,
        term: Duration,
    ) -> Result<bool> {
        let shared = self.shared.open()?;
        let Some(cluster) = &shared.engine.cluster else {
            return Ok(true);
        };
        if !table.starts_with('_') {
            return Err(Error::Internal(format!(
                "a lease's table must start with _: {table:?}"
            )));
        }
        shared
            .catalog
            .ensure_database(&shared.engine, database)
            .await?;
        let lease = Arc::clone(
            shared
                .leases
                .lock()
                .unwrap()
                .entry(table)
                .or_insert_with(|| Arc::new(Lease::new(term, table))),
        );
        lease
            .holds(cluster, &TableNames::new(database, "", ""))
            .await
    }

    /// The databases written to or created, sorted.
    pub fn databases(&self) -> Vec<String> {
        self.shared.reader.databases()
    }

    /// The retention policies of `db`, sorted by name: those created with
    /// [`create_retention_policy`](Self::create_retention_policy) with their
    /// durations, and those only written to (kept forever, `None`).
    pub fn retention_policies(&self, db: &str) -> Vec<(String, Option<Duration>)> {
        self.shared.reader.retention_policies(db)
    }

    /// Creates or changes a retention policy of an existing database: rows
    /// of its tables are deleted by the engine once older than `duration`
    /// (a MergeTree TTL, applied as parts merge); `None` keeps them forever.
    pub async fn create_retention_policy(
        &self,
        db: &str,
        name: &str,
        duration: Option<Duration>,
    ) -> Result<()> {
        let shared = self.shared.open()?;
        names::validate(NameKind::RetentionPolicy, name)?;
        let database = shared
            .catalog
            .database(db)
            .ok_or_else(|| Error::DatabaseNotFound(db.to_owned()))?;
        let seconds = duration.map_or(0, |d| d.as_secs().max(1));
        database
            .set_retention_policy(&shared.engine, name, seconds)
            .await
    }

    /// Sets what the tables of `db` (or, with `measurement`, of one
    /// measurement) keep when a point is written again: see
    /// [`DuplicatePolicy`]. A table keeps the policy it was created with,
    /// so this applies to tables created from now on, and is refused
    /// ([`Error::Conflict`]) while tables it would cover have another.
    pub async fn set_duplicate_policy(
        &self,
        db: &str,
        measurement: Option<&str>,
        policy: DuplicatePolicy,
    ) -> Result<()> {
        let shared = self.shared.open()?;
        if let Some(measurement) = measurement {
            names::validate(NameKind::Measurement, measurement)?;
        }
        let database = shared
            .catalog
            .database(db)
            .ok_or_else(|| Error::DatabaseNotFound(db.to_owned()))?;
        database
            .set_duplicate_policy(
                &shared.engine,
                measurement,
                policy,
                shared.catalog.defaults().duplicates,
            )
            .await
    }

    /// The duplicate policies set for `db`: the database's own (`None`)
    /// and its measurements', sorted. Tables of others take
    /// [`IngestConfig::duplicate_policy`].
    pub fn duplicate_policies(&self, db: &str) -> Vec<(Option<String>, DuplicatePolicy)> {
        self.shared.reader.duplicate_policies(db)
    }

    /// Writes a backup of the request's databases (every one when none is
    /// named) to a new directory or S3 prefix: every write acknowledged
    /// before the call, exactly once, with the databases' schemas,
    /// series and policies. Writes are still acknowledged while it runs;
    /// their inserts wait until the engine has picked the tables' parts.
    /// See [`backup`](crate::backup).
    pub async fn backup(&self, request: BackupRequest) -> Result<BackupReport> {
        let shared = self.shared.open()?;
        backup::backup(shared.writer.open()?, &shared.catalog, request).await
    }

    /// Takes a snapshot: hard links of every table's parts, with their
    /// definitions, in `<data dir>/shadow/<name>` (a data directory once
    /// copied), as of every write acknowledged before the call.
    pub async fn create_snapshot(&self) -> Result<Snapshot> {
        let shared = self.shared.open()?;
        let writer = shared.writer.open()?;
        backup::create_snapshot(writer, &shared.catalog, &shared.config.data_dir).await
    }

    /// The snapshots in the data directory, oldest first.
    pub fn snapshots(&self) -> Result<Vec<Snapshot>> {
        backup::snapshots(&self.shared.config.data_dir)
    }

    /// Deletes the snapshot `name`; false if there is none.
    pub fn delete_snapshot(&self, name: &str) -> Result<bool> {
        backup::delete_snapshot(&self.shared.config.data_dir, name)
    }

    /// Sets how `db` is downsampled ([`DownsamplingSetting`]), durably;
    /// until a statement does, the configuration file's
    /// [`DownsamplingConfig::databases`](crate::DownsamplingConfig::databases)
    /// say. Passes move its tables to the levels (docs/downsampling.md): a
    /// level kept keeps its buckets, a new one is built from the rows
    /// where they are kept and, where not, from a level whose buckets
    /// divide its own. Refused ([`Error::Conflict`]) where the new levels
    /// could not hold data whose rows are gone, and to stop downsampling
    /// a database whose rows went; ([`Error::Config`]) in the
    /// `clickhouse` storage mode and with `flush.concurrency` above 1.
    pub async fn set_downsampling(&self, db: &str, setting: DownsamplingSetting) -> Result<()> {
        let shared = self.shared.open()?;
        if shared.engine.cluster.is_some() {
            return Err(Error::Config(
                "SET DOWNSAMPLING is not available in the clickhouse storage mode: give every \
                 node the levels in its configuration file ([downsampling.databases])"
                    .to_owned(),
            ));
        }
        let downsampler = &shared.downsampler;
        // As the configuration's check says: passes find new rows by block.
        if matches!(setting, DownsamplingSetting::Levels(_)) && shared.config.flush.concurrency != 1
        {
            return Err(Error::Config(
                "downsampling needs flush.concurrency = 1".to_owned(),
            ));
        }
        downsampler.set(db, setting).await?;
        let downsampled = downsampler.policies.is_downsampled(db);
        shared.catalog.set_downsampled(db, downsampled);
        Ok(())
    }

    /// The levels `db` is downsampled at, if it is, and whether a
    /// statement set that ([`set_downsampling`](Self::set_downsampling);
    /// else the configuration file did).
    pub fn downsampling(&self, db: &str) -> (Option<Downsampling>, bool) {
        let downsampler = &self.shared.downsampler;
        (
            downsampler.policies.policy(db),
            downsampler.policies.is_set(db),
        )
    }

    /// Brings the rollups of every downsampled database up to date now: the
    /// pass the background task makes every
    /// [`DownsamplingConfig::period`](crate::DownsamplingConfig::period).
    pub async fn downsample(&self) -> Result<()> {
        self.shared.open()?.downsampler.pass().await.map(|_| ())
    }
}
