//! The engine's data directory, as far as durability goes: what makes DDL,
//! edits and inserts survive a power cut where the engine does not sync
//! them itself ([`durable`]), the check that it took its own durability
//! settings, and the broken parts it set aside when it booted.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arrow::record_batch::RecordBatch;
use chdb_rust::connection::Connection;

use crate::durable;
use crate::engine::register::insert_batch;
use crate::engine::statements::query_rows;
use crate::error::{Error, Result};
use crate::layout::names::{quote_ident, quote_literal, TableNames};

/// Where the broken parts already reported are listed, in the data
/// directory.
const BROKEN_PARTS_FILE: &str = "chingest-broken-parts";

/// The engine's data directory, as far as durability goes: the directories
/// the engine does not sync itself ([`durable`]).
#[derive(Debug)]
pub(crate) struct DataDir {
    root: PathBuf,
    /// Each MergeTree's directory, by quoted name; emptied by DDL (a table
    /// dropped and made again has a new directory).
    tables: Mutex<HashMap<String, PathBuf>>,
    /// Per table directory (by its name, the table's uuid): held shared by
    /// each insert into the table, exclusively by each sync of its
    /// deduplication log. The engine writes an insert's deduplication
    /// record before it renames the part into the directory; a sync in
    /// between would make the record durable without the part, and a
    /// power cut then would make the replay of that insert a no-op: its
    /// rows lost.
    inserting: Mutex<HashMap<OsString, Arc<RwLock<()>>>>,
    /// Everything in the catalog whose status changed before this is
    /// durable: the start of the last sync that finished, less
    /// [`CLOCK_MARGIN`]. `None` until one has.
    synced_before: Mutex<Option<SystemTime>>,
}

/// How far before a sync's start a change is still synced again: covers
/// file times taken from a coarser clock than `SystemTime::now`, and small
/// steps of the clock. A clock set back past the last sync's start makes
/// the next sync a whole one.
const CLOCK_MARGIN: Duration = Duration::from_secs(2);

impl DataDir {
    /// The data directory at `root`, none of its tables' directories known
    /// yet.
    pub(super) fn new(root: &Path) -> DataDir {
        DataDir {
            root: root.to_owned(),
            tables: Mutex::default(),
            inserting: Mutex::default(),
            synced_before: Mutex::default(),
        }
    }

    /// Inserts `batch` into `table` (quoted; see [`insert_batch`]) and
    /// makes it durable: the part's name and its deduplication record.
    pub(crate) fn insert_durably(
        &self,
        conn: &Connection,
        table: &str,
        batch: RecordBatch,
        dedup_token: Option<&str>,
    ) -> Result<()> {
        let dir = self.table_dir(conn, table)?;
        let lock = self.insert_lock(&dir);
        {
            let _inserting = lock.read().unwrap();
            insert_batch(conn, table, batch, dedup_token)?;
        }
        let _syncing = lock.write().unwrap();
        durable::sync_table_dir(&dir).map_err(|source| Error::Io {
            context: format!("syncing {} (table {table})", dir.display()),
            source,
        })
    }

    /// Whether the newest insert into the table `names` names was lost in
    /// a power cut although the engine would ignore its repetition: its
    /// deduplication record is durable, its part is not. A cut between
    /// the two syncs of [`insert_durably`](Self::insert_durably) (the
    /// record first, so that a part never outlives its record) leaves
    /// that. The record names a new part (`<partition>_<b>_<b>_0`); it was
    /// lost if no active part of the table holds block `b`.
    pub(crate) fn last_insert_lost(&self, conn: &Connection, names: &TableNames) -> Result<bool> {
        let dir = self.table_dir(conn, &names.storage_table)?;
        let logs = dir.join("deduplication_logs");
        let part = durable::last_deduplicated_part(&logs).map_err(|source| Error::Io {
            context: format!("reading {}", logs.display()),
            source,
        })?;
        let Some((partition, block)) = part.as_deref().and_then(new_part_block) else {
            return Ok(false);
        };
        let held = query_rows(
            conn,
            &format!(
                "SELECT count() FROM system.parts WHERE database = {} AND table = {} AND active \
                 AND partition_id = {} AND min_block_number <= {block} \
                 AND max_block_number >= {block}",
                quote_literal(&names.database_name),
                quote_literal(&names.storage_name),
                quote_literal(partition),
            ),
        )?;
        Ok(held.first().and_then(|row| row.first()).map(String::as_str) == Some("0"))
    }

    /// The lock of the table in `dir` ([`DataDir::inserting`]).
    fn insert_lock(&self, dir: &Path) -> Arc<RwLock<()>> {
        let name = dir.file_name().unwrap_or(dir.as_os_str()).to_owned();
        Arc::clone(self.inserting.lock().unwrap().entry(name).or_default())
    }

    /// The directory of MergeTree `table` (quoted).
    fn table_dir(&self, conn: &Connection, table: &str) -> Result<PathBuf> {
        if let Some(dir) = self.tables.lock().unwrap().get(table) {
            return Ok(dir.clone());
        }
        let mut tables = HashMap::new();
        for row in query_rows(
            conn,
            "SELECT database, name, data_paths[1] FROM system.tables \
             WHERE engine LIKE '%MergeTree' AND notEmpty(data_paths)",
        )? {
            if let [database, name, path] = &row[..] {
                let quoted = format!("{}.{}", quote_ident(database), quote_ident(name));
                tables.insert(quoted, PathBuf::from(path));
            }
        }
        let dir = tables
            .get(table)
            .cloned()
            .ok_or_else(|| Error::Engine(format!("{table} has no data directory to sync")))?;
        *self.tables.lock().unwrap() = tables;
        Ok(dir)
    }

    /// Parts the engine found broken when it booted and set aside
    /// (`detached/`), that no earlier open reported: the quoted name of
    /// each one's table, and `database.table/part: reason`. Remembers them
    /// in [`BROKEN_PARTS_FILE`].
    pub(crate) fn new_broken_parts(&self, conn: &Connection) -> Result<Vec<(String, String)>> {
        let rows = query_rows(
            conn,
            "SELECT database, table, name, reason FROM system.detached_parts \
             WHERE startsWith(reason, 'broken') OR reason = 'covered-by-broken' \
             ORDER BY database, table, name",
        )?;
        let seen_file = self.root.join(BROKEN_PARTS_FILE);
        let seen = std::fs::read_to_string(&seen_file).unwrap_or_default();
        let seen: HashSet<&str> = seen.lines().collect();
        let mut all = Vec::new();
        let mut new = Vec::new();
        for row in rows {
            let [database, table, name, reason] = &row[..] else {
                continue;
            };
            let part = format!("{database}.{table}/{name}");
            if !seen.contains(part.as_str()) {
                let quoted = format!("{}.{}", quote_ident(database), quote_ident(table));
                new.push((quoted, format!("{part}: {reason}")));
            }
            all.push(part);
        }
        if !new.is_empty() {
            durable::write(&seen_file, all.join("\n").as_bytes()).map_err(|source| Error::Io {
                context: format!("writing {}", seen_file.display()),
                source,
            })?;
        }
        Ok(new)
    }

    /// Makes DDL or an edit durable: every catalog file and table
    /// directory that changed since the last sync that finished (all of
    /// them the first time, or after the clock went back).
    pub(crate) fn sync_catalog(&self) -> Result<()> {
        self.tables.lock().unwrap().clear();
        let started = SystemTime::now();
        let since = self
            .synced_before
            .lock()
            .unwrap()
            .filter(|&before| started >= before);
        let sync_table_dir = |dir: &Path| {
            let lock = self.insert_lock(dir);
            let _syncing = lock.write().unwrap();
            durable::sync_table_dir(dir)
        };
        durable::sync_catalog(&self.root, since, sync_table_dir).map_err(|source| Error::Io {
            context: format!("syncing the engine's catalog in {}", self.root.display()),
            source,
        })?;
        let synced = started.checked_sub(CLOCK_MARGIN).unwrap_or(UNIX_EPOCH);
        let mut before = self.synced_before.lock().unwrap();
        *before = Some(before.map_or(synced, |b| b.max(synced)));
        Ok(())
    }
}

/// The partition and block number of a part an insert created
/// (`<partition>_<b>_<b>_0`); `None` for any other name.
fn new_part_block(part: &str) -> Option<(&str, u64)> {
    let rest = part.strip_suffix("_0")?;
    let (rest, max) = rest.rsplit_once('_')?;
    let (partition, min) = rest.rsplit_once('_')?;
    let block = min.parse().ok()?;
    (max.parse::<u64>().ok()? == block && !partition.is_empty()).then_some((partition, block))
}

/// Fails unless the engine read the durability settings of
/// [`durable::ENGINE_CONFIG`]: without them a power cut loses parts the log
/// has already forgotten.
pub(super) fn check_durability_settings(conn: &Connection) -> Result<()> {
    let names = durable::ENGINE_SETTINGS
        .iter()
        .map(|(name, _)| quote_literal(name))
        .collect::<Vec<_>>()
        .join(", ");
    let rows = query_rows(
        conn,
        &format!("SELECT name, value FROM system.merge_tree_settings WHERE name IN ({names})"),
    )?;
    for (name, want) in durable::ENGINE_SETTINGS {
        let have = rows
            .iter()
            .find(|row| row[0] == name)
            .map(|row| row[1].as_str());
        if have != Some(want) {
            return Err(Error::Engine(format!(
                "the engine did not take its durability settings: {name} is {have:?}, not {want}"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_names_of_parts_inserts_create_give_their_block() {
        assert_eq!(new_part_block("197001_135_135_0"), Some(("197001", 135)));
        assert_eq!(new_part_block("a_b_7_7_0"), Some(("a_b", 7)));
        for other in [
            "197001_1_126_11_123",
            "197001_1_8_1",
            "197001_3_4_0",
            "_5_5_0",
            "x",
        ] {
            assert_eq!(new_part_block(other), None, "{other}");
        }
    }
}
