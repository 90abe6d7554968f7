//! Turning one line-protocol request into per-table chunks.
//!
//! The parser's output goes straight into [`ChunkBuilder`]s; nothing is kept
//! per line. Three memos keep known data cheap:
//! - the request's tables by raw measurement text, so the catalog is asked
//!   once per measurement per request;
//! - per table, the raw field keys of the previous line with their column
//!   positions, so lines shaped like their predecessor skip every name lookup;
//! - the database's raw-series-key → series_id map, so a series seen before
//!   costs one hash lookup, not a canonicalization and a hash of its tags.
//!
//! A field repeated on a line keeps its last value, as in InfluxDB (the
//! earlier ones are resolved to [`SUPERSEDED`]); values of another type
//! than the field's column are a type conflict, the earlier ones too.
//!
//! A line that needs a table or column that does not exist yet is deferred:
//! its byte range is kept, the schema change is collected, and once the DDL
//! has run ([`LineBatch::take_schema_needs`]) the deferred lines are parsed
//! again ([`LineBatch::parse_deferred`]). Parsing never waits on the engine.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use lineproto::{Line, ParseOptions, Parser};

use crate::catalog::{Admission, Database, Table};
use crate::config::CardinalityLimits;
use crate::layout::names::{self, NameKind};
use crate::layout::schema::{FieldType, TableSchema};
use crate::layout::series::{raw_key_fingerprint, FingerprintMap, SeriesKey};
use crate::write::chunk::ChunkBuilder;
use crate::write::points::PointLines;
use crate::write::request::{LineRejection, WriteOutcome};

/// Earliest time a `DateTime64(9)` column stores: 1900-01-01T00:00:00Z.
pub(crate) const MIN_TIME_NS: i64 = -2_208_988_800_000_000_000;

/// The column position of a field that a later field of the same name on
/// its line replaces: its value is not stored.
const SUPERSEDED: usize = usize::MAX;

/// The rows of one request destined for one table.
struct TableRows<'b> {
    table: Arc<Table>,
    schema: Arc<TableSchema>,
    chunk: ChunkBuilder,
    /// Raw field keys of the last line whose fields all resolved...
    memo_keys: Vec<&'b str>,
    /// ...and their (column position or [`SUPERSEDED`], column type).
    memo_columns: Vec<(usize, FieldType)>,
}

/// Why a line was not added now.
enum Outcome {
    Added,
    Rejected {
        column: Option<usize>,
        reason: String,
    },
    /// Needs a table or columns that do not exist yet.
    Deferred,
}

fn reject(reason: impl Into<String>) -> Outcome {
    Outcome::Rejected {
        column: None,
        reason: reason.into(),
    }
}

/// Per-line limits of a write (see [`WriteOptions`](crate::WriteOptions)).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LineLimits {
    pub(crate) max_tags: usize,
    pub(crate) max_fields: usize,
    pub(crate) max_name_len: usize,
    pub(crate) cardinality: CardinalityLimits,
}

/// Per-request state of a line-protocol write.
pub(crate) struct LineBatch<'b> {
    db: Arc<Database>,
    rp: &'b str,
    limits: LineLimits,
    tables: Vec<TableRows<'b>>,
    /// Raw measurement → position in `tables`.
    table_index: HashMap<&'b str, usize>,
    /// The last line's raw measurement and its position in `tables`: lines
    /// of one measurement come in runs, and a run skips the hash lookup.
    last_table: Option<(&'b str, usize)>,
    /// Series resolved by this request that the database's map lacked, by
    /// raw-key fingerprint.
    local_ids: FingerprintMap<u64>,
    new_series: Vec<(u64, SeriesKey)>,
    /// The new series admitted under the cardinality limits.
    admission: Admission,
    /// Lines refused by a cardinality limit.
    refused_by_limits: usize,
    /// Chunks of other pieces of the body, taken over by [`absorb`](Self::absorb).
    extra_chunks: Vec<(Arc<Table>, ChunkBuilder)>,
    /// Tables and columns to create, by measurement, in first-seen order.
    needs: Vec<(String, Vec<(String, FieldType)>)>,
    /// Lines to parse again after the DDL: byte range and line number.
    deferred: Vec<(Range<usize>, usize)>,
    /// Typed points to add again after the DDL, by index.
    deferred_points: Vec<usize>,
    outcome: WriteOutcome,
    /// The table whose field memo holds the previous line's field keys, if
    /// any: with [`Line::same_field_keys`] it makes the memo check free.
    memo_owner: Option<usize>,
    /// Physical lines in the piece of the body parsed so far.
    lines_seen: usize,
    /// Whether the piece's last line ran to its end inside a string value.
    ended_in_string: bool,
    /// The text the first table met may make room for all the rows of (see
    /// [`rows_to_make_room_for`]): the piece being parsed; later tables,
    /// and typed points, grow their columns as they fill.
    hint_text: &'b [u8],
    scratch: Vec<(usize, FieldType)>,
}

impl<'b> LineBatch<'b> {
    pub(crate) fn new(db: Arc<Database>, rp: &'b str, limits: LineLimits) -> Self {
        LineBatch {
            db,
            rp,
            limits,
            tables: Vec::new(),
            table_index: HashMap::new(),
            last_table: None,
            local_ids: FingerprintMap::default(),
            new_series: Vec::new(),
            admission: Admission::default(),
            refused_by_limits: 0,
            extra_chunks: Vec::new(),
            needs: Vec::new(),
            deferred: Vec::new(),
            deferred_points: Vec::new(),
            outcome: WriteOutcome::default(),
            memo_owner: None,
            lines_seen: 0,
            ended_in_string: false,
            hint_text: &[],
            scratch: Vec::new(),
        }
    }

    /// Parses `body[piece]` (which starts at a line start), adding each line
    /// or recording why not. Line numbers count from the piece's start; see
    /// [`shift_lines`](Self::shift_lines).
    pub(crate) fn parse(&mut self, body: &'b [u8], piece: Range<usize>, options: ParseOptions) {
        self.hint_text = &body[piece.clone()];
        (self.lines_seen, self.ended_in_string) = self.parse_range(body, piece, 0, options, true);
    }

    /// Physical lines in the piece parsed by [`parse`](Self::parse).
    pub(crate) fn lines_seen(&self) -> usize {
        self.lines_seen
    }

    /// Adds `offset` to every line number recorded so far: the piece this
    /// batch parsed started after `offset` lines of the body.
    pub(crate) fn shift_lines(&mut self, offset: usize) {
        for rejection in &mut self.outcome.rejected {
            rejection.line += offset;
        }
        for (_, line) in &mut self.deferred {
            *line += offset;
        }
    }

    /// Takes over another piece's results (parsed from the same body).
    pub(crate) fn absorb(&mut self, other: LineBatch<'b>) {
        self.outcome.accepted += other.outcome.accepted;
        self.outcome.rejected.extend(other.outcome.rejected);
        self.deferred.extend(other.deferred);
        for (measurement, fields) in other.needs {
            for (field, ty) in fields {
                self.need(&measurement, &field, ty);
            }
        }
        self.new_series.extend(other.new_series);
        self.admission.absorb(other.admission);
        self.refused_by_limits += other.refused_by_limits;
        self.local_ids.extend(other.local_ids);
        for rows in other.tables {
            self.extra_chunks.push((rows.table, rows.chunk));
        }
    }

    /// Whether some lines wait for DDL.
    pub(crate) fn has_deferred(&self) -> bool {
        !self.deferred.is_empty() || !self.deferred_points.is_empty()
    }

    /// The tables and columns deferred lines need, by measurement.
    pub(crate) fn take_schema_needs(&mut self) -> Vec<(String, Vec<(String, FieldType)>)> {
        std::mem::take(&mut self.needs)
    }

    /// Parses the deferred lines again, after the DDL they needed has run.
    pub(crate) fn parse_deferred(&mut self, body: &'b [u8], options: ParseOptions) {
        self.refresh_schemas();
        for (range, line_number) in std::mem::take(&mut self.deferred) {
            self.parse_range(body, range, line_number - 1, options, false);
        }
    }

    /// Takes up the schemas the DDL changed.
    fn refresh_schemas(&mut self) {
        for rows in &mut self.tables {
            rows.schema = rows.table.schema();
            rows.chunk.upgrade(Arc::clone(&rows.schema));
            rows.memo_keys.clear();
        }
    }

    /// Adds typed points as lines (point `i` is line `i + 1`); those that
    /// need DDL wait for [`add_deferred_points`](Self::add_deferred_points).
    pub(crate) fn add_points(&mut self, points: &'b PointLines<'b>) {
        self.add_points_at(points, 0..points.len(), true);
    }

    /// Adds the points [`add_points`](Self::add_points) deferred, once the
    /// DDL they needed has run.
    pub(crate) fn add_deferred_points(&mut self, points: &'b PointLines<'b>) {
        self.refresh_schemas();
        let deferred = std::mem::take(&mut self.deferred_points);
        self.add_points_at(points, deferred, false);
    }

    fn add_points_at(
        &mut self,
        points: &'b PointLines<'b>,
        indices: impl IntoIterator<Item = usize>,
        may_defer: bool,
    ) {
        let db = Arc::clone(&self.db);
        let known_ids = db.series.by_raw_key.read().unwrap();
        self.memo_owner = None;
        let mut line = Line::default();
        for i in indices {
            let outcome = match points.fill(i, &mut line) {
                Ok(()) => self.add(&line, &known_ids, may_defer),
                Err(reason) => reject(reason),
            };
            if self.tally(outcome, i + 1) {
                self.deferred_points.push(i);
            }
        }
    }

    /// Counts an added line or records a rejected one (by its 1-based
    /// number); returns whether the line was deferred instead, which the
    /// caller records in its own terms.
    fn tally(&mut self, outcome: Outcome, line: usize) -> bool {
        match outcome {
            Outcome::Added => self.outcome.accepted += 1,
            Outcome::Rejected { column, reason } => self.outcome.rejected.push(LineRejection {
                line,
                column,
                reason,
            }),
            Outcome::Deferred => return true,
        }
        false
    }

    /// Parses `body[range]`; returns the physical lines it held and whether
    /// its last line ran to its end inside a string value.
    fn parse_range(
        &mut self,
        body: &'b [u8],
        range: Range<usize>,
        line_offset: usize,
        options: ParseOptions,
        may_defer: bool,
    ) -> (usize, bool) {
        let db = Arc::clone(&self.db);
        let known_ids = db.series.by_raw_key.read().unwrap();
        let start = range.start;
        let mut parser = Parser::new(&body[range], options);
        let mut line = Line::default();
        self.memo_owner = None;
        while let Some(parsed) = parser.next_into(&mut line) {
            let line_number = line_offset
                + match &parsed {
                    Ok(()) => line.line_number,
                    Err(err) => err.line_number,
                };
            let outcome = match parsed {
                Ok(()) => self.add(&line, &known_ids, may_defer),
                Err(err) => {
                    self.memo_owner = None;
                    Outcome::Rejected {
                        column: Some(err.column),
                        reason: err.kind.to_string(),
                    }
                }
            };
            if self.tally(outcome, line_number) {
                let local = parser.last_line_range();
                self.deferred
                    .push((start + local.start..start + local.end, line_number));
            }
        }
        (parser.lines_consumed(), parser.ended_in_string())
    }

    /// Position in `tables` of the line's table, or why there is none.
    fn table_for(&mut self, line: &Line<'b>) -> Result<usize, Outcome> {
        let raw = line.measurement.raw();
        if let Some((last, i)) = self.last_table {
            if last == raw {
                return Ok(i);
            }
        }
        if let Some(&i) = self.table_index.get(raw) {
            self.last_table = Some((raw, i));
            return Ok(i);
        }
        let measurement = line.measurement.unescape();
        let Some(table) = self.db.table(self.rp, &measurement) else {
            // Checked before the table is created for it.
            self.check_name_len("measurement", &measurement)?;
            if let Err(err) = names::validate(NameKind::Measurement, &measurement) {
                return Err(reject(err.to_string()));
            }
            return Err(Outcome::Deferred);
        };
        let schema = table.schema();
        let rows = rows_to_make_room_for(std::mem::take(&mut self.hint_text), &schema);
        self.tables.push(TableRows {
            chunk: ChunkBuilder::with_capacity(Arc::clone(&schema), rows),
            table,
            schema,
            memo_keys: Vec::new(),
            memo_columns: Vec::new(),
        });
        let i = self.tables.len() - 1;
        self.table_index.insert(raw, i);
        self.last_table = Some((raw, i));
        Ok(i)
    }

    /// Records that `measurement` needs `field` of type `ty` (first type wins).
    fn need(&mut self, measurement: &str, field: &str, ty: FieldType) {
        let i = match self.needs.iter().position(|(m, _)| m == measurement) {
            Some(i) => i,
            None => {
                self.needs.push((measurement.to_owned(), Vec::new()));
                self.needs.len() - 1
            }
        };
        let fields = &mut self.needs[i].1;
        if !fields.iter().any(|(name, _)| name == field) {
            fields.push((field.to_owned(), ty));
        }
    }

    /// Records the schema a line of a missing table needs.
    fn need_table(&mut self, line: &Line<'b>) -> Outcome {
        let measurement = line.measurement.unescape();
        for (key, value) in &line.fields {
            let name = key.unescape();
            if let Err(outcome) = self.check_name_len("field key", &name) {
                return outcome;
            }
            if let Err(err) = names::validate(NameKind::Field, &name) {
                return reject(err.to_string());
            }
            self.need(&measurement, &name, FieldType::of(value));
        }
        Outcome::Deferred
    }

    fn add(
        &mut self,
        line: &Line<'b>,
        known_ids: &FingerprintMap<u64>,
        may_defer: bool,
    ) -> Outcome {
        let previous_owner = self.memo_owner.take();
        let limits = self.limits;
        if line.tags.len() > limits.max_tags {
            return reject(format!(
                "too many tags: {} (limit {})",
                line.tags.len(),
                limits.max_tags
            ));
        }
        if line.fields.len() > limits.max_fields {
            return reject(format!(
                "too many fields: {} (limit {})",
                line.fields.len(),
                limits.max_fields
            ));
        }
        if line.timestamp < MIN_TIME_NS {
            return reject(
                "timestamp is before 1900-01-01T00:00:00Z, the earliest time that can be stored",
            );
        }
        let t = match self.table_for(line) {
            Ok(t) => t,
            Err(Outcome::Deferred) if may_defer => return self.need_table(line),
            Err(Outcome::Deferred) => return reject("table could not be created"),
            Err(other) => return other,
        };

        // Resolve field columns, from the memo when the keys match it: known
        // at no cost when the parser saw the previous line's keys again and
        // that line resolved this memo.
        let rows = &self.tables[t];
        let memo_hit = (line.same_field_keys && previous_owner == Some(t))
            || (rows.memo_keys.len() == line.fields.len()
                && rows
                    .memo_keys
                    .iter()
                    .zip(&line.fields)
                    .all(|(memo, (key, _))| *memo == key.raw()));
        if !memo_hit {
            if let Err(outcome) = self.resolve_fields(t, line, may_defer) {
                return outcome;
            }
        }
        self.memo_owner = Some(t);
        let rows = &self.tables[t];
        for ((key, value), &(_, ty)) in line.fields.iter().zip(&rows.memo_columns) {
            let got = FieldType::of(value);
            if got != ty {
                return reject(format!(
                    "field type conflict: field {:?} is {got} here but the column stores {ty}",
                    key.unescape()
                ));
            }
        }

        let series_id = match self.series_id(line, known_ids) {
            Ok(id) => id,
            Err(outcome) => return outcome,
        };
        let rows = &mut self.tables[t];
        rows.chunk.push_row(
            line.timestamp,
            series_id,
            line.fields
                .iter()
                .zip(&rows.memo_columns)
                .filter(|&(_, &(position, _))| position != SUPERSEDED)
                .map(|((_, value), &(position, _))| (position, value)),
        );
        Outcome::Added
    }

    /// Looks up every field of `line` in table `t`'s schema and stores the
    /// result as the table's memo.
    fn resolve_fields(
        &mut self,
        t: usize,
        line: &Line<'b>,
        may_defer: bool,
    ) -> Result<(), Outcome> {
        let mut columns = std::mem::take(&mut self.scratch);
        columns.clear();
        let mut missing = Vec::new();
        for (key, value) in &line.fields {
            let name = key.unescape();
            match self.tables[t].schema.field(&name) {
                Some(column) => {
                    if let Some(earlier) = columns.iter_mut().find(|(p, _)| *p == column.0) {
                        earlier.0 = SUPERSEDED;
                    }
                    columns.push(column);
                }
                None => {
                    if let Err(outcome) = self.check_name_len("field key", &name) {
                        self.scratch = columns;
                        return Err(outcome);
                    }
                    if let Err(err) = names::validate(NameKind::Field, &name) {
                        self.scratch = columns;
                        return Err(reject(err.to_string()));
                    }
                    missing.push((name, FieldType::of(value)));
                }
            }
        }
        if !missing.is_empty() {
            self.scratch = columns;
            if !may_defer {
                return Err(reject("column could not be created"));
            }
            let measurement = line.measurement.unescape();
            for (name, ty) in missing {
                self.need(&measurement, &name, ty);
            }
            return Err(Outcome::Deferred);
        }
        let rows = &mut self.tables[t];
        rows.memo_keys.clear();
        rows.memo_keys
            .extend(line.fields.iter().map(|(key, _)| key.raw()));
        self.scratch = std::mem::replace(&mut rows.memo_columns, columns);
        Ok(())
    }

    /// The line's series id; a series new to the database is canonicalized,
    /// hashed and queued for the series table.
    fn series_id(
        &mut self,
        line: &Line<'b>,
        known_ids: &FingerprintMap<u64>,
    ) -> Result<u64, Outcome> {
        let fingerprint = raw_key_fingerprint(line.series_key.as_bytes());
        if let Some(&id) = known_ids
            .get(&fingerprint)
            .or_else(|| self.local_ids.get(&fingerprint))
        {
            return Ok(id);
        }
        let tags = line.tags.iter().map(|(k, v)| (k.unescape(), v.unescape()));
        let key = SeriesKey::new(line.measurement.unescape(), tags)
            .map_err(|dup| reject(format!("duplicate tag {:?}", dup.0)))?;
        self.check_name_len("measurement", &key.measurement)?;
        for (tag, _) in &key.tags {
            self.check_name_len("tag key", tag)?;
        }
        if key.tags.iter().any(|(k, _)| k == "time") {
            return Err(reject("tag key \"time\" is reserved"));
        }
        let id = key.series_id();
        // A series past a limit is not remembered: each of its lines is refused.
        match self
            .admission
            .admit(&self.db, id, &key, self.limits.cardinality)
        {
            Ok(true) => self.new_series.push((id, key)),
            Ok(false) => {}
            Err(reason) => {
                self.refused_by_limits += 1;
                return Err(reject(reason));
            }
        }
        self.local_ids.insert(fingerprint, id);
        Ok(id)
    }

    /// Refuses names longer than the write's limit.
    fn check_name_len(&self, what: &str, name: &str) -> Result<(), Outcome> {
        if name.len() > self.limits.max_name_len {
            return Err(reject(format!(
                "{what} is {} bytes long (limit {})",
                name.len(),
                self.limits.max_name_len
            )));
        }
        Ok(())
    }

    /// The request's outcome, its chunks, and the series it met.
    pub(crate) fn finish(mut self) -> Finished {
        // Deferred lines were judged last; report in line order.
        self.outcome
            .rejected
            .sort_by_key(|rejection| rejection.line);
        let chunks = self
            .tables
            .into_iter()
            .map(|rows| (rows.table, rows.chunk))
            .chain(self.extra_chunks)
            .filter(|(_, chunk)| chunk.rows() > 0)
            .map(|(table, chunk)| (table, chunk.finish()))
            .collect();
        let raw_keys = self.local_ids.into_iter().collect();
        Finished {
            outcome: self.outcome,
            rows: NewRows {
                chunks,
                series: self.new_series,
                raw_keys,
                admission: self.admission,
            },
            refused_by_limits: self.refused_by_limits,
        }
    }
}

/// Rows a table's chunk makes room for up front when `text` is what may
/// fill it: its lines (most bodies hold one table), but no more than keeps
/// the room its columns take, were every field of `schema` to occur, within
/// twice the text's size. Realistic lines fit many times over (a TSBS line:
/// 330 bytes of text, 96 in columns); the shortest (`m f=1`) get room for
/// half and grow. Without the cap, line feeds after one wide line would
/// have the server reserve lines × fields × 8 bytes.
fn rows_to_make_room_for(text: &[u8], schema: &TableSchema) -> usize {
    let row_bytes = 8 * (schema.fields.len() + 2);
    line_count(text).min(2 * text.len() / row_bytes)
}

/// Lines in `text`, the last one counted whether or not a line feed ends it
/// (an upper bound on its rows: blank and comment lines count too).
fn line_count(text: &[u8]) -> usize {
    lineproto::count_line_feeds(text) + usize::from(text.last().is_some_and(|&byte| byte != b'\n'))
}

/// Bodies at least this large are parsed in parallel pieces.
const PARALLEL_MIN_BYTES: usize = 4 << 20;

/// Parses `body`, in parallel pieces (one per core) when it is large: a bulk
/// write should use every core, not one. Small bodies — the common case of
/// many concurrent requests — parse on the calling task.
pub(crate) fn parse_pieces<'b>(
    db: &Arc<Database>,
    rp: &'b str,
    body: &'b [u8],
    options: ParseOptions,
    limits: LineLimits,
) -> LineBatch<'b> {
    // Asking for the cores reads cgroup files: only a body that can be
    // split asks (once per small request cost 3% of the server's CPU).
    let most = body.len() / PARALLEL_MIN_BYTES;
    let count = if most < 2 {
        1
    } else {
        most.min(std::thread::available_parallelism().map_or(1, |n| n.get()))
    };
    let pieces = split_at_lines(body, count);
    let parse_piece = |piece: Range<usize>| {
        let mut batch = LineBatch::new(Arc::clone(db), rp, limits);
        batch.parse(body, piece, options);
        batch
    };
    let multi_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    let batches: Vec<LineBatch<'b>> = if pieces.len() == 1 || !multi_thread {
        pieces.into_iter().map(parse_piece).collect()
    } else {
        // Long CPU work: tell the runtime this worker is busy, and parse the
        // pieces on scoped threads (they borrow the body).
        tokio::task::block_in_place(|| {
            std::thread::scope(|scope| {
                let handles: Vec<_> = pieces[1..]
                    .iter()
                    .map(|piece| scope.spawn(|| parse_piece(piece.clone())))
                    .collect();
                let mut batches = vec![parse_piece(pieces[0].clone())];
                batches.extend(
                    handles
                        .into_iter()
                        .map(|h| h.join().expect("parser thread panicked")),
                );
                batches
            })
        })
    };
    // A piece cut inside a string value (whose line feeds do not end its
    // line) does not end at a line's end: then the body is parsed whole.
    if batches[..batches.len() - 1]
        .iter()
        .any(|b| b.ended_in_string)
    {
        drop(batches);
        return parse_piece(0..body.len());
    }
    let mut batches = batches.into_iter();
    let mut merged = batches.next().expect("at least one piece");
    let mut offset = merged.lines_seen();
    for mut batch in batches {
        batch.shift_lines(offset);
        offset += batch.lines_seen();
        merged.absorb(batch);
    }
    merged
}

/// Splits `body` into at most `n` ranges of similar size, each starting at
/// the start of a line.
fn split_at_lines(body: &[u8], n: usize) -> Vec<Range<usize>> {
    let mut pieces = Vec::with_capacity(n);
    let mut start = 0;
    for i in 1..n {
        let target = (body.len() * i / n).max(start);
        let Some(newline) = body[target..].iter().position(|&b| b == b'\n') else {
            break;
        };
        let end = target + newline + 1;
        pieces.push(start..end);
        start = end;
    }
    pieces.push(start..body.len());
    pieces
}

/// The one shape a write's rows take from prepare to the log: rows per
/// table, and the series and raw series keys it met that the database did
/// not know (both paths, line protocol and Arrow, build it).
#[derive(Debug)]
pub(crate) struct NewRows {
    pub(crate) chunks: Vec<(Arc<Table>, RecordBatch)>,
    pub(crate) series: Vec<(u64, SeriesKey)>,
    pub(crate) raw_keys: Vec<(u128, u64)>,
    pub(crate) admission: Admission,
}

/// What a finished request hands to the ingestor.
#[derive(Debug)]
pub(crate) struct Finished {
    pub(crate) outcome: WriteOutcome,
    /// The rows; their admission is held until the write is logged.
    pub(crate) rows: NewRows,
    /// Lines refused by a cardinality limit.
    pub(crate) refused_by_limits: usize,
}

#[cfg(test)]
mod tests {
    use super::{line_count, rows_to_make_room_for};
    use crate::layout::names::TableNames;
    use crate::layout::schema::{FieldType, TableSchema};

    fn schema(fields: usize) -> TableSchema {
        let fields = (0..fields)
            .map(|i| (format!("f{i}"), FieldType::Float))
            .collect();
        TableSchema::new(TableNames::new("db", "rp", "m"), fields)
    }

    #[test]
    fn room_is_made_for_every_line_of_realistic_text() {
        let line = "cpu,hostname=host_1,region=eu-west-1 usage_user=58i,usage_system=2i,\
                    usage_idle=24i,usage_nice=61i,usage_iowait=22i 1451606400000000000\n";
        let text = line.repeat(5000);
        assert_eq!(rows_to_make_room_for(text.as_bytes(), &schema(5)), 5000);
        assert_eq!(rows_to_make_room_for(b"", &schema(5)), 0);
    }

    #[test]
    fn room_stays_within_twice_the_text() {
        // One line with 1,024 fields, then a million empty lines: room for
        // every line would be 8 GB; the cap keeps it to twice the text.
        let fields = 1024;
        let mut text = b"m ".to_vec();
        for i in 0..fields {
            text.extend_from_slice(format!("f{i}=1,").as_bytes());
        }
        text.extend(std::iter::repeat_n(b'\n', 1_000_000));
        let rows = rows_to_make_room_for(&text, &schema(fields));
        assert!(rows * 8 * (fields + 2) <= 2 * text.len(), "{rows} rows");
        assert!(rows < line_count(&text) / 100, "{rows} rows");
    }

    #[test]
    fn line_count_counts_every_line_once() {
        assert_eq!(line_count(b""), 0);
        assert_eq!(line_count(b"cpu v=1"), 1);
        assert_eq!(line_count(b"cpu v=1\n"), 1);
        assert_eq!(line_count(b"cpu v=1\n\ncpu v=2"), 3);
        // More line feeds than a byte counts, in one 255-byte chunk and
        // across chunks.
        assert_eq!(line_count(&[b'\n'; 255]), 255);
        assert_eq!(line_count(&[b'\n'; 1000]), 1000);
        let mut text = b"cpu v=1\n".repeat(300);
        text.extend_from_slice(b"cpu v=2");
        assert_eq!(line_count(&text), 301);
    }
}
