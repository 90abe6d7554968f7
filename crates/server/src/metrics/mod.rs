//! The server's own counters (HTTP requests by endpoint and status, gRPC
//! calls by method and code, their latency, bytes in) and their Prometheus
//! text exposition together with the ingestor's (lines, flushes, series,
//! pool waits, engine errors, memory, the read queue). `http/metrics.rs`
//! serves it. The ingestor's part is `ingestor.rs`; the text format's
//! pieces, below both, `format.rs`.

mod format;
mod ingestor;
mod rules;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use chingest::stats::{Histogram, PartsSummary};
use chingest::Ingestor;

use format::{header, histogram};
use ingestor::ingestor_metrics;
pub(crate) use rules::rules_metrics;

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
