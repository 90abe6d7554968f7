//! One module per pushit mode, plus what they share: a fresh database per
//! run and the stored-row check.

use std::time::{Duration, Instant};

use chingest::arrow::array::RecordBatch;
use pushit::engine::RawConnection;
use pushit::layouts::LayoutTables;

use crate::Context;

pub(crate) mod backup;
pub(crate) mod batch;
mod client;
pub(crate) mod downsampling;
pub(crate) mod downsampling_disk;
pub(crate) mod downsampling_idle;
pub(crate) mod downsampling_live;
pub(crate) mod edits;
pub(crate) mod flush;
mod grafana;
pub(crate) mod http;
pub(crate) mod influxql;
pub(crate) mod layouts;
mod load;
pub(crate) mod memory;
pub(crate) mod otlp;
mod otlp_shapes;
mod peers;
pub(crate) mod prom;
pub(crate) mod promql;
mod promql_age;
mod promql_cardinality;
mod promql_dashboard;
mod promql_data;
mod promql_measure;
mod promql_query;
mod promql_rules;
pub(crate) mod query;
pub(crate) mod replay;
mod server;
pub(crate) mod workers;

/// Drops and recreates `database`: a run starts from empty tables.
pub(crate) fn fresh_database(conn: &RawConnection, database: &str) -> anyhow::Result<()> {
    conn.execute(&[
        &format!("DROP DATABASE IF EXISTS {database} SYNC"),
        &format!("CREATE DATABASE {database}"),
    ])?;
    Ok(())
}

/// Called by every run before its clock starts, so it does not pay for the
/// run before it: waits (up to a minute) until no merge runs, has the kernel
/// write back dirty pages, then rests `--pause` seconds.
pub(crate) fn settle(ctx: &Context, conn: &RawConnection) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while conn.scalar("SELECT count() FROM system.merges")? > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    // Best effort: `sync` is in every Linux base system.
    let _ = std::process::Command::new("sync").status();
    std::thread::sleep(Duration::from_secs_f64(ctx.common.pause.max(0.0)));
    Ok(())
}

/// One timed run of a layout: fresh tables, `batches` inserted one
/// statement each (then the Buffer flushed, if the layout has one), the
/// stored count checked. Returns the time from the first insert until every
/// row is in the MergeTree.
pub(crate) fn insert_layout(
    ctx: &Context,
    conn: &RawConnection,
    database: &str,
    tables: &LayoutTables,
    batches: &[RecordBatch],
    rows: usize,
) -> anyhow::Result<Duration> {
    fresh_database(conn, database)?;
    conn.execute(&tables.create.iter().map(String::as_str).collect::<Vec<_>>())?;
    settle(ctx, conn)?;
    let started = Instant::now();
    for batch in batches {
        conn.insert(&tables.insert_into, batch.clone())?;
    }
    if let Some(flush) = &tables.flush {
        conn.execute(&[flush])?;
    }
    let elapsed = started.elapsed();
    verify(conn, &tables.storage, rows as u64)?;
    Ok(elapsed)
}

/// Fails unless `table` holds exactly `expected` rows.
pub(crate) fn verify(conn: &RawConnection, table: &str, expected: u64) -> anyhow::Result<()> {
    check_stored(table, expected, conn.count(table)?)
}

/// Fails unless `stored`, counted in `what`, is the `expected` row count.
pub(crate) fn check_stored(what: &str, expected: u64, stored: u64) -> anyhow::Result<()> {
    if stored != expected {
        return Err(pushit::Error::Verify {
            table: what.to_owned(),
            expected,
            stored,
        }
        .into());
    }
    Ok(())
}

/// `count` per second of `elapsed`.
pub(crate) fn per_second(count: usize, elapsed: std::time::Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64().max(1e-9)
}

/// The `q` quantile of sorted `durations`, in milliseconds (0 if empty).
pub(crate) fn millis_at(durations: &[std::time::Duration], q: f64) -> f64 {
    match durations.len() {
        0 => 0.0,
        n => durations[((n - 1) as f64 * q) as usize].as_secs_f64() * 1e3,
    }
}
