//! The backing directory: durable state by inode number, `nodes/<ino>` a
//! file's synced contents, `dirs/<ino>` a directory's synced entries,
//! `links/<ino>` a symbolic link's target.

use std::ffi::OsString;
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// Where durable state lives.
pub(super) struct Store {
    pub(super) nodes: PathBuf,
    pub(super) dirs: PathBuf,
    pub(super) links: PathBuf,
}

impl Store {
    pub(super) fn open(backing: &Path) -> io::Result<Store> {
        let store = Store {
            nodes: backing.join("nodes"),
            dirs: backing.join("dirs"),
            links: backing.join("links"),
        };
        for dir in [&store.nodes, &store.dirs, &store.links] {
            fs::create_dir_all(dir)?;
        }
        Ok(store)
    }

    pub(super) fn node(&self, ino: u64) -> PathBuf {
        self.nodes.join(ino.to_string())
    }

    fn dir(&self, ino: u64) -> PathBuf {
        self.dirs.join(ino.to_string())
    }

    pub(super) fn link(&self, ino: u64) -> PathBuf {
        self.links.join(ino.to_string())
    }

    /// A directory's synced entries; none if it was never synced.
    pub(super) fn read_dir(&self, ino: u64) -> io::Result<Vec<DurableEntry>> {
        let bytes = match fs::read(self.dir(ino)) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut entries = Vec::new();
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            let mut head = [0u8; 17];
            rest.read_exact(&mut head)?;
            let kind = head[0];
            let mode = u32::from_le_bytes(head[1..5].try_into().expect("4 bytes"));
            let ino = u64::from_le_bytes(head[5..13].try_into().expect("8 bytes"));
            let len = u32::from_le_bytes(head[13..17].try_into().expect("4 bytes")) as usize;
            let mut name = vec![0; len];
            rest.read_exact(&mut name)?;
            entries.push(DurableEntry {
                name: OsString::from_vec(name),
                ino,
                kind,
                mode,
            });
        }
        Ok(entries)
    }

    /// Replaces a directory's synced entries (atomically: the backing file
    /// system is not the one that loses power).
    pub(super) fn write_dir(&self, ino: u64, entries: &[DurableEntry]) -> io::Result<()> {
        let mut bytes = Vec::new();
        for entry in entries {
            bytes.push(entry.kind);
            bytes.extend(entry.mode.to_le_bytes());
            bytes.extend(entry.ino.to_le_bytes());
            bytes.extend((entry.name.len() as u32).to_le_bytes());
            bytes.extend(entry.name.as_bytes());
        }
        let tmp = self.dirs.join(format!("{ino}.tmp"));
        fs::File::create(&tmp)?.write_all(&bytes)?;
        fs::rename(tmp, self.dir(ino))
    }
}

/// One name in a synced directory.
pub(super) struct DurableEntry {
    pub(super) name: OsString,
    pub(super) ino: u64,
    /// [`KIND_FILE`], [`KIND_DIR`] or [`KIND_SYMLINK`].
    pub(super) kind: u8,
    pub(super) mode: u32,
}

pub(super) const KIND_FILE: u8 = 0;
pub(super) const KIND_DIR: u8 = 1;
pub(super) const KIND_SYMLINK: u8 = 2;
