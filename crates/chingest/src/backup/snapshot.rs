//! Snapshots: every part hard-linked (`FREEZE`) at one point of the log,
//! with the tables' definitions, in `<data dir>/shadow/<name>`; listed and
//! deleted by name.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::files::io_error;
use super::hold::{hold_inserts, literal_list, managed_databases, now_ms, refuse_in_cluster_mode};
use crate::catalog::Catalog;
use crate::durable;
use crate::engine;
use crate::error::{Error, Result};
use crate::layout::names::{quote_ident, quote_literal};
use crate::stats::IngestStats;
use crate::write::Writer;

/// Where snapshots are, in the data directory (the engine's `FREEZE`
/// directory).
const SNAPSHOTS_DIR: &str = "shadow";

/// A snapshot in the data directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// Its name (`chingest_<unix ms>`: the engine keeps `[A-Za-z0-9_]`
    /// of a `FREEZE` name as it is).
    pub name: String,
    /// Its directory: a data directory for `serve` once copied.
    pub path: PathBuf,
}

/// Takes a snapshot of every database (see the module's doc).
pub(crate) async fn create_snapshot(
    writer: &Writer,
    catalog: &Catalog,
    data_dir: &Path,
) -> Result<Snapshot> {
    let engine = Arc::clone(&writer.flush_context().engine);
    refuse_in_cluster_mode(&engine)?;
    let databases = managed_databases(catalog, &[])?;
    let name = format!("chingest_{}", now_ms());
    let path = data_dir.join(SNAPSHOTS_DIR).join(&name);
    if path.exists() {
        return Err(Error::Conflict(format!(
            "a snapshot named {name} exists; try again"
        )));
    }
    let in_list = literal_list(&databases);
    let sql = format!(
        "SELECT database, name, metadata_path, engine LIKE '%MergeTree' FROM system.tables \
         WHERE database IN ({in_list}) ORDER BY database, name"
    );
    let frozen = {
        let _held = hold_inserts(writer, &databases).await?;
        let name = name.clone();
        engine
            .run(move |conn| {
                let tables = engine::query_rows(conn, &sql)?;
                for row in &tables {
                    if row[3] == "1" {
                        engine::execute(
                            conn,
                            &format!(
                                "ALTER TABLE {}.{} FREEZE WITH NAME {}",
                                quote_ident(&row[0]),
                                quote_ident(&row[1]),
                                quote_literal(&name)
                            ),
                        )?;
                    }
                }
                let sql = format!(
                    "SELECT toString(uuid) FROM system.databases WHERE name IN ({in_list})"
                );
                Ok((tables, engine::query_rows(conn, &sql)?))
            })
            .await?
    };
    let (tables, database_ids) = frozen;
    let (root, target) = (data_dir.to_owned(), path.clone());
    tokio::task::spawn_blocking(move || {
        copy_definitions(&root, &target, &tables, &database_ids)
            .and_then(|()| durable::sync_tree(&target))
            .map_err(io_error(format!(
                "writing the snapshot {}",
                target.display()
            )))
    })
    .await
    .map_err(|e| Error::Internal(format!("writing a snapshot failed: {e}")))??;
    IngestStats::add(&engine.stats.snapshots, 1);
    tracing::info!(snapshot = %path.display(), "snapshot taken");
    Ok(Snapshot { name, path })
}

/// Copies the definitions of the snapshot's databases and tables (`.sql`
/// files, under the same paths) into it, which makes it a data directory.
fn copy_definitions(
    root: &Path,
    target: &Path,
    tables: &[Vec<String>],
    database_ids: &[Vec<String>],
) -> std::io::Result<()> {
    let copy = |relative: &Path| -> std::io::Result<()> {
        let to = target.join(relative);
        std::fs::create_dir_all(to.parent().expect("a file in a directory"))?;
        std::fs::copy(root.join(relative), to).map(drop)
    };
    for table in tables {
        copy(Path::new(&table[2]))?;
    }
    // A database's own definition is `metadata/<escaped name>.sql`, found
    // by the UUID it holds.
    for entry in std::fs::read_dir(root.join("metadata"))? {
        let path = entry?.path();
        if path.extension().is_none_or(|ext| ext != "sql") {
            continue;
        }
        let text = std::fs::read_to_string(&path)?;
        if database_ids
            .iter()
            .any(|id| text.contains(&format!("UUID '{}'", id[0])))
        {
            copy(path.strip_prefix(root).expect("under the root"))?;
        }
    }
    Ok(())
}

/// The snapshots in the data directory, oldest first.
pub(crate) fn snapshots(data_dir: &Path) -> Result<Vec<Snapshot>> {
    let dir = data_dir.join(SNAPSHOTS_DIR);
    let listed = match std::fs::read_dir(&dir) {
        Ok(listed) => listed,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(Error::Io {
                context: format!("listing {}", dir.display()),
                source,
            })
        }
    };
    let mut found = Vec::new();
    for entry in listed {
        let entry = entry.map_err(io_error(format!("listing {}", dir.display())))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if is_snapshot_name(&name) && entry.path().is_dir() {
            found.push(Snapshot {
                name,
                path: entry.path(),
            });
        }
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(found)
}

fn is_snapshot_name(name: &str) -> bool {
    name.strip_prefix("chingest_")
        .is_some_and(|ms| !ms.is_empty() && ms.bytes().all(|b| b.is_ascii_digit()))
}

/// Deletes the snapshot `name`; false if there is none.
pub(crate) fn delete_snapshot(data_dir: &Path, name: &str) -> Result<bool> {
    if !is_snapshot_name(name) {
        return Err(Error::InvalidBackup(format!(
            "{name:?} is not a snapshot's name (chingest_<digits>)"
        )));
    }
    let dir = data_dir.join(SNAPSHOTS_DIR);
    let path = dir.join(name);
    if !path.is_dir() {
        return Ok(false);
    }
    std::fs::remove_dir_all(&path)
        .and_then(|()| durable::sync(&dir))
        .map_err(io_error(format!("deleting {}", path.display())))?;
    Ok(true)
}
