//! `pushit workers` and `pushit ceiling`: concurrent inserts of 200k-row
//! batches, fixed work per worker (each added worker adds one worker's
//! load), timed from the moment every worker is ready until the last
//! insert returns.
//!
//! chdb-rust's `Connection` is not `Sync`, so the shared-connection arm
//! puts it behind a mutex: its workers take turns for whole statements,
//! which is the per-client lock the seed describes, plus the Arrow export
//! that the seed's clients did outside it.

use std::path::PathBuf;
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use chingest::arrow::array::RecordBatch;
use pushit::chart::{scaling_svg, Curve};
use pushit::engine::RawConnection;
use pushit::layouts::{Layout, Shape};
use pushit::report::{column, Column, Format};
use serde_json::json;

use super::{fresh_database, per_second, settle, verify};
use crate::Context;

const DATABASE: &str = "pushit_workers";

/// How the workers reach the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Arm {
    /// Every worker inserts through one shared connection into one table.
    Shared,
    /// Each worker has its own connection and its own table.
    PerWorkerTables,
    /// Each worker has its own connection; all write one table.
    PerWorkerOneTable,
}

impl Arm {
    fn name(self) -> &'static str {
        match self {
            Arm::Shared => "shared",
            Arm::PerWorkerTables => "per_worker_tables",
            Arm::PerWorkerOneTable => "per_worker_one_table",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Arm::Shared => "shared 1 connection",
            Arm::PerWorkerTables => "connection per worker",
            Arm::PerWorkerOneTable => "connection per worker, one table",
        }
    }
}

/// The work each worker does.
#[derive(Debug, clap::Args)]
pub(crate) struct Work {
    /// Rows per insert.
    #[arg(long, default_value_t = 200_000)]
    batch_rows: usize,
    /// Inserts per worker (fixed work per worker). Enough to keep each
    /// point's timed region over a second on small machines.
    #[arg(long, default_value_t = 8)]
    inserts_per_worker: usize,
    /// Tags per series (hashed into series_id; they cost nothing at insert).
    #[arg(long, default_value_t = 6)]
    tags: usize,
    /// Integer fields per row.
    #[arg(long, default_value_t = 5)]
    fields: usize,
    /// Where to write the SVG chart of rows/s against workers.
    #[arg(long, value_name = "PATH")]
    chart: Option<PathBuf>,
    /// Do not write a chart.
    #[arg(long)]
    no_chart: bool,
}

/// Flags of `pushit workers`.
#[derive(Debug, clap::Args)]
pub(crate) struct WorkersArgs {
    /// Worker counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    workers: Vec<usize>,
    /// Arms to run, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "shared,per-worker-tables,per-worker-one-table"
    )]
    arms: Vec<Arm>,
    #[command(flatten)]
    work: Work,
}

/// Flags of `pushit ceiling` (connection per worker, a table each).
#[derive(Debug, clap::Args)]
pub(crate) struct CeilingArgs {
    /// Worker counts, comma-separated. Default: 1, then ½, 1, 2, 3 and 4
    /// times the core count.
    #[arg(long, value_delimiter = ',')]
    workers: Vec<usize>,
    #[command(flatten)]
    work: Work,
}

/// Runs `pushit workers`.
pub(crate) fn run_workers(ctx: &Context, args: &WorkersArgs) -> anyhow::Result<()> {
    let columns = vec![
        column("W", "workers", Format::Count),
        column("arm", "arm", Format::Text),
        column("wall (s)", "seconds", Format::Seconds),
        column("rows/s", "rows_per_s", Format::Count),
        column("speedup", "speedup", Format::Times),
        column("rows/s per worker", "rows_per_s_per_worker", Format::Count),
        column("run", "run", Format::Text),
    ];
    sweep(
        ctx,
        "workers",
        columns,
        &args.workers,
        &args.arms,
        &args.work,
    )?;
    Ok(())
}

/// Runs `pushit ceiling`, and names the peak.
pub(crate) fn run_ceiling(ctx: &Context, args: &CeilingArgs) -> anyhow::Result<()> {
    let workers = if args.workers.is_empty() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut workers: Vec<usize> = [1, cores / 2, cores, 2 * cores, 3 * cores, 4 * cores]
            .into_iter()
            .filter(|&w| w > 0)
            .collect();
        workers.dedup();
        workers
    } else {
        args.workers.clone()
    };
    let columns = vec![
        column("W", "workers", Format::Count),
        column("rows/s", "rows_per_s", Format::Count),
        column("speedup", "speedup", Format::Times),
        column("rows/s per worker", "rows_per_s_per_worker", Format::Count),
        column("run", "run", Format::Text),
    ];
    let report = sweep(
        ctx,
        "ceiling",
        columns,
        &workers,
        &[Arm::PerWorkerTables],
        &args.work,
    )?;
    let peak = report
        .rows()
        .iter()
        .filter(|row| row["run"] == "warm")
        .max_by(|a, b| {
            a["rows_per_s"]
                .as_f64()
                .partial_cmp(&b["rows_per_s"].as_f64())
                .unwrap_or(std::cmp::Ordering::Equal)
        });
    if let Some(peak) = peak {
        report.summary(json!({
            "peak_workers": peak["workers"],
            "peak_rows_per_s": peak["rows_per_s"],
            "peak_speedup": peak["speedup"],
            "cores": std::thread::available_parallelism().map_or(1, |n| n.get()),
        }));
    }
    Ok(())
}

/// Measures every (workers, arm) point, prints the report, draws the chart.
fn sweep(
    ctx: &Context,
    mode: &'static str,
    columns: Vec<Column>,
    workers: &[usize],
    arms: &[Arm],
    work: &Work,
) -> anyhow::Result<pushit::report::Report> {
    let shape = Shape {
        series: 1_000.min(work.batch_rows.max(1)),
        timestamps: work.batch_rows.div_ceil(1_000).max(1),
        tags: work.tags.max(1),
        fields: work.fields.max(1),
    };
    let batch = Layout::SeriesId
        .batches(&shape, work.batch_rows.max(1))?
        .swap_remove(0);
    let mut report = ctx.report(mode, columns);
    let mut curves = Vec::new();
    for &arm in arms {
        let mut baseline = None;
        let mut points = Vec::new();
        for &w in workers.iter().filter(|&&w| w > 0) {
            ctx.progress(format!("{mode}: {} with {w} workers", arm.label()));
            let rows = w * work.inserts_per_worker * batch.num_rows();
            let measured = ctx.measure(|| {
                let elapsed = run_point(ctx, arm, w, work.inserts_per_worker, &batch, &shape)?;
                Ok((elapsed, ()))
            })?;
            for m in measured {
                let rate = per_second(rows, m.elapsed);
                // Speedups are against the arm's first warm point; a cold
                // run has none.
                let speedup = (m.label == "warm").then(|| {
                    points.push((w as u32, rate));
                    rate / *baseline.get_or_insert(rate)
                });
                report.push(json!({
                    "workers": w,
                    "arm": arm.name(),
                    "batch_rows": batch.num_rows(),
                    "inserts_per_worker": work.inserts_per_worker,
                    "rows": rows,
                    "seconds": m.elapsed.as_secs_f64(),
                    "rows_per_s": rate,
                    "samples_per_s": rate,
                    "speedup": speedup,
                    "rows_per_s_per_worker": rate / w as f64,
                    "run": m.label,
                }));
            }
        }
        curves.push(Curve {
            label: arm.label().to_owned(),
            points,
        });
    }
    report.finish();
    if !work.no_chart {
        let path = work
            .chart
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("pushit-{mode}.svg")));
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let title = format!(
            "pushit {mode}: {}-row inserts, {cores} cores",
            pushit::report::thousands(batch.num_rows() as u64)
        );
        scaling_svg(&path, &title, &curves)?;
        ctx.progress(format!("{mode}: chart written to {}", path.display()));
    }
    Ok(report)
}

/// One timed point: `workers` threads, each inserting `inserts` copies of
/// `batch`; returns the wall time from the common start to the last insert.
fn run_point(
    ctx: &Context,
    arm: Arm,
    workers: usize,
    inserts: usize,
    batch: &RecordBatch,
    shape: &Shape,
) -> anyhow::Result<Duration> {
    let setup = ctx.connect()?;
    let table_count = if arm == Arm::PerWorkerTables {
        workers
    } else {
        1
    };
    let tables: Vec<String> = (0..table_count)
        .map(|i| {
            // Each table in its own database: chingest's DDL names tables
            // after the measurement.
            let database = format!("{DATABASE}_{i}");
            let layout = Layout::SeriesId.tables(&database, shape);
            fresh_database(&setup, &database)?;
            setup.execute(&layout.create.iter().map(String::as_str).collect::<Vec<_>>())?;
            Ok(layout.storage)
        })
        .collect::<anyhow::Result<_>>()?;
    settle(ctx, &setup)?;
    // Connections are opened before the clock starts.
    let connections: Vec<Mutex<RawConnection>> = match arm {
        Arm::Shared => vec![Mutex::new(ctx.connect()?)],
        _ => (0..workers)
            .map(|_| ctx.connect().map(Mutex::new))
            .collect::<anyhow::Result<_>>()?,
    };
    let start = Barrier::new(workers + 1);
    let elapsed = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|i| {
                let conn = &connections[i % connections.len()];
                let table = &tables[i % tables.len()];
                let start = &start;
                scope.spawn(move || -> anyhow::Result<()> {
                    start.wait();
                    for _ in 0..inserts {
                        let conn = conn.lock().expect("no worker panics holding it");
                        conn.insert(table, batch.clone())?;
                    }
                    Ok(())
                })
            })
            .collect();
        start.wait();
        let started = Instant::now();
        for handle in handles {
            handle.join().expect("worker thread")?;
        }
        anyhow::Ok(started.elapsed())
    })?;
    drop(connections);
    let per_table = (workers * inserts * batch.num_rows() / tables.len()) as u64;
    for table in &tables {
        verify(&setup, table, per_table)?;
    }
    for i in 0..table_count {
        setup.execute(&[&format!("DROP DATABASE IF EXISTS {DATABASE}_{i} SYNC")])?;
    }
    Ok(elapsed)
}
