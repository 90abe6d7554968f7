//! One module per pushit mode, plus what they share: a fresh database per
//! run and the stored-row check.

use pushit::engine::RawConnection;

pub(crate) mod batch;
pub(crate) mod flush;
pub(crate) mod http;
pub(crate) mod layouts;
pub(crate) mod workers;

/// Drops and recreates `database`, so a run starts from empty tables and no
/// merges of an earlier run's parts take cores from it.
pub(crate) fn fresh_database(conn: &RawConnection, database: &str) -> anyhow::Result<()> {
    conn.execute(&[
        &format!("DROP DATABASE IF EXISTS {database} SYNC"),
        &format!("CREATE DATABASE {database}"),
    ])?;
    Ok(())
}

/// Fails unless `table` holds exactly `expected` rows.
pub(crate) fn verify(conn: &RawConnection, table: &str, expected: u64) -> anyhow::Result<()> {
    let stored = conn.count(table)?;
    if stored != expected {
        return Err(pushit::Error::Verify {
            table: table.to_owned(),
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
