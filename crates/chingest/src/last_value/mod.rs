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

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Float64Array, Int64Array, MapArray, StringArray,
    TimestampNanosecondArray, UInt64Array,
};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{DataType, Float64Type, Int64Type, TimestampNanosecondType, UInt64Type};
use arrow::record_batch::RecordBatch;
use tokio::sync::mpsc;

use crate::catalog::Table;
use crate::config::LastValueConfig;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::layout::names::{quote_ident, quote_literal};
use crate::layout::schema::FieldType;
use crate::layout::series::{SeriesIdMap, SeriesKey};
use crate::stats::IngestStats;
use crate::wal::TableRef;

/// One cached series: its id, tags sorted by key, and the newest value of
/// each field.
#[derive(Debug, Clone, PartialEq)]
pub struct LastSeries {
    /// The series' id (see [`series`](crate::layout::series)).
    pub series_id: u64,
    /// Tags, sorted by key.
    pub tags: Vec<(String, String)>,
    /// The newest value of each field the series has, sorted by field name.
    pub fields: Vec<(String, LastValue)>,
}

/// The newest value of one field of one series.
#[derive(Debug, Clone, PartialEq)]
pub struct LastValue {
    /// Its time, in nanoseconds since the epoch.
    pub time_ns: i64,
    /// The value.
    pub value: LastField,
}

/// A field value, typed like its field.
#[derive(Debug, Clone, PartialEq)]
pub enum LastField {
    /// A float field's value.
    Float(f64),
    /// An integer field's value.
    Integer(i64),
    /// An unsigned field's value.
    UInteger(u64),
    /// A string field's value.
    String(String),
    /// A boolean field's value.
    Boolean(bool),
}

/// Where a table's cache stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Status {
    /// Not cached (the configuration leaves it out).
    Off = 0,
    /// Being rebuilt from the engine: writes update it, reads get `None`.
    Building = 1,
    /// Whole: answers reads.
    Ready = 2,
    /// Dropped for the memory bound: writes and reads skip it.
    Evicted = 3,
}

impl Status {
    fn from_u8(value: u8) -> Status {
        match value {
            1 => Status::Building,
            2 => Status::Ready,
            3 => Status::Evicted,
            _ => Status::Off,
        }
    }
}

/// "No value yet" in a field's times.
const NO_TIME: i64 = i64::MIN;
/// Bookkeeping per series besides tags and fields: its index entry, id and
/// tag slice.
const SERIES_BYTES: usize = 48;
/// A field's time and value per series (strings add their length).
const VALUE_BYTES: usize = 16;
/// Per tag, besides its key's and value's bytes.
const TAG_BYTES: usize = 48;

/// The last values of one fact table.
#[derive(Debug)]
pub(crate) struct TableLast {
    /// A copy of `state.status`, for writes to skip uncached tables without
    /// the lock.
    status: AtomicU8,
    /// A rebuild of this table is queued and not yet started.
    queued: AtomicBool,
    state: RwLock<State>,
}

#[derive(Debug)]
struct State {
    status: Status,
    /// Counts the rebuilds begun: a rebuild whose generation is no longer
    /// current was overtaken by another and merges nothing.
    generation: u64,
    index: SeriesIdMap<u32>,
    series: Vec<CachedSeries>,
    fields: Vec<FieldColumn>,
    field_index: HashMap<String, usize>,
    /// Estimated bytes held, as counted in the global total.
    bytes: usize,
    /// Series met whose tags are not known yet.
    untagged: usize,
}

#[derive(Debug)]
struct CachedSeries {
    id: u64,
    tags: Option<Box<[(String, String)]>>,
}

/// One field's newest time and value per series (by series slot).
#[derive(Debug)]
struct FieldColumn {
    name: String,
    times: Vec<i64>,
    values: Values,
}

#[derive(Debug)]
enum Values {
    Float(Vec<f64>),
    Integer(Vec<i64>),
    UInteger(Vec<u64>),
    String(Vec<String>),
    Boolean(Vec<bool>),
}

impl Values {
    /// Empty values of `ty`; `None` for the types not cached (arrays).
    fn new(ty: FieldType, len: usize) -> Option<Values> {
        Some(match ty {
            FieldType::Float => Values::Float(vec![0.0; len]),
            FieldType::Integer => Values::Integer(vec![0; len]),
            FieldType::UInteger => Values::UInteger(vec![0; len]),
            FieldType::String => Values::String(vec![String::new(); len]),
            FieldType::Boolean => Values::Boolean(vec![false; len]),
            FieldType::FloatArray | FieldType::IntegerArray | FieldType::UIntegerArray => {
                return None
            }
        })
    }

    fn field_type(&self) -> FieldType {
        match self {
            Values::Float(_) => FieldType::Float,
            Values::Integer(_) => FieldType::Integer,
            Values::UInteger(_) => FieldType::UInteger,
            Values::String(_) => FieldType::String,
            Values::Boolean(_) => FieldType::Boolean,
        }
    }

    fn push_empty(&mut self) {
        match self {
            Values::Float(v) => v.push(0.0),
            Values::Integer(v) => v.push(0),
            Values::UInteger(v) => v.push(0),
            Values::String(v) => v.push(String::new()),
            Values::Boolean(v) => v.push(false),
        }
    }

    fn get(&self, slot: usize) -> LastField {
        match self {
            Values::Float(v) => LastField::Float(v[slot]),
            Values::Integer(v) => LastField::Integer(v[slot]),
            Values::UInteger(v) => LastField::UInteger(v[slot]),
            Values::String(v) => LastField::String(v[slot].clone()),
            Values::Boolean(v) => LastField::Boolean(v[slot]),
        }
    }

    /// Keeps the slots `keep` says, in order.
    fn retain(&mut self, keep: &[bool]) {
        fn retain<T>(values: &mut Vec<T>, keep: &[bool]) {
            let mut i = 0;
            values.retain(|_| {
                i += 1;
                keep[i - 1]
            });
        }
        match self {
            Values::Float(v) => retain(v, keep),
            Values::Integer(v) => retain(v, keep),
            Values::UInteger(v) => retain(v, keep),
            Values::String(v) => retain(v, keep),
            Values::Boolean(v) => retain(v, keep),
        }
    }
}

impl State {
    fn new(status: Status) -> State {
        State {
            status,
            generation: 0,
            index: SeriesIdMap::default(),
            series: Vec::new(),
            fields: Vec::new(),
            field_index: HashMap::new(),
            bytes: 0,
            untagged: 0,
        }
    }

    /// Empties the cache, keeping its status and generation.
    fn clear(&mut self) {
        *self = State {
            generation: self.generation,
            ..State::new(self.status)
        };
    }

    /// The slot of series `id`, added (without tags) if new.
    fn slot(&mut self, id: u64) -> usize {
        if let Some(&slot) = self.index.get(&id) {
            return slot as usize;
        }
        let slot = self.series.len();
        self.index.insert(id, slot as u32);
        self.series.push(CachedSeries { id, tags: None });
        for field in &mut self.fields {
            field.times.push(NO_TIME);
            field.values.push_empty();
        }
        self.untagged += 1;
        self.bytes += SERIES_BYTES + VALUE_BYTES * self.fields.len();
        slot
    }

    /// Gives the series in `slot` its tags, if it has none yet.
    fn set_tags(&mut self, slot: usize, tags: impl FnOnce() -> Vec<(String, String)>) {
        let series = &mut self.series[slot];
        if series.tags.is_some() {
            return;
        }
        let mut tags = tags();
        tags.sort();
        self.bytes += tags
            .iter()
            .map(|(k, v)| TAG_BYTES + k.len() + v.len())
            .sum::<usize>();
        series.tags = Some(tags.into_boxed_slice());
        self.untagged -= 1;
    }

    /// The column of field `name`, added if new. `Ok(None)`: a type not
    /// cached; `Err`: the field is cached with another type.
    fn field(&mut self, name: &str, ty: FieldType) -> Result<Option<usize>, String> {
        if let Some(&i) = self.field_index.get(name) {
            let cached = self.fields[i].values.field_type();
            return match cached == ty {
                true => Ok(Some(i)),
                false => Err(format!(
                    "field {name:?} is cached as {cached}, written as {ty}"
                )),
            };
        }
        let Some(values) = Values::new(ty, self.series.len()) else {
            return Ok(None);
        };
        self.fields.push(FieldColumn {
            name: name.to_owned(),
            times: vec![NO_TIME; self.series.len()],
            values,
        });
        self.field_index
            .insert(name.to_owned(), self.fields.len() - 1);
        self.bytes += name.len() + VALUE_BYTES * self.series.len();
        Ok(Some(self.fields.len() - 1))
    }

    /// Takes the rows of one chunk (`time`, `series_id`, fields): per
    /// field and series, the newest non-NULL value; at equal times the
    /// later row.
    fn apply_chunk(&mut self, chunk: &RecordBatch) -> Result<(), String> {
        let column = |name: &str| {
            chunk
                .column_by_name(name)
                .ok_or_else(|| format!("a chunk without {name}"))
        };
        let times = column("time")?
            .as_primitive_opt::<TimestampNanosecondType>()
            .ok_or("time is not a nanosecond timestamp")?
            .values()
            .clone();
        let ids = column("series_id")?
            .as_primitive_opt::<UInt64Type>()
            .ok_or("series_id is not UInt64")?
            .values()
            .clone();
        let slots: Vec<u32> = ids.iter().map(|&id| self.slot(id) as u32).collect();
        let schema = chunk.schema();
        for (field, column) in schema.fields().iter().zip(chunk.columns()) {
            let name = field.name();
            if name == "time" || name == "series_id" {
                continue;
            }
            let ty = FieldType::from_arrow(field.data_type())
                .ok_or_else(|| format!("field {name:?} has type {}", field.data_type()))?;
            let Some(i) = self.field(name, ty)? else {
                continue;
            };
            let target = &mut self.fields[i];
            let rows = Rows {
                times: &times,
                slots: &slots,
                nulls: column.nulls(),
            };
            match &mut target.values {
                Values::Float(values) => {
                    let column = column.as_primitive::<Float64Type>();
                    rows.update(&mut target.times, |row, slot| {
                        values[slot] = column.value(row)
                    });
                }
                Values::Integer(values) => {
                    let column = column.as_primitive::<Int64Type>();
                    rows.update(&mut target.times, |row, slot| {
                        values[slot] = column.value(row)
                    });
                }
                Values::UInteger(values) => {
                    let column = column.as_primitive::<UInt64Type>();
                    rows.update(&mut target.times, |row, slot| {
                        values[slot] = column.value(row)
                    });
                }
                Values::Boolean(values) => {
                    let column = column.as_boolean();
                    rows.update(&mut target.times, |row, slot| {
                        values[slot] = column.value(row)
                    });
                }
                Values::String(values) => {
                    let column = column.as_string::<i32>();
                    let mut grown = 0isize;
                    rows.update(&mut target.times, |row, slot| {
                        let value = column.value(row);
                        grown += value.len() as isize - values[slot].len() as isize;
                        values[slot].clear();
                        values[slot].push_str(value);
                    });
                    self.bytes = self.bytes.saturating_add_signed(grown);
                }
            }
        }
        Ok(())
    }

    /// Drops the series without tags (their rows are kept nowhere else:
    /// facts of a series no longer in the series table, which the
    /// measurement's view does not show either).
    fn drop_untagged(&mut self) {
        let keep: Vec<bool> = self.series.iter().map(|s| s.tags.is_some()).collect();
        self.series.retain(|s| s.tags.is_some());
        for field in &mut self.fields {
            let mut i = 0;
            field.times.retain(|_| {
                i += 1;
                keep[i - 1]
            });
            field.values.retain(&keep);
        }
        self.index = self
            .series
            .iter()
            .enumerate()
            .map(|(slot, s)| (s.id, slot as u32))
            .collect();
        self.bytes -= self.untagged * (SERIES_BYTES + VALUE_BYTES * self.fields.len());
        self.untagged = 0;
    }

    /// The series `keep` accepts that have a value, fields sorted by name.
    fn read(&self, mut keep: impl FnMut(&[(String, String)]) -> bool) -> Vec<LastSeries> {
        let mut order: Vec<usize> = (0..self.fields.len()).collect();
        order.sort_by(|&a, &b| self.fields[a].name.cmp(&self.fields[b].name));
        let mut found = Vec::new();
        for (slot, series) in self.series.iter().enumerate() {
            let Some(tags) = &series.tags else { continue };
            if !keep(tags) {
                continue;
            }
            let fields: Vec<(String, LastValue)> = order
                .iter()
                .map(|&i| &self.fields[i])
                .filter(|field| field.times[slot] != NO_TIME)
                .map(|field| {
                    let value = LastValue {
                        time_ns: field.times[slot],
                        value: field.values.get(slot),
                    };
                    (field.name.clone(), value)
                })
                .collect();
            if !fields.is_empty() {
                found.push(LastSeries {
                    series_id: series.id,
                    tags: tags.to_vec(),
                    fields,
                });
            }
        }
        found
    }
}

/// The rows of a chunk as one field's update sees them.
struct Rows<'a> {
    times: &'a [i64],
    slots: &'a [u32],
    nulls: Option<&'a NullBuffer>,
}

impl Rows<'_> {
    /// Calls `set(row, slot)` for each non-NULL row at least as new as the
    /// field's value in its series' slot, and takes its time.
    fn update(&self, field_times: &mut [i64], mut set: impl FnMut(usize, usize)) {
        for (row, (&time, &slot)) in self.times.iter().zip(self.slots).enumerate() {
            if self.nulls.is_some_and(|nulls| nulls.is_null(row)) {
                continue;
            }
            let slot = slot as usize;
            if time >= field_times[slot] {
                field_times[slot] = time;
                set(row, slot);
            }
        }
    }
}

impl TableLast {
    /// A table's cache: empty and answering if `cached` (a table just
    /// created), else off.
    pub(crate) fn new(cached: bool) -> TableLast {
        let status = if cached { Status::Ready } else { Status::Off };
        TableLast {
            status: AtomicU8::new(status as u8),
            queued: AtomicBool::new(false),
            state: RwLock::new(State::new(status)),
        }
    }

    fn status(&self) -> Status {
        Status::from_u8(self.status.load(Ordering::Acquire))
    }

    fn set_status(&self, state: &mut State, status: Status) {
        state.status = status;
        self.status.store(status as u8, Ordering::Release);
    }

    /// The cached series `keep` accepts; `None` unless the cache is whole.
    pub(crate) fn read(
        &self,
        keep: impl FnMut(&[(String, String)]) -> bool,
    ) -> Option<Vec<LastSeries>> {
        if self.status() != Status::Ready {
            return None;
        }
        let state = self.state.read().unwrap();
        (state.status == Status::Ready && state.untagged == 0).then(|| state.read(keep))
    }

    /// The whole cache as one batch, for SQL: `series_id`, `time` (the
    /// newest of the series' field times), a column per tag key (empty
    /// where a series lacks it; `<key>_tag` where a field or `series_id`
    /// has the name, as in the measurement's view) and per field (NULL
    /// where the series has no value). `None` unless the cache is whole.
    pub(crate) fn snapshot(&self) -> Option<RecordBatch> {
        let state = self.state.read().unwrap();
        if state.status != Status::Ready || state.untagged != 0 {
            return None;
        }
        let rows: Vec<usize> = (0..state.series.len())
            .filter(|&slot| {
                state.series[slot].tags.is_some()
                    && state.fields.iter().any(|f| f.times[slot] != NO_TIME)
            })
            .collect();
        let tag_keys: BTreeSet<&str> = rows
            .iter()
            .flat_map(|&slot| state.series[slot].tags.iter().flatten())
            .map(|(key, _)| key.as_str())
            .collect();
        let mut columns: Vec<(String, ArrayRef, bool)> = Vec::new();
        let ids = UInt64Array::from_iter_values(rows.iter().map(|&slot| state.series[slot].id));
        columns.push(("series_id".to_owned(), Arc::new(ids), false));
        let times = rows.iter().map(|&slot| {
            state
                .fields
                .iter()
                .map(|f| f.times[slot])
                .max()
                .unwrap_or(NO_TIME)
        });
        let times = TimestampNanosecondArray::from_iter_values(times).with_timezone("UTC");
        columns.push(("time".to_owned(), Arc::new(times), false));
        for key in tag_keys {
            let values = rows.iter().map(|&slot| {
                let tags = state.series[slot].tags.as_deref().unwrap_or_default();
                tags.iter()
                    .find(|(k, _)| k == key)
                    .map_or("", |(_, v)| v.as_str())
            });
            let name = match key == "series_id" || state.field_index.contains_key(key) {
                true => format!("{key}_tag"),
                false => key.to_owned(),
            };
            columns.push((name, Arc::new(StringArray::from_iter_values(values)), false));
        }
        let mut order: Vec<&FieldColumn> = state.fields.iter().collect();
        order.sort_by(|a, b| a.name.cmp(&b.name));
        for field in order {
            let has = |slot: usize| field.times[slot] != NO_TIME;
            let column: ArrayRef = match &field.values {
                Values::Float(v) => Arc::new(Float64Array::from_iter(
                    rows.iter().map(|&s| has(s).then(|| v[s])),
                )),
                Values::Integer(v) => Arc::new(Int64Array::from_iter(
                    rows.iter().map(|&s| has(s).then(|| v[s])),
                )),
                Values::UInteger(v) => Arc::new(UInt64Array::from_iter(
                    rows.iter().map(|&s| has(s).then(|| v[s])),
                )),
                Values::String(v) => Arc::new(StringArray::from_iter(
                    rows.iter().map(|&s| has(s).then(|| v[s].as_str())),
                )),
                Values::Boolean(v) => Arc::new(BooleanArray::from_iter(
                    rows.iter().map(|&s| has(s).then(|| v[s])),
                )),
            };
            columns.push((field.name.clone(), column, true));
        }
        let batch = RecordBatch::try_from_iter_with_nullable(columns);
        Some(batch.expect("columns of equal length"))
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

/// Sets `values[slot]` to `value` (of the same type); returns the bytes it
/// grew by.
fn set_value(values: &mut Values, slot: usize, value: &LastField) -> isize {
    match (values, value) {
        (Values::Float(v), LastField::Float(x)) => v[slot] = *x,
        (Values::Integer(v), LastField::Integer(x)) => v[slot] = *x,
        (Values::UInteger(v), LastField::UInteger(x)) => v[slot] = *x,
        (Values::Boolean(v), LastField::Boolean(x)) => v[slot] = *x,
        (Values::String(v), LastField::String(x)) => {
            let grown = x.len() as isize - v[slot].len() as isize;
            v[slot].clone_from(x);
            return grown;
        }
        _ => {}
    }
    0
}

/// A series' tags, as the series table holds them.
type SeriesTags = (u64, Vec<(String, String)>);

/// A series' newest non-NULL (time, value) per field, as the engine holds
/// them.
type SeriesNewest = (u64, Vec<Option<(i64, LastField)>>);

/// What a rebuild read from the engine.
struct EngineLast {
    /// Series of the measurement and their tags.
    tags: Vec<SeriesTags>,
    /// The table's cached fields.
    fields: Vec<(String, FieldType)>,
    /// Per series, each field's newest non-NULL (time, value).
    values: Vec<SeriesNewest>,
}

/// What rebuilds need from the layers above the cache: the engine to
/// read, and a flush of everything logged before they read it.
pub(crate) trait RebuildSource: Send + Sync {
    /// The engine the table's rows are read from.
    fn engine(&self) -> &Engine;
    /// Inserts every row logged so far into the engine.
    fn flush_all(&self) -> BoxFuture<'_, Result<()>>;
    /// Whether the ingestor is closing: rebuilds stop.
    fn is_closed(&self) -> bool;
}

/// A boxed future: [`RebuildSource`] is used as a trait object.
pub(crate) type BoxFuture<'a, T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// Rebuilds the tables queued by [`LastValues::invalidate`], one batch at a
/// time, until the ingestor is gone.
pub(crate) async fn run_rebuilds(
    source: Weak<dyn RebuildSource>,
    cache: Weak<LastValues>,
    mut queue: RebuildQueue,
) {
    while let Some(first) = queue.recv().await {
        let mut tables = vec![first];
        while let Ok(table) = queue.try_recv() {
            tables.push(table);
        }
        let (Some(source), Some(cache)) = (source.upgrade(), cache.upgrade()) else {
            return;
        };
        if source.is_closed() {
            return;
        }
        // The generation is taken before the flush: everything written
        // before the cache was emptied is in the engine when it is read.
        let jobs: Vec<(Arc<Table>, u64)> = tables
            .into_iter()
            .map(|table| {
                let last = cache.cache(&table);
                last.queued.store(false, Ordering::Release);
                let generation = last.state.read().unwrap().generation;
                (table, generation)
            })
            .collect();
        let flushed = source.flush_all().await;
        for (table, generation) in jobs {
            let rebuilt = match &flushed {
                Ok(()) => rebuild(source.engine(), &cache, &table, generation).await,
                Err(err) => Err(Error::Engine(err.to_string())),
            };
            match rebuilt {
                Ok(()) => IngestStats::add(&cache.stats.last_value_rebuilds, 1),
                Err(_) if source.is_closed() => return,
                Err(err) => {
                    tracing::warn!(table = ?table.id, %err, "last-value cache: rebuild failed; retrying in 5 s");
                    let weak = Arc::downgrade(&cache);
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_secs(5)).await;
                        if let Some(cache) = weak.upgrade() {
                            if !cache.cache(&table).queued.swap(true, Ordering::AcqRel) {
                                let _ = cache.rebuilds.send(table);
                            }
                        }
                    });
                }
            }
        }
    }
}

/// Reads a table's newest values and its series' tags from the engine and
/// merges them into its cache.
async fn rebuild(
    engine: &Engine,
    cache: &LastValues,
    table: &Arc<Table>,
    generation: u64,
) -> Result<()> {
    let schema = table.schema();
    let names = &schema.names;
    let tags_sql = format!(
        "SELECT series_id, tags FROM {} FINAL WHERE measurement = {}",
        names.series_table,
        quote_literal(&table.id.measurement)
    );
    let tags = read_tags(&engine.query_arrow(tags_sql).await?)?;
    let fields: Vec<(String, FieldType)> = schema
        .fields
        .iter()
        .filter(|(_, ty)| Values::new(*ty, 0).is_some())
        .cloned()
        .collect();
    // Too large before reading a value: evicted without the scan.
    let estimate: usize = tags
        .iter()
        .map(|(_, t)| {
            SERIES_BYTES
                + VALUE_BYTES * fields.len()
                + t.iter()
                    .map(|(k, v)| TAG_BYTES + k.len() + v.len())
                    .sum::<usize>()
        })
        .sum();
    let total = cache.stats.last_value_bytes.load(Ordering::Relaxed) as usize;
    if total + estimate > cache.config.max_bytes {
        let last = cache.cache(table);
        let mut state = last.state.write().unwrap();
        if state.generation == generation && state.status == Status::Building {
            cache.evict(table, &last, &mut state);
        }
        return Ok(());
    }
    let mut values = Vec::new();
    if !fields.is_empty() {
        let mut columns = vec!["series_id".to_owned()];
        for (i, (name, _)) in fields.iter().enumerate() {
            let field = quote_ident(name);
            columns.push(format!("maxIf(time, {field} IS NOT NULL) AS t{i}"));
            // Equal times: the row inserted last (block number and offset).
            columns.push(format!(
                "argMaxIf({field}, (time, _block_number, _block_offset), {field} IS NOT NULL) AS v{i}"
            ));
        }
        let sql = format!(
            "SELECT {} FROM {} GROUP BY series_id",
            columns.join(", "),
            names.storage_table
        );
        for batch in engine.query_arrow(sql).await? {
            read_values(&batch, &fields, &mut values)?;
        }
    }
    let from_engine = EngineLast {
        tags,
        fields,
        values,
    };
    cache.finish_rebuild(table, generation, from_engine);
    Ok(())
}

fn unexpected(what: &str, column: &ArrayRef) -> Error {
    Error::Engine(format!(
        "last-value rebuild: {what} came back as {}",
        column.data_type()
    ))
}

/// `(series_id, tags)` rows of the series table.
fn read_tags(batches: &[RecordBatch]) -> Result<Vec<SeriesTags>> {
    let mut rows = Vec::new();
    for batch in batches {
        let ids = batch.column(0);
        let ids = ids
            .as_primitive_opt::<UInt64Type>()
            .ok_or_else(|| unexpected("series_id", ids))?;
        let maps = batch.column(1);
        let maps: &MapArray = maps.as_map_opt().ok_or_else(|| unexpected("tags", maps))?;
        let keys = strings(maps.keys())?;
        let values = strings(maps.values())?;
        let offsets = maps.value_offsets();
        for row in 0..batch.num_rows() {
            let (start, end) = (offsets[row] as usize, offsets[row + 1] as usize);
            let tags = (start..end)
                .map(|i| (keys[i].clone(), values[i].clone()))
                .collect();
            rows.push((ids.value(row), tags));
        }
    }
    Ok(rows)
}

/// A string column as strings (the engine sends String as Utf8 or Binary).
fn strings(column: &ArrayRef) -> Result<Vec<String>> {
    let text = |i: usize, bytes: &[u8]| match column.is_null(i) {
        true => String::new(),
        false => String::from_utf8_lossy(bytes).into_owned(),
    };
    match column.data_type() {
        DataType::Utf8 => {
            let c = column.as_string::<i32>();
            Ok((0..c.len())
                .map(|i| text(i, c.value(i).as_bytes()))
                .collect())
        }
        DataType::LargeUtf8 => {
            let c = column.as_string::<i64>();
            Ok((0..c.len())
                .map(|i| text(i, c.value(i).as_bytes()))
                .collect())
        }
        DataType::Binary => {
            let c = column.as_binary::<i32>();
            Ok((0..c.len()).map(|i| text(i, c.value(i))).collect())
        }
        DataType::LargeBinary => {
            let c = column.as_binary::<i64>();
            Ok((0..c.len()).map(|i| text(i, c.value(i))).collect())
        }
        _ => Err(unexpected("a string", column)),
    }
}

/// The rows of the rebuild's values query: `series_id`, then `t<i>`,
/// `v<i>` per field.
fn read_values(
    batch: &RecordBatch,
    fields: &[(String, FieldType)],
    out: &mut Vec<SeriesNewest>,
) -> Result<()> {
    let ids = batch.column(0);
    let ids = ids
        .as_primitive_opt::<UInt64Type>()
        .ok_or_else(|| unexpected("series_id", ids))?;
    let mut columns = Vec::with_capacity(fields.len());
    for (i, (_, ty)) in fields.iter().enumerate() {
        let times = batch.column(1 + 2 * i);
        let times = times
            .as_primitive_opt::<TimestampNanosecondType>()
            .ok_or_else(|| unexpected("a time", times))?;
        let values = batch.column(2 + 2 * i);
        let strings = match ty {
            FieldType::String => Some(strings(values)?),
            _ => None,
        };
        columns.push((times, values, strings));
    }
    for row in 0..batch.num_rows() {
        let mut newest = Vec::with_capacity(fields.len());
        for ((times, values, strings), (_, ty)) in columns.iter().zip(fields) {
            // NULL: no row of the series has the field.
            if values.is_null(row) {
                newest.push(None);
                continue;
            }
            let value = match (ty, strings) {
                (FieldType::String, Some(strings)) => LastField::String(strings[row].clone()),
                (FieldType::Float, _) => LastField::Float(
                    values
                        .as_primitive_opt::<Float64Type>()
                        .ok_or_else(|| unexpected("a float", values))?
                        .value(row),
                ),
                (FieldType::Integer, _) => LastField::Integer(
                    values
                        .as_primitive_opt::<Int64Type>()
                        .ok_or_else(|| unexpected("an integer", values))?
                        .value(row),
                ),
                (FieldType::UInteger, _) => LastField::UInteger(
                    values
                        .as_primitive_opt::<UInt64Type>()
                        .ok_or_else(|| unexpected("an unsigned integer", values))?
                        .value(row),
                ),
                (FieldType::Boolean, _) => LastField::Boolean(
                    values
                        .as_boolean_opt()
                        .ok_or_else(|| unexpected("a boolean", values))?
                        .value(row),
                ),
                _ => return Err(unexpected("a field", values)),
            };
            newest.push(Some((times.value(row), value)));
        }
        out.push((ids.value(row), newest));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_name_every_measurement_a_database_or_one_measurement() {
        let config = |patterns: &[&str]| LastValueConfig {
            measurements: patterns.iter().map(|p| p.to_string()).collect(),
            max_bytes: 1,
        };
        assert!(config(&["*"]).covers("db", "cpu"));
        assert!(config(&["db.*"]).covers("db", "cpu"));
        assert!(!config(&["db.*"]).covers("db2", "cpu"));
        assert!(config(&["db.cpu"]).covers("db", "cpu"));
        assert!(!config(&["db.cpu"]).covers("db", "mem"));
        assert!(config(&["cpu"]).covers("any", "cpu"));
        assert!(!config(&["dbx.cpu"]).covers("db", "x.cpu"));
        assert!(!config(&[]).covers("db", "cpu"));
    }
}
