//! What a write asks and what it is told: durability, options, the
//! outcome with its rejected lines, and Arrow input tables.

use arrow::record_batch::RecordBatch;
use lineproto::Precision;

use crate::config::DuplicatePolicy;

/// When a write is answered: how far its rows have gone by then, and so
/// what survives a crash. Every mode writes the rows to the log, and every
/// logged row reaches the engine exactly once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Once the log is synced to disk (`fdatasync`): survives the process
    /// being killed and the machine losing power. The default.
    #[default]
    Fsync,
    /// Once the log is written to the operating system: survives the
    /// process being killed, not a power loss.
    Os,
    /// Once the rows are queued for the log, in memory: the fastest; a
    /// crash loses what was not written yet (a few milliseconds of writes
    /// under load), and a failure to write the log is only logged.
    None,
    /// Once the rows are also inserted into the engine and queryable
    /// (read-your-writes): the slowest, as each such write asks for a flush.
    Visible,
}

impl Durability {
    /// The mode's name: `fsync`, `os`, `none` or `visible`.
    pub fn as_str(self) -> &'static str {
        match self {
            Durability::Fsync => "fsync",
            Durability::Os => "os",
            Durability::None => "none",
            Durability::Visible => "visible",
        }
    }
}

impl std::str::FromStr for Durability {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "fsync" => Ok(Durability::Fsync),
            "os" => Ok(Durability::Os),
            "none" => Ok(Durability::None),
            "visible" => Ok(Durability::Visible),
            _ => Err(format!(
                "unknown durability {s:?}: use fsync, os, none or visible"
            )),
        }
    }
}

impl std::fmt::Display for Durability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Options of one write call.
#[derive(Debug, Clone, Copy)]
pub struct WriteOptions {
    /// Unit of the timestamps in a line-protocol body.
    pub precision: Precision,
    /// When the write returns (see [`Durability`]).
    pub durability: Durability,
    /// Longest line accepted, in bytes; longer lines are rejected.
    pub max_line_len: usize,
    /// Most tags a line may have; lines with more are rejected.
    pub max_tags_per_line: usize,
    /// Most fields a line may have; lines with more are rejected.
    pub max_fields_per_line: usize,
    /// Longest measurement, tag key or new field name, in bytes (names the
    /// engine cannot hold are refused whatever this says).
    pub max_name_len: usize,
    /// Create the database if it does not exist (default); otherwise such a
    /// write fails with [`Error::DatabaseNotFound`](crate::Error::DatabaseNotFound).
    pub create_database: bool,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            precision: Precision::Nanoseconds,
            durability: Durability::Fsync,
            max_line_len: usize::MAX,
            max_tags_per_line: usize::MAX,
            max_fields_per_line: usize::MAX,
            max_name_len: usize::MAX,
            create_database: true,
        }
    }
}

/// A line that was not stored, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineRejection {
    /// 1-based line number in the request body.
    pub line: usize,
    /// 1-based byte column of the problem, when it is known.
    pub column: Option<usize>,
    /// What is wrong, for the client.
    pub reason: String,
}

impl std::fmt::Display for LineRejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.column {
            Some(column) => write!(f, "line {}, column {}: {}", self.line, column, self.reason),
            None => write!(f, "line {}: {}", self.line, self.reason),
        }
    }
}

/// The result of a line-protocol write: what was stored and what was not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteOutcome {
    /// Lines stored.
    pub accepted: usize,
    /// Lines refused, in line order.
    pub rejected: Vec<LineRejection>,
}

/// One measurement's batch in [`Ingestor::write_arrow_tables`](crate::Ingestor::write_arrow_tables).
#[derive(Debug, Clone, Copy)]
pub struct ArrowTable<'a> {
    /// The measurement the rows belong to.
    pub measurement: &'a str,
    /// The rows: `time`, the tag columns of [`Tags::Columns`], fields in
    /// the rest.
    pub batch: &'a RecordBatch,
    /// Where the rows' tags are.
    pub tags: Tags<'a>,
    /// The duplicate policy the measurement takes if it has none of its
    /// own yet (one set for its database still yields to it): for tables a
    /// protocol defines, such as metadata sent again every minute that
    /// should keep only the newest (`Last`). `None`: the database's or the
    /// configured default.
    pub duplicates: Option<DuplicatePolicy>,
}

/// Where an [`ArrowTable`]'s tags are. In both forms a tag whose value is
/// empty (or NULL) is one the row lacks.
#[derive(Debug, Clone, Copy)]
pub enum Tags<'a> {
    /// Columns of the batch, by name: strings, best dictionary-encoded
    /// (as columnar producers send them), one tag set per row.
    Columns(&'a [&'a str]),
    /// The rows come series after series, as protocols that send a
    /// series' labels once with its samples decode them; the batch has no
    /// tag columns. Each series is hashed to its id once, not once per row.
    Series {
        /// Every series' (key, value) tags, series after series; a
        /// series' in any order, each key once.
        tags: &'a [(&'a str, &'a str)],
        /// Per series: how many of the next `tags` are its, and how many
        /// of the batch's next rows.
        counts: &'a [(usize, usize)],
    },
}

impl<'a> ArrowTable<'a> {
    /// A table of `measurement` whose tags are the columns `tag_columns`,
    /// with the default duplicate policy.
    pub fn new(measurement: &'a str, batch: &'a RecordBatch, tag_columns: &'a [&'a str]) -> Self {
        ArrowTable {
            measurement,
            batch,
            tags: Tags::Columns(tag_columns),
            duplicates: None,
        }
    }
}
