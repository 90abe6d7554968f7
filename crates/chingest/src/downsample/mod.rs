//! Downsampling: the rollups of every fact table of a downsampled
//! database ([`Downsampling`], `layout::rollup`) kept equal to what they
//! roll up. A background task ([`run`]) makes a pass every
//! [`DownsamplingConfig::period`](crate::DownsamplingConfig::period); a
//! pass over a table:
//!
//! 1. finds what changed since the last pass: the time range of the rows
//!    of blocks inserted since (each insert into a fact table gets the next
//!    block number, and one table's inserts run one at a time, so none
//!    becomes visible below a number already seen), and the range an edit
//!    marked ([`Downsampler::mark`]);
//! 2. rebuilds the finest level's buckets over that range from the rows
//!    (deleting them first after an edit), then each coarser level's over
//!    the same span from the finer level (unless every new row falls in
//!    the newest finest bucket and nothing is marked: that waits for the
//!    bucket to close, so live rows are rolled up once);
//! 3. records, in the database's `_downsampling` table, the last block seen
//!    and no mark, after the rebuilt buckets are durable;
//! 4. removes what is past its age: moves the table's cuts ([`Cuts`], as
//!    far as every level's age and the retention policy allow, durably
//!    first), drops the fact table's parts wholly before its rows' cut and
//!    rolled up, and deletes each level's buckets before its own cut.
//!
//! Where a level's source is gone (before its cut), its buckets are not
//! rebuilt but merged with the new rows ([`Rollup::merge_sql`]), and edits
//! change them directly ([`Downsampler::mark`]).
//!
//! A crash anywhere repeats work, never skips it: a bucket is rebuilt
//! whole and the table keeps the newest build. Edits hold the pass lock
//! while they mark and edit, so a pass sees an edit's mark and its effect
//! together.
//!
//! Readers ([`RollupView`]) take a bucket from a rollup only where no row
//! may be missing from it: the downsampler keeps, in memory, the span of
//! the rows each table was given since a pass took its last span (the
//! flusher reports every insert before and after it is made) and of the
//! edits marked since; readers read the rows over those spans. After a
//! restart nothing is known until a table's first pass (which finds every
//! row the rollups lack by block number): until then readers read rows,
//! where rows are kept. The cuts are read back when the ingestor opens.
//!
//! In the `clickhouse` storage mode the same passes run on each shard,
//! by one node at a time, and readers learn from the shards what they
//! may read ([`cluster`]).
//!
//! The rooms, each importing only those below it: [`state`] (the shared
//! data), [`migrate`] (planning a move), [`store`] (the storage mode as
//! the stores a pass runs on), [`registry`], [`cluster`] (leases and what
//! shards hold), [`policy`] (which tables, at which levels),
//! [`downsampler`] (what is known, by who locks it), then the jobs:
//! [`view`] (readers), [`marks`] (edits), [`learn`], [`removal`],
//! [`moves`], [`pass`], [`setting`].

mod cluster;
mod downsampler;
mod learn;
mod marks;
mod migrate;
mod moves;
mod pass;
mod policy;
mod registry;
mod removal;
mod setting;
mod state;
mod store;
mod view;

pub(crate) use downsampler::{run, Downsampler};
pub use policy::DownsamplingSetting;
pub use view::{RollupSplit, RollupView};
