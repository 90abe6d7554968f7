//! A backup where it is stored (a directory or an S3 prefix): its files
//! listed and hashed, its manifest written and read; and the I/O errors
//! of backups, restores and snapshots, with what was being done.

use std::collections::BTreeMap;
use std::path::Path;

use super::location::BackupLocation;
use super::manifest::{self, FileEntry, Manifest, MANIFEST_NAME};
use crate::durable;
use crate::engine::{self, Engine};
use crate::error::{Error, Result};
use crate::layout::names::quote_literal;

pub(super) fn io_error(context: String) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { context, source }
}

/// The files of the backup at `location` (its manifest excluded), hashed;
/// in a directory, made durable with `sync`.
pub(super) async fn list_files(
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
pub(super) async fn write_manifest(
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
pub(super) async fn read_manifest(engine: &Engine, location: &BackupLocation) -> Result<Manifest> {
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
