//! Per-table batching: rows wait here until their table flushes.
//!
//! Writers append finished chunks (Arrow batches) and, if they want to know
//! when their rows are committed, a waiter. One flusher task per table takes
//! everything pending at once, inserts it with one statement and answers all
//! the waiters with the outcome (group commit). While a flush runs, new rows
//! gather for the next one, so batches grow with the load instead of the
//! number of inserts.

use std::sync::Mutex;
use std::time::Instant;

use arrow::record_batch::RecordBatch;
use tokio::sync::{oneshot, Notify, OwnedSemaphorePermit};

use crate::config::FlushPolicy;
use crate::{Error, Result};

/// What a waiter learns: success, or the error message of the failed flush.
pub(crate) type FlushOutcome = std::result::Result<(), String>;

/// Rows and waiters taken by one flush.
#[derive(Debug, Default)]
pub(crate) struct Flush {
    pub(crate) chunks: Vec<RecordBatch>,
    pub(crate) rows: usize,
    /// Memory reserved for the chunks, released once they are written.
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
    /// Adds one write's chunks (`bytes` bytes in all), together so that one
    /// flush carries all of them. With `wait`, returns a receiver that
    /// resolves once that flush has finished.
    pub(crate) fn append(
        &self,
        chunks: Vec<RecordBatch>,
        bytes: usize,
        permit: OwnedSemaphorePermit,
        wait: bool,
    ) -> Result<Option<oneshot::Receiver<FlushOutcome>>> {
        let mut pending = self.pending.lock().unwrap();
        if pending.closed {
            return Err(Error::Closed);
        }
        pending.flush.rows += chunks.iter().map(RecordBatch::num_rows).sum::<usize>();
        pending.flush.chunks.extend(chunks);
        pending.flush.permits.push(permit);
        pending.bytes += bytes;
        pending.since.get_or_insert_with(Instant::now);
        let receiver = wait.then(|| {
            let (tx, rx) = oneshot::channel();
            pending.flush.waiters.push(tx);
            rx
        });
        drop(pending);
        self.wake.notify_one();
        Ok(receiver)
    }

    /// Asks for a flush now; the receiver resolves when it is done (at once
    /// if nothing is pending and no flush runs).
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

    /// Refuses further appends; the flusher writes what is pending and stops.
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
                        .is_some_and(|since| since.elapsed() >= policy.linger);
                if has_work && due {
                    pending.forced = false;
                    pending.since = None;
                    pending.bytes = 0;
                    return Some(std::mem::take(&mut pending.flush));
                }
                if pending.closed {
                    return None;
                }
                pending.since.map(|since| since + policy.linger)
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
