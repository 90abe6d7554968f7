//! What the payload tests share: a decoded table written out as text, one
//! line for the table (measurement, whether its newest point wins), one per
//! series (its tags, its row count) and one per column (name, Arrow type,
//! values), so that an expected table reads as what will be stored.

use arrow::util::display::{ArrayFormatter, FormatOptions};
use chingest_codecs::Table;

/// `table` as text: `measurement` (and `newest wins`), `series k=v,… ×
/// rows` per series, then `name: type = [values]` per column, NULL as
/// `null`.
fn text(table: &Table) -> Vec<String> {
    let newest_wins = if table.newest_wins {
        " newest wins"
    } else {
        ""
    };
    let mut lines = vec![format!("{}{newest_wins}", table.measurement)];
    let mut tags = table.tags.iter();
    for &(count, rows) in &table.series {
        let pairs: Vec<String> = tags
            .by_ref()
            .take(count)
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        lines.push(format!("series {} × {rows}", pairs.join(",")));
    }
    assert!(tags.next().is_none(), "tags past the last series");
    let options = FormatOptions::default().with_null("null");
    let schema = table.batch.schema();
    for (field, column) in schema.fields().iter().zip(table.batch.columns()) {
        let formatter = ArrayFormatter::try_new(column, &options).expect("a printable column");
        let values: Vec<String> = (0..column.len())
            .map(|row| formatter.value(row).to_string())
            .collect();
        lines.push(format!(
            "{}: {} = [{}]",
            field.name(),
            field.data_type(),
            values.join(", ")
        ));
    }
    lines
}

/// Checks that `tables` are `expected`, in order, each as [`text`] writes it.
pub(crate) fn check(tables: &[Table], expected: &[&[&str]]) {
    let got: Vec<Vec<String>> = tables.iter().map(text).collect();
    assert_eq!(got, expected);
}
