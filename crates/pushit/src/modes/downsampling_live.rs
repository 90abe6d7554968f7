//! `pushit downsampling-live`: what downsampling passes cost while live
//! data arrives (docs/downsampling.md). TSBS cpu-only rows of `--hosts`
//! hosts, one row per host every `--every-ms` stamped with the present,
//! are written for `--seconds` into a database that is not downsampled,
//! then as long into one downsampled at `--levels` with a pass every
//! `--period-ms`, alternately for `--rounds`, on the in-process server.
//! Each phase reports its rows, the process's CPU time per thousand rows
//! (client and server: the client's share is the same in both phases) and
//! the time spent in passes. Live rows keep a bucket open across many
//! passes (a 1 m bucket and a pass every 2 s: thirty), as 15 s scrapes do
//! with 5 m buckets and the default 10 s period.

use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use pushit::report::{column, Format};
use serde_json::json;

use super::client::counter;
use super::influxql::bodies;
use super::server::{authorized, http_client, with_server, Endpoints, ServerArgs};
use crate::Context;

/// Flags of `pushit downsampling-live`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Hosts, each a row of TSBS's 10 fields per tick.
    #[arg(long, default_value_t = 2_000)]
    hosts: usize,
    /// Milliseconds between a host's rows.
    #[arg(long, default_value_t = 1_000)]
    every_ms: u64,
    /// Seconds of each phase.
    #[arg(long, default_value_t = 60.0)]
    seconds: f64,
    /// Phases of each database, alternated.
    #[arg(long, default_value_t = 2)]
    rounds: usize,
    /// The downsampled database's levels, comma-separated.
    #[arg(long, default_value = "1h:1m,1d:10m")]
    levels: String,
    /// Milliseconds between downsampling passes.
    #[arg(long, default_value_t = 2_000)]
    period_ms: u64,
    #[command(flatten)]
    server: ServerArgs,
}

/// What one phase took.
struct Phase {
    rows: usize,
    elapsed: Duration,
    cpu_s: f64,
    passes: u64,
    pass_ms: u64,
}

pub(crate) fn run(ctx: &Context, args: &Args) -> anyhow::Result<()> {
    if args.hosts == 0 || args.every_ms == 0 || args.rounds == 0 || args.seconds <= 0.0 {
        bail!("--hosts, --every-ms, --rounds and --seconds must be positive");
    }
    if args.server.url.is_some() {
        bail!("downsampling-live measures its own process's CPU: it needs the in-process server");
    }
    let levels: Vec<&str> = args.levels.split(',').map(str::trim).collect();
    let levels = chingest::Downsampling::parse(&levels)?;
    let pid = std::process::id();
    let (off_db, on_db) = (
        format!("pushit_live_off_{pid}"),
        format!("pushit_live_on_{pid}"),
    );
    let configure = |config: &mut chingest_server::config::ServerConfig| {
        config.downsampling.period = Duration::from_millis(args.period_ms);
        config.downsampling.databases.insert(on_db.clone(), levels);
    };
    let runtime = tokio::runtime::Runtime::new()?;
    let phases = runtime.block_on(with_server(
        ctx,
        &args.server,
        configure,
        async |endpoints| {
            let mut phases = Vec::new();
            for round in 0..args.rounds {
                for (name, db) in [("off", &off_db), ("on", &on_db)] {
                    ctx.progress(format!("downsampling-live: round {round}, {name}"));
                    phases.push((name, phase(endpoints, db, args).await?));
                }
            }
            let failed = counter(endpoints, "chingest_downsampling_errors_total").await?;
            if failed > 0 {
                bail!("{failed} downsampling passes failed (see the server's log)");
            }
            Ok(phases)
        },
    ))?;
    let mut report = ctx.report(
        "downsampling-live",
        vec![
            column("downsampled", "downsampled", Format::Text),
            column("rows/s", "rows_per_s", Format::Count),
            column("CPU ms / 1k rows", "cpu_ms_per_k", Format::Ratio),
            column("passes", "passes", Format::Count),
            column("in passes", "pass_share", Format::Ratio),
            column("CPU ÷ off", "over_off", Format::Ratio),
        ],
    );
    let per_k = |p: &Phase| p.cpu_s * 1e6 / p.rows as f64;
    let off: Vec<f64> = phases
        .iter()
        .filter(|(name, _)| *name == "off")
        .map(|(_, p)| per_k(p))
        .collect();
    let off_mean = off.iter().sum::<f64>() / off.len() as f64;
    for (name, p) in &phases {
        report.push(json!({
            "downsampled": name,
            "rows": p.rows,
            "rows_per_s": (p.rows as f64 / p.elapsed.as_secs_f64()).round(),
            "cpu_s": p.cpu_s,
            "cpu_ms_per_k": per_k(p),
            "passes": p.passes,
            "pass_ms": p.pass_ms,
            "pass_share": p.pass_ms as f64 / p.elapsed.as_millis() as f64,
            "over_off": per_k(p) / off_mean,
            "levels": args.levels,
            "period_ms": args.period_ms,
            "hosts": args.hosts,
            "every_ms": args.every_ms,
        }));
    }
    report.finish();
    Ok(())
}

/// Writes a row per host every `--every-ms`, stamped now, into `db` for
/// `--seconds`.
async fn phase(endpoints: &Endpoints, db: &str, args: &Args) -> anyhow::Result<Phase> {
    let client = http_client()?;
    let url = format!("{}/write?db={db}", endpoints.http);
    let passes = || counter(endpoints, "chingest_downsampling_passes_total");
    let pass_ms = || counter(endpoints, "chingest_downsampling_pass_milliseconds_total");
    let (passes0, pass_ms0, cpu0) = (passes().await?, pass_ms().await?, cpu_seconds()?);
    let started = Instant::now();
    let mut ticks = tokio::time::interval(Duration::from_millis(args.every_ms));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut rows = 0;
    while started.elapsed().as_secs_f64() < args.seconds {
        ticks.tick().await;
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_millis() as i64;
        for body in bodies(args.hosts, 1, now_ms) {
            let r = authorized(endpoints, client.post(&url).body(body))
                .send()
                .await?;
            if !r.status().is_success() {
                bail!("writing into {db}: {}", r.text().await?);
            }
        }
        rows += args.hosts;
    }
    Ok(Phase {
        rows,
        elapsed: started.elapsed(),
        cpu_s: cpu_seconds()? - cpu0,
        passes: passes().await? - passes0,
        pass_ms: pass_ms().await? - pass_ms0,
    })
}

/// This process's CPU time (user and system), in seconds: `/proc/self/stat`
/// counts it in clock ticks, 100 a second on Linux.
fn cpu_seconds() -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // The fields after the command's name (which may hold spaces).
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .context("/proc/self/stat")?
        .1
        .split_whitespace()
        .collect();
    let ticks = |i: usize| -> anyhow::Result<f64> {
        Ok(fields.get(i).context("/proc/self/stat")?.parse::<f64>()?)
    };
    // utime and stime, fields 14 and 15 of the line.
    Ok((ticks(11)? + ticks(12)?) / 100.0)
}
