//! One table's cache: per series its tags (and the postings index over
//! them) and, per field, the first time, the newest time and value, and
//! (numeric fields) the recent samples, in columns by series slot; and how
//! writes and rebuilds change them. What it answers is in `lookup.rs`, the
//! snapshot a statement reads as a table in `snapshot.rs`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::RwLock;

use arrow::array::{Array, AsArray};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{Float64Type, Int64Type, TimestampNanosecondType, UInt64Type};
use arrow::record_batch::RecordBatch;

use crate::error::Result;
use crate::last_value::answers::LastField;
use crate::last_value::postings::{TagIndex, TagsAt};
use crate::last_value::recent::{Sample, SeriesSamples};
use crate::layout::schema::FieldType;
use crate::layout::series::SeriesIdMap;

/// Where a table's cache stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum Status {
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
pub(super) const NO_TIME: i64 = i64::MIN;
/// "No value yet" in a field's first times.
pub(super) const NO_FIRST: i64 = i64::MAX;
/// `recent_from` of a table that keeps no recent samples.
pub(super) const NO_RECENT: i64 = i64::MAX;

/// Bookkeeping per series besides tags and fields: its id, where its tags
/// are, and its entry in the id → slot map.
pub(super) const SERIES_BYTES: usize = 40;
/// A field's first and newest time, value and recent samples' list per
/// series (strings add their length, samples their chunks' bytes).
pub(super) const VALUE_BYTES: usize = 48;

/// The last values of one fact table.
#[derive(Debug)]
pub(crate) struct TableLast {
    /// A copy of `state.status`, for writes to skip uncached tables without
    /// the lock.
    pub(super) status: AtomicU8,
    /// A rebuild of this table is queued and not yet started.
    pub(super) queued: AtomicBool,
    pub(super) state: RwLock<State>,
}

#[derive(Debug)]
pub(super) struct State {
    pub(super) status: Status,
    /// Counts the rebuilds begun: a rebuild whose generation is no longer
    /// current was overtaken by another and merges nothing.
    pub(super) generation: u64,
    pub(super) index: SeriesIdMap<u32>,
    pub(super) series: Vec<CachedSeries>,
    pub(super) fields: Vec<FieldColumn>,
    pub(super) field_index: HashMap<String, usize>,
    /// Estimated bytes held, as counted in the global total.
    pub(super) bytes: usize,
    /// Series met whose tags are not known yet.
    pub(super) untagged: usize,
    /// Every series' tags, and (key, value) → slots.
    pub(super) tags: TagIndex,
    /// Every acknowledged sample of a numeric field whose time is at or
    /// after this (ns) is in the fields' `recent`; [`NO_RECENT`]: none is
    /// kept. Moves forward only, as old samples are trimmed.
    pub(super) recent_from: i64,
    /// Bytes of room the recent samples take, as counted in the global
    /// total.
    pub(super) recent_bytes: usize,
    /// Recent samples held.
    pub(super) recent_samples: usize,
}

#[derive(Debug)]
pub(super) struct CachedSeries {
    pub(super) id: u64,
    /// Where its tags are in `State::tags` ([`TagsAt::UNKNOWN`]: not known
    /// yet).
    pub(super) tags: TagsAt,
}

/// One field's first time, newest time and value, and recent samples per
/// series (by series slot).
#[derive(Debug)]
pub(super) struct FieldColumn {
    pub(super) name: String,
    /// The time of the series' first value ([`NO_FIRST`]: none).
    pub(super) firsts: Vec<i64>,
    pub(super) times: Vec<i64>,
    pub(super) values: Values,
    /// Numeric fields: the series' samples since the table's
    /// `recent_from`.
    pub(super) recent: Option<Vec<SeriesSamples>>,
    /// The newest time at which a series' point of this field was written
    /// twice while kept in `recent` ([`NO_TIME`]: none): memory holds one
    /// sample there, a table of the `append` policy two rows.
    pub(super) repeated: i64,
}

#[derive(Debug)]
pub(super) enum Values {
    Float(Vec<f64>),
    Integer(Vec<i64>),
    UInteger(Vec<u64>),
    String(Vec<String>),
    Boolean(Vec<bool>),
}

impl Values {
    /// Empty values of `ty`; `None` for the types not cached (arrays).
    pub(super) fn new(ty: FieldType, len: usize) -> Option<Values> {
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

    pub(super) fn get(&self, slot: usize) -> LastField {
        match self {
            Values::Float(v) => LastField::Float(v[slot]),
            Values::Integer(v) => LastField::Integer(v[slot]),
            Values::UInteger(v) => LastField::UInteger(v[slot]),
            Values::String(v) => LastField::String(v[slot].clone()),
            Values::Boolean(v) => LastField::Boolean(v[slot]),
        }
    }

    /// Whether the values are numbers (kept as recent samples).
    pub(super) fn is_numeric(&self) -> bool {
        !matches!(self, Values::String(_))
    }

    /// Keeps the slots `keep` says, in order.
    fn retain(&mut self, keep: &[bool]) {
        match self {
            Values::Float(v) => retain(v, keep),
            Values::Integer(v) => retain(v, keep),
            Values::UInteger(v) => retain(v, keep),
            Values::String(v) => retain(v, keep),
            Values::Boolean(v) => retain(v, keep),
        }
    }
}

/// Keeps the items `keep` says, in order.
fn retain<T>(values: &mut Vec<T>, keep: &[bool]) {
    let mut i = 0;
    values.retain(|_| {
        i += 1;
        keep[i - 1]
    });
}

impl State {
    /// An empty cache; it keeps the recent samples from `recent_from`.
    pub(super) fn new(status: Status, recent_from: i64) -> State {
        State {
            status,
            generation: 0,
            index: SeriesIdMap::default(),
            series: Vec::new(),
            fields: Vec::new(),
            field_index: HashMap::new(),
            bytes: 0,
            untagged: 0,
            tags: TagIndex::default(),
            recent_from,
            recent_bytes: 0,
            recent_samples: 0,
        }
    }

    /// Empties the cache, keeping its status and generation; it keeps the
    /// recent samples from `recent_from`.
    pub(super) fn clear(&mut self, recent_from: i64) {
        *self = State {
            generation: self.generation,
            ..State::new(self.status, recent_from)
        };
    }

    /// The slot of series `id`, added (without tags) if new.
    pub(super) fn slot(&mut self, id: u64) -> usize {
        if let Some(&slot) = self.index.get(&id) {
            return slot as usize;
        }
        let slot = self.series.len();
        self.index.insert(id, slot as u32);
        self.series.push(CachedSeries {
            id,
            tags: TagsAt::UNKNOWN,
        });
        for field in &mut self.fields {
            field.firsts.push(NO_FIRST);
            field.times.push(NO_TIME);
            field.values.push_empty();
            if let Some(recent) = &mut field.recent {
                recent.push(SeriesSamples::default());
            }
        }
        self.untagged += 1;
        self.bytes += SERIES_BYTES + VALUE_BYTES * self.fields.len();
        slot
    }

    /// Gives the series in `slot` its tags, if it has none yet.
    pub(super) fn set_tags(&mut self, slot: usize, tags: impl FnOnce() -> Vec<(String, String)>) {
        if self.series[slot].tags.is_known() {
            return;
        }
        let mut tags = tags();
        tags.sort();
        let (at, grown) = self.tags.add(slot as u32, &tags);
        self.bytes += grown;
        self.series[slot].tags = at;
        self.untagged -= 1;
    }

    /// The column of field `name`, added if new. `Ok(None)`: a type not
    /// cached; `Err`: the field is cached with another type.
    pub(super) fn field(&mut self, name: &str, ty: FieldType) -> Result<Option<usize>, String> {
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
        let recent = values.is_numeric().then(|| {
            (0..self.series.len())
                .map(|_| SeriesSamples::default())
                .collect()
        });
        self.fields.push(FieldColumn {
            name: name.to_owned(),
            firsts: vec![NO_FIRST; self.series.len()],
            times: vec![NO_TIME; self.series.len()],
            values,
            recent,
            repeated: NO_TIME,
        });
        self.field_index
            .insert(name.to_owned(), self.fields.len() - 1);
        self.bytes += name.len() + VALUE_BYTES * self.series.len();
        Ok(Some(self.fields.len() - 1))
    }

    /// Takes the rows of one chunk (`time`, `series_id`, fields): per
    /// field and series, the newest non-NULL value; at equal times the
    /// later row.
    pub(super) fn apply_chunk(&mut self, chunk: &RecordBatch) -> Result<(), String> {
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
            rows.first(&mut target.firsts);
            if let (Some(recent), true) = (&mut target.recent, self.recent_from != NO_RECENT) {
                let (from, repeated) = (self.recent_from, &mut target.repeated);
                let (grown, added) = match &target.values {
                    Values::Float(_) => {
                        let column = column.as_primitive::<Float64Type>();
                        rows.record(recent, from, repeated, |row| column.value(row))
                    }
                    Values::Integer(_) => {
                        let column = column.as_primitive::<Int64Type>();
                        rows.record(recent, from, repeated, |row| column.value(row) as f64)
                    }
                    Values::UInteger(_) => {
                        let column = column.as_primitive::<UInt64Type>();
                        rows.record(recent, from, repeated, |row| column.value(row) as f64)
                    }
                    Values::Boolean(_) => {
                        let column = column.as_boolean();
                        rows.record(recent, from, repeated, |row| {
                            f64::from(u8::from(column.value(row)))
                        })
                    }
                    Values::String(_) => (0, 0),
                };
                self.recent_bytes = self.recent_bytes.saturating_add_signed(grown);
                self.recent_samples += added;
            }
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
    pub(super) fn drop_untagged(&mut self) {
        let keep: Vec<bool> = self.series.iter().map(|s| s.tags.is_known()).collect();
        self.series.retain(|s| s.tags.is_known());
        for field in &mut self.fields {
            retain(&mut field.firsts, &keep);
            retain(&mut field.times, &keep);
            field.values.retain(&keep);
            if let Some(recent) = &mut field.recent {
                for (samples, kept) in recent.iter().zip(&keep) {
                    if !kept {
                        self.recent_bytes -= samples.bytes();
                        self.recent_samples -= samples.len();
                    }
                }
                retain(recent, &keep);
            }
        }
        self.index = self
            .series
            .iter()
            .enumerate()
            .map(|(slot, s)| (s.id, slot as u32))
            .collect();
        // The slots moved: the postings are made again.
        self.tags.reindex(self.series.iter().map(|s| s.tags));
        self.bytes -= self.untagged * (SERIES_BYTES + VALUE_BYTES * self.fields.len());
        self.untagged = 0;
    }

    /// Keeps recent samples from `from` on (it only moves forward) and
    /// drops those before; [`NO_RECENT`] drops them all and keeps none.
    pub(super) fn trim_recent(&mut self, from: i64) {
        let from = from.max(self.recent_from);
        self.recent_from = from;
        for field in &mut self.fields {
            for samples in field.recent.iter_mut().flatten() {
                let before = samples.bytes();
                self.recent_samples -= match from {
                    NO_RECENT => std::mem::take(samples).len(),
                    _ => samples.trim(from),
                };
                self.recent_bytes -= before - samples.bytes();
            }
        }
    }

    /// Merges a series' recent samples of field `f` read from the engine
    /// into those writes brought meanwhile; `repeated` is the newest time
    /// the engine held two rows of a point at.
    pub(super) fn merge_recent(&mut self, f: usize, slot: usize, engine: &[Sample], repeated: i64) {
        let field = &mut self.fields[f];
        let Some(samples) = field.recent.as_mut().map(|r| &mut r[slot]) else {
            return;
        };
        let (before, count) = (samples.bytes(), samples.len());
        let both = samples.merge_older(engine);
        field.repeated = field.repeated.max(repeated).max(both);
        self.recent_bytes = (self.recent_bytes + samples.bytes()).saturating_sub(before);
        self.recent_samples += samples.len() - count;
    }
}

/// The rows of a chunk as one field's update sees them.
struct Rows<'a> {
    times: &'a [i64],
    slots: &'a [u32],
    nulls: Option<&'a NullBuffer>,
}

impl Rows<'_> {
    /// Takes each non-NULL row's time as its series' first if earlier.
    fn first(&self, firsts: &mut [i64]) {
        for (row, (&time, &slot)) in self.times.iter().zip(self.slots).enumerate() {
            if self.nulls.is_some_and(|nulls| nulls.is_null(row)) {
                continue;
            }
            let first = &mut firsts[slot as usize];
            *first = (*first).min(time);
        }
    }

    /// Adds each non-NULL row at or after `from` to its series' recent
    /// samples, its value `value(row)`, moving `repeated` to the time of a
    /// point written again; returns the bytes of room they grew by and the
    /// samples added.
    fn record(
        &self,
        recent: &mut [SeriesSamples],
        from: i64,
        repeated: &mut i64,
        value: impl Fn(usize) -> f64,
    ) -> (isize, usize) {
        let (mut grown, mut added) = (0, 0);
        for (row, (&time, &slot)) in self.times.iter().zip(self.slots).enumerate() {
            if time < from || self.nulls.is_some_and(|nulls| nulls.is_null(row)) {
                continue;
            }
            let (new, grew) = recent[slot as usize].insert(time, value(row));
            match new {
                true => added += 1,
                false => *repeated = (*repeated).max(time),
            }
            grown += grew;
        }
        (grown, added)
    }

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
    /// created: if it `keeps_recent` samples, it has every one, none came
    /// before), else off.
    pub(crate) fn new(cached: bool, keeps_recent: bool) -> TableLast {
        let (status, recent_from) = match (cached, keeps_recent) {
            (true, true) => (Status::Ready, i64::MIN),
            (true, false) => (Status::Ready, NO_RECENT),
            (false, _) => (Status::Off, NO_RECENT),
        };
        TableLast {
            status: AtomicU8::new(status as u8),
            queued: AtomicBool::new(false),
            state: RwLock::new(State::new(status, recent_from)),
        }
    }

    pub(super) fn status(&self) -> Status {
        Status::from_u8(self.status.load(Ordering::Acquire))
    }

    pub(super) fn set_status(&self, state: &mut State, status: Status) {
        state.status = status;
        self.status.store(status as u8, Ordering::Release);
    }
}

/// Sets `values[slot]` to `value` (of the same type); returns the bytes it
/// grew by.
pub(super) fn set_value(values: &mut Values, slot: usize, value: &LastField) -> isize {
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
