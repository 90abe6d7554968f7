//! The file system in memory, as the kernel sees it: nodes, each file's
//! contents with the pages written since its last sync, open handles;
//! loaded from the store at a mount, and written to it piece by piece as
//! files and directories are synced.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use fuser::{FileAttr, FileType};
use libc::c_int;

use crate::store::{DurableEntry, Store, KIND_DIR, KIND_FILE, KIND_SYMLINK};

/// The granularity of unsynced-write tracking.
const PAGE: u64 = 64 * 1024;
const ROOT: u64 = 1;

#[derive(Debug)]
pub(super) struct Node {
    pub(super) kind: Kind,
    /// Permission bits.
    pub(super) mode: u32,
    pub(super) nlink: u32,
    /// Open handles: an unlinked node lives until the last is released.
    pub(super) open: u32,
    pub(super) mtime: SystemTime,
    pub(super) ctime: SystemTime,
    pub(super) atime: SystemTime,
}

#[derive(Debug)]
pub(super) enum Kind {
    File(FileData),
    Dir {
        parent: u64,
        entries: BTreeMap<OsString, u64>,
    },
    Symlink(PathBuf),
}

#[derive(Debug, Default)]
pub(super) struct FileData {
    pub(super) data: Vec<u8>,
    /// Pages written since the last sync.
    dirty: BTreeSet<u64>,
    /// The length changed since the last sync.
    resized: bool,
}

impl FileData {
    pub(super) fn write(&mut self, offset: u64, bytes: &[u8]) {
        let end = offset as usize + bytes.len();
        if end > self.data.len() {
            self.data.resize(end, 0);
            self.resized = true;
        }
        self.data[offset as usize..end].copy_from_slice(bytes);
        if !bytes.is_empty() {
            self.dirty.extend(offset / PAGE..=(end as u64 - 1) / PAGE);
        }
    }

    pub(super) fn truncate(&mut self, len: u64) {
        let old = self.data.len() as u64;
        if len > old {
            // The new bytes are zeros the synced file lacks.
            self.dirty.extend(old / PAGE..=(len - 1) / PAGE);
        }
        self.data.resize(len as usize, 0);
        self.resized = true;
    }

    /// Writes what changed since the last sync to the durable copy.
    fn sync(&mut self, path: &Path) -> io::Result<()> {
        if self.dirty.is_empty() && !self.resized {
            return Ok(());
        }
        let file = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let len = self.data.len() as u64;
        for &page in &self.dirty {
            let start = page * PAGE;
            if start >= len {
                continue;
            }
            let end = (start + PAGE).min(len);
            file.write_all_at(&self.data[start as usize..end as usize], start)?;
        }
        file.set_len(len)?;
        self.dirty.clear();
        self.resized = false;
        Ok(())
    }
}

/// An open file: whether each write must be synced at once.
pub(super) struct Handle {
    pub(super) ino: u64,
    pub(super) sync_writes: bool,
}

pub(super) struct ForgetFs {
    pub(super) store: Store,
    pub(super) nodes: HashMap<u64, Node>,
    pub(super) handles: HashMap<u64, Handle>,
    next_ino: u64,
    next_fh: u64,
    /// Where `statfs` reads free space from.
    pub(super) backing: PathBuf,
}

pub(super) fn errno(e: io::Error) -> c_int {
    e.raw_os_error().unwrap_or(libc::EIO)
}

impl ForgetFs {
    /// Loads what the backing directory holds durably, and deletes what no
    /// durable directory reaches.
    pub(super) fn open(backing: &Path) -> io::Result<ForgetFs> {
        let store = Store::open(backing)?;
        let now = SystemTime::now();
        let mut fs = ForgetFs {
            // Set once the durable tree is loaded.
            next_ino: 0,
            store,
            nodes: HashMap::new(),
            handles: HashMap::new(),
            next_fh: 1,
            backing: backing.to_owned(),
        };
        fs.nodes
            .insert(ROOT, Node::new(Kind::dir(ROOT), 0o755, now));
        let mut pending = vec![ROOT];
        while let Some(dir) = pending.pop() {
            for entry in fs.store.read_dir(dir)? {
                let ino = entry.ino;
                if let Some(node) = fs.nodes.get_mut(&ino) {
                    // A second durable name: a hard link.
                    node.nlink += 1;
                } else {
                    let kind = match entry.kind {
                        KIND_DIR => {
                            pending.push(ino);
                            Kind::dir(dir)
                        }
                        KIND_SYMLINK => Kind::Symlink(PathBuf::from(OsString::from_vec(fs::read(
                            fs.store.link(ino),
                        )?))),
                        _ => Kind::File(FileData {
                            data: fs::read(fs.store.node(ino)).or_else(|e| {
                                // Named durably, never synced: empty.
                                if e.kind() == io::ErrorKind::NotFound {
                                    Ok(Vec::new())
                                } else {
                                    Err(e)
                                }
                            })?,
                            ..FileData::default()
                        }),
                    };
                    fs.nodes.insert(ino, Node::new(kind, entry.mode, now));
                }
                if let Kind::Dir { entries, .. } = &mut fs.nodes.get_mut(&dir).expect("loaded").kind
                {
                    entries.insert(entry.name, ino);
                }
            }
        }
        // Past every inode a durable name reaches, including those whose
        // contents were never synced and so have no file in the store: a new
        // node must never take the number of one still named.
        fs.next_ino = fs.nodes.keys().max().expect("the root") + 1;
        for dir in [&fs.store.nodes, &fs.store.dirs, &fs.store.links] {
            for entry in fs::read_dir(dir)? {
                let entry = entry?;
                let reachable = entry
                    .file_name()
                    .to_string_lossy()
                    .parse::<u64>()
                    .is_ok_and(|ino| fs.nodes.contains_key(&ino));
                if !reachable {
                    fs::remove_file(entry.path())?;
                }
            }
        }
        Ok(fs)
    }

    pub(super) fn attr(&self, ino: u64) -> Option<FileAttr> {
        let node = self.nodes.get(&ino)?;
        let (kind, size) = match &node.kind {
            Kind::File(file) => (FileType::RegularFile, file.data.len() as u64),
            Kind::Dir { entries, .. } => (FileType::Directory, entries.len() as u64),
            Kind::Symlink(target) => (FileType::Symlink, target.as_os_str().len() as u64),
        };
        Some(FileAttr {
            ino,
            size,
            blocks: size.div_ceil(512),
            atime: node.atime,
            mtime: node.mtime,
            ctime: node.ctime,
            crtime: node.ctime,
            kind,
            perm: node.mode as u16,
            // 1 for directories: "unknown", as btrfs says, so that tools do
            // not count subdirectories by it.
            nlink: if kind == FileType::Directory {
                1
            } else {
                node.nlink
            },
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        })
    }

    pub(super) fn entries(&self, dir: u64) -> Result<&BTreeMap<OsString, u64>, c_int> {
        match &self.nodes.get(&dir).ok_or(libc::ENOENT)?.kind {
            Kind::Dir { entries, .. } => Ok(entries),
            _ => Err(libc::ENOTDIR),
        }
    }

    pub(super) fn entries_mut(&mut self, dir: u64) -> Result<&mut BTreeMap<OsString, u64>, c_int> {
        let node = self.nodes.get_mut(&dir).ok_or(libc::ENOENT)?;
        node.touch();
        match &mut node.kind {
            Kind::Dir { entries, .. } => Ok(entries),
            _ => Err(libc::ENOTDIR),
        }
    }

    pub(super) fn child(&self, dir: u64, name: &OsStr) -> Result<u64, c_int> {
        self.entries(dir)?.get(name).copied().ok_or(libc::ENOENT)
    }

    /// Adds a new node under `parent/name`.
    pub(super) fn create_node(
        &mut self,
        parent: u64,
        name: &OsStr,
        kind: Kind,
        mode: u32,
    ) -> Result<u64, c_int> {
        if self.entries(parent)?.contains_key(name) {
            return Err(libc::EEXIST);
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        let replaced = self
            .nodes
            .insert(ino, Node::new(kind, mode & 0o7777, SystemTime::now()));
        assert!(replaced.is_none(), "inode {ino} given twice");
        self.entries_mut(parent)?.insert(name.to_owned(), ino);
        Ok(ino)
    }

    /// One name of `ino` is gone: forgets the node once nothing names or
    /// holds it.
    pub(super) fn unlinked(&mut self, ino: u64) {
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.nlink = node.nlink.saturating_sub(1);
            node.ctime = SystemTime::now();
            if node.nlink == 0 && node.open == 0 {
                self.nodes.remove(&ino);
            }
        }
    }

    pub(super) fn is_empty_dir(&self, ino: u64) -> bool {
        self.entries(ino).is_ok_and(BTreeMap::is_empty)
    }

    pub(super) fn rename_node(
        &mut self,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
    ) -> Result<(), c_int> {
        let ino = self.child(parent, name)?;
        let target = self.entries(newparent)?.get(newname).copied();
        if flags & libc::RENAME_EXCHANGE != 0 {
            let other = target.ok_or(libc::ENOENT)?;
            self.entries_mut(parent)?.insert(name.to_owned(), other);
            self.entries_mut(newparent)?.insert(newname.to_owned(), ino);
            self.set_parent(other, parent);
            self.set_parent(ino, newparent);
            return Ok(());
        }
        if let Some(target) = target {
            if target == ino {
                return Ok(());
            }
            if flags & libc::RENAME_NOREPLACE != 0 {
                return Err(libc::EEXIST);
            }
            let moving_dir = matches!(self.nodes[&ino].kind, Kind::Dir { .. });
            let target_dir = matches!(self.nodes[&target].kind, Kind::Dir { .. });
            match (moving_dir, target_dir) {
                (true, false) => return Err(libc::ENOTDIR),
                (false, true) => return Err(libc::EISDIR),
                (true, true) if !self.is_empty_dir(target) => return Err(libc::ENOTEMPTY),
                _ => {}
            }
            self.unlinked(target);
        }
        self.entries_mut(parent)?.remove(name);
        self.entries_mut(newparent)?.insert(newname.to_owned(), ino);
        self.set_parent(ino, newparent);
        Ok(())
    }

    fn set_parent(&mut self, ino: u64, new_parent: u64) {
        if let Some(Node {
            kind: Kind::Dir { parent, .. },
            ..
        }) = self.nodes.get_mut(&ino)
        {
            *parent = new_parent;
        }
    }

    pub(super) fn sync_file(&mut self, ino: u64) -> Result<(), c_int> {
        let path = self.store.node(ino);
        match &mut self.nodes.get_mut(&ino).ok_or(libc::ENOENT)?.kind {
            Kind::File(file) => file.sync(&path).map_err(errno),
            _ => Ok(()),
        }
    }

    pub(super) fn sync_dir(&mut self, ino: u64) -> Result<(), c_int> {
        let entries: Vec<DurableEntry> = self
            .entries(ino)?
            .iter()
            .map(|(name, &child)| {
                let node = &self.nodes[&child];
                DurableEntry {
                    name: name.clone(),
                    ino: child,
                    kind: match node.kind {
                        Kind::File(_) => KIND_FILE,
                        Kind::Dir { .. } => KIND_DIR,
                        Kind::Symlink(_) => KIND_SYMLINK,
                    },
                    mode: node.mode,
                }
            })
            .collect();
        self.store.write_dir(ino, &entries).map_err(errno)
    }

    pub(super) fn open_handle(&mut self, ino: u64, flags: i32) -> u64 {
        let fh = self.next_fh;
        self.next_fh += 1;
        self.handles.insert(
            fh,
            Handle {
                ino,
                sync_writes: flags & (libc::O_SYNC | libc::O_DSYNC) != 0,
            },
        );
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.open += 1;
        }
        fh
    }
}

impl Kind {
    pub(super) fn dir(parent: u64) -> Kind {
        Kind::Dir {
            parent,
            entries: BTreeMap::new(),
        }
    }
}

impl Node {
    fn new(kind: Kind, mode: u32, now: SystemTime) -> Node {
        Node {
            kind,
            mode,
            nlink: 1,
            open: 0,
            mtime: now,
            ctime: now,
            atime: now,
        }
    }

    pub(super) fn touch(&mut self) {
        let now = SystemTime::now();
        self.mtime = now;
        self.ctime = now;
    }
}
