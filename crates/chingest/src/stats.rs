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

/// The engine's active parts in chingest's databases (the `system`
/// database aside): what `/metrics` shows as `chingest_engine_parts` and
/// the rest. Many small parts mean inserts faster than merges.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PartsSummary {
    /// Active parts.
    pub parts: u64,
    /// Rows in them.
    pub rows: u64,
    /// Their bytes on disk.
    pub bytes_on_disk: u64,
}

/// One shard of the cluster (the `clickhouse` storage mode), as chingest's
/// requests to it went.
#[derive(Debug, Clone, Default)]
pub struct ShardStats {
    /// Its replicas' URLs.
    pub url: String,
    /// Inserts it stored (series rows and facts).
    pub inserts: u64,
    /// Rows those carried.
    pub rows: u64,
    /// Requests that failed on every replica.
    pub errors: u64,
    /// Failed requests since the last that succeeded: above 0 while the
    /// shard is down or failing, and its rows wait in the log.
    pub failing: u64,
    /// What the last failure said.
    pub last_error: Option<String>,
}

/// One continuous query's periods, as run by this process.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContinuousQueryStats {
    /// Its database.
    pub database: String,
    /// Its name.
    pub name: String,
    /// Periods run (each once, but for one the process was stopped in).
    pub runs: u64,
    /// Periods whose statement failed (passed by) or could not run
    /// (tried again).
    pub failures: u64,
    /// Points its periods wrote.
    pub points_written: u64,
    /// Periods left out after a downtime longer than
    /// `continuous_queries.max_catch_up_periods`.
    pub periods_skipped: u64,
    /// How long its last period took.
    pub last_run_seconds: f64,
    /// How long after its boundary its last period ended: above the run
    /// interval (and the period's own time), it is behind.
    pub lag_seconds: f64,
    /// The boundary of the last period it completed, ns (0: none yet
    /// in this process).
    pub last_period_ns: i64,
}

/// Everything counted by an [`Ingestor`](crate::Ingestor).
#[derive(Debug)]
pub struct IngestStats {
    /// Lines stored.
    pub lines_accepted: AtomicU64,
    /// Lines rejected.
    pub lines_rejected: AtomicU64,
    /// Lines (or Arrow rows) refused because they would pass a cardinality
    /// limit (also counted in `lines_rejected` for lines).
    pub lines_refused_by_limits: AtomicU64,
    /// Flushes that succeeded.
    pub flushes: AtomicU64,
    /// Insert attempts that failed (each is retried; its rows stay logged).
    pub flush_errors: AtomicU64,
    /// Insert attempts that failed since the last that succeeded: above 0,
    /// inserts keep failing ([`IngestStats::problems`]).
    pub flush_failing: AtomicU64,
    /// Set while the log cannot be written (its last group failed: a full
    /// disk, an I/O error), cleared by the next group written.
    pub wal_failing: std::sync::atomic::AtomicBool,
    /// Parts the engine found broken and set aside (`detached/`) when it
    /// opened, new since the previous open; named in
    /// [`IngestStats::problems`] for as long as this process runs.
    pub engine_broken_parts: AtomicU64,
    /// Their names (`database.table/part: reason`).
    pub broken_parts: std::sync::Mutex<Vec<String>>,
    /// In the `clickhouse` storage mode, each shard's requests, in the
    /// configured order.
    pub shards: std::sync::Mutex<Vec<ShardStats>>,
    /// Each continuous query's periods, from its first in this process.
    pub continuous_queries: std::sync::Mutex<Vec<ContinuousQueryStats>>,
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
    /// Bytes appended to the write-ahead log.
    pub wal_bytes: AtomicU64,
    /// `fdatasync` calls on the log (one per group of writes that asked).
    pub wal_syncs: AtomicU64,
    /// Seconds per log sync.
    pub wal_sync_seconds: Histogram,
    /// Groups of records the log failed to write or sync.
    pub wal_errors: AtomicU64,
    /// Bytes in the log's segments now.
    pub wal_size_bytes: AtomicU64,
    /// Segment files now.
    pub wal_segments: AtomicU64,
    /// The lsn of the last checkpoint: every record up to it is in the engine.
    pub wal_checkpoint_lsn: AtomicU64,
    /// Bytes of torn or corrupt segment tails cut off when the log was opened.
    pub wal_cut_bytes: AtomicU64,
    /// `Write` records replayed when the log was opened.
    pub replay_records: AtomicU64,
    /// Rows inserted by that replay.
    pub replay_rows: AtomicU64,
    /// Rows the replay skipped: the log showed them committed.
    pub replay_skipped_rows: AtomicU64,
    /// Milliseconds the replay took.
    pub replay_millis: AtomicU64,
    /// Series in the last-value cache now.
    pub last_value_series: AtomicU64,
    /// Bytes the last-value cache holds now (an estimate).
    pub last_value_bytes: AtomicU64,
    /// Measurements evicted from the last-value cache for its memory bound.
    pub last_value_evictions: AtomicU64,
    /// Measurements the last-value cache rebuilt from the engine (on open,
    /// after edits).
    pub last_value_rebuilds: AtomicU64,
    /// Recent samples held in memory now.
    pub recent_samples: AtomicU64,
    /// Bytes of room those samples take now.
    pub recent_bytes: AtomicU64,
    /// Times a measurement's span of recent samples was halved for their
    /// memory bound.
    pub recent_shrinks: AtomicU64,
    /// Reads of series (selectors, lookups) answered from the in-memory
    /// index.
    pub index_reads: AtomicU64,
    /// Reads of samples answered from the recent samples.
    pub recent_reads: AtomicU64,
    /// Reads of samples the recent samples could not answer (too old, the
    /// measurement not cached or being rebuilt): they went to the engine.
    pub recent_misses: AtomicU64,
    /// Blocks of older samples in the chunk cache now.
    pub chunk_cache_blocks: AtomicU64,
    /// Bytes those blocks take now (an estimate).
    pub chunk_cache_bytes: AtomicU64,
    /// Series' reads of older samples the chunk cache answered.
    pub chunk_cache_hits: AtomicU64,
    /// Series' reads of older samples it did not (read from the engine).
    pub chunk_cache_misses: AtomicU64,
    /// Blocks dropped for its memory bound.
    pub chunk_cache_evictions: AtomicU64,
    /// In the `clickhouse` storage mode, refreshes that learnt what other
    /// nodes created on the shards (or found nothing new).
    pub catalog_refreshes: AtomicU64,
    /// Refreshes that failed (a shard unreachable, a table half made by
    /// another node): the next one tries again.
    pub catalog_refresh_errors: AtomicU64,
    /// Downsampling passes that brought every rollup up to date.
    pub downsampling_passes: AtomicU64,
    /// Downsampling passes that failed; the next one does their work.
    pub downsampling_errors: AtomicU64,
    /// Time spent in downsampling passes, in milliseconds.
    pub downsampling_pass_millis: AtomicU64,
    /// Cluster mode: learnings of the shards' rollups that failed (a
    /// table half made by another node); the next one tries again.
    pub downsampling_learn_errors: AtomicU64,
    /// Cluster mode: time spent learning the shards' rollups, in
    /// milliseconds.
    pub downsampling_learn_millis: AtomicU64,
    /// Parts of fact tables dropped once rolled up and past the first age.
    pub downsampling_parts_dropped: AtomicU64,
    /// Query-language statements that read rollups.
    pub rollup_queries: AtomicU64,
    /// Untrusted statements running now (at most `query.max_concurrent`).
    pub queries_running: AtomicU64,
    /// Statements waiting for a slot now.
    pub queries_waiting: AtomicU64,
    /// Statements that found every slot busy and waited for one.
    pub queries_queued: AtomicU64,
    /// Statements refused because the queue was full.
    pub queries_refused_queue_full: AtomicU64,
    /// Statements refused after waiting `query.queue_timeout`.
    pub queries_refused_queue_timeout: AtomicU64,
    /// Statements whose caller went away while they waited.
    pub queries_abandoned_in_queue: AtomicU64,
    /// Seconds statements waited in the queue (whether they got a slot or
    /// not; those that found one free are not counted).
    pub query_queue_wait_seconds: Histogram,
    /// Backups written whole.
    pub backups: AtomicU64,
    /// Backups that failed (nothing a restore takes was left).
    pub backup_errors: AtomicU64,
    /// When the last whole backup finished, in Unix seconds (0: none yet).
    pub last_backup_unix_seconds: AtomicU64,
    /// Snapshots taken.
    pub snapshots: AtomicU64,
}

impl Default for IngestStats {
    fn default() -> Self {
        IngestStats {
            lines_accepted: AtomicU64::new(0),
            lines_rejected: AtomicU64::new(0),
            lines_refused_by_limits: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
            flush_errors: AtomicU64::new(0),
            flush_failing: AtomicU64::new(0),
            wal_failing: Default::default(),
            engine_broken_parts: AtomicU64::new(0),
            broken_parts: Default::default(),
            shards: Default::default(),
            continuous_queries: Default::default(),
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
            wal_bytes: AtomicU64::new(0),
            wal_syncs: AtomicU64::new(0),
            wal_sync_seconds: Histogram::new(&[0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 1.0]),
            wal_errors: AtomicU64::new(0),
            wal_size_bytes: AtomicU64::new(0),
            wal_segments: AtomicU64::new(0),
            wal_checkpoint_lsn: AtomicU64::new(0),
            wal_cut_bytes: AtomicU64::new(0),
            replay_records: AtomicU64::new(0),
            replay_rows: AtomicU64::new(0),
            replay_skipped_rows: AtomicU64::new(0),
            replay_millis: AtomicU64::new(0),
            last_value_series: AtomicU64::new(0),
            last_value_bytes: AtomicU64::new(0),
            last_value_evictions: AtomicU64::new(0),
            last_value_rebuilds: AtomicU64::new(0),
            recent_samples: AtomicU64::new(0),
            recent_bytes: AtomicU64::new(0),
            recent_shrinks: AtomicU64::new(0),
            index_reads: AtomicU64::new(0),
            recent_reads: AtomicU64::new(0),
            recent_misses: AtomicU64::new(0),
            chunk_cache_blocks: AtomicU64::new(0),
            chunk_cache_bytes: AtomicU64::new(0),
            chunk_cache_hits: AtomicU64::new(0),
            chunk_cache_misses: AtomicU64::new(0),
            chunk_cache_evictions: AtomicU64::new(0),
            catalog_refreshes: AtomicU64::new(0),
            catalog_refresh_errors: AtomicU64::new(0),
            downsampling_passes: AtomicU64::new(0),
            downsampling_errors: AtomicU64::new(0),
            downsampling_pass_millis: AtomicU64::new(0),
            downsampling_learn_errors: AtomicU64::new(0),
            downsampling_learn_millis: AtomicU64::new(0),
            downsampling_parts_dropped: AtomicU64::new(0),
            rollup_queries: AtomicU64::new(0),
            queries_running: AtomicU64::new(0),
            queries_waiting: AtomicU64::new(0),
            queries_queued: AtomicU64::new(0),
            queries_refused_queue_full: AtomicU64::new(0),
            queries_refused_queue_timeout: AtomicU64::new(0),
            backups: AtomicU64::new(0),
            backup_errors: AtomicU64::new(0),
            last_backup_unix_seconds: AtomicU64::new(0),
            snapshots: AtomicU64::new(0),
            queries_abandoned_in_queue: AtomicU64::new(0),
            query_queue_wait_seconds: Histogram::new(&[0.001, 0.01, 0.1, 0.5, 1.0, 5.0, 10.0]),
        }
    }
}

impl IngestStats {
    /// What is wrong now, one sentence each; empty when healthy. A
    /// server's health check reports these.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.wal_failing.load(Ordering::Relaxed) {
            problems.push(
                "the write-ahead log cannot be written (see the error log): writes are refused"
                    .to_owned(),
            );
        }
        let failing = self.flush_failing.load(Ordering::Relaxed);
        if failing > 0 {
            problems.push(format!(
                "inserts into the engine keep failing ({failing} attempts since the last that \
                 succeeded); their rows stay in the write-ahead log"
            ));
        }
        for (index, shard) in self.shards.lock().unwrap().iter().enumerate() {
            if shard.failing > 0 {
                problems.push(format!(
                    "shard {index} ({}) is failing: {} requests since the last that succeeded, \
                     the last: {}; rows for it stay in the write-ahead log",
                    shard.url,
                    shard.failing,
                    shard.last_error.as_deref().unwrap_or("?")
                ));
            }
        }
        let broken = self.broken_parts.lock().unwrap();
        if !broken.is_empty() {
            problems.push(format!(
                "the engine found {} broken part(s) when it opened and set them aside: {}",
                broken.len(),
                broken.join(", ")
            ));
        }
        problems
    }

    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}
