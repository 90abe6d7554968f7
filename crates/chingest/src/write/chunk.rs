//! Building fact rows straight into Arrow columns.
//!
//! A write request gathers its rows for one table in a [`ChunkBuilder`]: a
//! time column, a series_id column and one builder per field that occurs,
//! padded with NULLs where a row lacks the field. No row structs sit in
//! between. The finished chunk is a `RecordBatch` holding only the fields
//! it saw; [`merge`] makes the chunks of one flush one batch.

use std::sync::Arc;

use arrow::array::{
    new_null_array, ArrayBuilder, ArrayRef, BooleanBuilder, Float64Builder, Int64Builder,
    StringBuilder, TimestampNanosecondArray, UInt64Array, UInt64Builder,
};
use arrow::record_batch::RecordBatch;
use lineproto::FieldValue;

use crate::layout::schema::{FieldType, TableSchema};

/// A column being built for one field.
#[derive(Debug)]
enum ColumnBuilder {
    Float(Float64Builder),
    Integer(Int64Builder),
    UInteger(UInt64Builder),
    String(StringBuilder),
    Boolean(BooleanBuilder),
}

impl ColumnBuilder {
    /// A builder with room for `rows` values (string bytes still grow).
    fn with_capacity(ty: FieldType, rows: usize) -> Self {
        match ty {
            FieldType::Float => ColumnBuilder::Float(Float64Builder::with_capacity(rows)),
            FieldType::Integer => ColumnBuilder::Integer(Int64Builder::with_capacity(rows)),
            FieldType::UInteger => ColumnBuilder::UInteger(UInt64Builder::with_capacity(rows)),
            FieldType::String => ColumnBuilder::String(StringBuilder::with_capacity(rows, 0)),
            FieldType::Boolean => ColumnBuilder::Boolean(BooleanBuilder::with_capacity(rows)),
            // lp.rs refuses a line value for an array column as a type
            // conflict before it reaches a builder.
            FieldType::FloatArray | FieldType::IntegerArray | FieldType::UIntegerArray => {
                unreachable!("line protocol has no array values")
            }
        }
    }

    fn builder(&mut self) -> &mut dyn ArrayBuilder {
        match self {
            ColumnBuilder::Float(b) => b,
            ColumnBuilder::Integer(b) => b,
            ColumnBuilder::UInteger(b) => b,
            ColumnBuilder::String(b) => b,
            ColumnBuilder::Boolean(b) => b,
        }
    }

    /// Appends `missing` NULLs.
    fn append_nulls(&mut self, missing: usize) {
        match self {
            ColumnBuilder::Float(b) => b.append_nulls(missing),
            ColumnBuilder::Integer(b) => b.append_nulls(missing),
            ColumnBuilder::UInteger(b) => b.append_nulls(missing),
            ColumnBuilder::String(b) => (0..missing).for_each(|_| b.append_null()),
            ColumnBuilder::Boolean(b) => b.append_nulls(missing),
        }
    }

    /// Appends a value whose type the caller has checked against the column.
    fn append(&mut self, value: &FieldValue<'_>) {
        match (self, value) {
            (ColumnBuilder::Float(b), FieldValue::Float(v)) => b.append_value(*v),
            (ColumnBuilder::Integer(b), FieldValue::Integer(v)) => b.append_value(*v),
            (ColumnBuilder::UInteger(b), FieldValue::UInteger(v)) => b.append_value(*v),
            (ColumnBuilder::String(b), FieldValue::String(v)) => b.append_value(v.unescape()),
            (ColumnBuilder::Boolean(b), FieldValue::Boolean(v)) => b.append_value(*v),
            (column, value) => unreachable!("{value:?} appended to {column:?}"),
        }
    }
}

/// A field's builder and how many rows it holds (kept here: asking the
/// builder goes through a virtual call per row).
#[derive(Debug)]
struct Column {
    builder: ColumnBuilder,
    len: usize,
}

impl Column {
    /// Appends NULLs until the column has `rows` entries.
    fn pad_to(&mut self, rows: usize) {
        if self.len < rows {
            self.builder.append_nulls(rows - self.len);
            self.len = rows;
        }
    }
}

/// Rows for one table, built column by column: what a write turns its
/// points into before they are inserted. Public so that embedders and the
/// benchmarks can build fact batches for [`Ingestor::write_arrow`] the way
/// chingest does.
///
/// [`Ingestor::write_arrow`]: crate::Ingestor::write_arrow
#[derive(Debug)]
pub struct ChunkBuilder {
    schema: Arc<TableSchema>,
    time: Vec<i64>,
    series_id: Vec<u64>,
    /// One slot per field of `schema`, filled when the field first occurs.
    columns: Vec<Option<Column>>,
    /// Rows each column makes room for when it is created.
    capacity: usize,
}

impl ChunkBuilder {
    /// An empty chunk for a table with `schema`.
    pub fn new(schema: Arc<TableSchema>) -> Self {
        Self::with_capacity(schema, 0)
    }

    /// An empty chunk whose columns make room for `rows` rows up front: a
    /// write that knows how many rows it brings builds them without
    /// growing (and copying) each column as it fills.
    pub fn with_capacity(schema: Arc<TableSchema>, rows: usize) -> Self {
        let columns = schema.fields.iter().map(|_| None).collect();
        ChunkBuilder {
            schema,
            time: Vec::with_capacity(rows),
            series_id: Vec::with_capacity(rows),
            columns,
            capacity: rows,
        }
    }

    /// Switches to a newer schema of the same table (one with more fields).
    pub fn upgrade(&mut self, schema: Arc<TableSchema>) {
        self.columns.resize_with(schema.fields.len(), || None);
        self.schema = schema;
    }

    /// Rows appended so far.
    pub fn rows(&self) -> usize {
        self.time.len()
    }

    /// Appends one row. `fields` are (position in `schema.fields`, value)
    /// pairs whose types match the schema, each position at most once.
    ///
    /// # Panics
    ///
    /// If a position is out of range or a value's type is not its column's.
    pub fn push_row<'v>(
        &mut self,
        time: i64,
        series_id: u64,
        fields: impl IntoIterator<Item = (usize, &'v FieldValue<'v>)>,
    ) {
        let row = self.time.len();
        for (position, value) in fields {
            let ty = self.schema.fields[position].1;
            let capacity = self.capacity;
            let column = self.columns[position].get_or_insert_with(|| Column {
                builder: ColumnBuilder::with_capacity(ty, capacity),
                len: 0,
            });
            column.pad_to(row);
            column.builder.append(value);
            column.len += 1;
        }
        self.time.push(time);
        self.series_id.push(series_id);
    }

    /// The rows as a batch of `time`, `series_id` and the fields that occurred.
    pub fn finish(mut self) -> RecordBatch {
        let rows = self.time.len();
        let mut present = Vec::new();
        // Columns grew by doubling or were made room for rows that went
        // elsewhere: they give back what they did not fill, so that the
        // memory budget, which counts what they hold, counts what they take.
        self.time.shrink_to_fit();
        self.series_id.shrink_to_fit();
        let mut arrays: Vec<ArrayRef> = vec![
            Arc::new(
                TimestampNanosecondArray::from(std::mem::take(&mut self.time)).with_timezone("UTC"),
            ),
            Arc::new(UInt64Array::from(std::mem::take(&mut self.series_id))),
        ];
        for (position, column) in self.columns.iter_mut().enumerate() {
            if let Some(column) = column {
                column.pad_to(rows);
                let mut array = column.builder.builder().finish();
                if let Some(array) = Arc::get_mut(&mut array) {
                    array.shrink_to_fit();
                }
                arrays.push(array);
                present.push(position);
            }
        }
        RecordBatch::try_new(self.schema.arrow_schema(&present), arrays)
            .expect("chunk columns match their schema by construction")
    }
}

/// Merges the chunks of one flush into one batch with a common schema: the
/// fields any of them has, in table order, NULL where a chunk lacks one.
///
/// One batch rather than a stream of them: measured on 200k TSBS rows, the
/// engine inserts two 100k-row batches ~25% slower than one 200k-row batch,
/// far more than the copy costs.
pub(crate) fn merge(schema: &TableSchema, chunks: Vec<RecordBatch>) -> RecordBatch {
    let (target, aligned) = align(schema, chunks);
    if aligned.len() == 1 {
        return aligned.into_iter().next().expect("one chunk");
    }
    arrow::compute::concat_batches(&target, &aligned).expect("aligned chunks share one schema")
}

/// Gives `chunks` of one table a common schema (see [`merge`]).
fn align(
    schema: &TableSchema,
    chunks: Vec<RecordBatch>,
) -> (arrow::datatypes::SchemaRef, Vec<RecordBatch>) {
    let present: Vec<usize> = schema
        .fields
        .iter()
        .enumerate()
        .filter(|(_, (name, _))| chunks.iter().any(|c| c.schema().index_of(name).is_ok()))
        .map(|(i, _)| i)
        .collect();
    let target = schema.arrow_schema(&present);
    let aligned = chunks
        .into_iter()
        .map(|chunk| {
            if chunk.schema().fields() == target.fields() {
                return chunk;
            }
            let columns = target
                .fields()
                .iter()
                .map(|field| match chunk.column_by_name(field.name()) {
                    Some(column) => Arc::clone(column),
                    None => new_null_array(field.data_type(), chunk.num_rows()),
                })
                .collect();
            RecordBatch::try_new(Arc::clone(&target), columns)
                .expect("aligned columns match the target schema")
        })
        .collect();
    (target, aligned)
}
