//! Downsampling in the `clickhouse` storage mode: every shard holds the
//! rollups and the registry of its own series, and a pass runs there
//! ([`Store::Shard`]); one node at a time makes passes over a database,
//! the holder of its [`Lease`]; every node reads the registries of all
//! shards each period ([`learnt_tables`]) to know where rows are gone
//! and what the rollups may lack; an edit on any node leaves a [`Mark`]
//! on each shard, which the next pass takes ([`clear_marks`]).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use crate::clock::now_ns;
use crate::cluster::{Cluster, StatementKind};
use crate::engine::{query_rows, Engine};
use crate::error::{Error, Result};
use crate::layout::names::{quote_ident, quote_literal, TableNames};
use crate::layout::rollup::{blocks_after_sql, rollup_name, Aggregate, Rollup};
use crate::layout::schema::FieldType;

use super::migrate::plan_migration;
use super::registry::{
    parse_registry_row, rollup_columns, state_table, MARK, REGISTRY_COLUMNS, STATE_TABLE,
};
use super::state::{union, Cuts, Kept, Span, State, CLEAN};
use super::store::{parts_by_table, Store};

/// The right to make passes over a database's tables in the cluster
/// mode, held by one node per term (a stretch of time the same on every
/// node whose clock agrees). A node claims a term by inserting its id
/// into the database's lease table on the first shard under the
/// deduplication token of the term: the first insert of a token is
/// stored, later ones are dropped as duplicates, so every node reads the
/// same holder back. The holder of a term also claims the next one, so
/// a live holder keeps the lease; when it dies, another node takes it
/// from the term after the next.
#[derive(Debug)]
pub(super) struct Lease {
    /// This node's id, random per process.
    pub(super) node: u64,
    pub(super) term: Duration,
    /// Databases whose lease table this process made.
    pub(super) made: Mutex<HashSet<String>>,
    /// By database, the last term read and whether this node holds it
    /// (a term's holder never changes once read).
    pub(super) read: Mutex<HashMap<String, (u64, bool)>>,
}

/// A lease table's name in each downsampled database.
pub(super) const LEASE_TABLE: &str = "_downsampling_lease";

impl Lease {
    /// A lease whose terms last `term`, for a node new to the cluster.
    pub(super) fn new(term: Duration) -> Lease {
        let seed = format!("{}:{}", std::process::id(), now_ns());
        Lease {
            node: xxhash_rust::xxh3::xxh3_64(seed.as_bytes()),
            term,
            made: Mutex::default(),
            read: Mutex::default(),
        }
    }

    /// Whether this node holds the lease on the passes over `database`
    /// (encoded names as [`TableNames`]) now: read once per term.
    pub(super) async fn holds(&self, cluster: &Cluster, database: &TableNames) -> Result<bool> {
        let table = format!("{}.{}", database.database, quote_ident(LEASE_TABLE));
        if !self.made.lock().unwrap().contains(&database.database_name) {
            let create = format!(
                "CREATE TABLE IF NOT EXISTS {table} (term UInt64, node UInt64) \
                 ENGINE = MergeTree ORDER BY term \
                 SETTINGS non_replicated_deduplication_window = 1000"
            );
            // On every shard, as the tables a `Distributed` one is made
            // over; used on the first.
            cluster
                .execute_everywhere(&create, StatementKind::Create)
                .await?;
            self.made
                .lock()
                .unwrap()
                .insert(database.database_name.clone());
        }
        let term = (now_ns().max(0) as u64) / self.term.as_nanos().max(1) as u64;
        if let Some((read, holds)) = self.read.lock().unwrap().get(&database.database_name) {
            if *read == term {
                return Ok(*holds);
            }
        }
        let holders = |rows: Vec<Vec<String>>| -> HashMap<u64, u64> {
            let mut holders = HashMap::new();
            // The first row of a term is its holder (only one is stored
            // unless a claim came more than 1,000 terms late).
            for row in rows {
                if let (Some(Ok(term)), Some(Ok(node))) = (
                    row.first().map(|t| t.parse()),
                    row.get(1).map(|n| n.parse()),
                ) {
                    holders.entry(term).or_insert(node);
                }
            }
            holders
        };
        let read = format!(
            "SELECT term, node FROM {table} WHERE term IN ({term}, {}) ORDER BY term, _block_number",
            term + 1
        );
        let mut held = holders(cluster.query_rows(0, &read).await?);
        if !held.contains_key(&term) {
            self.claim(cluster, &table, term).await?;
            held = holders(cluster.query_rows(0, &read).await?);
        }
        let holds = held.get(&term) == Some(&self.node);
        if holds && !held.contains_key(&(term + 1)) {
            self.claim(cluster, &table, term + 1).await?;
        }
        self.read
            .lock()
            .unwrap()
            .insert(database.database_name.clone(), (term, holds));
        Ok(holds)
    }

    pub(super) async fn claim(&self, cluster: &Cluster, table: &str, term: u64) -> Result<()> {
        let sql = format!(
            "INSERT INTO {table} (term, node) SETTINGS insert_deduplication_token = \
             'term-{term}' VALUES ({term}, {})",
            self.node
        );
        cluster.execute_on(0, &sql, StatementKind::Change).await
    }
}

/// What a node knows of the rollups in the cluster mode.
#[derive(Debug, Default)]
pub(super) struct Known {
    /// Each table's, by storage table, as last learnt.
    pub(super) learnt: HashMap<String, Learnt>,
    /// The spans of this node's inserts and edits (by storage table),
    /// each with the number of its last report: read from the rows until
    /// a learning begun after that report is done.
    pub(super) pending: HashMap<String, (Span, u64)>,
    /// The number of the last report.
    pub(super) reports: u64,
}

/// What a node learnt of one fact table's rollups on the shards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Learnt {
    /// The levels and, per cut, the earliest any shard records (before
    /// it every shard removed what it removed, after it none did; a shard
    /// with no registry row for the table removed nothing).
    pub(super) kept: Kept,
    /// The fields whose columns the rollups have here (their
    /// `Distributed` tables, as the first shard's were last learnt).
    pub(super) fields: Vec<(String, FieldType)>,
    /// Where some shard holds rows no pass rolled up (from the earliest
    /// of them on: later writes land after it, but for late ones) or an
    /// edit's mark no pass took.
    pub(super) unsettled: Option<Span>,
}

/// What readers of the database of `names` may take from the rollups of
/// its fact tables `facts` (with their fields) in the cluster mode, by
/// storage table, from every shard's registry. A table whose rollups are
/// not all here is left out (its rows are read).
pub(super) async fn learnt_tables(
    engine: &Engine,
    cluster: &Cluster,
    names: &TableNames,
    facts: &[(TableNames, Vec<(String, FieldType)>)],
) -> Result<HashMap<String, Learnt>> {
    let sql = format!(
        "SELECT {REGISTRY_COLUMNS}, _shard_num FROM {} FINAL WHERE table != ''",
        state_table(names)
    );
    let mut states: HashMap<String, HashMap<usize, State>> = HashMap::new();
    let mut marked: HashMap<String, Span> = HashMap::new();
    for row in engine.run(move |conn| query_rows(conn, &sql)).await? {
        let Some((table, state)) = parse_registry_row(&row)? else {
            continue;
        };
        let shard = row
            .get(11)
            .and_then(|n| n.parse::<usize>().ok())
            .ok_or_else(|| Error::Engine(format!("{STATE_TABLE}: {row:?}")))?;
        match table.split_once(MARK) {
            Some((facts, _)) if state.dirty_from != CLEAN => {
                let span = union(
                    marked.get(facts).copied(),
                    (state.dirty_from, state.dirty_to),
                );
                marked.insert(facts.to_owned(), span);
            }
            Some(_) => {}
            None => {
                // `_shard_num` counts from 1.
                states.entry(table).or_default().insert(shard - 1, state);
            }
        }
    }
    let columns = rollup_columns(Store::Here(engine), names).await?;
    let mut learnt = HashMap::new();
    for (facts, fields) in facts {
        let Some(states) = states.get(&facts.storage_name) else {
            continue;
        };
        // The first shard's: a move records them there first, once every
        // shard holds them (`Downsampler::move_shards`).
        let Some(levels) = states.get(&0).or(states.values().next()).map(|s| &s.levels) else {
            continue;
        };
        if levels.is_empty() {
            continue;
        }
        // A shard yet to record them will record the cuts its move plans.
        let Some(cuts) = states
            .values()
            .map(|state| match &state.levels == levels {
                true => Some(state.cuts.clone()),
                false => plan_migration(&state.levels, &state.cuts, levels)
                    .ok()
                    .map(|plan| plan.cuts),
            })
            .collect::<Option<Vec<Cuts>>>()
        else {
            continue;
        };
        let rollups: Vec<Option<&HashSet<String>>> = levels
            .iter()
            .map(|level| columns.get(&rollup_name(&facts.storage_name, *level)))
            .collect();
        let Some(Some(finest)) = rollups.first() else {
            continue;
        };
        if rollups.iter().any(Option::is_none) {
            continue;
        }
        let cuts = match states.len() == cluster.shards() {
            false => Cuts::default(),
            true => earliest(cuts.iter(), levels.len()),
        };
        let table = Learnt {
            kept: Kept {
                levels: levels.clone(),
                cuts,
            },
            fields: fields_with_columns(fields, finest),
            unsettled: marked.get(&facts.storage_name).copied(),
        };
        learnt.insert(facts.storage_table.clone(), table);
    }
    // What the rollups may lack: on each shard, the rows after the last
    // block a pass took there (all of them before a first pass).
    for shard in 0..cluster.shards() {
        let seen: Vec<(&TableNames, Option<u64>)> = facts
            .iter()
            .filter(|(facts, _)| learnt.contains_key(&facts.storage_table))
            .map(|(facts, _)| {
                let state = states.get(&facts.storage_name).and_then(|s| s.get(&shard));
                (facts, state.map(|state| state.seen_block))
            })
            .collect();
        for (table, from) in firsts_after(engine, cluster, shard, names, &seen).await? {
            if let Some(learnt) = learnt.get_mut(&table) {
                learnt.unsettled = Some(union(learnt.unsettled, (from, i64::MAX)));
            }
        }
    }
    Ok(learnt)
}

/// Of the fact tables `seen` (each with the last block a pass rolled up
/// on shard `shard`, `None`: no pass there yet) of the database of
/// `names`, those holding rows in a later block there, by storage table,
/// each with the time (ns) of the earliest of them: their last blocks in
/// one statement ([`parts_by_table`]), then the earliest rows of those with later ones, a
/// hundred tables a statement (only parts holding such rows are read).
pub(super) async fn firsts_after(
    engine: &Engine,
    cluster: &Cluster,
    shard: usize,
    names: &TableNames,
    seen: &[(&TableNames, Option<u64>)],
) -> Result<Vec<(String, i64)>> {
    let parts = parts_by_table(Store::Shard(engine, cluster, shard), names).await?;
    let mut firsts = Vec::new();
    let mut reads = Vec::new();
    for (facts, seen) in seen {
        match seen {
            None => firsts.push((facts.storage_table.clone(), i64::MIN)),
            Some(seen) if parts.get(&facts.storage_name).map(|(block, _)| block) > Some(seen) => {
                reads.push(format!(
                    "SELECT {}, toUnixTimestamp64Nano(minOrNull(time)) FROM {} WHERE {}",
                    quote_literal(&facts.storage_table),
                    facts.storage_table,
                    blocks_after_sql(*seen)
                ));
            }
            Some(_) => {}
        }
    }
    // (A hundred a statement: well within the engine's longest query.)
    for reads in reads.chunks(100) {
        for row in cluster
            .query_rows(shard, &reads.join(" UNION ALL "))
            .await?
        {
            // (No such row, merged away since: `NULL`.)
            if let [table, from] = row.as_slice() {
                if let Ok(from) = from.parse() {
                    firsts.push((table.clone(), from));
                }
            }
        }
    }
    Ok(firsts)
}

/// Those of `fields` a rollup with `columns` keeps.
pub(super) fn fields_with_columns(
    fields: &[(String, FieldType)],
    columns: &HashSet<String>,
) -> Vec<(String, FieldType)> {
    fields
        .iter()
        .filter(|(field, ty)| {
            Aggregate::Count.applies_to(*ty)
                && columns.contains(&Rollup::column(field, Aggregate::Count))
        })
        .cloned()
        .collect()
}

/// Per cut, the earliest of `cuts` (`None`, nothing removed, is earliest).
pub(super) fn earliest<'a>(cuts: impl Iterator<Item = &'a Cuts> + Clone, levels: usize) -> Cuts {
    let min =
        |of: &dyn Fn(&Cuts) -> Option<i64>| -> Option<i64> { cuts.clone().map(of).min().flatten() };
    Cuts {
        rows_from: min(&|c| c.rows_from),
        kept_from: (0..levels)
            .map(|i| min(&|c| c.kept_from.get(i).copied().flatten()))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_earliest_cut_of_the_shards_is_read_and_none_is_earliest() {
        let a = Cuts {
            rows_from: Some(20),
            kept_from: vec![Some(5), None],
        };
        let b = Cuts {
            rows_from: Some(10),
            kept_from: vec![Some(7), Some(1)],
        };
        let both = earliest([&a, &b].into_iter(), 2);
        assert_eq!(both.rows_from, Some(10));
        assert_eq!(both.kept_from, vec![Some(5), None]);
        let c = Cuts::default();
        assert_eq!(earliest([&a, &c].into_iter(), 2).rows_from, None);
    }
}
