//! What the protocols that decode straight into Arrow share: a [`Table`]
//! (one measurement's batch and its tag columns), the [`TagColumns`]
//! builder that turns per-row tag lists into dictionary-encoded columns,
//! and [`metadata_table`], a protocol's metric metadata as points.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, Int64Array, Int64Builder, RecordBatch, StringBuilder, StringDictionaryBuilder,
};
use arrow::datatypes::Int32Type;

use crate::error::{Error, Result};

/// One measurement's batch and its tag columns.
#[derive(Debug)]
pub struct Table {
    /// The measurement.
    pub measurement: &'static str,
    /// The rows: `time`, the tag columns, fields in the rest.
    pub batch: RecordBatch,
    /// The names of the tag columns.
    pub tags: Vec<String>,
    /// Whether a point replaces the one stored for its series and time
    /// (the `last` duplicate policy): true for metric metadata, which
    /// senders repeat every minute and in retries.
    pub newest_wins: bool,
}

impl Table {
    /// A table of `time` (ns), the tag columns and `fields`, in that order.
    pub(crate) fn new(
        measurement: &'static str,
        mut times: Int64Builder,
        tags: TagColumns,
        fields: Vec<(&str, ArrayRef)>,
    ) -> Result<Table> {
        let mut columns: Vec<(String, ArrayRef)> = vec![("time".into(), Arc::new(times.finish()))];
        let tags = tags.finish(&mut columns);
        columns.extend(fields.into_iter().map(|(n, a)| (n.to_owned(), a)));
        let batch = RecordBatch::try_from_iter(columns)?;
        Ok(Table {
            measurement,
            batch,
            tags,
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
    tag: &str,
    fields: [&str; N],
    rows: impl IntoIterator<Item = (&'r str, [&'r str; N])>,
) -> Result<Table> {
    let mut names = StringDictionaryBuilder::<Int32Type>::new();
    let mut values: [StringBuilder; N] = std::array::from_fn(|_| StringBuilder::new());
    let mut count = 0;
    for (name, row) in rows {
        names.append_value(name);
        for (builder, value) in values.iter_mut().zip(row) {
            builder.append_value(value);
        }
        count += 1;
    }
    let mut columns: Vec<(&str, ArrayRef)> = vec![
        ("time", Arc::new(Int64Array::from(vec![0; count]))),
        (tag, Arc::new(names.finish())),
    ];
    for (field, mut builder) in fields.into_iter().zip(values) {
        columns.push((field, Arc::new(builder.finish())));
    }
    Ok(Table {
        measurement,
        batch: RecordBatch::try_from_iter(columns)?,
        tags: vec![tag.to_owned()],
        newest_wins: true,
    })
}

/// One dictionary-encoded string column per tag name, filled row by row
/// from each row's (name, value) list. The names are collected first (a
/// batch's columns are fixed), so a row lacking a tag stores NULL.
pub(crate) struct TagColumns {
    /// Sorted: a row's tags find their column by binary search, cheaper
    /// than hashing short strings.
    names: Vec<String>,
    builders: Vec<StringDictionaryBuilder<Int32Type>>,
    /// The values of the row being appended (None: it lacks the tag).
    row: Vec<Option<usize>>,
}

impl TagColumns {
    /// Columns for every tag name in `names`; a name in `reserved` (the
    /// measurement's other columns) is refused.
    pub(crate) fn new<'n>(
        names: impl IntoIterator<Item = &'n str>,
        reserved: &[&str],
    ) -> Result<TagColumns> {
        // Distinct names are few and every series repeats them: a sorted
        // list searched per name is cheaper than a tree or a hash.
        let names: Vec<&str> = names.into_iter().fold(Vec::new(), |mut distinct, name| {
            if let Err(at) = distinct.binary_search(&name) {
                distinct.insert(at, name);
            }
            distinct
        });
        if let Some(bad) = names.iter().find(|n| reserved.contains(n)) {
            return Err(Error::Invalid(format!(
                "label name {bad:?} is not supported: it names a stored column"
            )));
        }
        Ok(TagColumns {
            builders: names
                .iter()
                .map(|_| StringDictionaryBuilder::new())
                .collect(),
            row: vec![None; names.len()],
            names: names.into_iter().map(str::to_owned).collect(),
        })
    }

    /// Appends `rows` rows carrying `tags` (each name one of the columns').
    pub(crate) fn append(&mut self, tags: &[(&str, &str)], rows: usize) {
        self.row.iter_mut().for_each(|v| *v = None);
        for (i, (name, _)) in tags.iter().enumerate() {
            let column = self
                .names
                .binary_search_by(|n| n.as_str().cmp(name))
                .expect("the columns cover every tag name");
            self.row[column] = Some(i);
        }
        for (builder, value) in self.builders.iter_mut().zip(&self.row) {
            let value = value.map(|i| tags[i].1);
            for _ in 0..rows {
                builder.append_option(value);
            }
        }
    }

    /// Moves the columns into `columns`; returns the tag names.
    fn finish(self, columns: &mut Vec<(String, ArrayRef)>) -> Vec<String> {
        for (name, mut builder) in self.names.iter().zip(self.builders) {
            columns.push((name.clone(), Arc::new(builder.finish())));
        }
        self.names
    }
}
