//! A file system for tests that forgets what was not synced: a power cut
//! on demand.
//!
//! Every write lands in this process's memory, as in a page cache, and
//! reaches the backing directory only when it is made durable:
//!
//! - `fsync`/`fdatasync` of a file (or a write through an `O_SYNC` or
//!   `O_DSYNC` handle) makes its contents and length durable;
//! - `fsync` of a directory makes its entries durable: names created,
//!   renamed or removed since its last sync revert at a cut otherwise.
//!   A file's own sync does not make its name durable (POSIX's rule, which
//!   some file systems are kinder than).
//!
//! A cut is the end of the process that serves the mount ([`Mounted::cut`]
//! in process, or `kill -9` of the `forgetfs` binary): the next mount
//! shows only what was durable. A file whose name was synced but whose data
//! never was comes back empty, as a file system with delayed allocation
//! leaves it.
//!
//! Free space is the backing directory's (`statfs` passes through: an engine
//! refuses to insert when it reads 0), and `rename` takes `RENAME_NOREPLACE`
//! and `RENAME_EXCHANGE`. Hard links, symbolic links and truncation are
//! supported; extended attributes and special files are not.
//!
//! # The backing directory
//!
//! Durable state is kept by inode number: `nodes/<ino>` holds a file's synced
//! contents, `dirs/<ino>` a directory's synced entries, `links/<ino>` a
//! symbolic link's target. The root is inode 1. What no durable directory
//! reaches is deleted at the next mount.
//!
//! # Where things are
//!
//! Here the mount; `store.rs` is the backing directory's durable state,
//! `tree.rs` the file system in memory (nodes, unsynced pages, handles, and
//! how a sync writes them to the store), `ops.rs` the FUSE operations on
//! that tree.

mod ops;
mod store;
mod tree;

use std::io;
use std::path::{Path, PathBuf};

use fuser::MountOption;

use tree::ForgetFs;

/// A mounted forgetful file system, served by a thread of this process.
pub struct Mounted {
    session: fuser::BackgroundSession,
    mountpoint: PathBuf,
}

impl Mounted {
    /// Where the file system is mounted.
    pub fn path(&self) -> &Path {
        &self.mountpoint
    }

    /// The power cut: unmounts and forgets everything that was not synced.
    /// Every process with a file open under the mount must have ended.
    pub fn cut(self) {
        drop(self.session);
    }
}

/// Mounts the durable state of `backing` at `mountpoint` (both must be
/// directories; `backing` may be empty). Needs root and `/dev/fuse`.
pub fn mount(backing: &Path, mountpoint: &Path) -> io::Result<Mounted> {
    let fs = ForgetFs::open(backing)?;
    let session = fuser::spawn_mount2(fs, mountpoint, &mount_options())?;
    Ok(Mounted {
        session,
        mountpoint: mountpoint.to_owned(),
    })
}

/// Serves the durable state of `backing` at `mountpoint` on this thread
/// until it is unmounted (or the process dies: the cut).
pub fn serve(backing: &Path, mountpoint: &Path) -> io::Result<()> {
    fuser::mount2(ForgetFs::open(backing)?, mountpoint, &mount_options())
}

fn mount_options() -> Vec<MountOption> {
    vec![
        MountOption::FSName("forgetfs".to_owned()),
        MountOption::DefaultPermissions,
    ]
}
