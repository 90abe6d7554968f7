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
//!
//! Here the facade; `write.rs` writes a backup, `restore.rs` restores one,
//! `snapshot.rs` takes, lists and deletes snapshots. Below them,
//! `hold.rs` is what a backup and a snapshot take alike (the databases,
//! one point of the log), `files.rs` a backup where it is stored (its
//! files and manifest), `location.rs` and `manifest.rs` what they name.

mod files;
mod hold;
mod location;
pub(crate) mod manifest;
mod restore;
mod snapshot;
mod write;

pub use location::{BackupLocation, S3Credentials, S3Location};
pub use restore::{restore, RestoreReport, RestoreRequest, RESTORING_MARKER};
pub use snapshot::Snapshot;
pub(crate) use snapshot::{create_snapshot, delete_snapshot, snapshots};
pub(crate) use write::backup;
pub use write::{BackupReport, BackupRequest};
