//! The ingestor's part of the exposition: its counters and gauges
//! ([`IngestStats`]), histograms, memory, and the series of each shard and
//! of each continuous query.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use chingest::stats::{Histogram, IngestStats};
use chingest::Ingestor;

use super::format::{by_label, escape_label, header, histogram};

/// One of the ingestor's counters or gauges: its name, type, help, and
/// where [`IngestStats`] keeps it.
struct Stat {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    value: fn(&IngestStats) -> &AtomicU64,
}

const fn counter(
    name: &'static str,
    help: &'static str,
    value: fn(&IngestStats) -> &AtomicU64,
) -> Stat {
    Stat {
        name,
        kind: "counter",
        help,
        value,
    }
}

const fn gauge(
    name: &'static str,
    help: &'static str,
    value: fn(&IngestStats) -> &AtomicU64,
) -> Stat {
    Stat {
        name,
        kind: "gauge",
        help,
        value,
    }
}

/// The ingestor's counters and gauges, in the order exposed.
const INGESTOR_STATS: &[Stat] = &[
    counter("chingest_lines_accepted_total", "Line-protocol lines stored.", |s| &s.lines_accepted),
    counter("chingest_lines_rejected_total", "Line-protocol lines rejected.", |s| &s.lines_rejected),
    counter(
        "chingest_lines_refused_by_limits_total",
        "Lines (and Arrow rows) refused for a series or tag-value limit.",
        |s| &s.lines_refused_by_limits,
    ),
    counter("chingest_flushes_total", "Flushes committed.", |s| &s.flushes),
    counter(
        "chingest_flush_errors_total",
        "Insert attempts that failed (retried; the rows stay in the log).",
        |s| &s.flush_errors,
    ),
    counter(
        "chingest_engine_broken_parts_total",
        "Parts the engine found broken and set aside when it opened (see /health).",
        |s| &s.engine_broken_parts,
    ),
    counter("chingest_wal_bytes_total", "Bytes appended to the write-ahead log.", |s| &s.wal_bytes),
    counter("chingest_wal_syncs_total", "Syncs (fdatasync) of the write-ahead log.", |s| &s.wal_syncs),
    counter(
        "chingest_wal_errors_total",
        "Groups of writes the log failed to write or sync.",
        |s| &s.wal_errors,
    ),
    counter(
        "chingest_wal_cut_bytes_total",
        "Bytes of torn segment tails cut when the log was opened.",
        |s| &s.wal_cut_bytes,
    ),
    counter("chingest_replay_records_total", "Log records replayed on open.", |s| &s.replay_records),
    counter("chingest_replay_rows_total", "Rows inserted by the replay on open.", |s| &s.replay_rows),
    counter(
        "chingest_replay_skipped_rows_total",
        "Rows the replay skipped because the log showed them inserted.",
        |s| &s.replay_skipped_rows,
    ),
    counter("chingest_series_created_total", "Series rows committed.", |s| &s.series_created),
    counter("chingest_engine_errors_total", "Engine errors.", |s| &s.engine_errors),
    counter(
        "chingest_last_value_evictions_total",
        "Measurements evicted from the last-value cache for its memory bound.",
        |s| &s.last_value_evictions,
    ),
    counter(
        "chingest_last_value_rebuilds_total",
        "Measurements the last-value cache rebuilt from the engine (open, edits).",
        |s| &s.last_value_rebuilds,
    ),
    counter(
        "chingest_recent_shrinks_total",
        "Times a measurement's span of recent samples was halved for their memory bound.",
        |s| &s.recent_shrinks,
    ),
    counter(
        "chingest_index_reads_total",
        "Series and tag-value reads (PromQL selectors and lookups) answered from the in-memory index.",
        |s| &s.index_reads,
    ),
    counter(
        "chingest_recent_reads_total",
        "Sample reads answered from the recent samples in memory.",
        |s| &s.recent_reads,
    ),
    counter(
        "chingest_recent_misses_total",
        "Sample reads the recent samples could not answer (too old, not cached, rebuilding): they went to the engine.",
        |s| &s.recent_misses,
    ),
    counter(
        "chingest_chunk_cache_hits_total",
        "Series' reads of samples older than the recent window answered from the chunk cache.",
        |s| &s.chunk_cache_hits,
    ),
    counter(
        "chingest_chunk_cache_misses_total",
        "Series' reads of samples older than the recent window the chunk cache did not hold: read from the engine (and kept).",
        |s| &s.chunk_cache_misses,
    ),
    counter(
        "chingest_chunk_cache_evictions_total",
        "Blocks of older samples dropped from the chunk cache for its memory bound.",
        |s| &s.chunk_cache_evictions,
    ),
    counter(
        "chingest_catalog_refreshes_total",
        "Cluster mode: refreshes that learnt what other nodes created on the shards (databases, tables, fields, series).",
        |s| &s.catalog_refreshes,
    ),
    counter(
        "chingest_catalog_refresh_errors_total",
        "Cluster mode: refreshes that failed; the next one tries again.",
        |s| &s.catalog_refresh_errors,
    ),
    counter(
        "chingest_downsampling_passes_total",
        "Downsampling passes that brought every rollup up to date with writes and edits.",
        |s| &s.downsampling_passes,
    ),
    counter(
        "chingest_downsampling_errors_total",
        "Downsampling passes that failed; the next one does their work.",
        |s| &s.downsampling_errors,
    ),
    counter(
        "chingest_downsampling_pass_milliseconds_total",
        "Time spent in downsampling passes (what a pass costs against the period between passes).",
        |s| &s.downsampling_pass_millis,
    ),
    counter(
        "chingest_downsampling_learn_errors_total",
        "Cluster mode: learnings of the shards' rollups that failed; the next one tries again.",
        |s| &s.downsampling_learn_errors,
    ),
    counter(
        "chingest_downsampling_learn_milliseconds_total",
        "Cluster mode: time spent learning the shards' rollups (every node, every period).",
        |s| &s.downsampling_learn_millis,
    ),
    counter(
        "chingest_downsampling_parts_dropped_total",
        "Parts of fact tables dropped once rolled up and past their database's first downsampling age.",
        |s| &s.downsampling_parts_dropped,
    ),
    counter(
        "chingest_rollup_queries_total",
        "InfluxQL and PromQL statements that read rollups.",
        |s| &s.rollup_queries,
    ),
    counter(
        "chingest_queries_queued_total",
        "Read statements (SQL, ClickHouse, InfluxQL) that found every slot busy and waited.",
        |s| &s.queries_queued,
    ),
    counter(
        "chingest_queries_abandoned_in_queue_total",
        "Read statements whose client went away while they waited for a slot.",
        |s| &s.queries_abandoned_in_queue,
    ),
    counter("chingest_backups_total", "Backups written whole.", |s| &s.backups),
    counter(
        "chingest_backup_errors_total",
        "Backups that failed (none that a restore would take was left).",
        |s| &s.backup_errors,
    ),
    counter("chingest_snapshots_total", "Snapshots taken.", |s| &s.snapshots),
    gauge(
        "chingest_last_backup_timestamp_seconds",
        "When the last whole backup finished (Unix seconds; 0: none since the start).",
        |s| &s.last_backup_unix_seconds,
    ),
    gauge("chingest_wal_size_bytes", "Bytes in the write-ahead log's segments.", |s| &s.wal_size_bytes),
    gauge("chingest_wal_segments", "Segment files of the write-ahead log.", |s| &s.wal_segments),
    gauge(
        "chingest_wal_checkpoint_lsn",
        "Every log record up to this number is in the engine.",
        |s| &s.wal_checkpoint_lsn,
    ),
    gauge(
        "chingest_replay_duration_milliseconds",
        "How long the replay on open took.",
        |s| &s.replay_millis,
    ),
    gauge(
        "chingest_last_value_series",
        "Series in the series index and last-value cache.",
        |s| &s.last_value_series,
    ),
    gauge(
        "chingest_last_value_bytes",
        "Bytes the series index and last values hold (an estimate; per series: this over \
         chingest_last_value_series).",
        |s| &s.last_value_bytes,
    ),
    gauge("chingest_recent_samples", "Recent samples held in memory.", |s| &s.recent_samples),
    gauge("chingest_recent_bytes", "Bytes of room the recent samples take.", |s| &s.recent_bytes),
    gauge(
        "chingest_chunk_cache_blocks",
        "Blocks (2 h of a series) of older samples in the chunk cache.",
        |s| &s.chunk_cache_blocks,
    ),
    gauge(
        "chingest_chunk_cache_bytes",
        "Bytes the chunk cache holds (an estimate; at most last_values.chunk_cache_bytes).",
        |s| &s.chunk_cache_bytes,
    ),
    gauge(
        "chingest_queries_running",
        "Read statements running (at most query.max_concurrent).",
        |s| &s.queries_running,
    ),
    gauge(
        "chingest_queries_waiting",
        "Read statements waiting for a slot (at most query.max_queued).",
        |s| &s.queries_waiting,
    ),
];

/// Where [`IngestStats`] keeps a histogram.
type HistogramOf = fn(&IngestStats) -> &Histogram;

/// The ingestor's histograms, in the order exposed: name, help, where.
const INGESTOR_HISTOGRAMS: &[(&str, &str, HistogramOf)] = &[
    (
        "chingest_wal_sync_duration_seconds",
        "Write-ahead log sync latency.",
        |s| &s.wal_sync_seconds,
    ),
    ("chingest_flush_rows", "Rows per flush.", |s| &s.flush_rows),
    (
        "chingest_flush_duration_seconds",
        "Flush latency (series and insert).",
        |s| &s.flush_seconds,
    ),
    (
        "chingest_connection_wait_seconds",
        "Waits for an engine connection.",
        |s| &s.connection_wait_seconds,
    ),
    (
        "chingest_query_queue_wait_seconds",
        "How long read statements that found every slot busy waited.",
        |s| &s.query_queue_wait_seconds,
    ),
];

/// The ingestor's part of the exposition.
pub(super) fn ingestor_metrics(out: &mut String, ingestor: &Ingestor) {
    let s = ingestor.stats();
    let (counters, gauges): (Vec<&Stat>, Vec<&Stat>) = INGESTOR_STATS
        .iter()
        .partition(|stat| stat.kind == "counter");
    for stat in counters {
        header(out, stat.name, stat.kind, stat.help);
        let _ = writeln!(
            out,
            "{} {}",
            stat.name,
            (stat.value)(s).load(Ordering::Relaxed)
        );
    }
    header(
        out,
        "chingest_queries_refused_total",
        "counter",
        "Read statements refused: the queue full (429) or no slot within the queue timeout (503).",
    );
    for (reason, counter) in [
        ("queue_full", &s.queries_refused_queue_full),
        ("queue_timeout", &s.queries_refused_queue_timeout),
    ] {
        let _ = writeln!(
            out,
            "chingest_queries_refused_total{{reason=\"{reason}\"}} {}",
            counter.load(Ordering::Relaxed)
        );
    }
    for stat in gauges {
        header(out, stat.name, stat.kind, stat.help);
        let _ = writeln!(
            out,
            "{} {}",
            stat.name,
            (stat.value)(s).load(Ordering::Relaxed)
        );
    }
    shard_metrics(out, &s.shards.lock().unwrap());
    continuous_query_metrics(out, &s.continuous_queries.lock().unwrap());
    for (name, help, value) in INGESTOR_HISTOGRAMS {
        header(out, name, "histogram", help);
        histogram(out, name, "", value(s));
    }
    for (name, help, value) in [
        (
            "chingest_buffered_bytes",
            "Bytes held in the memory budget: request bodies and rows waiting to be inserted.",
            ingestor.buffered_bytes(),
        ),
        (
            "chingest_buffered_bytes_limit",
            "The memory budget.",
            ingestor.config().max_buffered_bytes,
        ),
    ] {
        header(out, name, "gauge", help);
        let _ = writeln!(out, "{name} {value}");
    }
}

/// Each continuous query's periods in this process, labelled by its
/// database and name (nothing until one ran).
fn continuous_query_metrics(out: &mut String, queries: &[chingest::ContinuousQueryStats]) {
    if queries.is_empty() {
        return;
    }
    type Series = (
        &'static str,
        &'static str,
        &'static str,
        fn(&chingest::ContinuousQueryStats) -> f64,
    );
    let series: [Series; 7] = [
        (
            "chingest_continuous_query_runs_total",
            "counter",
            "Periods the continuous query ran.",
            |s| s.runs as f64,
        ),
        (
            "chingest_continuous_query_failures_total",
            "counter",
            "Periods whose statement failed (passed by) or could not run (tried again).",
            |s| s.failures as f64,
        ),
        (
            "chingest_continuous_query_points_written_total",
            "counter",
            "Points the continuous query wrote.",
            |s| s.points_written as f64,
        ),
        (
            "chingest_continuous_query_periods_skipped_total",
            "counter",
            "Missed periods not run after a restart, past continuous_queries.max_catch_up_periods.",
            |s| s.periods_skipped as f64,
        ),
        (
            "chingest_continuous_query_last_run_seconds",
            "gauge",
            "How long the continuous query's last period took.",
            |s| s.last_run_seconds,
        ),
        (
            "chingest_continuous_query_lag_seconds",
            "gauge",
            "How long after its boundary the last period ended (growing: the query falls behind).",
            |s| s.lag_seconds,
        ),
        (
            "chingest_continuous_query_last_period_seconds",
            "gauge",
            "The boundary of the last period completed, in Unix seconds.",
            |s| s.last_period_ns as f64 / 1e9,
        ),
    ];
    for (name, kind, help, value) in series {
        header(out, name, kind, help);
        for query in queries {
            let _ = writeln!(
                out,
                "{name}{{database=\"{}\",name=\"{}\"}} {}",
                escape_label(&query.database),
                escape_label(&query.name),
                value(query)
            );
        }
    }
}

/// Each shard's requests (the `clickhouse` storage mode; nothing in the
/// embedded one).
fn shard_metrics(out: &mut String, shards: &[chingest::ShardStats]) {
    if shards.is_empty() {
        return;
    }
    type Series = (
        &'static str,
        &'static str,
        &'static str,
        fn(&chingest::ShardStats) -> u64,
    );
    let series: [Series; 4] = [
        (
            "chingest_shard_inserts_total",
            "counter",
            "Inserts the shard stored.",
            |s| s.inserts,
        ),
        (
            "chingest_shard_rows_total",
            "counter",
            "Rows the shard stored.",
            |s| s.rows,
        ),
        (
            "chingest_shard_errors_total",
            "counter",
            "Requests to the shard that failed on every replica.",
            |s| s.errors,
        ),
        (
            "chingest_shard_failing",
            "gauge",
            "Failed requests since the last that succeeded (above 0: the shard is behind).",
            |s| s.failing,
        ),
    ];
    for (name, kind, help, value) in series {
        let each = shards
            .iter()
            .enumerate()
            .map(|(i, s)| (i.to_string(), value(s)));
        by_label(out, (name, kind, help), "shard", each);
    }
}
