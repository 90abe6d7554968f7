//! The chunk cache: series' samples older than the recent window, read
//! from the engine once and kept compressed (`chunk.rs`) in blocks of
//! [`BLOCK_NS`] aligned to the epoch, the least recently used dropped
//! first past [`LastValueConfig::chunk_cache_bytes`](crate::LastValueConfig::chunk_cache_bytes).
//! A panel moved back to last Tuesday reads the engine the first time and
//! memory after, as one over the last hours does.
//!
//! A block holds what its reader read: the cache does not know how (a
//! reader's `scope` names it, with the table and field), only that it
//! holds while the database's
//! [`settled_version`](crate::Ingestor::settled_version) is the one it was
//! read at. So a reader stores only blocks that are settled and that the
//! engine holds whole
//! ([`engine_complete_before`](crate::Ingestor::engine_complete_before),
//! read after the version), and a late write, edit, retention or
//! downsampling cut that changes them moves the version: the block is
//! then a miss, read again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use crate::last_value::recent::{Sample, SeriesSamples, Taken};
use crate::stats::IngestStats;

/// A block's span: two hours, aligned to the epoch (a Prometheus block's).
pub const BLOCK_NS: i64 = 2 * 3600 * 1_000_000_000;

/// Bytes counted per block besides its samples: its key, entry and map
/// slot.
const ENTRY_BYTES: usize = 96;

/// Older samples by (scope, series, block), within a memory bound.
#[derive(Debug)]
pub(crate) struct ChunkCache {
    max_bytes: usize,
    stats: Arc<IngestStats>,
    scopes: RwLock<Scopes>,
    /// Counts uses: a block's last use orders evictions.
    clock: AtomicU64,
}

/// Each scope's blocks by (series, block number).
type Scopes = HashMap<Arc<str>, HashMap<(u64, i64), Block>>;

#[derive(Debug)]
struct Block {
    samples: SeriesSamples,
    /// Whether its reader found a time with two rows (memory keeps one).
    repeated: bool,
    version: u64,
    used: AtomicU64,
    bytes: usize,
}

impl ChunkCache {
    /// A cache of at most `max_bytes` (0: none is kept), counted in
    /// `stats`.
    pub(crate) fn new(max_bytes: usize, stats: Arc<IngestStats>) -> ChunkCache {
        ChunkCache {
            max_bytes,
            stats,
            scopes: RwLock::default(),
            clock: AtomicU64::new(0),
        }
    }

    /// Whether it keeps anything.
    pub(crate) fn enabled(&self) -> bool {
        self.max_bytes > 0
    }

    /// For each of `ids`, its samples in `[start, end]` (ns) when every
    /// block from `start`'s to `end`'s is held at `version`, else `None`
    /// (a miss: the caller reads the engine and [`put`](Self::put)s them),
    /// as `S` takes them (decoded, or compressed as the cache keeps them),
    /// times in units of `per` ns; and whether a block found was put as
    /// `repeated`.
    pub(crate) fn get<S: Taken>(
        &self,
        scope: &str,
        ids: &[u64],
        (start, end): (i64, i64),
        per: i64,
        version: u64,
    ) -> (Vec<Option<S>>, bool) {
        assert!(per > 0, "a unit of time is 1 ns or more");
        let scopes = self.scopes.read().unwrap();
        let Some(blocks) = scopes.get(scope) else {
            self.count(0, ids.len());
            return ((0..ids.len()).map(|_| None).collect(), false);
        };
        let mut repeated = false;
        let used = self.clock.fetch_add(1, Ordering::Relaxed);
        let (first, last) = (start.div_euclid(BLOCK_NS), end.div_euclid(BLOCK_NS));
        let found: Vec<Option<S>> = ids
            .iter()
            .map(|&id| {
                let mut samples = S::default();
                for at in first..=last {
                    let block = blocks.get(&(id, at)).filter(|b| b.version == version)?;
                    block.used.store(used, Ordering::Relaxed);
                    repeated |= block.repeated;
                    samples.join(S::taken(&block.samples, start, end, per));
                }
                Some(samples)
            })
            .collect();
        let hits = found.iter().filter(|f| f.is_some()).count();
        self.count(hits, ids.len() - hits);
        (found, repeated)
    }

    /// The most samples a fill may read when its reader allows `most`:
    /// at most what half the bound holds at two bytes a sample (a fill
    /// past the bound would evict itself).
    pub(crate) fn max_fill_samples(&self, most: usize) -> usize {
        (self.max_bytes / 4).min(most)
    }

    fn count(&self, hits: usize, misses: usize) {
        let stats = &self.stats;
        stats
            .chunk_cache_hits
            .fetch_add(hits as u64, Ordering::Relaxed);
        stats
            .chunk_cache_misses
            .fetch_add(misses as u64, Ordering::Relaxed);
    }

    /// Keeps series `id`'s samples of the whole blocks in `[from, to)`
    /// (ns, multiples of [`BLOCK_NS`]), read at `version`: every one those
    /// blocks hold, sorted by time, one per time (a block with none is
    /// kept too: it is no miss); `repeated` if a time had two rows. Gives
    /// back those of `[start, end]` as `S` takes them, in units of `per`
    /// ns ([`get`](Self::get)'s), compressed once for both.
    pub(crate) fn put<S: Taken>(
        &self,
        (scope, version): (&str, u64),
        id: u64,
        (from, to): (i64, i64),
        (samples, repeated): (&[Sample], bool),
        (start, end, per): (i64, i64, i64),
    ) -> S {
        let mut taken = S::default();
        for at in (from..to).step_by(BLOCK_NS as usize) {
            let first = samples.partition_point(|s| s.0 < at);
            let last = samples.partition_point(|s| s.0 < at + BLOCK_NS);
            let block = SeriesSamples::of_sorted(&samples[first..last]);
            if at <= end && start < at + BLOCK_NS {
                taken.join(S::taken(&block, start, end, per));
            }
            self.put_block(scope, version, (id, at), block, repeated);
        }
        taken
    }

    /// Keeps one block's samples.
    fn put_block(
        &self,
        scope: &str,
        version: u64,
        (id, block_start): (u64, i64),
        samples: SeriesSamples,
        repeated: bool,
    ) {
        if !self.enabled() {
            return;
        }
        debug_assert_eq!(block_start.rem_euclid(BLOCK_NS), 0);
        let bytes = ENTRY_BYTES + samples.bytes();
        let block = Block {
            samples,
            repeated,
            version,
            used: AtomicU64::new(self.clock.fetch_add(1, Ordering::Relaxed)),
            bytes,
        };
        let mut scopes = self.scopes.write().unwrap();
        let blocks = match scopes.get_mut(scope) {
            Some(blocks) => blocks,
            None => scopes.entry(Arc::from(scope)).or_default(),
        };
        let key = (id, block_start.div_euclid(BLOCK_NS));
        let old = blocks.insert(key, block).map_or(0, |old| old.bytes);
        let held = self.stats.chunk_cache_bytes.load(Ordering::Relaxed) as usize + bytes - old;
        self.stats
            .chunk_cache_bytes
            .store(held as u64, Ordering::Relaxed);
        if held > self.max_bytes {
            self.evict(&mut scopes, held);
        }
        let count = scopes.values().map(HashMap::len).sum::<usize>();
        self.stats
            .chunk_cache_blocks
            .store(count as u64, Ordering::Relaxed);
    }

    /// Drops the least recently used blocks until a tenth of the bound is
    /// free (so evictions come in batches, not one a put).
    fn evict(&self, scopes: &mut Scopes, held: usize) {
        let goal = self.max_bytes - self.max_bytes / 10;
        let mut uses: Vec<(u64, usize)> = scopes
            .values()
            .flat_map(|blocks| blocks.values())
            .map(|b| (b.used.load(Ordering::Relaxed), b.bytes))
            .collect();
        uses.sort_unstable();
        // The first use kept: the oldest uses go until enough is freed.
        let mut freeing = 0;
        let cut = uses
            .iter()
            .find(|&&(_, bytes)| {
                freeing += bytes;
                freeing > held - goal
            })
            .map_or(u64::MAX, |&(used, _)| used + 1);
        let (mut freed, mut evicted) = (0, 0);
        for blocks in scopes.values_mut() {
            blocks.retain(|_, block| {
                let keep = block.used.load(Ordering::Relaxed) >= cut;
                if !keep {
                    freed += block.bytes;
                    evicted += 1;
                }
                keep
            });
        }
        scopes.retain(|_, blocks| !blocks.is_empty());
        let stats = &self.stats;
        stats
            .chunk_cache_bytes
            .store((held - freed) as u64, Ordering::Relaxed);
        stats
            .chunk_cache_evictions
            .fetch_add(evicted, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::last_value::CompressedSamples;

    const HOUR: i64 = 3600 * 1_000_000_000;

    /// A block's worth of 15 s samples from `start`.
    fn block(start: i64, value: f64) -> Vec<Sample> {
        (0..480)
            .map(|i| (start + i * 15_000_000_000, value + i as f64))
            .collect()
    }

    /// Keeps `samples` as series `id`'s of `span` in scope "s" at version
    /// 1; what the put gives back is every one of them.
    fn put(cache: &ChunkCache, id: u64, span: (i64, i64), samples: &[Sample]) {
        let taken: Vec<Sample> = cache.put(
            ("s", 1),
            id,
            span,
            (samples, false),
            (span.0, span.1 - 1, 1),
        );
        assert_eq!(taken, samples);
    }

    #[test]
    fn a_range_is_held_when_its_every_block_is_at_the_version() {
        let cache = ChunkCache::new(1 << 20, Arc::default());
        put(&cache, 7, (0, BLOCK_NS), &block(0, 0.0));
        put(&cache, 7, (BLOCK_NS, 2 * BLOCK_NS), &[]);
        // Within one block, across both, past them, at another version.
        let get = |scope, ids: &[u64], range, version| {
            cache.get::<Vec<Sample>>(scope, ids, range, 1, version).0
        };
        let one = get("s", &[7], (HOUR, HOUR + 30_000_000_000), 1);
        assert_eq!(
            one,
            [Some(vec![
                (HOUR, 240.0),
                (HOUR + 15_000_000_000, 241.0),
                (HOUR + 30_000_000_000, 242.0)
            ])]
        );
        let both = get("s", &[7, 8], (HOUR, 3 * HOUR), 1);
        assert_eq!(both[0].as_ref().map(Vec::len), Some(240));
        assert_eq!(both[1], None, "series 8 was never read");
        assert_eq!(get("s", &[7], (0, 5 * HOUR), 1), [None]);
        assert_eq!(get("s", &[7], (0, HOUR), 2), [None], "stale");
        assert_eq!(get("t", &[7], (0, HOUR), 1), [None], "another scope");
        let stats = &cache.stats;
        assert_eq!(stats.chunk_cache_hits.load(Ordering::Relaxed), 2);
        assert_eq!(stats.chunk_cache_misses.load(Ordering::Relaxed), 4);
        assert_eq!(stats.chunk_cache_blocks.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn compressed_blocks_decode_to_what_get_gives_in_the_unit_asked() {
        let cache = ChunkCache::new(1 << 20, Arc::default());
        for at in 0..3 {
            let samples = block(at * BLOCK_NS, at as f64 * 1_000.0);
            put(&cache, 7, (at * BLOCK_NS, (at + 1) * BLOCK_NS), &samples);
        }
        for range in [
            (HOUR, 5 * HOUR),
            (0, 6 * HOUR - 1),
            (2 * HOUR + 1, 2 * HOUR + 2),
        ] {
            let decoded = cache.get::<Vec<Sample>>("s", &[7], range, 1, 1).0;
            let compressed = cache
                .get::<CompressedSamples>("s", &[7], range, 1_000_000, 1)
                .0;
            let want: Vec<Sample> = decoded[0]
                .iter()
                .flatten()
                .map(|&(ns, value)| (ns / 1_000_000, value))
                .collect();
            let compressed = compressed[0].as_ref().expect("held");
            let mut got = Vec::new();
            compressed.decode_into(&mut got);
            assert_eq!(got, want, "{range:?}");
            assert_eq!(compressed.len(), want.len());
        }
        let missed = cache
            .get::<CompressedSamples>("s", &[7, 8], (0, 7 * HOUR), 1_000_000, 1)
            .0;
        assert!(
            missed.iter().all(Option::is_none),
            "a block not held is a miss"
        );
    }

    #[test]
    fn a_put_gives_back_what_a_get_of_its_range_would() {
        let cache = ChunkCache::new(1 << 20, Arc::default());
        let samples: Vec<Sample> = (0..3).flat_map(|at| block(at * BLOCK_NS, 0.5)).collect();
        let range = (HOUR + 1, 5 * HOUR);
        let (kept, taken) = (("s", 1), (range.0, range.1, 1_000_000));
        let given: CompressedSamples =
            cache.put(kept, 7, (0, 3 * BLOCK_NS), (&samples, false), taken);
        let got = cache
            .get::<CompressedSamples>("s", &[7], range, 1_000_000, 1)
            .0;
        let decoded = |c: &CompressedSamples| {
            let mut out = Vec::new();
            c.decode_into(&mut out);
            out
        };
        let want = decoded(got[0].as_ref().expect("held"));
        assert_eq!(decoded(&given), want);
        assert_eq!(want.len(), 4 * 240);
    }

    #[test]
    fn past_the_bound_the_least_recently_used_blocks_go() {
        let stats = Arc::new(IngestStats::default());
        let cache = ChunkCache::new(64 << 10, Arc::clone(&stats));
        for id in 0..400 {
            put(&cache, id, (0, BLOCK_NS), &block(0, id as f64 * 1000.0));
            // Series 0 is read after each put: always the latest used.
            assert!(
                cache.get::<Vec<Sample>>("s", &[0], (0, HOUR), 1, 1).0[0].is_some(),
                "{id}"
            );
            assert!(stats.chunk_cache_bytes.load(Ordering::Relaxed) <= 64 << 10);
        }
        let evicted = stats.chunk_cache_evictions.load(Ordering::Relaxed);
        let held = stats.chunk_cache_blocks.load(Ordering::Relaxed);
        assert!(evicted > 0 && held + evicted == 400, "{held} + {evicted}");
        let newest = cache.get::<Vec<Sample>>("s", &[399, 1], (0, HOUR), 1, 1).0;
        assert!(newest[0].is_some() && newest[1].is_none());
        let disabled = ChunkCache::new(0, Arc::default());
        put(&disabled, 1, (0, BLOCK_NS), &block(0, 0.0));
        assert_eq!(
            disabled.get::<Vec<Sample>>("s", &[1], (0, HOUR), 1, 1).0,
            [None]
        );
    }
}
