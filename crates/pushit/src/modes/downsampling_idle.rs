//! `pushit downsampling-idle`: what a downsampling pass costs when nothing
//! happened (docs/downsampling.md). One row into each of `--tables`
//! measurements of a downsampled database on the in-process server; once
//! their first passes are done, the passes over `--seconds` of quiet: the
//! milliseconds of each, and per table; with `--cluster`, also the time a
//! node spends each period learning the shards' rollups.

use std::time::Duration;

use anyhow::bail;
use pushit::report::{column, Format};
use serde_json::json;

use super::client::counter;
use super::server::{authorized, http_client, with_server, ServerArgs};
use crate::Context;

/// Flags of `pushit downsampling-idle`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Measurements (fact tables) of the downsampled database.
    #[arg(long, default_value_t = 100)]
    tables: usize,
    /// Seconds of quiet measured.
    #[arg(long, default_value_t = 30.0)]
    seconds: f64,
    /// Milliseconds between downsampling passes.
    #[arg(long, default_value_t = 1_000)]
    period_ms: u64,
    #[command(flatten)]
    server: ServerArgs,
}

pub(crate) fn run(ctx: &Context, args: &Args) -> anyhow::Result<()> {
    if args.tables == 0 || args.seconds <= 0.0 || args.period_ms == 0 {
        bail!("--tables, --seconds and --period-ms must be positive");
    }
    if args.server.url.is_some() {
        bail!("downsampling-idle configures its server's passes: it needs the in-process server");
    }
    let db = format!("pushit_idle_{}", std::process::id());
    let configure = |config: &mut chingest_server::config::ServerConfig| {
        config.downsampling.period = Duration::from_millis(args.period_ms);
        let levels = chingest::Downsampling::parse(&["1d:5m", "7d:1h"]).expect("levels parse");
        config.downsampling.databases.insert(db.clone(), levels);
    };
    let runtime = tokio::runtime::Runtime::new()?;
    let (passes, pass_ms, learn_ms) = runtime.block_on(with_server(
        ctx,
        &args.server,
        configure,
        async |endpoints| {
            let hour_ago_ns = (std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)?
                .as_secs()
                - 3600)
                * 1_000_000_000;
            let body: Vec<String> = (0..args.tables)
                .map(|i| format!("m{i},host=a value={i} {hour_ago_ns}"))
                .collect();
            let url = format!("{}/write?db={db}", endpoints.http);
            let r = authorized(endpoints, http_client()?.post(url).body(body.join("\n")))
                .send()
                .await?;
            if !r.status().is_success() {
                bail!("writing into {db}: {}", r.text().await?);
            }
            let passes = || counter(endpoints, "chingest_downsampling_passes_total");
            let pass_ms = || counter(endpoints, "chingest_downsampling_pass_milliseconds_total");
            // The first pass over each table is not idle; nor, at its
            // start, the one that sees it made.
            ctx.progress("downsampling-idle: first passes");
            let first = passes().await?;
            while passes().await? < first + 3 {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            ctx.progress("downsampling-idle: quiet");
            let learn_ms = || counter(endpoints, "chingest_downsampling_learn_milliseconds_total");
            let (passes0, ms0, learn0) = (passes().await?, pass_ms().await?, learn_ms().await?);
            tokio::time::sleep(Duration::from_secs_f64(args.seconds)).await;
            let (passes1, ms1, learn1) = (passes().await?, pass_ms().await?, learn_ms().await?);
            let failed = counter(endpoints, "chingest_downsampling_errors_total").await?;
            if failed > 0 {
                bail!("{failed} downsampling passes failed (see the server's log)");
            }
            Ok((passes1 - passes0, ms1 - ms0, learn1 - learn0))
        },
    ))?;
    let mut report = ctx.report(
        "downsampling-idle",
        vec![
            column("tables", "tables", Format::Count),
            column("passes", "passes", Format::Count),
            column("ms / pass", "ms_per_pass", Format::Ratio),
            column("ms / table", "ms_per_table", Format::Ratio),
            column("learning ms / pass", "learn_ms_per_pass", Format::Ratio),
        ],
    );
    let per_pass = pass_ms as f64 / passes.max(1) as f64;
    report.push(json!({
        "tables": args.tables,
        "passes": passes,
        "ms_per_pass": per_pass,
        "ms_per_table": per_pass / args.tables as f64,
        "learn_ms_per_pass": learn_ms as f64 / passes.max(1) as f64,
        "period_ms": args.period_ms,
        "seconds": args.seconds,
    }));
    report.finish();
    Ok(())
}
