//! The memory budget: bytes held between a request's arrival and the insert
//! of its rows — request bodies while they are read and parsed, built rows
//! until they are in the engine. Counted in KiB permits of one semaphore;
//! a reservation that cannot be had within the configured wait fails with
//! [`Error::Overloaded`], so load beyond the budget is refused, not held.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::{Error, Result};

/// The budget shared by everything an ingestor holds.
#[derive(Debug)]
pub(crate) struct MemoryBudget {
    permits: Arc<Semaphore>,
    limit_kib: usize,
    limit: usize,
    wait: Duration,
}

impl MemoryBudget {
    /// A budget of `limit` bytes; reservations wait up to `wait` for room.
    pub(crate) fn new(limit: usize, wait: Duration) -> MemoryBudget {
        let limit_kib = limit.div_ceil(1024);
        MemoryBudget {
            permits: Arc::new(Semaphore::new(limit_kib)),
            limit_kib,
            limit,
            wait,
        }
    }

    /// Bytes reserved now.
    pub(crate) fn used(&self) -> usize {
        (self.limit_kib - self.permits.available_permits()) * 1024
    }

    /// Reserves `bytes`, taking what `held` has first and waiting for the
    /// rest like [`reserve`](Self::reserve).
    pub(crate) async fn reserve_from(
        &self,
        held: Option<&mut MemoryReservation>,
        bytes: usize,
    ) -> Result<OwnedSemaphorePermit> {
        let kib = bytes.div_ceil(1024).max(1);
        // A reservation of another ingestor's budget does not cover this one.
        let Some(held) = held.filter(|held| std::ptr::eq(&*held.budget, self)) else {
            return self.reserve(bytes).await;
        };
        let taken = kib.min(held.permit.num_permits());
        let mut permit = held
            .permit
            .split(taken)
            .expect("a permit splits off no more than it holds");
        if taken < kib {
            permit.merge(self.reserve((kib - taken) * 1024).await?);
        }
        Ok(permit)
    }

    /// Reserves `bytes`, waiting for room up to the configured wait.
    pub(crate) async fn reserve(&self, bytes: usize) -> Result<OwnedSemaphorePermit> {
        let overloaded = || Error::Overloaded {
            buffered: self.used(),
            limit: self.limit,
            retry_after: Duration::from_secs(1),
        };
        let kib = bytes.div_ceil(1024).max(1);
        let Ok(kib) = u32::try_from(kib) else {
            return Err(overloaded());
        };
        if kib as usize > self.limit_kib {
            return Err(overloaded());
        }
        let acquire = Arc::clone(&self.permits).acquire_many_owned(kib);
        match tokio::time::timeout(self.wait, acquire).await {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_)) => Err(Error::Closed),
            Err(_) => Err(overloaded()),
        }
    }
}

/// Memory reserved in an ingestor's budget by its caller, for data it holds
/// on the way in (a request body being read, say), released when dropped.
/// See [`Ingestor::reserve_memory`](crate::Ingestor::reserve_memory).
#[derive(Debug)]
pub struct MemoryReservation {
    budget: Arc<MemoryBudget>,
    permit: OwnedSemaphorePermit,
}

impl MemoryReservation {
    pub(crate) async fn new(budget: Arc<MemoryBudget>, bytes: usize) -> Result<Self> {
        let permit = budget.reserve(bytes).await?;
        Ok(MemoryReservation { budget, permit })
    }

    /// Bytes reserved.
    pub fn bytes(&self) -> usize {
        self.permit.num_permits() * 1024
    }

    /// Takes over `other`'s reservation; one of another budget is released.
    pub(crate) fn absorb(&mut self, other: MemoryReservation) {
        if Arc::ptr_eq(&self.budget, &other.budget) {
            self.permit.merge(other.permit);
        }
    }

    /// Reserves `bytes` more, waiting for room like the first reservation.
    pub async fn grow(&mut self, bytes: usize) -> Result<()> {
        let more = self.budget.reserve(bytes).await?;
        self.permit.merge(more);
        Ok(())
    }
}
