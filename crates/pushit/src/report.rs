//! Result rows: a table on the terminal, in the seed's columns, or one JSON
//! object per row for machines.

use serde_json::{Map, Value};

/// How a column's value is printed on the terminal (JSON keeps raw numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// As is.
    Text,
    /// An integer with thousands separators.
    Count,
    /// A ratio, `1.23×`.
    Times,
    /// A fraction as a percentage, `28%`.
    Percent,
    /// Bytes as MiB.
    Mib,
    /// Seconds, `2.221`.
    Seconds,
    /// Milliseconds, `12.3 ms`.
    Millis,
    /// A fraction with two decimals, `0.65`.
    Ratio,
    /// `true`/`false` as `yes`/`no`.
    YesNo,
}

/// One column of the terminal table.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    /// The header.
    pub title: &'static str,
    /// The key in each row's JSON object.
    pub key: &'static str,
    /// How to print it.
    pub format: Format,
}

/// Shorthand for a [`Column`].
pub const fn column(title: &'static str, key: &'static str, format: Format) -> Column {
    Column { title, key, format }
}

/// The rows of one mode. JSON rows are printed as they are pushed, so a
/// long sweep shows its results as it goes; the terminal table is printed
/// by [`Report::finish`].
#[derive(Debug)]
pub struct Report {
    mode: &'static str,
    columns: Vec<Column>,
    rows: Vec<Map<String, Value>>,
    target: Option<f64>,
    json: bool,
}

impl Report {
    /// A report for `mode`. With a `target` (rows/s), each row gets
    /// `meets_target` and a `≥ target` column.
    pub fn new(
        mode: &'static str,
        mut columns: Vec<Column>,
        target: Option<f64>,
        json: bool,
    ) -> Report {
        if target.is_some() {
            columns.push(column("≥ target", "meets_target", Format::YesNo));
        }
        Report {
            mode,
            columns,
            rows: Vec::new(),
            target,
            json,
        }
    }

    /// Adds a result row (a JSON object). `mode` is added, and
    /// `meets_target` when a target is set and the row has `rows_per_s`.
    pub fn push(&mut self, row: Value) {
        let Value::Object(fields) = row else {
            panic!("a report row is a JSON object");
        };
        let mut object = Map::new();
        object.insert("mode".into(), self.mode.into());
        object.extend(fields);
        if let (Some(target), Some(rate)) = (
            self.target,
            object.get("rows_per_s").and_then(Value::as_f64),
        ) {
            object.insert("meets_target".into(), (rate >= target).into());
        }
        if self.json {
            println!("{}", Value::Object(object.clone()));
        }
        self.rows.push(object);
    }

    /// Prints a row that is not part of the table: a JSON object in JSON
    /// mode, `label: value` lines otherwise.
    pub fn summary(&self, summary: Value) {
        let Value::Object(fields) = summary else {
            panic!("a summary is a JSON object");
        };
        if self.json {
            let mut object = Map::new();
            object.insert("mode".into(), self.mode.into());
            object.insert("summary".into(), true.into());
            object.extend(fields);
            println!("{}", Value::Object(object));
        } else {
            for (key, value) in fields {
                println!("{key}: {}", plain(&value));
            }
        }
    }

    /// The rows pushed so far.
    pub fn rows(&self) -> &[Map<String, Value>] {
        &self.rows
    }

    /// Prints the terminal table (nothing in JSON mode).
    pub fn finish(&self) {
        if self.json {
            return;
        }
        let cells: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|row| {
                self.columns
                    .iter()
                    .map(|c| {
                        row.get(c.key)
                            .map_or_else(String::new, |v| format_value(v, c.format))
                    })
                    .collect()
            })
            .collect();
        let widths: Vec<usize> = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| {
                cells
                    .iter()
                    .map(|row| row[i].chars().count())
                    .chain([c.title.chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |values: Vec<&str>| {
            let padded: Vec<String> = values
                .iter()
                .zip(&widths)
                .map(|(v, w)| format!("{v}{}", " ".repeat(w - v.chars().count())))
                .collect();
            println!("| {} |", padded.join(" | "));
        };
        line(self.columns.iter().map(|c| c.title).collect());
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        line(rule.iter().map(String::as_str).collect());
        for row in &cells {
            line(row.iter().map(String::as_str).collect());
        }
    }
}

fn plain(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        // Nothing to say (a ratio a row has not): an empty cell.
        Value::Null => String::new(),
        Value::Number(n) if n.is_f64() => format!("{:.3}", n.as_f64().unwrap_or_default()),
        other => other.to_string(),
    }
}

fn format_value(value: &Value, format: Format) -> String {
    let number = value.as_f64();
    match (format, number) {
        (Format::Count, Some(n)) => thousands(n.round() as u64),
        (Format::Times, Some(n)) => format!("{n:.2}×"),
        (Format::Percent, Some(n)) => format!("{:.0}%", n * 100.0),
        (Format::Mib, Some(n)) => format!("{:.1} MiB", n / (1 << 20) as f64),
        (Format::Seconds, Some(n)) => format!("{n:.3}"),
        (Format::Millis, Some(n)) => format!("{n:.1} ms"),
        (Format::Ratio, Some(n)) => format!("{n:.2}"),
        (Format::YesNo, _) => match value.as_bool() {
            Some(true) => "yes".into(),
            Some(false) => "no".into(),
            None => String::new(),
        },
        _ => plain(value),
    }
}

/// `1234567` as `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(26_419_637), "26,419,637");
    }

    #[test]
    fn target_marks_rows() {
        let mut report = Report::new(
            "batch",
            vec![column("rows/s", "rows_per_s", Format::Count)],
            Some(1e6),
            true,
        );
        report.push(serde_json::json!({"rows_per_s": 2e6}));
        report.push(serde_json::json!({"rows_per_s": 5e5}));
        let marks: Vec<_> = report
            .rows()
            .iter()
            .map(|r| r["meets_target"].clone())
            .collect();
        assert_eq!(marks, [Value::Bool(true), Value::Bool(false)]);
        assert_eq!(report.rows()[0]["mode"], "batch");
    }

    #[test]
    fn formats() {
        assert_eq!(format_value(&0.283.into(), Format::Percent), "28%");
        assert_eq!(format_value(&4.58.into(), Format::Times), "4.58×");
        assert_eq!(
            format_value(&(16_043_008.0).into(), Format::Mib),
            "15.3 MiB"
        );
        assert_eq!(format_value(&true.into(), Format::YesNo), "yes");
    }
}
