//! What the protocols that decode straight into Arrow share: a [`Table`]
//! (one measurement's rows, series after series, each series' tags given
//! once), the [`SeriesTags`] builder of those tags, and [`metadata_table`],
//! a protocol's metric metadata as points.

use std::borrow::Cow;
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, Int64Builder, RecordBatch, StringBuilder};

use crate::error::{Error, Result};

/// A tag: its name and value.
pub type Tag<'a> = (&'a str, Cow<'a, str>);

/// One measurement's rows, series after series, and each series' tags.
#[derive(Debug)]
pub struct Table<'a> {
    /// The measurement.
    pub measurement: &'static str,
    /// The rows: `time`, then the fields.
    pub batch: RecordBatch,
    /// Every series' tags (name, value), series after series; a series
    /// lacks a tag whose value is empty.
    pub tags: Vec<Tag<'a>>,
    /// Per series: how many of the next `tags` are its, and how many of
    /// the batch's next rows.
    pub series: Vec<(usize, usize)>,
    /// Whether a point replaces the one stored for its series and time
    /// (the `last` duplicate policy): true for metric metadata, which
    /// senders repeat every minute and in retries.
    pub newest_wins: bool,
}

impl<'a> Table<'a> {
    /// A table of `time` (ns) and `fields`, in that order, whose series
    /// are `series` (see [`Table::series`]) of `tags`.
    pub(crate) fn new(
        measurement: &'static str,
        mut times: Int64Builder,
        tags: Vec<Tag<'a>>,
        series: Vec<(usize, usize)>,
        fields: Vec<(&str, ArrayRef)>,
    ) -> Result<Table<'a>> {
        let mut columns: Vec<(&str, ArrayRef)> = vec![("time", Arc::new(times.finish()))];
        columns.extend(fields);
        let batch = RecordBatch::try_from_iter(columns)?;
        Ok(Table {
            measurement,
            batch,
            tags,
            series,
            newest_wins: false,
        })
    }
}

/// A protocol's metric metadata as points of `measurement`: one per metric
/// (`rows`: its name, then its values of `fields`), the name in the tag
/// `tag`, every point at time 0 — so that, the table being
/// [`Table::newest_wins`], the newest metadata of a metric replaces the
/// older.
pub(crate) fn metadata_table<'r, const N: usize>(
    measurement: &'static str,
    tag: &'static str,
    fields: [&str; N],
    rows: impl IntoIterator<Item = (&'r str, [&'r str; N])>,
) -> Result<Table<'r>> {
    let mut tags = Vec::new();
    let mut values: [StringBuilder; N] = std::array::from_fn(|_| StringBuilder::new());
    for (name, row) in rows {
        tags.push((tag, Cow::Borrowed(name)));
        for (builder, value) in values.iter_mut().zip(row) {
            builder.append_value(value);
        }
    }
    let count = tags.len();
    let mut columns: Vec<(&str, ArrayRef)> =
        vec![("time", Arc::new(Int64Array::from(vec![0; count])))];
    for (field, mut builder) in fields.into_iter().zip(values) {
        columns.push((field, Arc::new(builder.finish())));
    }
    Ok(Table {
        measurement,
        batch: RecordBatch::try_from_iter(columns)?,
        tags,
        series: vec![(1, 1); count],
        newest_wins: true,
    })
}

/// The tags of a table's series, series after series, in the order their
/// rows are added. A tag named like one of the table's columns is refused.
pub(crate) struct SeriesTags<'a, 'r> {
    tags: Vec<Tag<'a>>,
    series: Vec<(usize, usize)>,
    /// The table's column names.
    reserved: &'r [&'r str],
}

impl<'a, 'r> SeriesTags<'a, 'r> {
    /// Tags of a table whose columns are `reserved`.
    pub(crate) fn new(reserved: &'r [&'r str]) -> SeriesTags<'a, 'r> {
        SeriesTags::with_capacity(reserved, 0, 0)
    }

    /// Tags of a table whose columns are `reserved`, with room for
    /// `series` series of `tags` tags in all.
    pub(crate) fn with_capacity(
        reserved: &'r [&'r str],
        series: usize,
        tags: usize,
    ) -> SeriesTags<'a, 'r> {
        SeriesTags {
            tags: Vec::with_capacity(tags),
            series: Vec::with_capacity(series),
            reserved,
        }
    }

    /// Adds a series of `rows` rows carrying `tags`.
    pub(crate) fn push(
        &mut self,
        tags: impl IntoIterator<Item = Tag<'a>>,
        rows: usize,
    ) -> Result<()> {
        let start = self.tags.len();
        self.tags.extend(tags);
        if let Some((bad, _)) = self.tags[start..]
            .iter()
            .find(|(name, _)| self.reserved.contains(name))
        {
            return Err(Error::Invalid(format!(
                "label name {bad:?} is not supported: it names a stored column"
            )));
        }
        self.series.push((self.tags.len() - start, rows));
        Ok(())
    }

    /// The tags, and per series its tag and row counts ([`Table::new`]).
    pub(crate) fn finish(self) -> (Vec<Tag<'a>>, Vec<(usize, usize)>) {
        (self.tags, self.series)
    }
}
