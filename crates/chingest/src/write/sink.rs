//! Where flushed rows land. The flusher hands a [`Sink`] a database's new
//! series rows, then a table's facts under the deduplication token of
//! their log range; the sink stores each exactly once per token and
//! durably before it answers. [`EmbeddedSink`] is the embedded engine's
//! MergeTrees on this machine; the log, the batchers, the tokens and the
//! replay do not depend on which sink it is. [`ClusterSink`] is the
//! shards of a ClickHouse cluster (the `clickhouse` storage mode).

use std::sync::Arc;

use arrow::array::TimestampNanosecondArray;
use arrow::record_batch::RecordBatch;

use crate::cluster::{self, Cluster};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::last_value::rebuild::BoxFuture;
use crate::layout::names::TableNames;
use crate::layout::schema::TableSchema;
use crate::write::chunk;

/// One table's flushed facts: the chunks of its log range merged into one
/// batch of the table's columns. A flush keeps this batch for its retries,
/// not the chunks, so while it inserts it holds its rows once (beside the
/// engine's copy).
#[derive(Debug, Clone)]
pub(crate) struct Facts {
    /// The storage table they go to.
    pub(crate) table: String,
    pub(crate) batch: RecordBatch,
}

impl Facts {
    /// Merges `chunks` for the table `schema` describes, in the blocking
    /// pool (it copies every row); `None` without chunks.
    pub(crate) async fn merge(
        schema: Arc<TableSchema>,
        chunks: Vec<RecordBatch>,
    ) -> Result<Option<Facts>> {
        if chunks.is_empty() {
            return Ok(None);
        }
        let table = schema.names.storage_table.clone();
        let batch = tokio::task::spawn_blocking(move || chunk::merge(&schema, chunks))
            .await
            .map_err(|e| Error::Internal(format!("merging task failed: {e}")))?;
        Ok(Some(Facts { table, batch }))
    }

    /// The time span of the rows, `[first, last + 1)` in ns; `None`
    /// without rows.
    pub(crate) fn span(&self) -> Option<(i64, i64)> {
        let times = self
            .batch
            .column_by_name("time")?
            .as_any()
            .downcast_ref::<TimestampNanosecondArray>()?;
        let (first, last) = (arrow::compute::min(times)?, arrow::compute::max(times)?);
        Some((first, last.saturating_add(1)))
    }
}

/// Stores flushed rows.
pub(crate) trait Sink: Send + Sync + std::fmt::Debug {
    /// Stores series rows (`series_id`, `measurement`, `tags`) in the
    /// database's series `table`, durably. Series rows are idempotent (the
    /// table keeps one per id), so a repeat needs no token.
    fn insert_series(&self, table: String, batch: RecordBatch) -> BoxFuture<'_, Result<()>>;

    /// Stores `facts` once per `token`: an insert repeated with the same
    /// token (a retry, a replay after a crash) stores nothing again.
    /// Durable when it answers.
    fn insert_facts(&self, facts: Facts, token: String) -> BoxFuture<'_, Result<()>>;

    /// On replay: whether the newest insert into the table `names` names
    /// was lost by a crash although its token would make its repetition
    /// a no-op (then it is repeated under a new token).
    fn last_insert_lost(&self, names: TableNames) -> BoxFuture<'_, Result<bool>>;
}

/// The embedded engine: inserts on a pooled connection, each followed by
/// the sync of the table's new part and deduplication log.
#[derive(Debug)]
pub(crate) struct EmbeddedSink {
    engine: Arc<Engine>,
}

impl EmbeddedSink {
    pub(crate) fn new(engine: Arc<Engine>) -> EmbeddedSink {
        EmbeddedSink { engine }
    }
}

impl Sink for EmbeddedSink {
    fn insert_series(&self, table: String, batch: RecordBatch) -> BoxFuture<'_, Result<()>> {
        let disk = Arc::clone(&self.engine.disk);
        Box::pin(
            self.engine
                .run(move |conn| disk.insert_durably(conn, &table, batch, None)),
        )
    }

    fn insert_facts(&self, facts: Facts, token: String) -> BoxFuture<'_, Result<()>> {
        let disk = Arc::clone(&self.engine.disk);
        // Durable before the caller logs it committed.
        Box::pin(
            self.engine.run(move |conn| {
                disk.insert_durably(conn, &facts.table, facts.batch, Some(&token))
            }),
        )
    }

    fn last_insert_lost(&self, names: TableNames) -> BoxFuture<'_, Result<bool>> {
        let disk = Arc::clone(&self.engine.disk);
        Box::pin(
            self.engine
                .run(move |conn| disk.last_insert_lost(conn, &names)),
        )
    }
}

/// The shards of a ClickHouse cluster: each batch is split by the shard of
/// its series ([`cluster::shard_of`]) and sent to every shard that gets
/// rows, at once. A fact insert carries the flush's token plus the shard's
/// index, so each shard stores its share once however often the flush is
/// repeated; it is stored when every shard has answered, and a failure on
/// any shard fails the whole insert (to be repeated, whole, under the same
/// tokens).
#[derive(Debug)]
pub(crate) struct ClusterSink {
    cluster: Arc<Cluster>,
}

impl ClusterSink {
    pub(crate) fn new(cluster: Arc<Cluster>) -> ClusterSink {
        ClusterSink { cluster }
    }

    /// Sends each shard its share of `batch`, with `token` plus the
    /// shard's index if given.
    async fn insert(&self, table: &str, batch: RecordBatch, token: Option<&str>) -> Result<()> {
        let shards = self.cluster.shards();
        let encoded = tokio::task::spawn_blocking(move || cluster::encode_by_shard(&batch, shards))
            .await
            .map_err(|e| Error::Internal(format!("encoding task failed: {e}")))??;
        let mut inserts = tokio::task::JoinSet::new();
        for insert in encoded {
            let cluster = Arc::clone(&self.cluster);
            let table = table.to_owned();
            let token = token.map(|t| format!("{t}:{}", insert.shard));
            inserts.spawn(async move { cluster.insert(&table, &insert, token.as_deref()).await });
        }
        let mut first_error = None;
        while let Some(result) = inserts.join_next().await {
            let result = result
                .map_err(|e| Error::Internal(format!("shard insert failed: {e}")))
                .and_then(|inserted| inserted);
            if let Err(err) = result {
                first_error.get_or_insert(err);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl Sink for ClusterSink {
    fn insert_series(&self, table: String, batch: RecordBatch) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move { self.insert(&table, batch, None).await })
    }

    fn insert_facts(&self, facts: Facts, token: String) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move { self.insert(&facts.table, facts.batch, Some(&token)).await })
    }

    /// The shards' durability is their servers' (their own fsync
    /// settings): an insert they acknowledged is taken as kept.
    fn last_insert_lost(&self, _names: TableNames) -> BoxFuture<'_, Result<bool>> {
        Box::pin(async { Ok(false) })
    }
}
