//! Series and samples out of the engine: label matchers pushed down to SQL
//! over a database's series table and fact tables (read-only connections,
//! the query limits), checked again in memory, the answer bounded by
//! [`Limits`]. What PromQL, the series and label lookups and remote read
//! all read.
//!
//! Bottom to top, each importing only those before it: `source` (where a
//! request reads, the engine's statements), `matcher` (label matchers),
//! `candidate` (which fields a metric may be and their tables), `series`
//! (which series the matchers select, and their labels), `thinning`
//! (rollups read in place of samples), `samples` (the series' samples from
//! memory and the engine), `remote_write_extras` (exemplars, metadata,
//! time bounds).

mod candidate;
mod matcher;
mod remote_write_extras;
mod samples;
mod series;
mod source;
mod thinning;

pub use matcher::{LabelMatcher, MatchKind};
pub use remote_write_extras::{Exemplar, Metadata};
pub use source::{Limits, Source};
pub(crate) use thinning::Thinning;
