//! One table's cache: per series its tags and, per field, the newest time
//! and value, in columns by series slot; what it answers (the public
//! [`LastSeries`]) and the snapshot a statement reads as a table; and what
//! a rebuild read from the engine ([`EngineLast`]).

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, RwLock};

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Float64Array, Int64Array, StringArray,
    TimestampNanosecondArray, UInt64Array,
};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{Float64Type, Int64Type, TimestampNanosecondType, UInt64Type};
use arrow::record_batch::RecordBatch;

use crate::error::Result;
use crate::layout::schema::FieldType;
use crate::layout::series::SeriesIdMap;

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
const NO_TIME: i64 = i64::MIN;
/// Bookkeeping per series besides tags and fields: its index entry, id and
/// tag slice.
pub(super) const SERIES_BYTES: usize = 48;
/// A field's time and value per series (strings add their length).
pub(super) const VALUE_BYTES: usize = 16;
/// Per tag, besides its key's and value's bytes.
pub(super) const TAG_BYTES: usize = 48;

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
    field_index: HashMap<String, usize>,
    /// Estimated bytes held, as counted in the global total.
    pub(super) bytes: usize,
    /// Series met whose tags are not known yet.
    pub(super) untagged: usize,
}

#[derive(Debug)]
pub(super) struct CachedSeries {
    pub(super) id: u64,
    pub(super) tags: Option<Box<[(String, String)]>>,
}

/// One field's newest time and value per series (by series slot).
#[derive(Debug)]
pub(super) struct FieldColumn {
    pub(super) name: String,
    pub(super) times: Vec<i64>,
    pub(super) values: Values,
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
    pub(super) fn new(status: Status) -> State {
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
    pub(super) fn clear(&mut self) {
        *self = State {
            generation: self.generation,
            ..State::new(self.status)
        };
    }

    /// The slot of series `id`, added (without tags) if new.
    pub(super) fn slot(&mut self, id: u64) -> usize {
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
    pub(super) fn set_tags(&mut self, slot: usize, tags: impl FnOnce() -> Vec<(String, String)>) {
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
    pub(super) fn read(
        &self,
        mut keep: impl FnMut(&[(String, String)]) -> bool,
    ) -> Vec<LastSeries> {
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

    pub(super) fn status(&self) -> Status {
        Status::from_u8(self.status.load(Ordering::Acquire))
    }

    pub(super) fn set_status(&self, state: &mut State, status: Status) {
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

/// A series' tags, as the series table holds them.
pub(super) type SeriesTags = (u64, Vec<(String, String)>);

/// A series' newest non-NULL (time, value) per field, as the engine holds
/// them.
pub(super) type SeriesNewest = (u64, Vec<Option<(i64, LastField)>>);

/// What a rebuild read from the engine.
pub(super) struct EngineLast {
    /// Series of the measurement and their tags.
    pub(super) tags: Vec<SeriesTags>,
    /// The table's cached fields.
    pub(super) fields: Vec<(String, FieldType)>,
    /// Per series, each field's newest non-NULL (time, value).
    pub(super) values: Vec<SeriesNewest>,
}
