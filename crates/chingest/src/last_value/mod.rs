//! The last-value cache: the newest value of each field of each series,
//! kept in memory as writes are acknowledged, so "the latest value of host
//! X" is answered without an engine query.
//!
//! One [`TableLast`] per fact table (database × retention policy ×
//! measurement), kept by [`LastValues`] under the table's name. The appender updates it in log
//! order, right after a write is in the log and before its writer is
//! answered (`appender::hand_on`): per field the value with the greatest
//! time wins, and for equal times the later write (log order) — what the
//! `last` duplicate policy keeps. A NULL (a row without the field) changes
//! nothing. Array fields are not cached.
//!
//! A table answers only when its cache is whole ([`Status::Ready`]); else
//! [`Ingestor::last_values`](crate::Ingestor::last_values) returns `None`
//! and the caller asks the engine. It is rebuilt from the engine (the newest
//! non-NULL value per field and series, the series' tags from the series
//! table) on open, after every delete or correction that covers it, and when
//! a write meets a series whose tags it does not know. A rebuild first
//! empties the table's cache, then flushes everything logged, then reads the
//! engine and merges by time into what writes brought meanwhile (those win
//! ties: they are newer), so no acknowledged write is lost.
//!
//! The same taps keep each table's index for selectors: the postings of
//! its tags (tag → value → series) and each series' first and newest time
//! per field, so series and tag-value lookups need no engine statement;
//! and the recent samples of its numeric fields
//! ([`LastValueConfig::recent_span`]), so reads of the last hours need none
//! either. A rebuild reads them back as it reads the newest values: the
//! first times with them, the samples since `now - recent_span`.
//!
//! Memory is bounded by the cardinality limits: every series a database
//! may keep is indexed, at a few hundred bytes each (tags as ids of strings
//! kept once: `postings.rs`). [`LastValueConfig::max_bytes`] is an opt-in
//! hard cap over all tables for small machines: the table whose growth
//! passes it is evicted whole and answers `None` until the next open (or
//! an edit that covers it), never partly. The
//! recent samples have a bound of their own
//! ([`LastValueConfig::recent_max_bytes`]): the table whose samples pass
//! it keeps half the span it had (every sample from a later time on, never
//! a hole), and none once that is under [`MIN_RECENT_SPAN_NS`].

use crate::clock::now_ns;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use arrow::array::AsArray as _;
use arrow::datatypes::TimestampNanosecondType;
use arrow::record_batch::RecordBatch;
use tokio::sync::mpsc;

use crate::catalog::Table;
use crate::config::LastValueConfig;
use crate::last_value::engine_last::EngineLast;
use crate::last_value::table::{set_value, State, Status, NO_RECENT};
use crate::layout::series::SeriesKey;
use crate::stats::IngestStats;
use crate::wal::TableRef;

mod answers;
mod blocks;
mod chunk;
mod engine_last;
mod lookup;
mod postings;
pub(crate) mod rebuild;
mod recent;
mod snapshot;
mod table;

pub use answers::{IndexedSeries, LastField, LastSeries, LastValue, RecentSamples};
pub(crate) use blocks::ChunkCache;
pub use blocks::BLOCK_NS;
pub use postings::{TagMatcher, TagTest};
pub use recent::CompressedSamples;
pub(crate) use recent::Taken;
pub(crate) use table::TableLast;

/// The shortest span of recent samples a table keeps under the memory
/// bound; shorter, it keeps none (its reads go to the engine).
pub(crate) const MIN_RECENT_SPAN_NS: i64 = 600_000_000_000;

/// What a table's cache holds, as the global totals count it.
#[derive(Debug, Clone, Copy)]
struct Usage {
    bytes: usize,
    series: usize,
    recent_bytes: usize,
    recent_samples: usize,
}

impl Usage {
    fn of(state: &State) -> Usage {
        Usage {
            bytes: state.bytes,
            series: state.series.len(),
            recent_bytes: state.recent_bytes,
            recent_samples: state.recent_samples,
        }
    }
}

/// The cache's shared part: configuration, the memory total, and the queue
/// of rebuilds.
#[derive(Debug)]
pub(crate) struct LastValues {
    config: LastValueConfig,
    stats: Arc<IngestStats>,
    rebuilds: mpsc::UnboundedSender<Arc<Table>>,
    /// Set once open has replayed the log: tables created from then on
    /// start empty and answering.
    active: AtomicBool,
    /// Each table's cache, from the first time it is asked for.
    caches: RwLock<HashMap<TableRef, Arc<TableLast>>>,
    /// Per database, counts what may change an answer about times more
    /// than [`SETTLED_AFTER`] ago (see
    /// [`settled_version`](Self::settled_version)).
    settled_versions: RwLock<HashMap<String, Arc<AtomicU64>>>,
    /// Samples older than the recent window, as readers read them.
    chunks: ChunkCache,
}

/// How old a sample's time must be for a write of it to count as late:
/// answers about times older than this change only by late writes and
/// edits, which [`LastValues::settled_version`] counts.
pub const SETTLED_AFTER: std::time::Duration = std::time::Duration::from_secs(300);

/// The rebuild queue's receiving end, for [`run_rebuilds`].
pub(crate) type RebuildQueue = mpsc::UnboundedReceiver<Arc<Table>>;

impl LastValues {
    /// The cache with `config`, counting in `stats`, and the queue its
    /// rebuilds arrive on (for [`run_rebuilds`]).
    pub(crate) fn new(
        config: LastValueConfig,
        stats: Arc<IngestStats>,
    ) -> (LastValues, RebuildQueue) {
        let (rebuilds, queue) = mpsc::unbounded_channel();
        let chunks = ChunkCache::new(config.chunk_cache_bytes, Arc::clone(&stats));
        let cache = LastValues {
            config,
            stats,
            rebuilds,
            active: AtomicBool::new(false),
            caches: RwLock::default(),
            settled_versions: RwLock::default(),
            chunks,
        };
        (cache, queue)
    }

    /// The table's cache. One met for the first time starts empty and
    /// answering if the configuration covers it and the log is replayed (a
    /// table created since), else off until [`activate`](Self::activate)
    /// or an edit queues its rebuild.
    pub(crate) fn cache(&self, table: &Table) -> Arc<TableLast> {
        if let Some(cache) = self.caches.read().unwrap().get(&table.id) {
            return Arc::clone(cache);
        }
        let mut caches = self.caches.write().unwrap();
        let cache = caches.entry(table.id.clone()).or_insert_with(|| {
            let cached = self.active.load(Ordering::Acquire)
                && self
                    .config
                    .covers(&table.id.database, &table.id.measurement);
            // A table made now has no samples before: it keeps them all,
            // if it keeps any.
            let keeps_recent = self.recent_span() > 0;
            Arc::new(TableLast::new(cached, keeps_recent))
        });
        Arc::clone(cache)
    }

    /// On open, once the log is replayed: every table the configuration
    /// covers is rebuilt from the engine, and tables created from now on
    /// are cached from their first row.
    pub(crate) fn activate(&self, tables: impl IntoIterator<Item = Arc<Table>>) {
        for table in tables {
            if self
                .config
                .covers(&table.id.database, &table.id.measurement)
            {
                self.invalidate(&table);
            }
        }
        self.active.store(true, Ordering::Release);
    }

    /// Empties the table's cache (reads get `None` from now on) and queues
    /// its rebuild: after an edit of its rows, or on open. An evicted
    /// table is tried again (the edit may have made room); an uncached one
    /// stays off.
    pub(crate) fn invalidate(&self, table: &Arc<Table>) {
        self.empty(table);
        // After the cache is emptied: a reader that sees the new version
        // no longer reads what it held.
        self.unsettle(&table.id.database);
    }

    /// [`invalidate`](Self::invalidate) but for the settled version.
    fn empty(&self, table: &Arc<Table>) {
        let cache = self.cache(table);
        let mut state = cache.state.write().unwrap();
        let status = match state.status {
            Status::Off
                if !self
                    .config
                    .covers(&table.id.database, &table.id.measurement) =>
            {
                return
            }
            _ => Status::Building,
        };
        let before = Usage::of(&state);
        state.clear(self.recent_start());
        state.generation += 1;
        cache.set_status(&mut state, status);
        self.account(before, &state);
        drop(state);
        if !cache.queued.swap(true, Ordering::AcqRel) {
            let _ = self.rebuilds.send(Arc::clone(table));
        }
    }

    /// Notes the tags of the series a write brings that are new to its
    /// database (before it is logged: a series' tags are the same whether
    /// the write lands or not).
    pub(crate) fn note_series<'a>(
        &self,
        tables: impl Iterator<Item = &'a Table>,
        series: &[(u64, SeriesKey)],
    ) {
        if series.is_empty() {
            return;
        }
        for table in tables {
            let cache = self.cache(table);
            if !matches!(cache.status(), Status::Building | Status::Ready) {
                continue;
            }
            let mut state = cache.state.write().unwrap();
            let before = Usage::of(&state);
            for (id, key) in series {
                if key.measurement == table.id.measurement {
                    let slot = state.slot(*id);
                    state.set_tags(slot, || key.tags.clone());
                }
            }
            self.account_or_evict(table, &cache, before, &mut state);
        }
    }

    /// A number that grows whenever an answer about `database`'s times
    /// more than [`SETTLED_AFTER`] ago may have changed: a write of a
    /// sample that old (counted before the writer is answered), a delete,
    /// a correction, a dropped series, a table rebuilt. Equal before and
    /// after a read: the read's answer about such times still holds.
    pub(crate) fn settled_version(&self, database: &str) -> u64 {
        self.version_of(database).load(Ordering::Acquire)
    }

    fn version_of(&self, database: &str) -> Arc<AtomicU64> {
        if let Some(version) = self.settled_versions.read().unwrap().get(database) {
            return Arc::clone(version);
        }
        let mut versions = self.settled_versions.write().unwrap();
        Arc::clone(versions.entry(database.to_owned()).or_default())
    }

    /// The chunk cache of older samples.
    pub(crate) fn chunks(&self) -> &ChunkCache {
        &self.chunks
    }

    /// Moves `database`'s settled version on: an answer about its settled
    /// times may have changed.
    pub(crate) fn unsettle(&self, database: &str) {
        self.version_of(database).fetch_add(1, Ordering::AcqRel);
    }

    /// Takes an acknowledged write's rows for `table` into its cache.
    pub(crate) fn apply(&self, table: &Arc<Table>, chunks: &[RecordBatch]) {
        let settled = now_ns().saturating_sub(SETTLED_AFTER.as_nanos() as i64);
        let late = chunks.iter().any(|chunk| {
            chunk
                .column_by_name("time")
                .and_then(|c| c.as_primitive_opt::<TimestampNanosecondType>())
                .is_some_and(|times| times.values().iter().any(|&t| t < settled))
        });
        self.take(table, chunks);
        // After the rows are in: a reader that sees the new version sees
        // them (one that read the old one stored what it read under it).
        if late {
            self.unsettle(&table.id.database);
        }
    }

    /// [`apply`](Self::apply) but for the settled version.
    fn take(&self, table: &Arc<Table>, chunks: &[RecordBatch]) {
        let cache = self.cache(table);
        if !matches!(cache.status(), Status::Building | Status::Ready) {
            return;
        }
        let mut state = cache.state.write().unwrap();
        let before = Usage::of(&state);
        for chunk in chunks {
            if let Err(reason) = state.apply_chunk(chunk) {
                // Cannot happen with chunks built against the table's
                // schema; never answer from a cache that missed rows.
                tracing::error!(table = ?table.id, %reason, "last-value cache: a chunk it cannot read");
                drop(state);
                self.invalidate(table);
                return;
            }
        }
        self.trim_recent(table, &mut state);
        self.account_or_evict(table, &cache, before, &mut state);
        let unknown_tags = state.status == Status::Ready && state.untagged > 0;
        drop(state);
        if unknown_tags {
            // A series whose tags the cache does not have (written before
            // the cache knew the table): the series table has them.
            tracing::debug!(table = ?table.id, "last-value cache: rebuilding for a series without tags");
            self.invalidate(table);
        }
    }

    /// Where a table emptied now starts keeping recent samples (and a
    /// rebuild reads them from).
    fn recent_start(&self) -> i64 {
        match self.recent_span() {
            0 => NO_RECENT,
            span => now_ns().saturating_sub(span),
        }
    }

    /// The configured span of recent samples, ns.
    fn recent_span(&self) -> i64 {
        i64::try_from(self.config.recent_span.as_nanos()).unwrap_or(i64::MAX)
    }

    /// Drops the table's samples older than its span, every eighth of the
    /// span (so a table holds at most 9/8 of it).
    fn trim_recent(&self, table: &Table, state: &mut State) {
        let span = self.recent_span();
        if state.recent_from == NO_RECENT || span == 0 {
            return;
        }
        let from = now_ns().saturating_sub(span);
        if from.saturating_sub(state.recent_from) > span / 8 {
            // (`from` only moves forward: a table the bound shortened
            // keeps its shorter span.)
            state.trim_recent(from);
            tracing::trace!(table = ?table.id, samples = state.recent_samples, "recent samples trimmed");
        }
    }

    /// Adds a table's growth since `before` to the totals.
    fn account(&self, before: Usage, state: &State) {
        let after = Usage::of(state);
        let change = |total: &std::sync::atomic::AtomicU64, before: usize, after: usize| {
            if after >= before {
                total.fetch_add((after - before) as u64, Ordering::Relaxed);
            } else {
                total.fetch_sub((before - after) as u64, Ordering::Relaxed);
            }
        };
        let stats = &self.stats;
        change(&stats.last_value_bytes, before.bytes, after.bytes);
        change(&stats.last_value_series, before.series, after.series);
        change(&stats.recent_bytes, before.recent_bytes, after.recent_bytes);
        change(
            &stats.recent_samples,
            before.recent_samples,
            after.recent_samples,
        );
    }

    /// [`account`](Self::account), then evicts the table if the total is
    /// past the bound, or halves its recent span while its samples pass
    /// theirs.
    fn account_or_evict(&self, table: &Table, cache: &TableLast, before: Usage, state: &mut State) {
        self.account(before, state);
        let total = self.stats.last_value_bytes.load(Ordering::Relaxed);
        if self.config.max_bytes > 0 && total as usize > self.config.max_bytes {
            self.evict(table, cache, state);
            return;
        }
        while self.stats.recent_bytes.load(Ordering::Relaxed) as usize
            > self.config.recent_max_bytes
            && state.recent_from != NO_RECENT
        {
            let before = Usage::of(state);
            let now = now_ns();
            let kept = now.saturating_sub(state.recent_from.max(now - self.recent_span())) / 2;
            let from = match kept < MIN_RECENT_SPAN_NS {
                true => NO_RECENT,
                false => now - kept,
            };
            state.trim_recent(from);
            self.account(before, state);
            IngestStats::add(&self.stats.recent_shrinks, 1);
            tracing::warn!(
                database = %table.id.database, retention_policy = %table.id.retention_policy,
                measurement = %table.id.measurement, kept_seconds = kept / 1_000_000_000,
                limit = self.config.recent_max_bytes,
                "recent samples: over their memory bound; the measurement keeps a shorter span \
                 (older reads go to the engine)"
            );
        }
    }

    /// Drops the table's cache for the memory bound: it answers "not
    /// cached" from now on.
    fn evict(&self, table: &Table, cache: &TableLast, state: &mut State) {
        tracing::warn!(
            database = %table.id.database, retention_policy = %table.id.retention_policy,
            measurement = %table.id.measurement, bytes = state.bytes, series = state.series.len(),
            limit = self.config.max_bytes,
            "last-value cache: over its memory bound; the measurement is no longer cached"
        );
        let before = Usage::of(state);
        state.clear(NO_RECENT);
        cache.set_status(state, Status::Evicted);
        self.account(before, state);
        IngestStats::add(&self.stats.last_value_evictions, 1);
    }

    /// Merges what a rebuild read from the engine into the table's cache
    /// and makes it answer — unless another rebuild began since
    /// `generation`, or the total would pass the bound.
    fn finish_rebuild(&self, table: &Arc<Table>, generation: u64, engine: EngineLast) {
        let cache = self.cache(table);
        let mut state = cache.state.write().unwrap();
        if state.generation != generation || state.status != Status::Building {
            return;
        }
        let before = Usage::of(&state);
        for (id, tags) in engine.tags {
            let slot = state.slot(id);
            state.set_tags(slot, || tags);
        }
        let mut columns = Vec::with_capacity(engine.fields.len());
        for (i, (name, ty)) in engine.fields.iter().enumerate() {
            let Ok(Some(f)) = state.field(name, *ty) else {
                columns.push(None);
                continue;
            };
            columns.push(Some(f));
            for (id, values) in &engine.values {
                let Some((first, time, value)) = &values[i] else {
                    continue;
                };
                // Only series the series table has (as the view shows them).
                let Some(&slot) = state.index.get(id) else {
                    continue;
                };
                let slot = slot as usize;
                let field = &mut state.fields[f];
                field.firsts[slot] = field.firsts[slot].min(*first);
                // Writes since the rebuild began are newer: they win ties.
                if *time > field.times[slot] {
                    field.times[slot] = *time;
                    let grown = set_value(&mut field.values, slot, value);
                    state.bytes = state.bytes.saturating_add_signed(grown);
                }
            }
        }
        // The samples read start where the table started keeping them
        // when emptied, or later (the rebuild found them too many).
        if state.recent_from != NO_RECENT {
            for read in &engine.recent {
                if let (Some(&slot), Some(f)) = (state.index.get(&read.series), columns[read.field])
                {
                    state.merge_recent(f, slot as usize, &read.samples, read.repeated);
                }
            }
            state.trim_recent(engine.recent_from);
        }
        if state.untagged > 0 {
            tracing::debug!(table = ?table.id, series = state.untagged,
                "last-value cache: series absent from the series table left out");
            state.drop_untagged();
        }
        self.account_or_evict(table, &cache, before, &mut state);
        if state.status == Status::Building {
            cache.set_status(&mut state, Status::Ready);
        }
    }
}
