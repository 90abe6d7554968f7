//! Counters of what the ingestor did, for a front end to export (the
//! server renders them at `/metrics`). Plain atomics: cheap to bump on the
//! hot path, read without locks.

use std::sync::atomic::{AtomicU64, Ordering};

/// A histogram with fixed upper bounds (cumulative counts are computed when
/// read, as Prometheus expects).
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    /// One count per bound, plus one for values above the last.
    counts: Vec<AtomicU64>,
    /// Sum of the observed values, in millionths.
    sum_micros: AtomicU64,
}

impl Histogram {
    /// A histogram with these upper bounds (ascending).
    pub fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_micros: AtomicU64::new(0),
        }
    }

    /// Records one value.
    pub fn observe(&self, value: f64) {
        let i = self
            .bounds
            .iter()
            .position(|&b| value <= b)
            .unwrap_or(self.bounds.len());
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        self.sum_micros
            .fetch_add((value * 1e6) as u64, Ordering::Relaxed);
    }

    /// `(upper bound, cumulative count)` per bucket, the last bound infinite.
    pub fn buckets(&self) -> Vec<(f64, u64)> {
        let mut total = 0;
        self.counts
            .iter()
            .enumerate()
            .map(|(i, count)| {
                total += count.load(Ordering::Relaxed);
                (self.bounds.get(i).copied().unwrap_or(f64::INFINITY), total)
            })
            .collect()
    }

    /// Sum of the observed values.
    pub fn sum(&self) -> f64 {
        self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6
    }

    /// Number of observations.
    pub fn count(&self) -> u64 {
        self.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }
}

/// Everything counted by an [`Ingestor`](crate::Ingestor).
#[derive(Debug)]
pub struct IngestStats {
    /// Lines stored.
    pub lines_accepted: AtomicU64,
    /// Lines rejected.
    pub lines_rejected: AtomicU64,
    /// Flushes that succeeded.
    pub flushes: AtomicU64,
    /// Flushes that failed (their writers got an error).
    pub flush_errors: AtomicU64,
    /// Flushes that went to a Buffer table rather than the MergeTree.
    pub buffered_flushes: AtomicU64,
    /// Rows per flush.
    pub flush_rows: Histogram,
    /// Seconds per flush, series commit and insert.
    pub flush_seconds: Histogram,
    /// Seconds writers waited for an engine connection.
    pub connection_wait_seconds: Histogram,
    /// Series rows committed.
    pub series_created: AtomicU64,
    /// Engine errors of any kind.
    pub engine_errors: AtomicU64,
}

impl Default for IngestStats {
    fn default() -> Self {
        IngestStats {
            lines_accepted: AtomicU64::new(0),
            lines_rejected: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
            flush_errors: AtomicU64::new(0),
            buffered_flushes: AtomicU64::new(0),
            flush_rows: Histogram::new(&[
                100.0,
                1_000.0,
                10_000.0,
                50_000.0,
                100_000.0,
                200_000.0,
                500_000.0,
                1_000_000.0,
            ]),
            flush_seconds: Histogram::new(&[
                0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
            ]),
            connection_wait_seconds: Histogram::new(&[0.0001, 0.001, 0.01, 0.1, 1.0]),
            series_created: AtomicU64::new(0),
            engine_errors: AtomicU64::new(0),
        }
    }
}

impl IngestStats {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}
