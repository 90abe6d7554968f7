//! Segment files: `<first lsn, 20 digits>.wal`, an 8-byte header (magic and
//! format version), then frames (see [`record`](super::record)).
//!
//! Reading stops at the first frame that is short or fails its checksum —
//! the torn tail a crash leaves while a frame is being written. Everything
//! before it is intact; the caller cuts the file there.

use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::record::{self, Lsn, Record, RecordError, FRAME_HEADER_LEN};

/// First bytes of every segment: "CHGWAL", then the format version (1).
pub(crate) const SEGMENT_MAGIC: [u8; 8] = *b"CHGWAL\x00\x01";

const SUFFIX: &str = ".wal";

/// A segment file and the first lsn it may hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SegmentFile {
    /// Where it is.
    pub(crate) path: PathBuf,
    /// Records in it are numbered from this lsn on.
    pub(crate) first_lsn: Lsn,
}

/// The name of the segment whose records start at `first_lsn`.
fn file_name(first_lsn: Lsn) -> String {
    format!("{first_lsn:020}{SUFFIX}")
}

/// The segments in `dir`, oldest first. Other files are ignored.
pub(crate) fn list(dir: &Path) -> io::Result<Vec<SegmentFile>> {
    let mut segments = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(first_lsn) = name
            .to_str()
            .and_then(|name| name.strip_suffix(SUFFIX))
            .filter(|digits| digits.len() == 20)
            .and_then(|digits| digits.parse().ok())
        else {
            continue;
        };
        segments.push(SegmentFile {
            path: entry.path(),
            first_lsn,
        });
    }
    segments.sort_by_key(|segment| segment.first_lsn);
    Ok(segments)
}

/// How reading a segment ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum End {
    /// At the end of the file, after a whole frame.
    Clean,
    /// At a frame that is cut short or fails its checksum, `offset` bytes
    /// into the file: what follows is not replayed.
    Torn {
        /// Where the bad frame starts: the length the file is cut to.
        offset: u64,
        /// What is wrong with it.
        reason: String,
    },
}

/// Why a segment could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file system failed.
    #[error("{path}: {source}")]
    Io {
        /// The segment.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The file does not start with a segment header this version reads.
    #[error("{path}: not a chingest log segment of a version this build reads")]
    Header {
        /// The segment.
        path: PathBuf,
    },
    /// A frame passed its checksum but does not decode: the log was
    /// written by another version, or is damaged in a way a checksum does
    /// not catch. Nothing is cut: the operator decides.
    #[error("{path}, offset {offset}: {source}")]
    Record {
        /// The segment.
        path: PathBuf,
        /// Where the frame starts.
        offset: u64,
        /// What is wrong.
        #[source]
        source: RecordError,
    },
}

/// Reads one segment's frames in order.
#[derive(Debug)]
pub(crate) struct SegmentReader {
    path: PathBuf,
    file: BufReader<File>,
    /// Bytes of the file up to the end of the last good frame.
    offset: u64,
    len: u64,
    end: Option<End>,
    payload: Vec<u8>,
    last_lsn: Option<Lsn>,
}

impl SegmentReader {
    /// Opens a segment and checks its header. A file shorter than the
    /// header (a crash while creating it) reads as torn at offset 0.
    pub(crate) fn open(path: &Path) -> Result<SegmentReader, ReadError> {
        let io_error = |source| ReadError::Io {
            path: path.to_owned(),
            source,
        };
        let mut file = File::open(path).map_err(io_error)?;
        let len = file.metadata().map_err(io_error)?.len();
        let header_len = SEGMENT_MAGIC.len() as u64;
        let end = if len < header_len {
            Some(End::Torn {
                offset: 0,
                reason: format!("{len}-byte file, shorter than the segment header"),
            })
        } else {
            let mut magic = [0; 8];
            file.read_exact(&mut magic).map_err(io_error)?;
            if magic != SEGMENT_MAGIC {
                return Err(ReadError::Header {
                    path: path.to_owned(),
                });
            }
            None
        };
        Ok(SegmentReader {
            path: path.to_owned(),
            offset: if end.is_some() { 0 } else { header_len },
            file: BufReader::with_capacity(1 << 20, file),
            len,
            end,
            payload: Vec::new(),
            last_lsn: None,
        })
    }

    /// The next record, or `None` at the end (see [`end`](Self::end)).
    /// Records numbered at most `skip_through` are checked but not decoded.
    pub(crate) fn next(&mut self, skip_through: Lsn) -> Result<Option<(Lsn, Record)>, ReadError> {
        loop {
            if self.end.is_some() {
                return Ok(None);
            }
            let start = self.offset;
            if !self.read_payload()? {
                return Ok(None);
            }
            let lsn = peek_lsn(&self.payload);
            if lsn.is_some() {
                self.last_lsn = lsn;
            }
            if lsn.is_some_and(|lsn| lsn <= skip_through) {
                continue;
            }
            return match record::decode(&self.payload) {
                Ok(decoded) => Ok(Some(decoded)),
                Err(source) => Err(ReadError::Record {
                    path: self.path.clone(),
                    offset: start,
                    source,
                }),
            };
        }
    }

    /// Reads the next frame's payload into `self.payload`; false at the
    /// end or at a torn frame (recorded in `self.end`).
    fn read_payload(&mut self) -> Result<bool, ReadError> {
        let remaining = self.len - self.offset;
        if remaining == 0 {
            self.end = Some(End::Clean);
            return Ok(false);
        }
        let torn = |reader: &mut SegmentReader, reason: String| {
            reader.end = Some(End::Torn {
                offset: reader.offset,
                reason,
            });
            Ok(false)
        };
        if remaining < FRAME_HEADER_LEN as u64 {
            return torn(
                self,
                format!("{remaining} bytes, shorter than a frame header"),
            );
        }
        let mut header = [0; FRAME_HEADER_LEN];
        self.file
            .read_exact(&mut header)
            .map_err(|source| ReadError::Io {
                path: self.path.clone(),
                source,
            })?;
        let len = u32::from_le_bytes(header[..4].try_into().expect("4 bytes")) as u64;
        let crc = u32::from_le_bytes(header[4..].try_into().expect("4 bytes"));
        if len == 0 || len > remaining - FRAME_HEADER_LEN as u64 {
            return torn(
                self,
                format!(
                    "frame of {len} bytes with {} left in the file",
                    remaining - FRAME_HEADER_LEN as u64
                ),
            );
        }
        self.payload.resize(len as usize, 0);
        self.file
            .read_exact(&mut self.payload)
            .map_err(|source| ReadError::Io {
                path: self.path.clone(),
                source,
            })?;
        if crc32c::crc32c(&self.payload) != crc {
            return torn(self, "checksum mismatch".to_owned());
        }
        self.offset += FRAME_HEADER_LEN as u64 + len;
        Ok(true)
    }

    /// The lsn of the last whole frame read, decoded or skipped.
    pub(crate) fn last_lsn(&self) -> Option<Lsn> {
        self.last_lsn
    }

    /// How reading ended, once [`next`](Self::next) has returned `None`.
    pub(crate) fn end(&self) -> Option<&End> {
        self.end.as_ref()
    }
}

/// The lsn of a payload, if it is long enough to have one.
fn peek_lsn(payload: &[u8]) -> Option<Lsn> {
    Some(u64::from_le_bytes(payload.get(1..9)?.try_into().ok()?))
}

/// The segment being appended to.
#[derive(Debug)]
pub(crate) struct SegmentWriter {
    file: File,
    pub(crate) segment: SegmentFile,
    /// Bytes in the file: header and whole frames.
    pub(crate) len: u64,
    /// Bytes written since the last sync.
    unsynced: bool,
}

impl SegmentWriter {
    /// Creates the segment for records from `first_lsn` on, durably (the
    /// file and its directory entry are synced).
    pub(crate) fn create(dir: &Path, first_lsn: Lsn) -> io::Result<SegmentWriter> {
        let path = dir.join(file_name(first_lsn));
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)?;
        file.write_all(&SEGMENT_MAGIC)?;
        file.sync_all()?;
        crate::durable::sync(dir)?;
        Ok(SegmentWriter {
            file,
            segment: SegmentFile { path, first_lsn },
            len: SEGMENT_MAGIC.len() as u64,
            unsynced: false,
        })
    }

    /// Appends whole frames. On failure the file is cut back to its
    /// previous length, so a failed append leaves no partial frame behind
    /// the next one.
    pub(crate) fn append(&mut self, frames: &[u8]) -> io::Result<()> {
        if let Err(err) = self.file.write_all(frames) {
            self.cut_to(self.len)?;
            return Err(err);
        }
        self.len += frames.len() as u64;
        self.unsynced = true;
        Ok(())
    }

    /// Cuts the last `bytes` appended off again (frames whose sync failed).
    pub(crate) fn cut_back(&mut self, bytes: u64) -> io::Result<()> {
        let len = self
            .len
            .saturating_sub(bytes)
            .max(SEGMENT_MAGIC.len() as u64);
        self.cut_to(len)?;
        self.len = len;
        Ok(())
    }

    fn cut_to(&mut self, len: u64) -> io::Result<()> {
        self.file.set_len(len)?;
        self.file.seek(SeekFrom::Start(len))?;
        Ok(())
    }

    /// Makes everything appended durable (`fdatasync`).
    pub(crate) fn sync(&mut self) -> io::Result<()> {
        if self.unsynced {
            self.file.sync_data()?;
            self.unsynced = false;
        }
        Ok(())
    }
}

/// Cuts a segment to `len` bytes (its torn tail) and syncs it.
pub(crate) fn truncate(path: &Path, len: u64) -> io::Result<()> {
    let file = OpenOptions::new().write(true).open(path)?;
    file.set_len(len)?;
    file.sync_all()
}
