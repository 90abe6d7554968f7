//! What the cache answers, as the public API names it: a series' newest
//! values ([`LastSeries`], [`LastValue`], [`LastField`]), a series the
//! index selected ([`IndexedSeries`]) and recent samples
//! ([`RecentSamples`]).

/// One cached series: its id, tags sorted by key, and the newest value of
/// each field.
#[derive(Debug, Clone, PartialEq)]
pub struct LastSeries {
    /// The series' id (see [`series`](crate::layout::series)).
    pub series_id: u64,
    /// Tags, sorted by key.
    pub tags: Vec<(String, String)>,
    /// The newest value of each field the series has, sorted by field name.
    pub fields: Vec<(String, LastValue)>,
}

/// A series the index selected: its id, tags sorted by key, and the times
/// of its first and newest value of the field asked about.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexedSeries {
    /// The series' id.
    pub series_id: u64,
    /// Tags, sorted by key.
    pub tags: Vec<(String, String)>,
    /// Its first value's time, ns (as far back as the engine held on open,
    /// or the last edit: rows dropped by retention since may make it
    /// earlier than the first stored now).
    pub first_ns: i64,
    /// Its newest value's time, ns.
    pub last_ns: i64,
}

/// Recent samples of one field of some series, from memory: every
/// sample of those series from `from_ns` on (up to the end asked for).
#[derive(Debug, Clone, PartialEq)]
pub struct RecentSamples<S = Vec<(i64, f64)>> {
    /// Where they start (ns): the start asked for, or later when memory
    /// does not reach back so far (the rest is the engine's to answer).
    pub from_ns: i64,
    /// Each series' samples (time, value), in the order asked for: time in
    /// the unit asked for (ns unless [`Ingestor::recent_compressed`]
    /// asked for another), one sample per time; decoded, or compressed
    /// ([`CompressedSamples`](crate::CompressedSamples)).
    ///
    /// [`Ingestor::recent_compressed`]: crate::Ingestor::recent_compressed
    pub samples: Vec<S>,
    /// Whether each sample is one row of the table, as a count or a sum
    /// over the engine's rows sees them: false when a point in the range
    /// was written twice into a table that keeps every row (the `append`
    /// duplicate policy), of which memory keeps the later write only.
    pub one_row_each: bool,
}

/// The newest value of one field of one series.
#[derive(Debug, Clone, PartialEq)]
pub struct LastValue {
    /// Its time, in nanoseconds since the epoch.
    pub time_ns: i64,
    /// The value.
    pub value: LastField,
}

/// A field value, typed like its field.
#[derive(Debug, Clone, PartialEq)]
pub enum LastField {
    /// A float field's value.
    Float(f64),
    /// An integer field's value.
    Integer(i64),
    /// An unsigned field's value.
    UInteger(u64),
    /// A string field's value.
    String(String),
    /// A boolean field's value.
    Boolean(bool),
}
