//! Restoring a backup into an empty data directory: every file checked
//! against its manifest (and its bases'), then the engine's `RESTORE`,
//! the directory marked unfinished until all of it is durable.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::files::{io_error, list_files, read_manifest};
use super::hold::database_list;
use super::location::{BackupLocation, S3Credentials};
use super::manifest::Manifest;
use crate::config::QueryLimits;
use crate::durable;
use crate::engine::{self, Engine};
use crate::error::{Error, Result};
use crate::stats::IngestStats;

/// Present in a data directory while a restore writes it; an open refuses
/// such a directory.
pub const RESTORING_MARKER: &str = "chingest-restoring";

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
