//! Lookups in the last-value cache through `Ingestor::last_values`: "the
//! newest point of host X" among the 1,000 hosts of a TSBS cpu table (10
//! tags, 10 fields), by a tag filter, from 1 and from 8 threads at once
//! (what a front end's handlers do). Reports the cache's size, then
//! lookups/s and latency percentiles. `SECONDS=n` sets each arm's time (default 3); under `cargo
//! test` (no `--bench` argument) each arm runs 0.1 s as a check.

use std::time::{Duration, Instant};

use chingest::{IngestConfig, Ingestor, WriteOptions};

const HOSTS: usize = 1_000;
const STEPS: usize = 10;

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ingestor = runtime
        .block_on(Ingestor::open(IngestConfig::new(dir.path())))
        .unwrap();
    let benchmarking = std::env::args().any(|arg| arg == "--bench");
    let seconds: f64 = match std::env::var("SECONDS").ok().and_then(|s| s.parse().ok()) {
        Some(seconds) => seconds,
        None if benchmarking => 3.0,
        None => 0.1,
    };
    let body = tsbs::CpuOnly::new(HOSTS).lines(0..STEPS);
    runtime
        .block_on(ingestor.write_lp(
            "bench",
            "autogen",
            body.as_bytes(),
            &WriteOptions::default(),
        ))
        .unwrap();
    let hosts: Vec<String> = ingestor
        .last_values(("bench", "autogen", "cpu"), |_| true)
        .expect("cached")
        .iter()
        .filter_map(|s| {
            s.tags
                .iter()
                .find(|(k, _)| k == "hostname")
                .map(|(_, v)| v.clone())
        })
        .collect();
    assert_eq!(hosts.len(), HOSTS);
    let stats = ingestor.stats();
    let relaxed = std::sync::atomic::Ordering::Relaxed;
    let (series, bytes) = (
        stats.last_value_series.load(relaxed),
        stats.last_value_bytes.load(relaxed),
    );
    println!(
        "cache: {series} series in {bytes} bytes ({} bytes a series)",
        bytes / series.max(1)
    );
    for threads in [1, 8] {
        let started = Instant::now();
        let latencies: Vec<Duration> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|t| {
                    let (ingestor, hosts) = (&ingestor, &hosts);
                    scope.spawn(move || {
                        let mut latencies = Vec::new();
                        let mut i = t;
                        while started.elapsed().as_secs_f64() < seconds {
                            let host = &hosts[i % hosts.len()];
                            let asked = Instant::now();
                            let found = ingestor
                                .last_values(("bench", "autogen", "cpu"), |tags| {
                                    tags.iter().any(|(k, v)| *k == "hostname" && v == host)
                                })
                                .expect("cached");
                            latencies.push(asked.elapsed());
                            assert_eq!(found.len(), 1);
                            i += 7;
                        }
                        latencies
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().unwrap())
                .collect()
        });
        let elapsed = started.elapsed().as_secs_f64();
        let mut latencies = latencies;
        latencies.sort();
        let at =
            |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
        println!(
            "last_values by hostname among {HOSTS} series, {threads} thread(s): {:.0} lookups/s, \
             p50 {:.1} µs, p99 {:.1} µs",
            latencies.len() as f64 / elapsed,
            at(0.5),
            at(0.99)
        );
    }
    runtime.block_on(ingestor.close()).unwrap();
}
