//! `pushit`: sweeps the levers of embedded chDB ingest (layout, batch size,
//! connections, Buffer tables) and chingest end to end over HTTP and gRPC
//! and through its log's replay, and prints the seed's tables for the
//! machine it runs on.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use pushit::engine::RawConnection;
use pushit::layouts::{Layout, Shape};
use pushit::report::{Column, Report};

mod modes;

/// The allocator of `chingest serve` (crates/server/src/main.rs), for the
/// server started in this process.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Sweeps every lever of embedded chDB ingest, and chingest end to end, on
/// this machine.
///
/// Data is generated before any timing starts, and every run checks that the
/// engine stored exactly the rows it inserted. Results are a table on the
/// terminal, or one JSON object per row with --json.
#[derive(Debug, Parser)]
#[command(name = "pushit", version)]
struct Cli {
    #[command(flatten)]
    common: Common,
    #[command(subcommand)]
    mode: Mode,
}

/// Options every mode takes.
#[derive(Debug, clap::Args)]
struct Common {
    /// Print one JSON object per result row instead of a table.
    #[arg(long, global = true)]
    json: bool,
    /// Mark each result row `≥ target: yes/no` against this many rows/s.
    #[arg(long, global = true, value_name = "ROWS_PER_S")]
    target: Option<f64>,
    /// Measure each point this many times and report the median.
    #[arg(long, global = true, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    runs: u32,
    /// Skip the untimed warm-up insert. The first measurement of the process
    /// is then reported on its own row, labelled `cold`; every other row is
    /// `warm`.
    #[arg(long, global = true)]
    cold: bool,
    /// The engine's data directory. Default: a temporary directory, removed
    /// at exit.
    #[arg(long, global = true)]
    data_dir: Option<PathBuf>,
    /// Seconds to rest before each measured run, after the previous run's
    /// merges and writeback are done. On shared or turbo-limited machines a
    /// run right after a heavy one is measurably slower.
    #[arg(long, global = true, default_value_t = 0.0, value_name = "SECONDS")]
    pause: f64,
    /// No progress messages on stderr.
    #[arg(long, short, global = true)]
    quiet: bool,
}

#[derive(Debug, Subcommand)]
enum Mode {
    /// The same samples stored five ways (cols, map, series_id, series_id +
    /// long, series_id through a Buffer table) on one connection: samples/s,
    /// rows/s, conversion share, bytes on disk.
    Layouts(modes::layouts::Args),
    /// Rows per insert, swept on one connection into chingest's fact table.
    Batch(modes::batch::Args),
    /// Workers swept over three arms: one shared connection, a connection
    /// per worker into its own table, a connection per worker into one table.
    Workers(modes::workers::WorkersArgs),
    /// Workers swept past the core count (a connection and a table each)
    /// to find where throughput tops out.
    Ceiling(modes::workers::CeilingArgs),
    /// Small frequent flushes, direct vs through Buffer tables, into one
    /// table and fanned out over retention policies × measurements.
    Flush(modes::flush::Args),
    /// End to end: TSBS cpu-only line protocol posted to chingest over HTTP,
    /// against the same rows inserted straight into the engine.
    Http(modes::http::Args),
    /// End to end over every path in one run: HTTP line protocol, gRPC line
    /// protocol, gRPC typed points and gRPC Arrow streams, against the same
    /// rows inserted straight into the engine.
    Grpc(modes::http::Args),
    /// Queries at concurrency N over keep-alive HTTP (`clickhouse-benchmark`
    /// style): QPS, rows/s, MiB/s, latency percentiles, against the same
    /// queries on the engine.
    Query(modes::query::Args),
    /// Prometheus remote write 1.0 as Prometheus sends it: a scrape load in
    /// snappy-compressed requests of 500 samples, samples/s end to end.
    Prom(modes::prom::Args),
    /// PromQL and Prometheus's HTTP API against Prometheus 2.42 and
    /// VictoriaMetrics 1.79 on the same day of node-exporter scrapes: a
    /// dashboard panel's QPS, a wide aggregation's, series' and label
    /// values' latency, each as a ratio to the faster peer; with
    /// --dashboard, what a refreshing Grafana node-exporter dashboard asks.
    Promql(modes::promql::Args),
    /// InfluxQL as a Grafana InfluxDB dashboard asks it, against InfluxDB
    /// 1.6 on the same recent TSBS rows: each panel's QPS and latency over
    /// moving ranges, as a ratio to InfluxDB's.
    Influxql(modes::influxql::Args),
    /// Long-range InfluxQL panels (30 days at 1 h, the fleet) on a
    /// downsampled database against the same rows not downsampled, in one
    /// server: each panel's QPS and latency, rollups ÷ rows.
    Downsampling(modes::downsampling::Args),
    /// Bytes on disk of a downsampled database (node-exporter counters,
    /// 90 days, `30d:5m`) against the same samples kept whole: each
    /// table's, and a day of the rollup ÷ a day of the rows.
    DownsamplingDisk(modes::downsampling_disk::Args),
    /// What downsampling passes cost while live rows arrive: CPU per
    /// thousand rows into a downsampled database ÷ into one that is not,
    /// and the time spent in passes.
    DownsamplingLive(modes::downsampling_live::Args),
    /// What a downsampling pass costs when nothing happened: the
    /// milliseconds of each pass over many quiet tables, and per table.
    DownsamplingIdle(modes::downsampling_idle::Args),
    /// Backups on loaded TSBS rows against VictoriaMetrics' vmbackup: a full
    /// backup's seconds and MB/s, the write rate beside it ÷ before, an
    /// incremental one's bytes after 1% more rows, a restore's seconds.
    Backup(modes::backup::Args),
    /// OTLP gauges as an OpenTelemetry Collector sends them: host metrics
    /// in requests of ~8,192 points over OTLP/gRPC (or HTTP), points/s end
    /// to end.
    Otlp(modes::otlp::Args),
    /// Deletes and corrections on a loaded table: one host's hour deleted
    /// through /api/v2/delete, another's corrected through /api/v2/update,
    /// a third's deleted with InfluxQL DELETE, each timed until answered.
    Edits(modes::edits::Args),
    /// The server's memory under a line-protocol load, in its own
    /// process: peak resident memory against the memory budget, and how it
    /// settles after (`--connections 128 --lines-per-body 50000 --steps
    /// 6400`: the overload case).
    Memory(modes::memory::Args),
    /// Replay of the write-ahead log on open: a child process logs TSBS
    /// rows and is killed before inserting any; this one opens the data
    /// directory and reports how fast the log was replayed.
    Replay(modes::replay::Args),
}

/// The sample shape flags shared by the engine modes.
#[derive(Debug, Clone, clap::Args)]
struct ShapeArgs {
    /// Distinct series.
    #[arg(long, default_value_t = 1_000)]
    series: usize,
    /// Timestamps per series.
    #[arg(long, default_value_t = 1_000)]
    timestamps: usize,
    /// Tags per series.
    #[arg(long, default_value_t = 6)]
    tags: usize,
    /// Integer fields per sample.
    #[arg(long, default_value_t = 5)]
    fields: usize,
}

impl ShapeArgs {
    fn shape(&self) -> Shape {
        Shape {
            series: self.series.max(1),
            timestamps: self.timestamps.max(1),
            tags: self.tags.max(1),
            fields: self.fields.max(1),
        }
    }
}

/// What every mode needs: where the engine lives and how to report.
struct Context {
    data_dir: PathBuf,
    common: Common,
    /// Set until the first measurement when `--cold` is given.
    cold_pending: std::cell::Cell<bool>,
}

/// One reported measurement of a point: its label (`cold`/`warm`), timed
/// duration, and whatever else the run measured.
struct Measured<T> {
    label: &'static str,
    elapsed: Duration,
    extra: T,
}

impl Context {
    fn connect(&self) -> anyhow::Result<RawConnection> {
        RawConnection::open(&self.data_dir).context("opening an engine connection")
    }

    fn progress(&self, message: impl std::fmt::Display) {
        if !self.common.quiet {
            eprintln!("pushit: {message}");
        }
    }

    fn report(&self, mode: &'static str, columns: Vec<Column>) -> Report {
        Report::new(mode, columns, self.common.target, self.common.json)
    }

    /// Runs `run` (`--runs` times) and returns its median; under `--cold`,
    /// the process's very first run comes first, on its own. `run` sets up
    /// untimed, returns the timed duration, and verifies what it stored.
    fn measure<T>(
        &self,
        mut run: impl FnMut() -> anyhow::Result<(Duration, T)>,
    ) -> anyhow::Result<Vec<Measured<T>>> {
        let mut reported = Vec::new();
        if self.cold_pending.replace(false) {
            let (elapsed, extra) = run()?;
            reported.push(Measured {
                label: "cold",
                elapsed,
                extra,
            });
        }
        let mut runs = (0..self.common.runs)
            .map(|_| run())
            .collect::<anyhow::Result<Vec<_>>>()?;
        runs.sort_by_key(|(elapsed, _)| *elapsed);
        let (elapsed, extra) = runs.swap_remove(runs.len() / 2);
        reported.push(Measured {
            label: "warm",
            elapsed,
            extra,
        });
        Ok(reported)
    }

    /// Boots the engine and runs one untimed insert, so the first
    /// measurement does not pay for the engine's first use.
    fn warm_up(&self) -> anyhow::Result<()> {
        let conn = self.connect()?;
        let shape = Shape {
            series: 1_000,
            timestamps: 20,
            tags: 6,
            fields: 5,
        };
        let tables = Layout::SeriesId.tables("pushit_warmup", &shape);
        modes::fresh_database(&conn, "pushit_warmup")?;
        conn.execute(&tables.create.iter().map(String::as_str).collect::<Vec<_>>())?;
        for batch in Layout::SeriesId.batches(&shape, 10_000)? {
            conn.insert(&tables.insert_into, batch)?;
        }
        conn.execute(&["DROP DATABASE pushit_warmup SYNC"])?;
        Ok(())
    }
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let temp;
    let data_dir = match &cli.common.data_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            dir.clone()
        }
        None => {
            temp = tempfile::Builder::new().prefix("pushit-").tempdir()?;
            temp.path().to_owned()
        }
    };
    let ctx = Context {
        data_dir: data_dir.canonicalize()?,
        cold_pending: std::cell::Cell::new(cli.common.cold),
        common: cli.common,
    };
    ctx.progress(format!(
        "engine {} on {} cores, data in {}",
        chingest::engine_version(),
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        ctx.data_dir.display()
    ));
    // Replay's engine must not open before its child has written the log
    // (one process per data directory), nor run an insert before the replay;
    // memory's engine is its server's, in a process of its own.
    if !ctx.common.cold && !matches!(cli.mode, Mode::Replay(_) | Mode::Memory(_)) {
        ctx.warm_up().context("warm-up")?;
    }
    match cli.mode {
        Mode::Layouts(args) => modes::layouts::run(&ctx, &args),
        Mode::Batch(args) => modes::batch::run(&ctx, &args),
        Mode::Workers(args) => modes::workers::run_workers(&ctx, &args),
        Mode::Ceiling(args) => modes::workers::run_ceiling(&ctx, &args),
        Mode::Flush(args) => modes::flush::run(&ctx, &args),
        Mode::Http(args) => modes::http::run(&ctx, &args, "http"),
        Mode::Grpc(args) => modes::http::run(&ctx, &args, "grpc"),
        Mode::Replay(args) => modes::replay::run(&ctx, &args),
        Mode::Memory(args) => modes::memory::run(&ctx, &args),
        Mode::Query(args) => modes::query::run(&ctx, &args),
        Mode::Influxql(args) => modes::influxql::run(&ctx, &args),
        Mode::Downsampling(args) => modes::downsampling::run(&ctx, &args),
        Mode::DownsamplingDisk(args) => modes::downsampling_disk::run(&ctx, &args),
        Mode::DownsamplingLive(args) => modes::downsampling_live::run(&ctx, &args),
        Mode::DownsamplingIdle(args) => modes::downsampling_idle::run(&ctx, &args),
        Mode::Backup(args) => modes::backup::run(&ctx, &args),
        Mode::Edits(args) => modes::edits::run(&ctx, &args),
        Mode::Prom(args) => modes::prom::run(&ctx, &args),
        Mode::Promql(args) => modes::promql::run(&ctx, &args),
        Mode::Otlp(args) => modes::otlp::run(&ctx, &args),
    }
}
