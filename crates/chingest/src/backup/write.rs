//! Writing a backup: the engine's `BACKUP` of the databases at one point
//! of the log, checked against what the engine says it wrote, then made
//! whole by its manifest.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::files::{io_error, list_files, read_manifest, write_manifest};
use super::hold::{database_list, hold_inserts, managed_databases, now_ms, refuse_in_cluster_mode};
use super::location::BackupLocation;
use super::manifest::Manifest;
use crate::catalog::Catalog;
use crate::durable;
use crate::engine;
use crate::error::{Error, Result};
use crate::layout::names::quote_literal;
use crate::stats::IngestStats;
use crate::write::Writer;

/// What to back up, and where.
#[derive(Debug, Clone)]
pub struct BackupRequest {
    /// Where the backup goes (a new directory or S3 prefix).
    pub location: BackupLocation,
    /// An earlier backup to add to: only what changed since is stored.
    pub base: Option<BackupLocation>,
    /// The databases; empty: every one.
    pub databases: Vec<String>,
}

/// What a backup wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupReport {
    /// Where it is (no credentials).
    pub location: String,
    /// The databases it holds.
    pub databases: Vec<String>,
    /// The backup it adds to, if any.
    pub base: Option<String>,
    /// Files written (the manifest's entries).
    pub files: usize,
    /// Bytes written: less than `total_bytes` when it adds to a base.
    pub bytes_written: u64,
    /// Bytes of the databases' files, whether stored here or in its base.
    pub total_bytes: u64,
    /// How long inserts were held (writes still acknowledged).
    pub inserts_held: Duration,
    /// How long the whole backup took.
    pub elapsed: Duration,
}

/// Writes a backup of the request's databases (see the module's doc),
/// counted in the stats.
pub(crate) async fn backup(
    writer: &Writer,
    catalog: &Catalog,
    request: BackupRequest,
) -> Result<BackupReport> {
    let stats = Arc::clone(&writer.flush_context().engine.stats);
    let written = write_backup(writer, catalog, request).await;
    match &written {
        Ok(_) => {
            IngestStats::add(&stats.backups, 1);
            let now = now_ms() / 1000;
            stats
                .last_backup_unix_seconds
                .store(now, std::sync::atomic::Ordering::Relaxed);
        }
        Err(_) => IngestStats::add(&stats.backup_errors, 1),
    }
    written
}

async fn write_backup(
    writer: &Writer,
    catalog: &Catalog,
    request: BackupRequest,
) -> Result<BackupReport> {
    let started = Instant::now();
    let engine = Arc::clone(&writer.flush_context().engine);
    refuse_in_cluster_mode(&engine)?;
    let databases = managed_databases(catalog, &request.databases)?;
    let location = request.location;
    if let BackupLocation::Directory(dir) = &location {
        if dir.exists() {
            return Err(Error::InvalidBackup(format!(
                "{} exists: every backup needs a directory of its own",
                dir.display()
            )));
        }
        let parent = dir.parent().unwrap_or(Path::new("/"));
        durable::create_dir_all(parent)
            .map_err(io_error(format!("creating {}", parent.display())))?;
    }
    let base = match &request.base {
        Some(base) => {
            // Whole, or nothing is written on top of it.
            read_manifest(&engine, base).await?;
            Some(base.clone())
        }
        None => None,
    };
    let mut sql = format!(
        "BACKUP {} TO {}",
        database_list(&databases),
        location.engine_expr()
    );
    if let Some(base) = &base {
        sql += &format!(" SETTINGS base_backup = {}", base.engine_expr());
    }
    let (rows, inserts_held) = {
        let _held = hold_inserts(writer, &databases).await?;
        let held = Instant::now();
        let rows = engine
            .run(move |conn| engine::query_rows(conn, &sql))
            .await?;
        (rows, held.elapsed())
    };
    let id = rows
        .first()
        .and_then(|row| row.first())
        .cloned()
        .ok_or_else(|| Error::Internal("BACKUP answered no id".into()))?;
    // What the engine says it wrote: all of the databases' files
    // (`total_size`), and those stored here rather than in the base
    // (`uncompressed_size`).
    let sizes = engine
        .run(move |conn| {
            let sql = format!(
                "SELECT total_size, uncompressed_size FROM system.backups WHERE id = {}",
                quote_literal(&id)
            );
            engine::query_rows(conn, &sql)
        })
        .await?;
    let size = |column: usize| -> u64 {
        sizes
            .first()
            .and_then(|row| row.get(column)?.parse().ok())
            .unwrap_or(0)
    };
    let (total_bytes, stored_bytes) = (size(0), size(1));
    let files = list_files(&engine, &location, true).await?;
    let found: u64 = files.values().map(|f| f.size).sum();
    if found != stored_bytes {
        // The engine does not always report a failed write (a full
        // destination left files short and `BACKUP` succeeded): without a
        // manifest, no restore takes this one.
        return Err(Error::DamagedBackup {
            location: location.to_string(),
            reason: format!(
                "the engine wrote {stored_bytes} bytes but {found} are there \
                 (a full or failing destination?); it has no manifest, so no restore takes it"
            ),
        });
    }
    let manifest = Manifest {
        created_ms: now_ms(),
        chingest_version: env!("CARGO_PKG_VERSION").to_owned(),
        engine_version: engine::engine_version().to_owned(),
        databases: databases.clone(),
        base: base.as_ref().map(ToString::to_string),
        files,
    };
    write_manifest(&engine, &location, &manifest).await?;
    let report = BackupReport {
        location: location.to_string(),
        databases,
        base: manifest.base.clone(),
        files: manifest.files.len(),
        bytes_written: manifest.bytes(),
        total_bytes,
        inserts_held,
        elapsed: started.elapsed(),
    };
    tracing::info!(location = %report.location, files = report.files,
        bytes_written = report.bytes_written, total_bytes = report.total_bytes,
        inserts_held_ms = inserts_held.as_millis() as u64, "backup written");
    Ok(report)
}
