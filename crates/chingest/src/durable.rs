//! What makes the engine's writes survive a power cut before the log
//! forgets them.
//!
//! The invariant: a log record (or anything else acknowledged) is
//! forgotten only after the engine has made its effect durable. The
//! engine syncs part contents and part directories itself once told to
//! ([`ENGINE_CONFIG`], engine-wide, so every MergeTree has it: fact,
//! series and metadata tables, and any other table in the data
//! directory). It does not sync the directory a part is renamed into, its
//! deduplication log, or the catalog's files and directories: those are
//! synced here, after each insert ([`sync_table_dir`]) and after each
//! statement that changes the catalog or edits rows ([`sync_catalog`]).
//!
//! File-system work only: no engine calls.

use std::fs::{File, FileType};
use std::io;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The engine's configuration, read at boot: every MergeTree fsyncs the
/// files of a part it inserts (`fsync_after_insert`) or writes by a merge
/// or mutation (`min_*_to_fsync_after_merge` = 1: every such part), and
/// the part's directory after renaming it (`fsync_part_directory`).
/// Backups may go to any directory (`backups.allowed_path`): only
/// chingest's own statements run `BACKUP` and `RESTORE`, for an admin
/// (untrusted statements are refused both, see `read::sandbox`).
pub(crate) const ENGINE_CONFIG: &str = "<clickhouse>
    <merge_tree>
        <fsync_after_insert>1</fsync_after_insert>
        <fsync_part_directory>1</fsync_part_directory>
        <min_rows_to_fsync_after_merge>1</min_rows_to_fsync_after_merge>
        <min_compressed_bytes_to_fsync_after_merge>1</min_compressed_bytes_to_fsync_after_merge>
    </merge_tree>
    <backups>
        <allowed_path>/</allowed_path>
    </backups>
</clickhouse>
";

/// The MergeTree settings [`ENGINE_CONFIG`] sets, with their values: open
/// checks the engine reports them.
pub(crate) const ENGINE_SETTINGS: [(&str, &str); 4] = [
    ("fsync_after_insert", "1"),
    ("fsync_part_directory", "1"),
    ("min_rows_to_fsync_after_merge", "1"),
    ("min_compressed_bytes_to_fsync_after_merge", "1"),
];

/// The file, in the data directory, that holds [`ENGINE_CONFIG`].
pub(crate) const ENGINE_CONFIG_FILE: &str = "chingest-engine.xml";

/// Makes a file's contents, or a directory's entries (files created,
/// renamed or removed in it), durable.
pub(crate) fn sync(path: &Path) -> io::Result<()> {
    File::open(path)?.sync_all()
}

/// Creates `dir` and its missing parents, durably: each directory created
/// is named in a synced parent.
pub(crate) fn create_dir_all(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let parent = match dir.parent() {
        None => return Ok(()),
        Some(parent) if parent.as_os_str().is_empty() => Path::new("."),
        Some(parent) => parent,
    };
    create_dir_all(parent)?;
    match std::fs::create_dir(dir) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    sync(parent)
}

/// Writes `contents` to `path` durably (a temporary file, synced, renamed
/// over it, the directory synced).
pub(crate) fn write(path: &Path, contents: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, contents)?;
    sync(&tmp)?;
    std::fs::rename(&tmp, path)?;
    sync(path.parent().unwrap_or(Path::new(".")))
}

/// After an insert into the MergeTree kept in `dir`: its deduplication
/// log (the record that makes a replayed insert a no-op), then the
/// directory the new part was renamed into.
pub(crate) fn sync_table_dir(dir: &Path) -> io::Result<()> {
    let dedup = dir.join("deduplication_logs");
    sync_entries(&dedup, |_| true)?;
    unless_vanished(sync(&dedup))?;
    sync(dir)
}

/// The part named by the newest entry still live in a table's
/// deduplication log (`dir`, the engine's `deduplication_logs`): the part
/// the table's last deduplicated insert created. The log is the engine's
/// text format, one `<op>\t<part>\t<block id>` line per entry, op 1 adding
/// and op 2 dropping a block id, in files numbered in write order.
pub(crate) fn last_deduplicated_part(dir: &Path) -> io::Result<Option<String>> {
    let mut files: Vec<(u64, PathBuf)> = entries(dir, FileType::is_file)?
        .into_iter()
        .filter_map(|path| {
            let number = path
                .file_stem()?
                .to_str()?
                .strip_prefix("deduplication_log_")?
                .parse()
                .ok()?;
            Some((number, path))
        })
        .collect();
    files.sort();
    // Block id → (order added, part), for the ids added and not dropped.
    let mut live: std::collections::HashMap<String, (usize, String)> = Default::default();
    let mut order = 0;
    for (_, path) in files {
        for line in std::fs::read_to_string(&path)?.lines() {
            let mut fields = line.splitn(3, '\t');
            let (Some(op), Some(part), Some(block_id)) =
                (fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            match op {
                "1" => {
                    order += 1;
                    live.insert(block_id.to_owned(), (order, part.to_owned()));
                }
                "2" => {
                    live.remove(block_id);
                }
                _ => {}
            }
        }
    }
    Ok(live.into_values().max().map(|(_, part)| part))
}

/// After DDL or an edit: every table's and database's directory under
/// `store/` with the files kept beside its parts (formats, mutations,
/// deduplication logs, a database's table definitions), the catalog's
/// `metadata/` and `metadata_dropped/`, the `data/` links, and the data
/// directory itself. Parts sync themselves ([`ENGINE_CONFIG`]). Each
/// table's directory is synced by `sync_table_dir` (the caller's
/// [`sync_table_dir`] under the lock that keeps inserts out).
///
/// With `since`, what an earlier sync made durable is skipped: a file or
/// directory whose status last changed before `since` (its ctime: a write,
/// or an entry made, renamed or removed in it, sets it), and a table
/// directory none of whose files did. Syncing a file with nothing to write
/// still flushes the device's cache, so a sync of everything costs a flush
/// per file of every table: seconds per statement once there are
/// thousands of tables. The walk itself only reads the directories.
pub(crate) fn sync_catalog(
    root: &Path,
    since: Option<SystemTime>,
    sync_table_dir: impl Fn(&Path) -> io::Result<()>,
) -> io::Result<()> {
    let changed = |path: &Path| changed_since(path, since);
    let store = root.join("store");
    for prefix in subdirs(&store)? {
        for dir in subdirs(&prefix)? {
            let files = entries(&dir, FileType::is_file)?;
            let logs = dir.join("deduplication_logs");
            let log_files = entries(&logs, FileType::is_file)?;
            let mut any = changed(&dir) || changed(&logs) || log_files.iter().any(|f| changed(f));
            for file in files.iter().filter(|f| changed(f)) {
                unless_vanished(sync(file))?;
                any = true;
            }
            if any {
                unless_vanished(sync_table_dir(&dir))?;
            }
        }
        if changed(&prefix) {
            unless_vanished(sync(&prefix))?;
        }
    }
    for dir in ["metadata", "metadata_dropped", "data"] {
        let dir = root.join(dir);
        for entry in entries(&dir, |kind| kind.is_file() || kind.is_dir())? {
            if changed(&entry) {
                unless_vanished(sync(&entry))?;
            }
        }
        if changed(&dir) {
            unless_vanished(sync(&dir))?;
        }
    }
    if store.is_dir() && changed(&store) {
        sync(&store)?;
    }
    sync(root)
}

/// Whether `path`'s status changed at or after `since` (always, without
/// `since`; never, once it is gone).
fn changed_since(path: &Path, since: Option<SystemTime>) -> bool {
    let Some(since) = since else {
        return true;
    };
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return false;
    };
    let (secs, nanos) = (meta.ctime(), meta.ctime_nsec());
    let changed = match u64::try_from(secs) {
        Ok(secs) => UNIX_EPOCH + Duration::new(secs, nanos.clamp(0, 999_999_999) as u32),
        // Before 1970: a clock gone wrong; sync.
        Err(_) => return true,
    };
    changed >= since
}

/// Makes every file and directory under `root` durable (symbolic links
/// not followed): a tree the engine wrote without syncing it, such as a
/// restore's or a snapshot's.
pub(crate) fn sync_tree(root: &Path) -> io::Result<()> {
    for file in entries(root, FileType::is_file)? {
        sync(&file)?;
    }
    for dir in entries(root, FileType::is_dir)? {
        sync_tree(&dir)?;
    }
    sync(root)
}

/// A walk over the catalog races the engine's other statements: a file
/// or directory removed (or renamed away) after it was listed is not an
/// error, its parent's sync, which comes after, makes the removal durable.
fn unless_vanished(result: io::Result<()>) -> io::Result<()> {
    match result {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        result => result,
    }
}

/// The entries of `dir` whose type `keep` accepts (none if `dir` does
/// not exist), symbolic links not followed.
fn entries(dir: &Path, keep: impl Fn(&FileType) -> bool) -> io::Result<Vec<PathBuf>> {
    let listed = match std::fs::read_dir(dir) {
        Ok(listed) => listed,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut kept = Vec::new();
    for entry in listed {
        let entry = entry?;
        if keep(&entry.file_type()?) {
            kept.push(entry.path());
        }
    }
    Ok(kept)
}

/// The directories in `dir`.
fn subdirs(dir: &Path) -> io::Result<Vec<PathBuf>> {
    entries(dir, FileType::is_dir)
}

/// Syncs the entries of `dir` that `keep` accepts; those gone since
/// listed are skipped.
fn sync_entries(dir: &Path, keep: impl Fn(&FileType) -> bool) -> io::Result<()> {
    for entry in entries(dir, keep)? {
        unless_vanished(sync(&entry))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_live_deduplication_entry_names_the_last_part() {
        let dir = tempfile::tempdir().unwrap();
        let log = |n: u32, lines: &str| {
            std::fs::write(dir.path().join(format!("deduplication_log_{n}.txt")), lines).unwrap()
        };
        assert_eq!(last_deduplicated_part(dir.path()).unwrap(), None);
        log(1, "1\tp_1_1_0\ta\n1\tp_2_2_0\tb\n");
        log(10, "1\tp_3_3_0\tc\n2\tp_3_3_0\tc\n");
        log(2, "1\tp_4_4_0\td\n");
        // Files in number order (2 before 10); the entry dropped does not count.
        assert_eq!(
            last_deduplicated_part(dir.path()).unwrap().as_deref(),
            Some("p_4_4_0")
        );
        assert_eq!(
            last_deduplicated_part(&dir.path().join("missing")).unwrap(),
            None
        );
    }

    #[test]
    fn a_catalog_sync_since_a_time_syncs_only_the_tables_changed_after_it() {
        let root = tempfile::tempdir().unwrap();
        let table = |name: &str| root.path().join("store").join("abc").join(name);
        for name in ["one", "two", "three"] {
            std::fs::create_dir_all(table(name).join("deduplication_logs")).unwrap();
            std::fs::write(table(name).join("format_version.txt"), "1").unwrap();
        }
        let synced = |since| {
            let seen = std::sync::Mutex::new(Vec::new());
            sync_catalog(root.path(), since, |dir| {
                seen.lock()
                    .unwrap()
                    .push(dir.file_name().unwrap().to_owned());
                Ok(())
            })
            .unwrap();
            let mut seen = seen.into_inner().unwrap();
            seen.sort();
            seen
        };
        assert_eq!(synced(None), ["one", "three", "two"]);
        // File times come from a coarser clock than `now`.
        std::thread::sleep(Duration::from_millis(50));
        let before_changes = SystemTime::now();
        std::thread::sleep(Duration::from_millis(50));
        assert!(synced(Some(before_changes)).is_empty());
        // A file written, an entry made in a deduplication log.
        std::fs::write(table("one").join("mutation_2.txt"), "x").unwrap();
        std::fs::write(
            table("three").join("deduplication_logs").join("log_1.txt"),
            "1",
        )
        .unwrap();
        assert_eq!(synced(Some(before_changes)), ["one", "three"]);
        assert_eq!(synced(None), ["one", "three", "two"]);
    }
}
