//! The file system's promise, checked through the kernel: after a cut,
//! what was synced is there and what was not is gone. Needs root and
//! `/dev/fuse` (CI has both); without them every test fails saying so.

use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use forgetfs::Mounted;

/// A backing directory and a mount of it.
struct Disk {
    backing: tempfile::TempDir,
    mountpoint: tempfile::TempDir,
    mounted: Option<Mounted>,
}

impl Disk {
    fn new() -> Disk {
        let mut disk = Disk {
            backing: tempfile::tempdir().unwrap(),
            mountpoint: tempfile::tempdir().unwrap(),
            mounted: None,
        };
        disk.mount();
        disk
    }

    fn mount(&mut self) {
        let mounted = forgetfs::mount(self.backing.path(), self.mountpoint.path())
            .unwrap_or_else(|e| panic!("mounting forgetfs needs root and /dev/fuse: {e}"));
        self.mounted = Some(mounted);
    }

    /// Power cut, then power back on.
    fn cut(&mut self) {
        self.mounted.take().expect("mounted").cut();
        self.mount();
    }

    fn path(&self, name: &str) -> PathBuf {
        self.mountpoint.path().join(name)
    }

    /// Syncs the mount's root directory.
    fn sync_root(&self) {
        sync_dir(self.mountpoint.path());
    }
}

impl Drop for Disk {
    fn drop(&mut self) {
        if let Some(mounted) = self.mounted.take() {
            mounted.cut();
        }
    }
}

fn sync_dir(dir: &Path) {
    File::open(dir).unwrap().sync_all().unwrap();
}

fn write_synced(path: &Path, bytes: &[u8]) {
    let mut file = File::create(path).unwrap();
    file.write_all(bytes).unwrap();
    file.sync_data().unwrap();
}

fn renameat2(from: &Path, to: &Path, flags: u32) -> std::io::Result<()> {
    let from = CString::new(from.as_os_str().as_bytes()).unwrap();
    let to = CString::new(to.as_os_str().as_bytes()).unwrap();
    // SAFETY: two valid C strings; renameat2 reads them and nothing else.
    #[allow(unsafe_code)]
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            flags,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[test]
fn unsynced_data_is_gone_and_synced_data_stays() {
    let mut disk = Disk::new();
    write_synced(&disk.path("synced"), b"kept");
    fs::write(disk.path("unsynced"), b"lost").unwrap();
    disk.sync_root();
    // Written after the root's sync: its name is lost too.
    write_synced(&disk.path("late"), b"named too late");
    disk.cut();

    assert_eq!(fs::read(disk.path("synced")).unwrap(), b"kept");
    // Named durably, contents never synced: an empty file.
    assert_eq!(fs::read(disk.path("unsynced")).unwrap(), b"");
    assert!(!disk.path("late").exists());
}

/// A name made durable before its contents leaves nothing in the backing
/// store but its directory's entry: its inode must still not be handed to
/// the next file created (the two names would share one file, and removing
/// one would leave the other naming nothing).
#[test]
fn a_file_named_but_never_synced_keeps_its_own_inode() {
    let mut disk = Disk::new();
    fs::write(disk.path("named"), b"lost").unwrap();
    disk.sync_root();
    disk.cut();
    write_synced(&disk.path("new"), b"new");
    assert_eq!(fs::read(disk.path("named")).unwrap(), b"");
    fs::remove_file(disk.path("new")).unwrap();
    disk.sync_root();
    disk.cut();
    assert_eq!(fs::read(disk.path("named")).unwrap(), b"");
    assert!(!disk.path("new").exists());
}

#[test]
fn an_append_after_a_sync_goes_back_to_the_synced_length() {
    let mut disk = Disk::new();
    let path = disk.path("log");
    write_synced(&path, &[7u8; 100_000]);
    disk.sync_root();
    let mut file = OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(&[9u8; 70_000]).unwrap();
    drop(file);
    assert_eq!(fs::metadata(&path).unwrap().len(), 170_000);
    disk.cut();

    assert_eq!(fs::read(&path).unwrap(), vec![7u8; 100_000]);
}

#[test]
fn overwrites_and_truncation_revert_to_the_synced_contents() {
    let mut disk = Disk::new();
    let path = disk.path("file");
    write_synced(&path, b"0123456789");
    disk.sync_root();
    let file = OpenOptions::new().write(true).open(&path).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&file, b"xx", 3).unwrap();
    file.set_len(5).unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"012xx");
    disk.cut();
    assert_eq!(fs::read(&path).unwrap(), b"0123456789");

    let file = OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(4).unwrap();
    file.sync_all().unwrap();
    disk.cut();
    assert_eq!(fs::read(&path).unwrap(), b"0123");
}

#[test]
fn an_o_dsync_write_is_durable_when_it_returns() {
    let mut disk = Disk::new();
    let path = disk.path("dsync");
    let mut file = OpenOptions::new()
        .create(true)
        .write(true)
        .custom_flags(libc::O_DSYNC)
        .open(&path)
        .unwrap();
    disk.sync_root();
    file.write_all(b"at once").unwrap();
    drop(file);
    disk.cut();
    assert_eq!(fs::read(&path).unwrap(), b"at once");
}

#[test]
fn renames_are_durable_only_once_their_directories_are_synced() {
    let mut disk = Disk::new();
    fs::create_dir(disk.path("dir")).unwrap();
    write_synced(&disk.path("dir/a"), b"a");
    sync_dir(&disk.path("dir"));
    disk.sync_root();

    fs::rename(disk.path("dir/a"), disk.path("dir/b")).unwrap();
    disk.cut();
    assert!(disk.path("dir/a").exists());
    assert!(!disk.path("dir/b").exists());

    fs::rename(disk.path("dir/a"), disk.path("dir/b")).unwrap();
    sync_dir(&disk.path("dir"));
    disk.cut();
    assert!(!disk.path("dir/a").exists());
    assert_eq!(fs::read(disk.path("dir/b")).unwrap(), b"a");
}

#[test]
fn a_directory_created_but_never_synced_comes_back_empty() {
    let mut disk = Disk::new();
    fs::create_dir(disk.path("part")).unwrap();
    write_synced(&disk.path("part/data.bin"), b"rows");
    // The part's name is durable, its entries are not.
    disk.sync_root();
    disk.cut();
    assert!(disk.path("part").is_dir());
    assert_eq!(fs::read_dir(disk.path("part")).unwrap().count(), 0);
}

#[test]
fn rename_noreplace_and_exchange() {
    let mut disk = Disk::new();
    write_synced(&disk.path("x"), b"x");
    write_synced(&disk.path("y"), b"y");
    let err = renameat2(&disk.path("x"), &disk.path("y"), libc::RENAME_NOREPLACE).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EEXIST));
    renameat2(&disk.path("x"), &disk.path("y"), libc::RENAME_EXCHANGE).unwrap();
    assert_eq!(fs::read(disk.path("x")).unwrap(), b"y");
    assert_eq!(fs::read(disk.path("y")).unwrap(), b"x");
    disk.sync_root();
    disk.cut();
    assert_eq!(fs::read(disk.path("x")).unwrap(), b"y");
    assert_eq!(fs::read(disk.path("y")).unwrap(), b"x");
}

#[test]
fn hard_and_symbolic_links_survive_with_their_names() {
    let mut disk = Disk::new();
    write_synced(&disk.path("file"), b"shared");
    fs::hard_link(disk.path("file"), disk.path("hard")).unwrap();
    std::os::unix::fs::symlink("file", disk.path("soft")).unwrap();
    disk.sync_root();
    disk.cut();
    assert_eq!(fs::read(disk.path("hard")).unwrap(), b"shared");
    assert_eq!(fs::read_link(disk.path("soft")).unwrap(), Path::new("file"));
    assert_eq!(fs::read(disk.path("soft")).unwrap(), b"shared");
    use std::os::unix::fs::MetadataExt;
    assert_eq!(fs::metadata(disk.path("file")).unwrap().nlink(), 2);
}

#[test]
fn removals_revert_until_synced() {
    let mut disk = Disk::new();
    write_synced(&disk.path("file"), b"back");
    disk.sync_root();
    fs::remove_file(disk.path("file")).unwrap();
    disk.cut();
    assert_eq!(fs::read(disk.path("file")).unwrap(), b"back");
    fs::remove_file(disk.path("file")).unwrap();
    disk.sync_root();
    disk.cut();
    assert!(!disk.path("file").exists());
    // What nothing durable reaches is deleted from the backing directory.
    assert_eq!(
        fs::read_dir(disk.backing.path().join("nodes"))
            .unwrap()
            .count(),
        0
    );
}

#[test]
fn free_space_is_the_backing_directorys() {
    let disk = Disk::new();
    let free = |path: &Path| {
        let path = CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid C string and a zeroed out-parameter.
        #[allow(unsafe_code)]
        unsafe {
            let mut stat: libc::statvfs = std::mem::zeroed();
            assert_eq!(libc::statvfs(path.as_ptr(), &mut stat), 0);
            stat.f_bavail * stat.f_frsize
        }
    };
    let (mounted, backing) = (free(disk.mountpoint.path()), free(disk.backing.path()));
    assert!(mounted > 0);
    // The same file system, give or take what other processes write.
    assert!(
        mounted.abs_diff(backing) < backing / 10,
        "{mounted} vs {backing}"
    );
}
