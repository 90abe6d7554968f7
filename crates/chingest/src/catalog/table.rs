//! One fact table as the catalog knows it: its names and its current
//! schema, which only grows.

use std::sync::{Arc, RwLock};

use crate::config::DuplicatePolicy;
use crate::layout::schema::TableSchema;
use crate::wal::TableRef;

/// One fact table: its names and its current schema.
#[derive(Debug)]
pub(crate) struct Table {
    /// The names writes use for it, which the log records.
    pub(crate) id: TableRef,
    pub(super) schema: RwLock<Arc<TableSchema>>,
    /// What the table keeps of points written again (fixed at creation).
    pub(crate) duplicates: DuplicatePolicy,
}

impl Table {
    pub(super) fn new(
        database: &str,
        rp: &str,
        measurement: &str,
        schema: TableSchema,
        duplicates: DuplicatePolicy,
    ) -> Self {
        Table {
            id: TableRef {
                database: database.to_owned(),
                retention_policy: rp.to_owned(),
                measurement: measurement.to_owned(),
            },
            schema: RwLock::new(Arc::new(schema)),
            duplicates,
        }
    }

    /// The current schema (a snapshot; later schemas only add fields).
    pub(crate) fn schema(&self) -> Arc<TableSchema> {
        Arc::clone(&self.schema.read().unwrap())
    }
}
