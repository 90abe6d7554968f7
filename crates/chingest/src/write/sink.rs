//! Where flushed rows land. The flusher hands a [`Sink`] a database's new
//! series rows, then a table's facts under the deduplication token of
//! their log range; the sink stores each exactly once per token and
//! durably before it answers. [`EmbeddedSink`] is the embedded engine's
//! MergeTrees on this machine; the log, the batchers, the tokens and the
//! replay do not depend on which sink it is.

use std::sync::Arc;

use arrow::record_batch::RecordBatch;

use crate::engine::Engine;
use crate::error::Result;
use crate::last_value::BoxFuture;
use crate::layout::schema::TableSchema;
use crate::write::chunk;

/// One table's flushed facts: the chunks of its log range, merged into
/// one batch of the table's schema where the sink stores them (merging is
/// work for the blocking pool, not for a runtime worker).
#[derive(Debug)]
pub(crate) struct Facts {
    pub(crate) schema: Arc<TableSchema>,
    pub(crate) chunks: Vec<RecordBatch>,
}

impl Facts {
    /// The storage table they go to.
    pub(crate) fn table(&self) -> &str {
        &self.schema.names.storage_table
    }

    /// The chunks as one batch of the table's columns.
    pub(crate) fn merge(self) -> RecordBatch {
        chunk::merge(&self.schema, self.chunks)
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
        Box::pin(self.engine.run(move |conn| {
            let table = facts.table().to_owned();
            disk.insert_durably(conn, &table, facts.merge(), Some(&token))
        }))
    }
}
