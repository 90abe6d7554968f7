//! Where should a flush go: the Buffer table or straight to the MergeTree?
//! Writes TSBS cpu bodies of a given size one after another (each waits for
//! its commit, so each is one flush) through the library, once with every
//! flush sent to the Buffer table and once with every flush sent to the
//! MergeTree, and reports rows/s and parts created for each size. The
//! crossover picks `BufferPolicy::direct_min_rows`.
//!
//! `ROWS=n` sets the rows written per size and arm (default 400,000).

use std::time::Instant;

use chingest::{BufferPolicy, IngestConfig, Ingestor, WriteOptions};

const SIZES: [usize; 6] = [1_000, 5_000, 20_000, 50_000, 100_000, 200_000];

fn main() {
    let benchmarking = std::env::args().any(|arg| arg == "--bench");
    let total: usize = match std::env::var("ROWS").ok().and_then(|r| r.parse().ok()) {
        Some(rows) => rows,
        None if benchmarking => 400_000,
        None => 20_000,
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let options = WriteOptions::default();

    println!("rows per flush | via Buffer rows/s | direct rows/s | Buffer/direct | parts (Buffer, direct)");
    for size in SIZES {
        // Bodies of `size` lines: 1,000 hosts × size/1,000 timestamps each.
        let steps = (size / 1_000).max(1);
        let writes = (total / size).max(3);
        let mut generator = tsbs::CpuOnly::new(1_000);
        let bodies: Vec<String> = (0..writes)
            .map(|w| generator.lines(w * steps..(w + 1) * steps))
            .collect();
        let mut results = Vec::new();
        for (arm, direct_min_rows) in [("buffer", usize::MAX), ("direct", 0)] {
            let mut config = IngestConfig::new(dir.path());
            config.buffer = BufferPolicy {
                direct_min_rows,
                ..BufferPolicy::default()
            };
            let db = format!("flush_{arm}_{size}");
            let (rate, parts) = runtime.block_on(async {
                let ingestor = Ingestor::open(config).await.unwrap();
                // Creates the table and series first.
                ingestor
                    .write_lp(&db, "autogen", bodies[0].as_bytes(), &options)
                    .await
                    .unwrap();
                let started = Instant::now();
                for body in &bodies[1..] {
                    ingestor
                        .write_lp(&db, "autogen", body.as_bytes(), &options)
                        .await
                        .unwrap();
                }
                let elapsed = started.elapsed();
                let parts = ingestor
                    .query(
                        &format!(
                            "SELECT count() FROM system.parts WHERE database = '{db}' \
                             AND table = 'cpu.autogen.mergetree' AND active"
                        ),
                        "TabSeparated",
                    )
                    .await
                    .unwrap();
                ingestor.close().await.unwrap();
                let rows = (bodies.len() - 1) * size;
                (
                    rows as f64 / elapsed.as_secs_f64(),
                    String::from_utf8_lossy(&parts).trim().to_owned(),
                )
            });
            results.push((rate, parts));
        }
        let (buffer, direct) = (&results[0], &results[1]);
        println!(
            "{size:>14} | {:>17.0} | {:>13.0} | {:>13.2} | {}, {}",
            buffer.0,
            direct.0,
            buffer.0 / direct.0,
            buffer.1,
            direct.1
        );
    }
}
