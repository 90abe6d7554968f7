//! The checkpoint file, `<wal dir>/checkpoint`: the log's identity and the
//! lsn through which every record is committed to the engine.
//!
//! | field            | encoding |
//! |------------------|----------|
//! | magic, version   | `CHGCKP\0\x01` |
//! | log id           | u64 LE   |
//! | committed lsn    | u64 LE   |
//! | CRC32C of the 24 bytes before | u32 LE |
//!
//! Replaced atomically: written to `checkpoint.tmp`, synced, renamed over
//! the old one, directory synced. A crash leaves the old or the new one.

use std::io;
use std::path::Path;

use super::record::Lsn;

const MAGIC: [u8; 8] = *b"CHGCKP\x00\x01";
const FILE: &str = "checkpoint";
const LEN: usize = 28;

/// What the checkpoint file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Checkpoint {
    /// Chosen when the log was created. Part of every deduplication token,
    /// so a log created anew (its directory deleted) never repeats the
    /// tokens of the old one.
    pub(crate) log_id: u64,
    /// Every record numbered at most this is committed to the engine.
    pub(crate) committed: Lsn,
}

impl Checkpoint {
    fn encode(&self) -> [u8; LEN] {
        let mut out = [0; LEN];
        out[..8].copy_from_slice(&MAGIC);
        out[8..16].copy_from_slice(&self.log_id.to_le_bytes());
        out[16..24].copy_from_slice(&self.committed.to_le_bytes());
        let crc = crc32c::crc32c(&out[..24]);
        out[24..].copy_from_slice(&crc.to_le_bytes());
        out
    }
}

/// Reads the checkpoint of the log in `dir`; `None` if there is none yet.
pub(crate) fn read(dir: &Path) -> io::Result<Option<Checkpoint>> {
    let bytes = match std::fs::read(dir.join(FILE)) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err),
    };
    let invalid = |what: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {what}", dir.join(FILE).display()),
        )
    };
    if bytes.len() != LEN || bytes[..8] != MAGIC {
        return Err(invalid(
            "not a checkpoint file of a version this build reads",
        ));
    }
    let crc = u32::from_le_bytes(bytes[24..].try_into().expect("4 bytes"));
    if crc32c::crc32c(&bytes[..24]) != crc {
        return Err(invalid("checksum mismatch"));
    }
    Ok(Some(Checkpoint {
        log_id: u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes")),
        committed: u64::from_le_bytes(bytes[16..24].try_into().expect("8 bytes")),
    }))
}

/// Replaces the checkpoint of the log in `dir`, durably (through
/// `checkpoint.tmp`).
pub(crate) fn write(dir: &Path, checkpoint: &Checkpoint) -> io::Result<()> {
    crate::durable::write(&dir.join(FILE), &checkpoint.encode())
}

/// A new log's id: distinct for every log this machine creates.
pub(crate) fn new_log_id() -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let mut seed = Vec::with_capacity(32);
    seed.extend_from_slice(&now.to_le_bytes());
    seed.extend_from_slice(&std::process::id().to_le_bytes());
    seed.extend_from_slice(&(&seed as *const Vec<u8> as usize).to_le_bytes());
    xxhash_rust::xxh3::xxh3_64(&seed)
}
