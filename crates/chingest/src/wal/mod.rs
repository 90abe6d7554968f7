//! The write-ahead log: its files, its record format, its checkpoint.
//!
//! A write is acknowledged once its record is in the log (how durably is
//! the write's [`Durability`](crate::Durability)); the engine inserts
//! happen behind it. The log lives in `<data dir>/wal/`:
//!
//! - segment files `<first lsn>.wal` holding frames of records
//!   ([`record`] has the format), appended to one at a time;
//! - `checkpoint`: the log's id and the lsn through which every record is
//!   committed to the engine. Segments wholly at or below it are deleted.
//!
//! This module is files and bytes only: who appends, in which groups, and
//! what replay does with the records are [`appender`](crate::write::appender) and
//! [`replay`](crate::write::replay)'s business. It is public so tools and tests can
//! read a log; the format is a storage format, pinned by golden tests.

mod checkpoint;
mod record;
mod segment;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};

pub(crate) use checkpoint::Checkpoint;
/// Errors reading the log, part of the library's [`Error`](crate::Error).
pub use record::RecordError;
pub(crate) use record::{encode_flush, encode_write};
pub(crate) use record::{FlushRange, Lsn, Record, TableRef, WriteRecord};
pub use segment::ReadError;
pub(crate) use segment::{list, End, SegmentFile, SegmentReader};
use segment::{truncate, SegmentWriter};

/// A segment cut at its torn tail when the log was opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cut {
    /// The segment.
    pub(crate) path: PathBuf,
    /// Its new length.
    pub(crate) offset: u64,
    /// Bytes dropped.
    pub(crate) dropped: u64,
    /// What was wrong with the first dropped frame.
    pub(crate) reason: String,
}

/// What opening a log found.
#[derive(Debug, Clone)]
pub(crate) struct Opened {
    /// The checkpoint (a new one for a new log).
    pub(crate) checkpoint: Checkpoint,
    /// The segments that existed, to read again for replay.
    pub(crate) segments: Vec<SegmentFile>,
    /// Torn tails cut off.
    pub(crate) cuts: Vec<Cut>,
}

/// The files of an open log: the checkpoint, the closed segments and the
/// one being appended to. Owned by one thread (the appender).
#[derive(Debug)]
pub(crate) struct LogFiles {
    dir: PathBuf,
    checkpoint: Checkpoint,
    /// Segments before the active one, oldest first, with their sizes.
    closed: VecDeque<(SegmentFile, u64)>,
    active: SegmentWriter,
    segment_bytes: u64,
    next_lsn: Lsn,
}

impl LogFiles {
    /// Opens the log in `dir` (created if missing): reads the checkpoint,
    /// reads every segment, cuts torn tails, calls `visit` with each record
    /// numbered above the checkpoint, in order, and starts a new segment
    /// for what is appended from now on.
    pub(crate) fn open(
        dir: &Path,
        segment_bytes: u64,
        mut visit: impl FnMut(Lsn, Record),
    ) -> Result<(LogFiles, Opened), ReadError> {
        let io_error = |source| ReadError::Io {
            path: dir.to_owned(),
            source,
        };
        crate::durable::create_dir_all(dir).map_err(io_error)?;
        let checkpoint = match checkpoint::read(dir).map_err(io_error)? {
            Some(checkpoint) => checkpoint,
            None => {
                let fresh = Checkpoint {
                    log_id: checkpoint::new_log_id(),
                    committed: 0,
                };
                checkpoint::write(dir, &fresh).map_err(io_error)?;
                fresh
            }
        };
        let segments = list(dir).map_err(io_error)?;
        let mut next_lsn = checkpoint.committed + 1;
        let mut cuts = Vec::new();
        let mut closed = VecDeque::new();
        for segment in &segments {
            next_lsn = next_lsn.max(segment.first_lsn);
            let mut reader = SegmentReader::open(&segment.path)?;
            while let Some((lsn, record)) = reader.next(checkpoint.committed)? {
                next_lsn = next_lsn.max(lsn + 1);
                visit(lsn, record);
            }
            // `next` skips records at or below the checkpoint: they still
            // number the log.
            next_lsn = next_lsn.max(reader.last_lsn().map_or(0, |lsn| lsn + 1));
            let size = match reader.end() {
                Some(End::Torn { offset, reason }) => {
                    let len = std::fs::metadata(&segment.path).map_err(io_error)?.len();
                    truncate(&segment.path, *offset).map_err(io_error)?;
                    cuts.push(Cut {
                        path: segment.path.clone(),
                        offset: *offset,
                        dropped: len - offset,
                        reason: reason.clone(),
                    });
                    *offset
                }
                _ => std::fs::metadata(&segment.path).map_err(io_error)?.len(),
            };
            closed.push_back((segment.clone(), size));
        }
        let active = SegmentWriter::create(dir, next_lsn).map_err(io_error)?;
        // A segment cut to nothing would otherwise share the new one's name.
        closed.retain(|(segment, _)| segment.path != active.segment.path);
        let files = LogFiles {
            dir: dir.to_owned(),
            checkpoint,
            closed,
            active,
            segment_bytes,
            next_lsn,
        };
        let opened = Opened {
            checkpoint,
            segments: files.closed.iter().map(|(s, _)| s.clone()).collect(),
            cuts,
        };
        Ok((files, opened))
    }

    /// The log's id.
    pub(crate) fn log_id(&self) -> u64 {
        self.checkpoint.log_id
    }

    /// The lsn the next record will get.
    pub(crate) fn next_lsn(&self) -> Lsn {
        self.next_lsn
    }

    /// Numbers the next record.
    pub(crate) fn take_lsn(&mut self) -> Lsn {
        let lsn = self.next_lsn;
        self.next_lsn += 1;
        lsn
    }

    /// Appends whole frames whose first record is `first_lsn`, starting a
    /// new segment first when the active one is full. On failure nothing of
    /// `frames` stays in the log.
    pub(crate) fn append(&mut self, first_lsn: Lsn, frames: &[u8]) -> io::Result<()> {
        let header = segment::SEGMENT_MAGIC.len() as u64;
        if self.active.len > header && self.active.len + frames.len() as u64 > self.segment_bytes {
            // Later syncs only cover the new segment: this one must be
            // durable first, or a synced record could outlive an earlier one.
            self.active.sync()?;
            let next = SegmentWriter::create(&self.dir, first_lsn)?;
            let full = std::mem::replace(&mut self.active, next);
            self.closed.push_back((full.segment.clone(), full.len));
        }
        self.active.append(frames)
    }

    /// Makes everything appended durable.
    pub(crate) fn sync(&mut self) -> io::Result<()> {
        self.active.sync()
    }

    /// Cuts the last appended group (`bytes` long) off the log: its sync
    /// failed and its writers are told so, so replay must not bring it
    /// back. (A group never spans segments: `append` rolls before it.)
    pub(crate) fn cut_back(&mut self, bytes: u64) -> io::Result<()> {
        self.active.cut_back(bytes)
    }

    /// Records that every record numbered at most `committed` is in the
    /// engine, then deletes the segments that hold nothing newer.
    pub(crate) fn checkpoint(&mut self, committed: Lsn) -> io::Result<()> {
        if committed <= self.checkpoint.committed {
            return Ok(());
        }
        let checkpoint = Checkpoint {
            committed,
            ..self.checkpoint
        };
        checkpoint::write(&self.dir, &checkpoint)?;
        self.checkpoint = checkpoint;
        // A closed segment holds records below the next one's first lsn.
        let mut removed = false;
        while let Some((segment, _)) = self.closed.front() {
            let next_first = self
                .closed
                .get(1)
                .map_or(self.active.segment.first_lsn, |(next, _)| next.first_lsn);
            if next_first > committed + 1 {
                break;
            }
            std::fs::remove_file(&segment.path)?;
            self.closed.pop_front();
            removed = true;
        }
        if removed {
            crate::durable::sync(&self.dir)?;
        }
        Ok(())
    }

    /// The lsn of the last checkpoint.
    pub(crate) fn committed(&self) -> Lsn {
        self.checkpoint.committed
    }

    /// Bytes in all segments.
    pub(crate) fn bytes(&self) -> u64 {
        self.closed.iter().map(|(_, len)| len).sum::<u64>() + self.active.len
    }

    /// Segment files.
    pub(crate) fn segment_count(&self) -> usize {
        self.closed.len() + 1
    }
}

/// Reads `segments` (as listed when the log was opened) and calls `visit`
/// with each record numbered above `after`, in order. Segments were cut at
/// their torn tails on open, so reading ends cleanly.
pub(crate) fn read_records(
    segments: &[SegmentFile],
    after: Lsn,
    mut visit: impl FnMut(Lsn, Record) -> bool,
) -> Result<(), ReadError> {
    for segment in segments {
        let mut reader = SegmentReader::open(&segment.path)?;
        while let Some((lsn, record)) = reader.next(after)? {
            if !visit(lsn, record) {
                return Ok(());
            }
        }
    }
    Ok(())
}
