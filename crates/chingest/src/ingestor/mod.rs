//! [`Ingestor`]: an open engine and everything around it. Opening wires
//! the layers together (`open.rs`: engine, catalog, replay of the log,
//! last-value cache, writer, reader, downsampler); every other method
//! hands its call to the layer that owns it: `write.rs` writes and edits,
//! `read.rs` reads, `admin.rs` databases, policies, downsampling settings,
//! backups and snapshots, `continuous.rs` continuous queries.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::task::JoinHandle;

use crate::catalog::{Catalog, Table};
use crate::config::{IngestConfig, StorageMode};
use crate::continuous::{ContinuousQueries, ContinuousQuery, PeriodFuture, Window};
use crate::downsample::Downsampler;
use crate::engine::Engine;
use crate::error::Result;
use crate::last_value::rebuild::{BoxFuture, RebuildSource};
use crate::layout::rollup::Aggregate;
use crate::layout::schema::FieldType;
use crate::lease::Lease;
use crate::read::Reader;
use crate::stats::{IngestStats, PartsSummary};
use crate::write::budget::MemoryReservation;
use crate::write::Writer;

mod admin;
mod continuous;
mod open;
mod read;
mod write;

/// An open ingest engine. Cheap to clone; all clones share one engine.
///
/// Must be opened inside a tokio runtime that outlives it (a multi-threaded
/// one: its flushers are tasks there). Calls may come from any runtime; each
/// engine call runs on the calling runtime's blocking pool.
#[derive(Debug, Clone)]
pub struct Ingestor {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    config: Arc<IngestConfig>,
    engine: Arc<Engine>,
    catalog: Arc<Catalog>,
    writer: Arc<Writer>,
    reader: Reader,
    /// In the `clickhouse` storage mode, the task that learns what other
    /// nodes create ([`learn::run`]); aborted on close.
    learner: Mutex<Option<JoinHandle<()>>>,
    /// The rollups of downsampled databases (and in the cluster mode what
    /// is learnt of the shards'); its background task, aborted on close.
    downsampler: Arc<Downsampler>,
    downsampling: Mutex<Option<JoinHandle<()>>>,
    /// The continuous queries; the task that runs them once a runner is
    /// given, aborted on close.
    continuous: Arc<ContinuousQueries>,
    continuous_task: Mutex<Option<JoinHandle<()>>>,
    /// In the `clickhouse` storage mode, the leases callers asked for
    /// ([`Ingestor::holds_lease`]), by table.
    leases: Mutex<HashMap<&'static str, Arc<Lease>>>,
}

impl Shared {
    /// `self`, unless the ingestor is closing.
    fn open(&self) -> Result<&Self> {
        self.writer.open()?;
        Ok(self)
    }
}

/// Rebuilds of the last-value cache read the rows and, where a downsampled
/// table's rows are gone, its rollups.
impl RebuildSource for Shared {
    fn engine(&self) -> &Engine {
        &self.engine
    }

    fn flush_all(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(self.writer.flush_all())
    }

    fn is_closed(&self) -> bool {
        self.writer.open().is_err()
    }

    fn gone_rows(&self, table: &Table, fields: &[(String, FieldType)]) -> Vec<String> {
        let Some(view) = self.downsampler.view(&table.schema().names) else {
            return Vec::new();
        };
        [Aggregate::First, Aggregate::Last]
            .into_iter()
            .flat_map(|at| view.gone_rows_sql(fields, i64::MIN, i64::MAX, at))
            .collect()
    }

    fn rows_from(&self, table: &Table) -> i64 {
        self.downsampler
            .view(&table.schema().names)
            .map_or(i64::MIN, |view| view.rows_from)
    }
}

/// What runs a continuous query's statement over one window and writes
/// its points, each a period: a query language's (InfluxQL's
/// `chingest_influxql::ContinuousQueryRunner`). The library calls it on
/// its schedule, one period at a time, from a task of its own.
pub trait ContinuousQueryRunner: Send + Sync + 'static {
    /// Runs `query` over `window` on `ingestor` and writes what it
    /// answers (through the ingestor's write path, as one write); the
    /// points written. The measurements it writes should take the
    /// `last` duplicate policy unless they have one: a period repeated
    /// after a crash then replaces its points.
    fn run_period<'a>(
        &'a self,
        ingestor: &'a Ingestor,
        query: &'a ContinuousQuery,
        window: Window,
    ) -> PeriodFuture<'a>;
}

impl Ingestor {
    /// What this ingestor has done so far: lines, flushes, series, errors.
    pub fn stats(&self) -> &IngestStats {
        &self.shared.engine.stats
    }

    /// The engine's active parts, their rows and bytes on disk; `None` in
    /// the `clickhouse` storage mode, where the shards keep the parts.
    pub async fn parts(&self) -> Result<Option<PartsSummary>> {
        let shared = self.shared.open()?;
        match shared.config.storage {
            StorageMode::Embedded => shared.reader.parts().await.map(Some),
            StorageMode::ClickHouse(_) => Ok(None),
        }
    }

    /// Bytes held in the memory budget: rows waiting to be inserted, and
    /// reservations such as request bodies being read.
    pub fn buffered_bytes(&self) -> usize {
        self.shared.writer.budget.used()
    }

    /// Reserves `bytes` of the memory budget for data the caller holds on
    /// its way in — a request body while it is read and parsed — so that
    /// many large requests at once are refused with [`Error::Overloaded`]
    /// instead of growing the process. Released when dropped.
    pub async fn reserve_memory(&self, bytes: usize) -> Result<MemoryReservation> {
        let budget = Arc::clone(&self.shared.writer.open()?.budget);
        MemoryReservation::new(budget, bytes).await
    }

    /// The configuration in force (with the data directory resolved).
    pub fn config(&self) -> &IngestConfig {
        &self.shared.config
    }

    /// Inserts everything logged into the engine, advances the log's
    /// checkpoint and closes the engine connections. Writes after this fail
    /// with [`Error::Closed`]; other clones of this ingestor are closed too.
    /// Rows whose insert fails now stay in the log for the next open.
    pub async fn close(&self) -> Result<()> {
        let shared = &self.shared;
        if let Some(learner) = shared.learner.lock().unwrap().take() {
            learner.abort();
        }
        if let Some(task) = shared.downsampling.lock().unwrap().take() {
            task.abort();
        }
        if let Some(task) = shared.continuous_task.lock().unwrap().take() {
            task.abort();
        }
        let Some(checkpointed) = shared.writer.close().await else {
            return Ok(());
        };
        shared.engine.close().await;
        tracing::info!("engine closed");
        checkpointed
    }
}
