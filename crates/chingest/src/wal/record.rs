//! The log's record format: how a record becomes the bytes of one frame,
//! and back. A storage format — the golden test in `tests.rs` pins it.
//!
//! A frame is
//!
//! | field                   | encoding        |
//! |-------------------------|-----------------|
//! | payload length          | u32 LE          |
//! | CRC32C of the payload   | u32 LE          |
//! | payload                 | `length` bytes  |
//!
//! and a payload is `kind` (u8), `lsn` (u64 LE), then the kind's body.
//! Strings are a u32 LE length and UTF-8 bytes; counts are u32 LE.
//!
//! | kind | record            | body |
//! |------|-------------------|------|
//! | 1    | `Write`           | database, retention policy, series count, series (`id` u64, measurement, tag count, (key, value)…), table count, tables (measurement, chunk count, chunks: u32 length + one Arrow IPC stream) |
//! | 2    | `FlushStarted`    | database, retention policy, measurement, first lsn (u64), last lsn (u64) |
//! | 3    | `FlushCommitted`  | the same |
//!
//! Chunks are the Arrow batches the write built (`time` as `Timestamp(ns,
//! UTC)`, `series_id`, fields), timestamps of lines that had none included:
//! replay inserts exactly what was acknowledged, without parsing again.

use std::borrow::Borrow;
use std::io::Cursor;

use arrow::ipc::reader::StreamReader;
use arrow::ipc::writer::StreamWriter;
use arrow::record_batch::RecordBatch;

use crate::layout::series::SeriesKey;

/// A log sequence number: records are numbered 1, 2, 3, … in log order,
/// for the whole life of a log (they do not restart with a new segment).
pub(crate) type Lsn = u64;

/// Bytes before a frame's payload: length and checksum.
pub(crate) const FRAME_HEADER_LEN: usize = 8;

const KIND_WRITE: u8 = 1;
const KIND_FLUSH_STARTED: u8 = 2;
const KIND_FLUSH_COMMITTED: u8 = 3;

/// One fact table, by the names a write used.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct TableRef {
    /// Database.
    pub(crate) database: String,
    /// Retention policy.
    pub(crate) retention_policy: String,
    /// Measurement.
    pub(crate) measurement: String,
}

/// A flush's place in the log: the rows of `table` carried by the `Write`
/// records numbered `first..=last`. Flushes take a table's rows in log
/// order, so one range names exactly one insert's rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FlushRange {
    /// The table inserted into.
    pub(crate) table: TableRef,
    /// Lsn of the first record whose rows the insert carries.
    pub(crate) first: Lsn,
    /// Lsn of the last.
    pub(crate) last: Lsn,
}

/// One table's rows in a `Write` record, as Arrow IPC streams (decoded on
/// demand: scanning the log for markers does not pay for it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TableChunks {
    /// Measurement the rows belong to.
    pub(crate) measurement: String,
    /// One Arrow IPC stream per chunk.
    pub(crate) ipc: Vec<Vec<u8>>,
}

impl TableChunks {
    /// The chunks as Arrow batches.
    pub(crate) fn batches(&self) -> Result<Vec<RecordBatch>, RecordError> {
        let mut batches = Vec::with_capacity(self.ipc.len());
        for stream in &self.ipc {
            let reader = StreamReader::try_new(Cursor::new(stream.as_slice()), None)
                .map_err(|e| RecordError(format!("chunk of {:?}: {e}", self.measurement)))?;
            for batch in reader {
                batches.push(
                    batch.map_err(|e| {
                        RecordError(format!("chunk of {:?}: {e}", self.measurement))
                    })?,
                );
            }
        }
        Ok(batches)
    }
}

/// The rows one write had acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WriteRecord {
    /// Database written to.
    pub(crate) database: String,
    /// Retention policy written to.
    pub(crate) retention_policy: String,
    /// Series this record introduced: they are inserted before its rows.
    pub(crate) series: Vec<(u64, SeriesKey)>,
    /// Rows, per measurement.
    pub(crate) tables: Vec<TableChunks>,
}

/// A record of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Record {
    /// Rows of one write, durable before the write was answered.
    Write(WriteRecord),
    /// An insert of a flush range is about to start, with the range as its
    /// deduplication token: a replay repeats exactly this insert.
    FlushStarted(FlushRange),
    /// That insert committed: replay skips it.
    FlushCommitted(FlushRange),
}

/// A payload that passed its checksum but cannot be decoded: written by
/// another version, or a bug.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("undecodable log record: {0}")]
pub struct RecordError(pub String);

/// Appends frames to a buffer: [`begin`](Self::begin) a frame, put its
/// fields, [`end`](Self::end) it (length and checksum are filled in then).
#[derive(Debug)]
pub(crate) struct FrameWriter<'a> {
    out: &'a mut Vec<u8>,
    start: usize,
}

impl<'a> FrameWriter<'a> {
    pub(crate) fn begin(out: &'a mut Vec<u8>, kind: u8, lsn: Lsn) -> Self {
        let start = out.len();
        out.extend_from_slice(&[0; FRAME_HEADER_LEN]);
        let mut frame = FrameWriter { out, start };
        frame.u8(kind);
        frame.u64(lsn);
        frame
    }

    fn u8(&mut self, v: u8) {
        self.out.push(v);
    }

    fn u32(&mut self, v: usize) -> Result<(), RecordError> {
        let v = u32::try_from(v).map_err(|_| RecordError(format!("{v} does not fit a u32")))?;
        self.out.extend_from_slice(&v.to_le_bytes());
        Ok(())
    }

    fn u64(&mut self, v: u64) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }

    fn str(&mut self, s: &str) -> Result<(), RecordError> {
        self.u32(s.len())?;
        self.out.extend_from_slice(s.as_bytes());
        Ok(())
    }

    /// Writes `batch` as one length-prefixed Arrow IPC stream.
    fn ipc(&mut self, batch: &RecordBatch) -> Result<(), RecordError> {
        let at = self.out.len();
        self.out.extend_from_slice(&[0; 4]);
        let mut writer = StreamWriter::try_new(&mut *self.out, &batch.schema())
            .map_err(|e| RecordError(e.to_string()))?;
        writer
            .write(batch)
            .map_err(|e| RecordError(e.to_string()))?;
        writer.finish().map_err(|e| RecordError(e.to_string()))?;
        drop(writer);
        let len = self.out.len() - at - 4;
        let len = u32::try_from(len).map_err(|_| RecordError(format!("a {len}-byte chunk")))?;
        self.out[at..at + 4].copy_from_slice(&len.to_le_bytes());
        Ok(())
    }

    /// Fills in the header; the frame is complete.
    pub(crate) fn end(self) -> Result<(), RecordError> {
        let payload = &self.out[self.start + FRAME_HEADER_LEN..];
        let len = u32::try_from(payload.len())
            .map_err(|_| RecordError(format!("a {}-byte record", payload.len())))?;
        let crc = crc32c::crc32c(payload);
        self.out[self.start..self.start + 4].copy_from_slice(&len.to_le_bytes());
        self.out[self.start + 4..self.start + 8].copy_from_slice(&crc.to_le_bytes());
        Ok(())
    }
}

/// Appends a `Write` frame to `out`. On error `out` may hold a partial
/// frame: the caller truncates it back.
pub(crate) fn encode_write<'t>(
    out: &mut Vec<u8>,
    lsn: Lsn,
    database: &str,
    retention_policy: &str,
    series: &[(u64, impl Borrow<SeriesKey>)],
    tables: impl ExactSizeIterator<Item = (&'t str, &'t [RecordBatch])>,
) -> Result<(), RecordError> {
    let mut frame = FrameWriter::begin(out, KIND_WRITE, lsn);
    frame.str(database)?;
    frame.str(retention_policy)?;
    frame.u32(series.len())?;
    for (id, key) in series {
        let key = key.borrow();
        frame.u64(*id);
        frame.str(&key.measurement)?;
        frame.u32(key.tags.len())?;
        for (k, v) in &key.tags {
            frame.str(k)?;
            frame.str(v)?;
        }
    }
    frame.u32(tables.len())?;
    for (measurement, chunks) in tables {
        frame.str(measurement)?;
        frame.u32(chunks.len())?;
        for chunk in chunks {
            frame.ipc(chunk)?;
        }
    }
    frame.end()
}

/// Appends a `FlushStarted` (`committed == false`) or `FlushCommitted`
/// frame to `out`.
pub(crate) fn encode_flush(
    out: &mut Vec<u8>,
    lsn: Lsn,
    range: &FlushRange,
    committed: bool,
) -> Result<(), RecordError> {
    let kind = if committed {
        KIND_FLUSH_COMMITTED
    } else {
        KIND_FLUSH_STARTED
    };
    let mut frame = FrameWriter::begin(out, kind, lsn);
    frame.str(&range.table.database)?;
    frame.str(&range.table.retention_policy)?;
    frame.str(&range.table.measurement)?;
    frame.u64(range.first);
    frame.u64(range.last);
    frame.end()
}

/// Reads the fields of a payload in order.
struct Fields<'a> {
    rest: &'a [u8],
}

impl<'a> Fields<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], RecordError> {
        if self.rest.len() < n {
            return Err(RecordError(format!(
                "wanted {n} more bytes, {} left",
                self.rest.len()
            )));
        }
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, RecordError> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<usize, RecordError> {
        let bytes = self.take(4)?.try_into().expect("4 bytes");
        Ok(u32::from_le_bytes(bytes) as usize)
    }

    fn u64(&mut self) -> Result<u64, RecordError> {
        let bytes = self.take(8)?.try_into().expect("8 bytes");
        Ok(u64::from_le_bytes(bytes))
    }

    fn str(&mut self) -> Result<String, RecordError> {
        let len = self.u32()?;
        let bytes = self.take(len)?;
        String::from_utf8(bytes.to_vec()).map_err(|e| RecordError(e.to_string()))
    }

    /// A count of items that each take at least `min_item` bytes: a count
    /// the payload cannot hold is refused before anything is allocated.
    fn count(&mut self, min_item: usize) -> Result<usize, RecordError> {
        let n = self.u32()?;
        if n.saturating_mul(min_item) > self.rest.len() {
            return Err(RecordError(format!("count {n} exceeds the record")));
        }
        Ok(n)
    }

    fn range(&mut self) -> Result<FlushRange, RecordError> {
        let table = TableRef {
            database: self.str()?,
            retention_policy: self.str()?,
            measurement: self.str()?,
        };
        Ok(FlushRange {
            table,
            first: self.u64()?,
            last: self.u64()?,
        })
    }
}

/// Decodes one frame's payload (its checksum already verified).
pub(crate) fn decode(payload: &[u8]) -> Result<(Lsn, Record), RecordError> {
    let mut fields = Fields { rest: payload };
    let kind = fields.u8()?;
    let lsn = fields.u64()?;
    let record = match kind {
        KIND_WRITE => {
            let database = fields.str()?;
            let retention_policy = fields.str()?;
            let mut series = Vec::with_capacity(fields.count(16)?);
            for _ in 0..series.capacity() {
                let id = fields.u64()?;
                let measurement = fields.str()?;
                let mut tags = Vec::with_capacity(fields.count(8)?);
                for _ in 0..tags.capacity() {
                    tags.push((fields.str()?, fields.str()?));
                }
                series.push((id, SeriesKey { measurement, tags }));
            }
            let mut tables = Vec::with_capacity(fields.count(8)?);
            for _ in 0..tables.capacity() {
                let measurement = fields.str()?;
                let mut ipc = Vec::with_capacity(fields.count(4)?);
                for _ in 0..ipc.capacity() {
                    let len = fields.u32()?;
                    ipc.push(fields.take(len)?.to_vec());
                }
                tables.push(TableChunks { measurement, ipc });
            }
            Record::Write(WriteRecord {
                database,
                retention_policy,
                series,
                tables,
            })
        }
        KIND_FLUSH_STARTED => Record::FlushStarted(fields.range()?),
        KIND_FLUSH_COMMITTED => Record::FlushCommitted(fields.range()?),
        other => return Err(RecordError(format!("unknown record kind {other}"))),
    };
    if !fields.rest.is_empty() {
        return Err(RecordError(format!(
            "{} bytes after the record",
            fields.rest.len()
        )));
    }
    Ok((lsn, record))
}
