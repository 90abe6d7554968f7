//! The client harness the end-to-end modes share (`http`, `grpc`, `prom`,
//! `otlp`, `memory`, `promql`): a load sent over N concurrent connections
//! with its latencies ([`drive`], [`Sent`]), and what is stored afterwards,
//! read back through `/sql` ([`count`], [`wait_visible`]) or from this
//! process's engine ([`bytes_per_value`]).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;

use super::server::{authorized, http_client, sql, Endpoints};
use crate::Context;

/// What one path measured.
pub(super) struct Sent {
    pub(super) rows: usize,
    pub(super) bytes: usize,
    /// When the clock started: the first timed request.
    pub(super) started: Instant,
    /// From `started` until the last request was answered.
    pub(super) elapsed: Duration,
    /// Per request (per stream for Arrow), sorted.
    pub(super) latencies: Vec<Duration>,
    pub(super) label: &'static str,
}

/// Sends `items` over `connections` concurrent workers with `send`; the
/// first item goes alone, before the clock starts, unless `--cold`. Items
/// are freed as they are sent: the client holds the load once.
pub(super) async fn drive<T, F, Fut>(
    ctx: &Context,
    name: &str,
    mut items: Vec<T>,
    connections: usize,
    sizes: impl Fn(&T) -> (usize, usize),
    send: F,
) -> anyhow::Result<Sent>
where
    T: Send + 'static,
    F: Fn(usize, T) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send,
{
    let send = Arc::new(send);
    let label = if ctx.cold_pending.replace(false) || items.len() < 2 {
        "cold"
    } else {
        let first = items.remove(0);
        send(0, first).await?;
        "warm"
    };
    let (rows, bytes) = items
        .iter()
        .map(&sizes)
        .fold((0, 0), |(r, b), (rows, bytes)| (r + rows, b + bytes));
    ctx.progress(format!(
        "{name}: sending {} requests over {connections} connections",
        items.len()
    ));
    // Popped from the back: reversed, so requests go out in time order.
    items.reverse();
    let queue = Arc::new(Mutex::new(items));
    let started = Instant::now();
    let workers: Vec<_> = (0..connections.max(1))
        .map(|connection| {
            let (queue, send) = (queue.clone(), send.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                loop {
                    let Some(item) = queue.lock().expect("queue").pop() else {
                        break;
                    };
                    let sent = Instant::now();
                    send(connection, item).await?;
                    latencies.push(sent.elapsed());
                }
                anyhow::Ok(latencies)
            })
        })
        .collect();
    let progress = report_progress(ctx, name, queue.clone());
    let mut latencies = Vec::new();
    for worker in workers {
        latencies.extend(worker.await??);
    }
    let elapsed = started.elapsed();
    progress.abort();
    latencies.sort();
    if latencies.is_empty() {
        latencies.push(elapsed);
    }
    Ok(Sent {
        rows,
        bytes,
        started,
        elapsed,
        latencies,
        label,
    })
}

/// Prints how much of the load is left every two seconds, until aborted.
fn report_progress<T: Send + 'static>(
    ctx: &Context,
    name: &str,
    queue: Arc<Mutex<Vec<T>>>,
) -> tokio::task::JoinHandle<()> {
    let quiet = ctx.common.quiet;
    let name = name.to_owned();
    tokio::spawn(async move {
        let total = queue.lock().expect("queue").len().max(1);
        loop {
            tokio::time::sleep(Duration::from_secs(2)).await;
            let left = queue.lock().expect("queue").len();
            if !quiet {
                eprintln!(
                    "pushit: {name}: {:.0}% sent",
                    100.0 * (total - left) as f64 / total as f64
                );
            }
        }
    })
}

/// Rows stored in `db`'s table of `measurement`, through `/sql`.
pub(super) async fn count(
    endpoints: &Endpoints,
    db: &str,
    measurement: &str,
) -> anyhow::Result<u64> {
    let query = format!("SELECT count() FROM `{db}`.`{measurement}.autogen`");
    let text = sql(&http_client()?, endpoints, &query).await?;
    text.trim()
        .parse()
        .with_context(|| format!("count from /sql: {text:?}"))
}

/// Polls `db`'s table of `measurement` until it holds `rows` rows (or a minute has
/// passed: the caller's stored-count check then reports the shortfall);
/// returns when it did.
pub(super) async fn wait_visible(
    endpoints: &Endpoints,
    db: &str,
    measurement: &str,
    rows: u64,
) -> anyhow::Result<Instant> {
    let give_up = Instant::now() + Duration::from_secs(60);
    // Each count is a query the server runs beside the flush it waits for
    // (see PROBE_POLL): every 20 ms, not as fast as it can.
    while count(endpoints, db, measurement).await? < rows && Instant::now() < give_up {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(Instant::now())
}

/// Bytes on disk per stored field value of `db`'s table of `measurement`, merged into
/// one part per partition first, read from this process's engine (where
/// the in-process server keeps its data).
pub(super) fn bytes_per_value(
    ctx: &Context,
    db: &str,
    measurement: &str,
    values: usize,
) -> anyhow::Result<f64> {
    let conn = ctx.connect()?;
    let table = chingest::layout::names::TableNames::new(db, "autogen", measurement);
    conn.execute(&[&format!("OPTIMIZE TABLE {} FINAL", table.storage_table)])?;
    let (_, bytes) = conn.parts(&table.database_name, &table.storage_name)?;
    Ok(bytes as f64 / values as f64)
}

/// A counter of the server's `/metrics`, summed over its labels.
pub(super) async fn counter(endpoints: &Endpoints, name: &str) -> anyhow::Result<u64> {
    let url = format!("{}/metrics", endpoints.http);
    let text = authorized(endpoints, http_client()?.get(url))
        .send()
        .await?
        .text()
        .await?;
    let values: Vec<f64> = text
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(name)?;
            let value = match rest.strip_prefix('{') {
                Some(labelled) => labelled.rsplit_once("} ")?.1,
                None => rest.strip_prefix(' ')?,
            };
            value.trim().parse::<f64>().ok()
        })
        .collect();
    if values.is_empty() {
        anyhow::bail!("no {name} in /metrics");
    }
    Ok(values.iter().sum::<f64>() as u64)
}
