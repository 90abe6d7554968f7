//! The raw engine: chdb-rust connections with nothing of chingest's in the
//! way, plus the TSBS fact table and batches the end-to-end arms compare
//! against.

use std::path::Path;
use std::sync::Arc;

use chdb_rust::connection::Connection;
use chdb_rust::format::OutputFormat;
use chingest::arrow::array::RecordBatch;
use chingest::chunk::ChunkBuilder;
use chingest::layout::names::TableNames;
use chingest::layout::schema::{FieldType, TableSchema};
use chingest::layout::series::SeriesKey;

use crate::Error;

/// One connection to the process-wide engine. A connection runs one
/// statement at a time; open one per thread to insert in parallel.
pub struct RawConnection {
    conn: Connection,
}

impl std::fmt::Debug for RawConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawConnection").finish_non_exhaustive()
    }
}

impl RawConnection {
    /// Opens a connection to the engine whose data lives in `data_dir`
    /// (booting the engine on the first call in the process).
    pub fn open(data_dir: &Path) -> Result<RawConnection, Error> {
        let path = format!("--path={}", data_dir.display());
        let conn = Connection::open(&[&path]).map_err(engine_error)?;
        Ok(RawConnection { conn })
    }

    /// Runs statements whose output is not needed, in order.
    pub fn execute(&self, statements: &[&str]) -> Result<(), Error> {
        for sql in statements {
            self.conn
                .query(sql, OutputFormat::Null)
                .map_err(engine_error)?;
        }
        Ok(())
    }

    /// Runs a query; its TabSeparated output.
    pub fn query(&self, sql: &str) -> Result<Vec<u8>, Error> {
        let result = self
            .conn
            .query(sql, OutputFormat::TabSeparated)
            .map_err(engine_error)?;
        Ok(result.data_ref().to_vec())
    }

    /// Runs a query returning one unsigned number.
    pub fn scalar(&self, sql: &str) -> Result<u64, Error> {
        let result = self
            .conn
            .query(sql, OutputFormat::TabSeparated)
            .map_err(engine_error)?;
        let text = result.data_utf8_lossy();
        text.trim()
            .parse()
            .map_err(|_| Error::Engine(format!("`{sql}` returned {text:?}, not a number")))
    }

    /// Inserts `batch` into `table` through the engine's Arrow path (one
    /// statement, one part).
    pub fn insert(&self, table: &str, batch: RecordBatch) -> Result<(), Error> {
        chdb_rust::arrow_insert::insert_record_batch_direct(
            &self.conn,
            table,
            batch,
            chdb_rust::InsertOptions::default(),
        )
        .map_err(engine_error)
    }

    /// Rows in `table`.
    pub fn count(&self, table: &str) -> Result<u64, Error> {
        self.scalar(&format!("SELECT count() FROM {table}"))
    }

    /// Active parts and their bytes on disk, of the table `name` in database
    /// `database` (both unquoted).
    pub fn parts(&self, database: &str, name: &str) -> Result<(u64, u64), Error> {
        let filter = format!(
            "FROM system.parts WHERE active AND database = {} AND table = {}",
            chingest::layout::names::quote_literal(database),
            chingest::layout::names::quote_literal(name)
        );
        Ok((
            self.scalar(&format!("SELECT count() {filter}"))?,
            self.scalar(&format!("SELECT sum(bytes_on_disk) {filter}"))?,
        ))
    }
}

fn engine_error(e: chdb_rust::error::Error) -> Error {
    Error::Engine(e.to_string())
}

/// The schema chingest gives TSBS cpu rows in `database` (measurement
/// `cpu`, retention policy `autogen`): time, series_id, and one
/// Nullable(Int64) per field.
pub fn tsbs_fact_schema(database: &str) -> TableSchema {
    TableSchema::new(
        TableNames::new(database, "autogen", "cpu"),
        tsbs::FIELDS
            .iter()
            .map(|f| (f.to_string(), FieldType::Integer))
            .collect(),
    )
}

/// The rows of TSBS cpu line protocol `body` as the fact table stores them,
/// built by chingest's own [`ChunkBuilder`] (outside any timed region).
pub fn tsbs_fact_batch(body: &str) -> Result<RecordBatch, Error> {
    let mut chunk = ChunkBuilder::new(Arc::new(tsbs_fact_schema("pushit")));
    let mut parser = lineproto::Parser::new(body.as_bytes(), lineproto::ParseOptions::default());
    let mut line = lineproto::Line::default();
    while let Some(result) = parser.next_into(&mut line) {
        result.map_err(|e| Error::Data(e.to_string()))?;
        if line.fields.len() != tsbs::FIELDS.len()
            || !line
                .fields
                .iter()
                .all(|(_, v)| matches!(v, lineproto::FieldValue::Integer(_)))
        {
            return Err(Error::Data("not a TSBS cpu line".into()));
        }
        let series_id = SeriesKey::new(
            line.measurement.unescape(),
            line.tags.iter().map(|(k, v)| (k.unescape(), v.unescape())),
        )
        .map_err(|e| Error::Data(format!("duplicate tag {}", e.0)))?
        .series_id();
        chunk.push_row(
            line.timestamp,
            series_id,
            line.fields.iter().map(|(_, v)| v).enumerate(),
        );
    }
    Ok(chunk.finish())
}
