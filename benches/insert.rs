//! End of the write path: 200,000 TSBS cpu rows per insert, through
//! `Ingestor::write_lp` with `Durability::Visible` (parse, series, Arrow,
//! the log, insert: the whole path to queryable rows) and, as
//! the baseline, the same rows as a pre-built RecordBatch inserted through
//! chdb-rust directly into a table of the same schema. Both write MergeTree
//! parts; their ratio is how close chingest runs to the engine.
//!
//! The two arms alternate, round after round, into tables emptied before
//! each round (no merge backlog takes the cores from either arm), so the
//! machine's other load weighs on both alike; the report is each arm's
//! median and their ratio. `ROUNDS=n` sets the number of rounds (default 15).
//! Under `cargo test` (no `--bench` argument) it runs one round as a check.

use chingest::{Durability, IngestConfig, Ingestor, WriteOptions};
use pushit::engine::{tsbs_fact_batch, tsbs_fact_schema, RawConnection};
use pushit::layouts::LayoutTables;
use std::time::{Duration, Instant};

const HOSTS: usize = 1_000;
const STEPS: usize = 200;

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ingestor = runtime
        .block_on(Ingestor::open(IngestConfig::new(dir.path())))
        .unwrap();
    let benchmarking = std::env::args().any(|arg| arg == "--bench");
    let rounds: usize = match std::env::var("ROUNDS").ok().and_then(|r| r.parse().ok()) {
        Some(rounds) => rounds,
        None if benchmarking => 15,
        None => 1,
    };

    let body = tsbs::CpuOnly::new(HOSTS).lines(0..STEPS);
    let options = WriteOptions {
        durability: Durability::Visible,
        ..WriteOptions::default()
    };
    // Creates the database, table and series, so both arms then measure
    // steady-state inserts.
    runtime
        .block_on(ingestor.write_lp("bench", "autogen", body.as_bytes(), &options))
        .unwrap();

    let conn = RawConnection::open(&ingestor.config().data_dir).unwrap();
    // The raw arm's table: chingest's own DDL, in a database of its own.
    let raw_table = LayoutTables::chingest(&tsbs_fact_schema("bench_raw"), false);
    conn.execute(&["CREATE DATABASE bench_raw"]).unwrap();
    conn.execute(
        &raw_table
            .create
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let batch = tsbs_fact_batch(&body).unwrap();

    let mut raw = Vec::new();
    let mut library = Vec::new();
    let mut prepare = Vec::new();
    for round in 0..rounds {
        // Empty tables each round: the merges of earlier rounds' parts would
        // otherwise take the cores from whichever arm runs next.
        for table in [raw_table.storage.as_str(), "bench.`cpu.autogen`"] {
            conn.execute(&[&format!("TRUNCATE TABLE {table}")]).unwrap();
        }
        // Which arm goes first alternates too.
        let raw_arm = || {
            let started = Instant::now();
            conn.insert(&raw_table.storage, batch.clone()).unwrap();
            started.elapsed()
        };
        // write_lp is exactly prepare_lp + commit; timed in two parts.
        let library_arm = || {
            let started = Instant::now();
            let (outcome, prepared) = runtime.block_on(async {
                let prepared = ingestor
                    .prepare_lp("bench", "autogen", body.as_bytes(), &options)
                    .await
                    .unwrap();
                let prepared_at = started.elapsed();
                (
                    ingestor.commit(prepared, options.durability).await.unwrap(),
                    prepared_at,
                )
            });
            assert_eq!(outcome.accepted, HOSTS * STEPS);
            (started.elapsed(), prepared)
        };
        let (raw_time, (library_time, prepare_time)) = if round % 2 == 0 {
            (raw_arm(), library_arm())
        } else {
            let library = library_arm();
            (raw_arm(), library)
        };
        raw.push(raw_time);
        library.push(library_time);
        prepare.push(prepare_time);
    }

    let rows = (HOSTS * STEPS) as f64;
    let rate = |d: Duration| rows / d.as_secs_f64();
    let (raw, library, prepare) = (median(raw), median(library), median(prepare));
    println!("insert {HOSTS}x{STEPS} TSBS cpu rows, median of {rounds} alternating rounds:");
    println!(
        "  chdb-rust, pre-built batch: {:>8.1} ms  {:>10.0} rows/s",
        raw.as_secs_f64() * 1e3,
        rate(raw)
    );
    println!(
        "  chingest write_lp:          {:>8.1} ms  {:>10.0} rows/s",
        library.as_secs_f64() * 1e3,
        rate(library)
    );
    println!(
        "    of which prepare_lp:      {:>8.1} ms  (parse, series ids, Arrow columns)",
        prepare.as_secs_f64() * 1e3
    );
    println!(
        "  write_lp / raw engine:      {:>8.2}",
        rate(library) / rate(raw)
    );

    // Back to back: two writers keep a write in flight each, so one write's
    // parse overlaps the other's insert, as under continuous ingest.
    for table in [raw_table.storage.as_str(), "bench.`cpu.autogen`"] {
        conn.execute(&[&format!("TRUNCATE TABLE {table}")]).unwrap();
    }
    let writes = rounds.max(2);
    let started = Instant::now();
    runtime.block_on(async {
        let writers: Vec<_> = (0..2)
            .map(|w| {
                let ingestor = ingestor.clone();
                let body = body.clone();
                tokio::spawn(async move {
                    for _ in (w..writes).step_by(2) {
                        ingestor
                            .write_lp(
                                "bench",
                                "autogen",
                                body.as_bytes(),
                                &WriteOptions::default(),
                            )
                            .await
                            .unwrap();
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.await.unwrap();
        }
    });
    let pipelined = (writes * HOSTS * STEPS) as f64 / started.elapsed().as_secs_f64();
    println!("  {writes} writes by 2 concurrent writers: {pipelined:>10.0} rows/s");
    println!(
        "  concurrent write_lp / raw engine: {:>5.2}",
        pipelined / rate(raw)
    );

    drop(conn);
    runtime.block_on(ingestor.close()).unwrap();
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}
