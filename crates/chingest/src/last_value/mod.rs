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
//! Memory is bounded ([`LastValueConfig::max_bytes`], over all tables): the
//! table whose growth passes the bound is evicted whole and answers `None`
//! until the next open (or an edit that covers it), never partly.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use arrow::record_batch::RecordBatch;
use tokio::sync::mpsc;

use crate::catalog::Table;
use crate::config::LastValueConfig;
use crate::last_value::table::{set_value, EngineLast, State, Status};
use crate::layout::series::SeriesKey;
use crate::stats::IngestStats;
use crate::wal::TableRef;

mod rebuild;
mod table;

pub(crate) use rebuild::{run_rebuilds, BoxFuture, RebuildSource};
pub(crate) use table::TableLast;
pub use table::{LastField, LastSeries, LastValue};

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
}

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
        let cache = LastValues {
            config,
            stats,
            rebuilds,
            active: AtomicBool::new(false),
            caches: RwLock::default(),
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
            Arc::new(TableLast::new(cached))
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
        let before = (state.bytes, state.series.len());
        state.clear();
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
            let before = (state.bytes, state.series.len());
            for (id, key) in series {
                if key.measurement == table.id.measurement {
                    let slot = state.slot(*id);
                    state.set_tags(slot, || key.tags.clone());
                }
            }
            self.account_or_evict(table, &cache, before, &mut state);
        }
    }

    /// Takes an acknowledged write's rows for `table` into its cache.
    pub(crate) fn apply(&self, table: &Arc<Table>, chunks: &[RecordBatch]) {
        let cache = self.cache(table);
        if !matches!(cache.status(), Status::Building | Status::Ready) {
            return;
        }
        let mut state = cache.state.write().unwrap();
        let before = (state.bytes, state.series.len());
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

    /// Adds a table's growth since `before` (bytes, series) to the totals.
    fn account(&self, before: (usize, usize), state: &State) {
        let change = |total: &std::sync::atomic::AtomicU64, before: usize, after: usize| {
            if after >= before {
                total.fetch_add((after - before) as u64, Ordering::Relaxed);
            } else {
                total.fetch_sub((before - after) as u64, Ordering::Relaxed);
            }
        };
        change(&self.stats.last_value_bytes, before.0, state.bytes);
        change(&self.stats.last_value_series, before.1, state.series.len());
    }

    /// [`account`](Self::account), then evicts the table if the total is
    /// past the bound.
    fn account_or_evict(
        &self,
        table: &Table,
        cache: &TableLast,
        before: (usize, usize),
        state: &mut State,
    ) {
        self.account(before, state);
        let total = self.stats.last_value_bytes.load(Ordering::Relaxed);
        if total as usize > self.config.max_bytes {
            self.evict(table, cache, state);
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
        let before = (state.bytes, state.series.len());
        state.clear();
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
        let before = (state.bytes, state.series.len());
        for (id, tags) in engine.tags {
            let slot = state.slot(id);
            state.set_tags(slot, || tags);
        }
        for (i, (name, ty)) in engine.fields.iter().enumerate() {
            let Ok(Some(f)) = state.field(name, *ty) else {
                continue;
            };
            for (id, values) in &engine.values {
                let Some((time, value)) = &values[i] else {
                    continue;
                };
                // Only series the series table has (as the view shows them).
                let Some(&slot) = state.index.get(id) else {
                    continue;
                };
                let slot = slot as usize;
                let field = &mut state.fields[f];
                // Writes since the rebuild began are newer: they win ties.
                if *time > field.times[slot] {
                    field.times[slot] = *time;
                    let grown = set_value(&mut field.values, slot, value);
                    state.bytes = state.bytes.saturating_add_signed(grown);
                }
            }
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
