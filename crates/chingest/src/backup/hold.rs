//! What a backup and a snapshot take alike: the databases asked for
//! (refused in the `clickhouse` storage mode), every table at one point
//! of the log with inserts held and patches folded in, and the time they
//! are taken at; and how SQL names the databases.

use crate::catalog::Catalog;
use crate::engine::{self, Engine};
use crate::error::{Error, Result};
use crate::layout::names::{quote_ident, quote_literal};
use crate::write::Writer;

/// Holds the inserts of every flush for as long as it lives, once every
/// edit made so far is folded into the parts of `databases`' tables and
/// every table holds exactly the writes logged until then: all of those
/// acknowledged so far, and none torn (a write's rows span tables, each
/// inserted by its own flusher). Writes wait to be logged only while the
/// last of them are inserted.
pub(super) async fn hold_inserts<'w>(
    writer: &'w Writer,
    databases: &[String],
) -> Result<tokio::sync::RwLockWriteGuard<'w, ()>> {
    let context = writer.flush_context();
    // Most of the work while writes flow.
    writer.flush_all().await?;
    apply_patches(&context.engine, databases).await?;
    let logging = context.logging.write().await;
    writer.flush_all().await?;
    let held = context.inserts.write().await;
    drop(logging);
    Ok(held)
}

/// Folds the patch parts of deletes and updates (see `edit`) into the
/// parts they patch: the engine's `BACKUP` leaves patch parts out, and a
/// restore would bring deleted or corrected points back.
async fn apply_patches(engine: &Engine, databases: &[String]) -> Result<()> {
    let sql = format!(
        "SELECT DISTINCT database, table FROM system.parts \
         WHERE active AND startsWith(name, 'patch-') AND database IN ({})",
        literal_list(databases)
    );
    engine
        .run_durable(move |conn| {
            for row in engine::query_rows(conn, &sql)? {
                engine::execute(
                    conn,
                    &format!(
                        "ALTER TABLE {}.{} APPLY PATCHES SETTINGS mutations_sync = 2",
                        quote_ident(&row[0]),
                        quote_ident(&row[1])
                    ),
                )?;
            }
            Ok(())
        })
        .await
}

pub(super) fn literal_list(values: &[String]) -> String {
    values
        .iter()
        .map(|v| quote_literal(v))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The databases `asked` names (every one when empty), each known.
pub(super) fn managed_databases(catalog: &Catalog, asked: &[String]) -> Result<Vec<String>> {
    let known: Vec<String> = catalog
        .databases()
        .iter()
        .map(|db| db.name.clone())
        .collect();
    if asked.is_empty() {
        let mut all = known;
        all.sort();
        return match all.is_empty() {
            true => Err(Error::InvalidBackup(
                "there are no databases to back up".into(),
            )),
            false => Ok(all),
        };
    }
    for db in asked {
        if !known.contains(db) {
            return Err(Error::DatabaseNotFound(db.clone()));
        }
    }
    Ok(asked.to_vec())
}

pub(super) fn database_list(databases: &[String]) -> String {
    databases
        .iter()
        .map(|db| format!("DATABASE {}", quote_ident(db)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The library's clock in ms, as a backup's names and manifest count it.
pub(super) fn now_ms() -> u64 {
    u64::try_from(crate::clock::now_ms()).unwrap_or(0)
}

/// In the `clickhouse` storage mode the rows are on the shards, and the
/// node keeps nothing a new node would not make again from them.
pub(super) fn refuse_in_cluster_mode(engine: &Engine) -> Result<()> {
    match engine.cluster {
        None => Ok(()),
        Some(_) => Err(Error::InvalidBackup(
            "in the clickhouse storage mode the rows live on the shards: back them up there \
             (BACKUP … ON CLUSTER, docs/backup.md); a node keeps nothing a new node does not \
             rebuild from the shards"
                .into(),
        )),
    }
}
