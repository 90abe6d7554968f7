//! chingest: metrics ingest into embedded chDB.
//!
//! An [`Ingestor`] opens the in-process ClickHouse engine on a data directory
//! and writes InfluxDB line protocol or Arrow batches into MergeTree tables —
//! no database server, no network hop. Each tag set is hashed to a `series_id`
//! (see [`layout::series`]); rows are built straight into Arrow columns, gathered per
//! table, and inserted in large batches through a pool of engine connections.
//!
//! ```no_run
//! # async fn demo() -> chingest::Result<()> {
//! use chingest::{IngestConfig, Ingestor, WriteOptions};
//!
//! let ingestor = Ingestor::open(IngestConfig::new("./data")).await?;
//! let outcome = ingestor
//!     .write_lp("telegraf", "autogen", b"cpu,host=a usage=0.5 1700000000000000000\n", &WriteOptions::default())
//!     .await?;
//! assert_eq!(outcome.accepted, 1);
//! // The write returned once logged; `flush` makes everything logged queryable.
//! ingestor.flush().await?;
//! let csv = ingestor
//!     .query_trusted("SELECT count() FROM telegraf.`cpu.autogen`", "CSV")
//!     .await?;
//! assert_eq!(csv, b"1\n");
//! ingestor.close().await?;
//! # Ok(()) }
//! ```
//!
//! # What an acknowledged write means
//!
//! A write returns once its rows are in the write-ahead log (`<data
//! dir>/wal`), as durably as its [`Durability`] asks: synced to disk
//! (the default), written to the operating system, or only queued in
//! memory; or, with [`Durability::Visible`], once they are also in the
//! engine and queryable. Behind the log, each table's rows are inserted
//! into its MergeTree in large batches, every insert exactly once: after a
//! crash, [`Ingestor::open`] replays what the log holds past its checkpoint
//! before it returns, and the engine ignores a replayed insert that had
//! already landed.
//!
//! # One engine per process
//!
//! chDB is process-global: a process opens one data directory, and every
//! [`Ingestor`] in it must use the same one (a second directory is refused
//! until the first is closed).

pub mod backup;
mod catalog;
pub mod clock;
mod cluster;
mod config;
mod continuous;
mod downsample;
mod durable;
mod edit;
mod engine;
mod error;
#[cfg(fuzzing)]
pub mod fuzzing;
mod ingestor;
mod last_value;
pub mod layout;
mod lease;
pub mod parallel;
pub mod read;
pub mod stats;
mod wal;
mod write;

pub use arrow;
pub use lineproto::Precision;

pub use config::{
    CardinalityLimits, ClusterConfig, ContinuousQueryConfig, Downsampling, DownsamplingConfig,
    DownsamplingLevel, DuplicatePolicy, FlushPolicy, IngestConfig, InvalidConfig, Keeps,
    LastValueConfig, QueryLimits, StorageMode, WalConfig,
};
pub use continuous::{ContinuousQuery, PeriodError, PeriodFuture, Schedule, Window};
pub use downsample::{DownsamplingSetting, RollupSplit, RollupView};
pub use edit::{FieldValue, PointFilter, TagPredicate};
pub use engine::{engine_version, shutdown_engine};
pub use error::{Error, Result};
pub use ingestor::{ContinuousQueryRunner, Ingestor};
pub use last_value::{
    CompressedSamples, IndexedSeries, LastField, LastSeries, LastValue, RecentSamples, TagMatcher,
    TagTest, BLOCK_NS, SETTLED_AFTER,
};
pub use read::access::{Access, Denied};
pub use read::samples::WholeRows;
pub use read::sandbox::{self, ReadScope};
pub use read::stream::QueryChunks;
pub use read::MeasurementSchema;
pub use read::TableAddress;
pub use stats::{ContinuousQueryStats, IngestStats, ShardStats};
pub use wal::{ReadError as LogReadError, RecordError as LogRecordError};
pub use write::budget::MemoryReservation;
pub use write::chunk;
pub use write::points::{Point, PointValue};
pub use write::request::{ArrowTable, Durability, LineRejection, Tags, WriteOptions, WriteOutcome};
pub use write::PreparedWrite;
