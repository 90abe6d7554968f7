//! `pushit http`: chingest end to end. TSBS cpu-only line protocol (10
//! tags, 10 integer fields per line) is generated first, then posted over
//! keep-alive connections to a chingest server (its own, in-process, or a
//! running one at `--url`); each request is acknowledged only once its rows
//! are committed, and the stored count is checked at the end.
//!
//! In the same run, before the HTTP arm, the same rows are inserted straight
//! into this process's engine as pre-built fact-table batches: the engine's
//! rate on this machine, and the report's end-to-end ÷ engine ratio.
//! `--runs` repeats the engine arm only; the HTTP arm posts the load once.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use chingest_server::config::ServerConfig;
use pushit::engine::{tsbs_fact_batch, tsbs_fact_table_sql};
use pushit::report::{column, Format};
use serde_json::json;

use super::{fresh_database, per_second, settle, verify};
use crate::Context;

const ENGINE_DATABASE: &str = "pushit_engine";

/// Flags of `pushit http`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Hosts (series), one line each per timestamp.
    #[arg(long, default_value_t = 1_000)]
    hosts: usize,
    /// Timestamps per host.
    #[arg(long, default_value_t = 1_000)]
    steps: usize,
    /// Lines per request body.
    #[arg(long, default_value_t = 5_000)]
    lines_per_body: usize,
    /// Concurrent keep-alive connections.
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// A running chingest to post to, e.g. http://127.0.0.1:8086. Default:
    /// start one in this process, on the data directory.
    #[arg(long)]
    url: Option<String>,
    /// Server config file for the in-process server (default: built-in
    /// defaults).
    #[arg(long, value_name = "PATH", conflicts_with = "url")]
    server_config: Option<std::path::PathBuf>,
    /// Token for a server that requires one.
    #[arg(long, env = "CHINGEST_AUTH_TOKEN")]
    token: Option<String>,
    /// Database to write to. Default: `pushit_<unix time>`, new each run.
    #[arg(long)]
    database: Option<String>,
    /// Rows per insert in the engine arm.
    #[arg(long, default_value_t = 200_000)]
    engine_batch_rows: usize,
}

/// Runs the engine arm, then the HTTP arm, and reports both and their ratio.
pub(crate) fn run(ctx: &Context, args: &Args) -> anyhow::Result<()> {
    let rows = args.hosts * args.steps;
    if rows == 0 {
        bail!("--hosts and --steps must be positive");
    }
    let mut report = ctx.report(
        "http",
        vec![
            column("path", "path", Format::Text),
            column("rows", "rows", Format::Count),
            column("rows/s", "rows_per_s", Format::Count),
            column("samples/s", "samples_per_s", Format::Count),
            column("MB/s", "mb_per_s", Format::Ratio),
            column("p50", "p50_ms", Format::Millis),
            column("p95", "p95_ms", Format::Millis),
            column("p99", "p99_ms", Format::Millis),
            column("run", "run", Format::Text),
        ],
    );
    let fields = tsbs::FIELDS.len();

    // The engine first: the HTTP arm's parts are then not being merged
    // under it, and neither arm's data is held during the other.
    let engine_rate = {
        ctx.progress(format!("http: building {rows} rows for the engine arm"));
        let batches = engine_batches(args)?;
        let conn = ctx.connect()?;
        let table = format!("{ENGINE_DATABASE}.cpu");
        let measured = ctx.measure(|| {
            fresh_database(&conn, ENGINE_DATABASE)?;
            conn.execute(&[&tsbs_fact_table_sql(&table)])?;
            settle(ctx, &conn)?;
            let started = Instant::now();
            for batch in &batches {
                conn.insert(&table, batch.clone())?;
            }
            let elapsed = started.elapsed();
            verify(&conn, &table, rows as u64)?;
            Ok((elapsed, ()))
        })?;
        conn.execute(&[&format!("DROP DATABASE {ENGINE_DATABASE} SYNC")])?;
        let mut rate = 0.0;
        for m in measured {
            rate = per_second(rows, m.elapsed);
            report.push(json!({
                "path": "engine",
                "rows": rows,
                "batch_rows": args.engine_batch_rows,
                "seconds": m.elapsed.as_secs_f64(),
                "rows_per_s": rate,
                "samples_per_s": rate * fields as f64,
                "run": m.label,
            }));
        }
        rate
    };

    ctx.progress(format!(
        "http: generating {rows} lines in bodies of {}",
        args.lines_per_body
    ));
    let bodies = tsbs::CpuOnly::new(args.hosts).bodies(args.steps, args.lines_per_body.max(1));
    settle(ctx, &ctx.connect()?)?;
    let runtime = tokio::runtime::Runtime::new()?;
    let e2e = runtime.block_on(post_all(ctx, args, bodies))?;
    let e2e_rate = per_second(e2e.rows, e2e.elapsed);
    let p = |q: f64| {
        let latencies = &e2e.latencies;
        latencies[((latencies.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3
    };
    report.push(json!({
        "path": "http",
        "rows": e2e.rows,
        "connections": args.connections,
        "lines_per_body": args.lines_per_body,
        "requests": e2e.latencies.len(),
        "seconds": e2e.elapsed.as_secs_f64(),
        "rows_per_s": e2e_rate,
        "samples_per_s": e2e_rate * fields as f64,
        "mb_per_s": e2e.bytes as f64 / 1e6 / e2e.elapsed.as_secs_f64(),
        "p50_ms": p(0.50),
        "p95_ms": p(0.95),
        "p99_ms": p(0.99),
        "run": e2e.label,
    }));
    report.finish();
    report.summary(json!({
        "e2e_rows_per_s": e2e_rate,
        "engine_rows_per_s": engine_rate,
        "e2e_over_engine": e2e_rate / engine_rate,
    }));
    Ok(())
}

/// The rows of the load as fact-table batches of `engine_batch_rows`.
fn engine_batches(args: &Args) -> anyhow::Result<Vec<chingest::arrow::array::RecordBatch>> {
    let mut generator = tsbs::CpuOnly::new(args.hosts);
    let steps_per_batch = (args.engine_batch_rows / args.hosts).max(1);
    (0..args.steps)
        .step_by(steps_per_batch)
        .map(|first| {
            let body = generator.lines(first..(first + steps_per_batch).min(args.steps));
            Ok(tsbs_fact_batch(&body)?)
        })
        .collect()
}

/// What the HTTP arm measured.
struct Posted {
    rows: usize,
    bytes: usize,
    elapsed: Duration,
    /// Sorted.
    latencies: Vec<Duration>,
    label: &'static str,
}

/// Starts the in-process server unless `--url` names one, posts every body,
/// checks the stored count, and stops the server it started.
async fn post_all(ctx: &Context, args: &Args, mut bodies: Vec<String>) -> anyhow::Result<Posted> {
    let server = match &args.url {
        Some(_) => None,
        None => {
            let mut config = match &args.server_config {
                Some(path) => ServerConfig::from_file(path)?,
                None => ServerConfig::default(),
            };
            // One engine per process: the server shares this data path.
            config.data_dir = ctx.data_dir.clone();
            config.http_addr = "127.0.0.1:0".parse()?;
            config.grpc_addr = "127.0.0.1:0".parse()?;
            config.log = "warn".into();
            config.auth_tokens.extend(args.token.clone());
            Some(chingest_server::start(config).await?)
        }
    };
    let base = match (&args.url, &server) {
        (Some(url), _) => url.trim_end_matches('/').to_owned(),
        (None, Some(server)) => format!("http://{}", server.addr),
        (None, None) => unreachable!("a server was started"),
    };
    let result = post_to(ctx, args, &base, &mut bodies).await;
    if let Some(server) = server {
        server.shutdown().await?;
    }
    result
}

async fn post_to(
    ctx: &Context,
    args: &Args,
    base: &str,
    bodies: &mut Vec<String>,
) -> anyhow::Result<Posted> {
    let client = reqwest::Client::builder().no_proxy().build()?;
    let auth = |request: reqwest::RequestBuilder| match &args.token {
        Some(token) => request.header("Authorization", format!("Token {token}")),
        None => request,
    };
    let ready_by = Instant::now() + Duration::from_secs(30);
    loop {
        match client.get(format!("{base}/ready")).send().await {
            Ok(r) if r.status().is_success() => break,
            _ if Instant::now() > ready_by => bail!("{base}/ready did not answer 200 within 30 s"),
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    let database = args.database.clone().unwrap_or_else(|| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        format!("pushit_{}", now.as_millis())
    });
    let url = format!("{base}/write?db={database}");
    let total_rows = args.hosts * args.steps;

    // The first body creates the database, the table and every series;
    // unless --cold, it is sent before the clock starts.
    let mut timed_rows = total_rows;
    let label = if ctx.cold_pending.replace(false) {
        "cold"
    } else {
        let first = bodies.remove(0);
        timed_rows -= first.lines().count();
        send(&client, auth(client.post(&url)), first).await?;
        "warm"
    };
    let bytes: usize = bodies.iter().map(String::len).sum();
    ctx.progress(format!(
        "http: posting {} bodies over {} connections to {base}",
        bodies.len(),
        args.connections
    ));
    // Sent bodies are freed as they go: the client holds the load once.
    let queue = Arc::new(Mutex::new(std::mem::take(bodies)));
    let started = Instant::now();
    let tasks: Vec<_> = (0..args.connections.max(1))
        .map(|_| {
            let (client, queue) = (client.clone(), queue.clone());
            let request = auth(client.post(&url));
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                loop {
                    let Some(body) = queue.lock().expect("queue").pop() else {
                        break;
                    };
                    let sent = Instant::now();
                    let request = request.try_clone().expect("a bodiless request clones");
                    send(&client, request, body).await?;
                    latencies.push(sent.elapsed());
                }
                anyhow::Ok(latencies)
            })
        })
        .collect();
    let progress = report_progress(ctx, queue.clone());
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await??);
    }
    let elapsed = started.elapsed();
    progress.abort();

    let stored = auth(client.get(format!("{base}/sql")))
        .query(&[
            (
                "query",
                format!("SELECT count() FROM `{database}`.`cpu.autogen`"),
            ),
            ("format", "TabSeparated".to_owned()),
        ])
        .send()
        .await?
        .error_for_status()?
        .text()
        .await?;
    let stored: u64 = stored.trim().parse().context("count from /sql")?;
    if stored != total_rows as u64 {
        return Err(pushit::Error::Verify {
            table: format!("{database}.cpu"),
            expected: total_rows as u64,
            stored,
        }
        .into());
    }
    latencies.sort();
    Ok(Posted {
        rows: timed_rows,
        bytes,
        elapsed,
        latencies,
        label,
    })
}

/// Posts one body and fails unless it was accepted in full (204).
async fn send(
    client: &reqwest::Client,
    request: reqwest::RequestBuilder,
    body: String,
) -> anyhow::Result<()> {
    let response = client.execute(request.body(body).build()?).await?;
    if response.status() != reqwest::StatusCode::NO_CONTENT {
        let status = response.status();
        bail!(
            "write answered {status}: {}",
            response.text().await.unwrap_or_default()
        );
    }
    Ok(())
}

/// Prints how many bodies are left every two seconds, until aborted.
fn report_progress(ctx: &Context, queue: Arc<Mutex<Vec<String>>>) -> tokio::task::JoinHandle<()> {
    let quiet = ctx.common.quiet;
    tokio::spawn(async move {
        let total = queue.lock().expect("queue").len().max(1);
        loop {
            tokio::time::sleep(Duration::from_secs(2)).await;
            let left = queue.lock().expect("queue").len();
            if !quiet {
                eprintln!(
                    "pushit: http: {:.0}% sent",
                    100.0 * (total - left) as f64 / total as f64
                );
            }
        }
    })
}
