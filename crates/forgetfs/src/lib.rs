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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use fuser::{
    FileAttr, FileType, Filesystem, KernelConfig, MountOption, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow,
};
use libc::c_int;

/// How long the kernel may cache names and attributes. Only this process
/// changes the tree, through the kernel, so caching is safe; a cut
/// unmounts, which drops every cache.
const TTL: Duration = Duration::from_secs(1);
/// The granularity of unsynced-write tracking.
const PAGE: u64 = 64 * 1024;
const ROOT: u64 = 1;

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

/// Where durable state lives.
struct Store {
    nodes: PathBuf,
    dirs: PathBuf,
    links: PathBuf,
}

impl Store {
    fn open(backing: &Path) -> io::Result<Store> {
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

    fn node(&self, ino: u64) -> PathBuf {
        self.nodes.join(ino.to_string())
    }

    fn dir(&self, ino: u64) -> PathBuf {
        self.dirs.join(ino.to_string())
    }

    fn link(&self, ino: u64) -> PathBuf {
        self.links.join(ino.to_string())
    }

    /// A directory's synced entries; none if it was never synced.
    fn read_dir(&self, ino: u64) -> io::Result<Vec<DurableEntry>> {
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
    fn write_dir(&self, ino: u64, entries: &[DurableEntry]) -> io::Result<()> {
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
struct DurableEntry {
    name: OsString,
    ino: u64,
    /// [`KIND_FILE`], [`KIND_DIR`] or [`KIND_SYMLINK`].
    kind: u8,
    mode: u32,
}

const KIND_FILE: u8 = 0;
const KIND_DIR: u8 = 1;
const KIND_SYMLINK: u8 = 2;

#[derive(Debug)]
struct Node {
    kind: Kind,
    /// Permission bits.
    mode: u32,
    nlink: u32,
    /// Open handles: an unlinked node lives until the last is released.
    open: u32,
    mtime: SystemTime,
    ctime: SystemTime,
    atime: SystemTime,
}

#[derive(Debug)]
enum Kind {
    File(FileData),
    Dir {
        parent: u64,
        entries: BTreeMap<OsString, u64>,
    },
    Symlink(PathBuf),
}

#[derive(Debug, Default)]
struct FileData {
    data: Vec<u8>,
    /// Pages written since the last sync.
    dirty: BTreeSet<u64>,
    /// The length changed since the last sync.
    resized: bool,
}

impl FileData {
    fn write(&mut self, offset: u64, bytes: &[u8]) {
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

    fn truncate(&mut self, len: u64) {
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
struct Handle {
    ino: u64,
    sync_writes: bool,
}

struct ForgetFs {
    store: Store,
    nodes: HashMap<u64, Node>,
    handles: HashMap<u64, Handle>,
    next_ino: u64,
    next_fh: u64,
    /// Where `statfs` reads free space from.
    backing: PathBuf,
}

fn errno(e: io::Error) -> c_int {
    e.raw_os_error().unwrap_or(libc::EIO)
}

impl ForgetFs {
    /// Loads what the backing directory holds durably, and deletes what no
    /// durable directory reaches.
    fn open(backing: &Path) -> io::Result<ForgetFs> {
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

    fn attr(&self, ino: u64) -> Option<FileAttr> {
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

    fn entries(&self, dir: u64) -> Result<&BTreeMap<OsString, u64>, c_int> {
        match &self.nodes.get(&dir).ok_or(libc::ENOENT)?.kind {
            Kind::Dir { entries, .. } => Ok(entries),
            _ => Err(libc::ENOTDIR),
        }
    }

    fn entries_mut(&mut self, dir: u64) -> Result<&mut BTreeMap<OsString, u64>, c_int> {
        let node = self.nodes.get_mut(&dir).ok_or(libc::ENOENT)?;
        node.touch();
        match &mut node.kind {
            Kind::Dir { entries, .. } => Ok(entries),
            _ => Err(libc::ENOTDIR),
        }
    }

    fn child(&self, dir: u64, name: &OsStr) -> Result<u64, c_int> {
        self.entries(dir)?.get(name).copied().ok_or(libc::ENOENT)
    }

    /// Adds a new node under `parent/name`.
    fn create_node(
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
    fn unlinked(&mut self, ino: u64) {
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.nlink = node.nlink.saturating_sub(1);
            node.ctime = SystemTime::now();
            if node.nlink == 0 && node.open == 0 {
                self.nodes.remove(&ino);
            }
        }
    }

    fn is_empty_dir(&self, ino: u64) -> bool {
        self.entries(ino).is_ok_and(BTreeMap::is_empty)
    }

    fn rename_node(
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

    fn sync_file(&mut self, ino: u64) -> Result<(), c_int> {
        let path = self.store.node(ino);
        match &mut self.nodes.get_mut(&ino).ok_or(libc::ENOENT)?.kind {
            Kind::File(file) => file.sync(&path).map_err(errno),
            _ => Ok(()),
        }
    }

    fn sync_dir(&mut self, ino: u64) -> Result<(), c_int> {
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

    fn open_handle(&mut self, ino: u64, flags: i32) -> u64 {
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

    /// Answers with the entry of the node `found` names, or its error.
    fn reply_entry(&self, found: Result<u64, c_int>, reply: ReplyEntry) {
        let ino = match found {
            Ok(ino) => ino,
            Err(e) => return reply.error(e),
        };
        match self.attr(ino) {
            Some(attr) => reply.entry(&TTL, &attr, 0),
            None => reply.error(libc::ENOENT),
        }
    }
}

impl Kind {
    fn dir(parent: u64) -> Kind {
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

    fn touch(&mut self) {
        let now = SystemTime::now();
        self.mtime = now;
        self.ctime = now;
    }
}

/// The backing directory's file system numbers.
#[allow(unsafe_code)]
fn statvfs(path: &Path) -> io::Result<libc::statvfs> {
    let path = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: a valid C string, and an out-parameter of plain integers
    // that statvfs fills when it returns 0.
    unsafe {
        let mut stat: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(path.as_ptr(), &mut stat) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(stat)
    }
}

/// Answers an operation that returns nothing but its outcome.
fn answer(reply: ReplyEmpty, result: Result<(), c_int>) {
    match result {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

fn time(t: TimeOrNow) -> SystemTime {
    match t {
        TimeOrNow::SpecificTime(t) => t,
        TimeOrNow::Now => SystemTime::now(),
    }
}

impl Filesystem for ForgetFs {
    fn init(&mut self, _req: &Request<'_>, _config: &mut KernelConfig) -> Result<(), c_int> {
        Ok(())
    }

    fn lookup(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        self.reply_entry(self.child(parent, name), reply)
    }

    fn getattr(&mut self, _req: &Request<'_>, ino: u64, _fh: Option<u64>, reply: ReplyAttr) {
        match self.attr(ino) {
            Some(attr) => reply.attr(&TTL, &attr),
            None => reply.error(libc::ENOENT),
        }
    }

    fn setattr(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<u64>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<u32>,
        reply: ReplyAttr,
    ) {
        let Some(node) = self.nodes.get_mut(&ino) else {
            return reply.error(libc::ENOENT);
        };
        if let Some(size) = size {
            match &mut node.kind {
                Kind::File(file) => file.truncate(size),
                Kind::Dir { .. } => return reply.error(libc::EISDIR),
                Kind::Symlink(_) => return reply.error(libc::EINVAL),
            }
            node.touch();
        }
        if let Some(mode) = mode {
            node.mode = mode & 0o7777;
            node.ctime = SystemTime::now();
        }
        if let Some(t) = atime {
            node.atime = time(t);
        }
        if let Some(t) = mtime {
            node.mtime = time(t);
        }
        self.getattr(_req, ino, None, reply);
    }

    fn readlink(&mut self, _req: &Request<'_>, ino: u64, reply: ReplyData) {
        match self.nodes.get(&ino).map(|n| &n.kind) {
            Some(Kind::Symlink(target)) => reply.data(target.as_os_str().as_bytes()),
            Some(_) => reply.error(libc::EINVAL),
            None => reply.error(libc::ENOENT),
        }
    }

    fn mknod(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        if mode & libc::S_IFMT != libc::S_IFREG {
            return reply.error(libc::EPERM);
        }
        let created =
            self.create_node(parent, name, Kind::File(FileData::default()), mode & !umask);
        self.reply_entry(created, reply)
    }

    fn mkdir(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let created = self.create_node(parent, name, Kind::dir(parent), mode & !umask);
        self.reply_entry(created, reply)
    }

    fn unlink(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        let removed = self.child(parent, name).and_then(|ino| {
            if matches!(self.nodes[&ino].kind, Kind::Dir { .. }) {
                return Err(libc::EISDIR);
            }
            self.entries_mut(parent)?.remove(name);
            self.unlinked(ino);
            Ok(())
        });
        answer(reply, removed)
    }

    fn rmdir(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        let removed = self.child(parent, name).and_then(|ino| {
            if !matches!(self.nodes[&ino].kind, Kind::Dir { .. }) {
                return Err(libc::ENOTDIR);
            }
            if !self.is_empty_dir(ino) {
                return Err(libc::ENOTEMPTY);
            }
            self.entries_mut(parent)?.remove(name);
            self.unlinked(ino);
            Ok(())
        });
        answer(reply, removed)
    }

    fn symlink(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let created = self
            .create_node(parent, link_name, Kind::Symlink(target.to_owned()), 0o777)
            .and_then(|ino| {
                // A link's target is part of its inode: durable with its name.
                fs::write(self.store.link(ino), target.as_os_str().as_bytes()).map_err(errno)?;
                Ok(ino)
            });
        self.reply_entry(created, reply)
    }

    fn rename(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
        reply: ReplyEmpty,
    ) {
        answer(
            reply,
            self.rename_node(parent, name, newparent, newname, flags),
        )
    }

    fn link(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        newparent: u64,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let linked = (|| {
            if !matches!(
                self.nodes.get(&ino).ok_or(libc::ENOENT)?.kind,
                Kind::File(_)
            ) {
                return Err(libc::EPERM);
            }
            if self.entries(newparent)?.contains_key(newname) {
                return Err(libc::EEXIST);
            }
            self.entries_mut(newparent)?.insert(newname.to_owned(), ino);
            let node = self.nodes.get_mut(&ino).expect("checked");
            node.nlink += 1;
            node.ctime = SystemTime::now();
            Ok(())
        })();
        self.reply_entry(linked.map(|()| ino), reply)
    }

    fn open(&mut self, _req: &Request<'_>, ino: u64, flags: i32, reply: ReplyOpen) {
        if !self.nodes.contains_key(&ino) {
            return reply.error(libc::ENOENT);
        }
        if flags & libc::O_TRUNC != 0 {
            if let Some(Node {
                kind: Kind::File(file),
                ..
            }) = self.nodes.get_mut(&ino)
            {
                file.truncate(0);
            }
        }
        let fh = self.open_handle(ino, flags);
        reply.opened(fh, 0);
    }

    fn read(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        size: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyData,
    ) {
        match self.nodes.get(&ino).map(|n| &n.kind) {
            Some(Kind::File(file)) => {
                let start = (offset as usize).min(file.data.len());
                let end = (start + size as usize).min(file.data.len());
                reply.data(&file.data[start..end]);
            }
            Some(_) => reply.error(libc::EISDIR),
            None => reply.error(libc::ENOENT),
        }
    }

    fn write(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        fh: u64,
        offset: i64,
        data: &[u8],
        _write_flags: u32,
        flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyWrite,
    ) {
        let Some(node) = self.nodes.get_mut(&ino) else {
            return reply.error(libc::ENOENT);
        };
        let Kind::File(file) = &mut node.kind else {
            return reply.error(libc::EISDIR);
        };
        let offset = if flags & libc::O_APPEND != 0 {
            file.data.len() as u64
        } else {
            offset as u64
        };
        file.write(offset, data);
        node.touch();
        let sync = self.handles.get(&fh).is_some_and(|h| h.sync_writes);
        if sync {
            if let Err(e) = self.sync_file(ino) {
                return reply.error(e);
            }
        }
        reply.written(data.len() as u32);
    }

    fn flush(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        _fh: u64,
        _lock_owner: u64,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn release(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        _flags: i32,
        _lock_owner: Option<u64>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        if let Some(handle) = self.handles.remove(&fh) {
            if let Some(node) = self.nodes.get_mut(&handle.ino) {
                node.open = node.open.saturating_sub(1);
                if node.nlink == 0 && node.open == 0 {
                    self.nodes.remove(&handle.ino);
                }
            }
        }
        reply.ok();
    }

    fn fsync(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        answer(reply, self.sync_file(ino))
    }

    fn readdir(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        mut reply: ReplyDirectory,
    ) {
        let (parent, entries) = match self.nodes.get(&ino).map(|n| &n.kind) {
            Some(Kind::Dir { parent, entries }) => (*parent, entries),
            Some(_) => return reply.error(libc::ENOTDIR),
            None => return reply.error(libc::ENOENT),
        };
        let dots = [
            (ino, FileType::Directory, OsStr::new(".")),
            (parent, FileType::Directory, OsStr::new("..")),
        ];
        let children = entries.iter().map(|(name, &child)| {
            let kind = match self.nodes.get(&child).map(|n| &n.kind) {
                Some(Kind::Dir { .. }) => FileType::Directory,
                Some(Kind::Symlink(_)) => FileType::Symlink,
                _ => FileType::RegularFile,
            };
            (child, kind, name.as_os_str())
        });
        for (i, (child, kind, name)) in dots
            .into_iter()
            .chain(children)
            .enumerate()
            .skip(offset as usize)
        {
            if reply.add(child, i as i64 + 1, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        answer(reply, self.sync_dir(ino))
    }

    fn statfs(&mut self, _req: &Request<'_>, _ino: u64, reply: ReplyStatfs) {
        let stat = match statvfs(&self.backing) {
            Ok(stat) => stat,
            Err(e) => return reply.error(errno(e)),
        };
        reply.statfs(
            stat.f_blocks,
            stat.f_bfree,
            stat.f_bavail,
            stat.f_files,
            stat.f_ffree,
            stat.f_bsize as u32,
            stat.f_namemax as u32,
            stat.f_frsize as u32,
        );
    }

    fn access(&mut self, _req: &Request<'_>, ino: u64, _mask: i32, reply: ReplyEmpty) {
        if self.nodes.contains_key(&ino) {
            reply.ok()
        } else {
            reply.error(libc::ENOENT)
        }
    }

    fn create(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        match self.create_node(parent, name, Kind::File(FileData::default()), mode & !umask) {
            Ok(ino) => {
                let fh = self.open_handle(ino, flags);
                let attr = self.attr(ino).expect("just created");
                reply.created(&TTL, &attr, 0, fh, 0);
            }
            Err(e) => reply.error(e),
        }
    }

    fn fallocate(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        length: i64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        if mode != 0 {
            return reply.error(libc::EOPNOTSUPP);
        }
        match self.nodes.get_mut(&ino).map(|n| &mut n.kind) {
            Some(Kind::File(file)) => {
                let end = (offset + length) as u64;
                if end > file.data.len() as u64 {
                    file.truncate(end);
                }
                reply.ok();
            }
            Some(_) => reply.error(libc::EISDIR),
            None => reply.error(libc::ENOENT),
        }
    }
}
