//! `pushit backup`: what a backup costs, against VictoriaMetrics'
//! `vmbackup` and `vmrestore` on the same rows.
//!
//! TSBS cpu-only rows (`--hosts × --steps`) are written to chingest (its
//! own server, in-process) and, unless `--no-victoriametrics`, to a
//! VictoriaMetrics (its line-protocol `/write`). Then, side by side, each
//! gets:
//!
//! - writers beside the backup: `--connections` clients post the same
//!   bodies again (into a database of their own on chingest) for
//!   `--seconds`, then on through the backup; rows/s during it ÷ rows/s in
//!   the `--seconds` before;
//! - a full backup to a directory on the same disk: seconds and bytes
//!   (chingest: `POST /api/v1/admin/backup`; VictoriaMetrics: a snapshot,
//!   then `vmbackup -dst=fs://…`);
//! - 1% more rows (new timestamps), then an incremental backup: the bytes
//!   it wrote (chingest: a new backup with the full one as its base;
//!   VictoriaMetrics: `vmbackup` into the same directory, which uploads
//!   only new parts);
//! - a restore of the latest backup into a new directory (`chingest
//!   restore`, `vmrestore`): seconds.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use pushit::report::{column, Format};
use serde_json::json;

use super::peers::Peer;
use super::server::{authorized, http_client, with_server, Endpoints, ServerArgs};
use crate::Context;

/// Flags of `pushit backup`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Hosts (series), one row each per timestamp.
    #[arg(long, default_value_t = 1_000)]
    hosts: usize,
    /// Timestamps per host.
    #[arg(long, default_value_t = 1_000)]
    steps: usize,
    /// Clients writing beside each backup.
    #[arg(long, default_value_t = 2)]
    connections: usize,
    /// Seconds the writers run before each backup (the rate it is compared
    /// with).
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// The `chingest` binary that restores [default: beside this one].
    #[arg(long, value_name = "PATH")]
    chingest: Option<PathBuf>,
    /// VictoriaMetrics' binaries' directory (`victoria-metrics`,
    /// `vmbackup`, `vmrestore`).
    #[arg(long, value_name = "DIR", default_value = "/usr/bin")]
    victoriametrics_bin: PathBuf,
    /// Only chingest.
    #[arg(long)]
    no_victoriametrics: bool,
    #[command(flatten)]
    server: ServerArgs,
}

/// What one side measured.
#[derive(Debug, Default)]
struct Measured {
    full: Duration,
    full_bytes: u64,
    incremental_bytes: u64,
    restore: Duration,
    writes_before: f64,
    writes_during: f64,
}

pub(crate) fn run(ctx: &Context, args: &Args) -> anyhow::Result<()> {
    if args.hosts == 0 || args.steps < 100 || args.connections == 0 || args.seconds <= 0.0 {
        bail!("--hosts, --connections and --seconds must be positive, --steps at least 100");
    }
    if args.server.url.is_some() {
        bail!("pushit backup runs its own server (it restores in a new directory)");
    }
    let chingest = match &args.chingest {
        Some(path) => path.clone(),
        None => std::env::current_exe()?.with_file_name("chingest"),
    };
    let mut report = ctx.report(
        "backup",
        vec![
            column("side", "side", Format::Text),
            column("rows", "rows", Format::Count),
            column("full s", "full_s", Format::Seconds),
            column("full", "full_bytes", Format::Mib),
            column("MB/s", "full_mb_per_s", Format::Count),
            column("+1% incr", "incremental_bytes", Format::Mib),
            column("incr ÷ full", "incremental_over_full", Format::Percent),
            column("restore s", "restore_s", Format::Seconds),
            column("writes/s before", "writes_before", Format::Count),
            column("during", "writes_during", Format::Count),
            column("÷ before", "during_over_before", Format::Ratio),
        ],
    );
    let rows = args.hosts * args.steps;
    ctx.progress(format!("backup: generating {rows} rows and 1% more"));
    let mut generator = tsbs::CpuOnly::new(args.hosts);
    let bodies = generator.bodies(args.steps, 5_000);
    let extra_steps = (args.steps / 100).max(1);
    let more = split_lines(
        &generator.lines(args.steps..args.steps + extra_steps),
        5_000,
    );
    let work = tempfile::Builder::new()
        .prefix("pushit-backup-")
        .tempdir_in(ctx.data_dir.parent().unwrap_or(Path::new("/tmp")))?;
    let runtime = tokio::runtime::Runtime::new()?;
    let ours = runtime.block_on(with_server(
        ctx,
        &args.server,
        |_| {},
        async |endpoints| {
            chingest_side(
                ctx,
                args,
                endpoints,
                &chingest,
                work.path(),
                (&bodies, &more),
            )
            .await
        },
    ))?;
    report.push(row("chingest", rows, &ours));
    if !args.no_victoriametrics {
        let theirs = runtime.block_on(victoriametrics_side(
            ctx,
            args,
            work.path(),
            (&bodies, &more),
        ))?;
        report.push(row("victoriametrics", rows, &theirs));
    }
    report.finish();
    Ok(())
}

fn row(side: &str, rows: usize, m: &Measured) -> serde_json::Value {
    json!({
        "side": side,
        "rows": rows,
        "full_s": m.full.as_secs_f64(),
        "full_bytes": m.full_bytes,
        "full_mb_per_s": m.full_bytes as f64 / 1e6 / m.full.as_secs_f64(),
        "incremental_bytes": m.incremental_bytes,
        "incremental_over_full": m.incremental_bytes as f64 / m.full_bytes as f64,
        "restore_s": m.restore.as_secs_f64(),
        "writes_before": m.writes_before,
        "writes_during": m.writes_during,
        "during_over_before": m.writes_during / m.writes_before,
    })
}

/// `text`'s lines in bodies of `lines` lines.
fn split_lines(text: &str, lines: usize) -> Vec<String> {
    let all: Vec<&str> = text.lines().collect();
    all.chunks(lines)
        .map(|chunk| chunk.join("\n") + "\n")
        .collect()
}

/// Posts `bodies` to `url`, in order, answered 2xx.
async fn post_all(endpoints: &Endpoints, url: &str, bodies: &[String]) -> anyhow::Result<()> {
    let client = http_client()?;
    for body in bodies {
        let r = authorized(endpoints, client.post(url).body(body.clone()))
            .send()
            .await?;
        if !r.status().is_success() {
            bail!("{url}: {}: {}", r.status(), r.text().await?);
        }
    }
    Ok(())
}

/// Writers posting `bodies` to `url` over and over until stopped; the
/// rows they were answered for.
struct Writers {
    rows: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

impl Writers {
    fn start(endpoints: &Endpoints, url: String, bodies: &[String], connections: usize) -> Writers {
        let (rows, stop) = (
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let tasks = (0..connections)
            .map(|c| {
                let (rows, stop, url, endpoints) =
                    (rows.clone(), stop.clone(), url.clone(), endpoints.clone());
                let bodies: Vec<(String, u64)> = bodies
                    .iter()
                    .skip(c)
                    .step_by(connections)
                    .map(|b| (b.clone(), b.lines().count() as u64))
                    .collect();
                tokio::spawn(async move {
                    let client = http_client()?;
                    for (body, lines) in bodies.iter().cycle() {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let r = authorized(&endpoints, client.post(&url).body(body.clone()))
                            .send()
                            .await?;
                        if !r.status().is_success() {
                            bail!("{url}: {}: {}", r.status(), r.text().await?);
                        }
                        rows.fetch_add(*lines, Ordering::Relaxed);
                    }
                    Ok(())
                })
            })
            .collect();
        Writers { rows, stop, tasks }
    }

    /// Rows per second over `during`.
    async fn rate<T>(&self, during: impl std::future::Future<Output = T>) -> (T, f64) {
        let (before, started) = (self.rows.load(Ordering::Relaxed), Instant::now());
        let out = during.await;
        let rows = self.rows.load(Ordering::Relaxed) - before;
        (out, rows as f64 / started.elapsed().as_secs_f64())
    }

    async fn stop(self) -> anyhow::Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        for task in self.tasks {
            task.await??;
        }
        Ok(())
    }
}

async fn chingest_side(
    ctx: &Context,
    args: &Args,
    endpoints: &Endpoints,
    chingest: &Path,
    work: &Path,
    (bodies, more): (&[String], &[String]),
) -> anyhow::Result<Measured> {
    let db = format!("pushit_backup_{}", std::process::id());
    ctx.progress(format!("backup: loading chingest ({db})"));
    let write = |db: &str| format!("{}/write?db={db}", endpoints.http);
    post_all(endpoints, &write(&db), bodies).await?;
    let writers = Writers::start(
        endpoints,
        write(&format!("{db}_beside")),
        bodies,
        args.connections,
    );
    let ((), writes_before) = writers
        .rate(tokio::time::sleep(Duration::from_secs_f64(args.seconds)))
        .await;
    ctx.progress("backup: chingest full backup");
    let full_dir = work.join("chingest-full");
    let (full, writes_during) = writers.rate(backup(endpoints, &db, &full_dir, None)).await;
    writers.stop().await?;
    let full = full?;
    post_all(endpoints, &write(&db), more).await?;
    ctx.progress("backup: chingest incremental backup");
    let incr_dir = work.join("chingest-incr");
    let incremental = backup(endpoints, &db, &incr_dir, Some(&full_dir)).await?;
    ctx.progress("backup: chingest restore");
    let restored = work.join("chingest-restored");
    let started = Instant::now();
    run_tool(
        chingest,
        &[
            "restore".to_owned(),
            "--from".to_owned(),
            incr_dir.display().to_string(),
            "--data-dir".to_owned(),
            restored.display().to_string(),
        ],
    )
    .await?;
    let restore = started.elapsed();
    let bytes = |report: &serde_json::Value| report["bytes_written"].as_u64().unwrap_or(0);
    Ok(Measured {
        full: Duration::from_millis(full["elapsed_ms"].as_u64().unwrap_or(0)),
        full_bytes: bytes(&full),
        incremental_bytes: bytes(&incremental),
        restore,
        writes_before,
        writes_during,
    })
}

/// Asks the server for a backup of `db`; its report.
async fn backup(
    endpoints: &Endpoints,
    db: &str,
    to: &Path,
    base: Option<&Path>,
) -> anyhow::Result<serde_json::Value> {
    let mut body = json!({ "to": to, "databases": [db] });
    if let Some(base) = base {
        body["base"] = json!(base);
    }
    let url = format!("{}/api/v1/admin/backup", endpoints.http);
    let r = authorized(endpoints, http_client()?.post(&url).json(&body))
        .send()
        .await?;
    if !r.status().is_success() {
        bail!("{url}: {}: {}", r.status(), r.text().await?);
    }
    Ok(r.json().await?)
}

async fn victoriametrics_side(
    ctx: &Context,
    args: &Args,
    work: &Path,
    (bodies, more): (&[String], &[String]),
) -> anyhow::Result<Measured> {
    let bin = |name: &str| args.victoriametrics_bin.join(name);
    let dir = tempfile::Builder::new()
        .prefix("pushit-victoriametrics-")
        .tempdir_in(work)?;
    let storage = dir.path().join("data");
    let storage_flag = format!("-storageDataPath={}", storage.display());
    let flags = {
        let storage_flag = storage_flag.clone();
        move |_: &Path, port: u16| {
            vec![
                storage_flag,
                format!("-httpListenAddr=127.0.0.1:{port}"),
                "-loggerLevel=WARN".to_owned(),
                // TSBS rows are from 2016: kept, not dropped as past the
                // default month.
                "-retentionPeriod=100y".to_owned(),
            ]
        }
    };
    let peer = Peer::start(
        "victoriametrics",
        &bin("victoria-metrics"),
        dir,
        flags,
        "/health",
    )
    .await?;
    let endpoints = peer.endpoints();
    let write = format!("{}/write", peer.url);
    ctx.progress("backup: loading victoriametrics");
    post_all(&endpoints, &write, bodies).await?;
    force_flush(&peer.url).await?;
    peer.wait_idle(ctx).await?;
    let writers = Writers::start(&endpoints, write.clone(), bodies, args.connections);
    let ((), writes_before) = writers
        .rate(tokio::time::sleep(Duration::from_secs_f64(args.seconds)))
        .await;
    ctx.progress("backup: victoriametrics full backup (snapshot + vmbackup)");
    let dst = work.join("victoriametrics-backup");
    let (full, writes_during) = writers
        .rate(vmbackup(&bin("vmbackup"), &peer.url, &storage_flag, &dst))
        .await;
    writers.stop().await?;
    let full = full?;
    let full_files = files(&dst)?;
    post_all(&endpoints, &write, more).await?;
    force_flush(&peer.url).await?;
    ctx.progress("backup: victoriametrics incremental backup");
    vmbackup(&bin("vmbackup"), &peer.url, &storage_flag, &dst).await?;
    let incremental_bytes = files(&dst)?
        .into_iter()
        .filter(|(path, size)| full_files.get(path) != Some(size))
        .map(|(_, size)| size)
        .sum();
    ctx.progress("backup: vmrestore");
    let restored = work.join("victoriametrics-restored");
    let started = Instant::now();
    run_tool(
        &bin("vmrestore"),
        &[
            format!("-src=fs://{}", dst.display()),
            format!("-storageDataPath={}", restored.display()),
        ],
    )
    .await?;
    Ok(Measured {
        full,
        full_bytes: full_files.values().sum(),
        incremental_bytes,
        restore: started.elapsed(),
        writes_before,
        writes_during,
    })
}

/// VictoriaMetrics makes what it was sent searchable and its parts
/// durable.
async fn force_flush(url: &str) -> anyhow::Result<()> {
    http_client()?
        .get(format!("{url}/internal/force_flush"))
        .send()
        .await?
        .error_for_status()?;
    Ok(())
}

/// A snapshot, then `vmbackup` of it into `dst` (then the snapshot
/// deleted): the time both took.
async fn vmbackup(
    binary: &Path,
    url: &str,
    storage_flag: &str,
    dst: &Path,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let client = http_client()?;
    let created: serde_json::Value = client
        .get(format!("{url}/snapshot/create"))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let name = created["snapshot"]
        .as_str()
        .with_context(|| format!("/snapshot/create answered {created}"))?
        .to_owned();
    run_tool(
        binary,
        &[
            storage_flag.to_owned(),
            format!("-snapshotName={name}"),
            format!("-dst=fs://{}", dst.display()),
        ],
    )
    .await?;
    let elapsed = started.elapsed();
    client
        .get(format!("{url}/snapshot/delete?snapshot={name}"))
        .send()
        .await?
        .error_for_status()?;
    Ok(elapsed)
}

/// Runs `binary` with `args` to its end (off the async workers).
async fn run_tool(binary: &Path, args: &[String]) -> anyhow::Result<()> {
    let mut command = std::process::Command::new(binary);
    command.args(args);
    let out = tokio::task::spawn_blocking(move || command.output())
        .await?
        .with_context(|| format!("running {}", binary.display()))?;
    if !out.status.success() {
        bail!(
            "{}: {}",
            binary.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// Every file under `dir` and its size.
fn files(dir: &Path) -> anyhow::Result<BTreeMap<PathBuf, u64>> {
    let mut found = BTreeMap::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            match entry.file_type()?.is_dir() {
                true => pending.push(entry.path()),
                false => {
                    found.insert(entry.path(), entry.metadata()?.len());
                }
            }
        }
    }
    Ok(found)
}
