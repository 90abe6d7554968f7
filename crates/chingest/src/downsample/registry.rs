//! The registry of a downsampled database (its `_downsampling` table): per
//! fact table the last block rolled up, the range an edit marked, the
//! levels and cuts; the levels a statement set; in the cluster mode the
//! marks of edits. Reads, writes and the statements that make it.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use crate::config::{Downsampling, Keeps};
use crate::error::{Error, Result};
use crate::layout::names::{quote_ident, quote_literal, TableNames};
use crate::layout::rollup::Resolution;

use super::state::{Cuts, Span, State, CLEAN};
use super::store::{parts_by_table, Store};
use crate::clock::now_ns;

/// The registry of a downsampled database's progress: per fact table, the
/// last block rolled up and the range an edit marked.
pub(crate) const STATE_TABLE: &str = "_downsampling";

/// Between a fact table's storage name and a mark's id, the key of an
/// edit's mark in the cluster mode (a storage name holds one `.`).
pub(super) const MARK: &str = ".mark.";

/// The registry's mark of a database a statement set not downsampled.
pub(super) const OFF: &str = "off";

/// What a database's registry holds.
#[derive(Debug, Default)]
pub(super) struct Registry {
    /// The levels a statement set: `Some(None)` off; `None`: none set.
    pub(super) set: Option<Option<Downsampling>>,
    /// Each fact table's progress, by storage name.
    pub(super) tables: HashMap<String, State>,
    /// The marks of edits no pass took yet (the cluster mode).
    pub(super) marks: Vec<Mark>,
}

/// Reads the registry of the database of `names`: every row, or only the
/// fact table `only`'s (a storage name).
pub(super) async fn read_registry(
    store: Store<'_>,
    names: &TableNames,
    only: Option<&str>,
) -> Result<Registry> {
    let filter = only.map_or(String::new(), |table| {
        format!(
            " WHERE table = {} OR startsWith(table, {})",
            quote_literal(table),
            quote_literal(&format!("{table}{MARK}"))
        )
    });
    let sql = format!(
        "SELECT {REGISTRY_COLUMNS} FROM {} FINAL{filter}",
        state_table(names)
    );
    let rows = store.rows(sql).await?;
    let mut registry = Registry::default();
    for row in rows {
        match parse_registry_row(&row)? {
            Some((key, state)) if key.contains(MARK) => {
                if state.dirty_from != CLEAN {
                    let version = row[10].parse().map_err(|_| bad_registry(&row[10]))?;
                    registry.marks.push(Mark {
                        key,
                        span: (state.dirty_from, state.dirty_to),
                        version,
                    });
                }
            }
            Some((table, state)) => {
                registry.tables.insert(table, state);
            }
            None => {
                let stored = parse_array(&row[7], |text| {
                    Ok(text.trim().trim_matches('\'').to_owned())
                })?;
                registry.set = match stored.as_slice() {
                    [] => None,
                    [off] if off == OFF => Some(None),
                    levels => Some(Some(
                        Downsampling::parse(levels)
                            .map_err(|err| bad_registry(&err.to_string()))?,
                    )),
                };
            }
        }
    }
    Ok(registry)
}

pub(super) fn bad_registry(text: &str) -> Error {
    Error::Engine(format!("{STATE_TABLE}: {text:?}"))
}

/// The columns of a registry row [`parse_registry_row`] reads.
pub(super) const REGISTRY_COLUMNS: &str =
    "table, seen_block, dirty_from, dirty_to, rows_from, kept_from, levels, policy, keeps, cuts_at, \
     version";

/// A registry row ([`REGISTRY_COLUMNS`]) as a fact table's storage name
/// and progress; `None` for the row of table `''` (the levels a
/// statement set).
pub(super) fn parse_registry_row(row: &[String]) -> Result<Option<(String, State)>> {
    if row.len() < 10 {
        return Err(bad_registry(&row.join("\t")));
    }
    if row[0].is_empty() {
        return Ok(None);
    }
    let number = |text: &str| -> Result<i64> { text.parse().map_err(|_| bad_registry(text)) };
    let keeps = parse_array(&row[8], |text| {
        let name = text.trim().trim_matches('\'');
        Keeps::named(name).ok_or_else(|| bad_registry(name))
    })?;
    let widths = parse_array(&row[6], |text| {
        Ok(Duration::from_secs(number(text.trim())? as u64))
    })?;
    let state = State {
        seen_block: number(&row[1])? as u64,
        dirty_from: number(&row[2])?,
        dirty_to: number(&row[3])?,
        levels: widths
            .into_iter()
            .enumerate()
            .map(|(i, interval)| Resolution {
                interval,
                keeps: keeps.get(i).copied().unwrap_or_default(),
            })
            .collect(),
        cuts: parse_cuts(&row[4], &row[5])?,
        cuts_at: number(&row[9])?,
    };
    Ok(Some((row[0].clone(), state)))
}

/// An array as the engine writes it (`[a,b]`), each item by `item`.
pub(super) fn parse_array<T>(text: &str, item: impl Fn(&str) -> Result<T>) -> Result<Vec<T>> {
    let inner = text.trim().trim_start_matches('[').trim_end_matches(']');
    match inner.is_empty() {
        true => Ok(Vec::new()),
        false => inner.split(',').map(item).collect(),
    }
}

/// Cuts as the registry keeps them (`i64::MIN`: none).
pub(super) fn parse_cuts(rows_from: &str, kept_from: &str) -> Result<Cuts> {
    let cut = |text: &str| -> Result<Option<i64>> {
        let cut: i64 = text
            .trim()
            .parse()
            .map_err(|_| Error::Engine(format!("{STATE_TABLE}: cut {text:?}")))?;
        Ok((cut != i64::MIN).then_some(cut))
    };
    Ok(Cuts {
        rows_from: cut(rows_from)?,
        kept_from: parse_array(kept_from, cut)?,
    })
}

/// The registry's quoted name in the database of `names`.
pub(super) fn state_table(names: &TableNames) -> String {
    format!("{}.{}", names.database, quote_ident(STATE_TABLE))
}

/// Makes the registry of `names`' database, and gives one of an earlier
/// version the later columns: the cuts, each table's levels (widths in
/// seconds, and what each keeps, [`Keeps::name`]; missing: every
/// aggregate), and in the row of table `''` the levels a statement
/// set (`'<age>s:<interval>s[:last]'`s; [`OFF`]; none: the configuration
/// file's).
pub(super) fn state_table_sql(names: &TableNames) -> Vec<String> {
    let table = state_table(names);
    vec![
        format!(
            "CREATE TABLE IF NOT EXISTS {table} (table String, seen_block UInt64, dirty_from Int64, \
             dirty_to Int64, version Int64) ENGINE = ReplacingMergeTree(version) ORDER BY table"
        ),
        format!(
            "ALTER TABLE {table} ADD COLUMN IF NOT EXISTS rows_from Int64 DEFAULT {}, \
             ADD COLUMN IF NOT EXISTS kept_from Array(Int64), \
             ADD COLUMN IF NOT EXISTS levels Array(UInt32), \
             ADD COLUMN IF NOT EXISTS policy Array(String), \
             ADD COLUMN IF NOT EXISTS keeps Array(String), \
             ADD COLUMN IF NOT EXISTS cuts_at Int64",
            i64::MIN
        ),
    ]
}

/// What a pass reads at once of a downsampled database's tables in one
/// store, so that it passes over only those something happened to
/// (`Downsampler::idle`).
pub(super) struct Glance {
    pub(super) registry: Registry,
    /// By storage name: the last block of its active parts and the end of
    /// the part ending first (s).
    pub(super) parts: HashMap<String, (u64, i64)>,
}

impl Glance {
    /// Two statements: the registry of the database of `names`, and its
    /// tables' parts.
    pub(super) async fn read(store: Store<'_>, names: &TableNames) -> Result<Glance> {
        let registry = read_registry(store, names, None).await?;
        let parts = parts_by_table(store, names).await?;
        Ok(Glance { registry, parts })
    }
}

/// The fact table's progress (its registry made: `Downsampler::make_tables`).
pub(super) async fn read_state(store: Store<'_>, names: &TableNames) -> Result<(State, Vec<Mark>)> {
    let mut registry = read_registry(store, names, Some(&names.storage_name)).await?;
    let state = registry
        .tables
        .remove(&names.storage_name)
        .unwrap_or_default();
    Ok((state, registry.marks))
}

/// Records the fact table's progress, durably.
pub(super) async fn save_state(store: Store<'_>, names: &TableNames, state: &State) -> Result<()> {
    let cut = |cut: Option<i64>| cut.unwrap_or(i64::MIN).to_string();
    let kept: Vec<String> = state.cuts.kept_from.iter().map(|c| cut(*c)).collect();
    let levels: Vec<String> = state
        .levels
        .iter()
        .map(|l| l.interval.as_secs().to_string())
        .collect();
    let keeps: Vec<String> = state
        .levels
        .iter()
        .map(|l| quote_literal(l.keeps.name()))
        .collect();
    store
            .execute(format!(
                "INSERT INTO {} (table, seen_block, dirty_from, dirty_to, version, rows_from, \
                 kept_from, levels, keeps, cuts_at) VALUES ({}, {}, {}, {}, {}, {}, [{}], [{}], [{}], {})",
                state_table(names),
                quote_literal(&names.storage_name),
                state.seen_block,
                state.dirty_from,
                state.dirty_to,
                now_ns(),
                cut(state.cuts.rows_from),
                kept.join(", "),
                levels.join(", "),
                keeps.join(", "),
                state.cuts_at
            ))
            .await
}

/// An edit's mark of a fact table in the cluster mode
/// (`Downsampler::marked`), as a shard's
/// registry holds it.
#[derive(Debug)]
pub(super) struct Mark {
    pub(super) key: String,
    pub(super) span: Span,
    pub(super) version: i64,
}

/// Records that a pass took `marks`: each written again unmarked, with a
/// later version (the node that wrote it may have a clock ahead).
pub(super) async fn clear_marks(
    store: Store<'_>,
    names: &TableNames,
    marks: &[Mark],
) -> Result<()> {
    if marks.is_empty() {
        return Ok(());
    }
    let now = now_ns();
    let rows: Vec<String> = marks
        .iter()
        .map(|mark| {
            format!(
                "({}, 0, {CLEAN}, {}, {})",
                quote_literal(&mark.key),
                i64::MIN,
                now.max(mark.version.saturating_add(1))
            )
        })
        .collect();
    store
        .execute(format!(
            "INSERT INTO {} (table, seen_block, dirty_from, dirty_to, version) VALUES {}",
            state_table(names),
            rows.join(", ")
        ))
        .await
}

/// The columns (quoted) of each rollup (by name) of the database of
/// `names` in `store`.
pub(super) async fn rollup_columns(
    store: Store<'_>,
    names: &TableNames,
) -> Result<HashMap<String, HashSet<String>>> {
    let sql = format!(
        "SELECT table, name FROM system.columns WHERE database = {} \
         AND startsWith(table, '_rollup.')",
        quote_literal(&names.database_name)
    );
    let mut columns: HashMap<String, HashSet<String>> = HashMap::new();
    for row in store.rows(sql).await? {
        if let [table, column] = row.as_slice() {
            columns
                .entry(table.clone())
                .or_default()
                .insert(quote_ident(column));
        }
    }
    Ok(columns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_round_trip_through_the_registry_form() {
        let day = 86_400_000_000_000_i64;
        let cuts = Cuts {
            rows_from: Some(9 * day),
            kept_from: vec![Some(8 * day), None],
        };
        let min = i64::MIN;
        let parsed = parse_cuts(&(9 * day).to_string(), &format!("[{},{min}]", 8 * day)).unwrap();
        assert_eq!(parsed, cuts);
        assert_eq!(parse_cuts(&min.to_string(), "[]").unwrap(), Cuts::default());
        assert!(parse_cuts("nine", "[]").is_err());
    }
}
