//! The raw-engine baseline shared by the benches: TSBS rows as a pre-built
//! RecordBatch of the fact table's exact schema, inserted through chdb-rust
//! directly, with none of chingest's code in the way.

use std::sync::Arc;

use chdb_rust::connection::Connection;
use chdb_rust::format::OutputFormat;
use chingest::arrow::array::{
    ArrayRef, Int64Builder, RecordBatch, TimestampNanosecondArray, UInt64Array,
};
use chingest::arrow::datatypes::{DataType, Field, Schema, TimeUnit};

/// Creates `table` with the fact-table schema of TSBS cpu rows.
pub(crate) fn create_table(conn: &Connection, table: &str) {
    let fields: String = tsbs::FIELDS
        .iter()
        .map(|f| format!(", {f} Nullable(Int64)"))
        .collect();
    conn.query(
        &format!(
            "CREATE TABLE {table} (time DateTime64(9, 'UTC'), series_id UInt64{fields}) \
             ENGINE = MergeTree ORDER BY (series_id, time)"
        ),
        OutputFormat::Null,
    )
    .unwrap();
}

/// The rows of `body` as the fact table stores them.
pub(crate) fn prebuilt_batch(body: &str) -> RecordBatch {
    let mut time = Vec::new();
    let mut series = Vec::new();
    let mut fields: Vec<Int64Builder> = tsbs::FIELDS.iter().map(|_| Int64Builder::new()).collect();
    let mut parser = lineproto::Parser::new(body.as_bytes(), lineproto::ParseOptions::default());
    let mut line = lineproto::Line::default();
    while let Some(result) = parser.next_into(&mut line) {
        result.unwrap();
        time.push(line.timestamp);
        series.push(chingest::series::series_id_of_canonical(
            line.series_key.as_bytes(),
        ));
        for (builder, (_, value)) in fields.iter_mut().zip(&line.fields) {
            let lineproto::FieldValue::Integer(v) = value else {
                panic!("integer fields")
            };
            builder.append_value(*v);
        }
    }
    let mut schema = vec![
        Field::new(
            "time",
            DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
            false,
        ),
        Field::new("series_id", DataType::UInt64, false),
    ];
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(TimestampNanosecondArray::from(time).with_timezone("UTC")),
        Arc::new(UInt64Array::from(series)),
    ];
    for (name, mut builder) in tsbs::FIELDS.iter().zip(fields) {
        schema.push(Field::new(*name, DataType::Int64, true));
        columns.push(Arc::new(builder.finish()));
    }
    RecordBatch::try_new(Arc::new(Schema::new(schema)), columns).unwrap()
}
