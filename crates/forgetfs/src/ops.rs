//! The FUSE operations: each kernel request answered from the tree in
//! memory, a sync written through to the store.

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

use fuser::{
    FileType, Filesystem, KernelConfig, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow,
};
use libc::c_int;

use crate::tree::{errno, FileData, ForgetFs, Kind, Node};

/// How long the kernel may cache names and attributes. Only this process
/// changes the tree, through the kernel, so caching is safe; a cut
/// unmounts, which drops every cache.
const TTL: Duration = Duration::from_secs(1);

impl ForgetFs {
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
