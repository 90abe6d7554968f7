//! Flushers: one task per table, inserting its batcher's flushes through
//! the [sink](crate::write::sink) exactly once.
//!
//! Each insert is announced in the log first (`FlushStarted`, synced) and
//! carries the deduplication token of its lsn range; once it commits,
//! `FlushCommitted` is logged and its lsns count as done for the
//! checkpoint. A crash anywhere in between makes replay repeat the insert
//! with the same token, which the engine ignores if it had landed. A
//! failed insert is retried with backoff: its rows stay in the log (and in
//! memory) until it lands.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, Semaphore};
use tracing::Instrument;

use crate::catalog::{Database, Table};
use crate::config::FlushPolicy;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::stats::IngestStats;
use crate::wal::FlushRange;
use crate::write::appender::Appender;
use crate::write::batcher::{Batcher, Flush, FlushOutcome};
use crate::write::sink::{Facts, Sink};

/// First wait before retrying a failed insert; it doubles up to the max.
const RETRY_FIRST: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(5);

/// What every flush needs: the engine (its catalog's tables, the stats),
/// where rows land, the log it marks flushes in, the policy, and whether
/// the ingestor is closing.
#[derive(Debug)]
pub(crate) struct FlushContext {
    pub(crate) engine: Arc<Engine>,
    pub(crate) sink: Box<dyn Sink>,
    pub(crate) appender: Appender,
    pub(crate) policy: FlushPolicy,
    /// Held shared by every insert of a flush, exclusively by a backup or
    /// snapshot while it reads the tables: they see every table at the
    /// same point of the log, no flush half in.
    pub(crate) inserts: tokio::sync::RwLock<()>,
    /// Held shared while a write is handed to the log, exclusively while a
    /// backup or snapshot inserts everything logged: then every table is
    /// at the same point of the log.
    pub(crate) logging: tokio::sync::RwLock<()>,
    /// Told the table and time span of each fact insert, before it is
    /// made and again once it is durable (what downsampling must read
    /// from the rows until a pass has rolled them up).
    pub(crate) on_insert: InsertObserver,
    closed: AtomicBool,
}

/// What an [`InsertObserver`] calls: `(database, storage table, [first,
/// last + 1) ns)`.
type ObserveInsert = dyn Fn(&str, &str, (i64, i64)) + Send + Sync;

/// Told the database, storage table and time span of each fact insert.
#[derive(Clone)]
pub(crate) struct InsertObserver(pub(crate) Arc<ObserveInsert>);

impl std::fmt::Debug for InsertObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InsertObserver")
    }
}

impl FlushContext {
    pub(crate) fn new(
        engine: Arc<Engine>,
        sink: Box<dyn Sink>,
        appender: Appender,
        policy: FlushPolicy,
        on_insert: InsertObserver,
    ) -> Self {
        FlushContext {
            engine,
            sink,
            appender,
            policy,
            inserts: tokio::sync::RwLock::new(()),
            logging: tokio::sync::RwLock::new(()),
            on_insert,
            closed: AtomicBool::new(false),
        }
    }

    /// Marks the ingestor closing; returns whether it already was.
    pub(crate) fn close(&self) -> bool {
        self.closed.swap(true, Ordering::SeqCst)
    }

    /// Whether [`close`](Self::close) was called.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

/// The deduplication token of an insert: the log's id and the lsn range.
pub(crate) fn dedup_token(log_id: u64, range: &FlushRange) -> String {
    format!("{log_id:016x}:{}:{}", range.first, range.last)
}

/// Stores the database's pending series rows through the sink; counted.
pub(crate) async fn commit_series(ctx: &FlushContext, db: &Database) -> Result<()> {
    let series_table = db.series_table.clone();
    let stored = db
        .series
        .commit(|batch| ctx.sink.insert_series(series_table, batch))
        .await?;
    IngestStats::add(&ctx.engine.stats.series_created, stored as u64);
    Ok(())
}

/// Stores the database's pending series, then `facts` (if any) under
/// `token` (see [`dedup_token`]), through the sink; both durable when this
/// returns.
pub(crate) async fn insert(
    ctx: &FlushContext,
    db: &Database,
    token: String,
    facts: Option<Facts>,
) -> Result<()> {
    let _inserting = ctx.inserts.read().await;
    commit_series(ctx, db).await?;
    let Some(facts) = facts else {
        return Ok(());
    };
    // Before and after: a reader that saw neither report cannot see the
    // rows, and one that comes after a pass took the first sees the second.
    let observed = facts.span().map(|span| (span, facts.table.clone()));
    let observe = ctx.on_insert.0.as_ref();
    if let Some((span, table)) = &observed {
        observe(&db.name, table, *span);
    }
    ctx.sink.insert_facts(facts, token).await?;
    if let Some((span, table)) = &observed {
        observe(&db.name, table, *span);
    }
    Ok(())
}

/// One table's flusher: takes each due flush of its batcher and inserts
/// it, until the batcher closes. Holds the context only while flushing, so
/// dropping every [`Ingestor`](crate::Ingestor) ends it.
pub(crate) async fn run(
    ctx: Weak<FlushContext>,
    db: Arc<Database>,
    table: Arc<Table>,
    batcher: Arc<Batcher>,
) {
    let Some(policy) = ctx.upgrade().map(|ctx| ctx.policy.clone()) else {
        return;
    };
    // A slot is taken before the next flush is: while every slot is busy,
    // rows keep gathering into the flush after.
    let slots = Arc::new(Semaphore::new(policy.concurrency.max(1)));
    let mut running = tokio::task::JoinSet::new();
    loop {
        let slot = Arc::clone(&slots)
            .acquire_owned()
            .await
            .expect("never closed");
        let Some(flush) = batcher.next_flush(&policy).await else {
            break;
        };
        let (ctx, db, table) = (ctx.clone(), Arc::clone(&db), Arc::clone(&table));
        running.spawn(async move {
            match ctx.upgrade() {
                Some(ctx) => flush_once(&ctx, &db, &table, flush).await,
                None => {
                    let closed = Arc::new(Error::Closed);
                    for waiter in flush.waiters {
                        let _ = waiter.send(Err(Arc::clone(&closed)));
                    }
                }
            }
            drop(slot);
        });
        while running.try_join_next().is_some() {}
    }
    while running.join_next().await.is_some() {}
}

/// Inserts one flush, retrying until it lands (or the ingestor closes:
/// then its rows are left in the log for the next open).
async fn flush_once(ctx: &FlushContext, db: &Arc<Database>, table: &Table, flush: Flush) {
    let Flush {
        chunks,
        lsns,
        rows,
        permits,
        mut waiters,
    } = flush;
    let stats = &ctx.engine.stats;
    let (Some(&first), Some(&last)) = (lsns.first(), lsns.last()) else {
        // Asked for while nothing was pending.
        for waiter in waiters {
            let _ = waiter.send(Ok(()));
        }
        return;
    };
    let range = FlushRange {
        table: table.id.clone(),
        first,
        last,
    };
    let span = tracing::debug_span!("flush", table = %table.schema().names.storage_table, rows, first, last);
    let started = Instant::now();
    let facts = match Facts::merge(table.schema(), chunks).await {
        Ok(facts) => facts,
        Err(err) => {
            // Only a panic while merging gets here: the rows stay in the
            // log (their lsns never complete) for the next open.
            tracing::error!(db = %db.name, table = %range.table.measurement, %err,
                "merging a flush failed; its rows stay in the write-ahead log");
            IngestStats::add(&stats.flush_errors, 1);
            let err = Arc::new(err);
            for waiter in waiters {
                let _ = waiter.send(Err(Arc::clone(&err)));
            }
            return;
        }
    };
    let mut announced = false;
    let mut backoff = RETRY_FIRST;
    loop {
        let attempt = async {
            if !announced {
                ctx.appender.flush_started(range.clone()).await?;
                announced = true;
            }
            let token = dedup_token(ctx.appender.log_id(), &range);
            insert(ctx, db, token, facts.clone()).await
        }
        .instrument(span.clone())
        .await;
        let Err(err) = attempt else { break };
        IngestStats::add(&stats.flush_errors, 1);
        IngestStats::add(&stats.flush_failing, 1);
        let err = Arc::new(err);
        for waiter in waiters.drain(..) {
            let _ = waiter.send(Err(Arc::clone(&err)));
        }
        if ctx.is_closed() {
            tracing::error!(db = %db.name, table = %range.table.measurement, %err,
                "insert failed while closing; its rows stay in the write-ahead log for the next open");
            return;
        }
        tracing::error!(db = %db.name, table = %range.table.measurement, %err,
            retry_in_ms = backoff.as_millis() as u64,
            "insert failed; its rows stay in the write-ahead log and it is retried");
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(RETRY_MAX);
    }
    stats
        .flush_failing
        .store(0, std::sync::atomic::Ordering::Relaxed);
    ctx.appender.flush_committed(range);
    for lsn in lsns {
        ctx.appender.progress.complete(lsn);
    }
    drop((facts, permits));
    let elapsed = started.elapsed();
    IngestStats::add(&stats.flushes, 1);
    stats.flush_rows.observe(rows as f64);
    stats.flush_seconds.observe(elapsed.as_secs_f64());
    span.in_scope(|| tracing::debug!(elapsed_ms = elapsed.as_secs_f64() * 1e3, "flushed"));
    for waiter in waiters {
        let _ = waiter.send(Ok(()));
    }
}

/// Waits for the flushes `receivers` answer; the first failure, if any.
pub(crate) async fn await_flushes(receivers: Vec<oneshot::Receiver<FlushOutcome>>) -> Result<()> {
    let mut first_error = None;
    for receiver in receivers {
        match receiver.await {
            Ok(Ok(())) => {}
            Ok(Err(err)) => {
                first_error.get_or_insert(Error::Flush(err));
            }
            Err(_) => {
                first_error.get_or_insert(Error::Closed);
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}
