//! The queue in front of the read-only connections: at most
//! `QueryLimits::max_concurrent` untrusted statements run at once, up to
//! `max_queued` more wait for a slot in arrival order for up to
//! `queue_timeout`, and only past that is a statement refused. Refusing at
//! once whenever every slot was busy turned a dashboard's panels, which ask
//! together, into errors; even a client asking one statement at a time
//! could arrive before its previous statement's slot was back.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError};

use crate::config::QueryLimits;
use crate::error::{Error, Result};
use crate::stats::IngestStats;

/// The delay a refused caller is told to wait before it asks again.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// The slots of untrusted statements and the queue for them.
#[derive(Debug)]
pub(crate) struct QueryQueue {
    /// One permit per slot; tokio's semaphore hands released permits to
    /// its waiters first come, first served.
    slots: Arc<Semaphore>,
    max_concurrent: usize,
    max_queued: usize,
    timeout: Duration,
    /// Statements waiting now.
    waiting: AtomicUsize,
    stats: Arc<IngestStats>,
}

/// A running statement's slot; dropping it hands the slot to the first
/// statement in the queue.
#[derive(Debug)]
pub(crate) struct QuerySlot {
    _permit: OwnedSemaphorePermit,
    stats: Arc<IngestStats>,
}

impl Drop for QuerySlot {
    fn drop(&mut self) {
        self.stats.queries_running.fetch_sub(1, Ordering::Relaxed);
    }
}

impl QueryQueue {
    /// The slots and queue `limits` ask for, counted in `stats`.
    pub(crate) fn new(limits: &QueryLimits, stats: Arc<IngestStats>) -> QueryQueue {
        QueryQueue {
            slots: Arc::new(Semaphore::new(limits.max_concurrent)),
            max_concurrent: limits.max_concurrent,
            max_queued: limits.max_queued,
            timeout: limits.queue_timeout,
            waiting: AtomicUsize::new(0),
            stats,
        }
    }

    /// A slot: at once if one is free, else after waiting in the queue;
    /// [`Error::TooManyQueries`] when the queue is full,
    /// [`Error::QueryQueueTimeout`] when no slot came free in time.
    /// Dropping the future while it waits leaves the queue: a caller that
    /// went away holds no place.
    pub(crate) async fn enter(&self) -> Result<QuerySlot> {
        let permit = match Arc::clone(&self.slots).try_acquire_owned() {
            Ok(permit) => permit,
            Err(TryAcquireError::NoPermits) => self.wait().await?,
            Err(TryAcquireError::Closed) => return Err(Error::Closed),
        };
        IngestStats::add(&self.stats.queries_running, 1);
        Ok(QuerySlot {
            _permit: permit,
            stats: Arc::clone(&self.stats),
        })
    }

    /// Waits in the queue, if it has room, for the next free slot.
    async fn wait(&self) -> Result<OwnedSemaphorePermit> {
        let Some(place) = Place::take(self) else {
            IngestStats::add(&self.stats.queries_refused_queue_full, 1);
            return Err(Error::TooManyQueries {
                running: self.max_concurrent,
                queued: self.max_queued,
                retry_after: RETRY_AFTER,
            });
        };
        let acquire = Arc::clone(&self.slots).acquire_owned();
        let waited = tokio::time::timeout(self.timeout, acquire).await;
        place.leave();
        match waited {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_)) => Err(Error::Closed),
            Err(_) => {
                IngestStats::add(&self.stats.queries_refused_queue_timeout, 1);
                Err(Error::QueryQueueTimeout {
                    running: self.max_concurrent,
                    waited: self.timeout,
                    retry_after: RETRY_AFTER,
                })
            }
        }
    }

    /// Ends the waits of the queued statements, and any later
    /// [`enter`](Self::enter), with [`Error::Closed`].
    pub(crate) fn close(&self) {
        self.slots.close();
    }
}

/// A statement's place in the queue, counted from when it took it until
/// it leaves: with a slot, refused, or dropped with its caller's future.
struct Place<'a> {
    queue: &'a QueryQueue,
    since: Instant,
    /// It left by [`leave`](Self::leave), not by its future being dropped.
    left: bool,
}

impl<'a> Place<'a> {
    /// A place, unless `max_queued` statements already wait.
    fn take(queue: &'a QueryQueue) -> Option<Place<'a>> {
        queue
            .waiting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < queue.max_queued).then_some(n + 1)
            })
            .ok()?;
        IngestStats::add(&queue.stats.queries_queued, 1);
        IngestStats::add(&queue.stats.queries_waiting, 1);
        Some(Place {
            queue,
            since: Instant::now(),
            left: false,
        })
    }

    /// Leaves the queue, with a slot or without.
    fn leave(mut self) {
        self.left = true;
    }
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        let stats = &self.queue.stats;
        self.queue.waiting.fetch_sub(1, Ordering::AcqRel);
        stats.queries_waiting.fetch_sub(1, Ordering::Relaxed);
        stats
            .query_queue_wait_seconds
            .observe(self.since.elapsed().as_secs_f64());
        if !self.left {
            IngestStats::add(&stats.queries_abandoned_in_queue, 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Waker};

    use super::*;

    fn queue(max_concurrent: usize, max_queued: usize, timeout_ms: u64) -> Arc<QueryQueue> {
        let limits = QueryLimits {
            max_concurrent,
            max_queued,
            queue_timeout: Duration::from_millis(timeout_ms),
            ..QueryLimits::default()
        };
        Arc::new(QueryQueue::new(&limits, Arc::default()))
    }

    fn load(counter: &std::sync::atomic::AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    /// Whether `future` is still pending after one poll.
    fn pending<F: Future>(future: std::pin::Pin<&mut F>) -> bool {
        future
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_pending()
    }

    #[tokio::test]
    async fn past_the_slots_statements_wait_and_past_the_queue_they_are_refused() {
        let queue = queue(1, 2, 10_000);
        let running = queue.enter().await.unwrap();
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let queue = Arc::clone(&queue);
                tokio::spawn(async move { queue.enter().await.map(drop) })
            })
            .collect();
        while queue.waiting.load(Ordering::Acquire) < 2 {
            tokio::task::yield_now().await;
        }
        let refused = queue.enter().await.unwrap_err();
        assert!(
            matches!(
                refused,
                Error::TooManyQueries {
                    running: 1,
                    queued: 2,
                    ..
                }
            ),
            "{refused}"
        );
        // Each waiter gets the slot in turn once the running one is done.
        drop(running);
        for waiter in waiters {
            waiter.await.unwrap().unwrap();
        }
        let stats = &queue.stats;
        assert_eq!(load(&stats.queries_queued), 2);
        assert_eq!(load(&stats.queries_refused_queue_full), 1);
        assert_eq!(load(&stats.queries_waiting), 0);
        assert_eq!(load(&stats.queries_running), 0);
        assert_eq!(stats.query_queue_wait_seconds.count(), 2);
    }

    #[tokio::test]
    async fn a_wait_past_the_timeout_is_refused_and_leaves_the_queue() {
        let queue = queue(1, 4, 50);
        let _running = queue.enter().await.unwrap();
        let started = Instant::now();
        let refused = queue.enter().await.unwrap_err();
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert!(
            matches!(refused, Error::QueryQueueTimeout { running: 1, .. }),
            "{refused}"
        );
        assert_eq!(queue.waiting.load(Ordering::Acquire), 0);
        assert_eq!(load(&queue.stats.queries_refused_queue_timeout), 1);
        assert_eq!(load(&queue.stats.queries_abandoned_in_queue), 0);
    }

    #[tokio::test]
    async fn a_caller_that_goes_away_leaves_its_place() {
        let queue = queue(1, 1, 10_000);
        let running = queue.enter().await.unwrap();
        {
            let mut waiting = pin!(queue.enter());
            assert!(pending(waiting.as_mut()));
            assert_eq!(load(&queue.stats.queries_waiting), 1);
        }
        assert_eq!(queue.waiting.load(Ordering::Acquire), 0);
        assert_eq!(load(&queue.stats.queries_waiting), 0);
        assert_eq!(load(&queue.stats.queries_abandoned_in_queue), 1);
        // Its place is free for the next, which gets the slot.
        let mut next = pin!(queue.enter());
        assert!(pending(next.as_mut()));
        drop(running);
        next.await.unwrap();
    }

    #[tokio::test]
    async fn without_a_queue_a_busy_slot_refuses_at_once_and_closing_ends_waits() {
        let unqueued = queue(1, 0, 0);
        let _running = unqueued.enter().await.unwrap();
        assert!(matches!(
            unqueued.enter().await,
            Err(Error::TooManyQueries { queued: 0, .. })
        ));

        let queue = queue(1, 1, 10_000);
        let _running = queue.enter().await.unwrap();
        let mut waiting = pin!(queue.enter());
        assert!(pending(waiting.as_mut()));
        queue.close();
        assert!(matches!(waiting.await, Err(Error::Closed)));
        assert!(matches!(queue.enter().await, Err(Error::Closed)));
    }
}
