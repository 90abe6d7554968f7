//! Per-table batching: logged rows wait here until their table flushes.
//!
//! The appender hands each logged write's rows for this table over, in log
//! order, tagged with the write's lsn. The table's flusher takes everything
//! pending at once and inserts it with one statement; while it does, new
//! rows gather for the next flush, so batches grow with the load instead of
//! the number of inserts. Because rows arrive in log order and a flush
//! takes all of them, a flush carries exactly this table's rows of the
//! records `first..=last` of its lsns — the range that names the insert.

use std::sync::Mutex;
use std::time::Instant;

use arrow::record_batch::RecordBatch;
use tokio::sync::{oneshot, Notify, OwnedSemaphorePermit};

use std::sync::Arc;

use crate::catalog::Table;
use crate::config::FlushPolicy;
use crate::error::Error;
use crate::wal::Lsn;

/// What a waiter learns: success, or why the flush failed.
pub(crate) type FlushOutcome = std::result::Result<(), Arc<Error>>;

/// One table's rows in a write.
#[derive(Debug)]
pub(crate) struct TablePart {
    pub(crate) table: Arc<Table>,
    /// The table's batcher, which takes the rows once they are logged.
    pub(crate) batcher: Arc<Batcher>,
    pub(crate) chunks: Vec<RecordBatch>,
    pub(crate) bytes: usize,
    /// Memory reserved for the chunks, released once they are inserted.
    pub(crate) permit: OwnedSemaphorePermit,
    /// For a `visible` write: answered when the flush carrying these rows
    /// has committed (and the flush is asked for at once).
    pub(crate) visible: Option<oneshot::Sender<FlushOutcome>>,
}

/// Rows and waiters taken by one flush.
#[derive(Debug, Default)]
pub(crate) struct Flush {
    pub(crate) chunks: Vec<RecordBatch>,
    /// Lsn of each write whose rows the flush carries, ascending.
    pub(crate) lsns: Vec<Lsn>,
    pub(crate) rows: usize,
    /// Memory reserved for the chunks, released once they are inserted.
    pub(crate) permits: Vec<OwnedSemaphorePermit>,
    pub(crate) waiters: Vec<oneshot::Sender<FlushOutcome>>,
}

#[derive(Debug, Default)]
struct Pending {
    flush: Flush,
    bytes: usize,
    /// When the oldest pending chunk arrived.
    since: Option<Instant>,
    /// Someone asked for a flush now, whatever the policy says.
    forced: bool,
    closed: bool,
}

/// The pending rows of one table.
#[derive(Debug, Default)]
pub(crate) struct Batcher {
    pending: Mutex<Pending>,
    wake: Notify,
}

impl Batcher {
    /// Adds one logged write's rows for this table. A part with a waiter
    /// (a `visible` write) asks for a flush now.
    pub(crate) fn append(&self, lsn: Lsn, part: TablePart) {
        let mut pending = self.pending.lock().unwrap();
        let flush = &mut pending.flush;
        flush.rows += part.chunks.iter().map(RecordBatch::num_rows).sum::<usize>();
        flush.chunks.extend(part.chunks);
        flush.lsns.push(lsn);
        flush.permits.push(part.permit);
        if let Some(waiter) = part.visible {
            flush.waiters.push(waiter);
            pending.forced = true;
        }
        pending.bytes += part.bytes;
        pending.since.get_or_insert_with(Instant::now);
        drop(pending);
        self.wake.notify_one();
    }

    /// Asks for a flush now; the receiver resolves when it is done — after
    /// any flush already running, since it queues behind it.
    pub(crate) fn request_flush(&self) -> oneshot::Receiver<FlushOutcome> {
        let (tx, rx) = oneshot::channel();
        let mut pending = self.pending.lock().unwrap();
        if pending.closed && pending.flush.rows == 0 {
            let _ = tx.send(Ok(()));
            return rx;
        }
        pending.flush.waiters.push(tx);
        pending.forced = true;
        drop(pending);
        self.wake.notify_one();
        rx
    }

    /// The flusher writes what is pending and stops.
    pub(crate) fn close(&self) {
        self.pending.lock().unwrap().closed = true;
        self.wake.notify_one();
    }

    /// Waits until a flush is due under `policy` and takes it; `None` once
    /// the batcher is closed and empty.
    pub(crate) async fn next_flush(&self, policy: &FlushPolicy) -> Option<Flush> {
        loop {
            let deadline = {
                let mut pending = self.pending.lock().unwrap();
                let has_work = pending.flush.rows > 0 || !pending.flush.waiters.is_empty();
                let due = pending.forced
                    || pending.closed
                    || pending.flush.rows >= policy.max_rows
                    || pending.bytes >= policy.max_bytes
                    || pending
                        .since
                        .is_some_and(|since| since.elapsed() >= policy.max_age);
                if has_work && due {
                    pending.forced = false;
                    pending.since = None;
                    pending.bytes = 0;
                    return Some(std::mem::take(&mut pending.flush));
                }
                if pending.closed {
                    return None;
                }
                pending.since.map(|since| since + policy.max_age)
            };
            match deadline {
                Some(deadline) => {
                    tokio::select! {
                        _ = self.wake.notified() => {}
                        _ = tokio::time::sleep_until(deadline.into()) => {}
                    }
                }
                None => self.wake.notified().await,
            }
        }
    }
}
