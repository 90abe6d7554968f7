//! `pushit edits`: deletes and corrections on a loaded table. The TSBS
//! rows are loaded through `/write` (`--steps 10000` makes the 10 M rows
//! the targets speak of); then, `--repeats` times, one host's hour is
//! deleted through `/api/v2/delete`, another host's hour corrected through
//! `/api/v2/update`, and a third host's hour deleted with InfluxQL `DELETE`
//! on `/query`. Each request is timed until it is answered, when queries
//! already see the change; every change is then checked through `/sql`.

use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use pushit::report::{column, Format};
use serde_json::json;

use super::server::{authorized, http_client, sql, with_server, Endpoints, ServerArgs};
use super::{load, millis_at};
use crate::Context;

/// Flags of `pushit edits`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    load: load::LoadArgs,
    /// How many times each kind of edit runs (on other hosts each time).
    #[arg(long, default_value_t = 10)]
    repeats: usize,
    #[command(flatten)]
    server: ServerArgs,
}

/// The kinds of edit, in the order each repeat runs them.
const KINDS: [&str; 3] = [
    "delete (/api/v2/delete)",
    "update (/api/v2/update)",
    "DELETE (InfluxQL)",
];

const HOUR_NS: i64 = 3_600_000_000_000;

pub(crate) fn run(ctx: &Context, args: &Args) -> anyhow::Result<()> {
    let hours = (args.load.steps as i64 * tsbs::INTERVAL_NS / HOUR_NS) as usize;
    if hours == 0 || args.load.hosts < 3 * args.repeats || args.repeats == 0 {
        bail!("edits need at least an hour of data (--steps ≥ 360) and 3 hosts per repeat");
    }
    let mut report = ctx.report(
        "edits",
        vec![
            column("edit", "edit", Format::Text),
            column("rows", "table_rows", Format::Count),
            column("requests", "requests", Format::Count),
            column("p50", "p50_ms", Format::Millis),
            column("max", "max_ms", Format::Millis),
        ],
    );
    let db = "pushit_edits";
    let rows = args.load.hosts * args.load.steps;
    let runtime = tokio::runtime::Runtime::new()?;
    let latencies = runtime.block_on(with_server(
        ctx,
        &args.server,
        |_| {},
        async |endpoints| {
            ctx.progress(format!("edits: loading {rows} rows"));
            load::post_all(&args.load, endpoints, db).await?;
            let mut latencies = vec![Vec::new(); KINDS.len()];
            for repeat in 0..args.repeats {
                ctx.progress(format!("edits: repeat {} of {}", repeat + 1, args.repeats));
                let start = tsbs::START_NS + (repeat % hours) as i64 * HOUR_NS;
                for (kind, times) in latencies.iter_mut().enumerate() {
                    let host = format!("host_{}", 3 * repeat + kind);
                    times.push(edit(endpoints, db, kind, &host, start).await?);
                    check(endpoints, db, kind, &host, start).await?;
                }
            }
            Ok(latencies)
        },
    ))?;
    for (kind, mut times) in KINDS.iter().zip(latencies) {
        times.sort();
        report.push(json!({
            "edit": kind,
            "table_rows": rows,
            "requests": times.len(),
            "p50_ms": millis_at(&times, 0.5),
            "max_ms": millis_at(&times, 1.0),
        }));
    }
    report.finish();
    Ok(())
}

/// Sends one edit of `host`'s hour from `start`; returns how long it took
/// to be answered.
async fn edit(
    endpoints: &Endpoints,
    db: &str,
    kind: usize,
    host: &str,
    start: i64,
) -> anyhow::Result<Duration> {
    let client = http_client()?;
    let rfc3339 = |ns: i64| chrono::DateTime::from_timestamp_nanos(ns).to_rfc3339();
    // The v2 APIs' stop is inclusive.
    let window = json!({
        "start": rfc3339(start),
        "stop": rfc3339(start + HOUR_NS - 1),
        "predicate": format!("_measurement=\"cpu\" AND hostname=\"{host}\""),
    });
    let request = match kind {
        0 => client
            .post(format!("{}/api/v2/delete?bucket={db}", endpoints.http))
            .json(&window),
        1 => {
            let mut body = window;
            body["set"] = json!({ "usage_user": 0 });
            client
                .post(format!("{}/api/v2/update?bucket={db}", endpoints.http))
                .json(&body)
        }
        _ => {
            let q = format!(
                "DELETE FROM cpu WHERE hostname = '{host}' AND time >= {start} AND time < {}",
                start + HOUR_NS
            );
            client
                .post(format!("{}/query", endpoints.http))
                .form(&[("db", db), ("q", &q)])
        }
    };
    let started = Instant::now();
    let response = authorized(endpoints, request).send().await?;
    let took = started.elapsed();
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    if !status.is_success() || text.contains("\"error\"") {
        bail!("{}: {status} {text}", KINDS[kind]);
    }
    Ok(took)
}

/// Checks through `/sql` that `host`'s hour from `start` shows the edit.
async fn check(
    endpoints: &Endpoints,
    db: &str,
    kind: usize,
    host: &str,
    start: i64,
) -> anyhow::Result<()> {
    let (from, to) = (start, start + HOUR_NS);
    let query = format!(
        "SELECT count(), countIf(usage_user != 0) FROM {db}.cpu WHERE hostname = '{host}' \
         AND time >= fromUnixTimestamp64Nano({from}) AND time < fromUnixTimestamp64Nano({to})"
    );
    let answer = sql(&http_client()?, endpoints, &query).await?;
    let (all, nonzero) = answer.trim().split_once('\t').context("count from /sql")?;
    let expected_rows = (HOUR_NS / tsbs::INTERVAL_NS).to_string();
    let ok = match kind {
        1 => all == expected_rows && nonzero == "0",
        _ => all == "0",
    };
    if !ok {
        bail!(
            "{} of {host}: the hour holds {all} rows ({nonzero} with usage_user ≠ 0)",
            KINDS[kind]
        );
    }
    Ok(())
}
