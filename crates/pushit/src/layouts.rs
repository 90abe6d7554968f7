//! The same samples stored five ways, as in the seed's schema study: each
//! layout's tables and its Arrow batches, built before any timing starts.
//!
//! A sample is one timestamped point of one series: `tags` tag values and
//! `fields` integer fields. Samples arrive time-major (every series at one
//! timestamp, then the next timestamp), as a collector sends them. Fields
//! are `Nullable(Int64)` in every layout, as in chingest's fact tables, so
//! the layouts differ only in how they store the tags.

use std::borrow::Cow;
use std::sync::Arc;

use chingest::arrow::array::{
    Array, ArrayRef, Int64Array, MapBuilder, RecordBatch, StringArray, StringBuilder,
    TimestampNanosecondArray, UInt64Array,
};
use chingest::arrow::datatypes::{DataType, Field, Schema};
use chingest::layout::names::{quote_ident, quote_literal, TableNames};
use chingest::layout::schema::{FieldType, TableSchema};
use chingest::layout::series::SeriesKey;

use crate::Error;

/// The measurement name every layout's samples belong to.
pub const MEASUREMENT: &str = "samples";

/// How many samples, and how wide each is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Distinct series (tag sets).
    pub series: usize,
    /// Timestamps per series.
    pub timestamps: usize,
    /// Tags per series.
    pub tags: usize,
    /// Integer fields per sample.
    pub fields: usize,
}

impl Shape {
    /// Total samples: series × timestamps.
    pub fn samples(&self) -> usize {
        self.series * self.timestamps
    }

    /// chingest's fact-table schema for these samples: one Int64 column per
    /// field, for `measurement` in `database` and retention policy `rp`.
    pub fn fact_schema(&self, database: &str, rp: &str, measurement: &str) -> TableSchema {
        TableSchema::new(
            TableNames::new(database, rp, measurement),
            self.field_names()
                .into_iter()
                .map(|f| (f, FieldType::Integer))
                .collect(),
        )
    }

    fn tag_names(&self) -> Vec<String> {
        (0..self.tags).map(|k| format!("tag{k}")).collect()
    }

    fn field_names(&self) -> Vec<String> {
        (0..self.fields).map(|f| format!("field{f}")).collect()
    }

    /// Tag `k` of series `s`: the first tag tells every series apart (like
    /// a host name), tag `k > 0` takes `10^k` values (like region, rack, …).
    fn tag_value(&self, s: usize, k: usize) -> String {
        match k {
            0 => format!("host_{s}"),
            k => format!("value{k}_{}", s % 10usize.saturating_pow(k as u32)),
        }
    }
}

/// One way of storing the samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// A String column per tag, sorted by all tags then time.
    Cols,
    /// The tags in one `Map(String, String)`, sorted by time (a Map cannot
    /// be a sort key).
    Map,
    /// chingest's fact table: tags hashed to `series_id`, sorted by
    /// (series_id, time), written straight to the MergeTree.
    SeriesId,
    /// A row per field: (time, series_id, field, value), sorted by
    /// (series_id, field, time).
    SeriesIdLong,
    /// chingest's fact table through its Buffer table; the timed region
    /// ends when the Buffer has written every row to the MergeTree.
    SeriesIdBuffer,
}

/// The tables a layout needs, in one database.
#[derive(Debug, Clone)]
pub struct LayoutTables {
    /// Statements that create the tables (the database must exist).
    pub create: Vec<String>,
    /// The table inserts go to.
    pub insert_into: String,
    /// Statement that writes rows held in memory (by a Buffer table) to
    /// `storage`, if inserts do not put them there already.
    pub flush: Option<String>,
    /// The MergeTree that stores the rows, quoted, for counting them.
    pub storage: String,
    /// The storage table's unquoted name, for `system.parts`.
    pub storage_name: String,
    /// A table with the storage table's columns and `ENGINE = Null`: the
    /// same inserts into it cost only the conversion of Arrow to blocks.
    pub null_sink: String,
}

impl Layout {
    /// Every layout, in the order the seed reports them.
    pub const ALL: [Layout; 5] = [
        Layout::Cols,
        Layout::Map,
        Layout::SeriesId,
        Layout::SeriesIdLong,
        Layout::SeriesIdBuffer,
    ];

    /// The layout's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Layout::Cols => "cols",
            Layout::Map => "map",
            Layout::SeriesId => "series_id",
            Layout::SeriesIdLong => "series_id + long",
            Layout::SeriesIdBuffer => "series_id (Buffer)",
        }
    }

    /// Rows stored per sample.
    pub fn rows_per_sample(self, shape: &Shape) -> usize {
        match self {
            Layout::SeriesIdLong => shape.fields,
            _ => 1,
        }
    }

    /// The layout's tables in the (unquoted, plain) database `database`.
    pub fn tables(self, database: &str, shape: &Shape) -> LayoutTables {
        let fields: String = shape
            .field_names()
            .iter()
            .map(|f| format!(", {f} Nullable(Int64)"))
            .collect();
        let own = |name: &str, columns: String, order_by: &str| {
            let storage = format!("{database}.{name}");
            LayoutTables {
                create: vec![
                    format!(
                        "CREATE TABLE {storage} (time DateTime64(9, 'UTC'){columns}) \
                         ENGINE = MergeTree ORDER BY ({order_by})"
                    ),
                    format!("CREATE TABLE {storage}_null AS {storage} ENGINE = Null"),
                ],
                insert_into: storage.clone(),
                flush: None,
                null_sink: format!("{storage}_null"),
                storage,
                storage_name: name.to_owned(),
            }
        };
        match self {
            Layout::Cols => {
                let tags = shape.tag_names();
                let columns: String = tags.iter().map(|t| format!(", {t} String")).collect();
                own("cols", columns + &fields, &(tags.join(", ") + ", time"))
            }
            Layout::Map => own(
                "map",
                ", tags Map(String, String)".to_owned() + &fields,
                "time",
            ),
            Layout::SeriesIdLong => own(
                "long",
                ", series_id UInt64, field LowCardinality(String), value Int64".to_owned(),
                "series_id, field, time",
            ),
            Layout::SeriesId | Layout::SeriesIdBuffer => LayoutTables::chingest(
                &shape.fact_schema(database, "autogen", MEASUREMENT),
                self == Layout::SeriesIdBuffer,
            ),
        }
    }

    /// All samples of `shape` as this layout's batches of `batch_samples`
    /// samples each (the long layout's batches have a row per field).
    pub fn batches(self, shape: &Shape, batch_samples: usize) -> Result<Vec<RecordBatch>, Error> {
        let samples = Samples::new(shape);
        let batch_samples = batch_samples.max(1);
        let mut values = tsbs::SplitMix(7);
        (0..shape.samples())
            .step_by(batch_samples)
            .map(|start| {
                let end = (start + batch_samples).min(shape.samples());
                samples.batch(self, start..end, &mut values)
            })
            .collect()
    }
}

/// chingest's own DDL for the fact table of `schema` (no TTL).
pub fn chingest_tables(schema: &TableSchema) -> Vec<String> {
    vec![chingest::layout::schema::create_table_sql(
        schema,
        0,
        false,
        chingest::DuplicatePolicy::Append,
        None,
    )]
}

/// A Buffer table in front of `schema`'s fact table, with the thresholds
/// chingest's tables had before its write-ahead log made large inserts (1–5
/// s, 100k–1M rows, 16–256 MiB): its quoted name and its DDL.
pub fn buffer_table(schema: &TableSchema) -> (String, String) {
    let names = &schema.names;
    let name = format!(
        "{}.{}",
        names.database,
        quote_ident(&format!("{}.buffer", names.storage_name))
    );
    let sql = format!(
        "CREATE TABLE {name} AS {} ENGINE = Buffer({}, {}, 1, 1, 5, 100000, 1000000, {}, {})",
        names.storage_table,
        quote_literal(&names.database_name),
        quote_literal(&names.storage_name),
        16 << 20,
        256 << 20,
    );
    (name, sql)
}

impl LayoutTables {
    /// chingest's fact table for `schema`, with inserts going through a
    /// Buffer table in front of it when `buffered` (and the Buffer flushed
    /// to end a run), straight to the MergeTree otherwise.
    pub fn chingest(schema: &TableSchema, buffered: bool) -> LayoutTables {
        let names = &schema.names;
        let mut create = chingest_tables(schema);
        let null_sink = format!(
            "{}.{}",
            names.database,
            quote_ident(&format!("{}.null", names.storage_name))
        );
        create.push(format!(
            "CREATE TABLE {null_sink} AS {} ENGINE = Null",
            names.storage_table
        ));
        let mut insert_into = names.storage_table.clone();
        let mut flush = None;
        if buffered {
            let (buffer, sql) = buffer_table(schema);
            create.push(sql);
            flush = Some(format!("OPTIMIZE TABLE {buffer}"));
            insert_into = buffer;
        }
        LayoutTables {
            create,
            insert_into,
            flush,
            storage: names.storage_table.clone(),
            storage_name: names.storage_name.clone(),
            null_sink,
        }
    }
}

/// Per-series data shared by every batch: tag values and series ids.
struct Samples {
    shape: Shape,
    tag_names: Vec<String>,
    field_names: Vec<String>,
    tag_values: Vec<Vec<String>>,
    series_ids: Vec<u64>,
}

impl Samples {
    fn new(shape: &Shape) -> Samples {
        let tag_names = shape.tag_names();
        let tag_values: Vec<Vec<String>> = (0..shape.series)
            .map(|s| (0..shape.tags).map(|k| shape.tag_value(s, k)).collect())
            .collect();
        let series_ids = tag_values
            .iter()
            .map(|values| {
                let tags = tag_names
                    .iter()
                    .zip(values)
                    .map(|(k, v)| (Cow::from(k.as_str()), Cow::from(v.as_str())));
                SeriesKey::new(MEASUREMENT, tags)
                    .expect("generated tag keys are distinct")
                    .series_id()
            })
            .collect();
        Samples {
            shape: *shape,
            tag_names,
            field_names: shape.field_names(),
            tag_values,
            series_ids,
        }
    }

    /// Samples `range` (time-major) as one batch of `layout`. Field values
    /// are drawn from `values` in sample order, so every layout stores the
    /// same numbers.
    fn batch(
        &self,
        layout: Layout,
        range: std::ops::Range<usize>,
        values: &mut tsbs::SplitMix,
    ) -> Result<RecordBatch, Error> {
        let series = self.shape.series;
        let n = range.len();
        let series_of: Vec<usize> = range.clone().map(|i| i % series).collect();
        let times: Vec<i64> = range
            .map(|i| tsbs::START_NS + (i / series) as i64 * tsbs::INTERVAL_NS)
            .collect();
        let mut field_values = vec![Vec::with_capacity(n); self.shape.fields];
        for _ in 0..n {
            for column in &mut field_values {
                column.push(values.below(100) as i64);
            }
        }

        let mut schema = vec![Field::new(
            "time",
            chingest::layout::schema::time_type(),
            false,
        )];
        let mut columns: Vec<ArrayRef> = Vec::new();
        let time_column = |times: Vec<i64>| -> ArrayRef {
            Arc::new(TimestampNanosecondArray::from(times).with_timezone("UTC"))
        };
        if layout == Layout::SeriesIdLong {
            let fields = self.shape.fields;
            columns.push(time_column(
                times
                    .iter()
                    .flat_map(|&t| std::iter::repeat_n(t, fields))
                    .collect(),
            ));
            schema.push(Field::new("series_id", DataType::UInt64, false));
            columns.push(Arc::new(UInt64Array::from_iter_values(
                series_of
                    .iter()
                    .flat_map(|&s| std::iter::repeat_n(self.series_ids[s], fields)),
            )));
            schema.push(Field::new("field", DataType::Utf8, false));
            columns.push(Arc::new(StringArray::from_iter_values(
                self.field_names.iter().cycle().take(n * fields),
            )));
            schema.push(Field::new("value", DataType::Int64, false));
            columns.push(Arc::new(Int64Array::from_iter_values(
                (0..n).flat_map(|i| field_values.iter().map(move |column| column[i])),
            )));
        } else {
            columns.push(time_column(times));
            match layout {
                Layout::Cols => {
                    for (k, name) in self.tag_names.iter().enumerate() {
                        schema.push(Field::new(name, DataType::Utf8, false));
                        columns.push(Arc::new(StringArray::from_iter_values(
                            series_of.iter().map(|&s| &self.tag_values[s][k]),
                        )));
                    }
                }
                Layout::Map => {
                    let mut map = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
                    for &s in &series_of {
                        for (name, value) in self.tag_names.iter().zip(&self.tag_values[s]) {
                            map.keys().append_value(name);
                            map.values().append_value(value);
                        }
                        map.append(true).map_err(|e| Error::Data(e.to_string()))?;
                    }
                    let map = map.finish();
                    schema.push(Field::new("tags", Array::data_type(&map).clone(), false));
                    columns.push(Arc::new(map));
                }
                _ => {
                    schema.push(Field::new("series_id", DataType::UInt64, false));
                    columns.push(Arc::new(UInt64Array::from_iter_values(
                        series_of.iter().map(|&s| self.series_ids[s]),
                    )));
                }
            }
            for (name, column) in self.field_names.iter().zip(field_values) {
                schema.push(Field::new(name, DataType::Int64, true));
                columns.push(Arc::new(Int64Array::from(column)));
            }
        }
        RecordBatch::try_new(Arc::new(Schema::new(schema)), columns)
            .map_err(|e| Error::Data(e.to_string()))
    }
}
