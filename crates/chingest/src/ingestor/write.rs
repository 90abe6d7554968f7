//! Writes and edits of rows, handed to the writer and the edit layer.

use arrow::record_batch::RecordBatch;

use crate::edit::{self, FieldValue, PointFilter, RollupEdit};
use crate::error::Result;
use crate::write::points::Point;
use crate::write::request::{ArrowTable, Durability, WriteOptions, WriteOutcome};
use crate::write::PreparedWrite;

use super::Ingestor;

impl Ingestor {
    /// Writes a line-protocol body into `db` / `rp`. Good lines are stored
    /// even when others are rejected; the outcome lists both.
    ///
    /// Fails as a whole only when nothing can be written — a bad database
    /// or retention policy name, an overload, a full or failing log, a
    /// closed ingestor — and then nothing of the request is stored. (The
    /// one exception is [`Error::NotVisible`]: logged, not yet queryable.)
    ///
    /// The same as [`prepare_lp`](Self::prepare_lp) followed by
    /// [`commit`](Self::commit).
    pub async fn write_lp(
        &self,
        db: &str,
        rp: &str,
        body: &[u8],
        options: &WriteOptions,
    ) -> Result<WriteOutcome> {
        let prepared = self.prepare_lp(db, rp, body, options).await?;
        self.commit(prepared, options.durability).await
    }

    /// The first half of a write: parses `body`, creates the tables and
    /// columns it needs, and builds its rows into Arrow chunks, without
    /// handing them to the batchers yet. Parsing and building run on the
    /// calling task (CPU work); only DDL waits on the engine.
    pub async fn prepare_lp(
        &self,
        db: &str,
        rp: &str,
        body: &[u8],
        options: &WriteOptions,
    ) -> Result<PreparedWrite> {
        self.shared
            .writer
            .open()?
            .prepare_lp(db, rp, body, options)
            .await
    }

    /// Writes typed points into `db` / `rp`: each point is what one line of
    /// line protocol says, taken by the same rules (limits, schema on
    /// write, type conflicts, partial writes) without being written out as
    /// text or parsed. A rejection's `line` is the point's 1-based position.
    /// Fails as a whole only as [`write_lp`](Self::write_lp) does.
    pub async fn write_points(
        &self,
        db: &str,
        rp: &str,
        points: &[Point<'_>],
        options: &WriteOptions,
    ) -> Result<WriteOutcome> {
        let prepared = self.prepare_points(db, rp, points, options).await?;
        self.commit(prepared, options.durability).await
    }

    /// The first half of [`write_points`](Self::write_points), as
    /// [`prepare_lp`](Self::prepare_lp) is of [`write_lp`](Self::write_lp).
    pub async fn prepare_points(
        &self,
        db: &str,
        rp: &str,
        points: &[Point<'_>],
        options: &WriteOptions,
    ) -> Result<PreparedWrite> {
        self.shared
            .writer
            .open()?
            .prepare_points(db, rp, points, options)
            .await
    }

    /// The second half of a write: logs the rows and returns when
    /// `durability` is met.
    pub async fn commit(
        &self,
        prepared: PreparedWrite,
        durability: Durability,
    ) -> Result<WriteOutcome> {
        self.shared
            .writer
            .open()?
            .commit(prepared, durability)
            .await
    }

    /// Writes an Arrow batch for one measurement: a `time` column (a
    /// timestamp of any unit, or Int64 nanoseconds), the tag columns named in
    /// `tag_columns` (strings; NULL or empty means the row lacks the tag), and
    /// fields in every other column (floats, signed and unsigned integers,
    /// strings, booleans, lists of numbers). The batch is taken whole or
    /// refused with the offending column. Returns the rows written.
    pub async fn write_arrow(
        &self,
        db: &str,
        rp: &str,
        measurement: &str,
        batch: &RecordBatch,
        tag_columns: &[&str],
        options: &WriteOptions,
    ) -> Result<usize> {
        let table = ArrowTable::new(measurement, batch, tag_columns);
        self.write_arrow_tables(db, rp, &[table], options).await
    }

    /// Writes Arrow batches for several measurements as one write: one
    /// record in the log, so either every batch is written or none is (a
    /// protocol whose request spans measurements, e.g. samples and their
    /// metadata, is stored whole or not at all). Each batch follows
    /// [`write_arrow`](Self::write_arrow)'s rules; a measurement may appear
    /// once. Returns the rows written.
    pub async fn write_arrow_tables(
        &self,
        db: &str,
        rp: &str,
        tables: &[ArrowTable<'_>],
        options: &WriteOptions,
    ) -> Result<usize> {
        self.shared
            .writer
            .open()?
            .write_arrow_tables(db, rp, tables, options)
            .await
    }

    /// Inserts every row written so far into the engine and waits until
    /// they are committed.
    pub async fn flush(&self) -> Result<()> {
        self.shared.writer.open()?.flush_all().await
    }

    /// Deletes the points of `db` that `filter` matches, in every table in
    /// its scope. Queries stop seeing them at once; the engine removes them
    /// from disk as it merges. Returns how many tables it ran on.
    pub async fn delete(&self, db: &str, filter: &PointFilter) -> Result<usize> {
        let shared = self.shared.open()?;
        let delete = edit::delete(&shared.writer, db, filter);
        edit::keeping_rollups(&shared.downsampler, db, filter, RollupEdit::Delete, delete).await
    }

    /// Drops the series `filter` matches (InfluxQL's `DROP SERIES`, and
    /// `DROP MEASUREMENT` for all of one measurement's): their points in
    /// every table in scope, and their rows in the series table. Writing
    /// one of them again creates it anew. The filter takes no time range.
    pub async fn drop_series(&self, db: &str, filter: &PointFilter) -> Result<usize> {
        let shared = self.shared.open()?;
        let drop = edit::drop_series(&shared.writer, db, filter);
        edit::keeping_rollups(&shared.downsampler, db, filter, RollupEdit::Delete, drop).await
    }

    /// Sets `field` to `value` in the points of `db` that `filter` matches
    /// (a correction). The filter must name the measurement; the value must
    /// fit the field's type. Queries see the new value at once. Returns how
    /// many tables it ran on.
    pub async fn update(
        &self,
        db: &str,
        filter: &PointFilter,
        field: &str,
        value: &FieldValue,
    ) -> Result<usize> {
        let shared = self.shared.open()?;
        let update = edit::update(&shared.writer, db, filter, field, value);
        let on_rollups = RollupEdit::Update(field, value);
        edit::keeping_rollups(&shared.downsampler, db, filter, on_rollups, update).await
    }
}
