//! Arrow data handed to the engine: a batch registered under a
//! process-unique name, read by one statement (an insert, or the fill of a
//! snapshot's Memory table), then unregistered.

use std::sync::atomic::{AtomicU64, Ordering};

use arrow::array::StructArray;
use arrow::datatypes::{DataType, TimeUnit};
use arrow::ffi::to_ffi;
use arrow::record_batch::RecordBatch;
use chdb_rust::arrow_stream::{ArrowArray, ArrowSchema};
use chdb_rust::connection::Connection;

use crate::engine::statements::execute;
use crate::error::{Error, Result};
use crate::layout::names::{column_list, dedup_setting, quote_ident, quote_literal};

/// Names under which Arrow data is registered with the engine. Registrations
/// are engine-global and a taken name cannot be registered again, so every
/// insert gets a name no other insert in this process uses.
static REGISTRATION_SEQ: AtomicU64 = AtomicU64::new(0);

/// Inserts `batch` into `table` (already quoted) with one `INSERT … SELECT
/// FROM ArrowStream` statement, matching columns by name. Returns the rows
/// inserted.
///
/// With a `dedup_token`, a MergeTree with a deduplication window stores the
/// rows once however often the same insert is repeated with that token
/// (replay after a crash). The batch is registered as one Arrow array
/// (schema + array), not as a stream: the engine reads it in one go.
pub(super) fn insert_batch(
    conn: &Connection,
    table: &str,
    batch: RecordBatch,
    dedup_token: Option<&str>,
) -> Result<u64> {
    let rows = batch.num_rows();
    if rows == 0 {
        return Ok(0);
    }
    let columns = column_list(&batch.schema());
    let settings = dedup_token.map_or(String::new(), |token| {
        format!(" SETTINGS {}", dedup_setting(token))
    });
    with_registered(conn, batch, |name| {
        let sql = format!(
            "INSERT INTO {table} ({columns}){settings} SELECT * FROM ArrowStream({})",
            quote_literal(name)
        );
        execute(conn, &sql)
    })?;
    Ok(rows as u64)
}

/// Registers `batch` with the engine as one Arrow array under a
/// process-unique name, runs `read(name)` — one statement reading
/// `ArrowStream(name)` — and unregisters it whether that failed or not (a
/// registration is consumed by the first read, failed or not).
fn with_registered<T>(
    conn: &Connection,
    batch: RecordBatch,
    read: impl FnOnce(&str) -> Result<T>,
) -> Result<T> {
    let name = format!(
        "chingest_{}_{}",
        std::process::id(),
        REGISTRATION_SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let (mut ffi_array, mut ffi_schema) =
        to_ffi(&StructArray::from(batch).into()).map_err(|e| Error::Engine(e.to_string()))?;
    // SAFETY: both structs outlive the registration: it is dropped below,
    // before this frame (and the structs, which release the data) ends, and
    // the engine does not take ownership of registered data.
    #[allow(unsafe_code)]
    let (schema, array) = unsafe {
        (
            ArrowSchema::from_raw(&mut ffi_schema),
            ArrowArray::from_raw(&mut ffi_array),
        )
    };
    conn.register_arrow_array(&name, &schema, &array)?;
    let result = read(&name);
    let unregistered = conn.unregister_arrow_table(&name);
    let result = result?;
    unregistered?;
    Ok(result)
}

/// Creates `table` (quoted) in a Memory database with `batch`'s columns
/// and inserts `batch` into it (a last-value snapshot).
pub(crate) fn create_memory_table(
    conn: &Connection,
    table: &str,
    batch: RecordBatch,
) -> Result<()> {
    execute(
        conn,
        &format!(
            "CREATE TABLE {table} ({}) ENGINE = Memory",
            column_defs(&batch)?
        ),
    )?;
    with_registered(conn, batch, |stream| {
        let insert = format!(
            "INSERT INTO {table} SELECT * FROM ArrowStream({})",
            quote_literal(stream)
        );
        execute(conn, &insert)
    })
}

/// The column definitions of a table holding `batch` (a last-value
/// snapshot: ids, times, tags and field values).
fn column_defs(batch: &RecordBatch) -> Result<String> {
    let mut defs = Vec::new();
    for field in batch.schema().fields() {
        let base = match field.data_type() {
            DataType::UInt64 => "UInt64",
            DataType::Int64 => "Int64",
            DataType::Float64 => "Float64",
            DataType::Boolean => "Bool",
            DataType::Utf8 => "String",
            DataType::Timestamp(TimeUnit::Nanosecond, _) => "DateTime64(9, 'UTC')",
            other => return Err(Error::Engine(format!("a snapshot column of type {other}"))),
        };
        let ty = match field.is_nullable() {
            true => format!("Nullable({base})"),
            false => base.to_owned(),
        };
        defs.push(format!("{} {ty}", quote_ident(field.name())));
    }
    Ok(defs.join(", "))
}
