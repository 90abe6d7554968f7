//! The series of one database: which ids are stored or logged, the rows
//! logged but not yet committed, the raw-key lookup cache, the tag keys
//! per measurement (its view's columns) and the cardinality limits'
//! bookkeeping.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use arrow::array::{MapBuilder, StringBuilder, UInt64Array};
use arrow::record_batch::RecordBatch;

use crate::config::CardinalityLimits;
use crate::error::Result;
use crate::layout::series::{FingerprintMap, SeriesIdMap, SeriesIdSet, SeriesKey};
use crate::wal::Lsn;

/// Series ids of one database: which are stored or logged, which raw
/// series keys map to which id, and the rows not yet committed.
///
/// A series is registered when the first record that carries it is
/// logged ([`register`](Self::register), called by the appender in log
/// order): from then on other writes leave it out of their records, and its
/// row waits in `pending` until a flush of the database commits it, before
/// any fact row flushed after it.
#[derive(Debug, Default)]
pub(crate) struct SeriesState {
    /// Fingerprint of a series key as written on a line → series_id. Lets a
    /// series seen before skip parsing its tags, canonicalization and hashing.
    pub(crate) by_raw_key: RwLock<FingerprintMap<u64>>,
    /// Ids stored in the series table or logged, and the logged rows not
    /// yet committed: one lock, so an id is never known without its row
    /// being stored or pending.
    registry: Mutex<Registry>,
    /// Held while pending rows are being committed, so a flush never inserts
    /// facts while the series they use are still in flight.
    committing: tokio::sync::Mutex<()>,
    /// Tag keys seen per measurement: the columns of its view.
    tag_keys: Mutex<HashMap<String, BTreeSet<String>>>,
    /// Hashes of the values seen per measurement and tag key, kept while
    /// the values-per-tag limit is set.
    tag_values: Mutex<TagValues>,
}

/// Hashes of the tag values seen, per measurement and tag key.
type TagValues = HashMap<String, HashMap<String, HashSet<u64>>>;

/// Entries of a database's raw-key cache: two spellings for each of the
/// default limit's million series. Measured (`HashMap`, 1 M entries): 69
/// bytes per entry, so at most ~140 MB; plus 38 bytes per known series
/// (the id set) and 19 bytes per tag value tracked for its limit.
pub(crate) const RAW_KEY_CACHE_MAX: usize = 2_000_000;

/// `map`'s value for `key`, added if missing; `key` is copied only then
/// (most series bring names the maps have).
fn entry<'m, V: Default>(map: &'m mut HashMap<String, V>, key: &str) -> &'m mut V {
    if !map.contains_key(key) {
        map.insert(key.to_owned(), V::default());
    }
    map.get_mut(key).expect("inserted above")
}

/// A tag value's hash, as the values-per-tag limit counts it.
fn value_hash(value: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(value.as_bytes())
}

#[derive(Debug, Default)]
struct Registry {
    known: SeriesIdSet,
    /// Rows to commit, with the lsn of the record that logged them (the
    /// record's encoding shares the keys).
    pending: Vec<(Lsn, u64, Arc<SeriesKey>)>,
    /// Series admitted under the series limit by writes not yet logged,
    /// with how many writes hold each: they count against the limit until
    /// known (then `admitted_known` keeps them from counting twice) or
    /// released.
    admitted: SeriesIdMap<usize>,
    admitted_known: usize,
}

impl Registry {
    /// Series stored, logged, or admitted by writes in flight.
    fn count(&self) -> usize {
        self.known.len() + self.admitted.len() - self.admitted_known
    }
}

impl SeriesState {
    /// Series stored: on open, those of the series table; in the
    /// `clickhouse` storage mode, those another node stored since (a write
    /// here leaves their rows out: they are on their shard). One a write here holds admitted
    /// is counted once against the limits. Returns how many were new.
    pub(super) fn learn(&self, ids: impl IntoIterator<Item = u64>) -> usize {
        let mut registry = self.registry.lock().unwrap();
        let registry = &mut *registry;
        let mut new = 0;
        for id in ids {
            if registry.known.insert(id) {
                new += 1;
                if registry.admitted.contains_key(&id) {
                    registry.admitted_known += 1;
                }
            }
        }
        new
    }

    /// Tag keys `measurement`'s stored series carry (read on open, or
    /// learnt from the shards); whether the measurement gained keys.
    pub(super) fn load_tag_keys(&self, measurement: String, keys: Vec<String>) -> bool {
        let mut tag_keys = self.tag_keys.lock().unwrap();
        let known = tag_keys.entry(measurement).or_default();
        let before = known.len();
        known.extend(keys);
        known.len() > before
    }

    /// Registers the series of the record numbered `lsn`: returns those not
    /// known yet, which the record must carry, and queues their rows.
    pub(crate) fn register(
        &self,
        lsn: Lsn,
        rows: Vec<(u64, SeriesKey)>,
    ) -> Vec<(u64, Arc<SeriesKey>)> {
        if rows.is_empty() {
            return Vec::new();
        }
        let mut registry = self.registry.lock().unwrap();
        let registry = &mut *registry;
        let fresh: Vec<_> = rows
            .into_iter()
            .filter(|(id, _)| registry.known.insert(*id))
            .map(|(id, key)| (id, Arc::new(key)))
            .collect();
        registry.admitted_known += fresh
            .iter()
            .filter(|(id, _)| registry.admitted.contains_key(id))
            .count();
        registry
            .pending
            .extend(fresh.iter().map(|(id, key)| (lsn, *id, Arc::clone(key))));
        fresh
    }

    /// Forgets series dropped from the series table: a later write of one
    /// registers it (and stores its row) again.
    pub(crate) fn forget(&self, ids: impl IntoIterator<Item = u64>) {
        let forgotten: SeriesIdSet = ids.into_iter().collect();
        // A line spelled as before must not find the id there either, or
        // it would skip the series row it now has to carry again. (Taken
        // before `registry`, not inside it: parsing holds this lock while
        // it admits series.)
        self.by_raw_key
            .write()
            .unwrap()
            .retain(|_, id| !forgotten.contains(id));
        let mut registry = self.registry.lock().unwrap();
        for id in forgotten {
            if registry.known.remove(&id) && registry.admitted.contains_key(&id) {
                registry.admitted_known -= 1;
            }
        }
    }

    /// Locks the series bookkeeping to admit a write's new series under
    /// `limits` (see [`Admitter::admit`]). Checks, counts and admits under
    /// one lock, so concurrent writers cannot pass a limit together; a
    /// write with many series takes it once for all of them.
    pub(crate) fn admitting(&self, limits: CardinalityLimits) -> Admitter<'_> {
        Admitter {
            state: self,
            registry: self.registry.lock().unwrap(),
            tag_values: None,
            limits,
            value_hashes: Vec::new(),
        }
    }

    /// Releases admissions (see [`Admitter::admit`]).
    pub(super) fn release(&self, ids: &[u64]) {
        let mut registry = self.registry.lock().unwrap();
        for id in ids {
            let Some(holders) = registry.admitted.get_mut(id) else {
                continue;
            };
            *holders -= 1;
            if *holders == 0 {
                registry.admitted.remove(id);
                if registry.known.contains(id) {
                    registry.admitted_known -= 1;
                }
            }
        }
    }

    /// Counts tag values of stored series (read back on open).
    pub(crate) fn note_tag_values<'a>(
        &self,
        values: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
    ) {
        let mut tag_values = self.tag_values.lock().unwrap();
        for (measurement, tag, value) in values {
            entry(entry(&mut tag_values, measurement), tag).insert(value_hash(value));
        }
    }

    /// Adds raw series keys to the lookup cache. Past
    /// [`RAW_KEY_CACHE_MAX`] entries the cache starts over: the same series
    /// spelled many ways (tags reordered, escaped differently) must not grow
    /// it without bound.
    pub(crate) fn cache_raw_keys(&self, raw_keys: Vec<(u128, u64)>) {
        if !raw_keys.is_empty() {
            let mut cache = self.by_raw_key.write().unwrap();
            if cache.len() + raw_keys.len() > RAW_KEY_CACHE_MAX {
                *cache = FingerprintMap::default();
            }
            cache.extend(raw_keys);
        }
    }

    /// Records the tag keys of series met by a write; returns the
    /// measurements that gained keys (their views need new columns).
    pub(crate) fn note_tag_keys(&self, rows: &[(u64, SeriesKey)]) -> Vec<String> {
        let mut grown = Vec::new();
        let mut tag_keys = self.tag_keys.lock().unwrap();
        for (_, key) in rows {
            let keys = entry(&mut tag_keys, &key.measurement);
            let before = keys.len();
            for (tag, _) in &key.tags {
                if !keys.contains(tag) {
                    keys.insert(tag.clone());
                }
            }
            if keys.len() > before && !grown.contains(&key.measurement) {
                grown.push(key.measurement.clone());
            }
        }
        grown
    }

    /// The tag keys seen for `measurement`, sorted.
    pub(crate) fn tag_keys(&self, measurement: &str) -> Vec<String> {
        self.tag_keys
            .lock()
            .unwrap()
            .get(measurement)
            .map(|keys| keys.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Whether each of `ids` is stored or logged, under one lock.
    pub(crate) fn known_mask(&self, ids: impl Iterator<Item = u64>) -> Vec<bool> {
        let registry = self.registry.lock().unwrap();
        ids.map(|id| registry.known.contains(&id)).collect()
    }

    /// The lsn of the oldest record whose series rows are not committed.
    pub(crate) fn oldest_pending(&self) -> Option<Lsn> {
        let registry = self.registry.lock().unwrap();
        registry.pending.iter().map(|(lsn, _, _)| *lsn).min()
    }

    /// Stores the pending series rows with `insert` and returns how many;
    /// one commit at a time, so a flush that finds nothing pending knows
    /// every series logged before it is stored. On failure they stay
    /// pending for the next flush.
    pub(crate) async fn commit<F, Fut>(&self, insert: F) -> Result<usize>
    where
        F: FnOnce(RecordBatch) -> Fut,
        Fut: std::future::Future<Output = Result<()>>,
    {
        let _committing = self.committing.lock().await;
        let rows = std::mem::take(&mut self.registry.lock().unwrap().pending);
        if rows.is_empty() {
            return Ok(0);
        }
        let batch = series_batch(rows.iter().map(|(_, id, key)| (*id, &**key)));
        match insert(batch).await {
            Ok(()) => Ok(rows.len()),
            Err(err) => {
                let mut registry = self.registry.lock().unwrap();
                let later = std::mem::replace(&mut registry.pending, rows);
                registry.pending.extend(later);
                Err(err)
            }
        }
    }
}

/// The series bookkeeping of one database, locked to admit series
/// ([`SeriesState::admitting`]).
pub(crate) struct Admitter<'s> {
    state: &'s SeriesState,
    registry: MutexGuard<'s, Registry>,
    /// Taken (after `registry`, as everywhere both are held) once a new
    /// series meets the values-per-tag limit, if it is set.
    tag_values: Option<MutexGuard<'s, TagValues>>,
    limits: CardinalityLimits,
    /// The hashes of the tag values of the series being admitted.
    value_hashes: Vec<u64>,
}

impl Admitter<'_> {
    /// Admits series `id` (with `key`) for a write that will log it, or
    /// says which limit it would pass. `Ok(true)`: new to the database and
    /// admitted, to be released with [`Admission`](super::Admission);
    /// `Ok(false)`: known.
    pub(crate) fn admit(&mut self, id: u64, key: &SeriesKey) -> Result<bool, String> {
        let registry = &mut *self.registry;
        if registry.known.contains(&id) {
            return Ok(false);
        }
        if let Some(holders) = registry.admitted.get_mut(&id) {
            *holders += 1;
            return Ok(true);
        }
        let count = registry.count();
        let limits = self.limits;
        if limits.max_series > 0 && count >= limits.max_series {
            return Err(format!(
                "series limit reached: the database has {count} series (limit {}); \
                 a new series is refused",
                limits.max_series
            ));
        }
        if limits.max_values_per_tag > 0 {
            let tag_values = self
                .tag_values
                .get_or_insert_with(|| self.state.tag_values.lock().unwrap());
            // Each value hashed once: checked against every tag first (a
            // refused series records none of its values), then recorded.
            self.value_hashes.clear();
            self.value_hashes
                .extend(key.tags.iter().map(|(_, value)| value_hash(value)));
            let tags = key.tags.iter().zip(&self.value_hashes);
            if let Some(measurement) = tag_values.get(&key.measurement) {
                for ((tag, _), hash) in tags.clone() {
                    let Some(values) = measurement.get(tag) else {
                        continue;
                    };
                    if values.len() >= limits.max_values_per_tag && !values.contains(hash) {
                        return Err(format!(
                            "tag value limit reached: tag {tag:?} of measurement {:?} has {} \
                             values (limit {}); a new value is refused",
                            key.measurement,
                            values.len(),
                            limits.max_values_per_tag
                        ));
                    }
                }
            }
            let measurement = entry(tag_values, &key.measurement);
            for ((tag, _), &hash) in tags {
                match measurement.get_mut(tag) {
                    Some(values) => {
                        values.insert(hash);
                    }
                    None => {
                        measurement.insert(tag.clone(), HashSet::from([hash]));
                    }
                }
            }
        }
        registry.admitted.insert(id, 1);
        Ok(true)
    }
}

fn series_batch<'a>(rows: impl Iterator<Item = (u64, &'a SeriesKey)> + Clone) -> RecordBatch {
    let ids = UInt64Array::from_iter_values(rows.clone().map(|(id, _)| id));
    let mut measurements = StringBuilder::new();
    let mut tags = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
    for (_, key) in rows {
        measurements.append_value(&key.measurement);
        for (k, v) in &key.tags {
            tags.keys().append_value(k);
            tags.values().append_value(v);
        }
        tags.append(true)
            .expect("keys and values are appended in pairs");
    }
    RecordBatch::try_from_iter([
        ("series_id", Arc::new(ids) as _),
        ("measurement", Arc::new(measurements.finish()) as _),
        ("tags", Arc::new(tags.finish()) as _),
    ])
    .expect("series columns have equal lengths")
}
