//! Downsampling in the `clickhouse` storage mode: every shard holds the
//! rollups and the registry of its own series, and a pass runs there
//! ([`Store::Shard`]); one node at a time makes passes over a database,
//! the holder of its lease (`crate::lease`); every node reads the registries of all
//! shards each period ([`learnt_tables`]) to know where rows are gone
//! and what the rollups may lack; an edit on any node leaves a [`Mark`]
//! on each shard, which the next pass takes ([`clear_marks`]).

use std::collections::{HashMap, HashSet};

use crate::cluster::Cluster;
use crate::engine::{query_rows, Engine};
use crate::error::{Error, Result};
use crate::layout::names::{quote_literal, TableNames};
use crate::layout::rollup::{blocks_after_sql, rollup_name, Aggregate, Rollup};
use crate::layout::schema::FieldType;

use super::migrate::plan_migration;
use super::registry::{
    parse_registry_row, rollup_columns, state_table, MARK, REGISTRY_COLUMNS, STATE_TABLE,
};
use super::state::{union, Cuts, Kept, Span, State, CLEAN};
use super::store::{parts_by_table, Store};

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
