//! What a rebuild read from the engine ([`EngineLast`]): the series'
//! tags, each field's first time and newest value, and the recent
//! samples, to merge into a table's cache.

use crate::last_value::answers::LastField;
use crate::last_value::recent::Sample;
use crate::layout::schema::FieldType;

/// A series' tags, as the series table holds them.
pub(super) type SeriesTags = (u64, Vec<(String, String)>);

/// A series' first time and newest non-NULL (time, value) per field, as
/// the engine holds them.
pub(super) type SeriesNewest = (u64, Vec<Option<(i64, i64, LastField)>>);

/// What a rebuild read from the engine.
pub(super) struct EngineLast {
    /// Series of the measurement and their tags.
    pub(super) tags: Vec<SeriesTags>,
    /// The table's cached fields.
    pub(super) fields: Vec<(String, FieldType)>,
    /// Per series, each field's first time and newest non-NULL (time,
    /// value).
    pub(super) values: Vec<SeriesNewest>,
    /// Where the recent samples were read from (ns).
    pub(super) recent_from: i64,
    /// The recent samples, per series and field.
    pub(super) recent: Vec<EngineSamples>,
}

/// One series' recent samples of one field, read from the engine.
#[derive(Debug)]
pub(super) struct EngineSamples {
    pub(super) series: u64,
    /// Index in [`EngineLast::fields`].
    pub(super) field: usize,
    /// In time order, one per time (the row inserted last).
    pub(super) samples: Vec<Sample>,
    /// The newest time the engine held two rows at ([`i64::MIN`]: none).
    pub(super) repeated: i64,
}
