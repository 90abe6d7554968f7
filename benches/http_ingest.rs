//! End to end over HTTP: TSBS cpu-only line protocol (1,000 hosts × 1,000
//! timestamps by default) posted in bodies of 5,000 lines over 4 keep-alive
//! connections to an in-process server on loopback; every row is
//! acknowledged only after it is committed. Reports rows/s, request latency
//! percentiles, and verifies the stored count. Generation is not timed.
//!
//! Then, in the same run, the same rows as pre-built RecordBatches of
//! 200,000 rows inserted through chdb-rust directly into a MergeTree of the
//! same schema, and the ratio of the two rates.
//!
//! `STEPS=n` timestamps, `LINES=n` lines per body, `CONNECTIONS=n`.

use std::time::{Duration, Instant};

mod raw_engine;

use chingest_server::config::ServerConfig;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let benchmarking = std::env::args().any(|arg| arg == "--bench");
    let steps = env("STEPS", if benchmarking { 1_000 } else { 10 });
    let lines = env("LINES", 5_000);
    let connections = env("CONNECTIONS", 4);
    let mut bodies = tsbs::CpuOnly::new(1_000).bodies(steps, lines);
    let total_rows = 1_000 * steps;
    let total_bytes: usize = bodies.iter().map(String::len).sum();

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    runtime.block_on(async {
        let config = ServerConfig {
            data_dir: dir.path().to_owned(),
            http_addr: "127.0.0.1:0".parse().unwrap(),
            log: "warn".into(),
            ..ServerConfig::default()
        };
        let server = chingest_server::start(config).await.unwrap();
        let url = format!("http://{}/write?db=bench", server.addr);
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        while client.get(format!("http://{}/ready", server.addr)).send().await.map_or(true, |r| !r.status().is_success()) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // The first body creates the table and the series.
        let first = bodies.remove(0);
        let first_lines = first.lines().count();
        let first = client.post(&url).body(first).send().await.unwrap();
        assert_eq!(first.status(), 204);

        // Sent bodies are freed as they go: the client holds the load once.
        let queue = std::sync::Arc::new(std::sync::Mutex::new(bodies));
        let started = Instant::now();
        let tasks: Vec<_> = (0..connections)
            .map(|_| {
                let (client, url, queue) = (client.clone(), url.clone(), queue.clone());
                tokio::spawn(async move {
                    let mut latencies = Vec::new();
                    loop {
                        let Some(body) = queue.lock().unwrap().pop() else { break };
                        let sent = Instant::now();
                        let r = client.post(&url).body(body).send().await.unwrap();
                        assert_eq!(r.status(), 204);
                        latencies.push(sent.elapsed());
                    }
                    latencies
                })
            })
            .collect();
        let mut latencies: Vec<Duration> = Vec::new();
        for task in tasks {
            latencies.extend(task.await.unwrap());
        }
        let elapsed = started.elapsed();
        let rows = total_rows - first_lines;
        latencies.sort();
        let p = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
        let stored = client
            .get(format!("http://{}/sql", server.addr))
            .query(&[("query", "SELECT count() FROM bench.`cpu.autogen`"), ("format", "TabSeparated")])
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_eq!(stored.trim().parse::<usize>().unwrap(), total_rows, "stored count");
        println!(
            "http ingest: {rows} TSBS rows in {} bodies of {lines} lines over {connections} connections",
            latencies.len()
        );
        println!(
            "  {:.0} rows/s, {:.0} values/s, {:.1} MB/s; request latency p50 {:.1} ms, p95 {:.1} ms, p99 {:.1} ms",
            rows as f64 / elapsed.as_secs_f64(),
            10.0 * rows as f64 / elapsed.as_secs_f64(),
            total_bytes as f64 / 1e6 / elapsed.as_secs_f64(),
            p(0.50),
            p(0.95),
            p(0.99),
        );
        let e2e = rows as f64 / elapsed.as_secs_f64();
        // The whole process: the server and this client, whose generated
        // bodies are held for the run.
        let peak_rss = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|status| {
                let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
                line.split_whitespace().nth(1)?.parse::<u64>().ok()
            })
            .unwrap_or(0);
        println!(
            "  peak RSS of the process {:.0} MiB, of which the client's bodies are {:.0} MiB",
            peak_rss as f64 / 1024.0,
            total_bytes as f64 / (1 << 20) as f64
        );

        // The raw engine, same rows, same process, same data directory.
        // The same rows again (generation is deterministic).
        let all: String = tsbs::CpuOnly::new(1_000).lines(0..steps);
        let lines: Vec<&str> = all.lines().collect();
        let batches: Vec<_> = lines
            .chunks(200_000)
            .map(|chunk| raw_engine::prebuilt_batch(&(chunk.join("\n") + "\n")))
            .collect();
        let path = format!("--path={}", dir.path().canonicalize().unwrap().display());
        let raw = tokio::task::spawn_blocking(move || {
            let conn = chdb_rust::connection::Connection::open(&[&path]).unwrap();
            raw_engine::create_table(&conn, "bench.raw");
            let started = Instant::now();
            for (i, batch) in batches.into_iter().enumerate() {
                chdb_rust::arrow_insert::insert_record_batch(
                    &conn,
                    "bench.raw",
                    &format!("http_raw_{i}"),
                    batch,
                    chdb_rust::InsertOptions::default(),
                )
                .unwrap();
            }
            total_rows as f64 / started.elapsed().as_secs_f64()
        })
        .await
        .unwrap();
        println!("  raw engine, same rows in 200k-row pre-built batches: {raw:.0} rows/s");
        println!("  end-to-end / raw engine: {:.2}", e2e / raw);
        server.shutdown().await.unwrap();
    });
}
