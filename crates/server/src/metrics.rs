//! The server's own counters (HTTP requests by endpoint and status, gRPC
//! calls by method and code, their latency, bytes in) and their Prometheus
//! text exposition together with the ingestor's (lines, flushes, series,
//! pool waits, engine errors, memory, the read queue). `http/metrics.rs`
//! serves it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use chingest::stats::{Histogram, IngestStats, PartsSummary};
use chingest::Ingestor;

const LATENCY_BOUNDS: &[f64] = &[
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

/// The protocols rows arrive by, as `chingest_rows_written_total` labels them.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Protocol {
    /// InfluxDB line protocol over HTTP (`/write`, `/api/v2/write`).
    Influx,
    /// Prometheus remote write.
    RemoteWrite,
    /// OTLP metrics, over HTTP or gRPC.
    Otlp,
    /// gRPC `Write` (line protocol or typed points).
    Grpc,
    /// gRPC `WriteArrow`.
    Arrow,
}

impl Protocol {
    const ALL: [Protocol; 5] = [
        Protocol::Influx,
        Protocol::RemoteWrite,
        Protocol::Otlp,
        Protocol::Grpc,
        Protocol::Arrow,
    ];

    fn label(self) -> &'static str {
        match self {
            Protocol::Influx => "line_protocol",
            Protocol::RemoteWrite => "remote_write",
            Protocol::Otlp => "otlp",
            Protocol::Grpc => "grpc",
            Protocol::Arrow => "arrow",
        }
    }
}

/// Counters kept by the HTTP and gRPC layers.
#[derive(Debug, Default)]
pub struct ServerMetrics {
    /// Rows stored, by [`Protocol`] (its index in `Protocol::ALL`).
    rows_written: [AtomicU64; Protocol::ALL.len()],
    /// Requests by (endpoint, status).
    requests: Mutex<BTreeMap<(String, u16), u64>>,
    /// Latency by endpoint.
    latency: Mutex<BTreeMap<String, Histogram>>,
    /// Request body bytes as sent (before decompression).
    bytes_in: AtomicU64,
    /// gRPC calls by (method, code).
    grpc_calls: Mutex<BTreeMap<(&'static str, String), u64>>,
    /// gRPC call latency by method.
    grpc_latency: Mutex<BTreeMap<&'static str, Histogram>>,
}

impl ServerMetrics {
    /// Counts one HTTP request to `endpoint` answered with `status` after
    /// `started`, whose body was `bytes` long as sent.
    pub(crate) fn observe_http(&self, endpoint: String, status: u16, bytes: u64, started: Instant) {
        self.bytes_in.fetch_add(bytes, Ordering::Relaxed);
        *self
            .requests
            .lock()
            .unwrap()
            .entry((endpoint.clone(), status))
            .or_default() += 1;
        self.latency
            .lock()
            .unwrap()
            .entry(endpoint)
            .or_insert_with(|| Histogram::new(LATENCY_BOUNDS))
            .observe(started.elapsed().as_secs_f64());
    }

    /// Counts `rows` stored from a request of `protocol`.
    pub(crate) fn count_rows(&self, protocol: Protocol, rows: usize) {
        self.rows_written[protocol as usize].fetch_add(rows as u64, Ordering::Relaxed);
    }

    /// The Prometheus text exposition of these counters and, once it is
    /// open, the ingestor's, with the engine's `parts` when they were read.
    pub(crate) fn exposition(
        &self,
        ingestor: Option<&Ingestor>,
        promql_cache: &chingest_promql::ResultCache,
        parts: Option<PartsSummary>,
    ) -> String {
        let mut out = String::new();
        let cache = promql_cache;
        for (name, kind, help, value) in [
            (
                "chingest_promql_cache_hits_total",
                "counter",
                "PromQL range queries that found steps in the result cache.",
                &cache.hits,
            ),
            (
                "chingest_promql_cache_misses_total",
                "counter",
                "PromQL range queries that found none.",
                &cache.misses,
            ),
            (
                "chingest_promql_cache_bytes",
                "gauge",
                "Bytes the result cache holds (an estimate).",
                &cache.bytes,
            ),
            (
                "chingest_promql_cache_entries",
                "gauge",
                "Queries the result cache holds.",
                &cache.len,
            ),
        ] {
            header(&mut out, name, kind, help);
            let _ = writeln!(
                out,
                "{name} {}",
                value.load(std::sync::atomic::Ordering::Relaxed)
            );
        }
        let m = self;
        header(
            &mut out,
            "chingest_http_requests_total",
            "counter",
            "HTTP requests by endpoint and status.",
        );
        for ((endpoint, status), count) in m.requests.lock().unwrap().iter() {
            let _ = writeln!(
            out,
            "chingest_http_requests_total{{endpoint=\"{endpoint}\",status=\"{status}\"}} {count}"
        );
        }
        header(
            &mut out,
            "chingest_http_request_duration_seconds",
            "histogram",
            "HTTP request latency by endpoint.",
        );
        for (endpoint, h) in m.latency.lock().unwrap().iter() {
            histogram(
                &mut out,
                "chingest_http_request_duration_seconds",
                &format!("endpoint=\"{endpoint}\""),
                h,
            );
        }
        header(
            &mut out,
            "chingest_http_request_bytes_total",
            "counter",
            "Request body bytes as sent.",
        );
        let _ = writeln!(
            out,
            "chingest_http_request_bytes_total {}",
            m.bytes_in.load(Ordering::Relaxed)
        );

        header(
            &mut out,
            "chingest_grpc_calls_total",
            "counter",
            "gRPC calls by method and status code.",
        );
        for ((method, code), count) in m.grpc_calls.lock().unwrap().iter() {
            let _ = writeln!(
                out,
                "chingest_grpc_calls_total{{method=\"{method}\",code=\"{code}\"}} {count}"
            );
        }
        header(
            &mut out,
            "chingest_grpc_call_duration_seconds",
            "histogram",
            "gRPC call latency by method.",
        );
        for (method, h) in m.grpc_latency.lock().unwrap().iter() {
            histogram(
                &mut out,
                "chingest_grpc_call_duration_seconds",
                &format!("method=\"{method}\""),
                h,
            );
        }

        header(
            &mut out,
            "chingest_rows_written_total",
            "counter",
            "Rows (points, samples) stored, by the protocol they came by.",
        );
        for protocol in Protocol::ALL {
            let _ = writeln!(
                out,
                "chingest_rows_written_total{{protocol=\"{}\"}} {}",
                protocol.label(),
                m.rows_written[protocol as usize].load(Ordering::Relaxed)
            );
        }

        process_memory(&mut out);
        if let Some(parts) = parts {
            for (name, help, value) in [
                (
                    "chingest_engine_parts",
                    "The engine's active parts.",
                    parts.parts,
                ),
                ("chingest_engine_part_rows", "Rows in them.", parts.rows),
                (
                    "chingest_engine_bytes_on_disk",
                    "Their bytes on disk.",
                    parts.bytes_on_disk,
                ),
            ] {
                header(&mut out, name, "gauge", help);
                let _ = writeln!(out, "{name} {value}");
            }
        }

        if let Some(ingestor) = ingestor {
            ingestor_metrics(&mut out, ingestor);
        }
        out
    }

    /// Counts one gRPC call of `method` that ended with `code` after
    /// `started`. Calls refused by authentication count under method `*`.
    pub(crate) fn observe_grpc(&self, method: &'static str, code: tonic::Code, started: Instant) {
        *self
            .grpc_calls
            .lock()
            .unwrap()
            .entry((method, format!("{code:?}")))
            .or_default() += 1;
        self.grpc_latency
            .lock()
            .unwrap()
            .entry(method)
            .or_insert_with(|| Histogram::new(LATENCY_BOUNDS))
            .observe(started.elapsed().as_secs_f64());
    }
}

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
fn ingestor_metrics(out: &mut String, ingestor: &Ingestor) {
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

/// The process's resident memory now and at its peak (Linux's `VmRSS` and
/// `VmHWM`), under the names Prometheus's process collectors use, and its
/// private part (`RssAnon`: what the process itself allocated, without
/// the engine library's mapped code); nothing where `/proc` does not have
/// them.
fn process_memory(out: &mut String) {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return;
    };
    let kib = |key: &str| -> Option<u64> {
        let line = status.lines().find_map(|line| line.strip_prefix(key))?;
        line.trim().strip_suffix("kB")?.trim().parse().ok()
    };
    for (name, help, key) in [
        (
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            "VmRSS:",
        ),
        (
            "chingest_process_resident_memory_peak_bytes",
            "The largest resident memory size since the process started.",
            "VmHWM:",
        ),
        (
            "chingest_process_resident_anon_bytes",
            "Resident private memory (RssAnon): what the process allocated.",
            "RssAnon:",
        ),
    ] {
        if let Some(kib) = kib(key) {
            header(out, name, "gauge", help);
            let _ = writeln!(out, "{name} {}", kib * 1024);
        }
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn histogram(out: &mut String, name: &str, labels: &str, h: &Histogram) {
    let sep = if labels.is_empty() { "" } else { "," };
    for (bound, count) in h.buckets() {
        let le = if bound.is_infinite() {
            "+Inf".to_owned()
        } else {
            bound.to_string()
        };
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {count}");
    }
    let braces = if labels.is_empty() {
        String::new()
    } else {
        format!("{{{labels}}}")
    };
    let _ = writeln!(out, "{name}_sum{braces} {}", h.sum());
    let _ = writeln!(out, "{name}_count{braces} {}", h.count());
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
        header(out, name, kind, help);
        for (index, shard) in shards.iter().enumerate() {
            let _ = writeln!(out, "{name}{{shard=\"{index}\"}} {}", value(shard));
        }
    }
}
