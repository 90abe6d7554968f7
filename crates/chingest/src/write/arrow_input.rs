//! Turning a caller's Arrow batch into a fact-table chunk, column by column.
//!
//! The batch carries a `time` column, fields in every other column, and its
//! tags in one of two forms ([`Tags`]). Tag columns are dictionary-encoded
//! (as columnar producers usually send them already), so a row's tag set is
//! a tuple of small integers: each distinct tuple is hashed to its
//! `series_id` once per batch, and every other row costs one lookup. Tags
//! given per series (as remote write and OTLP decode them) are hashed once
//! per series, with no column built. Fields are cast to the fact table's
//! types without ever becoming rows. Problems are reported per column: a
//! batch is taken whole or not at all.

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, DictionaryArray, StringArray, TimestampNanosecondArray, UInt64Array,
};
use arrow::compute::{cast_with_options, CastOptions};
use arrow::datatypes::{DataType, Int32Type, TimeUnit};
use arrow::record_batch::RecordBatch;

use crate::catalog::Database;
use crate::error::{Error, Result};
use crate::layout::names::{self, NameKind};
use crate::layout::schema::{FieldType, TableSchema};
use crate::layout::series::{encode_canonical, series_id_of_canonical, SeriesIdSet, SeriesKey};
use crate::write::lp::MIN_TIME_NS;
use crate::write::request::Tags;

fn invalid(column: &str, reason: impl Into<String>) -> Error {
    Error::InvalidBatch {
        column: column.to_owned(),
        reason: reason.into(),
    }
}

fn cast(column: &str, array: &ArrayRef, to: &DataType) -> Result<ArrayRef> {
    let options = CastOptions {
        safe: false,
        ..CastOptions::default()
    };
    cast_with_options(array, to, &options).map_err(|e| invalid(column, e.to_string()))
}

/// The field type an Arrow column is stored as, if it can be.
fn field_type(data_type: &DataType) -> Option<FieldType> {
    use DataType::*;
    Some(match data_type {
        Float16 | Float32 | Float64 => FieldType::Float,
        Int8 | Int16 | Int32 | Int64 => FieldType::Integer,
        UInt8 | UInt16 | UInt32 | UInt64 => FieldType::UInteger,
        Utf8 | LargeUtf8 | Utf8View => FieldType::String,
        Dictionary(_, value) if matches!(**value, Utf8 | LargeUtf8 | Utf8View) => FieldType::String,
        Boolean => FieldType::Boolean,
        List(item) | LargeList(item) => match field_type(item.data_type())? {
            FieldType::Float => FieldType::FloatArray,
            FieldType::Integer => FieldType::IntegerArray,
            FieldType::UInteger => FieldType::UIntegerArray,
            _ => return None,
        },
        _ => return None,
    })
}

/// The type every tag column is cast to: strings, dictionary-encoded with
/// 32-bit keys (a no-op for columns already sent so).
fn tag_type() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

/// A validated input batch: its time column in nanoseconds, its tags, and
/// field columns with their types.
pub(crate) struct ArrowInput<'a> {
    time: TimestampNanosecondArray,
    tags: InputTags<'a>,
    /// (name, type, column cast to the type's Arrow type)
    fields: Vec<(String, FieldType, ArrayRef)>,
}

/// [`Tags`], checked.
enum InputTags<'a> {
    /// Tag columns as dictionary-encoded strings, sorted by name.
    Columns(Vec<(String, ArrayRef)>),
    /// Every series' tags, each series' sorted by key (copied only if some
    /// were not), and each series' (tag count, row count).
    Series {
        tags: Cow<'a, [(&'a str, &'a str)]>,
        counts: &'a [(usize, usize)],
    },
}

impl<'a> ArrowInput<'a> {
    /// Checks `batch`'s columns and `tags`, and converts them.
    pub(crate) fn new(batch: &RecordBatch, tags: Tags<'a>) -> Result<ArrowInput<'a>> {
        let tag_columns = match tags {
            Tags::Columns(names) => names,
            Tags::Series { .. } => &[],
        };
        let schema = batch.schema();
        let time_index = schema
            .index_of("time")
            .map_err(|_| invalid("time", "missing: every batch needs a time column"))?;
        let time = batch.column(time_index);
        let time = match time.data_type() {
            DataType::Timestamp(_, _) | DataType::Int64 => cast(
                "time",
                time,
                &DataType::Timestamp(TimeUnit::Nanosecond, None),
            )?,
            other => {
                return Err(invalid(
                    "time",
                    format!("has type {other}; expected a timestamp or Int64 nanoseconds"),
                ))
            }
        };
        if time.null_count() > 0 {
            return Err(invalid("time", "has NULLs"));
        }
        let time = time
            .as_primitive::<arrow::datatypes::TimestampNanosecondType>()
            .clone();
        if time.values().iter().any(|&t| t < MIN_TIME_NS) {
            return Err(invalid("time", "has a time before 1900-01-01T00:00:00Z"));
        }

        let mut columns = Vec::with_capacity(tag_columns.len());
        for &name in tag_columns {
            let index = schema
                .index_of(name)
                .map_err(|_| invalid(name, "named as a tag but not in the batch"))?;
            if name == "time" {
                return Err(invalid(name, "tag key \"time\" is reserved"));
            }
            let column = batch.column(index);
            if field_type(column.data_type()) != Some(FieldType::String) {
                return Err(invalid(
                    name,
                    format!("tag columns must be strings, not {}", column.data_type()),
                ));
            }
            let encoded = cast(name, column, &tag_type())?;
            columns.push((name.to_owned(), encoded));
        }
        columns.sort_by(|a, b| a.0.cmp(&b.0));
        if let Some(pair) = columns.windows(2).find(|pair| pair[0].0 == pair[1].0) {
            return Err(invalid(&pair[0].0, "named twice as a tag"));
        }

        let mut fields = Vec::new();
        for (index, field) in schema.fields().iter().enumerate() {
            let name = field.name();
            if index == time_index || tag_columns.contains(&name.as_str()) {
                continue;
            }
            names::validate(NameKind::Field, name).map_err(|e| invalid(name, e.to_string()))?;
            let ty = field_type(field.data_type()).ok_or_else(|| {
                invalid(
                    name,
                    format!("type {} cannot be stored as a field", field.data_type()),
                )
            })?;
            let column = cast(name, batch.column(index), &ty.arrow_type())?;
            // The engine's arrays hold no NULLs: it would store 0 instead.
            if ty.is_array() && column.as_list::<i32>().values().null_count() > 0 {
                return Err(invalid(name, "has NULL array items"));
            }
            fields.push((name.clone(), ty, column));
        }
        if fields.is_empty() {
            return Err(invalid("*", "a batch needs at least one field column"));
        }
        let tags = match tags {
            Tags::Columns(_) => InputTags::Columns(columns),
            Tags::Series { tags, counts } => {
                let tags = series_tags(tags, counts, batch.num_rows(), &fields)?;
                InputTags::Series { tags, counts }
            }
        };
        Ok(ArrowInput { time, tags, fields })
    }

    /// (name, type) of every field, for creating missing columns.
    pub(crate) fn field_types(&self) -> Vec<(String, FieldType)> {
        self.fields
            .iter()
            .map(|(n, t, _)| (n.clone(), *t))
            .collect()
    }

    /// Every row's series id, and the new series among them.
    fn series_ids(&self, measurement: &str, db: &Database) -> (UInt64Array, Vec<(u64, SeriesKey)>) {
        match &self.tags {
            InputTags::Columns(columns) => self.column_series_ids(columns, measurement, db),
            InputTags::Series { tags, counts } => {
                let series = per_series(tags, counts);
                let mut buffer = Vec::new();
                let mut ids = Vec::with_capacity(self.time.len());
                let mut seen =
                    SeriesIdSet::with_capacity_and_hasher(counts.len(), Default::default());
                // The first of each series in the batch.
                let mut firsts = Vec::with_capacity(counts.len());
                for (tags, rows) in series {
                    encode_canonical(measurement, present(tags), &mut buffer);
                    let id = series_id_of_canonical(&buffer);
                    ids.extend(std::iter::repeat_n(id, rows));
                    if seen.insert(id) {
                        firsts.push((id, tags));
                    }
                }
                let new_series = new_series(db, measurement, firsts, present);
                (UInt64Array::from(ids), new_series)
            }
        }
    }

    /// Hashes every row's tag columns into series ids, returning the new
    /// series. Rows are told apart by their tuple of dictionary keys; the
    /// canonical key is built and hashed once per distinct tuple.
    fn column_series_ids(
        &self,
        columns: &[(String, ArrayRef)],
        measurement: &str,
        db: &Database,
    ) -> (UInt64Array, Vec<(u64, SeriesKey)>) {
        let tags: Vec<(&str, &DictionaryArray<Int32Type>, &StringArray)> = columns
            .iter()
            .map(|(name, column)| {
                let column = column.as_dictionary::<Int32Type>();
                (name.as_str(), column, column.values().as_string::<i32>())
            })
            .collect();
        let mut ids_by_keys: HashMap<Box<[i32]>, u64, BuildHasherDefault<KeyHasher>> =
            HashMap::default();
        let mut keys: Vec<i32> = Vec::with_capacity(tags.len());
        let mut buffer = Vec::new();
        let mut seen = SeriesIdSet::default();
        // The tags a row has: NULL or empty values mean it lacks the tag.
        let present = |row: usize| {
            tags.iter()
                .filter(move |(_, column, _)| column.is_valid(row))
                .map(move |(name, column, values)| {
                    (*name, values.value(column.keys().value(row) as usize))
                })
                .filter(|(_, value)| !value.is_empty())
        };
        // The first row of each series in the batch.
        let mut first_rows = Vec::new();
        let mut ids = Vec::with_capacity(self.time.len());
        for row in 0..self.time.len() {
            keys.clear();
            // -1: the row has no value for the tag.
            keys.extend(tags.iter().map(|(_, column, _)| {
                if column.is_valid(row) {
                    column.keys().value(row)
                } else {
                    -1
                }
            }));
            if let Some(&id) = ids_by_keys.get(keys.as_slice()) {
                ids.push(id);
                continue;
            }
            encode_canonical(measurement, present(row), &mut buffer);
            let id = series_id_of_canonical(&buffer);
            if seen.insert(id) {
                first_rows.push((id, row));
            }
            ids_by_keys.insert(keys.clone().into_boxed_slice(), id);
            ids.push(id);
        }
        let new_series = new_series(db, measurement, first_rows, present);
        (UInt64Array::from(ids), new_series)
    }

    /// The fact-table chunk for `schema`, or the first column whose type
    /// conflicts with the table; plus the new series the rows use.
    pub(crate) fn into_chunk(
        self,
        schema: &TableSchema,
        measurement: &str,
        db: &Database,
    ) -> Result<(RecordBatch, Vec<(u64, SeriesKey)>)> {
        let mut columns = Vec::with_capacity(self.fields.len());
        for (name, ty, array) in &self.fields {
            match schema.field(name) {
                Some((position, stored)) if stored == *ty => {
                    columns.push((position, Arc::clone(array)))
                }
                Some((_, stored)) => {
                    return Err(invalid(
                        name,
                        format!("is {ty} here but the column stores {stored}"),
                    ))
                }
                None => return Err(invalid(name, "column is missing from the table")),
            }
        }
        columns.sort_by_key(|(position, _)| *position);
        let (series_ids, new_series) = self.series_ids(measurement, db);
        let present: Vec<usize> = columns.iter().map(|(position, _)| *position).collect();
        let mut arrays: Vec<ArrayRef> = vec![
            Arc::new(self.time.with_timezone("UTC")),
            Arc::new(series_ids),
        ];
        arrays.extend(columns.into_iter().map(|(_, array)| array));
        let chunk = RecordBatch::try_new(schema.arrow_schema(&present), arrays)
            .map_err(|e| invalid("*", e.to_string()))?;
        Ok((chunk, new_series))
    }
}

/// Checks tags given per series against the batch (`rows` rows, `fields`
/// its field columns): the counts add up, no key is `time`, a field's name
/// or twice in a series. Each series' tags sorted by key, as the series id
/// hashes them (borrowed when they already were, as remote write sends
/// them).
fn series_tags<'a>(
    tags: &'a [(&'a str, &'a str)],
    counts: &[(usize, usize)],
    rows: usize,
    fields: &[(String, FieldType, ArrayRef)],
) -> Result<Cow<'a, [(&'a str, &'a str)]>> {
    let (tag_total, row_total) = counts
        .iter()
        .fold((0usize, 0usize), |(t, r), &(tags, rows)| {
            (t.saturating_add(tags), r.saturating_add(rows))
        });
    if tag_total != tags.len() || row_total != rows {
        return Err(invalid(
            "*",
            format!(
                "the series give {tag_total} tags and {row_total} rows; \
                 the batch has {} tags and {rows} rows",
                tags.len()
            ),
        ));
    }
    if let Some((key, _)) = tags
        .iter()
        .find(|(key, _)| *key == "time" || fields.iter().any(|(name, _, _)| name == key))
    {
        return Err(invalid(key, "is both a tag key and a column of the batch"));
    }
    let sorted = |tags: &[(&str, &str)]| tags.windows(2).all(|pair| pair[0].0 < pair[1].0);
    if per_series(tags, counts).all(|(tags, _)| sorted(tags)) {
        return Ok(Cow::Borrowed(tags));
    }
    let mut owned = tags.to_vec();
    let mut start = 0;
    for &(count, _) in counts {
        let series = &mut owned[start..start + count];
        series.sort_unstable_by(|a, b| a.0.cmp(b.0));
        if let Some(pair) = series.windows(2).find(|pair| pair[0].0 == pair[1].0) {
            return Err(invalid(pair[0].0, "named twice in one series' tags"));
        }
        start += count;
    }
    Ok(Cow::Owned(owned))
}

/// Each series' tags and row count, from tags given per series.
fn per_series<'t, 's>(
    tags: &'t [(&'s str, &'s str)],
    counts: &'t [(usize, usize)],
) -> impl Iterator<Item = (&'t [(&'s str, &'s str)], usize)> {
    counts.iter().scan(0, move |start, &(count, rows)| {
        let series = &tags[*start..*start + count];
        *start += count;
        Some((series, rows))
    })
}

/// The tags a series has: an empty value means it lacks the tag.
fn present<'t>(tags: &'t [(&'t str, &'t str)]) -> impl Iterator<Item = (&'t str, &'t str)> {
    tags.iter().copied().filter(|(_, value)| !value.is_empty())
}

/// The new series among `firsts` (each series of a batch once: its id and
/// where its tags are, spelled out by `tags_of`), as keys. One lock for
/// the whole batch tells them from known ones (a lock per series contended
/// with the other writers), and only the new ones are spelled out.
fn new_series<'t, T, I>(
    db: &Database,
    measurement: &str,
    firsts: Vec<(u64, T)>,
    tags_of: impl Fn(T) -> I,
) -> Vec<(u64, SeriesKey)>
where
    I: Iterator<Item = (&'t str, &'t str)>,
{
    let known = db.series.known_mask(firsts.iter().map(|(id, _)| *id));
    firsts
        .into_iter()
        .zip(known)
        .filter(|(_, known)| !known)
        .map(|((id, at), _)| {
            let tags = tags_of(at)
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            let key = SeriesKey {
                measurement: measurement.to_owned(),
                tags,
            };
            (id, key)
        })
        .collect()
}

/// Hashes tuples of dictionary keys for the per-batch series cache: a
/// multiply-rotate mix, a few cycles per key (the keys are small integers
/// from one batch, not attacker-chosen table keys that need SipHash).
#[derive(Debug, Default, Clone, Copy)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            self.write_u64(u64::from_le_bytes(word.try_into().expect("8 bytes")));
        }
        for &b in words.remainder() {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = (self.0.rotate_left(5) ^ value).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_i32(&mut self, value: i32) {
        self.write_u64(value as u32 as u64);
    }

    fn write_usize(&mut self, value: usize) {
        self.write_u64(value as u64);
    }
}
