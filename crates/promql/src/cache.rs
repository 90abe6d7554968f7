//! The result cache of range queries (VictoriaMetrics' rollup result
//! cache): each query's answer at its settled steps, kept between
//! requests, so a dashboard that refreshes the same panels with a range
//! moved by a step or two evaluates only the steps it has not answered.
//!
//! A step is settled when it is more than
//! [`SETTLED_AFTER`](chingest::SETTLED_AFTER) old: only a late write or an
//! edit changes the data it reads, and each of those moves the ingestor's
//! [`settled_version`](chingest::Ingestor::settled_version), which an
//! entry is stored with and dropped for. A result that read the engine is
//! stored only for the steps before the earliest row still on its way to
//! it ([`engine_complete_before`](chingest::Ingestor::engine_complete_before));
//! downsampling moves the version where it changes what a settled time
//! reads (a cut moved, a row merged where rows are gone). Queries whose steps depend on the query's own range (`@ start()`, `@`
//! a time, a negative `offset`) are not cached. Memory is bounded
//! ([`ResultCache::new`]), the least recently used entries dropped first.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use promql_parser::parser::{Expr, Offset};

use crate::value::{Labels, Series};

/// Bytes counted per series of an entry besides its points' 16 each.
const SERIES_BYTES: usize = 64;

/// Range queries' answers at their settled steps, within a memory bound.
#[derive(Debug)]
pub struct ResultCache {
    max_bytes: usize,
    entries: Mutex<Entries>,
    /// Range queries that found steps here.
    pub hits: AtomicU64,
    /// Range queries that found none.
    pub misses: AtomicU64,
    /// Bytes held now (an estimate).
    pub bytes: AtomicU64,
    /// Entries held now.
    pub len: AtomicU64,
}

#[derive(Debug, Default)]
struct Entries {
    map: HashMap<Key, Entry>,
    /// Counts uses: an entry's last use orders evictions.
    clock: u64,
    bytes: usize,
}

/// What identifies a query's steps: where it reads, the query (in its
/// canonical form), the step, and where steps fall within it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub(crate) database: String,
    pub(crate) retention_policy: String,
    pub(crate) query: String,
    pub(crate) step: i64,
    pub(crate) phase: i64,
}

/// A query's answer at the steps from `first` to `last`.
#[derive(Debug, Clone)]
pub(crate) struct Cached {
    pub(crate) first: i64,
    pub(crate) last: i64,
    pub(crate) series: Vec<Series>,
}

#[derive(Debug)]
struct Entry {
    cached: Cached,
    version: u64,
    bytes: usize,
    used: u64,
}

impl ResultCache {
    /// A cache of at most `max_bytes` (an estimate: 16 bytes a point, 64
    /// a series besides its labels).
    pub fn new(max_bytes: usize) -> ResultCache {
        ResultCache {
            max_bytes,
            entries: Mutex::default(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            len: AtomicU64::new(0),
        }
    }

    /// The steps kept for `key`, if they were stored at `version`;
    /// an entry of another version is dropped.
    pub(crate) fn get(&self, key: &Key, version: u64) -> Option<Cached> {
        let mut entries = self.entries.lock().unwrap();
        let entries = &mut *entries;
        entries.clock += 1;
        let found = match entries.map.get_mut(key) {
            Some(entry) if entry.version == version => {
                entry.used = entries.clock;
                Some(entry.cached.clone())
            }
            Some(_) => {
                let stale = entries.map.remove(key).expect("found above");
                entries.bytes -= stale.bytes;
                None
            }
            None => None,
        };
        let counter = match found {
            Some(_) => &self.hits,
            None => &self.misses,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        self.publish(entries);
        found
    }

    /// Keeps `cached` for `key`, read at `version`, dropping the least
    /// recently used entries past the bound (it too, if alone it passes).
    pub(crate) fn put(&self, key: Key, cached: Cached, version: u64) {
        let bytes = cached
            .series
            .iter()
            .map(|s| SERIES_BYTES + labels_bytes(&s.labels) + 16 * s.points.len())
            .sum::<usize>()
            + key.query.len();
        if bytes > self.max_bytes {
            return;
        }
        let mut entries = self.entries.lock().unwrap();
        let entries = &mut *entries;
        entries.clock += 1;
        let entry = Entry {
            cached,
            version,
            bytes,
            used: entries.clock,
        };
        if let Some(old) = entries.map.insert(key, entry) {
            entries.bytes -= old.bytes;
        }
        entries.bytes += bytes;
        while entries.bytes > self.max_bytes {
            let oldest = entries
                .map
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| k.clone())
                .expect("entries hold the bytes counted");
            let evicted = entries.map.remove(&oldest).expect("found above");
            entries.bytes -= evicted.bytes;
        }
        self.publish(entries);
    }

    fn publish(&self, entries: &Entries) {
        self.bytes.store(entries.bytes as u64, Ordering::Relaxed);
        self.len.store(entries.map.len() as u64, Ordering::Relaxed);
    }
}

fn labels_bytes(labels: &Labels) -> usize {
    labels
        .pairs()
        .iter()
        .map(|(n, v)| n.len() + v.len() + 48)
        .sum()
}

/// Whether a query's value at a step depends only on the step's time (no
/// `@`, no negative `offset`: those read the query's range or later
/// data).
pub(crate) fn cacheable(expr: &Expr) -> bool {
    let plain = |at: bool, offset: &Option<Offset>| !at && !matches!(offset, Some(Offset::Neg(_)));
    match expr {
        Expr::VectorSelector(vs) => plain(vs.at.is_some(), &vs.offset),
        Expr::MatrixSelector(ms) => plain(ms.vs.at.is_some(), &ms.vs.offset),
        Expr::Subquery(sq) => plain(sq.at.is_some(), &sq.offset) && cacheable(&sq.expr),
        Expr::Aggregate(agg) => agg.param.as_deref().is_none_or(cacheable) && cacheable(&agg.expr),
        Expr::Unary(u) => cacheable(&u.expr),
        Expr::Binary(b) => cacheable(&b.lhs) && cacheable(&b.rhs),
        Expr::Paren(p) => cacheable(&p.expr),
        Expr::Call(call) => call.args.args.iter().all(|a| cacheable(a)),
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) => true,
        Expr::Extension(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(query: &str) -> Key {
        Key {
            database: "db".into(),
            retention_policy: "autogen".into(),
            query: query.into(),
            step: 15_000,
            phase: 0,
        }
    }

    fn cached(points: usize) -> Cached {
        Cached {
            first: 0,
            last: 0,
            series: vec![Series {
                labels: Labels::new(vec![("a".into(), "b".into())]),
                points: vec![(0, 1.0); points],
            }],
        }
    }

    #[test]
    fn an_entry_of_another_version_is_dropped() {
        let cache = ResultCache::new(1 << 20);
        cache.put(key("a"), cached(10), 1);
        assert!(cache.get(&key("a"), 1).is_some());
        assert!(cache.get(&key("a"), 2).is_none());
        assert!(cache.get(&key("a"), 1).is_none());
        assert_eq!(cache.len.load(Ordering::Relaxed), 0);
        assert_eq!(cache.bytes.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn the_least_recently_used_go_first_past_the_bound() {
        // About 1,750 bytes an entry of 100 points: four fit in 8 KiB.
        let cache = ResultCache::new(8 << 10);
        for q in ["a", "b", "c", "d"] {
            cache.put(key(q), cached(100), 1);
        }
        assert!(cache.get(&key("a"), 1).is_some());
        cache.put(key("e"), cached(100), 1);
        assert!(cache.get(&key("b"), 1).is_none(), "b was the least recent");
        assert!(cache.get(&key("a"), 1).is_some());
        assert!(cache.bytes.load(Ordering::Relaxed) <= 8 << 10);
        // One larger than the bound is not kept.
        cache.put(key("big"), cached(10_000), 1);
        assert!(cache.get(&key("big"), 1).is_none());
    }

    #[test]
    fn steps_that_read_the_range_or_later_data_are_not_cacheable() {
        let parse = |q| crate::parse::parse_query(q).unwrap();
        assert!(cacheable(&parse("sum by (a) (rate(m[5m] offset 1h))")));
        assert!(!cacheable(&parse("rate(m[5m] @ start())")));
        assert!(!cacheable(&parse("m @ 100")));
        assert!(!cacheable(&parse("m offset -5m")));
        assert!(!cacheable(&parse("max_over_time((m @ end())[5m:])")));
    }
}
