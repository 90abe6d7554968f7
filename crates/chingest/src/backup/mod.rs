//! Backups, restores and snapshots of the databases chingest manages.
//!
//! A backup is the engine's own `BACKUP` (to a directory or S3; on top of
//! an earlier one, only what changed), taken once every write logged so
//! far is inserted (writes wait to be logged while the last of them are),
//! with inserts held while the engine picks the tables' parts: every table
//! at the same point of the log, no request half in. Writes are
//! acknowledged meanwhile (they wait in the log and the memory budget). Everything chingest keeps about a database lives in its
//! tables (schemas in the fact tables, series, retention and duplicate
//! policies in their registries), so the backup holds all of it. A
//! [manifest] written last makes it whole: a restore checks every file
//! against it before the engine reads any.
//!
//! A restore runs the engine's `RESTORE` into an empty data directory,
//! marked unfinished ([`RESTORING_MARKER`]) until every file it wrote is
//! durable: an interrupted restore is refused by the next open.
//!
//! A snapshot is a hard link of every part (`ALTER TABLE … FREEZE`, taken
//! the same way as a backup) plus the tables' definitions, in
//! `<data dir>/shadow/<name>`: a data directory of its own, which a file
//! copy takes as it is.

mod location;
pub(crate) mod manifest;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use location::{BackupLocation, S3Credentials, S3Location};
use manifest::{FileEntry, Manifest, MANIFEST_NAME};

use crate::catalog::Catalog;
use crate::config::QueryLimits;
use crate::durable;
use crate::engine::{self, Engine};
use crate::error::{Error, Result};
use crate::layout::names::{quote_ident, quote_literal};
use crate::stats::IngestStats;
use crate::write::Writer;

/// Present in a data directory while a restore writes it; an open refuses
/// such a directory.
pub const RESTORING_MARKER: &str = "chingest-restoring";

/// Where snapshots are, in the data directory (the engine's `FREEZE`
/// directory).
const SNAPSHOTS_DIR: &str = "shadow";

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

/// What to restore, and where to.
#[derive(Debug, Clone)]
pub struct RestoreRequest {
    /// The backup (for one added to another, the base is found where the
    /// backup names it).
    pub location: BackupLocation,
    /// An empty (or missing) data directory.
    pub data_dir: PathBuf,
    /// The databases; empty: every one the backup holds.
    pub databases: Vec<String>,
}

/// What a restore did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreReport {
    /// The databases restored.
    pub databases: Vec<String>,
    /// Bytes of the backup's files checked (its bases' included).
    pub bytes_checked: u64,
    /// How long it took.
    pub elapsed: Duration,
}

/// A snapshot in the data directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// Its name (`chingest_<unix ms>`: the engine keeps `[A-Za-z0-9_]`
    /// of a `FREEZE` name as it is).
    pub name: String,
    /// Its directory: a data directory for `serve` once copied.
    pub path: PathBuf,
}

/// Holds the inserts of every flush for as long as it lives, once every
/// edit made so far is folded into the parts of `databases`' tables and
/// every table holds exactly the writes logged until then: all of those
/// acknowledged so far, and none torn (a write's rows span tables, each
/// inserted by its own flusher). Writes wait to be logged only while the
/// last of them are inserted.
async fn hold_inserts<'w>(
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

fn literal_list(values: &[String]) -> String {
    values
        .iter()
        .map(|v| quote_literal(v))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The databases `asked` names (every one when empty), each known.
fn managed_databases(catalog: &Catalog, asked: &[String]) -> Result<Vec<String>> {
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

fn database_list(databases: &[String]) -> String {
    databases
        .iter()
        .map(|db| format!("DATABASE {}", quote_ident(db)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Now, in ms since the epoch, as backups record it.
fn now_ms() -> u64 {
    u64::try_from(crate::clock::now_ms()).unwrap_or(0)
}

fn io_error(context: String) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { context, source }
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

/// In the `clickhouse` storage mode the rows are on the shards, and the
/// node keeps nothing a new node would not make again from them.
fn refuse_in_cluster_mode(engine: &Engine) -> Result<()> {
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

/// The files of the backup at `location` (its manifest excluded), hashed;
/// in a directory, made durable with `sync`.
async fn list_files(
    engine: &Engine,
    location: &BackupLocation,
    sync: bool,
) -> Result<BTreeMap<String, FileEntry>> {
    match location {
        BackupLocation::Directory(dir) => {
            let dir = dir.clone();
            tokio::task::spawn_blocking(move || {
                manifest::scan_dir(&dir, sync)
                    .map_err(io_error(format!("reading the backup in {}", dir.display())))
            })
            .await
            .map_err(|e| Error::Internal(format!("reading a backup failed: {e}")))?
        }
        BackupLocation::S3(s3) => {
            // Hashed where they are, by the engine (the same XXH3).
            let root = format!("{}/{}/", s3.bucket, s3.prefix);
            let sql = format!(
                "SELECT substring(_path, {}), _size, xxh3(raw_blob) FROM {}",
                root.len() + 1,
                s3.raw_function("**")
            );
            let rows = engine
                .run(move |conn| engine::query_rows(conn, &sql))
                .await?;
            let mut files = BTreeMap::new();
            for row in rows {
                let [path, size, hash] = row.as_slice() else {
                    return Err(Error::Internal(format!("unexpected listing row {row:?}")));
                };
                if path == MANIFEST_NAME {
                    continue;
                }
                let parsed = (size.parse(), hash.parse());
                let (Ok(size), Ok(hash)) = parsed else {
                    return Err(Error::Internal(format!("unexpected listing row {row:?}")));
                };
                files.insert(path.clone(), FileEntry { hash, size });
            }
            Ok(files)
        }
    }
}

/// Writes `manifest` into the backup, durably: the last thing written.
async fn write_manifest(
    engine: &Engine,
    location: &BackupLocation,
    manifest: &Manifest,
) -> Result<()> {
    let text = manifest.render();
    match location {
        BackupLocation::Directory(dir) => {
            let path = dir.join(MANIFEST_NAME);
            let parent = dir.parent().unwrap_or(Path::new("/")).to_owned();
            tokio::task::spawn_blocking(move || {
                // The backup's own name in its parent too.
                durable::write(&path, text.as_bytes())
                    .and_then(|()| durable::sync(&parent))
                    .map_err(io_error(format!("writing {}", path.display())))
            })
            .await
            .map_err(|e| Error::Internal(format!("writing a manifest failed: {e}")))?
        }
        BackupLocation::S3(s3) => {
            let sql = format!(
                "INSERT INTO FUNCTION {} SELECT {}",
                s3.raw_function(MANIFEST_NAME),
                quote_literal(&text)
            );
            engine.run(move |conn| engine::execute(conn, &sql)).await
        }
    }
}

/// The manifest of the backup at `location`, refused if missing or not
/// whole.
async fn read_manifest(engine: &Engine, location: &BackupLocation) -> Result<Manifest> {
    let damaged = |reason: String| Error::DamagedBackup {
        location: location.to_string(),
        reason,
    };
    let text = match location {
        BackupLocation::Directory(dir) => {
            if !dir.is_dir() {
                return Err(Error::InvalidBackup(format!(
                    "no backup at {}: not a directory",
                    dir.display()
                )));
            }
            match std::fs::read(dir.join(MANIFEST_NAME)) {
                Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(damaged(format!(
                        "it has no {MANIFEST_NAME} (a backup that never finished)"
                    )))
                }
                Err(source) => {
                    return Err(Error::Io {
                        context: format!("reading {}", dir.join(MANIFEST_NAME).display()),
                        source,
                    })
                }
            }
        }
        BackupLocation::S3(s3) => {
            let sql = format!("SELECT raw_blob FROM {}", s3.raw_function(MANIFEST_NAME));
            let read = engine
                .run(move |conn| engine::query(conn, &sql, engine::OutputFormat::RawBLOB))
                .await;
            match read {
                Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                Err(Error::Engine(message)) => {
                    return Err(damaged(format!(
                    "its {MANIFEST_NAME} cannot be read (a backup that never finished?): {message}"
                )))
                }
                Err(err) => return Err(err),
            }
        }
    };
    Manifest::parse(&text).map_err(|reason| damaged(format!("its {MANIFEST_NAME}: {reason}")))
}

/// Checks the backup at `location` and each it adds to against their
/// manifests; returns its manifest and the bytes checked.
async fn verify(engine: &Engine, location: &BackupLocation) -> Result<(Manifest, u64)> {
    let mut checked = 0;
    let mut next = Some(location.clone());
    let mut first = None;
    while let Some(at) = next.take() {
        let manifest = read_manifest(engine, &at).await?;
        let found = list_files(engine, &at, false).await?;
        if let Some(reason) = manifest.mismatch(&found) {
            return Err(Error::DamagedBackup {
                location: at.to_string(),
                reason,
            });
        }
        checked += manifest.bytes();
        next = manifest
            .base
            .as_deref()
            .map(|base| base_location(&at, base))
            .transpose()?;
        first.get_or_insert(manifest);
    }
    Ok((first.expect("one at least"), checked))
}

/// Where a backup's base is, from the manifest's line: a directory, or a
/// prefix reached with the same endpoint and credentials.
fn base_location(backup: &BackupLocation, base: &str) -> Result<BackupLocation> {
    let credentials = match backup {
        BackupLocation::S3(s3) => Some(S3Credentials {
            endpoint: s3.endpoint.clone(),
            access_key_id: s3.access_key_id.clone(),
            secret_access_key: s3.secret_access_key.clone(),
        }),
        BackupLocation::Directory(_) => None,
    };
    BackupLocation::parse(base, credentials)
}

/// Restores a backup into an empty data directory (see the module's doc).
/// Opens the engine on that directory: in a process that has not opened
/// another, and before any [`Ingestor`](crate::Ingestor) is opened in it.
pub async fn restore(request: RestoreRequest) -> Result<RestoreReport> {
    let started = Instant::now();
    let data_dir = request.data_dir.clone();
    let empty = match std::fs::read_dir(&data_dir) {
        Ok(mut entries) => entries.next().is_none(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
        Err(source) => {
            return Err(Error::Io {
                context: format!("reading {}", data_dir.display()),
                source,
            })
        }
    };
    if !empty {
        return Err(Error::InvalidBackup(format!(
            "{} is not empty: a restore writes a data directory of its own",
            data_dir.display()
        )));
    }
    let existed = data_dir.exists();
    // Marked before the engine writes anything: a restore cut off at any
    // point leaves a directory the next open refuses.
    durable::create_dir_all(&data_dir)
        .map_err(io_error(format!("creating {}", data_dir.display())))?;
    let marker = data_dir.join(RESTORING_MARKER);
    durable::write(&marker, b"a restore began here and has not finished\n")
        .map_err(io_error(format!("writing {}", marker.display())))?;
    // The backup is checked through the engine (objects in S3 are read
    // by it) before anything is restored; refused, the directory is left
    // as it was.
    let engine = open_engine(&data_dir).await?;
    let databases = match check(&engine, &request).await {
        Ok(checked) => checked,
        Err(err) => {
            engine.close().await;
            let _ = match existed {
                true => empty_dir(&data_dir),
                false => std::fs::remove_dir_all(&data_dir),
            };
            return Err(err);
        }
    };
    let (databases, bytes_checked) = databases;
    let sql = format!(
        "RESTORE {} FROM {}",
        database_list(&databases),
        request.location.engine_expr()
    );
    let restored = engine
        .run_durable(move |conn| engine::execute(conn, &sql))
        .await;
    engine.close().await;
    restored?;
    let root = data_dir.clone();
    tokio::task::spawn_blocking(move || -> Result<()> {
        durable::sync_tree(&root).map_err(io_error(format!("syncing {}", root.display())))?;
        let marker = root.join(RESTORING_MARKER);
        std::fs::remove_file(&marker)
            .map_err(io_error(format!("removing {}", marker.display())))?;
        durable::sync(&root).map_err(io_error(format!("syncing {}", root.display())))
    })
    .await
    .map_err(|e| Error::Internal(format!("finishing a restore failed: {e}")))??;
    Ok(RestoreReport {
        databases,
        bytes_checked,
        elapsed: started.elapsed(),
    })
}

fn empty_dir(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        match path.is_dir() && !path.is_symlink() {
            true => std::fs::remove_dir_all(&path)?,
            false => std::fs::remove_file(&path)?,
        }
    }
    Ok(())
}

async fn open_engine(data_dir: &Path) -> Result<Engine> {
    let data_dir = data_dir
        .canonicalize()
        .map_err(io_error(format!("resolving {}", data_dir.display())))?;
    Engine::open(
        &data_dir,
        1,
        &QueryLimits::default(),
        None,
        Arc::<IngestStats>::default(),
    )
    .await
}

/// Checks the backup whole and that it holds the databases asked (every
/// one it holds when none is); returns them and the bytes checked.
async fn check(engine: &Engine, request: &RestoreRequest) -> Result<(Vec<String>, u64)> {
    let (manifest, bytes_checked) = verify(engine, &request.location).await?;
    let databases = match request.databases.is_empty() {
        true => manifest.databases.clone(),
        false => request.databases.clone(),
    };
    if let Some(missing) = databases.iter().find(|db| !manifest.databases.contains(db)) {
        return Err(Error::InvalidBackup(format!(
            "the backup at {} holds no database {missing:?} (it holds {})",
            request.location,
            manifest.databases.join(", ")
        )));
    }
    Ok((databases, bytes_checked))
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
