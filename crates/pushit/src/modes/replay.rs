//! `pushit replay`: how fast chingest replays its write-ahead log on open.
//!
//! A child process (pushit itself, re-executed) writes TSBS cpu-only line
//! protocol through an `Ingestor` whose batchers never flush, each write
//! synced in the log, then kills itself with SIGKILL: every row is in the
//! log and none in the engine. This process then opens the same data
//! directory — replay inserts every row before `Ingestor::open` returns —
//! and reports the replay's records, rows and time, and the whole open's.
//! The stored count is checked.

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use chingest::{Durability, IngestConfig, Ingestor, WriteOptions};
use pushit::report::{column, Format};
use serde_json::json;

use super::{check_stored, load, per_second};
use crate::Context;

/// Set in the child that writes the log.
const WRITER_ENV: &str = "PUSHIT_REPLAY_WRITER";
const DATABASE: &str = "pushit_replay";

/// Flags of `pushit replay`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The load; each body is one write, one log record.
    #[command(flatten)]
    load: load::LoadArgs,
}

/// Whether this process is the child that writes the log.
fn is_writer() -> bool {
    std::env::var_os(WRITER_ENV).is_some()
}

/// Writes the log in a child process, then replays it here.
pub(crate) fn run(ctx: &Context, args: &Args) -> anyhow::Result<()> {
    let rows = args.load.hosts * args.load.steps;
    if rows == 0 {
        bail!("--hosts and --steps must be positive");
    }
    if is_writer() {
        return write_log_and_die(ctx, args);
    }
    ctx.progress(format!("replay: logging {rows} rows in a child process"));
    let status = Command::new(std::env::current_exe()?)
        .args(["--quiet", "--data-dir"])
        .arg(&ctx.data_dir)
        .arg("replay")
        .args(["--hosts", &args.load.hosts.to_string()])
        .args(["--steps", &args.load.steps.to_string()])
        .args(["--lines-per-body", &args.load.lines_per_body.to_string()])
        .env(WRITER_ENV, "1")
        .status()
        .context("running the writer")?;
    {
        use std::os::unix::process::ExitStatusExt;
        if status.signal() != Some(9) {
            bail!("the writer should have killed itself, but ended with {status}");
        }
    }
    let log_bytes = dir_bytes(&ctx.data_dir.join("wal"))?;
    let runtime = tokio::runtime::Runtime::new()?;
    let mut report = ctx.report(
        "replay",
        vec![
            column("rows", "rows", Format::Count),
            column("log MB", "log_mb", Format::Ratio),
            column("records", "records", Format::Count),
            column("replay s", "replay_seconds", Format::Ratio),
            column("rows/s", "rows_per_s", Format::Count),
            column("open s", "open_seconds", Format::Ratio),
        ],
    );
    runtime.block_on(async {
        ctx.progress("replay: opening the data directory");
        let started = Instant::now();
        let ingestor = Ingestor::open(IngestConfig::new(&ctx.data_dir)).await?;
        let opened = started.elapsed();
        let stats = ingestor.stats();
        let load = |n: &std::sync::atomic::AtomicU64| n.load(std::sync::atomic::Ordering::Relaxed);
        let replayed = load(&stats.replay_rows);
        let replay = Duration::from_millis(load(&stats.replay_millis));
        let count = ingestor
            .query_trusted(
                &format!("SELECT count() FROM {DATABASE}.`cpu.autogen`"),
                "TabSeparated",
            )
            .await?;
        let stored: u64 = String::from_utf8(count)?.trim().parse()?;
        ingestor.close().await?;
        check_stored(&format!("{DATABASE}.cpu"), rows as u64, stored)?;
        check_stored("replayed rows", rows as u64, replayed)?;
        report.push(json!({
            "rows": replayed,
            "log_mb": log_bytes as f64 / 1e6,
            "records": load(&stats.replay_records),
            "replay_seconds": replay.as_secs_f64(),
            "rows_per_s": per_second(rows, replay),
            "open_seconds": opened.as_secs_f64(),
            "lines_per_body": args.load.lines_per_body,
        }));
        anyhow::Ok(())
    })?;
    report.finish();
    Ok(())
}

/// The child: logs every row (fsync), with flushes held back so none
/// reaches the engine, then dies as `kill -9` would.
fn write_log_and_die(ctx: &Context, args: &Args) -> anyhow::Result<()> {
    let mut config = IngestConfig::new(&ctx.data_dir);
    config.flush.max_age = Duration::from_secs(24 * 3600);
    config.flush.max_rows = usize::MAX;
    config.flush.max_bytes = 16 << 30;
    config.max_buffered_bytes = 16 << 30;
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let ingestor = Ingestor::open(config).await?;
        let options = WriteOptions {
            durability: Durability::Fsync,
            ..WriteOptions::default()
        };
        for body in load::bodies(args.load.hosts, args.load.steps, args.load.lines_per_body) {
            ingestor
                .write_lp(DATABASE, "autogen", body.as_bytes(), &options)
                .await?;
        }
        let pid = std::process::id().to_string();
        Command::new("kill").args(["-KILL", &pid]).status()?;
        bail!("SIGKILL did not end the writer")
    })
}

/// Bytes in the files of `dir`.
fn dir_bytes(dir: &std::path::Path) -> anyhow::Result<u64> {
    let mut bytes = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        bytes += entry?.metadata()?.len();
    }
    Ok(bytes)
}
