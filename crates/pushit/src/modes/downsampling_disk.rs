//! `pushit downsampling-disk`: bytes on disk of a downsampled database
//! against the same samples kept whole (docs/downsampling.md). The data:
//! `pushit promql`'s node-exporter CPU counters (`--jobs` × `--instances` ×
//! `--cpus` × 8 modes, a scrape every 15 s) over `--hours`, remote-written
//! into a database downsampled at each `--levels` and into one that is
//! not, on the in-process server. Once the passes have dropped the rows past the
//! first age (no part dropped over two passes), every table of both is
//! merged whole (`OPTIMIZE … FINAL`, as time would) and the engine's bytes
//! per table are reported, with what a day of the finest rollup takes
//! against a day of the rows.

use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use chingest::layout::names::quote_literal;
use pushit::report::{column, Format};
use serde_json::json;

use super::check_stored;
use super::client::counter;
use super::client::{count, wait_visible};
use super::downsampling::wait_for_passes;
use super::prom::write_all;
use super::promql_data::{Data, LOAD_CONNECTIONS};
use super::server::{with_server, Endpoints, ServerArgs};
use crate::Context;

/// Flags of `pushit downsampling-disk`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Jobs (`job` label), 1 to 8.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=8))]
    jobs: u8,
    /// Instances of each job.
    #[arg(long, default_value_t = 2)]
    instances: usize,
    /// CPUs of each instance, a series per CPU and mode (8 modes).
    #[arg(long, default_value_t = 4)]
    cpus: usize,
    /// Hours of scrapes, 15 s apart, ending on the last full hour.
    #[arg(long, default_value_t = 2160)]
    hours: usize,
    /// A downsampled database's levels, comma-separated; once per
    /// database (by default one keeping every aggregate and one keeping
    /// the last sample).
    #[arg(long, default_values = ["30d:5m", "30d:5m:last"])]
    levels: Vec<String>,
    #[command(flatten)]
    server: ServerArgs,
}

pub(crate) fn run(ctx: &Context, args: &Args) -> anyhow::Result<()> {
    if args.instances == 0 || args.cpus == 0 || args.hours == 0 {
        bail!("--instances, --cpus and --hours must be positive");
    }
    if args.server.url.is_some() {
        bail!("downsampling-disk reads the engine's parts: it needs the in-process server");
    }
    let pid = std::process::id();
    let rows_db = format!("pushit_disk_rows_{pid}");
    // Each downsampled database and its levels.
    let mut rolled = Vec::new();
    for (i, text) in args.levels.iter().enumerate() {
        let levels: Vec<&str> = text.split(',').map(str::trim).collect();
        let levels = chingest::Downsampling::parse(&levels)?;
        rolled.push((format!("pushit_disk_rolled{i}_{pid}"), text.clone(), levels));
    }
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as i64;
    let data = Data::generate(
        usize::from(args.jobs),
        args.instances,
        args.cpus,
        args.hours,
        now_ms - 60_000,
    );
    let samples = data.samples() as u64;
    ctx.progress(format!(
        "downsampling-disk: {} series × {} scrapes = {samples} samples",
        data.series.len(),
        data.scrapes
    ));
    let runtime = tokio::runtime::Runtime::new()?;
    let configure = |config: &mut chingest_server::config::ServerConfig| {
        config.downsampling.period = Duration::from_secs(1);
        for (db, _, levels) in &rolled {
            config
                .downsampling
                .databases
                .insert(db.clone(), levels.clone());
        }
    };
    let databases: Vec<&String> = std::iter::once(&rows_db)
        .chain(rolled.iter().map(|(db, _, _)| db))
        .collect();
    runtime.block_on(with_server(
        ctx,
        &args.server,
        configure,
        async |endpoints| {
            for db in &databases {
                let path = format!("/api/v1/write?db={db}");
                let name = format!("downsampling-disk/{db}");
                write_all(
                    ctx,
                    &name,
                    endpoints,
                    &path,
                    data.requests(),
                    LOAD_CONNECTIONS,
                )
                .await?;
            }
            // The rows past the first age go as they are written: only
            // the database kept whole can be counted.
            wait_visible(endpoints, &rows_db, "prometheus", samples).await?;
            check_stored(
                &format!("{rows_db}.prometheus"),
                samples,
                count(endpoints, &rows_db, "prometheus").await?,
            )?;
            until_nothing_dropped(ctx, endpoints).await
        },
    ))?;
    let conn = ctx.connect()?;
    let in_list: Vec<String> = databases.iter().map(|db| quote_literal(db)).collect();
    let in_list = in_list.join(", ");
    let tables = String::from_utf8(conn.query(&format!(
        "SELECT database, name FROM system.tables WHERE database IN ({in_list}) \
         AND engine LIKE '%MergeTree' ORDER BY database, name"
    ))?)?;
    ctx.progress("downsampling-disk: merging every table whole");
    for line in tables.lines() {
        let (db, table) = line.split_once('\t').context("system.tables")?;
        conn.execute(&[&format!("OPTIMIZE TABLE `{db}`.`{table}` FINAL")])?;
    }
    let parts = String::from_utf8(conn.query(&format!(
        "SELECT database, table, sum(rows), sum(bytes_on_disk) FROM system.parts \
         WHERE active AND database IN ({in_list}) GROUP BY database, table ORDER BY database, table"
    ))?)?;
    let mut report = ctx.report(
        "downsampling-disk",
        vec![
            column("database", "database", Format::Text),
            column("table", "table", Format::Text),
            column("rows", "rows", Format::Count),
            column("on disk", "bytes", Format::Mib),
            column("bytes/day ÷ rows'", "over_rows", Format::Ratio),
        ],
    );
    let days = args.hours as f64 / 24.0;
    let parsed: Vec<(String, String, u64, u64)> = parts
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split('\t').collect();
            Some((
                f.first()?.to_string(),
                f.get(1)?.to_string(),
                f.get(2)?.parse().ok()?,
                f.get(3)?.parse().ok()?,
            ))
        })
        .collect();
    let raw = parsed
        .iter()
        .find(|(db, table, _, _)| *db == rows_db && table.starts_with("prometheus"))
        .map(|(_, _, _, bytes)| *bytes as f64 / days)
        .context("the rows' table has no parts")?;
    for (db, table, rows, bytes) in &parsed {
        // A rollup covers every day; the rows kept, their last days only.
        let per_day = *bytes as f64 / days;
        let levels = rolled.iter().find(|(name, _, _)| name == db);
        let side = levels.map_or("rows kept whole".to_owned(), |(_, text, _)| text.clone());
        report.push(json!({
            "database": side,
            "table": table,
            "rows": rows,
            "over_rows": table.starts_with("_rollup").then_some(per_day / raw),
            "bytes": bytes,
            "days": days,
            "samples": samples,
        }));
    }
    report.finish();
    Ok(())
}

/// Waits until two passes in a row drop no part (and at least one was
/// dropped): the rows past the first age are gone.
async fn until_nothing_dropped(ctx: &Context, endpoints: &Endpoints) -> anyhow::Result<()> {
    let dropped = || counter(endpoints, "chingest_downsampling_parts_dropped_total");
    let deadline = Instant::now() + Duration::from_secs(1800);
    loop {
        let before = dropped().await?;
        wait_for_passes(endpoints, 2).await?;
        let after = dropped().await?;
        ctx.progress(format!("downsampling-disk: {after} parts dropped"));
        if after > 0 && after == before {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the passes were still dropping parts after 30 minutes");
        }
    }
}
