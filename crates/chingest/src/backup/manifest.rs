//! A backup's manifest, `chingest-backup`: what chingest wrote, and the
//! size and XXH3 hash of every file the engine wrote for it. It is written
//! last (durably), so a backup without one never finished; a restore
//! compares every file against it first, so a truncated or altered file is
//! refused before anything is restored (the engine's `RESTORE` notices a
//! short file only part way, and a changed byte not at all).
//!
//! The format is text, one item per line, ending with a line that hashes
//! all the lines before it:
//!
//! ```text
//! chingest-backup 1
//! created_ms 1796000000000
//! chingest 0.1.0
//! engine 26.7.3
//! database telegraf
//! base /backups/full-1
//! file 5b4c1f0e9a2d7c31 8556 .backup
//! end 0f2e…
//! ```
//!
//! File-system work and text only: no engine calls.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use xxhash_rust::xxh3::{xxh3_64, Xxh3};

use crate::durable;

/// The manifest's name inside a backup.
pub(crate) const MANIFEST_NAME: &str = "chingest-backup";

/// The first line; the number is the format's version.
const HEADER: &str = "chingest-backup 1";

/// A file the engine wrote into a backup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileEntry {
    /// XXH3 (64 bits, seed 0) of its bytes: the engine's `xxh3` too, so
    /// objects in S3 are hashed where they are.
    pub(crate) hash: u64,
    pub(crate) size: u64,
}

/// What a backup holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Manifest {
    pub(crate) created_ms: u64,
    pub(crate) chingest_version: String,
    pub(crate) engine_version: String,
    pub(crate) databases: Vec<String>,
    /// The backup this one adds to (its location, no credentials).
    pub(crate) base: Option<String>,
    /// By path relative to the backup's root.
    pub(crate) files: BTreeMap<String, FileEntry>,
}

impl Manifest {
    /// Bytes of the files listed.
    pub(crate) fn bytes(&self) -> u64 {
        self.files.values().map(|f| f.size).sum()
    }

    pub(crate) fn render(&self) -> String {
        let mut out = format!(
            "{HEADER}\ncreated_ms {}\nchingest {}\nengine {}\n",
            self.created_ms, self.chingest_version, self.engine_version
        );
        for db in &self.databases {
            out += &format!("database {db}\n");
        }
        if let Some(base) = &self.base {
            out += &format!("base {base}\n");
        }
        for (path, file) in &self.files {
            out += &format!("file {:016x} {} {path}\n", file.hash, file.size);
        }
        let sealed = xxh3_64(out.as_bytes());
        out + &format!("end {sealed:016x}\n")
    }

    /// Parses `text`, refusing anything but a whole manifest: a cut or
    /// edited one fails its last line's hash.
    pub(crate) fn parse(text: &str) -> Result<Manifest, String> {
        let body_end = text
            .trim_end_matches('\n')
            .rfind('\n')
            .map(|i| i + 1)
            .ok_or("it is empty or cut short")?;
        let (body, end) = text.split_at(body_end);
        let sealed = end
            .trim_end()
            .strip_prefix("end ")
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .ok_or("its last line is not its seal (`end <hash>`): it was cut short")?;
        if sealed != xxh3_64(body.as_bytes()) {
            return Err("its seal does not match its contents: it was altered".into());
        }
        // Lines end at `\n` only: `lines()` would also take a `\r` before
        // it, off a value that ends in one (found by the `backup_manifest`
        // fuzz target), and the manifest would not read back as written.
        let mut lines = body.split_terminator('\n');
        if lines.next() != Some(HEADER) {
            return Err(format!("its first line is not {HEADER:?}"));
        }
        let mut manifest = Manifest {
            created_ms: 0,
            chingest_version: String::new(),
            engine_version: String::new(),
            databases: Vec::new(),
            base: None,
            files: BTreeMap::new(),
        };
        for line in lines {
            let (key, value) = line.split_once(' ').unwrap_or((line, ""));
            match key {
                "created_ms" => {
                    manifest.created_ms = value.parse().map_err(|_| format!("bad line {line:?}"))?
                }
                "chingest" => manifest.chingest_version = value.to_owned(),
                "engine" => manifest.engine_version = value.to_owned(),
                "database" => manifest.databases.push(value.to_owned()),
                "base" => manifest.base = Some(value.to_owned()),
                "file" => {
                    let mut parts = value.splitn(3, ' ');
                    let (Some(hash), Some(size), Some(path)) =
                        (parts.next(), parts.next(), parts.next())
                    else {
                        return Err(format!("bad line {line:?}"));
                    };
                    let entry = FileEntry {
                        hash: u64::from_str_radix(hash, 16)
                            .map_err(|_| format!("bad line {line:?}"))?,
                        size: size.parse().map_err(|_| format!("bad line {line:?}"))?,
                    };
                    manifest.files.insert(path.to_owned(), entry);
                }
                _ => return Err(format!("unknown line {line:?}")),
            }
        }
        Ok(manifest)
    }

    /// Why `found` (the files a backup holds now, its manifest excluded)
    /// is not what this manifest lists, naming the first file that differs.
    pub(crate) fn mismatch(&self, found: &BTreeMap<String, FileEntry>) -> Option<String> {
        for (path, listed) in &self.files {
            match found.get(path) {
                None => return Some(format!("{path} is missing")),
                Some(file) if file.size != listed.size => {
                    return Some(format!(
                        "{path} has {} bytes, {} when it was written",
                        file.size, listed.size
                    ))
                }
                Some(file) if file.hash != listed.hash => {
                    return Some(format!("{path} is not the file written (its hash differs)"))
                }
                Some(_) => {}
            }
        }
        found
            .keys()
            .find(|path| !self.files.contains_key(*path))
            .map(|path| format!("{path} is not part of the backup"))
    }
}

/// The files under `root` (its manifest and leftovers of a manifest being
/// written excluded), each hashed; with `sync`, each file and directory is
/// also made durable on the way.
pub(crate) fn scan_dir(root: &Path, sync: bool) -> io::Result<BTreeMap<String, FileEntry>> {
    let mut files = BTreeMap::new();
    let mut pending = vec![root.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let path = entry.path();
            let kind = entry.file_type()?;
            if kind.is_dir() {
                pending.push(path);
                continue;
            }
            let relative = path
                .strip_prefix(root)
                .expect("under the root")
                .to_string_lossy()
                .into_owned();
            if relative == MANIFEST_NAME || relative == format!("{MANIFEST_NAME}.tmp") {
                continue;
            }
            files.insert(relative, hash_file(&path, sync)?);
        }
        if sync {
            durable::sync(&dir)?;
        }
    }
    Ok(files)
}

fn hash_file(path: &Path, sync: bool) -> io::Result<FileEntry> {
    let mut file = File::open(path)?;
    let mut hasher = Xxh3::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        size += n as u64;
    }
    if sync {
        file.sync_all()?;
    }
    Ok(FileEntry {
        hash: hasher.digest(),
        size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> Manifest {
        let mut files = BTreeMap::new();
        files.insert(
            ".backup".to_owned(),
            FileEntry {
                hash: 0xabc,
                size: 10,
            },
        );
        files.insert(
            "data/my db/t/all_1_1_0/data.bin".to_owned(),
            FileEntry { hash: 7, size: 3 },
        );
        Manifest {
            created_ms: 1,
            chingest_version: "0.1.0".into(),
            engine_version: "26.7.3".into(),
            databases: vec!["telegraf".into(), "my db".into()],
            base: Some("/b/full".into()),
            files,
        }
    }

    #[test]
    fn a_manifest_reads_back_as_written() {
        let m = manifest();
        assert_eq!(Manifest::parse(&m.render()).unwrap(), m);
        assert_eq!(m.bytes(), 13);
    }

    /// fuzz/seeds/backup_manifest/regression-carriage-return.
    #[test]
    fn values_ending_in_a_carriage_return_read_back_as_written() {
        let mut written = manifest();
        written.databases.push("db\r".to_owned());
        written
            .files
            .insert("dir/file\r".to_owned(), FileEntry { hash: 1, size: 2 });
        assert_eq!(Manifest::parse(&written.render()), Ok(written));
    }

    #[test]
    fn a_cut_or_edited_manifest_is_refused() {
        let text = manifest().render();
        for cut in [0, 10, text.len() / 2, text.len() - 3] {
            assert!(Manifest::parse(&text[..cut]).is_err(), "cut at {cut}");
        }
        let edited = text.replace("file 0000000000000007 3", "file 0000000000000007 4");
        assert!(Manifest::parse(&edited).unwrap_err().contains("altered"));
    }

    #[test]
    fn the_engine_and_this_module_hash_alike() {
        // `SELECT xxh3('abc')` in the engine.
        assert_eq!(xxh3_64(b"abc"), 8696274497037089104);
    }

    #[test]
    fn mismatches_name_the_file() {
        let m = manifest();
        let mut found = m.files.clone();
        assert_eq!(m.mismatch(&found), None);
        found.get_mut(".backup").unwrap().hash = 1;
        assert!(m
            .mismatch(&found)
            .unwrap()
            .contains(".backup is not the file written"));
        found.get_mut(".backup").unwrap().size = 2;
        assert!(m.mismatch(&found).unwrap().contains("2 bytes, 10"));
        found.remove(".backup");
        assert!(m.mismatch(&found).unwrap().contains(".backup is missing"));
        let mut extra = m.files.clone();
        extra.insert("x".into(), FileEntry { hash: 0, size: 0 });
        assert!(m.mismatch(&extra).unwrap().contains("x is not part"));
    }

    #[test]
    fn scanning_a_directory_hashes_every_file_but_the_manifest() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("data/d")).unwrap();
        std::fs::write(dir.path().join("data/d/f"), b"abc").unwrap();
        std::fs::write(dir.path().join(MANIFEST_NAME), b"x").unwrap();
        let files = scan_dir(dir.path(), true).unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!(
            files["data/d/f"],
            FileEntry {
                hash: 8696274497037089104,
                size: 3
            }
        );
    }
}
