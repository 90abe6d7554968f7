//! Renames left by older versions' storage layout, done once on open.

use crate::engine::{self, Connection};
use crate::error::{Error, Result};
use crate::layout::names::{quote_ident, quote_literal, LEGACY_STORAGE_SUFFIX, SERIES_TABLE};

/// Renames the fact tables of older versions, which kept the facts in
/// `m.rp.mergetree` behind a Buffer table named `m.rp` (chingest never
/// inserted into the Buffer, so it holds no rows): the Buffer is dropped
/// and the MergeTree takes its name. Each step is idempotent, so an open
/// that crashed between them is finished by the next.
pub(super) fn migrate_legacy_fact_tables(conn: &Connection) -> Result<()> {
    let legacy = engine::query_rows(
        conn,
        &format!(
            "SELECT database, name FROM system.tables \
             WHERE database IN (SELECT database FROM system.tables WHERE name = {}) \
             AND endsWith(name, {}) AND engine = 'MergeTree'",
            quote_literal(SERIES_TABLE),
            quote_literal(LEGACY_STORAGE_SUFFIX)
        ),
    )?;
    for row in legacy {
        let [database, storage] = <[String; 2]>::try_from(row)
            .map_err(|_| Error::Engine("unexpected system.tables row".into()))?;
        let table = &storage[..storage.len() - LEGACY_STORAGE_SUFFIX.len()];
        let in_front = engine::query_rows(
            conn,
            &format!(
                "SELECT engine FROM system.tables WHERE database = {} AND name = {}",
                quote_literal(&database),
                quote_literal(table)
            ),
        )?;
        let db = quote_ident(&database);
        match in_front.first().map(|row| row[0].as_str()) {
            None => {}
            Some("Buffer") => engine::execute(
                conn,
                &format!("DROP TABLE {db}.{} SYNC", quote_ident(table)),
            )?,
            Some(other) => {
                return Err(Error::Engine(format!(
                    "cannot rename {database}.{storage} to {table}: a {other} table has that name"
                )))
            }
        }
        engine::execute(
            conn,
            &format!(
                "RENAME TABLE {db}.{} TO {db}.{}",
                quote_ident(&storage),
                quote_ident(table)
            ),
        )?;
        tracing::info!(%database, from = %storage, to = %table, "renamed a fact table of an older version");
    }
    Ok(())
}
