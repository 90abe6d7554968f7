//! A range's samples whatever its age: the recent samples from memory,
//! what is older from the chunk cache, read from the engine by whole
//! blocks on a miss (`last_value/blocks.rs`). Where neither can answer
//! exactly — rows downsampled or dropped by retention, times not settled
//! or not all in the engine yet, a fill past its bound — the samples start
//! where memory's do and the caller reads the rest from the engine.

use std::collections::{HashMap, HashSet};

use arrow::array::{Array, AsArray as _};
use arrow::datatypes::{Float64Type, TimestampNanosecondType, UInt64Type};

use crate::config::DuplicatePolicy;
use crate::error::{Error, Result};
use crate::last_value::{RecentSamples, BLOCK_NS};
use crate::layout::names::quote_ident;
use crate::read::Reader;

/// Most series listed in a fill's statement; more are read by time alone
/// and kept as read.
const MAX_LISTED_IDS: usize = 1_000;

/// Where the engine's rows of a table are whole, for a reader to keep
/// what it reads of them ([`Ingestor::whole_rows`](crate::Ingestor::whole_rows)).
#[derive(Debug, Clone, Copy)]
pub struct WholeRows {
    /// The database's settled version, read first: what is kept holds
    /// while it stays.
    pub version: u64,
    /// Rows before this (ns) may be gone by retention (as parts merge).
    pub retained_from: i64,
    /// Rows before this (ns) are gone or going: downsampled.
    pub downsampled_from: i64,
    /// Rows at or after this (ns) may not be settled, or not in the engine
    /// yet.
    pub settled_before: i64,
}

/// One series' samples read by a fill, and whether a time had two rows.
type Filled = HashMap<u64, (Vec<(i64, f64)>, bool)>;

impl Reader {
    /// [`recent_samples`](Self::recent_samples), reaching back to the
    /// start through the chunk cache where `whole` allows.
    pub(crate) async fn samples(
        &self,
        table: (&str, &str, &str),
        field: &str,
        ids: &[u64],
        (start, end): (i64, i64),
        whole: WholeRows,
    ) -> Result<Option<RecentSamples>> {
        let (mut recent, in_memory) = match self.recent_samples(table, field, ids, (start, end), 1)
        {
            Some(recent) => (recent, true),
            None => {
                // Memory may hold none of the range: all of it older.
                let after: Option<RecentSamples> =
                    self.recent_samples(table, field, &[], (start, i64::MAX), 1);
                match after {
                    Some(after) if after.from_ns > end => {
                        let none = RecentSamples {
                            from_ns: end.saturating_add(1),
                            samples: vec![Vec::new(); ids.len()],
                            one_row_each: after.one_row_each,
                        };
                        (none, false)
                    }
                    _ => return Ok(None),
                }
            }
        };
        let cache = self.last_values.chunks();
        let older_end = recent.from_ns - 1;
        let first = start.div_euclid(BLOCK_NS) * BLOCK_NS;
        let last = (older_end.div_euclid(BLOCK_NS) + 1) * BLOCK_NS;
        let facts = self.table(table);
        let coverable = cache.enabled()
            && first >= whole.retained_from.max(whole.downsampled_from)
            && last <= whole.settled_before;
        let Some(facts) = facts.filter(|_| coverable && recent.from_ns > start) else {
            return Ok(in_memory.then_some(recent));
        };
        if ids.is_empty() {
            // Asked where the samples start: at the start, once read.
            recent.from_ns = start;
            return Ok(Some(recent));
        }
        let storage = &facts.schema().names.storage_table;
        let scope = format!("rows {storage} {field}");
        let (mut held, mut repeated) = cache.get(&scope, ids, (start, older_end), whole.version);
        let missed: Vec<u64> = ids
            .iter()
            .zip(&held)
            .filter(|(_, held)| held.is_none())
            .map(|(&id, _)| id)
            .collect();
        if !missed.is_empty() {
            let limit = cache.max_fill_samples();
            let Some(filled) = self
                .fill(storage, field, &missed, (first, last), limit)
                .await?
            else {
                return Ok(in_memory.then_some(recent));
            };
            for (id, held) in ids.iter().zip(&mut held) {
                if held.is_some() {
                    continue;
                }
                let (samples, twice) = filled.get(id).map_or((&[][..], false), |(s, t)| (s, *t));
                cache.put(&scope, whole.version, *id, (first, last), samples, twice);
                repeated |= twice;
                let from = samples.partition_point(|s| s.0 < start);
                let to = samples.partition_point(|s| s.0 <= older_end);
                *held = Some(samples[from..to.max(from)].to_vec());
            }
        }
        for (older, newer) in held.into_iter().zip(&mut recent.samples) {
            let mut older = older.unwrap_or_default();
            older.append(newer);
            *newer = older;
        }
        recent.from_ns = start;
        recent.one_row_each &= !(repeated && facts.duplicates == DuplicatePolicy::Append);
        Ok(Some(recent))
    }

    /// The rows of `field` of `ids` in `[from, to)` (ns) of `storage`, by
    /// series, one sample per time (of two rows at a time, the one
    /// inserted last, as writes keep); `None` past `limit` samples.
    async fn fill(
        &self,
        storage: &str,
        field: &str,
        ids: &[u64],
        (from, to): (i64, i64),
        limit: usize,
    ) -> Result<Option<Filled>> {
        let wanted: HashSet<u64> = ids.iter().copied().collect();
        let listed = match ids.len() <= MAX_LISTED_IDS {
            true => {
                let ids: Vec<String> = ids.iter().map(u64::to_string).collect();
                format!("series_id IN ({}) AND ", ids.join(", "))
            }
            false => String::new(),
        };
        let field = quote_ident(field);
        let sql = format!(
            "SELECT series_id, time, toFloat64({field}) FROM {storage} \
             WHERE {listed}time >= fromUnixTimestamp64Nano(toInt64({from})) \
             AND time < fromUnixTimestamp64Nano(toInt64({to})) AND {field} IS NOT NULL \
             ORDER BY series_id, time, _block_number, _block_offset LIMIT {}",
            limit + 1
        );
        let batches = self.engine.query_arrow(sql).await?;
        if batches.iter().map(|b| b.num_rows()).sum::<usize>() > limit {
            return Ok(None);
        }
        let mut filled = Filled::new();
        for batch in &batches {
            let (Some(ids), Some(times), Some(values)) = (
                batch.column(0).as_primitive_opt::<UInt64Type>(),
                batch
                    .column(1)
                    .as_primitive_opt::<TimestampNanosecondType>(),
                batch.column(2).as_primitive_opt::<Float64Type>(),
            ) else {
                return Err(Error::Engine(format!(
                    "a fill of the chunk cache came back as {:?}",
                    batch.schema()
                )));
            };
            for row in 0..batch.num_rows() {
                let id = ids.value(row);
                if !wanted.contains(&id) || values.is_null(row) {
                    continue;
                }
                let (samples, twice) = filled.entry(id).or_default();
                let sample = (times.value(row), values.value(row));
                match samples.last_mut() {
                    Some(last) if last.0 == sample.0 => {
                        *last = sample;
                        *twice = true;
                    }
                    _ => samples.push(sample),
                }
            }
        }
        Ok(Some(filled))
    }
}
