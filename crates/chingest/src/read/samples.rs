//! A range's samples whatever its age, for every query language: the
//! recent samples from memory, what is older from the chunk cache, read
//! from the engine by whole blocks on a miss (`last_value/blocks.rs`).
//! [`plan`] alone decides which store answers which span. Where neither
//! memory nor the cache can answer exactly — rows downsampled or dropped
//! by retention, times not settled or not all in the engine yet, a fill
//! past its bound — the samples start later and the caller reads the rest
//! from the engine, with its own statement (a rollup's, say).

use std::collections::{HashMap, HashSet};

use arrow::array::{Array, AsArray as _};
use arrow::datatypes::{Float64Type, TimestampNanosecondType, UInt64Type};
use arrow::record_batch::RecordBatch;

use crate::config::DuplicatePolicy;
use crate::error::{Error, Result};
use crate::last_value::{RecentSamples, Taken, BLOCK_NS};
use crate::layout::names::quote_ident;
use crate::read::Reader;

/// Most series listed in a fill's statement; more are read by time alone
/// and kept as read.
const MAX_LISTED_IDS: usize = 1_000;

/// The most samples a fill for a reader that aggregates reads (32 MB as
/// read, before compression): past it, the engine's own aggregation is the
/// cheaper read ([`Ingestor::samples`](crate::Ingestor::samples)).
pub(crate) const AGGREGATE_FILL_SAMPLES: usize = 2_000_000;

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

/// Each series' samples read by a fill, and whether a time had two rows.
type Filled = HashMap<u64, SeriesFill>;
type SeriesFill = (Vec<(i64, f64)>, bool);

/// Which store answers which part of a range, as [`plan`] makes it:
/// memory from where its samples start; before that, back to `from`, the
/// chunk cache (on a miss, the whole blocks in `blocks` read from the
/// engine and kept); before `from`, the engine's rows, read by the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Spans {
    /// Where the samples given start (ns).
    pub(crate) from: i64,
    /// The blocks `[first, last)` (ns) the chunk cache's part lies in;
    /// `None`: the cache has no part.
    pub(crate) blocks: Option<(i64, i64)>,
}

/// The spans of `[start, end]` (ns) when memory holds its samples from
/// `memory_from` on (past `end`: none), the chunk cache is `enabled` and
/// the engine's rows are whole as `whole` says. The cache answers from
/// whole blocks, settled and in the engine, and only from any cut of
/// downsampling or retention on (before it the engine's rows answer as
/// they are, part by part).
pub(crate) fn plan(
    (start, end): (i64, i64),
    memory_from: i64,
    whole: &WholeRows,
    enabled: bool,
) -> Spans {
    let memory_only = Spans {
        from: memory_from,
        blocks: None,
    };
    let older_end = older_end(memory_from, end);
    if !enabled || older_end < start {
        return memory_only;
    }
    let block_of = |ns: i64| ns.div_euclid(BLOCK_NS);
    // Rows before a cut may be gone or going: a block holding some is
    // read and kept whole, but answers only from the cut on.
    let from = start.max(whole.retained_from).max(whole.downsampled_from);
    let first = block_of(from).saturating_mul(BLOCK_NS);
    let last = (block_of(older_end) + 1).saturating_mul(BLOCK_NS);
    if from > older_end || last > whole.settled_before {
        return memory_only;
    }
    Spans {
        from,
        blocks: Some((first, last)),
    }
}

/// The last time (ns) of a range ending at `end` before memory's samples,
/// which start at `memory_from`.
fn older_end(memory_from: i64, end: i64) -> i64 {
    memory_from.min(end.saturating_add(1)) - 1
}

impl Reader {
    /// [`recent_samples`](Self::recent_samples), reaching back through
    /// the chunk cache as far as [`plan`] lets it: each of `ids`' samples
    /// of `[start, end]` (ns) from `from_ns` on, times in units of `per`
    /// ns (the last of equal times kept), as `S` takes them (decoded, or
    /// compressed as memory keeps them). `None` where memory cannot say
    /// (its table not kept yet), as `recent_samples`. A fill reads at most
    /// `most` samples (and what the cache holds): past it, the samples
    /// start where memory's do.
    pub(crate) async fn samples<S: Taken>(
        &self,
        table: (&str, &str, &str),
        field: &str,
        ids: &[u64],
        (start, end): (i64, i64),
        (per, most): (i64, usize),
        whole: WholeRows,
    ) -> Result<Option<RecentSamples<S>>> {
        let (mut recent, in_memory) =
            match self.recent_samples(table, field, ids, (start, end), per) {
                Some(recent) => (recent, true),
                None => {
                    // Memory may hold none of the range: all of it older.
                    let after: Option<RecentSamples<S>> =
                        self.recent_samples(table, field, &[], (start, i64::MAX), per);
                    match after {
                        Some(after) if after.from_ns > end => {
                            let none = RecentSamples {
                                from_ns: end.saturating_add(1),
                                samples: (0..ids.len()).map(|_| S::default()).collect(),
                                one_row_each: after.one_row_each,
                            };
                            (none, false)
                        }
                        _ => return Ok(None),
                    }
                }
            };
        let cache = self.last_values.chunks();
        let spans = plan((start, end), recent.from_ns, &whole, cache.enabled());
        let (Some(facts), Some((first, last))) = (self.table(table), spans.blocks) else {
            return Ok(in_memory.then_some(recent));
        };
        let older = (spans.from, older_end(recent.from_ns, end));
        if ids.is_empty() {
            // Asked where the samples start: there, once read.
            recent.from_ns = spans.from;
            return Ok(Some(recent));
        }
        let storage = &facts.schema().names.storage_table;
        let scope = format!("rows {storage} {field}");
        let (mut held, mut repeated) = cache.get::<S>(&scope, ids, older, per, whole.version);
        let missed: Vec<u64> = ids
            .iter()
            .zip(&held)
            .filter(|(_, held)| held.is_none())
            .map(|(&id, _)| id)
            .collect();
        if !missed.is_empty() {
            let limit = cache.max_fill_samples(most);
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
                let read = filled.get(id).map_or((&[][..], false), |(s, t)| (s, *t));
                repeated |= read.1;
                let kept = (&scope[..], whole.version);
                let taken = (older.0, older.1, per);
                *held = Some(cache.put(kept, *id, (first, last), read, taken));
            }
        }
        for (older, newer) in held.into_iter().zip(&mut recent.samples) {
            let mut older = older.unwrap_or_default();
            older.join(std::mem::take(newer));
            *newer = older;
        }
        recent.from_ns = spans.from;
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
        let read = |ids: &[u64], order: &str| {
            let listed = match ids.len() <= MAX_LISTED_IDS {
                true => {
                    let ids: Vec<String> = ids.iter().map(u64::to_string).collect();
                    format!("series_id IN ({}) AND ", ids.join(", "))
                }
                false => String::new(),
            };
            let field = quote_ident(field);
            self.engine.query_arrow(format!(
                "SELECT series_id, time, toFloat64({field}) FROM {storage} \
                 WHERE {listed}time >= fromUnixTimestamp64Nano(toInt64({from})) \
                 AND time < fromUnixTimestamp64Nano(toInt64({to})) AND {field} IS NOT NULL \
                 ORDER BY series_id, time{order} LIMIT {}",
                limit + 1
            ))
        };
        // In the table's order, which the engine reads as it is stored;
        // the order of rows at one time (which was inserted last) only
        // for the series that have two.
        let batches = read(ids, "").await?;
        if batches.iter().map(|b| b.num_rows()).sum::<usize>() > limit {
            return Ok(None);
        }
        let wanted: HashSet<u64> = ids.iter().copied().collect();
        let mut filled = samples_of(&batches, &wanted)?;
        let repeated: Vec<u64> = filled
            .iter()
            .filter(|(_, (_, twice))| *twice)
            .map(|(&id, _)| id)
            .collect();
        if !repeated.is_empty() {
            let batches = read(&repeated, ", _block_number, _block_offset").await?;
            filled.extend(samples_of(&batches, &repeated.into_iter().collect())?);
        }
        Ok(Some(filled))
    }
}

/// The samples of `wanted` series in `batches` of (series_id, time,
/// value) rows ordered by series and time; of two rows at a time, the
/// later one's.
fn samples_of(batches: &[RecordBatch], wanted: &HashSet<u64>) -> Result<Filled> {
    let mut filled = Filled::new();
    // Rows come by series: the current one's entry, looked up once.
    let mut current: Option<(u64, Option<&mut SeriesFill>)> = None;
    for batch in batches {
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
            if values.is_null(row) {
                continue;
            }
            if current.as_ref().is_none_or(|(at, _)| *at != id) {
                let entry = wanted.contains(&id).then(|| filled.entry(id).or_default());
                current = Some((id, entry));
            }
            let Some((_, Some((samples, twice)))) = current.as_mut() else {
                continue;
            };
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
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3_600_000_000_000;
    const DAY: i64 = 24 * HOUR;

    /// Rows whole everywhere, settled until `settled_before`.
    fn whole(settled_before: i64) -> WholeRows {
        WholeRows {
            version: 1,
            retained_from: i64::MIN,
            downsampled_from: i64::MIN,
            settled_before,
        }
    }

    /// A case: what it is, the range, where memory starts, the rows, the
    /// cache on, and the spans planned.
    type Case = (&'static str, (i64, i64), i64, WholeRows, bool, Spans);

    fn spans(from: i64, blocks: Option<(i64, i64)>) -> Spans {
        Spans { from, blocks }
    }

    #[test]
    fn which_store_answers_which_span() {
        // Block n spans [2n h, 2n + 2 h): now is block 360's start, memory
        // (26 h back) block 347's.
        let now = 30 * DAY;
        let memory = now - 26 * HOUR;
        let settled = now - 30_000_000_000;
        let block = |n: i64| n * BLOCK_NS;
        // (case, range, memory from, rows, cache on, spans)
        let golden: &[Case] = &[
            (
                "inside memory: memory alone",
                (now - HOUR, now),
                memory,
                whole(settled),
                true,
                spans(memory, None),
            ),
            (
                "reaching past memory: the cache back to the start, by whole blocks",
                (now - 48 * HOUR + 1, now),
                memory,
                whole(settled),
                true,
                spans(now - 48 * HOUR + 1, Some((block(336), block(347)))),
            ),
            (
                "all older than memory: the cache alone, to the end",
                (now - 72 * HOUR, now - 48 * HOUR),
                memory,
                whole(settled),
                true,
                spans(now - 72 * HOUR, Some((block(324), block(337)))),
            ),
            (
                "the cache off: memory's part, the caller reads the rest",
                (now - 48 * HOUR, now),
                memory,
                whole(settled),
                false,
                spans(memory, None),
            ),
            (
                "downsampled before 2 days ago: the cache from the cut on",
                (now - 72 * HOUR, now),
                memory,
                WholeRows {
                    downsampled_from: now - 48 * HOUR - 1,
                    ..whole(settled)
                },
                true,
                spans(now - 48 * HOUR - 1, Some((block(335), block(347)))),
            ),
            (
                "retention cutting inside the range's only older block: from the cut",
                (now - 27 * HOUR, now),
                memory,
                WholeRows {
                    retained_from: now - 27 * HOUR + 1,
                    ..whole(settled)
                },
                true,
                spans(now - 27 * HOUR + 1, Some((block(346), block(347)))),
            ),
            (
                "retention past memory's start: memory alone",
                (now - 48 * HOUR, now),
                memory,
                WholeRows {
                    retained_from: memory + 1,
                    ..whole(settled)
                },
                true,
                spans(memory, None),
            ),
            (
                "older rows not settled (a late write in flight): no cache",
                (now - 48 * HOUR, now),
                memory,
                whole(now - 40 * HOUR),
                true,
                spans(memory, None),
            ),
        ];
        for (case, range, memory_from, rows, enabled, want) in golden {
            assert_eq!(plan(*range, *memory_from, rows, *enabled), *want, "{case}");
        }
    }

    #[test]
    fn blocks_at_the_ends_of_time_do_not_overflow() {
        let rows = whole(i64::MAX);
        let all = plan((i64::MIN, i64::MAX), i64::MAX, &rows, true);
        assert_eq!(all.from, i64::MIN);
        let (first, last) = all.blocks.expect("cached");
        assert!(first <= i64::MIN + BLOCK_NS && last >= i64::MAX - BLOCK_NS);
    }
}
